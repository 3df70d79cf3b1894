// SPDX-License-Identifier: GPL-2.0
/*
 * rpcrdma_cm: one connection's PD, CQ, RC QP and message buffers
 * (rust/sys/qp.rs).
 *
 * Receives (@recv_size octets each) are posted as the connection needs
 * them, up to @recv_depth: @recv_initial at creation, more by
 * rpcrdma_cm_recv_grow() when the owner grants more credits (@recv_want).
 * A completion whose message leaves fewer than @recv_want posted has its
 * Receive replaced before the message is handed over, by free or new
 * buffers, up to a quarter of @recv_want beyond it (at most
 * RPCRDMA_CM_RECV_BATCH - 1) and posted as one chain, as svcrdma and
 * xprtrdma refresh theirs: the next completions find theirs replaced
 * already, and the thread a message wakes (an nfsd thread) does not wait
 * for this context to post. A buffer the owner keeps (nfsd's request holds
 * its argument until xpo_release_ctxt) is so replaced too (after the
 * handover where a quarter is none), so the Receives posted never fall
 * below the credits granted however long nfsd keeps its buffers (up to
 * 4 * @recv_depth buffers in all: the calls the grant lets in, plus the
 * answered ones nfsd's threads release; past that, or without memory,
 * @recv_want and so the grant shrink instead). A handled or released
 * buffer is posted again if Receives are short, else kept free. Send
 * buffers (@send_size octets) are allocated on first use, up to
 * @send_depth, and kept on a free list. An idle connection so costs its
 * initial Receives, whatever the sizes, and once it has carried a message,
 * the batch beyond them and the buffer last handled.
 *
 * Most Sends are posted unsignaled, as xprtrdma does: one in
 * RPCRDMA_CM_SEND_BATCH asks for a completion, and so does any that takes
 * the last buffer (none free, @send_depth allocated). A Send Queue completes in order, so a Send's
 * completion gives back its buffer and every buffer posted before it
 * (@send_posted, in posting order); a Send that fails completes, signaled or
 * not, and gives back the same. That saves a completion, an interrupt and a
 * CQ poll per RPC.
 *
 * Receive completions are handed to Rust from a work item on the module's
 * Receive workqueue, @recv_wq (process context, one message at a time, in
 * order), so the handler may sleep, for instance while it assembles a call's
 * Read chunks with RDMA Read or waits for a LOCAL_INV. An owner whose handler
 * never waits for a completion of this QP (nfsd's connections: they queue
 * the call for an nfsd thread; mounts': a Reply's LOCAL_INVs complete the
 * call) sets @recv_direct: its completions are handed over in the CQ's own
 * work (IB_POLL_WORKQUEUE, process context), in order, as svcrdma's and
 * xprtrdma's are, without a second work item per message.
 *
 * Teardown (rpcrdma_cm_destroy_qp) sets @closed under the lock, so nothing
 * new is posted; drains the QP (every posted WR completes, flushed if need
 * be); lets the Receive work finish; frees the chains and chunks left to
 * it until then (@rw_orphans, @reg_orphans); waits for operations in progress
 * (@users); frees the QP, buffers and CQ; then waits for every other holder
 * of @ref (Rust handles, chunks) to let go, whose operations all fail now,
 * and frees the PD. Nothing of the connection is left on the device when it
 * returns.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/delay.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>

#include "qp.h"
#include "rpcrdma_cm_sys.h"

/*
 * The last reference went (destroy_qp's own, or a holder's after it): free the
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

void rpcrdma_cm_qp_get(struct rpcrdma_cm_qp *qp)
{
	kref_get(&qp->ref);
}

void rpcrdma_cm_qp_put(struct rpcrdma_cm_qp *qp)
{
	kref_put(&qp->ref, rpcrdma_cm_qp_release);
}

/* Begins an operation (@users) unless the QP is closing. */
static int rpcrdma_cm_qp_enter_locked(struct rpcrdma_cm_qp *qp)
{
	lockdep_assert_held(&qp->lock);
	if (qp->closed)
		return -ENOTCONN;
	atomic_inc(&qp->users);
	return 0;
}

int rpcrdma_cm_qp_enter(struct rpcrdma_cm_qp *qp)
{
	unsigned long flags;
	int ret;

	spin_lock_irqsave(&qp->lock, flags);
	ret = rpcrdma_cm_qp_enter_locked(qp);
	spin_unlock_irqrestore(&qp->lock, flags);
	return ret;
}

/*
 * Ends an operation begun by rpcrdma_cm_qp_enter(). The last one to leave
 * wakes teardown, which may then free @qp at once: the leaver may hold no
 * reference of its own (a kept Receive buffer's release, a chain's
 * completion), so it holds one across the wake-up, and teardown's final
 * wait for @released keeps @qp until it is put.
 */
static void __rpcrdma_cm_qp_leave(struct rpcrdma_cm_qp *qp, unsigned int test_delay_ms)
{
	kref_get(&qp->ref);	/* @users > 0 until below: teardown still holds its own */
	if (atomic_dec_and_test(&qp->users)) {
		/* Selftests widen the window between the last leave and the wake. */
		if (test_delay_ms)
			msleep(test_delay_ms);
		rpcrdma_cm_qp_wake(qp);
	}
	rpcrdma_cm_qp_put(qp);
}

