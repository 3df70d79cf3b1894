// SPDX-License-Identifier: GPL-2.0

//! Connections: the RDMA-CM event logic of both roles and RFC 8797 private
//! data on every connect and accept. The module-wide state (registry,
//! admission, idle timeout) is in `registry`, the listeners in `listener`,
//! what debugfs shows of them in `debugfs`.
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
//! - A mount transport's lock may be taken before a `Conn` lock, never after
//!   (`rpc_xprt`: the connection handed to sunrpc).
//! - A holder of a [`Qp`] handle or chunk lets go once the connection has failed
//!   (it is woken for that): the teardown waits for it.

use core::any::Any;
use core::net::{IpAddr, SocketAddr};
use core::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, Ordering};
use kernel::prelude::*;
use kernel::sync::{Arc, Mutex};

#[cfg(CONFIG_RPCRDMA_CM_TEST)]
mod client;
mod debugfs;
#[cfg(CONFIG_RPCRDMA_CM_TEST)]
mod echo;
mod id_slot;
mod listener;
mod registry;
mod requester;
mod responder;
mod rpc_xprt;
#[cfg(CONFIG_RPCRDMA_CM_TEST)]
mod rpcs;
mod svc;
mod testing;
mod xprt;
pub(crate) use debugfs::{ConnectionsFile, ControlFile, ListenersFile, ParamsFile};
use id_slot::IdSlot;
use listener::Listener;
pub(crate) use registry::State;
use registry::{snapshot, Fifo, Refused};
pub(crate) use rpc_xprt::ClientFactory;
#[cfg(CONFIG_RPCRDMA_CM_TEST)]
pub(crate) use rpcs::RpcsFile;
pub(crate) use svc::Factory;
pub(crate) use testing::BenchFile;
pub(crate) use xprt::XprtFile;

use crate::proto::config::Advert;
use crate::proto::conn_state::{Closed, ConnState};
use crate::proto::negotiate::{negotiate, Negotiated, Role};
use crate::proto::pvt_data::{parse, Outcome, PrivateData};
use crate::stats::{Counter, Stats, XprtStats};
use crate::sys::param;
use crate::sys::qp::{Qp, QpAttr, SEND_BATCH};
use crate::sys::rdma_cm::{
    CmHandler, CmId, Completion, DevCaps, Endpoint, Event, EventKind, HandlerId, Names,
};
use crate::sys::trace;
use crate::sys::wait::KillableCondVar;

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

use crate::sys::time::now_coarse_ns;

/// What a connection carries: the one upper layer above it, fixed when the
/// connection is made, with the state only that upper needs. It decides the
/// role, where a received message goes ([`Conn::on_recv`]), the QP's depths,
/// the credits kept back, what the close tells and what debugfs calls it.
enum Upper {
    /// Server: accepted on a listener nfsd made; calls go to nfsd.
    Nfsd(Pin<KBox<svc::NfsdSide>>),
    /// Client: an NFS mount's transport.
    Mount(Pin<KBox<rpc_xprt::MountSide>>),
    /// Client (test builds): the debugfs caller (`control`'s `connect`).
    #[cfg(CONFIG_RPCRDMA_CM_TEST)]
    Caller,
    /// Server (test builds): accepted on a `listen` listener; the built-in
    /// echo service answers.
    #[cfg(CONFIG_RPCRDMA_CM_TEST)]
    Echo,
}

impl Upper {
    pub(super) fn role(&self) -> Role {
        match self {
            Upper::Nfsd(_) => Role::Server,
            Upper::Mount(_) => Role::Client,
            #[cfg(CONFIG_RPCRDMA_CM_TEST)]
            Upper::Echo => Role::Server,
            #[cfg(CONFIG_RPCRDMA_CM_TEST)]
            Upper::Caller => Role::Client,
        }
    }

    /// What `connections` says the connection is for, if anything.
    pub(super) fn for_name(&self) -> Option<&'static str> {
        match self {
            Upper::Nfsd(_) => Some("nfsd"),
            Upper::Mount(_) => Some("mount"),
            #[cfg(CONFIG_RPCRDMA_CM_TEST)]
            Upper::Caller | Upper::Echo => None,
        }
    }

    /// A client connection's Send and Receive queue depths and the Receives
    /// posted before it connects: a mount's also takes the server's
    /// backchannel Calls. (A server connection's are the listener's.)
    fn client_depths(&self) -> (u32, u32, u32) {
        match self {
            Upper::Mount(_) => (
                rpc_xprt::MOUNT_SEND_DEPTH,
                rpc_xprt::MOUNT_RECV_DEPTH,
                rpc_xprt::MOUNT_RECV_INITIAL,
            ),
            _ => (SEND_DEPTH, RECV_DEPTH, RECV_DEPTH),
        }
    }

    /// Whether the upper takes its Receives in the CQ's context, as
    /// svcrdma and xprtrdma do: nfsd's connections only queue each call for
    /// an nfsd thread; a mount's Reply posts its LOCAL_INVs and completes
    /// the call from the last one's completion, never waiting for one. The
    /// others may wait (the echo service's RDMA Read, the debugfs caller's
    /// LOCAL_INVs), so theirs come from the Receive work.
    fn recv_direct(&self) -> bool {
        matches!(self, Upper::Nfsd(_) | Upper::Mount(_))
    }

    /// Credits a server connection keeps back from its grant's count of free
    /// Receives: nfsd's keep room for the Replies to its backchannel Calls.
    fn credit_reserve(&self) -> u32 {
        match self {
            Upper::Nfsd(_) => svc::BC_RESERVE,
            _ => 0,
        }
    }

    /// Tells the upper that `conn` closed: once, from [`Conn::close_keep_id`],
    /// with no lock of the connection's held.
    fn closed(&self, conn: &Conn) {
        match self {
            Upper::Nfsd(n) => n.closed(),
            Upper::Mount(m) => m.closed(conn),
            #[cfg(CONFIG_RPCRDMA_CM_TEST)]
            Upper::Caller | Upper::Echo => {}
        }
    }
}

