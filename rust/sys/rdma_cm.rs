// SPDX-License-Identifier: GPL-2.0

//! RDMA connection manager ids, with a QP, and their event handlers.
//!
//! Each [`CmId`] owns one `struct rdma_cm_id` and a context box holding the
//! `Arc<dyn CmHandler>` that receives its events. The rules of the CM that bite
//! are kept here, so the module logic cannot get them wrong:
//!
//! - Private data is valid only during the event: [`Event::private_data`] borrows it
//!   for the handler call only; callers copy what they keep.
//! - An id must not be destroyed from inside its own handler (the CM holds the
//!   handler lock): dropping a [`CmId`] there frees its QP at once and hands the id
//!   to the CM by returning non-zero, after which no event reaches the handler.
//!   Dropped anywhere else, it takes the handler lock, frees the QP, marks the id
//!   dead (later events are ignored) and calls `rdma_destroy_id()`.
//! - Dropping a [`CmId`] frees everything of the connection on the device (QP,
//!   CQ, buffers, and, once the last of the id's chunks is dropped, the PD)
//!   before it returns. The CM frees a removed device as soon as the
//!   DEVICE_REMOVAL handlers return, so closing a connection there must leave
//!   nothing behind; the drop waits for chunk holders to let go.
//! - CONNECT_REQUEST arrives on a new id that carries its listener's context: the
//!   listener's handler either accepts it with [`ConnectRequest::accept`], which
//!   gives the new id its own context and a QP, or leaves it, and the request is
//!   rejected and the new id destroyed by the CM.

use core::ffi::c_void;
use core::net::IpAddr;
use core::ptr;
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use kernel::error::to_result;
use kernel::ffi::{c_char, c_int};
use kernel::prelude::*;
use kernel::sync::Arc;
use kernel::task::Task;

use super::errno::{emsgsize, enotconn};

/// C `struct rdma_cm_id`, opaque.
#[repr(C)]
pub(crate) struct rdma_cm_id {
    _p: [u8; 0],
}
/// C `struct rpcrdma_cm_qp` (helpers.c): PD, CQ, QP and buffers, opaque.
#[repr(C)]
pub(crate) struct rpcrdma_cm_qp {
    _p: [u8; 0],
}
/// C `struct rpcrdma_cm_buf` (helpers.c): one Send buffer, opaque.
#[repr(C)]
pub(crate) struct rpcrdma_cm_buf {
    _p: [u8; 0],
}

/// Mirrors `struct rpcrdma_cm_wc_info` in helpers.c.
#[repr(C)]
pub(crate) struct rpcrdma_cm_wc_info {
    status: c_int,
    data: *const u8,
    len: u32,
    invalidate_rkey: u32,
    with_invalidate: bool,
}

/// Mirrors `struct rpcrdma_cm_event_info` in helpers.c.
#[repr(C)]
pub(crate) struct rpcrdma_cm_event_info {
    event: c_int,
    status: c_int,
    private_data: *const u8,
    private_data_len: u32,
    initiator_depth: u8,
}

const AF_INET: c_int = 2;
const AF_INET6: c_int = 10;

