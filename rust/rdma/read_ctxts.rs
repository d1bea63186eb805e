// SPDX-License-Identifier: GPL-2.0

//! A connection's Calls being read as read contexts, made once with the
//! connection (C keeps a Call's Read state, `svc_rdma_chunk_ctxt` with its
//! `cc_cqe`, in the receive context it came in): each holds the
//! completion entries of its RDMA Reads into mapped pages and the
//! transport's work on the Call, parked while its Reads are pending
//! ([`CountedPark`]). A context is claimed for a Call, which makes its
//! claimer the holder of its work ([`ParkHolder`]), and given back with
//! that holder when the Call is done with. Reads go as chains of up to
//! [`READ_SLOTS`] through one entry, with one completion (C posts a Read
//! list as one chain whose last work request alone is signaled): the
//! chain is built on the stack (providers copy work requests and their
//! scatter/gather lists when they are posted: only the completion entry
//! must outlive the post) and its completion finds its context, the
//! contexts and their owner (the connection) by `container_of`. Nothing is
//! allocated, and no reference is taken on the context or the connection,
//! per Read.
//!
//! Lifetimes rest on drain-before-free, as the Receives' do
//! (`recv_slots`): the contexts are a field of their owner ([`RingIn`]),
//! which lives in an `Arc` and drains its endpoint before it drops them,
//! so no completion outlives them, and they outlive every state a
//! transport keeps in them. Contexts with Reads still posted when they
//! are dropped (an endpoint that was not drained) are leaked, and one
//! line says so. Only the pages a Read lands in are held by reference
//! while it is posted: whoever holds them may let them go at any time.

use crate::rust::bindings;
use crate::rust::kext::park::{CountedPark, ParkHolder};
use crate::rust::module::live;
use crate::rust::rdma::ring_owner::{owner_of, RingIn};
use crate::rust::rdma::verbs::{Endpoint, WorkCompletion, MAX_SGE};
use crate::rust::sunrpc::page_sinks::PageSinks;
use core::cell::UnsafeCell;
use core::marker::PhantomData;
use core::mem::{ManuallyDrop, MaybeUninit};
use kernel::alloc::{KVBox, KVec};
use kernel::prelude::*;
use kernel::sync::atomic::{Acquire, Atomic, Relaxed, Release};
use kernel::sync::Arc;
use kernel::types::Opaque;

/// Completion entries of one context, and Reads in one chain: the Reads
/// of a 256 KiB NFS WRITE (pieces of up to `MAX_SGE - 1` pages) fit one
/// chain, so one entry. More wait for an entry, or go another way.
pub const READ_SLOTS: usize = 3;

/// Contexts per word of the claim map.
const PER_WORD: usize = u64::BITS as usize;

/// The bits of every entry of a context.
const ALL_ENTRIES: u32 = (1 << READ_SLOTS) - 1;

/// What the owner of [`ReadCtxts`] does when one of their Reads completes.
pub trait ReadCtxtsOwner: Send + Sync + Sized + RingIn<ReadCtxts<Self>> {
    /// The transport's work on a Call being read, one in each context's
    /// park.
    type Work: Send;

    /// A chain of `reads` Reads of context `ctxt`, whose work is parked (or
    /// held) in `park`, completed (or was flushed) with `wc`, the
    /// completion of its last Read; its entry is free again and its pages
    /// were let go. Runs on the send CQ's poller.
    fn read_done(
        &self,
        ctxt: usize,
        park: &CountedPark<Self::Work>,
        reads: u32,
        wc: &WorkCompletion,
    );
}

/// One RDMA Read of a chain ([`ReadCtxts::post_chain`]).
#[derive(Clone, Copy)]
pub struct ChainRead {
    /// Where it lands in the sinks, counted from their first page's first
    /// byte.
    pub off: usize,
    /// Its bytes.
    pub len: usize,
    /// Where it reads from, on the peer.
    pub remote_addr: u64,
    /// The peer's key for that memory.
    pub rkey: u32,
}

/// One completion entry of a context.
struct Entry {
    cqe: Opaque<bindings::ib_cqe>,
    /// Its place in [`Ctxt::entries`].
    slot: usize,
    /// The pages its chain's Reads land in, while it is posted.
    sinks: UnsafeCell<Option<Arc<PageSinks>>>,
    /// How many Reads its chain holds, while it is posted.
    reads: UnsafeCell<u32>,
}

