// SPDX-License-Identifier: GPL-2.0

//! The responder's side of a connection, whoever answers (nfsd, or the
//! built-in echo service): the credits granted, a call's transport header
//! decoded and checked (RFC 8166 Section 4.5), a long call assembled from its
//! Read chunks, and the reply sent inline, in Write chunks or in a Reply
//! chunk, or an RDMA_ERROR.

use super::xprt::{n32, short};
use super::{Conn, RECV_DEPTH};
use crate::proto::conn_state::{receives_to_add, server_grant};
use crate::proto::header::{
    encode_error, encode_msg, Body, Chunks, DecodeError, ErrorBody, Header, HeaderShape, MsgSpec,
    Segment, RPCRDMA_VERSION,
};
#[cfg(CONFIG_RPCRDMA_CM_TEST)]
use crate::proto::rpc::echo;
use crate::proto::xdr::xdr_align;
use crate::stats::XprtCounter as X;
use crate::sys::chunk::Chunk;
use crate::sys::qp::{HeldWrite, Qp};
use kernel::alloc::KVVec;
#[cfg(CONFIG_RPCRDMA_CM_TEST)]
use kernel::alloc::VVec;
use kernel::prelude::*;

/// The largest call message the echo service assembles from chunks.
#[cfg(CONFIG_RPCRDMA_CM_TEST)]
const MAX_CALL: u32 = echo::MAX_PAYLOAD + 4096;

impl Conn {
    /// The credits the server grants now (see `conn_state`): first, if the
    /// client uses every credit it has, more Receive buffers are posted, so
    /// that the grant grows with the client's need and an idle or slow client
    /// costs only its initial buffers.
    fn grant(&self, qp: &Qp) -> u32 {
        // What the upper keeps back (nfsd: room for the Replies to its
        // backchannel Calls, which the client sends unasked for) counts as in
        // use, so that a client using every credit it was granted makes the
        // Receives grow.
        let reserve = self.upper.credit_reserve();
        let r = qp.recv_buffers();
        // Calls received and not yet answered (this one included): those
        // being handled (the built-in service answers in the completion's
        // callback) and those whose buffers nfsd keeps (some answered
        // already: counted too, as the client may use their credits again).
        let in_use = r.handling.saturating_add(r.kept).saturating_add(reserve);
        let add = receives_to_add(in_use, r.posting, RECV_DEPTH);
        if add > 0 {
            if let Ok(n) = qp.grow_recv(add) {
                self.count(X::ReceivesAdded, u64::from(n));
            }
        }
        let grant = server_grant(qp.recv_buffers().posting)
            .saturating_sub(reserve)
            .max(1);
        self.set_credits(grant);
        grant
    }

