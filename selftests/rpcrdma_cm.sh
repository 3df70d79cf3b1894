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

# One client<->server connection through the module's own listener. Server side
# from module parameters, client side from connect options; checks both ends
# against RFC 8797 section 4.2 and 4.1.
check_pair() { # s_send s_recv s_r c_send c_recv c_r
	local ss=$1 sr=$2 sR=$3 cs=$4 cr=$5 cR=$6 id cl sl c2s s2c ri
	setp send_size "$ss" && setp recv_size "$sr" && setp remote_invalidate "$sR" || return 1
	id=$(connected "$ADDR $PORT send_size=$cs recv_size=$cr remote_invalidate=$cR") || return 1
	cl=$(conn_line "$id")
	sl=$(server_for "$id")
	c2s=$(min "$cs" "$sr")
	s2c=$(min "$ss" "$cr")
	ri=$((cR && sR))
	expect "$cl" outcome=found peer_r="$sR" peer_send="$ss" peer_recv="$sr" c2s="$c2s" s2c="$s2c" reminv="$ri" &&
		expect "$sl" state=established outcome=found peer_r="$cR" peer_send="$cs" peer_recv="$cr" \
			c2s="$c2s" s2c="$s2c" reminv="$ri" || { ktap_print_msg "case: server $ss/$sr R=$sR, client $cs/$cr R=$cR"; return 1; }
	echo "disconnect $id" >"$DBG/control" || return 1
}

rust_client_server_size_matrix() {
	local s c ok=0 n=0
	load_module listen="$ADDR:$PORT" || return 1
	for s in 1024 4096 16384 262144; do
		for c in 1024 4096 16384 262144; do
			check_pair "$s" "$s" 1 "$c" "$c" 1 || ok=1
			n=$((n + 1))
		done
	done
	ktap_print_msg "$n size pairs checked"
	return $ok
}

rust_client_server_remote_invalidation_matrix() {
	local sR cR ok=0
	load_module listen="$ADDR:$PORT" || return 1
	for sR in 0 1; do
		for cR in 0 1; do
			check_pair 4096 4096 "$sR" 4096 4096 "$cR" || ok=1
		done
	done
	[ "$(stat reminv_negotiated)" -gt 0 ] || { ktap_print_msg "reminv_negotiated stayed 0"; ok=1; }
	return $ok
}

rust_client_server_asymmetric_sizes() {
	load_module listen="$ADDR:$PORT" || return 1
	check_pair 8192 65536 1 16384 2048 1 &&
		check_pair 262144 1024 0 1024 262144 1 &&
		check_pair 2048 4096 1 65536 131072 0
}

rust_client_rejected_without_listener() {
	local id rej
	load_module || return 1
	rej=$(stat rejected_by_peer)
	id=$(client_connect "$ADDR 20099") || return 1
	wait_field "$id" state rejected || return 1
	[ "$(stat rejected_by_peer)" = $((rej + 1)) ] || fail "rejected_by_peer did not count it"
}

rust_client_to_linux_nfsd() {
	local size code id line ok=0
	load_module || return 1
	start_nfsd || { fail "cannot start nfsd over RDMA"; return 1; }
	for size in 4096 16384 65536; do
		echo "$size" >/proc/sys/sunrpc/svc_rdma/max_req_size || return 1
		code=$(printf '%02x' $((size / 1024 - 1)))
		id=$(client_connect "$ADDR 20049 send_size=16384 recv_size=8192") || return 1
		wait_field "$id" state established || { ok=1; continue; }
		line=$(conn_line "$id")
		ktap_print_msg "max_req_size=$size: $line"
		expect "$line" peer_pvt="f6ab0e180100$code$code" outcome=found offset=0 peer_r=0 \
			peer_send="$size" peer_recv="$size" c2s="$(min 16384 "$size")" \
			s2c="$(min "$size" 8192)" reminv=0 || ok=1
		echo "disconnect $id" >"$DBG/control"
	done
	echo 4096 >/proc/sys/sunrpc/svc_rdma/max_req_size
	return $ok
}

# NULL and an unknown program against nfsd: inline both ways, the replies
# decoded, the counters of both kinds moved.
rust_client_rpcs_to_linux_nfsd() {
	local id ok=0
	load_module || return 1
	start_nfsd || { fail "cannot start nfsd over RDMA"; return 1; }
	id=$(connected "$ADDR 20049") || return 1
	rpc "$id" null || { fail "NULL to nfsd failed: $(last_rpc)"; return 1; }
	ktap_print_msg "$(last_rpc)"
	expect "$(last_rpc)" prog=100003 vers=4 proc=0 call=inline reply=inline result=success reply_len=24 || ok=1
	rpc "$id" rpc 100099 1 0 || { fail "call to program 100099 failed"; return 1; }
	expect "$(last_rpc)" result=prog_unavail || ok=1
	rpc "$id" rpc 100003 4 5 || { fail "call to NFSv4 proc 5 failed"; return 1; }
	expect "$(last_rpc)" result=proc_unavail || ok=1
	ktap_print_msg "$(grep "^id=$id " "$DBG/xprt")"
	[ "$(xcount "$id" calls_sent)" = 3 ] && [ "$(xcount "$id" replies_received)" = 3 ] &&
		[ "$(xcount "$id" replies_inline)" = 3 ] || { fail "counters"; ok=1; }
	# nfsd granted credits; we started from 1.
	[ "$(field "$(grep "^id=$id " "$DBG/xprt")" credits)" -gt 1 ] || { fail "no credit grant seen"; ok=1; }
	echo "disconnect $id" >"$DBG/control"
	# A call on a closed connection fails at once.
	rpc "$id" null 2>/dev/null && { fail "call on a closed connection succeeded"; ok=1; }
	return $ok
}

# NFSv4 NULL calls nfsd answered (the first figure of /proc/net/rpc/nfsd's
# proc4 line).
nfsd_nulls() { awk '$1 == "proc4" { print $3 }' /proc/net/rpc/nfsd; }

# ping_through CLASS PORT N: the ping command's N NULLs reach nfsd, all
# timed; prints the bench line.
ping_through() {
	local n0 n1 line ok=0
	n0=$(nfsd_nulls)
	echo "ping $ADDR $2 $3" >"$DBG/control" || { fail "ping over $1 failed"; return 1; }
	n1=$(nfsd_nulls)
	line=$(cat "$DBG/bench")
	ktap_print_msg "ping over $1: $line; nfsd NULLs +$((n1 - n0))"
	expect "$line" conn=0 calls="$3" ok="$3" errors=0 call=sunrpc || ok=1
	# sunrpc's own NULL when it creates the client, then ours.
	[ "$((n1 - n0))" -ge "$3" ] || { fail "nfsd answered $((n1 - n0)) NULLs for $3 pings"; ok=1; }
	[ "$(field "$line" median_usec | cut -d. -f1)" -gt 0 ] || { fail "no latency measured"; ok=1; }
	return $ok
}

# The ping command (what make bench's NULL row runs) through sunrpc over
# Linux's xprtrdma (rpcrdma.ko holds the class here): 200 NULLs reach nfsd
# and are timed; against a port with no listener the write fails and the
# last result stays.
ping_through_sunrpc_over_the_rdma_class() {
	local ok=0 before
	load_module || return 1
	start_nfsd || { fail "cannot start nfsd over RDMA"; return 1; }
	ping_through xprtrdma 20049 200 || ok=1
	before=$(cat "$DBG/bench")
	echo "ping $ADDR 20051 5" >"$DBG/control" 2>/dev/null && { fail "ping to a port with no listener succeeded"; ok=1; }
	[ "$(cat "$DBG/bench")" = "$before" ] || { fail "a failed ping replaced the last result"; ok=1; }
	echo "ping $ADDR 20049 0" >"$DBG/control" 2>/dev/null && { fail "ping of 0 calls accepted"; ok=1; }
	return $ok
}

# READ and WRITE of 1 B to 1 MiB and a 500-entry READDIR against nfsd, through
# every path the thresholds call for; the data compared with the files.
rust_client_nfs_read_write_readdir() {
	local id n line ok=0 seed
	load_module || return 1
	start_nfsd || { fail "cannot start nfsd over RDMA"; return 1; }
	echo 4096 >/proc/sys/sunrpc/svc_rdma/max_req_size
	nfs_files || return 1
	id=$(connected "$ADDR 20049") || return 1
	rpc "$id" nfs getattr f_4096 && expect "$(last_rpc)" result=success nfs_status=0 type=1 size=4096 || ok=1
	for n in 1 1024 4096 65536 1048576; do
		rpc "$id" nfs read f_$n $n || { fail "read f_$n: $(last_rpc)"; ok=1; continue; }
		line=$(last_rpc)
		ktap_print_msg "$line"
		expect "$line" result=success nfs_status=0 data_len=$n eof=1 data_fnv="$(fnv /tmp/export/f_$n)" || ok=1
		[ "$n" -le 1024 ] && { expect "$line" reply=inline || ok=1; }
		[ "$n" -ge 4096 ] && { expect "$line" reply=write_list || ok=1; }
	done
	for n in 1 1024 4096 65536 1048576; do
		seed=$((n + 7))
		nfs_write "$id" w_$n $n $seed || { fail "write w_$n: $(last_rpc)"; ok=1; continue; }
		line=$(last_rpc)
		ktap_print_msg "$line"
		expect "$line" result=success nfs_status=0 written=$n committed=2 || ok=1
		[ "$n" -le 1024 ] && { expect "$line" call=inline || ok=1; }
		[ "$n" -ge 4096 ] && { expect "$line" call=read_chunk || ok=1; }
		[ "$(wc -c </tmp/export/w_$n)" = "$n" ] && is_pattern /tmp/export/w_$n $seed ||
			{ fail "w_$n does not hold what was written"; ok=1; }
	done
	rpc "$id" nfs readdir d500 || { fail "readdir: $(last_rpc)"; ok=1; }
	line=$(last_rpc)
	ktap_print_msg "$line"
	expect "$line" result=success nfs_status=0 reply=reply_chunk entries=500 eof=1 \
		names_fnv_sum="$(names_fnv_sum /tmp/export/d500)" || ok=1
	rpc "$id" nfs read no_such_file 10 && expect "$(last_rpc)" nfs_status=2 nfs_failed_op=15 || ok=1
	ktap_print_msg "$(grep "^id=$id " "$DBG/xprt")"
	echo "disconnect $id" >"$DBG/control"
	return $ok
}

# With nfsd's max_req_size 4096 and 16384, and our recv_size 65536 or 4096: a
# WRITE call of exactly c2s octets goes inline, four more take a Read chunk; a
# READ reply that just fits s2c (bounded by our receive size) comes inline,
# four more come in a Write chunk.
rust_client_nfs_threshold_edges() {
	local size recv id c2s s2c head n ok=0 before
	load_module send_size=65536 || return 1
	start_nfsd || return 1
	nfs_files || return 1
	for size_recv in 4096/65536 16384/65536 16384/4096; do
		size=${size_recv%/*} recv=${size_recv#*/}
		echo "$size" >/proc/sys/sunrpc/svc_rdma/max_req_size || return 1
		head -c $size /dev/urandom >/tmp/export/f_edge
		id=$(connected "$ADDR 20049 recv_size=$recv") || return 1
		c2s=$(field "$(conn_line "$id")" c2s)
		s2c=$(field "$(conn_line "$id")" s2c)
		[ "$c2s" = "$size" ] && [ "$s2c" = "$(min "$size" "$recv")" ] || { fail "c2s=$c2s s2c=$s2c"; ok=1; }
		nfs_write "$id" edge 4 1 || { ok=1; continue; }
		head=$(($(field "$(last_rpc)" call_len) - 4))
		n=$((c2s - 28 - head))
		before=$(xcount "$id" bytes_send)
		nfs_write "$id" edge $n 2 && expect "$(last_rpc)" call=inline written=$n || ok=1
		[ $(($(xcount "$id" bytes_send) - before)) = "$c2s" ] || { fail "Send was not exactly c2s=$c2s"; ok=1; }
		nfs_write "$id" edge $((n + 4)) 3 && expect "$(last_rpc)" call=read_chunk written=$((n + 4)) || ok=1
		is_pattern /tmp/export/edge 3 || { fail "edge file"; ok=1; }
		# READ reply bound the plan uses: transport header 28, RPC reply
		# header 24 + 8 (room for PROG_MISMATCH), COMPOUND head 12, PUTROOTFH
		# and LOOKUP results 8 each, READ result 16 + data.
		n=$((s2c - 104))
		rpc "$id" nfs read f_edge $n && expect "$(last_rpc)" reply=inline data_len=$n || ok=1
		rpc "$id" nfs read f_edge $((n + 4)) && expect "$(last_rpc)" reply=write_list data_len=$((n + 4)) || ok=1
		ktap_print_msg "max_req_size=$size recv_size=$recv: $(grep "^id=$id " "$DBG/xprt")"
		echo "disconnect $id" >"$DBG/control"
	done
	echo 4096 >/proc/sys/sunrpc/svc_rdma/max_req_size
	return $ok
}

# svcrdma uses Send With Invalidate only for a client that set R, and only when
# the call's chunks share one rkey: our READ (one Write chunk) and READDIR (one
# Reply chunk) qualify. With R=1 our client counts remote invalidations and
# skips those LOCAL_INVs; with R=0 it invalidates everything itself.
rust_client_nfs_remote_invalidation() {
	local r id ok=0 base ri li
	load_module || return 1
	start_nfsd || return 1
	echo 4096 >/proc/sys/sunrpc/svc_rdma/max_req_size
	nfs_files || return 1
	base=$(mrs)
	for r in 1 0; do
		id=$(connected "$ADDR 20049 remote_invalidate=$r") || return 1
		rpc "$id" nfs read f_65536 65536 && expect "$(last_rpc)" reply=write_list data_fnv="$(fnv /tmp/export/f_65536)" || ok=1
		rpc "$id" nfs read f_1048576 1048576 && expect "$(last_rpc)" reply=write_list || ok=1
		rpc "$id" nfs readdir d500 && expect "$(last_rpc)" reply=reply_chunk entries=500 || ok=1
		ri=$(xcount "$id" remote_invalidations)
		li=$(xcount "$id" local_invalidations)
		ktap_print_msg "R=$r: remote_invalidations=$ri local_invalidations=$li unmatched=$(xcount "$id" remote_invalidations_unmatched)"
		if [ "$r" = 1 ]; then
			[ "$ri" = 3 ] && [ "$li" = 0 ] || { fail "expected 3 remote, 0 local"; ok=1; }
		else
			[ "$ri" = 0 ] && [ "$li" = 3 ] || { fail "expected 0 remote, 3 local"; ok=1; }
		fi
		[ "$(xcount "$id" remote_invalidations_unmatched)" = 0 ] || ok=1
		echo "disconnect $id" >"$DBG/control"
	done
	sleep 1
	ktap_print_msg "MRs on rxe0: $base before, $(mrs) after"
	[ "$(mrs)" = "$base" ] || { fail "MRs left registered"; ok=1; }
	return $ok
}

# Many callers on one connection at once: calls in flight up to the credit
# grant, replies matched by XID, every chunk type mixed; against our server
# and against nfsd.
concurrent_calls_share_credits() {
	local id sid i ok=0 h n
	load_module listen="$ADDR:$PORT" || return 1
	start_nfsd || return 1
	echo 4096 >/proc/sys/sunrpc/svc_rdma/max_req_size
	nfs_files || return 1
	id=$(connected "$ADDR $PORT") || return 1
	sid=$(field "$(server_for "$id")" id)
	for i in 1 2 3 4 5 6 7 8; do
		(
			for n in 100 5000 70000 3000 200000; do
				rpc "$id" echo $((n + i)) ddp=$((i % 2)) || echo "FAIL echo $((n + i))"
			done
		) >/tmp/par_$i 2>&1 &
	done
	wait
	cat /tmp/par_* | grep FAIL && ok=1
	ktap_print_msg "client: $(grep "^id=$id " "$DBG/xprt")"
	ktap_print_msg "server: $(grep "^id=$sid " "$DBG/xprt")"
	[ "$(xcount "$id" replies_received)" = 40 ] && [ "$(xcount "$sid" replies_sent)" = 40 ] ||
		{ fail "40 calls, 40 replies expected"; ok=1; }
	[ "$(grep -c "conn=$id .*verified=1" "$DBG/rpcs")" = 40 ] || { fail "not all 40 echoes verified"; ok=1; }
	echo "disconnect $id" >"$DBG/control"
	id=$(connected "$ADDR 20049") || return 1
	h=$(fnv /tmp/export/f_65536)
	for i in 1 2 3 4 5 6; do
		(for n in 1 2 3 4 5; do rpc "$id" nfs read f_65536 65536 || echo FAIL; done) >/tmp/par_$i 2>&1 &
	done
	wait
	cat /tmp/par_* | grep FAIL && ok=1
	ktap_print_msg "nfsd: $(grep "^id=$id " "$DBG/xprt")"
	[ "$(grep -c "conn=$id .*data_fnv=$h" "$DBG/rpcs")" = 30 ] || { fail "not all 30 READs returned the file"; ok=1; }
	echo "disconnect $id" >"$DBG/control"
	return $ok
}

