// SPDX-License-Identifier: GPL-2.0

//! The module-wide state: every connection (the open ones by id, the last
//! closed ones), admission of server connections (`max_connections`,
//! `max_connections_per_peer`), the listeners, and the periodic tick that
//! closes idle and stuck connections.

#[cfg(CONFIG_RPCRDMA_CM_TEST)]
use super::{advertised, endpoint, RESOLVE_TIMEOUT_MS};
use super::{testing, Conn, ConnInner, Listener, Upper, DISCONNECT_GRACE_S, KEEP_CLOSED};
#[cfg(CONFIG_RPCRDMA_CM_TEST)]
use crate::proto::config::{listen_list, Advert};
use crate::proto::conn_state::{Closed, ConnState};
use crate::proto::negotiate::Role;
use crate::proto::pvt_data::PrivateData;
use crate::stats::{Counter, Stats, XprtStats};
use crate::sys::param;
#[cfg(CONFIG_RPCRDMA_CM_TEST)]
use crate::sys::rdma_cm::CmId;
use crate::sys::time::now_coarse_ns;
use crate::sys::trace;
use crate::sys::wait::KillableCondVar;
use crate::sys::workqueue::Ticker;
use core::net::IpAddr;
#[cfg(CONFIG_RPCRDMA_CM_TEST)]
use core::net::SocketAddr;
use core::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, Ordering};
use kernel::new_mutex;
use kernel::prelude::*;
use kernel::rbtree::RBTree;
use kernel::sync::{Arc, Mutex};

/// Every connection the module knows: the open ones, by id, and the last
/// [`KEEP_CLOSED`] closed ones. Each event does O(log n) work here.
///
/// # Invariants
///
/// `server_open` and `per_peer` count the places [`Admission`]s hold and
/// the open server connections they were passed on to; `per_peer` has no
/// entry of 0.
pub(super) struct Conns {
    open: RBTree<u32, Arc<Conn>>,
    /// A ring, oldest first from `closed_next` once full.
    closed: KVec<Arc<Conn>>,
    closed_next: usize,
    /// Open server connections, all peers together and per peer address.
    server_open: u32,
    per_peer: RBTree<IpAddr, u32>,
}

/// Why a CONNECT_REQUEST was refused before anything was allocated for it.
pub(super) enum Refused {
    MaxConnections,
    MaxPerPeer,
}

/// A place under the server limits (`max_connections`,
/// `max_connections_per_peer`), taken by [`State::admit`].
///
/// # Invariants
///
/// It holds one count of `server_open`, and of `per_peer` for `peer` if any:
/// given back when it is dropped, unless [`Admission::register`] passed it on
/// to a registered connection, whose [`State::retire`] gives it back.
#[must_use]
pub(super) struct Admission<'a> {
    state: &'a State,
    peer: Option<IpAddr>,
}

impl Admission<'_> {
    /// Registers the connection this place was taken for: from now on its
    /// retirement gives the place back.
    pub(super) fn register(self, conn: &Arc<Conn>) -> Result {
        self.state.register(conn)?;
        // The registered connection holds the place now (type invariant).
        core::mem::forget(self);
        Ok(())
    }
}

impl Drop for Admission<'_> {
    fn drop(&mut self) {
        self.state.unadmit(self.peer);
    }
}

/// Module-wide state: counters, connections and listeners.
///
/// `stats` and `next_id` are atomics; the others are under their own
/// mutexes, each a leaf but for `conns`, which a connection's mutex may be
/// held around (never the other way round). Lists are copied under their
/// lock and used after it ([`snapshot`]).
#[pin_data]
pub(crate) struct State {
    pub(crate) stats: Stats,
    /// The next connection's id.
    pub(super) next_id: AtomicU32,
    #[pin]
    pub(super) conns: Mutex<Conns>,
    /// nfsd's listeners, and (test builds) the echo service's.
    #[pin]
    pub(super) listeners: Mutex<KVec<Arc<Listener>>>,
    /// The debugfs caller's last calls (test builds).
    #[cfg(CONFIG_RPCRDMA_CM_TEST)]
    #[pin]
    pub(super) rpcs: Mutex<super::rpcs::RpcLog>,
    /// The last `ping` or `bench` result, for the `bench` file.
    #[pin]
    pub(super) bench: Mutex<Option<testing::BenchResult>>,
}

