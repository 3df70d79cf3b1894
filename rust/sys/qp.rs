// SPDX-License-Identifier: GPL-2.0

//! A connection's queue pair and its message buffers (the C half is `qp.c`).
//!
//! A [`Qp`] is a counted handle: the connection's teardown (dropping its
//! [`CmId`](super::rdma_cm::CmId)) marks the QP closed, so that every
//! operation through any handle fails with `ENOTCONN`, drains and frees it, and
//! then waits for the last handle and the last [`Chunk`](super::chunk::Chunk)
//! to be dropped before it frees the PD. A holder must therefore let go of its
//! handles once the connection has failed; it must not wait for anything first.
//!
//! Buffers: Receives of the advertised receive size are posted as the owner
//! asks ([`Qp::grow_recv`]), up to the depth given at creation; Send buffers
//! are allocated on first use. An idle connection costs its initial Receives.

use core::mem::ManuallyDrop;
use core::ptr::{self, NonNull};
use kernel::error::to_result;
use kernel::prelude::*;

use super::bindings::{
    rpcrdma_cm_buf, rpcrdma_cm_chunks_allocated, rpcrdma_cm_qp, rpcrdma_cm_qp_attr,
    rpcrdma_cm_qp_disconnect, rpcrdma_cm_qp_get, rpcrdma_cm_qp_put, rpcrdma_cm_recv_allocated,
    rpcrdma_cm_recv_counts, rpcrdma_cm_recv_grow, rpcrdma_cm_recv_keep, rpcrdma_cm_recv_release,
    rpcrdma_cm_rw, rpcrdma_cm_rw_drop, rpcrdma_cm_rw_post_held, rpcrdma_cm_send_abort,
    rpcrdma_cm_send_allocated, rpcrdma_cm_send_get, rpcrdma_cm_send_post,
};
use super::chunk::{self, ChunkList};

/// One Send in this many asks for a completion; up to one batch less one of
/// a QP's Send buffers may wait, unsignaled, for the next signaled Send
/// (`qp.c`), so Send buffers are counted with this on top.
pub(crate) use super::bindings::RPCRDMA_CM_SEND_BATCH as SEND_BATCH;

/// How large a new QP is.
#[derive(Clone, Copy, Debug)]
pub(crate) struct QpAttr {
    /// Sends in flight at most (and Send buffers at most).
    pub(crate) send_depth: u32,
    /// Receive buffers at most.
    pub(crate) recv_depth: u32,
    /// Receive buffers posted at creation (1 to `recv_depth`).
    pub(crate) recv_initial: u32,
    /// Octets per Send buffer: what we advertised as our send size.
    pub(crate) send_size: u32,
    /// Octets per Receive buffer: what we advertised as our receive size.
    pub(crate) recv_size: u32,
    /// Receive completions are handed to the owner in the CQ's own context
    /// (process context, in order) rather than from the module's Receive
    /// work: only for an owner whose handler never waits for a completion
    /// of this QP (an RDMA Read it posted, a LOCAL_INV), which would wait
    /// for itself.
    pub(crate) recv_direct: bool,
    /// The owner registers chunks (a requester): the Send Queue has room
    /// for their REG_MRs and LOCAL_INVs besides the Sends.
    pub(crate) registers: bool,
}

impl QpAttr {
    /// C's view, with the module's Receive queue (`ENODEV` once it is gone).
    pub(super) fn c(&self) -> Result<rpcrdma_cm_qp_attr> {
        Ok(rpcrdma_cm_qp_attr {
            send_depth: self.send_depth,
            recv_depth: self.recv_depth,
            recv_initial: self.recv_initial,
            send_size: self.send_size,
            recv_size: self.recv_size,
            recv_wq: super::workqueue::recv_queue()?,
            recv_direct: self.recv_direct,
            registers: self.registers,
        })
    }
}

/// A counted handle on a connection's QP.
pub(crate) struct Qp {
    raw: NonNull<rpcrdma_cm_qp>,
}

