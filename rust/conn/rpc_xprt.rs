// SPDX-License-Identifier: GPL-2.0

//! The transport of NFS mounts (`mount -o rdma`): the Rust side of the
//! client class in `sys/xprt.rs`, one [`ClientXprt`] per mount's
//! `struct rpc_xprt`.
//!
//! - Connecting: each (re)connect is a fresh client [`Conn`], with a fresh
//!   RFC 8797 negotiation (Section 4: a reconnect may find other thresholds);
//!   it shows in `connections` with `for=mount`. sunrpc's connect worker
//!   waits for it to be established or to fail, and its errno says whether
//!   sunrpc retries.
//! - Calls: sunrpc's congestion window is the server's credit grant, so a
//!   call is only sent with a credit. Each is planned with the protocol core
//!   for the negotiated thresholds: inline when it fits, else the whole Call
//!   in a Position-Zero Read chunk (RDMA_NOMSG); room for the Reply inline,
//!   else a Reply chunk of the size sunrpc reserved. Chunks are registered
//!   with FRWR before the Send that names them, and kept by XID until the
//!   Reply came (or sunrpc let the call go).
//! - Replies: matched to their call by sunrpc's own lookup under its queue
//!   lock; the Reply is placed in the call's receive buffer, the chunks are
//!   invalidated (LOCAL_INV, unless the server's Send With Invalidate did it)
//!   before the call completes.
//! - A connection that ends (peer gone, device removed, fatal completion) is
//!   reported to sunrpc, which closes the transport and reconnects when a call
//!   needs it, retransmitting what was in flight: chunks of a dead connection
//!   are never reused.

use core::net::SocketAddr;
use core::sync::atomic::{AtomicU64, Ordering};
use kernel::alloc::KVVec;
use kernel::prelude::*;
use kernel::rbtree::RBTree;
use kernel::sync::{Arc, CondVar, Mutex};
use kernel::time::msecs_to_jiffies;
use kernel::{new_condvar, new_mutex};

use super::client::CallChunks;
use super::xprt::short;
use super::{advertised, endpoint, Conn, State, RESOLVE_TIMEOUT_MS};
use crate::proto::chunk::{plan, CallPlan, DdpItem, ReplyPlan, RpcShape};
use crate::proto::config::Advert;
use crate::proto::conn_state::{Closed, ConnState};
use crate::proto::header::{decode, encode_msg, Body, Limits, MsgSpec, ReadSegment, Segment};
use crate::proto::negotiate::{Negotiated, Role};
use crate::proto::xdr::xdr_align;
use crate::stats::{Counter, XprtCounter as X};

use crate::sys::chunk::Chunk;
use crate::sys::errno::{
    econnrefused, econnreset, ehostunreach, emsgsize, enetdown, enetunreach, enobufs, enotconn,
    eremoteio, etimedout,
};
use crate::sys::qp::Qp;
use crate::sys::rdma_cm::{CmId, Net};
use crate::sys::wait::Waited;
use crate::sys::xprt::{
    MountStats, PinnedRqst, RpcRqst, RpcXprt, XprtFactory, XprtOps, BC_SLOTS, SLOTS, XDRBUF_READ,
    XDRBUF_WRITE,
};

/// The largest segment of one chunk (one FRWR registration).
const MAX_SEGMENT: u32 = 2 << 20;
/// How long the connect worker waits for a connection to be established.
const CONNECT_TIMEOUT_MS: u32 = 30_000;

/// Makes the transport of each mount (registered with the class).
pub(crate) struct ClientFactory(pub(crate) Arc<State>);

impl XprtFactory for ClientFactory {
    fn create(&self, x: RpcXprt, net: Net, peer: SocketAddr) -> Result<Arc<dyn XprtOps>> {
        let xprt = Arc::pin_init(
            pin_init!(ClientXprt {
                state: self.0.clone(),
                x,
                net,
                peer,
                counts: MountCounts::default(),
                inner <- new_mutex!(Inner {
                    conn: None,
                    handed: false,
                    regs: RBTree::new(),
                    users: 0,
                    dead: false,
                }),
                idle <- new_condvar!(),
            }),
            GFP_KERNEL,
        )?;
        Ok(Arc::new(ClientOps(xprt), GFP_KERNEL)?)
    }
}

