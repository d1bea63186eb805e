// SPDX-License-Identifier: GPL-2.0

//! One client connection (C `struct rpcrdma_xprt` with its `rpcrdma_ep`):
//! the state every part of the client shares. What is done with it lives
//! in files named like the C module's:
//!
//! - `connect`: resolution, queue pair, MR pool, negotiation and CM events
//!   (`verbs.c`); `disconnect`: shutdown and drain;
//! - `marshal`: a call as the planner decides (`rpc_rdma.c`, send side),
//!   `marshal_fast`: the common calls in one pass;
//! - `reply`: receive completions and replies (`rpc_rdma.c`, receive side);
//! - `frwr`: the MR pool and registration, `invalidate`: invalidation
//!   (`frwr_ops.c`);
//! - `physical`: the global-rkey strategy;
//! - `regcache`: the registration cache (`memreg=cache`);
//! - `send_buf`: the send queue gate and the Send contexts
//!   (`rpcrdma_sendctx`);
//! - `backchannel`: callbacks from the server (`backchannel.c`).
//!
//! Ownership: completion handlers hold an `Arc<Conn>` while their work
//! request is posted, but for the Send and Receive contexts of the rings,
//! which are fields of the connection and find it by their offset. [`Conn::shutdown`] drains the queue pair before the
//! last reference can go (the transport drops its references only after
//! it), after which nothing can be posted on it (the endpoint refuses posts
//! once its drain starts); the last reference frees everything; if a late
//! completion holds it, the endpoint's teardown runs off that completion's
//! CQ.

use super::reg::RegList;
use super::regcache::CacheState;
use super::send_buf::SendSlots;
use super::stats::Stats;
use super::transport::Settings;
use crate::proto::marshal_fast::FastLimits;
use crate::proto::msg::DecodeLimits;
use crate::proto::planner::TransportParams;
use crate::rust::kext::shrinker::ObjectShrinker;
use crate::rust::kext::spin_lock::{new_spinlock, SpinLock};
use crate::rust::rdma::recv_ring::RecvRing;
use crate::rust::rdma::send_ring::SendRing;
use crate::rust::rdma::verbs::{Endpoint, MappedBuf};
use crate::rust::sunrpc::xprt::{Mr, Xprt};
use kernel::alloc::KVec;
use kernel::prelude::*;
use kernel::sync::atomic::{Atomic, Relaxed};
use kernel::sync::{Arc, Completion, SetOnce};

/// Registrations of one request, kept until its reply arrives.
#[derive(Default)]
pub(super) struct Pending {
    pub(super) xid: u32,
    pub(super) regs: RegList,
    /// Bytes offered to the server: the Write chunk and the Reply chunk.
    /// A reply claiming more was not written where we registered.
    pub(super) offered: Offered,
}

/// What a request's lock guards: the registrations of its call, and an
/// MR it keeps for its next call (C's `rl_free_mrs`).
#[derive(Default)]
pub(super) struct Kept {
    pub(super) pending: Pending,
    /// An unmapped MR of the pool of the connection the request was last
    /// sent on, which its reply's server invalidated: the request's next
    /// call registers it without going to the pool (`Conn::send_fast`), and
    /// the connection's shutdown takes it back (it names the connection's
    /// protection domain).
    pub(super) spare: Option<Mr>,
}

/// The client's state for one request, in the request's slot (C
/// `rpcrdma_req`): what its call registered, from the post until the
/// reply handler or `buf_free` takes it, kept in place (C's
/// `rl_registered`): a reply that needs nothing more (its MR invalidated
/// by the server) releases it where it is, without moving the list out.
/// Found from the request itself
/// ([`crate::rust::sunrpc::xprt::RpcRqst::state`]): there is no list of
/// pending calls to search.
///
/// # Invariants
///
/// `kept` is true whenever `kept.pending.regs` holds registrations (it is
/// written under the lock, with them).
#[pin_data]
pub(crate) struct ReqState {
    #[pin]
    lock: SpinLock<Kept>,
    kept: Atomic<bool>,
}

