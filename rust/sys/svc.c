// SPDX-License-Identifier: GPL-2.0
/*
 * rpcrdma_cm: the server-side RPC transport class that nfsd uses
 * (rust/sys/svc.rs). C holds what Rust cannot: the svc_xprt_class and
 * svc_xprt_ops tables, the struct svc_xprt each transport embeds, the flag
 * bits and static inlines of sunrpc, and the fields of struct svc_rqst (Rust
 * gets pointers to its rq_arg and rq_res, whose struct xdr_buf bindgen
 * generates). Every op is a trampoline into Rust.
 *
 * Lifetime: a struct rpcrdma_cm_svc_xprt is made by xpo_create (listeners)
 * or by the CM's CONNECT_REQUEST handler (connections, handed to nfsd by
 * xpo_accept), and freed by xpo_free when sunrpc drops its last reference.
 * @rs is Rust's context for it; Rust forgets every pointer to the xprt
 * before rpcrdma_cm_svc_free_rs() returns.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/highmem.h>
#include <linux/module.h>
#include <linux/sunrpc/addr.h>
#include <linux/sunrpc/svc.h>
#include <linux/sunrpc/svc_xprt.h>
#include <linux/sunrpc/xdr.h>
#include <linux/sunrpc/xprt.h>
#include <linux/sunrpc/xprtrdma.h>
#include <rdma/rdma_cm.h>

#include "rpcrdma_cm_sys.h"

struct rpcrdma_cm_svc_xprt {
	struct svc_xprt xprt;
	void *rs;
};

static struct rpcrdma_cm_svc_xprt *to_x(struct svc_xprt *xprt)
{
	return container_of(xprt, struct rpcrdma_cm_svc_xprt, xprt);
}

static struct svc_xprt_class rpcrdma_cm_svc_class;

/* Ops -------------------------------------------------------------------- */

static struct svc_xprt *rpcrdma_cm_xpo_create(struct svc_serv *serv, struct net *net,
					      struct sockaddr *sa, int salen, int flags)
{
	struct rpcrdma_cm_svc_xprt *x;
	int ret;

	x = kzalloc(sizeof(*x), GFP_KERNEL);
	if (!x)
		return ERR_PTR(-ENOMEM);
	svc_xprt_init(net, &rpcrdma_cm_svc_class, &x->xprt, serv);
	set_bit(XPT_LISTENER, &x->xprt.xpt_flags);
	strscpy(x->xprt.xpt_remotebuf, "listener", sizeof(x->xprt.xpt_remotebuf));
	svc_xprt_set_local(&x->xprt, sa, salen);
	ret = rpcrdma_cm_svc_create_rs(x, net, sa, &x->rs);
	if (ret) {
		/*
		 * svc_xprt_put() frees it through xpo_free, which drops a module
		 * reference that _svc_xprt_create() drops as well on failure:
		 * take one for it (as svcrdma does).
		 */
		__module_get(rpcrdma_cm_svc_class.xcl_owner);
		svc_xprt_put(&x->xprt);
		return ERR_PTR(ret);
	}
	return &x->xprt;
}

static struct svc_xprt *rpcrdma_cm_xpo_accept(struct svc_xprt *listener)
{
	struct rpcrdma_cm_svc_xprt *l = to_x(listener), *x;
	bool more = false;

	clear_bit(XPT_CONN, &listener->xpt_flags);
	x = rpcrdma_cm_svc_accept_rs(l->rs, &more);
	if (more) {
		/* svc_handle_xprt() enqueues the listener again for the rest. */
		set_bit(XPT_CONN, &listener->xpt_flags);
	}
	return x ? &x->xprt : NULL;
}

static int rpcrdma_cm_xpo_has_wspace(struct svc_xprt *xprt)
{
	return 1;
}

static int rpcrdma_cm_xpo_recvfrom(struct svc_rqst *rqstp)
{
	struct svc_xprt *xprt = rqstp->rq_xprt;

	/* Nothing to release unless a request is built. */
	rqstp->rq_next_page = rqstp->rq_respages;
	rqstp->rq_xprt_ctxt = NULL;
	return rpcrdma_cm_svc_recvfrom_rs(to_x(xprt)->rs, rqstp);
}

