// SPDX-License-Identifier: GPL-2.0

//! One named test per requirement of RFC 8797 Sections 4 to 6, plus the shared
//! vectors (the same table the in-kernel self-test runs).

use rpcrdma_proto::negotiate::{negotiate, Role};
use rpcrdma_proto::pvt_data::*;
use rpcrdma_proto::vectors::*;

fn pd(r: bool, send: u32, recv: u32) -> PrivateData {
    PrivateData::new(r, send, recv).unwrap()
}

fn msg(flags: u8, send: u8, recv: u8) -> [u8; 8] {
    [0xf6, 0xab, 0x0e, 0x18, 1, flags, send, recv]
}

#[test]
fn shared_parse_vectors() {
    for v in PARSE_VECTORS {
        assert_eq!(parse(v.input), v.expect, "vector {}", v.name);
    }
    assert!(PARSE_VECTORS.len() >= 25);
}

#[test]
fn shared_negotiate_vectors() {
    for v in NEGOTIATE_VECTORS {
        let n = negotiate(v.role, &v.ours, &parse(v.peer));
        assert_eq!(
            (n.c2s, n.s2c, n.remote_invalidation),
            (v.c2s, v.s2c, v.remote_invalidation),
            "vector {}",
            v.name
        );
    }
}

#[test]
fn s4_must_be_prepared_for_settings_to_change_on_reconnect() {
    let ours = pd(true, 16384, 16384);
    let first = negotiate(Role::Client, &ours, &parse(&msg(1, 3, 3)));
    let second = negotiate(Role::Client, &ours, &parse(&msg(0, 15, 1)));
    assert_eq!(
        (first.c2s, first.s2c, first.remote_invalidation),
        (4096, 4096, true)
    );
    assert_eq!(
        (second.c2s, second.s2c, second.remote_invalidation),
        (2048, 16384, false)
    );
}

#[test]
fn s4_first_eight_octets_layout() {
    assert_eq!(pd(true, 4096, 4096).encode(), LINUX_CLIENT);
    assert_eq!(pd(false, 4096, 4096).encode(), LINUX_SERVER);
    assert_eq!(pd(false, 16384, 16384).encode(), LINUX_SERVER_16K);
}

#[test]
fn s4_format_identifier_is_f6ab0e18_in_network_byte_order() {
    assert_eq!(RPCRDMA_CMP_MAGIC, 0xf6ab_0e18);
    assert_eq!(
        pd(false, 1024, 1024).encode()[..4],
        [0xf6, 0xab, 0x0e, 0x18]
    );
}

#[test]
fn s4_version_field_is_1() {
    assert_eq!(pd(false, 1024, 1024).encode()[4], 1);
}

#[test]
fn s4_senders_must_set_reserved_bits_to_zero() {
    let mut p = pd(true, 8192, 8192);
    p.reserved = 0x7f; // as if copied from a received message
    assert_eq!(p.encode()[5], 0x01);
    assert_eq!(pd(false, 8192, 8192).encode()[5], 0x00);
}

#[test]
fn s4_receivers_must_ignore_reserved_bits() {
    for flags in [0x02u8, 0x80, 0xfe] {
        let Outcome::Found { pvt, .. } = parse(&msg(flags, 3, 3)) else {
            panic!()
        };
        assert!(!pvt.remote_invalidate);
        assert_eq!((pvt.send_size, pvt.recv_size), (4096, 4096));
        let n = negotiate(
            Role::Server,
            &pd(true, 4096, 4096),
            &parse(&msg(flags, 3, 3)),
        );
        assert!(
            !n.remote_invalidation,
            "reserved bits {flags:#x} must not act as R"
        );
    }
}

#[test]
fn s4_r_is_bit_15_of_the_second_word() {
    let word = u32::from_be_bytes(pd(true, 1024, 1024).encode()[4..8].try_into().unwrap());
    assert_eq!(
        word & (1 << 16),
        1 << 16,
        "RFC bit 15 counted from the MSB is 1<<16"
    );
    assert_eq!(word & !(1 << 16), 0x0100_0000);
}

