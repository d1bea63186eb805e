// SPDX-License-Identifier: GPL-2.0

//! A connection's Sends as a ring of preallocated send contexts (C
//! `rpcrdma_sendctx`, `rb_sc_ctxs` with `rb_sc_head` and `rb_sc_tail`).
//!
//! Each context is made once, with the connection: its completion entry,
//! its `ib_send_wr` pointing at its own scatter/gather list, and a Send
//! buffer of the negotiated inline size, DMA-mapped for its life
//! ([`SendRing::provision`]). Posting one takes no lock, no
//! allocation and no reference count: one sender at a time owns the head
//! of the ring (a [`SendRingHead`], which the transport keeps where its own
//! send serialization guards it), and one poller retires contexts at the
//! tail. A send queue completes in order, so the completion of a context
//! retires it and every context posted before it (those posted
//! unsignaled, [`SendCtxt::post`]); a ring full of posted contexts makes
//! the sender wait for completions, as C's `rpcrdma_sendctx_get_locked`
//! does.
//!
//! Contexts posted unsignaled after the last signaled one have no
//! completion to retire them if the queue pair is drained:
//! [`SendRing::release_after_drain`] retires them, as flushed.
//!
//! The ring is a field of the object that owns the connection
//! ([`HasSendRing`]); a completion finds that object from the ring by the
//! field's offset (`ring_owner`), and calls its [`SendRingOwner::retire`] for each
//! context retired. The owner drains its endpoint before it is dropped,
//! so no completion outlives it (a ring dropped with contexts posted on an
//! endpoint that was not drained is leaked instead, and says so).

use crate::rust::bindings;
use crate::rust::rdma::ring_owner::{leak_if_posted, owner_of, RingIn};
use crate::rust::rdma::verbs::{
    post_behind, DmaDir, Endpoint, MappedBuf, MappedPage, WorkCompletion, MAX_SGE,
};
use core::cell::UnsafeCell;
use kernel::alloc::KVec;
use kernel::error::to_result;
use kernel::prelude::*;
use kernel::sync::atomic::{Acquire, Atomic, Relaxed, Release};
use kernel::sync::Arc;
use kernel::types::Opaque;

/// What a transport keeps with each of its send contexts, and what it does
/// when they retire.
pub trait SendRingOwner: Send + Sync + Sized {
    /// Per-context state, written by the sender before the post and
    /// handed back at retirement (the send queue slots the Send holds, for
    /// example).
    type Data: Default + Send;

    /// A context retired: its Send, and every work request posted before
    /// it, left the send queue (completed or flushed). Runs on the send
    /// CQ's poller, or in [`SendRing::release_after_drain`].
    fn retire(&self, data: &mut Self::Data);

    /// A Send completed with an error other than a flush (the connection
    /// is lost); called before the contexts it retires.
    fn failed(&self, wc: &WorkCompletion);
}

/// An owner of a [`SendRing`] held as one of its fields ([`RingIn`]:
/// declared with [`impl_ring_in!`](crate::rust::rdma::ring_owner::impl_ring_in)).
pub trait HasSendRing: SendRingOwner + RingIn<SendRing<Self>> {}

impl<O: SendRingOwner + RingIn<SendRing<O>>> HasSendRing for O {}

/// One send context.
///
/// # Invariants
///
/// `cqe.done` is `ring_done::<O>`; `wr.wr_cqe` is `cqe` and `wr.sg_list`
/// is `sges`, once the ring has a head ([`SendRing::take_head`], which
/// also sets `ring`). `buf_sge` is the entry of all of `buf` (so its
/// length, a `u32`, is the buffer's), and the two `parts` together lie
/// within it. Every other field is written only by the holder of the
/// context: the sender between [`SendRing::next`] and the post, the
/// ring's completion side between the post and its retirement.
struct Ctxt<O: SendRingOwner> {
    cqe: Opaque<bindings::ib_cqe>,
    wr: UnsafeCell<bindings::ib_send_wr>,
    sges: UnsafeCell<[bindings::ib_sge; MAX_SGE]>,
    /// The ring, for its completion (set by `take_head`).
    ring: UnsafeCell<*const SendRing<O>>,
    /// Its place in the ring.
    pos: u32,
    /// The Send buffer, mapped for the device to read (set by
    /// [`SendRing::provision`], before the head exists). No reference to
    /// it leaves the ring: the CPU reaches it only through the holder of
    /// the context.
    buf: UnsafeCell<Option<Arc<MappedBuf>>>,
    /// The entry of all of `buf` (length 0 without one), set with it: the
    /// Send's entries for its parts are cut from it.
    buf_sge: UnsafeCell<bindings::ib_sge>,
    /// Where the Send's bytes are in `buf`: the first part, sent before
    /// `pages`, and the tail after them (written only by
    /// [`SendCtxt::filled`], which checks that they fit).
    parts: UnsafeCell<(usize, usize)>,
    /// Pages mapped for this Send alone, unmapped when it retires.
    pages: UnsafeCell<Option<KVec<MappedPage>>>,
    data: UnsafeCell<O::Data>,
}

