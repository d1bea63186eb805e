// SPDX-License-Identifier: GPL-2.0

//! Registering an I/O's pages through the cache: hits, new entries and
//! their REG_MR, the spare MRs.

use super::evict::segment_in;
use super::index::{Doomed, Slot};
use super::{CacheUse, COUNTERS, MAX_ENTRIES, PAGE_SIZE, WRITABLE_KEY};
use crate::proto::planner::XdrBufShape;
use crate::proto::regcache_policy::PageRun;
use crate::rust::kext::memalloc::NoIoScope;
use crate::rust::kext::spin_lock::SpinLock;
use crate::rust::rdma::run_mr::RunMr;
use crate::rust::rdma::verbs::{CompletionHandler, WorkCompletion, WorkRequest};
use crate::rust::sunrpc::xprt::RpcRqst;
use crate::xprtrdma::conn::Conn;
use crate::xprtrdma::reg::buf_shape;
use crate::xprtrdma::reg::{Reg, RegList, Segs, Span};
use kernel::alloc::KVec;
use kernel::prelude::*;
use kernel::rbtree::RBTreeNodeReservation;
use kernel::sync::atomic::{Atomic, Relaxed};
use kernel::sync::{Arc, Completion};

/// Completion of a LOCAL_INV chain of evicted registrations: their pages
/// are unmapped and released, the MRs kept for reuse or deregistered.
#[pin_data]
pub(in crate::xprtrdma) struct EvictDone {
    pub(in crate::xprtrdma) conn: Arc<Conn>,
    /// Send queue slots its completion frees: the chain's, and REG_MRs'
    /// of abandoned requests.
    pub(in crate::xprtrdma) slots: Atomic<u32>,
    #[pin]
    pub(in crate::xprtrdma) evicted: SpinLock<Option<KVec<Doomed>>>,
    /// Completed for a caller that waits for the chain.
    #[pin]
    pub(in crate::xprtrdma) done: Completion,
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
    pub(in crate::xprtrdma) fn register_cached(
        &self,
        rqst: &RpcRqst<'_>,
        span: Span,
        regs: &mut RegList,
        segs: &mut Segs,
    ) -> Result {
        let info = rqst.info();
        let shape = buf_shape(if span.rcv { &info.rcv } else { &info.snd });
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
                self.register_pages(rqst, span.rcv, &shape, from, stop - at, regs, segs)?;
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

    /// Registers `len` bytes from `at` of the page array's data: one
    /// segment per piece of as many pages as the connection's MRs map
    /// (`max_fr_depth`, as `memreg=fmr` splits a chunk, so the planner's
    /// segment counts hold), counted from the first page the data touches,
    /// so that I/O from the same buffer finds the same pieces again.
    #[expect(clippy::too_many_arguments)]
    fn register_pages(
        &self,
        rqst: &RpcRqst<'_>,
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
        let depth = self.params().max_fr_depth.max(1);
        let start = shape.page_base.checked_add(at).ok_or(EINVAL)?;
        let end = start.checked_add(len).ok_or(EINVAL)?;
        let last = (end - 1) / PAGE_SIZE;
        let mut i = start / PAGE_SIZE;
        while i <= last {
            let n = (last - i + 1).min(depth);
            let pfn = rqst.page_pfn(rcv, i).ok_or(EINVAL)?;
            let from = start.max(i * PAGE_SIZE);
            let to = end.min((i + n).saturating_mul(PAGE_SIZE));
            let key = PageRun {
                first: if rcv { pfn | WRITABLE_KEY } else { pfn },
                pages: n,
            };
            let piece = (from - i * PAGE_SIZE, to - from);
            self.use_piece(rqst, rcv, i, key, piece, regs, segs)?;
            i += n;
        }
        Ok(())
    }

    /// Advertises `piece` (offset in its first page, length) of pages
    /// `index .. index + key.pages` of the page array, keyed `key`: from a
    /// cached entry that maps them, or registered now and cached.
    #[expect(clippy::too_many_arguments)]
    fn use_piece(
        &self,
        rqst: &RpcRqst<'_>,
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
            let serves =
                |slot: &Slot, at: u32| slot.mr.maps_request_pages(at, rqst, rcv, index, key.pages);
            st.find(key, serves).and_then(|(id, at)| {
                st.policy.touch(id);
                let slot = st.slot_mut(id)?;
                let seg = segment_in(&slot.mr, at, off, len)?;
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
            .and_then(|()| segment_in(&mr, 0, off, len).ok_or(EINVAL));
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

    /// An unmapped MR for a piece of `pages` pages: a spare one, or a new
    /// one of the connection's MR depth (every piece fits it).
    fn run_mr(&self, pages: u32) -> Result<RunMr> {
        let spare = {
            let mut guard = self.cache.lock();
            (*guard).as_mut().and_then(|st| {
                let pos = st.spare.iter().position(|m| m.max_pages() >= pages)?;
                st.spare.remove(pos).ok()
            })
        };
        if let Some(mr) = spare {
            return Ok(mr);
        }
        // Calls are sent from rpciod, which writeback may wait for.
        let _noio = NoIoScope::new();
        RunMr::new(&self.ep, self.params().max_fr_depth.max(pages))
    }

    /// Keeps an unmapped MR for a later miss, or lets it go.
    pub(in crate::xprtrdma) fn keep_spare(&self, mr: RunMr) {
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
    pub(in crate::xprtrdma) fn discard(&self, lost: impl IntoIterator<Item = RunMr>) {
        for mr in lost {
            let pages = mr.pages();
            drop(mr);
            self.unpin(pages);
        }
    }
}
