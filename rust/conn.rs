// SPDX-License-Identifier: GPL-2.0

//! Connections and listeners: the RDMA-CM event logic of both roles, RFC 8797
//! private data on every connect and accept, the server's admission limits
//! and idle timeout, and what debugfs shows of them.
//!
//! Lock rules:
//! - A `CmId` is never dropped while a `Conn`, `Listener` or `State` mutex is
//!   held (dropping one outside its handler takes the CM's handler lock and
//!   drains the QP, and handlers take those mutexes). A connection keeps its id
//!   in an [`IdSlot`], which gives it up only after unlocking
//!   ([`Conn::adopt_id`], [`Conn::close_keep_id`]); a listener's goes with the
//!   state it replaces, dropped after the lock. Completion handlers (`recv`,
//!   `send_done`) never drop one at all.
//! - Nothing is allocated, registered or DMA-mapped under a `Conn` mutex: a
//!   caller reserves its credit and XID under the lock, takes a [`Qp`] handle
//!   and builds the call without it.
//! - A `Conn` lock may be taken before the `State::conns` lock, never after.
//! - A holder of a [`Qp`] handle or chunk lets go once the connection has failed
//!   (it is woken for that): the teardown waits for it.

use core::any::Any;
use core::net::{IpAddr, SocketAddr};
use core::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, Ordering};
use kernel::new_mutex;
use kernel::prelude::*;
use kernel::rbtree::{RBTree, RBTreeNodeReservation};
use kernel::sync::{Arc, Mutex};

mod client;
mod debugfs;
mod id_slot;
mod listener;
mod rpc_xprt;
mod svc;
mod testing;
mod xprt;
pub(crate) use debugfs::{ConnectionsFile, ControlFile, ListenersFile, ParamsFile};
use id_slot::IdSlot;
use listener::Listener;
pub(crate) use rpc_xprt::ClientFactory;
pub(crate) use svc::Factory;
pub(crate) use testing::BenchFile;
pub(crate) use xprt::{RpcsFile, XprtFile};

use crate::proto::config::{listen_list, Advert};
use crate::proto::conn_state::{Closed, ConnState};
use crate::proto::negotiate::{negotiate, Negotiated, Role};
use crate::proto::pvt_data::{parse, Outcome, PrivateData};
use crate::stats::{Counter, Stats, XprtStats};
use crate::sys::param;
use crate::sys::qp::{Qp, QpAttr, SEND_BATCH};
use crate::sys::rdma_cm::{
    CmHandler, CmId, Completion, DevCaps, Endpoint, Event, EventKind, HandlerId, Names,
};
use crate::sys::svc::SvcXprt;
use crate::sys::trace;
use crate::sys::wait::KillableCondVar;
use crate::sys::workqueue::Ticker;

/// Address and route resolution timeout.
const RESOLVE_TIMEOUT_MS: usize = 5000;
/// Sends in flight per connection, and calls in flight per client connection.
const QP_DEPTH: u32 = 32;
/// Receive buffers at most: one per credit plus the one whose reply is being
/// sent (see `conn_state::server_grant`).
const RECV_DEPTH: u32 = QP_DEPTH + 1;
/// Send buffers at most (allocated on first use): twice the largest grant,
/// so a reply never finds them all in flight while completions lag, and the
/// ones that may wait unsignaled for the next signaled Send (`qp.c`).
const SEND_DEPTH: u32 = 2 * QP_DEPTH + SEND_BATCH;
/// A connection whose disconnect (after a fatal error) has not completed
/// within this many seconds is closed by the tick.
const DISCONNECT_GRACE_S: i64 = 30;
/// Octets of Receive buffers a server connection posts before its first call;
/// it posts more when the client uses every credit.
const RECV_BUDGET: u32 = 64 * 1024;
/// Pending connection requests per listener.
const BACKLOG: i32 = 16;
/// Closed connections kept for debugfs; older ones are forgotten.
const KEEP_CLOSED: usize = 64;
/// Octets of received private data kept for display (the CM delivers at most 196
/// on IB and RoCE).
const PVT_KEEP: usize = 256;
/// How often the idle timeout is checked.
pub(crate) const TICK_MS: u32 = 1000;