/// A ring's state: made, its buffers being made, its buffers made, its
/// head taken (from then on the buffers are only read).
const NEW: u32 = 0;
const PROVISIONING: u32 = 1;
const READY: u32 = 2;
const HEAD: u32 = 3;

/// A ring of send contexts owned by `O`.
///
/// # Invariants
///
/// `ctxts` is never resized after `new`, so each context keeps its
/// address. `posted` and `retired` count contexts from the first: those
/// in `retired..posted` (modulo the ring's size, at most that many) are
/// posted and not retired, and belong to the completion side; the rest to
/// the sender. `posted` is written only by the holder of the head, inside
/// an [`Endpoint`] post section; `retired` only by the completion side,
/// and after the drain by [`SendRing::release_after_drain`].
pub struct SendRing<O: SendRingOwner> {
    ctxts: KVec<Ctxt<O>>,
    posted: Atomic<u32>,
    retired: Atomic<u32>,
    /// [`NEW`], [`PROVISIONING`], [`READY`] or [`HEAD`].
    state: Atomic<u32>,
    /// A Send is signaled at least every `every` Sends.
    every: u32,
}

// SAFETY: Contexts are handed between the sender and the completion side
// through `posted` and `retired` (release/acquire), and each is accessed
// by its holder only (type invariants); the data is `Send`.
unsafe impl<O: SendRingOwner> Send for SendRing<O> {}
// SAFETY: As above.
unsafe impl<O: SendRingOwner> Sync for SendRing<O> {}

/// The sender's end of a [`SendRing`]: the one value that may post on it,
/// kept by the transport where its send serialization guards it.
///
/// # Invariants
///
/// `posted` is its ring's `posted`, which only the head's holder writes:
/// read here, that count costs no atomic load.
pub struct SendRingHead<O: SendRingOwner> {
    ring: *const SendRing<O>,
    /// Sends posted unsignaled since the last signaled one.
    unsignaled: u32,
    posted: u32,
}

// SAFETY: The head is a position in its ring, used by one thread at a time
// (it is not `Sync` and needs `&mut`).
unsafe impl<O: SendRingOwner> Send for SendRingHead<O> {}

impl<O: SendRingOwner> SendRing<O> {
    /// How many contexts.
    fn size(&self) -> u32 {
        self.ctxts.len() as u32
    }

    /// Contexts posted and not yet retired.
    pub fn outstanding(&self) -> u32 {
        let retired = self.retired.load(Acquire);
        self.posted.load(Acquire).wrapping_sub(retired)
    }

    /// The context of the `count`th Send (`None` never: the ring is not
    /// empty).
    fn ctxt(&self, count: u32) -> Option<&Ctxt<O>> {
        let at = count.checked_rem(self.size())?;
        self.ctxts.get(at as usize)
    }

    /// How many contexts from the `retired`th on, up to and including
    /// the one at `pos`, if it is posted and not retired.
    fn retiring_up_to(&self, pos: u32, retired: u32, posted: u32) -> Option<u32> {
        let size = self.size();
        let oldest = retired.checked_rem(size)?;
        let ahead = pos
            .wrapping_add(size)
            .wrapping_sub(oldest)
            .checked_rem(size)?;
        (ahead < posted.wrapping_sub(retired)).then_some(ahead.wrapping_add(1))
    }
}

