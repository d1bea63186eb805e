// SPDX-License-Identifier: GPL-2.0

//! Bounded lock-free FIFO queues (the ring of [`super::index_ring`] in
//! cells allocated here): of words ([`IndexQueue`]), through which a server
//! connection's completions hand its threads completed Receives and Calls
//! whose Reads are done, and of boxes ([`BoxQueue`]), in which it keeps the
//! allocations of released request states; a push or a pop is one
//! compare-and-exchange where C takes `sc_rq_dto_lock`.

use super::index_ring::{IndexRing, RingCell};
use kernel::alloc::{flags::GFP_KERNEL, KBox, KVec};
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

/// A bounded lock-free FIFO queue of boxed values ([`IndexQueue`] of their
/// addresses): a connection keeps the allocations of released request
/// states in it for the next Calls, without a lock.
///
/// # Invariants
///
/// Every value in `words` is the address of a `KBox<T>` turned into a raw
/// pointer ([`KBox::into_raw`]), which the queue owns.
pub struct BoxQueue<T> {
    words: IndexQueue,
    _owns: core::marker::PhantomData<KBox<T>>,
}

impl<T> BoxQueue<T> {
    /// A queue with room for at least `min` boxes.
    pub fn new(min: usize) -> Result<Self> {
        // INVARIANT: empty.
        Ok(Self {
            words: IndexQueue::new(min)?,
            _owns: core::marker::PhantomData,
        })
    }

    /// Queues `value` last; gives it back when the queue is full.
    pub fn push(&self, value: KBox<T>) -> core::result::Result<(), KBox<T>> {
        let raw = KBox::into_raw(value);
        if self.words.push(raw as usize as u64) {
            // INVARIANT: the queue owns the box from here.
            return Ok(());
        }
        // SAFETY: From `KBox::into_raw` just above; not queued.
        Err(unsafe { KBox::from_raw(raw) })
    }

    /// Takes the oldest box, if any.
    pub fn pop(&self) -> Option<KBox<T>> {
        let word = self.words.pop()?;
        // SAFETY: Each value queued is the address of a box the queue owns
        // (type invariant), taken out once by the pop that returned it.
        Some(unsafe { KBox::from_raw(word as usize as *mut T) })
    }
}

impl<T> Drop for BoxQueue<T> {
    fn drop(&mut self) {
        while self.pop().is_some() {}
    }
}

// SAFETY: The queue moves boxes of `T` between threads and hands each to
// one of them, as a channel of `KBox<T>` does: `T: Send` suffices for both.
unsafe impl<T: Send> Send for BoxQueue<T> {}
// SAFETY: As above: a shared queue only moves whole boxes.
unsafe impl<T: Send> Sync for BoxQueue<T> {}
