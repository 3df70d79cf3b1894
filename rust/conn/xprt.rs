// SPDX-License-Identifier: GPL-2.0

//! RPC-over-RDMA version 1 messaging on an established connection (RFC 8166),
//! sized by what the connection negotiated (RFC 8797).
//!
//! - Requester (client role): [`Conn::call`] plans each RPC with the protocol
//!   core ([`plan`]) for the negotiated client-to-server and server-to-client
//!   thresholds: the call inline, its DDP-eligible argument in a Read chunk, or
//!   the whole call in a Position-Zero Read chunk (RDMA_NOMSG); room for the
//!   reply inline, a Write chunk for its DDP-eligible result, or a Reply chunk.
//!   Chunk memory is registered with FRWR before the Send that names it. The
//!   call waits for its reply under the server's credit grant; replies are
//!   matched by XID. Afterwards each registration is invalidated with
//!   LOCAL_INV, except the one the reply's Send With Invalidate already
//!   invalidated.
//! - Responder (server role): a call's Read chunks are pulled with RDMA Read
//!   and the RPC message reassembled; it is dispatched to the small built-in
//!   service (NULL of the NFS program; the echo program). The reply's
//!   DDP-eligible result goes to the call's first Write chunk (RDMA Write); the
//!   rest is sent inline when it fits the server-to-client threshold, which
//!   honours the client's advertised receive size, else into the Reply chunk
//!   (RDMA_NOMSG), else RDMA_ERROR / ERR_CHUNK. With remote invalidation
//!   negotiated (both ends set R) the reply is a Send With Invalidate of one
//!   rkey the call offered. Malformed transport headers get RDMA_ERROR (ERR_VERS
//!   or ERR_CHUNK) as RFC 8166 Section 4.5 says.

use core::fmt::{self, Write};
use kernel::alloc::{KVVec, VVec};
use kernel::prelude::*;

use super::{Conn, State, QP_DEPTH, RECV_DEPTH};
use crate::proto::conn_state::{receives_to_add, server_grant, ConnState};
use crate::proto::header::{
    decode, encode_error, encode_msg, Body, Chunks, ErrorBody, HeaderShape, Limits, MsgSpec,
    Segment, RPCRDMA_VERSION,
};
use crate::proto::negotiate::Role;
use crate::proto::nfs4::Summary;
use crate::proto::rpc::echo;
use crate::proto::xdr::xdr_align;
use crate::stats::XprtCounter as X;
use crate::sys::chunk::Chunk;
use crate::sys::qp::Qp;
use crate::sys::rdma_cm::{Completion, WC_FLUSHED};

/// Receives an nfsd connection keeps for backchannel Replies.
const BC_RESERVE: u32 = 2;

/// Most RPC results kept for the `rpcs` file.
pub(crate) const KEEP_RPCS: usize = 64;
/// The largest call message the responder assembles from chunks.
const MAX_CALL: u32 = echo::MAX_PAYLOAD + 4096;
/// Slots for calls in flight: never more than the credits we request.
const SLOTS: usize = QP_DEPTH as usize;

/// How a reply came back.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum ReplyKind {
    /// Whole in the Send.
    Inline,
    /// The DDP-eligible result in our Write chunk (`written` octets).
    WriteList { written: u32 },
    /// RDMA_NOMSG: the whole reply in our Reply chunk (`written` octets).
    ReplyChunk { written: u32 },
}

impl ReplyKind {
    pub(super) fn name(&self) -> &'static str {
        match self {
            ReplyKind::Inline => "inline",
            ReplyKind::WriteList { .. } => "write_list",
            ReplyKind::ReplyChunk { .. } => "reply_chunk",
        }
    }
}

/// What a call learnt from its reply's Receive.
pub(super) struct Done {
    /// The RPC part of the Send (empty for RDMA_NOMSG).
    pub(super) rpc: KVec<u8>,
    /// The RPC reply's length, chunks included.
    pub(super) reply_len: u32,
    pub(super) kind: ReplyKind,
}

