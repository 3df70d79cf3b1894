// SPDX-License-Identifier: GPL-2.0

//! The NFSv4.0 COMPOUNDs this module issues against nfsd (RFC 7530): encoding
//! of the arguments, decoding of what the caller needs from the results.
//!
//! WRITE data is DDP-eligible (RFC 8267): [`encode_compound`] stops where the
//! data would start, so the caller can send it inline or in a Read chunk; a
//! WRITE must therefore be the last operation. READ data is DDP-eligible too:
//! when it came in a Write chunk, [`decode_compound`] is told so and does not
//! look for it inline.

use crate::proto::ulb::nfs4::{OP_GETATTR, OP_LOOKUP, OP_PUTROOTFH, OP_READ, OP_READDIR, OP_WRITE};
use crate::proto::xdr::{Short, XdrReader, XdrWriter};

/// NFS4_OK.
pub const NFS4_OK: u32 = 0;
/// NFS4ERR_GRACE: the server is in its grace period.
pub const NFS4ERR_GRACE: u32 = 10013;
/// FILE_SYNC4 (`stable_how4`).
pub const FILE_SYNC4: u32 = 2;
/// The anonymous stateid's `other` field (all zero) and the READ bypass one's
/// (all ones), RFC 7530 Section 9.1.4.3.
const ANON: [u8; 12] = [0; 12];
const BYPASS: [u8; 12] = [0xff; 12];
/// GETATTR bitmap word 0 bits: FATTR4_TYPE (1) and FATTR4_SIZE (4).
pub const ATTR_TYPE_SIZE: u32 = (1 << 1) | (1 << 4);

/// One operation of a COMPOUND.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op<'a> {
    /// PUTROOTFH.
    PutRootFh,
    /// LOOKUP of one name.
    Lookup(&'a [u8]),
    /// GETATTR of type and size.
    GetAttr,
    /// READ with the READ bypass stateid.
    Read {
        /// Offset in the file.
        offset: u64,
        /// Octets asked for.
        count: u32,
    },
    /// WRITE (FILE_SYNC4) with the anonymous stateid; the data follows
    /// [`encode_compound`]'s output.
    Write {
        /// Offset in the file.
        offset: u64,
        /// Octets of data.
        len: u32,
    },
    /// READDIR from cookie 0, no attributes.
    ReadDir {
        /// `maxcount`: bound of the whole result.
        maxcount: u32,
    },
}

impl Op<'_> {
    /// The operation number.
    pub fn code(&self) -> u32 {
        match self {
            Op::PutRootFh => OP_PUTROOTFH,
            Op::Lookup(_) => OP_LOOKUP,
            Op::GetAttr => OP_GETATTR,
            Op::Read { .. } => OP_READ,
            Op::Write { .. } => OP_WRITE,
            Op::ReadDir { .. } => OP_READDIR,
        }
    }
}

/// A WRITE that is not the last operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EncodeError {
    /// The buffer is too small.
    Short,
    /// WRITE must be the last operation (its data ends the message).
    WriteNotLast,
}

impl From<Short> for EncodeError {
    fn from(_: Short) -> Self {
        EncodeError::Short
    }
}

/// Encodes COMPOUND4args (minor version 0, empty tag) into `w`, up to and
/// including a final WRITE's data length word. Returns the WRITE data length
/// if the last operation is a WRITE.
pub fn encode_compound(w: &mut XdrWriter<'_>, ops: &[Op<'_>]) -> Result<Option<u32>, EncodeError> {
    w.opaque(&[])?;
    w.u32(0)?;
    w.u32(u32::try_from(ops.len()).map_err(|_| EncodeError::Short)?)?;
    let mut data = None;
    for (i, op) in ops.iter().enumerate() {
        w.u32(op.code())?;
        match *op {
            Op::PutRootFh => {}
            Op::Lookup(name) => w.opaque(name)?,
            Op::GetAttr => {
                w.u32(1)?;
                w.u32(ATTR_TYPE_SIZE)?;
            }
            Op::Read { offset, count } => {
                w.u32(u32::MAX)?;
                w.put_bytes(&BYPASS)?;
                w.u64(offset)?;
                w.u32(count)?;
            }
            Op::Write { offset, len } => {
                if i + 1 != ops.len() {
                    return Err(EncodeError::WriteNotLast);
                }
                w.u32(0)?;
                w.put_bytes(&ANON)?;
                w.u64(offset)?;
                w.u32(FILE_SYNC4)?;
                w.u32(len)?;
                data = Some(len);
            }
            Op::ReadDir { maxcount } => {
                w.u64(0)?;
                w.put_bytes(&[0; 8])?;
                w.u32(maxcount)?;
                w.u32(maxcount)?;
                w.u32(0)?;
            }
        }
    }
    Ok(data)
}