void rpcrdma_cm_qp_leave(struct rpcrdma_cm_qp *qp)
{
	__rpcrdma_cm_qp_leave(qp, 0);
}

int rpcrdma_cm_post_send(struct rpcrdma_cm_qp *qp, const struct ib_send_wr *wr)
{
	unsigned long flags;
	int ret;

	spin_lock_irqsave(&qp->lock, flags);
	ret = qp->closed ? -ENOTCONN : ib_post_send(qp->id->qp, wr, NULL);
	spin_unlock_irqrestore(&qp->lock, flags);
	return ret;
}

/*
 * Starts a disconnect of the QP's connection (rdma_disconnect(); the CM event
 * follows). The id outlives every holder of the QP: it is destroyed only
 * after rpcrdma_cm_destroy_qp() returned.
 */
int rpcrdma_cm_qp_disconnect(struct rpcrdma_cm_qp *qp)
{
	return rdma_disconnect(qp->id);
}

/* A Send slot whose buffer is being allocated. */
#define RPCRDMA_CM_SLOT_TAKEN ((struct rpcrdma_cm_buf *)1)

static struct rpcrdma_cm_buf *rpcrdma_cm_buf_alloc(struct rpcrdma_cm_qp *qp, u32 size,
						   enum dma_data_direction dir)
{
	struct ib_device *dev = qp->id->device;
	struct rpcrdma_cm_buf *b;

	b = kzalloc(sizeof(*b), GFP_KERNEL);
	if (!b)
		return NULL;
	b->qp = qp;
	b->size = size;
	b->addr = kmalloc(size, GFP_KERNEL | __GFP_NOWARN);
	if (!b->addr)
		goto fail;
	b->dma = ib_dma_map_single(dev, b->addr, size, dir);
	if (ib_dma_mapping_error(dev, b->dma))
		goto fail;
	return b;
fail:
	kfree(b->addr);
	kfree(b);
	return NULL;
}

static void rpcrdma_cm_buf_free(struct rpcrdma_cm_qp *qp, struct rpcrdma_cm_buf *b,
				enum dma_data_direction dir)
{
	if (!b)
		return;
	ib_dma_unmap_single(qp->id->device, b->dma, b->size, dir);
	kfree(b->addr);
	kfree(b);
}

static void rpcrdma_cm_bufs_free(struct rpcrdma_cm_qp *qp, struct rpcrdma_cm_buf **bufs,
				 u32 n, enum dma_data_direction dir)
{
	u32 i;

	if (!bufs)
		return;
	for (i = 0; i < n; i++)
		rpcrdma_cm_buf_free(qp, bufs[i], dir);
	kfree(bufs);
}

static void rpcrdma_cm_recv_done(struct ib_cq *cq, struct ib_wc *wc);

/*
 * Posts the @n (at most RPCRDMA_CM_RECV_BATCH) Receive buffers of @bufs as
 * one chain, as svcrdma and xprtrdma post theirs; those the QP refuses (it
 * is closing, or the device failed the post) go back to @recv_free. Returns
 * how many were posted. The caller holds qp->lock.
 */
static u32 rpcrdma_cm_post_recvs_locked(struct rpcrdma_cm_qp *qp,
					struct rpcrdma_cm_buf **bufs, u32 n)
{
	struct ib_recv_wr wr[RPCRDMA_CM_RECV_BATCH];
	struct ib_sge sge[RPCRDMA_CM_RECV_BATCH];
	const struct ib_recv_wr *bad = NULL;
	u32 i, m = n, posted = 0;

	lockdep_assert_held(&qp->lock);
	/* More than one chain can hold: the rest go back as if refused. */
	if (WARN_ON_ONCE(m > RPCRDMA_CM_RECV_BATCH))
		m = RPCRDMA_CM_RECV_BATCH;
	if (!m || qp->closed)
		goto refused;
	for (i = 0; i < m; i++) {
		struct rpcrdma_cm_buf *b = bufs[i];

		b->cqe.done = rpcrdma_cm_recv_done;
		ib_dma_sync_single_for_device(qp->id->device, b->dma, b->size,
					      DMA_FROM_DEVICE);
		sge[i] = (struct ib_sge){
			.addr = b->dma,
			.length = b->size,
			.lkey = qp->pd->local_dma_lkey,
		};
		wr[i] = (struct ib_recv_wr){
			.next = i + 1 < m ? &wr[i + 1] : NULL,
			.wr_cqe = &b->cqe,
			.sg_list = &sge[i],
			.num_sge = 1,
		};
	}
	/* Counted first: a completion may run before ib_post_recv() returns. */
	atomic_add(m, &qp->recv_posted);
	posted = m;
	if (ib_post_recv(qp->id->qp, wr, &bad)) {
		/* WRs before @bad were posted; @bad and those after it were not. */
		posted = bad ? bad - wr : 0;
		atomic_sub(m - posted, &qp->recv_posted);
	}
refused:
	for (i = posted; i < n; i++)
		list_add(&bufs[i]->list, &qp->recv_free);
	return posted;
}

static void rpcrdma_cm_recv_handle(struct rpcrdma_cm_qp *qp, struct rpcrdma_cm_buf *b);

