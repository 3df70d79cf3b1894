// SPDX-License-Identifier: GPL-2.0

//! The factory a registered sunrpc transport class creates its transports
//! with: the server class (`svc.rs`) and the client class (`xprt.rs`) each
//! keep one in a static [`FactorySlot`], filled while the class is
//! registered. C calls the class's create op with no context of ours, so the
//! factory lives in a static; each transport of the class holds a module
//! reference, so none can be created once the class is unregistered and the
//! slot emptied.

use core::ptr::null_mut;
use core::sync::atomic::{AtomicPtr, Ordering};
use kernel::prelude::*;
use kernel::sync::Arc;

/// Holds at most one factory (one boxed `Arc`), as C keeps one class.
pub(crate) struct FactorySlot<T: ?Sized>(AtomicPtr<Arc<T>>);

impl<T: ?Sized> FactorySlot<T> {
    /// An empty slot.
    pub(crate) const fn new() -> Self {
        FactorySlot(AtomicPtr::new(null_mut()))
    }

    /// Puts `factory` in the slot and runs `register` (C's class
    /// registration), emptying the slot again if that fails. `EBUSY` if the
    /// slot is full already.
    pub(crate) fn fill(&self, factory: Arc<T>, register: impl FnOnce() -> Result) -> Result {
        let ctx = KBox::into_raw(KBox::new(factory, GFP_KERNEL)?);
        if self
            .0
            .compare_exchange(null_mut(), ctx, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            // SAFETY: from KBox::into_raw just above, never shared.
            drop(unsafe { KBox::from_raw(ctx) });
            return Err(EBUSY);
        }
        // A failed registration: no create op can have seen the factory.
        register().inspect_err(|_| self.empty())
    }

    /// Empties the slot: call it once the class is unregistered (or never
    /// was), when no create op can run any more.
    pub(crate) fn empty(&self) {
        let ctx = self.0.swap(null_mut(), Ordering::AcqRel);
        if !ctx.is_null() {
            // SAFETY: from KBox::into_raw in `fill`; no op can use it now.
            drop(unsafe { KBox::from_raw(ctx) });
        }
    }

    /// The factory, if the slot is full. The slot is not emptied while a
    /// create op of the registered class runs: the class is unregistered
    /// only after every transport, which holds a module reference, is gone.
    ///
    /// # Safety
    ///
    /// The caller is a create op of the registered class.
    pub(crate) unsafe fn get<'a>(&self) -> Option<&'a Arc<T>> {
        let p = self.0.load(Ordering::Acquire);
        // SAFETY: a full slot's box lives until `empty`, which cannot run
        // while the caller uses it (see above).
        (!p.is_null()).then(|| unsafe { &*p })
    }
}
