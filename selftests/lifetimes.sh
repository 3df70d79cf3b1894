# SPDX-License-Identifier: GPL-2.0
# rpcrdma_cm selftests: lifetimes under faults (sourced by rpcrdma_cm.sh).
# Each test starts nfsd or the module itself and ends with the module
# unloadable: a reference that outlives its owner fails the test that made it.

LIFETIME_TESTS="
	nfsd_stops_with_unaccepted_connections
	kept_receive_released_during_teardown
	receives_replaced_while_nfsd_keeps_them
	read_chunks_at_two_positions_to_nfsd
	listener_stays_stopped_when_a_device_comes
	rw_chain_posted_in_part
	reg_mr_posted_without_its_send
	local_inv_refused_at_a_reply
	small_chunks_kept_for_the_next_calls
"

# nfsd_threads: nfsd's thread count (0 when it is not running).
nfsd_threads() { cat /proc/fs/nfsd/threads 2>/dev/null || echo 0; }

# A listener of nfsd's with no thread to take its connections: nfsd stopped,
# then `rdmacm PORT` written to the portlist, which creates nfsd's service
# with that listener alone. Three connections the module accepts for nfsd
# wait on the listener (its `pending` count) until nfsd stops: they must then
# be closed (state not_accepted_by_nfsd) and freed with their nfsd
# transports, nothing left holding the module. On 2ec06bd each stayed
# established, its transport and the module referenced for good (rmmod
# refused).
nfsd_stops_with_unaccepted_connections() {
	local ok=0 id i sid sl pend
	unload_transports || return 1
	load_module || return 1
	nfsd_up || return 1
	rpc.nfsd 0 || { fail "rpc.nfsd 0"; return 1; }
	[ "$(nfsd_threads)" = 0 ] || { fail "nfsd still has $(nfsd_threads) threads"; return 1; }
	echo "rdmacm $NFS_PORT" >/proc/fs/nfsd/portlist || { fail "portlist: rdmacm $NFS_PORT"; return 1; }
	grep -q "rdmacm $NFS_PORT" /proc/fs/nfsd/portlist || { fail "nfsd does not list rdmacm $NFS_PORT"; return 1; }
	for i in 1 2 3; do
		id=$(connected "$ADDR $NFS_PORT") || { fail "connect $i to nfsd's listener"; ok=1; break; }
	done
	pend=$(grep -o 'for=nfsd pending=[0-9]*' "$DBG/listeners" | awk -F= '{ s += $3 } END { print s + 0 }')
	ktap_print_msg "listeners: $(tr '\n' ' ' <"$DBG/listeners")"
	[ "$pend" = 3 ] || { fail "$pend connections wait for nfsd's accept, expected 3"; ok=1; }
	# nfsd stops: its service goes with the listener and what waits on it.
	echo 0 >/proc/fs/nfsd/threads || { fail "echo 0 > threads"; ok=1; }
	for ((i = 0; i < 100; i++)); do
		grep " role=server " "$DBG/connections" | grep -q "state=established" || break
		sleep 0.1
	done
	ktap_print_msg "after nfsd stopped: $(grep ' role=server ' "$DBG/connections" | cut -d' ' -f1-4 | tr '\n' ';')"
	grep " role=server " "$DBG/connections" | grep -q "state=established" &&
		{ fail "a connection nfsd never accepted is still established"; ok=1; }
	[ "$(grep ' role=server ' "$DBG/connections" | grep -c 'state=not_accepted_by_nfsd')" = 3 ] ||
		{ fail "expected 3 server connections closed as not_accepted_by_nfsd"; ok=1; }
	for ((i = 0; i < 100; i++)); do
		[ "$(field "$(conn_line "$id")" state)" = established ] || break
		sleep 0.1
	done
	expect "$(conn_line "$id")" state=disconnected || ok=1
	rmmod_within 10 rpcrdma_cm
	! module_loaded || { fail "rmmod refused after nfsd stopped: refcnt $(cat /sys/module/rpcrdma_cm/refcnt)"; ok=1; }
	return $ok
}