/* CQ context: hand the message over, or queue it for the work item. */
static void rpcrdma_cm_recv_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct rpcrdma_cm_buf *b = container_of(wc->wr_cqe, struct rpcrdma_cm_buf, cqe);
	struct rpcrdma_cm_qp *qp = b->qp;
	unsigned long flags;

	/* Counted as handled before it stops counting as posted. */
	if (wc->status == IB_WC_SUCCESS)
		atomic_inc(&qp->recv_handling);
	atomic_dec(&qp->recv_posted);
	b->status = wc->status;
	b->byte_len = wc->status == IB_WC_SUCCESS ? min(wc->byte_len, b->size) : 0;
	b->with_inv = wc->status == IB_WC_SUCCESS && (wc->wc_flags & IB_WC_WITH_INVALIDATE);
	b->inv_rkey = b->with_inv ? wc->ex.invalidate_rkey : 0;
	if (qp->recv_direct) {
		rpcrdma_cm_recv_handle(qp, b);
		return;
	}
	spin_lock_irqsave(&qp->lock, flags);
	list_add_tail(&b->list, &qp->recv_ready);
	spin_unlock_irqrestore(&qp->lock, flags);
	queue_work(qp->recv_wq, &qp->recv_work);
}

/*
 * Gives a handled buffer back: posted again if fewer than @recv_want
 * Receives are posted, else onto the free list. The caller holds qp->lock.
 */
static void rpcrdma_cm_recv_return_locked(struct rpcrdma_cm_buf *b)
{
	struct rpcrdma_cm_qp *qp = b->qp;

	lockdep_assert_held(&qp->lock);
	if (atomic_read(&qp->recv_posted) < qp->recv_want)
		rpcrdma_cm_post_recvs_locked(qp, &b, 1);
	else
		list_add(&b->list, &qp->recv_free);
}

/*
 * Receives to post now: none while @recv_want are posted, else up to
 * @recv_want and @extra beyond it. The caller holds qp->lock.
 */
static u32 rpcrdma_cm_recv_room_locked(struct rpcrdma_cm_qp *qp, u32 extra)
{
	u32 posted = atomic_read(&qp->recv_posted);

	lockdep_assert_held(&qp->lock);
	if (qp->closed || posted >= qp->recv_want)
		return 0;
	return qp->recv_want + extra - posted;
}

/*
 * Once fewer than @recv_want Receives are posted, posts free or new buffers
 * up to @recv_want and @extra (< RPCRDMA_CM_RECV_BATCH) more, up to
 * RPCRDMA_CM_RECV_BATCH in each chain: the completions that follow find
 * theirs replaced already. Buffers that cannot be had (no memory, or
 * @recv_max allocated) below @recv_want lower @recv_want instead, down to
 * RPCRDMA_CM_RECV_FLOOR, so that the credits granted never exceed the
 * Receives posted; released buffers are reposted up to it, and the owner's
 * next grow raises it again. At most @recv_want + @extra are posted, so the
 * drain's slot stays free. Process context; the caller has entered the QP
 * or is its Receive work.
 */
static void rpcrdma_cm_recv_refill(struct rpcrdma_cm_qp *qp, u32 extra)
{
	struct rpcrdma_cm_buf *batch[RPCRDMA_CM_RECV_BATCH];
	struct rpcrdma_cm_buf *b;
	unsigned long flags;
	unsigned int nofs;
	u32 i, n, room, below, take, posted, missing;
	bool stop;

	/* Most calls: nothing to do, seen without the locks. */
	if (atomic_read(&qp->recv_posted) >= READ_ONCE(qp->recv_want))
		return;
	/* No fs reclaim: an NFS Reply may wait for this very refill. */
	nofs = memalloc_nofs_save();
	mutex_lock(&qp->recv_mutex);
	for (;;) {
		spin_lock_irqsave(&qp->lock, flags);
		room = min_t(u32, rpcrdma_cm_recv_room_locked(qp, extra),
			     RPCRDMA_CM_RECV_BATCH);
		/* Of those, needed to reach @recv_want. */
		below = room ? qp->recv_want - atomic_read(&qp->recv_posted) : 0;
		for (n = 0; n < room; n++) {
			b = list_first_entry_or_null(&qp->recv_free, struct rpcrdma_cm_buf, list);
			if (!b)
				break;
			list_del(&b->list);
			batch[n] = b;
		}
		spin_unlock_irqrestore(&qp->lock, flags);
		if (!room)
			break;
		/* @nrecv changes only under @recv_mutex. */
		for (; n < room && qp->nrecv < qp->recv_max; n++) {
			b = rpcrdma_cm_buf_alloc(qp, qp->recv_size, DMA_FROM_DEVICE);
			if (!b)
				break;
			spin_lock_irqsave(&qp->lock, flags);
			/* In the array first: teardown frees it whatever happens. */
			qp->recv[qp->nrecv] = b;
			WRITE_ONCE(qp->nrecv, qp->nrecv + 1);
			spin_unlock_irqrestore(&qp->lock, flags);
			batch[n] = b;
		}
		spin_lock_irqsave(&qp->lock, flags);
		/*
		 * Releases may have posted while the lock was dropped: never
		 * more than @recv_want + @extra posted; the rest is free again.
		 */
		take = min(n, rpcrdma_cm_recv_room_locked(qp, extra));
		/* Refused (the QP is closing, or the device failed): no retry. */
		stop = rpcrdma_cm_post_recvs_locked(qp, batch, take) < take;
		for (i = take; i < n; i++)
			list_add(&batch[i]->list, &qp->recv_free);
		if (n < room) {
			/*
			 * Short of buffers: what is missing below @recv_want
			 * lowers it (never below the floor, where released
			 * buffers repost up to it); none is tried again now.
			 * Missing: what this pass needed and did not get, but
			 * no more than is missing now (a release may have
			 * posted meanwhile; Receives that completed meanwhile
			 * are not missing buffers).
			 */
			missing = below > n ? below - n : 0;
			posted = atomic_read(&qp->recv_posted);
			missing = min(missing, qp->recv_want > posted ? qp->recv_want - posted : 0);
			qp->recv_short += missing;
			WRITE_ONCE(qp->recv_want,
				   max_t(u32, qp->recv_want - missing,
					 min_t(u32, qp->recv_want, RPCRDMA_CM_RECV_FLOOR)));
			stop = true;
		}
		spin_unlock_irqrestore(&qp->lock, flags);
		if (stop)
			break;
	}
	mutex_unlock(&qp->recv_mutex);
	memalloc_nofs_restore(nofs);
}

