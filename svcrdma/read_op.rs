// SPDX-License-Identifier: GPL-2.0

//! A Call being read ([`ReadOp`], C `svc_rdma_recv_ctxt` while its
//! `rc_readlist` is pulled): the state its Reads' completions, the
//! connection's queues and the thread that works on it share, kept in a
//! read context of the connection, and what a completion does (C
//! `svc_rdma_wc_read_done`).

use super::read::ReadWork;
use super::recv_queue::RecvQ;
use crate::rust::kext::park::CountedPark;
use crate::rust::module::trace;
use crate::rust::rdma::read_ctxts::ReadCtxtsOwner;
use crate::rust::rdma::verbs::{CompletionHandler, WorkCompletion, WorkRequest};
use kernel::sync::Arc;

/// A Call being read, the park of a read context of its connection
/// (`rust/rdma/read_ctxts.rs`, which holds the completion entries of its
/// Reads): its work ([`ReadWork`]), worked on in place by the thread that
/// holds it and parked while its Reads are pending, and the count of
/// those. The last completion of a parked work (or the thread parking it
/// with nothing pending) queues the context on the connection's
/// read-complete queue, exactly once; the thread that takes it off a queue
/// holds the work ([`crate::rust::kext::park::ParkHolder`]): only that
/// thread posts the Call's Reads. A work given up on with Reads pending is
/// kept for good ([`crate::rust::kext::park::ParkHolder::keep`]), never
/// queued, and its context never given back. It lives as long as the
/// connection, whose queue pair is drained before it is freed: no
/// reference is counted per Read, and no lock taken.
pub(super) type ReadOp = CountedPark<ReadWork>;

impl ReadCtxtsOwner for RecvQ {
    type Work = ReadWork;

    // Inlined into the contexts' completion handler (`read_ctxts.rs`):
    // one function per Read completion, as C's `svc_rdma_wc_read_done`
    // is; called, it cost a 4 KiB WRITE its call and saved registers.
    #[inline(always)]
    fn read_done(&self, ctxt: usize, op: &ReadOp, reads: u32, wc: &WorkCompletion) {
        // Each Read of the chain held a send queue slot.
        read_completed(self, ctxt, op, reads, wc);
    }
}

/// A Read of `op`, or a chain of them (context `ctxt` of the connection
/// whose read-complete queue is `q`), completed with `wc` (C
/// `svc_rdma_wc_read_done`): returns its `slots` send queue slots and, for
/// the operation's last completion, queues the operation.
// Inlined into the completion handlers, with the queueing: one function
// per completion, as C's `svc_rdma_wc_read_done` is.
#[inline(always)]
fn read_completed(q: &RecvQ, ctxt: usize, op: &ReadOp, slots: u32, wc: &WorkCompletion) {
    let ok = wc.is_ok();
    if !ok {
        read_failed(q, wc);
    }
    if op.complete(ok) {
        q.queue_read_done(ctxt);
    }
    q.sq.release(slots);
}

/// A Read completed in error: closes only this connection, flushed too (C
/// `svc_rdma_wc_read_done`), at once, not when the operation's last Read
/// completes.
#[cold]
#[inline(never)]
fn read_failed(q: &RecvQ, wc: &WorkCompletion) {
    if !wc.is_flush() {
        trace::svcrdma_wc_read_err(wc.status);
        crate::pr_warn_ratelimited!(
            "svcrdma: RDMA Read failed, status {}; closing the connection\n",
            wc.status
        );
    }
    q.link().close();
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
