// SPDX-License-Identifier: GPL-2.0

//! The module's own workqueues and a periodic tick (the C half of the tick is
//! in `cm.c`).
//!
//! Work that must finish before the module's code goes away runs here:
//! connection teardown deferred out of CM handlers (see
//! [`CmId`](super::rdma_cm::CmId)), Receive handling and the tick. Dropping
//! the [`ModuleQueue`] waits until no RDMA-CM id of the module is alive, then
//! for every work item, and frees the queues: after that no code of the
//! module runs on behalf of a connection.
//!
//! Two queues: teardown (and the tick) on one, Receive handling on the
//! other. A teardown waits for its QP's Receive work (`flush_work()`); on one
//! queue a full set of teardowns could wait for Receive work that no worker
//! is left to run. Both are `WQ_MEM_RECLAIM`: they free memory or answer the
//! peer, and must make progress when memory is short (NFS writeback depends
//! on them).

use super::bindings::{
    c_fn, rpcrdma_cm_alloc_wq, rpcrdma_cm_live_wait, rpcrdma_cm_tick_start, rpcrdma_cm_tick_stop,
    workqueue_struct,
};
use core::ffi::c_void;
use core::ptr::{self, NonNull};
use core::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use kernel::bindings::destroy_workqueue;
use kernel::c_str;
use kernel::prelude::*;
use kernel::sync::Arc;
use kernel::workqueue::Queue;

/// The teardown queue and the Receive queue, while the [`ModuleQueue`] lives.
static WQ: AtomicPtr<workqueue_struct> = AtomicPtr::new(ptr::null_mut());
static RECV_WQ: AtomicPtr<workqueue_struct> = AtomicPtr::new(ptr::null_mut());

fn alloc_wq(name: &CStr) -> Result<NonNull<workqueue_struct>> {
    // SAFETY: `name` is NUL-terminated (the C side formats it with "%s"); the
    // queue is freed by `destroy_wq`.
    let wq = unsafe { rpcrdma_cm_alloc_wq(name.as_char_ptr()) };
    NonNull::new(wq).ok_or(ENOMEM)
}

fn destroy_wq(wq: *mut workqueue_struct) {
    if !wq.is_null() {
        // SAFETY: a queue from `alloc_wq` that nothing queues on any more (see
        // ModuleQueue's Drop); destroy_workqueue() waits for the work on it.
        unsafe { destroy_workqueue(wq) };
    }
}

/// Owns the module's workqueue: create it first at load, drop it last at
/// unload, after every listener and connection was released.
pub(crate) struct ModuleQueue {
    _private: (),
}

impl ModuleQueue {
    /// Creates the queues; `EBUSY` if they exist already.
    pub(crate) fn new() -> Result<Self> {
        if !WQ.load(Ordering::Acquire).is_null() {
            return Err(EBUSY);
        }
        let wq = alloc_wq(c_str!("rpcrdma_cm"))?;
        let recv = alloc_wq(c_str!("rpcrdma_cm_recv")).inspect_err(|_| destroy_wq(wq.as_ptr()))?;
        RECV_WQ.store(recv.as_ptr(), Ordering::Release);
        WQ.store(wq.as_ptr(), Ordering::Release);
        Ok(ModuleQueue { _private: () })
    }
}

impl Drop for ModuleQueue {
    fn drop(&mut self) {
        // Waiting for the ids first: a CM handler that closed its connection
        // queues the teardown here, and the teardown frees the id;
        // destroy_workqueue() then waits for that work item (and any other).
        // SAFETY: a plain C function, called from process context.
        unsafe { rpcrdma_cm_live_wait() };
        // No id is alive, so nothing queues work any more: teardown first
        // (every QP torn down has flushed its Receive work), then Receives.
        destroy_wq(WQ.swap(ptr::null_mut(), Ordering::AcqRel));
        destroy_wq(RECV_WQ.swap(ptr::null_mut(), Ordering::AcqRel));
    }
}

/// The module's teardown queue, while it exists.
pub(super) fn queue() -> Option<&'static Queue> {
    let wq = WQ.load(Ordering::Acquire);
    if wq.is_null() {
        return None;
    }
    // SAFETY: the queue exists and is destroyed only by ModuleQueue's Drop,
    // after every id (whose teardown is all that uses this) is gone.
    Some(unsafe { Queue::from_raw(wq) })
}

/// The module's Receive queue, for a new QP (`ENODEV` once it is gone).
pub(super) fn recv_queue() -> Result<*mut workqueue_struct> {
    let wq = RECV_WQ.load(Ordering::Acquire);
    if wq.is_null() {
        return Err(ENODEV);
    }
    Ok(wq)
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
        // for a running one) before freeing it; the queue outlives the tick.
        unsafe { rpcrdma_cm_tick_start(ctx.cast(), period_ms, WQ.load(Ordering::Acquire)) };
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
///
/// # Safety
///
/// Called only by cm.c's tick work, with the `ctx` given to
/// `rpcrdma_cm_tick_start()`, valid until `rpcrdma_cm_tick_stop()` returns.
#[no_mangle]
unsafe extern "C" fn rpcrdma_cm_tick_rs(ctx: *mut c_void) {
    if ctx.is_null() {
        return;
    }
    // SAFETY: a non-null `ctx` is the live context of the running tick
    // (stopping it waits for this call before the context is freed).
    let ticker = unsafe { &*ctx.cast::<Arc<dyn Ticker>>() };
    ticker.tick();
}
c_fn!(rpcrdma_cm_tick_rs);
