// SPDX-License-Identifier: GPL-2.0

//! RDMA connection manager identifiers and their events.
//!
//! The connection manager calls an identifier's event handler (the C
//! `cm_handler` below) from its own context, in process context, with the
//! identifier's `handler_mutex` held. Events are delivered in one of two
//! ways:
//!
//! - to a [`CmHandler`] object installed with [`CmId::set_handler`]: it is
//!   called directly from the CM's callback, under a spinlock, so it may only
//!   do non-blocking things (mark a transport, queue a connection request,
//!   ask sunrpc to close). This is how transports follow their connections:
//!   no work item or thread waits for events on their behalf;
//! - otherwise into a small per-identifier queue, from which process context
//!   takes them with [`CmId::wait_event`] (the client's synchronous address
//!   and route resolution and connect, and the KUnit suites).
//!
//! A handler never destroys an identifier: `rdma_destroy_id` takes the
//! identifier's `handler_mutex`, which the CM holds while the handler runs.
//! A connection request carries a new identifier: the handler keeps it as an
//! owned [`CmId`] (the listener queues it for `xpo_accept`, the same way the
//! C server queues new connections for `svc_rdma_accept`) or gives it back,
//! and the CM then destroys it itself (rejecting the peer).
//!
//! C header: [`include/rdma/rdma_cm.h`](srctree/include/rdma/rdma_cm.h).

use crate::rust::bindings;
use crate::rust::kext::spin_lock::{new_spinlock, SpinLock};
use crate::rust::module::live;
use core::ptr::NonNull;
use kernel::error::{from_err_ptr, to_result};
use kernel::new_condvar;
use kernel::prelude::*;
use kernel::sync::{Arc, CondVar};
use kernel::time::msecs_to_jiffies;
use kernel::types::Opaque;

/// Most private data bytes a CM message carries that we keep (RFC 8797 uses 8).
pub const PRIVATE_DATA_MAX: usize = 56;

/// Events queued per identifier before new ones are dropped.
const QUEUE_LEN: usize = 16;

/// Private data of a connection request or reply.
#[derive(Clone, Copy)]
pub struct PrivateData {
    bytes: [u8; PRIVATE_DATA_MAX],
    len: usize,
}

impl PrivateData {
    /// The bytes that were received.
    pub fn as_bytes(&self) -> &[u8] {
        self.bytes.get(..self.len).unwrap_or(&[])
    }
}

/// A network address for the connection manager.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Addr {
    /// IPv4 address and port.
    V4([u8; 4], u16),
    /// IPv6 address and port.
    V6([u8; 16], u16),
}

/// A C socket address (`struct sockaddr_in` or `sockaddr_in6`) in a
/// buffer as large and as aligned as `struct sockaddr_storage`: the one
/// conversion between [`Addr`] and what the RDMA CM and sunrpc take and
/// give.
/// The parts of a `struct rdma_cm_event` the handlers use, copied out of
/// the event during its callback.
struct RawEvent {
    event: i32,
    status: i32,
    private_data_len: u8,
    responder_resources: u8,
    initiator_depth: u8,
    private_data: [u8; PRIVATE_DATA_MAX],
}

impl RawEvent {
    /// # Safety
    ///
    /// `event` is the live event of the current callback.
    unsafe fn copy(event: *const bindings::rdma_cm_event) -> Self {
        use bindings::rdma_cm_event_type as T;
        // SAFETY: By the safety requirement.
        let e = unsafe { &*event };
        let mut raw = Self {
            event: e.event as i32,
            status: e.status,
            private_data_len: 0,
            responder_resources: 0,
            initiator_depth: 0,
            private_data: [0; PRIVATE_DATA_MAX],
        };
        if matches!(
            e.event,
            T::RDMA_CM_EVENT_CONNECT_REQUEST
                | T::RDMA_CM_EVENT_ESTABLISHED
                | T::RDMA_CM_EVENT_CONNECT_RESPONSE
                | T::RDMA_CM_EVENT_REJECTED
        ) {
            // SAFETY: These events carry connection parameters (`param.conn`).
            let conn = unsafe { &e.param.conn };
            let len = usize::from(conn.private_data_len).min(PRIVATE_DATA_MAX);
            if !conn.private_data.is_null() && len > 0 {
                // SAFETY: The CM's private data is valid for
                // `private_data_len` bytes during the callback.
                unsafe {
                    core::ptr::copy_nonoverlapping(
                        conn.private_data.cast::<u8>(),
                        raw.private_data.as_mut_ptr(),
                        len,
                    )
                };
                raw.private_data_len = len as u8;
            }
            raw.responder_resources = conn.responder_resources;
            raw.initiator_depth = conn.initiator_depth;
        }
        raw
    }
}

