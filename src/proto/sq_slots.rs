// SPDX-License-Identifier: GPL-2.0

//! The accounting of a server connection's send queue slots (C
//! `sc_sq_avail`): every Send, RDMA Write and RDMA Read is posted with a
//! slot and its completion returns it, so the send queue never overflows.
//!
//! Pure state, kept under the gate's lock by `svcrdma/sq_gate.rs`, which
//! does the waiting and the waking this decides.
//!
//! A peer can keep Sends from completing (on RoCE and InfiniBand by
//! posting no Receives and asking for endless receiver-not-ready retries;
//! on iWARP by not reading its TCP stream): Replies that wait for room then
//! wait for ever, each holding a server thread. [`SqSlots::stalled`] tells
//! a waiter when it has waited a bound with no Send completed, so the
//! connection can be closed (C has no such bound). Each waiter keeps its
//! own [`StallClock`]: a single Reply waiting on its own, which sleeps and
//! wakes many times over the bound, is as stalled as several.
//!
//! RDMA Reads never wait for a slot ([`SqSlots::try_take_read`]) and never
//! take the last `read_keep` slots: a peer that stops answering Reads can
//! fill at most the rest of the queue, so Replies on its connection still
//! find room for at least one Send per credit.

/// Why a slot cannot be taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotError {
    /// The connection is closing: nothing will be posted again.
    Closed,
    /// More slots than the queue has in all.
    TooMany,
}

/// Whom a release of slots must wake ([`SqSlots::release`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Wake {
    /// Replies waiting for room ([`SqSlots::begin_wait`]).
    pub waiters: bool,
    /// A Read operation left waiting for room ([`SqSlots::starve`]).
    pub reads: bool,
}

/// What [`SqSlots::starve`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Starve {
    /// There is room now: the caller must see to the Read itself.
    Room,
    /// None: the release that makes room reports [`Wake::reads`].
    Starved,
    /// The connection is closing: nothing will be posted again, nothing
    /// will wake it.
    Closed,
}

/// Send queue slots.
///
/// # Invariants
///
/// `depth >= 2` and `read_keep < depth`; `avail <= depth` as long as every
/// release returns slots that were taken.
#[derive(Debug)]
pub struct SqSlots {
    avail: u32,
    depth: u32,
    read_keep: u32,
    closed: bool,
    starved: bool,
    waiters: u32,
    /// Chains ending in a Send that completed ([`Self::release_sent`]),
    /// wrapping: a waiter's [`StallClock`] restarts when it changes.
    sends_done: u64,
}

/// A waiting Reply's view of its connection's progress
/// ([`SqSlots::stalled`]): since when it has seen no Send complete.
#[derive(Clone, Copy, Debug)]
pub struct StallClock {
    since: u64,
    seen: u64,
}

impl SqSlots {
    /// `depth` slots (at least 2), of which Reads leave `read_keep` (at
    /// most `depth - 1`) to Sends and Writes.
    pub fn new(depth: u32, read_keep: u32) -> Self {
        let depth = depth.max(2);
        Self {
            avail: depth,
            depth,
            read_keep: read_keep.min(depth.saturating_sub(1)),
            closed: false,
            starved: false,
            waiters: 0,
            sends_done: 0,
        }
    }

    /// Slots in all: the most one chain may take.
    pub const fn depth(&self) -> u32 {
        self.depth
    }

    /// Slots free now.
    pub const fn avail(&self) -> u32 {
        self.avail
    }

    /// Takes `n` slots for a chain of Sends and RDMA Writes: `Ok(false)`
    /// if too few are free (the caller waits and tries again).
    pub fn try_take(&mut self, n: u32) -> Result<bool, SlotError> {
        if n > self.depth {
            return Err(SlotError::TooMany);
        }
        if self.closed {
            return Err(SlotError::Closed);
        }
        match self.avail.checked_sub(n) {
            Some(left) => {
                self.avail = left;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Takes `n` slots for RDMA Reads (and their registrations) if they
    /// are free beyond the reserve: `Ok(false)` if not.
    pub fn try_take_read(&mut self, n: u32) -> Result<bool, SlotError> {
        if self.closed {
            return Err(SlotError::Closed);
        }
        match n.checked_add(self.read_keep) {
            Some(need) if self.avail >= need => {
                self.avail = self.avail.saturating_sub(n);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Whether a Read could take a slot now.
    pub const fn read_room(&self) -> bool {
        !self.closed && self.avail > self.read_keep
    }

    /// A Read operation is about to be left waiting for room (checked and
    /// noted at once, so that the release that makes room cannot be
    /// missed).
    pub fn starve(&mut self) -> Starve {
        if self.closed {
            return Starve::Closed;
        }
        if self.avail > self.read_keep {
            return Starve::Room;
        }
        self.starved = true;
        Starve::Starved
    }

    /// A Reply goes to sleep waiting for room; counted so that a release
    /// knows to wake it. Called under the lock that the wait releases only
    /// once the waiter is on the wait queue, each time it sleeps.
    pub fn begin_wait(&mut self) {
        self.waiters = self.waiters.saturating_add(1);
    }

    /// The clock of a Reply that found no room at `now` (milliseconds of
    /// the caller's clock), kept by it until it has room or gives up.
    pub const fn stall_clock(&self, now: u64) -> StallClock {
        StallClock {
            since: now,
            seen: self.sends_done,
        }
    }

    /// Asked by a waiting Reply each time it wakes, at `now`, with its
    /// clock: whether it has waited `bound` milliseconds or more with no
    /// Send completed ([`Self::release_sent`]) meanwhile. A completion
    /// restarts the clock.
    pub fn stalled(&self, clock: &mut StallClock, now: u64, bound: u64) -> bool {
        if clock.seen != self.sends_done {
            clock.seen = self.sends_done;
            clock.since = now;
            return false;
        }
        now.saturating_sub(clock.since) >= bound
    }

    /// A Reply stopped waiting (woken, timed out or interrupted).
    pub fn end_wait(&mut self) {
        self.waiters = self.waiters.saturating_sub(1);
    }

    /// Whether Replies wait for room.
    pub const fn has_waiters(&self) -> bool {
        self.waiters > 0
    }

    /// Returns `n` slots; says whom to wake: the waiting Replies if there
    /// are any (C checks `waitqueue_active`), and a starved Read operation
    /// once there is room for it again.
    pub fn release(&mut self, n: u32) -> Wake {
        self.avail = self.avail.saturating_add(n);
        let reads = self.starved && self.avail > self.read_keep;
        if reads {
            self.starved = false;
        }
        Wake {
            waiters: self.waiters > 0,
            reads,
        }
    }

    /// As [`Self::release`], for the completion of a chain that ends in a
    /// Send: the send queue moved.
    pub fn release_sent(&mut self, n: u32) -> Wake {
        self.sends_done = self.sends_done.wrapping_add(1);
        self.release(n)
    }

    /// Whether the slots are closed ([`Self::close`]).
    pub const fn is_closed(&self) -> bool {
        self.closed
    }

    /// Fails every current and later take; a closing connection wakes
    /// its waiters itself.
    pub fn close(&mut self) {
        self.closed = true;
    }
}
