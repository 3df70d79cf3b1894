/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rpcrdma_cm: the interface between the C half of the abstraction layer
 * (the .c files of rust/sys) and its Rust half (the .rs files beside them).
 *
 * Every function one side calls on the other is declared here once, with the
 * structures both sides read. C covers only what Rust on 6.12 cannot reach:
 * macros (module parameters, workqueues), static inlines (ib_post_send,
 * rdma_create_id), ops tables and fields of the RDMA core's and sunrpc's
 * structs. Rust calls exported functions (rdma_bind_addr, rdma_accept ...)
 * itself, with the structs bindgen generates (sockaddr_in, rdma_conn_param).
 *
 * Rust does not mirror this file by hand: bindgen generates its view
 * (rust/sys/bindings_generated.rs, used through rust/sys/bindings.rs) from
 * this file at build time, with the same C flags as the .c files (Makefile).
 * rust/sys/bindings_params says what it takes: everything declared here, and
 * the constants and functions of the kernel headers below that Rust uses
 * directly. A function Rust implements for C is checked against its
 * declaration here when the module is compiled (c_fn! in bindings.rs).
 */
#ifndef RPCRDMA_CM_SYS_H
#define RPCRDMA_CM_SYS_H

#include <linux/types.h>
#include <linux/socket.h>	/* AF_INET, AF_INET6 */
#include <linux/in.h>	/* struct sockaddr_in */
#include <linux/debugfs.h>	/* debugfs_remove() */
#include <linux/seq_file.h>	/* seq_write() */
#include <linux/sunrpc/xdr.h>	/* struct xdr_buf, read_bytes_from_xdr_buf() */
#include <linux/sunrpc/xprt.h>	/* struct rpc_xprt, struct rpc_rqst */
#include <linux/sunrpc/clnt.h>	/* rpc_create(), struct rpc_program (rpc_clnt.rs) */
#include <rdma/ib_verbs.h>	/* enum ib_wc_status */
#include <rdma/ib_cm.h>	/* IB_CM_REJ_CONSUMER_DEFINED */
#include <rdma/rdma_cm.h>	/* enum rdma_cm_event_type, rdma_bind_addr() ... */

struct dentry;
struct seq_file;
struct rdma_cm_id;
struct rpcrdma_cm_qp;
struct rpcrdma_cm_buf;
struct rpcrdma_cm_chunk;
struct workqueue_struct;

/* param.c: module parameters ----------------------------------------------- */

/*
 * The values, read by Rust (rust/sys/param.rs) as READ_ONCE does: each may
 * change at run time but for selftest, listen, svc_class and xprt_class (0444), whose
 * strings live unchanged until the module is unloaded.
 */
extern bool rpcrdma_cm_param_selftest;
extern unsigned int rpcrdma_cm_param_send_size;
extern unsigned int rpcrdma_cm_param_recv_size;
extern bool rpcrdma_cm_param_remote_invalidate;
extern bool rpcrdma_cm_param_legacy;
extern char *rpcrdma_cm_param_svc_class;
extern bool rpcrdma_cm_param_xprt_class;

/* An unsigned parameter and the range it is checked against. */
struct rpcrdma_cm_uint_param {
	unsigned int value;
	unsigned int min, max;
};

extern struct rpcrdma_cm_uint_param rpcrdma_cm_param_max_connections;
extern struct rpcrdma_cm_uint_param rpcrdma_cm_param_max_connections_per_peer;
extern struct rpcrdma_cm_uint_param rpcrdma_cm_param_idle_timeout;

/*
 * The selftests' hooks: parameters that widen races or fake a device's
 * limits on live paths. Only in a module built with CONFIG_RPCRDMA_CM_TEST=y
 * (scripts/module; never DKMS): the Makefile then defines RPCRDMA_CM_TEST.
 */
#ifdef RPCRDMA_CM_TEST
extern char *rpcrdma_cm_param_listen;
extern bool rpcrdma_cm_param_test_no_mem_mgt_ext;
extern struct rpcrdma_cm_uint_param rpcrdma_cm_param_test_teardown_delay_ms;
extern struct rpcrdma_cm_uint_param rpcrdma_cm_param_test_listen_delay_ms;
extern struct rpcrdma_cm_uint_param rpcrdma_cm_param_test_release_delay_ms;
extern struct rpcrdma_cm_uint_param rpcrdma_cm_param_test_detach_delay_ms;
extern struct rpcrdma_cm_uint_param rpcrdma_cm_param_test_rw_post_part;
extern struct rpcrdma_cm_uint_param rpcrdma_cm_param_test_send_post_part;
extern struct rpcrdma_cm_uint_param rpcrdma_cm_param_test_inv_post_refuse;
extern struct rpcrdma_cm_uint_param rpcrdma_cm_param_test_svc_reply_nomem;
bool rpcrdma_cm_param_take(struct rpcrdma_cm_uint_param *p);
#endif

