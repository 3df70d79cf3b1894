// SPDX-License-Identifier: GPL-2.0

//! Chunk memory: pages the peer reads or writes through a registration
//! (requester, FRWR), or that we fill from or push to the peer's memory with
//! RDMA Read and Write (responder). The C half is `chunk.c`.
//!
//! A [`Chunk`] belongs to the QP it was allocated on and holds a reference to
//! it, like a [`Qp`] handle. It may outlive the connection briefly: operations
//! then fail with `ENOTCONN` and dropping it just frees it. The connection's
//! teardown waits for its chunks to be dropped, so that nothing of the
//! connection is left on the device when the device goes away: a holder must
//! drop its chunks once the connection has failed, not wait for anything
//! first. Dropping a chunk whose REG_MR was posted invalidates the
//! registration first (LOCAL_INV) unless the peer already did
//! ([`Chunk::remotely_invalidated`]) and waits for that LOCAL_INV, or
//! ([`Chunk::release_no_inv`]) leaves the MR to be deregistered; the memory
//! is unmapped and freed only once the registration reaches nothing, so it
//! is never reachable by the peer once it is given back. Waiting is only
//! ever for a LOCAL_INV the drop posted: a chunk whose registration is not
//! known invalid (its unsignaled REG_MR may still be queued) stays mapped
//! until the QP's teardown drained it. Chunk pages start zeroed, so a peer that
//! claims to have written more than it did shows us zeros, never stale
//! memory.

use core::ptr::{self, NonNull};
use kernel::error::to_result;
use kernel::prelude::*;

use super::qp::Qp;

use super::bindings::{
    c_fn, page, rpcrdma_cm_chunk, rpcrdma_cm_chunk_alloc, rpcrdma_cm_chunk_chain,
    rpcrdma_cm_chunk_copy, rpcrdma_cm_chunk_free, rpcrdma_cm_chunk_rdma, rpcrdma_cm_chunk_register,
    rpcrdma_cm_chunk_wrap, rpcrdma_cm_chunks_inv,
};
use kernel::ffi::{c_int, c_void};

/// The largest chunk (4 MiB, as `RPCRDMA_CM_CHUNK_MAX_PAGES` in qp.h).
pub(crate) const MAX_CHUNK: u32 = 4 << 20;

/// Where the peer finds a registered chunk: an RPC-over-RDMA segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Registration {
    /// The rkey (RPC-over-RDMA "handle").
    pub(crate) rkey: u32,
    /// The address the peer uses ("offset").
    pub(crate) iova: u64,
}

/// Pages for one chunk or segment, exactly `len` octets.
pub(crate) struct Chunk {
    raw: NonNull<rpcrdma_cm_chunk>,
    len: u32,
    reg: Option<Registration>,
    new_mr: bool,
    remote_inv: bool,
}

// A chunk changes only through `&mut self`, but for the LOCAL_INV of a batch
// (`invalidate_async`, which owns it then) and its REG_MR's post (`link_chain`,
// which borrows it throughout).
// SAFETY: the C chunk is not tied to a thread; its operations take the QP's lock.
unsafe impl Send for Chunk {}

impl Chunk {
    /// Allocates `len` octets (1 to [`MAX_CHUNK`], zeroed) for `qp`.
    pub(crate) fn new(qp: &Qp, len: u32) -> Result<Chunk> {
        if len == 0 || len > MAX_CHUNK {
            return Err(EMSGSIZE);
        }
        // SAFETY: the handle keeps the QP alive during the call; the chunk
        // takes its own reference.
        let raw = unsafe { rpcrdma_cm_chunk_alloc(qp.raw(), len) };
        Ok(Chunk {
            raw: NonNull::new(raw).ok_or(ENOMEM)?,
            len,
            reg: None,
            new_mr: false,
            remote_inv: false,
        })
    }

    /// A chunk over `len` octets of an RPC's pages from byte `offset` of
    /// `pages`, which the peer then reads or writes in place (no copy).
    ///
    /// The chunk takes a reference on each page.
    ///
    /// # Safety
    ///
    /// `pages` holds live pages for those octets during the call.
    pub(crate) unsafe fn wrap(
        qp: &Qp,
        pages: *mut *mut page,
        offset: u32,
        len: u32,
    ) -> Result<Chunk> {
        if len == 0 || len > MAX_CHUNK {
            return Err(EMSGSIZE);
        }
        // SAFETY: see above; the handle keeps the QP alive during the call.
        let raw = unsafe { rpcrdma_cm_chunk_wrap(qp.raw(), pages, offset, len) };
        Ok(Chunk {
            raw: NonNull::new(raw).ok_or(ENOMEM)?,
            len,
            reg: None,
            new_mr: false,
            remote_inv: false,
        })
    }

    /// Length in octets.
    pub(crate) fn len(&self) -> u32 {
        self.len
    }

