// SPDX-License-Identifier: GPL-2.0

//! A connection's Sends as preallocated send contexts on a free list (C
//! `svc_rdma_send_ctxt`, `sc_send_ctxts`), for a transport whose Sends
//! are posted by many threads at once and each asks for its completion:
//! a server's Replies.
//!
//! Each context is made once, the first time the list is empty, and kept
//! until the connection ends: its completion entry, its `ib_send_wr` over
//! its own scatter/gather entry, and a Send buffer mapped for its life.
//! Per Send only the length, the opcode and the key to invalidate are
//! written. A context also carries up to [`CTXT_WRITES`] RDMA Writes from
//! pages (a Reply's Write chunk pieces), each with its own work request
//! and scatter/gather list, its pages mapped until the Send completes and
//! referenced, or held by the context itself: a Reply's pages, with the
//! request's references, which the context puts in one batch when the
//! Send completes (C `sc_pages`). Those and the work
//! requests a [`SendChain`] holds (any further Writes) go ahead of the Send
//! in the same `ib_post_send`, unsignaled: the Send's completion releases
//! the context's, completes the chain's ([`complete_ahead`]) and reports
//! them all to the owner with its own ([`SendPoolOwner::sent`]). No reference
//! count is taken per Send, and the completion gives the context back
//! without a lock.
//!
//! The free list is C's `llist`: any thread pushes with a compare and
//! exchange; one at a time pops, under the lock that also counts the
//! contexts made, so a context cannot leave and come back between a pop's
//! look at the head and its exchange. Contexts are never freed while the
//! pool lives; when it goes, every one is on the free list.
//!
//! The pool is a field of the object that owns the connection
//! ([`HasSendPool`]), found from the pool by the field's offset
//! (`ring_owner`). The owner's endpoint is drained before the pool is
//! dropped, so every posted context has completed by then (every Send
//! asks for its completion, so the drain flushes them all); a pool
//! dropped with contexts posted leaks them, and says so.

use crate::rust::bindings;
use crate::rust::kext::percpu::PerCpuCount;
use crate::rust::kext::spin_lock::{new_spinlock, SpinLock};
use crate::rust::module::live;
use crate::rust::rdma::mr::unsignaled_cqe;
use crate::rust::rdma::ring_owner::{owner_of, posted_count, RingIn};
use crate::rust::rdma::send_chain::{EndNotPosted, SendChain};
use crate::rust::rdma::verbs::{
    complete_ahead, map_page_run, post_behind, unmap_page_run, CompletionHandler, DmaDir, Endpoint,
    MappedBuf, PageRange, PageRef, WorkCompletion, WorkRequest, MAX_SGE,
};
use crate::rust::sunrpc::reply_pages::HeldPages;
use crate::rust::sunrpc::svc::{ResPages, SvcRqst};
use core::cell::UnsafeCell;
use core::ptr::NonNull;
use kernel::error::to_result;
use kernel::prelude::*;
use kernel::sync::atomic::{Acquire, Atomic, Relaxed, Release};
use kernel::sync::Arc;
use kernel::types::Opaque;

/// What a transport does when its pooled Sends complete.
pub trait SendPoolOwner: Send + Sync + Sized {
    /// The handler of the work requests posted ahead of a Send (a
    /// Reply's RDMA Writes).
    type Ahead: CompletionHandler;

    /// A Send completed (or was flushed) with `wc`, and the `ahead` work
    /// requests posted before it with it; their handlers ran first. Runs
    /// on the send CQ's poller.
    fn sent(&self, ahead: u32, wc: &WorkCompletion);
}

/// An owner of a [`SendPool`] held as one of its fields ([`RingIn`]:
/// declared with [`impl_ring_in!`](crate::rust::rdma::ring_owner::impl_ring_in)).
pub trait HasSendPool: SendPoolOwner + RingIn<SendPool<Self>> {}

impl<O: SendPoolOwner + RingIn<SendPool<O>>> HasSendPool for O {}

