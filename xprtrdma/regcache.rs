// SPDX-License-Identifier: GPL-2.0

//! The client registration cache (`memreg=cache`, opt-in): the design
//! papers' third client strategy. Registrations of the pages an I/O names
//! (the `xdr_buf` page array: O_DIRECT user buffers, page-cache pages) are
//! kept across RPCs, so that I/O from the same pages again posts neither
//! REG_MR nor LOCAL_INV.
//!
//! - Keyed by runs of physically contiguous pages (page frame numbers, the
//!   access the server gets folded in), never by virtual address: each run
//!   is one MR ([`RunMr`]) that holds a reference on its pages while
//!   cached, so a cached steering tag never names a page that was freed
//!   and reused.
//! - A chunk's head and tail (kmalloc'd memory that shares its pages with
//!   other objects) are never cached: they use the connection's MR pool as
//!   `memreg=fmr` does.
//! - Replacement by MRRC's size-and-recency rule
//!   ([`crate::proto::regcache_policy`], [`Policy::MRE`]); lookups go
//!   through an index by first page, so a hit costs `O(log n)`.
//! - Evicted entries are invalidated in one LOCAL_INV chain; an entry an
//!   RPC in flight still uses is invalidated once that RPC completes.
//!   Entries also go when the cache passes `cache_max_mb`, when the memory
//!   shrinker asks, and at disconnect (the queue pair is drained first).
//! - The connection does not offer remote invalidation: a server that
//!   invalidated a cached steering tag would cost the entry.
//!
//! The trade-off: while an entry is cached, the server can read (Read
//! chunks) or write (Write and Reply chunks) its whole pages at any time,
//! not only during the RPC that offered them.

use super::conn::Conn;
use super::reg::{counters, Reg, RegList, Segs, Span, Strategy};
use crate::proto::msg::Segment;
use crate::proto::planner::XdrBufShape;
use crate::proto::regcache_policy::{Cache, Entry, PageRun, Policy};
use crate::rust::memalloc::NoIoScope;
use crate::rust::run_mr::RunMr;
use crate::rust::shrinker::{ObjectShrinker, ShrinkObject};
use crate::rust::verbs::{CompletionHandler, WorkCompletion, WorkRequest};
use crate::rust::xprt::Rqst;
use core::cmp::Reverse;
use kernel::alloc::{Flags, KVec, VVec};
use kernel::new_spinlock;
use kernel::prelude::*;
use kernel::rbtree::{RBTree, RBTreeNodeReservation};
use kernel::sync::atomic::{Atomic, Relaxed};
use kernel::sync::{Arc, ArcBorrow, Completion, SpinLock};

/// Most registrations (MRs) one connection's cache holds.
const MAX_ENTRIES: usize = 1024;
/// Most pages of one cached run (one MR); longer runs are split.
const MAX_RUN_PAGES: u32 = 64;
/// Unmapped MRs kept for the next misses instead of being deregistered.
const SPARE_MRS: usize = 32;
/// Index entries the cursor looks at, from the closest first page down,
/// for one containing the run (overlapping entries are rare).
const LOOKUP_PROBES: usize = 4;
/// The key bit of runs the server may write: read-only and writable
/// registrations of the same pages are separate entries. Page frame
/// numbers never reach it.
const WRITABLE_KEY: u64 = 1 << 63;
const PAGE_SIZE: u32 = kernel::page::PAGE_SIZE as u32;

/// Module-wide counters of the cache (debugfs `client_cache`).
pub(crate) struct CacheCounters {
    entries: Atomic<i64>,
    pinned_bytes: Atomic<i64>,
    hits: Atomic<u64>,
    misses: Atomic<u64>,
    registrations: Atomic<u64>,
    invalidations: Atomic<u64>,
    invalidation_batches: Atomic<u64>,
    evictions: Atomic<u64>,
    shrinker_evictions: Atomic<u64>,
    remote_invalidations: Atomic<u64>,
}

static COUNTERS: CacheCounters = CacheCounters {
    entries: Atomic::new(0),
    pinned_bytes: Atomic::new(0),
    hits: Atomic::new(0),
    misses: Atomic::new(0),
    registrations: Atomic::new(0),
    invalidations: Atomic::new(0),
    invalidation_batches: Atomic::new(0),
    evictions: Atomic::new(0),
    shrinker_evictions: Atomic::new(0),
    remote_invalidations: Atomic::new(0),
};

