// SPDX-License-Identifier: GPL-2.0

//! The server's use of the registration cache ([`super::regcache`]:
//! per device, slab-backed size classes whose buffers keep their DMA
//! mapping and, for RDMA Read sinks on devices that need it, their memory
//! registration across requests).
//!
//! This file holds the policy: which classes exist and which one a use
//! takes. Sends use the smallest Send class that fits (4 KiB covers the
//! default inline size; larger negotiated inline sizes use the 64 KiB
//! class, shared with RDMA Write sources); RDMA Write sources and Read sinks
//! are [`PIECE`]-sized. A buffer comes back from the completion handler of
//! the work request that used it (nothing is allocated there, a full list
//! simply drops the buffer) or, for RDMA Read sinks, once their data was
//! copied out. `svc_buf_cache=0` turns reuse off (every use allocates,
//! maps, registers if needed, and frees); hits and misses are also counted
//! in `/proc/sys/sunrpc/svc_rdma/rdma_stat_cache_{hit,miss}`.

use super::regcache::{CacheUser, ClassSpec, RegCache};
use super::rw::PIECE;
use super::stats::{stat_add, Stat};
use crate::config::Config;
use crate::rust::rdma::cm::CmId;
use crate::rust::rdma::verbs::{DmaDir, Endpoint, MappedBuf, Pd};
use kernel::prelude::*;
use kernel::sync::Arc;

/// Idle buffers kept per class and device (at most 4 MiB per 64 KiB class).
const CACHE_MAX: usize = 64;

/// Small Send buffers: the default inline size.
const SEND_SMALL: usize = 4096;

/// The classes, in [`Class::index`] order.
const SPECS: [ClassSpec; 3] = [
    ClassSpec {
        name: c"rpcrdma_rs_svc_tx4k",
        size: SEND_SMALL,
        dir: DmaDir::ToDevice,
        read_sink: false,
    },
    ClassSpec {
        name: c"rpcrdma_rs_svc_tx64k",
        size: PIECE,
        dir: DmaDir::ToDevice,
        read_sink: false,
    },
    ClassSpec {
        name: c"rpcrdma_rs_svc_rd64k",
        size: PIECE,
        dir: DmaDir::FromDevice,
        read_sink: true,
    },
];

/// Creates the module's registration cache (slab caches and shrinker).
pub(super) fn module_init(cfg: &Config) -> Result<RegCache> {
    let enabled = cfg.svc_buf_cache;
    let force = cfg.force_mr;
    let rc = RegCache::new(&SPECS, enabled, force, CACHE_MAX)
        .inspect_err(|e| pr_err!("svcrdma: cannot create the registration cache: {:?}\n", e))?;
    pr_info!(
        "svcrdma: registration cache {} (force_mr={})\n",
        if enabled { "on" } else { "off" },
        force
    );
    Ok(rc)
}

/// What a buffer is for.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Class {
    /// A Send (inline Reply, error, backchannel Call).
    Send,
    /// An RDMA Write source.
    WritePiece,
    /// An RDMA Read sink.
    ReadPiece,
}

/// A buffer taken from the cache, with the class it goes back to.
pub(super) struct Taken {
    pub(super) buf: Arc<MappedBuf>,
    pub(super) slot: usize,
    /// The buffer's sink MR must be registered before its first use.
    pub(super) needs_registration: bool,
}

/// One connection's handle on its device's cache.
pub(super) struct BufCache {
    user: CacheUser,
}

impl BufCache {
    /// The cache of the device `id` is bound to; with `own_pd`, one of
    /// this connection's own, on a protection domain of its own.
    pub(super) fn attach(id: &CmId, own_pd: bool) -> Result<Arc<Self>> {
        let user = if own_pd {
            CacheUser::attach_own(id)?
        } else {
            CacheUser::attach(id)?
        };
        Ok(Arc::new(Self { user }, GFP_KERNEL)?)
    }

    /// The protection domain of the connection's queue pair: the
    /// device's shared one, or the connection's own.
    pub(super) fn pd(&self) -> &Arc<Pd> {
        self.user.pd()
    }

    fn slot(&self, class: Class, len: usize) -> Result<usize> {
        let fits = |i: usize| self.user.class_size(i).is_some_and(|s| len <= s);
        let slot = match class {
            Class::Send if fits(0) => 0,
            Class::Send | Class::WritePiece => 1,
            Class::ReadPiece => 2,
        };
        if fits(slot) {
            Ok(slot)
        } else {
            Err(EMSGSIZE)
        }
    }

    /// A buffer of `class` holding at least `len` bytes, mapped on `ep`'s
    /// device.
    pub(super) fn get(&self, ep: &Endpoint, class: Class, len: usize) -> Result<Taken> {
        let slot = self.slot(class, len.max(1))?;
        let got = self.user.get(slot, ep)?;
        stat_add(
            if got.hit {
                Stat::CacheHit
            } else {
                Stat::CacheMiss
            },
            1,
        );
        Ok(Taken {
            buf: got.buf,
            slot,
            needs_registration: got.needs_registration,
        })
    }

    /// Gives a buffer back (any context; never allocates).
    pub(super) fn put(&self, buf: Arc<MappedBuf>, slot: usize) {
        self.user.put(slot, buf);
    }
}
