# SPDX-License-Identifier: GPL-2.0
# Faults on the two-kernel link (sourced by selftests/pair.sh): NFS over RDMA
# between guest b (client) and guest a (server) while the link loses,
# delays, reorders or duplicates frames, is cut, or an end loses its RDMA
# device or its nfsd. Each case: a hard mount, a 32 MiB copy (8 MiB in the
# short form) and a fio run
# with crc32c verification going on while the fault is applied; afterwards
# the data is compared byte for byte, the client's mountstats tell the
# reconnects, both kernels' logs are checked for reports, and nfsd is
# stopped, the mount unmounted and both transports unloaded.
#
# FAULTS=short (make check): our client against our server, 5 % loss each
# way, a 5 s cut and the server's device removed and re-added.
# FAULTS=full (make faults): every fault below with the three pairings that
# involve our code (ours-ours, ours-c: our client and svcrdma, c-ours:
# xprtrdma and our server), and c-c as the reference. One row per case goes
# to the KTAP output ("# fault: ...") and to $PAIR_DIR/faults.rows.

FAULTS_SHORT="loss5 cut5 server_device"
FAULTS_FULL="loss1 loss5 delay20 reorder duplicate cut5 cut60 server_device nfsd_restart client_device"

# The guest's end of the link (pair_link named it).
link_ifc() {
	ip -o link | awk -v m="$PAIR_MAC" '$0 ~ m { sub(":", "", $2); print $2; exit }'
}

# netem SPEC...: netem on this guest's egress of the link ("off": none).
netem() {
	local ifc
	ifc=$(link_ifc)
	tc qdisc del dev "$ifc" root 2>/dev/null
	[ "$1" = off ] && return 0
	tc qdisc add dev "$ifc" root netem "$@"
}

# Guest a's side of the faults (ask NAME runs a_NAME; arguments travel in
# $PAIR_DIR/args).
a_netem() {
	# shellcheck disable=SC2046
	netem $(cat "$PAIR_DIR/args")
}

a_srv_c() {
	rpc.nfsd 0 2>/dev/null
	rmmod_within 10 rpcrdma_cm
	! module_loaded || { echo "rpcrdma_cm stays loaded: $(cat /sys/module/rpcrdma_cm/refcnt)"; return 1; }
	start_nfsd >/dev/null && grep -q "rdma 20049" /proc/fs/nfsd/portlist || return 1
	# svcrdma's default thresholds (a_c_nfsd16 raises them), for new connections.
	echo 4096 >/proc/sys/sunrpc/svc_rdma/max_req_size
}

a_srv_ours() {
	rpc.nfsd 0 2>/dev/null
	rmmod_within 10 rpcrdma
	[ ! -d /sys/module/rpcrdma ] || { echo "rpcrdma.ko stays loaded"; return 1; }
	module_loaded || insmod "$KO" || return 1
	grep -q "rdma 20049" /proc/fs/nfsd/portlist 2>/dev/null && return 0
	nfsd_up >/dev/null || return 1
	# As an admin does: nfsd (re)started with --rdma (a running nfsd keeps
	# its ports).
	rpc.nfsd 0 && rpc.nfsd --rdma=20049 2 || return 1
	grep -q "rdma 20049" /proc/fs/nfsd/portlist
}

# The server ends the case: nfsd stopped, both transports unloaded (ours
# must unload: nothing of a case may keep it referenced).
a_srv_stop() {
	rpc.nfsd 0 || return 1
	for ((i = 0; i < 100; i++)); do
		[ -d /sys/module/rpcrdma ] && rmmod rpcrdma 2>/dev/null
		module_loaded && rmmod rpcrdma_cm 2>/dev/null
		[ -d /sys/module/rpcrdma ] || module_loaded || return 0
		sleep 0.1
	done
	echo "cannot unload: $(lsmod | grep -E '^rpcrdma' | tr '\n' ' ')"
	[ -r "$DBG/connections" ] && grep -v "state=closed\|state=disconnected" "$DBG/connections"
	return 1
}

a_device_cycle() {
	local ifc
	ifc=$(link_ifc)
	rdma link delete rxe0 || return 1
	sleep 5
	rdma link add rxe0 type rxe netdev "$ifc"
}

a_nfsd_restart() {
	local ours
	ours=$(module_loaded && echo 1)
	rpc.nfsd 0 || return 1
	sleep 2
	if [ -n "$ours" ]; then rpc.nfsd --rdma=20049 2; else start_nfsd >/dev/null; fi
}