#[test]
fn s4_1_both_r_set_allows_send_with_invalidate() {
    for role in [Role::Client, Role::Server] {
        let n = negotiate(role, &pd(true, 4096, 4096), &parse(&msg(1, 3, 3)));
        assert!(n.remote_invalidation);
    }
}

#[test]
fn s4_1_either_r_clear_means_plain_send_only() {
    for role in [Role::Client, Role::Server] {
        for (ours, theirs) in [(true, 0u8), (false, 1), (false, 0)] {
            let n = negotiate(role, &pd(ours, 4096, 4096), &parse(&msg(theirs, 3, 3)));
            assert!(
                !n.remote_invalidation,
                "{role:?} ours={ours} theirs={theirs}"
            );
        }
    }
}

#[test]
fn s4_2_codes_represent_1024_to_262144() {
    assert_eq!(decode_size(0), 1024);
    assert_eq!(decode_size(255), 262_144);
    assert_eq!(MIN_INLINE_SIZE, 1024);
    assert_eq!(MAX_INLINE_SIZE, 262_144);
}

#[test]
fn s4_2_sender_divides_by_1024_and_subtracts_one() {
    assert_eq!(encode_size(1024), Ok(0));
    assert_eq!(encode_size(4096), Ok(3));
    assert_eq!(encode_size(262_144), Ok(255));
}

#[test]
fn s4_2_receiver_adds_one_and_multiplies_by_1024() {
    for code in 0..=255u8 {
        assert_eq!(decode_size(code), (u32::from(code) + 1) * 1024);
        assert_eq!(encode_size(decode_size(code)), Ok(code));
    }
}

#[test]
fn s4_2_non_multiple_of_1024_rounds_down_never_overpromises() {
    assert_eq!(advertised_size(4095), Ok(3072));
    assert_eq!(advertised_size(4097), Ok(4096));
    assert_eq!(advertised_size(1025), Ok(1024));
}

#[test]
fn s4_2_above_262144_clamps_where_linux_truncates() {
    assert_eq!(encode_size(300 * 1024), Ok(255));
    assert_eq!(encode_size(u32::MAX), Ok(255));
    // Linux's rpcrdma_encode_buffer_size: (size >> 10) - 1 as u8.
    let linux = |size: u32| ((size >> 10) - 1) as u8;
    assert_eq!(decode_size(linux(300 * 1024)), 44 * 1024);
}

#[test]
fn s4_2_below_1024_cannot_be_advertised() {
    assert_eq!(encode_size(1023), Err(SizeTooSmall(1023)));
    assert_eq!(encode_size(0), Err(SizeTooSmall(0)));
    assert!(PrivateData::new(false, 512, 4096).is_err());
    assert!(PrivateData::new(false, 4096, 512).is_err());
}

#[test]
fn s4_2_client_to_server_threshold_is_min_of_client_send_and_server_recv() {
    let server = parse(&msg(0, 7, 1)); // send 8K, recv 2K
    let n = negotiate(Role::Client, &pd(false, 16384, 4096), &server);
    assert_eq!(n.c2s, 2048);
    assert_eq!(n.our_send_threshold, 2048);
    let n = negotiate(Role::Client, &pd(false, 1024, 4096), &server);
    assert_eq!(n.c2s, 1024);
}

#[test]
fn s4_2_server_to_client_threshold_is_min_of_server_send_and_client_recv() {
    let client = parse(&msg(0, 15, 1)); // send 16K, recv 2K
    let n = negotiate(Role::Server, &pd(false, 16384, 16384), &client);
    assert_eq!(
        n.s2c, 2048,
        "unlike svcrdma, the server honours the client's receive size"
    );
    assert_eq!(n.our_send_threshold, 2048);
    assert_eq!(n.c2s, 16384);
}

