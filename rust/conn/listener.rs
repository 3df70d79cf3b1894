// SPDX-License-Identifier: GPL-2.0

//! Server-side listeners: one RDMA CM id listening on an endpoint, for nfsd
//! (a listener transport nfsd created) or for the `listen` parameter, and the
//! connections it accepted that nfsd has not taken yet.

use super::{
    advertised, endpoint, svc, Conn, Counter, Fifo, Refused, State, Upper, BACKLOG, RECV_BUDGET,
    RECV_DEPTH, SEND_DEPTH,
};
use crate::proto::config::Advert;
use crate::proto::conn_state::{initial_receives, Closed, ConnState};
use crate::proto::negotiate::Role;
use crate::sys::debugfs::SeqFile;
use crate::sys::param;
use crate::sys::qp::QpAttr;
use crate::sys::rdma_cm::{CmHandler, CmId, ConnectRequest, Event, EventKind, HandlerId, Net};
use crate::sys::svc::{PendingXprt, SvcListenerRef};
use crate::sys::trace;
use core::fmt::{self, Write};
use core::net::SocketAddr;
use kernel::new_mutex;
use kernel::prelude::*;
use kernel::sync::{Arc, Mutex};

/// Where a listener is in its life.
///
/// `Dead` → `Starting` → `Listening` → `Dead` (device removed) → ... until
/// [`Listener::stop`] makes it `Stopped`, which nothing leaves: a device
/// added later never restarts a listener nfsd has closed.
enum ListenerState {
    /// `rdma_listen()` is being called; a device removal meanwhile makes it
    /// [`ListenerState::Dead`] (a stop [`ListenerState::Stopped`]) and the
    /// starter destroys its id.
    Starting,
    /// Owns the listening id (dropping it stops listening).
    Listening { _id: CmId },
    /// Its device went away: not listening until a device is added.
    Dead,
    /// Stopped for good (nfsd closed it, or the module unloads).
    Stopped,
}

/// A connection accepted for nfsd that nfsd has not taken yet (xpo_accept).
///
/// # Invariants
///
/// `xprt` is `Some` until nfsd takes it ([`Unaccepted::take`]); while it is,
/// `conn` holds a counted reference on the same transport (its `NfsdSide`)
/// and the transport's context holds `conn`: a cycle that only nfsd's
/// xpo_detach breaks. An entry nfsd never takes breaks it when dropped: the
/// connection is closed, its reference dropped, then the transport's first
/// reference, which frees the transport and with it the connection.
struct Unaccepted {
    xprt: Option<PendingXprt>,
    conn: Arc<Conn>,
}

impl Unaccepted {
    /// nfsd takes the transport: from now on nfsd's xpo_detach ends it.
    fn take(mut self) -> Option<PendingXprt> {
        self.xprt.take()
    }
}

impl Drop for Unaccepted {
    fn drop(&mut self) {
        if self.xprt.is_none() {
            return;
        }
        // Not from the connection's own CM handler (the id is only stored
        // once queued): the id's teardown is deferred anyway, as the caller
        // may hold nfsd's locks.
        self.conn.close_deferred(Closed::NotAcceptedByNfsd);
        self.conn.svc_detach();
        // `xprt` goes after this body: the transport's last reference.
    }
}

/// A server-side listener.
#[pin_data]
pub(crate) struct Listener {
    pub(super) ep: SocketAddr,
    pub(super) state: Arc<State>,
    /// A listener nfsd made: its transport and namespace.
    svc: Option<(SvcListenerRef, Net)>,
    #[pin]
    inner: Mutex<ListenerState>,
    /// nfsd's: connections accepted, waiting for nfsd's xpo_accept.
    #[pin]
    pending: Mutex<Fifo<Unaccepted>>,
}

impl Listener {
    /// A listener for the built-in echo service (`listen`, test builds).
    #[cfg(CONFIG_RPCRDMA_CM_TEST)]
    pub(super) fn new(state: Arc<State>, ep: SocketAddr) -> Result<Arc<Listener>> {
        Self::new_with(state, ep, None)
    }

    /// A listener for nfsd, in its namespace (xpo_create).
    pub(super) fn new_for_nfsd(
        state: Arc<State>,
        ep: SocketAddr,
        me: SvcListenerRef,
        net: &Net,
    ) -> Result<Arc<Listener>> {
        Self::new_with(state, ep, Some((me, net.clone())))
    }

