// SPDX-License-Identifier: GPL-2.0

//! The "physical" registration strategy (`memreg=physical`, opt-in, for
//! trusted servers only): no MR per I/O; each page of a chunk is
//! DMA-mapped and advertised under the device's global steering tag
//! (`IB_PD_UNSAFE_GLOBAL_RKEY`), so the server can reach all of this
//! host's memory. Mappings are undone when their `Reg::Phys` drops; there
//! is nothing to invalidate.

use super::conn::Conn;
use super::reg::{counters, Reg, RegList, Segs, Span, Strategy};
use super::stats::add;
use crate::proto::msg::Segment;
use crate::rust::sunrpc::xprt::{PhysMap, RpcRqst};
use kernel::prelude::*;

impl Conn {
    /// Maps `span` of the request's buffers page by page under the global
    /// rkey, one segment per run of DMA-contiguous pages (at most
    /// `max_rdma_segs`, which the planner counted as one per page).
    pub(super) fn register_physical(
        &self,
        rqst: &RpcRqst<'_>,
        span: Span,
        regs: &mut RegList,
        segs: &mut Segs,
    ) -> Result {
        let max = self.params().max_rdma_segs;
        let (rcv, writable) = (span.rcv, span.writable());
        let pm = PhysMap::map_rqst(&self.ep, rqst, rcv, span.offset, span.len, writable, max)?;
        let pm = KBox::new(pm, GFP_KERNEL)?;
        for i in 0..pm.count() {
            let (addr, l) = pm.piece(i);
            segs.push(Segment::new(self.global_rkey, l, addr))?;
        }
        let c = counters(Strategy::Physical);
        c.registrations.count(1);
        add(&c.mappings, u64::from(pm.mappings()));
        add(&c.segments, u64::from(pm.count()));
        regs.push(Reg::Phys(pm))?;
        Ok(())
    }
}
