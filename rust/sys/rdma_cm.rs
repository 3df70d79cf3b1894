// SPDX-License-Identifier: GPL-2.0

//! RDMA connection manager ids and their event handlers (the C half is `cm.c`).
//!
//! Each [`CmId`] owns one `struct rdma_cm_id` and a context holding the
//! `Arc<dyn CmHandler>` that receives its events. The rules of the CM that bite
//! are kept here, so the module logic cannot get them wrong:
//!
//! - Private data is valid only during the event: [`Event::private_data`]
//!   borrows it for the handler call only; callers copy what they keep.
//! - An id must not be destroyed from inside its own handler (the CM holds the
//!   handler lock). Dropping a [`CmId`] there marks it dead (no event reaches
//!   the handler afterwards) and queues its teardown on the module's
//!   workqueue; dropped anywhere else, it is torn down before the drop
//!   returns. Teardown drains and frees the QP (waiting for every [`Qp`]
//!   handle and chunk to be dropped) and then destroys the id. Unloading waits
//!   until every id is gone ([`ModuleQueue`](super::workqueue::ModuleQueue)),
//!   so no handler of the module can still be running when its code is freed.
//! - What only a handler may do (connect, create the QP) is offered only by
//!   [`HandlerId`], which only handlers receive.
//! - CONNECT_REQUEST arrives on a new id that carries its listener's context:
//!   the listener's handler either accepts it with [`ConnectRequest::accept`],
//!   which gives the new id its own context and a QP, or leaves it, and the
//!   request is rejected and the new id destroyed by the CM.
//! - On DEVICE_REMOVAL the CM waits, before it lets the driver free the device,
//!   until every id on it is destroyed; the deferred teardown provides that.

use core::any::Any;
use core::cell::Cell;
use core::ffi::c_void;
use core::mem::ManuallyDrop;
use core::net::{IpAddr, SocketAddr};
use core::pin::Pin;
use core::ptr;
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use kernel::error::to_result;
use kernel::ffi::c_int;
use kernel::prelude::*;
use kernel::sync::Arc;
use kernel::task::Task;
use kernel::workqueue::{impl_has_work, new_work, Work, WorkItem};

use super::bindings::{
    self, c_fn, in_addr, rdma_accept, rdma_bind_addr, rdma_cm_id, rdma_conn_param,
    rdma_connect_locked, rdma_destroy_id, rdma_disconnect, rdma_listen, rdma_lock_handler,
    rdma_reject, rdma_resolve_addr, rdma_resolve_route, rdma_set_afonly, rdma_unlock_handler,
    rpcrdma_cm_buf, rpcrdma_cm_create_id, rpcrdma_cm_create_qp, rpcrdma_cm_destroy_qp,
    rpcrdma_cm_dev_caps, rpcrdma_cm_event_info, rpcrdma_cm_id_caps, rpcrdma_cm_id_names,
    rpcrdma_cm_id_peer_addr, rpcrdma_cm_live_get, rpcrdma_cm_live_put, rpcrdma_cm_qp,
    rpcrdma_cm_qp_get, rpcrdma_cm_set_context, rpcrdma_cm_wc_info, sockaddr, sockaddr_in,
};
use super::param;
use super::qp::{Qp, QpAttr, RecvBuf};
use super::workqueue;

/// `AF_INET` and `AF_INET6`, as C's `int family`.
const AF_INET: c_int = bindings::AF_INET as c_int;
const AF_INET6: c_int = bindings::AF_INET6 as c_int;

macro_rules! event_kinds {
    ($($kind:ident = $c:ident),* $(,)?) => {
        /// `enum rdma_cm_event_type` (values from bindgen's view of
        /// `<rdma/rdma_cm.h>`).
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub(crate) enum EventKind {
            $($kind,)*
            /// A value this module does not know.
            Unknown(i32),
        }

        impl EventKind {
            fn from_c(v: c_int) -> Self {
                match u32::try_from(v) {
                    $(Ok(bindings::$c) => EventKind::$kind,)*
                    _ => EventKind::Unknown(v),
                }
            }
        }
    };
}

