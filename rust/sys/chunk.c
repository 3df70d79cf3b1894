// SPDX-License-Identifier: GPL-2.0
/*
 * rpcrdma_cm: chunk memory (rust/sys/chunk.rs). A requester registers a chunk
 * with FRWR for its peer to read or write; a responder moves data between a
 * chunk and the peer's memory with RDMA Read or Write (rdma_rw).
 */

#include <linux/highmem.h>
#include <linux/scatterlist.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>
#include <rdma/rw.h>

#include "qp.h"
#include "rpcrdma_cm_sys.h"

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
	struct page **pages;	/* one per page, after @sgl (rpcrdma_cm_chunk_new) */
	u32 npages;
	u32 cap;		/* pages @sgl and @pages have room for */
	/* On @qp->chunk_free once ended; on @qp->reg_orphans until then, if parked. */
	struct list_head cache_entry;
	u32 len;
	u32 offset;		/* of the first octet in pages[0] */
	/* FRWR */
	struct ib_mr *mr;
	int nents;		/* ib_dma_map_sg() result; 0 when not mapped */
	/*
	 * How it is mapped: DMA_TO_DEVICE for a chunk the peer only reads,
	 * DMA_FROM_DEVICE for one it writes (as xprtrdma maps them), so an
	 * unmap never copies a bounce buffer back over what the CPU placed.
	 */
	enum dma_data_direction dir;
	struct ib_cqe inv_cqe;
	/*
	 * The REG_MR rpcrdma_cm_chunk_register() prepared, posted in front of
	 * the Send that names the chunk (rpcrdma_cm_send_post(): one
	 * ib_post_send() for both, as xprtrdma's frwr_send): @reg_pending
	 * until then. @chain links the chunks of one such Send, for the
	 * duration of the post only. It is posted unsignaled (its completion
	 * would only cost a CQE and a CQ poll per call): it is known done
	 * once a LOCAL_INV posted after it completed, whatever its status (a
	 * Send Queue completes in order), or the peer invalidated its rkey
	 * with the Send With Invalidate of its Reply (so it had the Send
	 * behind it).
	 */
	struct ib_reg_wr reg;
	bool reg_pending;
	struct rpcrdma_cm_chunk *chain;
	bool registered;	/* REG_MR posted: LOCAL_INV needed at release */
	/*
	 * rpcrdma_cm_chunks_inv(): the LOCAL_INV it posted (its batch, until
	 * the completion), or that it could not post one (@inv_skip: at
	 * release the chunk is parked until teardown, its MR deregistered then).
	 */
	bool inv_posted;
	bool inv_skip;
	struct rpcrdma_cm_inv_batch *inv_batch;
	/*
	 * Posted LOCAL_INVs not completed, plus one for the owner until
	 * rpcrdma_cm_chunk_free() (or, for a chunk parked there, until
	 * teardown): whoever ends the count ends the chunk
	 * (rpcrdma_cm_chunk_end()).
	 */
	atomic_t inflight;
	int mr_status;		/* first failed completion, else 0 */
	bool mr_invalid;	/* at rpcrdma_cm_chunk_free(): the MR can reach nothing */
	struct scatterlist sgl[];	/* one per page, then @pages */
};

/*
 * The LOCAL_INVs of one call's chunks, posted by rpcrdma_cm_chunks_inv():
 * whoever ends the count, the last completion or the poster once done,
 * hands @done to Rust, after every LOCAL_INV of the batch completed.
 */
struct rpcrdma_cm_inv_batch {
	atomic_t left;		/* LOCAL_INVs not completed, plus the poster's */
	int status;		/* the first failed completion's status, else 0 */
	void *done;
};

static void rpcrdma_cm_inv_batch_put(struct rpcrdma_cm_inv_batch *b)
{
	unsigned int nofs;

	if (!atomic_dec_and_test(&b->left))
		return;
	/* It may allocate: no fs reclaim, which may wait for this CQ. */
	nofs = memalloc_nofs_save();
	rpcrdma_cm_inv_done_rs(b->done, READ_ONCE(b->status));
	memalloc_nofs_restore(nofs);
	kfree(b);
}

/*
 * Chunks of up to RPCRDMA_CM_CHUNK_CACHE_PAGES pages (a small RPC's data,
 * a short Reply chunk: most chunks) are made that size and, once ended, kept
 * on their QP for the next one, up to RPCRDMA_CM_CHUNK_CACHE of them: no
 * allocation per call for them (xprtrdma keeps its MRs' scatterlists
 * likewise).
 */
#define RPCRDMA_CM_CHUNK_CACHE_PAGES 4
#define RPCRDMA_CM_CHUNK_CACHE 64

static size_t rpcrdma_cm_chunk_size(u32 cap)
{
	struct rpcrdma_cm_chunk *c;

	/* One allocation: the chunk, its scatterlist, its page array. */
	return struct_size(c, sgl, cap) + cap * sizeof(*c->pages);
}

/* A kept chunk of @qp's cache, if any. */
static struct rpcrdma_cm_chunk *rpcrdma_cm_chunk_kept(struct rpcrdma_cm_qp *qp)
{
	struct rpcrdma_cm_chunk *c = NULL;
	unsigned long flags;

	spin_lock_irqsave(&qp->lock, flags);
	if (!list_empty(&qp->chunk_free)) {
		c = list_first_entry(&qp->chunk_free, struct rpcrdma_cm_chunk, cache_entry);
		list_del(&c->cache_entry);
		qp->chunk_free_count--;
	}
	spin_unlock_irqrestore(&qp->lock, flags);
	return c;
}

/*
 * Keeps the ended chunk @c (its memory only) for @qp's next small chunk;
 * once the QP is closing, or with enough kept, it is freed. What is kept is
 * bounded (RPCRDMA_CM_CHUNK_CACHE) and lives as long as the connection.
 */
static void rpcrdma_cm_chunk_keep(struct rpcrdma_cm_qp *qp, struct rpcrdma_cm_chunk *c)
{
	unsigned long flags;
	bool kept = false;

	if (c->cap == RPCRDMA_CM_CHUNK_CACHE_PAGES) {
		spin_lock_irqsave(&qp->lock, flags);
		kept = !qp->closed && qp->chunk_free_count < RPCRDMA_CM_CHUNK_CACHE;
		if (kept) {
			list_add(&c->cache_entry, &qp->chunk_free);
			qp->chunk_free_count++;
		}
		spin_unlock_irqrestore(&qp->lock, flags);
	}
	if (!kept)
		kfree(c);
}

