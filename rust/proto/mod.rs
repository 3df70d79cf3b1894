// SPDX-License-Identifier: GPL-2.0

//! The RPC-over-RDMA protocol core: pure logic, no `unsafe`, no allocation, no
//! kernel types. The same files build as the `proto` module of the kernel module
//! and as the host crate `rpcrdma_proto` (see `lib.rs` beside this file), which
//! `cargo test` exercises.

#![forbid(unsafe_code)]

pub mod chunk;
pub mod config;
pub mod conn_state;
pub mod header;
pub mod negotiate;
/// The debugfs caller's NFSv4 COMPOUNDs: in the module's test builds only
/// (the Makefile sets `rpcrdma_cm_kernel` for the module), always on the
/// host.
#[cfg(any(CONFIG_RPCRDMA_CM_TEST, not(rpcrdma_cm_kernel)))]
pub mod nfs4;
pub mod pvt_data;
pub mod rpc;
pub mod sort;
pub mod ulb;
pub mod vectors;
pub mod xdr;