event_kinds!(
    AddrResolved = rdma_cm_event_type_RDMA_CM_EVENT_ADDR_RESOLVED,
    AddrError = rdma_cm_event_type_RDMA_CM_EVENT_ADDR_ERROR,
    RouteResolved = rdma_cm_event_type_RDMA_CM_EVENT_ROUTE_RESOLVED,
    RouteError = rdma_cm_event_type_RDMA_CM_EVENT_ROUTE_ERROR,
    ConnectRequest = rdma_cm_event_type_RDMA_CM_EVENT_CONNECT_REQUEST,
    ConnectResponse = rdma_cm_event_type_RDMA_CM_EVENT_CONNECT_RESPONSE,
    ConnectError = rdma_cm_event_type_RDMA_CM_EVENT_CONNECT_ERROR,
    Unreachable = rdma_cm_event_type_RDMA_CM_EVENT_UNREACHABLE,
    Rejected = rdma_cm_event_type_RDMA_CM_EVENT_REJECTED,
    Established = rdma_cm_event_type_RDMA_CM_EVENT_ESTABLISHED,
    Disconnected = rdma_cm_event_type_RDMA_CM_EVENT_DISCONNECTED,
    DeviceRemoval = rdma_cm_event_type_RDMA_CM_EVENT_DEVICE_REMOVAL,
    MulticastJoin = rdma_cm_event_type_RDMA_CM_EVENT_MULTICAST_JOIN,
    MulticastError = rdma_cm_event_type_RDMA_CM_EVENT_MULTICAST_ERROR,
    AddrChange = rdma_cm_event_type_RDMA_CM_EVENT_ADDR_CHANGE,
    TimewaitExit = rdma_cm_event_type_RDMA_CM_EVENT_TIMEWAIT_EXIT,
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
    /// A successful Receive's buffer, its message (as C hands it: writable
    /// memory, see [`RecvBuf::region`]), and whether the handler kept it.
    buf: Option<(*mut rpcrdma_cm_buf, *mut u8, &'a Cell<bool>)>,
}

impl Completion<'_> {
    /// Keeps a successful Receive's message past the callback (it is handled
    /// later, by another thread): the buffer is posted again only when the
    /// result is dropped, and never before the callback returns (qp.c gives
    /// back a buffer released during its callback when the callback ends),
    /// so `data` stays valid for the whole call either way. `None` for a
    /// Send, a failed Receive, or a second call.
    pub(crate) fn keep(&self) -> Option<RecvBuf> {
        let (b, msg, kept) = self.buf?;
        if kept.replace(true) {
            return None;
        }
        // SAFETY: `b` is this successful Receive's buffer, its callback runs
        // now, and the trampoline reports it kept (`kept` is set); its
        // message is the `self.data.len()` octets at `msg`.
        unsafe { RecvBuf::keep(b, msg, self.data.len()) }
    }
}

/// `IB_WC_WR_FLUSH_ERR`: the WR was flushed because the QP went to error.
pub(crate) const WC_FLUSHED: i32 = bindings::ib_wc_status_IB_WC_WR_FLUSH_ERR as i32;

/// What the device under an id offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DevCaps {
    /// Memory management extensions: FRWR, LOCAL_INV and Send With
    /// Invalidate (RFC 8797 Section 3.2 makes remote invalidation depend on
    /// it). False for every device while the `test_no_mem_mgt_ext` parameter
    /// is set.
    pub(crate) mem_mgt_ext: bool,
    /// Pages one FRWR registration may cover.
    pub(crate) max_fast_reg_pages: u32,
    /// RDMA Reads the device serves at once per QP (as responder).
    max_qp_rd_atom: u32,
    /// RDMA Reads the device issues at once per QP (as initiator).
    max_qp_init_rd_atom: u32,
}

/// Receives the events of the ids it is attached to. CM events come with the
/// id's CM handler lock held, in process context (it may sleep). Receives come
/// from a work item, one at a time per QP, in order (it may sleep, for
/// instance in an RDMA Read); Send completions from the CQ's workqueue.
///
/// `recv` and `send_done` must not drop the [`CmId`] of their QP (its teardown
/// waits for them); they may disconnect it.
pub(crate) trait CmHandler: Send + Sync {
    /// An event on an id this handler owns.
    fn event(&self, id: &HandlerId<'_>, ev: &Event<'_>);

    /// A CONNECT_REQUEST on a listener this handler owns. Not accepting (not calling
    /// [`ConnectRequest::accept`]) rejects the request.
    fn connect_request(&self, _req: &mut ConnectRequest<'_>, _ev: &Event<'_>) {}