/// A call waiting for its reply.
pub(super) struct Pending {
    pub(super) xid: u32,
    pub(super) result: Option<core::result::Result<Done, i32>>,
    /// The rkey its reply's Send With Invalidate invalidated, whatever the
    /// reply said (an RDMA_ERROR may come that way too).
    pub(super) invalidated: Option<u32>,
    /// Its caller gave up (timeout, signal) after it was sent: the server may
    /// still hold it, so its slot and credit stay taken until its reply
    /// comes or the connection ends (RFC 8166 Section 3.3.1).
    pub(super) abandoned: bool,
}

/// Per-connection messaging state, under the connection's mutex.
pub(super) struct XprtState {
    /// Client: credits the server granted (RFC 8166 Section 3.3.1), 1 until the
    /// first reply. Server: the last grant we sent.
    pub(super) credits: u32,
    pub(super) outstanding: u32,
    pub(super) next_xid: u32,
    pub(super) pending: [Option<Pending>; SLOTS],
}

impl XprtState {
    pub(super) fn new(first_xid: u32) -> Self {
        XprtState {
            credits: 1,
            outstanding: 0,
            next_xid: first_xid,
            pending: [const { None }; SLOTS],
        }
    }

    /// Fails every call in flight with `errno` (the connection is gone), and
    /// frees the slots of abandoned ones: no reply can come any more.
    pub(super) fn fail_all(&mut self, errno: i32) {
        for p in self.pending.iter_mut() {
            match p {
                Some(q) if q.abandoned => {
                    *p = None;
                    self.outstanding -= 1;
                }
                Some(q) if q.result.is_none() => q.result = Some(Err(errno)),
                _ => {}
            }
        }
    }

    pub(super) fn slot(&mut self, xid: u32) -> Option<&mut Pending> {
        self.pending.iter_mut().flatten().find(|p| p.xid == xid)
    }

    /// Frees the slot of call `xid` and its credit; returns what it held.
    pub(super) fn release(&mut self, xid: u32) -> Option<Pending> {
        let p = self
            .pending
            .iter_mut()
            .find(|p| p.as_ref().is_some_and(|p| p.xid == xid))?
            .take();
        self.outstanding -= 1;
        p
    }
}

/// One finished (or failed) call, as the `rpcs` file shows it.
#[derive(Clone, Copy)]
pub(crate) struct RpcRecord {
    conn: u32,
    pub(super) xid: u32,
    prog: u32,
    vers: u32,
    proc_: u32,
    pub(super) call: &'static str,
    pub(super) reply: &'static str,
    pub(super) call_len: u32,
    pub(super) reply_len: u32,
    pub(super) result: &'static str,
    pub(super) errno: i32,
    pub(super) verified: Option<bool>,
    pub(super) nfs: Option<Summary>,
    pub(super) data_fnv: Option<u64>,
    pub(super) usec: i64,
}

impl RpcRecord {
    pub(super) fn new(conn: u32, prog: u32, vers: u32, proc_: u32) -> Self {
        RpcRecord {
            conn,
            xid: 0,
            prog,
            vers,
            proc_,
            call: "-",
            reply: "-",
            call_len: 0,
            reply_len: 0,
            result: "error",
            errno: 0,
            verified: None,
            nfs: None,
            data_fnv: None,
            usec: 0,
        }
    }

    pub(crate) fn show(&self, m: &mut impl Write) -> fmt::Result {
        write!(
            m,
            "conn={} xid={:#010x} prog={} vers={} proc={} call={} reply={} call_len={} reply_len={} result={}",
            self.conn,
            self.xid,
            self.prog,
            self.vers,
            self.proc_,
            self.call,
            self.reply,
            self.call_len,
            self.reply_len,
            self.result
        )?;
        if self.errno != 0 {
            write!(m, " error={}", self.errno)?;
        }
        if let Some(v) = self.verified {
            write!(m, " verified={}", u8::from(v))?;
        }
        if let Some(n) = &self.nfs {
            show_nfs(m, n, self.data_fnv)?;
        }
        writeln!(m, " usec={}", self.usec)
    }
}

