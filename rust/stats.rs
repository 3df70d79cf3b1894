// SPDX-License-Identifier: GPL-2.0

//! Global counters, shown in `/sys/kernel/debug/rpcrdma_cm/stats` as one
//! `name value` pair per line (the format of `/proc/vmstat`).

use core::fmt::{self, Write};
use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::proto::pvt_data::Outcome;
use crate::sys::debugfs::{SeqFile, Show};

macro_rules! counters {
    ($($variant:ident => $name:literal,)*) => {
        /// One module-wide counter.
        #[derive(Clone, Copy)]
        pub(crate) enum Counter { $($variant,)* }
        const NAMES: &[&str] = &[$($name,)*];
    };
}

counters! {
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
}

const N: usize = NAMES.len();

/// Module-wide counters.
pub(crate) struct Stats {
    v: [AtomicU64; N],
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            v: [const { AtomicU64::new(0) }; N],
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
        Ok(())
    }
}
