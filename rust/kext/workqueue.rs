// SPDX-License-Identifier: GPL-2.0

//! Workqueues owned by this module (`alloc_workqueue`), for the work items
//! it still needs (the registration cache's deferred deregistration).
//!
//! A work function is module text. Work queued on a system workqueue may
//! still be running, or be about to return through this module, when the
//! module is unloaded; a queue of our own is drained and destroyed before
//! that (`destroy_workqueue` waits until every queued item has run and
//! returned), so unload needs no guessed sleep.
//!
//! C header: [`include/linux/workqueue.h`](srctree/include/linux/workqueue.h).

use crate::rust::bindings;
use core::ptr::NonNull;
use kernel::prelude::*;
use kernel::workqueue::Queue;

/// A workqueue allocated by this module, drained and destroyed on drop.
///
/// # Invariants
///
/// `ptr` was returned by `alloc_workqueue` and is destroyed exactly once, in
/// `drop`.
pub struct OwnedQueue {
    ptr: NonNull<kernel::bindings::workqueue_struct>,
}

// SAFETY: Workqueue operations are thread-safe.
unsafe impl Send for OwnedQueue {}
// SAFETY: See `Send`.
unsafe impl Sync for OwnedQueue {}

impl OwnedQueue {
    /// Allocates a workqueue named `name` (shown in `ps` as its rescuer
    /// and in `/sys/bus/workqueue` debugging).
    pub fn new(name: &CStr) -> Result<Self> {
        // SAFETY: `name` is a NUL-terminated string, copied by the call.
        let ptr = unsafe { bindings::rpcrdma_rs_alloc_wq(name.as_char_ptr()) };
        let ptr = NonNull::new(ptr.cast::<kernel::bindings::workqueue_struct>()).ok_or(ENOMEM)?;
        // INVARIANT: allocated above.
        Ok(Self { ptr })
    }

    /// The C queue, for work items queued through bindings.
    pub(in crate::rust) fn as_raw(&self) -> *mut kernel::bindings::workqueue_struct {
        self.ptr.as_ptr()
    }

    /// The queue, to enqueue work items on.
    pub fn queue(&self) -> &Queue {
        // SAFETY: By the type invariant the queue is valid until `drop`,
        // which cannot run while `self` is borrowed.
        unsafe { Queue::from_raw(self.ptr.as_ptr()) }
    }
}

impl Drop for OwnedQueue {
    fn drop(&mut self) {
        // SAFETY: By the type invariant the queue is live and destroyed only
        // here. `destroy_workqueue` drains it first: when it returns, every
        // item queued on it has finished, including its return through this
        // module's text.
        unsafe { kernel::bindings::destroy_workqueue(self.ptr.as_ptr()) };
    }
}