# A Receive buffer nfsd keeps (its request's argument, released at
# xpo_release_ctxt) is released while its connection's teardown runs:
# test_release_delay_ms=5000 holds the releasing nfsd thread 5 s before it
# reposts the buffer and 5 s more between its last use of the QP and waking
# the teardown, and the server connection is closed in that second window.
# The teardown must wait for the release to finish (the buffer holds a
# reference on the QP). On 2ec06bd (with the delay added) the teardown freed
# the QP at once and the thread then woke a freed wait queue: KASAN reports a
# use-after-free in __wake_up (make check-debug); here: no kernel report,
# calls still work on a new connection, and the module unloads.
kept_receive_released_during_teardown() {
	local ok=0 id sid i t0 took
	unload_transports || return 1
	load_module || return 1
	start_nfsd_on_ours || { fail "nfsd on rdmacm $NFS_PORT"; return 1; }
	id=$(connected "$ADDR $NFS_PORT") || return 1
	sid=$(field "$(server_for "$id")" id)
	[ -n "$sid" ] || { fail "no server connection for id=$id"; return 1; }
	setp test_release_delay_ms 5000 || return 1
	rpc "$id" null || { fail "NULL to nfsd: $(last_rpc)"; ok=1; }
	t0=$(date +%s.%N)
	# nfsd's thread now sleeps in the release of the call's buffer: 5 s
	# before the repost, then 5 s between leaving the QP and the wake-up.
	sleep 7
	echo "disconnect $sid" >"$DBG/control" || { fail "disconnect $sid"; ok=1; }
	took=$(elapsed "$t0")
	ktap_print_msg "disconnect $sid returned $took s after the reply"
	# `disconnect` tears the connection down before it returns: it must
	# have waited for the release, which ends 10 s after it began (before
	# the reply reached us).
	awk -v t="$took" 'BEGIN { exit !(t >= 8.5) }' ||
		{ fail "the teardown did not wait for the release of nfsd's buffer"; ok=1; }
	sleep 5
	setp test_release_delay_ms 0
	ktap_print_msg "$(conn_line "$sid" | cut -d' ' -f1-4)"
	# The module still works: a new connection carries a call.
	id=$(connected "$ADDR $NFS_PORT") || ok=1
	rpc "$id" null || { fail "NULL on a new connection: $(last_rpc)"; ok=1; }
	klog | grep -E 'BUG:|KASAN|general protection|refcount_t|still waits for' && { fail "kernel report"; ok=1; }
	rpc.nfsd 0
	rmmod_within 10 rpcrdma_cm
	! module_loaded || { fail "rmmod refused: refcnt $(cat /sys/module/rpcrdma_cm/refcnt)"; ok=1; }
	return $ok
}

# nfsd keeps each call's Receive buffer until xpo_release_ctxt, after its
# reply went out; the client may use that reply's credit at once. With 16
# nfsd threads each holding its buffer 500 ms after replying
# (test_release_delay_ms) and 32 callers on one connection, the Receives
# posted must still cover every call the grant lets in: a kept buffer is
# replaced at once: all 96 calls (3 per caller) answered, the connection
# stays up, recv_bufs at least 16 (a buffer per thread) beyond recv_posting
# and no recv_short. On 2ec06bd the kept buffers were simply missing, a call
# found no Receive posted, the server's QP answered RNR NAK and, with no RNR
# retries (as xprtrdma asks), the client's connection died and calls failed.
receives_replaced_while_nfsd_keeps_them() {
	local ok=0 id sid i n line
	unload_transports || return 1
	load_module || return 1
	start_nfsd_on_ours || { fail "nfsd on rdmacm $NFS_PORT"; return 1; }
	rpc.nfsd 16 || { fail "rpc.nfsd 16"; return 1; }
	id=$(connected "$ADDR $NFS_PORT") || return 1
	sid=$(field "$(server_for "$id")" id)
	setp test_release_delay_ms 500 || return 1
	rm -f /tmp/par_*
	for ((i = 1; i <= 32; i++)); do
		(for n in 1 2 3; do rpc "$id" null || echo "FAIL null $i.$n"; done) >/tmp/par_$i 2>&1 &
	done
	wait
	setp test_release_delay_ms 0
	n=$(cat /tmp/par_* | grep -c FAIL)
	ktap_print_msg "client: $(grep "^id=$id " "$DBG/xprt")"
	ktap_print_msg "server: $(grep "^id=$sid " "$DBG/xprt")"
	[ "$n" = 0 ] || { fail "$n of 96 NULL calls failed"; ok=1; }
	expect "$(conn_line "$id")" state=established || ok=1
	line=$(grep "^id=$sid " "$DBG/xprt")
	[ "$(field "$line" replies_sent)" = 96 ] || { fail "server sent $(field "$line" replies_sent) replies, expected 96"; ok=1; }
	[ -z "$(field "$line" recv_short)" ] || { fail "kept buffers not replaced: $(field "$line" recv_short)"; ok=1; }
	# One buffer per nfsd thread (16) beyond the Receives kept posted: the
	# buffers the threads kept were replaced (a refill's batch and the
	# buffer in hand account for at most 7).
	[ "$(field "$line" recv_bufs)" -ge "$(($(field "$line" recv_posting) + 16))" ] ||
		{ fail "fewer than 16 buffers beyond the Receives kept posted: nfsd's buffers were not replaced"; ok=1; }
	echo "disconnect $id" >"$DBG/control"
	rpc.nfsd 0
	rmmod_within 10 rpcrdma_cm
	! module_loaded || { fail "rmmod refused: refcnt $(cat /sys/module/rpcrdma_cm/refcnt)"; ok=1; }
	return $ok
}