/// Writes the debugfs view of the cache counters.
pub(crate) fn show(f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
    let c = &COUNTERS;
    writeln!(
        f,
        "transports entries pinned_bytes hits misses registrations invalidations invalidation_batches evictions shrinker_evictions remote_invalidations"
    )?;
    writeln!(
        f,
        "{} {} {} {} {} {} {} {} {} {} {}",
        counters(Strategy::Cache).transports.load(Relaxed),
        c.entries.load(Relaxed),
        c.pinned_bytes.load(Relaxed),
        c.hits.load(Relaxed),
        c.misses.load(Relaxed),
        c.registrations.load(Relaxed),
        c.invalidations.load(Relaxed),
        c.invalidation_batches.load(Relaxed),
        c.evictions.load(Relaxed),
        c.shrinker_evictions.load(Relaxed),
        c.remote_invalidations.load(Relaxed)
    )
}

/// Bytes of `pages` pages, for the pinned counter.
fn bytes(pages: u32) -> i64 {
    i64::from(pages).saturating_mul(i64::from(PAGE_SIZE))
}

/// One use of a cache entry by a request, kept until its reply.
#[derive(Clone, Copy, Debug)]
pub(super) struct CacheUse {
    id: u32,
    serial: u64,
    /// A REG_MR was posted for it with this request: its send queue slot
    /// is freed by the request's Send, or by an invalidation if the Send
    /// never goes.
    pub(super) reg_slot: bool,
}

/// A cached registration.
struct Slot {
    mr: RunMr,
    key: PageRun,
    serial: u64,
    /// Requests in flight that advertised it.
    users: u32,
}

/// A registration on its way out: invalidated once no request uses it.
struct Doomed {
    mr: RunMr,
    serial: u64,
    users: u32,
    /// REG_MR slots nothing else gives back (an abandoned request's).
    owed_slots: u32,
}

/// Index key of a cached run: sorted in reverse, so that the lower bound
/// of a page is the entry with the largest first page not above it.
type IndexKey = Reverse<(u64, u32)>;

fn index_key(run: PageRun) -> IndexKey {
    Reverse((run.first, run.pages))
}

/// The cache of one connection.
///
/// # Invariants
///
/// For every entry of `policy`, `slots[id]` holds its MR, `index` maps its
/// key to `id`, and nothing else is in either. `pinned` is the number of
/// pages of `slots`, `doomed` and the MRs of invalidation chains in flight.
pub(super) struct CacheState {
    policy: Cache<VVec<Entry>, VVec<u32>>,
    slots: VVec<Option<Slot>>,
    index: RBTree<IndexKey, u32>,
    doomed: KVec<Doomed>,
    /// Scratch for the policy's victims.
    victims: VVec<Entry>,
    spare: KVec<RunMr>,
    next_serial: u64,
    pinned: u64,
}

impl CacheState {
    /// An empty cache of `capacity_pages` pages.
    pub(super) fn new(capacity_pages: u64) -> Result<Self> {
        let entries = VVec::from_elem(Entry::default(), MAX_ENTRIES, GFP_KERNEL)?;
        let positions = VVec::from_elem(0u32, MAX_ENTRIES, GFP_KERNEL)?;
        let mut slots = VVec::with_capacity(MAX_ENTRIES, GFP_KERNEL)?;
        for _ in 0..MAX_ENTRIES {
            slots.push(None, GFP_KERNEL)?;
        }
        Ok(Self {
            policy: Cache::new(entries, positions, capacity_pages, Policy::MRE),
            slots,
            index: RBTree::new(),
            // Room for a full cache's worth of victims without allocating
            // under the lock; more grow with GFP_ATOMIC.
            doomed: KVec::with_capacity(MAX_ENTRIES, GFP_KERNEL)?,
            victims: VVec::from_elem(Entry::default(), MAX_ENTRIES, GFP_KERNEL)?,
            spare: KVec::with_capacity(SPARE_MRS, GFP_KERNEL)?,
            next_serial: 0,
            pinned: 0,
        })
    }

