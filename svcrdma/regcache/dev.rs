// SPDX-License-Identifier: GPL-2.0

//! A device's registration cache ([`DevCache`]: its protection domain, the
//! idle buffers of each class, deferred deregistration) and a connection's
//! handle on it ([`CacheUser`]).

use super::{ClassSpec, DevEntry, Root, MAX_CLASSES, RECLAIM, ROOT, STATS};
use crate::rust::kext::slab::SlabCache;
use crate::rust::kext::spin_lock::{new_spinlock, SpinLock};
use crate::rust::rdma::cm::CmId;
use crate::rust::rdma::verbs::{Endpoint, MappedBuf, Pd};
use kernel::alloc::KVec;
use kernel::new_work;
use kernel::prelude::*;
use kernel::sync::atomic::Relaxed;
use kernel::sync::Arc;
use kernel::workqueue::{impl_has_work, Queue, Work, WorkItem};

/// The registration cache of one device.
#[pin_data]
pub(crate) struct DevCache {
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

    pub(super) fn idle_count(&self) -> u64 {
        self.idle.lock().iter().map(|l| l.len() as u64).sum()
    }

    pub(super) fn idle_in(&self, class: usize) -> u64 {
        self.idle.lock().get(class).map_or(0, |l| l.len() as u64)
    }

    /// Takes up to `nr` idle buffers off the lists: frees those without an
    /// MR, queues the others for the work item on `wq` (kept when there is
    /// none). Returns how many.
    pub(super) fn shrink(self: &Arc<Self>, nr: u64, wq: Option<&Queue>) -> u64 {
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
pub(crate) struct Got {
    /// The buffer, mapped on the device (whole class size).
    pub(crate) buf: Arc<MappedBuf>,
    /// Post [`MappedBuf::post_sink_registration`] on the connection before the
    /// RDMA Read into it: its sink MR was just created, or (iWARP) the sink
    /// is registered for each use.
    pub(crate) needs_registration: bool,
    /// Whether it came from the cache.
    pub(crate) hit: bool,
}

/// A connection's use of its device's cache.
///
/// # Invariants
///
/// While it exists, `ROOT.devs` has an entry for `cache` whose `users`
/// counts this value.
pub(crate) struct CacheUser {
    cache: Arc<DevCache>,
}

impl CacheUser {
    /// The cache of the device `id` is bound to, created on first use.
    pub(crate) fn attach(id: &CmId) -> Result<Self> {
        Self::attach_to(id, false)
    }

    /// A cache of `id`'s device for this user alone, with a protection
    /// domain of its own, which no other connection's queue pair, buffer
    /// or MR is in (C allocates a PD per connection). Its buffers are
    /// reused by this user only, and the shrinker sees its idle ones as
    /// any device cache's; it goes with its user.
    pub(crate) fn attach_own(id: &CmId) -> Result<Self> {
        Self::attach_to(id, true)
    }

    fn attach_to(id: &CmId, own: bool) -> Result<Self> {
        let Some(mut root) = ROOT.lock() else {
            return Err(ENODEV);
        };
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
        let known = RECLAIM.lock().ok_or(ENODEV)?.caches.len();
        let mut grown = KVec::with_capacity(known + 1, GFP_KERNEL)?;
        let old = {
            let mut r = RECLAIM.lock().ok_or(ENODEV)?;
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
    pub(crate) fn pd(&self) -> &Arc<Pd> {
        &self.cache.pd
    }

    /// The class size of `class`.
    pub(crate) fn class_size(&self, class: usize) -> Option<usize> {
        self.cache.classes.get(class).map(|(s, _)| s.size)
    }

    /// A buffer of `class`: an idle one if there is one (hit), else a new
    /// slab object mapped (and for sinks that need it, given an MR) on the
    /// device (miss). `ep` must be a connection on the device's domain.
    pub(crate) fn get(&self, class: usize, ep: &Endpoint) -> Result<Got> {
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
    pub(crate) fn put(&self, class: usize, buf: Arc<MappedBuf>) {
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
        // A user exists only once the registry is set up.
        let Some(mut root) = ROOT.lock() else {
            return;
        };
        let last = {
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
                        let reclaim = RECLAIM.lock().and_then(|mut r| {
                            let seen = r.caches.iter().position(|c| Arc::ptr_eq(c, &self.cache));
                            seen.and_then(|i| r.caches.remove(i).ok())
                        });
                        Some((root.devs.remove(p).ok(), reclaim))
                    } else {
                        None
                    }
                }
                None => None,
            }
        };
        drop(root);
        // The last connection on the device: its idle buffers are unmapped,
        // deregistered and freed here (process context: `xpo_free`), after
        // the registry locks were dropped.
        drop(last);
    }
}
