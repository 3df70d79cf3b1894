// SPDX-License-Identifier: GPL-2.0

//! NFS upper-layer bindings for RPC-over-RDMA version 1 (RFC 8267; the NFS ULB
//! draft in the specs): which arguments and results are DDP-eligible, and
//! reply-size estimates for the procedures and operations this project issues.

use crate::proto::xdr::xdr_align;

/// Which message of an RPC holds a DDP-eligible item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ddp {
    /// An argument of the call (a Read chunk may carry it).
    Call,
    /// A result of the reply (a Write chunk may receive it).
    Reply,
}

/// NFS program number.
pub const NFS_PROGRAM: u32 = 100_003;

/// NFSv3 procedure numbers (RFC 1813).
pub mod nfs3 {
    /// NULL.
    pub const NULL: u32 = 0;
    /// GETATTR.
    pub const GETATTR: u32 = 1;
    /// LOOKUP.
    pub const LOOKUP: u32 = 3;
    /// READLINK: the link target is DDP-eligible.
    pub const READLINK: u32 = 5;
    /// READ: the data is DDP-eligible.
    pub const READ: u32 = 6;
    /// WRITE: the data is DDP-eligible.
    pub const WRITE: u32 = 7;
    /// SYMLINK: the link data is DDP-eligible.
    pub const SYMLINK: u32 = 10;
    /// READDIR.
    pub const READDIR: u32 = 16;
}

/// NFSv4 COMPOUND operation numbers (RFC 7530, RFC 5661, RFC 7862).
pub mod nfs4 {
    /// CREATE: the link data of an NF4LNK object is DDP-eligible.
    pub const OP_CREATE: u32 = 6;
    /// GETATTR.
    pub const OP_GETATTR: u32 = 9;
    /// GETFH.
    pub const OP_GETFH: u32 = 10;
    /// LOOKUP.
    pub const OP_LOOKUP: u32 = 15;
    /// PUTFH.
    pub const OP_PUTFH: u32 = 22;
    /// PUTROOTFH.
    pub const OP_PUTROOTFH: u32 = 24;
    /// READ: the data is DDP-eligible.
    pub const OP_READ: u32 = 25;
    /// READDIR.
    pub const OP_READDIR: u32 = 26;
    /// READLINK: the link target is DDP-eligible.
    pub const OP_READLINK: u32 = 27;
    /// WRITE: the data is DDP-eligible.
    pub const OP_WRITE: u32 = 38;
    /// READ_PLUS (4.2): the data content is DDP-eligible.
    pub const OP_READ_PLUS: u32 = 68;
    /// Largest file handle (NFS4_FHSIZE).
    pub const FHSIZE: u32 = 128;
}

/// The DDP-eligible item of an NFSv2/v3 procedure (RFC 8267, Section 4).
/// Everything not listed is not DDP-eligible.
pub fn nfs3_ddp(proc: u32) -> Option<Ddp> {
    match proc {
        nfs3::WRITE | nfs3::SYMLINK => Some(Ddp::Call),
        nfs3::READ | nfs3::READLINK => Some(Ddp::Reply),
        _ => None,
    }
}

/// The DDP-eligible item of an NFSv4 COMPOUND operation (RFC 8267, Section 5.1).
/// For CREATE only the NF4LNK link data is eligible: `create_is_link` says which.
pub fn nfs4_op_ddp(op: u32, create_is_link: bool) -> Option<Ddp> {
    match op {
        nfs4::OP_WRITE => Some(Ddp::Call),
        nfs4::OP_CREATE if create_is_link => Some(Ddp::Call),
        nfs4::OP_READ | nfs4::OP_READLINK | nfs4::OP_READ_PLUS => Some(Ddp::Reply),
        _ => None,
    }
}

/// Octets of an accepted RPC reply header with an AUTH_NONE or AUTH_SYS verifier:
/// xid, msg_type, reply_stat, verifier flavor and length, accept_stat.
pub const RPC_REPLY_HDR: u32 = 24;
/// Octets of an NFSv4 COMPOUND4res head with a tag of at most `tag_len` octets:
/// status, tag, result count.
pub fn compound_res_head(tag_len: u32) -> u32 {
    12u32.saturating_add(align(tag_len))
}

fn align(len: u32) -> u32 {
    usize::try_from(len)
        .ok()
        .and_then(xdr_align)
        .and_then(|v| u32::try_from(v).ok())
        .unwrap_or(u32::MAX)
}

/// Reply-size bound of one NFSv4 operation result (opcode + status + body), for the
/// operations this project issues. `count` is the READ count, the READDIR maxcount
/// or the GETATTR attribute-list bound; the others ignore it. `None` for operations
/// without an estimate here: the caller then provides a Reply chunk as large as
/// its largest reply (the ULB draft, Section 3.1).
pub fn nfs4_op_max_reply(op: u32, count: u32) -> Option<u32> {
    const HEAD: u32 = 8; // resop + status
    let body = match op {
        nfs4::OP_PUTFH | nfs4::OP_PUTROOTFH | nfs4::OP_LOOKUP => 0,
        nfs4::OP_GETFH => 4 + nfs4::FHSIZE,
        // bitmap4 of up to 3 words, then the attribute list opaque
        nfs4::OP_GETATTR => (4 + 12 + 4u32).saturating_add(align(count)),
        // eof, data length, data
        nfs4::OP_READ => 8u32.saturating_add(align(count)),
        // count, committed, verifier
        nfs4::OP_WRITE => 4 + 4 + 8,
        // maxcount bounds the whole READDIR4resok (RFC 7530, Section 16.24)
        nfs4::OP_READDIR => count,
        nfs4::OP_READLINK => 4 + align(4096),
        _ => return None,
    };
    Some(HEAD.saturating_add(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_data_is_call_side_read_data_is_reply_side() {
        assert_eq!(nfs3_ddp(nfs3::WRITE), Some(Ddp::Call));
        assert_eq!(nfs3_ddp(nfs3::READ), Some(Ddp::Reply));
        assert_eq!(nfs3_ddp(nfs3::GETATTR), None);
        assert_eq!(nfs4_op_ddp(nfs4::OP_CREATE, false), None);
        assert_eq!(nfs4_op_ddp(nfs4::OP_CREATE, true), Some(Ddp::Call));
    }
}
