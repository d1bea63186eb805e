// SPDX-License-Identifier: GPL-2.0

//! Safe wrappers of the sunrpc client transport API (`rpc_xprt`,
//! `rpc_rqst`, `xprt_class`) used by `xprtrdma/`, and fast registration
//! (FRWR) of request buffers.
//!
//! The `struct rpc_xprt_ops` table is static in `xprt_helpers.c`: its
//! generic entries are sunrpc's own functions (congestion control, slots,
//! rpcbind); the transport-specific ones call the [`XprtOps`] trait
//! implementation through the trampolines below. One implementation is
//! registered per module ([`Registration`]).
//!
//! C header: [`include/linux/sunrpc/xprt.h`](srctree/include/linux/sunrpc/xprt.h).

use super::bindings;
use super::cm::Net;
use super::cm::{Addr, SockAddr};
use super::live;
use super::verbs::{Anchor, CompletionHandler, DmaBuf, Endpoint, WorkRequest};
use core::marker::PhantomData;
use core::ptr::NonNull;
use kernel::error::{from_err_ptr, to_result};
use kernel::prelude::*;
use kernel::sync::Arc;
use kernel::types::ForeignOwnable;

/// `XDRBUF_READ`: the page data is the target of a file read (DDP-eligible
/// reply payload).
pub const XDRBUF_READ: u32 = 1;
/// `XDRBUF_WRITE`: the page data is the source of a file write
/// (DDP-eligible call payload).
pub const XDRBUF_WRITE: u32 = 2;

/// Counters of the `xprt: rdma` mountstats line.
pub type XprtStats = bindings::rpcrdma_rs_xprt_stats;

/// Shape of an `xdr_buf`.
pub type XdrShape = bindings::rpcrdma_rs_xdr_shape;

/// What a request looks like (xid, send and receive buffer shapes).
pub type RqstInfo = bindings::rpcrdma_rs_rqst_info;

/// A client transport (`struct rpc_xprt`) created by our `setup`.
///
/// # Invariants
///
/// `ptr` is valid from `setup` until the `destroy` callback returns; the
/// state that holds an `Xprt` is dropped by that callback.
#[derive(Clone, Copy)]
pub struct Xprt {
    ptr: NonNull<bindings::rpc_xprt>,
}

// SAFETY: The sunrpc functions called through `Xprt` take their own locks.
unsafe impl Send for Xprt {}
// SAFETY: See `Send`.
unsafe impl Sync for Xprt {}

impl Xprt {
    /// The server's address.
    pub fn addr(&self) -> Result<Addr> {
        let mut len = 0usize;
        // SAFETY: Valid by the type invariant: `xprt->addr` is valid for
        // `xprt->addrlen` bytes, both set at setup.
        let sa = unsafe {
            let sa = bindings::rpcrdma_rs_xprt_sockaddr(self.ptr.as_ptr(), &mut len);
            SockAddr::copy_from(sa, len)
        };
        sa.addr().ok_or(EAFNOSUPPORT)
    }

    /// The network namespace of the transport (`xprt_net`), where its
    /// connections are resolved and made (C `rpcrdma_create_id`).
    pub fn net(&self) -> &Net {
        // SAFETY: Valid by the type invariant; `xprt_alloc` took a
        // reference on `xprt_net`, dropped only when the transport is freed,
        // after every `Xprt` is gone.
        unsafe { Net::from_raw(bindings::rpcrdma_rs_xprt_net(self.ptr.as_ptr())) }
    }

    /// Finds the request waiting for `xid` and pins it so it stays valid
    /// until [`PinnedRqst::complete`] or drop.
    pub fn lookup(&self, xid: u32) -> Option<PinnedRqst> {
        // SAFETY: Valid by the type invariant.
        let rqst = unsafe { bindings::rpcrdma_rs_xprt_lookup_pin(self.ptr.as_ptr(), xid) };
        NonNull::new(rqst).map(|rqst| PinnedRqst { xprt: *self, rqst })
    }

    /// Sets the congestion window to `credits` requests.
    pub fn update_cwnd(&self, credits: u32) {
        // SAFETY: Valid by the type invariant.
        unsafe { bindings::rpcrdma_rs_xprt_update_cwnd(self.ptr.as_ptr(), credits) };
    }

