// SPDX-License-Identifier: GPL-2.0

//! Connections and listeners: the RDMA-CM event logic of both roles, RFC 8797
//! private data on every connect and accept, and what debugfs shows of them.
//!
//! Lock rule: a `CmId` is never dropped while a `Conn` or `State` mutex is held
//! (dropping one takes the CM's handler lock and drains the QP, and handlers take
//! those mutexes): it is taken out under the lock and dropped after. Completion
//! handlers (`recv`, `send_done`) never drop it at all.

use core::fmt::{self, Write};
use core::net::SocketAddr;
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::prelude::*;
use kernel::sync::{Arc, CondVar, Mutex};
use kernel::{new_condvar, new_mutex};

mod client;
mod xprt;
pub(crate) use xprt::{BenchFile, RpcsFile, XprtFile};

use crate::proto::config::{listen_list, parse_command, Advert, Command};
use crate::proto::negotiate::{negotiate, Negotiated, Role};
use crate::proto::pvt_data::{parse, Outcome, PrivateData};
use crate::stats::{Counter, Stats, XprtStats};
use crate::sys::debugfs::{SeqFile, Show};
use crate::sys::errno::enotconn;
use crate::sys::param;
use crate::sys::rdma_cm::{
    CmHandler, CmId, CmIdRef, Completion, ConnectRequest, Endpoint, Event, EventKind, Names,
};

/// Address and route resolution timeout.
const RESOLVE_TIMEOUT_MS: usize = 5000;
/// Send and Receive work requests per QP.
const QP_DEPTH: u32 = 32;
/// Pending connection requests per listener.
const BACKLOG: i32 = 16;
/// Closed connections kept for debugfs; older ones are forgotten.
const KEEP_CLOSED: usize = 64;
/// Octets of received private data kept for display (the CM delivers at most 196
/// on IB and RoCE).
const PVT_KEEP: usize = 256;

/// What we advertise now, with a connection's overrides on top of the module
/// parameters: `None` for legacy (no private data at all).
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

