// SPDX-License-Identifier: GPL-2.0
//! Replacement policy of a client registration cache (`memreg=cache`, the
//! design papers' third client strategy).
//!
//! A cached registration covers a run of physical pages ([`PageRun`]), never
//! a virtual address range: virtual addresses are reused for other pages,
//! physical pages are pinned while cached. A request's run is
//! - a **hit** when a cached run contains it (the same steering tag serves it
//!   at an offset);
//! - **partial** when it overlaps a cached run: the covered part is served
//!   from the cache and only the rest needs a registration (MRRC's
//!   "intersection" case);
//! - a **miss** otherwise.
//!
//! When a new registration does not fit (`capacity_pages`, or every entry
//! slot in use), the cache frees room by one of two policies and hands the
//! victims back together, so that the caller invalidates them in one chain:
//! - [`Policy::Lru`]: the least recently used runs, as pin-down caches do;
//! - [`Policy::Mre`]: MRRC's Memory Resorting and Eviction (Ou et al.,
//!   section 5): the bottom of the recency stack (the *resorting section*)
//!   is ordered by an eviction factor `r + 1/size`, where `r` is the factor
//!   of the stack's bottom run when the cache last filled up; the lowest
//!   factors (the *eviction segment*) go. Large runs leave before small
//!   ones of about the same age, because one large registration is cheaper
//!   to redo than several small ones of the same total size (a registration
//!   costs about 0.77 us per page + 7.4 us).
//!
//! Every entry carries an identifier below the storage's length, which the
//! caller uses to find its own state of the entry (the kernel: the MR and
//! the page references) and to mark an entry used that it found by other
//! means ([`Cache::touch`]) in constant time.
//!
//! Pure `core` code on caller-provided storage (no allocation): the kernel
//! keeps its entries in fixed arrays per connection
//! (`xprtrdma/regcache.rs`), the host crate simulates traces with it
//! (`host/examples/regcache_sim.rs`).

use core::ops::DerefMut;

/// Fixed-point scale of the eviction factor's `1/size` term.
const FACTOR_SCALE: u64 = 1 << 20;

/// Position of an identifier not in use.
const FREE: u32 = u32::MAX;

/// `pages` physical pages from page frame number `first`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PageRun {
    /// First page frame number.
    pub first: u64,
    /// Number of pages (at least 1 in a cached run).
    pub pages: u32,
}

impl PageRun {
    /// One past the last page, or `None` if that overflows.
    pub fn end(&self) -> Option<u64> {
        self.first.checked_add(u64::from(self.pages))
    }

    /// Whether `other` lies entirely within this run.
    pub fn contains(&self, other: &PageRun) -> bool {
        match (self.end(), other.end()) {
            (Some(e), Some(oe)) => self.first <= other.first && oe <= e,
            _ => false,
        }
    }

    /// Where this run starts within `entry`, in pages, if `entry` covers
    /// all of it ([`Self::contains`]).
    pub fn offset_in(&self, entry: &PageRun) -> Option<u32> {
        if !entry.contains(self) {
            return None;
        }
        u32::try_from(self.first.checked_sub(entry.first)?).ok()
    }

    /// The pages both runs cover, if any.
    pub fn intersection(&self, other: &PageRun) -> Option<PageRun> {
        let start = self.first.max(other.first);
        let end = self.end()?.min(other.end()?);
        let pages = u32::try_from(end.checked_sub(start)?).ok()?;
        (pages > 0).then_some(PageRun {
            first: start,
            pages,
        })
    }
}

/// One cached registration, as the policy sees it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Entry {
    /// The pages it covers.
    pub run: PageRun,
    /// The caller's handle of the entry, below the storage's length.
    pub id: u32,
    /// When it was last used (a counter: larger is more recent).
    pub last_use: u64,
    /// MRE's eviction factor; 0 until the entry is scored, and again after
    /// each use (the paper: "set to zero again").
    pub factor: u64,
}

