// SPDX-License-Identifier: GPL-2.0

//! Safe wrappers of the sunrpc client transport API (`rpc_xprt`,
//! `rpc_rqst`, `xprt_class`) used by `xprtrdma/`, and fast registration
//! (FRWR) of request buffers.
//!
//! The class and its operations table are in [`crate::rust::sunrpc::xprt_class`].
//!
//! C header: [`include/linux/sunrpc/xprt.h`](srctree/include/linux/sunrpc/xprt.h).

use crate::rust::bindings;
use crate::rust::module::live;
use crate::rust::rdma::cm::Net;
use crate::rust::rdma::cm::{Addr, SockAddr};
use crate::rust::rdma::send_ring::{HasSendRing, SendCtxt};
use crate::rust::rdma::verbs::{
    Anchor, CompletionHandler, Endpoint, MappedBuf, PageRef, WorkRequest,
};
use crate::rust::sunrpc::xdr_buf::read_xdr;
use crate::rust::sunrpc::xprt_class;
use crate::rust::sunrpc::xprt_locks::transport_lock;
use core::marker::PhantomData;
use core::ptr::{addr_of, addr_of_mut, NonNull};
use kernel::error::to_result;
use kernel::ffi::{c_long, c_ulong, c_void};
use kernel::prelude::*;
use kernel::sync::Arc;

/// `XDRBUF_READ`: the page data is the target of a file read (DDP-eligible
/// reply payload).
pub const XDRBUF_READ: u32 = 1;
/// `XDRBUF_WRITE`: the page data is the source of a file write
/// (DDP-eligible call payload).
pub const XDRBUF_WRITE: u32 = 2;
/// `XDRBUF_SPARSE_PAGES`: the page array may hold NULL entries, which the
/// transport fills before it receives into them (NFSv3 GETACL).
const XDRBUF_SPARSE_PAGES: u32 = 4;
/// `RPCAUTH_AUTH_DATATOUCH`, a bit number of `rpc_auth::au_flags`: the
/// flavor computes over or transforms the data (krb5i, krb5p).
const RPCAUTH_AUTH_DATATOUCH: u32 = 1;

/// The counters sunrpc keeps for every transport (`rpc_xprt::stat`), in
/// the order a transport's mountstats line starts with them (C
/// `xprt_rdma_print_stats`, `xs_tcp_print_stats`): what follows them is
/// the transport's own ([`XprtOps::print_stats`]).
///
/// [`XprtOps::print_stats`]: crate::rust::sunrpc::xprt_class::XprtOps::print_stats
#[derive(Clone, Copy, Debug, Default)]
pub struct XprtCounters {
    /// Port bindings (`bind_count`).
    pub bind_count: c_ulong,
    /// Connections made (`connect_count`).
    pub connect_count: c_ulong,
    /// Time spent connecting, in seconds (`connect_time`).
    pub connect_secs: c_ulong,
    /// Seconds since the transport was last used; 0 while not connected.
    pub idle_secs: c_long,
    /// Requests sent (`sends`).
    pub sends: c_ulong,
    /// Replies received (`recvs`).
    pub recvs: c_ulong,
    /// Replies whose xid matched no request (`bad_xids`).
    pub bad_xids: c_ulong,
    /// Sum of the requests in flight at each send (`req_u`).
    pub req_u: u64,
    /// Sum of the backlog at each send (`bklog_u`).
    pub bklog_u: u64,
}

/// Offset of `p` in its page.
fn in_page(p: *mut c_void) -> u32 {
    (p as usize % kernel::page::PAGE_SIZE) as u32
}

/// The shape of an `xdr_buf`: its lengths, and where its head and tail
/// start within their pages.
#[inline(always)]
fn buf_shape(b: &bindings::xdr_buf) -> XdrBufLayout {
    // Lengths of a live xdr_buf fit 32 bits (sunrpc keeps them in
    // `unsigned int`, `iov_len` is bounded by the buffer's pages).
    XdrBufLayout {
        head_len: b.head[0].iov_len as u32,
        head_page_offset: in_page(b.head[0].iov_base),
        page_base: b.page_base,
        page_len: b.page_len,
        tail_len: b.tail[0].iov_len as u32,
        tail_page_offset: in_page(b.tail[0].iov_base),
        buflen: b.buflen,
    }
}

/// The layout of an `xdr_buf`: the lengths of its parts and where in their
/// pages they start.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XdrBufLayout {
    /// `head[0].iov_len`.
    pub head_len: u32,
    /// `offset_in_page(head[0].iov_base)`.
    pub head_page_offset: u32,
    /// `page_base`: offset of the page data from the first page.
    pub page_base: u32,
    /// `page_len`.
    pub page_len: u32,
    /// `tail[0].iov_len`.
    pub tail_len: u32,
    /// `offset_in_page(tail[0].iov_base)`.
    pub tail_page_offset: u32,
    /// `buflen`: the most the buffer can hold (receive buffers).
    pub buflen: u32,
}

/// A Call as the transport marshals it: its buffers' layouts and what may
/// be moved by direct data placement.
#[derive(Clone, Copy, Debug, Default)]
pub struct CallLayout {
    /// The xid, host order.
    pub xid: u32,
    /// The Call (`rq_snd_buf`).
    pub send: XdrBufLayout,
    /// The Call's page data may be sent by DDP (C `XDRBUF_WRITE`).
    pub send_ddp: bool,
    /// The Reply buffer (`rq_rcv_buf`), sized for the largest reply.
    pub recv: XdrBufLayout,
    /// The Reply's page data may be received by DDP (C `XDRBUF_READ`).
    pub recv_ddp: bool,
    /// False when the auth flavor checksums or encrypts the payload (C
    /// `RPCAUTH_AUTH_DATATOUCH`).
    pub ddp_allowed: bool,
}

