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
use crate::proto::ring_index::RingIndex;
use crate::rust::kext::park::ParkHolder;
use crate::rust::kext::spin_lock::SpinLock;
use crate::rust::rdma::read_ctxts::ReadCtxts;
use crate::rust::rdma::recv_slots::{Recv, RecvBatch, RecvSlots, RecvSlotsOwner};
use crate::rust::rdma::verbs::WorkCompletion;
use crate::rust::sunrpc::svc::XprtLink;
use kernel::alloc::KVec;
use kernel::prelude::*;
use kernel::sync::Arc;

/// Receives posted beyond the credit grant (C: 2 backchannel requests and
/// a batch of 7 in flight while being refilled).
pub(super) const RECV_EXTRA_BC: u32 = 2;
pub(super) const RECV_BATCH: u32 = 7;

/// Consumed Receives posted again together, as one chain.
pub(super) type RepostBatch = RecvBatch<{ RECV_BATCH as usize }>;

/// Most bytes of Receive buffers a connection keeps for requests to hold
/// (Calls served in place, see [`Ring::max_held`]): 256 buffers at the
/// default 4 KiB inline size, 16 at 64 KiB. More would rarely be used at
/// once (a request holds its Receive while an nfsd thread works on it, or
/// while it is deferred) and cost memory on every connection.
pub(super) const HELD_RECV_BYTES: u32 = 1 << 20;

/// Ring of completed Receives (context, byte length) in arrival order,
/// and the Calls being read.
///
/// # Invariants
///
/// `ready` and `sq_wait` hold distinct claimed read contexts (by index),
/// so at most [`RecvQ::ops`]' number of them together, each list's
/// capacity: pushing (from completion handlers too) never allocates and
/// never fails.
pub(super) struct Ring {
    /// Completed Receives and their lengths, room for as many as there
    /// are receive contexts: at most one of each is completed and not yet
    /// taken (its one [`Recv`]).
    pub(super) received: Fifo<(Recv, u32)>,
    /// Receives consumed by `recvfrom`, waiting to be reposted as one
    /// batch (fewer than [`RECV_BATCH`]).
    pub(super) repost: RepostBatch,
    /// Calls whose Reads all completed, or that may post more (C
    /// `sc_read_complete_q`): their read contexts.
    pub(super) ready: Fifo<usize>,
    /// Calls with Reads left to post and no send queue room for them.
    pub(super) sq_wait: Fifo<usize>,
    /// Allocations of released request states, reused by the next Calls
    /// (C keeps its receive contexts on a free list): at most the credit
    /// grant of them, the list's capacity.
    pub(super) ctxts: KVec<KBox<CallCtxt>>,
    /// Receives taken off the ring that may be, or are, held by requests
    /// working on the Call in their buffer, not yet queued for reposting.
    pub(super) held: u32,
    /// At most this many are held: the Receives posted beyond those the
    /// client may use (`RecvQueueSizing::held_recvs`), so that holding
    /// them never leaves the client short of posted Receives. A Call
    /// received while that many are held is copied out of its buffer.
    pub(super) max_held: u32,
}

/// A first-in, first-out queue of a fixed capacity kept as a ring
/// ([`RingIndex`]): taking the oldest moves nothing (C's lists, whose head
/// is taken as cheaply).
///
/// # Invariants
///
/// `slots.len()` is `at`'s capacity; the slots `at` occupies hold an
/// entry, the others none.
pub(super) struct Fifo<T> {
    slots: KVec<Option<T>>,
    at: RingIndex,
}

impl<T> Fifo<T> {
    /// An empty queue with room for `n`.
    pub(super) fn new(n: usize) -> Result<Self> {
        let mut slots = KVec::with_capacity(n, GFP_KERNEL)?;
        for _ in 0..n {
            slots.push(None, GFP_KERNEL)?;
        }
        // INVARIANT: `n` empty slots, none occupied.
        Ok(Self {
            slots,
            at: RingIndex::new(n),
        })
    }

    /// Whether it holds nothing.
    pub(super) fn is_empty(&self) -> bool {
        self.at.is_empty()
    }

    /// Appends `v`; gives it back when the queue is full.
    pub(super) fn push(&mut self, v: T) -> core::result::Result<(), T> {
        let Some(at) = self.at.push() else {
            return Err(v);
        };
        // INVARIANT: the slot just occupied gets its entry; `at` is below
        // the capacity, the slots' number.
        match self.slots.get_mut(at) {
            Some(slot) => {
                *slot = Some(v);
                Ok(())
            }
            None => Err(v),
        }
    }

    /// Takes the oldest.
    pub(super) fn pop(&mut self) -> Option<T> {
        let at = self.at.pop()?;
        // INVARIANT: the slot just freed is emptied.
        self.slots.get_mut(at)?.take()
    }

    /// Takes the oldest if there is one and `ok()`.
    pub(super) fn pop_if(&mut self, ok: impl FnOnce() -> bool) -> Option<T> {
        if self.is_empty() || !ok() {
            return None;
        }
        self.pop()
    }
}

/// What `xpo_recvfrom` found to work on.
pub(super) enum Next {
    /// A Call being read: its read context.
    Op(usize),
    /// A received message: its receive context and length.
    Recv(Recv, u32),
    /// Nothing.
    Idle,
}

