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
#include <linux/highmem.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/workqueue.h>
#include <net/net_namespace.h>
#include <rdma/ib_cm.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>
#include <rdma/rw.h>

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
 * Rust never holds a message buffer: it reads a received message and fills a
 * Send buffer only during a call from this file.
 *
 * Receive completions are handed to Rust from a work item (process context,
 * one message at a time, in order), so the handler may sleep, for instance
 * while it pulls a Read chunk with RDMA Read.
 *
 * Posting takes @lock and fails once @closed is set. Operations that post and
 * then wait (chunks, below) count themselves in @users. Teardown
 * (rpcrdma_cm_destroy_qp) sets @closed under the lock, drains the QP (every
 * posted WR completes, flushed if need be), lets the Receive work finish,
 * waits for @users to reach zero, and only then frees the QP, buffers and CQ.
 * Chunks hold a reference (@ref) each: teardown then waits for the last one to
 * be freed (@released), frees the PD and returns, so nothing of the connection
 * is left on the device. Device removal depends on that: the CM lets the
 * driver free the device once the DEVICE_REMOVAL handlers have returned.
 */
struct rpcrdma_cm_qp;

struct rpcrdma_cm_buf {
	struct ib_cqe cqe;
	struct rpcrdma_cm_qp *qp;
	struct list_head list;	/* Send: free list; Receive: ready list */
	void *addr;
	u64 dma;
	u32 size;
	/* Receive completion, kept for the work item. */
	int status;
	u32 byte_len;
	bool with_inv;
	u32 inv_rkey;
};

struct rpcrdma_cm_qp {
	struct kref ref;
	struct completion released;
	struct rdma_cm_id *id;
	struct ib_pd *pd;
	struct ib_cq *cq;
	void *owner;
	spinlock_t lock;
	bool closed;
	atomic_t users;
	wait_queue_head_t wq;
	struct list_head send_free;
	struct list_head recv_ready;
	struct work_struct recv_work;
	/* One RDMA Read/Write chain at a time, of at most @rw_wrs WRs. */
	struct mutex rw_lock;
	u32 rw_wrs;
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

/*
 * The last reference went (destroy_qp's own, or a chunk's after it): free the
 * PD and let destroy_qp, which waits for this, free @qp. complete() is the
 * last access to @qp here, and the waiter cannot return before it is done.
 */
static void rpcrdma_cm_qp_release(struct kref *ref)
{
	struct rpcrdma_cm_qp *qp = container_of(ref, struct rpcrdma_cm_qp, ref);

	if (qp->pd)
		ib_dealloc_pd(qp->pd);
	qp->pd = NULL;
	complete(&qp->released);
}

/* Starts an operation that posts: fails once the QP is closing. */
static int rpcrdma_cm_qp_enter(struct rpcrdma_cm_qp *qp)
{
	unsigned long flags;
	int ret = 0;

	spin_lock_irqsave(&qp->lock, flags);
	if (qp->closed)
		ret = -ENOTCONN;
	else
		atomic_inc(&qp->users);
	spin_unlock_irqrestore(&qp->lock, flags);
	return ret;
}

static void rpcrdma_cm_qp_leave(struct rpcrdma_cm_qp *qp)
{
	if (atomic_dec_and_test(&qp->users))
		wake_up_all(&qp->wq);
}

/* ib_post_send() unless the QP is closing. */
static int rpcrdma_cm_post_send(struct rpcrdma_cm_qp *qp, const struct ib_send_wr *wr)
{
	unsigned long flags;
	int ret;

	spin_lock_irqsave(&qp->lock, flags);
	ret = qp->closed ? -ENOTCONN : ib_post_send(qp->id->qp, wr, NULL);
	spin_unlock_irqrestore(&qp->lock, flags);
	return ret;
}

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

/* CQ context: queue the message for the work item. */
static void rpcrdma_cm_recv_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct rpcrdma_cm_buf *b = container_of(wc->wr_cqe, struct rpcrdma_cm_buf, cqe);
	struct rpcrdma_cm_qp *qp = b->qp;
	unsigned long flags;

