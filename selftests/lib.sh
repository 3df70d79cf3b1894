# SPDX-License-Identifier: GPL-2.0
# Helpers for rpcrdma_cm selftests (sourced; runs inside the guest as root).

TOP=${TOP:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
KO=${KO:-$TOP/rpcrdma_cm.ko}
# Linux's rpcrdma.ko is loaded as the peer and holds the server class name
# "rdma": ours registers as "rdmacm" in the tests (nfsd's portlist names it).
KO_ARGS=${KO_ARGS-svc_class=rdmacm xprt_class=0}
# Linux's rpcrdma.ko: by default the test kernel's (KSRC, below); on a
# distribution kernel, the one it ships (scripts/debian-vm sets it).
C_RPCRDMA_KO=${C_RPCRDMA_KO:-}
# KO_DEPS: what rpcrdma_cm.ko and rpcrdma.ko need that the kernel has as
# modules rather than built in (a distribution kernel: sunrpc, rdma_cm,
# ib_core), loaded with modprobe before either is insmod'ed. Empty for the
# test kernel, which has them built in.
KO_DEPS=${KO_DEPS:-}
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

# rxe_up: the network every test starts from: dummy0 up with $ADDR/24 as its
# only global address (tests add others), and rxe0 on it ACTIVE (tests that
# delete rxe0 add it back; the selftests' runner restores it after each
# test). Idempotent; fails saying what it could not set up.
rxe_up() {
	local a i state
	ip link show dummy0 >/dev/null 2>&1 || ip link add dummy0 type dummy || { echo "cannot add dummy0"; return 1; }
	ip link set dummy0 up || { echo "cannot set dummy0 up"; return 1; }
	for a in $(ip -o addr show dev dummy0 scope global | awk '{ print $4 }'); do
		[ "$a" = "$ADDR/24" ] || ip addr del "$a" dev dummy0 || { echo "cannot remove $a from dummy0"; return 1; }
	done
	ip -o -4 addr show dev dummy0 | grep -q " $ADDR/24 " ||
		ip addr add "$ADDR/24" dev dummy0 || { echo "cannot add $ADDR/24 to dummy0"; return 1; }
	state=$(rdma link show rxe0/1 2>/dev/null)
	if [ -n "$state" ] && [[ "$state" != *" netdev dummy0"* ]]; then
		rdma link delete rxe0 || { echo "rxe0 is not on dummy0 and cannot be deleted: $state"; return 1; }
		state=
	fi
	[ -n "$state" ] || rdma link add rxe0 type rxe netdev dummy0 || { echo "cannot add rxe0 on dummy0"; return 1; }
	for ((i = 0; i < 100; i++)); do
		state=$(rdma link show rxe0/1 2>/dev/null)
		[[ "$state" == *"state ACTIVE"* ]] && return 0
		sleep 0.1
	done
	echo "rxe0 not ACTIVE: $state"
	return 1
}

# bounded SECONDS CMD...: runs CMD; after SECONDS it is killed and 124
# returned without waiting for it (a task stuck in the kernel cannot die: it
# is left behind). The runner's clean-up between tests uses it, so that
# nothing it does can hang the suite.
bounded() {
	local secs=$1 pid end i
	shift
	"$@" &
	pid=$!
	end=$((SECONDS + secs))
	for ((i = 0; ; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		if [ "$SECONDS" -ge "$end" ]; then
			kill -KILL "$pid" 2>/dev/null
			ktap_print_msg "gave up after $secs s: $*"
			return 124
		fi
		if [ "$i" -lt 10 ]; then sleep 0.02; else sleep 0.2; fi
	done
	wait "$pid" 2>/dev/null
}

# kill_tree PID: SIGKILL to PID and every process descending from it.
kill_tree() {
	local p s rest ppid x all=() todo=("$1")
	local -A kids=()
	for p in /proc/[0-9]*; do
		{ read -r s <"$p/stat"; } 2>/dev/null || continue
		rest=${s##*) }
		read -r _ ppid _ <<<"$rest"
		kids[$ppid]+=" ${p#/proc/}"
	done
	while [ ${#todo[@]} -gt 0 ]; do
		x=${todo[0]}
		todo=("${todo[@]:1}")
		all+=("$x")
		# shellcheck disable=SC2206
		todo+=(${kids[$x]-})
	done
	kill -KILL "${all[@]}" 2>/dev/null
}

# The value of counter $1 in the stats file ("name value" lines).
stat() {
	awk -v k="$1" '$1 == k { print $2; found = 1 } END { exit !found }' "$DBG/stats"
}

module_loaded() {
	[ -d /sys/module/rpcrdma_cm ]
}

# rmmod_within SECONDS MODULE: rmmod MODULE, retried every 0.2 s for up to
# SECONDS while something still holds it (a connection closing, an RPC
# ending); succeeds once MODULE is not loaded.
rmmod_within() {
	local end=$((SECONDS + $1))
	while [ -d "/sys/module/$2" ]; do
		rmmod "$2" 2>/dev/null && return 0
		[ "$SECONDS" -lt "$end" ] || return 1
		sleep 0.2
	done
}

# load_ko_deps: KO_DEPS loaded (modprobe -a: a no-op for those loaded).
load_ko_deps() {
	[ -z "$KO_DEPS" ] || modprobe -a $KO_DEPS
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

KMEMLEAK=/sys/kernel/debug/kmemleak

# kmemleak_clean (debug kernels): scan now; any unreferenced object is
# reported and fails. The single-guest suite runs it after each test, the
# two-guest one after each test in both guests.
# kmemleak reports an object only when it is at least 5 s old and was already
# unreferenced and unchanged at the scan before (a new object is always
# "changed" at its first scan), so with one scan after each test a leak shows
# after the test that made it or after the next one; kmemleak_after_all_tests
# waits and scans twice, so nothing of the last test or the final unload
# escapes. A report is confirmed by a second scan (an object in transit
# between two pointers can look unreferenced once), which is skipped when the
# first finds nothing.
kmemleak_clean() {
	local r
	echo scan >"$KMEMLEAK" || return 1
	r=$(cat "$KMEMLEAK")
	if [ -n "$r" ]; then
		echo scan >"$KMEMLEAK" || return 1
		r=$(cat "$KMEMLEAK")
	fi
	echo clear >"$KMEMLEAK"
	[ -z "$r" ] && return 0
	ktap_print_msg "kmemleak (objects allocated by this test or the one before):"
	echo "$r" | head -60 | sed 's/^/# /'
	return 1
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
# boot; it is taken from the kernel tree the guest was booted from (KSRC),
# or is C_RPCRDMA_KO.
load_c_transport() {
	local ko=${C_RPCRDMA_KO:-$KSRC/net/sunrpc/xprtrdma/rpcrdma.ko}
	[ -d /sys/module/rpcrdma ] && return 0
	# Our client class holds the ident rpcrdma.ko registers: ours goes first.
	if [ "$(cat /sys/module/rpcrdma_cm/parameters/xprt_class 2>/dev/null)" = Y ]; then
		rpc.nfsd 0 2>/dev/null
		unload_module || { fail "cannot unload rpcrdma_cm (client class) for rpcrdma.ko"; return 1; }
	fi
	insmod "$ko" || {
		fail "cannot load Linux's rpcrdma.ko ($ko)"
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

# mountstat FIELD: a field of the rdma xprt line of /proc/self/mountstats
# (xprtrdma's print_stats), counting from the field after "rdma": 3
# connect_count, 11 read_chunk_count, 12 write_chunk_count, 13
# reply_chunk_count, 17 fixup_copy_count, 22 mrs_recycled, 24
# mrs_allocated, 25 local_inv_needed.
mountstat() {
	awk -v f="$1" '$1 == "xprt:" && $2 == "rdma" { print $(f + 2); exit }' /proc/self/mountstats
}

# op_retrans: "RETRANS TIMEOUTS" of the rdma mount: its calls sent again
# (transmissions less operations) and its major timeouts, summed over the
# per-op statistics of /proc/self/mountstats.
op_retrans() {
	awk '/^device / { rdma = 0; ops = 0 }
	     $1 == "xprt:" { rdma = ($2 == "rdma") }
	     /per-op statistics/ { ops = 1; next }
	     rdma && ops && $1 ~ /:$/ && NF >= 9 { r += $3 - $2; t += $4 }
	     END { print r + 0, t + 0 }' /proc/self/mountstats
}

# retrans_delta "R0 T0" "R1 T1": retrans=N timeouts=N between two op_retrans.
retrans_delta() {
	echo "$1 $2" | awk '{ printf "retrans=%d timeouts=%d", $3 - $1, $4 - $2 }'
}

# How much data the NFS workloads move: NFS_WORKLOAD=small (make check-debug,
# whose kernel runs them about ten times slower) takes the same steps on a
# tenth of the files and entries, a quarter of the big file and of fio's
# I/Os.
if [ "${NFS_WORKLOAD:-full}" = small ]; then
	NFS_FILES=200 NFS_ENTRIES=500 NFS_BIG_MB=16 NFS_FIO_IOS=50
else
	NFS_FILES=2000 NFS_ENTRIES=5000 NFS_BIG_MB=64 NFS_FIO_IOS=200
fi

# /tmp/tree ($NFS_FILES files of 1 to 9,000 random octets in 40 directories)
# and /tmp/tree.tar, made once by one process (a process per file takes
# minutes under TCG).
make_tree() {
	[ -f /tmp/tree.tar ] && return 0
	perl -e 'open(my $r, "<", "/dev/urandom") or die;
		for my $i (0 .. '"$((NFS_FILES - 1))"') {
			my $d = "/tmp/tree/d" . ($i % 40);
			mkdir "/tmp/tree"; mkdir $d;
			read($r, my $b, $i * 37 % 9000 + 1) or die;
			open(my $f, ">", "$d/f$i") or die; print $f $b; close($f) or die;
		}' || return 1
	tar -C /tmp -cf /tmp/tree.tar tree
}

# mount_workloads SERVER PORT RESTART [VERSIONS]: what users do on `mount -o
# rdma` of SERVER's nfsd at PORT, at each NFS version of VERSIONS (default
# "4.2 3"): untar a tree of 2,000 files ($NFS_FILES) and
# diff it; random writes of 512 B to 1 MiB with fio's crc32c verification
# (every block read back; O_DIRECT: every I/O is an RPC), then the same at
# iodepth 64 with 4 KiB blocks (libaio: 64 calls in flight, more than a
# window of 32); a directory of 5,000 entries ($NFS_ENTRIES) listed
# complete; a 64 MiB ($NFS_BIG_MB)
# file in and out (read back after the page cache is dropped), renamed,
# hard-linked, symlinked and read through the link. Then RESTART
# (a function: nfsd stopped and started again, perhaps with other sizes)
# runs while a 64 MiB copy does: the client reconnects (private data
# exchanged again) and the copy completes byte for byte, read back after the
# page cache is dropped. FIRST_CONN and RESTARTED_CONN are then the mount's
# connections before and after, in our debugfs, if our client transport
# carries the mount.
mount_workloads() {
	local server=$1 port=$2 restart=$3 versions=${4:-4.2 3} v src mnt ok=0 pid before i n t0
	command -v fio >/dev/null || { fail "fio missing (scripts/deps installs it)"; return 1; }
	make_tree || { fail "making /tmp/tree"; return 1; }
	[ -f /tmp/nfs_big.bin ] || head -c $((NFS_BIG_MB << 20)) /dev/urandom >/tmp/nfs_big.bin
	for v in $versions; do
		src=/; [ "$v" = 3 ] && src=/tmp/export
		mnt=/tmp/mnt_w$v
		mkdir -p "$mnt"
		timeout -s KILL 60 mount -t nfs -o rdma,port=$port,vers=$v,nolock,hard "$server:$src" "$mnt" ||
			{ fail "mount vers=$v"; ok=1; continue; }
		mkdir -p "$mnt/w$v"
		t0=$SECONDS
		tar -C "$mnt/w$v" -xf /tmp/tree.tar || { fail "vers=$v: untar"; ok=1; }
		diff -r /tmp/tree "$mnt/w$v/tree" >/dev/null || { fail "vers=$v: the untarred tree differs"; ok=1; }
		n=$(find "$mnt/w$v/tree" -type f | wc -l)
		[ "$n" = "$NFS_FILES" ] || { fail "vers=$v: $n of $NFS_FILES files"; ok=1; }
		fio --name=verify --filename="$mnt/w$v/fio.dat" --size=16M --rw=randwrite --bsrange=512-1M \
			--direct=1 --ioengine=psync --verify=crc32c --verify_fatal=1 --do_verify=1 \
			--number_ios=$NFS_FIO_IOS --randseed=8797 --output=/tmp/fio_$v.out >/dev/null 2>&1 ||
			{ fail "vers=$v: fio verify: $(grep -m3 -iE 'err|verify' /tmp/fio_$v.out)"; ok=1; }
		ktap_print_msg "vers=$v: untar, diff and fio verify: $((SECONDS - t0)) s"
		t0=$SECONDS
		fio --name=deep --filename="$mnt/w$v/deep.dat" --size=4M --rw=randwrite --bs=4k \
			--direct=1 --ioengine=libaio --iodepth=64 --verify=crc32c --verify_fatal=1 \
			--do_verify=1 --randseed=8166 --output=/tmp/fio_deep_$v.out >/dev/null 2>&1 ||
			{ fail "vers=$v: fio iodepth 64: $(grep -m3 -iE 'err|verify' /tmp/fio_deep_$v.out)"; ok=1; }
		ktap_print_msg "vers=$v: fio at iodepth 64: $((SECONDS - t0)) s"
		t0=$SECONDS
		mkdir "$mnt/w$v/big"
		(cd "$mnt/w$v/big" && for ((i = 0; i < NFS_ENTRIES; i++)); do : >"e$i" || exit 1; done) ||
			{ fail "vers=$v: creating $NFS_ENTRIES entries"; ok=1; }
		echo 3 >/proc/sys/vm/drop_caches
		n=$(ls "$mnt/w$v/big" | wc -l)
		[ "$n" = "$NFS_ENTRIES" ] || { fail "vers=$v: $n of $NFS_ENTRIES entries listed"; ok=1; }
		rm -rf "$mnt/w$v" || { fail "vers=$v: rm -rf"; ok=1; }
		ktap_print_msg "vers=$v: $NFS_ENTRIES entries and rm -rf: $((SECONDS - t0)) s"
		t0=$SECONDS
		mkdir "$mnt/w$v"
		cp /tmp/nfs_big.bin "$mnt/w$v/big" && sync || { fail "vers=$v: $NFS_BIG_MB MiB in"; ok=1; }
		echo 3 >/proc/sys/vm/drop_caches
		cmp -s /tmp/nfs_big.bin "$mnt/w$v/big" || { fail "vers=$v: $NFS_BIG_MB MiB read back differs"; ok=1; }
		mv "$mnt/w$v/big" "$mnt/w$v/renamed" && ln "$mnt/w$v/renamed" "$mnt/w$v/hard" &&
			ln -s renamed "$mnt/w$v/sym" || { fail "vers=$v: rename/link/symlink"; ok=1; }
		[ "$(readlink "$mnt/w$v/sym")" = renamed ] || { fail "vers=$v: readlink"; ok=1; }
		[ "$(command stat -c %h "$mnt/w$v/hard")" = 2 ] || { fail "vers=$v: link count"; ok=1; }
		cmp -s /tmp/nfs_big.bin "$mnt/w$v/sym" || { fail "vers=$v: data through the symlink differs"; ok=1; }
		rm -rf "$mnt/w$v" || { fail "vers=$v: rm -rf"; ok=1; }
		ktap_print_msg "vers=$v: $NFS_BIG_MB MiB in and out, rename, links: $((SECONDS - t0)) s"
		umount "$mnt" || ok=1
	done
	mnt=/tmp/mnt_r
	mkdir -p "$mnt"
	timeout -s KILL 60 mount -t nfs -o rdma,port=$port,vers=4.2,hard "$server:/" "$mnt" || { fail "mount for the restart"; return 1; }
	before=$(stat established)
	FIRST_CONN=$(grep " for=mount" "$DBG/connections" | grep state=established | tail -1)
	cp /tmp/nfs_big.bin "$mnt/restart.bin" &
	pid=$!
	sleep 1
	"$restart" || { fail "$restart"; ok=1; }
	wait "$pid" || { fail "the copy failed across the restart"; ok=1; }
	cmp -s /tmp/nfs_big.bin "$mnt/restart.bin" || { fail "the copy differs after the restart"; ok=1; }
	echo 3 >/proc/sys/vm/drop_caches
	cmp -s /tmp/nfs_big.bin "$mnt/restart.bin" || { fail "read back after the restart differs"; ok=1; }
	ktap_print_msg "restart: $(($(stat established) - before)) connection ends established again (private data exchanged anew)"
	[ "$(stat established)" -gt "$before" ] || { fail "no new connection after the restart"; ok=1; }
	RESTARTED_CONN=$(grep " for=mount" "$DBG/connections" | grep state=established | tail -1)
	rm -f "$mnt/restart.bin"
	umount "$mnt" || ok=1
	return $ok
}

# nfs3_acls MNT [EXPORT]: POSIX ACLs over NFSv3's ACL protocol on MNT, a
# vers=3 mount over RDMA. A SETACL of 300 entries (about as many as the
# NFSACL protocol takes in Linux: 340 fail over TCP too), then, with the
# page cache dropped, its GETACL, whose receive pages the client leaves
# sparse (XDRBUF_SPARSE_PAGES: the transport allocates them) and whose
# Reply comes in a Reply chunk (the receive buffer is larger than the
# inline threshold), gives the same ACL back. With EXPORT, the exported
# directory on this machine: the server's own view matches, and a small ACL
# set there comes back through GETACL.
nfs3_acls() {
	local mnt=$1 exp=${2:-} ok=0 i spec= got acl r0 r1
	command -v setfacl >/dev/null || { fail "setfacl missing (scripts/deps installs acl)"; return 1; }
	for ((i = 0; i < 300; i++)); do spec+="u:$((20000 + i)):r$([ $((i % 2)) = 0 ] && echo w),"; done
	rm -f "$mnt/acl_big" "$mnt/acl_small"
	: >"$mnt/acl_big" || { fail "create acl_big"; return 1; }
	setfacl -m "${spec%,}" "$mnt/acl_big" || { fail "SETACL of 300 entries"; return 1; }
	echo 3 >/proc/sys/vm/drop_caches
	r0=$(mountstat 13)
	acl=$(getfacl -n --absolute-names --omit-header "$mnt/acl_big")
	r1=$(mountstat 13)
	got=$(echo "$acl" | grep -c '^user:2')
	ktap_print_msg "NFSv3 ACL of 300 entries: $got read back through GETACL, Reply chunks +$((r1 - r0))"
	[ "$got" = 300 ] || { fail "GETACL gave $got of 300 entries"; ok=1; }
	[ "$((r1 - r0))" -ge 1 ] || { fail "GETACL's Reply took no Reply chunk"; ok=1; }
	echo "$acl" | grep -q '^user:20001:r--$' && echo "$acl" | grep -q '^user:20298:rw-$' ||
		{ fail "GETACL entries differ from what was set"; ok=1; }
	if [ -n "$exp" ]; then
		[ "$(getfacl -n --absolute-names --omit-header "$exp/acl_big")" = "$acl" ] ||
			{ fail "the server's ACL differs from the client's"; ok=1; }
		: >"$exp/acl_small" && setfacl -m u:4242:rw,g:4343:r "$exp/acl_small" || { fail "setfacl on the server"; ok=1; }
		getfacl -n --absolute-names --omit-header "$mnt/acl_small" 2>/dev/null | grep -q '^user:4242:rw-$' ||
			{ fail "GETACL of a small ACL set on the server"; ok=1; }
	fi
	rm -f "$mnt/acl_big" "$mnt/acl_small"
	return $ok
}

# watchdog TEST: after TEST_WATCHDOG seconds (default 600; the longest test
# takes about 250 s on the debug kernel) print, once, the kernel stack of
# every task that is blocked (D) or in RDMA, RPC or module code, the
# module's connections and listeners, the user processes and the end of the
# kernel log, so a hang can be diagnosed from the
# TAP output; then rpcrdma_cm.sh's runner kills the test at TEST_TIMEOUT
# (pair.sh: the VM's hard timeout ends the run). Started detached so that a
# test's own bare `wait` does not wait for it.
WATCHDOG_PID=/run/rpcrdma_cm-watchdog.pid
# watchdog_start NAME: the watchdog for NAME, detached (a test's own bare
# `wait` does not wait for it); watchdog_stop ends it and its sleep.
watchdog_start() {
	(watchdog "$1" </dev/null & echo $! >"$WATCHDOG_PID")
}
watchdog_stop() {
	kill_tree "$(cat "$WATCHDOG_PID")"
}
watchdog() {
	local p st stack
	sleep "${TEST_WATCHDOG:-600}"
	ktap_print_msg "watchdog: $1 still running after ${TEST_WATCHDOG:-600} s; blocked or RDMA tasks:"
	for p in /proc/[0-9]*; do
		st=$(awk '/^State:/ { print $2 }' "$p/status" 2>/dev/null) || continue
		stack=$(cat "$p/stack" 2>/dev/null)
		[ "$st" = D ] || echo "$stack" | grep -qE 'rdma|rxe|ib_|rpcrdma|_cm_|cma_|iw_' || continue
		ktap_print_msg "pid ${p#/proc/} $(cat "$p/comm" 2>/dev/null) state $st wchan $(cat "$p/wchan" 2>/dev/null):"
		echo "$stack" | sed 's/^/#   /'
	done
	[ -r "$DBG/connections" ] && sed 's/^/# /' "$DBG/connections" "$DBG/listeners"
	# Moving or stuck: the RPC and RDMA counters twice, 10 s apart.
	for p in 1 2; do
		ktap_print_msg "$(awk '$1 == "xprt:"' /proc/self/mountstats 2>/dev/null | head -2 | tr '\n' ' ')"
		[ -r "$DBG/xprt" ] && tail -2 "$DBG/xprt" | sed 's/^/# /'
		[ -r /proc/net/rpc/nfs ] && sed -n 's/^rpc /# rpc /p' /proc/net/rpc/nfs
		[ "$p" = 2 ] || sleep 10
	done
	ktap_print_msg "watchdog: processes, then the kernel log's last 40 lines:"
	ps -eo pid,stat,comm,args 2>/dev/null | grep -v '\[' | sed 's/^/#   /'
	dmesg | tail -40 | sed 's/^/#   /'
}