impl Ring {
    /// Queues consumed Receive `recv` for reposting (`held`: it was taken
    /// with a hold, see [`Ring::held`]); once the queue holds
    /// [`RECV_BATCH`], returns it as the batch to post.
    pub(super) fn queue_repost(&mut self, recv: Recv, held: bool) -> Option<RepostBatch> {
        if held {
            self.held = self.held.saturating_sub(1);
        }
        // Cannot be full (it is emptied when it fills); if it were, the
        // context would be lost to the connection, never posted twice.
        let _ = self.repost.push(recv);
        if !self.repost.is_full() {
            return None;
        }
        Some(core::mem::take(&mut self.repost))
    }

    /// Takes a hold on a Receive taken off the ring, if fewer than
    /// [`Ring::max_held`] are held.
    pub(super) fn try_hold(&mut self) -> bool {
        let ok = self.held < self.max_held;
        if ok {
            self.held += 1;
        }
        ok
    }

    /// Appends a completed Receive; false (and the context lost) if the
    /// ring is full, which one entry per context rules out.
    pub(super) fn push(&mut self, recv: Recv, len: u32) -> bool {
        self.received.push((recv, len)).is_ok()
    }

    /// Whether no work is left for `xpo_recvfrom`: no completed Receive,
    /// no Call whose Reads completed or that waits for send queue room.
    pub(super) fn is_empty(&self) -> bool {
        self.received.is_empty() && self.ready.is_empty() && self.sq_wait.is_empty()
    }

    /// Takes the oldest completed Receive.
    pub(super) fn pop(&mut self) -> Option<(Recv, u32)> {
        self.received.pop()
    }
}

/// A connection's queues of work for `xpo_recvfrom`, under one lock so
/// that `XPT_DATA` is cleared only when all are empty (C `sc_rq_dto_lock`),
/// and its Receives, whose completions fill the ring.
#[pin_data]
pub(super) struct RecvQ {
    #[pin]
    pub(super) ring: SpinLock<Ring>,
    /// The receive contexts (C `svc_rdma_recv_ctxt`), a ring slot each.
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
    pub(super) fn link(&self) -> &Arc<XprtLink> {
        &self.link
    }

    /// The Call being read in context `ctxt`.
    pub(super) fn op(&self, ctxt: usize) -> Option<&ReadOp> {
        self.ops.park(ctxt)
    }

    /// Queues the Call being read in context `ctxt`, whose Reads have all
    /// completed (C `svc_rdma_wc_read_done`), and marks the transport
    /// `XPT_DATA`. Out of line: the thread that parks a Call with nothing
    /// pending calls it on its way out, not on the path that posts.
    #[inline(never)]
    pub(super) fn read_done(&self, op: usize) {
        self.queue_read_done(op);
    }

    /// [`Self::read_done`], inlined into the Read completion handler.
    #[inline(always)]
    pub(super) fn queue_read_done(&self, op: usize) {
        let queued = {
            let mut r = self.ring.lock();
            let queued = r.ready.push(op).is_ok();
            if queued {
                // Under the ring lock, like a Receive's completion.
                self.link.data_ready();
            }
            queued
        };
        // Unreachable by the type invariant of `Ring`.
        if !queued {
            self.link.close();
        }
    }

    /// Leaves the Call being read in context `op` waiting for send queue
    /// room; the release that makes room marks the transport `XPT_DATA`
    /// ([`SqGate::starve`]).
    pub(super) fn wait_for_room(&self, op: usize, sq: &SqGate) {
        let queued = {
            let mut r = self.ring.lock();
            let queued = r.sq_wait.push(op).is_ok();
            if queued && !sq.starve() {
                // Room appeared meanwhile.
                self.link.data_ready();
            }
            queued
        };
        // Unreachable by the type invariant of `Ring`.
        if !queued {
            self.link.close();
        }
    }

    /// Claims a read context for a Call to be read, unless every one is
    /// claimed: its index and the right to its work.
    pub(super) fn try_admit_read(&self) -> Option<(usize, ParkHolder<'_, ReadWork>)> {
        self.ops.claim()
    }

    /// The Call being read in context `ctxt` was assembled or given up
    /// on, its context off the ring's lists: the context, given back with
    /// `holder`, may serve another.
    pub(super) fn read_finished(&self, ctxt: usize, holder: ParkHolder<'_, ReadWork>) {
        self.ops.release(ctxt, holder);
    }
}

impl_ring_in!(RecvQ, recvs: RecvSlots<RecvQ>);
impl_ring_in!(RecvQ, ops: ReadCtxts<RecvQ>);

impl RecvSlotsOwner for RecvQ {
    /// Completion of one posted Receive (C `svc_rdma_wc_receive`).
    #[inline(always)]
    fn received(&self, recv: Recv, wc: &WorkCompletion) {
        if wc.is_ok() {
            let mut r = self.ring.lock();
            if r.push(recv, wc.byte_len) {
                // Under the ring lock, pairing with `recvfrom` clearing
                // XPT_DATA under it (C `sc_rq_dto_lock`).
                self.link.data_ready();
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
    /// [`Ring::try_hold`]) and posts the queue as one chain once it holds
    /// [`RECV_BATCH`] (C `svc_rdma_refresh_recvs`). The queue is never
    /// longer than the batch, and the receive queue holds the credits, the
    /// backchannel's Receives and one batch more besides those requests
    /// hold, so the client never finds fewer posted Receives than it may
    /// use.
    pub(super) fn repost(&self, recv: Recv, held: bool) {
        let batch = self.shared.rq.ring.lock().queue_repost(recv, held);
        if let Some(batch) = batch {
            self.post_reposts(batch);
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
