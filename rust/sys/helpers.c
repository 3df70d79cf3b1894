// SPDX-License-Identifier: GPL-2.0
/*
 * rpcrdma_cm: the C half of the abstraction layer (rust/sys/).
 *
 * What Rust on 6.12 cannot express lives here: module parameters (a macro that
 * emits a section entry), a file_operations table for seq_file-backed debugfs
 * files, and ERR_PTR unwrapping. Only rust/sys/ calls these functions.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/debugfs.h>
#include <linux/err.h>
#include <linux/fs.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <net/net_namespace.h>
#include <rdma/ib_cm.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>

/* Module parameters ------------------------------------------------------ */

/*
 * Values are checked by the protocol core's rules (rust/proto/config.rs, via
 * rust/sys/param.rs) and refused with a message, never rounded or clamped.
 * Sizes, R and legacy may change at run time: each new connection uses the
 * values current when it starts (RFC 8797: settings may change on reconnect).
 */

/* Implemented in rust/sys/param.rs. */
bool rpcrdma_cm_size_param_ok(unsigned int v);
bool rpcrdma_cm_listen_param_ok(const char *s);

static bool selftest;
module_param(selftest, bool, 0444);
MODULE_PARM_DESC(selftest,
		 "Run the protocol core's test vectors at load and refuse to load if one fails (default: N)");

static unsigned int send_size = 4096;
static unsigned int recv_size = 4096;

static int rpcrdma_cm_set_size(const char *val, const struct kernel_param *kp)
{
	unsigned int v;

	if (!val || kstrtouint(val, 0, &v) || !rpcrdma_cm_size_param_ok(v)) {
		pr_err("%s=%.*s refused: must be a multiple of 1024 from 1024 to 262144\n",
		       kp->name, val ? (int)strcspn(val, "\n") : 0, val ? val : "");
		return -EINVAL;
	}
	WRITE_ONCE(*(unsigned int *)kp->arg, v);
	return 0;
}

static const struct kernel_param_ops rpcrdma_cm_size_ops = {
	.set = rpcrdma_cm_set_size,
	.get = param_get_uint,
};

module_param_cb(send_size, &rpcrdma_cm_size_ops, &send_size, 0644);
MODULE_PARM_DESC(send_size,
		 "Largest inline message we send, advertised in our private data (bytes, multiple of 1024, 1024-262144; default 4096)");
module_param_cb(recv_size, &rpcrdma_cm_size_ops, &recv_size, 0644);
MODULE_PARM_DESC(recv_size,
		 "Largest inline message we receive, advertised in our private data (bytes, multiple of 1024, 1024-262144; default 4096)");

static bool remote_invalidate = true;
module_param(remote_invalidate, bool, 0644);
MODULE_PARM_DESC(remote_invalidate,
		 "Set R (we support remote invalidation) in our private data (default: Y)");

static bool legacy;
module_param(legacy, bool, 0644);
MODULE_PARM_DESC(legacy,
		 "Send no private data at all, like a pre-RFC 8797 peer (default: N)");

static char *listen;

static int rpcrdma_cm_set_listen(const char *val, const struct kernel_param *kp)
{
	if (!val || !rpcrdma_cm_listen_param_ok(val)) {
		pr_err("listen=%.*s refused: expected ADDR:PORT[,ADDR:PORT...] (at most 8, each once; IPv4 a.b.c.d:port or IPv6 [addr]:port)\n",
		       val ? (int)strcspn(val, "\n") : 0, val ? val : "");
		return -EINVAL;
	}
	return param_set_charp(val, kp);
}

static const struct kernel_param_ops rpcrdma_cm_listen_ops = {
	.set = rpcrdma_cm_set_listen,
	.get = param_get_charp,
	.free = param_free_charp,
};

module_param_cb(listen, &rpcrdma_cm_listen_ops, &listen, 0444);
MODULE_PARM_DESC(listen,
		 "Server role: listen on these ADDR:PORT endpoints, comma-separated (default: none)");

bool rpcrdma_cm_param_selftest(void);
bool rpcrdma_cm_param_selftest(void)
{
	return READ_ONCE(selftest);
}

unsigned int rpcrdma_cm_param_send_size(void);
unsigned int rpcrdma_cm_param_send_size(void)
{
	return READ_ONCE(send_size);
}

