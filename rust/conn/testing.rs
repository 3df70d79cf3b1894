// SPDX-License-Identifier: GPL-2.0

//! Timed runs and their result in the `bench` file: `ping` (NULL through
//! sunrpc over whichever module holds the `rdma` class, in every build) and,
//! in test builds, the debugfs caller's `bench`.

use kernel::alloc::KVVec;
use kernel::prelude::*;

use super::xprt::n32;
use super::State;
use crate::sys::time::now_ns;
use core::fmt;
#[cfg(CONFIG_RPCRDMA_CM_TEST)]
use {super::Conn, crate::proto::config::CallSpec};

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

#[cfg(CONFIG_RPCRDMA_CM_TEST)]
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