/* Chunks allocated on @qp so far (the others were kept ones, taken again). */
u32 rpcrdma_cm_chunks_allocated(struct rpcrdma_cm_qp *qp)
{
	return atomic_read(&qp->chunks_allocated);
}

/* A chunk of @npages pages (none filled in yet), holding a reference on @qp. */
static struct rpcrdma_cm_chunk *rpcrdma_cm_chunk_new(struct rpcrdma_cm_qp *qp, u32 npages,
						     u32 len)
{
	u32 cap = max_t(u32, npages, RPCRDMA_CM_CHUNK_CACHE_PAGES);
	struct rpcrdma_cm_chunk *c = NULL;

	if (!len || !npages || npages > RPCRDMA_CM_CHUNK_MAX_PAGES)
		return NULL;
	if (cap == RPCRDMA_CM_CHUNK_CACHE_PAGES)
		c = rpcrdma_cm_chunk_kept(qp);
	if (c) {
		memset(c, 0, rpcrdma_cm_chunk_size(cap));
	} else {
		c = kzalloc(rpcrdma_cm_chunk_size(cap), GFP_KERNEL);
		if (!c)
			return NULL;
		atomic_inc(&qp->chunks_allocated);
	}
	c->cap = cap;
	c->pages = (struct page **)&c->sgl[cap];
	sg_init_table(c->sgl, npages);
	c->len = len;
	atomic_set(&c->inflight, 1);
	rpcrdma_cm_qp_get(qp);
	c->qp = qp;
	return c;
}

struct rpcrdma_cm_chunk *rpcrdma_cm_chunk_alloc(struct rpcrdma_cm_qp *qp, u32 len)
{
	u32 i, npages = DIV_ROUND_UP(len, PAGE_SIZE);
	struct rpcrdma_cm_chunk *c = rpcrdma_cm_chunk_new(qp, npages, len);

	if (!c)
		return NULL;
	for (i = 0; i < npages; i++) {
		c->pages[i] = alloc_page(GFP_KERNEL | __GFP_ZERO);
		if (!c->pages[i]) {
			rpcrdma_cm_chunk_free(c, false, false);
			return NULL;
		}
		c->npages = i + 1;
		sg_set_page(&c->sgl[i], c->pages[i],
			    min_t(u32, PAGE_SIZE, len - i * PAGE_SIZE), 0);
	}
	return c;
}

/*
 * A chunk over @len octets of an RPC's pages, from byte @offset of @pages: the
 * peer reads or writes them in place. Each page is referenced while the chunk
 * lives, so none is freed while the peer may still reach it.
 */
struct rpcrdma_cm_chunk *rpcrdma_cm_chunk_wrap(struct rpcrdma_cm_qp *qp, struct page **pages,
					      u32 offset, u32 len)
{
	u32 i, po = offset_in_page(offset), left = len;
	u32 npages = DIV_ROUND_UP(po + len, PAGE_SIZE);
	struct rpcrdma_cm_chunk *c = rpcrdma_cm_chunk_new(qp, npages, len);

	if (!c)
		return NULL;
	pages += offset >> PAGE_SHIFT;
	c->offset = po;
	for (i = 0; i < npages; i++) {
		u32 k = min_t(u32, PAGE_SIZE - po, left);

		get_page(pages[i]);
		c->pages[i] = pages[i];
		c->npages = i + 1;
		sg_set_page(&c->sgl[i], pages[i], k, po);
		left -= k;
		po = 0;
	}
	return c;
}

/* ib_verbs.h has no ib_dma_sync_sg_*(); what they would do. */
static void rpcrdma_cm_sync_sg(struct ib_device *dev, struct scatterlist *sgl,
			       int nents, enum dma_data_direction dir, bool for_cpu)
{
	if (ib_uses_virt_dma(dev))
		return;
	if (for_cpu)
		dma_sync_sg_for_cpu(dev->dma_device, sgl, nents, dir);
	else
		dma_sync_sg_for_device(dev->dma_device, sgl, nents, dir);
}

/* Copies @n octets between @buf and the chunk at @off (into it if @in). */
int rpcrdma_cm_chunk_copy(struct rpcrdma_cm_chunk *c, u32 off, u8 *buf, u32 n,
			  bool in)
{
	struct ib_device *dev = c->qp->pd->device;

	if (off > c->len || n > c->len - off)
		return -EINVAL;
	if (c->nents && !in)
		rpcrdma_cm_sync_sg(dev, c->sgl, c->npages, c->dir, true);
	off += c->offset;
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
		rpcrdma_cm_sync_sg(dev, c->sgl, c->npages, c->dir, false);
	return 0;
}

static void rpcrdma_cm_chunk_end(struct rpcrdma_cm_chunk *c);

static void rpcrdma_cm_mr_done(struct ib_wc *wc, struct rpcrdma_cm_chunk *c)
{
	struct rpcrdma_cm_qp *qp = c->qp;

	if (wc->status != IB_WC_SUCCESS && !c->mr_status)
		c->mr_status = wc->status;
	/*
	 * The owner holds its count until this completion ran (it waits for
	 * its own LOCAL_INV; a batch hands its chunks back after the last), so
	 * this does not end the count; whoever does ends the chunk.
	 */
	if (atomic_dec_and_test(&c->inflight)) {
		rpcrdma_cm_chunk_end(c);
		return;
	}
	/*
	 * The owner may end the chunk meanwhile, but @qp lives on: its
	 * teardown cannot get past the drain while this completion runs.
	 */
	rpcrdma_cm_qp_wake(qp);
}

/*
 * A REG_MR's completion, which comes only when it failed or was flushed: the
 * QP is in the error state, so the connection goes. The chunk learns it from
 * its LOCAL_INV's flush, or is parked until teardown (rpcrdma_cm_chunk_free()):
 * either way its MR is deregistered, never reused.
 */
static void rpcrdma_cm_reg_done(struct ib_cq *cq, struct ib_wc *wc)
{
	if (wc->status != IB_WC_WR_FLUSH_ERR)
		pr_err_ratelimited("rpcrdma_cm: REG_MR failed: %s (%d)\n",
				   ib_wc_status_msg(wc->status), wc->status);
}

void rpcrdma_cm_reg_init(struct rpcrdma_cm_qp *qp)
{
	qp->reg_cqe.done = rpcrdma_cm_reg_done;
	INIT_LIST_HEAD(&qp->reg_orphans);
}