/// One read context.
///
/// # Invariants
///
/// `entries[i].slot` is `i` and each `cqe.done` is `read_done::<O>`.
/// Bit `i` of `busy` is set while entry `i` is posted or being filled by
/// the poster that set it; only that poster, then the entry's completion,
/// write its `sinks` and `reads`. `home` names the contexts this one
/// belongs to whenever an entry is posted: written once, by the first post
/// of any entry (the contexts do not move, their owner being pinned in an
/// `Arc`), before which no completion reads it; read after that only.
/// `index` is the context's place in [`ReadCtxts::ctxts`].
#[pin_data]
struct Ctxt<O: ReadCtxtsOwner> {
    entries: [Entry; READ_SLOTS],
    busy: Atomic<u32>,
    index: usize,
    home: UnsafeCell<*const ReadCtxts<O>>,
    park: CountedPark<O::Work>,
}

/// The read contexts of a connection.
///
/// # Invariants
///
/// Bit `i % 64` of `claimed[i / 64]` is set while context `i` is claimed,
/// and set for good for every `i >= ctxts.len()`. Neither vector is
/// resized after [`ReadCtxts::new`]. The park of a context that is not
/// claimed is idle (neither parked nor held): its claimer is the one
/// thread that may make a holder of it.
pub struct ReadCtxts<O: ReadCtxtsOwner> {
    /// Freed only when no Read is posted (see the `Drop`), else leaked.
    ctxts: ManuallyDrop<Pin<KVBox<[Ctxt<O>]>>>,
    claimed: KVec<Atomic<u64>>,
    _owner: PhantomData<fn() -> O>,
}

// SAFETY: An entry's `sinks` is written only by the thread that holds its
// bit, and a context's `home` once before its first post (type
// invariants); the rest is atomics, entries the device reads and the
// parks, which are `Send + Sync` for works that are `Send`.
unsafe impl<O: ReadCtxtsOwner> Send for ReadCtxts<O> {}
// SAFETY: As above.
unsafe impl<O: ReadCtxtsOwner> Sync for ReadCtxts<O> {}

impl<O: ReadCtxtsOwner> ReadCtxts<O> {
    /// `n` (at least one) contexts, none claimed, each with an empty,
    /// idle park.
    pub fn new(n: usize) -> Result<Self> {
        if n == 0 {
            return Err(EINVAL);
        }
        let ctxts = KVBox::pin_slice(
            |index| {
                // INVARIANT: entries in order, each completing to
                // `read_done`; none posted; the park idle.
                try_pin_init!(Ctxt {
                    entries: core::array::from_fn(|slot| Entry {
                        cqe: Opaque::new(bindings::ib_cqe {
                            done: Some(read_done::<O>),
                        }),
                        slot,
                        sinks: UnsafeCell::new(None),
                        reads: UnsafeCell::new(0),
                    }),
                    busy: Atomic::new(0),
                    index,
                    home: UnsafeCell::new(core::ptr::null()),
                    park: CountedPark::new(),
                }? Error)
            },
            n,
            GFP_KERNEL,
        )?;
        let words = n.div_ceil(PER_WORD);
        let mut claimed = KVec::with_capacity(words, GFP_KERNEL)?;
        for w in 0..words {
            // INVARIANT: the bits past the last context are claimed.
            let real = n.saturating_sub(w * PER_WORD).min(PER_WORD);
            let beyond = if real == PER_WORD {
                0
            } else {
                u64::MAX << real
            };
            claimed.push(Atomic::new(beyond), GFP_KERNEL)?;
        }
        Ok(Self {
            ctxts: ManuallyDrop::new(ctxts),
            claimed,
            _owner: PhantomData,
        })
    }

    /// How many contexts there are.
    pub fn len(&self) -> usize {
        self.ctxts.len()
    }

    /// Whether there are none (never: [`Self::new`] makes one at least).
    pub fn is_empty(&self) -> bool {
        self.ctxts.is_empty()
    }

