// SPDX-License-Identifier: GPL-2.0

//! The server-side RPC transport class nfsd uses (C half: `svc.c`).
//!
//! sunrpc drives a transport through its `svc_xprt_ops`; `svc.c` turns each op
//! into a call on the Rust context of the transport ([`SvcXprtOps`]). A
//! listener's context comes from the registered [`SvcFactory`] (xpo_create);
//! a connection's is attached when the module accepts it at the CM level,
//! before nfsd's xpo_accept picks it up ([`PendingXprt`]).
//!
//! References: sunrpc counts its `struct svc_xprt`; an [`SvcXprt`] is one
//! counted reference, so the module may keep a transport while it needs to
//! tell nfsd about it (data queued, connection gone). The Rust context of a
//! transport lives until sunrpc frees it (xpo_free); a connection drops its
//! [`SvcXprt`] at xpo_detach, which breaks the cycle between the two.
//!
//! A request's transport context ([`SvcCall`]) goes into `rq_xprt_ctxt` in
//! one allocation ([`CallCtxt`], a thin pointer) by recvfrom and is dropped
//! by xpo_release_ctxt, after sendto: it owns whatever the request's argument
//! points into.

use core::any::Any;
use core::ffi::c_void;
use core::marker::PhantomData;
use core::net::SocketAddr;
use core::ptr::NonNull;
use kernel::error::to_result;
use kernel::ffi::c_int;
use kernel::prelude::*;
use kernel::sync::Arc;

use super::bindings::{
    c_fn, kvec, page, rpcrdma_cm_kvec_writable, rpcrdma_cm_page_address,
    rpcrdma_cm_rdma_read_pages, rpcrdma_cm_rdma_write_held, rpcrdma_cm_rdma_write_kvec_held,
    rpcrdma_cm_rw, rpcrdma_cm_svc_arg_done, rpcrdma_cm_svc_bc_xprt, rpcrdma_cm_svc_close,
    rpcrdma_cm_svc_conn_pending, rpcrdma_cm_svc_enqueue, rpcrdma_cm_svc_give_pages,
    rpcrdma_cm_svc_parts, rpcrdma_cm_svc_received, rpcrdma_cm_svc_register,
    rpcrdma_cm_svc_rqst_parts, rpcrdma_cm_svc_set_data, rpcrdma_cm_svc_unregister,
    rpcrdma_cm_svc_xprt, rpcrdma_cm_svc_xprt_discard, rpcrdma_cm_svc_xprt_get,
    rpcrdma_cm_svc_xprt_new, rpcrdma_cm_svc_xprt_put, rpcrdma_cm_svc_xprt_set_rs, svc_rqst,
    xdr_buf, RPCRDMA_CM_SVC_BC_REQUESTS,
};
use super::class_slot::FactorySlot;
use super::qp::{HeldWrite, MsgRegion, Qp};
use super::rdma_cm::{sockaddr_from_c, ConnectRequest, Net, RwDone};
use super::to_c_int;
use super::xdr_buf::XdrMsg;
use super::xprt::RpcXprt;
use core::ptr;
use kernel::page::Page;

/// Octets per page of a request.
const PAGE: u32 = kernel::page::PAGE_SIZE as u32;

/// Makes the Rust side of the listeners nfsd asks for (xpo_create).
pub(crate) trait SvcFactory: Send + Sync {
    /// Listen on `ep` in `net` for the listener `me` (not yet known to nfsd:
    /// keep only what [`SvcListenerRef`] offers).
    fn create(&self, me: SvcListenerRef, net: &Net, ep: SocketAddr) -> Result<Arc<dyn SvcXprtOps>>;
}

/// What sunrpc asks of a transport. Listeners implement `accept` and
/// `detach`; connections `recvfrom`, `sendto` and `detach`.
pub(crate) trait SvcXprtOps: Send + Sync {
    /// xpo_accept (listeners): the next connection the module accepted, and
    /// whether more wait.
    fn accept(&self) -> (Option<PendingXprt>, bool) {
        (None, false)
    }

    /// xpo_recvfrom: must call [`SvcRqst::received`] exactly once; returns
    /// the length [`SvcRqst::accept_call`] returned, or 0 when there is
    /// nothing for nfsd to process.
    fn recvfrom(&self, _rq: &mut SvcRqst<'_>) -> u32 {
        0
    }

    /// xpo_sendto: sends the reply nfsd encoded; `call` is what recvfrom
    /// gave the request.
    fn sendto(&self, _rq: &SvcRqst<'_>, _call: Option<&dyn SvcCall>) -> Result {
        Err(ENOTCONN)
    }

    /// xpo_detach: nfsd closes the transport (another thread may still be in
    /// sendto). Must not sleep long: no teardown that waits for requests.
    fn detach(&self) {}

    /// The backchannel sends a reverse-direction Call (`msg`, a whole RPC
    /// message); `ENOTCONN` closes the transport, `EAGAIN` retries.
    fn bc_send(&self, _msg: &XdrMsg<'_>) -> Result {
        Err(ENOTCONN)
    }
}

/// A request's transport context (see the module documentation).
pub(crate) trait SvcCall: Send + Sync + Any {
    /// The Call message, when it stays in memory the context owns (nfsd
    /// may rewrite it in place).
    fn arg(&self) -> Option<MsgRegion> {
        None
    }