# Kernel reports since the guest started. rxe's own WARN_ON_ONCE in its
# completer (rxe_comp.c: an error completion whose status is still success)
# fires under frame loss with Linux's C ends as well as ours: it is shown,
# not counted; any other report fails the case.
REPORTS='BUG:|WARNING:|Oops|refcount_t|general protection|UBSAN|KASAN|rust_panic|panicked|still waits for'
reports() {
	local r
	# Since the case began (mark_case).
	r=$(dmesg | awk '/rpcrdma_cm-fault-case/ { n = NR } { l[NR] = $0 } END { for (i = n + 1; i <= NR; i++) print l[i] }' |
		grep -E "$REPORTS")
	echo "$r" | grep 'drivers/infiniband/sw/rxe/rxe_comp.c' | sed 's/^/rxe (not counted): /'
	echo "$r" | grep -v 'drivers/infiniband/sw/rxe/rxe_comp.c' | grep . && return 1
	return 0
}

a_reports() { reports; }

mark_case() { echo "rpcrdma_cm-fault-case $*" >/dev/kmsg; }
a_mark_case() { mark_case "$(cat "$PAIR_DIR/args")"; }

# Events that tell why connections end: ours, xprtrdma's and sunrpc's.
FAULT_EVENTS="rpcrdma_cm/rpcrdma_cm_closed rpcrdma_cm/rpcrdma_cm_wc_error rpcrdma_cm/rpcrdma_cm_fatal
	rpcrdma/xprtrdma_wc_receive rpcrdma/xprtrdma_wc_send rpcrdma/xprtrdma_wc_fastreg
	rpcrdma/svcrdma_wc_send_err rpcrdma/svcrdma_wc_read_err rpcrdma/svcrdma_wc_write_err
	rpcrdma/svcrdma_wc_recv_err
	sunrpc/xprt_timer sunrpc/xprt_disconnect_force sunrpc/xprt_retransmit"

trace_on() {
	local e
	ensure_tracefs
	echo 0 >/sys/kernel/tracing/tracing_on
	echo >/sys/kernel/tracing/trace
	echo 4096 >/sys/kernel/tracing/buffer_size_kb
	for e in $FAULT_EVENTS; do
		# rpcrdma's events exist only while rpcrdma.ko is loaded.
		[ -e "/sys/kernel/tracing/events/$e/enable" ] && echo 1 >"/sys/kernel/tracing/events/$e/enable"
	done
	echo 1 >/sys/kernel/tracing/tracing_on
}

# What ended connections, counted: "event field=value" pairs that name a
# cause (closed states, completion statuses, sunrpc's timer and forced
# disconnects), for the case's diagnostics.
trace_summary() {
	echo 0 >/sys/kernel/tracing/tracing_on
	grep -v '^#' /sys/kernel/tracing/trace |
		awk '{ ev = ""; for (i = 1; i <= NF; i++) if ($i ~ /^[a-z_]+:$/) { ev = $i; break }
		       if (ev == "") next; sub(":", "", ev); key = ev
		       for (j = i + 1; j <= NF; j++) if ($j ~ /^(state|status|why)=/ || $j == "recv" || $j == "send") key = key " " $j
		       if (ev ~ /wc_(receive|send|fastreg)$/ && key !~ /status=/) next
		       n[key]++ }
		     END { for (k in n) printf "%s x%d; ", k, n[k] }'
	# From a fatal error to the connection's close, per connection.
	grep -v '^#' /sys/kernel/tracing/trace |
		awk '{ ts = ""; for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+\.[0-9]+:$/) { ts = $i; sub(":", "", ts) }
		       c = ""; for (i = 1; i <= NF; i++) if ($i ~ /^conn=/) c = $i
		       if ($0 ~ /rpcrdma_cm_fatal:/) f[c] = ts
		       else if ($0 ~ /rpcrdma_cm_closed:/ && (c in f)) { d = ts - f[c]; s += d; n++; if (d > m) m = d; delete f[c] } }
		     END { if (n) printf "fatal->closed: %d, mean %.2f s, max %.2f s; ", n, s / n, m }'
	echo
}

# rxe's own counters of the link's device ("name value" pairs), for a
# case's diagnostics: the protocol errors behind a QP that fails.
rxe_counters() {
	rdma statistic show link rxe0/1 2>/dev/null | tr ' ' '\n' |
		awk 'NR > 1 && prev ~ /^[a-z_]+$/ && $0 ~ /^[0-9]+$/ { print prev, $0 } { prev = $0 }'
}

# rxe_delta BEFORE: the counters that changed since BEFORE (a file).
rxe_delta() {
	rxe_counters | awk 'NR == FNR { b[$1] = $2; next } $2 != b[$1] && $1 !~ /pkts|rdma_|ack_deferred/ { printf "%s+%d ", $1, $2 - b[$1] }' "$1" -
}

