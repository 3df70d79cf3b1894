# SPDX-License-Identifier: GPL-2.0
# Helpers for rpcrdma_cm selftests (sourced; runs inside the guest as root).

TOP=${TOP:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
KO=${KO:-$TOP/rpcrdma_cm.ko}
# Linux's rpcrdma.ko is loaded as the peer and holds the server class name
# "rdma": ours registers as "rdmacm" in the tests (nfsd's portlist names it).
KO_ARGS=${KO_ARGS-svc_class=rdmacm xprt_class=0}
DBG=/sys/kernel/debug/rpcrdma_cm
# Addresses that exist only inside the guest (TEST-NET-1, RFC 5737).
ADDR=192.0.2.1

# Runs "$@", printing its output as TAP diagnostics.
diag() {
	"$@" 2>&1 | sed 's/^/# /'
	return "${PIPESTATUS[0]}"
}

fail() {
	ktap_print_msg "FAIL: $*"
	return 1
}

ensure_debugfs() {
	mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
}

# The value of counter $1 in the stats file ("name value" lines).
stat() {
	awk -v k="$1" '$1 == k { print $2; found = 1 } END { exit !found }' "$DBG/stats"
}

module_loaded() {
	[ -d /sys/module/rpcrdma_cm ]
}

unload_module() {
	module_loaded || return 0
	rmmod rpcrdma_cm
}

# The kernel log since the selftests started (the runner writes a marker),
# without the lines of the leaking sample that debug kernels load on purpose
# (kmemleak_finds_a_leak in rpcrdma_cm.sh).
klog() {
	dmesg | sed -n '/rpcrdma_cm-selftests-start/,$p' |
		sed '/rpcrdma_cm-kmemleak-sample-start/,/rpcrdma_cm-kmemleak-sample-end/d'
}

# Port of our listener in the tests (nfsd has 20049).
PORT=20050
PARAMS=/sys/module/rpcrdma_cm/parameters

# (Re)loads the module with the given parameters.
load_module() {
	unload_module || return 1
	insmod "$KO" $KO_ARGS "$@" || { fail "insmod $*"; return 1; }
}

setp() { # name value: set a module parameter
	echo "$2" >"$PARAMS/$1" || fail "cannot set $1=$2"
}

min() { echo $(($1 < $2 ? $1 : $2)); }

max_conn_id() {
	awk '{ v = $1; sub("id=", "", v); if (v + 0 > m) m = v + 0 } END { print m + 0 }' "$DBG/connections"
}

conn_line() { grep "^id=$1 " "$DBG/connections"; }

# field "LINE" KEY: the value of KEY=value in a connections line. Pure bash:
# process creation is slow under TCG, and the tests look up many fields.
field() {
	local kv
	for kv in $1; do
		[[ $kv == "$2="* ]] && { echo "${kv#*=}"; return 0; }
	done
}

# wait_field ID KEY VALUE [SECONDS]: polls connection ID until KEY is VALUE,
# for SECONDS of wall time (one poll takes far longer than its 0.1 s sleep
# on a debug kernel under TCG, so the polls are not counted).
wait_field() {
	local end=$((SECONDS + ${4:-20}))
	while :; do
		[ "$(field "$(conn_line "$1")" "$2")" = "$3" ] && return 0
		[ "$SECONDS" -lt "$end" ] || break
		sleep 0.1
	done
	ktap_print_msg "timeout waiting for id=$1 $2=$3: $(conn_line "$1")"
	return 1
}

# wait_cm_listen COMM PORT: waits (20 s) until a process COMM has an RDMA-CM
# id listening on PORT (`rdma resource show cm_id`).
wait_cm_listen() {
	local end=$((SECONDS + 20))
	until rdma resource show cm_id 2>/dev/null | grep "comm $1 " | grep -q "LISTEN.*:$2 \|:$2 .*LISTEN\|:$2\$"; do
		[ "$SECONDS" -lt "$end" ] || return 1
		sleep 0.1
	done
}

# client_connect ARGS...: writes "connect ARGS" to control, prints the new id.
client_connect() {
	local before
	before=$(max_conn_id)
	echo "connect $*" >"$DBG/control" || return 1
	echo $((before + 1))
}

# connected ARGS...: "connect ARGS" through control, then waits until that
# connection is established; prints its id. Fails (saying why on stderr) when
# it is not established within 20 s.
connected() {
	local id
	id=$(client_connect "$@") || return 1
	wait_field "$id" state established >&2 || return 1
	echo "$id"
}

# The server-side line of the connection whose client is connection ID.
server_for() {
	local local_ep
	local_ep=$(field "$(conn_line "$1")" local)
	grep " role=server .* peer=$local_ep " "$DBG/connections"
}

# rpc ID ARGS...: "call ID ARGS" through control; fails as the write does.
rpc() {
	local id=$1
	shift
	echo "call $id $*" >"$DBG/control"
}

last_rpc() { tail -n 1 "$DBG/rpcs"; }

# xcount ID NAME: connection ID's messaging counter NAME (0 when not shown).
xcount() {
	local v
	v=$(field "$(grep "^id=$1 " "$DBG/xprt")" "$2")
	echo "${v:-0}"
}

# nfs_write ID NAME COUNT SEED: a WRITE, retried while nfsd is in its grace
# period (NFS4ERR_GRACE: the anonymous stateid must wait it out).
nfs_write() {
	local i
	for ((i = 0; i < 40; i++)); do
		rpc "$1" nfs write "$2" "$3" "$4" || return 1
		[ "$(field "$(last_rpc)" nfs_status)" = 10013 ] || return 0
		sleep 1
	done
	return 1
}

# expect "LINE" KEY=VALUE...: every field has the value; prints mismatches.
expect() {
	local line=$1 kv k ok=0
	local -A f=()
	for kv in $line; do
		[[ $kv == *=* ]] && f[${kv%%=*}]=${kv#*=}
	done
	shift
	for kv in "$@"; do
		k=${kv%%=*}
		if [ "${f[$k]-}" != "${kv#*=}" ]; then
			ktap_print_msg "expected $kv, got '${f[$k]-}' in: $line"
			ok=1
		fi
	done
	return $ok
}

# Linux's C RPC-over-RDMA transport (rpcrdma.ko: xprtrdma and svcrdma), the
# peer our module is tested against. The test kernel builds it as a module
# (CONFIG_SUNRPC_XPRT_RDMA=m) so that it can be loaded and unloaded within one
# boot; it is taken from the kernel tree the guest was booted from (KSRC).
load_c_transport() {
	[ -d /sys/module/rpcrdma ] && return 0
	# Our client class holds the ident rpcrdma.ko registers: ours goes first.
	if [ "$(cat /sys/module/rpcrdma_cm/parameters/xprt_class 2>/dev/null)" = Y ]; then
		rpc.nfsd 0 2>/dev/null
		unload_module || { fail "cannot unload rpcrdma_cm (client class) for rpcrdma.ko"; return 1; }
	fi
	insmod "$KSRC/net/sunrpc/xprtrdma/rpcrdma.ko" || {
		fail "cannot load Linux's rpcrdma.ko from $KSRC"
		return 1
	}
}

# Linux nfsd on 192.0.2.1, RDMA port 20049, exporting a tmpfs (the guest's /tmp
# is an overlay, which nfsd cannot export). Idempotent.
start_nfsd() {
	load_c_transport || return 1
	grep -q "rdma 20049" /proc/fs/nfsd/portlist 2>/dev/null && return 0
	nfsd_up || return 1
	echo "rdma 20049" >/proc/fs/nfsd/portlist || return 1
	grep -q "rdma 20049" /proc/fs/nfsd/portlist
}

# nfsd running (TCP only until a caller adds an RDMA listener), exporting
# /tmp/export. Idempotent.
nfsd_up() {
	mkdir -p /tmp/export /run/rpcbind /var/lib/nfs/v4recovery
	mountpoint -q /tmp/export || mount -t tmpfs -o size=256m tmpfs /tmp/export || return 1
	echo "/tmp/export *(rw,fsid=0,insecure,no_root_squash,no_subtree_check)" >/etc/exports
	mountpoint -q /proc/fs/nfsd || mount -t nfsd nfsd /proc/fs/nfsd || return 1
	# A short grace period: WRITE with the anonymous stateid waits it out.
	echo 10 >/proc/fs/nfsd/nfsv4gracetime 2>/dev/null
	echo 10 >/proc/fs/nfsd/nfsv4leasetime 2>/dev/null
	# lockd's grace period (50 s by default) holds back delegations too.
	echo 10 >/proc/sys/fs/nfs/nlm_grace_period 2>/dev/null
	# nfsd's default on a 2 GiB guest is 256 KiB; the tests move 1 MiB.
	echo 1048576 >/proc/fs/nfsd/max_block_size 2>/dev/null
	pgrep -x rpcbind >/dev/null || rpcbind -w || return 1
	exportfs -ra || return 1
	pgrep -x rpc.mountd >/dev/null || rpc.mountd || return 1
	rpc.nfsd 2
}

# Stops nfsd and unloads both transports: Linux's rpcrdma.ko (whose client
# class cannot live beside ours) and ours.
unload_transports() {
	local i
	rpc.nfsd 0 2>/dev/null
	for ((i = 0; i < 100; i++)); do
		[ -d /sys/module/rpcrdma ] && rmmod rpcrdma 2>/dev/null
		module_loaded && rmmod rpcrdma_cm 2>/dev/null
		[ -d /sys/module/rpcrdma ] || module_loaded || return 0
		sleep 0.1
	done
	fail "cannot unload rpcrdma.ko or rpcrdma_cm: $(lsmod | grep -E '^rpcrdma' | tr '\n' ' ')"
}

# Files in nfsd's export: f_N (N random octets), w_N (empty, to be written),
# d500/ (500 entries). Idempotent.
nfs_files() {
	local n i
	for n in 1 1024 4096 65536 1048576; do
		[ -f /tmp/export/f_$n ] || head -c $n /dev/urandom >/tmp/export/f_$n || return 1
		: >/tmp/export/w_$n
	done
	: >/tmp/export/edge
	if [ ! -d /tmp/export/d500 ]; then
		mkdir /tmp/export/d500 || return 1
		for ((i = 0; i < 500; i++)); do : >/tmp/export/d500/entry_$i; done
	fi
}

# fnv FILE: FNV-1a 64 of a file's content, as the module prints data_fnv.
fnv() {
	python3 -c '
import sys
h = 0xcbf29ce484222325
for b in open(sys.argv[1], "rb").read():
    h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
print("%016x" % h)' "$1"
}

# names_fnv_sum DIR: the wrapping sum of FNV-1a 64 of the names in DIR.
names_fnv_sum() {
	python3 -c '
import os, sys
def f(s):
    h = 0xcbf29ce484222325
    for b in s:
        h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
    return h
print("%016x" % (sum(f(n.encode()) for n in os.listdir(sys.argv[1])) & 0xffffffffffffffff))' "$1"
}

# is_pattern FILE SEED: the file holds exactly the module's echo pattern for
# SEED (rust/proto/rpc.rs, echo::pattern), as many octets as it has.
is_pattern() {
	python3 -c '
import sys
d = open(sys.argv[1], "rb").read()
s = (int(sys.argv[2]) * 0x9e3779b9) & 0xffffffff
want = bytes(((((i ^ s) * 2654435761) & 0xffffffff) >> 24) for i in range(len(d)))
sys.exit(0 if d == want else 1)' "$1" "$2"
}

ensure_tracefs() {
	mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing
}
