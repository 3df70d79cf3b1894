// SPDX-License-Identifier: GPL-2.0

//! The requester (client role): one RPC at a time per caller, planned by the
//! protocol core for the connection's negotiated thresholds.
//!
//! A call is described by a [`Req`]: its RPC call header and arguments up to a
//! data item (`head`), then the data item (`data`: the echo pattern, generated
//! where it is needed, in the Send or in a chunk, never copied twice), then its
//! XDR pad. If the item is DDP-eligible (ECHO payload, NFS WRITE data) and the
//! call does not fit inline, it goes in a Read chunk at its XDR position; else
//! the whole message goes in a Position-Zero Read chunk (RDMA_NOMSG). The reply
//! comes inline, with its DDP-eligible result (ECHO payload, NFS READ data) in
//! a Write chunk, or whole in a Reply chunk; the caller's check reads it from
//! wherever it came.

use kernel::alloc::KVVec;
use kernel::prelude::*;
use kernel::time::{msecs_to_jiffies, Jiffies};

use super::requester::{self, BadReply, CallSource, Registrar, Regs, ReplyKind};
use super::rpcs::RpcRecord;
use super::xprt::{n32, short};
use super::{Conn, ConnInner, QP_DEPTH};
use crate::proto::chunk::{CallPlan, DdpItem, Plan, ReplyPlan, RpcShape};
use crate::proto::config::{CallSpec, NfsOp, NfsSpec};
use crate::proto::conn_state::client_window;
use crate::proto::header::{decode, Header, Limits};
use crate::proto::negotiate::{Negotiated, Role};
use crate::proto::nfs4::{decode_compound, encode_compound, fnv1a64, Op, FNV_BASIS};
use crate::proto::rpc::{
    decode_reply, echo, encode_call_cred, AcceptStat, Cred, ReplyStatus, CALL_HEADER_SYS_LEN,
    REPLY_HEADER_LEN,
};
use crate::proto::ulb::{compound_res_head, nfs4_op_max_reply, NFS_PROGRAM};
use crate::proto::xdr::{xdr_align, XdrReader, XdrWriter};
use crate::stats::XprtCounter as X;
use crate::sys::chunk::{Chunk, ChunkList};
use crate::sys::qp::Qp;
use crate::sys::time::now_ns;
use crate::sys::wait::Waited;

type Guard<'a, T> = kernel::sync::lock::Guard<'a, T, kernel::sync::lock::mutex::MutexBackend>;

/// Slots for calls in flight: never more than the credits we request.
const SLOTS: usize = QP_DEPTH as usize;

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

/// How long a call waits for its reply (and for a credit).
const CALL_TIMEOUT_MS: u32 = 15_000;
/// Room for the RPC call header and arguments before the data item.
const HEAD_MAX: usize = 512;
/// Credential of our NFS calls: root (the selftests export with no_root_squash).
const NFS_CRED: Cred = Cred::Sys { uid: 0, gid: 0 };

/// What one call sends and expects.
struct Req<'a> {
    spec: &'a CallSpec,
    prog: u32,
    vers: u32,
    proc_: u32,
    cred: Cred,
    /// The data item: its length and the seed of its pattern (`None`: the XID).
    data: Option<(u32, Option<u32>)>,
    /// Whether the data item is DDP-eligible (may go in a Read chunk).
    data_ddp: bool,
    /// Largest possible RPC reply.
    max_reply: u32,
    /// Largest DDP-eligible result of the reply.
    reply_ddp: Option<u32>,
}

/// The NFS operations of an `nfs` command.
fn nfs_ops<'a>(n: &'a NfsSpec, ops: &mut [Op<'a>; 3]) -> usize {
    let mut k = 0;
    let mut put = |op| {
        ops[k] = op;
        k += 1;
    };
    put(Op::PutRootFh);
    if !n.name().is_empty() {
        put(Op::Lookup(n.name()));
    }
    put(match n.op {
        NfsOp::GetAttr => Op::GetAttr,
        NfsOp::Read { count, offset } => Op::Read { offset, count },
        NfsOp::Write { count, offset, .. } => Op::Write { offset, len: count },
        NfsOp::ReadDir { maxcount } => Op::ReadDir { maxcount },
    });
    k
}

