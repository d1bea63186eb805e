// SPDX-License-Identifier: GPL-2.0

//! The send queue gate and the pooled Send buffers of a client connection
//! (C `rpcrdma_sendctx` and the `sc_*` accounting of `verbs.c`).

use super::conn::Conn;
use super::reg::add;
use super::transport::bump;
use crate::rust::rdma::verbs::{
    CompletionHandler, DmaDir, MappedBuf, MappedPage, Segment as SgSegment, SgEntry,
    WorkCompletion, WorkRequest,
};
use crate::rust::rdma::wr_pool::WrPool;
use kernel::alloc::KVec;
use kernel::prelude::*;
use kernel::sync::atomic::{Atomic, Relaxed};
use kernel::sync::Arc;

/// The send queue slots of a connection (its gate): every work request
/// is posted with a slot reserved for it, so the queue never overflows,
/// and work posted from completion context (LOCAL_INV chains, batched
/// invalidations) never has to find room: its slots are reserved up front,
/// when the MR is registered.
///
/// A slot of the hardware queue is free again only once a *signaled* work
/// request posted at or after it has completed. So slots are given back
/// only from the completion of a signaled request, and only for requests
/// posted before it: a request's REG_MRs and its Send by the Send's
/// completion, a LOCAL_INV chain by its last (signaled) LOCAL_INV. A Send
/// posted unsignaled (`Conn::send_batch`) gives its slots back when the
/// next signaled Send of the batch completes, which runs its handler. Each MR
/// is registered with two slots, its REG_MR's and the one its later
/// LOCAL_INV uses (or which is given back if the server invalidates it
/// remotely). Slots therefore never fall short of what the hardware queue
/// holds.
///
/// A sender that finds too few slots fails with `ENOBUFS`, which sunrpc
/// retries after a short delay (`call_transmit_status`), as it does when
/// the MR pool is empty; nothing fails with EIO.
pub(super) struct SendSlots {
    free: Atomic<u32>,
}

impl SendSlots {
    pub(super) fn new(depth: u32) -> Self {
        Self {
            free: Atomic::new(depth),
        }
    }

    /// Takes `n` slots if that many are free.
    pub(super) fn try_take(&self, n: u32) -> bool {
        let mut cur = self.free.load(Relaxed);
        loop {
            let Some(left) = cur.checked_sub(n) else {
                return false;
            };
            match self.free.cmpxchg(cur, left, Relaxed) {
                Ok(_) => return true,
                Err(now) => cur = now,
            }
        }
    }

    /// Gives back `n` slots taken with [`Self::try_take`].
    pub(super) fn give(&self, n: u32) {
        self.free.add(n, Relaxed);
    }
}

/// The pooled Send buffers of a connection that no kept work request
/// allocation holds (those made at connect, until their first Send; see
/// [`SendDone`]), all of the negotiated inline send size, kept with that
/// size: giving one back then needs no look at the connection's
/// parameters (and their lock) on every Send.
pub(super) struct SendBufs {
    bufs: KVec<Arc<MappedBuf>>,
    /// The size of the buffers (0 until the connection is negotiated).
    len: usize,
}

impl SendBufs {
    /// An empty pool with room for `capacity` buffers.
    pub(super) fn with_capacity(capacity: usize) -> Result<Self> {
        Ok(Self {
            bufs: KVec::with_capacity(capacity, GFP_KERNEL)?,
            len: 0,
        })
    }

    /// Sets the size of the buffers, once negotiated.
    pub(super) fn set_len(&mut self, len: usize) {
        self.len = len;
    }

    /// Keeps `buf` if it has the pool's size and there is room; gives it
    /// back otherwise.
    pub(super) fn put(&mut self, buf: Arc<MappedBuf>) -> core::result::Result<(), Arc<MappedBuf>> {
        if buf.len() != self.len {
            return Err(buf);
        }
        self.bufs.push_within_capacity(buf).map_err(|e| e.0)
    }
}

/// Send queue slots an MR is registered with: its REG_MR's, and its
/// LOCAL_INV's.
pub(super) const SLOTS_PER_MR: u32 = 2;

/// Send completion: errors lose the connection. The request's buffer
/// stays with its allocation in the connection's work request pool
/// (`KEEPS_BUF`), for the next Send built in it.
pub(super) struct SendDone {
    conn: Arc<Conn>,
    /// Send queue slots this completion frees: the Send's, and those of
    /// the REG_MRs posted before it.
    slots: u32,
}

impl CompletionHandler for SendDone {
    fn complete(&self, _wr: &Arc<WorkRequest<Self>>, wc: &WorkCompletion) {
        // Flushed or not, the Send and everything before it left the queue.
        self.conn.slots.give(self.slots);
        if !wc.is_ok() && !wc.is_flush() && !self.conn.closing.load(Relaxed) {
            crate::pr_warn_ratelimited!("send failed: status {}\n", wc.status);
            self.conn.xprt.force_disconnect();
        }
    }

    fn pool(&self) -> Option<&WrPool<Self>> {
        Some(&self.conn.send_wrs)
    }