    /// xpo_result_payload: nfsd's DDP-eligible result is `len` octets at
    /// `offset` of the reply.
    fn result_payload(&self, _offset: u32, _len: u32) -> Result {
        Ok(())
    }

    /// For the transport's sendto to find its own type.
    fn as_any(&self) -> &dyn Any;
}

/// The head of a request's transport context as sunrpc keeps it in
/// `rq_xprt_ctxt`: the context is one allocation ([`CallCtxt`]) reached
/// through a thin pointer, whatever the transport's call type, and the head
/// says how to see it as a [`SvcCall`] and how to free it.
///
/// # Invariants
///
/// The head begins a live [`CallCtxt<T>`] made by [`CallCtxt::new_raw`],
/// and `as_dyn` and `free` are that `T`'s [`CallCtxt::as_dyn_raw`] and
/// [`CallCtxt::free_raw`].
#[repr(C)]
struct CtxtHead {
    // SAFETY: to be called with this head only (the type invariant).
    as_dyn: unsafe fn(*const CtxtHead) -> *const dyn SvcCall,
    // SAFETY: to be called with this head only, once, nothing using it after.
    free: unsafe fn(*mut CtxtHead),
}

/// A request's transport context: a call and, first (`repr(C)`), its head.
#[repr(C)]
struct CallCtxt<T> {
    head: CtxtHead,
    call: T,
}

impl<T: SvcCall> CallCtxt<T> {
    /// Boxes `call` and returns the context's thin pointer, for
    /// `rq_xprt_ctxt`; [`ctxt_free`] frees it.
    fn new_raw(call: T) -> Result<*mut CtxtHead> {
        let head = CtxtHead {
            as_dyn: Self::as_dyn_raw,
            free: Self::free_raw,
        };
        let b = KBox::new(CallCtxt { head, call }, GFP_KERNEL)?;
        Ok(KBox::into_raw(b).cast())
    }

    /// # Safety
    ///
    /// `h` came from [`Self::new_raw`] and is not freed.
    unsafe fn as_dyn_raw(h: *const CtxtHead) -> *const dyn SvcCall {
        // SAFETY: the head is the context's first field (`repr(C)`), so `h`
        // is the context's address, from the whole allocation's pointer.
        unsafe { ptr::addr_of!((*h.cast::<Self>()).call) }
    }

    /// # Safety
    ///
    /// `h` came from [`Self::new_raw`], unfreed, and is not used after.
    unsafe fn free_raw(h: *mut CtxtHead) {
        // SAFETY: the box `new_raw` made, given back once (above).
        drop(unsafe { KBox::from_raw(h.cast::<Self>()) });
    }
}

/// The call of the context `ctxt`.
///
/// # Safety
///
/// `ctxt` came from [`CallCtxt::new_raw`] and stays unfreed for `'a`.
unsafe fn ctxt_call<'a>(ctxt: *const c_void) -> &'a dyn SvcCall {
    let h = ctxt.cast::<CtxtHead>();
    // SAFETY: a live context's head (above), whose `as_dyn` is its own
    // (type invariant); the call lives as long as the context.
    unsafe { &*((*h).as_dyn)(h) }
}

/// Frees the context `ctxt`, its call with it.
///
/// # Safety
///
/// `ctxt` came from [`CallCtxt::new_raw`], unfreed, and is not used after.
unsafe fn ctxt_free(ctxt: *mut c_void) {
    let h = ctxt.cast::<CtxtHead>();
    // SAFETY: a live context's head, whose `free` is its own (type
    // invariant); given back once (above).
    unsafe { ((*h).free)(h) }
}

/// The registered class's factory.
static FACTORY: FactorySlot<dyn SvcFactory> = FactorySlot::new();

/// While it lives, nfsd can create listeners of the class through `factory`.
pub(crate) struct SvcClass {
    _private: (),
}

impl SvcClass {
    /// Registers the server transport class `name` (at most 15 octets).
    /// `EEXIST` if a class of that name exists (rpcrdma.ko's "rdma").
    pub(crate) fn register(name: &CStr, factory: Arc<dyn SvcFactory>) -> Result<SvcClass> {
        FACTORY.fill(factory, || {
            // SAFETY: `name` is NUL-terminated; C copies it.
            to_result(unsafe { rpcrdma_cm_svc_register(name.as_char_ptr()) })
        })?;
        Ok(SvcClass { _private: () })
    }
}

impl Drop for SvcClass {
    fn drop(&mut self) {
        // SAFETY: registered in `register`. Every transport of the class holds
        // a module reference, so none exists while the module unloads: no
        // xpo_create runs during or after this.
        unsafe { rpcrdma_cm_svc_unregister() };
        FACTORY.empty();
    }
}

/// A listener nfsd is creating, for the module to report connections on.
/// Valid until the listener's Rust context is dropped (it is the listener's
/// own context that holds it).
#[derive(Clone, Copy)]
pub(crate) struct SvcListenerRef(NonNull<rpcrdma_cm_svc_xprt>);

// SAFETY: a pointer to a C transport whose operations used here may run in
// any process context; validity is the holder's rule (type documentation).
unsafe impl Send for SvcListenerRef {}
// SAFETY: as above.
unsafe impl Sync for SvcListenerRef {}

