# SPDX-License-Identifier: GPL-2.0
# Helpers for rpcrdma_cm selftests (sourced; runs inside the guest as root).

TOP=${TOP:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
KO=${KO:-$TOP/rpcrdma_cm.ko}
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

# The kernel log since the selftests started (the runner writes a marker).
klog() {
	dmesg | sed -n '/rpcrdma_cm-selftests-start/,$p'
}