    /// A Receive completed (successfully, or flushed or failed: see `wc.status`).
    /// The buffer is reposted after this returns. May sleep.
    fn recv(&self, _qp: &Qp, _wc: &Completion<'_>) {}

    /// A Send completed; its buffer is free again.
    fn send_done(&self, _qp: &Qp, _wc: &Completion<'_>) {}

    /// An RDMA Write nobody waits for (a reply's payload, see chunk.c) failed
    /// with `status` (never a flush): the QP is in the error state.
    fn rw_failed(&self, _qp: &Qp, _status: i32) {}

    /// An RDMA Read nobody waited for ended with `status` (0: the data is
    /// there); `done` is what its poster gave.
    fn rw_done(&self, _qp: &Qp, _done: Arc<dyn Any + Send + Sync>, _status: i32) {}
}

/// Per-id context; the C `id->context` points at it.
#[pin_data(PinnedDrop)]
struct Ctx {
    handler: Arc<dyn CmHandler>,
    id: AtomicPtr<rdma_cm_id>,
    qp: AtomicPtr<rpcrdma_cm_qp>,
    /// The task running this id's handler, 0 when none.
    in_handler: AtomicUsize,
    /// Set once the owner gave the id up: events are ignored from then on.
    dead: AtomicBool,
    /// Deferred teardown, when the owner dropped the id inside its handler.
    #[pin]
    reap: Work<Ctx>,
}

impl_has_work! {
    impl HasWork<Self> for Ctx { self.reap }
}

impl WorkItem for Ctx {
    type Pointer = Pin<KBox<Ctx>>;

    fn run(this: Pin<KBox<Ctx>>) {
        let id = this.id.load(Ordering::Acquire);
        // Taking and releasing the id's handler lock waits for the handler
        // that queued us to return (the CM holds the lock across the whole
        // callback, our trampoline's last access to the context included).
        // SAFETY: the id is live (destroyed below, by us alone).
        unsafe {
            rdma_lock_handler(id);
            rdma_unlock_handler(id);
        }
        this.destroy_qp();
        // SAFETY: our id, destroyed exactly once; `dead` is set, so handlers
        // running until rdma_destroy_id() returns touch nothing but the flag.
        unsafe { rdma_destroy_id(id) };
        // Dropping `this` frees the context.
    }
}

#[pinned_drop]
impl PinnedDrop for Ctx {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: a plain C function; paired with the get in Ctx::new.
        unsafe { rpcrdma_cm_live_put() };
    }
}

/// Identifies the running task (its address), to recognise "inside my handler".
fn current_task() -> usize {
    let task: &Task = kernel::current!();
    ptr::from_ref(task) as usize
}

impl Ctx {
    /// A new context, counted among the live ones until freed.
    fn new(handler: Arc<dyn CmHandler>) -> Result<*mut Ctx> {
        // The queue must exist: a context may need it for its teardown.
        workqueue::queue().ok_or(ENODEV)?;
        let ctx = KBox::pin_init(
            pin_init!(Ctx {
                handler,
                id: AtomicPtr::new(ptr::null_mut()),
                qp: AtomicPtr::new(ptr::null_mut()),
                in_handler: AtomicUsize::new(0),
                dead: AtomicBool::new(false),
                reap <- new_work!("rpcrdma_cm_reap"),
            }),
            GFP_KERNEL,
        )?;
        // SAFETY: a plain C function; the put is in PinnedDrop, which runs
        // for this context however it is freed.
        unsafe { rpcrdma_cm_live_get() };
        // SAFETY: the context is never moved out of its box: it is turned back
        // into a `Pin<KBox<Ctx>>` (from_raw) to be freed or queued.
        Ok(KBox::into_raw(unsafe { Pin::into_inner_unchecked(ctx) }))
    }

    /// Frees a context made by `new`.
    ///
    /// Nothing refers to a context any more once its id is destroyed, or is
    /// about to be by the CM with no handler call left.
    ///
    /// # Safety
    ///
    /// `ctx` came from `Ctx::new`, is not queued, and nothing refers to it.
    unsafe fn free(ctx: *mut Ctx) {
        // SAFETY: see above; the box was pinned when made.
        drop(unsafe { Pin::new_unchecked(KBox::from_raw(ctx)) });
    }

    /// Drains and frees the QP with its buffers and CQ, and (once the last
    /// handle is gone) its PD, if there is one. Callers are not completion
    /// handlers, hold no handle of the QP, and no handler can create a QP
    /// meanwhile (`dead` is set, or, for a request whose accept failed, the
    /// caller is the only one who knows the context).
    fn destroy_qp(&self) {
        let qp = self.qp.swap(ptr::null_mut(), Ordering::AcqRel);
        if !qp.is_null() {
            // SAFETY: `qp` came from rpcrdma_cm_create_qp() on our live id and was
            // swapped out, so it is freed exactly once. After the drain no
            // completion refers to it (qp.c).
            unsafe { rpcrdma_cm_destroy_qp(qp) };
        }
    }

    fn qp(&self) -> Option<Qp> {
        let qp = self.qp.load(Ordering::Acquire);
        // A non-null QP is live until `destroy_qp`, which only the owner's
        // drop or the deferred teardown runs. The borrowed handle becomes an
        // owned one.
        // SAFETY: callers hold a borrow of the owner (`&CmId`, or a handler's
        // `HandlerId`, which runs before the teardown can start).
        let borrowed = unsafe { Qp::borrowed(qp) }?;
        // SAFETY: as above, the QP is live while we take a reference.
        unsafe { rpcrdma_cm_qp_get(qp) };
        Some(ManuallyDrop::into_inner(borrowed))
    }
}

/// An id the module owns. Dropping it tears the id down (see the module
/// documentation for how that works inside a handler).
pub(crate) struct CmId {
    ctx: *mut Ctx,
}

// The RDMA CM functions used (rdma_disconnect, rdma_resolve_addr, rdma_listen,
// and the locked destroy in Drop) may be called from any process context.
// SAFETY: so the id and its context may be used and destroyed from any thread:
// the context's mutable state is atomic, the handler is `Send + Sync`.
unsafe impl Send for CmId {}
// `&CmId` allows `listen`, `resolve_addr` and `qp`. The RDMA CM serialises
// concurrent calls on one id itself (its state machine moves under the id's
// lock, and a call made in the wrong state fails with an error). `qp` loads the
// pointer atomically and takes a counted reference; only the owner's drop
// (which needs the `CmId` by value) or the deferred teardown it queues frees it.
// SAFETY: so two threads calling them cannot corrupt anything, and the QP
// cannot be freed during a `qp` call.
unsafe impl Sync for CmId {}

/// A network namespace (C `struct net`), valid while its owner (sunrpc's
/// service, for a listener nfsd creates) holds it.
#[derive(Clone)]
pub(crate) struct Net(pub(super) *mut super::bindings::net);

// SAFETY: only passed to rdma_create_id(), which may run on any thread and
// takes its own reference on the namespace.
unsafe impl Send for Net {}
// SAFETY: as above; `&Net` offers nothing else.
unsafe impl Sync for Net {}

/// Where a CM id connects or listens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Endpoint {
    pub(crate) addr: IpAddr,
    pub(crate) port: u16,
}

