// SPDX-License-Identifier: GPL-2.0

//! The count of a [`super::park::CountedPark`]: one atomic word that the
//! thread holding the parked value and the completions of the operations
//! it started change without a lock, and that decides who hands the value
//! on, exactly once.
//!
//! The word is the number of operations started less those completed,
//! plus [`PARKED`] while the value is parked (no thread holds it). A
//! thread takes the value only from a word at exactly [`PARKED`] (nothing
//! pending), setting it to zero in the same atomic step; it starts
//! operations without touching the word (completions that come first take
//! it below zero), then parks the value adding the operations it started
//! and [`PARKED`] in one atomic addition ([`park_add`]). Whoever brings
//! the word to exactly [`PARKED`] hands the value on: the thread parking
//! with nothing pending ([`parked_idle`]) or the last completion
//! ([`completed_last`]).
//!
//! Pure arithmetic, no kernel API: the host builds this file too and
//! checks the decisions over every order of events
//! (`host/tests/park_count.rs`).

/// Added to the word while the value is parked: far above any count of
/// pending operations, and far from every value a holder's word takes
/// (zero less the completions since it took the value), so that a word
/// reaches it only from a park or from the completions of a parked
/// value's operations. Completions without an operation of theirs, which
/// no correct user makes, would have to number about 2^63 to wrap a
/// holder's word around to it.
pub const PARKED: i64 = 1 << 62;

/// What a thread that started `started` operations since it took the
/// value adds to the word when it parks the value again.
pub fn park_add(started: usize) -> i64 {
    i64::try_from(started).map_or(PARKED, |p| p.wrapping_add(PARKED))
}

/// Whether the thread that added `add` to a word that was `old` brought
/// it to [`PARKED`]: no operation is pending, so the thread hands the
/// value on itself.
pub fn parked_idle(old: i64, add: i64) -> bool {
    old.wrapping_add(add) == PARKED
}

/// Whether the completion that took one from a word that was `old`
/// brought it to [`PARKED`]: it was the last pending operation of a
/// parked value, so it hands the value on.
pub fn completed_last(old: i64) -> bool {
    old.wrapping_sub(1) == PARKED
}

/// Whether a thread may take the value from a word that is `word`.
pub fn takeable(word: i64) -> bool {
    word == PARKED
}