a_rxe_mark() { rxe_counters >/tmp/rxe_before; }
a_rxe_delta() { rxe_delta /tmp/rxe_before; }

a_trace_on() { trace_on; }
a_trace_summary() {
	trace_summary
	# Our module's counters that tell a connection's end, when it is loaded.
	[ -r "$DBG/stats" ] && awk '$1 ~ /err|busy|disconnect|removal|reject|unreachable|timeout|_exc/ && $2 != 0 { printf "%s=%s ", $1, $2 }' "$DBG/stats"
	return 0
}

fault_secs() { echo "$(date +%s.%N) $1" | awk '{ printf "%.1f", $1 - $2 }'; }

ask_args() { # ask_args NAME ARGS...
	local name=$1
	shift
	echo "$*" >"$PAIR_DIR/args"
	ask "$name"
}

# client_side c|ours: the transport of guest b's mount.
client_side() {
	if [ "$1" = ours ]; then
		rmmod_within 10 rpcrdma
		[ ! -d /sys/module/rpcrdma ] || { fail "rpcrdma.ko stays loaded"; return 1; }
		module_loaded || insmod "$KO" || { fail "insmod rpcrdma_cm"; return 1; }
	else
		rmmod_within 10 rpcrdma_cm
		! module_loaded || { fail "rpcrdma_cm stays loaded: $(cat /sys/module/rpcrdma_cm/refcnt)"; return 1; }
		load_c_transport || return 1
	fi
}

client_unload() {
	for ((i = 0; i < 100; i++)); do
		[ -d /sys/module/rpcrdma ] && rmmod rpcrdma 2>/dev/null
		module_loaded && rmmod rpcrdma_cm 2>/dev/null
		[ -d /sys/module/rpcrdma ] || module_loaded || return 0
		sleep 0.1
	done
	fail "client: cannot unload: $(lsmod | grep -E '^rpcrdma' | tr '\n' ' ')"
}

# apply FAULT: runs the fault while the workload goes on (returns when the
# fault is over); off_fault FAULT undoes what stays (netem).
apply_fault() {
	case "$1" in
	loss1) netem loss 1% && ask_args netem loss 1% ;;
	loss5) netem loss 5% && ask_args netem loss 5% ;;
	# With a rate, netem sends in order (each frame after the one before):
	# the jitter varies the delay without reordering, which the reorder
	# case tests alone.
	delay20) netem delay 20ms 5ms distribution normal rate 10gbit &&
		ask_args netem delay 20ms 5ms distribution normal rate 10gbit ;;
	reorder) netem delay 10ms reorder 25% 50% && ask_args netem delay 10ms reorder 25% 50% ;;
	duplicate) netem duplicate 5% && ask_args netem duplicate 5% ;;
	cut5 | cut60)
		netem loss 100% && ask_args netem loss 100% || return 1
		sleep "${1#cut}"
		netem off && ask_args netem off
		;;
	server_device) ask device_cycle ;;
	nfsd_restart) ask nfsd_restart ;;
	client_device)
		rdma link delete rxe0 || return 1
		sleep 5
		rdma link add rxe0 type rxe netdev "$(link_ifc)"
		;;
	*) fail "no fault $1"; return 1 ;;
	esac
}

off_fault() {
	netem off
	ask_args netem off
}

