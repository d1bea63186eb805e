// SPDX-License-Identifier: GPL-2.0

//! The FRWR side of client registration (C `frwr_ops.c`): the pool of MRs
//! whose steering tags exist from connect time ("fmr" pool semantics),
//! REG_MR per chunk, and invalidation after the reply: one LOCAL_INV chain
//! per request, remote invalidation by the server, or a batch when
//! `fmr_dirty_watermark` is set; revocation of everything when an MR
//! cannot be invalidated.

use super::conn::{Conn, Pending};
use super::reg::{
    add, counters, Reg, RegList, Segs, Span, Strategy, StrategyCounters, DIRTY_FLUSH_MS,
};
use super::send_buf::{SendDone, SLOTS_PER_MR};
use super::transport::bump;
use crate::proto::msg::Segment;
use crate::rust::memalloc::NoIoScope;
use crate::rust::trace;
use crate::rust::verbs::{CompletionHandler, WorkCompletion, WorkRequest};
use crate::rust::xprt::{post_local_inv, Mr, PinnedRqst, Rqst};
use crate::small_list::SmallList;
use kernel::alloc::KVec;
use kernel::new_spinlock;
use kernel::prelude::*;
use kernel::sync::atomic::{Atomic, Relaxed};
use kernel::sync::{Arc, Completion, SpinLock};

/// The steering tags of a LOCAL_INV chain: up to 8 inline.
type InvKeys = SmallList<u32, 8>;

/// Completion of a batched invalidation: the MRs return to the pool.
#[pin_data]
struct BatchInvDone {
    conn: Arc<Conn>,
    /// Send queue slots its completion frees (the chain's, and for
    /// abandoned registrations their REG_MRs').
    slots: u32,
    #[pin]
    mrs: SpinLock<Option<KVec<Mr>>>,
}

impl CompletionHandler for Arc<BatchInvDone> {
    fn complete(&self, _wr: &Arc<WorkRequest<Self>>, wc: &WorkCompletion) {
        // Completion context: nothing here may wait on reclaim.
        let _noio = NoIoScope::new();
        let taken = self.mrs.lock().take();
        if let Some(mrs) = taken {
            if wc.is_ok() {
                self.conn.recycle(mrs);
            } else {
                // Their state is unknown: deregistered as they drop.
                self.conn.count_recycled(&mrs);
            }
            self.conn.slots.give(self.slots);
        }
    }
}

/// Completion of a LOCAL_INV chain someone waits for (`release_request`).
#[pin_data]
struct SyncInvDone {
    ok: Atomic<bool>,
    #[pin]
    done: Completion,
}

impl CompletionHandler for Arc<SyncInvDone> {
    fn complete(&self, _wr: &Arc<WorkRequest<Self>>, wc: &WorkCompletion) {
        self.ok.store(wc.is_ok(), Relaxed);
        self.done.complete_all();
    }
}

/// LOCAL_INV completion: the request's registrations are gone, so its
/// reply may be handed to the RPC layer.
#[pin_data]
struct InvDone {
    conn: Arc<Conn>,
    /// Send queue slots its completion frees (the chain's).
    slots: u32,
    #[pin]
    state: SpinLock<Option<(PinnedRqst, i32, KVec<Mr>)>>,
}

impl CompletionHandler for Arc<InvDone> {
    fn complete(&self, _wr: &Arc<WorkRequest<Self>>, wc: &WorkCompletion) {
        // Completing the RPC runs sunrpc code: no reclaim from here.
        let _noio = NoIoScope::new();
        let taken = self.state.lock().take();
        if let Some((rqst, status, mrs)) = taken {
            self.conn.slots.give(self.slots);
            if wc.is_ok() {
                self.conn.recycle(mrs);
            } else {
                // The MRs' state is unknown: drop them with the connection.
                self.conn.count_recycled(&mrs);
                drop(mrs);
            }
            rqst.complete(status);
        }
    }
}

