// SPDX-License-Identifier: GPL-2.0

//! The client-side RPC transport class NFS mounts use (C half: `xprt.c`).
//!
//! sunrpc drives each mount's transport (a `struct rpc_xprt`) through its
//! `rpc_xprt_ops`; `xprt.c` keeps the generic parts (congestion window,
//! slots, buffers, rpcbind, the connect worker) and turns the rest into calls
//! on the transport's Rust context ([`XprtOps`]), which the registered
//! [`XprtFactory`] makes when a mount sets a transport up.
//!
//! References: the Rust context lives from setup to destroy. [`RpcXprt`], the
//! context's handle on its C transport, is valid for as long: the context
//! must not use it once [`XprtOps::destroy`] has returned (destroy waits for
//! whoever still does, see `conn/rpc_xprt.rs`).

use core::ffi::c_void;
use core::net::SocketAddr;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicPtr, Ordering};
use kernel::error::to_result;
use kernel::ffi::c_int;
use kernel::prelude::*;
use kernel::sync::Arc;

use super::bindings::{
    c_fn, rpc_rqst, rpcrdma_cm_rqst, rpcrdma_cm_xprt, rpcrdma_cm_xprt_addr,
    rpcrdma_cm_xprt_bc_call, rpcrdma_cm_xprt_complete, rpcrdma_cm_xprt_force_disconnect,
    rpcrdma_cm_xprt_lookup, rpcrdma_cm_xprt_net, rpcrdma_cm_xprt_rcv_buf, rpcrdma_cm_xprt_register,
    rpcrdma_cm_xprt_set_credits, rpcrdma_cm_xprt_stats, rpcrdma_cm_xprt_trim_head,
    rpcrdma_cm_xprt_unregister, write_bytes_to_xdr_buf,
};
use super::errno::emsgsize;
use super::rdma_cm::{sockaddr_from_c, Net};
use super::svc::XdrMsg;

pub(crate) use super::bindings::RPCRDMA_CM_BC_SLOTS as BC_SLOTS;
pub(crate) use super::bindings::RPCRDMA_CM_XPRT_SLOTS as SLOTS;

/// The counters of a mount's `xprt: rdma` line in mountstats (C's struct,
/// printed by `xprt.c` in xprtrdma's column order).
pub(crate) type MountStats = rpcrdma_cm_xprt_stats;

/// Makes the Rust side of the transports mounts set up.
pub(crate) trait XprtFactory: Send + Sync {
    /// A transport to the server at `peer` in `net`, for the C transport `x`.
    fn create(&self, x: RpcXprt, net: Net, peer: SocketAddr) -> Result<Arc<dyn XprtOps>>;
}

/// What sunrpc asks of a mount's transport (process context, may sleep).
pub(crate) trait XprtOps: Send + Sync {
    /// The connect worker: connects and returns 0 once established, else a
    /// negative errno sunrpc understands (it retries after a delay).
    fn connect(&self) -> i32;

    /// close: the connection goes (called with the transport locked).
    fn close(&self);

    /// send_request: sends the call `rq` (transport locked, credit taken):
    /// 0, or `-ENOTCONN` (sunrpc reconnects), `-ENOBUFS` (retried after a
    /// delay), or another negative errno that fails the call.
    fn send(&self, rq: &RpcRqst<'_>) -> i32;

    /// buf_free: the call `xid` is done with; its chunks, if still held, go.
    fn buf_free(&self, xid: u32);

    /// print_stats: the counters mountstats shows.
    fn stats(&self, st: &mut MountStats);

    /// bc_maxpayload: the largest backchannel message (RPC part).
    fn bc_maxpayload(&self) -> u32;

    /// destroy: the transport goes; returns once nothing uses its
    /// [`RpcXprt`] any more.
    fn destroy(&self);
}

/// A call as send_request hands it over.
pub(crate) struct RpcRqst<'a> {
    /// The XID (host order).
    pub(crate) xid: u32,
    /// The RPC Call message.
    pub(crate) msg: XdrMsg<'a>,
    /// Octets the Reply may take.
    pub(crate) rcvsize: u32,
    /// Where the Reply goes (its layout: head, pages, tail).
    pub(crate) rcv: XdrMsg<'a>,
    /// Data may move by RDMA (the security flavour touches none).
    pub(crate) ddp: bool,
    /// The NFS callback service's Reply to a backchannel Call (RFC 8167):
    /// inline, expecting nothing back.
    pub(crate) bc_reply: bool,
}

