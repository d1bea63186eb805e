// SPDX-License-Identifier: GPL-2.0

//! `/proc/sys/sunrpc/rdma_*`: the client's tunables, with the names,
//! ranges and meanings of C's `xr_tunables_table` (`transport.c`).
//!
//! - `rdma_slot_table_entries` (4..16384): the slot table of transports
//!   created after a write, and so the credits they ask for (C reads it in
//!   `xprt_setup_rdma`). A mount that reuses a transport keeps its table.
//! - `rdma_max_inline_read`, `rdma_max_inline_write` (1024..65536): the
//!   inline sizes of connections made after a write, reconnections of
//!   existing transports included (C reads them in `rpcrdma_ep_create`).
//! - `rdma_inline_write_padding` (0..PAGE_SIZE), `rdma_memreg_strategy`
//!   (0..6) and `rdma_pad_optimize` (any integer): accepted and unused, as
//!   in C. The registration strategy stays the `memreg` module parameter:
//!   `physical` lets servers read and write all client memory, which must
//!   not be one `sysctl` away. `rdma_memreg_strategy` starts at C's number
//!   of the strategy in use (5, FRWR, for `fmr`; 6, ALLPHYSICAL, for
//!   `physical`).
//!
//! The first three start at the module parameters `max_requests`,
//! `max_inline_read` and `max_inline_write`, so a setup that only sets
//! those behaves as before.

use super::reg::Strategy;
use crate::config::{Config, INLINE_MAX, INLINE_MIN, REQUESTS_MAX, REQUESTS_MIN};
use crate::rust::kext::sysctl::{Entry, IntTunable, Sysctl, Tunable};
use kernel::prelude::*;

/// C `RPCRDMA_FRWR`, the number of the FRWR strategy.
const MEMREG_FRWR: u32 = 5;
/// C `RPCRDMA_ALLPHYSICAL`.
const MEMREG_ALLPHYSICAL: u32 = 6;
/// C `RPCRDMA_BOUNCEBUFFERS` and `RPCRDMA_LAST - 1`, the range C accepts.
const MEMREG_MIN: u32 = 0;
const MEMREG_MAX: u32 = MEMREG_ALLPHYSICAL;
/// The largest `rdma_inline_write_padding` C accepts (`PAGE_SIZE`).
const PADDING_MAX: u32 = kernel::page::PAGE_SIZE as u32;

static SLOT_TABLE_ENTRIES: Tunable = Tunable::new(128, REQUESTS_MIN, REQUESTS_MAX);
static MAX_INLINE_READ: Tunable = Tunable::new(4096, INLINE_MIN, INLINE_MAX);
static MAX_INLINE_WRITE: Tunable = Tunable::new(4096, INLINE_MIN, INLINE_MAX);
static INLINE_WRITE_PADDING: Tunable = Tunable::new(0, 0, PADDING_MAX);
static MEMREG_STRATEGY: Tunable = Tunable::new(MEMREG_FRWR, MEMREG_MIN, MEMREG_MAX);
static PAD_OPTIMIZE: IntTunable = IntTunable::new(0);

/// The slot table size of a transport created now.
pub(super) fn slot_table_entries() -> u32 {
    SLOT_TABLE_ENTRIES.get()
}

/// The inline sizes (send, receive) of a connection made now: the largest
/// call we send inline (`rdma_max_inline_write`) and the largest reply we
/// receive inline (`rdma_max_inline_read`).
pub(super) fn inline_sizes() -> (u32, u32) {
    (MAX_INLINE_WRITE.get(), MAX_INLINE_READ.get())
}

/// Sets the initial values from the module parameters; call before the
/// transport class is registered, so that every transport sees them.
pub(super) fn init(cfg: &Config, strategy: Strategy) {
    SLOT_TABLE_ENTRIES.set(cfg.max_requests);
    MAX_INLINE_READ.set(cfg.max_inline_read);
    MAX_INLINE_WRITE.set(cfg.max_inline_write);
    MEMREG_STRATEGY.set(match strategy {
        // The cache registers with FRWR work requests too.
        Strategy::Fmr | Strategy::Cache => MEMREG_FRWR,
        Strategy::Physical => MEMREG_ALLPHYSICAL,
    });
}

/// Shows the tunables in `/proc/sys/sunrpc/`. Optional, as in C: without
/// them the client works with the module parameters (and says so once).
/// C registers them only with `CONFIG_SUNRPC_DEBUG`; they are always here,
/// since they are the only way to change these limits without a reload.
pub(super) fn register() -> Option<Sysctl> {
    let entries = [
        Entry::uint(c"rdma_slot_table_entries", &SLOT_TABLE_ENTRIES, 0o644),
        Entry::uint(c"rdma_max_inline_read", &MAX_INLINE_READ, 0o644),
        Entry::uint(c"rdma_max_inline_write", &MAX_INLINE_WRITE, 0o644),
        Entry::uint(c"rdma_inline_write_padding", &INLINE_WRITE_PADDING, 0o644),
        Entry::uint(c"rdma_memreg_strategy", &MEMREG_STRATEGY, 0o644),
        Entry::int(c"rdma_pad_optimize", &PAD_OPTIMIZE, 0o644),
    ];
    match Sysctl::register(c"sunrpc", &entries) {
        Ok(s) => Some(s),
        Err(_) => {
            pr_warn!("no /proc/sys/sunrpc/rdma_* tunables: the module parameters apply\n");
            None
        }
    }
}
