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
//! chain with one doorbell. A completion hands the owner the context as a
//! [`Recv`] and the completion; nothing is allocated, locked or counted by
//! reference per Receive.
//!
//! Which side may touch a context is carried by [`Recv`]: it exists only
//! while its context is not posted, at most one per context, made by the
//! completion and consumed by the post, and it is the only way to reach the
//! context's buffer. So a context cannot be posted twice, nor its buffer
//! read while the device may write it. A Call read in place keeps its
//! context's `Recv` in a [`HeldRecv`] until the request is done with it.
//!
//! The contexts are a field of their owner ([`RingIn`]), which lives in an
//! `Arc` and drains its endpoint before it drops them: no completion
//! outlives them. Contexts still posted when they are dropped (an
//! endpoint that was not drained) are leaked, and one line says so.

use crate::rust::bindings;
use crate::rust::kext::percpu::PerCpuCount;
use crate::rust::rdma::ring_owner::{leak_if_posted, owner_of, posted_count, RingIn};
use crate::rust::rdma::verbs::{DmaDir, Endpoint, MappedBuf, WorkCompletion, RECV_BATCH_MAX};
use core::cell::UnsafeCell;
use core::marker::PhantomData;
use core::mem::MaybeUninit;
use core::num::NonZeroU64;
use kernel::alloc::KVec;
use kernel::error::to_result;
use kernel::prelude::*;
use kernel::sync::atomic::{Atomic, Relaxed};
use kernel::sync::Arc;
use kernel::types::Opaque;

/// What a transport does when one of its Receives completes.
pub trait RecvSlotsOwner: Send + Sync + Sized + RingIn<RecvSlots<Self>> {
    /// The Receive of `recv` completed with `wc` (or was flushed). Its
    /// buffer holds `wc.byte_len` bytes when it succeeded; it is posted
    /// again only when the owner hands `recv` back ([`RecvSlots::post`]),
    /// and never if the owner drops it. Runs on the receive CQ's poller.
    fn received(&self, recv: Recv, wc: &WorkCompletion);
}

/// Identities of [`RecvSlots`], so that a [`Recv`] is taken back only by
/// the contexts it belongs to: never reused ([`RecvSlots::new`] fails
/// rather than wrap, after 2^48 of them).
static NEXT_ID: Atomic<u64> = Atomic::new(1);

/// Bits of a [`Recv`] below its identity: the context's index.
const INDEX_BITS: u32 = 16;

/// A receive context that is not posted: what its owner holds from the
/// completion of its Receive to its next post, and the only way to post it
/// or to reach its buffer.
///
/// # Invariants
///
/// At most one exists per context of a [`RecvSlots`], and only while that
/// context is not posted: [`RecvSlots::post_all`] makes one per context
/// (once), a completion one for its context, and [`RecvSlots::post`]
/// consumes it. `raw` holds the identity of the contexts it belongs to
/// above [`INDEX_BITS`] (never 0) and the index of one of theirs below.
#[must_use = "a receive context that is dropped is never posted again"]
pub struct Recv {
    raw: NonZeroU64,
}

/// The identity and the index a [`Recv`]'s word packs.
#[inline(always)]
fn unpack(raw: u64) -> (u64, usize) {
    (raw >> INDEX_BITS, (raw & ((1 << INDEX_BITS) - 1)) as usize)
}

impl Recv {
    /// The context `index` of the contexts of identity `id`.
    fn new(id: u64, index: usize) -> Option<Self> {
        let index = u16::try_from(index).ok()?;
        let raw = NonZeroU64::new(id.checked_shl(INDEX_BITS)? | u64::from(index))?;
        Some(Self { raw })
    }

    /// The context's index among its [`RecvSlots`].
    pub fn index(&self) -> usize {
        unpack(self.raw.get()).1
    }

    /// The identity of its [`RecvSlots`].
    fn id(&self) -> u64 {
        unpack(self.raw.get()).0
    }
}

