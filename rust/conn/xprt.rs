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
//! - Responder (server role): a call's Read chunks are pulled with RDMA Read
//!   and the RPC message reassembled; it is dispatched to the small built-in
//!   service (NULL of the NFS program; the echo program). The reply's
//!   DDP-eligible result goes to the call's first Write chunk (RDMA Write); the
//!   rest is sent inline when it fits the server-to-client threshold, which
//!   honours the client's advertised receive size, else into the Reply chunk
//!   (RDMA_NOMSG), else RDMA_ERROR / ERR_CHUNK. With remote invalidation
//!   negotiated (both ends set R) the reply is a Send With Invalidate of one
//!   rkey the call offered. Malformed transport headers get RDMA_ERROR (ERR_VERS
//!   or ERR_CHUNK) as RFC 8166 Section 4.5 says.

use core::fmt::{self, Write};
use kernel::alloc::{KVVec, VVec};
use kernel::prelude::*;
use kernel::time::{msecs_to_jiffies, Ktime};

use super::{Conn, ConnInner, State, QP_DEPTH};
use crate::proto::chunk::{plan, CallPlan, DdpItem, Plan, ReplyPlan, RpcShape};
use crate::proto::config::CallSpec;
use crate::proto::header::{
    decode, encode_error, encode_msg, Body, Chunks, ErrorBody, Header, HeaderShape, Limits,
    MsgSpec, ReadSegment, Segment, RPCRDMA_VERSION,
};
use crate::proto::negotiate::Role;
use crate::proto::rpc::{
    decode_call, decode_reply, echo, encode_accepted, encode_call, encode_rpc_mismatch, AcceptStat,
    ReplyStatus, RpcError, CALL_HEADER_LEN, REPLY_HEADER_LEN,
};
use crate::proto::ulb::NFS_PROGRAM;
use crate::proto::xdr::{xdr_align, XdrReader, XdrWriter};
use crate::stats::XprtCounter as X;
use crate::sys::chunk::Chunk;
use crate::sys::errno::{emsgsize, enotconn, eproto, eremoteio, etimedout};
use crate::sys::rdma_cm::{CmIdRef, Completion, WC_FLUSHED};

/// How long a call waits for its reply (and for a credit).
const CALL_TIMEOUT_MS: u32 = 15_000;
/// Most RPC results kept for the `rpcs` file.
pub(crate) const KEEP_RPCS: usize = 64;
/// Largest segment one FRWR registration covers (for planning): 2 MiB, rxe's
/// 512-page registration limit; each chunk is one segment.
const MAX_SEGMENT: u32 = 2 << 20;
/// The largest call message the responder assembles from chunks.
const MAX_CALL: u32 = echo::MAX_PAYLOAD + 4096;
/// XDR position of the echo payload in an ECHO call (after its length word).
const ECHO_DATA_POS: u32 = (CALL_HEADER_LEN + 4) as u32;
/// Slots for calls in flight: never more than the credits we request.
const SLOTS: usize = QP_DEPTH as usize;

/// How a reply came back.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ReplyKind {
    /// Whole in the Send.
    Inline,
    /// The DDP-eligible result in our Write chunk (`written` octets).
    WriteList { written: u32 },
    /// RDMA_NOMSG: the whole reply in our Reply chunk (`written` octets).
    ReplyChunk { written: u32 },
}

impl ReplyKind {
    fn name(&self) -> &'static str {
        match self {
            ReplyKind::Inline => "inline",
            ReplyKind::WriteList { .. } => "write_list",
            ReplyKind::ReplyChunk { .. } => "reply_chunk",
        }
    }
}

/// What a finished call learnt from its reply's Receive.
#[derive(Clone, Copy)]
struct Done {
    status: ReplyStatus,
    reply_len: u32,
    /// ECHO: the inline part is what was sent (all of it for an inline reply;
    /// the opaque's length for a Write list reply).
    inline_ok: bool,
    kind: ReplyKind,
    /// The rkey the reply invalidated (Send With Invalidate).
    invalidated: Option<u32>,
}

