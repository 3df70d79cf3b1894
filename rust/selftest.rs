// SPDX-License-Identifier: GPL-2.0

//! Load-time self-test (module parameter `selftest=1`): runs the protocol core's
//! shared vectors inside the kernel build, so the code the host tests prove is
//! proven again as compiled into the module.

use kernel::prelude::*;

use crate::proto::negotiate::negotiate;
use crate::proto::pvt_data::parse;
use crate::proto::vectors::{NEGOTIATE_VECTORS, PARSE_VECTORS};

/// How many vectors passed and failed.
pub(crate) struct SelftestResult {
    pub(crate) passed: u32,
    pub(crate) failed: u32,
}

/// Runs every shared vector; logs each failure by name.
pub(crate) fn run() -> SelftestResult {
    let mut r = SelftestResult {
        passed: 0,
        failed: 0,
    };
    let mut check = |name: &str, ok: bool| {
        if ok {
            r.passed += 1;
        } else {
            r.failed += 1;
            pr_err!("selftest: vector {} failed\n", name);
        }
    };
    for v in PARSE_VECTORS {
        check(v.name, parse(v.input) == v.expect);
    }
    for v in NEGOTIATE_VECTORS {
        let n = negotiate(v.role, &v.ours, &parse(v.peer));
        check(
            v.name,
            (n.c2s, n.s2c, n.remote_invalidation) == (v.c2s, v.s2c, v.remote_invalidation),
        );
    }
    r
}