    // The Send buffer stays with the request's allocation: the next Send
    // takes both with one lock (C's `rpcrdma_sendctx` carries both).
    const KEEPS_BUF: bool = true;
}

impl Conn {
    /// A Send work request over a pooled Send buffer (the inline send
    /// size) that `fill` writes in place; and the Send's length. `fill`
    /// returns `(first, tail)`: the Send starts with the buffer's first
    /// `first` bytes, then come the `pages` (page data mapped for the
    /// device, if any) and then the `tail` bytes the buffer holds after the
    /// first ones. Its completion gives back `slots` send queue slots,
    /// which the caller reserved. `pages` is `None` rather than an empty
    /// vector when there are none: dropping a vector calls the allocator
    /// even if it never allocated.
    pub(super) fn send_wr(
        &self,
        this: &Arc<Self>,
        slots: u32,
        pages: Option<KVec<MappedPage>>,
        fill: impl FnOnce(&mut [u8]) -> Result<(usize, usize)>,
    ) -> Result<(Arc<WorkRequest<SendDone>>, usize)> {
        // An allocation kept with its buffer (most Sends), else a buffer
        // from the pool of those without one. Every buffer of the
        // connection has the negotiated inline size.
        let (kept, kept_buf) = self.send_wrs.take_kept();
        let buf = match kept_buf {
            Some(b) => b,
            None => self.pooled_send_buf()?,
        };
        let mut parts = (0, 0);
        let filled = buf.fill(|bytes| {
            parts = fill(bytes)?;
            parts.0.checked_add(parts.1).ok_or(EINVAL)
        });
        if let Err(e) = filled {
            self.put_send_buf(buf);
            return Err(e);
        }
        let (first, tail) = parts;
        let mut len = first.checked_add(tail).ok_or(EINVAL)?;
        for page in pages.iter().flatten() {
            len = len.checked_add(page.len()).ok_or(EINVAL)?;
        }
        // The buffer's reference is cloned only for a tail of its own.
        let (head_buf, tail) = if tail > 0 {
            let seg = SgSegment {
                buf: buf.clone(),
                offset: first,
                len: tail,
            };
            (buf, Some(seg))
        } else {
            (buf, None)
        };
        let head = SgSegment {
            buf: head_buf,
            offset: 0,
            len: first,
        };
        let done = SendDone {
            conn: this.clone(),
            slots,
        };
        let pages = pages.filter(|p| !p.is_empty());
        if pages.is_none() && tail.is_none() {
            // Most calls: one entry, without the general list's chained
            // iterators.
            return Ok((WorkRequest::new_in(kept, done, [head])?, len));
        }
        // Header and head, the mapped pages, the tail: no allocation for
        // the list itself.
        let segs = Iterator::chain(
            Iterator::chain(
                core::iter::once(SgEntry::from(head)),
                pages.into_iter().flatten().map(SgEntry::from),
            ),
            tail.map(SgEntry::from),
        );
        Ok((WorkRequest::new_in(kept, done, segs)?, len))
    }

    /// Reserves the send queue slot of a Send that carries no
    /// registration (a backchannel reply); `ENOBUFS` when the queue is full.
    pub(super) fn reserve_send_slot(&self) -> Result {
        if self.slots.try_take(1) {
            Ok(())
        } else {
            self.note_send_queue_full();
            Err(ENOBUFS)
        }
    }

    /// Counts a call or reply that found no room in the send queue and
    /// will be retried: the module-wide counter, and the transport's
    /// `empty_sendctx_q` (C counts a Send that found its ring of send
    /// contexts empty, which stands for the same room).
    pub(super) fn note_send_queue_full(&self) {
        add(&self.counters().send_queue_full, 1);
        bump(&self.stats.empty_sendctx_q);
    }

    /// Gives back a slot of [`Self::reserve_send_slot`] whose Send was not
    /// posted.
    pub(super) fn unreserve_send_slot(&self) {
        self.slots.give(1);
    }

    /// A Send buffer from the pool of those not kept with a request's
    /// allocation.
    fn pooled_send_buf(&self) -> Result<Arc<MappedBuf>> {
        let (pooled, buf_len) = {
            let mut pool = self.send_bufs.lock();
            (pool.bufs.pop(), pool.len)
        };
        if let Some(b) = pooled {
            return Ok(b);
        }
        // The pool is empty (buffers went with failed posts): one is
        // allocated and DMA-mapped now, C's "hardway" registration of a
        // buffer (counted in bytes).
        let buf = self.ep.alloc_buf(buf_len, DmaDir::ToDevice)?;
        add(
            &self.stats.hardway_register_count,
            u64::try_from(buf_len).unwrap_or(u64::MAX),
        );
        Ok(buf)
    }

    /// Gives a Send buffer back (from its completion; never allocates).
    fn put_send_buf(&self, buf: Arc<MappedBuf>) {
        let rejected = self.send_bufs.lock().put(buf).err();
        // A full pool drops the extra buffer, outside the lock.
        drop(rejected);
    }
}