impl Conn {
    /// The delayed batch of an idle connection (`fmr_dirty_watermark`):
    /// invalidates whatever is still dirty.
    pub(super) fn flush_timer(&self, this: &Arc<Self>) {
        if self.closing.load(Relaxed) {
            return;
        }
        if !self.dirty.lock().is_empty() {
            add(&self.counters().timer_flushes, 1);
            self.flush_dirty(this);
        }
    }

    fn get_mr(&self) -> Result<Mr> {
        match self.mrs.lock().pop() {
            Some(mr) => Ok(mr),
            None => {
                add(&self.counters().pool_empty_waits, 1);
                if self.stats.mr_pool_empty.fetch_add(1, Relaxed) == 0 {
                    pr_warn!("MR pool empty: calls wait for registrations to be released\n");
                }
                Err(ENOBUFS)
            }
        }
    }

    fn recycle(&self, mrs: KVec<Mr>) {
        for mr in mrs {
            self.recycle_one(mr);
        }
    }

    /// Counts MRs about to be deregistered because their invalidation did
    /// not complete successfully (flushed or failed): C's `mrs_recycled`,
    /// which its `frwr_mr_recycle` counted for the same reason (C 7.3
    /// prints the field but no longer bumps it).
    fn count_recycled(&self, mrs: &[Mr]) {
        add(&self.stats.mrs_recycled, mrs.len() as u64);
    }

    /// Counts MRs about to be deregistered without any invalidation
    /// because there was no memory to track it or no queue pair to post
    /// it on (the connection is closed, which revokes their steering tags):
    /// C's `mrs_orphaned`, MRs lost to the pool (C 7.3 prints the field
    /// but no longer bumps it).
    fn count_orphaned(&self, n: usize) {
        add(&self.stats.mrs_orphaned, n as u64);
    }

    /// Registers `span` of the request's buffers with as many MRs as
    /// needed, posting each REG_MR; the segments go to `segs`, what must be
    /// released after the reply to `regs`.
    pub(super) fn register(
        &self,
        rqst: &Rqst<'_>,
        span: Span,
        regs: &mut RegList,
        segs: &mut Segs,
    ) -> Result {
        match self.settings.strategy {
            Strategy::Physical => self.register_physical(rqst, span, regs, segs),
            Strategy::Cache => self.register_cached(rqst, span, regs, segs),
            Strategy::Fmr => self.register_mrs(rqst, span, regs, segs),
        }
    }

    /// Registers `span` with pool MRs (as many as it needs).
    pub(super) fn register_mrs(
        &self,
        rqst: &Rqst<'_>,
        span: Span,
        regs: &mut RegList,
        segs: &mut Segs,
    ) -> Result {
        // A range of pool MRs (with `memreg=cache`, a head or tail part).
        add(&self.counters().registrations, 1);
        let (rcv, writable) = (span.rcv, span.writable());
        let end = span.offset.checked_add(span.len).ok_or(EINVAL)?;
        let mut at = span.offset;
        while at < end {
            let mut mr = self
                .get_mr()
                .inspect_err(|_| trace::xprtrdma_nomrs_err(&self.xprt, rqst))?;
            let res = mr.map_rqst(rqst, rcv, at, end - at, writable);
            let n = match res {
                Ok(n) if n > 0 => n,
                _ => {
                    self.recycle_one(mr);
                    return Err(EIO);
                }
            };
            trace::xprtrdma_mr_map(rqst, &mr);
            // The REG_MR's slot and the one of its LOCAL_INV, reserved
            // now so that the invalidation never waits for room.
            if !self.slots.try_take(SLOTS_PER_MR) {
                self.note_send_queue_full();
                self.recycle_one(mr);
                return Err(ENOBUFS);
            }
            // Posted ahead of the Send, in the same chain
            // (`post_send_after_regs`, from `Conn::send`).
            mr.prepare_reg(writable);
            trace::xprtrdma_mr_fastreg(rqst, &mr);
            let s = mr.segment();
            segs.push(Segment::new(s.handle, s.length, s.offset))?;
            regs.push(Reg::Mr(mr))?;
            at += n;
        }
        Ok(())
    }