impl SvcListenerRef {
    /// A transport for a connection being accepted on the listener (in its
    /// CONNECT_REQUEST handler); nfsd gets it from [`SvcXprtOps::accept`].
    pub(crate) fn new_conn(&self, req: &ConnectRequest<'_>) -> Result<PendingXprt> {
        // SAFETY: the listener is live (type rule); the request's id is live
        // during its CONNECT_REQUEST.
        let x = unsafe { rpcrdma_cm_svc_xprt_new(self.0.as_ptr(), req.raw_id()) };
        NonNull::new(x).map(PendingXprt).ok_or(ENOMEM)
    }

    /// Tells nfsd a connection waits (it calls xpo_accept).
    pub(crate) fn conn_pending(&self) {
        // SAFETY: the listener is live (type rule).
        unsafe { rpcrdma_cm_svc_conn_pending(self.0.as_ptr()) };
    }
}

/// A connection's transport that nfsd has not accepted yet: it owns the
/// transport's first reference.
pub(crate) struct PendingXprt(NonNull<rpcrdma_cm_svc_xprt>);

// SAFETY: as for SvcListenerRef; owned, so moved whole between threads.
unsafe impl Send for PendingXprt {}
// SAFETY: `&PendingXprt` offers nothing that changes the transport.
unsafe impl Sync for PendingXprt {}

impl PendingXprt {
    /// Attaches the connection's Rust context (its ops) and returns a counted
    /// reference for the module.
    pub(crate) fn attach(&self, ops: Arc<dyn SvcXprtOps>) -> Result<SvcXprt> {
        let rs = KBox::into_raw(KBox::new(ops, GFP_KERNEL)?);
        // SAFETY: the transport is live (we own a reference) and has no
        // context yet; C frees `rs` through xpo_free only.
        unsafe { rpcrdma_cm_svc_xprt_set_rs(self.0.as_ptr(), rs.cast()) };
        // SAFETY: as above; the reference is SvcXprt's.
        unsafe { rpcrdma_cm_svc_xprt_get(self.0.as_ptr()) };
        Ok(SvcXprt(self.0))
    }
}

impl Drop for PendingXprt {
    fn drop(&mut self) {
        // SAFETY: never handed to nfsd (`into_c` forgets self): we own the
        // first reference, dropped here (through xpo_free if it was last).
        unsafe { rpcrdma_cm_svc_xprt_discard(self.0.as_ptr()) };
    }
}

impl PendingXprt {
    fn into_c(self) -> *mut rpcrdma_cm_svc_xprt {
        let p = self.0.as_ptr();
        core::mem::forget(self);
        p
    }
}

/// A counted reference on a transport nfsd knows.
pub(crate) struct SvcXprt(NonNull<rpcrdma_cm_svc_xprt>);

// SAFETY: the functions used may run in any process context, and the
// reference keeps the transport alive.
unsafe impl Send for SvcXprt {}
// SAFETY: every method takes `&self` and C serialises on sunrpc's own locks
// and atomic flag bits.
unsafe impl Sync for SvcXprt {}

impl SvcXprt {
    /// Sets (`true`) or clears XPT_DATA: a message is queued (call with the
    /// lock of the queue held, so the bit and the queue agree).
    pub(crate) fn set_data(&self, data: bool) {
        // SAFETY: our reference keeps the transport alive.
        unsafe { rpcrdma_cm_svc_set_data(self.0.as_ptr(), data) };
    }

    /// Asks nfsd to look at the transport (after setting XPT_DATA).
    pub(crate) fn enqueue(&self) {
        // SAFETY: as in `set_data`.
        unsafe { rpcrdma_cm_svc_enqueue(self.0.as_ptr()) };
    }

    /// The connection is gone: nfsd closes the transport.
    pub(crate) fn close(&self) {
        // SAFETY: as in `set_data`.
        unsafe { rpcrdma_cm_svc_close(self.0.as_ptr()) };
    }

    /// A Reply to a backchannel Call arrived (`msg`: the RPC message, after
    /// the transport header with `credits`): completes the waiting request.
    /// `false` if the transport has no backchannel or no request waits.
    pub(crate) fn bc_reply(&self, msg: &[u8], credits: u32) -> bool {
        // SAFETY: as in `set_data`.
        let Some(x) = NonNull::new(unsafe { rpcrdma_cm_svc_bc_xprt(self.0.as_ptr()) }) else {
            return false;
        };
        // SAFETY: the backchannel lives as long as this transport, which we
        // hold, and `x` is not kept past this call.
        let x = unsafe { RpcXprt::from_raw(x) };
        let Some(xid) = msg
            .get(..4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
        else {
            return false;
        };
        let Some(mut rq) = x.lookup(xid) else {
            return false;
        };
        x.set_credits(credits.clamp(1, RPCRDMA_CM_SVC_BC_REQUESTS));
        let res = u32::try_from(msg.len())
            .map_err(|_| EMSGSIZE)
            .and_then(|n| rq.write(0, msg).map(|()| n));
        rq.complete(res);
        true
    }
}

impl Drop for SvcXprt {
    fn drop(&mut self) {
        // Never the last reference: sunrpc holds its own until after
        // xpo_detach, where connections drop theirs; before nfsd takes the
        // transport, the [`PendingXprt`] holds the first one and is dropped
        // after this (conn.rs, `Unaccepted`).
        // SAFETY: we own one reference, and it is not the last (above).
        unsafe { rpcrdma_cm_svc_xprt_put(self.0.as_ptr()) };
    }
}

/// Where the Call a transport hands nfsd lies ([`SvcRqst::accept_call`]).
pub(crate) enum Arg {
    /// In the call context's memory (`SvcCall::arg`, a kept receive
    /// buffer), with the `page_len` octets (XDR-rounded) of a Read chunk
    /// already in the request's pages ([`SvcRqst::take_arg_pages`]) at
    /// `position` of it. No chunk: `position` is the length, `page_len` 0.
    InPlace { position: u32, page_len: u32 },
    /// All of it, `len` octets, in the request's pages.
    Pages { len: u32 },
}

/// One request nfsd hands the transport (xpo_recvfrom, xpo_sendto).
pub(crate) struct SvcRqst<'a> {
    raw: *mut svc_rqst,
    received: bool,
    _p: PhantomData<&'a mut svc_rqst>,
}