impl State {
    pub(crate) fn new() -> Result<Arc<State>> {
        let closed = KVec::with_capacity(KEEP_CLOSED, GFP_KERNEL)?;
        #[cfg(CONFIG_RPCRDMA_CM_TEST)]
        let rpcs = super::rpcs::RpcLog::new()?;
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
                #[cfg(CONFIG_RPCRDMA_CM_TEST)]
                rpcs <- new_mutex!(rpcs),
                bench <- new_mutex!(None),
            }),
            GFP_KERNEL,
        )
    }

    /// A new connection for `upper`, advertising `ours`; `peer_ip`: a
    /// server connection's client, counted under `max_connections_per_peer`.
    pub(super) fn new_conn(
        self: &Arc<Self>,
        upper: Upper,
        ours: Option<PrivateData>,
        peer_ip: Option<IpAddr>,
    ) -> Result<Arc<Conn>> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        Arc::pin_init(
            pin_init!(Conn {
                id,
                upper,
                peer_ip,
                state: self.clone(),
                xs: XprtStats::default(),
                retired: AtomicBool::new(false),
                last_active: AtomicI64::new(now_coarse_ns()),
                credits: AtomicU32::new(1),
                inner <- new_mutex!(ConnInner::new(ours)),
                cv <- KillableCondVar::new(),
            }),
            GFP_KERNEL,
        )
    }

    /// Records a client connection among the open ones.
    pub(super) fn register(&self, conn: &Arc<Conn>) -> Result {
        let mut g = self.conns.lock();
        g.open
            .try_create_and_insert(conn.id, conn.clone(), GFP_KERNEL)?;
        self.stats.inc(Counter::ConnectionsOpen);
        Ok(())
    }

    /// Admits a server connection from `peer` if the limits allow it: takes
    /// its place under them (the check and the count are one step under the
    /// lock), before anything is allocated for it. `Ok(Err(_))`: no memory
    /// to count it, nothing taken.
    pub(super) fn admit(
        &self,
        peer: Option<IpAddr>,
    ) -> core::result::Result<Result<Admission<'_>>, Refused> {
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
        Ok(Ok(Admission { state: self, peer }))
    }

    /// Gives back a place taken by [`State::admit`] for a connection that was
    /// never registered ([`Admission`]'s drop).
    fn unadmit(&self, peer: Option<IpAddr>) {
        let mut g = self.conns.lock();
        Self::unadmit_locked(&mut g, peer);
        self.stats.dec(Counter::ServerConnectionsOpen);
    }

    pub(super) fn unadmit_locked(g: &mut Conns, peer: Option<IpAddr>) {
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
    pub(super) fn retire(&self, conn: &Conn) {
        if conn.retired.swap(true, Ordering::AcqRel) {
            return;
        }
        let mut g = self.conns.lock();
        let Some(c) = g.open.remove(&conn.id) else {
            // Never registered (its creation failed early).
            return;
        };
        self.stats.dec(Counter::ConnectionsOpen);
        if c.role() == Role::Server {
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

    /// Starts listening on every endpoint of the `listen` parameter (test
    /// builds: the built-in echo service answers there).
    #[cfg(CONFIG_RPCRDMA_CM_TEST)]
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
    pub(super) fn forget_listener(&self, l: &Arc<Listener>) {
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
    pub(super) fn restart_listeners(&self) {
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

    /// `connect ADDR PORT` (test builds): starts a connection of the debugfs
    /// caller; its progress shows in `connections`.
    #[cfg(CONFIG_RPCRDMA_CM_TEST)]
    pub(super) fn connect(self: &Arc<Self>, sa: SocketAddr, over: &Advert) -> Result {
        self.stats.inc(Counter::Connects);
        let conn = self
            .new_conn(Upper::Caller, advertised(over), None)
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

    pub(super) fn find(&self, id: u32) -> Result<Arc<Conn>> {
        let g = self.conns.lock();
        if let Some(c) = g.open.get(&id) {
            return Ok(c.clone());
        }
        g.closed.iter().find(|c| c.id == id).cloned().ok_or(ENOENT)
    }

    /// Every connection, open and recently closed, by id; taken under the lock
    /// and used after it, so no `Conn` lock nests in it.
    pub(super) fn snapshot(&self) -> Result<KVec<Arc<Conn>>> {
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
    pub(super) fn open_snapshot(&self) -> Result<KVec<Arc<Conn>>> {
        let g = self.conns.lock();
        let mut v = KVec::with_capacity(g.open.iter().count(), GFP_KERNEL)?;
        for c in g.open.values() {
            v.push(c.clone(), GFP_KERNEL)?;
        }
        Ok(v)
    }

    /// `disconnect ID`.
    pub(super) fn disconnect(&self, id: u32) -> Result {
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
pub(super) fn snapshot<T>(list: &Mutex<KVec<Arc<T>>>) -> Result<KVec<Arc<T>>> {
    let l = list.lock();
    let mut v = KVec::with_capacity(l.len(), GFP_KERNEL)?;
    for x in l.iter() {
        v.push(x.clone(), GFP_KERNEL)?;
    }
    Ok(v)
}

/// A first-in first-out queue (the kernel crate, 7.3, has no VecDeque): a
/// ring over a vector that only grows (doubling), so a queue in steady use,
/// nfsd's calls, allocates nothing per item.
///
/// # Invariants
///
/// The items are the `len` slots from `head` on, wrapping around: those
/// are `Some`, every other slot is `None`; `head < buf.len()` unless `buf`
/// is empty.
pub(super) struct Fifo<T> {
    buf: KVec<Option<T>>,
    head: usize,
    len: usize,
}

impl<T> Fifo<T> {
    pub(super) const fn new() -> Self {
        Fifo {
            buf: KVec::new(),
            head: 0,
            len: 0,
        }
    }

    /// Appends `v`; without memory, hands it back, for the caller to drop
    /// after its lock.
    pub(super) fn push(&mut self, v: T) -> core::result::Result<(), T> {
        if self.len == self.buf.len() && self.grow().is_err() {
            return Err(v);
        }
        let at = (self.head + self.len) % self.buf.len();
        self.buf[at] = Some(v);
        self.len += 1;
        Ok(())
    }

    /// Twice the room (8 at first), the items moved to the front in order.
    fn grow(&mut self) -> Result {
        let cap = self.buf.len();
        let mut next = KVec::with_capacity(cap.saturating_mul(2).max(8), GFP_KERNEL)?;
        let room = next.capacity();
        // Within the capacity just allocated: nothing below can fail.
        for i in 0..self.len {
            let item = self.buf[(self.head + i) % cap].take();
            if next.push_within_capacity(item).is_err() {
                return Err(ENOMEM);
            }
        }
        while next.len() < room {
            if next.push_within_capacity(None).is_err() {
                return Err(ENOMEM);
            }
        }
        self.buf = next;
        self.head = 0;
        Ok(())
    }

    pub(super) fn pop(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        let v = self.buf[self.head].take();
        self.head = (self.head + 1) % self.buf.len();
        self.len -= 1;
        v
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Takes everything out (to be dropped outside the caller's lock).
    pub(super) fn take(&mut self) -> Fifo<T> {
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
        let now = now_coarse_ns();
        for c in open.iter() {
            let quiet = now - c.last_active.load(Ordering::Relaxed);
            let state = c.inner.lock().state;
            if state == ConnState::Disconnecting && quiet > grace {
                trace::closed(c.id, "disconnect_timeout", 0);
                c.close(Closed::Disconnected, 0);
            } else if c.role() == Role::Server
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

impl crate::sys::ib_client::DeviceHandler for State {
    fn device_added(&self) {
        self.restart_listeners();
    }
}
