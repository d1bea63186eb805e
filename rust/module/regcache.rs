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

use crate::rust::kext::shrinker::{Shrink, Shrinker};
use crate::rust::kext::slab::SlabCache;
use crate::rust::kext::workqueue::OwnedQueue;
use crate::rust::rdma::cm::CmId;
use crate::rust::rdma::verbs::{DmaDir, Endpoint, MappedBuf, Pd};
use kernel::alloc::KVec;
use kernel::new_spinlock;
use kernel::new_work;
use kernel::prelude::*;
use kernel::sync::atomic::{Atomic, Relaxed};
use kernel::sync::{Arc, SpinLock};
use kernel::workqueue::{impl_has_work, Queue, Work, WorkItem};

/// Most size classes a cache can have.
pub const MAX_CLASSES: usize = 4;

/// One size class.
#[derive(Clone, Copy)]
pub struct ClassSpec {
    /// Name of the class's slab cache (`/proc/slabinfo`) and in debugfs.
    pub name: &'static CStr,
    /// Buffer size in bytes.
    pub size: usize,
    /// DMA direction of the class's buffers.
    pub dir: DmaDir,
    /// RDMA Read sinks: registered on devices that need it.
    pub read_sink: bool,
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

static INITED: Atomic<bool> = Atomic::new(false);

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

kernel::sync::global_lock! {
    // SAFETY: Initialised once by `RegCache::new` (guarded by `INITED`),
    // before anything else uses it.
    unsafe(uninit) static ROOT: Mutex<Root> = Root {
        classes: KVec::new(),
        devs: KVec::new(),
        enabled: true,
        force_mr: false,
        max_idle: 0,
    };
}

kernel::sync::global_lock! {
    // SAFETY: Initialised once by `RegCache::new` (guarded by `INITED`),
    // before anything else uses it.
    unsafe(uninit) static RECLAIM: Mutex<Reclaimable> = Reclaimable {
        caches: KVec::new(),
        reap_wq: None,
    };
}

/// The registration cache of one device.
#[pin_data]
pub struct DevCache {
    pd: Arc<Pd>,
    /// Per class: whether its buffers carry an MR.
    mr: [bool; MAX_CLASSES],
    classes: KVec<(ClassSpec, Arc<SlabCache>)>,
    enabled: bool,
    max_idle: usize,
    /// Idle buffers per class.
    #[pin]
    idle: SpinLock<KVec<KVec<Arc<MappedBuf>>>>,
    /// Buffers with an MR the shrinker took, freed by `work`.
    #[pin]
    reap: SpinLock<KVec<Arc<MappedBuf>>>,
    #[pin]
    work: Work<DevCache>,
}

impl_has_work! {
    impl HasWork<Self> for DevCache { self.work }
}

impl WorkItem for DevCache {
    type Pointer = Arc<DevCache>;

    fn run(this: Arc<DevCache>) {
        // Process context: deregistering MRs may sleep here.
        loop {
            let b = this.reap.lock().pop();
            match b {
                Some(b) => drop(b),
                None => break,
            }
        }
        drop(this);
    }
}

impl DevCache {
    fn new(id: &CmId, root: &Root) -> Result<Arc<Self>> {
        let pd = Pd::new(id, false)?;
        let attr = pd.device_attr();
        let need = pd.is_iwarp() || root.force_mr;
        if need && !attr.mem_mgt_extensions {
            pr_warn!("svcrdma: device cannot fast-register memory: RDMA Read sinks unregistered\n");
        }
        let use_mr = need && attr.mem_mgt_extensions;
        let mut mr = [false; MAX_CLASSES];
        let mut classes = KVec::with_capacity(root.classes.len(), GFP_KERNEL)?;
        let mut idle = KVec::with_capacity(root.classes.len(), GFP_KERNEL)?;
        let mut reap_cap = 0usize;
        let cap = if root.enabled { root.max_idle } else { 0 };
        for (i, c) in root.classes.iter().enumerate() {
            let with_mr = use_mr && c.spec.read_sink;
            if let Some(m) = mr.get_mut(i) {
                *m = with_mr;
            }
            if with_mr {
                reap_cap += cap;
            }
            classes.push((c.spec, c.slab.clone()), GFP_KERNEL)?;
            idle.push(KVec::with_capacity(cap, GFP_KERNEL)?, GFP_KERNEL)?;
        }
        let reap = KVec::with_capacity(reap_cap, GFP_KERNEL)?;
        Arc::pin_init(
            pin_init!(Self {
                pd,
                mr,
                classes,
                enabled: root.enabled,
                max_idle: cap,
                idle <- new_spinlock!(idle, "rpcrdma_rs::regcache::idle"),
                reap <- new_spinlock!(reap, "rpcrdma_rs::regcache::reap"),
                work <- new_work!("rpcrdma_rs::regcache::work"),
            }),
            GFP_KERNEL,
        )
    }

