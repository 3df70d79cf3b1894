// SPDX-License-Identifier: GPL-2.0

//! The requester's pipeline, one for every requester on a connection (a
//! mount's transport; in test builds, the debugfs caller), in the steps
//! xprtrdma's `rpcrdma_marshal_req` and `rpcrdma_reply_handler` take:
//!
//! 1. [`plan`]: with the protocol core, for the negotiated thresholds and the
//!    segments the device's registrations cover: the Call inline, its DDP
//!    item in a Read chunk, or the whole Call in a Position-Zero Read chunk
//!    (RDMA_NOMSG); the Reply inline, its DDP item in a Write chunk, or whole
//!    in a Reply chunk.
//! 2. [`prepare`]: registers the chunks the plan names (FRWR, their REG_MRs
//!    posted with the Send that names them) through the Call's [`CallSource`], which decides what
//!    memory backs a DDP item (the RPC's own pages, or pages of ours), and
//!    lists their segments for the header.
//! 3. [`encode`] and [`post`]: encodes the transport header and the inline
//!    parts of the Call into one Send, within the negotiated client-to-server
//!    threshold, and posts it with the chunks' REG_MRs in front of it.
//! 4. [`reply_kind`] and [`Regs::check`]: where the Reply says it is (inline,
//!    a Write chunk, a Reply chunk) and whether that is a chunk the Call
//!    offered, no larger than offered (RFC 8166, Sections 3.4.6, 3.4.7 and
//!    4.2); [`Regs::read_reply_chunk`] reads a Reply chunk.
//! 5. [`Regs::release`]: LOCAL_INV for each registration, except the
//!    one the Reply's Send With Invalidate invalidated.
//!
//! What differs between requesters stays with them: where a Call's bytes come
//! from, how a Reply is matched to its Call (sunrpc's lookup, or the caller's
//! slots) and where it is placed.

use kernel::alloc::KVVec;
use kernel::prelude::*;

use super::xprt::short;
use super::Conn;
use crate::proto::chunk::{self, CallPlan, DdpItem, Plan, ReplyPlan, RpcShape};
use crate::proto::header::{encode_msg, Body, Header, MsgSpec, ReadSegment, Segment};
use crate::proto::negotiate::Negotiated;
use crate::proto::xdr::xdr_align;
use crate::stats::XprtCounter as X;
use crate::sys::chunk::{Chunk, ChunkList, Released};
use crate::sys::qp::{Qp, SendBuf};
use crate::sys::trace;
use crate::sys::xdr_buf::XdrMsg;

/// The largest segment of one chunk (one FRWR registration).
const MAX_SEGMENT: u32 = 2 << 20;

/// Octets of one segment, starting `first` octets into a page, that one
/// registration of at most `pages` pages (and [`MAX_SEGMENT`]) covers.
fn segment_room(first: u32, pages: u32) -> u32 {
    let page = kernel::page::PAGE_SIZE as u32;
    pages
        .max(1)
        .saturating_mul(page)
        .saturating_sub(first % page)
        .min(MAX_SEGMENT)
}

/// A Call to send, whoever holds its bytes.
pub(super) trait CallSource {
    /// Its XID.
    fn xid(&self) -> u32;
    /// Its length, what of it is DDP-eligible, and the largest Reply.
    fn shape(&self) -> RpcShape;
    /// Copies the Call's octets from `off` into `out`.
    fn read(&self, off: u32, out: &mut [u8]) -> Result;
    /// Registers chunk memory holding the Call's DDP item `item` into `out`,
    /// for the peer to read (a Read chunk at the item's position).
    fn ddp_call(&self, reg: &Registrar<'_>, item: DdpItem, out: &mut ChunkList) -> Result;
    /// Registers chunk memory of `len` octets for the Reply's DDP item into
    /// `out`, for the peer to write (a Write chunk).
    fn ddp_reply(&self, reg: &Registrar<'_>, len: u32, out: &mut ChunkList) -> Result;
}

/// Registers a Call's chunks on `qp`, in segments the device's registrations
/// cover (`fr_pages` pages each). Each registered segment goes into the
/// caller's list at once, so that one registered before a failure is
/// released (and its LOCAL_INV counted) with the rest.
pub(super) struct Registrar<'a> {
    conn: &'a Conn,
    qp: &'a Qp,
    xid: u32,
    fr_pages: u32,
}

impl Registrar<'_> {
    /// Registers `c` for the peer to read, or write with `remote_write`; a
    /// failure is traced (`reg_failed`).
    fn register(&self, c: &mut Chunk, remote_write: bool) -> Result {
        self.conn
            .register_chunk(c, remote_write)
            .inspect_err(|e| trace::xprt(self.conn.id, "reg_failed", self.xid, e.to_errno()))
    }

