// SPDX-License-Identifier: GPL-2.0

//! A value parked while the operations its holder started complete, handed
//! to the one thread that finds it parked with none pending
//! ([`CountedPark`]). C keeps such state in a context that its last
//! completion queues (the server's `svc_rdma_recv_ctxt` of a Call being
//! read, on `sc_read_complete_q`) and relies on the queue to hand it to one
//! thread; here the count proves it: no lock, no reference count, and the
//! holder's right to the value is a type ([`ParkHolder`]).

use super::park_count::{completed_last, park_add, parked_idle, takeable, PARKED};
use core::cell::UnsafeCell;
use kernel::sync::atomic::{Acquire, Atomic, Full, Relaxed};

/// A value, parked or held by one thread, and the count of the operations
/// its holder started that have not completed.
///
/// # Invariants
///
/// `count` follows the rules of `park_count.rs`: it is [`PARKED`] plus
/// the pending operations while the value is parked, and zero less the
/// completions since then while a [`ParkHolder`] of it exists (at most
/// one does). `value` is read or written only by the thread that brought
/// `count` from exactly [`PARKED`] to zero (the holder's
/// [`CountedPark::take`]), until its holder parks it again, the store
/// then ordered before the count's release by the park's atomic addition.
/// `failed` is set (to 1) by a failed completion before its decrement.
pub struct CountedPark<T> {
    count: Atomic<i64>,
    failed: Atomic<u32>,
    value: UnsafeCell<Option<T>>,
}

// SAFETY: The value is only ever touched by its one holder (type
// invariant), which may be on any thread: `T: Send` suffices; the rest
// are atomics.
unsafe impl<T: Send> Sync for CountedPark<T> {}
// SAFETY: As above.
unsafe impl<T: Send> Send for CountedPark<T> {}

/// The right to a [`CountedPark`]'s value, held by one thread at a time
/// between [`CountedPark::take`] and [`Self::park`] (or [`Self::keep`]).
///
/// # Invariants
///
/// `park`'s count was brought from [`PARKED`] to zero by the `take` that
/// made this holder, and no other holder of it exists.
#[must_use = "a holder parks, keeps or releases the value; dropped, the park stays held for good"]
pub struct ParkHolder<'a, T> {
    park: &'a CountedPark<T>,
}

/// What [`CountedPark::take`] hands over.
pub struct Taken<'a, T> {
    /// The right to park the value again.
    pub holder: ParkHolder<'a, T>,
    /// The value, if one was parked.
    pub value: Option<T>,
    /// Whether an operation of the last round failed (the flag is cleared).
    pub failed: bool,
}

impl<T> CountedPark<T> {
    /// An empty park, takeable (by whoever claims it first).
    pub const fn new() -> Self {
        // INVARIANT: parked (empty), nothing pending, no holder.
        Self {
            count: Atomic::new(PARKED),
            failed: Atomic::new(0),
            value: UnsafeCell::new(None),
        }
    }

    /// Takes the value, if it is parked with no operation pending, and the
    /// right to park it again; `None` otherwise (held, pending, or taken
    /// by another thread first).
    pub fn take(&self) -> Option<Taken<'_, T>> {
        if !takeable(self.count.load(Relaxed)) {
            return None;
        }
        // Acquire: the parking thread's store of the value and the
        // completions' `failed`, both before their releases of the count.
        self.count.cmpxchg(PARKED, 0, Acquire).ok()?;
        // SAFETY: This thread brought the count from `PARKED` to zero: the
        // value is its own until it parks it (type invariant).
        let value = unsafe { (*self.value.get()).take() };
        let failed = self.failed.xchg(0, Relaxed) != 0;
        // INVARIANT: made by the `take` that zeroed the count.
        Some(Taken {
            holder: ParkHolder { park: self },
            value,
            failed,
        })
    }

    /// One operation its holder started completed (`ok` false: it failed
    /// or was flushed); `true` if it was the last of a parked value's, so
    /// that the caller hands the value on (queues it for a thread to
    /// [`Self::take`]).
    pub fn complete(&self, ok: bool) -> bool {
        if !ok {
            self.failed.store(1, Relaxed);
        }
        // Full: `failed` before the count, for the thread that takes the
        // value; the parking thread's store seen by whoever it hands it to.
        completed_last(self.count.fetch_sub(1, Full))
    }
}

impl<T> Default for CountedPark<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> ParkHolder<'_, T> {
    /// Parks `value` with the `started` operations started since it was
    /// taken (their completions may have come already); `true` if none is
    /// pending, so that the caller hands it on itself.
    pub fn park(self, value: Option<T>, started: usize) -> bool {
        // SAFETY: This holder's thread owns the value until the addition
        // below (type invariant).
        unsafe { *self.park.value.get() = value };
        let add = park_add(started);
        // Full: the value stored before the count says parked; the
        // completions' writes seen by this thread if it hands it on.
        parked_idle(self.park.count.fetch_add(add, Full), add)
    }

    /// Gives the park back empty, takeable again: no operation of the
    /// holder's may be pending (if one is, the park stays untakeable
    /// until it completes, and nothing hands it on).
    pub fn release(self) {
        let _ = self.park(None, 0);
    }

    /// Keeps `value` in the park for good, never taken again: dropped
    /// with the park. For a value that operations still pending may use,
    /// whose user gives up on it (the park's owner must outlive them).
    pub fn keep(self, value: T) {
        // SAFETY: This holder's thread owns the value, and nobody takes it
        // after: the count stays at or below zero, never parked.
        unsafe { *self.park.value.get() = Some(value) };
        self.park.failed.store(1, Relaxed);
    }
}
