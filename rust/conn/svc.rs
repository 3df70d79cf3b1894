// SPDX-License-Identifier: GPL-2.0

//! nfsd's transport: the listeners nfsd creates through the server class
//! (`rpc.nfsd --rdma`, or `echo "rdma 20049" > /proc/fs/nfsd/portlist`), and
//! the connections they accept, carrying nfsd's calls and replies.
//!
//! A connection of nfsd's keeps each received call's buffer (it is not
//! posted again) until nfsd has answered it: the call's argument is that
//! buffer, without a copy, unless it came in Read chunks, which are pulled
//! with RDMA Read and copied into the request's pages. The reply nfsd encodes
//! goes out as the built-in service's do: its DDP-eligible result (named by
//! nfsd through xpo_result_payload) into the client's Write chunk, the rest
//! inline within the negotiated threshold or into the Reply chunk, with Send
//! With Invalidate when both ends set R.

use core::any::Any;
use core::net::SocketAddr;
use core::sync::atomic::{AtomicU64, Ordering};
use kernel::alloc::KVVec;
use kernel::prelude::*;
use kernel::sync::Arc;

use super::xprt::{n32, CallIn, Incoming, ReplyRoute};
use super::{Conn, Listener, State};
use crate::proto::conn_state::Closed;
use crate::proto::header::{decode, encode_msg, Body, Limits, MsgSpec, Segment};
use crate::proto::xdr::xdr_align;
use crate::stats::XprtCounter as X;
use crate::sys::errno::emsgsize;
use crate::sys::qp::{MsgRegion, Qp, RecvBuf};
use crate::sys::rdma_cm::Net;
use crate::sys::svc::{Arg, PendingXprt, SvcCall, SvcFactory, SvcListenerRef, SvcRqst, SvcXprtOps};

/// Makes nfsd's listeners (xpo_create).
pub(crate) struct Factory(pub(crate) Arc<State>);

impl SvcFactory for Factory {
    fn create(&self, me: SvcListenerRef, net: &Net, ep: SocketAddr) -> Result<Arc<dyn SvcXprtOps>> {
        let l = Listener::new_for_nfsd(self.0.clone(), ep, me, net)?;
        self.0.listeners.lock().push(l.clone(), GFP_KERNEL)?;
        match l.start() {
            Ok(true) => pr_info!("nfsd listens on {}\n", ep),
            Ok(false) => pr_warn!("nfsd listener {}: device removed while starting\n", ep),
            Err(e) => {
                self.0.forget_listener(&l);
                return Err(e);
            }
        }
        Ok(Arc::new(NfsdListener(l), GFP_KERNEL)?)
    }
}

/// A listener nfsd created.
struct NfsdListener(Arc<Listener>);

impl SvcXprtOps for NfsdListener {
    fn accept(&self) -> (Option<PendingXprt>, bool) {
        self.0.next_accepted()
    }

    fn detach(&self) {
        self.0.stop();
        self.0.state.forget_listener(&self.0);
    }
}

/// A connection of nfsd's, as sunrpc sees it.
pub(super) struct NfsdConn(pub(super) Arc<Conn>);

/// One call nfsd is handling: what its reply needs.
struct NfsCall {
    /// The received message, when the argument is read from it in place.
    buf: Option<RecvBuf>,
    /// Where the RPC call starts in `buf`.
    arg_off: usize,
    route: ReplyRoute,
    s2c: u32,
    reminv: bool,
    /// The DDP-eligible result nfsd named: offset << 32 | length, plus one
    /// (0: none).
    payload: AtomicU64,
}

impl SvcCall for NfsCall {
    fn arg(&self) -> Option<MsgRegion> {
        self.buf.as_ref().and_then(|b| b.region(self.arg_off))
    }

