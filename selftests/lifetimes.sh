# SPDX-License-Identifier: GPL-2.0
#
# rpcrdma_cm selftests of connection and module lifetimes, sourced by
# selftests/rpcrdma_cm.sh (which runs $LIFETIME_TESTS right after
# nfsd_over_ipv6_and_device_removal). Each test is a shell function that
# starts from the runner's known state (see main() in rpcrdma_cm.sh) and sets
# up what else it needs; LIFETIME_TESTS lists them, space-separated, in order.

LIFETIME_TESTS=""
