// SPDX-License-Identifier: GPL-2.0

//! The client's counters: a transport's mountstats counters (`Stats`, the
//! `xprt: rdma` line) and how the transport adds to them and to the
//! module-wide counts of each strategy (`Counter`).

use crate::rust::kext::percpu::PerCpuCount;
use kernel::prelude::*;
use kernel::sync::atomic::{Atomic, Relaxed};

/// Counters of one transport (mountstats and debugging). Those of the
/// `xprt: rdma` line count what the C module counts at the equivalent
/// point, in its unit; `Documentation/admin-guide/mountstats.rst` says
/// where each one is bumped and what differs.
pub(super) struct Stats {
    /// Read segments (MRs) of Read chunks and long calls.
    pub(super) read_chunk_count: PerCpuCount,
    /// Write chunk segments, the write pad segment included.
    pub(super) write_chunk_count: PerCpuCount,
    /// Reply chunk segments.
    pub(super) reply_chunk_count: PerCpuCount,
    /// Bytes offered to the server to write: Write and Reply segments.
    pub(super) total_rdma_request: PerCpuCount,
    /// Bytes the server wrote: Write chunks and Reply chunks of replies.
    pub(super) total_rdma_reply: PerCpuCount,
    /// Bytes of the page list and tail of inline calls copied behind the
    /// head into the Send buffer.
    pub(super) pullup_copy_count: PerCpuCount,
    /// Bytes of inline replies copied into the receive page list.
    pub(super) fixup_copy_count: PerCpuCount,
    /// C's buffers registered at send time; this transport has none (its
    /// Send buffers are mapped with the connection): always 0.
    pub(super) hardway_register_count: PerCpuCount,
    /// Marshaling attempts that failed, transient shortages (MRs, send
    /// queue room) included: C counts every failed `rpcrdma_marshal_req`.
    pub(super) failed_marshal_count: PerCpuCount,
    pub(super) bad_reply_count: PerCpuCount,
    pub(super) nomsg_call_count: PerCpuCount,
    /// MRs whose invalidation did not complete successfully: their state
    /// is unknown, so they are deregistered instead of reused.
    pub(super) mrs_recycled: PerCpuCount,
    /// MRs deregistered without invalidation because there was no memory
    /// or no queue pair to invalidate them with.
    pub(super) mrs_orphaned: PerCpuCount,
    pub(super) mrs_allocated: PerCpuCount,
    /// MRs invalidated with a LOCAL_INV work request.
    pub(super) local_inv_needed: PerCpuCount,
    /// Atomic: its first bump says so once (`Conn::get_mr`).
    pub(super) mr_pool_empty: Atomic<u64>,
    /// Calls (and backchannel replies) that found no room in the send
    /// queue and were retried: C's `empty_sendctx_q`, whose ring of send
    /// contexts stands for the same room.
    pub(super) empty_sendctx_q: PerCpuCount,
}

impl Stats {
    pub(super) fn new() -> Result<Self> {
        let z = PerCpuCount::new;
        Ok(Self {
            read_chunk_count: z()?,
            write_chunk_count: z()?,
            reply_chunk_count: z()?,
            total_rdma_request: z()?,
            total_rdma_reply: z()?,
            pullup_copy_count: z()?,
            fixup_copy_count: z()?,
            hardway_register_count: z()?,
            failed_marshal_count: z()?,
            bad_reply_count: z()?,
            nomsg_call_count: z()?,
            mrs_recycled: z()?,
            mrs_orphaned: z()?,
            mrs_allocated: z()?,
            local_inv_needed: z()?,
            mr_pool_empty: Atomic::new(0),
            empty_sendctx_q: z()?,
        })
    }
}

/// A counter of the client's: a kernel atomic (the module-wide counts of
/// each strategy), or a per-CPU count (a transport's mountstats counters,
/// added to on every RPC, where an atomic is a helper call and a locked
/// instruction on a line every CPU writes; C adds to them with no
/// synchronisation at all).
pub(crate) trait Counter {
    /// Adds `n`.
    fn add_n(&self, n: u64);
}

impl Counter for Atomic<u64> {
    fn add_n(&self, n: u64) {
        self.add(n, Relaxed);
    }
}

impl Counter for PerCpuCount {
    #[inline]
    fn add_n(&self, n: u64) {
        self.add(i64::try_from(n).unwrap_or(i64::MAX));
    }
}

/// Adds `n` to a counter.
pub(crate) fn add(c: &impl Counter, n: u64) {
    c.add_n(n);
}

/// Adds `n` to a counter unless it is zero: most calls have no Read
/// chunk, no Reply chunk and nothing pulled up behind the head, most
/// replies nothing copied into pages, and an atomic add is a call to a
/// helper.
pub(crate) fn add_some(c: &impl Counter, n: u64) {
    if n != 0 {
        add(c, n);
    }
}

/// Adds one to a counter.
pub(super) fn bump(c: &impl Counter) {
    c.add_n(1);
}