static void rpcrdma_cm_inv_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct rpcrdma_cm_chunk *c = container_of(wc->wr_cqe, struct rpcrdma_cm_chunk, inv_cqe);
	struct rpcrdma_cm_inv_batch *batch = c->inv_batch;

	/*
	 * A chunk of a batch is freed only by the batch's owner, once the
	 * batch ends, which this completion's put below may do: @c stays
	 * valid until then.
	 */
	if (batch && wc->status != IB_WC_SUCCESS)
		cmpxchg(&batch->status, 0, wc->status);
	c->inv_batch = NULL;
	rpcrdma_cm_mr_done(wc, c);
	if (batch)
		rpcrdma_cm_inv_batch_put(batch);
}

/*
 * An invalid MR for @npages pages: one the QP recycled, its key bumped so no
 * earlier rkey reaches the new registration, else a new one (*@fresh).
 */
static struct ib_mr *rpcrdma_cm_mr_get(struct rpcrdma_cm_qp *qp, u32 npages, bool *fresh)
{
	struct ib_mr *mr = NULL;
	unsigned long flags;

	if (npages > qp->mr_pages)
		return ERR_PTR(-EMSGSIZE);
	spin_lock_irqsave(&qp->lock, flags);
	if (!list_empty(&qp->mr_free)) {
		mr = list_first_entry(&qp->mr_free, struct ib_mr, qp_entry);
		list_del(&mr->qp_entry);
	}
	spin_unlock_irqrestore(&qp->lock, flags);
	*fresh = !mr;
	if (mr) {
		ib_update_fast_reg_key(mr, ib_inc_rkey(mr->rkey));
		return mr;
	}
	return ib_alloc_mr(qp->pd, IB_MR_TYPE_MEM_REG, qp->mr_pages);
}

/*
 * Keeps an invalid MR for the next registration; once the QP is closing it is
 * deregistered instead. Returns ib_dereg_mr()'s result.
 */
static int rpcrdma_cm_mr_put(struct rpcrdma_cm_qp *qp, struct ib_mr *mr)
{
	unsigned long flags;
	bool kept;

	spin_lock_irqsave(&qp->lock, flags);
	kept = !qp->closed;
	if (kept)
		list_add(&mr->qp_entry, &qp->mr_free);
	spin_unlock_irqrestore(&qp->lock, flags);
	return kept ? 0 : ib_dereg_mr(mr);
}

/*
 * Teardown, once the QP is closed: frees the MRs and the chunks' memory kept
 * for reuse. A chunk that ends later (its holder let go after the teardown)
 * finds the QP closed, and its MR and memory are freed at once.
 */
void rpcrdma_cm_chunk_pools_destroy(struct rpcrdma_cm_qp *qp)
{
	struct rpcrdma_cm_chunk *c, *cnext;
	struct ib_mr *mr, *next;
	unsigned long flags;
	LIST_HEAD(chunks);
	LIST_HEAD(mrs);

	spin_lock_irqsave(&qp->lock, flags);
	list_splice_init(&qp->mr_free, &mrs);
	list_splice_init(&qp->chunk_free, &chunks);
	qp->chunk_free_count = 0;
	spin_unlock_irqrestore(&qp->lock, flags);
	list_for_each_entry_safe(c, cnext, &chunks, cache_entry)
		kfree(c);
	list_for_each_entry_safe(mr, next, &mrs, qp_entry)
		if (ib_dereg_mr(mr))
			pr_err_ratelimited("rpcrdma_cm: ib_dereg_mr failed on an invalid MR\n");
}

/*
 * Prepares the chunk's FRWR registration (IB_WR_REG_MR), for the peer to
 * read (@remote_write false) or write: maps it and an MR, and leaves the
 * REG_MR pending, to be posted in front of the Send that announces it
 * (rpcrdma_cm_chunk_chain(), rpcrdma_cm_send_post()), so the QP's ordering
 * makes it valid in time. Returns the rkey and the address the peer uses,
 * and 1 if that took a new MR, 0 if a recycled one. A chunk is registered at
 * most once.
 */
int rpcrdma_cm_chunk_register(struct rpcrdma_cm_chunk *c, bool remote_write,
			      u32 *rkey, u64 *iova)
{
	struct rpcrdma_cm_qp *qp = c->qp;
	struct ib_device *dev = qp->pd->device;
	struct ib_mr *mr;
	bool fresh;
	int ret, n;

	if (c->mr)
		return -EBUSY;
	ret = rpcrdma_cm_qp_enter(qp);
	if (ret)
		return ret;
	mr = rpcrdma_cm_mr_get(qp, c->npages, &fresh);
	if (IS_ERR(mr)) {
		ret = PTR_ERR(mr);
		goto out;
	}
	c->mr = mr;
	c->dir = remote_write ? DMA_FROM_DEVICE : DMA_TO_DEVICE;
	c->nents = ib_dma_map_sg(dev, c->sgl, c->npages, c->dir);
	if (!c->nents) {
		ret = -EIO;
		goto out;
	}
	n = ib_map_mr_sg(mr, c->sgl, c->nents, NULL, PAGE_SIZE);
	if (n != c->nents) {
		ret = n < 0 ? n : -EIO;
		goto out;
	}
	c->reg.wr.opcode = IB_WR_REG_MR;
	/* Unsignaled: the QP's, never the chunk's, which may be ended by then. */
	c->reg.wr.wr_cqe = &qp->reg_cqe;
	c->reg.wr.send_flags = 0;
	c->reg.mr = mr;
	c->reg.key = mr->rkey;
	c->reg.access = IB_ACCESS_LOCAL_WRITE |
			(remote_write ? IB_ACCESS_REMOTE_WRITE : IB_ACCESS_REMOTE_READ);
	c->reg_pending = true;
	*rkey = mr->rkey;
	*iova = mr->iova;
	ret = fresh;
out:
	rpcrdma_cm_qp_leave(qp);
	return ret;
}

void rpcrdma_cm_chunk_chain(struct rpcrdma_cm_chunk *c, struct rpcrdma_cm_chunk *next)
{
	c->chain = next;
}

/*
 * The WRs of the chain from @first: each pending REG_MR in order, then
 * @send. Each chunk is marked registered before the post (a Reply to the
 * Send may be handled before ib_post_send() returns). Under @qp->lock.
 */
struct ib_send_wr *rpcrdma_cm_chain_wrs(struct rpcrdma_cm_chunk *first, struct ib_send_wr *send)
{
	struct ib_send_wr *head = NULL, **link = &head;
	struct rpcrdma_cm_chunk *c;

	for (c = first; c; c = c->chain) {
		lockdep_assert_held(&c->qp->lock);
		WARN_ON_ONCE(c->qp != first->qp);
		if (!c->reg_pending)
			continue;
		c->registered = true;
		*link = &c->reg.wr;
		link = &c->reg.wr.next;
	}
	*link = send;
	return head;
}

