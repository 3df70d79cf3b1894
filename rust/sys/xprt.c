// SPDX-License-Identifier: GPL-2.0
/*
 * rpcrdma_cm: the client-side RPC transport class NFS mounts use
 * (rust/sys/xprt.rs), registered as XPRT_TRANSPORT_RDMA with the netids
 * "rdma" and "rdma6", the way xprtrdma registers (net/sunrpc/xprtrdma/
 * transport.c). C holds what Rust cannot: the xprt_class and rpc_xprt_ops
 * tables, the struct rpc_xprt each transport embeds, its connect worker,
 * sunrpc's static inlines and the fields of struct rpc_rqst, and each RPC's
 * buffers (below). sunrpc's generic helpers do the rest: congestion control
 * (the server's credit grant is the window), slots, rpcbind. Transport logic is Rust's: connecting
 * (a fresh RFC 8797 negotiation each time), marshalling, chunks, Replies.
 *
 * Lifetime: setup allocates a struct rpcrdma_cm_xprt with its Rust context
 * @rs; destroy frees both, after Rust has let go of every pointer to the
 * xprt (rpcrdma_cm_xprt_free_rs() waits for Receive handlers using it).
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/mempool.h>
#include <linux/module.h>
#include <linux/seq_file.h>
#include <linux/workqueue.h>
#include <linux/sunrpc/addr.h>
#include <linux/sunrpc/bc_xprt.h>
#include <linux/sunrpc/clnt.h>
#include <linux/sunrpc/svc.h>
#include <linux/sunrpc/sched.h>
#include <linux/sunrpc/xprt.h>
#include <linux/sunrpc/xprtrdma.h>

#include "rpcrdma_cm_sys.h"

/* xprtrdma's other timeouts (xprt_rdma.h). */
#define RPCRDMA_CM_BIND_TO (60U * HZ)
#define RPCRDMA_CM_IDLE_DISC_TO (5U * 60 * HZ)
/* 1 MiB of data per RPC, as xprtrdma's RPCRDMA_MAX_DATA_SEGS pages. */
#define RPCRDMA_CM_MAX_PAYLOAD (1U << 20)

static struct rpcrdma_cm_xprt *to_x(struct rpc_xprt *xprt)
{
	return container_of(xprt, struct rpcrdma_cm_xprt, xprt);
}

static struct xprt_class rpcrdma_cm_xprt_class;
static const struct rpc_xprt_ops rpcrdma_cm_xprt_ops;

/* 60 seconds, no retries: RDMA has no keepalive, the timer reconnects. */
static const struct rpc_timeout rpcrdma_cm_xprt_timeout = {
	.to_initval = 60 * HZ,
	.to_maxval = 60 * HZ,
};

/* Connecting --------------------------------------------------------------- */

static void rpcrdma_cm_xprt_connect_worker(struct work_struct *work)
{
	struct rpcrdma_cm_xprt *x = container_of(work, struct rpcrdma_cm_xprt,
						 connect_worker.work);
	struct rpc_xprt *xprt = &x->xprt;
	unsigned int pflags = current->flags;
	int rc;

	if (atomic_read(&xprt->swapper))
		current->flags |= PF_MEMALLOC;
	rc = rpcrdma_cm_xprt_connect_rs(x->rs);
	xprt_clear_connecting(xprt);
	x->connect_failed = rc != 0;
	if (!rc) {
		xprt->connect_cookie++;
		xprt->stat.connect_count++;
		xprt->stat.connect_time += (long)jiffies - xprt->stat.connect_start;
		xprt_set_connected(xprt);
		rc = -EAGAIN;
	}
	xprt_unlock_connect(xprt, x);
	xprt_wake_pending_tasks(xprt, rc);
	current_restore_flags(pflags, PF_MEMALLOC);
}

