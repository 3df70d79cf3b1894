// SPDX-License-Identifier: GPL-2.0
/*
 * rpcrdma_cm: the client-side RPC transport class NFS mounts use
 * (rust/sys/xprt.rs), registered as XPRT_TRANSPORT_RDMA with the netids
 * "rdma" and "rdma6", the way xprtrdma registers (net/sunrpc/xprtrdma/
 * transport.c). C holds what Rust cannot: the xprt_class and rpc_xprt_ops
 * tables, the struct rpc_xprt each transport embeds, its connect worker,
 * sunrpc's static inlines and the fields of struct rpc_rqst. sunrpc's generic
 * helpers do the rest: congestion control (the server's credit grant is the
 * window), slots, buffers, rpcbind. Transport logic is Rust's: connecting
 * (a fresh RFC 8797 negotiation each time), marshalling, chunks, Replies.
 *
 * Lifetime: setup allocates a struct rpcrdma_cm_xprt with its Rust context
 * @rs; destroy frees both, after Rust has let go of every pointer to the
 * xprt (rpcrdma_cm_xprt_free_rs() waits for Receive handlers using it).
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

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

/* xprtrdma's timeouts (xprt_rdma.h), so a mount behaves the same on either. */
#define RPCRDMA_CM_BIND_TO (60U * HZ)
#define RPCRDMA_CM_INIT_REEST_TO (5U * HZ)
#define RPCRDMA_CM_IDLE_DISC_TO (5U * 60 * HZ)
/* 1 MiB of data per RPC, as xprtrdma's RPCRDMA_MAX_DATA_SEGS pages. */
#define RPCRDMA_CM_MAX_PAYLOAD (1U << 20)

struct rpcrdma_cm_xprt {
	struct rpc_xprt xprt;
	struct delayed_work connect_worker;
	struct rpc_timeout timeout;
	/* The last connect attempt failed: the next one backs off. */
	bool connect_failed;
	void *rs;
};

static struct rpcrdma_cm_xprt *to_x(struct rpc_xprt *xprt)
{
	return container_of(xprt, struct rpcrdma_cm_xprt, xprt);
}

static struct xprt_class rpcrdma_cm_xprt_class;

/* 60 seconds, no retries: RDMA has no keepalive, the timer reconnects. */
static const struct rpc_timeout rpcrdma_cm_xprt_timeout = {
	.to_initval = 60 * HZ,
	.to_maxval = 60 * HZ,
};

/* Addresses, formatted as xprtrdma does (mountstats and rpcbind read them). */
static void rpcrdma_cm_xprt_format_addresses(struct rpc_xprt *xprt)
{
	struct sockaddr *sap = (struct sockaddr *)&xprt->addr;
	char buf[128];

	if (sap->sa_family == AF_INET6) {
		snprintf(buf, sizeof(buf), "%pi6", &((struct sockaddr_in6 *)sap)->sin6_addr);
		xprt->address_strings[RPC_DISPLAY_NETID] = RPCBIND_NETID_RDMA6;
	} else {
		snprintf(buf, sizeof(buf), "%08x",
			 ntohl(((struct sockaddr_in *)sap)->sin_addr.s_addr));
		xprt->address_strings[RPC_DISPLAY_NETID] = RPCBIND_NETID_RDMA;
	}
	xprt->address_strings[RPC_DISPLAY_HEX_ADDR] = kstrdup(buf, GFP_KERNEL);
	rpc_ntop(sap, buf, sizeof(buf));
	xprt->address_strings[RPC_DISPLAY_ADDR] = kstrdup(buf, GFP_KERNEL);
	snprintf(buf, sizeof(buf), "%u", rpc_get_port(sap));
	xprt->address_strings[RPC_DISPLAY_PORT] = kstrdup(buf, GFP_KERNEL);
	snprintf(buf, sizeof(buf), "%4hx", rpc_get_port(sap));
	xprt->address_strings[RPC_DISPLAY_HEX_PORT] = kstrdup(buf, GFP_KERNEL);
	xprt->address_strings[RPC_DISPLAY_PROTO] = "rdma";
}

