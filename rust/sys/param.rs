// SPDX-License-Identifier: GPL-2.0

//! Module parameters. `module!` on 6.12 has no parameter support, so the
//! parameters are declared with `module_param*()` in `helpers.c`, which asks the
//! functions here to check values against the protocol core's rules.

use kernel::ffi::c_char;
use kernel::prelude::*;

use crate::proto::config::{check_listen_param, check_size_param};

extern "C" {
    fn rpcrdma_cm_param_selftest() -> bool;
    fn rpcrdma_cm_param_send_size() -> u32;
    fn rpcrdma_cm_param_recv_size() -> u32;
    fn rpcrdma_cm_param_remote_invalidate() -> bool;
    fn rpcrdma_cm_param_legacy() -> bool;
    fn rpcrdma_cm_param_listen() -> *const c_char;
}

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

/// Called by helpers.c before a size parameter takes a value.
#[no_mangle]
extern "C" fn rpcrdma_cm_size_param_ok(v: u32) -> bool {
    check_size_param(v).is_ok()
}

/// Called by helpers.c before the `listen` parameter takes a value.
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
