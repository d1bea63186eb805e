// SPDX-License-Identifier: GPL-2.0

//! Verbs objects of one reliable connection: protection domain, completion
//! queues, queue pair, DMA-mapped buffers and work requests.
//!
//! Ownership follows what the hardware can still touch:
//!
//! - an [`Endpoint`] owns the queue pair and the completion queues; dropping
//!   it drains the queue pair, so every posted work request completes (with
//!   a flush error if need be) before the queues go away;
//! - a posted [`WorkRequest`] owns a reference to itself and to every
//!   [`MappedBuf`] its scatter/gather list names, and the [`MappedPage`]s and
//!   page runs ([`PageRange`]) mapped for it alone, until its completion
//!   has run;
//! - every `MappedBuf` keeps its [`Pd`] alive until it is unmapped (and its
//!   sink MR, if any, deregistered), and a `Pd` holds a reference on its
//!   device, so the device stays registered (its removal waits) until the
//!   last buffer and queue pair on it are gone; an [`Endpoint`]'s
//!   [`Anchor`] (protection domain and CM identifier) may share its `Pd`
//!   with other connections ([`Endpoint::with_pd`], the server's
//!   registration cache).
//!
//! Completions run from the RDMA core's workqueue (`IB_POLL_WORKQUEUE`), in
//! process context, like the C client's.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h).

use crate::rust::bindings;
use crate::rust::kext::slab::SlabObj;
use crate::rust::kext::spin_lock::{new_spinlock, SpinLock};
use crate::rust::module::live;
use crate::rust::rdma::cm::{CmEvent, CmId};
use crate::rust::rdma::device::{self, DeviceAttr};
use crate::rust::rdma::mr::Mr;
use crate::rust::rdma::sink_pool::SinkMrPool;
use crate::rust::rdma::wr_pool::{Shell, WrPool};
use crate::rust::sunrpc::page_sinks::PageSinks;
use core::cell::UnsafeCell;
use core::mem::{ManuallyDrop, MaybeUninit};
use core::ptr::{addr_of_mut, NonNull};
use kernel::alloc::KVec;
use kernel::error::{from_err_ptr, to_result};
use kernel::prelude::*;
use kernel::sync::atomic::{Acquire, Atomic, Full, Relaxed, Release};
use kernel::sync::Arc;
use kernel::types::Opaque;
use kernel::workqueue::{impl_has_work, new_work, Work, WorkItem};
use pin_init::pin_init_from_closure;

/// Most scatter/gather entries in one work request built by this layer.
///
/// 30: an RDMA Write or Read of up to 29 pages (one entry for a piece's
/// unaligned start), where C's `rdma_rw` takes the device's own limits;
/// mlx5's `max_sge_rd` is 30, rxe's 32. Every work request holds this many
/// entries (64 bytes each) inline: at 30 the largest, about 2000 bytes,
/// still fits the 2 KiB kmalloc class that 16 took.
pub const MAX_SGE: usize = 30;

/// A protection domain and the device it was allocated on.
///
/// A domain is either a connection's own (the client: one per connection)
/// or shared by every connection on a device (the server, so memory
/// registrations of its buffer cache are valid on all of them: an MR can
/// only be used by queue pairs of its own protection domain).
///
/// # Invariants
///
/// `pd` was allocated on `device`, and `device` is held with
/// `ib_device_try_get`, so the device stays registered (its removal waits)
/// until `drop` deallocates `pd` and then releases the device. `virt_dma`
/// is `ib_uses_virt_dma(device)`, which does not change while the device
/// is registered.
pub struct Pd {
    pd: NonNull<bindings::ib_pd>,
    device: NonNull<bindings::ib_device>,
    global_rkey: Option<u32>,
    /// The device's "DMA addresses" are kernel virtual addresses (rxe,
    /// siw: `ib_uses_virt_dma`), so mapping and syncing do nothing.
    virt_dma: bool,
}

// SAFETY: The PD and device pointers are only used for calls the RDMA core
// allows from any context.
unsafe impl Send for Pd {}
// SAFETY: See `Send`; no interior state is mutated through `&Pd`.
unsafe impl Sync for Pd {}

impl Pd {
    /// The protection domain.
    pub(in crate::rust) fn pd_ptr(&self) -> *mut bindings::ib_pd {
        self.pd.as_ptr()
    }

    /// The device.
    pub(in crate::rust) fn device_ptr(&self) -> *mut bindings::ib_device {
        self.device.as_ptr()
    }

    /// Whether the device's "DMA addresses" are kernel virtual addresses
    /// (rxe, siw), so that mapping and unmapping do nothing.
    pub(in crate::rust) fn virt_dma(&self) -> bool {
        self.virt_dma
    }

    /// Allocates a protection domain on the device `id` is bound to (after
    /// address resolution or a connection request). `unsafe_global_rkey`:
    /// see [`EndpointConfig::unsafe_global_rkey`].
    pub fn new(id: &CmId, unsafe_global_rkey: bool) -> Result<Arc<Self>> {
        let device = NonNull::new(id.device_ptr()).ok_or(ENODEV)?;
        // SAFETY: The device is live while `id` is bound to it; the
        // reference taken here keeps it registered beyond `id`.
        if !unsafe { bindings::rpcrdma_rs_device_get(device.as_ptr()) } {
            return Err(ENODEV);
        }
        // SAFETY: `device` is live (reference held).
        let raw = from_err_ptr(unsafe {
            bindings::rpcrdma_rs_alloc_pd(device.as_ptr(), unsafe_global_rkey)
        })
        .and_then(|p| NonNull::new(p).ok_or(ENOMEM));
        let pd = match raw {
            Ok(pd) => pd,
            Err(e) => {
                // SAFETY: Taken above and not yet handed to a `Pd`.
                unsafe { bindings::ib_device_put(device.as_ptr()) };
                return Err(e);
            }
        };
        live::inc(live::Kind::Pd);
        let global_rkey = if unsafe_global_rkey {
            // SAFETY: `pd` is live.
            Some(unsafe { (*pd.as_ptr()).unsafe_global_rkey })
        } else {
            None
        };
        // SAFETY: `device` is live (reference held).
        let virt_dma = unsafe { bindings::rpcrdma_rs_uses_virt_dma(device.as_ptr()) };
        // INVARIANT: `pd` was allocated on `device`, which is held;
        // `virt_dma` was read from it.
        Ok(Arc::new(
            Self {
                pd,
                device,
                global_rkey,
                virt_dma,
            },
            GFP_KERNEL,
        )?)
    }

    /// Whether this domain's device is the device `id` is bound to.
    pub fn same_device(&self, id: &CmId) -> bool {
        id.device_ptr() == self.device.as_ptr()
    }

    /// Whether the device speaks iWARP, where the sink of an RDMA Read must
    /// be registered with remote write access (C `rdma_rw_io_needs_mr`).
    pub fn is_iwarp(&self) -> bool {
        // SAFETY: By the type invariant the device is held.
        unsafe { bindings::rpcrdma_rs_device_is_iwarp(self.device.as_ptr()) }
    }

    /// The device's limits.
    pub fn device_attr(&self) -> DeviceAttr {
        // SAFETY: By the type invariant the device is held, so registered.
        unsafe { DeviceAttr::query(self.device.as_ptr()) }
    }

    /// The local DMA lkey of the protection domain.
    pub(crate) fn lkey(&self) -> u32 {
        // SAFETY: By the type invariant `pd` is live.
        unsafe { (*self.pd.as_ptr()).local_dma_lkey }
    }
}

impl Drop for Pd {
    fn drop(&mut self) {
        // SAFETY: By the type invariant `pd` is live; every object created on
        // it (queue pairs, MRs) holds a reference to `self`, so is gone.
        unsafe { bindings::rpcrdma_rs_dealloc_pd(self.pd.as_ptr()) };
        live::dec(live::Kind::Pd);
        // SAFETY: Taken in `new`, released once, after the last use.
        unsafe { bindings::ib_device_put(self.device.as_ptr()) };
    }
}

/// Protection domain, CM identifier and device of one connection.
///
/// # Invariants
///
/// `pd` was allocated on the device `id` is bound to. The anchor's reference
/// to `pd` is dropped before `id` is destroyed (field order).
pub struct Anchor {
    pd: Arc<Pd>,
    id: CmId,
}

impl Anchor {
    /// The protection domain.
    pub(in crate::rust) fn pd_ptr(&self) -> *mut bindings::ib_pd {
        self.pd.pd.as_ptr()
    }

    /// The device.
    pub(in crate::rust) fn device_ptr(&self) -> *mut bindings::ib_device {
        self.pd.device.as_ptr()
    }

    /// The protection domain object.
    pub(in crate::rust) fn pd(&self) -> &Arc<Pd> {
        &self.pd
    }
}

/// A completion queue.
///
/// # Invariants
///
/// `ptr` is a live CQ allocated by `ib_alloc_cq`, freed exactly once in `drop`.
struct Cq {
    ptr: NonNull<bindings::ib_cq>,
}

impl Cq {
    /// Allocates a CQ polled from process context (`ib_comp_wq`), like the
    /// C client and server: handlers may allocate, and locks need not
    /// disable interrupts.
    fn new(device: NonNull<bindings::ib_device>, entries: u32, vector: u32) -> Result<Self> {
        let n = i32::try_from(entries).map_err(|_| EINVAL)?;
        let v = i32::try_from(vector).map_err(|_| EINVAL)?;
        let caller = device::client_name();
        // SAFETY: `device` is a live device (the caller holds its anchor);
        // `vector` is below its `num_comp_vectors`; the caller name is a
        // static string (C `ib_alloc_cq` passes `KBUILD_MODNAME`).
        let ptr = from_err_ptr(unsafe {
            bindings::__ib_alloc_cq(
                device.as_ptr(),
                core::ptr::null_mut(),
                n,
                v,
                bindings::ib_poll_context_IB_POLL_WORKQUEUE,
                caller.as_char_ptr(),
            )
        })?;
        let ptr = NonNull::new(ptr).ok_or(ENOMEM)?;
        live::inc(live::Kind::Cq);
        Ok(Self { ptr })
    }
}

impl Drop for Cq {
    fn drop(&mut self) {
        // SAFETY: By the type invariant the CQ is live; the queue pair using
        // it was destroyed first (field order in `Endpoint`).
        unsafe { bindings::ib_free_cq(self.ptr.as_ptr()) };
        live::dec(live::Kind::Cq);
    }
}

/// What one side asks of a connection when it connects or accepts (C
/// `struct rdma_conn_param`): the transport's choice, not the verbs layer's.
#[derive(Clone, Copy, Debug, Default)]
pub struct ConnParam<'a> {
    /// Sent to the peer with the request or the reply (at most 255 bytes
    /// here; the CM's own limit depends on the transport).
    pub private_data: &'a [u8],
    /// How many RDMA Reads the peer may have outstanding against us.
    pub responder_resources: u8,
    /// How many RDMA Reads we issue at once.
    pub initiator_depth: u8,
    /// Whether the hardware's end-to-end flow control is asked for.
    pub flow_control: bool,
    /// Transport retries before a send fails (active side).
    pub retry_count: u8,
    /// Retries after a receiver-not-ready NAK (7: without limit).
    pub rnr_retry_count: u8,
}

/// Sizes of a connection's queues.
#[derive(Clone, Copy, Debug)]
pub struct EndpointConfig {
    /// Send queue depth.
    pub max_send_wr: u32,
    /// Receive queue depth.
    pub max_recv_wr: u32,
    /// Scatter/gather entries per Send.
    pub max_send_sge: u32,
    /// Scatter/gather entries per Receive.
    pub max_recv_sge: u32,
    /// Allocate the protection domain with an unsafe global rkey, which lets
    /// the peer read and write all of this host's memory. Only for trusted
    /// peers (the "physical" registration strategy).
    pub unsafe_global_rkey: bool,
    /// Which completion vector to use, modulo the device's count. Callers
    /// give each new connection the next one (C `ib_alloc_cq_any` does it
    /// per CQ), so that nconnect's connections, or many clients, have
    /// their completions handled on different CPUs.
    pub comp_vector: u32,
}

/// The queue pair of one reliable connection and what it needs.
///
/// # Invariants
///
/// A queue pair was created on `anchor.id` with `send_cq` and `recv_cq`; it
/// is drained and destroyed before the CQs are freed, when the endpoint is
/// dropped ([`Teardown`]; the `ManuallyDrop` fields are taken there, once).
/// Its send queue has room for `send_depth + 1` work requests, the last for
/// the drain.
pub struct Endpoint {
    qp: NonNull<bindings::ib_qp>,
    // Only held so they are freed after the QP and before the anchor.
    send_cq: ManuallyDrop<Cq>,
    recv_cq: ManuallyDrop<Cq>,
    anchor: ManuallyDrop<Arc<Anchor>>,
    attr: DeviceAttr,
    send_depth: u32,
    send_sge: u32,
    comp_vector: u32,
    /// Set once [`Self::drain`] has returned: no posted work request is
    /// outstanding any more.
    drained: Atomic<bool>,
    /// Posts in progress, each holding a [`Posting`], and
    /// [`POSTING_CLOSED`], set when the drain that ends the connection
    /// starts: no post is accepted after it ([`Self::start_post`]), and
    /// the drain waits for those in progress, so none reaches the queue
    /// pair after it. One word, so that entering a post is one atomic
    /// operation that both counts it and sees whether the drain started.
    posting: Atomic<u32>,
    /// Unsignaled work requests posted ahead of a signaled one that could
    /// not be posted ([`Self::park`]): completed as flushed after the
    /// drain.
    parked: ManuallyDrop<ParkedList>,
}

/// Chains kept until the drain ([`Endpoint::park`]).
type ParkedList = Pin<KBox<SpinLock<KVec<Parked>>>>;

/// A chain of posted unsignaled work requests that no completion will
/// report: its first request (from `Arc::into_raw`) and how to complete
/// the chain as flushed.
struct Parked {
    first: *const core::ffi::c_void,
    flush: unsafe fn(*const core::ffi::c_void),
}

// SAFETY: `first` stands for an `Arc` of a `Send` work request, only used
// by whoever takes the entry.
unsafe impl Send for Parked {}

/// The bit of [`Endpoint`]'s `posting` set once its drain has started.
const POSTING_CLOSED: u32 = 1 << 31;

/// A post in progress on an endpoint ([`Endpoint::start_post`]).
///
/// # Invariants
///
/// Counted in `ep.posting`, taken while [`POSTING_CLOSED`] was clear
/// there: the drain waits for it to be dropped.
pub(in crate::rust) struct Posting<'a> {
    ep: &'a Endpoint,
}

impl Posting<'_> {
    /// The queue pair to post on.
    pub(in crate::rust) fn qp(&self) -> *mut bindings::ib_qp {
        self.ep.qp.as_ptr()
    }
}

