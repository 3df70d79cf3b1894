// SPDX-License-Identifier: GPL-2.0

//! Global counters, shown in `/sys/kernel/debug/rpcrdma_cm/stats` as one
//! `name value` pair per line (the format of `/proc/vmstat`).

use core::fmt::{self, Write};
use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::selftest::SelftestResult;
use crate::sys::debugfs::{SeqFile, Show};

/// Module-wide counters.
#[derive(Default)]
pub(crate) struct Stats {
    selftest_passed: AtomicU64,
    selftest_failed: AtomicU64,
}

impl Stats {
    /// Records the outcome of the load-time self-test.
    pub(crate) fn record_selftest(&self, r: &SelftestResult) {
        self.selftest_passed.store(r.passed.into(), Relaxed);
        self.selftest_failed.store(r.failed.into(), Relaxed);
    }
}

impl Show for Stats {
    fn show(&self, m: &mut SeqFile<'_>) -> fmt::Result {
        writeln!(m, "selftest_passed {}", self.selftest_passed.load(Relaxed))?;
        writeln!(m, "selftest_failed {}", self.selftest_failed.load(Relaxed))
    }
}