    /// The cached entry that contains `key`, if any.
    fn find(&mut self, key: PageRun) -> Option<u32> {
        let mut cur = self
            .index
            .cursor_lower_bound_mut(&Reverse((key.first, u32::MAX)))?;
        for _ in 0..LOOKUP_PROBES {
            let (k, id) = cur.current();
            let run = PageRun {
                first: k.0 .0,
                pages: k.0 .1,
            };
            if run.contains(&key) {
                return Some(*id);
            }
            // The next entry in reverse order starts at a lower page.
            cur = cur.move_next()?;
        }
        None
    }

    fn slot_mut(&mut self, id: u32) -> Option<&mut Slot> {
        self.slots.get_mut(usize::try_from(id).ok()?)?.as_mut()
    }

    fn next_serial(&mut self) -> u64 {
        self.next_serial = self.next_serial.wrapping_add(1);
        self.next_serial
    }

    /// Takes `id`'s entry out of the policy and dooms it (see
    /// [`Self::doom_slot`]).
    fn doom(&mut self, id: u32) -> Option<RunMr> {
        self.policy.remove_id(id);
        self.doom_slot(id)
    }

    /// Takes the entry the policy let go as `id` out of the slots and the
    /// index and dooms it. A registration that cannot be tracked (no
    /// atomic memory) is handed back, to be deregistered outside the lock.
    fn doom_slot(&mut self, id: u32) -> Option<RunMr> {
        let slot = self
            .slots
            .get_mut(usize::try_from(id).ok()?)
            .and_then(Option::take)?;
        self.index.remove(&index_key(slot.key));
        COUNTERS.entries.add(-1, Relaxed);
        self.push_doomed(Doomed {
            mr: slot.mr,
            serial: slot.serial,
            users: slot.users,
            owed_slots: 0,
        })
    }

    fn push_doomed(&mut self, d: Doomed) -> Option<RunMr> {
        let d = match self.doomed.push_within_capacity(d) {
            Ok(()) => return None,
            Err(e) => e.0,
        };
        // Growing under the lock: no sleeping allocation.
        if self.doomed.reserve(1, GFP_ATOMIC).is_err() {
            return Some(d.mr);
        }
        self.doomed.push_within_capacity(d).err().map(|e| e.0.mr)
    }

    /// Drops one use of the registration `u` names. A steering tag the
    /// server invalidated (`inv_rkey`; never offered) costs its entry.
    fn release(&mut self, u: &CacheUse, inv_rkey: Option<u32>, lost: &mut Option<RunMr>) {
        if let Some(slot) = self.slot_mut(u.id).filter(|s| s.serial == u.serial) {
            slot.users = slot.users.saturating_sub(1);
            slot.mr.sync_for_cpu();
            if inv_rkey.is_some_and(|k| k == slot.mr.segment().handle) {
                COUNTERS.remote_invalidations.add(1, Relaxed);
                *lost = self.doom(u.id);
            }
            return;
        }
        if let Some(d) = self.doomed.iter_mut().find(|d| d.serial == u.serial) {
            d.users = d.users.saturating_sub(1);
            d.mr.sync_for_cpu();
        }
    }

    /// Moves up to `out`'s capacity of the doomed registrations no request
    /// uses to `out`.
    fn take_idle(&mut self, out: &mut KVec<Doomed>) {
        let mut i = 0usize;
        while i < self.doomed.len() && out.len() < out.capacity() {
            if self.doomed.get(i).is_some_and(|d| d.users == 0) {
                if let Ok(d) = self.doomed.remove(i) {
                    // Capacity was checked by the loop condition.
                    if let Err(e) = out.push_within_capacity(d) {
                        let _ = self.doomed.push_within_capacity(e.0);
                        break;
                    }
                    continue;
                }
            }
            i = i.saturating_add(1);
        }
    }