impl Drop for Posting<'_> {
    fn drop(&mut self) {
        self.ep.posting.fetch_sub(1, Release);
    }
}

// SAFETY: Posting to a queue pair is thread-safe in the RDMA core; the other
// fields are `Send`.
unsafe impl Send for Endpoint {}
// SAFETY: See `Send`.
unsafe impl Sync for Endpoint {}

impl Endpoint {
    /// Creates the protection domain, completion queues and queue pair on
    /// the device `id` is bound to (after route resolution, or a connection
    /// request). Queue sizes are clamped to what the device supports.
    pub fn new(id: CmId, cfg: &EndpointConfig) -> Result<Self> {
        let pd = Pd::new(&id, cfg.unsafe_global_rkey)?;
        Self::with_pd(id, cfg, pd)
    }

    /// Like [`Self::new`], on an existing protection domain of the same
    /// device (shared by several connections); `cfg.unsafe_global_rkey`
    /// is ignored (the domain has one or not).
    pub fn with_pd(id: CmId, cfg: &EndpointConfig, pd: Arc<Pd>) -> Result<Self> {
        if !pd.same_device(&id) {
            return Err(EINVAL);
        }
        let device = pd.device;
        // SAFETY: The device is held by `pd`, so registered.
        let attr = unsafe { DeviceAttr::query(device.as_ptr()) };
        // INVARIANT: `pd` was allocated on the device `id` is bound to.
        let anchor = Arc::new(Anchor { pd, id }, GFP_KERNEL)?;
        let max_wr = attr.max_qp_wr.max(2);
        // One send queue entry more than the user may fill: `ib_drain_qp`
        // posts its drain work request there even when the queue is full
        // (a peer that stopped acknowledging), so the drain always waits
        // for every posted request (C `max_send_wr += 1 /* for
        // ib_drain_sq */`). `send_depth` excludes it.
        let send_depth = cfg.max_send_wr.clamp(1, max_wr - 1);
        let send_wr = send_depth + 1;
        let recv_wr = cfg.max_recv_wr.clamp(1, max_wr);
        let send_sge = cfg.max_send_sge.clamp(1, attr.max_send_sge.max(1));
        let recv_sge = cfg.max_recv_sge.clamp(1, attr.max_recv_sge.max(1));
        let cqe_max = attr.max_cqe.max(1);
        // Both queues of one connection share its vector.
        let vector = cfg.comp_vector % attr.num_comp_vectors.max(1);
        // Every send queue entry, the drain's included, may complete.
        let send_cq = Cq::new(device, send_wr.min(cqe_max), vector)?;
        let recv_cq = Cq::new(device, recv_wr.saturating_add(1).min(cqe_max), vector)?;
        // SAFETY: All pointers are live; the QP is attached to `anchor.id`.
        to_result(unsafe {
            let mut qp_attr: bindings::ib_qp_init_attr = core::mem::zeroed();
            qp_attr.send_cq = send_cq.ptr.as_ptr();
            qp_attr.recv_cq = recv_cq.ptr.as_ptr();
            qp_attr.cap.max_send_wr = send_wr;
            qp_attr.cap.max_recv_wr = recv_wr;
            qp_attr.cap.max_send_sge = send_sge;
            qp_attr.cap.max_recv_sge = recv_sge;
            qp_attr.sq_sig_type = bindings::ib_sig_type_IB_SIGNAL_REQ_WR;
            qp_attr.qp_type = bindings::ib_qp_type_IB_QPT_RC;
            bindings::rdma_create_qp(anchor.id.as_ptr(), anchor.pd_ptr(), &mut qp_attr)
        })?;
        // `rdma_create_qp` succeeded, so the identifier has a QP.
        let qp = NonNull::new(anchor.id.qp_ptr()).ok_or(ENOMEM)?;
        live::inc(live::Kind::Qp);
        // INVARIANT: The QP was created on `anchor.id` with both CQs.
        Ok(Self {
            qp,
            send_cq: ManuallyDrop::new(send_cq),
            recv_cq: ManuallyDrop::new(recv_cq),
            anchor: ManuallyDrop::new(anchor),
            attr,
            send_depth,
            send_sge,
            comp_vector: vector,
            drained: Atomic::new(false),
            posting: Atomic::new(0),
            parked: ManuallyDrop::new(KBox::pin_init(
                new_spinlock!(KVec::new(), "rpcrdma_rs::verbs::parked"),
                GFP_KERNEL,
            )?),
        })
    }

    /// Scatter/gather entries one Send or RDMA Write may carry (what the
    /// queue pair was created with, at most [`MAX_SGE`]).
    pub fn max_send_sge(&self) -> usize {
        (self.send_sge as usize).min(MAX_SGE)
    }

    /// The completion vector both completion queues are on.
    pub fn comp_vector(&self) -> u32 {
        self.comp_vector
    }

    /// Send queue entries the user may have posted at once (the queue's
    /// spare entry for the drain is not counted).
    pub fn send_depth(&self) -> u32 {
        self.send_depth
    }

    /// The queue pair, for FFI code in `rust/` that extends the layer
    /// (chained work requests, registrations).
    pub(in crate::rust) fn qp_ptr(&self) -> *mut bindings::ib_qp {
        self.qp.as_ptr()
    }

    /// The anchor (protection domain, device, CM identifier), for FFI code
    /// in `rust/` that extends the layer.
    pub(crate) fn anchor(&self) -> &Arc<Anchor> {
        &self.anchor
    }

    /// The protection domain (shared with other connections or not).
    pub fn pd(&self) -> &Arc<Pd> {
        &self.anchor.pd
    }

    /// The device's limits.
    pub fn device_attr(&self) -> &DeviceAttr {
        &self.attr
    }

    /// The connection's CM identifier (for events and disconnect).
    pub fn cm_id(&self) -> &CmId {
        &self.anchor.id
    }

    /// Waits for the next CM event of this connection.
    pub fn wait_event(&self, timeout_ms: u32) -> Result<CmEvent> {
        self.anchor.id.wait_event(timeout_ms)
    }

    /// The unsafe global rkey, if the protection domain has one.
    pub fn global_rkey(&self) -> Option<u32> {
        self.anchor.pd.global_rkey
    }

    fn conn(&self, p: &ConnParam<'_>, accept: bool) -> Result {
        let len = u8::try_from(p.private_data.len()).map_err(|_| EINVAL)?;
        // SAFETY: The identifier has a QP; the private data is valid for
        // `len` bytes and copied by the CM before the call returns.
        to_result(unsafe {
            let mut param: bindings::rdma_conn_param = core::mem::zeroed();
            param.private_data = p.private_data.as_ptr().cast();
            param.private_data_len = len;
            param.responder_resources = p.responder_resources;
            param.initiator_depth = p.initiator_depth;
            param.flow_control = u8::from(p.flow_control);
            param.retry_count = p.retry_count;
            param.rnr_retry_count = p.rnr_retry_count;
            if accept {
                bindings::rdma_accept(self.anchor.id.as_ptr(), &mut param)
            } else {
                bindings::rdma_connect(self.anchor.id.as_ptr(), &mut param)
            }
        })
    }

    /// Connects to the resolved peer (active side).
    pub fn connect(&self, param: &ConnParam<'_>) -> Result {
        self.conn(param, false)
    }

    /// Accepts a connection request (passive side).
    pub fn accept(&self, param: &ConnParam<'_>) -> Result {
        let id = self.anchor.id.as_ptr();
        // `rdma_accept` must run under the identifier's handler mutex (it
        // asserts so under lockdep): the CM must not deliver an event of
        // this identifier, say a DISCONNECTED, while the accept moves its
        // QP to RTR/RTS. As `svc_rdma_accept` in C does.
        //
        // SAFETY: The identifier is live (held by the anchor). No caller
        // runs inside this identifier's event handler, which holds the
        // mutex already: connections are accepted from process context
        // (the svc `xpo_accept` op, a KUnit test thread), never from a
        // [`CmHandler`].
        unsafe { bindings::rdma_lock_handler(id) };
        let accepted = self.conn(param, true);
        // SAFETY: Locked just above by this thread.
        unsafe { bindings::rdma_unlock_handler(id) };
        accepted
    }

    /// Disconnects, refuses every later post ([`Self::start_post`] fails
    /// with `ESHUTDOWN`), waits for the posts in progress, then waits until
    /// every posted work request has completed (flushed if need be) and
    /// its handler has run. Process context.
    ///
    /// The receive queue is drained before the send queue, as C's
    /// `rpcrdma_xprt_drain` does: a Receive's handler may post on the send
    /// queue (a reply's invalidations), and those posts are in the send
    /// queue, or refused, before its drain starts.
    pub fn drain(&self) {
        // SAFETY: The identifier is live (held by the anchor); an error
        // only means we were not connected.
        let _ = unsafe { bindings::rdma_disconnect(self.anchor.id.as_ptr()) };
        self.close_posting();
        // SAFETY: By the type invariant the QP is live; its CQs are polled
        // from a workqueue, not from this thread.
        unsafe {
            bindings::ib_drain_rq(self.qp.as_ptr());
            bindings::ib_drain_sq(self.qp.as_ptr());
        }
        self.drained.store(true, Release);
        self.flush_parked();
    }

    /// Refuses posts from now on and waits until those in progress are
    /// done (a post never sleeps, so the wait is short).
    fn close_posting(&self) {
        // One word holds the flag and the count: the operations on it are
        // in one order, so either a post's increment comes after the flag
        // (and sees it) or this sees the post counted.
        let mut now = self.posting.load(Relaxed);
        while now & POSTING_CLOSED == 0 {
            match self.posting.cmpxchg(now, now | POSTING_CLOSED, Full) {
                Ok(_) => break,
                Err(seen) => now = seen,
            }
        }
        // Acquire: each post's work happens before its `Posting` is
        // dropped (`Release`), so before the drain that follows.
        while self.posting.load(Acquire) & !POSTING_CLOSED != 0 {
            kernel::time::delay::fsleep(kernel::time::Delta::from_micros(50));
        }
    }

