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

use crate::rust::bindings;
use core::marker::PhantomData;
use core::ptr::NonNull;
use kernel::prelude::*;
use kernel::sync::{Arc, ArcBorrow};

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

/// What `count_objects` returns for `n` objects.
fn count_result(n: u64) -> kernel::ffi::c_ulong {
    match n {
        // SHRINK_EMPTY: nothing cached at all.
        0 => kernel::ffi::c_ulong::MAX - 1,
        n => kernel::ffi::c_ulong::try_from(n).unwrap_or(kernel::ffi::c_ulong::MAX - 2),
    }
}

/// What `scan_objects` returns for a scan's outcome.
fn scan_result(freed: Option<u64>) -> kernel::ffi::c_ulong {
    match freed {
        Some(n) => kernel::ffi::c_ulong::try_from(n).unwrap_or(0),
        // SHRINK_STOP.
        None => kernel::ffi::c_ulong::MAX,
    }
}

struct Adapter<T: Shrink>(PhantomData<T>);

impl<T: Shrink> Adapter<T> {
    /// `count_objects` of the shrinker.
    ///
    /// # Safety
    ///
    /// Called only by the memory manager, as a registered shrinker's
    /// callback.
    unsafe extern "C" fn count(
        _s: *mut bindings::shrinker,
        _sc: *mut bindings::shrink_control,
    ) -> kernel::ffi::c_ulong {
        count_result(T::count())
    }

    /// `scan_objects` of the shrinker.
    ///
    /// # Safety
    ///
    /// Called only by the memory manager, as a registered shrinker's
    /// callback, with a valid `sc`.
    unsafe extern "C" fn scan(
        _s: *mut bindings::shrinker,
        sc: *mut bindings::shrink_control,
    ) -> kernel::ffi::c_ulong {
        // SAFETY: The memory manager passes a valid control for the call.
        let nr = unsafe { (*sc).nr_to_scan };
        scan_result(T::scan(u64::try_from(nr).unwrap_or(u64::MAX)))
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
        // SAFETY: The format and `name` are NUL-terminated strings;
        // `shrinker_alloc` copies the name.
        let ptr = unsafe { bindings::shrinker_alloc(0, c"%s".as_char_ptr(), name.as_char_ptr()) };
        let ptr = NonNull::new(ptr).ok_or(ENOMEM)?;
        // SAFETY: `ptr` was just allocated (zeroed, `seeks` set) and is not
        // registered yet: these are the fields a shrinker's owner fills.
        // The callbacks are functions of `T`, valid as long as the module.
        unsafe {
            let s = ptr.as_ptr();
            (*s).count_objects = Some(Adapter::<T>::count);
            (*s).scan_objects = Some(Adapter::<T>::scan);
            bindings::shrinker_register(s);
        }
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
        unsafe { bindings::shrinker_free(self.ptr.as_ptr()) };
    }
}

/// What a shrinker of one object does (a connection's cache): as
/// [`Shrink`], with the object the shrinker was registered for.
pub trait ShrinkObject: Send + Sync {
    /// How many objects could be freed now (0: nothing to do).
    fn count(&self) -> u64;
    /// Frees up to `nr` objects; returns how many were freed, or `None`
    /// when no progress can be made from this context.
    fn scan(this: ArcBorrow<'_, Self>, nr: u64) -> Option<u64>;
}

struct ObjectAdapter<T: ShrinkObject>(PhantomData<T>);

impl<T: ShrinkObject> ObjectAdapter<T> {
    /// The object a shrinker was registered for.
    ///
    /// # Safety
    ///
    /// `s` is a shrinker registered by [`ObjectShrinker::register`] for a
    /// `T`, not yet freed.
    unsafe fn object<'a>(s: *mut bindings::shrinker) -> ArcBorrow<'a, T> {
        // SAFETY: `private_data` is the pointer of the `Arc<T>` the
        // registration holds until after `shrinker_free` returned.
        unsafe { ArcBorrow::from_raw((*s).private_data.cast::<T>().cast_const()) }
    }

    /// `count_objects` of the shrinker.
    ///
    /// # Safety
    ///
    /// Called only by the memory manager, as a registered shrinker's
    /// callback.
    unsafe extern "C" fn count(
        s: *mut bindings::shrinker,
        _sc: *mut bindings::shrink_control,
    ) -> kernel::ffi::c_ulong {
        // SAFETY: By the safety requirement.
        count_result(unsafe { Self::object(s) }.count())
    }

    /// `scan_objects` of the shrinker.
    ///
    /// # Safety
    ///
    /// Called only by the memory manager, as a registered shrinker's
    /// callback, with a valid `sc`.
    unsafe extern "C" fn scan(
        s: *mut bindings::shrinker,
        sc: *mut bindings::shrink_control,
    ) -> kernel::ffi::c_ulong {
        // SAFETY: The memory manager passes a valid control for the call.
        let nr = unsafe { (*sc).nr_to_scan };
        // SAFETY: By the safety requirement.
        let obj = unsafe { Self::object(s) };
        scan_result(T::scan(obj, u64::try_from(nr).unwrap_or(u64::MAX)))
    }
}

/// A registered shrinker of one object, which it keeps alive; unregistered
/// (waiting for running callbacks) on drop, before the object is released.
///
/// # Invariants
///
/// `ptr` was returned by `shrinker_alloc` and registered with
/// `ObjectAdapter<T>`'s callbacks and `obj` as its private data; it is
/// freed exactly once, in `drop`.
pub struct ObjectShrinker<T: ShrinkObject> {
    ptr: NonNull<bindings::shrinker>,
    obj: Arc<T>,
}

// SAFETY: `shrinker_free` may be called from any thread; `T` is `Send`
// and `Sync`.
unsafe impl<T: ShrinkObject> Send for ObjectShrinker<T> {}
// SAFETY: No method takes `&self`.
unsafe impl<T: ShrinkObject> Sync for ObjectShrinker<T> {}

impl<T: ShrinkObject> ObjectShrinker<T> {
    /// Registers a shrinker named `name` for `obj` (may sleep).
    pub fn register(name: &CStr, obj: Arc<T>) -> Result<Self> {
        // SAFETY: As in `Shrinker::register`.
        let ptr = unsafe { bindings::shrinker_alloc(0, c"%s".as_char_ptr(), name.as_char_ptr()) };
        let ptr = NonNull::new(ptr).ok_or(ENOMEM)?;
        // SAFETY: `ptr` was just allocated and is not registered yet. The
        // private data is the object `Self` keeps alive until after
        // `shrinker_free`; the callbacks are functions of `T`, valid as
        // long as the module.
        unsafe {
            let s = ptr.as_ptr();
            (*s).count_objects = Some(ObjectAdapter::<T>::count);
            (*s).scan_objects = Some(ObjectAdapter::<T>::scan);
            (*s).private_data = Arc::as_ptr(&obj).cast_mut().cast();
            bindings::shrinker_register(s);
        }
        // INVARIANT: allocated and registered above, with `obj`.
        Ok(Self { ptr, obj })
    }

    /// The object it shrinks.
    pub fn object(&self) -> &Arc<T> {
        &self.obj
    }
}

impl<T: ShrinkObject> Drop for ObjectShrinker<T> {
    fn drop(&mut self) {
        // SAFETY: By the type invariant the shrinker is registered; after
        // this returns no callback runs, so `obj` may go.
        unsafe { bindings::shrinker_free(self.ptr.as_ptr()) };
    }
}