/// What `rpcs` shows of an NFS COMPOUND.
fn show_nfs(
    m: &mut impl core::fmt::Write,
    s: &Summary,
    data_fnv: Option<u64>,
) -> core::fmt::Result {
    write!(m, " nfs_status={} nfs_results={}", s.status, s.results)?;
    if let Some(op) = s.failed_op {
        write!(m, " nfs_failed_op={}", op)?;
    }
    if let Some((kind, size)) = s.attrs {
        write!(m, " type={} size={}", kind, size)?;
    }
    if let Some((eof, len, _)) = s.read {
        write!(m, " eof={} data_len={}", u8::from(eof), len)?;
    }
    if let Some(h) = data_fnv {
        write!(m, " data_fnv={:016x}", h)?;
    }
    if let Some((count, committed)) = s.write {
        write!(m, " written={} committed={}", count, committed)?;
    }
    if let Some((entries, sum, eof)) = s.readdir {
        write!(
            m,
            " entries={} names_fnv_sum={:016x} eof={}",
            entries,
            sum,
            u8::from(eof)
        )?;
    }
    Ok(())
}

/// The last [`KEEP_RPCS`] calls, oldest first once full.
///
/// The ring is on the heap: [`KEEP_RPCS`] records are about 13 KiB, which
/// the module's init built on its stack (a 13 KiB frame on 6.12's test
/// kernel, optimised for size; 26 KiB on 7.3's, a double fault at load).
pub(crate) struct RpcLog {
    ring: KVec<Option<RpcRecord>>,
    next: usize,
}

impl RpcLog {
    pub(crate) fn new() -> Result<Self> {
        let mut ring = KVec::with_capacity(KEEP_RPCS, GFP_KERNEL)?;
        for _ in 0..KEEP_RPCS {
            ring.push(None, GFP_KERNEL)?;
        }
        Ok(RpcLog { ring, next: 0 })
    }

    pub(super) fn push(&mut self, r: RpcRecord) {
        self.ring[self.next % KEEP_RPCS] = Some(r);
        self.next = self.next.wrapping_add(1);
    }

    /// How the newest call went (`call`, `reply`), `("-", "-")` if none.
    pub(super) fn last_path(&self) -> (&'static str, &'static str) {
        let i = self.next.wrapping_sub(1) % KEEP_RPCS;
        match (self.next, &self.ring[i]) {
            (1.., Some(r)) => (r.call, r.reply),
            _ => ("-", "-"),
        }
    }

    /// The records, oldest first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &RpcRecord> {
        let start = if self.next > KEEP_RPCS {
            self.next % KEEP_RPCS
        } else {
            0
        };
        (0..KEEP_RPCS).filter_map(move |i| self.ring[(start + i) % KEEP_RPCS].as_ref())
    }
}

pub(super) fn n32(v: usize) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

pub(super) fn short(_: crate::proto::xdr::Short) -> Error {
    EMSGSIZE
}

impl Conn {
    /// Counts `n` on this connection and module-wide.
    pub(super) fn count(&self, c: X, n: u64) {
        self.xs.add(c, n);
        self.state.stats.xprt.add(c, n);
    }

    /// Raises the high-water mark `c` to `v`, on this connection and
    /// module-wide.
    pub(super) fn raise(&self, c: X, v: u64) {
        self.xs.raise(c, v);
        self.state.stats.xprt.raise(c, v);
    }

    /// A Receive completed on this connection's QP.
    pub(super) fn on_recv(&self, qp: &Qp, wc: &Completion<'_>) {
        if wc.status != 0 {
            self.failed_completion(qp, wc.status, X::RecvErrors);
            return;
        }
        self.touch();
        self.count(X::BytesRecv, wc.data.len() as u64);
        match self.role {
            Role::Client => {
                let owner = self.inner.lock().owner.clone();
                match owner {
                    Some(o) => o.received(self, qp, wc.data, wc.invalidated),
                    None => self.reply_received(wc.data, wc.invalidated),
                }
            }
            Role::Server if self.nfsd => self.svc_received(qp, wc),
            Role::Server => self.builtin_call_received(qp, wc.data),
        }
    }