# A call with Read chunks at two positions (RFC 8166 allows any number): a
# hand-made client (pvt_peer) sends nfsd an NFSv4 NULL whose RPC version
# (octets 8-11) and program version (16-19) travel in two Read chunks read
# from its memory, the rest inline. nfsd accepts it only if both land where
# they belong: the reply is MSG_ACCEPTED/SUCCESS (the two swapped would get
# RPC_MISMATCH). The Reads are posted with no nfsd thread waiting for them
# (on 2ec06bd the receiving nfsd thread waited for each Read, so a client
# withholding Read responses parked one thread per call until the RC
# retries ran out).
read_chunks_at_two_positions_to_nfsd() {
	local ok=0 out r0 ac0 call sl sid
	unload_transports || return 1
	load_module || return 1
	start_nfsd_on_ours || { fail "nfsd on rdmacm $NFS_PORT"; return 1; }
	r0=$(stat rdma_reads) ac0=$(stat nfsd_args_copied)
	# Transport header: two Read segments (position, handle, length, offset).
	call="region=$(w 2 4):$(w 51 1 4 0 1 8)RRRRRRRR$(w 4)GGGGGGGGGGGGGGG0$(w 1 16)RRRRRRRR$(w 4)GGGGGGGGGGGGGGG1$(w 0 0 0)"
	# The RPC call without octets 8-11 and 16-19.
	call="$call$(w 51 0 100003 0 0 0 0 0)"
	# R=0: the client's Read chunk MR is not one the server may invalidate.
	out=$(timeout 60 "$PVT_PEER" client "$ADDR" $NFS_PORT f6ab0e1801000303 "$call" 2>&1)
	echo "$out" | grep -v peer_pvt | sed 's/^/# /'
	mapfile -t r < <(echo "$out" | sed -n '/^established/,$p' | tail -n +2)
	[[ "${r[0]-}" == "reply len=52 $(w 51 1 4 0 0 0 0 51 1 0 0 0 0)"* ]] ||
		{ fail "NULL in three inline parts and two Read chunks: ${r[0]-}"; ok=1; }
	[ "$(stat rdma_reads)" = $((r0 + 2)) ] || { fail "rdma_reads +$(($(stat rdma_reads) - r0)), expected +2"; ok=1; }
	[ "$(stat nfsd_args_copied)" = $((ac0 + 1)) ] || { fail "nfsd_args_copied did not count the laid-out call"; ok=1; }
	sl=$(grep " role=server state=.* for=nfsd " "$DBG/connections" | tail -1)
	sid=$(field "$sl" id)
	ktap_print_msg "$(grep "^id=$sid " "$DBG/xprt")"
	[ "$(xcount "$sid" nfsd_calls)" = 1 ] || { fail "nfsd_calls=$(xcount "$sid" nfsd_calls), expected 1"; ok=1; }
	return $ok
}

