// SPDX-License-Identifier: GPL-2.0

//! Slab caches (`kmem_cache`) of fixed-size objects, for buffers that are
//! allocated and freed at a high rate and kept DMA-mapped (the server's
//! registration cache).
//!
//! A [`SlabCache`] is shared through an [`Arc`]; every [`SlabObj`] holds a
//! reference to its cache, so the cache is destroyed only after its last
//! object was freed, and an object can never be freed into the wrong cache.
//! The cache counts its live objects and the memory registrations made on
//! them, which the registration cache's debugfs view reports.
//!
//! C header: [`include/linux/slab.h`](srctree/include/linux/slab.h).

use crate::rust::bindings;
use core::ptr::NonNull;
use kernel::prelude::*;
use kernel::sync::atomic::{Atomic, Relaxed};
use kernel::sync::Arc;

/// A `kmem_cache` of objects of one size.
///
/// # Invariants
///
/// `ptr` is a live cache created by `kmem_cache_create` with objects of
/// `size` bytes; it is destroyed exactly once, in `drop`, when no object
/// allocated from it is live (every [`SlabObj`] holds a reference).
pub struct SlabCache {
    ptr: NonNull<bindings::kmem_cache>,
    size: usize,
    live: Atomic<i64>,
    registrations: Atomic<u64>,
    deregistrations: Atomic<u64>,
}

// SAFETY: `kmem_cache_alloc`/`kmem_cache_free` may be called from any thread.
unsafe impl Send for SlabCache {}
// SAFETY: See `Send`; the counters are atomics.
unsafe impl Sync for SlabCache {}

impl SlabCache {
    /// Creates a cache named `name` (shown in `/proc/slabinfo`) of objects
    /// of `size` bytes, aligned to `align` bytes (0: cache line).
    pub fn new(name: &'static CStr, size: usize, align: usize) -> Result<Arc<Self>> {
        let sz = u32::try_from(size).map_err(|_| EINVAL)?;
        let al = u32::try_from(align).map_err(|_| EINVAL)?;
        if size == 0 {
            return Err(EINVAL);
        }
        // SAFETY: `name` is a NUL-terminated string that lives forever
        // (`'static`), as the cache may keep pointing to it.
        let ptr = unsafe { bindings::rpcrdma_rs_slab_create(name.as_char_ptr(), sz, al) };
        let ptr = NonNull::new(ptr).ok_or(ENOMEM)?;
        // INVARIANT: `ptr` is a live cache of `size`-byte objects.
        Ok(Arc::new(
            Self {
                ptr,
                size,
                live: Atomic::new(0),
                registrations: Atomic::new(0),
                deregistrations: Atomic::new(0),
            },
            GFP_KERNEL,
        )
        .inspect_err(|_| {
            // SAFETY: Created above, no object allocated from it.
            unsafe { bindings::kmem_cache_destroy(ptr.as_ptr()) }
        })?)
    }

    /// Object size in bytes.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Objects currently allocated from the cache.
    pub fn live(&self) -> i64 {
        self.live.load(Relaxed)
    }

    /// Memory registrations made on objects of this cache.
    pub fn registrations(&self) -> u64 {
        self.registrations.load(Relaxed)
    }

    /// Memory registrations released with their object.
    pub fn deregistrations(&self) -> u64 {
        self.deregistrations.load(Relaxed)
    }

    pub(crate) fn count_registration(&self) {
        self.registrations.add(1, Relaxed);
    }

    pub(crate) fn count_deregistration(&self) {
        self.deregistrations.add(1, Relaxed);
    }

    /// Allocates one object (process context: may sleep).
    pub fn alloc(self: &Arc<Self>) -> Result<SlabObj> {
        // SAFETY: By the type invariant the cache is live.
        let ptr = unsafe { bindings::rpcrdma_rs_slab_alloc(self.ptr.as_ptr()) };
        let ptr = NonNull::new(ptr.cast::<u8>()).ok_or(ENOMEM)?;
        self.live.add(1, Relaxed);
        // INVARIANT: `ptr` was just allocated from `self`.
        Ok(SlabObj {
            ptr,
            cache: self.clone(),
        })
    }
}

impl Drop for SlabCache {
    fn drop(&mut self) {
        // SAFETY: By the type invariant the cache is live and no object of it
        // is (each holds a reference to `self`).
        unsafe { bindings::kmem_cache_destroy(self.ptr.as_ptr()) };
    }
}

/// One object of a [`SlabCache`]; freed back to it on drop.
///
/// # Invariants
///
/// `ptr` points to `cache.size()` bytes allocated from `cache` and not yet
/// freed.
pub struct SlabObj {
    ptr: NonNull<u8>,
    cache: Arc<SlabCache>,
}

// SAFETY: The object is plain memory owned by this value.
unsafe impl Send for SlabObj {}
// SAFETY: Shared references hand out only the address.
unsafe impl Sync for SlabObj {}

impl SlabObj {
    /// The first byte of the object.
    pub(in crate::rust) fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.cache.size
    }

    /// Whether the object is empty (never).
    pub fn is_empty(&self) -> bool {
        self.cache.size == 0
    }

    /// The cache the object came from.
    pub fn cache(&self) -> &Arc<SlabCache> {
        &self.cache
    }
}

impl Drop for SlabObj {
    fn drop(&mut self) {
        // SAFETY: By the type invariant `ptr` came from `cache` and is freed
        // only here.
        unsafe { bindings::kmem_cache_free(self.cache.ptr.as_ptr(), self.ptr.as_ptr().cast()) };
        self.cache.live.add(-1, Relaxed);
    }
}