    /// A Send completed: one that asked for a completion (one in
    /// `RPCRDMA_CM_SEND_BATCH`, see `qp.c`), or one that failed.
    pub(super) fn on_send_done(&self, qp: &Qp, wc: &Completion<'_>) {
        self.count(X::SendCompletions, 1);
        if wc.status != 0 {
            self.failed_completion(qp, wc.status, X::SendErrors);
        }
    }

    /// A work request completed in error. A flush while the connection is
    /// still established means the QP went to the error state for a reason
    /// we did not see (a registration or invalidation that failed, an
    /// asynchronous QP error): as fatal as the error itself. Flushes after
    /// that, or at teardown, are expected.
    pub(super) fn failed_completion(&self, qp: &Qp, status: i32, counter: X) {
        let why = match counter {
            X::RecvErrors => "recv_error",
            X::SendErrors => "send_error",
            _ => "chunk_error",
        };
        if status != WC_FLUSHED {
            self.count(counter, 1);
            crate::sys::trace::wc_error(self.id, matches!(counter, X::RecvErrors), status);
            self.fatal(qp, why, status);
        } else if self.inner.lock().state.is_established() {
            self.fatal(qp, "flushed", status);
        }
    }

    /// A work request failed: the QP is in the error state and the connection
    /// is of no further use. Fail the calls in flight and refuse new ones now
    /// (state `disconnecting`), then disconnect (as xprtrdma and svcrdma do);
    /// the DISCONNECTED event closes the connection when the peer answers or
    /// the CM gives up.
    pub(super) fn fatal(&self, qp: &Qp, why: &str, status: i32) {
        {
            let mut g = self.inner.lock();
            if g.state.is_closed() || g.state == ConnState::Disconnecting {
                return;
            }
            crate::sys::trace::fatal(self.id, why, status);
            g.state.advance(ConnState::Disconnecting);
            g.x.fail_all(ENOTCONN.to_errno());
        }
        // The tick closes a connection whose disconnect never completes.
        self.touch();
        self.cv.notify_all();
        let _ = qp.disconnect();
    }

    /// The credits the server grants now (see `conn_state`): first, if the
    /// client uses every credit it has, more Receive buffers are posted, so
    /// that the grant grows with the client's need and an idle or slow client
    /// costs only its initial buffers.
    fn grant(&self, qp: &Qp) -> u32 {
        // nfsd's connections keep room for the Replies to backchannel Calls
        // (two at a time), which the client sends unasked for: counted as
        // in use, so that a client using every credit it was granted makes
        // the Receives grow.
        let reserve = if self.nfsd { BC_RESERVE } else { 0 };
        let r = qp.recv_buffers();
        // Calls received and not yet answered (this one included): those
        // being handled, whose Receives are not posted again yet, and those
        // whose buffers nfsd keeps (some answered already: counted too, as
        // the client may use their credits again).
        let in_use = r
            .posting
            .saturating_sub(r.posted)
            .saturating_add(r.kept)
            .saturating_add(reserve);
        let add = receives_to_add(in_use, r.posting, RECV_DEPTH);
        if add > 0 {
            if let Ok(n) = qp.grow_recv(add) {
                self.count(X::ReceivesAdded, u64::from(n));
            }
        }
        let grant = server_grant(qp.recv_buffers().posting)
            .saturating_sub(reserve)
            .max(1);
        self.inner.lock().x.credits = grant;
        grant
    }

