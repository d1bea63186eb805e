// SPDX-License-Identifier: GPL-2.0

//! A connection's Receives as receive contexts whose owner decides when
//! each is posted again (C `svc_rdma_recv_ctxt`: `rc_cqe`, `rc_recv_buf`):
//! a server's, whose Calls are worked on by other threads after the
//! completion, in place in their buffers, and whose Receives go back to
//! the device when those are done.
//!
//! Each context is made once with the connection: its completion entry
//! and a buffer DMA-mapped for its life. A Receive's work request is built
//! on the stack when it is posted (providers copy it), several as one
//! chain with one doorbell. A completion hands the owner the context's
//! index and the completion; nothing is allocated, locked or counted by
//! reference per Receive. A buffer the CPU holds (lent to a request) is
//! never posted.
//!
//! The contexts are a field of their owner ([`RingIn`]), which lives in an
//! `Arc` and drains its endpoint before it drops them: no completion
//! outlives them. Contexts still posted when they are dropped (an
//! endpoint that was not drained) are leaked, and one line says so.

use crate::rust::bindings;
use crate::rust::module::live;
use crate::rust::rdma::ring_owner::{leak_if_posted, owner_of, RingIn};
use crate::rust::rdma::verbs::{DmaDir, Endpoint, MappedBuf, WorkCompletion, RECV_BATCH_MAX};
use core::marker::PhantomData;
use core::mem::MaybeUninit;
use kernel::alloc::KVec;
use kernel::error::to_result;
use kernel::prelude::*;
use kernel::sync::atomic::{Atomic, Relaxed};
use kernel::sync::Arc;
use kernel::types::Opaque;

/// What a transport does when one of its Receives completes.
pub trait RecvSlotsOwner: Send + Sync + Sized + RingIn<RecvSlots<Self>> {
    /// Receive `slot` completed with `wc` (or was flushed). Its buffer
    /// holds `wc.byte_len` bytes when it succeeded; it is posted again
    /// only when the owner asks ([`RecvSlots::post`]). Runs on the receive
    /// CQ's poller.
    fn received(&self, slot: usize, wc: &WorkCompletion);
}

/// One receive context.
///
/// # Invariants
///
/// `home` names the contexts' [`RecvSlots`] once one of them was posted
/// ([`RecvSlots::post`] writes it before each post; the contexts do not
/// move while any is posted, their owner being pinned in an `Arc`).
/// `cqe.done` is `recv_done::<O>`; `buf` is mapped for the device to
/// write, on the endpoint's device, for the context's life.
struct Ctxt<O: RecvSlotsOwner> {
    cqe: Opaque<bindings::ib_cqe>,
    index: usize,
    home: Atomic<*const RecvSlots<O>>,
    buf: Arc<MappedBuf>,
}

/// The receive contexts of a connection.
///
/// # Invariants
///
/// `posted` counts the contexts posted and not completed. The vector is
/// not resized after [`RecvSlots::new`].
pub struct RecvSlots<O: RecvSlotsOwner> {
    ctxts: KVec<Ctxt<O>>,
    posted: Atomic<u32>,
    _owner: PhantomData<fn() -> O>,
}

// SAFETY: The contexts are immutable after `new`, or atomic.
unsafe impl<O: RecvSlotsOwner> Send for RecvSlots<O> {}
// SAFETY: As above.
unsafe impl<O: RecvSlotsOwner> Sync for RecvSlots<O> {}

impl<O: RecvSlotsOwner> RecvSlots<O> {
    /// `n` receive contexts with buffers of `buf_len` bytes mapped on
    /// `ep`'s device, none posted.
    pub fn new(ep: &Endpoint, n: usize, buf_len: usize) -> Result<Self> {
        let mut ctxts = KVec::with_capacity(n, GFP_KERNEL)?;
        for index in 0..n {
            ctxts.push(
                Ctxt {
                    cqe: Opaque::new(bindings::ib_cqe {
                        done: Some(recv_done::<O>),
                    }),
                    index,
                    home: Atomic::new(core::ptr::null()),
                    buf: ep.alloc_buf(buf_len, DmaDir::FromDevice)?,
                },
                GFP_KERNEL,
            )?;
        }
        Ok(Self {
            ctxts,
            posted: Atomic::new(0),
            _owner: PhantomData,
        })
    }

    /// How many contexts there are.
    pub fn len(&self) -> usize {
        self.ctxts.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.ctxts.is_empty()
    }

    /// Contexts posted and not completed.
    pub fn posted(&self) -> u32 {
        self.posted.load(Relaxed)
    }

    /// The buffer of context `slot`, to read what its Receive brought
    /// ([`MappedBuf::lend_received`]) between its completion and its next
    /// post.
    pub fn buf(&self, slot: usize) -> Option<&Arc<MappedBuf>> {
        self.ctxts.get(slot).map(|c| &c.buf)
    }

    /// Posts every context's Receive on `ep` (the first post of a
    /// connection's Receives).
    pub fn post_all(&self, ep: &Endpoint) -> Result {
        let mut batch = [0usize; RECV_BATCH_MAX];
        let mut at = 0;
        while at < self.ctxts.len() {
            let n = (self.ctxts.len() - at).min(RECV_BATCH_MAX);
            for (i, slot) in batch.iter_mut().take(n).enumerate() {
                *slot = at + i;
            }
            self.post_batch(ep, batch.get(..n).unwrap_or(&[]))?;
            at += n;
        }
        Ok(())
    }