/// One send context.
///
/// # Invariants
///
/// `cqe.done` is `pool_done::<O>`, `wr.wr_cqe` is `cqe`, `wr.sg_list` is
/// `sge`, `pool` is the pool that made it and `buf` is mapped on that
/// pool's device, all set before the context is first handed out and not
/// written again; `sge` names `buf`'s first bytes (its address and key
/// are never written again). No reference to `buf` leaves the pool, so
/// the CPU reaches it only through the context's holder. `sge`'s length,
/// `wr`'s other fields, `ahead`, the Writes in `writes` (the first
/// `nwrites`, each as [`WriteSlot`] says), `held` and `awaited` are
/// written only by the context's holder: the thread that took it from the
/// free list until it posts it or gives it back, then the completion
/// until it pushes it on the free list again. `next` is written by
/// whoever pushes it.
struct Ctxt<O: SendPoolOwner> {
    cqe: Opaque<bindings::ib_cqe>,
    wr: UnsafeCell<bindings::ib_send_wr>,
    sge: UnsafeCell<bindings::ib_sge>,
    pool: *const SendPool<O>,
    /// The next free context, while it is free.
    next: Atomic<*mut Ctxt<O>>,
    buf: Arc<MappedBuf>,
    /// The first of the work requests posted ahead of the Send, each
    /// linked to the next, while it is posted.
    ahead: UnsafeCell<Option<Arc<WorkRequest<O::Ahead>>>>,
    /// The context's own RDMA Writes: the first `nwrites` are in use.
    writes: UnsafeCell<[WriteSlot; CTXT_WRITES]>,
    nwrites: UnsafeCell<usize>,
    /// The Reply pages it holds, which Writes that took no reference of
    /// their own name.
    held: UnsafeCell<HeldPages>,
    /// Set while its Writes name Reply pages it does not hold yet.
    awaited: UnsafeCell<Option<Awaited>>,
    /// The device the Writes' pages are mapped on (`buf`'s protection
    /// domain keeps it).
    device: *mut bindings::ib_device,
    /// Whether its "DMA addresses" are kernel addresses: a mapping of
    /// pages with no reference taken leaves nothing to undo.
    virt_dma: bool,
}

/// RDMA Writes a send context carries itself: the pieces of a 256 KiB
/// READ's Write chunk from its pages (up to `MAX_SGE - 1` pages each). A
/// Reply with more goes on through a [`SendChain`].
pub const CTXT_WRITES: usize = 3;

/// One RDMA Write of a send context.
///
/// # Invariants
///
/// While in use: `wr.wr.sg_list` is `sges`, and `sges[..n]` map the
/// run's pages on the context's device for it to read; with `own_refs`,
/// `pages[..n]` are those pages, on which the slot took a reference each;
/// without, the context holds them (`held`) or, while its `awaited` is
/// set, the request whose Reply they are does, and the context is not
/// posted until it holds them.
struct WriteSlot {
    wr: bindings::ib_rdma_wr,
    sges: [bindings::ib_sge; MAX_SGE],
    pages: [*mut bindings::page; MAX_SGE],
    n: usize,
    own_refs: bool,
}

/// What keeps the pages of a context's RDMA Write until it completes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kept {
    /// A reference the Write takes on each.
    Referenced,
    /// The context itself ([`PooledSend::hold_reply_pages`]).
    Held,
}

/// The Reply pages a context's Writes name and it does not hold yet
/// ([`PooledSend::add_reply_write`]): whose they are (the address of the
/// request's first Reply page slot, [`SvcRqst::reply_slots`]) and how many
/// of them, from the first, the context must hold before it is posted.
#[derive(Clone, Copy)]
struct Awaited {
    reply: usize,
    pages: usize,
}

/// Send contexts of one connection, made as needed up to a bound.
///
/// # Invariants
///
/// Every context the pool made came from `KBox::into_raw` and is, until
/// the pool is dropped, free, held, posted or stranded: `free` is the
/// first free one (null: none), each free one names the next in `next`;
/// pushed by anyone, popped only under `made`'s lock, which counts those
/// made. `stranded` lists, the same way, those some of whose Writes were
/// posted without their Send. `posted` counts the posted ones.
#[pin_data(PinnedDrop)]
pub struct SendPool<O: SendPoolOwner> {
    #[pin]
    made: SpinLock<u32>,
    free: Atomic<*mut Ctxt<O>>,
    /// Contexts some of whose Writes were posted without their Send (a
    /// post that failed part way), linked through `next`: the device may
    /// read their pages until the drain; released with the pool.
    stranded: Atomic<*mut Ctxt<O>>,
    /// Contexts posted and not completed.
    posted: PerCpuCount,
    /// Bytes of each context's Send buffer.
    buf_len: usize,
    /// Most contexts the pool makes.
    max: u32,
}