extern "C" {
    fn rpcrdma_cm_create_id(context: *mut c_void, out: *mut *mut rdma_cm_id) -> c_int;
    fn rpcrdma_cm_set_context(id: *mut rdma_cm_id, context: *mut c_void);
    fn rpcrdma_cm_bind_listen(
        id: *mut rdma_cm_id,
        family: c_int,
        addr: *const u8,
        port: u16,
        backlog: c_int,
    ) -> c_int;
    fn rpcrdma_cm_resolve_addr(
        id: *mut rdma_cm_id,
        family: c_int,
        addr: *const u8,
        port: u16,
        timeout_ms: usize,
    ) -> c_int;
    fn rdma_resolve_route(id: *mut rdma_cm_id, timeout_ms: usize) -> c_int;
    fn rpcrdma_cm_id_names(
        id: *mut rdma_cm_id,
        local: *mut c_char,
        peer: *mut c_char,
        dev: *mut c_char,
        len: usize,
    );
    fn rpcrdma_cm_create_qp(
        id: *mut rdma_cm_id,
        depth: u32,
        send_size: u32,
        recv_size: u32,
        owner: *mut c_void,
        out: *mut *mut rpcrdma_cm_qp,
    ) -> c_int;
    fn rpcrdma_cm_destroy_qp(qp: *mut rpcrdma_cm_qp);
    fn rpcrdma_cm_send_get(
        qp: *mut rpcrdma_cm_qp,
        addr: *mut *mut u8,
        size: *mut u32,
    ) -> *mut rpcrdma_cm_buf;
    fn rpcrdma_cm_send_abort(b: *mut rpcrdma_cm_buf);
    fn rpcrdma_cm_send_post(
        b: *mut rpcrdma_cm_buf,
        len: u32,
        invalidate: bool,
        inv_rkey: u32,
    ) -> c_int;
    fn rpcrdma_cm_connect_locked(id: *mut rdma_cm_id, pdata: *const u8, len: u8) -> c_int;
    fn rpcrdma_cm_accept(id: *mut rdma_cm_id, pdata: *const u8, len: u8, ord: u8) -> c_int;
    fn rpcrdma_cm_reject(id: *mut rdma_cm_id) -> c_int;
    fn rdma_disconnect(id: *mut rdma_cm_id) -> c_int;
    fn rdma_destroy_id(id: *mut rdma_cm_id);
    fn rdma_lock_handler(id: *mut rdma_cm_id);
    fn rdma_unlock_handler(id: *mut rdma_cm_id);
}

macro_rules! event_kinds {
    ($($kind:ident),* $(,)?) => {
        /// `enum rdma_cm_event_type`, in its C order.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub(crate) enum EventKind {
            $($kind,)*
            /// A value this module does not know.
            Unknown(i32),
        }

        impl EventKind {
            fn from_c(v: c_int) -> Self {
                const KINDS: &[EventKind] = &[$(EventKind::$kind,)*];
                usize::try_from(v)
                    .ok()
                    .and_then(|i| KINDS.get(i).copied())
                    .unwrap_or(EventKind::Unknown(v))
            }
        }
    };
}

event_kinds!(
    AddrResolved,
    AddrError,
    RouteResolved,
    RouteError,
    ConnectRequest,
    ConnectResponse,
    ConnectError,
    Unreachable,
    Rejected,
    Established,
    Disconnected,
    DeviceRemoval,
    MulticastJoin,
    MulticastError,
    AddrChange,
    TimewaitExit,
);

/// One CM event, valid for the duration of the handler call.
pub(crate) struct Event<'a> {
    /// What happened.
    pub(crate) kind: EventKind,
    /// The event's status (a negative errno, or a CM reject reason for REJECTED).
    pub(crate) status: i32,
    /// The private data the event carries (empty if none).
    pub(crate) private_data: &'a [u8],
    /// The RDMA Reads we may have in flight (CONNECT_REQUEST, ESTABLISHED).
    pub(crate) initiator_depth: u8,
}

/// A work completion: `status` is C's `enum ib_wc_status` (0 success, 5 flushed).
pub(crate) struct Completion<'a> {
    /// `wc->status`.
    pub(crate) status: i32,
    /// The received message (successful Receives only), valid for the call.
    pub(crate) data: &'a [u8],
    /// The rkey the peer invalidated with Send With Invalidate, if it did.
    pub(crate) invalidated: Option<u32>,
}

/// `IB_WC_WR_FLUSH_ERR`: the WR was flushed because the QP went to error.
pub(crate) const WC_FLUSHED: i32 = 5;

/// Receives the events of the ids it is attached to. CM events come with the
/// id's CM handler lock held, in process context (it may sleep). Receives come
/// from a work item, one at a time per QP, in order (it may sleep, for
/// instance in an RDMA Read); Send completions from the CQ's workqueue.
///
/// `recv` and `send_done` must not drop the [`CmId`] of their QP (its teardown
/// waits for them); they may disconnect it. Nor may a thread that holds one of
/// the id's chunks (see [`Chunk`](super::chunk::Chunk)).
pub(crate) trait CmHandler: Send + Sync {
    /// An event on an id this handler owns.
    fn event(&self, id: &CmIdRef<'_>, ev: &Event<'_>);

