// SPDX-License-Identifier: GPL-2.0

//! Who hands on a value parked while its operations complete
//! (`rust/kext/park_count.rs`, the count of `rust/kext/park.rs`'s
//! `CountedPark`, which the server parks a Call being read in), checked
//! over every order of events: the thread parking the work, each Read's
//! completion, and a thread taking the Call off a queue. Each event is one
//! atomic step on the shared word, as in `rust/kext/park.rs`.

// Pure arithmetic with no kernel API: built here as it is in the module.
#[path = "../../rust/kext/park_count.rs"]
mod park_count;

use park_count::{completed_last, park_add, parked_idle, takeable, PARKED};
use proptest::prelude::*;

/// The state of one Call being read, and of the world around it.
#[derive(Clone, Debug)]
struct World {
    /// The shared word.
    word: i64,
    /// Reads posted and not completed.
    pending: usize,
    /// A thread holds the work (took it, or started the Call) and has
    /// posted this round's Reads; it parks next.
    held_posted: Option<usize>,
    /// Times the Call is on a queue (must never exceed one).
    queued: usize,
    /// The next round of posts (index into the plan).
    round: usize,
    /// The Call was assembled.
    done: bool,
}

/// Explores every order of events from `w`, where `plan[i]` Reads are
/// posted in round `i` (0: no send queue room that round), and checks
/// that the Call is queued exactly once per park, taken only from a
/// parked word, and assembled with nothing pending, whatever the order.
fn explore(w: &World, plan: &[usize], ends: &mut usize) {
    let mut moved = false;
    // A completion of one pending Read.
    if w.pending > 0 {
        moved = true;
        let mut n = w.clone();
        let old = n.word;
        n.word = old.wrapping_sub(1);
        n.pending -= 1;
        if completed_last(old) {
            assert!(
                n.held_posted.is_none(),
                "queued while a thread holds the work: {w:?}"
            );
            assert_eq!(n.queued, 0, "queued twice: {w:?}");
            assert_eq!(n.pending, 0, "queued with Reads pending: {w:?}");
            n.queued += 1;
        }
        explore(&n, plan, ends);
    }
    // The holding thread parks the work with the Reads it posted.
    if let Some(posted) = w.held_posted {
        moved = true;
        let mut n = w.clone();
        let add = park_add(posted);
        let old = n.word;
        n.word = old.wrapping_add(add);
        n.held_posted = None;
        if parked_idle(old, add) {
            assert_eq!(n.queued, 0, "queued twice: {w:?}");
            assert_eq!(n.pending, 0, "parked idle with Reads pending: {w:?}");
            n.queued += 1;
        }
        explore(&n, plan, ends);
    }
    // A thread takes it off a queue: it must find the word parked.
    if w.queued > 0 {
        moved = true;
        let mut n = w.clone();
        n.queued -= 1;
        assert!(takeable(n.word), "taken from an unparked word: {w:?}");
        assert_eq!(n.pending, 0);
        n.word = 0;
        match plan.get(n.round) {
            Some(&p) => {
                n.round += 1;
                n.pending += p;
                n.held_posted = Some(p);
            }
            None => n.done = true,
        }
        explore(&n, plan, ends);
    }
    if !moved {
        // Nothing can happen: the Call must be assembled, not stuck.
        assert!(w.done, "stuck: {w:?}");
        assert_eq!(w.word, 0);
        *ends += 1;
    }
}

/// A Call whose Reads are posted in rounds of `plan`, from its start (its
/// first round posted by the thread that started it).
fn check_plan(plan: &[usize]) -> usize {
    let first = plan.first().copied().unwrap_or(0);
    let start = World {
        word: 0,
        pending: first,
        held_posted: Some(first),
        queued: 0,
        round: 1,
        done: false,
    };
    let mut ends = 0;
    explore(&start, plan, &mut ends);
    ends
}

#[test]
fn one_read_is_queued_once_whether_it_completes_before_or_after_the_park() {
    // The completion before the park, or after it: two orders.
    assert_eq!(check_plan(&[1]), 2);
}

#[test]
fn a_round_without_room_is_queued_by_the_thread_itself() {
    assert!(check_plan(&[0, 2]) > 0);
    assert!(check_plan(&[3, 0, 0, 1]) > 0);
}

#[test]
fn a_held_work_is_never_queued() {
    // A thread that gives the Call up after posting keeps the work for
    // good: however its Reads complete, none queues it.
    for posted in 0..=4 {
        let mut word = 0i64;
        for _ in 0..posted {
            assert!(!completed_last(word));
            word = word.wrapping_sub(1);
        }
        assert!(!takeable(word));
    }
}

#[test]
fn the_parked_mark_is_far_from_any_count() {
    assert_eq!(park_add(0), PARKED);
    assert_eq!(park_add(3), PARKED + 3);
    // A count that does not fit parks as if nothing was posted, rather
    // than wrapping into the mark.
    assert_eq!(park_add(usize::MAX), PARKED);
}

proptest! {
    /// Any plan of rounds (0 to 4 Reads each, the last posting at least
    /// one), over every order of events.
    #[test]
    fn every_order_queues_each_park_once(
        mut plan in proptest::collection::vec(0usize..=4, 1..5),
        last in 1usize..=3,
    ) {
        plan.push(last);
        prop_assert!(check_plan(&plan) > 0);
    }
}
