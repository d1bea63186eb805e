// SPDX-License-Identifier: GPL-2.0

//! Counts of live FFI objects, so module unload and the KUnit suites can prove
//! that every C object the layer created was released.
//!
//! Every wrapper that owns a C object (CM identifier, protection domain,
//! completion queue, queue pair, DMA buffer, posted work request) increments
//! its counter when it takes ownership and decrements it when it releases the
//! object. The counters are per module: the KUnit module has its own.

use crate::rust::kext::percpu::{self, PerCpuCounter};

/// The kinds of objects that are counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `struct rdma_cm_id`.
    CmId = 0,
    /// `struct ib_pd`.
    Pd = 1,
    /// `struct ib_cq`.
    Cq = 2,
    /// `struct ib_qp` created on a CM identifier.
    Qp = 3,
    /// A DMA-mapped buffer.
    MappedBuf = 4,
    /// A work request posted to a queue pair and not yet completed,
    /// through a [`WorkRequest`] or a read context. The rings of
    /// preallocated contexts (send and receive rings, receive contexts,
    /// send pools) count their own posted work requests per CPU and check
    /// the count when they are dropped, leaking their contexts (which
    /// keeps their buffers counted here) rather than freeing them while
    /// the device may reach them: counted again here, every post and
    /// completion of theirs would add twice.
    ///
    /// [`WorkRequest`]: crate::rust::rdma::verbs::WorkRequest
    PostedWr = 5,
    /// A fast-registration memory region.
    Mr = 6,
    /// DMA mappings of the "physical" registration strategy.
    PhysMap = 7,
    /// A Reply's page whose reference a send context holds until its Send
    /// completes (`reply_pages.rs`, `HeldPages`).
    HeldPage = 8,
}

const KINDS: usize = 9;

/// The counts: updated on every post and completion, from every CPU, so
/// kept per CPU (an object may be counted in on one CPU and out on another;
/// only the sum means anything).
static COUNTS: [PerCpuCounter; KINDS] = percpu::counters::<{ percpu::LIVE_FIRST }, KINDS>();
const _: () = assert!(percpu::LIVE_FIRST as usize + KINDS <= percpu::SVC_SYSCTL_FIRST as usize);

pub(crate) fn inc(kind: Kind) {
    COUNTS[kind as usize].add(1);
}

pub(crate) fn dec(kind: Kind) {
    COUNTS[kind as usize].add(-1);
}

/// Counts `n` more live objects of `kind` (made together).
pub(crate) fn add(kind: Kind, n: usize) {
    COUNTS[kind as usize].add(n as i64);
}

/// Counts `n` fewer live objects of `kind` (freed together).
pub(crate) fn sub(kind: Kind, n: usize) {
    COUNTS[kind as usize].add(-(n as i64));
}

/// Number of live objects of `kind`.
pub fn count(kind: Kind) -> i64 {
    COUNTS[kind as usize].sum()
}

/// Total number of live objects of every kind.
pub fn total() -> i64 {
    COUNTS.iter().map(|c| c.sum()).sum()
}