static int rpcrdma_cm_xpo_sendto(struct svc_rqst *rqstp)
{
	struct svc_xprt *xprt = rqstp->rq_xprt;

	if (svc_xprt_is_dead(xprt))
		return -ENOTCONN;
	return rpcrdma_cm_svc_sendto_rs(to_x(xprt)->rs, rqstp, rqstp->rq_xprt_ctxt);
}

static int rpcrdma_cm_xpo_result_payload(struct svc_rqst *rqstp, unsigned int offset,
					 unsigned int length)
{
	if (!rqstp->rq_xprt_ctxt)
		return 0;
	return rpcrdma_cm_svc_result_payload_rs(rqstp->rq_xprt_ctxt, offset, length);
}

static void rpcrdma_cm_xpo_release_ctxt(struct svc_xprt *xprt, void *ctxt)
{
	if (ctxt)
		rpcrdma_cm_svc_release_ctxt_rs(ctxt);
}

static void rpcrdma_cm_xpo_detach(struct svc_xprt *xprt)
{
	rpcrdma_cm_svc_detach_rs(to_x(xprt)->rs);
}

static void rpcrdma_cm_xpo_free(struct svc_xprt *xprt)
{
	struct rpcrdma_cm_svc_xprt *x = to_x(xprt);

	might_sleep();
	if (x->rs)
		rpcrdma_cm_svc_free_rs(x->rs);
	kfree(x);
}

static void rpcrdma_cm_xpo_kill_temp_xprt(struct svc_xprt *xprt)
{
}

static const struct svc_xprt_ops rpcrdma_cm_svc_ops = {
	.xpo_create = rpcrdma_cm_xpo_create,
	.xpo_accept = rpcrdma_cm_xpo_accept,
	.xpo_has_wspace = rpcrdma_cm_xpo_has_wspace,
	.xpo_recvfrom = rpcrdma_cm_xpo_recvfrom,
	.xpo_sendto = rpcrdma_cm_xpo_sendto,
	.xpo_result_payload = rpcrdma_cm_xpo_result_payload,
	.xpo_release_ctxt = rpcrdma_cm_xpo_release_ctxt,
	.xpo_detach = rpcrdma_cm_xpo_detach,
	.xpo_free = rpcrdma_cm_xpo_free,
	.xpo_kill_temp_xprt = rpcrdma_cm_xpo_kill_temp_xprt,
	/* .xpo_handshake stays NULL: its presence invites AUTH_TLS probes. */
};

/*
 * The class. Its name comes from the svc_class parameter ("rdma" by default,
 * the name nfsd's --rdma option writes). A transport ident of our own when
 * the name is not "rdma": nfsd looks up the NFSv4.1 backchannel by
 * ident | XPRT_TRANSPORT_BC, and svcrdma's backchannel class must never be
 * handed one of our transports.
 */
#define RPCRDMA_CM_XPRT_IDENT 0x2c8797

static char rpcrdma_cm_svc_name[16];
static bool rpcrdma_cm_svc_registered;

/*
 * The largest READ or WRITE payload nfsd may use over us: 1 MiB, what Linux's
 * NFS client uses at most. sunrpc's own limit (RPCSVC_MAXPAYLOAD, 4 MiB in
 * Linux 7.3) would need chunks of more than RPCRDMA_CM_CHUNK_MAX_PAGES pages
 * when a payload starts inside a page.
 */
#define RPCRDMA_CM_SVC_MAX_PAYLOAD (1024 * 1024)

static struct svc_xprt_class rpcrdma_cm_svc_class = {
	.xcl_name = rpcrdma_cm_svc_name,
	.xcl_owner = THIS_MODULE,
	.xcl_ops = &rpcrdma_cm_svc_ops,
	.xcl_max_payload = RPCRDMA_CM_SVC_MAX_PAYLOAD,
};

