// SPDX-License-Identifier: GPL-2.0

//! A connection's Receives as preallocated receive contexts (C
//! `rpcrdma_rep`): each is made once, with its completion entry, its
//! `ib_recv_wr` over its own scatter/gather entry and a buffer DMA-mapped
//! for its life. Its completion hands the received bytes to the owner
//! where the device put them, then queues the context to be posted again;
//! every `batch`th completion posts the queued ones as one chain with one
//! doorbell (C `rpcrdma_post_recvs`). No lock, allocation or reference
//! count is taken per Receive: the queue of contexts waiting to be posted
//! again belongs to the receive CQ's poller, which runs one completion at
//! a time.
//!
//! The ring is a field of the object that owns the connection
//! ([`HasRecvRing`]), which lives in an `Arc`: a completion finds it by the
//! field's offset (`ring_owner`) and lends it to [`RecvRingOwner::received`] as an
//! [`ArcBorrow`]. The owner drains its endpoint before it is dropped, so
//! no completion outlives it; contexts still posted when the ring is
//! dropped on an endpoint that was not drained are leaked, and it says so.

use crate::rust::bindings;
use crate::rust::kext::percpu::PerCpuCount;
use crate::rust::rdma::ring_owner::{leak_if_posted, owner_of, posted_count, RingIn};
use crate::rust::rdma::verbs::{DmaDir, Endpoint, MappedBuf, WorkCompletion};
use core::cell::UnsafeCell;
use kernel::alloc::KVec;
use kernel::error::to_result;
use kernel::prelude::*;
use kernel::sync::atomic::{Atomic, Relaxed};
use kernel::sync::{Arc, ArcBorrow};
use kernel::types::Opaque;

/// What a transport does with what its Receives bring.
pub trait RecvRingOwner: Send + Sync + Sized {
    /// A Receive completed with `bytes` (where the device put them), and
    /// the rkey the peer invalidated with it, if any. Returns whether the
    /// context is to be posted again (not while the connection closes).
    /// `VARIANT` is the ring's, fixed when it was made ([`RecvRing::new`]):
    /// an owner with two ways of handling its messages has each compiled
    /// on its own, picked by the completion function the ring's contexts
    /// name, not by a branch per message; an owner with one ignores it.
    fn received<const VARIANT: bool>(
        this: ArcBorrow<'_, Self>,
        bytes: &[u8],
        inv_rkey: Option<u32>,
    ) -> bool;

    /// A Receive completed in error, or was flushed: the connection is
    /// lost or closing. The context is not posted again.
    fn failed(&self, wc: &WorkCompletion);

    /// A completed Receive could not be handed over or posted again
    /// (`ESHUTDOWN` once the drain started): the connection is left with
    /// fewer Receives.
    fn repost_failed(&self, e: Error);

    /// The endpoint whose queue pair the Receives are posted on.
    fn endpoint(&self) -> &Endpoint;
}

/// An owner of a [`RecvRing`] held as one of its fields ([`RingIn`]:
/// declared with [`impl_ring_in!`](crate::rust::rdma::ring_owner::impl_ring_in)).
pub trait HasRecvRing: RecvRingOwner + RingIn<RecvRing<Self>> {}

impl<O: RecvRingOwner + RingIn<RecvRing<O>>> HasRecvRing for O {}

/// One receive context.
///
/// # Invariants
///
/// Once the ring's Receives are posted ([`RecvRing::post_all`]), `wr`
/// names `cqe` and `sge`, which names `buf`, and `ring` the ring. `wr` is
/// written only while the context is not posted, by the receive CQ's
/// poller (or before the first post). No reference to `buf` leaves the
/// ring: the CPU reaches it only on the poller, between the context's
/// completion and its next post.
struct Ctxt<O: RecvRingOwner> {
    cqe: Opaque<bindings::ib_cqe>,
    wr: UnsafeCell<bindings::ib_recv_wr>,
    sge: UnsafeCell<bindings::ib_sge>,
    ring: UnsafeCell<*const RecvRing<O>>,
    buf: Arc<MappedBuf>,
}

/// Contexts completed and waiting to be posted again, linked through their
/// work requests' `next`, oldest first.
struct Held {
    first: *mut bindings::ib_recv_wr,
    last: *mut bindings::ib_recv_wr,
    n: u32,
}

/// The receive contexts of one connection.
///
/// # Invariants
///
/// `ctxts` is never resized after `new`. `held` is accessed only by the
/// receive CQ's poller, one completion at a time, and after the drain by
/// the owner; the contexts it links are not posted.
pub struct RecvRing<O: RecvRingOwner> {
    ctxts: KVec<Ctxt<O>>,
    held: UnsafeCell<Held>,
    /// Contexts posted and not completed.
    posted: PerCpuCount,
    started: Atomic<bool>,
    batch: u32,
}