    /// Registers `c` and puts it into `out`: registered first, then kept
    /// (room for it made before), so no registered segment is dropped
    /// unlisted.
    fn push(&self, out: &mut ChunkList, mut c: Chunk, remote_write: bool) -> Result {
        out.reserve_one()?;
        self.register(&mut c, remote_write)?;
        out.push(c)
    }

    /// `len` octets of chunk memory of our own, zeroed and registered.
    pub(super) fn alloc(&self, out: &mut ChunkList, len: u32, remote_write: bool) -> Result {
        self.alloc_with(out, len, remote_write, &mut |_, _| Ok(()))
    }

    /// `len` octets of chunk memory of our own for the peer to read, each
    /// segment filled by `fill` (with its offset in the chunk) before it is
    /// registered.
    pub(super) fn alloc_filled(
        &self,
        out: &mut ChunkList,
        len: u32,
        fill: &mut dyn FnMut(&mut Chunk, u32) -> Result,
    ) -> Result {
        self.alloc_with(out, len, false, fill)
    }

    fn alloc_with(
        &self,
        out: &mut ChunkList,
        len: u32,
        remote_write: bool,
        fill: &mut dyn FnMut(&mut Chunk, u32) -> Result,
    ) -> Result {
        let mut at = 0;
        while at < len {
            let k = (len - at).min(segment_room(0, self.fr_pages));
            let mut c = Chunk::new(self.qp, k)?;
            fill(&mut c, at)?;
            self.push(out, c, remote_write)?;
            at += k;
        }
        Ok(())
    }

    /// The page part of `msg`, in place, registered.
    pub(super) fn wrap(&self, out: &mut ChunkList, msg: &XdrMsg<'_>, remote_write: bool) -> Result {
        let len = msg.page_len();
        let mut at = 0;
        while at < len {
            let k = (len - at).min(segment_room(msg.page_offset() + at, self.fr_pages));
            let c = msg.wrap_pages(self.qp, at, k)?;
            self.push(out, c, remote_write)?;
            at += k;
        }
        Ok(())
    }
}

/// Plans a Call of `shape` for what the connection negotiated, with
/// segments as the registrations will cut them (a page less, for data that
/// does not start on a page boundary), so the header's size is planned right.
pub(super) fn plan(neg: &Negotiated, fr_pages: u32, shape: &RpcShape) -> Result<Plan> {
    let page = kernel::page::PAGE_SIZE as u32;
    let seg_max = segment_room(0, fr_pages).saturating_sub(page).max(page);
    chunk::plan(neg.c2s, neg.s2c, shape, seg_max).map_err(|_| EMSGSIZE)
}

/// What releasing a call's chunks took ([`Regs::release`]).
#[derive(Default, Clone, Copy)]
pub(super) struct ReleaseCounts {
    /// LOCAL_INVs posted (and completed).
    pub(super) local_inv: u32,
    /// Registrations not known invalid, deregistered instead (after the
    /// QP's teardown drained it).
    pub(super) recycled: u32,
}

/// What a Call registered for the peer, one registration per segment: its
/// Read chunk (a DDP item, or the whole Call) and its Write or Reply chunk.
#[derive(Default)]
pub(super) struct Regs {
    pub(super) call: ChunkList,
    pub(super) reply: ChunkList,
    /// `reply` is a Write chunk.
    pub(super) write_list: bool,
    /// A mount's entry whose Reply waits for its LOCAL_INVs (the chunks are
    /// out with them, see `rpc_xprt::reply::AfterInv`).
    pub(super) deferred: bool,
}

