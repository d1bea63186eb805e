// SPDX-License-Identifier: GPL-2.0

//! The calls nearly every RPC is, marshaled in one pass: the whole Call
//! pulled up inline behind a fixed header, the Reply inline or its page
//! data through one Write chunk; or the Call's page data through one Read
//! chunk and the Reply inline (`proto::marshal_fast`, which the general
//! planner and encoder hold to their decisions and bytes). No chunk list,
//! header description or strategy is built for them. [`Conn::send`], where
//! every call starts, recognises them; everything else goes the general
//! way ([`Conn::send_planned`]).

use super::conn::{Conn, Offered, Pending, ReqState};
use super::marshal_in_place::{FastCall, FastChunk};
use super::reg::{call_shape, call_sketch, RegList, Segs, Span, Strategy};
use super::send_buf::{fill_read_chunk_inline, CallParts, MAP_PAGES_MIN};
use super::stats::add_some;
use crate::proto::marshal_fast::{
    encode_fast_header, encode_fast_read_header, plan_fast, plan_fast_read, CallSketch, CommonPlan,
    FastPlan, FastReadPlan, FastResult,
};
use crate::proto::msg::Segment;
use crate::rust::module::trace::{self, ChunkType};
use crate::rust::rdma::send_ring::{SendCtxt, SendRingHead};
use crate::rust::sunrpc::xprt::RpcRqst;
use kernel::prelude::*;
use kernel::sync::ArcBorrow;

/// What marshaling a call of a common shape takes of its request besides
/// the plan.
#[derive(Clone, Copy)]
pub(super) struct PlannedCall<'a> {
    pub(super) xid: u32,
    pub(super) lens: &'a CallSketch,
    /// The Send buffer's size the call was planned with.
    pub(super) limit: usize,
}

impl Conn {
    /// Marshals one call and posts it, in a Send context of the ring whose
    /// head the caller holds: a call of the common shapes here, any other
    /// as the planner decides ([`Self::send_planned`]).
    pub(super) fn send(
        &self,
        this: ArcBorrow<'_, Self>,
        head: &mut SendRingHead<Conn>,
        rqst: &RpcRqst<'_>,
    ) -> Result {
        rqst.alloc_sparse_pages()?;
        let (xid, call, limit, fast) = match self.common_plan(rqst) {
            Some(common) => common,
            None => {
                let params = self.params();
                // Every call is pulled up into one Send buffer.
                let (xid, rpc) = call_shape(&rqst.call_layout(), params.inline_send);
                let fast = plan_fast(&rpc, params, MAP_PAGES_MIN)
                    .map(CommonPlan::Pullup)
                    .or_else(|| plan_fast_read(&rpc, params).map(CommonPlan::ReadChunk));
                let Some(fast) = fast else {
                    return self.send_planned(this, head, rqst, xid, &rpc);
                };
                (xid, CallSketch::from(&rpc), rpc.send_buf_len, fast)
            }
        };
        let planned = PlannedCall {
            xid,
            lens: &call,
            limit: limit as usize,
        };
        match fast {
            CommonPlan::Pullup(fast) => self.send_fast(this, head, rqst, planned, fast),
            CommonPlan::ReadChunk(fast) => self.send_fast_read(this, head, rqst, planned, fast),
        }
    }

    /// The plan of a call of the common shapes whose chunk one MR maps,
    /// from a few comparisons against the limits worked out when the
    /// connection was negotiated (nearly every call); with its xid, its
    /// lengths and the Send buffer's size.
    #[inline(always)]
    fn common_plan(&self, rqst: &RpcRqst<'_>) -> Option<(u32, CallSketch, u32, CommonPlan)> {
        let n = self.negotiated()?;
        let limits = n.fast.as_ref()?;
        let lens = rqst.call_lengths();
        let call = call_sketch(&lens);
        let fast = limits.plan(&call, || rqst.payload_ddp_allowed())?;
        Some((lens.xid, call, n.params.inline_send, fast))
    }

