// SPDX-License-Identifier: GPL-2.0

//! Test vectors shared by the host tests (`cargo test`) and the in-kernel checks
//! (module parameter `selftest=1`, and the KUnit suite `rpcrdma_cm_vectors` on
//! kernels with `CONFIG_KUNIT=y`), so one table proves the same code in both builds.
//!
//! The Linux vectors are the bytes the C peers really send (captured on Linux
//! 6.12; 7.3's verbs.c and svc_rdma_transport.c build the same): the
//! xprtrdma client offers R=1, 4096/4096; svcrdma answers R=0, 4096/4096 (or its
//! `max_req_size`). The CM delivers them zero-padded: 56 octets on the passive side,
//! 196 on the active side.

use crate::proto::negotiate::Role;
use crate::proto::pvt_data::{Outcome, PrivateData};

/// The C client's (xprtrdma) private data.
pub const LINUX_CLIENT: [u8; 8] = [0xf6, 0xab, 0x0e, 0x18, 0x01, 0x01, 0x03, 0x03];
/// The C server's (svcrdma) private data.
pub const LINUX_SERVER: [u8; 8] = [0xf6, 0xab, 0x0e, 0x18, 0x01, 0x00, 0x03, 0x03];
/// The C server's private data with `max_req_size` 16384.
pub const LINUX_SERVER_16K: [u8; 8] = [0xf6, 0xab, 0x0e, 0x18, 0x01, 0x00, 0x0f, 0x0f];

/// Octets of private data the passive side sees (CONNECT_REQUEST on IB/RoCE).
pub const REQ_PVT_LEN: usize = 56;
/// Octets of private data the active side sees (ESTABLISHED on IB/RoCE).
pub const REP_PVT_LEN: usize = 196;

/// `N` octets of `fill` with `msg` copied in at `offset` (clipped at the end).
pub const fn place<const N: usize>(fill: u8, offset: usize, msg: &[u8]) -> [u8; N] {
    let mut b = [fill; N];
    let mut i = 0;
    while i < msg.len() && offset + i < N {
        b[offset + i] = msg[i];
        i += 1;
    }
    b
}

const fn with_octet(mut m: [u8; 8], at: usize, v: u8) -> [u8; 8] {
    m[at] = v;
    m
}

const fn pvt(r: bool, send: u32, recv: u32, reserved: u8) -> PrivateData {
    PrivateData {
        remote_invalidate: r,
        send_size: send,
        recv_size: recv,
        reserved,
    }
}

const fn found(offset: usize, p: PrivateData) -> Outcome {
    Outcome::Found { offset, pvt: p }
}

/// One parse vector: input and the outcome RFC 8797 Section 5 gives.
#[derive(Clone, Copy, Debug)]
pub struct ParseVector {
    /// A name that says what is tested.
    pub name: &'static str,
    /// The received private data.
    pub input: &'static [u8],
    /// The expected result of [`crate::proto::pvt_data::parse`].
    pub expect: Outcome,
}

const C4K_R: PrivateData = pvt(true, 4096, 4096, 0);
const C4K: PrivateData = pvt(false, 4096, 4096, 0);
const MAGIC: [u8; 4] = [0xf6, 0xab, 0x0e, 0x18];
const FOREIGN: [u8; 12] = *b"MPA ID Req F";

const ID_TWICE_BAD_FIRST: [u8; 16] = {
    let a: [u8; 16] = place(0, 0, &with_octet(LINUX_CLIENT, 4, 2));
    place_into(a, 8, &LINUX_SERVER)
};
const ID_TWICE_BOTH_GOOD: [u8; 16] = {
    let a: [u8; 16] = place(0, 0, &LINUX_SERVER);
    place_into(a, 8, &LINUX_CLIENT)
};

const fn place_into<const N: usize>(mut b: [u8; N], offset: usize, msg: &[u8]) -> [u8; N] {
    let mut i = 0;
    while i < msg.len() && offset + i < N {
        b[offset + i] = msg[i];
        i += 1;
    }
    b
}