# Most Sends are posted unsignaled (as xprtrdma does): 320 echo calls from
# our client to our server, one at a time, then 8 at a time, all answered,
# take one Send completion per 16 Sends on each end, not one per Send; every
# Send buffer is given back and reused (no Send refused, about 16 buffers
# allocated for the sequential calls, fewer than the 80 a connection may
# have for the parallel ones).
sends_complete_in_batches() {
	local id sid line i c b ok=0
	load_module listen="$ADDR:$PORT" || return 1
	id=$(connected "$ADDR $PORT") || return 1
	sid=$(field "$(server_for "$id")" id)
	echo "bench $id 160 echo 64" >"$DBG/control" || { fail "bench failed"; return 1; }
	line=$(cat "$DBG/bench")
	ktap_print_msg "bench: $line"
	expect "$line" calls=160 ok=160 errors=0 || ok=1
	for i in 1 2 3 4 5 6 7 8; do
		(for n in $(seq 1 20); do rpc "$id" echo $((100 + i)) || echo FAIL; done) >/tmp/par_$i 2>&1 &
	done
	wait
	cat /tmp/par_* | grep FAIL && ok=1
	ktap_print_msg "client: $(grep "^id=$id " "$DBG/xprt")"
	ktap_print_msg "server: $(grep "^id=$sid " "$DBG/xprt")"
	[ "$(xcount "$id" calls_sent)" = 320 ] && [ "$(xcount "$sid" replies_sent)" = 320 ] ||
		{ fail "320 calls and replies expected"; ok=1; }
	for i in "$id" "$sid"; do
		c=$(xcount "$i" send_completions)
		# 320 / 16 = 20: none asked for otherwise.
		[ "$c" = 20 ] || { fail "id=$i: $c Send completions for 320 Sends, expected 20"; ok=1; }
		b=$(field "$(grep "^id=$i " "$DBG/xprt")" send_bufs)
		[ "$b" -ge 16 ] && [ "$b" -lt 80 ] || { fail "id=$i: $b Send buffers allocated"; ok=1; }
		[ "$(xcount "$i" send_busy)" = 0 ] && [ "$(xcount "$i" send_errors)" = 0 ] ||
			{ fail "id=$i: Sends refused or failed"; ok=1; }
	done
	echo "disconnect $id" >"$DBG/control"
	return $ok
}

# echo_edge SEND RECV: our client and server, both advertising SEND/RECV on the
# client side (server from parameters); echoes every size class up to the
# largest inline call and reply, then one size past each threshold (which
# then takes a chunk).
echo_edge() {
	local cs=$1 cr=$2 id sid c2s s2c callmax replymax n ok=0 before
	id=$(connected "$ADDR $PORT send_size=$cs recv_size=$cr") || return 1
	c2s=$(field "$(conn_line "$id")" c2s)
	s2c=$(field "$(conn_line "$id")" s2c)
	sid=$(field "$(server_for "$id")" id)
	# Call Send: 28 (transport header) + 40 (RPC call) + 4 + N. The reply must
	# fit 28 + 24 + 8 (room for PROG_MISMATCH) + 4 + N.
	callmax=$((c2s - 72))
	replymax=$((s2c - 64))
	n=$(min "$callmax" "$replymax")
	for len in 0 1 3 4 5 100 1000 $((n - 1)) "$n"; do
		[ "$len" -le "$n" ] || continue
		rpc "$id" echo "$len" || { fail "echo $len: $(last_rpc)"; ok=1; continue; }
		expect "$(last_rpc)" call=inline reply=inline result=success verified=1 || ok=1
	done
	before=$(xcount "$id" bytes_send)
	if [ "$callmax" -le "$replymax" ]; then
		# A call of exactly c2s octets is inline; four more take a Read chunk.
		rpc "$id" echo "$callmax" || { fail "echo $callmax (exactly c2s)"; ok=1; }
		[ $(($(xcount "$id" bytes_send) - before)) = "$c2s" ] || { fail "Send was not exactly c2s=$c2s octets"; ok=1; }
		rpc "$id" echo $((callmax + 4)) || { fail "echo past c2s: $(last_rpc)"; ok=1; }
		expect "$(last_rpc)" call=read_chunk result=success verified=1 || ok=1
	else
		# A reply of exactly s2c octets is inline; four more take a Write chunk.
		rpc "$id" echo "$replymax" || { fail "echo $replymax (reply exactly s2c)"; ok=1; }
		expect "$(last_rpc)" reply=inline || ok=1
		rpc "$id" echo $((replymax + 4)) || { fail "echo past s2c: $(last_rpc)"; ok=1; }
		expect "$(last_rpc)" reply=write_list result=success verified=1 || ok=1
	fi
	ktap_print_msg "c2s=$c2s s2c=$s2c client: $(grep "^id=$id " "$DBG/xprt")"
	ktap_print_msg "server: $(grep "^id=$sid " "$DBG/xprt")"
	[ "$(xcount "$sid" replies_sent_inline)" = "$(xcount "$id" replies_inline)" ] &&
		[ "$(xcount "$sid" replies_sent)" = "$(xcount "$id" replies_received)" ] || { fail "server replies != client replies"; ok=1; }
	echo "disconnect $id" >"$DBG/control"
	return $ok
}

rust_echo_inline_up_to_thresholds() {
	load_module listen="$ADDR:$PORT" send_size=4096 recv_size=4096 || return 1
	echo_edge 4096 4096 && echo_edge 16384 1024 && echo_edge 1024 16384 && {
		setp send_size 16384 && setp recv_size 16384 && echo_edge 16384 16384
	}
}

# mrs: kernel MRs on rxe0 now (rdma resource summary).
mrs() {
	rdma resource show | sed -n 's/.* mr \([0-9]*\).*/\1/p' | head -1
}

# echo_case ID LEN DDP CALL REPLY: one verified echo that took the given path.
echo_case() {
	rpc "$1" echo "$2" ddp="$3" || { fail "echo $2 ddp=$3: $(last_rpc)"; return 1; }
	expect "$(last_rpc)" call="$4" reply="$5" result=success verified=1 ||
		{ ktap_print_msg "case: echo $2 ddp=$3"; return 1; }
}

# Every chunk type in both directions between our client and our server, up
# to 1 MiB, data checked byte for byte by the requester; no MR left over.
rust_echo_every_chunk_type() {
	local id sid ok=0 base
	load_module listen="$ADDR:$PORT" || return 1
	base=$(mrs)
	[[ $base =~ ^[0-9]+$ ]] || { fail "cannot count MRs: $(rdma resource show)"; return 1; }
	id=$(connected "$ADDR $PORT send_size=4096 recv_size=4096") || return 1
	sid=$(field "$(server_for "$id")" id)
	# c2s = s2c = 4096.
	echo_case "$id" 4028 1 read_chunk inline || ok=1
	echo_case "$id" 4100 1 read_chunk write_list || ok=1
	echo_case "$id" 65536 1 read_chunk write_list || ok=1
	echo_case "$id" 1048576 1 read_chunk write_list || ok=1
	echo_case "$id" 4032 0 long inline || ok=1
	echo_case "$id" 65536 0 long reply_chunk || ok=1
	echo_case "$id" 1048576 0 long reply_chunk || ok=1
	echo_case "$id" 77777 0 long reply_chunk || ok=1
	echo_case "$id" 77777 1 read_chunk write_list || ok=1
	echo "disconnect $id" >"$DBG/control"
	# A large c2s and a small s2c: inline calls with Reply chunks.
	id=$(client_connect "$ADDR $PORT send_size=16384 recv_size=1024") || return 1
	setp send_size 4096
	wait_field "$id" state established || return 1
	expect "$(conn_line "$id")" c2s=4096 s2c=1024 || ok=1
	echo_case "$id" 3000 0 inline reply_chunk || ok=1
	echo_case "$id" 3000 1 inline write_list || ok=1
	echo_case "$id" 960 1 inline inline || ok=1
	ktap_print_msg "client: $(grep "^id=$id " "$DBG/xprt")"
	ktap_print_msg "server: $(grep "^id=$(field "$(server_for "$id")" id) " "$DBG/xprt")"
	echo "disconnect $id" >"$DBG/control"
	ktap_print_msg "first server: $(grep "^id=$sid " "$DBG/xprt")"
	[ "$(xcount "$sid" bytes_rdma_read)" -gt 2000000 ] && [ "$(xcount "$sid" bytes_rdma_write)" -gt 2000000 ] ||
		{ fail "server RDMA byte counters too small"; ok=1; }
	[ "$(xcount "$sid" chunk_errors)" = 0 ] || { fail "chunk errors"; ok=1; }
	# Up to 5 pages per RDMA Read/Write WR (RPCRDMA_CM_RW_SGES): at most two
	# WRs per operation (a partial first and last) plus one per 20 KiB
	# moved (one page per WR would take one per 4 KiB).
	local ops=$(($(xcount "$sid" rdma_reads) + $(xcount "$sid" rdma_writes)))
	local moved=$(($(xcount "$sid" bytes_rdma_read) + $(xcount "$sid" bytes_rdma_write)))
	local wrs=$(xcount "$sid" rdma_rw_wrs)
	ktap_print_msg "server: $ops RDMA Reads and Writes, $moved octets, $wrs WRs"
	[ "$wrs" -ge "$ops" ] && [ "$wrs" -le $((2 * ops + moved / 20480)) ] ||
		{ fail "RDMA Read/Write WRs out of bounds"; ok=1; }
	sleep 1
	ktap_print_msg "MRs on rxe0: $base before, $(mrs) after"
	[ "$(mrs)" = "$base" ] || { fail "MRs left registered"; ok=1; }
	return $ok
}

# rw_through_mrs_when_forced (not in ALL_TESTS: the guest must be booted
# with ib_core.force_mr=1, as make check's stage "RDMA Read/Write through MRs"
# does): rdma_rw then registers every RDMA Read and Write with an MR from the
# QP's pool, as it always does on iWARP and does on mlx5 for Reads of many
# pages. Each of our QPs holds a pool of max_rdma_ctxs MRs from connect to
# close (qp.c: 1024 pages per chunk over 5 SGEs per WR, 205 contexts); every
# chunk type moves its data byte for byte, each RDMA Read or Write takes a
# REG_MR WR besides its own, and the pools go with the connection.
rw_through_mrs_when_forced() {
	local id sid ok=0 base up ops moved wrs i
	grep -qw 'ib_core.force_mr=1' /proc/cmdline ||
		{ fail "the guest was not booted with ib_core.force_mr=1 (make check's force_mr stage)"; return 1; }
	load_module listen="$ADDR:$PORT" || return 1
	base=$(mrs)
	[[ $base =~ ^[0-9]+$ ]] || { fail "cannot count MRs: $(rdma resource show)"; return 1; }
	id=$(connected "$ADDR $PORT send_size=4096 recv_size=4096") || return 1
	sid=$(field "$(server_for "$id")" id)
	up=$(mrs)
	ktap_print_msg "MRs on rxe0: $base before, $up with one connection (two QPs)"
	[ $((up - base)) -ge $((2 * 205)) ] || { fail "no MR pool of 205 on each QP: rdma_rw is not registering"; ok=1; }
	echo_case "$id" 4100 1 read_chunk write_list || ok=1
	echo_case "$id" 65536 1 read_chunk write_list || ok=1
	echo_case "$id" 1048576 1 read_chunk write_list || ok=1
	echo_case "$id" 77777 1 read_chunk write_list || ok=1
	echo_case "$id" 65536 0 long reply_chunk || ok=1
	echo_case "$id" 1048576 0 long reply_chunk || ok=1
	ktap_print_msg "server: $(grep "^id=$sid " "$DBG/xprt")"
	[ "$(xcount "$sid" chunk_errors)" = 0 ] || { fail "chunk errors"; ok=1; }
	ops=$(($(xcount "$sid" rdma_reads) + $(xcount "$sid" rdma_writes)))
	moved=$(($(xcount "$sid" bytes_rdma_read) + $(xcount "$sid" bytes_rdma_write)))
	wrs=$(xcount "$sid" rdma_rw_wrs)
	ktap_print_msg "server: $ops RDMA Reads and Writes, $moved octets, $wrs WRs"
	# Registered: a REG_MR and the Read or Write per MR of up to 256 pages,
	# so at least two WRs per operation, and fewer in all than 5 pages per
	# WR would take.
	[ "$ops" -gt 0 ] && [ "$wrs" -ge $((2 * ops)) ] && [ "$wrs" -lt $((moved / 20480)) ] ||
		{ fail "RDMA Read/Write WRs do not look registered"; ok=1; }
	echo "disconnect $id" >"$DBG/control"
	# Both QPs' teardown returns their pools.
	for ((i = 0; i < 100; i++)); do
		[ "$(mrs)" = "$base" ] && break
		sleep 0.1
	done
	ktap_print_msg "MRs on rxe0 after the disconnect: $(mrs)"
	[ "$(mrs)" = "$base" ] || { fail "MRs left registered"; ok=1; }
	return $ok
}

# Send With Invalidate only when both ends set R; our requester skips the
# LOCAL_INV of exactly that MR and invalidates the others itself.
rust_remote_invalidation_with_chunks() {
	local sR cR id sid ok=0 swi ri li
	load_module listen="$ADDR:$PORT" || return 1
	for sR in 0 1; do
		for cR in 0 1; do
			setp remote_invalidate "$sR"
			id=$(connected "$ADDR $PORT remote_invalidate=$cR") || return 1
			sid=$(field "$(server_for "$id")" id)
			# Read chunk + Write chunk: two MRs per call, one invalidated by
			# the server when both set R.
			echo_case "$id" 65536 1 read_chunk write_list || ok=1
			echo_case "$id" 100000 1 read_chunk write_list || ok=1
			# A long call with a Reply chunk: two MRs as well.
			echo_case "$id" 8000 0 long reply_chunk || ok=1
			swi=$(xcount "$sid" send_with_invalidate)
			ri=$(xcount "$id" remote_invalidations)
			li=$(xcount "$id" local_invalidations)
			ktap_print_msg "server R=$sR client R=$cR: send_with_invalidate=$swi remote_invalidations=$ri local_invalidations=$li unmatched=$(xcount "$id" remote_invalidations_unmatched)"
			if [ $((sR && cR)) = 1 ]; then
				[ "$swi" = 3 ] && [ "$ri" = 3 ] && [ "$li" = 3 ] || { fail "expected 3 SWI, 3 remote, 3 local"; ok=1; }
			else
				[ "$swi" = 0 ] && [ "$ri" = 0 ] && [ "$li" = 6 ] || { fail "expected 0 SWI, 0 remote, 6 local"; ok=1; }
			fi
			[ "$(xcount "$id" remote_invalidations_unmatched)" = 0 ] || ok=1
			echo "disconnect $id" >"$DBG/control"
		done
	done
	return $ok
}

