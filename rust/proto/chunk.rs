// SPDX-License-Identifier: GPL-2.0

//! Chunk planning for a requester (RFC 8166, Sections 3.5 and 4.3; the NFS upper
//! layer binding draft, Section 2.5): given the negotiated inline thresholds and
//! the sizes of one RPC, decide how the call travels and how the reply may come back.
//!
//! Reply side, in the order xprtrdma uses: the whole reply inline if its largest
//! possible size fits the server-to-client threshold; else a Write chunk for a
//! DDP-eligible result if the rest then fits; else a Reply chunk.
//!
//! Call side: inline if the call and the header fit the client-to-server threshold;
//! else the DDP-eligible argument in a Read chunk at its XDR position if the rest
//! then fits; else the whole call in a Position-Zero Read chunk (RDMA_NOMSG).
//!
//! Unlike xprtrdma, which subtracts a worst-case header size from each threshold,
//! the header is counted at the exact length it will have ([`HeaderShape::len`]).

use crate::proto::header::{HeaderShape, MIN_MSG_LEN};
use crate::proto::xdr::xdr_align;

/// A DDP-eligible data item of a call: where it starts in the XDR stream and how
/// long it is (without XDR padding).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DdpItem {
    /// XDR position of the item's data.
    pub position: u32,
    /// Length of the item's data in octets.
    pub len: u32,
}

/// The sizes of one RPC as the requester knows them before sending it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RpcShape {
    /// Length of the whole RPC call message in octets (including any DDP item).
    pub call_len: u32,
    /// The call's DDP-eligible argument, if any (e.g. WRITE data).
    pub call_ddp: Option<DdpItem>,
    /// The largest possible RPC reply message in octets.
    pub max_reply_len: u32,
    /// The largest DDP-eligible result the reply may carry (e.g. READ data), if any.
    pub reply_ddp_len: Option<u32>,
}

/// How the call is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallPlan {
    /// RDMA_MSG, the whole call in the Send.
    Inline,
    /// RDMA_MSG, the DDP item in a Read chunk, the rest of the call in the Send.
    ReadChunk {
        /// XDR position of the chunk.
        position: u32,
        /// Octets the responder pulls.
        len: u32,
        /// Segments (memory registrations) the chunk needs.
        segments: u32,
    },
    /// RDMA_NOMSG, the whole call in a Position-Zero Read chunk (a long call).
    PositionZero {
        /// Octets the responder pulls.
        len: u32,
        /// Segments the chunk needs.
        segments: u32,
    },
}

/// How the reply may come back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplyPlan {
    /// The whole reply fits one Send from the responder.
    Inline,
    /// A Write chunk for the DDP-eligible result; the rest comes inline.
    WriteList {
        /// Octets provided.
        len: u32,
        /// Segments the chunk needs.
        segments: u32,
    },
    /// A Reply chunk for the whole reply (the responder answers RDMA_NOMSG).
    ReplyChunk {
        /// Octets provided.
        len: u32,
        /// Segments the chunk needs.
        segments: u32,
    },
}

/// The plan for one RPC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    /// How the call is sent.
    pub call: CallPlan,
    /// How the reply may come back.
    pub reply: ReplyPlan,
    /// Length of the transport header of the call.
    pub header_len: usize,
    /// Octets of the call's Send: header plus whatever of the call is inline.
    pub send_len: usize,
}

/// No plan is possible.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlanError {
    /// `max_segment_len` is zero.
    NoSegments,
    /// Even the header of a long call does not fit the client-to-server threshold.
    HeaderTooLarge,
}

fn segments_for(len: u32, max_segment_len: u32) -> u32 {
    len.div_ceil(max_segment_len).max(1)
}

fn aligned(len: u32) -> usize {
    usize::try_from(len)
        .ok()
        .and_then(xdr_align)
        .unwrap_or(usize::MAX)
}

fn n(v: u32) -> usize {
    usize::try_from(v).unwrap_or(usize::MAX)
}

/// Plans one RPC for thresholds `c2s` (client-to-server) and `s2c`
/// (server-to-client), with at most `max_segment_len` octets per segment.
pub fn plan(c2s: u32, s2c: u32, rpc: &RpcShape, max_segment_len: u32) -> Result<Plan, PlanError> {
    if max_segment_len == 0 {
        return Err(PlanError::NoSegments);
    }
    let (c2s, s2c) = (n(c2s), n(s2c));

    // Reply side. The responder's header echoes the chunks it used.
    let reply = if MIN_MSG_LEN.saturating_add(n(rpc.max_reply_len)) <= s2c {
        ReplyPlan::Inline
    } else {
        let write = rpc.reply_ddp_len.and_then(|ddp| {
            let segments = segments_for(ddp, max_segment_len);
            let echo = HeaderShape {
                write_chunks: 1,
                write_segments: segments,
                ..HeaderShape::default()
            };
            let rest = n(rpc.max_reply_len).saturating_sub(aligned(ddp));
            (echo.len().saturating_add(rest) <= s2c)
                .then_some(ReplyPlan::WriteList { len: ddp, segments })
        });
        write.unwrap_or(ReplyPlan::ReplyChunk {
            len: rpc.max_reply_len,
            segments: segments_for(rpc.max_reply_len, max_segment_len),
        })
    };
    let mut shape = HeaderShape::default();
    match reply {
        ReplyPlan::Inline => {}
        ReplyPlan::WriteList { segments, .. } => {
            shape.write_chunks = 1;
            shape.write_segments = segments;
        }
        ReplyPlan::ReplyChunk { segments, .. } => shape.reply_segments = Some(segments),
    }

    // Call side.
    let inline_len = shape.len().saturating_add(n(rpc.call_len));
    if inline_len <= c2s {
        return Ok(Plan {
            call: CallPlan::Inline,
            reply,
            header_len: shape.len(),
            send_len: inline_len,
        });
    }
    if let Some(ddp) = rpc.call_ddp {
        let segments = segments_for(ddp.len, max_segment_len);
        let with_read = HeaderShape {
            read_segments: segments,
            ..shape
        };
        let send_len = with_read
            .len()
            .saturating_add(n(rpc.call_len).saturating_sub(aligned(ddp.len)));
        if send_len <= c2s {
            return Ok(Plan {
                call: CallPlan::ReadChunk {
                    position: ddp.position,
                    len: ddp.len,
                    segments,
                },
                reply,
                header_len: with_read.len(),
                send_len,
            });
        }
    }
    let segments = segments_for(rpc.call_len, max_segment_len);
    let long = HeaderShape {
        read_segments: segments,
        ..shape
    };
    if long.len() > c2s {
        return Err(PlanError::HeaderTooLarge);
    }
    Ok(Plan {
        call: CallPlan::PositionZero {
            len: rpc.call_len,
            segments,
        },
        reply,
        header_len: long.len(),
        send_len: long.len(),
    })
}
