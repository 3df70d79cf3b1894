// SPDX-License-Identifier: GPL-2.0

//! Host build of the protocol core (`cargo test`, fuzzing, benchmarks).
//!
//! The kernel module includes `mod.rs` as its module `proto`; here the crate root
//! includes the same file under the same name, so paths such as
//! `crate::proto::pvt_data` resolve identically in both builds.

#![no_std]
#![forbid(unsafe_code)]

#[path = "mod.rs"]
pub mod proto;

pub use proto::*;