/// The counters of the mount's `xprt: rdma` line (xprtrdma's meaning).
#[derive(Default)]
struct MountCounts {
    read_chunks: AtomicU64,
    write_chunks: AtomicU64,
    reply_chunks: AtomicU64,
    fixup_copy: AtomicU64,
    rdma_request: AtomicU64,
    rdma_reply: AtomicU64,
    failed_marshal: AtomicU64,
    bad_reply: AtomicU64,
    nomsg_calls: AtomicU64,
    registrations: AtomicU64,
    local_inv: AtomicU64,
}

fn add(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

fn get(c: &AtomicU64) -> u64 {
    c.load(Ordering::Relaxed)
}

/// What a call registered for the server: its Read chunk (the data pages of a
/// WRITE, or the whole Call) and its Write chunk (receive pages) or Reply
/// chunk.
struct Regs {
    chunks: CallChunks,
    /// `chunks.reply` is a Write chunk over the receive pages.
    write_list: bool,
}

struct Inner {
    /// The connection in use or being made.
    conn: Option<Arc<Conn>>,
    /// sunrpc was told `conn` is connected: its end must be reported.
    handed: bool,
    /// Chunks of the calls sent on `conn`, by XID, until their Reply.
    regs: RBTree<u32, Regs>,
    /// Receive handlers using the C transport now.
    users: u32,
    /// destroy has begun: nothing may use the C transport any more.
    dead: bool,
}

/// One mount's transport.
#[pin_data]
pub(crate) struct ClientXprt {
    state: Arc<State>,
    x: RpcXprt,
    net: Net,
    peer: SocketAddr,
    counts: MountCounts,
    #[pin]
    inner: Mutex<Inner>,
    /// Signalled when the last user leaves after destroy began.
    #[pin]
    idle: CondVar,
}

/// A Receive handler's right to use the C transport (see [`ClientXprt::enter`]).
struct Entered<'a>(&'a ClientXprt);

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        let mut g = self.0.inner.lock();
        g.users -= 1;
        if g.users == 0 && g.dead {
            self.0.idle.notify_all();
        }
    }
}

/// Why a connection ended, as the errno sunrpc's connect handling expects:
/// the ones it retries (or fails at once for a mount that must not wait).
fn connect_errno(why: Closed) -> Error {
    match why {
        Closed::Rejected => econnrefused(),
        Closed::Unreachable | Closed::RouteError | Closed::RouteFailed => enetunreach(),
        Closed::AddrError | Closed::ResolveFailed => ehostunreach(),
        Closed::ConnectError => econnreset(),
        // Never -ENODEV: sunrpc would fail even a hard mount's calls.
        Closed::DeviceRemoved => enetdown(),
        _ => enotconn(),
    }
}

