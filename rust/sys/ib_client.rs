// SPDX-License-Identifier: GPL-2.0

//! Notice of RDMA devices being added (an IB client, in `ib_client.c`), so that
//! listeners whose device was removed can listen again when one comes back.

use super::bindings::{c_fn, rpcrdma_cm_client_register, rpcrdma_cm_client_unregister};
use core::ffi::c_void;
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::error::to_result;
use kernel::prelude::*;
use kernel::sync::Arc;

/// Told when an RDMA device was added, in process context.
pub(crate) trait DeviceHandler: Send + Sync {
    /// A device was added (or existed when the watch started).
    fn device_added(&self);
}

/// The C client is a single static object: one watch at a time.
static REGISTERED: AtomicBool = AtomicBool::new(false);

/// While it lives, `handler` hears of every device added.
pub(crate) struct DeviceWatch {
    ctx: *mut Arc<dyn DeviceHandler>,
}

// SAFETY: the context is only read by the C work item, and `Arc<dyn
// DeviceHandler>` is `Send + Sync`.
unsafe impl Send for DeviceWatch {}
// SAFETY: `&DeviceWatch` offers nothing.
unsafe impl Sync for DeviceWatch {}

impl DeviceWatch {
    /// Registers the IB client; `EBUSY` if a watch exists already.
    pub(crate) fn new(handler: Arc<dyn DeviceHandler>) -> Result<DeviceWatch> {
        if REGISTERED.swap(true, Ordering::AcqRel) {
            return Err(EBUSY);
        }
        let ctx = KBox::into_raw(KBox::new(handler, GFP_KERNEL).inspect_err(|_| {
            REGISTERED.store(false, Ordering::Release);
        })?);
        // SAFETY: `ctx` stays valid until Drop, which unregisters (and waits
        // for the work item) before freeing it.
        if let Err(e) = to_result(unsafe { rpcrdma_cm_client_register(ctx.cast()) }) {
            // SAFETY: registration failed, so nothing refers to `ctx`; it came
            // from KBox::into_raw above.
            drop(unsafe { KBox::from_raw(ctx) });
            REGISTERED.store(false, Ordering::Release);
            return Err(e);
        }
        Ok(DeviceWatch { ctx })
    }
}

impl Drop for DeviceWatch {
    fn drop(&mut self) {
        // SAFETY: registered in `new`; after this returns the C side neither
        // runs nor calls rpcrdma_cm_device_added_rs.
        unsafe { rpcrdma_cm_client_unregister() };
        // SAFETY: nothing refers to the context any more; it came from
        // KBox::into_raw in `new`.
        drop(unsafe { KBox::from_raw(self.ctx) });
        REGISTERED.store(false, Ordering::Release);
    }
}

/// Called by ib_client.c's work item after a device was added.
///
/// # Safety
///
/// Called only by ib_client.c, with the context it was registered with,
/// valid until it is unregistered.
#[no_mangle]
unsafe extern "C" fn rpcrdma_cm_device_added_rs(ctx: *mut c_void) {
    if ctx.is_null() {
        return;
    }
    // SAFETY: a non-null `ctx` is the live context of the registered watch
    // (unregistering waits for this work item before the context is freed).
    let handler = unsafe { &*ctx.cast::<Arc<dyn DeviceHandler>>() };
    handler.device_added();
}
c_fn!(rpcrdma_cm_device_added_rs);