    /// A CONNECT_REQUEST on a listener this handler owns. Not accepting (not calling
    /// [`ConnectRequest::accept`]) rejects the request.
    fn connect_request(&self, _req: &mut ConnectRequest<'_>, _ev: &Event<'_>) {}

    /// A Receive completed (successfully, or flushed or failed: see `wc.status`).
    /// The buffer is reposted after this returns. May sleep.
    fn recv(&self, _id: &CmIdRef<'_>, _wc: &Completion<'_>) {}

    /// A Send completed; its buffer is free again.
    fn send_done(&self, _id: &CmIdRef<'_>, _wc: &Completion<'_>) {}
}

/// Per-id context; the C `id->context` points at it.
struct Ctx {
    handler: Arc<dyn CmHandler>,
    id: AtomicPtr<rdma_cm_id>,
    qp: AtomicPtr<rpcrdma_cm_qp>,
    /// The task running this id's handler, 0 when none.
    in_handler: AtomicUsize,
    /// Set once the owner destroys the id: events are ignored from then on.
    dead: AtomicBool,
    /// Set when the CmId was dropped inside its own handler.
    destroy_from_handler: AtomicBool,
}

/// Identifies the running task (its address), to recognise "inside my handler".
fn current_task() -> usize {
    let task: &Task = kernel::current!();
    ptr::from_ref(task) as usize
}

impl Ctx {
    fn new(handler: Arc<dyn CmHandler>) -> Result<*mut Ctx> {
        let ctx = KBox::new(
            Ctx {
                handler,
                id: AtomicPtr::new(ptr::null_mut()),
                qp: AtomicPtr::new(ptr::null_mut()),
                in_handler: AtomicUsize::new(0),
                dead: AtomicBool::new(false),
                destroy_from_handler: AtomicBool::new(false),
            },
            GFP_KERNEL,
        )?;
        Ok(KBox::into_raw(ctx))
    }

    /// Drains and frees the QP with its buffers, CQ and PD, if there is one.
    /// Callers hold the handler lock (or are the handler), so this never races
    /// with `create_qp`; they are not completion handlers (see [`CmHandler`]).
    fn destroy_qp(&self) {
        let qp = self.qp.swap(ptr::null_mut(), Ordering::AcqRel);
        if !qp.is_null() {
            // SAFETY: `qp` came from rpcrdma_cm_create_qp() on our live id and was
            // swapped out, so it is freed exactly once. After the drain no
            // completion refers to it (helpers.c).
            unsafe { rpcrdma_cm_destroy_qp(qp) };
        }
    }
}

/// An id the module owns. Dropping it destroys the id and its QP (see the module
/// documentation for how that works inside a handler).
pub(crate) struct CmId {
    ctx: *mut Ctx,
}

// SAFETY: the id and its context may be used and destroyed from any thread; all
// mutable state in `Ctx` is atomic, and the handler is `Send + Sync`.
unsafe impl Send for CmId {}
// SAFETY: `&CmId` only allows the `CmIdRef` operations, which the CM serialises.
unsafe impl Sync for CmId {}

/// Where a CM id connects or listens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Endpoint {
    pub(crate) addr: IpAddr,
    pub(crate) port: u16,
}

impl Endpoint {
    fn c_addr(&self) -> (c_int, [u8; 16]) {
        let mut bytes = [0u8; 16];
        match self.addr {
            IpAddr::V4(a) => {
                bytes[..4].copy_from_slice(&a.octets());
                (AF_INET, bytes)
            }
            IpAddr::V6(a) => (AF_INET6, a.octets()),
        }
    }
}

