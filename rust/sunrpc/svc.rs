// SPDX-License-Identifier: GPL-2.0

//! Safe wrappers of the sunrpc server transport API (`svc_xprt`,
//! `svc_rqst`, `svc_xprt_class`) used by `svcrdma/`.
//!
//! The pieces follow the operations-table pattern of the kernel's own Rust
//! abstractions (`block/mq/operations.rs`, `miscdevice.rs`):
//!
//! - [`SvcTransport`], a `#[vtable]` trait the transport implements;
//! - `OpsTable<T>`, whose `const` `svc_xprt_ops` points at `extern "C"`
//!   trampolines that convert the C arguments back into Rust types;
//! - [`Registration`], which registers the `"rdma"` `svc_xprt_class` (a C
//!   static in `svc_helpers.c` whose owner is this module, so sunrpc pins the
//!   module while any transport of the class exists) and unregisters it on
//!   drop.
//!
//! Each `struct svc_xprt` is allocated by a C shim next to a private pointer
//! that owns a [`KBox`] of the transport's state ([`SvcTransport::Data`]) and
//! its [`XprtLink`]. The state is dropped in `xpo_free`, after the link was
//! severed, so completion handlers and CM event handlers that still hold the link
//! never touch a freed `svc_xprt`. Per-request state ([`SvcTransport::Ctxt`])
//! travels in `rqstp->rq_xprt_ctxt` as a [`KBox`] and is dropped in
//! `xpo_release_ctxt`.
//!
//! C header: [`include/linux/sunrpc/svc_xprt.h`](srctree/include/linux/sunrpc/svc_xprt.h).

use crate::rust::bindings;
use crate::rust::kext::spin_lock::{new_spinlock, SpinLock};
use crate::rust::rdma::cm::CmId;
use crate::rust::rdma::cm::Net;
use crate::rust::rdma::cm::{Addr, SockAddr};
use crate::rust::rdma::recv_slots::{HeldRecv, RecvSlots, RecvSlotsOwner};
use crate::rust::rdma::verbs::{MappedBuf, PageRange};
use crate::rust::sunrpc::page_sinks::PageSinks;
use crate::rust::sunrpc::reply_pages::{
    clear_page_ptrs, copy_page_ptrs, put_page_slots, HeldPages,
};
use crate::rust::sunrpc::svc_bc::BcRegistration;
use crate::rust::sunrpc::svc_class;
use crate::rust::sunrpc::xdr_buf::{read_xdr, write_xdr};
use crate::rust::sunrpc::xprt_locks::{queue_lock, transport_lock};
use core::marker::PhantomData;
use core::ptr::{addr_of, addr_of_mut, NonNull};
use kernel::error::from_result;
use kernel::ffi::{c_int, c_uint, c_ulong, c_void};
use kernel::prelude::*;
use kernel::sync::atomic::{Acquire, Atomic, Relaxed, Release};
use kernel::sync::{rcu, Arc};
use kernel::types::ForeignOwnable;
use kernel::ThisModule;

/// A `struct svc_xprt` pointer that may cross threads.
///
/// # Invariants
///
/// Points to a `struct svc_xprt` allocated by `svc_class::alloc`.
#[derive(Clone, Copy)]
struct XprtPtr(NonNull<bindings::svc_xprt>);

// SAFETY: The flag and enqueue functions used through this pointer are
// thread-safe in sunrpc (atomic bit operations, lockless queues).
unsafe impl Send for XprtPtr {}

struct LinkState {
    xprt: Option<XprtPtr>,
    pending_conn: bool,
    pending_data: bool,
    pending_close: bool,
    on_close: Option<Arc<dyn OnClose>>,
}

/// Told when its transport is asked to close through [`XprtLink::close`]:
/// a transport whose threads may wait (for send queue room, say) wakes and
/// releases them here, as C `svc_rdma_xprt_deferred_close` wakes
/// `sc_send_wait`. Closes that sunrpc makes itself (temporary transports
/// aged out, the service shutting down) only set `XPT_CLOSE`; waiters see
/// those with [`XprtLink::is_closing`].
pub trait OnClose: Send + Sync {
    /// The transport is closing. Called by whoever called
    /// [`XprtLink::close`] (server threads, completion and CM handlers),
    /// without the link's lock held; must not sleep.
    fn closing(&self);
}

/// The link from a transport's state to its `svc_xprt`, for code that runs
/// outside sunrpc's calls (completion handlers, CM event handlers).
///
/// Before the `svc_xprt` exists, requests are remembered and applied when it
/// is attached; after `xpo_free` severed the link they are ignored.
///
/// # Invariants
///
/// While `state.xprt` is `Some`, the `svc_xprt` it names is live: it is
/// set right after allocation and cleared (under the lock) in `xpo_free`
/// before the `svc_xprt` is freed. `live` is null or the pointer
/// `state.xprt` holds, set and cleared with it under the lock; the
/// `svc_xprt` it names stays allocated until every RCU read-side critical
/// section that may have loaded it has ended (`svc_class::free` frees it
/// after a grace period).
#[pin_data]
pub struct XprtLink {
    #[pin]
    state: SpinLock<LinkState>,
    /// The attached transport, for [`Self::data_ready`] to mark without
    /// the lock (every Receive and RDMA Read completion marks it).
    live: Atomic<*mut bindings::svc_xprt>,
}

