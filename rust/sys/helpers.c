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

/* Queue pair and its buffers ------------------------------------------------ */

/*
 * One connection's PD, CQ, RC QP and message buffers. Receive buffers (one per
 * Receive WR, @recv_size octets each) are posted at creation and reposted after
 * each completion; Send buffers (@send_size octets each) come from a free list.
 * Rust never holds a buffer: it reads a received message and fills a Send
 * buffer only during a call from this file, so every buffer is unmapped and
 * freed with the QP.
 *
 * Posting takes @lock and fails once @closed is set; rpcrdma_cm_destroy_qp()
 * sets @closed under the lock and then drains the QP, so every WR ever posted
 * has completed (and its callback has returned) before anything is freed.
 */
struct rpcrdma_cm_qp;

struct rpcrdma_cm_buf {
	struct ib_cqe cqe;
	struct rpcrdma_cm_qp *qp;
	struct list_head free;
	void *addr;
	u64 dma;
	u32 size;
};

struct rpcrdma_cm_qp {
	struct rdma_cm_id *id;
	struct ib_pd *pd;
	struct ib_cq *cq;
	void *owner;
	spinlock_t lock;
	bool closed;
	struct list_head send_free;
	u32 nrecv, nsend;
	struct rpcrdma_cm_buf *recv;
	struct rpcrdma_cm_buf *send;
};

/*
 * What Rust learns of a completion, in a layout mirrored in rust/sys/rdma_cm.rs.
 * @status is an enum ib_wc_status; @data/@len the received message (Receives
 * that succeeded only), valid during the call.
 */
struct rpcrdma_cm_wc_info {
	int status;
	const u8 *data;
	u32 len;
	u32 invalidate_rkey;
	bool with_invalidate;
};

/* Implemented in rust/sys/rdma_cm.rs; @owner is the id's Rust context. */
void rpcrdma_cm_recv_rs(void *owner, const struct rpcrdma_cm_wc_info *wc);
void rpcrdma_cm_send_rs(void *owner, const struct rpcrdma_cm_wc_info *wc);

static int rpcrdma_cm_buf_init(struct rpcrdma_cm_qp *qp, struct rpcrdma_cm_buf *b,
			       u32 size, enum dma_data_direction dir)
{
	struct ib_device *dev = qp->id->device;

	b->qp = qp;
	b->size = size;
	b->addr = kmalloc(size, GFP_KERNEL);
	if (!b->addr)
		return -ENOMEM;
	b->dma = ib_dma_map_single(dev, b->addr, size, dir);
	if (ib_dma_mapping_error(dev, b->dma)) {
		kfree(b->addr);
		b->addr = NULL;
		return -EIO;
	}
	return 0;
}

static void rpcrdma_cm_bufs_free(struct rpcrdma_cm_qp *qp, struct rpcrdma_cm_buf *bufs,
				 u32 n, enum dma_data_direction dir)
{
	u32 i;

	if (!bufs)
		return;
	for (i = 0; i < n; i++) {
		if (!bufs[i].addr)
			continue;
		ib_dma_unmap_single(qp->id->device, bufs[i].dma, bufs[i].size, dir);
		kfree(bufs[i].addr);
	}
	kfree(bufs);
}

static void rpcrdma_cm_recv_done(struct ib_cq *cq, struct ib_wc *wc);
void rpcrdma_cm_destroy_qp(struct rpcrdma_cm_qp *qp);

/* Posts one Receive; the caller holds qp->lock. */
static int rpcrdma_cm_post_recv_locked(struct rpcrdma_cm_buf *b)
{
	struct ib_sge sge = {
		.addr = b->dma,
		.length = b->size,
		.lkey = b->qp->pd->local_dma_lkey,
	};
	struct ib_recv_wr wr = {
		.wr_cqe = &b->cqe,
		.sg_list = &sge,
		.num_sge = 1,
	};

	if (b->qp->closed)
		return -ENOTCONN;
	b->cqe.done = rpcrdma_cm_recv_done;
	ib_dma_sync_single_for_device(b->qp->id->device, b->dma, b->size,
				      DMA_FROM_DEVICE);
	return ib_post_recv(b->qp->id->qp, &wr, NULL);
}