/*
 * Receives a refill before a handover posts beyond @recv_want: a quarter of
 * it, at most RPCRDMA_CM_RECV_BATCH - 1 (none for a connection of a few
 * large buffers, whose memory they would be).
 */
static u32 rpcrdma_cm_recv_extra(struct rpcrdma_cm_qp *qp)
{
	return min_t(u32, RPCRDMA_CM_RECV_BATCH - 1, READ_ONCE(qp->recv_want) / 4);
}

/*
 * Process context (the Receive work, or the CQ's for @recv_direct): hands one
 * message to Rust, after its Receive was replaced (with a batch, when fewer
 * than @recv_want are posted), as svcrdma replaces its Receives before it
 * wakes an nfsd thread: the thread the message wakes finds this context done
 * with it. A buffer Rust does not keep is given back (posted again only if
 * Receives are short); a kept one is released later, and replaced now if the
 * refill before did not (no batch for this connection).
 */
static void rpcrdma_cm_recv_handle(struct rpcrdma_cm_qp *qp, struct rpcrdma_cm_buf *b)
{
	struct rpcrdma_cm_wc_info info = {
		.status = b->status,
		.data = b->status == IB_WC_SUCCESS ? b->addr : NULL,
		.len = b->byte_len,
		.invalidate_rkey = b->inv_rkey,
		.with_invalidate = b->with_inv,
	};
	unsigned long flags;
	unsigned int nofs;
	u32 extra;
	bool kept;

	if (b->status == IB_WC_SUCCESS) {
		ib_dma_sync_single_for_cpu(qp->id->device, b->dma, b->size, DMA_FROM_DEVICE);
		extra = rpcrdma_cm_recv_extra(qp);
		if (extra)
			rpcrdma_cm_recv_refill(qp, extra);
	}
	/*
	 * Without the lock: nobody else has @b until the callback hands it
	 * over, and a handover to another thread synchronises with it (a lock
	 * or queue; for a mount, whose LOCAL_INV completions run in this same
	 * CQ work, the work's order), so a release, which reads @in_cb under
	 * the lock, sees it set.
	 */
	WRITE_ONCE(b->in_cb, true);
	/*
	 * No fs reclaim from here: it may wait for an NFS Reply that only this
	 * context can deliver (as rpciod, under NOFS).
	 */
	nofs = memalloc_nofs_save();
	kept = rpcrdma_cm_recv_rs(qp->owner, qp, b, &info);
	if (kept)
		rpcrdma_cm_recv_refill(qp, 0);
	memalloc_nofs_restore(nofs);
	spin_lock_irqsave(&qp->lock, flags);
	b->in_cb = false;
	/* Kept: rpcrdma_cm_recv_keep() counted it as kept instead. */
	if (!kept && b->status == IB_WC_SUCCESS)
		atomic_dec(&qp->recv_handling);
	/*
	 * Not kept: given back now. Kept and already released by its new
	 * owner (on another CPU, or by the callback itself): given back now,
	 * as the release left it to us.
	 */
	if ((!kept && b->status == IB_WC_SUCCESS) || b->released_in_cb) {
		b->released_in_cb = false;
		rpcrdma_cm_recv_return_locked(b);
	}
	spin_unlock_irqrestore(&qp->lock, flags);
}

/* The Receive work: each queued message, in order. */
static void rpcrdma_cm_recv_work(struct work_struct *work)
{
	struct rpcrdma_cm_qp *qp = container_of(work, struct rpcrdma_cm_qp, recv_work);
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
		rpcrdma_cm_recv_handle(qp, b);
	}
}

/*
 * Keeps a successfully received buffer past its callback (nfsd's request
 * owns it until xpo_release_ctxt). The kept buffer holds its QP twice:
 * in @users, so teardown frees the buffers only after every kept one was
 * released (the QP is not closed yet when the callback runs: teardown
 * flushes this work before it waits for @users), and in @ref, so the QP
 * itself outlives the release, as svcrdma's receive contexts hold their
 * transport. Returns that QP.
 */