# nfsd closes its listener (rpc.nfsd 0) while an RDMA device is added: the
# device's arrival restarts listeners that lost theirs, and must not restart
# one nfsd closed. test_detach_delay_ms=4000 holds xpo_detach 4 s between
# stopping the listener and forgetting it, and rxe1 comes in that window. On
# 2ec06bd (where a stopped listener was merely dead; with the delay added)
# the listener listened again for an nfsd that had freed it: listening after
# nfsd stopped, listener_restarts counted it, and the module stayed
# referenced (rmmod refused).
listener_stays_stopped_when_a_device_comes() {
	local ok=0 i lr0 pid
	unload_transports || return 1
	load_module || return 1
	start_nfsd_on_ours || { fail "nfsd on rdmacm $NFS_PORT"; return 1; }
	grep -q "for=nfsd" "$DBG/listeners" || { fail "no listener of nfsd's: $(cat "$DBG/listeners")"; return 1; }
	lr0=$(stat listener_restarts)
	setp test_detach_delay_ms 4000 || return 1
	rpc.nfsd 0 &
	pid=$!
	# The listener is stopped (listed until forgotten, 4 s later): now the
	# device comes.
	for ((i = 0; i < 100; i++)); do
		grep "for=nfsd" "$DBG/listeners" | grep -qE "state=(stopped|dead)" && break
		sleep 0.05
	done
	grep "for=nfsd" "$DBG/listeners" | grep -qE "state=(stopped|dead)" ||
		{ fail "nfsd's listener not stopped within 5 s: $(tr '\n' ' ' <"$DBG/listeners")"; ok=1; }
	ip link add dummy1 type dummy && ip link set dummy1 up &&
		rdma link add rxe1 type rxe netdev dummy1 || { fail "cannot add rxe1 on dummy1"; ok=1; }
	wait "$pid" || { fail "rpc.nfsd 0"; ok=1; }
	setp test_detach_delay_ms 0
	sleep 0.5
	ktap_print_msg "listeners after nfsd stopped: $(tr '\n' ' ' <"$DBG/listeners"); listener_restarts=$(stat listener_restarts) (was $lr0)"
	# (Forgotten by now either way, so debugfs cannot show a restarted one:
	# the counter and the unload can.)
	[ "$(stat listener_restarts)" = "$lr0" ] || { fail "listener_restarts counted a listener nfsd closed"; ok=1; }
	rdma link delete rxe1 2>/dev/null
	ip link del dummy1 2>/dev/null
	rmmod_within 10 rpcrdma_cm
	! module_loaded || { fail "rmmod refused after nfsd stopped: refcnt $(cat /sys/module/rpcrdma_cm/refcnt)"; ok=1; }
	return $ok
}

# mount_over_ours MNT [PARAM=VALUE...]: our module alone (both classes,
# with those parameters), nfsd over it, the test files exported, and MNT a
# hard NFS 4.2 mount over our client (with MOUNT_OPTS added, if set).
mount_over_ours() {
	local dir=$1
	shift
	unload_transports || return 1
	load_module xprt_class=1 "$@" || return 1
	start_nfsd_on_ours || { fail "nfsd on rdmacm $NFS_PORT"; return 1; }
	nfs_files || return 1
	mkdir -p "$dir"
	timeout -s KILL 60 mount -t nfs -o rdma,port=$NFS_PORT,vers=4.2,hard${MOUNT_OPTS:+,$MOUNT_OPTS} \
		"$ADDR:/" "$dir" || { fail "mount"; return 1; }
}

# unmount_over_ours MNT: the end of a test that began with mount_over_ours:
# MNT unmounted, nfsd stopped, no kernel report in the log, and the module
# unloads within 10 s. Fails (returns 1) on any of these.
unmount_over_ours() {
	local ok=0 line
	umount "$1" || { fail "umount"; ok=1; }
	rpc.nfsd 0
	line=$(grep ' role=server ' "$DBG/connections" | grep -v -e 'state=closed' -e 'state=disconnected' -e 'state=closed_by_nfsd' | head -1)
	[ -z "$line" ] || ktap_print_msg "still open: $line"
	klog | grep -E 'BUG:|KASAN|general protection|refcount_t|still waits for' && { fail "kernel report"; ok=1; }
	rmmod_within 10 rpcrdma_cm
	! module_loaded || { fail "rmmod refused: refcnt $(cat /sys/module/rpcrdma_cm/refcnt)"; ok=1; }
	return $ok
}

