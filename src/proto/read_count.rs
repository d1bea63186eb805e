// SPDX-License-Identifier: GPL-2.0

//! The count of a server's Call being read (`svcrdma/read_op.rs`): one
//! atomic word that the thread working on the Call and the completions of
//! its RDMA Reads change without a lock, and that decides who queues the
//! Call for the next step, exactly once.
//!
//! The word is the number of Reads posted less those completed, plus
//! [`PARKED`] while the Call's work is parked (no thread holds it). A
//! thread takes the work only from a word at exactly [`PARKED`] (nothing
//! pending) and sets it to zero; it posts Reads without touching the word
//! (completions that come first take it below zero), then parks the work
//! adding the Reads it posted and [`PARKED`] in one atomic addition
//! ([`park_add`]). Whoever brings the word to exactly [`PARKED`] queues the
//! Call: the thread parking with nothing pending ([`parked_idle`]) or the
//! last completion ([`completed_last`]). The atomics themselves are the
//! kernel's; the decisions are here, so the host can check them over every
//! order of events (`host/tests/read_count.rs`).

/// Added to the word while the work is parked: far above any count of
/// Reads a Call has pending (a handful: those of one 1 MiB WRITE at
/// most), so the two never mix.
pub const PARKED: i32 = 1 << 30;

/// What a thread that posted `posted` Reads since it took the work adds to
/// the word when it parks the work again.
pub fn park_add(posted: usize) -> i32 {
    i32::try_from(posted).map_or(PARKED, |p| p.wrapping_add(PARKED))
}

/// Whether the thread that added `add` to a word that was `old` brought
/// it to [`PARKED`]: no Read is pending, so the thread queues the Call
/// itself.
pub fn parked_idle(old: i32, add: i32) -> bool {
    old.wrapping_add(add) == PARKED
}

/// Whether the completion that took one from a word that was `old`
/// brought it to [`PARKED`]: it was the last of a parked Call's Reads, so
/// it queues the Call.
pub fn completed_last(old: i32) -> bool {
    old.wrapping_sub(1) == PARKED
}

/// Whether a thread that found the Call on a queue may take the work from
/// a word that is `word`.
pub fn takeable(word: i32) -> bool {
    word == PARKED
}