impl Endpoint {
    pub(super) fn c_sockaddr(&self) -> CSockAddr {
        let port = self.port.to_be();
        match self.addr {
            IpAddr::V4(a) => CSockAddr::V4(sockaddr_in {
                sin_family: AF_INET as u16,
                sin_port: port,
                sin_addr: in_addr {
                    s_addr: u32::from_ne_bytes(a.octets()),
                },
                ..Default::default()
            }),
            IpAddr::V6(a) => CSockAddr::V6(kernel::bindings::sockaddr_in6 {
                sin6_family: AF_INET6 as u16,
                sin6_port: port,
                sin6_addr: kernel::bindings::in6_addr {
                    in6_u: kernel::bindings::in6_addr__bindgen_ty_1 {
                        u6_addr8: a.octets(),
                    },
                },
                ..Default::default()
            }),
        }
    }
}

/// A socket address as the RDMA CM takes it: a `struct sockaddr_in` or
/// `sockaddr_in6`, passed as a `struct sockaddr *` (the CM reads the family
/// first and then only that family's size).
pub(super) enum CSockAddr {
    V4(sockaddr_in),
    V6(kernel::bindings::sockaddr_in6),
}

impl CSockAddr {
    pub(super) fn as_mut_ptr(&mut self) -> *mut sockaddr {
        match self {
            CSockAddr::V4(sin) => ptr::from_mut(sin).cast(),
            CSockAddr::V6(sin6) => ptr::from_mut(sin6).cast(),
        }
    }

    /// Its size, as `struct sockaddr` users take it with the pointer.
    pub(super) fn len(&self) -> usize {
        match self {
            CSockAddr::V4(sin) => core::mem::size_of_val(sin),
            CSockAddr::V6(sin6) => core::mem::size_of_val(sin6),
        }
    }
}

/// The address at `sa`, if of a family we speak (IPv4, IPv6). The CM keeps
/// ids' addresses in a `struct sockaddr_storage`, large enough for any.
///
/// # Safety
///
/// `sa` points to a valid `struct sockaddr` as large as its family says.
pub(super) unsafe fn sockaddr_from_c(sa: *const sockaddr) -> Option<SocketAddr> {
    // SAFETY: see above; the family comes first in every sockaddr.
    let family = c_int::from(unsafe { (*sa).sa_family });
    match family {
        AF_INET => {
            // SAFETY: an AF_INET address is a sockaddr_in (see above).
            let sin = unsafe { &*sa.cast::<sockaddr_in>() };
            let ip = IpAddr::from(sin.sin_addr.s_addr.to_ne_bytes());
            Some(SocketAddr::new(ip, u16::from_be(sin.sin_port)))
        }
        AF_INET6 => {
            // SAFETY: an AF_INET6 address is a sockaddr_in6 (see above).
            let sin6 = unsafe { &*sa.cast::<kernel::bindings::sockaddr_in6>() };
            // SAFETY: every member of the in6_addr union is the same 16 octets.
            let ip = IpAddr::from(unsafe { sin6.sin6_addr.in6_u.u6_addr8 });
            Some(SocketAddr::new(ip, u16::from_be(sin6.sin6_port)))
        }
        _ => None,
    }
}

impl CmId {
    /// A new RC id in the initial network namespace whose events go to
    /// `handler` (the debugfs caller's, test builds).
    #[cfg(CONFIG_RPCRDMA_CM_TEST)]
    pub(crate) fn new(handler: Arc<dyn CmHandler>) -> Result<Self> {
        Self::new_in(handler, None)
    }

