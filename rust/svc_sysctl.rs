// SPDX-License-Identifier: GPL-2.0

//! `/proc/sys/sunrpc/svc_rdma/`: the server's limits (read-only) and the
//! counters C `svc_rdma.c` shows there, plus ours. Reading a counter gives
//! its value; writing anything resets it (as C `svcrdma_counter_handler`).
//!
//! C header: [`include/linux/sysctl.h`](srctree/include/linux/sysctl.h).

use super::bindings;
use super::xprt_class::Name;
use core::ffi::CStr;
use core::ptr::{null_mut, NonNull};
use kernel::ffi::{c_int, c_void};
use kernel::prelude::*;
use kernel::sync::atomic::{Atomic, Relaxed};

/// The counters, in the order of [`NAMES`].
pub(super) const COUNTERS: usize = 14;

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
];

/// Counter values, then `max_requests` and `max_req_size`.
static VALUES: [Atomic<u64>; COUNTERS + 2] = [const { Atomic::new(0) }; COUNTERS + 2];

/// Adds `n` to counter `i` (an index below [`COUNTERS`]).
pub(super) fn add(i: usize, n: u64) {
    if let Some(v) = VALUES.get(i) {
        v.fetch_add(n, Relaxed);
    }
}

/// Reads a value as text; a write resets it (only counters are writable).
///
/// # Safety
///
/// Called by the sysctl core with an entry of [`Table`], its buffer of
/// `*lenp` bytes and its position.
unsafe extern "C" fn handler(
    ctl: *const bindings::ctl_table,
    write: c_int,
    buffer: *mut c_void,
    lenp: *mut usize,
    ppos: *mut bindings::loff_t,
) -> c_int {
    // SAFETY: Every entry's `data` is an element of `VALUES`.
    let value = unsafe { &*(*ctl).data.cast::<Atomic<u64>>() };
    if write != 0 {
        value.store(0, Relaxed);
        return 0;
    }
    // A u64 and its newline take at most 21 bytes.
    let mut tmp = Name::<24>::new();
    tmp.set(format_args!("{}\n", value.load(Relaxed)));
    let text = tmp.as_bytes();
    // SAFETY: `ppos` and `lenp` are the caller's; `buffer` holds `*lenp`
    // bytes.
    unsafe {
        let pos = usize::try_from(*ppos).unwrap_or(usize::MAX);
        let Some(rest) = text.get(pos..).filter(|r| !r.is_empty()) else {
            *lenp = 0;
            return 0;
        };
        let n = rest.len().min(*lenp);
        core::ptr::copy_nonoverlapping(rest.as_ptr(), buffer.cast::<u8>(), n);
        *lenp = n;
        *ppos += n as bindings::loff_t;
    }
    0
}

// `CStrExt::as_char_ptr` is not `const`; the pointer is only handed to C.
#[allow(clippy::disallowed_methods)]
const fn entry(name: &'static CStr, i: usize, mode: u16) -> bindings::ctl_table {
    bindings::ctl_table {
        procname: name.as_ptr().cast(),
        data: (&raw const VALUES[i]).cast_mut().cast(),
        maxlen: core::mem::size_of::<u64>() as c_int,
        mode,
        proc_handler: Some(handler),
        poll: null_mut(),
        extra1: null_mut(),
        extra2: null_mut(),
    }
}

/// The table: the two limits, then the counters.
struct Table([bindings::ctl_table; COUNTERS + 2]);

// SAFETY: Never written; the sysctl core only reads it, and the values it
// points to are atomics.
unsafe impl Sync for Table {}

static TABLE: Table = Table({
    let mut all = [entry(c"max_requests", COUNTERS, 0o444); COUNTERS + 2];
    all[1] = entry(c"max_req_size", COUNTERS + 1, 0o444);
    let mut i = 0;
    while i < COUNTERS {
        all[i + 2] = entry(NAMES[i], i, 0o644);
        i += 1;
    }
    all
});

/// The registered table.
///
/// # Invariants
///
/// `header` came from `register_sysctl_sz` and is unregistered in `drop`.
pub(super) struct Sysctl {
    header: NonNull<bindings::ctl_table_header>,
}

// SAFETY: The header is only handed back to the sysctl core.
unsafe impl Send for Sysctl {}
// SAFETY: See `Send`.
unsafe impl Sync for Sysctl {}

impl Sysctl {
    /// Registers the table with the server's limits. Optional: a failure
    /// only costs the files (and says so once).
    pub(super) fn register(max_requests: u32, max_req_size: u32) -> Option<Self> {
        if let (Some(r), Some(s)) = (VALUES.get(COUNTERS), VALUES.get(COUNTERS + 1)) {
            r.store(u64::from(max_requests), Relaxed);
            s.store(u64::from(max_req_size), Relaxed);
        }
        // SAFETY: The table is a static that outlives the registration.
        let header = unsafe {
            bindings::register_sysctl_sz(
                c"sunrpc/svc_rdma".as_char_ptr().cast(),
                TABLE.0.as_ptr(),
                TABLE.0.len(),
            )
        };
        let Some(header) = NonNull::new(header) else {
            pr_warn!("svcrdma: no /proc/sys/sunrpc/svc_rdma\n");
            return None;
        };
        // INVARIANT: Registered above.
        Some(Self { header })
    }
}

impl Drop for Sysctl {
    fn drop(&mut self) {
        // SAFETY: Registered by the type invariant; after this no handler
        // runs (the sysctl core waits for running ones).
        unsafe { bindings::unregister_sysctl_table(self.header.as_ptr()) };
    }
}