struct rpcrdma_cm_qp *rpcrdma_cm_recv_keep(struct rpcrdma_cm_buf *b)
{
	rpcrdma_cm_qp_get(b->qp);
	atomic_inc(&b->qp->users);
	/* Counted as kept before it stops counting as handled. */
	atomic_inc(&b->qp->recv_kept);
	atomic_dec(&b->qp->recv_handling);
	return b->qp;
}

/*
 * A kept buffer is done with: posted again if Receives are short, else
 * free for the next one kept (rpcrdma_cm_recv_return_locked()).
 */
void rpcrdma_cm_recv_release(struct rpcrdma_cm_buf *b)
{
#ifdef RPCRDMA_CM_TEST
	unsigned int delay = READ_ONCE(rpcrdma_cm_param_test_release_delay_ms.value);
#else
	const unsigned int delay = 0;
#endif
	struct rpcrdma_cm_qp *qp = b->qp;
	unsigned long flags;

	/*
	 * Process context: nfsd's xpo_release_ctxt, or a completion's work
	 * (a mount's Reply finished after its LOCAL_INVs, a call dropped by
	 * nfsd's direct Receive handling). The test delay may sleep; in a
	 * completion's work it holds up that CQ, in test builds only.
	 */
	if (delay)
		msleep(delay);
	spin_lock_irqsave(&qp->lock, flags);
	/*
	 * Released while the callback that kept it still runs (and may still
	 * read the message): that callback's end gives it back. The QP and
	 * the buffer outlive it (teardown drains and flushes the callbacks
	 * before it frees either).
	 */
	if (b->in_cb)
		b->released_in_cb = true;
	else
		rpcrdma_cm_recv_return_locked(b);
	spin_unlock_irqrestore(&qp->lock, flags);
	atomic_dec(&qp->recv_kept);
	__rpcrdma_cm_qp_leave(qp, delay);
	rpcrdma_cm_qp_put(qp);
}

/*
 * A Send completed, and with it every Send posted before it (signaled or
 * not): their buffers go back on the free list.
 */
static void rpcrdma_cm_send_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct rpcrdma_cm_buf *b = container_of(wc->wr_cqe, struct rpcrdma_cm_buf, cqe);
	struct rpcrdma_cm_qp *qp = b->qp;
	struct rpcrdma_cm_wc_info info = { .status = wc->status };
	struct rpcrdma_cm_buf *done;
	unsigned long flags;

	spin_lock_irqsave(&qp->lock, flags);
	/* A completion of a buffer not posted: leave the lists alone. */
	if (!WARN_ON_ONCE(!b->posted)) {
		do {
			done = list_first_entry(&qp->send_posted, struct rpcrdma_cm_buf, list);
			done->posted = false;
			list_move(&done->list, &qp->send_free);
		} while (done != b);
	}
	spin_unlock_irqrestore(&qp->lock, flags);
	rpcrdma_cm_send_rs(qp->owner, qp, &info);
}

/*
 * Raises the Receives to keep posted by up to @n (never past @recv_depth)
 * and posts them. Returns how many were added, or an error if none was.
 * Any thread may call it; teardown waits for it.
 */
int rpcrdma_cm_recv_grow(struct rpcrdma_cm_qp *qp, u32 n)
{
	unsigned long flags;
	u32 before, add;
	int ret;

	ret = rpcrdma_cm_qp_enter(qp);
	if (ret)
		return ret;
	spin_lock_irqsave(&qp->lock, flags);
	before = qp->recv_want;
	add = min(n, qp->recv_depth - qp->recv_want);
	WRITE_ONCE(qp->recv_want, qp->recv_want + add);
	spin_unlock_irqrestore(&qp->lock, flags);
	if (add)
		rpcrdma_cm_recv_refill(qp, 0);
	spin_lock_irqsave(&qp->lock, flags);
	/* What the refill could not post, it took back from @recv_want. */
	add = qp->recv_want > before ? qp->recv_want - before : 0;
	spin_unlock_irqrestore(&qp->lock, flags);
	rpcrdma_cm_qp_leave(qp);
	if (!add && n && before < qp->recv_depth)
		return -ENOMEM;
	return add;
}

/*
 * Receives the QP keeps posted (*@want: what credits are granted against),
 * messages received and being handled, neither given back nor kept yet
 * (*@handling), and buffers the owner keeps (*@kept).
 */
void rpcrdma_cm_recv_counts(struct rpcrdma_cm_qp *qp, u32 *want, u32 *handling, u32 *kept)
{
	*want = READ_ONCE(qp->recv_want);
	*handling = atomic_read(&qp->recv_handling);
	*kept = atomic_read(&qp->recv_kept);
}

/* Receive buffers allocated, and times a kept one could not be replaced. */
void rpcrdma_cm_recv_allocated(struct rpcrdma_cm_qp *qp, u32 *allocated, u32 *short_count)
{
	*allocated = READ_ONCE(qp->nrecv);
	*short_count = READ_ONCE(qp->recv_short);
}

/* Send buffers allocated so far (and being allocated). */
u32 rpcrdma_cm_send_allocated(struct rpcrdma_cm_qp *qp)
{
	return READ_ONCE(qp->nsend);
}