    /// Caches `mr` (registered for `key`), in use by one request, after
    /// evicting what the policy picks; victims that cannot be tracked go
    /// to `lost`.
    fn insert(
        &mut self,
        key: PageRun,
        mr: RunMr,
        node: RBTreeNodeReservation<IndexKey, u32>,
        lost: &mut KVec<RunMr>,
    ) -> CacheUse {
        let serial = self.next_serial();
        self.pinned = self.pinned.saturating_add(u64::from(mr.pages()));
        COUNTERS.pinned_bytes.add(bytes(mr.pages()), Relaxed);
        // Another request registered the same run meanwhile: this copy
        // serves its own request and is invalidated after it.
        let dup = self.index.get(&index_key(key)).is_some();
        let ins = if dup {
            None
        } else {
            self.policy.insert(key, &mut self.victims).ok()
        };
        let Some(ins) = ins else {
            let d = Doomed {
                mr,
                serial,
                users: 1,
                owed_slots: 0,
            };
            if let Some(m) = self.push_doomed(d) {
                stash(lost, m);
            }
            return CacheUse {
                id: u32::MAX,
                serial,
                reg_slot: true,
            };
        };
        COUNTERS.evictions.add(ins.evicted as u64, Relaxed);
        for i in 0..ins.evicted {
            // The policy already let them go (the newcomer may have one of
            // their identifiers there); the slots and index follow.
            let Some(id) = self.victims.get(i).map(|v| v.id) else {
                break;
            };
            if let Some(m) = self.doom_slot(id) {
                stash(lost, m);
            }
        }
        if let Some(s) = usize::try_from(ins.id)
            .ok()
            .and_then(|i| self.slots.get_mut(i))
        {
            *s = Some(Slot {
                mr,
                key,
                serial,
                users: 1,
            });
        }
        self.index.insert(node.into_node(index_key(key), ins.id));
        COUNTERS.entries.add(1, Relaxed);
        CacheUse {
            id: ins.id,
            serial,
            reg_slot: true,
        }
    }
}

/// Completion of a LOCAL_INV chain of evicted registrations: their pages
/// are unmapped and released, the MRs kept for reuse or deregistered.
#[pin_data]
struct EvictDone {
    conn: Arc<Conn>,
    /// Send queue slots its completion frees: the chain's, and REG_MRs'
    /// of abandoned requests.
    slots: Atomic<u32>,
    #[pin]
    evicted: SpinLock<Option<KVec<Doomed>>>,
    /// Completed for a caller that waits for the chain.
    #[pin]
    done: Completion,
}

impl CompletionHandler for Arc<EvictDone> {
    fn complete(&self, _wr: &Arc<WorkRequest<Self>>, wc: &WorkCompletion) {
        let _noio = NoIoScope::new();
        let taken = self.evicted.lock().take();
        if let Some(evicted) = taken {
            self.conn.slots.give(self.slots.load(Relaxed));
            // Flushed or failed: the tags' state is unknown, so the MRs are
            // deregistered as they drop (which revokes them), not reused.
            self.conn.retire(evicted, wc.is_ok());
        }
        self.done.complete_all();
    }
}

impl Conn {
    /// `memreg=cache`: registers `span`: its page-array part through the
    /// cache, its head and tail parts with pool MRs.
    pub(super) fn register_cached(
        &self,
        rqst: &Rqst<'_>,
        span: Span,
        regs: &mut RegList,
        segs: &mut Segs,
    ) -> Result {
        let info = rqst.info();
        let shape = if span.rcv { info.rcv } else { info.snd };
        let end = span.offset.checked_add(span.len).ok_or(EINVAL)?;
        let pages_start = shape.head_len;
        let pages_end = pages_start.checked_add(shape.page_len).ok_or(EINVAL)?;
        let mut at = span.offset;
        while at < end {
            let in_pages = at >= pages_start && at < pages_end;
            let stop = if in_pages {
                pages_end.min(end)
            } else if at < pages_start {
                pages_start.min(end)
            } else {
                end
            };
            if in_pages {
                let from = at - pages_start;
                self.register_page_runs(rqst, span.rcv, &shape, from, stop - at, regs, segs)?;
            } else {
                // Head or tail: pool MRs, invalidated after the reply.
                let part = Span {
                    offset: at,
                    len: stop - at,
                    ..span
                };
                self.register_mrs(rqst, part, regs, segs)?;
            }
            at = stop;
        }
        Ok(())
    }