/// FNV-1a, 64 bits: how data and names are summarised for comparison.
pub fn fnv1a64(mut h: u64, data: &[u8]) -> u64 {
    for &b in data {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The FNV-1a offset basis.
pub const FNV_BASIS: u64 = 0xcbf2_9ce4_8422_2325;

/// What a COMPOUND's results said.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// The COMPOUND's status (that of the last operation evaluated).
    pub status: u32,
    /// Results present.
    pub results: u32,
    /// The operation that failed, if one did.
    pub failed_op: Option<u32>,
    /// GETATTR: type and size.
    pub attrs: Option<(u32, u64)>,
    /// READ: eof, data length, and where the data starts in the message when it
    /// came inline.
    pub read: Option<(bool, u32, Option<usize>)>,
    /// WRITE: octets written and how stable.
    pub write: Option<(u32, u32)>,
    /// READDIR: entries, the wrapping sum of FNV-1a of their names (order
    /// independent), eof.
    pub readdir: Option<(u32, u64, bool)>,
}

/// Why results could not be decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// The message ended early.
    Truncated,
    /// A result for an operation other than the one asked for.
    WrongOp(u32),
    /// An attribute bitmap other than the one asked for.
    Attrs,
}

impl From<Short> for DecodeError {
    fn from(_: Short) -> Self {
        DecodeError::Truncated
    }
}