unsigned int rpcrdma_cm_param_recv_size(void);
unsigned int rpcrdma_cm_param_recv_size(void)
{
	return READ_ONCE(recv_size);
}

bool rpcrdma_cm_param_remote_invalidate(void);
bool rpcrdma_cm_param_remote_invalidate(void)
{
	return READ_ONCE(remote_invalidate);
}

bool rpcrdma_cm_param_legacy(void);
bool rpcrdma_cm_param_legacy(void)
{
	return READ_ONCE(legacy);
}

/* Read-only after load (0444): the string lives until the module is unloaded. */
const char *rpcrdma_cm_param_listen(void);
const char *rpcrdma_cm_param_listen(void)
{
	return listen ? listen : "";
}

/* debugfs files backed by a Rust `Show` ----------------------------------- */

/* Implemented in rust/sys/debugfs.rs. @private is the file's inode->i_private. */
int rpcrdma_cm_debugfs_show(struct seq_file *m, void *private);

static int rpcrdma_cm_seq_show(struct seq_file *m, void *v)
{
	return rpcrdma_cm_debugfs_show(m, m->private);
}

static int rpcrdma_cm_seq_open(struct inode *inode, struct file *file)
{
	return single_open(file, rpcrdma_cm_seq_show, inode->i_private);
}

static const struct file_operations rpcrdma_cm_seq_fops = {
	.owner = THIS_MODULE,
	.open = rpcrdma_cm_seq_open,
	.read = seq_read,
	.llseek = seq_lseek,
	.release = single_release,
};

int rpcrdma_cm_debugfs_create_dir(const char *name, struct dentry *parent,
				  struct dentry **out);
int rpcrdma_cm_debugfs_create_dir(const char *name, struct dentry *parent,
				  struct dentry **out)
{
	struct dentry *d = debugfs_create_dir(name, parent);

	if (IS_ERR(d))
		return PTR_ERR(d);
	*out = d;
	return 0;
}

/*
 * A writable debugfs file: each write() hands the written text (at most
 * RPCRDMA_CM_WRITE_MAX octets, NUL-terminated, in kernel memory) to
 * rpcrdma_cm_debugfs_write(), whose result is the write()'s error.
 */
#define RPCRDMA_CM_WRITE_MAX 256

/* Implemented in rust/sys/debugfs.rs. */
int rpcrdma_cm_debugfs_write(void *private, const char *buf, size_t len);

static ssize_t rpcrdma_cm_seq_write(struct file *file, const char __user *ubuf,
				    size_t len, loff_t *ppos)
{
	struct seq_file *m = file->private_data;
	char *buf;
	int ret;

	if (len > RPCRDMA_CM_WRITE_MAX)
		return -E2BIG;
	buf = memdup_user_nul(ubuf, len);
	if (IS_ERR(buf))
		return PTR_ERR(buf);
	ret = rpcrdma_cm_debugfs_write(m->private, buf, len);
	kfree(buf);
	return ret ? ret : len;
}

static const struct file_operations rpcrdma_cm_rw_fops = {
	.owner = THIS_MODULE,
	.open = rpcrdma_cm_seq_open,
	.read = seq_read,
	.write = rpcrdma_cm_seq_write,
	.llseek = seq_lseek,
	.release = single_release,
};

/*
 * A file whose content rpcrdma_cm_debugfs_show() produces on each open; if
 * @writable (mode 0644, else 0444), writes go to rpcrdma_cm_debugfs_write().
 * debugfs_remove() of the file (or of a parent) waits for callers still inside
 * those functions, so @private must stay valid until it returns.
 */
int rpcrdma_cm_debugfs_create_file(const char *name, bool writable,
				   struct dentry *parent, void *private,
				   struct dentry **out);
int rpcrdma_cm_debugfs_create_file(const char *name, bool writable,
				   struct dentry *parent, void *private,
				   struct dentry **out)
{
	struct dentry *d;

	d = debugfs_create_file(name, writable ? 0644 : 0444, parent, private,
				writable ? &rpcrdma_cm_rw_fops : &rpcrdma_cm_seq_fops);
	if (IS_ERR(d))
		return PTR_ERR(d);
	*out = d;
	return 0;
}

/* RDMA connection manager --------------------------------------------------- */