    /// Whether sunrpc considers the transport connected.
    pub fn is_connected(&self) -> bool {
        // SAFETY: Valid by the type invariant.
        unsafe { bindings::rpcrdma_rs_xprt_is_connected(self.ptr.as_ptr()) }
    }

    /// Closes the connection now, from the send path (process context, the
    /// transport's send lock held): [`XprtOps::close`], then sunrpc's own
    /// bookkeeping of a disconnect (C `xprt_rdma_close`). The next call
    /// reconnects.
    pub fn drop_connection(&self) {
        // SAFETY: Valid by the type invariant.
        unsafe { bindings::rpcrdma_rs_xprt_drop_connection(self.ptr.as_ptr()) };
    }

    /// Asks sunrpc to close the connection (from any context).
    pub fn force_disconnect(&self) {
        // SAFETY: Valid by the type invariant.
        unsafe { bindings::rpcrdma_rs_xprt_force_disconnect(self.ptr.as_ptr()) };
    }

    /// Hands a reverse-direction Call (`call`: the RPC message, xid first)
    /// to the NFS callback service; the message is copied. Fails with
    /// `ENOBUFS` when every callback slot is in use, `EMSGSIZE` when the
    /// message is shorter than an RPC header or longer than a page.
    pub fn bc_receive_call(&self, call: &[u8]) -> Result {
        let len = u32::try_from(call.len()).map_err(|_| EMSGSIZE)?;
        // SAFETY: Valid by the type invariant; `call` is readable for
        // `len` bytes and only read during the call.
        to_result(unsafe {
            bindings::rpcrdma_rs_bc_receive_call(self.ptr.as_ptr(), call.as_ptr().cast(), len)
        })
    }

    /// Sets the largest backchannel message (`bc_maxpayload`).
    pub fn set_bc_max_payload(&self, bytes: u32) {
        // SAFETY: Valid by the type invariant; a plain store read by sunrpc.
        unsafe { bindings::rpcrdma_rs_xprt_set_bc_max_payload(self.ptr.as_ptr(), bytes) };
    }

    /// Notes that the server answered, so the next reconnect is not delayed.
    pub fn data_seen(&self) {
        // SAFETY: Valid by the type invariant.
        unsafe { bindings::rpcrdma_rs_xprt_data_seen(self.ptr.as_ptr()) };
    }

    /// Makes [`XprtOps::flush`] run within `ms` milliseconds (on the
    /// module's workqueue), unless it is already scheduled, in which case
    /// the earlier deadline stands. Callable from any context; the work is
    /// cancelled when the transport is destroyed, after its `close`.
    pub fn schedule_flush(&self, ms: u32) {
        // SAFETY: Valid by the type invariant.
        unsafe { bindings::rpcrdma_rs_xprt_schedule_flush(self.ptr.as_ptr(), ms) };
    }
}

/// A request being sent (`struct rpc_rqst`), borrowed for the duration of
/// `send_request`.
///
/// # Invariants
///
/// `ptr` points to a live `rpc_rqst` of this transport for `'a`: sunrpc
/// holds the request (and its buffers) for the duration of the call that
/// lent it.
pub struct Rqst<'a> {
    ptr: NonNull<bindings::rpc_rqst>,
    _p: PhantomData<&'a ()>,
}