    /// Takes back the pool MRs of `regs` whose REG_MR was not posted (all
    /// after the first `posted`): they were never registered, so they go
    /// straight back to the pool, and their send queue slots (REG_MR and
    /// LOCAL_INV) with them.
    pub(super) fn unpost(&self, regs: &mut RegList, posted: usize) {
        let mut seen = 0usize;
        let mut i = 0;
        while i < regs.len() {
            let is_mr = matches!(regs.iter().nth(i), Some(Reg::Mr(_)));
            if is_mr {
                seen += 1;
            }
            if !is_mr || seen <= posted {
                i += 1;
                continue;
            }
            if let Some(Reg::Mr(mr)) = regs.remove(i) {
                self.recycle_one(mr);
                self.slots.give(SLOTS_PER_MR);
            }
        }
    }

    pub(super) fn recycle_one(&self, mut mr: Mr) {
        trace::xprtrdma_mr_unmap(&mr);
        mr.unmap();
        // Capacity was reserved for every MR at connect time. Should the
        // pool still be full, the MR is dropped (`ib_dereg_mr`, which may
        // sleep) only after the statement, once the guard is released.
        let rejected = self.mrs.lock().push_within_capacity(mr).err();
        drop(rejected);
    }

    /// Invalidates registrations that were posted but will not be used
    /// (a failed send): one LOCAL_INV chain; the MRs return to the pool,
    /// and their slots (REG_MR and LOCAL_INV) to the send queue, when it
    /// completes.
    pub(super) fn abandon(&self, this: &Arc<Self>, regs: RegList) {
        if !self.forget_cached(this, &regs, false) {
            // A cached registration could not be tracked: start afresh.
            self.xprt.force_disconnect();
        }
        let (mrs, lost) = mrs_of(regs);
        if lost > 0 {
            // An MR was dropped (deregistered) for lack of memory; its
            // slots are lost with it, so start afresh.
            self.count_orphaned(lost);
            self.xprt.force_disconnect();
        }
        if mrs.is_empty() {
            return;
        }
        let n = mrs.len() as u32;
        let tracked = rkeys(&mrs).and_then(|keys| {
            let done = Arc::pin_init(
                pin_init!(BatchInvDone {
                    conn: this.clone(),
                    slots: n * SLOTS_PER_MR,
                    mrs <- new_spinlock!(None, "rpcrdma_rs::xprt::abandon"),
                }),
                GFP_KERNEL,
            )?;
            Ok((keys, done))
        });
        let Ok((keys, done)) = tracked else {
            // Cannot invalidate: deregister, and revoke the rest.
            self.count_orphaned(mrs.len());
            drop(mrs);
            self.xprt.force_disconnect();
            return;
        };
        trace_local_invs(None, &mrs);
        *done.mrs.lock() = Some(mrs);
        if let Err(e) = self.post_inv_chain(keys.as_slice(), done.clone()) {
            trace::xprtrdma_post_linv_err(0, e);
            // The QP is gone: deregister the MRs now.
            // Taken first: deregistering may sleep, not under the lock.
            let taken = done.mrs.lock().take();
            if let Some(mrs) = &taken {
                self.count_orphaned(mrs.len());
            }
            drop(taken);
            self.xprt.force_disconnect();
        }
    }