    /// Registers `len` bytes from `at` of the page array's data, one
    /// segment per run of physically contiguous pages.
    #[expect(clippy::too_many_arguments)]
    fn register_page_runs(
        &self,
        rqst: &Rqst<'_>,
        rcv: bool,
        shape: &XdrBufShape,
        at: u32,
        len: u32,
        regs: &mut RegList,
        segs: &mut Segs,
    ) -> Result {
        if len == 0 {
            return Ok(());
        }
        let start = shape.page_base.checked_add(at).ok_or(EINVAL)?;
        let end = start.checked_add(len).ok_or(EINVAL)?;
        let last = (end - 1) / PAGE_SIZE;
        let mut i = start / PAGE_SIZE;
        while i <= last {
            let pfn = rqst.page_pfn(rcv, i).ok_or(EINVAL)?;
            let mut n = 1u32;
            while i + n <= last
                && n < MAX_RUN_PAGES
                && rqst.page_pfn(rcv, i + n) == pfn.checked_add(u64::from(n))
            {
                n += 1;
            }
            let from = start.max(i * PAGE_SIZE);
            let to = end.min((i + n).saturating_mul(PAGE_SIZE));
            let key = PageRun {
                first: if rcv { pfn | WRITABLE_KEY } else { pfn },
                pages: n,
            };
            let piece = (from - i * PAGE_SIZE, to - from);
            self.use_run(rqst, rcv, i, key, piece, regs, segs)?;
            i += n;
        }
        Ok(())
    }

    /// Advertises `piece` (offset in the run's first page, length) of the
    /// run `key`, pages `index..` of the page array: from a cached entry,
    /// or registered now and cached.
    #[expect(clippy::too_many_arguments)]
    fn use_run(
        &self,
        rqst: &Rqst<'_>,
        rcv: bool,
        index: u32,
        key: PageRun,
        piece: (u32, u32),
        regs: &mut RegList,
        segs: &mut Segs,
    ) -> Result {
        let (off, len) = piece;
        // Room first: once an entry is used or a REG_MR posted, nothing
        // may fail before the request records it.
        regs.reserve_one()?;
        segs.reserve(1)?;
        let hit = {
            let mut guard = self.cache.lock();
            let st = (*guard).as_mut().ok_or(ENOTCONN)?;
            st.find(key).and_then(|id| {
                st.policy.touch(id);
                let slot = st.slot_mut(id)?;
                let seg = segment_in(&slot.mr, slot.key, key, off, len)?;
                slot.users = slot.users.saturating_add(1);
                slot.mr.sync_for_device();
                let u = CacheUse {
                    id,
                    serial: slot.serial,
                    reg_slot: false,
                };
                Some((u, seg))
            })
        };
        if let Some((u, seg)) = hit {
            COUNTERS.hits.add(1, Relaxed);
            // Room was reserved above.
            let _ = regs.push_within_capacity(Reg::Cached(u));
            let _ = segs.push_within_capacity(seg);
            return Ok(());
        }
        COUNTERS.misses.add(1, Relaxed);
        let node = RBTreeNodeReservation::new(GFP_KERNEL)?;
        let mut lost = KVec::new();
        self.reserve_doomed()?;
        let mut mr = self.run_mr(key.pages)?;
        let seg = mr
            .map(rqst, rcv, index, key.pages, rcv)
            .and_then(|()| segment_in(&mr, key, key, off, len).ok_or(EINVAL));
        let seg = match seg {
            Ok(seg) => seg,
            Err(e) => {
                mr.release();
                self.keep_spare(mr);
                return Err(e);
            }
        };
        if !self.slots.try_take(1) {
            self.note_send_queue_full();
            mr.release();
            self.keep_spare(mr);
            return Err(ENOBUFS);
        }
        if let Err(e) = mr.post_reg(&self.ep) {
            self.slots.give(1);
            mr.release();
            self.keep_spare(mr);
            return Err(e);
        }
        COUNTERS.registrations.add(1, Relaxed);
        let u = {
            let mut guard = self.cache.lock();
            match (*guard).as_mut() {
                Some(st) => Ok(st.insert(key, mr, node, &mut lost)),
                // Closed meanwhile: the drain revoked the tag.
                None => Err(mr),
            }
        };
        // Victims that could not be tracked are deregistered here, outside
        // the lock; the connection starts afresh without them.
        if !lost.is_empty() {
            self.discard(lost);
            self.xprt.force_disconnect();
        }
        match u {
            Ok(u) => {
                // Room was reserved above.
                let _ = regs.push_within_capacity(Reg::Cached(u));
                let _ = segs.push_within_capacity(seg);
                Ok(())
            }
            Err(mr) => {
                drop(mr);
                Err(ENOTCONN)
            }
        }
    }

