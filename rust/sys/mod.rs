// SPDX-License-Identifier: GPL-2.0

//! The abstraction layer over C: the only place in rpcrdma_cm with `unsafe`.
//!
//! Each submodule wraps one C interface in a safe Rust API, the way
//! `rust/kernel/net/phy.rs` does for PHY drivers. Where C uses macros, static
//! inlines or ops tables, the C half of this layer (one `.c` file per concept
//! beside the `.rs` file of the same name, linked into the same module)
//! provides plain functions, declared once in `rpcrdma_cm_sys.h`.

pub(crate) mod bindings;
pub(crate) mod chunk;
pub(crate) mod class_slot;
pub(crate) mod debugfs;
pub(crate) mod ib_client;
pub(crate) mod kunit;
pub(crate) mod param;
pub(crate) mod qp;
pub(crate) mod rdma_cm;
pub(crate) mod rpc_clnt;
pub(crate) mod svc;
pub(crate) mod time;
pub(crate) mod trace;
pub(crate) mod wait;
pub(crate) mod workqueue;
pub(crate) mod xdr_buf;
pub(crate) mod xprt;

use kernel::ffi::c_int;
use kernel::prelude::*;

/// What a callback returns to C: `Ok(n)` as `n` (at most `c_int::MAX`), an
/// error as its negative errno.
pub(crate) fn to_c_int(r: Result<u32>) -> c_int {
    match r {
        Ok(n) => c_int::try_from(n).unwrap_or(c_int::MAX),
        Err(e) => e.to_errno(),
    }
}
