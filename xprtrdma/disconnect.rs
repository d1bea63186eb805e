// SPDX-License-Identifier: GPL-2.0

//! The end of a connection (C `rpcrdma_xprt_disconnect`): disconnect,
//! drain, and release of what the connection still holds; revocation of
//! every registration when one cannot be invalidated.

use super::conn::{Conn, ReqState};
use super::stats::add;
use crate::rust::module::trace;
use kernel::sync::atomic::Relaxed;

impl Conn {
    /// Disconnects and waits for every posted work request to complete;
    /// the CM event handler is removed first (so nothing touches the sunrpc
    /// transport once this returns). Removing it waits only for a handler
    /// call in progress, which never blocks.
    pub(super) fn shutdown(&self) {
        self.closing.store(true, Relaxed);
        drop(self.ep.cm_id().clear_handler());
        // The cache's shrinker first (it waits for a running callback), so
        // that nothing evicts while the cache goes.
        let shrinker = self.shrinker.lock().take();
        drop(shrinker);
        self.drain_once();
        // Cached registrations: their steering tags died with the queue
        // pair's drain; deregister them and release their pages.
        self.clear_cache();
        // Registrations of requests still waiting are invalid now that the
        // QP is in the error state; drop them with their MRs, and the
        // spare MRs requests keep (each taken out of its request's lock
        // before it is dropped: deregistering may sleep).
        self.xprt
            .for_each_req_state::<ReqState>(|r| drop(r.take_all()));
        // So do the MRs awaiting a batched invalidation.
        let dirty = core::mem::take(&mut *self.dirty.lock());
        self.counters().dirty.add(-(dirty.len() as i64), Relaxed);
        drop(dirty);
        // No Receive completes after the drain: those waiting for their
        // batch are never posted again.
        self.recv_ring.release_after_drain(&self.ep);
        // Sends posted unsignaled after the last signaled one: no
        // completion retires them.
        self.send_ring.release_after_drain(&self.ep);
    }

    /// Disconnects as a network failure would (C
    /// `xprt_rdma_inject_disconnect`): the CM then reports DISCONNECTED,
    /// whose handler forces the transport closed, and the next call
    /// reconnects. Outstanding work requests are flushed on the way, so
    /// this exercises the same recovery as a lost link.
    pub(super) fn inject_disconnect(&self) {
        if self.closing.load(Relaxed) {
            return;
        }
        add(&self.counters().injected_disconnects, 1);
        trace::xprtrdma_op_inject_dsc(&self.xprt);
        if let Err(e) = self.ep.cm_id().disconnect() {
            crate::pr_warn_ratelimited!("injected disconnect failed ({:?}); closing\n", e);
            self.xprt.force_disconnect();
        }
    }

    /// Revokes every registration at once, synchronously, for when one
    /// cannot be invalidated: the queue pair is moved to the error state
    /// and drained, and sunrpc reconnects.
    pub(super) fn revoke_all(&self) {
        self.closing.store(true, Relaxed);
        self.drain_once();
        self.xprt.force_disconnect();
    }

    /// Disconnects and drains the queue pair, or waits for the caller that
    /// does: when this returns no registration of the connection can be
    /// used by the peer any more (the QP is in the error state and every
    /// posted work request has completed). Process context only.
    pub(super) fn drain_once(&self) {
        if self.drain_started.xchg(true, Relaxed) {
            self.drained.wait_for_completion();
            return;
        }
        self.ep.drain();
        self.drained.complete_all();
    }
}