    /// Decodes a call's transport header: counts it, grants credits (growing
    /// the Receives first when needed) and answers what cannot be served
    /// (RFC 8166 Section 4.5). `None` when nothing is left to do.
    pub(super) fn decode_call<'a>(&self, qp: &Qp, data: &'a [u8]) -> Option<Incoming<'a>> {
        let (s2c, reminv) = {
            let g = self.inner.lock();
            let n = g.negotiated.as_ref()?;
            (n.s2c, n.remote_invalidation)
        };
        self.count(X::CallsReceived, 1);
        let grant = self.grant(qp);
        let h = match decode(data, &Limits::DEFAULT) {
            Ok(h) => h,
            Err((xid, e)) => {
                self.count(X::HeaderErrors, 1);
                let (Some(code), Some(xid)) = (e.reply_code(), xid) else {
                    return None;
                };
                let body = if code == crate::proto::header::ERR_VERS {
                    ErrorBody::Vers {
                        low: RPCRDMA_VERSION,
                        high: RPCRDMA_VERSION,
                    }
                } else {
                    ErrorBody::Chunk
                };
                self.send_error(qp, xid, grant, body);
                return None;
            }
        };
        // Never more than the client asks for (RFC 8166 Section 3.3.1).
        let credits = grant.min(h.credits.max(1));
        let (chunks, nomsg) = match h.body {
            Body::Msg(c) => (c, false),
            Body::NoMsg(c) => (c, true),
            Body::Error(_) => {
                self.count(X::RdmaErrorReceived, 1);
                return None;
            }
        };
        Some(Incoming {
            call: CallIn {
                xid: h.xid,
                credits,
                chunks,
                inline: if nomsg { &[] } else { &data[h.len..] },
            },
            nomsg,
            s2c,
            reminv,
        })
    }

    /// A call could not be served: `e` says why.
    pub(super) fn call_failed(&self, qp: &Qp, xid: u32, credits: u32, e: Error) {
        if e == ENOTCONN {
        } else if e == EBUSY {
            self.send_failed(qp, e);
        } else if e == EIO {
            // An RDMA Read or Write failed (a bad rkey, say): the QP is in
            // error, nothing can be answered.
            self.count(X::ChunkErrors, 1);
            self.fatal(qp, "chunk_error", EIO.to_errno());
        } else {
            // A chunk we could not pull or fill, or a reply that fits nowhere
            // the requester offered (RFC 8166 Section 4.5).
            self.count(X::ChunkErrors, 1);
            self.send_error(qp, xid, credits, ErrorBody::Chunk);
        }
    }

    /// Pulls the call's Read chunks (RDMA Read) into the whole RPC message.
    pub(super) fn assemble_call(&self, qp: &Qp, call: &CallIn<'_>) -> Result<VVec<u8>> {
        let pulled = call
            .chunks
            .read_list()
            .map(|r| u64::from(r.segment.length))
            .fold(0u64, u64::saturating_add);
        let total = pulled.saturating_add(call.inline.len() as u64);
        if total > u64::from(MAX_CALL) {
            return Err(EMSGSIZE);
        }
        let mut msg = VVec::with_capacity(total as usize + 4, GFP_KERNEL)?;
        let mut cursor = 0usize;
        let mut current: Option<u32> = None;
        for rs in call.chunks.read_list() {
            if current != Some(rs.position) {
                // A new chunk: round the previous one up to XDR alignment, then
                // copy the inline part that precedes this one's position.
                pad4(&mut msg)?;
                let need = (rs.position as usize)
                    .checked_sub(msg.len())
                    .ok_or(EINVAL)?;
                let part = call.inline.get(cursor..cursor + need).ok_or(EINVAL)?;
                msg.extend_from_slice(part, GFP_KERNEL)?;
                cursor += need;
                current = Some(rs.position);
            }
            let len = rs.segment.length;
            if len == 0 {
                continue;
            }
            let mut c = Chunk::new(qp, len)?;
            let wrs = c.rdma_read(rs.segment.handle, rs.segment.offset)?;
            self.count(X::RdmaReads, 1);
            self.count(X::RdmaRwWrs, u64::from(wrs));
            self.count(X::BytesRdmaRead, u64::from(len));
            let start = msg.len();
            msg.extend_with(len as usize, 0, GFP_KERNEL)?;
            c.read_at(0, &mut msg[start..])?;
        }
        if current.is_some() {
            pad4(&mut msg)?;
        }
        msg.extend_from_slice(&call.inline[cursor..], GFP_KERNEL)?;
        Ok(msg)
    }

    /// Pushes `data` into the segments of one chunk (RDMA Write, through a
    /// chunk of our own memory per segment); returns the segments with the
    /// lengths written, as the reply echoes them.
    pub(super) fn push(&self, qp: &Qp, segs: &[Segment], data: &[u8]) -> Result<KVec<Segment>> {
        let len = u32::try_from(data.len()).map_err(|_| EMSGSIZE)?;
        self.write_segments(segs, len, |at, k, s| {
            let (at, n) = (at as usize, k as usize);
            let mut c = Chunk::new(qp, k)?;
            c.write_at(0, &data[at..at + n])?;
            c.rdma_write(s.handle, s.offset)
        })
    }

    /// Fills the segments of one Write or Reply chunk in order with `len`
    /// octets, `write(at, k, segment)` moving octets `at..at + k` of the
    /// source into a segment by RDMA Write (returning the WRs it took);
    /// returns the segments with the lengths written (RFC 8166 Section 3.6:
    /// what the reply echoes). `EMSGSIZE` if the chunk is too small.
    pub(super) fn write_segments(
        &self,
        segs: &[Segment],
        len: u32,
        mut write: impl FnMut(u32, u32, &Segment) -> Result<u32>,
    ) -> Result<KVec<Segment>> {
        let room = segs
            .iter()
            .map(|s| u64::from(s.length))
            .fold(0u64, u64::saturating_add);
        if u64::from(len) > room {
            return Err(EMSGSIZE);
        }
        let mut out = KVec::with_capacity(segs.len(), GFP_KERNEL)?;
        let mut at = 0u32;
        for s in segs {
            let k = (len - at).min(s.length);
            if k > 0 {
                let wrs = write(at, k, s)?;
                self.count(X::RdmaWrites, 1);
                self.count(X::RdmaRwWrs, u64::from(wrs));
                self.count(X::BytesRdmaWrite, u64::from(k));
            }
            out.push(Segment { length: k, ..*s }, GFP_KERNEL)?;
            at += k;
        }
        Ok(out)
    }

    /// Sends `reply` (a whole RPC reply message) the way the call's chunks
    /// allow: its DDP-eligible result (`ddp`: offset and length in `reply`)
    /// into the call's first Write chunk (the others are echoed unused,
    /// length 0); the rest inline when the header and it fit `s2c`, else into
    /// the Reply chunk (RDMA_NOMSG), else `EMSGSIZE` (the caller answers
    /// RDMA_ERROR / ERR_CHUNK).
    pub(super) fn send_reply(
        &self,
        qp: &Qp,
        route: &ReplyRoute,
        reply: &[u8],
        ddp: Option<(usize, u32)>,
        s2c: u32,
        reminv: bool,
    ) -> Result {
        let mut written: KVec<KVec<Segment>> = KVec::new();
        let mut rest = KVVec::new();
        let mut used_write = false;
        for (i, w) in route.wchunks.iter().enumerate() {
            let data: &[u8] = match ddp {
                Some((off, len)) if i == 0 => reply.get(off..off + len as usize).ok_or(EINVAL)?,
                _ => &[],
            };
            used_write |= !data.is_empty();
            written.push(self.push(qp, w, data)?, GFP_KERNEL)?;
        }
        match ddp {
            Some((off, len)) if used_write => {
                let end = off + xdr_align(len as usize).ok_or(EINVAL)?;
                rest.extend_from_slice(&reply[..off], GFP_KERNEL)?;
                rest.extend_from_slice(&reply[end.min(reply.len())..], GFP_KERNEL)?;
            }
            _ => rest.extend_from_slice(reply, GFP_KERNEL)?,
        }
        self.send_reply_rest(qp, route, &written, &rest, used_write, s2c, reminv)
    }

    /// Sends a reply whose DDP-eligible result, if any, is already in the
    /// call's Write list (`written`: each Write chunk's segments with the
    /// lengths written; `used_write`: some data went there). `rest`, the
    /// RPC reply without that result, goes inline when the header and it
    /// fit `s2c`, else into the Reply chunk (RDMA_NOMSG), else `EMSGSIZE`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn send_reply_rest(
        &self,
        qp: &Qp,
        route: &ReplyRoute,
        written: &[KVec<Segment>],
        rest: &[u8],
        used_write: bool,
        s2c: u32,
        reminv: bool,
    ) -> Result {
        let mut wrefs: KVec<&[Segment]> = KVec::new();
        for w in written.iter() {
            wrefs.push(&w[..], GFP_KERNEL)?;
        }
        let shape = HeaderShape {
            read_segments: 0,
            write_chunks: n32(written.len()),
            write_segments: n32(written.iter().map(|w| w.len()).sum()),
            reply_segments: None,
        };
        let inline = shape.len().saturating_add(rest.len()) <= s2c as usize;
        let rwritten = if inline {
            None
        } else if let Some(rchunk) = &route.rchunk {
            Some(self.push(qp, rchunk, rest)?)
        } else {
            self.count(X::RepliesTooLarge, 1);
            return Err(EMSGSIZE);
        };

        // Send With Invalidate only when both ends set R (RFC 8797 Section 4.1;
        // we set it only on a device that supports it, Section 3.2), and only
        // of an rkey this call offered: its Write chunk's, else its
        // Reply chunk's, else its Read chunk's (all FRWR-registered by a
        // requester that set R).
        let inv = if reminv {
            route
                .wchunks
                .first()
                .and_then(|w| w.first())
                .or(route.rchunk.as_ref().and_then(|r| r.first()))
                .map(|s| s.handle)
                .or(route.read_handle)
        } else {
            None
        };
        let spec = MsgSpec {
            xid: route.xid,
            credits: route.credits,
            nomsg: rwritten.is_some(),
            reads: &[],
            writes: &wrefs,
            reply: rwritten.as_deref(),
        };
        let mut sent = 0;
        qp.send(inv, |buf| {
            let limit = buf.len().min(s2c as usize);
            let buf = &mut buf[..limit];
            let hl = encode_msg(buf, &spec).map_err(short)?;
            let body: &[u8] = if rwritten.is_some() { &[] } else { rest };
            buf.get_mut(hl..hl + body.len())
                .ok_or(EMSGSIZE)?
                .copy_from_slice(body);
            sent = hl + body.len();
            Ok(sent)
        })?;
        self.touch();
        self.count(X::RepliesSent, 1);
        self.count(
            if rwritten.is_some() {
                X::RepliesSentReplyChunk
            } else if used_write {
                X::RepliesSentWriteList
            } else {
                X::RepliesSentInline
            },
            1,
        );
        if inv.is_some() {
            self.count(X::SendWithInvalidate, 1);
        }
        Ok(())
    }

    /// A reply could not be sent: its call is lost to the client, whose
    /// credit would stay taken, so the connection ends (as svcrdma does).
    /// `EBUSY` (every Send buffer in flight) cannot happen while the client
    /// keeps to its credits: the Send buffers are twice the largest grant,
    /// plus those waiting unsignaled for the next signaled Send.
    pub(super) fn send_failed(&self, qp: &Qp, e: Error) {
        if e == ENOTCONN {
            return;
        }
        let why = if e == EBUSY {
            self.count(X::SendBusy, 1);
            "send_busy"
        } else {
            self.count(X::SendErrors, 1);
            "send_error"
        };
        self.fatal(qp, why, e.to_errno());
    }

    pub(super) fn send_error(&self, qp: &Qp, xid: u32, credits: u32, body: ErrorBody) {
        let code = match body {
            ErrorBody::Vers { .. } => crate::proto::header::ERR_VERS,
            _ => crate::proto::header::ERR_CHUNK,
        };
        match qp.send(None, |buf| {
            encode_error(buf, xid, credits, body).map_err(short)
        }) {
            Ok(()) => {
                self.count(X::RdmaErrorSent, 1);
                crate::sys::trace::rdma_error(self.id, xid, code);
            }
            Err(e) => self.send_failed(qp, e),
        }
    }
}

