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
//!   ([`reply::AfterInv`]), so the Receive handler goes on to the next Reply.
//! - A connection that ends (peer gone, device removed, fatal completion) is
//!   reported to sunrpc, which closes the transport and reconnects when a call
//!   needs it, retransmitting what was in flight: chunks of a dead connection
//!   are never reused.

mod reply;
mod send;

use core::net::SocketAddr;
use core::ops::{Deref, DerefMut};
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use kernel::prelude::*;
use kernel::rbtree::{RBTree, RBTreeNodeReservation};
use kernel::sync::{Arc, CondVar, Mutex, MutexGuard, SpinLock};
use kernel::time::msecs_to_jiffies;
use kernel::{new_condvar, new_mutex, new_spinlock};

use super::requester::{Regs, ReleaseCounts};
use super::{advertised, endpoint, Conn, State, Upper, RESOLVE_TIMEOUT_MS};
use crate::proto::config::Advert;
use crate::proto::conn_state::{Closed, ConnState};
use crate::proto::negotiate::Negotiated;
use crate::stats::{Counter, XprtCounter as X};
use crate::sys::qp::{Qp, SEND_BATCH};
use crate::sys::rdma_cm::{CmId, Completion, Net};
use crate::sys::trace;
use crate::sys::wait::Waited;
use crate::sys::xprt::{
    MountStats, RpcRqst, RpcXprt, XprtFactory, XprtOps, BC_SLOTS, PREALLOC, SLOTS,
};

/// Receives a mount's connection posts at most: one per call in flight, one
/// per backchannel Call the server may send, and the one being handled (as
/// xprtrdma, so that a full window and callbacks never meet an RNR).
pub(super) const MOUNT_RECV_DEPTH: u32 = SLOTS + BC_SLOTS + 1;
/// Calls in flight a new connection's Receives cover: more are posted when
/// the server grants more credits (as xprtrdma's rpcrdma_post_recvs), so a
/// mount of a server that grants few costs few buffers. As many as the
/// requests the transport keeps allocated (`RPCRDMA_CM_XPRT_PREALLOC`).
const MOUNT_INITIAL_CALLS: u32 = PREALLOC;
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
        let spare = KVec::with_capacity(SLOTS as usize, GFP_KERNEL)?;
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
                    handed: None,
                    regs: RBTree::new(),
                    spare,
                }),
                kept: AtomicBool::new(false),
                users: AtomicU32::new(0),
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
    /// Registrations not known invalid, deregistered instead of reused.
    mrs_recycled: AtomicU64,
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
///   LOCAL_INVs ([`reply::AfterInv`]), which forgets the entry when it runs.
/// - `handed` is `conn`'s: set as `conn` is handed to sunrpc (established
///   then), it goes with `conn` (close, forget) or as `conn` closes
///   ([`ClientXprt::closed`], which the QP's teardown follows).
struct Inner {
    /// The connection in use or being made.
    conn: Option<Arc<Conn>>,
    /// Once sunrpc was told `conn` is connected (its end must be reported
    /// then): what a call sends with, taken from `conn` as it was handed
    /// over, so that a call locks nothing of the connection.
    handed: Option<Handed>,
    /// Chunks of the calls sent on `conn`, by XID, until their Reply (and,
    /// marked `deferred`, while the Reply waits for its LOCAL_INVs).
    regs: RBTree<u32, Regs>,
    /// Nodes of removed entries, for the next calls' entries: a call that
    /// keeps chunks allocates none (room for a window's worth reserved).
    spare: KVec<RBTreeNodeReservation<u32, Regs>>,
}

/// What the calls on an established connection send with
/// ([`Inner::handed`]). Its handle keeps the QP from being destroyed, so it
/// goes as the connection closes ([`ClientXprt::closed`], before the QP's
/// teardown), or with the connection (close, forget).
struct Handed {
    qp: Qp,
    neg: Negotiated,
    fr_pages: u32,
}

impl Inner {
    /// Whether `conn` is the connection in use.
    fn is_current(&self, conn: &Conn) -> bool {
        self.conn.as_deref().is_some_and(|c| core::ptr::eq(c, conn))
    }

    /// Removes the entry of `xid` from `regs`; its node is kept in `spare`
    /// (within the room reserved: no allocation) for a next entry.
    fn remove(&mut self, xid: u32) -> Option<Regs> {
        // The chunks leave first: the node drops an empty `Regs`, nothing
        // whose release could wait under the lock.
        let regs = core::mem::take(self.regs.get_mut(&xid)?);
        if let Some(node) = self.regs.remove_node(&xid) {
            let _ = self.spare.push_within_capacity(node.into_reservation());
        }
        Some(regs)
    }
}

