// SPDX-License-Identifier: GPL-2.0
//! The client registration cache's lookup and replacement policy
//! (src/proto/regcache_policy.rs).

use proptest::prelude::*;
use rpcrdma_proto::proto::regcache_policy::{
    Cache, Entry, InsertError, Inserted, Lookup, PageRun, Policy,
};

fn run(first: u64, pages: u32) -> PageRun {
    PageRun { first, pages }
}

/// Entry and position storage for `n` registrations.
fn storage(n: usize) -> (Vec<Entry>, Vec<u32>) {
    (vec![Entry::default(); n], vec![0; n])
}

fn cache(
    s: &mut (Vec<Entry>, Vec<u32>),
    cap: u64,
    policy: Policy,
) -> Cache<&mut [Entry], &mut [u32]> {
    Cache::new(&mut s.0[..], &mut s.1[..], cap, policy)
}

fn runs(v: &[Entry]) -> Vec<PageRun> {
    v.iter().map(|e| e.run).collect()
}

#[test]
fn lookup_hit_subset_partial_miss() {
    let mut s = storage(8);
    let mut c = cache(&mut s, 100, Policy::Lru);
    let mut v = [Entry::default(); 8];
    assert_eq!(
        c.insert(run(10, 8), &mut v),
        Ok(Inserted { id: 0, evicted: 0 })
    );
    assert_eq!(c.lookup(run(10, 8)), Lookup::Hit(0));
    assert_eq!(c.lookup(run(12, 2)), Lookup::Hit(0));
    assert_eq!(
        c.lookup(run(16, 4)),
        Lookup::Partial {
            id: 0,
            covered: run(16, 2)
        }
    );
    assert_eq!(c.lookup(run(18, 4)), Lookup::Miss);
    assert_eq!(c.lookup(run(0, 10)), Lookup::Miss);
}

#[test]
fn lru_evicts_the_least_recently_used() {
    let mut s = storage(8);
    let mut c = cache(&mut s, 12, Policy::Lru);
    let mut v = [Entry::default(); 8];
    c.insert(run(0, 4), &mut v).unwrap();
    c.insert(run(100, 4), &mut v).unwrap();
    c.insert(run(200, 4), &mut v).unwrap();
    // Touch the oldest: the second one is now least recent.
    assert_eq!(c.lookup(run(0, 4)), Lookup::Hit(0));
    // The evicted entry's identifier is the one the newcomer gets.
    assert_eq!(
        c.insert(run(300, 4), &mut v),
        Ok(Inserted { id: 1, evicted: 1 })
    );
    assert_eq!(v[0].run, run(100, 4));
    assert_eq!(c.get(1).map(|e| e.run), Some(run(300, 4)));
    assert_eq!(c.used_pages(), 12);
}

#[test]
fn mre_evicts_large_runs_before_small_ones_of_the_same_age() {
    let mut s = storage(16);
    // Resort everything, evict one entry per round.
    let policy = Policy::Mre {
        resort_pct: 100,
        evict_pct: 1,
    };
    let mut c = cache(&mut s, 40, policy);
    let mut v = [Entry::default(); 16];
    c.insert(run(0, 1), &mut v).unwrap(); // oldest, small
    c.insert(run(100, 32), &mut v).unwrap(); // younger, large
    c.insert(run(200, 1), &mut v).unwrap();
    // LRU would evict run(0, 1); MRE takes the large one.
    assert_eq!(c.insert(run(300, 8), &mut v).map(|i| i.evicted), Ok(1));
    assert_eq!(v[0].run, run(100, 32));
}

#[test]
fn too_large_and_victim_buffer() {
    let mut s = storage(4);
    let mut c = cache(&mut s, 8, Policy::MRE);
    let mut v = [Entry::default(); 4];
    assert_eq!(c.insert(run(0, 9), &mut v), Err(InsertError::TooLarge));
    assert_eq!(c.insert(run(0, 0), &mut v), Err(InsertError::TooLarge));
    c.insert(run(0, 8), &mut v).unwrap();
    let mut none: [Entry; 0] = [];
    assert_eq!(
        c.insert(run(50, 8), &mut none),
        Err(InsertError::VictimBuffer)
    );
}