#[test]
fn s4_2_both_ends_compute_the_same_thresholds() {
    let client = pd(true, 16384, 2048);
    let server = pd(true, 8192, 65536);
    let at_client = negotiate(Role::Client, &client, &parse(&server.encode()));
    let at_server = negotiate(Role::Server, &server, &parse(&client.encode()));
    assert_eq!(
        (at_client.c2s, at_client.s2c),
        (at_server.c2s, at_server.s2c)
    );
    assert_eq!((at_client.c2s, at_client.s2c), (16384, 2048));
    assert_eq!(at_client.our_recv, 2048);
    assert_eq!(at_server.our_recv, 65536);
}

#[test]
fn s5_1_peer_without_valid_private_data_counts_as_r_clear_1024_1024() {
    let inputs: [&[u8]; 6] = [
        &[],
        &[0; 56],
        b"foreign!",
        &[0xf6, 0xab, 0x0e, 0x18],
        &msg(1, 3, 3)[..7],
        &[0xf6, 0xab, 0x0e, 0x18, 2, 1, 3, 3],
    ];
    for input in inputs {
        let outcome = parse(input);
        assert!(!matches!(outcome, Outcome::Found { .. }), "{input:?}");
        assert_eq!(outcome.effective(), PrivateData::DEFAULT);
        let n = negotiate(Role::Client, &pd(true, 16384, 16384), &outcome);
        assert_eq!((n.c2s, n.s2c, n.remote_invalidation), (1024, 1024, false));
    }
}

#[test]
fn s5_2_id_is_searched_at_every_offset_without_alignment() {
    for len in [REQ_PVT_LEN, REP_PVT_LEN] {
        for offset in 0..=len - 8 {
            let mut buf = vec![0x5au8; len];
            buf[offset..offset + 8].copy_from_slice(&LINUX_CLIENT);
            assert_eq!(
                parse(&buf),
                Outcome::Found {
                    offset,
                    pvt: pd(true, 4096, 4096)
                },
                "len {len} offset {offset}"
            );
        }
    }
}

#[test]
fn s5_2_id_absent_means_no_private_data() {
    assert_eq!(parse(b"some other layer's private data"), Outcome::Foreign);
    assert_eq!(parse(&[0u8; 196]), Outcome::Absent);
}

#[test]
fn s5_2_should_check_version_is_recognized() {
    for v in [0u8, 2, 3, 0x7f, 0xff] {
        let mut m = LINUX_CLIENT;
        m[4] = v;
        assert_eq!(
            parse(&m),
            Outcome::UnknownVersion {
                offset: 0,
                version: v
            }
        );
    }
}

#[test]
fn s5_2_should_check_content_does_not_overrun_buffer() {
    for cut in 4..8 {
        assert_eq!(
            parse(&LINUX_CLIENT[..cut]),
            Outcome::Truncated { offset: 0 }
        );
    }
    let mut buf = [0u8; 56];
    buf[50..56].copy_from_slice(&LINUX_CLIENT[..6]);
    assert_eq!(parse(&buf), Outcome::Truncated { offset: 50 });
}

#[test]
fn s6_message_extended_past_octet_8_still_parses_as_version_1() {
    let mut buf = [0xaau8; 20];
    buf[..8].copy_from_slice(&LINUX_SERVER);
    assert_eq!(
        parse(&buf),
        Outcome::Found {
            offset: 0,
            pvt: pd(false, 4096, 4096)
        }
    );
}

#[test]
fn outcome_names_are_stable() {
    let names: Vec<_> = [
        parse(&LINUX_CLIENT),
        parse(&[]),
        parse(b"x"),
        parse(&[0xf6, 0xab, 0x0e, 0x18, 9, 0, 0, 0]),
        parse(&[0xf6, 0xab, 0x0e, 0x18]),
    ]
    .iter()
    .map(Outcome::name)
    .collect();
    assert_eq!(
        names,
        ["found", "absent", "foreign", "unknown_version", "truncated"]
    );
}
