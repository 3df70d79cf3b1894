#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# rpcrdma_cm selftests: kselftest-style, KTAP output, run as root inside a guest
# of the project's test kernel (scripts/selftest boots it). Each test is a shell
# function; TESTS="name ..." runs a subset, in any order: every test starts
# from the same known state (main() below) and sets up the rest itself. A
# test that lacks what it needs fails: nothing is skipped.

set -u
HERE=$(cd "$(dirname "$0")" && pwd)
KSRC=${KSRC:?KSRC must name the kernel source tree (for ktap_helpers.sh)}
# shellcheck source=/dev/null
. "$KSRC/tools/testing/selftests/kselftest/ktap_helpers.sh"
. "$HERE/lib.sh"

# Tests of connection and module lifetimes, kept in a file of their own; they
# run right after nfsd_over_ipv6_and_device_removal.
LIFETIME_TESTS=""
# shellcheck source=/dev/null
[ -r "$HERE/lifetimes.sh" ] && . "$HERE/lifetimes.sh"

ALL_TESTS="
	rxe_on_dummy
	module_load_with_selftest
	selftest_vectors_pass_in_kernel
	kunit_vectors_pass
	debugfs_stats_format
	module_parameters_visible
	module_unload_removes_debugfs
	debugfs_open_file_pins_module
	module_reload_without_selftest
	params_refuse_bad_values
	rust_client_server_size_matrix
	rust_client_server_remote_invalidation_matrix
	rust_client_server_asymmetric_sizes
	rust_client_rejected_without_listener
	rust_client_to_linux_nfsd
	rust_client_rpcs_to_linux_nfsd
	ping_through_sunrpc_over_the_rdma_class
	rust_client_nfs_read_write_readdir
	rust_client_nfs_threshold_edges
	rust_client_nfs_remote_invalidation
	concurrent_calls_share_credits
	sends_complete_in_batches
	rust_echo_inline_up_to_thresholds
	rust_server_rpc_errors
	rust_echo_every_chunk_type
	rust_remote_invalidation_with_chunks
	linux_nfs_client_to_rust_server
	linux_nfs_client_rpcs_to_rust_server
	rping_client_to_rust_server
	rust_client_to_rping_server
	legacy_switch_with_linux_peers
	unload_with_live_connections
	device_removal_with_live_connections
	hostile_private_data_from_clients
	hostile_private_data_from_servers
	malformed_headers_from_a_client
	malformed_replies_from_a_server
	peers_that_reject_vanish_or_never_answer
	churn_connects_and_unload
	unload_waits_for_closing_handler
	unload_stress_with_self_connections
	connection_flood_is_capped
	idle_server_connections_are_closed
	abandoned_calls_keep_their_credit
	device_removal_while_listener_starts
	remote_invalidation_needs_device_support
	tracepoints_show_negotiation_and_errors
	svc_class_conflicts_with_rpcrdma
	nfsd_over_rust_transport
	nfs_workloads_over_rust_transport
	delegation_recall_over_backchannel
	c_client_sees_remote_invalidation
	nfsd_data_moves_without_copies
	nfsd_reply_chunks_without_copies
	nfsd_reply_without_memory_is_sent_again
	rust_client_to_nfsd_over_rust_transport
	malformed_headers_to_nfsd_over_rust_transport
	nfsd_over_ipv6_and_device_removal
	$LIFETIME_TESTS
	rmmod_refused_while_nfsd_uses_the_class
	nfs_client_over_rust_transport
	nfs_client_workloads_over_rust_transport
	mount_reconnects_with_new_thresholds
	mount_reads_odd_server_private_data
	dmesg_clean
"

# What in the kernel log is a report (dmesg_clean).
DMESG_BAD='BUG:|WARNING:|Oops|refcount_t|general protection|Call Trace|UBSAN|KASAN|kmemleak|rust_panic|panicked|still waits for'

# The tests, by area (each file holds its tests' functions and helpers).
for area in module rfc8797 rpc robustness nfsd mount; do
	# shellcheck source=/dev/null
	. "$HERE/$area.sh"
done

