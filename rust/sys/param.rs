// SPDX-License-Identifier: GPL-2.0

//! Module parameters. `module!` on 6.12 has no parameter support, so the
//! parameters are declared with `module_param*()` in `param.c`, which asks the
//! functions here to check values against the protocol core's rules.

use kernel::ffi::c_char;
use kernel::prelude::*;

use super::bindings::{
    c_fn, rpcrdma_cm_msleep, rpcrdma_cm_param_idle_timeout, rpcrdma_cm_param_legacy,
    rpcrdma_cm_param_listen, rpcrdma_cm_param_max_connections,
    rpcrdma_cm_param_max_connections_per_peer, rpcrdma_cm_param_recv_size,
    rpcrdma_cm_param_remote_invalidate, rpcrdma_cm_param_selftest, rpcrdma_cm_param_send_size,
    rpcrdma_cm_param_svc_class, rpcrdma_cm_param_test_listen_delay_ms,
    rpcrdma_cm_param_test_teardown_delay_ms, rpcrdma_cm_random_u32,
};
use crate::proto::config::{check_listen_param, check_size_param};

/// `selftest`: run the protocol core's vectors at load.
pub(crate) fn selftest() -> bool {
    // SAFETY: a plain C function without arguments that reads a module-lifetime
    // variable with READ_ONCE; callable from any context. Likewise below.
    unsafe { rpcrdma_cm_param_selftest() }
}

/// `send_size`: bytes, already checked by [`check_size_param`].
pub(crate) fn send_size() -> u32 {
    // SAFETY: as in `selftest`.
    unsafe { rpcrdma_cm_param_send_size() }
}

/// `recv_size`: bytes, already checked by [`check_size_param`].
pub(crate) fn recv_size() -> u32 {
    // SAFETY: as in `selftest`.
    unsafe { rpcrdma_cm_param_recv_size() }
}

/// `remote_invalidate`: set R in our private data.
pub(crate) fn remote_invalidate() -> bool {
    // SAFETY: as in `selftest`.
    unsafe { rpcrdma_cm_param_remote_invalidate() }
}

/// `legacy`: send no private data.
pub(crate) fn legacy() -> bool {
    // SAFETY: as in `selftest`.
    unsafe { rpcrdma_cm_param_legacy() }
}

/// `listen`: the endpoints to listen on, as given (checked by
/// [`check_listen_param`] when set).
pub(crate) fn listen() -> &'static str {
    // SAFETY: the parameter is read-only after load (0444), so the string C returns
    // is NUL-terminated and lives, unchanged, until the module is unloaded.
    let s = unsafe { CStr::from_char_ptr(rpcrdma_cm_param_listen()) };
    s.to_str().unwrap_or("")
}

/// `max_connections`: server connections at most (1 to 65535).
pub(crate) fn max_connections() -> u32 {
    // SAFETY: as in `selftest`.
    unsafe { rpcrdma_cm_param_max_connections() }
}

/// `max_connections_per_peer`: server connections from one address at most.
pub(crate) fn max_connections_per_peer() -> u32 {
    // SAFETY: as in `selftest`.
    unsafe { rpcrdma_cm_param_max_connections_per_peer() }
}

/// `idle_timeout`: seconds a server connection may carry nothing (0: forever).
pub(crate) fn idle_timeout() -> u32 {
    // SAFETY: as in `selftest`.
    unsafe { rpcrdma_cm_param_idle_timeout() }
}

/// Sleeps as long as the `test_teardown_delay_ms` parameter says (selftests
/// widen the window between a handler closing its connection and the teardown).
pub(crate) fn test_teardown_delay() {
    // SAFETY: as in `selftest`.
    let ms = unsafe { rpcrdma_cm_param_test_teardown_delay_ms() };
    if ms != 0 {
        // SAFETY: a plain C function; callers run in process context.
        unsafe { rpcrdma_cm_msleep(ms) };
    }
}

/// Sleeps as long as the `test_listen_delay_ms` parameter says (selftests widen
/// the window between `rdma_listen()` and recording the listener).
pub(crate) fn test_listen_delay() {
    // SAFETY: as in `selftest`.
    let ms = unsafe { rpcrdma_cm_param_test_listen_delay_ms() };
    if ms != 0 {
        // SAFETY: a plain C function; callers run in process context.
        unsafe { rpcrdma_cm_msleep(ms) };
    }
}

/// A random 32-bit value (`get_random_u32()`).
pub(crate) fn random_u32() -> u32 {
    // SAFETY: a plain C function, callable from any context.
    unsafe { rpcrdma_cm_random_u32() }
}

/// `svc_class`: the server transport class to register ("" for none).
pub(crate) fn svc_class() -> &'static CStr {
    // SAFETY: the parameter is read-only after load (0444), so the string C
    // returns is NUL-terminated and lives, unchanged, until unload.
    unsafe { CStr::from_char_ptr(rpcrdma_cm_param_svc_class()) }
}

/// Called by param.c before a size parameter takes a value.
#[no_mangle]
extern "C" fn rpcrdma_cm_size_param_ok(v: u32) -> bool {
    check_size_param(v).is_ok()
}
c_fn!(rpcrdma_cm_size_param_ok);

/// Called by param.c before the `listen` parameter takes a value.
#[no_mangle]
extern "C" fn rpcrdma_cm_listen_param_ok(s: *const c_char) -> bool {
    if s.is_null() {
        return false;
    }
    // SAFETY: the kernel's parameter parser passes a NUL-terminated string valid
    // for this call.
    let s = unsafe { CStr::from_char_ptr(s) };
    s.to_str().map(check_listen_param).unwrap_or(false)
}
c_fn!(rpcrdma_cm_listen_param_ok);