# The responder's answers to calls it cannot serve.
rust_server_rpc_errors() {
	local id ok=0
	load_module listen="$ADDR:$PORT" || return 1
	id=$(connected "$ADDR $PORT") || return 1
	rpc "$id" rpc 100099 1 0 && expect "$(last_rpc)" result=prog_unavail || ok=1
	rpc "$id" rpc 100003 4 1 && expect "$(last_rpc)" result=proc_unavail || ok=1
	rpc "$id" rpc 100003 2 0 && expect "$(last_rpc)" result=prog_mismatch || ok=1
	rpc "$id" rpc $((0x20008797)) 2 1 && expect "$(last_rpc)" result=prog_mismatch || ok=1
	rpc "$id" rpc $((0x20008797)) 1 9 && expect "$(last_rpc)" result=proc_unavail || ok=1
	rpc "$id" rpc $((0x20008797)) 1 0 && expect "$(last_rpc)" result=success || ok=1
	rpc "$id" null && expect "$(last_rpc)" result=success || ok=1
	echo "disconnect $id" >"$DBG/control"
	return $ok
}

# The C client (xprtrdma) mounting from our listener: we serve only NULL of the
# NFS program, so the mount fails; what is checked here is the handshake, in
# both views (linux_nfs_client_rpcs_to_rust_server checks the RPCs).
c_client_handshake() { # expected "neg send/recv=A/B" of the C client
	local before sl i ok=0 trace=/sys/kernel/tracing
	# rpcrdma.ko first: its trace events come with it.
	load_c_transport || return 1
	ensure_tracefs || return 1
	echo 1 >$trace/events/rpcrdma/xprtrdma_inline_thresh/enable || return 1
	echo >$trace/trace
	before=$(max_conn_id)
	mkdir -p /tmp/mnt
	timeout -s KILL 40 mount -t nfs -o rdma,port=$PORT,vers=4.2,soft,timeo=20,retrans=1 \
		"$ADDR:/" /tmp/mnt >/dev/null 2>&1 &
	local mounter=$!
	for ((i = 0; i < 300; i++)); do
		# The mount may already have failed and closed the connection: any
		# state will do.
		sl=$(awk -v b="$before" '{ v = $1; sub("id=", "", v) } v + 0 > b && / role=server .* outcome=/' "$DBG/connections" | head -1)
		[ -n "$sl" ] && grep -q "neg send/recv=$1" $trace/trace && break
		sleep 0.1
	done
	echo 0 >$trace/events/rpcrdma/xprtrdma_inline_thresh/enable
	# Seen what we came for: stop the mount (it cannot succeed yet).
	kill -KILL "$mounter" 2>/dev/null
	pkill -KILL -x mount.nfs 2>/dev/null
	ktap_print_msg "ours: $sl"
	ktap_print_msg "C client: $(grep -m1 -o 'neg send/recv=.*' $trace/trace)"
	[ -n "$sl" ] || { ktap_print_msg "no established server connection"; ok=1; }
	grep -q "neg send/recv=$1" $trace/trace || { ktap_print_msg "C client did not negotiate $1"; ok=1; }
	shift
	[ -z "$sl" ] || expect "$sl" "$@" || ok=1
	wait
	return $ok
}

linux_nfs_client_to_rust_server() {
	load_module listen="$ADDR:$PORT" recv_size=2048 send_size=16384 || return 1
	# The C client offers R=1 4096/4096: it sends min(4096, our 2048) and takes
	# min(4096, our 16384).
	c_client_handshake 2048/4096 peer_pvt=f6ab0e1801010303 outcome=found peer_r=1 \
		peer_send=4096 peer_recv=4096 c2s=2048 s2c=4096 reminv=1
}

# The C client's first RPCs to our server: its NULL ping gets SUCCESS (seen in
# its xprtrdma_reply tracepoint and our counters); its COMPOUND gets
# PROC_UNAVAIL, so the mount fails fast instead of hanging.
linux_nfs_client_rpcs_to_rust_server() {
	local before sid rc trace=/sys/kernel/tracing ok=0 t0 grant
	load_module listen="$ADDR:$PORT" || return 1
	# rpcrdma.ko first: its trace events come with it.
	load_c_transport || return 1
	ensure_tracefs || return 1
	echo 1 >$trace/events/rpcrdma/xprtrdma_reply/enable || return 1
	echo >$trace/trace
	before=$(max_conn_id)
	mkdir -p /tmp/mnt
	t0=$SECONDS
	timeout -s KILL 60 mount -t nfs -o rdma,port=$PORT,vers=4.0,soft,timeo=50,retrans=1 \
		"$ADDR:/" /tmp/mnt >/tmp/mount.out 2>&1
	rc=$?
	echo 0 >$trace/events/rpcrdma/xprtrdma_reply/enable
	ktap_print_msg "mount exit $rc after $((SECONDS - t0)) s: $(head -c 200 /tmp/mount.out)"
	[ "$rc" != 0 ] && [ "$rc" != 137 ] || { fail "mount should fail (not hang, not succeed)"; ok=1; }
	sid=$(awk -v b="$before" '{ v = $1; sub("id=", "", v) } v + 0 > b && / role=server / { print v; exit }' "$DBG/connections")
	[ -n "$sid" ] || { fail "no server connection"; return 1; }
	ktap_print_msg "ours: $(grep "^id=$sid " "$DBG/xprt")"
	ktap_print_msg "C client: $(grep -c 'xprtrdma_reply:' $trace/trace) replies traced, first: $(grep -m1 -o 'xprtrdma_reply:.*' $trace/trace)"
	[ "$(xcount "$sid" calls_received)" -ge 2 ] && [ "$(xcount "$sid" replies_sent_inline)" -ge 2 ] ||
		{ fail "expected the NULL ping and a COMPOUND answered"; ok=1; }
	[ "$(xcount "$sid" header_errors)" = 0 ] && [ "$(xcount "$sid" rdma_error_sent)" = 0 ] || { fail "errors"; ok=1; }
	# Our grant (documented: the Receives posted minus one; 16 of 4 KiB at
	# first) reaches the C client, which asked for 128.
	grant=$(field "$(grep "^id=$sid " "$DBG/xprt")" credits)
	[ "${grant:-0}" -ge 1 ] && grep -q "xprtrdma_reply:.*credits=$grant\$" $trace/trace ||
		{ fail "C client saw no reply granting our ${grant:-?} credits"; ok=1; }
	return $ok
}

rping_client_to_rust_server() {
	local before sl
	load_module listen="$ADDR:$PORT" send_size=16384 recv_size=16384 || return 1
	before=$(max_conn_id)
	timeout -s KILL 20 rping -c -a "$ADDR" -p $PORT -C 1 >/dev/null 2>&1
	sl=$(conn_line $((before + 1)))
	ktap_print_msg "$sl"
	expect "$sl" role=server outcome=absent peer_pvt=- c2s=1024 s2c=1024 reminv=0 &&
		[ "$(stat pvt_absent)" -ge 1 ]
}

rust_client_to_rping_server() {
	local id line
	load_module || return 1
	timeout -s KILL 60 rping -s -a "$ADDR" -p 20070 -C 1 >/dev/null 2>&1 &
	wait_cm_listen rping 20070 || { fail "rping did not listen: $(rdma resource show cm_id)"; wait; return 1; }
	id=$(client_connect "$ADDR 20070 send_size=16384 recv_size=16384") || return 1
	wait_field "$id" state established || { wait; return 1; }
	line=$(conn_line "$id")
	ktap_print_msg "$line"
	echo "disconnect $id" >"$DBG/control"
	wait
	expect "$line" outcome=absent peer_pvt_len=196 peer_pvt=- c2s=1024 s2c=1024 reminv=0
}

legacy_switch_with_linux_peers() {
	local id line ok=0
	load_module listen="$ADDR:$PORT" legacy=1 || return 1
	# Our legacy client to nfsd: we send nothing, so we assume 1024/1024 for us.
	start_nfsd || return 1
	id=$(connected "$ADDR 20049") || return 1
	line=$(conn_line "$id")
	ktap_print_msg "$line"
	expect "$line" sent=- peer_pvt=f6ab0e1801000303 c2s=1024 s2c=1024 reminv=0 || ok=1
	echo "disconnect $id" >"$DBG/control"
	# The C client sees no private data from us and falls back to 1024/1024.
	c_client_handshake 1024/1024 sent=- peer_pvt=f6ab0e1801010303 c2s=1024 s2c=1024 reminv=0 || ok=1
	return $ok
}

unload_with_live_connections() {
	local id
	load_module listen="$ADDR:$PORT" || return 1
	start_nfsd || { fail "cannot start nfsd over RDMA"; return 1; }
	id=$(connected "$ADDR $PORT") || return 1
	server_for "$id" | grep -q "state=established" || { fail "server side not established"; return 1; }
	id=$(connected "$ADDR 20049") || return 1
	ktap_print_msg "$(grep -c 'state=established' "$DBG/connections") live connections at rmmod"
	diag rmmod rpcrdma_cm || { fail "rmmod with live connections failed"; return 1; }
	! module_loaded
}

# `rdma link delete rxe0` while echo calls of up to 70000 octets run on a
# connection to our own listener: both ends and the listener let go of the
# device (else the deletion would not return): the client end ends
# device_removed, the listener is dead, device_removals counts at least two,
# a call on the removed connection fails. With rxe0 added again the listener
# listens again and a new connection carries a verified 70000-octet echo.
device_removal_with_live_connections() {
	local id ok=0 removals bg
	load_module listen="$ADDR:$PORT" || return 1
	id=$(connected "$ADDR $PORT") || return 1
	# RPCs in flight (every chunk type) while the device goes away.
	(for i in $(seq 1 200); do echo "call $id echo $((i * 997 % 70000))" >"$DBG/control" 2>/dev/null || break; done) &
	bg=$!
	sleep 1
	diag rdma link delete rxe0 || { fail "cannot delete rxe0"; return 1; }
	wait $bg
	ktap_print_msg "last call: $(last_rpc)"
	# Both ends of the connection and the listener see DEVICE_REMOVAL and let go
	# of the device: otherwise the deletion above would not have returned.
	# The server end may first see the client end's teardown as DISCONNECTED.
	wait_field "$id" state device_removed || ok=1
	server_for "$id" | grep -qE "state=(device_removed|disconnected) " ||
		{ ktap_print_msg "server end: $(server_for "$id")"; ok=1; }
	grep -q "addr=$ADDR:$PORT state=dead" "$DBG/listeners" || { ktap_print_msg "listener: $(cat "$DBG/listeners")"; ok=1; }
	removals=$(stat device_removals)
	[ "$removals" -ge 2 ] || { ktap_print_msg "device_removals=$removals"; ok=1; }
	echo "call $id null" >"$DBG/control" 2>/dev/null && { fail "a call on the removed connection succeeded"; ok=1; }
	# The device comes back: the listener listens again, connections work.
	diag rdma link add rxe0 type rxe netdev dummy0 || { fail "cannot re-add rxe0"; return 1; }
	for i in $(seq 1 50); do grep -q "state=listening" "$DBG/listeners" && break; sleep 0.1; done
	ktap_print_msg "listeners: $(cat "$DBG/listeners"); listener_restarts=$(stat listener_restarts)"
	grep -q "addr=$ADDR:$PORT state=listening" "$DBG/listeners" || { fail "listener did not come back"; ok=1; }
	id=$(client_connect "$ADDR $PORT") || return 1
	wait_field "$id" state established || ok=1
	rpc "$id" echo 70000 && expect "$(last_rpc)" verified=1 || { fail "no RPC after re-add"; ok=1; }
	diag rmmod rpcrdma_cm || { fail "rmmod after device removal failed"; ok=1; }
	return $ok
}

# Odd and hostile private data through the real CM path, both directions. Each
# case: the connection is established with the RFC 8797 outcome (a peer without a
# valid message counts as R=0, 1024/1024) and the outcome's counter rises.
M=f6ab0e18
Z8=0000000000000000
pvt_case() { # role(client|server) hex outcome [field=value...]
	local role=$1 hex=$2 outcome=$3 line counter before id ok=0
	shift 3
	counter=pvt_$outcome
	before=$(stat "$counter")
	if [ "$role" = client ]; then
		local bid
		bid=$(max_conn_id)
		timeout -s KILL 20 "$PVT_PEER" client "$ADDR" $PORT "$hex" >/dev/null 2>&1 ||
			{ ktap_print_msg "pvt_peer client failed for '$hex'"; return 1; }
		line=$(awk -v b="$bid" '{ v = $1; sub("id=", "", v) } v + 0 > b && / role=server /' "$DBG/connections" | head -1)
	else
		local out=/tmp/pvt_peer.out i
		rm -f $out
		timeout -s KILL 25 "$PVT_PEER" server "$ADDR" 20080 "$hex" >$out 2>&1 &
		for ((i = 0; i < 100; i++)); do
			grep -q listening $out 2>/dev/null && break
			sleep 0.1
		done
		grep -q listening $out || { ktap_print_msg "pvt_peer server: $(cat $out)"; wait; return 1; }
		id=$(client_connect "$ADDR 20080") || return 1
		wait_field "$id" state established || { wait; return 1; }
		line=$(conn_line "$id")
		echo "disconnect $id" >"$DBG/control"
		wait
	fi
	expect "$line" outcome="$outcome" "$@" || ok=1
	[ "$(stat "$counter")" = $((before + 1)) ] || { ktap_print_msg "$counter did not rise for '$hex'"; ok=1; }
	return $ok
}

defaults="c2s=1024 s2c=1024 reminv=0 peer_r=0 peer_send=1024 peer_recv=1024"

# pvt_cases_either_role ROLE: the cases whose outcome is the same in a REQ and
# in a REP (both zero-padded by the CM), for pvt_peer as ROLE; our end has
# send_size=recv_size=16384.
pvt_cases_either_role() {
	local role=$1 ok=0
	# The CM zero-pads private data, so 6 octets arrive as a v1 message with
	# size codes 0 and the bare id as version 0.
	pvt_case "$role" f6ab0e180101 found offset=0 peer_r=1 peer_send=1024 peer_recv=1024 \
		c2s=1024 s2c=1024 reminv=1 || ok=1
	pvt_case "$role" $M unknown_version offset=0 $defaults || ok=1
	pvt_case "$role" f6ab foreign $defaults || ok=1
	pvt_case "$role" "${M}00010303" unknown_version offset=0 $defaults || ok=1
	pvt_case "$role" "${M}02010303" unknown_version offset=0 $defaults || ok=1
	pvt_case "$role" "${M}ff010303" unknown_version offset=0 $defaults || ok=1
	pvt_case "$role" "${M}01fe0303" found peer_r=0 peer_send=4096 reminv=0 || ok=1
	pvt_case "$role" "${M}01ff0303" found peer_r=1 reminv=1 || ok=1
	pvt_case "$role" 4d5041204944205265712046 foreign $defaults || ok=1
	return $ok
}

# pvt_peer as a client sends our listener odd private data (the CM pads a
# REQ's to 56 octets): none; every length from 1 to 7 octets (the bare
# identifier is version 0); versions 0, 2 and 255; every reserved flag bit
# set, with and without R; size codes 0 and 255; foreign data; the
# identifier at offset 48 (the last where a message fits) and 49
# (truncated); two identifiers, the first defective or both good; 56 random
# octets (fixed here).
hostile_private_data_from_clients() {
	local ok=0 z48 z49
	z48=$(printf '0%.0s' {1..96})
	z49=$(printf '0%.0s' {1..98})
	load_module listen="$ADDR:$PORT" send_size=16384 recv_size=16384 || return 1
	pvt_case client "" absent $defaults || ok=1
	pvt_cases_either_role client || ok=1
	# The other lengths from 1 to 7 octets: the CM zero-pads a REQ's private
	# data to 56 octets, so a partial id is foreign data, and the id and a
	# version is a message with R=0 and size codes 0. Truncation needs the id
	# in the last 7 octets.
	pvt_case client f6 foreign $defaults || ok=1
	pvt_case client f6ab0e foreign $defaults || ok=1
	pvt_case client f6ab0e1801 found offset=0 $defaults || ok=1
	pvt_case client f6ab0e18010103 found offset=0 peer_r=1 peer_send=4096 peer_recv=1024 \
		c2s=4096 s2c=1024 reminv=1 || ok=1
	pvt_case client "${z48}${M}01010303" found offset=48 c2s=4096 s2c=4096 reminv=1 || ok=1
	pvt_case client "${z49}${M}010103" truncated offset=49 $defaults || ok=1
	pvt_case client "${M}02010303${M}01000f0f" found offset=8 peer_r=0 peer_send=16384 c2s=16384 || ok=1
	pvt_case client "${M}01010303${M}01000f0f" found offset=0 peer_r=1 c2s=4096 || ok=1
	pvt_case client "${M}010000ff" found peer_send=1024 peer_recv=262144 c2s=1024 s2c=16384 || ok=1
	pvt_case client 53fdb1f2dbbe630abecfcb7c31571834aeb5e4bccc8a9f23972372f8d0d8d90c7fa4acef09ed3dde45326c08c2c21b09a1d05684e8c1edb0 foreign $defaults || ok=1
	return $ok
}