# dmesg_clean: no report in the kernel log of this run. A run can take more
# than one boot (main() stops a boot when a test leaves a state it cannot
# restore, and scripts/selftest boots a fresh guest for the rest; it does so
# too when a guest dies): every boot saves its own log since its start
# marker in the results directory after each test (save_klog), and this
# test, in the last boot, scans those of the earlier boots as well as its
# own. What a boot logged during the test it died in is lost with it, but
# that test has failed already.
dmesg_clean() {
	local bad f b ok=0
	if [ -n "$RESULTS" ]; then
		for f in "$RESULTS"/selftests.boot*.dmesg; do
			[ -e "$f" ] || continue
			b=${f##*/selftests.boot}
			b=${b%.dmesg}
			[ "$b" = "$BOOT" ] && continue
			bad=$(grep -E "$DMESG_BAD" "$f") || continue
			ktap_print_msg "kernel log of boot $b has:"
			echo "$bad" | sed 's/^/# /'
			ok=1
		done
	fi
	bad=$(klog | grep -E "$DMESG_BAD")
	[ -z "$bad" ] && return $ok
	ktap_print_msg "kernel log$([ "$BOOT" = 1 ] || echo " of boot $BOOT") has:"
	echo "$bad" | sed 's/^/# /'
	return 1
}

# kmemleak_after_all_tests (debug kernels only, run before dmesg_clean):
# unload the module, wait until everything allocated so far is old enough to
# be reported, scan once so nothing is new any more, then check.
kmemleak_after_all_tests() {
	# The runner stopped nfsd after the last test; as a precaution.
	rpc.nfsd 0 2>/dev/null
	rmmod_within 10 rpcrdma_cm
	! module_loaded || { fail "rpcrdma_cm still loaded"; return 1; }
	sleep 6
	echo scan >"$KMEMLEAK" || return 1
	kmemleak_clean
}

# kmemleak_finds_a_leak: load the kernel's kmemleak-test sample
# (CONFIG_SAMPLE_KMEMLEAK), which leaks on purpose when it loads, and check
# that scans report what it leaked (two scans, as in kmemleak_after_all_tests),
# so a clean scan after a test means something. The module stays loaded (its
# list keeps the rest referenced); the reported objects are cleared; the
# sample's own log lines and the scan's "new suspected memory leaks", which
# dmesg_clean would otherwise count, are bracketed by markers that klog
# leaves out.
kmemleak_finds_a_leak() {
	local ko=$KSRC/samples/kmemleak/kmemleak-test.ko r
	[ -r "$ko" ] || { fail "no $ko (CONFIG_SAMPLE_KMEMLEAK)"; return 1; }
	echo "rpcrdma_cm-kmemleak-sample-start" >/dev/kmsg
	insmod "$ko" || { fail "insmod kmemleak-test"; return 1; }
	sleep 6
	echo scan >"$KMEMLEAK" || return 1
	echo scan >"$KMEMLEAK" || return 1
	r=$(cat "$KMEMLEAK")
	echo clear >"$KMEMLEAK"
	# The scan logs "kmemleak: N new suspected memory leaks" too.
	echo "rpcrdma_cm-kmemleak-sample-end" >/dev/kmsg
	if ! echo "$r" | grep -q '\[kmemleak_test\]'; then
		fail "kmemleak did not report the sample's leaks; it reported:"
		echo "$r" | head -30 | sed 's/^/# /'
		return 1
	fi
	ktap_print_msg "kmemleak reported $(echo "$r" | grep -c '^unreferenced object') objects leaked by the kmemleak-test sample"
}

# debug_kernel_checks_on (debug kernels only, run first): the checks
# `make check-debug` promises are really on in the guest, so a green run
# cannot come from a kernel that checks nothing: KASAN initialised, lockdep
# on and not switched off (debug_locks 1), kmemleak and debug objects
# present, kmalloc-64 with sanity checks, red zones and poisoning (slub_debug
# at boot), and kmemleak reporting the kmemleak-test sample's leaks.
debug_kernel_checks_on() {
	local ok=0 f
	dmesg | grep -q 'KernelAddressSanitizer initialized' || { fail "KASAN not initialized"; ok=1; }
	[ -r /proc/lockdep ] || { fail "no /proc/lockdep (PROVE_LOCKING)"; ok=1; }
	grep -q '^ *lock-classes:' /proc/lockdep_stats 2>/dev/null || { fail "no lockdep stats"; ok=1; }
	if [ "$(awk '/debug_locks:/ {print $2}' /proc/lockdep_stats 2>/dev/null)" != 1 ]; then
		fail "lockdep switched itself off (debug_locks is not 1)"
		# What turned it off, from the whole boot's log: a lockdep report,
		# or a taint that makes it unreliable.
		dmesg | grep -m1 -B2 -A30 -E 'Disabling lock debugging|possible .*(locking|deadlock|recursive)|inconsistent lock state|BUG:|WARNING:' |
			while IFS= read -r f; do ktap_print_msg "$f"; done
		ok=1
	fi
	[ -w "$KMEMLEAK" ] || { fail "no kmemleak"; ok=1; }
	[ -d /sys/kernel/debug/debug_objects ] || { fail "no debug_objects"; ok=1; }
	kmemleak_finds_a_leak || ok=1
	for f in sanity_checks red_zone poison; do
		[ "$(cat /sys/kernel/slab/kmalloc-64/$f 2>/dev/null)" = 1 ] ||
			{ fail "slub_debug: kmalloc-64 $f is not on"; ok=1; }
	done
	ktap_print_msg "KASAN, lockdep ($(awk '/lock-classes:/ {print $2}' /proc/lockdep_stats) classes), kmemleak, debug objects, slub F/Z/P on"
	return $ok
}

# ---- The runner ----------------------------------------------------------
#
# Every test runs from one known state: debugfs mounted; dummy0 up with
# 192.0.2.1/24 as its only global address and rxe0 on it ACTIVE (rxe_up);
# no NFS mount; nfsd stopped; neither rpcrdma_cm nor Linux's rpcrdma.ko
# loaded; no process a test started still running (but rpcbind and
# rpc.mountd, which nfsd needs); no trace event enabled. main() establishes
# it before a boot's first test and restores it after every test
# (known_state), so each test loads the module with the parameters it needs
# and starts nfsd itself, and any test can run alone. A test runs in a
# subshell of its own (its variables and open files end with it), with a
# guard: the watchdog's diagnostics after TEST_WATCHDOG s, the test and what
# it started killed after TEST_TIMEOUT s (it fails).
#
# A test after which the state cannot be restored (rpcrdma_cm or rpcrdma.ko
# still referenced after nfsd is stopped, the NFS mounts are gone and rmmod
# was retried for 15 s; or no rxe0 any more) fails itself, whatever its body
# said, with what holds the module; the boot then stops, because the tests
# after it could not start from the known state: the remaining tests are
# written to the results directory and scripts/selftest boots a fresh guest
# for them. The results directory (SELFTEST_RESULTS, shared with the host)
# carries the run from boot to boot:
#   selftests.plan       every test of the run, one a line (the first boot)
#   selftests.running    the test running now (empty between tests): if the
#                        guest dies, scripts/selftest fails that test
#   selftests.remaining  the tests after the one running now
#   selftests.reboot     why this boot stopped early
#   selftests.bootN.dmesg  boot N's kernel log, saved after each test
# SELFTEST_BOOT (1, 2, ...) numbers the boot, SELFTEST_FIRST the first KTAP
# test number it prints, SELFTEST_RESUME lists the tests a resumed boot runs
# (a resumed boot prints no KTAP header or plan: scripts/selftest joins the
# boots' output into one KTAP stream). Without SELFTEST_RESULTS (the script
# run by hand in a guest) a boot cannot be resumed: the tests that remain
# are reported "not ok ... not run".
#
# SELFTEST_INJECT_LEAK=NAME (for testing this runner, not the module): once
# test NAME has run, a process the runner starts keeps a debugfs file of the
# module open, which pins it, as a leaked reference would: NAME must then
# fail for the leak and the rest run in a fresh boot.

RESULTS=${SELFTEST_RESULTS:-}
BOOT=${SELFTEST_BOOT:-1}
TEST_TIMEOUT=${TEST_TIMEOUT:-1800}
TIMEOUT_NOTE=/run/rpcrdma_cm-test-timeout
# Processes that are not the tests': those running when the runner started,
# and the injected leak's holder.
declare -A KEEP_PIDS=()

# note NAME TEXT: the run's state file selftests.NAME (above).
note() {
	[ -n "$RESULTS" ] || return 0
	printf '%s\n' "$2" >"$RESULTS/selftests.$1"
}

save_klog() {
	[ -n "$RESULTS" ] || return 0
	klog >"$RESULTS/selftests.boot$BOOT.dmesg"
}

# for_user_procs FUNC: FUNC PID COMM PPID for every process but kernel
# threads (pure bash: this runs after every test).
for_user_procs() {
	local p s rest comm ppid flags
	for p in /proc/[0-9]*; do
		{ read -r s <"$p/stat"; } 2>/dev/null || continue
		comm=${s#*(}
		comm=${comm%)*}
		rest=${s##*) }
		read -r _ ppid _ _ _ _ flags _ <<<"$rest"
		# PF_KTHREAD
		(((flags & 0x200000) == 0)) || continue
		"$1" "${p#/proc/}" "$comm" "$ppid"
	done
}

keep_pid() { KEEP_PIDS[$1]=1; }

KILLED=
kill_leftover() { # PID COMM PPID
	[ -n "${KEEP_PIDS[$1]-}" ] && return 0
	[ "$1" = "$$" ] || [ "$1" = "$BASHPID" ] && return 0
	# Workers of what ran before the tests (a test's orphans are init's).
	[ "$3" != 1 ] && [ "$3" != "$$" ] && [ -n "${KEEP_PIDS[$3]-}" ] && return 0
	case $2 in rpcbind | rpc.mountd) return 0 ;; esac
	kill -KILL "$1" 2>/dev/null && KILLED+=" $1($2)"
}

# nfs_mounts: the NFS mount points, the last mounted first.
nfs_mounts() {
	local dev mnt type rest
	local -a m=()
	while read -r dev mnt type rest; do
		[ "$type" = nfs ] || [ "$type" = nfs4 ] && m=("$mnt" "${m[@]}")
	done </proc/mounts
	[ ${#m[@]} = 0 ] || printf '%s\n' "${m[@]}"
}

# unload_both SECONDS: rmmod rpcrdma.ko and rpcrdma_cm, retried for SECONDS
# (a connection or an RPC may let go of the module a little after the test).
unload_both() {
	local end=$((SECONDS + $1)) m
	while :; do
		for m in rpcrdma rpcrdma_cm; do
			[ -d /sys/module/$m ] && bounded 60 rmmod $m 2>/dev/null
		done
		[ -d /sys/module/rpcrdma ] || [ -d /sys/module/rpcrdma_cm ] || return 0
		[ "$SECONDS" -lt "$end" ] || return 1
		sleep 0.5
	done
}

# known_state: restores the known state (above), printing what it had to
# undo. Fails when it cannot; KNOWN_STATE_WHY then says what is left ("rpcrdma_cm
# referenced", ...). The NFS mounts go before nfsd stops: a mount whose server
# is still there unmounts cleanly (its dirty pages written, its NFSv4 session
# destroyed); umount -f, then -l, for the rest.
KNOWN_STATE_WHY=
known_state() {
	local m why=() left=() net
	ensure_debugfs || why+=("debugfs unmounted")
	KILLED=
	for_user_procs kill_leftover
	[ -z "$KILLED" ] || { ktap_print_msg "killed what the test left running:$KILLED"; sleep 0.2; }
	for m in $(nfs_mounts); do
		ktap_print_msg "unmounting $m, which the test left mounted"
		bounded 30 umount "$m" 2>/dev/null && continue
		bounded 15 umount -f "$m" 2>/dev/null && continue
		bounded 10 umount -l "$m" || left+=("$m")
	done
	[ ${#left[@]} = 0 ] || why+=("NFS mounts that cannot be unmounted (${left[*]})")
	if mountpoint -q /proc/fs/nfsd; then
		bounded 60 rpc.nfsd 0 >/dev/null 2>&1 || ktap_print_msg "rpc.nfsd 0 failed or hung"
	fi
	if ! unload_both 15; then
		module_loaded && why+=("rpcrdma_cm referenced (refcnt $(cat /sys/module/rpcrdma_cm/refcnt 2>/dev/null))")
		[ -d /sys/module/rpcrdma ] && why+=("rpcrdma.ko referenced")
	fi
	net=$(rxe_up) || why+=("no rxe0 on dummy0 ($net)")
	load_ko_deps || why+=("modprobe -a $KO_DEPS failed")
	[ -w /sys/kernel/tracing/events/enable ] && echo 0 >/sys/kernel/tracing/events/enable
	KNOWN_STATE_WHY=$(IFS=';'; echo "${why[*]}" | sed 's/;/; /g')
	[ ${#why[@]} = 0 ]
}

# leak_report: what holds the module, for the test that left it held.
leak_report() {
	local f d
	module_loaded && ktap_print_msg "/sys/module/rpcrdma_cm/refcnt: $(cat /sys/module/rpcrdma_cm/refcnt 2>/dev/null)"
	lsmod | grep -E '^(Module|rpcrdma)' | sed 's/^/# lsmod: /'
	# An open file of the module's debugfs directory pins it.
	find /proc/[0-9]*/fd -maxdepth 1 -lname "$DBG/*" -printf '%h %l\n' 2>/dev/null |
		sed 's|^/proc/\([0-9]*\)/fd |# open by pid \1: |'
	for f in connections listeners; do
		[ -r "$DBG/$f" ] || continue
		ktap_print_msg "$DBG/$f:"
		bounded 10 cat "$DBG/$f" | sed 's/^/#   /'
	done
	d=$(ps -eo pid,stat,wchan:32,args 2>/dev/null | awk '$2 ~ /^D/')
	[ -z "$d" ] || { ktap_print_msg "tasks in D state:"; echo "$d" | sed 's/^/#   /'; }
}

# test_guard TEST PID: the watchdog's diagnostics after TEST_WATCHDOG s (or
# TEST_TIMEOUT s, if that is less); at TEST_TIMEOUT s, the test (PID) and
# what it started are killed.
test_guard() {
	local t0=$SECONDS w=${TEST_WATCHDOG:-600} rest
	[ "$w" -le "$TEST_TIMEOUT" ] || w=$TEST_TIMEOUT
	TEST_WATCHDOG=$w watchdog "$1"
	rest=$((TEST_TIMEOUT - (SECONDS - t0)))
	[ "$rest" -le 0 ] || sleep "$rest"
	echo "$1" >"$TIMEOUT_NOTE"
	ktap_print_msg "FAIL: $1 still running after $TEST_TIMEOUT s (TEST_TIMEOUT): killed with what it started"
	kill_tree "$2"
}

# run_test TEST: the test in a subshell, under its guard; TEST_RC is its
# status (a debug kernel's kmemleak scan after it included).
TEST_RC=0
run_test() {
	local t=$1 tpid gpid
	rm -f "$TIMEOUT_NOTE"
	("$t") </dev/null &
	tpid=$!
	(test_guard "$t" "$tpid") </dev/null &
	gpid=$!
	wait "$tpid" 2>/dev/null
	TEST_RC=$?
	kill_tree "$gpid"
	wait "$gpid" 2>/dev/null
	[ -e "$TIMEOUT_NOTE" ] && TEST_RC=1
	# A debug kernel: the test fails if kmemleak finds a leak after it.
	if [ "$TEST_RC" = 0 ] && [ -w "$KMEMLEAK" ] && [ "$t" != kmemleak_after_all_tests ]; then
		kmemleak_clean || TEST_RC=1
	fi
}

# inject_leak: SELFTEST_INJECT_LEAK's holder (above).
inject_leak() {
	local pid
	module_loaded || load_module || return 1
	sleep 1000000 <"$DBG/stats" &
	pid=$!
	keep_pid "$pid"
	sleep 0.2
	ktap_print_msg "SELFTEST_INJECT_LEAK: pid $pid holds $DBG/stats open (rpcrdma_cm refcnt $(cat /sys/module/rpcrdma_cm/refcnt))"
}

# A resumed boot of a debug kernel: what booting left for kmemleak to report
# is cleared before the first test, as debug_kernel_checks_on does in the
# first boot (its scan's log line bracketed the same way: klog leaves it out).
kmemleak_boot_baseline() {
	echo "rpcrdma_cm-kmemleak-sample-start" >/dev/kmsg
	echo scan >"$KMEMLEAK" && echo scan >"$KMEMLEAK" && echo clear >"$KMEMLEAK"
	echo "rpcrdma_cm-kmemleak-sample-end" >/dev/kmsg
}

# stop_boot WHY REMAINING...: no test can start from the known state in
# this boot any more. A debug kernel scans for leaks once more (the tests
# after would have shown them; the scan's log line reaches dmesg_clean
# through the saved log); the remaining tests go to the results directory
# for a fresh boot, or, without one, are reported not run.
stop_boot() {
	local why=$1 t
	shift
	ktap_print_msg "this boot stops: $why; $# test(s) remain for a fresh guest"
	if [ -w "$KMEMLEAK" ]; then
		sleep 6
		echo scan >"$KMEMLEAK"
		kmemleak_clean || ktap_print_msg "kmemleak reported the above at the end of boot $BOOT"
	fi
	save_klog
	if [ -n "$RESULTS" ]; then
		note reboot "$why"
		return
	fi
	for t in "$@"; do
		ktap_test_fail "$t # not run: $why, and no results directory (SELFTEST_RESULTS) to resume from"
	done
}

main() {
	local tests t i rc t0
	local -a list
	ensure_debugfs
	if [ -n "${SELFTEST_RESUME:-}" ]; then
		tests=$SELFTEST_RESUME
	else
		tests=${TESTS:-$ALL_TESTS}
		# TESTS_EXCEPT: tests the kernel cannot run, left out of the
		# plan (scripts/debian-vm: the stock kernel has no KUnit).
		for t in ${TESTS_EXCEPT:-}; do
			tests=$(echo " $(echo $tests) " | sed "s/ $t / /")
		done
		if [ -w "$KMEMLEAK" ]; then
			[ -z "${TESTS:-}" ] && tests="debug_kernel_checks_on $tests"
			# The final unload is scanned too, before dmesg_clean reads the log.
			case " $(echo $tests) " in
			*" dmesg_clean "*) tests=${tests/dmesg_clean/kmemleak_after_all_tests dmesg_clean} ;;
			*) tests="$tests kmemleak_after_all_tests" ;;
			esac
		fi
	fi
	read -ra list <<<"$(echo $tests)"
	echo "rpcrdma_cm-selftests-start" >/dev/kmsg
	if [ -z "${SELFTEST_RESUME:-}" ]; then
		ktap_print_header
		ktap_set_plan "${#list[@]}"
		[ -z "${TESTS_EXCEPT:-}" ] || ktap_print_msg "not in this run's plan: $(echo $TESTS_EXCEPT)"
		note plan "$(printf '%s\n' "${list[@]}")"
	else
		KSFT_NUM_TESTS=${#list[@]}
		ktap_print_msg "boot $BOOT of this run: a fresh guest for the ${#list[@]} tests that remain"
		[ -w "$KMEMLEAK" ] && kmemleak_boot_baseline
	fi
	KTAP_TESTNO=${SELFTEST_FIRST:-1}
	for_user_procs keep_pid
	known_state || ktap_print_msg "the known state could not be set up: $KNOWN_STATE_WHY"
	local why=$KNOWN_STATE_WHY
	for ((i = 0; i < ${#list[@]}; i++)); do
		t=${list[i]}
		note running "$t"
		note remaining "$(printf '%s\n' "${list[@]:i+1}")"
		t0=$SECONDS
		if [ -n "$why" ]; then
			# Only before a boot's first test: a test leaving a state
			# that cannot be restored ends the boot (below).
			ktap_print_msg "FAIL: not run: the known state could not be set up: $why"
			rc=1
			why="the known state could not be set up before $t ($why)"
		elif ! declare -F "$t" >/dev/null; then
			ktap_print_msg "FAIL: no such test"
			rc=1
		else
			run_test "$t"
			rc=$TEST_RC
			[ "${SELFTEST_INJECT_LEAK:-}" = "$t" ] && inject_leak
			if ! known_state; then
				ktap_print_msg "FAIL: $t left $KNOWN_STATE_WHY"
				leak_report
				rc=1
				why="$t left $KNOWN_STATE_WHY"
			fi
		fi
		if [ "$rc" = 0 ]; then ktap_test_pass "$t"; else ktap_test_fail "$t"; fi
		ktap_print_msg "$t: $((SECONDS - t0)) s"
		save_klog
		note running ""
		if [ -n "$why" ]; then
			stop_boot "$why" "${list[@]:i+1}"
			break
		fi
	done
	note remaining "$([ -n "$why" ] && [ -n "$RESULTS" ] && printf '%s\n' "${list[@]:i+1}")"
	ktap_print_totals
	[ "$KTAP_CNT_FAIL" = 0 ] && [ $((KTAP_CNT_PASS + KTAP_CNT_SKIP)) = "${#list[@]}" ]
}

main "$@"