static void rpcrdma_cm_xprt_free_addresses(struct rpc_xprt *xprt)
{
	int i;

	for (i = 0; i < RPC_DISPLAY_MAX; i++)
		if (i != RPC_DISPLAY_PROTO && i != RPC_DISPLAY_NETID)
			kfree(xprt->address_strings[i]);
}

/* Connecting --------------------------------------------------------------- */

/* A new connection starts with one credit (RFC 8166, Section 3.3.3). */
static void rpcrdma_cm_xprt_reset_cwnd(struct rpc_xprt *xprt)
{
	spin_lock(&xprt->transport_lock);
	xprt->cong = 0;
	xprt->cwnd = RPC_CWNDSHIFT;
	spin_unlock(&xprt->transport_lock);
}

static void rpcrdma_cm_xprt_connect_worker(struct work_struct *work)
{
	struct rpcrdma_cm_xprt *x = container_of(work, struct rpcrdma_cm_xprt,
						 connect_worker.work);
	struct rpc_xprt *xprt = &x->xprt;
	unsigned int pflags = current->flags;
	int rc;

	if (atomic_read(&xprt->swapper))
		current->flags |= PF_MEMALLOC;
	rpcrdma_cm_xprt_reset_cwnd(xprt);
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

static void rpcrdma_cm_xprt_set_connect_timeout(struct rpc_xprt *xprt,
						unsigned long connect_timeout,
						unsigned long reconnect_timeout)
{
	struct rpcrdma_cm_xprt *x = to_x(xprt);

	spin_lock(&xprt->transport_lock);
	if (connect_timeout < xprt->connect_timeout) {
		struct rpc_timeout to = *xprt->timeout;
		unsigned long initval = max_t(unsigned long, connect_timeout,
					      RPCRDMA_CM_INIT_REEST_TO << 1);

		to.to_initval = initval;
		to.to_maxval = initval;
		x->timeout = to;
		xprt->timeout = &x->timeout;
		xprt->connect_timeout = connect_timeout;
	}
	if (reconnect_timeout < xprt->max_reconnect_timeout)
		xprt->max_reconnect_timeout = reconnect_timeout;
	spin_unlock(&xprt->transport_lock);
}

/* Called with the transport locked (autoclose, or an RPC's send). */
static void rpcrdma_cm_xprt_close(struct rpc_xprt *xprt)
{
	rpcrdma_cm_xprt_close_rs(to_x(xprt)->rs);
	xprt->reestablish_timeout = 0;
	++xprt->connect_cookie;
	xprt_disconnect_done(xprt);
}

/* An RPC timed out on a connected transport: RDMA has no keepalive, so
 * reconnect and retransmit (as xprtrdma). */
static void rpcrdma_cm_xprt_timer(struct rpc_xprt *xprt, struct rpc_task *task)
{
	xprt_force_disconnect(xprt);
}

static void rpcrdma_cm_xprt_set_port(struct rpc_xprt *xprt, u16 port)
{
	struct sockaddr *sap = (struct sockaddr *)&xprt->addr;
	char buf[8];

	rpc_set_port(sap, port);
	kfree(xprt->address_strings[RPC_DISPLAY_PORT]);
	snprintf(buf, sizeof(buf), "%u", port);
	xprt->address_strings[RPC_DISPLAY_PORT] = kstrdup(buf, GFP_KERNEL);
	kfree(xprt->address_strings[RPC_DISPLAY_HEX_PORT]);
	snprintf(buf, sizeof(buf), "%4hx", port);
	xprt->address_strings[RPC_DISPLAY_HEX_PORT] = kstrdup(buf, GFP_KERNEL);
}

/* Requests ------------------------------------------------------------------ */

static int rpcrdma_cm_xprt_fill_pages(struct xdr_buf *buf)
{
	struct page **pages = buf->pages + (buf->page_base >> PAGE_SHIFT);
	u32 i, n = PAGE_ALIGN(offset_in_page(buf->page_base) + buf->page_len) >> PAGE_SHIFT;

	for (i = 0; i < n; i++)
		if (!pages[i] && !(pages[i] = alloc_page(GFP_NOWAIT | __GFP_NOWARN)))
			return -ENOBUFS;
	return 0;
}

static int rpcrdma_cm_xprt_send_request(struct rpc_rqst *rqst)
{
	struct rpc_xprt *xprt = rqst->rq_xprt;
	struct rpcrdma_cm_rqst rq = {
		.xid = be32_to_cpu(rqst->rq_xid),
		.snd = &rqst->rq_snd_buf,
		.rcvsize = rqst->rq_rcv_buf.buflen,
		.rcv = &rqst->rq_rcv_buf,
		/* The NFS callback service's Reply (its request has no buffer). */
		.bc_reply = !rqst->rq_buffer,
	};
	int rc;

	if (!xprt_connected(xprt))
		return -ENOTCONN;
	/* No direct placement when the security flavour touches the data. */
	if (!rq.bc_reply)
		rq.ddp = !test_bit(RPCAUTH_AUTH_DATATOUCH, &rqst->rq_cred->cr_auth->au_flags);
	/* NFSv3 GETACL's receive pages come on demand, as in xprtrdma. */
	if (rqst->rq_rcv_buf.flags & XDRBUF_SPARSE_PAGES &&
	    rpcrdma_cm_xprt_fill_pages(&rqst->rq_rcv_buf))
		return -ENOBUFS;
	if (!xprt_request_get_cong(xprt, rqst))
		return -EBADSLT;
	if (rq.bc_reply) {
		rc = rpcrdma_cm_xprt_send_rs(to_x(xprt)->rs, &rq);
		if (rc == -ENOTCONN)
			goto drop;
		return rc;
	}
	/*
	 * A retransmission on the connection that carried the call would
	 * take a second credit the server never granted: reconnect instead
	 * (as xprtrdma).
	 */
	if (rqst->rq_connect_cookie == xprt->connect_cookie)
		goto drop;
	rqst->rq_xtime = ktime_get();
	rc = rpcrdma_cm_xprt_send_rs(to_x(xprt)->rs, &rq);
	if (rc == -ENOTCONN)
		goto drop;
	if (rc)
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

static void rpcrdma_cm_xprt_buf_free(struct rpc_task *task)
{
	struct rpc_rqst *rqst = task->tk_rqstp;

	/* Chunks of a call whose Reply never came are released now. */
	rpcrdma_cm_xprt_buf_free_rs(to_x(rqst->rq_xprt)->rs, be32_to_cpu(rqst->rq_xid));
	rpc_free(task);
}

struct rpc_rqst *rpcrdma_cm_xprt_lookup(struct rpcrdma_cm_xprt *x, u32 xid)
{
	struct rpc_xprt *xprt = &x->xprt;
	struct rpc_rqst *rqst;

	/* Data arrived: the next reconnect need not wait. */
	if (xprt->reestablish_timeout)
		xprt->reestablish_timeout = 0;
	spin_lock(&xprt->queue_lock);
	rqst = xprt_lookup_rqst(xprt, cpu_to_be32(xid));
	if (rqst)
		xprt_pin_rqst(rqst);
	spin_unlock(&xprt->queue_lock);
	return rqst;
}

struct xdr_buf *rpcrdma_cm_xprt_rcv_buf(struct rpc_rqst *rqst)
{
	return &rqst->rq_private_buf;
}

void rpcrdma_cm_xprt_trim_head(struct rpc_rqst *rqst, u32 len)
{
	u32 delta;

	if (len >= rqst->rq_rcv_buf.head[0].iov_len)
		return;
	delta = rqst->rq_rcv_buf.head[0].iov_len - len;
	rqst->rq_rcv_buf.head[0].iov_len = len;
	rqst->rq_private_buf.head[0].iov_len = len;
	rqst->rq_rcv_buf.buflen -= delta;
	rqst->rq_private_buf.buflen -= delta;
}

void rpcrdma_cm_xprt_complete(struct rpcrdma_cm_xprt *x, struct rpc_rqst *rqst, u32 len,
			      int status)
{
	struct rpc_xprt *xprt = &x->xprt;

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

void rpcrdma_cm_xprt_set_credits(struct rpcrdma_cm_xprt *x, u32 credits)
{
	struct rpc_xprt *xprt = &x->xprt;

	spin_lock(&xprt->transport_lock);
	xprt->cwnd = credits << RPC_CWNDSHIFT;
	spin_unlock(&xprt->transport_lock);
}

void rpcrdma_cm_xprt_force_disconnect(struct rpcrdma_cm_xprt *x)
{
	xprt_force_disconnect(&x->xprt);
}

struct net *rpcrdma_cm_xprt_net(struct rpcrdma_cm_xprt *x)
{
	return x->xprt.xprt_net;
}

const struct sockaddr *rpcrdma_cm_xprt_addr(struct rpcrdma_cm_xprt *x)
{
	return (const struct sockaddr *)&x->xprt.addr;
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
	spin_unlock(&xprt->bc_pa_lock);
	list_for_each_entry_safe(b, tmp, &free, rqst.rq_bc_pa_list) {
		free_page((unsigned long)b->call);
		free_page((unsigned long)b->reply);
		kfree(b);
		xprt->bc_alloc_count--;
	}
}

int rpcrdma_cm_xprt_bc_call(struct rpcrdma_cm_xprt *x, const u8 *msg, u32 len)
{
	struct rpc_xprt *xprt = &x->xprt;
	struct svc_serv *serv = xprt->bc_serv;
	struct rpcrdma_cm_bc_rqst *b;
	struct rpc_rqst *rqst;
	struct xdr_buf *buf;

	if (!serv || len < 8 || len > PAGE_SIZE)
		return -EINVAL;
	spin_lock(&xprt->bc_pa_lock);
	rqst = list_first_entry_or_null(&xprt->bc_pa_list, struct rpc_rqst, rq_bc_pa_list);
	if (rqst)
		list_del(&rqst->rq_bc_pa_list);
	spin_unlock(&xprt->bc_pa_lock);
	if (!rqst) {
		/* Only the Receive work (one at a time) makes requests. */
		if (xprt->bc_alloc_count >= RPCRDMA_CM_BC_SLOTS)
			return -ENOBUFS;
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
			return -ENOBUFS;
		}
		rqst = &b->rqst;
		rqst->rq_xprt = xprt;
		__set_bit(RPC_BC_PA_IN_USE, &rqst->rq_bc_pa_state);
		xprt->bc_alloc_count++;
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
	xdr_buf_init(&rqst->rq_snd_buf, b->reply, PAGE_SIZE);
	/* Dropped by bc_free_rqst. */
	xprt_get(xprt);
	lwq_enqueue(&rqst->rq_bc_list, &serv->sv_cb_list);
	svc_pool_wake_idle_thread(&serv->sv_pools[0]);
	return 0;
}

/* mountstats: xprtrdma's "xprt: rdma" line, column for column. */
static void rpcrdma_cm_xprt_print_stats(struct rpc_xprt *xprt, struct seq_file *seq)
{
	struct rpcrdma_cm_xprt_stats st = {};
	long idle_time = 0;

	rpcrdma_cm_xprt_stats_rs(to_x(xprt)->rs, &st);
	if (xprt_connected(xprt))
		idle_time = (long)(jiffies - xprt->last_used) / HZ;
	seq_puts(seq, "\txprt:\trdma ");
	seq_printf(seq, "%u %lu %lu %lu %ld %lu %lu %lu %llu %llu ", 0,
		   xprt->stat.bind_count, xprt->stat.connect_count,
		   xprt->stat.connect_time / HZ, idle_time, xprt->stat.sends,
		   xprt->stat.recvs, xprt->stat.bad_xids, xprt->stat.req_u,
		   xprt->stat.bklog_u);
	seq_printf(seq, "%llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu ",
		   st.read_chunk_count, st.write_chunk_count, st.reply_chunk_count,
		   st.total_rdma_request, st.total_rdma_reply, st.pullup_copy_count,
		   st.fixup_copy_count, st.hardway_register_count, st.failed_marshal_count,
		   st.bad_reply_count, st.nomsg_call_count);
	seq_printf(seq, "%llu %llu %llu %llu %llu %lu\n", st.mrs_recycled, st.mrs_orphaned,
		   st.mrs_allocated, st.local_inv_needed, st.empty_sendctx_q, 0LU);
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
	rpcrdma_cm_xprt_free_rs(x->rs);
	rpcrdma_cm_xprt_bc_destroy(xprt, 0);
	rpcrdma_cm_xprt_free_addresses(xprt);
	xprt_free(xprt);
	/* Taken in setup. */
	module_put(THIS_MODULE);
}

static const struct rpc_xprt_ops rpcrdma_cm_xprt_ops = {
	.reserve_xprt = xprt_reserve_xprt_cong,
	.release_xprt = xprt_release_xprt_cong,
	.alloc_slot = xprt_alloc_slot,
	.free_slot = xprt_free_slot,
	.release_request = xprt_release_rqst_cong,
	.wait_for_reply_request = xprt_wait_for_reply_request_def,
	.timer = rpcrdma_cm_xprt_timer,
	.rpcbind = rpcb_getport_async,
	.set_port = rpcrdma_cm_xprt_set_port,
	.connect = rpcrdma_cm_xprt_connect,
	.buf_alloc = rpc_malloc,
	.buf_free = rpcrdma_cm_xprt_buf_free,
	.send_request = rpcrdma_cm_xprt_send_request,
	.close = rpcrdma_cm_xprt_close,
	.destroy = rpcrdma_cm_xprt_destroy,
	.set_connect_timeout = rpcrdma_cm_xprt_set_connect_timeout,
	.print_stats = rpcrdma_cm_xprt_print_stats,
	.enable_swap = rpcrdma_cm_xprt_enable_swap,
	.disable_swap = rpcrdma_cm_xprt_disable_swap,
	.bc_setup = rpcrdma_cm_xprt_bc_setup,
	.bc_maxpayload = rpcrdma_cm_xprt_bc_maxpayload,
	.bc_num_slots = rpcrdma_cm_xprt_bc_num_slots,
	.bc_free_rqst = rpcrdma_cm_xprt_bc_free_rqst,
	.bc_destroy = rpcrdma_cm_xprt_bc_destroy,
};

static struct rpc_xprt *rpcrdma_cm_xprt_setup(struct xprt_create *args)
{
	struct rpcrdma_cm_xprt *x;
	struct rpc_xprt *xprt;
	int rc;

	if (args->addrlen > sizeof(xprt->addr))
		return ERR_PTR(-EBADF);
	if (!try_module_get(THIS_MODULE))
		return ERR_PTR(-EIO);
	xprt = xprt_alloc(args->net, sizeof(*x), 0, RPCRDMA_CM_XPRT_SLOTS);
	if (!xprt) {
		module_put(THIS_MODULE);
		return ERR_PTR(-ENOMEM);
	}
	x = to_x(xprt);
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
	xprt->xprt_class = &rpcrdma_cm_xprt_class;
	xprt->addrlen = args->addrlen;
	memcpy(&xprt->addr, args->dstaddr, xprt->addrlen);
	if (rpc_get_port(args->dstaddr))
		xprt_set_bound(xprt);
	rpcrdma_cm_xprt_format_addresses(xprt);
	xprt->max_payload = RPCRDMA_CM_MAX_PAYLOAD;
	INIT_DELAYED_WORK(&x->connect_worker, rpcrdma_cm_xprt_connect_worker);
	rc = rpcrdma_cm_xprt_create_rs(x, &x->rs);
	if (rc) {
		rpcrdma_cm_xprt_free_addresses(xprt);
		xprt_free(xprt);
		module_put(THIS_MODULE);
		return ERR_PTR(rc);
	}
	return xprt;
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
	return xprt_register_transport(&rpcrdma_cm_xprt_class);
}

void rpcrdma_cm_xprt_unregister(void)
{
	xprt_unregister_transport(&rpcrdma_cm_xprt_class);
}
