// SPDX-License-Identifier: GPL-2.0

//! The server's registration cache (section 4.3 of the NFS/RDMA read/write
//! design notes): buffers for Sends, RDMA Write sources and RDMA Read sinks
//! that keep their DMA mapping, and where the device needs one for RDMA
//! Read sinks their memory registration, across requests.
//!
//! - Memory comes from one slab cache per size class ([`ClassSpec`]),
//!   created at module load and shared by all devices.
//! - There is one [`DevCache`] per RDMA device the server uses. It owns a
//!   protection domain that every server connection on the device shares
//!   ([`Endpoint::with_pd`]), because an MR can only be used by queue pairs
//!   of its own domain: a sink registered once serves RDMA Reads of every
//!   connection. Connections hold a [`CacheUser`]; the device cache is torn
//!   down when the last one goes (and the device's removal, which closes
//!   every connection, therefore also releases it).
//! - A buffer is a [`MappedBuf`] handed out and returned as an owned handle
//!   (`Arc<MappedBuf>`): it is never looked up by address. The server only
//!   names the client's memory (its rkeys) in RDMA Reads and Writes, but on
//!   iWARP an RDMA Read Request carries the sink's STag and address to the
//!   client, so every client learns the keys of the sinks its Reads used.
//! - Sink MRs (audit finding 2): on iWARP, where a Read sink needs remote
//!   write access and the PD is shared by every connection on the device,
//!   a sink is registered (REG_MR with a new key) before every RDMA Read
//!   into it and invalidated by that Read (RDMA_READ_WITH_INV, C
//!   `rdma_rw_init_mr_wrs`), so its key is valid only from its REG_MR until
//!   its Read completes and a key a client saw never names it again: a
//!   client cannot write into the sink while it serves another client. The
//!   buffer still keeps its DMA mapping and MR object across uses (no
//!   `ib_alloc_mr`/`ib_map_mr_sg`/`ib_dereg_mr` per I/O). With `force_mr`
//!   on IB/RoCE the sink MR gets local write only and is registered once,
//!   when created on a miss; a hit posts no registration there.
//! - A shrinker gives idle buffers back under memory pressure. Buffers
//!   without an MR are freed at once; buffers with one are handed to a work
//!   item, because `ib_dereg_mr` may sleep and wait for the device. The work
//!   runs on the cache's own workqueue, which [`RegCache`]'s drop drains and
//!   destroys (after the shrinker, the only producer, is gone) before the
//!   slab caches and this module's text go.
//!
//! Counters are global per class (they outlive device caches, so a run's
//! totals can be read after its connections are gone) and shown by [`show`]
//! (debugfs `rpcrdma_rs/svc_registration_cache`).
//!
//! `dev.rs` holds a device's cache and a connection's handle on it; this
//! file the registry, its setup at module load and its reclaim.
//!
//! [`Endpoint::with_pd`]: crate::rust::rdma::verbs::Endpoint::with_pd
//! [`MappedBuf`]: crate::rust::rdma::verbs::MappedBuf

use crate::rust::kext::global::module_lock;
use crate::rust::kext::shrinker::{Shrink, Shrinker};
use crate::rust::kext::slab::SlabCache;
use crate::rust::kext::workqueue::OwnedQueue;
use crate::rust::rdma::verbs::DmaDir;
use kernel::alloc::KVec;
use kernel::prelude::*;
use kernel::sync::atomic::{Atomic, Relaxed};
use kernel::sync::Arc;

/// Most size classes a cache can have.
pub(crate) const MAX_CLASSES: usize = 4;

/// One size class.
#[derive(Clone, Copy)]
pub(crate) struct ClassSpec {
    /// Name of the class's slab cache (`/proc/slabinfo`) and in debugfs.
    pub(crate) name: &'static CStr,
    /// Buffer size in bytes.
    pub(crate) size: usize,
    /// DMA direction of the class's buffers.
    pub(crate) dir: DmaDir,
    /// RDMA Read sinks: registered on devices that need it.
    pub(crate) read_sink: bool,
}

/// Counters of one class, across devices.
struct ClassStats {
    hits: Atomic<u64>,
    misses: Atomic<u64>,
    evictions: Atomic<u64>,
    overflows: Atomic<u64>,
}

impl ClassStats {
    const fn new() -> Self {
        Self {
            hits: Atomic::new(0),
            misses: Atomic::new(0),
            evictions: Atomic::new(0),
            overflows: Atomic::new(0),
        }
    }
}

static STATS: [ClassStats; MAX_CLASSES] = [
    ClassStats::new(),
    ClassStats::new(),
    ClassStats::new(),
    ClassStats::new(),
];