/// Decodes COMPOUND4res at the start of `msg` (the RPC results) for `ops`. If
/// `read_data_moved`, READ's data is not in `msg` (a Write chunk carried it).
/// `base` is `msg`'s offset in the whole RPC message, for [`Summary::read`].
pub fn decode_compound(
    msg: &[u8],
    base: usize,
    ops: &[Op<'_>],
    read_data_moved: bool,
) -> Result<Summary, DecodeError> {
    let mut r = XdrReader::new(msg);
    let mut s = Summary {
        status: r.u32()?,
        ..Summary::default()
    };
    r.opaque(1024)?;
    let n = r.u32()?;
    for op in ops.iter().take(n as usize) {
        let code = r.u32()?;
        if code != op.code() {
            return Err(DecodeError::WrongOp(code));
        }
        let status = r.u32()?;
        s.results += 1;
        if status != NFS4_OK {
            s.failed_op = Some(code);
            break;
        }
        match op {
            Op::PutRootFh | Op::Lookup(_) => {}
            Op::GetAttr => {
                let words = r.u32()?;
                let w0 = if words > 0 { r.u32()? } else { 0 };
                for _ in 1..words.min(8) {
                    if r.u32()? != 0 {
                        return Err(DecodeError::Attrs);
                    }
                }
                if w0 != ATTR_TYPE_SIZE {
                    return Err(DecodeError::Attrs);
                }
                let vals = r.opaque(64)?;
                let mut a = XdrReader::new(vals);
                s.attrs = Some((a.u32()?, a.u64()?));
            }
            Op::Read { .. } => {
                let eof = r.u32()? != 0;
                let len = r.u32()?;
                if read_data_moved {
                    s.read = Some((eof, len, None));
                } else {
                    let at = base + r.position();
                    r.take((len as usize).div_ceil(4) * 4)?;
                    s.read = Some((eof, len, Some(at)));
                }
            }
            Op::Write { .. } => {
                let count = r.u32()?;
                let committed = r.u32()?;
                r.take(8)?;
                s.write = Some((count, committed));
            }
            Op::ReadDir { .. } => {
                r.take(8)?;
                let (mut entries, mut sum) = (0u32, 0u64);
                while r.u32()? != 0 {
                    r.u64()?;
                    let name = r.opaque(4096)?;
                    sum = sum.wrapping_add(fnv1a64(FNV_BASIS, name));
                    entries += 1;
                    let words = r.u32()?;
                    r.take((words as usize).saturating_mul(4))?;
                    r.opaque(usize::MAX)?;
                }
                let eof = r.u32()? != 0;
                s.readdir = Some((entries, sum, eof));
            }
        }
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(ops: &[Op<'_>]) -> ([u8; 512], usize, Option<u32>) {
        let mut b = [0u8; 512];
        let mut w = XdrWriter::new(&mut b);
        let d = encode_compound(&mut w, ops).unwrap();
        let n = w.position();
        (b, n, d)
    }

    #[test]
    fn read_compound_layout() {
        let ops = [
            Op::PutRootFh,
            Op::Lookup(b"f1"),
            Op::Read {
                offset: 5,
                count: 4096,
            },
        ];
        let (b, n, d) = encoded(&ops);
        assert_eq!(d, None);
        // tag, minorversion, 3 ops; PUTROOTFH; LOOKUP "f1"; READ bypass stateid.
        assert_eq!(&b[..12], &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3]);
        assert_eq!(&b[12..16], &24u32.to_be_bytes());
        assert_eq!(&b[16..28], &[0, 0, 0, 15, 0, 0, 0, 2, b'f', b'1', 0, 0]);
        assert_eq!(&b[28..36], &[0, 0, 0, 25, 0xff, 0xff, 0xff, 0xff]);
        assert_eq!(n, 28 + 4 + 16 + 8 + 4);
    }

    #[test]
    fn write_must_be_last_and_stops_before_its_data() {
        let (b, n, d) = encoded(&[Op::PutRootFh, Op::Write { offset: 0, len: 9 }]);
        assert_eq!(d, Some(9));
        assert_eq!(&b[n - 4..n], &9u32.to_be_bytes());
        assert_eq!(&b[n - 8..n - 4], &FILE_SYNC4.to_be_bytes());
        let mut buf = [0u8; 128];
        let mut w = XdrWriter::new(&mut buf);
        assert_eq!(
            encode_compound(&mut w, &[Op::Write { offset: 0, len: 1 }, Op::GetAttr]),
            Err(EncodeError::WriteNotLast)
        );
    }

    fn put(w: &mut XdrWriter<'_>, vals: &[u32]) {
        vals.iter().for_each(|v| w.u32(*v).unwrap());
    }

    #[test]
    fn read_results_inline_and_moved() {
        let ops = [
            Op::PutRootFh,
            Op::Lookup(b"f"),
            Op::Read {
                offset: 0,
                count: 8,
            },
        ];
        let mut b = [0u8; 128];
        let mut w = XdrWriter::new(&mut b);
        put(&mut w, &[0, 0, 3, 24, 0, 15, 0, 25, 0, 1, 5]);
        w.put_bytes(b"hello\0\0\0").unwrap();
        let n = w.position();
        let s = decode_compound(&b[..n], 100, &ops, false).unwrap();
        assert_eq!(s.results, 3);
        assert_eq!(s.read, Some((true, 5, Some(100 + 44))));
        let s = decode_compound(&b[..n - 8], 0, &ops, true).unwrap();
        assert_eq!(s.read, Some((true, 5, None)));
        assert_eq!(
            decode_compound(&b[..n - 8], 0, &ops, false),
            Err(DecodeError::Truncated)
        );
    }

    #[test]
    fn a_failed_op_ends_the_results() {
        let ops = [Op::PutRootFh, Op::Lookup(b"nope"), Op::GetAttr];
        let mut b = [0u8; 64];
        let mut w = XdrWriter::new(&mut b);
        put(&mut w, &[2, 0, 2, 24, 0, 15, 2]);
        let n = w.position();
        let s = decode_compound(&b[..n], 0, &ops, false).unwrap();
        assert_eq!((s.status, s.results, s.failed_op), (2, 2, Some(15)));
    }

    #[test]
    fn getattr_write_and_readdir_results() {
        let ops = [Op::PutRootFh, Op::GetAttr];
        let mut b = [0u8; 256];
        let mut w = XdrWriter::new(&mut b);
        put(
            &mut w,
            &[0, 0, 2, 24, 0, 9, 0, 1, ATTR_TYPE_SIZE, 12, 2, 0, 4096],
        );
        let n = w.position();
        let s = decode_compound(&b[..n], 0, &ops, false).unwrap();
        assert_eq!(s.attrs, Some((2, 4096)));

        let ops = [Op::PutRootFh, Op::Write { offset: 0, len: 3 }];
        let mut w = XdrWriter::new(&mut b);
        put(&mut w, &[0, 0, 2, 24, 0, 38, 0, 3, FILE_SYNC4, 1, 2]);
        let n = w.position();
        assert_eq!(
            decode_compound(&b[..n], 0, &ops, false).unwrap().write,
            Some((3, FILE_SYNC4))
        );

        let ops = [Op::PutRootFh, Op::ReadDir { maxcount: 4096 }];
        let mut w = XdrWriter::new(&mut b);
        put(&mut w, &[0, 0, 2, 24, 0, 26, 0, 7, 7]);
        for name in [&b"a"[..], b"bc"] {
            put(&mut w, &[1, 0, 1]);
            w.opaque(name).unwrap();
            put(&mut w, &[0, 0]);
        }
        put(&mut w, &[0, 1]);
        let n = w.position();
        let want = fnv1a64(FNV_BASIS, b"a").wrapping_add(fnv1a64(FNV_BASIS, b"bc"));
        assert_eq!(
            decode_compound(&b[..n], 0, &ops, false).unwrap().readdir,
            Some((2, want, true))
        );
        assert_eq!(
            decode_compound(&b[..n - 4], 0, &ops, false),
            Err(DecodeError::Truncated)
        );
    }

    #[test]
    fn fnv_known_values() {
        assert_eq!(fnv1a64(FNV_BASIS, b""), FNV_BASIS);
        assert_eq!(fnv1a64(FNV_BASIS, b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