// SAFETY: A context is accessed by its holder only (type invariants); the
// work requests it keeps are `Send` and `Sync`.
unsafe impl<O: SendPoolOwner> Send for SendPool<O> {}
// SAFETY: As above; the shared state is atomics and a lock.
unsafe impl<O: SendPoolOwner> Sync for SendPool<O> {}

impl<O: HasSendPool> SendPool<O> {
    /// A pool that makes up to `max` contexts with Send buffers of
    /// `buf_len` bytes, none made yet.
    pub fn new(buf_len: usize, max: u32) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            made <- new_spinlock!(0, "rpcrdma_rs::send_pool"),
            free: Atomic::new(core::ptr::null_mut()),
            stranded: Atomic::new(core::ptr::null_mut()),
            posted: PerCpuCount::new()?,
            buf_len,
            max,
        }? Error)
    }

    /// Bytes a Send from the pool may hold.
    pub fn buf_len(&self) -> usize {
        self.buf_len
    }

    /// Contexts made so far.
    pub fn made(&self) -> u32 {
        *self.made.lock()
    }

    /// Contexts posted and not completed.
    pub fn posted(&self) -> u32 {
        posted_count(&self.posted)
    }

    /// A free context whose buffer is mapped on `ep`'s device (the one
    /// every Send of the pool goes to), made if none is free; `None` when
    /// the pool made all it may and every one is in use, or a new one
    /// cannot be made now.
    #[inline(always)]
    pub fn get<'a>(&'a self, ep: &Endpoint) -> Option<PooledSend<'a, O>> {
        let ctxt = match self.pop() {
            Some(c) => c,
            None => self.grow(ep)?,
        };
        Some(PooledSend { pool: self, ctxt })
    }

    fn pop(&self) -> Option<&Ctxt<O>> {
        let _consumer = self.made.lock();
        let mut head = self.free.load(Acquire);
        loop {
            // SAFETY: A context the pool made lives until the pool is
            // dropped (type invariant).
            let c = unsafe { head.as_ref() }?;
            // Acquire above: the pusher wrote `next` before the head.
            let next = c.next.load(Relaxed);
            // Only this thread takes contexts off the list now, so `head`
            // still there means `next` still follows it.
            match self.free.cmpxchg(head, next, Acquire) {
                Ok(_) => return Some(c),
                Err(now) => head = now,
            }
        }
    }

    /// Gives `c`, which its holder is done with, back to the free list.
    fn push(&self, c: &Ctxt<O>) {
        Self::push_on(&self.free, c);
    }

    /// Keeps `c`, some of whose Writes went out without its Send, until
    /// the pool is dropped.
    fn strand(&self, c: &Ctxt<O>) {
        Self::push_on(&self.stranded, c);
    }

    /// Pushes `c`, which its holder gives up, on `list`.
    fn push_on(list: &Atomic<*mut Ctxt<O>>, c: &Ctxt<O>) {
        let mine = core::ptr::from_ref(c).cast_mut();
        let mut head = list.load(Relaxed);
        loop {
            c.next.store(head, Relaxed);
            // Release: `next`, and everything the holder wrote, before
            // the context is seen on the list.
            match list.cmpxchg(head, mine, Release) {
                Ok(_) => return,
                Err(now) => head = now,
            }
        }
    }

    /// Makes a context if the pool may, and hands it out.
    #[cold]
    fn grow(&self, ep: &Endpoint) -> Option<&Ctxt<O>> {
        {
            let mut made = self.made.lock();
            if *made >= self.max {
                return None;
            }
            // Counted now, so that racing threads make no more than `max`.
            *made += 1;
        }
        let made = self.make(ep);
        if made.is_none() {
            *self.made.lock() -= 1;
        }
        made
    }

    fn make(&self, ep: &Endpoint) -> Option<&Ctxt<O>> {
        let buf = ep.alloc_buf(self.buf_len, DmaDir::ToDevice).ok()?;
        // The whole buffer: a Send writes only the length of its entry.
        let sge = buf.sge(0, buf.len()).ok()?;
        let ctxt = KBox::new(
            Ctxt {
                cqe: Opaque::new(bindings::ib_cqe {
                    done: Some(pool_done::<O>),
                }),
                // SAFETY: All-zero is a valid, empty `ib_send_wr`.
                wr: UnsafeCell::new(unsafe { core::mem::zeroed() }),
                sge: UnsafeCell::new(sge),
                pool: core::ptr::from_ref(self),
                next: Atomic::new(core::ptr::null_mut()),
                buf,
                ahead: UnsafeCell::new(None),
                // SAFETY: All-zero is a valid `WriteSlot`: null pointers,
                // no entries.
                writes: UnsafeCell::new(unsafe { core::mem::zeroed() }),
                nwrites: UnsafeCell::new(0),
                held: UnsafeCell::new(HeldPages::new()),
                awaited: UnsafeCell::new(None),
                device: ep.pd().device_ptr(),
                virt_dma: ep.pd().virt_dma(),
            },
            GFP_KERNEL,
        )
        .ok()?;
        // INVARIANT: from `KBox::into_raw`, held by this thread; freed with
        // the pool.
        let c = KBox::into_raw(ctxt);
        // SAFETY: `c` is valid and not shared yet. INVARIANT: the entry
        // and list are the context's own, at the address it keeps.
        unsafe {
            let wr = &mut *(*c).wr.get();
            wr.__bindgen_anon_1.wr_cqe = Opaque::cast_into(&(*c).cqe);
            wr.sg_list = (*c).sge.get();
            wr.num_sge = 1;
            Some(&*c)
        }
    }
}