/// A Call's transport header and inline parts, ready to post.
pub(super) struct Wire {
    nomsg: bool,
    reads: Few<ReadSegment>,
    reply: Few<Segment>,
    write_list: bool,
    /// What of the Call goes in the Send, as (offset, length) in the Call.
    inline: [(u32, u32); 2],
}

/// The segment of a registered chunk, as the header lists it.
fn segment(c: &Chunk) -> Result<Segment> {
    let r = c.registration().ok_or(EINVAL)?;
    Ok(Segment {
        handle: r.rkey,
        length: c.len(),
        offset: r.iova,
    })
}

/// Segments kept inline up to [`FEW`], on the heap beyond: the lists of
/// most calls (a chunk or two) cost no allocation.
enum Few<T> {
    Inline([T; FEW], usize),
    Heap(KVec<T>),
}

/// Segments a [`Few`] holds inline.
const FEW: usize = 4;

impl<T: Copy + Default> Few<T> {
    /// `f(chunk)` for each chunk of `items`, in order.
    fn map(items: &ChunkList, mut f: impl FnMut(&Chunk) -> Result<T>) -> Result<Self> {
        let n = items.len();
        if n <= FEW {
            let mut a = [T::default(); FEW];
            for (slot, item) in a.iter_mut().zip(items.iter()) {
                *slot = f(item)?;
            }
            return Ok(Few::Inline(a, n));
        }
        let mut v = KVec::with_capacity(n, GFP_KERNEL)?;
        for item in items.iter() {
            v.push(f(item)?, GFP_KERNEL)?;
        }
        Ok(Few::Heap(v))
    }
}

impl<T> core::ops::Deref for Few<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        match self {
            Few::Inline(a, n) => &a[..*n],
            Few::Heap(v) => v,
        }
    }
}

/// Registers the chunks `p` names for `src` into `regs` (empty before) and
/// lays out its Send. On error `regs` holds what was registered, for the
/// caller to release.
pub(super) fn prepare(
    conn: &Conn,
    qp: &Qp,
    fr_pages: u32,
    src: &dyn CallSource,
    p: &Plan,
    regs: &mut Regs,
) -> Result<Wire> {
    let reg = Registrar {
        conn,
        qp,
        xid: src.xid(),
        fr_pages,
    };
    let call_len = src.shape().call_len;
    let mut inline = [(0u32, call_len), (0, 0)];
    let mut position = 0;
    let nomsg = match p.call {
        CallPlan::Inline => {
            conn.count(X::CallsInline, 1);
            false
        }
        CallPlan::ReadChunk {
            position: at, len, ..
        } => {
            // In the Send, what precedes the item and what follows its XDR
            // pad (RFC 8166 Section 3.5.4: the pad is not sent).
            src.ddp_call(&reg, DdpItem { position: at, len }, &mut regs.call)?;
            position = at;
            let after = xdr_align(at.saturating_add(len) as usize)
                .and_then(|a| u32::try_from(a).ok())
                .ok_or(EMSGSIZE)?
                .min(call_len);
            inline = [(0, at), (after, call_len - after)];
            conn.count(X::CallsReadChunk, 1);
            false
        }
        CallPlan::PositionZero { len, .. } => {
            // The whole Call, padded with zeros (chunks start zeroed).
            let mut buf = KVVec::new();
            reg.alloc_filled(&mut regs.call, len, &mut |c, at| {
                let n = c.len().min(call_len.saturating_sub(at)) as usize;
                buf.clear();
                buf.extend_with(n, 0, GFP_KERNEL)?;
                src.read(at, &mut buf)?;
                c.write_at(0, &buf)
            })?;
            inline = [(0, 0), (0, 0)];
            conn.count(X::CallsLong, 1);
            true
        }
    };
    match p.reply {
        ReplyPlan::Inline => {}
        ReplyPlan::WriteList { len, .. } => {
            regs.write_list = true;
            src.ddp_reply(&reg, len, &mut regs.reply)?;
        }
        ReplyPlan::ReplyChunk { len, .. } => reg.alloc(&mut regs.reply, len, true)?,
    }
    let reads = Few::map(&regs.call, |c| {
        Ok(ReadSegment {
            position,
            segment: segment(c)?,
        })
    })?;
    let wire = Wire {
        nomsg,
        reads,
        reply: Few::map(&regs.reply, segment)?,
        write_list: regs.write_list,
        inline,
    };
    Ok(wire)
}