/// A receive context held for the CPU to read what its Receive brought (a
/// Call worked on in place, C's `rc_recv_buf` while the request lives):
/// its [`Recv`], so the context is not posted while the bytes are read,
/// and their length. The bytes are reached through the contexts
/// ([`RecvSlots::bytes`]), so no reference is counted to keep them: they
/// live as long as the contexts, which their owner frees only after its
/// endpoint is drained.
///
/// # Invariants
///
/// `len` is at most the length of the buffer of `recv`'s context, and
/// those bytes were synced for the CPU after the Receive completed.
#[must_use = "a receive context that is dropped is never posted again"]
pub struct HeldRecv {
    recv: Recv,
    len: usize,
}

impl HeldRecv {
    /// The hold given up: the context, to post again.
    pub fn into_recv(self) -> Recv {
        self.recv
    }

    /// How many bytes it holds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Up to `N` receive contexts ([`RECV_BATCH_MAX`] at most), posted as one
/// chain by [`RecvSlots::post`]. The batch owns the [`Recv`]s pushed into
/// it until they are posted.
///
/// # Invariants
///
/// The first `len` entries of `raw` are the `raw` of [`Recv`]s the batch
/// owns; the others are no `Recv`'s. `len <= N <= RECV_BATCH_MAX`.
pub struct RecvBatch<const N: usize> {
    raw: [u64; N],
    len: usize,
}

impl<const N: usize> Default for RecvBatch<N> {
    fn default() -> Self {
        const { assert!(N <= RECV_BATCH_MAX) };
        Self {
            raw: [0; N],
            len: 0,
        }
    }
}

impl<const N: usize> RecvBatch<N> {
    /// Adds `recv`; gives it back when the batch is full.
    pub fn push(&mut self, recv: Recv) -> core::result::Result<(), Recv> {
        match self.raw.get_mut(self.len) {
            Some(at) => {
                // INVARIANT: the batch owns it from here.
                *at = recv.raw.get();
                self.len += 1;
                Ok(())
            }
            None => Err(recv),
        }
    }

    /// How many it holds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether it holds `N`.
    pub fn is_full(&self) -> bool {
        self.len == N
    }

    /// The `raw` of the contexts it holds, in order.
    fn held(&self) -> &[u64] {
        self.raw.get(..self.len).unwrap_or(&[])
    }

