#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The Debian-host tests: run as root in a guest of Debian's own kernel
# (linux-image-7.3.4+deb13-amd64, unmodified) on a Debian 13 root, where
# rpcrdma_cm was installed the way an admin installs it (apt install of the
# DKMS package, scripts/debian-vm). KTAP output. What an admin does after the
# install, as README's deployment section says: the modprobe.d file that keeps
# rpcrdma.ko away, nfsd exporting over RDMA, a mount over RDMA, tuning the
# inline thresholds, unloading. Each test sets up what it needs (deployed:
# the modprobe.d step) and can run alone; DEBIAN_TESTS="name ..." runs a
# subset (debian_stock_kernel always first). A test that lacks what it needs
# fails: nothing is skipped.

set -u
HERE=$(cd "$(dirname "$0")" && pwd)
KSRC=${KSRC:?KSRC must name a kernel source tree (for ktap_helpers.sh)}
# shellcheck source=/dev/null
. "$KSRC/tools/testing/selftests/kselftest/ktap_helpers.sh"
. "$HERE/lib.sh"

# The stock kernel's release (scripts/debian-vm passes it).
KABI=${KABI:?KABI must name the stock kernel release}
# On the stock kernel our module takes the class names rdma (nfsd's --rdma)
# and the mount's -o rdma: no test parameters.
KO_ARGS=
MNT=/tmp/mnt_debian
CONF=/etc/modprobe.d/rpcrdma_cm.conf
EXAMPLE=/usr/share/doc/rpcrdma-cm-dkms/examples/rpcrdma_cm.conf
# Taint bits the module may add and nothing else: O (out-of-tree, 4096) and
# E (unsigned, 8192).
TAINT_OK=$((4096 | 8192))

# deployed: the admin's step after the install (README, Deployment): the
# example modprobe.d file the package ships, in place.
deployed() {
	[ -r "$EXAMPLE" ] || { fail "no $EXAMPLE"; return 1; }
	cp "$EXAMPLE" "$CONF"
}

# debian_stock_kernel: the guest runs Debian's image, and DKMS built and
# installed our module for it (dkms status, modinfo's path and vermagic),
# as users get it: without the selftests' hooks (no test_* parameter).
debian_stock_kernel() {
	local ok=0 path vermagic st hooks
	ktap_print_msg "uname -r: $(uname -r); $(head -c 200 /proc/version)"
	[ "$(uname -r)" = "$KABI" ] || { fail "not the stock kernel $KABI"; ok=1; }
	st=$(dkms status rpcrdma-cm 2>&1)
	ktap_print_msg "dkms status: $st"
	echo "$st" | grep -q ", $KABI, x86_64: installed" || { fail "dkms has not installed rpcrdma-cm for $KABI"; ok=1; }
	path=$(modinfo -n rpcrdma_cm 2>&1)
	vermagic=$(modinfo -F vermagic rpcrdma_cm 2>&1)
	ktap_print_msg "modinfo: $path ($vermagic)"
	[[ "$path" == "/lib/modules/$KABI/updates/dkms/rpcrdma_cm.ko"* ]] || { fail "module path $path"; ok=1; }
	[[ "$vermagic" == "$KABI "* ]] || { fail "vermagic $vermagic"; ok=1; }
	hooks=$(modinfo -p rpcrdma_cm 2>&1 | grep '^test_')
	[ -z "$hooks" ] || { fail "the package's module has the test hooks: $(echo $hooks)"; ok=1; }
	return $ok
}

# debian_modprobe_conf_keeps_rpcrdma_away: the example file the package ships
# (Documentation: Deployment) copied to modprobe.d: rpcrdma.ko does not load
# (blacklisted, install /bin/true), and nfsd's and the mount's requests for
# svcrdma and xprtrdma reach rpcrdma_cm through the aliases.
debian_modprobe_conf_keeps_rpcrdma_away() {
	local ok=0
	deployed || return 1
	modprobe rpcrdma 2>/dev/null
	[ ! -d /sys/module/rpcrdma ] || { fail "rpcrdma.ko loaded despite $CONF"; ok=1; }
	modprobe xprtrdma || { fail "modprobe xprtrdma"; ok=1; }
	module_loaded || { fail "modprobe xprtrdma did not load rpcrdma_cm"; ok=1; }
	[ ! -d /sys/module/rpcrdma ] || { fail "modprobe xprtrdma loaded rpcrdma.ko"; ok=1; }
	rmmod_within 10 rpcrdma_cm || { fail "rmmod rpcrdma_cm"; ok=1; }
	return $ok
}