impl ClientXprt {
    /// Lets a Receive handler use the C transport until the result drops;
    /// `None` once destroy has begun.
    fn enter(&self) -> Option<Entered<'_>> {
        let mut g = self.inner.lock();
        if g.dead {
            return None;
        }
        g.users += 1;
        Some(Entered(self))
    }

    fn connect(this: &Arc<Self>) -> Result {
        this.close();
        this.x.reset_credits();
        let st = &this.state.stats;
        st.inc(Counter::Connects);
        let conn = this
            .state
            .new_conn(Role::Client, advertised(&Advert::default()), None)
            .inspect_err(|_| st.inc(Counter::ErrAlloc))?;
        {
            let mut g = conn.inner.lock();
            g.owner = Some(this.clone());
            g.for_mount = true;
        }
        this.state
            .register(&conn)
            .inspect_err(|_| st.inc(Counter::ErrAlloc))?;
        let cm = match CmId::new_in(conn.clone(), Some(&this.net)) {
            Ok(cm) => cm,
            Err(e) => {
                st.inc(Counter::ErrAlloc);
                conn.close(Closed::CreateFailed, e.to_errno());
                return Err(e);
            }
        };
        {
            let mut g = conn.inner.lock();
            g.peer_addr = Some(this.peer);
            g.state.advance(ConnState::Resolving);
        }
        this.inner.lock().conn = Some(conn.clone());
        if let Err(e) = cm.resolve_addr(&endpoint(&this.peer), RESOLVE_TIMEOUT_MS) {
            st.inc(Counter::ErrResolve);
            conn.close(Closed::ResolveFailed, e.to_errno());
            drop(cm);
            this.forget(&conn);
            return Err(ehostunreach());
        }
        {
            let mut g = conn.inner.lock();
            if g.state.is_closed() {
                drop(g);
                drop(cm);
            } else {
                g.cm = Some(cm);
            }
        }
        match conn.wait_open(CONNECT_TIMEOUT_MS) {
            Ok(()) => {
                let mut g = this.inner.lock();
                // Closed meanwhile (it is no longer ours): sunrpc retries.
                if !g.conn.as_ref().is_some_and(|c| Arc::ptr_eq(c, &conn)) {
                    return Err(enotconn());
                }
                g.handed = true;
                Ok(())
            }
            Err(e) => {
                this.forget(&conn);
                conn.close(Closed::ClosedBySunrpc, 0);
                Err(e)
            }
        }
    }

    /// Drops `conn` as the current connection, if it still is.
    fn forget(&self, conn: &Arc<Conn>) {
        let mut g = self.inner.lock();
        if g.conn.as_ref().is_some_and(|c| Arc::ptr_eq(c, conn)) {
            g.conn = None;
            g.handed = false;
        }
    }

    /// The connection goes (sunrpc's close, or before a new connect): the
    /// chunks of its calls are released while its QP still lives, then it
    /// is closed and torn down.
    fn close(&self) {
        let (conn, regs) = {
            let mut g = self.inner.lock();
            g.handed = false;
            (g.conn.take(), core::mem::take(&mut g.regs))
        };
        drop(regs);
        if let Some(c) = conn {
            c.close(Closed::ClosedBySunrpc, 0);
        }
    }

    /// `conn` ended by itself (its owner link is gone already): if it is the
    /// one sunrpc uses, sunrpc is told, closes the transport and reconnects.
    pub(super) fn closed(&self, conn: &Conn) {
        let regs = {
            let mut g = self.inner.lock();
            let current = g.conn.as_deref().is_some_and(|c| core::ptr::eq(c, conn));
            if !current || g.dead {
                return;
            }
            if g.handed {
                // Under the lock: destroy (which sets `dead` under it) cannot
                // have begun.
                self.x.force_disconnect();
            }
            // Its chunks hold its QP, whose teardown waits for them.
            core::mem::take(&mut g.regs)
        };
        drop(regs);
    }

    /// The connection in use, a handle on its QP and what it negotiated.
    fn current(&self) -> Result<(Arc<Conn>, Qp, Negotiated)> {
        let conn = self.inner.lock().conn.clone().ok_or_else(enotconn)?;
        let (qp, neg) = {
            let g = conn.inner.lock();
            match (&g.cm, &g.negotiated) {
                (Some(cm), Some(n)) if g.state.is_established() => {
                    (cm.qp().ok_or_else(enotconn)?, *n)
                }
                _ => return Err(enotconn()),
            }
        };
        Ok((conn, qp, neg))
    }

    /// The callback service's Reply to a backchannel Call: inline, no
    /// chunks (RFC 8167 Section 4).
    fn send_bc_reply(&self, rq: &RpcRqst<'_>) -> Result {
        let (conn, qp, neg) = self.current()?;
        let len = rq.msg.len();
        let spec = MsgSpec {
            xid: rq.xid,
            credits: BC_SLOTS,
            nomsg: false,
            reads: &[],
            writes: &[],
            reply: None,
        };
        qp.send(None, |buf| {
            let limit = buf.len().min(neg.c2s as usize);
            let buf = &mut buf[..limit];
            let h = encode_msg(buf, &spec).map_err(short)?;
            rq.msg
                .read(0, buf.get_mut(h..h + len).ok_or_else(emsgsize)?)?;
            Ok(h + len)
        })?;
        conn.count(X::BcRepliesSent, 1);
        Ok(())
    }

    fn send(&self, rq: &RpcRqst<'_>) -> Result {
        if rq.bc_reply {
            return self.send_bc_reply(rq);
        }
        let (conn, qp, neg) = self.current()?;
        let (snd, rcv) = (&rq.msg, &rq.rcv);
        let call_len = u32::try_from(snd.len()).map_err(|_| emsgsize())?;
        // Direct data placement as the upper layer marks it (xprtrdma's
        // rules): WRITE's data pages may go in a Read chunk, READ's and
        // READLINK's receive pages may take a Write chunk.
        let shape = RpcShape {
            call_len,
            call_ddp: (rq.ddp && snd.flags() & XDRBUF_WRITE != 0 && snd.page_len() > 0).then(
                || DdpItem {
                    position: snd.head_len(),
                    len: snd.page_len(),
                },
            ),
            max_reply_len: rq.rcvsize,
            reply_ddp_len: (rq.ddp && rcv.flags() & XDRBUF_READ != 0 && rcv.page_len() > 0)
                .then(|| rcv.page_len()),
        };
        let p = plan(neg.c2s, neg.s2c, &shape, MAX_SEGMENT).map_err(|_| emsgsize())?;
        let seg = |c: &Chunk| -> Result<Segment> {
            let r = c.registration().ok_or(EINVAL)?;
            Ok(Segment {
                handle: r.rkey,
                length: c.len(),
                offset: r.iova,
            })
        };
        let mut regs = Regs {
            chunks: CallChunks::default(),
            write_list: false,
        };
        let mut reads = [ReadSegment {
            position: 0,
            segment: Segment {
                handle: 0,
                length: 0,
                offset: 0,
            },
        }];
        let mut nreads = 0;
        // What of the Call goes in the Send, as (offset, length) in it.
        let mut inline = [(0u32, call_len), (0, 0)];
        let nomsg = match p.call {
            CallPlan::Inline => {
                conn.count(X::CallsInline, 1);
                false
            }
            CallPlan::ReadChunk {
                position,
                len,
                segments: 1,
            } => {
                // The data pages in place; in the Send, the head and what
                // follows the data's XDR pad in the tail (RFC 8166 Section
                // 3.5.4: the pad is not sent).
                let mut c = snd.wrap_pages(&qp)?;
                c.register(false)?;
                reads[0] = ReadSegment {
                    position,
                    segment: seg(&c)?,
                };
                nreads = 1;
                regs.chunks.call = Some(c);
                let tail = snd.tail_len();
                let pad = if tail > 3 { tail & 3 } else { tail };
                inline = [
                    (0, snd.head_len()),
                    (snd.head_len() + snd.page_len() + pad, tail - pad),
                ];
                conn.count(X::CallsReadChunk, 1);
                conn.count(X::Registrations, 1);
                add(&self.counts.read_chunks, 1);
                add(&self.counts.registrations, 1);
                add(&self.counts.rdma_request, u64::from(len));
                false
            }
            CallPlan::PositionZero { len, segments: 1 } => {
                // The whole Call, padded with zeros (the chunk starts zeroed).
                let mut c = Chunk::new(&qp, len)?;
                let mut v = KVVec::new();
                v.extend_with(call_len as usize, 0, GFP_KERNEL)?;
                snd.read(0, &mut v)?;
                c.write_at(0, &v)?;
                c.register(false)?;
                reads[0].segment = seg(&c)?;
                nreads = 1;
                regs.chunks.call = Some(c);
                inline = [(0, 0), (0, 0)];
                conn.count(X::CallsLong, 1);
                conn.count(X::Registrations, 1);
                add(&self.counts.read_chunks, 1);
                add(&self.counts.nomsg_calls, 1);
                add(&self.counts.registrations, 1);
                add(&self.counts.rdma_request, u64::from(len));
                true
            }
            _ => return Err(emsgsize()),
        };
        let mut rseg = [Segment {
            handle: 0,
            length: 0,
            offset: 0,
        }];
        let mut writes: [&[Segment]; 1] = [&[]];
        let (mut nwrites, mut reply) = (0, None);
        match p.reply {
            ReplyPlan::Inline => {}
            ReplyPlan::WriteList { segments: 1, .. } => {
                // READ data lands in the receive pages: no copy.
                let mut c = rcv.wrap_pages(&qp)?;
                c.register(true)?;
                rseg[0] = seg(&c)?;
                regs.chunks.reply = Some(c);
                regs.write_list = true;
                conn.count(X::Registrations, 1);
                add(&self.counts.write_chunks, 1);
                add(&self.counts.registrations, 1);
            }
            ReplyPlan::ReplyChunk { len, segments: 1 } => {
                let mut c = Chunk::new(&qp, len)?;
                c.register(true)?;
                rseg[0] = seg(&c)?;
                regs.chunks.reply = Some(c);
                conn.count(X::Registrations, 1);
                add(&self.counts.reply_chunks, 1);
                add(&self.counts.registrations, 1);
            }
            _ => return Err(emsgsize()),
        }
        if regs.write_list {
            writes[0] = &rseg;
            nwrites = 1;
        } else if regs.chunks.reply.is_some() {
            reply = Some(&rseg[..]);
        }
        let spec = MsgSpec {
            xid: rq.xid,
            credits: SLOTS,
            nomsg,
            reads: &reads[..nreads],
            writes: &writes[..nwrites],
            reply,
        };
        // Kept before the Send: its Reply may come at once.
        let old = {
            let mut g = self.inner.lock();
            if !g.conn.as_ref().is_some_and(|c| Arc::ptr_eq(c, &conn)) {
                return Err(enotconn());
            }
            g.regs.try_create_and_insert(rq.xid, regs, GFP_KERNEL)?
        };
        drop(old);
        let mut sent = 0;
        let res = qp.send(None, |buf| {
            let limit = buf.len().min(neg.c2s as usize);
            let buf = &mut buf[..limit];
            let mut at = encode_msg(buf, &spec).map_err(short)?;
            for (off, len) in inline {
                let end = at + len as usize;
                snd.read(off, buf.get_mut(at..end).ok_or_else(emsgsize)?)?;
                at = end;
            }
            sent = at;
            Ok(at)
        });
        if let Err(e) = res {
            let regs = self.inner.lock().regs.remove(&rq.xid);
            drop(regs);
            return Err(e);
        }
        conn.touch();
        conn.count(X::CallsSent, 1);
        conn.count(X::BytesSend, sent as u64);
        Ok(())
    }

    /// A Receive on `conn`, the current connection: a Reply to one of the
    /// mount's calls.
    pub(super) fn received(&self, conn: &Conn, data: &[u8], invalidated: Option<u32>) {
        let Some(_entered) = self.enter() else {
            return;
        };
        let h = match decode(data, &Limits::DEFAULT) {
            Ok(h) => h,
            Err((xid, _)) => {
                conn.count(X::HeaderErrors, 1);
                add(&self.counts.bad_reply, 1);
                // A header we cannot read fails its call, if we know which.
                if let Some(rq) = xid.and_then(|x| self.x.lookup(x)) {
                    self.release(conn, xid.unwrap_or(0), invalidated);
                    rq.complete(Err(EIO));
                }
                return;
            }
        };
        if let Body::Msg(c) = &h.body {
            let rpc = &data[h.len..];
            // A backchannel Call (RFC 8167 Section 4): no chunks, the RPC
            // header's XID repeats the transport header's, and it is a CALL.
            let call = c.read_list().next().is_none()
                && c.write_list().next().is_none()
                && c.reply_chunk().is_none()
                && rpc.get(..4) == Some(&h.xid.to_be_bytes()[..])
                && rpc.get(4..8) == Some(&[0u8; 4][..]);
            if call {
                conn.count(X::BcCallsReceived, 1);
                if self.x.bc_call(rpc).is_err() {
                    // More than we offered, or no memory: as xprtrdma, the
                    // connection goes (the server retransmits after).
                    conn.count(X::BcOverflows, 1);
                    self.x.force_disconnect();
                }
                return;
            }
        }
        let Some(mut rq) = self.x.lookup(h.xid) else {
            conn.count(X::RepliesUnmatched, 1);
            return;
        };
        // As xprtrdma: 0 means 1, and never more than we asked for.
        self.x.set_credits(h.credits.clamp(1, SLOTS));
        conn.count(X::RepliesReceived, 1);
        let mut regs = self.inner.lock().regs.remove(&h.xid);
        let res = self.place(conn, &mut rq, &h, data, regs.as_mut());
        if res.is_err() {
            add(&self.counts.bad_reply, 1);
        }
        // Invalidated before the call completes: the server can no longer
        // touch memory the RPC layer is about to read or reuse.
        if let Some(r) = regs {
            let local = conn.release_chunks(r.chunks, invalidated);
            add(&self.counts.local_inv, u64::from(local));
        }
        rq.complete(res);
    }

    /// Puts the Reply where sunrpc reads it; its length.
    fn place(
        &self,
        conn: &Conn,
        rq: &mut PinnedRqst,
        h: &crate::proto::header::Header<'_>,
        data: &[u8],
        regs: Option<&mut Regs>,
    ) -> Result<u32> {
        match h.body {
            Body::Error(_) => {
                conn.count(X::RdmaErrorReceived, 1);
                Err(eremoteio())
            }
            Body::Msg(c) => {
                let rpc = &data[h.len..];
                let len = u32::try_from(rpc.len()).map_err(|_| EIO)?;
                let written = c.write_list().map(|w| w.total_len()).sum::<u64>();
                if written == 0 {
                    // All inline: head, then pages, then tail, in order.
                    rq.write(0, rpc)?;
                    let layout = rq.layout();
                    let in_pages = len.saturating_sub(layout.head_len()).min(layout.page_len());
                    add(&self.counts.fixup_copy, u64::from(in_pages));
                    conn.count(X::RepliesInline, 1);
                    return Ok(len);
                }
                // The payload is in the receive pages already; only a call
                // that offered a Write chunk, and no more than it offered,
                // may get one (RFC 8166 Section 3.4.6).
                let chunk = regs
                    .filter(|r| r.write_list)
                    .and_then(|r| r.chunks.reply.as_ref());
                let written = u32::try_from(written).map_err(|_| EIO)?;
                if c.write_list().count() != 1 || chunk.map_or(true, |k| written > k.len()) {
                    conn.count(X::ChunkErrors, 1);
                    return Err(EIO);
                }
                // What precedes the payload goes to the head, which ends
                // there; anything after it to the tail (xprtrdma's
                // rpcrdma_inline_fixup).
                let (head, pages) = {
                    let l = rq.layout();
                    (l.head_len(), l.page_len())
                };
                if len < head {
                    rq.write(0, rpc)?;
                    rq.trim_head(len);
                } else {
                    let (before, after) = rpc.split_at(head as usize);
                    rq.write(0, before)?;
                    rq.write(head + pages, after)?;
                }
                conn.count(X::RepliesWriteList, 1);
                add(&self.counts.rdma_reply, u64::from(written));
                let padded = xdr_align(written as usize).ok_or(EIO)?;
                u32::try_from(rpc.len() + padded).map_err(|_| EIO)
            }
            Body::NoMsg(c) => {
                let written = c.reply_chunk().map(|s| s.total_len()).ok_or(EIO)?;
                let chunk = regs
                    .filter(|r| !r.write_list)
                    .and_then(|r| r.chunks.reply.as_mut())
                    .ok_or(EIO)?;
                let written = u32::try_from(written).map_err(|_| EIO)?;
                if written > chunk.len() {
                    conn.count(X::ChunkErrors, 1);
                    return Err(EIO);
                }
                let mut v = KVVec::new();
                v.extend_with(written as usize, 0, GFP_KERNEL)?;
                chunk.read_at(0, &mut v)?;
                rq.write(0, &v)?;
                conn.count(X::RepliesReplyChunk, 1);
                add(&self.counts.rdma_reply, u64::from(written));
                Ok(written)
            }
        }
    }

    /// Releases the chunks of call `xid`, if still held.
    fn release(&self, conn: &Conn, xid: u32, invalidated: Option<u32>) {
        let regs = self.inner.lock().regs.remove(&xid);
        if let Some(r) = regs {
            let local = conn.release_chunks(r.chunks, invalidated);
            add(&self.counts.local_inv, u64::from(local));
        }
    }
}

