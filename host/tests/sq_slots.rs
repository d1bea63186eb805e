// SPDX-License-Identifier: GPL-2.0

//! The rules of the server's send queue slots (`src/proto/sq_slots.rs`).

use proptest::prelude::*;
use rpcrdma_proto::proto::sq_slots::{SlotError, SqLimits, StallClock};

#[test]
fn a_chain_is_never_longer_than_the_queue() {
    let l = SqLimits::new(8, 2);
    assert_eq!(l.depth(), 8);
    assert_eq!(l.check_chain(8), Ok(()));
    assert_eq!(l.check_chain(9), Err(SlotError::TooMany));
}

#[test]
fn reads_leave_their_reserve_to_replies() {
    let l = SqLimits::new(8, 2);
    assert_eq!(l.read_take(8, 7), None);
    assert_eq!(l.read_take(8, 6), Some(2));
    assert!(!l.read_room(2));
    assert_eq!(l.read_take(2, 1), None);
    assert!(l.read_room(3));
    assert_eq!(l.read_take(3, 1), Some(2));
}

#[test]
fn the_queue_has_at_least_two_slots_and_reads_leave_one() {
    let l = SqLimits::new(0, 9);
    assert_eq!(l.depth(), 2);
    assert_eq!(l.read_take(2, 1), Some(1));
    assert_eq!(l.read_take(1, 1), None);
}

proptest! {
    /// A Read takes exactly when it leaves the reserve, takes exactly what
    /// it asked, and never leaves less than the reserve.
    #[test]
    fn reads_never_take_the_reserve(
        depth in 0u32..64,
        keep in 0u32..64,
        avail in -4i32..70,
        n in 0u32..70,
    ) {
        let l = SqLimits::new(depth, keep);
        let keep = keep.min(depth.max(2) - 1);
        match l.read_take(avail, n) {
            Some(left) => {
                prop_assert!(i64::from(avail) >= i64::from(n) + i64::from(keep));
                prop_assert_eq!(i64::from(left), i64::from(avail) - i64::from(n));
                prop_assert!(i64::from(left) >= i64::from(keep));
            }
            None => prop_assert!(i64::from(avail) < i64::from(n) + i64::from(keep)),
        }
        prop_assert_eq!(l.read_room(avail), i64::from(avail) > i64::from(keep));
    }
}

#[test]
fn waiting_replies_stall_without_a_send_completing() {
    let mut done = 0u64;
    let mut first = StallClock::new(1_000, done);
    assert!(!first.stalled(done, 2_000, 3_000));
    assert!(!first.stalled(done, 3_999, 3_000));
    assert!(first.stalled(done, 4_000, 3_000));
    // A second waiter has a clock of its own.
    let mut second = StallClock::new(4_500, done);
    assert!(!second.stalled(done, 4_500, 3_000));
    assert!(first.stalled(done, 4_500, 3_000));
    // A Send's completion is progress, seen by each waiter when it next
    // wakes.
    done += 1;
    assert!(!first.stalled(done, 6_000, 3_000));
    assert!(!first.stalled(done, 8_999, 3_000));
    assert!(first.stalled(done, 9_000, 3_000));
    assert!(!second.stalled(done, 7_000, 3_000));
    assert!(second.stalled(done, 10_000, 3_000));
}

/// One Reply waiting alone, as the gate runs it: it looks at its clock
/// after each wake (a second at most apart). It stalls once the bound has
/// passed with no Send completed, however many times it slept and woke
/// meanwhile.
#[test]
fn a_lone_waiter_stalls_across_its_wakes() {
    let mut clock = StallClock::new(0, 7);
    let stalled_at = (1..=10u64)
        .map(|wake| wake * 1_000)
        .find(|&now| clock.stalled(7, now, 3_000));
    assert_eq!(stalled_at, Some(3_000));
}

/// The count of completed Sends wraps: a change is progress, whichever
/// way it went.
#[test]
fn a_wrapped_count_is_progress() {
    let mut clock = StallClock::new(0, u64::MAX);
    assert!(!clock.stalled(0, 5_000, 3_000));
    assert!(clock.stalled(0, 8_000, 3_000));
}