impl XprtLink {
    /// A link not attached to any `svc_xprt` yet.
    pub fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                state <- new_spinlock!(
                    LinkState {
                        xprt: None,
                        pending_conn: false,
                        pending_data: false,
                        pending_close: false,
                        on_close: None,
                    },
                    "rpcrdma_rs::svc::link"
                ),
                live: Atomic::new(core::ptr::null_mut()),
            }),
            GFP_KERNEL,
        )
    }

    fn with_xprt(
        &self,
        f: impl FnOnce(NonNull<bindings::svc_xprt>),
        pend: impl FnOnce(&mut LinkState),
    ) {
        let mut st = self.state.lock();
        match st.xprt {
            // The lock is held across `f`: `xpo_free` cannot free the
            // `svc_xprt` meanwhile.
            Some(x) => f(x.0),
            None => pend(&mut st),
        }
    }

    /// Marks data pending (`XPT_DATA`) and queues the transport for a
    /// server thread.
    #[inline(always)]
    pub fn data_ready(&self) {
        {
            let _rcu = rcu::read_lock();
            // Acquire: the attach's initialisation of the transport.
            if let Some(x) = NonNull::new(self.live.load(Acquire)) {
                // SAFETY: Loaded non-null under `rcu_read_lock`: the
                // transport stays allocated until the guard is dropped
                // (type invariant). A dead one keeps `XPT_BUSY` set, so
                // sunrpc does not queue it (as for a mark made under the
                // lock just before `xpo_free`).
                unsafe { xpt_mark_and_enqueue(x.as_ptr(), bindings::XPT_DATA) };
                return;
            }
        }
        // Not attached yet (remembered for the attach), or severed.
        self.with_xprt(
            // SAFETY: By the type invariant `x` is live while the lock is held.
            |x| unsafe { xpt_mark_and_enqueue(x.as_ptr(), bindings::XPT_DATA) },
            |st| st.pending_data = true,
        );
    }

    /// Marks a connection pending on a listener (`XPT_CONN`) and queues it.
    pub fn conn_ready(&self) {
        self.with_xprt(
            // SAFETY: By the type invariant `x` is live while the lock is held.
            |x| unsafe { xpt_mark_and_enqueue(x.as_ptr(), bindings::XPT_CONN) },
            |st| st.pending_conn = true,
        );
    }

    /// Clears `XPT_CONN` on a listener about to take a connection request
    /// (C `svc_rdma_accept`; [`Self::conn_ready`] sets it again if more are
    /// queued).
    pub fn clear_conn(&self) {
        self.with_xprt(
            |x| {
                // SAFETY: By the type invariant `x` is live while the lock is held.
                unsafe { xpt_flag(x.as_ptr(), bindings::XPT_CONN, false) };
            },
            |st| st.pending_conn = false,
        );
    }

    /// Asks sunrpc to close the transport (`svc_xprt_deferred_close`),
    /// then tells the [`OnClose`] hook, if one is set.
    pub fn close(&self) {
        let hook = {
            let mut st = self.state.lock();
            match st.xprt {
                // SAFETY: By the type invariant `x` is live while the lock
                // is held.
                Some(x) => unsafe { bindings::svc_xprt_deferred_close(x.0.as_ptr()) },
                None => st.pending_close = true,
            }
            st.on_close.clone()
        };
        // Outside the lock: the hook may take locks of its own under which
        // the link is used.
        if let Some(hook) = hook {
            hook.closing();
        }
    }

    /// Sets what [`Self::close`] tells. The hook may hold the link: the
    /// cycle lasts until [`Self::clear_on_close`].
    pub fn set_on_close(&self, hook: Arc<dyn OnClose>) {
        let old = self.state.lock().on_close.replace(hook);
        drop(old);
    }

    /// Removes the hook [`Self::set_on_close`] set, handing it back (to be
    /// dropped by the caller, outside the link's lock).
    pub fn clear_on_close(&self) -> Option<Arc<dyn OnClose>> {
        self.state.lock().on_close.take()
    }

    /// Whether the transport is closing or gone (`XPT_CLOSE` or `XPT_DEAD`
    /// set, C `svc_xprt_is_dead`), whoever asked for it: this link, sunrpc
    /// or nfsd. Before the `svc_xprt` exists, whether a close was asked
    /// for; after `xpo_free`, true.
    pub fn is_closing(&self) -> bool {
        let st = self.state.lock();
        match st.xprt {
            // SAFETY: By the type invariant `x` is live while the lock is held.
            Some(x) => unsafe { xpt_closing(x.0.as_ptr()) },
            None => st.pending_close,
        }
    }

    /// Attaches the newly allocated `xprt`, applying what was requested
    /// before. Flags are only set: sunrpc enqueues the transport itself when
    /// it calls `svc_xprt_received` on it after creation or accept.
    ///
    /// # Safety
    ///
    /// `xprt` must be live until [`Self::sever`] is called.
    unsafe fn attach(&self, xprt: NonNull<bindings::svc_xprt>) {
        let mut st = self.state.lock();
        // SAFETY: `xprt` is live by the function's safety requirement.
        unsafe {
            if st.pending_conn {
                xpt_flag(xprt.as_ptr(), bindings::XPT_CONN, true);
            }
            if st.pending_data {
                xpt_flag(xprt.as_ptr(), bindings::XPT_DATA, true);
            }
            if st.pending_close {
                bindings::svc_xprt_deferred_close(xprt.as_ptr());
            }
        }
        // INVARIANT: `xprt` is live until `sever`, by the safety
        // requirement; `live` follows `xprt` under the lock. Release: the
        // flags set above and sunrpc's initialisation, for `data_ready`.
        st.xprt = Some(XprtPtr(xprt));
        self.live.store(xprt.as_ptr(), Release);
    }

    /// Detaches the transport; its `svc_xprt` is freed after an RCU grace
    /// period (`svc_class::free`), for readers that found it in `live`.
    fn sever(&self) {
        let mut st = self.state.lock();
        // INVARIANT: cleared with `xprt`.
        st.xprt = None;
        self.live.store(core::ptr::null_mut(), Relaxed);
        st.pending_close = true;
    }
}

/// Whether `xprt` is closing or dead (C `svc_xprt_is_dead`).
///
/// # Safety
///
/// `xprt` is live.
unsafe fn xpt_closing(xprt: *mut bindings::svc_xprt) -> bool {
    // SAFETY: `xpt_flags` is the live transport's bit field, changed only
    // with atomic bit operations; a volatile read sees one of its values.
    let flags = unsafe { core::ptr::read_volatile(addr_of!((*xprt).xpt_flags)) };
    let bits = (1 << bindings::XPT_CLOSE) | (1 << bindings::XPT_DEAD);
    flags & bits != 0
}

/// Sets the `XPT_*` flag `bit` of `xprt` and queues it for a server
/// thread (`svc_xprt_enqueue`, which queues nothing for a busy or dead
/// transport).
///
/// # Safety
///
/// `xprt` is allocated for the call (live, or dead with `XPT_BUSY` kept).
unsafe fn xpt_mark_and_enqueue(xprt: *mut bindings::svc_xprt, bit: u32) {
    // SAFETY: By the function's requirement.
    unsafe {
        xpt_flag(xprt, bit, true);
        bindings::svc_xprt_enqueue(xprt);
    }
}

/// Sets (`on`) or clears the `XPT_*` flag `bit` of `xprt`.
///
/// # Safety
///
/// `xprt` is live.
unsafe fn xpt_flag(xprt: *mut bindings::svc_xprt, bit: u32, on: bool) {
    // SAFETY: `xpt_flags` is the transport's bit field, changed only with
    // atomic bit operations.
    unsafe {
        let flags = addr_of_mut!((*xprt).xpt_flags);
        if on {
            kernel::bindings::set_bit(bit as c_ulong, flags);
        } else {
            kernel::bindings::clear_bit(bit as c_ulong, flags);
        }
    }
}

/// A server thread's request (`struct svc_rqst`) during one transport call.
///
/// # Invariants
///
/// `ptr` is the live `svc_rqst` sunrpc passed to the current operation,
/// whose `rq_xprt` is a transport of this class.
pub struct SvcRqst {
    ptr: NonNull<bindings::svc_rqst>,
    received: bool,
    arg_len: u32,
    /// The receive context whose buffer `rq_arg` points into, if it does
    /// ([`Self::set_arg_in_place`]): kept with the request's context from
    /// the end of `xpo_recvfrom`.
    arg_loan: Option<HeldRecv>,
}

/// The receive context whose buffer a request's `rq_arg` points into,
/// kept in the request's context ([`SvcTransport::Ctxt`]) until sunrpc
/// releases the context (`xpo_release_ctxt`): only then does sunrpc stop
/// reading the Call there, and the transport gets the context back
/// ([`SvcTransport::release_ctxt`]). Filled and emptied by this module's
/// trampolines only; a transport only stores it.
pub struct ArgLoan(Option<HeldRecv>);

impl ArgLoan {
    /// No loan.
    pub const fn new() -> Self {
        Self(None)
    }
}

impl Default for ArgLoan {
    fn default() -> Self {
        Self::new()
    }
}

impl SvcRqst {
    fn xprt(&self) -> *mut bindings::svc_xprt {
        // SAFETY: By the type invariant `ptr` is live.
        unsafe { (*self.ptr.as_ptr()).rq_xprt }
    }

    /// Whether the request's transport is closing or dead (C
    /// `svc_xprt_is_dead`): a Reply is then dropped, as C
    /// `svc_rdma_sendto` does.
    pub fn xprt_closing(&self) -> bool {
        // SAFETY: By the type invariant the request is live, and it holds
        // its transport.
        unsafe { xpt_closing(self.xprt()) }
    }

    /// Clears `XPT_DATA`: no more receives are queued (call with the
    /// transport's receive queue lock held, as C does).
    pub fn clear_data(&self) {
        // SAFETY: The transport is live during the call (type invariant).
        unsafe { xpt_flag(self.xprt(), bindings::XPT_DATA, false) };
    }

    /// Lets another thread receive on this transport
    /// (`svc_xprt_received`); done at most once per `xpo_recvfrom`.
    pub fn received(&mut self) {
        if !self.received {
            self.received = true;
            // SAFETY: The transport is live and busy for this thread.
            unsafe { bindings::svc_xprt_received(self.xprt()) };
        }
    }

    /// Most bytes of Call the request's argument pages can hold.
    pub fn arg_max(&self) -> u32 {
        // svc_alloc_arg keeps one page back.
        // SAFETY: By the type invariant `ptr` is live.
        let pages = unsafe { (*self.ptr.as_ptr()).rq_maxpages };
        let bytes = pages
            .saturating_sub(1)
            .saturating_mul(kernel::page::PAGE_SIZE);
        u32::try_from(bytes).unwrap_or(u32::MAX)
    }