/// Parse vectors: the Linux peers' bytes and the edge cases of RFC 8797 Section 5.
pub const PARSE_VECTORS: &[ParseVector] = &[
    ParseVector {
        name: "linux_client",
        input: &LINUX_CLIENT,
        expect: found(0, C4K_R),
    },
    ParseVector {
        name: "linux_server",
        input: &LINUX_SERVER,
        expect: found(0, C4K),
    },
    ParseVector {
        name: "linux_server_16k",
        input: &LINUX_SERVER_16K,
        expect: found(0, pvt(false, 16384, 16384, 0)),
    },
    ParseVector {
        name: "linux_client_as_passive_side_sees_it_56",
        input: &place::<REQ_PVT_LEN>(0, 0, &LINUX_CLIENT),
        expect: found(0, C4K_R),
    },
    ParseVector {
        name: "linux_server_as_active_side_sees_it_196",
        input: &place::<REP_PVT_LEN>(0, 0, &LINUX_SERVER),
        expect: found(0, C4K),
    },
    ParseVector {
        name: "empty_is_absent",
        input: &[],
        expect: Outcome::Absent,
    },
    ParseVector {
        name: "one_zero_octet_is_absent",
        input: &[0],
        expect: Outcome::Absent,
    },
    ParseVector {
        name: "zeros_56_is_absent",
        input: &[0; REQ_PVT_LEN],
        expect: Outcome::Absent,
    },
    ParseVector {
        name: "zeros_196_is_absent",
        input: &[0; REP_PVT_LEN],
        expect: Outcome::Absent,
    },
    ParseVector {
        name: "one_foreign_octet",
        input: &[0x5a],
        expect: Outcome::Foreign,
    },
    ParseVector {
        name: "foreign_data_without_id",
        input: &FOREIGN,
        expect: Outcome::Foreign,
    },
    ParseVector {
        name: "id_at_odd_offset_3_after_foreign_octets",
        input: &place_into(
            place::<REQ_PVT_LEN>(0, 0, &[0x11, 0x22, 0x33]),
            3,
            &LINUX_CLIENT,
        ),
        expect: found(3, C4K_R),
    },
    ParseVector {
        name: "id_at_last_possible_offset_188_of_196",
        input: &place::<REP_PVT_LEN>(0, REP_PVT_LEN - 8, &LINUX_SERVER),
        expect: found(REP_PVT_LEN - 8, C4K),
    },
    ParseVector {
        name: "id_one_past_last_possible_offset_is_truncated",
        input: &place::<REP_PVT_LEN>(0, REP_PVT_LEN - 7, &LINUX_SERVER),
        expect: Outcome::Truncated {
            offset: REP_PVT_LEN - 7,
        },
    },
    ParseVector {
        name: "id_alone_is_truncated",
        input: &MAGIC,
        expect: Outcome::Truncated { offset: 0 },
    },
    ParseVector {
        name: "seven_octets_is_truncated",
        input: &[0xf6, 0xab, 0x0e, 0x18, 0x01, 0x01, 0x03],
        expect: Outcome::Truncated { offset: 0 },
    },
    ParseVector {
        name: "three_octets_of_id_is_foreign",
        input: &[0xf6, 0xab, 0x0e],
        expect: Outcome::Foreign,
    },
    ParseVector {
        name: "version_0_is_unknown",
        input: &with_octet(LINUX_CLIENT, 4, 0),
        expect: Outcome::UnknownVersion {
            offset: 0,
            version: 0,
        },
    },
    ParseVector {
        name: "version_2_is_unknown",
        input: &with_octet(LINUX_CLIENT, 4, 2),
        expect: Outcome::UnknownVersion {
            offset: 0,
            version: 2,
        },
    },
    ParseVector {
        name: "version_255_is_unknown",
        input: &with_octet(LINUX_CLIENT, 4, 255),
        expect: Outcome::UnknownVersion {
            offset: 0,
            version: 255,
        },
    },
    ParseVector {
        name: "reserved_bits_ignored_r_clear",
        input: &with_octet(LINUX_CLIENT, 5, 0xfe),
        expect: found(0, pvt(false, 4096, 4096, 0x7f)),
    },
    ParseVector {
        name: "reserved_bits_ignored_r_set",
        input: &with_octet(LINUX_CLIENT, 5, 0xff),
        expect: found(0, pvt(true, 4096, 4096, 0x7f)),
    },
    ParseVector {
        name: "size_codes_0_and_255",
        input: &[0xf6, 0xab, 0x0e, 0x18, 0x01, 0x00, 0x00, 0xff],
        expect: found(0, pvt(false, 1024, 262_144, 0)),
    },
    ParseVector {
        name: "id_twice_first_bad_version_second_wins",
        input: &ID_TWICE_BAD_FIRST,
        expect: found(8, C4K),
    },
    ParseVector {
        name: "id_twice_both_valid_first_wins",
        input: &ID_TWICE_BOTH_GOOD,
        expect: found(0, C4K),
    },
    ParseVector {
        name: "message_longer_than_8_octets_is_found",
        input: &place::<12>(0xee, 0, &LINUX_CLIENT),
        expect: found(0, C4K_R),
    },
];

