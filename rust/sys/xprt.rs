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
//! whoever still does, see `conn/rpc_xprt/`).

use core::ffi::c_void;
use core::fmt::Write;
use core::net::{IpAddr, SocketAddr};
use core::ptr::{addr_of, addr_of_mut, NonNull};
use core::sync::atomic::{AtomicUsize, Ordering};
use kernel::bindings::{
    alloc_pages, jiffies, kfree, kstrdup, rb_first, rb_next, spin_lock, spin_unlock, __GFP_NOWARN,
    GFP_NOWAIT,
};
use kernel::c_str;
use kernel::error::to_result;
use kernel::ffi::{c_int, c_ulong, c_ushort};
use kernel::prelude::*;
use kernel::sync::Arc;

use super::bindings::{
    c_fn, rpc_display_format_t, rpc_rqst, rpc_task, rpc_xprt, rpcrdma_cm_xprt,
    rpcrdma_cm_xprt_bc_call, rpcrdma_cm_xprt_complete, rpcrdma_cm_xprt_register,
    rpcrdma_cm_xprt_unregister, seq_file, sockaddr_in, write_bytes_to_xdr_buf, xdr_buf,
    xprt_force_disconnect, xprt_lookup_rqst, xprt_pin_rqst, xprt_unpin_rqst, HZ,
    RPCRDMA_CM_INIT_REEST_TO, RPC_CWNDSHIFT, XDRBUF_SPARSE_PAGES, XPRT_CONNECTED,
};
use super::class_slot::FactorySlot;
use super::debugfs::SeqFile;
use super::rdma_cm::{sockaddr_from_c, Net};
use super::to_c_int;
use super::xdr_buf::XdrMsg;

pub(crate) use super::bindings::RPCRDMA_CM_BC_SLOTS as BC_SLOTS;
pub(crate) use super::bindings::RPCRDMA_CM_XPRT_PREALLOC as PREALLOC;
pub(crate) use super::bindings::RPCRDMA_CM_XPRT_SLOTS as SLOTS;
pub(crate) use super::bindings::{XDRBUF_READ, XDRBUF_WRITE};

/// One call's share of the congestion window (sunrpc's RPC_CWNDSCALE).
const CWND_SCALE: c_ulong = 1 << RPC_CWNDSHIFT;

// The transport embeds sunrpc's at its start: a `struct rpc_xprt *` of ours is
// a `struct rpcrdma_cm_xprt *`.
const _: () = assert!(core::mem::offset_of!(rpcrdma_cm_xprt, xprt) == 0);

/// The counters of a mount's `xprt: rdma` line in mountstats, in xprtrdma's
/// column order (those after sunrpc's own).
#[derive(Default)]
pub(crate) struct MountStats {
    pub(crate) read_chunk_count: u64,
    pub(crate) write_chunk_count: u64,
    pub(crate) reply_chunk_count: u64,
    pub(crate) total_rdma_request: u64,
    pub(crate) total_rdma_reply: u64,
    pub(crate) pullup_copy_count: u64,
    pub(crate) fixup_copy_count: u64,
    pub(crate) hardway_register_count: u64,
    pub(crate) failed_marshal_count: u64,
    pub(crate) bad_reply_count: u64,
    pub(crate) nomsg_call_count: u64,
    pub(crate) mrs_recycled: u64,
    pub(crate) mrs_orphaned: u64,
    pub(crate) mrs_allocated: u64,
    pub(crate) local_inv_needed: u64,
    pub(crate) empty_sendctx_q: u64,
}

/// Makes the Rust side of the transports mounts set up.
pub(crate) trait XprtFactory: Send + Sync {
    /// A transport to the server at `peer` in `net`, for the C transport `x`.
    fn create(&self, x: RpcXprt, net: Net, peer: SocketAddr) -> Result<Arc<dyn XprtOps>>;
}

/// What sunrpc asks of a mount's transport (process context, may sleep).
pub(crate) trait XprtOps: Send + Sync {
    /// The connect worker: connects and returns once established, else an
    /// error sunrpc understands (it retries after a delay).
    fn connect(&self) -> Result;