    fn copy(&mut self, off: u32, buf: *mut u8, n: usize, into: bool) -> Result {
        let n = u32::try_from(n).map_err(|_| EINVAL)?;
        // SAFETY: `raw` is our live chunk; `buf` is valid for `n` octets (the
        // callers pass a slice); C checks `off + n` against the chunk length.
        to_result(unsafe { rpcrdma_cm_chunk_copy(self.raw.as_ptr(), off, buf, n, into) })
    }

    /// Copies `data` into the chunk at `off`.
    pub(crate) fn write_at(&mut self, off: u32, data: &[u8]) -> Result {
        // C only reads from `buf` when copying into the chunk.
        self.copy(off, data.as_ptr().cast_mut(), data.len(), true)
    }

    /// Copies from the chunk at `off` into `out`.
    pub(crate) fn read_at(&mut self, off: u32, out: &mut [u8]) -> Result {
        self.copy(off, out.as_mut_ptr(), out.len(), false)
    }

    /// Registers the chunk with FRWR for the peer to read, or with
    /// `remote_write` to write: its REG_MR is posted in front of the Send
    /// that names it ([`SendBuf::post`](super::qp::SendBuf::post)). Until
    /// then, and if the device refuses the REG_MR itself, the chunk needs no
    /// LOCAL_INV; a REG_MR the device took in front of a refused Send does.
    ///
    /// The QP recycles its invalidated MRs: [`Chunk::new_mr`] says whether
    /// this registration had to allocate one.
    pub(crate) fn register(&mut self, remote_write: bool) -> Result<Registration> {
        if self.reg.is_some() {
            return Err(EBUSY);
        }
        let (mut rkey, mut iova) = (0u32, 0u64);
        // SAFETY: `raw` is our live chunk; `rkey` and `iova` are out pointers.
        let ret = unsafe {
            rpcrdma_cm_chunk_register(self.raw.as_ptr(), remote_write, &mut rkey, &mut iova)
        };
        to_result(ret)?;
        let r = Registration { rkey, iova };
        self.reg = Some(r);
        self.new_mr = ret > 0;
        Ok(r)
    }

    /// Whether the registration took a newly allocated MR, not a recycled one.
    pub(crate) fn new_mr(&self) -> bool {
        self.new_mr
    }

    /// The registration, if the chunk is registered.
    pub(crate) fn registration(&self) -> Option<Registration> {
        self.reg
    }

    /// The peer invalidated this chunk's rkey (Send With Invalidate): no
    /// LOCAL_INV is needed.
    pub(crate) fn remotely_invalidated(&mut self) {
        self.remote_inv = true;
    }

    /// Pulls the peer's memory at `rkey`/`addr` into the whole chunk (RDMA
    /// Read) and waits for it; returns the number of work requests it took
    /// (the echo service's long calls, test builds).
    #[cfg(CONFIG_RPCRDMA_CM_TEST)]
    pub(crate) fn rdma_read(&mut self, rkey: u32, addr: u64) -> Result<u32> {
        // SAFETY: `raw` is our live, unregistered chunk (C refuses a registered
        // one); the call sleeps until the Read completes or is flushed.
        wrs(unsafe { rpcrdma_cm_chunk_rdma(self.raw.as_ptr(), rkey, addr, false) })
    }

    /// Pushes the whole chunk to the peer's memory at `rkey`/`addr` (RDMA
    /// Write); returns the number of work requests it took, once they are
    /// posted (the Write keeps the chunk's pages until it completes; a Send
    /// posted after it on the QP reaches the peer after its data; a failed
    /// Write ends the connection through the handler's `rw_failed`).
    pub(crate) fn rdma_write(&mut self, rkey: u32, addr: u64) -> Result<u32> {
        // SAFETY: `raw` is our live, unregistered chunk (C refuses a registered
        // one); C takes its own page references for the posted Write.
        wrs(unsafe { rpcrdma_cm_chunk_rdma(self.raw.as_ptr(), rkey, addr, true) })
    }

    /// Frees the chunk, with a LOCAL_INV (waited for) if its registration
    /// may be live; says how the registration ended.
    pub(crate) fn release(self) -> Released {
        self.free(false)
    }

    /// Frees the chunk without posting a LOCAL_INV or waiting for anything:
    /// a registration not known invalid is deregistered instead, once the
    /// QP's teardown drained it. For a caller in its QP's completion work.
    pub(crate) fn release_no_inv(self) -> Released {
        self.free(true)
    }

    fn free(self, no_inv: bool) -> Released {
        let me = core::mem::ManuallyDrop::new(self);
        // SAFETY: `raw` is our live chunk, freed exactly once (Drop does not run
        // for `me`).
        match unsafe { rpcrdma_cm_chunk_free(me.raw.as_ptr(), me.remote_inv, no_inv) } {
            1 => Released::LocalInv,
            -1 => Released::Recycled,
            _ => Released::Nothing,
        }
    }
}