/// Which entries leave when room is needed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Least recently used first.
    Lru,
    /// MRRC's size-and-recency rule.
    Mre {
        /// Share of the recency stack, from the bottom, that is resorted by
        /// eviction factor (percent, 1..=100).
        resort_pct: u32,
        /// Share of the stack evicted per round, from the bottom of the
        /// resorted order (percent, 1..=resort_pct).
        evict_pct: u32,
    },
}

impl Policy {
    /// The MRE proportions used unless a caller picks others: the bottom
    /// half is resorted, the bottom eighth evicted per round.
    pub const MRE: Self = Self::Mre {
        resort_pct: 50,
        evict_pct: 12,
    };
}

/// What a lookup found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// The entry of identifier `id` contains the whole run.
    Hit(u32),
    /// The entry of identifier `id` covers `covered` of the run; the rest
    /// needs a registration.
    Partial {
        /// The entry's identifier.
        id: u32,
        /// The part of the run it covers.
        covered: PageRun,
    },
    /// No entry covers any of the run.
    Miss,
}

/// A registration the cache took in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Inserted {
    /// Its identifier.
    pub id: u32,
    /// How many entries left to make room (written to the victims).
    pub evicted: usize,
}

/// Why an insertion failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InsertError {
    /// The run is empty or larger than the whole cache.
    TooLarge,
    /// The victim buffer is too small for the evictions needed.
    VictimBuffer,
}

/// A registration cache's policy state over caller-provided storage:
/// `entries` holds the cached entries, `positions` maps each identifier to
/// its entry's index.
///
/// # Invariants
///
/// `len <= slots()`; `used_pages` is the sum of the pages of
/// `entries[..len]` and never exceeds `capacity_pages`; for every `i <
/// len`, `positions[entries[i].id] == i`, and every other position is
/// `FREE`.
pub struct Cache<E, P> {
    entries: E,
    positions: P,
    len: usize,
    capacity_pages: u64,
    used_pages: u64,
    clock: u64,
    recency: u64,
    policy: Policy,
}