    fn result_payload(&self, offset: u32, len: u32) -> i32 {
        // The first result goes to the first Write chunk, if the client
        // offered one large enough; without one it stays in the reply.
        let Some(w) = self.route.wchunks.first() else {
            return 0;
        };
        let room: u64 = w.iter().map(|s| u64::from(s.length)).sum();
        if len == 0 || self.payload.load(Ordering::Relaxed) != 0 {
            return 0;
        }
        if u64::from(len) > room {
            return -(kernel::bindings::E2BIG as i32);
        }
        let v = ((u64::from(offset) << 32) | u64::from(len)) + 1;
        self.payload.store(v, Ordering::Relaxed);
        0
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl NfsCall {
    fn payload(&self) -> Option<(usize, u32)> {
        match self.payload.load(Ordering::Relaxed) {
            0 => None,
            v => {
                let v = v - 1;
                Some(((v >> 32) as usize, v as u32))
            }
        }
    }
}

impl SvcXprtOps for NfsdConn {
    fn recvfrom(&self, rq: &mut SvcRqst<'_>) -> i32 {
        let conn = &self.0;
        let Some(buf) = conn.svc_dequeue() else {
            return 0;
        };
        rq.received();
        let Some(qp) = conn.qp_handle() else {
            return 0;
        };
        // A Reply to one of our backchannel Calls (RFC 8167): no chunks, and
        // the RPC message says REPLY. It never reaches nfsd's dispatcher.
        if let Some((rpc, credits)) = backchannel_reply(buf.data()) {
            if conn.svc_bc_reply(rpc, credits) {
                conn.count(X::BcReplies, 1);
            } else {
                conn.count(X::RepliesUnmatched, 1);
            }
            return 0;
        }
        // What the reply needs, from the header, and the argument pulled into
        // the request's pages; the borrow of `buf` ends here.
        let decoded = conn.decode_call(&qp, buf.data()).map(|inc| {
            let Incoming {
                call,
                nomsg,
                s2c,
                reminv,
            } = inc;
            let route = ReplyRoute::of(call.xid, call.credits, &call.chunks);
            let arg = if nomsg || call.chunks.read_segments() != 0 {
                conn.svc_pull(&qp, rq, &call)
            } else {
                Ok(Arg::InPlace {
                    position: n32(call.inline.len()),
                    page_len: 0,
                })
            };
            let arg_off = buf.data().len() - call.inline.len();
            (call.xid, call.credits, route, arg, arg_off, s2c, reminv)
        });
        let Some((xid, credits, route, arg, arg_off, s2c, reminv)) = decoded else {
            return 0;
        };
        let (route, arg) = match (route, arg) {
            (Ok(r), Ok(a)) => (r, a),
            (Err(e), _) | (_, Err(e)) => {
                conn.call_failed(&qp, xid, credits, e);
                return 0;
            }
        };
        let call = NfsCall {
            // The argument's head and tail stay in the receive buffer until
            // nfsd releases the request; a call in the pages gives it back now.
            buf: matches!(arg, Arg::InPlace { .. }).then_some(buf),
            arg_off,
            route,
            s2c,
            reminv,
            payload: AtomicU64::new(0),
        };
        let ret = match Arc::new(call, GFP_KERNEL) {
            Ok(c) => rq.accept_call(c, arg),
            Err(_) => -(kernel::bindings::ENOMEM as i32),
        };
        if ret < 0 {
            conn.count(X::SvcCallsDropped, 1);
            conn.call_failed(&qp, xid, credits, Error::from_errno(ret));
            return 0;
        }
        conn.count(X::SvcCalls, 1);
        ret
    }

    fn sendto(&self, rq: &SvcRqst<'_>, call: Option<&dyn SvcCall>) -> i32 {
        let conn = &self.0;
        let Some(c) = call.and_then(|c| c.as_any().downcast_ref::<NfsCall>()) else {
            return -(kernel::bindings::EINVAL as i32);
        };
        let Some(qp) = conn.qp_handle() else {
            return -(kernel::bindings::ENOTCONN as i32);
        };
        match conn.svc_reply(&qp, rq, c) {
            Ok(()) => 0,
            Err(e) => {
                conn.call_failed(&qp, c.route.xid, c.route.credits, e);
                e.to_errno()
            }
        }
    }

    fn bc_send(&self, msg: &[u8]) -> i32 {
        let conn = &self.0;
        let Some(qp) = conn.qp_handle() else {
            return -(kernel::bindings::ENOTCONN as i32);
        };
        let Some(xid) = msg
            .get(..4)
            .map(|x| u32::from_be_bytes([x[0], x[1], x[2], x[3]]))
        else {
            return -(kernel::bindings::EINVAL as i32);
        };
        let spec = MsgSpec {
            xid,
            credits: BC_CREDITS,
            nomsg: false,
            reads: &[],
            writes: &[],
            reply: None,
        };
        let res = qp.send(None, |buf| {
            let hl = encode_msg(buf, &spec).map_err(|_| emsgsize())?;
            buf.get_mut(hl..hl + msg.len())
                .ok_or_else(emsgsize)?
                .copy_from_slice(msg);
            Ok(hl + msg.len())
        });
        match res {
            Ok(()) => {
                conn.count(X::BcCalls, 1);
                0
            }
            Err(e) if e == EBUSY => -(kernel::bindings::EAGAIN as i32),
            Err(_) => -(kernel::bindings::ENOTCONN as i32),
        }
    }

    fn detach(&self) {
        // nfsd closes the transport: the connection goes, without waiting
        // here for the requests still in flight (their buffers hold the QP:
        // the teardown, deferred, waits for them).
        self.0.svc_detach();
        self.0.close_deferred(Closed::ClosedByNfsd);
    }
}

/// Credits a backchannel Call grants the client for its Replies (as svcrdma:
/// the backchannel's two slots).
const BC_CREDITS: u32 = 2;

/// The RPC message and credit field of a backchannel Reply (RDMA_MSG, no
/// chunks, message type REPLY), if `data` is one.
fn backchannel_reply(data: &[u8]) -> Option<(&[u8], u32)> {
    let h = decode(data, &Limits::DEFAULT).ok()?;
    let Body::Msg(c) = h.body else {
        return None;
    };
    if c.read_segments() != 0 || c.write_chunks() != 0 || c.reply_chunk().is_some() {
        return None;
    }
    let rpc = data.get(h.len..)?;
    let mtype = rpc.get(4..8)?;
    (mtype == [0, 0, 0, 1]).then_some((rpc, h.credits))
}

impl Conn {
    /// Pulls a call's Read chunks into nfsd's request. With one Read chunk
    /// (its segments at one position: a WRITE's data, or a Position-Zero long
    /// call) RDMA Read puts it straight into the request's pages, and the
    /// rest of the call stays in the receive buffer as rq_arg's head and
    /// tail, as svcrdma does. Several chunks are assembled in memory and
    /// copied there.
    fn svc_pull(&self, qp: &Qp, rq: &mut SvcRqst<'_>, call: &CallIn<'_>) -> Result<Arg> {
        let position = call.chunks.read_list().next().map(|r| r.position);
        let one = call
            .chunks
            .read_list()
            .all(|r| Some(r.position) == position);
        match position {
            Some(p)
                if one
                    && (p as usize) <= call.inline.len()
                    && (p != 0 || call.inline.is_empty()) =>
            {
                let mut at = 0u32;
                for r in call.chunks.read_list() {
                    let s = r.segment;
                    if s.length == 0 {
                        continue;
                    }
                    let wrs = rq.read_into_pages(qp, at, s.length, s.handle, s.offset)?;
                    self.count(X::RdmaReads, 1);
                    self.count(X::RdmaRwWrs, u64::from(wrs));
                    self.count(X::BytesRdmaRead, u64::from(s.length));
                    at = at.checked_add(s.length).ok_or_else(emsgsize)?;
                }
                self.count(X::SvcArgsDirect, 1);
                Ok(if p == 0 {
                    Arg::Pages { len: at }
                } else {
                    Arg::InPlace {
                        position: p,
                        page_len: n32(xdr_align(at as usize).ok_or_else(emsgsize)?),
                    }
                })
            }
            _ => {
                let msg = self.assemble_call(qp, call)?;
                rq.copy_into_pages(0, &msg)?;
                self.count(X::SvcArgsCopied, 1);
                Ok(Arg::Pages {
                    len: n32(msg.len()),
                })
            }
        }
    }

    /// Sends nfsd's reply. A DDP-eligible result in the reply's page list
    /// (READ data) goes to the first Write chunk by RDMA Write from those
    /// pages; only the rest of the reply is copied out, to go inline or into
    /// the Reply chunk. Otherwise the whole reply is copied out first.
    fn svc_reply(&self, qp: &Qp, rq: &SvcRqst<'_>, c: &NfsCall) -> Result {
        let len = rq.res_len() as usize;
        if let (Some((off, plen)), Some(first)) = (c.payload(), c.route.wchunks.first()) {
            if plen != 0 && rq.res_in_pages(n32(off), plen) {
                let mut written: KVec<KVec<Segment>> = KVec::new();
                written.push(self.push_res(qp, rq, first, n32(off), plen)?, GFP_KERNEL)?;
                for w in c.route.wchunks.iter().skip(1) {
                    written.push(self.push(qp, w, &[])?, GFP_KERNEL)?;
                }
                self.count(X::SvcPayloadsDirect, 1);
                // The rest: what precedes the result and what follows its
                // XDR padding.
                let end = off
                    .checked_add(xdr_align(plen as usize).ok_or_else(emsgsize)?)
                    .ok_or_else(emsgsize)?
                    .min(len);
                let mut rest: KVVec<u8> = KVVec::new();
                rest.extend_with(off + (len - end), 0, GFP_KERNEL)?;
                rq.res_read(0, &mut rest[..off])?;
                rq.res_read(n32(end), &mut rest[off..])?;
                return self.send_reply_rest(qp, &c.route, &written, &rest, true, c.s2c, c.reminv);
            }
            self.count(X::SvcPayloadsCopied, 1);
        }
        let mut reply: KVVec<u8> = KVVec::new();
        reply.extend_with(len, 0, GFP_KERNEL)?;
        rq.res_read(0, &mut reply)?;
        self.send_reply(qp, &c.route, &reply, c.payload(), c.s2c, c.reminv)
    }

    /// Writes `len` octets of nfsd's reply at `off` into the segments of a
    /// Write chunk, straight from the reply's pages; returns the segments
    /// with the lengths written, as the reply echoes them.
    fn push_res(
        &self,
        qp: &Qp,
        rq: &SvcRqst<'_>,
        segs: &[Segment],
        off: u32,
        len: u32,
    ) -> Result<KVec<Segment>> {
        self.write_segments(segs, len, |at, k, s| {
            rq.write_from_res(qp, off + at, k, s.handle, s.offset)
        })
    }

    /// A handle on the QP, if the connection has one.
    pub(super) fn qp_handle(&self) -> Option<Qp> {
        self.inner.lock().cm.as_ref().and_then(|c| c.qp())
    }
}