	b->status = wc->status;
	b->byte_len = wc->status == IB_WC_SUCCESS ? min(wc->byte_len, b->size) : 0;
	b->with_inv = wc->status == IB_WC_SUCCESS && (wc->wc_flags & IB_WC_WITH_INVALIDATE);
	b->inv_rkey = b->with_inv ? wc->ex.invalidate_rkey : 0;
	spin_lock_irqsave(&qp->lock, flags);
	list_add_tail(&b->list, &qp->recv_ready);
	spin_unlock_irqrestore(&qp->lock, flags);
	queue_work(system_unbound_wq, &qp->recv_work);
}

/* Process context: hand each queued message to Rust, then repost its buffer. */
static void rpcrdma_cm_recv_work(struct work_struct *work)
{
	struct rpcrdma_cm_qp *qp = container_of(work, struct rpcrdma_cm_qp, recv_work);
	struct rpcrdma_cm_wc_info info;
	struct rpcrdma_cm_buf *b;
	unsigned long flags;

	for (;;) {
		spin_lock_irqsave(&qp->lock, flags);
		b = list_first_entry_or_null(&qp->recv_ready, struct rpcrdma_cm_buf, list);
		if (b)
			list_del(&b->list);
		spin_unlock_irqrestore(&qp->lock, flags);
		if (!b)
			return;
		info = (struct rpcrdma_cm_wc_info){
			.status = b->status,
			.data = b->status == IB_WC_SUCCESS ? b->addr : NULL,
			.len = b->byte_len,
			.invalidate_rkey = b->inv_rkey,
			.with_invalidate = b->with_inv,
		};
		if (b->status == IB_WC_SUCCESS)
			ib_dma_sync_single_for_cpu(qp->id->device, b->dma, b->size,
						   DMA_FROM_DEVICE);
		rpcrdma_cm_recv_rs(qp->owner, &info);
		if (b->status != IB_WC_SUCCESS)
			continue;
		spin_lock_irqsave(&qp->lock, flags);
		rpcrdma_cm_post_recv_locked(b);
		spin_unlock_irqrestore(&qp->lock, flags);
	}
}

static void rpcrdma_cm_send_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct rpcrdma_cm_buf *b = container_of(wc->wr_cqe, struct rpcrdma_cm_buf, cqe);
	struct rpcrdma_cm_qp *qp = b->qp;
	struct rpcrdma_cm_wc_info info = { .status = wc->status };
	unsigned long flags;

	spin_lock_irqsave(&qp->lock, flags);
	list_add(&b->list, &qp->send_free);
	spin_unlock_irqrestore(&qp->lock, flags);
	rpcrdma_cm_send_rs(qp->owner, &info);
}

/* Registrations and invalidations per chunk, and one RDMA Read/Write context. */
#define RPCRDMA_CM_MR_WRS 6

/* At most this many pages per RDMA Read/Write WR (the device may allow fewer). */
#define RPCRDMA_CM_RW_SGES 16

/* The most pages one chunk may have (4 MiB with 4 KiB pages). */
#define RPCRDMA_CM_CHUNK_MAX_PAGES 1024

/*
 * A PD, one CQ for both directions (polled from a workqueue), an RC QP on
 * @id's device with @depth Receives, @depth Sends plus room for FRWR
 * registrations and invalidations, room for one RDMA Read/Write chain as long
 * as the largest chunk needs (up to RPCRDMA_CM_RW_SGES pages per WR; RDMA
 * Reads and Writes run one at a time, see rpcrdma_cm_chunk_rdma()), one WR
 * each way for the drain, @depth Send buffers of @send_size octets, and
 * @depth Receive buffers of @recv_size octets, all posted. Completions go to
 * @owner.
 */
int rpcrdma_cm_create_qp(struct rdma_cm_id *id, u32 depth, u32 send_size,
			 u32 recv_size, void *owner, struct rpcrdma_cm_qp **out);