/// A Call in its Send buffer, ready to post ([`post`]).
pub(super) struct Encoded {
    buf: SendBuf,
    len: usize,
}

/// Encodes `src` into a Send buffer as `wire` lays it out, asking for
/// `credits` (step 3).
pub(super) fn encode(
    qp: &Qp,
    neg: &Negotiated,
    src: &dyn CallSource,
    credits: u32,
    wire: &Wire,
) -> Result<Encoded> {
    let wl: [&[Segment]; 1] = [&wire.reply];
    let (writes, reply): (&[&[Segment]], _) = match (wire.write_list, wire.reply.is_empty()) {
        (true, _) => (&wl, None),
        (false, false) => (&[], Some(&wire.reply[..])),
        (false, true) => (&[], None),
    };
    let spec = MsgSpec {
        xid: src.xid(),
        credits,
        nomsg: wire.nomsg,
        reads: &wire.reads,
        writes,
        reply,
    };
    let mut len = 0;
    let buf = qp.send_buf(|buf| {
        let limit = buf.len().min(neg.c2s as usize);
        let buf = &mut buf[..limit];
        let mut at = encode_msg(buf, &spec).map_err(short)?;
        for (off, n) in wire.inline.into_iter().filter(|&(_, n)| n != 0) {
            let end = at + n as usize;
            src.read(off, buf.get_mut(at..end).ok_or(EMSGSIZE)?)?;
            at = end;
        }
        len = at;
        Ok(at)
    })?;
    Ok(Encoded { buf, len })
}

/// Posts the Call `e`, the REG_MRs of its chunks `regs` in front of it;
/// the octets sent.
pub(super) fn post(conn: &Conn, e: Encoded, regs: &Regs) -> Result<usize> {
    e.buf.post(None, [&regs.call, &regs.reply], None)?;
    conn.touch();
    conn.count(X::CallsSent, 1);
    conn.count(X::BytesSend, e.len as u64);
    Ok(e.len)
}

/// Where a Reply is, as its transport header says.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum ReplyKind {
    /// Whole in the Send.
    Inline,
    /// The DDP-eligible result in the Call's Write chunk (`written` octets),
    /// the rest in the Send.
    WriteList { written: u32 },
    /// RDMA_NOMSG: the whole Reply in the Call's Reply chunk (`written`
    /// octets).
    ReplyChunk { written: u32 },
}

impl ReplyKind {
    #[cfg(CONFIG_RPCRDMA_CM_TEST)]
    pub(super) fn name(&self) -> &'static str {
        match self {
            ReplyKind::Inline => "inline",
            ReplyKind::WriteList { .. } => "write_list",
            ReplyKind::ReplyChunk { .. } => "reply_chunk",
        }
    }
}

/// Why a Reply cannot be used.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum BadReply {
    /// RDMA_ERROR: the responder could not process the Call.
    RdmaError,
    /// A header that breaks RFC 8166 (counted `header_errors`).
    Header,
    /// Chunks the Call did not offer, or more than offered (counted
    /// `chunk_errors`).
    Chunks,
}