# An RDMA Read or Write chain the device takes only in part (ib_post_send()
# refusing a WR after the first): the WRs posted use the chain's mappings
# and pages until they complete or are flushed, so the chain must outlive
# them: it stays until the QP's teardown, which then frees it, and the
# connection ends. test_rw_post_part=1 makes the server's next chain of
# several WRs go in part: a 1 MiB READ's Write chunk (posted in front of the
# reply's Send, in the same post), then a 1 MiB WRITE's Read chunk (posted
# alone). The mount (hard) reconnects and the data arrives byte for
# byte, the teardown does not wait forever for the chain, and the module
# unloads. rxe consumes each WR as it is posted, so on rxe this shows the
# path is sound; the use-after-free it prevents (on 2ec06bd the chain was
# freed at once) needs a device that reads its WRs later.
rw_chain_posted_in_part() {
	local ok=0 mnt=/tmp/mnt_part i cc0 cc1 cc2 p0 parts
	mount_over_ours "$mnt" || return 1
	cc0=$(mountstat 3)
	p0=$(klog | grep -c 'posted in part')
	setp test_rw_post_part 1 || ok=1
	echo 3 >/proc/sys/vm/drop_caches
	timeout 120 cmp "$mnt/f_1048576" /tmp/export/f_1048576 || { fail "f_1048576 read back differs"; ok=1; }
	cc1=$(mountstat 3)
	[ "$(cat "$PARAMS/test_rw_post_part")" = 0 ] || { fail "no chain of several WRs for the READ"; ok=1; }
	setp test_rw_post_part 1 || ok=1
	timeout 120 dd if=/tmp/export/f_1048576 of="$mnt/w_1048576" bs=1M oflag=direct status=none ||
		{ fail "1 MiB direct write"; ok=1; }
	cmp -s /tmp/export/f_1048576 /tmp/export/w_1048576 || { fail "the server's w_1048576 differs"; ok=1; }
	cc2=$(mountstat 3)
	[ "$(cat "$PARAMS/test_rw_post_part")" = 0 ] || { fail "no chain of several WRs for the WRITE"; ok=1; }
	setp test_rw_post_part 0
	parts=$(($(klog | grep -c 'posted in part') - p0))
	ktap_print_msg "connect_count $cc0 -> $cc1 (READ) -> $cc2 (WRITE); $parts chains posted in part"
	[ "$cc1" -gt "$cc0" ] || { fail "the connection survived a READ chain posted in part"; ok=1; }
	[ "$cc2" -gt "$cc1" ] || { fail "the connection survived a WRITE chain posted in part"; ok=1; }
	[ "$parts" = 2 ] || { fail "$parts chains reported posted in part, expected 2"; ok=1; }
	unmount_over_ours "$mnt" || ok=1
	return $ok
}

