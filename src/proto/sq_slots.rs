// SPDX-License-Identifier: GPL-2.0

//! The rules of a server connection's send queue slots (C `sc_sq_avail`):
//! every Send, RDMA Write and RDMA Read is posted with a slot and its
//! completion returns it, so the send queue never overflows.
//!
//! The count itself is an atomic of the gate (`svcrdma/sq_gate.rs`), taken
//! and returned without a lock as C does; what is decided from it is here:
//! the sizes ([`SqLimits`]), what a Read may take, and when a waiting
//! Reply has waited too long ([`StallClock`]).
//!
//! A peer can keep Sends from completing (on RoCE and InfiniBand by
//! posting no Receives and asking for endless receiver-not-ready retries;
//! on iWARP by not reading its TCP stream): Replies that wait for room then
//! wait for ever, each holding a server thread. [`StallClock::stalled`]
//! tells a waiter when it has waited a bound with no Send completed, so
//! the connection can be closed (C has no such bound). Each waiter keeps
//! its own clock: a single Reply waiting on its own, which sleeps and wakes
//! many times over the bound, is as stalled as several.
//!
//! RDMA Reads never wait for a slot ([`SqLimits::read_take`]) and never
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

/// What a Read operation about to wait for room finds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Starve {
    /// There is room now: the caller must see to the Read itself.
    Room,
    /// None: the release that makes room tells the transport.
    Starved,
    /// The connection is closing: nothing will be posted again, nothing
    /// will wake it.
    Closed,
}

/// The sizes of a send queue's slots.
///
/// # Invariants
///
/// `depth >= 2` and `read_keep < depth`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SqLimits {
    depth: u32,
    read_keep: u32,
}

impl SqLimits {
    /// `depth` slots (at least 2), of which Reads leave `read_keep` (at
    /// most `depth - 1`) to Sends and Writes.
    pub fn new(depth: u32, read_keep: u32) -> Self {
        let depth = depth.max(2);
        Self {
            depth,
            read_keep: read_keep.min(depth.saturating_sub(1)),
        }
    }

    /// Slots in all: the most one chain may take, and the count's start.
    pub const fn depth(&self) -> u32 {
        self.depth
    }

    /// Whether a chain of `n` Sends and Writes could ever be posted.
    pub const fn check_chain(&self, n: u32) -> Result<(), SlotError> {
        if n > self.depth {
            Err(SlotError::TooMany)
        } else {
            Ok(())
        }
    }

    /// What is left of `avail` free slots after `n` Reads (and their
    /// registrations) take theirs, if they leave the Replies' reserve:
    /// `None` if they would not.
    pub fn read_take(&self, avail: i32, n: u32) -> Option<i32> {
        let need = i64::from(n).checked_add(i64::from(self.read_keep))?;
        if i64::from(avail) < need {
            return None;
        }
        i32::try_from(i64::from(avail).checked_sub(i64::from(n))?).ok()
    }

    /// Whether a Read could take a slot with `avail` free.
    pub fn read_room(&self, avail: i32) -> bool {
        i64::from(avail) > i64::from(self.read_keep)
    }
}

/// A waiting Reply's view of its connection's progress: since when it has
/// seen no Send complete. `sends_done` is the connection's count of chains
/// ending in a Send that completed, wrapping; the clock restarts when it
/// changes.
#[derive(Clone, Copy, Debug)]
pub struct StallClock {
    since: u64,
    seen: u64,
}

impl StallClock {
    /// The clock of a Reply that found no room at `now` (milliseconds of
    /// the caller's clock), kept by it until it has room or gives up.
    pub const fn new(now: u64, sends_done: u64) -> Self {
        Self {
            since: now,
            seen: sends_done,
        }
    }

    /// Asked by a waiting Reply each time it wakes, at `now`: whether it
    /// has waited `bound` milliseconds or more with no Send completed
    /// meanwhile. A completion restarts the clock.
    pub fn stalled(&mut self, sends_done: u64, now: u64, bound: u64) -> bool {
        if self.seen != sends_done {
            self.seen = sends_done;
            self.since = now;
            return false;
        }
        now.saturating_sub(self.since) >= bound
    }
}