    /// Enters a post on the queue pair, or `ESHUTDOWN` once the drain that
    /// ends the connection has started: nothing is posted after it.
    pub(in crate::rust) fn start_post(&self) -> Result<Posting<'_>> {
        // The count stays far below the flag: one post per thread at a
        // time, each on its way through this function or `ib_post_*`.
        if self.posting.fetch_add(1, Full) & POSTING_CLOSED != 0 {
            self.posting.fetch_sub(1, Release);
            return Err(ESHUTDOWN);
        }
        // INVARIANT: Counted above while the flag was clear.
        Ok(Posting { ep: self })
    }

    /// Keeps the posted unsignaled chain from `first` until the drain,
    /// which completes it as flushed: the signaled request behind it was
    /// not posted, so no completion will. Should even that bookkeeping
    /// fail for memory, the chain is leaked, never freed while the device
    /// may read it.
    pub(in crate::rust) fn park<H: CompletionHandler>(&self, first: Arc<WorkRequest<H>>) {
        let parked = Parked {
            first: Arc::into_raw(first).cast(),
            flush: flush_parked::<H>,
        };
        if self.parked.lock().push(parked, GFP_ATOMIC).is_err() {
            crate::pr_err_ratelimited!(
                "rpcrdma_rs: no memory to keep unsignaled work requests until the drain: leaked\n"
            );
        }
        if self.is_drained() {
            // Drained meanwhile: nothing else will flush them.
            self.flush_parked();
        }
    }

    /// Completes the parked chains as flushed; only after the drain.
    fn flush_parked(&self) {
        flush_parked_list(&self.parked);
    }

    /// Whether [`Self::drain`] has returned: every work request posted on
    /// the queue pair has completed, and none can be posted any more.
    pub fn is_drained(&self) -> bool {
        self.drained.load(Acquire)
    }

    /// Allocates a buffer of `len` bytes and maps it for DMA on this
    /// connection's device.
    pub fn alloc_buf(&self, len: usize, dir: DmaDir) -> Result<Arc<MappedBuf>> {
        MappedBuf::new(&self.anchor.pd, len, dir)
    }

    /// Maps `len` bytes at `off` of a referenced page for the device to
    /// read (the source of an RDMA Write or Send), without a copy and
    /// without an allocation: the mapping goes with the one work request it
    /// is handed to ([`SgEntry::Page`]).
    pub fn map_page(&self, page: PageRef, off: usize, len: usize) -> Result<MappedPage> {
        MappedPage::new(&self.anchor.pd, page, off, len)
    }

    /// Registers the bytes `[off, off + len)` of `sinks` (counted from the
    /// first page's first byte) in an MR of `pool` (iWARP only): the
    /// result is the one sink of an RDMA Read that lands straight in those
    /// pages. Like a registered slab sink, its MR is registered with
    /// [`MappedBuf::post_sink_registration`] before the Read, which then
    /// invalidates it; when the buffer is dropped the MR goes back to
    /// `pool`, or is freed if its key may still be valid. At most
    /// [`SinkMrPool::pages`] pages.
    pub fn register_page_run(
        &self,
        pool: &Arc<SinkMrPool>,
        sinks: &Arc<PageSinks>,
        off: usize,
        len: usize,
    ) -> Result<Arc<MappedBuf>> {
        let pd = &self.anchor.pd;
        if !pd.is_iwarp() || !Arc::ptr_eq(pd, pool.pd()) || !Arc::ptr_eq(pd, sinks.pd()) {
            return Err(EINVAL);
        }
        let page = kernel::page::PAGE_SIZE;
        let last = off
            .checked_add(len)
            .ok_or(EINVAL)?
            .checked_sub(1)
            .ok_or(EINVAL)?;
        let n = last / page - off / page + 1;
        if n > pool.pages() as usize {
            return Err(EINVAL);
        }
        let len32 = u32::try_from(len).map_err(|_| EINVAL)?;
        let mut mr = pool.take()?;
        let mapped = mr.map_dma_runs(sinks.dma_runs(off, len)?);
        let seg = mr.segment();
        if let Err(e) = mapped.and(if seg.length == len32 {
            Ok(())
        } else {
            Err(EIO)
        }) {
            // Never registered with this mapping: still invalid.
            pool.give_back(mr);
            return Err(e);
        }
        live::inc(live::Kind::MappedBuf);
        // INVARIANT: no bytes or mapping of its own (`Backing::Registered`):
        // the MR maps the range, kept mapped by `sinks` (until the Reads into
        // them all completed and they hand their pages over), at
        // `seg.offset`.
        Ok(Arc::new(
            MappedBuf {
                ptr: core::ptr::null_mut(),
                len,
                backing: Backing::Registered {
                    _sinks: sinks.clone(),
                },
                dma: seg.offset,
                dir: DmaDir::FromDevice,
                mr: Some(SinkMr {
                    mr,
                    remote: true,
                    armed: Atomic::new(false),
                    home: Some(pool.clone()),
                }),
                pd: pd.clone(),
                cpu_busy: Atomic::new(false),
            },
            GFP_KERNEL,
        )?)
    }

    /// Posts a Send, RDMA Write or RDMA Read described by `op` whose local
    /// scatter/gather list is `wr`'s.
    ///
    /// On success `wr` is owned by the queue until its completion has run.
    pub fn post_send<H: CompletionHandler>(&self, wr: Arc<WorkRequest<H>>, op: SendOp) -> Result {
        // SAFETY: No chain.
        unsafe { self.post_send_behind(wr, op, None) }.map_err(|f| f.error)
    }

    /// As [`Self::post_send`], with the work requests `chain` (its first
    /// and last) posted ahead of it by the same `ib_post_send` (C
    /// `frwr_send` chains its REG_MRs ahead of the Send so). On failure
    /// returns how many of `chain` were posted, and `wr`, which was not
    /// (the caller needs no reference of its own to undo its links).
    ///
    /// # Safety
    ///
    /// `chain` is a list linked through `next` from its first to its last
    /// entry, which ends it (`next` null); its work requests stay valid
    /// for the call and are used by nothing else meanwhile, and their
    /// memory regions are on this queue pair's protection domain.
    pub(in crate::rust) unsafe fn post_send_behind<H: CompletionHandler>(
        &self,
        wr: Arc<WorkRequest<H>>,
        op: SendOp,
        chain: Option<(*mut bindings::ib_send_wr, *mut bindings::ib_send_wr)>,
    ) -> core::result::Result<(), NotPosted<H>> {
        let mut chain_posted = 0usize;
        let res = self.post_send_inner(wr, op, chain, &mut chain_posted);
        res.map_err(|(error, wr)| NotPosted {
            error,
            chain_posted,
            wr,
        })
    }

    fn post_send_inner<H: CompletionHandler>(
        &self,
        wr: Arc<WorkRequest<H>>,
        op: SendOp,
        chain: Option<(*mut bindings::ib_send_wr, *mut bindings::ib_send_wr)>,
        chain_posted: &mut usize,
    ) -> core::result::Result<(), (Error, Arc<WorkRequest<H>>)> {
        let prep = match SendPrep::new(&wr, op) {
            Ok(prep) => prep,
            Err(e) => return Err((e, wr)),
        };
        WorkRequest::post_with_back(wr, |wr, cqe| {
            // The Read consumes the sink's registration (before posting: its
            // completion may give the buffer back at once); a Read that was
            // not posted leaves the key valid, so the sink stays armed and
            // is never cached.
            if prep.invalidates {
                wr.set_sink_armed(false);
            }
            let flags = bindings::ib_send_flags_IB_SEND_SIGNALED;
            // SAFETY: The cqe was initialised by `WorkRequest::new`; the
            // chain is as `post_send_behind` requires.
            let rc = unsafe { self.post_prepared(wr, cqe, flags, &prep, chain, chain_posted) };
            if rc != 0 && prep.invalidates {
                wr.set_sink_armed(true);
            }
            rc
        })
    }

    /// Builds the `ib_rdma_wr` of `wr` (completion entry `cqe`, `flags`)
    /// and posts it behind `chain`; returns `ib_post_send`'s result and
    /// counts in `chain_posted` how many of `chain` went out on a failure.
    ///
    /// # Safety
    ///
    /// `cqe` is a completion entry valid until `wr` completes; `chain` is
    /// as [`Self::post_send_behind`] requires.
    unsafe fn post_prepared<H: CompletionHandler>(
        &self,
        wr: &WorkRequest<H>,
        cqe: *mut bindings::ib_cqe,
        flags: i32,
        prep: &SendPrep,
        chain: Option<(*mut bindings::ib_send_wr, *mut bindings::ib_send_wr)>,
        chain_posted: &mut usize,
    ) -> kernel::ffi::c_int {
        // SAFETY: The sges name mapped buffers `wr` owns; the QP is live by
        // the type invariant; `cqe` and `chain` by the caller's
        // requirements.
        unsafe {
            let mut w = prep.rdma_wr(wr, cqe, flags);
            // One sink, named by the key its REG_MR just made (the SGE may
            // predate it); providers copy the SGE at post time.
            let mut inv_sge: bindings::ib_sge;
            if prep.opcode == bindings::ib_wr_opcode_IB_WR_RDMA_READ_WITH_INV {
                let (1, Some(first)) = (prep.nsge, wr.first_sge()) else {
                    return EINVAL.to_errno();
                };
                inv_sge = first;
                inv_sge.lkey = prep.inv;
                w.wr.sg_list = &mut inv_sge;
            }
            let Ok(posting) = self.start_post() else {
                return ESHUTDOWN.to_errno();
            };
            post_behind(&posting, &mut w.wr, chain, chain_posted)
        }
    }

    /// Posts a Receive into `wr`'s scatter/gather list.
    pub fn post_recv<H: CompletionHandler>(&self, wr: Arc<WorkRequest<H>>) -> Result {
        if wr.unpostable_as_recv() {
            return Err(EINVAL);
        }
        let nsge = i32::try_from(wr.nsge).map_err(|_| EINVAL)?;
        WorkRequest::post_with(wr, |wr, cqe| {
            let Ok(posting) = self.start_post() else {
                return ESHUTDOWN.to_errno();
            };
            // SAFETY: As in `post_send`.
            unsafe {
                let mut w: bindings::ib_recv_wr = core::mem::zeroed();
                w.__bindgen_anon_1.wr_cqe = cqe;
                w.sg_list = wr.sg_list();
                w.num_sge = nsge;
                bindings::rpcrdma_rs_ib_post_recv(posting.qp(), &w, core::ptr::null_mut())
            }
        })
    }
}

/// Most Receives posted with one call ([`crate::rust::rdma::recv_slots`]).
pub const RECV_BATCH_MAX: usize = 16;

impl Drop for Endpoint {
    fn drop(&mut self) {
        // SAFETY: The `ManuallyDrop` fields are taken here only, and the
        // endpoint is not used after (type invariant).
        let t = unsafe {
            Teardown {
                qp: self.qp,
                send_cq: ManuallyDrop::take(&mut self.send_cq),
                recv_cq: ManuallyDrop::take(&mut self.recv_cq),
                anchor: ManuallyDrop::take(&mut self.anchor),
                parked: ManuallyDrop::take(&mut self.parked),
            }
        };
        // The last reference to a connection may go with a late completion
        // of its own queue pair: draining there would wait for the CQ work
        // that is waiting, and freeing the CQ would cancel the work that
        // runs it. The teardown then runs on the device client's queue.
        if t.on_its_own_cq() {
            t.defer();
        } else {
            t.run();
        }
    }
}

/// What a dropped [`Endpoint`] leaves to tear down: its queue pair, then
/// its CQs, then its protection domain and CM identifier.
///
/// # Invariants
///
/// `qp` is the live queue pair created on `anchor.id` with `send_cq` and
/// `recv_cq`, and nothing posts on it any more (its endpoint is gone).
struct Teardown {
    qp: NonNull<bindings::ib_qp>,
    send_cq: Cq,
    recv_cq: Cq,
    anchor: Arc<Anchor>,
    parked: ParkedList,
}

// SAFETY: The queue pair is only torn down, from whichever thread; the other
// fields are `Send`.
unsafe impl Send for Teardown {}

impl Teardown {
    /// Whether the current thread is running the completion work of one of
    /// the queue pair's CQs.
    fn on_its_own_cq(&self) -> bool {
        // SAFETY: Both CQs are live (type invariant).
        unsafe {
            bindings::rpcrdma_rs_cq_is_current(self.send_cq.ptr.as_ptr())
                || bindings::rpcrdma_rs_cq_is_current(self.recv_cq.ptr.as_ptr())
        }
    }

    /// Disconnects, drains (receive queue first, see [`Endpoint::drain`])
    /// and destroys the queue pair, then frees the CQs and the anchor.
    /// Process context, not on the CQs' own work.
    fn run(self) {
        // Tell the peer first; an error only means we were not connected.
        // SAFETY: The identifier is live (held by the anchor).
        let _ = unsafe { bindings::rdma_disconnect(self.anchor.id.as_ptr()) };
        // SAFETY: The QP is live (type invariant). Draining moves it to the
        // error state and waits until every posted work request has
        // completed, so no completion refers to it or to the CQs afterwards.
        unsafe {
            bindings::ib_drain_rq(self.qp.as_ptr());
            bindings::ib_drain_sq(self.qp.as_ptr());
            bindings::rdma_destroy_qp(self.anchor.id.as_ptr());
        }
        live::dec(live::Kind::Qp);
        flush_parked_list(&self.parked);
        let Self {
            send_cq,
            recv_cq,
            anchor,
            ..
        } = self;
        drop(send_cq);
        drop(recv_cq);
        drop(anchor);
    }

    /// Runs the teardown on the device client's queue. Should the work item
    /// not be allocated, the queue pair and what it holds are leaked rather
    /// than torn down here, where the drain would never return.
    fn defer(self) {
        let item = KBox::pin_init(
            pin_init!(DeferredTeardown {
                teardown: None,
                work <- new_work!("rpcrdma_rs::verbs::teardown"),
            }),
            GFP_KERNEL,
        );
        let Ok(mut item) = item else {
            crate::pr_err_ratelimited!(
                "rpcrdma_rs: no memory to tear a queue pair down off its completion queue: leaked\n"
            );
            core::mem::forget(self);
            return;
        };
        // SAFETY: Only `teardown` is written; the pinned work item is not
        // moved.
        unsafe { item.as_mut().get_unchecked_mut().teardown = Some(self) };
        if let Err(item) = device::enqueue_teardown(item) {
            crate::pr_err_ratelimited!(
                "rpcrdma_rs: no queue to tear a queue pair down on: leaked\n"
            );
            core::mem::forget(item);
        }
    }
}

/// A [`Teardown`] waiting for the device client's queue.
#[pin_data]
pub(in crate::rust) struct DeferredTeardown {
    teardown: Option<Teardown>,
    #[pin]
    work: Work<DeferredTeardown>,
}

impl_has_work! {
    impl HasWork<Self> for DeferredTeardown { self.work }
}

impl WorkItem for DeferredTeardown {
    type Pointer = Pin<KBox<Self>>;

    fn run(this: Pin<KBox<Self>>) {
        // SAFETY: Only `teardown` is taken; the work item is not moved, and
        // the box is freed after.
        let mut this = unsafe { Pin::into_inner_unchecked(this) };
        if let Some(t) = this.teardown.take() {
            t.run();
        }
    }
}

/// Completes the parked chains of `parked` as flushed; only after the
/// drain of their queue pair.
fn flush_parked_list(parked: &ParkedList) {
    let chains = core::mem::take(&mut *parked.lock());
    for p in chains {
        // SAFETY: Each entry came from `park` and is taken once; the
        // queue pair was drained (the callers' condition).
        unsafe { (p.flush)(p.first) };
    }
}

/// A work request whose post failed ([`Endpoint::post_send_behind`]).
pub(in crate::rust) struct NotPosted<H: CompletionHandler> {
    /// Why.
    pub(in crate::rust) error: Error,
    /// How many of the chain posted ahead of it went out.
    pub(in crate::rust) chain_posted: usize,
    /// The request, not posted: no completion will run for it.
    pub(in crate::rust) wr: Arc<WorkRequest<H>>,
}

/// Posts `wr` on `posting`'s queue pair behind `chain` (its first and
/// last work request), all with one `ib_post_send`; returns its result and
/// counts in `chain_posted` how many of `chain` went out on a failure.
///
/// # Safety
///
/// `wr` is a valid work request whose `next` is null, and its completion
/// entry and scatter/gather list stay valid until it completes; `chain` is
/// as [`Endpoint::post_send_behind`] requires.
pub(in crate::rust) unsafe fn post_behind(
    posting: &Posting<'_>,
    wr: *mut bindings::ib_send_wr,
    chain: Option<(*mut bindings::ib_send_wr, *mut bindings::ib_send_wr)>,
    chain_posted: &mut usize,
) -> kernel::ffi::c_int {
    let Some((first, last)) = chain else {
        // SAFETY: The queue pair is live while `posting` is held; `wr` by
        // the caller's requirement.
        return unsafe {
            bindings::rpcrdma_rs_ib_post_send(posting.qp(), wr, core::ptr::null_mut())
        };
    };
    // SAFETY: The chain's requests are valid, linked and end at `last`
    // (the caller's requirement); `wr` is valid.
    unsafe {
        (*last).next = wr;
        let mut bad: *const bindings::ib_send_wr = core::ptr::null();
        let rc = bindings::rpcrdma_rs_ib_post_send(posting.qp(), first, &mut bad);
        // Those ahead of the one that failed were posted.
        if rc != 0 {
            let mut at: *const bindings::ib_send_wr = first;
            while !at.is_null() && at != bad && at != wr.cast_const() {
                *chain_posted += 1;
                at = (*at).next;
            }
        }
        // The chain is the caller's again, unlinked from `wr`.
        (*last).next = core::ptr::null_mut();
        rc
    }
}

/// What a Send, RDMA Write or RDMA Read work request carries besides its
/// scatter/gather list, worked out from its [`SendOp`] before posting.
pub(in crate::rust) struct SendPrep {
    opcode: u32,
    remote_addr: u64,
    rkey: u32,
    inv: u32,
    /// An RDMA Read that invalidates its (remotely writable) sink.
    invalidates: bool,
    nsge: i32,
}

impl SendPrep {
    /// Sends and RDMA Writes (every request of a Reply, every client
    /// Send) are worked out inline; an RDMA Read, which checks its sinks,
    /// out of line.
    #[inline]
    pub(in crate::rust) fn new<H: CompletionHandler>(
        wr: &WorkRequest<H>,
        op: SendOp,
    ) -> Result<Self> {
        let (opcode, remote_addr, rkey, inv) = match op {
            SendOp::Send => (bindings::ib_wr_opcode_IB_WR_SEND, 0, 0, 0),
            SendOp::SendWithInvalidate(key) => {
                (bindings::ib_wr_opcode_IB_WR_SEND_WITH_INV, 0, 0, key)
            }
            SendOp::RdmaWrite { remote_addr, rkey } => (
                bindings::ib_wr_opcode_IB_WR_RDMA_WRITE,
                remote_addr,
                rkey,
                0,
            ),
            SendOp::RdmaRead { remote_addr, rkey } => {
                return Self::read(wr, remote_addr, rkey);
            }
        };
        Ok(Self {
            opcode,
            remote_addr,
            rkey,
            inv,
            invalidates: false,
            nsge: i32::try_from(wr.nsge).map_err(|_| EINVAL)?,
        })
    }