static void rpcrdma_cm_recv_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct rpcrdma_cm_buf *b = container_of(wc->wr_cqe, struct rpcrdma_cm_buf, cqe);
	struct rpcrdma_cm_qp *qp = b->qp;
	struct rpcrdma_cm_wc_info info = { .status = wc->status };
	unsigned long flags;

	if (wc->status == IB_WC_SUCCESS) {
		ib_dma_sync_single_for_cpu(qp->id->device, b->dma, b->size,
					   DMA_FROM_DEVICE);
		info.data = b->addr;
		info.len = min(wc->byte_len, b->size);
		info.with_invalidate = wc->wc_flags & IB_WC_WITH_INVALIDATE;
		if (info.with_invalidate)
			info.invalidate_rkey = wc->ex.invalidate_rkey;
	}
	rpcrdma_cm_recv_rs(qp->owner, &info);
	if (wc->status != IB_WC_SUCCESS)
		return;
	spin_lock_irqsave(&qp->lock, flags);
	rpcrdma_cm_post_recv_locked(b);
	spin_unlock_irqrestore(&qp->lock, flags);
}

static void rpcrdma_cm_send_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct rpcrdma_cm_buf *b = container_of(wc->wr_cqe, struct rpcrdma_cm_buf, cqe);
	struct rpcrdma_cm_qp *qp = b->qp;
	struct rpcrdma_cm_wc_info info = { .status = wc->status };
	unsigned long flags;

	spin_lock_irqsave(&qp->lock, flags);
	list_add(&b->free, &qp->send_free);
	spin_unlock_irqrestore(&qp->lock, flags);
	rpcrdma_cm_send_rs(qp->owner, &info);
}

/*
 * A PD, one CQ for both directions (polled from a workqueue), an RC QP of
 * @depth Sends and @depth Receives on @id's device (plus one each for the
 * drain), @depth Send buffers of @send_size octets, and @depth Receive buffers
 * of @recv_size octets, all posted. Completions go to @owner.
 */
int rpcrdma_cm_create_qp(struct rdma_cm_id *id, u32 depth, u32 send_size,
			 u32 recv_size, void *owner, struct rpcrdma_cm_qp **out);
int rpcrdma_cm_create_qp(struct rdma_cm_id *id, u32 depth, u32 send_size,
			 u32 recv_size, void *owner, struct rpcrdma_cm_qp **out)
{
	struct ib_qp_init_attr attr = {};
	struct rpcrdma_cm_qp *qp;
	unsigned long flags;
	int ret;
	u32 i;

	if (!id->device)
		return -ENODEV;
	if (!depth || !send_size || !recv_size)
		return -EINVAL;
	qp = kzalloc(sizeof(*qp), GFP_KERNEL);
	if (!qp)
		return -ENOMEM;
	qp->id = id;
	qp->owner = owner;
	spin_lock_init(&qp->lock);
	INIT_LIST_HEAD(&qp->send_free);
	qp->pd = ib_alloc_pd(id->device, 0);
	if (IS_ERR(qp->pd)) {
		ret = PTR_ERR(qp->pd);
		qp->pd = NULL;
		goto out;
	}
	qp->cq = ib_alloc_cq_any(id->device, NULL, 2 * (depth + 1), IB_POLL_WORKQUEUE);
	if (IS_ERR(qp->cq)) {
		ret = PTR_ERR(qp->cq);
		qp->cq = NULL;
		goto out;
	}
	attr.send_cq = qp->cq;
	attr.recv_cq = qp->cq;
	attr.cap.max_send_wr = depth + 1;
	attr.cap.max_recv_wr = depth + 1;
	attr.cap.max_send_sge = 1;
	attr.cap.max_recv_sge = 1;
	attr.sq_sig_type = IB_SIGNAL_REQ_WR;
	attr.qp_type = IB_QPT_RC;
	ret = rdma_create_qp(id, qp->pd, &attr);
	if (ret)
		goto out;

	ret = -ENOMEM;
	qp->send = kcalloc(depth, sizeof(*qp->send), GFP_KERNEL);
	qp->recv = kcalloc(depth, sizeof(*qp->recv), GFP_KERNEL);
	if (!qp->send || !qp->recv)
		goto out;
	qp->nsend = depth;
	qp->nrecv = depth;
	for (i = 0; i < depth; i++) {
		ret = rpcrdma_cm_buf_init(qp, &qp->send[i], send_size, DMA_TO_DEVICE);
		if (ret)
			goto out;
		qp->send[i].cqe.done = rpcrdma_cm_send_done;
		list_add_tail(&qp->send[i].free, &qp->send_free);
		ret = rpcrdma_cm_buf_init(qp, &qp->recv[i], recv_size, DMA_FROM_DEVICE);
		if (ret)
			goto out;
	}
	/* Receives first: a peer may send as soon as the connection is up. */
	spin_lock_irqsave(&qp->lock, flags);
	for (i = 0; i < depth && !ret; i++)
		ret = rpcrdma_cm_post_recv_locked(&qp->recv[i]);
	spin_unlock_irqrestore(&qp->lock, flags);
	if (ret)
		goto out;
	*out = qp;
	return 0;

out:
	rpcrdma_cm_destroy_qp(qp);
	return ret;
}