    /// Claims a context that is not claimed, if any: its index and the
    /// right to its work (its park is idle, and the work left there by the
    /// last Call, if it left one, is the claimer's).
    pub fn claim(&self) -> Option<(usize, ParkHolder<'_, O::Work>)> {
        for (w, word) in self.claimed.iter().enumerate() {
            let mut bits = word.load(Relaxed);
            while bits != u64::MAX {
                let bit = (!bits).trailing_zeros();
                // Acquire: what the context's last user did before it gave
                // the context back (`release`).
                match word.cmpxchg(bits, bits | (1u64 << bit), Acquire) {
                    Ok(_) => {
                        // A context: the bits past the last are never
                        // clear (type invariant).
                        let ctxt = w * PER_WORD + bit as usize;
                        let c = self.ctxts.get(ctxt)?;
                        // SAFETY: This thread set the context's claim bit,
                        // which only a holder given back clears: its park
                        // is idle and no other thread may hold it.
                        return Some((ctxt, unsafe { c.park.hold() }));
                    }
                    Err(now) => bits = now,
                }
            }
        }
        None
    }

    /// Gives context `ctxt` back with the right to its work, `holder`
    /// (what [`Self::claim`] or its park's `take` gave): the park is left
    /// idle, its work as it is, for the next Call. Nothing of the holder's
    /// may be pending. A holder of another context's park is dropped with
    /// nothing given back (that context stays claimed, never held again).
    pub fn release(&self, ctxt: usize, holder: ParkHolder<'_, O::Work>) {
        let Some(c) = self.ctxts.get(ctxt) else {
            return;
        };
        if !core::ptr::eq(holder.park_of(), &c.park) {
            return;
        }
        // INVARIANT: the holder ends here, leaving the park idle, before
        // the bit says the context may be claimed.
        holder.idle();
        if let Some(word) = self.claimed.get(ctxt / PER_WORD) {
            let bit = 1u64 << (ctxt % PER_WORD);
            // Only its claimer clears a set bit: subtracting it clears it
            // alone. Release: everything the claimer did, before the next
            // claimer sees the context free.
            if word.load(Relaxed) & bit != 0 {
                word.fetch_sub(bit, Release);
            }
        }
    }

    /// The park of context `ctxt`'s work.
    pub fn park(&self, ctxt: usize) -> Option<&CountedPark<O::Work>> {
        self.ctxts.get(ctxt).map(|c| &c.park)
    }

    /// How many entries of context `ctxt` are not posted. Only completions
    /// free entries, so the one thread that posts the context's Reads
    /// sees at least this many when it posts next.
    pub fn free(&self, ctxt: usize) -> usize {
        self.ctxts.get(ctxt).map_or(0, |c| {
            READ_SLOTS.saturating_sub(c.busy.load(Acquire).count_ones() as usize)
        })
    }

    /// Whether an entry of context `ctxt` is not posted ([`Self::free`]
    /// is not zero), without counting them.
    pub fn has_free(&self, ctxt: usize) -> bool {
        self.ctxts
            .get(ctxt)
            .is_some_and(|c| c.busy.load(Acquire) & ALL_ENTRIES != ALL_ENTRIES)
    }