impl<O: HasSendRing> SendRing<O> {
    /// A ring of `n` contexts signaling at least every `every`th Send;
    /// their buffers come with [`Self::provision`].
    pub fn new(n: u32, every: u32) -> Result<Self> {
        if n == 0 || every == 0 || every > n {
            return Err(EINVAL);
        }
        let mut ctxts = KVec::with_capacity(n as usize, GFP_KERNEL)?;
        for pos in 0..n {
            let ctxt = Ctxt {
                cqe: Opaque::new(bindings::ib_cqe {
                    done: Some(ring_done::<O>),
                }),
                // SAFETY: All-zero is a valid, empty `ib_send_wr`.
                wr: UnsafeCell::new(unsafe { core::mem::zeroed() }),
                // SAFETY: All-zero is a valid `ib_sge`.
                sges: UnsafeCell::new(unsafe { core::mem::zeroed() }),
                ring: UnsafeCell::new(core::ptr::null()),
                pos,
                buf: UnsafeCell::new(None),
                // SAFETY: All-zero is a valid `ib_sge`.
                buf_sge: UnsafeCell::new(unsafe { core::mem::zeroed() }),
                parts: UnsafeCell::new((0, 0)),
                pages: UnsafeCell::new(None),
                data: UnsafeCell::new(O::Data::default()),
            };
            // Room was reserved: never allocates.
            ctxts.push(ctxt, GFP_KERNEL)?;
        }
        // INVARIANT: `ctxts` is complete and not resized again; nothing is
        // posted.
        Ok(Self {
            ctxts,
            posted: Atomic::new(0),
            retired: Atomic::new(0),
            state: Atomic::new(NEW),
            every,
        })
    }

    /// Gives every context a Send buffer of `buf_len` bytes mapped on
    /// `ep`'s device (the inline send size once negotiated); only before
    /// the head is taken, and once.
    pub fn provision(&self, ep: &Endpoint, buf_len: usize) -> Result {
        if self.state.cmpxchg(NEW, PROVISIONING, Acquire).is_err() {
            return Err(EBUSY);
        }
        let mut res = Ok(());
        for c in self.ctxts.iter() {
            let made = ep
                .alloc_buf(buf_len, DmaDir::ToDevice)
                .and_then(|buf| Ok((buf.sge(0, buf.len())?, buf)));
            match made {
                // SAFETY: While provisioning, nothing else reaches the
                // contexts' buffers: no head exists and no other
                // provisioning runs (`state`).
                Ok((sge, buf)) => unsafe {
                    *c.buf_sge.get() = sge;
                    *c.buf.get() = Some(buf);
                },
                Err(e) => {
                    res = Err(e);
                    break;
                }
            }
        }
        // A context left without a buffer refuses to be filled.
        self.state.store(READY, Release);
        res
    }

    /// The ring's head, once: the ring is in its owner now, where it
    /// stays, so its contexts learn where it is.
    pub fn take_head(&self) -> Option<SendRingHead<O>> {
        // Acquire: the buffers provisioned are seen by the head's holder.
        let taken = self.state.cmpxchg(NEW, HEAD, Acquire).is_ok()
            || self.state.cmpxchg(READY, HEAD, Acquire).is_ok();
        if !taken {
            return None;
        }
        let ring: *const Self = self;
        for c in self.ctxts.iter() {
            // SAFETY: Nothing is posted before the head exists, so the
            // contexts are the caller's alone. INVARIANT: the work request
            // names the context's own entry and list, and `ring` its ring,
            // which is in its owner and not moved (`HasSendRing`).
            unsafe {
                *c.ring.get() = ring;
                let wr = &mut *c.wr.get();
                wr.__bindgen_anon_1.wr_cqe = Opaque::cast_into(&c.cqe);
                wr.sg_list = c.sges.get().cast();
                wr.opcode = bindings::ib_wr_opcode_IB_WR_SEND;
            }
        }
        // INVARIANT: nothing was posted before the one head was taken.
        Some(SendRingHead {
            ring,
            unsignaled: 0,
            posted: 0,
        })
    }

    /// The next free context, for `head`'s holder to fill and post;
    /// `None` while every context is posted (or for another ring's head).
    pub fn next<'a>(&'a self, head: &'a mut SendRingHead<O>) -> Option<SendCtxt<'a, O>> {
        if !core::ptr::eq(head.ring, self) {
            return None;
        }
        let posted = head.posted;
        // Acquire: the completion side is done with the context it retired.
        if posted.wrapping_sub(self.retired.load(Acquire)) >= self.size() {
            return None;
        }
        let ctxt = self.ctxt(posted)?;
        // SAFETY: Set before the head existed, not written since.
        let buf = unsafe { (*ctxt.buf.get()).as_deref() };
        Some(SendCtxt {
            ring: self,
            head,
            ctxt,
            buf,
        })
    }

