// SPDX-License-Identifier: GPL-2.0

//! A value parked while the operations its holder started complete, handed
//! to the one thread that finds it parked with none pending
//! ([`CountedPark`]). C keeps such state in a context that its last
//! completion queues (the server's `svc_rdma_recv_ctxt` of a Call being
//! read, on `sc_read_complete_q`) and relies on the queue to hand it to one
//! thread; here the count proves it: no lock, no reference count, and the
//! holder's right to the value is a type ([`ParkHolder`]), through which
//! the value is worked on where it lies.

use super::park_count::{completed_last, park_add, parked_idle, takeable, PARKED};
use core::cell::UnsafeCell;
use kernel::sync::atomic::{Acquire, Atomic, Full, Relaxed};

/// A value, parked, held by one thread or idle, and the count of the
/// operations its holder started that have not completed.
///
/// # Invariants
///
/// `count` follows the rules of `park_count.rs`: it is [`PARKED`] plus the
/// pending operations while the value is parked (then no [`ParkHolder`]
/// of it exists), and otherwise at or below zero (zero less the
/// completions since the value was last taken or held), where at most one
/// holder exists. `value` is read or written only through that holder,
/// whose right begins with the compare-and-exchange that brought `count`
/// from exactly [`PARKED`] to zero ([`CountedPark::take`]) or with
/// [`CountedPark::hold`], and ends with the addition that parks it again
/// (ordering the holder's writes before the next taker's reads) or with
/// the holder's end. `failed` is set (to 1) by a failed completion before
/// its decrement.
pub struct CountedPark<T> {
    count: Atomic<i64>,
    failed: Atomic<u32>,
    value: UnsafeCell<Option<T>>,
}

// SAFETY: The value is only ever touched through its one holder (type
// invariant), which may be on any thread: `T: Send` suffices; the rest
// are atomics.
unsafe impl<T: Send> Sync for CountedPark<T> {}
// SAFETY: As above.
unsafe impl<T: Send> Send for CountedPark<T> {}

/// The right to a [`CountedPark`]'s value, held by one thread at a time:
/// the value is worked on in place ([`Self::value`]) and parked again
/// ([`Self::park`]), kept for good ([`Self::keep`]) or left idle
/// ([`Self::idle`], or the holder dropped).
///
/// # Invariants
///
/// No other holder of `park` exists, and `park` is not parked.
pub struct ParkHolder<'a, T> {
    park: &'a CountedPark<T>,
}

impl<T> CountedPark<T> {
    /// An empty park, idle: neither parked nor held; only
    /// [`Self::hold`] makes a holder of it.
    pub const fn new() -> Self {
        // INVARIANT: not parked, no holder.
        Self {
            count: Atomic::new(0),
            failed: Atomic::new(0),
            value: UnsafeCell::new(None),
        }
    }

    /// A park with `value` parked and nothing pending: the first
    /// [`Self::take`] takes it.
    pub const fn parked(value: Option<T>) -> Self {
        // INVARIANT: parked, nothing pending, no holder.
        Self {
            count: Atomic::new(PARKED),
            failed: Atomic::new(0),
            value: UnsafeCell::new(value),
        }
    }

    /// The right to an idle park's value.
    ///
    /// # Safety
    ///
    /// No holder of this park exists and it is not parked (it is new, or
    /// its last holder ended without parking it), and no other thread may
    /// call this for it meanwhile: the caller holds a claim on it that
    /// only it has (a read context's claim bit, `rust/rdma/read_ctxts.rs`).
    pub unsafe fn hold(&self) -> ParkHolder<'_, T> {
        // INVARIANT: the caller's requirements.
        ParkHolder { park: self }
    }

    /// Takes the value, if it is parked with no operation pending, and the
    /// right to it; with it, whether an operation of the last round failed
    /// (the flag is then cleared). `None` otherwise (idle, held, pending,
    /// or taken by another thread first).
    pub fn take(&self) -> Option<(ParkHolder<'_, T>, bool)> {
        if !takeable(self.count.load(Relaxed)) {
            return None;
        }
        // Acquire: the parking holder's writes to the value and the
        // completions' `failed`, both before their releases of the count.
        self.count.cmpxchg(PARKED, 0, Acquire).ok()?;
        let failed = self.failed.load(Relaxed) != 0;
        if failed {
            self.failed.store(0, Relaxed);
        }
        // INVARIANT: this thread brought the count from `PARKED` to zero.
        Some((ParkHolder { park: self }, failed))
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
        // value; the parking holder's writes seen by whoever it hands the
        // value to.
        completed_last(self.count.fetch_sub(1, Full))
    }
}

impl<T> Default for CountedPark<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<'a, T> ParkHolder<'a, T> {
    /// The value, worked on where it lies.
    pub fn value(&mut self) -> &mut Option<T> {
        // SAFETY: This holder's thread has the only right to the value
        // (type invariant), for as long as the borrow of the holder.
        unsafe { &mut *self.park.value.get() }
    }

    /// The park held.
    pub fn park_of(&self) -> &'a CountedPark<T> {
        self.park
    }

    /// Parks the value with the `started` operations started since it was
    /// taken or held (their completions may have come already); `true` if
    /// none is pending, so that the caller hands it on itself.
    pub fn park(self, started: usize) -> bool {
        let add = park_add(started);
        // Full: the holder's writes to the value before the count says
        // parked; the completions' writes seen by this thread if it hands
        // the value on.
        parked_idle(self.park.count.fetch_add(add, Full), add)
    }

    /// Ends the hold without parking the value: the park is idle, and
    /// only [`CountedPark::hold`] holds it again. Nothing of the holder's
    /// may be pending.
    pub fn idle(self) {}

    /// Keeps the value in the park for good, never taken again (dropped
    /// with the park): for a value that operations still pending may use,
    /// whose user gives up on it (the park's owner must outlive them).
    pub fn keep(self) {
        // Nothing to do: the count stays at or below zero, never parked,
        // and no holder is made of it again (its claim is never given
        // back).
    }
}
