// SPDX-License-Identifier: GPL-2.0

//! `xpo_sendto` (C `svc_rdma_sendto.c`): places the Reply in `rq_res` as
//! the client's chunk lists allow: result payloads through Write chunks,
//! the rest inline or through the Reply chunk, sent with Send or Send With
//! Invalidate.

use super::conn::{usize_of, CallCtxt, Conn};
use super::rw::Ready;
use super::sq_done::SqHandler;
use super::sq_gate::SqGate;
use super::stats::{stat_add, Stat};
use super::write::count_direct_write;
use crate::proto::msg::Segment;
use crate::proto::pcl::{ParsedChunks, ONE_WRITE_REPLY_HEADER_LEN, PLAIN_REPLY_HEADER_LEN};
use crate::proto::pieces::Piece;
use crate::proto::svc_reply::{around_one_payload, PayloadWrites, ReplyBody};
use crate::rust::module::trace::{self, ChunkOp};
use crate::rust::rdma::send_chain::SendChain;
use crate::rust::rdma::send_pool::PooledSend;
use crate::rust::rdma::verbs::MAX_SGE;
use crate::rust::sunrpc::svc::SvcRqst;
use kernel::prelude::*;
use kernel::sync::atomic::{Atomic, Relaxed};

/// Page data of an inline Reply shorter than this is copied into the Send
/// buffer even where it could be mapped: a short copy costs less than
/// mapping and unmapping a page (the client's calls use the same bound).
const MAP_PAGES_MIN: usize = 1024;

/// Replies left whose first Write chunk the server overstates by 4096
/// bytes: fault injection that lets a test watch the client refuse a
/// Write chunk longer than it registered. Written through debugfs
/// `svc_fault_write_overrun` (kernels with `CONFIG_FAULT_INJECTION`); 0,
/// the default and the only value elsewhere, injects nothing.
static WRITE_OVERRUN_FAULTS: Atomic<u32> = Atomic::new(0);

/// Overstates the next `n` replies' first Write chunk (debugfs
/// `svc_fault_write_overrun`).
#[cfg(CONFIG_FAULT_INJECTION)]
pub(super) fn arm_write_overrun(n: u32) -> Result {
    WRITE_OVERRUN_FAULTS.store(n, Relaxed);
    Ok(())
}

/// Whether replies are left to overstate (never without
/// `CONFIG_FAULT_INJECTION`, where nothing can arm it: no load per Reply).
fn write_overrun_armed() -> bool {
    cfg!(CONFIG_FAULT_INJECTION) && WRITE_OVERRUN_FAULTS.load(Relaxed) != 0
}

/// Takes one injected fault, if any is left.
fn take_write_overrun_fault() -> bool {
    if !cfg!(CONFIG_FAULT_INJECTION) {
        return false;
    }
    let mut cur = WRITE_OVERRUN_FAULTS.load(Relaxed);
    while cur > 0 {
        match WRITE_OVERRUN_FAULTS.cmpxchg(cur, cur - 1, Relaxed) {
            Ok(_) => return true,
            Err(now) => cur = now,
        }
    }
    false
}

impl Conn {
    /// `xpo_sendto`: sends the Reply in `rq_res`.
    pub(super) fn sendto(&self, rqst: &mut SvcRqst, ctxt: Option<&mut CallCtxt>) -> Result {
        let ctxt = ctxt.ok_or(EINVAL)?;
        let xid = ctxt.call.xid;
        // Like C: a closing transport's Reply is dropped (its client
        // retransmits the Call on its next connection).
        if rqst.xprt_closing() {
            trace::svcrdma_send_err(self.cm_id(), xid, ENOTCONN);
            return Err(ENOTCONN);
        }
        let res = self.send_reply(rqst, ctxt);
        if let Err(e) = res {
            trace::svcrdma_send_err(self.cm_id(), xid, e);
            if e != ENOTCONN {
                crate::pr_warn_ratelimited!("svcrdma: cannot send a reply: {:?}\n", e);
                // Like C: drop the connection so the client retransmits.
                self.shared.link.close();
            }
        }
        res
    }

