// SPDX-License-Identifier: GPL-2.0

//! The receive side's queues of one connection (C `sc_rq_dto_q`,
//! `sc_read_complete_q` and `svc_rdma_refresh_recvs`): completed Receives
//! in arrival order, Calls whose RDMA Reads completed or wait for send
//! queue room, and the batched repost of consumed Receives.

use super::conn::{CallCtxt, Conn};
use super::read::ReadWork;
use super::read_op::ReadOp;
use super::sq_gate::SqGate;
use crate::impl_ring_in;
use crate::rust::kext::index_queue::{BoxQueue, IndexQueue};
use crate::rust::kext::park::ParkHolder;
use crate::rust::rdma::read_ctxts::ReadCtxts;
use crate::rust::rdma::recv_slots::{Recv, RecvBatch, RecvSlots, RecvSlotsOwner};
use crate::rust::rdma::verbs::WorkCompletion;
use crate::rust::sunrpc::svc::XprtLink;
use kernel::prelude::*;
use kernel::sync::atomic::{Atomic, Relaxed};
use kernel::sync::Arc;

/// Receives posted beyond the credit grant (C: 2 backchannel requests and
/// a batch of 7 in flight while being refilled).
pub(super) const RECV_EXTRA_BC: u32 = 2;
pub(super) const RECV_BATCH: u32 = 7;

/// Consumed Receives posted again together, as one chain.
pub(super) type RepostBatch = RecvBatch<{ RECV_BATCH as usize }>;

/// Most bytes of Receive buffers a connection keeps for requests to hold
/// (Calls served in place, see [`RecvQ::try_hold`]): 256 buffers at the
/// default 4 KiB inline size, 16 at 64 KiB. More would rarely be used at
/// once (a request holds its Receive while an nfsd thread works on it, or
/// while it is deferred) and cost memory on every connection.
pub(super) const HELD_RECV_BYTES: u32 = 1 << 20;

/// What `xpo_recvfrom` found to work on.
pub(super) enum Next {
    /// A Call being read: its read context.
    Op(usize),
    /// A received message: its receive context and length.
    Recv(Recv, u32),
    /// Nothing.
    Idle,
}

/// A connection's queues of work for `xpo_recvfrom`, its Receives and
/// what its server threads keep for the next Calls, all without a lock
/// (C takes `sc_rq_dto_lock` in the Receive completion and in
/// `svc_rdma_recvfrom`). A completion queues what it brings and then sets
/// `XPT_DATA`; `recvfrom` clears the flag only after finding every queue
/// empty, and looks again after clearing it (both steps fully ordered), so
/// no wakeup is lost.
///
/// # Invariants
///
/// `ready` and `sq_wait` hold distinct claimed read contexts (by index),
/// each queued once per park, so at most [`RecvQ::ops`]' number of them
/// together, the room of each: pushing never fails. `held` is at most
/// `max_held`.
#[pin_data]
pub(super) struct RecvQ {
    /// Calls whose Reads all completed, or that may post more (C
    /// `sc_read_complete_q`): their read contexts.
    pub(super) ready: IndexQueue,
    /// Calls with Reads left to post and no send queue room for them.
    pub(super) sq_wait: IndexQueue,
    /// Allocations of released request states, reused by the next Calls
    /// (C keeps its receive contexts on a free list): at most the credit
    /// grant of them, the queue's room.
    pub(super) ctxts: BoxQueue<CallCtxt>,
    /// Receives taken that may be, or are, held by requests working on
    /// the Call in their buffer, not yet queued for reposting.
    held: Atomic<u32>,
    /// At most this many are held: the Receives posted beyond those the
    /// client may use (`RecvQueueSizing::held_recvs`), so that holding
    /// them never leaves the client short of posted Receives. A Call
    /// received while that many are held is copied out of its buffer.
    max_held: u32,
    /// The receive contexts (C `svc_rdma_recv_ctxt`).
    pub(super) recvs: RecvSlots<RecvQ>,
    pub(super) link: Arc<XprtLink>,
    /// The connection's send queue gate, where a Read's completion
    /// returns its slots.
    pub(super) sq: Arc<SqGate>,
    /// The read contexts (C `svc_rdma_chunk_ctxt` of a receive context),
    /// one claimed by each Call being read from its first post to its
    /// assembly (or for good, if given up on with Reads posted): as many
    /// as the credit grant, which a client never exceeds (a Call being
    /// read has no Reply yet). Freed after the queue pair's drain.
    pub(super) ops: ReadCtxts<RecvQ>,
}

impl RecvQ {
    /// The queues of a connection granting `reads` credits, with `recvs`
    /// as its Receives, of which at most `max_held` are held.
    pub(super) fn new(
        recvs: RecvSlots<RecvQ>,
        reads: usize,
        max_held: u32,
        link: Arc<XprtLink>,
        sq: Arc<SqGate>,
    ) -> Result<Self> {
        // INVARIANT: room for every read context in each queue, nothing
        // held.
        Ok(Self {
            ready: IndexQueue::new(reads)?,
            sq_wait: IndexQueue::new(reads)?,
            ctxts: BoxQueue::new(reads)?,
            held: Atomic::new(0),
            max_held,
            recvs,
            link,
            sq,
            ops: ReadCtxts::new(reads)?,
        })
    }

    pub(super) fn link(&self) -> &Arc<XprtLink> {
        &self.link
    }

    /// Takes a hold on a Receive taken off the queue, if fewer than
    /// `max_held` are held.
    pub(super) fn try_hold(&self) -> bool {
        let mut cur = self.held.load(Relaxed);
        while cur < self.max_held {
            match self.held.cmpxchg(cur, cur + 1, Relaxed) {
                Ok(_) => return true,
                Err(now) => cur = now,
            }
        }
        false
    }

