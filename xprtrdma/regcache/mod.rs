// SPDX-License-Identifier: GPL-2.0

//! The client registration cache (`memreg=cache`, opt-in): the design
//! papers' third client strategy. Registrations of the pages an I/O names
//! (the `xdr_buf` page array: O_DIRECT user buffers, page-cache pages) are
//! kept across RPCs, so that I/O from the same pages again posts neither
//! REG_MR nor LOCAL_INV.
//!
//! - An entry is one MR over a piece of a chunk's page array: as many
//!   pages as the connection's MRs map (`max_fr_depth`, the pieces
//!   `memreg=fmr` would register), counted from the chunk's first page,
//!   in the array's order whether or not they are physically contiguous.
//!   It is keyed by its first page frame number and page count (the access
//!   the server gets folded in), never by virtual address, and a hit
//!   compares the entry's pages with the request's, so a 1 MiB I/O from a
//!   buffer it saw before costs a few lookups, not one per page. Each
//!   entry ([`RunMr`]) holds a reference on its pages while cached, so a
//!   cached steering tag never names a page that was freed and reused.
//! - A chunk's head and tail (kmalloc'd memory that shares its pages with
//!   other objects) are never cached: they use the connection's MR pool as
//!   `memreg=fmr` does.
//! - Replacement by MRRC's size-and-recency rule
//!   ([`crate::proto::regcache_policy`], [`Policy::MRE`]); lookups go
//!   through an index by first page, so a hit costs `O(log n)`.
//! - Evicted entries are invalidated in one LOCAL_INV chain; an entry an
//!   RPC in flight still uses is invalidated once that RPC completes.
//!   Entries also go when the cache passes `cache_max_mb`, when the memory
//!   shrinker asks, and at disconnect (the queue pair is drained first).
//! - The connection does not offer remote invalidation: a server that
//!   invalidated a cached steering tag would cost the entry.
//!
//! The trade-off: while an entry is cached, the server can read (Read
//! chunks) or write (Write and Reply chunks) its whole pages at any time,
//! not only during the RPC that offered them.

use super::reg::{counters, Strategy};
use kernel::sync::atomic::{Atomic, Relaxed};

mod evict;
mod index;
mod io;

pub(super) use index::CacheState;

/// Most registrations (MRs) one connection's cache holds.
const MAX_ENTRIES: usize = 1024;
/// Unmapped MRs kept for the next misses instead of being deregistered.
const SPARE_MRS: usize = 32;
/// Index entries the cursor looks at, from the closest first page down,
/// for one serving the piece (overlapping entries are rare).
const LOOKUP_PROBES: usize = 4;
/// The key bit of pieces the server may write: read-only and writable
/// registrations of the same pages are separate entries. Page frame
/// numbers never reach it.
const WRITABLE_KEY: u64 = 1 << 63;
const PAGE_SIZE: u32 = kernel::page::PAGE_SIZE as u32;

/// Module-wide counters of the cache (debugfs `client_cache`).
pub(crate) struct CacheCounters {
    entries: Atomic<i64>,
    pinned_bytes: Atomic<i64>,
    hits: Atomic<u64>,
    misses: Atomic<u64>,
    registrations: Atomic<u64>,
    invalidations: Atomic<u64>,
    invalidation_batches: Atomic<u64>,
    evictions: Atomic<u64>,
    shrinker_evictions: Atomic<u64>,
    remote_invalidations: Atomic<u64>,
}

static COUNTERS: CacheCounters = CacheCounters {
    entries: Atomic::new(0),
    pinned_bytes: Atomic::new(0),
    hits: Atomic::new(0),
    misses: Atomic::new(0),
    registrations: Atomic::new(0),
    invalidations: Atomic::new(0),
    invalidation_batches: Atomic::new(0),
    evictions: Atomic::new(0),
    shrinker_evictions: Atomic::new(0),
    remote_invalidations: Atomic::new(0),
};

/// Writes the debugfs view of the cache counters.
pub(crate) fn show(f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
    let c = &COUNTERS;
    writeln!(
        f,
        "transports entries pinned_bytes hits misses registrations invalidations invalidation_batches evictions shrinker_evictions remote_invalidations"
    )?;
    writeln!(
        f,
        "{} {} {} {} {} {} {} {} {} {} {}",
        counters(Strategy::Cache).transports.load(Relaxed),
        c.entries.load(Relaxed),
        c.pinned_bytes.load(Relaxed),
        c.hits.load(Relaxed),
        c.misses.load(Relaxed),
        c.registrations.load(Relaxed),
        c.invalidations.load(Relaxed),
        c.invalidation_batches.load(Relaxed),
        c.evictions.load(Relaxed),
        c.shrinker_evictions.load(Relaxed),
        c.remote_invalidations.load(Relaxed)
    )
}

/// Bytes of `pages` pages, for the pinned counter.
fn bytes(pages: u32) -> i64 {
    i64::from(pages).saturating_mul(i64::from(PAGE_SIZE))
}

/// One use of a cache entry by a request, kept until its reply.
#[derive(Clone, Copy, Debug)]
pub(super) struct CacheUse {
    id: u32,
    serial: u64,
    /// A REG_MR was posted for it with this request: its send queue slot
    /// is freed by the request's Send, or by an invalidation if the Send
    /// never goes.
    pub(super) reg_slot: bool,
}
