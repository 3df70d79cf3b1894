// SPDX-License-Identifier: GPL-2.0

//! The debugfs files of connections and listeners (`connections`,
//! `listeners`), what we advertise (`params`) and the `control` file.

use super::{advertised, snapshot, testing, Conn, ConnState, State, PVT_KEEP};
use crate::proto::config::{parse_command, Advert, Command};
use crate::proto::pvt_data::Outcome;
use crate::sys::debugfs::{SeqFile, Show};
use crate::sys::param;
use core::fmt::{self, Write};
use kernel::prelude::*;
use kernel::sync::Arc;

fn hex(m: &mut SeqFile<'_>, b: &[u8]) -> fmt::Result {
    if b.is_empty() {
        return m.write_str("-");
    }
    b.iter().try_for_each(|x| write!(m, "{:02x}", x))
}

impl Conn {
    /// One line of `connections`: `key=value` fields separated by spaces.
    fn show_line(&self, m: &mut SeqFile<'_>) -> fmt::Result {
        let g = self.inner.lock();
        write!(
            m,
            "id={} role={} state={}",
            self.id,
            self.role().name(),
            g.state.name()
        )?;
        if let Some(f) = self.upper.for_name() {
            write!(m, " for={}", f)?;
        }
        if let ConnState::Closed(_, e) = g.state {
            if e != 0 {
                write!(m, " error={}", e)?;
            }
        }
        match &g.names {
            Some(n) => write!(
                m,
                " dev={} local={} peer={}",
                n.device(),
                n.local(),
                n.peer()
            )?,
            None => match &g.peer_addr {
                Some(p) => write!(m, " dev=- local=- peer={}", p)?,
                None => m.write_str(" dev=- local=- peer=-")?,
            },
        }
        m.write_str(" sent=")?;
        match &g.ours {
            Some(p) => hex(m, &p.encode())?,
            None => m.write_str("-")?,
        }
        if let Some(d) = g.dev_inv {
            write!(m, " dev_reminv={}", u8::from(d))?;
        }
        // Trailing zero octets are the CM's padding, not the peer's data.
        let kept = &g.peer_pvt[..g.peer_pvt_len.min(PVT_KEEP)];
        let used = kept.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
        write!(m, " peer_pvt_len={} peer_pvt=", g.peer_pvt_len)?;
        hex(m, &kept[..used])?;
        match &g.outcome {
            None => m.write_str(" outcome=-")?,
            Some(o) => {
                write!(m, " outcome={}", o.name())?;
                match o {
                    Outcome::Found { offset, .. }
                    | Outcome::Truncated { offset }
                    | Outcome::UnknownVersion { offset, .. } => write!(m, " offset={}", offset)?,
                    _ => {}
                }
            }
        }
        if let Some(n) = &g.negotiated {
            let p = &n.peer;
            write!(
                m,
                " peer_r={} peer_send={} peer_recv={} c2s={} s2c={} reminv={}",
                u8::from(p.remote_invalidate),
                p.send_size,
                p.recv_size,
                n.c2s,
                n.s2c,
                u8::from(n.remote_invalidation)
            )?;
        }
        writeln!(m, " ord={}", g.ord)
    }
}

/// `connections`: one line per connection.
pub(crate) struct ConnectionsFile(pub(crate) Arc<State>);

impl Show for ConnectionsFile {
    fn show(&self, m: &mut SeqFile<'_>) -> fmt::Result {
        let snapshot = self.0.snapshot().map_err(|_| fmt::Error)?;
        snapshot.iter().try_for_each(|c| c.show_line(m))
    }
}

/// `listeners`: one line per listener.
pub(crate) struct ListenersFile(pub(crate) Arc<State>);

impl Show for ListenersFile {
    fn show(&self, m: &mut SeqFile<'_>) -> fmt::Result {
        let listeners = snapshot(&self.0.listeners).map_err(|_| fmt::Error)?;
        listeners.iter().try_for_each(|l| l.show_line(m))
    }
}

/// `control`: commands written by root; reads show the syntax.
pub(crate) struct ControlFile(pub(crate) Arc<State>);

impl ControlFile {
    /// A run's result, for the `bench` file; a failed run leaves the last.
    fn keep(&self, r: Result<testing::BenchResult>) -> Result {
        *self.0.bench.lock() = Some(r?);
        Ok(())
    }
}

impl Show for ControlFile {
    fn show(&self, m: &mut SeqFile<'_>) -> fmt::Result {
        m.write_str("disconnect ID\nping ADDR PORT N\n")?;
        // The debugfs caller's commands (test builds).
        #[cfg(CONFIG_RPCRDMA_CM_TEST)]
        m.write_str(
            "connect ADDR PORT [send_size=N] [recv_size=N] [remote_invalidate=0|1] [legacy=0|1]\n\
             call ID null\n\
             call ID echo LEN\n\
             call ID rpc PROG VERS PROC\n\
             call ID nfs getattr|read|write|readdir NAME ...\n\
             bench ID N <what call takes after ID>\n",
        )?;
        Ok(())
    }

    fn write(&self, text: &str) -> Result {
        match parse_command(text) {
            Some(Command::Disconnect(id)) => self.0.disconnect(id),
            Some(Command::Ping(to, n)) => self.keep(testing::BenchResult::ping(to, n)),
            #[cfg(CONFIG_RPCRDMA_CM_TEST)]
            Some(Command::Connect(sa, over)) => self.0.connect(sa, &over),
            #[cfg(CONFIG_RPCRDMA_CM_TEST)]
            Some(Command::Call(id, spec)) => self.0.find(id)?.call(&spec),
            #[cfg(CONFIG_RPCRDMA_CM_TEST)]
            Some(Command::Bench(id, n, spec)) => self.keep(self.0.find(id)?.bench(n, &spec)),
            #[cfg(not(CONFIG_RPCRDMA_CM_TEST))]
            Some(Command::Connect(..) | Command::Call(..) | Command::Bench(..)) => {
                pr_warn!(
                    "control: '{}' needs a test build (CONFIG_RPCRDMA_CM_TEST)\n",
                    text.trim()
                );
                Err(EOPNOTSUPP)
            }
            None => {
                pr_warn!("control: unknown command '{}'\n", text.trim());
                Err(EINVAL)
            }
        }
    }
}

/// `params`: what we advertise now, as we would send it on a device that
/// supports remote invalidation, and the limits.
pub(crate) struct ParamsFile;

impl Show for ParamsFile {
    fn show(&self, m: &mut SeqFile<'_>) -> fmt::Result {
        writeln!(m, "send_size {}", param::send_size())?;
        writeln!(m, "recv_size {}", param::recv_size())?;
        writeln!(
            m,
            "remote_invalidate {}",
            u8::from(param::remote_invalidate())
        )?;
        writeln!(m, "legacy {}", u8::from(param::legacy()))?;
        writeln!(m, "max_connections {}", param::max_connections())?;
        writeln!(
            m,
            "max_connections_per_peer {}",
            param::max_connections_per_peer()
        )?;
        writeln!(m, "idle_timeout {}", param::idle_timeout())?;
        m.write_str("private_data ")?;
        match advertised(&Advert::default()) {
            Some(p) => hex(m, &p.encode())?,
            None => m.write_str("-")?,
        }
        writeln!(m)
    }
}
