// SPDX-License-Identifier: GPL-2.0

//! Counters. Module-wide ones are shown in `/sys/kernel/debug/rpcrdma_cm/stats`
//! as one `name value` pair per line (the format of `/proc/vmstat`); the
//! messaging counters ([`XprtCounter`]) exist per connection (the `xprt` file)
//! and module-wide (summed, at the end of `stats`).

use core::fmt::{self, Write};
use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::proto::pvt_data::Outcome;
use crate::sys::debugfs::{SeqFile, Show};

macro_rules! counters {
    ($(#[$doc:meta])* $enum:ident, $names:ident, $($variant:ident => $name:literal,)*) => {
        $(#[$doc])*
        #[derive(Clone, Copy)]
        pub(crate) enum $enum { $($variant,)* }
        const $names: &[&str] = &[$($name,)*];
    };
}

counters! {
    /// One module-wide counter. A build without the test harness keeps the
    /// counters only the harness moves (err_listen), so that `stats` reads
    /// the same in every build.
    #[cfg_attr(not(CONFIG_RPCRDMA_CM_TEST), allow(dead_code))]
    Counter, NAMES,
    SelftestPassed => "selftest_passed",
    SelftestFailed => "selftest_failed",
    Connects => "connects",
    ConnectRequests => "connect_requests",
    Accepts => "accepts",
    RejectsSent => "rejects_sent",
    Established => "established",
    Disconnects => "disconnects",
    UserDisconnects => "user_disconnects",
    DeviceRemovals => "device_removals",
    AddrChanges => "addr_changes",
    TimewaitExits => "timewait_exits",
    AddrErrors => "addr_errors",
    RouteErrors => "route_errors",
    ConnectErrors => "connect_errors",
    Unreachable => "unreachable",
    RejectedByPeer => "rejected_by_peer",
    PvtFound => "pvt_found",
    PvtFoundNonzeroOffset => "pvt_found_nonzero_offset",
    PvtAbsent => "pvt_absent",
    PvtForeign => "pvt_foreign",
    PvtUnknownVersion => "pvt_unknown_version",
    PvtTruncated => "pvt_truncated",
    RemoteInvalidationNegotiated => "reminv_negotiated",
    ErrAlloc => "err_alloc",
    ErrQpCreate => "err_qp_create",
    ErrResolve => "err_resolve",
    ErrConnect => "err_connect",
    ErrAccept => "err_accept",
    ErrListen => "err_listen",
    ListenerRestarts => "listener_restarts",
    RejectsMaxConnections => "rejects_max_connections",
    RejectsMaxPerPeer => "rejects_max_per_peer",
    IdleDisconnects => "idle_disconnects",
    ConnectionsOpen => "connections_open",
    ServerConnectionsOpen => "server_connections_open",
    RemoteInvalidationUnsupported => "reminv_device_unsupported",
}

counters! {
    /// One messaging counter, kept per connection and module-wide. As for
    /// [`Counter`], the debugfs caller's (rpc_timeouts, rpc_errors, ...)
    /// stay in a build without it.
    #[cfg_attr(not(CONFIG_RPCRDMA_CM_TEST), allow(dead_code))]
    XprtCounter, XPRT_NAMES,
    CallsSent => "calls_sent",
    CallsInline => "calls_inline",
    CallsReadChunk => "calls_read_chunk",
    CallsLong => "calls_long",
    RepliesReceived => "replies_received",
    RepliesInline => "replies_inline",
    RepliesWriteList => "replies_write_list",
    RepliesReplyChunk => "replies_reply_chunk",
    RepliesUnmatched => "replies_unmatched",
    RpcTimeouts => "rpc_timeouts",
    CallsReceived => "calls_received",
    RepliesSent => "replies_sent",
    RepliesSentInline => "replies_sent_inline",
    RepliesSentWriteList => "replies_sent_write_list",
    RepliesSentReplyChunk => "replies_sent_reply_chunk",
    RepliesTooLarge => "replies_too_large",
    SendWithInvalidate => "send_with_invalidate",
    RemoteInvalidations => "remote_invalidations",
    RemoteInvalidationsUnmatched => "remote_invalidations_unmatched",
    LocalInvalidations => "local_invalidations",
    Registrations => "registrations",
    MrsAllocated => "mrs_allocated",
    MrsRecycled => "mrs_recycled",
    RdmaReads => "rdma_reads",
    RdmaWrites => "rdma_writes",
    RdmaRwWrs => "rdma_rw_wrs",
    RdmaErrorSent => "rdma_error_sent",
    RdmaErrorReceived => "rdma_error_received",
    HeaderErrors => "header_errors",
    RpcErrors => "rpc_errors",
    BytesSend => "bytes_send",
    BytesRecv => "bytes_recv",
    BytesRdmaRead => "bytes_rdma_read",
    BytesRdmaWrite => "bytes_rdma_write",
    ChunkErrors => "chunk_errors",
    SendErrors => "send_errors",
    RecvErrors => "recv_errors",
    SendBusy => "send_busy",
    SendCompletions => "send_completions",
    CallsAbandoned => "calls_abandoned",
    RepliesAfterAbandon => "replies_after_abandon",
    ReceivesAdded => "receives_added",
    SvcCalls => "nfsd_calls",
    SvcCallsDropped => "nfsd_calls_dropped",
    CallsDroppedNoMemory => "calls_dropped_no_memory",
    SvcArgsDirect => "nfsd_args_direct",
    SvcArgsCopied => "nfsd_args_copied",
    SvcPayloadsDirect => "nfsd_payloads_direct",
    SvcPayloadsCopied => "nfsd_payloads_copied",
    SvcWritesWithSend => "nfsd_writes_with_send",
    SvcReplyChunksDirect => "nfsd_reply_chunks_direct",
    SvcReplyChunksCopied => "nfsd_reply_chunks_copied",
    BcCalls => "bc_calls_sent",
    BcReplies => "bc_replies_received",
    BcCallsReceived => "bc_calls_received",
    BcRepliesSent => "bc_replies_sent",
    BcOverflows => "bc_overflows",
    CallsInFlightMax => "calls_in_flight_max",
}

const N: usize = NAMES.len();
const XN: usize = XPRT_NAMES.len();

/// Messaging counters of one connection.
pub(crate) struct XprtStats {
    x: [AtomicU64; XN],
}

impl Default for XprtStats {
    fn default() -> Self {
        XprtStats {
            x: [const { AtomicU64::new(0) }; XN],
        }
    }
}

impl XprtStats {
    /// Adds `n` to `c`.
    pub(crate) fn add(&self, c: XprtCounter, n: u64) {
        self.x[c as usize].fetch_add(n, Relaxed);
    }

    /// The value of `c`.
    pub(crate) fn get(&self, c: XprtCounter) -> u64 {
        self.x[c as usize].load(Relaxed)
    }

    /// Raises `c`, a high-water mark, to `v` if it is lower.
    pub(crate) fn raise(&self, c: XprtCounter, v: u64) {
        self.x[c as usize].fetch_max(v, Relaxed);
    }

    /// `name=value` pairs separated by spaces, zero values left out.
    pub(crate) fn show_nonzero(&self, m: &mut SeqFile<'_>) -> fmt::Result {
        for (name, v) in XPRT_NAMES.iter().zip(self.x.iter()) {
            let v = v.load(Relaxed);
            if v != 0 {
                write!(m, " {}={}", name, v)?;
            }
        }
        Ok(())
    }
}

/// Module-wide counters.
pub(crate) struct Stats {
    v: [AtomicU64; N],
    /// The messaging counters of all connections, summed.
    pub(crate) xprt: XprtStats,
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            v: [const { AtomicU64::new(0) }; N],
            xprt: XprtStats::default(),
        }
    }
}