/* Implemented in Rust (rust/sys/param.rs): the protocol core's rules. */
bool rpcrdma_cm_size_param_ok(unsigned int v);
#ifdef RPCRDMA_CM_TEST
bool rpcrdma_cm_listen_param_ok(const char *s);
#endif
bool rpcrdma_cm_svc_class_param_ok(const char *s);

/* debugfs.c: files whose text Rust writes ---------------------------------- */

/*
 * A file's content comes from rpcrdma_cm_debugfs_show() on each open; writes
 * to a writable one (rpcrdma_cm_rw_fops) go to rpcrdma_cm_debugfs_write().
 */
extern const struct file_operations rpcrdma_cm_seq_fops;
extern const struct file_operations rpcrdma_cm_rw_fops;

/* Implemented in Rust (rust/sys/debugfs.rs). */
int rpcrdma_cm_debugfs_show(struct seq_file *m, void *private);
int rpcrdma_cm_debugfs_write(void *private, const char *buf, size_t len);

/* cm.c: RDMA-CM ids, the module's workqueue, the periodic tick -------------- */

/*
 * What Rust learns of a CM event, in a layout of our own, so Rust never depends
 * on the layout of struct rdma_cm_event. private_data is valid only during
 * the call.
 */
struct rpcrdma_cm_event_info {
	int event;
	int status;
	const u8 *private_data;
	u32 private_data_len;
	u8 initiator_depth;
};

/* What the device under an id can do, as far as RPC-over-RDMA cares. */
struct rpcrdma_cm_dev_caps {
	/* Memory management extensions: FRWR, LOCAL_INV, Send With Invalidate. */
	bool mem_mgt_ext;
	u32 max_fast_reg_page_list_len;
	/* RDMA Reads in flight at most, as responder and as initiator. */
	u32 max_qp_rd_atom;
	u32 max_qp_init_rd_atom;
};

struct net;
int rpcrdma_cm_create_id(void *context, struct net *net, struct rdma_cm_id **out);
void rpcrdma_cm_set_context(struct rdma_cm_id *id, void *context);
void rpcrdma_cm_id_names(struct rdma_cm_id *id, char *local, char *peer,
			 char *dev, size_t len);
const struct sockaddr *rpcrdma_cm_id_peer_addr(struct rdma_cm_id *id);
int rpcrdma_cm_id_caps(struct rdma_cm_id *id, struct rpcrdma_cm_dev_caps *caps);

/* Implemented in Rust (rust/sys/rdma_cm.rs). Non-zero: the CM destroys @id. */
int rpcrdma_cm_event_rs(struct rdma_cm_id *id, void *context,
			const struct rpcrdma_cm_event_info *ev);

/* Ids (contexts) alive: unload waits for none. */
void rpcrdma_cm_live_get(void);
void rpcrdma_cm_live_put(void);
void rpcrdma_cm_live_wait(void);
unsigned int rpcrdma_cm_live_count(void);

/* alloc_workqueue() (a macro): an unbound queue that may reclaim, named @name. */
struct workqueue_struct *rpcrdma_cm_alloc_wq(const char *name);

/* A work item on @wq every @period_ms, calling rpcrdma_cm_tick_rs(@ctx),
 * until rpcrdma_cm_tick_stop(). */
void rpcrdma_cm_tick_start(void *ctx, unsigned int period_ms, struct workqueue_struct *wq);
void rpcrdma_cm_tick_stop(void);
void rpcrdma_cm_tick_rs(void *ctx);

/* fatal_signal_pending(current) and init_waitqueue_head() are inline or macros. */
bool rpcrdma_cm_fatal_signal_pending(void);
struct wait_queue_head;
void rpcrdma_cm_init_waitqueue(struct wait_queue_head *head);

/* qp.c: one connection's PD, CQ, QP and message buffers --------------------- */

/*
 * What Rust learns of a completion. @status is an enum ib_wc_status;
 * @data/@len the received message (Receives that succeeded only), valid
 * during the call.
 */
