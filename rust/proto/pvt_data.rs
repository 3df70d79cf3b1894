// SPDX-License-Identifier: GPL-2.0

//! RPC-over-RDMA version 1 CM private data (RFC 8797, Section 4).
//!
//! Eight octets exchanged in the RDMA-CM connect request and reply:
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                       Format Identifier                       |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |    Version    |  Reserved   |R|   Send Size   | Receive Size  |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! The names follow Linux's `struct rpcrdma_connect_private` where they exist.

/// Format Identifier, network byte order on the wire (RFC 8797, Section 4).
pub const RPCRDMA_CMP_MAGIC: u32 = 0xf6ab_0e18;
/// The one message format version this code knows (RFC 8797, Section 4).
pub const RPCRDMA_CMP_VERSION: u8 = 1;
/// Length of a version 1 message in octets.
pub const RPCRDMA_CMP_LEN: usize = 8;
/// The R bit: "the sender supports remote invalidation" (bit 15 of the second word,
/// bit 0 of octet 5; Linux calls it `RPCRDMA_CMP_F_SND_W_INV_OK`).
pub const RPCRDMA_CMP_F_SND_W_INV_OK: u8 = 0x01;

/// The RPC-over-RDMA version 1 default and minimum inline threshold (RFC 8166,
/// Section 3.3.3): what a peer without private data is assumed to support.
pub const MIN_INLINE_SIZE: u32 = 1024;
/// The largest size the encoding can express: code 255 (RFC 8797, Section 4.2).
pub const MAX_INLINE_SIZE: u32 = 262_144;

const MAGIC_BYTES: [u8; 4] = RPCRDMA_CMP_MAGIC.to_be_bytes();

/// A buffer size below the RPC-over-RDMA version 1 minimum of 1024 octets.
///
/// Such a size cannot be advertised: code 0 already means 1024, and Linux's C encoder
/// wraps it to code 255 (256 KiB), promising 256 times what the buffer holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SizeTooSmall(pub u32);

/// Encodes a buffer size in octets as a Send Size or Receive Size code (RFC 8797,
/// Section 4.2: "dividing its actual buffer size, in octets, by 1024 and subtracting
/// one").
///
/// - A size that is not a multiple of 1024 is rounded **down**: the peer must never be
///   promised more than the buffer holds (4095 encodes as 2, i.e. 3072).
/// - A size above 262144 is clamped to code 255 (262144): a larger buffer can honour
///   a smaller promise. Linux's C encoder truncates to `u8` instead, so 300 KiB
///   advertises 44 KiB and 512 KiB advertises 256 KiB only by accident.
/// - A size below 1024 is an error: the protocol has no way to say it.
pub fn encode_size(bytes: u32) -> Result<u8, SizeTooSmall> {
    if bytes < MIN_INLINE_SIZE {
        return Err(SizeTooSmall(bytes));
    }
    let kib = bytes.min(MAX_INLINE_SIZE) / 1024;
    // 1 <= kib <= 256, so kib - 1 fits a u8.
    Ok(u8::try_from(kib - 1).unwrap_or(u8::MAX))
}

/// Decodes a Send Size or Receive Size code into octets: `(code + 1) * 1024`
/// (RFC 8797, Section 4.2). Every code is valid: the result is in 1024..=262144.
pub const fn decode_size(code: u8) -> u32 {
    (code as u32 + 1) * 1024
}

/// The size a peer learns when we advertise a buffer of `bytes`: the encoded size,
/// decoded again (the largest multiple of 1024 not above `bytes`, at most 262144).
pub fn advertised_size(bytes: u32) -> Result<u32, SizeTooSmall> {
    encode_size(bytes).map(decode_size)
}

/// The content of one RPC-over-RDMA version 1 private data message.
///
/// Sizes are held in octets and are always a multiple of 1024 in 1024..=262144:
/// [`PrivateData::new`] rounds and clamps, [`parse`] decodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrivateData {
    /// R: the sender supports remote invalidation (RFC 8797, Section 4.1).
    pub remote_invalidate: bool,
    /// Largest message the sender transmits in one RDMA Send, in octets.
    pub send_size: u32,
    /// Largest message the sender can receive in one RDMA Receive, in octets.
    pub recv_size: u32,
    /// The 7 reserved bits as received. Senders set them to zero; receivers ignore
    /// them (RFC 8797, Section 4). Kept only so they can be shown.
    pub reserved: u8,
}

impl PrivateData {
    /// What a peer without valid private data is taken to have sent (RFC 8797,
    /// Section 5.1): R clear and both size codes zero, i.e. 1024/1024.
    pub const DEFAULT: PrivateData = PrivateData {
        remote_invalidate: false,
        send_size: MIN_INLINE_SIZE,
        recv_size: MIN_INLINE_SIZE,
        reserved: 0,
    };

    /// The message we advertise for buffers of `send_size` and `recv_size` octets,
    /// rounded as [`encode_size`] describes.
    pub fn new(
        remote_invalidate: bool,
        send_size: u32,
        recv_size: u32,
    ) -> Result<Self, SizeTooSmall> {
        Ok(PrivateData {
            remote_invalidate,
            send_size: advertised_size(send_size)?,
            recv_size: advertised_size(recv_size)?,
            reserved: 0,
        })
    }