# A Send the device refuses after the REG_MRs posted in front of it in the
# same ib_post_send(): those registrations are live, so the call's release
# invalidates them (LOCAL_INV) before their MRs go back for reuse, and
# sunrpc sends the call again (ENOBUFS). test_send_post_part=1 makes the
# next Send that carries REG_MRs (a 1 MiB direct WRITE's Read chunk) go in
# part. The data arrives byte for byte on the same connection: an MR
# recycled while still valid would fail the next REG_MR that takes it (the
# next WRITE's; rxe registers only a free MR) and end the connection. Then
# the module unloads.
reg_mr_posted_without_its_send() {
	local ok=0 mnt=/tmp/mnt_regpart cc0 cc1 r0 r1 l0 l1 i f
	mount_over_ours "$mnt" || return 1
	cc0=$(mountstat 3) r0=$(stat registrations) l0=$(stat local_invalidations)
	setp test_send_post_part 1 || ok=1
	timeout 120 dd if=/tmp/export/f_1048576 of="$mnt/p_1048576" bs=1M oflag=direct status=none ||
		{ fail "1 MiB direct write"; ok=1; }
	[ "$(cat "$PARAMS/test_send_post_part")" = 0 ] || { fail "no Send carried a REG_MR"; ok=1; }
	setp test_send_post_part 0
	# The MRs of the refused Send are the next ones taken.
	for i in 1 2 3; do
		timeout 120 dd if=/tmp/export/f_1048576 of="$mnt/q$i" bs=1M oflag=direct status=none ||
			{ fail "1 MiB direct write $i"; ok=1; }
	done
	for f in p_1048576 q1 q2 q3; do
		cmp -s /tmp/export/f_1048576 "/tmp/export/$f" || { fail "the server's $f differs"; ok=1; }
	done
	cc1=$(mountstat 3) r1=$(stat registrations) l1=$(stat local_invalidations)
	ktap_print_msg "connect_count $cc0 -> $cc1; registrations +$((r1 - r0)), local_invalidations +$((l1 - l0))"
	[ "$cc1" = "$cc0" ] || { fail "the connection ended"; ok=1; }
	# The refused Send's REG_MR was posted: its release invalidated it
	# (the others may have been invalidated by the server instead).
	[ $((l1 - l0)) -ge 1 ] || { fail "no LOCAL_INV for the REG_MR in front of the refused Send"; ok=1; }
	rm -f /tmp/export/p_1048576 /tmp/export/q[123]
	unmount_over_ours "$mnt" || ok=1
	return $ok
}

# A Reply whose LOCAL_INVs cannot all be posted (the Send Queue full; no
# memory for the batch ends the same way): a registration may still be
# live, so the call is not completed from the CQ's work, nor its MR
# reused. The MRs are deregistered (mountstats' mrs_recycled), the call is
# left for sunrpc to send again and the connection ends, so that it is
# (drop_call; xprtrdma likewise leaves a call whose LOCAL_INV flushed to be
# retransmitted). remote_invalidate=0: the server invalidates nothing, so
# every registration takes a LOCAL_INV. With both files open first (an
# OPEN's Reply may take a Reply chunk), test_inv_post_refuse=1 refuses the
# first LOCAL_INV of a 1 MiB direct READ's Write chunk, then of a 1 MiB
# direct WRITE's Read chunk; no Reply chunk meanwhile. The mount (hard)
# reconnects each time, the data arrives byte for byte, and the module
# unloads. timeo=1800: no RPC timeout (which also reconnects) within the
# 120 s the I/O may take, so only drop_call's disconnect resends the call.
local_inv_refused_at_a_reply() {
	local ok=0 mnt=/tmp/mnt_invref cc0 cc1 cc2 m0 m1 m2 rc0 rc1 w0 w1 r1 r2
	MOUNT_OPTS=timeo=1800 mount_over_ours "$mnt" remote_invalidate=0 || return 1
	grep ' for=mount ' "$DBG/connections" | grep -q ' reminv=0' ||
		{ fail "the mount negotiated remote invalidation"; ok=1; }
	exec 3<"$mnt/f_1048576" 4>"$mnt/invref_w"
	cc0=$(mountstat 3) m0=$(mountstat 22) rc0=$(mountstat 13) w0=$(mountstat 12)
	setp test_inv_post_refuse 1 || ok=1
	timeout 120 dd of=/tmp/invref_r bs=1M iflag=direct status=none <&3 ||
		{ fail "1 MiB direct read"; ok=1; }
	cmp -s /tmp/export/f_1048576 /tmp/invref_r || { fail "the 1 MiB read differs"; ok=1; }
	[ "$(cat "$PARAMS/test_inv_post_refuse")" = 0 ] || { fail "no LOCAL_INV for the READ"; ok=1; }
	cc1=$(mountstat 3) m1=$(mountstat 22) w1=$(mountstat 12) r1=$(mountstat 11)
	setp test_inv_post_refuse 1 || ok=1
	timeout 120 dd if=/tmp/export/f_1048576 bs=1M oflag=direct status=none >&4 ||
		{ fail "1 MiB direct write"; ok=1; }
	[ "$(cat "$PARAMS/test_inv_post_refuse")" = 0 ] || { fail "no LOCAL_INV for the WRITE"; ok=1; }
	setp test_inv_post_refuse 0
	cc2=$(mountstat 3) m2=$(mountstat 22) rc1=$(mountstat 13) r2=$(mountstat 11)
	exec 3<&- 4>&-
	cmp -s /tmp/export/f_1048576 /tmp/export/invref_w || { fail "the server's invref_w differs"; ok=1; }
	ktap_print_msg "connect_count $cc0 -> $cc1 (READ) -> $cc2 (WRITE); mrs_recycled $m0 -> $m1 -> $m2;" \
		"write chunks +$((w1 - w0)), read chunks +$((r2 - r1)), reply chunks +$((rc1 - rc0))"
	[ "$rc1" = "$rc0" ] || { fail "Reply chunks during the I/O: the refusal may have hit one"; ok=1; }
	[ "$w1" -gt "$w0" ] || { fail "the READ took no Write chunk"; ok=1; }
	[ "$r2" -gt "$r1" ] || { fail "the WRITE took no Read chunk"; ok=1; }
	[ "$cc1" -gt "$cc0" ] || { fail "the connection survived a live registration (READ)"; ok=1; }
	[ "$cc2" -gt "$cc1" ] || { fail "the connection survived a live registration (WRITE)"; ok=1; }
	[ "$m1" -gt "$m0" ] || { fail "no MR recycled for the READ"; ok=1; }
	[ "$m2" -gt "$m1" ] || { fail "no MR recycled for the WRITE"; ok=1; }
	[ "$(stat mrs_recycled)" -ge $((m2 - m0)) ] || { fail "stats: mrs_recycled $(stat mrs_recycled)"; ok=1; }
	rm -f /tmp/invref_r /tmp/export/invref_w
	unmount_over_ours "$mnt" || ok=1
	return $ok
}

