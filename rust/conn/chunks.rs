// SPDX-License-Identifier: GPL-2.0

//! A requester's chunks on a connection, whichever requester (a mount, or
//! the debugfs caller): registered for the peer with FRWR, and released
//! after the Reply, counting local and remote invalidations.

use super::Conn;
use crate::proto::header::Segment;
use crate::stats::XprtCounter as X;
use crate::sys::chunk::Chunk;
use kernel::prelude::*;

impl Conn {
    /// Registers `c` for the peer to read, or write with `remote_write`
    /// ([`Chunk::register`]), counting it and the MR it had to allocate.
    pub(super) fn register_chunk(&self, c: &mut Chunk, remote_write: bool) -> Result<Segment> {
        let r = c.register(remote_write)?;
        self.count(X::Registrations, 1);
        if c.new_mr() {
            self.count(X::MrsAllocated, 1);
        }
        Ok(Segment {
            handle: r.rkey,
            length: c.len(),
            offset: r.iova,
        })
    }

    /// Releases a call's chunks; `invalidated` is the rkey the reply's Send
    /// With Invalidate invalidated, if any. Returns the LOCAL_INVs it took.
    pub(super) fn release_chunks(
        &self,
        chunks: impl IntoIterator<Item = Chunk>,
        invalidated: Option<u32>,
    ) -> u32 {
        let mut matched = false;
        let mut local = 0;
        for mut c in chunks {
            if invalidated.is_some() && c.registration().map(|r| r.rkey) == invalidated {
                c.remotely_invalidated();
                matched = true;
            }
            if c.release() {
                self.count(X::LocalInvalidations, 1);
                local += 1;
            }
        }
        match (invalidated, matched) {
            (Some(_), true) => self.count(X::RemoteInvalidations, 1),
            // An rkey that is not one of this call's: the peer invalidated
            // something else.
            (Some(_), false) => self.count(X::RemoteInvalidationsUnmatched, 1),
            _ => {}
        }
        local
    }
}