impl<'a> Req<'a> {
    fn new(spec: &'a CallSpec) -> Req<'a> {
        let reply_head = n32(REPLY_HEADER_LEN + 8);
        let padded = |len: u32| n32(xdr_align(len as usize).unwrap_or(usize::MAX));
        let base = Req {
            spec,
            prog: 0,
            vers: 0,
            proc_: 0,
            cred: Cred::None,
            data: None,
            data_ddp: false,
            max_reply: reply_head,
            reply_ddp: None,
        };
        match *spec {
            CallSpec::NfsNull => Req {
                prog: NFS_PROGRAM,
                vers: 4,
                ..base
            },
            CallSpec::Rpc { prog, vers, proc_ } => Req {
                prog,
                vers,
                proc_,
                ..base
            },
            CallSpec::Echo { len, ddp } => Req {
                prog: echo::PROGRAM,
                vers: echo::VERSION,
                proc_: if ddp { echo::ECHO } else { echo::ECHO_NODDP },
                data: Some((len, None)),
                data_ddp: ddp,
                max_reply: reply_head.saturating_add(4).saturating_add(padded(len)),
                reply_ddp: ddp.then_some(len),
                ..base
            },
            CallSpec::Nfs(ref n) => {
                let mut ops = [Op::PutRootFh; 3];
                let k = nfs_ops(n, &mut ops);
                let bound = |op: &Op<'_>| match *op {
                    Op::Read { count, .. } => nfs4_op_max_reply(op.code(), count),
                    Op::ReadDir { maxcount } => nfs4_op_max_reply(op.code(), maxcount),
                    _ => nfs4_op_max_reply(op.code(), 64),
                };
                let max_reply = ops[..k]
                    .iter()
                    .map(|op| bound(op).unwrap_or(u32::MAX))
                    .fold(
                        reply_head.saturating_add(compound_res_head(0)),
                        u32::saturating_add,
                    );
                let (data, reply_ddp) = match n.op {
                    NfsOp::Write { count, seed, .. } => (Some((count, Some(seed))), None),
                    NfsOp::Read { count, .. } => (None, Some(count)),
                    _ => (None, None),
                };
                Req {
                    prog: NFS_PROGRAM,
                    vers: 4,
                    proc_: 1,
                    cred: NFS_CRED,
                    data,
                    data_ddp: data.is_some(),
                    max_reply,
                    reply_ddp,
                    ..base
                }
            }
        }
    }

    /// Encodes the RPC call header and the arguments up to the data item.
    fn head(&self, xid: u32, buf: &mut [u8]) -> Result<usize> {
        let n = encode_call_cred(buf, xid, self.prog, self.vers, self.proc_, self.cred)
            .map_err(short)?;
        let mut w = XdrWriter::new(&mut buf[n..]);
        match self.spec {
            CallSpec::Echo { len, .. } => w.u32(*len).map_err(short)?,
            CallSpec::Nfs(nfs) => {
                let mut ops = [Op::PutRootFh; 3];
                let k = nfs_ops(nfs, &mut ops);
                encode_compound(&mut w, &ops[..k]).map_err(|_| EMSGSIZE)?;
            }
            _ => {}
        }
        Ok(n + w.position())
    }

    /// Length of the head (the XID does not change it).
    fn head_len(&self) -> Result<u32> {
        let mut buf = [0u8; HEAD_MAX];
        self.head(0, &mut buf).map(n32)
    }

    fn data_len(&self) -> u32 {
        self.data.map_or(0, |(len, _)| len)
    }

    fn seed(&self, xid: u32) -> u32 {
        self.data.and_then(|(_, s)| s).unwrap_or(xid)
    }

    /// The call's shape for planning, with a head of `head_len` octets.
    fn shape(&self, head_len: u32) -> Result<RpcShape> {
        let padded = n32(xdr_align(self.data_len() as usize).ok_or(EINVAL)?);
        Ok(RpcShape {
            call_len: head_len.checked_add(padded).ok_or(EINVAL)?,
            call_ddp: self.data.filter(|_| self.data_ddp).map(|(len, _)| DdpItem {
                position: head_len,
                len,
            }),
            max_reply_len: self.max_reply,
            reply_ddp_len: self.reply_ddp,
        })
    }
}