/*
 * A PD, one CQ for both directions (polled from a workqueue), an RC QP on
 * @id's device with room for @attr->send_depth Sends, plus FRWR registrations
 * and invalidations if @attr->registers, for RDMA Read/Write chains (room for one as long as
 * the largest chunk needs, up to RPCRDMA_CM_RW_SGES pages per WR, or for
 * that many short ones at once, see rpcrdma_cm_rw()), for @attr->recv_depth
 * Receives, and one WR each way for the drain. @attr->recv_initial Receive
 * buffers are posted before this returns. Completions go to @owner.
 */
int rpcrdma_cm_create_qp(struct rdma_cm_id *id,
			 const struct rpcrdma_cm_qp_attr *a, void *owner,
			 struct rpcrdma_cm_qp **out)
{
	struct ib_qp_init_attr attr = {};
	struct rpcrdma_cm_qp *qp;
	u32 sges, own, rw;
	int ret;

	if (!id->device)
		return -ENODEV;
	if (!a->send_depth || a->send_depth > 1024 || !a->recv_depth ||
	    a->recv_depth > 1024 || !a->recv_initial || a->recv_initial > a->recv_depth ||
	    !a->send_size || !a->recv_size || !a->recv_wq)
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
	INIT_LIST_HEAD(&qp->send_posted);
	INIT_LIST_HEAD(&qp->recv_ready);
	INIT_LIST_HEAD(&qp->recv_free);
	mutex_init(&qp->recv_mutex);
	atomic_set(&qp->recv_kept, 0);
	atomic_set(&qp->recv_handling, 0);
	INIT_LIST_HEAD(&qp->mr_free);
	INIT_LIST_HEAD(&qp->chunk_free);
	atomic_set(&qp->chunks_allocated, 0);
	INIT_LIST_HEAD(&qp->rw_orphans);
	rpcrdma_cm_reg_init(qp);
	qp->mr_pages = min_t(u32, id->device->attrs.max_fast_reg_page_list_len,
			     RPCRDMA_CM_CHUNK_MAX_PAGES);
	INIT_WORK(&qp->recv_work, rpcrdma_cm_recv_work);
	atomic_set(&qp->recv_posted, 0);
	qp->send_size = a->send_size;
	qp->recv_size = a->recv_size;
	qp->send_depth = a->send_depth;
	qp->recv_depth = a->recv_depth;
	qp->recv_max = 4 * a->recv_depth;
	qp->recv_wq = a->recv_wq;
	qp->recv_direct = a->recv_direct;
	qp->pd = ib_alloc_pd(id->device, 0);
	if (IS_ERR(qp->pd)) {
		ret = PTR_ERR(qp->pd);
		qp->pd = NULL;
		goto out;
	}
	sges = min3(id->device->attrs.max_send_sge, id->device->attrs.max_sge_rd,
		    RPCRDMA_CM_RW_SGES);
	sges = max(sges, 1U);
	own = a->send_depth * (1 + (a->registers ? 2 * RPCRDMA_CM_MR_WRS : 0)) + 1;
	rw = DIV_ROUND_UP(RPCRDMA_CM_CHUNK_MAX_PAGES, sges);
	/*
	 * Every WR that can be outstanding, signaled or not (a flush completes
	 * them all): ours, the RDMA Read/Write room (up to three WRs per context
	 * where rdma_rw registers), the Receives and the drain. A CQ that
	 * overflowed would lose completions, the drain's among them.
	 */
	qp->cq = ib_alloc_cq_any(id->device, NULL,
				 own + 3 * rw + a->recv_depth + RPCRDMA_CM_RECV_BATCH,
				 IB_POLL_WORKQUEUE);
	if (IS_ERR(qp->cq)) {
		ret = PTR_ERR(qp->cq);
		qp->cq = NULL;
		goto out;
	}
	attr.send_cq = qp->cq;
	attr.recv_cq = qp->cq;
	attr.cap.max_send_wr = own;
	/* A refill's batch beyond @recv_depth, and the drain. */
	attr.cap.max_recv_wr = a->recv_depth + RPCRDMA_CM_RECV_BATCH;
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
	/* Never more in flight than the CQ has room for. */
	qp->rw_wrs = min(qp->rw_wrs, 3 * rw);
	atomic_set(&qp->rw_avail, qp->rw_wrs);

	ret = -ENOMEM;
	qp->send = kcalloc(a->send_depth, sizeof(*qp->send), GFP_KERNEL);
	qp->recv = kcalloc(qp->recv_max, sizeof(*qp->recv), GFP_KERNEL);
	if (!qp->send || !qp->recv)
		goto out;
	/* Receives first: a peer may send as soon as the connection is up. */
	ret = rpcrdma_cm_recv_grow(qp, a->recv_initial);
	if (ret < 0)
		goto out;
	if (ret != a->recv_initial) {
		ret = -ENOMEM;
		goto out;
	}
	*out = qp;
	return 0;

out:
	rpcrdma_cm_destroy_qp(qp);
	return ret;
}

/*
 * Stops posting, flushes every posted WR (their callbacks run and return before
 * ib_drain_qp() does), lets the Receive work finish, waits for operations in
 * progress, frees the QP, buffers and CQ, then waits for the other holders
 * (Rust handles, chunks: their operations fail now, so they let go at once)
 * and frees the PD and @qp. Must not be called from a completion callback or
 * the Receive work of this QP, nor by a thread holding a reference (it would
 * wait for itself).
 */