    /// A new RC id in namespace `net` (the initial one if `None`).
    pub(crate) fn new_in(handler: Arc<dyn CmHandler>, net: Option<&Net>) -> Result<Self> {
        let ctx = Ctx::new(handler)?;
        let mut id = ptr::null_mut();
        let net = net.map_or(ptr::null_mut(), |n| n.0);
        // `ctx` is freed only after the id is destroyed (see Drop); the CM takes
        // its own reference on `net`.
        // SAFETY: `ctx` outlives the id; `net` is null or a namespace the
        // caller keeps alive; `id` is a valid out pointer.
        let r = unsafe { rpcrdma_cm_create_id(ctx.cast(), net, &mut id) };
        if let Err(e) = to_result(r) {
            // SAFETY: from Ctx::new, not queued, and no id refers to it.
            unsafe { Ctx::free(ctx) };
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

    fn raw(&self) -> *mut rdma_cm_id {
        self.ctx().id.load(Ordering::Acquire)
    }

    /// Binds to `ep` and listens (`rdma_bind_addr()`, `rdma_listen()`).
    /// An IPv6 listener takes IPv6 only (`rdma_set_afonly()`), as nfsd's
    /// listeners do: IPv4 has a listener of its own.
    pub(crate) fn listen(&self, ep: &Endpoint, backlog: i32) -> Result {
        let mut sa = ep.c_sockaddr();
        if ep.addr.is_ipv6() {
            // SAFETY: our live id, not bound yet.
            to_result(unsafe { rdma_set_afonly(self.raw(), 1) })?;
        }
        // SAFETY: our live id; `sa` is valid during the call and the CM copies it.
        to_result(unsafe { rdma_bind_addr(self.raw(), sa.as_mut_ptr()) })?;
        // SAFETY: our live id, bound above.
        to_result(unsafe { rdma_listen(self.raw(), backlog) })
    }

    /// Starts resolving `ep` (`rdma_resolve_addr()`): ADDR_RESOLVED or ADDR_ERROR
    /// follows.
    pub(crate) fn resolve_addr(&self, ep: &Endpoint, timeout_ms: usize) -> Result {
        let mut sa = ep.c_sockaddr();
        // SAFETY: our live id; no source address (null); `sa` is valid during the
        // call and the CM copies it.
        to_result(unsafe {
            rdma_resolve_addr(self.raw(), ptr::null_mut(), sa.as_mut_ptr(), timeout_ms)
        })
    }

    /// A handle on the QP, if one was created.
    pub(crate) fn qp(&self) -> Option<Qp> {
        self.ctx().qp()
    }
}

impl CmId {
    /// Drops the id without waiting for its teardown, which runs on the
    /// module's workqueue: for callers whose own thread still holds what the
    /// teardown waits for (QP handles, kept Receive buffers, chunks).
    pub(crate) fn drop_deferred(self) {
        let me = core::mem::ManuallyDrop::new(self);
        let ctx = me.ctx();
        let id = ctx.id.load(Ordering::Acquire);
        if ctx.in_handler.load(Ordering::Relaxed) != current_task() {
            // SAFETY: our live id, and we are not its handler. Once `dead` is
            // set under the handler lock no handler touches the QP.
            unsafe { rdma_lock_handler(id) };
            ctx.dead.store(true, Ordering::Relaxed);
            // SAFETY: locked just above.
            unsafe { rdma_unlock_handler(id) };
        } else {
            ctx.dead.store(true, Ordering::Relaxed);
        }
        // SAFETY: from Ctx::new, pinned when made, queued once (the CmId is
        // consumed; its Drop does not run).
        let boxed = unsafe { Pin::new_unchecked(KBox::from_raw(me.ctx)) };
        match workqueue::queue() {
            Some(q) => q.enqueue(boxed),
            None => {
                pr_err!("cannot defer the teardown of an id: leaking it\n");
                core::mem::forget(boxed);
            }
        }
    }
}

impl Drop for CmId {
    fn drop(&mut self) {
        let ctx = self.ctx();
        let id = ctx.id.load(Ordering::Acquire);
        if ctx.in_handler.load(Ordering::Relaxed) == current_task() {
            // Inside this id's own handler (the CM holds its lock): no more
            // events for the handler, and the teardown runs on the module's
            // workqueue once the handler has returned.
            ctx.dead.store(true, Ordering::Relaxed);
            // SAFETY: from Ctx::new, pinned when made, not queued before (a
            // CmId is dropped once); the work item owns it from here.
            let boxed = unsafe { Pin::new_unchecked(KBox::from_raw(self.ctx)) };
            match workqueue::queue() {
                Some(q) => q.enqueue(boxed),
                // Ctx::new checked that the queue exists, and the queue is
                // destroyed only once no context is left: unreachable.
                None => {
                    pr_err!("cannot defer the teardown of an id: leaking it\n");
                    core::mem::forget(boxed);
                }
            }
            return;
        }
        // SAFETY: `id` is our live id and we are not inside its handler, so taking
        // the handler lock cannot deadlock on ourselves. Once `dead` is set
        // under it, no handler touches the QP any more.
        unsafe { rdma_lock_handler(id) };
        ctx.dead.store(true, Ordering::Relaxed);
        // SAFETY: locked just above.
        unsafe { rdma_unlock_handler(id) };
        ctx.destroy_qp();
        // SAFETY: our id, destroyed exactly once (a handler seeing `dead` never asks
        // the CM to destroy it). rdma_destroy_id() waits for running handlers.
        unsafe { rdma_destroy_id(id) };
        // SAFETY: no id refers to the context any more.
        unsafe { Ctx::free(self.ctx) };
    }
}

/// The id a handler is called for: what only its handler may do, while the CM
/// holds the id's handler lock.
pub(crate) struct HandlerId<'a> {
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
    /// it: an owner's `CmId`, a handler's `HandlerId`, or a request during its
    /// event).
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

/// The peer's address of a live `id` (see [`Names::of`]).
/// An IPv4-mapped IPv6 peer is its IPv4 address: one host, one peer (the
/// per-peer connection limit counts it once).
fn peer_of(id: *mut rdma_cm_id) -> Option<SocketAddr> {
    // SAFETY: `id` is live; C returns a pointer into it.
    let sa = unsafe { rpcrdma_cm_id_peer_addr(id) };
    // SAFETY: the id's sockaddr_storage, alive while the id is (see above).
    let a = unsafe { sockaddr_from_c(sa) }?;
    Some(SocketAddr::new(a.ip().to_canonical(), a.port()))
}

/// What the device of a live `id` offers (see [`Names::of`]); `None` before
/// the id has a device.
fn caps_of(id: *mut rdma_cm_id) -> Option<DevCaps> {
    let mut c = rpcrdma_cm_dev_caps::default();
    // SAFETY: `id` is live; `c` is a valid out pointer.
    to_result(unsafe { rpcrdma_cm_id_caps(id, &mut c) }).ok()?;
    Some(DevCaps {
        mem_mgt_ext: c.mem_mgt_ext && !param::test_no_mem_mgt_ext(),
        max_fast_reg_pages: c.max_fast_reg_page_list_len,
        max_qp_rd_atom: c.max_qp_rd_atom,
        max_qp_init_rd_atom: c.max_qp_init_rd_atom,
    })
}

/// Connection parameters carrying `pdata` (at most 255 octets; empty: none),
/// the rest zero. `pdata` must outlive the call the result is passed to.
fn conn_param(pdata: &[u8]) -> Result<rdma_conn_param> {
    let len = u8::try_from(pdata.len()).map_err(|_| EINVAL)?;
    Ok(rdma_conn_param {
        private_data: if len == 0 {
            ptr::null()
        } else {
            pdata.as_ptr().cast()
        },
        private_data_len: len,
        ..Default::default()
    })
}

/// Creates the QP of the id behind `ctx` (its handler runs, or it is being
/// accepted in its CONNECT_REQUEST).
fn create_qp(ctx: &Ctx, attr: &QpAttr) -> Result {
    if !ctx.qp.load(Ordering::Relaxed).is_null() {
        return Err(EEXIST);
    }
    let mut qp = ptr::null_mut();
    let owner = ptr::from_ref(ctx).cast_mut().cast::<c_void>();
    let a = attr.c()?;
    // SAFETY: a live id whose handler lock is held (see the callers); `owner`
    // is this id's context, which outlives the QP (destroy_qp runs before the
    // context is freed); `a` and `qp` are valid for the call.
    to_result(unsafe { rpcrdma_cm_create_qp(ctx.id.load(Ordering::Acquire), &a, owner, &mut qp) })?;
    ctx.qp.store(qp, Ordering::Release);
    Ok(())
}

impl HandlerId<'_> {
    fn raw(&self) -> *mut rdma_cm_id {
        self.ctx.id.load(Ordering::Acquire)
    }

    /// Starts route resolution (after ADDR_RESOLVED).
    pub(crate) fn resolve_route(&self, timeout_ms: usize) -> Result {
        // SAFETY: a live id (its handler runs).
        to_result(unsafe { rdma_resolve_route(self.raw(), timeout_ms) })
    }

    /// The two ends' addresses and the device, as known now.
    pub(crate) fn names(&self) -> Names {
        Names::of(self.raw())
    }

    /// What the id's device offers, once it has one (after ADDR_RESOLVED).
    pub(crate) fn caps(&self) -> Option<DevCaps> {
        caps_of(self.raw())
    }

    /// Creates a PD, CQ and RC QP on the id's device with buffers as `attr`
    /// says, the initial Receives posted. Completions go to this id's handler.
    pub(crate) fn create_qp(&self, attr: &QpAttr) -> Result {
        create_qp(self.ctx, attr)
    }

    /// Sends the connect request with `pdata` (at most 255 octets; empty sends
    /// none), after ROUTE_RESOLVED.
    pub(crate) fn connect(&self, pdata: &[u8]) -> Result {
        let caps = caps_of(self.raw()).ok_or(ENODEV)?;
        let mut param = conn_param(pdata)?;
        // As xprtrdma: the server reads from us, we never read from it.
        param.responder_resources = u8::try_from(caps.max_qp_rd_atom).unwrap_or(u8::MAX);
        param.initiator_depth = 0;
        param.retry_count = 6;
        // SAFETY: a live id whose handler lock is held (we are its handler);
        // `param` and the private data it points to are valid during the call,
        // and the CM copies both.
        to_result(unsafe { rdma_connect_locked(self.raw(), &mut param) })
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
    /// `rdma_accept()` was called and failed: it rejected the request itself.
    accept_failed: bool,
    _listener: &'a Ctx,
}

impl ConnectRequest<'_> {
    /// Accepts the request: the new id gets its own context with `handler`, a QP
    /// and buffers as `attr` says, and `rdma_accept()` with `pdata` and `ord`
    /// RDMA Reads in flight. On error the request is rejected and the new id
    /// destroyed by the CM.
    pub(crate) fn accept(
        &mut self,
        handler: Arc<dyn CmHandler>,
        pdata: &[u8],
        attr: &QpAttr,
        ord: u8,
    ) -> Result<CmId> {
        if self.adopted.is_some() {
            return Err(EEXIST);
        }
        let ctx = Ctx::new(handler)?;
        // SAFETY: `ctx` was just allocated and is owned here.
        let c = unsafe { &*ctx };
        c.id.store(self.id, Ordering::Release);
        let accepted = create_qp(c, attr).and_then(|()| {
            let caps = caps_of(self.id).ok_or(ENODEV)?;
            let mut param = conn_param(pdata)?;
            // We issue the RDMA Reads (of the client's Read chunks); we serve none.
            param.responder_resources = 0;
            param.initiator_depth =
                ord.min(u8::try_from(caps.max_qp_init_rd_atom).unwrap_or(u8::MAX));
            // SAFETY: the new id is live during CONNECT_REQUEST and its handler
            // lock is held (we run its handler); `param` and the private data are
            // valid during the call, and the CM copies both.
            let r = to_result(unsafe { rdma_accept(self.id, &mut param) });
            self.accept_failed = r.is_err();
            r
        });
        if let Err(e) = accepted {
            c.destroy_qp();
            // SAFETY: from Ctx::new, not queued; the id never pointed at it.
            unsafe { Ctx::free(ctx) };
            return Err(e);
        }
        // We run inside the new id's handler: a drop of the CmId during this
        // event must take the deferred path.
        c.in_handler.store(current_task(), Ordering::Relaxed);
        // SAFETY: the new id is live; `ctx` outlives it (freed only after the id
        // is destroyed). No event reaches the new id before we return.
        unsafe { rpcrdma_cm_set_context(self.id, ctx.cast()) };
        self.adopted = Some(ctx);
        Ok(CmId { ctx })
    }

    /// The new id, for the C side of the layer (the server class).
    pub(super) fn raw_id(&self) -> *mut rdma_cm_id {
        self.id
    }

    /// The new id, for its names before accepting.
    pub(crate) fn names(&self) -> Names {
        Names::of(self.id)
    }

    /// The requesting peer's address.
    pub(crate) fn peer(&self) -> Option<SocketAddr> {
        peer_of(self.id)
    }

    /// What the new id's device offers.
    pub(crate) fn caps(&self) -> Option<DevCaps> {
        caps_of(self.id)
    }
}

fn completion(wc: &rpcrdma_cm_wc_info) -> Completion<'_> {
    let data = if wc.data.is_null() {
        &[][..]
    } else {
        // SAFETY: qp.c passes the received message, `len` octets, valid
        // until the callback returns (the buffer is reposted after it).
        unsafe { core::slice::from_raw_parts(wc.data, wc.len as usize) }
    };
    Completion {
        status: wc.status,
        data,
        invalidated: wc.with_invalidate.then_some(wc.invalidate_rkey),
        buf: None,
    }
}

