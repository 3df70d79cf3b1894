// SPDX-License-Identifier: GPL-2.0

//! nfsd's transport: the listeners nfsd creates through the server class
//! (`rpc.nfsd --rdma`, or `echo "rdma 20049" > /proc/fs/nfsd/portlist`), and
//! the connections they accept, carrying nfsd's calls and replies.
//!
//! A connection of nfsd's keeps each received call's buffer (it is not
//! posted again) until nfsd has answered it: the call's argument is that
//! buffer, without a copy. A call's Read chunk is pulled by RDMA Read into
//! pages of ours while no thread waits ([`PendingPull`]); the call is queued
//! for nfsd when the Reads end, and the pages become its request's. Read
//! chunks at several positions are read the same way into a whole Call laid
//! out in the pages around its inline parts. The reply nfsd encodes
//! goes out as the built-in service's do: its DDP-eligible result (named by
//! nfsd through xpo_result_payload) into the client's Write chunk, the rest
//! inline within the negotiated threshold or into the Reply chunk, with Send
//! With Invalidate when both ends set R.

use core::any::Any;
use core::net::SocketAddr;
use core::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};
use kernel::alloc::KVVec;
use kernel::new_mutex;
use kernel::prelude::*;
use kernel::sync::{Arc, Mutex};

use super::responder::{CallIn, Incoming, ReplyRoute, Rest};
use super::xprt::n32;
use super::{Conn, Fifo, Listener, State};
use crate::proto::conn_state::Closed;
use crate::proto::header::{decode, encode_msg, Body, Header, Limits, MsgSpec, Segment};
use crate::proto::xdr::xdr_align;
use crate::stats::XprtCounter as X;
use crate::sys::param;
use crate::sys::qp::{HeldWrite, MsgRegion, Qp, RecvBuf};
use crate::sys::rdma_cm::{Completion, Net, RwDone, WC_FLUSHED};
use crate::sys::svc::{
    Arg, ArgPages, PendingXprt, SvcCall, SvcFactory, SvcListenerRef, SvcRqst, SvcXprt, SvcXprtOps,
};
use crate::sys::xdr_buf::XdrMsg;

/// Makes nfsd's listeners (xpo_create).
pub(crate) struct Factory(pub(crate) Arc<State>);

impl SvcFactory for Factory {
    fn create(&self, me: SvcListenerRef, net: &Net, ep: SocketAddr) -> Result<Arc<dyn SvcXprtOps>> {
        let l = Listener::new_for_nfsd(self.0.clone(), ep, me, net)?;
        self.0.listeners.lock().push(l.clone(), GFP_KERNEL)?;
        match l.start() {
            Ok(true) => pr_info!("nfsd listens on {:?}\n", ep),
            Ok(false) => pr_warn!("nfsd listener {:?}: device removed while starting\n", ep),
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
        // Stopped for good first: a device added before the listener is
        // forgotten (or while it stays listed for want of memory) must not
        // start it again.
        self.0.stop();
        crate::sys::param::test_detach_delay();
        self.0.state.forget_listener(&self.0);
    }
}

/// A connection of nfsd's, as sunrpc sees it.
pub(super) struct NfsdConn(pub(super) Arc<Conn>);

/// One call nfsd is handling: what its reply needs.
struct NfsCall {
    /// The received message, when the argument is read from it in place
    /// (its QP is the one the reply goes out on).
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