static void rpcrdma_cm_xprt_connect(struct rpc_xprt *xprt, struct rpc_task *task)
{
	struct rpcrdma_cm_xprt *x = to_x(xprt);
	unsigned long delay = 0;

	WARN_ON_ONCE(!xprt_lock_connect(xprt, task, x));
	if (x->connect_failed) {
		delay = xprt_reconnect_delay(xprt);
		xprt_reconnect_backoff(xprt, RPCRDMA_CM_INIT_REEST_TO);
	}
	queue_delayed_work(system_long_wq, &x->connect_worker, delay);
}

/* Called with the transport locked (autoclose, or an RPC's send). */
static void rpcrdma_cm_xprt_close(struct rpc_xprt *xprt)
{
	WARN_ON_ONCE(!test_bit(XPRT_LOCKED, &xprt->state));
	/* Rust closes the connection and resets the credits. */
	rpcrdma_cm_xprt_close_rs(xprt, to_x(xprt)->rs);
	xprt->reestablish_timeout = 0;
	++xprt->connect_cookie;
	xprt_disconnect_done(xprt);
}

/* Requests ------------------------------------------------------------------ */

static int rpcrdma_cm_xprt_send_request(struct rpc_rqst *rqst)
{
	struct rpc_xprt *xprt = rqst->rq_xprt;
	/* The NFS callback service's Reply (its request has no buffer). */
	bool bc_reply = !rqst->rq_buffer, ddp = false;
	int rc;

	if (!xprt_connected(xprt))
		return -ENOTCONN;
	if (!xprt_request_get_cong(xprt, rqst))
		return -EBADSLT;
	if (!bc_reply) {
		/* No direct placement when the security flavour touches data. */
		ddp = !test_bit(RPCAUTH_AUTH_DATATOUCH, &rqst->rq_cred->cr_auth->au_flags);
		/*
		 * A retransmission on the connection that carried the call would
		 * take a second credit the server never granted: reconnect
		 * instead (as xprtrdma).
		 */
		if (rqst->rq_connect_cookie == xprt->connect_cookie)
			goto drop;
	}
	rqst->rq_xtime = ktime_get();
	rc = rpcrdma_cm_xprt_send_rs(to_x(xprt)->rs, rqst, ddp);
	if (rc == -ENOTCONN)
		goto drop;
	if (rc || bc_reply)
		return rc;
	rqst->rq_xmit_bytes_sent += rqst->rq_snd_buf.len;
	/* A call with no reply would hold its credit: reset the grant. */
	if (!rpc_reply_expected(rqst->rq_task))
		goto drop;
	return 0;
drop:
	rpcrdma_cm_xprt_close(xprt);
	return -ENOTCONN;
}

/*
 * An RPC's call and reply buffers, in one allocation: @rq_callsize octets for
 * the call, then @rq_rcvsize for the reply (sunrpc no longer exports
 * rpc_malloc(), whose behaviour this keeps). rpc_task_gfp_mask() keeps
 * rpciod's workers out of long reclaim (GFP_KERNEL | __GFP_NORETRY): on
 * -ENOMEM sunrpc delays the task and calls again. Buffers of at most RPCRDMA_CM_RPC_BUF_SMALL octets, which most calls
 * need, have a reserve, as rpc_malloc()'s rpc_buffer_mempool: an
 * asynchronous task (NFS writeback under memory pressure) takes one when the
 * allocator has nothing. sunrpc sets both sizes before .buf_alloc and never
 * changes them (call_allocate), so .buf_free finds the same size. Each
 * transport keeps up to RPCRDMA_CM_RPC_BUF_KEEP small buffers its calls
 * freed, for its next calls: a call takes no allocation for them (xprtrdma
 * keeps a send and a receive buffer with each request likewise).
 */
#define RPCRDMA_CM_RPC_BUF_SMALL 2048
#define RPCRDMA_CM_RPC_BUF_RESERVE 8
#define RPCRDMA_CM_RPC_BUF_KEEP RPCRDMA_CM_XPRT_PREALLOC