#[repr(C, align(8))]
pub(crate) struct SockAddr {
    bytes: [u8; SOCKADDR_STORAGE],
    /// How many of them the C side gave (or we filled).
    len: usize,
}

/// `sizeof(struct sockaddr_storage)`.
const SOCKADDR_STORAGE: usize = 128;
const FAMILY_AT: usize = core::mem::offset_of!(bindings::sockaddr_in, sin_family);
const IN_PORT_AT: usize = core::mem::offset_of!(bindings::sockaddr_in, sin_port);
const IN_ADDR_AT: usize = core::mem::offset_of!(bindings::sockaddr_in, sin_addr);
const IN_LEN: usize = core::mem::size_of::<bindings::sockaddr_in>();
const IN6_PORT_AT: usize = core::mem::offset_of!(bindings::sockaddr_in6, sin6_port);
const IN6_ADDR_AT: usize = core::mem::offset_of!(bindings::sockaddr_in6, sin6_addr);
const IN6_LEN: usize = core::mem::size_of::<bindings::sockaddr_in6>();

impl SockAddr {
    /// For C calls that take a `struct sockaddr *` they only read.
    fn as_ptr(&self) -> *mut bindings::sockaddr {
        (&raw const self.bytes).cast_mut().cast()
    }

    /// Copies `len` bytes of a C socket address.
    ///
    /// # Safety
    ///
    /// `sa` is valid for reads of `len` bytes.
    pub(in crate::rust) unsafe fn copy_from(sa: *const bindings::sockaddr, len: usize) -> Self {
        let mut b = [0u8; SOCKADDR_STORAGE];
        let n = len.min(SOCKADDR_STORAGE);
        // SAFETY: `sa` is valid for `len >= n` bytes (the function's safety
        // requirement) and `b` for `SOCKADDR_STORAGE >= n`; they do not
        // overlap.
        unsafe { core::ptr::copy_nonoverlapping(sa.cast::<u8>(), b.as_mut_ptr(), n) };
        Self { bytes: b, len: n }
    }

    /// The address, if it is a complete IPv4 or IPv6 one.
    pub(crate) fn addr(&self) -> Option<Addr> {
        let b = &self.bytes;
        let word = |at: usize| -> Option<[u8; 2]> { b.get(at..at + 2)?.try_into().ok() };
        let family = u32::from(u16::from_ne_bytes(word(FAMILY_AT)?));
        if family == bindings::AF_INET && self.len >= IN_LEN {
            let port = u16::from_be_bytes(word(IN_PORT_AT)?);
            Some(Addr::V4(
                b.get(IN_ADDR_AT..IN_ADDR_AT + 4)?.try_into().ok()?,
                port,
            ))
        } else if family == bindings::AF_INET6 && self.len >= IN6_LEN {
            let port = u16::from_be_bytes(word(IN6_PORT_AT)?);
            Some(Addr::V6(
                b.get(IN6_ADDR_AT..IN6_ADDR_AT + 16)?.try_into().ok()?,
                port,
            ))
        } else {
            None
        }
    }
}

impl Addr {
    /// As a C socket address.
    pub(crate) fn to_sockaddr(self) -> SockAddr {
        let mut b = [0u8; SOCKADDR_STORAGE];
        let (family, port_at, addr_at, bytes, port, len) = match &self {
            Addr::V4(a, p) => (
                bindings::AF_INET,
                IN_PORT_AT,
                IN_ADDR_AT,
                &a[..],
                *p,
                IN_LEN,
            ),
            Addr::V6(a, p) => (
                bindings::AF_INET6,
                IN6_PORT_AT,
                IN6_ADDR_AT,
                &a[..],
                *p,
                IN6_LEN,
            ),
        };
        // Every range lies within the first `sizeof(struct sockaddr_in6)`
        // of the 128 bytes.
        let family = u16::try_from(family).unwrap_or(0).to_ne_bytes();
        let parts: [(usize, &[u8]); 3] = [
            (FAMILY_AT, &family),
            (port_at, &port.to_be_bytes()),
            (addr_at, bytes),
        ];
        for (at, src) in parts {
            if let Some(dst) = b.get_mut(at..at + src.len()) {
                dst.copy_from_slice(src);
            }
        }
        SockAddr { bytes: b, len }
    }
}

