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
//!   before the call completes. LOCAL_INVs are posted without waiting; the
//!   last one's completion places the Reply and completes the call
//!   ([`AfterInv`]), so the Receive handler goes on to the next Reply.
//! - A connection that ends (peer gone, device removed, fatal completion) is
//!   reported to sunrpc, which closes the transport and reconnects when a call
//!   needs it, retransmitting what was in flight: chunks of a dead connection
//!   are never reused.

use core::net::SocketAddr;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use kernel::prelude::*;
use kernel::rbtree::RBTree;
use kernel::sync::{Arc, CondVar, Mutex, SpinLock};
use kernel::time::msecs_to_jiffies;
use kernel::{new_condvar, new_mutex, new_spinlock};

use super::requester::{self, CallSource, Registrar, Regs, ReplyKind};
use super::xprt::short;
use super::{advertised, endpoint, Conn, State, Upper, RESOLVE_TIMEOUT_MS};
use crate::proto::chunk::{CallPlan, DdpItem, Plan, ReplyPlan, RpcShape};
use crate::proto::config::Advert;
use crate::proto::conn_state::{Closed, ConnState};
use crate::proto::header::{decode, encode_msg, Body, Limits, MsgSpec};
use crate::proto::negotiate::Negotiated;
use crate::proto::xdr::xdr_align;
use crate::stats::{Counter, XprtCounter as X};

use crate::sys::chunk::{invalidate_async, Chunk, ChunkLists, InvAsync, Invalidated};
use crate::sys::qp::{Qp, RecvBuf, SEND_BATCH};
use crate::sys::rdma_cm::{CmId, Completion, Net};
use crate::sys::trace;
use crate::sys::wait::Waited;
use crate::sys::xprt::{
    MountStats, PinnedRqst, RpcRqst, RpcXprt, XprtFactory, XprtOps, BC_SLOTS, SLOTS, XDRBUF_READ,
    XDRBUF_WRITE,
};

/// Receives a mount's connection posts at most: one per call in flight, one
/// per backchannel Call the server may send, and the one being handled (as
/// xprtrdma, so that a full window and callbacks never meet an RNR).
pub(super) const MOUNT_RECV_DEPTH: u32 = SLOTS + BC_SLOTS + 1;
/// Calls in flight a new connection's Receives cover: more are posted when
/// the server grants more credits (as xprtrdma's rpcrdma_post_recvs), so a
/// mount of a server that grants few costs few buffers.
const MOUNT_INITIAL_CALLS: u32 = 32;
/// Receives a mount's connection posts at first.
pub(super) const MOUNT_RECV_INITIAL: u32 = MOUNT_INITIAL_CALLS + BC_SLOTS + 1;
/// Send buffers of a mount's connection: one per call or callback Reply in
/// flight, and the ones that may wait unsignaled for the next signaled Send.
pub(super) const MOUNT_SEND_DEPTH: u32 = SLOTS + BC_SLOTS + SEND_BATCH;
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
                // RFC 8797's default (1 KiB) until a connection says more.
                bc_max: AtomicU32::new(
                    crate::proto::pvt_data::PrivateData::DEFAULT.send_size
                        - crate::proto::header::MIN_MSG_LEN as u32
                ),
                connects: AtomicU32::new(0),
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
    /// MRs the mount's registrations had to allocate (the rest were recycled).
    mrs_allocated: AtomicU64,
    local_inv: AtomicU64,
}

