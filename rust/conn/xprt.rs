// SPDX-License-Identifier: GPL-2.0

//! RPC-over-RDMA version 1 messaging on an established connection (RFC 8166),
//! sized by what the connection negotiated (RFC 8797).
//!
//! - Requester (client role): [`Conn::call`] plans each RPC with the protocol
//!   core ([`plan`]) for the negotiated client-to-server and server-to-client
//!   thresholds: the call inline, its DDP-eligible argument in a Read chunk, or
//!   the whole call in a Position-Zero Read chunk (RDMA_NOMSG); room for the
//!   reply inline, a Write chunk for its DDP-eligible result, or a Reply chunk.
//!   Chunk memory is registered with FRWR before the Send that names it. The
//!   call waits for its reply under the server's credit grant; replies are
//!   matched by XID. Afterwards each registration is invalidated with
//!   LOCAL_INV, except the one the reply's Send With Invalidate already
//!   invalidated.
//! - Responder (server role): `responder.rs` (credits, decoding, assembling
//!   a long call, the reply inline or in chunks, RDMA_ERROR).
//!
//! Here: the requester's call slots, the `rpcs` log, a connection's counters,
//! the dispatch of each Receive to its role, and the handling of failed
//! completions.

use core::fmt::{self, Write};
use kernel::prelude::*;

use super::{Conn, State, Upper, QP_DEPTH};
use crate::proto::conn_state::ConnState;
use crate::proto::nfs4::Summary;
use crate::stats::XprtCounter as X;
use crate::sys::qp::Qp;
use crate::sys::rdma_cm::{Completion, WC_FLUSHED};

/// Most RPC results kept for the `rpcs` file.
pub(crate) const KEEP_RPCS: usize = 64;
/// Slots for calls in flight: never more than the credits we request.
const SLOTS: usize = QP_DEPTH as usize;

/// How a reply came back.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum ReplyKind {
    /// Whole in the Send.
    Inline,
    /// The DDP-eligible result in our Write chunk (`written` octets).
    WriteList { written: u32 },
    /// RDMA_NOMSG: the whole reply in our Reply chunk (`written` octets).
    ReplyChunk { written: u32 },
}

impl ReplyKind {
    pub(super) fn name(&self) -> &'static str {
        match self {
            ReplyKind::Inline => "inline",
            ReplyKind::WriteList { .. } => "write_list",
            ReplyKind::ReplyChunk { .. } => "reply_chunk",
        }
    }
}

/// What a call learnt from its reply's Receive.
pub(super) struct Done {
    /// The RPC part of the Send (empty for RDMA_NOMSG).
    pub(super) rpc: KVec<u8>,
    /// The RPC reply's length, chunks included.
    pub(super) reply_len: u32,
    pub(super) kind: ReplyKind,
}

/// A call waiting for its reply.
pub(super) struct Pending {
    pub(super) xid: u32,
    pub(super) result: Option<core::result::Result<Done, i32>>,
    /// The rkey its reply's Send With Invalidate invalidated, whatever the
    /// reply said (an RDMA_ERROR may come that way too).
    pub(super) invalidated: Option<u32>,
    /// Its caller gave up (timeout, signal) after it was sent: the server may
    /// still hold it, so its slot and credit stay taken until its reply
    /// comes or the connection ends (RFC 8166 Section 3.3.1).
    pub(super) abandoned: bool,
}

/// The debugfs caller's calls in flight ([`super::Upper::Caller`]), under
/// the connection's mutex.
pub(super) struct CallerSlots {
    pub(super) outstanding: u32,
    pub(super) next_xid: u32,
    pub(super) pending: [Option<Pending>; SLOTS],
}

impl CallerSlots {
    pub(super) fn new(first_xid: u32) -> Self {
        CallerSlots {
            outstanding: 0,
            next_xid: first_xid,
            pending: [const { None }; SLOTS],
        }
    }

    /// Fails every call in flight with `errno` (the connection is gone), and
    /// frees the slots of abandoned ones: no reply can come any more.
    pub(super) fn fail_all(&mut self, errno: i32) {
        for p in self.pending.iter_mut() {
            match p {
                Some(q) if q.abandoned => {
                    *p = None;
                    self.outstanding -= 1;
                }
                Some(q) if q.result.is_none() => q.result = Some(Err(errno)),
                _ => {}
            }
        }
    }

    pub(super) fn slot(&mut self, xid: u32) -> Option<&mut Pending> {
        self.pending.iter_mut().flatten().find(|p| p.xid == xid)
    }

    /// Frees the slot of call `xid` and its credit; returns what it held.
    pub(super) fn release(&mut self, xid: u32) -> Option<Pending> {
        let p = self
            .pending
            .iter_mut()
            .find(|p| p.as_ref().is_some_and(|p| p.xid == xid))?
            .take();
        self.outstanding -= 1;
        p
    }
}

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