/// An event of a CM identifier.
pub enum CmEvent {
    /// Address resolution finished.
    AddrResolved,
    /// Address resolution failed.
    AddrError(i32),
    /// Route resolution finished.
    RouteResolved,
    /// Route resolution failed.
    RouteError(i32),
    /// A peer asks to connect to a listener; `id` is the new connection.
    ConnectRequest {
        /// The identifier of the new connection, not yet accepted.
        id: CmId,
        /// The peer's private data.
        private_data: PrivateData,
        /// The RDMA Reads the peer can have outstanding against us.
        initiator_depth: u8,
        /// The RDMA Reads the peer accepts from us.
        responder_resources: u8,
    },
    /// The connection is established.
    Established {
        /// Private data of the accept (seen by the active side).
        private_data: PrivateData,
    },
    /// The peer rejected the connection.
    Rejected {
        /// The reject reason.
        status: i32,
        /// Private data of the reject.
        private_data: PrivateData,
    },
    /// The peer could not be reached.
    Unreachable(i32),
    /// Connecting failed.
    ConnectError(i32),
    /// The connection was disconnected.
    Disconnected,
    /// The device of this identifier is being removed: destroy it soon.
    DeviceRemoval,
    /// The local address changed.
    AddrChange,
    /// Time-wait ended; the QP number may be reused.
    TimewaitExit,
    /// Any other event, with its code and status.
    Other(i32, i32),
}

struct EventQueue {
    slots: [Option<CmEvent>; QUEUE_LEN],
    head: usize,
    len: usize,
}

impl EventQueue {
    fn new() -> Self {
        Self {
            slots: core::array::from_fn(|_| None),
            head: 0,
            len: 0,
        }
    }

    /// Queues `ev`, or gives it back when the queue is full.
    fn push(&mut self, ev: CmEvent) -> core::result::Result<(), CmEvent> {
        let idx = (self.head + self.len) % QUEUE_LEN;
        match self.slots.get_mut(idx) {
            Some(slot) if self.len < QUEUE_LEN => {
                *slot = Some(ev);
                self.len += 1;
                Ok(())
            }
            _ => Err(ev),
        }
    }

    fn pop(&mut self) -> Option<CmEvent> {
        if self.len == 0 {
            return None;
        }
        let ev = self.slots.get_mut(self.head).and_then(Option::take);
        self.head = (self.head + 1) % QUEUE_LEN;
        self.len -= 1;
        ev
    }
}

/// What receives the events of an identifier once installed with
/// [`CmId::set_handler`].
///
/// [`CmHandler::handle`] runs in the RDMA CM's event callback, with the
/// identifier's `handler_mutex` and a spinlock of this layer held: it must
/// not sleep, must not destroy any identifier (dropping a [`CmId`] does) and
/// should only mark state and wake or queue others (C
/// `svc_xprt_deferred_close`, `xprt_force_disconnect`, setting
/// `XPT_CONN`/`XPT_DATA`).
pub trait CmHandler: Send + Sync {
    /// Handles `ev`. Returning `Err(ev)` for a
    /// [`CmEvent::ConnectRequest`] refuses the request: the CM destroys the
    /// new identifier and rejects the peer. Other events given back are
    /// dropped.
    fn handle(&self, ev: CmEvent) -> core::result::Result<(), CmEvent>;
}

struct CtxState {
    queue: EventQueue,
    handler: Option<Arc<dyn CmHandler>>,
}

/// The event state of one identifier, referenced by its C `context`.
#[pin_data]
struct Ctx {
    #[pin]
    state: SpinLock<CtxState>,
    #[pin]
    wait: CondVar,
}

