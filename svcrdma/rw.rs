// SPDX-License-Identifier: GPL-2.0

//! RDMA Read and Write of chunks (C `svc_rdma_rw.c`), the send queue gate
//! (C `sc_sq_avail`) and the waiter a server thread sleeps on while its
//! RDMA Reads run.
//!
//! Data moves through bounce buffers of at most [`PIECE`] bytes mapped on
//! the connection's device: a Read chunk is pulled into them and copied into
//! the request's pages; a Write or Reply chunk is copied out of `rq_res`
//! into them and pushed. The client's segments are addressed piecewise, so
//! one segment may take several work requests and one piece never spans
//! two segments.

use super::cache::{BufCache, Class};
use crate::proto::msg::Segment;
use crate::rdma::svc::{stat_add, Stat};
use crate::rdma::verbs::{
    CompletionHandler, DmaBuf, Endpoint, SendOp, WorkCompletion, WorkRequest,
};
use kernel::alloc::KVec;
use kernel::new_condvar;
use kernel::new_spinlock_irq;
use kernel::prelude::*;
use kernel::sync::{Arc, CondVar, SpinLockIrq};
use kernel::time::msecs_to_jiffies;

/// Largest bounce buffer (order-4 allocation).
pub(super) const PIECE: usize = 64 * 1024;

struct GateState {
    avail: u32,
    closed: bool,
}

/// Send queue slots: a work request is posted only with a slot, and its
/// completion returns the slot, so the send queue never overflows.
#[pin_data]
pub(super) struct SqGate {
    #[pin]
    state: SpinLockIrq<GateState>,
    #[pin]
    wait: CondVar,
}

impl SqGate {
    pub(super) fn new(depth: u32) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                state <- new_spinlock_irq!(GateState { avail: depth.max(1), closed: false }, "svcrdma::sq"),
                wait <- new_condvar!("svcrdma::sq_wait"),
            }),
            GFP_KERNEL,
        )
    }

    /// Takes a slot, sleeping while none is free; `ENOTCONN` once closed.
    pub(super) fn acquire(&self) -> Result {
        let mut st = self.state.lock();
        loop {
            if st.closed {
                return Err(ENOTCONN);
            }
            if st.avail > 0 {
                st.avail -= 1;
                return Ok(());
            }
            stat_add(Stat::SqStarve, 1);
            let _ = self
                .wait
                .wait_interruptible_timeout(&mut st, msecs_to_jiffies(1000));
        }
    }

    /// Returns a slot.
    pub(super) fn release(&self) {
        self.state.lock().avail += 1;
        self.wait.notify_one();
    }

    /// Fails every current and later [`Self::acquire`].
    pub(super) fn close(&self) {
        self.state.lock().closed = true;
        self.wait.notify_all();
    }
}

struct WaitState {
    pending: u32,
    failed: bool,
}

/// Counts outstanding work requests of one operation and wakes its thread
/// when all have completed.
#[pin_data]
pub(super) struct Waiter {
    #[pin]
    state: SpinLockIrq<WaitState>,
    #[pin]
    wait: CondVar,
}

impl Waiter {
    pub(super) fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                state <- new_spinlock_irq!(WaitState { pending: 0, failed: false }, "svcrdma::rw"),
                wait <- new_condvar!("svcrdma::rw_wait"),
            }),
            GFP_KERNEL,
        )
    }

    fn add(&self) {
        self.state.lock().pending += 1;
    }

    fn done(&self, ok: bool) {
        let mut st = self.state.lock();
        st.pending = st.pending.saturating_sub(1);
        if !ok {
            st.failed = true;
        }
        drop(st);
        self.wait.notify_all();
    }

    /// Waits until every added work request has completed; `EIO` if one
    /// failed. The queue pair completes every posted request (flushing them
    /// when the connection dies), so this always returns.
    pub(super) fn wait_all(&self) -> Result {
        let mut st = self.state.lock();
        while st.pending > 0 {
            let _ = self
                .wait
                .wait_interruptible_timeout(&mut st, msecs_to_jiffies(1000));
        }
        if st.failed {
            Err(EIO)
        } else {
            Ok(())
        }
    }
}

