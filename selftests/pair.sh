#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Tests that need two kernels, run by scripts/vm-pair in guests "a" (server)
# and "b" (client) joined by one Ethernet link, each with rxe on its end.
# KTAP from guest b, which drives; guest a serves until b says "done".
# Today: the link itself, with Linux's C transport on both ends (the
# baseline pairing of the benchmarks), our client transport in b against
# Linux's svcrdma in a, then our server transport loaded in a the way a user
# does it, with no parameter.

set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
KSRC=${KSRC:?KSRC must name the kernel source tree (for ktap_helpers.sh)}
# shellcheck source=/dev/null
. "$KSRC/tools/testing/selftests/kselftest/ktap_helpers.sh"
. "$HERE/lib.sh"
. "$HERE/faults.sh"

# Addresses of the link (TEST-NET-2, RFC 5737): they exist only on it.
PAIR_A=198.51.100.1
PAIR_B=198.51.100.2

# The guest's end of the link: the interface with our MAC, up, addressed,
# with an rxe device on it.
pair_link() {
	local me=$1 ifc
	ifc=$(ip -o link | awk -v m="$PAIR_MAC" '$0 ~ m { sub(":", "", $2); print $2; exit }')
	[ -n "$ifc" ] || { echo "no interface with MAC $PAIR_MAC"; return 1; }
	ip link set "$ifc" up && ip addr add "$me/24" dev "$ifc" || return 1
	rdma link add rxe0 type rxe netdev "$ifc" || return 1
	for ((i = 0; i < 50; i++)); do
		rdma link show rxe0/1 | grep -q "state ACTIVE" && return 0
		sleep 0.1
	done
	echo "rxe0 on $ifc not ACTIVE"; return 1
}

# wait_file NAME SECONDS: waits for $PAIR_DIR/NAME.
wait_file() {
	local end=$(( $(date +%s) + $2 ))
	while [ ! -e "$PAIR_DIR/$1" ]; do
		[ "$(date +%s)" -lt "$end" ] || return 1
		sleep 0.2
	done
}

# Guest a's requests, asked by b through ask(): each prints what b needs
# and succeeds or fails.
a_c_nfsd() {
	a_srv_c
}

# What a user does on a server: Linux's nfsd stopped and rpcrdma.ko unloaded,
# our module loaded with no parameter, nfsd started with --rdma.
a_our_nfsd() {
	a_srv_ours || return 1
	grep "^rdma" /proc/fs/nfsd/portlist
}

# Linux's nfsd with 16 KiB inline thresholds (svcrdma's max_req_size).
a_c_nfsd16() {
	a_srv_c && rpc.nfsd 0 && echo 16384 >/proc/sys/sunrpc/svc_rdma/max_req_size || return 1
	start_nfsd >/dev/null && grep -q "rdma 20049" /proc/fs/nfsd/portlist
}

# svcrdma's credit grant (max_requests: 128 on 7.3).
a_svcrdma_grant() {
	cat /proc/sys/sunrpc/svc_rdma/max_requests
}

a_our_stats() {
	cat "$DBG/stats" && grep " for=nfsd" "$DBG/connections"
}

