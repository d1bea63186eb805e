// SPDX-License-Identifier: GPL-2.0

//! A Call being read ([`ReadOp`], C `svc_rdma_recv_ctxt` while its
//! `rc_readlist` is pulled): the state its Reads' completions, the
//! connection's queues and the thread that works on it share, kept in a
//! read context of the connection, and what a completion does (C
//! `svc_rdma_wc_read_done`).

use super::read::ReadWork;
use super::recv_queue::RecvQ;
use crate::proto::read_count::{completed_last, park_add, parked_idle, takeable};
use crate::rust::module::trace;
use crate::rust::rdma::read_ctxts::ReadCtxtsOwner;
use crate::rust::rdma::verbs::{CompletionHandler, WorkCompletion, WorkRequest};
use kernel::new_spinlock;
use kernel::prelude::*;
use kernel::sync::atomic::{Acquire, Atomic, Full, Relaxed};
use kernel::sync::{Arc, SpinLock};

/// A Call being read, the state of a read context of its connection
/// (`rust/rdma/read_ctxts.rs`, which holds the completion entries of its
/// Reads): shared by the completions of its Reads, the connection's
/// queues (which name it by its context's index) and the thread that
/// works on it. It lives as long as the connection, whose queue pair is
/// drained before it is freed: no reference is counted per Read.
///
/// # Invariants
///
/// `state` is the number of Reads posted less those completed, plus
/// `PARKED` while the work is parked in `work` (the rules are
/// `src/proto/read_count.rs`, host-tested over every order of events).
/// The thread that holds
/// the work adds the Reads it posted when it parks it again
/// ([`ReadOp::put_back`]), so completions that come first take the count
/// below zero meanwhile (a post takes no lock); only that thread posts
/// the operation's Reads. Whoever brings `state` to exactly `PARKED`
/// (the last completion, or the thread parking the work with nothing
/// pending) queues the operation on its connection's read-complete queue,
/// exactly once; the thread that takes it off a queue finds `state` at
/// `PARKED` and sets it to zero. A held operation ([`ReadOp::hold`]) is
/// never parked, so never queued, and its context is never given back.
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
}

impl ReadCtxtsOwner for RecvQ {
    type State = ReadOp;

    fn read_done(&self, ctxt: usize, op: &ReadOp, wc: &WorkCompletion) {
        read_completed(self, ctxt, op, 1, wc);
    }
}

/// A Read of `op` (context `ctxt` of the connection whose read-complete
/// queue is `q`) completed with `wc` (C `svc_rdma_wc_read_done`): returns
/// its `slots` send queue slots and, for the operation's last Read,
/// queues the operation.
fn read_completed(q: &RecvQ, ctxt: usize, op: &ReadOp, slots: u32, wc: &WorkCompletion) {
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
        q.read_done(ctxt);
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
    /// A context's state, with no work.
    pub(super) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            state: Atomic::new(0),
            failed: Atomic::new(0),
            work <- new_spinlock!(None, "svcrdma::read_op"),
        })
    }

    /// Takes the work out (after the operation came off a queue).
    pub(super) fn take(&self) -> Taken {
        // Acquire: what the completions that counted down wrote (`failed`).
        if !takeable(self.state.load(Acquire)) {
            return Taken::Nothing;
        }
        // Nothing is posted: no completion touches the count until this
        // thread posts again.
        self.state.store(0, Relaxed);
        match self.work.lock().take() {
            // Cleared for the context's next Call: no Read is pending.
            Some(w) if self.failed.xchg(0, Relaxed) != 0 => Taken::Failed(w),
            Some(w) => Taken::Work(w),
            None => Taken::Nothing,
        }
    }

    /// Parks the work with the number of Reads posted since it was taken;
    /// `true` if no Read is pending, so the caller must queue the
    /// operation again.
    pub(super) fn put_back(&self, work: ReadWork, posted: usize) -> bool {
        *self.work.lock() = Some(work);
        let add = park_add(posted);
        // Full: the work is parked before a completion can see the
        // operation parked, and the completions' writes are seen here.
        parked_idle(self.state.fetch_add(add, Full), add)
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
        completed_last(self.state.fetch_sub(1, Full))
    }
}

/// Completion of one RDMA Read posted as its own work request (into a
/// cached sink, or through a registration) (C `svc_rdma_wc_read_done`):
/// returns its send queue slots (two when its sink was registered just
/// before it: the unsignaled REG_MR ahead of it used one) and, for the
/// operation's last Read, queues the operation (read context `ctxt` of
/// the connection whose queues are `q`).
pub(super) struct ReadHandler {
    pub(super) slots: u32,
    pub(super) ctxt: usize,
    pub(super) q: Arc<RecvQ>,
}

impl CompletionHandler for ReadHandler {
    fn complete(&self, _wr: &Arc<WorkRequest<Self>>, wc: &WorkCompletion) {
        if let Some(op) = self.q.op(self.ctxt) {
            read_completed(&self.q, self.ctxt, op, self.slots, wc);
        }
    }
}
