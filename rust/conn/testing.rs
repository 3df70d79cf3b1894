// SPDX-License-Identifier: GPL-2.0

//! The test harness, off nfsd's data path: the built-in service that our own
//! listener's connections answer (NULL of NFS, and the echo program that
//! selftests and benchmarks call through every chunk type), and the `bench`
//! command of the debugfs RPC caller. nfsd's connections never reach it
//! (`Conn::on_recv` sends their calls to `svc.rs`).

use kernel::alloc::{KVVec, VVec};
use kernel::prelude::*;

use super::responder::{CallIn, Incoming, ReplyRoute};
use super::xprt::{n32, short};
use super::{Conn, State};
use crate::proto::config::CallSpec;
use crate::proto::header::{encode_msg, ErrorBody, MsgSpec};
use crate::proto::rpc::{
    decode_call, echo, encode_accepted, encode_rpc_mismatch, AcceptStat, RpcError,
};
use crate::proto::ulb::NFS_PROGRAM;
use crate::proto::xdr::{XdrReader, XdrWriter};
use crate::stats::XprtCounter as X;
use crate::sys::qp::Qp;
use crate::sys::time::now_ns;
use core::fmt;

impl Conn {
    /// A call on a connection of our own listener (not nfsd's): answered by
    /// the built-in service.
    pub(super) fn builtin_call_received(&self, qp: &Qp, data: &[u8]) {
        let Some(Incoming {
            call,
            nomsg,
            s2c,
            reminv,
        }) = self.decode_call(qp, data)
        else {
            return;
        };
        let chunks = &call.chunks;
        if nomsg
            || chunks.read_segments() != 0
            || chunks.write_chunks() != 0
            || chunks.reply_chunk().is_some()
        {
            if let Err(e) = self.serve_with_chunks(qp, &call, s2c, reminv) {
                self.call_failed(qp, call.xid, call.credits, e);
            }
            return;
        }
        let (xid, credits) = (call.xid, call.credits);
        let rpc = call.inline;
        let res = qp.send(None, |buf| {
            let limit = buf.len().min(s2c as usize);
            let buf = &mut buf[..limit];
            let spec = MsgSpec {
                xid,
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
                self.touch();
                self.count(X::RepliesSent, 1);
                self.count(X::RepliesSentInline, 1);
            }
            Err(e) if e == EMSGSIZE => {
                // The reply does not fit the server-to-client threshold and the
                // call offered no Reply chunk (RFC 8166 Section 4.5.3).
                self.count(X::RepliesTooLarge, 1);
                self.send_error(qp, xid, credits, ErrorBody::Chunk);
            }
            Err(e) => self.send_failed(qp, e),
        }
    }

    /// Serves a call that carries chunks: pulls its Read chunks, runs it, and
    /// returns the reply through the Write list, inline, or in the Reply chunk.
    fn serve_with_chunks(&self, qp: &Qp, call: &CallIn<'_>, s2c: u32, reminv: bool) -> Result {
        let msg = self.assemble_call(qp, call)?;
        let mut out = VVec::with_capacity(msg.len() + 128, GFP_KERNEL)?;
        out.extend_with(msg.len() + 128, 0, GFP_KERNEL)?;
        let (n, ddp) = serve(&mut out, &msg)?;
        let route = ReplyRoute::of(call.xid, call.credits, &call.chunks)?;
        self.send_reply(qp, &route, &out[..n], ddp, s2c, reminv)
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
        Err((None, _)) => return Err(EPROTO),
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

/// The outcome of a `bench` command.
#[derive(Clone, Copy)]
pub(crate) struct BenchResult {
    conn: u32,
    calls: u32,
    ok: u32,
    errors: u32,
    last_errno: i32,
    total_ns: i64,
    min_ns: u64,
    median_ns: u64,
    p99_ns: u64,
    max_ns: u64,
    call: &'static str,
    reply: &'static str,
    /// A signal stopped it before `calls` were made.
    interrupted: bool,
}

/// Nanoseconds as microseconds with one decimal.
struct Usec(u64);

impl core::fmt::Display for Usec {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}.{}", self.0 / 1000, (self.0 % 1000) / 100)
    }
}

impl BenchResult {
    pub(crate) fn show(&self, m: &mut impl core::fmt::Write) -> core::fmt::Result {
        let ops = if self.total_ns > 0 {
            u64::from(self.ok) * 1_000_000_000 / self.total_ns as u64
        } else {
            0
        };
        write!(
            m,
            "conn={} calls={} ok={} errors={} total_usec={} ops_per_sec={} min_usec={} median_usec={} p99_usec={} max_usec={} call={} reply={}",
            self.conn,
            self.calls,
            self.ok,
            self.errors,
            self.total_ns / 1000,
            ops,
            Usec(self.min_ns),
            Usec(self.median_ns),
            Usec(self.p99_ns),
            Usec(self.max_ns),
            self.call,
            self.reply
        )?;
        if self.errors != 0 {
            write!(m, " last_error={}", self.last_errno)?;
        }
        if self.interrupted {
            m.write_str(" interrupted=1")?;
        }
        writeln!(m)
    }
}

/// What `time_calls` measured.
struct Timed {
    /// Latencies of the calls that succeeded, sorted, in ns.
    lat: KVVec<u64>,
    errors: u32,
    last_errno: i32,
    total_ns: i64,
    interrupted: bool,
}

/// Times `n` calls of `call`, one after the other. A fatal signal (`EINTR`)
/// or a lost connection (`ENOTCONN`) stops it, and so does any error when
/// `stop_on_error`; other errors are counted.
fn time_calls(n: u32, stop_on_error: bool, mut call: impl FnMut() -> Result) -> Result<Timed> {
    let mut lat: KVVec<u64> = KVVec::with_capacity(n as usize, GFP_KERNEL)?;
    let (mut errors, mut last_errno) = (0u32, 0i32);
    let mut interrupted = false;
    let start = now_ns();
    for _ in 0..n {
        let t = now_ns();
        match call() {
            Ok(()) => lat.push((now_ns() - t) as u64, GFP_KERNEL)?,
            Err(e) => {
                errors += 1;
                last_errno = e.to_errno();
                if e == EINTR {
                    interrupted = true;
                    break;
                }
                if e == ENOTCONN || stop_on_error {
                    break;
                }
            }
        }
    }
    let total_ns = now_ns() - start;
    crate::proto::sort::sort_by_key(&mut lat, |x| *x);
    Ok(Timed {
        lat,
        errors,
        last_errno,
        total_ns,
        interrupted,
    })
}

impl BenchResult {
    /// The statistics of `n` timed calls (`time_calls`).
    fn new(conn: u32, n: u32, t: Timed, (call, reply): (&'static str, &'static str)) -> Self {
        let lat = &t.lat;
        let at = |q: usize| {
            lat.get((lat.len().saturating_sub(1)) * q / 100)
                .copied()
                .unwrap_or(0)
        };
        BenchResult {
            conn,
            calls: n,
            ok: n32(lat.len()),
            errors: t.errors,
            last_errno: t.last_errno,
            total_ns: t.total_ns,
            min_ns: at(0),
            median_ns: at(50),
            p99_ns: at(99),
            max_ns: at(100),
            call,
            reply,
            interrupted: t.interrupted,
        }
    }

