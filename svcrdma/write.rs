// SPDX-License-Identifier: GPL-2.0

//! RDMA Writes of a Reply's Write and Reply chunks (C
//! `svc_rdma_send_write_chunk`, `svc_rdma_send_reply_chunk`): copied
//! through cached buffers, or straight from the Reply's pages.

use super::cache::Class;
use super::read::piece_error;
use super::rw::{write_op, Io, COPIED_WRITES, DIRECT_PAGES, DIRECT_WRITES, PIECE};

use super::sq_done::SqHandler;
use super::sq_gate::SqGate;
use super::stats::{stat_add, Stat};
use crate::proto::msg::Segment;
use crate::proto::pieces::{Piece, Pieces};
use crate::rust::module::trace::{self, ChunkOp};
use crate::rust::rdma::send_chain::SendChain;
use crate::rust::rdma::send_pool::{PooledSend, CTXT_WRITES};
use crate::rust::rdma::verbs::{MappedBuf, WorkRequest, MAX_SGE};
use crate::rust::sunrpc::svc::SvcRqst;
use kernel::page::PAGE_SIZE;
use kernel::prelude::*;

/// Counts `writes` RDMA Writes of `len` bytes in all straight from
/// `pages` of the Reply's pages.
pub(super) fn count_direct_write(writes: u64, len: u64, pages: u64) {
    stat_add(Stat::Write, writes);
    stat_add(Stat::WriteBytes, len);
    DIRECT_WRITES.count(writes);
    DIRECT_PAGES.count(pages);
}

impl<'a> Io<'a> {
    /// Adds to `send` the RDMA Write of piece `p` of a payload at
    /// `position` in the Reply, straight from the Reply's pages (within
    /// `sges` of them): how many pages it names. `None` when they are not
    /// all in the Reply's pages or the context has no room for it (the
    /// general way sends the Reply then).
    #[inline(always)]
    pub(super) fn add_payload_write(
        &self,
        send: &mut PooledSend<'a, SqGate>,
        rqst: &SvcRqst,
        sges: usize,
        position: u32,
        p: &Piece,
    ) -> Option<Result<usize>> {
        let at = position.checked_add(u32::try_from(p.off).ok()?)?;
        let pages = rqst.res_pages(at, u32::try_from(p.len).ok()?, sges)?;
        match send.add_reply_write(self.ep, &pages, p.addr, p.rkey) {
            Ok(true) => Some(Ok(pages.count_pages())),
            Ok(false) => None,
            Err(e) => Some(Err(e)),
        }
    }

    /// [`Self::add_payload_write`] for each piece of at most `max_piece`
    /// bytes (as the general way cuts them) of `len` bytes of `seg`, a
    /// payload at `position` in the Reply, if the send context has room
    /// for them all: how many Writes, and how many pages they name. Out of
    /// line: inlined into `sendto`, it cost every other Reply a few
    /// instructions.
    #[inline(never)]
    pub(super) fn add_payload_writes(
        &self,
        send: &mut PooledSend<'a, SqGate>,
        rqst: &SvcRqst,
        (sges, max_piece): (usize, usize),
        (position, len): (u32, usize),
        seg: &Segment,
    ) -> Option<Result<(usize, usize)>> {
        if max_piece == 0 {
            return None;
        }
        let writes = len.div_ceil(max_piece);
        if writes > CTXT_WRITES {
            return None;
        }
        let mut count = 0;
        for p in Pieces::new(core::slice::from_ref(seg), len, max_piece) {
            match self.add_payload_write(send, rqst, sges, position, &p.ok()?)? {
                Ok(k) => count += k,
                Err(e) => return Some(Err(e)),
            }
        }
        Some(Ok((writes, count)))
    }

    /// How many of the Reply's pages one RDMA Write straight from them
    /// takes as scatter/gather entries, and the longest piece it carries:
    /// an unaligned piece spans one page more than its length needs.
    pub(super) fn direct_write_bounds(&self) -> (usize, usize) {
        let sges = self.ep.max_send_sge().min(MAX_SGE);
        (sges, sges.saturating_sub(1).saturating_mul(PAGE_SIZE))
    }

