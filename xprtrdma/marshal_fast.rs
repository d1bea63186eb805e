// SPDX-License-Identifier: GPL-2.0

//! The calls nearly every RPC is, marshaled in one pass: the whole Call
//! pulled up inline behind a fixed header, the Reply inline or its page
//! data through one Write chunk; or the Call's page data through one Read
//! chunk and the Reply inline (`proto::marshal_fast`, which the general
//! planner and encoder hold to their decisions and bytes). No chunk list,
//! header description or strategy is built for them; everything else goes
//! through [`Conn::send`]'s general path.

use super::conn::{Conn, Offered, Pending, ReqState};
use super::frwr::unmap_mr;
use super::reg::{add, add_some, Reg, RegList, Segs, Span, Strategy};
use super::send_buf::fill_read_chunk_inline;
use super::send_buf::SLOTS_PER_MR;
use crate::proto::marshal_fast::{
    encode_fast_header, encode_fast_read_header, FastPlan, FastReadPlan, FastResult,
};
use crate::proto::msg::Segment;
use crate::proto::planner::{RpcShape, XdrBufShape};
use crate::rust::module::trace::{self, ChunkType};
use crate::rust::rdma::send_ring::{SendCtxt, SendRingHead};
use crate::rust::sunrpc::xprt::{post_send_after_regs, Mr, RpcRqst};
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
        let call_len = fast.call_len as usize;
        // As `Conn::count_sent` counts a pulled-up call: the bytes moved
        // behind the head.
        let behind_head = u64::from(rpc.send.page_len).saturating_add(u64::from(rpc.send.tail_len));
        let FastResult::WriteChunk { write_pad, .. } = fast.result else {
            return self.send_fast_inline(this, head, rqst, xid, call_len, behind_head);
        };
        {
            let state = rqst.state::<ReqState>();
            if let Some(state) = state.filter(|_| self.settings.strategy == Strategy::Fmr) {
                let span = Span::recv(rpc.recv.head_len, rpc.recv.page_len);
                let call = FastCall {
                    xid,
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
        }
        // The Send's slot; the MRs take theirs as they are registered.
        if !self.slots.try_take(1) {
            return Err(self.no_send_slot(this));
        }
        let mut mrs = RegList::new();
        let mut writes = Segs::new();
        let mut offered = Offered::default();
        {
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
        let slots = 1 + self.reg_slots(&mrs);
        let (ctxt, hdrlen) = match self.fast_call_ctxt(head, slots, rqst, xid, writes, call_len) {
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
        add_some(&self.stats.pullup_copy_count, behind_head);
        add_some(&self.stats.write_chunk_count, writes.len() as u64);
        add_some(&self.stats.total_rdma_request, u64::from(offered.write));
        Ok(())
    }

    /// [`Self::send_fast`] for a call whose result comes inline (most
    /// metadata): nothing is registered, and no list of registrations is
    /// made or dropped.
    fn send_fast_inline(
        &self,
        this: ArcBorrow<'_, Self>,
        head: &mut SendRingHead<Conn>,
        rqst: &RpcRqst<'_>,
        xid: u32,
        call_len: usize,
        behind_head: u64,
    ) -> Result {
        if !self.slots.try_take(1) {
            return Err(self.no_send_slot(this));
        }
        let (ctxt, hdrlen) = match self.fast_call_ctxt(head, 1, rqst, xid, &[], call_len) {
            Ok(built) => built,
            Err(e) => return Err(self.unbuilt(this, rqst, RegList::new(), e)),
        };
        trace::xprtrdma_marshal(rqst, hdrlen, ChunkType::Pullup, ChunkType::Inline);
        rqst.mark_sent();
        // Nothing mapped for the Send: unsignaled but for one in
        // `send_batch`.
        match ctxt.post(&self.ep, false) {
            Ok(unsignaled) => {
                trace::xprtrdma_post_send(rqst, hdrlen.saturating_add(call_len));
                if unsignaled {
                    add(&self.counters().unsignaled_sends, 1);
                }
            }
            Err(e) => return Err(self.unposted(this, rqst, e, Some(RegList::new()), 0)),
        }
        add_some(&self.stats.pullup_copy_count, behind_head);
        Ok(())
    }

    /// A Send context that frees `slots` send queue slots when it retires,
    /// filled with the fast header of a call whose result comes inline or
    /// through the Write chunk of `writes`, and the whole call of
    /// `call_len` bytes behind it; with the header's length.
    fn fast_call_ctxt<'a>(
        &'a self,
        head: &'a mut SendRingHead<Conn>,
        slots: u32,
        rqst: &RpcRqst<'_>,
        xid: u32,
        writes: &[Segment],
        call_len: usize,
    ) -> Result<(SendCtxt<'a, Conn>, usize)> {
        let mut ctxt = self.send_ctxt(head, slots)?;
        let limit = self.inline_send() as usize;
        let credits = self.settings.max_requests;
        let mut hdrlen = 0;
        ctxt.fill(limit, |out| {
            let hlen = encode_fast_header(xid, credits, writes, out).ok_or(EMSGSIZE)?;
            hdrlen = hlen;
            let end = hlen.checked_add(call_len).ok_or(EMSGSIZE)?;
            rqst.read(0, out.get_mut(hlen..end).ok_or(EMSGSIZE)?)?;
            Ok((end, 0))
        })?;
        Ok((ctxt, hdrlen))
    }

    /// A Send context that frees `slots` send queue slots when it retires,
    /// filled with the fast header of a call whose page data goes as the
    /// Read chunk of `reads` at XDR `position`, and its head and tail
    /// behind it; with the header's length and the Send's.
    #[expect(clippy::too_many_arguments)]
    fn fast_read_ctxt<'a>(
        &'a self,
        head: &'a mut SendRingHead<Conn>,
        slots: u32,
        rqst: &RpcRqst<'_>,
        xid: u32,
        position: u32,
        reads: &[Segment],
        snd: &XdrBufShape,
    ) -> Result<(SendCtxt<'a, Conn>, usize, usize)> {
        let mut ctxt = self.send_ctxt(head, slots)?;
        let limit = self.inline_send() as usize;
        let credits = self.settings.max_requests;
        let (mut hdrlen, mut send_len) = (0, 0);
        ctxt.fill(limit, |out| {
            let hlen =
                encode_fast_read_header(xid, credits, position, reads, out).ok_or(EMSGSIZE)?;
            hdrlen = hlen;
            send_len = fill_read_chunk_inline(rqst, snd, out, hlen)?;
            Ok((send_len, 0))
        })?;
        Ok((ctxt, hdrlen, send_len))
    }

    /// [`Self::send_fast`] and [`Self::send_fast_read`] for a call whose
    /// one chunk (`span`) one pool MR covers (`memreg=fmr`), registered,
    /// built and posted under the request's lock in one section, in place
    /// in the request's state (C `frwr_map` onto `rl_registered`,
    /// `frwr_send`): the MR is the one the request kept from its last
    /// reply, else the pool's. `None` when one MR does not cover the
    /// chunk: nothing was registered or taken, and the caller registers it
    /// as usual.
    fn send_fast_in_place(
        &self,
        this: ArcBorrow<'_, Self>,
        head: &mut SendRingHead<Conn>,
        rqst: &RpcRqst<'_>,
        state: &ReqState,
        span: Span,
        call: FastCall<'_>,
    ) -> Option<Result> {
        let xid = call.xid;
        // The Send's slot and the MR's two (its REG_MR's and the one of its
        // LOCAL_INV), taken at once.
        if !self.slots.try_take(1 + SLOTS_PER_MR) {
            return Some(Err(self.no_send_slot(this)));
        }
        let (step, stale) = state.marshal_in_place(|p, spare| {
            let mut mr = match spare.take() {
                Some(mr) if mr.is_of(&self.ep) => mr,
                // Of another connection (cannot be: its shutdown took them
                // all): dropped once the lock is left, and the call
                // registered as usual.
                Some(other) => return InPlaceStep::Fallback(Some(other)),
                None => match self.get_mr() {
                    Ok(mr) => mr,
                    Err(e) => {
                        trace::xprtrdma_nomrs_err(&self.xprt, rqst);
                        return InPlaceStep::Failed(e);
                    }
                },
            };
            let writable = span.writable();
            match mr.map_rqst(rqst, span.rcv, span.offset, span.len, writable) {
                Ok(n) if n == span.len => {}
                covered => {
                    self.keep_or_recycle(spare, mr);
                    return match covered {
                        Ok(n) if n > 0 => InPlaceStep::Fallback(None),
                        _ => InPlaceStep::Failed(EIO),
                    };
                }
            }
            trace::xprtrdma_mr_map(rqst, &mr);
            mr.prepare_reg(writable);
            trace::xprtrdma_mr_fastreg(rqst, &mr);
            let s = mr.segment();
            let mut segs = [Segment::new(s.handle, s.length, s.offset); 2];
            let mut nsegs = 1;
            let pad = match call.chunk {
                FastChunk::Write { write_pad, .. } if write_pad => self.write_pad.as_ref(),
                _ => None,
            };
            if let Some((pad, _)) = pad {
                let s = pad.segment();
                segs[1] = Segment::new(s.handle, s.length, s.offset);
                nsegs = 2;
            }
            let segs = segs.get(..nsegs).unwrap_or(&[]);
            let mut offered = 0u32;
            for (i, s) in segs.iter().enumerate() {
                let last = i + 1 == nsegs;
                match call.chunk {
                    FastChunk::Write { .. } => {
                        trace::xprtrdma_chunk_write(rqst, s.handle, s.length, s.offset, last);
                        offered = offered.saturating_add(s.length);
                    }
                    FastChunk::Read { position, .. } => trace::xprtrdma_chunk_read(
                        rqst, position, s.handle, s.length, s.offset, last,
                    ),
                }
            }
            // The Send frees its slot and the REG_MR's when it retires.
            let built = match call.chunk {
                FastChunk::Write { call_len, .. } => self
                    .fast_call_ctxt(head, 2, rqst, xid, segs, call_len)
                    .map(|(ctxt, hlen)| (ctxt, hlen, hlen.saturating_add(call_len))),
                FastChunk::Read { position, snd } => {
                    self.fast_read_ctxt(head, 2, rqst, xid, position, segs, snd)
                }
            };
            let (ctxt, hdrlen, send_len) = match built {
                Ok(built) => built,
                Err(e) => {
                    self.keep_or_recycle(spare, mr);
                    return InPlaceStep::Unbuilt(e);
                }
            };
            let (call_type, result_type) = match call.chunk {
                FastChunk::Write { .. } => (ChunkType::Pullup, ChunkType::WriteList),
                FastChunk::Read { .. } => (ChunkType::ReadList, ChunkType::Inline),
            };
            trace::xprtrdma_marshal(rqst, hdrlen, call_type, result_type);
            p.xid = xid;
            p.offered = Offered {
                write: offered,
                reply: 0,
            };
            // The list is empty (`marshal_in_place`): its first entry
            // needs no allocation.
            if let Err(Reg::Mr(mr)) = p.regs.push_within_capacity(Reg::Mr(mr)) {
                self.keep_or_recycle(spare, mr);
                return InPlaceStep::Unbuilt(ENOMEM);
            }
            rqst.mark_sent();
            // Nothing mapped for the Send: unsignaled but for one in
            // `send_batch`.
            match post_send_after_regs(&self.ep, ctxt, p.regs.mrs(), false) {
                Ok(unsignaled) => InPlaceStep::Posted {
                    unsignaled,
                    send_len,
                    segments: nsegs,
                    offered,
                },
                Err((e, posted)) => InPlaceStep::Unposted(e, core::mem::take(&mut p.regs), posted),
            }
        });
        // Outside the lock: deregistering may sleep.
        drop(stale);
        match step {
            InPlaceStep::Posted {
                unsignaled,
                send_len,
                segments,
                offered,
            } => {
                trace::xprtrdma_post_send(rqst, send_len);
                if unsignaled {
                    add(&self.counters().unsignaled_sends, 1);
                }
                add(&self.counters().registrations, 1);
                match call.chunk {
                    FastChunk::Write { behind_head, .. } => {
                        // As `Conn::count_sent` counts a pulled-up call.
                        add_some(&self.stats.pullup_copy_count, behind_head);
                        add_some(&self.stats.write_chunk_count, segments as u64);
                        add_some(&self.stats.total_rdma_request, u64::from(offered));
                    }
                    FastChunk::Read { .. } => {
                        add_some(&self.stats.read_chunk_count, segments as u64)
                    }
                }
                Some(Ok(()))
            }
            InPlaceStep::Fallback(other) => {
                // Taken again by the way the caller registers.
                self.slots.give(1 + SLOTS_PER_MR);
                drop(other);
                None
            }
            // `chunks_failed` and `unbuilt` give the Send's slot back.
            InPlaceStep::Failed(e) => {
                self.slots.give(SLOTS_PER_MR);
                Some(Err(self.chunks_failed(this, rqst, xid, RegList::new(), e)))
            }
            InPlaceStep::Unbuilt(e) => {
                self.slots.give(SLOTS_PER_MR);
                Some(Err(self.unbuilt(this, rqst, RegList::new(), e)))
            }
            InPlaceStep::Unposted(e, regs, posted) => {
                Some(Err(self.unposted(this, rqst, e, Some(regs), posted)))
            }
        }
    }

    /// Keeps `mr`, unmapped, as the request's `spare` if the connection
    /// keeps spares and the request has none; else back to the pool.
    fn keep_or_recycle(&self, spare: &mut Option<Mr>, mut mr: Mr) {
        unmap_mr(&mut mr);
        if self.keep_spares && spare.is_none() {
            *spare = Some(mr);
        } else {
            self.recycle_one(mr);
        }
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
        let snd = &rpc.send;
        let state = rqst.state::<ReqState>();
        if let Some(state) = state.filter(|_| self.settings.strategy == Strategy::Fmr) {
            let span = Span::send(snd.head_len, snd.page_len);
            let call = FastCall {
                xid,
                chunk: FastChunk::Read {
                    position: fast.position,
                    snd,
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
        let slots = 1 + self.reg_slots(&mrs);
        let built = self.fast_read_ctxt(head, slots, rqst, xid, position, reads, snd);
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

/// What [`Conn::send_fast_in_place`] needs of the call besides its
/// request.
#[derive(Clone, Copy)]
struct FastCall<'a> {
    xid: u32,
    chunk: FastChunk<'a>,
}

/// The one chunk of a call [`Conn::send_fast_in_place`] registers.
#[derive(Clone, Copy)]
enum FastChunk<'a> {
    /// The result's Write chunk ([`plan_fast`]), the call pulled up.
    ///
    /// [`plan_fast`]: crate::proto::marshal_fast::plan_fast
    Write {
        /// The chunk ends with the connection's write pad.
        write_pad: bool,
        /// The call's bytes.
        call_len: usize,
        /// The call's bytes behind its head (pulled up with it).
        behind_head: u64,
    },
    /// The call's page data as a Read chunk ([`plan_fast_read`]), its
    /// head and tail inline.
    ///
    /// [`plan_fast_read`]: crate::proto::marshal_fast::plan_fast_read
    Read { position: u32, snd: &'a XdrBufShape },
}

/// How a call went under its request's lock.
enum InPlaceStep {
    /// Posted: the counters' figures.
    Posted {
        unsignaled: bool,
        send_len: usize,
        segments: usize,
        offered: u32,
    },
    /// Nothing registered: one MR does not cover the Write chunk, or the
    /// request kept an MR of another connection (to drop outside the
    /// lock); the call is registered as usual.
    Fallback(Option<Mr>),
    /// Not registered.
    Failed(Error),
    /// Registered but not built: the MR went back.
    Unbuilt(Error),
    /// Not posted: the registrations and how many REG_MRs went out.
    Unposted(Error, RegList, usize),
}
