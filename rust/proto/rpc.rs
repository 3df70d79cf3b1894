// SPDX-License-Identifier: GPL-2.0

//! ONC RPC version 2 messages (RFC 5531), as far as an RPC-over-RDMA endpoint
//! needs them: a requester encodes calls and decodes replies; a responder decodes
//! calls and encodes replies. Also the echo program this module serves for tests
//! and benchmarks.
//!
//! Credentials are AUTH_NONE on calls we send; calls we receive may carry any
//! flavour (the body is skipped, at most 400 octets as RFC 5531 allows).

use crate::proto::xdr::{Short, XdrReader, XdrWriter};

/// `msg_type` CALL.
pub const CALL: u32 = 0;
/// `msg_type` REPLY.
pub const REPLY: u32 = 1;
/// The only RPC version.
pub const RPC_VERSION: u32 = 2;
/// `reply_stat` MSG_ACCEPTED.
pub const MSG_ACCEPTED: u32 = 0;
/// `reply_stat` MSG_DENIED.
pub const MSG_DENIED: u32 = 1;
/// `auth_flavor` AUTH_NONE.
pub const AUTH_NONE: u32 = 0;
/// `reject_stat` RPC_MISMATCH.
pub const RPC_MISMATCH: u32 = 0;
/// Largest `opaque_auth` body (RFC 5531, Section 8.2).
pub const MAX_AUTH_BODY: usize = 400;
/// Length of a call header with AUTH_NONE credential and verifier.
pub const CALL_HEADER_LEN: usize = 40;
/// Length of an accepted reply header with an AUTH_NONE verifier.
pub const REPLY_HEADER_LEN: usize = 24;

/// `accept_stat`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AcceptStat {
    /// RPC executed successfully.
    Success,
    /// Program unavailable.
    ProgUnavail,
    /// Program version mismatch, with the versions supported.
    ProgMismatch {
        /// Lowest version supported.
        low: u32,
        /// Highest version supported.
        high: u32,
    },
    /// Procedure unavailable.
    ProcUnavail,
    /// The arguments could not be decoded.
    GarbageArgs,
    /// A memory allocation failure or the like.
    SystemErr,
}

impl AcceptStat {
    /// The XDR value.
    pub fn code(&self) -> u32 {
        match self {
            AcceptStat::Success => 0,
            AcceptStat::ProgUnavail => 1,
            AcceptStat::ProgMismatch { .. } => 2,
            AcceptStat::ProcUnavail => 3,
            AcceptStat::GarbageArgs => 4,
            AcceptStat::SystemErr => 5,
        }
    }

    /// A short stable name, as shown in debugfs.
    pub fn name(&self) -> &'static str {
        match self {
            AcceptStat::Success => "success",
            AcceptStat::ProgUnavail => "prog_unavail",
            AcceptStat::ProgMismatch { .. } => "prog_mismatch",
            AcceptStat::ProcUnavail => "proc_unavail",
            AcceptStat::GarbageArgs => "garbage_args",
            AcceptStat::SystemErr => "system_err",
        }
    }
}

/// Why an RPC message could not be decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RpcError {
    /// The message ended early.
    Truncated,
    /// A call where a reply was expected, or the reverse, or neither.
    MsgType(u32),
    /// `rpcvers` is not 2 (a responder answers RPC_MISMATCH).
    RpcVersion(u32),
    /// An `opaque_auth` body longer than 400 octets.
    AuthTooLong,
    /// A `reply_stat` or `accept_stat` this side does not know.
    BadStat(u32),
}

impl From<Short> for RpcError {
    fn from(_: Short) -> Self {
        RpcError::Truncated
    }
}

/// A decoded call header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallHeader {
    /// XID.
    pub xid: u32,
    /// Program.
    pub prog: u32,
    /// Program version.
    pub vers: u32,
    /// Procedure.
    pub proc_: u32,
    /// Offset of the procedure's arguments in the message.
    pub args: usize,
}

/// How a reply ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplyStatus {
    /// MSG_ACCEPTED with this `accept_stat`.
    Accepted(AcceptStat),
    /// MSG_DENIED (RPC_MISMATCH or AUTH_ERROR), with its `reject_stat`.
    Denied(u32),
}