    /// Sends the Reply. A send context whose Writes leave straight from the
    /// Reply's pages takes those pages over before it is posted (C
    /// `svc_rdma_save_io_pages`), once nothing reads them any more.
    fn send_reply(&self, rqst: &mut SvcRqst, ctxt: &mut CallCtxt) -> Result {
        let xid = ctxt.call.xid;
        // The one result payload, recorded in the one Write chunk.
        let payload = match ctxt.payloads {
            1 => ctxt.call.result_payload(0),
            _ => None,
        };
        let one_write = ctxt
            .call
            .one_write_segment()
            .zip(payload)
            .and_then(|(seg, p)| self.send_one_write_reply(rqst, xid, &seg, p));
        // The Writes the Reply's send context has no room for.
        let mut chain = SendChain::new();
        let built = match one_write {
            Some(res) => res.map(Some),
            None => self.send_reply_from(rqst, ctxt, &mut chain),
        };
        let Some(mut ready) = built? else {
            return Ok(());
        };
        if ready.send.awaits_pages() {
            ready.send.hold_reply_pages(rqst)?;
        }
        self.io()
            .post_pooled(&mut chain, ready.send, ready.len, ready.inv)
    }

    /// Builds the Reply: sent already (`None`), or in a send context left
    /// to post.
    fn send_reply_from(
        &self,
        rqst: &SvcRqst,
        ctxt: &mut CallCtxt,
        chain: &mut SendChain<SqHandler>,
    ) -> Result<Option<Ready<'_>>> {
        let s = &self.shared;
        let xid = ctxt.call.xid;
        if ctxt.call.has_no_result_chunks() {
            // A WRITE's Read chunk names the key the Reply may invalidate.
            let inv = match s.snd_w_inv && !ctxt.call.has_no_chunks() {
                true => ctxt.call.inv_rkey(),
                false => None,
            };
            if let Some(res) = self.send_plain_reply(rqst, xid, inv) {
                return res.map(|()| None);
            }
        }
        let hroom = ctxt.call.reply_header_room();
        // The chunk lists `xpo_recvfrom` decoded, not decoded again, with
        // the result payloads `xpo_result_payload` recorded in them.
        let pcl = ctxt.call.pcl()?;
        let xdr_len = rqst.res_len();
        let io = self.io();
        // The Reply's send context (C `svc_rdma_send_ctxt_get`): its Send,
        // and the RDMA Writes of the Write and Reply chunks from the
        // Reply's pages while it has room for them; further Writes are
        // chained (C `svc_rdma_cc_link_wrs`). All are posted at once.
        let mut send = io.take_send();

        // Result payloads through the Write chunks.
        for w in PayloadWrites::new(&pcl, xdr_len) {
            let w = w.map_err(|_| EINVAL)?;
            if s.direct {
                let start = w.reply_offset(0).ok_or(EINVAL)?;
                let segs = pcl.segments(w.chunk);
                let len = usize_of(w.len)?;
                io.write_chunk_direct(
                    chain,
                    send.as_mut(),
                    ChunkOp::Write,
                    segs,
                    len,
                    rqst,
                    start,
                )?;
                continue;
            }
            self.io().write_chunk(
                chain,
                ChunkOp::Write,
                pcl.segments(w.chunk),
                usize_of(w.len)?,
                |off, buf, len| {
                    let at = w.reply_offset(off).ok_or(EINVAL)?;
                    rqst.read_res_into_buf(at, buf, 0, len)
                },
            )?;
        }