/// One connection, either role.
///
/// Fields are immutable (`id`, `upper`, `peer_ip`, `state`), atomic (`xs`,
/// `retired`, `last_active`, `credits`), or under `inner`'s mutex (everything in
/// [`ConnInner`]); `cv` is waited on with `inner`'s guard. What the upper
/// keeps is under its own lock, never taken with `inner` held.
///
/// # Invariants
///
/// - The CM id in `inner.cm` is released only after `inner` is unlocked
///   ([`IdSlot::take_unlocked`]): releasing it may wait for the id's handler,
///   which locks `inner`.
/// - Once `inner.state` is closed it stays closed, and `retired` is set by
///   the close ([`State::retire`]), once.
#[pin_data]
pub(crate) struct Conn {
    /// Its number in debugfs and tracepoints (immutable).
    id: u32,
    /// What it carries (immutable).
    upper: Upper,
    /// Server: the client's address, counted under `max_connections_per_peer`
    /// (immutable).
    peer_ip: Option<IpAddr>,
    /// The module-wide state it is registered in (immutable).
    state: Arc<State>,
    /// Its messaging counters (atomics).
    xs: XprtStats,
    /// Moved to the closed ones (see [`State::retire`]).
    retired: AtomicBool,
    /// When it last received or sent a message (monotonic ns, coarse).
    last_active: AtomicI64,
    /// Client: the credits the server granted (RFC 8166 Section 3.3.1), 1
    /// until the first Reply. Server: the last grant we sent.
    credits: AtomicU32,
    #[pin]
    inner: Mutex<ConnInner>,
    /// Signalled when a reply arrives, a credit frees up or the connection ends.
    #[pin]
    cv: KillableCondVar,
}

/// A connection's changing state, under its mutex ([`Conn`]'s `inner`).
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
    /// The debugfs caller's calls in flight (test builds).
    #[cfg(CONFIG_RPCRDMA_CM_TEST)]
    x: client::CallerSlots,
}

impl ConnInner {
    fn new(ours: Option<PrivateData>) -> Self {
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
            #[cfg(CONFIG_RPCRDMA_CM_TEST)]
            x: client::CallerSlots::new(param::random_u32()),
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
    /// Client or server: what [`Upper`] it carries says.
    fn role(&self) -> Role {
        self.upper.role()
    }

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
        let cm = {
            let mut g = self.inner.lock();
            if !g.state.close(why, status) {
                return Closing::Already;
            }
            trace::closed(self.id, why.name(), status);
            #[cfg(CONFIG_RPCRDMA_CM_TEST)]
            g.x.fail_all(ENOTCONN.to_errno());
            IdSlot::take_unlocked(g, |i| &mut i.cm)
        };
        // nfsd closes its transport and the calls it never saw give their
        // buffers back; a mount's transport learns that its connection is
        // gone.
        self.upper.closed(self);
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

    /// The connection's credits (see the field).
    fn credits(&self) -> u32 {
        self.credits.load(Ordering::Relaxed)
    }

    fn set_credits(&self, n: u32) {
        self.credits.store(n, Ordering::Relaxed);
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
            server: self.role() == Role::Server,
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

    /// Whether the connection closed (`retired` is set by the close): read
    /// without the lock, for paths that must not start anything on a
    /// connection that is going.
    fn is_retired(&self) -> bool {
        self.retired.load(Ordering::Acquire)
    }

    /// Marks the connection active now (the idle timeout counts from here).
    fn touch(&self) {
        self.last_active.store(now_coarse_ns(), Ordering::Relaxed);
    }

    fn route_resolved(&self, id: &HandlerId<'_>) -> Result {
        let caps = id.caps();
        let (send, recv) = {
            let mut g = self.inner.lock();
            g.set_device(caps, self.stats());
            g.buffer_sizes()
        };
        let (sends, receives, initial) = self.upper.client_depths();
        id.create_qp(&QpAttr {
            send_depth: sends,
            recv_depth: receives,
            recv_initial: initial,
            send_size: send,
            recv_size: recv,
            recv_direct: self.upper.recv_direct(),
            // The active side: a requester (a mount, the debugfs caller).
            registers: true,
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
                if self.role() == Role::Client {
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
