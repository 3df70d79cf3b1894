// SPDX-License-Identifier: GPL-2.0

//! RPC-over-RDMA version 1 transport header (RFC 8166, Section 4).

use rpcrdma_proto::header::*;

const L: Limits = Limits::DEFAULT;

fn seg(h: u32, len: u32, off: u64) -> Segment {
    Segment {
        handle: h,
        length: len,
        offset: off,
    }
}

fn words(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|v| v.to_be_bytes()).collect()
}

#[test]
fn rfc8166_minimal_rdma_msg_is_28_octets() {
    let buf = words(&[0x1234, 1, 32, RDMA_MSG, 0, 0, 0]);
    let h = decode(&buf, &L).unwrap();
    assert_eq!((h.xid, h.vers, h.credits, h.len), (0x1234, 1, 32, 28));
    let c = h.chunks().unwrap();
    assert_eq!((c.read_segments(), c.write_chunks()), (0, 0));
    assert!(c.reply_chunk().is_none());
    assert!(matches!(h.body, Body::Msg(_)));
}

#[test]
fn rfc8166_encode_decode_round_trip_with_every_list() {
    let reads = [
        ReadSegment {
            position: 0,
            segment: seg(1, 100, 0x1000),
        },
        ReadSegment {
            position: 0,
            segment: seg(2, 200, 0x2000),
        },
    ];
    let w1 = [seg(3, 4096, 0x3000)];
    let w2 = [seg(4, 10, 4), seg(5, 20, 5)];
    let reply = [seg(6, 8192, 0x6000)];
    let spec = MsgSpec {
        xid: 7,
        credits: 128,
        nomsg: true,
        reads: &reads,
        writes: &[&w1, &w2],
        reply: Some(&reply),
    };
    let mut buf = [0u8; 512];
    let len = encode_msg(&mut buf, &spec).unwrap();
    let shape = HeaderShape {
        read_segments: 2,
        write_chunks: 2,
        write_segments: 3,
        reply_segments: Some(1),
    };
    assert_eq!(len, shape.len());
    let h = decode(&buf[..len], &L).unwrap();
    assert_eq!(h.len, len);
    let Body::NoMsg(c) = h.body else {
        panic!("not NOMSG")
    };
    assert_eq!(c.read_list().collect::<Vec<_>>(), reads);
    assert!(c.has_position_zero_read());
    let chunks: Vec<Vec<Segment>> = c.write_list().map(|s| s.collect()).collect();
    assert_eq!(chunks, vec![w1.to_vec(), w2.to_vec()]);
    assert_eq!(c.reply_chunk().unwrap().collect::<Vec<_>>(), reply);
    assert_eq!(c.reply_chunk().unwrap().total_len(), 8192);
}

#[test]
fn rfc8166_rpc_message_starts_after_the_header() {
    let mut buf = words(&[9, 1, 1, RDMA_MSG, 0, 0, 0]);
    buf.extend_from_slice(b"RPC!");
    let h = decode(&buf, &L).unwrap();
    assert_eq!(&buf[h.len..], b"RPC!");
}

#[test]
fn shorter_than_fixed_part_has_no_xid_to_answer() {
    assert_eq!(
        decode(&words(&[1, 1, 1]), &L),
        Err((None, DecodeError::TooShort))
    );
    assert_eq!(decode(&[], &L), Err((None, DecodeError::TooShort)));
}

#[test]
fn rfc8166_wrong_version_answers_err_vers_with_the_xid() {
    let e = decode(&words(&[0xabc, 2, 1, RDMA_MSG, 0, 0, 0]), &L).unwrap_err();
    assert_eq!(e, (Some(0xabc), DecodeError::Version(2)));
    assert_eq!(e.1.reply_code(), Some(ERR_VERS));
}

#[test]
fn rfc8166_s4_5_msgp_and_done_are_refused_with_err_chunk() {
    for p in [RDMA_MSGP, RDMA_DONE, 5, u32::MAX] {
        let e = decode(&words(&[1, 1, 1, p, 0, 0, 0]), &L).unwrap_err();
        assert_eq!(e, (Some(1), DecodeError::Proc(p)));
        assert_eq!(e.1.reply_code(), Some(ERR_CHUNK));
    }
}

#[test]
fn truncated_lists_are_err_chunk() {
    let full = words(&[1, 1, 1, RDMA_MSG, 1, 0, 5, 6, 0, 7, 0, 0, 0]);
    assert!(decode(&full, &L).is_ok());
    for cut in (16..full.len()).step_by(4) {
        let e = decode(&full[..cut], &L).unwrap_err();
        assert_eq!(e.1, DecodeError::Truncated, "cut at {cut}");
        assert_eq!(e.1.reply_code(), Some(ERR_CHUNK));
    }
}