// SAFETY: the C QP is not tied to a thread: its state is under its own lock or
// atomic, and every function this type calls may run in any process context.
unsafe impl Send for Qp {}
// SAFETY: every method takes `&self` and the C functions behind them serialise
// on the QP's lock (see qp.c); none hands out a reference into the QP.
unsafe impl Sync for Qp {}

impl Qp {
    /// A handle of a QP that is kept alive by its caller for the lifetime of the
    /// result, without a reference of its own: drop of the result does nothing.
    ///
    /// Callers are completion callbacks (teardown drains them first) or hold
    /// a borrow of the [`CmId`](super::rdma_cm::CmId) that owns the QP.
    ///
    /// # Safety
    ///
    /// `raw` is a live QP from `rpcrdma_cm_create_qp`, alive while in use.
    pub(super) unsafe fn borrowed(raw: *mut rpcrdma_cm_qp) -> Option<ManuallyDrop<Qp>> {
        NonNull::new(raw).map(|raw| ManuallyDrop::new(Qp { raw }))
    }

    /// The C pointer, for [`Chunk::new`](super::chunk::Chunk::new).
    pub(super) fn raw(&self) -> *mut rpcrdma_cm_qp {
        self.raw.as_ptr()
    }

    /// Starts a disconnect (`rdma_disconnect()`); the CM's DISCONNECTED event
    /// follows.
    pub(crate) fn disconnect(&self) -> Result {
        // SAFETY: our handle keeps the QP alive, and the id outlives the QP
        // (it is destroyed only after the QP's teardown, which waits for us).
        to_result(unsafe { rpcrdma_cm_qp_disconnect(self.raw()) })
    }

    /// Posts up to `n` more Receive buffers (never more than the QP's receive
    /// depth in all); returns how many were added.
    pub(crate) fn grow_recv(&self, n: u32) -> Result<u32> {
        // SAFETY: our handle keeps the QP alive; C serialises with teardown.
        let ret = unsafe { rpcrdma_cm_recv_grow(self.raw(), n) };
        to_result(ret)?;
        Ok(ret.unsigned_abs())
    }

    /// The QP's Receives: how many it keeps posted, how many messages are
    /// being handled, and how many buffers the owner keeps (see
    /// [`RecvCounts`]).
    pub(crate) fn recv_buffers(&self) -> RecvCounts {
        let mut c = RecvCounts::default();
        // SAFETY: our handle keeps the QP alive; C reads three words into the
        // out pointers.
        unsafe { rpcrdma_cm_recv_counts(self.raw(), &mut c.posting, &mut c.handling, &mut c.kept) };
        c
    }

    /// Receive buffers allocated (posted, kept or free), and how many times
    /// a kept one could not be replaced (the grant shrank instead).
    pub(crate) fn recv_allocated(&self) -> (u32, u32) {
        let (mut allocated, mut short) = (0u32, 0u32);
        // SAFETY: as in `recv_buffers`, two words.
        unsafe { rpcrdma_cm_recv_allocated(self.raw(), &mut allocated, &mut short) };
        (allocated, short)
    }

    /// Send buffers allocated so far.
    pub(crate) fn send_buffers(&self) -> u32 {
        // SAFETY: as in `recv_buffers`.
        unsafe { rpcrdma_cm_send_allocated(self.raw()) }
    }

    /// Chunks allocated on this QP so far (an ended small one is kept for
    /// the next, see chunk.c).
    pub(crate) fn chunks_allocated(&self) -> u32 {
        // SAFETY: as in `recv_buffers`, one word.
        unsafe { rpcrdma_cm_chunks_allocated(self.raw()) }
    }

    /// Sends one message: `fill` writes it into a Send buffer and returns its
    /// length; with `invalidate`, the Send invalidates that rkey at the peer
    /// (Send With Invalidate). Fails as [`Qp::send_buf`] and
    /// [`SendBuf::post`] do.
    pub(crate) fn send(
        &self,
        invalidate: Option<u32>,
        fill: impl FnOnce(&mut [u8]) -> Result<usize>,
    ) -> Result {
        self.send_after(invalidate, None, fill)
    }