    /// Pages of `rq_pages` a Call may fill (the head page included), one
    /// being kept back as [`Self::arg_max`] does.
    pub fn arg_pages(&self) -> usize {
        // SAFETY: By the type invariant `ptr` is live.
        let pages = unsafe { (*self.ptr.as_ptr()).rq_maxpages };
        pages.saturating_sub(1)
    }

    /// Takes the argument pages `rq_pages[1..=n]` out of the request (C
    /// `svc_rdma_clear_rqst_pages`): the sinks of a Call's RDMA Reads,
    /// which the request that assembles the Call takes over
    /// ([`Self::set_arg_paged`]). `svc_alloc_arg` refills the slots in
    /// bulk before this request receives again (`rq_pages_nfree`). The
    /// pages are appended to `pages`, whose new entries are then references
    /// the caller owns (`EINVAL`, with nothing taken, if a slot is empty).
    pub(in crate::rust) fn take_arg_pages(
        &mut self,
        n: usize,
        pages: &mut KVec<NonNull<bindings::page>>,
    ) -> Result {
        if n.checked_add(1).ok_or(EINVAL)? > self.arg_pages() {
            return Err(EINVAL);
        }
        pages.reserve(n, GFP_KERNEL)?;
        let len = pages.len();
        let r = self.ptr.as_ptr();
        // SAFETY: By the type invariant `ptr` is live; `arg_pages` says
        // `rq_pages` has more than `n + 1` entries, so `slots` names `n` of
        // them. Each page taken out of a slot is the request's reference,
        // which the slot gives up (emptied below). The `n` non-null
        // pointers are copied past the vector's `len` entries, within the
        // capacity reserved above.
        unsafe {
            let slots = (*r).rq_pages.add(1);
            if (0..n).any(|i| (*slots.add(i)).is_null()) {
                return Err(EINVAL);
            }
            copy_page_ptrs(slots, pages.as_mut_ptr().add(len).cast(), n);
            pages.inc_len(n);
            self.empty_arg_slots(n);
        }
        Ok(())
    }

    /// Leaves `rq_pages[1..=n]` empty, and `rq_pages_nfree` tells
    /// `svc_alloc_arg` to refill them before this request receives again.
    ///
    /// # Safety
    ///
    /// `n + 1` is at most [`Self::arg_pages`], and the slots' pages were
    /// given up (taken over or put) by the caller.
    unsafe fn empty_arg_slots(&mut self, n: usize) {
        let nfree = c_ulong::try_from(n)
            .unwrap_or(c_ulong::MAX)
            .saturating_add(1);
        let r = self.ptr.as_ptr();
        // SAFETY: By the type invariant `ptr` is live; `rq_pages` has more
        // than `n + 1` entries, and the slots hold nothing the request
        // still owns (the caller's requirements).
        unsafe {
            clear_page_ptrs((*r).rq_pages.add(1), n);
            (*r).rq_pages_nfree = (*r).rq_pages_nfree.max(nfree);
        }
    }

    /// Lays out `rq_arg` as C's `svc_rdma_read_complete_one` does for a
    /// Call with one Read chunk read into pages of its own, with `inline`
    /// copied into the head page (`rq_pages[0]`): for a Call whose
    /// Receive was not kept ([`Self::set_arg_paged_in_place`] otherwise).
    /// Its bytes before `position` are the head and the rest the tail; the
    /// pages of `sinks`, every Read into which completed, go to
    /// `rq_pages[1..]`, replacing (and putting) the pages there, holding
    /// the chunk's `chunk_len` bytes from offset 0 and then zeros up to
    /// `padded_len` (its XDR pad, written here). The pages' references go
    /// straight from the sinks to the request's slots (no vector between),
    /// and the request puts them with its own.
    pub fn set_arg_paged(
        &mut self,
        inline: &[u8],
        position: u32,
        chunk_len: u32,
        padded_len: u32,
        sinks: &PageSinks,
    ) -> Result {
        if inline.len() > kernel::page::PAGE_SIZE {
            return Err(EINVAL);
        }
        // SAFETY: By the type invariant `ptr` is live; `arg_max` needs
        // two pages, so `rq_pages[0]` is one.
        let head = unsafe { bindings::rpcrdma_rs_page_address(*(*self.ptr.as_ptr()).rq_pages) }
            .cast::<u8>();
        if head.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: The head page holds `PAGE_SIZE >= inline.len()` bytes and
        // is the request's own; `inline` is not in it.
        unsafe { core::ptr::copy_nonoverlapping(inline.as_ptr(), head, inline.len()) };
        // SAFETY: `head` holds the inline body, in the request's head page,
        // which lives as long as the request.
        unsafe { self.lay_out_paged(head, inline.len(), position, chunk_len, padded_len, sinks) }
    }

    /// As [`Self::set_arg_paged`], with the inline body where the device
    /// put it: bytes `at..` of the buffer of the receive context `held`,
    /// one of `slots`, which the head and the tail point into (C splits
    /// `rc_recv_buf` so), not copied. The context goes with the request's
    /// as that of [`Self::set_arg_in_place`] does; on an error it comes
    /// back.
    #[expect(clippy::too_many_arguments)]
    pub fn set_arg_paged_in_place<O: RecvSlotsOwner>(
        &mut self,
        slots: &RecvSlots<O>,
        held: HeldRecv,
        at: usize,
        position: u32,
        chunk_len: u32,
        padded_len: u32,
        sinks: &PageSinks,
    ) -> core::result::Result<(), (Error, HeldRecv)> {
        let Some(inline_len) = held.len().checked_sub(at) else {
            return Err((EINVAL, held));
        };
        let Some(bytes) = slots.held_ptr(&held) else {
            return Err((EINVAL, held));
        };
        // SAFETY: `at` is within the held bytes (checked above).
        let head = unsafe { bytes.add(at) };
        // SAFETY: `head` holds the `inline_len` bytes of the body, which
        // stay allocated and off the device until sunrpc is done with
        // `rq_arg`, as `set_arg_in_place` says.
        match unsafe {
            self.lay_out_paged(head, inline_len, position, chunk_len, padded_len, sinks)
        } {
            Ok(()) => {
                self.arg_loan = Some(held);
                Ok(())
            }
            Err(e) => Err((e, held)),
        }
    }

    /// The common part of [`Self::set_arg_paged`] and
    /// [`Self::set_arg_paged_in_place`]: `rq_arg` over the inline body at
    /// `head` and the chunk's pages.
    ///
    /// # Safety
    ///
    /// `head` points to `inline_len` bytes of the Call that stay valid,
    /// and that only sunrpc reads or changes, until the request's context
    /// is released.
    unsafe fn lay_out_paged(
        &mut self,
        head: *mut u8,
        inline_len: usize,
        position: u32,
        chunk_len: u32,
        padded_len: u32,
        sinks: &PageSinks,
    ) -> Result {
        let n = sinks.len();
        let page_size = kernel::page::PAGE_SIZE;
        let inline_len = u32::try_from(inline_len).map_err(|_| EMSGSIZE)?;
        let pad = padded_len.checked_sub(chunk_len).ok_or(EINVAL)?;
        let len = inline_len.checked_add(padded_len).ok_or(EMSGSIZE)?;
        if position > inline_len
            || pad > 3
            || n.checked_add(1).ok_or(EINVAL)? > self.arg_pages()
            || (padded_len as usize).div_ceil(page_size) != n
        {
            return Err(EINVAL);
        }
        // Where the pad goes: right after the chunk's last byte, in the
        // page that byte ends (pages are a multiple of 4 bytes long).
        let pad_page = chunk_len as usize / page_size;
        let pad_off = chunk_len as usize % page_size;
        let r = self.ptr.as_ptr();
        // SAFETY: By the type invariant `ptr` is live; `arg_pages` says
        // `rq_pages` has more than `n + 1` entries, each a page
        // (svc_alloc_arg filled them) or empty; the pad fits the page it
        // lands in (checked above); `head` holds `inline_len` bytes (the
        // function's requirement). The `n` slots the sinks' pages are
        // written to are put just before (so given up), and the Reads into
        // the sinks completed, as `take_received_pages` requires too.
        unsafe {
            let rq_pages = (*r).rq_pages;
            // The pages there now are put in one batch (the slots are
            // overwritten just below).
            put_page_slots(core::slice::from_raw_parts_mut(rq_pages.add(1), n));
            // The sinks' references move into the slots.
            if let Err(e) = sinks.hand_over_received_pages(rq_pages.add(1), n) {
                // Taken before (not reached: the work takes them once).
                // The slots' pages were put: emptied, for svc_alloc_arg
                // to refill.
                self.empty_arg_slots(n);
                return Err(e);
            }
            if pad > 0 && pad_page < n {
                let base = bindings::rpcrdma_rs_page_address(*rq_pages.add(1 + pad_page));
                if !base.is_null() {
                    core::ptr::write_bytes(base.cast::<u8>().add(pad_off), 0, pad as usize);
                }
            }
            let arg = &mut (*r).rq_arg;
            arg.head[0].iov_base = head.cast();
            arg.head[0].iov_len = position as usize;
            arg.pages = rq_pages.add(1);
            arg.page_base = 0;
            arg.page_len = padded_len;
            arg.tail[0].iov_base = head.add(position as usize).cast();
            arg.tail[0].iov_len = (inline_len - position) as usize;
            arg.len = len;
            arg.buflen = len;
        }
        self.arg_len = len;
        Ok(())
    }