#[pinned_drop]
impl<O: SendPoolOwner> PinnedDrop for SendPool<O> {
    fn drop(self: Pin<&mut Self>) {
        // The owner drains its endpoint first, so every context is free.
        // INVARIANT: one that is not is never freed: the device may still
        // read it, or its completion come.
        // After the drain: every completion ran before it returned.
        let posted = posted_count(&self.posted);
        if posted != 0 {
            crate::pr_err_ratelimited!(
                "rpcrdma_rs: a send pool dropped with {} Sends posted; leaked\n",
                posted
            );
            return;
        }
        for list in [&self.free, &self.stranded] {
            let mut at = list.xchg(core::ptr::null_mut(), Acquire);
            while !at.is_null() {
                // SAFETY: Free, or stranded and the endpoint drained since,
                // so no longer reachable by the device or a completion;
                // made by `KBox::into_raw`; taken off its list once.
                let c = unsafe { KBox::from_raw(at) };
                at = c.next.load(Relaxed);
                // SAFETY: As just said; a free context has none.
                unsafe { c.release_writes() };
                drop(c);
            }
        }
    }
}

impl<O: SendPoolOwner> Ctxt<O> {
    /// Unmaps (and puts) the pages of the context's Writes and lets go
    /// of what kept them.
    ///
    /// # Safety
    ///
    /// The caller holds the context, and no posted work request names
    /// the Writes' pages any more.
    #[inline]
    unsafe fn release_writes(&self) {
        // SAFETY: Held (the caller's requirement). A context with no
        // Writes awaits no pages, but may hold some (given before its
        // Writes were added).
        if unsafe { *self.nwrites.get() == 0 && (*self.held.get()).is_empty() } {
            return;
        }
        // SAFETY: Held (the caller's requirement).
        unsafe { self.release_writes_slow() }
    }