/*
 * Whether every chunk chained from @first (rpcrdma_cm_chunk_chain()) is
 * @qp's. If one is not, the chain's links go and its chunks stay as they
 * are, unregistered: another QP's REG_MR is not ours to post, nor its state
 * ours to change under @qp->lock.
 */
bool rpcrdma_cm_chain_of(struct rpcrdma_cm_chunk *first, struct rpcrdma_cm_qp *qp)
{
	struct rpcrdma_cm_chunk *c, *next;

	for (c = first; c; c = c->chain)
		if (WARN_ON_ONCE(c->qp != qp))
			break;
	if (!c)
		return true;
	for (c = first; c; c = next) {
		next = c->chain;
		c->chain = NULL;
	}
	return false;
}

/*
 * After the post of rpcrdma_cm_chain_wrs(@first)'s WRs: those in front of
 * @bad (all of them if @bad is NULL) were posted; the others are undone,
 * never to complete, so their chunks need no LOCAL_INV. The chain's links
 * go. Under @qp->lock.
 */
void rpcrdma_cm_chain_posted(struct rpcrdma_cm_chunk *first, const struct ib_send_wr *bad)
{
	struct rpcrdma_cm_chunk *c, *next;
	bool posted = true;

	for (c = first; c; c = next) {
		lockdep_assert_held(&c->qp->lock);
		next = c->chain;
		c->chain = NULL;
		if (!c->reg_pending)
			continue;
		c->reg_pending = false;
		c->reg.wr.next = NULL;
		if (&c->reg.wr == bad)
			posted = false;
		if (!posted)
			c->registered = false;
	}
}

/*
 * The end of a chunk, once its owner let go, every LOCAL_INV it posted
 * completed and its REG_MR is known done: from rpcrdma_cm_chunk_free(), from
 * the last of those completions (this QP's completion work), or from teardown
 * for a parked chunk (rpcrdma_cm_reg_orphans_free()). An MR that could reach nothing
 * then (@mr_invalid, no WR failed) is kept for the QP's next registration;
 * any other is deregistered, and before the memory is unmapped, always:
 * without a LOCAL_INV (the QP was closing) the rkey may still be valid on a
 * QP that is not yet in the error state, and a peer writing through it must
 * find no mapping behind it, never one to memory that is about to be reused.
 */
static void rpcrdma_cm_chunk_end(struct rpcrdma_cm_chunk *c)
{
	struct rpcrdma_cm_qp *qp = c->qp;
	/* Deregistering may allocate: no fs reclaim, which may wait for this CQ. */
	unsigned int nofs = memalloc_nofs_save();
	u32 i;

	if (c->mr && (c->mr_invalid && !c->mr_status ? rpcrdma_cm_mr_put(qp, c->mr) :
			ib_dereg_mr(c->mr))) {
		/*
		 * The registration may still be live: keep the memory mapped and
		 * allocated for good (its pages stay referenced and DMA-mapped;
		 * only the chunk's own bookkeeping goes) rather than hand it
		 * back while the peer can reach it.
		 */
		pr_err_ratelimited("rpcrdma_cm: ib_dereg_mr failed: leaking a chunk of %u pages\n",
				   c->npages);
		goto out;
	}
	if (c->nents)
		ib_dma_unmap_sg(qp->pd->device, c->sgl, c->npages, c->dir);
	for (i = 0; i < c->npages; i++)
		put_page(c->pages[i]);
out:
	/* Before the put: the QP, and so its cache, lives until then. */
	rpcrdma_cm_chunk_keep(qp, c);
	rpcrdma_cm_qp_put(qp);
	memalloc_nofs_restore(nofs);
}

/*
 * Releases a chunk: invalidates its registration with LOCAL_INV unless
 * @remotely_invalidated (the peer did it with Send With Invalidate), a
 * batch did (rpcrdma_cm_chunks_inv()) or the QP is gone, and waits for that
 * LOCAL_INV (and so every WR posted before it, its REG_MR among them); with
 * @no_inv it posts none, and a registration not known invalid is
 * deregistered instead. Returns 1 if a LOCAL_INV was posted, -1 if a
 * registration not known invalid is deregistered instead (xprtrdma's
 * recycled MR), else 0. Without a LOCAL_INV it waits for nothing. A
 * registration invalidated (by the peer, or a LOCAL_INV that completed) had
 * its REG_MR done before, so the chunk ends now; one not known invalid
 * may have its REG_MR still in the Send Queue (unsignaled, nothing says when
 * it is done), so the chunk is parked, mapped and registered, until
 * teardown drained the QP, and ends there (at once if that happened
 * already). The connection goes in every such case (a LOCAL_INV could not
 * be posted, or failed), so what is parked is held briefly.
 */
int rpcrdma_cm_chunk_free(struct rpcrdma_cm_chunk *c, bool remotely_invalidated, bool no_inv)
{
	struct rpcrdma_cm_qp *qp = c->qp;
	bool invalid = !c->registered || remotely_invalidated || c->inv_posted;
	int ret = 0;

	/*
	 * A LOCAL_INV rpcrdma_cm_chunks_inv() posted has completed (the batch
	 * hands its chunks back then); one it could not post is not tried
	 * again (the caller may be this QP's completion work): the chunk is
	 * parked below, its MR deregistered once teardown drained the QP.
	 */
	if (!invalid && !c->inv_skip && !no_inv && !rpcrdma_cm_qp_enter(qp)) {
		struct ib_send_wr inv = {
			.opcode = IB_WR_LOCAL_INV,
			.wr_cqe = &c->inv_cqe,
			.send_flags = IB_SEND_SIGNALED,
			.ex.invalidate_rkey = c->mr->rkey,
		};
		int err;

		c->inv_cqe.done = rpcrdma_cm_inv_done;
		atomic_inc(&c->inflight);
		err = rpcrdma_cm_post_send(qp, &inv);
		if (err) {
			atomic_dec(&c->inflight);
			/*
			 * The device refused it on a live QP: the QP goes to the
			 * error state, where the registration parked below
			 * reaches nothing. -ENOTCONN: teardown began meanwhile
			 * and does that itself. Never this QP's completion work:
			 * it would wait for the LOCAL_INV below.
			 */
			if (err != -ENOTCONN && rpcrdma_cm_qp_disconnect(qp))
				pr_err_ratelimited("rpcrdma_cm: a LOCAL_INV refused, and the disconnect too\n");
		} else {
			ret = 1;
			invalid = true;
		}
		rpcrdma_cm_qp_leave(qp);
	}
	/*
	 * A live QP completes the LOCAL_INV, a closing one flushes it. Acquire:
	 * the completion's @mr_status, written before its atomic_dec_and_test(),
	 * is read below.
	 */
	if (ret == 1)
		wait_event(qp->wq, atomic_read_acquire(&c->inflight) == 1);
	else if (!invalid)
		ret = -1;
	c->mr_invalid = invalid;
	/*
	 * A registration known invalid reaches nothing: the memory is unmapped
	 * now, before the caller places anything in the pages (unmapping may
	 * copy a bounce buffer back).
	 */
	if (invalid && !c->mr_status && c->nents) {
		ib_dma_unmap_sg(qp->pd->device, c->sgl, c->npages, c->dir);
		c->nents = 0;
	}
	if (!invalid) {
		unsigned long flags;
		bool parked;

		spin_lock_irqsave(&qp->lock, flags);
		parked = !qp->drained;
		if (parked)
			list_add_tail(&c->cache_entry, &qp->reg_orphans);
		spin_unlock_irqrestore(&qp->lock, flags);
		if (parked)
			return ret;
	}
	if (atomic_dec_and_test(&c->inflight))
		rpcrdma_cm_chunk_end(c);
	return ret;
}