    /// Marshals and posts a call whose shape [`plan_fast`] took as `fast`,
    /// in a Send context of the ring whose head the caller holds.
    ///
    /// [`plan_fast`]: crate::proto::marshal_fast::plan_fast
    pub(super) fn send_fast(
        &self,
        this: ArcBorrow<'_, Self>,
        head: &mut SendRingHead<Conn>,
        rqst: &RpcRqst<'_>,
        call: PlannedCall<'_>,
        fast: FastPlan,
    ) -> Result {
        let PlannedCall {
            xid,
            lens: c,
            limit,
        } = call;
        let call_len = fast.call_len as usize;
        let FastResult::WriteChunk { write_pad, .. } = fast.result else {
            return self.send_fast_inline(this, head, rqst, call, call_len);
        };
        let behind_head = behind_head(c);
        let span = Span::recv(c.recv_head_len, c.recv_page_len);
        if let Some(state) = self.in_place_state(rqst) {
            let call = FastCall {
                xid,
                limit,
                chunk: FastChunk::Write {
                    write_pad,
                    call_len,
                    behind_head,
                },
            };
            if let Some(res) = self.send_fast_in_place(this, head, rqst, state, span, call) {
                return res;
            }
        }
        // The Send's slot; the MRs take theirs as they are registered.
        if !self.slots.try_take(1) {
            return Err(self.no_send_slot(this));
        }
        let mut mrs = RegList::new();
        let mut writes = Segs::new();
        let registered = self.register(rqst, span, &mut mrs, &mut writes);
        let padded = registered.and_then(|()| match &self.write_pad {
            Some((mr, _)) if write_pad => {
                let s = mr.segment();
                writes.push(Segment::new(s.handle, s.length, s.offset))
            }
            _ => Ok(()),
        });
        if let Err(e) = padded {
            return Err(self.chunks_failed(this, rqst, xid, mrs, e));
        }
        let mut offered = Offered::default();
        for (i, s) in writes.as_slice().iter().enumerate() {
            let is_last = i + 1 == writes.len();
            trace::xprtrdma_chunk_write(rqst, s.handle, s.length, s.offset, is_last);
            offered.write = offered.write.saturating_add(s.length);
        }
        let writes = writes.as_slice();
        let slots = 1 + self.reg_slots(&mrs);
        let built = self.fast_call_ctxt(head, slots, limit, rqst, xid, writes, call_len);
        let (ctxt, hdrlen) = match built {
            Ok(built) => built,
            Err(e) => return Err(self.unbuilt(this, rqst, mrs, e)),
        };
        trace::xprtrdma_marshal(rqst, hdrlen, ChunkType::Pullup, ChunkType::WriteList);
        let send_len = hdrlen.saturating_add(call_len);
        let pending = Pending {
            xid,
            regs: mrs,
            offered,
        };
        // Nothing mapped for the Send: unsignaled but for one in
        // `send_batch`.
        self.post_call(this, rqst, pending, ctxt, false, send_len)?;
        self.count_write_call(behind_head, writes.len(), offered.write);
        Ok(())
    }

    /// The request's state, when a call of `rqst` may register in place
    /// (`memreg=fmr`, [`Self::send_fast_in_place`]).
    fn in_place_state<'a>(&self, rqst: &'a RpcRqst<'_>) -> Option<&'a ReqState> {
        let fmr = self.settings.strategy == Strategy::Fmr;
        rqst.state::<ReqState>().filter(|_| fmr)
    }

    /// Counts a posted call pulled up behind its head with a Write chunk
    /// of `segments` offering `offered` bytes, as `Conn::count_sent`
    /// counts one: the bytes moved behind the head, and the chunk's.
    #[inline(always)]
    pub(super) fn count_write_call(&self, behind_head: u64, segments: usize, offered: u32) {
        add_some(&self.stats.pullup_copy_count, behind_head);
        add_some(&self.stats.write_chunk_count, segments as u64);
        add_some(&self.stats.total_rdma_request, u64::from(offered));
    }

    /// [`Self::send_fast`] for a call whose result comes inline (most
    /// metadata): nothing is registered, and no list of registrations is
    /// made or dropped.
    fn send_fast_inline(
        &self,
        this: ArcBorrow<'_, Self>,
        head: &mut SendRingHead<Conn>,
        rqst: &RpcRqst<'_>,
        call: PlannedCall<'_>,
        call_len: usize,
    ) -> Result {
        let PlannedCall { xid, lens, limit } = call;
        if !self.slots.try_take(1) {
            return Err(self.no_send_slot(this));
        }
        let (ctxt, hdrlen) = match self.fast_call_ctxt(head, 1, limit, rqst, xid, &[], call_len) {
            Ok(built) => built,
            Err(e) => return Err(self.unbuilt(this, rqst, RegList::new(), e)),
        };
        trace::xprtrdma_marshal(rqst, hdrlen, ChunkType::Pullup, ChunkType::Inline);
        rqst.mark_sent();
        // Nothing mapped for the Send: unsignaled but for one in
        // `send_batch`.
        match ctxt.post(&self.ep, false) {
            Ok(unsignaled) => self.count_posted(rqst, hdrlen.saturating_add(call_len), unsignaled),
            Err(e) => return Err(self.unposted(this, rqst, e, Some(RegList::new()), 0)),
        }
        add_some(&self.stats.pullup_copy_count, behind_head(lens));
        Ok(())
    }

