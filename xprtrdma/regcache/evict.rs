// SPDX-License-Identifier: GPL-2.0

//! Entries leaving the cache: released after their RPC, invalidated in one
//! LOCAL_INV chain, dropped at disconnect or when the shrinker asks.

use super::index::Doomed;
use super::io::EvictDone;
use super::{bytes, COUNTERS, PAGE_SIZE};
use crate::proto::msg::Segment;
use crate::rust::kext::shrinker::{ObjectShrinker, ShrinkObject};
use crate::rust::kext::spin_lock::new_spinlock;
use crate::rust::rdma::run_mr::RunMr;
use crate::xprtrdma::conn::{Conn, Pending};
use crate::xprtrdma::reg::{Reg, RegList, Strategy};
use kernel::alloc::{Flags, KVec};
use kernel::prelude::*;
use kernel::sync::atomic::{Atomic, Relaxed};
use kernel::sync::{Arc, ArcBorrow, Completion};

impl Conn {
    /// Takes `pages` pages off the pinned counts.
    pub(in crate::xprtrdma) fn unpin(&self, pages: u32) {
        COUNTERS.pinned_bytes.add(-bytes(pages), Relaxed);
        if let Some(st) = (*self.cache.lock()).as_mut() {
            st.pinned = st.pinned.saturating_sub(u64::from(pages));
        }
    }

    /// Registrations whose invalidation completed (`valid`; otherwise their
    /// state is unknown and they are deregistered): their pages go.
    pub(in crate::xprtrdma) fn retire(&self, evicted: KVec<Doomed>, valid: bool) {
        for d in evicted {
            let pages = d.mr.pages();
            // Invalidated: released and kept for reuse. Possibly still
            // valid: dropped whole, which deregisters the MR (revoking its
            // tag) before its pages are unmapped and put.
            if let Some(mr) = d.mr.retire(valid) {
                self.keep_spare(mr);
            }
            self.unpin(pages);
        }
    }

    /// In a reply's lock section (the transport's `queue_lock` and the
    /// request's lock): releases the request's registrations `p` if they
    /// are all uses of live cache entries the reply did not invalidate and
    /// no evicted entry waits (nearly every reply), so that nothing is left
    /// for [`Conn::finish`], its second lock section and its walks;
    /// anything else is left to it ([`Self::release_cached`]).
    pub(in crate::xprtrdma) fn release_cached_in_place(
        &self,
        p: &mut Pending,
        inv_rkey: Option<u32>,
    ) {
        let released = (*self.cache.lock())
            .as_mut()
            .is_some_and(|st| st.release_all_live(&p.regs, inv_rkey));
        if released {
            p.regs = RegList::new();
        }
    }

    /// Releases the cache entries a request used once its reply arrived;
    /// `inv_rkey` is a steering tag the server invalidated remotely. Idle
    /// doomed registrations are then invalidated.
    pub(in crate::xprtrdma) fn release_cached(
        &self,
        this: ArcBorrow<'_, Self>,
        regs: &RegList,
        inv_rkey: Option<u32>,
    ) {
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
    pub(in crate::xprtrdma) fn forget_cached(
        &self,
        this: ArcBorrow<'_, Self>,
        regs: &RegList,
        wait: bool,
    ) -> bool {
        let mut lost = KVec::new();
        let mut any = false;
        if let Some(st) = (*self.cache.lock()).as_mut() {
            for r in regs.iter() {
                let Reg::Cached(u) = r else {
                    continue;
                };
                any = true;
                if st.live_use(u).is_some() {
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
    fn flush_evicted(&self, this: ArcBorrow<'_, Self>, gfp: Flags, wait: bool) -> Result {
        let cap = self.cache.lock().as_ref().map_or(0, |st| st.doomed.len());
        if cap == 0 {
            return Ok(());
        }
        let mut evicted = KVec::with_capacity(cap, gfp)?;
        let mut rkeys = KVec::with_capacity(cap, gfp)?;
        let done = Arc::pin_init(
            pin_init!(EvictDone {
                conn: Arc::from(this),
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
    pub(in crate::xprtrdma) fn clear_cache(&self) {
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
    pub(in crate::xprtrdma) fn register_shrinker(self: &Arc<Self>) -> Result {
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
pub(in crate::xprtrdma) fn stash(lost: &mut KVec<RunMr>, m: RunMr) {
    if lost.reserve(1, GFP_ATOMIC).is_ok() {
        if let Err(e) = lost.push_within_capacity(m) {
            core::mem::forget(e.0);
        }
        return;
    }
    crate::pr_err_ratelimited!("memreg=cache: no memory to release a registration; leaking it\n");
    core::mem::forget(m);
}

/// The segment of `len` bytes from `off` in the `at`-th page `mr` maps.
pub(in crate::xprtrdma) fn segment_in(mr: &RunMr, at: u32, off: u32, len: u32) -> Option<Segment> {
    let s = mr.segment();
    let at = u64::from(at)
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
            let _ = conn.flush_evicted(conn.as_arc_borrow(), GFP_NOWAIT, false);
        }
        Some(freed)
    }
}