/// What we advertise now, with a connection's overrides on top of the module
/// parameters: `None` for legacy (no private data at all). R also needs a
/// device with memory management extensions (RFC 8797 Section 3.2), which the
/// caller applies once the device is known ([`with_device`]).
fn advertised(over: &Advert) -> Option<PrivateData> {
    if over.legacy.unwrap_or_else(param::legacy) {
        return None;
    }
    // Parameters and overrides were checked when set, so this cannot fail.
    PrivateData::new(
        over.remote_invalidate
            .unwrap_or_else(param::remote_invalidate),
        over.send_size.unwrap_or_else(param::send_size),
        over.recv_size.unwrap_or_else(param::recv_size),
    )
    .ok()
}

/// Our private data on a device with `caps`: R only if the device can take part
/// in remote invalidation.
fn with_device(ours: Option<PrivateData>, caps: Option<DevCaps>) -> Option<PrivateData> {
    let dev_inv = caps.is_some_and(|c| c.mem_mgt_ext);
    ours.map(|p| PrivateData {
        remote_invalidate: p.remote_invalidate && dev_inv,
        ..p
    })
}

fn endpoint(sa: &SocketAddr) -> Endpoint {
    Endpoint {
        addr: sa.ip(),
        port: sa.port(),
    }
}

use crate::sys::time::now_ns;

/// Every connection the module knows: the open ones, by id, and the last
/// [`KEEP_CLOSED`] closed ones. Each event does O(log n) work here.
struct Conns {
    open: RBTree<u32, Arc<Conn>>,
    /// A ring, oldest first from `closed_next` once full.
    closed: KVec<Arc<Conn>>,
    closed_next: usize,
    /// Open server connections, all peers together and per peer address.
    server_open: u32,
    per_peer: RBTree<IpAddr, u32>,
}

/// Why a CONNECT_REQUEST was refused before anything was allocated for it.
enum Refused {
    MaxConnections,
    MaxPerPeer,
}

/// Module-wide state: counters, connections and listeners.
#[pin_data]
pub(crate) struct State {
    pub(crate) stats: Stats,
    next_id: AtomicU32,
    #[pin]
    conns: Mutex<Conns>,
    #[pin]
    listeners: Mutex<KVec<Arc<Listener>>>,
    #[pin]
    rpcs: Mutex<xprt::RpcLog>,
    #[pin]
    bench: Mutex<Option<testing::BenchResult>>,
}

impl State {
    pub(crate) fn new() -> Result<Arc<State>> {
        let closed = KVec::with_capacity(KEEP_CLOSED, GFP_KERNEL)?;
        let rpcs = xprt::RpcLog::new()?;
        Arc::pin_init(
            pin_init!(State {
                stats: Stats::default(),
                next_id: AtomicU32::new(1),
                conns <- new_mutex!(Conns {
                    open: RBTree::new(),
                    closed,
                    closed_next: 0,
                    server_open: 0,
                    per_peer: RBTree::new(),
                }),
                listeners <- new_mutex!(KVec::new()),
                rpcs <- new_mutex!(rpcs),
                bench <- new_mutex!(None),
            }),
            GFP_KERNEL,
        )
    }

    fn new_conn(
        self: &Arc<Self>,
        role: Role,
        ours: Option<PrivateData>,
        peer_ip: Option<IpAddr>,
    ) -> Result<Arc<Conn>> {
        self.new_conn_for(role, ours, peer_ip, false)
    }