pub(super) fn n32(v: usize) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

pub(super) fn short(_: crate::proto::xdr::Short) -> Error {
    EMSGSIZE
}

impl Conn {
    /// Counts `n` on this connection and module-wide.
    pub(super) fn count(&self, c: X, n: u64) {
        self.xs.add(c, n);
        self.state.stats.xprt.add(c, n);
    }

    /// Raises the high-water mark `c` to `v`, on this connection and
    /// module-wide.
    pub(super) fn raise(&self, c: X, v: u64) {
        self.xs.raise(c, v);
        self.state.stats.xprt.raise(c, v);
    }

    /// A Receive completed on this connection's QP.
    pub(super) fn on_recv(&self, qp: &Qp, wc: &Completion<'_>) {
        if wc.status != 0 {
            self.failed_completion(qp, wc.status, X::RecvErrors);
            return;
        }
        self.touch();
        self.count(X::BytesRecv, wc.data.len() as u64);
        match self.upper {
            Upper::Mount => {
                let owner = self.inner.lock().owner.clone();
                match owner {
                    Some(o) => o.received(self, qp, wc.data, wc.invalidated),
                    // The mount let go: nothing waits, as for the caller's
                    // XIDs it does not know.
                    None => self.reply_received(wc.data, wc.invalidated),
                }
            }
            Upper::Caller => self.reply_received(wc.data, wc.invalidated),
            Upper::Nfsd => self.svc_received(qp, wc),
            Upper::Echo => self.builtin_call_received(qp, wc.data),
        }
    }

    /// A Send completed: one that asked for a completion (one in
    /// `RPCRDMA_CM_SEND_BATCH`, see `qp.c`), or one that failed.
    pub(super) fn on_send_done(&self, qp: &Qp, wc: &Completion<'_>) {
        self.count(X::SendCompletions, 1);
        if wc.status != 0 {
            self.failed_completion(qp, wc.status, X::SendErrors);
        }
    }

    /// A work request completed in error. A flush while the connection is
    /// still established means the QP went to the error state for a reason
    /// we did not see (a registration or invalidation that failed, an
    /// asynchronous QP error): as fatal as the error itself. Flushes after
    /// that, or at teardown, are expected.
    pub(super) fn failed_completion(&self, qp: &Qp, status: i32, counter: X) {
        let why = match counter {
            X::RecvErrors => "recv_error",
            X::SendErrors => "send_error",
            _ => "chunk_error",
        };
        if status != WC_FLUSHED {
            self.count(counter, 1);
            crate::sys::trace::wc_error(self.id, matches!(counter, X::RecvErrors), status);
            self.fatal(qp, why, status);
        } else if self.inner.lock().state.is_established() {
            self.fatal(qp, "flushed", status);
        }
    }

    /// A work request failed: the QP is in the error state and the connection
    /// is of no further use. Fail the calls in flight and refuse new ones now
    /// (state `disconnecting`), then disconnect (as xprtrdma and svcrdma do);
    /// the DISCONNECTED event closes the connection when the peer answers or
    /// the CM gives up.
    pub(super) fn fatal(&self, qp: &Qp, why: &str, status: i32) {
        {
            let mut g = self.inner.lock();
            if g.state.is_closed() || g.state == ConnState::Disconnecting {
                return;
            }
            crate::sys::trace::fatal(self.id, why, status);
            g.state.advance(ConnState::Disconnecting);
            g.x.fail_all(ENOTCONN.to_errno());
        }
        // The tick closes a connection whose disconnect never completes.
        self.touch();
        self.cv.notify_all();
        let _ = qp.disconnect();
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

/// `xprt`: each connection's messaging counters (non-zero ones).
pub(crate) struct XprtFile(pub(crate) kernel::sync::Arc<State>);

impl crate::sys::debugfs::Show for XprtFile {
    fn show(&self, m: &mut crate::sys::debugfs::SeqFile<'_>) -> fmt::Result {
        let snapshot = self.0.snapshot().map_err(|_| fmt::Error)?;
        for c in snapshot.iter() {
            let (credits, qp) = {
                let g = c.inner.lock();
                (g.credits, g.cm.get().and_then(|cm| cm.qp()))
            };
            write!(
                m,
                "id={} role={} credits={}",
                c.id,
                c.role().name(),
                credits
            )?;
            if let Some(qp) = qp {
                let (recv, short) = qp.recv_allocated();
                write!(
                    m,
                    " recv_bufs={} recv_posting={} send_bufs={}",
                    recv,
                    qp.recv_buffers().posting,
                    qp.send_buffers()
                )?;
                if short > 0 {
                    write!(m, " recv_short={}", short)?;
                }
            }
            c.xs.show_nonzero(m)?;
            writeln!(m)?;
        }
        Ok(())
    }
}
