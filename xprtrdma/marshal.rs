// SPDX-License-Identifier: GPL-2.0

//! Marshaling a call (C `rpc_rdma.c`, `rpcrdma_marshal_req`): the planner
//! chooses inline, Read chunk or long call for the call and inline, Write
//! chunk or Reply chunk for the result; this registers the chunks, encodes
//! the transport header, pulls the inline part into the Send buffer and
//! posts it.

use super::conn::{Conn, Offered, Pending, ReqState};
use super::reg::{RegList, Segs, Span, StrategyCounters, INLINE_SEGS};
use super::send_buf::fill_send;
use super::stats::bump;
use super::stats::{add, add_some};
use crate::proto::encode::{BodyRef, ChunkListsRef, HeaderRef};
use crate::proto::msg::{ReadSegment, Segment, RPCRDMA_VERSION};
use crate::proto::planner::{plan, CallStrategy, ResultStrategy, RpcShape, XdrBufShape};
use crate::rust::module::trace::{self, ChunkType};
use crate::rust::rdma::send_ring::{SendCtxt, SendRingHead};
use crate::rust::sunrpc::xprt::{post_send_after_regs, RpcRqst};
use crate::small_list::SmallList;
use kernel::prelude::*;
use kernel::sync::ArcBorrow;

/// How the call goes, in the terms of the `xprtrdma_marshal` event.
fn call_chunk_type(call: &CallStrategy) -> ChunkType {
    match call {
        CallStrategy::InlinePullup => ChunkType::Pullup,
        CallStrategy::InlineMapped => ChunkType::Mapped,
        CallStrategy::ReadChunk { .. } => ChunkType::ReadList,
        CallStrategy::LongCall { .. } => ChunkType::LongCall,
    }
}

/// How the result comes back, in the terms of the `xprtrdma_marshal` event.
fn result_chunk_type(result: &ResultStrategy) -> ChunkType {
    match result {
        ResultStrategy::Inline => ChunkType::Inline,
        ResultStrategy::WriteChunk { .. } => ChunkType::WriteList,
        ResultStrategy::ReplyChunk { .. } => ChunkType::ReplyChunk,
    }
}

/// Bytes the Write and Reply segments of a call cover, summed where the
/// segments are traced (`register_chunks`), so that neither the kept
/// registrations nor the counters walk the lists again.
#[derive(Clone, Copy, Default)]
struct ResultBytes {
    write: u64,
    reply: u64,
}

impl ResultBytes {
    /// What the reply may claim the server wrote (see [`Offered`]).
    fn offered(self) -> Offered {
        let sat = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
        Offered {
            write: sat(self.write),
            reply: sat(self.reply),
        }
    }
}