impl Rqst<'_> {
    /// Its xid and buffer shapes.
    pub fn info(&self) -> RqstInfo {
        let mut info = RqstInfo::default();
        // SAFETY: The request is valid while borrowed.
        unsafe { bindings::rpcrdma_rs_rqst_info(self.ptr.as_ptr(), &mut info) };
        info
    }

    /// Copies `dst.len()` bytes of the Call from `offset` into `dst`.
    pub fn read(&self, offset: u32, dst: &mut [u8]) -> Result {
        let len = u32::try_from(dst.len()).map_err(|_| EINVAL)?;
        // SAFETY: The request is valid while borrowed; `dst` is writable
        // for `len` bytes.
        to_result(unsafe {
            bindings::rpcrdma_rs_rqst_read(self.ptr.as_ptr(), offset, dst.as_mut_ptr().cast(), len)
        })
    }

    /// Records the transmit time.
    pub fn mark_sent(&self) {
        // SAFETY: The request is valid while borrowed.
        unsafe { bindings::rpcrdma_rs_rqst_mark_sent(self.ptr.as_ptr()) };
    }

    /// Whether this is the Reply to a reverse-direction (backchannel) Call
    /// rather than a call of ours.
    pub fn is_backchannel(&self) -> bool {
        // SAFETY: Valid by the type invariant.
        unsafe { bindings::rpcrdma_rs_rqst_is_bc(self.ptr.as_ptr()) }
    }

    /// Takes a congestion window slot for the request
    /// (`xprt_request_get_cong`); false when the window is full.
    pub fn take_cong_slot(&self) -> bool {
        // SAFETY: Valid by the type invariant; called with the transport's
        // send lock held, as sunrpc requires.
        unsafe { bindings::rpcrdma_rs_rqst_get_cong(self.ptr.as_ptr()) }
    }

    /// Whether the request was already sent on the current connection (a
    /// retransmission).
    pub fn sent_on_this_connection(&self) -> bool {
        // SAFETY: Valid by the type invariant.
        unsafe { bindings::rpcrdma_rs_rqst_same_connection(self.ptr.as_ptr()) }
    }

    /// Counts the send buffer as transmitted (`rq_xmit_bytes_sent`).
    pub fn count_sent(&self) {
        // SAFETY: Valid by the type invariant.
        unsafe { bindings::rpcrdma_rs_rqst_count_sent(self.ptr.as_ptr()) };
    }

    /// Whether the RPC expects a reply (`rpc_reply_expected`).
    pub fn reply_expected(&self) -> bool {
        // SAFETY: Valid by the type invariant.
        unsafe { bindings::rpcrdma_rs_rqst_reply_expected(self.ptr.as_ptr()) }
    }

    /// Identity of the request (for per-request state), never dereferenced.
    pub fn key(&self) -> usize {
        self.ptr.as_ptr() as usize
    }
}

/// A request matched to a reply, pinned until completed.
///
/// # Invariants
///
/// `rqst` was pinned by `xprt_pin_rqst` and is unpinned exactly once (by
/// `complete`).
pub struct PinnedRqst {
    xprt: Xprt,
    rqst: NonNull<bindings::rpc_rqst>,
}

// SAFETY: A pinned request may be completed from any process context.
unsafe impl Send for PinnedRqst {}

impl PinnedRqst {
    /// Places an `RDMA_MSG` reply's inline part (`src`) in the receive
    /// buffer; `writelist` is the number of bytes the server wrote through
    /// the Write chunk. Returns the reply length for [`Self::complete`].
    pub fn fill_reply(&self, src: &[u8], writelist: u32) -> Result<u32> {
        let len = u32::try_from(src.len()).map_err(|_| EINVAL)?;
        // SAFETY: The request is pinned; `src` is readable for `len` bytes.
        let rc = unsafe {
            bindings::rpcrdma_rs_rqst_fill_reply(
                self.rqst.as_ptr(),
                src.as_ptr().cast(),
                len,
                writelist,
            )
        };
        to_result(rc.min(0))?;
        Ok(len.saturating_add((writelist.saturating_add(3)) & !3))
    }

    /// The reply length of an `RDMA_NOMSG` reply that arrived entirely in
    /// the Reply chunk (`len` bytes written by the server).
    pub fn reply_chunk_len(&self, len: u32) -> u32 {
        // SAFETY: The request is pinned.
        unsafe { bindings::rpcrdma_rs_rqst_reply_chunk_done(self.rqst.as_ptr(), len) }
    }

    /// Identity of the request (matches [`Rqst::key`]).
    pub fn key(&self) -> usize {
        self.rqst.as_ptr() as usize
    }

    /// Completes the RPC with `status` (the reply length, or a negative
    /// errno) and unpins it.
    pub fn complete(self, status: i32) {
        let this = core::mem::ManuallyDrop::new(self);
        // SAFETY: Pinned by the type invariant; this consumes the pin.
        unsafe {
            bindings::rpcrdma_rs_xprt_complete(this.xprt.ptr.as_ptr(), this.rqst.as_ptr(), status)
        };
    }
}

impl Drop for PinnedRqst {
    fn drop(&mut self) {
        // Never leave a pinned request behind: fail it.
        // SAFETY: Pinned by the type invariant; this consumes the pin.
        unsafe {
            bindings::rpcrdma_rs_xprt_complete(
                self.xprt.ptr.as_ptr(),
                self.rqst.as_ptr(),
                EIO.to_errno(),
            )
        };
    }
}