struct Class {
    spec: ClassSpec,
    slab: Arc<SlabCache>,
}

struct DevEntry {
    cache: Arc<DevCache>,
    users: usize,
    /// One connection's own cache, with its own protection domain
    /// ([`CacheUser::attach_own`]): never found by another connection.
    own: bool,
}

struct Root {
    classes: KVec<Class>,
    devs: KVec<DevEntry>,
    enabled: bool,
    force_mr: bool,
    max_idle: usize,
}

/// What the shrinker reaches, apart from [`ROOT`]: `ROOT` is held across
/// allocations (device cache creation), so reclaim could only try it and
/// would find nothing to free whenever a connection is being set up or torn
/// down. This lock is never held across an allocation or across the last
/// drop of a device cache, so reclaim can wait for it.
struct Reclaimable {
    /// Every device cache in `ROOT.devs`, in the same order.
    caches: KVec<Arc<DevCache>>,
    /// Where deferred deregistrations run (from `RegCache::new` to its drop).
    reap_wq: Option<OwnedQueue>,
}

module_lock! {
    /// The classes and the device caches (initialised by `RegCache::new`).
    static ROOT: Mutex<Root> = Root {
        classes: KVec::new(),
        devs: KVec::new(),
        enabled: true,
        force_mr: false,
        max_idle: 0,
    };
}

module_lock! {
    /// What reclaim reaches (initialised by `RegCache::new`).
    static RECLAIM: Mutex<Reclaimable> = Reclaimable {
        caches: KVec::new(),
        reap_wq: None,
    };
}

mod dev;
pub(crate) use dev::CacheUser;
use dev::DevCache;

/// The shrinker's view of every device cache.
struct Reclaim;

impl Shrink for Reclaim {
    fn count() -> u64 {
        RECLAIM
            .lock()
            .map_or(0, |r| r.caches.iter().map(|c| c.idle_count()).sum())
    }

    fn scan(nr: u64) -> Option<u64> {
        // Buffers without an MR are freed under the lock: an unmap and a
        // slab free, no allocation. The caches' own last references are
        // never dropped here (the list holds one each).
        let Some(r) = RECLAIM.lock() else {
            return Some(0);
        };
        let wq = r.reap_wq.as_ref().map(OwnedQueue::queue);
        let mut done = 0u64;
        for c in r.caches.iter() {
            if done >= nr {
                break;
            }
            done += c.shrink(nr - done, wq);
        }
        Some(done)
    }
}

/// The module's registration cache: the slab caches and the shrinker.
///
/// # Invariants
///
/// At most one exists; `ROOT` and `RECLAIM` are initialised while it
/// does.
pub(crate) struct RegCache {
    shrinker: Option<Shrinker<Reclaim>>,
}

impl RegCache {
    /// Creates the classes' slab caches and registers the shrinker.
    /// `enabled` false: every buffer is allocated, mapped (and registered)
    /// per use and freed after it (parameter `svc_buf_cache=0`).
    /// `force_mr`: register RDMA Read sinks on every device, not only on
    /// iWARP ones. `max_idle`: idle buffers kept per class and device.
    pub(crate) fn new(
        specs: &[ClassSpec],
        enabled: bool,
        force_mr: bool,
        max_idle: usize,
    ) -> Result<Self> {
        if specs.len() > MAX_CLASSES {
            return Err(EINVAL);
        }
        // Once per module instance: a second cache finds them set up.
        ROOT.init()?;
        RECLAIM.init()?;
        let mut root = ROOT.lock().ok_or(ENODEV)?;
        root.enabled = enabled;
        root.force_mr = force_mr;
        root.max_idle = max_idle;
        let res = (|| -> Result<Shrinker<Reclaim>> {
            let wq = OwnedQueue::new(c"rpcrdma_rs_reap")?;
            RECLAIM.lock().ok_or(ENODEV)?.reap_wq = Some(wq);
            for s in specs {
                // Page alignment: a sink MR then maps whole pages.
                let align = s.size.min(kernel::page::PAGE_SIZE);
                let slab = SlabCache::new(s.name, s.size, align)?;
                root.classes.push(Class { spec: *s, slab }, GFP_KERNEL)?;
            }
            Shrinker::register(c"rpcrdma_rs-svc-regcache")
        })();
        match res {
            // INVARIANT: initialised above.
            Ok(shrinker) => Ok(Self {
                shrinker: Some(shrinker),
            }),
            Err(e) => {
                // Destroys the slab caches created so far (no object exists)
                // and the (idle) queue.
                root.classes.clear();
                let wq = RECLAIM.lock().and_then(|mut r| r.reap_wq.take());
                drop(wq);
                Err(e)
            }
        }
    }
}