impl SvcRqst<'_> {
    /// Lets nfsd dequeue the transport again (once per recvfrom, before the
    /// message is parsed, so other threads take the next messages).
    pub(crate) fn received(&mut self) {
        if !self.received {
            self.received = true;
            // SAFETY: the request is live during the op.
            unsafe { rpcrdma_cm_svc_received(self.raw) };
        }
    }

    /// Where the request's argument and reply live (see svc.c).
    fn parts(&self) -> rpcrdma_cm_svc_parts {
        let mut p = rpcrdma_cm_svc_parts::default();
        // SAFETY: the request is live during the op; C fills `p`.
        unsafe { rpcrdma_cm_svc_rqst_parts(self.raw, &mut p) };
        p
    }

    /// Octets of the request's pages an argument may fill.
    fn arg_room_of(p: &rpcrdma_cm_svc_parts) -> u32 {
        p.arg_pages.saturating_mul(PAGE)
    }

    /// Octets of the request's pages an argument may fill (every request of
    /// a service has as many).
    pub(crate) fn arg_room(&self) -> u32 {
        Self::arg_room_of(&self.parts())
    }

    /// Hands nfsd a Call laid out as `arg` says (its memory: `call.arg()`,
    /// owned by the call context, or the request's own pages), in rq_arg as
    /// svcrdma lays it out: head up to a Read chunk's position, the chunk in
    /// the pages, the rest as tail; or a whole Call in the pages (the first one
    /// its head), as a stream transport lays out a record. Nothing is copied.
    /// Returns the length recvfrom returns.
    pub(crate) fn accept_call<T: SvcCall>(&mut self, call: T, arg: Arg) -> Result<u32> {
        let ctxt = CallCtxt::new_raw(call)?;
        let p = self.parts();
        let room = Self::arg_room_of(&p);
        let empty = kvec {
            iov_base: core::ptr::null_mut(),
            iov_len: 0,
        };
        // nfsd may decode in place (RPCSEC_GSS unwraps): rq_arg points at a
        // received message by C's own pointer (MsgRegion), read by no one else.
        let layout = match arg {
            Arg::InPlace { position, page_len } => {
                // SAFETY: just made; the context owns the region, which
                // sunrpc keeps until xpo_release_ctxt.
                let a = unsafe { ctxt_call(ctxt.cast()) }.arg();
                let pos = position as usize;
                match a {
                    Some(a) if pos <= a.len && page_len <= room => Some((
                        kvec {
                            iov_base: a.ptr.cast(),
                            iov_len: pos,
                        },
                        p.pages,
                        page_len,
                        kvec {
                            iov_base: a.ptr.wrapping_add(pos).cast(),
                            iov_len: a.len - pos,
                        },
                    )),
                    _ => None,
                }
            }
            Arg::Pages { len } if len != 0 && len <= room => {
                let head = len.min(PAGE);
                Some((
                    kvec {
                        // SAFETY: `p.pages` holds `p.arg_pages` (> 0, as `len`
                        // fits) live pages of the request.
                        iov_base: unsafe { rpcrdma_cm_page_address(*p.pages) },
                        iov_len: head as usize,
                    },
                    // SAFETY: as above: page 1 on are the rest of the pages.
                    unsafe { p.pages.add(1) },
                    len - head,
                    empty,
                ))
            }
            Arg::Pages { .. } => None,
        };
        let Some((head, pages, page_len, tail)) = layout else {
            // SAFETY: made above, and nothing kept it.
            unsafe { ctxt_free(ctxt.cast()) };
            return Err(EMSGSIZE);
        };
        let len = head.iov_len + page_len as usize + tail.iov_len;
        // SAFETY: rq_arg is this request's, laid out by its transport during
        // recvfrom: nothing else touches it now.
        let x = unsafe { &mut *p.arg };
        x.head[0] = head;
        x.pages = pages;
        x.page_base = 0;
        x.page_len = page_len;
        x.tail[0] = tail;
        x.len = u32::try_from(len).unwrap_or(u32::MAX);
        x.buflen = x.len;
        // SAFETY: the request is live; `ctxt` now belongs to sunrpc, which
        // hands it to xpo_release_ctxt.
        unsafe { rpcrdma_cm_svc_arg_done(self.raw, ctxt.cast()) };
        Ok(x.len)
    }

    /// Makes `pages` the request's first argument pages (replacing its own),
    /// for an [`Arg`] laid out in them as if read there.
    pub(crate) fn take_arg_pages(&mut self, pages: ArgPages) -> Result {
        let p = self.parts();
        if pages.room() > Self::arg_room_of(&p) {
            return Err(EMSGSIZE);
        }
        let ArgPages { pages, mut raw } = pages;
        let n = u32::try_from(raw.len()).map_err(|_| EINVAL)?;
        // Our references pass to the request: the pages must not be freed here.
        for pg in pages {
            core::mem::forget(pg);
        }
        // SAFETY: the request is live during recvfrom and has at least `n`
        // argument pages (checked above); each of `raw` is a page whose one
        // reference we give it.
        unsafe { rpcrdma_cm_svc_give_pages(self.raw, raw.as_mut_ptr(), n) };
        Ok(())
    }

    /// rq_res, nfsd's encoded reply.
    fn res(&self) -> &xdr_buf {
        // SAFETY: the request is live during sendto, and nfsd is done encoding
        // the reply: nothing writes it while the transport sends it.
        unsafe { &*self.parts().res }
    }

    /// Whether the reply's octets `offset..offset + len` all lie in its page
    /// list (where nfsd puts READ data), so they can be written from there.
    pub(crate) fn res_in_pages(&self, offset: u32, len: u32) -> bool {
        let res = self.res();
        let head = u32::try_from(res.head[0].iov_len).unwrap_or(u32::MAX);
        offset >= head && offset - head <= res.page_len && len <= res.page_len - (offset - head)
    }

    /// RDMA Write of the reply's octets `offset..offset + len` to the peer's
    /// memory (`rkey`, `addr`) straight from the reply's pages, prepared and
    /// left in `held` for the reply's Send to post in front of itself
    /// ([`Qp::send_after`]: one post, as svcrdma's); a Write `held` had
    /// already is posted alone first (the room and MRs it keeps would be
    /// waited for). Returns the WRs it takes. Nothing waits for the Write (as
    /// svcrdma): it keeps its pages until it completes, and the Send, posted
    /// after it on the same QP, reaches the client after the data. `ERANGE`
    /// unless [`Self::res_in_pages`].
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn write_from_res(
        &self,
        qp: &Qp,
        offset: u32,
        len: u32,
        rkey: u32,
        addr: u64,
        held: &mut Option<HeldWrite>,
    ) -> Result<u32> {
        if !self.res_in_pages(offset, len) {
            return Err(ERANGE);
        }
        let res = self.res();
        // In range (checked above), so `offset` is at least the head's length.
        let head = u32::try_from(res.head[0].iov_len).unwrap_or(u32::MAX);
        let at = res.page_base + (offset - head);
        let prepare = |rw: &mut *mut rpcrdma_cm_rw| {
            // SAFETY: the range lies in the reply's page list (checked above),
            // which stays until sendto returns; C takes its own page
            // references for the Write, which may outlast that. `qp` is a
            // live handle; `rw` is written on success.
            unsafe { rpcrdma_cm_rdma_write_held(qp.raw(), res.pages, at, len, rkey, addr, rw) }
        };
        // SAFETY: `prepare` returns what rpcrdma_cm_rdma_write_held() does.
        unsafe { hold(held, prepare) }
    }

    /// Whether [`Self::write_res`] can write any of the reply's octets: its
    /// head and tail lie in the kernel's linear map (nfsd's own pages), two
    /// pages each at most.
    pub(crate) fn res_writable(&self) -> bool {
        let res = self.res();
        [&res.head[0], &res.tail[0]].into_iter().all(|v| {
            let Ok(n) = u32::try_from(v.iov_len) else {
                return false;
            };
            // SAFETY: C only checks the address range; nothing is read.
            unsafe { rpcrdma_cm_kvec_writable(v.iov_base, n) }
        })
    }

    /// RDMA Write of the reply's octets `offset..offset + len` to the peer's
    /// memory (`rkey`, `addr`) straight from where nfsd encoded them: its
    /// head, page list and tail, a Write for each part the range covers,
    /// as [`Self::write_from_res`] (each Write prepared and left in `held`,
    /// the one before posted alone). Returns the WRs they take. `ERANGE`
    /// beyond the reply; an error unless [`Self::res_writable`].
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn write_res(
        &self,
        qp: &Qp,
        offset: u32,
        len: u32,
        rkey: u32,
        addr: u64,
        held: &mut Option<HeldWrite>,
    ) -> Result<u32> {
        let res = self.res();
        let head = u32::try_from(res.head[0].iov_len).map_err(|_| ERANGE)?;
        let tail = u32::try_from(res.tail[0].iov_len).map_err(|_| ERANGE)?;
        let pages_end = head.checked_add(res.page_len).ok_or(ERANGE)?;
        let end = offset.checked_add(len).ok_or(ERANGE)?;
        if end > pages_end.checked_add(tail).ok_or(ERANGE)? {
            return Err(ERANGE);
        }
        let (mut at, mut wrs) = (offset, 0);
        while at < end {
            // The peer's address, as it gave it: wrapping, for its device to refuse.
            let to = addr.wrapping_add(u64::from(at - offset));
            let (k, part) = if at < head {
                (end.min(head) - at, Some((res.head[0].iov_base, at)))
            } else if at < pages_end {
                (end.min(pages_end) - at, None)
            } else {
                (end - at, Some((res.tail[0].iov_base, at - pages_end)))
            };
            wrs += match part {
                None => self.write_from_res(qp, at, k, rkey, to, held)?,
                Some((base, off)) => {
                    // SAFETY: `off..off + k` lies in the head or tail at
                    // `base` (`at` is below `head`, or `at - pages_end` plus
                    // `k` within `tail`, checked above), which nfsd keeps
                    // until sendto returns.
                    unsafe { Self::write_kvec(qp, base, off, k, rkey, to, held)? }
                }
            };
            at += k;
        }
        Ok(wrs)
    }

    /// [`Self::write_res`]'s Write of `len` octets at `off` of the head or
    /// tail at `base`.
    ///
    /// # Safety
    ///
    /// `base + off .. base + off + len` lies in the reply's head or tail,
    /// which stays until sendto returns.
    #[allow(clippy::too_many_arguments)]
    unsafe fn write_kvec(
        qp: &Qp,
        base: *mut c_void,
        off: u32,
        len: u32,
        rkey: u32,
        addr: u64,
        held: &mut Option<HeldWrite>,
    ) -> Result<u32> {
        let from = base.cast::<u8>().wrapping_add(off as usize).cast();
        let prepare = |rw: &mut *mut rpcrdma_cm_rw| {
            // SAFETY: `from..from + len` lies in the reply's head or tail,
            // which stays until sendto returns (the caller's guarantee); C
            // refuses memory outside the linear map or of the slab and takes
            // its own page references for the Write, which may outlast that.
            // `qp` is a live handle; `rw` is written on success.
            unsafe { rpcrdma_cm_rdma_write_kvec_held(qp.raw(), from, len, rkey, addr, rw) }
        };
        // SAFETY: `prepare` returns what rpcrdma_cm_rdma_write_kvec_held() does.
        unsafe { hold(held, prepare) }
    }

    /// Length of the reply nfsd encoded.
    pub(crate) fn res_len(&self) -> u32 {
        self.res().len
    }

    /// Copies `out.len()` octets of the reply from `offset` into `out`.
    pub(crate) fn res_read(&self, offset: u32, out: &mut [u8]) -> Result {
        XdrMsg::new(self.res()).read(offset, out)
    }
}

