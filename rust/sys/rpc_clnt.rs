// SPDX-License-Identifier: GPL-2.0

//! A sunrpc client of the NFS program over the kernel's RPC-over-RDMA
//! transport class, for the `ping` command: it times the NULL round trip the
//! way the NFS client's own calls go (rpc_clnt, rpc_task, the transport's
//! rpc_xprt_ops), through whichever module registered the class (`rdma`:
//! ours with `xprt_class=Y`, or Linux's `rpcrdma.ko`). No C half: the
//! program, version and procedure tables are Rust statics in sunrpc's own
//! layouts (bindgen's), and the calls (rpc_create, rpc_call_sync,
//! rpc_shutdown_client) are exported functions.

use core::cell::UnsafeCell;
use core::ffi::c_void;
use core::net::SocketAddr;
use core::ptr::{self, NonNull};
use kernel::ffi::{c_int, c_uint};
use kernel::prelude::*;
use kernel::str::as_char_ptr_in_const_context;

use super::bindings::{
    init_net, rpc_call_sync, rpc_clnt, rpc_create, rpc_create_args, rpc_message, rpc_procinfo,
    rpc_program, rpc_rqst, rpc_shutdown_client, rpc_stat, rpc_version, xdr_stream,
    xprt_transports_XPRT_TRANSPORT_RDMA, RPC_CLNT_CREATE_QUIET, RPC_TASK_SOFT, RPC_TASK_SOFTCONN,
};
use super::rdma_cm::Endpoint;
use crate::proto::ulb::NFS_PROGRAM;

/// The version a `ping` calls NULL of: 4 (every nfsd that serves RDMA has it).
const PING_VERSION: usize = 4;
/// `RPC_AUTH_NULL`.
const RPC_AUTH_NULL: u32 = 0;

/// NULL has no arguments: nothing to encode (sunrpc's `kxdreproc_t`).
///
/// # Safety
///
/// None: the pointers are not used.
unsafe extern "C" fn encode_void(_rqst: *mut rpc_rqst, _xdr: *mut xdr_stream, _obj: *const c_void) {
}

/// NULL has no results: nothing to decode (sunrpc's `kxdrdproc_t`).
///
/// # Safety
///
/// None: the pointers are not used.
unsafe extern "C" fn decode_void(
    _rqst: *mut rpc_rqst,
    _xdr: *mut xdr_stream,
    _obj: *mut c_void,
) -> c_int {
    0
}

/// Storage the kernel writes (per-procedure call counts, the program's
/// `rpc_stat` counters) behind a shared static.
#[repr(transparent)]
struct KernelOwned<T>(UnsafeCell<T>);

// SAFETY: Rust never reads or writes the contents; only sunrpc does, through
// the raw pointers these statics hand it (counters it updates without
// locks, as for every program it runs, e.g. NFS's).
unsafe impl<T> Sync for KernelOwned<T> {}

/// The tables sunrpc reads: const pointers between statics.
#[repr(transparent)]
struct Table<T>(T);

// SAFETY: immutable after link time; the raw pointers inside point to other
// statics of this file.
unsafe impl<T> Sync for Table<T> {}

static NULL_PROC: Table<[rpc_procinfo; 1]> = Table([rpc_procinfo {
    p_proc: 0,
    p_encode: Some(encode_void),
    p_decode: Some(decode_void),
    p_arglen: 0,
    p_replen: 0,
    p_timer: 0,
    p_statidx: 0,
    p_name: as_char_ptr_in_const_context(c"NULL"),
}]);

static COUNTS: KernelOwned<[c_uint; 1]> = KernelOwned(UnsafeCell::new([0]));

static VERSION: Table<rpc_version> = Table(rpc_version {
    number: PING_VERSION as u32,
    nrprocs: 1,
    procs: NULL_PROC.0.as_ptr(),
    counts: ptr::addr_of!(COUNTS).cast_mut().cast(),
});

static VERSIONS: Table<[*const rpc_version; PING_VERSION + 1]> = Table({
    let mut v = [ptr::null(); PING_VERSION + 1];
    v[PING_VERSION] = ptr::addr_of!(VERSION).cast();
    v
});

