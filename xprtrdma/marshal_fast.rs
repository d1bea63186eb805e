// SPDX-License-Identifier: GPL-2.0

//! The calls nearly every RPC is, marshaled in one pass: the whole Call
//! pulled up inline behind a fixed header, the Reply inline or its page
//! data through one Write chunk; or the Call's page data through one Read
//! chunk and the Reply inline (`proto::marshal_fast`, which the general
//! planner and encoder hold to their decisions and bytes). No chunk list,
//! header description or strategy is built for them; everything else goes
//! through [`Conn::send`]'s general path.

use super::conn::{Conn, Offered, Pending};
use super::reg::{add_some, RegList, Segs, Span};
use super::send_buf::fill_read_chunk_inline;
use crate::proto::marshal_fast::{
    encode_fast_header, encode_fast_read_header, FastPlan, FastReadPlan, FastResult,
};
use crate::proto::msg::Segment;
use crate::proto::planner::RpcShape;
use crate::rust::module::trace::{self, ChunkType};
use crate::rust::rdma::send_ring::SendRingHead;
use crate::rust::sunrpc::xprt::RpcRqst;
use kernel::prelude::*;
use kernel::sync::ArcBorrow;

impl Conn {
    /// Marshals and posts a call whose shape [`plan_fast`] took as `fast`,
    /// in a Send context of the ring whose head the caller holds.
    ///
    /// [`plan_fast`]: crate::proto::marshal_fast::plan_fast
    pub(super) fn send_fast(
        &self,
        this: ArcBorrow<'_, Self>,
        head: &mut SendRingHead<Conn>,
        rqst: &RpcRqst<'_>,
        xid: u32,
        rpc: &RpcShape,
        fast: FastPlan,
    ) -> Result {
        // The Send's slot; the MRs take theirs as they are registered.
        if !self.slots.try_take(1) {
            return Err(self.no_send_slot(this));
        }
        let mut mrs = RegList::new();
        let mut writes = Segs::new();
        let mut offered = Offered::default();
        if let FastResult::WriteChunk { write_pad, .. } = fast.result {
            let recv = &rpc.recv;
            let span = Span::recv(recv.head_len, recv.page_len);
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
            let mut bytes = 0u32;
            for (i, s) in writes.as_slice().iter().enumerate() {
                let is_last = i + 1 == writes.len();
                trace::xprtrdma_chunk_write(rqst, s.handle, s.length, s.offset, is_last);
                bytes = bytes.saturating_add(s.length);
            }
            offered.write = bytes;
        }
        let writes = writes.as_slice();
        let call_len = fast.call_len as usize;
        let mut hdrlen = 0;
        let built = self
            .send_ctxt(head, 1 + self.reg_slots(&mrs))
            .and_then(|mut ctxt| {
                let limit = self.inline_send() as usize;
                let credits = self.settings.max_requests;
                ctxt.fill(limit, |out| {
                    let hlen = encode_fast_header(xid, credits, writes, out).ok_or(EMSGSIZE)?;
                    hdrlen = hlen;
                    let end = hlen.checked_add(call_len).ok_or(EMSGSIZE)?;
                    rqst.read(0, out.get_mut(hlen..end).ok_or(EMSGSIZE)?)?;
                    Ok((end, 0))
                })?;
                Ok(ctxt)
            });
        let ctxt = match built {
            Ok(ctxt) => ctxt,
            Err(e) => return Err(self.unbuilt(this, rqst, mrs, e)),
        };
        let result = match fast.result {
            FastResult::Inline => ChunkType::Inline,
            FastResult::WriteChunk { .. } => ChunkType::WriteList,
        };
        trace::xprtrdma_marshal(rqst, hdrlen, ChunkType::Pullup, result);
        let send_len = hdrlen.saturating_add(call_len);
        let pending = Pending {
            xid,
            regs: mrs,
            offered,
        };
        // Nothing mapped for the Send: unsignaled but for one in
        // `send_batch`.
        self.post_call(this, rqst, pending, ctxt, false, send_len)?;
        // As `Conn::count_sent` counts a pulled-up call: the bytes moved
        // behind the head, and the Write chunk's.
        let behind_head = u64::from(rpc.send.page_len).saturating_add(u64::from(rpc.send.tail_len));
        add_some(&self.stats.pullup_copy_count, behind_head);
        if !writes.is_empty() {
            add_some(&self.stats.write_chunk_count, writes.len() as u64);
            add_some(&self.stats.total_rdma_request, u64::from(offered.write));
        }
        Ok(())
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
        xid: u32,
        rpc: &RpcShape,
        fast: FastReadPlan,
    ) -> Result {
        if !self.slots.try_take(1) {
            return Err(self.no_send_slot(this));
        }
        let snd = &rpc.send;
        let mut mrs = RegList::new();
        let mut reads = Segs::new();
        let span = Span::send(snd.head_len, snd.page_len);
        if let Err(e) = self.register(rqst, span, &mut mrs, &mut reads) {
            return Err(self.chunks_failed(this, rqst, xid, mrs, e));
        }
        let position = fast.position;
        for (i, s) in reads.as_slice().iter().enumerate() {
            let is_last = i + 1 == reads.len();
            trace::xprtrdma_chunk_read(rqst, position, s.handle, s.length, s.offset, is_last);
        }
        let reads = reads.as_slice();
        let mut hdrlen = 0;
        let mut send_len = 0;
        let built = self
            .send_ctxt(head, 1 + self.reg_slots(&mrs))
            .and_then(|mut ctxt| {
                let limit = self.inline_send() as usize;
                let credits = self.settings.max_requests;
                ctxt.fill(limit, |out| {
                    let hlen = encode_fast_read_header(xid, credits, position, reads, out)
                        .ok_or(EMSGSIZE)?;
                    hdrlen = hlen;
                    let at = fill_read_chunk_inline(rqst, snd, out, hlen)?;
                    send_len = at;
                    Ok((at, 0))
                })?;
                Ok(ctxt)
            });
        let ctxt = match built {
            Ok(ctxt) => ctxt,
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