/// `inner` locked by [`ClientXprt::lock`]: as the lock is released,
/// whatever the holder changed, `kept` is stored.
struct Locked<'a> {
    g: MutexGuard<'a, Inner>,
    kept: &'a AtomicBool,
}

impl Deref for Locked<'_> {
    type Target = Inner;

    fn deref(&self) -> &Inner {
        &self.g
    }
}

impl DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut Inner {
        &mut self.g
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        // Still under the lock: `g` is released after this.
        self.kept.store(!self.g.regs.is_empty(), Ordering::Release);
    }
}

/// One mount's transport. Fields are immutable (`state`, `x`, `net`,
/// `peer`), atomic (`counts`, `bc_max`, `connects`, `users`, `kept`), or
/// under `inner`'s mutex ([`Inner`]); `idle` is waited on with `inner`'s
/// guard.
///
/// # Invariants
///
/// `inner` is locked only by [`ClientXprt::lock`], whose guard stores
/// `kept` as it releases the lock: whenever the lock is free, `kept` is
/// false only while `inner.regs` is empty.
///
/// `users` counts the [`Entered`] and [`EnteredArc`] guards, plus [`DEAD`]
/// once destroy has begun. [`DEAD`] is set under `inner`'s lock and never
/// cleared; once it is set no guard is added, and destroy returns when the
/// count is 0 (the last guard to go then wakes it, under the lock).
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
    /// Receive handlers (and calls waiting for their LOCAL_INVs) using the
    /// C transport now; [`DEAD`] once destroy has begun. Atomic: a Reply
    /// takes no lock for it.
    users: AtomicU32,
    #[pin]
    inner: Mutex<Inner>,
    /// Whether `inner.regs` holds any entry: buf_free takes no lock for a
    /// call that kept no chunks (most calls), as xprtrdma's.
    kept: AtomicBool,
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
/// ([`reply::AfterInv`]): destroy waits for it too.
struct EnteredArc(Arc<ClientXprt>);

impl Drop for EnteredArc {
    fn drop(&mut self) {
        drop(Entered(&self.0));
    }
}