static struct xprt_class rpcrdma_cm_bc_class;

/*
 * Registers the server class and, for NFSv4.1 callbacks over nfsd's
 * connections, the backchannel client class nfsd looks up by the server
 * class's ident | XPRT_TRANSPORT_BC.
 */
int rpcrdma_cm_svc_register(const char *name)
{
	int ret;

	if (strscpy(rpcrdma_cm_svc_name, name, sizeof(rpcrdma_cm_svc_name)) < 0)
		return -ENAMETOOLONG;
	rpcrdma_cm_svc_class.xcl_ident = strcmp(name, "rdma") ? RPCRDMA_CM_XPRT_IDENT :
							       XPRT_TRANSPORT_RDMA;
	rpcrdma_cm_bc_class.ident = rpcrdma_cm_svc_class.xcl_ident | XPRT_TRANSPORT_BC;
	/* The backchannel's RPC buffers (xprt.c). */
	ret = rpcrdma_cm_rpc_bufs_get();
	if (ret)
		return ret;
	ret = svc_reg_xprt_class(&rpcrdma_cm_svc_class);
	if (ret)
		goto out_bufs;
	ret = xprt_register_transport(&rpcrdma_cm_bc_class);
	if (ret)
		goto out_svc;
	rpcrdma_cm_svc_registered = true;
	return 0;

out_svc:
	svc_unreg_xprt_class(&rpcrdma_cm_svc_class);
out_bufs:
	rpcrdma_cm_rpc_bufs_put();
	return ret;
}

void rpcrdma_cm_svc_unregister(void)
{
	if (rpcrdma_cm_svc_registered) {
		xprt_unregister_transport(&rpcrdma_cm_bc_class);
		svc_unreg_xprt_class(&rpcrdma_cm_svc_class);
		rpcrdma_cm_rpc_bufs_put();
	}
	rpcrdma_cm_svc_registered = false;
}

/* The NFSv4.1 backchannel ------------------------------------------------- */

/*
 * Reverse-direction calls (CB_RECALL, CB_SEQUENCE...) travel on the forward
 * connection: the client side of the RPC layer (xprt.c) drives them through
 * this rpc_xprt, set up like a mount's (xprt.c), whose send_request hands
 * each Call to Rust, which sends it with an RPC-over-RDMA header; the Reply
 * comes back among the forward calls and Rust completes the request. Inline
 * only (RFC 8167: backchannel messages carry no chunks), two requests at a
 * time, as svcrdma.
 */
static int rpcrdma_cm_bc_send_request(struct rpc_rqst *rqst)
{
	struct svc_xprt *sxprt = rqst->rq_xprt->bc_xprt;
	int ret;

	if (!sxprt || test_bit(XPT_DEAD, &sxprt->xpt_flags))
		return -ENOTCONN;
	rqst->rq_xtime = ktime_get();
	ret = rpcrdma_cm_svc_bc_send_rs(to_x(sxprt)->rs, &rqst->rq_snd_buf);
	if (ret == -ENOTCONN)
		svc_xprt_deferred_close(sxprt);
	return ret;
}

static void rpcrdma_cm_bc_close(struct rpc_xprt *xprt)
{
	xprt_disconnect_done(xprt);
	xprt->cwnd = RPC_CWNDSHIFT;
}

static void rpcrdma_cm_bc_destroy(struct rpc_xprt *xprt)
{
	rpcrdma_cm_xprt_free(container_of(xprt, struct rpcrdma_cm_xprt, xprt));
}

static const struct rpc_xprt_ops rpcrdma_cm_bc_ops = {
	.reserve_xprt = xprt_reserve_xprt_cong,
	.release_xprt = xprt_release_xprt_cong,
	.alloc_slot = xprt_alloc_slot,
	.free_slot = xprt_free_slot,
	.release_request = xprt_release_rqst_cong,
	.buf_alloc = rpcrdma_cm_rpc_buf_alloc,
	.buf_free = rpcrdma_cm_rpc_buf_free,
	.send_request = rpcrdma_cm_bc_send_request,
	.wait_for_reply_request = xprt_wait_for_reply_request_def,
	.close = rpcrdma_cm_bc_close,
	.destroy = rpcrdma_cm_bc_destroy,
};

