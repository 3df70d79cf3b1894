// SPDX-License-Identifier: GPL-2.0

//! Module parameters. `module!` on 6.12 has no parameter support, so the
//! parameters are declared with `module_param()` in `helpers.c` and read here.

extern "C" {
    fn rpcrdma_cm_param_selftest() -> bool;
}

/// `selftest`: run the protocol core's vectors at load.
pub(crate) fn selftest() -> bool {
    // SAFETY: a plain C function without arguments that reads a module-lifetime
    // `bool` with READ_ONCE; callable from any context.
    unsafe { rpcrdma_cm_param_selftest() }
}
