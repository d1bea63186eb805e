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
use kernel::sync::{Arc, SpinLock};

struct OpState {
    /// Reads posted less Reads completed. The thread that holds the work
    /// adds the Reads it posted when it puts the work back
    /// ([`ReadOp::put_back`]), so completions that come before take this
    /// below zero meanwhile: a post takes no lock of its own.
    pending: i32,
    /// A Read failed (or was flushed).
    failed: bool,
    /// Kept as is until the connection is freed: a registration posted
    /// for a Read that could not be posted still names one of its sinks
    /// (see [`Io::post_reads`]).
    hold: bool,
    /// The work, while no thread has it.
    work: Option<ReadWork>,
}

/// A Call being read: shared by the completion handlers of its Reads,
/// the connection's queues and the thread that works on it.
///
/// # Invariants
///
/// When `pending` drops to zero while the work is parked here (and not
/// held), the operation is queued on its connection's read-complete queue
/// exactly once; a thread that takes the work puts it back with the
/// Reads it posted and queues the operation itself if nothing is pending
/// by then. Only the thread holding the work posts the operation's Reads.
#[pin_data]
pub(super) struct ReadOp {
    #[pin]
    state: SpinLock<OpState>,
    /// The completion entries of the Call's Reads into its pages (C
    /// `svc_rdma_chunk_ctxt` in the receive context). Each posted Read
    /// keeps the connection's receive queues, where the operation goes
    /// when its last Read completes: the operation holds no reference to
    /// its connection, which keeps idle operations for reuse.
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
                state <- new_spinlock!(
                    OpState { pending: 0, failed: false, hold: false, work: None },
                    "svcrdma::read_op"
                ),
                slots: ReadSlots::new(),
            }),
            GFP_KERNEL,
        )
    }

    /// The operation again for another Call, once [`Self::take`] gave its
    /// work out finished (every Read it posted completed well, and the
    /// work was not put back since), unless a completion handler still
    /// holds a reference (the last Read's may not have dropped it yet):
    /// then it is as [`Self::new`] made it, and no lock is needed to see
    /// that.
    pub(super) fn reuse_finished(this: Arc<Self>) -> Option<Arc<Self>> {
        Arc::into_unique_or_drop(this).map(Into::into)
    }

    /// Takes the work out (after the operation came off a queue).
    pub(super) fn take(&self) -> Taken {
        let mut st = self.state.lock();
        if st.hold || st.pending != 0 {
            return Taken::Nothing;
        }
        match st.work.take() {
            Some(w) if st.failed => Taken::Failed(w),
            Some(w) => Taken::Work(w),
            None => Taken::Nothing,
        }
    }

    /// Puts the work back with the number of Reads posted since it was
    /// taken; `true` if no Read is pending, so the caller must queue the
    /// operation again.
    pub(super) fn put_back(&self, work: ReadWork, posted: usize) -> bool {
        let mut st = self.state.lock();
        st.pending = st
            .pending
            .saturating_add(i32::try_from(posted).unwrap_or(i32::MAX));
        st.work = Some(work);
        st.pending == 0
    }

    /// Puts the work back for good: it is freed with the connection, after
    /// its queue pair was drained.
    pub(super) fn hold(&self, work: ReadWork) {
        let mut st = self.state.lock();
        st.failed = true;
        st.hold = true;
        st.work = Some(work);
    }

    /// One Read completed; `true` if the operation must now be queued.
    pub(super) fn done(&self, ok: bool) -> bool {
        let mut st = self.state.lock();
        st.pending = st.pending.saturating_sub(1);
        if !ok {
            st.failed = true;
        }
        st.pending == 0 && st.work.is_some() && !st.hold
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