    fn result_payload(&self, offset: u32, len: u32) -> Result {
        // The first result goes to the first Write chunk, if the client
        // offered one large enough; without one it stays in the reply.
        let Some(w) = self.route.wchunks.first() else {
            return Ok(());
        };
        let room: u64 = w.iter().map(|s| u64::from(s.length)).sum();
        if len == 0 || self.payload.load(Ordering::Relaxed) != 0 {
            return Ok(());
        }
        if u64::from(len) > room {
            return Err(E2BIG);
        }
        let v = ((u64::from(offset) << 32) | u64::from(len)) + 1;
        self.payload.store(v, Ordering::Relaxed);
        Ok(())
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
    fn recvfrom(&self, rq: &mut SvcRqst<'_>) -> u32 {
        let conn = &self.0;
        let Some(item) = conn.nfsd().and_then(NfsdSide::pop) else {
            return 0;
        };
        rq.received();
        let buf = match item {
            SvcItem::Pulled(p) => {
                let Some(qp) = conn.qp_handle() else {
                    return 0;
                };
                return conn.svc_hand_pulled(&qp, rq, p);
            }
            SvcItem::Received(buf) => buf,
        };
        // A call popped as the connection closed goes (its buffer back).
        if conn.is_retired() {
            return 0;
        }
        // The buffer's QP (its own reference, counted once more here: the
        // buffer moves into the call below).
        let qp = buf.qp().clone();
        // The header, decoded once. A Reply to one of our backchannel Calls
        // (RFC 8167): no chunks, and the RPC message says REPLY. It never
        // reaches nfsd's dispatcher.
        let header = decode(buf.data(), &Limits::DEFAULT);
        if let Some((rpc, credits)) = header
            .as_ref()
            .ok()
            .and_then(|h| backchannel_reply(buf.data(), h))
        {
            if conn.nfsd().is_some_and(|n| n.bc_reply(rpc, credits)) {
                conn.count(X::BcReplies, 1);
            } else {
                conn.count(X::RepliesUnmatched, 1);
            }
            return 0;
        }
        // What the reply needs, from the header, and how the argument gets
        // into the request's pages; the borrow of `buf` ends here.
        let decoded = conn.check_call(&qp, buf.data(), header).map(|inc| {
            let Incoming {
                call,
                nomsg,
                s2c,
                reminv,
            } = inc;
            let route = ReplyRoute::of(call.xid, call.credits, &call.chunks);
            let pull = if nomsg || call.chunks.read_segments() != 0 {
                conn.svc_pull(rq, &call)
            } else {
                Ok(Pull::Ready(Arg::InPlace {
                    position: n32(call.inline.len()),
                    page_len: 0,
                }))
            };
            let arg_off = buf.data().len() - call.inline.len();
            (call.xid, call.credits, route, pull, arg_off, s2c, reminv)
        });
        let Some((xid, credits, route, pull, arg_off, s2c, reminv)) = decoded else {
            return 0;
        };
        let (route, pull) = match (route, pull) {
            (Ok(r), Ok(p)) => (r, p),
            (Err(e), _) | (_, Err(e)) => {
                conn.call_failed(&qp, xid, credits, e);
                return 0;
            }
        };
        let call = NfsCall {
            buf: Some(buf),
            arg_off,
            route,
            s2c,
            reminv,
            payload: AtomicU64::new(0),
        };
        match pull {
            Pull::Ready(arg) => conn.svc_accept(&qp, rq, xid, credits, call, arg),
            Pull::Direct(d) => {
                // The Reads go on without this thread: nfsd gets the call
                // from a later recvfrom (SvcItem::Pulled).
                if let Err(e) = conn.svc_pull_async(&qp, rq, xid, credits, call, d) {
                    conn.call_failed(&qp, xid, credits, e);
                }
                0
            }
        }
    }

    fn sendto(&self, rq: &SvcRqst<'_>, call: Option<&dyn SvcCall>) -> Result {
        let conn = &self.0;
        let c = call
            .and_then(|c| c.as_any().downcast_ref::<NfsCall>())
            .ok_or(EINVAL)?;
        // Nothing is sent on a connection that closed (its QP may not be
        // closed yet); the QP of the call's kept buffer, else the
        // connection's.
        if conn.is_retired() {
            return Err(ENOTCONN);
        }
        let handle;
        let qp = match &c.buf {
            Some(b) => b.qp(),
            None => {
                handle = conn.qp_handle().ok_or(ENOTCONN)?;
                &handle
            }
        };
        let sent = if param::test_svc_reply_nomem() {
            Err(ENOMEM)
        } else {
            conn.svc_reply(qp, rq, c)
        };
        sent.inspect_err(|&e| conn.call_failed(qp, c.route.xid, c.route.credits, e))
    }

    fn bc_send(&self, msg: &XdrMsg<'_>) -> Result {
        let conn = &self.0;
        let qp = conn.qp_handle().ok_or(ENOTCONN)?;
        let mut xid = [0u8; 4];
        msg.read(0, &mut xid).map_err(|_| EINVAL)?;
        let spec = MsgSpec {
            xid: u32::from_be_bytes(xid),
            credits: BC_CREDITS,
            nomsg: false,
            reads: &[],
            writes: &[],
            reply: None,
        };
        // The Call is copied once, from sunrpc's buffer into the Send buffer
        // after the transport header.
        let res = qp.send(None, |buf| {
            let hl = encode_msg(buf, &spec).map_err(|_| EMSGSIZE)?;
            let end = hl.checked_add(msg.len()).ok_or(EMSGSIZE)?;
            msg.read(0, buf.get_mut(hl..end).ok_or(EMSGSIZE)?)?;
            Ok(end)
        });
        match res {
            Ok(()) => {
                conn.count(X::BcCalls, 1);
                Ok(())
            }
            Err(e) if e == EBUSY => Err(EAGAIN),
            Err(_) => Err(ENOTCONN),
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

/// A call queued for nfsd (xpo_recvfrom takes them in order).
pub(super) enum SvcItem {
    /// As received.
    Received(RecvBuf),
    /// With its Read chunk pulled into pages of ours.
    Pulled(Pulled),
}

/// Receives an nfsd connection keeps back from its grant for the Replies to
/// its backchannel Calls (two at a time, as [`BC_CREDITS`]).
pub(super) const BC_RESERVE: u32 = 2;

/// What a connection carrying nfsd's calls keeps for nfsd
/// ([`super::Upper::Nfsd`]).
///
/// # Invariants
///
/// Once `closed`, nothing more is queued: the close took what was queued,
/// and a call received after it gives its buffer back at once.
#[pin_data]
pub(super) struct NfsdSide {
    #[pin]
    inner: Mutex<NfsdInner>,
}

struct NfsdInner {
    /// nfsd's reference on its transport, until nfsd detaches it.
    svc: Option<SvcXprt>,
    /// Calls received for nfsd, not yet handed to it.
    queue: Fifo<SvcItem>,
    /// The connection closed.
    closed: bool,
}

impl NfsdSide {
    pub(super) fn new() -> Result<Pin<KBox<Self>>> {
        KBox::pin_init(
            pin_init!(NfsdSide {
                inner <- new_mutex!(NfsdInner {
                    svc: None,
                    queue: Fifo::new(),
                    closed: false,
                }),
            }),
            GFP_KERNEL,
        )
    }

    /// Keeps nfsd's transport `x`, made for the connection before nfsd can
    /// see it. A connection that closed meanwhile (`disconnect`, device
    /// removal) has it closed at once, as the close would have.
    pub(super) fn attach(&self, x: SvcXprt) {
        let old = {
            let mut g = self.inner.lock();
            if g.closed {
                x.close();
            }
            g.svc.replace(x)
        };
        drop(old);
    }

    /// nfsd detaches its transport (or never took it): its reference goes,
    /// after the lock.
    pub(super) fn detach(&self) {
        let x = self.inner.lock().svc.take();
        drop(x);
    }

    /// The connection closed: nfsd closes its transport (xpo_detach
    /// follows); the calls nfsd never saw give their buffers back (the QP's
    /// teardown waits for them), after the lock.
    pub(super) fn closed(&self) {
        let queued = {
            let mut g = self.inner.lock();
            g.closed = true;
            if let Some(x) = &g.svc {
                x.close();
            }
            g.queue.take()
        };
        drop(queued);
    }

    /// Queues a call for nfsd and tells nfsd. Dropped (its buffer given
    /// back) if the connection closed or nfsd let go of it; handed back if
    /// there is no memory to queue it.
    fn push(&self, item: SvcItem) -> core::result::Result<(), SvcItem> {
        let mut g = self.inner.lock();
        if g.closed {
            return Ok(());
        }
        if g.svc.is_none() {
            return Ok(());
        }
        g.queue.push(item)?;
        if let Some(x) = &g.svc {
            x.set_data(true);
            x.enqueue();
        }
        Ok(())
    }

    /// The next call for nfsd, if any (xpo_recvfrom); with none, nfsd is
    /// told so under the lock the queue takes.
    fn pop(&self) -> Option<SvcItem> {
        let mut g = self.inner.lock();
        let item = g.queue.pop();
        if item.is_none() {
            if let Some(x) = &g.svc {
                x.set_data(false);
            }
        }
        item
    }

    /// Completes a backchannel Call with its Reply.
    fn bc_reply(&self, rpc: &[u8], credits: u32) -> bool {
        let g = self.inner.lock();
        g.svc.as_ref().is_some_and(|x| x.bc_reply(rpc, credits))
    }
}

/// How a call's argument reaches nfsd's request ([`Conn::svc_pull`]).
enum Pull {
    /// In place, or copied into the request's pages already.
    Ready(Arg),
    /// Read chunks to pull by RDMA Read while no thread waits.
    Direct(DirectPull),
}

/// Read segments to pull, each at its offset in the argument's pages, the
/// pages (already holding what arrived inline, for a call of several Read
/// chunks) and the argument they make.
struct DirectPull {
    reads: KVec<(u32, Segment)>,
    /// `Some` for a call of several Read chunks, laid out around them.
    pages: Option<ArgPages>,
    arg: Arg,
}

/// A call whose Read chunk is in `pages`: what the recvfrom that takes it
/// needs.
pub(super) struct Pulled {
    call: NfsCall,
    xid: u32,
    credits: u32,
    arg: Arg,
    pages: ArgPages,
    /// Its inline parts were copied around several Read chunks.
    laid_out: bool,
}

/// A pull in flight: the call, taken by the last of its Reads to end.
#[pin_data]
pub(super) struct PendingPull {
    #[pin]
    call: Mutex<Option<Pulled>>,
    /// Reads not ended, plus one while the poster posts.
    left: AtomicU32,
    /// The first error (a negative errno), 0 if none.
    error: AtomicI32,
}

/// Credits a backchannel Call grants the client for its Replies (as svcrdma:
/// the backchannel's two slots).
const BC_CREDITS: u32 = 2;

/// The RPC message and credit field of a backchannel Reply (RDMA_MSG, no
/// chunks, message type REPLY), if `data`, whose header is `h`, is one.
fn backchannel_reply<'a>(data: &'a [u8], h: &Header<'_>) -> Option<(&'a [u8], u32)> {
    let Body::Msg(c) = &h.body else {
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
    /// What the connection keeps for nfsd; `None` if it does not carry
    /// nfsd's calls.
    pub(super) fn nfsd(&self) -> Option<&NfsdSide> {
        match &self.upper {
            super::Upper::Nfsd(n) => Some(n),
            _ => None,
        }
    }

    /// A call arrived for nfsd: queue it and tell nfsd.
    pub(super) fn svc_received(&self, qp: &Qp, wc: &Completion<'_>) {
        if let Some(buf) = wc.keep() {
            self.svc_push(qp, SvcItem::Received(buf));
        }
    }

    /// Queues a call for nfsd and tells nfsd.
    fn svc_push(&self, qp: &Qp, item: SvcItem) {
        let Some(nfsd) = self.nfsd() else {
            return;
        };
        if let Err(item) = nfsd.push(item) {
            // A call lost for want of memory would hold the client's credit
            // for good: end the connection instead. Its buffer goes back
            // first (after the queue's lock).
            drop(item);
            self.drop_for_memory(qp);
        }
    }

    /// nfsd detaches its transport, or never took it.
    pub(super) fn svc_detach(&self) {
        if let Some(n) = self.nfsd() {
            n.detach();
        }
    }

    /// Lays out a call of Read chunks at several positions in pages of ours:
    /// the inline parts copied now, each chunk XDR-padded at its place, to
    /// be read there ([`Pull::Direct`], no thread waits for the Reads);
    /// the whole Call then goes to nfsd in the pages.
    fn svc_layout(&self, rq: &SvcRqst<'_>, call: &CallIn<'_>) -> Result<DirectPull> {
        // Where every piece goes, first, so the pages are allocated once:
        // Reads at `reads`, inline octets `from..to` at `inline`, and the
        // XDR pads after chunks (not read from the peer) zeroed at `pads`.
        let mut reads = KVec::new();
        let mut inline = KVec::new();
        let mut pads = KVec::new();
        let (mut len, mut cursor) = (0u32, 0usize);
        let mut current: Option<u32> = None;
        for rs in call.chunks.read_list() {
            if current != Some(rs.position) {
                // A new chunk: the previous one ends XDR-aligned, then the
                // inline part that precedes this one's position.
                if current.is_some() {
                    let padded = n32(xdr_align(len as usize).ok_or(EMSGSIZE)?);
                    pads.push((len, padded - len), GFP_KERNEL)?;
                    len = padded;
                }
                let need = (rs.position as usize)
                    .checked_sub(len as usize)
                    .ok_or(EINVAL)?;
                let end = cursor.checked_add(need).ok_or(EINVAL)?;
                if end > call.inline.len() {
                    return Err(EINVAL);
                }
                inline.push((len, cursor, end), GFP_KERNEL)?;
                len = len.checked_add(n32(need)).ok_or(EMSGSIZE)?;
                cursor = end;
                current = Some(rs.position);
            }
            if rs.segment.length != 0 {
                reads.push((len, rs.segment), GFP_KERNEL)?;
                len = len.checked_add(rs.segment.length).ok_or(EMSGSIZE)?;
            }
        }
        if current.is_some() {
            let padded = n32(xdr_align(len as usize).ok_or(EMSGSIZE)?);
            pads.push((len, padded - len), GFP_KERNEL)?;
            len = padded;
        }
        inline.push((len, cursor, call.inline.len()), GFP_KERNEL)?;
        len = len
            .checked_add(n32(call.inline.len() - cursor))
            .ok_or(EMSGSIZE)?;
        if len > rq.arg_room() {
            return Err(EMSGSIZE);
        }
        let mut pages = ArgPages::new(len)?;
        for &(at, from, to) in inline.iter() {
            pages.write(at, &call.inline[from..to])?;
        }
        for &(at, n) in pads.iter() {
            pages.write(at, &[0u8; 3][..n as usize])?;
        }
        Ok(DirectPull {
            reads,
            pages: Some(pages),
            arg: Arg::Pages { len },
        })
    }

    /// How a call's Read chunks get into nfsd's request. With one Read chunk
    /// (its segments at one position: a WRITE's data, or a Position-Zero
    /// long call) RDMA Read puts it straight into pages that become the
    /// request's, and the rest of the call stays in the receive buffer as
    /// rq_arg's head and tail, as svcrdma does ([`Pull::Direct`]). Chunks
    /// at several positions are read into a Call laid out in pages of ours
    /// ([`Conn::svc_layout`]), also without a waiting thread.
    fn svc_pull(&self, rq: &SvcRqst<'_>, call: &CallIn<'_>) -> Result<Pull> {
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
                let mut reads = KVec::new();
                let mut len = 0u32;
                for r in call.chunks.read_list() {
                    if r.segment.length != 0 {
                        reads.push((len, r.segment), GFP_KERNEL)?;
                        len = len.checked_add(r.segment.length).ok_or(EMSGSIZE)?;
                    }
                }
                let arg = if p == 0 {
                    Arg::Pages { len }
                } else {
                    Arg::InPlace {
                        position: p,
                        page_len: n32(xdr_align(len as usize).ok_or(EMSGSIZE)?),
                    }
                };
                Ok(Pull::Direct(DirectPull {
                    reads,
                    pages: None,
                    arg,
                }))
            }
            _ => Ok(Pull::Direct(self.svc_layout(rq, call)?)),
        }
    }

    /// Starts the RDMA Reads of a [`Pull::Direct`] into pages of ours; when the
    /// last ends, the call is queued for nfsd ([`Conn::svc_pull_end`]).
    fn svc_pull_async(
        &self,
        qp: &Qp,
        rq: &SvcRqst<'_>,
        xid: u32,
        credits: u32,
        call: NfsCall,
        d: DirectPull,
    ) -> Result {
        let laid_out = d.pages.is_some();
        let pages = match d.pages {
            Some(p) => p,
            None => {
                let room = match d.arg {
                    Arg::Pages { len } => len,
                    Arg::InPlace { page_len, .. } => page_len,
                };
                if room > rq.arg_room() {
                    return Err(EMSGSIZE);
                }
                ArgPages::new(room)?
            }
        };
        let n = n32(d.reads.len());
        let pending = Arc::pin_init(
            pin_init!(PendingPull {
                call <- new_mutex!(Some(Pulled {
                    call,
                    xid,
                    credits,
                    arg: d.arg,
                    pages,
                    laid_out,
                })),
                // One for each Read, one for this thread.
                left: AtomicU32::new(n + 1),
                error: AtomicI32::new(0),
            }),
            GFP_KERNEL,
        )?;
        let mut posted = 0u32;
        let mut res = Ok(());
        {
            let g = pending.call.lock();
            let Some(p) = g.as_ref() else {
                return Err(EINVAL);
            };
            for &(at, ref s) in d.reads.iter() {
                let done = RwDone(pending.clone());
                match p
                    .pages
                    .read_async(qp, at, s.length, s.handle, s.offset, done)
                {
                    Ok(wrs) => {
                        self.count(X::RdmaReads, 1);
                        self.count(X::RdmaRwWrs, u64::from(wrs));
                        self.count(X::BytesRdmaRead, u64::from(s.length));
                    }
                    Err(e) => {
                        res = Err(e);
                        break;
                    }
                }
                posted += 1;
            }
        }
        // This thread's count, and the Reads never posted.
        self.svc_pull_end(qp, &pending, 1 + (n - posted), res);
        Ok(())
    }

    /// `n` of a pull's Reads (or its poster) ended, with `res`. The last one
    /// queues the call for nfsd, or answers it with the first error: a Read
    /// that failed left the QP in error (`EIO`: the connection ends), one
    /// never posted gets the call an RDMA_ERROR, a flush (`ENOTCONN`) none.
    pub(super) fn svc_pull_end(&self, qp: &Qp, p: &PendingPull, n: u32, res: Result) {
        match res {
            // A failed Read leaves the QP in error: that outranks any other cause.
            Err(e) if e == EIO => p.error.store(e.to_errno(), Ordering::Release),
            Err(e) => {
                let _ =
                    p.error
                        .compare_exchange(0, e.to_errno(), Ordering::AcqRel, Ordering::Acquire);
            }
            Ok(()) => {}
        }
        if p.left.fetch_sub(n, Ordering::AcqRel) != n {
            return;
        }
        let Some(pulled) = p.call.lock().take() else {
            return;
        };
        match p.error.load(Ordering::Acquire) {
            0 => {
                let c = if pulled.laid_out {
                    X::SvcArgsCopied
                } else {
                    X::SvcArgsDirect
                };
                self.count(c, 1);
                self.svc_push(qp, SvcItem::Pulled(pulled));
            }
            e => self.call_failed(qp, pulled.xid, pulled.credits, Error::from_errno(e)),
        }
    }

    /// One Read of a pull ended (CmHandler::rw_done): a flush is the
    /// connection closing, any other failure leaves the QP in error.
    pub(super) fn svc_read_done(&self, qp: &Qp, done: &(dyn Any + Send + Sync), status: i32) {
        let Some(p) = done.downcast_ref::<PendingPull>() else {
            return;
        };
        let res = match status {
            0 => Ok(()),
            s if s == WC_FLUSHED => Err(ENOTCONN),
            _ => Err(EIO),
        };
        self.svc_pull_end(qp, p, 1, res);
    }

    /// A pulled call reaches nfsd: its pages become the request's.
    fn svc_hand_pulled(&self, qp: &Qp, rq: &mut SvcRqst<'_>, p: Pulled) -> u32 {
        let Pulled {
            call,
            xid,
            credits,
            arg,
            pages,
            ..
        } = p;
        if let Err(e) = rq.take_arg_pages(pages) {
            self.call_failed(qp, xid, credits, e);
            return 0;
        }
        self.svc_accept(qp, rq, xid, credits, call, arg)
    }

    /// Hands nfsd a call laid out as `arg` says.
    fn svc_accept(
        &self,
        qp: &Qp,
        rq: &mut SvcRqst<'_>,
        xid: u32,
        credits: u32,
        mut call: NfsCall,
        arg: Arg,
    ) -> u32 {
        // The argument's head and tail stay in the receive buffer until nfsd
        // releases the request; a call in the pages gives it back now.
        if !matches!(arg, Arg::InPlace { .. }) {
            call.buf = None;
        }
        match rq.accept_call(call, arg) {
            Ok(len) => {
                self.count(X::SvcCalls, 1);
                len
            }
            Err(e) => {
                self.count(X::SvcCallsDropped, 1);
                self.call_failed(qp, xid, credits, e);
                0
            }
        }
    }

    /// Sends nfsd's reply. One to a call that offered no Write chunk is
    /// read straight into the Send buffer if it fits inline, else written
    /// by RDMA Write from nfsd's head, pages and tail into the Reply chunk
    /// (copied out first only where those are not in the kernel's linear
    /// map). Otherwise a DDP-eligible result in
    /// the reply's page list (READ data) goes to the first Write chunk by
    /// RDMA Write from those pages, and only the rest of the reply is read
    /// out, to go inline or into the Reply chunk; else the whole reply is
    /// copied out first.
    fn svc_reply(&self, qp: &Qp, rq: &SvcRqst<'_>, c: &NfsCall) -> Result {
        let len = rq.res_len() as usize;
        // Most replies: no Write chunk offered.
        if c.route.wchunks.is_empty() {
            let whole = |out: &mut [u8]| rq.res_read(0, out);
            let write = |at: u32, k: u32, s: &Segment, held: &mut Option<HeldWrite>| {
                rq.write_res(qp, at, k, s.handle, s.offset, held)
            };
            let rest = if rq.res_writable() {
                Rest::Direct {
                    len,
                    read: &whole,
                    write: &write,
                }
            } else {
                Rest::Written(len, &whole)
            };
            return self.send_reply_rest(qp, &c.route, &[], false, c.s2c, c.reminv, rest, None);
        }
        if let (Some((off, plen)), Some(first)) = (c.payload(), c.route.wchunks.first()) {
            if plen != 0 && rq.res_in_pages(n32(off), plen) {
                let mut written: KVec<KVec<Segment>> = KVec::new();
                // The last Write of the result waits in `held` for the
                // Send, to go in the same post.
                let mut held = None;
                let segs = self.push_res(qp, rq, first, n32(off), plen, &mut held)?;
                written.push(segs, GFP_KERNEL)?;
                for w in c.route.wchunks.iter().skip(1) {
                    written.push(self.push(qp, w, &[])?, GFP_KERNEL)?;
                }
                self.count(X::SvcPayloadsDirect, 1);
                // The rest: what precedes the result and what follows its
                // XDR padding.
                let end = off
                    .checked_add(xdr_align(plen as usize).ok_or(EMSGSIZE)?)
                    .ok_or(EMSGSIZE)?
                    .min(len);
                let rest = |out: &mut [u8]| {
                    let (head, tail) = out.split_at_mut_checked(off).ok_or(EINVAL)?;
                    rq.res_read(0, head)?;
                    rq.res_read(n32(end), tail)
                };
                let rest = Rest::Written(off + (len - end), &rest);
                let (s2c, reminv) = (c.s2c, c.reminv);
                return self.send_reply_rest(qp, &c.route, &written, true, s2c, reminv, rest, held);
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
    /// with the lengths written, as the reply echoes them. The last segment's
    /// Write is left in `held`, for the reply's Send to post.
    fn push_res(
        &self,
        qp: &Qp,
        rq: &SvcRqst<'_>,
        segs: &[Segment],
        off: u32,
        len: u32,
        held: &mut Option<HeldWrite>,
    ) -> Result<KVec<Segment>> {
        self.write_segments(segs, len, |at, k, s| {
            rq.write_from_res(qp, off + at, k, s.handle, s.offset, held)
        })
    }

    /// A handle on the QP, if the connection has one.
    pub(super) fn qp_handle(&self) -> Option<Qp> {
        self.inner.lock().cm.get().and_then(|c| c.qp())
    }
}