    /// Gives back a hold [`Self::try_hold`] took.
    pub(super) fn unhold(&self) {
        let mut cur = self.held.load(Relaxed);
        while cur > 0 {
            match self.held.cmpxchg(cur, cur - 1, Relaxed) {
                Ok(_) => return,
                Err(now) => cur = now,
            }
        }
    }

    /// Takes the oldest Call waiting for send queue room, if a Read could
    /// take a slot now.
    pub(super) fn take_room_waiter(&self) -> Option<usize> {
        if self.sq_wait.is_empty() || !self.sq.read_room() {
            return None;
        }
        self.sq_wait.pop().and_then(|op| usize::try_from(op).ok())
    }

    /// The Call being read in context `ctxt`.
    pub(super) fn op(&self, ctxt: usize) -> Option<&ReadOp> {
        self.ops.park(ctxt)
    }

    /// Queues the Call being read in context `ctxt`, whose Reads have all
    /// completed (C `svc_rdma_wc_read_done`), and marks the transport
    /// `XPT_DATA`.
    pub(super) fn read_done(&self, op: usize) {
        // Room for each context, each queued once per park.
        if self.ready.push(op as u64) {
            self.link.data_ready();
        } else {
            self.link.close();
        }
    }

    /// The Call being read that is next to continue, if any.
    pub(super) fn take_ready(&self) -> Option<usize> {
        self.ready.pop().and_then(|op| usize::try_from(op).ok())
    }

    /// Whether a completion queued anything for `recvfrom`.
    pub(super) fn completed_queued(&self) -> bool {
        !self.ready.is_empty() || !self.recvs.completed_is_empty()
    }

    /// Leaves the Call being read in context `op` waiting for send queue
    /// room; the release that makes room marks the transport `XPT_DATA`
    /// ([`SqGate::starve`]).
    pub(super) fn wait_for_room(&self, op: usize, sq: &SqGate) {
        // Queued (fully ordered) before the gate notes the starvation.
        if !self.sq_wait.push(op as u64) {
            // Unreachable by the type invariant.
            self.link.close();
        } else if !sq.starve() {
            // Room appeared meanwhile.
            self.link.data_ready();
        }
    }

    /// Claims a read context for a Call to be read, unless every one is
    /// claimed: its index and the right to its work.
    pub(super) fn try_admit_read(&self) -> Option<(usize, ParkHolder<'_, ReadWork>)> {
        self.ops.claim()
    }

    /// The Call being read in context `ctxt` was assembled or given up
    /// on, its context off the queues: the context, given back with
    /// `holder`, may serve another.
    pub(super) fn read_finished(&self, ctxt: usize, holder: ParkHolder<'_, ReadWork>) {
        self.ops.release(ctxt, holder);
    }
}

impl_ring_in!(RecvQ, recvs: RecvSlots<RecvQ>);
impl_ring_in!(RecvQ, ops: ReadCtxts<RecvQ>);

impl RecvSlotsOwner for RecvQ {
    const REPOST_BATCH: usize = RECV_BATCH as usize;

    /// Completion of one posted Receive (C `svc_rdma_wc_receive`).
    fn received(&self, recv: Recv, wc: &WorkCompletion) {
        if wc.is_ok() {
            match self.recvs.queue_completed(recv, wc.byte_len) {
                // Queued (fully ordered) before the flag is set.
                Ok(()) => self.link.data_ready(),
                // Not reached: the queue has room for every context.
                Err(recv) => {
                    drop(recv);
                    self.link.close();
                }
            }
        } else {
            if !wc.is_flush() {
                crate::pr_warn_ratelimited!("svcrdma: receive failed, status {}\n", wc.status);
            }
            // Flushed too (C `svc_rdma_wc_receive`): the queue pair went to
            // the error state, maybe with no other completion in error
            // (see `SqGate::completed`), and only the disconnect tells the
            // client. The context is not posted again.
            drop(recv);
            self.link.close();
        }
    }
}

impl Conn {
    /// Queues a consumed Receive for reposting (`held`: taken with a hold,
    /// [`RecvQ::try_hold`]) and posts [`RECV_BATCH`] of them as one chain
    /// each time that many more were queued (C `svc_rdma_refresh_recvs`).
    /// Fewer than a batch wait to be claimed, and the receive queue holds
    /// the credits, the backchannel's Receives and one batch more besides
    /// those requests hold, so the client never finds fewer posted
    /// Receives than it may use.
    pub(super) fn repost(&self, recv: Recv, held: bool) {
        let rq = &self.shared.rq;
        if held {
            rq.unhold();
        }
        match rq.recvs.queue_repost(recv) {
            Ok(Some(batch)) => self.post_reposts(batch),
            Ok(None) => {}
            // Not reached: the connection's own context. Dropped, it is
            // lost to the connection, never posted twice.
            Err(recv) => drop(recv),
        }
    }

    /// Posts the Receives of `batch` again, as one chain.
    pub(super) fn post_reposts(&self, mut batch: RepostBatch) {
        let s = &self.shared;
        match s.rq.recvs.post(&s.ep, &mut batch) {
            Ok(()) => {}
            // The connection is ending (its queue pair drained): nothing
            // to say.
            Err(e) if e == ESHUTDOWN => s.link.close(),
            _ => {
                crate::pr_warn_ratelimited!(
                    "svcrdma: cannot repost {} receives; closing the connection\n",
                    batch.len()
                );
                s.link.close();
            }
        }
    }
}
