// SPDX-License-Identifier: GPL-2.0
//! Fuzz the ONC RPC call and reply header decoders: no panic, offsets stay
//! inside the message, a failed call decode still names the XID when four
//! octets were there, and an accepted reply with an AUTH_NONE verifier
//! re-encodes to the same octets.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rpcrdma_proto::rpc::{
    decode_call, decode_reply, encode_accepted, ReplyStatus, CALL_HEADER_LEN, MAX_AUTH_BODY,
};

fuzz_target!(|data: &[u8]| {
    match decode_call(data) {
        Ok(h) => {
            assert!(h.args >= CALL_HEADER_LEN && h.args <= data.len());
            assert!(h.args <= CALL_HEADER_LEN + 2 * MAX_AUTH_BODY);
            assert_eq!(h.xid.to_be_bytes(), data[..4]);
        }
        Err((xid, _)) => assert_eq!(xid.is_some(), data.len() >= 4),
    }
    if let Ok(r) = decode_reply(data) {
        assert!(r.results <= data.len());
        assert_eq!(r.xid.to_be_bytes(), data[..4]);
        // Verifier flavour AUTH_NONE with an empty body: the header is ours.
        if let ReplyStatus::Accepted(stat) = r.status {
            if data[12..20] == [0; 8] {
                let mut buf = [0u8; 32];
                let n = encode_accepted(&mut buf, r.xid, stat).unwrap();
                assert_eq!(n, r.results);
                assert_eq!(buf[..n], data[..n]);
            }
        }
    }
});