    /// An RDMA Read of the peer's `rkey` at `remote_addr` into `wr`'s
    /// buffers, which must all be sinks the device writes.
    #[inline(never)]
    fn read<H: CompletionHandler>(
        wr: &WorkRequest<H>,
        remote_addr: u64,
        rkey: u32,
    ) -> Result<Self> {
        if wr.dirs_to_device() {
            // An RDMA Read writes into the local buffers.
            return Err(EINVAL);
        }
        let (opcode, inv, invalidates) = match wr.remote_sink()? {
            // The sink's remotely writable key dies with this Read.
            Some(inv) => (bindings::ib_wr_opcode_IB_WR_RDMA_READ_WITH_INV, inv, true),
            None => (bindings::ib_wr_opcode_IB_WR_RDMA_READ, 0, false),
        };
        Ok(Self {
            opcode,
            remote_addr,
            rkey,
            inv,
            invalidates,
            nsge: i32::try_from(wr.nsge).map_err(|_| EINVAL)?,
        })
    }

    /// The unsignaled work request of `wr`, a Send or RDMA Write (`EINVAL`
    /// for a Read: its completion must be seen), for a chain: its failure
    /// alone reaches the unsignaled completion entry. `next` is left null.
    pub(in crate::rust) fn unsignaled_wr<H: CompletionHandler>(
        &self,
        wr: &WorkRequest<H>,
    ) -> Result<bindings::ib_rdma_wr> {
        if self.opcode == bindings::ib_wr_opcode_IB_WR_RDMA_READ
            || self.opcode == bindings::ib_wr_opcode_IB_WR_RDMA_READ_WITH_INV
        {
            return Err(EINVAL);
        }
        Ok(self.rdma_wr(wr, crate::rust::rdma::mr::unsignaled_cqe(), 0))
    }

    /// The `ib_rdma_wr` of `wr` with completion entry `cqe` and `flags`;
    /// `next` is left null.
    fn rdma_wr<H: CompletionHandler>(
        &self,
        wr: &WorkRequest<H>,
        cqe: *mut bindings::ib_cqe,
        flags: i32,
    ) -> bindings::ib_rdma_wr {
        // SAFETY: All-zero is a valid `ib_rdma_wr` (null pointers, no
        // flags); the fields that matter are set below.
        let mut w: bindings::ib_rdma_wr = unsafe { core::mem::zeroed() };
        w.wr.__bindgen_anon_1.wr_cqe = cqe;
        w.wr.sg_list = wr.sg_list();
        w.wr.num_sge = self.nsge;
        w.wr.opcode = self.opcode;
        w.wr.send_flags = flags;
        w.wr.ex.invalidate_rkey = self.inv;
        w.remote_addr = self.remote_addr;
        w.rkey = self.rkey;
        w
    }
}

/// Direction of a DMA buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DmaDir {
    /// The device reads it (Send source, RDMA Write source).
    ToDevice,
    /// The device writes it (Receive sink, RDMA Read sink, RDMA Write target).
    FromDevice,
}

/// Where a [`MappedBuf`]'s bytes live.
enum Backing {
    /// A `KVec` taken apart (`ptr`, `len` and this capacity).
    Vec { cap: usize },
    /// An object of a slab cache.
    Slab(SlabObj),
    /// A range of page sinks that the buffer's MR maps for one RDMA Read
    /// ([`Endpoint::register_page_run`]); kept mapped by the reference
    /// held here while the MR names them, until every Read into them
    /// completed (invalidating the MR) and the sinks hand their pages over
    /// (only held).
    Registered { _sinks: Arc<PageSinks> },
}

/// A reference on a page, put on drop. Transparent: an array of them is an
/// array of page pointers, for C helpers that take or put many at once.
///
/// # Invariants
///
/// The holder took one reference on `page`.
#[repr(transparent)]
pub struct PageRef {
    page: NonNull<bindings::page>,
}

// SAFETY: A page reference may be put from any thread.
unsafe impl Send for PageRef {}
// SAFETY: Shared references do not touch the page.
unsafe impl Sync for PageRef {}

impl PageRef {
    /// Takes a reference on `page`.
    ///
    /// # Safety
    ///
    /// `page` is a live page.
    pub(in crate::rust) unsafe fn get(page: NonNull<bindings::page>) -> Self {
        // SAFETY: Live by the safety requirement.
        unsafe { bindings::rpcrdma_rs_page_get(page.as_ptr()) };
        // INVARIANT: The reference was taken just above.
        Self { page }
    }
}

impl PageRef {
    /// Allocates a page (`GFP_KERNEL`); the new reference is its only one.
    pub fn alloc() -> Result<Self> {
        // SAFETY: No requirement; a null result is a failed allocation.
        let page = unsafe { bindings::rpcrdma_rs_alloc_page() };
        // INVARIANT: The allocation's reference is this holder's.
        Ok(Self {
            page: NonNull::new(page).ok_or(ENOMEM)?,
        })
    }

    /// Copies `out.len()` bytes at `offset` of the page out.
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result {
        let end = offset.checked_add(out.len()).ok_or(EINVAL)?;
        if end > kernel::page::PAGE_SIZE {
            return Err(EINVAL);
        }
        // SAFETY: The page is live (type invariant).
        let base = unsafe { bindings::rpcrdma_rs_page_address(self.page.as_ptr()) };
        if base.is_null() {
            // A highmem page has no permanent kernel address.
            return Err(EINVAL);
        }
        // SAFETY: `[offset, end)` lies within the page (checked above),
        // which stays referenced during the copy; `out` is a distinct
        // Rust slice.
        unsafe {
            core::ptr::copy_nonoverlapping(
                base.cast::<u8>().add(offset),
                out.as_mut_ptr(),
                out.len(),
            )
        };
        Ok(())
    }
}

impl Clone for PageRef {
    fn clone(&self) -> Self {
        // SAFETY: The page is live: `self` holds a reference.
        unsafe { Self::get(self.page) }
    }
}

impl Drop for PageRef {
    fn drop(&mut self) {
        // SAFETY: The reference this holder took (type invariant).
        unsafe { bindings::rpcrdma_rs_page_put(self.page.as_ptr()) };
    }
}

/// Maps `[off, off + len)` of the page `page` references on `pd`'s device
/// in direction `dir`: the first byte's kernel address and DMA address.
/// The mapping must be undone before the reference is put.
pub(in crate::rust) fn map_page_range(
    pd: &Pd,
    page: &PageRef,
    off: usize,
    len: usize,
    dir: DmaDir,
) -> Result<(*mut u8, u64)> {
    let end = off.checked_add(len).ok_or(EINVAL)?;
    if len == 0 || end > kernel::page::PAGE_SIZE {
        return Err(EINVAL);
    }
    // SAFETY: The page is live (referenced by `page`).
    let base = unsafe { bindings::rpcrdma_rs_page_address(page.page.as_ptr()) };
    if base.is_null() {
        // A highmem page has no permanent kernel address.
        return Err(EINVAL);
    }
    // SAFETY: `off < PAGE_SIZE` was checked.
    let ptr = unsafe { base.cast::<u8>().add(off) };
    // SAFETY: `ptr` is valid for `len` bytes of the page, which the caller
    // keeps referenced until it undoes the mapping.
    let dma = unsafe { map(pd, ptr, len, dir) }?;
    Ok((ptr, dma))
}

/// Bytes of consecutive pages of a page array the caller keeps (a Reply's
/// pages): the scatter/gather list of one RDMA Write or Send straight from
/// them ([`WorkRequest::with_pages`]), which references and maps them.
///
/// # Invariants
///
/// Each of `pages` is a live page while `'a` lasts, or null (a Reply's
/// slot: the mapping, which reads each entry anyway, refuses it rather
/// than a pass of its own before); `[off, off + len)`, counted from the
/// first page's first byte, spans exactly `pages.len()` pages:
/// `off < PAGE_SIZE` and `len > 0`.
pub struct PageRange<'a> {
    pages: &'a [*mut bindings::page],
    off: u32,
    len: u32,
}

impl<'a> PageRange<'a> {
    /// How many pages the range spans.
    pub fn page_count(&self) -> usize {
        self.pages.len()
    }

    /// The bytes `[off, off + len)` of `pages`; `EINVAL` unless they span
    /// exactly those pages.
    ///
    /// # Safety
    ///
    /// Every entry of `pages` is a live page, or null, while `'a` lasts.
    pub(in crate::rust) unsafe fn new(
        pages: &'a [*mut bindings::page],
        off: usize,
        len: usize,
    ) -> Result<Self> {
        let page = kernel::page::PAGE_SIZE;
        let end = off.checked_add(len).ok_or(EINVAL)?;
        if len == 0 || off >= page || end.div_ceil(page) != pages.len() {
            return Err(EINVAL);
        }
        // INVARIANT: checked above; the pages by the safety requirement.
        Ok(Self {
            pages,
            off: u32::try_from(off)?,
            len: u32::try_from(len)?,
        })
    }

    /// The bytes `[off, off + len)` of the pages `refs` holds; `EINVAL`
    /// unless they span exactly those pages.
    pub fn of_refs(refs: &'a [PageRef], off: usize, len: usize) -> Result<Self> {
        // SAFETY: `PageRef` is a transparent `NonNull<page>`, so the slice
        // is one of as many page pointers, none null; each page is live
        // while `refs` is borrowed (each entry holds a reference on it).
        unsafe {
            let pages = core::slice::from_raw_parts(refs.as_ptr().cast(), refs.len());
            Self::new(pages, off, len)
        }
    }
}

/// Part of a referenced page mapped for the device to read: the source of
/// one Send or RDMA Write without a copy ([`Endpoint::map_page`]). Unlike a
/// [`MappedBuf`] it is neither allocated nor shared: it moves into the one
/// work request that names it ([`SgEntry::Page`]), which unmaps and puts
/// it when it is dropped, after its completion: no allocation per page (the
/// client's inline page data; a run of a Reply's pages is mapped in one
/// call, [`PageRange`]).
///
/// # Invariants
///
/// `[dma, dma + len)` maps `len > 0` bytes of the page `page` references,
/// for the device to read, on `pd`'s device, until `drop`.
pub struct MappedPage {
    /// Only held: put after the mapping is undone.
    _page: PageRef,
    dma: u64,
    len: u32,
    pd: Arc<Pd>,
}

impl MappedPage {
    fn new(pd: &Arc<Pd>, page: PageRef, off: usize, len: usize) -> Result<Self> {
        let len32 = u32::try_from(len)?;
        let (_, dma) = map_page_range(pd, &page, off, len, DmaDir::ToDevice)?;
        live::inc(live::Kind::MappedBuf);
        // INVARIANT: mapped just above; `map_page_range` refuses `len == 0`.
        Ok(Self {
            _page: page,
            dma,
            len: len32,
            pd: pd.clone(),
        })
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether it is empty (never: at least one byte is mapped).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Its scatter/gather entry.
    pub(in crate::rust) fn sge(&self) -> bindings::ib_sge {
        bindings::ib_sge {
            addr: self.dma,
            length: self.len,
            lkey: self.pd.lkey(),
        }
    }
}

impl Drop for MappedPage {
    fn drop(&mut self) {
        let to_device = i32::from(true);
        // SAFETY: The mapping is live (type invariant) and no posted work
        // request names it: the one that did owns it and is being dropped.
        unsafe {
            bindings::rpcrdma_rs_dma_unmap(self.pd.device.as_ptr(), self.dma, self.len(), to_device)
        };
        live::dec(live::Kind::MappedBuf);
        // The fields drop after this: the page is put with its mapping undone.
    }
}

/// A fast-registration MR covering a whole [`MappedBuf`] that is the sink of
/// RDMA Reads (audit finding 2: no remotely writable key outlives its I/O).
///
/// - `remote` (iWARP, where the Read Request carries the sink's key to the
///   peer and the sink needs remote write access): registered for each
///   Read with a new key ([`MappedBuf::post_sink_registration`]) and
///   invalidated by that Read (RDMA_READ_WITH_INV), so the key is valid
///   only from its REG_MR until its Read completes, and a key a client saw
///   never names the MR again.
/// - otherwise (`force_mr` on IB/RoCE): registered once, local write only;
///   the key never leaves the host and no peer can write through it.
///
/// # Invariants
///
/// `ptr` was allocated on the buffer's protection domain, is mapped on the
/// buffer's DMA address and length, and is freed in `drop`.
struct SinkMr {
    mr: Mr,
    remote: bool,
    /// A registration was posted and no Read that invalidates it yet.
    armed: Atomic<bool>,
    /// The pool the MR goes back to, invalid, when the buffer is dropped
    /// (a registration of pages: [`Endpoint::register_page_run`]).
    home: Option<Arc<SinkMrPool>>,
}

/// A kernel buffer mapped for DMA on a device.
///
/// Its bytes are only reached by copying (`read`/`write`) or lent to a
/// closure for the length of one call (`fill`, `with_received`), never
/// through a long-lived reference, because the device may write them at
/// any time.
/// The memory is a `KVec` ([`Endpoint::alloc_buf`]) or a slab object
/// ([`MappedBuf::from_slab`], the server's registration cache, which keeps
/// buffers mapped, and for RDMA Read sinks on devices that need it
/// registered, across requests).
///
/// # Invariants
///
/// `ptr` points to `len` bytes owned by `backing`, mapped at `dma` on the
/// protection domain's device in direction `dir` until `drop`. If `mr` is
/// `Some`, it was allocated on `pd` and maps exactly `[dma, dma + len)`.
/// Except for [`Backing::Registered`]: no bytes or mapping of its own
/// (`ptr` is null and never dereferenced), `dma` is the address its MR
/// maps the pages at, and the CPU never reaches it.
pub struct MappedBuf {
    ptr: *mut u8,
    len: usize,
    backing: Backing,
    dma: u64,
    dir: DmaDir,
    mr: Option<SinkMr>,
    pd: Arc<Pd>,
    /// The CPU is reading or writing the bytes (`read`, `write`, `fill`):
    /// one such access at a time, so the slice `fill` lends is never
    /// aliased. A buffer whose one holder excludes the others by its own
    /// invariant (a ring's context) is reached without it (`*_held`).
    cpu_busy: Atomic<bool>,
}

// SAFETY: The buffer is only accessed through copies, DMA syncs and the
// exclusive loan of `fill`; the pointers are owned by this object.
unsafe impl Send for MappedBuf {}
// SAFETY: See `Send`; CPU accesses from several threads are serialised by
// `cpu_busy` (the loser fails with `EBUSY`), so no two overlap.
unsafe impl Sync for MappedBuf {}

/// The CPU's hold on a [`MappedBuf`]'s bytes, given up on drop.
struct CpuAccess<'a>(&'a Atomic<bool>);