/// Pads `v` with zeros to a multiple of 4 (XDR roundup).
fn pad4(v: &mut VVec<u8>) -> Result {
    let pad = (4 - v.len() % 4) % 4;
    v.extend_from_slice(&[0u8; 3][..pad], GFP_KERNEL)?;
    Ok(())
}

/// Where a call's reply may go: its XID, the credits granted, and owned
/// copies of the chunks it offered (they outlive the received message when
/// nfsd answers later).
pub(super) struct ReplyRoute {
    pub(super) xid: u32,
    pub(super) credits: u32,
    pub(super) wchunks: KVec<KVec<Segment>>,
    pub(super) rchunk: Option<KVec<Segment>>,
    /// The first Read segment's handle, for Send With Invalidate.
    pub(super) read_handle: Option<u32>,
}

impl ReplyRoute {
    pub(super) fn of(xid: u32, credits: u32, chunks: &Chunks<'_>) -> Result<ReplyRoute> {
        let mut wchunks: KVec<KVec<Segment>> = KVec::new();
        for segs in chunks.write_list() {
            let mut v = KVec::new();
            for seg in segs {
                v.push(seg, GFP_KERNEL)?;
            }
            wchunks.push(v, GFP_KERNEL)?;
        }
        let rchunk = match chunks.reply_chunk() {
            Some(segs) => {
                let mut v = KVec::new();
                for seg in segs {
                    v.push(seg, GFP_KERNEL)?;
                }
                Some(v)
            }
            None => None,
        };
        Ok(ReplyRoute {
            xid,
            credits,
            wchunks,
            rchunk,
            read_handle: chunks.read_list().next().map(|r| r.segment.handle),
        })
    }
}

