// SPDX-License-Identifier: GPL-2.0

//! rpcrdma_cm: RPC-over-RDMA version 1 connection set-up with RFC 8797 CM private
//! data, for NFS-over-RDMA clients and servers.
//!
//! Three layers, each in its own place:
//! - [`proto`]: the protocol core, pure logic without `unsafe` (also a host crate);
//! - [`sys`]: the abstraction layer over C, the only `unsafe` code, with its C
//!   half in `sys/helpers.c`;
//! - the module logic in this file and its siblings, in safe Rust.

use kernel::c_str;
use kernel::prelude::*;
use kernel::sync::Arc;

pub mod proto;
mod selftest;
mod stats;
mod sys;

use stats::Stats;
use sys::debugfs::Dir;

module! {
    type: RpcrdmaCm,
    name: "rpcrdma_cm",
    author: "rpcrdma-cm developers",
    description: "RPC-over-RDMA CM private data (RFC 8797): negotiated inline thresholds and remote invalidation",
    license: "GPL",
}

struct RpcrdmaCm {
    _debugfs: Dir,
}

impl kernel::Module for RpcrdmaCm {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        let stats = Arc::new(Stats::default(), GFP_KERNEL)?;

        if sys::param::selftest() {
            let result = selftest::run();
            stats.record_selftest(&result);
            if result.failed != 0 {
                pr_err!(
                    "selftest: {} passed, {} failed: refusing to load\n",
                    result.passed,
                    result.failed
                );
                return Err(EINVAL);
            }
            pr_info!("selftest: {} passed, 0 failed\n", result.passed);
        }

        let mut dir = Dir::new(c_str!("rpcrdma_cm")).inspect_err(|e| {
            pr_err!(
                "cannot create debugfs directory rpcrdma_cm (error {})\n",
                e.to_errno()
            );
        })?;
        dir.file(c_str!("stats"), stats)?;

        pr_info!("loaded\n");
        Ok(RpcrdmaCm { _debugfs: dir })
    }
}

impl Drop for RpcrdmaCm {
    fn drop(&mut self) {
        pr_info!("unloaded\n");
    }
}
