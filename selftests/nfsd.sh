#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# rpcrdma_cm selftests (sourced by rpcrdma_cm.sh, which runs them): nfsd over
# our server transport: mounts at every NFS version, workloads, the
# backchannel, zero-copy data, IPv6, device removal.

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
# I/O at least 8 direct each way. The last Write of each such reply goes in
# the same post as the reply's Send (nfsd_writes_with_send), as svcrdma's.
nfsd_data_moves_without_copies() {
	local mnt=/tmp/mnt_zc ok=0 ad0 ac0 pd0 pc0 ad1 ac1 pd1 pc1 wl0 wl1 v src
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
		wl0=$(stat nfsd_writes_with_send)
		cp /tmp/zc.bin "$mnt/zc.bin" && sync
		echo 3 >/proc/sys/vm/drop_caches
		cmp -s /tmp/zc.bin "$mnt/zc.bin" || { fail "vers=$v: data differs"; ok=1; }
		ad1=$(stat nfsd_args_direct) ac1=$(stat nfsd_args_copied)
		pd1=$(stat nfsd_payloads_direct) pc1=$(stat nfsd_payloads_copied)
		wl1=$(stat nfsd_writes_with_send)
		ktap_print_msg "vers=$v: args direct +$((ad1 - ad0)) copied +$((ac1 - ac0)); payloads direct +$((pd1 - pd0)) copied +$((pc1 - pc0)); writes with their Send +$((wl1 - wl0))"
		[ "$((ad1 - ad0))" -ge 8 ] || { fail "vers=$v: WRITE data did not go straight to nfsd's pages"; ok=1; }
		[ "$((pd1 - pd0))" -ge 8 ] || { fail "vers=$v: READ data did not go straight from nfsd's pages"; ok=1; }
		[ "$ac1" = "$ac0" ] && [ "$pc1" = "$pc0" ] || { fail "vers=$v: data was copied"; ok=1; }
		# Such replies' (last) Writes went in one post with their Send
		# (none may be counted for a reply that failed after its Write).
		[ "$((wl1 - wl0))" -ge 8 ] && [ "$((wl1 - wl0))" -le "$((pd1 - pd0))" ] ||
			{ fail "vers=$v: READ data not posted with its reply's Send"; ok=1; }
		rm -f "$mnt/zc.bin"
		umount "$mnt" || ok=1
	done
	return $ok
}

# A reply larger than the inline threshold to a call that offered no Write
# chunk (READDIR of a large directory) goes into the client's Reply chunk
# by RDMA Write straight from nfsd's head, pages and tail
# (nfsd_reply_chunks_direct), never through a copy (nfsd_reply_chunks_copied
# stays put), and the listing is the server's, name for name. At NFS 3 and
# 4.2, the default 4 KiB thresholds.
nfsd_reply_chunks_without_copies() {
	local mnt=/tmp/mnt_rc dir=/tmp/export/rc ok=0 i v src d0 c0 d1 c1 want=300
	module_loaded || load_module || return 1
	start_nfsd_on_ours || return 1
	# Made whole, then put in place: a run cut short leaves no partial one.
	if [ ! -d "$dir" ]; then
		rm -rf "$dir.new" && mkdir "$dir.new" || return 1
		for ((i = 0; i < want; i++)); do
			: >"$dir.new/$(printf 'an-entry-whose-name-takes-room-in-the-reply-%04d' $i)" || return 1
		done
		mv "$dir.new" "$dir" || return 1
	fi
	ls -f "$dir" | grep "^an-entry-" | sort >/tmp/rc.server
	[ "$(wc -l </tmp/rc.server)" = "$want" ] || { fail "$dir holds $(wc -l </tmp/rc.server) entries, not $want"; return 1; }
	for v in 3 4.2; do
		src=/
		[ "$v" = 3 ] && src=/tmp/export
		mkdir -p "$mnt"
		timeout -s KILL 60 mount -t nfs -o rdma,port=$NFS_PORT,vers=$v,nolock "$ADDR:$src" "$mnt" || {
			fail "mount vers=$v"; klog | tail -20 | sed "s/^/# /"; return 1
		}
		d0=$(stat nfsd_reply_chunks_direct) c0=$(stat nfsd_reply_chunks_copied)
		ls -f "$mnt/rc" | grep "^an-entry-" | sort >/tmp/rc.client
		d1=$(stat nfsd_reply_chunks_direct) c1=$(stat nfsd_reply_chunks_copied)
		ktap_print_msg "vers=$v: $(wc -l </tmp/rc.client) entries listed; Reply chunks direct +$((d1 - d0)) copied +$((c1 - c0))"
		cmp -s /tmp/rc.server /tmp/rc.client || { fail "vers=$v: the listing differs from the server's"; diff /tmp/rc.server /tmp/rc.client | head -5 | sed "s/^/# /"; ok=1; }
		[ "$((d1 - d0))" -ge 1 ] || { fail "vers=$v: no reply went into a Reply chunk from nfsd's pages"; ok=1; }
		[ "$c1" = "$c0" ] || { fail "vers=$v: a Reply chunk was copied out first"; ok=1; }
		umount "$mnt" || ok=1
	done
	return $ok
}

# A reply nfsd cannot send for want of memory (test_svc_reply_nomem fakes
# one, before anything of it is sent) ends the connection, as svcrdma's
# does: Linux's client sends the READ again on the next connection and the
# application sees nothing. An RDMA_ERROR would fail the READ for good (EIO).
nfsd_reply_without_memory_is_sent_again() {
	local mnt=/tmp/mnt_nm ok=0 d0 d1 e0 e1
	module_loaded || load_module || return 1
	start_nfsd_on_ours || return 1
	head -c $((1 << 20)) /dev/urandom >/tmp/nm.bin
	mkdir -p "$mnt"
	timeout -s KILL 60 mount -t nfs -o rdma,port=$NFS_PORT,vers=3,nolock "$ADDR:/tmp/export" "$mnt" ||
		{ fail "mount"; return 1; }
	cp /tmp/nm.bin "$mnt/nm.bin" && sync || { fail "the write failed"; ok=1; }
	echo 3 >/proc/sys/vm/drop_caches
	d0=$(stat calls_dropped_no_memory) e0=$(stat rdma_error_sent)
	setp test_svc_reply_nomem 1 || ok=1
	timeout 120 cmp /tmp/nm.bin "$mnt/nm.bin" || { fail "the read failed or differs"; ok=1; }
	d1=$(stat calls_dropped_no_memory) e1=$(stat rdma_error_sent)
	ktap_print_msg "calls_dropped_no_memory +$((d1 - d0)), rdma_error_sent +$((e1 - e0))"
	[ "$(cat "$PARAMS/test_svc_reply_nomem")" = 0 ] || { fail "no reply was failed"; ok=1; }
	[ "$((d1 - d0))" = 1 ] || { fail "calls_dropped_no_memory +$((d1 - d0)), not +1"; ok=1; }
	[ "$e1" = "$e0" ] || { fail "RDMA_ERROR sent for want of memory"; ok=1; }
	setp test_svc_reply_nomem 0
	rm -f "$mnt/nm.bin"
	umount "$mnt" || { fail "umount"; ok=1; }
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