    /// Forgets the first `n` (posted: their Receives' completions make them
    /// again), keeping the others in order.
    fn consume(&mut self, n: usize) {
        let n = n.min(self.len);
        self.raw.copy_within(n..self.len, 0);
        self.len -= n;
    }
}

/// One receive context.
///
/// # Invariants
///
/// `home` names the contexts' [`RecvSlots`] once the context was posted:
/// [`RecvSlots::post`] writes it before each post, always with the same
/// value (the contexts do not move while any is posted, their owner being
/// pinned in an `Arc`), and only the holder of the context's [`Recv`]
/// writes it, only its completion reads it: the post orders the write
/// before the read, as it orders the work request's other fields the
/// provider reads.
/// `cqe.done` is `recv_done::<O>`; `buf` is mapped for the device to
/// write, on the endpoint's device, for the context's life, and `sge`
/// names all of it.
struct Ctxt<O: RecvSlotsOwner> {
    cqe: Opaque<bindings::ib_cqe>,
    index: u32,
    home: UnsafeCell<*const RecvSlots<O>>,
    buf: Arc<MappedBuf>,
    sge: bindings::ib_sge,
}

/// The receive contexts of a connection.
///
/// # Invariants
///
/// `posted` counts the contexts posted and not completed. The vector is
/// not resized after [`RecvSlots::new`], and holds at most `u16::MAX + 1`
/// contexts. `id` is this value's own (from `NEXT_ID`, below 2^48); `fresh` is true
/// until [`RecvSlots::post_all`] first runs, and no [`Recv`] of these
/// contexts exists before.
pub struct RecvSlots<O: RecvSlotsOwner> {
    ctxts: KVec<Ctxt<O>>,
    posted: PerCpuCount,
    id: u64,
    fresh: Atomic<bool>,
    _owner: PhantomData<fn() -> O>,
}

// SAFETY: The contexts are immutable after `new`, atomic, or (`home`)
// reached by one side at a time: the holder of their `Recv`, then their
// completion (type invariant).
unsafe impl<O: RecvSlotsOwner> Send for RecvSlots<O> {}
// SAFETY: As above.
unsafe impl<O: RecvSlotsOwner> Sync for RecvSlots<O> {}

impl<O: RecvSlotsOwner> RecvSlots<O> {
    /// `n` receive contexts with buffers of `buf_len` bytes mapped on
    /// `ep`'s device, none posted.
    pub fn new(ep: &Endpoint, n: usize, buf_len: usize) -> Result<Self> {
        if n > 1 << INDEX_BITS {
            return Err(EINVAL);
        }
        let id = NEXT_ID.fetch_add(1, Relaxed);
        if id == 0 || id >= 1 << (64 - INDEX_BITS) {
            return Err(EOVERFLOW);
        }
        let mut ctxts = KVec::with_capacity(n, GFP_KERNEL)?;
        for index in 0..n {
            let buf = ep.alloc_buf(buf_len, DmaDir::FromDevice)?;
            let sge = buf.sge(0, buf.len())?;
            ctxts.push(
                Ctxt {
                    cqe: Opaque::new(bindings::ib_cqe {
                        done: Some(recv_done::<O>),
                    }),
                    index: index as u32,
                    home: UnsafeCell::new(core::ptr::null()),
                    buf,
                    sge,
                },
                GFP_KERNEL,
            )?;
        }
        Ok(Self {
            ctxts,
            posted: PerCpuCount::new()?,
            id,
            fresh: Atomic::new(true),
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
        posted_count(&self.posted)
    }

    /// Holds the context of `recv` for the CPU to read the first `len`
    /// bytes (at most the buffer's) its Receive brought, made visible to
    /// it: for a Call worked on in place, until the hold is given up
    /// ([`HeldRecv::into_recv`]). `recv` comes back for a context of other
    /// contexts.
    pub fn hold(&self, recv: Recv, len: usize) -> core::result::Result<HeldRecv, Recv> {
        let Some(c) = self
            .ctxts
            .get(recv.index())
            .filter(|_| recv.id() == self.id)
        else {
            return Err(recv);
        };
        match c.buf.sync_received(len) {
            // INVARIANT: `len` bytes of the context's buffer, synced.
            Ok(len) => Ok(HeldRecv { recv, len }),
            // Not reached: the buffers are the device's to write.
            Err(_) => Err(recv),
        }
    }

    /// The bytes `held` holds, if it is one of these contexts' (else none).
    pub fn bytes<'a>(&'a self, held: &'a HeldRecv) -> &'a [u8] {
        match self.held_ptr(held) {
            // SAFETY: `held_ptr` points to `held.len` bytes of a buffer
            // these contexts own, which the device does not write while
            // its context is not posted (`held` holds its `Recv`), synced
            // for the CPU (type invariant of `HeldRecv`). No CPU writer
            // reaches them while `held` is borrowed: only the holder does,
            // and it hands them to sunrpc to change in place only by
            // moving `held` ([`SvcRqst::set_arg_in_place`]).
            //
            // [`SvcRqst::set_arg_in_place`]: crate::rust::sunrpc::svc::SvcRqst::set_arg_in_place
            Some(ptr) => unsafe { core::slice::from_raw_parts(ptr.cast_const(), held.len) },
            None => &[],
        }
    }

    /// The address of the bytes `held` holds, for `rust/` code that hands
    /// them to C while no Rust reference to them is held; `None` for a
    /// context of other contexts.
    pub(in crate::rust) fn held_ptr(&self, held: &HeldRecv) -> Option<*mut u8> {
        if !self.holds(held) {
            return None;
        }
        Some(self.ctxts.get(held.recv.index())?.buf.as_mut_ptr())
    }

    /// Whether `held` is one of these contexts'.
    pub fn holds(&self, held: &HeldRecv) -> bool {
        held.recv.id() == self.id
    }

    /// Posts every context's Receive on `ep`: the first post of a
    /// connection's Receives, once (`EINVAL` after). On failure the
    /// contexts not posted are lost.
    pub fn post_all(&self, ep: &Endpoint) -> Result {
        if !self.fresh.xchg(false, Relaxed) {
            return Err(EINVAL);
        }
        let mut at = 0;
        while at < self.ctxts.len() {
            let mut batch = RecvBatch::<RECV_BATCH_MAX>::default();
            while at < self.ctxts.len() && !batch.is_full() {
                // INVARIANT: One per context, made once (`fresh`), none
                // posted yet.
                let recv = Recv::new(self.id, at).ok_or(EINVAL)?;
                if batch.push(recv).is_err() {
                    break;
                }
                at += 1;
            }
            self.post(ep, &mut batch)?;
        }
        Ok(())
    }

    /// Posts the Receives of the contexts of `batch` on `ep` (the endpoint
    /// their buffers are mapped for) as one chain, and empties it. On
    /// failure `batch` keeps those not posted: all of them for `EINVAL` (a
    /// context of other contexts) and for `ESHUTDOWN` (the endpoint's
    /// drain started).
    pub fn post<const N: usize>(&self, ep: &Endpoint, batch: &mut RecvBatch<N>) -> Result {
        let mut sges = [const { MaybeUninit::<bindings::ib_sge>::uninit() }; RECV_BATCH_MAX];
        let mut list = [const { MaybeUninit::<bindings::ib_recv_wr>::uninit() }; RECV_BATCH_MAX];
        let sge_base = sges.as_mut_ptr().cast::<bindings::ib_sge>();
        let base = list.as_mut_ptr().cast::<bindings::ib_recv_wr>();
        let home = core::ptr::from_ref(self);
        let mut n = 0;
        // Every context is checked before any is posted.
        for &raw in batch.held() {
            let (id, index) = unpack(raw);
            let c = self.ctxts.get(index).ok_or(EINVAL)?;
            // The buffer is the device's to write (type invariant): no
            // CPU reads it, its `Recv` being here.
            if id != self.id || n >= RECV_BATCH_MAX {
                return Err(EINVAL);
            }
            let sge = c.sge;
            // SAFETY: The context's `Recv` is here: no completion of it
            // is pending. INVARIANT: `home` is written before the post,
            // always with this value. The post orders it before the
            // completion that reads it.
            unsafe { *c.home.get() = home };
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
        self.posted.add(i64::from(count));
        let mut bad: *const bindings::ib_recv_wr = base;
        let rc = match ep.start_post() {
            // SAFETY: The queue pair is live while `posting` is held; the
            // first `n` entries of `list` are written and linked, the last
            // ending the list; their entries name buffers mapped for the
            // device to write and completion entries that live as long as
            // these contexts, which outlive their posted Receives; each
            // context is posted once, by its one `Recv` (type invariant),
            // consumed below.
            Ok(posting) => unsafe {
                bad = core::ptr::null();
                bindings::rpcrdma_rs_ib_post_recv(posting.qp(), base, &mut bad)
            },
            // None posted (`bad` is the first).
            Err(e) => e.to_errno(),
        };
        // Those before the one that failed were posted.
        let went = if rc == 0 {
            n
        } else if bad.is_null() {
            0
        } else {
            // SAFETY: `bad` points into `list`.
            usize::try_from(unsafe { bad.offset_from(base) }).unwrap_or(0)
        };
        // INVARIANT: The posted contexts' `Recv`s are gone; their
        // completions make them again.
        if rc == 0 {
            batch.len = 0;
            return Ok(());
        }
        batch.consume(went);
        let not = n.saturating_sub(went);
        self.posted.add(-i64::from(u32::try_from(not)?));
        to_result(rc)
    }
}

impl<O: RecvSlotsOwner> Drop for RecvSlots<O> {
    fn drop(&mut self) {
        // The owner drains its endpoint first.
        // INVARIANT: never freed while the device may write them.
        let posted = posted_count(&self.posted);
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
    let slots = unsafe { &**c.home.get() };
    slots.posted.add(-1);
    // SAFETY: The contexts are the `RING_OFFSET` field of their owner,
    // which lives in an `Arc` at least as long as they do (`RingIn`).
    let owner = unsafe { &*owner_of::<O, RecvSlots<O>>(slots) };
    // INVARIANT: Its context is no longer posted, and its `Recv` was
    // consumed by the post.
    // `new` and the contexts' number bound the identity and the index.
    let Some(recv) = Recv::new(slots.id, c.index as usize) else {
        return;
    };
    owner.received(recv, &WorkCompletion::of(w));
}