impl Ctx {
    fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                state <- new_spinlock!(
                    CtxState {
                        queue: EventQueue::new(),
                        handler: None,
                    },
                    "rpcrdma_rs::cm::state"
                ),
                wait <- new_condvar!("rpcrdma_rs::cm::wait"),
            }),
            GFP_KERNEL,
        )
    }

    /// Delivers `ev` to the handler, or queues it for `wait_event`. Gives a
    /// refused or unqueued event back.
    fn deliver(&self, ev: CmEvent) -> core::result::Result<(), CmEvent> {
        let mut st = self.state.lock();
        if let Some(h) = &st.handler {
            // Under the lock: `clear_handler` waits for this call.
            return h.handle(ev);
        }
        let res = st.queue.push(ev);
        drop(st);
        self.wait.notify_all();
        res
    }
}

/// A network namespace (`struct net`).
///
/// Only ever borrowed: whoever hands one out keeps the namespace alive for
/// the borrow (sunrpc during `xpo_create`, an `rpc_xprt` through its
/// `xprt_net` reference). An identifier created in it takes its own
/// reference (`rdma_create_id` calls `get_net`, `rdma_destroy_id` drops it),
/// as the C module relies on too.
#[repr(transparent)]
pub struct Net(Opaque<bindings::net>);

impl Net {
    /// Borrows the namespace at `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` points to a live `struct net` that stays alive for `'a`.
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut bindings::net) -> &'a Net {
        // SAFETY: `Net` is a transparent wrapper of `struct net`; the
        // caller guarantees the pointer is live for `'a`.
        unsafe { &*ptr.cast::<Net>() }
    }

    fn as_ptr(&self) -> *mut bindings::net {
        self.0.get()
    }

    /// The initial network namespace: for the KUnit suites only. Transports
    /// use the namespace of their sunrpc transport, as C does.
    pub fn init_ns() -> &'static Net {
        // SAFETY: `init_net` is static and never freed.
        unsafe { Self::from_raw(&raw mut bindings::init_net) }
    }
}

/// An owned RDMA CM identifier (`struct rdma_cm_id`) for a reliable connection.
///
/// # Invariants
///
/// `ptr` is a live identifier created by `rdma_create_id` (or handed to us by
/// a connection request) whose `context` points to `ctx`, which this object
/// keeps alive until `rdma_destroy_id` has returned. It is destroyed exactly
/// once, in `drop`, never from an event handler.
pub struct CmId {
    ptr: NonNull<bindings::rdma_cm_id>,
    ctx: Arc<Ctx>,
}

// SAFETY: The RDMA CM serialises operations on an identifier internally; the
// event state is protected by a spinlock.
unsafe impl Send for CmId {}
// SAFETY: See `Send`; shared references only wait for events or read state.
unsafe impl Sync for CmId {}