/* The reserve, while a class that allocates RPC buffers is registered. */
static DEFINE_MUTEX(rpcrdma_cm_rpc_bufs_lock);
static unsigned int rpcrdma_cm_rpc_bufs_users;
static mempool_t *rpcrdma_cm_rpc_bufs;

int rpcrdma_cm_rpc_bufs_get(void)
{
	int ret = 0;

	mutex_lock(&rpcrdma_cm_rpc_bufs_lock);
	if (!rpcrdma_cm_rpc_bufs_users) {
		rpcrdma_cm_rpc_bufs = mempool_create_kmalloc_pool(RPCRDMA_CM_RPC_BUF_RESERVE,
								   RPCRDMA_CM_RPC_BUF_SMALL);
		if (!rpcrdma_cm_rpc_bufs)
			ret = -ENOMEM;
	}
	if (!ret)
		rpcrdma_cm_rpc_bufs_users++;
	mutex_unlock(&rpcrdma_cm_rpc_bufs_lock);
	return ret;
}

void rpcrdma_cm_rpc_bufs_put(void)
{
	mutex_lock(&rpcrdma_cm_rpc_bufs_lock);
	if (!WARN_ON(!rpcrdma_cm_rpc_bufs_users) && !--rpcrdma_cm_rpc_bufs_users) {
		mempool_destroy(rpcrdma_cm_rpc_bufs);
		rpcrdma_cm_rpc_bufs = NULL;
	}
	mutex_unlock(&rpcrdma_cm_rpc_bufs_lock);
}

static size_t rpcrdma_cm_rpc_buf_size(const struct rpc_rqst *rqst)
{
	return rqst->rq_callsize + rqst->rq_rcvsize;
}

/* A small buffer @x kept, if any. A free buffer holds its own list link. */
static void *rpcrdma_cm_rpc_buf_kept(struct rpcrdma_cm_xprt *x)
{
	struct list_head *b = NULL;

	spin_lock(&x->buf_lock);
	if (!list_empty(&x->buf_free)) {
		b = x->buf_free.next;
		list_del(b);
		x->buf_free_count--;
	}
	spin_unlock(&x->buf_lock);
	return b;
}

/*
 * Keeps the small buffer @buf for @x's next call, or gives it back: to the
 * reserve first, if it is short (as rpc_free()), so that a buffer taken
 * from it under pressure goes back to it, not onto one transport's list.
 */
static void rpcrdma_cm_rpc_buf_keep(struct rpcrdma_cm_xprt *x, void *buf)
{
	struct list_head *b = buf;
	bool kept;

	if (READ_ONCE(rpcrdma_cm_rpc_bufs->curr_nr) < rpcrdma_cm_rpc_bufs->min_nr) {
		mempool_free(buf, rpcrdma_cm_rpc_bufs);
		return;
	}
	spin_lock(&x->buf_lock);
	kept = x->buf_free_count < RPCRDMA_CM_RPC_BUF_KEEP;
	if (kept) {
		list_add(b, &x->buf_free);
		x->buf_free_count++;
	}
	spin_unlock(&x->buf_lock);
	if (!kept)
		mempool_free(buf, rpcrdma_cm_rpc_bufs);
}

/* The transport goes: the buffers it kept go back. */
static void rpcrdma_cm_rpc_bufs_drop(struct rpcrdma_cm_xprt *x)
{
	struct list_head *b, *next;

	list_for_each_safe(b, next, &x->buf_free)
		mempool_free(b, rpcrdma_cm_rpc_bufs);
	INIT_LIST_HEAD(&x->buf_free);
	x->buf_free_count = 0;
}

