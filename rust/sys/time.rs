// SPDX-License-Identifier: GPL-2.0

//! The monotonic clock, read as nanoseconds (the kernel crate's
//! `Instant` keeps its value to itself; idle timeouts are kept in atomics).

/// Nanoseconds of the monotonic clock since boot.
pub(crate) fn now_ns() -> i64 {
    // SAFETY: ktime_get() may be called from any context but NMI once timekeeping
    // is up, which it is before any module loads.
    unsafe { kernel::bindings::ktime_get() }
}
