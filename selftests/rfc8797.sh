#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# rpcrdma_cm selftests (sourced by rpcrdma_cm.sh, which runs them): RFC 8797:
# negotiation between our ends and with Linux's, private data hostile or odd,
# legacy peers, devices without remote invalidation.

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