impl ReqState {
    pub(super) fn new() -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            lock <- new_spinlock!(Kept::default(), "rpcrdma_rs::xprt::req_pending"),
            kept: Atomic::new(false),
        })
    }

    /// Keeps what the request registered (`regs`, for the call `xid` that
    /// offered `offered`) and runs `post` with it, under the request's
    /// lock (which lends the registrations: whoever takes them waits for
    /// the post); gives back what was kept before (nothing, but for a
    /// request marshaled again on a new connection after its predecessor
    /// dropped everything), for the caller to drop outside the lock.
    pub(super) fn keep_and<R>(
        &self,
        xid: u32,
        offered: Offered,
        regs: RegList,
        post: impl FnOnce(&RegList) -> R,
    ) -> (R, RegList) {
        let mut kept = self.lock.lock();
        // INVARIANT: set with the registrations, under the lock.
        self.kept.store(true, Relaxed);
        let p = &mut kept.pending;
        p.xid = xid;
        p.offered = offered;
        let stale = core::mem::replace(&mut p.regs, regs);
        let res = post(&p.regs);
        (res, stale)
    }

    /// Runs `marshal` under the request's lock on the request's empty
    /// registrations and its spare MR: it registers in place, and posts
    /// what it registered before it returns (the lock lends the
    /// registrations: whoever takes them waits for the post). Gives back
    /// what was kept before (as [`Self::keep_and`]), for the caller to
    /// drop outside the lock. `marshal` may not sleep.
    pub(super) fn marshal_in_place<R>(
        &self,
        marshal: impl FnOnce(&mut Pending, &mut Option<Mr>) -> R,
    ) -> (R, Option<Pending>) {
        let mut kept = self.lock.lock();
        let kept = &mut *kept;
        let stale = (!kept.pending.regs.is_empty()).then(|| core::mem::take(&mut kept.pending));
        // INVARIANT: set before `marshal` registers, under the lock; and
        // before it posts, so that the reply, which may look before it
        // takes the lock (`may_keep`), finds it set.
        self.kept.store(true, Relaxed);
        let res = marshal(&mut kept.pending, &mut kept.spare);
        if kept.pending.regs.is_empty() {
            self.kept.store(false, Relaxed);
        }
        (res, stale)
    }

    /// Takes what the request registered, if anything is left.
    pub(super) fn take(&self) -> Option<Pending> {
        let mut kept = self.lock.lock();
        // INVARIANT: cleared with the registrations, under the lock.
        self.kept.store(false, Relaxed);
        if kept.pending.regs.is_empty() {
            return None;
        }
        Some(core::mem::take(&mut kept.pending))
    }

    /// Takes everything the request holds of a connection: what it
    /// registered and its spare MR (the connection's shutdown).
    pub(super) fn take_all(&self) -> (Option<Pending>, Option<Mr>) {
        let spare = self.lock.lock().spare.take();
        (self.take(), spare)
    }

    /// Runs a reply's handler `f` on what the request registered and its
    /// spare MR, in place, under the request's lock: `f` takes out what
    /// the reply released (an MR the server invalidated) and keeps it as
    /// the spare or returns it. Returns with `f`'s result whether
    /// registrations are left, for the caller to [`Self::take`] and
    /// invalidate.
    pub(super) fn reply_in_place<T>(
        &self,
        f: impl FnOnce(&mut Pending, &mut Option<Mr>) -> T,
    ) -> (T, bool) {
        let mut kept = self.lock.lock();
        let kept = &mut *kept;
        let t = f(&mut kept.pending, &mut kept.spare);
        let left = !kept.pending.regs.is_empty();
        if !left {
            // INVARIANT: cleared with the registrations, under the lock.
            self.kept.store(false, Relaxed);
        }
        (t, left)
    }

    /// Whether the request may keep registrations, read without the lock
    /// (most keep none: the reply handler took them, or the call had no
    /// chunk), as C's `buf_free` checks `rl_registered`. A relaxed load
    /// sees both writes: `kept` is set before the transmit that posted the
    /// registrations unpins the request under `queue_lock`, which
    /// `xprt_release` takes before `buf_free` while the request waits for
    /// a reply; it is cleared before the reply handler completes the RPC,
    /// whose wakeup comes before `buf_free`. The reply handler reads it
    /// too: `kept` is set before the post whose Send its reply answers (a
    /// reply that comes earlier is a forged one, which finds nothing, as
    /// if it had taken the lock first). A stale `true` only makes the
    /// caller look.
    pub(super) fn may_keep(&self) -> bool {
        self.kept.load(Relaxed)
    }
}