        // Everything else, inline or through the Reply chunk.
        let body = ReplyBody::new(&pcl, xdr_len).map_err(|_| EINVAL)?;
        let rest = body.len();
        let inv = if s.snd_w_inv { pcl.inv_rkey() } else { None };
        if let Some(rc) = pcl.reply_chunk() {
            if !body.fits(rc) {
                self.send_err_chunk(xid);
                return Ok(None);
            }
            // A body that is one run of the Reply (no payload went to a
            // Write chunk) leaves straight from the Reply's pages.
            let mut runs = body.runs(0, usize_of(rest)?);
            let single = match (runs.next(), runs.next()) {
                (Some(Ok(run)), None) if run.at == 0 => Some(run.reply_offset),
                _ => None,
            };
            if let (true, Some(start)) = (s.direct, single) {
                io.write_chunk_direct(
                    chain,
                    send.as_mut(),
                    ChunkOp::Reply,
                    pcl.segments(rc),
                    usize_of(rest)?,
                    rqst,
                    start,
                )?;
            } else {
                self.io().write_chunk(
                    chain,
                    ChunkOp::Reply,
                    pcl.segments(rc),
                    usize_of(rest)?,
                    |off, buf, len| {
                        for run in body.runs(off, len) {
                            let run = run.map_err(|_| EINVAL)?;
                            rqst.read_res_into_buf(run.reply_offset, buf, run.at, run.len)?;
                        }
                        Ok(())
                    },
                )?;
            }
            stat_add(Stat::ReplyChunk, 1);
            return io.fill_send(chain, send, hroom, inv, |out| {
                pcl.encode_reply_header(xid, s.credits, rest, out)
                    .map_err(|_| EINVAL)
            });
        }
        // Header and body written straight into the Send's buffer: one
        // that holds the longest header and the body, within the inline
        // threshold (a longer Reply is refused below). Page data of the
        // body (a short READ's payload, READDIR's entries) goes out as
        // Send SGEs of its own behind the bytes before it, not copied, when
        // there is enough of it and the queue pair has the SGEs. A body
        // too short for that (a READ's whose payload went to a Write
        // chunk) is not looked into.
        let rest_len = usize_of(rest)?;
        let (pstart, plen) = rqst.res_page_region();
        // Not for a context that carries Writes already: the body is
        // copied into its buffer.
        let own_writes = send.as_ref().is_some_and(|x| x.writes() > 0);
        let mapped = match !own_writes && self.may_map_pages(rest_len, plen) {
            true => body
                .page_part(pstart, plen, MAP_PAGES_MIN)
                .and_then(|part| {
                    // Two entries for the bytes before and after the pages.
                    let sges = s.ep.max_send_sge().min(MAX_SGE).saturating_sub(2);
                    let pages =
                        rqst.res_pages(part.reply_offset, u32::try_from(part.len).ok()?, sges)?;
                    Some((part, pages))
                }),
            false => None,
        };
        let mut too_long = false;
        // The header, and the inline message's length: header and body.
        let mut header = |out: &mut [u8]| -> Result<(usize, usize)> {
            let n = encode_inline_header(&pcl, xid, s.credits, out)?;
            let Some(total) = body.inline_len(n, s.inline_send).map_err(|_| EINVAL)? else {
                too_long = true;
                return Err(EMSGSIZE);
            };
            Ok((n, total))
        };
        let sent = match mapped {
            None => {
                let room = hroom.saturating_add(rest_len).min(s.inline_send as usize);
                io.fill_send(chain, send, room, inv, |out| {
                    let (n, total) = header(out)?;
                    copy_body(rqst, &body, 0, out.get_mut(n..total).ok_or(EINVAL)?)?;
                    Ok(total)
                })
            }
            Some((part, pages)) => {
                // Sent as a work request over a cached buffer.
                drop(send);
                let room = hroom
                    .saturating_add(rest_len.saturating_sub(part.len))
                    .min(s.inline_send as usize);
                self.io()
                    .send_filled_around(chain, room, inv, &pages, |out| {
                        let (n, total) = header(out)?;
                        // The body less the pages' bytes, behind the header;
                        // the pages go between.
                        let filled = total.checked_sub(part.len).ok_or(EINVAL)?;
                        let split = n.checked_add(part.at).ok_or(EINVAL)?;
                        let after = part.at.checked_add(part.len).ok_or(EINVAL)?;
                        copy_body(rqst, &body, 0, out.get_mut(n..split).ok_or(EINVAL)?)?;
                        copy_body(
                            rqst,
                            &body,
                            after,
                            out.get_mut(split..filled).ok_or(EINVAL)?,
                        )?;
                        Ok((split, filled))
                    })
                    .map(|()| None)
            }
        };
        if too_long {
            // Too long for inline and the client gave no Reply chunk.
            self.send_err_chunk(xid);
            return Ok(None);
        }
        sent
    }
}

