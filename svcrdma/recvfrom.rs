// SPDX-License-Identifier: GPL-2.0

//! `xpo_recvfrom` (C `svc_rdma_recvfrom.c`): takes the next completed
//! Receive or Call being read, decodes the transport header with the
//! protocol core (the common Calls in one pass), answers what is wrong
//! with `RDMA_ERROR`, and serves a Call without Read chunks from its
//! Receive buffer, or lays it out in the request's pages. Read chunks are
//! pulled with RDMA Reads no thread waits for (`read_call.rs`, `rw.rs`);
//! a later `xpo_recvfrom` finishes the Call.

use super::conn::{usize_of, CallCtxt, Conn};
use super::read::{plan_chunk_reads, plan_reads, CallMsg, ReadPiece, ReadWork};
use super::read_call::copy_read;
use super::read_sinks::PagedSinks;
use super::recv_queue::Next;
use super::stats::{stat_add, Stat};
use crate::proto::backchannel::is_backchannel_reply;
use crate::proto::call_fast::{decode_call_fast, FastCall};
use crate::proto::decode::decode_call;
use crate::proto::encode::{encode_error_for, ErrorReply};
use crate::proto::msg::{ChunkLists, DecodeError, ErrorAction, ErrorBody};
use crate::proto::pcl::ParsedChunks;
use crate::proto::pieces::Pieces;
use crate::proto::svc_call::{CallLayout, PagedCall, Source, StepError};
use crate::rust::module::trace::{self, BadRequest};
use crate::rust::rdma::recv_slots::HeldRecv;
use crate::rust::sunrpc::page_sinks::PageSinks;
use crate::rust::sunrpc::svc::SvcRqst;
use kernel::page::PAGE_SIZE;
use kernel::prelude::*;
use kernel::sync::Arc;

/// What [`Conn::process`] made of a received message.
enum Processed {
    /// Dealt with: the Call laid out in the request's pages, if it was
    /// one to process.
    Done(Option<KBox<CallCtxt>>),
    /// A Call to serve in place: bytes `at..at + len` of the message.
    InPlace(KBox<CallCtxt>, usize, usize),
    /// A Call whose Read chunks are to be read (into pages of its own,
    /// the state's `paged`, when it has a paged layout): the Reads start
    /// once the message's bytes are no longer borrowed, so that the
    /// Receive they are in can be kept with them.
    Read(KBox<CallCtxt>),
}

