// SPDX-License-Identifier: GPL-2.0

//! The completions of a server connection's Sends and RDMA Writes (C
//! `svc_rdma_wc_send`, `svc_rdma_write_done`): their send queue slots go
//! back to the gate (`sq_gate.rs`), a Write's buffer to the connection's
//! cache, and one that did not succeed closes the connection.

use super::sq_gate::SqGate;
use crate::rust::module::trace;
use crate::rust::rdma::send_pool::SendPoolOwner;
use crate::rust::rdma::verbs::{CompletionHandler, MappedBuf, WorkCompletion, WorkRequest};
use crate::rust::rdma::wr_pool::WrPool;
use kernel::sync::Arc;

/// Completion of RDMA Writes and Sends: returns the send queue slot and
/// gives the buffer back to the cache.
pub(super) struct SqHandler {
    pub(super) sq: Arc<SqGate>,
    /// The cache class of the request's first buffer, if it came from the
    /// connection's cache (a Send, a copied Write).
    pub(super) cache_slot: Option<usize>,
}

impl CompletionHandler for SqHandler {
    fn complete(&self, _wr: &Arc<WorkRequest<Self>>, wc: &WorkCompletion) {
        // Each request took one slot; a chain's come back together, with
        // its signaled request (one lock, one wake check).
        if wc.covers > 0 {
            self.sq.release_sent(wc.covers);
        }
        self.sq.completed(wc);
    }

    fn pool(&self) -> Option<&WrPool<Self>> {
        Some(&self.sq.wrs)
    }

    fn recycle_buf(&self, buf: Arc<MappedBuf>) {
        if let Some(slot) = self.cache_slot {
            self.sq.cache.put(buf, slot);
        }
    }
}

/// A Reply's Send from a context completed: its slot and those of the
/// Writes ahead of it come back together.
impl SendPoolOwner for SqGate {
    type Ahead = SqHandler;

    fn sent(&self, ahead: u32, wc: &WorkCompletion) {
        self.release_sent(ahead.saturating_add(1));
        self.completed(wc);
    }
}

impl SqGate {
    /// A Send or Write that did not succeed closes the connection, flushed
    /// or not (C `svc_rdma_wc_send`, `svc_rdma_write_done`): its queue pair
    /// is in the error state, which the server need not have caused nor
    /// been told of otherwise (rxe moves it there after a Read response
    /// it does not expect, with only flushes to show for it), and the
    /// client would get its Replies only once it gave up on the
    /// connection. A failure other than a flush also logs one rate-limited
    /// line.
    #[inline(always)]
    fn completed(&self, wc: &WorkCompletion) {
        if !wc.is_ok() {
            self.failed(wc);
        }
    }

    /// [`Self::completed`] for a work request that did not succeed: out of
    /// line, so that a completion's check is not a call.
    #[cold]
    #[inline(never)]
    fn failed(&self, wc: &WorkCompletion) {
        if !wc.is_flush() {
            trace::svcrdma_wc_send_err(wc.status);
            crate::pr_warn_ratelimited!(
                "svcrdma: work request failed, status {}; closing the connection\n",
                wc.status
            );
        }
        self.link.close();
    }
}
