// SPDX-License-Identifier: GPL-2.0
/*
 * rpcrdma_cm: module parameters (module_param*() are macros that emit section
 * entries, which Rust on 6.12 cannot). The values live in the variables
 * rpcrdma_cm_sys.h declares, which rust/sys/param.rs reads as READ_ONCE does.
 *
 * Values are checked by the protocol core's rules (rust/proto/config.rs, via
 * rust/sys/param.rs) or by the ranges below, and refused with a message, never
 * rounded or clamped. Everything but listen and selftest may change at run
 * time: each new connection uses the values current when it starts (RFC 8797:
 * settings may change on reconnect).
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/string.h>

#include "rpcrdma_cm_sys.h"

bool rpcrdma_cm_param_selftest;
module_param_named(selftest, rpcrdma_cm_param_selftest, bool, 0444);
MODULE_PARM_DESC(selftest,
		 "Run the protocol core's test vectors at load and refuse to load if one fails (default: N)");

unsigned int rpcrdma_cm_param_send_size = 4096;
unsigned int rpcrdma_cm_param_recv_size = 4096;

/* The value as written, for messages: up to its first newline. */
#define PARAM_TEXT(val) (val) ? (int)strcspn((val), "\n") : 0, (val) ? (val) : ""

static int rpcrdma_cm_set_size(const char *val, const struct kernel_param *kp)
{
	unsigned int v;

	if (!val || kstrtouint(val, 0, &v) || !rpcrdma_cm_size_param_ok(v)) {
		pr_err("%s=%.*s refused: must be a multiple of 1024 from 1024 to 262144\n",
		       kp->name, PARAM_TEXT(val));
		return -EINVAL;
	}
	WRITE_ONCE(*(unsigned int *)kp->arg, v);
	return 0;
}

static const struct kernel_param_ops rpcrdma_cm_size_ops = {
	.set = rpcrdma_cm_set_size,
	.get = param_get_uint,
};

module_param_cb(send_size, &rpcrdma_cm_size_ops, &rpcrdma_cm_param_send_size, 0644);
MODULE_PARM_DESC(send_size,
		 "Largest inline message we send, advertised in our private data (bytes, multiple of 1024, 1024-262144; default 4096)");
module_param_cb(recv_size, &rpcrdma_cm_size_ops, &rpcrdma_cm_param_recv_size, 0644);
MODULE_PARM_DESC(recv_size,
		 "Largest inline message we receive, advertised in our private data (bytes, multiple of 1024, 1024-262144; default 4096)");

bool rpcrdma_cm_param_remote_invalidate = true;
module_param_named(remote_invalidate, rpcrdma_cm_param_remote_invalidate, bool, 0644);
MODULE_PARM_DESC(remote_invalidate,
		 "Set R (we support remote invalidation) in our private data when the device supports it (default: Y)");

bool rpcrdma_cm_param_legacy;
module_param_named(legacy, rpcrdma_cm_param_legacy, bool, 0644);
MODULE_PARM_DESC(legacy,
		 "Send no private data at all, like a pre-RFC 8797 peer (default: N)");

/* The built-in echo service's listeners: a test build's (RPCRDMA_CM_TEST). */
#ifdef RPCRDMA_CM_TEST
char *rpcrdma_cm_param_listen;

static int rpcrdma_cm_set_listen(const char *val, const struct kernel_param *kp)
{
	if (!val || !rpcrdma_cm_listen_param_ok(val)) {
		pr_err("listen=%.*s refused: expected ADDR:PORT[,ADDR:PORT...] (at most 8, each once; IPv4 a.b.c.d:port or IPv6 [addr]:port)\n",
		       PARAM_TEXT(val));
		return -EINVAL;
	}
	return param_set_charp(val, kp);
}

static const struct kernel_param_ops rpcrdma_cm_listen_ops = {
	.set = rpcrdma_cm_set_listen,
	.get = param_get_charp,
	.free = param_free_charp,
};

module_param_cb(listen, &rpcrdma_cm_listen_ops, &rpcrdma_cm_param_listen, 0444);
MODULE_PARM_DESC(listen,
		 "Server role: listen on these ADDR:PORT endpoints, comma-separated (default: none)");
#endif

/* An unsigned parameter with a range: @kp->arg points at its struct rpcrdma_cm_uint_param. */
static int rpcrdma_cm_set_uint(const char *val, const struct kernel_param *kp)
{
	struct rpcrdma_cm_uint_param *p = kp->arg;
	unsigned int v;

	if (!val || kstrtouint(val, 0, &v) || v < p->min || v > p->max) {
		pr_err("%s=%.*s refused: must be an integer from %u to %u\n",
		       kp->name, PARAM_TEXT(val), p->min, p->max);
		return -EINVAL;
	}
	WRITE_ONCE(p->value, v);
	return 0;
}

static int rpcrdma_cm_get_uint(char *buf, const struct kernel_param *kp)
{
	const struct rpcrdma_cm_uint_param *p = kp->arg;

	return sysfs_emit(buf, "%u\n", READ_ONCE(p->value));
}

static const struct kernel_param_ops rpcrdma_cm_uint_ops = {
	.set = rpcrdma_cm_set_uint,
	.get = rpcrdma_cm_get_uint,
};