impl CmId {
    /// A new RC id in the initial network namespace whose events go to `handler`.
    pub(crate) fn new(handler: Arc<dyn CmHandler>) -> Result<Self> {
        let ctx = Ctx::new(handler)?;
        let mut id = ptr::null_mut();
        // SAFETY: `ctx` is a valid context pointer that outlives the id (freed only
        // after the id is destroyed, see Drop); `id` is a valid out pointer.
        if let Err(e) = to_result(unsafe { rpcrdma_cm_create_id(ctx.cast(), &mut id) }) {
            // SAFETY: `ctx` came from KBox::into_raw above and no id refers to it.
            drop(unsafe { KBox::from_raw(ctx) });
            return Err(e);
        }
        // SAFETY: `ctx` is valid (just allocated, owned by us).
        unsafe { &*ctx }.id.store(id, Ordering::Release);
        Ok(CmId { ctx })
    }

    fn ctx(&self) -> &Ctx {
        // SAFETY: `self.ctx` stays valid as long as this CmId exists.
        unsafe { &*self.ctx }
    }

    /// Borrows the id for the operations shared with handlers.
    pub(crate) fn as_ref(&self) -> CmIdRef<'_> {
        CmIdRef { ctx: self.ctx() }
    }

    /// Binds to `ep` and listens (`rdma_bind_addr()`, `rdma_listen()`).
    pub(crate) fn listen(&self, ep: &Endpoint, backlog: i32) -> Result {
        let (family, addr) = ep.c_addr();
        // SAFETY: our live id; `addr` holds 16 octets, of which C reads 4 or 16.
        to_result(unsafe {
            rpcrdma_cm_bind_listen(
                self.ctx().id.load(Ordering::Acquire),
                family,
                addr.as_ptr(),
                ep.port,
                backlog,
            )
        })
    }

    /// Starts resolving `ep` (`rdma_resolve_addr()`): ADDR_RESOLVED or ADDR_ERROR
    /// follows.
    pub(crate) fn resolve_addr(&self, ep: &Endpoint, timeout_ms: usize) -> Result {
        let (family, addr) = ep.c_addr();
        // SAFETY: as in `listen`.
        to_result(unsafe {
            rpcrdma_cm_resolve_addr(
                self.ctx().id.load(Ordering::Acquire),
                family,
                addr.as_ptr(),
                ep.port,
                timeout_ms,
            )
        })
    }
}

impl Drop for CmId {
    fn drop(&mut self) {
        let ctx = self.ctx();
        let id = ctx.id.load(Ordering::Acquire);
        if ctx.in_handler.load(Ordering::Relaxed) == current_task() {
            // Inside this id's own handler: the trampoline returns non-zero so the
            // CM destroys the id, then frees the context.
            ctx.destroy_qp();
            ctx.dead.store(true, Ordering::Relaxed);
            ctx.destroy_from_handler.store(true, Ordering::Release);
            return;
        }
        // SAFETY: `id` is our live id and we are not inside its handler, so taking
        // the handler lock cannot deadlock on ourselves.
        unsafe { rdma_lock_handler(id) };
        ctx.dead.store(true, Ordering::Relaxed);
        ctx.destroy_qp();
        // SAFETY: locked just above.
        unsafe { rdma_unlock_handler(id) };
        // SAFETY: our id, destroyed exactly once (a handler seeing `dead` never asks
        // the CM to destroy it). rdma_destroy_id() waits for running handlers.
        unsafe { rdma_destroy_id(id) };
        // SAFETY: no id refers to the context any more; it came from
        // KBox::into_raw in Ctx::new.
        drop(unsafe { KBox::from_raw(self.ctx) });
    }
}

/// The operations on an id that its owner and its handler share.
pub(crate) struct CmIdRef<'a> {
    ctx: &'a Ctx,
}

/// Names of an id's two ends and its device, as C prints them.
pub(crate) struct Names {
    pub(crate) local: [u8; 64],
    pub(crate) peer: [u8; 64],
    pub(crate) device: [u8; 64],
}

fn c_str_bytes(b: &[u8]) -> &str {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    core::str::from_utf8(&b[..end]).unwrap_or("?")
}

impl Names {
    /// Reads the names of `id`, which must be live (the callers' borrows ensure
    /// it: an owner's or handler's `CmIdRef`, or a request during its event).
    fn of(id: *mut rdma_cm_id) -> Names {
        let mut n = Names {
            local: [0; 64],
            peer: [0; 64],
            device: [0; 64],
        };
        // SAFETY: `id` is live (see above); each buffer holds 64 octets and C
        // writes at most that many, NUL included (snprintf).
        unsafe {
            rpcrdma_cm_id_names(
                id,
                n.local.as_mut_ptr().cast(),
                n.peer.as_mut_ptr().cast(),
                n.device.as_mut_ptr().cast(),
                64,
            )
        };
        n
    }