/// Called by qp.c for each Receive completion of a QP made by `create_qp`;
/// true keeps the buffer `b` for the owner (released later).
///
/// # Safety
///
/// Called only by qp.c, one completion at a time per QP, in order: from its
/// Receive work (one work item), or for a QP made with `recv_direct` from
/// the CQ's polling work; with `owner` the context given to `create_qp` and
/// `qp` that QP, both alive until teardown has drained the QP and flushed
/// the work,
/// and `wc` and `b` the completion and its buffer, valid for the call.
#[no_mangle]
unsafe extern "C" fn rpcrdma_cm_recv_rs(
    owner: *mut c_void,
    qp: *mut rpcrdma_cm_qp,
    b: *mut rpcrdma_cm_buf,
    wc: *const rpcrdma_cm_wc_info,
) -> bool {
    // SAFETY: `owner` is the `Ctx` passed to rpcrdma_cm_create_qp, alive until
    // the QP is drained and freed (after this callback returns), and so is
    // `qp`; `wc` points to a live completion for this call, of buffer `b`.
    let (ctx, wc, qp) = unsafe { (&*owner.cast::<Ctx>(), &*wc, Qp::borrowed(qp)) };
    let kept = Cell::new(false);
    if let Some(qp) = qp {
        let mut c = completion(wc);
        if c.status == 0 {
            c.buf = Some((b, wc.data, &kept));
        }
        ctx.handler.recv(&qp, &c);
    }
    kept.get()
}
c_fn!(rpcrdma_cm_recv_rs);