    /// Lays out `rq_arg` for a Call that is bytes `offset..offset + len`
    /// of the buffer of the receive context `held`, one of `slots`, read
    /// where the device put it (C `svc_rdma_build_arg_xdr`): the head is
    /// those bytes, there are no pages. The context goes with the
    /// request's and is given back to the transport when sunrpc releases
    /// that ([`ArgLoan`]); on an error it comes back.
    pub fn set_arg_in_place<O: RecvSlotsOwner>(
        &mut self,
        slots: &RecvSlots<O>,
        held: HeldRecv,
        offset: usize,
        len: usize,
    ) -> core::result::Result<(), (Error, HeldRecv)> {
        let fits = offset
            .checked_add(len)
            .is_some_and(|end| len > 0 && end <= held.len());
        let (Some(bytes), Ok(len32), true) = (slots.held_ptr(&held), u32::try_from(len), fits)
        else {
            return Err((EINVAL, held));
        };

        let r = self.ptr.as_ptr();
        // SAFETY: By the type invariant `ptr` is live; `rq_pages` has an
        // entry past the first (`rq_maxpages` of them, and `arg_max` needs
        // two), so `rq_pages + 1` is within it. The head points to `len`
        // bytes of the held context's buffer (checked above), which stay
        // allocated and off the device until sunrpc is done with `rq_arg`:
        // off the device while the context is held (its `Recv` is in
        // `held`), which the trampoline moves into the request's context
        // and gives back only when sunrpc releases that: after the Reply
        // (`svc_xprt_release`), or for a request it deferred (copying the
        // Call out of `rq_arg` first) when it frees the deferred request;
        // sunrpc reads this `rq_arg` only before either. Allocated because
        // the trampoline keeps the hold only if it is one of the
        // transport's own contexts ([`SvcTransport::recv_slots`]), which
        // live as long as the transport, and sunrpc releases every
        // request's context before it frees the transport: each request
        // holds a reference on it, and the deferred requests queued on it
        // are freed when it is deleted. No Rust reference to the bytes
        // outlives this call.
        unsafe {
            let arg = &mut (*r).rq_arg;
            arg.head[0].iov_base = bytes.add(offset).cast();
            arg.head[0].iov_len = len;
            arg.pages = (*r).rq_pages.add(1);
            arg.page_base = 0;
            arg.page_len = 0;
            arg.tail[0].iov_base = core::ptr::null_mut();
            arg.tail[0].iov_len = 0;
            arg.len = len32;
            arg.buflen = len32;
        }
        self.arg_len = len32;
        self.arg_loan = Some(held);
        Ok(())
    }

    /// Lays out `rq_arg` for a Call of `len` bytes in the request's pages.
    /// The layout is TCP's: the head is `rq_pages[0]`, the rest follows in
    /// `rq_pages[1..]`.
    pub fn set_arg(&mut self, len: u32) -> Result {
        if len > self.arg_max() {
            return Err(EMSGSIZE);
        }
        let head = len.min(kernel::page::PAGE_SIZE as u32);
        let r = self.ptr.as_ptr();
        // SAFETY: By the type invariant `ptr` is live; `arg_max` says its
        // page array (`rq_pages`, `rq_maxpages` entries) has at least two
        // pages, so `rq_pages[0]` is a page and `rq_pages + 1` is within it.
        unsafe {
            let pages = (*r).rq_pages;
            let arg = &mut (*r).rq_arg;
            arg.head[0].iov_base = bindings::rpcrdma_rs_page_address(*pages);
            arg.head[0].iov_len = head as usize;
            arg.pages = pages.add(1);
            arg.page_base = 0;
            arg.page_len = len - head;
            arg.tail[0].iov_base = core::ptr::null_mut();
            arg.tail[0].iov_len = 0;
            arg.len = len;
            arg.buflen = len;
        }
        self.arg_len = len;
        Ok(())
    }

    /// Copies `src` into the Call at `offset` (after [`Self::set_arg`]).
    pub fn write_arg(&mut self, offset: u32, src: &[u8]) -> Result {
        let len = u32::try_from(src.len()).map_err(|_| EMSGSIZE)?;
        // SAFETY: `src` is valid for `len` bytes and only read.
        unsafe { self.arg_write(offset, src.as_ptr(), len) }
    }

    /// Copies `len` bytes at `buf_off` of `buf` (data an RDMA Read put
    /// there) into the Call at `offset` (after [`Self::set_arg`]), with no
    /// intermediate copy.
    pub fn write_arg_from_buf(
        &mut self,
        offset: u32,
        buf: &MappedBuf,
        buf_off: usize,
        len: usize,
    ) -> Result {
        let len32 = u32::try_from(len).map_err(|_| EMSGSIZE)?;
        // SAFETY: `src` is valid for `len` bytes during the call.
        buf.with_cpu_range(buf_off, len, |src| unsafe {
            self.arg_write(offset, src.cast(), len32)
        })?
    }

    /// Copies `len` bytes at `src` into the Call at `offset`, within
    /// `rq_arg`.
    ///
    /// # Safety
    ///
    /// `src` is readable for `len` bytes.
    unsafe fn arg_write(&mut self, offset: u32, src: *const u8, len: u32) -> Result {
        let r = self.ptr.as_ptr();
        // SAFETY: By the type invariant `ptr` is live; the range is checked
        // against `rq_arg.len` first; `src` by the safety requirement.
        unsafe {
            let arg_len = (*r).rq_arg.len;
            if offset > arg_len || len > arg_len - offset {
                return Err(EMSGSIZE);
            }
            write_xdr(addr_of!((*r).rq_arg), offset, src, len)
        }
    }

    /// Whether nfsd set up a backchannel on this connection.
    pub fn has_backchannel(&self) -> bool {
        // SAFETY: The transport is live during the call (type invariant).
        !unsafe { (*self.xprt()).xpt_bc_xprt }.is_null()
    }