/// A decoded reply header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplyHeader {
    /// XID.
    pub xid: u32,
    /// How the call went.
    pub status: ReplyStatus,
    /// Offset of the results in the message (SUCCESS only; else the end).
    pub results: usize,
}

fn skip_auth(r: &mut XdrReader<'_>) -> Result<(), RpcError> {
    let _flavor = r.u32()?;
    let len = r.u32()?;
    let len = usize::try_from(len).map_err(|_| RpcError::AuthTooLong)?;
    if len > MAX_AUTH_BODY {
        return Err(RpcError::AuthTooLong);
    }
    r.take(len.div_ceil(4) * 4)?;
    Ok(())
}

/// `auth_flavor` AUTH_SYS.
pub const AUTH_SYS: u32 = 1;
/// The machine name our AUTH_SYS credentials carry.
pub const MACHINE_NAME: &[u8] = b"rpcrdma_cm";
/// Length of a call header with our AUTH_SYS credential and an AUTH_NONE
/// verifier.
pub const CALL_HEADER_SYS_LEN: usize = 24 + 8 + 4 + 4 + 12 + 12 + 8;

/// The credential of a call we send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cred {
    /// AUTH_NONE.
    None,
    /// AUTH_SYS with this uid and gid, no supplementary groups, stamp 0 and
    /// [`MACHINE_NAME`].
    Sys {
        /// User id.
        uid: u32,
        /// Group id.
        gid: u32,
    },
}

/// Encodes a call header with AUTH_NONE credential and verifier; returns its
/// length ([`CALL_HEADER_LEN`]).
pub fn encode_call(
    buf: &mut [u8],
    xid: u32,
    prog: u32,
    vers: u32,
    proc_: u32,
) -> Result<usize, Short> {
    encode_call_cred(buf, xid, prog, vers, proc_, Cred::None)
}

/// Encodes a call header with `cred` and an AUTH_NONE verifier; returns its
/// length ([`CALL_HEADER_LEN`] or [`CALL_HEADER_SYS_LEN`]).
pub fn encode_call_cred(
    buf: &mut [u8],
    xid: u32,
    prog: u32,
    vers: u32,
    proc_: u32,
    cred: Cred,
) -> Result<usize, Short> {
    let mut w = XdrWriter::new(buf);
    for v in [xid, CALL, RPC_VERSION, prog, vers, proc_] {
        w.u32(v)?;
    }
    match cred {
        Cred::None => {
            w.u32(AUTH_NONE)?;
            w.u32(0)?;
        }
        Cred::Sys { uid, gid } => {
            w.u32(AUTH_SYS)?;
            let name_len = MACHINE_NAME.len().div_ceil(4) * 4;
            w.u32((4 + 4 + name_len + 12) as u32)?;
            w.u32(0)?;
            w.opaque(MACHINE_NAME)?;
            w.u32(uid)?;
            w.u32(gid)?;
            w.u32(0)?;
        }
    }
    w.u32(AUTH_NONE)?;
    w.u32(0)?;
    Ok(w.position())
}

/// Decodes the header of an RPC call; the XID is always returned when the message
/// holds one, so that a responder can answer even a bad call.
pub fn decode_call(msg: &[u8]) -> Result<CallHeader, (Option<u32>, RpcError)> {
    let mut r = XdrReader::new(msg);
    let xid = r.u32().map_err(|_| (None, RpcError::Truncated))?;
    let inner = |r: &mut XdrReader<'_>| -> Result<CallHeader, RpcError> {
        let mtype = r.u32()?;
        if mtype != CALL {
            return Err(RpcError::MsgType(mtype));
        }
        let rpcvers = r.u32()?;
        if rpcvers != RPC_VERSION {
            return Err(RpcError::RpcVersion(rpcvers));
        }
        let prog = r.u32()?;
        let vers = r.u32()?;
        let proc_ = r.u32()?;
        skip_auth(r)?;
        skip_auth(r)?;
        Ok(CallHeader {
            xid,
            prog,
            vers,
            proc_,
            args: r.position(),
        })
    };
    inner(&mut r).map_err(|e| (Some(xid), e))
}

