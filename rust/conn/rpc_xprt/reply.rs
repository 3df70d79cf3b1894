// SPDX-License-Identifier: GPL-2.0

//! A mount's Replies: matched to their call, the grant taken, the call's
//! chunks invalidated (without waiting, see [`AfterInv`]), the Reply
//! placed where sunrpc reads it and the call completed.

use kernel::prelude::*;
use kernel::sync::Arc;

use super::{add, ClientXprt, EnteredArc};
use crate::conn::requester::{self, Regs, ReplyKind};
use crate::conn::Conn;
use crate::proto::header::{decode, Body, Header, Limits};
use crate::proto::xdr::xdr_align;
use crate::stats::XprtCounter as X;
use crate::sys::chunk::{invalidate_async, ChunkLists, InvAsync, Invalidated};
use crate::sys::qp::{Qp, RecvBuf};
use crate::sys::rdma_cm::Completion;
use crate::sys::xprt::{PinnedRqst, BC_SLOTS, SLOTS};

/// A Reply whose call's chunks are being invalidated: placed and completed
/// when the last LOCAL_INV completes ([`invalidate_async`], which holds the
/// chunks meanwhile), from the CQ's work. Its Receive buffer and the pinned
/// request are kept until then (`Some` until [`Invalidated::invalidated`]);
/// the call's entry in `regs` stays, marked deferred, until the call is
/// completed, so that a second Reply to it (handled meanwhile) is not
/// taken.
struct AfterInv {
    x: Arc<ClientXprt>,
    conn: Arc<Conn>,
    xid: u32,
    rq: Option<PinnedRqst>,
    buf: Option<RecvBuf>,
    write_list: bool,
    invalidated: Option<u32>,
    _user: EnteredArc,
}

impl Invalidated for AfterInv {
    fn invalidated(&mut self, chunks: ChunkLists, status: i32) {
        let [call, reply] = chunks;
        let regs = Regs {
            call,
            reply,
            write_list: self.write_list,
            deferred: false,
        };
        let (Some(rq), Some(buf)) = (self.rq.take(), self.buf.take()) else {
            return;
        };
        // A LOCAL_INV flushed (the QP went to the error state) or failed,
        // or one not posted (no memory for the batch, see `defer`; the Send
        // Queue full): a registration may be live, so the call is not
        // completed from here; as xprtrdma, it is sent again on the next
        // connection, which this forces. Likewise on a connection sunrpc
        // closed meanwhile.
        if status != 0 || !self.x.lock().is_current(&self.conn) {
            self.x
                .drop_call(&self.conn, self.xid, rq, regs, self.invalidated);
            return;
        }
        let data = buf.data();
        match decode(data, &Limits::DEFAULT) {
            Ok(h) => self
                .x
                .finish(&self.conn, rq, &h, data, Some(regs), self.invalidated),
            // A header that could not be read when it arrived (see `fail`).
            Err(_) => {
                self.x.release_regs(&self.conn, regs, self.invalidated);
                rq.complete(Err(EIO));
            }
        }
        // Completed: sunrpc's lookup no longer finds the call, so the entry
        // can go.
        self.x.undefer(&self.conn, self.xid);
    }
}

impl ClientXprt {
    /// A Receive on `conn`, the current connection: a Reply to one of the
    /// mount's calls, or a backchannel Call. In steps: decode, match
    /// ([`ClientXprt::bc_call`], sunrpc's lookup), the grant
    /// ([`ClientXprt::window`]), the call's chunks ([`ClientXprt::take`]),
    /// then invalidation without waiting ([`ClientXprt::defer`]) or the Reply
    /// placed at once ([`ClientXprt::finish`]).
    pub(super) fn received(self: &Arc<Self>, conn: &Conn, qp: &Qp, wc: &Completion<'_>) {
        let (data, invalidated) = (wc.data, wc.invalidated);
        let Some(_entered) = self.enter() else {
            return;
        };
        let h = match decode(data, &Limits::DEFAULT) {
            Ok(h) => h,
            Err((xid, _)) => {
                conn.count(X::HeaderErrors, 1);
                add(&self.counts.bad_reply, 1);
                // A header we cannot read fails its call, if we know which
                // and it is this connection's to fail.
                if let Some((rq, x)) = xid.and_then(|x| Some((self.x.lookup(x)?, x))) {
                    self.fail(conn, rq, x, wc, invalidated);
                }
                return;
            }
        };
        if self.bc_call(conn, &h, data) {
            return;
        }
        let Some(rq) = self.x.lookup(h.xid) else {
            conn.count(X::RepliesUnmatched, 1);
            return;
        };
        // As xprtrdma: 0 means 1, and never more than we asked for.
        let credits = h.credits.clamp(1, SLOTS);
        let window = self.window(conn, qp, credits);
        // A Reply on a connection sunrpc is closing: dropping `rq` unpins
        // the call, which is sent again on the next connection.
        let Some((regs, current)) = self.take(conn, h.xid, invalidated, Some(window)) else {
            return;
        };
        // The grant, as `xprt` shows the connection's credits.
        conn.set_credits(credits);
        conn.count(X::RepliesReceived, 1);
        let (rq, regs) = match regs {
            Some(r) if !r.invalidated_by(invalidated) => {
                if let Err((rq, r)) = self.defer(conn, current, rq, wc, r, invalidated, h.xid) {
                    self.drop_call(conn, h.xid, rq, r, invalidated);
                }
                return;
            }
            r => (rq, r),
        };
        self.finish(conn, rq, &h, data, regs, invalidated);
    }

