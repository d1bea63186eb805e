// SPDX-License-Identifier: GPL-2.0

//! RDMA Reads into mapped pages whose completion entries live in the
//! object that posts them (C keeps `cc_cqe` in the receive context of the
//! Call its Reads are for, `svc_rdma_chunk_ctxt`): no work request object,
//! pool or lock per Read.
//!
//! The owner holds a [`ReadSlots`] as a field ([`RingIn`]) and lives in an
//! `Arc`. Each slot is one completion entry; a Read is built on the stack
//! (providers copy a work request and its scatter/gather list when it is
//! posted: only the completion entry must outlive the post) and takes a
//! reference on its owner, on the pages it lands in and on a context the
//! owner names (its connection's state, which the owner itself need not
//! hold: no cycle when the connection keeps idle owners), which its
//! completion hands to [`ReadSlotsOwner::read_done`] or drops. So neither
//! the owner nor the pages can go while a Read is posted, whatever the
//! owner does; a connection's drain completes every posted Read as
//! flushed.

use crate::rust::bindings;
use crate::rust::module::live;
use crate::rust::rdma::ring_owner::{owner_of, ring_of, RingIn};
use crate::rust::rdma::verbs::{Endpoint, WorkCompletion, MAX_SGE};
use crate::rust::sunrpc::page_sinks::PageSinks;
use core::cell::UnsafeCell;
use core::marker::PhantomData;
use core::mem::MaybeUninit;
use kernel::prelude::*;
use kernel::sync::atomic::{Acquire, Atomic, Relaxed, Release};
use kernel::sync::Arc;
use kernel::types::Opaque;

/// Reads one owner may have posted at once: those of a 256 KiB NFS WRITE
/// (pieces of up to `MAX_SGE - 1` pages). More wait for a slot, or go
/// another way.
pub const READ_SLOTS: usize = 3;

/// What the owner of [`ReadSlots`] does when one of its Reads completes.
pub trait ReadSlotsOwner: Send + Sync + Sized + RingIn<ReadSlots<Self>> {
    /// What a posted Read keeps besides its owner and pages, for its
    /// completion.
    type Context: Send + Sync;

    /// A Read completed (or was flushed) with `wc`. `this` and `ctx` are
    /// the references its post took; the slot is free again. Runs on the
    /// send CQ's poller.
    fn read_done(this: Arc<Self>, ctx: Arc<Self::Context>, wc: &WorkCompletion);
}

/// What a posted Read keeps: the pages it lands in and its owner's context.
type Kept<O> = (Arc<PageSinks>, Arc<<O as ReadSlotsOwner>::Context>);

/// One completion entry and what its posted Read keeps.
struct Slot<O: ReadSlotsOwner> {
    cqe: Opaque<bindings::ib_cqe>,
    /// Its place in [`ReadSlots::slots`].
    index: usize,
    /// The pages the Read lands in and the owner's context, while it is
    /// posted.
    keep: UnsafeCell<Option<Kept<O>>>,
}

/// The completion entries of an owner's RDMA Reads.
///
/// # Invariants
///
/// Bit `i` of `busy` is set while slot `i` is posted or being filled by
/// the poster that set it; only that poster, then the slot's completion,
/// write its `keep`. A posted slot holds a reference on the owner (taken
/// with `Arc::into_raw`) that its completion gives back. `slots[i].index`
/// is `i`, and each `cqe.done` is `read_done::<O>`.
pub struct ReadSlots<O: ReadSlotsOwner> {
    slots: [Slot<O>; READ_SLOTS],
    busy: Atomic<u32>,
    _owner: PhantomData<fn() -> O>,
}

// SAFETY: A slot's `keep` is written only by the thread that holds its
// bit (type invariants); the rest is atomics and entries the device reads.
unsafe impl<O: ReadSlotsOwner> Send for ReadSlots<O> {}
// SAFETY: As above.
unsafe impl<O: ReadSlotsOwner> Sync for ReadSlots<O> {}

impl<O: ReadSlotsOwner> Default for ReadSlots<O> {
    fn default() -> Self {
        Self::new()
    }
}

impl<O: ReadSlotsOwner> ReadSlots<O> {
    /// Slots, none posted.
    pub fn new() -> Self {
        // INVARIANT: indexes in order, each entry completing to `read_done`.
        Self {
            slots: core::array::from_fn(|index| Slot {
                cqe: Opaque::new(bindings::ib_cqe {
                    done: Some(read_done::<O>),
                }),
                index,
                keep: UnsafeCell::new(None),
            }),
            busy: Atomic::new(0),
            _owner: PhantomData,
        }
    }

    /// How many slots are not posted. Only completions free slots, so a
    /// poster that owns the decision to post sees at least this many
    /// when it posts next.
    pub fn free(&self) -> usize {
        READ_SLOTS.saturating_sub(self.busy.load(Acquire).count_ones() as usize)
    }

    /// Takes a free slot, if any.
    fn claim(&self) -> Option<usize> {
        let mut busy = self.busy.load(Relaxed);
        loop {
            let index = (!busy).trailing_zeros() as usize;
            if index >= READ_SLOTS {
                return None;
            }
            match self.busy.cmpxchg(busy, busy | (1 << index), Acquire) {
                Ok(_) => return Some(index),
                Err(now) => busy = now,
            }
        }
    }

    /// Gives slot `index` up (its completion ran, or it was not posted).
    fn release(&self, index: usize) {
        // The bit is set and only its holder clears it: subtracting it
        // clears it alone. Release: whatever the holder wrote before the
        // slot is seen free.
        self.busy.fetch_sub(1u32 << index, Release);
    }