/*
 * Teardown, once the QP is drained (no REG_MR left in the Send Queue): ends
 * the chunks parked by rpcrdma_cm_chunk_free(), their MRs deregistered; a
 * chunk released after this ends at once.
 */
void rpcrdma_cm_reg_orphans_free(struct rpcrdma_cm_qp *qp)
{
	struct rpcrdma_cm_chunk *c, *next;
	unsigned long flags;
	LIST_HEAD(orphans);

	spin_lock_irqsave(&qp->lock, flags);
	qp->drained = true;
	list_splice_init(&qp->reg_orphans, &orphans);
	spin_unlock_irqrestore(&qp->lock, flags);
	list_for_each_entry_safe(c, next, &orphans, cache_entry) {
		list_del(&c->cache_entry);
		if (atomic_dec_and_test(&c->inflight))
			rpcrdma_cm_chunk_end(c);
	}
}

/*
 * Posts a batch's LOCAL_INV (rpcrdma_cm_chunks_inv()). In a test build,
 * while test_inv_post_refuse counts, it is refused as a full Send Queue
 * refuses it.
 */
static int rpcrdma_cm_inv_post(struct rpcrdma_cm_qp *qp, const struct ib_send_wr *inv)
{
#ifdef RPCRDMA_CM_TEST
	if (rpcrdma_cm_param_take(&rpcrdma_cm_param_test_inv_post_refuse))
		return -ENOMEM;
#endif
	return rpcrdma_cm_post_send(qp, inv);
}

int rpcrdma_cm_chunks_inv(struct rpcrdma_cm_chunk **v, u32 n, void *done, u32 *posted)
{
	struct rpcrdma_cm_qp *qp = n ? v[0]->qp : NULL;
	struct rpcrdma_cm_inv_batch *batch;
	bool entered, live;
	u32 i;

	*posted = 0;
	batch = kmalloc(sizeof(*batch), GFP_KERNEL);
	if (!batch)
		return -ENOMEM;
	atomic_set(&batch->left, 1);
	batch->status = 0;
	batch->done = done;
	entered = qp && !rpcrdma_cm_qp_enter(qp);
	live = entered;
	for (i = 0; i < n; i++) {
		struct rpcrdma_cm_chunk *c = v[i];
		struct ib_send_wr inv = {
			.opcode = IB_WR_LOCAL_INV,
			.wr_cqe = &c->inv_cqe,
			.send_flags = IB_SEND_SIGNALED,
			.ex.invalidate_rkey = c->mr ? c->mr->rkey : 0,
		};

		/* A batch is one call's chunks, all on one QP (see chunk_free). */
		if (WARN_ON_ONCE(c->qp != qp) || !live || !c->registered || c->inv_posted) {
			/* A live registration left behind: the batch says so. */
			if (c->registered && !c->inv_posted)
				cmpxchg(&batch->status, 0, -ENOTCONN);
			c->inv_skip = true;
			continue;
		}
		c->inv_cqe.done = rpcrdma_cm_inv_done;
		/* Set before the post: its completion may run before it returns. */
		c->inv_batch = batch;
		c->inv_posted = true;
		atomic_inc(&batch->left);
		atomic_inc(&c->inflight);
		if (rpcrdma_cm_inv_post(qp, &inv)) {
			atomic_dec(&c->inflight);
			atomic_dec(&batch->left);
			c->inv_posted = false;
			c->inv_batch = NULL;
			c->inv_skip = true;
			cmpxchg(&batch->status, 0, -ENOTCONN);
			/* The rest would fail too (QP closing, Send Queue full). */
			live = false;
			continue;
		}
		(*posted)++;
	}
	if (entered)
		rpcrdma_cm_qp_leave(qp);
	/* The poster's count: @done runs here if every completion already ran. */
	rpcrdma_cm_inv_batch_put(batch);
	return 0;
}

/*
 * One RDMA Read or Write chain over @nents pages: its rdma_rw context and
 * completion. A chain that is waited for is released by the waiter; an
 * @async one (a reply's payload Write, or a Read whose end Rust is told of
 * with @done) by its completion, and it holds a reference on each of its
 * pages until then.
 */
struct rpcrdma_cm_rw {
	struct ib_cqe cqe;
	struct list_head orphan;	/* on @qp->rw_orphans once posted in part */
	struct completion waited;
	struct rdma_rw_ctx ctx;
	struct rpcrdma_cm_qp *qp;
	u32 nents;
	int nwrs;		/* Send Queue entries reserved */
	int status;
	bool write, async;
	void *done;
	struct scatterlist sgl[];
};

/*
 * A context that was never posted is undone: its mappings and MRs go back,
 * and a chain waiting for the MR pool (rpcrdma_cm_rw) looks again.
 */
static void rpcrdma_cm_rw_undo(struct rpcrdma_cm_rw *rw)
{
	struct rpcrdma_cm_qp *qp = rw->qp;

	rdma_rw_ctx_destroy(&rw->ctx, qp->id->qp, qp->id->port_num, rw->sgl, rw->nents,
			    rw->write ? DMA_TO_DEVICE : DMA_FROM_DEVICE);
	atomic_inc(&qp->rw_released);
	rpcrdma_cm_qp_wake(qp);
}

/*
 * The chain's WRs are done: undo its context, Send Queue room and pages, and
 * free it. The caller then leaves the QP (rpcrdma_cm_qp_leave).
 */