    /// Makes room among the doomed for a whole cache's worth of victims
    /// (allocating outside the lock), so that an insertion under the lock
    /// needs no memory.
    fn reserve_doomed(&self) -> Result {
        loop {
            let len = match (*self.cache.lock()).as_ref() {
                Some(st) if st.doomed.capacity() - st.doomed.len() < MAX_ENTRIES => st.doomed.len(),
                _ => return Ok(()),
            };
            let want = len.saturating_add(2 * MAX_ENTRIES);
            let mut bigger = KVec::with_capacity(want, GFP_KERNEL)?;
            let old = {
                let mut guard = self.cache.lock();
                let Some(st) = (*guard).as_mut() else {
                    return Ok(());
                };
                if st.doomed.len() > want - MAX_ENTRIES {
                    // It grew meanwhile: measure again.
                    None
                } else {
                    for d in st.doomed.drain_all() {
                        // Capacity was checked just above.
                        let _ = bigger.push_within_capacity(d);
                    }
                    Some(core::mem::replace(&mut st.doomed, bigger))
                }
            };
            // The old, empty vector is freed outside the lock.
            if old.is_some() {
                return Ok(());
            }
        }
    }

    /// An unmapped MR for a run of `pages` pages: a spare one of about
    /// that size, or a new one.
    fn run_mr(&self, pages: u32) -> Result<RunMr> {
        let spare = {
            let mut guard = self.cache.lock();
            (*guard).as_mut().and_then(|st| {
                let fits =
                    |m: &RunMr| m.max_pages() >= pages && m.max_pages() <= pages.saturating_mul(4);
                let pos = st.spare.iter().position(fits)?;
                st.spare.remove(pos).ok()
            })
        };
        if let Some(mr) = spare {
            return Ok(mr);
        }
        // Calls are sent from rpciod, which writeback may wait for.
        let _noio = NoIoScope::new();
        RunMr::new(&self.ep, pages.next_power_of_two().min(MAX_RUN_PAGES))
    }

    /// Keeps an unmapped MR for a later miss, or lets it go.
    fn keep_spare(&self, mr: RunMr) {
        let rejected = match (*self.cache.lock()).as_mut() {
            Some(st) => st.spare.push_within_capacity(mr).err().map(|e| e.0),
            None => Some(mr),
        };
        // Deregistered outside the lock.
        drop(rejected);
    }

    /// Deregisters registrations that could not be tracked (outside the
    /// cache lock: deregistering may sleep), which revokes their steering
    /// tags, and releases their pages.
    fn discard(&self, lost: impl IntoIterator<Item = RunMr>) {
        for mr in lost {
            let pages = mr.pages();
            drop(mr);
            self.unpin(pages);
        }
    }

    /// Takes `pages` pages off the pinned counts.
    fn unpin(&self, pages: u32) {
        COUNTERS.pinned_bytes.add(-bytes(pages), Relaxed);
        if let Some(st) = (*self.cache.lock()).as_mut() {
            st.pinned = st.pinned.saturating_sub(u64::from(pages));
        }
    }

    /// Registrations whose invalidation completed (`valid`; otherwise their
    /// state is unknown and they are deregistered): their pages go.
    fn retire(&self, evicted: KVec<Doomed>, valid: bool) {
        for d in evicted {
            let mut mr = d.mr;
            let pages = mr.pages();
            mr.release();
            self.unpin(pages);
            if valid {
                self.keep_spare(mr);
            }
        }
    }