/// How [`Chunk::release`] or [`Chunk::release_no_inv`] ended a chunk's
/// registration.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Released {
    /// None was live: never registered, or known invalid (the peer's Send
    /// With Invalidate, an earlier LOCAL_INV).
    Nothing,
    /// A LOCAL_INV, posted and completed.
    LocalInv,
    /// Not known invalid, so its MR is deregistered instead of reused, once
    /// the QP's teardown drained it (xprtrdma's recycled MR: mountstats'
    /// `mrs_recycled`).
    Recycled,
}

/// Chunks a [`ChunkList`] holds without an allocation.
const LIST_INLINE: usize = 2;

/// One chunk list of a call (its Read chunk's registrations, or its Write
/// or Reply chunk's), in order: the first [`LIST_INLINE`] in place, so that
/// most calls (one registration, or two) allocate nothing for their lists
/// and free nothing after (an empty `KVec` still calls the allocator when
/// dropped), the others on the heap.
///
/// # Invariants
///
/// `first` is filled from its start, and `more` is `Some` only once `first`
/// is full: the list's order is `first`'s, then `more`'s.
#[derive(Default)]
pub(crate) struct ChunkList {
    first: [Option<Chunk>; LIST_INLINE],
    more: Option<KVec<Chunk>>,
}

impl ChunkList {
    /// Room for one more chunk: after it, [`ChunkList::push`] cannot fail.
    pub(crate) fn reserve_one(&mut self) -> Result {
        if self.first.iter().any(Option::is_none) {
            return Ok(());
        }
        self.more
            .get_or_insert_with(KVec::new)
            .reserve(1, GFP_KERNEL)?;
        Ok(())
    }

    /// Appends `c`, within the room [`ChunkList::reserve_one`] made (else
    /// it may allocate, and fail).
    pub(crate) fn push(&mut self, c: Chunk) -> Result {
        match self.first.iter_mut().find(|s| s.is_none()) {
            Some(slot) => *slot = Some(c),
            None => self
                .more
                .get_or_insert_with(KVec::new)
                .push(c, GFP_KERNEL)?,
        }
        Ok(())
    }

    /// How many chunks it holds.
    pub(crate) fn len(&self) -> usize {
        self.first.iter().flatten().count() + self.more.as_ref().map_or(0, |m| m.len())
    }

    /// Whether it holds no chunk.
    pub(crate) fn is_empty(&self) -> bool {
        self.first[0].is_none()
    }

    /// The chunks, in order.
    pub(crate) fn iter(&self) -> impl DoubleEndedIterator<Item = &Chunk> {
        let more = self.more.as_deref().unwrap_or(&[]);
        Iterator::chain(self.first.iter().flatten(), more)
    }

    /// The chunks, in order.
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut Chunk> {
        let more = self.more.as_deref_mut().unwrap_or(&mut []);
        Iterator::chain(self.first.iter_mut().flatten(), more)
    }
}

impl IntoIterator for ChunkList {
    type Item = Chunk;
    type IntoIter = core::iter::Chain<
        core::iter::Flatten<core::array::IntoIter<Option<Chunk>, LIST_INLINE>>,
        core::iter::Flatten<core::option::IntoIter<KVec<Chunk>>>,
    >;

    /// The chunks, in order.
    fn into_iter(self) -> Self::IntoIter {
        Iterator::chain(
            self.first.into_iter().flatten(),
            self.more.into_iter().flatten(),
        )
    }
}

/// Links the chunks of `lists`, in order, for the next Send's post to put
/// their pending REG_MRs in front of it ([`SendBuf::post`]); the first, or
/// null if there is none. The post unlinks them before it returns: the
/// caller posts right after, with no way out in between, while it still
/// borrows `lists`.
///
/// [`SendBuf::post`]: super::qp::SendBuf::post
pub(super) fn link_chain(lists: [&ChunkList; 2]) -> *mut rpcrdma_cm_chunk {
    let mut next: *mut rpcrdma_cm_chunk = ptr::null_mut();
    for c in lists.iter().flat_map(|l| l.iter()).rev() {
        // SAFETY: `raw` is a live chunk (the caller borrows it until the post
        // that unlinks it); `next` is null or the chunk after it in `lists`,
        // borrowed alike.
        unsafe { rpcrdma_cm_chunk_chain(c.raw.as_ptr(), next) };
        next = c.raw.as_ptr();
    }
    next
}

/// A count of work requests, or a negative errno.
fn wrs(ret: c_int) -> Result<u32> {
    to_result(ret)?;
    Ok(ret.unsigned_abs())
}