    /// [`Self::release_writes`] of a context with Writes.
    ///
    /// # Safety
    ///
    /// As [`Self::release_writes`].
    unsafe fn release_writes_slow(&self) {
        // SAFETY: Held (the caller's requirement).
        let (writes, n) = unsafe { (&mut *self.writes.get(), &mut *self.nwrites.get()) };
        for w in writes.iter_mut().take(core::mem::take(n)) {
            if !w.own_refs && self.virt_dma {
                // Nothing mapped, nothing referenced: no helper call.
                live::sub(live::Kind::MappedBuf, w.n);
                continue;
            }
            let held = match w.own_refs {
                true => w.pages.as_ptr(),
                false => core::ptr::null(),
            };
            // SAFETY: `sges[..n]` map the run's pages on `device` and,
            // with `own_refs`, `pages[..n]` are those pages, referenced
            // by the slot (its invariant); nothing uses the mappings any
            // more (the caller's requirement); `nwrites` is 0 now, so
            // this runs once.
            unsafe { unmap_page_run(self.device, held, w.sges.as_ptr(), w.n) };
        }
        // SAFETY: Held (the caller's requirement); the Writes naming the
        // pages were unmapped above.
        unsafe {
            *self.awaited.get() = None;
            (*self.held.get()).release();
        }
    }

    /// Links the context's Writes in use one to the next and, behind the
    /// last, to `then` (first and last of a list); returns how many there
    /// are and the whole list's first and last.
    ///
    /// # Safety
    ///
    /// The caller holds the context; `then` is a list as
    /// [`post_behind`] requires of a chain.
    unsafe fn link_writes(
        &self,
        then: Option<(*mut bindings::ib_send_wr, *mut bindings::ib_send_wr)>,
    ) -> (
        usize,
        Option<(*mut bindings::ib_send_wr, *mut bindings::ib_send_wr)>,
    ) {
        // SAFETY: Held (the caller's requirement).
        let (writes, n) = unsafe { (&mut *self.writes.get(), *self.nwrites.get()) };
        let n = n.min(CTXT_WRITES);
        let Some(last) = n.checked_sub(1) else {
            return (0, then);
        };
        let base = writes.as_mut_ptr();
        // SAFETY: `i + 1 <= last < CTXT_WRITES`: within `writes`, which
        // the context holds; each entry is written through `base` only.
        unsafe {
            for i in 0..last {
                (*base.add(i)).wr.wr.next = &raw mut (*base.add(i + 1)).wr.wr;
            }
            let first = &raw mut (*base).wr.wr;
            let tail = &raw mut (*base.add(last)).wr.wr;
            match then {
                Some((f, l)) => {
                    (*tail).next = f;
                    (n, Some((first, l)))
                }
                None => {
                    (*tail).next = core::ptr::null_mut();
                    (n, Some((first, tail)))
                }
            }
        }
    }
}

/// A context taken from a [`SendPool`], held until it is posted; given
/// back to the free list if it is dropped instead.
pub struct PooledSend<'a, O: HasSendPool> {
    pool: &'a SendPool<O>,
    ctxt: &'a Ctxt<O>,
}

impl<O: HasSendPool> Drop for PooledSend<'_, O> {
    fn drop(&mut self) {
        // SAFETY: Held and not posted.
        unsafe { self.ctxt.release_writes() };
        self.pool.push(self.ctxt);
    }
}

