/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rpcrdma_cm: the QP structure that qp.c and chunk.c share. Rust sees it only
 * as an opaque pointer (rpcrdma_cm_sys.h).
 */
#ifndef RPCRDMA_CM_QP_H
#define RPCRDMA_CM_QP_H

#include <linux/completion.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/spinlock.h>
#include <linux/wait.h>
#include <linux/workqueue.h>
#include <rdma/ib_verbs.h>

struct rpcrdma_cm_qp;

struct rpcrdma_cm_buf {
	struct ib_cqe cqe;
	struct rpcrdma_cm_qp *qp;
	struct list_head list;	/* Send: free or posted list; Receive: ready list */
	bool posted;		/* Send: on the posted list */
	void *addr;
	u64 dma;
	u32 size;
	/* Receive completion, kept for the work item. */
	int status;
	u32 byte_len;
	bool with_inv;
	u32 inv_rkey;
	/*
	 * Receive: its callback is running (set before the callback, which
	 * alone has the buffer then; cleared under the QP's lock), and its
	 * owner released it meanwhile (under the lock; the callback's end
	 * gives it back then: the message stays readable for the whole
	 * callback).
	 */
	bool in_cb;
	bool released_in_cb;
};

/*
 * One connection's PD, CQ, RC QP and message buffers (see qp.c).
 *
 * @ref counts the holders: the connection itself (dropped by
 * rpcrdma_cm_destroy_qp), each Rust Qp handle, each chunk, each kept Receive
 * buffer, and whoever leaves @users for the time it wakes teardown. The
 * last one frees the PD and completes @released. @users counts operations that post
 * and may still touch buffers or the QP (Send buffers being filled, chunk
 * registrations, RDMA Read/Write): teardown waits for none before it frees
 * the QP and buffers. The lists, @closed and the counters are under @lock.
 */
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
	/* Sends posted and not known complete, oldest first (see qp.c). */
	struct list_head send_posted;
	u32 send_unsignaled;	/* Sends posted since the last signaled one */
	struct list_head recv_ready;
	/* Receive buffers handled and not posted again (see qp.c). */
	struct list_head recv_free;
	/* Serialises refills: allocations, and @nrecv's changes. */
	struct mutex recv_mutex;
	u32 recv_want;		/* Receives to keep posted, at most @recv_depth;
				 * a refill may post a few more (qp.c) */
	u32 recv_max;		/* buffers at most: 4 * @recv_depth */
	u32 recv_short;		/* kept buffers that could not be replaced */
	atomic_t recv_kept;	/* buffers the owner keeps (rpcrdma_cm_recv_keep) */
	/* Completed Receives being handled: neither given back nor kept yet. */
	atomic_t recv_handling;
	/*
	 * Invalid FRWR MRs of @mr_pages pages each, kept for the next chunk
	 * registration (linked by ib_mr.qp_entry, as ib_mr_pool does); freed by
	 * teardown, after which a released MR is deregistered at once.
	 */
	struct list_head mr_free;
	u32 mr_pages;
	/*
	 * Ended chunks of RPCRDMA_CM_CHUNK_CACHE_PAGES pages, at most
	 * RPCRDMA_CM_CHUNK_CACHE of them, kept for the next chunk this small
	 * (chunk.c); freed by teardown, as @mr_free.
	 */
	struct list_head chunk_free;
	u32 chunk_free_count;
	atomic_t chunks_allocated;	/* chunks allocated so far, kept or not */
	struct work_struct recv_work;
	struct workqueue_struct *recv_wq;
	bool recv_direct;	/* Receives handled in CQ context */
	/*
	 * Send Queue entries kept for RDMA Read/Write chains (@rw_wrs), and of
	 * those the ones no chain has reserved (@rw_avail).
	 */
	u32 rw_wrs;
	atomic_t rw_avail;
	/*
	 * Chains released so far (chunk.c): a chain that found the QP's MR
	 * pool empty waits for this to move (each release gives back what
	 * the chain's context held, its MRs among them).
	 */
	atomic_t rw_released;
	/* RDMA Read/Write chains posted in part, freed by teardown (chunk.c). */
	struct list_head rw_orphans;
	/*
	 * REG_MRs are posted unsignaled, as xprtrdma's: @reg_cqe is theirs, for
	 * the completions that come anyway (a flush, a failure). A chunk
	 * released while its registration is not known invalid waits on
	 * @reg_orphans, its MR and memory untouched, until teardown drained
	 * the QP (@drained, under @lock): only then can no REG_MR of it still
	 * be in the Send Queue (chunk.c).
	 */
	struct ib_cqe reg_cqe;
	struct list_head reg_orphans;
	bool drained;
	u32 send_size, recv_size;
	u32 send_depth, recv_depth;
	u32 nsend;		/* Send slots used (buffers allocated on demand) */
	u32 nrecv;		/* Receive buffers allocated: posted, kept or free */
	atomic_t recv_posted;	/* of those, posted and not completed */
	struct rpcrdma_cm_buf **send;	/* @send_depth slots, NULL when free */
	struct rpcrdma_cm_buf **recv;	/* @recv_max slots */
};