/// What a request registered for the server to write into.
#[derive(Clone, Copy, Default)]
pub(super) struct Offered {
    pub(super) write: u32,
    pub(super) reply: u32,
}

/// One connection.
#[pin_data]
pub(super) struct Conn {
    pub(super) ep: Endpoint,
    pub(super) xprt: Xprt,
    pub(super) stats: Arc<Stats>,
    pub(super) settings: Settings,
    /// Our own thresholds: the connection's parameters until
    /// [`Self::negotiated`] is set.
    pub(super) initial_params: TransportParams,
    /// The parameters of the negotiation, set once (before any call is
    /// sent): every call reads them, without a lock.
    pub(super) negotiated: SetOnce<Negotiated>,
    pub(super) limits: DecodeLimits,
    pub(super) credits: Atomic<u32>,
    /// The send queue's gate.
    pub(super) slots: SendSlots,
    pub(super) closing: Atomic<bool>,
    /// Set by the first caller of [`Conn::drain_once`].
    pub(super) drain_started: Atomic<bool>,
    /// Completed once the queue pair is drained: every registration of the
    /// connection is then unreachable by the peer.
    #[pin]
    pub(super) drained: Completion,
    #[pin]
    pub(super) mrs: SpinLock<KVec<Mr>>,
    /// MRs whose RPC completed but which await a batched invalidation.
    #[pin]
    pub(super) dirty: SpinLock<KVec<Mr>>,
    /// `memreg=fmr` with a pool of at least twice the slots: a request
    /// keeps the MR its server invalidated for its next call
    /// ([`Kept::spare`]), and requests so keep at most half the pool.
    pub(super) keep_spares: bool,
    pub(super) write_pad: Option<(Mr, Arc<MappedBuf>)>,
    pub(super) global_rkey: u32,
    /// The Send contexts, each with its Send buffer DMA-mapped once (C
    /// `rpcrdma_sendctx`): posted by the holder of the ring's head, which
    /// the transport keeps under sunrpc's send lock, and retired by the
    /// send CQ. Calls' Sends go out unsignaled but for every
    /// `send_batch(credits)`th (and those with mapped pages): their
    /// contexts retire with the next signaled one (C `re_send_batch`);
    /// those left after the drain are retired by [`Conn::shutdown`].
    pub(super) send_ring: SendRing<Conn>,
    /// The Receive contexts, each with its buffer DMA-mapped once (C
    /// `rpcrdma_rep`), posted again in batches by the receive CQ's poller.
    pub(super) recv_ring: RecvRing<Conn>,
    /// `memreg=cache`: the registration cache (`None` with the other
    /// strategies, and once the connection is shut down).
    #[pin]
    pub(super) cache: SpinLock<Option<CacheState>>,
    /// `memreg=cache`: the memory shrinker of the cache, which holds the
    /// connection; taken and dropped by [`Conn::shutdown`].
    #[pin]
    pub(super) shrinker: SpinLock<Option<ObjectShrinker<Conn>>>,
}

impl Conn {
    /// The sunrpc transport this connection serves.
    pub(super) fn xprt(&self) -> &Xprt {
        &self.xprt
    }

    /// The queue pair's endpoint.
    pub(super) fn ep(&self) -> &Endpoint {
        &self.ep
    }

    /// The negotiated inline send size.
    pub(super) fn inline_send(&self) -> u32 {
        self.params().inline_send
    }

    /// The connection's parameters (negotiated once connected), borrowed:
    /// every call reads them, and a copy of the whole set costs more than
    /// the fields it reads.
    pub(super) fn params(&self) -> &TransportParams {
        self.negotiated
            .as_ref()
            .map_or(&self.initial_params, |n| &n.params)
    }

    /// What the negotiation settled, once it has.
    pub(super) fn negotiated(&self) -> Option<&Negotiated> {
        self.negotiated.as_ref()
    }
}

/// A connection's parameters as negotiated, and the limits its common
/// calls are recognised by, worked out from them once.
pub(super) struct Negotiated {
    pub(super) params: TransportParams,
    /// `None` where the parameters leave every call to the planner.
    pub(super) fast: Option<FastLimits>,
}

impl Negotiated {
    pub(super) fn new(params: TransportParams) -> Self {
        // Calls are pulled up into Send buffers of the inline send size.
        let fast = FastLimits::new(&params, params.inline_send);
        Self { params, fast }
    }
}
