// SPDX-License-Identifier: GPL-2.0

//! `/proc/sys/sunrpc/svc_rdma/`: the server's limits, the counters C
//! `svc_rdma.c` shows there, plus ours. Reading a counter gives its value;
//! writing anything resets it (as C `svcrdma_counter_handler`).

use crate::rust::kext::percpu::{self, PerCpuCounter};
use crate::rust::kext::sysctl::{Entry, Sysctl, Tunable};
use core::ffi::CStr;
use kernel::prelude::*;

/// Counters of `/proc/sys/sunrpc/svc_rdma/`, in the order of [`NAMES`].
#[derive(Clone, Copy, Debug)]
#[repr(usize)]
pub(super) enum Stat {
    /// Calls received (`rdma_stat_recv`).
    Recv,
    /// RDMA Read work requests posted (`rdma_stat_read`).
    Read,
    /// RDMA Write work requests posted (`rdma_stat_write`).
    Write,
    /// Waits for a send queue slot (`rdma_stat_sq_starve`).
    SqStarve,
    /// Bytes pulled with RDMA Read.
    ReadBytes,
    /// Bytes pushed with RDMA Write.
    WriteBytes,
    /// Replies sent through a Reply chunk.
    ReplyChunk,
    /// `RDMA_ERROR` replies sent.
    ErrSent,
    /// Backchannel Calls sent.
    BcCalls,
    /// Backchannel Replies received.
    BcReplies,
    /// Buffers reused from the buffer cache.
    CacheHit,
    /// Buffers allocated and mapped.
    CacheMiss,
    /// Backchannel transports set up.
    BcSetup,
    /// Backchannel Calls whose Send failed.
    BcSendErr,
    /// Calls without Read chunks copied out of their Receive buffer
    /// because requests held as many Receives as may be held: a count
    /// that keeps rising says requests (deferred ones, say) keep their
    /// Receives long.
    CallsCopied,
}

/// Adds `n` to a counter of `/proc/sys/sunrpc/svc_rdma/`.
pub(super) fn stat_add(stat: Stat, n: u64) {
    if let Some(v) = VALUES.get(stat as usize) {
        v.count(n);
    }
}

/// The counters, in the order of [`NAMES`].
const COUNTERS: usize = 15;

/// Names of the counters (C's first, then this module's own).
const NAMES: [&CStr; COUNTERS] = [
    c"rdma_stat_recv",
    c"rdma_stat_read",
    c"rdma_stat_write",
    c"rdma_stat_sq_starve",
    c"rdma_stat_read_bytes",
    c"rdma_stat_write_bytes",
    c"rdma_stat_reply_chunk",
    c"rdma_stat_err_sent",
    c"rdma_stat_bc_calls",
    c"rdma_stat_bc_replies",
    c"rdma_stat_cache_hit",
    c"rdma_stat_cache_miss",
    c"rdma_stat_bc_setup",
    c"rdma_stat_bc_send_err",
    c"rdma_stat_calls_copied",
];

/// Files C keeps for compatibility and never updates: they read 0 and
/// accept only 0 (C: `proc_dointvec_minmax` over `svcrdma_stat_unused`
/// with the range 0..0).
const UNUSED_NAMES: [&CStr; 5] = [
    c"rdma_stat_rq_starve",
    c"rdma_stat_rq_poll",
    c"rdma_stat_rq_prod",
    c"rdma_stat_sq_poll",
    c"rdma_stat_sq_prod",
];

/// The value behind every name of [`UNUSED_NAMES`].
static UNUSED: Tunable = Tunable::new(0, 0, 0);

/// Counter values, in the order of [`NAMES`]: per CPU, as C's
/// `percpu_counter`s, since nfsd threads on every CPU add to them per RPC.
static VALUES: [PerCpuCounter; COUNTERS] =
    percpu::counters::<{ percpu::SVC_SYSCTL_FIRST }, COUNTERS>();
const _: () =
    assert!(percpu::SVC_SYSCTL_FIRST as usize + COUNTERS <= percpu::SVC_PATH_FIRST as usize);

/// Registers the table: `limits` first (the transport's tunables), then
/// the counters and C's unused files. Optional: a failure only costs the
/// files (and says so once).
pub(super) fn register(limits: &[Entry]) -> Option<Sysctl> {
    let table = || -> Result<Sysctl> {
        let mut entries =
            KVec::with_capacity(limits.len() + COUNTERS + UNUSED_NAMES.len(), GFP_KERNEL)?;
        for e in limits {
            entries.push(*e, GFP_KERNEL)?;
        }
        for (name, value) in NAMES.iter().copied().zip(VALUES.iter()) {
            entries.push(Entry::counter(name, value, 0o644), GFP_KERNEL)?;
        }
        for name in UNUSED_NAMES.iter().copied() {
            entries.push(Entry::uint(name, &UNUSED, 0o644), GFP_KERNEL)?;
        }
        Sysctl::register(c"sunrpc/svc_rdma", &entries)
    };
    table()
        .inspect_err(|_| pr_warn!("svcrdma: no /proc/sys/sunrpc/svc_rdma\n"))
        .ok()
}