int rpcrdma_cm_rpc_buf_alloc(struct rpc_task *task)
{
	struct rpc_rqst *rqst = task->tk_rqstp;
	size_t size = rpcrdma_cm_rpc_buf_size(rqst);
	gfp_t gfp = rpc_task_gfp_mask() | __GFP_NOWARN;
	char *buf;

	if (size <= RPCRDMA_CM_RPC_BUF_SMALL) {
		buf = rpcrdma_cm_rpc_buf_kept(to_x(rqst->rq_xprt));
		if (!buf)
			buf = kmalloc(RPCRDMA_CM_RPC_BUF_SMALL, gfp);
		/* The reserve, only when all else failed. */
		if (!buf && RPC_IS_ASYNC(task))
			buf = mempool_alloc(rpcrdma_cm_rpc_bufs, GFP_NOWAIT);
	} else {
		buf = kmalloc(size, gfp);
	}
	if (!buf)
		return -ENOMEM;
	rqst->rq_buffer = buf;
	rqst->rq_rbuffer = buf + rqst->rq_callsize;
	return 0;
}

void rpcrdma_cm_rpc_buf_free(struct rpc_task *task)
{
	struct rpc_rqst *rqst = task->tk_rqstp;

	if (rpcrdma_cm_rpc_buf_size(rqst) <= RPCRDMA_CM_RPC_BUF_SMALL)
		rpcrdma_cm_rpc_buf_keep(to_x(rqst->rq_xprt), rqst->rq_buffer);
	else
		kfree(rqst->rq_buffer);
}

static void rpcrdma_cm_xprt_buf_free(struct rpc_task *task)
{
	struct rpc_rqst *rqst = task->tk_rqstp;

	/* Chunks of a call whose Reply never came are released now. */
	rpcrdma_cm_xprt_buf_free_rs(to_x(rqst->rq_xprt)->rs, be32_to_cpu(rqst->rq_xid));
	rpcrdma_cm_rpc_buf_free(task);
}

void rpcrdma_cm_xprt_complete(struct rpc_xprt *xprt, struct rpc_rqst *rqst, u32 len, int status)
{
	spin_lock(&xprt->queue_lock);
	if (status < 0) {
		/* A Reply we cannot use: the call fails with @status. */
		rqst->rq_task->tk_status = status;
		len = 0;
	}
	xprt_complete_rqst(rqst->rq_task, len);
	xprt_unpin_rqst(rqst);
	spin_unlock(&xprt->queue_lock);
}

/* The NFSv4.1 backchannel ---------------------------------------------------- */

/*
 * Server-to-client Calls (CB_RECALL, CB_SEQUENCE...) arrive on the forward
 * connection among the Replies; Rust hands each to rpcrdma_cm_xprt_bc_call(),
 * which copies it into a request of the backchannel's own and queues that
 * for the NFS client's callback service (xprt->bc_serv), as xprtrdma's
 * backchannel.c does. The callback's Reply leaves through send_request.
 * Requests are made on demand up to RPCRDMA_CM_BC_SLOTS and reused.
 */
struct rpcrdma_cm_bc_rqst {
	struct rpc_rqst rqst;
	void *call;	/* a page: the Call as received */
	void *reply;	/* a page: where the callback service encodes its Reply */
};

static int rpcrdma_cm_xprt_bc_setup(struct rpc_xprt *xprt, unsigned int reqs)
{
	return 0;
}

static size_t rpcrdma_cm_xprt_bc_maxpayload(struct rpc_xprt *xprt)
{
	return rpcrdma_cm_xprt_bc_maxpayload_rs(to_x(xprt)->rs);
}

static unsigned int rpcrdma_cm_xprt_bc_num_slots(struct rpc_xprt *xprt)
{
	return RPCRDMA_CM_BC_SLOTS;
}

/* The callback service is done with @rqst: it is free for the next Call. */
static void rpcrdma_cm_xprt_bc_free_rqst(struct rpc_rqst *rqst)
{
	struct rpc_xprt *xprt = rqst->rq_xprt;

	spin_lock(&xprt->bc_pa_lock);
	list_add_tail(&rqst->rq_bc_pa_list, &xprt->bc_pa_list);
	spin_unlock(&xprt->bc_pa_lock);
	xprt_put(xprt);
}

