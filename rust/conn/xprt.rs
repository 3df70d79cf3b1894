// SPDX-License-Identifier: GPL-2.0

//! RPC-over-RDMA version 1 messaging on an established connection (RFC 8166),
//! sized by what the connection negotiated (RFC 8797).
//!
//! - Requester (client role): [`Conn::call`] plans each RPC with the protocol
//!   core ([`plan`]) for the negotiated client-to-server and server-to-client
//!   thresholds, sends it, and waits for the reply under the server's credit
//!   grant. Replies are matched by XID in the Receive completion handler.
//! - Responder (server role): each Receive is decoded, the RPC dispatched to the
//!   small built-in service (NULL of the NFS program; the echo program), and the
//!   reply sent inline when it fits the server-to-client threshold, which
//!   honours the client's advertised receive size. Malformed transport headers
//!   get RDMA_ERROR (ERR_VERS or ERR_CHUNK) as RFC 8166 Section 4.5 says.
//!
//! Chunks (RDMA Read and Write with FRWR registration) are not implemented yet:
//! an RPC whose plan needs one fails with `EMSGSIZE` and counts
//! `calls_need_chunks`; a call that carries chunks gets ERR_CHUNK.

use core::fmt::{self, Write};
use kernel::prelude::*;
use kernel::time::{msecs_to_jiffies, Ktime};

use super::{Conn, ConnInner, State, QP_DEPTH};
use crate::proto::chunk::{plan, CallPlan, DdpItem, ReplyPlan, RpcShape};
use crate::proto::config::CallSpec;
use crate::proto::header::{
    decode, encode_error, encode_msg, Body, ErrorBody, Limits, MsgSpec, MIN_MSG_LEN,
    RPCRDMA_VERSION,
};
use crate::proto::negotiate::Role;
use crate::proto::rpc::{
    decode_call, decode_reply, echo, encode_accepted, encode_call, encode_rpc_mismatch, AcceptStat,
    ReplyStatus, RpcError, CALL_HEADER_LEN, REPLY_HEADER_LEN,
};
use crate::proto::ulb::NFS_PROGRAM;
use crate::proto::xdr::{xdr_align, XdrReader, XdrWriter};
use crate::stats::XprtCounter as X;
use crate::sys::errno::{emsgsize, enotconn, eproto, eremoteio, etimedout};
use crate::sys::rdma_cm::{CmIdRef, Completion, WC_FLUSHED};

/// How long a call waits for its reply (and for a credit).
const CALL_TIMEOUT_MS: u32 = 15_000;
/// Most RPC results kept for the `rpcs` file.
pub(crate) const KEEP_RPCS: usize = 64;
/// Largest segment one FRWR registration will cover (for planning).
const MAX_SEGMENT: u32 = 1 << 20;
/// Slots for calls in flight: never more than the credits we request.
const SLOTS: usize = QP_DEPTH as usize;

/// What a finished call learnt.
#[derive(Clone, Copy)]
struct Done {
    status: ReplyStatus,
    reply_len: u32,
    /// For ECHO: whether the returned payload is the one sent.
    verified: Option<bool>,
}

/// A call waiting for its reply.
#[derive(Clone, Copy)]
struct Pending {
    xid: u32,
    /// For ECHO: the payload length, to check the reply.
    echo_len: Option<u32>,
    result: Option<core::result::Result<Done, i32>>,
}

/// Per-connection messaging state, under the connection's mutex.
pub(super) struct XprtState {
    /// Client: credits the server granted (RFC 8166 Section 3.3.1), 1 until the
    /// first reply. Server: the last grant we sent.
    credits: u32,
    outstanding: u32,
    next_xid: u32,
    pending: [Option<Pending>; SLOTS],
}

impl XprtState {
    pub(super) fn new(first_xid: u32) -> Self {
        XprtState {
            credits: 1,
            outstanding: 0,
            next_xid: first_xid,
            pending: [None; SLOTS],
        }
    }

    /// Fails every call in flight with `errno` (the connection is gone).
    pub(super) fn fail_all(&mut self, errno: i32) {
        for p in self.pending.iter_mut().flatten() {
            if p.result.is_none() {
                p.result = Some(Err(errno));
            }
        }
    }

    fn slot(&mut self, xid: u32) -> Option<&mut Pending> {
        self.pending.iter_mut().flatten().find(|p| p.xid == xid)
    }
}