    /// As [`Qp::send`], with the RDMA Write `held` (prepared for this reply)
    /// posted in front of the Send, in the same post ([`SendBuf::post`]).
    /// If the Send buffer cannot be had or filled, `held` is dropped unposted.
    pub(crate) fn send_after(
        &self,
        invalidate: Option<u32>,
        held: Option<HeldWrite>,
        fill: impl FnOnce(&mut [u8]) -> Result<usize>,
    ) -> Result {
        let none = ChunkList::default();
        self.send_buf(fill)?.post(invalidate, [&none, &none], held)
    }

    /// Takes a Send buffer and fills it: `fill` writes the message and
    /// returns its length. Fails with `EBUSY` if every Send buffer is in
    /// use, `ENOTCONN` once the connection is closing, `EMSGSIZE` if `fill`
    /// returns more than the buffer holds. May sleep (a buffer's first use
    /// allocates it).
    pub(crate) fn send_buf(
        &self,
        fill: impl FnOnce(&mut [u8]) -> Result<usize>,
    ) -> Result<SendBuf> {
        let (mut b, mut addr, mut size) = (ptr::null_mut(), ptr::null_mut(), 0u32);
        // SAFETY: our handle keeps the QP alive; the out pointers are valid.
        to_result(unsafe { rpcrdma_cm_send_get(self.raw(), &mut b, &mut addr, &mut size) })?;
        let b = NonNull::new(b).ok_or(EINVAL)?;
        // INVARIANT: `b` was just taken and is not posted.
        let mut sb = SendBuf { b, len: 0 };
        // SAFETY: the buffer is ours until posted or aborted (teardown waits for
        // it): `size` octets at `addr`, referenced by no WR. The slice ends
        // before `sb` is posted or dropped.
        let buf = unsafe { core::slice::from_raw_parts_mut(addr, size as usize) };
        let len = fill(buf)?;
        sb.len = u32::try_from(len).map_err(|_| EMSGSIZE)?;
        if len > size as usize {
            return Err(EMSGSIZE);
        }
        Ok(sb)
    }
}

/// A filled Send buffer, not yet posted ([`Qp::send_buf`]): [`SendBuf::post`]
/// posts it; dropped, it goes back to the QP unposted.
///
/// # Invariants
///
/// `b` came from `rpcrdma_cm_send_get` and was neither posted nor aborted;
/// it holds one of its QP's users (teardown waits for it). `len` octets of it
/// are the message.
pub(crate) struct SendBuf {
    b: NonNull<rpcrdma_cm_buf>,
    len: u32,
}

impl SendBuf {
    /// Posts the message as a Send, or with `invalidate` as Send With
    /// Invalidate of that rkey. The pending REG_MRs of the chunks in `regs`
    /// (in order) go in front of it in the same post, as xprtrdma's
    /// frwr_send: one post, and the QP's ordering makes each registration
    /// valid before the peer learns of it. Fails with `ENOTCONN` once the
    /// connection is closing, or the device's error; a REG_MR not posted
    /// then leaves its chunk unregistered, needing no LOCAL_INV. `EINVAL`
    /// if a chunk of `regs`, or `held`, is another QP's: nothing posted.
    ///
    /// `held`, an RDMA Write of the reply's data, goes between those REG_MRs
    /// and the Send, as svcrdma links a reply's Writes with its Send: one
    /// post, and the Send reaches the peer after the data (RC ordering). It
    /// keeps its own completion, which releases it; not posted (an error
    /// before or at its first WR), it is dropped; posted in part, the
    /// connection ends and teardown frees it.
    pub(crate) fn post(
        self,
        invalidate: Option<u32>,
        regs: [&ChunkList; 2],
        held: Option<HeldWrite>,
    ) -> Result {
        let me = ManuallyDrop::new(self);
        let (inv, rkey) = (invalidate.is_some(), invalidate.unwrap_or(0));
        // `regs` stay borrowed until the post returns, which unlinks them; C
        // checks `len` against the buffer size.
        let first = chunk::link_chain(regs);
        // Null, or a prepared chain handed over: C owns it whatever it returns
        // (and refuses one of another QP).
        let rw = held.map_or(ptr::null_mut(), HeldWrite::into_raw);
        // SAFETY: `b` is ours, unposted (type invariant), unused after this (no
        // Drop for `me`); `first` is null or chains live chunks (C refuses any
        // of another QP); `rw` as above.
        to_result(unsafe { rpcrdma_cm_send_post(me.b.as_ptr(), me.len, inv, rkey, first, rw) })
    }
}