static void rpcrdma_cm_rw_release(struct rpcrdma_cm_rw *rw)
{
	struct rpcrdma_cm_qp *qp = rw->qp;
	u32 i;

	if (rw->nwrs) {
		rdma_rw_ctx_destroy(&rw->ctx, qp->id->qp, qp->id->port_num, rw->sgl, rw->nents,
				    rw->write ? DMA_TO_DEVICE : DMA_FROM_DEVICE);
		atomic_add(rw->nwrs, &qp->rw_avail);
		atomic_inc(&qp->rw_released);
		rpcrdma_cm_qp_wake(qp);
	}
	for (i = 0; rw->async && i < rw->nents; i++)
		put_page(sg_page(&rw->sgl[i]));
	kfree(rw);
}

/*
 * A chain that is not to be posted (or is done with) goes, with its QP user:
 * its context undone if it has one, its Send Queue room given back.
 */
void rpcrdma_cm_rw_drop(struct rpcrdma_cm_rw *rw)
{
	struct rpcrdma_cm_qp *qp = rw->qp;

	rpcrdma_cm_rw_release(rw);
	rpcrdma_cm_qp_leave(qp);
}

/*
 * Teardown, after the drain: frees the chains that were posted in part
 * (rpcrdma_cm_rw()); their WRs are all complete or flushed now. Each held
 * one of @qp's users.
 */
void rpcrdma_cm_rw_orphans_free(struct rpcrdma_cm_qp *qp)
{
	struct rpcrdma_cm_rw *rw;
	unsigned long flags;

	for (;;) {
		spin_lock_irqsave(&qp->lock, flags);
		rw = list_first_entry_or_null(&qp->rw_orphans, struct rpcrdma_cm_rw, orphan);
		if (rw)
			list_del(&rw->orphan);
		spin_unlock_irqrestore(&qp->lock, flags);
		if (!rw)
			return;
		rpcrdma_cm_rw_drop(rw);
	}
}

static void rpcrdma_cm_rw_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct rpcrdma_cm_rw *rw = container_of(wc->wr_cqe, struct rpcrdma_cm_rw, cqe);
	struct rpcrdma_cm_qp *qp = rw->qp;
	void *done = rw->done;

	if (!rw->async) {
		rw->status = wc->status;
		complete(&rw->waited);
		return;
	}
	/* Unmapped first, so what a Read brought is the CPU's before Rust hands it on. */
	rpcrdma_cm_rw_release(rw);
	/* A failed Write leaves the QP in the error state: the owner ends the connection. */
	if (done || (wc->status != IB_WC_SUCCESS && wc->status != IB_WC_WR_FLUSH_ERR))
		rpcrdma_cm_rw_done_rs(qp->owner, qp, done, wc->status);
	rpcrdma_cm_qp_leave(qp);
}

/* Takes @n of the QP's RDMA Read/Write Send Queue entries, if that many are free. */
static bool rpcrdma_cm_rw_reserve(struct rpcrdma_cm_qp *qp, int n)
{
	int avail = atomic_read(&qp->rw_avail);

	do {
		if (avail < n)
			return false;
	} while (!atomic_try_cmpxchg(&qp->rw_avail, &avail, avail - n));
	return true;
}

/*
 * Posts a chain of WRs (ib_post_send()). In a test build, while
 * test_rw_post_part counts, a chain of several has its first WR posted
 * alone and the rest refused, as a device short of room may do.
 */
static int rpcrdma_cm_rw_post(struct rpcrdma_cm_qp *qp, struct ib_send_wr *first,
			      const struct ib_send_wr **bad)
{
#ifdef RPCRDMA_CM_TEST
	return rpcrdma_cm_post_part(qp, first, first->next, &rpcrdma_cm_param_test_rw_post_part,
				    bad);
#else
	return ib_post_send(qp->id->qp, first, bad);
#endif
}

/*
 * Sets up a chain of RDMA Reads (or, with @write, Writes) of @len octets at
 * byte @offset of the page array @pages, from or to the peer's memory at
 * @addr/@rkey, without posting it: its rdma_rw context, and its WRs reserved
 * in the Send Queue. Returns the number of WRs, with the chain in *@out, or
 * an error with nothing kept. The chain holds one of @qp's users until it is
 * released (rpcrdma_cm_rw_start(), rpcrdma_cm_rw_drop(), its completion or
 * teardown); an @async one holds a reference on each of its pages as well.
 * Not from a completion callback.
 *
 * Chains of several callers run at once (nfsd's threads each move their own
 * call's data) as long as the Send Queue room the QP keeps for them (@rw_wrs)
 * holds them all: a chain first reserves its WRs in @rw_avail, waiting for
 * others to complete if need be, so the Send Queue never overflows. A caller
 * posts (or drops) a chain it prepared before it prepares the next: room and
 * MRs it kept unposted would be waited for by itself.
 */
static int rpcrdma_cm_rw_prepare(struct rpcrdma_cm_qp *qp, struct page **pages, u32 offset,
				 u32 len, u32 rkey, u64 addr, bool write, bool async, void *done,
				 struct rpcrdma_cm_rw **out)
{
	u32 po = offset % PAGE_SIZE, n = DIV_ROUND_UP(po + len, PAGE_SIZE), i, k;
	struct rpcrdma_cm_rw *rw;
	bool reserved;
	int ret, nwrs;