    /// A Send context that frees `slots` send queue slots when it retires,
    /// of at most `limit` bytes (the inline send size the call was planned
    /// with), filled with the fast header of a call whose result comes inline or
    /// through the Write chunk of `writes`, and the whole call of
    /// `call_len` bytes behind it; with the header's length.
    #[expect(clippy::too_many_arguments)]
    // Inlined, with the steps below it (`SendCtxt::bytes`, `::build`,
    // `::post_behind`, `Mr::map_rqst`): called, each step of a call's
    // send cost its call and saved registers; one of them alone inlined,
    // LLVM cut the next out instead (kcount).
    #[inline(always)]
    pub(super) fn fast_call_ctxt<'a>(
        &'a self,
        head: &'a mut SendRingHead<Conn>,
        slots: u32,
        limit: usize,
        rqst: &RpcRqst<'_>,
        xid: u32,
        writes: &[Segment],
        call_len: usize,
    ) -> Result<(SendCtxt<'a, Conn>, usize)> {
        let mut ctxt = self.send_ctxt(head, slots)?;
        let credits = self.settings.max_requests;
        let out = ctxt.bytes(limit)?;
        let hdrlen = encode_fast_header(xid, credits, writes, out).ok_or(EMSGSIZE)?;
        let end = hdrlen.checked_add(call_len).ok_or(EMSGSIZE)?;
        rqst.read(0, out.get_mut(hdrlen..end).ok_or(EMSGSIZE)?)?;
        ctxt.filled(end, 0)?;
        Ok((ctxt, hdrlen))
    }

    /// A Send context that frees `slots` send queue slots when it retires,
    /// of at most `limit` bytes, filled with the fast header of a call
    /// whose page data goes as the
    /// Read chunk of `reads` at XDR `position`, and its head and tail
    /// behind it; with the header's length and the Send's.
    #[expect(clippy::too_many_arguments)]
    pub(super) fn fast_read_ctxt<'a>(
        &'a self,
        head: &'a mut SendRingHead<Conn>,
        slots: u32,
        limit: usize,
        rqst: &RpcRqst<'_>,
        xid: u32,
        position: u32,
        reads: &[Segment],
        parts: CallParts,
    ) -> Result<(SendCtxt<'a, Conn>, usize, usize)> {
        let mut ctxt = self.send_ctxt(head, slots)?;
        let credits = self.settings.max_requests;
        let out = ctxt.bytes(limit)?;
        let hdrlen = encode_fast_read_header(xid, credits, position, reads, out).ok_or(EMSGSIZE)?;
        let send_len = fill_read_chunk_inline(rqst, parts, out, hdrlen)?;
        ctxt.filled(send_len, 0)?;
        Ok((ctxt, hdrlen, send_len))
    }

    /// Marshals and posts a call whose shape [`plan_fast_read`] took as
    /// `fast`: its page data registered as one Read chunk, its head and
    /// tail inline behind the header (C `rpcrdma_readch` and
    /// `rpcrdma_prepare_readch`), in a Send context of the ring whose head
    /// the caller holds.
    ///
    /// [`plan_fast_read`]: crate::proto::marshal_fast::plan_fast_read
    pub(super) fn send_fast_read(
        &self,
        this: ArcBorrow<'_, Self>,
        head: &mut SendRingHead<Conn>,
        rqst: &RpcRqst<'_>,
        call: PlannedCall<'_>,
        fast: FastReadPlan,
    ) -> Result {
        let PlannedCall {
            xid,
            lens: c,
            limit,
        } = call;
        let span = Span::send(c.send_head_len, c.send_page_len);
        // The lengths by value: a reference would keep the whole sketch in
        // memory for the out-of-line call.
        let parts = CallParts {
            head_len: c.send_head_len,
            page_len: c.send_page_len,
            tail_len: c.send_tail_len,
        };
        if let Some(state) = self.in_place_state(rqst) {
            let call = FastCall {
                xid,
                limit,
                chunk: FastChunk::Read {
                    position: fast.position,
                    call: parts,
                },
            };
            if let Some(res) = self.send_fast_in_place(this, head, rqst, state, span, call) {
                return res;
            }
        }
        if !self.slots.try_take(1) {
            return Err(self.no_send_slot(this));
        }
        let mut mrs = RegList::new();
        let mut reads = Segs::new();
        if let Err(e) = self.register(rqst, span, &mut mrs, &mut reads) {
            return Err(self.chunks_failed(this, rqst, xid, mrs, e));
        }
        let position = fast.position;
        for (i, s) in reads.as_slice().iter().enumerate() {
            let is_last = i + 1 == reads.len();
            trace::xprtrdma_chunk_read(rqst, position, s.handle, s.length, s.offset, is_last);
        }
        let reads = reads.as_slice();
        let slots = 1 + self.reg_slots(&mrs);
        let built = self.fast_read_ctxt(head, slots, limit, rqst, xid, position, reads, parts);
        let (ctxt, hdrlen, send_len) = match built {
            Ok(built) => built,
            Err(e) => return Err(self.unbuilt(this, rqst, mrs, e)),
        };
        trace::xprtrdma_marshal(rqst, hdrlen, ChunkType::ReadList, ChunkType::Inline);
        let pending = Pending {
            xid,
            regs: mrs,
            offered: Offered::default(),
        };
        // Nothing mapped for the Send: unsignaled but for one in
        // `send_batch`.
        self.post_call(this, rqst, pending, ctxt, false, send_len)?;
        add_some(&self.stats.read_chunk_count, reads.len() as u64);
        Ok(())
    }
}

/// The bytes of a pulled-up call behind its head, which `Conn::count_sent`
/// counts as C counts what its pull-up moves.
fn behind_head(c: &CallSketch) -> u64 {
    u64::from(c.send_page_len).saturating_add(u64::from(c.send_tail_len))
}