    /// Posts an RDMA Read of `len` bytes at `remote_addr` under `rkey`
    /// into bytes `[off, off + len)` of `sinks` (counted from the first
    /// page's first byte), which must be mapped on `ep`'s device, as one
    /// signaled work request through a slot of `owner`'s, which keeps
    /// `ctx` for the completion. `Ok(false)`,
    /// with nothing posted, when every slot is posted; `EINVAL` for a
    /// range past the pages or over more than [`MAX_SGE`] of them or than
    /// the device scatters a Read over, or pages mapped on another device;
    /// `ESHUTDOWN` once the endpoint's drain started.
    #[expect(clippy::too_many_arguments)]
    pub fn post(
        owner: &Arc<O>,
        ctx: &Arc<O::Context>,
        ep: &Endpoint,
        sinks: &Arc<PageSinks>,
        off: usize,
        len: usize,
        remote_addr: u64,
        rkey: u32,
    ) -> Result<bool> {
        let this = ring_of::<O, Self>(owner);
        let mut sges = [const { MaybeUninit::<bindings::ib_sge>::uninit() }; MAX_SGE];
        let nsge = sinks.page_sges(off, len, &mut sges)?;
        // The pages must be mapped on the endpoint's device, and the device
        // must scatter one Read over that many entries.
        let fits = u32::try_from(nsge).is_ok_and(|n| n <= ep.device_attr().max_sge_rd);
        if !fits || !Arc::ptr_eq(sinks.pd(), ep.pd()) {
            return Err(EINVAL);
        }
        let Some(index) = this.claim() else {
            return Ok(false);
        };
        let slot = &this.slots[index];
        // SAFETY: All-zero is a valid `ib_rdma_wr` (null pointers, no
        // flags); the fields that matter are set below.
        let mut w: bindings::ib_rdma_wr = unsafe { core::mem::zeroed() };
        w.wr.__bindgen_anon_1.wr_cqe = slot.cqe.get();
        // The first `nsge` entries, which `page_sges` wrote.
        w.wr.sg_list = sges.as_mut_ptr().cast();
        w.wr.num_sge = i32::try_from(nsge).map_err(|_| EINVAL)?;
        w.wr.opcode = bindings::ib_wr_opcode_IB_WR_RDMA_READ;
        w.wr.send_flags = bindings::ib_send_flags_IB_SEND_SIGNALED;
        w.remote_addr = remote_addr;
        w.rkey = rkey;
        // SAFETY: This thread holds the slot's bit (type invariant).
        unsafe { *slot.keep.get() = Some((sinks.clone(), ctx.clone())) };
        // INVARIANT: the posted slot holds this reference until its
        // completion.
        let held = Arc::into_raw(owner.clone());
        live::inc(live::Kind::PostedWr);
        let rc = match ep.start_post() {
            // SAFETY: The queue pair is live while `posting` is held; the
            // work request and its list are valid for the call, and the
            // completion entry for as long as the owner, which the posted
            // Read keeps; the pages stay mapped while `sinks` is kept.
            Ok(posting) => unsafe { bindings::rpcrdma_rs_ib_post_send(posting.qp(), &w.wr) },
            Err(e) => e.to_errno(),
        };
        if rc == 0 {
            return Ok(true);
        }
        // Not posted: no completion will come.
        live::dec(live::Kind::PostedWr);
        // SAFETY: The slot's bit is still this thread's.
        let keep = unsafe { (*slot.keep.get()).take() };
        this.release(index);
        drop(keep);
        // SAFETY: From `Arc::into_raw` above, given back once.
        drop(unsafe { Arc::from_raw(held) });
        Err(Error::from_errno(rc))
    }
}

/// The completion of a Read posted through a slot.
///
/// # Safety
///
/// Called by the RDMA core for a work request whose `wr_cqe` is the `cqe`
/// of a posted slot of a `ReadSlots<O>`.
unsafe extern "C" fn read_done<O: ReadSlotsOwner>(
    _cq: *mut bindings::ib_cq,
    wc: *mut bindings::ib_wc,
) {
    // SAFETY: `wc` is valid for the callback; posted work requests carry a
    // `wr_cqe`.
    let (w, cqe) = unsafe { (&*wc, (*wc).__bindgen_anon_1.wr_cqe) };
    // SAFETY: By the function's requirement the entry is a slot's, whose
    // owner the posted Read keeps alive.
    let slot =
        unsafe { &*kernel::container_of!(cqe.cast::<Opaque<bindings::ib_cqe>>(), Slot<O>, cqe) };
    // SAFETY: Slot `index` is entry `index` of the `slots` array (type
    // invariant), which is a field of a `ReadSlots<O>`.
    let this = unsafe {
        let first = core::ptr::from_ref(slot).sub(slot.index);
        &*kernel::container_of!(first.cast::<[Slot<O>; READ_SLOTS]>(), ReadSlots<O>, slots)
    };
    live::dec(live::Kind::PostedWr);
    let done = WorkCompletion::of(w);
    // SAFETY: Posted: its completion holds the slot's bit now.
    let keep = unsafe { (*slot.keep.get()).take() };
    // SAFETY: The slots are the `RING_OFFSET` field of their owner
    // (`RingIn`), and the posted Read holds a reference on it from
    // `Arc::into_raw`, given back here once.
    let owner = unsafe { Arc::from_raw(owner_of::<O, ReadSlots<O>>(this)) };
    this.release(slot.index);
    // Set by the post.
    let Some((sinks, ctx)) = keep else {
        return;
    };
    // The device is done with the pages.
    drop(sinks);
    O::read_done(owner, ctx, &done);
}