fn add(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

fn get(c: &AtomicU64) -> u64 {
    c.load(Ordering::Relaxed)
}

/// A mount transport's changing state, under its mutex ([`ClientXprt`]'s
/// `inner`).
///
/// # Invariants
///
/// - `regs` only holds chunks registered on `conn`'s QP: whoever replaces or
///   clears `conn` takes `regs` with it (their release waits for that QP's
///   completions, so they are dropped after the lock).
/// - An entry marked `deferred` has no chunks: they are with its Reply's
///   LOCAL_INVs ([`AfterInv`]), which forgets the entry when it runs.
/// - `users` counts [`Entered`] and [`EnteredArc`] guards; once `dead` is
///   set none is added, and destroy returns when `users` is 0.
struct Inner {
    /// The connection in use or being made.
    conn: Option<Arc<Conn>>,
    /// sunrpc was told `conn` is connected: its end must be reported.
    handed: bool,
    /// Chunks of the calls sent on `conn`, by XID, until their Reply (and,
    /// marked `deferred`, while the Reply waits for its LOCAL_INVs).
    regs: RBTree<u32, Regs>,
    /// Receive handlers using the C transport now.
    users: u32,
    /// destroy has begun: nothing may use the C transport any more.
    dead: bool,
}

impl Inner {
    /// Whether `conn` is the connection in use.
    fn is_current(&self, conn: &Conn) -> bool {
        self.conn.as_deref().is_some_and(|c| core::ptr::eq(c, conn))
    }
}

/// One mount's transport. Fields are immutable (`state`, `x`, `net`,
/// `peer`), atomic (`counts`, `bc_max`, `connects`), or under `inner`'s
/// mutex ([`Inner`]); `idle` is waited on with `inner`'s guard.
#[pin_data]
pub(crate) struct ClientXprt {
    /// The module-wide state its connections are registered in.
    state: Arc<State>,
    /// sunrpc's transport, valid until destroy returns.
    x: RpcXprt,
    /// The network namespace of the mount.
    net: Net,
    /// The server.
    peer: SocketAddr,
    /// What mountstats shows.
    counts: MountCounts,
    /// The largest backchannel message, from the last connection's
    /// thresholds (see `connect`).
    bc_max: AtomicU32,
    /// Connect attempts so far (the first is traced `connect`, the others
    /// `reconnect`).
    connects: AtomicU32,
    #[pin]
    inner: Mutex<Inner>,
    /// Signalled when the last user leaves after destroy began.
    #[pin]
    idle: CondVar,
}

/// What a mount's connection keeps for the mount ([`super::Upper::Mount`]):
/// the transport it was made for. The link goes when the connection closes
/// (it would otherwise keep the transport, which keeps the connection).
#[pin_data]
pub(super) struct MountSide {
    #[pin]
    owner: SpinLock<Option<Arc<ClientXprt>>>,
}

impl MountSide {
    fn new(owner: Arc<ClientXprt>) -> Result<Pin<KBox<Self>>> {
        KBox::pin_init(
            pin_init!(MountSide {
                owner <- new_spinlock!(Some(owner)),
            }),
            GFP_KERNEL,
        )
    }

    /// A Receive completed on `conn`: the mount's, if it still has one.
    pub(super) fn received(&self, conn: &Conn, qp: &Qp, wc: &Completion<'_>) {
        let owner = self.owner.lock().clone();
        match owner {
            Some(o) => o.received(conn, qp, wc),
            // The mount let go: nothing waits for it.
            None => conn.count(X::RepliesUnmatched, 1),
        }
    }

    /// `conn` closed: the mount's transport learns it, and lets go of it.
    pub(super) fn closed(&self, conn: &Conn) {
        let owner = self.owner.lock().take();
        if let Some(o) = owner {
            o.closed(conn);
        }
    }
}

/// A Receive handler's right to use the C transport (see [`ClientXprt::enter`]).
struct Entered<'a>(&'a ClientXprt);

/// The same right, held by a call that waits for its LOCAL_INVs
/// ([`AfterInv`]): destroy waits for it too.
struct EnteredArc(Arc<ClientXprt>);

impl Drop for EnteredArc {
    fn drop(&mut self) {
        drop(Entered(&self.0));
    }
}

/// A Reply whose call's chunks are being invalidated: placed and completed
/// when the last LOCAL_INV completes ([`invalidate_async`], which holds the
/// chunks meanwhile), from the CQ's work. Its Receive buffer and the pinned
/// request are kept until then (`Some` until [`Invalidated::invalidated`]);
/// the call's entry in `regs` stays, marked deferred, so that a second
/// Reply to it is not taken.
struct AfterInv {
    x: Arc<ClientXprt>,
    conn: Arc<Conn>,
    xid: u32,
    rq: Option<PinnedRqst>,
    buf: Option<RecvBuf>,
    write_list: bool,
    invalidated: Option<u32>,
    _user: EnteredArc,
}