/// The chunks registered for one call.
#[derive(Default)]
struct CallChunks {
    /// Read chunk or Position-Zero Read chunk.
    call: Option<Chunk>,
    /// Write chunk or Reply chunk.
    reply: Option<Chunk>,
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
        CallSpec::Echo { len, ddp } => (
            echo::PROGRAM,
            echo::VERSION,
            if ddp { echo::ECHO } else { echo::ECHO_NODDP },
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

/// Fills `len` octets of `c` at `off` with the echo pattern for `seed`.
fn fill_echo(c: &mut Chunk, off: u32, seed: u32, len: u32) -> Result {
    let mut buf = [0u8; 256];
    let mut i = 0u32;
    while i < len {
        let n = (len - i).min(buf.len() as u32);
        for (k, b) in buf[..n as usize].iter_mut().enumerate() {
            *b = echo::pattern(seed, (i as usize) + k);
        }
        c.write_at(off + i, &buf[..n as usize])?;
        i += n;
    }
    Ok(())
}

/// Whether `len` octets of `c` at `off` are the echo pattern for `seed`.
fn echo_matches(c: &mut Chunk, off: u32, seed: u32, len: u32) -> bool {
    let mut buf = [0u8; 256];
    let mut i = 0u32;
    while i < len {
        let n = (len - i).min(buf.len() as u32);
        if c.read_at(off + i, &mut buf[..n as usize]).is_err() {
            return false;
        }
        let same = buf[..n as usize]
            .iter()
            .enumerate()
            .all(|(k, &b)| b == echo::pattern(seed, (i as usize) + k));
        if !same {
            return false;
        }
        i += n;
    }
    true
}

/// Whether a Reply chunk holding `written` octets carries a successful ECHO
/// reply to `xid` with the `len`-octet payload.
fn reply_chunk_echo_ok(c: &mut Chunk, written: u32, xid: u32, len: u32) -> bool {
    let mut head = [0u8; REPLY_HEADER_LEN + 4];
    if written < head.len() as u32 || c.read_at(0, &mut head).is_err() {
        return false;
    }
    let Ok(r) = decode_reply(&head) else {
        return false;
    };
    let data_at = r.results + 4;
    r.xid == xid
        && r.status == ReplyStatus::Accepted(AcceptStat::Success)
        && data_at == head.len()
        && XdrReader::new(&head[r.results..]).u32() == Ok(len)
        && written >= n32(data_at).saturating_add(len)
        && echo_matches(c, n32(data_at), xid, len)
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
        let (echo_len, ddp) = match spec {
            CallSpec::Echo { len, ddp } => (Some(*len), *ddp),
            _ => (None, false),
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
        let res = self.call_inner(&mut rec, echo_len, ddp);
        rec.usec = (Ktime::ktime_get() - start).to_ns() / 1000;
        if let Err(e) = res {
            rec.errno = e.to_errno();
        }
        self.state.rpcs.lock().push(rec);
        res
    }

    fn call_inner(&self, rec: &mut RpcRecord, echo_len: Option<u32>, ddp: bool) -> Result {
        if self.role != Role::Client {
            return Err(EINVAL);
        }
        let mut g = self.inner.lock();
        let neg = match (&g.cm, &g.negotiated, g.state) {
            (Some(_), Some(n), "established") => *n,
            _ => return Err(enotconn()),
        };
        let echo_padded = echo_len.map(|len| n32(xdr_align(len as usize).unwrap_or(usize::MAX)));
        let max_reply = n32(REPLY_HEADER_LEN + 8)
            .saturating_add(echo_padded.map_or(0, |p| p.saturating_add(4)));
        // The echo payload is DDP-eligible both ways, like NFS WRITE and READ data:
        // a Read chunk at its XDR position, a Write chunk for the result.
        let shape = RpcShape {
            call_len: rec.call_len,
            call_ddp: echo_len.filter(|_| ddp).map(|len| DdpItem {
                position: ECHO_DATA_POS,
                len,
            }),
            max_reply_len: max_reply,
            reply_ddp_len: echo_len.filter(|_| ddp),
        };
        let p = plan(neg.c2s, neg.s2c, &shape, MAX_SEGMENT).map_err(|_| emsgsize())?;
        rec.call = call_plan_name(&p.call);
        rec.reply = reply_plan_name(&p.reply);
        let one_segment = |s: u32| if s == 1 { Ok(()) } else { Err(emsgsize()) };
        match p.call {
            CallPlan::Inline => {}
            CallPlan::ReadChunk { segments, .. } | CallPlan::PositionZero { segments, .. } => {
                one_segment(segments)?
            }
        }
        match p.reply {
            ReplyPlan::Inline => {}
            ReplyPlan::WriteList { segments, .. } | ReplyPlan::ReplyChunk { segments, .. } => {
                one_segment(segments)?
            }
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

        let mut chunks = CallChunks::default();
        let result = self
            .send_call(&g, rec, xid, &p, echo_len, &mut chunks)
            .and_then(|()| self.wait_reply(&mut g, xid, left));
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

        // Verify what landed in our chunks, then release them: the reply's
        // Send With Invalidate (if any) spares one LOCAL_INV.
        let verified = match &result {
            Ok(done) => self.finish_reply(done, &mut chunks, xid, echo_len),
            Err(_) => None,
        };
        self.release_chunks(chunks, result.as_ref().ok().and_then(|d| d.invalidated));

        let done = result?;
        rec.reply = done.kind.name();
        rec.reply_len = done.reply_len;
        rec.result = status_name(&done.status);
        rec.verified = verified;
        if verified == Some(false) {
            return Err(EIO);
        }
        Ok(())
    }

    /// Registers the chunks `p` asks for and sends the call.
    fn send_call(
        &self,
        g: &ConnInner,
        rec: &RpcRecord,
        xid: u32,
        p: &Plan,
        echo_len: Option<u32>,
        chunks: &mut CallChunks,
    ) -> Result {
        let cm = g.cm.as_ref().ok_or_else(enotconn)?;
        let id = cm.as_ref();
        let neg = g.negotiated.ok_or_else(enotconn)?;
        let (prog, vers, proc_) = (rec.prog, rec.vers, rec.proc_);
        let seg = |c: &Chunk| -> Result<Segment> {
            let r = c.registration().ok_or(EINVAL)?;
            Ok(Segment {
                handle: r.rkey,
                length: c.len(),
                offset: r.iova,
            })
        };
        let mut reads = [ReadSegment {
            position: 0,
            segment: Segment {
                handle: 0,
                length: 0,
                offset: 0,
            },
        }];
        let mut nreads = 0;
        let mut nomsg = false;
        // How much of the RPC call goes in the Send.
        let mut inline_args = true;
        match p.call {
            CallPlan::Inline => self.count(X::CallsInline, 1),
            CallPlan::ReadChunk { position, len, .. } => {
                let mut c = Chunk::new(&id, len)?;
                fill_echo(&mut c, 0, xid, len)?;
                c.register(false)?;
                reads[0] = ReadSegment {
                    position,
                    segment: seg(&c)?,
                };
                nreads = 1;
                inline_args = false;
                chunks.call = Some(c);
                self.count(X::CallsReadChunk, 1);
            }
            CallPlan::PositionZero { len, .. } => {
                // The whole call message, padded, in the chunk.
                let mut c = Chunk::new(&id, len)?;
                let mut head = [0u8; CALL_HEADER_LEN + 4];
                let n = encode_call(&mut head, xid, prog, vers, proc_).map_err(short)?;
                let mut w = XdrWriter::new(&mut head[n..]);
                if let Some(l) = echo_len {
                    w.u32(l).map_err(short)?;
                }
                let hn = n + w.position();
                c.write_at(0, &head[..hn])?;
                if let Some(l) = echo_len {
                    fill_echo(&mut c, n32(hn), xid, l)?;
                    let pad = len - n32(hn) - l;
                    c.write_at(n32(hn) + l, &[0u8; 3][..pad as usize])?;
                }
                c.register(false)?;
                reads[0] = ReadSegment {
                    position: 0,
                    segment: seg(&c)?,
                };
                nreads = 1;
                nomsg = true;
                chunks.call = Some(c);
                self.count(X::CallsLong, 1);
            }
        }
        let mut wseg = [Segment {
            handle: 0,
            length: 0,
            offset: 0,
        }];
        let mut writes: [&[Segment]; 1] = [&[]];
        let mut nwrites = 0;
        let mut reply = None;
        match p.reply {
            ReplyPlan::Inline => {}
            ReplyPlan::WriteList { len, .. } | ReplyPlan::ReplyChunk { len, .. } => {
                let mut c = Chunk::new(&id, len)?;
                c.register(true)?;
                wseg[0] = seg(&c)?;
                chunks.reply = Some(c);
            }
        }
        match p.reply {
            ReplyPlan::WriteList { .. } => {
                writes[0] = &wseg;
                nwrites = 1;
            }
            ReplyPlan::ReplyChunk { .. } => reply = Some(&wseg[..]),
            ReplyPlan::Inline => {}
        }
        let spec = MsgSpec {
            xid,
            credits: QP_DEPTH,
            nomsg,
            reads: &reads[..nreads],
            writes: &writes[..nwrites],
            reply,
        };
        let mut sent = 0;
        id.send(None, |buf| {
            let limit = buf.len().min(neg.c2s as usize);
            let buf = &mut buf[..limit];
            let h = encode_msg(buf, &spec).map_err(short)?;
            if nomsg {
                sent = h;
                return Ok(h);
            }
            let c = encode_call(&mut buf[h..], xid, prog, vers, proc_).map_err(short)?;
            let mut w = XdrWriter::new(&mut buf[h + c..]);
            if let Some(len) = echo_len {
                if inline_args {
                    put_echo(&mut w, xid, len)?;
                } else {
                    // The data is in the Read chunk; its XDR pad is not sent.
                    w.u32(len).map_err(short)?;
                }
            }
            sent = h + c + w.position();
            Ok(sent)
        })?;
        self.count(X::CallsSent, 1);
        self.count(X::BytesSend, sent as u64);
        Ok(())
    }

    /// Checks what the reply left in our chunks; `None` when there is nothing
    /// to verify (not an ECHO).
    fn finish_reply(
        &self,
        done: &Done,
        chunks: &mut CallChunks,
        xid: u32,
        echo_len: Option<u32>,
    ) -> Option<bool> {
        let len = echo_len?;
        if done.status != ReplyStatus::Accepted(AcceptStat::Success) {
            return Some(false);
        }
        let ok = match done.kind {
            ReplyKind::Inline => done.inline_ok,
            ReplyKind::WriteList { written } => {
                done.inline_ok
                    && written == len
                    && chunks
                        .reply
                        .as_mut()
                        .is_some_and(|c| echo_matches(c, 0, xid, len))
            }
            ReplyKind::ReplyChunk { written } => chunks
                .reply
                .as_mut()
                .is_some_and(|c| reply_chunk_echo_ok(c, written, xid, len)),
        };
        Some(ok)
    }

    /// Releases the call's chunks; `invalidated` is the rkey the reply's Send
    /// With Invalidate invalidated, if any.
    fn release_chunks(&self, chunks: CallChunks, invalidated: Option<u32>) {
        let mut matched = false;
        for mut c in [chunks.call, chunks.reply].into_iter().flatten() {
            if invalidated.is_some() && c.registration().map(|r| r.rkey) == invalidated {
                c.remotely_invalidated();
                matched = true;
            }
            if c.release() {
                self.count(X::LocalInvalidations, 1);
            }
        }
        match (invalidated, matched) {
            (Some(_), true) => self.count(X::RemoteInvalidations, 1),
            // An rkey that is not one of this call's: the peer invalidated
            // something else (RFC 8797 says it must not).
            (Some(_), false) => self.count(X::RemoteInvalidationsUnmatched, 1),
            _ => {}
        }
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
        match self.role {
            Role::Client => self.reply_received(wc.data, wc.invalidated),
            Role::Server => self.call_received(id, wc.data),
        }
    }

    /// A Send completed.
    pub(super) fn on_send_done(&self, wc: &Completion<'_>) {
        if wc.status != 0 && wc.status != WC_FLUSHED {
            self.count(X::SendErrors, 1);
        }
    }

    fn reply_received(&self, data: &[u8], invalidated: Option<u32>) {
        let mut g = self.inner.lock();
        let outcome = match decode(data, &Limits::DEFAULT) {
            Err((xid, _)) => {
                self.count(X::HeaderErrors, 1);
                xid.map(|x| (x, Err(eproto().to_errno())))
            }
            Ok(h) => {
                g.x.credits = h.credits.clamp(1, QP_DEPTH);
                let echo_len = g.x.slot(h.xid).and_then(|p| p.echo_len);
                Some((
                    h.xid,
                    self.decode_reply_msg(&h, data, echo_len, invalidated),
                ))
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

    /// What a reply's transport header and inline part say.
    fn decode_reply_msg(
        &self,
        h: &Header<'_>,
        data: &[u8],
        echo_len: Option<u32>,
        invalidated: Option<u32>,
    ) -> core::result::Result<Done, i32> {
        let chunks = match h.body {
            Body::Error(_) => {
                self.count(X::RdmaErrorReceived, 1);
                return Err(eremoteio().to_errno());
            }
            Body::Msg(c) | Body::NoMsg(c) => c,
        };
        // What the responder wrote: the first Write chunk's echoed lengths, and
        // the Reply chunk's.
        let written = chunks
            .write_list()
            .next()
            .map(|segs| n32(segs.total_len() as usize));
        if let Body::NoMsg(_) = h.body {
            let Some(total) = chunks.reply_chunk().map(|s| s.total_len()) else {
                self.count(X::HeaderErrors, 1);
                return Err(eproto().to_errno());
            };
            self.count(X::RepliesReplyChunk, 1);
            return Ok(Done {
                // Decoded from the chunk by the caller.
                status: ReplyStatus::Accepted(AcceptStat::Success),
                reply_len: n32(total as usize),
                inline_ok: false,
                kind: ReplyKind::ReplyChunk {
                    written: n32(total as usize),
                },
                invalidated,
            });
        }
        let rpc = &data[h.len..];
        let r = match decode_reply(rpc) {
            Ok(r) if r.xid == h.xid => r,
            _ => {
                self.count(X::RpcErrors, 1);
                return Err(eproto().to_errno());
            }
        };
        let results = &rpc[r.results..];
        let (kind, inline_ok, reply_len) = match written.filter(|w| *w > 0) {
            Some(w) => {
                self.count(X::RepliesWriteList, 1);
                // Inline: the opaque's length word only; the data is in the chunk.
                let ok = echo_len
                    .is_some_and(|len| XdrReader::new(results).u32().is_ok_and(|l| l == len));
                (
                    ReplyKind::WriteList { written: w },
                    ok,
                    n32(rpc.len()).saturating_add(w),
                )
            }
            None => {
                self.count(X::RepliesInline, 1);
                let ok = echo_len.is_some_and(|len| check_echo(results, h.xid, len));
                (ReplyKind::Inline, ok, n32(rpc.len()))
            }
        };
        Ok(Done {
            status: r.status,
            reply_len,
            inline_ok,
            kind,
            invalidated,
        })
    }

    fn call_received(&self, id: &CmIdRef<'_>, data: &[u8]) {
        let (s2c, reminv, grant_max) = {
            let g = self.inner.lock();
            match &g.negotiated {
                Some(n) => (n.s2c, n.remote_invalidation, QP_DEPTH),
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
        let (chunks, nomsg) = match h.body {
            Body::Msg(c) => (c, false),
            Body::NoMsg(c) => (c, true),
            Body::Error(_) => {
                self.count(X::RdmaErrorReceived, 1);
                return;
            }
        };
        if nomsg
            || chunks.read_segments() != 0
            || chunks.write_chunks() != 0
            || chunks.reply_chunk().is_some()
        {
            let call = CallIn {
                xid: h.xid,
                credits,
                chunks,
                inline: if nomsg { &[] } else { &data[h.len..] },
            };
            match self.serve_with_chunks(id, &call, s2c, reminv) {
                Ok(()) => {}
                Err(e) if e == enotconn() => {}
                Err(e) if e == EBUSY => self.count(X::SendBusy, 1),
                Err(_) => {
                    // A chunk we could not pull or fill, or a reply that fits
                    // nowhere the requester offered (RFC 8166 Section 4.5).
                    self.count(X::ChunkErrors, 1);
                    self.send_error(id, h.xid, credits, ErrorBody::Chunk);
                }
            }
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
            Ok(hl + serve(&mut buf[hl..], rpc)?.0)
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

    /// Pulls the call's Read chunks (RDMA Read) into the whole RPC message.
    fn assemble_call(&self, id: &CmIdRef<'_>, call: &CallIn<'_>) -> Result<VVec<u8>> {
        let pulled = call
            .chunks
            .read_list()
            .map(|r| u64::from(r.segment.length))
            .fold(0u64, u64::saturating_add);
        let total = pulled.saturating_add(call.inline.len() as u64);
        if total > u64::from(MAX_CALL) {
            return Err(emsgsize());
        }
        let mut msg = VVec::with_capacity(total as usize + 4, GFP_KERNEL)?;
        let mut cursor = 0usize;
        let mut current: Option<u32> = None;
        for rs in call.chunks.read_list() {
            if current != Some(rs.position) {
                // A new chunk: round the previous one up to XDR alignment, then
                // copy the inline part that precedes this one's position.
                pad4(&mut msg)?;
                let need = (rs.position as usize)
                    .checked_sub(msg.len())
                    .ok_or(EINVAL)?;
                let part = call.inline.get(cursor..cursor + need).ok_or(EINVAL)?;
                msg.extend_from_slice(part, GFP_KERNEL)?;
                cursor += need;
                current = Some(rs.position);
            }
            let len = rs.segment.length;
            if len == 0 {
                continue;
            }
            let mut c = Chunk::new(id, len)?;
            c.rdma_read(rs.segment.handle, rs.segment.offset)?;
            self.count(X::BytesRdmaRead, u64::from(len));
            let start = msg.len();
            msg.extend_with(len as usize, 0, GFP_KERNEL)?;
            c.read_at(0, &mut msg[start..])?;
        }
        if current.is_some() {
            pad4(&mut msg)?;
        }
        msg.extend_from_slice(&call.inline[cursor..], GFP_KERNEL)?;
        Ok(msg)
    }

    /// Pushes `data` into the segments of one chunk (RDMA Write); returns the
    /// segments with the lengths written, as the reply echoes them.
    fn push(&self, id: &CmIdRef<'_>, segs: &[Segment], data: &[u8]) -> Result<KVec<Segment>> {
        let total = segs
            .iter()
            .map(|s| u64::from(s.length))
            .fold(0u64, u64::saturating_add);
        if (data.len() as u64) > total {
            return Err(emsgsize());
        }
        let mut out = KVec::with_capacity(segs.len(), GFP_KERNEL)?;
        let mut at = 0usize;
        for s in segs {
            let k = (data.len() - at).min(s.length as usize);
            if k > 0 {
                let mut c = Chunk::new(id, n32(k))?;
                c.write_at(0, &data[at..at + k])?;
                c.rdma_write(s.handle, s.offset)?;
                self.count(X::BytesRdmaWrite, k as u64);
            }
            out.push(
                Segment {
                    length: n32(k),
                    ..*s
                },
                GFP_KERNEL,
            )?;
            at += k;
        }
        Ok(out)
    }

    /// Serves a call that carries chunks: pulls its Read chunks, runs it, and
    /// returns the reply through the Write list, inline, or in the Reply chunk.
    fn serve_with_chunks(
        &self,
        id: &CmIdRef<'_>,
        call: &CallIn<'_>,
        s2c: u32,
        reminv: bool,
    ) -> Result {
        let msg = self.assemble_call(id, call)?;
        let mut out = VVec::with_capacity(msg.len() + 128, GFP_KERNEL)?;
        out.extend_with(msg.len() + 128, 0, GFP_KERNEL)?;
        let (n, ddp) = serve(&mut out, &msg)?;
        let reply = &out[..n];

        // The call's Write chunks and Reply chunk.
        let mut wchunks: KVec<KVec<Segment>> = KVec::new();
        for segs in call.chunks.write_list() {
            let mut v = KVec::new();
            for seg in segs {
                v.push(seg, GFP_KERNEL)?;
            }
            wchunks.push(v, GFP_KERNEL)?;
        }
        let mut rchunk: KVec<Segment> = KVec::new();
        let has_reply_chunk = match call.chunks.reply_chunk() {
            Some(segs) => {
                for seg in segs {
                    rchunk.push(seg, GFP_KERNEL)?;
                }
                true
            }
            None => false,
        };

        // The DDP-eligible result goes to the first Write chunk; the others are
        // echoed unused (length 0).
        let mut written: KVec<KVec<Segment>> = KVec::new();
        let mut rest = KVVec::new();
        let mut used_write = false;
        for (i, w) in wchunks.iter().enumerate() {
            let data: &[u8] = match ddp {
                Some((off, len)) if i == 0 => &reply[off..off + len as usize],
                _ => &[],
            };
            used_write |= !data.is_empty();
            written.push(self.push(id, w, data)?, GFP_KERNEL)?;
        }
        match ddp {
            Some((off, len)) if used_write => {
                let end = off + xdr_align(len as usize).ok_or(EINVAL)?;
                rest.extend_from_slice(&reply[..off], GFP_KERNEL)?;
                rest.extend_from_slice(&reply[end.min(reply.len())..], GFP_KERNEL)?;
            }
            _ => rest.extend_from_slice(reply, GFP_KERNEL)?,
        }
        let mut wrefs: KVec<&[Segment]> = KVec::new();
        for w in written.iter() {
            wrefs.push(&w[..], GFP_KERNEL)?;
        }
        let shape = HeaderShape {
            read_segments: 0,
            write_chunks: n32(written.len()),
            write_segments: n32(written.iter().map(|w| w.len()).sum()),
            reply_segments: None,
        };
        let inline = shape.len().saturating_add(rest.len()) <= s2c as usize;
        let rwritten = if inline {
            None
        } else if has_reply_chunk {
            Some(self.push(id, &rchunk, &rest)?)
        } else {
            self.count(X::RepliesTooLarge, 1);
            return Err(emsgsize());
        };

        // Send With Invalidate only when both ends set R (RFC 8797 Section 4.1),
        // and only of an rkey this call offered: its Write chunk's, else its
        // Reply chunk's, else its Read chunk's (all FRWR-registered by a
        // requester that set R).
        let inv = if reminv {
            wchunks
                .first()
                .and_then(|w| w.first())
                .or(rchunk.first())
                .map(|s| s.handle)
                .or_else(|| call.chunks.read_list().next().map(|r| r.segment.handle))
        } else {
            None
        };
        let spec = MsgSpec {
            xid: call.xid,
            credits: call.credits,
            nomsg: rwritten.is_some(),
            reads: &[],
            writes: &wrefs,
            reply: rwritten.as_deref(),
        };
        let mut sent = 0;
        id.send(inv, |buf| {
            let limit = buf.len().min(s2c as usize);
            let buf = &mut buf[..limit];
            let hl = encode_msg(buf, &spec).map_err(short)?;
            let body: &[u8] = if rwritten.is_some() { &[] } else { &rest };
            buf.get_mut(hl..hl + body.len())
                .ok_or_else(emsgsize)?
                .copy_from_slice(body);
            sent = hl + body.len();
            Ok(sent)
        })?;
        self.count(X::RepliesSent, 1);
        self.count(
            if rwritten.is_some() {
                X::RepliesSentReplyChunk
            } else if used_write {
                X::RepliesSentWriteList
            } else {
                X::RepliesSentInline
            },
            1,
        );
        if inv.is_some() {
            self.count(X::SendWithInvalidate, 1);
        }
        Ok(())
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
/// length and, when it has one, where its DDP-eligible result's data starts and
/// how long it is (without XDR padding). `EMSGSIZE` if it does not fit.
fn serve(out: &mut [u8], call: &[u8]) -> Result<(usize, Option<(usize, u32)>)> {
    let none = |r: core::result::Result<usize, crate::proto::xdr::Short>| {
        r.map(|n| (n, None)).map_err(short)
    };
    let c = match decode_call(call) {
        Ok(c) => c,
        Err((Some(xid), RpcError::RpcVersion(_))) => return none(encode_rpc_mismatch(out, xid)),
        Err((Some(xid), _)) => return none(encode_accepted(out, xid, AcceptStat::GarbageArgs)),
        Err((None, _)) => return Err(eproto()),
    };
    let stat = match (c.prog, c.vers, c.proc_) {
        (NFS_PROGRAM, 3 | 4, 0) => AcceptStat::Success,
        (NFS_PROGRAM, 3 | 4, _) => AcceptStat::ProcUnavail,
        (NFS_PROGRAM, _, _) => AcceptStat::ProgMismatch { low: 3, high: 4 },
        (echo::PROGRAM, echo::VERSION, echo::NULL) => AcceptStat::Success,
        (echo::PROGRAM, echo::VERSION, proc_ @ (echo::ECHO | echo::ECHO_NODDP)) => {
            let mut r = XdrReader::new(&call[c.args..]);
            let Ok(data) = r.opaque(echo::MAX_PAYLOAD as usize) else {
                return none(encode_accepted(out, c.xid, AcceptStat::GarbageArgs));
            };
            let n = encode_accepted(out, c.xid, AcceptStat::Success).map_err(short)?;
            let mut w = XdrWriter::new(&mut out[n..]);
            w.opaque(data).map_err(short)?;
            let ddp = (proc_ == echo::ECHO).then_some((n + 4, n32(data.len())));
            return Ok((n + w.position(), ddp));
        }
        (echo::PROGRAM, echo::VERSION, _) => AcceptStat::ProcUnavail,
        (echo::PROGRAM, _, _) => AcceptStat::ProgMismatch {
            low: echo::VERSION,
            high: echo::VERSION,
        },
        _ => AcceptStat::ProgUnavail,
    };
    none(encode_accepted(out, c.xid, stat))
}

/// Pads `v` with zeros to a multiple of 4 (XDR roundup).
fn pad4(v: &mut VVec<u8>) -> Result {
    let pad = (4 - v.len() % 4) % 4;
    v.extend_from_slice(&[0u8; 3][..pad], GFP_KERNEL)?;
    Ok(())
}

/// A received call that carries chunks.
struct CallIn<'a> {
    xid: u32,
    credits: u32,
    chunks: Chunks<'a>,
    /// The RPC message part in the Send (empty for RDMA_NOMSG).
    inline: &'a [u8],
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