/// Where the Reply `h` is (RFC 8166 Section 4.2). What it says is checked
/// against what the Call offered by [`Regs::check`]; the requester counts
/// it ([`count_kind`]) when it takes it.
pub(super) fn reply_kind(conn: &Conn, h: &Header<'_>) -> core::result::Result<ReplyKind, BadReply> {
    let (c, nomsg) = match h.body {
        Body::Error(_) => {
            conn.count(X::RdmaErrorReceived, 1);
            return Err(BadReply::RdmaError);
        }
        Body::Msg(c) => (c, false),
        Body::NoMsg(c) => (c, true),
    };
    let written = c.write_list().map(|w| w.total_len()).sum::<u64>();
    let written = u32::try_from(written).unwrap_or(u32::MAX);
    let kind = if nomsg {
        // The whole Reply is in the Reply chunk: nothing was written to a
        // Write chunk (Section 4.2.2).
        let Some(total) = c.reply_chunk().map(|s| s.total_len()) else {
            conn.count(X::HeaderErrors, 1);
            return Err(BadReply::Header);
        };
        if written > 0 {
            conn.count(X::ChunkErrors, 1);
            return Err(BadReply::Chunks);
        }
        ReplyKind::ReplyChunk {
            written: u32::try_from(total).unwrap_or(u32::MAX),
        }
    } else if c.reply_chunk().is_some_and(|r| r.total_len() > 0) {
        // RDMA_MSG carries no Reply chunk back (Section 4.2.1).
        conn.count(X::ChunkErrors, 1);
        return Err(BadReply::Chunks);
    } else if written == 0 {
        ReplyKind::Inline
    } else if c.write_list().count() != 1 {
        // Our Calls offer one Write chunk at most.
        conn.count(X::ChunkErrors, 1);
        return Err(BadReply::Chunks);
    } else {
        ReplyKind::WriteList { written }
    };
    Ok(kind)
}

/// Counts a Reply of `kind` (`replies_inline`, `replies_write_list`,
/// `replies_reply_chunk`).
pub(super) fn count_kind(conn: &Conn, kind: ReplyKind) {
    let c = match kind {
        ReplyKind::Inline => X::RepliesInline,
        ReplyKind::WriteList { .. } => X::RepliesWriteList,
        ReplyKind::ReplyChunk { .. } => X::RepliesReplyChunk,
    };
    conn.count(c, 1);
}

impl Regs {
    /// Octets the Reply's chunk offers.
    pub(super) fn reply_len(&self) -> u64 {
        self.reply.iter().map(|c| u64::from(c.len())).sum()
    }

    /// Whether a Reply of `kind` used only a chunk the Call offered, and no
    /// more of it than offered (RFC 8166, Sections 3.4.6 and 3.4.7);
    /// counted `chunk_errors` if not.
    pub(super) fn check(&self, conn: &Conn, kind: ReplyKind) -> core::result::Result<(), BadReply> {
        let room = self.reply_len();
        let ok = match kind {
            ReplyKind::Inline => true,
            ReplyKind::WriteList { written } => self.write_list && u64::from(written) <= room,
            ReplyKind::ReplyChunk { written } => {
                !self.write_list && !self.reply.is_empty() && u64::from(written) <= room
            }
        };
        if !ok {
            conn.count(X::ChunkErrors, 1);
            return Err(BadReply::Chunks);
        }
        Ok(())
    }

    /// The first `written` octets of the Reply chunk (its segments are filled
    /// in order, Section 3.4.7).
    pub(super) fn read_reply_chunk(&mut self, written: u32) -> Result<KVVec<u8>> {
        let mut v = KVVec::new();
        v.extend_with(written as usize, 0, GFP_KERNEL)?;
        let mut at = 0usize;
        for k in self.reply.iter_mut() {
            let end = (at + k.len() as usize).min(v.len());
            if at >= end {
                break;
            }
            k.read_at(0, &mut v[at..end])?;
            at = end;
        }
        Ok(v)
    }

    /// Calls `f` with each piece of the first `len` octets of the Reply's
    /// chunk, in order, with its offset.
    #[cfg(CONFIG_RPCRDMA_CM_TEST)]
    pub(super) fn scan_reply(&mut self, len: u32, f: &mut dyn FnMut(usize, &[u8])) -> Result {
        let mut at = 0u32;
        let mut buf = [0u8; 256];
        for k in self.reply.iter_mut() {
            let mut off = 0;
            while off < k.len() && at < len {
                let n = (k.len() - off).min(len - at).min(buf.len() as u32);
                let b = &mut buf[..n as usize];
                k.read_at(off, b)?;
                f(at as usize, b);
                off += n;
                at += n;
            }
        }
        if at < len {
            return Err(EPROTO);
        }
        Ok(())
    }