impl Conn {
    /// Whether an inline Reply body of `body_len` bytes, `page_len` of them
    /// page data, may send its pages mapped rather than copy them: only
    /// when Writes leave from the Reply's pages and both are long enough
    /// that a copy costs more than mapping ([`MAP_PAGES_MIN`]).
    fn may_map_pages(&self, body_len: usize, page_len: u32) -> bool {
        self.shared.direct && body_len >= MAP_PAGES_MIN && page_len as usize >= MAP_PAGES_MIN
    }

    /// Sends the Reply to a Call without Write and Reply chunks (a
    /// GETATTR's, a WRITE's) the short way, with Send With Invalidate of
    /// `inv` if given: the fixed header and the whole Reply copied behind
    /// it into a send context's buffer (C `svc_rdma_map_reply_msg`'s
    /// pull-up), with no chunk list walked or echoed. `None` for one whose
    /// page data is long enough to be sent from its pages: the general way
    /// does that.
    fn send_plain_reply(&self, rqst: &SvcRqst, xid: u32, inv: Option<u32>) -> Option<Result> {
        let s = &self.shared;
        let (_, page_len) = rqst.res_page_region();
        let xdr_len = rqst.res_len() as usize;
        if self.may_map_pages(xdr_len, page_len) {
            return None;
        }
        let total = PLAIN_REPLY_HEADER_LEN.checked_add(xdr_len)?;
        if total > s.inline_send as usize {
            // Too long for inline and the client gave no Reply chunk.
            self.send_err_chunk(xid);
            return Some(Ok(()));
        }
        let io = self.io();
        Some(io.send_filled(None, total, inv, |out| {
            let n =
                ParsedChunks::encode_plain_reply_header(xid, s.credits, out).map_err(|_| EINVAL)?;
            let end = n.checked_add(xdr_len).ok_or(EINVAL)?;
            rqst.read_res(0, out.get_mut(n..end).ok_or(EINVAL)?)?;
            Ok(end)
        }))
    }
}

impl Conn {
    /// Sends the Reply to a Call whose one chunk is a Write chunk of one
    /// segment `seg` (an NFS READ's) the short way, when its one result
    /// payload (`payload`: its XDR position and length) lies in pages that
    /// the RDMA Writes of one send context can carry: those Writes in the
    /// Reply's send context, its header written word by word,
    /// the bytes around the payload copied behind it, no chunk list walked
    /// or rebuilt (C `svc_rdma_send_write_chunk`, then
    /// `svc_rdma_send_reply_msg`), left to post once the send context
    /// holds the Reply's pages (its Writes take no reference on them).
    /// `None`, with nothing done, for any other Reply: the general way
    /// sends it, or answers it with `ERR_CHUNK`.
    fn send_one_write_reply(
        &self,
        rqst: &SvcRqst,
        xid: u32,
        seg: &Segment,
        payload: (u32, u32),
    ) -> Option<Result<Ready<'_>>> {
        let s = &self.shared;
        let (position, len) = payload;
        // Injected faults and the copied Writes of `svc_memreg=cache` take
        // the general way.
        if len == 0 || len > seg.length || !s.direct || write_overrun_armed() {
            return None;
        }
        let around = around_one_payload(position, len, rqst.res_len())?;
        let [(_, head_len), (_, tail_len)] = around;
        let total = ONE_WRITE_REPLY_HEADER_LEN
            .checked_add(usize_of(head_len).ok()?)?
            .checked_add(usize_of(tail_len).ok()?)?;
        let io = self.io();
        if total > s.inline_send as usize || total > io.sq.sends.buf_len() {
            return None;
        }
        // One Write over at most one work request's scatter list (a 4 KiB
        // READ's), or, out of line, as many as the send context carries,
        // cut as the general way cuts them (a 256 KiB READ's three).
        // Dropped, `send` lets go of the Writes it took.
        let (sges, max_piece) = io.direct_write_bounds();
        let mut send = io.take_send()?;
        let payload = usize_of(len).ok()?;
        let added = match payload <= max_piece {
            true => {
                let p = Piece {
                    off: 0,
                    len: payload,
                    addr: seg.offset,
                    rkey: seg.handle,
                };
                io.add_payload_write(&mut send, rqst, sges, position, &p)
                    .map(|added| added.map(|pages| (1, pages)))
            }
            false => {
                io.add_payload_writes(&mut send, rqst, (sges, max_piece), (position, payload), seg)
            }
        };
        let (writes, count) = match added? {
            Ok(added) => added,
            Err(e) => return Some(Err(e)),
        };
        let filled = write_one_write_reply(&mut send, rqst, xid, s.credits, seg, len, around);
        let send_len = match filled {
            Ok(n) => n,
            Err(e) => return Some(Err(e)),
        };
        count_direct_write(writes as u64, u64::from(len), count as u64);
        trace::svcrdma_post_chunk(ChunkOp::Write, writes, len as usize);
        Some(Ok(Ready {
            send,
            len: send_len,
            // The one handle of the lists.
            inv: s.snd_w_inv.then_some(seg.handle),
        }))
    }
}