#[test]
fn hostile_segment_count_is_refused_before_use() {
    let buf = words(&[1, 1, 1, RDMA_MSG, 0, 1, u32::MAX, 0]);
    assert_eq!(
        decode(&buf, &L).unwrap_err().1,
        DecodeError::TooManySegments
    );
    let buf = words(&[1, 1, 1, RDMA_MSG, 0, 0, 1, 65]);
    assert_eq!(
        decode(&buf, &L).unwrap_err().1,
        DecodeError::TooManySegments
    );
}

#[test]
fn limits_on_read_segments_and_write_chunks() {
    let tight = Limits {
        max_read_segments: 1,
        max_write_chunks: 1,
        max_chunk_segments: 1,
    };
    let reads = [ReadSegment::default(); 2];
    let mut buf = [0u8; 256];
    let n = encode_msg(
        &mut buf,
        &MsgSpec {
            xid: 1,
            credits: 1,
            nomsg: false,
            reads: &reads,
            writes: &[],
            reply: None,
        },
    )
    .unwrap();
    assert_eq!(
        decode(&buf[..n], &tight).unwrap_err().1,
        DecodeError::TooManySegments
    );
    assert!(decode(&buf[..n], &L).is_ok());
    let w = [Segment::default()];
    let n = encode_msg(
        &mut buf,
        &MsgSpec {
            xid: 1,
            credits: 1,
            nomsg: false,
            reads: &[],
            writes: &[&w, &w],
            reply: None,
        },
    )
    .unwrap();
    assert_eq!(
        decode(&buf[..n], &tight).unwrap_err().1,
        DecodeError::TooManySegments
    );
}

#[test]
fn xdr_booleans_other_than_0_and_1_are_refused() {
    let buf = words(&[1, 1, 1, RDMA_MSG, 2, 0, 0]);
    assert_eq!(
        decode(&buf, &L).unwrap_err().1,
        DecodeError::BadDiscriminator(2)
    );
}

#[test]
fn read_position_must_be_xdr_aligned() {
    let buf = words(&[1, 1, 1, RDMA_MSG, 1, 6, 1, 1, 0, 0, 0, 0, 0]);
    assert_eq!(
        decode(&buf, &L).unwrap_err().1,
        DecodeError::MisalignedPosition(6)
    );
}

#[test]
fn rfc8166_rdma_error_bodies() {
    let mut buf = [0u8; 64];
    let n = encode_error(&mut buf, 5, 1, ErrorBody::Vers { low: 1, high: 1 }).unwrap();
    assert_eq!(&buf[..n], words(&[5, 1, 1, RDMA_ERROR, ERR_VERS, 1, 1]));
    assert_eq!(
        decode(&buf[..n], &L).unwrap().body,
        Body::Error(ErrorBody::Vers { low: 1, high: 1 })
    );
    let n = encode_error(&mut buf, 6, 1, ErrorBody::Chunk).unwrap();
    assert_eq!(n, 20);
    assert_eq!(
        decode(&buf[..n], &L).unwrap().body,
        Body::Error(ErrorBody::Chunk)
    );
    assert!(decode(&buf[..n], &L).unwrap().chunks().is_none());
    let e = decode(&words(&[6, 1, 1, RDMA_ERROR, 3]), &L).unwrap_err();
    assert_eq!(e.1, DecodeError::ErrorCode(3));
    assert_eq!(
        e.1.reply_code(),
        None,
        "never answer an error with an error"
    );
    assert_eq!(
        decode(&words(&[6, 1, 1, RDMA_ERROR, ERR_VERS, 1]), &L)
            .unwrap_err()
            .1,
        DecodeError::Truncated
    );
}

#[test]
fn encoders_fail_cleanly_on_a_small_buffer() {
    let mut buf = [0u8; 27];
    let spec = MsgSpec {
        xid: 1,
        credits: 1,
        nomsg: false,
        reads: &[],
        writes: &[],
        reply: None,
    };
    assert!(encode_msg(&mut buf, &spec).is_err());
    assert!(encode_error(&mut buf[..19], 1, 1, ErrorBody::Chunk).is_err());
}

#[test]
fn header_shape_lengths() {
    assert_eq!(HeaderShape::default().len(), MIN_MSG_LEN);
    assert_eq!(
        HeaderShape {
            read_segments: 1,
            ..Default::default()
        }
        .len(),
        28 + 24
    );
    assert_eq!(
        HeaderShape {
            write_chunks: 1,
            write_segments: 1,
            ..Default::default()
        }
        .len(),
        28 + 24
    );
    assert_eq!(
        HeaderShape {
            reply_segments: Some(1),
            ..Default::default()
        }
        .len(),
        28 + 20
    );
}

#[test]
fn error_names_are_stable() {
    assert_eq!(DecodeError::TooManySegments.name(), "too_many_segments");
    assert_eq!(DecodeError::Version(0).name(), "bad_version");
}