/// Encodes an accepted reply header with an AUTH_NONE verifier; returns its length.
pub fn encode_accepted(buf: &mut [u8], xid: u32, stat: AcceptStat) -> Result<usize, Short> {
    let mut w = XdrWriter::new(buf);
    for v in [xid, REPLY, MSG_ACCEPTED, AUTH_NONE, 0, stat.code()] {
        w.u32(v)?;
    }
    if let AcceptStat::ProgMismatch { low, high } = stat {
        w.u32(low)?;
        w.u32(high)?;
    }
    Ok(w.position())
}

/// Encodes a MSG_DENIED / RPC_MISMATCH reply (we speak version 2 only).
pub fn encode_rpc_mismatch(buf: &mut [u8], xid: u32) -> Result<usize, Short> {
    let mut w = XdrWriter::new(buf);
    for v in [
        xid,
        REPLY,
        MSG_DENIED,
        RPC_MISMATCH,
        RPC_VERSION,
        RPC_VERSION,
    ] {
        w.u32(v)?;
    }
    Ok(w.position())
}

/// Decodes the header of an RPC reply.
pub fn decode_reply(msg: &[u8]) -> Result<ReplyHeader, RpcError> {
    let mut r = XdrReader::new(msg);
    let xid = r.u32()?;
    let mtype = r.u32()?;
    if mtype != REPLY {
        return Err(RpcError::MsgType(mtype));
    }
    let status = match r.u32()? {
        MSG_ACCEPTED => {
            skip_auth(&mut r)?;
            let stat = match r.u32()? {
                0 => AcceptStat::Success,
                1 => AcceptStat::ProgUnavail,
                2 => AcceptStat::ProgMismatch {
                    low: r.u32()?,
                    high: r.u32()?,
                },
                3 => AcceptStat::ProcUnavail,
                4 => AcceptStat::GarbageArgs,
                5 => AcceptStat::SystemErr,
                s => return Err(RpcError::BadStat(s)),
            };
            ReplyStatus::Accepted(stat)
        }
        MSG_DENIED => ReplyStatus::Denied(r.u32()?),
        s => return Err(RpcError::BadStat(s)),
    };
    Ok(ReplyHeader {
        xid,
        status,
        results: r.position(),
    })
}

/// The echo program this module serves: a number from the user-defined range
/// (RFC 5531, Section 7.3: 0x20000000 to 0x3fffffff).
pub mod echo {
    /// Program number.
    pub const PROGRAM: u32 = 0x2000_8797;
    /// The only version.
    pub const VERSION: u32 = 1;
    /// NULL: no arguments, no results.
    pub const NULL: u32 = 0;
    /// ECHO: `opaque data<>` in, the same `opaque data<>` out. The data is
    /// DDP-eligible both ways (like NFS WRITE and READ data).
    pub const ECHO: u32 = 1;
    /// ECHO_NODDP: as ECHO, but the data is not DDP-eligible (like a large
    /// READDIR reply): what does not fit inline goes in a Position-Zero Read
    /// chunk or a Reply chunk.
    pub const ECHO_NODDP: u32 = 2;
    /// Largest payload an ECHO carries.
    pub const MAX_PAYLOAD: u32 = 1 << 20;