	if (!len || n > RPCRDMA_CM_CHUNK_MAX_PAGES)
		return -EINVAL;
	ret = rpcrdma_cm_qp_enter(qp);
	if (ret)
		return ret;
	rw = kzalloc(struct_size(rw, sgl, n), GFP_KERNEL);
	if (!rw) {
		rpcrdma_cm_qp_leave(qp);
		return -ENOMEM;
	}
	*rw = (struct rpcrdma_cm_rw){ .cqe.done = rpcrdma_cm_rw_done, .qp = qp, .nents = n,
				      .write = write, .async = async, .done = done };
	init_completion(&rw->waited);
	sg_init_table(rw->sgl, n);
	pages += offset / PAGE_SIZE;
	for (i = 0; i < n; i++, po = 0) {
		k = min_t(u32, len, PAGE_SIZE - po);
		sg_set_page(&rw->sgl[i], pages[i], k, po);
		if (async)
			get_page(pages[i]);
		len -= k;
	}
	for (;;) {
		int released = atomic_read(&qp->rw_released);

		ret = rdma_rw_ctx_init(&rw->ctx, qp->id->qp, qp->id->port_num, rw->sgl, n, 0,
				       addr, rkey, write ? DMA_TO_DEVICE : DMA_FROM_DEVICE);
		if (ret != -EAGAIN)
			break;
		/*
		 * The QP's MR pool (max_rdma_ctxs MRs, qp.c) is empty: the
		 * device registers every Read or Write (iWARP, or
		 * ib_core.force_mr) and other chains hold them all. Each of
		 * those is posted, or about to be, or teardown fails it; its
		 * release gives its MRs back and wakes us. (A context that
		 * took some MRs and failed on the next gives them back inside
		 * rdma_rw without waking anyone, and if every holder was such a
		 * one, no release comes: a waiter looks again after a second at
		 * most. Where registering is only an optimisation, mlx5's Reads
		 * of many pages, 7.3's rdma_rw falls back to SGEs instead of
		 * failing.)
		 */
		wait_event_timeout(qp->wq, atomic_read(&qp->rw_released) != released ||
					   READ_ONCE(qp->closed), HZ);
		if (READ_ONCE(qp->closed)) {
			ret = -ENOTCONN;
			break;
		}
	}
	/* Signed: an error from the loop above has no context to undo. */
	if (ret > 0 && (u32)ret > qp->rw_wrs) {
		rpcrdma_cm_rw_undo(rw);
		ret = -EMSGSIZE;
	}
	if (ret < 0) {
		rpcrdma_cm_rw_drop(rw);	/* @nwrs 0: no context to undo */
		return ret;
	}
	nwrs = ret;
	/* Room frees as chains complete; teardown wakes us to give up. */
	wait_event(qp->wq, (reserved = rpcrdma_cm_rw_reserve(qp, nwrs)) ||
			   READ_ONCE(qp->closed));
	if (!reserved) {
		rpcrdma_cm_rw_undo(rw);
		rpcrdma_cm_rw_drop(rw);	/* @nwrs 0: context undone here */
		return -ENOTCONN;
	}
	rw->nwrs = nwrs;
	*out = rw;
	return nwrs;
}

/* The QP a prepared chain is for. */
struct rpcrdma_cm_qp *rpcrdma_cm_rw_qp(const struct rpcrdma_cm_rw *rw)
{
	return rw->qp;
}

/*
 * A prepared chain posted in part, under @qp->lock (@rw->qp's): the WRs
 * before the one refused will complete (or be flushed) and use the chain's
 * mappings until then, and the signaled last one was not posted. The chain
 * stays, to be freed by teardown after the drain, holding its QP user and
 * its pages (the caller of a waited-for chain frees its own pages once the
 * chain returns). Listed last: teardown may free it as soon as the lock is
 * released, so nothing of @rw is touched after. The caller then reports it
 * and disconnects (rpcrdma_cm_rw_report_part()).
 */
static void rpcrdma_cm_rw_orphan(struct rpcrdma_cm_rw *rw)
{
	u32 i;

	if (!rw->async) {
		for (i = 0; i < rw->nents; i++)
			get_page(sg_page(&rw->sgl[i]));
		rw->async = true;
	}
	list_add_tail(&rw->orphan, &rw->qp->rw_orphans);
}

void rpcrdma_cm_rw_report_part(struct rpcrdma_cm_qp *qp, bool write, int ret)
{
	pr_err_ratelimited("an RDMA %s chain was posted in part (error %d): disconnecting\n",
			   write ? "Write" : "Read", ret);
	rpcrdma_cm_qp_disconnect(qp);
}

/*
 * Posts a prepared chain on its own. An @async one returns once posted (a
 * Send posted after it on the same QP reaches the peer after its data, RC
 * ordering), and its completion releases it and, with @done, calls
 * rpcrdma_cm_rw_done_rs() (never when this returns an error); else it
 * returns once the chain completed. Returns the number of WRs or an error;
 * the chain is the QP's either way. A chain the device refuses after its
 * first WRs stays until teardown, and the connection ends. The wait for
 * completion is uninterruptible: a posted chain completes, or is flushed
 * when the QP goes to error.
 */
static int rpcrdma_cm_rw_start(struct rpcrdma_cm_rw *rw)
{
	struct rpcrdma_cm_qp *qp = rw->qp;
	const struct ib_send_wr *bad = NULL;
	bool write = rw->write, async = rw->async;
	int ret, nwrs = rw->nwrs;
	struct ib_send_wr *first;
	unsigned long flags;

	first = rdma_rw_ctx_wrs(&rw->ctx, qp->id->qp, qp->id->port_num, &rw->cqe, NULL);
	spin_lock_irqsave(&qp->lock, flags);
	ret = qp->closed ? -ENOTCONN : rpcrdma_cm_rw_post(qp, first, &bad);
	if (ret && !qp->closed && bad != first) {
		rpcrdma_cm_rw_orphan(rw);
		spin_unlock_irqrestore(&qp->lock, flags);
		rpcrdma_cm_rw_report_part(qp, write, ret);
		return ret;	/* @users stays taken: teardown releases it */
	}
	spin_unlock_irqrestore(&qp->lock, flags);
	if (!ret && async)
		return nwrs;	/* @rw may be gone already */
	if (!ret) {
		wait_for_completion(&rw->waited);
		ret = rw->status == IB_WC_SUCCESS ? nwrs : -EIO;
	}
	rpcrdma_cm_rw_drop(rw);
	return ret;
}

/* A chain prepared and posted at once (see rpcrdma_cm_rw_prepare/_start). */
static int rpcrdma_cm_rw(struct rpcrdma_cm_qp *qp, struct page **pages, u32 offset, u32 len,
			 u32 rkey, u64 addr, bool write, bool async, void *done)
{
	struct rpcrdma_cm_rw *rw;
	int ret;

	ret = rpcrdma_cm_rw_prepare(qp, pages, offset, len, rkey, addr, write, async, done, &rw);
	if (ret < 0)
		return ret;
	return rpcrdma_cm_rw_start(rw);
}

/*
 * Links a prepared chain's WRs in front of @next (a Send), for one post:
 * returns its first WR, and in *@last its last, which keeps the chain's own
 * signaled completion (rdma_rw leaves a chained context's last WR
 * unsignaled, for the caller to release it with the Send's: ours is
 * released by its own, as when posted alone).
 */
struct ib_send_wr *rpcrdma_cm_rw_link(struct rpcrdma_cm_rw *rw, struct ib_send_wr *next,
				      struct ib_send_wr **last)
{
	struct rpcrdma_cm_qp *qp = rw->qp;
	struct ib_send_wr *first, *w;