/*
 * What Rust learns of a CM event: the fields it uses, in a layout this file
 * defines (mirrored in rust/sys/rdma_cm.rs), so Rust never depends on the layout
 * of struct rdma_cm_event. private_data is valid only during the call.
 */
struct rpcrdma_cm_event_info {
	int event;
	int status;
	const u8 *private_data;
	u32 private_data_len;
	u8 initiator_depth;
};

/* Implemented in rust/sys/rdma_cm.rs. Non-zero: the CM destroys @id. */
int rpcrdma_cm_event_rs(struct rdma_cm_id *id, void *context,
			const struct rpcrdma_cm_event_info *ev);

static int rpcrdma_cm_event_handler(struct rdma_cm_id *id,
				    struct rdma_cm_event *event)
{
	struct rpcrdma_cm_event_info ev = {
		.event = event->event,
		.status = event->status,
	};

	switch (event->event) {
	case RDMA_CM_EVENT_CONNECT_REQUEST:
	case RDMA_CM_EVENT_CONNECT_RESPONSE:
	case RDMA_CM_EVENT_ESTABLISHED:
		ev.private_data = event->param.conn.private_data;
		ev.private_data_len = ev.private_data ?
			event->param.conn.private_data_len : 0;
		ev.initiator_depth = event->param.conn.initiator_depth;
		break;
	default:
		break;
	}
	return rpcrdma_cm_event_rs(id, id->context, &ev);
}

int rpcrdma_cm_create_id(void *context, struct rdma_cm_id **out);
int rpcrdma_cm_create_id(void *context, struct rdma_cm_id **out)
{
	struct rdma_cm_id *id;

	id = rdma_create_id(&init_net, rpcrdma_cm_event_handler, context,
			    RDMA_PS_TCP, IB_QPT_RC);
	if (IS_ERR(id))
		return PTR_ERR(id);
	*out = id;
	return 0;
}

void rpcrdma_cm_set_context(struct rdma_cm_id *id, void *context);
void rpcrdma_cm_set_context(struct rdma_cm_id *id, void *context)
{
	id->context = context;
}

/* @addr: 4 octets (AF_INET) or 16 (AF_INET6), network order; @port host order. */
static int rpcrdma_cm_sockaddr(struct sockaddr_storage *ss, int family,
			       const u8 *addr, u16 port)
{
	memset(ss, 0, sizeof(*ss));
	if (family == AF_INET) {
		struct sockaddr_in *sin = (struct sockaddr_in *)ss;

		sin->sin_family = AF_INET;
		memcpy(&sin->sin_addr, addr, 4);
		sin->sin_port = htons(port);
		return 0;
	}
	if (family == AF_INET6) {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

		sin6->sin6_family = AF_INET6;
		memcpy(&sin6->sin6_addr, addr, 16);
		sin6->sin6_port = htons(port);
		return 0;
	}
	return -EAFNOSUPPORT;
}

int rpcrdma_cm_bind_listen(struct rdma_cm_id *id, int family, const u8 *addr,
			   u16 port, int backlog);
int rpcrdma_cm_bind_listen(struct rdma_cm_id *id, int family, const u8 *addr,
			   u16 port, int backlog)
{
	struct sockaddr_storage ss;
	int ret;

	ret = rpcrdma_cm_sockaddr(&ss, family, addr, port);
	if (ret)
		return ret;
	if (family == AF_INET6) {
		ret = rdma_set_afonly(id, 1);
		if (ret)
			return ret;
	}
	ret = rdma_bind_addr(id, (struct sockaddr *)&ss);
	if (ret)
		return ret;
	return rdma_listen(id, backlog);
}

int rpcrdma_cm_resolve_addr(struct rdma_cm_id *id, int family, const u8 *addr,
			    u16 port, unsigned long timeout_ms);
int rpcrdma_cm_resolve_addr(struct rdma_cm_id *id, int family, const u8 *addr,
			    u16 port, unsigned long timeout_ms)
{
	struct sockaddr_storage ss;
	int ret;

	ret = rpcrdma_cm_sockaddr(&ss, family, addr, port);
	if (ret)
		return ret;
	return rdma_resolve_addr(id, NULL, (struct sockaddr *)&ss, timeout_ms);
}

/* "addr:port" of both ends and the device name, for display. */
void rpcrdma_cm_id_names(struct rdma_cm_id *id, char *local, char *peer,
			 char *dev, size_t len);
