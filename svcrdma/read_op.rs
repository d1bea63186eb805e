// SPDX-License-Identifier: GPL-2.0

//! A Call being read ([`ReadOp`], C `svc_rdma_recv_ctxt` while its
//! `rc_readlist` is pulled): the state its Reads' completions, the
//! connection's queues and the thread that works on it share, the
//! completion entries of its Reads into its pages, and what a completion
//! does (C `svc_rdma_wc_read_done`).

use super::read::ReadWork;
use super::recv_queue::RecvQ;
use crate::impl_ring_in;
use crate::rust::module::trace;
use crate::rust::rdma::read_slots::{ReadSlots, ReadSlotsOwner};
use crate::rust::rdma::verbs::{CompletionHandler, WorkCompletion, WorkRequest};
use kernel::new_spinlock;
use kernel::prelude::*;
use kernel::sync::atomic::{Acquire, Atomic, Full, Relaxed};
use kernel::sync::{Arc, SpinLock};

/// Added to [`ReadOp::state`] while the work is parked in the operation.
const PARKED: i32 = 1 << 30;

/// A Call being read: shared by the completion handlers of its Reads,
/// the connection's queues and the thread that works on it.
///
/// # Invariants
///
/// `state` is the number of Reads posted less those completed, plus
/// [`PARKED`] while the work is parked in `work`. The thread that holds
/// the work adds the Reads it posted when it parks it again
/// ([`ReadOp::put_back`]), so completions that come first take the count
/// below zero meanwhile (a post takes no lock); only that thread posts
/// the operation's Reads. Whoever brings `state` to exactly [`PARKED`]
/// (the last completion, or the thread parking the work with nothing
/// pending) queues the operation on its connection's read-complete queue,
/// exactly once; the thread that takes it off a queue finds `state` at
/// [`PARKED`] and sets it to zero. A held operation ([`ReadOp::hold`]) is
/// never parked, so never queued.
#[pin_data]
pub(super) struct ReadOp {
    state: Atomic<i32>,
    /// Set (to 1) when a Read failed or was flushed, before the
    /// completion's decrement.
    failed: Atomic<u32>,
    /// The work, while no thread has it; locked only by threads, never by
    /// a completion.
    #[pin]
    work: SpinLock<Option<ReadWork>>,
    /// The completion entries of the Call's Reads into its pages (C
    /// `svc_rdma_chunk_ctxt` in the receive context). Each posted Read
    /// keeps the connection's receive queues, where the operation goes
    /// when its last Read completes: the operation holds no reference to
    /// its connection, so a request's state may keep it for reuse.
    pub(super) slots: ReadSlots<ReadOp>,
}

impl_ring_in!(ReadOp, slots: ReadSlots<ReadOp>);

impl ReadSlotsOwner for ReadOp {
    type Context = RecvQ;

    fn read_done(this: Arc<Self>, q: Arc<RecvQ>, wc: &WorkCompletion) {
        read_completed(&q, &this, 1, wc);
    }
}

/// A Read of `op` completed with `wc` (C `svc_rdma_wc_read_done`): returns
/// its `slots` send queue slots and, for the operation's last Read,
/// queues the operation on the connection's read-complete queue `q`.
fn read_completed(q: &RecvQ, op: &Arc<ReadOp>, slots: u32, wc: &WorkCompletion) {
    if !wc.is_ok() {
        if !wc.is_flush() {
            trace::svcrdma_wc_read_err(wc.status);
            crate::pr_warn_ratelimited!(
                "svcrdma: RDMA Read failed, status {}; closing the connection\n",
                wc.status
            );
        }
        // Only this connection, flushed too (C `svc_rdma_wc_read_done`):
        // at once, not when the operation's last Read completes.
        q.link().close();
    }
    if op.done(wc.is_ok()) {
        q.read_done(op.clone());
    }
    q.sq.release(slots);
}

/// What a thread finds in an operation it took off a queue.
pub(super) enum Taken {
    /// A Read failed: the connection is being closed.
    Failed(ReadWork),
    /// Work to continue (post the rest, or assemble the Call).
    Work(ReadWork),
    /// Nothing (a held operation, or one already taken).
    Nothing,
}

impl ReadOp {
    pub(super) fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                state: Atomic::new(0),
                failed: Atomic::new(0),
                work <- new_spinlock!(None, "svcrdma::read_op"),
                slots: ReadSlots::new(),
            }),
            GFP_KERNEL,
        )
    }

    /// The operation again for another Call, once [`Self::take`] gave its
    /// work out finished (every Read it posted completed well, and the
    /// work was not put back since), unless a completion handler still
    /// holds a reference (the last Read's may not have dropped it yet):
    /// then it is as [`Self::new`] made it.
    pub(super) fn reuse_finished(this: Arc<Self>) -> Option<Arc<Self>> {
        Arc::into_unique_or_drop(this).map(Into::into)
    }

    /// Takes the work out (after the operation came off a queue).
    pub(super) fn take(&self) -> Taken {
        // Acquire: what the completions that counted down wrote (`failed`).
        if self.state.load(Acquire) != PARKED {
            return Taken::Nothing;
        }
        // Nothing is posted: no completion touches the count until this
        // thread posts again.
        self.state.store(0, Relaxed);
        match self.work.lock().take() {
            Some(w) if self.failed.load(Relaxed) != 0 => Taken::Failed(w),
            Some(w) => Taken::Work(w),
            None => Taken::Nothing,
        }
    }

    /// Parks the work with the number of Reads posted since it was taken;
    /// `true` if no Read is pending, so the caller must queue the
    /// operation again.
    pub(super) fn put_back(&self, work: ReadWork, posted: usize) -> bool {
        *self.work.lock() = Some(work);
        let add = i32::try_from(posted).unwrap_or(0).wrapping_add(PARKED);
        // Full: the work is parked before a completion can see the
        // operation parked, and the completions' writes are seen here.
        self.state.fetch_add(add, Full).wrapping_add(add) == PARKED
    }

    /// Keeps the work for good, never queued: it is freed with the
    /// connection, after its queue pair was drained.
    pub(super) fn hold(&self, work: ReadWork) {
        self.failed.store(1, Relaxed);
        *self.work.lock() = Some(work);
    }

    /// One Read completed; `true` if the operation must now be queued.
    pub(super) fn done(&self, ok: bool) -> bool {
        if !ok {
            self.failed.store(1, Relaxed);
        }
        // Full: `failed` before the count, for the thread that takes
        // the work; the parking thread's writes before a queue.
        self.state.fetch_sub(1, Full).wrapping_sub(1) == PARKED
    }
}

/// Completion of one RDMA Read (C `svc_rdma_wc_read_done`): returns its
/// send queue slots (two when its sink was registered just before it: the
/// unsignaled REG_MR ahead of it used one) and, for the operation's last
/// Read, queues the operation on the connection's read-complete queue.
pub(super) struct ReadHandler {
    pub(super) slots: u32,
    pub(super) op: Arc<ReadOp>,
    pub(super) q: Arc<RecvQ>,
}

impl CompletionHandler for ReadHandler {
    fn complete(&self, _wr: &Arc<WorkRequest<Self>>, wc: &WorkCompletion) {
        read_completed(&self.q, &self.op, self.slots, wc);
    }
}