impl Drop for CpuAccess<'_> {
    fn drop(&mut self) {
        self.0.store(false, Release);
    }
}

/// Maps `len` bytes at `ptr` on `pd`'s device.
///
/// # Safety
///
/// `ptr` must be valid for `len` bytes until the mapping is undone.
unsafe fn map(pd: &Pd, ptr: *mut u8, len: usize, dir: DmaDir) -> Result<u64> {
    let mut dma = 0u64;
    // SAFETY: `ptr` is valid for `len` bytes (caller); the device is held by
    // `pd`.
    to_result(unsafe {
        bindings::rpcrdma_rs_dma_map(
            pd.device.as_ptr(),
            ptr.cast(),
            len,
            i32::from(dir == DmaDir::ToDevice),
            &mut dma,
        )
    })?;
    Ok(dma)
}

impl MappedBuf {
    fn new(pd: &Arc<Pd>, len: usize, dir: DmaDir) -> Result<Arc<Self>> {
        if len == 0 || u32::try_from(len).is_err() {
            return Err(EINVAL);
        }
        let v: KVec<u8> = KVec::from_elem(0u8, len, GFP_KERNEL)?;
        let (ptr, len, cap) = v.into_raw_parts();
        // SAFETY: `ptr` holds `len` bytes until `drop`.
        let dma = match unsafe { map(pd, ptr, len, dir) } {
            Ok(d) => d,
            Err(e) => {
                // SAFETY: Recreate the vector we took apart to free it.
                drop(unsafe { KVec::from_raw_parts(ptr, len, cap) });
                return Err(e);
            }
        };
        live::inc(live::Kind::MappedBuf);
        // INVARIANT: `ptr` holds `len` bytes from `KVec`, mapped at `dma`.
        Ok(Arc::new(
            Self {
                ptr,
                len,
                backing: Backing::Vec { cap },
                dma,
                dir,
                mr: None,
                pd: pd.clone(),
                cpu_busy: Atomic::new(false),
            },
            GFP_KERNEL,
        )?)
    }

    /// Maps a whole slab object for DMA on `pd`'s device. With `sink_mr`
    /// (an RDMA Read sink, direction `FromDevice`) a fast-registration MR
    /// is also allocated and mapped over it; it becomes usable once
    /// [`Self::post_sink_registration`] has run on a connection of `pd`.
    pub fn from_slab(pd: &Arc<Pd>, obj: SlabObj, dir: DmaDir, sink_mr: bool) -> Result<Arc<Self>> {
        let len = obj.len();
        let len32 = u32::try_from(len).map_err(|_| EINVAL)?;
        if len == 0 || (sink_mr && dir != DmaDir::FromDevice) {
            return Err(EINVAL);
        }
        let ptr = obj.as_ptr();
        // SAFETY: The object holds `len` bytes while `obj` lives, and it
        // moves into the buffer, which unmaps before freeing it.
        let dma = unsafe { map(pd, ptr, len, dir) }?;
        live::inc(live::Kind::MappedBuf);
        // INVARIANT: mapped above; the MR, if any, is added below.
        let mut buf = Self {
            ptr,
            len,
            backing: Backing::Slab(obj),
            dma,
            dir,
            mr: None,
            pd: pd.clone(),
            cpu_busy: Atomic::new(false),
        };
        if sink_mr {
            // Pages covered: the object may start inside a page.
            let pages = len32
                .div_ceil(kernel::page::PAGE_SIZE as u32)
                .saturating_add(1);
            // Owned by the buffer from here on, so every exit frees it.
            // Remote write only where the device needs it for a Read sink.
            let sink = buf.mr.insert(SinkMr {
                mr: Mr::new(pd, pages)?,
                remote: pd.is_iwarp(),
                armed: Atomic::new(false),
                home: None,
            });
            // `[dma, dma + len)` is mapped on this device while `buf` lives.
            sink.mr.map_dma(dma, len32)?;
            // INVARIANT: the MR maps exactly the buffer.
        }
        Ok(Arc::new(buf, GFP_KERNEL)?)
    }

    /// Whether the buffer carries a sink MR (see [`Self::from_slab`]).
    pub fn has_sink_mr(&self) -> bool {
        self.mr.is_some()
    }

    /// Whether the sink MR must be registered again before each RDMA Read
    /// into the buffer (iWARP: the Read that uses it invalidates it).
    pub fn sink_registers_per_use(&self) -> bool {
        self.mr.as_ref().is_some_and(|m| m.remote)
    }

    /// Whether a registration of the sink MR was posted and no RDMA Read
    /// consumed (invalidates) it yet: on iWARP its key is then remotely
    /// writable, so the buffer must not go back to a cache.
    pub fn sink_armed(&self) -> bool {
        self.mr
            .as_ref()
            .is_some_and(|m| m.remote && m.armed.load(Relaxed))
    }

    /// Posts the registration (REG_MR, unsignaled, with a new key: C
    /// `rdma_rw_init_mr_wrs`/`rdma_rw_update_lkey`) of the buffer's sink MR
    /// on `ep`, which must use the buffer's protection domain, before an
    /// RDMA Read into it on the same queue pair. On iWARP (remote write
    /// access) it is posted before every Read, each of which invalidates
    /// it ([`Endpoint::post_send`] uses RDMA_READ_WITH_INV); elsewhere
    /// (local write only) once, when the buffer is created.
    pub fn post_sink_registration(&self, ep: &Endpoint) -> Result {
        let mr = self.mr.as_ref().ok_or(EINVAL)?;
        if !Arc::ptr_eq(ep.pd(), &self.pd) {
            return Err(EINVAL);
        }
        let posting = ep.start_post()?;
        // SAFETY: The MR and the QP are live; the REG_MR work request lives
        // inside the MR, which is freed only after every queue pair that
        // may still execute it was drained (connections drain their queue
        // pair before they release buffers they reference). The previous
        // REG_MR of this MR completed: the Read posted after it on its
        // queue pair completed before the buffer was used again, or (an
        // MR of a `SinkMrPool`, see `register_page_run`) before the MR went
        // back to the pool.
        unsafe { mr.mr.post_sink_reg(posting.qp(), mr.remote) }?;
        drop(posting);
        mr.armed.store(true, Relaxed);
        if let Backing::Slab(obj) = &self.backing {
            obj.cache().count_registration();
        }
        Ok(())
    }

    /// The sink MR's current key (its lkey; on iWARP also the Data Sink
    /// STag an RDMA Read Request carries to the peer), if it has one.
    pub(crate) fn sink_key(&self) -> Option<u32> {
        self.mr.as_ref().map(|m| m.mr.lkey())
    }

    /// The lkey work requests name this buffer with (read each time: every
    /// registration re-makes the key).
    fn lkey(&self) -> u32 {
        self.sink_key().unwrap_or_else(|| self.pd.lkey())
    }

    /// The DMA address of the first byte.
    pub(crate) fn dma_addr(&self) -> u64 {
        self.dma
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer is empty (never: buffers have at least one byte).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The DMA direction.
    pub fn dir(&self) -> DmaDir {
        self.dir
    }

    /// The scatter/gather entry of `len` bytes at `offset`.
    pub(in crate::rust) fn sge(&self, offset: usize, len: usize) -> Result<bindings::ib_sge> {
        self.range(offset, len)?;
        Ok(bindings::ib_sge {
            addr: self.dma.checked_add(offset as u64).ok_or(EINVAL)?,
            length: u32::try_from(len).map_err(|_| EINVAL)?,
            lkey: self.lkey(),
        })
    }

    /// As [`Self::range`], for the CPU to reach: never a registration of
    /// pages, which has no bytes of its own (those are its pages').
    fn cpu_range(&self, offset: usize, len: usize) -> Result<usize> {
        if matches!(self.backing, Backing::Registered { .. }) {
            return Err(EPERM);
        }
        self.range(offset, len)
    }

    fn range(&self, offset: usize, len: usize) -> Result<usize> {
        let end = offset.checked_add(len).ok_or(EINVAL)?;
        if end > self.len {
            return Err(EINVAL);
        }
        Ok(end)
    }

    /// Makes the first `len` bytes (at most the buffer) the CPU wrote
    /// visible to the device.
    fn sync_for_device(&self, len: usize) {
        // The call the helper would make does nothing on such a device.
        if self.pd.virt_dma {
            return;
        }
        // SAFETY: The mapping is live by the type invariant and the range
        // is within it.
        unsafe {
            bindings::rpcrdma_rs_dma_sync_for_device(
                self.pd.device.as_ptr(),
                self.dma,
                len.min(self.len),
                i32::from(self.dir == DmaDir::ToDevice),
            )
        };
    }

    /// Makes the first `len` bytes (at most the buffer) the device wrote
    /// visible to the CPU.
    fn sync_for_cpu(&self, len: usize) {
        // The call the helper would make does nothing on such a device.
        if self.pd.virt_dma {
            return;
        }
        // SAFETY: The mapping is live by the type invariant and the range
        // is within it.
        unsafe {
            bindings::rpcrdma_rs_dma_sync_for_cpu(
                self.pd.device.as_ptr(),
                self.dma,
                len.min(self.len),
                i32::from(self.dir == DmaDir::ToDevice),
            )
        };
    }

    /// Takes the CPU's hold on the bytes; `EBUSY` while another thread
    /// has it.
    fn cpu_access(&self) -> Result<CpuAccess<'_>> {
        self.cpu_busy
            .cmpxchg(false, true, Acquire)
            .map_err(|_| EBUSY)?;
        Ok(CpuAccess(&self.cpu_busy))
    }

    /// Lends the whole buffer to `f` to write in place (a Send buffer
    /// built where the device will read it, with no staging copy), then
    /// makes the bytes `f` says it wrote, counted from the start, visible
    /// to the device; returns that count.
    ///
    /// Only for a buffer the device reads (`DmaDir::ToDevice`) whose bytes
    /// are the buffer's own (not a lent page), and only between the
    /// completion of its last work request and its next post: the device
    /// would read a half-written buffer otherwise (the CPU's access itself
    /// is exclusive, see `cpu_busy`).
    pub fn fill(&self, f: impl FnOnce(&mut [u8]) -> Result<usize>) -> Result<usize> {
        let _cpu = self.cpu_access()?;
        // SAFETY: Every CPU access but those of a holder (`*_held`) takes
        // the hold `_cpu` has, and a buffer with a holder is reached by no
        // one else.
        unsafe { self.fill_held(f) }
    }

    /// [`Self::fill`] by the buffer's holder: a ring that owns it and
    /// lends it only through the context it belongs to, which one thread
    /// holds at a time. No CPU hold is taken (an atomic exchange and a
    /// release on every Send): the holder's own exclusivity is the hold.
    ///
    /// # Safety
    ///
    /// No other CPU access to the buffer runs during the call, and none
    /// may start: the caller holds the only reference through which it is
    /// reached, or the hold of [`Self::fill`].
    #[inline(always)]
    pub(in crate::rust) unsafe fn fill_held(
        &self,
        f: impl FnOnce(&mut [u8]) -> Result<usize>,
    ) -> Result<usize> {
        // SAFETY: The caller's requirement, for the call.
        let used = f(unsafe { self.bytes_held() }?)?;
        self.filled_held(used)?;
        Ok(used)
    }

    /// The buffer's bytes, for its holder to write in place with no
    /// closure between (a Send's whole marshaling then compiles as one
    /// function); [`Self::filled_held`] makes the first bytes written
    /// visible to the device.
    ///
    /// # Safety
    ///
    /// As [`Self::fill_held`], for as long as the slice is used.
    #[inline(always)]
    #[expect(clippy::mut_from_ref)]
    pub(in crate::rust) unsafe fn bytes_held(&self) -> Result<&mut [u8]> {
        if self.dir != DmaDir::ToDevice {
            return Err(EINVAL);
        }
        self.cpu_range(0, self.len)?;
        // SAFETY: `ptr` is valid for `len` bytes by the type invariant; no
        // other reference to them exists while the slice is used (safety
        // requirement), and the device only reads them.
        Ok(unsafe { core::slice::from_raw_parts_mut(self.ptr, self.len) })
    }

    /// Makes the first `used` bytes, written through
    /// [`Self::bytes_held`], visible to the device; `EINVAL` past the
    /// buffer's end.
    #[inline(always)]
    pub(in crate::rust) fn filled_held(&self, used: usize) -> Result {
        self.range(0, used)?;
        self.sync_for_device(used);
        Ok(())
    }

