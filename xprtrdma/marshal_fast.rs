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
use crate::proto::marshal_fast::{
    encode_fast_header, encode_fast_read_header, FastPlan, FastReadPlan, FastResult,
};
use crate::proto::msg::Segment;
use crate::proto::planner::{RpcShape, XdrBufShape};
use crate::rust::module::trace::{self, ChunkType};
use crate::rust::rdma::send_ring::SendRingHead;
use crate::rust::sunrpc::xprt::RpcRqst;
use kernel::prelude::*;
use kernel::sync::ArcBorrow;

/// A call [`Conn::send_fast`] marshals, in one of the shapes
/// `proto::marshal_fast` plans.
#[derive(Clone, Copy)]
pub(super) enum Fast {
    /// The whole Call pulled up; the Reply inline or its page data through
    /// one Write chunk.
    Pullup(FastPlan),
    /// The Call's page data through one Read chunk, the rest inline; the
    /// Reply inline.
    ReadChunk(FastReadPlan),
}

impl Conn {
    /// Marshals and posts a call whose shape `proto::marshal_fast` took
    /// as `fast`, in a Send context of the ring whose head the caller
    /// holds.
    pub(super) fn send_fast(
        &self,
        this: ArcBorrow<'_, Self>,
        head: &mut SendRingHead<Conn>,
        rqst: &RpcRqst<'_>,
        xid: u32,
        rpc: &RpcShape,
        fast: Fast,
    ) -> Result {
        // The Send's slot; the MRs take theirs as they are registered.
        if !self.slots.try_take(1) {
            return Err(self.no_send_slot(this));
        }
        let mut mrs = RegList::new();
        let mut segs = Segs::new();
        let offered = match self.register_fast(rqst, rpc, fast, &mut mrs, &mut segs) {
            Ok(offered) => offered,
            Err(e) => return Err(self.chunks_failed(this, rqst, xid, mrs, e)),
        };
        let segs = segs.as_slice();
        let (mut hdrlen, mut send_len) = (0, 0);
        let built = self
            .send_ctxt(head, 1 + self.reg_slots(&mrs))
            .and_then(|mut ctxt| {
                let limit = self.inline_send() as usize;
                let credits = self.settings.max_requests;
                ctxt.fill(limit, |out| {
                    (hdrlen, send_len) = fill_fast(rqst, &rpc.send, fast, xid, credits, segs, out)?;
                    Ok((send_len, 0))
                })?;
                Ok(ctxt)
            });
        let ctxt = match built {
            Ok(ctxt) => ctxt,
            Err(e) => return Err(self.unbuilt(this, rqst, mrs, e)),
        };
        let (call, result) = match fast {
            Fast::Pullup(FastPlan {
                result: FastResult::Inline,
                ..
            }) => (ChunkType::Pullup, ChunkType::Inline),
            Fast::Pullup(_) => (ChunkType::Pullup, ChunkType::WriteList),
            Fast::ReadChunk(_) => (ChunkType::ReadList, ChunkType::Inline),
        };
        trace::xprtrdma_marshal(rqst, hdrlen, call, result);
        let pending = Pending {
            xid,
            regs: mrs,
            offered,
        };
        // Nothing mapped for the Send: unsignaled but for one in
        // `send_batch`.
        self.post_call(this, rqst, pending, ctxt, false, send_len)?;
        // As `Conn::count_sent` counts these calls.
        let n = segs.len() as u64;
        match fast {
            Fast::Pullup(_) => {
                // The bytes moved behind the head, and the Write chunk's.
                let snd = &rpc.send;
                let behind_head = u64::from(snd.page_len).saturating_add(u64::from(snd.tail_len));
                add_some(&self.stats.pullup_copy_count, behind_head);
                if n > 0 {
                    add_some(&self.stats.write_chunk_count, n);
                    add_some(&self.stats.total_rdma_request, u64::from(offered.write));
                }
            }
            Fast::ReadChunk(_) => add_some(&self.stats.read_chunk_count, n),
        }
        Ok(())
    }