/// One call of the caller's as the requester pipeline sends it: the head
/// encoded for its XID, then the data item's pattern (generated where it
/// goes, in the Send or in the Read chunk), then the item's XDR pad.
struct CallerCall<'a> {
    req: &'a Req<'a>,
    xid: u32,
    head: [u8; HEAD_MAX],
    hn: usize,
    shape: RpcShape,
}

impl<'a> CallerCall<'a> {
    fn new(req: &'a Req<'a>, xid: u32) -> Result<Self> {
        let mut head = [0u8; HEAD_MAX];
        let hn = req.head(xid, &mut head)?;
        let shape = req.shape(n32(hn))?;
        Ok(CallerCall {
            req,
            xid,
            head,
            hn,
            shape,
        })
    }
}

impl CallSource for CallerCall<'_> {
    fn xid(&self) -> u32 {
        self.xid
    }

    fn shape(&self) -> RpcShape {
        self.shape
    }

    fn read(&self, off: u32, out: &mut [u8]) -> Result {
        let (off, hn) = (off as usize, self.hn);
        let data = self.req.data_len() as usize;
        let end = off.checked_add(out.len()).ok_or(EINVAL)?;
        if end > self.shape.call_len as usize {
            return Err(EINVAL);
        }
        // The Call is the head, the data item's pattern, then its XDR pad:
        // each part of `off..end` copied, generated or zeroed in one go.
        let (h, d) = (hn.clamp(off, end), (hn + data).clamp(off, end));
        let (head, rest) = out.split_at_mut(h - off);
        let (item, pad) = rest.split_at_mut(d - h);
        if h > off {
            head.copy_from_slice(&self.head[off..h]);
        }
        pattern_into(item, self.req.seed(self.xid), h.saturating_sub(hn));
        pad.fill(0);
        Ok(())
    }

    fn ddp_call(&self, reg: &Registrar<'_>, item: DdpItem, out: &mut ChunkList) -> Result {
        let seed = self.req.seed(self.xid);
        reg.alloc_filled(out, item.len, &mut |c, at| fill_pattern(c, seed, at))
    }

    fn ddp_reply(&self, reg: &Registrar<'_>, len: u32, out: &mut ChunkList) -> Result {
        reg.alloc(out, len, true)
    }
}

/// Writes the data item's pattern (`len` octets for `seed`, starting at
/// pattern index `from`) to `out`.
fn pattern_into(out: &mut [u8], seed: u32, from: usize) {
    for (k, b) in out.iter_mut().enumerate() {
        *b = echo::pattern(seed, from + k);
    }
}

/// Fills all of `c` with the pattern for `seed`, from pattern index `from`.
fn fill_pattern(c: &mut Chunk, seed: u32, from: u32) -> Result {
    let mut buf = [0u8; 256];
    let (mut i, len) = (0u32, c.len());
    while i < len {
        let n = (len - i).min(buf.len() as u32);
        pattern_into(&mut buf[..n as usize], seed, (from + i) as usize);
        c.write_at(i, &buf[..n as usize])?;
        i += n;
    }
    Ok(())
}

fn is_pattern(data: &[u8], seed: u32, from: usize) -> bool {
    data.iter()
        .enumerate()
        .all(|(k, &b)| b == echo::pattern(seed, from + k))
}

fn call_plan_name(p: &CallPlan) -> &'static str {
    match p {
        CallPlan::Inline => "inline",
        CallPlan::ReadChunk { .. } => "read_chunk",
        CallPlan::PositionZero { .. } => "long",
    }
}

fn reply_plan_name(p: &ReplyPlan) -> &'static str {
    match p {
        ReplyPlan::Inline => "inline",
        ReplyPlan::WriteList { .. } => "write_list",
        ReplyPlan::ReplyChunk { .. } => "reply_chunk",
    }
}

