// SPDX-License-Identifier: GPL-2.0

//! Work requests kept for reuse (C keeps its send contexts,
//! `rpcrdma_sendctx` and `svc_rdma_send_ctxt`, on free lists for the same
//! reason): a connection that posts a Send or an RDMA Write per RPC would
//! otherwise allocate and free one per RPC.
//!
//! A [`WrPool`] holds *shells*: the allocations of completed work requests
//! whose contents (scatter/gather list, the buffers and pages it held, the
//! completion handler) were dropped, so a shell keeps nothing alive. A
//! handler names its pool ([`CompletionHandler::pool`]); building a work
//! request with such a handler takes a shell if there is one, and the
//! completion gives the allocation back once it holds the last reference
//! (see `WorkRequest::release`). Every step is a bounded list operation
//! under a lock: nothing waits and nothing allocates. A shell is kept as
//! the `Arc` it was, with the pool's reference its only one, so neither
//! giving it back nor taking it touches the reference count.

use crate::rust::kext::spin_lock::{new_spinlock, SpinLock};
use crate::rust::rdma::verbs::{CompletionHandler, WorkRequest};
use core::mem::MaybeUninit;
use kernel::alloc::KVec;
use kernel::prelude::*;
use kernel::sync::Arc;

/// The allocation of a work request whose contents were dropped.
pub(in crate::rust) type Shell<H> = Arc<MaybeUninit<WorkRequest<H>>>;

/// Up to a fixed number of work request allocations of one handler type.
/// A shell is `MaybeUninit`: freeing one (a full pool, a dropped pool)
/// frees memory and drops nothing.
///
/// # Invariants
///
/// Every shell in `free` is the only reference to its allocation.
#[pin_data]
pub struct WrPool<H: CompletionHandler> {
    #[pin]
    free: SpinLock<KVec<Shell<H>>>,
}

impl<H: CompletionHandler> WrPool<H> {
    /// A pool that keeps at most `max` allocations (room for them is
    /// reserved now, so giving one back never allocates).
    pub fn new(max: usize) -> Result<impl PinInit<Self>> {
        let free = KVec::with_capacity(max, GFP_KERNEL)?;
        Ok(pin_init!(Self {
            free <- new_spinlock!(free, "rpcrdma_rs::wr_pool"),
        }))
    }

    /// A kept allocation, if there is one: the only reference to it.
    pub(in crate::rust) fn take(&self) -> Option<Shell<H>> {
        self.free.lock().pop()
    }

    /// Keeps `shell` if there is room; a full pool frees it.
    ///
    /// # Safety
    ///
    /// `shell` is the only reference to its allocation.
    pub(in crate::rust) unsafe fn put(&self, shell: Shell<H>) {
        // INVARIANT: `shell` is the only reference (the caller's
        // requirement).
        let rejected = self.free.lock().push_within_capacity(shell).err();
        // Freed outside the lock.
        drop(rejected);
    }

    /// Allocations kept now (for tests).
    pub fn kept(&self) -> usize {
        self.free.lock().len()
    }
}
