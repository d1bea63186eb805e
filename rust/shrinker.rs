// SPDX-License-Identifier: GPL-2.0

//! Memory shrinkers: callbacks the memory manager calls under memory
//! pressure to ask a cache how much it could free and to free some of it.
//!
//! The callbacks run in reclaim, in process context (kswapd or a task in
//! direct reclaim), possibly while the interrupted task holds arbitrary
//! locks of its own: an implementation must not wait for anything that may
//! itself allocate memory, and should return `None` (`SHRINK_STOP`) when it
//! cannot make progress without blocking.
//!
//! C header: [`include/linux/shrinker.h`](srctree/include/linux/shrinker.h).

use super::bindings;
use core::marker::PhantomData;
use core::ptr::NonNull;
use kernel::prelude::*;

/// What a shrinker does. The callbacks are functions of the type, not of an
/// object: implementations reach their caches through their own (global)
/// registry, which keeps shrinker lifetimes trivial.
pub trait Shrink {
    /// How many objects could be freed now (0: nothing to do).
    fn count() -> u64;
    /// Frees up to `nr` objects; returns how many were freed, or `None`
    /// when no progress can be made from this context.
    fn scan(nr: u64) -> Option<u64>;
}

struct Adapter<T: Shrink>(PhantomData<T>);

impl<T: Shrink> Adapter<T> {
    const OPS: bindings::rpcrdma_rs_shrink_ops = bindings::rpcrdma_rs_shrink_ops {
        count: Some(Self::count),
        scan: Some(Self::scan),
    };

    /// # Safety
    ///
    /// Called only by the C shrinker trampoline.
    unsafe extern "C" fn count() -> kernel::ffi::c_ulong {
        match T::count() {
            // SHRINK_EMPTY: nothing cached at all.
            0 => kernel::ffi::c_ulong::MAX - 1,
            n => kernel::ffi::c_ulong::try_from(n).unwrap_or(kernel::ffi::c_ulong::MAX - 2),
        }
    }

    /// # Safety
    ///
    /// Called only by the C shrinker trampoline.
    unsafe extern "C" fn scan(nr: kernel::ffi::c_ulong) -> kernel::ffi::c_ulong {
        match T::scan(u64::try_from(nr).unwrap_or(u64::MAX)) {
            Some(n) => kernel::ffi::c_ulong::try_from(n).unwrap_or(0),
            // SHRINK_STOP.
            None => kernel::ffi::c_ulong::MAX,
        }
    }
}

/// A registered shrinker; unregistered (waiting for running callbacks) on
/// drop.
///
/// # Invariants
///
/// `ptr` was returned by `shrinker_alloc` and registered with callbacks
/// that call `T`'s functions; it is freed exactly once, in `drop`.
pub struct Shrinker<T: Shrink> {
    ptr: NonNull<bindings::shrinker>,
    _t: PhantomData<T>,
}

// SAFETY: `shrinker_free` may be called from any thread.
unsafe impl<T: Shrink> Send for Shrinker<T> {}
// SAFETY: No method takes `&self`.
unsafe impl<T: Shrink> Sync for Shrinker<T> {}

impl<T: Shrink> Shrinker<T> {
    /// Registers a shrinker named `name` (shown in debugfs
    /// `shrinker/`).
    pub fn register(name: &CStr) -> Result<Self> {
        // SAFETY: `name` is copied by `shrinker_alloc`; `Adapter::<T>::OPS`
        // is a constant promoted to a `'static`, valid until `shrinker_free`.
        let ptr = unsafe {
            bindings::rpcrdma_rs_shrinker_register(name.as_char_ptr(), &Adapter::<T>::OPS)
        };
        let ptr = NonNull::new(ptr).ok_or(ENOMEM)?;
        // INVARIANT: allocated and registered above.
        Ok(Self {
            ptr,
            _t: PhantomData,
        })
    }
}

impl<T: Shrink> Drop for Shrinker<T> {
    fn drop(&mut self) {
        // SAFETY: By the type invariant the shrinker is registered; after
        // this returns no callback runs.
        unsafe { bindings::rpcrdma_rs_shrinker_free(self.ptr.as_ptr()) };
    }
}
