// SPDX-License-Identifier: GPL-2.0

//! Inline thresholds and the remote-invalidation decision for one connection
//! (RFC 8797, Sections 4.1, 4.2 and 5.1).

use crate::proto::pvt_data::{Outcome, PrivateData};

/// Which end of the connection we are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The requester, which actively connects (RDMA-CM connect).
    Client,
    /// The responder, which passively accepts (RDMA-CM listen/accept).
    Server,
}

impl Role {
    /// A short stable name, as shown in debugfs.
    pub fn name(self) -> &'static str {
        match self {
            Role::Client => "client",
            Role::Server => "server",
        }
    }
}

/// What one connection settled on. Both ends of a connection on which each side
/// received the other's message compute the same values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Negotiated {
    /// Client-to-server inline threshold: the smaller of the client's send size and
    /// the server's receive size (Section 4.2).
    pub c2s: u32,
    /// Server-to-client inline threshold: the smaller of the server's send size and
    /// the client's receive size (Section 4.2).
    pub s2c: u32,
    /// The largest message we must be able to receive: our advertised receive size.
    pub our_recv: u32,
    /// The largest inline message we may send on this connection.
    pub our_send_threshold: u32,
    /// The responder may use RDMA Send With Invalidate for replies: true only when
    /// BOTH peers set R (Section 4.1). With either clear, plain Send only.
    pub remote_invalidation: bool,
    /// The peer's advertisement as used: its message, or the Section 5.1 default.
    pub peer: PrivateData,
}

/// Negotiates one connection from what we advertised, our role and what the peer
/// sent (the result of [`crate::proto::pvt_data::parse`]).
///
/// A peer without a valid message counts as R clear, 1024/1024 (Section 5.1). We
/// also treat "we sent no private data" (the legacy switch) by passing `ours` as
/// [`PrivateData::DEFAULT`]: the peer then assumes the defaults for us, and so must we.
pub fn negotiate(role: Role, ours: &PrivateData, peer: &Outcome) -> Negotiated {
    let theirs = peer.effective();
    let (client, server) = match role {
        Role::Client => (ours, &theirs),
        Role::Server => (&theirs, ours),
    };
    let c2s = client.send_size.min(server.recv_size);
    let s2c = server.send_size.min(client.recv_size);
    Negotiated {
        c2s,
        s2c,
        our_recv: ours.recv_size,
        our_send_threshold: match role {
            Role::Client => c2s,
            Role::Server => s2c,
        },
        remote_invalidation: ours.remote_invalidate && theirs.remote_invalidate,
        peer: theirs,
    }
}