    /// Registers the chunk of a call of `fast`'s shape into `segs`: the
    /// Reply's Write chunk with its pad segment, or the Call's Read chunk
    /// (C `rpcrdma_readch`). Returns what the server may write.
    fn register_fast(
        &self,
        rqst: &RpcRqst<'_>,
        rpc: &RpcShape,
        fast: Fast,
        mrs: &mut RegList,
        segs: &mut Segs,
    ) -> Result<Offered> {
        match fast {
            Fast::Pullup(FastPlan {
                result: FastResult::WriteChunk { write_pad, .. },
                ..
            }) => {
                let recv = &rpc.recv;
                self.register(rqst, Span::recv(recv.head_len, recv.page_len), mrs, segs)?;
                if let Some((mr, _)) = self.write_pad.as_ref().filter(|_| write_pad) {
                    let s = mr.segment();
                    segs.push(Segment::new(s.handle, s.length, s.offset))?;
                }
                let mut bytes = 0u32;
                for (i, s) in segs.as_slice().iter().enumerate() {
                    let is_last = i + 1 == segs.len();
                    trace::xprtrdma_chunk_write(rqst, s.handle, s.length, s.offset, is_last);
                    bytes = bytes.saturating_add(s.length);
                }
                Ok(Offered {
                    write: bytes,
                    ..Offered::default()
                })
            }
            Fast::Pullup(_) => Ok(Offered::default()),
            Fast::ReadChunk(plan) => {
                let snd = &rpc.send;
                self.register(rqst, Span::send(snd.head_len, snd.page_len), mrs, segs)?;
                for (i, s) in segs.as_slice().iter().enumerate() {
                    let is_last = i + 1 == segs.len();
                    let (h, l, o) = (s.handle, s.length, s.offset);
                    trace::xprtrdma_chunk_read(rqst, plan.position, h, l, o, is_last);
                }
                Ok(Offered::default())
            }
        }
    }
}

/// Writes a call of `fast`'s shape into its Send buffer `out`: the
/// header, `segs` its Write or Read chunk, then the Call's inline part:
/// all of it pulled up, or its head and its tail without the page data's
/// XDR pad (C `rpcrdma_prepare_readch`; none if the pad is all the tail
/// holds). Returns the header's length and the Send's.
fn fill_fast(
    rqst: &RpcRqst<'_>,
    snd: &XdrBufShape,
    fast: Fast,
    xid: u32,
    credits: u32,
    segs: &[Segment],
    out: &mut [u8],
) -> Result<(usize, usize)> {
    match fast {
        Fast::Pullup(plan) => {
            let hlen = encode_fast_header(xid, credits, segs, out).ok_or(EMSGSIZE)?;
            Ok((hlen, copy_call(rqst, 0, plan.call_len, out, hlen)?))
        }
        Fast::ReadChunk(plan) => {
            let hlen =
                encode_fast_read_header(xid, credits, plan.position, segs, out).ok_or(EMSGSIZE)?;
            let mut end = copy_call(rqst, 0, snd.head_len, out, hlen)?;
            if snd.tail_len > 3 {
                let pad = snd.tail_len & 3;
                let from = snd
                    .head_len
                    .checked_add(snd.page_len)
                    .and_then(|n| n.checked_add(pad))
                    .ok_or(EINVAL)?;
                end = copy_call(rqst, from, snd.tail_len - pad, out, end)?;
            }
            Ok((hlen, end))
        }
    }
}

/// Copies `len` bytes of the Call at `from` to byte `at` of `out`; returns
/// where they end.
#[inline(always)]
fn copy_call(rqst: &RpcRqst<'_>, from: u32, len: u32, out: &mut [u8], at: usize) -> Result<usize> {
    let end = at.checked_add(len as usize).ok_or(EMSGSIZE)?;
    rqst.read(from, out.get_mut(at..end).ok_or(EMSGSIZE)?)?;
    Ok(end)
}
