// SPDX-License-Identifier: GPL-2.0

//! The connection state machine and the credit policy.

use rpcrdma_proto::conn_state::*;

#[test]
fn client_path_to_established() {
    let mut s = ConnState::New;
    assert!(s.advance(ConnState::Resolving));
    assert!(s.advance(ConnState::Connecting));
    assert!(s.advance(ConnState::Established));
    assert!(s.is_established());
    assert_eq!(s.name(), "established");
}

#[test]
fn server_path_to_established() {
    let mut s = ConnState::New;
    assert!(s.advance(ConnState::Accepting));
    assert!(!s.is_closed(), "a connection being accepted is not closed");
    assert!(s.advance(ConnState::Established));
}

#[test]
fn first_close_wins() {
    let mut s = ConnState::Established;
    assert!(s.close(Closed::ClosedByUser, 0));
    // The peer's DISCONNECTED arriving afterwards changes nothing.
    assert!(!s.close(Closed::Disconnected, 0));
    assert_eq!(s, ConnState::Closed(Closed::ClosedByUser, 0));
    assert_eq!(s.name(), "closed_by_user");
    // Nor can anything reopen it.
    assert!(!s.advance(ConnState::Established));
    assert!(!s.advance(ConnState::Disconnecting));
}

#[test]
fn closing_is_allowed_from_every_open_state() {
    use ConnState as S;
    for open in [
        S::New,
        S::Resolving,
        S::Connecting,
        S::Accepting,
        S::Established,
        S::Disconnecting,
    ] {
        let mut s = open;
        assert!(s.close(Closed::DeviceRemoved, -19), "{open:?}");
        assert!(s.is_closed());
        assert_eq!(s, S::Closed(Closed::DeviceRemoved, -19));
    }
}

#[test]
fn illegal_steps_are_refused() {
    use ConnState::*;
    let cases = [
        (New, Established),
        (New, Connecting),
        (Resolving, Established),
        (Accepting, Connecting),
        (Established, Connecting),
        (Disconnecting, Established),
    ];
    for (from, to) in cases {
        let mut s = from;
        assert!(!s.advance(to), "{from:?} -> {to:?}");
        assert_eq!(s, from);
    }
}

#[test]
fn disconnecting_only_from_established() {
    let mut s = ConnState::Connecting;
    assert!(!s.advance(ConnState::Disconnecting));
    let mut s = ConnState::Established;
    assert!(s.advance(ConnState::Disconnecting));
    assert!(!s.is_established());
}

#[test]
fn every_close_reason_has_a_distinct_name() {
    use Closed::*;
    let all = [
        AddrError,
        RouteError,
        ConnectError,
        Unreachable,
        Rejected,
        Disconnected,
        DeviceRemoved,
        ClosedByUser,
        ClosedByNfsd,
        NotAcceptedByNfsd,
        ClosedBySunrpc,
        IdleTimeout,
        Unloaded,
        CreateFailed,
        ResolveFailed,
        RouteFailed,
        ConnectFailed,
        AcceptFailed,
    ];
    for (i, a) in all.iter().enumerate() {
        for b in &all[i + 1..] {
            assert_ne!(a.name(), b.name());
        }
        assert!(a
            .name()
            .bytes()
            .all(|c| c.is_ascii_lowercase() || c == b'_'));
    }
}

#[test]
fn initial_receives_follow_the_budget() {
    // 64 KiB of 4 KiB buffers, of at most 33.
    assert_eq!(initial_receives(4096, 65536, 33), 16);
    // 256 KiB buffers: the floor of 2, whatever the budget says.
    assert_eq!(initial_receives(262144, 65536, 33), 2);
    // 1 KiB buffers: capped at the depth.
    assert_eq!(initial_receives(1024, 65536, 33), 33);
}

#[test]
fn server_grant_leaves_one_receive_for_the_repost() {
    assert_eq!(server_grant(33), 32);
    assert_eq!(server_grant(2), 1);
    assert_eq!(server_grant(1), 1);
    assert_eq!(server_grant(0), 1);
}

#[test]
fn receives_grow_only_when_every_credit_is_used() {
    // 16 buffers grant 15: 14 calls in use need nothing more.
    assert_eq!(receives_to_add(14, 16, 33), 0);
    // The 15th doubles them.
    assert_eq!(receives_to_add(15, 16, 33), 16);
    // Never past the depth.
    assert_eq!(receives_to_add(32, 32, 33), 1);
    assert_eq!(receives_to_add(32, 33, 33), 0);
    // From the floor: 2 buffers grant 1; one call in use grows them to 4.
    assert_eq!(receives_to_add(1, 2, 33), 2);
    let grown = 2 + receives_to_add(1, 2, 33);
    assert_eq!(server_grant(grown), 3);
}

#[test]
fn growth_reaches_the_depth_under_a_client_that_uses_all_credits() {
    let (mut r, max) = (2u32, 33u32);
    for _ in 0..10 {
        let in_use = server_grant(r);
        r += receives_to_add(in_use, r, max);
        assert!(r <= max);
    }
    assert_eq!(r, max);
    assert_eq!(server_grant(r), 32);
}

#[test]
fn client_window_respects_grant_receives_and_slots() {
    assert_eq!(client_window(128, 33, 32), 32);
    assert_eq!(client_window(8, 33, 32), 8);
    assert_eq!(client_window(128, 17, 32), 16);
    assert_eq!(client_window(0, 33, 32), 1);
}
