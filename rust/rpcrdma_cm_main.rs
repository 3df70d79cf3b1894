// SPDX-License-Identifier: GPL-2.0

//! rpcrdma_cm: RPC-over-RDMA version 1 connection set-up with RFC 8797 CM private
//! data, for NFS-over-RDMA clients and servers.
//!
//! Three layers, each in its own place:
//! - [`proto`]: the protocol core, pure logic without `unsafe` (also a host crate);
//! - [`sys`]: the abstraction layer over C, the only `unsafe` code, with its C
//!   half in the `.c` files beside it;
//! - the module logic in this file and its siblings, in safe Rust.
//!
//! The compiler keeps the rule: the crate denies `unsafe_code` and only
//! [`sys`] allows it.

#![deny(unsafe_code)]

use kernel::c_str;
use kernel::prelude::*;
use kernel::sync::Arc;

mod conn;
pub mod proto;
mod selftest;
mod stats;
#[allow(unsafe_code)]
mod sys;

#[cfg(CONFIG_RPCRDMA_CM_TEST)]
use conn::RpcsFile;
use conn::{BenchFile, ConnectionsFile, ControlFile, ListenersFile, ParamsFile, State, XprtFile};
use stats::Counter;
use sys::debugfs::Dir;

module! {
    type: RpcrdmaCm,
    name: "rpcrdma_cm",
    authors: ["rpcrdma-cm developers"],
    description: "RPC-over-RDMA CM private data (RFC 8797): negotiated inline thresholds and remote invalidation",
    license: "GPL",
}

struct RpcrdmaCm {
    state: Arc<State>,
    debugfs: Option<Dir>,
    watch: Option<sys::ib_client::DeviceWatch>,
    tick: Option<sys::workqueue::Tick>,
    svc: Option<sys::svc::SvcClass>,
    xprt: Option<sys::xprt::XprtClass>,
    /// Dropped last: waits until every connection is torn down.
    queue: Option<sys::workqueue::ModuleQueue>,
}

impl kernel::Module for RpcrdmaCm {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        let queue = sys::workqueue::ModuleQueue::new()?;
        let state = State::new()?;

        if sys::param::selftest() {
            let result = selftest::run();
            state
                .stats
                .set(Counter::SelftestPassed, result.passed.into());
            state
                .stats
                .set(Counter::SelftestFailed, result.failed.into());
            if result.failed != 0 {
                pr_err!(
                    "selftest: {} passed, {} failed: refusing to load\n",
                    result.passed,
                    result.failed
                );
                return Err(EINVAL);
            }
            pr_info!("selftest: {} passed, 0 failed\n", result.passed);
        }

        let mut dir = Dir::new(c_str!("rpcrdma_cm")).inspect_err(|e| {
            pr_err!(
                "cannot create debugfs directory rpcrdma_cm (error {})\n",
                e.to_errno()
            );
        })?;
        dir.file(
            c_str!("stats"),
            Arc::new(StatsFile(state.clone()), GFP_KERNEL)?,
        )?;
        dir.file(c_str!("params"), Arc::new(ParamsFile, GFP_KERNEL)?)?;
        dir.file(
            c_str!("connections"),
            Arc::new(ConnectionsFile(state.clone()), GFP_KERNEL)?,
        )?;
        dir.file(
            c_str!("listeners"),
            Arc::new(ListenersFile(state.clone()), GFP_KERNEL)?,
        )?;
        dir.file(
            c_str!("xprt"),
            Arc::new(XprtFile(state.clone()), GFP_KERNEL)?,
        )?;
        // The debugfs caller's calls (test builds).
        #[cfg(CONFIG_RPCRDMA_CM_TEST)]
        dir.file(
            c_str!("rpcs"),
            Arc::new(RpcsFile(state.clone()), GFP_KERNEL)?,
        )?;
        dir.file(
            c_str!("bench"),
            Arc::new(BenchFile(state.clone()), GFP_KERNEL)?,
        )?;
        dir.rw_file(
            c_str!("control"),
            Arc::new(ControlFile(state.clone()), GFP_KERNEL)?,
        )?;
        let mut module = RpcrdmaCm {
            state,
            debugfs: Some(dir),
            watch: None,
            tick: None,
            svc: None,
            xprt: None,
            queue: Some(queue),
        };
        // On error `module` is dropped: its Drop tears down what was started.
        // The echo service's listeners (`listen`, test builds).
        #[cfg(CONFIG_RPCRDMA_CM_TEST)]
        module.state.start_listeners()?;
        // Listeners whose device goes away listen again when one is added.
        let handler: Arc<dyn sys::ib_client::DeviceHandler> = module.state.clone();
        module.watch = Some(sys::ib_client::DeviceWatch::new(handler)?);
        // Server connections idle for longer than idle_timeout are closed.
        if let Some(q) = &module.queue {
            let ticker: Arc<dyn sys::workqueue::Ticker> = module.state.clone();
            module.tick = Some(sys::workqueue::Tick::new(q, ticker, conn::TICK_MS)?);
        }

        // nfsd can now create listeners of our server class.
        let class = sys::param::svc_class();
        if !class.is_empty() {
            let factory: Arc<dyn sys::svc::SvcFactory> =
                Arc::new(conn::Factory(module.state.clone()), GFP_KERNEL)?;
            match sys::svc::SvcClass::register(class, factory) {
                Ok(c) => module.svc = Some(c),
                Err(e) if e == EEXIST => {
                    pr_err!(
                        "server transport class \"{}\" is registered already (by rpcrdma.ko?): unload it (modprobe -r rpcrdma) or load rpcrdma_cm with svc_class=OTHERNAME\n",
                        class
                    );
                    return Err(e);
                }
                Err(e) => return Err(e),
            }
        }
        // NFS mounts with -o rdma can now use our client class.
        if sys::param::xprt_class() {
            let factory: Arc<dyn sys::xprt::XprtFactory> =
                Arc::new(conn::ClientFactory(module.state.clone()), GFP_KERNEL)?;
            match sys::xprt::XprtClass::register(factory) {
                Ok(c) => module.xprt = Some(c),
                Err(e) if e == EEXIST => {
                    pr_err!(
                        "client transport class \"rdma\" is registered already (by rpcrdma.ko?): unload it (modprobe -r rpcrdma) or load rpcrdma_cm with xprt_class=0\n"
                    );
                    return Err(e);
                }
                Err(e) => return Err(e),
            }
        }
        pr_info!("loaded\n");
        Ok(module)
    }
}

/// `stats`: the module-wide counters.
struct StatsFile(Arc<State>);

impl sys::debugfs::Show for StatsFile {
    fn show(&self, m: &mut sys::debugfs::SeqFile<'_>) -> core::fmt::Result {
        self.0.stats.show(m)
    }
}

impl Drop for RpcrdmaCm {
    fn drop(&mut self) {
        // No more control writes, device news or ticks, then no listeners,
        // then no connections; then wait until every connection's teardown
        // (some deferred out of CM handlers) has finished.
        // No transport of the class exists (each holds a module reference).
        drop(self.svc.take());
        drop(self.xprt.take());
        drop(self.debugfs.take());
        drop(self.watch.take());
        drop(self.tick.take());
        self.state.shutdown();
        drop(self.queue.take());
        pr_info!("unloaded\n");
    }
}