    fn new_with(
        state: Arc<State>,
        ep: SocketAddr,
        svc: Option<(SvcListenerRef, Net)>,
    ) -> Result<Arc<Listener>> {
        Arc::pin_init(
            pin_init!(Listener {
                ep,
                state,
                svc,
                inner <- new_mutex!(ListenerState::Dead),
                pending <- new_mutex!(Fifo::new()),
            }),
            GFP_KERNEL,
        )
    }

    /// nfsd's xpo_accept: the next connection accepted, and whether more wait.
    pub(super) fn next_accepted(&self) -> (Option<PendingXprt>, bool) {
        let mut g = self.pending.lock();
        let next = g.pop();
        let more = !g.is_empty();
        drop(g);
        (next.and_then(Unaccepted::take), more)
    }

    pub(super) fn is_dead(&self) -> bool {
        matches!(*self.inner.lock(), ListenerState::Dead)
    }

    /// Listens. `Ok(false)` if the device went away while it started (the
    /// listener is dead until a device is added).
    pub(super) fn start(self: &Arc<Self>) -> Result<bool> {
        {
            let mut g = self.inner.lock();
            if !matches!(*g, ListenerState::Dead) {
                return Err(EBUSY);
            }
            *g = ListenerState::Starting;
        }
        let cm = CmId::new_in(self.clone(), self.svc.as_ref().map(|(_, n)| n))
            .and_then(|cm| cm.listen(&endpoint(&self.ep), BACKLOG).map(|()| cm));
        let cm = match cm {
            Ok(cm) => cm,
            Err(e) => {
                let mut g = self.inner.lock();
                if let ListenerState::Starting = *g {
                    *g = ListenerState::Dead;
                }
                return Err(e);
            }
        };
        param::test_listen_delay();
        let mut g = self.inner.lock();
        if let ListenerState::Starting = *g {
            *g = ListenerState::Listening { _id: cm };
            return Ok(true);
        }
        // DEVICE_REMOVAL (or a stop) came meanwhile and found nothing to
        // destroy: we do it, so the CM can let the device go.
        let stopped = matches!(*g, ListenerState::Stopped);
        drop(g);
        drop(cm);
        if stopped {
            // What the id accepted before it went, nfsd will never take
            // (dropped after the queue's lock).
            let q = self.pending.lock().take();
            drop(q);
        }
        Ok(false)
    }

    /// Stops listening for good (nfsd closed the listener, or unload).
    /// Dropping the listening id waits for its handler, so once it is gone
    /// no connection is queued any more: those queued are closed.
    pub(super) fn stop(&self) {
        let old = core::mem::replace(&mut *self.inner.lock(), ListenerState::Stopped);
        drop(old);
        // Connections nfsd never accepted go with the listener.
        let pending = self.pending.lock().take();
        drop(pending);
    }