/// Prepares an RDMA Write chain with `prepare` and leaves it in `held` for
/// the reply's Send to post in front of itself, posting the chain `held`
/// had alone first (the room and MRs it keeps would be waited for);
/// returns the WRs the new chain takes.
///
/// # Safety
///
/// `prepare` returns what `rpcrdma_cm_rdma_write_held` (or its kvec form)
/// returns, for a chain it writes into its argument on success: prepared,
/// unposted and no one else's.
unsafe fn hold(
    held: &mut Option<HeldWrite>,
    prepare: impl FnOnce(&mut *mut rpcrdma_cm_rw) -> c_int,
) -> Result<u32> {
    if let Some(w) = held.take() {
        w.post()?;
    }
    let mut rw = ptr::null_mut();
    let r = prepare(&mut rw);
    to_result(r)?;
    let rw = NonNull::new(rw).ok_or(EINVAL)?;
    // SAFETY: `prepare` just prepared `rw` for us, unposted (the caller's
    // guarantee).
    *held = Some(unsafe { HeldWrite::from_raw(rw) });
    Ok(r.unsigned_abs())
}

/// Pages the module fills by RDMA Read with a call's Read chunk before nfsd
/// has a request for it (the thread that received the call does not wait),
/// then hands to the request that takes the call ([`SvcRqst::take_arg_pages`]),
/// as svcrdma does.
pub(crate) struct ArgPages {
    pages: KVec<Page>,
    /// The same pages, as C takes them.
    raw: KVec<*mut page>,
}

