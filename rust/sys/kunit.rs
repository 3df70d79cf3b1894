// SPDX-License-Identifier: GPL-2.0

//! The protocol core's shared vectors as the KUnit suite `rpcrdma_cm_vectors`:
//! one case per [`Group`](crate::selftest::Group), each checked by
//! [`check`](crate::selftest::check), the function the load-time self-test runs
//! too, and each failing vector named in the case's log.
//!
//! `#[kunit_tests]` gates its expansion behind `#[cfg(CONFIG_KUNIT = "y")]`:
//! with `CONFIG_KUNIT=m`, or unset as in Debian's stock kernel, the module has
//! no suite, and `selftest=1` runs the vectors instead. The suite lives in this
//! layer because the expansion is `unsafe` (`extern "C"` case wrappers, a
//! `static mut` case table and the `.kunit_test_suites` entry the module loader
//! reads); its cases are safe calls of `check`.
//!
//! KUnit runs the suite once the module is live (after `init` succeeded), from
//! the task loading it and before that load returns, each case in a kthread of
//! its own. The results go to the kernel log as KTAP and, until the module is
//! unloaded, to `/sys/kernel/debug/kunit/rpcrdma_cm_vectors/results`.

use kernel::prelude::*;

use super::bindings;

/// Fails the KUnit test the current task runs, with "vector NAME failed" in
/// its log; does nothing outside a KUnit test or without `CONFIG_KUNIT`.
#[cfg_attr(
    not(CONFIG_KUNIT = "y"),
    expect(dead_code, reason = "only the KUnit suite reports through KUnit")
)]
pub(crate) fn vector_failed(name: &str) {
    let len = c_int::try_from(name.len()).unwrap_or(c_int::MAX);
    // SAFETY: `name` is valid for reads of `len` bytes (no more than its length)
    // for the call, and the C side reads at most `len` bytes of it (`%.*s`), so
    // it needs no NUL terminator.
    unsafe { bindings::rpcrdma_cm_kunit_vector_failed(name.as_ptr().cast(), len) };
}

#[kunit_tests(rpcrdma_cm_vectors)]
mod suite {
    use super::vector_failed;
    use crate::selftest::{check, Group};

    #[test]
    fn parse_vectors() {
        let r = check(Group::Parse, vector_failed);
        assert_eq!(r.failed, 0);
        assert!(r.passed > 0);
    }

    #[test]
    fn negotiate_vectors() {
        let r = check(Group::Negotiate, vector_failed);
        assert_eq!(r.failed, 0);
        assert!(r.passed > 0);
    }
}