# The same with our client connecting to pvt_peer as a server (the CM pads
# a REP's private data to 196 octets): the REQ cases but lengths 1, 3, 5
# and 7, with the REP's own offsets (188 and 189), a message followed by
# zero octets, and 196 random octets.
hostile_private_data_from_servers() {
	local ok=0 z188 z189
	z188=$(printf '0%.0s' {1..376})
	z189=$(printf '0%.0s' {1..378})
	load_module send_size=16384 recv_size=16384 || return 1
	pvt_case server "" absent peer_pvt_len=196 $defaults || ok=1
	pvt_case server "${z188}${M}01000303" found offset=188 c2s=4096 s2c=4096 reminv=0 || ok=1
	pvt_case server "${z189}${M}010003" truncated offset=189 $defaults || ok=1
	pvt_case server "${M}01010707${Z8}" found offset=0 peer_r=1 c2s=8192 reminv=1 || ok=1
	# The REQ cases again, now in a REP (also zero-padded, to 196).
	pvt_cases_either_role server || ok=1
	pvt_case server "${M}02010303${M}01000f0f" found offset=8 peer_r=0 peer_send=16384 \
		peer_recv=16384 c2s=16384 s2c=16384 reminv=0 || ok=1
	pvt_case server "${M}01010303${M}01000f0f" found offset=0 peer_r=1 c2s=4096 s2c=4096 reminv=1 || ok=1
	pvt_case server "${M}010000ff" found peer_send=1024 peer_recv=262144 c2s=16384 s2c=1024 || ok=1
	pvt_case server 6565ed87ca32c1c5edcc2df167f68fbb8088bfcd005325a2f64e5cb64ac52c6406c9bea577c94436f1639980ab4a7a254aa91f239c33f6714ed7a650a9c515db3c08f396079b7de7b387785efe52cf7212c9aed7bafa96fcc8626d7190134b2a575c8b4085e15e12ce2e4cb2116640193a9a271079386d4ea56d971ad00c2727edb8396597dbf5c86295f1f211491f8bb836852fb6255827587d0b4ee92629b57810cc1620fbe1220db5d42ed600fdfa2666037838cca9eabbea871e4d4f62578febbbef foreign $defaults || ok=1
	return $ok
}

# w WORD...: 32-bit words in hex, as they go on the wire.
w() { printf '%08x' "$@"; }

# Our responder against a peer sending malformed RPC-over-RDMA messages
# (pvt_peer as a client): transport version 2, procedure 7, RDMA_MSGP,
# RDMA_DONE, a truncated Read list, a list discriminator of 2, a misaligned
# position, 1000 segments, RDMA_NOMSG without a Read chunk, an RPC reply as
# a call, an RDMA_ERROR from the requester, 8 octets. Each gets the RFC 8166
# answer (RDMA_ERROR with ERR_VERS or ERR_CHUNK; GARBAGE_ARGS for the reply
# as a call), or is dropped when there is no XID to answer or it is an
# RDMA_ERROR; a Read chunk with a bogus rkey ends the connection cleanly.
# Counters show each kind; no oops (dmesg_clean).
malformed_headers_from_a_client() {
	local out sl sid ok=0 null echo_call
	load_module listen="$ADDR:$PORT" || return 1
	echo_call=$(w 17 0 2 $((0x20008797)) 1 0 0 0 0 0)
	null=$(w 17 1 4 0 0 0 0)$echo_call
	out=$(timeout 60 "$PVT_PEER" client "$ADDR" $PORT f6ab0e1801010303 \
		"$null" \
		"$(w 18 2 4 0 0 0 0)" \
		"$(w 19 1 4 7 0 0 0)" \
		"$(w 20 1 4 2 0 0 0)" \
		"$(w 21 1 4 3 0 0 0)" \
		"$(w 22 1 4 0 1)" \
		"$(w 23 1 4 0 2 0 0)" \
		"$(w 24 1 4 0 1 2 1 64 0 0 0 0 0)" \
		"$(w 25 1 4 0 0 1 1000 0)" \
		"$(w 26 1)" \
		"$(w 27 1 4 4 2)" \
		"$(w 28 1 4 0 0 0 0 28 1 0 0)" \
		"$(w 29 1 4 1 0 0 0)" \
		"$(w 30 1 4 0 1 $((0x2c)) $((0x12345678)) 100 0 4096 0 0 0)$(w 30 0 2 $((0x20008797)) 1 1 0 0 0 0 100)" \
		2>&1)
	echo "$out" | sed 's/^/# /'
	# The lines after "established", one per message, in order.
	mapfile -t r < <(echo "$out" | sed -n '/^established/,$p' | tail -n +2)
	want() { # index expected-prefix what
		[[ "${r[$1]-}" == "$2"* ]] || { ktap_print_msg "message $1 ($3): expected '$2...', got '${r[$1]-}'"; ok=1; }
	}
	want 0 "reply len=52 $(w 17 1 4 0 0 0 0 17 1 0 0 0 0)" "valid NULL (4 credits granted, as asked)"
	# An RDMA_ERROR for a header we cannot decode grants what the connection
	# grants (16 Receives of 4 KiB posted at first: 15), not 1.
	want 1 "reply len=28 $(w 18 1 15 4 1 1 1)" "version 2: ERR_VERS 1-1"
	want 2 "reply len=20 $(w 19 1 15 4 2)" "procedure 7: ERR_CHUNK"
	want 3 "reply len=20 $(w 20 1 15 4 2)" "RDMA_MSGP: ERR_CHUNK"
	want 4 "reply len=20 $(w 21 1 15 4 2)" "RDMA_DONE: ERR_CHUNK"
	want 5 "reply len=20 $(w 22 1 15 4 2)" "truncated Read list"
	want 6 "reply len=20 $(w 23 1 15 4 2)" "discriminator 2"
	want 7 "reply len=20 $(w 24 1 15 4 2)" "misaligned position"
	want 8 "reply len=20 $(w 25 1 15 4 2)" "1000 segments"
	want 9 "no reply" "8 octets: no XID to answer"
	want 10 "no reply" "an RDMA_ERROR from the requester"
	want 11 "reply len=52 $(w 28 1 4 0 0 0 0 28 1 0 0 0 4)" "an RPC reply as a call: GARBAGE_ARGS"
	want 12 "reply len=20 $(w 29 1 4 4 2)" "RDMA_NOMSG without a Read chunk"
	[[ "${r[13]-}" == "connection lost" || "${r[13]-}" == "no reply" ]] ||
		{ ktap_print_msg "bogus rkey: expected the connection to end, got '${r[13]-}'"; ok=1; }
	sl=$(grep " role=server " "$DBG/connections" | tail -1)
	sid=$(field "$sl" id)
	wait_field "$sid" state disconnected || ok=1
	ktap_print_msg "$(grep "^id=$sid " "$DBG/xprt")"
	[ "$(xcount "$sid" header_errors)" = 9 ] || { fail "header_errors"; ok=1; }
	[ "$(xcount "$sid" rdma_error_sent)" = 9 ] || { fail "rdma_error_sent"; ok=1; }
	[ "$(xcount "$sid" rdma_error_received)" = 1 ] || { fail "rdma_error_received"; ok=1; }
	# RDMA_NOMSG without its Read chunk, and the bogus rkey.
	[ "$(xcount "$sid" chunk_errors)" = 2 ] || { fail "chunk_errors"; ok=1; }
	return $ok
}

# hostile_server PORT REPLY...: starts pvt_peer as a server answering calls
# with the REPLYs (see selftests/tools/pvt_peer.c), connects our client to it
# and prints the connection id once established.
hostile_server() {
	local port=$1 out=/tmp/hostile_server.$1
	shift
	timeout -s KILL 120 "$PVT_PEER" server "$ADDR" "$port" f6ab0e1801010303 reply "$@" >$out 2>&1 &
	for i in $(seq 1 50); do grep -q listening $out && break; sleep 0.1; done
	connected "$ADDR $port"
}

# A hostile server answering our client's calls with crafted replies (the
# numbered cases below: a short reply, unmatched and repeated XIDs, bad
# headers, chunks the call did not offer, credits 0 and 65535 taken as 1
# and 32, an RDMA_ERROR sent with invalidate, no reply, an rkey that is not
# ours, a reply larger than our Receive buffers): each call ends with
# the RFC 8166 outcome or a clean error, at once (only the server that
# never answers costs the call timeout; the last two end the connection and
# fail the call within 5 s), and its counter rises; no oops, and no MR is
# left once the connections are gone.
malformed_replies_from_a_server() {
	local id ok=0 mr0 hdr ok_rpc good t0 i
	local -a replies
	hdr="XXXXXXXX$(w 1 32 0 0 0 0)" # RDMA_MSG, 32 credits, no chunks
	ok_rpc="XXXXXXXX$(w 1 0 0 0 0)" # MSG_ACCEPTED, AUTH_NONE verifier, SUCCESS
	good=$hdr$ok_rpc
	replies=(
		# 1. 8 octets (XID and version only: dropped, as xprtrdma does), then the reply
		"XXXXXXXX$(w 1)+$good"
		# 2. a reply to an XID nobody waits for, then the right one
		"$(w 0 1 32 0 0 0 0 0 1 0 0 0 0)+$good"
		# 3. the right reply twice
		"$good+$good"
		# 4. RDMA_ERROR / ERR_VERS
		"XXXXXXXX$(w 1 32 4 1 1 1)"
		# 5. transport version 2
		"XXXXXXXX$(w 2 32 0 0 0 0)$ok_rpc"
		# 6. RDMA_NOMSG without a Reply chunk
		"XXXXXXXX$(w 1 32 1 0 0 0)"
		# 7. RDMA_NOMSG into a Reply chunk the call did not offer
		"XXXXXXXX$(w 1 32 1 0 0 1 1 4660 4096 0 0)"
		# 8. a Write chunk the call did not offer
		"XXXXXXXX$(w 1 32 0 0 1 1 4660 65536 0 0 0 0)$ok_rpc"
		# 9. 1 MiB "written" to an 8 KiB Write chunk
		"XXXXXXXX$(w 1 32 0 0 1 1)HHHHHHHH$(w 1048576 0 0 0 0)$ok_rpc$(w 8192)"
		# 10. an RPC call where the reply should be
		"${hdr}XXXXXXXX$(w 0 2 1 1 1 0 0 0 0)"
		# 11. the RPC reply's XID differs from the transport header's
		"$hdr$(w 0 1 0 0 0 0)"
		# 12. and 13. zero credits, then 65535
		"XXXXXXXX$(w 1 0 0 0 0 0)$ok_rpc"
		"XXXXXXXX$(w 1 65535 0 0 0 0)$ok_rpc"
		# 14. RDMA_ERROR / ERR_CHUNK sent with invalidate of the call's Read chunk
		"inv:XXXXXXXX$(w 1 32 4 2)"
		# 15. no reply
		"-"
		# 16. the right reply, sent with invalidate of an rkey that is not ours:
		# our Receive fails (remote invalidate request error), the QP is dead
		"inv=deadbeef:$good"
	)
	case_() { # N RESULT ARGS...: one call; RESULT is success or an errno
		local n=$1 want=$2 line
		shift 2
		rpc "$id" "$@" 2>/dev/null
		line=$(last_rpc)
		ktap_print_msg "$n: $line"
		if [ "$want" = success ]; then
			expect "$line" result=success
		else
			expect "$line" result=error error="$want"
		fi || { ktap_print_msg "case $n (${replies[$((n - 1))]:0:60}...): expected $want"; ok=1; }
	}
	want_x() { # NAME VALUE
		[ "$(xcount "$id" "$1")" = "$2" ] || { fail "$1: $(xcount "$id" "$1"), expected $2"; ok=1; }
	}
	credits() { field "$(grep "^id=$id " "$DBG/xprt")" credits; }
	load_module || return 1
	mr0=$(mrs)
	id=$(hostile_server 20084 "${replies[@]}") || return 1
	case_ 1 success null
	case_ 2 success null
	case_ 3 success null
	case_ 4 -121 null
	case_ 5 -71 null
	case_ 6 -71 null
	case_ 7 -71 null
	case_ 8 -71 null
	case_ 9 -71 echo 8192
	case_ 10 -71 null
	case_ 11 -71 null
	case_ 12 success null
	[ "$(credits)" = 1 ] || { fail "0 credits granted: now $(credits), expected 1"; ok=1; }
	case_ 13 success null
	[ "$(credits)" = 32 ] || { fail "65535 credits granted: now $(credits), expected 32"; ok=1; }
	case_ 14 -121 echo 8192
	case_ 15 -110 null
	t0=$SECONDS
	case_ 16 -107 null
	[ $((SECONDS - t0)) -lt 5 ] || { fail "the call on a dead QP took $((SECONDS - t0)) s"; ok=1; }
	wait_field "$id" state disconnected 90 || ok=1
	diag cat /tmp/hostile_server.20084
	ktap_print_msg "$(grep "^id=$id " "$DBG/xprt")"
	want_x header_errors 3
	want_x replies_unmatched 2
	want_x rdma_error_received 2
	want_x chunk_errors 3
	want_x rpc_errors 2
	want_x remote_invalidations 1
	# Cases 9 and 14 registered 2 chunks each; 14's Read chunk was invalidated
	# by the server.
	want_x local_invalidations 3
	want_x rpc_timeouts 1
	want_x recv_errors 1
	# 17. a reply larger than our Receive buffers (recv_size 4096): that
	# Receive fails, the connection ends, the call fails at once.
	id=$(hostile_server 20085 "pad=8192:$good") || return 1
	t0=$SECONDS
	case_ 17 -107 null
	[ $((SECONDS - t0)) -lt 5 ] || { fail "the call on a dead QP took $((SECONDS - t0)) s"; ok=1; }
	wait_field "$id" state disconnected 90 || ok=1
	diag cat /tmp/hostile_server.20085
	want_x recv_errors 1
	wait
	[ "$(mrs)" = "$mr0" ] || { fail "MRs: $(mrs), $mr0 before"; ok=1; }
	return $ok
}