    fn idle_count(&self) -> u64 {
        self.idle.lock().iter().map(|l| l.len() as u64).sum()
    }

    fn idle_in(&self, class: usize) -> u64 {
        self.idle.lock().get(class).map_or(0, |l| l.len() as u64)
    }

    /// Takes up to `nr` idle buffers off the lists: frees those without an
    /// MR, queues the others for the work item on `wq` (kept when there is
    /// none). Returns how many.
    fn shrink(self: &Arc<Self>, nr: u64, wq: Option<&Queue>) -> u64 {
        let mut done = 0u64;
        let mut queued = false;
        for (i, with_mr) in self.mr.iter().enumerate().take(self.classes.len()) {
            while done < nr {
                let b = {
                    let mut idle = self.idle.lock();
                    let Some(list) = idle.get_mut(i) else { break };
                    if *with_mr {
                        if wq.is_none() {
                            break;
                        }
                        // Moved under both locks so a buffer is never lost
                        // when the reap list is full.
                        let mut reap = self.reap.lock();
                        if reap.len() >= reap.capacity() {
                            break;
                        }
                        match list.pop() {
                            Some(b) => {
                                let _ = reap.push_within_capacity(b);
                                queued = true;
                                None
                            }
                            None => break,
                        }
                    } else {
                        match list.pop() {
                            Some(b) => Some(b),
                            None => break,
                        }
                    }
                };
                // Unmapped and freed here, outside the lock.
                drop(b);
                done += 1;
                if let Some(s) = STATS.get(i) {
                    s.evictions.add(1, Relaxed);
                }
            }
        }
        if let (true, Some(wq)) = (queued, wq) {
            // Already queued (an error): that run frees these too.
            let _ = wq.enqueue(self.clone());
        }
        done
    }
}

/// A buffer from [`CacheUser::get`].
pub struct Got {
    /// The buffer, mapped on the device (whole class size).
    pub buf: Arc<MappedBuf>,
    /// Post [`MappedBuf::post_sink_registration`] on the connection before the
    /// RDMA Read into it: its sink MR was just created, or (iWARP) the sink
    /// is registered for each use.
    pub needs_registration: bool,
    /// Whether it came from the cache.
    pub hit: bool,
}

/// A connection's use of its device's cache.
///
/// # Invariants
///
/// While it exists, `ROOT.devs` has an entry for `cache` whose `users`
/// counts this value.
pub struct CacheUser {
    cache: Arc<DevCache>,
}

impl CacheUser {
    /// The cache of the device `id` is bound to, created on first use.
    pub fn attach(id: &CmId) -> Result<Self> {
        Self::attach_to(id, false)
    }

    /// A cache of `id`'s device for this user alone, with a protection
    /// domain of its own, which no other connection's queue pair, buffer
    /// or MR is in (C allocates a PD per connection). Its buffers are
    /// reused by this user only, and the shrinker sees its idle ones as
    /// any device cache's; it goes with its user.
    pub fn attach_own(id: &CmId) -> Result<Self> {
        Self::attach_to(id, true)
    }

