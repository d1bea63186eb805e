// SPDX-License-Identifier: GPL-2.0

//! Invalidation of the FRWR pool's MRs after a reply (C
//! `frwr_unmap_sync`, `frwr_unmap_async`): one LOCAL_INV chain per request,
//! remote invalidation by the server, or a batch when `fmr_dirty_watermark`
//! is set, flushed by a timer.

use super::conn::{Conn, Offered, Pending};
use super::frwr::*;
use super::reg::{Strategy, DIRTY_FLUSH_MS};
use super::stats::add;
use crate::rust::kext::memalloc::NoIoScope;
use crate::rust::kext::spin_lock::{new_spinlock, SpinLock};
use crate::rust::module::trace;
use crate::rust::rdma::verbs::{CompletionHandler, WorkCompletion, WorkRequest};
use crate::rust::sunrpc::xprt::{post_local_inv, Mr};
use crate::rust::sunrpc::xprt_reply::{PinnedRqst, ReplyRqst};
use crate::small_list::SmallList;
use kernel::alloc::KVec;
use kernel::prelude::*;
use kernel::sync::atomic::{Atomic, Relaxed};
use kernel::sync::{Arc, ArcBorrow, Completion};

/// The steering tags of a LOCAL_INV chain: up to 8 inline.
type InvKeys = SmallList<u32, 8>;

/// Completion of a batched invalidation: the MRs return to the pool.
#[pin_data]
pub(super) struct BatchInvDone {
    pub(super) conn: Arc<Conn>,
    /// Send queue slots its completion frees (the chain's, and for
    /// abandoned registrations their REG_MRs').
    pub(super) slots: u32,
    #[pin]
    pub(super) mrs: SpinLock<Option<KVec<Mr>>>,
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
    pub(super) fn flush_timer(&self, this: ArcBorrow<'_, Self>) {
        if self.closing.load(Relaxed) {
            return;
        }
        if !self.dirty.lock().is_empty() {
            add(&self.counters().timer_flushes, 1);
            self.flush_dirty(this);
        }
    }

    /// Invalidates every dirty MR in one chain; they return to the pool
    /// when the last LOCAL_INV completes.
    pub(super) fn flush_dirty(&self, this: ArcBorrow<'_, Self>) {
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
                conn: Arc::from(this),
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
            post_local_inv::<H>(&self.ep, *key, None)?;
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
    pub(super) fn release_request(&self, this: ArcBorrow<'_, Self>, p: Pending) {
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

    /// Takes out of `p` the MR the server invalidated remotely (its Send
    /// With Invalidate of `inv_rkey`), which needs no LOCAL_INV: its slot
    /// goes back to the send queue, the MR to the caller for
    /// [`Self::recycle_one`]. We always offer remote invalidation (RFC 8797
    /// flag).
    #[inline(always)]
    fn take_remotely_invalidated(
        &self,
        rqst: &ReplyRqst,
        p: &mut Pending,
        inv_rkey: Option<u32>,
    ) -> Option<Mr> {
        let mr = inv_rkey.and_then(|rkey| p.regs.take_mr(rkey))?;
        trace::xprtrdma_mr_reminv(rqst, &mr);
        self.counters().remote_invalidations.count(1);
        // The slot reserved for its LOCAL_INV is not needed.
        self.slots.give(1);
        Some(mr)
    }

    /// Releases, inside the transport's `queue_lock` and the request's
    /// lock, what a reply's request registered (`p`, in place) when that
    /// needs no memory and no wait: with `memreg=fmr` the MR the server
    /// invalidated remotely, unmapped and kept as the request's `spare`
    /// (when the connection keeps spares and the request has none) or
    /// taken out for the caller to return to the pool once the locks are
    /// left; with `memreg=cache` (`CACHED`, a handler of its own) the uses
    /// of cache entries, when releasing them needs nothing more
    /// ([`Self::release_cached_in_place`]). Returns with it what the
    /// request offered the server to write. What is left in `p` is for
    /// [`Self::finish`].
    pub(super) fn release_in_place<const CACHED: bool>(
        &self,
        rqst: &ReplyRqst,
        p: &mut Pending,
        spare: &mut Option<Mr>,
        inv_rkey: Option<u32>,
    ) -> (Offered, Option<Mr>) {
        if p.regs.is_empty() {
            // Nothing registered for this call: what an earlier call of
            // the slot offered is no offer.
            return (Offered::default(), None);
        }
        if CACHED {
            let offered = p.offered;
            self.release_cached_in_place(p, inv_rkey);
            return (offered, None);
        }
        if self.settings.strategy != Strategy::Fmr {
            return (p.offered, None);
        }
        // Unmapped before the RPC completes, as C's `frwr_reminv` does: the
        // unmap hands the pages the server wrote back to the CPU (with
        // bounce buffers it copies the data into them), and the pages may
        // be reused once the RPC is complete.
        let mr = self.take_remotely_invalidated(rqst, p, inv_rkey);
        (p.offered, mr.and_then(|mr| self.keep_as_spare(spare, mr)))
    }

    /// Invalidates what the request registered (`pending`, taken from the
    /// request's state by the caller), then completes it.
    pub(super) fn finish(
        &self,
        this: ArcBorrow<'_, Self>,
        rqst: PinnedRqst,
        mut pending: Option<Pending>,
        status: i32,
        inv_rkey: Option<u32>,
    ) {
        // Completion context: tracking the invalidation allocates, never by
        // reclaim that could wait for this very reply (swap over NFS, NFS
        // writeback).
        let _noio = NoIoScope::new();
        // Worked on in place: the entry is not moved again.
        let Some(p) = pending.as_mut() else {
            rqst.complete(status);
            return;
        };
        let xid = p.xid;
        // Cached registrations stay; physical mappings are simply
        // unmapped; MRs need invalidation.
        self.release_cached(this, &p.regs, inv_rkey);
        if let Some(mr) = self.take_remotely_invalidated(&rqst, p, inv_rkey) {
            self.recycle_one(mr);
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
            for mut mr in mrs {
                // Unmapped before the RPC completes (the pages are the
                // CPU's again, and may be reused after it); it stays
                // registered until the batch invalidates it.
                unmap_mr(&mut mr);
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
                conn: Arc::from(this),
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

/// Traces the LOCAL_INV about to be posted for each of `mrs`, on behalf of
/// `rqst` if a reply waits for them.
pub(super) fn trace_local_invs(rqst: Option<&ReplyRqst>, mrs: &KVec<Mr>) {
    for mr in mrs.iter() {
        trace::xprtrdma_mr_localinv(rqst, mr);
    }
}

/// The steering tags of `mrs`, for their LOCAL_INV chain: a reply's few
/// MRs kept inline, so that the chain after a reply allocates nothing
/// that could fail (a batch of dirty MRs spills into a vector).
pub(super) fn rkeys(mrs: &KVec<Mr>) -> Result<InvKeys> {
    let mut keys = InvKeys::new();
    keys.reserve(mrs.len())?;
    for mr in mrs.iter() {
        keys.push_within_capacity(mr.segment().handle)
            .map_err(|_| ENOMEM)?;
    }
    Ok(keys)
}