/// The event handler of every identifier the layer creates.
///
/// # Safety
///
/// Called by the RDMA CM with a live identifier whose context was set by this
/// layer to a `Ctx` kept alive by its `CmId` (or null), and a valid event.
unsafe extern "C" fn cm_handler(
    id: *mut bindings::rdma_cm_id,
    event: *mut bindings::rdma_cm_event,
) -> kernel::ffi::c_int {
    // SAFETY: `event` is valid for the duration of the callback.
    let raw = unsafe { RawEvent::copy(event) };
    // SAFETY: `id` is live during the callback.
    let ctx = unsafe { (*id).context }.cast::<Ctx>();
    if ctx.is_null() {
        return 0;
    }
    // SAFETY: By the function's safety requirement `ctx` points to a `Ctx`
    // that outlives this callback: its `CmId` releases it only after
    // `rdma_destroy_id` returned, and no callback runs after that.
    let ctx = unsafe { &*ctx };
    let len = usize::from(raw.private_data_len).min(PRIVATE_DATA_MAX);
    let private_data = PrivateData {
        bytes: raw.private_data,
        len,
    };
    use bindings::rdma_cm_event_type as T;
    // The C enum arrives as an int: match its values, never transmute.
    let ev = match raw.event {
        e if e == T::RDMA_CM_EVENT_ADDR_RESOLVED as i32 => CmEvent::AddrResolved,
        e if e == T::RDMA_CM_EVENT_ADDR_ERROR as i32 => CmEvent::AddrError(raw.status),
        e if e == T::RDMA_CM_EVENT_ROUTE_RESOLVED as i32 => CmEvent::RouteResolved,
        e if e == T::RDMA_CM_EVENT_ROUTE_ERROR as i32 => CmEvent::RouteError(raw.status),
        e if e == T::RDMA_CM_EVENT_CONNECT_REQUEST as i32 => {
            // A new identifier (its handler is this function, inherited
            // from the listener): give it its own context before handing it
            // on. Returning non-zero makes the CM destroy it.
            let Ok(child_ctx) = Ctx::new() else {
                return ENOMEM.to_errno();
            };
            // SAFETY: `id` is the new identifier, live; its context is
            // switched to its own, kept alive by the `CmId` below.
            unsafe { (*id).context = Arc::as_ptr(&child_ctx).cast_mut().cast() };
            live::inc(live::Kind::CmId);
            let Some(ptr) = NonNull::new(id) else {
                return EINVAL.to_errno();
            };
            // INVARIANT: `id` is live, its context is `child_ctx`, and it is
            // only destroyed by this `CmId`'s drop, outside any handler.
            CmEvent::ConnectRequest {
                id: CmId {
                    ptr,
                    ctx: child_ctx,
                },
                private_data,
                initiator_depth: raw.initiator_depth,
                responder_resources: raw.responder_resources,
            }
        }
        e if e == T::RDMA_CM_EVENT_ESTABLISHED as i32 => CmEvent::Established { private_data },
        e if e == T::RDMA_CM_EVENT_REJECTED as i32 => CmEvent::Rejected {
            status: raw.status,
            private_data,
        },
        e if e == T::RDMA_CM_EVENT_UNREACHABLE as i32 => CmEvent::Unreachable(raw.status),
        e if e == T::RDMA_CM_EVENT_CONNECT_ERROR as i32 => CmEvent::ConnectError(raw.status),
        e if e == T::RDMA_CM_EVENT_DISCONNECTED as i32 => CmEvent::Disconnected,
        e if e == T::RDMA_CM_EVENT_DEVICE_REMOVAL as i32 => CmEvent::DeviceRemoval,
        e if e == T::RDMA_CM_EVENT_ADDR_CHANGE as i32 => CmEvent::AddrChange,
        e if e == T::RDMA_CM_EVENT_TIMEWAIT_EXIT as i32 => CmEvent::TimewaitExit,
        e => CmEvent::Other(e, raw.status),
    };
    match ctx.deliver(ev) {
        Ok(()) => 0,
        Err(CmEvent::ConnectRequest { id, .. }) => {
            // Refused (the listener's queue is full, or nobody listens):
            // the CM destroys the new identifier when we return non-zero,
            // so it must not be destroyed here (that would deadlock on its
            // handler mutex, which the CM holds now).
            id.release_to_cm();
            ENOMEM.to_errno()
        }
        // Dropped: no identifier in it.
        Err(_) => 0,
    }
}

impl CmId {
    /// Creates an identifier for a reliable connection in the initial
    /// network namespace: for the KUnit suites only (see [`Self::new_in`]).
    pub fn new() -> Result<Self> {
        Self::new_in(Net::init_ns())
    }

    /// Creates an identifier for a reliable connection in the network
    /// namespace `net` (C: `svc_rdma_create_listen_id(net, ..)` for a
    /// listener, `rdma_create_id(xprt->xprt_net, ..)` for a client): it binds,
    /// resolves and listens on that namespace's addresses only.
    pub fn new_in(net: &Net) -> Result<Self> {
        let ctx = Ctx::new()?;
        // SAFETY: `net` is live for the call (borrowed) and referenced by
        // the identifier from here on; `cm_handler` matches the handler
        // type; the context points to `ctx`, which the returned `CmId`
        // keeps alive until the identifier is destroyed.
        let ptr = from_err_ptr(unsafe {
            bindings::rpcrdma_rs_cm_create_id(
                net.as_ptr(),
                Some(cm_handler),
                Arc::as_ptr(&ctx).cast_mut().cast(),
            )
        })?;
        let ptr = NonNull::new(ptr).ok_or(ENOMEM)?;
        live::inc(live::Kind::CmId);
        // INVARIANT: Created by `rdma_create_id` with `ctx` as context.
        Ok(Self { ptr, ctx })
    }

