// SPDX-License-Identifier: GPL-2.0

//! RPC-over-RDMA version 1 transport header (RFC 8166, Section 4).
//!
//! [`decode`] validates a whole header once, with limits on every count a peer
//! controls, and returns a [`Header`] whose chunk lists iterate the already-checked
//! bytes. The `encode_*` functions write into a caller's buffer and fail cleanly
//! when it is too small. [`HeaderShape`] gives the exact encoded length of a header
//! without encoding it, for chunk planning.

use crate::proto::xdr::{Short, XdrReader, XdrWriter};

/// `rdma_vers` of RPC-over-RDMA version 1.
pub const RPCRDMA_VERSION: u32 = 1;

/// `msg_type` values (RFC 8166, Section 4.2.4).
pub const RDMA_MSG: u32 = 0;
/// Long call or reply: the RPC message is in a chunk, not in the Send.
pub const RDMA_NOMSG: u32 = 1;
/// Padded message; not to be sent in version 1 (RFC 8166, Section 4.5).
pub const RDMA_MSGP: u32 = 2;
/// Chunk release; not to be sent in version 1 (RFC 8166, Section 4.5).
pub const RDMA_DONE: u32 = 3;
/// Transport error reply.
pub const RDMA_ERROR: u32 = 4;

/// `rpc_rdma_errcode`: the requester's version is not supported.
pub const ERR_VERS: u32 = 1;
/// `rpc_rdma_errcode`: the header or its chunks could not be processed.
pub const ERR_CHUNK: u32 = 2;

/// Octets of `rdma_xid`, `rdma_vers`, `rdma_credit` and `rdma_proc`.
pub const FIXED_LEN: usize = 16;
/// Octets of one Read list entry: discriminator, position and a segment.
pub const READ_ENTRY_LEN: usize = 24;
/// Octets of one segment: handle, length, 64-bit offset.
pub const SEGMENT_LEN: usize = 16;
/// The smallest RDMA_MSG / RDMA_NOMSG header: three empty lists.
pub const MIN_MSG_LEN: usize = FIXED_LEN + 12;

/// One RDMA segment (`xdr_rdma_segment`): a registered memory region of the peer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Segment {
    /// The STag (R_key) naming the region.
    pub handle: u32,
    /// Length in octets.
    pub length: u32,
    /// Offset (typically the virtual address) of the region.
    pub offset: u64,
}

/// One Read list entry (`xdr_read_chunk`): a segment at an XDR position. Entries
/// with the same position form one Read chunk; position 0 carries a whole call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadSegment {
    /// XDR position in the RPC message where the chunk's data belongs.
    pub position: u32,
    /// The memory to read from.
    pub segment: Segment,
}

/// Limits on what a peer's header may carry. Anything beyond them is refused with
/// ERR_CHUNK before it costs memory or time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Read list entries, all chunks together.
    pub max_read_segments: u32,
    /// Write chunks in the Write list.
    pub max_write_chunks: u32,
    /// Segments in one Write chunk or in the Reply chunk.
    pub max_chunk_segments: u32,
}

impl Limits {
    /// Generous defaults: more than any plan of ours produces, far below what a
    /// receive buffer could hold.
    pub const DEFAULT: Limits = Limits {
        max_read_segments: 64,
        max_write_chunks: 8,
        max_chunk_segments: 64,
    };
}

/// Why a header was refused, and what RFC 8166 says to answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// Shorter than the fixed part: not even an XID to answer to. Drop it.
    TooShort,
    /// `rdma_vers` is not 1: answer RDMA_ERROR / ERR_VERS.
    Version(u32),
    /// RDMA_MSGP, RDMA_DONE or an unknown procedure: answer ERR_CHUNK.
    Proc(u32),
    /// A list ran past the end of the buffer: answer ERR_CHUNK.
    Truncated,
    /// A count over [`Limits`]: answer ERR_CHUNK.
    TooManySegments,
    /// A list discriminator other than 0 or 1 (XDR booleans): answer ERR_CHUNK.
    BadDiscriminator(u32),
    /// A Read position that is not a multiple of 4: no XDR item starts there.
    /// Answer ERR_CHUNK.
    MisalignedPosition(u32),
    /// An RDMA_ERROR with an unknown error code. Nothing to answer to an error.
    ErrorCode(u32),
}