int rpcrdma_cm_create_qp(struct rdma_cm_id *id, u32 depth, u32 send_size,
			 u32 recv_size, void *owner, struct rpcrdma_cm_qp **out)
{
	struct ib_qp_init_attr attr = {};
	struct rpcrdma_cm_qp *qp;
	unsigned long flags;
	u32 i, sges, own, rw;
	int ret;

	if (!id->device)
		return -ENODEV;
	if (!depth || depth > 1024 || !send_size || !recv_size)
		return -EINVAL;
	qp = kzalloc(sizeof(*qp), GFP_KERNEL);
	if (!qp)
		return -ENOMEM;
	kref_init(&qp->ref);
	init_completion(&qp->released);
	qp->id = id;
	qp->owner = owner;
	spin_lock_init(&qp->lock);
	init_waitqueue_head(&qp->wq);
	INIT_LIST_HEAD(&qp->send_free);
	INIT_LIST_HEAD(&qp->recv_ready);
	INIT_WORK(&qp->recv_work, rpcrdma_cm_recv_work);
	mutex_init(&qp->rw_lock);
	qp->pd = ib_alloc_pd(id->device, 0);
	if (IS_ERR(qp->pd)) {
		ret = PTR_ERR(qp->pd);
		qp->pd = NULL;
		goto out;
	}
	sges = min3(id->device->attrs.max_send_sge, id->device->attrs.max_sge_rd,
		    RPCRDMA_CM_RW_SGES);
	sges = max(sges, 1U);
	own = depth * (RPCRDMA_CM_MR_WRS + 1) + 1;
	rw = DIV_ROUND_UP(RPCRDMA_CM_CHUNK_MAX_PAGES, sges);
	/*
	 * Every WR that can be outstanding, signaled or not (a flush completes
	 * them all): ours, the RDMA Read/Write room (up to three WRs per context
	 * where rdma_rw registers), the Receives and the drain. A CQ that
	 * overflowed would lose completions, the drain's among them.
	 */
	qp->cq = ib_alloc_cq_any(id->device, NULL, own + 3 * rw + depth + 1,
				 IB_POLL_WORKQUEUE);
	if (IS_ERR(qp->cq)) {
		ret = PTR_ERR(qp->cq);
		qp->cq = NULL;
		goto out;
	}
	attr.send_cq = qp->cq;
	attr.recv_cq = qp->cq;
	attr.cap.max_send_wr = own;
	attr.cap.max_recv_wr = depth + 1;
	attr.cap.max_send_sge = sges;
	attr.cap.max_recv_sge = 1;
	/* rdma_rw_init_qp() adds at least one Send WR per context. */
	attr.cap.max_rdma_ctxs = rw;
	attr.port_num = id->port_num;
	attr.sq_sig_type = IB_SIGNAL_REQ_WR;
	attr.qp_type = IB_QPT_RC;
	ret = rdma_create_qp(id, qp->pd, &attr);
	if (ret)
		goto out;
	/* What the device granted beyond our own WRs is for RDMA Read/Write. */
	qp->rw_wrs = attr.cap.max_send_wr > own ? attr.cap.max_send_wr - own : 0;

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
		list_add_tail(&qp->send[i].list, &qp->send_free);
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
 * ib_drain_qp() does), lets the Receive work finish, waits for operations in
 * progress, frees the QP, buffers and CQ, then waits for the chunks still
 * allocated on this QP to be freed (their operations fail now, so their holders
 * let go at once) and frees the PD and @qp. Must not be called from a
 * completion callback or the Receive work of this QP, nor by a thread holding
 * one of its chunks (they would be waited for).
 */