    /// Completes the backchannel Call `xid` with the Reply `msg` (an RPC
    /// message) and the client's credit grant; unknown XIDs are ignored.
    /// (C `svc_rdma_handle_bc_reply`.)
    pub fn backchannel_reply(&self, xid: u32, msg: &[u8], credits: u32) -> Result {
        let len = i32::try_from(msg.len()).map_err(|_| EMSGSIZE)?;
        // SAFETY: The transport is live during the call (type invariant).
        let xprt = unsafe { (*self.xprt()).xpt_bc_xprt };
        if xprt.is_null() {
            return Err(ENOTCONN);
        }
        let credits = credits.clamp(1, bindings::RPCRDMA_MAX_BC_REQUESTS);
        // SAFETY: The backchannel transport lives while the connection
        // does; requests are looked up, pinned, completed and unpinned
        // under `queue_lock`, the window is changed under
        // `transport_lock`, as sunrpc requires. `msg` is copied into the
        // request's receive head only if it fits.
        let (queue, transport) = unsafe { (queue_lock(xprt), transport_lock(xprt)) };
        let req = {
            let _queue = queue.lock();
            // SAFETY: As above, under `queue_lock` (held).
            unsafe {
                let req = bindings::xprt_lookup_rqst(xprt, xid.to_be());
                if req.is_null() {
                    return Ok(());
                }
                (*req).rq_private_buf = (*req).rq_rcv_buf;
                let dst = (*req).rq_private_buf.head[0];
                if dst.iov_len < msg.len() {
                    return Ok(());
                }
                core::ptr::copy_nonoverlapping(msg.as_ptr(), dst.iov_base.cast::<u8>(), msg.len());
                bindings::xprt_pin_rqst(req);
                req
            }
        };
        {
            let _transport = transport.lock();
            // SAFETY: As above, under `transport_lock` (held).
            unsafe { (*xprt).cwnd = (credits as c_ulong) << bindings::RPC_CWNDSHIFT };
        }
        let _queue = queue.lock();
        // SAFETY: As above: the request was pinned under the lock, held
        // again here.
        unsafe {
            bindings::xprt_complete_rqst((*req).rq_task, len);
            bindings::xprt_unpin_rqst(req);
        }
        Ok(())
    }

    /// Length of the Reply in `rq_res`.
    pub fn res_len(&self) -> u32 {
        // SAFETY: By the type invariant `ptr` is live.
        let res = unsafe { &(*self.ptr.as_ptr()).rq_res };
        // sunrpc keeps a Reply's parts within its pages (u32 lengths).
        (res.head[0].iov_len as u32)
            .saturating_add(res.page_len)
            .saturating_add(res.tail[0].iov_len as u32)
    }

    /// Where the Reply's page list lies in the Reply: its first byte's
    /// offset (the head's length) and its length.
    pub fn res_page_region(&self) -> (u32, u32) {
        // SAFETY: By the type invariant `ptr` is live.
        let res = unsafe { &(*self.ptr.as_ptr()).rq_res };
        // sunrpc keeps a Reply's parts within its pages (u32 lengths).
        (res.head[0].iov_len as u32, res.page_len)
    }

    /// The request's Reply pages as a send context checks them before it
    /// holds them ([`Self::give_reply_pages_to`]): the address of their
    /// first slot (`rq_respages`), which names this request's Reply among
    /// those in flight, and how many there are (to `rq_next_page`).
    pub fn reply_slots(&self) -> (usize, usize) {
        // SAFETY: By the type invariant `ptr` is live; both point into
        // `rq_pages`, `rq_respages` first.
        unsafe {
            let r = &*self.ptr.as_ptr();
            let n = r.rq_next_page.offset_from(r.rq_respages);
            (r.rq_respages as usize, usize::try_from(n).unwrap_or(0))
        }
    }

    /// Gives the request's Reply pages `rq_respages .. rq_next_page`, with
    /// their references, to `to` (a send context's, C
    /// `svc_rdma_save_io_pages`): the slots are emptied, so that
    /// `svc_rqst_release_pages` skips them and `svc_alloc_arg` refills
    /// them. Fails, with nothing moved, when `to` cannot grow to hold
    /// them. Called once the Reply's pages are no longer read.
    pub fn give_reply_pages_to(&mut self, to: &mut HeldPages) -> Result {
        let (_, n) = self.reply_slots();
        // SAFETY: By the type invariant `ptr` is live and this thread's
        // (`&mut self`); the `n` slots from `rq_respages` lie within
        // `rq_pages`, each a page with the request's reference or null,
        // given up here.
        unsafe { to.take_from((*self.ptr.as_ptr()).rq_respages, n) }
    }

    /// The Reply's bytes `[offset, offset + len)` in the pages that hold
    /// them, for an RDMA Write without a copy (C `svc_rdma_page_dma_map`). Only if every
    /// byte is in the page list, within `max` pages, and in pages the
    /// request releases after the reply (`rq_respages .. rq_next_page`,
    /// which `svc_rqst_release_pages` puts and the next request refills
    /// with new pages, so a page referenced here is never reused for
    /// another reply while the Write is in flight); `None` otherwise. The
    /// range's slots are checked here; that each holds a page is checked
    /// as the work request built over them maps them, all in one call
    /// ([`ResPages::range`]), which fails on an empty one.
    #[inline(always)]
    pub fn res_pages(&self, offset: u32, len: u32, max: usize) -> Option<ResPages<'_>> {
        // SAFETY: By the type invariant `ptr` is live; sunrpc does not
        // change the Reply while it is being sent.
        let r = unsafe { &*self.ptr.as_ptr() };
        let res = &r.rq_res;
        let page = kernel::page::PAGE_SIZE as u64;
        let head = res.head[0].iov_len as u64;
        let (offset, len) = (u64::from(offset), u64::from(len));
        let pages_end = head + u64::from(res.page_len);
        if len == 0 || offset < head || offset + len > pages_end || res.pages.is_null() {
            return None;
        }
        let at = offset - head + u64::from(res.page_base);
        let end = at + len;
        let (first, last) = (at / page, (end - 1) / page);
        let count = usize::try_from(last - first + 1).ok()?;
        if count > max {
            return None;
        }
        let (lo, hi) = (r.rq_respages.cast_const(), r.rq_next_page.cast_const());
        // SAFETY: The page array covers `page_base + page_len` bytes and
        // `first <= last` are pages below that.
        let (first_slot, last_slot) = unsafe {
            (
                res.pages.add(usize::try_from(first).ok()?).cast_const(),
                res.pages.add(usize::try_from(last).ok()?).cast_const(),
            )
        };
        // The slots are consecutive: all lie in the range if both ends do.
        // Whether each holds a page is checked where it is mapped, in the
        // same pass (`rpcrdma_rs_map_page_run`), not in one of its own.
        if first_slot < lo || last_slot >= hi {
            return None;
        }
        // INVARIANT: the slots of `[at, end)` were checked just above.
        Some(ResPages {
            rqst: self,
            at,
            end,
            count,
        })
    }

    /// Copies Reply bytes at `offset` into `dst`.
    pub fn read_res(&self, offset: u32, dst: &mut [u8]) -> Result {
        let len = u32::try_from(dst.len()).map_err(|_| EMSGSIZE)?;
        // SAFETY: `dst` is writable for `len` bytes.
        unsafe { self.res_read(offset, dst.as_mut_ptr(), len) }
    }

    /// Copies `len` Reply bytes at `offset` into `buf` at `buf_off` (the
    /// source of an RDMA Write or a Send), with no intermediate copy.
    pub fn read_res_into_buf(
        &self,
        offset: u32,
        buf: &MappedBuf,
        buf_off: usize,
        len: usize,
    ) -> Result {
        let len32 = u32::try_from(len).map_err(|_| EMSGSIZE)?;
        // SAFETY: `dst` is valid for `len` bytes during the call.
        buf.with_cpu_range_mut(buf_off, len, |dst| unsafe {
            self.res_read(offset, dst.cast(), len32)
        })?
    }

    /// Copies `len` bytes of the Reply at `offset` to `dst`, within the
    /// Reply's length.
    ///
    /// # Safety
    ///
    /// `dst` is writable for `len` bytes.
    unsafe fn res_read(&self, offset: u32, dst: *mut u8, len: u32) -> Result {
        // SAFETY: By the type invariant `ptr` is live; `dst` by the safety
        // requirement.
        unsafe {
            read_xdr(
                addr_of!((*self.ptr.as_ptr()).rq_res),
                self.res_len(),
                offset,
                dst,
                len,
            )
        }
    }
}

/// A backchannel (server to client) RPC Call being sent
/// (`struct rpc_rqst` of the `"rdma backchannel"` transport).
///
/// # Invariants
///
/// `ptr` is the live request sunrpc passed to `send_request`.
pub struct BcCall {
    ptr: NonNull<bindings::rpc_rqst>,
}