impl<O: HasSendPool> PooledSend<'_, O> {
    /// Lends the Send buffer to `fill`, which writes the Send in place and
    /// returns its length.
    #[inline(always)]
    pub fn fill(&mut self, fill: impl FnOnce(&mut [u8]) -> Result<usize>) -> Result<usize> {
        let len = fill(self.bytes()?)?;
        self.filled(len)?;
        Ok(len)
    }

    /// The Send buffer's bytes, to write the Send in place;
    /// [`Self::filled`] then records its length. As [`Self::fill`] without
    /// a closure between the caller and the bytes.
    #[inline(always)]
    pub fn bytes(&mut self) -> Result<&mut [u8]> {
        // SAFETY: The context is held (type invariant of `Ctxt`), and its
        // buffer is reached only through its holder: the slice borrows the
        // holder mutably, so no other access to the buffer starts while it
        // is used.
        unsafe { self.ctxt.buf.bytes_held() }
    }

    /// Records that the Send is the first `len` bytes written through
    /// [`Self::bytes`], and makes them visible to the device; `EINVAL`
    /// past the buffer's end.
    #[inline(always)]
    pub fn filled(&mut self, len: usize) -> Result {
        self.ctxt.buf.filled_held(len)?;
        // `filled_held` bounded `len` by the buffer's length: the entry
        // names the buffer's first `len` bytes.
        let length = u32::try_from(len)?;
        // SAFETY: The context is held (type invariant of `Ctxt`).
        unsafe { (*self.ctxt.sge.get()).length = length };
        Ok(())
    }

    /// Adds an RDMA Write of `pages` to the peer's `rkey` at
    /// `remote_addr`, ahead of the Send, its pages mapped on `ep`'s device
    /// (the pool's) for it to read and referenced until the Send
    /// completes: one helper call for them all. `Ok(false)`, with nothing
    /// done, when the context has no Write left.
    #[inline(always)]
    pub fn add_write(
        &mut self,
        ep: &Endpoint,
        pages: PageRange<'_>,
        remote_addr: u64,
        rkey: u32,
    ) -> Result<bool> {
        self.add_write_kept(ep, &pages, Kept::Referenced, remote_addr, rkey)
    }

    /// As [`Self::add_write`], a Write straight from a Reply's pages
    /// (`pages`), which takes no reference: the context is to hold the
    /// Reply's pages ([`Self::hold_reply_pages`], C
    /// `svc_rdma_save_io_pages`) and refuses to be posted until it does.
    /// `EINVAL`, with nothing done, for pages of another Reply than its
    /// other Writes'.
    #[inline(always)]
    pub fn add_reply_write(
        &mut self,
        ep: &Endpoint,
        pages: &ResPages<'_>,
        remote_addr: u64,
        rkey: u32,
    ) -> Result<bool> {
        let (reply, reach) = pages.reply_slots()?;
        // SAFETY: Held (type invariant of `Ctxt`).
        let awaited = unsafe { &mut *self.ctxt.awaited.get() };
        let want = match *awaited {
            Some(a) if a.reply != reply => return Err(EINVAL),
            Some(a) => a.pages.max(reach),
            None => reach,
        };
        let added = self.add_write_kept(ep, &pages.range()?, Kept::Held, remote_addr, rkey)?;
        if added {
            *awaited = Some(Awaited { reply, pages: want });
        }
        Ok(added)
    }

    /// Whether Writes of the context name Reply pages it does not hold
    /// yet ([`Self::hold_reply_pages`]).
    pub fn awaits_pages(&self) -> bool {
        // SAFETY: Held (type invariant of `Ctxt`).
        unsafe { (*self.ctxt.awaited.get()).is_some() }
    }

    /// Takes the Reply pages of `rqst` (all of them, `rq_respages ..
    /// rq_next_page`), with their references, from the request, to put
    /// them when the Send completes, or when the context is given back
    /// unposted (C `svc_rdma_save_io_pages`). Called once the Reply's pages
    /// are no longer read. `EINVAL`, with nothing moved, unless they are
    /// the pages its Writes from a Reply name ([`Self::add_reply_write`]);
    /// `ENOMEM` when its array cannot grow to hold them.
    pub fn hold_reply_pages(&mut self, rqst: &mut SvcRqst) -> Result {
        // SAFETY: Held (type invariant of `Ctxt`).
        let (held, awaited) =
            unsafe { (&mut *self.ctxt.held.get(), &mut *self.ctxt.awaited.get()) };
        let (reply, n) = rqst.reply_slots();
        if let Some(a) = *awaited {
            if a.reply != reply || a.pages > n {
                return Err(EINVAL);
            }
        }
        rqst.give_reply_pages_to(held)?;
        *awaited = None;
        Ok(())
    }

    /// Gives the references of `refs` to the context, as
    /// [`Self::hold_reply_pages`] gives a Reply's (the KUnit suite's
    /// pages); `ENOMEM`, with `refs` dropped, when it cannot hold them.
    pub fn hold_refs(&mut self, refs: KVec<PageRef>) -> Result {
        // SAFETY: Held (type invariant of `Ctxt`).
        let held = unsafe { &mut *self.ctxt.held.get() };
        held.take_refs(refs)
    }

    /// As [`Self::add_write`], from the pages the context holds: bytes
    /// `[off, off + len)` counted from the first byte of its held page
    /// `first`. No reference is taken: the context holds the pages until
    /// the Write has completed.
    pub fn add_held_write(
        &mut self,
        ep: &Endpoint,
        (first, off, len): (usize, usize, usize),
        remote_addr: u64,
        rkey: u32,
    ) -> Result<bool> {
        // SAFETY: Held (type invariant of `Ctxt`); `held` is only read
        // while the Write is added, and written by no one else meanwhile.
        let held = unsafe { &*self.ctxt.held.get() };
        let pages = held.range(first, off, len)?;
        self.add_write_kept(ep, &pages, Kept::Held, remote_addr, rkey)
    }

    /// [`Self::add_write`] of `pages`, which `kept_by` keeps.
    #[inline(always)]
    fn add_write_kept(
        &mut self,
        ep: &Endpoint,
        pages: &PageRange<'_>,
        kept_by: Kept,
        remote_addr: u64,
        rkey: u32,
    ) -> Result<bool> {
        let c = self.ctxt;
        // SAFETY: Held (type invariant of `Ctxt`).
        let (writes, nwrites) = unsafe { (&mut *c.writes.get(), &mut *c.nwrites.get()) };
        let Some(w) = writes.get_mut(*nwrites) else {
            return Ok(false);
        };
        let n = pages.page_count();
        if n > MAX_SGE || n > ep.max_send_sge() {
            return Err(EINVAL);
        }
        let own_refs = kept_by == Kept::Referenced;
        let held = match own_refs {
            true => w.pages.as_mut_ptr(),
            false => core::ptr::null_mut(),
        };
        // SAFETY: `sges` and `pages` have room for `MAX_SGE >= n`
        // entries. On success the pages are mapped into `sges[..n]` and,
        // with `held` not null, referenced into `pages[..n]`; on an error
        // nothing is left mapped or taken.
        unsafe { map_page_run(ep.pd(), pages, w.sges.as_mut_ptr(), held)? };
        w.n = n;
        w.own_refs = own_refs;
        // INVARIANT: the list is the slot's own.
        w.wr.wr.__bindgen_anon_1.wr_cqe = unsignaled_cqe();
        w.wr.wr.sg_list = w.sges.as_mut_ptr();
        w.wr.wr.num_sge = n as i32;
        w.wr.wr.opcode = bindings::ib_wr_opcode_IB_WR_RDMA_WRITE;
        w.wr.wr.send_flags = 0;
        w.wr.wr.next = core::ptr::null_mut();
        w.wr.remote_addr = remote_addr;
        w.wr.rkey = rkey;
        *nwrites += 1;
        Ok(true)
    }

    /// How many Writes of its own the context carries.
    pub fn writes(&self) -> usize {
        // SAFETY: Held.
        unsafe { *self.ctxt.nwrites.get() }
    }

    /// Posts the Send of what [`Self::fill`] wrote, with invalidation of
    /// `inv` if given, on `ep` (the pool's device) behind the work
    /// requests waiting in `chain`, with one `ib_post_send`; the Send asks
    /// for its completion, which stands for the chain's. On failure
    /// returns how many of the chain went out (as
    /// [`SendChain::post_ahead_of`]); the Send did not, and its context is
    /// free again.
    pub fn post_behind(
        self,
        ep: &Endpoint,
        chain: &mut SendChain<O::Ahead>,
        inv: Option<u32>,
    ) -> core::result::Result<(), (Error, usize)> {
        // Its Writes' pages would be the request's, which sunrpc puts once
        // the Reply is sent: not posted.
        if self.awaits_pages() {
            return Err((EINVAL, 0));
        }
        let c = self.ctxt;
        let pool = self.pool;
        // SAFETY: Held; the entry and list are the context's own (type
        // invariant of `Ctxt`).
        let wr = unsafe {
            let wr = &mut *c.wr.get();
            wr.next = core::ptr::null_mut();
            let (opcode, key) = match inv {
                Some(key) => (bindings::ib_wr_opcode_IB_WR_SEND_WITH_INV, key),
                None => (bindings::ib_wr_opcode_IB_WR_SEND, 0),
            };
            wr.opcode = opcode;
            wr.ex.invalidate_rkey = key;
            wr.send_flags = bindings::ib_send_flags_IB_SEND_SIGNALED;
            NonNull::from(wr)
        };
        // Some of the context's own Writes went out but not the Send: no
        // completion will give the context back.
        let mut stranded = false;
        let res = chain.post_ahead_of(ep, |first, ahead| {
            // Before the post: the completion may come before it returns.
            // SAFETY: Held.
            unsafe { *c.ahead.get() = first };
            // SAFETY: Held; `ahead` is as `post_ahead_of` promises.
            let (own, chained) = unsafe { c.link_writes(ahead) };
            let (rc, chain_posted) = match ep.start_post() {
                Ok(posting) => {
                    pool.posted.add(1);
                    let mut chain_posted = 0;
                    // SAFETY: The work request is the context's, its entry
                    // and list live as long as the pool, which outlives
                    // its posted contexts, and its buffer and its Writes'
                    // pages stay mapped until it completes; `chained`
                    // links the context's Writes, then `ahead`.
                    let rc =
                        unsafe { post_behind(&posting, wr.as_ptr(), chained, &mut chain_posted) };
                    if rc == 0 {
                        return Ok(());
                    }
                    // Not posted: no completion will come for it.
                    pool.posted.add(-1);
                    (rc, chain_posted)
                }
                Err(e) => (e.to_errno(), 0),
            };
            stranded = chain_posted > 0 && own > 0;
            Err(EndNotPosted {
                error: to_result(rc).err().unwrap_or(EIO),
                // Counted from the first of the context's Writes.
                chain_posted: chain_posted.saturating_sub(own),
                // SAFETY: Not posted: still held.
                first: unsafe { (*c.ahead.get()).take() },
            })
        });
        if res.is_ok() {
            // Posted: the completion gives the context back.
            core::mem::forget(self);
        } else if stranded {
            // Kept until the pool is dropped, after the drain.
            pool.strand(c);
            core::mem::forget(self);
        }
        res
    }
}