    /// The local "address:port".
    pub(crate) fn local(&self) -> &str {
        c_str_bytes(&self.local)
    }
    /// The peer's "address:port".
    pub(crate) fn peer(&self) -> &str {
        c_str_bytes(&self.peer)
    }
    /// The RDMA device's name.
    pub(crate) fn device(&self) -> &str {
        c_str_bytes(&self.device)
    }
}

impl CmIdRef<'_> {
    fn raw(&self) -> *mut rdma_cm_id {
        self.ctx.id.load(Ordering::Acquire)
    }

    /// Starts route resolution (after ADDR_RESOLVED).
    pub(crate) fn resolve_route(&self, timeout_ms: usize) -> Result {
        // SAFETY: a live id (the borrow of its owner or handler keeps it alive).
        to_result(unsafe { rdma_resolve_route(self.raw(), timeout_ms) })
    }

    /// The two ends' addresses and the device, as known now.
    pub(crate) fn names(&self) -> Names {
        Names::of(self.raw())
    }

    /// Creates a PD, CQ and RC QP of `depth` work requests each way on the id's
    /// device, `depth` Send buffers of `send_size` octets and `depth` Receive
    /// buffers of `recv_size` octets, the Receives posted. Completions go to this
    /// id's handler. Call from this id's handler (ROUTE_RESOLVED) or before
    /// accepting.
    pub(crate) fn create_qp(&self, depth: u32, send_size: u32, recv_size: u32) -> Result {
        if !self.ctx.qp.load(Ordering::Relaxed).is_null() {
            return Err(EEXIST);
        }
        let mut qp = ptr::null_mut();
        let owner = ptr::from_ref(self.ctx).cast_mut().cast::<c_void>();
        // SAFETY: a live id; `owner` is this id's context, which outlives the QP
        // (destroy_qp runs before the context is freed); `qp` is an out pointer.
        to_result(unsafe {
            rpcrdma_cm_create_qp(self.raw(), depth, send_size, recv_size, owner, &mut qp)
        })?;
        self.ctx.qp.store(qp, Ordering::Release);
        Ok(())
    }

    /// The QP, if one was created (for [`super::chunk::Chunk::new`]).
    pub(crate) fn qp(&self) -> Option<*mut rpcrdma_cm_qp> {
        let qp = self.ctx.qp.load(Ordering::Acquire);
        (!qp.is_null()).then_some(qp)
    }

    /// Sends one message: `fill` writes it into a free Send buffer and returns
    /// its length; with `invalidate`, the Send invalidates that rkey at the peer
    /// (Send With Invalidate). Fails with `EBUSY` if no buffer is free,
    /// `ENOTCONN` without a QP, `EMSGSIZE` if `fill` returns more than the buffer.
    pub(crate) fn send(
        &self,
        invalidate: Option<u32>,
        fill: impl FnOnce(&mut [u8]) -> Result<usize>,
    ) -> Result {
        let qp = self.ctx.qp.load(Ordering::Acquire);
        if qp.is_null() {
            return Err(enotconn());
        }
        let (mut addr, mut size) = (ptr::null_mut(), 0u32);
        // SAFETY: `qp` is live: it is freed only by destroy_qp, which callers of
        // this borrow (owner, CM handler, completion handler) cannot race with
        // (see `CmHandler` and the drain in helpers.c).
        let b = unsafe { rpcrdma_cm_send_get(qp, &mut addr, &mut size) };
        if b.is_null() {
            return Err(EBUSY);
        }
        // SAFETY: the buffer is ours until posted or aborted: `size` octets at
        // `addr`, not referenced by any WR (it came off the free list).
        let buf = unsafe { core::slice::from_raw_parts_mut(addr, size as usize) };
        let len = match fill(buf).and_then(|n| u32::try_from(n).map_err(|_| emsgsize())) {
            Ok(n) => n,
            Err(e) => {
                // SAFETY: `b` came from rpcrdma_cm_send_get and was not posted.
                unsafe { rpcrdma_cm_send_abort(b) };
                return Err(e);
            }
        };
        let (inv, rkey) = (invalidate.is_some(), invalidate.unwrap_or(0));
        // SAFETY: `b` came from rpcrdma_cm_send_get and was not posted; `buf` is
        // not used after this point. C checks `len` against the buffer size.
        to_result(unsafe { rpcrdma_cm_send_post(b, len, inv, rkey) })
    }

    /// Sends the connect request with `pdata` (at most 255 octets; empty sends
    /// none). Call from this id's handler, on ROUTE_RESOLVED.
    pub(crate) fn connect(&self, pdata: &[u8]) -> Result {
        let len = u8::try_from(pdata.len()).map_err(|_| EINVAL)?;
        // SAFETY: a live id whose handler lock the caller holds (it is the
        // handler); `pdata` is valid for `len` octets during the call, and the CM
        // copies it.
        to_result(unsafe { rpcrdma_cm_connect_locked(self.raw(), pdata.as_ptr(), len) })
    }

    /// Starts a disconnect (`rdma_disconnect()`); DISCONNECTED follows.
    pub(crate) fn disconnect(&self) -> Result {
        // SAFETY: a live id.
        to_result(unsafe { rdma_disconnect(self.raw()) })
    }
}

