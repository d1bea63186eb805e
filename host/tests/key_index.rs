//! The pending-registration index: every lookup agrees with a scan of the
//! list, whatever the keys and however entries come and go.

use proptest::prelude::*;
use rpcrdma_proto::proto::key_index::KeyIndex;

/// A list entry: its key and a tag to tell entries apart.
type Entry = (usize, u32);

fn key_of(e: &Entry) -> usize {
    e.0
}

/// Removes entry `pos` the way the kernel's pending list does.
fn take(index: &mut KeyIndex<Vec<u32>>, list: &mut Vec<Entry>, pos: usize) -> Entry {
    index.removing(pos, list, key_of);
    list.swap_remove(pos)
}

#[test]
fn buckets_must_be_a_power_of_two() {
    assert!(KeyIndex::new(vec![0u32; 0]).is_none());
    assert!(KeyIndex::new(vec![0u32; 3]).is_none());
    assert!(KeyIndex::new(vec![7u32; 1]).is_some());
}

#[test]
fn request_addresses_spread_over_the_buckets() {
    // Requests are slab objects of one size: addresses 1 KiB apart. With
    // twice as many buckets as entries, all are indexed.
    let mut index = KeyIndex::new(vec![0u32; 256]).unwrap();
    let list: Vec<Entry> = (0..128u32)
        .map(|i| (0xffff_8880_0420_0000 + 1024 * i as usize, i))
        .collect();
    for (pos, e) in list.iter().enumerate() {
        index.added(e.0, pos);
    }
    assert_eq!(index.unindexed(), 0);
    for (pos, e) in list.iter().enumerate() {
        assert_eq!(index.find(e.0, &list, key_of), Some(pos));
    }
}

#[test]
fn one_bucket_still_finds_everything() {
    // Every key collides: all but one entry are found by the scan.
    let mut index = KeyIndex::new(vec![0u32; 1]).unwrap();
    let mut list: Vec<Entry> = Vec::new();
    for k in 1..=5usize {
        list.push((k * 4096, 0));
        index.added(k * 4096, list.len() - 1);
    }
    assert_eq!(index.unindexed(), 4);
    let pos = index.find(3 * 4096, &list, key_of).unwrap();
    assert_eq!(take(&mut index, &mut list, pos).0, 3 * 4096);
    for k in [1usize, 2, 4, 5] {
        let pos = index.find(k * 4096, &list, key_of).unwrap();
        assert_eq!(list[pos].0, k * 4096);
    }
    assert_eq!(index.find(3 * 4096, &list, key_of), None);
}

#[test]
fn a_taken_entry_is_not_found_again() {
    // buf_free after the reply handler took the entry: a miss, no scan
    // needed when every entry is indexed.
    let mut index = KeyIndex::new(vec![0u32; 64]).unwrap();
    let mut list: Vec<Entry> = vec![(0x1000, 1), (0x2000, 2)];
    index.added(0x1000, 0);
    index.added(0x2000, 1);
    let pos = index.find(0x1000, &list, key_of).unwrap();
    take(&mut index, &mut list, pos);
    assert_eq!(index.find(0x1000, &list, key_of), None);
    assert_eq!(index.find(0x2000, &list, key_of), Some(0));
    index.clear();
    list.clear();
    assert_eq!(index.find(0x2000, &list, key_of), None);
    assert_eq!(index.unindexed(), 0);
}

#[derive(Clone, Debug)]
enum Op {
    /// Add an entry with key `k` (if no entry has it: one per request).
    Add(usize),
    /// Take the entry of key `k`, if any.
    Take(usize),
    /// The same with `find_removing` (the kernel's pending list).
    FindRemoving(usize),
    /// Empty the list.
    Clear,
}

fn op(keys: usize) -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..keys).prop_map(Op::Add),
        3 => (0..keys).prop_map(Op::Take),
        3 => (0..keys).prop_map(Op::FindRemoving),
        1 => Just(Op::Clear),
    ]
}

proptest! {
    // Against a scan of the list: lookups agree after any sequence of
    // additions, removals by swap (indexed either way) and clears, for any
    // bucket count (collisions included), and an entry goes unindexed only
    // when it was added to a full table.
    #[test]
    fn lookups_agree_with_a_scan(
        bucket_bits in 0u32..6,
        stride in prop_oneof![Just(1usize), Just(1024), Just(1 << 20), 1usize..5000],
        ops in proptest::collection::vec(op(40), 1..300),
    ) {
        let mut index = KeyIndex::new(vec![0u32; 1 << bucket_bits]).unwrap();
        let mut list: Vec<Entry> = Vec::new();
        let mut tag = 0u32;
        let buckets = 1usize << bucket_bits;
        // Tags of the entries added to a full table.
        let mut unindexed = std::collections::HashSet::new();
        for o in ops {
            match o {
                Op::Add(k) => {
                    let key = k * stride;
                    if !list.iter().any(|e| e.0 == key) {
                        tag += 1;
                        if list.len() - unindexed.len() == buckets {
                            unindexed.insert(tag);
                        }
                        list.push((key, tag));
                        index.added(key, list.len() - 1);
                    }
                }
                Op::Take(k) => {
                    let key = k * stride;
                    let found = index.find(key, &list, key_of);
                    prop_assert_eq!(found, list.iter().position(|e| e.0 == key));
                    if let Some(pos) = found {
                        let e = take(&mut index, &mut list, pos);
                        prop_assert_eq!(e.0, key);
                        unindexed.remove(&e.1);
                    }
                }
                Op::FindRemoving(k) => {
                    let key = k * stride;
                    let expected = list.iter().position(|e| e.0 == key);
                    let found = index.find_removing(key, &list, key_of);
                    prop_assert_eq!(found, expected);
                    if let Some(pos) = found {
                        let e = list.swap_remove(pos);
                        prop_assert_eq!(e.0, key);
                        unindexed.remove(&e.1);
                    }
                }
                Op::Clear => {
                    index.clear();
                    list.clear();
                    unindexed.clear();
                }
            }
            for k in 0..40 {
                let key = k * stride;
                prop_assert_eq!(
                    index.find(key, &list, key_of),
                    list.iter().position(|e| e.0 == key)
                );
            }
            prop_assert_eq!(index.unindexed(), unindexed.len());
        }
    }
}
