#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# rpcrdma_cm selftests (sourced by rpcrdma_cm.sh, which runs them): the module
# itself: loading, the in-kernel vectors, parameters and debugfs.

# The network every test starts from (rxe_up, run by main() before the
# tests): rxe0 ACTIVE on dummy0, which has 192.0.2.1; and rxe0, deleted, can
# be made again from scratch, as the device-removal tests and the runner do.
rxe_on_dummy() {
	local state
	state=$(rdma link show rxe0/1)
	ktap_print_msg "$state"
	[[ "$state" == *"state ACTIVE"* ]] || { fail "rxe0 not ACTIVE"; return 1; }
	[[ "$state" == *" netdev dummy0"* ]] || { fail "rxe0 not on dummy0"; return 1; }
	ip -o -4 addr show dev dummy0 | grep -q " $ADDR/24 " || { fail "no $ADDR/24 on dummy0"; return 1; }
	diag rdma link delete rxe0 || { fail "cannot delete rxe0"; return 1; }
	! rdma link show rxe0/1 >/dev/null 2>&1 || { fail "rxe0 still there after rdma link delete"; return 1; }
	diag rxe_up || { fail "rxe0 not ACTIVE again after rdma link add"; return 1; }
	ktap_print_msg "made again: $(rdma link show rxe0/1)"
}

module_load_with_selftest() {
	[ -r "$KO" ] || { fail "$KO missing: run make module"; return 1; }
	diag insmod "$KO" $KO_ARGS selftest=1 || { fail "insmod failed"; diag klog; return 1; }
	module_loaded || { fail "/sys/module/rpcrdma_cm missing"; return 1; }
	klog | grep -q 'rpcrdma_cm: loaded' || fail "no 'loaded' message"
}

selftest_vectors_pass_in_kernel() {
	# Every vector of the shared table has exactly one name line.
	local expected passed failed
	load_module selftest=1 || return 1
	expected=$(grep -c '^ *name: "' "$TOP/rust/proto/vectors.rs")
	passed=$(stat selftest_passed) || { fail "no selftest_passed counter"; return 1; }
	failed=$(stat selftest_failed) || { fail "no selftest_failed counter"; return 1; }
	ktap_print_msg "vectors: $expected, passed in kernel: $passed, failed: $failed"
	klog | grep -q "rpcrdma_cm: selftest: $passed passed, 0 failed" || fail "no selftest summary in dmesg"
	[ "$expected" -gt 0 ] && [ "$passed" = "$expected" ] && [ "$failed" = 0 ]
}

# kunit_vectors_pass: on a kernel with KUnit (the test kernel: CONFIG_KUNIT=y),
# the module's suite rpcrdma_cm_vectors runs when it loads, with no
# parameter: both cases (one per vector group) pass, no vector is named as
# failed, and the results stay readable in KUnit's debugfs until rmmod.
kunit_vectors_pass() {
	local r=/sys/kernel/debug/kunit/rpcrdma_cm_vectors/results ok=0
	grep -q '^CONFIG_KUNIT=y' "$KSRC/.config" || { fail "the test kernel has no CONFIG_KUNIT=y"; return 1; }
	load_module || return 1
	[ -r "$r" ] || { fail "no $r"; return 1; }
	diag grep -E 'ok|vector' "$r"
	grep -qE '^ +ok 1 parse_vectors$' "$r" || { fail "parse_vectors did not pass"; ok=1; }
	grep -qE '^ +ok 2 negotiate_vectors$' "$r" || { fail "negotiate_vectors did not pass"; ok=1; }
	grep -qE '^ok 1 rpcrdma_cm_vectors$' "$r" || { fail "the suite did not pass"; ok=1; }
	! grep -qE 'not ok|vector .* failed' "$r" || { fail "a vector failed"; ok=1; }
	return $ok
}

debugfs_stats_format() {
	load_module || return 1
	[ -r "$DBG/stats" ] || { fail "$DBG/stats not readable"; return 1; }
	local bad
	bad=$(grep -cvE '^[a-z0-9_]+ [0-9]+$' "$DBG/stats")
	diag cat "$DBG/stats"
	[ "$(wc -l <"$DBG/stats")" -gt 0 ] && [ "$bad" = 0 ] || fail "$bad malformed lines"
}

module_parameters_visible() {
	local v
	load_module selftest=1 || return 1
	v=$(cat /sys/module/rpcrdma_cm/parameters/selftest) || { fail "no selftest parameter"; return 1; }
	[ "$v" = Y ] || fail "selftest parameter reads '$v'"
}