    /// Gives up ownership of an identifier the CM is about to destroy
    /// itself (a connection request refused from its own handler).
    fn release_to_cm(self) {
        let this = core::mem::ManuallyDrop::new(self);
        // SAFETY: The identifier is live; after this its handler sees a null
        // context and ignores any event.
        unsafe { (*this.as_ptr()).context = core::ptr::null_mut() };
        // SAFETY: `this.ctx` is read exactly once and never used again;
        // `this` is not dropped.
        drop(unsafe { core::ptr::read(&this.ctx) });
        live::dec(live::Kind::CmId);
    }

    /// Sends the identifier's events to `handler` from now on, after the
    /// events queued so far (in order). Events the handler refuses while
    /// being replayed here are dropped (a refused connection request's
    /// identifier is destroyed here, in process context).
    pub fn set_handler(&self, handler: Arc<dyn CmHandler>) {
        loop {
            let mut st = self.ctx.state.lock();
            let Some(ev) = st.queue.pop() else {
                // Installed only once the queue is empty, so nothing
                // overtakes a queued event.
                st.handler = Some(handler);
                return;
            };
            let res = handler.handle(ev);
            drop(st);
            // Outside the lock: may destroy a refused request's identifier.
            drop(res);
        }
    }

    /// Stops delivering events to the handler (later ones are queued) and
    /// returns it. When this returns, the handler is not running and will
    /// not run again for this identifier, so whatever it refers to may go.
    pub fn clear_handler(&self) -> Option<Arc<dyn CmHandler>> {
        // The handler only runs under this lock (`Ctx::deliver`).
        self.ctx.state.lock().handler.take()
    }

    pub(in crate::rust) fn as_ptr(&self) -> *mut bindings::rdma_cm_id {
        self.ptr.as_ptr()
    }

    /// The device the identifier is bound to (`id->device`; null before
    /// address resolution).
    pub(in crate::rust) fn device_ptr(&self) -> *mut bindings::ib_device {
        // SAFETY: By the type invariant the identifier is live.
        unsafe { (*self.as_ptr()).device }
    }

    /// Its queue pair (`id->qp`; null until `rdma_create_qp`).
    pub(in crate::rust) fn qp_ptr(&self) -> *mut bindings::ib_qp {
        // SAFETY: By the type invariant the identifier is live.
        unsafe { (*self.as_ptr()).qp }
    }

    /// Binds the identifier to a local address (port 0 picks one).
    pub fn bind(&self, addr: Addr) -> Result {
        let sa = addr.to_sockaddr();
        // SAFETY: By the type invariant the identifier is live; `sa` is a
        // socket address the call only reads.
        to_result(unsafe { bindings::rdma_bind_addr(self.as_ptr(), sa.as_ptr()) })
    }

    /// Listens for connection requests; they arrive as
    /// [`CmEvent::ConnectRequest`].
    pub fn listen(&self, backlog: i32) -> Result {
        // SAFETY: By the type invariant the identifier is live.
        to_result(unsafe { bindings::rdma_listen(self.as_ptr(), backlog) })
    }

    /// The local port the identifier is bound to.
    pub fn local_port(&self) -> u16 {
        // SAFETY: By the type invariant the identifier is live, and so is
        // its route's source address: the union at the start of
        // `route.addr`, as large as a `sockaddr_storage`.
        let sa = unsafe {
            let src = &raw const (*self.as_ptr()).route.addr;
            SockAddr::copy_from(src.cast(), SOCKADDR_STORAGE)
        };
        match sa.addr() {
            Some(Addr::V4(_, port) | Addr::V6(_, port)) => port,
            None => 0,
        }
    }

    /// Starts resolving the address of a peer; completes with
    /// [`CmEvent::AddrResolved`] or [`CmEvent::AddrError`].
    pub fn resolve_addr(&self, dst: Addr, timeout_ms: u32) -> Result {
        let sa = dst.to_sockaddr();
        // SAFETY: By the type invariant the identifier is live; `sa` is a
        // socket address the call only reads (and copies); no source
        // address is given.
        to_result(unsafe {
            bindings::rdma_resolve_addr(
                self.as_ptr(),
                core::ptr::null_mut(),
                sa.as_ptr(),
                usize::try_from(timeout_ms).unwrap_or(usize::MAX),
            )
        })
    }

