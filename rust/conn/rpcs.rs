// SPDX-License-Identifier: GPL-2.0

//! The `rpcs` file (test builds): the last calls the debugfs caller made,
//! and how each went.

use super::State;
use crate::proto::nfs4::Summary;
use core::fmt::{self, Write};
use kernel::prelude::*;

/// Most RPC results kept for the `rpcs` file.
pub(crate) const KEEP_RPCS: usize = 64;

/// One finished (or failed) call, as the `rpcs` file shows it.
#[derive(Clone, Copy)]
pub(crate) struct RpcRecord {
    conn: u32,
    pub(super) xid: u32,
    prog: u32,
    vers: u32,
    proc_: u32,
    pub(super) call: &'static str,
    pub(super) reply: &'static str,
    pub(super) call_len: u32,
    pub(super) reply_len: u32,
    pub(super) result: &'static str,
    pub(super) errno: i32,
    pub(super) verified: Option<bool>,
    pub(super) nfs: Option<Summary>,
    pub(super) data_fnv: Option<u64>,
    pub(super) usec: i64,
}

impl RpcRecord {
    pub(super) fn new(conn: u32, prog: u32, vers: u32, proc_: u32) -> Self {
        RpcRecord {
            conn,
            xid: 0,
            prog,
            vers,
            proc_,
            call: "-",
            reply: "-",
            call_len: 0,
            reply_len: 0,
            result: "error",
            errno: 0,
            verified: None,
            nfs: None,
            data_fnv: None,
            usec: 0,
        }
    }

    pub(crate) fn show(&self, m: &mut impl Write) -> fmt::Result {
        write!(
            m,
            "conn={} xid={:#010x} prog={} vers={} proc={} call={} reply={} call_len={} reply_len={} result={}",
            self.conn,
            self.xid,
            self.prog,
            self.vers,
            self.proc_,
            self.call,
            self.reply,
            self.call_len,
            self.reply_len,
            self.result
        )?;
        if self.errno != 0 {
            write!(m, " error={}", self.errno)?;
        }
        if let Some(v) = self.verified {
            write!(m, " verified={}", u8::from(v))?;
        }
        if let Some(n) = &self.nfs {
            show_nfs(m, n, self.data_fnv)?;
        }
        writeln!(m, " usec={}", self.usec)
    }
}

/// What `rpcs` shows of an NFS COMPOUND.
fn show_nfs(
    m: &mut impl core::fmt::Write,
    s: &Summary,
    data_fnv: Option<u64>,
) -> core::fmt::Result {
    write!(m, " nfs_status={} nfs_results={}", s.status, s.results)?;
    if let Some(op) = s.failed_op {
        write!(m, " nfs_failed_op={}", op)?;
    }
    if let Some((kind, size)) = s.attrs {
        write!(m, " type={} size={}", kind, size)?;
    }
    if let Some((eof, len, _)) = s.read {
        write!(m, " eof={} data_len={}", u8::from(eof), len)?;
    }
    if let Some(h) = data_fnv {
        write!(m, " data_fnv={:016x}", h)?;
    }
    if let Some((count, committed)) = s.write {
        write!(m, " written={} committed={}", count, committed)?;
    }
    if let Some((entries, sum, eof)) = s.readdir {
        write!(
            m,
            " entries={} names_fnv_sum={:016x} eof={}",
            entries,
            sum,
            u8::from(eof)
        )?;
    }
    Ok(())
}

/// The last [`KEEP_RPCS`] calls, oldest first once full.
///
/// The ring is on the heap: [`KEEP_RPCS`] records are about 13 KiB, which
/// the module's init built on its stack (a 13 KiB frame on 6.12's test
/// kernel, optimised for size; 26 KiB on 7.3's, a double fault at load).
pub(crate) struct RpcLog {
    ring: KVec<Option<RpcRecord>>,
    next: usize,
}

impl RpcLog {
    pub(crate) fn new() -> Result<Self> {
        let mut ring = KVec::with_capacity(KEEP_RPCS, GFP_KERNEL)?;
        for _ in 0..KEEP_RPCS {
            ring.push(None, GFP_KERNEL)?;
        }
        Ok(RpcLog { ring, next: 0 })
    }

    pub(super) fn push(&mut self, r: RpcRecord) {
        self.ring[self.next % KEEP_RPCS] = Some(r);
        self.next = self.next.wrapping_add(1);
    }

    /// How the newest call went (`call`, `reply`), `("-", "-")` if none.
    pub(super) fn last_path(&self) -> (&'static str, &'static str) {
        let i = self.next.wrapping_sub(1) % KEEP_RPCS;
        match (self.next, &self.ring[i]) {
            (1.., Some(r)) => (r.call, r.reply),
            _ => ("-", "-"),
        }
    }

    /// The records, oldest first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &RpcRecord> {
        let start = if self.next > KEEP_RPCS {
            self.next % KEEP_RPCS
        } else {
            0
        };
        (0..KEEP_RPCS).filter_map(move |i| self.ring[(start + i) % KEEP_RPCS].as_ref())
    }
}

/// `rpcs`: the last calls issued through `control`, oldest first.
pub(crate) struct RpcsFile(pub(crate) kernel::sync::Arc<State>);

impl crate::sys::debugfs::Show for RpcsFile {
    fn show(&self, m: &mut crate::sys::debugfs::SeqFile<'_>) -> fmt::Result {
        let log = self.0.rpcs.lock();
        let res = log.iter().try_for_each(|r| r.show(m));
        res
    }
}