/// Completion of RDMA Reads, RDMA Writes and Sends: returns the send queue
/// slots (two for an RDMA Read whose sink was registered just before it:
/// the unsignaled REG_MR ahead of it used one), gives the buffer back to
/// the cache (Writes and Sends), and reports to the waiter, if any.
pub(super) struct SqHandler {
    sq: Arc<SqGate>,
    slots: u32,
    waiter: Option<Arc<Waiter>>,
    cache: Option<(Arc<BufCache>, usize)>,
}

impl CompletionHandler for SqHandler {
    fn complete(&self, wr: &Arc<WorkRequest<Self>>, wc: &WorkCompletion) {
        for _ in 0..self.slots {
            self.sq.release();
        }
        if !wc.is_ok() && !wc.is_flush() {
            pr_warn!("svcrdma: work request failed, status {}\n", wc.status);
        }
        if let (Some((cache, slot)), Some(buf)) = (&self.cache, wr.buf(0)) {
            cache.put(buf, *slot);
        }
        if let Some(w) = &self.waiter {
            w.done(wc.is_ok());
        }
    }
}

/// What posting needs: the queue pair, its send queue gate and the
/// connection's buffer cache.
pub(super) struct Io<'a> {
    pub(super) ep: &'a Endpoint,
    pub(super) sq: &'a Arc<SqGate>,
    pub(super) cache: &'a Arc<BufCache>,
}