impl Invalidated for AfterInv {
    fn invalidated(&mut self, chunks: ChunkLists, status: i32) {
        let [call, reply] = chunks;
        let regs = Regs {
            call,
            reply,
            write_list: self.write_list,
            deferred: false,
        };
        let (Some(rq), Some(buf)) = (self.rq.take(), self.buf.take()) else {
            return;
        };
        let current = self.x.undefer(&self.conn, self.xid);
        if status != 0 || !current {
            // A flushed LOCAL_INV (the QP went to the error state: its MR is
            // deregistered at release), or a connection sunrpc closed
            // meanwhile: as xprtrdma, the call is not completed from here;
            // it is sent again on the next connection.
            self.x.release_regs(&self.conn, regs, self.invalidated);
            drop(rq);
            return;
        }
        let data = buf.data();
        match decode(data, &Limits::DEFAULT) {
            Ok(h) => self
                .x
                .finish(&self.conn, rq, &h, data, Some(regs), self.invalidated),
            // It decoded when it arrived, and the buffer was kept.
            Err(_) => {
                self.x.release_regs(&self.conn, regs, self.invalidated);
                rq.complete(Err(EIO));
            }
        }
    }
}

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
        Closed::Rejected => ECONNREFUSED,
        Closed::Unreachable | Closed::RouteError | Closed::RouteFailed => ENETUNREACH,
        Closed::AddrError | Closed::ResolveFailed => EHOSTUNREACH,
        Closed::ConnectError => ECONNRESET,
        // Never -ENODEV: sunrpc would fail even a hard mount's calls.
        Closed::DeviceRemoved => ENETDOWN,
        _ => ENOTCONN,
    }
}

impl ClientXprt {
    /// [`ClientXprt::enter`], for a holder that outlives the handler.
    fn enter_owned(self: &Arc<Self>) -> Option<EnteredArc> {
        let e = self.enter()?;
        core::mem::forget(e);
        Some(EnteredArc(self.clone()))
    }

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

    /// sunrpc's connect: a fresh connection (and RFC 8797 negotiation),
    /// traced as `connect` the first time and `reconnect` after, with the
    /// connection's id and the attempt's status.
    fn connect(this: &Arc<Self>) -> Result {
        let again = this.connects.fetch_add(1, Ordering::Relaxed) > 0;
        let mut id = 0;
        let res = Self::try_connect(this, &mut id);
        let what = if again { "reconnect" } else { "connect" };
        trace::xprt(id, what, 0, res.err().map_or(0, |e| e.to_errno()));
        res
    }

