// SPDX-License-Identifier: GPL-2.0
//! Fuzz the debugfs `control` command parser and the `listen` parameter parser:
//! no panic on any UTF-8 text, and accepted values are within their bounds.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rpcrdma_proto::config::{
    check_listen_param, listen_list, parse_command, CallSpec, Command, NfsOp, MAX_BENCH,
};
use rpcrdma_proto::rpc::echo::MAX_PAYLOAD;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = core::str::from_utf8(data) else {
        return;
    };
    if check_listen_param(s) {
        assert!(listen_list(s).all(|a| a.is_some()));
    }
    let spec = match parse_command(s) {
        Some(Command::Call(_, spec)) => spec,
        Some(Command::Bench(_, n, spec)) => {
            assert!(n >= 1 && n <= MAX_BENCH);
            spec
        }
        _ => return,
    };
    match spec {
        CallSpec::Echo { len, .. } => assert!(len <= MAX_PAYLOAD),
        CallSpec::Nfs(n) => {
            assert!(!n.name().contains(&b'/'));
            match n.op {
                NfsOp::Read { count, .. } | NfsOp::Write { count, .. } => {
                    assert!(count <= MAX_PAYLOAD)
                }
                NfsOp::ReadDir { maxcount } => assert!((512..=1 << 20).contains(&maxcount)),
                NfsOp::GetAttr => {}
            }
        }
        _ => {}
    }
});
