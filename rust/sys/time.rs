// SPDX-License-Identifier: GPL-2.0

//! The monotonic clock, read as nanoseconds (the kernel crate's
//! `Instant` keeps its value to itself; idle timeouts are kept in atomics).

/// Nanoseconds of the monotonic clock since boot.
pub(crate) fn now_ns() -> i64 {
    // SAFETY: ktime_get() may be called from any context but NMI once timekeeping
    // is up, which it is before any module loads.
    unsafe { kernel::bindings::ktime_get() }
}

/// Nanoseconds of the monotonic clock since boot, as of the last tick (up
/// to a jiffy old): no clocksource read, for the idle times kept per message.
pub(crate) fn now_coarse_ns() -> i64 {
    let mut ts = kernel::bindings::timespec64::default();
    // SAFETY: `ts` is a valid timespec64 to fill; ktime_get_coarse_ts64()
    // may be called from any context but NMI once timekeeping is up.
    unsafe { kernel::bindings::ktime_get_coarse_ts64(&mut ts) };
    // tv_nsec is below 10^9: no truncation.
    ts.tv_sec
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as i64)
}
