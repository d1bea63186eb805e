// SPDX-License-Identifier: GPL-2.0

//! The fast calls with one chunk that one MR covers (a READ's Write chunk,
//! a WRITE's Read chunk; `memreg=fmr`), registered, built and posted in
//! one section of their request's lock, in place in the request's state (C
//! `frwr_map` onto `rl_registered`, then `frwr_send`), with the MR the
//! request kept from its last reply (C `rl_free_mrs`) when it has one.

use super::conn::{Conn, Offered, ReqState};
use super::marshal::count_posted_to;
use super::reg::{counters, Reg, RegList, Span, Strategy};
use super::send_buf::{CallParts, SLOTS_PER_MR};
use super::stats::add_some;
use crate::proto::msg::Segment;
use crate::rust::module::trace::{self, ChunkType};
use crate::rust::rdma::send_ring::SendRingHead;
use crate::rust::sunrpc::xprt::{post_send_after_regs, Mr, RpcRqst};
use kernel::prelude::*;
use kernel::sync::ArcBorrow;

impl Conn {
    /// [`Self::send_fast`] and [`Self::send_fast_read`] for a call whose
    /// one chunk (`span`) one pool MR covers (`memreg=fmr`), registered,
    /// built and posted under the request's lock in one section, in place
    /// in the request's state (C `frwr_map` onto `rl_registered`,
    /// `frwr_send`): the MR is the one the request kept from its last
    /// reply, else the pool's. `None` when one MR does not cover the
    /// chunk: nothing was registered or taken, and the caller registers it
    /// as usual.
    pub(super) fn send_fast_in_place(
        &self,
        this: ArcBorrow<'_, Self>,
        head: &mut SendRingHead<Conn>,
        rqst: &RpcRqst<'_>,
        state: &ReqState,
        span: Span,
        call: FastCall,
    ) -> Option<Result> {
        let xid = call.xid;
        // The Send's slot and the MR's two (its REG_MR's and the one of its
        // LOCAL_INV), taken at once.
        if !self.slots.try_take(1 + SLOTS_PER_MR) {
            return Some(Err(self.no_send_slot(this)));
        }
        let (step, stale) = state.marshal_in_place(|p, spare| {
            let kept = spare.take();
            let reused = kept.is_some();
            let mut mr = match kept {
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
                    .fast_call_ctxt(head, 2, call.limit, rqst, xid, segs, call_len)
                    .map(|(ctxt, hlen)| (ctxt, hlen, hlen.saturating_add(call_len))),
                FastChunk::Read { position, call: c } => {
                    self.fast_read_ctxt(head, 2, call.limit, rqst, xid, position, segs, c)
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
            match post_send_after_regs(&self.ep, ctxt, p.regs.first_mr(), false) {
                Ok(unsignaled) => {
                    // Counted here, where the figures are: the counters
                    // take no lock.
                    let fmr = counters(Strategy::Fmr);
                    count_posted_to(fmr, rqst, send_len, unsignaled);
                    fmr.registrations.count(1);
                    if reused {
                        fmr.kept_mr_reuses.count(1);
                    }
                    match call.chunk {
                        FastChunk::Write { behind_head, .. } => {
                            self.count_write_call(behind_head, nsegs, offered)
                        }
                        FastChunk::Read { .. } => {
                            add_some(&self.stats.read_chunk_count, nsegs as u64)
                        }
                    }
                    InPlaceStep::Posted
                }
                // The registrations stay in the request, for `unposted` to
                // take back: moved out here, they would be moved again with
                // the step on every call's way out of the lock.
                Err((e, posted)) => InPlaceStep::Unposted(e, posted),
            }
        });
        // Outside the lock: deregistering may sleep.
        drop(stale);
        match step {
            InPlaceStep::Posted => Some(Ok(())),
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
            InPlaceStep::Unposted(e, posted) => {
                Some(Err(self.unposted(this, rqst, e, None, posted)))
            }
        }
    }

    /// Keeps `mr`, unmapped, as the request's `spare` when it may; else
    /// back to the pool.
    fn keep_or_recycle(&self, spare: &mut Option<Mr>, mr: Mr) {
        if let Some(mr) = self.keep_as_spare(spare, mr) {
            self.recycle_one(mr);
        }
    }
}

/// What [`Conn::send_fast_in_place`] needs of the call besides its
/// request.
#[derive(Clone, Copy)]
pub(super) struct FastCall {
    pub(super) xid: u32,
    /// The inline send size the call was planned with.
    pub(super) limit: usize,
    pub(super) chunk: FastChunk,
}

/// The one chunk of a call [`Conn::send_fast_in_place`] registers.
#[derive(Clone, Copy)]
pub(super) enum FastChunk {
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
    Read { position: u32, call: CallParts },
}

/// How a call went under its request's lock.
enum InPlaceStep {
    /// Posted, and counted.
    Posted,
    /// Nothing registered: one MR does not cover the Write chunk, or the
    /// request kept an MR of another connection (to drop outside the
    /// lock); the call is registered as usual.
    Fallback(Option<Mr>),
    /// Not registered.
    Failed(Error),
    /// Registered but not built: the MR went back.
    Unbuilt(Error),
    /// Not posted: how many REG_MRs went out (the registrations are left
    /// in the request).
    Unposted(Error, usize),
}
