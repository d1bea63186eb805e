// SPDX-License-Identifier: GPL-2.0

//! The send queue gate of a server connection (C `sc_sq_avail` and
//! `svc_rdma_sq_wait`): every Send, RDMA Write and RDMA Read is posted with
//! a slot, and its completion gives the slot back. The count is an atomic,
//! taken and returned without a lock as C's is; only a Reply that finds
//! too few slots takes the wait's lock and sleeps.

use super::cache::BufCache;
use super::sq_done::SqHandler;
use super::stats::{stat_add, Stat};
use crate::proto::sq_slots::{SlotError, SqLimits, StallClock, Starve};
use crate::rust::kext::spin_lock::{new_spinlock, SpinLock};
use crate::rust::module::trace;
use crate::rust::rdma::ring_owner::impl_ring_in;
use crate::rust::rdma::send_pool::SendPool;
use crate::rust::rdma::wr_pool::WrPool;
use crate::rust::sunrpc::svc::{OnClose, XprtLink};
use kernel::new_condvar;
use kernel::prelude::*;
use kernel::sync::atomic::{Acquire, Atomic, Full, Relaxed};
use kernel::sync::{Arc, CondVar};
use kernel::time::{msecs_to_jiffies, ClockSource, Monotonic};

/// Send queue slots, with the wait of the Replies that find too few free.
/// The queue pair's spare entry for the drain (see
/// [`Endpoint::send_depth`]) is not among the slots.
///
/// A waiter counts itself in `attention` under `wait_lock` before it looks
/// at `avail`, and holds the lock until it sleeps on `wait`; a release
/// adds to `avail` before it looks at `attention`, and takes the lock
/// before it wakes them. Both steps are full barriers, so either the
/// waiter sees the slots or the release sees the waiter, asleep by the
/// time the release holds the lock. A starved Read operation and a release
/// meet the same way over `attention`'s [`STARVED`] bit. A take that finds
/// too few slots gives back what it took as a release does, so a waiter
/// that looked meanwhile is woken.
///
/// Taking slots for a Reply is one atomic operation when there is room
/// (C's `atomic_sub_return` in `svc_rdma_sq_wait`), and a release looks at
/// one word to learn that nobody waits. A closed gate is also
/// [`CLOSED_BIAS`] short of slots, so no take succeeds once it is closed
/// and `closed` is looked at only when a take fails.
///
/// [`Endpoint::send_depth`]: crate::rust::rdma::verbs::Endpoint::send_depth
#[pin_data]
pub(super) struct SqGate {
    /// Free slots (C `sc_sq_avail`), at most the depth; less
    /// [`CLOSED_BIAS`] once closed. Below zero only for the moment a take
    /// that found too few slots gives them back.
    avail: Atomic<i32>,
    limits: SqLimits,
    /// Set once: nothing is taken again, and waiters leave.
    closed: Atomic<bool>,
    /// [`STARVED`] while a Read operation waits for room
    /// ([`Self::starve`]), plus [`WAITER`] for each Reply waiting in
    /// [`Self::acquire_n`] (C `waitqueue_active`).
    attention: Atomic<u32>,
    /// Chains ending in a Send that completed, wrapping: the waiters'
    /// [`StallClock`]s restart when it changes.
    sends_done: Atomic<u64>,
    #[pin]
    wait_lock: SpinLock<()>,
    #[pin]
    wait: CondVar,
    /// Told when room appears for a starved Read operation, and closed
    /// when a Send or Write does not succeed ([`Self::completed`]).
    pub(super) link: Arc<XprtLink>,
    /// Where a completed Send's or copied Write's buffer goes back (the
    /// connection's cache; held here so that a work request need not hold
    /// a reference of its own).
    pub(super) cache: Arc<BufCache>,
    /// The allocations of completed RDMA Writes (and of Sends too long
    /// for [`Self::sends`]), reused by the next ones (C keeps its R/W
    /// contexts on a free list).
    #[pin]
    pub(super) wrs: WrPool<SqHandler>,
    /// The Replies' Sends (C `sc_send_ctxts`): preallocated contexts
    /// whose completion returns the slots of the Send and of the Writes
    /// posted ahead of it ([`SendPoolOwner::sent`]).
    #[pin]
    pub(super) sends: SendPool<SqGate>,
}

impl_ring_in!(SqGate, sends: SendPool<SqGate>);