#[test]
fn invalidate_removes_every_overlapping_run() {
    let mut s = storage(8);
    let mut c = cache(&mut s, 100, Policy::Lru);
    let mut v = [Entry::default(); 8];
    for f in [0, 10, 20, 30] {
        c.insert(run(f, 5), &mut v).unwrap();
    }
    assert_eq!(c.invalidate(run(12, 10), &mut v), 2);
    let mut gone = runs(&v[..2]);
    gone.sort_by_key(|r| r.first);
    assert_eq!(gone, vec![run(10, 5), run(20, 5)]);
    assert_eq!(c.used_pages(), 10);
    assert_eq!(c.entries().len(), 2);
}

fn policy() -> impl Strategy<Value = Policy> {
    prop_oneof![
        Just(Policy::Lru),
        (1u32..=100, 1u32..=100).prop_map(|(r, e)| Policy::Mre {
            resort_pct: r,
            evict_pct: e.min(r)
        }),
    ]
}

proptest! {
    // Whatever the references, the cache never holds more pages or
    // entries than it may, its page count matches its entries, and a run
    // just inserted is found.
    #[test]
    fn capacity_and_accounting_hold(
        policy in policy(),
        cap in 1u64..64,
        slots in 1usize..12,
        refs in proptest::collection::vec((0u64..128, 1u32..16), 1..200),
    ) {
        let mut s = storage(slots);
        let mut c = cache(&mut s, cap, policy);
        let mut v = vec![Entry::default(); slots];
        for (first, pages) in refs {
            let r = run(first, pages);
            if c.lookup(r) == Lookup::Miss {
                match c.insert(r, &mut v) {
                    Ok(ins) => {
                        prop_assert!(c.lookup(r) == Lookup::Hit(ins.id));
                        prop_assert!(c.touch(ins.id));
                    }
                    Err(e) => prop_assert_eq!(e, InsertError::TooLarge),
                }
            }
            let sum: u64 = c.entries().iter().map(|e| u64::from(e.run.pages)).sum();
            prop_assert_eq!(sum, c.used_pages());
            prop_assert!(c.used_pages() <= cap);
            prop_assert!(c.entries().len() <= slots);
            // Every cached entry is found by its identifier.
            for e in c.entries() {
                prop_assert_eq!(c.get(e.id), Some(e));
            }
        }
    }
}

#[test]
fn touch_shrink_remove_and_clear() {
    let mut s = storage(8);
    let mut c = cache(&mut s, 100, Policy::Lru);
    let mut v = [Entry::default(); 8];
    let ids: Vec<u32> = [0u64, 10, 20, 30]
        .iter()
        .map(|&f| c.insert(run(f, 5), &mut v).unwrap().id)
        .collect();
    // Touching the oldest makes the second one the LRU victim.
    assert!(c.touch(ids[0]));
    assert_eq!(c.shrink(5, &mut v), 1);
    assert_eq!(v[0].run, run(10, 5));
    assert!(!c.touch(ids[1]));
    assert_eq!(c.remove_id(ids[2]).map(|e| e.run), Some(run(20, 5)));
    assert_eq!(c.used_pages(), 10);
    assert_eq!(c.clear(&mut v), 2);
    assert_eq!(c.used_pages(), 0);
    assert!(c.entries().is_empty());
    // Identifiers are free again.
    assert_eq!(c.insert(run(40, 1), &mut v).map(|i| i.id), Ok(0));
}

#[test]
fn a_run_is_placed_within_the_entry_that_covers_it() {
    assert_eq!(run(10, 2).offset_in(&run(10, 8)), Some(0));
    assert_eq!(run(13, 5).offset_in(&run(10, 8)), Some(3));
    // Past its end, or starting before it.
    assert_eq!(run(13, 6).offset_in(&run(10, 8)), None);
    assert_eq!(run(9, 2).offset_in(&run(10, 8)), None);
    // An end that overflows covers nothing.
    assert_eq!(run(u64::MAX, 2).offset_in(&run(u64::MAX - 1, 4)), None);
}

proptest! {
    #[test]
    fn an_offset_is_given_exactly_where_the_entry_contains_the_run(
        f in 0u64..64, p in 1u32..16, ef in 0u64..64, ep in 1u32..16,
    ) {
        let (r, e) = (run(f, p), run(ef, ep));
        let at = r.offset_in(&e);
        prop_assert_eq!(at.is_some(), e.contains(&r));
        if let Some(at) = at {
            prop_assert_eq!(ef + u64::from(at), f);
        }
    }
}