    /// Posts `reads` (one to [`READ_SLOTS`] RDMA Reads) into `sinks`,
    /// which must be mapped on `ep`'s device, as one chain through a free
    /// entry of context `ctxt`: the last Read alone is signaled, and its
    /// completion retires the chain (a send queue completes in order). The
    /// others have no completion entry: should one fail, the RDMA core
    /// drops its completion and the queue pair's error flushes the last
    /// one, which carries the error to the owner. The chain holds a
    /// reference on `sinks` until its completion. `Ok(false)`, with
    /// nothing posted, when every entry of the context is posted. An error
    /// comes with how many of the Reads went out (0 but in the case
    /// below): `EINVAL` for an unknown context, no Reads or too many, a
    /// range past the pages or over more than [`MAX_SGE`] of them or than
    /// the device scatters a Read over, or pages mapped on another device;
    /// `ESHUTDOWN` once the endpoint's drain started.
    ///
    /// A chain the provider takes in part (it refuses a Read after
    /// accepting those before it) has no completion to retire it: its
    /// entry stays posted and the contexts are leaked when they are
    /// dropped, as with an endpoint that was not drained, and the Reads
    /// that went out keep their send queue slots. The caller reserves send
    /// queue room for every Read first, so a provider has no reason to
    /// refuse one.
    // Never inlined: each length's lists stay in a frame of their own, not
    // in the caller's (the longest, three Reads' lists, 1.4 KiB).
    #[inline(never)]
    pub fn post_chain<const N: usize>(
        &self,
        ctxt: usize,
        ep: &Endpoint,
        sinks: &Arc<PageSinks>,
        reads: &[ChainRead; N],
    ) -> core::result::Result<bool, (Error, usize)> {
        let c = self.ctxts.get(ctxt).ok_or((EINVAL, 0))?;
        if N == 0 || N > READ_SLOTS || !Arc::ptr_eq(sinks.pd(), ep.pd()) {
            return Err((EINVAL, 0));
        }
        let max_sge_rd = ep.device_attr().max_sge_rd;
        // Sized by the chain (a 4 KiB WRITE's one Read takes one of each).
        let mut sges =
            [const { [const { MaybeUninit::<bindings::ib_sge>::uninit() }; MAX_SGE] }; N];
        let mut wrs = [const { MaybeUninit::<bindings::ib_rdma_wr>::uninit() }; N];
        for ((r, w), list) in reads.iter().zip(wrs.iter_mut()).zip(sges.iter_mut()) {
            let nsge = sinks.page_sges(r.off, r.len, list).map_err(|e| (e, 0))?;
            // The device must scatter one Read over that many entries.
            if !u32::try_from(nsge).is_ok_and(|n| n <= max_sge_rd) {
                return Err((EINVAL, 0));
            }
            // SAFETY: All-zero is a valid `ib_rdma_wr` (null pointers, no
            // flags, no completion entry); the fields that matter are set
            // below.
            let w = w.write(unsafe { core::mem::zeroed() });
            // The first `nsge` entries, which `page_sges` wrote.
            w.wr.sg_list = list.as_mut_ptr().cast();
            w.wr.num_sge = i32::try_from(nsge).map_err(|_| (EINVAL, 0))?;
            w.wr.opcode = bindings::ib_wr_opcode_IB_WR_RDMA_READ;
            w.remote_addr = r.remote_addr;
            w.rkey = r.rkey;
        }
        let Some(slot) = claim_entry(c) else {
            return Ok(false);
        };
        let entry = &c.entries[slot];
        // From here the array is reached through `chain` alone, which the
        // links point into. Its `N` elements (at least one) were written
        // above, one for each of `reads`.
        let chain = wrs.as_mut_ptr().cast::<bindings::ib_rdma_wr>();
        // SAFETY: As just said.
        unsafe {
            let last = &mut (*chain.add(N - 1)).wr;
            last.__bindgen_anon_1.wr_cqe = entry.cqe.get();
            last.send_flags = bindings::ib_send_flags_IB_SEND_SIGNALED;
            for i in 1..N {
                (*chain.add(i - 1)).wr.next = core::ptr::addr_of_mut!((*chain.add(i)).wr);
            }
        }
        // SAFETY: This thread holds the entry's bit (type invariant).
        unsafe {
            *entry.sinks.get() = Some(sinks.clone());
            *entry.reads.get() = N as u32;
        }
        // SAFETY: Only the one thread that posts the context's Reads (its
        // claimer) writes `home`, and only before any entry of it was
        // posted: no completion reads it meanwhile; reads may run beside
        // this one. INVARIANT: written once, before the first post, which
        // orders it before the completion that reads it.
        unsafe {
            if (*c.home.get()).is_null() {
                *c.home.get() = core::ptr::from_ref(self);
            }
        }
        live::inc(live::Kind::PostedWr);
        // SAFETY: The array's first element.
        let first = unsafe { core::ptr::addr_of!((*chain).wr) };
        let mut bad: *const bindings::ib_send_wr = core::ptr::null();
        let rc = match ep.start_post() {
            // SAFETY: The queue pair is live while `posting` is held; the
            // chain and its lists are valid for the call, the completion
            // entry for as long as the contexts, which outlive their
            // posted Reads (their owner drains first); the pages stay
            // mapped while the entry holds `sinks`.
            Ok(posting) => unsafe {
                bindings::rpcrdma_rs_ib_post_send(posting.qp(), first, &mut bad)
            },
            Err(e) => e.to_errno(),
        };
        if rc == 0 {
            return Ok(true);
        }
        let e = Error::from_errno(rc);
        // How many Reads went out: those ahead of the one the provider
        // refused (all of them if it names none of the chain's).
        let went = if bad.is_null() {
            0
        } else {
            (0..N)
                .position(|i| {
                    // SAFETY: `i` is below `N`: an element of the chain.
                    let wr = unsafe { core::ptr::addr_of!((*chain.add(i)).wr) };
                    core::ptr::eq(bad, wr)
                })
                .unwrap_or(N)
        };
        if went > 0 {
            // Without the Read whose completion would retire the chain:
            // the entry stays posted.
            crate::pr_err_ratelimited!(
                "rpcrdma_rs: a chain of RDMA Reads was posted in part; its context is leaked\n"
            );
            return Err((e, went));
        }
        // Not posted: no completion will come.
        live::dec(live::Kind::PostedWr);
        // SAFETY: The entry's bit is still this thread's.
        let kept = unsafe { (*entry.sinks.get()).take() };
        release_entry(c, slot);
        drop(kept);
        Err((e, 0))
    }