/// A mount's C transport (see the module documentation for its validity).
#[derive(Clone, Copy)]
pub(crate) struct RpcXprt(NonNull<rpcrdma_cm_xprt>);

// SAFETY: the C functions used on it take sunrpc's locks themselves and may
// run in any process context; validity is the holder's rule (above).
unsafe impl Send for RpcXprt {}
// SAFETY: as above.
unsafe impl Sync for RpcXprt {}

impl RpcXprt {
    /// Pins the call waiting for the Reply `xid`, if any.
    pub(crate) fn lookup(&self, xid: u32) -> Option<PinnedRqst> {
        // SAFETY: a live transport (type rule); C takes the queue lock.
        let r = unsafe { rpcrdma_cm_xprt_lookup(self.0.as_ptr(), xid) };
        NonNull::new(r).map(|rqst| PinnedRqst { x: *self, rqst })
    }

    /// The server granted `credits` (already clamped): the congestion
    /// window becomes that many calls.
    pub(crate) fn set_credits(&self, credits: u32) {
        // SAFETY: a live transport (type rule).
        unsafe { rpcrdma_cm_xprt_set_credits(self.0.as_ptr(), credits) };
    }

    /// A backchannel Call (`msg`, its RPC message) for the NFS client's
    /// callback service. `ENOBUFS` when all [`BC_SLOTS`] are busy.
    pub(crate) fn bc_call(&self, msg: &[u8]) -> Result {
        let len = u32::try_from(msg.len()).map_err(|_| emsgsize())?;
        // SAFETY: a live transport (type rule); C copies `len` octets of `msg`.
        to_result(unsafe { rpcrdma_cm_xprt_bc_call(self.0.as_ptr(), msg.as_ptr(), len) })
    }

    /// The connection is gone: sunrpc closes the transport (our
    /// [`XprtOps::close`]) and connects again when a call needs it.
    pub(crate) fn force_disconnect(&self) {
        // SAFETY: a live transport (type rule).
        unsafe { rpcrdma_cm_xprt_force_disconnect(self.0.as_ptr()) };
    }
}

/// A call pinned while its Reply is placed: sunrpc does not free it until
/// [`PinnedRqst::complete`] (or dropping it, which fails the call with EIO).
pub(crate) struct PinnedRqst {
    x: RpcXprt,
    rqst: NonNull<rpc_rqst>,
}

// SAFETY: a pinned request may be completed from any thread.
unsafe impl Send for PinnedRqst {}

impl PinnedRqst {
    /// Copies `data` into the Reply buffer at `offset` (its head, then its
    /// pages, then its tail, as sunrpc laid them out). `EMSGSIZE` if it does
    /// not fit.
    pub(crate) fn write(&mut self, offset: u32, data: &[u8]) -> Result {
        let len = u32::try_from(data.len()).map_err(|_| emsgsize())?;
        // SAFETY: the request is pinned (so is its rq_private_buf); its task
        // waits for this Reply and nothing else writes the buffer meanwhile.
        let buf = unsafe { rpcrdma_cm_xprt_rcv_buf(self.rqst.as_ptr()) };
        // SAFETY: `buf` is live (above); C only reads `len` octets of `data`.
        let r =
            unsafe { write_bytes_to_xdr_buf(buf, offset, data.as_ptr().cast_mut().cast(), len) };
        if r != 0 {
            return Err(emsgsize());
        }
        Ok(())
    }