/// Writes the Reply `Conn::send_one_write_reply` sends into `send`'s
/// buffer: its transport header, then the Reply's head and tail around
/// the payload (`around`, as [`around_one_payload`] gives them); returns
/// its length. In place, with no closure between (one LLVM kept out of
/// line cost every READ's Reply its call).
#[inline(always)]
fn write_one_write_reply(
    send: &mut PooledSend<'_, SqGate>,
    rqst: &SvcRqst,
    xid: u32,
    credits: u32,
    seg: &Segment,
    len: u32,
    around: [(u32, u32); 2],
) -> Result<usize> {
    let [(_, head_len), (tail_at, tail_len)] = around;
    let out = send.bytes()?;
    let n = ParsedChunks::encode_one_write_reply_header(xid, credits, seg, len, out)
        .map_err(|_| EINVAL)?;
    let head_end = n.checked_add(usize_of(head_len)?).ok_or(EINVAL)?;
    let end = head_end.checked_add(usize_of(tail_len)?).ok_or(EINVAL)?;
    rqst.read_res(0, out.get_mut(n..head_end).ok_or(EINVAL)?)?;
    rqst.read_res(tail_at, out.get_mut(head_end..end).ok_or(EINVAL)?)?;
    send.filled(end)?;
    Ok(end)
}

/// Writes an inline Reply's transport header into `out`, overstating its
/// first Write chunk when fault injection asks for it; returns its length.
#[inline(always)]
fn encode_inline_header(
    pcl: &ParsedChunks<'_>,
    xid: u32,
    credits: u32,
    out: &mut [u8],
) -> Result<usize> {
    let n = pcl
        .encode_reply_header(xid, credits, 0, out)
        .map_err(|_| EINVAL)?;
    if !pcl.write_chunks().is_empty() && take_write_overrun_fault() {
        overstate_write_chunk(out.get_mut(..n).ok_or(EINVAL)?, xid);
    }
    Ok(n)
}

/// Fault injection: `header` overstates its first Write chunk by 4096
/// bytes.
#[cold]
fn overstate_write_chunk(header: &mut [u8], xid: u32) {
    if ParsedChunks::overstate_first_write_segment(header, 4096).is_some() {
        crate::pr_warn_ratelimited!(
            "svcrdma: fault injection: reply xid {:#x} overstates its Write chunk by 4096 bytes\n",
            xid
        );
    }
}

/// Copies the body's bytes from `from` on into `dst`, all of it (inlined
/// as [`encode_inline_header`]).
#[inline(always)]
fn copy_body(rqst: &SvcRqst, body: &ReplyBody<'_>, from: usize, dst: &mut [u8]) -> Result {
    for run in body.runs(from, dst.len()) {
        let run = run.map_err(|_| EINVAL)?;
        let end = run.at.checked_add(run.len).ok_or(EINVAL)?;
        rqst.read_res(run.reply_offset, dst.get_mut(run.at..end).ok_or(EINVAL)?)?;
    }
    Ok(())
}