    /// Pushes `total` bytes into a Write or Reply chunk with RDMA Write;
    /// `fill(stream_offset, buf, len)` puts the bytes at that offset of
    /// the chunk's data into `buf[..len]`. The Writes are added to `chain`
    /// (posted ahead of the Reply's Send, or as the chain fills), never
    /// waited for. `kind` says which chunk it is, for the trace event.
    pub(super) fn write_chunk(
        &self,
        chain: &mut SendChain<SqHandler>,
        kind: ChunkOp,
        segs: &[Segment],
        total: usize,
        mut fill: impl FnMut(usize, &MappedBuf, usize) -> Result,
    ) -> Result {
        let mut posted = 0;
        for p in Pieces::new(segs, total, PIECE) {
            let p = p.map_err(piece_error)?;
            self.write_copied(chain, &p, |buf| fill(p.off, buf, p.len))?;
            posted += 1;
        }
        trace::svcrdma_post_chunk(kind, posted, total);
        Ok(())
    }

    /// RDMA-Writes piece `p` from a cached buffer that `fill` filled.
    fn write_copied(
        &self,
        chain: &mut SendChain<SqHandler>,
        p: &Piece,
        fill: impl FnOnce(&MappedBuf) -> Result,
    ) -> Result {
        let t = self.cache.get(self.ep, Class::WritePiece, p.len)?;
        fill(&t.buf)?;
        stat_add(Stat::Write, 1);
        stat_add(Stat::WriteBytes, p.len as u64);
        self.queue_one(chain, t.buf, p.len, write_op(p), t.slot)?;
        COPIED_WRITES.count(1);
        Ok(())
    }

    /// Pushes `total` bytes of the Reply from offset `start` to the
    /// client's segments `segs` straight from the Reply's pages (C
    /// `svc_rdma_send_write_chunk`): one RDMA Write per piece, each page a
    /// scatter/gather entry, the pages kept until the Write completes. A
    /// piece whose bytes are not all in pages the request releases (see
    /// [`SvcRqst::res_pages`]) is copied through cached buffers, [`PIECE`]
    /// bytes at a time.
    ///
    /// The Writes go in `send`, the Reply's send context, while it has
    /// room, taking no reference on their pages: the context is to hold
    /// the Reply's pages before it is posted
    /// ([`PooledSend::add_reply_write`]). Further Writes go into `chain`,
    /// each taking a reference on its pages.
    #[expect(clippy::too_many_arguments)]
    pub(super) fn write_chunk_direct(
        &self,
        chain: &mut SendChain<SqHandler>,
        mut send: Option<&mut PooledSend<'_, SqGate>>,
        kind: ChunkOp,
        segs: &[Segment],
        total: usize,
        rqst: &SvcRqst,
        start: u32,
    ) -> Result {
        // Where the chunk's byte `off` is in the Reply.
        let reply_at =
            |off: usize| -> Result<u32> { start.checked_add(u32::try_from(off)?).ok_or(EINVAL) };
        // Pieces written from pages may be longer than a buffer (`PIECE`):
        // fewer Writes. One that is copied after all goes through buffers
        // in parts.
        let (sges, max_piece) = self.direct_write_bounds();
        if max_piece == 0 {
            return self.write_chunk(chain, kind, segs, total, |off, buf, len| {
                rqst.read_res_into_buf(reply_at(off)?, buf, 0, len)
            });
        }
        let mut posted = 0;
        for p in Pieces::new(segs, total, max_piece) {
            let p = p.map_err(piece_error)?;
            let at = reply_at(p.off)?;
            let len = u32::try_from(p.len)?;
            if let Some(pages) = rqst.res_pages(at, len, sges) {
                let n = pages.count_pages() as u64;
                let in_send = match send.as_deref_mut() {
                    Some(send) => send.add_reply_write(self.ep, &pages, p.addr, p.rkey)?,
                    None => false,
                };
                if !in_send {
                    // The pages are mapped and referenced as the work
                    // request is built, for that request alone, all in one
                    // call (no allocation or object per page or for the
                    // list).
                    let handler = SqHandler {
                        sq: self.sq.clone(),
                        cache_slot: None,
                    };
                    let wr = WorkRequest::with_pages(handler, self.ep, pages.range()?)?;
                    self.queue_built(chain, wr, write_op(&p))?;
                }
                count_direct_write(1, p.len as u64, n);
                posted += 1;
            } else {
                for part in p.parts(PIECE) {
                    let at = reply_at(part.off)?;
                    let copy = |buf: &MappedBuf| rqst.read_res_into_buf(at, buf, 0, part.len);
                    self.write_copied(chain, &part, copy)?;
                    posted += 1;
                }
            }
        }
        trace::svcrdma_post_chunk(kind, posted, total);
        Ok(())
    }
}