    /// Starts resolving the route to the peer; completes with
    /// [`CmEvent::RouteResolved`] or [`CmEvent::RouteError`].
    pub fn resolve_route(&self, timeout_ms: u32) -> Result {
        // SAFETY: By the type invariant the identifier is live.
        to_result(unsafe {
            bindings::rdma_resolve_route(
                self.as_ptr(),
                kernel::ffi::c_ulong::try_from(timeout_ms).unwrap_or(kernel::ffi::c_ulong::MAX),
            )
        })
    }

    /// Disconnects; the peer and this side then see [`CmEvent::Disconnected`].
    pub fn disconnect(&self) -> Result {
        // SAFETY: By the type invariant the identifier is live.
        to_result(unsafe { bindings::rdma_disconnect(self.as_ptr()) })
    }

    /// Rejects a connection request with optional private data.
    pub fn reject(&self, private_data: &[u8]) -> Result {
        let len = u8::try_from(private_data.len()).map_err(|_| EINVAL)?;
        // SAFETY: By the type invariant the identifier is live; the private
        // data is valid for `len` bytes and copied by the CM.
        to_result(unsafe {
            bindings::rdma_reject(
                self.as_ptr(),
                private_data.as_ptr().cast(),
                len,
                bindings::ib_cm_rej_reason_IB_CM_REJ_CONSUMER_DEFINED as u8,
            )
        })
    }

    /// Waits up to `timeout_ms` for the next event (while no handler is
    /// installed: events then go to the handler instead).
    ///
    /// Returns `ETIMEDOUT` when none arrived, `EINTR` when a signal is pending.
    pub fn wait_event(&self, timeout_ms: u32) -> Result<CmEvent> {
        let mut remaining = msecs_to_jiffies(timeout_ms);
        let mut st = self.ctx.state.lock();
        loop {
            if let Some(ev) = st.queue.pop() {
                return Ok(ev);
            }
            if remaining == 0 {
                return Err(ETIMEDOUT);
            }
            match self.ctx.wait.wait_interruptible_timeout(&mut st, remaining) {
                kernel::sync::CondVarTimeoutResult::Timeout => remaining = 0,
                kernel::sync::CondVarTimeoutResult::Woken { jiffies } => remaining = jiffies,
                kernel::sync::CondVarTimeoutResult::Signal { .. } => return Err(EINTR),
            }
        }
    }
}

impl Drop for CmId {
    fn drop(&mut self) {
        // SAFETY: By the type invariant the identifier is live and this is
        // the only place it is destroyed.
        //
        // No event handler of it runs after `rdma_destroy_id` returns, so
        // `ctx` (and the handler object it holds) may be released after it
        // and this module's text may go once every identifier is destroyed:
        // `rdma_destroy_id` takes the identifier's `handler_mutex`, which
        // every handler call holds, and marks it `RDMA_CM_DESTROYING` under
        // it, which stops later deliveries; it then destroys the IB/iWARP
        // CM identifier (waiting for its callbacks), cancels the CM's work
        // and waits for every reference the CM's work items hold
        // (`cma_id_put` + `wait_for_completion(&id_priv->comp)` in C
        // `_destroy_id`). Identifiers the CM creates for connection
        // requests are either ours (a `CmId`) or destroyed by the CM before
        // the listener's handler call returns.
        unsafe { bindings::rdma_destroy_id(self.as_ptr()) };
        live::dec(live::Kind::CmId);
    }
}

impl CmId {
    /// Sets the local ACK timeout (4.096 us * 2^`timeout`, at most 31) the
    /// connection asks for (`rdma_set_ack_timeout`). Call before
    /// [`CmId::resolve_route`]: RoCE turns it into the path's packet
    /// lifetime, which the CM REQ carries to the peer.
    pub fn set_ack_timeout(&self, timeout: u8) -> Result {
        // SAFETY: By the type invariant the identifier is live.
        to_result(unsafe { bindings::rdma_set_ack_timeout(self.as_ptr(), timeout) })
    }
}

impl CmId {
    /// Restricts a listener bound to an IPv6 address to IPv6
    /// (`rdma_set_afonly`), so that an IPv4 listener can share its port.
    /// Call before [`CmId::bind`].
    pub fn set_afonly(&self, afonly: bool) -> Result {
        // SAFETY: By the type invariant the identifier is live.
        to_result(unsafe { bindings::rdma_set_afonly(self.as_ptr(), i32::from(afonly)) })
    }
}