    pub(super) fn counters(&self) -> &'static StrategyCounters {
        counters(self.settings.strategy)
    }

    /// Invalidates every dirty MR in one chain; they return to the pool
    /// when the last LOCAL_INV completes.
    pub(super) fn flush_dirty(&self, this: &Arc<Self>) {
        // The list keeps room for the whole pool (so a dirty MR never has
        // to be dropped): the batch is swapped out for an empty list of
        // the same capacity, allocated outside the lock.
        let cap = self.dirty.lock().capacity();
        let Ok(mut mrs) = KVec::with_capacity(cap, GFP_KERNEL) else {
            // Revoking every registration is the only safe fallback.
            self.xprt.force_disconnect();
            return;
        };
        core::mem::swap(&mut *self.dirty.lock(), &mut mrs);
        if mrs.is_empty() {
            return;
        }
        self.counters().dirty.add(-(mrs.len() as i64), Relaxed);
        add(&self.counters().batched_invalidations, mrs.len() as u64);
        let Ok(keys) = rkeys(&mrs) else {
            self.count_orphaned(mrs.len());
            self.xprt.force_disconnect();
            return;
        };
        // Each dirty MR kept its LOCAL_INV slot.
        let slots = keys.len() as u32;
        trace_local_invs(None, &mrs);
        let done = Arc::pin_init(
            pin_init!(BatchInvDone {
                conn: this.clone(),
                slots,
                mrs <- new_spinlock!(Some(mrs), "rpcrdma_rs::xprt::batch"),
            }),
            GFP_KERNEL,
        );
        // The QP is gone or the batch cannot be tracked: revoke all.
        if let Err(e) = done.and_then(|d| self.post_inv_chain(keys.as_slice(), d)) {
            trace::xprtrdma_post_linv_err(0, e);
            self.count_orphaned(keys.len());
            self.xprt.force_disconnect();
        }
    }

    /// Posts LOCAL_INV for every key, unsignaled except the last, whose
    /// completion runs `done`'s handler.
    ///
    /// Every LOCAL_INV of a posted chain counts in `local_inv_needed`, as
    /// C counts each one it chains (`frwr_unmap_sync`, `frwr_unmap_async`), whether it
    /// follows a reply, runs in a batch or undoes an unsent call.
    pub(super) fn post_inv_chain<H: CompletionHandler>(&self, keys: &[u32], done: H) -> Result {
        let (last, rest) = keys.split_last().ok_or(EINVAL)?;
        for key in rest {
            post_local_inv::<SendDone>(&self.ep, *key, None)?;
        }
        post_local_inv(&self.ep, *last, Some(WorkRequest::without_sges(done)?))?;
        add(&self.stats.local_inv_needed, keys.len() as u64);
        Ok(())
    }

    /// The request's reply will never be processed (signal, timeout): make
    /// sure the server can no longer reach its buffers before they are
    /// freed. Its MRs are invalidated and this waits for that (C
    /// `frwr_unmap_sync`); only if that cannot be done is the connection
    /// closed, which revokes every registration at once.
    pub(super) fn release_request(&self, this: &Arc<Self>, key: usize) {
        let Some(p) = self.take_pending(key) else {
            return;
        };
        if self.closing.load(Relaxed) {
            // The connection is being closed (or revoked): its drain
            // revokes every registration at once. Wait for it before the
            // buffers go back (C `rpcrdma_xprt_disconnect` drains before
            // anything is freed).
            self.drain_once();
            drop(p);
            return;
        }
        if !self.forget_cached(this, &p.regs, true) {
            // A cached registration the server may still write into could
            // not be invalidated: revoke them all.
            self.revoke_all();
            return;
        }
        let (mrs, lost) = mrs_of(p.regs);
        if lost > 0 {
            // The others are deregistered as `mrs` drops, uninvalidated.
            self.count_orphaned(lost.saturating_add(mrs.len()));
            self.revoke_all();
            return;
        }
        if mrs.is_empty() {
            return;
        }
        add(&self.counters().invalidations, mrs.len() as u64);
        trace_local_invs(None, &mrs);
        let done = rkeys(&mrs).and_then(|keys| {
            let done = Arc::pin_init(
                pin_init!(SyncInvDone {
                    ok: Atomic::new(false),
                    done <- Completion::new(),
                }),
                GFP_KERNEL,
            )?;
            self.post_inv_chain(keys.as_slice(), done.clone())
                .inspect_err(|e| trace::xprtrdma_post_linv_err(p.xid, *e))?;
            Ok(done)
        });
        if let Ok(done) = done {
            // Completes even when the queue pair is flushed.
            done.done.wait_for_completion();
            // The chain left the queue: its slots, reserved at
            // registration, are free again.
            self.slots.give(mrs.len() as u32);
            if done.ok.load(Relaxed) {
                self.recycle(mrs);
                return;
            }
            self.count_recycled(&mrs);
        } else {
            self.count_orphaned(mrs.len());
        }
        drop(mrs);
        self.revoke_all();
    }

    /// Invalidates what the request registered (`pending`, taken from the
    /// pending list by the caller), then completes it.
    pub(super) fn finish(
        &self,
        this: &Arc<Self>,
        rqst: PinnedRqst,
        mut pending: Option<Pending>,
        status: i32,
        inv_rkey: Option<u32>,
    ) {
        // Worked on in place: the entry is not moved again.
        let Some(p) = pending.as_mut() else {
            rqst.complete(status);
            return;
        };
        let xid = p.xid;
        // Cached registrations stay; physical mappings are simply
        // unmapped; MRs need invalidation.
        self.release_cached(this, &p.regs, inv_rkey);
        // An MR the server invalidated remotely needs no LOCAL_INV.
        // We always offer Send With Invalidate (RFC 8797 flag).
        if let Some(rkey) = inv_rkey {
            if let Some(mr) = p.regs.take_mr(rkey) {
                trace::xprtrdma_mr_reminv(&rqst, &mr);
                bump(&self.stats.remote_inv);
                add(&self.counters().remote_invalidations, 1);
                self.recycle_one(mr);
                // The slot reserved for its LOCAL_INV is not needed.
                self.slots.give(1);
            }
        }
        // The common case (one MR, invalidated by the server's Send) needs
        // no list of the MRs left.
        if p.regs.mrs().next().is_none() {
            // Physical mappings are unmapped before the RPC completes.
            drop(pending);
            rqst.complete(status);
            return;
        }
        let (mrs, lost) = mrs_of(core::mem::take(&mut p.regs));
        if lost > 0 {
            // An MR was freed without invalidation: revoke all.
            self.count_orphaned(lost);
            self.xprt.force_disconnect();
        }
        let n = mrs.len();
        if n == 0 {
            rqst.complete(status);
            return;
        }
        if self.settings.dirty_watermark > 0 {
            // Batched invalidation: complete now, invalidate later.
            let mut full = false;
            for mr in mrs {
                // An MR that does not fit (capacity is reserved for the
                // whole pool, so never) is dropped, i.e. deregistered, which
                // may sleep: only after the guard is released.
                let rejected = {
                    let mut dirty = self.dirty.lock();
                    let r = dirty.push_within_capacity(mr).err();
                    full = dirty.len() >= self.settings.dirty_watermark as usize;
                    r
                };
                if rejected.is_none() {
                    self.counters().dirty.add(1, Relaxed);
                }
                drop(rejected);
            }
            rqst.complete(status);
            if full {
                self.flush_dirty(this);
            } else {
                // An idle connection must not keep them valid for long:
                // the batch runs within DIRTY_FLUSH_MS whatever happens
                // (an earlier deadline already scheduled stands).
                self.xprt.schedule_flush(DIRTY_FLUSH_MS);
            }
            return;
        }
        add(&self.counters().invalidations, n as u64);
        trace_local_invs(Some(&rqst), &mrs);
        let Ok(keys) = rkeys(&mrs) else {
            // Cannot track the invalidation: deregister the MRs, then the
            // RPC completes with its reply (deregistration revokes their
            // steering tags, so nothing can reach the pages any more).
            self.orphan_and_complete(rqst, status, mrs);
            return;
        };
        // Allocated empty and filled afterwards: should the allocation
        // fail, the MRs must be deregistered before the RPC completes,
        // which a failed initializer dropping both would not guarantee.
        let done = Arc::pin_init(
            pin_init!(InvDone {
                conn: this.clone(),
                slots: n as u32,
                state <- new_spinlock!(None, "rpcrdma_rs::xprt::inv"),
            }),
            GFP_KERNEL,
        );
        let Ok(done) = done else {
            // Cannot track the invalidation: deregister instead, as above.
            self.orphan_and_complete(rqst, status, mrs);
            return;
        };
        *done.state.lock() = Some((rqst, status, mrs));
        if let Err(e) = self.post_inv_chain(keys.as_slice(), done.clone()) {
            trace::xprtrdma_post_linv_err(xid, e);
            // The QP is gone or its queue refused the chain: deregister the
            // MRs (which revokes their steering tags) before the RPC
            // completes and its buffers can go back.
            let taken = done.state.lock().take();
            match taken {
                Some((rqst, status, mrs)) => self.orphan_and_complete(rqst, status, mrs),
                None => self.xprt.force_disconnect(),
            }
        }
    }

    /// The invalidation of `mrs` cannot be tracked: deregisters them, which
    /// revokes their steering tags, then completes `rqst` with its reply's
    /// `status` (the reply itself is good: failing the RPC would hand
    /// `-EIO` to a hard mount), and closes the connection, which recovers
    /// the pool's MRs.
    #[cold]
    fn orphan_and_complete(&self, rqst: PinnedRqst, status: i32, mrs: KVec<Mr>) {
        self.count_orphaned(mrs.len());
        drop(mrs);
        rqst.complete(status);
        self.xprt.force_disconnect();
    }
}

