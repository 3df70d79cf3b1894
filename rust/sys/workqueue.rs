// SPDX-License-Identifier: GPL-2.0

//! The module's own workqueue (the C half is in `cm.c`) and a periodic tick on
//! it.
//!
//! Work that must finish before the module's code goes away runs here:
//! connection teardown deferred out of CM handlers (see
//! [`CmId`](super::rdma_cm::CmId)), Receive handling and the tick. Dropping
//! the [`ModuleQueue`] waits until no RDMA-CM id of the module is alive, then
//! for every work item, and frees the queue: after that no code of the module
//! runs on behalf of a connection.

use super::bindings::{
    c_fn, rpcrdma_cm_live_wait, rpcrdma_cm_tick_start, rpcrdma_cm_tick_stop, rpcrdma_cm_wq,
    rpcrdma_cm_wq_create, rpcrdma_cm_wq_destroy,
};
use core::ffi::c_void;
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::error::to_result;
use kernel::prelude::*;
use kernel::sync::Arc;
use kernel::workqueue::Queue;

/// Set while the queue exists.
static UP: AtomicBool = AtomicBool::new(false);

/// Owns the module's workqueue: create it first at load, drop it last at
/// unload, after every listener and connection was released.
pub(crate) struct ModuleQueue {
    _private: (),
}

impl ModuleQueue {
    /// Creates the queue; `EBUSY` if it exists already.
    pub(crate) fn new() -> Result<Self> {
        if UP.load(Ordering::Acquire) {
            return Err(EBUSY);
        }
        // SAFETY: a plain C function; the queue is destroyed in Drop only.
        to_result(unsafe { rpcrdma_cm_wq_create() })?;
        UP.store(true, Ordering::Release);
        Ok(ModuleQueue { _private: () })
    }
}

impl Drop for ModuleQueue {
    fn drop(&mut self) {
        // Waiting for the ids first: a CM handler that closed its connection
        // queues the teardown here, and the teardown frees the id;
        // destroy_workqueue() then waits for that work item (and any other).
        // SAFETY: plain C functions, called from process context.
        unsafe { rpcrdma_cm_live_wait() };
        UP.store(false, Ordering::Release);
        // SAFETY: no id is alive, so nothing queues work any more.
        unsafe { rpcrdma_cm_wq_destroy() };
    }
}

/// The module's queue, while it exists.
pub(super) fn queue() -> Option<&'static Queue> {
    if !UP.load(Ordering::Acquire) {
        return None;
    }
    // SAFETY: the queue exists (UP) and is destroyed only by ModuleQueue's
    // Drop, after every id (whose teardown is all that uses this) is gone.
    Some(unsafe { Queue::from_raw(rpcrdma_cm_wq()) })
}

/// Told periodically, on the module's workqueue.
pub(crate) trait Ticker: Send + Sync {
    /// One tick.
    fn tick(&self);
}

/// The C tick is a single static delayed work: one at a time.
static TICKING: AtomicBool = AtomicBool::new(false);

/// While it lives, `ticker` is told every `period_ms` milliseconds.
pub(crate) struct Tick {
    ctx: *mut Arc<dyn Ticker>,
}

// SAFETY: the context is only read by the C work item, and `Arc<dyn Ticker>` is
// `Send + Sync`.
unsafe impl Send for Tick {}
// SAFETY: `&Tick` offers nothing.
unsafe impl Sync for Tick {}

impl Tick {
    /// Starts the tick on the module's queue (which must exist and outlive it).
    pub(crate) fn new(
        _queue: &ModuleQueue,
        ticker: Arc<dyn Ticker>,
        period_ms: u32,
    ) -> Result<Tick> {
        if TICKING.swap(true, Ordering::AcqRel) {
            return Err(EBUSY);
        }
        let ctx = KBox::into_raw(KBox::new(ticker, GFP_KERNEL).inspect_err(|_| {
            TICKING.store(false, Ordering::Release);
        })?);
        // SAFETY: `ctx` stays valid until Drop, which stops the tick (and waits
        // for a running one) before freeing it.
        unsafe { rpcrdma_cm_tick_start(ctx.cast(), period_ms) };
        Ok(Tick { ctx })
    }
}

impl Drop for Tick {
    fn drop(&mut self) {
        // SAFETY: started in `new`; after this returns the tick neither runs
        // nor is queued.
        unsafe { rpcrdma_cm_tick_stop() };
        // SAFETY: nothing refers to the context any more; it came from
        // KBox::into_raw in `new`.
        drop(unsafe { KBox::from_raw(self.ctx) });
        TICKING.store(false, Ordering::Release);
    }
}

/// Called by cm.c's tick work.
#[no_mangle]
extern "C" fn rpcrdma_cm_tick_rs(ctx: *mut c_void) {
    if ctx.is_null() {
        return;
    }
    // SAFETY: a non-null `ctx` is the live context of the running tick
    // (stopping it waits for this call before the context is freed).
    let ticker = unsafe { &*ctx.cast::<Arc<dyn Ticker>>() };
    ticker.tick();
}
c_fn!(rpcrdma_cm_tick_rs);