void rpcrdma_cm_destroy_qp(struct rpcrdma_cm_qp *qp)
{
	unsigned long flags;

	spin_lock_irqsave(&qp->lock, flags);
	qp->closed = true;
	spin_unlock_irqrestore(&qp->lock, flags);
	if (qp->id->qp)
		ib_drain_qp(qp->id->qp);
	flush_work(&qp->recv_work);
	wait_event(qp->wq, atomic_read(&qp->users) == 0);
	if (qp->id->qp)
		rdma_destroy_qp(qp->id);
	rpcrdma_cm_bufs_free(qp, qp->send, qp->nsend, DMA_TO_DEVICE);
	rpcrdma_cm_bufs_free(qp, qp->recv, qp->nrecv, DMA_FROM_DEVICE);
	qp->send = NULL;
	qp->recv = NULL;
	if (qp->cq)
		ib_free_cq(qp->cq);
	qp->cq = NULL;
	kref_put(&qp->ref, rpcrdma_cm_qp_release);
	while (!wait_for_completion_timeout(&qp->released, 10 * HZ))
		pr_warn("rpcrdma_cm: a closed connection still waits for %u chunk(s) to be freed\n",
			kref_read(&qp->ref));
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
		b = list_first_entry(&qp->send_free, struct rpcrdma_cm_buf, list);
		list_del(&b->list);
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
	list_add(&b->list, &b->qp->send_free);
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
	int ret;

	if (len > b->size) {
		ret = -EMSGSIZE;
		goto fail;
	}
	if (invalidate)
		wr.ex.invalidate_rkey = inv_rkey;
	ib_dma_sync_single_for_device(qp->id->device, b->dma, len, DMA_TO_DEVICE);
	ret = rpcrdma_cm_post_send(qp, &wr);
	if (!ret)
		return 0;
fail:
	rpcrdma_cm_send_abort(b);
	return ret;
}

/* Chunks ----------------------------------------------------------------- */

/*
 * Memory for one RPC-over-RDMA chunk or segment: pages, described by a
 * scatterlist whose lengths add up to exactly @len. A requester registers it
 * with FRWR (rpcrdma_cm_chunk_register) so the peer can read or write it; a
 * responder moves data between it and the peer's memory with RDMA Read or
 * Write (rpcrdma_cm_chunk_rdma). The chunk holds a reference on its QP, so it
 * may outlive the connection: it is then simply freed.
 */
struct rpcrdma_cm_chunk {
	struct rpcrdma_cm_qp *qp;
	struct page **pages;
	struct scatterlist *sgl;
	u32 npages;
	u32 len;
	/* FRWR */
	struct ib_mr *mr;
	int nents;		/* ib_dma_map_sg() result; 0 when not mapped */
	struct ib_cqe reg_cqe, inv_cqe;
	atomic_t inflight;	/* posted REG_MR / LOCAL_INV not completed */
	int mr_status;		/* first failed completion, else 0 */
	/* RDMA Read / Write */
	struct ib_cqe rw_cqe;
	struct completion rw_done;
	int rw_status;
};

struct rpcrdma_cm_chunk *rpcrdma_cm_chunk_alloc(struct rpcrdma_cm_qp *qp, u32 len);
struct rpcrdma_cm_chunk *rpcrdma_cm_chunk_alloc(struct rpcrdma_cm_qp *qp, u32 len)
{
	struct rpcrdma_cm_chunk *c;
	u32 i, npages = DIV_ROUND_UP(len, PAGE_SIZE);

	if (!len || npages > RPCRDMA_CM_CHUNK_MAX_PAGES)
		return NULL;
	c = kzalloc(sizeof(*c), GFP_KERNEL);
	if (!c)
		return NULL;
	c->pages = kcalloc(npages, sizeof(*c->pages), GFP_KERNEL);
	c->sgl = kcalloc(npages, sizeof(*c->sgl), GFP_KERNEL);
	if (!c->pages || !c->sgl)
		goto fail;
	sg_init_table(c->sgl, npages);
	for (i = 0; i < npages; i++) {
		c->pages[i] = alloc_page(GFP_KERNEL);
		if (!c->pages[i])
			goto fail;
		sg_set_page(&c->sgl[i], c->pages[i],
			    min_t(u32, PAGE_SIZE, len - i * PAGE_SIZE), 0);
	}
	c->npages = npages;
	c->len = len;
	atomic_set(&c->inflight, 0);
	init_completion(&c->rw_done);
	kref_get(&qp->ref);
	c->qp = qp;
	return c;

fail:
	if (c->pages)
		for (i = 0; i < npages && c->pages[i]; i++)
			__free_page(c->pages[i]);
	kfree(c->pages);
	kfree(c->sgl);
	kfree(c);
	return NULL;
}