/// The MRs among `regs` (physical mappings are unmapped as they drop
/// here), and how many MRs had to be dropped (deregistered) because there
/// was no memory to keep them.
pub(super) fn mrs_of(regs: RegList) -> (KVec<Mr>, usize) {
    let mut mrs = KVec::new();
    let mut lost = 0usize;
    for reg in regs {
        if let Reg::Mr(mr) = reg {
            if mrs.push(mr, GFP_KERNEL).is_err() {
                lost = lost.saturating_add(1);
            }
        }
    }
    (mrs, lost)
}

impl Conn {
    /// Send queue slots the REG_MRs of `regs`, a call's registrations,
    /// take: with `memreg=fmr` every registration is a pool MR
    /// ([`Conn::register_mrs`] adds nothing else), so the list's length,
    /// without a walk; the other strategies mix kinds.
    pub(super) fn reg_slots(&self, regs: &RegList) -> u32 {
        match self.settings.strategy {
            Strategy::Fmr => u32::try_from(regs.len()).unwrap_or(u32::MAX),
            Strategy::Physical | Strategy::Cache => mr_count(regs),
        }
    }
}

/// Send queue slots the registrations among `regs` hold for their REG_MRs
/// (pool MRs, and cache entries registered for this request).
fn mr_count(regs: &RegList) -> u32 {
    let n = regs
        .iter()
        .filter(|r| match r {
            Reg::Mr(_) => true,
            Reg::Cached(u) => u.reg_slot,
            Reg::Phys(_) => false,
        })
        .count();
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Traces the LOCAL_INV about to be posted for each of `mrs`, on behalf of
/// `rqst` if a reply waits for them.
fn trace_local_invs(rqst: Option<&PinnedRqst>, mrs: &KVec<Mr>) {
    for mr in mrs.iter() {
        trace::xprtrdma_mr_localinv(rqst, mr);
    }
}

/// The steering tags of `mrs`, for their LOCAL_INV chain: a reply's few
/// MRs kept inline, so that the chain after a reply allocates nothing
/// that could fail (a batch of dirty MRs spills into a vector).
fn rkeys(mrs: &KVec<Mr>) -> Result<InvKeys> {
    let mut keys = InvKeys::new();
    keys.reserve(mrs.len())?;
    for mr in mrs.iter() {
        keys.push_within_capacity(mr.segment().handle)
            .map_err(|_| ENOMEM)?;
    }
    Ok(keys)
}
