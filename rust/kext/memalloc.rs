// SPDX-License-Identifier: GPL-2.0

//! Allocation scopes of the current task (`memalloc_noio_save` and
//! `memalloc_noio_restore`).
//!
//! The client transport advertises swap (`enable_swap` succeeds), so its
//! completion path must not wait on memory reclaim: reclaim may start
//! writeback over NFS, or run NFS shrinkers, that wait for the very reply
//! the completion handler is delivering. Inside a [`NoIoScope`] every
//! allocation of the task behaves as `GFP_NOIO` (no I/O, no filesystem
//! reclaim), whatever flags the caller passed, as C's preallocation and
//! `XPRTRDMA_GFP_FLAGS` avoid on the same path.
//!
//! C header: [`include/linux/sched/mm.h`](srctree/include/linux/sched/mm.h).

use crate::rust::bindings;
use core::marker::PhantomData;

/// While alive, allocations of the current task do no I/O and no
/// filesystem reclaim.
///
/// # Invariants
///
/// `flags` is what `memalloc_noio_save` returned on the task that owns this
/// value; scopes are restored in reverse order of creation (they are
/// neither `Send` nor movable across tasks, and live on the stack of the
/// function that created them).
pub struct NoIoScope {
    flags: u32,
    /// Restoring must happen on the task that saved: not `Send`.
    _not_send: PhantomData<*mut ()>,
}

impl NoIoScope {
    /// Enters the scope; it ends when the value is dropped.
    #[must_use = "the scope ends when this value is dropped"]
    pub fn new() -> Self {
        // SAFETY: Only updates the current task's flags; callable from any
        // process context.
        let flags = unsafe { bindings::rpcrdma_rs_memalloc_noio_save() };
        // INVARIANT: saved on the current task just now.
        Self {
            flags,
            _not_send: PhantomData,
        }
    }
}

impl Default for NoIoScope {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for NoIoScope {
    fn drop(&mut self) {
        // SAFETY: `flags` came from the matching save on this task (type
        // invariant), and inner scopes were dropped first (they were
        // created later, on the stack).
        unsafe { bindings::rpcrdma_rs_memalloc_noio_restore(self.flags) };
    }
}