/// A CONNECT_REQUEST: a new id, to accept or to leave (and so reject).
pub(crate) struct ConnectRequest<'a> {
    id: *mut rdma_cm_id,
    adopted: Option<*mut Ctx>,
    _listener: &'a Ctx,
}

impl ConnectRequest<'_> {
    /// Accepts the request: the new id gets its own context with `handler`, a QP
    /// and buffers as [`CmIdRef::create_qp`] makes them, and `rdma_accept()` with
    /// `pdata` and `ord` RDMA Reads in flight. On error the request is rejected
    /// and the new id destroyed.
    pub(crate) fn accept(
        &mut self,
        handler: Arc<dyn CmHandler>,
        pdata: &[u8],
        (depth, send_size, recv_size): (u32, u32, u32),
        ord: u8,
    ) -> Result<CmId> {
        if self.adopted.is_some() {
            return Err(EEXIST);
        }
        let len = u8::try_from(pdata.len()).map_err(|_| EINVAL)?;
        let ctx = Ctx::new(handler)?;
        // SAFETY: `ctx` was just allocated and is owned here.
        let c = unsafe { &*ctx };
        c.id.store(self.id, Ordering::Release);
        // We run inside the new id's handler (the CM holds its lock): a drop of the
        // CmId during this call must take the in-handler path.
        c.in_handler.store(current_task(), Ordering::Relaxed);
        // SAFETY: the new id is live during CONNECT_REQUEST; `ctx` outlives it
        // (freed only when the id is destroyed).
        unsafe { rpcrdma_cm_set_context(self.id, ctx.cast()) };
        self.adopted = Some(ctx);
        let id = CmId { ctx };
        id.as_ref().create_qp(depth, send_size, recv_size)?;
        // SAFETY: the handler lock of the new id is held (we are its
        // CONNECT_REQUEST handler); `pdata` is valid for `len` octets.
        to_result(unsafe { rpcrdma_cm_accept(self.id, pdata.as_ptr(), len, ord) })?;
        Ok(id)
    }

    /// The new id, for its names before accepting.
    pub(crate) fn names(&self) -> Names {
        Names::of(self.id)
    }
}

fn completion<'a>(wc: &'a rpcrdma_cm_wc_info) -> Completion<'a> {
    let data = if wc.data.is_null() {
        &[][..]
    } else {
        // SAFETY: helpers.c passes the received message, `len` octets, valid
        // until the callback returns (the buffer is reposted after it).
        unsafe { core::slice::from_raw_parts(wc.data, wc.len as usize) }
    };
    Completion {
        status: wc.status,
        data,
        invalidated: wc.with_invalidate.then_some(wc.invalidate_rkey),
    }
}