    /// Whether the message `h` (whole in `data`) is a backchannel Call (RFC
    /// 8167 Section 4: no chunks, the RPC header's XID repeats the transport
    /// header's, and it is a CALL); if so it is handed to sunrpc's callback
    /// service.
    fn bc_call(&self, conn: &Conn, h: &Header<'_>, data: &[u8]) -> bool {
        let Body::Msg(c) = &h.body else {
            return false;
        };
        let rpc = &data[h.len..];
        let call = c.read_list().next().is_none()
            && c.write_list().next().is_none()
            && c.reply_chunk().is_none()
            && rpc.get(..4) == Some(&h.xid.to_be_bytes()[..])
            && rpc.get(4..8) == Some(&[0u8; 4][..]);
        if !call {
            return false;
        }
        conn.count(X::BcCallsReceived, 1);
        match self.x.bc_call(rpc) {
            Ok(()) => {}
            // The transport is being destroyed (no reference left to take):
            // nothing to disconnect, and its autoclose work must not be
            // queued again.
            Err(e) if e == ENOTCONN => {}
            // More than we offered, or no memory: as xprtrdma, the
            // connection goes (the server retransmits after).
            Err(_) => {
                conn.count(X::BcOverflows, 1);
                self.x.force_disconnect();
            }
        }
        true
    }

    /// The window the server's grant of `credits` opens: a Receive for each
    /// call it lets in flight is posted first (as xprtrdma's
    /// rpcrdma_post_recvs); without memory for more, the window stays what
    /// the Receives cover.
    fn window(&self, conn: &Conn, qp: &Qp, credits: u32) -> u32 {
        let mut receives = qp.recv_buffers().posting;
        let want = credits + BC_SLOTS + 1;
        if want > receives {
            if let Ok(n) = qp.grow_recv(want - receives) {
                conn.count(X::ReceivesAdded, u64::from(n));
            }
            receives = qp.recv_buffers().posting;
        }
        credits.min(receives.saturating_sub(BC_SLOTS + 1)).max(1)
    }

    /// Takes the chunks of call `xid` for its Reply and opens sunrpc's
    /// window to `window` (if given), under the lock sunrpc's close takes first (once
    /// `conn` is no longer current its credits are gone, reset_cong);
    /// returns the chunks and the connection in use, or `None` (counted
    /// `replies_unmatched`) for a Reply on a connection sunrpc is closing or
    /// a second Reply to a call whose first is being finished.
    ///
    /// Chunks that need a LOCAL_INV leave their entry behind, marked
    /// deferred, until [`AfterInv`] (or [`ClientXprt::undefer`]) forgets it:
    /// a call whose chunks are left to invalidate completes when the last
    /// LOCAL_INV does (xprtrdma's frwr_unmap_async), the Reply staying in
    /// its Receive buffer until then.
    fn take(
        &self,
        conn: &Conn,
        xid: u32,
        invalidated: Option<u32>,
        window: Option<u32>,
    ) -> Option<(Option<Regs>, Option<Arc<Conn>>)> {
        let mut g = self.lock();
        if !g.is_current(conn) {
            conn.count(X::RepliesUnmatched, 1);
            return None;
        }
        let deferred = match g.regs.get_mut(&xid) {
            Some(r) if r.deferred => {
                conn.count(X::RepliesUnmatched, 1);
                return None;
            }
            Some(r) if !r.invalidated_by(invalidated) => {
                let chunks = core::mem::take(r);
                r.deferred = true;
                Some(chunks)
            }
            _ => None,
        };
        if let Some(w) = window {
            self.x.set_credits(w);
        }
        let regs = deferred.or_else(|| g.remove(xid));
        Some((regs, g.conn.clone()))
    }

