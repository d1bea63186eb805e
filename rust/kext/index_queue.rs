// SPDX-License-Identifier: GPL-2.0

//! A bounded lock-free FIFO queue of words (the ring of
//! [`super::index_ring`] in cells allocated here), through which a server
//! connection's completions hand its threads completed Receives and Calls
//! whose Reads are done: a push is one compare-and-exchange where C takes
//! `sc_rq_dto_lock`.

use super::index_ring::{IndexRing, RingCell};
use kernel::alloc::{flags::GFP_KERNEL, KVec};
use kernel::prelude::*;

/// A bounded lock-free FIFO queue of `u64`s.
pub struct IndexQueue {
    ring: IndexRing<KVec<RingCell>>,
}

impl IndexQueue {
    /// A queue with room for at least `min` values (a power of two, at
    /// least one).
    pub fn new(min: usize) -> Result<Self> {
        let cap = min.max(1).checked_next_power_of_two().ok_or(EINVAL)?;
        let mut cells = KVec::with_capacity(cap, GFP_KERNEL)?;
        for i in 0..cap as u64 {
            cells.push(RingCell::new(i), GFP_KERNEL)?;
        }
        let ring = IndexRing::new(cells).ok_or(EINVAL)?;
        Ok(Self { ring })
    }

    /// How many values it has room for.
    pub fn capacity(&self) -> usize {
        self.ring.capacity()
    }

    /// Queues `value` last; false when the queue is full. Fully ordered
    /// ([`IndexRing::push`]).
    #[inline(always)]
    pub fn push(&self, value: u64) -> bool {
        self.ring.push(value)
    }

    /// Takes the oldest value, if any.
    #[inline(always)]
    pub fn pop(&self) -> Option<u64> {
        self.ring.pop()
    }

    /// Whether nothing is queued or being queued, as the caller sees the
    /// queue now.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.ring.is_empty()
    }
}
