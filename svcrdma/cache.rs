// SPDX-License-Identifier: GPL-2.0

//! A per-connection cache of DMA-mapped buffers (the registration cache of
//! section 4.3 of the NFS/RDMA read/write design notes, for this
//! transport's bounce buffers).
//!
//! Every RDMA Read sink, RDMA Write source and Send buffer is a [`DmaBuf`]
//! allocated and mapped on the connection's device. Instead of unmapping
//! and freeing each one when its work request completes, up to
//! [`CACHE_MAX`] buffers per class are kept mapped and handed out again:
//! Send buffers (the negotiated inline size) and Read/Write pieces
//! ([`PIECE`] bytes). A buffer comes back from the completion handler of
//! the work request that used it (softirq context: nothing is allocated
//! there, a full list simply drops the buffer) or, for RDMA Read sinks,
//! once their data was copied out. The module parameter `svc_buf_cache=0`
//! turns the cache off; hits and misses are counted in
//! `/proc/sys/sunrpc/svc_rdma/rdma_stat_cache_{hit,miss}`.

use super::rw::PIECE;
use crate::rdma::svc::{buf_cache_enabled, stat_add, Stat};
use crate::rdma::verbs::{DmaBuf, DmaDir, Endpoint};
use kernel::alloc::KVec;
use kernel::new_spinlock_irq;
use kernel::prelude::*;
use kernel::sync::{Arc, SpinLockIrq};

/// Buffers kept per class and connection (at most 4 MiB of pieces).
const CACHE_MAX: usize = 64;

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

struct Lists {
    send: KVec<Arc<DmaBuf>>,
    write: KVec<Arc<DmaBuf>>,
    read: KVec<Arc<DmaBuf>>,
}

/// The cache of one connection.
#[pin_data]
pub(super) struct BufCache {
    enabled: bool,
    send_len: usize,
    #[pin]
    lists: SpinLockIrq<Lists>,
}

impl BufCache {
    /// A cache for Send buffers of `send_len` bytes and pieces.
    pub(super) fn new(send_len: usize) -> Result<Arc<Self>> {
        let enabled = buf_cache_enabled();
        let cap = if enabled { CACHE_MAX } else { 0 };
        let lists = Lists {
            send: KVec::with_capacity(cap, GFP_KERNEL)?,
            write: KVec::with_capacity(cap, GFP_KERNEL)?,
            read: KVec::with_capacity(cap, GFP_KERNEL)?,
        };
        Arc::pin_init(
            pin_init!(Self {
                enabled,
                send_len: send_len.max(1),
                lists <- new_spinlock_irq!(lists, "svcrdma::buf_cache"),
            }),
            GFP_KERNEL,
        )
    }

    fn shape(&self, class: Class) -> (usize, DmaDir) {
        match class {
            Class::Send => (self.send_len, DmaDir::ToDevice),
            Class::WritePiece => (PIECE, DmaDir::ToDevice),
            Class::ReadPiece => (PIECE, DmaDir::FromDevice),
        }
    }

    /// A buffer of `class` holding at least `len` bytes.
    pub(super) fn get(&self, ep: &Endpoint, class: Class, len: usize) -> Result<Arc<DmaBuf>> {
        let (size, dir) = self.shape(class);
        if !self.enabled || len > size {
            return ep.alloc_buf(len.max(1), dir);
        }
        let hit = {
            let mut l = self.lists.lock();
            match class {
                Class::Send => l.send.pop(),
                Class::WritePiece => l.write.pop(),
                Class::ReadPiece => l.read.pop(),
            }
        };
        match hit {
            Some(b) => {
                stat_add(Stat::CacheHit, 1);
                Ok(b)
            }
            None => {
                stat_add(Stat::CacheMiss, 1);
                ep.alloc_buf(size, dir)
            }
        }
    }

    /// Gives a buffer back (any context; never allocates).
    pub(super) fn put(&self, buf: &Arc<DmaBuf>, class: Class) {
        let (size, dir) = self.shape(class);
        if !self.enabled || buf.len() != size || buf.dir() != dir {
            return;
        }
        let mut l = self.lists.lock();
        let list = match class {
            Class::Send => &mut l.send,
            Class::WritePiece => &mut l.write,
            Class::ReadPiece => &mut l.read,
        };
        // A full list drops the buffer (unmapped when its last user goes).
        let _ = list.push_within_capacity(buf.clone());
    }
}