/// The lengths of an `xdr_buf`'s parts, the offset of its page data and
/// whether that data may be moved by direct data placement.
#[derive(Clone, Copy, Debug, Default)]
pub struct XdrBufLengths {
    /// `head[0].iov_len`.
    pub head: u32,
    /// `page_base`.
    pub page_base: u32,
    /// `page_len`.
    pub pages: u32,
    /// `tail[0].iov_len`.
    pub tail: u32,
    /// `buflen`: the most the buffer holds.
    pub buflen: u32,
    /// `XDRBUF_WRITE` of a send buffer, `XDRBUF_READ` of a receive buffer.
    pub ddp: bool,
}

/// A request's xid and the lengths of its two `xdr_buf`s: the few words
/// a transport recognises its common calls by ([`RpcRqst::call_lengths`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct CallLengths {
    /// The xid, host order.
    pub xid: u32,
    /// `rq_snd_buf`, the Call.
    pub send: XdrBufLengths,
    /// `rq_rcv_buf`, where the Reply goes.
    pub recv: XdrBufLengths,
}

/// What a request looks like (xid, send and receive buffer shapes).
#[derive(Clone, Copy, Debug, Default)]
pub struct RqstInfo {
    /// The xid, host order.
    pub xid: u32,
    /// `rq_snd_buf`.
    pub snd: XdrBufLayout,
    /// `rq_snd_buf.len`.
    pub snd_len: u32,
    /// `rq_rcv_buf`.
    pub rcv: XdrBufLayout,
}

/// One piece of an `xdr_buf` range: part of a page, or (head and tail)
/// kernel virtual memory.
pub(in crate::rust) enum Piece {
    /// `len` bytes at `off` in `page`.
    Page(*mut bindings::page, u32, u32),
    /// `len` bytes at a kernel virtual address.
    Virt(*mut c_void, u32),
}

/// One span of an `xdr_buf` range: the part in its page array as one run,
/// or (head and tail) kernel virtual memory.
pub(in crate::rust) enum Span {
    /// `len` bytes of a run of whole pages from `off` (below the page
    /// size) inside the first: the first page is at the pointer, and the
    /// `(off + len).div_ceil(PAGE_SIZE)` entries from it are valid for the
    /// walk. Only the first page may start inside it (at `off`) and only
    /// the last may end inside it.
    Pages(*const *mut bindings::page, u32, u32),
    /// `len` bytes at a kernel virtual address.
    Virt(*mut c_void, u32),
}

/// `l` bytes from `in_pages` of `b`'s page data, as one run of its page
/// array.
///
/// # Safety
///
/// `b` is a live `xdr_buf` and `in_pages + l` is at most its `page_len`.
#[inline(always)]
unsafe fn page_span(b: &bindings::xdr_buf, in_pages: u64, l: u64) -> Span {
    let page_size = kernel::page::PAGE_SIZE as u64;
    let at = u64::from(b.page_base) + in_pages;
    // SAFETY: `pages` covers `page_base + page_len` bytes: `at` is below
    // that, and the run from it ends within it (the safety requirement).
    let first = unsafe { b.pages.add((at / page_size) as usize) };
    Span::Pages(first, (at % page_size) as u32, l as u32)
}

/// `[offset, offset + len)` of `buf` as one [`Span::Pages`] if the range
/// is not empty and lies within the page data: what [`walk_xdr_spans`]
/// would hand over as its only span, without the walk.
///
/// # Safety
///
/// `buf` is a live `xdr_buf`.
#[inline(always)]
pub(in crate::rust) unsafe fn page_span_of(
    buf: *const bindings::xdr_buf,
    offset: u32,
    len: u32,
) -> Option<Span> {
    // SAFETY: By the safety requirement.
    let b = unsafe { &*buf };
    let in_pages = u64::from(offset).checked_sub(b.head[0].iov_len as u64)?;
    let l = u64::from(len);
    if len == 0 || in_pages + l > u64::from(b.page_len) {
        return None;
    }
    // SAFETY: Checked just above: the range ends within the page data.
    Some(unsafe { page_span(b, in_pages, l) })
}

/// Walks `[offset, offset + len)` of `buf` as head range, page run and
/// tail range, in order, handing each to `add`, which returns how many of
/// its bytes it took (a run may be taken in part; fewer bytes than the
/// span's stop the walk there) or an error. Returns the bytes taken.
///
/// # Safety
///
/// `buf` is a live `xdr_buf` whose head, pages and tail stay valid for the
/// call.
pub(in crate::rust) unsafe fn walk_xdr_spans(
    buf: *const bindings::xdr_buf,
    offset: u32,
    len: u32,
    mut add: impl FnMut(Span) -> Result<u32>,
) -> Result<u32> {
    // SAFETY: By the safety requirement.
    let b = unsafe { &*buf };
    let (offset, len) = (u64::from(offset), u64::from(len));
    let head_len = b.head[0].iov_len as u64;
    let page_len = u64::from(b.page_len);
    let mut done = 0u64;
    // One call of `add` in a loop, not one per part: the callers' closure
    // is inlined at its one call site.
    loop {
        let pos = offset + done;
        let (span, l) = if pos < head_len {
            // Only on the first turn: the head, also when `len` is 0.
            let l = (head_len - pos).min(len - done);
            // SAFETY: Within the head (`pos + l <= iov_len`).
            let at = unsafe { b.head[0].iov_base.cast::<u8>().add(pos as usize) };
            (Span::Virt(at.cast(), l as u32), l)
        } else if done < len && pos < head_len + page_len {
            let in_pages = pos - head_len;
            let l = (len - done).min(page_len - in_pages);
            // SAFETY: `buf` by the safety requirement; the run ends within
            // the page data.
            (unsafe { page_span(b, in_pages, l) }, l)
        } else if done < len {
            let in_tail = pos - head_len - page_len;
            let l = len - done;
            if in_tail + l > b.tail[0].iov_len as u64 {
                return Err(EINVAL);
            }
            // SAFETY: Within the tail (checked above).
            let at = unsafe { b.tail[0].iov_base.cast::<u8>().add(in_tail as usize) };
            (Span::Virt(at.cast(), l as u32), l)
        } else {
            break;
        };
        let took = u64::from(add(span)?).min(l);
        done += took;
        if took < l || done >= len {
            break;
        }
    }
    Ok(done as u32)
}