# A chunk of a few pages, once ended, is kept on its QP and taken again by
# a next call rather than allocated (the memory only: its registration is
# new each time). 4 KiB thresholds both ends, so each of 200 direct 4 KiB
# READs takes a Write chunk of one page: the mount's connection registers
# 200 times and allocates at least one chunk and at most a few
# (chunk_allocs in xprt; one READ at a time). Then the mount ends, with no
# kernel report, and the module unloads (that the kept chunks are freed
# with the QP, kmemleak shows in make check-debug).
small_chunks_kept_for_the_next_calls() {
	local ok=0 mnt=/tmp/mnt_keep id line a0 a1 g0 g1
	mount_over_ours "$mnt" send_size=4096 recv_size=4096 || return 1
	# The file opened first: the READs are the only calls with chunks.
	exec 3<"$mnt/f_1048576"
	id=$(field "$(grep ' for=mount ' "$DBG/connections" | grep state=established | tail -1)" id)
	line=$(grep "^id=$id " "$DBG/xprt")
	a0=$(field "$line" chunk_allocs) g0=$(xcount "$id" registrations)
	timeout 120 dd of=/dev/null bs=4k count=200 iflag=direct status=none <&3 ||
		{ fail "200 direct 4 KiB reads"; ok=1; }
	exec 3<&-
	line=$(grep "^id=$id " "$DBG/xprt")
	a1=$(field "$line" chunk_allocs) g1=$(xcount "$id" registrations)
	ktap_print_msg "connection $id: registrations $g0 -> $g1, chunk_allocs $a0 -> $a1"
	[ -n "$a0" ] && [ -n "$a1" ] || { fail "no chunk_allocs in xprt for connection $id"; ok=1; }
	[ $((g1 - g0)) -ge 200 ] || { fail "fewer than 200 registrations: the READs took no chunk"; ok=1; }
	[ "${a1:-0}" -ge 1 ] || { fail "no chunk counted in chunk_allocs"; ok=1; }
	[ $((${a1:-0} - ${a0:-0})) -le 4 ] || { fail "$((a1 - a0)) chunks allocated for 200 READs"; ok=1; }
	unmount_over_ours "$mnt" || ok=1
	return $ok
}
