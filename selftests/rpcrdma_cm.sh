#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# rpcrdma_cm selftests: kselftest-style, KTAP output, run as root inside a guest
# of the project's test kernel (scripts/selftest boots it). Each test is a shell
# function; TESTS="name ..." runs a subset (set-up tests they need included).
# A test that lacks what it needs fails: nothing is skipped.

set -u
HERE=$(cd "$(dirname "$0")" && pwd)
KSRC=${KSRC:?KSRC must name the kernel source tree (for ktap_helpers.sh)}
# shellcheck source=/dev/null
. "$KSRC/tools/testing/selftests/kselftest/ktap_helpers.sh"
. "$HERE/lib.sh"

ALL_TESTS="
	rxe_on_dummy
	module_load_with_selftest
	selftest_vectors_pass_in_kernel
	debugfs_stats_format
	module_parameters_visible
	module_unload_removes_debugfs
	module_reload_without_selftest
	dmesg_clean
"

rxe_on_dummy() {
	ip link add dummy0 type dummy 2>/dev/null
	ip link set dummy0 up || return 1
	ip addr add "$ADDR/24" dev dummy0 2>/dev/null
	rdma link show rxe0/1 >/dev/null 2>&1 || rdma link add rxe0 type rxe netdev dummy0 || return 1
	local state
	state=$(rdma link show rxe0/1)
	ktap_print_msg "$state"
	[[ "$state" == *"state ACTIVE"* ]] || fail "rxe0 not ACTIVE"
}

module_load_with_selftest() {
	[ -r "$KO" ] || { fail "$KO missing: run make module"; return 1; }
	diag insmod "$KO" selftest=1 || { fail "insmod failed"; diag klog; return 1; }
	module_loaded || { fail "/sys/module/rpcrdma_cm missing"; return 1; }
	klog | grep -q 'rpcrdma_cm: loaded' || fail "no 'loaded' message"
}

selftest_vectors_pass_in_kernel() {
	# Every vector of the shared table has exactly one name line.
	local expected passed failed
	expected=$(grep -c '^ *name: "' "$TOP/rust/proto/vectors.rs")
	passed=$(stat selftest_passed) || { fail "no selftest_passed counter"; return 1; }
	failed=$(stat selftest_failed) || { fail "no selftest_failed counter"; return 1; }
	ktap_print_msg "vectors: $expected, passed in kernel: $passed, failed: $failed"
	klog | grep -q "rpcrdma_cm: selftest: $passed passed, 0 failed" || fail "no selftest summary in dmesg"
	[ "$expected" -gt 0 ] && [ "$passed" = "$expected" ] && [ "$failed" = 0 ]
}

debugfs_stats_format() {
	[ -r "$DBG/stats" ] || { fail "$DBG/stats not readable"; return 1; }
	local bad
	bad=$(grep -cvE '^[a-z0-9_]+ [0-9]+$' "$DBG/stats")
	diag cat "$DBG/stats"
	[ "$(wc -l <"$DBG/stats")" -gt 0 ] && [ "$bad" = 0 ] || fail "$bad malformed lines"
}

module_parameters_visible() {
	local v
	v=$(cat /sys/module/rpcrdma_cm/parameters/selftest) || { fail "no selftest parameter"; return 1; }
	[ "$v" = Y ] || fail "selftest parameter reads '$v'"
}

module_unload_removes_debugfs() {
	diag rmmod rpcrdma_cm || { fail "rmmod failed"; return 1; }
	! module_loaded || { fail "still loaded"; return 1; }
	[ ! -e "$DBG" ] || { fail "$DBG left behind"; return 1; }
	klog | grep -q 'rpcrdma_cm: unloaded' || fail "no 'unloaded' message"
}

module_reload_without_selftest() {
	# A second load proves the first unload released the debugfs name.
	diag insmod "$KO" || { fail "second insmod failed"; return 1; }
	local passed
	passed=$(stat selftest_passed) || { fail "no stats after reload"; return 1; }
	[ "$passed" = 0 ] || { fail "selftest ran without selftest=1"; return 1; }
	diag rmmod rpcrdma_cm || fail "second rmmod failed"
}

dmesg_clean() {
	local bad
	bad=$(klog | grep -E 'BUG:|WARNING:|Oops|refcount_t|general protection|Call Trace|UBSAN|KASAN|kmemleak|rust_panic|panicked')
	[ -z "$bad" ] && return 0
	ktap_print_msg "kernel log has:"
	echo "$bad" | sed 's/^/# /'
	return 1
}

main() {
	local tests=${TESTS:-$ALL_TESTS} t
	ensure_debugfs
	echo "rpcrdma_cm-selftests-start" >/dev/kmsg
	ktap_print_header
	ktap_set_plan "$(echo $tests | wc -w)"
	for t in $tests; do
		if ! declare -F "$t" >/dev/null; then
			ktap_test_fail "$t (no such test)"
			continue
		fi
		ktap_test_result "$t" "$t"
	done
	unload_module >/dev/null 2>&1
	ktap_finished
}

main "$@"