/// Walks `[offset, offset + len)` of `buf` as head range, page pieces and
/// tail range, in order, handing each to `add`, which returns `Ok(true)`
/// to go on, `Ok(false)` to stop before that piece, or an error. Returns
/// the bytes added (C `rpcrdma_convert_iovs`).
///
/// # Safety
///
/// `buf` is a live `xdr_buf` whose head, pages and tail stay valid for the
/// call.
pub(in crate::rust) unsafe fn walk_xdr_buf(
    buf: *const bindings::xdr_buf,
    offset: u32,
    len: u32,
    mut add: impl FnMut(Piece) -> Result<bool>,
) -> Result<u32> {
    const PAGE: u32 = kernel::page::PAGE_SIZE as u32;
    let spans = |span| match span {
        Span::Virt(v, l) => Ok(if add(Piece::Virt(v, l))? { l } else { 0 }),
        Span::Pages(pages, mut off, l) => {
            let (mut took, mut i) = (0u32, 0usize);
            while took < l {
                let pl = (PAGE - off).min(l - took);
                // SAFETY: The run's pages cover `off + l` bytes from its
                // first (`Span::Pages`); page `i` holds byte `took`.
                let page = unsafe { *pages.add(i) };
                if !add(Piece::Page(page, off, pl))? {
                    break;
                }
                took += pl;
                off = 0;
                i += 1;
            }
            Ok(took)
        }
    };
    // SAFETY: By the safety requirement.
    unsafe { walk_xdr_spans(buf, offset, len, spans) }
}

/// Proof that the caller holds its transport's `XPRT_LOCKED`, sunrpc's
/// send lock: sunrpc calls `send_request` holding it, hands it to the
/// transport's connect worker for the connect (`xprt_lock_connect`), and
/// calls `close` (`xprt_autoclose`) and `destroy` (`xprt_destroy`) holding
/// it, so these never overlap. Minted only by the class's trampolines, for
/// the duration of the call they serve.
///
/// # Invariants
///
/// While a value exists, `XPRT_LOCKED` of `xprt` is held on behalf of its
/// holder, and no other `XprtLocked` of `xprt` exists.
pub struct XprtLocked<'a> {
    xprt: NonNull<bindings::rpc_xprt>,
    _p: PhantomData<&'a mut ()>,
}

impl XprtLocked<'_> {
    /// # Safety
    ///
    /// `xprt` is live and its `XPRT_LOCKED` held for the caller for the
    /// returned value's life, and no other `XprtLocked` of it exists.
    pub(in crate::rust) unsafe fn new(xprt: NonNull<bindings::rpc_xprt>) -> Self {
        // INVARIANT: By the safety requirement.
        Self {
            xprt,
            _p: PhantomData,
        }
    }
}

/// A value its transport's `XPRT_LOCKED` protects (like
/// `kernel::sync::LockedBy`, with sunrpc's send lock as the lock): what
/// only send, connect and close touch is reached without a lock of its
/// own.
///
/// # Invariants
///
/// `value` is accessed only through an [`XprtLocked`] of `xprt`.
pub struct XprtLockedBy<T> {
    xprt: NonNull<bindings::rpc_xprt>,
    value: core::cell::UnsafeCell<T>,
}

// SAFETY: The value moves with the owner; it is `Send`.
unsafe impl<T: Send> Send for XprtLockedBy<T> {}
// SAFETY: Shared access goes through a token of the one transport, and
// its `XPRT_LOCKED` admits one holder at a time (type invariants), so the
// value is reached from one thread at a time: `T: Send` suffices.
unsafe impl<T: Send> Sync for XprtLockedBy<T> {}

impl<T> XprtLockedBy<T> {
    /// `value`, protected by `xprt`'s `XPRT_LOCKED`.
    pub fn new(xprt: &Xprt, value: T) -> Self {
        // INVARIANT: Not accessed yet.
        Self {
            xprt: xprt.ptr,
            value: core::cell::UnsafeCell::new(value),
        }
    }