    /// `ping ADDR PORT N`: N NULL calls of NFS version 4 through sunrpc over
    /// the kernel's `rdma` transport class (ours or Linux's xprtrdma),
    /// timed as `bench` times ours; `conn=0` and `call=sunrpc` in the
    /// result. Fails if the client cannot be created (no such class, or the
    /// server does not answer sunrpc's first NULL). The first failed call
    /// ends the run (a fatal signal as `interrupted=1`).
    pub(crate) fn ping(to: core::net::SocketAddr, n: u32) -> Result<Self> {
        let clnt = crate::sys::rpc_clnt::RdmaClnt::create(to)?;
        // sunrpc's errors are final for a NULL (a soft timeout after 60 s,
        // a refused reconnect): the first one ends the run.
        let t = time_calls(n, true, || clnt.null())?;
        Ok(Self::new(0, n, t, ("sunrpc", "sunrpc")))
    }
}

impl Conn {
    /// `bench ID N ...`: N calls one after the other; latency statistics. A
    /// signal stops it (the interrupted call stays counted against the
    /// server's credits until its reply comes).
    pub(crate) fn bench(&self, n: u32, spec: &CallSpec) -> Result<BenchResult> {
        let t = time_calls(n, false, || self.call(spec))?;
        let path = self.state.rpcs.lock().last_path();
        Ok(BenchResult::new(self.id, n, t, path))
    }
}

/// `bench`: the result of the last `bench` command.
pub(crate) struct BenchFile(pub(crate) kernel::sync::Arc<State>);

impl crate::sys::debugfs::Show for BenchFile {
    fn show(&self, m: &mut crate::sys::debugfs::SeqFile<'_>) -> fmt::Result {
        let last = *self.0.bench.lock();
        match last {
            Some(r) => r.show(m),
            None => Ok(()),
        }
    }
}
