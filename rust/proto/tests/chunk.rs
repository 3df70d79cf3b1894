// SPDX-License-Identifier: GPL-2.0

//! Chunk planning (RFC 8166, Section 3.5; NFS ULB draft, Section 2.5).

use rpcrdma_proto::chunk::*;

const SEG: u32 = 1 << 20;

fn rpc(call_len: u32, max_reply_len: u32) -> RpcShape {
    RpcShape {
        call_len,
        call_ddp: None,
        max_reply_len,
        reply_ddp_len: None,
    }
}

#[test]
fn small_call_and_reply_go_inline() {
    let p = plan(1024, 1024, &rpc(100, 100), SEG).unwrap();
    assert_eq!((p.call, p.reply), (CallPlan::Inline, ReplyPlan::Inline));
    assert_eq!((p.header_len, p.send_len), (28, 128));
}

#[test]
fn call_of_exactly_the_threshold_goes_inline_four_more_does_not() {
    let at = plan(4096, 4096, &rpc(4096 - 28, 100), SEG).unwrap();
    assert_eq!(at.call, CallPlan::Inline);
    assert_eq!(at.send_len, 4096);
    let over = plan(4096, 4096, &rpc(4096 - 28 + 4, 100), SEG).unwrap();
    assert_eq!(
        over.call,
        CallPlan::PositionZero {
            len: 4072,
            segments: 1
        }
    );
    assert_eq!(over.send_len, 28 + 24);
}

#[test]
fn reply_of_exactly_the_threshold_is_inline_four_more_gets_a_reply_chunk() {
    let at = plan(4096, 2048, &rpc(100, 2048 - 28), SEG).unwrap();
    assert_eq!(at.reply, ReplyPlan::Inline);
    let over = plan(4096, 2048, &rpc(100, 2048 - 28 + 4), SEG).unwrap();
    assert_eq!(
        over.reply,
        ReplyPlan::ReplyChunk {
            len: 2024,
            segments: 1
        }
    );
    assert_eq!(over.header_len, 28 + 20);
}

#[test]
fn ddp_argument_goes_in_a_read_chunk_when_the_rest_fits() {
    let shape = RpcShape {
        call_ddp: Some(DdpItem {
            position: 200,
            len: 65536,
        }),
        ..rpc(200 + 65536, 200)
    };
    let p = plan(1024, 1024, &shape, SEG).unwrap();
    assert_eq!(
        p.call,
        CallPlan::ReadChunk {
            position: 200,
            len: 65536,
            segments: 1
        }
    );
    assert_eq!(p.send_len, 28 + 24 + 200);
}

#[test]
fn ddp_padding_is_not_sent_inline() {
    let shape = RpcShape {
        call_ddp: Some(DdpItem {
            position: 100,
            len: 5001,
        }),
        ..rpc(100 + 5004, 100)
    };
    let p = plan(1024, 1024, &shape, SEG).unwrap();
    assert_eq!(p.send_len, 28 + 24 + 100);
}

#[test]
fn long_call_when_the_rest_does_not_fit_even_without_the_ddp_item() {
    let shape = RpcShape {
        call_ddp: Some(DdpItem {
            position: 2000,
            len: 8192,
        }),
        ..rpc(2000 + 8192, 100)
    };
    let p = plan(1024, 1024, &shape, SEG).unwrap();
    assert_eq!(
        p.call,
        CallPlan::PositionZero {
            len: 10192,
            segments: 1
        }
    );
}

#[test]
fn ddp_result_goes_in_a_write_chunk_when_the_rest_fits() {
    let shape = RpcShape {
        reply_ddp_len: Some(65536),
        ..rpc(200, 300 + 65536)
    };
    let p = plan(1024, 1024, &shape, SEG).unwrap();
    assert_eq!(
        p.reply,
        ReplyPlan::WriteList {
            len: 65536,
            segments: 1
        }
    );
    assert_eq!(p.header_len, 28 + 8 + 16);
}

#[test]
fn reply_chunk_when_the_non_ddp_part_is_too_large() {
    let shape = RpcShape {
        reply_ddp_len: Some(4096),
        ..rpc(200, 8000 + 4096)
    };
    let p = plan(1024, 1024, &shape, SEG).unwrap();
    assert_eq!(
        p.reply,
        ReplyPlan::ReplyChunk {
            len: 12096,
            segments: 1
        }
    );
}

#[test]
fn reply_chunk_header_counts_against_the_call_threshold() {
    // 990 octets fit with the 28-octet header, not with a 48-octet one.
    let p = plan(1024, 1024, &rpc(990, 100), SEG).unwrap();
    assert_eq!(p.call, CallPlan::Inline);
    let p = plan(1024, 1024, &rpc(990, 2000), SEG).unwrap();
    assert!(matches!(p.reply, ReplyPlan::ReplyChunk { .. }));
    assert!(matches!(p.call, CallPlan::PositionZero { .. }));
}

#[test]
fn larger_negotiated_thresholds_avoid_chunks() {
    // The RFC 8797 headline: an 8 KiB call needs a long call at 1 KiB, not at 16 KiB.
    assert!(matches!(
        plan(1024, 1024, &rpc(8192, 100), SEG).unwrap().call,
        CallPlan::PositionZero { .. }
    ));
    assert_eq!(
        plan(16384, 16384, &rpc(8192, 100), SEG).unwrap().call,
        CallPlan::Inline
    );
}

#[test]
fn segments_follow_the_per_segment_limit() {
    let p = plan(16384, 1024, &rpc(1 << 20, 100), 4096).unwrap();
    assert_eq!(
        p.call,
        CallPlan::PositionZero {
            len: 1 << 20,
            segments: 256
        }
    );
    assert_eq!(p.header_len, 28 + 256 * 24);
    // ... a header that does not fit a 1024-octet Send at all.
    assert_eq!(
        plan(1024, 1024, &rpc(1 << 20, 100), 4096),
        Err(PlanError::HeaderTooLarge)
    );
}

#[test]
fn impossible_plans_are_errors_not_panics() {
    assert_eq!(
        plan(1024, 1024, &rpc(100, 100), 0),
        Err(PlanError::NoSegments)
    );
    assert_eq!(
        plan(40, 1024, &rpc(100, 100), SEG),
        Err(PlanError::HeaderTooLarge)
    );
}
