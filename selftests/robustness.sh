#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# rpcrdma_cm selftests (sourced by rpcrdma_cm.sh, which runs them): peers and
# events that must not hurt: malformed headers and replies, rejecting or
# vanishing peers, churn, floods, idle connections, unloads and device
# removals.

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