    fn attach_to(id: &CmId, own: bool) -> Result<Self> {
        if !INITED.load(Relaxed) {
            return Err(ENODEV);
        }
        let mut root = ROOT.lock();
        for e in root.devs.iter_mut() {
            if !own && !e.own && e.cache.pd.same_device(id) {
                e.users += 1;
                // INVARIANT: counted in `users`.
                return Ok(Self {
                    cache: e.cache.clone(),
                });
            }
        }
        let cache = DevCache::new(id, &root)?;
        root.devs.reserve(1, GFP_KERNEL)?;
        // Grown outside `RECLAIM` (reclaim may wait for it); `ROOT`, held
        // here, serialises every change of its length.
        let known = RECLAIM.lock().caches.len();
        let mut grown = KVec::with_capacity(known + 1, GFP_KERNEL)?;
        let old = {
            let mut r = RECLAIM.lock();
            // Clones: on an error `r.caches` stays whole.
            for c in r.caches.iter() {
                grown.push_within_capacity(c.clone()).map_err(|_| ENOMEM)?;
            }
            grown
                .push_within_capacity(cache.clone())
                .map_err(|_| ENOMEM)?;
            core::mem::replace(&mut r.caches, grown)
        };
        drop(old);
        root.devs
            .push_within_capacity(DevEntry {
                cache: cache.clone(),
                users: 1,
                own,
            })
            .map_err(|_| ENOMEM)?;
        // Again whenever a connection arrives on a device none used (a
        // connection's own cache is no news).
        if !own {
            crate::pr_info_ratelimited!(
                "svcrdma: registration cache for a device created (sink MRs: {})\n",
                cache.mr.iter().any(|m| *m)
            );
        }
        // INVARIANT: counted in `users` of the new entry.
        Ok(Self { cache })
    }

    /// The cache's protection domain (the device's shared one, or the
    /// user's own), for the connection's queue pair.
    pub fn pd(&self) -> &Arc<Pd> {
        &self.cache.pd
    }

    /// The class size of `class`.
    pub fn class_size(&self, class: usize) -> Option<usize> {
        self.cache.classes.get(class).map(|(s, _)| s.size)
    }

    /// A buffer of `class`: an idle one if there is one (hit), else a new
    /// slab object mapped (and for sinks that need it, given an MR) on the
    /// device (miss). `ep` must be a connection on the device's domain.
    pub fn get(&self, class: usize, ep: &Endpoint) -> Result<Got> {
        let c = &self.cache;
        let (spec, slab) = c.classes.get(class).ok_or(EINVAL)?;
        let stats = STATS.get(class).ok_or(EINVAL)?;
        if !Arc::ptr_eq(ep.pd(), &c.pd) {
            return Err(EINVAL);
        }
        if c.enabled {
            let hit = c.idle.lock().get_mut(class).and_then(|l| l.pop());
            if let Some(buf) = hit {
                stats.hits.add(1, Relaxed);
                // The last Read invalidated a remotely writable sink.
                let needs_registration = buf.sink_registers_per_use();
                return Ok(Got {
                    buf,
                    needs_registration,
                    hit: true,
                });
            }
        }
        stats.misses.add(1, Relaxed);
        let with_mr = c.mr.get(class).copied().unwrap_or(false);
        let obj = slab.alloc()?;
        let buf = MappedBuf::from_slab(&c.pd, obj, spec.dir, with_mr)?;
        Ok(Got {
            buf,
            needs_registration: with_mr,
            hit: false,
        })
    }

    /// Gives a buffer of `class` back for reuse (any context; never
    /// allocates). Only return buffers whose last use succeeded: a sink
    /// whose registration may not have executed must be dropped instead.
    pub fn put(&self, class: usize, buf: Arc<MappedBuf>) {
        let c = &self.cache;
        if !c.enabled {
            return;
        }
        let Some((spec, _)) = c.classes.get(class) else {
            return;
        };
        // A sink still registered for a Read that never ran would keep a
        // remotely writable key while idle or in another client's use.
        if buf.len() != spec.size || buf.dir() != spec.dir || buf.sink_armed() {
            return;
        }
        let mut idle = c.idle.lock();
        let Some(list) = idle.get_mut(class) else {
            return;
        };
        let rejected = if list.len() < c.max_idle {
            list.push_within_capacity(buf).err().map(|e| e.0)
        } else {
            Some(buf)
        };
        let Some(rejected) = rejected else {
            return;
        };
        // Freed outside the lock.
        drop(idle);
        drop(rejected);
        if let Some(s) = STATS.get(class) {
            s.overflows.add(1, Relaxed);
        }
    }
}

impl Drop for CacheUser {
    fn drop(&mut self) {
        let last = {
            let mut root = ROOT.lock();
            let pos = root
                .devs
                .iter()
                .position(|e| Arc::ptr_eq(&e.cache, &self.cache));
            match pos {
                Some(p) => {
                    let gone = root.devs.get_mut(p).is_some_and(|e| {
                        e.users -= 1;
                        e.users == 0
                    });
                    if gone {
                        let mut r = RECLAIM.lock();
                        let seen = r.caches.iter().position(|c| Arc::ptr_eq(c, &self.cache));
                        let reclaim = seen.and_then(|i| r.caches.remove(i).ok());
                        drop(r);
                        Some((root.devs.remove(p).ok(), reclaim))
                    } else {
                        None
                    }
                }
                None => None,
            }
        };
        // The last connection on the device: its idle buffers are unmapped,
        // deregistered and freed here (process context: `xpo_free`), after
        // the registry locks were dropped.
        drop(last);
    }
}

/// The shrinker's view of every device cache.
struct Reclaim;

impl Shrink for Reclaim {
    fn count() -> u64 {
        RECLAIM.lock().caches.iter().map(|c| c.idle_count()).sum()
    }

