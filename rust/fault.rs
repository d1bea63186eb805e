// SPDX-License-Identifier: GPL-2.0

//! Fault injection for tests that play a misbehaving peer
//! (`kunit/svc_hostile.rs`): nothing in the transports uses it.
//!
//! A peer that stops answering RDMA Reads: it connects with a long ACK
//! timeout ([`CmId::set_ack_timeout`], before route resolution, so the
//! server's queue pair inherits it through the CM REQ and waits minutes
//! before it retransmits), and later moves its own queue pair to the error
//! state ([`Endpoint::force_error`]), where incoming requests are dropped
//! without a reply.
//!
//! C header: [`include/rdma/rdma_cm.h`](srctree/include/rdma/rdma_cm.h).

use super::bindings;
use super::cm::CmId;
use super::verbs::Endpoint;
use kernel::error::to_result;
use kernel::prelude::*;

impl CmId {
    /// Sets the local ACK timeout (4.096 us * 2^`timeout`, at most 31) the
    /// connection asks for (`rdma_set_ack_timeout`). Call before
    /// [`CmId::resolve_route`]: RoCE turns it into the path's packet
    /// lifetime, which the CM REQ carries to the peer.
    pub fn set_ack_timeout(&self, timeout: u8) -> Result {
        // SAFETY: By the type invariant the identifier is live.
        to_result(unsafe { bindings::rdma_set_ack_timeout(self.as_ptr(), timeout) })
    }
}

impl Endpoint {
    /// Moves the queue pair to the error state: posted work requests are
    /// flushed and the peer's requests are no longer answered. Dropping
    /// the endpoint afterwards still disconnects and drains as usual.
    pub fn force_error(&self) -> Result {
        // SAFETY: The queue pair is live while `self` is (its type
        // invariant); modifying its state is allowed from process context.
        to_result(unsafe {
            let mut attr: bindings::ib_qp_attr = core::mem::zeroed();
            attr.qp_state = bindings::ib_qp_state_IB_QPS_ERR;
            bindings::ib_modify_qp(
                self.qp_ptr(),
                &mut attr,
                bindings::ib_qp_attr_mask_IB_QP_STATE as i32,
            )
        })
    }
}