impl Drop for SendBuf {
    fn drop(&mut self) {
        // SAFETY: by the type invariant `b` was neither posted nor aborted.
        unsafe { rpcrdma_cm_send_abort(self.b.as_ptr()) };
    }
}

/// An RDMA Write chain prepared but not posted (`rpcrdma_cm_rdma_write_held`
/// or `rpcrdma_cm_rdma_write_kvec_held` in `chunk.c`): it holds its Send Queue room, its mappings, a reference on
/// each of its pages and one of its QP's users. [`SendBuf::post`] posts it in
/// front of a Send, [`HeldWrite::post`] alone; dropped, it is undone
/// unposted.
///
/// # Invariants
///
/// `rw` came from `rpcrdma_cm_rdma_write_held` (or its kvec form) and was
/// neither posted nor dropped.
pub(crate) struct HeldWrite {
    rw: NonNull<rpcrdma_cm_rw>,
}

// SAFETY: the chain is not tied to the thread that prepared it: C posts,
// drops or releases it from any thread, under its QP's lock where shared.
unsafe impl Send for HeldWrite {}

impl HeldWrite {
    /// Takes over a chain `rpcrdma_cm_rdma_write_held` (or its kvec form)
    /// just prepared.
    ///
    /// # Safety
    ///
    /// `rw` is such a chain, neither posted nor dropped, and no one else's.
    pub(crate) unsafe fn from_raw(rw: NonNull<rpcrdma_cm_rw>) -> Self {
        // INVARIANT: as the caller guarantees.
        Self { rw }
    }

    /// Hands the chain over to C, which posts or drops it.
    fn into_raw(self) -> *mut rpcrdma_cm_rw {
        ManuallyDrop::new(self).rw.as_ptr()
    }

    /// Posts the chain alone: the Send that names its data must follow on
    /// the same QP. Fails with `ENOTCONN` once the connection is closing or
    /// the device's error (posted in part: the connection ends).
    pub(crate) fn post(self) -> Result {
        // SAFETY: a prepared chain, handed over (type invariant; no Drop).
        to_result(unsafe { rpcrdma_cm_rw_post_held(self.into_raw()) })
    }
}

impl Drop for HeldWrite {
    fn drop(&mut self) {
        // SAFETY: by the type invariant the chain was neither posted nor dropped.
        unsafe { rpcrdma_cm_rw_drop(self.rw.as_ptr()) };
    }
}

/// A QP's Receives at one moment ([`Qp::recv_buffers`]).
#[derive(Clone, Copy, Default)]
pub(crate) struct RecvCounts {
    /// Receives the QP keeps posted: what credits are granted against. A
    /// buffer the owner keeps is replaced at once, so this does not drop
    /// while calls are being handled.
    pub(crate) posting: u32,
    /// Messages received and being handled: neither given back nor kept
    /// yet.
    pub(crate) handling: u32,
    /// Buffers the owner keeps ([`RecvBuf`]).
    pub(crate) kept: u32,
}