impl Conn {
    /// `xpo_recvfrom`: the next Call, if any (C `svc_rdma_recvfrom`).
    /// Calls whose Reads completed come first, then Calls waiting for send
    /// queue room if there is room, then the receive ring.
    // Out of line, and `Conn::resume` too (see there).
    #[inline(never)]
    pub(super) fn recvfrom(&self, rqst: &mut SvcRqst) -> Option<KBox<CallCtxt>> {
        let s = &self.shared;
        let (next, spare, may_hold) = {
            let mut r = s.rq.ring.lock();
            let next = if let Some(op) = r.ready.pop() {
                Next::Op(op)
            } else if let Some(op) = r.sq_wait.pop_if(|| s.sq.read_room()) {
                Next::Op(op)
            } else if let Some((slot, len)) = r.pop() {
                Next::Recv(slot, len)
            } else {
                rqst.clear_data();
                // Cleared before the gate notes the starvation, so the
                // release that makes room sets `XPT_DATA` after this.
                if !r.sq_wait.is_empty() && !s.sq.starve() {
                    s.link.data_ready();
                }
                Next::Idle
            };
            // The last work taken: `XPT_DATA` cleared now, not by a
            // thread that `svc_xprt_received` would wake to find nothing
            // (C clears it only on finding the queue empty, so a server
            // thread is woken for nothing after each Call). A completion
            // that queues more sets it again under this lock.
            if !matches!(next, Next::Idle) && r.is_empty() {
                rqst.clear_data();
            }
            // The state of the request, if this turns out a Call: the
            // allocation of a released one, taken under the lock at hand,
            // and whether the Call may be read in place (a hold on its
            // Receive, given back with the repost if it is not).
            let (spare, may_hold) = match next {
                Next::Recv(..) => (r.ctxts.pop(), r.try_hold()),
                // A Call being read has its state already (`ReadWork`).
                _ => (None, false),
            };
            (next, spare, may_hold)
        };
        rqst.received();
        let (recv, byte_len) = match next {
            Next::Idle => return None,
            Next::Op(op) => return self.resume(rqst, op),
            Next::Recv(recv, len) => (recv, len),
        };
        stat_add(Stat::Recv, 1);
        // Decoded where the device put it (C decodes `rc_recv_buf` in
        // place). A Call without Read chunks is served from there too
        // (`rq_arg` points into the buffer) when the hold allows: its
        // Receive goes with the request and is posted again when the
        // request is released. Otherwise the Receive is posted again once
        // the message is dealt with (`unkept`).
        let recvs = &s.rq.recvs;
        let held = match usize_of(byte_len) {
            Ok(len) => recvs.hold(recv, len),
            Err(_) => Err(recv),
        };
        let held = match held {
            Ok(held) => held,
            Err(recv) => {
                self.repost(recv, may_hold);
                return None;
            }
        };
        let processed = self.process(rqst, recvs.bytes(&held), spare, may_hold);
        let (res, unkept) = match processed {
            Err(e) => (Err(e), Some(held)),
            Ok(Processed::Done(ctxt)) => (Ok(ctxt), Some(held)),
            Ok(Processed::InPlace(ctxt, at, len)) => {
                match rqst.set_arg_in_place(recvs, held, at, len) {
                    Ok(()) => (Ok(Some(ctxt)), None),
                    Err((e, held)) => (Err(e), Some(held)),
                }
            }
            Ok(Processed::Read(ctxt)) => {
                let (res, back) = self.read_call(held, ctxt, may_hold);
                (res.map(|()| None), back)
            }
        };
        if let Some(held) = unkept {
            self.repost(held.into_recv(), may_hold);
        }
        res.unwrap_or_else(|e| {
            crate::pr_warn_ratelimited!("svcrdma: dropping a call: {:?}\n", e);
            None
        })
    }

    /// Starts the RDMA Reads of a Call whose received message `held`
    /// holds. The Receive stays with the Call while it is read when
    /// `may_hold` (C keeps `rc_recv_buf` with the receive context); else
    /// the message is copied. Returns the Receive to post again now, if
    /// the Call does not keep it.
    fn read_call(
        &self,
        held: HeldRecv,
        ctxt: KBox<CallCtxt>,
        may_hold: bool,
    ) -> (Result, Option<HeldRecv>) {
        let s = &self.shared;
        let (msg, unkept) = if may_hold {
            (CallMsg::Held(held), None)
        } else {
            match CallMsg::copy(s.rq.recvs.bytes(&held)) {
                Ok(msg) => (msg, Some(held)),
                Err(e) => return (Err(e), Some(held)),
            }
        };
        // Refused, the Call goes with its Receive: the connection is
        // closed.
        self.start_reads(ReadWork::new(msg, ctxt));
        (Ok(()), unkept)
    }

    /// Sends `RDMA_ERROR` for a call that failed to decode.
    fn send_decode_error(&self, msg: &[u8], err: &DecodeError) {
        let s = &self.shared;
        crate::pr_warn_ratelimited!("svcrdma: bad call header ({})\n", err.name());
        let action = err.action();
        let why = match (err, action) {
            (_, ErrorAction::Drop) => BadRequest::Drop,
            (DecodeError::BadVersion(_), _) => BadRequest::Version,
            (DecodeError::UnknownProc(_) | DecodeError::UnsupportedProc(_), _) => BadRequest::Proc,
            _ => BadRequest::Parse,
        };
        trace::svcrdma_decode_err(why, msg);
        let mut out = [0u8; 32];
        if let Ok(Some(n)) = encode_error_for(msg, err, s.credits, &mut out) {
            stat_add(Stat::ErrSent, 1);
            let xid = msg
                .get(..4)
                .and_then(|x| x.try_into().ok())
                .map_or(0, u32::from_be_bytes);
            match action {
                ErrorAction::ErrVers => trace::svcrdma_err_vers(xid),
                _ => trace::svcrdma_err_chunk(xid),
            }
            let _ = self.send_bytes(out.get(..n).unwrap_or(&[]), None);
        }
    }

