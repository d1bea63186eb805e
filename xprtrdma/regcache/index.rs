// SPDX-License-Identifier: GPL-2.0

//! The cache's entries and their index by first page: lookup, insertion,
//! eviction by the replacement policy.

use super::evict::stash;
use super::{bytes, CacheUse, COUNTERS, LOOKUP_PROBES, MAX_ENTRIES, SPARE_MRS};
use crate::proto::regcache_policy::{Cache, Entry, PageRun, Policy};
use crate::rust::rdma::run_mr::RunMr;
use crate::xprtrdma::reg::{Reg, RegList};
use core::cmp::Reverse;
use kernel::alloc::{KVec, VVec};
use kernel::prelude::*;
use kernel::rbtree::{RBTree, RBTreeNodeReservation};
use kernel::sync::atomic::Relaxed;

/// A cached registration.
pub(in crate::xprtrdma) struct Slot {
    pub(in crate::xprtrdma) mr: RunMr,
    pub(in crate::xprtrdma) key: PageRun,
    pub(in crate::xprtrdma) serial: u64,
    /// Requests in flight that advertised it.
    pub(in crate::xprtrdma) users: u32,
}

impl Slot {
    /// One request is done with the entry: its pages are the CPU's again.
    fn release_one(&mut self) {
        self.users = self.users.saturating_sub(1);
        self.mr.sync_for_cpu();
    }
}