/// A received message kept past its completion callback (see
/// [`Completion::keep`](super::rdma_cm::Completion::keep)): its buffer is not
/// posted again until this is dropped, and the connection's teardown waits
/// for that, so the message stays readable for as long as this lives.
///
/// # Invariants
///
/// `b` is a kept Receive buffer of the live QP `qp`: it holds one of the
/// QP's users (teardown frees no buffer before every kept one is released)
/// and one reference on it (the QP is not freed before the release has
/// returned), both given back by [`Drop`]; `qp` is that reference (never
/// dropped as a [`Qp`]). `data` is `b`'s message, `len` octets long.
pub(crate) struct RecvBuf {
    b: NonNull<rpcrdma_cm_buf>,
    qp: ManuallyDrop<Qp>,
    data: *mut u8,
    len: usize,
}

/// Part of a kept received message handed to C by pointer, to decode and
/// possibly rewrite in place (nfsd's RPCSEC_GSS unwrapping does): the
/// pointer is C's own, never derived from a Rust borrow. Valid while the
/// [`RecvBuf`] it came from is kept.
pub(crate) struct MsgRegion {
    pub(crate) ptr: *mut u8,
    pub(crate) len: usize,
}

// SAFETY: the buffer is not tied to a thread; its release takes the QP's lock.
unsafe impl Send for RecvBuf {}
// SAFETY: `&RecvBuf` only reads the message. Its one writer, C decoding in
// place through a [`MsgRegion`], comes after the module has read what it needs.
unsafe impl Sync for RecvBuf {}

impl RecvBuf {
    /// Keeps the buffer `b` holding the `len`-octet message at `data`.
    ///
    /// qp.c leaves a kept buffer alone until [`Drop`] releases it.
    ///
    /// # Safety
    ///
    /// `b`'s Receive callback (successful, keeping it) runs now for that message.
    pub(super) unsafe fn keep(
        b: *mut rpcrdma_cm_buf,
        data: *mut u8,
        len: usize,
    ) -> Option<RecvBuf> {
        let b = NonNull::new(b)?;
        if data.is_null() {
            return None;
        }
        // SAFETY: see above; C counts it in the QP's users and references
        // until released, and returns the buffer's (live) QP.
        let raw = unsafe { rpcrdma_cm_recv_keep(b.as_ptr()) };
        // SAFETY: qp.c sets a buffer's QP when it allocates the buffer, never
        // to null.
        let raw = unsafe { NonNull::new_unchecked(raw) };
        // INVARIANT: kept just above, with its message at `data`; `raw` is
        // the QP whose reference the keep took.
        Some(RecvBuf {
            b,
            qp: ManuallyDrop::new(Qp { raw }),
            data,
            len,
        })
    }

    /// The buffer's QP, alive while the buffer is kept (the buffer's own
    /// reference: no count taken).
    pub(crate) fn qp(&self) -> &Qp {
        &self.qp
    }

    /// The message from octet `from` on, for C to use in place (see
    /// [`MsgRegion`]); `None` past its end.
    pub(crate) fn region(&self, from: usize) -> Option<MsgRegion> {
        let len = self.len.checked_sub(from)?;
        Some(MsgRegion {
            ptr: self.data.wrapping_add(from),
            len,
        })
    }

    /// The message.
    pub(crate) fn data(&self) -> &[u8] {
        // SAFETY: the buffer is kept (not reposted, not freed: teardown waits
        // for us), and the device wrote it before its completion.
        unsafe { core::slice::from_raw_parts(self.data, self.len) }
    }
}

impl Drop for RecvBuf {
    fn drop(&mut self) {
        // SAFETY: kept by `keep` (type invariant), released exactly once here;
        // the user and the reference it holds go with it.
        unsafe { rpcrdma_cm_recv_release(self.b.as_ptr()) };
    }
}

impl Clone for Qp {
    fn clone(&self) -> Self {
        // SAFETY: our handle keeps the QP alive while we take another reference.
        unsafe { rpcrdma_cm_qp_get(self.raw()) };
        Qp { raw: self.raw }
    }
}

impl Drop for Qp {
    fn drop(&mut self) {
        // SAFETY: we own one reference, given back exactly once.
        unsafe { rpcrdma_cm_qp_put(self.raw()) };
    }
}
