// SPDX-License-Identifier: GPL-2.0

//! A bounded first-in first-out ring of words that any number of threads
//! push to and pop from without a lock (D. Vyukov's bounded MPMC queue),
//! over cells its user allocates: the logic of
//! [`super::index_queue::IndexQueue`], through which a server
//! connection's completions hand its threads completed Receives and Calls
//! whose Reads are done without the lock C takes for it
//! (`sc_rq_dto_lock`).
//!
//! Each cell carries a sequence number that says whose turn it is: a push
//! at position `p` may fill cell `p % cap` once its sequence is `p`, and
//! publishes the value by setting it to `p + 1`; a pop at `p` may take the
//! value once the sequence is `p + 1`, and frees the cell for the push
//! one lap later by setting it to `p + cap`. The positions only grow
//! (wrapping after 2^64 operations); a thread that loses the race for a
//! position retries at the next. Each step is one atomic instruction
//! (`core`'s atomics compile to them inline; the kernel crate's call a
//! helper each).
//!
//! Pure logic, no kernel API: the host builds this file too and runs it
//! from several threads at once (`host/tests/index_ring.rs`).

use core::ops::Deref;
use core::sync::atomic::{AtomicU64, Ordering};

/// One cell: its sequence (whose turn it is) and its value.
pub struct RingCell {
    seq: AtomicU64,
    value: AtomicU64,
}

impl RingCell {
    /// The cell at position `index` of a new ring.
    pub const fn new(index: u64) -> Self {
        Self {
            seq: AtomicU64::new(index),
            value: AtomicU64::new(0),
        }
    }
}

/// A bounded lock-free FIFO ring of `u64`s over the cells `S` holds.
///
/// # Invariants
///
/// `cells` holds a power of two of cells and `mask` is one less; the
/// slice does not change. `tail - head` (wrapping) is at most the number
/// of cells. For `head <= p < tail`, cell `p & mask` holds the value
/// pushed at position `p` once its sequence is `p + 1`.
pub struct IndexRing<S> {
    cells: S,
    mask: u64,
    head: AtomicU64,
    tail: AtomicU64,
}

impl<S: Deref<Target = [RingCell]>> IndexRing<S> {
    /// An empty ring over `cells`, which must be a power of two of cells,
    /// cell `i` made with [`RingCell::new`]`(i)`; `None` otherwise.
    pub fn new(cells: S) -> Option<Self> {
        let c: &[RingCell] = &cells;
        let n = c.len();
        if !n.is_power_of_two()
            || c.iter()
                .enumerate()
                .any(|(i, cell)| cell.seq.load(Ordering::Relaxed) != i as u64)
        {
            return None;
        }
        Some(Self {
            cells,
            mask: n as u64 - 1,
            head: AtomicU64::new(0),
            tail: AtomicU64::new(0),
        })
    }

    /// How many values it has room for.
    pub fn capacity(&self) -> usize {
        self.cells.len()
    }

    /// The cell of position `pos`.
    #[inline(always)]
    fn cell(&self, pos: u64) -> Option<&RingCell> {
        self.cells.get((pos & self.mask) as usize)
    }

    /// Queues `value` last; false when the ring is full.
    ///
    /// The push is fully ordered: what the caller did before it, the value
    /// included, is seen by whoever sees what it does after (a flag it
    /// sets for a thread that clears the flag, then looks here).
    #[inline]
    pub fn push(&self, value: u64) -> bool {
        let mut pos = self.tail.load(Ordering::Relaxed);
        loop {
            let Some(cell) = self.cell(pos) else {
                return false;
            };
            // Acquire: the pop that freed the cell took its old value.
            let seq = cell.seq.load(Ordering::Acquire);
            let next = pos.wrapping_add(1);
            match seq.wrapping_sub(pos) as i64 {
                0 => match self.tail.compare_exchange_weak(
                    pos,
                    next,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        cell.value.store(value, Ordering::Relaxed);
                        // Sequentially consistent: publishes the value
                        // (release), and orders the caller's later
                        // accesses after it, as the kernel's fully ordered
                        // `xchg` does.
                        cell.seq.swap(next, Ordering::SeqCst);
                        return true;
                    }
                    Err(now) => pos = now,
                },
                // The cell still holds the value pushed one lap earlier.
                d if d < 0 => return false,
                // Another push took `pos`.
                _ => pos = self.tail.load(Ordering::Relaxed),
            }
        }
    }

    /// Takes the oldest value, if any.
    #[inline]
    pub fn pop(&self) -> Option<u64> {
        let mut pos = self.head.load(Ordering::Relaxed);
        loop {
            let cell = self.cell(pos)?;
            // Acquire: the push's value, published with the sequence.
            let seq = cell.seq.load(Ordering::Acquire);
            let next = pos.wrapping_add(1);
            match seq.wrapping_sub(next) as i64 {
                0 => match self.head.compare_exchange_weak(
                    pos,
                    next,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        let value = cell.value.load(Ordering::Relaxed);
                        // Release: the value is read before the cell is
                        // given to the push one lap later.
                        cell.seq.store(
                            pos.wrapping_add(self.mask).wrapping_add(1),
                            Ordering::Release,
                        );
                        return Some(value);
                    }
                    Err(now) => pos = now,
                },
                // Not pushed yet: empty.
                d if d < 0 => return None,
                // Another pop took `pos`.
                _ => pos = self.head.load(Ordering::Relaxed),
            }
        }
    }

    /// Whether nothing is queued or being queued, as the caller sees the
    /// ring now (a push under way counts: it took its position first).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.head.load(Ordering::Relaxed) == self.tail.load(Ordering::Relaxed)
    }
}