/// In `users`: destroy has begun, nothing may use the C transport any more.
const DEAD: u32 = 1 << 31;

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        let x = self.0;
        if x.users.fetch_sub(1, Ordering::AcqRel) == DEAD | 1 {
            // The last user, and destroy waits: it checks the count under
            // the lock, so it is either waiting or will see 0.
            let _g = x.lock();
            x.idle.notify_all();
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
        let mut n = self.users.load(Ordering::Relaxed);
        loop {
            if n & DEAD != 0 {
                return None;
            }
            match self
                .users
                .compare_exchange_weak(n, n + 1, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => return Some(Entered(self)),
                Err(now) => n = now,
            }
        }
    }

    /// Whether destroy has begun (set under `inner`'s lock).
    fn dead(&self) -> bool {
        self.users.load(Ordering::Relaxed) & DEAD != 0
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
        let old = {
            let mut g = this.lock();
            (g.conn.replace(conn.clone()), g.handed.take())
        };
        // Both `None`: `close` took them above (sunrpc's connects and
        // closes of one transport never overlap).
        drop(old);
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
                let mut g = this.lock();
                // Closed meanwhile (it is no longer ours): sunrpc retries.
                if !g.is_current(&conn) {
                    return Err(ENOTCONN);
                }
                // Taken under `inner`'s lock: a close of `conn` came first
                // (it is no longer established), or its `closed` will find
                // this to take.
                let Some(h) = conn.handed() else {
                    drop(g);
                    this.forget(&conn);
                    conn.close(Closed::ClosedBySunrpc, 0);
                    return Err(ENOTCONN);
                };
                let n = h.neg;
                g.handed = Some(h);
                drop(g);
                // bc_maxpayload is asked under rcu_read_lock(): it reads
                // this, never a lock. What one Send carries either way, as
                // xprtrdma: the smaller threshold, at most a page, less the
                // transport header.
                let page = kernel::page::PAGE_SIZE as u32;
                let max = n.c2s.min(n.s2c).min(page);
                this.bc_max.store(
                    max.saturating_sub(crate::proto::header::MIN_MSG_LEN as u32),
                    Ordering::Relaxed,
                );
                Ok(())
            }
            Err(e) => {
                this.forget(&conn);
                conn.close(Closed::ClosedBySunrpc, 0);
                Err(e)
            }
        }
    }

    /// Locks `inner`; the guard stores `kept` when it goes (the type's
    /// invariant).
    fn lock(&self) -> Locked<'_> {
        Locked {
            g: self.inner.lock(),
            kept: &self.kept,
        }
    }

    /// Drops `conn` as the current connection, if it still is.
    fn forget(&self, conn: &Arc<Conn>) {
        let mut g = self.lock();
        let handed = if g.is_current(conn) {
            g.conn = None;
            g.handed.take()
        } else {
            None
        };
        drop(g);
        drop(handed);
    }

    /// The connection goes (sunrpc's close, or before a new connect): the
    /// chunks of its calls are released while its QP still lives, then it
    /// is closed and torn down.
    fn close(&self) {
        let (conn, regs, handed) = {
            let mut g = self.lock();
            (g.conn.take(), core::mem::take(&mut g.regs), g.handed.take())
        };
        drop(regs);
        drop(handed);
        if let Some(c) = conn {
            c.close(Closed::ClosedBySunrpc, 0);
        }
    }

    /// `conn` ended by itself (its owner link is gone already): if it is the
    /// one sunrpc uses, sunrpc is told, closes the transport and reconnects.
    /// Its QP is torn down next: what holds it here goes first.
    pub(super) fn closed(&self, conn: &Conn) {
        let (regs, handed) = {
            let mut g = self.lock();
            if !g.is_current(conn) {
                return;
            }
            let _ = self.disconnect_current(&g, conn);
            // Its chunks hold its QP, whose teardown waits for them.
            (core::mem::take(&mut g.regs), g.handed.take())
        };
        drop(regs);
        drop(handed);
    }

    /// Under the lock (`g`): whether `conn` is the connection in use and
    /// destroy has not begun; if so and sunrpc was told it is connected,
    /// sunrpc is told to close it (and so reconnects).
    fn disconnect_current(&self, g: &Inner, conn: &Conn) -> bool {
        if !g.is_current(conn) || self.dead() {
            return false;
        }
        if g.handed.is_some() {
            // Under the lock: destroy (which sets DEAD under it) cannot
            // have begun.
            self.x.force_disconnect();
        }
        true
    }

    /// The connection handed to sunrpc, a handle on its QP, what it
    /// negotiated and the pages one registration may cover on its device.
    fn current(&self) -> Result<(Arc<Conn>, Qp, Negotiated, u32)> {
        let g = self.lock();
        match (&g.conn, &g.handed) {
            (Some(c), Some(h)) => Ok((c.clone(), h.qp.clone(), h.neg, h.fr_pages)),
            _ => Err(ENOTCONN),
        }
    }

    /// Releases a call's registrations: LOCAL_INV for each, but the one the
    /// server's Send With Invalidate invalidated (`invalidated`).
    fn release_regs(&self, conn: &Conn, regs: Regs, invalidated: Option<u32>) {
        self.count_released(regs.release(conn, invalidated));
    }

    /// Counts in mountstats what releasing a call's chunks took.
    fn count_released(&self, r: ReleaseCounts) {
        add(&self.counts.local_inv, u64::from(r.local_inv));
        add(&self.counts.mrs_recycled, u64::from(r.recycled));
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
        // The call's send stored `kept` true, before this in the task's
        // life, if it kept chunks; false since means the map emptied, so
        // whoever took its entry releases them.
        if !self.0.kept.load(Ordering::Acquire) {
            return;
        }
        let x = &self.0;
        let mut g = x.lock();
        let chunks = g.remove(xid);
        drop(g);
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
        st.mrs_recycled = get(&c.mrs_recycled);
        st.local_inv_needed = get(&c.local_inv);
    }

    fn bc_maxpayload(&self) -> u32 {
        // Called under rcu_read_lock(): no lock here (see `connect`).
        self.0.bc_max.load(Ordering::Relaxed)
    }

    fn destroy(&self) {
        self.0.close();
        let x = &self.0;
        let mut g = x.lock();
        x.users.fetch_or(DEAD, Ordering::AcqRel);
        while x.users.load(Ordering::Acquire) != DEAD {
            x.idle.wait(&mut g.g);
        }
    }
}

impl Conn {
    /// What a mount's calls send with ([`Handed`]), if the connection is
    /// established.
    fn handed(&self) -> Option<Handed> {
        let g = self.inner.lock();
        match (g.cm.get(), &g.negotiated) {
            (Some(cm), Some(n)) if g.state.is_established() => Some(Handed {
                qp: cm.qp()?,
                neg: *n,
                fr_pages: g.fr_pages,
            }),
            _ => None,
        }
    }

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