/// What the class calls: the mount's [`ClientXprt`].
struct ClientOps(Arc<ClientXprt>);

impl XprtOps for ClientOps {
    fn connect(&self) -> i32 {
        match ClientXprt::connect(&self.0) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    fn close(&self) {
        self.0.close();
    }

    fn send(&self, rq: &RpcRqst<'_>) -> i32 {
        match self.0.send(rq) {
            Ok(()) => 0,
            Err(e) if e == enotconn() => e.to_errno(),
            // No Send buffer or memory now: sunrpc tries again later.
            Err(e) if e == EBUSY || e == ENOMEM => enobufs().to_errno(),
            Err(e) => {
                add(&self.0.counts.failed_marshal, 1);
                if e == emsgsize() {
                    e.to_errno()
                } else {
                    EIO.to_errno()
                }
            }
        }
    }

    fn buf_free(&self, xid: u32) {
        let chunks = self.0.inner.lock().regs.remove(&xid);
        drop(chunks);
    }

    fn stats(&self, st: &mut MountStats) {
        let c = &self.0.counts;
        st.read_chunk_count = get(&c.read_chunks);
        st.write_chunk_count = get(&c.write_chunks);
        st.reply_chunk_count = get(&c.reply_chunks);
        st.fixup_copy_count = get(&c.fixup_copy);
        st.total_rdma_request = get(&c.rdma_request);
        st.total_rdma_reply = get(&c.rdma_reply);
        st.failed_marshal_count = get(&c.failed_marshal);
        st.bad_reply_count = get(&c.bad_reply);
        st.nomsg_call_count = get(&c.nomsg_calls);
        st.mrs_allocated = get(&c.registrations);
        st.local_inv_needed = get(&c.local_inv);
    }

    fn bc_maxpayload(&self) -> u32 {
        // What one Send carries either way, as xprtrdma: the smaller
        // threshold, at most a page, less the transport header.
        let page = kernel::page::PAGE_SIZE as u32;
        let limit = match self.0.current() {
            Ok((_, _, n)) => n.c2s.min(n.s2c),
            Err(_) => crate::proto::pvt_data::PrivateData::DEFAULT.send_size,
        };
        limit
            .min(page)
            .saturating_sub(crate::proto::header::MIN_MSG_LEN as u32)
    }

    fn destroy(&self) {
        self.0.close();
        let mut g = self.0.inner.lock();
        g.dead = true;
        while g.users > 0 {
            self.0.idle.wait(&mut g);
        }
    }
}

impl Conn {
    /// Waits until the connection is established (`Ok`) or has ended, at most
    /// `ms` milliseconds; the error is what sunrpc should see.
    fn wait_open(&self, ms: u32) -> Result {
        let mut left = msecs_to_jiffies(ms);
        let mut g = self.inner.lock();
        loop {
            match g.state {
                ConnState::Established => return Ok(()),
                ConnState::Closed(why, _) => return Err(connect_errno(why)),
                _ => {}
            }
            let (g2, res) = self.cv.wait_timeout(&self.inner, g, left);
            g = g2;
            match res {
                Waited::Woken(l) => left = l,
                Waited::Timeout | Waited::Killed => return Err(etimedout()),
            }
        }
    }
}