    fn try_connect(this: &Arc<Self>, id: &mut u32) -> Result {
        this.close();
        let st = &this.state.stats;
        st.inc(Counter::Connects);
        let conn = MountSide::new(this.clone())
            .and_then(|m| {
                this.state
                    .new_conn(Upper::Mount(m), advertised(&Advert::default()), None)
            })
            .inspect_err(|_| st.inc(Counter::ErrAlloc))?;
        *id = conn.id;
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
            return Err(EHOSTUNREACH);
        }
        // Closed meanwhile: the id goes.
        conn.adopt_id(cm);
        match conn.wait_open(CONNECT_TIMEOUT_MS) {
            Ok(()) => {
                let mut g = this.inner.lock();
                // Closed meanwhile (it is no longer ours): sunrpc retries.
                if !g.is_current(&conn) {
                    return Err(ENOTCONN);
                }
                g.handed = true;
                drop(g);
                // bc_maxpayload is asked under rcu_read_lock(): it reads
                // this, never a lock. What one Send carries either way, as
                // xprtrdma: the smaller threshold, at most a page, less the
                // transport header.
                let neg = conn.inner.lock().negotiated;
                if let Some(n) = neg {
                    let page = kernel::page::PAGE_SIZE as u32;
                    let max = n.c2s.min(n.s2c).min(page);
                    this.bc_max.store(
                        max.saturating_sub(crate::proto::header::MIN_MSG_LEN as u32),
                        Ordering::Relaxed,
                    );
                }
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
        if g.is_current(conn) {
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
            let current = g.is_current(conn);
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

    /// The connection in use, a handle on its QP, what it negotiated and the
    /// pages one registration may cover on its device.
    fn current(&self) -> Result<(Arc<Conn>, Qp, Negotiated, u32)> {
        let conn = self.inner.lock().conn.clone().ok_or(ENOTCONN)?;
        let (qp, neg, pages) = {
            let g = conn.inner.lock();
            match (g.cm.get(), &g.negotiated) {
                (Some(cm), Some(n)) if g.state.is_established() => {
                    (cm.qp().ok_or(ENOTCONN)?, *n, g.fr_pages)
                }
                _ => return Err(ENOTCONN),
            }
        };
        Ok((conn, qp, neg, pages))
    }

    /// The callback service's Reply to a backchannel Call: inline, no
    /// chunks (RFC 8167 Section 4).
    fn send_bc_reply(&self, rq: &RpcRqst<'_>) -> Result {
        let (conn, qp, neg, _) = self.current()?;
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
            rq.msg.read(0, buf.get_mut(h..h + len).ok_or(EMSGSIZE)?)?;
            Ok(h + len)
        })?;
        conn.count(X::BcRepliesSent, 1);
        Ok(())
    }

    /// Releases a call's registrations: LOCAL_INV for each, but the one the
    /// server's Send With Invalidate invalidated (`invalidated`).
    fn release_regs(&self, conn: &Conn, regs: Regs, invalidated: Option<u32>) {
        let local = conn.release_chunks(regs.into_chunks(), invalidated);
        add(&self.counts.local_inv, u64::from(local));
    }

    fn send(&self, rq: &RpcRqst<'_>) -> Result {
        if rq.bc_reply {
            return self.send_bc_reply(rq);
        }
        let (conn, qp, neg, fr_pages) = self.current()?;
        let src = MountCall(rq);
        let p = requester::plan(&neg, fr_pages, &src.shape())?;
        let mut regs = Regs::default();
        let prepared = requester::prepare(&conn, &qp, fr_pages, &src, &p, &mut regs);
        // The MRs as debugfs counted them, also for a call that failed here.
        add(&self.counts.mrs_allocated, u64::from(regs.new_mrs()));
        let wire = match prepared {
            Ok(w) => w,
            Err(e) => {
                self.release_regs(&conn, regs, None);
                return Err(e);
            }
        };
        self.count_plan(rq, &p);
        // Chunks are kept by XID before the Send: its Reply may come at
        // once. A call without chunks keeps nothing.
        let kept = !regs.call.is_empty() || !regs.reply.is_empty();
        if kept {
            let old = {
                let mut g = self.inner.lock();
                if !g.is_current(&conn) {
                    return Err(ENOTCONN);
                }
                g.regs.try_create_and_insert(rq.xid, regs, GFP_KERNEL)?
            };
            drop(old);
        }
        if let Err(e) = requester::post(&conn, &qp, &neg, &src, SLOTS, &wire) {
            if kept {
                let regs = self.inner.lock().regs.remove(&rq.xid);
                drop(regs);
            }
            return Err(e);
        }
        // Calls of this connection waiting for their Reply, this one included.
        let waiting = conn
            .xs
            .get(X::CallsSent)
            .saturating_sub(conn.xs.get(X::RepliesReceived));
        conn.raise(X::CallsInFlightMax, waiting);
        Ok(())
    }

    /// Counts for mountstats what the plan `p` of `rq` registered.
    fn count_plan(&self, rq: &RpcRqst<'_>, p: &Plan) {
        let c = &self.counts;
        match p.call {
            CallPlan::Inline => {}
            CallPlan::ReadChunk { .. } => {
                add(&c.read_chunks, 1);
                add(&c.rdma_request, u64::from(rq.msg.page_len()));
            }
            CallPlan::PositionZero { len, .. } => {
                add(&c.read_chunks, 1);
                add(&c.nomsg_calls, 1);
                add(&c.rdma_request, u64::from(len));
            }
        }
        match p.reply {
            ReplyPlan::Inline => {}
            ReplyPlan::WriteList { .. } => add(&c.write_chunks, 1),
            ReplyPlan::ReplyChunk { .. } => add(&c.reply_chunks, 1),
        }
    }

    /// A Receive on `conn`, the current connection: a Reply to one of the
    /// mount's calls.
    pub(super) fn received(self: &Arc<Self>, conn: &Conn, qp: &Qp, wc: &Completion<'_>) {
        let (data, invalidated) = (wc.data, wc.invalidated);
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
                match self.x.bc_call(rpc) {
                    Ok(()) => {}
                    // The transport is being destroyed (no reference left
                    // to take): nothing to disconnect, and its autoclose
                    // work must not be queued again.
                    Err(e) if e == ENOTCONN => {}
                    // More than we offered, or no memory: as xprtrdma, the
                    // connection goes (the server retransmits after).
                    Err(_) => {
                        conn.count(X::BcOverflows, 1);
                        self.x.force_disconnect();
                    }
                }
                return;
            }
        }
        let Some(rq) = self.x.lookup(h.xid) else {
            conn.count(X::RepliesUnmatched, 1);
            return;
        };
        // As xprtrdma: 0 means 1, and never more than we asked for. A Receive
        // for each call the grant lets in flight is posted before the window
        // opens.
        let credits = h.credits.clamp(1, SLOTS);
        let receives = qp.recv_buffers().posting;
        let want = credits + BC_SLOTS + 1;
        // Without memory for more, the window stays what the Receives cover.
        if want > receives {
            if let Ok(n) = qp.grow_recv(want - receives) {
                conn.count(X::ReceivesAdded, u64::from(n));
            }
        }
        let receives = qp.recv_buffers().posting;
        let window = credits.min(receives.saturating_sub(BC_SLOTS + 1)).max(1);
        // A Reply on a connection sunrpc is closing (its chunks are gone or
        // going): the call is left to be sent again on the next one, whose
        // grant starts afresh (dropping `rq` unpins it, nothing more). Under
        // the lock sunrpc's close takes first: once the connection is no
        // longer current its credits are gone (reset_cong).
        // A call whose chunks are left to invalidate (LOCAL_INV) completes
        // when the last one does (xprtrdma's frwr_unmap_async): this
        // handler goes on to the next Reply instead of waiting, the Reply
        // stays in its Receive buffer, and the call's entry stays, marked,
        // until then.
        let (regs, current) = {
            let mut g = self.inner.lock();
            if !g.is_current(conn) {
                conn.count(X::RepliesUnmatched, 1);
                return;
            }
            let deferred = match g.regs.get_mut(&h.xid) {
                // A second Reply to a call whose first is being finished.
                Some(r) if r.deferred => {
                    conn.count(X::RepliesUnmatched, 1);
                    return;
                }
                Some(r) if !r.invalidated_by(invalidated) => {
                    let chunks = core::mem::take(r);
                    r.deferred = true;
                    Some(chunks)
                }
                _ => None,
            };
            self.x.set_credits(window);
            let regs = deferred.or_else(|| g.regs.remove(&h.xid));
            (regs, g.conn.clone())
        };
        // The grant, as `xprt` shows the connection's credits.
        conn.set_credits(credits);
        conn.count(X::RepliesReceived, 1);
        let (rq, regs) = match regs {
            Some(r) if !r.invalidated_by(invalidated) => {
                match self.defer(conn, current, rq, wc, r, invalidated, h.xid) {
                    Ok(()) => return,
                    // Without what the wait needs, the call finishes here,
                    // its release waiting for each LOCAL_INV.
                    Err((rq, r)) => {
                        self.undefer(conn, h.xid);
                        (rq, Some(r))
                    }
                }
            }
            r => (rq, r),
        };
        self.finish(conn, rq, &h, data, regs, invalidated);
    }

    /// Forgets the deferred entry of call `xid` (see [`AfterInv`]); whether
    /// `conn` is still the connection in use.
    fn undefer(&self, conn: &Conn, xid: u32) -> bool {
        let mut g = self.inner.lock();
        let old = match g.regs.get(&xid) {
            Some(r) if r.deferred => g.regs.remove(&xid),
            _ => None,
        };
        let current = g.is_current(conn);
        drop(g);
        drop(old);
        current
    }

    /// Hands the call of `rq` to its LOCAL_INVs' completion ([`AfterInv`]),
    /// keeping the Reply's Receive buffer; gives `rq` and `regs` back if it
    /// cannot.
    #[allow(clippy::too_many_arguments)]
    fn defer(
        self: &Arc<Self>,
        conn: &Conn,
        current: Option<Arc<Conn>>,
        rq: PinnedRqst,
        wc: &Completion<'_>,
        mut regs: Regs,
        invalidated: Option<u32>,
        xid: u32,
    ) -> core::result::Result<(), (PinnedRqst, Regs)> {
        let (Some(owner), Ok(slot)) = (current, KBox::<AfterInv>::new_uninit(GFP_KERNEL)) else {
            return Err((rq, regs));
        };
        let Some(user) = self.enter_owned() else {
            return Err((rq, regs));
        };
        // Last: once kept, the buffer is the task's.
        let Some(buf) = wc.keep() else {
            return Err((rq, regs));
        };
        // The chunk the server invalidated takes no LOCAL_INV.
        regs.spare(invalidated);
        let write_list = regs.write_list;
        let chunks = [
            core::mem::take(&mut regs.call),
            core::mem::take(&mut regs.reply),
        ];
        let task = KBox::write(
            slot,
            AfterInv {
                x: self.clone(),
                conn: owner,
                xid,
                rq: Some(rq),
                buf: Some(buf),
                write_list,
                invalidated,
                _user: user,
            },
        );
        match invalidate_async(task, chunks) {
            InvAsync::Taken(n) => {
                self.count_local_inv(conn, n);
                Ok(())
            }
            // No memory for the batch: the task runs now, in this Receive
            // work, and its release posts each LOCAL_INV and waits for it.
            InvAsync::Refused(mut task, chunks) => {
                task.invalidated(chunks, 0);
                Ok(())
            }
        }
    }

    fn count_local_inv(&self, conn: &Conn, n: u32) {
        conn.count(X::LocalInvalidations, u64::from(n));
        add(&self.counts.local_inv, u64::from(n));
    }

    /// Places the Reply of `rq` and completes the call; `regs` are its
    /// chunks, released (invalidated first if need be) before anything is
    /// written into the RPC's pages.
    fn finish(
        &self,
        conn: &Conn,
        mut rq: PinnedRqst,
        h: &crate::proto::header::Header<'_>,
        data: &[u8],
        regs: Option<Regs>,
        invalidated: Option<u32>,
    ) {
        let mut held = Held {
            x: self,
            conn,
            regs,
            invalidated,
        };
        let res = self.place(&mut rq, h, data, &mut held);
        if res.is_err() {
            add(&self.counts.bad_reply, 1);
        }
        // Invalidated before the call completes: the server can no longer
        // touch memory the RPC layer is about to read or reuse.
        held.release();
        rq.complete(res);
    }

    /// Puts the Reply where sunrpc reads it; its length. Nothing is written
    /// into the RPC's pages before the call's registrations are released
    /// (invalidated and unmapped, [`Held::release`]): until then the server
    /// may still write there, and unmapping could copy a bounce buffer back
    /// over what was placed (xprtrdma likewise invalidates first).
    fn place(
        &self,
        rq: &mut PinnedRqst,
        h: &crate::proto::header::Header<'_>,
        data: &[u8],
        held: &mut Held<'_>,
    ) -> Result<u32> {
        let conn = held.conn;
        // As xprtrdma, an RDMA_ERROR or a Reply that breaks the protocol
        // fails the call with EIO.
        let kind = requester::reply_kind(conn, h).map_err(|_| EIO)?;
        if let Some(regs) = &held.regs {
            regs.check(conn, kind).map_err(|_| EIO)?;
        } else if kind != ReplyKind::Inline {
            conn.count(X::ChunkErrors, 1);
            return Err(EIO);
        }
        let placed = self.place_kind(rq, kind, &data[h.len..], held);
        if placed.is_ok() {
            requester::count_kind(conn, kind);
        }
        placed
    }

    /// [`ClientXprt::place`] for a Reply of `kind` whose RPC part in the
    /// Send is `rpc`.
    fn place_kind(
        &self,
        rq: &mut PinnedRqst,
        kind: ReplyKind,
        rpc: &[u8],
        held: &mut Held<'_>,
    ) -> Result<u32> {
        let len = u32::try_from(rpc.len()).map_err(|_| EIO)?;
        match kind {
            ReplyKind::Inline => {
                // All inline: head, then pages, then tail, in order.
                held.release();
                rq.write(0, rpc)?;
                let layout = rq.layout();
                let in_pages = len.saturating_sub(layout.head_len()).min(layout.page_len());
                add(&self.counts.fixup_copy, u64::from(in_pages));
                Ok(len)
            }
            ReplyKind::WriteList { written } => {
                // The payload is in the receive pages already. What precedes
                // it goes to the head, which ends there; anything after it to
                // the tail (xprtrdma's rpcrdma_inline_fixup).
                let (head, pages) = {
                    let l = rq.layout();
                    (l.head_len(), l.page_len())
                };
                held.release();
                if len < head {
                    rq.write(0, rpc)?;
                    rq.trim_head(len);
                } else {
                    let (before, after) = rpc.split_at(head as usize);
                    rq.write(0, before)?;
                    rq.write(head + pages, after)?;
                }
                add(&self.counts.rdma_reply, u64::from(written));
                let padded = xdr_align(written as usize).ok_or(EIO)?;
                u32::try_from(rpc.len() + padded).map_err(|_| EIO)
            }
            ReplyKind::ReplyChunk { written } => {
                let v = held.regs.as_mut().ok_or(EIO)?.read_reply_chunk(written)?;
                held.release();
                rq.write(0, &v)?;
                add(&self.counts.rdma_reply, u64::from(written));
                Ok(written)
            }
        }
    }

    /// Releases the chunks of call `xid`, if still held.
    fn release(&self, conn: &Conn, xid: u32, invalidated: Option<u32>) {
        let regs = self.inner.lock().regs.remove(&xid);
        if let Some(r) = regs {
            self.release_regs(conn, r, invalidated);
        }
    }
}

