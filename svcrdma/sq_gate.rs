// SPDX-License-Identifier: GPL-2.0

//! The send queue gate of a server connection (C `sc_sq_avail` and
//! `svc_rdma_sq_wait`): every Send, RDMA Write and RDMA Read is posted with
//! a slot, and its completion gives the slot back.

use super::cache::BufCache;
use crate::rust::svc::{stat_add, Stat, XprtLink};
use crate::rust::trace;
use crate::rust::verbs::{CompletionHandler, WorkCompletion, WorkRequest};
use crate::rust::wr_pool::WrPool;
use kernel::new_condvar;
use kernel::new_spinlock_irq;
use kernel::prelude::*;
use kernel::sync::{Arc, CondVar, SpinLockIrq};
use kernel::time::msecs_to_jiffies;

struct GateState {
    avail: u32,
    closed: bool,
    /// A Read operation waits for room ([`SqGate::starve`]).
    starved: bool,
    /// Threads waiting in [`SqGate::acquire_n`]: a release wakes the wait
    /// queue only when there are some (C checks `waitqueue_active`), so
    /// the completion of every Send and Write does not take the wait
    /// queue's lock for nobody.
    waiters: u32,
}

/// Send queue slots: a work request is posted only with a slot, and its
/// completion returns the slot, so the send queue never overflows. The
/// queue pair's spare entry for the drain (see
/// [`Endpoint::send_depth`]) is not among them.
///
/// RDMA Reads never wait for a slot ([`Self::try_acquire_read`]) and never
/// take the last [`Self::read_keep`] slots: a peer that stops answering
/// Reads can fill at most the rest of the queue, so Replies on its
/// connection still find room for at least one Send per credit.
#[pin_data]
pub(super) struct SqGate {
    #[pin]
    state: SpinLockIrq<GateState>,
    #[pin]
    wait: CondVar,
    read_keep: u32,
    /// Slots in all.
    depth: u32,
    /// Told when room appears for a starved Read operation.
    link: Arc<XprtLink>,
    /// The allocations of completed Sends and RDMA Writes, reused by the
    /// next ones (C keeps its send and R/W contexts on free lists).
    #[pin]
    wrs: WrPool<SqHandler>,
}

/// Most work request allocations a connection keeps for reuse (at most
/// its send queue's depth): a 4 KiB READ's Reply is a Send and one RDMA
/// Write, but a 256 KiB one is a Send and four Writes of 16 pages, and a
/// client keeps dozens of calls in flight (1 MiB reads at iodepth 8 with
/// rsize 256 KiB: up to 8 x 4 x 5 = 160). Each is about 1 KiB, allocated
/// only when that many were in flight at once.
const WR_POOL_MAX: u32 = 256;

impl SqGate {
    /// A gate of `depth` slots whose Reads leave `read_keep` of them to
    /// Sends and Writes.
    pub(super) fn new(depth: u32, read_keep: u32, link: Arc<XprtLink>) -> Result<Arc<Self>> {
        let depth = depth.max(2);
        let wrs = WrPool::new(depth.min(WR_POOL_MAX) as usize)?;
        Arc::pin_init(
            pin_init!(Self {
                state <- new_spinlock_irq!(
                    GateState { avail: depth, closed: false, starved: false, waiters: 0 },
                    "svcrdma::sq"
                ),
                wait <- new_condvar!("svcrdma::sq_wait"),
                read_keep: read_keep.min(depth - 1),
                depth,
                link,
                wrs <- wrs,
            }),
            GFP_KERNEL,
        )
    }