    /// The value, for the holder of the lock; `None` with another
    /// transport's token.
    pub fn get<'a>(&'a self, locked: &'a XprtLocked<'_>) -> Option<&'a T> {
        // SAFETY: `locked` proves the lock of this transport is held by
        // the caller (type invariants), and borrowing it shared keeps
        // `get_mut` out while the reference lives.
        (locked.xprt == self.xprt).then(|| unsafe { &*self.value.get() })
    }

    /// The value, mutably, for the holder of the lock; `None` with another
    /// transport's token.
    pub fn get_mut<'a>(&'a self, locked: &'a mut XprtLocked<'_>) -> Option<&'a mut T> {
        // SAFETY: As in `get`; borrowing the token mutably makes this the
        // only reference.
        (locked.xprt == self.xprt).then(|| unsafe { &mut *self.value.get() })
    }
}

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
    /// Wraps a transport being set up.
    ///
    /// # Safety
    ///
    /// `ptr` stays valid until the transport's `destroy` returns, and the
    /// state holding the `Xprt` is dropped by then.
    pub(in crate::rust) unsafe fn from_raw(ptr: NonNull<bindings::rpc_xprt>) -> Self {
        // INVARIANT: By the safety requirement.
        Self { ptr }
    }

    /// The C transport, for trace events (`crate::rust::module::trace`).
    pub(in crate::rust) fn as_raw(&self) -> *const bindings::rpc_xprt {
        self.ptr.as_ptr()
    }

    /// The server's address.
    pub fn addr(&self) -> Result<Addr> {
        let x = self.ptr.as_ptr();
        // SAFETY: Valid by the type invariant: `addr` holds `addrlen`
        // bytes, both set at setup.
        let sa = unsafe {
            SockAddr::copy_from(
                addr_of!((*x).addr).cast::<bindings::sockaddr>(),
                (*x).addrlen,
            )
        };
        sa.addr().ok_or(EAFNOSUPPORT)
    }

    /// The network namespace of the transport (`xprt_net`), where its
    /// connections are resolved and made (C `rpcrdma_create_id`).
    pub fn net(&self) -> &Net {
        // SAFETY: Valid by the type invariant; `xprt_alloc` took a
        // reference on `xprt_net`, dropped only when the transport is freed,
        // after every `Xprt` is gone.
        unsafe { Net::from_raw((*self.ptr.as_ptr()).xprt_net) }
    }

    /// Sets the congestion window to `credits` requests.
    pub fn update_cwnd(&self, credits: u32) {
        let x = self.ptr.as_ptr();
        // SAFETY: Valid by the type invariant.
        let _transport = unsafe { transport_lock(x) }.lock();
        // SAFETY: `cwnd` is under `transport_lock` (held).
        unsafe { (*x).cwnd = (credits as c_ulong) << bindings::RPC_CWNDSHIFT };
    }

    /// Whether sunrpc considers the transport connected.
    pub fn is_connected(&self) -> bool {
        // SAFETY: Valid by the type invariant.
        unsafe { xprt_class::xprt_connected(self.ptr.as_ptr()) }
    }

    /// Closes the connection now, from the send path (process context, the
    /// transport's send lock held): [`XprtOps::close`], then sunrpc's own
    /// bookkeeping of a disconnect (C `xprt_rdma_close`). The next call
    /// reconnects.
    pub fn drop_connection(&self) {
        let x = self.ptr.as_ptr();
        // SAFETY: Valid by the type invariant; `ops` is our table, set at
        // setup, whose `close` is the trampoline of `XprtOps::close`.
        unsafe {
            if let Some(close) = (*(*x).ops).close {
                close(x);
            }
        }
    }

    /// Asks sunrpc to close the connection (from any context).
    pub fn force_disconnect(&self) {
        // SAFETY: Valid by the type invariant.
        unsafe { bindings::xprt_force_disconnect(self.ptr.as_ptr()) };
    }

    /// Hands a reverse-direction Call (`call`: the RPC message, xid first)
    /// to the NFS callback service; the message is copied. Fails with
    /// `ENOBUFS` when every callback slot is in use, `EMSGSIZE` when the
    /// message is shorter than an RPC header or longer than a page.
    pub fn bc_receive_call(&self, call: &[u8]) -> Result {
        #[cfg(CONFIG_SUNRPC_BACKCHANNEL)]
        // SAFETY: Valid by the type invariant.
        return unsafe { crate::rust::sunrpc::xprt_bc::receive_call(self.ptr.as_ptr(), call) };
        #[cfg(not(CONFIG_SUNRPC_BACKCHANNEL))]
        return Err(EPROTONOSUPPORT);
    }

    /// Sets the largest backchannel message (`bc_maxpayload`).
    pub fn set_bc_max_payload(&self, bytes: u32) {
        // SAFETY: Valid by the type invariant.
        unsafe { xprt_class::set_bc_max_payload(self.ptr.as_ptr(), bytes) };
    }

    /// Notes that the server answered, so the next reconnect is not delayed.
    pub fn data_seen(&self) {
        // SAFETY: Valid by the type invariant; a plain store, as in C.
        unsafe { (*self.ptr.as_ptr()).reestablish_timeout = 0 };
    }

    /// Makes [`XprtOps::flush`] run within `ms` milliseconds (on the
    /// module's workqueue), unless it is already scheduled, in which case
    /// the earlier deadline stands. Callable from any context; the work is
    /// cancelled when the transport is destroyed, after its `close`.
    pub fn schedule_flush(&self, ms: u32) {
        // SAFETY: Valid by the type invariant.
        unsafe { xprt_class::schedule_flush(self.ptr.as_ptr(), ms) };
    }

    /// Calls `f` on the transport's state of every request slot, if that
    /// state is `R` (see [`RpcRqst::state`]).
    pub fn for_each_req_state<R: 'static>(&self, f: impl FnMut(&R)) {
        // SAFETY: Valid by the type invariant.
        if let Some(t) = unsafe { xprt_class::slot_states::<R>(self.ptr.as_ptr()) } {
            t.states().for_each(f);
        }
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
pub struct RpcRqst<'a> {
    ptr: NonNull<bindings::rpc_rqst>,
    _p: PhantomData<&'a ()>,
}