serve() {
	local req r
	pair_link "$PAIR_A" || { echo fail >"$PAIR_DIR/ready"; return 1; }
	echo ok >"$PAIR_DIR/ready"
	while [ ! -e "$PAIR_DIR/done" ]; do
		for req in "$PAIR_DIR"/*.req; do
			[ -e "$req" ] || continue
			req=$(basename "$req" .req)
			# A request still running 20 s before ask() gives up
			# prints guest a's blocked tasks and kernel log into guest a's
			# output.
			TEST_WATCHDOG=$((ASK_TIMEOUT - 20)) watchdog_start "a_$req"
			if "a_$req" >"$PAIR_DIR/$req.out" 2>&1; then r=ok; else r=fail; fi
			watchdog_stop
			rm -f "$PAIR_DIR/$req.req"
			echo "$r" >"$PAIR_DIR/$req.res"
		done
		sleep 0.2
	done
}

# ask NAME: runs a_NAME in guest a; its output goes to $PAIR_DIR/NAME.out.
# Gives up after ASK_TIMEOUT seconds (120; a debug kernel starts nfsd in
# more: scripts/check-debug gives 600).
ASK_TIMEOUT=${ASK_TIMEOUT:-120}
ask() {
	rm -f "$PAIR_DIR/$1.res"
	touch "$PAIR_DIR/$1.req"
	wait_file "$1.res" "$ASK_TIMEOUT" && [ "$(cat "$PAIR_DIR/$1.res")" = ok ] && return 0
	ktap_print_msg "guest a: $1 failed: $(tr '\n' ' ' <"$PAIR_DIR/$1.out" 2>/dev/null)"
	return 1
}

# nfs_copy: mounts guest a's nfsd over RDMA with Linux's client and moves 16
# MiB both ways, byte-exact; prints the client's rdma mountstats line.
nfs_copy() {
	local mnt=/tmp/mnt_pair ok=0
	mkdir -p "$mnt"
	timeout -s KILL 60 mount -t nfs -o rdma,port=20049,vers=4.2 "$PAIR_A:/" "$mnt" || { fail "mount"; return 1; }
	head -c $((16 << 20)) /dev/urandom >/tmp/pair.bin
	cp /tmp/pair.bin "$mnt/pair.bin" && sync
	echo 3 >/proc/sys/vm/drop_caches
	cmp -s /tmp/pair.bin "$mnt/pair.bin" || { fail "data differs"; ok=1; }
	MOUNTSTATS=$(awk '$1 == "xprt:" && $2 == "rdma"' /proc/self/mountstats)
	rm -f "$mnt/pair.bin"
	umount "$mnt" || ok=1
	return $ok
}

# The link carries RDMA between the two kernels: Linux's NFS client in b
# mounts Linux's nfsd in a over RPC-over-RDMA; the client's mountstats show an
# rdma transport that moved chunks.
pair_c_client_to_c_server() {
	local ok=0
	client_side c || return 1
	ask c_nfsd || return 1
	nfs_copy || ok=1
	ktap_print_msg "mountstats: $MOUNTSTATS"
	[ "$(echo "$MOUNTSTATS" | awk '{ print $13 + $14 }')" -gt 0 ] || { fail "no chunks"; ok=1; }
	return $ok
}

# session VERS: mounts guest a's nfsd at NFS version VERS, 4 MiB in and out
# byte-exact (read back after dropping the page cache), a listing, umount.
session() {
	local v=$1 mnt=/tmp/mnt_s$1 src=/ opt= ok=0
	# NFSv3 without statd here: no NLM.
	[ "$v" = 3 ] && src=/tmp/export opt=,nolock
	mkdir -p "$mnt"
	timeout -s KILL 60 mount -t nfs -o rdma,port=20049,vers=$v$opt "$PAIR_A:$src" "$mnt" ||
		{ fail "mount vers=$v"; return 1; }
	head -c $((4 << 20)) /dev/urandom >/tmp/s.bin
	cp /tmp/s.bin "$mnt/s$v.bin" && sync || { fail "vers=$v: copy in"; ok=1; }
	echo 3 >/proc/sys/vm/drop_caches
	cmp -s /tmp/s.bin "$mnt/s$v.bin" || { fail "vers=$v: read back differs"; ok=1; }
	ls "$mnt" | grep -q "s$v.bin" || { fail "vers=$v: listing"; ok=1; }
	rm -f "$mnt/s$v.bin"
	umount "$mnt" || ok=1
	return $ok
}

restart_c_nfsd16() {
	ask c_nfsd16
}

# The client issue's user story against Linux's server: on the client,
# rpcrdma.ko unloaded and `insmod rpcrdma_cm.ko` with no parameter; `mount
# -o rdma` now runs over our client transport to Linux's nfsd (svcrdma),
# byte-exact both ways; the mount's connection shows in our debugfs with
# svcrdma's private data found and the thresholds negotiated from it;
# mountstats has xprtrdma's 29-field line with chunks counted; NFS 3, 4.0
# and 4.1 sessions; MRs recycled; the workloads of the single-kernel tests
# at NFS 4.2, 4.1, 4.0 and 3 (mount_workloads: untar, fio with
# verification, 5,000 entries, 64 MiB in and out, rename and links, then a
# 64 MiB copy across an nfsd restart that changes the thresholds); NFSv3
# ACLs; and with svcrdma's max_req_size and our sizes at 16 KiB, four
# 12 KiB WRITEs go inline.
pair_our_client_to_c_server() {
	local ok=0 line v r0 r1 ra0 grant mnt=/tmp/mnt_16
	client_side ours || return 1
	ask c_nfsd || return 1
	ensure_debugfs
	nfs_copy || ok=1
	line=$(grep " for=mount" "$DBG/connections" | tail -1)
	ktap_print_msg "mount's connection: $line"
	ktap_print_msg "mountstats: $MOUNTSTATS"
	expect "$line" role=client outcome=found || ok=1
	[ "$(echo "$MOUNTSTATS" | wc -w)" = 29 ] || { fail "mountstats: not xprtrdma's 29 fields"; ok=1; }
	[ "$(echo "$MOUNTSTATS" | awk '{ print $13 + $14 }')" -gt 0 ] || { fail "no chunks"; ok=1; }
	for v in 3 4.0 4.1; do session "$v" || ok=1; done
	# MRs are recycled: fewer allocated than registrations made.
	ktap_print_msg "registrations $(stat registrations), MRs allocated $(stat mrs_allocated)"
	[ "$(stat mrs_allocated)" -lt "$(stat registrations)" ] || { fail "every registration allocated an MR"; ok=1; }
	# What users do, against svcrdma (mount_workloads), with our sizes at 16
	# KiB: svcrdma grants more than 32 credits (its max_requests: 64 on 6.12,
	# 128 on 7.3), so the mount posts Receives beyond its first 32 calls'
	# worth for fio's 64 calls in flight; nfsd is restarted with max_req_size
	# 16384 during the 64 MiB copy, and the mount's new connection negotiates
	# 16 KiB where the first had svcrdma's 4 KiB. More than 32 calls are in
	# flight at once (fio at iodepth 64, NFSv3: no session slots), never more
	# than svcrdma grants.
	ask svcrdma_grant || ok=1
	grant=$(cat "$PAIR_DIR/svcrdma_grant.out")
	echo 16384 >/sys/module/rpcrdma_cm/parameters/send_size && echo 16384 >/sys/module/rpcrdma_cm/parameters/recv_size || ok=1
	ra0=$(stat receives_added)
	mount_workloads "$PAIR_A" 20049 restart_c_nfsd16 "4.2 4.1 4.0 3" || ok=1
	ktap_print_msg "Receives added for credits beyond 32: $(($(stat receives_added) - ra0)); most calls in flight on one connection: $(stat calls_in_flight_max)"
	ktap_print_msg "before the restart: $FIRST_CONN"
	ktap_print_msg "after the restart: $RESTARTED_CONN"
	[ "$(stat receives_added)" -gt "$ra0" ] || { fail "no Receives added for svcrdma's grant of $grant"; ok=1; }
	[ "$(stat calls_in_flight_max)" -gt 32 ] || { fail "never more than 32 calls in flight"; ok=1; }
	[ "$(stat calls_in_flight_max)" -le "${grant:-0}" ] || { fail "more calls in flight than svcrdma's $grant credits"; ok=1; }
	expect "$FIRST_CONN" c2s=4096 s2c=4096 outcome=found || ok=1
	expect "$RESTARTED_CONN" c2s=16384 s2c=16384 outcome=found || ok=1
	# NFSv3 ACLs through svcrdma: a 300-entry SETACL and its GETACL into sparse pages.
	mkdir -p /tmp/mnt_acl
	if timeout -s KILL 60 mount -t nfs -o rdma,port=20049,vers=3,nolock "$PAIR_A:/tmp/export" /tmp/mnt_acl; then
		nfs3_acls /tmp/mnt_acl || ok=1
		umount /tmp/mnt_acl || ok=1
	else
		fail "mount vers=3 for ACLs"; ok=1
	fi
	# RFC 8797's point against Linux's server: both ends at 16 KiB, 12 KiB
	# WRITEs go inline (xprtrdma at its 4 KiB defaults takes a Read chunk).
	ask c_nfsd16 || ok=1
	echo 16384 >/sys/module/rpcrdma_cm/parameters/send_size && echo 16384 >/sys/module/rpcrdma_cm/parameters/recv_size || ok=1
	mkdir -p $mnt
	timeout -s KILL 60 mount -t nfs -o rdma,port=20049,vers=4.2 "$PAIR_A:/" $mnt || { fail "mount at 16 KiB"; ok=1; }
	line=$(grep " for=mount" "$DBG/connections" | grep state=established | tail -1)
	r0=$(awk '$1 == "xprt:" && $2 == "rdma" { print $13 }' /proc/self/mountstats)
	dd if=/dev/urandom of=$mnt/w12 bs=12k count=4 oflag=direct status=none || { fail "12 KiB writes"; ok=1; }
	r1=$(awk '$1 == "xprt:" && $2 == "rdma" { print $13 }' /proc/self/mountstats)
	ktap_print_msg "16 KiB: c2s=$(field "$line" c2s) s2c=$(field "$line" s2c); 4 WRITEs of 12 KiB: Read chunks +$((r1 - r0))"
	expect "$line" c2s=16384 || ok=1
	[ "$r1" = "$r0" ] || { fail "12 KiB WRITEs took Read chunks"; ok=1; }
	rm -f $mnt/w12
	umount $mnt || ok=1
	rmmod_within 10 rpcrdma_cm
	module_loaded && { fail "rmmod rpcrdma_cm after umount"; ok=1; }
	load_c_transport || ok=1
	return $ok
}

# The server issue's user story on a server of its own: rpcrdma.ko unloaded,
# `insmod rpcrdma_cm.ko` with no parameter, `rpc.nfsd --rdma=20049`; Linux's
# client mounts it with -o rdma,port=20049 and the data is byte-exact. Our
# counters on the server show nfsd's calls, WRITE and READ data moved
# straight into and out of nfsd's pages (nfsd_args_direct and
# nfsd_payloads_direct, 16 each at least) and replies sent with Send With
# Invalidate (the client's local_inv_needed is not checked here: rxe's MRs
# hold 128 KiB, so 1 MiB I/O needs 8 and the client invalidates 7 itself;
# see c_client_sees_remote_invalidation).
pair_c_client_to_our_server() {
	local ok=0 st
	client_side c || return 1
	ask our_nfsd || return 1
	ktap_print_msg "guest a portlist: $(tr '\n' ' ' <"$PAIR_DIR/our_nfsd.out")"
	nfs_copy || ok=1
	ask our_stats || return 1
	st=$PAIR_DIR/our_stats.out
	ktap_print_msg "guest a: $(grep -E '^(nfsd_calls|nfsd_args_direct|nfsd_payloads_direct|send_with_invalidate) ' "$st" | tr '\n' ' ')"
	ktap_print_msg "client mountstats: $MOUNTSTATS"
	[ "$(awk '$1 == "nfsd_calls" { print $2 }' "$st")" -gt 0 ] || { fail "no call reached nfsd through our transport"; ok=1; }
	[ "$(awk '$1 == "nfsd_args_direct" { print $2 }' "$st")" -ge 16 ] || { fail "WRITE data not read into nfsd's pages"; ok=1; }
	[ "$(awk '$1 == "nfsd_payloads_direct" { print $2 }' "$st")" -ge 16 ] || { fail "READ data not written from nfsd's pages"; ok=1; }
	[ "$(awk '$1 == "send_with_invalidate" { print $2 }' "$st")" -gt 0 ] || { fail "no Send With Invalidate"; ok=1; }
	return $ok
}

# kernels_clean: this kernel's log since boot holds no report (REPORTS, as
# in the fault suite: rxe's completer WARN under frame loss is shown, not
# counted), and on a debug kernel (make check-debug) kmemleak finds nothing
# once nfsd is stopped and both transports are unloaded.
kernels_clean() {
	local r ok=0
	r=$(dmesg | grep -E "$REPORTS")
	echo "$r" | grep 'drivers/infiniband/sw/rxe/rxe_comp.c' | head -1 | sed 's/^/rxe (not counted): /'
	r=$(echo "$r" | grep -v 'drivers/infiniband/sw/rxe/rxe_comp.c' | grep .)
	[ -z "$r" ] || { ktap_print_msg "kernel log has:"; echo "$r" | head -40 | sed 's/^/# /'; ok=1; }
	if [ -w "$KMEMLEAK" ]; then
		rpc.nfsd 0 2>/dev/null
		rmmod_within 10 rpcrdma_cm || { ktap_print_msg "rpcrdma_cm stays loaded"; ok=1; }
		rmmod_within 10 rpcrdma || { ktap_print_msg "rpcrdma stays loaded"; ok=1; }
		# Old enough to be reported, and seen once unchanged (kmemleak_clean).
		sleep 6
		echo scan >"$KMEMLEAK"
		kmemleak_clean || ok=1
	fi
	return $ok
}

a_kernels_clean() { kernels_clean; }
a_kmemleak_clean() { kmemleak_clean; }

# pair_kernels_clean: the last test. Both kernels clean after everything
# the other tests did (kernels_clean).
pair_kernels_clean() {
	local ok=0
	ask kernels_clean || ok=1
	grep 'rxe (not counted)' "$PAIR_DIR/kernels_clean.out" | sed 's/^/# guest a: /'
	kernels_clean || ok=1
	return $ok
}

# PAIR_TESTS="name ..." runs a subset (pair_link always comes first); a
# failed test does not stop the ones after it: each sets up both ends itself.
# pair_kernels_clean always comes last.
PAIR_ALL="pair_c_client_to_c_server pair_our_client_to_c_server pair_c_client_to_our_server pair_faults"

drive() {
	local t r rc=0 link=0 tests=${PAIR_TESTS:-$PAIR_ALL}
	ktap_print_header
	tests="$tests pair_kernels_clean"
	ktap_set_plan $(($(echo $tests | wc -w) + 1))
	if pair_link "$PAIR_B" && wait_file ready 300 && [ "$(cat "$PAIR_DIR/ready")" = ok ]; then
		ktap_test_pass "pair_link"
	else
		ktap_test_fail "pair_link"
		rc=1 link=1
	fi
	for t in $tests; do
		watchdog_start "$t"
		if [ "$link" = 0 ] && "$t"; then r=0; else r=1; fi
		# A debug kernel: the test fails if kmemleak finds a leak in either
		# guest after it (kmemleak_clean, as in the single-guest suite).
		if [ "$r" = 0 ] && [ -w "$KMEMLEAK" ] && [ "$t" != pair_kernels_clean ]; then
			kmemleak_clean || r=1
			ask kmemleak_clean || r=1
		fi
		if [ "$r" = 0 ]; then ktap_test_pass "$t"; else ktap_test_fail "$t"; rc=1; fi
		watchdog_stop
	done
	echo done >"$PAIR_DIR/done"
	ktap_finished
	return $rc
}

# Sourced (scripts/bench-guest), only the functions.
[ "${BASH_SOURCE[0]}" = "$0" ] || return 0
load_ko_deps || { echo "modprobe -a $KO_DEPS failed"; exit 1; }
case "${PAIR_ROLE:-}" in
a) serve ;;
b) drive ;;
*) echo "PAIR_ROLE must be a or b (scripts/vm-pair sets it)"; exit 2 ;;
esac