	first = rdma_rw_ctx_wrs(&rw->ctx, qp->id->qp, qp->id->port_num, &rw->cqe, next);
	for (w = first; w->next != next; w = w->next)
		;
	w->wr_cqe = &rw->cqe;
	w->send_flags |= IB_SEND_SIGNALED;
	*last = w;
	return first;
}

/*
 * Under @rw->qp's lock, after the post of a chain linked in front of @send
 * (@first..@last of it, rpcrdma_cm_rw_link()) that returned @ret and
 * stopped at @bad. Returns RPCRDMA_CM_RW_POSTED (its completion releases it),
 * RPCRDMA_CM_RW_UNPOSTED (the caller drops it, rpcrdma_cm_rw_drop(), after
 * the lock) or RPCRDMA_CM_RW_PART (orphaned: the caller reports it after the
 * lock, rpcrdma_cm_rw_report_part()).
 *
 * Once the chain's signaled last WR is posted, its completion may free @rw
 * at any moment (it does not take the lock): nothing of the chain is read
 * then. Only when @bad is one of its WRs, or a REG_MR in front of it, is
 * that WR unposted and the chain walked.
 */
int rpcrdma_cm_rw_linked_posted(struct rpcrdma_cm_rw *rw, const struct ib_send_wr *first,
				const struct ib_send_wr *last, const struct ib_send_wr *send,
				int ret, const struct ib_send_wr *bad)
{
	const struct ib_send_wr *w;

	/*
	 * All posted, or the Send refused behind the chain; or a failure that
	 * does not say where (see rpcrdma_cm_send_post()): counted as posted,
	 * as its REG_MRs are, rather than freed while the device may use it.
	 */
	if (!ret || !bad || bad == send)
		return RPCRDMA_CM_RW_POSTED;
	for (w = first; ; w = w->next) {
		if (w == bad) {
			if (w == first)
				return RPCRDMA_CM_RW_UNPOSTED;
			rpcrdma_cm_rw_orphan(rw);
			return RPCRDMA_CM_RW_PART;
		}
		if (w == last)
			break;
	}
	/* @bad is a REG_MR in front of the chain: none of it was posted. */
	return RPCRDMA_CM_RW_UNPOSTED;
}

/*
 * The whole chunk from or to the peer's memory (rpcrdma_cm_rw). A Read is
 * waited for; a Write returns once posted, holding the chunk's pages until
 * it completes, so no thread waits for what the peer acknowledges: a Send
 * posted after it reaches the peer after its data (RC ordering).
 */
int rpcrdma_cm_chunk_rdma(struct rpcrdma_cm_chunk *c, u32 rkey, u64 addr, bool write)
{
	if (c->mr)
		return -EBUSY;
	return rpcrdma_cm_rw(c->qp, c->pages, c->offset, c->len, rkey, addr, write, write, NULL);
}

/*
 * @len octets at byte @offset of a page array @pages (pages Rust fills for
 * an RPC: no copy) from the peer's memory by RDMA Read (rpcrdma_cm_rw). With
 * @done it returns once posted, keeping its pages until it completes;
 * without, once its data is there.
 */
int rpcrdma_cm_rdma_read_pages(struct rpcrdma_cm_qp *qp, struct page **pages, u32 offset,
			       u32 len, u32 rkey, u64 addr, void *done)
{
	return rpcrdma_cm_rw(qp, pages, offset, len, rkey, addr, false, done != NULL, done);
}

/*
 * An RDMA Write of @len octets at byte @offset of a page array @pages (a
 * reply's: no copy) to the peer's memory, prepared but not posted: the chain
 * goes in front of a Send in the same post (rpcrdma_cm_send_post(), as
 * svcrdma links a reply's Writes with its Send), or alone
 * (rpcrdma_cm_rw_post_held()), or is dropped (rpcrdma_cm_rw_drop()).
 * Returns the number of WRs, with the chain in *@out.
 */
int rpcrdma_cm_rdma_write_held(struct rpcrdma_cm_qp *qp, struct page **pages, u32 offset,
			       u32 len, u32 rkey, u64 addr, struct rpcrdma_cm_rw **out)
{
	return rpcrdma_cm_rw_prepare(qp, pages, offset, len, rkey, addr, true, true, NULL, out);
}

/*
 * The pages under @len octets at @base, at most two, into @pages: memory of
 * the kernel's linear map from the page allocator (not slab memory, whose
 * page a reference does not keep for its object). Their number, or 0.
 */
static u32 rpcrdma_cm_kvec_pages(const void *base, u32 len, struct page **pages)
{
	u32 po = offset_in_page(base), n, i;
	const void *first = base - po;

	if (!len || len > 2 * PAGE_SIZE)
		return 0;
	n = DIV_ROUND_UP(po + len, PAGE_SIZE);
	if (n > 2)
		return 0;
	for (i = 0; i < n; i++) {
		if (!virt_addr_valid(first + i * PAGE_SIZE))
			return 0;
		pages[i] = virt_to_page(first + i * PAGE_SIZE);
		if (PageSlab(pages[i]))
			return 0;
	}
	return n;
}

/*
 * As rpcrdma_cm_rdma_write_held(), from @len octets at @base: an RPC reply's
 * head or tail, which nfsd keeps in pages of its own (svcrdma writes them
 * from there likewise), as rpcrdma_cm_kvec_writable() accepts them; -EFAULT
 * for other memory.
 */
int rpcrdma_cm_rdma_write_kvec_held(struct rpcrdma_cm_qp *qp, const void *base, u32 len,
				    u32 rkey, u64 addr, struct rpcrdma_cm_rw **out)
{
	struct page *pages[2];

	if (!rpcrdma_cm_kvec_pages(base, len, pages))
		return -EFAULT;
	/* rpcrdma_cm_rw_prepare() reads @pages only while it runs. */
	return rpcrdma_cm_rw_prepare(qp, pages, offset_in_page(base), len, rkey, addr, true,
				     true, NULL, out);
}

/*
 * Whether rpcrdma_cm_rdma_write_kvec_held() takes @len octets at @base (none
 * at all, or at most two pages of the linear map, not slab memory).
 */
bool rpcrdma_cm_kvec_writable(const void *base, u32 len)
{
	struct page *pages[2];

	return !len || rpcrdma_cm_kvec_pages(base, len, pages);
}

/* Posts a held chain alone (rpcrdma_cm_rw_start()): 0 or an error. */
int rpcrdma_cm_rw_post_held(struct rpcrdma_cm_rw *rw)
{
	int ret = rpcrdma_cm_rw_start(rw);

	return ret < 0 ? ret : 0;
}