fn endpoint(sa: &SocketAddr) -> Endpoint {
    Endpoint {
        addr: sa.ip(),
        port: sa.port(),
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

/// Module-wide state: counters, connections and listeners.
#[pin_data]
pub(crate) struct State {
    pub(crate) stats: Stats,
    next_id: AtomicU32,
    #[pin]
    conns: Mutex<KVec<Arc<Conn>>>,
    #[pin]
    listeners: Mutex<KVec<Arc<Listener>>>,
    #[pin]
    rpcs: Mutex<xprt::RpcLog>,
    #[pin]
    bench: Mutex<Option<client::BenchResult>>,
}

impl State {
    pub(crate) fn new() -> Result<Arc<State>> {
        Arc::pin_init(
            pin_init!(State {
                stats: Stats::default(),
                next_id: AtomicU32::new(1),
                conns <- new_mutex!(KVec::new()),
                listeners <- new_mutex!(KVec::new()),
                rpcs <- new_mutex!(xprt::RpcLog::new()),
                bench <- new_mutex!(None),
            }),
            GFP_KERNEL,
        )
    }

    fn new_conn(self: &Arc<Self>, role: Role, ours: Option<PrivateData>) -> Result<Arc<Conn>> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let conn = Arc::pin_init(
            pin_init!(Conn {
                id,
                role,
                state: self.clone(),
                xs: XprtStats::default(),
                inner <- new_mutex!(ConnInner::new(ours, id.wrapping_mul(0x0100_0000))),
                cv <- new_condvar!(),
            }),
            GFP_KERNEL,
        )?;
        let mut conns = self.conns.lock();
        conns.push(conn.clone(), GFP_KERNEL)?;
        // Forget the oldest closed connections beyond KEEP_CLOSED.
        let closed = conns.iter().filter(|c| c.is_closed()).count();
        if closed > KEEP_CLOSED {
            let mut drop_n = closed - KEEP_CLOSED;
            let mut kept = KVec::with_capacity(conns.len(), GFP_KERNEL)?;
            for c in conns.iter() {
                if drop_n > 0 && c.is_closed() {
                    drop_n -= 1;
                } else {
                    kept.push(c.clone(), GFP_KERNEL)?;
                }
            }
            *conns = kept;
        }
        Ok(conn)
    }

    /// Starts listening on every endpoint of the `listen` parameter.
    pub(crate) fn start_listeners(self: &Arc<Self>) -> Result {
        for ep in listen_list(param::listen()) {
            let ep = ep.ok_or(EINVAL)?;
            let l = Listener::new(self.clone(), ep).inspect_err(|e| {
                self.stats.inc(Counter::ErrListen);
                pr_err!("cannot listen on {}: error {}\n", ep, e.to_errno());
            })?;
            pr_info!("listening on {}\n", ep);
            self.listeners.lock().push(l, GFP_KERNEL)?;
        }
        Ok(())
    }

    /// Listens again on every endpoint whose listener lost its device.
    fn restart_listeners(&self) {
        let Ok(listeners) = snapshot(&self.listeners) else {
            return;
        };
        for l in listeners.iter() {
            if l.cm.lock().is_some() {
                continue;
            }
            // The device that was added may not be the one with our address:
            // then the listener stays dead until another comes.
            let restarted = CmId::new(l.clone())
                .and_then(|cm| cm.listen(&endpoint(&l.ep), BACKLOG).map(|()| cm));
            if let Ok(cm) = restarted {
                *l.cm.lock() = Some(cm);
                self.stats.inc(Counter::ListenerRestarts);
                pr_info!("listening on {} again\n", l.ep);
            }
        }
    }

    /// `connect ADDR PORT`: starts a client connection; its progress shows in
    /// `connections`.
    fn connect(self: &Arc<Self>, sa: SocketAddr, over: &Advert) -> Result {
        self.stats.inc(Counter::Connects);
        let conn = self
            .new_conn(Role::Client, advertised(over))
            .inspect_err(|_| {
                self.stats.inc(Counter::ErrAlloc);
            })?;
        let cm = CmId::new(conn.clone()).inspect_err(|e| {
            self.stats.inc(Counter::ErrAlloc);
            conn.inner.lock().close("create_failed", e.to_errno());
        })?;
        let mut g = conn.inner.lock();
        g.peer_addr = Some(sa);
        g.state = "resolving";
        // Events cannot reach the handler before we release `g`: it locks it.
        match cm.resolve_addr(&endpoint(&sa), RESOLVE_TIMEOUT_MS) {
            Ok(()) => {
                g.cm = Some(cm);
                Ok(())
            }
            Err(e) => {
                self.stats.inc(Counter::ErrResolve);
                g.close("resolve_failed", e.to_errno());
                drop(g);
                drop(cm);
                Err(e)
            }
        }
    }

    fn find(&self, id: u32) -> Result<Arc<Conn>> {
        self.conns
            .lock()
            .iter()
            .find(|c| c.id == id)
            .cloned()
            .ok_or(ENOENT)
    }

    /// A snapshot of the connection list, so no `Conn` lock nests in the list lock.
    fn snapshot(&self) -> Result<KVec<Arc<Conn>>> {
        snapshot(&self.conns)
    }

    /// `disconnect ID`.
    fn disconnect(&self, id: u32) -> Result {
        let conn = self.find(id)?;
        let cm = {
            let mut g = conn.inner.lock();
            let cm = g.cm.take().ok_or_else(enotconn)?;
            g.close("closed_by_user", 0);
            cm
        };
        conn.cv.notify_all();
        self.stats.inc(Counter::UserDisconnects);
        // Destroying the id sends the peer a disconnect request.
        drop(cm);
        Ok(())
    }

    /// Unload: no new connections, then every id destroyed, then the references
    /// between state and connections released.
    pub(crate) fn shutdown(&self) {
        let listeners = core::mem::take(&mut *self.listeners.lock());
        for l in listeners.iter() {
            let cm = l.cm.lock().take();
            drop(cm);
        }
        let conns = core::mem::take(&mut *self.conns.lock());
        for c in conns.iter() {
            let cm = {
                let mut g = c.inner.lock();
                g.x.fail_all(enotconn().to_errno());
                g.cm.take()
            };
            c.cv.notify_all();
            drop(cm);
        }
    }
}

/// One connection, either role.
#[pin_data]
pub(crate) struct Conn {
    id: u32,
    role: Role,
    state: Arc<State>,
    xs: XprtStats,
    #[pin]
    inner: Mutex<ConnInner>,
    /// Signalled when a reply arrives, a credit frees up or the connection ends.
    #[pin]
    cv: CondVar,
}

struct ConnInner {
    state: &'static str,
    error: i32,
    names: Option<Names>,
    peer_addr: Option<SocketAddr>,
    /// What we advertised; `None`: legacy, nothing sent.
    ours: Option<PrivateData>,
    peer_pvt: [u8; PVT_KEEP],
    peer_pvt_len: usize,
    outcome: Option<Outcome>,
    negotiated: Option<Negotiated>,
    ord: u8,
    cm: Option<CmId>,
    x: xprt::XprtState,
}

impl ConnInner {
    fn new(ours: Option<PrivateData>, first_xid: u32) -> Self {
        ConnInner {
            state: "new",
            error: 0,
            names: None,
            peer_addr: None,
            ours,
            peer_pvt: [0; PVT_KEEP],
            peer_pvt_len: 0,
            outcome: None,
            negotiated: None,
            ord: 0,
            cm: None,
            x: xprt::XprtState::new(first_xid),
        }
    }

    fn close(&mut self, state: &'static str, error: i32) {
        self.state = state;
        self.error = error;
        self.x.fail_all(enotconn().to_errno());
    }

    /// Sizes of our Send and Receive buffers: what we advertised (the RFC 8797
    /// defaults for a legacy connection). Negotiated thresholds never exceed them.
    fn buffer_sizes(&self) -> (u32, u32) {
        let ours = self.ours.unwrap_or(PrivateData::DEFAULT);
        (ours.send_size, ours.recv_size)
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

impl Conn {
    fn is_closed(&self) -> bool {
        let g = self.inner.lock();
        g.cm.is_none() && g.state != "new"
    }

    /// Records a final state and releases the id (from inside its handler: the CM
    /// destroys it once the handler returns).
    fn close(&self, state: &'static str, error: i32) {
        let cm = {
            let mut g = self.inner.lock();
            g.close(state, error);
            g.cm.take()
        };
        self.cv.notify_all();
        drop(cm);
    }

    fn stats(&self) -> &Stats {
        &self.state.stats
    }

    fn route_resolved(&self, id: &CmIdRef<'_>) -> Result {
        let (send, recv) = self.inner.lock().buffer_sizes();
        id.create_qp(QP_DEPTH, send, recv)
            .inspect_err(|_| self.stats().inc(Counter::ErrQpCreate))?;
        let pdata = {
            let mut g = self.inner.lock();
            g.names = Some(id.names());
            g.state = "connecting";
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
fn ending(kind: EventKind) -> Option<(Counter, &'static str)> {
    Some(match kind {
        EventKind::AddrError => (Counter::AddrErrors, "addr_error"),
        EventKind::RouteError => (Counter::RouteErrors, "route_error"),
        EventKind::ConnectError => (Counter::ConnectErrors, "connect_error"),
        EventKind::Unreachable => (Counter::Unreachable, "unreachable"),
        EventKind::Rejected => (Counter::RejectedByPeer, "rejected"),
        EventKind::Disconnected => (Counter::Disconnects, "disconnected"),
        EventKind::DeviceRemoval => (Counter::DeviceRemovals, "device_removed"),
        _ => return None,
    })
}

impl CmHandler for Conn {
    fn event(&self, id: &CmIdRef<'_>, ev: &Event<'_>) {
        let st = self.stats();
        match ev.kind {
            EventKind::AddrResolved => {
                if let Err(e) = id.resolve_route(RESOLVE_TIMEOUT_MS) {
                    st.inc(Counter::ErrResolve);
                    self.close("route_failed", e.to_errno());
                }
            }
            EventKind::RouteResolved => {
                if let Err(e) = self.route_resolved(id) {
                    self.close("connect_failed", e.to_errno());
                }
            }
            EventKind::Established => {
                st.inc(Counter::Established);
                let mut g = self.inner.lock();
                g.names = Some(id.names());
                g.state = "established";
                // The passive side learnt the client's private data and read
                // depth at CONNECT_REQUEST; the active side learns the server's
                // here (the passive side's ESTABLISHED carries neither).
                if self.role == Role::Client {
                    g.ord = ev.initiator_depth;
                    g.negotiate(Role::Client, ev.private_data, st);
                }
            }
            EventKind::AddrChange => {
                st.inc(Counter::AddrChanges);
                // As xprtrdma does: the address moved, so drop the connection.
                let _ = id.disconnect();
            }
            EventKind::TimewaitExit => st.inc(Counter::TimewaitExits),
            kind => {
                if let Some((counter, state)) = ending(kind) {
                    st.inc(counter);
                    self.close(state, ev.status);
                }
            }
        }
    }

    fn recv(&self, id: &CmIdRef<'_>, wc: &Completion<'_>) {
        self.on_recv(id, wc);
    }

    fn send_done(&self, id: &CmIdRef<'_>, wc: &Completion<'_>) {
        self.on_send_done(id, wc);
    }
}

impl crate::sys::ib_client::DeviceHandler for State {
    fn device_added(&self) {
        self.restart_listeners();
    }
}

/// A server-side listener.
#[pin_data]
pub(crate) struct Listener {
    ep: SocketAddr,
    state: Arc<State>,
    #[pin]
    cm: Mutex<Option<CmId>>,
}

impl Listener {
    fn new(state: Arc<State>, ep: SocketAddr) -> Result<Arc<Listener>> {
        let l = Arc::pin_init(
            pin_init!(Listener {
                ep,
                state,
                cm <- new_mutex!(None),
            }),
            GFP_KERNEL,
        )?;
        let cm = CmId::new(l.clone())?;
        cm.listen(&endpoint(&ep), BACKLOG)?;
        *l.cm.lock() = Some(cm);
        Ok(l)
    }

    fn accept(&self, req: &mut ConnectRequest<'_>, ev: &Event<'_>) -> Result {
        let st = &self.state.stats;
        let ours = advertised(&Advert::default());
        let conn = self
            .state
            .new_conn(Role::Server, ours)
            .inspect_err(|_| st.inc(Counter::ErrAlloc))?;
        let (pdata, (send, recv)) = {
            let mut g = conn.inner.lock();
            g.names = Some(req.names());
            g.state = "accepting";
            g.ord = ev.initiator_depth;
            g.negotiate(Role::Server, ev.private_data, st);
            (g.ours.map(|p| p.encode()), g.buffer_sizes())
        };
        let bytes: &[u8] = match &pdata {
            Some(p) => p,
            None => &[],
        };
        match req.accept(
            conn.clone(),
            bytes,
            (QP_DEPTH, send, recv),
            ev.initiator_depth,
        ) {
            Ok(cm) => {
                st.inc(Counter::Accepts);
                conn.inner.lock().cm = Some(cm);
                Ok(())
            }
            Err(e) => {
                st.inc(Counter::ErrAccept);
                conn.inner.lock().close("accept_failed", e.to_errno());
                Err(e)
            }
        }
    }
}

impl CmHandler for Listener {
    fn event(&self, _id: &CmIdRef<'_>, ev: &Event<'_>) {
        let st = &self.state.stats;
        match ev.kind {
            EventKind::DeviceRemoval => {
                st.inc(Counter::DeviceRemovals);
                pr_warn!(
                    "listener {}: device removed, not listening until a device is added\n",
                    self.ep
                );
                let cm = self.cm.lock().take();
                drop(cm);
            }
            EventKind::AddrChange => st.inc(Counter::AddrChanges),
            _ => {}
        }
    }

    fn connect_request(&self, req: &mut ConnectRequest<'_>, ev: &Event<'_>) {
        let st = &self.state.stats;
        st.inc(Counter::ConnectRequests);
        if self.accept(req, ev).is_err() {
            st.inc(Counter::RejectsSent);
        }
    }
}

fn hex(m: &mut SeqFile<'_>, b: &[u8]) -> fmt::Result {
    if b.is_empty() {
        return m.write_str("-");
    }
    b.iter().try_for_each(|x| write!(m, "{:02x}", x))
}

impl Conn {
    /// One line of `connections`: `key=value` fields separated by spaces.
    fn show_line(&self, m: &mut SeqFile<'_>) -> fmt::Result {
        let g = self.inner.lock();
        write!(
            m,
            "id={} role={} state={}",
            self.id,
            self.role.name(),
            g.state
        )?;
        if g.error != 0 {
            write!(m, " error={}", g.error)?;
        }
        match &g.names {
            Some(n) => write!(
                m,
                " dev={} local={} peer={}",
                n.device(),
                n.local(),
                n.peer()
            )?,
            None => match &g.peer_addr {
                Some(p) => write!(m, " dev=- local=- peer={}", p)?,
                None => m.write_str(" dev=- local=- peer=-")?,
            },
        }
        m.write_str(" sent=")?;
        match &g.ours {
            Some(p) => hex(m, &p.encode())?,
            None => m.write_str("-")?,
        }
        // Trailing zero octets are the CM's padding, not the peer's data.
        let kept = &g.peer_pvt[..g.peer_pvt_len.min(PVT_KEEP)];
        let used = kept.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
        write!(m, " peer_pvt_len={} peer_pvt=", g.peer_pvt_len)?;
        hex(m, &kept[..used])?;
        match &g.outcome {
            None => m.write_str(" outcome=-")?,
            Some(o) => {
                write!(m, " outcome={}", o.name())?;
                match o {
                    Outcome::Found { offset, .. }
                    | Outcome::Truncated { offset }
                    | Outcome::UnknownVersion { offset, .. } => write!(m, " offset={}", offset)?,
                    _ => {}
                }
            }
        }
        if let Some(n) = &g.negotiated {
            let p = &n.peer;
            write!(
                m,
                " peer_r={} peer_send={} peer_recv={} c2s={} s2c={} reminv={}",
                u8::from(p.remote_invalidate),
                p.send_size,
                p.recv_size,
                n.c2s,
                n.s2c,
                u8::from(n.remote_invalidation)
            )?;
        }
        writeln!(m, " ord={}", g.ord)
    }
}

/// `connections`: one line per connection.
pub(crate) struct ConnectionsFile(pub(crate) Arc<State>);

impl Show for ConnectionsFile {
    fn show(&self, m: &mut SeqFile<'_>) -> fmt::Result {
        let snapshot = self.0.snapshot().map_err(|_| fmt::Error)?;
        snapshot.iter().try_for_each(|c| c.show_line(m))
    }
}

/// `listeners`: one line per listener.
pub(crate) struct ListenersFile(pub(crate) Arc<State>);

impl Show for ListenersFile {
    fn show(&self, m: &mut SeqFile<'_>) -> fmt::Result {
        for l in self.0.listeners.lock().iter() {
            let state = if l.cm.lock().is_some() {
                "listening"
            } else {
                "dead"
            };
            writeln!(m, "addr={} state={}", l.ep, state)?;
        }
        Ok(())
    }
}

/// `control`: commands written by root; reads show the syntax.
pub(crate) struct ControlFile(pub(crate) Arc<State>);

impl Show for ControlFile {
    fn show(&self, m: &mut SeqFile<'_>) -> fmt::Result {
        m.write_str(
            "connect ADDR PORT [send_size=N] [recv_size=N] [remote_invalidate=0|1] [legacy=0|1]\n\
             disconnect ID\n\
             call ID null\n\
             call ID echo LEN\n\
             call ID rpc PROG VERS PROC\n\
             call ID nfs getattr|read|write|readdir NAME ...\n\
             bench ID N <what call takes after ID>\n",
        )
    }

    fn write(&self, text: &str) -> Result {
        match parse_command(text) {
            Some(Command::Connect(sa, over)) => self.0.connect(sa, &over),
            Some(Command::Disconnect(id)) => self.0.disconnect(id),
            Some(Command::Call(id, spec)) => self.0.find(id)?.call(&spec),
            Some(Command::Bench(id, n, spec)) => {
                let r = self.0.find(id)?.bench(n, &spec)?;
                *self.0.bench.lock() = Some(r);
                Ok(())
            }
            None => {
                pr_warn!("control: unknown command '{}'\n", text.trim());
                Err(EINVAL)
            }
        }
    }
}

/// `params`: what we advertise now, as we would send it.
pub(crate) struct ParamsFile;

impl Show for ParamsFile {
    fn show(&self, m: &mut SeqFile<'_>) -> fmt::Result {
        writeln!(m, "send_size {}", param::send_size())?;
        writeln!(m, "recv_size {}", param::recv_size())?;
        writeln!(
            m,
            "remote_invalidate {}",
            u8::from(param::remote_invalidate())
        )?;
        writeln!(m, "legacy {}", u8::from(param::legacy()))?;
        m.write_str("private_data ")?;
        match advertised(&Advert::default()) {
            Some(p) => hex(m, &p.encode())?,
            None => m.write_str("-")?,
        }
        writeln!(m)
    }
}
