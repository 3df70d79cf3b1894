// SPDX-License-Identifier: GPL-2.0

//! A mount's Calls: planned, registered and posted by the requester
//! pipeline, and the callback service's Replies to backchannel Calls.

use kernel::prelude::*;
use kernel::rbtree::RBTreeNodeReservation;

use super::{add, ClientXprt};
use crate::conn::requester::{self, CallSource, Encoded, Registrar, Regs};
use crate::conn::xprt::short;
use crate::conn::Conn;
use crate::proto::chunk::{CallPlan, DdpItem, Plan, ReplyPlan, RpcShape};
use crate::proto::header::{encode_msg, MsgSpec};
use crate::stats::XprtCounter as X;
use crate::sys::chunk::ChunkList;
use crate::sys::xprt::{RpcRqst, BC_SLOTS, SLOTS, XDRBUF_READ, XDRBUF_WRITE};

impl ClientXprt {
    /// The callback service's Reply to a backchannel Call: inline, no
    /// chunks (RFC 8167 Section 4).
    fn send_bc_reply(&self, rq: &RpcRqst<'_>) -> Result {
        let (conn, qp, neg, _) = self.current()?;
        let len = rq.msg.len();
        let spec = MsgSpec {
            xid: rq.xid,
            credits: BC_SLOTS,
            nomsg: false,
            reads: &[],
            writes: &[],
            reply: None,
        };
        qp.send(None, |buf| {
            let limit = buf.len().min(neg.c2s as usize);
            let buf = &mut buf[..limit];
            let h = encode_msg(buf, &spec).map_err(short)?;
            rq.msg.read(0, buf.get_mut(h..h + len).ok_or(EMSGSIZE)?)?;
            Ok(h + len)
        })?;
        conn.count(X::BcRepliesSent, 1);
        Ok(())
    }

    pub(super) fn send(&self, rq: &RpcRqst<'_>) -> Result {
        if rq.bc_reply {
            return self.send_bc_reply(rq);
        }
        let (conn, qp, neg, fr_pages) = self.current()?;
        let src = MountCall(rq);
        let p = requester::plan(&neg, fr_pages, &src.shape())?;
        let mut regs = Regs::default();
        let prepared = requester::prepare(&conn, &qp, fr_pages, &src, &p, &mut regs);
        // The MRs as debugfs counted them, also for a call that failed here.
        add(&self.counts.mrs_allocated, u64::from(regs.new_mrs()));
        let wire = match prepared {
            Ok(w) => w,
            Err(e) => {
                self.release_regs(&conn, regs, None);
                return Err(e);
            }
        };
        self.count_plan(rq, &p);
        let e = match requester::encode(&qp, &neg, &src, SLOTS, &wire) {
            Ok(e) => e,
            Err(e) => {
                self.release_regs(&conn, regs, None);
                return Err(e);
            }
        };
        // A call without chunks keeps nothing.
        if regs.call.is_empty() && regs.reply.is_empty() {
            requester::post(&conn, e, &regs)?;
        } else {
            self.post_kept(&conn, rq.xid, e, regs)?;
        }
        // Calls of this connection waiting for their Reply, this one included.
        let waiting = conn
            .xs
            .get(X::CallsSent)
            .saturating_sub(conn.xs.get(X::RepliesReceived));
        conn.raise(X::CallsInFlightMax, waiting);
        Ok(())
    }

    /// Posts the Call `e` of `xid` with its chunks `regs`, kept by XID
    /// first: its Reply may come at once. Under the lock, so that a close
    /// cannot take the chunks while their REG_MRs are posted.
    fn post_kept(&self, conn: &Conn, xid: u32, e: Encoded, regs: Regs) -> Result {
        // A node kept from an earlier entry, else one allocated without
        // the lock (reclaim may write back through this mount); chunks are
        // never dropped under the lock (their release waits for
        // LOCAL_INVs, whose completion may need the lock, see `AfterInv`).
        let mut g = self.lock();
        let node = match g.spare.pop() {
            Some(n) => n,
            None => {
                drop(g);
                match RBTreeNodeReservation::new(GFP_KERNEL) {
                    Ok(n) => {
                        g = self.lock();
                        n
                    }
                    Err(e) => {
                        self.release_regs(conn, regs, None);
                        return Err(e);
                    }
                }
            }
        };
        if !g.is_current(conn) {
            let _ = g.spare.push_within_capacity(node);
            drop(g);
            self.release_regs(conn, regs, None);
            return Err(ENOTCONN);
        }
        let old = g.regs.insert(node.into_node(xid, regs));
        let kept = g.regs.get(&xid).ok_or(EINVAL);
        let res = kept.and_then(|r| requester::post(conn, e, r));
        let failed = res.is_err().then(|| g.remove(xid)).flatten();
        drop(g);
        drop(old);
        if let Some(r) = failed {
            self.release_regs(conn, r, None);
        }
        res.map(|_| ())
    }

    /// Counts for mountstats what the plan `p` of `rq` registered.
    fn count_plan(&self, rq: &RpcRqst<'_>, p: &Plan) {
        let c = &self.counts;
        match p.call {
            CallPlan::Inline => {}
            CallPlan::ReadChunk { .. } => {
                add(&c.read_chunks, 1);
                add(&c.rdma_request, u64::from(rq.msg.page_len()));
            }
            CallPlan::PositionZero { len, .. } => {
                add(&c.read_chunks, 1);
                add(&c.nomsg_calls, 1);
                add(&c.rdma_request, u64::from(len));
            }
        }
        match p.reply {
            ReplyPlan::Inline => {}
            ReplyPlan::WriteList { .. } => add(&c.write_chunks, 1),
            ReplyPlan::ReplyChunk { .. } => add(&c.reply_chunks, 1),
        }
    }
}

/// A mount's Call, as the requester pipeline sends it: sunrpc's send
/// buffer, with direct data placement as the upper layer marks it
/// (xprtrdma's rules): WRITE's data pages may go in a Read chunk, READ's and
/// READLINK's receive pages may take a Write chunk, both in place.
struct MountCall<'a, 'b>(&'a RpcRqst<'b>);

impl CallSource for MountCall<'_, '_> {
    fn xid(&self) -> u32 {
        self.0.xid
    }

    fn shape(&self) -> RpcShape {
        let rq = self.0;
        let (snd, rcv) = (&rq.msg, &rq.rcv);
        RpcShape {
            call_len: u32::try_from(snd.len()).unwrap_or(u32::MAX),
            call_ddp: (rq.ddp && snd.flags() & XDRBUF_WRITE != 0 && snd.page_len() > 0).then(
                || DdpItem {
                    position: snd.head_len(),
                    len: snd.page_len(),
                },
            ),
            max_reply_len: rq.rcvsize,
            reply_ddp_len: (rq.ddp && rcv.flags() & XDRBUF_READ != 0 && rcv.page_len() > 0)
                .then(|| rcv.page_len()),
        }
    }

    fn read(&self, off: u32, out: &mut [u8]) -> Result {
        self.0.msg.read(off, out)
    }

    fn ddp_call(&self, reg: &Registrar<'_>, _item: DdpItem, out: &mut ChunkList) -> Result {
        // The item is the send buffer's pages (see `shape`).
        reg.wrap(out, &self.0.msg, false)
    }

    fn ddp_reply(&self, reg: &Registrar<'_>, _len: u32, out: &mut ChunkList) -> Result {
        reg.wrap(out, &self.0.rcv, true)
    }
}