// SAFETY: Contexts move between the device and the poller through posts
// and completions; `held` is the poller's alone (type invariants).
unsafe impl<O: RecvRingOwner> Send for RecvRing<O> {}
// SAFETY: As above.
unsafe impl<O: RecvRingOwner> Sync for RecvRing<O> {}

impl<O: HasRecvRing> RecvRing<O> {
    /// `n` receive contexts with buffers of `buf_len` bytes mapped on
    /// `ep`'s device, posted again `batch` at a time, whose messages go to
    /// the owner's [`RecvRingOwner::received`] of `variant`.
    pub fn new(ep: &Endpoint, n: u32, buf_len: usize, batch: u32, variant: bool) -> Result<Self> {
        if n == 0 || batch == 0 || batch > n {
            return Err(EINVAL);
        }
        let done: RecvDone = if variant {
            recv_done::<O, true>
        } else {
            recv_done::<O, false>
        };
        let mut ctxts = KVec::with_capacity(n as usize, GFP_KERNEL)?;
        for _ in 0..n {
            let ctxt = Ctxt {
                cqe: Opaque::new(bindings::ib_cqe { done: Some(done) }),
                // SAFETY: All-zero is a valid, empty `ib_recv_wr`.
                wr: UnsafeCell::new(unsafe { core::mem::zeroed() }),
                // SAFETY: All-zero is a valid `ib_sge`.
                sge: UnsafeCell::new(unsafe { core::mem::zeroed() }),
                ring: UnsafeCell::new(core::ptr::null()),
                buf: ep.alloc_buf(buf_len, DmaDir::FromDevice)?,
            };
            // Room was reserved: never allocates.
            ctxts.push(ctxt, GFP_KERNEL)?;
        }
        // INVARIANT: nothing is posted or held.
        Ok(Self {
            ctxts,
            held: UnsafeCell::new(Held {
                first: core::ptr::null_mut(),
                last: core::ptr::null_mut(),
                n: 0,
            }),
            posted: PerCpuCount::new()?,
            started: Atomic::new(false),
            batch,
        })
    }

    /// Posts every context, once: the ring is in its owner now, where it
    /// stays, so the contexts learn where it is. The queue pair takes
    /// Receives from its INIT state on.
    pub fn post_all(&self, ep: &Endpoint) -> Result {
        if self.started.xchg(true, Relaxed) {
            return Err(EINVAL);
        }
        let ring: *const Self = self;
        for c in self.ctxts.iter() {
            let sge = c.buf.sge(0, c.buf.len())?;
            // SAFETY: Nothing is posted yet, so the contexts are the
            // caller's alone. INVARIANT: the work request names the
            // context's entry and list, the entry its buffer.
            unsafe {
                *c.ring.get() = ring;
                *c.sge.get() = sge;
                let wr = &mut *c.wr.get();
                wr.__bindgen_anon_1.wr_cqe = Opaque::cast_into(&c.cqe);
                wr.sg_list = c.sge.get();
                wr.num_sge = 1;
                // SAFETY: As above: the poller does not run before a post.
                self.hold(wr);
            }
        }
        // SAFETY: Nothing is posted, so no poller runs: the held list is
        // this thread's.
        unsafe { self.post_held(ep) }
    }

    /// Queues `wr`, a completed context's, to be posted again.
    ///
    /// # Safety
    ///
    /// The caller is the ring's poller (or nothing is posted), and `wr`'s
    /// context is not posted or held.
    unsafe fn hold(&self, wr: *mut bindings::ib_recv_wr) {
        // SAFETY: The held list is the caller's (requirement).
        let held = unsafe { &mut *self.held.get() };
        // SAFETY: `wr` is a context's, not posted: nothing else reads it.
        unsafe { (*wr).next = core::ptr::null_mut() };
        match held.last.is_null() {
            true => held.first = wr,
            // SAFETY: `last` is a held context's, not posted.
            false => unsafe { (*held.last).next = wr },
        }
        held.last = wr;
        held.n = held.n.wrapping_add(1);
    }