impl<E, P> Cache<E, P>
where
    E: DerefMut<Target = [Entry]>,
    P: DerefMut<Target = [u32]>,
{
    /// An empty cache of at most `capacity_pages` pages and as many
    /// registrations as the shorter of `entries` and `positions` holds.
    pub fn new(entries: E, mut positions: P, capacity_pages: u64, policy: Policy) -> Self {
        positions.fill(FREE);
        Self {
            entries,
            positions,
            len: 0,
            capacity_pages,
            used_pages: 0,
            clock: 0,
            recency: 0,
            policy,
        }
    }

    /// Most registrations it holds.
    fn slots(&self) -> usize {
        self.entries.len().min(self.positions.len())
    }

    /// The cached entries.
    pub fn entries(&self) -> &[Entry] {
        self.entries.get(..self.len).unwrap_or(&[])
    }

    /// Pages held by cached registrations.
    pub fn used_pages(&self) -> u64 {
        self.used_pages
    }

    /// The most pages it holds.
    pub fn capacity_pages(&self) -> u64 {
        self.capacity_pages
    }

    fn tick(&mut self) -> u64 {
        self.clock = self.clock.saturating_add(1);
        self.clock
    }

    /// The index of identifier `id`'s entry, if it is cached.
    fn index_of(&self, id: u32) -> Option<usize> {
        let pos = *self.positions.get(usize::try_from(id).ok()?)?;
        let i = usize::try_from(pos).ok()?;
        (pos != FREE && i < self.len).then_some(i)
    }

    /// The entry of identifier `id`, if it is cached.
    pub fn get(&self, id: u32) -> Option<&Entry> {
        self.entries.get(self.index_of(id)?)
    }

    /// Marks the entry of `id` used (the top of the stack); false if no
    /// such entry is cached.
    pub fn touch(&mut self, id: u32) -> bool {
        let Some(i) = self.index_of(id) else {
            return false;
        };
        let now = self.tick();
        match self.entries.get_mut(i) {
            Some(e) => {
                e.last_use = now;
                e.factor = 0;
                true
            }
            None => false,
        }
    }

    /// Finds the entry that serves `run` and, if one does, marks it used
    /// (the top of the stack). Prefers an entry that contains the run,
    /// then the largest overlap. Looks at every entry: callers with many
    /// entries keep an index and use [`Self::touch`].
    pub fn lookup(&mut self, run: PageRun) -> Lookup {
        let mut best: Option<(u32, PageRun)> = None;
        for e in self.entries().iter() {
            if e.run.contains(&run) {
                best = Some((e.id, run));
                break;
            }
            if let Some(c) = e.run.intersection(&run) {
                if best.is_none_or(|(_, b)| c.pages > b.pages) {
                    best = Some((e.id, c));
                }
            }
        }
        let Some((id, covered)) = best else {
            return Lookup::Miss;
        };
        self.touch(id);
        if covered == run {
            Lookup::Hit(id)
        } else {
            Lookup::Partial { id, covered }
        }
    }

    /// Adds a registration of `run` at the top of the stack, first evicting
    /// what the policy chooses until it fits. The evicted entries are
    /// written to `victims` (to be invalidated in one batch). Needs at
    /// most as many victims as the cache has slots.
    pub fn insert(&mut self, run: PageRun, victims: &mut [Entry]) -> Result<Inserted, InsertError> {
        let pages = u64::from(run.pages);
        if pages == 0 || pages > self.capacity_pages || self.slots() == 0 {
            return Err(InsertError::TooLarge);
        }
        let mut evicted = 0usize;
        while self.used_pages.saturating_add(pages) > self.capacity_pages
            || self.len >= self.slots()
        {
            let rest = victims
                .get_mut(evicted..)
                .ok_or(InsertError::VictimBuffer)?;
            let n = self.evict_round(rest)?;
            evicted = evicted.saturating_add(n);
        }
        // A free identifier exists: fewer than `slots()` entries are cached.
        let id = self
            .positions
            .iter()
            .position(|p| *p == FREE)
            .and_then(|i| u32::try_from(i).ok())
            .ok_or(InsertError::TooLarge)?;
        let now = self.tick();
        let index = self.len;
        let slot = self.entries.get_mut(index).ok_or(InsertError::TooLarge)?;
        *slot = Entry {
            run,
            id,
            last_use: now,
            factor: 0,
        };
        self.set_position(id, index);
        self.len = self.len.saturating_add(1);
        self.used_pages = self.used_pages.saturating_add(pages);
        Ok(Inserted { id, evicted })
    }

    /// Removes every entry that overlaps `run` (its pages are going away),
    /// writing the removed entries to `victims`; returns their number.
    pub fn invalidate(&mut self, run: PageRun, victims: &mut [Entry]) -> usize {
        let mut n = 0usize;
        let mut i = 0usize;
        while i < self.len {
            let hit = self
                .entries
                .get(i)
                .is_some_and(|e| e.run.intersection(&run).is_some());
            if hit && n < victims.len() {
                if let (Some(removed), Some(v)) = (self.remove(i), victims.get_mut(n)) {
                    *v = removed;
                    n = n.saturating_add(1);
                    continue;
                }
            }
            i = i.saturating_add(1);
        }
        n
    }

    /// Removes the entry of `id` (its registration was lost: remote
    /// invalidation, a failed REG_MR).
    pub fn remove_id(&mut self, id: u32) -> Option<Entry> {
        let i = self.index_of(id)?;
        self.remove(i)
    }

    /// Evicts by the policy until at least `pages` pages are freed, the
    /// cache is empty or `victims` is full (a memory shrinker); returns
    /// the number of entries written to `victims`.
    pub fn shrink(&mut self, pages: u64, victims: &mut [Entry]) -> usize {
        let target = self.used_pages.saturating_sub(pages);
        let mut n = 0usize;
        while self.len > 0 && self.used_pages > target {
            let Some(rest) = victims.get_mut(n..) else {
                break;
            };
            match self.evict_round(rest) {
                Ok(k) if k > 0 => n = n.saturating_add(k),
                _ => break,
            }
        }
        n
    }

    /// Removes every entry (disconnect), writing them to `victims`.
    pub fn clear(&mut self, victims: &mut [Entry]) -> usize {
        let mut n = 0usize;
        while let Some(last) = self.len.checked_sub(1) {
            let Some(v) = victims.get_mut(n) else {
                break;
            };
            let Some(e) = self.remove(last) else {
                break;
            };
            *v = e;
            n = n.saturating_add(1);
        }
        n
    }

    fn set_position(&mut self, id: u32, index: usize) {
        let pos = u32::try_from(index).unwrap_or(FREE);
        if let Some(p) = usize::try_from(id)
            .ok()
            .and_then(|id| self.positions.get_mut(id))
        {
            *p = pos;
        }
    }

    /// Removes entry `i` (the last entry takes its slot).
    fn remove(&mut self, i: usize) -> Option<Entry> {
        let last = self.len.checked_sub(1)?;
        let removed = *self.entries.get(i)?;
        self.entries.swap(i, last);
        self.len = last;
        self.set_position(removed.id, usize::MAX);
        if i != last {
            if let Some(moved) = self.entries.get(i).map(|e| e.id) {
                self.set_position(moved, i);
            }
        }
        self.used_pages = self.used_pages.saturating_sub(u64::from(removed.run.pages));
        Some(removed)
    }

    /// Records where every live entry now is (after a sort).
    fn reindex(&mut self) {
        for i in 0..self.len {
            if let Some(id) = self.entries.get(i).map(|e| e.id) {
                self.set_position(id, i);
            }
        }
    }

    /// Orders the entries by recency, most recent first (the stack).
    fn sort_stack(&mut self) {
        let len = self.len;
        if let Some(live) = self.entries.get_mut(..len) {
            live.sort_unstable_by_key(|e| core::cmp::Reverse(e.last_use));
        }
    }

    /// One eviction round: at least one entry leaves (if there is one).
    fn evict_round(&mut self, victims: &mut [Entry]) -> Result<usize, InsertError> {
        if self.len == 0 {
            return Err(InsertError::TooLarge);
        }
        self.sort_stack();
        let count = match self.policy {
            Policy::Lru => 1,
            Policy::Mre {
                resort_pct,
                evict_pct,
            } => self.resort(resort_pct, evict_pct),
        };
        self.reindex();
        if victims.len() < count {
            return Err(InsertError::VictimBuffer);
        }
        // The victims are at the bottom of the (resorted) stack.
        let mut n = 0usize;
        while n < count {
            let Some(last) = self.len.checked_sub(1) else {
                break;
            };
            let (Some(e), Some(v)) = (self.remove(last), victims.get_mut(n)) else {
                break;
            };
            *v = e;
            n = n.saturating_add(1);
        }
        Ok(n)
    }

    /// MRE: scores and resorts the resorting section (the bottom
    /// `resort_pct` of the stack) and returns how many entries of its
    /// bottom (the eviction segment) leave.
    fn resort(&mut self, resort_pct: u32, evict_pct: u32) -> usize {
        let len = self.len;
        let share = |pct: u32| -> usize {
            let pct = usize::try_from(pct.clamp(1, 100)).unwrap_or(100);
            len.saturating_mul(pct).div_ceil(100).clamp(1, len)
        };
        let resort = share(resort_pct);
        let evict = share(evict_pct).min(resort);
        let start = len.saturating_sub(resort);
        // r: the factor of the run at the bottom of the stack.
        if let Some(bottom) = len.checked_sub(1).and_then(|b| self.entries.get(b)) {
            self.recency = self.recency.max(bottom.factor);
        }
        let r = self.recency;
        let Some(section) = self.entries.get_mut(start..len) else {
            return evict;
        };
        for e in section.iter_mut() {
            if e.factor == 0 {
                let inv = FACTOR_SCALE
                    .checked_div(u64::from(e.run.pages.max(1)))
                    .unwrap_or(0);
                e.factor = r.saturating_add(inv).max(1);
            }
        }
        // Smallest factor closest to the bottom (the end of the slice).
        section.sort_unstable_by_key(|e| core::cmp::Reverse(e.factor));
        evict
    }
}
