// SPDX-License-Identifier: GPL-2.0
//! Fuzz the RFC 8797 private-data parser: no panic, and every outcome is
//! consistent with the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rpcrdma_proto::negotiate::{negotiate, Role};
use rpcrdma_proto::pvt_data::{parse, Outcome, PrivateData};

fuzz_target!(|data: &[u8]| {
    let outcome = parse(data);
    match outcome {
        Outcome::Found { offset, pvt } => {
            assert!(offset + 8 <= data.len());
            assert_eq!(&data[offset..offset + 4], &[0xf6, 0xab, 0x0e, 0x18]);
            assert_eq!(data[offset + 4], 1);
            assert!(pvt.send_size >= 1024 && pvt.send_size <= 262_144);
        }
        Outcome::Truncated { offset } => assert!(offset + 8 > data.len()),
        Outcome::UnknownVersion { offset, version } => assert_eq!(data[offset + 4], version),
        Outcome::Absent => assert!(data.iter().all(|&b| b == 0)),
        Outcome::Foreign => assert!(!data.windows(4).any(|w| w == [0xf6, 0xab, 0x0e, 0x18])),
    }
    let ours = PrivateData::new(true, 4096, 4096).unwrap();
    let n = negotiate(Role::Server, &ours, &outcome);
    assert!(n.c2s >= 1024 && n.s2c >= 1024 && n.s2c <= 4096);
});