    /// After `ep`'s queue pair was drained: retires, as flushed, the
    /// contexts still posted (those sent unsignaled after the last
    /// signaled one). Does nothing before the drain.
    pub fn release_after_drain(&self, ep: &Endpoint) {
        if !ep.is_drained() {
            return;
        }
        // After the drain no completion runs and no post starts, so the
        // counts are still (type invariant: `posted` moves inside a post
        // section only).
        let posted = self.posted.load(Acquire);
        let retired = self.retired.load(Acquire);
        let n = posted.wrapping_sub(retired);
        if n > 0 {
            // SAFETY: The contexts in `retired..posted` are posted and not
            // retired, and nothing else touches them after the drain.
            unsafe { self.retire(retired, n) };
        }
    }

    /// Retires `n` contexts from the `from`th on, in posting order, and
    /// counts them retired.
    ///
    /// # Safety
    ///
    /// The caller holds those contexts: they are posted, not retired, and
    /// no longer read by the device.
    unsafe fn retire(&self, from: u32, n: u32) {
        // SAFETY: The ring is the `RING_OFFSET` field of its owner, alive
        // while it is (`RingIn`).
        let owner = unsafe { &*owner_of::<O, Self>(self) };
        for k in 0..n {
            let Some(c) = self.ctxt(from.wrapping_add(k)) else {
                continue;
            };
            // SAFETY: The caller holds the context (its requirement).
            unsafe {
                owner.retire(&mut *c.data.get());
                // Unmapped now that the device no longer reads them.
                drop((*c.pages.get()).take());
            }
        }
        // INVARIANT: the contexts go back to the sender.
        self.retired.store(from.wrapping_add(n), Release);
    }
}

impl<O: SendRingOwner> Drop for SendRing<O> {
    fn drop(&mut self) {
        // The owner drains its endpoint and releases the ring first.
        // INVARIANT: never freed while the device may read them.
        let posted = self.outstanding();
        leak_if_posted(&mut self.ctxts, posted, "send");
    }
}

/// A free context of a ring, held by the ring's head until it is posted.
pub struct SendCtxt<'a, O: HasSendRing> {
    ring: &'a SendRing<O>,
    head: &'a mut SendRingHead<O>,
    ctxt: &'a Ctxt<O>,
    /// The context's Send buffer, looked up once (`None` for a ring
    /// without buffers).
    buf: Option<&'a MappedBuf>,
}