/*
 * Receives a QP keeps posted at least when buffers run short (an nfsd
 * connection's grant is then 1: two are kept for backchannel Replies).
 */
#define RPCRDMA_CM_RECV_FLOOR 4

/*
 * Receives posted in one chain, and so beyond @recv_want at most (one
 * fewer): as svcrdma's and xprtrdma's RPCRDMA_MAX_RECV_BATCH.
 */
#define RPCRDMA_CM_RECV_BATCH 7

/*
 * Wakes @qp->wq's waiters, if any, after the caller changed what they wait
 * for (wq_has_sleeper()'s barrier pairs with the waiter's prepare_to_wait):
 * most changes have none waiting, and skip the wait queue's lock.
 */
static inline void rpcrdma_cm_qp_wake(struct rpcrdma_cm_qp *qp)
{
	if (wq_has_sleeper(&qp->wq))
		wake_up_all(&qp->wq);
}

/* Starts an operation that posts: fails once the QP is closing. */
int rpcrdma_cm_qp_enter(struct rpcrdma_cm_qp *qp);
void rpcrdma_cm_qp_leave(struct rpcrdma_cm_qp *qp);
/* ib_post_send() unless the QP is closing. */
int rpcrdma_cm_post_send(struct rpcrdma_cm_qp *qp, const struct ib_send_wr *wr);

#ifdef RPCRDMA_CM_TEST
struct rpcrdma_cm_uint_param;
/*
 * Test builds: posts the chain from @first, but while @param counts down,
 * only the WRs in front of @stop, failing at @stop with -ENOMEM, as a
 * device short of room may do. Under @qp->lock or not, as ib_post_send().
 */
int rpcrdma_cm_post_part(struct rpcrdma_cm_qp *qp, struct ib_send_wr *first,
			 struct ib_send_wr *stop, struct rpcrdma_cm_uint_param *param,
			 const struct ib_send_wr **bad);
#endif

/*
 * Registrations per Send a requester's QP has room for. Each takes two Send
 * Queue entries: its REG_MR, posted unsignaled in front of the Send, may hold
 * its entry until a later signaled WR completes (hardware may free entries
 * only then), while its LOCAL_INV holds another.
 */
#define RPCRDMA_CM_MR_WRS 6
/*
 * At most this many pages per RDMA Read/Write WR (the device may allow
 * fewer): svcrdma's count at its default thresholds. Short WRs recover
 * sooner from a lost frame: rxe, for one, notices a Read response lost
 * mid-WR only when a later WR's response or its retransmit timer shows the
 * gap, and discards the rest of the WR until then.
 */
#define RPCRDMA_CM_RW_SGES 5
/* The most pages one chunk may have (4 MiB with 4 KiB pages). */
#define RPCRDMA_CM_CHUNK_MAX_PAGES 1024

/*
 * chunk.c: the pending REG_MRs of a chain of chunks, as WRs in front of a
 * Send, and their state once posted (see rpcrdma_cm_send_post()).
 */
struct rpcrdma_cm_chunk;
bool rpcrdma_cm_chain_of(struct rpcrdma_cm_chunk *first, struct rpcrdma_cm_qp *qp);
struct ib_send_wr *rpcrdma_cm_chain_wrs(struct rpcrdma_cm_chunk *first, struct ib_send_wr *send);
void rpcrdma_cm_chain_posted(struct rpcrdma_cm_chunk *first, const struct ib_send_wr *bad);

/*
 * chunk.c: an RDMA Write chain prepared for a Send (rpcrdma_cm_rdma_write_held())
 * linked in front of it in one post, and its state once posted (see
 * rpcrdma_cm_send_post()).
 */
struct rpcrdma_cm_rw;
struct rpcrdma_cm_qp *rpcrdma_cm_rw_qp(const struct rpcrdma_cm_rw *rw);
struct ib_send_wr *rpcrdma_cm_rw_link(struct rpcrdma_cm_rw *rw, struct ib_send_wr *next,
				      struct ib_send_wr **last);
enum {
	RPCRDMA_CM_RW_POSTED,
	RPCRDMA_CM_RW_UNPOSTED,
	RPCRDMA_CM_RW_PART,
};
int rpcrdma_cm_rw_linked_posted(struct rpcrdma_cm_rw *rw, const struct ib_send_wr *first,
				const struct ib_send_wr *last, const struct ib_send_wr *send,
				int ret, const struct ib_send_wr *bad);
void rpcrdma_cm_rw_report_part(struct rpcrdma_cm_qp *qp, bool write, int ret);

/* Teardown (chunk.c): the MRs and the chunks' memory kept for reuse go. */
void rpcrdma_cm_chunk_pools_destroy(struct rpcrdma_cm_qp *qp);
/* Frees the chains posted in part (teardown, after the drain). */
void rpcrdma_cm_rw_orphans_free(struct rpcrdma_cm_qp *qp);
void rpcrdma_cm_reg_init(struct rpcrdma_cm_qp *qp);
void rpcrdma_cm_reg_orphans_free(struct rpcrdma_cm_qp *qp);

#endif /* RPCRDMA_CM_QP_H */