    /// The layout of the Reply buffer (its head, pages and tail).
    pub(crate) fn layout(&self) -> XdrMsg<'_> {
        // SAFETY: as in `write`; read while pinned.
        XdrMsg::new(unsafe { &*rpcrdma_cm_xprt_rcv_buf(self.rqst.as_ptr()) })
    }

    /// The Reply's payload came in a Write chunk with only `len` octets of
    /// the Reply before it: the head ends there.
    pub(crate) fn trim_head(&mut self, len: u32) {
        // SAFETY: pinned (see `write`); C changes both receive buffers alike.
        unsafe { rpcrdma_cm_xprt_trim_head(self.rqst.as_ptr(), len) };
    }

    /// Completes the call with `len` octets of Reply, or fails it.
    pub(crate) fn complete(self, res: Result<u32>) {
        let me = core::mem::ManuallyDrop::new(self);
        me.finish(res);
    }

    fn finish(&self, res: Result<u32>) {
        let (len, status) = match res {
            Ok(n) => (n, 0),
            Err(e) => (0, e.to_errno()),
        };
        // SAFETY: pinned by `lookup` on this live transport; completed (and
        // unpinned) exactly once, here.
        unsafe { rpcrdma_cm_xprt_complete(self.x.0.as_ptr(), self.rqst.as_ptr(), len, status) };
    }
}

impl Drop for PinnedRqst {
    fn drop(&mut self) {
        self.finish(Err(EIO));
    }
}

/// The registered class and its factory (one at a time, like C's table).
static FACTORY: AtomicPtr<Arc<dyn XprtFactory>> = AtomicPtr::new(core::ptr::null_mut());

/// While it lives, mounts with `-o rdma` (netids rdma, rdma6) use us.
pub(crate) struct XprtClass {
    _private: (),
}