void rpcrdma_cm_id_names(struct rdma_cm_id *id, char *local, char *peer,
			 char *dev, size_t len)
{
	snprintf(local, len, "%pISpc", &id->route.addr.src_addr);
	snprintf(peer, len, "%pISpc", &id->route.addr.dst_addr);
	snprintf(dev, len, "%s", id->device ? dev_name(&id->device->dev) : "-");
}

/*
 * A PD, one CQ for both directions (polled from a workqueue) and an RC QP of
 * @depth Sends and @depth Receives on @id's device.
 */
int rpcrdma_cm_create_qp(struct rdma_cm_id *id, u32 depth, struct ib_pd **pd_out,
			 struct ib_cq **cq_out);
int rpcrdma_cm_create_qp(struct rdma_cm_id *id, u32 depth, struct ib_pd **pd_out,
			 struct ib_cq **cq_out)
{
	struct ib_qp_init_attr attr = {};
	struct ib_pd *pd;
	struct ib_cq *cq;
	int ret;

	if (!id->device)
		return -ENODEV;
	pd = ib_alloc_pd(id->device, 0);
	if (IS_ERR(pd))
		return PTR_ERR(pd);
	cq = ib_alloc_cq_any(id->device, NULL, 2 * depth, IB_POLL_WORKQUEUE);
	if (IS_ERR(cq)) {
		ret = PTR_ERR(cq);
		goto out_pd;
	}
	attr.send_cq = cq;
	attr.recv_cq = cq;
	attr.cap.max_send_wr = depth;
	attr.cap.max_recv_wr = depth;
	attr.cap.max_send_sge = 1;
	attr.cap.max_recv_sge = 1;
	attr.sq_sig_type = IB_SIGNAL_REQ_WR;
	attr.qp_type = IB_QPT_RC;
	ret = rdma_create_qp(id, pd, &attr);
	if (ret)
		goto out_cq;
	*pd_out = pd;
	*cq_out = cq;
	return 0;

out_cq:
	ib_free_cq(cq);
out_pd:
	ib_dealloc_pd(pd);
	return ret;
}

void rpcrdma_cm_destroy_qp(struct rdma_cm_id *id, struct ib_pd *pd,
			   struct ib_cq *cq);
void rpcrdma_cm_destroy_qp(struct rdma_cm_id *id, struct ib_pd *pd,
			   struct ib_cq *cq)
{
	if (id->qp)
		rdma_destroy_qp(id);
	if (cq)
		ib_free_cq(cq);
	if (pd)
		ib_dealloc_pd(pd);
}

/* Called from the ROUTE_RESOLVED handler (the handler lock is held). */
int rpcrdma_cm_connect_locked(struct rdma_cm_id *id, const void *pdata, u8 len);
int rpcrdma_cm_connect_locked(struct rdma_cm_id *id, const void *pdata, u8 len)
{
	struct rdma_conn_param param = {};

	if (!id->device)
		return -ENODEV;
	param.private_data = len ? pdata : NULL;
	param.private_data_len = len;
	/* As xprtrdma: the server reads from us, we never read from it. */
	param.responder_resources = min_t(int, id->device->attrs.max_qp_rd_atom, 255);
	param.initiator_depth = 0;
	param.retry_count = 6;
	param.rnr_retry_count = 0;
	param.flow_control = 0;
	return rdma_connect_locked(id, &param);
}

/* Called from the CONNECT_REQUEST handler (the handler lock is held). */
int rpcrdma_cm_accept(struct rdma_cm_id *id, const void *pdata, u8 len, u8 ord);
int rpcrdma_cm_accept(struct rdma_cm_id *id, const void *pdata, u8 len, u8 ord)
{
	struct rdma_conn_param param = {};

	if (!id->device)
		return -ENODEV;
	param.private_data = len ? pdata : NULL;
	param.private_data_len = len;
	param.responder_resources = 0;
	param.initiator_depth = min_t(int, ord, id->device->attrs.max_qp_init_rd_atom);
	return rdma_accept(id, &param);
}

int rpcrdma_cm_reject(struct rdma_cm_id *id);
int rpcrdma_cm_reject(struct rdma_cm_id *id)
{
	return rdma_reject(id, NULL, 0, IB_CM_REJ_CONSUMER_DEFINED);
}