#define RPCRDMA_CM_UINT_PARAM(name, def, lo, hi, desc)				\
	struct rpcrdma_cm_uint_param rpcrdma_cm_param_##name = {		\
		.value = (def), .min = (lo), .max = (hi) };			\
	module_param_cb(name, &rpcrdma_cm_uint_ops, &rpcrdma_cm_param_##name, 0644); \
	MODULE_PARM_DESC(name, desc)

RPCRDMA_CM_UINT_PARAM(max_connections, 256, 1, 65535,
		      "Server role: connections accepted at most, all peers together; more are rejected (1-65535; default 256)");
RPCRDMA_CM_UINT_PARAM(max_connections_per_peer, 32, 1, 65535,
		      "Server role: connections accepted at most from one peer address; more are rejected (1-65535; default 32)");
RPCRDMA_CM_UINT_PARAM(idle_timeout, 360, 0, 86400,
		      "Server role: close a connection that carried nothing for this many seconds (0: never; default 360, as nfsd)");
#ifdef RPCRDMA_CM_TEST
RPCRDMA_CM_UINT_PARAM(test_teardown_delay_ms, 0, 0, 60000,
		      "Selftests only: sleep this long in a CM handler that closes its connection, before the teardown (default 0)");
RPCRDMA_CM_UINT_PARAM(test_listen_delay_ms, 0, 0, 60000,
		      "Selftests only: sleep this long between rdma_listen() and recording the listener (default 0)");
RPCRDMA_CM_UINT_PARAM(test_release_delay_ms, 0, 0, 60000,
		      "Selftests only: hold the release of a kept Receive buffer this long before it is reposted, and again before the QP's teardown is woken (default 0)");
RPCRDMA_CM_UINT_PARAM(test_detach_delay_ms, 0, 0, 60000,
		      "Selftests only: sleep this long between stopping a listener nfsd closed and forgetting it (default 0)");
RPCRDMA_CM_UINT_PARAM(test_rw_post_part, 0, 0, 100,
		      "Selftests only: post this many RDMA Read/Write chains of several WRs in part, as if the device refused all but the first WR (counts down; default 0)");
RPCRDMA_CM_UINT_PARAM(test_send_post_part, 0, 0, 100,
		      "Selftests only: post this many Sends that carry REG_MRs in part, as if the device refused the Send after the REG_MRs (counts down; default 0)");
RPCRDMA_CM_UINT_PARAM(test_inv_post_refuse, 0, 0, 100,
		      "Selftests only: refuse this many LOCAL_INVs a mount's Replies post without waiting, as if the Send Queue were full (counts down; default 0)");
RPCRDMA_CM_UINT_PARAM(test_svc_reply_nomem, 0, 0, 100,
		      "Selftests only: fail this many of nfsd's replies for want of memory before anything of them is sent (counts down; default 0)");

/* Takes one from a counting test parameter: whether it was above 0. */
bool rpcrdma_cm_param_take(struct rpcrdma_cm_uint_param *p)
{
	unsigned int n = READ_ONCE(p->value);

	do {
		if (!n)
			return false;
	} while (!try_cmpxchg(&p->value, &n, n - 1));
	return true;
}
#endif

/*
 * The server transport class nfsd finds us by ("rdma" replaces rpcrdma.ko's;
 * another name lets both be loaded, nfsd's portlist naming ours); empty: no
 * server class.
 */
char *rpcrdma_cm_param_svc_class = "rdma";

static int rpcrdma_cm_set_svc_class(const char *val, const struct kernel_param *kp)
{
	if (!val || !rpcrdma_cm_svc_class_param_ok(val)) {
		pr_err("svc_class=%.*s refused: at most 15 letters, digits, '_' or '-'\n",
		       PARAM_TEXT(val));
		return -EINVAL;
	}
	return param_set_charp(val, kp);
}

static const struct kernel_param_ops rpcrdma_cm_svc_class_ops = {
	.set = rpcrdma_cm_set_svc_class,
	.get = param_get_charp,
	.free = param_free_charp,
};

module_param_cb(svc_class, &rpcrdma_cm_svc_class_ops, &rpcrdma_cm_param_svc_class, 0444);
MODULE_PARM_DESC(svc_class,
		 "Server transport class to register for nfsd (portlist \"NAME PORT\"); empty: none (default: rdma)");

/*
 * The client transport class NFS mounts find by netid "rdma" and "rdma6"
 * (in place of rpcrdma.ko's, which cannot be loaded beside it).
 */
bool rpcrdma_cm_param_xprt_class = true;
module_param_named(xprt_class, rpcrdma_cm_param_xprt_class, bool, 0444);
MODULE_PARM_DESC(xprt_class,
		 "Register the client transport class NFS mounts use (mount -o rdma); N: none, so that rpcrdma.ko's can be loaded (default: Y)");

#ifdef RPCRDMA_CM_TEST
bool rpcrdma_cm_param_test_no_mem_mgt_ext;
module_param_named(test_no_mem_mgt_ext, rpcrdma_cm_param_test_no_mem_mgt_ext, bool, 0644);
MODULE_PARM_DESC(test_no_mem_mgt_ext,
		 "Selftests only: treat every device as lacking memory management extensions (no FRWR, no Send With Invalidate) (default: N)");
#endif