# Peers that misbehave at the connection level: one that rejects, an address
# nobody answers for (`disconnect` ends the connect; left alone, the CM's own
# REQ timeout does), a server that accepts and disconnects at once, and one
# killed while our RPC is in flight (the call fails).
peers_that_reject_vanish_or_never_answer() {
	local id ok=0 t0 pid out=/tmp/peer.out
	load_module || return 1
	# 1. rejects
	timeout -s KILL 20 "$PVT_PEER" server "$ADDR" 20081 f6ab0e1801010303 reject >$out 2>&1 &
	pid=$!
	for i in $(seq 1 50); do grep -q listening $out && break; sleep 0.1; done
	id=$(client_connect "$ADDR 20081") || return 1
	wait_field "$id" state rejected || ok=1
	wait $pid
	# 2. nobody answers: the dummy device takes the REQ and drops it, so the
	# CM's own REQ timeout (rdma_cm's defaults: about a minute) ends it.
	# The user need not wait for it: "disconnect" ends a connect in progress.
	id=$(client_connect "192.0.2.98 20049") || return 1
	wait_field "$id" state connecting || ok=1
	echo "disconnect $id" >"$DBG/control" || { fail "disconnect while connecting"; ok=1; }
	expect "$(conn_line "$id")" state=closed_by_user || ok=1
	t0=$SECONDS
	id=$(client_connect "192.0.2.99 20049") || return 1
	for ((i = 0; i < 1200; i++)); do
		case $(field "$(conn_line "$id")" state) in
		unreachable | connect_error | addr_error | route_error) break ;;
		esac
		sleep 0.1
	done
	ktap_print_msg "unanswered peer: $(conn_line "$id" | cut -d' ' -f3-4) after $((SECONDS - t0)) s"
	[[ "$(field "$(conn_line "$id")" state)" =~ ^(unreachable|connect_error|addr_error|route_error)$ ]] || ok=1
	# 3. accepts, then disconnects at once
	timeout -s KILL 20 "$PVT_PEER" server "$ADDR" 20082 f6ab0e1801010303 hangup >$out 2>&1 &
	pid=$!
	for i in $(seq 1 50); do grep -q listening $out && break; sleep 0.1; done
	id=$(client_connect "$ADDR 20082") || return 1
	wait_field "$id" state disconnected || ok=1
	rpc "$id" null 2>/dev/null && { fail "call after hang-up succeeded"; ok=1; }
	wait $pid
	# 4. accepts and never replies; killed while our call waits
	timeout -s KILL 30 "$PVT_PEER" server "$ADDR" 20083 f6ab0e1801010303 >$out 2>&1 &
	pid=$!
	for i in $(seq 1 50); do grep -q listening $out && break; sleep 0.1; done
	id=$(client_connect "$ADDR 20083") || return 1
	wait_field "$id" state established || ok=1
	(sleep 2; pkill -KILL -f "pvt_peer server $ADDR 20083") &
	t0=$SECONDS
	rpc "$id" echo 100 2>/dev/null && { fail "call to a vanished peer succeeded"; ok=1; }
	ktap_print_msg "call to a vanishing peer: $(last_rpc) after $((SECONDS - t0)) s; connection: $(field "$(conn_line "$id")" state)"
	expect "$(last_rpc)" result=error || ok=1
	wait
	[ "$(field "$(conn_line "$id")" state)" != established ] || wait_field "$id" state disconnected || ok=1
	return $ok
}

# 1000 connect/disconnect cycles through our own listener (both roles each
# time; 50 at a time), 64 connections at once, and an unload while 16 more
# are being set up. Nothing leaks (the debug kernel's kmemleak), nothing
# oopses.
churn_connects_and_unload() {
	local i r id ok=0 first n
	# All from one address, more than max_connections_per_peer's default.
	load_module listen="$ADDR:$PORT" max_connections_per_peer=256 || return 1
	# 20 rounds of 50: connect, wait until all are established, disconnect.
	for ((r = 0; r < 20; r++)); do
		first=$(($(max_conn_id) + 1))
		for ((i = 0; i < 50; i++)); do echo "connect $ADDR $PORT" >"$DBG/control" || ok=1; done
		for ((i = 0; i < 600; i++)); do
			n=$(awk -v f=$first '{ v = $1; sub("id=", "", v) } v + 0 >= f && / role=client state=established /' "$DBG/connections" | wc -l)
			[ "$n" -ge 50 ] && break
			sleep 0.05
		done
		[ "$n" = 50 ] || { fail "round $r: $n of 50 established"; ok=1; break; }
		for id in $(awk -v f=$first '{ v = $1; sub("id=", "", v) } v + 0 >= f && / role=client /{ print v }' "$DBG/connections"); do
			echo "disconnect $id" >"$DBG/control" || ok=1
		done
	done
	ktap_print_msg "$((r * 50)) cycles; established=$(stat established) disconnects=$(stat disconnects) user_disconnects=$(stat user_disconnects)"
	[ "$(stat established)" -ge 2000 ] || { fail "fewer than 2000 connection ends established"; ok=1; }
	first=$(($(max_conn_id) + 1))
	for ((i = 0; i < 64; i++)); do echo "connect $ADDR $PORT" >"$DBG/control" || ok=1; done
	for ((i = 0; i < 300; i++)); do
		n=$(awk -v f=$first '{ v = $1; sub("id=", "", v) } v + 0 >= f && / role=client state=established /' "$DBG/connections" | wc -l)
		[ "$n" -ge 64 ] && break
		sleep 0.1
	done
	ktap_print_msg "$n of 64 concurrent connections established"
	[ "$n" = 64 ] || ok=1
	for ((i = 0; i < 16; i++)); do echo "connect $ADDR $PORT" >"$DBG/control"; done
	diag rmmod rpcrdma_cm || { fail "rmmod while connecting"; ok=1; }
	return $ok
}

# elapsed T0: seconds since T0 (date +%s.%N), with two decimals.
elapsed() { echo "$(date +%s.%N) $1" | awk '{ printf "%.2f", $1 - $2 }'; }

# Unload while a CM handler is closing its connection. A userspace client
# (pvt_peer) connects to our listener and hangs up; the server end's
# DISCONNECTED handler takes the connection's id and sleeps
# test_teardown_delay_ms (3 s) before releasing it; rmmod comes during that
# sleep. Unloading must wait for the handler and for the teardown it defers:
# rmmod returns only after the sleep (at least 1.5 s after it started), the
# ids are gone, nothing oopses. A module that did not wait would return at
# once and the handler would wake up in freed code.
unload_waits_for_closing_handler() {
	local out=/tmp/peer.out sid t0 took ok=0
	load_module listen="$ADDR:$PORT" test_teardown_delay_ms=3000 || return 1
	timeout -s KILL 20 "$PVT_PEER" client "$ADDR" $PORT f6ab0e1801010303 >$out 2>&1 ||
		{ fail "pvt_peer client: $(cat $out)"; return 1; }
	sid=$(field "$(grep " role=server " "$DBG/connections" | tail -1)" id)
	# The handler records the close, then sleeps holding the id.
	wait_field "$sid" state disconnected 10 || return 1
	t0=$(date +%s.%N)
	diag rmmod rpcrdma_cm || { fail "rmmod failed"; return 1; }
	took=$(elapsed "$t0")
	ktap_print_msg "rmmod took $took s while a handler slept 3 s with its id"
	awk -v t="$took" 'BEGIN { exit !(t >= 1.5) }' || { fail "rmmod did not wait for the handler"; ok=1; }
	! module_loaded || { fail "module still loaded"; ok=1; }
	# Give a handler that outlived the module time to wake up and crash.
	sleep 4
	klog | grep -E 'BUG:|Oops|general protection|unable to handle' && { fail "oops after unload"; ok=1; }
	return $ok
}

# 50 rounds of: load, 8 connections to our own listener (both ends in the
# module), rmmod at once or after up to 0.4 s (mid-connect, mid-accept or
# established). No oops, no hang, no leak (dmesg_clean; kmemleak on the debug
# kernel).
unload_stress_with_self_connections() {
	local r i ok=0 t0=$SECONDS
	unload_module || return 1
	for ((r = 0; r < 50; r++)); do
		insmod "$KO" $KO_ARGS listen="$ADDR:$PORT" || { fail "round $r: insmod"; return 1; }
		for ((i = 0; i < 8; i++)); do
			echo "connect $ADDR $PORT" >"$DBG/control" || { fail "round $r: connect"; ok=1; }
		done
		((r % 2)) && sleep "0.$((r % 5))"
		rmmod rpcrdma_cm || { fail "round $r: rmmod"; return 1; }
	done
	ktap_print_msg "50 rounds of load, 8 self-connections, rmmod in $((SECONDS - t0)) s"
	return $ok
}

# memavail: MemAvailable in KiB.
memavail() { awk '/^MemAvailable:/ { print $2 }' /proc/meminfo; }

# flood_result FILE: waits (60 s) for pvt_peer's "flood ..." line; prints it.
flood_result() {
	local end=$((SECONDS + 60))
	until grep -q "^flood " "$1"; do
		[ "$SECONDS" -lt "$end" ] || { cat "$1" >&2; return 1; }
		sleep 0.2
	done
	grep "^flood " "$1"
}

# A userspace peer opens more connections than the limits allow, advertising
# 256 KiB inline sizes, while our module advertises 256 KiB too (the largest
# buffers there are). max_connections_per_peer and max_connections refuse the
# excess with a CM reject and a counter; free memory stays within 64 MiB of
# what it was (each accepted connection posts 2 Receives of 256 KiB until its
# client uses its credits, Send buffers come on first use); an honest client
# connected before the flood keeps being served throughout, every chunk type.
# With max_connections=16 and max_connections_per_peer=8: 40 connections
# from 192.0.2.2 (8 accepted, 32 rejected), then 40 from 192.0.2.3 (7
# accepted, 33 rejected: the global cap, the honest client holding one
# place); once the flood ends its places come back.
connection_flood_is_capped() {
	local ok=0 honest before during r1 r2 pid1 pid2 line id i
	ip addr add 192.0.2.2/24 dev dummy0 2>/dev/null
	ip addr add 192.0.2.3/24 dev dummy0 2>/dev/null
	load_module listen="$ADDR:$PORT" send_size=262144 recv_size=262144 \
		max_connections=16 max_connections_per_peer=8 || return 1
	honest=$(connected "$ADDR $PORT") || return 1
	echo_case "$honest" 100000 1 inline inline || ok=1
	before=$(memavail)
	# 40 connections from 192.0.2.2: 8 accepted (the per-peer cap).
	timeout -s KILL 120 "$PVT_PEER" flood "$ADDR" $PORT f6ab0e180101ffff 40 30 192.0.2.2 >/tmp/flood1.out 2>&1 &
	pid1=$!
	r1=$(flood_result /tmp/flood1.out) || { fail "first flood gave no result"; return 1; }
	# 40 more from 192.0.2.3: 16 - 9 = 7 accepted (the global cap).
	timeout -s KILL 120 "$PVT_PEER" flood "$ADDR" $PORT f6ab0e180101ffff 40 20 192.0.2.3 >/tmp/flood2.out 2>&1 &
	pid2=$!
	r2=$(flood_result /tmp/flood2.out) || { fail "second flood gave no result"; return 1; }
	during=$(memavail)
	ktap_print_msg "from 192.0.2.2: $r1; from 192.0.2.3: $r2"
	ktap_print_msg "MemAvailable $((before / 1024)) MiB before, $((during / 1024)) MiB with $(stat server_connections_open) server connections open"
	ktap_print_msg "rejects_max_per_peer=$(stat rejects_max_per_peer) rejects_max_connections=$(stat rejects_max_connections) rejects_sent=$(stat rejects_sent)"
	[ "$r1" = "flood established=8 rejected=32 failed=0" ] || { fail "first flood: $r1"; ok=1; }
	[ "$r2" = "flood established=7 rejected=33 failed=0" ] || { fail "second flood: $r2"; ok=1; }
	[ "$(stat rejects_max_per_peer)" = 32 ] || { fail "rejects_max_per_peer"; ok=1; }
	[ "$(stat rejects_max_connections)" = 33 ] || { fail "rejects_max_connections"; ok=1; }
	[ "$(stat server_connections_open)" = 16 ] || { fail "server_connections_open"; ok=1; }
	[ $((before - during)) -lt 65536 ] || { fail "the flood took $(((before - during) / 1024)) MiB"; ok=1; }
	# The honest client, during the flood: every chunk type.
	echo_case "$honest" 8 1 inline inline || ok=1
	echo_case "$honest" 300000 1 read_chunk write_list || ok=1
	echo_case "$honest" 300000 0 long reply_chunk || ok=1
	line=$(grep " role=server state=established" "$DBG/connections" | tail -1)
	ktap_print_msg "a flood connection: $(grep "^id=$(field "$line" id) " "$DBG/xprt")"
	kill "$pid1" "$pid2" 2>/dev/null
	wait "$pid1" "$pid2" 2>/dev/null
	# The flood's connections go; their places come back.
	for ((i = 0; i < 100; i++)); do
		[ "$(stat server_connections_open)" = 1 ] && break
		sleep 0.2
	done
	[ "$(stat server_connections_open)" = 1 ] || { fail "$(stat server_connections_open) server connections left"; ok=1; }
	id=$(connected "$ADDR $PORT") || ok=1
	echo_case "$honest" 1000 1 inline inline || ok=1
	return $ok
}

# With idle_timeout=5, a server connection that carries nothing is closed
# after 5 to 6 s (state idle_timeout; its client sees the disconnect), while
# one that keeps calling (every 0.3 s, for 10 s) stays up.
idle_server_connections_are_closed() {
	local idle busy end ok=0 busy_line disc
	load_module listen="$ADDR:$PORT" idle_timeout=5 || return 1
	idle=$(connected "$ADDR $PORT") || return 1
	busy=$(connected "$ADDR $PORT") || return 1
	end=$((SECONDS + 10))
	while [ "$SECONDS" -lt "$end" ]; do
		rpc "$busy" null || { fail "busy connection: a call failed"; ok=1; break; }
		sleep 0.3
	done
	# Right after a call: the busy connection cannot have idled for 5 s.
	busy_line=$(server_for "$busy")
	disc=$(stat idle_disconnects)
	ktap_print_msg "idle: $(server_for "$idle" | cut -d' ' -f1-3); busy: $(echo "$busy_line" | cut -d' ' -f1-3)"
	server_for "$idle" | grep -q " state=idle_timeout " || { fail "idle connection not closed"; ok=1; }
	wait_field "$idle" state disconnected || ok=1
	echo "$busy_line" | grep -q " state=established " || { fail "busy connection closed"; ok=1; }
	[ "$disc" = 1 ] || { fail "idle_disconnects=$disc"; ok=1; }
	return $ok
}

# A server that never answers, holding our calls: a call that times out or is
# interrupted keeps its credit (RFC 8166 Section 3.3.1), so no call beyond
# the grant is sent (with rnr_retry 0 an extra Send would kill the
# connection). `bench` stops on the signal instead of abandoning the rest:
# a bench of 20 calls stopped by SIGTERM after 3 s sent one call (the
# credit of 1 stays taken), a further call is not sent, the server saw
# exactly one call, and the connection stays up.
abandoned_calls_keep_their_credit() {
	local out=/tmp/peer.out pid id ok=0 calls
	load_module || return 1
	timeout -s KILL 60 "$PVT_PEER" server "$ADDR" 20084 f6ab0e1801010303 reply - - - - - - >$out 2>&1 &
	pid=$!
	for i in $(seq 1 50); do grep -q listening $out && break; sleep 0.1; done
	id=$(connected "$ADDR 20084") || return 1
	# One credit until the first reply; the bench's first call takes it.
	timeout -s TERM 3 sh -c "echo 'bench $id 20 echo 64' >$DBG/control"
	ktap_print_msg "bench: $(cat "$DBG/bench")"
	expect "$(cat "$DBG/bench")" calls=20 ok=0 errors=1 interrupted=1 || ok=1
	timeout -s TERM 2 sh -c "echo 'call $id echo 8' >$DBG/control" && { fail "a call without credit succeeded"; ok=1; }
	ktap_print_msg "$(grep "^id=$id " "$DBG/xprt")"
	[ "$(xcount "$id" calls_sent)" = 1 ] || { fail "calls_sent=$(xcount "$id" calls_sent), expected 1"; ok=1; }
	[ "$(xcount "$id" calls_abandoned)" = 1 ] || { fail "calls_abandoned"; ok=1; }
	calls=$(grep -c "^call len=" $out)
	[ "$calls" = 1 ] || { fail "the server received $calls calls, expected 1"; ok=1; }
	expect "$(conn_line "$id")" state=established || ok=1
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	return $ok
}

# The device goes away between rdma_listen() and the listener being recorded
# (test_listen_delay_ms widens that window to 4 s): `rdma link delete` must
# not wait for the module to be unloaded (it returns within 15 s), the
# listener is dead, and it listens again once a device is added
# (listener_restarts 1; a 70000-octet echo goes through).
device_removal_while_listener_starts() {
	local t0 took rc ipid id ok=0
	unload_module || return 1
	insmod "$KO" $KO_ARGS listen="$ADDR:$PORT" test_listen_delay_ms=4000 &
	ipid=$!
	sleep 1.5
	grep -q "state=starting" "$DBG/listeners" 2>/dev/null || ktap_print_msg "listeners: $(cat "$DBG/listeners" 2>&1)"
	t0=$(date +%s.%N)
	timeout -s KILL 30 rdma link delete rxe0
	rc=$?
	took=$(elapsed "$t0")
	wait "$ipid" || { fail "insmod failed"; ok=1; }
	ktap_print_msg "rdma link delete: exit $rc after $took s; listeners: $(cat "$DBG/listeners")"
	[ "$rc" = 0 ] || { fail "rdma link delete failed or hung"; ok=1; }
	awk -v t="$took" 'BEGIN { exit !(t < 15) }' || { fail "rdma link delete waited $took s"; ok=1; }
	grep -q "addr=$ADDR:$PORT state=dead" "$DBG/listeners" || { fail "listener not dead"; ok=1; }
	setp test_listen_delay_ms 0
	rdma link show rxe0/1 >/dev/null 2>&1 || diag rdma link add rxe0 type rxe netdev dummy0 || { fail "cannot re-add rxe0"; return 1; }
	for i in $(seq 1 100); do grep -q "state=listening" "$DBG/listeners" && break; sleep 0.1; done
	grep -q "addr=$ADDR:$PORT state=listening" "$DBG/listeners" || { fail "listener did not come back"; ok=1; }
	[ "$(stat listener_restarts)" = 1 ] || { fail "listener_restarts=$(stat listener_restarts)"; ok=1; }
	id=$(connected "$ADDR $PORT") || return 1
	echo_case "$id" 70000 1 read_chunk write_list || ok=1
	return $ok
}

