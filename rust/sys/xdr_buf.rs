// SPDX-License-Identifier: GPL-2.0

//! sunrpc's encoded messages (`struct xdr_buf`), as both classes see them:
//! nfsd's replies and backchannel calls (svc.rs), a mount's calls and reply
//! buffers (xprt.rs).

use super::bindings::{read_bytes_from_xdr_buf, xdr_buf};
use super::chunk::Chunk;
use super::qp::Qp;
use kernel::error::to_result;
use kernel::prelude::*;

const PAGE: u32 = kernel::page::PAGE_SIZE as u32;

/// An RPC message sunrpc encoded (a `struct xdr_buf`: head, pages, tail),
/// read by copying out of it.
pub(crate) struct XdrMsg<'a> {
    buf: &'a xdr_buf,
}

impl<'a> XdrMsg<'a> {
    /// The message `buf` holds, which stays unchanged while this lives.
    pub(crate) fn new(buf: &'a xdr_buf) -> Self {
        XdrMsg { buf }
    }

    /// Its length in octets.
    pub(crate) fn len(&self) -> usize {
        self.buf.len as usize
    }

    /// Octets of its head (what precedes the pages).
    pub(crate) fn head_len(&self) -> u32 {
        u32::try_from(self.buf.head[0].iov_len).unwrap_or(u32::MAX)
    }

    /// Octets of its page part.
    pub(crate) fn page_len(&self) -> u32 {
        self.buf.page_len
    }

    /// sunrpc's `XDRBUF_*` flags: what the upper layer placed in the pages.
    pub(crate) fn flags(&self) -> u32 {
        self.buf.flags
    }

    /// Where its page part starts in its first page.
    pub(crate) fn page_offset(&self) -> u32 {
        self.buf.page_base % PAGE
    }

    /// A chunk over `len` octets of its page part from `offset`, for the
    /// peer to read or write in place. `EINVAL` beyond the page part.
    pub(crate) fn wrap_pages(&self, qp: &Qp, offset: u32, len: u32) -> Result<Chunk> {
        if offset
            .checked_add(len)
            .is_none_or(|end| end > self.buf.page_len)
        {
            return Err(EINVAL);
        }
        // sunrpc's page array covers `page_base + page_len` octets of live
        // pages (the send path fills sparse receive pages first).
        // SAFETY: so the range checked above is live, for 'a (the xdr_buf's
        // borrow); the chunk takes its own references.
        unsafe { Chunk::wrap(qp, self.buf.pages, self.buf.page_base + offset, len) }
    }

    /// Copies `out.len()` octets from `offset` into `out`; fails if the message
    /// is shorter.
    pub(crate) fn read(&self, offset: u32, out: &mut [u8]) -> Result {
        let len = u32::try_from(out.len()).map_err(|_| EINVAL)?;
        // SAFETY: `self.buf` is a live xdr_buf (borrowed for 'a); the function
        // writes at most `len` octets to `out`.
        to_result(unsafe {
            read_bytes_from_xdr_buf(self.buf, offset, out.as_mut_ptr().cast(), len)
        })
    }
}