impl DecodeError {
    /// A short stable name, as shown in counters.
    pub fn name(&self) -> &'static str {
        match self {
            DecodeError::TooShort => "too_short",
            DecodeError::Version(_) => "bad_version",
            DecodeError::Proc(_) => "bad_proc",
            DecodeError::Truncated => "truncated",
            DecodeError::TooManySegments => "too_many_segments",
            DecodeError::BadDiscriminator(_) => "bad_discriminator",
            DecodeError::MisalignedPosition(_) => "misaligned_position",
            DecodeError::ErrorCode(_) => "bad_error_code",
        }
    }

    /// The RDMA_ERROR code a responder sends for this error, if any.
    pub fn reply_code(&self) -> Option<u32> {
        match self {
            DecodeError::TooShort | DecodeError::ErrorCode(_) => None,
            DecodeError::Version(_) => Some(ERR_VERS),
            _ => Some(ERR_CHUNK),
        }
    }
}

impl From<Short> for DecodeError {
    fn from(_: Short) -> Self {
        DecodeError::Truncated
    }
}

/// An RDMA_ERROR body (`rpc_rdma_error`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorBody {
    /// ERR_VERS with the range of versions the sender supports.
    Vers {
        /// Lowest supported version.
        low: u32,
        /// Highest supported version.
        high: u32,
    },
    /// ERR_CHUNK.
    Chunk,
}

/// The chunk lists of an RDMA_MSG or RDMA_NOMSG header, validated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunks<'a> {
    read: &'a [u8],
    write: &'a [u8],
    write_chunks: u32,
    reply: Option<&'a [u8]>,
}

/// The body of a header, by `rdma_proc`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Body<'a> {
    /// RDMA_MSG: the RPC message follows the header in the same Send.
    Msg(Chunks<'a>),
    /// RDMA_NOMSG: the RPC message is in a Position-Zero Read chunk (call) or in the
    /// Reply chunk (reply).
    NoMsg(Chunks<'a>),
    /// RDMA_ERROR.
    Error(ErrorBody),
}

/// A decoded, validated transport header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header<'a> {
    /// `rdma_xid`: the RPC XID.
    pub xid: u32,
    /// `rdma_vers`: always 1 here.
    pub vers: u32,
    /// `rdma_credit`: credits requested or granted.
    pub credits: u32,
    /// The procedure and its lists.
    pub body: Body<'a>,
    /// Header length in octets: where an RDMA_MSG's RPC message starts.
    pub len: usize,
}

impl<'a> Header<'a> {
    /// The chunk lists of an RDMA_MSG or RDMA_NOMSG, `None` for RDMA_ERROR.
    pub fn chunks(&self) -> Option<&Chunks<'a>> {
        match &self.body {
            Body::Msg(c) | Body::NoMsg(c) => Some(c),
            Body::Error(_) => None,
        }
    }
}

/// Iterates the Read list of a validated header.
#[derive(Clone, Debug)]
pub struct ReadIter<'a>(XdrReader<'a>);

impl Iterator for ReadIter<'_> {
    type Item = ReadSegment;
    fn next(&mut self) -> Option<ReadSegment> {
        // Validated by decode(): each entry is "1, position, segment".
        let _present = self.0.u32().ok()?;
        let position = self.0.u32().ok()?;
        let segment = read_segment(&mut self.0).ok()?;
        Some(ReadSegment { position, segment })
    }
}

/// Iterates the segments of one validated Write or Reply chunk.
#[derive(Clone, Debug)]
pub struct SegmentIter<'a> {
    r: XdrReader<'a>,
    left: u32,
}

impl Iterator for SegmentIter<'_> {
    type Item = Segment;
    fn next(&mut self) -> Option<Segment> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        read_segment(&mut self.r).ok()
    }
}

impl SegmentIter<'_> {
    /// Segments in this chunk.
    pub fn count(&self) -> u32 {
        self.left
    }

    /// Sum of the segments' lengths (saturating).
    pub fn total_len(self) -> u64 {
        self.map(|s| u64::from(s.length))
            .fold(0u64, u64::saturating_add)
    }
}

/// Iterates the Write chunks of a validated Write list.
#[derive(Clone, Debug)]
pub struct WriteIter<'a>(XdrReader<'a>);

impl<'a> Iterator for WriteIter<'a> {
    type Item = SegmentIter<'a>;
    fn next(&mut self) -> Option<SegmentIter<'a>> {
        let _present = self.0.u32().ok()?;
        let count = self.0.u32().ok()?;
        let len = usize::try_from(count).ok()?.checked_mul(SEGMENT_LEN)?;
        let body = self.0.take(len).ok()?;
        Some(SegmentIter {
            r: XdrReader::new(body),
            left: count,
        })
    }
}