# RFC 8797 Section 3.2: R only where the device supports remote invalidation.
# With test_no_mem_mgt_ext every device counts as lacking memory management
# extensions: both ends send R=0 whatever remote_invalidate says, debugfs says
# why (dev_reminv=0, reminv_device_unsupported), and chunked replies work
# without Send With Invalidate. With a capable device (rxe) both send R=1 and
# the server invalidates remotely. XIDs start at random values.
remote_invalidation_needs_device_support() {
	local id sid id2 sid2 x1 x2 ok=0
	load_module listen="$ADDR:$PORT" test_no_mem_mgt_ext=1 || return 1
	id=$(connected "$ADDR $PORT") || return 1
	sid=$(field "$(server_for "$id")" id)
	expect "$(conn_line "$id")" sent=f6ab0e1801000303 dev_reminv=0 peer_r=0 reminv=0 || ok=1
	expect "$(server_for "$id")" sent=f6ab0e1801000303 dev_reminv=0 peer_r=0 reminv=0 || ok=1
	[ "$(stat reminv_device_unsupported)" = 2 ] || { fail "reminv_device_unsupported=$(stat reminv_device_unsupported)"; ok=1; }
	echo_case "$id" 65536 1 read_chunk write_list || ok=1
	echo_case "$id" 8000 0 long reply_chunk || ok=1
	x1=$(field "$(last_rpc)" xid)
	[ "$(xcount "$sid" send_with_invalidate)" = 0 ] || { fail "Send With Invalidate without device support"; ok=1; }
	[ "$(xcount "$id" local_invalidations)" = 4 ] || { fail "local_invalidations=$(xcount "$id" local_invalidations)"; ok=1; }
	setp test_no_mem_mgt_ext 0
	id2=$(connected "$ADDR $PORT") || return 1
	sid2=$(field "$(server_for "$id2")" id)
	expect "$(conn_line "$id2")" sent=f6ab0e1801010303 dev_reminv=1 peer_r=1 reminv=1 || ok=1
	echo_case "$id2" 65536 1 read_chunk write_list || ok=1
	x2=$(field "$(last_rpc)" xid)
	[ "$(xcount "$sid2" send_with_invalidate)" = 1 ] || { fail "no Send With Invalidate on a capable device"; ok=1; }
	ktap_print_msg "first XIDs: connection $id $x1, connection $id2 $x2"
	[ "$x1" != "$(printf '0x%08x' $(((id << 24) + 1)))" ] && [ "$x2" != "$(printf '0x%08x' $((id2 << 24)))" ] ||
		{ fail "XIDs are not random"; ok=1; }
	return $ok
}

# Linux's rpcrdma.ko holds the class names "rdma": loading ours with the
# default server class name, or with its client class (xprt_class=Y), fails
# with one clear line; svc_class=rdmacm xprt_class=0 works and shows in
# /proc/sys/sunrpc/transports beside rpcrdma.ko's class.
svc_class_conflicts_with_rpcrdma() {
	local ok=0
	load_c_transport || return 1
	unload_module || return 1
	refused_by_rpcrdma server || ok=1
	# The client class too: rpcrdma.ko holds XPRT_TRANSPORT_RDMA.
	refused_by_rpcrdma client svc_class=rdmacm || ok=1
	insmod "$KO" svc_class=rdmacm xprt_class=0 || { fail "insmod svc_class=rdmacm xprt_class=0"; return 1; }
	ktap_print_msg "transports: $(tr '\n' ' ' </proc/sys/sunrpc/transports)"
	grep -q '^rdmacm ' /proc/sys/sunrpc/transports || { fail "class rdmacm not registered"; ok=1; }
	grep -q '^rdma ' /proc/sys/sunrpc/transports || { fail "rpcrdma.ko's class gone"; ok=1; }
	return $ok
}

# refused_by_rpcrdma server|client [PARAM...]: `insmod rpcrdma_cm.ko PARAM...`
# fails while rpcrdma.ko holds that transport class "rdma", and the kernel
# log says why in one line.
refused_by_rpcrdma() {
	local which=$1
	shift
	if insmod "$KO" "$@" 2>/dev/null; then
		fail "loaded ($*) while rpcrdma.ko holds the $which class"
		rmmod rpcrdma_cm
		return 1
	fi
	klog | grep -q "rpcrdma_cm: $which transport class \"rdma\" is registered already" ||
		{ fail "no message saying why ($which class)"; return 1; }
	ktap_print_msg "$(klog | grep 'registered already' | tail -1)"
}

# NFS_PORT: where nfsd listens through our class in the tests.
NFS_PORT=20051

# nfsd listening through our class (rdmacm, port $NFS_PORT) next to
# svcrdma's (rdma 20049). Idempotent.
start_nfsd_on_ours() {
	if [ "$(cat "$PARAMS/xprt_class" 2>/dev/null)" = Y ]; then
		# Our client class holds "rdma": rpcrdma.ko cannot be loaded, and
		# nfsd listens through our server class alone.
		nfsd_up || return 1
	else
		start_nfsd || return 1
	fi
	grep -q "rdmacm $NFS_PORT" /proc/fs/nfsd/portlist && return 0
	echo "rdmacm $NFS_PORT" >/proc/fs/nfsd/portlist || return 1
	grep -q "rdmacm $NFS_PORT" /proc/fs/nfsd/portlist
}

# nfs_session VERS: mounts nfsd through our transport with Linux's NFS client
# (xprtrdma) at NFS version VERS and does what users do: a 16 MiB file of
# random octets in and out (checked byte for byte, read back after dropping
# the page cache), a directory of 300 entries, rename, hard link, symlink
# and readlink. Prints nothing on success.
nfs_session() {
	local v=$1 src=/ mnt=/tmp/mnt_$1 d ok=0
	[ "$v" = 3 ] && src=/tmp/export
	mkdir -p "$mnt"
	timeout -s KILL 60 mount -t nfs -o rdma,port=$NFS_PORT,vers=$v,nolock "$ADDR:$src" "$mnt" ||
		{ fail "mount vers=$v"; return 1; }
	d=$mnt/v$v
	mkdir -p "$d" || ok=1
	cp /tmp/nfs_src.bin "$d/big" || { fail "vers=$v: copy in"; ok=1; }
	cmp -s /tmp/nfs_src.bin "/tmp/export/v$v/big" || { fail "vers=$v: the server's copy differs"; ok=1; }
	sync
	echo 3 >/proc/sys/vm/drop_caches
	cmp -s /tmp/nfs_src.bin "$d/big" || { fail "vers=$v: read back differs"; ok=1; }
	mkdir "$d/dir" || ok=1
	for ((i = 0; i < 300; i++)); do : >"$d/dir/entry_$i" || { ok=1; break; }; done
	echo 3 >/proc/sys/vm/drop_caches
	[ "$(ls "$d/dir" | wc -l)" = 300 ] || { fail "vers=$v: $(ls "$d/dir" | wc -l) of 300 entries listed"; ok=1; }
	mv "$d/big" "$d/renamed" && ln "$d/renamed" "$d/hard" && ln -s renamed "$d/sym" || { fail "vers=$v: rename/link/symlink"; ok=1; }
	[ "$(readlink "$d/sym")" = renamed ] || { fail "vers=$v: readlink"; ok=1; }
	cmp -s /tmp/nfs_src.bin "$d/sym" || { fail "vers=$v: data through the symlink differs"; ok=1; }
	[ "$(command stat -c %h "/tmp/export/v$v/renamed")" = 2 ] || { fail "vers=$v: link count"; ok=1; }
	rm -rf "$d" || { fail "vers=$v: remove the tree"; ok=1; }
	[ ! -e "/tmp/export/v$v" ] || { fail "vers=$v: the tree is still on the server"; ok=1; }
	umount "$mnt" || { fail "vers=$v: umount"; ok=1; }
	return $ok
}

# Linux's NFS client (xprtrdma) mounts nfsd through our server transport at
# NFS versions 3, 4.0, 4.1 and 4.2 and everything works, byte for byte; the
# calls went through our connections (counters), including RDMA Reads
# (WRITE data in Read chunks), Write chunks (READ data) and Reply chunks
# (READDIR).
nfsd_over_rust_transport() {
	local v ok=0 before
	load_module || return 1
	start_nfsd_on_ours || { fail "nfsd does not listen on rdmacm $NFS_PORT"; return 1; }
	ktap_print_msg "portlist: $(tr '\n' ' ' </proc/fs/nfsd/portlist); listeners: $(tr '\n' ' ' <"$DBG/listeners")"
	grep -q "for=nfsd" "$DBG/listeners" || { fail "no listener for nfsd"; ok=1; }
	head -c $((16 << 20)) /dev/urandom >/tmp/nfs_src.bin
	for v in 3 4.0 4.1 4.2; do
		before=$(stat nfsd_calls)
		nfs_session "$v" || ok=1
		ktap_print_msg "vers=$v: $(($(stat nfsd_calls) - before)) calls through our transport"
		[ "$(stat nfsd_calls)" -gt "$before" ] || { fail "vers=$v: no call went through our transport"; ok=1; }
	done
	ktap_print_msg "$(grep -E '^(nfsd_calls|nfsd_calls_dropped|rdma_reads|rdma_writes|replies_sent_inline|replies_sent_write_list|replies_sent_reply_chunk|send_with_invalidate|rdma_error_sent) ' "$DBG/stats" | tr '\n' ' ')"
	[ "$(stat rdma_reads)" -gt 0 ] || { fail "no RDMA Read (WRITE data in Read chunks)"; ok=1; }
	[ "$(stat replies_sent_write_list)" -gt 0 ] || { fail "no reply through a Write chunk (READ)"; ok=1; }
	[ "$(stat nfsd_calls_dropped)" = 0 ] || { fail "calls dropped"; ok=1; }
	grep " for=nfsd" "$DBG/connections" | head -2 | sed 's/^/# /'
	return $ok
}

# What users do on a mount through our transport (mount_workloads in lib.sh),
# nfsd restarted during the copy by restart_our_nfsd.
nfs_workloads_over_rust_transport() {
	module_loaded || load_module || return 1
	start_nfsd_on_ours || return 1
	mount_workloads "$ADDR" "$NFS_PORT" restart_our_nfsd
}

restart_our_nfsd() {
	rpc.nfsd 0 || return 1
	sleep 2
	start_nfsd_on_ours
}