    /// Copies `src` into the buffer at `offset` and makes it visible to the
    /// device.
    pub fn write(&self, offset: usize, src: &[u8]) -> Result {
        self.cpu_range(offset, src.len())?;
        let _cpu = self.cpu_access()?;
        // SAFETY: `offset + src.len() <= len` was checked; `ptr` is valid for
        // `len` bytes by the type invariant, and `src` cannot overlap it.
        unsafe { core::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.add(offset), src.len()) };
        self.sync_for_device(self.len);
        Ok(())
    }

    /// Makes what the device wrote visible and copies it into `dst`.
    pub fn read(&self, offset: usize, dst: &mut [u8]) -> Result {
        self.cpu_range(offset, dst.len())?;
        let _cpu = self.cpu_access()?;
        self.sync_for_cpu(self.len);
        // SAFETY: Bounds checked above; `dst` cannot overlap the buffer.
        unsafe {
            core::ptr::copy_nonoverlapping(self.ptr.add(offset), dst.as_mut_ptr(), dst.len())
        };
        Ok(())
    }

    /// Makes the first `len` bytes the device wrote visible to the CPU and
    /// lends them to `f` in place, with no copy (C syncs `byte_len` bytes
    /// of a Receive buffer and decodes it where it is).
    ///
    /// Only for a buffer the device writes into (`DmaDir::FromDevice`): the
    /// CPU never writes one through this type's copying methods. The
    /// caller holds it between a completed Receive and the next post, when
    /// the device does not write it either.
    pub fn with_received<R>(&self, len: usize, f: impl FnOnce(&[u8]) -> R) -> Result<R> {
        let _cpu = self.cpu_access()?;
        // SAFETY: As in `fill`: `_cpu` excludes every other CPU access.
        unsafe { self.with_received_held(len, f) }
    }

    /// [`Self::with_received`] by the buffer's holder (as
    /// [`Self::fill_held`]: a receive ring's poller, which alone reaches a
    /// completed context's buffer until it posts it again), without the
    /// CPU hold.
    ///
    /// # Safety
    ///
    /// As [`Self::fill_held`].
    pub(in crate::rust) unsafe fn with_received_held<R>(
        &self,
        len: usize,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<R> {
        if self.dir != DmaDir::FromDevice {
            return Err(EINVAL);
        }
        self.cpu_range(0, len)?;
        self.sync_for_cpu(len);
        // SAFETY: `ptr` is valid for `self.len >= len` bytes by the type
        // invariant and stays so while `self` is borrowed; no CPU writer
        // reaches them during the call (safety requirement), and the
        // device does not write a buffer that is not posted.
        let bytes = unsafe { core::slice::from_raw_parts(self.ptr.cast_const(), len) };
        Ok(f(bytes))
    }

    /// Makes the first `len` bytes (at most the buffer's) that a Receive
    /// put in the buffer visible to the CPU, and returns how many: for the
    /// holder of a receive context that reads them in place afterwards
    /// ([`crate::rust::rdma::recv_slots::HeldRecv`]). `EINVAL` for a buffer
    /// the device does not write into.
    pub(in crate::rust) fn sync_received(&self, len: usize) -> Result<usize> {
        if self.dir != DmaDir::FromDevice {
            return Err(EINVAL);
        }
        let len = len.min(self.len);
        self.cpu_range(0, len)?;
        self.sync_for_cpu(len);
        Ok(len)
    }

    /// The bytes' address, for `rust/` code that reaches them by its own
    /// rule (a receive context's holder) or hands them to C.
    pub(in crate::rust) fn as_mut_ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Whether the CPU holds the bytes (a copy in
    /// progress): the device must not be given the buffer to write.
    pub(in crate::rust) fn cpu_holds(&self) -> bool {
        self.cpu_busy.load(Acquire)
    }

    /// Makes what the device wrote visible to the CPU and calls `f` with a
    /// pointer to bytes `[offset, offset + len)`, for FFI code in `rust/`
    /// that copies them straight into kernel structures (no bounce copy).
    /// The pointer is valid for `len` bytes during the call, which holds
    /// the CPU's access to the buffer.
    pub(crate) fn with_cpu_range<R>(
        &self,
        offset: usize,
        len: usize,
        f: impl FnOnce(*const u8) -> R,
    ) -> Result<R> {
        self.cpu_range(offset, len)?;
        let _cpu = self.cpu_access()?;
        self.sync_for_cpu(self.len);
        // SAFETY: `offset + len <= self.len` was checked, so the result
        // stays inside the allocation `ptr` points to.
        Ok(f(unsafe { self.ptr.add(offset) }.cast_const()))
    }

    /// Calls `f` with a pointer to bytes `[offset, offset + len)` for FFI
    /// code in `rust/` to fill, then makes them visible to the device. The
    /// pointer is valid for `len` bytes during the call, which holds the
    /// CPU's access to the buffer.
    pub(crate) fn with_cpu_range_mut<R>(
        &self,
        offset: usize,
        len: usize,
        f: impl FnOnce(*mut u8) -> R,
    ) -> Result<R> {
        self.cpu_range(offset, len)?;
        let r = {
            let _cpu = self.cpu_access()?;
            // SAFETY: `offset + len <= self.len` was checked.
            f(unsafe { self.ptr.add(offset) })
        };
        self.sync_for_device(self.len);
        Ok(r)
    }

    /// The address and rkey a peer uses to reach this buffer with RDMA, when
    /// the connection's protection domain has an unsafe global rkey (the
    /// "physical" strategy). `None` otherwise.
    ///
    /// The key is the protection domain's: dropping the buffer does not
    /// revoke it, and a responder may read the buffer after the work
    /// request that named it completed (a replayed Read Request). A buffer
    /// handed to a peer is kept until the queue pairs it is reached through
    /// are destroyed.
    pub fn remote_handle(&self) -> Option<(u64, u32)> {
        if matches!(self.backing, Backing::Registered { .. }) {
            return None;
        }
        self.pd.global_rkey.map(|rkey| (self.dma, rkey))
    }
}

impl Drop for MappedBuf {
    fn drop(&mut self) {
        // No queue pair can still execute a work request naming the MR:
        // the buffer is only dropped once no posted request holds it, and
        // REG_MR is followed on its queue pair by an RDMA Read that holds it.
        if let Some(sink) = self.mr.take() {
            let armed = sink.remote && sink.armed.load(Relaxed);
            match sink.home {
                // Invalid (its last Read invalidated it): reusable.
                Some(pool) if !armed => pool.give_back(sink.mr),
                // Deregistered here: a key that may still be valid dies
                // with the MR.
                _ => drop(sink.mr),
            }
            if let Backing::Slab(obj) = &self.backing {
                obj.cache().count_deregistration();
            }
        }
        if matches!(self.backing, Backing::Registered { .. }) {
            // No mapping of its own: its pages unmap when `backing` drops.
            live::dec(live::Kind::MappedBuf);
            return;
        }
        // SAFETY: The mapping is live by the type invariant and no posted work
        // request names it (they hold a reference to `self`).
        unsafe {
            bindings::rpcrdma_rs_dma_unmap(
                self.pd.device.as_ptr(),
                self.dma,
                self.len,
                i32::from(self.dir == DmaDir::ToDevice),
            )
        };
        if let Backing::Vec { cap } = self.backing {
            // SAFETY: `ptr`, `len`, `cap` came from `KVec::into_raw_parts`.
            drop(unsafe { KVec::from_raw_parts(self.ptr, self.len, cap) });
        }
        // A slab object is freed when `backing` is dropped, after this.
        live::dec(live::Kind::MappedBuf);
    }
}

/// A work request's operation (see [`Endpoint::post_send`]).
#[derive(Clone, Copy, Debug)]
pub enum SendOp {
    /// Send the local buffers to the peer's next posted Receive.
    Send,
    /// Send, and invalidate the peer's rkey (remote invalidation).
    SendWithInvalidate(u32),
    /// Write the local buffers to the peer's memory.
    RdmaWrite {
        /// The peer's address.
        remote_addr: u64,
        /// The peer's steering tag.
        rkey: u32,
    },
    /// Read the peer's memory into the local buffers.
    RdmaRead {
        /// The peer's address.
        remote_addr: u64,
        /// The peer's steering tag.
        rkey: u32,
    },
}

/// Status of a completed work request: what its handlers read of the
/// RDMA core's `ib_wc`, which every completion handler copies (so only
/// these few fields, and the invalidated rkey only where it is looked
/// for: [`WorkCompletion::of_receive`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkCompletion {
    /// `IB_WC_SUCCESS` (0) or an error code of `enum ib_wc_status`.
    pub status: i32,
    /// Bytes received (Receive completions); undefined in a completion
    /// with an error status.
    pub byte_len: u32,
    /// The rkey the peer invalidated with Send With Invalidate, if any
    /// (read by [`WorkCompletion::of_receive`] only).
    pub invalidated_rkey: Option<u32>,
    /// How many work requests this completion accounts for, for handlers
    /// that give queue entries back in one step: 1 for a request that
    /// completed alone or was flushed after a drain; for the requests of a
    /// chain or batch that completed with its signaled one, 0 for those
    /// ahead of it (their handlers run first) and their number plus one
    /// for the signaled one.
    pub covers: u32,
}

impl WorkCompletion {
    /// The completion of a work request flushed by a drain (for those
    /// whose completion was not requested).
    pub fn flushed() -> Self {
        Self::error(bindings::ib_wc_status_IB_WC_WR_FLUSH_ERR as i32)
    }

    /// The completion of one work request that ended with `status`, an
    /// error (its length is then undefined).
    pub fn error(status: i32) -> Self {
        Self {
            status,
            byte_len: 0,
            invalidated_rkey: None,
            covers: 1,
        }
    }

    /// What the RDMA core reported in `w`, accounting for one work
    /// request, but for an invalidated rkey (a Receive's, which only the
    /// client looks for: [`Self::of_receive`]).
    #[inline(always)]
    pub(in crate::rust) fn of(w: &bindings::ib_wc) -> Self {
        Self {
            status: w.status as i32,
            byte_len: w.byte_len,
            invalidated_rkey: None,
            covers: 1,
        }
    }

    /// [`Self::of`] with the rkey the peer invalidated with Send With
    /// Invalidate, if it did.
    pub(in crate::rust) fn of_receive(w: &bindings::ib_wc) -> Self {
        let with_invalidate = w.wc_flags & bindings::ib_wc_flags_IB_WC_WITH_INVALIDATE as i32 != 0;
        Self {
            // Read only when set: otherwise `ex` may hold nothing at all.
            invalidated_rkey: if with_invalidate {
                // SAFETY: With IB_WC_WITH_INVALIDATE, `ex` is the
                // invalidated rkey.
                Some(unsafe { w.ex.invalidate_rkey })
            } else {
                None
            },
            ..Self::of(w)
        }
    }

    /// Whether the work request succeeded.
    pub fn is_ok(&self) -> bool {
        self.status == 0
    }

    /// Whether the work request was flushed because the queue pair went to
    /// the error state (disconnect, drain).
    pub fn is_flush(&self) -> bool {
        self.status == bindings::ib_wc_status_IB_WC_WR_FLUSH_ERR as i32
    }
}

/// What runs when a work request completes.
pub trait CompletionHandler: Send + Sync + Sized {
    /// Called once per posted work request, in process context (the RDMA
    /// core's completion workqueue). `wr` is the completed request.
    /// The handler may post `wr` again (a Receive refilled in place).
    fn complete(&self, wr: &Arc<WorkRequest<Self>>, wc: &WorkCompletion);

    /// Where work requests with this handler are allocated from and given
    /// back to when they complete (see [`WrPool`]); `None`: each is
    /// allocated and freed.
    fn pool(&self) -> Option<&WrPool<Self>> {
        None
    }

    /// Takes back, by value, the buffer a completed request held first
    /// (a Send's, a copied Write's), when the request's allocation goes
    /// back to its pool: the last reference to the request, after its
    /// completion, so the device no longer reads or writes the buffer. A
    /// request whose last reference goes elsewhere drops it instead. The
    /// default drops it.
    fn recycle_buf(&self, buf: Arc<MappedBuf>) {
        drop(buf);
    }
}

/// One work request: its completion entry, its scatter/gather list and the
/// buffers and pages that list names, and what to do on completion.
///
/// # Invariants
///
/// `cqe` is initialised with `done::<H>`; `nsge <= MAX_SGE`; `sges[..nsge]`
/// are initialised, and `holds[..nholds]` with `nholds <= nsge`: the sges
/// describe ranges of the holds' memory, which stays mapped while `self`
/// lives (one hold per sge, or one for them all: a Read's page sinks,
/// [`WorkRequest::with_sinks`]). With `run` (a page run,
/// [`WorkRequest::with_pages`]) `run.at + run.n <= nsge` and
/// `sges[run.at..run.at + run.n]` map the run's pages on `run.pd`'s device,
/// for the device to read, until the request is dropped or released, and
/// `run_pages[..run.n]` are those pages, on which this request took a
/// reference each.
#[pin_data(PinnedDrop)]
pub struct WorkRequest<H: CompletionHandler> {
    #[pin]
    cqe: Opaque<bindings::ib_cqe>,
    /// Only the first `nsge` are written: a request is built in place in its
    /// allocation, without zeroing or copying the unused entries.
    sges: [MaybeUninit<bindings::ib_sge>; MAX_SGE],
    /// Likewise: only the first `nholds` are written, and dropped.
    holds: [MaybeUninit<Hold>; MAX_SGE],
    nsge: usize,
    nholds: usize,
    /// The pages of a page run, referenced and mapped for this request
    /// alone: one call maps them all, one unmaps them all (no object and
    /// no call of its own per page).
    run_pages: [MaybeUninit<*mut bindings::page>; MAX_SGE],
    /// Set for a page run: where it is in the list, and what maps and
    /// holds it.
    run: Option<PageRunMap>,
    /// For a signaled request of a [`SendChain`](crate::rust::rdma::send_chain::SendChain)
    /// or of a [`SendBatch`](crate::rust::rdma::send_batch::SendBatch): the first of the
    /// unsignaled requests posted ahead of it, whose completion its own
    /// stands for; for one of those: the next of them. Written only by the
    /// chain or batch before the post, taken only by the completion of the
    /// signaled one (`done`), or after a drain.
    ahead: UnsafeCell<Option<Arc<WorkRequest<H>>>>,
    /// The completion handler.
    pub handler: H,
}

// SAFETY: The cqe is only written at initialisation, `ahead` only by the
// poster before posting and by the completion after it;
// everything else is `Send` (H is `Send` by the trait bound).
unsafe impl<H: CompletionHandler> Send for WorkRequest<H> {}
// SAFETY: See `Send`; shared access never writes the cqe or sges, and
// `ahead` is never accessed by two threads at once (see its comment).
unsafe impl<H: CompletionHandler> Sync for WorkRequest<H> {}

/// Where a work request's page run is in its scatter/gather list and what
/// maps and holds its pages (see [`WorkRequest`]'s invariants).
struct PageRunMap {
    /// The protection domain whose device mapped the pages.
    pd: Arc<Pd>,
    /// The run's first entry.
    at: usize,
    /// Its entries, one per page.
    n: usize,
}

/// What keeps the memory of one scatter/gather entry alive and mapped.
enum Hold {
    /// A shared buffer, which keeps its own mapping.
    Buf(Arc<MappedBuf>),
    /// A page mapped for this request alone, unmapped when it is dropped
    /// (only held).
    Page { _mapping: MappedPage },
    /// Pages shared by a Call's Reads, which keep their own mappings
    /// (only held).
    Sinks { _sinks: Arc<PageSinks> },
}

/// One entry of a scatter/gather list to build a [`WorkRequest`] from.
pub enum SgEntry {
    /// A range of a DMA buffer.
    Buf(Segment),
    /// A page mapped for the request alone ([`Endpoint::map_page`]).
    Page(MappedPage),
}

impl From<Segment> for SgEntry {
    fn from(seg: Segment) -> Self {
        Self::Buf(seg)
    }
}

impl From<MappedPage> for SgEntry {
    fn from(page: MappedPage) -> Self {
        Self::Page(page)
    }
}

/// Maps the pages of `pages` on `pd`'s device for it to read into
/// `sges[..n]`, one entry per page, and with `held` not null takes a
/// reference on each, written to `held[..n]` (`n` pages in all): one
/// helper call for them all, counted live until [`unmap_page_run`]. On
/// an error nothing is left mapped or referenced.
///
/// # Safety
///
/// `sges` and, if not null, `held` are valid for writing `n` entries.
#[inline(always)]
pub(in crate::rust) unsafe fn map_page_run(
    pd: &Pd,
    pages: &PageRange<'_>,
    sges: *mut bindings::ib_sge,
    held: *mut *mut bindings::page,
) -> Result {
    // SAFETY: `pages` names `n` live pages or nulls spanned by its range
    // (its invariant), which the helper checks again, refusing a null;
    // the arrays have room for `n` entries (the caller's requirement).
    to_result(unsafe {
        bindings::rpcrdma_rs_map_page_run(
            pd.device_ptr(),
            pages.pages.as_ptr(),
            pages.pages.len() as u32,
            pages.off,
            pages.len,
            pd.lkey(),
            sges,
            held,
        )
    })?;
    live::add(live::Kind::MappedBuf, pages.pages.len());
    Ok(())
}

