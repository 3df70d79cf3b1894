// SPDX-License-Identifier: GPL-2.0

//! A connection's life as an explicit state machine, and the credit policy of
//! both roles (RFC 8166 Section 3.3.1). Pure logic: the module keeps one
//! [`ConnState`] per connection under its lock and asks it before acting.
//!
//! - A connection starts [`ConnState::New`], goes through resolving and
//!   connecting (client) or accepting (server) to established, and ends in
//!   exactly one [`Closed`] state. The first close wins: a later event (the
//!   peer's DISCONNECTED after a user's disconnect, say) cannot overwrite it.
//! - Only a closed connection is "closed": one being accepted is not.

/// Why a connection ended. Each has a stable name, shown in debugfs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Closed {
    /// ADDR_ERROR: the peer's address did not resolve.
    AddrError,
    /// ROUTE_ERROR.
    RouteError,
    /// CONNECT_ERROR.
    ConnectError,
    /// UNREACHABLE: the peer never answered.
    Unreachable,
    /// REJECTED by the peer.
    Rejected,
    /// DISCONNECTED (by the peer, or after a fatal error on our side).
    Disconnected,
    /// The RDMA device went away.
    DeviceRemoved,
    /// `disconnect ID` on the control file.
    ClosedByUser,
    /// nfsd closed its transport (stopping, idle, its own limits).
    ClosedByNfsd,
    /// Accepted for nfsd, which stopped (or closed the listener) before it
    /// took the connection.
    NotAcceptedByNfsd,
    /// sunrpc closed a mount's transport (unmount, RPC timeout, reconnect).
    ClosedBySunrpc,
    /// The server closed a connection that carried nothing for `idle_timeout`.
    IdleTimeout,
    /// The module was unloaded.
    Unloaded,
    /// The CM id could not be created.
    CreateFailed,
    /// `rdma_resolve_addr()` failed.
    ResolveFailed,
    /// `rdma_resolve_route()` failed.
    RouteFailed,
    /// Creating the QP or `rdma_connect()` failed.
    ConnectFailed,
    /// Creating the QP or `rdma_accept()` failed.
    AcceptFailed,
}

impl Closed {
    /// The name debugfs shows.
    pub fn name(self) -> &'static str {
        match self {
            Closed::AddrError => "addr_error",
            Closed::RouteError => "route_error",
            Closed::ConnectError => "connect_error",
            Closed::Unreachable => "unreachable",
            Closed::Rejected => "rejected",
            Closed::Disconnected => "disconnected",
            Closed::DeviceRemoved => "device_removed",
            Closed::ClosedByUser => "closed_by_user",
            Closed::ClosedByNfsd => "closed_by_nfsd",
            Closed::NotAcceptedByNfsd => "not_accepted_by_nfsd",
            Closed::ClosedBySunrpc => "closed_by_sunrpc",
            Closed::IdleTimeout => "idle_timeout",
            Closed::Unloaded => "unloaded",
            Closed::CreateFailed => "create_failed",
            Closed::ResolveFailed => "resolve_failed",
            Closed::RouteFailed => "route_failed",
            Closed::ConnectFailed => "connect_failed",
            Closed::AcceptFailed => "accept_failed",
        }
    }
}

/// Where a connection is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnState {
    /// Made, nothing started yet.
    New,
    /// Client: resolving the peer's address and route.
    Resolving,
    /// Client: connect request sent.
    Connecting,
    /// Server: CONNECT_REQUEST being accepted.
    Accepting,
    /// Carrying RPCs.
    Established,
    /// A work request failed: no new calls; the CM's disconnect will close it.
    Disconnecting,
    /// Ended, for the reason given, with the event's status (0 if none).
    Closed(Closed, i32),
}

impl ConnState {
    /// The name debugfs shows.
    pub fn name(self) -> &'static str {
        match self {
            ConnState::New => "new",
            ConnState::Resolving => "resolving",
            ConnState::Connecting => "connecting",
            ConnState::Accepting => "accepting",
            ConnState::Established => "established",
            ConnState::Disconnecting => "disconnecting",
            ConnState::Closed(c, _) => c.name(),
        }
    }

    /// Whether the connection has ended.
    pub fn is_closed(self) -> bool {
        matches!(self, ConnState::Closed(..))
    }

    /// Whether new calls may be issued or served.
    pub fn is_established(self) -> bool {
        self == ConnState::Established
    }

    /// Moves to `next` if the state machine allows it from here; returns
    /// whether it moved. Closing is allowed from every open state, once.
    pub fn advance(&mut self, next: ConnState) -> bool {
        use ConnState::*;
        let ok = match (*self, next) {
            (Closed(..), _) => false,
            (_, Closed(..)) => true,
            (New, Resolving | Accepting) => true,
            (Resolving, Connecting) => true,
            (Connecting | Accepting, Established) => true,
            (Established, Disconnecting) => true,
            _ => false,
        };
        if ok {
            *self = next;
        }
        ok
    }

    /// Closes the connection for `why` (first close wins); returns whether
    /// this call closed it.
    pub fn close(&mut self, why: Closed, status: i32) -> bool {
        self.advance(ConnState::Closed(why, status))
    }
}

/// Receive buffers a server connection posts before its first call: as many
/// as `budget` octets hold (at least 2, so that the first grant is at least
/// 1), but never more than `max`.
pub fn initial_receives(recv_size: u32, budget: u32, max: u32) -> u32 {
    (budget / recv_size.max(1)).clamp(2, max.max(2)).min(max)
}

/// The credits a server grants (RFC 8166 Section 3.3.1) with `receives`
/// Receive buffers in circulation: one fewer, because a Receive that
/// completed is replaced only by the work that handles its message, and a
/// client may send a new call before that work has run. At least 1.
pub fn server_grant(receives: u32) -> u32 {
    receives.saturating_sub(1).max(1)
}

/// How many Receive buffers a server connection should add when a call
/// arrives with `in_use` calls (this one included) not yet answered and
/// `receives` buffers in circulation, of at most `max`: when the client uses
/// every credit it has been granted, double the buffers (up to `max`), so the
/// next reply grants more. A client that never uses its credits costs no more
/// than its initial buffers.
pub fn receives_to_add(in_use: u32, receives: u32, max: u32) -> u32 {
    if in_use < server_grant(receives) || receives >= max {
        return 0;
    }
    receives.max(1).min(max - receives)
}

/// The calls a client may have outstanding: the server's grant, but never
/// more than its own Receive buffers minus one (the one whose reply is being
/// handled is reposted only after), and never more than `slots`.
pub fn client_window(grant: u32, receives: u32, slots: u32) -> u32 {
    grant.min(receives.saturating_sub(1)).min(slots).max(1)
}
