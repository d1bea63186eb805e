// SPDX-License-Identifier: GPL-2.0

//! The index arithmetic of the server's fixed rings
//! (`src/proto/ring_index.rs`), against a queue of the slots it hands out.

use proptest::prelude::*;
use rpcrdma_proto::proto::ring_index::RingIndex;
use std::collections::VecDeque;

#[test]
fn a_ring_without_slots_is_always_empty_and_full() {
    let mut r = RingIndex::new(0);
    assert_eq!(r.push(), None);
    assert_eq!(r.pop(), None);
    assert!(r.is_empty());
}

#[test]
fn slots_are_handed_out_in_order_and_wrap() {
    let mut r = RingIndex::new(3);
    assert_eq!(
        (r.push(), r.push(), r.push(), r.push()),
        (Some(0), Some(1), Some(2), None)
    );
    assert_eq!(r.pop(), Some(0));
    assert_eq!(r.push(), Some(0));
    assert_eq!(
        (r.pop(), r.pop(), r.pop(), r.pop()),
        (Some(1), Some(2), Some(0), None)
    );
    assert_eq!(r.push(), Some(1));
    assert_eq!(r.len(), 1);
}

proptest! {
    /// Every slot handed out is free, within the capacity, and freed in
    /// the order it was taken: the ring is a first-in, first-out queue
    /// whose length never passes its capacity.
    #[test]
    fn the_ring_is_a_bounded_fifo_of_distinct_slots(
        capacity in 0usize..9,
        ops in proptest::collection::vec(any::<bool>(), 0..200),
    ) {
        let mut r = RingIndex::new(capacity);
        let mut model: VecDeque<usize> = VecDeque::new();
        for push in ops {
            if push {
                match r.push() {
                    Some(at) => {
                        prop_assert!(at < capacity);
                        prop_assert!(!model.contains(&at));
                        model.push_back(at);
                    }
                    None => prop_assert_eq!(model.len(), capacity),
                }
            } else {
                prop_assert_eq!(r.pop(), model.pop_front());
            }
            prop_assert_eq!(r.len(), model.len());
            prop_assert_eq!(r.is_empty(), model.is_empty());
        }
    }
}