static void rpcrdma_cm_xprt_bc_destroy(struct rpc_xprt *xprt, unsigned int reqs)
{
	struct rpcrdma_cm_bc_rqst *b, *tmp;
	LIST_HEAD(free);

	spin_lock(&xprt->bc_pa_lock);
	list_splice_init(&xprt->bc_pa_list, &free);
	list_for_each_entry(b, &free, rqst.rq_bc_pa_list)
		xprt->bc_alloc_count--;
	spin_unlock(&xprt->bc_pa_lock);
	list_for_each_entry_safe(b, tmp, &free, rqst.rq_bc_pa_list) {
		free_page((unsigned long)b->call);
		free_page((unsigned long)b->reply);
		kfree(b);
	}
}

static void rpcrdma_cm_xprt_put_worker(struct work_struct *work)
{
	xprt_put(&container_of(work, struct rpcrdma_cm_xprt, put_work)->xprt);
}

/*
 * Drops the reference rpcrdma_cm_xprt_bc_call() took, in a Receive handler.
 * Never the last one there: xprt_destroy() waits for XPRT_LOCKED, which a
 * close may hold while it tears the connection down, draining this very
 * handler. The last one is dropped from a work item instead, which destroy
 * waits for.
 */
static void rpcrdma_cm_xprt_bc_put(struct rpc_xprt *xprt)
{
	if (!refcount_dec_not_one(&xprt->kref.refcount))
		queue_work(system_wq, &to_x(xprt)->put_work);
}

int rpcrdma_cm_xprt_bc_call(struct rpc_xprt *xprt, const u8 *msg, u32 len)
{
	struct rpcrdma_cm_bc_rqst *b;
	struct rpc_rqst *rqst;
	struct xdr_buf *buf;

	/* A hint only: xprt_enqueue_bc_request() looks again under bc_pa_lock. */
	if (!READ_ONCE(xprt->bc_serv) || len < 8 || len > PAGE_SIZE)
		return -EINVAL;
	spin_lock(&xprt->bc_pa_lock);
	rqst = list_first_entry_or_null(&xprt->bc_pa_list, struct rpc_rqst, rq_bc_pa_list);
	if (rqst)
		list_del(&rqst->rq_bc_pa_list);
	else if (xprt->bc_alloc_count < RPCRDMA_CM_BC_SLOTS)
		xprt->bc_alloc_count++;	/* taken now, made below */
	else
		rqst = ERR_PTR(-ENOBUFS);
	spin_unlock(&xprt->bc_pa_lock);
	if (IS_ERR(rqst))
		return PTR_ERR(rqst);
	if (!rqst) {
		b = kzalloc(sizeof(*b), GFP_NOFS);
		if (b) {
			b->call = (void *)__get_free_page(GFP_NOFS);
			b->reply = (void *)__get_free_page(GFP_NOFS);
		}
		if (!b || !b->call || !b->reply) {
			if (b) {
				free_page((unsigned long)b->call);
				free_page((unsigned long)b->reply);
			}
			kfree(b);
			spin_lock(&xprt->bc_pa_lock);
			xprt->bc_alloc_count--;
			spin_unlock(&xprt->bc_pa_lock);
			return -ENOBUFS;
		}
		rqst = &b->rqst;
		rqst->rq_xprt = xprt;
		__set_bit(RPC_BC_PA_IN_USE, &rqst->rq_bc_pa_state);
	}
	/* Held across the enqueue; none left: the transport is going away. */
	if (!xprt_get(xprt)) {
		spin_lock(&xprt->bc_pa_lock);
		list_add_tail(&rqst->rq_bc_pa_list, &xprt->bc_pa_list);
		spin_unlock(&xprt->bc_pa_lock);
		return -ENOTCONN;
	}
	b = container_of(rqst, struct rpcrdma_cm_bc_rqst, rqst);
	memcpy(b->call, msg, len);
	rqst->rq_reply_bytes_recvd = 0;
	rqst->rq_xid = *(__be32 *)b->call;
	rqst->rq_private_buf.len = len;
	buf = &rqst->rq_rcv_buf;
	memset(buf, 0, sizeof(*buf));
	buf->head[0].iov_base = b->call;
	buf->head[0].iov_len = len;
	buf->len = len;
	/* svc_process_bc() encodes the Reply there (rq_res is this buffer). */
	xdr_buf_init(&rqst->rq_snd_buf, b->reply, PAGE_SIZE);
	/*
	 * To the callback service under bc_pa_lock, which its shutdown takes
	 * to clear bc_serv; the request holds its own transport reference,
	 * dropped by bc_free_rqst (at once when the service is gone).
	 */
	xprt_enqueue_bc_request(rqst);
	rpcrdma_cm_xprt_bc_put(xprt);
	return 0;
}