# NFSv4.1 callbacks over our transport's backchannel: nfsd's callback path to
# the client is up, the client gets a read delegation, and a local writer on
# the server that conflicts with it makes nfsd recall it (CB_RECALL over the
# backchannel): the write proceeds within 10 s, not after the lease-break
# time (20 s here), and our counters show the backchannel Calls and Replies.
delegation_recall_over_backchannel() {
	local mnt=/tmp/mnt_cb ok=0 t0 took info states before_c before_r i
	module_loaded || load_module || return 1
	start_nfsd_on_ours || return 1
	echo 20 >/proc/sys/fs/lease-break-time
	echo "delegated data" >/tmp/export/deleg_file
	mkdir -p "$mnt"
	timeout -s KILL 60 mount -t nfs -o rdma,port=$NFS_PORT,vers=4.1 "$ADDR:/" "$mnt" || { fail "mount vers=4.1"; return 1; }
	# The callback path comes up once nfsd's CB_NULL probe is answered.
	for ((i = 0; i < 100; i++)); do
		grep -qs "callback state: UP" /proc/fs/nfsd/clients/*/info && break
		sleep 0.2
	done
	info=$(grep -hs "callback" /proc/fs/nfsd/clients/*/info | tr '\n' ' ')
	ktap_print_msg "nfsd: $info"
	[[ "$info" == *"callback state: UP"* ]] || { fail "nfsd's callback path is not up"; ok=1; }
	before_c=$(stat bc_calls_sent)
	before_r=$(stat bc_replies_received)
	# nfsd grants no delegation during its grace period (10 s after a
	# start): open until one comes on the file. Since 7.x the client also
	# asks for a delegation on the directory it reads (nfsd grants it on
	# "/"); a file's delegation is what the local write below recalls.
	for ((i = 0; i < 30; i++)); do
		exec 7<"$mnt/deleg_file"
		cat <&7 >/dev/null
		states=$(cat /proc/fs/nfsd/clients/*/states 2>/dev/null)
		echo "$states" | grep "type: deleg" | grep -q 'filename: "/deleg_file"' && break
		exec 7<&-
		sleep 2
	done
	ktap_print_msg "nfsd states: $(echo "$states" | tr '\n' ' ')"
	echo "$states" | grep "type: deleg" | grep -q 'filename: "/deleg_file"' ||
		{ fail "no delegation granted on deleg_file"; ok=1; }
	t0=$(date +%s.%N)
	timeout 60 sh -c 'echo "more" >>/tmp/export/deleg_file' || { fail "local write failed"; ok=1; }
	took=$(elapsed "$t0")
	ktap_print_msg "local write waited $took s for the recall; bc_calls_sent +$(($(stat bc_calls_sent) - before_c)) bc_replies_received +$(($(stat bc_replies_received) - before_r))"
	awk -v t="$took" 'BEGIN { exit !(t < 10) }' || { fail "the recall did not complete (the write waited for the lease-break time)"; ok=1; }
	[ "$(stat bc_calls_sent)" -gt "$before_c" ] && [ "$(stat bc_replies_received)" -gt "$before_r" ] ||
		{ fail "no backchannel Call and Reply counted"; ok=1; }
	exec 7<&-
	[ "$(cat "$mnt/deleg_file")" = "$(printf 'delegated data\nmore')" ] || { fail "the client reads stale data"; ok=1; }
	umount "$mnt" || ok=1
	return $ok
}

# RFC 8797 on the real path, as Linux's client sees it: it sets R, so does our
# server (on rxe), and its chunked READs and WRITEs (a 4 MiB file written and
# read back at NFS 4.2) come back with Send With Invalidate: in the client's
# own mountstats the chunks rise while local_inv_needed stays where it was.
# xprtrdma takes one remotely invalidated MR per reply (frwr_reminv) and
# invalidates the call's other MRs itself; on rxe an MR spans 128 KiB, so
# rsize and wsize of 64 KiB keep each chunk in one.
c_client_sees_remote_invalidation() {
	local mnt=/tmp/mnt_ri ok=0 w0 r0 l0 w1 r1 l1 sl
	module_loaded || load_module || return 1
	start_nfsd_on_ours || return 1
	mkdir -p "$mnt"
	timeout -s KILL 60 mount -t nfs -o rdma,port=$NFS_PORT,vers=4.2,rsize=65536,wsize=65536 "$ADDR:/" "$mnt" || { fail "mount"; return 1; }
	sl=$(grep " for=nfsd" "$DBG/connections" | grep "state=established" | tail -1)
	expect "$sl" peer_r=1 reminv=1 || ok=1
	head -c $((4 << 20)) /dev/urandom >/tmp/ri.bin
	w0=$(mountstat 12) r0=$(mountstat 11) l0=$(mountstat 25)
	cp /tmp/ri.bin "$mnt/ri.bin" && sync
	echo 3 >/proc/sys/vm/drop_caches
	cmp -s /tmp/ri.bin "$mnt/ri.bin" || { fail "data differs"; ok=1; }
	w1=$(mountstat 12) r1=$(mountstat 11) l1=$(mountstat 25)
	ktap_print_msg "C client mountstats: write_chunk_count $w0 -> $w1, read_chunk_count $r0 -> $r1, local_inv_needed $l0 -> $l1; our send_with_invalidate=$(stat send_with_invalidate)"
	[ "$((w1 - w0))" -ge 4 ] && [ "$((r1 - r0))" -ge 4 ] || { fail "the READs and WRITEs used no chunks"; ok=1; }
	[ "$l1" = "$l0" ] || { fail "the client had to invalidate locally $((l1 - l0)) times"; ok=1; }
	rm -f "$mnt/ri.bin"
	umount "$mnt" || ok=1
	return $ok
}

# nfsd's data goes straight between the client's memory and nfsd's pages:
# WRITE data by RDMA Read into the request's pages, READ data by RDMA Write
# from the reply's pages (nfsd_args_direct, nfsd_payloads_direct), never
# through a copy (nfsd_args_copied, nfsd_payloads_copied stay put), and the
# file is byte-exact both ways. At NFS 3 and 4.2, an 8 MiB file: with 1 MiB
# I/O at least 8 direct each way.
nfsd_data_moves_without_copies() {
	local mnt=/tmp/mnt_zc ok=0 ad0 ac0 pd0 pc0 ad1 ac1 pd1 pc1 v src
	module_loaded || load_module || return 1
	start_nfsd_on_ours || return 1
	head -c $((8 << 20)) /dev/urandom >/tmp/zc.bin
	for v in 3 4.2; do
		src=/
		[ "$v" = 3 ] && src=/tmp/export
		mkdir -p "$mnt"
		timeout -s KILL 60 mount -t nfs -o rdma,port=$NFS_PORT,vers=$v,nolock "$ADDR:$src" "$mnt" || {
			fail "mount vers=$v"; klog | tail -20 | sed "s/^/# /"; diag cat "$DBG/stats"; return 1
		}
		ad0=$(stat nfsd_args_direct) ac0=$(stat nfsd_args_copied)
		pd0=$(stat nfsd_payloads_direct) pc0=$(stat nfsd_payloads_copied)
		cp /tmp/zc.bin "$mnt/zc.bin" && sync
		echo 3 >/proc/sys/vm/drop_caches
		cmp -s /tmp/zc.bin "$mnt/zc.bin" || { fail "vers=$v: data differs"; ok=1; }
		ad1=$(stat nfsd_args_direct) ac1=$(stat nfsd_args_copied)
		pd1=$(stat nfsd_payloads_direct) pc1=$(stat nfsd_payloads_copied)
		ktap_print_msg "vers=$v: args direct +$((ad1 - ad0)) copied +$((ac1 - ac0)); payloads direct +$((pd1 - pd0)) copied +$((pc1 - pc0))"
		[ "$((ad1 - ad0))" -ge 8 ] || { fail "vers=$v: WRITE data did not go straight to nfsd's pages"; ok=1; }
		[ "$((pd1 - pd0))" -ge 8 ] || { fail "vers=$v: READ data did not go straight from nfsd's pages"; ok=1; }
		[ "$ac1" = "$ac0" ] && [ "$pc1" = "$pc0" ] || { fail "vers=$v: data was copied"; ok=1; }
		rm -f "$mnt/zc.bin"
		umount "$mnt" || ok=1
	done
	return $ok
}

# Our debugfs client, advertising a 1 KiB receive size, against nfsd over our
# server transport: every chunk type both ways, data checked, and RFC 8797's
# point: no reply Send exceeds the client's receive size (a larger one would
# fail our client's 1 KiB Receive and end the connection).
rust_client_to_nfsd_over_rust_transport() {
	local id n line ok=0 seed sl
	# Not reloaded: nfsd holds the module while it listens through it.
	module_loaded || load_module || return 1
	start_nfsd_on_ours || return 1
	nfs_files || return 1
	id=$(connected "$ADDR $NFS_PORT recv_size=1024") || return 1
	sl=$(server_for "$id")
	expect "$(conn_line "$id")" c2s=4096 s2c=1024 || ok=1
	expect "$sl" for=nfsd s2c=1024 || ok=1
	rpc "$id" nfs getattr f_4096 && expect "$(last_rpc)" result=success nfs_status=0 type=1 size=4096 reply=inline || ok=1
	for n in 1 1024 4096 65536 1048576; do
		rpc "$id" nfs read f_$n $n || { fail "read f_$n: $(last_rpc)"; ok=1; continue; }
		line=$(last_rpc)
		expect "$line" result=success nfs_status=0 data_len=$n eof=1 data_fnv="$(fnv /tmp/export/f_$n)" || ok=1
		[ "$n" = 1 ] && { expect "$line" reply=inline || ok=1; }
		[ "$n" -ge 1024 ] && { expect "$line" reply=write_list || ok=1; }
	done
	for n in 1 4096 1048576; do
		seed=$((n + 11))
		nfs_write "$id" w_$n $n $seed || { fail "write w_$n: $(last_rpc)"; ok=1; continue; }
		expect "$(last_rpc)" result=success nfs_status=0 written=$n || ok=1
		[ "$n" -ge 4096 ] && { expect "$(last_rpc)" call=read_chunk || ok=1; }
		[ "$(wc -c </tmp/export/w_$n)" = "$n" ] && is_pattern /tmp/export/w_$n $seed ||
			{ fail "w_$n does not hold what was written"; ok=1; }
	done
	rpc "$id" nfs readdir d500 || { fail "readdir: $(last_rpc)"; ok=1; }
	expect "$(last_rpc)" result=success nfs_status=0 reply=reply_chunk entries=500 eof=1 \
		names_fnv_sum="$(names_fnv_sum /tmp/export/d500)" || ok=1
	ktap_print_msg "client: $(grep "^id=$id " "$DBG/xprt")"
	ktap_print_msg "server: $(grep "^id=$(field "$sl" id) " "$DBG/xprt")"
	expect "$(conn_line "$id")" state=established || ok=1
	[ "$(xcount "$id" recv_errors)" = 0 ] || { fail "a reply exceeded our 1 KiB receive size"; ok=1; }
	echo "disconnect $id" >"$DBG/control"
	return $ok
}

# Malformed RPC-over-RDMA headers from a client to nfsd over our transport:
# a valid NFS NULL is answered by nfsd; a version 2 header gets ERR_VERS, an
# unknown procedure ERR_CHUNK, without nfsd seeing them; the connection
# stays up; no oops (dmesg_clean).
malformed_headers_to_nfsd_over_rust_transport() {
	local out ok=0 null sl sid
	module_loaded || load_module || return 1
	start_nfsd_on_ours || return 1
	null=$(w 41 1 4 0 0 0 0 41 0 2 100003 4 0 0 0 0 0)
	out=$(timeout 60 "$PVT_PEER" client "$ADDR" $NFS_PORT f6ab0e1801010303 \
		"$null" "$(w 42 2 4 0 0 0 0)" "$(w 43 1 4 7 0 0 0)" "$null" 2>&1)
	echo "$out" | grep -v peer_pvt | sed 's/^/# /'
	mapfile -t r < <(echo "$out" | sed -n '/^established/,$p' | tail -n +2)
	[[ "${r[0]-}" == "reply len=52 $(w 41 1 4 0 0 0 0 41 1 0 0 0 0)"* ]] || { fail "NULL: ${r[0]-}"; ok=1; }
	# nfsd's connections grant two credits fewer (room for backchannel
	# Replies): 13 with 16 Receives of 4 KiB.
	[[ "${r[1]-}" == "reply len=28 $(w 42 1 13 4 1 1 1)"* ]] || { fail "version 2: ${r[1]-}"; ok=1; }
	[[ "${r[2]-}" == "reply len=20 $(w 43 1 13 4 2)"* ]] || { fail "procedure 7: ${r[2]-}"; ok=1; }
	[[ "${r[3]-}" == "reply len=52 "* ]] || { fail "NULL after the errors: ${r[3]-}"; ok=1; }
	sl=$(grep " role=server state=.* for=nfsd " "$DBG/connections" | tail -1)
	sid=$(field "$sl" id)
	ktap_print_msg "$(grep "^id=$sid " "$DBG/xprt")"
	[ "$(xcount "$sid" nfsd_calls)" = 2 ] || { fail "nfsd_calls=$(xcount "$sid" nfsd_calls), expected 2"; ok=1; }
	[ "$(xcount "$sid" rdma_error_sent)" = 2 ] || { fail "rdma_error_sent"; ok=1; }
	return $ok
}

# The trace system rpcrdma_cm: negotiation on both ends (the values
# xprtrdma_inline_thresh shows for Linux's client), RDMA_ERROR sent, a
# connection refused by a limit, connections closing.
tracepoints_show_negotiation_and_errors() {
	local trace=/sys/kernel/tracing t id id2 ok=0
	ensure_tracefs || return 1
	load_module listen="$ADDR:$PORT" max_connections_per_peer=1 send_size=16384 || return 1
	echo >$trace/trace
	echo 1 >$trace/events/rpcrdma_cm/enable || { fail "no rpcrdma_cm trace events"; return 1; }
	id=$(connected "$ADDR $PORT recv_size=8192") || return 1
	# A second connection from the same address: refused by the limit.
	id2=$(client_connect "$ADDR $PORT") || return 1
	wait_field "$id2" state rejected || ok=1
	setp max_connections_per_peer 2
	timeout 30 "$PVT_PEER" client "$ADDR" $PORT f6ab0e1801010303 "$(w 42 2 4 0 0 0 0)" >/dev/null 2>&1
	echo "disconnect $id" >"$DBG/control"
	sleep 1
	echo 0 >$trace/events/rpcrdma_cm/enable
	t=$(grep -o 'rpcrdma_cm_[a-z_]*:.*' $trace/trace)
	echo "$t" | sed 's/^/# /'
	echo "$t" | grep -q "rpcrdma_cm_negotiated: conn=$id client peer=$ADDR:$PORT pvt=found peer_send/recv=16384/4096 peer_r=1 c2s=4096 s2c=8192 reminv=1" ||
		{ fail "no client negotiation event"; ok=1; }
	echo "$t" | grep -q "rpcrdma_cm_negotiated: conn=[0-9]* server .* peer_send/recv=16384/8192 peer_r=1 c2s=4096 s2c=8192 reminv=1" ||
		{ fail "no server negotiation event"; ok=1; }
	echo "$t" | grep -q "rpcrdma_cm_reject: peer=$ADDR:[0-9]* why=max_connections_per_peer" || { fail "no reject event"; ok=1; }
	echo "$t" | grep -q "rpcrdma_cm_rdma_error: conn=[0-9]* xid=0x0000002a err=ERR_VERS" || { fail "no RDMA_ERROR event"; ok=1; }
	echo "$t" | grep -q "rpcrdma_cm_closed: conn=$id state=closed_by_user status=0" || { fail "no close event"; ok=1; }
	return $ok
}

# nfsd over our transport with an IPv6 client (proto=rdma6; 32 MiB
# byte-exact), and the RDMA device removed while a copy runs on a mount:
# `rdma link delete` returns, no connection of nfsd's survives its device,
# nfsd's wildcard listeners are listening once it is added again, the client
# reconnects and the copy completes byte for byte. The mount runs over our
# client transport: the device is the client's too, and Linux's 6.12 client
# raced its removal (not re-checked with 7.3's; its
# reconnect's rdma_resolve_route() on an id the CM is removing returns
# -EINVAL, which sunrpc treats as fatal even on a hard mount: the copy then
# failed now and then, "cp: failed to close: Invalid argument"). Linux's
# client against our server across a device removal: the pair's fault
# suite (server_device, c-ours), where the device is the server's alone.
nfsd_over_ipv6_and_device_removal() {
	local ok=0 mnt=/tmp/mnt6 pid t0 took i
	our_client_class || return 1
	start_nfsd_on_ours || return 1
	ip -6 addr add 2001:db8::1/64 dev dummy0 nodad 2>/dev/null
	mkdir -p "$mnt"
	for ((i = 0; i < 50; i++)); do
		timeout -s KILL 60 mount -t nfs -o proto=rdma6,port=$NFS_PORT,vers=4.2,hard "[2001:db8::1]:/" "$mnt" 2>/dev/null && break
		sleep 0.2
	done
	mountpoint -q "$mnt" || { fail "mount over IPv6"; return 1; }
	grep -q " for=nfsd .* peer=\[2001:db8::1\]" "$DBG/connections" || { fail "no IPv6 connection of nfsd's"; ok=1; }
	head -c $((32 << 20)) /dev/urandom >/tmp/nfs_dev.bin
	cp /tmp/nfs_dev.bin "$mnt/v6.bin" && cmp -s /tmp/nfs_dev.bin "$mnt/v6.bin" || { fail "copy over IPv6"; ok=1; }
	# The client's connect events, to tell what failed if the copy does.
	ensure_tracefs && echo >/sys/kernel/tracing/trace &&
		for ev in rpcrdma_cm/rpcrdma_cm_xprt sunrpc/rpc_connect_status; do
			echo 1 >"/sys/kernel/tracing/events/$ev/enable" 2>/dev/null
		done
	cp /tmp/nfs_dev.bin "$mnt/during_removal.bin" &
	pid=$!
	sleep 1
	t0=$(date +%s.%N)
	timeout -s KILL 60 rdma link delete rxe0 || { fail "rdma link delete failed or hung"; ok=1; }
	took=$(elapsed "$t0")
	ktap_print_msg "rdma link delete with nfsd serving a copy: $took s; listeners: $(tr '\n' ' ' <"$DBG/listeners")"
	ktap_print_msg "nfsd's connections: $(grep for=nfsd "$DBG/connections" | cut -d' ' -f1-4 | tr '\n' ';')"
	# Every connection of nfsd's on the device is gone (the device could not
	# have been freed otherwise: the deletion above would not have returned).
	grep " for=nfsd" "$DBG/connections" | grep -q "state=established" && { fail "a connection survived its device"; ok=1; }
	sleep 2
	diag rdma link add rxe0 type rxe netdev dummy0 || { fail "cannot re-add rxe0"; return 1; }
	# nfsd's listeners are bound to the wildcard address: the RDMA CM keeps
	# them listening across devices (a listener bound to the device's own
	# address dies and comes back: device_removal_with_live_connections).
	for ((i = 0; i < 100; i++)); do
		[ "$(grep -c 'for=nfsd' "$DBG/listeners")" = "$(grep -c 'state=listening for=nfsd' "$DBG/listeners")" ] && break
		sleep 0.2
	done
	grep -q "state=dead for=nfsd" "$DBG/listeners" && { fail "nfsd's listeners did not come back"; ok=1; }
	timeout 300 tail --pid="$pid" -f /dev/null
	if ! wait "$pid"; then
		fail "the copy failed across the device removal"
		ok=1
		grep -E 'rpcrdma_cm_xprt|rpc_connect_status' /sys/kernel/tracing/trace 2>/dev/null |
			tail -n 8 | sed 's/^/# client connect: /'
	fi
	for ev in rpcrdma_cm/rpcrdma_cm_xprt sunrpc/rpc_connect_status; do
		echo 0 >"/sys/kernel/tracing/events/$ev/enable" 2>/dev/null
	done
	echo 3 >/proc/sys/vm/drop_caches
	cmp -s /tmp/nfs_dev.bin "$mnt/during_removal.bin" || { fail "the copy differs after the device came back"; ok=1; }
	rm -f "$mnt/v6.bin" "$mnt/during_removal.bin"
	umount "$mnt" || ok=1
	return $ok
}

# rmmod is refused while nfsd has a listener or a connection of our class,
# and works once nfsd has stopped.
rmmod_refused_while_nfsd_uses_the_class() {
	local ok=0
	module_loaded || load_module || return 1
	start_nfsd_on_ours || return 1
	rmmod rpcrdma_cm 2>/dev/null && { fail "rmmod succeeded while nfsd listens through us"; return 1; }
	module_loaded || { fail "module gone"; return 1; }
	rpc.nfsd 0 || { fail "rpc.nfsd 0"; ok=1; }
	rmmod_within 10 rpcrdma_cm
	! module_loaded || { fail "rmmod refused after nfsd stopped: $(cat /sys/module/rpcrdma_cm/refcnt)"; ok=1; }
	return $ok
}

# The kernel's NFS client over our client transport, against nfsd over our
# server transport, in one kernel: rpcrdma.ko unloaded (its client class and
# ours cannot both be registered), `insmod rpcrdma_cm.ko` with the client
# class, `mount -o rdma`. At NFS 3, 4.0, 4.1 and 4.2 what users do works
# byte for byte (nfs_session); a delegation is recalled through both
# backchannels (CB_RECALL in at the client, its Reply out); the mount's connection shows in debugfs (for=mount,
# negotiated 4 KiB both ways); /proc/self/mountstats has xprtrdma's "xprt:
# rdma" line: a 500-entry listing takes a Reply chunk, a 1 MiB READ lands in
# the page cache through a Write chunk (nothing copied into pages), a 1 MiB
# WRITE leaves from it through a Read chunk; rmmod is refused while
# the mount holds the class, and succeeds once it is gone. Also: the ping
# command through sunrpc over our client class; eight direct 1 MiB WRITEs
# register 8 chunks but allocate at most one MR (MRs recycled); NFSv3 ACLs
# (nfs3_acls in lib.sh).
nfs_client_over_rust_transport() {
	local v mnt=/tmp/mnt_oc line ms r0 r1 c0 id g0 g1 m0 m1 ma0 ma1 ok=0
	unload_transports || return 1
	load_module xprt_class=1 || return 1
	start_nfsd_on_ours || { fail "nfsd on rdmacm $NFS_PORT"; return 1; }
	[ -d /sys/module/rpcrdma ] && { fail "rpcrdma.ko is loaded"; ok=1; }
	[ -f /tmp/nfs_src.bin ] || head -c $((16 << 20)) /dev/urandom >/tmp/nfs_src.bin
	nfs_files || return 1
	# The ping command through sunrpc over our client class.
	ping_through rpcrdma_cm "$NFS_PORT" 100 || ok=1
	for v in 3 4.0 4.1 4.2; do
		nfs_session "$v" || ok=1
	done
	# NFSv4.1 callbacks reach the client over our client transport's
	# backchannel (and leave the server over our server's).
	c0=$(stat bc_calls_received)
	delegation_recall_over_backchannel || ok=1
	ktap_print_msg "client side: bc_calls_received +$(($(stat bc_calls_received) - c0)) bc_replies_sent $(stat bc_replies_sent) bc_overflows $(stat bc_overflows)"
	[ "$(stat bc_calls_received)" -gt "$c0" ] && [ "$(stat bc_replies_sent)" -gt 0 ] ||
		{ fail "no backchannel Call received or Reply sent by our client transport"; ok=1; }
	mkdir -p "$mnt"
	timeout -s KILL 60 mount -t nfs -o rdma,port=$NFS_PORT,vers=3,nolock "$ADDR:/tmp/export" "$mnt" ||
		{ fail "mount"; return 1; }
	line=$(grep " for=mount" "$DBG/connections" | grep state=established | tail -1)
	ktap_print_msg "mount's connection: $line"
	expect "$line" role=client c2s=4096 s2c=4096 outcome=found || ok=1
	r0=$(mountstat 13) w0=$(mountstat 12) rd0=$(mountstat 11)
	echo 3 >/proc/sys/vm/drop_caches
	[ "$(ls "$mnt/d500" | wc -l)" = 500 ] || { fail "$(ls "$mnt/d500" | wc -l) of 500 entries"; ok=1; }
	# READ only: inline READDIR replies are copied into their pages (as
	# with xprtrdma), READ data must not be.
	f0=$(mountstat 17)
	cmp -s "$mnt/f_1048576" /tmp/export/f_1048576 || { fail "f_1048576 read back differs"; ok=1; }
	f1=$(mountstat 17)
	cp /tmp/export/f_1048576 "$mnt/w_1048576" && sync || { fail "write w_1048576"; ok=1; }
	cmp -s /tmp/export/f_1048576 /tmp/export/w_1048576 || { fail "the server's w_1048576 differs"; ok=1; }
	r1=$(mountstat 13) w1=$(mountstat 12) rd1=$(mountstat 11)
	# MRs are recycled: eight 1 MiB WRITEs one after the other, each in a
	# Read chunk, register eight times but allocate at most one MR more.
	id=$(field "$line" id)
	g0=$(xcount "$id" registrations) m0=$(xcount "$id" mrs_allocated) ma0=$(mountstat 24)
	dd if=/tmp/nfs_src.bin of="$mnt/mr.bin" bs=1M count=8 oflag=direct status=none || { fail "8 MiB direct write"; ok=1; }
	g1=$(xcount "$id" registrations) m1=$(xcount "$id" mrs_allocated) ma1=$(mountstat 24)
	ktap_print_msg "8 direct 1 MiB WRITEs: registrations +$((g1 - g0)), MRs allocated +$((m1 - m0)) (mountstats mrs_allocated +$((ma1 - ma0)), $ma1 in all)"
	[ "$((g1 - g0))" -ge 8 ] || { fail "the WRITEs registered $((g1 - g0)) chunks, not 8"; ok=1; }
	[ "$((m1 - m0))" -le 1 ] || { fail "MRs not recycled: $((m1 - m0)) allocated for $((g1 - g0)) registrations"; ok=1; }
	[ "$((ma1 - ma0))" = "$((m1 - m0))" ] || { fail "mountstats mrs_allocated moved by $((ma1 - ma0)), debugfs by $((m1 - m0))"; ok=1; }
	rm -f "$mnt/mr.bin"
	nfs3_acls "$mnt" /tmp/export || ok=1
	ms=$(awk '$1 == "xprt:" && $2 == "rdma"' /proc/self/mountstats)
	ktap_print_msg "mountstats: $ms"
	ktap_print_msg "reply chunks +$((r1 - r0)), write chunks +$((w1 - w0)), read chunks +$((rd1 - rd0)), octets copied into pages +$((f1 - f0))"
	[ "$(echo "$ms" | wc -w)" = 29 ] || { fail "the xprt line has $(echo "$ms" | wc -w) fields, not xprtrdma's 29"; ok=1; }
	[ "$((r1 - r0))" -gt 0 ] || { fail "no Reply chunk for the 500-entry listing"; ok=1; }
	[ "$((w1 - w0))" -ge 1 ] || { fail "READ data did not come in a Write chunk"; ok=1; }
	[ "$((rd1 - rd0))" -ge 1 ] || { fail "WRITE data did not leave in a Read chunk"; ok=1; }
	[ "$f1" = "$f0" ] || { fail "READ data was copied into the page cache ($((f1 - f0)) octets)"; ok=1; }
	rmmod rpcrdma_cm 2>/dev/null && { fail "rmmod succeeded while a mount uses the class"; return 1; }
	umount "$mnt" || { fail "umount"; ok=1; }
	grep " for=mount" "$DBG/connections" | grep -q state=established &&
		{ fail "a mount's connection is still open after umount"; ok=1; }
	rpc.nfsd 0
	rmmod_within 10 rpcrdma_cm
	! module_loaded || { fail "rmmod refused after umount: refcnt $(cat /sys/module/rpcrdma_cm/refcnt)"; ok=1; }
	return $ok
}

# our_client_class: rpcrdma.ko unloaded and our module loaded with its client
# class (so `mount -o rdma` runs over it), unless it already is.
our_client_class() {
	[ "$(cat "$PARAMS/xprt_class" 2>/dev/null)" = Y ] && return 0
	unload_transports && load_module xprt_class=1
}

# What users do, over our client transport and our server transport:
# nfs_workloads_over_rust_transport (untar of 2,000 files and diff, fio
# random I/O of 512 B to 1 MiB with crc32c verification, 5,000 entries
# listed, nfsd restarted during a 64 MiB copy) with `mount -o rdma` running
# over our client class; never more calls in flight than our server's 32
# credits (calls_in_flight_max, at least 2 at iodepth 64).
nfs_client_workloads_over_rust_transport() {
	local ok=0
	our_client_class || return 1
	nfs_workloads_over_rust_transport || ok=1
	# Our server grants 32 credits: never more calls in flight than that.
	ktap_print_msg "most calls in flight on one connection: $(stat calls_in_flight_max)"
	[ "$(stat calls_in_flight_max)" -ge 2 ] || { fail "never two calls in flight at iodepth 64"; ok=1; }
	[ "$(stat calls_in_flight_max)" -le 32 ] || { fail "more calls in flight than our server's 32 credits"; ok=1; }
	return $ok
}

# A mount reconnects with what the new connection negotiates (RFC 8797
# Section 4): nfsd stopped during a 64 MiB copy, both ends' sizes raised to
# 16 KiB, nfsd started again: the copy completes byte for byte and the
# mount's new connection shows c2s=s2c=16384 where the first showed 4096,
# and four 12 KiB WRITEs now go inline. Then the RDMA device is deleted
# during a copy and added again 3 s later: the mount reconnects once it is
# back and the copy completes byte for byte. The tracepoint rpcrdma_cm_xprt
# shows the first connection's connect and the new one's reconnect, both
# status=0, and at least one more reconnect after the device removal.
mount_reconnects_with_new_thresholds() {
	local mnt=/tmp/mnt_rc ok=0 pid line first r0 r1 t tr=/sys/kernel/tracing
	our_client_class || return 1
	start_nfsd_on_ours || return 1
	ensure_tracefs && echo >$tr/trace && echo 1 >$tr/events/rpcrdma_cm/rpcrdma_cm_xprt/enable ||
		{ fail "no rpcrdma_cm_xprt trace event"; return 1; }
	mkdir -p "$mnt"
	[ -f /tmp/nfs_big.bin ] || head -c $((64 << 20)) /dev/urandom >/tmp/nfs_big.bin
	timeout -s KILL 60 mount -t nfs -o rdma,port=$NFS_PORT,vers=4.2,hard "$ADDR:/" "$mnt" ||
		{ fail "mount"; return 1; }
	first=$(grep " for=mount" "$DBG/connections" | grep state=established | tail -1)
	expect "$first" c2s=4096 s2c=4096 || ok=1
	cp /tmp/nfs_big.bin "$mnt/rc.bin" &
	pid=$!
	sleep 1
	rpc.nfsd 0 || { fail "rpc.nfsd 0"; ok=1; }
	setp send_size 16384 && setp recv_size 16384 || ok=1
	sleep 2
	start_nfsd_on_ours || { fail "nfsd did not come back"; ok=1; }
	wait "$pid" || { fail "the copy failed across the restart"; ok=1; }
	cmp -s /tmp/nfs_big.bin "$mnt/rc.bin" || { fail "the copy differs after the restart"; ok=1; }
	line=$(grep " for=mount" "$DBG/connections" | grep state=established | tail -1)
	ktap_print_msg "before: $(field "$first" id) c2s=$(field "$first" c2s); after: $(field "$line" id) c2s=$(field "$line" c2s) s2c=$(field "$line" s2c)"
	[ "$(field "$line" id)" != "$(field "$first" id)" ] || { fail "no new connection"; ok=1; }
	expect "$line" c2s=16384 s2c=16384 || ok=1
	# RFC 8797's point: with 16 KiB negotiated, 12 KiB WRITEs go inline
	# (no Read chunk), where 4 KiB thresholds (xprtrdma's defaults too)
	# need one each.
	r0=$(mountstat 11)
	dd if=/dev/urandom of="$mnt/w12" bs=12k count=4 oflag=direct status=none || { fail "12 KiB writes"; ok=1; }
	r1=$(mountstat 11)
	ktap_print_msg "4 WRITEs of 12 KiB with c2s=16384: Read chunks +$((r1 - r0))"
	[ "$r1" = "$r0" ] || { fail "12 KiB WRITEs took Read chunks with 16 KiB thresholds"; ok=1; }
	setp send_size 4096 && setp recv_size 4096 || ok=1
	rm -f "$mnt/rc.bin"
	# The device goes away during a copy and comes back.
	cp /tmp/nfs_big.bin "$mnt/rc.bin" &
	pid=$!
	sleep 1
	rdma link delete rxe0 || { fail "rdma link delete"; ok=1; }
	sleep 3
	rdma link add rxe0 type rxe netdev dummy0 || { fail "rdma link add"; ok=1; }
	timeout 120 tail --pid="$pid" -f /dev/null || { fail "the copy did not finish after the device came back"; ok=1; }
	wait "$pid" || { fail "the copy failed across the device removal"; ok=1; }
	cmp -s /tmp/nfs_big.bin "$mnt/rc.bin" || { fail "the copy differs after the device removal"; ok=1; }
	ktap_print_msg "device_removals $(stat device_removals); mount's connections: $(grep -c " for=mount" "$DBG/connections")"
	rm -f "$mnt/rc.bin"
	umount "$mnt" || { fail "umount"; ok=1; }
	# The mount's own tracepoint: its first connect, and the reconnect
	# that negotiated 16 KiB, each with its connection and status 0; the
	# device removal left at least one more reconnect.
	echo 0 >$tr/events/rpcrdma_cm/rpcrdma_cm_xprt/enable
	t=$(grep -o 'rpcrdma_cm_xprt:.*' $tr/trace)
	echo "$t" | head -8 | sed 's/^/# /'
	echo "$t" | grep -q "rpcrdma_cm_xprt: conn=$(field "$first" id) connect xid=0x00000000 status=0$" ||
		{ fail "no connect event for connection $(field "$first" id)"; ok=1; }
	echo "$t" | grep -q "rpcrdma_cm_xprt: conn=$(field "$line" id) reconnect xid=0x00000000 status=0$" ||
		{ fail "no reconnect event for connection $(field "$line" id)"; ok=1; }
	[ "$(echo "$t" | grep -c " reconnect ")" -ge 2 ] || { fail "no reconnect traced after the device removal"; ok=1; }
	return $ok
}

# RFC 8797 on a mount's connection (Section 4.2 as the client reads it): a
# server whose private data has the format identifier at offset 8 (pvt_peer,
# which serves no NFS) is understood: the mount's connection negotiates the
# server's 8 KiB sizes, where xprtrdma would fall back to 1 KiB; a server
# with no private data gives 1 KiB/1 KiB. The mount then fails cleanly.
mount_reads_odd_server_private_data() {
	local ok=0 hex out=/tmp/pvt_mount.out mnt=/tmp/mnt_pvt line rc i bid
	our_client_class || return 1
	setp send_size 16384 && setp recv_size 16384 || return 1
	mkdir -p "$mnt"
	for hex in "${Z8}${M}01000707" ""; do
		rm -f $out
		bid=$(max_conn_id)
		timeout -s KILL 40 "$PVT_PEER" server "$ADDR" 20080 "$hex" >$out 2>&1 &
		for ((i = 0; i < 100; i++)); do grep -q listening $out 2>/dev/null && break; sleep 0.1; done
		timeout -s KILL 90 mount -t nfs -o rdma,port=20080,vers=4.0,soft,timeo=20,retrans=1,retry=0 \
			"$ADDR:/" "$mnt" 2>/dev/null
		rc=$?
		# The first connection: pvt_peer accepts one, then refuses.
		line=$(awk -v b="$bid" '{ v = $1; sub("id=", "", v) } v + 0 > b && / for=mount / && /:20080 /' \
			"$DBG/connections" | head -1)
		ktap_print_msg "pvt_peer '${hex:-none}': mount exit $rc; $line"
		[ "$rc" != 0 ] || { fail "mounted a server that serves no NFS"; umount "$mnt"; ok=1; }
		if [ -n "$hex" ]; then
			expect "$line" outcome=found offset=8 peer_send=8192 peer_recv=8192 c2s=8192 s2c=8192 || ok=1
		else
			expect "$line" outcome=absent c2s=1024 s2c=1024 reminv=0 || ok=1
		fi
		wait
	done
	setp send_size 4096 && setp recv_size 4096 || ok=1
	return $ok
}

DMESG_BAD='BUG:|WARNING:|Oops|refcount_t|general protection|Call Trace|UBSAN|KASAN|kmemleak|rust_panic|panicked|still waits for'

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
	[ "$(awk '/debug_locks:/ {print $2}' /proc/lockdep_stats 2>/dev/null)" = 1 ] ||
		{ fail "lockdep switched itself off (debug_locks is not 1)"; ok=1; }
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