void rpcrdma_cm_destroy_qp(struct rpcrdma_cm_qp *qp)
{
	unsigned long flags;

	spin_lock_irqsave(&qp->lock, flags);
	qp->closed = true;
	spin_unlock_irqrestore(&qp->lock, flags);
	/* Chains waiting for Send Queue room give up (rpcrdma_cm_rw()). */
	wake_up_all(&qp->wq);
	if (qp->id->qp)
		ib_drain_qp(qp->id->qp);
	flush_work(&qp->recv_work);
	rpcrdma_cm_rw_orphans_free(qp);
	rpcrdma_cm_reg_orphans_free(qp);
	wait_event(qp->wq, atomic_read(&qp->users) == 0);
	rpcrdma_cm_chunk_pools_destroy(qp);
	if (qp->id->qp)
		rdma_destroy_qp(qp->id);
	rpcrdma_cm_bufs_free(qp, qp->send, qp->send_depth, DMA_TO_DEVICE);
	rpcrdma_cm_bufs_free(qp, qp->recv, qp->nrecv, DMA_FROM_DEVICE);
	qp->send = NULL;
	qp->recv = NULL;
	if (qp->cq)
		ib_free_cq(qp->cq);
	qp->cq = NULL;
	kref_put(&qp->ref, rpcrdma_cm_qp_release);
	while (!wait_for_completion_timeout(&qp->released, 10 * HZ))
		pr_warn("a closed connection still waits for %u holder(s) of its QP\n",
			kref_read(&qp->ref));
	kfree(qp);
}

/*
 * Takes a Send buffer, allocating one if none is free and fewer than
 * @send_depth exist: its address and size in *@addr and *@size. The caller
 * fills it and passes it to rpcrdma_cm_send_post() or rpcrdma_cm_send_abort();
 * until then teardown waits. -ENOTCONN once the QP is closing, -EBUSY if all
 * @send_depth buffers are in use, -ENOMEM. May sleep.
 */
int rpcrdma_cm_send_get(struct rpcrdma_cm_qp *qp, struct rpcrdma_cm_buf **out,
			u8 **addr, u32 *size)
{
	struct rpcrdma_cm_buf *b = NULL;
	unsigned long flags;
	int slot = -1;

	spin_lock_irqsave(&qp->lock, flags);
	/* Entered and a buffer taken in one locked section. */
	if (rpcrdma_cm_qp_enter_locked(qp)) {
		spin_unlock_irqrestore(&qp->lock, flags);
		return -ENOTCONN;
	}
	if (!list_empty(&qp->send_free)) {
		b = list_first_entry(&qp->send_free, struct rpcrdma_cm_buf, list);
		list_del(&b->list);
	} else if (qp->nsend < qp->send_depth) {
		/* A free slot exists: take it until the buffer is there. */
		for (slot = 0; qp->send[slot]; slot++)
			;
		qp->send[slot] = RPCRDMA_CM_SLOT_TAKEN;
		qp->nsend++;
	}
	spin_unlock_irqrestore(&qp->lock, flags);
	if (slot >= 0) {
		b = rpcrdma_cm_buf_alloc(qp, qp->send_size, DMA_TO_DEVICE);
		if (b)
			b->cqe.done = rpcrdma_cm_send_done;
		spin_lock_irqsave(&qp->lock, flags);
		/* Teardown, which frees the slots, waits for us (@users). */
		qp->send[slot] = b;
		if (!b)
			qp->nsend--;	/* the slot can be taken again */
		spin_unlock_irqrestore(&qp->lock, flags);
	}
	if (!b) {
		rpcrdma_cm_qp_leave(qp);
		return slot >= 0 ? -ENOMEM : -EBUSY;
	}
	*out = b;
	*addr = b->addr;
	*size = b->size;
	return 0;
}

/* Gives back a buffer that was not posted. */
void rpcrdma_cm_send_abort(struct rpcrdma_cm_buf *b)
{
	struct rpcrdma_cm_qp *qp = b->qp;
	unsigned long flags;

	spin_lock_irqsave(&qp->lock, flags);
	list_add(&b->list, &qp->send_free);
	spin_unlock_irqrestore(&qp->lock, flags);
	rpcrdma_cm_qp_leave(qp);
}

#ifdef RPCRDMA_CM_TEST
int rpcrdma_cm_post_part(struct rpcrdma_cm_qp *qp, struct ib_send_wr *first,
			 struct ib_send_wr *stop, struct rpcrdma_cm_uint_param *param,
			 const struct ib_send_wr **bad)
{
	struct ib_send_wr *last;
	int ret;

	if (!stop || first == stop || !rpcrdma_cm_param_take(param))
		return ib_post_send(qp->id->qp, first, bad);
	for (last = first; last->next != stop; last = last->next)
		;
	last->next = NULL;
	ret = ib_post_send(qp->id->qp, first, bad);
	last->next = stop;
	if (ret)
		return ret;
	*bad = stop;
	return -ENOMEM;
}
#endif

/*
 * Posts @wrs, ending with the Send @send, under @qp->lock; @rw_first is the
 * first WR of an RDMA Write chain linked in front of the Send, or NULL. In a
 * test build, while test_rw_post_part counts, such a chain of several WRs
 * has its first posted and the rest refused (as rpcrdma_cm_rw_post() does
 * with a chain posted alone). Without such a chain, while
 * test_send_post_part counts, the REG_MRs in front of the Send are posted
 * and the Send refused, as a device short of room may do. (Not with one:
 * the chain's completion may free it before rpcrdma_cm_post_part() relinks
 * its last WR.)
 */
