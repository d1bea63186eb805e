// SPDX-License-Identifier: GPL-2.0

//! A hashed index over a dense list whose entries carry a key: the client's
//! pending registrations, one entry per call awaiting its reply, keyed by
//! the request.
//!
//! The reply handler and `buf_free` each look a request's entry up once per
//! RPC. A scan of the list costs a comparison per call in flight (up to the
//! credit window), and `buf_free` usually scans it all only to find that the
//! reply handler took the entry already. C keeps the list in its
//! `rpcrdma_req`, which we do not own (sunrpc allocates our requests); this
//! index makes both lookups constant time instead.
//!
//! The list stays a dense array that the caller owns and removes from by
//! swapping the last entry into the hole. The index is an open-addressed
//! table (linear probing, deletion by backward shift) of positions in that
//! list: a lookup walks from the key's home bucket to the entry or to an
//! empty bucket, a couple of buckets when the table has about twice as
//! many buckets as entries. Should the table ever be full, an entry is
//! only counted, and lookups that miss scan the list while any such entry
//! exists: a lookup never misses an entry, whatever the keys.
//!
//! Pure `core` code on caller-provided storage (no allocation): the kernel
//! gives it a vector of buckets per connection (`xprtrdma/conn.rs`).

use core::ops::DerefMut;

/// Bucket value of no entry.
const EMPTY: u32 = 0;

/// An index over a list of up to `u32::MAX - 1` entries, in `S`'s buckets.
///
/// # Invariants
///
/// - `buckets` has a power-of-two length.
/// - A bucket holds [`EMPTY`] or `position + 1` of an entry of the list;
///   each entry is named by at most one bucket.
/// - A named entry is reached from its key's home bucket
///   ([`bucket_of`]) by walking forward (wrapping) over buckets that are
///   not empty.
/// - `unindexed` is the number of entries of the list no bucket names.
pub struct KeyIndex<S> {
    buckets: S,
    unindexed: usize,
}

/// The home bucket of `key` among `len` (a power of two): Fibonacci
/// hashing, whose upper product bits mix every bit of the key (request
/// addresses differ in their upper bits only: they are slab objects of one
/// size).
#[inline]
fn bucket_of(key: usize, len: usize) -> usize {
    const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;
    let mixed = (key as u64).wrapping_mul(GOLDEN);
    // `len` is a power of two: the mask keeps the index below it.
    ((mixed >> 32) as usize) & len.wrapping_sub(1)
}

/// The bucket value naming position `pos` (never [`EMPTY`]: it is
/// `pos + 1`), if it has one.
#[inline]
fn named(pos: usize) -> Option<u32> {
    u32::try_from(pos).ok().and_then(|p| p.checked_add(1))
}

/// The position a non-empty bucket value names.
#[inline]
fn position(value: u32) -> Option<usize> {
    (value as usize).checked_sub(1)
}

impl<S: DerefMut<Target = [u32]>> KeyIndex<S> {
    /// An index over an empty list in `buckets`, whose length must be a
    /// power of two (`None` otherwise). About twice as many buckets as
    /// entries keep the walks short.
    pub fn new(mut buckets: S) -> Option<Self> {
        if !buckets.deref().len().is_power_of_two() {
            return None;
        }
        buckets.deref_mut().fill(EMPTY);
        // INVARIANT: no entry, no bucket used, none unindexed.
        Some(Self {
            buckets,
            unindexed: 0,
        })
    }

    /// How many entries of the list no bucket names (the table was full
    /// when they were added; a lookup that misses scans the list while
    /// there are any).
    pub fn unindexed(&self) -> usize {
        self.unindexed
    }

    /// The bucket after `b`, wrapping (`len` a power of two).
    #[inline]
    fn next_bucket(b: usize, len: usize) -> usize {
        b.wrapping_add(1) & len.wrapping_sub(1)
    }

    /// The bucket naming position `pos`, walking from `key`'s home.
    fn bucket_naming(&self, key: usize, pos: usize) -> Option<usize> {
        let value = named(pos)?;
        let buckets = self.buckets.deref();
        let len = buckets.len();
        let mut b = bucket_of(key, len);
        for _ in 0..len {
            match buckets.get(b).copied() {
                Some(v) if v == value => return Some(b),
                Some(EMPTY) | None => return None,
                Some(_) => b = Self::next_bucket(b, len),
            }
        }
        None
    }

    /// Records that the entry of `key` was appended at `pos`.
    pub fn added(&mut self, key: usize, pos: usize) {
        let buckets = self.buckets.deref_mut();
        let len = buckets.len();
        if let Some(value) = named(pos) {
            let mut b = bucket_of(key, len);
            for _ in 0..len {
                match buckets.get_mut(b) {
                    Some(slot) if *slot == EMPTY => {
                        // INVARIANT: reached from the home over full buckets.
                        *slot = value;
                        return;
                    }
                    Some(_) => b = Self::next_bucket(b, len),
                    None => break,
                }
            }
        }
        // INVARIANT: the entry is counted instead of named.
        self.unindexed = self.unindexed.saturating_add(1);
    }