# fault_case FAULT CLIENT SERVER: one row. Fails when data is lost or
# corrupted, the mount does not come back, a kernel reports, or a transport
# cannot be unloaded afterwards.
fault_case() {
	local fault=$1 cli=$2 srv=$3 mnt=/tmp/mnt_fault ok=0 t0 took cc0 cc1 rt0 rt1 data=ok pid_cp pid_fio rc_cp rc_fio
	mark_case "$fault $cli-$srv"
	ask_args mark_case "$fault $cli-$srv"
	ask "srv_$srv" || return 1
	client_side "$cli" || return 1
	mkdir -p "$mnt"
	timeout -s KILL 60 mount -t nfs -o rdma,port=20049,vers=4.2,hard "$PAIR_A:/" "$mnt" ||
		{ fail "$fault $cli-$srv: mount"; return 1; }
	[ -f /tmp/fault.bin ] || head -c $((FAULT_MIB << 20)) /dev/urandom >/tmp/fault.bin
	cc0=$(mountstat 3)
	rt0=$(op_retrans)
	trace_on
	ask trace_on
	rxe_counters >/tmp/rxe_before
	ask rxe_mark
	t0=$(date +%s.%N)
	cp /tmp/fault.bin "$mnt/fault.bin" &
	pid_cp=$!
	fio --name=fault --filename="$mnt/fio.dat" --size=8M --rw=randwrite --bsrange=4k-256k \
		--direct=1 --ioengine=libaio --iodepth=8 --verify=crc32c --verify_fatal=1 \
		--do_verify=1 --number_ios=300 --randseed=8797 --output=/tmp/fio_fault.out >/dev/null 2>&1 &
	pid_fio=$!
	sleep 1
	apply_fault "$fault" || { fail "$fault: could not apply"; ok=1; }
	# Copy and verification run to their end (a hard mount waits the fault out).
	wait "$pid_cp"
	rc_cp=$?
	wait "$pid_fio"
	rc_fio=$?
	off_fault
	took=$(fault_secs "$t0")
	if [ "$rc_cp" != 0 ]; then
		data="copy_error"
		ok=1
	else
		sync
		echo 3 >/proc/sys/vm/drop_caches
		cmp -s /tmp/fault.bin "$mnt/fault.bin" || { data=CORRUPT; ok=1; }
	fi
	if [ "$rc_fio" != 0 ]; then
		grep -qi "verify" /tmp/fio_fault.out && data=CORRUPT || data="${data}+fio_error"
		ok=1
		grep -m3 -iE 'err|verify' /tmp/fio_fault.out | sed 's/^/# fio: /'
	fi
	cc1=$(mountstat 3)
	rt1=$(op_retrans)
	rm -f "$mnt/fault.bin" "$mnt/fio.dat"
	timeout -s KILL 120 umount "$mnt" || { fail "$fault $cli-$srv: umount"; umount -f -l "$mnt"; ok=1; }
	echo "# fault: $fault $cli-$srv data=$data reconnects=$((cc1 - cc0)) seconds=$took $(retrans_delta "$rt0" "$rt1")" |
		tee -a "$PAIR_DIR/faults.rows"
	[ "$data" = ok ] || fail "$fault $cli-$srv: data $data"
	ktap_print_msg "client events: $(trace_summary)$([ -r "$DBG/stats" ] && awk '$1 ~ /err|busy|disconnect|removal|reject|unreachable|timeout|_exc/ && $2 != 0 { printf "%s=%s ", $1, $2 }' "$DBG/stats")"
	ask trace_summary && ktap_print_msg "server events: $(cat "$PAIR_DIR/trace_summary.out")"
	ktap_print_msg "client rxe: $(rxe_delta /tmp/rxe_before)"
	ask rxe_delta && ktap_print_msg "server rxe: $(cat "$PAIR_DIR/rxe_delta.out")"
	ask srv_stop || { fail "$fault $cli-$srv: the server's transports do not unload"; ok=1; }
	client_unload || ok=1
	ask reports || { fail "$fault $cli-$srv: guest a's kernel log has reports"; ok=1; }
	if ! reports >/tmp/fault_reports; then
		fail "$fault $cli-$srv: guest b's kernel log has reports"
		ok=1
	fi
	sed 's/^/# /' /tmp/fault_reports
	grep -q 'rxe (not counted)' "$PAIR_DIR/reports.out" 2>/dev/null &&
		ktap_print_msg "guest a: $(grep 'rxe (not counted)' "$PAIR_DIR/reports.out" | head -1)"
	return $ok
}

# The pairings each form runs.
FAULT_PAIRINGS_SHORT="ours-ours"
FAULT_PAIRINGS_FULL="ours-ours ours-c c-ours c-c"

# pair_faults: every case of the form FAULTS names (short by default).
pair_faults() {
	local f p ok=0 faults pairings
	if [ "${FAULTS:-short}" = full ]; then
		faults=$FAULTS_FULL pairings=$FAULT_PAIRINGS_FULL FAULT_MIB=32
	else
		# make check's: a smaller copy (5 % loss runs it at about 120 KB/s).
		faults=$FAULTS_SHORT pairings=$FAULT_PAIRINGS_SHORT FAULT_MIB=8
	fi
	# FAULT_LIST / FAULT_PAIRINGS narrow a run (make faults FAULT_LIST=loss5).
	faults=${FAULT_LIST:-$faults} pairings=${FAULT_PAIRINGS:-$pairings}
	command -v tc >/dev/null || { fail "tc missing (iproute2)"; return 1; }
	netem delay 0ms || { fail "no netem in this kernel (CONFIG_NET_SCH_NETEM)"; return 1; }
	netem off
	for p in $pairings; do
		for f in $faults; do
			fault_case "$f" "${p%-*}" "${p#*-}" || ok=1
		done
	done
	return $ok
}