    fn accept(&self, req: &mut ConnectRequest<'_>, ev: &Event<'_>) -> Result {
        let st = &self.state.stats;
        let peer = req.peer().map(|p| p.ip());
        let admission = match self.state.admit(peer) {
            Ok(r) => r.inspect_err(|_| st.inc(Counter::ErrAlloc))?,
            Err(Refused::MaxConnections) => {
                st.inc(Counter::RejectsMaxConnections);
                trace::reject(req.names().peer(), "max_connections");
                return Err(EAGAIN);
            }
            Err(Refused::MaxPerPeer) => {
                st.inc(Counter::RejectsMaxPerPeer);
                trace::reject(req.names().peer(), "max_connections_per_peer");
                return Err(EAGAIN);
            }
        };
        // Without a registered connection the admission's drop gives its
        // place back.
        let conn = match self
            .upper()
            .and_then(|u| self.state.new_conn(u, advertised(&Advert::default()), peer))
            .and_then(|c| admission.register(&c).map(|()| c))
        {
            Ok(c) => c,
            Err(e) => {
                st.inc(Counter::ErrAlloc);
                return Err(e);
            }
        };
        let (pdata, (send, recv)) = {
            let mut g = conn.inner.lock();
            g.names = Some(req.names());
            g.state.advance(ConnState::Accepting);
            g.ord = ev.initiator_depth;
            g.set_device(req.caps(), st);
            g.negotiate(Role::Server, ev.private_data, st);
            conn.trace_negotiated(&g);
            (g.ours.map(|p| p.encode()), g.buffer_sizes())
        };
        let bytes: &[u8] = match &pdata {
            Some(p) => p,
            None => &[],
        };
        let attr = QpAttr {
            send_depth: SEND_DEPTH,
            recv_depth: RECV_DEPTH,
            recv_initial: initial_receives(recv, RECV_BUDGET, RECV_DEPTH),
            send_size: send,
            recv_size: recv,
            recv_direct: conn.upper.recv_direct(),
            // A responder: RDMA Read/Write only (their room is apart).
            registers: false,
        };
        // nfsd's connection: its transport exists before the first call can
        // arrive, and nfsd learns of it once the connection is accepted.
        let pending = match &self.svc {
            Some((me, _)) => {
                let made = me.new_conn(req).and_then(|p| {
                    let ops = Arc::new(svc::NfsdConn(conn.clone()), GFP_KERNEL)?;
                    let x = p.attach(ops)?;
                    if let Some(n) = conn.nfsd() {
                        n.attach(x);
                    }
                    Ok(p)
                });
                match made {
                    Ok(p) => Some(p),
                    Err(e) => {
                        st.inc(Counter::ErrAlloc);
                        conn.close(Closed::AcceptFailed, e.to_errno());
                        return Err(e);
                    }
                }
            }
            None => None,
        };
        match req.accept(conn.clone(), bytes, &attr, ev.initiator_depth) {
            Ok(cm) => {
                st.inc(Counter::Accepts);
                if let (Some(p), Some((me, _))) = (pending, &self.svc) {
                    let entry = Unaccepted {
                        xprt: Some(p),
                        conn: conn.clone(),
                    };
                    // Not queued (no memory): the entry's drop, after the
                    // queue's lock, closes the connection, as if nfsd had
                    // refused it.
                    let pushed = self.pending.lock().push(entry);
                    match pushed {
                        Ok(()) => me.conn_pending(),
                        Err(entry) => drop(entry),
                    }
                }
                // Closed meanwhile (`disconnect ID`): the accepted id goes
                // too (its teardown is deferred, we run its handler).
                conn.adopt_id(cm);
                Ok(())
            }
            Err(e) => {
                st.inc(Counter::ErrAccept);
                conn.close(Closed::AcceptFailed, e.to_errno());
                // nfsd's transport goes too, never seen by nfsd.
                conn.svc_detach();
                drop(pending);
                Err(e)
            }
        }
    }
}

impl Listener {
    /// What its connections carry: nfsd's calls, or (test builds, a
    /// `listen` listener) the echo service's.
    fn upper(&self) -> Result<Upper> {
        #[cfg(CONFIG_RPCRDMA_CM_TEST)]
        if self.svc.is_none() {
            return Ok(Upper::Echo);
        }
        Ok(Upper::Nfsd(svc::NfsdSide::new()?))
    }

    /// Its line in `listeners`.
    pub(super) fn show_line(&self, m: &mut SeqFile<'_>) -> fmt::Result {
        let state = match *self.inner.lock() {
            ListenerState::Starting => "starting",
            ListenerState::Listening { .. } => "listening",
            ListenerState::Dead => "dead",
            ListenerState::Stopped => "stopped",
        };
        write!(m, "addr={} state={}", self.ep, state)?;
        if self.svc.is_some() {
            write!(m, " for=nfsd pending={}", self.pending.lock().len())?;
        }
        writeln!(m)
    }
}

impl CmHandler for Listener {
    fn event(&self, _id: &HandlerId<'_>, ev: &Event<'_>) {
        let st = &self.state.stats;
        match ev.kind {
            EventKind::DeviceRemoval => {
                st.inc(Counter::DeviceRemovals);
                pr_warn!(
                    "listener {:?}: device removed, not listening until a device is added\n",
                    self.ep
                );
                // Listening: our id goes (its teardown is deferred, as we are
                // its handler). Starting: the starter destroys it. Stopped
                // stays stopped.
                let old = {
                    let mut g = self.inner.lock();
                    if matches!(*g, ListenerState::Stopped) {
                        return;
                    }
                    core::mem::replace(&mut *g, ListenerState::Dead)
                };
                drop(old);
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