impl<O: HasSendRing> SendCtxt<'_, O> {
    /// The transport's state for this Send.
    pub fn data(&mut self) -> &mut O::Data {
        // SAFETY: The context is free and held through the head (type
        // invariant of the ring).
        unsafe { &mut *self.ctxt.data.get() }
    }

    /// Lends the first `limit` bytes of the Send buffer to `fill`, which
    /// writes the Send in place and returns its parts: the bytes sent
    /// before the pages (if any) and the tail's, which follows them in the
    /// buffer.
    #[inline(always)]
    pub fn fill(
        &mut self,
        limit: usize,
        fill: impl FnOnce(&mut [u8]) -> Result<(usize, usize)>,
    ) -> Result<(usize, usize)> {
        let parts = fill(self.bytes(limit)?)?;
        self.filled(parts.0, parts.1)?;
        Ok(parts)
    }

    /// The first `limit` bytes of the Send buffer, to write the Send in
    /// place; [`Self::filled`] then records its parts. As [`Self::fill`]
    /// without a closure between the caller and the bytes.
    #[inline(always)]
    pub fn bytes(&mut self, limit: usize) -> Result<&mut [u8]> {
        let buf = self.buf()?;
        // SAFETY: The context is free and held through the head, and its
        // buffer is reached only through its holder (type invariants):
        // the slice borrows the holder mutably, so no other access to
        // the buffer starts while it is used.
        let bytes = unsafe { buf.bytes_held() }?;
        bytes.get_mut(..limit).ok_or(EINVAL)
    }

    /// Records the parts of the Send written through [`Self::bytes`]: the
    /// bytes sent before the pages (if any) and the tail's, which follows
    /// them in the buffer; and makes them visible to the device.
    #[inline(always)]
    pub fn filled(&mut self, first: usize, tail: usize) -> Result {
        self.buf()?
            .filled_held(first.checked_add(tail).ok_or(EINVAL)?)?;
        // SAFETY: Held, as in `data`. INVARIANT: the parts fit the buffer
        // (`filled_held` checked their sum against its length).
        unsafe { *self.ctxt.parts.get() = (first, tail) };
        Ok(())
    }

    /// The context's Send buffer (`EINVAL` for a ring without buffers).
    #[inline(always)]
    fn buf(&self) -> Result<&MappedBuf> {
        self.buf.ok_or(EINVAL)
    }

    /// Sends `pages` between the buffer's two parts (they stay mapped
    /// until the Send retires).
    pub fn set_pages(&mut self, pages: KVec<MappedPage>) {
        // SAFETY: Held, as in `data`.
        unsafe { *self.ctxt.pages.get() = Some(pages) };
    }

    /// Posts the Send on `ep`, unsignaled unless `signal` or the ring is
    /// due to ask for a completion; `Ok(true)` when it went unsignaled. A
    /// context that is not posted is free again (its pages unmapped).
    pub fn post(self, ep: &Endpoint, signal: bool) -> Result<bool> {
        // SAFETY: No chain.
        unsafe { self.post_behind(ep, None, signal) }.map_err(|(e, _)| e)
    }

    /// As [`Self::post`], behind `chain` (its first and last work request,
    /// REG_MRs), with one `ib_post_send`. On failure returns how many of
    /// `chain` were posted; the Send was not.
    ///
    /// # Safety
    ///
    /// As [`Endpoint::post_send_behind`] requires of `chain`.
    #[inline(always)]
    pub(in crate::rust) unsafe fn post_behind(
        self,
        ep: &Endpoint,
        chain: Option<(*mut bindings::ib_send_wr, *mut bindings::ib_send_wr)>,
        signal: bool,
    ) -> core::result::Result<bool, (Error, usize)> {
        let c = self.ctxt;
        let res = self.build(ep);
        let nsge = match res {
            Ok(n) => n,
            Err(e) => {
                // SAFETY: Held, as in `data`.
                drop(unsafe { (*c.pages.get()).take() });
                return Err((e, 0));
            }
        };
        let signaled = signal || self.head.unsignaled.saturating_add(1) >= self.ring.every;
        // SAFETY: Held; the list and entry are the context's own (ring
        // invariant).
        let wr = unsafe {
            let wr = &mut *c.wr.get();
            wr.next = core::ptr::null_mut();
            wr.num_sge = nsge;
            wr.send_flags = if signaled {
                bindings::ib_send_flags_IB_SEND_SIGNALED
            } else {
                0
            };
            wr
        };
        let mut chain_posted = 0usize;
        let rc = match ep.start_post() {
            Ok(posting) => {
                let posted = self.head.posted;
                // Counted before the post: the completion may come before
                // `ib_post_send` returns. INVARIANT: inside the post
                // section, by the head's holder.
                self.ring.posted.store(posted.wrapping_add(1), Release);
                // SAFETY: The work request is the context's, its entry and
                // list live as long as the ring, which outlives its posted
                // contexts; the buffer and pages stay mapped until it
                // retires; `chain` by the caller's requirement.
                let rc = unsafe { post_behind(&posting, wr, chain, &mut chain_posted) };
                if rc != 0 {
                    // Not posted: no completion will come for it.
                    self.ring.posted.store(posted, Release);
                }
                rc
            }
            Err(e) => e.to_errno(),
        };
        if let Err(e) = to_result(rc) {
            // SAFETY: Not posted: still held.
            drop(unsafe { (*c.pages.get()).take() });
            return Err((e, chain_posted));
        }
        // INVARIANT: as the ring's count, stored above.
        self.head.posted = self.head.posted.wrapping_add(1);
        self.head.unsignaled = if signaled {
            0
        } else {
            self.head.unsignaled.wrapping_add(1)
        };
        Ok(!signaled)
    }

    /// Writes the scatter/gather list for `ep`: the buffer's first part,
    /// the pages, the buffer's tail. Returns its length.
    #[inline(always)]
    fn build(&self, ep: &Endpoint) -> Result<i32> {
        let c = self.ctxt;
        // SAFETY: Held, as in `data`.
        let (parts, pages, sges) = unsafe { (*c.parts.get(), &*c.pages.get(), &mut *c.sges.get()) };
        let (first, tail) = parts;
        // SAFETY: Set with the buffer, before the head existed.
        let whole = unsafe { *c.buf_sge.get() };
        if pages.is_none() && tail == 0 && first > 0 {
            // Nearly every Send: the buffer's first part alone, one entry
            // (a ring's contexts have at least one: `MAX_SGE`). Within the
            // buffer, whose length is a `u32` (type invariant of `Ctxt`):
            // cut from its entry with no check.
            sges[0] = bindings::ib_sge {
                addr: whole.addr,
                length: first as u32,
                lkey: whole.lkey,
            };
            return Ok(1);
        }
        let max_sge = ep.max_send_sge();
        let mut n = 0;
        let mut push = |sge: bindings::ib_sge| -> Result {
            if n >= max_sge.min(MAX_SGE) {
                return Err(EINVAL);
            }
            sges[n] = sge;
            n += 1;
            Ok(())
        };
        if first > 0 {
            push(buf_part(&whole, 0, first)?)?;
        }
        for p in pages.iter().flatten() {
            push(p.sge())?;
        }
        if tail > 0 {
            push(buf_part(&whole, first, tail)?)?;
        }
        i32::try_from(n).map_err(|_| EINVAL)
    }
}