/// A count of segments for the counters.
fn count(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

impl Conn {
    /// Marshals a call of none of the common shapes as the planner
    /// decides.
    #[inline(never)]
    pub(super) fn send_planned(
        &self,
        this: ArcBorrow<'_, Self>,
        head: &mut SendRingHead<Conn>,
        rqst: &RpcRqst<'_>,
        xid: u32,
        rpc: &RpcShape,
    ) -> Result {
        let params = self.params();
        let (snd, rcv) = (&rpc.send, &rpc.recv);
        let p = plan(rpc, params).map_err(|e| {
            bump(&self.stats.failed_marshal_count);
            crate::pr_warn_ratelimited!("cannot marshal call xid {:#x}: {:?}\n", xid, e);
            trace::xprtrdma_marshal_failed(rqst, EIO);
            EIO
        })?;

        // The Send's slot; the MRs take theirs as they are registered.
        if !self.slots.try_take(1) {
            return Err(self.no_send_slot(this));
        }
        let mut mrs = RegList::new();
        // Built only for a call with a Read chunk; a result has either a
        // Write chunk or a Reply chunk, so one list serves both (each list
        // is zeroed when made, on every call).
        let mut reads = None;
        let mut result_segs = Segs::new();
        let res = self.register_chunks(
            rqst,
            &p.call,
            &p.result,
            snd,
            rcv,
            &mut mrs,
            &mut reads,
            &mut result_segs,
        );
        let bytes = match res {
            Ok(bytes) => bytes,
            Err(e) => return Err(self.chunks_failed(this, rqst, xid, mrs, e)),
        };

        // The lists as slices once: each `as_slice` checks which storage
        // its list uses.
        let reads = reads.as_ref().map_or(&[][..], SmallList::as_slice);
        let (writes, reply) = match p.result {
            ResultStrategy::WriteChunk { .. } => (result_segs.as_slice(), &[][..]),
            ResultStrategy::ReplyChunk { .. } => (&[][..], result_segs.as_slice()),
            ResultStrategy::Inline => (&[][..], &[][..]),
        };
        let write_list: [&[Segment]; 1] = [writes];
        let chunks = ChunkListsRef {
            read: reads,
            write: if writes.is_empty() { &[] } else { &write_list },
            reply: if reply.is_empty() { None } else { Some(reply) },
        };
        let long_call = matches!(p.call, CallStrategy::LongCall { .. });
        let hdr = HeaderRef {
            xid,
            vers: RPCRDMA_VERSION,
            credits: self.settings.max_requests,
            body: if long_call {
                BodyRef::NoMsg(chunks)
            } else {
                BodyRef::Msg(chunks)
            },
        };

        // The Send takes its slot and those of the REG_MRs before it.
        let reg_slots = self.reg_slots(&mrs);
        let mut hdrlen = 0;
        let pages = match p.call {
            CallStrategy::InlinePullup | CallStrategy::InlineMapped => {
                self.map_send_pages(rqst, snd)
            }
            _ => Ok(None),
        };
        // Page data mapped for the Send goes out as InlineMapped. No
        // vector is made for the others: dropping even an empty one calls
        // the allocator.
        let (call, pages) = match pages {
            Ok(Some(pages)) => (CallStrategy::InlineMapped, Some(pages)),
            Ok(None) => (p.call, None),
            Err(e) => {
                // No mapping (no memory): pulled up as C does anyway.
                crate::pr_warn_ratelimited!(
                    "cannot map the pages of xid {:#x} ({:?}); pulled up instead\n",
                    xid,
                    e
                );
                (p.call, None)
            }
        };
        let mapped = pages.as_ref().is_some_and(|p| !p.is_empty());
        let built = self.send_ctxt(head, 1 + reg_slots).and_then(|mut ctxt| {
            let limit = self.inline_send() as usize;
            let (first, tail) = ctxt.fill(limit, |out| {
                let (parts, hlen) = fill_send(rqst, &hdr, &call, snd, mapped, out)?;
                hdrlen = hlen;
                Ok(parts)
            })?;
            let mut len = first.checked_add(tail).ok_or(EINVAL)?;
            if let Some(pages) = pages.filter(|p| !p.is_empty()) {
                for page in pages.iter() {
                    len = len.checked_add(page.len()).ok_or(EINVAL)?;
                }
                ctxt.set_pages(pages);
            }
            Ok((ctxt, len))
        });
        let (ctxt, send_len) = match built {
            Ok(v) => v,
            Err(e) => return Err(self.unbuilt(this, rqst, mrs, e)),
        };
        trace::xprtrdma_marshal(
            rqst,
            hdrlen,
            call_chunk_type(&call),
            result_chunk_type(&p.result),
        );
        // A Send with mapped pages asks for its completion, which releases
        // them (C signals a Send whose request holds DMA mappings); the
        // others go unsignaled but for one in `send_batch`.
        let pending = Pending {
            xid,
            regs: mrs,
            offered: bytes.offered(),
        };
        self.post_call(this, rqst, pending, ctxt, mapped, send_len)?;
        self.count_sent(&call, snd, reads, writes, reply, bytes);
        Ok(())
    }

    /// Counts and answers a call that found the send queue full: `ENOBUFS`,
    /// which sunrpc retries.
    #[cold]
    pub(super) fn no_send_slot(&self, this: ArcBorrow<'_, Self>) -> Error {
        self.note_send_queue_full();
        // C's marshaling fails with -EAGAIN when no send context is
        // free, and counts that as a failed marshal.
        bump(&self.stats.failed_marshal_count);
        // Dirty MRs hold slots for their LOCAL_INV: run the batch.
        self.flush_dirty(this);
        ENOBUFS
    }

    /// Gives back the Send's slot of a call that was not sent and what it
    /// registered, and counts the failed marshal (C counts an MR shortage
    /// and a Send without a free context as one too, and retries them).
    fn undo_marshal(&self, this: ArcBorrow<'_, Self>, mut mrs: RegList) {
        self.slots.give(1);
        self.unpost(&mut mrs, 0);
        self.abandon(this, mrs);
        bump(&self.stats.failed_marshal_count);
    }

    /// Undoes a call whose Send could not be built (`e`): gives back the
    /// Send's slot and invalidates what it registered. Returns `e`.
    #[cold]
    pub(super) fn unbuilt(
        &self,
        this: ArcBorrow<'_, Self>,
        rqst: &RpcRqst<'_>,
        mrs: RegList,
        e: Error,
    ) -> Error {
        self.undo_marshal(this, mrs);
        if e != ENOBUFS {
            trace::xprtrdma_marshal_failed(rqst, e);
        }
        e
    }

    /// Posts a call's Send, `ctxt` of `send_len` bytes, behind the REG_MRs
    /// of `pending` (kept in the request until its reply), signaled if
    /// `signal`; on failure gives back what the call took.
    pub(super) fn post_call(
        &self,
        this: ArcBorrow<'_, Self>,
        rqst: &RpcRqst<'_>,
        pending: Pending,
        ctxt: SendCtxt<'_, Conn>,
        signal: bool,
        send_len: usize,
    ) -> Result {
        let res = if pending.regs.is_empty() {
            rqst.mark_sent();
            ctxt.post(&self.ep, signal).map_err(|e| (e, None, 0))
        } else {
            self.post_pending(rqst, pending, ctxt, signal)
        };
        match res {
            Ok(unsignaled) => {
                self.count_posted(rqst, send_len, unsignaled);
                Ok(())
            }
            Err((e, unposted, regs_posted)) => {
                Err(self.unposted(this, rqst, e, unposted, regs_posted))
            }
        }
    }

    /// Traces a call's Send of `send_len` bytes that was posted, and counts
    /// it if it went `unsignaled`.
    pub(super) fn count_posted(&self, rqst: &RpcRqst<'_>, send_len: usize, unsignaled: bool) {
        count_posted_to(self.counters(), rqst, send_len, unsignaled);
    }

    /// Undoes a call whose Send was not posted (`e`), nor the REG_MRs
    /// after the first `regs_posted`: those MRs go straight back to the
    /// pool; the posted ones are invalidated, and their slots come back
    /// with that. Returns the error for sunrpc.
    #[cold]
    pub(super) fn unposted(
        &self,
        this: ArcBorrow<'_, Self>,
        rqst: &RpcRqst<'_>,
        e: Error,
        unposted: Option<RegList>,
        regs_posted: usize,
    ) -> Error {
        trace::xprtrdma_post_send_err(rqst, e);
        self.slots.give(1);
        let mut mrs = match unposted {
            Some(regs) => regs,
            None => match rqst.state::<ReqState>().and_then(ReqState::take) {
                Some(p) => p.regs,
                None => RegList::new(),
            },
        };
        self.unpost(&mut mrs, regs_posted);
        self.abandon(this, mrs);
        if e == ENOBUFS {
            e
        } else {
            ENOTCONN
        }
    }

    /// Undoes a call whose chunks could not all be registered (`e`):
    /// gives back the Send's slot and the registrations made, and counts
    /// the failed marshal. Returns `e`.
    #[cold]
    pub(super) fn chunks_failed(
        &self,
        this: ArcBorrow<'_, Self>,
        rqst: &RpcRqst<'_>,
        xid: u32,
        mrs: RegList,
        e: Error,
    ) -> Error {
        self.undo_marshal(this, mrs);
        if e == ENOBUFS {
            // Dirty MRs come back only through a batch: run it now.
            self.flush_dirty(this);
        } else {
            crate::pr_warn_ratelimited!("cannot register chunks of xid {:#x}: {:?}\n", xid, e);
            trace::xprtrdma_marshal_failed(rqst, e);
        }
        e
    }

    /// Keeps `pending` in the request's state and posts its REG_MRs and
    /// `ctxt`, the call's Send, in one chain, one post (C `frwr_send`);
    /// `Ok(true)` when the Send went unsignaled. On failure, the error, the
    /// registrations if they were not kept (from where they are taken back
    /// otherwise), and how many of the REG_MRs went out.
    fn post_pending(
        &self,
        rqst: &RpcRqst<'_>,
        pending: Pending,
        ctxt: SendCtxt<'_, Conn>,
        signal: bool,
    ) -> core::result::Result<bool, (Error, Option<RegList>, usize)> {
        let Some(state) = rqst.state::<ReqState>() else {
            // Not a request of this transport's slots: cannot happen.
            return Err((EINVAL, Some(pending.regs), 0));
        };
        rqst.mark_sent();
        // Posted under the request's lock, which lends the MRs: the reply
        // that takes them cannot come before the post returns.
        let Pending { xid, regs, offered } = pending;
        let (res, stale) = state.keep_and(xid, offered, regs, |regs| {
            post_send_after_regs(&self.ep, ctxt, regs.mrs(), signal)
                .map_err(|(e, posted)| (e, None, posted))
        });
        // Outside the lock: deregistering may sleep.
        drop(stale);
        res
    }

    /// Counts a posted call the way C's `rpcrdma_marshal_req` does: chunk
    /// counts per segment (one MR each), the bytes offered to the server
    /// to write (Write and Reply segments, not Read ones), and the bytes
    /// pulled up behind the head of an inline call.
    fn count_sent(
        &self,
        call: &CallStrategy,
        snd: &XdrBufShape,
        reads: &[ReadSegment],
        writes: &[Segment],
        reply: &[Segment],
        bytes: ResultBytes,
    ) {
        add_some(&self.stats.read_chunk_count, count(reads.len()));
        add_some(&self.stats.write_chunk_count, count(writes.len()));
        add_some(&self.stats.reply_chunk_count, count(reply.len()));
        add_some(
            &self.stats.total_rdma_request,
            bytes.write.saturating_add(bytes.reply),
        );
        match call {
            CallStrategy::InlinePullup => {
                // `fill_send` copies the whole call into the Send buffer.
                // C counts only what its pull-up moves behind the head (the
                // page list and the tail), the head being in place already;
                // so this counts those bytes.
                let behind_head = u64::from(snd.page_len).saturating_add(u64::from(snd.tail_len));
                add_some(&self.stats.pullup_copy_count, behind_head);
            }
            CallStrategy::InlineMapped => {
                // The pages went out mapped; only the tail was copied.
                add_some(&self.stats.pullup_copy_count, u64::from(snd.tail_len));
                add(&self.counters().mapped_sends, 1);
                add(&self.counters().mapped_bytes, u64::from(snd.page_len));
            }
            CallStrategy::LongCall { .. } => bump(&self.stats.nomsg_call_count),
            CallStrategy::ReadChunk { .. } => {}
        }
    }

    /// Registers the call's Read chunk into `reads` (made here, only for
    /// a call that has one) and the result's Write or Reply chunk into
    /// `result_segs`; returns the bytes of the Write and Reply segments.
    #[expect(clippy::too_many_arguments)]
    fn register_chunks(
        &self,
        rqst: &RpcRqst<'_>,
        call: &CallStrategy,
        result: &ResultStrategy,
        snd: &XdrBufShape,
        rcv: &XdrBufShape,
        mrs: &mut RegList,
        reads: &mut Option<SmallList<ReadSegment, INLINE_SEGS>>,
        result_segs: &mut Segs,
    ) -> Result<ResultBytes> {
        let read_chunk = match call {
            CallStrategy::ReadChunk { position, .. } => {
                Some((*position, Span::send(snd.head_len, snd.page_len)))
            }
            CallStrategy::LongCall { .. } => Some((0, Span::send(0, snd.len().ok_or(EINVAL)?))),
            _ => None,
        };
        if let Some((position, span)) = read_chunk {
            let mut segs = Segs::new();
            self.register(rqst, span, mrs, &mut segs)?;
            let list = reads.insert(SmallList::new());
            for (i, s) in segs.as_slice().iter().enumerate() {
                let is_last = i + 1 == segs.len();
                trace::xprtrdma_chunk_read(rqst, position, s.handle, s.length, s.offset, is_last);
                list.push(ReadSegment {
                    position,
                    segment: *s,
                })?;
            }
        }
        let mut bytes = ResultBytes::default();
        match result {
            ResultStrategy::Inline => {}
            ResultStrategy::WriteChunk { write_pad, .. } => {
                let writes = result_segs;
                let span = Span::recv(rcv.head_len, rcv.page_len);
                self.register(rqst, span, mrs, writes)?;
                if *write_pad {
                    if let Some((mr, _)) = &self.write_pad {
                        let s = mr.segment();
                        writes.push(Segment::new(s.handle, s.length, s.offset))?;
                    }
                }
                for (i, s) in writes.as_slice().iter().enumerate() {
                    let is_last = i + 1 == writes.len();
                    trace::xprtrdma_chunk_write(rqst, s.handle, s.length, s.offset, is_last);
                    bytes.write = bytes.write.saturating_add(u64::from(s.length));
                }
            }
            ResultStrategy::ReplyChunk { .. } => {
                // The whole receive buffer as head, pages and tail describe
                // it (C rpcrdma_convert_iovs), not its allocation size.
                let reply = result_segs;
                let len = rcv.len().ok_or(EINVAL)?;
                self.register(rqst, Span::recv(0, len), mrs, reply)?;
                for (i, s) in reply.as_slice().iter().enumerate() {
                    let is_last = i + 1 == reply.len();
                    trace::xprtrdma_chunk_reply(rqst, s.handle, s.length, s.offset, is_last);
                    bytes.reply = bytes.reply.saturating_add(u64::from(s.length));
                }
            }
        }
        Ok(bytes)
    }
}

/// [`Conn::count_posted`] into the counters `c` of the connection's
/// strategy: a caller that knows it at build time (the in-place way is
/// `fmr`'s) finds them without reading the setting.
#[inline(always)]
pub(super) fn count_posted_to(
    c: &StrategyCounters,
    rqst: &RpcRqst<'_>,
    send_len: usize,
    unsignaled: bool,
) {
    trace::xprtrdma_post_send(rqst, send_len);
    if unsignaled {
        c.unsignaled_sends.count(1);
    }
}