impl RpcRqst<'_> {
    /// Borrows a request sunrpc lends for the duration of a call.
    ///
    /// # Safety
    ///
    /// `ptr` is a live request of a transport of this class for the
    /// lifetime of the returned value.
    pub(in crate::rust) unsafe fn from_raw(ptr: NonNull<bindings::rpc_rqst>) -> Self {
        Self {
            ptr,
            _p: PhantomData,
        }
    }

    /// The C request, for trace events (`crate::rust::module::trace`).
    pub(in crate::rust) fn as_raw(&self) -> *const bindings::rpc_rqst {
        self.ptr.as_ptr()
    }

    /// Its xid and buffer shapes.
    pub fn info(&self) -> RqstInfo {
        // SAFETY: The request is valid while borrowed, and sunrpc does not
        // change it while it is lent to the transport.
        let r = unsafe { &*self.ptr.as_ptr() };
        RqstInfo {
            xid: u32::from_be(r.rq_xid),
            snd: buf_shape(&r.rq_snd_buf),
            snd_len: r.rq_snd_buf.len,
            rcv: buf_shape(&r.rq_rcv_buf),
        }
    }

    /// Whether the request's payloads may be placed directly (Read and
    /// Write chunks): not when the security flavor checksums or encrypts
    /// the data, since data moved outside the inline message would escape
    /// it (C `rpcrdma_marshal_req`, `RPCAUTH_AUTH_DATATOUCH`).
    fn ddp_allowed(r: &bindings::rpc_rqst) -> bool {
        // SAFETY: A request being sent holds its bound credential, and the
        // credential its auth (C `rpcrdma_marshal_req` reads the same).
        let data_touch = unsafe {
            let cred = r.rq_cred;
            !cred.is_null()
                && !(*cred).cr_auth.is_null()
                && (*(*cred).cr_auth).au_flags & (1 << RPCAUTH_AUTH_DATATOUCH) != 0
        };
        !data_touch
    }

    /// [`Self::ddp_allowed`] of this request.
    pub fn payload_ddp_allowed(&self) -> bool {
        // SAFETY: The request is valid while borrowed.
        Self::ddp_allowed(unsafe { &*self.ptr.as_ptr() })
    }

    /// The Call's lengths, read for the transport's test of its common
    /// calls: only the words that test reads, so that they stay in
    /// registers (a whole [`CallLayout`] is copied through the stack).
    #[inline(always)]
    pub fn call_lengths(&self) -> CallLengths {
        // SAFETY: The request is valid while borrowed, and sunrpc does not
        // change it while it is lent to the transport.
        let r = unsafe { &*self.ptr.as_ptr() };
        // Lengths of a live xdr_buf fit 32 bits, as in `buf_shape`.
        let lengths = |b: &bindings::xdr_buf, ddp_flag: u32| XdrBufLengths {
            head: b.head[0].iov_len as u32,
            page_base: b.page_base,
            pages: b.page_len,
            tail: b.tail[0].iov_len as u32,
            buflen: b.buflen,
            ddp: b.flags & ddp_flag != 0,
        };
        CallLengths {
            xid: u32::from_be(r.rq_xid),
            send: lengths(&r.rq_snd_buf, XDRBUF_WRITE),
            recv: lengths(&r.rq_rcv_buf, XDRBUF_READ),
        }
    }

    /// The Call's layout, read once for marshaling. Inlined: its caller
    /// copies the fields on into its own shape, which then happens once.
    #[inline(always)]
    pub fn call_layout(&self) -> CallLayout {
        // SAFETY: The request is valid while borrowed, and sunrpc does not
        // change it while it is lent to the transport.
        let r = unsafe { &*self.ptr.as_ptr() };
        CallLayout {
            xid: u32::from_be(r.rq_xid),
            send: buf_shape(&r.rq_snd_buf),
            send_ddp: r.rq_snd_buf.flags & XDRBUF_WRITE != 0,
            recv: buf_shape(&r.rq_rcv_buf),
            recv_ddp: r.rq_rcv_buf.flags & XDRBUF_READ != 0,
            ddp_allowed: Self::ddp_allowed(r),
        }
    }

    /// Page `index` of the send (`rcv` false) or receive buffer's page
    /// array, if the array's data (`page_base + page_len`) reaches it and
    /// the page is present.
    pub(in crate::rust) fn page_ptr(
        &self,
        rcv: bool,
        index: u32,
    ) -> Option<NonNull<bindings::page>> {
        NonNull::new(*self.page_array(rcv, index, 1)?.first()?)
    }

    /// Entries `first .. first + count` of the send (`rcv` false) or
    /// receive buffer's page array, if its data (`page_base + page_len`)
    /// reaches them all. An entry may be null (a sparse receive buffer).
    pub(in crate::rust) fn page_array(
        &self,
        rcv: bool,
        first: u32,
        count: u32,
    ) -> Option<&[*mut bindings::page]> {
        // SAFETY: The request is valid while borrowed and sunrpc does not
        // change its buffers while it is lent to the transport.
        let b = unsafe {
            let r = &*self.ptr.as_ptr();
            if rcv {
                &r.rq_rcv_buf
            } else {
                &r.rq_snd_buf
            }
        };
        let end = u64::from(b.page_base) + u64::from(b.page_len);
        let pages = end.div_ceil(kernel::page::PAGE_SIZE as u64);
        if u64::from(first) + u64::from(count) > pages || b.pages.is_null() {
            return None;
        }
        // SAFETY: The array holds an entry for every page its data touches,
        // and `first + count` is within that count; it lives, unchanged,
        // while the request is lent to the transport, which `self`'s
        // borrow outlives.
        Some(unsafe { core::slice::from_raw_parts(b.pages.add(first as usize), count as usize) })
    }

    /// A reference on page `index` of the send buffer's page array (see
    /// [`Self::page_ptr`]), for mapping it into a Send.
    pub fn send_page(&self, index: u32) -> Option<PageRef> {
        let page = self.page_ptr(false, index)?;
        // SAFETY: The page is live: the request references it.
        Some(unsafe { PageRef::get(page) })
    }

    /// The page frame number of page `index` of the send (`rcv` false) or
    /// receive buffer's page array (see [`Self::page_ptr`]).
    pub fn page_pfn(&self, rcv: bool, index: u32) -> Option<u64> {
        let page = self.page_ptr(rcv, index)?;
        // SAFETY: The page is live: the request references it.
        Some(unsafe { bindings::rpcrdma_rs_page_pfn(page.as_ptr()) })
    }

    /// Gives every missing page of a sparse receive buffer (NFSv3 GETACL
    /// leaves them NULL for sockets to fill as data arrives) a page before
    /// the buffer is registered or written: RDMA must provision receive
    /// memory up front (C `rpcrdma_alloc_sparse_pages`). The upper layer
    /// owns and frees them. `ENOBUFS` (sunrpc retries later) when no page
    /// is free without waiting.
    pub fn alloc_sparse_pages(&self) -> Result {
        // SAFETY: The request is valid while borrowed and its receive
        // buffer is the transport's to prepare until it is sent.
        let buf = unsafe { &mut (*self.ptr.as_ptr()).rq_rcv_buf };
        if buf.flags & XDRBUF_SPARSE_PAGES == 0 || buf.page_len == 0 {
            return Ok(());
        }
        let page_size = kernel::page::PAGE_SIZE;
        let first = buf.page_base as usize / page_size;
        let count =
            (buf.page_base as usize % page_size + buf.page_len as usize).div_ceil(page_size);
        for i in first..first + count {
            // SAFETY: `pages` covers `page_base + page_len` bytes, so it has
            // an entry for each page `i` of that range.
            let slot = unsafe { &mut *buf.pages.add(i) };
            if !slot.is_null() {
                continue;
            }
            let page = kernel::page::Page::alloc_page(GFP_NOWAIT).map_err(|_| ENOBUFS)?;
            // The page array owns it from here (the upper layer frees it
            // with `__free_page`).
            *slot = core::mem::ManuallyDrop::new(page).as_ptr().cast();
        }
        Ok(())
    }

    /// Copies `dst.len()` bytes of the Call from `offset` into `dst`.
    pub fn read(&self, offset: u32, dst: &mut [u8]) -> Result {
        let len = u32::try_from(dst.len()).map_err(|_| EINVAL)?;
        // SAFETY: The request is valid while borrowed, and its send buffer
        // not written while it is sent; `dst` is writable for `len` bytes
        // and apart from it; the copy is bounded by the buffer's length.
        unsafe {
            let buf = addr_of!((*self.ptr.as_ptr()).rq_snd_buf);
            read_xdr(buf, (*buf).len, offset, dst.as_mut_ptr(), len)
        }
    }

    /// Records the transmit time.
    pub fn mark_sent(&self) {
        // SAFETY: The request is valid while borrowed.
        unsafe { (*self.ptr.as_ptr()).rq_xtime = kernel::bindings::ktime_get() };
    }

    /// Whether this is the Reply to a reverse-direction (backchannel) Call
    /// rather than a call of ours.
    pub fn is_backchannel(&self) -> bool {
        // Backchannel requests have no `rq_buffer` (no `buf_alloc`).
        // SAFETY: Valid by the type invariant.
        cfg!(CONFIG_SUNRPC_BACKCHANNEL) && unsafe { (*self.ptr.as_ptr()).rq_buffer.is_null() }
    }

    /// Takes a congestion window slot for the request
    /// (`xprt_request_get_cong`); false when the window is full.
    pub fn take_cong_slot(&self) -> bool {
        // SAFETY: Valid by the type invariant; called with the transport's
        // send lock held, as sunrpc requires.
        unsafe { bindings::xprt_request_get_cong((*self.ptr.as_ptr()).rq_xprt, self.ptr.as_ptr()) }
    }

    /// Whether the request was already sent on the current connection (a
    /// retransmission).
    pub fn sent_on_this_connection(&self) -> bool {
        // SAFETY: Valid by the type invariant, and so is its transport.
        unsafe {
            let r = self.ptr.as_ptr();
            (*r).rq_connect_cookie == (*(*r).rq_xprt).connect_cookie
        }
    }

    /// Counts the send buffer as transmitted (`rq_xmit_bytes_sent`).
    pub fn count_sent(&self) {
        // SAFETY: Valid by the type invariant.
        unsafe {
            let r = self.ptr.as_ptr();
            (*r).rq_xmit_bytes_sent = (*r)
                .rq_xmit_bytes_sent
                .wrapping_add((*r).rq_snd_buf.len as c_ulong);
        }
    }

    /// Whether the RPC expects a reply (`rpc_reply_expected`).
    pub fn reply_expected(&self) -> bool {
        // SAFETY: Valid by the type invariant, and so is its task
        // (C `rpc_reply_expected`).
        unsafe {
            let task = (*self.ptr.as_ptr()).rq_task;
            let proc_ = (*task).tk_msg.rpc_proc;
            !proc_.is_null() && (*proc_).p_decode.is_some()
        }
    }

    /// The transport's state for this request, in its slot (`R` is the
    /// transport's [`xprt_class::XprtOps::Req`]; `None` for another type,
    /// or for a backchannel reply, which has no slot).
    pub fn state<R: 'static>(&self) -> Option<&R> {
        // SAFETY: The request is lent for the call, of a live transport of
        // this class; its slot lives with the transport.
        unsafe { xprt_class::slot_of::<R>(self.ptr.as_ptr()) }.map(|s| s.state())
    }
}

