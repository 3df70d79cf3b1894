// SPDX-License-Identifier: GPL-2.0

//! Module parameters. `module!`'s parameters (7.3) are integers with no check
//! when set and no write at run time, so the parameters are declared with
//! `module_param*()` in `param.c`, which asks the functions here to check
//! values against the protocol core's rules.

use core::ptr::{addr_of, read_volatile};
use kernel::ffi::c_char;
use kernel::prelude::*;

use super::bindings::{
    c_fn, rpcrdma_cm_param_idle_timeout, rpcrdma_cm_param_legacy, rpcrdma_cm_param_max_connections,
    rpcrdma_cm_param_max_connections_per_peer, rpcrdma_cm_param_recv_size,
    rpcrdma_cm_param_remote_invalidate, rpcrdma_cm_param_selftest, rpcrdma_cm_param_send_size,
    rpcrdma_cm_param_svc_class, rpcrdma_cm_param_xprt_class,
};
use crate::proto::config::{check_size_param, check_svc_class_param};

/// Reads one of param.c's variables as C's `READ_ONCE()` does: a write through
/// sysfs may come at any time, and is one aligned store (`WRITE_ONCE()`, or
/// the kernel's `param_set_bool()`), so the read sees the old or the new value.
macro_rules! read_param {
    ($var:expr) => {
        // SAFETY: the variable is a static of param.c, alive and aligned while the
        // module is loaded; the volatile read of a plain integer or pointer is
        // READ_ONCE(), which is how C reads parameters that change at run time.
        unsafe { read_volatile(addr_of!($var)) }
    };
}

/// `selftest`: run the protocol core's vectors at load.
pub(crate) fn selftest() -> bool {
    read_param!(rpcrdma_cm_param_selftest)
}

/// `send_size`: bytes, already checked by [`check_size_param`].
pub(crate) fn send_size() -> u32 {
    read_param!(rpcrdma_cm_param_send_size)
}

/// `recv_size`: bytes, already checked by [`check_size_param`].
pub(crate) fn recv_size() -> u32 {
    read_param!(rpcrdma_cm_param_recv_size)
}

/// `remote_invalidate`: set R in our private data.
pub(crate) fn remote_invalidate() -> bool {
    read_param!(rpcrdma_cm_param_remote_invalidate)
}

/// `legacy`: send no private data.
pub(crate) fn legacy() -> bool {
    read_param!(rpcrdma_cm_param_legacy)
}

/// A read-only (0444) string parameter: set at load only, so the string lives,
/// unchanged, until the module is unloaded. "" when unset.
fn load_time_str(p: *mut c_char) -> &'static CStr {
    if p.is_null() {
        return kernel::c_str!("");
    }
    // SAFETY: see above: a NUL-terminated string param.c keeps until unload.
    unsafe { CStr::from_char_ptr(p) }
}

/// `listen` (test builds): the endpoints the built-in echo service listens
/// on, as given (checked by `check_listen_param` when set).
#[cfg(CONFIG_RPCRDMA_CM_TEST)]
pub(crate) fn listen() -> &'static str {
    load_time_str(read_param!(super::bindings::rpcrdma_cm_param_listen))
        .to_str()
        .unwrap_or("")
}

/// `svc_class`: the server transport class to register ("" for none).
pub(crate) fn svc_class() -> &'static CStr {
    load_time_str(read_param!(rpcrdma_cm_param_svc_class))
}

/// `xprt_class`: register the client transport class (read at load).
pub(crate) fn xprt_class() -> bool {
    read_param!(rpcrdma_cm_param_xprt_class)
}

/// `max_connections`: server connections at most (1 to 65535).
pub(crate) fn max_connections() -> u32 {
    read_param!(rpcrdma_cm_param_max_connections.value)
}

/// `max_connections_per_peer`: server connections from one address at most.
pub(crate) fn max_connections_per_peer() -> u32 {
    read_param!(rpcrdma_cm_param_max_connections_per_peer.value)
}

/// `idle_timeout`: seconds a server connection may carry nothing (0: forever).
pub(crate) fn idle_timeout() -> u32 {
    read_param!(rpcrdma_cm_param_idle_timeout.value)
}

pub(crate) use hooks::*;

/// The selftests' hooks on live paths, in a module built with
/// `CONFIG_RPCRDMA_CM_TEST=y` (scripts/module): the `test_*` parameters of
/// param.c. A module built without (DKMS) has neither the parameters nor
/// the hooks, which are then no-ops the compiler removes.
#[cfg(CONFIG_RPCRDMA_CM_TEST)]
mod hooks {
    use super::super::bindings::{
        rpcrdma_cm_param_take, rpcrdma_cm_param_test_detach_delay_ms,
        rpcrdma_cm_param_test_listen_delay_ms, rpcrdma_cm_param_test_no_mem_mgt_ext,
        rpcrdma_cm_param_test_svc_reply_nomem, rpcrdma_cm_param_test_teardown_delay_ms,
    };
    use core::ptr::{addr_of, addr_of_mut, read_volatile};
    use kernel::time::{delay::fsleep, Delta};