/// Called by qp.c for each Send completion of a QP made by `create_qp`.
///
/// # Safety
///
/// Called only by qp.c's Send completion handler, from the CQ's polling
/// work (IB_POLL_WORKQUEUE), with `owner` and `qp` as for [`rpcrdma_cm_recv_rs`] and `wc` the
/// completion, valid for the call.
#[no_mangle]
unsafe extern "C" fn rpcrdma_cm_send_rs(
    owner: *mut c_void,
    qp: *mut rpcrdma_cm_qp,
    wc: *const rpcrdma_cm_wc_info,
) {
    // SAFETY: as in rpcrdma_cm_recv_rs.
    let (ctx, wc, qp) = unsafe { (&*owner.cast::<Ctx>(), &*wc, Qp::borrowed(qp)) };
    if let Some(qp) = qp {
        ctx.handler.send_done(&qp, &completion(wc));
    }
}
c_fn!(rpcrdma_cm_send_rs);

/// Called by chunk.c when an RDMA Read or Write it did not wait for ended: a
/// Read posted with a `done` context ([`RwDone`]), or a Write that failed.
///
/// # Safety
///
/// Called only by chunk.c's RDMA Read/Write completion, from the CQ's
/// polling work (IB_POLL_WORKQUEUE), once per chain, with `owner` and `qp` as for
/// [`rpcrdma_cm_recv_rs`] and `done` null or the box [`RwDone::into_c`] made
/// for that chain, handed back exactly once.
#[no_mangle]
unsafe extern "C" fn rpcrdma_cm_rw_done_rs(
    owner: *mut c_void,
    qp: *mut rpcrdma_cm_qp,
    done: *mut c_void,
    status: c_int,
) {
    // The context, if any, is ours again whatever happens next.
    // SAFETY: a non-null `done` is the box `RwDone::into_c` made for this
    // chain, which C hands back exactly once.
    let done = (!done.is_null()).then(|| unsafe { RwDone::from_c(done) });
    // SAFETY: as in rpcrdma_cm_recv_rs: the QP's owner and the QP are alive
    // while its completions run (teardown drains them first).
    let (ctx, qp) = unsafe { (&*owner.cast::<Ctx>(), Qp::borrowed(qp)) };
    let Some(qp) = qp else { return };
    match done {
        Some(d) => ctx.handler.rw_done(&qp, d.0, status),
        None => ctx.handler.rw_failed(&qp, status),
    }
}
c_fn!(rpcrdma_cm_rw_done_rs);

