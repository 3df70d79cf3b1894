// SPDX-License-Identifier: GPL-2.0

//! Property tests: round trips, the id at any offset of the real CM buffer lengths,
//! and no panic on any input.

use proptest::prelude::*;
use rpcrdma_proto::chunk::{plan, CallPlan, DdpItem, ReplyPlan, RpcShape};
use rpcrdma_proto::header::*;
use rpcrdma_proto::pvt_data::*;

const MAGIC: [u8; 4] = [0xf6, 0xab, 0x0e, 0x18];

fn has_magic(b: &[u8]) -> bool {
    b.windows(4).any(|w| w == MAGIC)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn encode_then_parse_round_trips(r: bool, send in 1024u32..=262_144, recv in 1024u32..=262_144) {
        let p = PrivateData::new(r, send, recv).unwrap();
        prop_assert_eq!(parse(&p.encode()), Outcome::Found { offset: 0, pvt: p });
    }

    #[test]
    fn advertised_size_never_exceeds_the_buffer(bytes in 1024u32..) {
        let adv = advertised_size(bytes).unwrap();
        prop_assert!(adv <= bytes);
        prop_assert_eq!(adv % 1024, 0);
        prop_assert!(adv > bytes.min(MAX_INLINE_SIZE) - 1024);
    }

    #[test]
    fn id_found_at_any_offset_of_a_56_octet_buffer(
        fill in proptest::collection::vec(any::<u8>(), 56),
        offset in 0usize..=48, r: bool, s: u8, v: u8,
    ) {
        prop_assume!(!has_magic(&fill[..offset + 3]));
        let mut buf = fill;
        let msg = [0xf6, 0xab, 0x0e, 0x18, 1, u8::from(r), s, v];
        buf[offset..offset + 8].copy_from_slice(&msg);
        let Outcome::Found { offset: at, pvt } = parse(&buf) else { panic!("not found") };
        prop_assert_eq!(at, offset);
        prop_assert_eq!((pvt.remote_invalidate, pvt.send_size, pvt.recv_size), (r, decode_size(s), decode_size(v)));
    }

    #[test]
    fn id_found_at_any_offset_of_a_196_octet_buffer(
        fill in proptest::collection::vec(any::<u8>(), 196),
        offset in 0usize..=188,
    ) {
        prop_assume!(!has_magic(&fill[..offset + 3]));
        let mut buf = fill;
        buf[offset..offset + 8].copy_from_slice(&[0xf6, 0xab, 0x0e, 0x18, 1, 0, 3, 3]);
        let found = matches!(parse(&buf), Outcome::Found { offset: o, .. } if o == offset);
        prop_assert!(found);
    }

    #[test]
    fn parse_never_panics_and_found_lies_inside(buf in proptest::collection::vec(any::<u8>(), 0..300)) {
        match parse(&buf) {
            Outcome::Found { offset, .. } => prop_assert!(offset + 8 <= buf.len()),
            Outcome::Truncated { offset } => prop_assert!(offset + 8 > buf.len()),
            Outcome::UnknownVersion { offset, version } => prop_assert_eq!(buf[offset + 4], version),
            Outcome::Absent => prop_assert!(buf.iter().all(|&b| b == 0)),
            Outcome::Foreign => prop_assert!(!has_magic(&buf)),
        }
    }

    #[test]
    fn header_decode_never_panics(buf in proptest::collection::vec(any::<u8>(), 0..400)) {
        if let Ok(h) = decode(&buf, &Limits::DEFAULT) {
            prop_assert!(h.len <= buf.len());
            if let Some(c) = h.chunks() {
                let _ = c.read_list().count();
                let _ = c.write_list().map(|s| s.count()).count();
                let _ = c.reply_chunk().map(|s| s.total_len());
            }
        }
    }

    #[test]
    fn header_decode_never_panics_on_plausible_headers(
        xid: u32, proc in 0u32..6,
        tail in proptest::collection::vec(prop_oneof![Just(0u32), Just(1u32), 0u32..70, any::<u32>()], 0..80),
    ) {
        let mut buf: Vec<u8> = [xid, 1, 1, proc].iter().flat_map(|w| w.to_be_bytes()).collect();
        buf.extend(tail.iter().flat_map(|w| w.to_be_bytes()));
        let _ = decode(&buf, &Limits::DEFAULT);
    }

    #[test]
    fn header_encode_decode_round_trip(
        xid: u32, credits: u32, nomsg: bool,
        reads in proptest::collection::vec((0u32..1000, any::<(u32, u32, u64)>()), 0..5),
        writes in proptest::collection::vec(proptest::collection::vec(any::<(u32, u32, u64)>(), 0..4), 0..3),
        reply in proptest::option::of(proptest::collection::vec(any::<(u32, u32, u64)>(), 0..4)),
    ) {
        let s = |(h, l, o): (u32, u32, u64)| Segment { handle: h, length: l, offset: o };
        let reads: Vec<_> = reads.into_iter().map(|(p, t)| ReadSegment { position: p * 4, segment: s(t) }).collect();
        let writes: Vec<Vec<_>> = writes.into_iter().map(|c| c.into_iter().map(s).collect()).collect();
        let write_refs: Vec<&[Segment]> = writes.iter().map(|c| c.as_slice()).collect();
        let reply: Option<Vec<_>> = reply.map(|c| c.into_iter().map(s).collect());
        let spec = MsgSpec { xid, credits, nomsg, reads: &reads, writes: &write_refs, reply: reply.as_deref() };
        let mut buf = [0u8; 1024];
        let len = encode_msg(&mut buf, &spec).unwrap();
        let shape = HeaderShape {
            read_segments: reads.len() as u32,
            write_chunks: writes.len() as u32,
            write_segments: writes.iter().map(|c| c.len() as u32).sum(),
            reply_segments: reply.as_ref().map(|c| c.len() as u32),
        };
        prop_assert_eq!(shape.len(), len);
        let h = decode(&buf[..len], &Limits::DEFAULT).unwrap();
        prop_assert_eq!((h.xid, h.credits, h.len), (xid, credits, len));
        let c = h.chunks().unwrap();
        prop_assert_eq!(c.read_list().collect::<Vec<_>>(), reads);
        prop_assert_eq!(c.write_list().map(|w| w.collect::<Vec<_>>()).collect::<Vec<_>>(), writes);
        prop_assert_eq!(c.reply_chunk().map(|w| w.collect::<Vec<_>>()), reply);
    }

    #[test]
    fn plans_always_fit_the_thresholds(
        c2s in 1024u32..=262_144, s2c in 1024u32..=262_144,
        call_len in 0u32..2_000_000, ddp in proptest::option::of(0u32..1_000_000),
        max_reply in 0u32..2_000_000, reply_ddp in proptest::option::of(0u32..1_000_000),
        seg in 1u32..2_000_000,
    ) {
        let call_ddp = ddp.filter(|d| *d <= call_len).map(|len| DdpItem { position: (call_len - len) & !3, len });
        let reply_ddp_len = reply_ddp.filter(|d| *d <= max_reply);
        let shape = RpcShape { call_len, call_ddp, max_reply_len: max_reply, reply_ddp_len };
        if let Ok(p) = plan(c2s, s2c, &shape, seg) {
            prop_assert!(p.send_len <= c2s as usize);
            if p.call == CallPlan::Inline {
                prop_assert_eq!(p.send_len, p.header_len + call_len as usize);
            }
            if p.reply == ReplyPlan::Inline {
                prop_assert!(28 + max_reply as usize <= s2c as usize);
            }
        }
    }
}