    /// The eight octets on the wire. Reserved bits are always sent as zero
    /// (RFC 8797, Section 4: "Senders MUST set these bits to zero").
    pub fn encode(&self) -> [u8; RPCRDMA_CMP_LEN] {
        let flags = if self.remote_invalidate {
            RPCRDMA_CMP_F_SND_W_INV_OK
        } else {
            0
        };
        // Sizes built by new() or parse() always encode; fall back to the
        // minimum for a hand-built struct with a size below it.
        let send = encode_size(self.send_size).unwrap_or(0);
        let recv = encode_size(self.recv_size).unwrap_or(0);
        let m = MAGIC_BYTES;
        [
            m[0],
            m[1],
            m[2],
            m[3],
            RPCRDMA_CMP_VERSION,
            flags,
            send,
            recv,
        ]
    }

    fn from_octets(msg: [u8; RPCRDMA_CMP_LEN]) -> Self {
        PrivateData {
            remote_invalidate: msg[5] & RPCRDMA_CMP_F_SND_W_INV_OK != 0,
            send_size: decode_size(msg[6]),
            recv_size: decode_size(msg[7]),
            reserved: msg[5] >> 1,
        }
    }
}

/// What a receiver found in a CM private data buffer (RFC 8797, Section 5.2).
///
/// Only [`Outcome::Found`] carries a message; every other outcome means "behave as
/// if no RPC-over-RDMA version 1 private data had been provided" (Section 5.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A complete version 1 message starting at `offset` in the buffer.
    Found {
        /// Byte offset of the Format Identifier.
        offset: usize,
        /// The decoded message.
        pvt: PrivateData,
    },
    /// No private data: an empty buffer, or one of only zero octets (what the CM
    /// delivers when the peer sent none: it pads to 56 or 196 octets with zeros).
    Absent,
    /// Private data of some other kind: non-zero octets without the Format Identifier.
    Foreign,
    /// The Format Identifier followed by a version other than 1.
    UnknownVersion {
        /// Byte offset of the Format Identifier.
        offset: usize,
        /// The version octet found.
        version: u8,
    },
    /// The Format Identifier too close to the end of the buffer for a whole message.
    Truncated {
        /// Byte offset of the Format Identifier.
        offset: usize,
    },
}

impl Outcome {
    /// The peer's advertisement to negotiate with: the message if one was found,
    /// otherwise the RFC 8797 Section 5.1 default (R clear, 1024/1024).
    pub fn effective(&self) -> PrivateData {
        match self {
            Outcome::Found { pvt, .. } => *pvt,
            _ => PrivateData::DEFAULT,
        }
    }

    /// A short stable name, as shown in debugfs.
    pub fn name(&self) -> &'static str {
        match self {
            Outcome::Found { .. } => "found",
            Outcome::Absent => "absent",
            Outcome::Foreign => "foreign",
            Outcome::UnknownVersion { .. } => "unknown_version",
            Outcome::Truncated { .. } => "truncated",
        }
    }
}

/// Searches `buf` (the CM private data as received) for an RPC-over-RDMA version 1
/// message (RFC 8797, Section 5.2).
///
/// - The Format Identifier is looked for at every byte offset, with no alignment
///   ("The offset of the Format Identifier is not restricted to any alignment").
///   Linux's C code only looks at offset 0.
/// - A candidate is accepted only if its version is 1 and all eight octets lie inside
///   the buffer ("check that the format version number field contains a valid and
///   recognized version number and the size of the content does not overrun the
///   length of the buffer"). Linux's C code checks neither the length nor, on
///   the server, anything beyond the first eight octets of what the CM passes.
/// - The first accepted candidate wins. If there are candidates but none is
///   accepted, the first candidate's defect is reported.
/// - Reserved bits are ignored (kept in [`PrivateData::reserved`] for display).
///
/// Never panics, for any input.
pub fn parse(buf: &[u8]) -> Outcome {
    let mut first_defect: Option<Outcome> = None;
    for (offset, window) in buf.windows(MAGIC_BYTES.len()).enumerate() {
        // The first-octet test skips most windows without a 4-octet compare.
        if window[0] != MAGIC_BYTES[0] || window != MAGIC_BYTES {
            continue;
        }
        let defect = match buf
            .get(offset..)
            .and_then(|rest| rest.get(..RPCRDMA_CMP_LEN))
        {
            None => Outcome::Truncated { offset },
            Some(msg) => {
                let mut octets = [0u8; RPCRDMA_CMP_LEN];
                octets.copy_from_slice(msg);
                if octets[4] == RPCRDMA_CMP_VERSION {
                    return Outcome::Found {
                        offset,
                        pvt: PrivateData::from_octets(octets),
                    };
                }
                Outcome::UnknownVersion {
                    offset,
                    version: octets[4],
                }
            }
        };
        first_defect.get_or_insert(defect);
    }
    match first_defect {
        Some(defect) => defect,
        None if buf.iter().all(|&b| b == 0) => Outcome::Absent,
        None => Outcome::Foreign,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn magic_is_network_byte_order() {
        assert_eq!(MAGIC_BYTES, [0xf6, 0xab, 0x0e, 0x18]);
    }

    #[test]
    fn from_octets_keeps_reserved_bits_apart_from_r() {
        let p = PrivateData::from_octets([0xf6, 0xab, 0x0e, 0x18, 1, 0xff, 0, 0]);
        assert!(p.remote_invalidate);
        assert_eq!(p.reserved, 0x7f);
    }
}