    /// Posts the Receives of contexts `slots`, which are not posted, on
    /// `ep` (the endpoint their buffers are mapped for), at most
    /// [`RECV_BATCH_MAX`] at a time, each batch one chain. `EINVAL`, with
    /// that batch and the rest not posted, for an unknown context or a
    /// buffer the CPU holds; `ESHUTDOWN` once the endpoint's drain started.
    pub fn post(&self, ep: &Endpoint, slots: &[usize]) -> Result {
        for batch in slots.chunks(RECV_BATCH_MAX) {
            self.post_batch(ep, batch)?;
        }
        Ok(())
    }

    fn post_batch(&self, ep: &Endpoint, slots: &[usize]) -> Result {
        let mut sges = [const { MaybeUninit::<bindings::ib_sge>::uninit() }; RECV_BATCH_MAX];
        let mut list = [const { MaybeUninit::<bindings::ib_recv_wr>::uninit() }; RECV_BATCH_MAX];
        let sge_base = sges.as_mut_ptr().cast::<bindings::ib_sge>();
        let base = list.as_mut_ptr().cast::<bindings::ib_recv_wr>();
        let home = core::ptr::from_ref(self);
        let mut n = 0;
        for &slot in slots {
            let c = self.ctxts.get(slot).ok_or(EINVAL)?;
            if n >= RECV_BATCH_MAX || c.buf.cpu_holds() || c.buf.dir() != DmaDir::FromDevice {
                return Err(EINVAL);
            }
            let sge = c.buf.sge(0, c.buf.len())?;
            // INVARIANT: `home` is written before the post, always with
            // this value. The post orders it before the completion that
            // reads it.
            c.home.store(home, Relaxed);
            // SAFETY: `n < RECV_BATCH_MAX`: entries `n` of both arrays
            // exist.
            unsafe {
                sge_base.add(n).write(sge);
                base.add(n).write(bindings::ib_recv_wr {
                    // One past this entry; the last is unlinked below.
                    next: base.wrapping_add(n + 1),
                    __bindgen_anon_1: bindings::ib_recv_wr__bindgen_ty_1 {
                        wr_cqe: c.cqe.get(),
                    },
                    sg_list: sge_base.add(n),
                    num_sge: 1,
                });
            }
            n += 1;
        }
        let Some(last) = n.checked_sub(1) else {
            return Ok(());
        };
        // SAFETY: Entry `last` is written (above); it ends the list.
        unsafe { (*base.add(last)).next = core::ptr::null_mut() };
        let count = u32::try_from(n)?;
        self.posted.fetch_add(count, Relaxed);
        live::add(live::Kind::PostedWr, n);
        let mut bad: *const bindings::ib_recv_wr = base;
        let rc = match ep.start_post() {
            // SAFETY: The queue pair is live while `posting` is held; the
            // first `n` entries of `list` are written and linked, the last
            // ending the list; their entries name buffers mapped for the
            // device to write and completion entries that live as long as
            // these contexts, which outlive their posted Receives.
            Ok(posting) => unsafe {
                bad = core::ptr::null();
                bindings::rpcrdma_rs_ib_post_recv(posting.qp(), base, &mut bad)
            },
            // None posted (`bad` is the first).
            Err(e) => e.to_errno(),
        };
        if rc == 0 {
            return Ok(());
        }
        // Those before the one that failed were posted.
        let went = if bad.is_null() {
            0
        } else {
            // SAFETY: `bad` points into `list`.
            usize::try_from(unsafe { bad.offset_from(base) }).unwrap_or(0)
        };
        let not = n.saturating_sub(went);
        self.posted.fetch_sub(u32::try_from(not)?, Relaxed);
        live::sub(live::Kind::PostedWr, not);
        to_result(rc)
    }
}

impl<O: RecvSlotsOwner> Drop for RecvSlots<O> {
    fn drop(&mut self) {
        // The owner drains its endpoint first.
        // INVARIANT: never freed while the device may write them.
        let posted = self.posted.load(Relaxed);
        leak_if_posted(&mut self.ctxts, posted, "receive");
    }
}

/// Completion of a Receive posted through [`RecvSlots::post`].
///
/// # Safety
///
/// Called by the RDMA core, on the receive CQ's poller, with a valid
/// completion whose `wr_cqe` is the `cqe` of a posted context of a
/// `RecvSlots<O>`.
unsafe extern "C" fn recv_done<O: RecvSlotsOwner>(
    _cq: *mut bindings::ib_cq,
    wc: *mut bindings::ib_wc,
) {
    // SAFETY: `wc` is valid for the callback; posted work requests carry a
    // `wr_cqe`.
    let (w, cqe) = unsafe { (&*wc, (*wc).__bindgen_anon_1.wr_cqe) };
    // SAFETY: By the function's requirement the entry is a posted
    // context's, which outlives its Receive.
    let c =
        unsafe { &*kernel::container_of!(cqe.cast::<Opaque<bindings::ib_cqe>>(), Ctxt<O>, cqe) };
    // SAFETY: Written before the post (type invariant); the contexts
    // outlive their posted Receives, and their owner with them.
    let slots = unsafe { &*c.home.load(Relaxed) };
    slots.posted.fetch_sub(1, Relaxed);
    live::dec(live::Kind::PostedWr);
    // SAFETY: The contexts are the `RING_OFFSET` field of their owner,
    // which lives in an `Arc` at least as long as they do (`RingIn`).
    let owner = unsafe { &*owner_of::<O, RecvSlots<O>>(slots) };
    owner.received(c.index, &WorkCompletion::of(w));
}