struct rpcrdma_cm_wc_info {
	int status;
	u8 *data;
	u32 len;
	u32 invalidate_rkey;
	bool with_invalidate;
};

/*
 * One Send in this many asks for a completion (and any that took the last
 * Send buffer); the others are given back with it (qp.c). Up to one
 * batch less one of a QP's Send buffers may so wait, unsignaled, for the next
 * signaled Send: send_depth counts them on top of the Sends in flight.
 */
#define RPCRDMA_CM_SEND_BATCH 16

/* Sizes of a new QP: Sends and Receives in flight at most, buffers. */
struct rpcrdma_cm_qp_attr {
	u32 send_depth;		/* Send WRs and Send buffers (allocated on use) */
	u32 recv_depth;		/* Receive buffers at most */
	u32 recv_initial;	/* Receive buffers allocated and posted at once */
	u32 send_size;
	u32 recv_size;
	/* Where Receive completions are handled, one at a time per QP. */
	struct workqueue_struct *recv_wq;
	/*
	 * Receive completions handled in the CQ's own context instead, for an
	 * owner whose handler never waits for a completion of this QP.
	 */
	bool recv_direct;
	/*
	 * The owner registers chunks (a requester): room for their REG_MRs
	 * and LOCAL_INVs in the Send Queue (RPCRDMA_CM_MR_WRS).
	 */
	bool registers;
};

int rpcrdma_cm_create_qp(struct rdma_cm_id *id,
			 const struct rpcrdma_cm_qp_attr *attr, void *owner,
			 struct rpcrdma_cm_qp **out);
void rpcrdma_cm_destroy_qp(struct rpcrdma_cm_qp *qp);
void rpcrdma_cm_qp_get(struct rpcrdma_cm_qp *qp);
void rpcrdma_cm_qp_put(struct rpcrdma_cm_qp *qp);
int rpcrdma_cm_qp_disconnect(struct rpcrdma_cm_qp *qp);
int rpcrdma_cm_recv_grow(struct rpcrdma_cm_qp *qp, u32 n);
void rpcrdma_cm_recv_counts(struct rpcrdma_cm_qp *qp, u32 *want, u32 *handling, u32 *kept);
void rpcrdma_cm_recv_allocated(struct rpcrdma_cm_qp *qp, u32 *allocated, u32 *short_count);
u32 rpcrdma_cm_send_allocated(struct rpcrdma_cm_qp *qp);
u32 rpcrdma_cm_chunks_allocated(struct rpcrdma_cm_qp *qp);
int rpcrdma_cm_send_get(struct rpcrdma_cm_qp *qp, struct rpcrdma_cm_buf **out,
			u8 **addr, u32 *size);
void rpcrdma_cm_send_abort(struct rpcrdma_cm_buf *b);
struct rpcrdma_cm_rw;
int rpcrdma_cm_send_post(struct rpcrdma_cm_buf *b, u32 len, bool invalidate,
			 u32 inv_rkey, struct rpcrdma_cm_chunk *regs, struct rpcrdma_cm_rw *rw);

/*
 * A Receive buffer Rust keeps past its completion callback (its message is
 * still being handled): not reposted until rpcrdma_cm_recv_release(), and
 * teardown waits for that. A kept buffer holds a reference on its QP,
 * which rpcrdma_cm_recv_keep() returns.
 */
struct rpcrdma_cm_qp *rpcrdma_cm_recv_keep(struct rpcrdma_cm_buf *b);
void rpcrdma_cm_recv_release(struct rpcrdma_cm_buf *b);

/*
 * Implemented in Rust (rust/sys/rdma_cm.rs); @owner is the id's context.
 * Returns true if Rust kept @b (rpcrdma_cm_recv_keep()).
 */
bool rpcrdma_cm_recv_rs(void *owner, struct rpcrdma_cm_qp *qp, struct rpcrdma_cm_buf *b,
			const struct rpcrdma_cm_wc_info *wc);
void rpcrdma_cm_send_rs(void *owner, struct rpcrdma_cm_qp *qp,
			const struct rpcrdma_cm_wc_info *wc);
/*
 * An RDMA Read or Write chunk.c did not wait for completed (@status: enum
 * ib_wc_status): a Read posted with @done, or a Write that failed (@done NULL).
 */
void rpcrdma_cm_rw_done_rs(void *owner, struct rpcrdma_cm_qp *qp, void *done, int status);

/* chunk.c: chunk memory, FRWR registration, RDMA Read/Write ----------------- */