/// Most work request allocations a connection keeps for reuse (at most
/// its send queue's depth): a 4 KiB READ's Reply is a Send and one RDMA
/// Write, but a 256 KiB one is a Send and three Writes of up to 29 pages,
/// and a client keeps dozens of calls in flight (1 MiB reads at iodepth 8
/// with rsize 256 KiB: up to 8 x 4 x 4 = 128). Each is about 2 KiB (the
/// 2 KiB kmalloc class, `WorkRequest`'s `FITS_2K`), allocated only when
/// that many were in flight at once.
const WR_POOL_MAX: u32 = 256;

/// How long Replies may wait for send queue room while no Send of the
/// connection completes before the connection is closed (C waits without
/// bound). A peer that posts no Receives and asks for endless
/// receiver-not-ready retries, or that stops reading its iWARP stream,
/// would otherwise hold every server thread that takes one of its Calls,
/// and every other client would wait with it (audit M2).
///
/// 3 s: a healthy peer completes Sends within a round trip, so a queue full
/// of them drains in milliseconds; a lost packet costs a retransmission
/// timeout (about 0.5 s with the CM's default on RoCE), and a peer that
/// stays unreachable fails the queue pair after its retries anyway. Well
/// under the 5 s in which the svc-hostile scenario wants another
/// connection served, given the 1 s a waiter may sleep between looks
/// ([`WAIT_MS`]). A closed connection costs its client a reconnect and the
/// retransmission of its pending Calls.
const SQ_STALL_MS: u64 = 3_000;

/// Longest sleep of a waiting Reply between looks at the gate, the
/// transport's flags and the clock of [`SQ_STALL_MS`].
const WAIT_MS: u32 = 1_000;

/// `SqGate::attention`'s bit for a starved Read operation.
const STARVED: u32 = 1;

/// What each waiting Reply adds to `SqGate::attention`.
const WAITER: u32 = 2;

/// Taken from `SqGate::avail` when the gate closes: far more than its
/// depth (`SqLimits` keeps it within `i32`), so no take succeeds after it,
/// whatever comes back.
const CLOSED_BIAS: i32 = 1 << 30;

/// Milliseconds of the monotonic clock.
fn now_ms() -> u64 {
    u64::try_from(Monotonic::ktime_get() / 1_000_000).unwrap_or(0)
}

fn slot_error(e: SlotError) -> Error {
    match e {
        SlotError::Closed => ENOTCONN,
        SlotError::TooMany => EINVAL,
    }
}

impl SqGate {
    /// A gate of `depth` slots whose Reads leave `read_keep` of them to
    /// Sends and Writes, with Send contexts of `send_len` bytes (the
    /// inline send size).
    pub(super) fn new(
        depth: u32,
        read_keep: u32,
        send_len: usize,
        link: Arc<XprtLink>,
        cache: Arc<BufCache>,
    ) -> Result<Arc<Self>> {
        let limits = SqLimits::new(depth, read_keep);
        let depth = limits.depth();
        let wrs = WrPool::new(depth.min(WR_POOL_MAX) as usize)?;
        // Made as Replies need them: at most one per slot (a context is
        // taken before the slots, so a few more Replies than slots could
        // want one at once; those send from the cache this time).
        let sends = SendPool::new(send_len, depth);
        Arc::pin_init(
            try_pin_init!(Self {
                avail: Atomic::new(i32::try_from(depth).unwrap_or(i32::MAX)),
                limits,
                closed: Atomic::new(false),
                attention: Atomic::new(0),
                sends_done: Atomic::new(0),
                wait_lock <- new_spinlock!((), "svcrdma::sq"),
                wait <- new_condvar!("svcrdma::sq_wait"),
                link,
                cache,
                wrs <- wrs,
                sends <- sends,
            }? Error),
            GFP_KERNEL,
        )
    }

    /// Free slots now (for trace events).
    fn avail_now(&self) -> u32 {
        u32::try_from(self.avail.load(Relaxed)).unwrap_or(0)
    }

    /// Takes `n` slots if that many are free, without waiting; `waiting`:
    /// the caller is a waiter, holding `wait_lock`.
    fn try_take(&self, n: u32, waiting: bool) -> Result<bool> {
        let m = i32::try_from(n)?;
        if self.avail.fetch_sub(m, Full) >= m {
            return Ok(true);
        }
        self.untake(n, waiting)
    }