    /// Releases the cache entries a request used once its reply arrived;
    /// `inv_rkey` is a steering tag the server invalidated remotely. Idle
    /// doomed registrations are then invalidated.
    pub(super) fn release_cached(&self, this: &Arc<Self>, regs: &RegList, inv_rkey: Option<u32>) {
        // Only `memreg=cache` has a cache: the other strategies skip its
        // lock on every reply.
        if self.settings.strategy != Strategy::Cache {
            return;
        }
        let mut flush = false;
        let mut lost = None;
        if let Some(st) = (*self.cache.lock()).as_mut() {
            for r in regs.iter() {
                if let Reg::Cached(u) = r {
                    st.release(u, inv_rkey, &mut lost);
                    if lost.is_some() {
                        break;
                    }
                }
            }
            flush = st.doomed.iter().any(|d| d.users == 0);
        }
        if let Some(m) = lost {
            self.discard([m]);
            self.xprt.force_disconnect();
        }
        if flush {
            // Not waited for: the chain's completion releases the pages.
            let _ = self.flush_evicted(this, GFP_KERNEL, false);
        }
    }

    /// A request's registrations will not be used (a failed send) or its
    /// reply will never be processed (signal, timeout): its entries leave
    /// the cache and are invalidated once no other request uses them; with
    /// `wait`, before this returns, so that the server no longer writes
    /// into pages of an abandoned request. Returns false if that could not
    /// be done (the caller revokes every registration instead).
    pub(super) fn forget_cached(&self, this: &Arc<Self>, regs: &RegList, wait: bool) -> bool {
        let mut lost = KVec::new();
        let mut any = false;
        if let Some(st) = (*self.cache.lock()).as_mut() {
            for r in regs.iter() {
                let Reg::Cached(u) = r else {
                    continue;
                };
                any = true;
                if st.slot_mut(u.id).is_some_and(|s| s.serial == u.serial) {
                    if let Some(m) = st.doom(u.id) {
                        stash(&mut lost, m);
                    }
                }
                if let Some(d) = st.doomed.iter_mut().find(|d| d.serial == u.serial) {
                    d.users = d.users.saturating_sub(1);
                    // Its REG_MR's slot, which no Send gives back now.
                    d.owed_slots = d.owed_slots.saturating_add(u32::from(u.reg_slot));
                }
            }
        }
        if !lost.is_empty() {
            self.discard(lost);
            return false;
        }
        !any || self.flush_evicted(this, GFP_KERNEL, wait).is_ok()
    }

    /// Invalidates the doomed registrations no request uses, in one
    /// LOCAL_INV chain (waiting for it with `wait`). Without memory or room
    /// in the send queue they stay doomed for the next attempt (an error
    /// then, which only a waiting caller needs to act on).
    fn flush_evicted(&self, this: &Arc<Self>, gfp: Flags, wait: bool) -> Result {
        let cap = self.cache.lock().as_ref().map_or(0, |st| st.doomed.len());
        if cap == 0 {
            return Ok(());
        }
        let mut evicted = KVec::with_capacity(cap, gfp)?;
        let mut rkeys = KVec::with_capacity(cap, gfp)?;
        let done = Arc::pin_init(
            pin_init!(EvictDone {
                conn: this.clone(),
                slots: Atomic::new(0),
                evicted <- new_spinlock!(None, "rpcrdma_rs::xprt::evict"),
                done <- Completion::new(),
            }),
            gfp,
        )?;
        let (n, owed) = {
            let mut guard = self.cache.lock();
            let Some(st) = (*guard).as_mut() else {
                return Ok(());
            };
            st.take_idle(&mut evicted);
            let n = u32::try_from(evicted.len()).unwrap_or(u32::MAX);
            if n > 0 && !self.slots.try_take(n) {
                // No room now: back among the doomed (they just left it).
                for d in evicted.drain_all() {
                    let _ = st.doomed.push_within_capacity(d);
                }
                drop(guard);
                self.note_send_queue_full();
                return Err(ENOBUFS);
            }
            let owed: u32 = evicted.iter().map(|d| d.owed_slots).sum();
            (n, owed)
        };
        if n == 0 {
            return Ok(());
        }
        for d in evicted.iter() {
            let _ = rkeys.push_within_capacity(d.mr.segment().handle);
        }
        done.slots.store(n.saturating_add(owed), Relaxed);
        *done.evicted.lock() = Some(evicted);
        COUNTERS.invalidations.add(u64::from(n), Relaxed);
        COUNTERS.invalidation_batches.add(1, Relaxed);
        if let Err(e) = self.post_inv_chain(&rkeys, done.clone()) {
            // The QP is gone: the drain revokes the tags; deregister.
            let taken = done.evicted.lock().take();
            if let Some(evicted) = taken {
                self.slots.give(n.saturating_add(owed));
                self.retire(evicted, false);
            }
            self.xprt.force_disconnect();
            return Err(e);
        }
        if wait {
            // Completes even when the queue pair is flushed.
            done.done.wait_for_completion();
        }
        Ok(())
    }