struct rpcrdma_cm_chunk *rpcrdma_cm_chunk_alloc(struct rpcrdma_cm_qp *qp, u32 len);
struct page;
struct rpcrdma_cm_chunk *rpcrdma_cm_chunk_wrap(struct rpcrdma_cm_qp *qp, struct page **pages,
					      u32 offset, u32 len);
int rpcrdma_cm_chunk_copy(struct rpcrdma_cm_chunk *c, u32 off, u8 *buf, u32 n,
			  bool in);
int rpcrdma_cm_chunk_register(struct rpcrdma_cm_chunk *c, bool remote_write,
			      u32 *rkey, u64 *iova);
/*
 * Chains @next behind @c, for the next rpcrdma_cm_send_post() to post their
 * pending REG_MRs in front of its Send (which unlinks them); NULL ends it.
 */
void rpcrdma_cm_chunk_chain(struct rpcrdma_cm_chunk *c, struct rpcrdma_cm_chunk *next);
int rpcrdma_cm_chunk_free(struct rpcrdma_cm_chunk *c, bool remotely_invalidated, bool no_inv);
/*
 * LOCAL_INV for each of @n registered chunks of one QP, posted in order
 * without waiting (*@posted of them). Takes @done: once every one posted
 * has completed, rpcrdma_cm_inv_done_rs(@done, status) runs, from the last
 * completion or from this call itself; a chunk whose LOCAL_INV could not be
 * posted has its MR deregistered at release instead, which waits for
 * nothing. -ENOMEM, and @done stays the caller's, if the batch cannot be
 * allocated.
 */
int rpcrdma_cm_chunks_inv(struct rpcrdma_cm_chunk **v, u32 n, void *done, u32 *posted);
void rpcrdma_cm_inv_done_rs(void *done, int status);
int rpcrdma_cm_chunk_rdma(struct rpcrdma_cm_chunk *c, u32 rkey, u64 addr,
			  bool write);
/*
 * RDMA Read into pages (an RPC's), no copy: returns once the data is there,
 * unless @done: then once it is posted (it keeps its pages until it
 * completes), and rpcrdma_cm_rw_done_rs(.., @done, ..) tells of its end.
 */
struct page;
int rpcrdma_cm_rdma_read_pages(struct rpcrdma_cm_qp *qp, struct page **pages, u32 offset,
			       u32 len, u32 rkey, u64 addr, void *done);
/*
 * RDMA Write from pages (a reply's), no copy, prepared but not posted
 * (*@out, and the number of WRs): rpcrdma_cm_send_post() posts it in front
 * of its Send, in one post; rpcrdma_cm_rw_post_held() posts it alone (0 or
 * an error); or rpcrdma_cm_rw_drop() undoes it. A caller posts or drops a
 * chain it holds before it prepares another on the QP.
 */
int rpcrdma_cm_rdma_write_held(struct rpcrdma_cm_qp *qp, struct page **pages, u32 offset,
			       u32 len, u32 rkey, u64 addr, struct rpcrdma_cm_rw **out);
/*
 * The same from kernel memory of the linear map (a reply's head or tail in
 * pages of its own, not slab memory), two pages at most;
 * rpcrdma_cm_kvec_writable() says whether it takes @base and @len.
 */
int rpcrdma_cm_rdma_write_kvec_held(struct rpcrdma_cm_qp *qp, const void *base, u32 len,
				    u32 rkey, u64 addr, struct rpcrdma_cm_rw **out);
bool rpcrdma_cm_kvec_writable(const void *base, u32 len);
int rpcrdma_cm_rw_post_held(struct rpcrdma_cm_rw *rw);
void rpcrdma_cm_rw_drop(struct rpcrdma_cm_rw *rw);

/* svc.c: the server transport class nfsd uses ------------------------------ */

struct svc_rqst;
struct net;
struct rpcrdma_cm_svc_xprt;

int rpcrdma_cm_svc_register(const char *name);
void rpcrdma_cm_svc_unregister(void);
struct rpcrdma_cm_svc_xprt *rpcrdma_cm_svc_xprt_new(struct rpcrdma_cm_svc_xprt *listener,
						    struct rdma_cm_id *id);