static int rpcrdma_cm_send_wrs(struct rpcrdma_cm_qp *qp, struct ib_send_wr *wrs,
			       struct ib_send_wr *send, struct ib_send_wr *rw_first,
			       const struct ib_send_wr **bad)
{
#ifdef RPCRDMA_CM_TEST
	if (rw_first)
		return rpcrdma_cm_post_part(qp, wrs, rw_first->next != send ? rw_first->next : NULL,
					    &rpcrdma_cm_param_test_rw_post_part, bad);
	return rpcrdma_cm_post_part(qp, wrs, send, &rpcrdma_cm_param_test_send_post_part, bad);
#else
	return ib_post_send(qp->id->qp, wrs, bad);
#endif
}

/*
 * Posts the first @len octets of @b as a Send, or as Send With Invalidate of
 * @inv_rkey if @invalidate; signaled one time in RPCRDMA_CM_SEND_BATCH, or
 * when it took the last buffer. The pending REG_MRs of the chunks chained
 * from @regs (rpcrdma_cm_chunk_chain(); may be NULL) go in front of it, in
 * the same post, then the WRs of @rw, an RDMA Write chain prepared for this
 * Send (rpcrdma_cm_rdma_write_held(); may be NULL), which the QP then owns
 * whatever happens: posted, it is released by its own completion; not
 * posted, it is dropped; posted in part, it stays until teardown and the
 * connection ends. On error the buffer is back on the free list, and those
 * REG_MRs that were not posted are undone; -EINVAL if a chunk of the chain,
 * or @rw, is another QP's (nothing posted).
 */
int rpcrdma_cm_send_post(struct rpcrdma_cm_buf *b, u32 len, bool invalidate,
			 u32 inv_rkey, struct rpcrdma_cm_chunk *regs, struct rpcrdma_cm_rw *rw)
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
	};
	/*
	 * A device that failed a post without saying where (none does: the
	 * verbs contract sets @bad) would leave every WR counted as posted,
	 * and warn: never an MR recycled while its registration may be live
	 * (a LOCAL_INV invalidates it at release).
	 */
	const struct ib_send_wr *bad = NULL;
	struct ib_send_wr *wrs, *next = &wr, *rw_first = NULL, *rw_last = NULL;
	int ret, rw_state = RPCRDMA_CM_RW_UNPOSTED;
	unsigned long flags;

	if (!rpcrdma_cm_chain_of(regs, qp) || (rw && rpcrdma_cm_rw_qp(rw) != qp)) {
		ret = -EINVAL;
		goto fail;
	}
	if (len > b->size) {
		ret = -EMSGSIZE;
		/* None posted: the chain's REG_MRs are undone. */
		spin_lock_irqsave(&qp->lock, flags);
		rpcrdma_cm_chain_posted(regs, rpcrdma_cm_chain_wrs(regs, NULL));
		spin_unlock_irqrestore(&qp->lock, flags);
		goto fail;
	}
	if (invalidate)
		wr.ex.invalidate_rkey = inv_rkey;
	ib_dma_sync_single_for_device(qp->id->device, b->dma, len, DMA_TO_DEVICE);
	spin_lock_irqsave(&qp->lock, flags);
	/*
	 * No buffer left, free or to allocate: ask at once for those posted
	 * back. (A buffer merely not allocated yet is not short: at queue
	 * depth one the free list is empty after each take.)
	 */
	if (qp->send_unsignaled + 1 >= RPCRDMA_CM_SEND_BATCH ||
	    (list_empty(&qp->send_free) && qp->nsend >= qp->send_depth))
		wr.send_flags = IB_SEND_SIGNALED;
	if (rw)
		next = rw_first = rpcrdma_cm_rw_link(rw, &wr, &rw_last);
	wrs = rpcrdma_cm_chain_wrs(regs, next);
	/* Posted under the lock: @send_posted is in the Send Queue's order. */
	if (qp->closed) {
		ret = -ENOTCONN;
		bad = wrs;
	} else {
		ret = rpcrdma_cm_send_wrs(qp, wrs, &wr, rw_first, &bad);
	}
	WARN_ON_ONCE(ret && !bad);
	rpcrdma_cm_chain_posted(regs, ret ? bad : NULL);
	if (rw)
		rw_state = rpcrdma_cm_rw_linked_posted(rw, rw_first, rw_last, &wr, ret, bad);
	if (!ret) {
		b->posted = true;
		list_add_tail(&b->list, &qp->send_posted);
		qp->send_unsignaled = wr.send_flags ? 0 : qp->send_unsignaled + 1;
	}
	spin_unlock_irqrestore(&qp->lock, flags);
	/* A chain posted is released by its completion; @rw may be gone. */
	rw = rw_state == RPCRDMA_CM_RW_UNPOSTED ? rw : NULL;
	if (rw_state == RPCRDMA_CM_RW_PART)
		rpcrdma_cm_rw_report_part(qp, true, ret);
	if (ret)
		goto fail;
	rpcrdma_cm_qp_leave(qp);
	return 0;
fail:
	if (rw)
		rpcrdma_cm_rw_drop(rw);
	rpcrdma_cm_send_abort(b);
	return ret;
}