# debian_module_loads_with_only_its_taint: modprobe rpcrdma_cm into the
# stock kernel: /sys/module/rpcrdma_cm, the parameters and debugfs are there,
# the vectors pass in the kernel (selftest=1), and the kernel's taint since
# boot (taint stays: taken before the first test loads anything) grew by
# out-of-tree and unsigned only.
debian_module_loads_with_only_its_taint() {
	local ok=0 t0 t1
	deployed || return 1
	t0=$TAINT_BOOT
	modprobe rpcrdma_cm selftest=1 || { fail "modprobe rpcrdma_cm selftest=1"; return 1; }
	t1=$(cat /proc/sys/kernel/tainted)
	ktap_print_msg "tainted: $t0 at boot, $t1 with rpcrdma_cm; module taint $(cat /sys/module/rpcrdma_cm/taint)"
	[ $((t1 & ~t0 & ~TAINT_OK)) = 0 ] || { fail "taint grew by $((t1 & ~t0))"; ok=1; }
	ensure_debugfs
	[ "$(stat selftest_failed)" = 0 ] && [ "$(stat selftest_passed)" -gt 0 ] ||
		{ fail "selftest: $(stat selftest_passed) passed, $(stat selftest_failed) failed"; ok=1; }
	[ -r /sys/module/rpcrdma_cm/parameters/send_size ] || { fail "no send_size parameter"; ok=1; }
	# As users get it: no test harness (the debugfs RPC caller, its rpcs
	# file, the echo service's listen parameter).
	[ ! -e "$DBG/rpcs" ] || { fail "the package's module has the rpcs file"; ok=1; }
	[ ! -e /sys/module/rpcrdma_cm/parameters/listen ] || { fail "the package's module has the listen parameter"; ok=1; }
	if echo "connect $ADDR 20049" >"$DBG/control" 2>/dev/null; then
		fail "control took connect: the package's module has the debugfs caller"
		ok=1
	fi
	rmmod_within 10 rpcrdma_cm || { fail "rmmod rpcrdma_cm"; ok=1; }
	[ ! -d "$DBG" ] || { fail "$DBG left after rmmod"; ok=1; }
	return $ok
}