/// The transport-specific client operations.
pub trait XprtOps: Sized + Send + Sync {
    /// Creates the state of a new transport.
    fn setup(xprt: Xprt) -> Result<Self>;
    /// Connects; blocks (process context). Called with the connect lock.
    fn connect(&self) -> Result;
    /// Sends one request: a call, or the Reply to a backchannel Call
    /// ([`Rqst::is_backchannel`]). Admission and reconnection are the
    /// transport's to decide (sunrpc's `->send_request`).
    fn send_request(&self, rqst: &Rqst<'_>) -> Result;
    /// Tears the connection down.
    fn close(&self);
    /// Releases what a request still holds (its reply never came).
    fn buf_free(&self, rqst: &Rqst<'_>);
    /// The mountstats counters.
    fn stats(&self) -> XprtStats;
    /// Deferred work requested with [`Xprt::schedule_flush`] (process
    /// context).
    fn flush(&self);
    /// Breaks the connection as a network failure would: sunrpc's
    /// `fail_sunrpc` fault injection calls it after a transmit, with the
    /// transport's send lock held (process context).
    fn inject_disconnect(&self);
}

struct XprtVTable<T>(PhantomData<T>);

impl<T: XprtOps> XprtVTable<T> {
    const CBS: bindings::rpcrdma_rs_xprt_cbs = bindings::rpcrdma_rs_xprt_cbs {
        setup: Some(Self::setup),
        connect: Some(Self::connect),
        send_request: Some(Self::send_request),
        close: Some(Self::close),
        destroy: Some(Self::destroy),
        buf_free: Some(Self::buf_free),
        stats: Some(Self::stats),
        flush: Some(Self::flush),
        inject_disconnect: Some(Self::inject_disconnect),
    };

    /// # Safety
    ///
    /// `xprt` is a transport being set up by `rpcrdma_rs_setup`.
    unsafe extern "C" fn setup(xprt: *mut bindings::rpc_xprt) -> *mut kernel::ffi::c_void {
        let Some(ptr) = NonNull::new(xprt) else {
            return core::ptr::null_mut();
        };
        // INVARIANT: The C side keeps `xprt` valid until `destroy`.
        match T::setup(Xprt { ptr }).and_then(|s| Ok(KBox::new(s, GFP_KERNEL)?)) {
            Ok(state) => state.into_foreign().cast(),
            Err(e) => {
                pr_err!("client transport setup failed: {:?}\n", e);
                core::ptr::null_mut()
            }
        }
    }

    /// # Safety
    ///
    /// `state` came from `setup` and `destroy` has not run.
    unsafe fn state<'a>(state: *mut kernel::ffi::c_void) -> &'a T {
        // SAFETY: By the function's safety requirement.
        unsafe { <KBox<T> as ForeignOwnable>::borrow(state.cast()) }
    }

    /// # Safety
    ///
    /// Called by the C side with a state `setup` returned, before `destroy`.
    unsafe extern "C" fn connect(state: *mut kernel::ffi::c_void) -> kernel::ffi::c_int {
        // SAFETY: Called by the C side between setup and destroy.
        let s = unsafe { Self::state(state) };
        match s.connect() {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    /// # Safety
    ///
    /// Called by the C side with a state `setup` returned, before `destroy`.
    unsafe extern "C" fn send_request(
        state: *mut kernel::ffi::c_void,
        rqst: *mut bindings::rpc_rqst,
    ) -> kernel::ffi::c_int {
        // SAFETY: Called by the C side between setup and destroy.
        unsafe { Self::with_rqst(state, rqst, T::send_request) }
    }

    /// Runs `op` on the state and a request the C side lends for the call.
    ///
    /// # Safety
    ///
    /// `state` came from `setup` and `destroy` has not run; `rqst` is null
    /// or a request valid for the duration of the call.
    unsafe fn with_rqst(
        state: *mut kernel::ffi::c_void,
        rqst: *mut bindings::rpc_rqst,
        op: fn(&T, &Rqst<'_>) -> Result,
    ) -> kernel::ffi::c_int {
        // SAFETY: By the function's safety requirement.
        let s = unsafe { Self::state(state) };
        let Some(ptr) = NonNull::new(rqst) else {
            return EINVAL.to_errno();
        };
        match op(
            s,
            &Rqst {
                ptr,
                _p: PhantomData,
            },
        ) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    /// # Safety
    ///
    /// Called by the C side with a state `setup` returned, before `destroy`.
    unsafe extern "C" fn close(state: *mut kernel::ffi::c_void) {
        // SAFETY: Called by the C side between setup and destroy.
        unsafe { Self::state(state) }.close();
    }

    /// # Safety
    ///
    /// Called once by the C side with the state `setup` returned; no other
    /// callback runs after it.
    unsafe extern "C" fn destroy(state: *mut kernel::ffi::c_void) {
        // SAFETY: `state` came from `into_foreign` in `setup`; the C side
        // calls no other callback after this.
        drop(unsafe { <KBox<T> as ForeignOwnable>::from_foreign(state.cast()) });
    }

    /// # Safety
    ///
    /// Called by the C side with a state `setup` returned, before `destroy`.
    unsafe extern "C" fn buf_free(state: *mut kernel::ffi::c_void, rqst: *mut bindings::rpc_rqst) {
        // SAFETY: Called by the C side between setup and destroy.
        let s = unsafe { Self::state(state) };
        if let Some(ptr) = NonNull::new(rqst) {
            s.buf_free(&Rqst {
                ptr,
                _p: PhantomData,
            });
        }
    }

    /// # Safety
    ///
    /// Called by the C side with a state `setup` returned, before `destroy`.
    unsafe extern "C" fn stats(state: *mut kernel::ffi::c_void, out: *mut XprtStats) {
        // SAFETY: Called by the C side between setup and destroy; `out`
        // is valid for writes.
        unsafe { *out = Self::state(state).stats() };
    }

    /// # Safety
    ///
    /// Called by the C side with a state `setup` returned, before `destroy`
    /// (`destroy` closes, then cancels the work synchronously).
    unsafe extern "C" fn flush(state: *mut kernel::ffi::c_void) {
        // SAFETY: Called by the C side between setup and destroy.
        unsafe { Self::state(state) }.flush();
    }

    /// # Safety
    ///
    /// Called by the C side with a state `setup` returned, before `destroy`.
    unsafe extern "C" fn inject_disconnect(state: *mut kernel::ffi::c_void) {
        // SAFETY: Called by the C side between setup and destroy.
        unsafe { Self::state(state) }.inject_disconnect();
    }
}

/// The registration of the client transport class "rdma" (ident 256,
/// netids "rdma" and "rdma6") with sunrpc.
///
/// # Invariants
///
/// The class is registered while this object exists.
pub struct Registration<T: XprtOps> {
    _p: PhantomData<T>,
}

impl<T: XprtOps> Registration<T> {
    /// Registers the class; fails with `EEXIST` while the in-tree C
    /// `rpcrdma` module is loaded.
    pub fn new() -> Result<Self> {
        // SAFETY: The callback table is a `'static` constant whose entries
        // are valid for any state `setup` returned.
        to_result(unsafe { bindings::rpcrdma_rs_xprt_register(&XprtVTable::<T>::CBS) })?;
        Ok(Self { _p: PhantomData })
    }
}

impl<T: XprtOps> Drop for Registration<T> {
    fn drop(&mut self) {
        // SAFETY: Registered by the type invariant. sunrpc holds a module
        // reference for every transport, so none exists at unload.
        unsafe { bindings::rpcrdma_rs_xprt_unregister() };
    }
}

/// A fast-registration memory region (FRWR) of one connection.
///
/// # Invariants
///
/// `ptr` was allocated on `anchor`'s protection domain and is freed in
/// `drop`; while `mapped`, its scatterlist is DMA-mapped.
pub struct Mr {
    ptr: NonNull<bindings::rpcrdma_rs_mr>,
    anchor: Arc<Anchor>,
    mapped: bool,
}

// SAFETY: An MR is used by one request at a time (the pool hands it out).
unsafe impl Send for Mr {}
// SAFETY: Shared references only read the registration's segment.
unsafe impl Sync for Mr {}

/// A registered segment: what goes on the wire.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MrSegment {
    /// The steering tag (rkey).
    pub handle: u32,
    /// Registered length.
    pub length: u32,
    /// Registered address (iova).
    pub offset: u64,
}

impl Mr {
    /// Allocates an MR for up to `max_pages` pages on `ep`'s device.
    pub fn new(ep: &Endpoint, max_pages: u32) -> Result<Self> {
        let anchor = ep.anchor().clone();
        // SAFETY: The PD is live while the anchor is.
        let ptr =
            from_err_ptr(unsafe { bindings::rpcrdma_rs_mr_alloc(anchor.pd_ptr(), max_pages) })?;
        let ptr = NonNull::new(ptr).ok_or(ENOMEM)?;
        live::inc(live::Kind::Mr);
        Ok(Self {
            ptr,
            anchor,
            mapped: false,
        })
    }

    /// Maps `len` bytes from `offset` of the request's send (`rcv` false)
    /// or receive buffer; returns how many bytes one MR covered (it stops
    /// at its depth or at a gap that FRWR cannot map).
    pub fn map_rqst(
        &mut self,
        rqst: &Rqst<'_>,
        rcv: bool,
        offset: u32,
        len: u32,
        writable: bool,
    ) -> Result<u32> {
        self.unmap();
        let mut mapped = 0u32;
        // SAFETY: The MR and device are live (type invariant); the request
        // is valid while borrowed, and its buffers stay valid until the
        // request is released, which unmaps first (`buf_free`).
        to_result(unsafe {
            bindings::rpcrdma_rs_mr_map_rqst(
                self.anchor.device_ptr(),
                self.ptr.as_ptr(),
                rqst.ptr.as_ptr(),
                rcv,
                offset,
                len,
                writable,
                &mut mapped,
            )
        })?;
        self.mapped = true;
        Ok(mapped)
    }

    /// Maps a whole DMA buffer (the write pad).
    pub fn map_buf(&mut self, buf: &DmaBuf) -> Result {
        self.unmap();
        let len = u32::try_from(buf.len()).map_err(|_| EINVAL)?;
        // SAFETY: The MR is live; `buf` is mapped on the same device.
        to_result(unsafe {
            bindings::rpcrdma_rs_mr_map_buf(
                self.anchor.device_ptr(),
                self.ptr.as_ptr(),
                buf.dma_addr(),
                len,
            )
        })
    }

    /// The registered segment.
    pub fn segment(&self) -> MrSegment {
        let mut s = MrSegment::default();
        // SAFETY: The MR is live.
        unsafe {
            bindings::rpcrdma_rs_mr_segment(
                self.ptr.as_ptr(),
                &mut s.handle,
                &mut s.length,
                &mut s.offset,
            )
        };
        s
    }

    /// Releases the DMA mapping of the last `map_rqst`.
    pub fn unmap(&mut self) {
        if self.mapped {
            // SAFETY: The MR is live and mapped.
            unsafe { bindings::rpcrdma_rs_mr_unmap(self.anchor.device_ptr(), self.ptr.as_ptr()) };
            self.mapped = false;
        }
    }

    /// Posts the registration (REG_MR, unsignaled) on `ep`, ahead of the
    /// Send that advertises it.
    pub fn post_reg(&self, ep: &Endpoint, writable: bool) -> Result {
        // SAFETY: The MR and the QP are live; the REG_MR work request lives
        // inside the MR, which outlives the QP's use of it (drained before
        // the MR pool is freed).
        to_result(unsafe {
            bindings::rpcrdma_rs_post_reg_mr(ep.qp_ptr(), self.ptr.as_ptr(), writable)
        })
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        // Deregistration comes before the DMA unmapping: an MR dropped
        // while still valid (its invalidation could not be posted) must not
        // leave a steering tag naming unmapped addresses, even briefly.
        // SAFETY: The MR and the device are live (type invariant); no work
        // request refers to it (the QP was drained before any MR is
        // dropped). The C side unmaps only if `map_rqst` left a mapping,
        // and frees the MR: it is not used again.
        unsafe { bindings::rpcrdma_rs_mr_destroy(self.anchor.device_ptr(), self.ptr.as_ptr()) };
        self.mapped = false;
        live::dec(live::Kind::Mr);
    }
}

/// Posts LOCAL_INV of `rkey` on `ep`: unsignaled, or signaled to `wr`'s
/// handler.
pub fn post_local_inv<H: CompletionHandler>(
    ep: &Endpoint,
    rkey: u32,
    wr: Option<Arc<WorkRequest<H>>>,
) -> Result {
    match wr {
        None => {
            // SAFETY: The QP is live.
            to_result(unsafe {
                bindings::rpcrdma_rs_post_local_inv(ep.qp_ptr(), rkey, core::ptr::null_mut())
            })
        }
        Some(wr) => WorkRequest::post_with(wr, |_, cqe| {
            // SAFETY: The QP is live; the completion consumes the reference
            // `post_with` handed to the queue.
            unsafe { bindings::rpcrdma_rs_post_local_inv(ep.qp_ptr(), rkey, cqe) }
        }),
    }
}

/// The `memreg` module parameter (declared on the C side, a string).
pub fn memreg_param() -> &'static str {
    // SAFETY: The parameter is a NUL-terminated static buffer, written only
    // at module load (permissions 0444).
    let s = unsafe { kernel::str::CStr::from_char_ptr(bindings::rpcrdma_rs_param_memreg()) };
    s.to_str().unwrap_or("")
}

impl Xprt {
    /// Sets the largest RPC payload the transport carries (rsize/wsize).
    pub fn set_max_payload(&self, bytes: u32) {
        // SAFETY: Valid by the type invariant; called during setup.
        unsafe { bindings::rpcrdma_rs_xprt_set_max_payload(self.ptr.as_ptr(), bytes) };
    }
}

/// DMA mappings of a request range exposed under the protection domain's
/// global rkey (the "physical" strategy): one segment per piece (head
/// range, page, tail range). Unmapped on drop.
///
/// # Invariants
///
/// `ptr` holds `count()` live mappings on the anchor's device until drop.
pub struct PhysMap {
    ptr: NonNull<bindings::rpcrdma_rs_phys>,
    anchor: Arc<Anchor>,
}

// SAFETY: Owned by one request at a time.
unsafe impl Send for PhysMap {}
// SAFETY: Shared references only read the mapped addresses.
unsafe impl Sync for PhysMap {}

impl PhysMap {
    /// Maps `[offset, offset + len)` of the request's send (`rcv` false)
    /// or receive buffer in at most `max` pieces.
    pub fn map_rqst(
        ep: &Endpoint,
        rqst: &Rqst<'_>,
        rcv: bool,
        offset: u32,
        len: u32,
        writable: bool,
        max: u32,
    ) -> Result<Self> {
        // SAFETY: No preconditions.
        let ptr = from_err_ptr(unsafe { bindings::rpcrdma_rs_phys_alloc(max) })?;
        let ptr = NonNull::new(ptr).ok_or(ENOMEM)?;
        live::inc(live::Kind::PhysMap);
        // INVARIANT: Mappings made below are released by `drop`, also on error.
        let this = Self {
            ptr,
            anchor: ep.anchor().clone(),
        };
        // SAFETY: The device is live (anchor); the request is borrowed and
        // its buffers outlive the mapping (released before `buf_free`).
        to_result(unsafe {
            bindings::rpcrdma_rs_phys_map_rqst(
                this.anchor.device_ptr(),
                this.ptr.as_ptr(),
                rqst.ptr.as_ptr(),
                rcv,
                offset,
                len,
                writable,
            )
        })?;
        Ok(this)
    }

    /// Number of mapped pieces.
    pub fn count(&self) -> u32 {
        // SAFETY: Live by the type invariant.
        unsafe { bindings::rpcrdma_rs_phys_count(self.ptr.as_ptr()) }
    }

    /// DMA address and length of piece `i`.
    pub fn piece(&self, i: u32) -> (u64, u32) {
        let (mut addr, mut len) = (0u64, 0u32);
        // SAFETY: Live by the type invariant; out-of-range gives zeros.
        unsafe { bindings::rpcrdma_rs_phys_get(self.ptr.as_ptr(), i, &mut addr, &mut len) };
        (addr, len)
    }
}

impl Drop for PhysMap {
    fn drop(&mut self) {
        // SAFETY: Live by the type invariant; frees and unmaps everything.
        unsafe { bindings::rpcrdma_rs_phys_free(self.anchor.device_ptr(), self.ptr.as_ptr()) };
        live::dec(live::Kind::PhysMap);
    }
}