    /// close: the connection goes (called with the transport locked).
    fn close(&self);

    /// send_request: sends the call `rq` (transport locked, credit taken);
    /// `ENOTCONN` (sunrpc reconnects), `ENOBUFS` (retried after a delay), or
    /// another error that fails the call.
    fn send(&self, rq: &RpcRqst<'_>) -> Result;

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
pub(crate) struct RpcXprt(NonNull<rpc_xprt>);

// SAFETY: the C functions used on it take sunrpc's locks themselves and may
// run in any process context; validity is the holder's rule (above).
unsafe impl Send for RpcXprt {}
// SAFETY: as above.
unsafe impl Sync for RpcXprt {}

impl RpcXprt {
    /// A handle on the transport `x`.
    ///
    /// # Safety
    ///
    /// `x` is live for as long as the handle is used.
    pub(super) unsafe fn from_raw(x: NonNull<rpc_xprt>) -> Self {
        RpcXprt(x)
    }

    /// Pins the call waiting for the Reply `xid`, if any.
    pub(crate) fn lookup(&self, xid: u32) -> Option<PinnedRqst> {
        let x = self.0.as_ptr();
        // SAFETY: a live transport (type rule). Data arrived, so the next
        // reconnect need not wait (a plain store, as xprtrdma's); the lookup
        // and the pin happen under the queue lock, as sunrpc requires.
        let r = unsafe {
            (*x).reestablish_timeout = 0;
            spin_lock(addr_of_mut!((*x).queue_lock));
            let r = xprt_lookup_rqst(x, xid.to_be());
            if !r.is_null() {
                xprt_pin_rqst(r);
            }
            spin_unlock(addr_of_mut!((*x).queue_lock));
            r
        };
        NonNull::new(r).map(|rqst| PinnedRqst { x: *self, rqst })
    }

    /// The server granted `credits` (already clamped): the congestion
    /// window becomes that many calls.
    pub(crate) fn set_credits(&self, credits: u32) {
        let x = self.0.as_ptr();
        let cwnd = (credits as c_ulong) << RPC_CWNDSHIFT;
        // Most Replies grant what the last one did: then, as xprtrdma's
        // rpcrdma_update_cwnd(), transport_lock is not taken.
        // SAFETY: a live transport (type rule); an aligned word read as C's
        // READ_ONCE() reads it: a stale value only costs the locked write.
        if unsafe { core::ptr::read_volatile(addr_of!((*x).cwnd)) } == cwnd {
            return;
        }
        // SAFETY: a live transport (type rule); cwnd is under transport_lock.
        unsafe {
            spin_lock(addr_of_mut!((*x).transport_lock));
            (*x).cwnd = cwnd;
            spin_unlock(addr_of_mut!((*x).transport_lock));
        }
    }

    /// Credits are valid for one connection only (as xprtrdma's
    /// rpcrdma_reqs_reset()): the calls waiting for a Reply give theirs back,
    /// so that each is sent again only with a credit of the next connection,
    /// whose grant starts at one (RFC 8166 Section 3.3.3). A call being
    /// released meanwhile keeps its units counted until its own release.
    pub(crate) fn reset_cong(&self) {
        let x = self.0.as_ptr();
        // The request's rb_node is the union member `rq_recv` (offset 0 of
        // the union).
        let at = core::mem::offset_of!(rpc_rqst, __bindgen_anon_1);
        // The two locks nest here only, as in xprtrdma's close; sunrpc holds
        // neither when it calls close.
        // SAFETY: a live transport (type rule); recv_queue is walked under
        // queue_lock, cong/cwnd changed under transport_lock; each node is a
        // queued request's rq_recv.
        unsafe {
            spin_lock(addr_of_mut!((*x).transport_lock));
            spin_lock(addr_of_mut!((*x).queue_lock));
            let mut n = rb_first(addr_of!((*x).recv_queue));
            while !n.is_null() {
                let req = n.cast::<u8>().sub(at).cast::<rpc_rqst>();
                if (*req).rq_cong != 0 {
                    (*req).rq_cong = 0;
                    (*x).cong = (*x).cong.wrapping_sub(CWND_SCALE);
                }
                n = rb_next(n);
            }
            spin_unlock(addr_of_mut!((*x).queue_lock));
            (*x).cwnd = CWND_SCALE;
            spin_unlock(addr_of_mut!((*x).transport_lock));
        }
    }

    /// A backchannel Call (`msg`, its RPC message) for the NFS client's
    /// callback service. `ENOBUFS` when all [`BC_SLOTS`] are busy.
    pub(crate) fn bc_call(&self, msg: &[u8]) -> Result {
        let len = u32::try_from(msg.len()).map_err(|_| EMSGSIZE)?;
        // SAFETY: a live transport (type rule); C copies `len` octets of `msg`.
        to_result(unsafe { rpcrdma_cm_xprt_bc_call(self.0.as_ptr(), msg.as_ptr(), len) })
    }

    /// The connection is gone: sunrpc closes the transport (our
    /// [`XprtOps::close`]) and connects again when a call needs it.
    pub(crate) fn force_disconnect(&self) {
        // SAFETY: a live transport (type rule).
        unsafe { xprt_force_disconnect(self.0.as_ptr()) };
    }
}

/// A call pinned while its Reply is placed: sunrpc does not free it until
/// [`PinnedRqst::complete`], or until it is dropped, which only unpins it
/// (the call still waits for a Reply, or to be sent again).
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
        let len = u32::try_from(data.len()).map_err(|_| EMSGSIZE)?;
        // SAFETY: the request is pinned (so is its rq_private_buf); its task
        // waits for this Reply and nothing else writes the buffer meanwhile.
        // C only reads `len` octets of `data`.
        let r = unsafe {
            write_bytes_to_xdr_buf(
                addr_of_mut!((*self.rqst.as_ptr()).rq_private_buf),
                offset,
                data.as_ptr().cast_mut().cast(),
                len,
            )
        };
        if r != 0 {
            return Err(EMSGSIZE);
        }
        Ok(())
    }

