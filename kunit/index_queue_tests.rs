// SPDX-License-Identifier: GPL-2.0

//! The lock-free queue of words (`rust/kext/index_queue.rs`) through which
//! a server connection's completions hand its threads completed Receives
//! and Calls whose Reads are done: values come out in the order they went
//! in, each once; a full queue refuses a push and keeps what it holds; the
//! cells are reused lap after lap; the room is the power of two at or
//! above what was asked. (Completions and threads racing on it: every
//! server scenario, on the debug kernel too.)

use crate::rust::kext::index_queue::IndexQueue;
use kernel::prelude::*;

#[kunit_tests(rpcrdma_rs_index_queue)]
mod tests {
    use super::*;

    #[test]
    fn values_come_out_in_order_once() -> Result {
        let q = IndexQueue::new(4)?;
        assert!(q.is_empty());
        assert_eq!(q.pop(), None);
        for v in [7, 0, u64::MAX, 3] {
            assert!(q.push(v));
        }
        assert!(!q.is_empty());
        for v in [7, 0, u64::MAX, 3] {
            assert_eq!(q.pop(), Some(v));
        }
        assert_eq!(q.pop(), None);
        assert!(q.is_empty());
        Ok(())
    }

    #[test]
    fn a_full_queue_refuses_and_keeps_what_it_holds() -> Result {
        let q = IndexQueue::new(3)?;
        assert_eq!(q.capacity(), 4);
        for v in 10..14 {
            assert!(q.push(v));
        }
        assert!(!q.push(99));
        assert_eq!(q.pop(), Some(10));
        // Room for one again.
        assert!(q.push(14));
        assert!(!q.push(15));
        for v in 11..15 {
            assert_eq!(q.pop(), Some(v));
        }
        assert_eq!(q.pop(), None);
        Ok(())
    }

    #[test]
    fn cells_are_reused_lap_after_lap() -> Result {
        let q = IndexQueue::new(4)?;
        let mut next = 0u64;
        let mut expect = 0u64;
        // Filled, then three out each round: one value stays behind, so
        // each round starts a cell further on, and the positions pass the
        // cells many times.
        for _ in 0..50 {
            while q.push(next) {
                next += 1;
            }
            for _ in 0..3 {
                assert_eq!(q.pop(), Some(expect));
                expect += 1;
            }
        }
        while let Some(v) = q.pop() {
            assert_eq!(v, expect);
            expect += 1;
        }
        assert_eq!(expect, next);
        assert!(next > 100);
        assert_eq!(IndexQueue::new(0)?.capacity(), 1);
        Ok(())
    }
}
