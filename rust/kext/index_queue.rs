// SPDX-License-Identifier: GPL-2.0

//! A bounded first-in first-out queue of words that any number of threads
//! push to and pop from without a lock (D. Vyukov's bounded MPMC queue): a
//! completion handler hands a server thread a completed Receive or a Call
//! whose Reads are done without the lock C takes for it
//! (`sc_rq_dto_lock`), and a thread takes one with a compare-and-exchange.
//!
//! Each cell carries a sequence number that says whose turn it is: a push
//! at position `p` may fill cell `p % cap` once its sequence is `p`, and
//! publishes the value by setting it to `p + 1`; a pop at `p` may take the
//! value once the sequence is `p + 1`, and frees the cell for the push
//! one lap later by setting it to `p + cap`. The positions only grow
//! (wrapping after 2^64 operations); a thread that loses the race for a
//! position retries at the next.

use kernel::alloc::{flags::GFP_KERNEL, KBox, KVec};
use kernel::prelude::*;
use kernel::sync::atomic::{Acquire, Atomic, Full, Relaxed, Release};

/// One cell: its sequence (whose turn it is) and its value.
struct Cell {
    seq: Atomic<u64>,
    value: Atomic<u64>,
}

/// A bounded lock-free FIFO queue of `u64`s.
///
/// # Invariants
///
/// `cells.len()` is a power of two, `mask` is one less, and the vector is
/// not resized after [`IndexQueue::new`]. `tail - head` (wrapping) is at
/// most `cells.len()`. For `head <= p < tail`, cell `p & mask` holds the
/// value pushed at position `p` once its sequence is `p + 1`.
pub struct IndexQueue {
    cells: KVec<Cell>,
    mask: u64,
    head: Atomic<u64>,
    tail: Atomic<u64>,
}

impl IndexQueue {
    /// A queue with room for at least `min` values (a power of two, at
    /// least one).
    pub fn new(min: usize) -> Result<Self> {
        let cap = min.max(1).checked_next_power_of_two().ok_or(EINVAL)?;
        let mut cells = KVec::with_capacity(cap, GFP_KERNEL)?;
        for i in 0..cap as u64 {
            cells.push(
                Cell {
                    seq: Atomic::new(i),
                    value: Atomic::new(0),
                },
                GFP_KERNEL,
            )?;
        }
        // INVARIANT: `cap` cells, each free for the push at its own
        // position; nothing queued.
        Ok(Self {
            cells,
            mask: cap as u64 - 1,
            head: Atomic::new(0),
            tail: Atomic::new(0),
        })
    }

    /// How many values it has room for.
    pub fn capacity(&self) -> usize {
        self.cells.len()
    }

    /// The cell of position `pos`.
    #[inline(always)]
    fn cell(&self, pos: u64) -> Option<&Cell> {
        self.cells.get((pos & self.mask) as usize)
    }

    /// Queues `value` last; false when the queue is full.
    ///
    /// The push is fully ordered: what the caller did before it, the value
    /// included, is seen by whoever sees what it does after (a flag it
    /// sets for a thread that clears the flag, then looks here).
    pub fn push(&self, value: u64) -> bool {
        let mut pos = self.tail.load(Relaxed);
        loop {
            let Some(cell) = self.cell(pos) else {
                return false;
            };
            // Acquire: the pop that freed the cell took its old value.
            let seq = cell.seq.load(Acquire);
            match seq.wrapping_sub(pos) as i64 {
                0 => match self.tail.cmpxchg(pos, pos.wrapping_add(1), Relaxed) {
                    Ok(_) => {
                        cell.value.store(value, Relaxed);
                        // Full: publishes the value (release), and orders
                        // the caller's later accesses after it.
                        cell.seq.xchg(pos.wrapping_add(1), Full);
                        return true;
                    }
                    Err(now) => pos = now,
                },
                // The cell still holds the value pushed one lap earlier.
                d if d < 0 => return false,
                // Another push took `pos`.
                _ => pos = self.tail.load(Relaxed),
            }
        }
    }

    /// Whether nothing is queued or being queued, as the caller sees the
    /// queue now (a push under way counts: it took its position first).
    pub fn is_empty(&self) -> bool {
        self.head.load(Relaxed) == self.tail.load(Relaxed)
    }

    /// Takes the oldest value, if any.
    pub fn pop(&self) -> Option<u64> {
        let mut pos = self.head.load(Relaxed);
        loop {
            let cell = self.cell(pos)?;
            // Acquire: the push's value, published with the sequence.
            let seq = cell.seq.load(Acquire);
            match seq.wrapping_sub(pos.wrapping_add(1)) as i64 {
                0 => match self.head.cmpxchg(pos, pos.wrapping_add(1), Relaxed) {
                    Ok(_) => {
                        let value = cell.value.load(Relaxed);
                        // Release: the value is read before the cell is
                        // given to the push one lap later.
                        cell.seq
                            .store(pos.wrapping_add(self.mask).wrapping_add(1), Release);
                        return Some(value);
                    }
                    Err(now) => pos = now,
                },
                // Not pushed yet: empty.
                d if d < 0 => return None,
                // Another pop took `pos`.
                _ => pos = self.head.load(Relaxed),
            }
        }
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