impl Drop for Chunk {
    fn drop(&mut self) {
        // SAFETY: `raw` is our live chunk, freed exactly once here.
        unsafe { rpcrdma_cm_chunk_free(self.raw.as_ptr(), self.remote_inv, false) };
    }
}

/// A call's chunk lists (its Call's, then its Reply's), as a batch of
/// LOCAL_INVs takes and hands them back.
pub(crate) type ChunkLists = [ChunkList; 2];

/// What runs once the LOCAL_INVs [`invalidate_async`] posted have completed:
/// the rest of a call (xprtrdma's frwr_unmap_async). The batch owns the
/// chunks meanwhile and hands them back then.
pub(crate) trait Invalidated: Send {
    /// Every LOCAL_INV posted completed (`status`: the first failed one's,
    /// a flush or error; a negative errno if a registration was left
    /// without one (the QP closing, its Send Queue full, no memory for the
    /// batch); else 0. A registration not invalidated is deregistered
    /// after the QP's teardown drained it); `chunks` are the lists the batch took,
    /// whose release now waits for nothing. Called once, under NOFS, from
    /// the CQ's polling work or from [`invalidate_async`] itself: it must not
    /// wait for a completion of the same QP.
    fn invalidated(&mut self, chunks: ChunkLists, status: i32);
}

/// What C carries for a batch: the task and the chunks it invalidates.
struct InvCtx {
    task: KBox<dyn Invalidated>,
    chunks: ChunkLists,
}

/// How [`invalidate_async`] went.
// `Refused` carries the lists back by value (two chunks each in place), as
// rarely as memory runs out; `Taken` is the usual return.
#[allow(clippy::large_enum_variant)]
pub(crate) enum InvAsync {
    /// The task runs (or ran already) once the LOCAL_INVs completed; this
    /// many were posted.
    Taken(u32),
    /// No memory for the batch: the task and the chunks are handed back
    /// untouched.
    Refused(KBox<dyn Invalidated>, ChunkLists),
}

/// Posts a LOCAL_INV for each chunk of `chunks` that is registered and was
/// not invalidated by the peer ([`Chunk::remotely_invalidated`]), in order,
/// without waiting: `task` runs with the chunks once all posted completed
/// (they complete in order), from the last completion or, if they all
/// completed already or none was posted, before this returns. A chunk whose
/// LOCAL_INV could not be posted (the QP closing, its Send Queue full) is
/// deregistered instead, after the QP's teardown drained it; its release
/// waits for nothing.
pub(crate) fn invalidate_async(task: KBox<dyn Invalidated>, chunks: ChunkLists) -> InvAsync {
    let Ok(slot) = KBox::<InvCtx>::new_uninit(GFP_KERNEL) else {
        return InvAsync::Refused(task, chunks);
    };
    let ctx = KBox::write(slot, InvCtx { task, chunks });
    let mut v: KVec<*mut rpcrdma_cm_chunk> = KVec::new();
    let listed = ctx
        .chunks
        .iter()
        .flat_map(ChunkList::iter)
        .filter(|c| c.reg.is_some() && !c.remote_inv)
        .try_for_each(|c| v.push(c.raw.as_ptr(), GFP_KERNEL));
    if listed.is_err() {
        let InvCtx { task, chunks } = KBox::into_inner(ctx);
        return InvAsync::Refused(task, chunks);
    }
    let n = u32::try_from(v.len()).unwrap_or(0);
    let ctx = KBox::into_raw(ctx);
    let mut posted = 0u32;
    // C owns the box from here (unless it fails: then it is ours again) until
    // it hands it to rpcrdma_cm_inv_done_rs(), after its last use of them.
    // SAFETY: `v` holds `n` live chunks of the box `ctx` (see above).
    let ret = unsafe { rpcrdma_cm_chunks_inv(v.as_mut_ptr(), n, ctx.cast(), &mut posted) };
    if ret == 0 {
        return InvAsync::Taken(posted);
    }
    // SAFETY: C did not take `ctx`: still the box made above.
    let InvCtx { task, chunks } = KBox::into_inner(unsafe { KBox::from_raw(ctx) });
    InvAsync::Refused(task, chunks)
}

/// The last LOCAL_INV of a batch [`invalidate_async`] posted completed.
///
/// # Safety
///
/// Called only by chunk.c, once per batch, from the last LOCAL_INV's
/// completion (the CQ's polling work) or from rpcrdma_cm_chunks_inv()
/// itself, with `done` the context `invalidate_async` handed it, which is
/// ours again.
#[no_mangle]
unsafe extern "C" fn rpcrdma_cm_inv_done_rs(done: *mut c_void, status: c_int) {
    // SAFETY: see above: the box `invalidate_async` made, handed back once.
    let InvCtx { mut task, chunks } = KBox::into_inner(unsafe { KBox::from_raw(done.cast()) });
    task.invalidated(chunks, status);
}
c_fn!(rpcrdma_cm_inv_done_rs);