fn status_name(s: &ReplyStatus) -> &'static str {
    match s {
        ReplyStatus::Accepted(a) => a.name(),
        ReplyStatus::Denied(_) => "denied",
    }
}

impl Conn {
    /// Issues one RPC and waits for its reply. `Ok` means a reply came (whatever
    /// its RPC status, recorded in `rpcs`); an ECHO whose payload came back
    /// different, or an NFS reply that cannot be decoded, is `EIO`.
    pub(crate) fn call(&self, spec: &CallSpec) -> Result {
        let start = now_ns();
        let req = Req::new(spec);
        let mut rec = RpcRecord::new(self.id, req.prog, req.vers, req.proc_);
        let res = self.call_inner(&req, &mut rec);
        rec.usec = (now_ns() - start) / 1000;
        if let Err(e) = res {
            rec.errno = e.to_errno();
        }
        self.state.rpcs.lock().push(rec);
        res
    }

    fn call_inner(&self, req: &Req<'_>, rec: &mut RpcRecord) -> Result {
        if self.role() != Role::Client {
            return Err(EINVAL);
        }
        let head_len = req.head_len()?;
        let shape = req.shape(head_len)?;
        rec.call_len = shape.call_len;
        let (neg, fr_pages) = {
            let g = self.inner.lock();
            match (g.cm.get(), &g.negotiated) {
                (Some(_), Some(n)) if g.state.is_established() => (*n, g.fr_pages),
                _ => return Err(ENOTCONN),
            }
        };
        let p = requester::plan(&neg, fr_pages, &shape)?;
        rec.call = call_plan_name(&p.call);
        rec.reply = reply_plan_name(&p.reply);

        // Reserve a credit (RFC 8166 Section 3.3.1), an XID and a slot, and
        // take a handle on the QP; then build and send the call without the
        // lock (allocation, registration and DMA mapping may sleep).
        let mut left = msecs_to_jiffies(CALL_TIMEOUT_MS);
        let (qp, xid) = {
            let mut g = self.inner.lock();
            loop {
                let qp = match g.cm.get() {
                    Some(cm) if g.state.is_established() => cm.qp().ok_or(ENOTCONN)?,
                    _ => return Err(ENOTCONN),
                };
                let receives = qp.recv_buffers().posting;
                if g.x.outstanding < client_window(self.credits(), receives, QP_DEPTH) {
                    break (qp, self.reserve(&mut g)?);
                }
                // The handle is dropped before waiting: teardown waits for it.
                drop(qp);
                let (g2, res) = self.wait(g, left);
                g = g2;
                left = res?;
            }
        };
        rec.xid = xid;

        let mut regs = Regs::default();
        let sent = self.send_call(&qp, &neg, fr_pages, req, xid, &p, &mut regs);
        drop(qp);
        let mut g = self.inner.lock();
        let (result, gave_up) = match sent {
            Ok(()) => {
                let (g2, res) = self.wait_reply(g, xid, left);
                g = g2;
                match res {
                    Ok(r) => (r, false),
                    Err(e) => (Err(e), true),
                }
            }
            Err(e) => (Err(e), false),
        };
        // Free the slot and the credit, unless the call went out and we gave
        // up waiting before any reply came: the server may still hold it, so
        // both stay taken until its reply comes or the connection ends.
        let held = gave_up && g.x.slot(xid).is_some_and(|p| p.result.is_none());
        let mut invalidated = None;
        if held {
            if let Some(p) = g.x.slot(xid) {
                p.abandoned = true;
            }
            self.count(X::CallsAbandoned, 1);
        } else {
            invalidated = g.x.release(xid).and_then(|p| p.invalidated);
        }
        drop(g);
        self.cv.notify_all();

        // Check what came back (in the Send or in our chunks), then release the
        // chunks: the reply's Send With Invalidate (if any) spares one LOCAL_INV.
        let checked = match &result {
            Ok(done) => self.finish_reply(req, done, &mut regs, xid, rec),
            Err(_) => Ok(()),
        };
        regs.release(self, invalidated);
        let done = result?;
        rec.reply = done.kind.name();
        rec.reply_len = done.reply_len;
        checked?;
        if rec.verified == Some(false) {
            return Err(EIO);
        }
        Ok(())
    }

