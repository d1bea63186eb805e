// SPDX-License-Identifier: GPL-2.0

//! The FRWR side of client registration (C `frwr_ops.c`): the pool of MRs
//! whose steering tags exist from connect time ("fmr" pool semantics),
//! REG_MR per chunk, and invalidation after the reply: one LOCAL_INV chain
//! per request, remote invalidation by the server, or a batch when
//! `fmr_dirty_watermark` is set; revocation of everything when an MR
//! cannot be invalidated.

use super::conn::Conn;
use super::invalidate::{rkeys, trace_local_invs, BatchInvDone};
use super::reg::{counters, Reg, RegList, Segs, Span, Strategy, StrategyCounters};
use super::send_buf::SLOTS_PER_MR;
use super::stats::add;
use crate::proto::msg::Segment;
use crate::rust::kext::spin_lock::new_spinlock;
use crate::rust::module::trace;
use crate::rust::sunrpc::xprt::{Mr, RpcRqst};
use kernel::alloc::KVec;
use kernel::prelude::*;
use kernel::sync::atomic::Relaxed;
use kernel::sync::{Arc, ArcBorrow};

impl Conn {
    pub(super) fn get_mr(&self) -> Result<Mr> {
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

    pub(super) fn recycle(&self, mrs: KVec<Mr>) {
        for mr in mrs {
            self.recycle_one(mr);
        }
    }

    /// Counts MRs about to be deregistered because their invalidation did
    /// not complete successfully (flushed or failed): C's `mrs_recycled`,
    /// which its `frwr_mr_recycle` counted for the same reason (C 7.3
    /// prints the field but no longer bumps it).
    pub(super) fn count_recycled(&self, mrs: &[Mr]) {
        add(&self.stats.mrs_recycled, mrs.len() as u64);
    }

    /// Counts MRs about to be deregistered without any invalidation
    /// because there was no memory to track it or no queue pair to post
    /// it on (the connection is closed, which revokes their steering tags):
    /// C's `mrs_orphaned`, MRs lost to the pool (C 7.3 prints the field
    /// but no longer bumps it).
    pub(super) fn count_orphaned(&self, n: usize) {
        add(&self.stats.mrs_orphaned, n as u64);
    }

    /// Registers `span` of the request's buffers with as many MRs as
    /// needed, posting each REG_MR; the segments go to `segs`, what must be
    /// released after the reply to `regs`.
    pub(super) fn register(
        &self,
        rqst: &RpcRqst<'_>,
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
        rqst: &RpcRqst<'_>,
        span: Span,
        regs: &mut RegList,
        segs: &mut Segs,
    ) -> Result {
        // A range of pool MRs (with `memreg=cache`, a head or tail part).
        self.counters().registrations.count(1);
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

    /// Unmaps `mr` and keeps it as a request's `spare` if the connection
    /// keeps spares and the request has none; else gives it back, for the
    /// caller to return to the pool.
    pub(super) fn keep_as_spare(&self, spare: &mut Option<Mr>, mut mr: Mr) -> Option<Mr> {
        unmap_mr(&mut mr);
        if self.keep_spares && spare.is_none() {
            *spare = Some(mr);
            return None;
        }
        Some(mr)
    }

    pub(super) fn recycle_one(&self, mut mr: Mr) {
        unmap_mr(&mut mr);
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
    pub(super) fn abandon(&self, this: ArcBorrow<'_, Self>, regs: RegList) {
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
                    conn: Arc::from(this),
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
}

/// Releases `mr`'s DMA mapping, if it still has one: before the RPC whose
/// pages it maps completes (the pages are then the CPU's again, and with
/// bounce buffers the unmap copies what the server wrote into them), or
/// when it goes back to the pool.
pub(super) fn unmap_mr(mr: &mut Mr) {
    if mr.is_mapped() {
        trace::xprtrdma_mr_unmap(mr);
        mr.unmap();
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