    /// Sends `RDMA_ERROR`/`ERR_CHUNK` for the call with this XID.
    pub(super) fn send_err_chunk(&self, xid: u32) {
        let reply = ErrorReply {
            xid,
            vers: crate::proto::msg::RPCRDMA_VERSION,
            credits: self.shared.credits,
            body: ErrorBody::Chunk,
        };
        let mut out = [0u8; 32];
        if let Ok(n) = reply.encode(&mut out) {
            stat_add(Stat::ErrSent, 1);
            trace::svcrdma_err_chunk(xid);
            let _ = self.send_bytes(out.get(..n).unwrap_or(&[]), None);
        }
    }

    /// Works on a received message: answers what is wrong with it,
    /// assembles an inline Call, or starts the RDMA Reads of its chunks.
    /// The common Calls are decoded in one pass straight into the
    /// request's state (`decode_call_fast`); the others go the general
    /// way.
    fn process(
        &self,
        rqst: &mut SvcRqst,
        msg: &[u8],
        spare: Option<KBox<CallCtxt>>,
        may_hold: bool,
    ) -> Result<Processed> {
        let s = &self.shared;
        let mut ctxt = CallCtxt::reuse_or_new(spare)?;
        let fast = decode_call_fast(msg, &s.limits, || {
            let store = ctxt.call.store_inline().ok()?;
            Some((store.chunks.as_mut_slice(), store.segs.as_mut_slice()))
        });
        match fast {
            Some(f) => self.process_fast(rqst, msg, ctxt, f, may_hold),
            None => self.process_general(rqst, msg, ctxt, may_hold),
        }
    }

    /// [`Self::process`] for a Call `decode_call_fast` took: the inline
    /// body is the Call, all of it, or the Call's one Read chunk is to be
    /// read.
    fn process_fast(
        &self,
        rqst: &mut SvcRqst,
        msg: &[u8],
        mut ctxt: KBox<CallCtxt>,
        f: FastCall,
        may_hold: bool,
    ) -> Result<Processed> {
        let inline = msg.get(f.header_len..).ok_or(EINVAL)?;
        trace::svcrdma_decode_rqst(msg, f.header_len);
        if f.no_chunks
            && is_backchannel_reply(f.xid, &ChunkLists::default(), inline)
            && rqst.has_backchannel()
        {
            self.backchannel_reply(rqst, f.xid, inline, f.credits);
            return Ok(Processed::Done(None));
        }
        if f.read_chunk {
            let c = &mut *ctxt;
            c.call.set_decoded(f.xid, f.header_len, f.layout);
            // An NFS WRITE's data read into pages of its own: laid out
            // and planned from the chunk the decoder stored, with no
            // lists parsed again.
            let s = &self.shared;
            let (arg_max, arg_pages) = (rqst.arg_max(), rqst.arg_pages());
            let paged = c
                .call
                .only_read_chunk()
                .filter(|_| s.read_sinks.land_in_pages())
                .and_then(|(chunk, segs)| {
                    let (pos, len) = (chunk.position, chunk.length);
                    PagedCall::of_one_chunk(pos, len, inline.len(), arg_max, PAGE_SIZE, arg_pages)
                        .map(|layout| (layout, segs))
                });
            if let Some((layout, segs)) = paged {
                let piece = s.read_sinks.piece_size();
                // The usual WRITE: one segment, one Read into pages that
                // need no registration, posted from the piece itself.
                let single = s
                    .read_sinks
                    .direct()
                    .then(|| Pieces::single(segs, usize_of(layout.chunk_len).ok()?, piece))
                    .flatten();
                if single.is_some() {
                    c.read_pieces.clear();
                } else {
                    plan_chunk_reads(segs, layout.chunk_len, piece, &mut c.read_pieces)?;
                }
                c.single_read = single;
                let spare = c.spare_sinks.take();
                let pages = self.map_paged(rqst, layout, spare)?;
                PagedSinks::set(&mut c.paged, Some(pages));
                return Ok(Processed::Read(ctxt));
            }
            let spare = c.spare_sinks.take();
            let pcl = c.call.pcl()?;
            let Some(layout) = CallLayout::new(&pcl, inline.len(), rqst.arg_max()) else {
                self.send_err_chunk(f.xid);
                return Ok(Processed::Done(None));
            };
            if !layout.needs_reads() {
                // Nothing to read after all (zero-length segments): as on
                // the general path.
                c.spare_sinks = spare;
                return self.serve_inline(rqst, ctxt, f.header_len, inline, may_hold);
            }
            PagedSinks::set(
                &mut c.paged,
                self.paged_sinks(rqst, &pcl, inline.len(), spare)?,
            );
            let piece = self.shared.read_sinks.read_piece(c.paged.is_some());
            plan_reads(&pcl, piece, &mut c.read_pieces)?;
            return Ok(Processed::Read(ctxt));
        }
        // The request's pages must hold the Call, as `CallLayout::new`
        // checks on the general path.
        let fits = u32::try_from(inline.len()).is_ok_and(|n| n > 0 && n <= rqst.arg_max());
        if !fits {
            self.send_err_chunk(f.xid);
            return Ok(Processed::Done(None));
        }
        ctxt.call.set_decoded(f.xid, f.header_len, f.layout);
        self.serve_inline(rqst, ctxt, f.header_len, inline, may_hold)
    }