pub use crate::rust::rdma::mr::MrSegment;

/// A fast-registration memory region (FRWR) of one connection: the
/// module's MR type ([`crate::rust::rdma::mr::Mr`]) and the connection's anchor, which
/// keeps its CM identifier until the MR is gone.
pub struct Mr {
    mr: crate::rust::rdma::mr::Mr,
    anchor: Arc<Anchor>,
}

impl Mr {
    /// Allocates an MR for up to `max_pages` pages on `ep`'s device.
    pub fn new(ep: &Endpoint, max_pages: u32) -> Result<Self> {
        let anchor = ep.anchor().clone();
        Ok(Self {
            mr: crate::rust::rdma::mr::Mr::new(anchor.pd(), max_pages)?,
            anchor,
        })
    }

    /// Whether it was allocated on `ep` (its protection domain and queue
    /// pair).
    pub fn is_of(&self, ep: &Endpoint) -> bool {
        Arc::ptr_eq(&self.anchor, ep.anchor())
    }

    /// Maps `len` bytes from `offset` of the request's send (`rcv` false)
    /// or receive buffer; returns how many bytes one MR covered (it stops
    /// at its depth or at a gap that FRWR cannot map).
    #[inline(always)]
    pub fn map_rqst(
        &mut self,
        rqst: &RpcRqst<'_>,
        rcv: bool,
        offset: u32,
        len: u32,
        writable: bool,
    ) -> Result<u32> {
        // SAFETY: The request is valid while borrowed, and its buffers stay
        // valid until the request is released, which unmaps first
        // (`buf_free`).
        unsafe {
            self.mr
                .map_rqst(rqst.ptr.as_ptr(), rcv, offset, len, writable)
        }
    }