    /// Posts the held contexts as one chain. On a failure those from the
    /// failed one on stay held.
    ///
    /// # Safety
    ///
    /// As [`Self::hold`].
    unsafe fn post_held(&self, ep: &Endpoint) -> Result {
        // SAFETY: The held list is the caller's (requirement).
        let held = unsafe { &mut *self.held.get() };
        if held.n == 0 {
            return Ok(());
        }
        let posting = ep.start_post()?;
        let n = held.n;
        // Counted before the post: a completion may come before it returns.
        self.posted.add(i64::from(n));
        let mut bad: *const bindings::ib_recv_wr = core::ptr::null();
        // SAFETY: The chain links held contexts' work requests, each
        // naming its own entry and mapped buffer, which live as long as the
        // ring, which outlives its posted contexts (`HasRecvRing`).
        let rc = unsafe { bindings::rpcrdma_rs_ib_post_recv(posting.qp(), held.first, &mut bad) };
        drop(posting);
        if rc == 0 {
            *held = Held {
                first: core::ptr::null_mut(),
                last: core::ptr::null_mut(),
                n: 0,
            };
            return Ok(());
        }
        // Those ahead of `bad` were posted; the rest stay held.
        let mut posted = 0u32;
        let mut at: *const bindings::ib_recv_wr = held.first;
        while !at.is_null() && at != bad {
            posted = posted.wrapping_add(1);
            // SAFETY: A held context's work request.
            at = unsafe { (*at).next };
        }
        let unposted = n.wrapping_sub(posted);
        self.posted.add(-i64::from(unposted));
        held.first = bad.cast_mut();
        if bad.is_null() {
            held.last = core::ptr::null_mut();
        }
        held.n = unposted;
        to_result(rc)
    }

    /// Contexts posted and not completed.
    pub fn posted(&self) -> u32 {
        posted_count(&self.posted)
    }

    /// After `ep`'s queue pair was drained: forgets the held contexts (no
    /// poller runs any more, and they are never posted again).
    pub fn release_after_drain(&self, ep: &Endpoint) {
        if !ep.is_drained() {
            return;
        }
        // SAFETY: After the drain no completion runs and no post starts:
        // the held list is this thread's.
        let held = unsafe { &mut *self.held.get() };
        *held = Held {
            first: core::ptr::null_mut(),
            last: core::ptr::null_mut(),
            n: 0,
        };
    }
}

impl<O: RecvRingOwner> Drop for RecvRing<O> {
    fn drop(&mut self) {
        // The owner drains its endpoint first.
        // INVARIANT: never freed while the device may write them.
        let posted = posted_count(&self.posted);
        leak_if_posted(&mut self.ctxts, posted, "receive");
    }
}

/// The type of [`recv_done`], the completion function of a ring's
/// contexts.
type RecvDone = unsafe extern "C" fn(*mut bindings::ib_cq, *mut bindings::ib_wc);

/// Completion of a ring's Receive.
///
/// # Safety
///
/// Called by the RDMA core, on the receive CQ's poller, with a valid
/// completion whose `wr_cqe` is the `cqe` of a context of a `RecvRing<O>`
/// posted by [`RecvRing::post_all`] or by this function.
unsafe extern "C" fn recv_done<O: HasRecvRing, const VARIANT: bool>(
    _cq: *mut bindings::ib_cq,
    wc: *mut bindings::ib_wc,
) {
    // SAFETY: `wc` is valid for the callback; posted work requests carry a
    // `wr_cqe`.
    let (w, cqe) = unsafe { (&*wc, (*wc).__bindgen_anon_1.wr_cqe) };
    // SAFETY: By the function's requirement the entry is a context's.
    let c =
        unsafe { &*kernel::container_of!(cqe.cast::<Opaque<bindings::ib_cqe>>(), Ctxt<O>, cqe) };
    // SAFETY: Set before the first post, not written again; the ring
    // outlives its posted contexts.
    let ring = unsafe { &**c.ring.get() };
    ring.posted.add(-1);
    // SAFETY: The ring is the `RING_OFFSET` field of its owner, which lives
    // in an `Arc` at least as long as the ring (`RingIn`).
    let owner = unsafe { ArcBorrow::from_raw(owner_of::<O, RecvRing<O>>(ring)) };
    let done = WorkCompletion::of_receive(w);
    if !done.is_ok() {
        owner.failed(&done);
        return;
    }
    let inv_rkey = done.invalidated_rkey;
    let len = (done.byte_len as usize).min(c.buf.len());
    // SAFETY: The context completed and this is the ring's poller, which
    // alone reaches its buffer until it posts it again (type invariant).
    match unsafe {
        c.buf
            .with_received_held(len, |bytes| O::received::<VARIANT>(owner, bytes, inv_rkey))
    } {
        Ok(true) => {}
        Ok(false) => return,
        Err(e) => {
            // The bytes could not be lent (cannot happen to a Receive's
            // buffer, which only this poller reads): the context is not
            // posted again, which the owner hears of.
            owner.repost_failed(e);
            return;
        }
    }
    // SAFETY: This is the ring's poller, and the context completed.
    unsafe { ring.hold(c.wr.get()) };
    // SAFETY: As above.
    let held = unsafe { (*ring.held.get()).n };
    if held >= ring.batch {
        // SAFETY: As above.
        if let Err(e) = unsafe { ring.post_held(owner.endpoint()) } {
            owner.repost_failed(e);
        }
    }
}