/// A mount's Call, as the requester pipeline sends it: sunrpc's send
/// buffer, with direct data placement as the upper layer marks it
/// (xprtrdma's rules): WRITE's data pages may go in a Read chunk, READ's and
/// READLINK's receive pages may take a Write chunk, both in place.
struct MountCall<'a, 'b>(&'a RpcRqst<'b>);

impl CallSource for MountCall<'_, '_> {
    fn xid(&self) -> u32 {
        self.0.xid
    }

    fn shape(&self) -> RpcShape {
        let rq = self.0;
        let (snd, rcv) = (&rq.msg, &rq.rcv);
        RpcShape {
            call_len: u32::try_from(snd.len()).unwrap_or(u32::MAX),
            call_ddp: (rq.ddp && snd.flags() & XDRBUF_WRITE != 0 && snd.page_len() > 0).then(
                || DdpItem {
                    position: snd.head_len(),
                    len: snd.page_len(),
                },
            ),
            max_reply_len: rq.rcvsize,
            reply_ddp_len: (rq.ddp && rcv.flags() & XDRBUF_READ != 0 && rcv.page_len() > 0)
                .then(|| rcv.page_len()),
        }
    }

    fn read(&self, off: u32, out: &mut [u8]) -> Result {
        self.0.msg.read(off, out)
    }