    /// Maps a whole DMA buffer (the write pad).
    pub fn map_buf(&mut self, buf: &MappedBuf) -> Result {
        let len = u32::try_from(buf.len()).map_err(|_| EINVAL)?;
        self.mr.map_dma(buf.dma_addr(), len)
    }

    /// The registered segment.
    pub fn segment(&self) -> MrSegment {
        self.mr.segment()
    }

    /// The C MR, for trace events (`crate::rust::module::trace`).
    pub(in crate::rust) fn as_raw(&self) -> *const bindings::rpcrdma_rs_mr {
        self.mr.as_ptr()
    }

    /// Whether it holds the DMA mapping of a `map_rqst`.
    pub fn is_mapped(&self) -> bool {
        self.mr.is_mapped()
    }

    /// Releases the DMA mapping of the last `map_rqst`.
    pub fn unmap(&mut self) {
        self.mr.unmap();
    }

    /// Posts the registration (REG_MR, unsignaled) on `ep`, ahead of the
    /// Send that advertises it.
    pub fn post_reg(&self, ep: &Endpoint, writable: bool) -> Result {
        let posting = ep.start_post()?;
        // SAFETY: The QP is live and on the MR's protection domain; it is
        // drained before the MR pool is freed.
        unsafe { self.mr.post_reg(posting.qp(), writable) }
    }

    /// Prepares the registration (REG_MR, unsignaled) for remote write
    /// (`writable`) or read, to be posted by [`post_send_after_regs`]
    /// ahead of the Send that advertises it.
    pub fn prepare_reg(&self, writable: bool) {
        self.mr.prepare_reg(writable);
    }
}

/// Posts the registrations of `mrs`, in order, then the Send of `ctxt`
/// (unsignaled unless `signal` or its ring is due to ask for a
/// completion; `Ok(true)`: it went unsignaled), all with one
/// `ib_post_send` (C `frwr_send`). Each MR's registration was prepared with
/// [`Mr::prepare_reg`] since its mapping. On failure returns how many
/// registrations were posted (the first ones); the Send was not.
pub fn post_send_after_regs<'a, O: HasSendRing>(
    ep: &Endpoint,
    ctxt: SendCtxt<'_, O>,
    mrs: impl IntoIterator<Item = &'a Mr>,
    signal: bool,
) -> core::result::Result<bool, (Error, usize)> {
    let mut first: *mut bindings::ib_send_wr = core::ptr::null_mut();
    let mut last: *mut bindings::ib_send_wr = core::ptr::null_mut();
    for m in mrs {
        let reg = m.mr.reg_wr();
        // SAFETY: `reg` is the live MR's own work request; an MR is used
        // by one owner at a time, who lends it to this call, so nothing
        // else posts or frees it meanwhile; `last` is the one linked
        // before it.
        unsafe {
            (*reg).next = core::ptr::null_mut();
            if let Some(prev) = last.as_mut() {
                prev.next = reg;
            } else {
                first = reg;
            }
        }
        last = reg;
    }
    let chain = (!first.is_null()).then_some((first, last));
    // SAFETY: `chain` links the MRs' work requests from `first` to `last`,
    // which ends it; the borrows keep them valid for the call, and the
    // MRs are on `ep`'s protection domain (made from its anchor).
    unsafe { ctxt.post_behind(ep, chain, signal) }
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
            let posting = ep.start_post()?;
            // SAFETY: The QP is live.
            to_result(unsafe {
                crate::rust::rdma::mr::post_local_inv(posting.qp(), rkey, core::ptr::null_mut())
            })
        }
        Some(wr) => WorkRequest::post_with(wr, |_, cqe| {
            let Ok(posting) = ep.start_post() else {
                return ESHUTDOWN.to_errno();
            };
            // SAFETY: The QP is live; the completion consumes the reference
            // `post_with` handed to the queue.
            unsafe { crate::rust::rdma::mr::post_local_inv(posting.qp(), rkey, cqe) }
        }),
    }
}

impl Xprt {
    /// The size of the transport's slot table: how many RPCs it admits at
    /// once (`xprt_alloc`'s `max_alloc`, fixed for its life).
    pub fn max_slots(&self) -> u32 {
        // SAFETY: Valid by the type invariant; `max_reqs` is set by
        // `xprt_alloc` and never changed.
        unsafe { (*self.ptr.as_ptr()).max_reqs }
    }

    /// Sets the largest RPC payload the transport carries (rsize/wsize).
    pub fn set_max_payload(&self, bytes: u32) {
        // SAFETY: Valid by the type invariant; called during setup.
        unsafe { (*self.ptr.as_ptr()).max_payload = bytes as usize };
    }

    /// Connections this transport established before (sunrpc's
    /// `stat.connect_count`). Only for the connect op, which runs under
    /// the transport's connect lock: the count changes only there.
    pub fn connect_count(&self) -> u64 {
        // SAFETY: Valid by the type invariant; the field is written only
        // by the connect worker, under the connect lock the caller holds.
        unsafe { (*self.ptr.as_ptr()).stat.connect_count as u64 }
    }