    /// Serves a Call that is all inline, `inline` at byte `at` of the
    /// received message, whose size the request's pages were checked to
    /// hold: in place when `may_hold`, else copied into the request's
    /// pages (its Receive is then posted again at once).
    // Inlined into `process_fast`: a call of its own cost every Call served
    // in place (a GETATTR, a READ) 29 instructions (kcount).
    #[inline(always)]
    fn serve_inline(
        &self,
        rqst: &mut SvcRqst,
        ctxt: KBox<CallCtxt>,
        at: usize,
        inline: &[u8],
        may_hold: bool,
    ) -> Result<Processed> {
        if may_hold {
            return Ok(Processed::InPlace(ctxt, at, inline.len()));
        }
        stat_add(Stat::CallsCopied, 1);
        rqst.set_arg(u32::try_from(inline.len()).map_err(|_| EMSGSIZE)?)?;
        rqst.write_arg(0, inline)?;
        Ok(Processed::Done(Some(ctxt)))
    }

    /// C svc_rdma_handle_bc_reply: a Reply to one of nfsd's callbacks.
    fn backchannel_reply(&self, rqst: &SvcRqst, xid: u32, inline: &[u8], credits: u32) {
        stat_add(Stat::BcReplies, 1);
        if let Err(e) = rqst.backchannel_reply(xid, inline, credits) {
            crate::pr_warn_ratelimited!("svcrdma: backchannel reply dropped: {:?}\n", e);
        }
    }

    /// [`Self::process`] for every other message, decoded by the general
    /// decoder into `ctxt`.
    fn process_general(
        &self,
        rqst: &mut SvcRqst,
        msg: &[u8],
        mut ctxt: KBox<CallCtxt>,
        may_hold: bool,
    ) -> Result<Processed> {
        let s = &self.shared;
        let hdr = match decode_call(msg, &s.limits) {
            Ok(h) => h,
            Err(e) => {
                self.send_decode_error(msg, &e);
                return Ok(Processed::Done(None));
            }
        };
        let xid = hdr.xid;
        let Some((lists, inline)) = hdr.body.chunks_and_inline() else {
            return Ok(Processed::Done(None));
        };
        trace::svcrdma_decode_rqst(msg, msg.len().saturating_sub(inline.len()));
        if is_backchannel_reply(xid, lists, inline) && rqst.has_backchannel() {
            self.backchannel_reply(rqst, xid, inline, hdr.credits);
            return Ok(Processed::Done(None));
        }
        // The request's state, its chunk lists parsed straight into it.
        let c = &mut *ctxt;
        let spare = c.spare_sinks.take();
        let store = c.call.store_for(lists)?;
        let Ok(pcl) = ParsedChunks::build(
            lists,
            store.chunks.as_mut_slice(),
            store.segs.as_mut_slice(),
        ) else {
            self.send_err_chunk(xid);
            return Ok(Processed::Done(None));
        };
        // Checked before anything is read: the request's pages must hold
        // the Call (a call chunk of 4 MiB and more is refused here, never
        // allocated), and its regions must be consistent.
        let Some(layout) = CallLayout::new(&pcl, inline.len(), rqst.arg_max()) else {
            self.send_err_chunk(xid);
            return Ok(Processed::Done(None));
        };
        if !layout.needs_reads() {
            // The Call is the inline body, all of it (`layout` checked
            // that the request's pages hold it).
            let layout = pcl.layout();
            c.call.set(msg, &hdr, inline, layout);
            c.spare_sinks = spare;
            let at = msg.len().checked_sub(inline.len()).ok_or(EINVAL)?;
            return self.serve_inline(rqst, ctxt, at, inline, may_hold);
        }
        PagedSinks::set(
            &mut c.paged,
            self.paged_sinks(rqst, &pcl, inline.len(), spare)?,
        );
        let piece = s.read_sinks.read_piece(c.paged.is_some());
        plan_reads(&pcl, piece, &mut c.read_pieces)?;
        let layout = pcl.layout();
        c.call.set(msg, &hdr, inline, layout);
        Ok(Processed::Read(ctxt))
    }

