// SPDX-License-Identifier: GPL-2.0

//! A server connection's pool of fast-registration MRs for RDMA Reads
//! straight into a Call's pages on iWARP (C `rdma_rw_init_mrs`, the
//! queue pair's `rdma_mrs` pool). An iWARP Read Request names its sink by
//! one steering tag, which needs remote write access, so each such Read
//! goes through an MR of the pool registered over the pages it lands in
//! ([`crate::rust::rdma::verbs::Endpoint::register_page_run`]) and invalidated by the
//! Read itself (RDMA_READ_WITH_INV). The MRs are allocated when the
//! connection is accepted, sized for every Read its send queue admits, so
//! the data path allocates none.
//!
//! C header: [`include/rdma/mr_pool.h`](srctree/include/rdma/mr_pool.h).

use crate::rust::kext::spin_lock::{new_spinlock, SpinLock};
use crate::rust::rdma::mr::Mr;
use crate::rust::rdma::verbs::Pd;
use kernel::alloc::KVec;
use kernel::prelude::*;
use kernel::sync::atomic::{Atomic, Relaxed};
use kernel::sync::Arc;

/// Idle MRs of one connection, each mapping up to [`Self::pages`] pages.
///
/// # Invariants
///
/// Every MR in `idle` is allocated on `pd` and invalid: it was never
/// registered, or the RDMA Read that used its last registration completed
/// successfully (and so invalidated it). `idle` never grows beyond its
/// capacity, reserved at creation.
#[pin_data]
pub struct SinkMrPool {
    #[pin]
    idle: SpinLock<KVec<Mr>>,
    pd: Arc<Pd>,
    pages: u32,
    /// MRs allocated in all, at creation and when the pool ran dry.
    allocated: Atomic<u64>,
}

impl SinkMrPool {
    /// A pool of `count` MRs of `pages` pages each on `pd`.
    pub fn new(pd: &Arc<Pd>, pages: u32, count: usize) -> Result<Arc<Self>> {
        if pages < 2 || count == 0 {
            return Err(EINVAL);
        }
        let mut idle = KVec::with_capacity(count, GFP_KERNEL)?;
        for _ in 0..count {
            idle.push(Mr::new(pd, pages)?, GFP_KERNEL)?;
        }
        Arc::pin_init(
            pin_init!(Self {
                idle <- new_spinlock!(idle, "rpcrdma_rs::sink_pool"),
                pd: pd.clone(),
                pages,
                allocated: Atomic::new(count as u64),
            }),
            GFP_KERNEL,
        )
    }

    /// Pages one MR maps: the most one Read scatters over.
    pub fn pages(&self) -> u32 {
        self.pages
    }

    /// MRs allocated so far: the pool's own, and any made because it was
    /// empty for a moment (a completion had returned its send queue slots
    /// but not yet its MR).
    pub fn allocated(&self) -> u64 {
        self.allocated.load(Relaxed)
    }

    /// The protection domain its MRs are allocated on.
    pub(in crate::rust) fn pd(&self) -> &Arc<Pd> {
        &self.pd
    }

    /// Idle MRs now.
    pub fn idle(&self) -> usize {
        self.idle.lock().len()
    }

    /// An idle MR, or a new one if there is none (may sleep).
    pub(in crate::rust) fn take(&self) -> Result<Mr> {
        if let Some(mr) = self.idle.lock().pop() {
            return Ok(mr);
        }
        let mr = Mr::new(&self.pd, self.pages)?;
        self.allocated.add(1, Relaxed);
        Ok(mr)
    }

    /// Takes back an MR from [`Self::take`] that is invalid (see the type
    /// invariant); one beyond the pool's size is freed.
    pub(in crate::rust) fn give_back(&self, mr: Mr) {
        // INVARIANT: the caller's condition; the push never grows `idle`.
        let extra = self.idle.lock().push_within_capacity(mr).err();
        // Freed outside the lock: deregistration may sleep.
        drop(extra);
    }
}