/// Completion of a pooled Send: completes the work requests posted ahead
/// of it, tells the owner, and frees the context.
///
/// # Safety
///
/// Called by the RDMA core with a valid completion whose `wr_cqe` is the
/// `cqe` of a context of a `SendPool<O>` posted by
/// [`PooledSend::post_behind`].
unsafe extern "C" fn pool_done<O: HasSendPool>(
    _cq: *mut bindings::ib_cq,
    wc: *mut bindings::ib_wc,
) {
    // SAFETY: `wc` is valid for the callback; posted work requests carry a
    // `wr_cqe`.
    let (w, cqe) = unsafe { (&*wc, (*wc).__bindgen_anon_1.wr_cqe) };
    // SAFETY: By the function's requirement the entry is a context's.
    let c =
        unsafe { &*kernel::container_of!(cqe.cast::<Opaque<bindings::ib_cqe>>(), Ctxt<O>, cqe) };
    // SAFETY: Set when the context was made; the pool outlives its posted
    // contexts.
    let pool = unsafe { &*c.pool };
    let mut done = WorkCompletion::of(w);
    // SAFETY: Posted: the completion side holds the context now.
    let (first, own) = unsafe { ((*c.ahead.get()).take(), *c.nwrites.get()) };
    // Most Replies have no chain ahead (their Writes are the context's own).
    let ahead = complete_ahead(first, &done);
    let ahead = ahead.saturating_add(u32::try_from(own).unwrap_or(u32::MAX));
    done.covers = ahead.saturating_add(1);
    // SAFETY: The pool is the `RING_OFFSET` field of its owner, alive while
    // it is (`RingIn`).
    let owner = unsafe { &*owner_of::<O, SendPool<O>>(pool) };
    owner.sent(ahead, &done);
    // SAFETY: Completed: the device is done with the Writes' pages.
    unsafe { c.release_writes() };
    // Free before it stops counting as posted: a pool dropped after the
    // drain finds every context on the list.
    pool.push(c);
    pool.posted.add(-1);
}
