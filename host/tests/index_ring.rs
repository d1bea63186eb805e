// SPDX-License-Identifier: GPL-2.0

//! The lock-free ring of words (`rust/kext/index_ring.rs`) through which a
//! server connection's completions hand its threads their work: values
//! come out in the order they went in, each once; a full ring refuses a
//! push; and with several threads pushing and several popping at once,
//! every value comes out exactly once, each producer's in its order, and a
//! value pushed before a look at `is_empty` is seen by it.

// Pure logic with no kernel API: built here as it is in the module.
#[path = "../../rust/kext/index_ring.rs"]
mod index_ring;

use index_ring::{IndexRing, RingCell};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;

fn ring(cap: u64) -> IndexRing<Vec<RingCell>> {
    IndexRing::new((0..cap).map(RingCell::new).collect()).expect("a power of two")
}

#[test]
fn values_come_out_in_order_once_and_a_full_ring_refuses() {
    let r = ring(4);
    assert_eq!(r.capacity(), 4);
    assert!(r.is_empty());
    assert_eq!(r.pop(), None);
    for v in [7, 0, u64::MAX, 3] {
        assert!(r.push(v));
    }
    assert!(!r.push(99));
    assert!(!r.is_empty());
    for v in [7, 0, u64::MAX, 3] {
        assert_eq!(r.pop(), Some(v));
    }
    assert_eq!(r.pop(), None);
    assert!(r.is_empty());
}

#[test]
fn cells_are_reused_lap_after_lap() {
    let r = ring(4);
    let (mut next, mut expect) = (0u64, 0u64);
    for _ in 0..1000 {
        while r.push(next) {
            next += 1;
        }
        for _ in 0..3 {
            assert_eq!(r.pop(), Some(expect));
            expect += 1;
        }
    }
    while let Some(v) = r.pop() {
        assert_eq!(v, expect);
        expect += 1;
    }
    assert_eq!(expect, next);
}

#[test]
fn cells_that_are_not_a_fresh_power_of_two_are_refused() {
    assert!(IndexRing::new((0..3).map(RingCell::new).collect::<Vec<_>>()).is_none());
    assert!(IndexRing::new(Vec::<RingCell>::new()).is_none());
    assert!(IndexRing::new(vec![RingCell::new(1), RingCell::new(0)]).is_none());
}

#[test]
fn many_threads_each_value_once_in_each_producers_order() {
    const PRODUCERS: u64 = 4;
    const CONSUMERS: usize = 4;
    const EACH: u64 = 100_000;
    let r = Arc::new(ring(16));
    let start = Arc::new(Barrier::new(PRODUCERS as usize + CONSUMERS));
    let taken = Arc::new(AtomicU64::new(0));
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let (r, start) = (r.clone(), start.clone());
            thread::spawn(move || {
                start.wait();
                for i in 0..EACH {
                    while !r.push(p << 32 | i) {
                        thread::yield_now();
                    }
                }
            })
        })
        .collect();
    let consumers: Vec<_> = (0..CONSUMERS)
        .map(|_| {
            let (r, start, taken) = (r.clone(), start.clone(), taken.clone());
            thread::spawn(move || {
                start.wait();
                let mut seen = Vec::new();
                let mut last = vec![None::<u64>; PRODUCERS as usize];
                while taken.load(Ordering::Relaxed) < PRODUCERS * EACH {
                    let Some(v) = r.pop() else {
                        thread::yield_now();
                        continue;
                    };
                    taken.fetch_add(1, Ordering::Relaxed);
                    let (p, i) = ((v >> 32) as usize, v & 0xffff_ffff);
                    // A first-in first-out ring: one consumer sees each
                    // producer's values in the order they were pushed.
                    assert!(last[p].is_none_or(|l| l < i), "out of order");
                    last[p] = Some(i);
                    seen.push(v);
                }
                seen
            })
        })
        .collect();
    for t in producers {
        t.join().unwrap();
    }
    let mut all: Vec<u64> = consumers
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    all.sort_unstable();
    let want: Vec<u64> = (0..PRODUCERS)
        .flat_map(|p| (0..EACH).map(move |i| p << 32 | i))
        .collect();
    assert_eq!(all, want);
    assert!(r.is_empty());
}

/// The hand-off of `svcrdma/recv_queue.rs`: a completion pushes, then sets
/// the transport's data flag; a thread that finds the ring empty clears
/// the flag, with a full barrier after, and looks again. Whatever the
/// interleaving, a value is never left in the ring with the flag clear.
#[test]
fn a_value_pushed_before_the_flag_is_never_lost() {
    const ROUNDS: usize = 20_000;
    for _ in 0..ROUNDS / 1000 {
        let r = Arc::new(ring(4));
        let flag = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicBool::new(false));
        let producer = {
            let (r, flag, done) = (r.clone(), flag.clone(), done.clone());
            thread::spawn(move || {
                for i in 0..1000u64 {
                    while !r.push(i) {
                        thread::yield_now();
                    }
                    flag.store(true, Ordering::Relaxed);
                }
                done.store(true, Ordering::SeqCst);
            })
        };
        let mut got = 0u64;
        loop {
            // A server thread runs only while the flag is set.
            if !flag.load(Ordering::Relaxed) {
                if done.load(Ordering::SeqCst) && !flag.load(Ordering::SeqCst) {
                    break;
                }
                thread::yield_now();
                continue;
            }
            if r.pop().is_some() {
                got += 1;
                continue;
            }
            flag.store(false, Ordering::Relaxed);
            std::sync::atomic::fence(Ordering::SeqCst);
            if !r.is_empty() {
                flag.store(true, Ordering::Relaxed);
            }
        }
        producer.join().unwrap();
        assert_eq!(got, 1000, "a value was left behind with the flag clear");
        assert!(r.is_empty());
    }
}