static int rpcrdma_cm_xprt_enable_swap(struct rpc_xprt *xprt)
{
	return 0;
}

static void rpcrdma_cm_xprt_disable_swap(struct rpc_xprt *xprt)
{
}

static void rpcrdma_cm_xprt_destroy(struct rpc_xprt *xprt)
{
	struct rpcrdma_cm_xprt *x = to_x(xprt);

	cancel_delayed_work_sync(&x->connect_worker);
	/* A last reference dropped by put_work: its worker returns first. */
	flush_work(&x->put_work);
	rpcrdma_cm_xprt_free_rs(x->rs);
	rpcrdma_cm_xprt_bc_destroy(xprt, 0);
	rpcrdma_cm_xprt_free(x);
}

static const struct rpc_xprt_ops rpcrdma_cm_xprt_ops = {
	.reserve_xprt = xprt_reserve_xprt_cong,
	.release_xprt = xprt_release_xprt_cong,
	.alloc_slot = xprt_alloc_slot,
	.free_slot = xprt_free_slot,
	.release_request = xprt_release_rqst_cong,
	.wait_for_reply_request = xprt_wait_for_reply_request_def,
	.timer = rpcrdma_cm_xprt_timer_rs,
	.rpcbind = rpcb_getport_async,
	.set_port = rpcrdma_cm_xprt_set_port_rs,
	.connect = rpcrdma_cm_xprt_connect,
	.buf_alloc = rpcrdma_cm_rpc_buf_alloc,
	.buf_free = rpcrdma_cm_xprt_buf_free,
	.send_request = rpcrdma_cm_xprt_send_request,
	.close = rpcrdma_cm_xprt_close,
	.destroy = rpcrdma_cm_xprt_destroy,
	.set_connect_timeout = rpcrdma_cm_xprt_set_connect_timeout_rs,
	.print_stats = rpcrdma_cm_xprt_print_stats_rs,
	.enable_swap = rpcrdma_cm_xprt_enable_swap,
	.disable_swap = rpcrdma_cm_xprt_disable_swap,
	.bc_setup = rpcrdma_cm_xprt_bc_setup,
	.bc_maxpayload = rpcrdma_cm_xprt_bc_maxpayload,
	.bc_num_slots = rpcrdma_cm_xprt_bc_num_slots,
	.bc_free_rqst = rpcrdma_cm_xprt_bc_free_rqst,
	.bc_destroy = rpcrdma_cm_xprt_bc_destroy,
};

/*
 * A transport of ours for @args (a mount's, or nfsd's backchannel: @class),
 * set up as xprtrdma sets one up, with @slots requests at most, @prealloc of
 * them allocated now and kept (sunrpc allocates the others per RPC), and a
 * module reference that rpcrdma_cm_xprt_free() drops.
 */