/// The entry of the `len` bytes at `off` of a Send buffer whose whole
/// entry is `whole` (length 0 for a context without a buffer): `EINVAL`
/// past its end.
#[inline(always)]
fn buf_part(whole: &bindings::ib_sge, off: usize, len: usize) -> Result<bindings::ib_sge> {
    let end = off.checked_add(len).ok_or(EINVAL)?;
    if end > whole.length as usize {
        return Err(EINVAL);
    }
    Ok(bindings::ib_sge {
        addr: whole.addr.checked_add(off as u64).ok_or(EINVAL)?,
        length: u32::try_from(len).map_err(|_| EINVAL)?,
        lkey: whole.lkey,
    })
}

/// Completion of a ring's Send: retires its context and those posted
/// before it.
///
/// # Safety
///
/// Called by the RDMA core with a valid completion whose `wr_cqe` is the
/// `cqe` of a context of a `SendRing<O>` posted by [`SendCtxt::post`].
unsafe extern "C" fn ring_done<O: HasSendRing>(
    _cq: *mut bindings::ib_cq,
    wc: *mut bindings::ib_wc,
) {
    // SAFETY: `wc` is valid for the callback; posted work requests carry a
    // `wr_cqe`.
    let (w, cqe) = unsafe { (&*wc, (*wc).__bindgen_anon_1.wr_cqe) };
    // SAFETY: By the function's requirement the entry is a context's.
    let c =
        unsafe { &*kernel::container_of!(cqe.cast::<Opaque<bindings::ib_cqe>>(), Ctxt<O>, cqe) };
    // SAFETY: Set before any post (`take_head`), not written again; the
    // ring outlives its posted contexts.
    let ring = unsafe { &**c.ring.get() };
    let status = w.status as i32;
    if status != bindings::ib_wc_status_IB_WC_SUCCESS as i32
        && status != bindings::ib_wc_status_IB_WC_WR_FLUSH_ERR as i32
    {
        // SAFETY: As in `SendRing::retire`.
        let owner = unsafe { &*owner_of::<O, SendRing<O>>(ring) };
        owner.failed(&WorkCompletion::error(status));
    }
    // Only this side writes `retired`.
    let retired = ring.retired.load(Relaxed);
    let posted = ring.posted.load(Acquire);
    let Some(n) = ring.retiring_up_to(c.pos, retired, posted) else {
        // Retired already (an unsignaled Send's error completion that a
        // later one's came before): cannot happen on an ordered queue.
        crate::pr_err_ratelimited!("rpcrdma_rs: completion of a retired Send ignored\n");
        return;
    };
    // SAFETY: The contexts from `retired` to this one are posted, not
    // retired, and the device is done with them: the send queue completes
    // in order.
    unsafe { ring.retire(retired, n) };
}