// SAFETY: the raw pointers are those of `pages`, which the struct owns; pages
// are not tied to a thread.
unsafe impl Send for ArgPages {}
// SAFETY: `&ArgPages` only hands the pointers to C for an RDMA Read, which
// reads the array during the call.
unsafe impl Sync for ArgPages {}

impl ArgPages {
    /// Pages for `len` octets. The last is zeroed: the XDR pad octets of a
    /// chunk are not read from the peer and must not carry old memory.
    pub(crate) fn new(len: u32) -> Result<Self> {
        let n = len.div_ceil(PAGE) as usize;
        let mut pages = KVec::with_capacity(n, GFP_KERNEL)?;
        let mut raw = KVec::with_capacity(n, GFP_KERNEL)?;
        for i in 0..n {
            let flags = if i + 1 == n {
                GFP_KERNEL | __GFP_ZERO
            } else {
                GFP_KERNEL
            };
            let pg = Page::alloc_page(flags)?;
            raw.push(pg.as_ptr(), GFP_KERNEL)?;
            pages.push(pg, GFP_KERNEL)?;
        }
        Ok(ArgPages { pages, raw })
    }

    /// Copies `data` into the pages at `offset` (the inline parts of a call
    /// whose Read chunks are read around them).
    pub(crate) fn write(&mut self, offset: u32, data: &[u8]) -> Result {
        let end = offset
            .checked_add(u32::try_from(data.len()).map_err(|_| EINVAL)?)
            .ok_or(EINVAL)?;
        if end > self.room() {
            return Err(EMSGSIZE);
        }
        let (mut at, mut from) = (offset as usize, 0usize);
        let page = PAGE as usize;
        while from < data.len() {
            let (pg, po) = (at / page, at % page);
            let k = (page - po).min(data.len() - from);
            let src = &data[from..from + k];
            let p = self.pages.get(pg).ok_or(EINVAL)?;
            // SAFETY: `src` is valid for `k` octets; `po + k` is within the
            // page (checked by the arithmetic above), which we own and no
            // Read targets while the call is being laid out.
            unsafe { p.write_raw(src.as_ptr(), po, k)? };
            at += k;
            from += k;
        }
        Ok(())
    }