struct rpcrdma_cm_xprt *rpcrdma_cm_xprt_alloc(struct xprt_create *args, struct xprt_class *class,
					      unsigned int slots, unsigned int prealloc)
{
	struct rpcrdma_cm_xprt *x;
	struct rpc_xprt *xprt;

	if (args->addrlen > sizeof(xprt->addr))
		return ERR_PTR(-EBADF);
	if (!try_module_get(THIS_MODULE))
		return ERR_PTR(-EIO);
	xprt = xprt_alloc(args->net, sizeof(*x), prealloc, slots);
	if (!xprt) {
		module_put(THIS_MODULE);
		return ERR_PTR(-ENOMEM);
	}
	x = to_x(xprt);
	spin_lock_init(&x->buf_lock);
	INIT_LIST_HEAD(&x->buf_free);
	xprt->timeout = &rpcrdma_cm_xprt_timeout;
	xprt->connect_timeout = xprt->timeout->to_initval;
	xprt->max_reconnect_timeout = xprt->timeout->to_maxval;
	xprt->bind_timeout = RPCRDMA_CM_BIND_TO;
	xprt->reestablish_timeout = RPCRDMA_CM_INIT_REEST_TO;
	xprt->idle_timeout = RPCRDMA_CM_IDLE_DISC_TO;
	xprt->resvport = 0;
	xprt->ops = &rpcrdma_cm_xprt_ops;
	/* The TCP protocol number, as xprtrdma: side protocols peek at it. */
	xprt->prot = IPPROTO_TCP;
	xprt->xprt_class = class;
	xprt->addrlen = args->addrlen;
	memcpy(&xprt->addr, args->dstaddr, xprt->addrlen);
	if (rpc_get_port(args->dstaddr))
		xprt_set_bound(xprt);
	rpcrdma_cm_xprt_format_rs(xprt);
	xprt->max_payload = RPCRDMA_CM_MAX_PAYLOAD;
	INIT_DELAYED_WORK(&x->connect_worker, rpcrdma_cm_xprt_connect_worker);
	INIT_WORK(&x->put_work, rpcrdma_cm_xprt_put_worker);
	return x;
}

void rpcrdma_cm_xprt_free(struct rpcrdma_cm_xprt *x)
{
	rpcrdma_cm_xprt_unformat_rs(&x->xprt);
	rpcrdma_cm_rpc_bufs_drop(x);
	xprt_free(&x->xprt);
	/* Taken in rpcrdma_cm_xprt_alloc(): this function is module code. */
	module_put(THIS_MODULE);
}

static struct rpc_xprt *rpcrdma_cm_xprt_setup(struct xprt_create *args)
{
	struct rpcrdma_cm_xprt *x = rpcrdma_cm_xprt_alloc(args, &rpcrdma_cm_xprt_class,
							  RPCRDMA_CM_XPRT_SLOTS,
							  RPCRDMA_CM_XPRT_PREALLOC);
	int rc;

	if (IS_ERR(x))
		return ERR_CAST(x);
	rc = rpcrdma_cm_xprt_create_rs(&x->xprt, &x->rs);
	if (rc) {
		rpcrdma_cm_xprt_free(x);
		return ERR_PTR(rc);
	}
	return &x->xprt;
}

static struct xprt_class rpcrdma_cm_xprt_class = {
	.list = LIST_HEAD_INIT(rpcrdma_cm_xprt_class.list),
	.name = "rdma",
	.owner = THIS_MODULE,
	.ident = XPRT_TRANSPORT_RDMA,
	.setup = rpcrdma_cm_xprt_setup,
	.netid = { RPCBIND_NETID_RDMA, RPCBIND_NETID_RDMA6, "" },
};

int rpcrdma_cm_xprt_register(void)
{
	int ret = rpcrdma_cm_rpc_bufs_get();

	if (ret)
		return ret;
	ret = xprt_register_transport(&rpcrdma_cm_xprt_class);
	if (ret)
		rpcrdma_cm_rpc_bufs_put();
	return ret;
}

void rpcrdma_cm_xprt_unregister(void)
{
	xprt_unregister_transport(&rpcrdma_cm_xprt_class);
	rpcrdma_cm_rpc_bufs_put();
}