static struct rpc_xprt *rpcrdma_cm_bc_setup(struct xprt_create *args)
{
	struct rpcrdma_cm_xprt *x;
	struct rpc_xprt *xprt;

	if (!args->bc_xprt || args->bc_xprt->xpt_class != &rpcrdma_cm_svc_class)
		return ERR_PTR(-EINVAL);
	x = rpcrdma_cm_xprt_alloc(args, &rpcrdma_cm_bc_class, RPCRDMA_CM_SVC_BC_REQUESTS,
				  RPCRDMA_CM_SVC_BC_REQUESTS);
	if (IS_ERR(x))
		return ERR_CAST(x);
	xprt = &x->xprt;
	xprt_set_bound(xprt);
	xprt_set_connected(xprt);
	xprt->bind_timeout = 0;
	xprt->reestablish_timeout = 0;
	xprt->idle_timeout = 0;
	xprt->prot = rpcrdma_cm_bc_class.ident;
	xprt->ops = &rpcrdma_cm_bc_ops;
	xprt->max_payload = PAGE_SIZE;
	/* One reference for the server transport's link, one for the caller. */
	xprt_get(xprt);
	args->bc_xprt->xpt_bc_xprt = xprt;
	xprt->bc_xprt = args->bc_xprt;
	return xprt;
}

static struct xprt_class rpcrdma_cm_bc_class = {
	.list = LIST_HEAD_INIT(rpcrdma_cm_bc_class.list),
	.name = "rpcrdma_cm backchannel",
	.owner = THIS_MODULE,
	.setup = rpcrdma_cm_bc_setup,
	.netid = { "" },
};

/*
 * The backchannel of @x, if nfsd made one: it lives as long as @x (the link
 * holds a reference).
 */
struct rpc_xprt *rpcrdma_cm_svc_bc_xprt(struct rpcrdma_cm_svc_xprt *x)
{
	return x->xprt.xpt_bc_xprt;
}

/* Transports ------------------------------------------------------------- */

/*
 * A transport for a connection accepted on @listener's CM id @id (in its
 * CONNECT_REQUEST handler): initialised against the listener's service and
 * namespace, XPT_BUSY set until nfsd accepts it. The remote port is zeroed,
 * as svcrdma does, so nfsd's reply cache survives a reconnect.
 */
struct rpcrdma_cm_svc_xprt *rpcrdma_cm_svc_xprt_new(struct rpcrdma_cm_svc_xprt *listener,
						    struct rdma_cm_id *id)
{
	struct sockaddr *src = (struct sockaddr *)&id->route.addr.src_addr;
	struct sockaddr *dst = (struct sockaddr *)&id->route.addr.dst_addr;
	struct rpcrdma_cm_svc_xprt *x;

	x = kzalloc(sizeof(*x), GFP_KERNEL);
	if (!x)
		return NULL;
	svc_xprt_init(listener->xprt.xpt_net, &rpcrdma_cm_svc_class, &x->xprt,
		      listener->xprt.xpt_server);
	set_bit(XPT_CONG_CTRL, &x->xprt.xpt_flags);
	x->xprt.xpt_remotelen = svc_addr_len(dst);
	memcpy(&x->xprt.xpt_remote, dst, x->xprt.xpt_remotelen);
	snprintf(x->xprt.xpt_remotebuf, sizeof(x->xprt.xpt_remotebuf) - 1, "%pISc", dst);
	rpc_set_port((struct sockaddr *)&x->xprt.xpt_remote, 0);
	svc_xprt_set_local(&x->xprt, src, svc_addr_len(src));
	return x;
}

void rpcrdma_cm_svc_xprt_get(struct rpcrdma_cm_svc_xprt *x)
{
	svc_xprt_get(&x->xprt);
}

void rpcrdma_cm_svc_xprt_put(struct rpcrdma_cm_svc_xprt *x)
{
	svc_xprt_put(&x->xprt);
}