/// A decoded call, with the connection's thresholds.
pub(super) struct Incoming<'a> {
    pub(super) call: CallIn<'a>,
    /// RDMA_NOMSG: the whole call is in a Position-Zero Read chunk.
    pub(super) nomsg: bool,
    pub(super) s2c: u32,
    pub(super) reminv: bool,
}

/// A received call and its chunk lists.
pub(super) struct CallIn<'a> {
    pub(super) xid: u32,
    pub(super) credits: u32,
    pub(super) chunks: Chunks<'a>,
    /// The RPC message part in the Send (empty for RDMA_NOMSG).
    pub(super) inline: &'a [u8],
}

/// `rpcs`: the last calls issued through `control`, oldest first.
pub(crate) struct RpcsFile(pub(crate) kernel::sync::Arc<State>);

impl crate::sys::debugfs::Show for RpcsFile {
    fn show(&self, m: &mut crate::sys::debugfs::SeqFile<'_>) -> fmt::Result {
        let log = self.0.rpcs.lock();
        let res = log.iter().try_for_each(|r| r.show(m));
        res
    }
}

/// `xprt`: each connection's messaging counters (non-zero ones).
pub(crate) struct XprtFile(pub(crate) kernel::sync::Arc<State>);

impl crate::sys::debugfs::Show for XprtFile {
    fn show(&self, m: &mut crate::sys::debugfs::SeqFile<'_>) -> fmt::Result {
        let snapshot = self.0.snapshot().map_err(|_| fmt::Error)?;
        for c in snapshot.iter() {
            let (credits, qp) = {
                let g = c.inner.lock();
                (g.x.credits, g.cm.get().and_then(|cm| cm.qp()))
            };
            write!(m, "id={} role={} credits={}", c.id, c.role.name(), credits)?;
            if let Some(qp) = qp {
                let (recv, short) = qp.recv_allocated();
                write!(
                    m,
                    " recv_bufs={} recv_posting={} send_bufs={}",
                    recv,
                    qp.recv_buffers().posting,
                    qp.send_buffers()
                )?;
                if short > 0 {
                    write!(m, " recv_short={}", short)?;
                }
            }
            c.xs.show_nonzero(m)?;
            writeln!(m)?;
        }
        Ok(())
    }
}
