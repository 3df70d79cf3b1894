// SPDX-License-Identifier: GPL-2.0

//! RPC-over-RDMA version 1 messaging on an established connection (RFC 8166),
//! sized by what the connection negotiated (RFC 8797).
//!
//! - Requester (client role): `requester.rs`, the steps every requester
//!   takes (plan, register, post, check the Reply's chunks, invalidate);
//!   `rpc_xprt/` (a mount) and `client.rs` (the debugfs caller, test
//!   builds) match Replies to their calls and place them.
//! - Responder (server role): `responder.rs` (credits, decoding, assembling
//!   a long call, the reply inline or in chunks, RDMA_ERROR).
//!
//! Here: a connection's counters, the dispatch of each Receive to its upper,
//! the handling of failed completions, and the `xprt` file.

use core::fmt::{self, Write};
use kernel::prelude::*;

use super::{Conn, State, Upper};
use crate::proto::conn_state::ConnState;
use crate::stats::XprtCounter as X;
use crate::sys::qp::Qp;
use crate::sys::rdma_cm::{Completion, WC_FLUSHED};

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
        match &self.upper {
            Upper::Mount(m) => m.received(self, qp, wc),
            Upper::Nfsd(_) => self.svc_received(qp, wc),
            #[cfg(CONFIG_RPCRDMA_CM_TEST)]
            Upper::Caller => self.reply_received(wc.data, wc.invalidated),
            #[cfg(CONFIG_RPCRDMA_CM_TEST)]
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
            #[cfg(CONFIG_RPCRDMA_CM_TEST)]
            g.x.fail_all(ENOTCONN.to_errno());
        }
        // The tick closes a connection whose disconnect never completes.
        self.touch();
        self.cv.notify_all();
        let _ = qp.disconnect();
    }

    /// A call was lost for want of memory: nothing wrong with it, so the
    /// connection ends (as svcrdma's does) and the requester sends the call
    /// again on the next, where an RDMA_ERROR or a lost credit would fail it
    /// for good. Counted in `calls_dropped_no_memory`.
    pub(super) fn drop_for_memory(&self, qp: &Qp) {
        self.count(X::CallsDroppedNoMemory, 1);
        self.fatal(qp, "no_memory", ENOMEM.to_errno());
    }
}

/// `xprt`: each connection's messaging counters (non-zero ones).
pub(crate) struct XprtFile(pub(crate) kernel::sync::Arc<State>);

impl crate::sys::debugfs::Show for XprtFile {
    fn show(&self, m: &mut crate::sys::debugfs::SeqFile<'_>) -> fmt::Result {
        let snapshot = self.0.snapshot().map_err(|_| fmt::Error)?;
        for c in snapshot.iter() {
            let credits = c.credits();
            let qp = c.inner.lock().cm.get().and_then(|cm| cm.qp());
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
                    " recv_bufs={} recv_posting={} send_bufs={} chunk_allocs={}",
                    recv,
                    qp.recv_buffers().posting,
                    qp.send_buffers(),
                    qp.chunks_allocated()
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