    /// The pages a Call's single Read chunk (an NFS WRITE's data) is read
    /// into, without a copy, when the connection's sinks land in pages and
    /// the Call has such a layout (made in `spare`'s allocations if it
    /// can be); `None` when the Reads land in cached sinks, to be copied
    /// into the request's pages.
    fn paged_sinks(
        &self,
        rqst: &mut SvcRqst,
        pcl: &ParsedChunks<'_>,
        inline_len: usize,
        spare: Option<Arc<PageSinks>>,
    ) -> Result<Option<PagedSinks>> {
        let s = &self.shared;
        if !s.read_sinks.land_in_pages() {
            return Ok(None);
        }
        let Some(l) = PagedCall::new(pcl, inline_len, PAGE_SIZE, rqst.arg_pages()) else {
            return Ok(None);
        };
        self.map_paged(rqst, l, spare).map(Some)
    }

    /// The pages of a Call's Read chunk laid out as `layout`, taken from
    /// `rqst` and mapped (in `spare`'s allocations if it can be), where
    /// the connection's Reads land in them. The pages come from this
    /// request, as in C: svc_alloc_arg refills its slots in bulk.
    #[inline(always)]
    fn map_paged(
        &self,
        rqst: &mut SvcRqst,
        layout: PagedCall,
        spare: Option<Arc<PageSinks>>,
    ) -> Result<PagedSinks> {
        let s = &self.shared;
        let sinks = s.ep.map_arg_pages(rqst, layout.pages, spare)?;
        s.read_sinks.paged(layout, sinks)
    }

    /// [`Self::assemble`] with the Call's layout in `rqst`'s pages already
    /// checked (`CallLayout::new` with `rqst`'s `arg_max`).
    pub(super) fn assemble_in(
        &self,
        rqst: &mut SvcRqst,
        xid: u32,
        layout: &CallLayout<'_>,
        inline: &[u8],
        pieces: Option<&[ReadPiece]>,
    ) -> Result<bool> {
        rqst.set_arg(layout.total())?;
        for step in layout.steps() {
            let step = match step {
                Ok(step) => step,
                Err(StepError::BadRegion) => {
                    self.send_err_chunk(xid);
                    return Ok(false);
                }
                Err(StepError::Inconsistent) => return Err(EINVAL),
            };
            let at = step.at;
            match step.source {
                Source::Inline { offset, len } => {
                    let start = usize_of(offset)?;
                    let end = start.checked_add(usize_of(len)?).ok_or(EINVAL)?;
                    rqst.write_arg(at, inline.get(start..end).ok_or(EINVAL)?)?;
                }
                Source::Chunk { src, start, len } => copy_read(rqst, pieces, src, start, len, at)?,
                Source::Pad { len } => {
                    rqst.write_arg(at, [0u8; 4].get(..usize_of(len)?).ok_or(EINVAL)?)?;
                }
            }
        }
        Ok(true)
    }
}