    /// Forgets the deferred entry of call `xid` on `conn` (see
    /// [`AfterInv`]), if `conn` is still the connection in use.
    fn undefer(&self, conn: &Conn, xid: u32) {
        let mut g = self.lock();
        // Entries are those of the connection in use: once `conn` is not,
        // its entries went with it, and one found is another connection's.
        let old = match g.regs.get(&xid) {
            Some(r) if r.deferred && g.is_current(conn) => g.remove(xid),
            _ => None,
        };
        drop(g);
        drop(old);
    }

    /// Hands the call of `rq` to its LOCAL_INVs' completion ([`AfterInv`]),
    /// keeping the Reply's Receive buffer; gives `rq` and `regs` back if it
    /// cannot.
    #[allow(clippy::too_many_arguments)]
    fn defer(
        self: &Arc<Self>,
        conn: &Conn,
        current: Option<Arc<Conn>>,
        rq: PinnedRqst,
        wc: &Completion<'_>,
        mut regs: Regs,
        invalidated: Option<u32>,
        xid: u32,
    ) -> core::result::Result<(), (PinnedRqst, Regs)> {
        let (Some(owner), Ok(slot)) = (current, KBox::<AfterInv>::new_uninit(GFP_KERNEL)) else {
            return Err((rq, regs));
        };
        let Some(user) = self.enter_owned() else {
            return Err((rq, regs));
        };
        // Last: once kept, the buffer is the task's.
        let Some(buf) = wc.keep() else {
            return Err((rq, regs));
        };
        // The chunk the server invalidated takes no LOCAL_INV.
        let _ = regs.spare(invalidated);
        let write_list = regs.write_list;
        let chunks = [
            core::mem::take(&mut regs.call),
            core::mem::take(&mut regs.reply),
        ];
        let task = KBox::write(
            slot,
            AfterInv {
                x: self.clone(),
                conn: owner,
                xid,
                rq: Some(rq),
                buf: Some(buf),
                write_list,
                invalidated,
                _user: user,
            },
        );
        match invalidate_async(task, chunks) {
            InvAsync::Taken(n) => {
                self.count_local_inv(conn, n);
                Ok(())
            }
            // No memory for the batch: the task runs now, told so, and
            // drops the call (this context must not wait for LOCAL_INVs).
            InvAsync::Refused(mut task, chunks) => {
                task.invalidated(chunks, ENOMEM.to_errno());
                Ok(())
            }
        }
    }

    fn count_local_inv(&self, conn: &Conn, n: u32) {
        conn.count(X::LocalInvalidations, u64::from(n));
        add(&self.counts.local_inv, u64::from(n));
    }

    /// Places the Reply of `rq` and completes the call; `regs` are its
    /// chunks, released (invalidated first if need be) before anything is
    /// written into the RPC's pages.
    fn finish(
        &self,
        conn: &Conn,
        mut rq: PinnedRqst,
        h: &Header<'_>,
        data: &[u8],
        regs: Option<Regs>,
        invalidated: Option<u32>,
    ) {
        let mut held = Held {
            x: self,
            conn,
            regs,
            invalidated,
        };
        let res = self.place(&mut rq, h, data, &mut held);
        if res.is_err() {
            add(&self.counts.bad_reply, 1);
        }
        // Invalidated before the call completes: the server can no longer
        // touch memory the RPC layer is about to read or reuse.
        held.release();
        rq.complete(res);
    }

    /// Puts the Reply where sunrpc reads it; its length. Nothing is written
    /// into the RPC's pages before the call's registrations are released
    /// (invalidated and unmapped, [`Held::release`]): until then the server
    /// may still write there, and unmapping could copy a bounce buffer back
    /// over what was placed (xprtrdma likewise invalidates first).
    fn place(
        &self,
        rq: &mut PinnedRqst,
        h: &Header<'_>,
        data: &[u8],
        held: &mut Held<'_>,
    ) -> Result<u32> {
        let conn = held.conn;
        // As xprtrdma, an RDMA_ERROR or a Reply that breaks the protocol
        // fails the call with EIO.
        let kind = requester::reply_kind(conn, h).map_err(|_| EIO)?;
        if let Some(regs) = &held.regs {
            regs.check(conn, kind).map_err(|_| EIO)?;
        } else if kind != ReplyKind::Inline {
            conn.count(X::ChunkErrors, 1);
            return Err(EIO);
        }
        let placed = self.place_kind(rq, kind, &data[h.len..], held);
        if placed.is_ok() {
            requester::count_kind(conn, kind);
        }
        placed
    }