/// Undoes [`map_page_run`] of `n` pages on `device`: unmaps `sges[..n]`
/// and, with `held` not null, puts the pages `held[..n]`, in one helper
/// call.
///
/// # Safety
///
/// `sges[..n]` (and `held[..n]`) are what one `map_page_run` on `device`
/// wrote, undone once; no posted work request names them any more.
#[inline(always)]
pub(in crate::rust) unsafe fn unmap_page_run(
    device: *mut bindings::ib_device,
    held: *const *mut bindings::page,
    sges: *const bindings::ib_sge,
    n: usize,
) {
    // SAFETY: By the caller's requirement.
    unsafe { bindings::rpcrdma_rs_unmap_page_run(device, held, sges, n as u32) };
    live::sub(live::Kind::MappedBuf, n);
}

/// A range of a DMA buffer for a scatter/gather list.
pub struct Segment {
    /// The buffer.
    pub buf: Arc<MappedBuf>,
    /// Offset of the range in the buffer.
    pub offset: usize,
    /// Length of the range.
    pub len: usize,
}

impl<H: CompletionHandler> WorkRequest<H> {
    /// Builds a work request over at most [`MAX_SGE`] buffer ranges or
    /// mapped pages (an array or a vector of them: a single range needs no
    /// allocation of its own).
    pub fn new<E: Into<SgEntry>>(
        handler: H,
        segments: impl IntoIterator<Item = E>,
    ) -> Result<Arc<Self>> {
        Self::try_new(handler, segments.into_iter().map(Ok))
    }

    /// A work request without a scatter/gather list (a LOCAL_INV whose
    /// completion is waited for).
    pub fn without_sges(handler: H) -> Result<Arc<Self>> {
        Self::new(handler, core::iter::empty::<SgEntry>())
    }

    /// As [`Self::new`], over entries made as the list is built (pages
    /// mapped one by one): the first error fails it, and the entries taken
    /// so far are released.
    pub fn try_new<E: Into<SgEntry>>(
        handler: H,
        segments: impl IntoIterator<Item = Result<E>>,
    ) -> Result<Arc<Self>> {
        let shell = handler.pool().and_then(WrPool::take);
        Self::try_new_in(shell, handler, segments)
    }

    /// [`Self::try_new`] in `shell`, a kept allocation, if there is one.
    fn try_new_in<E: Into<SgEntry>>(
        shell: Option<Shell<H>>,
        handler: H,
        segments: impl IntoIterator<Item = Result<E>>,
    ) -> Result<Arc<Self>> {
        Self::build_in(shell, handler, move |slot: *mut Self| -> Result {
            // SAFETY: `slot` is valid for writes of a `Self` and not shared
            // (`build`'s guarantee); every pointer below is derived from
            // it, within the fields it names.
            unsafe {
                let holds = addr_of_mut!((*slot).holds).cast::<Hold>();
                let sges = addr_of_mut!((*slot).sges).cast::<bindings::ib_sge>();
                let mut nsge = 0;
                for (i, seg) in segments.into_iter().enumerate() {
                    // An entry beyond the list is dropped (a page unmapped).
                    let entry = match seg {
                        Ok(seg) if i < MAX_SGE => Self::entry(seg.into()),
                        Ok(_) => Err(EINVAL),
                        Err(e) => Err(e),
                    };
                    match entry {
                        Ok((sge, hold)) => {
                            sges.add(i).write(sge);
                            holds.add(i).write(hold);
                            nsge = i + 1;
                        }
                        Err(e) => {
                            // The slot counts as uninitialised on an error:
                            // release the buffers and pages taken so far.
                            core::ptr::drop_in_place(core::ptr::slice_from_raw_parts_mut(
                                holds, nsge,
                            ));
                            return Err(e);
                        }
                    }
                }
                addr_of_mut!((*slot).nsge).write(nsge);
                addr_of_mut!((*slot).nholds).write(nsge);
                addr_of_mut!((*slot).run).write(None);
            }
            Ok(())
        })
    }

    /// Builds a work request whose scatter/gather list is `pages`, each
    /// page referenced and mapped for the device to read by one call for
    /// them all (C maps a Write chunk's pages with one `rdma_rw_ctx` over
    /// a `bio_vec` array); the request unmaps and puts them, again in one
    /// call, when it is dropped after its completion. No allocation but
    /// the request's own, and none of that when its handler's pool has a
    /// kept one.
    pub fn with_pages(handler: H, ep: &Endpoint, pages: PageRange<'_>) -> Result<Arc<Self>> {
        let n = pages.pages.len();
        if n > MAX_SGE {
            return Err(EINVAL);
        }
        let pd = ep.pd().clone();
        Self::build(handler, move |slot: *mut Self| -> Result {
            // SAFETY: `slot` is valid for writes of a `Self` and not shared
            // (`build`'s guarantee), so the arrays its pointers name have
            // room for `MAX_SGE >= n` entries each; `pages` names `n` live
            // pages or nulls spanned by `[off, off + len)` (its invariant),
            // which the helper checks again, refusing a null. On success it
            // mapped them into `sges[..n]` and took a reference on each,
            // written to `run_pages[..n]`; on an error it left nothing
            // taken or mapped.
            unsafe {
                let sges = addr_of_mut!((*slot).sges).cast::<bindings::ib_sge>();
                let held = addr_of_mut!((*slot).run_pages).cast::<*mut bindings::page>();
                map_page_run(&pd, &pages, sges, held)?;
                addr_of_mut!((*slot).nsge).write(n);
                addr_of_mut!((*slot).nholds).write(0);
                addr_of_mut!((*slot).run).write(Some(PageRunMap { pd, at: 0, n }));
            }
            Ok(())
        })
    }

    /// Builds a Send's work request whose scatter/gather list is
    /// `buf[..split]`, the pages of `pages` (referenced and mapped for the
    /// device to read by one call for them all, as [`Self::with_pages`]),
    /// then `buf[split..len]` if that is not empty: an inline message
    /// whose page data is not copied (C `svc_rdma_map_reply_msg`). `buf` is
    /// the first hold, so a handler that takes its first buffer back
    /// ([`CompletionHandler::recycle_buf`]) gets it. `EINVAL` for an empty
    /// first range, a range past the buffer, or more entries than
    /// [`MAX_SGE`].
    pub fn with_pages_between(
        handler: H,
        ep: &Endpoint,
        buf: Arc<MappedBuf>,
        split: usize,
        len: usize,
        pages: PageRange<'_>,
    ) -> Result<Arc<Self>> {
        let n = pages.pages.len();
        let behind = len.checked_sub(split).ok_or(EINVAL)?;
        let nsge = 1 + n + usize::from(behind > 0);
        if split == 0 || nsge > MAX_SGE {
            return Err(EINVAL);
        }
        buf.range(0, len)?;
        let lkey = buf.lkey();
        let ahead = bindings::ib_sge {
            addr: buf.dma,
            length: u32::try_from(split)?,
            lkey,
        };
        let after = bindings::ib_sge {
            addr: buf.dma.checked_add(split as u64).ok_or(EINVAL)?,
            length: u32::try_from(behind)?,
            lkey,
        };
        let pd = ep.pd().clone();
        Self::build(handler, move |slot: *mut Self| -> Result {
            // SAFETY: `slot` is valid for writes of a `Self` and not shared
            // (`build`'s guarantee), so its arrays have room for `MAX_SGE >=
            // nsge = 1 + n (+ 1)` entries; `pages` names `n` live pages or
            // nulls spanned by `[off, off + len)` (its invariant), which the
            // helper checks again, refusing a null. On success it mapped
            // them into `sges[1..1 + n]` and took a reference on each,
            // written to `run_pages[..n]`; on an error it left nothing
            // taken or mapped, and nothing else is written yet. The two
            // buffer entries lie within `buf` (checked above), which the
            // one hold keeps.
            unsafe {
                let sges = addr_of_mut!((*slot).sges).cast::<bindings::ib_sge>();
                let held = addr_of_mut!((*slot).run_pages).cast::<*mut bindings::page>();
                map_page_run(&pd, &pages, sges.add(1), held)?;
                sges.write(ahead);
                if behind > 0 {
                    sges.add(1 + n).write(after);
                }
                addr_of_mut!((*slot).holds)
                    .cast::<Hold>()
                    .write(Hold::Buf(buf));
                addr_of_mut!((*slot).nsge).write(nsge);
                addr_of_mut!((*slot).nholds).write(1);
                addr_of_mut!((*slot).run).write(Some(PageRunMap { pd, at: 1, n }));
            }
            Ok(())
        })
    }

    /// Builds an RDMA Read's work request whose scatter/gather list is the
    /// bytes `[off, off + len)` of `sinks` (counted from the first page's
    /// first byte): one entry per page they touch, at most [`MAX_SGE`],
    /// all held by one reference on `sinks` (no object or reference count
    /// per page). `EINVAL` for a range past the last page or over more
    /// pages than that.
    pub fn with_sinks(
        handler: H,
        sinks: &Arc<PageSinks>,
        off: usize,
        len: usize,
    ) -> Result<Arc<Self>> {
        let mut list = [const { core::mem::MaybeUninit::<bindings::ib_sge>::uninit() }; MAX_SGE];
        let nsge = sinks.page_sges(off, len, &mut list)?;
        let hold = Hold::Sinks {
            _sinks: sinks.clone(),
        };
        Self::build(handler, move |slot: *mut Self| -> Result {
            // SAFETY: `slot` is valid for writes of a `Self` and not shared
            // (`build`'s guarantee); `nsge <= MAX_SGE` entries fit `sges`,
            // and `page_sges` wrote the first `nsge` of `list`.
            // The pages stay mapped while the hold written last keeps
            // `sinks`.
            unsafe {
                let sges = addr_of_mut!((*slot).sges).cast::<bindings::ib_sge>();
                core::ptr::copy_nonoverlapping(list.as_ptr().cast(), sges, nsge);
                addr_of_mut!((*slot).holds).cast::<Hold>().write(hold);
                addr_of_mut!((*slot).nsge).write(nsge);
                addr_of_mut!((*slot).nholds).write(1);
                addr_of_mut!((*slot).run).write(None);
            }
            Ok(())
        })
    }

    /// Builds a work request in a kept allocation of the handler's pool, or
    /// a new one: `fill` writes the scatter/gather list, `nsge`, `nholds`,
    /// `run` and the holds or run pages (the type invariant's part for them),
    /// or returns an error with nothing of its own left initialised; then
    /// the completion entry, the link and the handler are written here.
    ///
    /// `fill` is called with a pointer valid for writes of a `Self`, to an
    /// allocation not shared yet.
    #[inline(always)]
    fn build(handler: H, fill: impl FnOnce(*mut Self) -> Result) -> Result<Arc<Self>> {
        // A kept allocation if the handler's pool has one (taken before
        // the handler moves into the closure).
        let shell = handler.pool().and_then(WrPool::take);
        Self::build_in(shell, handler, fill)
    }

    /// A work request and its reference count fit the 2 KiB kmalloc class
    /// ([`MAX_SGE`] is as large as that allows): checked for each handler
    /// type a request is built for.
    const FITS_2K: () = assert!(size_of::<Self>() + 16 <= 2048);

    /// [`Self::build`] in `shell`, a kept allocation, if there is one.
    #[inline(always)]
    fn build_in(
        shell: Option<Shell<H>>,
        handler: H,
        fill: impl FnOnce(*mut Self) -> Result,
    ) -> Result<Arc<Self>> {
        let () = Self::FITS_2K;
        let init = move |slot: *mut Self| -> Result {
            fill(slot)?;
            // SAFETY: `slot` is the allocation `Arc::pin_init` made or a
            // kept shell, valid for writes of a `Self` and not shared yet.
            unsafe {
                Opaque::cast_into(addr_of_mut!((*slot).cqe)).write(bindings::ib_cqe {
                    done: Some(done::<H>),
                });
                addr_of_mut!((*slot).ahead).write(UnsafeCell::new(None));
                addr_of_mut!((*slot).handler).write(handler);
            }
            Ok(())
        };
        if let Some(shell) = shell {
            let slot = Arc::into_raw(shell).cast::<Self>().cast_mut();
            // SAFETY: A shell from the pool is the only reference to its
            // allocation (the pool's invariant), which holds a `Self`'s
            // room (`MaybeUninit<Self>` has its layout): `slot` is valid
            // for writes of a `Self` and not shared, as `init` requires.
            return match init(slot) {
                // SAFETY: `init` initialised every field (see below), so
                // the allocation, one reference still, holds a `Self`.
                // INVARIANT: as listed below.
                Ok(()) => Ok(unsafe { Arc::from_raw(slot) }),
                Err(e) => {
                    // SAFETY: Nothing is initialised (`fill` dropped what
                    // it wrote): the reference is given back as the shell
                    // it was, which frees the memory and drops nothing.
                    drop(unsafe { Arc::<MaybeUninit<Self>>::from_raw(slot.cast()) });
                    Err(e)
                }
            };
        }
        // SAFETY: On `Ok` the closure initialised every field: what `fill`
        // writes (the scatter/gather list, `nsge`, `nholds`, `run`, the holds or
        // the run's pages; the rest is `MaybeUninit`), `cqe` with
        // `done::<H>`, the link and `handler`. On an error `fill` dropped
        // what it had written. Nothing is pinned in a way the writes could
        // break: the slot is not yet shared.
        // INVARIANT: as just listed.
        let init = unsafe { pin_init_from_closure(init) };
        Arc::pin_init(init, GFP_KERNEL)
    }