/* ib_verbs.h has no ib_dma_sync_sg_*(); what they would do. */
static void rpcrdma_cm_sync_sg(struct ib_device *dev, struct scatterlist *sgl,
			       int nents, bool for_cpu)
{
	if (ib_uses_virt_dma(dev))
		return;
	if (for_cpu)
		dma_sync_sg_for_cpu(dev->dma_device, sgl, nents, DMA_BIDIRECTIONAL);
	else
		dma_sync_sg_for_device(dev->dma_device, sgl, nents, DMA_BIDIRECTIONAL);
}

/* Copies @n octets between @buf and the chunk at @off (into it if @in). */
int rpcrdma_cm_chunk_copy(struct rpcrdma_cm_chunk *c, u32 off, u8 *buf, u32 n,
			  bool in);
int rpcrdma_cm_chunk_copy(struct rpcrdma_cm_chunk *c, u32 off, u8 *buf, u32 n,
			  bool in)
{
	struct ib_device *dev = c->qp->pd->device;

	if (off > c->len || n > c->len - off)
		return -EINVAL;
	if (c->nents && !in)
		rpcrdma_cm_sync_sg(dev, c->sgl, c->npages, true);
	while (n) {
		u32 pg = off / PAGE_SIZE, po = off % PAGE_SIZE;
		u32 k = min_t(u32, n, PAGE_SIZE - po);
		u8 *p = kmap_local_page(c->pages[pg]);

		if (in)
			memcpy(p + po, buf, k);
		else
			memcpy(buf, p + po, k);
		kunmap_local(p);
		buf += k;
		off += k;
		n -= k;
	}
	if (c->nents && in)
		rpcrdma_cm_sync_sg(dev, c->sgl, c->npages, false);
	return 0;
}

static void rpcrdma_cm_mr_done(struct ib_wc *wc, struct rpcrdma_cm_chunk *c)
{
	struct rpcrdma_cm_qp *qp = c->qp;

	if (wc->status != IB_WC_SUCCESS && !c->mr_status)
		c->mr_status = wc->status;
	/* @c may be freed once inflight is 0; @qp stays (see destroy_qp). */
	if (atomic_dec_and_test(&c->inflight))
		wake_up_all(&qp->wq);
}

static void rpcrdma_cm_reg_done(struct ib_cq *cq, struct ib_wc *wc)
{
	rpcrdma_cm_mr_done(wc, container_of(wc->wr_cqe, struct rpcrdma_cm_chunk, reg_cqe));
}

static void rpcrdma_cm_inv_done(struct ib_cq *cq, struct ib_wc *wc)
{
	rpcrdma_cm_mr_done(wc, container_of(wc->wr_cqe, struct rpcrdma_cm_chunk, inv_cqe));
}

/*
 * Registers the chunk with FRWR (IB_WR_REG_MR, posted before whatever Send
 * announces it, so the QP's ordering makes it valid in time), for the peer to
 * read (@remote_write false) or write. Returns the rkey and the address the
 * peer uses. A chunk is registered at most once.
 */
int rpcrdma_cm_chunk_register(struct rpcrdma_cm_chunk *c, bool remote_write,
			      u32 *rkey, u64 *iova);