    /// Drops every cached registration once the queue pair was drained
    /// (disconnect): no steering tag of the connection is usable any more.
    pub(super) fn clear_cache(&self) {
        let taken = self.cache.lock().take();
        if let Some(st) = taken {
            let entries = st.slots.iter().filter(|s| s.is_some()).count();
            COUNTERS
                .entries
                .add(-i64::try_from(entries).unwrap_or(0), Relaxed);
            let pinned = i64::try_from(st.pinned).unwrap_or(i64::MAX);
            COUNTERS
                .pinned_bytes
                .add(-pinned.saturating_mul(i64::from(PAGE_SIZE)), Relaxed);
            // Deregistered, unmapped and unreferenced as they drop.
            drop(st);
        }
    }
}

impl Conn {
    /// Registers the cache's memory shrinker (`memreg=cache` only); it
    /// holds the connection until [`Conn::shutdown`] drops it.
    pub(super) fn register_shrinker(self: &Arc<Self>) -> Result {
        if self.settings.strategy != Strategy::Cache {
            return Ok(());
        }
        let s = ObjectShrinker::register(c"rpcrdma_rs-client-regcache", self.clone())?;
        *self.shrinker.lock() = Some(s);
        Ok(())
    }
}

/// Keeps `m`, a registration that could not be tracked under the lock, for
/// the caller to deregister once the lock is released (deregistering may
/// sleep). Without even atomic memory for that it is leaked, which keeps
/// its pages allocated; the caller closes the connection, which revokes
/// its steering tag.
fn stash(lost: &mut KVec<RunMr>, m: RunMr) {
    if lost.reserve(1, GFP_ATOMIC).is_ok() {
        if let Err(e) = lost.push_within_capacity(m) {
            core::mem::forget(e.0);
        }
        return;
    }
    crate::pr_err_ratelimited!("memreg=cache: no memory to release a registration; leaking it\n");
    core::mem::forget(m);
}

/// The segment for `len` bytes at `off` in the first page of `run`, inside
/// the registration of `key` (which contains `run`).
fn segment_in(mr: &RunMr, key: PageRun, run: PageRun, off: u32, len: u32) -> Option<Segment> {
    let s = mr.segment();
    let at = run
        .first
        .checked_sub(key.first)?
        .checked_mul(u64::from(PAGE_SIZE))?
        .checked_add(u64::from(off))?;
    Some(Segment::new(s.handle, len, s.offset.checked_add(at)?))
}

impl ShrinkObject for Conn {
    fn count(&self) -> u64 {
        // Never wait in reclaim.
        self.cache
            .try_lock()
            .and_then(|g| g.as_ref().map(|st| st.policy.used_pages()))
            .unwrap_or(0)
    }

    fn scan(this: ArcBorrow<'_, Self>, nr: u64) -> Option<u64> {
        let mut lost = KVec::new();
        let (freed, n) = {
            let mut guard = this.cache.try_lock()?;
            let st = (*guard).as_mut()?;
            let before = st.policy.used_pages();
            let n = st.policy.shrink(nr, &mut st.victims);
            let freed = before.saturating_sub(st.policy.used_pages());
            for i in 0..n {
                let Some(id) = st.victims.get(i).map(|v| v.id) else {
                    break;
                };
                if let Some(m) = st.doom_slot(id) {
                    stash(&mut lost, m);
                }
            }
            (freed, n)
        };
        COUNTERS.shrinker_evictions.add(n as u64, Relaxed);
        if !lost.is_empty() {
            this.discard(lost);
            this.xprt.force_disconnect();
        }
        if n > 0 {
            let conn: Arc<Conn> = this.into();
            // Memory reclaim: only what needs no waiting (GFP_NOWAIT); the
            // next reply retries what stays doomed.
            let _ = conn.flush_evicted(&conn, GFP_NOWAIT, false);
        }
        Some(freed)
    }
}