# debian_nfs_over_rpcrdma_cm: rxe on a dummy device; nfsd started by the
# admin's command (rpc.nfsd --rdma=20049), which loads rpcrdma_cm through
# the svcrdma alias; a mount at NFS 3 and at 4.2 (-o rdma, our client through
# the xprtrdma alias) moves 16 MiB each way byte for byte. Both ends at 16 KiB
# (send_size, recv_size as an admin sets them): the mount's connection
# negotiates c2s=s2c=16384 and remote invalidation (RFC 8797).
debian_nfs_over_rpcrdma_cm() {
	local ok=0 v src line why
	deployed || return 1
	why=$(rxe_up) || { fail "rxe: $why"; return 1; }
	echo "options rpcrdma_cm send_size=16384 recv_size=16384" >/etc/modprobe.d/rpcrdma_cm-sizes.conf
	# The export, rpcbind and mountd (lib.sh), then nfsd stopped and started
	# again the way an admin starts it with RDMA: rpc.nfsd adds its ports
	# only when nfsd is not running.
	nfsd_up || { fail "nfsd"; return 1; }
	rpc.nfsd 0
	rpc.nfsd --rdma=20049 2 || { fail "rpc.nfsd --rdma=20049"; return 1; }
	ktap_print_msg "portlist: $(tr '\n' ' ' </proc/fs/nfsd/portlist)"
	grep -q "^rdma 20049" /proc/fs/nfsd/portlist || { fail "no rdma listener"; ok=1; }
	module_loaded || { fail "rpc.nfsd --rdma did not load rpcrdma_cm"; return 1; }
	[ ! -d /sys/module/rpcrdma ] || { fail "rpcrdma.ko loaded"; ok=1; }
	ensure_debugfs
	head -c $((16 << 20)) /dev/urandom >/tmp/debian.bin
	for v in 3 4.2; do
		src=/; [ "$v" = 3 ] && src=/tmp/export
		mkdir -p "$MNT"
		timeout -s KILL 60 mount -t nfs -o rdma,port=20049,vers=$v "$ADDR:$src" "$MNT" ||
			{ fail "mount vers=$v"; ok=1; continue; }
		cp /tmp/debian.bin "$MNT/debian.bin" && sync || { fail "vers=$v: write"; ok=1; }
		echo 3 >/proc/sys/vm/drop_caches
		cmp -s /tmp/debian.bin "$MNT/debian.bin" || { fail "vers=$v: data differs"; ok=1; }
		cp "$MNT/debian.bin" /tmp/debian.back && cmp -s /tmp/debian.bin /tmp/debian.back ||
			{ fail "vers=$v: read back differs"; ok=1; }
		line=$(grep " for=mount" "$DBG/connections" | grep state=established | tail -1)
		ktap_print_msg "vers=$v: $(echo "$line" | grep -oE ' (role|c2s|s2c|reminv)=[^ ]*' | tr '\n' ' ')"
		ktap_print_msg "vers=$v: $(awk '$1 == "xprt:" && $2 == "rdma"' /proc/self/mountstats)"
		expect "$line" c2s=16384 s2c=16384 reminv=1 || ok=1
		rm -f "$MNT/debian.bin" /tmp/debian.back
		umount "$MNT" || { fail "vers=$v: umount"; ok=1; }
	done
	ktap_print_msg "$(grep -E '^(nfsd_calls|nfsd_args_direct|nfsd_payloads_direct|send_with_invalidate) ' "$DBG/stats" | tr '\n' ' ')"
	[ "$(stat nfsd_args_direct)" -gt 0 ] || { fail "no WRITE data read into nfsd's pages"; ok=1; }
	return $ok
}

# debian_clean_unload: nfsd stopped, rpcrdma_cm unloads, its debugfs is gone,
# and the kernel log has no report (the taint lines of an out-of-tree,
# unsigned module are expected).
debian_clean_unload() {
	local ok=0 bad
	rpc.nfsd 0
	rmmod_within 10 rpcrdma_cm || { fail "rmmod rpcrdma_cm: refcnt $(cat /sys/module/rpcrdma_cm/refcnt)"; ok=1; }
	[ ! -d "$DBG" ] || { fail "$DBG left after rmmod"; ok=1; }
	bad=$(dmesg | grep -E 'BUG:|WARNING:|Oops|refcount_t|general protection|Call Trace|UBSAN|KASAN|rust_panic|panicked|still waits for')
	[ -z "$bad" ] || { ktap_print_msg "kernel log has:"; echo "$bad" | head -40 | sed 's/^/# /'; ok=1; }
	ktap_print_msg "$(dmesg | grep -E 'rpcrdma_cm: (loading|module verification)' | head -2 | sed 's/^\[[^]]*\] //' | tr '\n' ';')"
	return $ok
}

DEBIAN_ALL="debian_modprobe_conf_keeps_rpcrdma_away debian_module_loads_with_only_its_taint
	debian_nfs_over_rpcrdma_cm debian_clean_unload"

main() {
	local t tests rc=0
	tests="debian_stock_kernel ${DEBIAN_TESTS:-$DEBIAN_ALL}"
	TAINT_BOOT=$(cat /proc/sys/kernel/tainted)
	ensure_debugfs
	ktap_print_header
	ktap_set_plan "$(echo $tests | wc -w)"
	for t in $tests; do
		if "$t"; then ktap_test_pass "$t"; else ktap_test_fail "$t"; rc=1; fi
	done
	rm -f "$CONF" /etc/modprobe.d/rpcrdma_cm-sizes.conf
	ktap_finished
	return $rc
}

main "$@"