/// What the owner of a QP is handed back when an RDMA Read it did not wait
/// for ends ([`CmHandler::rw_done`]).
pub(crate) struct RwDone(pub(crate) Arc<dyn Any + Send + Sync>);

impl RwDone {
    /// The context C carries for a chain: a box, freed by [`RwDone::from_c`].
    pub(super) fn into_c(self) -> Result<*mut c_void> {
        Ok(KBox::into_raw(KBox::new(self, GFP_KERNEL)?).cast())
    }

    /// Takes back a context made by [`RwDone::into_c`].
    ///
    /// # Safety
    ///
    /// `p` came from `into_c` and was not taken back before.
    pub(super) unsafe fn from_c(p: *mut c_void) -> RwDone {
        // SAFETY: see above.
        KBox::into_inner(unsafe { KBox::from_raw(p.cast::<RwDone>()) })
    }
}

/// Called by cm.c for every CM event; non-zero makes the CM destroy `id`.
///
/// # Safety
///
/// Called only by cm.c's event handler, which the RDMA CM runs one event at
/// a time per id, with `id` the id, `context` its context (null once it was
/// taken away) and `ev` the event's information, its private data
/// included, valid for the call. A non-zero return makes the CM destroy
/// `id` once this returns: nothing of ours may keep it then.
#[no_mangle]
unsafe extern "C" fn rpcrdma_cm_event_rs(
    id: *mut rdma_cm_id,
    context: *mut c_void,
    ev: *const rpcrdma_cm_event_info,
) -> c_int {
    // SAFETY: cm.c passes a pointer to a live event info for this call.
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
    // Every id's context is a `Ctx` from Ctx::new: its own, or (for a
    // CONNECT_REQUEST) its listener's, which the CM copied.
    // SAFETY: a context is freed only after its id is destroyed, which waits for
    // running handlers (a listener's, for its requests): the context is valid.
    let ctx = unsafe { &*context.cast::<Ctx>() };

    if ctx.id.load(Ordering::Acquire) != id {
        // A new id on a listener.
        if event.kind != EventKind::ConnectRequest || ctx.dead.load(Ordering::Relaxed) {
            return 1;
        }
        let mut req = ConnectRequest {
            id,
            adopted: None,
            accept_failed: false,
            _listener: ctx,
        };
        ctx.handler.connect_request(&mut req, &event);
        let Some(new_ctx) = req.adopted else {
            if !req.accept_failed {
                let reason = bindings::ib_cm_rej_reason_IB_CM_REJ_CONSUMER_DEFINED as u8;
                // SAFETY: the new id is live and its handler lock is held; no
                // private data.
                unsafe { rdma_reject(id, ptr::null(), 0, reason) };
            }
            return 1;
        };
        // SAFETY: set by ConnectRequest::accept; freed only by the new id's
        // teardown, which cannot have run yet (it waits for this handler).
        unsafe { &*new_ctx }.in_handler.store(0, Ordering::Relaxed);
        return 0;
    }

    if ctx.dead.load(Ordering::Relaxed) {
        return 0;
    }
    ctx.in_handler.store(current_task(), Ordering::Relaxed);
    ctx.handler.event(&HandlerId { ctx }, &event);
    ctx.in_handler.store(0, Ordering::Relaxed);
    0
}
c_fn!(rpcrdma_cm_event_rs);