/*
 * Stops posting, flushes every posted WR (their callbacks run and return before
 * ib_drain_qp() does), then frees the QP, buffers, CQ and PD. Must not be
 * called from a completion callback of this QP (the drain would wait for it).
 */
void rpcrdma_cm_destroy_qp(struct rpcrdma_cm_qp *qp)
{
	unsigned long flags;

	spin_lock_irqsave(&qp->lock, flags);
	qp->closed = true;
	spin_unlock_irqrestore(&qp->lock, flags);
	if (qp->id->qp) {
		ib_drain_qp(qp->id->qp);
		rdma_destroy_qp(qp->id);
	}
	rpcrdma_cm_bufs_free(qp, qp->send, qp->nsend, DMA_TO_DEVICE);
	rpcrdma_cm_bufs_free(qp, qp->recv, qp->nrecv, DMA_FROM_DEVICE);
	if (qp->cq)
		ib_free_cq(qp->cq);
	if (qp->pd)
		ib_dealloc_pd(qp->pd);
	kfree(qp);
}

/*
 * Takes a free Send buffer: its address and size in *@addr and *@size. Returns
 * NULL if none is free or the QP is closed. The caller fills it and passes it
 * to rpcrdma_cm_send_post() or rpcrdma_cm_send_abort().
 */
struct rpcrdma_cm_buf *rpcrdma_cm_send_get(struct rpcrdma_cm_qp *qp, u8 **addr,
					   u32 *size);
struct rpcrdma_cm_buf *rpcrdma_cm_send_get(struct rpcrdma_cm_qp *qp, u8 **addr,
					   u32 *size)
{
	struct rpcrdma_cm_buf *b = NULL;
	unsigned long flags;

	spin_lock_irqsave(&qp->lock, flags);
	if (!qp->closed && !list_empty(&qp->send_free)) {
		b = list_first_entry(&qp->send_free, struct rpcrdma_cm_buf, free);
		list_del(&b->free);
	}
	spin_unlock_irqrestore(&qp->lock, flags);
	if (b) {
		*addr = b->addr;
		*size = b->size;
	}
	return b;
}

void rpcrdma_cm_send_abort(struct rpcrdma_cm_buf *b);
void rpcrdma_cm_send_abort(struct rpcrdma_cm_buf *b)
{
	unsigned long flags;

	spin_lock_irqsave(&b->qp->lock, flags);
	list_add(&b->free, &b->qp->send_free);
	spin_unlock_irqrestore(&b->qp->lock, flags);
}

/*
 * Posts the first @len octets of @b as a signaled Send, or as Send With
 * Invalidate of @inv_rkey if @invalidate. On error the buffer is back on the
 * free list.
 */
int rpcrdma_cm_send_post(struct rpcrdma_cm_buf *b, u32 len, bool invalidate,
			 u32 inv_rkey);
int rpcrdma_cm_send_post(struct rpcrdma_cm_buf *b, u32 len, bool invalidate,
			 u32 inv_rkey)
{
	struct rpcrdma_cm_qp *qp = b->qp;
	struct ib_sge sge = {
		.addr = b->dma,
		.length = len,
		.lkey = qp->pd->local_dma_lkey,
	};
	struct ib_send_wr wr = {
		.wr_cqe = &b->cqe,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = invalidate ? IB_WR_SEND_WITH_INV : IB_WR_SEND,
		.send_flags = IB_SEND_SIGNALED,
	};
	unsigned long flags;
	int ret;

	if (len > b->size) {
		ret = -EMSGSIZE;
		goto fail;
	}
	if (invalidate)
		wr.ex.invalidate_rkey = inv_rkey;
	ib_dma_sync_single_for_device(qp->id->device, b->dma, len, DMA_TO_DEVICE);
	spin_lock_irqsave(&qp->lock, flags);
	ret = qp->closed ? -ENOTCONN : ib_post_send(qp->id->qp, &wr, NULL);
	spin_unlock_irqrestore(&qp->lock, flags);
	if (!ret)
		return 0;
fail:
	rpcrdma_cm_send_abort(b);
	return ret;
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