/// One finished (or failed) call, as the `rpcs` file shows it.
#[derive(Clone, Copy)]
pub(crate) struct RpcRecord {
    conn: u32,
    xid: u32,
    prog: u32,
    vers: u32,
    proc_: u32,
    call: &'static str,
    reply: &'static str,
    call_len: u32,
    reply_len: u32,
    result: &'static str,
    errno: i32,
    verified: Option<bool>,
    usec: i64,
}

impl RpcRecord {
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
        writeln!(m, " usec={}", self.usec)
    }
}

/// The last [`KEEP_RPCS`] calls, oldest first once full.
pub(crate) struct RpcLog {
    ring: [Option<RpcRecord>; KEEP_RPCS],
    next: usize,
}

impl RpcLog {
    pub(crate) const fn new() -> Self {
        RpcLog {
            ring: [None; KEEP_RPCS],
            next: 0,
        }
    }

    fn push(&mut self, r: RpcRecord) {
        self.ring[self.next % KEEP_RPCS] = Some(r);
        self.next = self.next.wrapping_add(1);
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

fn status_name(s: &ReplyStatus) -> &'static str {
    match s {
        ReplyStatus::Accepted(a) => a.name(),
        ReplyStatus::Denied(_) => "denied",
    }
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

fn n32(v: usize) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

fn short(_: crate::proto::xdr::Short) -> Error {
    emsgsize()
}

/// The call's program, version, procedure and argument length.
fn call_target(spec: &CallSpec) -> (u32, u32, u32, u32) {
    match *spec {
        CallSpec::NfsNull => (NFS_PROGRAM, 4, 0, 0),
        CallSpec::Echo(len) => (
            echo::PROGRAM,
            echo::VERSION,
            echo::ECHO,
            n32(xdr_align(len as usize).unwrap_or(usize::MAX)).saturating_add(4),
        ),
        CallSpec::Rpc { prog, vers, proc_ } => (prog, vers, proc_, 0),
    }
}

/// Writes the echo payload of `len` octets for `seed` as an XDR opaque.
fn put_echo(w: &mut XdrWriter<'_>, seed: u32, len: u32) -> Result {
    w.u32(len).map_err(short)?;
    let pad = xdr_align(len as usize).ok_or_else(emsgsize)? - len as usize;
    for i in 0..len as usize {
        w.put_bytes(&[echo::pattern(seed, i)]).map_err(short)?;
    }
    w.put_bytes(&[0u8; 3][..pad]).map_err(short)
}

/// Checks an echoed payload against the pattern for `seed`.
fn check_echo(results: &[u8], seed: u32, len: u32) -> bool {
    let mut r = XdrReader::new(results);
    match r.opaque(echo::MAX_PAYLOAD as usize) {
        Ok(data) => {
            data.len() == len as usize
                && data
                    .iter()
                    .enumerate()
                    .all(|(i, &b)| b == echo::pattern(seed, i))
        }
        Err(_) => false,
    }
}

impl Conn {
    /// Counts `n` on this connection and module-wide.
    fn count(&self, c: X, n: u64) {
        self.xs.add(c, n);
        self.state.stats.xprt.add(c, n);
    }

    /// Issues one RPC and waits for its reply. `Ok` means a reply came (whatever
    /// its RPC status, recorded in `rpcs`); an ECHO whose payload came back
    /// different is `EIO`.
    pub(crate) fn call(&self, spec: &CallSpec) -> Result {
        let start = Ktime::ktime_get();
        let (prog, vers, proc_, args_len) = call_target(spec);
        let echo_len = match spec {
            CallSpec::Echo(len) => Some(*len),
            _ => None,
        };
        let mut rec = RpcRecord {
            conn: self.id,
            xid: 0,
            prog,
            vers,
            proc_,
            call: "-",
            reply: "-",
            call_len: n32(CALL_HEADER_LEN).saturating_add(args_len),
            reply_len: 0,
            result: "error",
            errno: 0,
            verified: None,
            usec: 0,
        };
        let res = self.call_inner(&mut rec, echo_len);
        rec.usec = (Ktime::ktime_get() - start).to_ns() / 1000;
        if let Err(e) = res {
            rec.errno = e.to_errno();
        }
        self.state.rpcs.lock().push(rec);
        res
    }

    fn call_inner(&self, rec: &mut RpcRecord, echo_len: Option<u32>) -> Result {
        if self.role != Role::Client {
            return Err(EINVAL);
        }
        let mut g = self.inner.lock();
        let neg = match (&g.cm, &g.negotiated, g.state) {
            (Some(_), Some(n), "established") => *n,
            _ => return Err(enotconn()),
        };
        let max_reply = n32(REPLY_HEADER_LEN + 8).saturating_add(match echo_len {
            Some(len) => n32(xdr_align(len as usize).unwrap_or(usize::MAX)).saturating_add(4),
            None => 0,
        });
        // The echo payload is DDP-eligible both ways, like NFS WRITE and READ data:
        // a Read chunk at its XDR position, a Write chunk for the result.
        let shape = RpcShape {
            call_len: rec.call_len,
            call_ddp: echo_len.map(|len| DdpItem {
                position: n32(CALL_HEADER_LEN + 4),
                len,
            }),
            max_reply_len: max_reply,
            reply_ddp_len: echo_len,
        };
        let p = plan(neg.c2s, neg.s2c, &shape, MAX_SEGMENT).map_err(|_| emsgsize())?;
        rec.call = call_plan_name(&p.call);
        rec.reply = reply_plan_name(&p.reply);
        if p.call != CallPlan::Inline || p.reply != ReplyPlan::Inline {
            self.count(X::CallsNeedChunks, 1);
            return Err(emsgsize());
        }

        // Wait for a credit (RFC 8166 Section 3.3.1).
        let mut left = msecs_to_jiffies(CALL_TIMEOUT_MS);
        while g.x.outstanding >= g.x.credits.min(QP_DEPTH) {
            left = self.wait(&mut g, left)?;
            if g.cm.is_none() {
                return Err(enotconn());
            }
        }
        let xid = g.x.next_xid;
        g.x.next_xid = xid.wrapping_add(1);
        rec.xid = xid;
        let slot = g.x.pending.iter().position(|p| p.is_none()).ok_or(EBUSY)?;
        g.x.pending[slot] = Some(Pending {
            xid,
            echo_len,
            result: None,
        });
        g.x.outstanding += 1;

        let (prog, vers, proc_) = (rec.prog, rec.vers, rec.proc_);
        let sent = g.cm.as_ref().ok_or_else(enotconn).and_then(|cm| {
            cm.as_ref().send(None, |buf| {
                let limit = buf.len().min(neg.c2s as usize);
                let buf = &mut buf[..limit];
                let spec = MsgSpec {
                    xid,
                    credits: QP_DEPTH,
                    nomsg: false,
                    reads: &[],
                    writes: &[],
                    reply: None,
                };
                let h = encode_msg(buf, &spec).map_err(short)?;
                let c = encode_call(&mut buf[h..], xid, prog, vers, proc_).map_err(short)?;
                let mut w = XdrWriter::new(&mut buf[h + c..]);
                if let Some(len) = echo_len {
                    put_echo(&mut w, xid, len)?;
                }
                Ok(h + c + w.position())
            })
        });
        let result = match sent {
            Err(e) => Err(e),
            Ok(()) => {
                self.count(X::CallsSent, 1);
                self.count(X::CallsInline, 1);
                self.count(X::BytesSend, u64::from(rec.call_len) + MIN_MSG_LEN as u64);
                self.wait_reply(&mut g, xid, left)
            }
        };
        // Free the slot and the credit, whatever happened.
        if let Some(p) =
            g.x.pending
                .iter_mut()
                .find(|p| p.is_some_and(|p| p.xid == xid))
        {
            *p = None;
        }
        g.x.outstanding -= 1;
        drop(g);
        self.cv.notify_all();

        let done = result?;
        rec.reply_len = done.reply_len;
        rec.result = status_name(&done.status);
        rec.verified = done.verified;
        if done.verified == Some(false) {
            return Err(EIO);
        }
        Ok(())
    }

    /// Waits on the connection's condition variable for at most `left` jiffies.
    fn wait(
        &self,
        g: &mut kernel::sync::lock::Guard<'_, ConnInner, kernel::sync::lock::mutex::MutexBackend>,
        left: kernel::time::Jiffies,
    ) -> Result<kernel::time::Jiffies> {
        use kernel::sync::CondVarTimeoutResult as W;
        match self.cv.wait_interruptible_timeout(g, left) {
            W::Woken { jiffies } => Ok(jiffies),
            W::Timeout => {
                self.count(X::RpcTimeouts, 1);
                Err(etimedout())
            }
            W::Signal { .. } => Err(EINTR),
        }
    }

    fn wait_reply(
        &self,
        g: &mut kernel::sync::lock::Guard<'_, ConnInner, kernel::sync::lock::mutex::MutexBackend>,
        xid: u32,
        mut left: kernel::time::Jiffies,
    ) -> Result<Done> {
        loop {
            match g.x.slot(xid).and_then(|p| p.result) {
                Some(Ok(d)) => return Ok(d),
                Some(Err(errno)) => return Err(Error::from_errno(errno)),
                None => left = self.wait(g, left)?,
            }
        }
    }

    /// A Receive completed on this connection's QP.
    pub(super) fn on_recv(&self, id: &CmIdRef<'_>, wc: &Completion<'_>) {
        if wc.status != 0 {
            if wc.status != WC_FLUSHED {
                self.count(X::RecvErrors, 1);
            }
            return;
        }
        self.count(X::BytesRecv, wc.data.len() as u64);
        if let Some(_rkey) = wc.invalidated {
            // No chunk of ours is registered yet, so no MR matches the rkey.
            self.count(X::RemoteInvalidations, 1);
        }
        match self.role {
            Role::Client => self.reply_received(wc.data),
            Role::Server => self.call_received(id, wc.data),
        }
    }

    /// A Send completed.
    pub(super) fn on_send_done(&self, wc: &Completion<'_>) {
        if wc.status != 0 && wc.status != WC_FLUSHED {
            self.count(X::SendErrors, 1);
        }
    }

    fn reply_received(&self, data: &[u8]) {
        let mut g = self.inner.lock();
        let outcome = match decode(data, &Limits::DEFAULT) {
            Err((xid, _)) => {
                self.count(X::HeaderErrors, 1);
                xid.map(|x| (x, Err(eproto().to_errno())))
            }
            Ok(h) => {
                g.x.credits = h.credits.clamp(1, QP_DEPTH);
                match h.body {
                    Body::Error(_) => {
                        self.count(X::RdmaErrorReceived, 1);
                        Some((h.xid, Err(eremoteio().to_errno())))
                    }
                    Body::NoMsg(_) => {
                        // We never offer a Reply chunk yet: nothing to read.
                        self.count(X::HeaderErrors, 1);
                        Some((h.xid, Err(eproto().to_errno())))
                    }
                    Body::Msg(_) => {
                        let rpc = &data[h.len..];
                        let echo_len = g.x.slot(h.xid).and_then(|p| p.echo_len);
                        Some((
                            h.xid,
                            match decode_reply(rpc) {
                                Ok(r) if r.xid == h.xid => {
                                    self.count(X::RepliesInline, 1);
                                    let verified = match (echo_len, r.status) {
                                        (Some(len), ReplyStatus::Accepted(AcceptStat::Success)) => {
                                            Some(check_echo(&rpc[r.results..], h.xid, len))
                                        }
                                        (Some(_), _) => Some(false),
                                        (None, _) => None,
                                    };
                                    Ok(Done {
                                        status: r.status,
                                        reply_len: n32(rpc.len()),
                                        verified,
                                    })
                                }
                                _ => {
                                    self.count(X::RpcErrors, 1);
                                    Err(eproto().to_errno())
                                }
                            },
                        ))
                    }
                }
            }
        };
        let Some((xid, result)) = outcome else { return };
        match g.x.slot(xid) {
            Some(p) if p.result.is_none() => {
                p.result = Some(result);
                self.count(X::RepliesReceived, 1);
                drop(g);
                self.cv.notify_all();
            }
            _ => self.count(X::RepliesUnmatched, 1),
        }
    }

    fn call_received(&self, id: &CmIdRef<'_>, data: &[u8]) {
        let (s2c, grant_max) = {
            let g = self.inner.lock();
            match &g.negotiated {
                Some(n) => (n.s2c, QP_DEPTH),
                None => return,
            }
        };
        self.count(X::CallsReceived, 1);
        let h = match decode(data, &Limits::DEFAULT) {
            Ok(h) => h,
            Err((xid, e)) => {
                self.count(X::HeaderErrors, 1);
                let (Some(code), Some(xid)) = (e.reply_code(), xid) else {
                    return;
                };
                let body = if code == crate::proto::header::ERR_VERS {
                    ErrorBody::Vers {
                        low: RPCRDMA_VERSION,
                        high: RPCRDMA_VERSION,
                    }
                } else {
                    ErrorBody::Chunk
                };
                self.send_error(id, xid, 1, body);
                return;
            }
        };
        let credits = h.credits.clamp(1, grant_max);
        self.inner.lock().x.credits = credits;
        let chunks = match h.body {
            Body::Msg(c) => c,
            Body::NoMsg(_) => {
                // A long call: its message is in a Read chunk we cannot pull yet.
                self.send_error(id, h.xid, credits, ErrorBody::Chunk);
                return;
            }
            Body::Error(_) => {
                self.count(X::RdmaErrorReceived, 1);
                return;
            }
        };
        if chunks.read_segments() != 0
            || chunks.write_chunks() != 0
            || chunks.reply_chunk().is_some()
        {
            self.send_error(id, h.xid, credits, ErrorBody::Chunk);
            return;
        }
        let rpc = &data[h.len..];
        let res = id.send(None, |buf| {
            let limit = buf.len().min(s2c as usize);
            let buf = &mut buf[..limit];
            let spec = MsgSpec {
                xid: h.xid,
                credits,
                nomsg: false,
                reads: &[],
                writes: &[],
                reply: None,
            };
            let hl = encode_msg(buf, &spec).map_err(short)?;
            Ok(hl + serve(&mut buf[hl..], rpc)?)
        });
        match res {
            Ok(()) => {
                self.count(X::RepliesSent, 1);
                self.count(X::RepliesSentInline, 1);
            }
            Err(e) if e == emsgsize() => {
                // The reply does not fit the server-to-client threshold and the
                // call offered no Reply chunk (RFC 8166 Section 4.5.3).
                self.count(X::RepliesTooLarge, 1);
                self.send_error(id, h.xid, credits, ErrorBody::Chunk);
            }
            Err(e) => self.send_failed(e),
        }
    }

    fn send_failed(&self, e: Error) {
        if e == EBUSY {
            self.count(X::SendBusy, 1);
        } else {
            self.count(X::SendErrors, 1);
        }
    }

    fn send_error(&self, id: &CmIdRef<'_>, xid: u32, credits: u32, body: ErrorBody) {
        match id.send(None, |buf| {
            encode_error(buf, xid, credits, body).map_err(short)
        }) {
            Ok(()) => self.count(X::RdmaErrorSent, 1),
            Err(e) => self.send_failed(e),
        }
    }
}

/// The built-in service: writes the RPC reply to `call` into `out`; returns its
/// length, or `EMSGSIZE` if it does not fit.
fn serve(out: &mut [u8], call: &[u8]) -> Result<usize> {
    let c = match decode_call(call) {
        Ok(c) => c,
        Err((Some(xid), RpcError::RpcVersion(_))) => {
            return encode_rpc_mismatch(out, xid).map_err(short)
        }
        Err((Some(xid), _)) => {
            return encode_accepted(out, xid, AcceptStat::GarbageArgs).map_err(short)
        }
        Err((None, _)) => return Err(eproto()),
    };
    let stat = match (c.prog, c.vers, c.proc_) {
        (NFS_PROGRAM, 3 | 4, 0) => AcceptStat::Success,
        (NFS_PROGRAM, 3 | 4, _) => AcceptStat::ProcUnavail,
        (NFS_PROGRAM, _, _) => AcceptStat::ProgMismatch { low: 3, high: 4 },
        (echo::PROGRAM, echo::VERSION, echo::NULL) => AcceptStat::Success,
        (echo::PROGRAM, echo::VERSION, echo::ECHO) => {
            let mut r = XdrReader::new(&call[c.args..]);
            let Ok(data) = r.opaque(echo::MAX_PAYLOAD as usize) else {
                return encode_accepted(out, c.xid, AcceptStat::GarbageArgs).map_err(short);
            };
            let n = encode_accepted(out, c.xid, AcceptStat::Success).map_err(short)?;
            let mut w = XdrWriter::new(&mut out[n..]);
            w.opaque(data).map_err(short)?;
            return Ok(n + w.position());
        }
        (echo::PROGRAM, echo::VERSION, _) => AcceptStat::ProcUnavail,
        (echo::PROGRAM, _, _) => AcceptStat::ProgMismatch {
            low: echo::VERSION,
            high: echo::VERSION,
        },
        _ => AcceptStat::ProgUnavail,
    };
    encode_accepted(out, c.xid, stat).map_err(short)
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
            let credits = c.inner.lock().x.credits;
            write!(m, "id={} role={} credits={}", c.id, c.role.name(), credits)?;
            c.xs.show_nonzero(m)?;
            writeln!(m)?;
        }
        Ok(())
    }
}