/// One negotiation vector: what we advertise, our role, the peer's bytes, and the
/// thresholds and remote-invalidation decision RFC 8797 gives.
#[derive(Clone, Copy, Debug)]
pub struct NegotiateVector {
    /// A name that says what is tested.
    pub name: &'static str,
    /// Our role.
    pub role: Role,
    /// What we advertise.
    pub ours: PrivateData,
    /// The peer's private data as received.
    pub peer: &'static [u8],
    /// Expected client-to-server threshold.
    pub c2s: u32,
    /// Expected server-to-client threshold.
    pub s2c: u32,
    /// Expected remote-invalidation decision.
    pub remote_invalidation: bool,
}

const OUR_R_16K: PrivateData = pvt(true, 16384, 16384, 0);

/// Negotiation vectors (RFC 8797 Sections 4.1, 4.2, 5.1).
pub const NEGOTIATE_VECTORS: &[NegotiateVector] = &[
    NegotiateVector {
        name: "client_r_16k_vs_linux_server",
        role: Role::Client,
        ours: OUR_R_16K,
        peer: &place::<REP_PVT_LEN>(0, 0, &LINUX_SERVER),
        c2s: 4096,
        s2c: 4096,
        remote_invalidation: false,
    },
    NegotiateVector {
        name: "server_r_16k_vs_linux_client",
        role: Role::Server,
        ours: OUR_R_16K,
        peer: &place::<REQ_PVT_LEN>(0, 0, &LINUX_CLIENT),
        c2s: 4096,
        s2c: 4096,
        remote_invalidation: true,
    },
    NegotiateVector {
        name: "client_asymmetric_sizes_take_the_smaller_each_way",
        role: Role::Client,
        ours: pvt(true, 16384, 4096, 0),
        peer: &[0xf6, 0xab, 0x0e, 0x18, 0x01, 0x01, 0x07, 0x01],
        c2s: 2048,
        s2c: 4096,
        remote_invalidation: true,
    },
    NegotiateVector {
        name: "server_honours_client_receive_size",
        role: Role::Server,
        ours: OUR_R_16K,
        peer: &[0xf6, 0xab, 0x0e, 0x18, 0x01, 0x01, 0x0f, 0x01],
        c2s: 16384,
        s2c: 2048,
        remote_invalidation: true,
    },
    NegotiateVector {
        name: "server_r_clear_means_no_remote_invalidation",
        role: Role::Server,
        ours: pvt(false, 16384, 16384, 0),
        peer: &LINUX_CLIENT,
        c2s: 4096,
        s2c: 4096,
        remote_invalidation: false,
    },
    NegotiateVector {
        name: "client_peer_absent_is_1024_1024_r_clear",
        role: Role::Client,
        ours: OUR_R_16K,
        peer: &[0; REP_PVT_LEN],
        c2s: 1024,
        s2c: 1024,
        remote_invalidation: false,
    },
    NegotiateVector {
        name: "server_peer_unknown_version_is_default",
        role: Role::Server,
        ours: OUR_R_16K,
        peer: &with_octet(LINUX_CLIENT, 4, 2),
        c2s: 1024,
        s2c: 1024,
        remote_invalidation: false,
    },
    NegotiateVector {
        name: "client_legacy_we_sent_nothing",
        role: Role::Client,
        ours: PrivateData::DEFAULT,
        peer: &LINUX_SERVER,
        c2s: 1024,
        s2c: 1024,
        remote_invalidation: false,
    },
];