    /// `test_no_mem_mgt_ext`: treat every device as lacking FRWR and Send
    /// With Invalidate.
    pub(crate) fn test_no_mem_mgt_ext() -> bool {
        read_param!(rpcrdma_cm_param_test_no_mem_mgt_ext)
    }

    /// `test_svc_reply_nomem`: whether this nfsd reply fails for want of
    /// memory (the parameter counts down).
    pub(crate) fn test_svc_reply_nomem() -> bool {
        // SAFETY: a static of param.c, alive while the module is loaded;
        // rpcrdma_cm_param_take() changes it atomically (try_cmpxchg).
        unsafe { rpcrdma_cm_param_take(addr_of_mut!(rpcrdma_cm_param_test_svc_reply_nomem)) }
    }

    /// Sleeps as long as the `test_teardown_delay_ms` parameter says
    /// (selftests widen the window between a handler closing its connection
    /// and the teardown).
    pub(crate) fn test_teardown_delay() {
        sleep_ms(read_param!(rpcrdma_cm_param_test_teardown_delay_ms.value));
    }

    /// Sleeps as long as the `test_listen_delay_ms` parameter says (selftests
    /// widen the window between `rdma_listen()` and recording the listener).
    pub(crate) fn test_listen_delay() {
        sleep_ms(read_param!(rpcrdma_cm_param_test_listen_delay_ms.value));
    }

    /// Sleeps as long as the `test_detach_delay_ms` parameter says (selftests
    /// widen the window between stopping a listener nfsd closed and
    /// forgetting it).
    pub(crate) fn test_detach_delay() {
        sleep_ms(read_param!(rpcrdma_cm_param_test_detach_delay_ms.value));
    }

    /// Sleeps at least `ms` milliseconds (at most 60000, the parameters' limit),
    /// in process context, which is where every delay is taken (CM handlers, the
    /// listener's setup, nfsd's xpo_detach). `fsleep()` is `msleep(ms)` from four
    /// jiffies up (16 ms at HZ=250) and an hrtimer sleep below.
    fn sleep_ms(ms: u32) {
        if ms != 0 {
            fsleep(Delta::from_millis(i64::from(ms)));
        }
    }
}

/// Without `CONFIG_RPCRDMA_CM_TEST`: no hook does anything.
#[cfg(not(CONFIG_RPCRDMA_CM_TEST))]
mod hooks {
    /// Devices are taken as they are.
    #[inline(always)]
    pub(crate) fn test_no_mem_mgt_ext() -> bool {
        false
    }

    /// Replies fail only for real.
    #[inline(always)]
    pub(crate) fn test_svc_reply_nomem() -> bool {
        false
    }

    #[inline(always)]
    pub(crate) fn test_teardown_delay() {}

    #[inline(always)]
    pub(crate) fn test_listen_delay() {}

    #[inline(always)]
    pub(crate) fn test_detach_delay() {}
}

/// A random 32-bit value (`get_random_u32()`): the debugfs caller's first
/// XID (test builds).
#[cfg(CONFIG_RPCRDMA_CM_TEST)]
pub(crate) fn random_u32() -> u32 {
    // SAFETY: get_random_u32() takes no argument and may be called from any context.
    unsafe { kernel::bindings::get_random_u32() }
}

/// Called by param.c before a size parameter takes a value.
///
/// # Safety
///
/// None to uphold: `v` is a plain value (declared `unsafe` like every
/// function C calls, whose declarations bindgen generates).
#[no_mangle]
unsafe extern "C" fn rpcrdma_cm_size_param_ok(v: u32) -> bool {
    check_size_param(v).is_ok()
}
c_fn!(rpcrdma_cm_size_param_ok);

/// Called by param.c before the `listen` parameter takes a value.
///
/// # Safety
///
/// Called only by param.c's setter, with `s` null or the NUL-terminated
/// string the kernel's parameter parser passes, valid for the call.
#[cfg(CONFIG_RPCRDMA_CM_TEST)]
#[no_mangle]
unsafe extern "C" fn rpcrdma_cm_listen_param_ok(s: *const c_char) -> bool {
    if s.is_null() {
        return false;
    }
    // SAFETY: the kernel's parameter parser passes a NUL-terminated string valid
    // for this call.
    let s = unsafe { CStr::from_char_ptr(s) };
    s.to_str()
        .map(crate::proto::config::check_listen_param)
        .unwrap_or(false)
}
#[cfg(CONFIG_RPCRDMA_CM_TEST)]
c_fn!(rpcrdma_cm_listen_param_ok);

/// Called by param.c before the `svc_class` parameter takes a value.
///
/// # Safety
///
/// Called only by param.c's setter, with `s` null or the NUL-terminated
/// string the kernel's parameter parser passes, valid for the call.
#[no_mangle]
unsafe extern "C" fn rpcrdma_cm_svc_class_param_ok(s: *const c_char) -> bool {
    if s.is_null() {
        return false;
    }
    // SAFETY: the kernel's parameter parser passes a NUL-terminated string valid
    // for this call.
    let s = unsafe { CStr::from_char_ptr(s) };
    check_svc_class_param(s.to_bytes())
}
c_fn!(rpcrdma_cm_svc_class_param_ok);
