#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# rpcrdma_cm selftests (sourced by rpcrdma_cm.sh, which runs them): NFS mounts
# over our client transport: against Linux's nfsd and ours, workloads,
# reconnects, odd server private data.

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
	[ -f /tmp/nfs_big.bin ] || head -c $((NFS_BIG_MB << 20)) /dev/urandom >/tmp/nfs_big.bin
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