    /// The position in `list` of the entry whose key is `key`, if any.
    pub fn find<T>(&self, key: usize, list: &[T], key_of: impl Fn(&T) -> usize) -> Option<usize> {
        self.locate(key, list, &key_of).map(|(_, pos)| pos)
    }

    /// The position in `list` of the entry whose key is `key`, if any,
    /// with the index updated for its removal by swapping the last entry
    /// into its place (as [`Self::removing`]), which the caller then does.
    /// The walk that finds the entry's bucket also empties it: [`Self::find`]
    /// then [`Self::removing`] would walk to it twice.
    pub fn find_removing<T>(
        &mut self,
        key: usize,
        list: &[T],
        key_of: impl Fn(&T) -> usize,
    ) -> Option<usize> {
        let (bucket, pos) = self.locate(key, list, &key_of)?;
        match bucket {
            Some(b) => self.vacate(b, list, &key_of),
            // INVARIANT: an unindexed entry leaves the list.
            None => self.unindexed = self.unindexed.saturating_sub(1),
        }
        self.follow_last(pos, list, &key_of);
        Some(pos)
    }

    /// The entry whose key is `key`: the bucket naming it (`None` for an
    /// unindexed entry, found by a scan) and its position in `list`.
    fn locate<T>(
        &self,
        key: usize,
        list: &[T],
        key_of: &impl Fn(&T) -> usize,
    ) -> Option<(Option<usize>, usize)> {
        let buckets = self.buckets.deref();
        let len = buckets.len();
        let mut b = bucket_of(key, len);
        for _ in 0..len {
            let Some(pos) = buckets.get(b).copied().and_then(position) else {
                break;
            };
            if list.get(pos).is_some_and(|e| key_of(e) == key) {
                return Some((Some(b), pos));
            }
            b = Self::next_bucket(b, len);
        }
        if self.unindexed == 0 {
            return None;
        }
        // Not named by a bucket: an unindexed entry, if any.
        let pos = list.iter().position(|e| key_of(e) == key)?;
        Some((None, pos))
    }

    /// Updates the index for the removal of entry `pos` by swapping the
    /// last entry into its place; call it before that removal.
    pub fn removing<T>(&mut self, pos: usize, list: &[T], key_of: impl Fn(&T) -> usize) {
        let Some(entry) = list.get(pos) else {
            return;
        };
        match self.bucket_naming(key_of(entry), pos) {
            Some(b) => self.vacate(b, list, &key_of),
            // INVARIANT: an unindexed entry leaves the list.
            None => self.unindexed = self.unindexed.saturating_sub(1),
        }
        self.follow_last(pos, list, &key_of);
    }

    /// Renames the bucket of the last entry of `list` to `pos`, where the
    /// removal of entry `pos` by swap moves it (nothing when `pos` is the
    /// last).
    fn follow_last<T>(&mut self, pos: usize, list: &[T], key_of: &impl Fn(&T) -> usize) {
        let Some(last) = list.len().checked_sub(1) else {
            return;
        };
        if last == pos {
            return;
        }
        // The last entry moves to `pos`: the bucket naming it follows it.
        let Some(moved) = list.get(last) else {
            return;
        };
        if let (Some(b), Some(to)) = (self.bucket_naming(key_of(moved), last), named(pos)) {
            if let Some(slot) = self.buckets.deref_mut().get_mut(b) {
                *slot = to;
            }
        }
    }

    /// Empties bucket `hole`, then moves back each later bucket of the run
    /// whose entry's walk passes the hole (deletion by backward shift), so
    /// every named entry stays reachable from its home.
    fn vacate<T>(&mut self, mut hole: usize, list: &[T], key_of: &impl Fn(&T) -> usize) {
        let buckets = self.buckets.deref_mut();
        let len = buckets.len();
        let mask = len.wrapping_sub(1);
        let mut next = Self::next_bucket(hole, len);
        while next != hole {
            let Some(value) = buckets.get(next).copied() else {
                break;
            };
            let Some(key) = position(value).and_then(|p| list.get(p)).map(key_of) else {
                // An empty bucket ends the run.
                break;
            };
            let home = bucket_of(key, len);
            // Distances walked (mod `len`) from the home to the hole and
            // to where the entry sits: it may move into the hole when the
            // hole lies on its walk.
            let to_hole = hole.wrapping_sub(home) & mask;
            let to_next = next.wrapping_sub(home) & mask;
            if to_hole < to_next {
                if let Some(h) = buckets.get_mut(hole) {
                    *h = value;
                }
                hole = next;
            }
            next = Self::next_bucket(next, len);
        }
        if let Some(h) = buckets.get_mut(hole) {
            *h = EMPTY;
        }
    }

    /// Forgets every entry (the list was emptied).
    pub fn clear(&mut self) {
        self.buckets.deref_mut().fill(EMPTY);
        // INVARIANT: no entry.
        self.unindexed = 0;
    }
}