impl Io<'_> {
    /// Posts one work request over `buf[..len]` with a send queue slot;
    /// `recycle` gives the buffer back to the cache (to that class slot)
    /// when it completes. With `register`, the buffer's sink MR is
    /// registered first (REG_MR, taking a second slot), on this queue pair
    /// so it executes before the RDMA Read that uses it.
    fn post_one(
        &self,
        waiter: Option<&Arc<Waiter>>,
        buf: Arc<DmaBuf>,
        len: usize,
        op: SendOp,
        recycle: Option<usize>,
        register: bool,
    ) -> Result {
        let mut segs = KVec::new();
        segs.push(
            crate::rdma::verbs::Segment {
                buf,
                offset: 0,
                len,
            },
            GFP_KERNEL,
        )?;
        let reg_buf = if register {
            segs.first().map(|s| s.buf.clone())
        } else {
            None
        };
        let slots = if reg_buf.is_some() { 2 } else { 1 };
        let wr = WorkRequest::new(
            SqHandler {
                sq: self.sq.clone(),
                slots,
                waiter: waiter.cloned(),
                cache: recycle.map(|c| (self.cache.clone(), c)),
            },
            segs,
        )?;
        self.sq.acquire()?;
        if let Some(b) = &reg_buf {
            if let Err(e) = self.sq.acquire() {
                self.sq.release();
                return Err(e);
            }
            if let Err(e) = b.post_sink_registration(self.ep) {
                pr_warn!("svcrdma: cannot post a sink registration: {:?}\n", e);
                self.sq.release();
                self.sq.release();
                return Err(e);
            }
        }
        if let Some(w) = waiter {
            w.add();
        }
        if let Err(e) = self.ep.post_send(wr, op) {
            for _ in 0..slots {
                self.sq.release();
            }
            if let Some(w) = waiter {
                w.done(false);
            }
            return Err(e);
        }
        Ok(())
    }

    /// Posts a Send of `bytes` from a cached buffer.
    pub(super) fn send(&self, bytes: &[u8], inv: Option<u32>) -> Result {
        let t = self.cache.get(self.ep, Class::Send, bytes.len())?;
        t.buf.write(0, bytes)?;
        let op = match inv {
            Some(k) => SendOp::SendWithInvalidate(k),
            None => SendOp::Send,
        };
        self.post_one(None, t.buf, bytes.len(), op, Some(t.slot), false)
    }

    /// Pulls `total` bytes of a Read chunk with RDMA Read and hands each
    /// piece to `sink(stream_offset, bytes)` in order.
    pub(super) fn read_chunk(
        &self,
        segs: &[Segment],
        total: usize,
        mut sink: impl FnMut(usize, &[u8]) -> Result,
    ) -> Result {
        let waiter = Waiter::new()?;
        let mut pieces: KVec<(usize, usize, Arc<DmaBuf>, usize)> = KVec::new();
        let posted = for_each_piece(segs, total, |off, len, addr, rkey| {
            let t = self.cache.get(self.ep, Class::ReadPiece, len)?;
            pieces.push((off, len, t.buf.clone(), t.slot), GFP_KERNEL)?;
            stat_add(Stat::Read, 1);
            stat_add(Stat::ReadBytes, len as u64);
            self.post_one(
                Some(&waiter),
                t.buf,
                len,
                SendOp::RdmaRead {
                    remote_addr: addr,
                    rkey,
                },
                None,
                t.needs_registration,
            )
        });
        // Whatever was posted must complete before the buffers are reused.
        let waited = waiter.wait_all();
        let io_ok = posted.is_ok() && waited.is_ok();
        let res = posted.and(waited).and_then(|()| {
            let mut tmp = KVec::from_elem(0u8, PIECE.min(total.max(1)), GFP_KERNEL)?;
            for (off, len, buf, _) in pieces.iter() {
                let dst = tmp.get_mut(..*len).ok_or(EINVAL)?;
                buf.read(0, dst)?;
                sink(*off, dst)?;
            }
            Ok(())
        });
        // Only sinks whose Reads all succeeded are known to be registered
        // (a flushed REG_MR leaves its MR unusable): the others are freed.
        if io_ok {
            for (_, _, buf, slot) in pieces.iter() {
                self.cache.put(buf, *slot);
            }
        }
        res
    }

    /// Pushes `total` bytes produced by `source(stream_offset, dst)` into a
    /// Write or Reply chunk with RDMA Write. The Writes are posted (ordered
    /// before any later Send on the queue pair) but not waited for.
    pub(super) fn write_chunk(
        &self,
        segs: &[Segment],
        total: usize,
        mut source: impl FnMut(usize, &mut [u8]) -> Result,
    ) -> Result {
        let mut tmp = KVec::from_elem(0u8, PIECE.min(total.max(1)), GFP_KERNEL)?;
        for_each_piece(segs, total, |off, len, addr, rkey| {
            let src = tmp.get_mut(..len).ok_or(EINVAL)?;
            source(off, src)?;
            let t = self.cache.get(self.ep, Class::WritePiece, len)?;
            t.buf.write(0, src)?;
            stat_add(Stat::Write, 1);
            stat_add(Stat::WriteBytes, len as u64);
            self.post_one(
                None,
                t.buf,
                len,
                SendOp::RdmaWrite {
                    remote_addr: addr,
                    rkey,
                },
                Some(t.slot),
                false,
            )
        })
    }
}

/// Splits `total` bytes over `segs` into pieces of at most [`PIECE`] bytes
/// that never cross a segment: calls `f(stream_offset, len, remote_addr,
/// rkey)` for each. Fails if the segments are shorter than `total`.
fn for_each_piece(
    segs: &[Segment],
    total: usize,
    mut f: impl FnMut(usize, usize, u64, u32) -> Result,
) -> Result {
    let mut done: usize = 0;
    for s in segs {
        if done >= total {
            break;
        }
        let seg_len = usize::try_from(s.length).map_err(|_| EINVAL)?;
        let mut in_seg: usize = 0;
        while in_seg < seg_len && done < total {
            let len = (seg_len - in_seg).min(total - done).min(PIECE);
            let addr = s
                .offset
                .checked_add(u64::try_from(in_seg).map_err(|_| EINVAL)?)
                .ok_or(EINVAL)?;
            f(done, len, addr, s.handle)?;
            in_seg += len;
            done += len;
        }
    }
    if done < total {
        return Err(EMSGSIZE);
    }
    Ok(())
}