    /// Octets they hold.
    fn room(&self) -> u32 {
        u32::try_from(self.pages.len())
            .unwrap_or(u32::MAX)
            .saturating_mul(PAGE)
    }

    /// Starts an RDMA Read of `len` octets of the peer's memory (`rkey`,
    /// `addr`) into these pages at `offset`; returns the WRs it took once
    /// posted. When it ends, the QP's owner is handed `done` with its status
    /// ([`CmHandler::rw_done`](super::rdma_cm::CmHandler::rw_done)); the chain
    /// keeps its own references on the pages until then.
    pub(crate) fn read_async(
        &self,
        qp: &Qp,
        offset: u32,
        len: u32,
        rkey: u32,
        addr: u64,
        done: RwDone,
    ) -> Result<u32> {
        if offset > self.room() || len > self.room() - offset {
            return Err(EMSGSIZE);
        }
        let ctx = done.into_c()?;
        // C takes its own page references; `ctx` comes back by
        // rpcrdma_cm_rw_done_rs unless this fails.
        // SAFETY: `self.raw` holds live pages of ours covering the range (checked
        // above), read by C during the call only; `qp` is a live handle.
        let r = unsafe {
            rpcrdma_cm_rdma_read_pages(
                qp.raw(),
                self.raw.as_ptr().cast_mut(),
                offset,
                len,
                rkey,
                addr,
                ctx,
            )
        };
        if r < 0 {
            // SAFETY: the post failed, so C never hands `ctx` back: it is ours.
            drop(unsafe { RwDone::from_c(ctx) });
        }
        to_result(r)?;
        Ok(r.unsigned_abs())
    }
}

/// The ops of transport `rs` (its context box).
///
/// A transport's context comes from `rpcrdma_cm_svc_xprt_set_rs` or
/// `rpcrdma_cm_svc_create_rs` and goes with `rpcrdma_cm_svc_free_rs`.
///
/// # Safety
///
/// `rs` is a transport's context, not yet freed.
unsafe fn ops<'a>(rs: *mut c_void) -> &'a Arc<dyn SvcXprtOps> {
    // SAFETY: see above.
    unsafe { &*rs.cast::<Arc<dyn SvcXprtOps>>() }
}