int rpcrdma_cm_chunk_register(struct rpcrdma_cm_chunk *c, bool remote_write,
			      u32 *rkey, u64 *iova)
{
	struct rpcrdma_cm_qp *qp = c->qp;
	struct ib_device *dev = qp->pd->device;
	struct ib_reg_wr reg = {};
	struct ib_mr *mr;
	int ret, n;

	if (c->mr)
		return -EBUSY;
	if (c->npages > dev->attrs.max_fast_reg_page_list_len)
		return -EMSGSIZE;
	ret = rpcrdma_cm_qp_enter(qp);
	if (ret)
		return ret;
	mr = ib_alloc_mr(qp->pd, IB_MR_TYPE_MEM_REG, c->npages);
	if (IS_ERR(mr)) {
		ret = PTR_ERR(mr);
		goto out;
	}
	c->mr = mr;
	c->nents = ib_dma_map_sg(dev, c->sgl, c->npages, DMA_BIDIRECTIONAL);
	if (!c->nents) {
		ret = -EIO;
		goto out;
	}
	n = ib_map_mr_sg(mr, c->sgl, c->nents, NULL, PAGE_SIZE);
	if (n != c->nents) {
		ret = n < 0 ? n : -EIO;
		goto out;
	}
	c->reg_cqe.done = rpcrdma_cm_reg_done;
	reg.wr.opcode = IB_WR_REG_MR;
	reg.wr.wr_cqe = &c->reg_cqe;
	reg.wr.send_flags = IB_SEND_SIGNALED;
	reg.mr = mr;
	reg.key = mr->rkey;
	reg.access = IB_ACCESS_LOCAL_WRITE |
		     (remote_write ? IB_ACCESS_REMOTE_WRITE : IB_ACCESS_REMOTE_READ);
	atomic_inc(&c->inflight);
	ret = rpcrdma_cm_post_send(qp, &reg.wr);
	if (ret) {
		atomic_dec(&c->inflight);
		goto out;
	}
	*rkey = mr->rkey;
	*iova = mr->iova;
out:
	rpcrdma_cm_qp_leave(qp);
	return ret;
}

/*
 * Releases a chunk: invalidates its registration with LOCAL_INV unless
 * @remotely_invalidated (the peer did it with Send With Invalidate) or the QP
 * is gone, waits for its REG_MR / LOCAL_INV completions, and frees it. Returns
 * 1 if a LOCAL_INV was posted, else 0.
 */
int rpcrdma_cm_chunk_free(struct rpcrdma_cm_chunk *c, bool remotely_invalidated);
int rpcrdma_cm_chunk_free(struct rpcrdma_cm_chunk *c, bool remotely_invalidated)
{
	struct rpcrdma_cm_qp *qp = c->qp;
	struct ib_device *dev = qp->pd->device;
	int posted = 0;
	u32 i;

	if (c->mr && c->nents && !remotely_invalidated && !rpcrdma_cm_qp_enter(qp)) {
		struct ib_send_wr inv = {
			.opcode = IB_WR_LOCAL_INV,
			.wr_cqe = &c->inv_cqe,
			.send_flags = IB_SEND_SIGNALED,
			.ex.invalidate_rkey = c->mr->rkey,
		};

		c->inv_cqe.done = rpcrdma_cm_inv_done;
		atomic_inc(&c->inflight);
		if (rpcrdma_cm_post_send(qp, &inv))
			atomic_dec(&c->inflight);
		else
			posted = 1;
		rpcrdma_cm_qp_leave(qp);
	}
	/* Completes: a live QP finishes the WRs, a closing one flushes them. */
	wait_event(qp->wq, atomic_read(&c->inflight) == 0);
	if (c->nents)
		ib_dma_unmap_sg(dev, c->sgl, c->npages, DMA_BIDIRECTIONAL);
	if (c->mr)
		ib_dereg_mr(c->mr);
	for (i = 0; i < c->npages; i++)
		__free_page(c->pages[i]);
	kfree(c->pages);
	kfree(c->sgl);
	kfree(c);
	kref_put(&qp->ref, rpcrdma_cm_qp_release);
	return posted;
}

static void rpcrdma_cm_rw_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct rpcrdma_cm_chunk *c = container_of(wc->wr_cqe, struct rpcrdma_cm_chunk, rw_cqe);

	c->rw_status = wc->status;
	complete(&c->rw_done);
}