    fn ddp_call(&self, reg: &Registrar<'_>, _item: DdpItem, out: &mut KVec<Chunk>) -> Result {
        // The item is the send buffer's pages (see `shape`).
        reg.wrap(out, &self.0.msg, false)
    }

    fn ddp_reply(&self, reg: &Registrar<'_>, _len: u32, out: &mut KVec<Chunk>) -> Result {
        reg.wrap(out, &self.0.rcv, true)
    }
}

/// A Reply's call registrations while the Reply is placed: released
/// (invalidated, unmapped, freed) once, before anything is written into the
/// RPC's pages, or when dropped.
struct Held<'a> {
    x: &'a ClientXprt,
    conn: &'a Conn,
    regs: Option<Regs>,
    invalidated: Option<u32>,
}

impl Held<'_> {
    fn release(&mut self) {
        if let Some(r) = self.regs.take() {
            self.x.release_regs(self.conn, r, self.invalidated);
        }
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.release();
    }
}

/// What the class calls: the mount's [`ClientXprt`].
struct ClientOps(Arc<ClientXprt>);

impl XprtOps for ClientOps {
    fn connect(&self) -> Result {
        ClientXprt::connect(&self.0)
    }

    fn close(&self) {
        self.0.close();
    }

    fn send(&self, rq: &RpcRqst<'_>) -> Result {
        self.0.send(rq).map_err(|e| match e {
            e if e == ENOTCONN => e,
            // No Send buffer or memory now: sunrpc tries again later.
            e if e == EBUSY || e == ENOMEM => ENOBUFS,
            e => {
                add(&self.0.counts.failed_marshal, 1);
                if e == EMSGSIZE {
                    e
                } else {
                    EIO
                }
            }
        })
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
        st.mrs_allocated = get(&c.mrs_allocated);
        st.local_inv_needed = get(&c.local_inv);
    }

    fn bc_maxpayload(&self) -> u32 {
        // Called under rcu_read_lock(): no lock here (see `connect`).
        self.0.bc_max.load(Ordering::Relaxed)
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
                Waited::Timeout | Waited::Killed => return Err(ETIMEDOUT),
            }
        }
    }
}