void rpcrdma_cm_svc_xprt_set_rs(struct rpcrdma_cm_svc_xprt *x, void *rs);
void rpcrdma_cm_svc_xprt_get(struct rpcrdma_cm_svc_xprt *x);
void rpcrdma_cm_svc_xprt_put(struct rpcrdma_cm_svc_xprt *x);
void rpcrdma_cm_svc_xprt_discard(struct rpcrdma_cm_svc_xprt *x);
void rpcrdma_cm_svc_conn_pending(struct rpcrdma_cm_svc_xprt *listener);
void rpcrdma_cm_svc_set_data(struct rpcrdma_cm_svc_xprt *x, bool data);
void rpcrdma_cm_svc_enqueue(struct rpcrdma_cm_svc_xprt *x);
void rpcrdma_cm_svc_close(struct rpcrdma_cm_svc_xprt *x);
void rpcrdma_cm_svc_received(struct svc_rqst *rqstp);

/* rq_arg, rq_res and the pages an argument may fill (arg_pages of @pages). */
struct rpcrdma_cm_svc_parts {
	struct xdr_buf *arg;
	struct xdr_buf *res;
	struct page **pages;
	u32 arg_pages;
};

void rpcrdma_cm_svc_rqst_parts(struct svc_rqst *rqstp, struct rpcrdma_cm_svc_parts *p);
void rpcrdma_cm_svc_arg_done(struct svc_rqst *rqstp, void *ctxt);
void rpcrdma_cm_svc_give_pages(struct svc_rqst *rqstp, struct page **pages, u32 n);
void *rpcrdma_cm_page_address(struct page *page);
/* Backchannel Calls nfsd may have outstanding on one connection (svcrdma's). */
#define RPCRDMA_CM_SVC_BC_REQUESTS 2
struct rpc_xprt *rpcrdma_cm_svc_bc_xprt(struct rpcrdma_cm_svc_xprt *x);

/* Implemented in Rust (rust/sys/svc.rs). */
int rpcrdma_cm_svc_create_rs(struct rpcrdma_cm_svc_xprt *x, struct net *net,
			     const struct sockaddr *sa, void **rs);
struct rpcrdma_cm_svc_xprt *rpcrdma_cm_svc_accept_rs(void *rs, bool *more);
int rpcrdma_cm_svc_recvfrom_rs(void *rs, struct svc_rqst *rqstp);
int rpcrdma_cm_svc_sendto_rs(void *rs, struct svc_rqst *rqstp, void *ctxt);
int rpcrdma_cm_svc_result_payload_rs(void *ctxt, u32 offset, u32 length);
void rpcrdma_cm_svc_release_ctxt_rs(void *ctxt);
void rpcrdma_cm_svc_detach_rs(void *rs);
void rpcrdma_cm_svc_free_rs(void *rs);
int rpcrdma_cm_svc_bc_send_rs(void *rs, const struct xdr_buf *msg);

/* xprt.c: the client transport class NFS mounts use ------------------------- */

/*
 * A transport of ours (a mount's, or nfsd's backchannel with no @rs): sunrpc's
 * struct rpc_xprt, whose layout Rust sees through bindgen like the request's
 * (struct rpc_rqst), and what the transport adds to it.
 */
struct rpcrdma_cm_xprt {
	struct rpc_xprt xprt;
	struct delayed_work connect_worker;
	struct rpc_timeout timeout;	/* after set_connect_timeout */
	bool connect_failed;		/* the next connect backs off */
	void *rs;			/* the Rust context (a mount's) */
	/* Drops a backchannel Call's last transport reference (see xprt.c). */
	struct work_struct put_work;
	/* Small RPC buffers kept for the next calls (see xprt.c). */
	spinlock_t buf_lock;
	struct list_head buf_free;
	unsigned int buf_free_count;
};

/*
 * Requests in flight per mount at most: the slot table, and the credits asked
 * (xprtrdma's default, RPCRDMA_DEF_SLOT_TABLE). The server's grant limits it.
 */
#define RPCRDMA_CM_XPRT_SLOTS 128
/*
 * Requests a mount's transport keeps allocated (sunrpc's free list) from its
 * creation to its end: calls up to this many in flight take no allocation
 * of an rpc_rqst per RPC; past it sunrpc allocates and frees the rest, up to
 * RPCRDMA_CM_XPRT_SLOTS. As many as a new connection's Receives cover.
 */
#define RPCRDMA_CM_XPRT_PREALLOC 32
/* Backchannel Calls the server may have outstanding (xprtrdma's 16). */
#define RPCRDMA_CM_BC_SLOTS 16
/* xprtrdma's reconnect timeout (xprt_rdma.h), so a mount behaves the same. */
#define RPCRDMA_CM_INIT_REEST_TO (5U * HZ)