    /// Gives back the `n` slots a take that found too few took (see
    /// [`Self::try_take`]). Out of line: a Reply's take nearly always
    /// succeeds, and its path is compiled without this.
    #[cold]
    #[inline(never)]
    fn untake(&self, n: u32, waiting: bool) -> Result<bool> {
        if waiting {
            // Other waiters look only under the lock this one holds: none
            // looked meanwhile; a starved Read operation may have.
            let attention = self.put_back(n);
            self.tell_starved(attention);
        } else {
            // Given back as a release gives (see the type's comment).
            self.release(n);
        }
        if self.closed.load(Acquire) {
            return Err(ENOTCONN);
        }
        Ok(false)
    }

    /// Closes the gate: nothing is taken from it again.
    fn mark_closed(&self) {
        if !self.closed.xchg(true, Full) {
            self.avail.fetch_sub(CLOSED_BIAS, Full);
        }
    }

    /// Takes `n` slots for a chain of Sends and RDMA Writes (C
    /// `svc_rdma_sq_wait` with the chain's `sqecount`), sleeping while too
    /// few are free; `ENOTCONN` once closed, `EINVAL` if the gate has fewer
    /// slots in all. Like C, a Reply waits for room, and any close of the
    /// transport ends the wait: one asked for through the link closes the
    /// gate and wakes the waiters ([`OnClose`]); one that sunrpc makes
    /// itself is seen at the next look, within [`WAIT_MS`]. Unlike C, the
    /// wait ends too when Replies waited [`SQ_STALL_MS`] without a Send
    /// completing: the connection is then closed.
    pub(super) fn acquire_n(&self, n: u32) -> Result {
        self.limits.check_chain(n).map_err(slot_error)?;
        if self.try_take(n, false)? {
            return Ok(());
        }
        self.wait_for(n)
    }

    /// The slow path of [`Self::acquire_n`].
    #[cold]
    fn wait_for(&self, n: u32) -> Result {
        let mut guard = self.wait_lock.lock();
        // This Reply's own: it sleeps and wakes many times over the bound.
        let mut clock = None;
        loop {
            // Counted before the look (see the type's comment).
            self.attention.fetch_add(WAITER, Full);
            match self.try_take(n, true) {
                Ok(false) => {}
                taken => {
                    self.attention.fetch_sub(WAITER, Relaxed);
                    return taken.map(|_| ());
                }
            }
            stat_add(Stat::SqStarve, 1);
            trace::svcrdma_sq_full(self.avail_now());
            let clock = clock
                .get_or_insert_with(|| StallClock::new(now_ms(), self.sends_done.load(Relaxed)));
            let _ = self
                .wait
                .wait_interruptible_timeout(&mut guard, msecs_to_jiffies(WAIT_MS));
            self.attention.fetch_sub(WAITER, Relaxed);
            trace::svcrdma_sq_retry(self.avail_now());
            if self.closed.load(Acquire) {
                return Err(ENOTCONN);
            }
            // The link's lock nests inside the wait's (never the reverse:
            // the link calls its hook without its lock).
            let closing = self.link.is_closing();
            let stalled =
                !closing && clock.stalled(self.sends_done.load(Relaxed), now_ms(), SQ_STALL_MS);
            if closing || stalled {
                // Every other waiter leaves too, and nothing is posted again.
                self.mark_closed();
                drop(guard);
                self.wait.notify_all();
                if stalled {
                    crate::pr_warn_ratelimited!(
                        "svcrdma: no Send completed in {} ms while Replies wait for send queue room; closing the connection\n",
                        SQ_STALL_MS
                    );
                    self.link.close();
                }
                return Err(ENOTCONN);
            }
        }
    }

    /// Whether Replies wait for send queue room (C `svc_rdma_has_wspace`
    /// looks at its wait queues the same way, without a lock).
    pub(super) fn has_waiters(&self) -> bool {
        self.attention.load(Relaxed) >= WAITER
    }

    /// Slots in all: the most one chain may take.
    pub(super) fn depth(&self) -> u32 {
        self.limits.depth()
    }

    /// Takes `n` slots for RDMA Reads (and their registrations) if they
    /// are free beyond the reserve, without waiting: `Ok(false)` if not.
    pub(super) fn try_acquire_read(&self, n: u32) -> Result<bool> {
        // A closed gate has no room (`CLOSED_BIAS`): looked at only then.
        let mut cur = self.avail.load(Relaxed);
        while let Some(left) = self.limits.read_take(cur, n) {
            match self.avail.cmpxchg(cur, left, Full) {
                Ok(_) => return Ok(true),
                Err(now) => cur = now,
            }
        }
        if self.closed.load(Acquire) {
            return Err(ENOTCONN);
        }
        Ok(false)
    }

