// SPDX-License-Identifier: GPL-2.0

//! Calls with Read chunks (C `svc_rdma_process_read_list` and
//! `svc_rdma_read_complete`): their Reads are started by `xpo_recvfrom`
//! and posted without waiting, continued when send queue room appears,
//! and the Call is assembled by whichever `xpo_recvfrom` finds all of
//! them done (see `rw.rs` and `read.rs`).

use super::conn::{usize_of, CallCtxt, Conn};
use super::read::{copy_out, recycle, CallMsg, ReadPiece, ReadWork};
use super::read_sinks::PagedSinks;
use super::rw::count_read_call;
use crate::proto::pcl::ParsedChunks;
use crate::proto::svc_call::CallLayout;
use crate::rust::kext::park::ParkHolder;
use crate::rust::rdma::recv_slots::HeldRecv;
use crate::rust::sunrpc::svc::SvcRqst;
use kernel::prelude::*;

/// Copies `len` bytes at `start` of chunk `src` as `pieces` read it (0:
/// the call chunk, `i + 1`: Read chunk `i`) into the Call at `at`.
pub(super) fn copy_read(
    rqst: &mut SvcRqst,
    pieces: Option<&[ReadPiece]>,
    src: usize,
    start: u32,
    len: u32,
    at: u32,
) -> Result {
    let pieces = pieces.ok_or(EINVAL)?;
    copy_out(
        pieces,
        src,
        usize_of(start)?,
        usize_of(len)?,
        |rel, buf, off, n| {
            let to = at
                .checked_add(u32::try_from(rel).map_err(|_| EINVAL)?)
                .ok_or(EINVAL)?;
            rqst.write_arg_from_buf(to, buf, off, n)
        },
    )
}

impl Conn {
    /// Claims a read context for a new Call being read, leaves `work` in
    /// it and posts its first Reads; false if the Call was refused (the
    /// connection is then closed and `work` dropped).
    pub(super) fn start_reads(&self, work: ReadWork) -> bool {
        let s = &self.shared;
        let Some((ctxt, mut holder)) = s.rq.try_admit_read() else {
            // More Calls in flight than credits granted: a protocol
            // violation that would otherwise let a client tie up
            // unbounded buffers.
            crate::pr_warn_ratelimited!(
                "svcrdma: client exceeds its credits with Read chunks; closing the connection\n"
            );
            s.link.close();
            return false;
        };
        // The last Call's work left nothing behind (`resume` took it).
        *holder.value() = Some(work);
        self.continue_reads(ctxt, holder);
        true
    }

    /// Posts what fits of the rest of the Reads of the work `holder` holds
    /// (that of read context `ctxt`) and parks it where it will be found
    /// again.
    fn continue_reads(&self, ctxt: usize, mut holder: ParkHolder<'_, ReadWork>) {
        let s = &self.shared;
        let posted = match holder.value() {
            Some(work) => self
                .io()
                .post_reads(ctxt, &s.rq, work)
                .map(|posted| (posted, !work.all_posted())),
            // Not reached: a work is left in the context before its Reads.
            None => Err(EINVAL),
        };
        match posted {
            Err(e) => {
                if e != ENOTCONN {
                    crate::pr_warn_ratelimited!(
                        "svcrdma: cannot post RDMA Reads ({:?}); closing the connection\n",
                        e
                    );
                }
                s.link.close();
                // Kept in its context, never given back: freed with the
                // connection, after the drain.
                holder.keep();
            }
            Ok((posted, more)) => {
                if holder.park(posted) {
                    // Nothing is pending: no completion will queue it.
                    if posted == 0 && more {
                        s.rq.wait_for_room(ctxt, &s.sq);
                    } else {
                        s.rq.read_done(ctxt);
                    }
                }
            }
        }
    }

    /// Continues the Call being read in context `ctxt`, taken off the
    /// read-complete queue or the queue of Calls waiting for send queue
    /// room (C `svc_rdma_read_complete`): posts more Reads, or assembles
    /// the Call into this request's pages.
    // Out of line, as `Conn::recvfrom` is: the path every arriving Call
    // takes is then compiled without this one's code, which would
    // otherwise take its registers.
    #[inline(never)]
    pub(super) fn resume(&self, rqst: &mut SvcRqst, ctxt: usize) -> Option<KBox<CallCtxt>> {
        let s = &self.shared;
        // Queued once per park, so found parked (a kept work is never
        // queued).
        let (mut holder, failed) = s.rq.op(ctxt)?.take()?;
        if !failed && holder.value().as_ref().is_some_and(|w| !w.all_posted()) {
            self.continue_reads(ctxt, holder);
            return None;
        }
        let work = holder.value().take();
        s.rq.read_finished(ctxt, holder);
        // Not reached without a work: only a parked work is queued.
        let work = work?;
        if failed {
            // Only this connection (C `svc_rdma_wc_read_done`). Every Read
            // of the work completed, so nothing queued names its sinks:
            // they are freed with it, not cached.
            s.link.close();
            let (msg, _) = work.into_parts();
            self.release_msg(msg);
            return None;
        }
        self.finish_read(rqst, work).unwrap_or_else(|e| {
            crate::pr_warn_ratelimited!("svcrdma: dropping a call: {:?}\n", e);
            None
        })
    }