impl BcCall {
    /// The XID of the Call.
    pub fn xid(&self) -> u32 {
        // SAFETY: By the type invariant `ptr` is live.
        u32::from_be(unsafe { (*self.ptr.as_ptr()).rq_xid })
    }

    /// Length of the RPC message.
    pub fn len(&self) -> u32 {
        // SAFETY: By the type invariant `ptr` is live.
        unsafe { (*self.ptr.as_ptr()).rq_snd_buf.len }
    }

    /// Whether the message is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copies message bytes at `offset` into `dst`.
    pub fn read(&self, offset: u32, dst: &mut [u8]) -> Result {
        let len = u32::try_from(dst.len()).map_err(|_| EMSGSIZE)?;
        // SAFETY: By the type invariant `ptr` is live; `dst` is writable
        // for `len` bytes.
        unsafe {
            read_xdr(
                addr_of!((*self.ptr.as_ptr()).rq_snd_buf),
                self.len(),
                offset,
                dst.as_mut_ptr(),
                len,
            )
        }
    }
}

/// A server transport class implementation.
#[vtable]
pub trait SvcTransport: Sized + 'static {
    /// State of one transport (listener or connection).
    type Data: Send + Sync;
    /// State of one request, from `xpo_recvfrom` to `xpo_release_ctxt`.
    type Ctxt: Send;
    /// The owner of the receive contexts whose buffers Calls are read from
    /// in place ([`SvcRqst::set_arg_in_place`]).
    type RecvOwner: RecvSlotsOwner;

    /// Creates a listener on `addr` in the network namespace `net`, the
    /// one nfsd asked for (`xpo_create`).
    fn create(net: &Net, addr: Addr, link: &Arc<XprtLink>) -> Result<Self::Data>;

    /// Accepts the next pending connection of `listener` (`xpo_accept`).
    fn accept(listener: &Self::Data, link: &Arc<XprtLink>) -> Option<Self::Data>;

    /// The CM identifier whose addresses the transport reports.
    fn cm_id(data: &Self::Data) -> &CmId;

    /// Receives the next Call (`xpo_recvfrom`). Returns the request state
    /// once `rq_arg` holds a Call ([`SvcRqst::set_arg`]); `None` when nothing
    /// is to be processed. Must call [`SvcRqst::received`] once it has taken
    /// its work off the transport (the trampoline calls it otherwise).
    fn recvfrom(data: &Self::Data, rqst: &mut SvcRqst) -> Option<KBox<Self::Ctxt>>;

    /// Sends the Reply in `rq_res` (`xpo_sendto`).
    fn sendto(data: &Self::Data, rqst: &mut SvcRqst, ctxt: Option<&mut Self::Ctxt>) -> Result;

    /// Notes where a result payload (`READ` data) sits in the Reply
    /// (`xpo_result_payload`). `ddp_allowed` is false when the Call's
    /// security flavor checksums or encrypts the Reply (krb5i, krb5p): the
    /// payload is then part of what it protects and must stay in the
    /// message, not move to a Write chunk.
    fn result_payload(
        _ctxt: &mut Self::Ctxt,
        _offset: u32,
        _length: u32,
        _ddp_allowed: bool,
    ) -> Result {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// Where the request's context keeps the receive context its Call is
    /// read from in place ([`SvcRqst::set_arg_in_place`]).
    fn arg_loan(ctxt: &mut Self::Ctxt) -> &mut ArgLoan;

    /// The receive contexts of the transport `data` whose buffers its
    /// Calls are read from in place (`None` for one that has none): only
    /// theirs may `rq_arg` point into, for they live as long as `data`.
    fn recv_slots(data: &Self::Data) -> Option<&RecvSlots<Self::RecvOwner>>;

    /// Takes back the state of a request sunrpc is done with
    /// (`xpo_release_ctxt`), to reuse its allocation, and the receive
    /// context its Call was read from in place, if it was, to post again;
    /// without this method both are dropped (that context is never posted
    /// again).
    fn release_ctxt(_data: &Self::Data, _ctxt: KBox<Self::Ctxt>, _held: Option<HeldRecv>) {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// Whether a Reply can be sent without waiting (`xpo_has_wspace`).
    fn has_wspace(_data: &Self::Data) -> bool {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// Sends a backchannel Call on the connection `data`.
    fn bc_send(data: &Self::Data, call: &BcCall) -> Result;

    /// A backchannel transport was set up on the connection `data` (nfsd's
    /// callback client created it).
    fn bc_setup(_data: &Self::Data) {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// The transport is being closed (`xpo_detach`); it is dropped (in
    /// `xpo_free`) when the last request is done with it.
    fn detach(data: &Self::Data);
}

/// What the C private pointer of each `svc_xprt` owns.
struct Holder<T: SvcTransport> {
    link: Arc<XprtLink>,
    data: T::Data,
}

/// Whether a Call's security flavor (`svc_cred::cr_flavor`, a GSS
/// pseudoflavor once the credential is accepted) protects the data it
/// carries: RPCSEC_GSS integrity or privacy of any mechanism the kernel
/// knows (`RPC_AUTH_GSS_KRB5I` and `KRB5P`, the `LKEY` and `SPKM` ones).
fn flavor_touches_data(flavor: u32) -> bool {
    matches!(flavor, 390004 | 390005 | 390007 | 390008 | 390010 | 390011)
}

/// The operations table of `T` and its trampolines.
pub(in crate::rust) struct OpsTable<T: SvcTransport>(PhantomData<T>);

impl<T: SvcTransport> OpsTable<T> {
    const OPS: bindings::svc_xprt_ops = bindings::svc_xprt_ops {
        xpo_create: Some(Self::create),
        xpo_accept: Some(Self::accept),
        // sunrpc calls these three unconditionally: a transport without
        // the method gets the default (always room, no payload to note,
        // the context freed).
        xpo_has_wspace: Some(if T::HAS_HAS_WSPACE {
            Self::has_wspace
        } else {
            Self::always_wspace
        }),
        xpo_recvfrom: Some(Self::recvfrom),
        xpo_sendto: Some(Self::sendto),
        xpo_result_payload: Some(if T::HAS_RESULT_PAYLOAD {
            Self::result_payload
        } else {
            Self::no_result_payload
        }),
        xpo_release_ctxt: Some(Self::release_ctxt),
        xpo_detach: Some(Self::detach),
        xpo_free: Some(Self::free),
        xpo_kill_temp_xprt: Some(Self::kill_temp_xprt),
        xpo_handshake: None,
    };

    /// Allocates the `svc_xprt` for `data` and attaches `link`.
    ///
    /// # Safety
    ///
    /// `serv` and `net` are the live service and network namespace of the
    /// operation sunrpc is calling (`xpo_create`, or the listener's for
    /// `xpo_accept`).
    unsafe fn install(
        serv: *mut bindings::svc_serv,
        net: *mut bindings::net,
        link: Arc<XprtLink>,
        data: T::Data,
        listener: bool,
    ) -> Result<NonNull<bindings::svc_xprt>> {
        let holder = KBox::new(
            Holder::<T> {
                link: link.clone(),
                data,
            },
            GFP_KERNEL,
        )?;
        let priv_ = holder.into_foreign();
        // SAFETY: `serv` and `net` are live by the safety requirement.
        let x = unsafe { svc_class::alloc(serv, net, priv_, listener) };
        let Some(x) = NonNull::new(x) else {
            // SAFETY: `priv_` came from `into_foreign` above and was not
            // handed to C.
            drop(unsafe { KBox::<Holder<T>>::from_foreign(priv_) });
            return Err(ENOMEM);
        };
        // SAFETY: `priv_` is owned by `x` until `free`; only shared borrows.
        let h = unsafe { KBox::<Holder<T>>::borrow(priv_) };
        // SAFETY: `x` is live; the CM identifier is live while the holder is.
        unsafe { svc_class::set_addrs(x.as_ptr(), T::cm_id(&h.data).as_ptr(), listener) };
        // SAFETY: `x` lives until `free`, which severs the link first.
        unsafe { link.attach(x) };
        Ok(x)
    }

    /// Borrows the state of `xprt`.
    ///
    /// # Safety
    ///
    /// `xprt` is a live transport of this class that `free` has not
    /// released; the borrow must end before `free` runs.
    unsafe fn holder<'a>(xprt: *mut bindings::svc_xprt) -> &'a Holder<T> {
        // SAFETY: By the safety requirement the private pointer came from
        // `KBox::<Holder<T>>::into_foreign` in `install` and is still owned
        // by `xprt`.
        unsafe { KBox::<Holder<T>>::borrow(svc_class::state(xprt)) }
    }

    /// # Safety
    ///
    /// Called by sunrpc with a live service and namespace and a socket
    /// address of `salen` bytes.
    unsafe extern "C" fn create(
        serv: *mut bindings::svc_serv,
        net: *mut bindings::net,
        sa: *mut bindings::sockaddr,
        salen: c_int,
        _flags: c_int,
    ) -> *mut bindings::svc_xprt {
        let len = usize::try_from(salen).unwrap_or(0);
        // SAFETY: `sa` is valid for `salen` bytes (function safety
        // requirement).
        let sa = unsafe { SockAddr::copy_from(sa, len) };
        let Some(addr) = sa.addr() else {
            return EAFNOSUPPORT.to_ptr();
        };
        // SAFETY: sunrpc holds the namespace for the whole call (function
        // safety requirement); the listener's CM identifier takes its own
        // reference.
        let ns = unsafe { Net::from_raw(net) };
        let res = XprtLink::new().and_then(|link| {
            let data = T::create(ns, addr, &link)?;
            // SAFETY: `serv` and `net` are live (function safety requirement).
            unsafe { Self::install(serv, net, link, data, true) }
        });
        match res {
            Ok(x) => x.as_ptr(),
            Err(e) => e.to_ptr(),
        }
    }

    /// # Safety
    ///
    /// Called by sunrpc with a live listener of this class.
    unsafe extern "C" fn accept(xprt: *mut bindings::svc_xprt) -> *mut bindings::svc_xprt {
        // SAFETY: `xprt` is live (function safety requirement).
        let h = unsafe { Self::holder(xprt) };
        let Ok(link) = XprtLink::new() else {
            return core::ptr::null_mut();
        };
        let Some(data) = T::accept(&h.data, &link) else {
            return core::ptr::null_mut();
        };
        // SAFETY: `xprt` is live, so are its service and namespace.
        let res = unsafe { Self::install((*xprt).xpt_server, (*xprt).xpt_net, link, data, false) };
        match res {
            Ok(x) => x.as_ptr(),
            Err(_) => core::ptr::null_mut(),
        }
    }

    /// `xpo_has_wspace` of a transport without [`SvcTransport::has_wspace`].
    extern "C" fn always_wspace(_xprt: *mut bindings::svc_xprt) -> c_int {
        1
    }

    /// `xpo_result_payload` of a transport without
    /// [`SvcTransport::result_payload`].
    extern "C" fn no_result_payload(
        _rqstp: *mut bindings::svc_rqst,
        _offset: c_uint,
        _length: c_uint,
    ) -> c_int {
        0
    }

    /// # Safety
    ///
    /// Called by sunrpc with a live transport of this class.
    unsafe extern "C" fn has_wspace(xprt: *mut bindings::svc_xprt) -> c_int {
        // SAFETY: `xprt` is live (function safety requirement).
        let h = unsafe { Self::holder(xprt) };
        c_int::from(T::has_wspace(&h.data))
    }

    /// # Safety
    ///
    /// Called by sunrpc from a server thread with a live request whose
    /// transport is of this class and busy for this thread.
    unsafe extern "C" fn recvfrom(rqstp: *mut bindings::svc_rqst) -> c_int {
        let Some(ptr) = NonNull::new(rqstp) else {
            return 0;
        };
        // A zero page count on error makes svc_rqst_release_pages() a no-op.
        // SAFETY: `rqstp` is live (function safety requirement).
        unsafe {
            (*rqstp).rq_next_page = (*rqstp).rq_respages;
            (*rqstp).rq_xprt_ctxt = core::ptr::null_mut();
        }
        // INVARIANT: `ptr` is the live request of this call.
        let mut rqst = SvcRqst {
            ptr,
            received: false,
            arg_len: 0,
            arg_loan: None,
        };
        // SAFETY: The request's transport is live and of this class.
        let h = unsafe { Self::holder(rqst.xprt()) };
        let ctxt = T::recvfrom(&h.data, &mut rqst);
        rqst.received();
        match ctxt {
            Some(mut ctxt) if rqst.arg_len > 0 => {
                // `rq_arg` may point into a receive context's buffer: kept
                // with the request's context until sunrpc releases it, if
                // it is one of the transport's own (whose buffers live as
                // long as it does).
                let held = rqst.arg_loan.take();
                if let Some(held) = &held {
                    if !T::recv_slots(&h.data).is_some_and(|s| s.holds(held)) {
                        crate::pr_err_ratelimited!(
                            "rpcrdma_rs: a call read from another transport's buffer; dropped\n"
                        );
                        Self::give_back(&h.data, ctxt, None);
                        return 0;
                    }
                }
                T::arg_loan(&mut ctxt).0 = held;
                // SAFETY: `rqstp` is live; the context is owned by the
                // request until `release_ctxt`. RDMA is a secure
                // transport, as C `svc_rdma_recvfrom` says.
                unsafe {
                    (*rqstp).rq_xprt_ctxt = ctxt.into_foreign();
                    (*rqstp).rq_prot = kernel::bindings::IPPROTO_MAX as c_uint;
                    bindings::svc_xprt_copy_addrs(rqstp, (*rqstp).rq_xprt);
                    kernel::bindings::set_bit(
                        bindings::RQ_SECURE as c_ulong,
                        addr_of_mut!((*rqstp).rq_flags),
                    );
                }
                c_int::try_from(rqst.arg_len).unwrap_or(0)
            }
            Some(ctxt) => {
                // No Call after all: the context goes back as sunrpc would
                // give it back, with the receive context held (if any).
                let held = rqst.arg_loan.take();
                Self::give_back(&h.data, ctxt, held);
                0
            }
            None => 0,
        }
    }

    /// Borrows the request context of `rqstp`, if any.
    ///
    /// # Safety
    ///
    /// `rqstp` is live and used by this thread only; its context, when not
    /// null, came from `recvfrom` and is not borrowed elsewhere.
    unsafe fn ctxt<'a>(rqstp: *mut bindings::svc_rqst) -> Option<&'a mut T::Ctxt> {
        // SAFETY: `rqstp` is live.
        let p = unsafe { (*rqstp).rq_xprt_ctxt };
        if p.is_null() {
            return None;
        }
        // SAFETY: By the safety requirement `p` came from
        // `KBox::<T::Ctxt>::into_foreign` and is borrowed only here.
        Some(unsafe { KBox::<T::Ctxt>::borrow_mut(p) })
    }

    /// # Safety
    ///
    /// Called by sunrpc from the server thread that owns `rqstp`, whose
    /// transport is of this class.
    unsafe extern "C" fn sendto(rqstp: *mut bindings::svc_rqst) -> c_int {
        let Some(ptr) = NonNull::new(rqstp) else {
            return EINVAL.to_errno();
        };
        // INVARIANT: `ptr` is the live request of this call.
        let mut rqst = SvcRqst {
            ptr,
            received: true,
            arg_len: 0,
            arg_loan: None,
        };
        // SAFETY: The request's transport is live and of this class.
        let h = unsafe { Self::holder(rqst.xprt()) };
        // SAFETY: Only this thread uses the request and its context.
        let ctxt = unsafe { Self::ctxt(rqstp) };
        from_result(|| {
            T::sendto(&h.data, &mut rqst, ctxt)?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called by sunrpc from the server thread that owns `rqstp`.
    unsafe extern "C" fn result_payload(
        rqstp: *mut bindings::svc_rqst,
        offset: c_uint,
        length: c_uint,
    ) -> c_int {
        // SAFETY: Only this thread uses the request; the flavor was set
        // when the Call's credential was accepted, before nfsd encodes.
        let ddp_allowed = !flavor_touches_data(unsafe { (*rqstp).rq_cred.cr_flavor });
        // SAFETY: Only this thread uses the request and its context.
        let Some(c) = (unsafe { Self::ctxt(rqstp) }) else {
            return 0;
        };
        from_result(|| {
            T::result_payload(c, offset, length, ddp_allowed)?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called by sunrpc with a context produced by `recvfrom` (or null),
    /// which it gives up, and the live transport of this class the request
    /// (or the deferred request) holds a reference on.
    unsafe extern "C" fn release_ctxt(xprt: *mut bindings::svc_xprt, ctxt: *mut c_void) {
        if ctxt.is_null() {
            return;
        }
        // SAFETY: `ctxt` came from `KBox::<T::Ctxt>::into_foreign`; sunrpc
        // hands it back exactly once.
        let mut ctxt = unsafe { KBox::<T::Ctxt>::from_foreign(ctxt) };
        if xprt.is_null() {
            // Freed, and the receive context held, if any, dropped: the
            // transport is gone.
            return;
        }
        // SAFETY: `xprt` is live and of this class (function safety
        // requirement).
        let h = unsafe { Self::holder(xprt) };
        let held = T::arg_loan(&mut ctxt).0.take();
        Self::give_back(&h.data, ctxt, held);
    }

    /// Gives a request's context back to the transport `data` (or frees
    /// it, for a transport without [`SvcTransport::release_ctxt`]) once
    /// sunrpc reads the Call no more, with the receive context the Call
    /// was read from in place, if it was.
    fn give_back(data: &T::Data, ctxt: KBox<T::Ctxt>, held: Option<HeldRecv>) {
        if T::HAS_RELEASE_CTXT {
            T::release_ctxt(data, ctxt, held);
        }
    }

    /// # Safety
    ///
    /// Called by sunrpc with a live transport of this class.
    unsafe extern "C" fn detach(xprt: *mut bindings::svc_xprt) {
        // SAFETY: `xprt` is live (function safety requirement).
        let h = unsafe { Self::holder(xprt) };
        T::detach(&h.data);
    }

    /// # Safety
    ///
    /// Called by sunrpc once, when the last reference to a transport of
    /// this class is gone.
    unsafe extern "C" fn free(xprt: *mut bindings::svc_xprt) {
        // SAFETY: `xprt` is live until freed below; its private pointer
        // came from `into_foreign` in `install` and is taken back once.
        let holder = unsafe { KBox::<Holder<T>>::from_foreign(svc_class::state(xprt)) };
        // Nobody reaches the `svc_xprt` through the link after this; those
        // that found it just before are done within a grace period.
        holder.link.sever();
        drop(holder);
        // SAFETY: Allocated by `svc_class::alloc`; no references to it
        // remain (sunrpc's are gone, the link is severed) but those of RCU
        // readers, which the free waits for.
        unsafe { svc_class::free(xprt) };
    }

    /// # Safety
    ///
    /// Called by the backchannel's `send_request` (`rust/sunrpc/svc_bc.rs`) with a live request and the
    /// live, not dead, transport of this class it belongs to.
    pub(in crate::rust) unsafe extern "C" fn bc_send(
        sxprt: *mut bindings::svc_xprt,
        rqst: *mut bindings::rpc_rqst,
    ) -> c_int {
        let Some(ptr) = NonNull::new(rqst) else {
            return EINVAL.to_errno();
        };
        // INVARIANT: `ptr` is the live request of this call.
        let call = BcCall { ptr };
        // SAFETY: `sxprt` is live and of this class.
        let h = unsafe { Self::holder(sxprt) };
        from_result(|| {
            T::bc_send(&h.data, &call)?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called by the backchannel's `setup` (`rust/sunrpc/svc_bc.rs`) with
    /// the live transport of this class it set a backchannel up on.
    pub(in crate::rust) unsafe fn bc_setup(sxprt: *mut bindings::svc_xprt) {
        if T::HAS_BC_SETUP {
            // SAFETY: `sxprt` is live and of this class.
            let h = unsafe { Self::holder(sxprt) };
            T::bc_setup(&h.data);
        }
    }

    /// # Safety
    ///
    /// Called by sunrpc with a live transport; nothing to do for RDMA.
    unsafe extern "C" fn kill_temp_xprt(_xprt: *mut bindings::svc_xprt) {}
}

/// The registration of the `"rdma"` server transport class.
///
/// # Invariants
///
/// The class is registered with `OpsTable::<T>::OPS` from `new` until drop;
/// the backchannel class is registered for at least as long (`_bc` is
/// dropped after `drop` unregisters the class).
pub struct Registration<T: SvcTransport> {
    _bc: BcRegistration<T>,
}

impl<T: SvcTransport> Registration<T> {
    /// Registers the class; there is one per module. `module` owns both
    /// classes.
    pub fn new(module: &ThisModule) -> Result<Self> {
        let bc = BcRegistration::<T>::new(module)?;
        // The ops table is a `'static` constant.
        svc_class::register(module, &OpsTable::<T>::OPS)?;
        // INVARIANT: Registered above.
        Ok(Self { _bc: bc })
    }
}

impl<T: SvcTransport> Drop for Registration<T> {
    fn drop(&mut self) {
        // SAFETY: By the type invariant the class is registered. sunrpc
        // holds a module reference per transport of the class, so none is
        // left when the module is being unloaded.
        unsafe { svc_class::unregister() };
    }
}

/// The pages of a Reply's byte range, from [`SvcRqst::res_pages`].
///
/// # Invariants
///
/// Every page of `[at, end)` of `rqst`'s `rq_res` page list (offsets from
/// its first page) is an entry within `rq_respages .. rq_next_page` (a
/// page, or null, which the mapping refuses); `count` is how many pages
/// that range spans.
pub struct ResPages<'a> {
    rqst: &'a SvcRqst,
    at: u64,
    end: u64,
    count: usize,
}

impl ResPages<'_> {
    /// How many pages the range spans.
    pub fn count_pages(&self) -> usize {
        self.count
    }

    /// Where the range lies among the Reply's pages: the request's
    /// [`SvcRqst::reply_slots`] address, and how many of its Reply pages,
    /// from the first, reach the range's last page.
    pub fn reply_slots(&self) -> Result<(usize, usize)> {
        let page = kernel::page::PAGE_SIZE as u64;
        let first = usize::try_from(self.at / page)?;
        // SAFETY: By the type invariant `ptr` is live, and sunrpc does not
        // change the Reply while it is being sent.
        let r = unsafe { &*self.rqst.ptr.as_ptr() };
        // SAFETY: By the type invariant the range's first slot lies within
        // `rq_respages .. rq_next_page`, in the one array `rq_pages`.
        let index = unsafe { r.rq_res.pages.add(first).offset_from(r.rq_respages) };
        let end = usize::try_from(index)?
            .checked_add(self.count)
            .ok_or(EINVAL)?;
        Ok((r.rq_respages as usize, end))
    }

    /// The range as a [`PageRange`], for a work request that references
    /// and maps its pages ([`WorkRequest::with_pages`]).
    ///
    /// [`WorkRequest::with_pages`]: crate::rust::rdma::verbs::WorkRequest::with_pages
    #[inline(always)]
    pub fn range(&self) -> Result<PageRange<'_>> {
        let page = kernel::page::PAGE_SIZE as u64;
        let first = usize::try_from(self.at / page)?;
        let off = usize::try_from(self.at % page)?;
        let len = usize::try_from(self.end - self.at)?;
        // SAFETY: By the type invariant `ptr` is live, and sunrpc does not
        // change the Reply while it is being sent.
        let res = unsafe { &(*self.rqst.ptr.as_ptr()).rq_res };
        // SAFETY: By the type invariant the `count` entries from `first`
        // are within the page array, which the request keeps while `self`
        // borrows it.
        let pages = unsafe { core::slice::from_raw_parts(res.pages.add(first), self.count) };
        // SAFETY: Each of those entries is a live page, the request's until
        // it is released, after `self`, or null (type invariant).
        unsafe { PageRange::new(pages, off, len) }
    }
}