/// A registration on its way out: invalidated once no request uses it.
pub(in crate::xprtrdma) struct Doomed {
    pub(in crate::xprtrdma) mr: RunMr,
    pub(in crate::xprtrdma) serial: u64,
    pub(in crate::xprtrdma) users: u32,
    /// REG_MR slots nothing else gives back (an abandoned request's).
    pub(in crate::xprtrdma) owed_slots: u32,
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
pub(in crate::xprtrdma) struct CacheState {
    pub(in crate::xprtrdma) policy: Cache<VVec<Entry>, VVec<u32>>,
    pub(in crate::xprtrdma) slots: VVec<Option<Slot>>,
    index: RBTree<IndexKey, u32>,
    pub(in crate::xprtrdma) doomed: KVec<Doomed>,
    /// Scratch for the policy's victims.
    pub(in crate::xprtrdma) victims: VVec<Entry>,
    pub(in crate::xprtrdma) spare: KVec<RunMr>,
    next_serial: u64,
    pub(in crate::xprtrdma) pinned: u64,
    /// The entry last found or inserted for a run starting at a page, by
    /// a hash of that page ([`hint_of`]); [`NO_HINT`] if none. Only a
    /// guess, checked against the slot it names: a stale one (its entry
    /// replaced or gone) costs the tree walk it would have saved.
    hints: [u32; HINTS],
}

/// Entries of [`CacheState::hints`]: one per buffer of a few dozen in
/// flight, which a workload's I/O reuses (fio's, or a page cache's).
const HINTS: usize = 64;

/// An empty [`CacheState::hints`] entry.
const NO_HINT: u32 = u32::MAX;

/// The hint entry of a run whose first page's frame number (with the
/// writable flag) is `first`: Fibonacci hashing, so that runs of
/// neighbouring pages spread.
fn hint_of(first: u64) -> usize {
    const SHIFT: u32 = u64::BITS - HINTS.trailing_zeros();
    // Below `HINTS` (a power of two): the top bits of the product.
    (first.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> SHIFT) as usize
}

impl CacheState {
    /// An empty cache of `capacity_pages` pages.
    pub(in crate::xprtrdma) fn new(capacity_pages: u64) -> Result<Self> {
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
            hints: [NO_HINT; HINTS],
        })
    }

    /// The cached entry that serves `key`, and the page of the entry its
    /// first page is. An entry is keyed by its first page frame number and
    /// page count only; `serves(slot, at)` checks that the entry's pages
    /// from the `at`-th on are the wanted pages. An entry of physically
    /// contiguous pages may serve a run starting within it; any other
    /// entry serves the runs starting at its first page.
    ///
    /// The entry the hint of `key`'s first page names is tried first (the
    /// usual hit: a buffer's run found again); then the index, whose find
    /// becomes the hint.
    pub(in crate::xprtrdma) fn find(
        &mut self,
        key: PageRun,
        serves: impl Fn(&Slot, u32) -> bool,
    ) -> Option<(u32, u32)> {
        let hint = hint_of(key.first);
        let hinted = self.hints.get(hint).copied().unwrap_or(NO_HINT);
        let slot = usize::try_from(hinted).ok().and_then(|i| self.slots.get(i));
        if let Some(slot) = slot.and_then(Option::as_ref) {
            if let Some(at) = key.offset_in(&slot.key).filter(|&at| serves(slot, at)) {
                return Some((hinted, at));
            }
        }
        let found = self.find_in_index(key, serves)?;
        if let Some(h) = self.hints.get_mut(hint) {
            *h = found.0;
        }
        Some(found)
    }

    /// [`Self::find`] by the index: the entries at or below `key`'s first
    /// page, nearest first, [`LOOKUP_PROBES`] of them at most.
    fn find_in_index(
        &mut self,
        key: PageRun,
        serves: impl Fn(&Slot, u32) -> bool,
    ) -> Option<(u32, u32)> {
        let slots = &self.slots;
        let mut cur = self
            .index
            .cursor_lower_bound_mut(&Reverse((key.first, u32::MAX)))?;
        for _ in 0..LOOKUP_PROBES {
            let (k, id) = cur.current();
            let (first, pages) = k.0;
            // At or below the key's first page (the cursor's order).
            if let Some(at) = key.offset_in(&PageRun { first, pages }) {
                let id = *id;
                let slot = usize::try_from(id).ok().and_then(|i| slots.get(i));
                if slot
                    .and_then(Option::as_ref)
                    .is_some_and(|slot| serves(slot, at))
                {
                    return Some((id, at));
                }
            }
            // The next entry in reverse order starts at a lower page.
            cur = cur.move_next()?;
        }
        None
    }

    pub(in crate::xprtrdma) fn slot_mut(&mut self, id: u32) -> Option<&mut Slot> {
        self.slots.get_mut(usize::try_from(id).ok()?)?.as_mut()
    }

    fn next_serial(&mut self) -> u64 {
        self.next_serial = self.next_serial.wrapping_add(1);
        self.next_serial
    }

    /// Takes `id`'s entry out of the policy and dooms it (see
    /// [`Self::doom_slot`]).
    pub(in crate::xprtrdma) fn doom(&mut self, id: u32) -> Option<RunMr> {
        self.policy.remove_id(id);
        self.doom_slot(id)
    }

    /// Takes the entry the policy let go as `id` out of the slots and the
    /// index and dooms it. A registration that cannot be tracked (no
    /// atomic memory) is handed back, to be deregistered outside the lock.
    pub(in crate::xprtrdma) fn doom_slot(&mut self, id: u32) -> Option<RunMr> {
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

    /// The live entry `u` names, if it is still cached.
    pub(in crate::xprtrdma) fn live_use(&mut self, u: &CacheUse) -> Option<&mut Slot> {
        self.slot_mut(u.id).filter(|s| s.serial == u.serial)
    }

    /// Drops every use of `regs`, all of them cached, if each names a live
    /// entry and neither the reply invalidated a steering tag (`inv_rkey`)
    /// nor an entry waits to be invalidated: a release that dooms nothing
    /// and has no flush to start (nearly every reply's). Returns false,
    /// releasing nothing, otherwise.
    pub(in crate::xprtrdma) fn release_all_live(
        &mut self,
        regs: &RegList,
        inv_rkey: Option<u32>,
    ) -> bool {
        // The cache never offers remote invalidation: a reply that does it
        // anyway goes the general way, which dooms the entry it names.
        if !self.doomed.is_empty() || inv_rkey.is_some() {
            return false;
        }
        // The usual request: one use, checked and released in one look.
        if let Some(r) = regs.only() {
            let Reg::Cached(u) = r else {
                return false;
            };
            let Some(slot) = self.live_use(u) else {
                return false;
            };
            slot.release_one();
            return true;
        }
        let all_live = regs
            .iter()
            .all(|r| matches!(r, Reg::Cached(u) if self.live_use(u).is_some()));
        if !all_live {
            return false;
        }
        for r in regs.iter() {
            if let Reg::Cached(u) = r {
                if let Some(slot) = self.live_use(u) {
                    slot.release_one();
                }
            }
        }
        true
    }

    /// Drops one use of the registration `u` names. A steering tag the
    /// server invalidated (`inv_rkey`; never offered) costs its entry.
    pub(in crate::xprtrdma) fn release(
        &mut self,
        u: &CacheUse,
        inv_rkey: Option<u32>,
        lost: &mut Option<RunMr>,
    ) {
        if let Some(slot) = self.live_use(u) {
            slot.release_one();
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
    pub(in crate::xprtrdma) fn take_idle(&mut self, out: &mut KVec<Doomed>) {
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
    pub(in crate::xprtrdma) fn insert(
        &mut self,
        key: PageRun,
        mr: RunMr,
        node: RBTreeNodeReservation<IndexKey, u32>,
        lost: &mut KVec<RunMr>,
    ) -> CacheUse {
        let serial = self.next_serial();
        self.pinned = self.pinned.saturating_add(u64::from(mr.pages()));
        COUNTERS.pinned_bytes.add(bytes(mr.pages()), Relaxed);
        // An entry of the same key that did not serve this request (its
        // pages changed since: a buffer's later pages were replaced), or
        // that another request registered meanwhile: the newcomer replaces
        // it, and it is invalidated once its users are done.
        if let Some(id) = self.index.get(&index_key(key)).copied() {
            if let Some(m) = self.doom(id) {
                stash(lost, m);
            }
        }
        let ins = self.policy.insert(key, &mut self.victims).ok();
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
        if let Some(h) = self.hints.get_mut(hint_of(key.first)) {
            *h = ins.id;
        }
        COUNTERS.entries.add(1, Relaxed);
        CacheUse {
            id: ins.id,
            serial,
            reg_slot: true,
        }
    }
}