/// xpo_create's Rust half: a listener on `sa` for the listener transport `x`;
/// its context is stored in `*rs`.
///
/// # Safety
///
/// Called only by svc.c's xpo_create, once per listener, with `x` just
/// initialised and not yet visible to sunrpc, `net` and `sa` sunrpc's, valid
/// for the call, and `rs` pointing to `x`'s context field. On an error
/// nothing is stored and C puts `x`.
#[no_mangle]
unsafe extern "C" fn rpcrdma_cm_svc_create_rs(
    x: *mut rpcrdma_cm_svc_xprt,
    net: *mut super::bindings::net,
    sa: *const super::bindings::sockaddr,
    rs: *mut *mut c_void,
) -> c_int {
    // SAFETY: the class's xpo_create: it is registered while this runs.
    let (Some(x), Some(factory)) = (NonNull::new(x), unsafe { FACTORY.get() }) else {
        return ENODEV.to_errno();
    };
    // SAFETY: nfsd's address for the listener (xpo_create), as long as its family says.
    let Some(ep) = (unsafe { sockaddr_from_c(sa) }) else {
        return EAFNOSUPPORT.to_errno();
    };
    let net = Net(net);
    match factory
        .create(SvcListenerRef(x), &net, ep)
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
c_fn!(rpcrdma_cm_svc_create_rs);

/// xpo_accept: the next connection the listener `rs` has made ready, if any;
/// `*more` says whether others wait.
///
/// # Safety
///
/// Called only by svc.c's xpo_accept, with `rs` a live listener's context
/// and `more` pointing to a bool of the caller's.
#[no_mangle]
unsafe extern "C" fn rpcrdma_cm_svc_accept_rs(
    rs: *mut c_void,
    more: *mut bool,
) -> *mut rpcrdma_cm_svc_xprt {
    // SAFETY: a live listener's context (svc.c passes its own).
    let (next, rest) = unsafe { ops(rs) }.accept();
    // SAFETY: C's out pointer for this call.
    unsafe { *more = rest };
    next.map_or(core::ptr::null_mut(), PendingXprt::into_c)
}
c_fn!(rpcrdma_cm_svc_accept_rs);

/// xpo_recvfrom: the next call of the transport `rs`, laid out in `rqstp`.
///
/// # Safety
///
/// Called only by svc.c's xpo_recvfrom, from an nfsd thread holding the
/// transport (XPT_BUSY), with `rs` its context and `rqstp` that thread's
/// request, which nothing else touches during the call.
#[no_mangle]
unsafe extern "C" fn rpcrdma_cm_svc_recvfrom_rs(rs: *mut c_void, rqstp: *mut svc_rqst) -> c_int {
    let mut rq = SvcRqst {
        raw: rqstp,
        received: false,
        _p: PhantomData,
    };
    // SAFETY: a live transport's context (svc.c passes its own).
    let len = unsafe { ops(rs) }.recvfrom(&mut rq);
    // Once on every path.
    rq.received();
    to_c_int(Ok(len))
}
c_fn!(rpcrdma_cm_svc_recvfrom_rs);

/// xpo_sendto: the Reply of `rqstp`, with `ctxt` the call's context (null if
/// recvfrom built none).
///
/// # Safety
///
/// Called only by svc.c's xpo_sendto, from the nfsd thread that received the
/// call, with `rs` the transport's context, `rqstp` that thread's request and
/// `ctxt` null or the context [`rpcrdma_cm_svc_recvfrom_rs`] handed to sunrpc,
/// not yet released.
#[no_mangle]
unsafe extern "C" fn rpcrdma_cm_svc_sendto_rs(
    rs: *mut c_void,
    rqstp: *mut svc_rqst,
    ctxt: *mut c_void,
) -> c_int {
    let rq = SvcRqst {
        raw: rqstp,
        received: true,
        _p: PhantomData,
    };
    let call = if ctxt.is_null() {
        None
    } else {
        // SAFETY: a context made by `accept_call`, alive until
        // xpo_release_ctxt, which sunrpc calls after sendto.
        Some(unsafe { ctxt_call(ctxt) })
    };
    // SAFETY: a live transport's context.
    to_c_int(unsafe { ops(rs) }.sendto(&rq, call).map(|()| 0))
}
c_fn!(rpcrdma_cm_svc_sendto_rs);

/// xpo_result_payload: nfsd says where the READ payload of the Reply is.
///
/// # Safety
///
/// Called only by svc.c's xpo_result_payload, from the nfsd thread of the
/// call, with `ctxt` the (non-null) context recvfrom handed to sunrpc, not yet
/// released.
#[no_mangle]
unsafe extern "C" fn rpcrdma_cm_svc_result_payload_rs(
    ctxt: *mut c_void,
    offset: u32,
    len: u32,
) -> c_int {
    // SAFETY: as in rpcrdma_cm_svc_sendto_rs (C checks it is not null).
    let call = unsafe { ctxt_call(ctxt) };
    to_c_int(call.result_payload(offset, len).map(|()| 0))
}
c_fn!(rpcrdma_cm_svc_result_payload_rs);

/// xpo_release_ctxt: the call's context goes.
///
/// # Safety
///
/// Called only by svc.c's xpo_release_ctxt, exactly once per context, with
/// `ctxt` the (non-null) context recvfrom handed to sunrpc; it takes ownership,
/// and nothing uses `ctxt` afterwards.
#[no_mangle]
unsafe extern "C" fn rpcrdma_cm_svc_release_ctxt_rs(ctxt: *mut c_void) {
    // SAFETY: made by `accept_call`; sunrpc releases each context once.
    unsafe { ctxt_free(ctxt) };
}
c_fn!(rpcrdma_cm_svc_release_ctxt_rs);

/// xpo_detach: sunrpc closes the transport `rs` (null: never set up).
///
/// # Safety
///
/// Called only by svc.c's xpo_detach, with `rs` null or a transport's
/// context, not yet freed.
#[no_mangle]
unsafe extern "C" fn rpcrdma_cm_svc_detach_rs(rs: *mut c_void) {
    if !rs.is_null() {
        // SAFETY: a live transport's context.
        unsafe { ops(rs) }.detach();
    }
}
c_fn!(rpcrdma_cm_svc_detach_rs);

/// The backchannel's send_request: nfsd's callback `msg` goes out on the
/// connection of the transport `rs`.
///
/// # Safety
///
/// Called only by svc.c's backchannel send_request (the backchannel
/// transport locked), with `rs` null or the context of the server transport
/// nfsd's callback client holds (cb_xprt), and `msg` null or the request's
/// send buffer, valid for the call.
#[no_mangle]
unsafe extern "C" fn rpcrdma_cm_svc_bc_send_rs(rs: *mut c_void, msg: *const xdr_buf) -> c_int {
    if rs.is_null() || msg.is_null() {
        return ENOTCONN.to_errno();
    }
    // SAFETY: the request's rq_snd_buf, which sunrpc keeps unchanged while it
    // sends.
    let buf = unsafe { &*msg };
    let msg = XdrMsg::new(buf);
    // SAFETY: a live transport's context: nfsd's callback client holds a
    // reference on the server transport (cb_xprt) while it sends.
    to_c_int(unsafe { ops(rs) }.bc_send(&msg).map(|()| 0))
}
c_fn!(rpcrdma_cm_svc_bc_send_rs);

/// xpo_free's Rust half: the transport's context goes.
///
/// # Safety
///
/// Called only by svc.c's xpo_free, exactly once per context, with `rs` a
/// context [`rpcrdma_cm_svc_create_rs`] or the accept path made; it takes
/// ownership, and nothing uses `rs` afterwards.
#[no_mangle]
unsafe extern "C" fn rpcrdma_cm_svc_free_rs(rs: *mut c_void) {
    // SAFETY: the context box, freed once: sunrpc frees each transport once.
    drop(unsafe { KBox::from_raw(rs.cast::<Arc<dyn SvcXprtOps>>()) });
}
c_fn!(rpcrdma_cm_svc_free_rs);