    /// Every chunk, the Call's then the Reply's.
    fn chunks(&self) -> impl Iterator<Item = &Chunk> {
        Iterator::chain(self.call.iter(), self.reply.iter())
    }

    /// Whether the peer's Send With Invalidate of `rkey` left nothing to
    /// invalidate: no registration, or only the one it named.
    pub(super) fn invalidated_by(&self, rkey: Option<u32>) -> bool {
        self.chunks().all(|c| match c.registration() {
            None => true,
            Some(r) => rkey == Some(r.rkey),
        })
    }

    /// Marks the chunk the peer invalidated with Send With Invalidate of
    /// `rkey`, if it is one of these: it takes no LOCAL_INV. Whether one was.
    pub(super) fn spare(&mut self, rkey: Option<u32>) -> bool {
        let Some(rkey) = rkey else { return false };
        let mut matched = false;
        for c in Iterator::chain(self.call.iter_mut(), self.reply.iter_mut()) {
            if c.registration().map(|r| r.rkey) == Some(rkey) {
                c.remotely_invalidated();
                matched = true;
            }
        }
        matched
    }

    /// Releases every chunk: LOCAL_INV for each registration, but the one
    /// the Reply's Send With Invalidate of `invalidated` invalidated (if
    /// any), counted on `conn`, as what it took.
    pub(super) fn release(self, conn: &Conn, invalidated: Option<u32>) -> ReleaseCounts {
        self.release_each(conn, invalidated, Chunk::release)
    }

    /// Releases every chunk without a LOCAL_INV or any wait (for a caller
    /// in the QP's completion work): a registration the Reply's Send With
    /// Invalidate of `invalidated` did not invalidate, nor a LOCAL_INV, is
    /// deregistered instead, once the QP's teardown drained it. Counted on
    /// `conn`, as what it took.
    pub(super) fn release_no_inv(self, conn: &Conn, invalidated: Option<u32>) -> ReleaseCounts {
        self.release_each(conn, invalidated, Chunk::release_no_inv)
    }

    /// Marks the chunk `invalidated` names (see [`Regs::spare`]), then
    /// releases every chunk with `release`, counting on `conn`.
    fn release_each(
        mut self,
        conn: &Conn,
        invalidated: Option<u32>,
        release: fn(Chunk) -> Released,
    ) -> ReleaseCounts {
        let matched = self.spare(invalidated);
        let mut r = ReleaseCounts::default();
        for c in Iterator::chain(self.call.into_iter(), self.reply) {
            match release(c) {
                Released::LocalInv => r.local_inv += 1,
                Released::Recycled => r.recycled += 1,
                Released::Nothing => {}
            }
        }
        if r.local_inv != 0 {
            conn.count(X::LocalInvalidations, u64::from(r.local_inv));
        }
        if r.recycled != 0 {
            conn.count(X::MrsRecycled, u64::from(r.recycled));
        }
        match (invalidated, matched) {
            (Some(_), true) => conn.count(X::RemoteInvalidations, 1),
            // An rkey that is not one of this call's: the peer invalidated
            // something else.
            (Some(_), false) => conn.count(X::RemoteInvalidationsUnmatched, 1),
            _ => {}
        }
        r
    }

    /// MRs the registrations had to allocate (the rest were recycled).
    pub(super) fn new_mrs(&self) -> u32 {
        let n = self.chunks().filter(|c| c.new_mr());
        u32::try_from(n.count()).unwrap_or(u32::MAX)
    }
}

impl Conn {
    /// Registers `c` for the peer to read, or write with `remote_write`
    /// ([`Chunk::register`]), counting it and the MR it had to allocate.
    pub(super) fn register_chunk(&self, c: &mut Chunk, remote_write: bool) -> Result {
        c.register(remote_write)?;
        self.count(X::Registrations, 1);
        if c.new_mr() {
            self.count(X::MrsAllocated, 1);
        }
        Ok(())
    }
}