    /// Drops a reference to a completed work request; the last one gives
    /// its allocation to the handler's pool, if it has one, after dropping
    /// what the request held (its buffers and pages, then its handler),
    /// but for its first buffer, which the handler takes back
    /// ([`CompletionHandler::recycle_buf`]).
    fn release(wr: Arc<Self>) {
        if wr.handler.pool().is_none() {
            return;
        }
        let Some(unique) = Arc::into_unique_or_drop(wr) else {
            return;
        };
        let raw = Arc::into_raw(Arc::from(unique)).cast_mut();
        // SAFETY: `raw` is the only reference to a live request (it came
        // from the `UniqueArc`). Its fields are dropped here as its drop
        // would: a page run's pages and the first `nholds` holds (the type
        // invariant; a first buffer is moved out instead, and handed to the
        // handler once the pool has the allocation), the link
        // (empty after a completion, dropped all the same) and the handler,
        // which is moved out first and dropped last, after the pool it
        // names (which it may keep alive) has taken the allocation. Of the
        // rest, `cqe`, `sges` and `nsge` need no drop. Then the allocation
        // is retyped as `MaybeUninit<Self>`, which has the layout of
        // `Self`, so its `Arc` is the same allocation with the same count
        // of one: the only reference, as `put` requires.
        unsafe {
            let handler = core::ptr::read(addr_of_mut!((*raw).handler));
            let n = (*raw).nholds();
            (*raw).release_run();
            let holds = addr_of_mut!((*raw).holds).cast::<Hold>();
            // A first buffer goes back to the handler by value (moved out,
            // so it is not dropped below): no reference taken and dropped
            // to recycle it.
            let recycled = if n > 0 && matches!(&*holds, Hold::Buf(_)) {
                match core::ptr::read(holds) {
                    Hold::Buf(buf) => Some(buf),
                    // Not reached (just matched); forgotten, not dropped,
                    // as it stays in place to be dropped below.
                    other => {
                        core::mem::forget(other);
                        None
                    }
                }
            } else {
                None
            };
            let moved = usize::from(recycled.is_some());
            core::ptr::drop_in_place(core::ptr::slice_from_raw_parts_mut(
                holds.add(moved),
                n - moved,
            ));
            // Empty after a completion: checked here, so that the drop
            // glue (a call) runs only for a link left behind.
            let ahead = &mut *UnsafeCell::raw_get(addr_of_mut!((*raw).ahead));
            if ahead.is_some() {
                drop(ahead.take());
            }
            let empty = Arc::<MaybeUninit<Self>>::from_raw(raw.cast_const().cast());
            match handler.pool() {
                Some(pool) => pool.put(empty),
                None => drop(empty),
            }
            if let Some(buf) = recycled {
                handler.recycle_buf(buf);
            }
            drop(handler);
        }
    }

    /// The scatter/gather entry of `entry` and what holds its memory,
    /// after checking that a buffer's range lies within it. Inlined into
    /// the builder's loop, so that the hold is written into its slot
    /// rather than returned through the stack.
    #[inline(always)]
    fn entry(entry: SgEntry) -> Result<(bindings::ib_sge, Hold)> {
        match entry {
            SgEntry::Buf(seg) => {
                let sge = seg.buf.sge(seg.offset, seg.len)?;
                Ok((sge, Hold::Buf(seg.buf)))
            }
            SgEntry::Page(page) => Ok((page.sge(), Hold::Page { _mapping: page })),
        }
    }

    /// Links `next` as the request whose completion comes with this one's
    /// (see the field `ahead`), returning the one linked before.
    ///
    /// # Safety
    ///
    /// Nothing else accesses the link meanwhile: called before the work
    /// request is posted, by its only poster; by the completion of the
    /// chain's signaled request; or, when that request was not posted, by
    /// the thread that tried, before it hands the chain on.
    pub(in crate::rust) unsafe fn set_ahead(&self, next: Option<Arc<Self>>) -> Option<Arc<Self>> {
        // SAFETY: Nothing else accesses `ahead` then (the caller's
        // requirement).
        unsafe { core::mem::replace(&mut *self.ahead.get(), next) }
    }

    /// The request linked behind this one (see [`Self::set_ahead`]).
    ///
    /// # Safety
    ///
    /// As [`Self::set_ahead`].
    pub(in crate::rust) unsafe fn next_ahead(&self) -> Option<Arc<Self>> {
        // SAFETY: By the caller's requirement.
        unsafe { (*self.ahead.get()).clone() }
    }

    /// How many holds are initialised.
    fn nholds(&self) -> usize {
        self.nholds.min(self.nsge).min(MAX_SGE)
    }

    /// How many scatter/gather entries.
    pub fn sge_count(&self) -> usize {
        self.nsge
    }

    /// What holds the memory of each scatter/gather entry (nothing for a
    /// page run whose pages the request holds itself; a Reply's page array
    /// for one from it).
    fn holds(&self) -> &[Hold] {
        // SAFETY: `holds[..nholds()]` are initialised and `nholds() <=
        // MAX_SGE` (type invariant).
        unsafe { core::slice::from_raw_parts(self.holds.as_ptr().cast::<Hold>(), self.nholds()) }
    }

    /// Unmaps and puts the pages of a page run, if this request is one;
    /// afterwards it is not a run. Called before the holds are dropped.
    ///
    /// # Safety
    ///
    /// No posted work request names the pages any more: this one
    /// completed (or was never posted) and is being dropped or released.
    #[inline(always)]
    unsafe fn release_run(&mut self) {
        let Some(run) = self.run.take() else {
            return;
        };
        let held = self.run_pages.as_ptr().cast::<*mut bindings::page>();
        // SAFETY: `sges[at..at + n]`, within the list, map the run's pages
        // on `pd`'s device and `run_pages[..n]` are those pages, on which
        // this request took a reference each (type invariant); nothing
        // uses the mappings any more (the caller's requirement); `run` is
        // now `None`, so this runs once.
        unsafe {
            unmap_page_run(
                run.pd.device_ptr(),
                held,
                self.sges.as_ptr().cast::<bindings::ib_sge>().add(run.at),
                run.n,
            )
        };
    }

    /// The shared buffers of the scatter/gather list (not its pages).
    fn bufs(&self) -> impl Iterator<Item = &Arc<MappedBuf>> {
        self.holds().iter().filter_map(|h| match h {
            Hold::Buf(b) => Some(b),
            Hold::Page { .. } | Hold::Sinks { .. } => None,
        })
    }

    /// The scatter/gather list, for a work request's `sg_list`.
    fn sg_list(&self) -> *mut bindings::ib_sge {
        self.sges.as_ptr().cast::<bindings::ib_sge>().cast_mut()
    }

    /// The first scatter/gather entry, if there is one.
    fn first_sge(&self) -> Option<bindings::ib_sge> {
        let first = self.sges.first().filter(|_| self.nsge > 0)?;
        // SAFETY: `sges[..nsge]` are initialised (type invariant) and
        // `nsge > 0`.
        Some(unsafe { first.assume_init() })
    }

    /// Hands one reference of `wr` to the queue and calls `post` with the
    /// request and its completion entry; the completion (`done`) consumes
    /// that reference, or this function reclaims it when `post` fails
    /// (non-zero). The one place where posted requests change owner.
    pub(crate) fn post_with(
        wr: Arc<Self>,
        post: impl FnOnce(&Self, *mut bindings::ib_cqe) -> kernel::ffi::c_int,
    ) -> Result {
        Self::post_with_back(wr, post).map_err(|(e, _)| e)
    }

    /// As [`Self::post_with`], giving the reference back when `post`
    /// fails.
    fn post_with_back(
        wr: Arc<Self>,
        post: impl FnOnce(&Self, *mut bindings::ib_cqe) -> kernel::ffi::c_int,
    ) -> core::result::Result<(), (Error, Arc<Self>)> {
        let raw = Arc::into_raw(wr);
        live::inc(live::Kind::PostedWr);
        // SAFETY: `raw` came from `into_raw` above, so it is live until the
        // reference is consumed below or by the completion.
        let this = unsafe { &*raw };
        let rc = post(this, Opaque::cast_into(&this.cqe));
        if rc == 0 {
            return Ok(());
        }
        live::dec(live::Kind::PostedWr);
        // SAFETY: The work request was not posted, so no completion will
        // consume the reference that `into_raw` produced.
        let wr = unsafe { Arc::from_raw(raw) };
        Err((Error::from_errno(rc), wr))
    }

    /// Whether the request may not be posted as a Receive: the device
    /// would write into memory mapped for it to read, or into a buffer
    /// the CPU is reading.
    fn unpostable_as_recv(&self) -> bool {
        self.dirs_to_device() || self.bufs().any(|b| b.cpu_holds())
    }

    fn dirs_to_device(&self) -> bool {
        // A page run is mapped for the device to read.
        self.run.is_some()
            || self.holds().iter().any(|h| match h {
                Hold::Buf(b) => b.dir == DmaDir::ToDevice,
                // Mapped for the device to read.
                Hold::Page { .. } => true,
                // Mapped for the device to write.
                Hold::Sinks { .. } => false,
            })
    }

    /// For an RDMA Read into a remotely writable sink: the key to
    /// invalidate when it completes. Such a Read must have exactly one
    /// segment (one key to invalidate; iWARP allows one sink STag per Read
    /// anyway) and follow a registration (the Read consumes it), so a key
    /// is never used twice.
    fn remote_sink(&self) -> Result<Option<u32>> {
        let mut remote = self.bufs().filter(|b| b.sink_registers_per_use());
        let Some(b) = remote.next() else {
            return Ok(None);
        };
        if remote.next().is_some() || self.nsge != 1 {
            return Err(EINVAL);
        }
        if !b.sink_armed() {
            return Err(EINVAL);
        }
        Ok(b.sink_key())
    }

    /// Marks the remotely writable sink of this work request registered
    /// (`true`) or its registration consumed by the Read (`false`).
    fn set_sink_armed(&self, armed: bool) {
        for b in self.bufs() {
            if let Some(m) = b.mr.as_ref().filter(|m| m.remote) {
                m.armed.store(armed, Relaxed);
            }
        }
    }

    /// The buffer of the `i`th scatter/gather entry, if it is a buffer's
    /// range (not a mapped page).
    pub fn buf(&self, i: usize) -> Option<&Arc<MappedBuf>> {
        match self.holds().get(i) {
            Some(Hold::Buf(b)) => Some(b),
            _ => None,
        }
    }
}

#[pinned_drop]
impl<H: CompletionHandler> PinnedDrop for WorkRequest<H> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: `holds[..nholds()]` are initialised (type invariant) and
        // dropped once, here; nothing reads them after; a page run's pages
        // are no longer named by a posted request (the last reference of
        // a request goes after its completion, or it was never posted).
        // Nothing is moved: neither `holds` nor `run` is structurally
        // pinned, and the holds are dropped in place.
        unsafe {
            let this = Pin::into_inner_unchecked(self);
            let n = this.nholds();
            this.release_run();
            core::ptr::drop_in_place(core::ptr::slice_from_raw_parts_mut(
                this.holds.as_mut_ptr().cast::<Hold>(),
                n,
            ));
        }
    }
}

/// Completion callback of every work request of handler type `H`.
///
/// # Safety
///
/// Called by the RDMA core with a valid completion whose `wr_cqe` is the
/// `cqe` of a `WorkRequest<H>` posted by `post_send`/`post_recv`, which
/// turned one reference into the raw pointer this consumes.
unsafe extern "C" fn done<H: CompletionHandler>(
    _cq: *mut bindings::ib_cq,
    wc: *mut bindings::ib_wc,
) {
    // SAFETY: `wc` is valid for the duration of the callback; posted work
    // requests carry a `wr_cqe`.
    let w = unsafe { &*wc };
    // SAFETY: As above.
    let cqe = unsafe { w.__bindgen_anon_1.wr_cqe }.cast::<Opaque<bindings::ib_cqe>>();
    // SAFETY: By the function's safety requirement `cqe` is the `cqe` field
    // of a `WorkRequest<H>`.
    let wr_ptr = unsafe { kernel::container_of!(cqe, WorkRequest<H>, cqe) };
    // SAFETY: Posting turned one reference into this pointer; it is consumed
    // exactly once, here.
    let wr = unsafe { Arc::from_raw(wr_ptr.cast_const()) };
    live::dec(live::Kind::PostedWr);
    let mut completion = WorkCompletion::of_receive(w);
    if !completion.is_ok() {
        // A Read that did not complete may not have invalidated its sink:
        // its key may still be valid, so the sink is never reused.
        wr.set_sink_armed(true);
    }
    // SAFETY: The completion comes after the post, after which the poster
    // no longer touches the links.
    let ahead = unsafe { wr.set_ahead(None) };
    // The unsignaled requests linked ahead of it (its chain's, or a
    // batch's Sends) completed with it: this completion accounts for them
    // all.
    completion.covers = complete_ahead(ahead, &completion).saturating_add(1);
    wr.handler.complete(&wr, &completion);
    WorkRequest::release(wr);
}

/// Runs the handlers of the unsignaled work requests `ahead` of a
/// signaled one that completed with `wc` ([`complete_chain`], each told
/// it covers none but itself), and returns how many there were. Most
/// completions have none ahead: no call then, and no completion copied.
#[inline(always)]
pub(in crate::rust) fn complete_ahead<H: CompletionHandler>(
    ahead: Option<Arc<WorkRequest<H>>>,
    wc: &WorkCompletion,
) -> u32 {
    match ahead {
        Some(first) => complete_chain(Some(first), &WorkCompletion { covers: 0, ..*wc }),
        None => 0,
    }
}

/// Runs the handlers of a chain's unsignaled work requests from `first`
/// on, in posting order, with `wc`: they completed (or were flushed) with
/// the signaled one behind them. Returns how many there were.
pub(in crate::rust) fn complete_chain<H: CompletionHandler>(
    first: Option<Arc<WorkRequest<H>>>,
    wc: &WorkCompletion,
) -> u32 {
    let mut next = first;
    let mut n = 0u32;
    while let Some(wr) = next {
        // SAFETY: Only the completion of the chain's signaled request, or
        // a flush after the drain, walks the chain, once.
        next = unsafe { wr.set_ahead(None) };
        wr.handler.complete(&wr, wc);
        WorkRequest::release(wr);
        n = n.saturating_add(1);
    }
    n
}

/// Completes, as flushed, a chain of unsignaled work requests left posted
/// when the post of their signaled one failed; `first` came from
/// `Arc::into_raw` of a `WorkRequest<H>`.
///
/// # Safety
///
/// `first` is such a pointer, consumed once, after the queue pair the
/// requests were posted on was drained.
unsafe fn flush_parked<H: CompletionHandler>(first: *const core::ffi::c_void) {
    // SAFETY: By the function's requirement.
    let first = unsafe { Arc::from_raw(first.cast::<WorkRequest<H>>()) };
    // Each accounts for itself: the signaled request was not posted.
    complete_chain(Some(first), &WorkCompletion::flushed());
}

impl Endpoint {
    /// Moves the queue pair to the error state: posted work requests are
    /// flushed and the peer's requests are no longer answered. Dropping
    /// the endpoint afterwards still disconnects and drains as usual.
    pub fn force_error(&self) -> Result {
        // SAFETY: The queue pair is live while `self` is (its type
        // invariant); modifying its state is allowed from process context.
        to_result(unsafe {
            let mut attr: bindings::ib_qp_attr = core::mem::zeroed();
            attr.qp_state = bindings::ib_qp_state_IB_QPS_ERR;
            bindings::ib_modify_qp(
                self.qp_ptr(),
                &mut attr,
                bindings::ib_qp_attr_mask_IB_QP_STATE as i32,
            )
        })
    }
}
