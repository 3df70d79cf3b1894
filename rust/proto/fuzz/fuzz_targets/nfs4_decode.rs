// SPDX-License-Identifier: GPL-2.0
//! Fuzz the NFSv4 COMPOUND result decoder with each COMPOUND the client sends:
//! no panic, no more results than operations, and inline READ data lies inside
//! the message.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rpcrdma_proto::nfs4::{decode_compound, Op};

const BASE: usize = 100;

fuzz_target!(|data: &[u8]| {
    let Some((&sel, msg)) = data.split_first() else {
        return;
    };
    let last = match sel % 4 {
        0 => Op::GetAttr,
        1 => Op::Read {
            offset: 0,
            count: 4096,
        },
        2 => Op::Write { offset: 0, len: 9 },
        _ => Op::ReadDir { maxcount: 4096 },
    };
    let ops = [Op::PutRootFh, Op::Lookup(b"f"), last];
    let moved = sel & 4 != 0;
    let Ok(s) = decode_compound(msg, BASE, &ops, moved) else {
        return;
    };
    assert!(s.results as usize <= ops.len());
    if let Some(op) = s.failed_op {
        assert!(s.results >= 1 && op == ops[s.results as usize - 1].code());
    }
    if let Some((_, len, at)) = s.read {
        match at {
            Some(at) => assert!(!moved && at >= BASE && at - BASE + len as usize <= msg.len()),
            None => assert!(moved),
        }
    }
    if let Some((entries, _, _)) = s.readdir {
        // Each entry takes at least 20 octets (follows, cookie, name, bitmap, attrs).
        assert!(entries as usize * 20 <= msg.len());
    }
});