    /// Lets a Call's message go, and with it the Receive it kept, if it
    /// did: queued for posting again with the hold it took.
    fn release_msg(&self, msg: CallMsg) {
        if let Some(held) = msg.release() {
            self.repost(held.into_recv(), true);
        }
    }

    /// Assembles a Call whose Reads all completed, and posts its Receive
    /// again if the Call kept it and is not to be served.
    fn finish_read(&self, rqst: &mut SvcRqst, work: ReadWork) -> Result<Option<KBox<CallCtxt>>> {
        let s = &self.shared;
        let (msg, mut ctxt) = work.into_parts();
        let c = &mut *ctxt;
        let xid = c.call.xid;
        let (assembled, unkept) = match (&c.paged, msg) {
            // An NFS WRITE whose Receive was kept: its inline body stays
            // where the device put it, held for the request with its
            // context (C's head and tail point into `rc_recv_buf`).
            (Some(paged), CallMsg::Held(held)) => {
                let at = c.call.inline_at();
                self.assemble_paged_in_place(rqst, xid, held, at, paged)
            }
            (paged, msg) => {
                let inline = c.call.inline(msg.bytes(&s.rq.recvs));
                let assembled = match paged {
                    Some(paged) => self.assemble_paged(rqst, xid, inline, paged),
                    None => {
                        let pieces = Some(c.read_pieces.as_slice());
                        c.call.pcl().and_then(|pcl| {
                            let done = self.assemble(rqst, xid, &pcl, inline, pieces)?;
                            if done {
                                count_read_call(None);
                            }
                            Ok(done)
                        })
                    }
                };
                // Copied into the request's pages (or the Call was
                // answered): the hold, if any, ends here.
                (assembled, msg.release())
            }
        };
        // A Call served with its Receive held leaves it to its request,
        // whose release queues it for reposting under the lock it takes
        // anyway (`release_ctxt`); otherwise it is posted again now.
        if let Some(held) = unkept {
            self.repost(held.into_recv(), true);
        }
        // Kept for the next Call's sinks only once emptied.
        if let Some(paged) = c.paged.take() {
            c.spare_sinks = Some(paged.into_sinks()).filter(|k| k.handed_over());
        }
        recycle(&mut c.read_pieces, &s.cache);
        match assembled {
            Ok(true) => Ok(Some(ctxt)),
            Ok(false) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Lays out a Call whose Read chunk was read into pages of its own:
    /// the inline body goes to the head page, the pages into `rqst` in
    /// place of its own (C `svc_rdma_read_complete`). Returns false when
    /// the Call was answered with `ERR_CHUNK` instead.
    fn assemble_paged(
        &self,
        rqst: &mut SvcRqst,
        xid: u32,
        inline: &[u8],
        paged: &PagedSinks,
    ) -> Result<bool> {
        if !self.paged_fits(rqst, xid, paged) {
            return Ok(false);
        }
        let l = &paged.layout;
        rqst.set_arg_paged(inline, l.position, l.chunk_len, l.padded_len, paged.sinks())?;
        count_read_call(Some(l.pages));
        Ok(true)
    }

    /// As [`Self::assemble_paged`], the inline body read in place: bytes
    /// `at..` of the Receive buffer `held` holds, which goes with the
    /// request. Returns the hold back when the Call is not served with it.
    fn assemble_paged_in_place(
        &self,
        rqst: &mut SvcRqst,
        xid: u32,
        held: HeldRecv,
        at: usize,
        paged: &PagedSinks,
    ) -> (Result<bool>, Option<HeldRecv>) {
        if !self.paged_fits(rqst, xid, paged) {
            return (Ok(false), Some(held));
        }
        let l = &paged.layout;
        let recvs = &self.shared.rq.recvs;
        let (pos, len, padded) = (l.position, l.chunk_len, l.padded_len);
        match rqst.set_arg_paged_in_place(recvs, held, at, pos, len, padded, paged.sinks()) {
            Ok(()) => {
                count_read_call(Some(l.pages));
                (Ok(true), None)
            }
            Err((e, held)) => (Err(e), Some(held)),
        }
    }

    /// Whether `rqst`, the request finishing the Call, has room for its
    /// pages: it may have other pages than the one that started it.
    /// Answers the Call with `ERR_CHUNK` when it has not.
    fn paged_fits(&self, rqst: &SvcRqst, xid: u32, paged: &PagedSinks) -> bool {
        if paged.layout.pages.saturating_add(1) > rqst.arg_pages() {
            self.send_err_chunk(xid);
            return false;
        }
        true
    }

    /// Lays the Call out in `rqst`'s pages: the inline body (`inline`) or
    /// the call chunk, and the Read chunks, copied from `work`'s sinks
    /// straight into the pages. Returns false when the Call was answered
    /// with `ERR_CHUNK` instead.
    fn assemble(
        &self,
        rqst: &mut SvcRqst,
        xid: u32,
        pcl: &ParsedChunks<'_>,
        inline: &[u8],
        pieces: Option<&[ReadPiece]>,
    ) -> Result<bool> {
        // The request finishing the Call may have other pages than the one
        // that started it: checked again.
        let Some(layout) = CallLayout::new(pcl, inline.len(), rqst.arg_max()) else {
            self.send_err_chunk(xid);
            return Ok(false);
        };
        self.assemble_in(rqst, xid, &layout, inline, pieces)
    }
}
