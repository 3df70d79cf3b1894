// SPDX-License-Identifier: GPL-2.0

//! The protocol core's shared vectors, checked inside the kernel build, so the
//! code the host tests prove is proven again as compiled into the module.
//!
//! Two callers share [`check`]: the load-time self-test ([`run`], module
//! parameter `selftest=1`, for any kernel) and the KUnit suite
//! `rpcrdma_cm_vectors` (`rust/sys/kunit.rs`, kernels with `CONFIG_KUNIT=y`).

use kernel::prelude::*;

use crate::proto::negotiate::negotiate;
use crate::proto::pvt_data::parse;
use crate::proto::vectors::{NEGOTIATE_VECTORS, PARSE_VECTORS};

/// How many vectors passed and failed.
pub(crate) struct SelftestResult {
    pub(crate) passed: u32,
    pub(crate) failed: u32,
}

/// A group of the shared vectors: the unit [`check`] takes (one KUnit case each).
#[derive(Clone, Copy)]
pub(crate) enum Group {
    /// [`PARSE_VECTORS`]: [`parse`] of a peer's private data.
    Parse,
    /// [`NEGOTIATE_VECTORS`]: [`negotiate`] of our settings against the peer's.
    Negotiate,
}

impl Group {
    /// Every group, in the order the self-test runs them.
    pub(crate) const ALL: [Group; 2] = [Group::Parse, Group::Negotiate];
}

/// Checks every vector of `group`, in table order, and calls `failed` with the
/// name of each one that fails.
pub(crate) fn check(group: Group, mut failed: impl FnMut(&'static str)) -> SelftestResult {
    let mut r = SelftestResult {
        passed: 0,
        failed: 0,
    };
    let mut note = |name: &'static str, ok: bool| {
        if ok {
            r.passed += 1;
        } else {
            r.failed += 1;
            failed(name);
        }
    };
    match group {
        Group::Parse => {
            for v in PARSE_VECTORS {
                note(v.name, parse(v.input) == v.expect);
            }
        }
        Group::Negotiate => {
            for v in NEGOTIATE_VECTORS {
                let n = negotiate(v.role, &v.ours, &parse(v.peer));
                note(
                    v.name,
                    (n.c2s, n.s2c, n.remote_invalidation) == (v.c2s, v.s2c, v.remote_invalidation),
                );
            }
        }
    }
    r
}

/// The load-time self-test: runs every shared vector; logs each failure by name.
pub(crate) fn run() -> SelftestResult {
    let mut total = SelftestResult {
        passed: 0,
        failed: 0,
    };
    for group in Group::ALL {
        let r = check(group, |name| pr_err!("selftest: vector {} failed\n", name));
        total.passed += r.passed;
        total.failed += r.failed;
    }
    total
}
