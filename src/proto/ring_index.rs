// SPDX-License-Identifier: GPL-2.0

//! The index arithmetic of a first-in, first-out ring of fixed capacity
//! over storage its owner keeps: where the next entry goes and which is
//! the oldest. The server's queues of completed Receives and of Calls
//! whose Reads completed or wait for send queue room are such rings
//! (`svcrdma::recv_queue::Fifo`): taking the oldest moves nothing, as
//! taking the head of C's `sc_rq_dto_q` list moves nothing.

/// The occupied part of a ring of `capacity` slots: `len` of them from
/// `head` on, wrapping at the capacity.
///
/// # Invariants
///
/// `head < capacity`, or `head == 0` when the capacity is 0, and
/// `len <= capacity`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingIndex {
    head: usize,
    len: usize,
    capacity: usize,
}

impl RingIndex {
    /// An empty ring of `capacity` slots.
    pub const fn new(capacity: usize) -> Self {
        // INVARIANT: empty, at slot 0.
        Self {
            head: 0,
            len: 0,
            capacity,
        }
    }

    /// How many slots are occupied.
    pub const fn len(&self) -> usize {
        self.len
    }

    /// Whether no slot is occupied.
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How many slots there are.
    pub const fn capacity(&self) -> usize {
        self.capacity
    }

    /// Occupies the slot behind the newest: its index, for the caller to
    /// fill; `None` when every slot is occupied.
    #[inline]
    pub fn push(&mut self) -> Option<usize> {
        if self.len >= self.capacity {
            return None;
        }
        // `head < capacity` and `len < capacity` (type invariant and the
        // check above): the slots up to the end of the storage, then from
        // its start, with no sum that could overflow.
        let to_end = self.capacity.wrapping_sub(self.head);
        let at = if self.len < to_end {
            self.head.wrapping_add(self.len)
        } else {
            self.len.wrapping_sub(to_end)
        };
        // INVARIANT: below the capacity, checked above (no overflow).
        self.len = self.len.wrapping_add(1);
        Some(at)
    }

    /// Frees the oldest slot: its index, for the caller to empty; `None`
    /// when no slot is occupied.
    #[inline]
    pub fn pop(&mut self) -> Option<usize> {
        if self.len == 0 {
            return None;
        }
        let at = self.head;
        // INVARIANT: `head` wraps at the capacity; one fewer occupied
        // (`head < capacity` and `len > 0`: neither step overflows).
        self.head = self.head.wrapping_add(1);
        if self.head == self.capacity {
            self.head = 0;
        }
        self.len = self.len.wrapping_sub(1);
        Some(at)
    }
}