/// Called by helpers.c for each Receive completion of a QP made by `create_qp`.
#[no_mangle]
extern "C" fn rpcrdma_cm_recv_rs(owner: *mut c_void, wc: *const rpcrdma_cm_wc_info) {
    // SAFETY: `owner` is the `Ctx` passed to rpcrdma_cm_create_qp, alive until
    // the QP is drained and freed (after this callback returns); `wc` points to
    // a live completion for this call.
    let (ctx, wc) = unsafe { (&*owner.cast::<Ctx>(), &*wc) };
    ctx.handler.recv(&CmIdRef { ctx }, &completion(wc));
}

/// Called by helpers.c for each Send completion of a QP made by `create_qp`.
#[no_mangle]
extern "C" fn rpcrdma_cm_send_rs(owner: *mut c_void, wc: *const rpcrdma_cm_wc_info) {
    // SAFETY: as in rpcrdma_cm_recv_rs.
    let (ctx, wc) = unsafe { (&*owner.cast::<Ctx>(), &*wc) };
    ctx.handler.send_done(&CmIdRef { ctx }, &completion(wc));
}

/// Called by helpers.c for every CM event; non-zero makes the CM destroy `id`.
#[no_mangle]
extern "C" fn rpcrdma_cm_event_rs(
    id: *mut rdma_cm_id,
    context: *mut c_void,
    ev: *const rpcrdma_cm_event_info,
) -> c_int {
    // SAFETY: helpers.c passes a pointer to a live event info for this call.
    let ev = unsafe { &*ev };
    let private_data = if ev.private_data.is_null() {
        &[][..]
    } else {
        // SAFETY: the CM's private data, `private_data_len` octets, valid for the
        // duration of the event.
        unsafe { core::slice::from_raw_parts(ev.private_data, ev.private_data_len as usize) }
    };
    let event = Event {
        kind: EventKind::from_c(ev.event),
        status: ev.status,
        private_data,
        initiator_depth: ev.initiator_depth,
    };
    let ctx_ptr = context.cast::<Ctx>();
    // Every id's context is a `Ctx` from Ctx::new: its own, or (for a
    // CONNECT_REQUEST) its listener's, which the CM copied.
    // SAFETY: a context is freed only after its id is destroyed, which waits for
    // running handlers (a listener's, for its requests): `ctx_ptr` is valid here.
    let ctx = unsafe { &*ctx_ptr };

    if ctx.id.load(Ordering::Acquire) != id {
        // A new id on a listener.
        if event.kind != EventKind::ConnectRequest || ctx.dead.load(Ordering::Relaxed) {
            return 1;
        }
        let mut req = ConnectRequest {
            id,
            adopted: None,
            _listener: ctx,
        };
        ctx.handler.connect_request(&mut req, &event);
        let Some(new_ctx) = req.adopted else {
            // SAFETY: the new id is live and its handler lock is held.
            unsafe { rpcrdma_cm_reject(id) };
            return 1;
        };
        // SAFETY: set by ConnectRequest::accept; freed only by the paths below or
        // by the CmId's Drop.
        let new = unsafe { &*new_ctx };
        new.in_handler.store(0, Ordering::Relaxed);
        if new.destroy_from_handler.load(Ordering::Acquire) {
            // The CmId was dropped (accept failed, or the handler dropped it).
            // SAFETY: the id is about to be destroyed by the CM and nothing else
            // refers to the context.
            drop(unsafe { KBox::from_raw(new_ctx) });
            return 1;
        }
        return 0;
    }

    if ctx.dead.load(Ordering::Relaxed) {
        return 0;
    }
    ctx.in_handler.store(current_task(), Ordering::Relaxed);
    ctx.handler.event(&CmIdRef { ctx }, &event);
    ctx.in_handler.store(0, Ordering::Relaxed);
    if ctx.destroy_from_handler.load(Ordering::Acquire) {
        // SAFETY: the CmId owning this context was dropped inside the handler and
        // left the context to us; returning 1 makes the CM destroy the id, after
        // which no event can refer to the context.
        drop(unsafe { KBox::from_raw(ctx_ptr) });
        return 1;
    }
    0
}