impl Drop for RegCache {
    fn drop(&mut self) {
        // No reclaim callback runs after this (shrinker_free waits).
        drop(self.shrinker.take());
        // No connection exists (sunrpc holds a module reference per
        // transport), so the registry should be empty.
        let Some((devs, classes)) = ROOT.lock().map(|mut root| {
            (
                core::mem::take(&mut root.devs),
                core::mem::take(&mut root.classes),
            )
        }) else {
            return;
        };
        if !devs.is_empty() {
            pr_err!(
                "svcrdma: {} device caches still in use at unload\n",
                devs.len()
            );
        }
        let reclaim = RECLAIM.lock().map(|mut r| core::mem::take(&mut r.caches));
        drop(devs);
        drop(reclaim);
        // Deferred frees still queued or running hold device caches and
        // buffers of the slab caches: destroying the queue runs them all to
        // completion (no new one is queued: the shrinker is gone), before
        // the slab caches and this module's text go.
        let wq = RECLAIM.lock().and_then(|mut r| r.reap_wq.take());
        drop(wq);
        for c in classes.iter() {
            if c.slab.live() != 0 {
                pr_err!(
                    "svcrdma: {} buffers of class {} still live at unload\n",
                    c.slab.live(),
                    c.spec.name.to_str().unwrap_or("?")
                );
            }
        }
        drop(classes);
    }
}

/// Counters of one class (module-wide).
#[cfg(rpcrdma_kunit)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ClassCounters {
    /// Buffers taken from an idle list.
    pub(crate) hits: u64,
    /// Buffers created (slab object allocated and mapped).
    pub(crate) misses: u64,
    /// Sink MRs registered.
    pub(crate) registrations: u64,
    /// Sink MRs deregistered.
    pub(crate) deregistrations: u64,
    /// Idle buffers freed by the shrinker.
    pub(crate) evictions: u64,
    /// Buffers of the class alive (idle or in use).
    pub(crate) entries: i64,
}

/// The counters of class `class`, if it exists.
#[cfg(rpcrdma_kunit)]
pub(crate) fn class_counters(class: usize) -> Option<ClassCounters> {
    let root = ROOT.lock()?;
    let c = root.classes.get(class)?;
    let s = STATS.get(class)?;
    Some(ClassCounters {
        hits: s.hits.load(Relaxed),
        misses: s.misses.load(Relaxed),
        registrations: c.slab.registrations(),
        deregistrations: c.slab.deregistrations(),
        evictions: s.evictions.load(Relaxed),
        entries: c.slab.live(),
    })
}

/// Runs the shrinker's scan for up to `nr` idle buffers, as memory pressure
/// would; returns how many were taken (those with an MR are freed shortly
/// after, by a work item).
#[cfg(rpcrdma_kunit)]
pub(crate) fn shrink_now(nr: u64) -> u64 {
    Reclaim::scan(nr).unwrap_or(0)
}

/// Writes the debugfs view: one line per class.
pub(crate) fn show(f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
    let Some(root) = ROOT.lock() else {
        return Ok(());
    };
    writeln!(
        f,
        "enabled {} force_mr {} devices {} max_idle {}",
        u8::from(root.enabled),
        u8::from(root.force_mr),
        root.devs.len(),
        root.max_idle
    )?;
    writeln!(
        f,
        "class size hits misses registrations deregistrations evictions overflows entries bytes idle reg_per_use"
    )?;
    for (i, c) in root.classes.iter().enumerate() {
        let Some(s) = STATS.get(i) else { break };
        let live = c.slab.live().max(0);
        let idle: u64 = root.devs.iter().map(|e| e.cache.idle_in(i)).sum();
        let hits = s.hits.load(Relaxed);
        let misses = s.misses.load(Relaxed);
        // Registrations per use (hundredths): 1.00 for iWARP sinks (one
        // REG_MR per Read, each Read invalidating it), ~0 elsewhere.
        let uses = hits.saturating_add(misses).max(1);
        let per = c.slab.registrations().saturating_mul(100) / uses;
        writeln!(
            f,
            "{} {} {} {} {} {} {} {} {} {} {} {}.{:02}",
            c.spec.name.to_str().unwrap_or("?"),
            c.spec.size,
            hits,
            misses,
            c.slab.registrations(),
            c.slab.deregistrations(),
            s.evictions.load(Relaxed),
            s.overflows.load(Relaxed),
            live,
            (live as u64).saturating_mul(c.spec.size as u64),
            idle,
            per / 100,
            per % 100
        )?;
    }
    Ok(())
}
