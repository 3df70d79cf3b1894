// SPDX-License-Identifier: GPL-2.0

//! Tracepoints (trace system `rpcrdma_cm`, defined in `rpcrdma_cm_trace.h`,
//! fired through `trace.c`). A disabled tracepoint costs a call and a static
//! key test; strings are copied into a small buffer only then too, so
//! callers fire them on rare events (connections, errors), not per message.

use super::bindings::{
    rpcrdma_cm_trace_closed, rpcrdma_cm_trace_fatal, rpcrdma_cm_trace_negotiated,
    rpcrdma_cm_trace_rdma_error, rpcrdma_cm_trace_reject, rpcrdma_cm_trace_wc_error,
    rpcrdma_cm_trace_xprt,
};
use kernel::ffi::c_char;

/// `s` as a NUL-terminated string (cut at 63 octets).
struct CStrBuf([u8; 64]);

impl CStrBuf {
    fn new(s: &str) -> Self {
        let mut b = [0u8; 64];
        let n = s.len().min(63);
        b[..n].copy_from_slice(&s.as_bytes()[..n]);
        CStrBuf(b)
    }

    fn ptr(&self) -> *const c_char {
        self.0.as_ptr().cast()
    }
}

/// What a connection negotiated (RFC 8797).
pub(crate) struct Negotiated<'a> {
    pub(crate) id: u32,
    pub(crate) server: bool,
    pub(crate) peer: &'a str,
    pub(crate) outcome: &'a str,
    pub(crate) peer_send: u32,
    pub(crate) peer_recv: u32,
    pub(crate) peer_r: bool,
    pub(crate) c2s: u32,
    pub(crate) s2c: u32,
    pub(crate) reminv: bool,
}

/// `rpcrdma_cm:rpcrdma_cm_negotiated`.
pub(crate) fn negotiated(n: &Negotiated<'_>) {
    let (peer, outcome) = (CStrBuf::new(n.peer), CStrBuf::new(n.outcome));
    // SAFETY: both strings are NUL-terminated and live for the call; the
    // tracepoint copies them.
    unsafe {
        rpcrdma_cm_trace_negotiated(
            n.id,
            n.server,
            peer.ptr(),
            outcome.ptr(),
            n.peer_send,
            n.peer_recv,
            n.peer_r,
            n.c2s,
            n.s2c,
            n.reminv,
        )
    };
}

/// `rpcrdma_cm:rpcrdma_cm_reject`.
pub(crate) fn reject(peer: &str, why: &str) {
    let (p, w) = (CStrBuf::new(peer), CStrBuf::new(why));
    // SAFETY: as in `negotiated`.
    unsafe { rpcrdma_cm_trace_reject(p.ptr(), w.ptr()) };
}

/// `rpcrdma_cm:rpcrdma_cm_rdma_error`.
pub(crate) fn rdma_error(id: u32, xid: u32, code: u32) {
    // SAFETY: scalars only.
    unsafe { rpcrdma_cm_trace_rdma_error(id, xid, code) };
}

/// `rpcrdma_cm:rpcrdma_cm_closed`.
pub(crate) fn closed(id: u32, why: &str, status: i32) {
    let w = CStrBuf::new(why);
    // SAFETY: as in `negotiated`.
    unsafe { rpcrdma_cm_trace_closed(id, w.ptr(), status) };
}

/// `rpcrdma_cm:rpcrdma_cm_wc_error`.
pub(crate) fn wc_error(id: u32, recv: bool, status: i32) {
    // SAFETY: scalars only.
    unsafe { rpcrdma_cm_trace_wc_error(id, recv, status) };
}

/// `rpcrdma_cm:rpcrdma_cm_fatal`: why an established connection ends.
pub(crate) fn fatal(id: u32, why: &str, status: i32) {
    let w = CStrBuf::new(why);
    // SAFETY: as in `negotiated`.
    unsafe { rpcrdma_cm_trace_fatal(id, w.ptr(), status) };
}

/// `rpcrdma_cm:rpcrdma_cm_xprt`: what happened to a mount's transport
/// (`connect`, `reconnect`, `reg_failed`) on connection `id`.
pub(crate) fn xprt(id: u32, what: &str, xid: u32, status: i32) {
    let w = CStrBuf::new(what);
    // SAFETY: as in `negotiated`.
    unsafe { rpcrdma_cm_trace_xprt(id, w.ptr(), xid, status) };
}
