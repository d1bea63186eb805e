// SPDX-License-Identifier: GPL-2.0

//! The server's send queue slot accounting (`src/proto/sq_slots.rs`).

use proptest::prelude::*;
use rpcrdma_proto::proto::sq_slots::{SlotError, SqSlots, Starve, Wake};

#[test]
fn a_chain_takes_what_is_free_and_never_more_than_the_queue() {
    let mut s = SqSlots::new(8, 2);
    assert_eq!(s.try_take(9), Err(SlotError::TooMany));
    assert_eq!(s.try_take(5), Ok(true));
    assert_eq!(s.try_take(4), Ok(false));
    assert_eq!(s.avail(), 3);
    assert_eq!(s.try_take(3), Ok(true));
    assert_eq!(s.avail(), 0);
    assert_eq!(s.release(8), Wake::default());
    assert_eq!(s.avail(), 8);
}

#[test]
fn reads_leave_their_reserve_to_replies() {
    let mut s = SqSlots::new(8, 2);
    assert_eq!(s.try_take_read(7), Ok(false));
    assert_eq!(s.try_take_read(6), Ok(true));
    assert!(!s.read_room());
    assert_eq!(s.try_take_read(1), Ok(false));
    // The reserve is still there for a Reply.
    assert_eq!(s.try_take(2), Ok(true));
}

#[test]
fn a_release_wakes_waiting_replies_only_when_there_are_some() {
    let mut s = SqSlots::new(4, 1);
    assert_eq!(s.try_take(4), Ok(true));
    // A completion with nobody waiting wakes nobody.
    assert_eq!(s.release(1), Wake::default());
    assert_eq!(s.try_take(2), Ok(false));
    assert!(!s.has_waiters());
    s.begin_wait();
    assert!(s.has_waiters());
    assert_eq!(
        s.release(1),
        Wake {
            waiters: true,
            reads: false
        }
    );
    s.end_wait();
    assert!(!s.has_waiters());
    assert_eq!(s.try_take(2), Ok(true));
    assert_eq!(s.release(1), Wake::default());
}

#[test]
fn a_starved_read_is_told_once_when_room_returns() {
    let mut s = SqSlots::new(4, 1);
    assert_eq!(s.starve(), Starve::Room);
    assert_eq!(s.try_take(3), Ok(true));
    assert_eq!(s.starve(), Starve::Starved);
    // Room for a Send, not beyond the Reads' reserve: not yet.
    assert_eq!(s.release(0), Wake::default());
    assert_eq!(
        s.release(1),
        Wake {
            waiters: false,
            reads: true
        }
    );
    assert_eq!(s.release(1), Wake::default());
}

#[test]
fn a_closed_gate_fails_every_take() {
    let mut s = SqSlots::new(4, 1);
    s.close();
    assert_eq!(s.try_take(1), Err(SlotError::Closed));
    assert_eq!(s.try_take_read(1), Err(SlotError::Closed));
    assert!(!s.read_room());
    assert_eq!(s.starve(), Starve::Closed);
    // A take beyond the queue is refused as such, closed or not.
    assert_eq!(s.try_take(5), Err(SlotError::TooMany));
}

#[test]
fn the_queue_has_at_least_two_slots_and_reads_leave_one() {
    let s = SqSlots::new(0, 9);
    assert_eq!(s.depth(), 2);
    let mut s = s;
    assert_eq!(s.try_take_read(1), Ok(true));
    assert_eq!(s.try_take_read(1), Ok(false));
}

proptest! {
    /// Whatever the order of takes, Read takes and releases of what was
    /// taken: the free slots never exceed the queue, a take succeeds
    /// exactly when enough are free, and a release wakes the waiters
    /// exactly when some are counted.
    #[test]
    fn slots_are_conserved(
        depth in 2u32..64,
        keep in 0u32..64,
        ops in proptest::collection::vec((0u8..4, 1u32..8), 0..200),
    ) {
        let mut s = SqSlots::new(depth, keep);
        let keep = keep.min(depth - 1);
        let mut taken: Vec<u32> = Vec::new();
        let mut waiting = 0u32;
        for (op, n) in ops {
            let before = s.avail();
            match op {
                0 => {
                    let ok = s.try_take(n);
                    if n > depth {
                        prop_assert_eq!(ok, Err(SlotError::TooMany));
                    } else {
                        prop_assert_eq!(ok, Ok(before >= n));
                        if before >= n { taken.push(n); }
                    }
                }
                1 => {
                    let ok = s.try_take_read(n);
                    prop_assert_eq!(ok, Ok(before >= n + keep));
                    if before >= n + keep { taken.push(n); }
                }
                2 => {
                    if let Some(n) = taken.pop() {
                        let wake = s.release(n);
                        prop_assert_eq!(wake.waiters, waiting > 0);
                        prop_assert_eq!(s.avail(), before + n);
                    }
                }
                _ => {
                    if waiting == 0 {
                        s.begin_wait();
                        waiting += 1;
                    } else {
                        s.end_wait();
                        waiting -= 1;
                    }
                }
            }
            prop_assert!(s.avail() <= depth);
            prop_assert_eq!(s.avail() + taken.iter().sum::<u32>(), depth);
        }
    }
}

#[test]
fn waiting_replies_stall_without_a_send_completing() {
    let mut s = SqSlots::new(4, 1);
    assert_eq!(s.try_take(4), Ok(true));
    let mut first = s.stall_clock(1_000);
    assert!(!s.stalled(&mut first, 2_000, 3_000));
    assert!(!s.stalled(&mut first, 3_999, 3_000));
    assert!(s.stalled(&mut first, 4_000, 3_000));
    // A second waiter has a clock of its own.
    let mut second = s.stall_clock(4_500);
    assert!(!s.stalled(&mut second, 4_500, 3_000));
    assert!(s.stalled(&mut first, 4_500, 3_000));
    // A Read's slots coming back is no progress of the Sends ...
    s.release(1);
    assert!(s.stalled(&mut first, 5_000, 3_000));
    // ... a Send's completion is, seen by each waiter when it next wakes.
    s.release_sent(1);
    assert!(!s.stalled(&mut first, 6_000, 3_000));
    assert!(!s.stalled(&mut first, 8_999, 3_000));
    assert!(s.stalled(&mut first, 9_000, 3_000));
    assert!(!s.stalled(&mut second, 7_000, 3_000));
    assert!(s.stalled(&mut second, 10_000, 3_000));
    assert!(!s.is_closed());
    s.close();
    assert!(s.is_closed());
}

/// One Reply waiting alone, as the gate runs it: it counts itself as a
/// waiter only while it sleeps (a second at most), and looks at its clock
/// after each wake. It stalls once the bound has passed with no Send
/// completed, however many times it slept and woke meanwhile.
#[test]
fn a_lone_waiter_stalls_across_its_wakes() {
    let mut s = SqSlots::new(4, 1);
    assert_eq!(s.try_take(4), Ok(true));
    let mut clock = s.stall_clock(0);
    let mut stalled_at = None;
    for wake in 1..=10u64 {
        s.begin_wait();
        assert!(s.has_waiters());
        s.end_wait();
        assert!(!s.has_waiters());
        if s.stalled(&mut clock, wake * 1_000, 3_000) {
            stalled_at = Some(wake * 1_000);
            break;
        }
    }
    assert_eq!(stalled_at, Some(3_000));
}