impl<'a> Chunks<'a> {
    /// The Read list entries in wire order.
    pub fn read_list(&self) -> ReadIter<'a> {
        ReadIter(XdrReader::new(self.read))
    }

    /// Number of Read list entries.
    pub fn read_segments(&self) -> usize {
        self.read.len() / READ_ENTRY_LEN
    }

    /// The Write chunks in wire order.
    pub fn write_list(&self) -> WriteIter<'a> {
        WriteIter(XdrReader::new(self.write))
    }

    /// Number of Write chunks.
    pub fn write_chunks(&self) -> u32 {
        self.write_chunks
    }

    /// The Reply chunk's segments, if a Reply chunk is present.
    pub fn reply_chunk(&self) -> Option<SegmentIter<'a>> {
        let body = self.reply?;
        Some(SegmentIter {
            r: XdrReader::new(body),
            left: u32::try_from(body.len() / SEGMENT_LEN).unwrap_or(0),
        })
    }

    /// True when every Read list entry is at position zero and there is at least
    /// one: the shape of a long call (RDMA_NOMSG).
    pub fn has_position_zero_read(&self) -> bool {
        self.read_segments() > 0 && self.read_list().all(|r| r.position == 0)
    }
}

fn read_segment(r: &mut XdrReader<'_>) -> Result<Segment, Short> {
    Ok(Segment {
        handle: r.u32()?,
        length: r.u32()?,
        offset: r.u64()?,
    })
}

fn present(r: &mut XdrReader<'_>) -> Result<bool, DecodeError> {
    match r.u32()? {
        0 => Ok(false),
        1 => Ok(true),
        d => Err(DecodeError::BadDiscriminator(d)),
    }
}

/// Skips `count` segments after checking the count against `limits`.
fn skip_segments(r: &mut XdrReader<'_>, count: u32, limits: &Limits) -> Result<(), DecodeError> {
    if count > limits.max_chunk_segments {
        return Err(DecodeError::TooManySegments);
    }
    let len = usize::try_from(count)
        .ok()
        .and_then(|c| c.checked_mul(SEGMENT_LEN))
        .ok_or(DecodeError::TooManySegments)?;
    r.take(len)?;
    Ok(())
}

fn decode_chunks<'a>(r: &mut XdrReader<'a>, limits: &Limits) -> Result<Chunks<'a>, DecodeError> {
    // Read list: 24-octet entries, then a 0.
    let start = r.position();
    let mut reads = 0u32;
    while present(r)? {
        reads += 1;
        if reads > limits.max_read_segments {
            return Err(DecodeError::TooManySegments);
        }
        let position = r.u32()?;
        if position % 4 != 0 {
            return Err(DecodeError::MisalignedPosition(position));
        }
        read_segment(r)?;
    }
    let read_end = r.position();

    // Write list: "1, count, segments" per chunk, then a 0.
    let mut chunks = 0u32;
    while present(r)? {
        chunks += 1;
        if chunks > limits.max_write_chunks {
            return Err(DecodeError::TooManySegments);
        }
        let count = r.u32()?;
        skip_segments(r, count, limits)?;
    }
    let write_end = r.position();

    // Reply chunk: optional "count, segments".
    let reply = if present(r)? {
        let count = r.u32()?;
        let body_start = r.position();
        skip_segments(r, count, limits)?;
        Some((body_start, r.position()))
    } else {
        None
    };
    Ok(Chunks {
        read: r.slice(start, read_end.saturating_sub(4)),
        write: r.slice(read_end, write_end.saturating_sub(4)),
        write_chunks: chunks,
        reply: reply.map(|(b, e)| r.slice(b, e)),
    })
}

/// Decodes and validates the transport header at the start of `buf` (the received
/// message). Every count is checked against `limits` before it is used, and no
/// octet outside `buf` is read.
pub fn decode<'a>(
    buf: &'a [u8],
    limits: &Limits,
) -> Result<Header<'a>, (Option<u32>, DecodeError)> {
    let mut r = XdrReader::new(buf);
    let (xid, vers, credits, proc) = match (r.u32(), r.u32(), r.u32(), r.u32()) {
        (Ok(x), Ok(v), Ok(c), Ok(p)) => (x, v, c, p),
        _ => return Err((None, DecodeError::TooShort)),
    };
    let fail = |e: DecodeError| (Some(xid), e);
    if vers != RPCRDMA_VERSION {
        return Err(fail(DecodeError::Version(vers)));
    }
    let body = match proc {
        RDMA_MSG => Body::Msg(decode_chunks(&mut r, limits).map_err(fail)?),
        RDMA_NOMSG => Body::NoMsg(decode_chunks(&mut r, limits).map_err(fail)?),
        RDMA_ERROR => Body::Error(match r.u32().map_err(|e| fail(e.into()))? {
            ERR_VERS => ErrorBody::Vers {
                low: r.u32().map_err(|e| fail(e.into()))?,
                high: r.u32().map_err(|e| fail(e.into()))?,
            },
            ERR_CHUNK => ErrorBody::Chunk,
            code => return Err(fail(DecodeError::ErrorCode(code))),
        }),
        p => return Err(fail(DecodeError::Proc(p))),
    };
    Ok(Header {
        xid,
        vers,
        credits,
        body,
        len: r.position(),
    })
}