    /// The payload octet at `i` of an echo of `len` octets sent with `seed`: what
    /// both ends generate and check, so a mismatch anywhere is detected.
    pub fn pattern(seed: u32, i: usize) -> u8 {
        let x = ((i as u32) ^ seed.wrapping_mul(0x9e37_79b9)).wrapping_mul(2_654_435_761);
        (x >> 24) as u8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_round_trip() {
        let mut b = [0u8; 64];
        let n = encode_call(&mut b, 7, 100_003, 4, 0).unwrap();
        assert_eq!(n, CALL_HEADER_LEN);
        let h = decode_call(&b[..n]).unwrap();
        assert_eq!(
            (h.xid, h.prog, h.vers, h.proc_, h.args),
            (7, 100_003, 4, 0, 40)
        );
    }

    #[test]
    fn auth_sys_call_header() {
        let mut b = [0u8; 128];
        let n = encode_call_cred(&mut b, 3, 100_003, 4, 1, Cred::Sys { uid: 0, gid: 0 }).unwrap();
        assert_eq!(n, CALL_HEADER_SYS_LEN);
        let h = decode_call(&b[..n]).unwrap();
        assert_eq!((h.xid, h.proc_, h.args), (3, 1, n));
        assert_eq!(&b[24..28], &AUTH_SYS.to_be_bytes());
    }

    #[test]
    fn call_with_auth_sys_body_is_skipped() {
        let mut b = [0u8; 128];
        let mut w = XdrWriter::new(&mut b);
        for v in [
            9, CALL, 2, 1, 1, 1, 1, 20, 0, 0, 0, 0, 0, AUTH_NONE, 0, 0xdead,
        ] {
            w.u32(v).unwrap();
        }
        let n = w.position();
        let h = decode_call(&b[..n]).unwrap();
        assert_eq!(h.args, n - 4);
    }

    #[test]
    fn bad_calls_keep_the_xid() {
        let mut b = [0u8; 64];
        let n = encode_call(&mut b, 5, 1, 1, 1).unwrap();
        assert_eq!(decode_call(&b[..2]), Err((None, RpcError::Truncated)));
        assert_eq!(decode_call(&b[..20]), Err((Some(5), RpcError::Truncated)));
        b[8..12].copy_from_slice(&3u32.to_be_bytes());
        assert_eq!(
            decode_call(&b[..n]),
            Err((Some(5), RpcError::RpcVersion(3)))
        );
        b[4..8].copy_from_slice(&REPLY.to_be_bytes());
        assert_eq!(decode_call(&b[..n]), Err((Some(5), RpcError::MsgType(1))));
        let mut w = XdrWriter::new(&mut b);
        for v in [5, CALL, 2, 1, 1, 1, 1, 404] {
            w.u32(v).unwrap();
        }
        assert_eq!(decode_call(&b[..32]), Err((Some(5), RpcError::AuthTooLong)));
    }

    #[test]
    fn reply_round_trip() {
        let mut b = [0u8; 64];
        for stat in [
            AcceptStat::Success,
            AcceptStat::ProgUnavail,
            AcceptStat::ProgMismatch { low: 1, high: 3 },
            AcceptStat::ProcUnavail,
            AcceptStat::GarbageArgs,
            AcceptStat::SystemErr,
        ] {
            let n = encode_accepted(&mut b, 11, stat).unwrap();
            let r = decode_reply(&b[..n]).unwrap();
            assert_eq!(r.xid, 11);
            assert_eq!(r.status, ReplyStatus::Accepted(stat));
            assert_eq!(r.results, n);
        }
        let n = encode_accepted(&mut b, 1, AcceptStat::Success).unwrap();
        assert_eq!(n, REPLY_HEADER_LEN);
        let n = encode_rpc_mismatch(&mut b, 12).unwrap();
        let r = decode_reply(&b[..n]).unwrap();
        assert_eq!(r.status, ReplyStatus::Denied(RPC_MISMATCH));
    }

    #[test]
    fn reply_errors() {
        let mut b = [0u8; 64];
        let n = encode_accepted(&mut b, 11, AcceptStat::Success).unwrap();
        assert_eq!(decode_reply(&b[..n - 1]), Err(RpcError::Truncated));
        b[20..24].copy_from_slice(&9u32.to_be_bytes());
        assert_eq!(decode_reply(&b[..n]), Err(RpcError::BadStat(9)));
        let n = encode_call(&mut b, 1, 1, 1, 1).unwrap();
        assert_eq!(decode_reply(&b[..n]), Err(RpcError::MsgType(CALL)));
    }

    #[test]
    fn echo_pattern_depends_on_seed_and_index() {
        let a: [u8; 16] = core::array::from_fn(|i| echo::pattern(1, i));
        let b: [u8; 16] = core::array::from_fn(|i| echo::pattern(2, i));
        assert_ne!(a, b);
        assert!(a.windows(2).any(|w| w[0] != w[1]));
    }
}