    /// Takes the next XID and a free slot, counting the call as outstanding.
    fn reserve(&self, g: &mut ConnInner) -> Result<u32> {
        let slot = g.x.pending.iter().position(|p| p.is_none()).ok_or(EBUSY)?;
        let xid = g.x.next_xid;
        g.x.next_xid = xid.wrapping_add(1);
        g.x.pending[slot] = Some(Pending {
            xid,
            result: None,
            invalidated: None,
            abandoned: false,
        });
        g.x.outstanding += 1;
        Ok(xid)
    }

    /// Registers the chunks `p` asks for (kept in `regs`, also when the
    /// Send fails) and sends the call. Called without the connection's lock.
    #[allow(clippy::too_many_arguments)]
    fn send_call(
        &self,
        qp: &Qp,
        neg: &Negotiated,
        fr_pages: u32,
        req: &Req<'_>,
        xid: u32,
        p: &Plan,
        regs: &mut Regs,
    ) -> Result {
        let src = CallerCall::new(req, xid)?;
        let wire = requester::prepare(self, qp, fr_pages, &src, p, regs)?;
        let e = requester::encode(qp, neg, &src, QP_DEPTH, &wire)?;
        requester::post(self, e, regs)?;
        Ok(())
    }

    /// Decodes and checks the reply, wherever it came: records the RPC result
    /// and, for ECHO and NFS, what the data showed.
    fn finish_reply(
        &self,
        req: &Req<'_>,
        done: &Done,
        regs: &mut Regs,
        xid: u32,
        rec: &mut RpcRecord,
    ) -> Result {
        regs.check(self, done.kind).map_err(|_| EPROTO)?;
        // The RPC reply message as far as it is in memory we can read directly:
        // the Send's RPC part, or the whole Reply chunk.
        let whole: KVVec<u8>;
        let msg: &[u8] = match done.kind {
            ReplyKind::ReplyChunk { written } => {
                whole = regs.read_reply_chunk(written)?;
                &whole
            }
            _ => &done.rpc,
        };
        let r = match decode_reply(msg) {
            Ok(r) if r.xid == xid => r,
            _ => {
                self.count(X::RpcErrors, 1);
                return Err(EPROTO);
            }
        };
        rec.result = status_name(&r.status);
        if r.status != ReplyStatus::Accepted(AcceptStat::Success) {
            if matches!(req.spec, CallSpec::Echo { .. }) {
                rec.verified = Some(false);
            }
            return Ok(());
        }
        let results = &msg[r.results..];
        let moved = match done.kind {
            ReplyKind::WriteList { written } => Some(written),
            _ => None,
        };
        match req.spec {
            CallSpec::Echo { len, .. } => {
                let len = *len;
                let mut x = XdrReader::new(results);
                let ok = match moved {
                    None => x
                        .opaque(len as usize)
                        .is_ok_and(|d| d.len() == len as usize && is_pattern(d, xid, 0)),
                    Some(w) => {
                        let mut same = x.u32() == Ok(len) && w == len;
                        if same {
                            regs.scan_reply(len, &mut |i, d| same &= is_pattern(d, xid, i))?;
                        }
                        same
                    }
                };
                rec.verified = Some(ok);
            }
            CallSpec::Nfs(nfs) => {
                let mut ops = [Op::PutRootFh; 3];
                let k = nfs_ops(nfs, &mut ops);
                let s = decode_compound(results, r.results, &ops[..k], moved.is_some()).map_err(
                    |_| {
                        self.count(X::RpcErrors, 1);
                        EPROTO
                    },
                )?;
                rec.nfs = Some(s);
                if let Some((_, len, at)) = s.read {
                    let mut h = FNV_BASIS;
                    match (at, moved) {
                        (Some(at), _) => {
                            let d = msg.get(at..at + len as usize).ok_or(EPROTO)?;
                            h = fnv1a64(h, d);
                        }
                        (None, Some(w)) if w == len => {
                            regs.scan_reply(len, &mut |_, d| h = fnv1a64(h, d))?;
                        }
                        _ => return Err(EPROTO),
                    }
                    rec.data_fnv = Some(h);
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Waits on the connection's condition variable for at most `left`
    /// jiffies; only a fatal signal interrupts (`EINTR`: the caller is being
    /// killed, so nothing restarts the call).
    fn wait<'a>(
        &'a self,
        g: Guard<'a, ConnInner>,
        left: Jiffies,
    ) -> (Guard<'a, ConnInner>, Result<Jiffies>) {
        let (g, res) = self.cv.wait_timeout(&self.inner, g, left);
        let res = match res {
            Waited::Woken(j) => Ok(j),
            Waited::Timeout => {
                self.count(X::RpcTimeouts, 1);
                Err(ETIMEDOUT)
            }
            Waited::Killed => Err(EINTR),
        };
        (g, res)
    }

    /// Waits for call `xid`'s outcome (a reply, an error reply, or the end
    /// of the connection); `Err` if the wait itself ended first (timeout,
    /// fatal signal).
    fn wait_reply<'a>(
        &'a self,
        mut g: Guard<'a, ConnInner>,
        xid: u32,
        mut left: Jiffies,
    ) -> (
        Guard<'a, ConnInner>,
        core::result::Result<Result<Done>, Error>,
    ) {
        loop {
            if let Some(res) = g.x.slot(xid).and_then(|p| p.result.take()) {
                return (g, Ok(res.map_err(Error::from_errno)));
            }
            let (g2, res) = self.wait(g, left);
            g = g2;
            match res {
                Ok(l) => left = l,
                Err(e) => return (g, Err(e)),
            }
        }
    }

    /// A reply arrived (Receive work): decode its transport header, keep its
    /// RPC part, wake its caller.
    pub(super) fn reply_received(&self, data: &[u8], invalidated: Option<u32>) {
        let outcome = match decode(data, &Limits::DEFAULT) {
            Err((xid, _)) => {
                self.count(X::HeaderErrors, 1);
                xid.map(|x| (x, Err(EPROTO.to_errno()), None))
            }
            Ok(h) => Some((h.xid, self.reply_done(&h, data), Some(h.credits))),
        };
        let Some((xid, result, credits)) = outcome else {
            return;
        };
        let mut g = self.inner.lock();
        let matched = match g.x.slot(xid) {
            Some(p) if p.abandoned => {
                // Its caller gave up: the slot and credit come back now.
                g.x.release(xid);
                self.count(X::RepliesAfterAbandon, 1);
                true
            }
            Some(p) if p.result.is_none() => {
                p.result = Some(result);
                p.invalidated = invalidated;
                self.count(X::RepliesReceived, 1);
                true
            }
            _ => false,
        };
        if !matched {
            self.count(X::RepliesUnmatched, 1);
            return;
        }
        // As xprtrdma: only a reply to a call of ours updates the grant; 0
        // means 1.
        if let Some(c) = credits {
            self.set_credits(c.clamp(1, QP_DEPTH));
        }
        drop(g);
        self.cv.notify_all();
    }

    /// What a reply's transport header says, with a copy of its inline RPC part.
    fn reply_done(&self, h: &Header<'_>, data: &[u8]) -> core::result::Result<Done, i32> {
        let kind = requester::reply_kind(self, h).map_err(|e| match e {
            BadReply::RdmaError => EREMOTEIO.to_errno(),
            BadReply::Header | BadReply::Chunks => EPROTO.to_errno(),
        })?;
        requester::count_kind(self, kind);
        let mut done = Done {
            rpc: KVec::new(),
            reply_len: 0,
            kind,
        };
        if let ReplyKind::ReplyChunk { written } = kind {
            done.reply_len = written;
            return Ok(done);
        }
        let rpc = &data[h.len..];
        if done.rpc.extend_from_slice(rpc, GFP_KERNEL).is_err() {
            return Err(ENOMEM.to_errno());
        }
        done.reply_len = n32(rpc.len());
        if let ReplyKind::WriteList { written } = kind {
            done.reply_len = done.reply_len.saturating_add(written);
        }
        Ok(done)
    }
}

const _: () = assert!(CALL_HEADER_SYS_LEN < HEAD_MAX);