    /// Whether a Read could take a slot now (never once closed:
    /// `CLOSED_BIAS`).
    pub(super) fn read_room(&self) -> bool {
        self.limits.read_room(self.avail.load(Relaxed))
    }

    /// Called by a thread about to leave a Read operation waiting for
    /// room: `false` if there is room now (the caller must see to it),
    /// `true` if there is none, in which case the release that makes room
    /// marks the transport `XPT_DATA` (the mark set before the last look,
    /// so that release cannot be missed).
    pub(super) fn starve(&self) -> bool {
        let room = match self.try_starve() {
            Starve::Room => true,
            Starve::Closed => false,
            Starve::Starved => {
                stat_add(Stat::SqStarve, 1);
                false
            }
        };
        !room
    }

    fn try_starve(&self) -> Starve {
        if self.closed.load(Acquire) {
            return Starve::Closed;
        }
        if self.limits.read_room(self.avail.load(Relaxed)) {
            return Starve::Room;
        }
        // Marked before the last look (see the type's comment).
        self.mark_starved();
        // Room meanwhile, and no release took the mark yet: this thread's.
        if self.limits.read_room(self.avail.load(Relaxed)) && self.take_starved() {
            return Starve::Room;
        }
        Starve::Starved
    }

    /// Sets [`STARVED`] (a full barrier, as the type's comment needs).
    fn mark_starved(&self) {
        let mut cur = self.attention.load(Relaxed);
        loop {
            match self.attention.cmpxchg(cur, cur | STARVED, Full) {
                Ok(_) => return,
                Err(now) => cur = now,
            }
        }
    }

    /// Clears [`STARVED`]: whether this call found it set.
    fn take_starved(&self) -> bool {
        let mut cur = self.attention.load(Relaxed);
        while cur & STARVED != 0 {
            match self.attention.cmpxchg(cur, cur & !STARVED, Full) {
                Ok(_) => return true,
                Err(now) => cur = now,
            }
        }
        false
    }

    /// Returns `n` slots. Inlined into the completions: nobody waits,
    /// nearly always.
    #[inline(always)]
    pub(super) fn release(&self, n: u32) {
        let attention = self.put_back(n);
        if attention != 0 {
            self.attend(attention);
        }
    }

    /// Adds `n` slots back and returns `attention` as it is after them
    /// (see the type's comment): one load, 0 when nobody waits.
    #[inline(always)]
    fn put_back(&self, n: u32) -> u32 {
        self.avail
            .fetch_add(i32::try_from(n).unwrap_or(i32::MAX), Full);
        self.attention.load(Relaxed)
    }

    /// [`Self::release`] when Replies or a Read operation wait (`attention`).
    #[cold]
    #[inline(never)]
    fn attend(&self, attention: u32) {
        if attention >= WAITER {
            // A waiter that counted itself holds the lock until it sleeps.
            drop(self.wait_lock.lock());
            self.wait.notify_all();
        }
        self.tell_starved(attention);
    }

    /// Marks the transport `XPT_DATA` for the starved Read operation, if
    /// `attention` (looked at after slots came back) says there is one and
    /// there is room for it now.
    fn tell_starved(&self, attention: u32) {
        if attention & STARVED != 0
            && self.limits.read_room(self.avail.load(Relaxed))
            && self.take_starved()
        {
            self.link.data_ready();
        }
    }

    /// Returns the `n` slots of a chain that ended in a Send, completed:
    /// the send queue moved ([`SQ_STALL_MS`]).
    #[inline]
    pub(super) fn release_sent(&self, n: u32) {
        self.sends_done.fetch_add(1, Relaxed);
        self.release(n);
    }

    /// Fails every current and later [`Self::acquire_n`] and
    /// [`Self::try_acquire_read`].
    pub(super) fn close(&self) {
        self.mark_closed();
        // A waiter that looked before the store holds the lock until it
        // sleeps.
        drop(self.wait_lock.lock());
        self.wait.notify_all();
    }
}

/// Any close of the connection asked for through its link (an error, the
/// client's disconnect, the progress bound) closes the gate, so the Replies
/// waiting for room leave at once with `ENOTCONN` (C
/// `svc_rdma_xprt_deferred_close`). Set at accept, cleared when the
/// connection is dropped (the hook holds the gate, which holds the link).
impl OnClose for SqGate {
    fn closing(&self) {
        self.close();
    }
}
