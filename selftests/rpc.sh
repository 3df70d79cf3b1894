#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# rpcrdma_cm selftests (sourced by rpcrdma_cm.sh, which runs them): RPCs
# between our client and server and Linux's peers: every chunk type,
# thresholds, credits, remote invalidation, rping.

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