static STATS: KernelOwned<rpc_stat> = KernelOwned(UnsafeCell::new(
    // SAFETY: rpc_stat is plain counters (and a program pointer sunrpc does
    // not read for a client), for which all zeroes is valid.
    unsafe { core::mem::zeroed() },
));

static PROGRAM: Table<rpc_program> = Table(rpc_program {
    name: as_char_ptr_in_const_context(c"rpcrdma_cm_ping"),
    number: NFS_PROGRAM,
    nrvers: (PING_VERSION + 1) as c_uint,
    version: VERSIONS.0.as_ptr().cast_mut(),
    stats: ptr::addr_of!(STATS).cast_mut().cast(),
    pipe_dir_name: ptr::null(),
});

/// An rpc_clnt of NFS version 4 over the `rdma` transport class, shut down
/// when dropped.
pub(crate) struct RdmaClnt(NonNull<rpc_clnt>);

// SAFETY: an rpc_clnt may be used and shut down from any thread.
unsafe impl Send for RdmaClnt {}

impl RdmaClnt {
    /// Creates the client and its transport (sunrpc connects it and calls
    /// NULL once, as it does for the NFS client's own rpc_create): fails if
    /// no module holds the `rdma` class (-EIO: sunrpc looks transports up by
    /// ident without loading a module), or with the connect or the NULL's
    /// error.
    pub(crate) fn create(to: SocketAddr) -> Result<Self> {
        let mut sa = Endpoint {
            addr: to.ip(),
            port: to.port(),
        }
        .c_sockaddr();
        // SAFETY: init_net is the initial namespace, valid forever; only its
        // address is taken (an unsafe operation before Rust 1.82).
        #[allow(unused_unsafe)]
        let net = unsafe { ptr::addr_of_mut!(init_net) };
        let mut args = rpc_create_args {
            net,
            protocol: xprt_transports_XPRT_TRANSPORT_RDMA as c_int,
            address: sa.as_mut_ptr(),
            addrsize: sa.len(),
            program: ptr::addr_of!(PROGRAM).cast(),
            version: PING_VERSION as u32,
            authflavor: RPC_AUTH_NULL,
            // A ping that times out says so in its result, not in the log.
            flags: RPC_CLNT_CREATE_QUIET as usize,
            // SAFETY: the rest of rpc_create_args is pointers, numbers and
            // flags for which zero means "none" or "the default".
            ..unsafe { core::mem::zeroed() }
        };
        // SAFETY: args and the address it points to live across the call
        // (rpc_create copies the address and does not write args); the
        // program tables are statics.
        let clnt = unsafe { rpc_create(&mut args) };
        let clnt = kernel::error::from_err_ptr(clnt)?;
        NonNull::new(clnt).map(Self).ok_or(ENOMEM)
    }

    /// One NULL call, synchronous, with soft timeouts (an unreachable server
    /// fails it instead of retrying forever).
    pub(crate) fn null(&self) -> Result {
        let msg = rpc_message {
            rpc_proc: NULL_PROC.0.as_ptr(),
            rpc_argp: ptr::null_mut(),
            rpc_resp: ptr::null_mut(),
            rpc_cred: ptr::null(),
        };
        // SAFETY: self.0 is a live client (shut down only in drop); msg
        // lives across the synchronous call.
        let r = unsafe {
            rpc_call_sync(
                self.0.as_ptr(),
                &msg,
                (RPC_TASK_SOFT | RPC_TASK_SOFTCONN) as c_int,
            )
        };
        // A fatal signal ends a sunrpc wait with -ERESTARTSYS: the caller is
        // being killed, as EINTR says for our own calls.
        kernel::error::to_result(r).map_err(|e| if e == ERESTARTSYS { EINTR } else { e })
    }
}

impl Drop for RdmaClnt {
    fn drop(&mut self) {
        // SAFETY: the client is ours and no call is in progress (null() is
        // synchronous and borrows self); this waits for its tasks and frees
        // it.
        unsafe { rpc_shutdown_client(self.0.as_ptr()) };
    }
}
