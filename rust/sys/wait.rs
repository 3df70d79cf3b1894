// SPDX-License-Identifier: GPL-2.0

//! A condition variable whose waits only a fatal signal interrupts
//! (`TASK_KILLABLE`), as sunrpc waits for its RPCs: a caller that takes an
//! ordinary signal (SIGCHLD, a shell's job control) keeps waiting for the
//! reply instead of giving the call up and having the system call restarted
//! as a second RPC. The kernel crate's `CondVar` (7.3) offers uninterruptible,
//! interruptible and freezable waits, not killable ones.

use super::bindings::{rpcrdma_cm_fatal_signal_pending, rpcrdma_cm_init_waitqueue};
use core::marker::PhantomPinned;
use core::ptr;
use kernel::bindings;
use kernel::ffi::c_long;
use kernel::prelude::*;
use kernel::sync::lock::{mutex::MutexBackend, Guard};
use kernel::sync::Mutex;
use kernel::time::Jiffies;
use kernel::types::Opaque;

/// How a wait ended.
pub(crate) enum Waited {
    /// Notified (or spuriously woken) with this many jiffies left.
    Woken(Jiffies),
    /// The time ran out.
    Timeout,
    /// A fatal signal is pending: the task is being killed.
    Killed,
}

/// A wait queue to sleep on with a [`Mutex`] released (see the module
/// documentation).
#[pin_data]
pub(crate) struct KillableCondVar {
    #[pin]
    head: Opaque<bindings::wait_queue_head>,
    #[pin]
    _pin: PhantomPinned,
}

// SAFETY: a `struct wait_queue_head` may be used from any thread; it has its own
// spinlock.
unsafe impl Send for KillableCondVar {}
// SAFETY: as above, concurrent use is what a wait queue is for.
unsafe impl Sync for KillableCondVar {}

impl KillableCondVar {
    /// A new wait queue (all of them share one lockdep class).
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            // SAFETY: `slot` is valid for writes while the closure runs, and
            // pinned: the queue never moves once initialised.
            head <- Opaque::ffi_init(|slot| unsafe { rpcrdma_cm_init_waitqueue(slot) }),
            _pin: PhantomPinned,
        })
    }

    /// Releases `guard` (of `lock`), sleeps until notified, `jiffies` have
    /// passed or a fatal signal comes, and locks `lock` again.
    pub(crate) fn wait_timeout<'a, T>(
        &self,
        lock: &'a Mutex<T>,
        guard: Guard<'a, T, MutexBackend>,
        jiffies: Jiffies,
    ) -> (Guard<'a, T, MutexBackend>, Waited) {
        let timeout = c_long::try_from(jiffies).unwrap_or(c_long::MAX);
        let wait = Opaque::<bindings::wait_queue_entry>::uninit();
        // SAFETY: `wait` points to memory that lives until finish_wait below.
        unsafe { bindings::init_wait(wait.get()) };
        // SAFETY: both point to valid, initialised memory. The task state is
        // set before the lock is released, so a notify that comes between the
        // unlock and the sleep is not lost.
        unsafe {
            bindings::prepare_to_wait_exclusive(
                self.head.get(),
                wait.get(),
                bindings::TASK_KILLABLE as i32,
            )
        };
        drop(guard);
        // SAFETY: sleeps in the state set above; any timeout value is valid.
        let left = unsafe { bindings::schedule_timeout(timeout) };
        // SAFETY: both point to valid memory; `wait` is on the queue or was
        // woken off it.
        unsafe { bindings::finish_wait(self.head.get(), wait.get()) };
        let guard = lock.lock();
        // SAFETY: a plain C function reading the current task's signals.
        let res = if unsafe { rpcrdma_cm_fatal_signal_pending() } {
            Waited::Killed
        } else if left <= 0 {
            Waited::Timeout
        } else {
            Waited::Woken(Jiffies::try_from(left).unwrap_or(0))
        };
        (guard, res)
    }

    /// Wakes every waiter.
    pub(crate) fn notify_all(&self) {
        // SAFETY: the queue head is initialised and lives as long as `self`.
        unsafe { bindings::__wake_up(self.head.get(), bindings::TASK_NORMAL, 0, ptr::null_mut()) };
    }
}