    fn scan(nr: u64) -> Option<u64> {
        // Buffers without an MR are freed under the lock: an unmap and a
        // slab free, no allocation. The caches' own last references are
        // never dropped here (the list holds one each).
        let r = RECLAIM.lock();
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
/// At most one exists; `ROOT` is initialised while it does.
pub struct RegCache {
    shrinker: Option<Shrinker<Reclaim>>,
}

impl RegCache {
    /// Creates the classes' slab caches and registers the shrinker.
    /// `enabled` false: every buffer is allocated, mapped (and registered)
    /// per use and freed after it (parameter `svc_buf_cache=0`).
    /// `force_mr`: register RDMA Read sinks on every device, not only on
    /// iWARP ones. `max_idle`: idle buffers kept per class and device.
    pub fn new(
        specs: &[ClassSpec],
        enabled: bool,
        force_mr: bool,
        max_idle: usize,
    ) -> Result<Self> {
        if specs.len() > MAX_CLASSES {
            return Err(EINVAL);
        }
        if INITED.load(Relaxed) {
            return Err(EBUSY);
        }
        // SAFETY: `INITED` is false: this is the first initialisation in
        // this module instance, and nothing used `ROOT` yet.
        unsafe { ROOT.init() };
        // SAFETY: As for `ROOT`.
        unsafe { RECLAIM.init() };
        INITED.store(true, Relaxed);
        let mut root = ROOT.lock();
        root.enabled = enabled;
        root.force_mr = force_mr;
        root.max_idle = max_idle;
        let res = (|| -> Result<Shrinker<Reclaim>> {
            let wq = OwnedQueue::new(c"rpcrdma_rs_reap")?;
            RECLAIM.lock().reap_wq = Some(wq);
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
                let wq = RECLAIM.lock().reap_wq.take();
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
        let (devs, classes) = {
            let mut root = ROOT.lock();
            (
                core::mem::take(&mut root.devs),
                core::mem::take(&mut root.classes),
            )
        };
        if !devs.is_empty() {
            pr_err!(
                "svcrdma: {} device caches still in use at unload\n",
                devs.len()
            );
        }
        let reclaim = core::mem::take(&mut RECLAIM.lock().caches);
        drop(devs);
        drop(reclaim);
        // Deferred frees still queued or running hold device caches and
        // buffers of the slab caches: destroying the queue runs them all to
        // completion (no new one is queued: the shrinker is gone), before
        // the slab caches and this module's text go.
        let wq = RECLAIM.lock().reap_wq.take();
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
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassCounters {
    /// Buffers taken from an idle list.
    pub hits: u64,
    /// Buffers created (slab object allocated and mapped).
    pub misses: u64,
    /// Sink MRs registered.
    pub registrations: u64,
    /// Sink MRs deregistered.
    pub deregistrations: u64,
    /// Idle buffers freed by the shrinker.
    pub evictions: u64,
    /// Buffers of the class alive (idle or in use).
    pub entries: i64,
}

/// The counters of class `class`, if it exists.
pub fn class_counters(class: usize) -> Option<ClassCounters> {
    if !INITED.load(Relaxed) {
        return None;
    }
    let root = ROOT.lock();
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
pub fn shrink_now(nr: u64) -> u64 {
    if !INITED.load(Relaxed) {
        return 0;
    }
    Reclaim::scan(nr).unwrap_or(0)
}

/// Writes the debugfs view: one line per class.
pub fn show(f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
    if !INITED.load(Relaxed) {
        return Ok(());
    }
    let root = ROOT.lock();
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