/*
 * Moves the whole chunk from (RDMA Read) or to (@write: RDMA Write) the peer's
 * memory at @addr/@rkey, and waits for it; returns the number of WRs it took.
 * Not from a completion callback.
 * One chain at a time per QP (@rw_lock), never longer than the room the QP
 * keeps for it (@rw_wrs): a chain that did not fit would be posted in part,
 * and the posted part would go on touching the chunk after an error return.
 */
int rpcrdma_cm_chunk_rdma(struct rpcrdma_cm_chunk *c, u32 rkey, u64 addr, bool write);
int rpcrdma_cm_chunk_rdma(struct rpcrdma_cm_chunk *c, u32 rkey, u64 addr, bool write)
{
	enum dma_data_direction dir = write ? DMA_TO_DEVICE : DMA_FROM_DEVICE;
	struct rpcrdma_cm_qp *qp = c->qp;
	struct rdma_rw_ctx ctx;
	unsigned long flags;
	int ret, nwrs;

	if (c->mr)
		return -EBUSY;
	ret = rpcrdma_cm_qp_enter(qp);
	if (ret)
		return ret;
	mutex_lock(&qp->rw_lock);
	ret = rdma_rw_ctx_init(&ctx, qp->id->qp, qp->id->port_num, c->sgl, c->npages,
			       0, addr, rkey, dir);
	if (ret < 0)
		goto out;
	nwrs = ret;
	if (nwrs > qp->rw_wrs) {
		ret = -EMSGSIZE;
		goto destroy;
	}
	reinit_completion(&c->rw_done);
	c->rw_cqe.done = rpcrdma_cm_rw_done;
	spin_lock_irqsave(&qp->lock, flags);
	ret = qp->closed ? -ENOTCONN :
		rdma_rw_ctx_post(&ctx, qp->id->qp, qp->id->port_num, &c->rw_cqe, NULL);
	spin_unlock_irqrestore(&qp->lock, flags);
	if (!ret) {
		wait_for_completion(&c->rw_done);
		ret = c->rw_status == IB_WC_SUCCESS ? nwrs : -EIO;
	}
destroy:
	rdma_rw_ctx_destroy(&ctx, qp->id->qp, qp->id->port_num, c->sgl, c->npages, dir);
out:
	mutex_unlock(&qp->rw_lock);
	rpcrdma_cm_qp_leave(qp);
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

/* RDMA devices appearing ------------------------------------------------- */

/*
 * An IB client whose only job is to tell Rust that a device was added (so
 * listeners whose device went away can listen again). The news travels
 * through a work item, so Rust runs without the IB core's locks held.
 */
void rpcrdma_cm_device_added_rs(void *ctx);

static void *rpcrdma_cm_client_ctx;

static void rpcrdma_cm_client_workfn(struct work_struct *work)
{
	rpcrdma_cm_device_added_rs(rpcrdma_cm_client_ctx);
}

static DECLARE_WORK(rpcrdma_cm_client_work, rpcrdma_cm_client_workfn);

static int rpcrdma_cm_client_add(struct ib_device *device)
{
	schedule_work(&rpcrdma_cm_client_work);
	return 0;
}

static void rpcrdma_cm_client_remove(struct ib_device *device, void *client_data)
{
}

static struct ib_client rpcrdma_cm_client = {
	.name = "rpcrdma_cm",
	.add = rpcrdma_cm_client_add,
	.remove = rpcrdma_cm_client_remove,
};

/* @ctx is passed to rpcrdma_cm_device_added_rs() until unregistered. */
int rpcrdma_cm_client_register(void *ctx);
int rpcrdma_cm_client_register(void *ctx)
{
	rpcrdma_cm_client_ctx = ctx;
	return ib_register_client(&rpcrdma_cm_client);
}

/* After this returns, rpcrdma_cm_device_added_rs() is not running nor called. */
void rpcrdma_cm_client_unregister(void);
void rpcrdma_cm_client_unregister(void)
{
	ib_unregister_client(&rpcrdma_cm_client);
	cancel_work_sync(&rpcrdma_cm_client_work);
	rpcrdma_cm_client_ctx = NULL;
}