    /// Whether any entry of any context is posted (or being filled).
    fn any_posted(&self) -> bool {
        self.ctxts.iter().any(|c| c.busy.load(Relaxed) != 0)
    }
}

/// Takes a free entry of `c`, if any. Inlined into the post: called, it
/// cost a 4 KiB WRITE's one Read about 30 instructions (kcount).
#[inline(always)]
fn claim_entry<O: ReadCtxtsOwner>(c: &Ctxt<O>) -> Option<usize> {
    let mut busy = c.busy.load(Relaxed);
    loop {
        let slot = (!busy).trailing_zeros() as usize;
        if slot >= READ_SLOTS {
            return None;
        }
        match c.busy.cmpxchg(busy, busy | (1 << slot), Acquire) {
            Ok(_) => return Some(slot),
            Err(now) => busy = now,
        }
    }
}

/// Gives entry `slot` of `c` up (its completion ran, or it was not
/// posted).
fn release_entry<O: ReadCtxtsOwner>(c: &Ctxt<O>, slot: usize) {
    // The bit is set and only its holder clears it: subtracting it clears
    // it alone. Release: whatever the holder wrote before the entry is
    // seen free.
    c.busy.fetch_sub(1u32 << slot, Release);
}

impl<O: ReadCtxtsOwner> Drop for ReadCtxts<O> {
    fn drop(&mut self) {
        // The owner drains its endpoint first.
        // INVARIANT: never freed while the device may reach them.
        if self.any_posted() {
            crate::pr_err_ratelimited!(
                "rpcrdma_rs: read contexts dropped with Reads posted; leaked\n"
            );
            return;
        }
        // SAFETY: Dropped once, here; not used again.
        unsafe { ManuallyDrop::drop(&mut self.ctxts) };
    }
}

/// The completion of a Read posted through a context's entry.
///
/// # Safety
///
/// Called by the RDMA core for a work request whose `wr_cqe` is the `cqe`
/// of a posted entry of a context of a `ReadCtxts<O>`.
unsafe extern "C" fn read_done<O: ReadCtxtsOwner>(
    _cq: *mut bindings::ib_cq,
    wc: *mut bindings::ib_wc,
) {
    // SAFETY: `wc` is valid for the callback; posted work requests carry a
    // `wr_cqe`.
    let (w, cqe) = unsafe { (&*wc, (*wc).__bindgen_anon_1.wr_cqe) };
    // SAFETY: By the function's requirement the entry is a posted one's,
    // and the contexts outlive their posted Reads.
    let entry =
        unsafe { &*kernel::container_of!(cqe.cast::<Opaque<bindings::ib_cqe>>(), Entry, cqe) };
    // SAFETY: Entry `slot` is element `slot` of the `entries` array (type
    // invariant), which is a field of a `Ctxt<O>`.
    let c = unsafe {
        let first = core::ptr::from_ref(entry).sub(entry.slot);
        &*kernel::container_of!(first.cast::<[Entry; READ_SLOTS]>(), Ctxt<O>, entries)
    };
    // SAFETY: Written before the post (type invariant); the contexts
    // outlive their posted Reads.
    let ctxts = unsafe { &**c.home.get() };
    // SAFETY: The contexts are the `RING_OFFSET` field of their owner,
    // which lives in an `Arc` at least as long as they do (`RingIn`).
    let owner = unsafe { &*owner_of::<O, ReadCtxts<O>>(ctxts) };
    live::dec(live::Kind::PostedWr);
    let done = WorkCompletion::of(w);
    // SAFETY: Posted: its completion holds the entry's bit now.
    let (kept, reads) = unsafe { ((*entry.sinks.get()).take(), *entry.reads.get()) };
    release_entry(c, entry.slot);
    // The device is done with the pages.
    drop(kept);
    owner.read_done(c.index, &c.park, reads, &done);
}