    /// Takes `n` slots for a chain of Sends and RDMA Writes (C
    /// `svc_rdma_sq_wait` with the chain's `sqecount`), sleeping while too
    /// few are free; `ENOTCONN` once closed, `EINVAL` if the gate has fewer
    /// slots in all. Like C, a Reply waits for room; closing the
    /// connection ([`Self::close`]) ends the wait.
    pub(super) fn acquire_n(&self, n: u32) -> Result {
        if n > self.depth {
            return Err(EINVAL);
        }
        let mut st = self.state.lock();
        loop {
            if st.closed {
                return Err(ENOTCONN);
            }
            if st.avail >= n {
                st.avail -= n;
                return Ok(());
            }
            stat_add(Stat::SqStarve, 1);
            trace::svcrdma_sq_full(st.avail);
            // Counted under the lock the wait releases only once this
            // thread is on the wait queue: a release that sees the count
            // finds it there.
            st.waiters = st.waiters.saturating_add(1);
            let _ = self
                .wait
                .wait_interruptible_timeout(&mut st, msecs_to_jiffies(1000));
            st.waiters = st.waiters.saturating_sub(1);
            trace::svcrdma_sq_retry(st.avail);
        }
    }

    /// Slots in all: the most one chain may take.
    pub(super) fn depth(&self) -> u32 {
        self.depth
    }

    /// Takes `n` slots for RDMA Reads (and their registrations) if they
    /// are free beyond the reserve, without waiting: `Ok(false)` if not.
    pub(super) fn try_acquire_read(&self, n: u32) -> Result<bool> {
        let mut st = self.state.lock();
        if st.closed {
            return Err(ENOTCONN);
        }
        match n.checked_add(self.read_keep) {
            Some(need) if st.avail >= need => {
                st.avail -= n;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Whether a Read could take a slot now.
    pub(super) fn read_room(&self) -> bool {
        let st = self.state.lock();
        !st.closed && st.avail > self.read_keep
    }

    /// Called by a thread about to leave a Read operation waiting for
    /// room: `false` if there is room now (the caller must see to it),
    /// `true` if there is none, in which case the release that makes room
    /// marks the transport `XPT_DATA` (checking and noting under one lock,
    /// so that release cannot be missed).
    pub(super) fn starve(&self) -> bool {
        let mut st = self.state.lock();
        if st.closed {
            // Nothing will be posted again: nothing to wake.
            return true;
        }
        if st.avail > self.read_keep {
            return false;
        }
        stat_add(Stat::SqStarve, 1);
        st.starved = true;
        true
    }

    /// Returns `n` slots.
    pub(super) fn release(&self, n: u32) {
        let (wake_waiters, wake_reads) = {
            let mut st = self.state.lock();
            st.avail = st.avail.saturating_add(n);
            let wake = st.starved && st.avail > self.read_keep;
            if wake {
                st.starved = false;
            }
            (st.waiters > 0, wake)
        };
        if wake_waiters {
            self.wait.notify_all();
        }
        if wake_reads {
            self.link.data_ready();
        }
    }

    /// Fails every current and later [`Self::acquire`] and
    /// [`Self::try_acquire_read`].
    pub(super) fn close(&self) {
        self.state.lock().closed = true;
        self.wait.notify_all();
    }
}

/// Completion of RDMA Writes and Sends: returns the send queue slot and
/// gives the buffer back to the cache.
pub(super) struct SqHandler {
    pub(super) sq: Arc<SqGate>,
    pub(super) cache: Option<(Arc<BufCache>, usize)>,
}

impl CompletionHandler for SqHandler {
    fn complete(&self, wr: &Arc<WorkRequest<Self>>, wc: &WorkCompletion) {
        self.sq.release(1);
        if !wc.is_ok() && !wc.is_flush() {
            trace::svcrdma_wc_send_err(wc.status);
            crate::pr_warn_ratelimited!("svcrdma: work request failed, status {}\n", wc.status);
        }
        if let (Some((cache, slot)), Some(buf)) = (&self.cache, wr.buf(0)) {
            cache.put(buf, *slot);
        }
    }

    fn pool(&self) -> Option<&WrPool<Self>> {
        Some(&self.sq.wrs)
    }
}