    /// Takes a call whose transport header was decoded (`decoded`: what
    /// `decode` made of `data`): counts it, grants credits (growing the
    /// Receives first when needed) and answers what cannot be served (RFC
    /// 8166 Section 4.5). `None` when nothing is left to do.
    pub(super) fn check_call<'a>(
        &self,
        qp: &Qp,
        data: &'a [u8],
        decoded: core::result::Result<Header<'a>, (Option<u32>, DecodeError)>,
    ) -> Option<Incoming<'a>> {
        let (s2c, reminv) = {
            let g = self.inner.lock();
            let n = g.negotiated.as_ref()?;
            (n.s2c, n.remote_invalidation)
        };
        self.count(X::CallsReceived, 1);
        let grant = self.grant(qp);
        let h = match decoded {
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
                // `h` is `data`'s header: never past its end.
                inline: if nomsg {
                    &[]
                } else {
                    data.get(h.len..).unwrap_or(&[])
                },
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
        } else if e == ENOMEM {
            // RDMA_ERROR would fail the call for good (xprtrdma: -EIO to the
            // application).
            self.drop_for_memory(qp);
        } else {
            // A chunk we could not pull or fill, or a reply that fits nowhere
            // the requester offered (RFC 8166 Section 4.5).
            self.count(X::ChunkErrors, 1);
            self.send_error(qp, xid, credits, ErrorBody::Chunk);
        }
    }

    /// Pulls the call's Read chunks (RDMA Read) into the whole RPC message.
    #[cfg(CONFIG_RPCRDMA_CM_TEST)]
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
        let mut copy = KVVec::new();
        let mut used_write = false;
        for (i, w) in route.wchunks.iter().enumerate() {
            let data: &[u8] = match ddp {
                Some((off, len)) if i == 0 => reply.get(off..off + len as usize).ok_or(EINVAL)?,
                _ => &[],
            };
            used_write |= !data.is_empty();
            written.push(self.push(qp, w, data)?, GFP_KERNEL)?;
        }
        // The rest: the reply itself, or, with its result written, what
        // precedes the result and what follows its XDR padding.
        let rest: &[u8] = match ddp {
            Some((off, len)) if used_write => {
                let end = off + xdr_align(len as usize).ok_or(EINVAL)?;
                copy.extend_from_slice(&reply[..off], GFP_KERNEL)?;
                copy.extend_from_slice(&reply[end.min(reply.len())..], GFP_KERNEL)?;
                &copy
            }
            _ => reply,
        };
        self.send_reply_rest(
            qp,
            route,
            &written,
            used_write,
            s2c,
            reminv,
            Rest::Copied(rest),
            None,
        )
    }

    /// Sends a reply whose DDP-eligible result, if any, is already in the
    /// call's Write list (`written`: each Write chunk's segments with the
    /// lengths written; `used_write`: some data went there). `rest`, the
    /// RPC reply without that result, goes inline when the header and it
    /// fit `s2c`, else into the Reply chunk (RDMA_NOMSG), else `EMSGSIZE`.
    /// `held`, the last RDMA Write of the result, not posted yet, goes in
    /// front of the Send in the same post (or alone before the Reply chunk's
    /// Writes); it is dropped unposted if the reply fails first.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn send_reply_rest(
        &self,
        qp: &Qp,
        route: &ReplyRoute,
        written: &[KVec<Segment>],
        used_write: bool,
        s2c: u32,
        reminv: bool,
        rest: Rest<'_>,
        held: Option<HeldWrite>,
    ) -> Result {
        let rest_len = rest.len();
        // The header's Write list: most replies have one chunk at most.
        let one: [&[Segment]; 1];
        let mut many: KVec<&[Segment]> = KVec::new();
        let wrefs: &[&[Segment]] = match written {
            [] => &[],
            [w] => {
                one = [&w[..]];
                &one
            }
            _ => {
                for w in written.iter() {
                    many.push(&w[..], GFP_KERNEL)?;
                }
                &many
            }
        };
        let shape = HeaderShape {
            read_segments: 0,
            write_chunks: n32(written.len()),
            write_segments: n32(written.iter().map(|w| w.len()).sum()),
            reply_segments: None,
        };
        let inv = reply_inv(route, reminv);
        let spec = MsgSpec {
            xid: route.xid,
            credits: route.credits,
            nomsg: false,
            reads: &[],
            writes: wrefs,
            reply: None,
        };
        if shape.len().saturating_add(rest_len) <= s2c as usize {
            let kind = if used_write {
                X::RepliesSentWriteList
            } else {
                X::RepliesSentInline
            };
            let fill = |out: &mut [u8]| rest.write(out);
            return self.post_reply(qp, &spec, inv, s2c, kind, rest_len, held, fill);
        }
        let Some(rchunk) = &route.rchunk else {
            self.count(X::RepliesTooLarge, 1);
            return Err(EMSGSIZE);
        };
        // Posted before the Reply chunk's Writes are prepared: what it holds
        // of the Send Queue and the MR pool would be waited for.
        if let Some(w) = held {
            w.post()?;
        }
        let mut held = None;
        let rwritten = match rest {
            Rest::Copied(r) => self.push(qp, rchunk, r)?,
            Rest::Written(len, write) => {
                let mut copy: KVVec<u8> = KVVec::new();
                copy.extend_with(len, 0, GFP_KERNEL)?;
                write(&mut copy)?;
                self.count(X::SvcReplyChunksCopied, 1);
                self.push(qp, rchunk, &copy)?
            }
            Rest::Direct { len, write, .. } => {
                let len = u32::try_from(len).map_err(|_| EMSGSIZE)?;
                let w = self.write_segments(rchunk, len, |at, k, s| write(at, k, s, &mut held))?;
                self.count(X::SvcReplyChunksDirect, 1);
                w
            }
        };
        let spec = MsgSpec {
            nomsg: true,
            reply: Some(&rwritten[..]),
            ..spec
        };
        let kind = X::RepliesSentReplyChunk;
        self.post_reply(qp, &spec, inv, s2c, kind, 0, held, |_| Ok(()))
    }

    /// Posts a reply: the header `spec`, then `len` octets of RPC message
    /// that `fill` writes, within `s2c`, as Send With Invalidate of `inv` if
    /// given; counts it as `kind`. `held`, a prepared RDMA Write of the
    /// reply's result or of its Reply chunk, is posted in front of the Send
    /// in the same post (a result's counted `nfsd_writes_with_send`), or
    /// dropped unposted if the Send cannot be.
    #[allow(clippy::too_many_arguments)]
    fn post_reply(
        &self,
        qp: &Qp,
        spec: &MsgSpec<'_>,
        inv: Option<u32>,
        s2c: u32,
        kind: X,
        len: usize,
        held: Option<HeldWrite>,
        fill: impl FnOnce(&mut [u8]) -> Result,
    ) -> Result {
        let linked = held.is_some();
        qp.send_after(inv, held, |buf| {
            let limit = buf.len().min(s2c as usize);
            let buf = &mut buf[..limit];
            let hl = encode_msg(buf, spec).map_err(short)?;
            let end = hl.checked_add(len).ok_or(EMSGSIZE)?;
            fill(buf.get_mut(hl..end).ok_or(EMSGSIZE)?)?;
            Ok(end)
        })?;
        self.touch();
        self.count(X::RepliesSent, 1);
        self.count(kind, 1);
        if inv.is_some() {
            self.count(X::SendWithInvalidate, 1);
        }
        if linked && matches!(kind, X::RepliesSentWriteList) {
            self.count(X::SvcWritesWithSend, 1);
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
#[cfg(CONFIG_RPCRDMA_CM_TEST)]
fn pad4(v: &mut VVec<u8>) -> Result {
    let pad = (4 - v.len() % 4) % 4;
    v.extend_from_slice(&[0u8; 3][..pad], GFP_KERNEL)?;
    Ok(())
}

/// The part of a reply that is not in a Write chunk
/// ([`Conn::send_reply_rest`]).
pub(super) enum Rest<'a> {
    /// Copied out of the upper's reply already.
    Copied(&'a [u8]),
    /// `len` octets the function writes into the slice it is given (the
    /// Send buffer, or a copy bound for the Reply chunk), from the upper's
    /// reply.
    Written(usize, &'a dyn Fn(&mut [u8]) -> Result),
    /// `len` octets of the upper's reply, which `read` writes into the Send
    /// buffer when they fit inline, and `write(at, k, segment, held)` moves
    /// by RDMA Write (octets `at..at + k` into `segment`) straight into the
    /// Reply chunk otherwise: the Write before is posted alone, the last
    /// one left in `held` for the Send to post in front of itself.
    Direct {
        len: usize,
        read: &'a dyn Fn(&mut [u8]) -> Result,
        write: &'a SegmentWrite<'a>,
    },
}

/// [`Rest::Direct`]'s RDMA Write of octets `at..at + k` of a reply into a
/// segment: the WRs it took.
pub(super) type SegmentWrite<'a> =
    dyn Fn(u32, u32, &Segment, &mut Option<HeldWrite>) -> Result<u32> + 'a;

impl Rest<'_> {
    fn len(&self) -> usize {
        match self {
            Rest::Copied(r) => r.len(),
            Rest::Written(len, _) | Rest::Direct { len, .. } => *len,
        }
    }

    fn write(&self, out: &mut [u8]) -> Result {
        match self {
            Rest::Copied(r) => {
                out.copy_from_slice(r);
                Ok(())
            }
            Rest::Written(_, write) | Rest::Direct { read: write, .. } => write(out),
        }
    }
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

/// The rkey a reply to `route` invalidates with Send With Invalidate, if
/// any: only when both ends set R (RFC 8797 Section 4.1; we set it only on a
/// device that supports it, Section 3.2), and only an rkey this call
/// offered: its Write chunk's, else its Reply chunk's, else its Read
/// chunk's (all FRWR-registered by a requester that set R).
fn reply_inv(route: &ReplyRoute, reminv: bool) -> Option<u32> {
    if !reminv {
        return None;
    }
    route
        .wchunks
        .first()
        .and_then(|w| w.first())
        .or(route.rchunk.as_ref().and_then(|r| r.first()))
        .map(|s| s.handle)
        .or(route.read_handle)
}