    /// Lowers the largest RPC payload to `bytes` if it is larger, once a
    /// connection has learnt what its peer allows, and returns the value
    /// before. NFS reads it (`rpc_max_payload`) when it sizes a mount,
    /// after the first connection; mounts sized before keep their rsize.
    pub fn limit_max_payload(&self, bytes: u32) -> usize {
        // SAFETY: Valid by the type invariant. sunrpc reads the field
        // without a lock (C `rpc_max_payload`), so both accesses are
        // volatile, a single aligned word each (C's READ_ONCE and
        // WRITE_ONCE).
        unsafe {
            let field = addr_of_mut!((*self.ptr.as_ptr()).max_payload);
            let before = field.read_volatile();
            if before > bytes as usize {
                field.write_volatile(bytes as usize);
            }
            before
        }
    }
}

/// One DMA mapping of a [`PhysMap`].
///
/// Head and tail pieces are mapped with `ib_dma_map_single`, page pieces
/// with `ib_dma_map_page`: either is undone by `ib_dma_unmap_page`.
struct PhysPiece {
    addr: u64,
    len: u32,
}

/// DMA mappings of a request range exposed under the protection domain's
/// global rkey (the "physical" strategy): one mapping per piece (head
/// range, page, tail range), advertised as segments in which pieces whose
/// DMA addresses continue one another are joined. Unmapped on drop.
///
/// # Invariants
///
/// Every entry of `pieces` is a live mapping on the anchor's device, in the
/// direction `to_device` says, until drop. `segments` covers exactly the
/// DMA ranges of `pieces`, in order.
pub struct PhysMap {
    pieces: KVec<PhysPiece>,
    segments: KVec<(u64, u32)>,
    to_device: bool,
    anchor: Arc<Anchor>,
}

impl PhysMap {
    /// Maps `[offset, offset + len)` of the request's send (`rcv` false)
    /// or receive buffer in at most `max` pieces.
    pub fn map_rqst(
        ep: &Endpoint,
        rqst: &RpcRqst<'_>,
        rcv: bool,
        offset: u32,
        len: u32,
        writable: bool,
        max: u32,
    ) -> Result<Self> {
        let max = max as usize;
        live::inc(live::Kind::PhysMap);
        // INVARIANT: Mappings made below are released by `drop`, also on error.
        let mut this = Self {
            pieces: KVec::new(),
            segments: KVec::new(),
            to_device: !writable,
            anchor: ep.anchor().clone(),
        };
        // The planner counted one segment per piece, so `max` bounds the
        // pieces too.
        this.pieces.reserve(max, GFP_KERNEL)?;
        this.segments.reserve(max, GFP_KERNEL)?;
        let r = rqst.ptr.as_ptr();
        // SAFETY: The request is borrowed and its buffers outlive the
        // mapping (released before `buf_free`).
        let buf = unsafe {
            if rcv {
                addr_of!((*r).rq_rcv_buf)
            } else {
                addr_of!((*r).rq_snd_buf)
            }
        };
        let device = this.anchor.device_ptr();
        let to_device = c_int::from(this.to_device);
        // More pieces than the planner allowed segments is an error.
        // SAFETY: As above; the device is live (anchor).
        let done = unsafe {
            walk_xdr_buf(buf, offset, len, |piece| {
                if this.pieces.len() >= max {
                    return Err(EMSGSIZE);
                }
                let mut addr = 0u64;
                let l = match piece {
                    Piece::Page(p, off, l) => {
                        to_result(bindings::rpcrdma_rs_dma_map_page(
                            device, p, off, l, to_device, &mut addr,
                        ))?;
                        l
                    }
                    Piece::Virt(v, l) => {
                        to_result(bindings::rpcrdma_rs_dma_map(
                            device, v, l as usize, to_device, &mut addr,
                        ))?;
                        l
                    }
                };
                // Capacity was reserved for `max` pieces: no allocation.
                this.pieces.push(PhysPiece { addr, len: l }, GFP_ATOMIC)?;
                // A piece that starts where the last segment ends (pages
                // contiguous in DMA space) extends it: fewer segments in
                // the header and fewer RDMA operations for the server.
                let joined = this.segments.last_mut().is_some_and(|(a, n)| {
                    let joins = a.checked_add(u64::from(*n)) == Some(addr);
                    match n.checked_add(l) {
                        Some(sum) if joins => {
                            *n = sum;
                            true
                        }
                        _ => false,
                    }
                });
                if !joined {
                    this.segments.push((addr, l), GFP_ATOMIC)?;
                }
                Ok(true)
            })
        }?;
        if done != len {
            return Err(EMSGSIZE);
        }
        Ok(this)
    }

    /// Number of segments to advertise.
    pub fn count(&self) -> u32 {
        self.segments.len() as u32
    }

    /// DMA address and length of segment `i` (zeros past the end).
    pub fn piece(&self, i: u32) -> (u64, u32) {
        self.segments.get(i as usize).copied().unwrap_or((0, 0))
    }

    /// Number of DMA mappings (pages and head or tail ranges).
    pub fn mappings(&self) -> u32 {
        self.pieces.len() as u32
    }
}

impl Drop for PhysMap {
    fn drop(&mut self) {
        let device = self.anchor.device_ptr();
        let to_device = c_int::from(self.to_device);
        for p in self.pieces.iter() {
            // SAFETY: Live mappings on this device (type invariant), made
            // the same way; no work request names them any more.
            unsafe {
                bindings::rpcrdma_rs_dma_unmap(device, p.addr, p.len as usize, to_device);
            }
        }
        live::dec(live::Kind::PhysMap);
    }
}
