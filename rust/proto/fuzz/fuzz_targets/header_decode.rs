// SPDX-License-Identifier: GPL-2.0
//! Fuzz the RPC-over-RDMA header decoder: no panic, iterators agree with the
//! counts, and a decoded RDMA_MSG/RDMA_NOMSG re-encodes to the same octets.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rpcrdma_proto::header::{decode, encode_msg, Body, Limits, MsgSpec, Segment};

fuzz_target!(|data: &[u8]| {
    let Ok(h) = decode(data, &Limits::DEFAULT) else {
        return;
    };
    assert!(h.len <= data.len());
    let Some(c) = h.chunks() else { return };
    let reads: Vec<_> = c.read_list().collect();
    assert_eq!(reads.len(), c.read_segments());
    let writes: Vec<Vec<Segment>> = c.write_list().map(|s| s.collect()).collect();
    assert_eq!(writes.len(), c.write_chunks() as usize);
    let reply: Option<Vec<Segment>> = c.reply_chunk().map(|s| s.collect());
    let write_refs: Vec<&[Segment]> = writes.iter().map(|w| w.as_slice()).collect();
    let spec = MsgSpec {
        xid: h.xid,
        credits: h.credits,
        nomsg: matches!(h.body, Body::NoMsg(_)),
        reads: &reads,
        writes: &write_refs,
        reply: reply.as_deref(),
    };
    let mut buf = vec![0u8; h.len];
    let n = encode_msg(&mut buf, &spec).expect("re-encode fits the original length");
    assert_eq!(&buf[..n], &data[..h.len]);
});