void rpcrdma_cm_svc_xprt_set_rs(struct rpcrdma_cm_svc_xprt *x, void *rs)
{
	x->rs = rs;
}

/*
 * Drops a transport nfsd never accepted (its listener went away first).
 * svc_xprt_free() drops a module reference the transport never took.
 */
void rpcrdma_cm_svc_xprt_discard(struct rpcrdma_cm_svc_xprt *x)
{
	__module_get(rpcrdma_cm_svc_class.xcl_owner);
	svc_xprt_put(&x->xprt);
}

/* A connection is waiting on @listener: nfsd will call xpo_accept. */
void rpcrdma_cm_svc_conn_pending(struct rpcrdma_cm_svc_xprt *listener)
{
	set_bit(XPT_CONN, &listener->xprt.xpt_flags);
	svc_xprt_enqueue(&listener->xprt);
}

/*
 * A message is queued on @x (@data) or no longer (!@data). The caller holds
 * the lock of its queue, so the bit and the queue agree.
 */
void rpcrdma_cm_svc_set_data(struct rpcrdma_cm_svc_xprt *x, bool data)
{
	if (data)
		set_bit(XPT_DATA, &x->xprt.xpt_flags);
	else
		clear_bit(XPT_DATA, &x->xprt.xpt_flags);
}

void rpcrdma_cm_svc_enqueue(struct rpcrdma_cm_svc_xprt *x)
{
	svc_xprt_enqueue(&x->xprt);
}

/* The connection is gone: nfsd closes the transport (xpo_detach, then free). */
void rpcrdma_cm_svc_close(struct rpcrdma_cm_svc_xprt *x)
{
	svc_xprt_deferred_close(&x->xprt);
}

/* Requests ---------------------------------------------------------------- */

/* Called once per xpo_recvfrom, on every path: nfsd may dequeue again. */
void rpcrdma_cm_svc_received(struct svc_rqst *rqstp)
{
	svc_xprt_received(rqstp->rq_xprt);
}

/*
 * Where a request's argument and reply live (rq_arg, rq_res) and the pages an
 * argument may fill: rq_pages, the call's own array (the reply has its own,
 * rq_respages), all rq_maxpages of them.
 * Rust lays out rq_arg in them and reads rq_res (rust/sys/svc.rs).
 */
void rpcrdma_cm_svc_rqst_parts(struct svc_rqst *rqstp, struct rpcrdma_cm_svc_parts *p)
{
	p->arg = &rqstp->rq_arg;
	p->res = &rqstp->rq_res;
	p->pages = rqstp->rq_pages;
	p->arg_pages = rqstp->rq_maxpages;
}

/*
 * rq_arg is laid out (in rq_pages); the reply starts at rq_respages, its own
 * array, and sunrpc hands @ctxt to xpo_release_ctxt.
 */
void rpcrdma_cm_svc_arg_done(struct svc_rqst *rqstp, void *ctxt)
{
	rqstp->rq_next_page = rqstp->rq_respages;
	rqstp->rq_xprt_ctxt = ctxt;
	rqstp->rq_prot = IPPROTO_MAX;
	svc_xprt_copy_addrs(rqstp, rqstp->rq_xprt);
	set_bit(RQ_SECURE, &rqstp->rq_flags);
}

/*
 * The request's first @n pages become @pages (an argument pulled by RDMA Read
 * before the request existed), as svcrdma's svc_rdma_read_complete() does:
 * the request's own go back, and it owns these (the caller's references).
 */
void rpcrdma_cm_svc_give_pages(struct svc_rqst *rqstp, struct page **pages, u32 n)
{
	u32 i;

	for (i = 0; i < n; i++) {
		if (rqstp->rq_pages[i])
			put_page(rqstp->rq_pages[i]);
		rqstp->rq_pages[i] = pages[i];
	}
}

/* page_address() is a macro or an inline, as the configuration has it. */
void *rpcrdma_cm_page_address(struct page *page)
{
	return page_address(page);
}