    fn new_conn_for(
        self: &Arc<Self>,
        role: Role,
        ours: Option<PrivateData>,
        peer_ip: Option<IpAddr>,
        nfsd: bool,
    ) -> Result<Arc<Conn>> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        Arc::pin_init(
            pin_init!(Conn {
                id,
                role,
                nfsd,
                peer_ip,
                state: self.clone(),
                xs: XprtStats::default(),
                retired: AtomicBool::new(false),
                last_active: AtomicI64::new(now_ns()),
                inner <- new_mutex!(ConnInner::new(ours, param::random_u32())),
                cv <- KillableCondVar::new(),
            }),
            GFP_KERNEL,
        )
    }

    /// Records a client connection among the open ones.
    fn register(&self, conn: &Arc<Conn>) -> Result {
        let mut g = self.conns.lock();
        g.open
            .try_create_and_insert(conn.id, conn.clone(), GFP_KERNEL)?;
        self.stats.inc(Counter::ConnectionsOpen);
        Ok(())
    }

    /// Admits a server connection from `peer` if the limits allow it: takes
    /// its place under them (the check and the count are one step under the
    /// lock), before anything is allocated for it. The place is given back by
    /// [`State::retire`] once the connection is registered, else by
    /// [`State::unadmit`].
    fn admit(&self, peer: Option<IpAddr>) -> core::result::Result<Result, Refused> {
        let mut g = self.conns.lock();
        if g.server_open >= param::max_connections() {
            return Err(Refused::MaxConnections);
        }
        let from_peer = peer
            .and_then(|ip| g.per_peer.get(&ip).copied())
            .unwrap_or(0);
        if from_peer >= param::max_connections_per_peer() {
            return Err(Refused::MaxPerPeer);
        }
        if let Some(ip) = peer {
            let counted = match g.per_peer.get_mut(&ip) {
                Some(n) => {
                    *n += 1;
                    Ok(())
                }
                None => g
                    .per_peer
                    .try_create_and_insert(ip, 1, GFP_KERNEL)
                    .map(|_| ()),
            };
            if let Err(e) = counted {
                return Ok(Err(e));
            }
        }
        g.server_open += 1;
        self.stats.inc(Counter::ServerConnectionsOpen);
        Ok(Ok(()))
    }

    /// Gives back a place taken by [`State::admit`] for a connection that was
    /// never registered.
    fn unadmit(&self, peer: Option<IpAddr>) {
        let mut g = self.conns.lock();
        Self::unadmit_locked(&mut g, peer);
        self.stats.dec(Counter::ServerConnectionsOpen);
    }

    fn unadmit_locked(g: &mut Conns, peer: Option<IpAddr>) {
        g.server_open = g.server_open.saturating_sub(1);
        if let Some(ip) = peer {
            let last = match g.per_peer.get_mut(&ip) {
                Some(n) => {
                    *n = n.saturating_sub(1);
                    *n == 0
                }
                None => false,
            };
            if last {
                g.per_peer.remove(&ip);
            }
        }
    }

    /// Moves a connection that has just closed from the open ones to the ring
    /// of closed ones, giving back its place under the limits. Once only.
    fn retire(&self, conn: &Conn) {
        if conn.retired.swap(true, Ordering::AcqRel) {
            return;
        }
        let mut g = self.conns.lock();
        let Some(c) = g.open.remove(&conn.id) else {
            // Never registered (its creation failed early).
            return;
        };
        self.stats.dec(Counter::ConnectionsOpen);
        if c.role == Role::Server {
            Self::unadmit_locked(&mut g, c.peer_ip);
            self.stats.dec(Counter::ServerConnectionsOpen);
        }
        let old = if g.closed.len() < KEEP_CLOSED {
            // The capacity was reserved at load: this does not allocate (and
            // if it failed, the connection would just be forgotten).
            let _ = g.closed.push(c, GFP_KERNEL);
            None
        } else {
            let i = g.closed_next;
            g.closed_next = (i + 1) % KEEP_CLOSED;
            Some(core::mem::replace(&mut g.closed[i], c))
        };
        drop(g);
        // A forgotten connection is freed here, outside the lock.
        drop(old);
    }

    /// Starts listening on every endpoint of the `listen` parameter.
    pub(crate) fn start_listeners(self: &Arc<Self>) -> Result {
        for ep in listen_list(param::listen()) {
            let ep = ep.ok_or(EINVAL)?;
            let l = Listener::new(self.clone(), ep)?;
            self.listeners.lock().push(l.clone(), GFP_KERNEL)?;
            match l.start() {
                Ok(true) => pr_info!("listening on {:?}\n", ep),
                Ok(false) => pr_warn!(
                    "listener {:?}: device removed while starting, not listening until a device is added\n",
                    ep
                ),
                Err(e) => {
                    self.stats.inc(Counter::ErrListen);
                    pr_err!("cannot listen on {:?}: error {}\n", ep, e.to_errno());
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Forgets a listener nfsd closed (or whose creation failed).
    fn forget_listener(&self, l: &Arc<Listener>) {
        let old = {
            let mut g = self.listeners.lock();
            let mut kept = KVec::with_capacity(g.len(), GFP_KERNEL);
            match &mut kept {
                Ok(k) => {
                    for x in g.iter() {
                        if !Arc::ptr_eq(x, l) {
                            // Capacity reserved: cannot fail.
                            let _ = k.push(x.clone(), GFP_KERNEL);
                        }
                    }
                }
                // No memory: the listener stays listed (dead) until unload.
                Err(_) => return,
            }
            kept.map(|k| core::mem::replace(&mut *g, k))
        };
        drop(old);
    }

    /// Listens again on every endpoint whose listener lost its device.
    fn restart_listeners(&self) {
        let Ok(listeners) = snapshot(&self.listeners) else {
            return;
        };
        for l in listeners.iter() {
            // The device that was added may not be the one with our address:
            // then the listener stays dead until another comes.
            if l.is_dead() && l.start() == Ok(true) {
                self.stats.inc(Counter::ListenerRestarts);
                pr_info!("listening on {:?} again\n", l.ep);
            }
        }
    }

    /// `connect ADDR PORT`: starts a client connection; its progress shows in
    /// `connections`.
    fn connect(self: &Arc<Self>, sa: SocketAddr, over: &Advert) -> Result {
        self.stats.inc(Counter::Connects);
        let conn = self
            .new_conn(Role::Client, advertised(over), None)
            .inspect_err(|_| self.stats.inc(Counter::ErrAlloc))?;
        self.register(&conn)
            .inspect_err(|_| self.stats.inc(Counter::ErrAlloc))?;
        let cm = match CmId::new(conn.clone()) {
            Ok(cm) => cm,
            Err(e) => {
                self.stats.inc(Counter::ErrAlloc);
                conn.close(Closed::CreateFailed, e.to_errno());
                return Err(e);
            }
        };
        {
            let mut g = conn.inner.lock();
            g.peer_addr = Some(sa);
            g.state.advance(ConnState::Resolving);
        }
        // Without the lock (it allocates). The handlers of the events that
        // follow need only their HandlerId; the id is stored just after.
        if let Err(e) = cm.resolve_addr(&endpoint(&sa), RESOLVE_TIMEOUT_MS) {
            self.stats.inc(Counter::ErrResolve);
            conn.close(Closed::ResolveFailed, e.to_errno());
            drop(cm);
            return Err(e);
        }
        // Closed meanwhile (`disconnect ID`, or an ADDR_ERROR): the id goes.
        conn.adopt_id(cm);
        Ok(())
    }

    fn find(&self, id: u32) -> Result<Arc<Conn>> {
        let g = self.conns.lock();
        if let Some(c) = g.open.get(&id) {
            return Ok(c.clone());
        }
        g.closed.iter().find(|c| c.id == id).cloned().ok_or(ENOENT)
    }

    /// Every connection, open and recently closed, by id; taken under the lock
    /// and used after it, so no `Conn` lock nests in it.
    fn snapshot(&self) -> Result<KVec<Arc<Conn>>> {
        let g = self.conns.lock();
        let mut v = KVec::with_capacity(g.closed.len() + g.open.iter().count(), GFP_KERNEL)?;
        for c in g.closed.iter() {
            v.push(c.clone(), GFP_KERNEL)?;
        }
        for c in g.open.values() {
            v.push(c.clone(), GFP_KERNEL)?;
        }
        drop(g);
        crate::proto::sort::sort_by_key(&mut v, |c| c.id);
        Ok(v)
    }

    /// The open connections only.
    fn open_snapshot(&self) -> Result<KVec<Arc<Conn>>> {
        let g = self.conns.lock();
        let mut v = KVec::with_capacity(g.open.iter().count(), GFP_KERNEL)?;
        for c in g.open.values() {
            v.push(c.clone(), GFP_KERNEL)?;
        }
        Ok(v)
    }

    /// `disconnect ID`.
    fn disconnect(&self, id: u32) -> Result {
        let conn = self.find(id)?;
        if !conn.close(Closed::ClosedByUser, 0) {
            return Err(ENOTCONN);
        }
        self.stats.inc(Counter::UserDisconnects);
        Ok(())
    }

    /// Unload: no new connections (listeners first), then every open
    /// connection closed and its id destroyed. Ids that handlers gave up are
    /// torn down on the module's workqueue, which the caller then waits for.
    pub(crate) fn shutdown(&self) {
        let listeners = core::mem::take(&mut *self.listeners.lock());
        for l in listeners.iter() {
            l.stop();
        }
        // One at a time, taken out under the lock without allocating: every
        // open connection is closed, so its id (which refers back to it) goes.
        loop {
            let next = {
                let mut g = self.conns.lock();
                let id = g.open.keys().next().copied();
                id.and_then(|id| g.open.remove(&id))
            };
            let Some(c) = next else { break };
            c.close(Closed::Unloaded, 0);
        }
        let closed = core::mem::take(&mut self.conns.lock().closed);
        drop(closed);
    }
}

/// A copy of a list of shared objects, taken under its lock and used after it,
/// so the objects' own locks never nest in the list's.
fn snapshot<T>(list: &Mutex<KVec<Arc<T>>>) -> Result<KVec<Arc<T>>> {
    let l = list.lock();
    let mut v = KVec::with_capacity(l.len(), GFP_KERNEL)?;
    for x in l.iter() {
        v.push(x.clone(), GFP_KERNEL)?;
    }
    Ok(v)
}

/// A first-in first-out queue (the kernel crate, 7.3, has no VecDeque).
struct Fifo<T> {
    tree: RBTree<u64, T>,
    next: u64,
}

impl<T> Fifo<T> {
    fn new() -> Self {
        Fifo {
            tree: RBTree::new(),
            next: 0,
        }
    }

    /// Appends `v`; without memory, hands it back, for the caller to drop
    /// after its lock.
    fn push(&mut self, v: T) -> core::result::Result<(), T> {
        let Ok(r) = RBTreeNodeReservation::new(GFP_KERNEL) else {
            return Err(v);
        };
        self.tree.insert(r.into_node(self.next, v));
        self.next = self.next.wrapping_add(1);
        Ok(())
    }

    fn pop(&mut self) -> Option<T> {
        let first = *self.tree.keys().next()?;
        self.tree.remove(&first)
    }

    fn is_empty(&self) -> bool {
        self.tree.iter().next().is_none()
    }

    /// Takes everything out (to be dropped outside the caller's lock).
    fn take(&mut self) -> Fifo<T> {
        core::mem::replace(self, Fifo::new())
    }
}

impl Ticker for State {
    /// Closes server connections idle for longer than `idle_timeout`, and
    /// connections whose disconnect after a fatal error never completed.
    fn tick(&self) {
        let Ok(open) = self.open_snapshot() else {
            return;
        };
        let timeout = i64::from(param::idle_timeout()) * 1_000_000_000;
        let grace = DISCONNECT_GRACE_S * 1_000_000_000;
        let now = now_ns();
        for c in open.iter() {
            let quiet = now - c.last_active.load(Ordering::Relaxed);
            let state = c.inner.lock().state;
            if state == ConnState::Disconnecting && quiet > grace {
                trace::closed(c.id, "disconnect_timeout", 0);
                c.close(Closed::Disconnected, 0);
            } else if c.role == Role::Server
                && timeout != 0
                && quiet > timeout
                && state.is_established()
                && c.close(Closed::IdleTimeout, 0)
            {
                self.stats.inc(Counter::IdleDisconnects);
            }
        }
    }
}

/// One connection, either role.
#[pin_data]
pub(crate) struct Conn {
    id: u32,
    role: Role,
    /// Server: a connection of nfsd's (accepted on a listener nfsd made).
    nfsd: bool,
    /// Server: the client's address, counted under `max_connections_per_peer`.
    peer_ip: Option<IpAddr>,
    state: Arc<State>,
    xs: XprtStats,
    /// Moved to the closed ones (see [`State::retire`]).
    retired: AtomicBool,
    /// When it last received or sent a message (monotonic ns).
    last_active: AtomicI64,
    #[pin]
    inner: Mutex<ConnInner>,
    /// Signalled when a reply arrives, a credit frees up or the connection ends.
    #[pin]
    cv: KillableCondVar,
}

struct ConnInner {
    state: ConnState,
    names: Option<Names>,
    peer_addr: Option<SocketAddr>,
    /// What we advertised; `None`: legacy, nothing sent.
    ours: Option<PrivateData>,
    /// Whether the device supports remote invalidation (known once resolved).
    dev_inv: Option<bool>,
    /// Pages one FRWR registration may cover on the device (0 until known).
    fr_pages: u32,
    peer_pvt: [u8; PVT_KEEP],
    peer_pvt_len: usize,
    outcome: Option<Outcome>,
    negotiated: Option<Negotiated>,
    ord: u8,
    cm: IdSlot,
    x: xprt::XprtState,
    /// nfsd's reference on its transport, until nfsd detaches it.
    svc: Option<SvcXprt>,
    /// Calls received for nfsd, not yet handed to it.
    svc_queue: Fifo<svc::SvcItem>,
    /// Client: the mount whose transport this is, until it closes.
    owner: Option<Arc<rpc_xprt::ClientXprt>>,
    /// Client: made for a mount (kept for debugfs once closed).
    for_mount: bool,
}

impl ConnInner {
    fn new(ours: Option<PrivateData>, first_xid: u32) -> Self {
        ConnInner {
            state: ConnState::New,
            names: None,
            peer_addr: None,
            ours,
            dev_inv: None,
            fr_pages: 0,
            peer_pvt: [0; PVT_KEEP],
            peer_pvt_len: 0,
            outcome: None,
            negotiated: None,
            ord: 0,
            cm: IdSlot::new(),
            x: xprt::XprtState::new(first_xid),
            svc: None,
            svc_queue: Fifo::new(),
            owner: None,
            for_mount: false,
        }
    }

    /// Sizes of our Send and Receive buffers: what we advertised (the RFC 8797
    /// defaults for a legacy connection). Negotiated thresholds never exceed them.
    fn buffer_sizes(&self) -> (u32, u32) {
        let ours = self.ours.unwrap_or(PrivateData::DEFAULT);
        (ours.send_size, ours.recv_size)
    }

    /// Applies what the device offers to what we advertise.
    fn set_device(&mut self, caps: Option<DevCaps>, stats: &Stats) {
        let before = self.ours.is_some_and(|p| p.remote_invalidate);
        self.ours = with_device(self.ours, caps);
        self.dev_inv = Some(caps.is_some_and(|c| c.mem_mgt_ext));
        self.fr_pages = caps.map_or(0, |c| c.max_fast_reg_pages);
        if before && !self.ours.is_some_and(|p| p.remote_invalidate) {
            stats.inc(Counter::RemoteInvalidationUnsupported);
        }
    }

    /// Keeps the peer's private data, parses it and negotiates.
    fn negotiate(&mut self, role: Role, pvt: &[u8], stats: &Stats) {
        let n = pvt.len().min(PVT_KEEP);
        self.peer_pvt[..n].copy_from_slice(&pvt[..n]);
        self.peer_pvt_len = pvt.len();
        let outcome = parse(pvt);
        stats.parsed(&outcome);
        let ours = self.ours.unwrap_or(PrivateData::DEFAULT);
        let neg = negotiate(role, &ours, &outcome);
        if neg.remote_invalidation {
            stats.inc(Counter::RemoteInvalidationNegotiated);
        }
        self.outcome = Some(outcome);
        self.negotiated = Some(neg);
    }
}

/// What [`Conn::close_keep_id`] did.
enum Closing {
    /// The connection was closed before: nothing to release.
    Already,
    /// Closed by this call; the id, if the connection still held it, for the
    /// caller to release.
    Now(Option<CmId>),
}

impl Conn {
    /// Closes the connection for `why` (the first close wins): fails the calls in
    /// flight, gives back its place among the open connections, and releases
    /// the id (from inside its handler, the teardown is deferred). Returns
    /// whether this call closed it.
    fn close(&self, why: Closed, status: i32) -> bool {
        matches!(self.close_keep_id(why, status), Closing::Now(_))
    }

    /// Gives the connection its id, unless it closed meanwhile: then the id
    /// is released, after the lock.
    fn adopt_id(&self, cm: CmId) {
        let mut g = self.inner.lock();
        let refused = if g.state.is_closed() {
            Err(cm)
        } else {
            g.cm.put(cm).inspect_err(|_| {
                pr_warn!("connection {}: a second id, released\n", self.id);
            })
        };
        drop(g);
        // Closed meanwhile, or (never expected) an id held already.
        drop(refused);
    }

    /// [`Conn::close`], but the caller gets the id (if it was still held) to
    /// release it.
    fn close_keep_id(&self, why: Closed, status: i32) -> Closing {
        let (cm, queued, owner) = {
            let mut g = self.inner.lock();
            if !g.state.close(why, status) {
                return Closing::Already;
            }
            trace::closed(self.id, why.name(), status);
            g.x.fail_all(ENOTCONN.to_errno());
            // nfsd closes its transport (xpo_detach follows).
            if let Some(x) = &g.svc {
                x.close();
            }
            let (queued, owner) = (g.svc_queue.take(), g.owner.take());
            (IdSlot::take_unlocked(g, |i| &mut i.cm), queued, owner)
        };
        // Calls nfsd never saw: their buffers go back (the QP's teardown
        // waits for them).
        drop(queued);
        // A mount's transport learns that its connection is gone.
        if let Some(o) = owner {
            o.closed(self);
        }
        self.cv.notify_all();
        self.state.retire(self);
        Closing::Now(cm)
    }

    /// [`Conn::close`] from a context that must not wait for the QP's
    /// holders (nfsd's xpo_detach, whose caller still holds some): the id's
    /// teardown is deferred to the module's workqueue.
    fn close_deferred(&self, why: Closed) {
        if let Closing::Now(Some(cm)) = self.close_keep_id(why, 0) {
            cm.drop_deferred();
        }
    }

    /// A call arrived for nfsd: queue it and tell nfsd.
    fn svc_received(&self, qp: &Qp, wc: &Completion<'_>) {
        if let Some(buf) = wc.keep() {
            self.svc_push(qp, svc::SvcItem::Received(buf));
        }
    }

    /// Queues a call for nfsd and tells nfsd (dropped if the connection is
    /// closing or nfsd has let go of it).
    fn svc_push(&self, qp: &Qp, item: svc::SvcItem) {
        let mut g = self.inner.lock();
        if g.state.is_closed() || g.svc.is_none() {
            return;
        }
        if let Err(item) = g.svc_queue.push(item) {
            // A call lost for want of memory would hold the client's credit
            // for good: end the connection instead. Its buffer goes back
            // after the lock.
            drop(g);
            drop(item);
            self.fatal(qp, "no_memory", ENOMEM.to_errno());
            return;
        }
        if let Some(x) = &g.svc {
            x.set_data(true);
            x.enqueue();
        }
    }

    /// The next call for nfsd, if any (xpo_recvfrom); with none, nfsd is told
    /// so under the same lock the queue takes.
    fn svc_dequeue(&self) -> Option<svc::SvcItem> {
        let mut g = self.inner.lock();
        let b = g.svc_queue.pop();
        if b.is_none() {
            if let Some(x) = &g.svc {
                x.set_data(false);
            }
        }
        b
    }

    /// Completes a backchannel Call with its Reply.
    fn svc_bc_reply(&self, rpc: &[u8], credits: u32) -> bool {
        let g = self.inner.lock();
        g.svc.as_ref().is_some_and(|x| x.bc_reply(rpc, credits))
    }

    /// nfsd detaches its transport: its reference goes.
    fn svc_detach(&self) {
        let x = self.inner.lock().svc.take();
        drop(x);
    }

    fn stats(&self) -> &Stats {
        &self.state.stats
    }

    /// Fires `rpcrdma_cm_negotiated` with what `g` negotiated.
    fn trace_negotiated(&self, g: &ConnInner) {
        let (Some(n), Some(o)) = (&g.negotiated, &g.outcome) else {
            return;
        };
        let peer = g.names.as_ref().map_or("-", |n| n.peer());
        trace::negotiated(&trace::Negotiated {
            id: self.id,
            server: self.role == Role::Server,
            peer,
            outcome: o.name(),
            peer_send: n.peer.send_size,
            peer_recv: n.peer.recv_size,
            peer_r: n.peer.remote_invalidate,
            c2s: n.c2s,
            s2c: n.s2c,
            reminv: n.remote_invalidation,
        });
    }

    /// Marks the connection active now (the idle timeout counts from here).
    fn touch(&self) {
        self.last_active.store(now_ns(), Ordering::Relaxed);
    }

    fn route_resolved(&self, id: &HandlerId<'_>) -> Result {
        let caps = id.caps();
        let (send, recv, mount) = {
            let mut g = self.inner.lock();
            g.set_device(caps, self.stats());
            let (send, recv) = g.buffer_sizes();
            (send, recv, g.for_mount)
        };
        // A mount's connection also takes the server's backchannel Calls.
        let (sends, receives, initial) = if mount {
            (
                rpc_xprt::MOUNT_SEND_DEPTH,
                rpc_xprt::MOUNT_RECV_DEPTH,
                rpc_xprt::MOUNT_RECV_INITIAL,
            )
        } else {
            (SEND_DEPTH, RECV_DEPTH, RECV_DEPTH)
        };
        id.create_qp(&QpAttr {
            send_depth: sends,
            recv_depth: receives,
            recv_initial: initial,
            send_size: send,
            recv_size: recv,
        })
        .inspect_err(|_| self.stats().inc(Counter::ErrQpCreate))?;
        let pdata = {
            let mut g = self.inner.lock();
            g.names = Some(id.names());
            g.state.advance(ConnState::Connecting);
            g.ours.map(|p| p.encode())
        };
        let bytes: &[u8] = match &pdata {
            Some(p) => p,
            None => &[],
        };
        id.connect(bytes)
            .inspect_err(|_| self.stats().inc(Counter::ErrConnect))
    }
}

/// The events that end a connection: the counter they bump and the state they
/// leave (the event's status becomes the connection's `error`).
fn ending(kind: EventKind) -> Option<(Counter, Closed)> {
    Some(match kind {
        EventKind::AddrError => (Counter::AddrErrors, Closed::AddrError),
        EventKind::RouteError => (Counter::RouteErrors, Closed::RouteError),
        EventKind::ConnectError => (Counter::ConnectErrors, Closed::ConnectError),
        EventKind::Unreachable => (Counter::Unreachable, Closed::Unreachable),
        EventKind::Rejected => (Counter::RejectedByPeer, Closed::Rejected),
        EventKind::Disconnected => (Counter::Disconnects, Closed::Disconnected),
        EventKind::DeviceRemoval => (Counter::DeviceRemovals, Closed::DeviceRemoved),
        _ => return None,
    })
}

impl CmHandler for Conn {
    fn event(&self, id: &HandlerId<'_>, ev: &Event<'_>) {
        let st = self.stats();
        match ev.kind {
            EventKind::AddrResolved => {
                if let Err(e) = id.resolve_route(RESOLVE_TIMEOUT_MS) {
                    st.inc(Counter::ErrResolve);
                    self.close(Closed::RouteFailed, e.to_errno());
                }
            }
            EventKind::RouteResolved => {
                if let Err(e) = self.route_resolved(id) {
                    self.close(Closed::ConnectFailed, e.to_errno());
                }
            }
            EventKind::Established => {
                let mut g = self.inner.lock();
                if !g.state.advance(ConnState::Established) {
                    return;
                }
                st.inc(Counter::Established);
                g.names = Some(id.names());
                // The passive side learnt the client's private data and read
                // depth at CONNECT_REQUEST; the active side learns the server's
                // here (the passive side's ESTABLISHED carries neither).
                if self.role == Role::Client {
                    g.ord = ev.initiator_depth;
                    g.negotiate(Role::Client, ev.private_data, st);
                    self.trace_negotiated(&g);
                }
                drop(g);
                self.touch();
                // A mount's connect worker waits for this.
                self.cv.notify_all();
            }
            EventKind::AddrChange => {
                st.inc(Counter::AddrChanges);
                // As xprtrdma does: the address moved, so drop the connection.
                let _ = id.disconnect();
            }
            EventKind::TimewaitExit => st.inc(Counter::TimewaitExits),
            kind => {
                if let Some((counter, why)) = ending(kind) {
                    st.inc(counter);
                    if let Closing::Now(cm) = self.close_keep_id(why, ev.status) {
                        // Selftests widen the window in which this handler
                        // holds the id it took (unload must wait for it).
                        param::test_teardown_delay();
                        drop(cm);
                    }
                }
            }
        }
    }

    fn recv(&self, qp: &Qp, wc: &Completion<'_>) {
        self.on_recv(qp, wc);
    }

    fn send_done(&self, qp: &Qp, wc: &Completion<'_>) {
        self.on_send_done(qp, wc);
    }

    fn rw_failed(&self, qp: &Qp, status: i32) {
        self.failed_completion(qp, status, crate::stats::XprtCounter::ChunkErrors);
    }

    fn rw_done(&self, qp: &Qp, done: Arc<dyn Any + Send + Sync>, status: i32) {
        self.svc_read_done(qp, &*done, status);
    }
}

impl crate::sys::ib_client::DeviceHandler for State {
    fn device_added(&self) {
        self.restart_listeners();
    }
}