    /// [`ClientXprt::place`] for a Reply of `kind` whose RPC part in the
    /// Send is `rpc`.
    fn place_kind(
        &self,
        rq: &mut PinnedRqst,
        kind: ReplyKind,
        rpc: &[u8],
        held: &mut Held<'_>,
    ) -> Result<u32> {
        let len = u32::try_from(rpc.len()).map_err(|_| EIO)?;
        match kind {
            ReplyKind::Inline => {
                // All inline: head, then pages, then tail, in order.
                held.release();
                rq.write(0, rpc)?;
                let layout = rq.layout();
                let in_pages = len.saturating_sub(layout.head_len()).min(layout.page_len());
                add(&self.counts.fixup_copy, u64::from(in_pages));
                Ok(len)
            }
            ReplyKind::WriteList { written } => {
                // The payload is in the receive pages already. What precedes
                // it goes to the head, which ends there; anything after it to
                // the tail (xprtrdma's rpcrdma_inline_fixup).
                let (head, pages) = {
                    let l = rq.layout();
                    (l.head_len(), l.page_len())
                };
                held.release();
                if len < head {
                    rq.write(0, rpc)?;
                    rq.trim_head(len);
                } else {
                    let (before, after) = rpc.split_at(head as usize);
                    rq.write(0, before)?;
                    // Most often nothing follows the payload (a READ last
                    // in its COMPOUND, or NFSv3's).
                    if !after.is_empty() {
                        rq.write(head + pages, after)?;
                    }
                }
                add(&self.counts.rdma_reply, u64::from(written));
                let padded = xdr_align(written as usize).ok_or(EIO)?;
                u32::try_from(rpc.len() + padded).map_err(|_| EIO)
            }
            ReplyKind::ReplyChunk { written } => {
                let v = held.regs.as_mut().ok_or(EIO)?.read_reply_chunk(written)?;
                held.release();
                rq.write(0, &v)?;
                add(&self.counts.rdma_reply, u64::from(written));
                Ok(written)
            }
        }
    }

    /// Fails call `xid` for a Reply on `conn` whose header cannot be read,
    /// its chunks invalidated first, without waiting ([`AfterInv`] fails it:
    /// the header is still unreadable then). Not if it is not this Reply's
    /// to fail (counted `replies_unmatched`): `conn` is no longer the
    /// connection in use (the call is sent again on the next one), or an
    /// earlier Reply to it is being finished.
    fn fail(
        self: &Arc<Self>,
        conn: &Conn,
        rq: PinnedRqst,
        xid: u32,
        wc: &Completion<'_>,
        invalidated: Option<u32>,
    ) {
        let Some((regs, current)) = self.take(conn, xid, invalidated, None) else {
            return;
        };
        match regs {
            Some(r) if !r.invalidated_by(invalidated) => {
                if let Err((rq, r)) = self.defer(conn, current, rq, wc, r, invalidated, xid) {
                    self.drop_call(conn, xid, rq, r, invalidated);
                }
            }
            r => {
                if let Some(r) = r {
                    self.release_regs(conn, r, invalidated);
                }
                rq.complete(Err(EIO));
            }
        }
    }

    /// The Reply to call `xid` on `conn` cannot wait for its LOCAL_INVs (no
    /// memory for the wait, one failed, or `conn` is no longer the one in
    /// use), and this context, the CQ's, must not wait for them itself: the
    /// chunks are released without (their MRs deregistered once the QP is
    /// drained), the call is
    /// left to be sent again, and the connection goes (if still in use), so
    /// that it is.
    fn drop_call(
        &self,
        conn: &Conn,
        xid: u32,
        rq: PinnedRqst,
        regs: Regs,
        invalidated: Option<u32>,
    ) {
        self.undefer(conn, xid);
        self.count_released(regs.release_no_inv(conn, invalidated));
        drop(rq);
        let _ = self.disconnect_current(&self.lock(), conn);
    }
}

/// A Reply's call registrations while the Reply is placed: released
/// (invalidated, unmapped, freed) once, before anything is written into the
/// RPC's pages, or when dropped.
struct Held<'a> {
    x: &'a ClientXprt,
    conn: &'a Conn,
    regs: Option<Regs>,
    invalidated: Option<u32>,
}

impl Held<'_> {
    fn release(&mut self) {
        if let Some(r) = self.regs.take() {
            self.x.release_regs(self.conn, r, self.invalidated);
        }
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.release();
    }
}