    /// The layout of the Reply buffer (its head, pages and tail).
    pub(crate) fn layout(&self) -> XdrMsg<'_> {
        // SAFETY: as in `write`; read while pinned.
        XdrMsg::new(unsafe { &(*self.rqst.as_ptr()).rq_private_buf })
    }

    /// The Reply's payload came in a Write chunk with only `len` octets of
    /// the Reply before it: the head ends there, in rq_rcv_buf and
    /// rq_private_buf alike (call_decode checks that they agree).
    pub(crate) fn trim_head(&mut self, len: u32) {
        let r = self.rqst.as_ptr();
        // SAFETY: pinned (see `write`).
        unsafe {
            let head = (*r).rq_rcv_buf.head[0].iov_len;
            let Some(delta) = head.checked_sub(len as usize).filter(|&d| d > 0) else {
                return;
            };
            for buf in [
                addr_of_mut!((*r).rq_rcv_buf),
                addr_of_mut!((*r).rq_private_buf),
            ] {
                (*buf).head[0].iov_len = len as usize;
                (*buf).buflen = (*buf).buflen.saturating_sub(delta as u32);
            }
        }
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
        let x = self.x.0.as_ptr();
        // SAFETY: pinned by `lookup` on this live transport (the pin keeps
        // the request), unpinned once, here (`complete` skips this), under
        // the queue lock as sunrpc requires.
        unsafe {
            spin_lock(addr_of_mut!((*x).queue_lock));
            xprt_unpin_rqst(self.rqst.as_ptr());
            spin_unlock(addr_of_mut!((*x).queue_lock));
        }
    }
}

/// The registered class's factory.
static FACTORY: FactorySlot<dyn XprtFactory> = FactorySlot::new();

/// While it lives, mounts with `-o rdma` (netids rdma, rdma6) use us.
pub(crate) struct XprtClass {
    _private: (),
}