module_unload_removes_debugfs() {
	load_module || return 1
	diag rmmod rpcrdma_cm || { fail "rmmod failed"; return 1; }
	! module_loaded || { fail "still loaded"; return 1; }
	[ ! -e "$DBG" ] || { fail "$DBG left behind"; return 1; }
	klog | grep -q 'rpcrdma_cm: unloaded' || fail "no 'unloaded' message"
}

# An open file of $DBG holds a reference on the module (its file_operations'
# .owner), so rmmod is refused until it is closed: no file can be closed after
# its code is gone (rust/sys/debugfs.rs says why kernel::debugfs is not used).
debugfs_open_file_pins_module() {
	local fd line= ok=0
	load_module || return 1
	exec {fd}<"$DBG/stats" || { fail "cannot open $DBG/stats"; return 1; }
	ktap_print_msg "refcnt with $DBG/stats open: $(cat /sys/module/rpcrdma_cm/refcnt)"
	if diag rmmod rpcrdma_cm; then
		fail "rmmod succeeded while $DBG/stats was open"
		ok=1
	elif ! module_loaded; then
		fail "rmmod failed, yet the module is gone"
		ok=1
	else
		read -r line <&"$fd" || { fail "the open file reads nothing"; ok=1; }
		[[ "$line" =~ ^[a-z0-9_]+\ [0-9]+$ ]] || { fail "first line of the open file: '$line'"; ok=1; }
	fi
	exec {fd}<&-
	if module_loaded; then
		diag rmmod rpcrdma_cm || { fail "rmmod refused once the file was closed"; return 1; }
	fi
	[ ! -e "$DBG" ] || { fail "$DBG left behind"; return 1; }
	return "$ok"
}

module_reload_without_selftest() {
	# A second load proves the first unload released the debugfs name.
	load_module selftest=1 || return 1
	diag rmmod rpcrdma_cm || { fail "first rmmod failed"; return 1; }
	diag insmod "$KO" $KO_ARGS || { fail "second insmod failed"; return 1; }
	local passed
	passed=$(stat selftest_passed) || { fail "no stats after reload"; return 1; }
	[ "$passed" = 0 ] || { fail "selftest ran without selftest=1"; return 1; }
	diag rmmod rpcrdma_cm || fail "second rmmod failed"
}

params_refuse_bad_values() {
	local ok=0 v
	unload_module
	for v in "send_size=1000" "send_size=4095" "recv_size=0" "recv_size=524288" \
		"send_size=abc" "listen=192.0.2.1" "listen=host:20050" "listen=192.0.2.1:0" \
		"max_connections=0" "max_connections=65536" "max_connections_per_peer=0" \
		"idle_timeout=86401" "idle_timeout=-1" "test_teardown_delay_ms=60001"; do
		if insmod "$KO" $KO_ARGS "$v" 2>/dev/null; then
			ktap_print_msg "insmod $v was accepted"
			rmmod rpcrdma_cm
			ok=1
		elif ! klog | grep -q "rpcrdma_cm: ${v%%=*}=.* refused"; then
			ktap_print_msg "no 'refused' message for $v"
			ok=1
		fi
	done
	load_module || return 1
	for v in 1000 4095 262145 x; do
		if echo "$v" >"$PARAMS/send_size" 2>/dev/null; then
			ktap_print_msg "send_size=$v accepted at run time"
			ok=1
		fi
	done
	[ "$(cat "$PARAMS/send_size")" = 4096 ] || { ktap_print_msg "send_size changed"; ok=1; }
	for v in 0 65536 x; do
		if echo "$v" >"$PARAMS/max_connections" 2>/dev/null; then
			ktap_print_msg "max_connections=$v accepted at run time"
			ok=1
		fi
	done
	[ "$(cat "$PARAMS/max_connections")" = 256 ] || { ktap_print_msg "max_connections changed"; ok=1; }
	[ "$(cat "$PARAMS/max_connections_per_peer")" = 32 ] && [ "$(cat "$PARAMS/idle_timeout")" = 360 ] ||
		{ ktap_print_msg "defaults: max_connections_per_peer=$(cat "$PARAMS/max_connections_per_peer") idle_timeout=$(cat "$PARAMS/idle_timeout")"; ok=1; }
	for v in "connect 192.0.2.1" "connect 192.0.2.1 20050 send_size=1000" "disconnect x" "frobnicate"; do
		if echo "$v" >"$DBG/control" 2>/dev/null; then
			ktap_print_msg "control accepted '$v'"
			ok=1
		fi
	done
	return $ok
}