/// What an RDMA_MSG or RDMA_NOMSG header to be sent carries.
#[derive(Clone, Copy, Debug)]
pub struct MsgSpec<'s> {
    /// `rdma_xid`.
    pub xid: u32,
    /// `rdma_credit`.
    pub credits: u32,
    /// RDMA_NOMSG instead of RDMA_MSG.
    pub nomsg: bool,
    /// Read list entries.
    pub reads: &'s [ReadSegment],
    /// Write chunks, each a list of segments.
    pub writes: &'s [&'s [Segment]],
    /// The Reply chunk's segments, if any.
    pub reply: Option<&'s [Segment]>,
}

fn put_segment(w: &mut XdrWriter<'_>, s: &Segment) -> Result<(), Short> {
    w.u32(s.handle)?;
    w.u32(s.length)?;
    w.u64(s.offset)
}

fn put_segments(w: &mut XdrWriter<'_>, segs: &[Segment]) -> Result<(), Short> {
    w.u32(u32::try_from(segs.len()).map_err(|_| Short)?)?;
    segs.iter().try_for_each(|s| put_segment(w, s))
}

/// Encodes an RDMA_MSG or RDMA_NOMSG header into `buf`; returns its length.
pub fn encode_msg(buf: &mut [u8], spec: &MsgSpec<'_>) -> Result<usize, Short> {
    let mut w = XdrWriter::new(buf);
    w.u32(spec.xid)?;
    w.u32(RPCRDMA_VERSION)?;
    w.u32(spec.credits)?;
    w.u32(if spec.nomsg { RDMA_NOMSG } else { RDMA_MSG })?;
    for r in spec.reads {
        w.u32(1)?;
        w.u32(r.position)?;
        put_segment(&mut w, &r.segment)?;
    }
    w.u32(0)?;
    for chunk in spec.writes {
        w.u32(1)?;
        put_segments(&mut w, chunk)?;
    }
    w.u32(0)?;
    match spec.reply {
        Some(segs) => {
            w.u32(1)?;
            put_segments(&mut w, segs)?;
        }
        None => w.u32(0)?,
    }
    Ok(w.position())
}

/// Encodes an RDMA_ERROR header into `buf`; returns its length.
pub fn encode_error(
    buf: &mut [u8],
    xid: u32,
    credits: u32,
    err: ErrorBody,
) -> Result<usize, Short> {
    let mut w = XdrWriter::new(buf);
    w.u32(xid)?;
    w.u32(RPCRDMA_VERSION)?;
    w.u32(credits)?;
    w.u32(RDMA_ERROR)?;
    match err {
        ErrorBody::Vers { low, high } => {
            w.u32(ERR_VERS)?;
            w.u32(low)?;
            w.u32(high)?;
        }
        ErrorBody::Chunk => w.u32(ERR_CHUNK)?,
    }
    Ok(w.position())
}

/// The shape of an RDMA_MSG/RDMA_NOMSG header: enough to know its encoded length.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HeaderShape {
    /// Read list entries.
    pub read_segments: u32,
    /// Write chunks.
    pub write_chunks: u32,
    /// Segments of all Write chunks together.
    pub write_segments: u32,
    /// Segments of the Reply chunk, if there is one.
    pub reply_segments: Option<u32>,
}

impl HeaderShape {
    /// The exact encoded length in octets, as [`encode_msg`] writes it.
    pub fn len(&self) -> usize {
        let n = |v: u32| usize::try_from(v).unwrap_or(usize::MAX);
        let reads = n(self.read_segments).saturating_mul(READ_ENTRY_LEN);
        let writes = n(self.write_chunks)
            .saturating_mul(8)
            .saturating_add(n(self.write_segments).saturating_mul(SEGMENT_LEN));
        let reply = match self.reply_segments {
            Some(s) => n(s).saturating_mul(SEGMENT_LEN).saturating_add(4),
            None => 0,
        };
        MIN_MSG_LEN
            .saturating_add(reads)
            .saturating_add(writes)
            .saturating_add(reply)
    }

    /// Always false: every header has at least its fixed part.
    pub fn is_empty(&self) -> bool {
        false
    }
}