impl XprtClass {
    /// Registers the client class (ident `XPRT_TRANSPORT_RDMA`). `EEXIST`
    /// if another module has (rpcrdma.ko).
    pub(crate) fn register(factory: Arc<dyn XprtFactory>) -> Result<XprtClass> {
        FACTORY.fill(factory, || {
            // SAFETY: no argument; C registers its static class.
            to_result(unsafe { rpcrdma_cm_xprt_register() })
        })?;
        Ok(XprtClass { _private: () })
    }
}

impl Drop for XprtClass {
    fn drop(&mut self) {
        // SAFETY: registered in `register`. Every transport of the class
        // holds a module reference, so none exists while the module unloads.
        unsafe { rpcrdma_cm_xprt_unregister() };
        FACTORY.empty();
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

/// setup's Rust half: makes the transport's context for the new transport `x`
/// and stores a pointer to it in `*rs`.
///
/// # Safety
///
/// Called only by xprt.c's class setup op, once per transport, with `x`
/// allocated and formatted by `rpcrdma_cm_xprt_alloc()` (not yet visible to
/// sunrpc) and `rs` pointing to its context field. On an error nothing is
/// stored and C frees `x`.
#[no_mangle]
unsafe extern "C" fn rpcrdma_cm_xprt_create_rs(x: *mut rpc_xprt, rs: *mut *mut c_void) -> c_int {
    // SAFETY: the class's setup op: it is registered while this runs.
    let (Some(x), Some(factory)) = (NonNull::new(x), unsafe { FACTORY.get() }) else {
        return ENODEV.to_errno();
    };
    // SAFETY: the transport being set up: its address is a copy of the
    // mount's, as long as its family says (setup checked the length).
    let Some(peer) = (unsafe { sockaddr_from_c(addr_of_mut!((*x.as_ptr()).addr).cast()) }) else {
        return EAFNOSUPPORT.to_errno();
    };
    // SAFETY: the transport being set up holds its namespace.
    let net = Net(unsafe { (*x.as_ptr()).xprt_net });
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

/// Connects the transport whose context is `rs` (a fresh RFC 8797
/// negotiation).
///
/// # Safety
///
/// Called only by xprt.c's connect worker, with `rs` the context
/// [`rpcrdma_cm_xprt_create_rs`] made. destroy cancels the worker
/// (cancel_delayed_work_sync) before the context is freed.
#[no_mangle]
unsafe extern "C" fn rpcrdma_cm_xprt_connect_rs(rs: *mut c_void) -> c_int {
    // SAFETY: a live transport's context (C calls between setup and destroy).
    to_c_int(unsafe { ops(rs) }.connect().map(|()| 0))
}
c_fn!(rpcrdma_cm_xprt_connect_rs);

/// close: the connection goes, and with it its credits (see
/// [`RpcXprt::reset_cong`]).
///
/// # Safety
///
/// Called only by xprt.c's close op (sunrpc's autoclose work, holding
/// XPRT_LOCKED), with `x` our live transport and `rs` its context.
#[no_mangle]
unsafe extern "C" fn rpcrdma_cm_xprt_close_rs(x: *mut rpc_xprt, rs: *mut c_void) {
    // SAFETY: as in rpcrdma_cm_xprt_connect_rs.
    unsafe { ops(rs) }.close();
    if let Some(x) = NonNull::new(x) {
        // SAFETY: sunrpc's transport, live during its close op.
        unsafe { RpcXprt::from_raw(x) }.reset_cong();
    }
}
c_fn!(rpcrdma_cm_xprt_close_rs);

/// send_request: marshals and sends the call `rqst` (`ddp`: its payload may
/// go by RDMA, as the upper layer allows).
///
/// # Safety
///
/// Called only by xprt.c's send_request op, holding the transport's write
/// lock (XPRT_LOCKED), with `rs` the context of the request's transport and
/// `rqst` sunrpc's request, valid and not touched by anyone else (its
/// receive buffer included) until this returns.
#[no_mangle]
unsafe extern "C" fn rpcrdma_cm_xprt_send_rs(
    rs: *mut c_void,
    rqst: *mut rpc_rqst,
    ddp: bool,
) -> c_int {
    // SAFETY: sunrpc's request, in send_request (transport locked).
    if unsafe { (*rqst).rq_rcv_buf.flags } & XDRBUF_SPARSE_PAGES != 0 {
        // SAFETY: as above; nothing else touches its receive buffer now.
        if unsafe { fill_sparse_pages(addr_of_mut!((*rqst).rq_rcv_buf)) }.is_err() {
            return ENOBUFS.to_errno();
        }
    }
    // The request sunrpc sends (transport locked): its XID, buffer pointer
    // and send buffer stay unchanged while it is sent; a Reply that changes
    // its receive buffer (trim_head) comes after the Send is posted, which
    // ends the borrow. Only those fields are borrowed, not the whole request.
    // SAFETY: so these reads and borrows are valid for the call.
    let call = unsafe {
        RpcRqst {
            xid: u32::from_be((*rqst).rq_xid),
            msg: XdrMsg::new(&*addr_of!((*rqst).rq_snd_buf)),
            rcvsize: (*rqst).rq_rcv_buf.buflen,
            rcv: XdrMsg::new(&*addr_of!((*rqst).rq_rcv_buf)),
            ddp,
            bc_reply: (*rqst).rq_buffer.is_null(),
        }
    };
    // SAFETY: as in rpcrdma_cm_xprt_connect_rs.
    to_c_int(unsafe { ops(rs) }.send(&call).map(|()| 0))
}
c_fn!(rpcrdma_cm_xprt_send_rs);

/// NFSv3 GETACL leaves its receive pages to the transport
/// (`XDRBUF_SPARSE_PAGES`): those not there yet are allocated now, as
/// xprtrdma does, so a Reply chunk or Write chunk has pages to land in.
/// sunrpc frees them with the request. The page array of such a buffer
/// covers `page_base + page_len` octets.
///
/// # Safety
///
/// `buf` is a request's receive buffer in send_request.
unsafe fn fill_sparse_pages(buf: *mut xdr_buf) -> Result {
    // SAFETY: see above.
    let (pages, base, len) = unsafe { ((*buf).pages, (*buf).page_base, (*buf).page_len) };
    let page = kernel::page::PAGE_SIZE;
    let first = base as usize / page;
    let n = (base as usize % page + len as usize).div_ceil(page);
    for i in first..first + n {
        // SAFETY: within the page array (see above).
        let slot = unsafe { &mut *pages.add(i) };
        if slot.is_null() {
            // SAFETY: a plain page allocation; the page goes into the array.
            *slot = unsafe { alloc_pages(GFP_NOWAIT | __GFP_NOWARN, 0) };
            if slot.is_null() {
                return Err(ENOMEM);
            }
        }
    }
    Ok(())
}

/// buf_free: the chunks of the call `xid` are released if its Reply never
/// came.
///
/// # Safety
///
/// Called only by xprt.c's buf_free op, with `rs` the context of the
/// request's transport, which sunrpc keeps while the request exists.
#[no_mangle]
unsafe extern "C" fn rpcrdma_cm_xprt_buf_free_rs(rs: *mut c_void, xid: u32) {
    // SAFETY: as in rpcrdma_cm_xprt_connect_rs.
    unsafe { ops(rs) }.buf_free(xid)
}
c_fn!(rpcrdma_cm_xprt_buf_free_rs);

/// bc_maxpayload: the largest backchannel message the connection takes.
///
/// # Safety
///
/// Called only by xprt.c's bc_maxpayload op (under rcu_read_lock: must not
/// sleep), with `rs` the context of our live transport.
#[no_mangle]
unsafe extern "C" fn rpcrdma_cm_xprt_bc_maxpayload_rs(rs: *mut c_void) -> u32 {
    // SAFETY: as in rpcrdma_cm_xprt_connect_rs.
    unsafe { ops(rs) }.bc_maxpayload()
}
c_fn!(rpcrdma_cm_xprt_bc_maxpayload_rs);

/// destroy's Rust half: frees the context `rs`, after every Receive handler
/// using the transport has returned.
///
/// # Safety
///
/// Called only by xprt.c's destroy op, exactly once per context, after the
/// connect worker was cancelled; it takes ownership of `rs`, which nothing
/// uses afterwards.
#[no_mangle]
unsafe extern "C" fn rpcrdma_cm_xprt_free_rs(rs: *mut c_void) {
    // SAFETY: as in rpcrdma_cm_xprt_connect_rs.
    unsafe { ops(rs) }.destroy();
    // SAFETY: the context box, freed once: sunrpc destroys each transport once.
    drop(unsafe { KBox::from_raw(rs.cast::<Arc<dyn XprtOps>>()) });
}
c_fn!(rpcrdma_cm_xprt_free_rs);

/// Octets of one address string at most (an IPv6 address with a scope).
const ADDR_STR: usize = 64;

/// A short string built on the stack, NUL-terminated for C.
struct StackStr {
    buf: [u8; ADDR_STR],
    len: usize,
}

impl Write for StackStr {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let end = self.len + s.len();
        // One octet stays for the NUL.
        let dst = self.buf.get_mut(self.len..end).filter(|_| end < ADDR_STR);
        dst.ok_or(core::fmt::Error)?.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// Sets address string `which` of `x` to what `f` writes (kstrdup'd: C's
/// free_addresses kfree's it); a previous one is freed.
///
/// As with xprtrdma's and xprtsock's set_port, a reader of the old string
/// while rpcbind changes the port races with its kfree: sunrpc gives
/// transports no lock for it.
///
/// # Safety
///
/// `x` is a transport being set up, or in set_port.
unsafe fn set_string(
    x: *mut rpc_xprt,
    which: rpc_display_format_t,
    f: impl FnOnce(&mut StackStr) -> core::fmt::Result,
) {
    let mut s = StackStr {
        buf: [0; ADDR_STR],
        len: 0,
    };
    if f(&mut s).is_err() {
        s.len = 0;
    }
    s.buf[s.len] = 0;
    // SAFETY: see above; `s.buf` is NUL-terminated.
    unsafe {
        let slot = addr_of_mut!((*x).address_strings[which as usize]);
        kfree((*slot).cast());
        *slot = kstrdup(s.buf.as_ptr().cast(), kernel::bindings::GFP_KERNEL);
    }
}

/// The port strings, as xprtrdma formats them ("%u", "%4hx").
///
/// # Safety
///
/// As [`set_string`].
unsafe fn set_port_strings(x: *mut rpc_xprt, port: u16) {
    use super::bindings::{
        rpc_display_format_t_RPC_DISPLAY_HEX_PORT as HEX_PORT,
        rpc_display_format_t_RPC_DISPLAY_PORT as PORT,
    };
    // SAFETY: as above.
    unsafe {
        set_string(x, PORT, |s| write!(s, "{}", port));
        set_string(x, HEX_PORT, |s| write!(s, "{:4x}", port));
    }
}

/// The address strings of a new transport, as xprtrdma formats them
/// (mountstats, rpcbind and the NFS client read them).
///
/// # Safety
///
/// Called only by `rpcrdma_cm_xprt_alloc()` (xprt.c), with `x` a transport
/// being set up that no one else sees yet, its address and length set.
#[no_mangle]
unsafe extern "C" fn rpcrdma_cm_xprt_format_rs(x: *mut rpc_xprt) {
    use super::bindings::{
        rpc_display_format_t_RPC_DISPLAY_ADDR as ADDR,
        rpc_display_format_t_RPC_DISPLAY_HEX_ADDR as HEX_ADDR,
        rpc_display_format_t_RPC_DISPLAY_NETID as NETID,
        rpc_display_format_t_RPC_DISPLAY_PROTO as PROTO,
    };
    // SAFETY: C's transport being set up; its address is as long as its
    // family says.
    let Some(sa) = (unsafe { sockaddr_from_c(addr_of_mut!((*x).addr).cast()) }) else {
        return;
    };
    let (netid, hex): (&'static CStr, _) = match sa {
        SocketAddr::V4(a) => (c_str!("rdma"), u128::from(u32::from(*a.ip()))),
        SocketAddr::V6(a) => (c_str!("rdma6"), u128::from(*a.ip())),
    };
    // SAFETY: as above; PROTO and NETID point to static strings, which
    // free_addresses skips.
    unsafe {
        set_string(x, ADDR, |s| match sa {
            SocketAddr::V6(a) if a.scope_id() != 0 && a.ip().segments()[0] & 0xffc0 == 0xfe80 => {
                write!(s, "{}%{}", a.ip(), a.scope_id())
            }
            _ => write!(s, "{}", sa.ip()),
        });
        set_string(x, HEX_ADDR, |s| match sa.ip() {
            IpAddr::V4(_) => write!(s, "{:08x}", hex),
            IpAddr::V6(_) => write!(s, "{:032x}", hex),
        });
        set_port_strings(x, sa.port());
        (*x).address_strings[PROTO as usize] = c_str!("rdma").as_char_ptr();
        (*x).address_strings[NETID as usize] = netid.as_char_ptr();
    }
}
c_fn!(rpcrdma_cm_xprt_format_rs);

/// Frees the address strings [`rpcrdma_cm_xprt_format_rs`] and set_port
/// made (those two point to static strings).
///
/// # Safety
///
/// Called only by `rpcrdma_cm_xprt_free()` (xprt.c), with `x` a transport no
/// one uses any more: at destroy, or in setup's error path on a transport
/// that was never visible to sunrpc.
#[no_mangle]
unsafe extern "C" fn rpcrdma_cm_xprt_unformat_rs(x: *mut rpc_xprt) {
    use super::bindings::{
        rpc_display_format_t_RPC_DISPLAY_NETID as NETID,
        rpc_display_format_t_RPC_DISPLAY_PROTO as PROTO,
    };
    // SAFETY: C's transport being freed: nothing reads its strings any more.
    let strings = unsafe { &mut (*x).address_strings };
    for (i, slot) in strings.iter_mut().enumerate() {
        if i != PROTO as usize && i != NETID as usize {
            // SAFETY: kstrdup'd by set_string, or NULL.
            unsafe { kfree((*slot).cast()) };
        }
        *slot = core::ptr::null();
    }
}
c_fn!(rpcrdma_cm_xprt_unformat_rs);

/// set_port: rpcbind found the server's port.
///
/// # Safety
///
/// Called only as our transport's set_port op, by sunrpc's rpcbind client,
/// with `x` a live transport of ours.
#[no_mangle]
unsafe extern "C" fn rpcrdma_cm_xprt_set_port_rs(x: *mut rpc_xprt, port: c_ushort) {
    // SAFETY: sunrpc's transport, in its op; the port is at the same place
    // in sockaddr_in and sockaddr_in6 (rpc_set_port() relies on that too).
    unsafe {
        (*addr_of_mut!((*x).addr).cast::<sockaddr_in>()).sin_port = port.to_be();
        set_port_strings(x, port);
    }
}
c_fn!(rpcrdma_cm_xprt_set_port_rs);

/// timer: an RPC timed out on a connected transport. RDMA has no keepalive,
/// so reconnect and retransmit (as xprtrdma).
///
/// # Safety
///
/// Called only as our transport's timer op, by sunrpc for a task of `x`, a
/// live transport of ours (the task is not used).
#[no_mangle]
unsafe extern "C" fn rpcrdma_cm_xprt_timer_rs(x: *mut rpc_xprt, _task: *mut rpc_task) {
    // SAFETY: sunrpc's live transport, in its op.
    unsafe { xprt_force_disconnect(x) };
}
c_fn!(rpcrdma_cm_xprt_timer_rs);

/// set_connect_timeout, as xprtrdma's: shorter connect and reconnect timeouts
/// (never under twice the reconnect delay) for mounts that ask for them.
///
/// # Safety
///
/// Called only as our transport's set_connect_timeout op, with `x` a live
/// transport of ours (embedded in a `struct rpcrdma_cm_xprt`).
#[no_mangle]
unsafe extern "C" fn rpcrdma_cm_xprt_set_connect_timeout_rs(
    x: *mut rpc_xprt,
    connect_timeout: c_ulong,
    reconnect_timeout: c_ulong,
) {
    let cx = x.cast::<rpcrdma_cm_xprt>();
    // SAFETY: one of our transports (the cast is valid: see the assertion
    // at the top), in its op; the fields are under transport_lock.
    unsafe {
        spin_lock(addr_of_mut!((*x).transport_lock));
        if connect_timeout < (*x).connect_timeout {
            let mut to = *(*x).timeout;
            let initval = connect_timeout.max((RPCRDMA_CM_INIT_REEST_TO as c_ulong) << 1);
            to.to_initval = initval;
            to.to_maxval = initval;
            (*cx).timeout = to;
            (*x).timeout = addr_of_mut!((*cx).timeout);
            (*x).connect_timeout = connect_timeout;
        }
        if reconnect_timeout < (*x).max_reconnect_timeout {
            (*x).max_reconnect_timeout = reconnect_timeout;
        }
        spin_unlock(addr_of_mut!((*x).transport_lock));
    }
}
c_fn!(rpcrdma_cm_xprt_set_connect_timeout_rs);

/// print_stats: xprtrdma's "xprt: rdma" line of mountstats, column for column.
///
/// # Safety
///
/// Called only as our transport's print_stats op, with `x` a live transport
/// of ours (embedded in a `struct rpcrdma_cm_xprt`) and `seq` the seq_file
/// being written, valid for the call.
#[no_mangle]
unsafe extern "C" fn rpcrdma_cm_xprt_print_stats_rs(x: *mut rpc_xprt, seq: *mut seq_file) {
    let mut st = MountStats::default();
    // SAFETY: a mount's live transport, in its op: its context is set.
    let rs = unsafe { (*x.cast::<rpcrdma_cm_xprt>()).rs };
    if !rs.is_null() {
        // SAFETY: as in rpcrdma_cm_xprt_connect_rs.
        unsafe { ops(rs) }.stats(&mut st);
    }
    // SAFETY: as above; sunrpc's counters are read as sunrpc's print_stats
    // implementations read them (unlocked); `state` is a bit field C changes
    // atomically.
    let (xs, idle) = unsafe {
        let state = AtomicUsize::from_ptr(addr_of_mut!((*x).state).cast()).load(Ordering::Relaxed);
        let now = core::ptr::read_volatile(core::ptr::addr_of!(jiffies));
        let connected = state & (1 << XPRT_CONNECTED) != 0;
        let idle = if connected {
            (now.wrapping_sub((*x).last_used) as i64) / i64::from(HZ)
        } else {
            0
        };
        (core::ptr::read(addr_of!((*x).stat)), idle)
    };
    // SAFETY: the seq_file of this print_stats call.
    let mut m = unsafe { SeqFile::from_raw(seq) };
    let _ = write!(
        m,
        "\txprt:\trdma 0 {} {} {} {} {} {} {} {} {} ",
        xs.bind_count,
        xs.connect_count,
        xs.connect_time / HZ as c_ulong,
        idle,
        xs.sends,
        xs.recvs,
        xs.bad_xids,
        xs.req_u,
        xs.bklog_u
    );
    let _ = writeln!(
        m,
        "{} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} 0",
        st.read_chunk_count,
        st.write_chunk_count,
        st.reply_chunk_count,
        st.total_rdma_request,
        st.total_rdma_reply,
        st.pullup_copy_count,
        st.fixup_copy_count,
        st.hardway_register_count,
        st.failed_marshal_count,
        st.bad_reply_count,
        st.nomsg_call_count,
        st.mrs_recycled,
        st.mrs_orphaned,
        st.mrs_allocated,
        st.local_inv_needed,
        st.empty_sendctx_q
    );
}
c_fn!(rpcrdma_cm_xprt_print_stats_rs);