int rpcrdma_cm_xprt_register(void);
void rpcrdma_cm_xprt_unregister(void);
struct xprt_create;
struct xprt_class;
struct rpcrdma_cm_xprt *rpcrdma_cm_xprt_alloc(struct xprt_create *args, struct xprt_class *class,
					      unsigned int slots, unsigned int prealloc);
void rpcrdma_cm_xprt_free(struct rpcrdma_cm_xprt *x);
struct rpc_task;
/*
 * An RPC's call and reply buffers (rpc_xprt_ops .buf_alloc/.buf_free), with a
 * reserve that each class registered holds a reference on (_get, _put). The
 * request's transport must be an rpcrdma_cm_xprt (it keeps small buffers).
 */
int rpcrdma_cm_rpc_buf_alloc(struct rpc_task *task);
void rpcrdma_cm_rpc_buf_free(struct rpc_task *task);
int rpcrdma_cm_rpc_bufs_get(void);
void rpcrdma_cm_rpc_bufs_put(void);
/* Completes and unpins a pinned request: @len octets arrived, or @status < 0. */
void rpcrdma_cm_xprt_complete(struct rpc_xprt *xprt, struct rpc_rqst *rqst, u32 len, int status);
/* A backchannel Call (@msg, @len octets of RPC) for the NFS callback service. */
int rpcrdma_cm_xprt_bc_call(struct rpc_xprt *xprt, const u8 *msg, u32 len);

/* Implemented in Rust (rust/sys/xprt.rs): rpc_xprt_ops and calls from xprt.c. */
void rpcrdma_cm_xprt_format_rs(struct rpc_xprt *xprt);
void rpcrdma_cm_xprt_unformat_rs(struct rpc_xprt *xprt);
int rpcrdma_cm_xprt_create_rs(struct rpc_xprt *xprt, void **rs);
int rpcrdma_cm_xprt_connect_rs(void *rs);
void rpcrdma_cm_xprt_close_rs(struct rpc_xprt *xprt, void *rs);
int rpcrdma_cm_xprt_send_rs(void *rs, struct rpc_rqst *rqst, bool ddp);
void rpcrdma_cm_xprt_buf_free_rs(void *rs, u32 xid);
u32 rpcrdma_cm_xprt_bc_maxpayload_rs(void *rs);
void rpcrdma_cm_xprt_free_rs(void *rs);
void rpcrdma_cm_xprt_set_port_rs(struct rpc_xprt *xprt, unsigned short port);
void rpcrdma_cm_xprt_timer_rs(struct rpc_xprt *xprt, struct rpc_task *task);
void rpcrdma_cm_xprt_set_connect_timeout_rs(struct rpc_xprt *xprt, unsigned long connect_timeout,
					    unsigned long reconnect_timeout);
void rpcrdma_cm_xprt_print_stats_rs(struct rpc_xprt *xprt, struct seq_file *seq);

/* trace.c: tracepoints (rpcrdma_cm_trace.h) ---------------------------------- */

void rpcrdma_cm_trace_negotiated(u32 id, bool server, const char *peer, const char *outcome,
				 u32 peer_send, u32 peer_recv, bool peer_r, u32 c2s, u32 s2c,
				 bool reminv);
void rpcrdma_cm_trace_reject(const char *peer, const char *why);
void rpcrdma_cm_trace_rdma_error(u32 id, u32 xid, u32 code);
void rpcrdma_cm_trace_closed(u32 id, const char *why, int status);
void rpcrdma_cm_trace_wc_error(u32 id, bool recv, int status);
void rpcrdma_cm_trace_fatal(u32 id, const char *why, int status);
void rpcrdma_cm_trace_xprt(u32 id, const char *what, u32 xid, int status);

/* ib_client.c: RDMA devices appearing ---------------------------------------- */

int rpcrdma_cm_client_register(void *ctx);
void rpcrdma_cm_client_unregister(void);

/* Implemented in Rust (rust/sys/ib_client.rs). */
void rpcrdma_cm_device_added_rs(void *ctx);

/* kunit.c: the KUnit suite's reports ----------------------------------------- */

/*
 * Fails the KUnit test the current task runs, logging "vector NAME failed"
 * (NAME: len bytes, not NUL-terminated); does nothing outside a KUnit test or
 * without CONFIG_KUNIT.
 */
void rpcrdma_cm_kunit_vector_failed(const char *name, int len);

#endif /* RPCRDMA_CM_SYS_H */