impl Stats {
    /// Adds one to `c`.
    pub(crate) fn inc(&self, c: Counter) {
        self.v[c as usize].fetch_add(1, Relaxed);
    }

    /// Sets `c` to `v`.
    pub(crate) fn set(&self, c: Counter, v: u64) {
        self.v[c as usize].store(v, Relaxed);
    }

    /// Takes one from `c` (a gauge).
    pub(crate) fn dec(&self, c: Counter) {
        self.v[c as usize].fetch_sub(1, Relaxed);
    }

    /// Counts one private-data parse outcome.
    pub(crate) fn parsed(&self, o: &Outcome) {
        self.inc(match o {
            Outcome::Found { offset, .. } => {
                if *offset != 0 {
                    self.inc(Counter::PvtFoundNonzeroOffset);
                }
                Counter::PvtFound
            }
            Outcome::Absent => Counter::PvtAbsent,
            Outcome::Foreign => Counter::PvtForeign,
            Outcome::UnknownVersion { .. } => Counter::PvtUnknownVersion,
            Outcome::Truncated { .. } => Counter::PvtTruncated,
        });
    }
}

impl Show for Stats {
    fn show(&self, m: &mut SeqFile<'_>) -> fmt::Result {
        for (name, v) in NAMES.iter().zip(self.v.iter()) {
            writeln!(m, "{} {}", name, v.load(Relaxed))?;
        }
        for (name, v) in XPRT_NAMES.iter().zip(self.xprt.x.iter()) {
            writeln!(m, "{} {}", name, v.load(Relaxed))?;
        }
        Ok(())
    }
}