impl XprtClass {
    /// Registers the client class (ident `XPRT_TRANSPORT_RDMA`). `EEXIST`
    /// if another module has (rpcrdma.ko).
    pub(crate) fn register(factory: Arc<dyn XprtFactory>) -> Result<XprtClass> {
        let ctx = KBox::into_raw(KBox::new(factory, GFP_KERNEL)?);
        if FACTORY
            .compare_exchange(
                core::ptr::null_mut(),
                ctx,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_err()
        {
            // SAFETY: from KBox::into_raw just above, never shared.
            drop(unsafe { KBox::from_raw(ctx) });
            return Err(EBUSY);
        }
        // SAFETY: no argument; C registers its static class.
        if let Err(e) = to_result(unsafe { rpcrdma_cm_xprt_register() }) {
            let ctx = FACTORY.swap(core::ptr::null_mut(), Ordering::AcqRel);
            // SAFETY: registration failed, so no setup can see `ctx`.
            drop(unsafe { KBox::from_raw(ctx) });
            return Err(e);
        }
        Ok(XprtClass { _private: () })
    }
}

impl Drop for XprtClass {
    fn drop(&mut self) {
        // SAFETY: registered in `register`. Every transport of the class
        // holds a module reference, so none exists while the module unloads.
        unsafe { rpcrdma_cm_xprt_unregister() };
        let ctx = FACTORY.swap(core::ptr::null_mut(), Ordering::AcqRel);
        if !ctx.is_null() {
            // SAFETY: from KBox::into_raw in `register`; no setup can use it now.
            drop(unsafe { KBox::from_raw(ctx) });
        }
    }
}

/// The ops of transport `rs` (its context box).
///
/// # Safety
///
/// `rs` comes from `rpcrdma_cm_xprt_create_rs` and was not yet freed.
unsafe fn ops<'a>(rs: *mut c_void) -> &'a Arc<dyn XprtOps> {
    // SAFETY: see above.
    unsafe { &*rs.cast::<Arc<dyn XprtOps>>() }
}

#[no_mangle]
extern "C" fn rpcrdma_cm_xprt_create_rs(x: *mut rpcrdma_cm_xprt, rs: *mut *mut c_void) -> c_int {
    let factory = FACTORY.load(Ordering::Acquire);
    let (Some(x), false) = (NonNull::new(x), factory.is_null()) else {
        return -(kernel::bindings::ENODEV as c_int);
    };
    // SAFETY: the transport being set up: its address is a copy of the
    // mount's, as long as its family says (setup checked the length).
    let Some(peer) = (unsafe { sockaddr_from_c(rpcrdma_cm_xprt_addr(x.as_ptr()).cast()) }) else {
        return -(kernel::bindings::EAFNOSUPPORT as c_int);
    };
    // SAFETY: the transport being set up.
    let net = Net(unsafe { rpcrdma_cm_xprt_net(x.as_ptr()) });
    // SAFETY: the class is registered (setup is its op), so the factory is
    // live until the class is unregistered, which cannot happen while the
    // caller holds the module reference setup took.
    let factory = unsafe { &*factory };
    match factory
        .create(RpcXprt(x), net, peer)
        .and_then(|ops| Ok(KBox::into_raw(KBox::new(ops, GFP_KERNEL)?)))
    {
        Ok(ctx) => {
            // SAFETY: `rs` is C's out pointer for this call.
            unsafe { *rs = ctx.cast() };
            0
        }
        Err(e) => e.to_errno(),
    }
}
c_fn!(rpcrdma_cm_xprt_create_rs);

#[no_mangle]
extern "C" fn rpcrdma_cm_xprt_connect_rs(rs: *mut c_void) -> c_int {
    // SAFETY: a live transport's context (C calls between setup and destroy).
    unsafe { ops(rs) }.connect()
}
c_fn!(rpcrdma_cm_xprt_connect_rs);

#[no_mangle]
extern "C" fn rpcrdma_cm_xprt_close_rs(rs: *mut c_void) {
    // SAFETY: as in rpcrdma_cm_xprt_connect_rs.
    unsafe { ops(rs) }.close()
}
c_fn!(rpcrdma_cm_xprt_close_rs);

#[no_mangle]
extern "C" fn rpcrdma_cm_xprt_send_rs(rs: *mut c_void, rq: *const rpcrdma_cm_rqst) -> c_int {
    // SAFETY: C's description of the request it sends, valid for the call;
    // its rq_snd_buf stays unchanged while it is sent.
    let (rq, buf, rcv) = unsafe { (&*rq, &*(*rq).snd, &*(*rq).rcv) };
    let call = RpcRqst {
        xid: rq.xid,
        msg: XdrMsg::new(buf),
        rcvsize: rq.rcvsize,
        rcv: XdrMsg::new(rcv),
        ddp: rq.ddp,
        bc_reply: rq.bc_reply,
    };
    // SAFETY: as in rpcrdma_cm_xprt_connect_rs.
    unsafe { ops(rs) }.send(&call)
}
c_fn!(rpcrdma_cm_xprt_send_rs);

#[no_mangle]
extern "C" fn rpcrdma_cm_xprt_buf_free_rs(rs: *mut c_void, xid: u32) {
    // SAFETY: as in rpcrdma_cm_xprt_connect_rs.
    unsafe { ops(rs) }.buf_free(xid)
}
c_fn!(rpcrdma_cm_xprt_buf_free_rs);

#[no_mangle]
extern "C" fn rpcrdma_cm_xprt_stats_rs(rs: *mut c_void, st: *mut rpcrdma_cm_xprt_stats) {
    // SAFETY: as in rpcrdma_cm_xprt_connect_rs; `st` is C's, for the call.
    unsafe { ops(rs).stats(&mut *st) }
}
c_fn!(rpcrdma_cm_xprt_stats_rs);

#[no_mangle]
extern "C" fn rpcrdma_cm_xprt_bc_maxpayload_rs(rs: *mut c_void) -> u32 {
    // SAFETY: as in rpcrdma_cm_xprt_connect_rs.
    unsafe { ops(rs) }.bc_maxpayload()
}
c_fn!(rpcrdma_cm_xprt_bc_maxpayload_rs);

#[no_mangle]
extern "C" fn rpcrdma_cm_xprt_free_rs(rs: *mut c_void) {
    // SAFETY: as in rpcrdma_cm_xprt_connect_rs.
    unsafe { ops(rs) }.destroy();
    // SAFETY: the context box, freed once: sunrpc destroys each transport once.
    drop(unsafe { KBox::from_raw(rs.cast::<Arc<dyn XprtOps>>()) });
}
c_fn!(rpcrdma_cm_xprt_free_rs);
