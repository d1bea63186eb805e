// SPDX-License-Identifier: GPL-2.0

//! RDMA Reads of a Call's Read chunks (C `svc_rdma_process_read_list`,
//! `svc_rdma_wc_read_done`): where they land ([`ReadSinks`]), the work
//! of one Call ([`ReadWork`]) and its asynchronous completion (`ReadOp`).

use super::cache::{BufCache, Class};
use super::conn::CallCtxt;
use super::read_op::ReadHandler;
use super::read_sinks::{PagedSinks, PagedTarget, ReadSink};
use super::recv_queue::RecvQ;
use super::rw::{one_segment, Io, REGISTERED_READS};
use super::stats::{stat_add, Stat};
use crate::proto::msg::Segment;
use crate::proto::pcl::ParsedChunks;
use crate::proto::pieces::{CallReadPieces, Piece, PieceError, Pieces, RangeInPieces, CALL_CHUNK};
use crate::rust::module::trace::{self, ChunkOp};
use crate::rust::rdma::read_ctxts::{ChainRead, READ_SLOTS};
use crate::rust::rdma::recv_slots::{HeldRecv, RecvSlots};
use crate::rust::rdma::verbs::{MappedBuf, SendOp, WorkRequest};
use crate::rust::sunrpc::page_sinks::PageSinks;
use kernel::alloc::KVec;
use kernel::prelude::*;
use kernel::sync::Arc;

/// One RDMA Read of a Call: where it is read from and, once posted, the
/// buffer it lands in.
pub(super) struct ReadPiece {
    /// The chunk read from (see [`crate::proto::pieces::CALL_CHUNK`]).
    src: usize,
    piece: Piece,
    /// The sink buffer and its cache class, once the Read was posted.
    sink: Option<(Arc<MappedBuf>, usize)>,
    /// The registration of pages a Read went through (iWARP), kept with
    /// the work: a work held until the drain keeps an MR a queued REG_MR
    /// names (see [`Io::post_reads`]).
    run: Option<Arc<MappedBuf>>,
}

/// The Read source of a Call's first Read chunk (see [`CALL_CHUNK`]).
const FIRST_READ_CHUNK: usize = CALL_CHUNK + 1;

/// The error a failure to cut or find pieces is reported as (C uses the
/// same codes).
pub(super) fn piece_error(e: PieceError) -> Error {
    match e {
        PieceError::ShortSegments => EMSGSIZE,
        PieceError::Overflow | PieceError::NotCovered => EINVAL,
    }
}

/// The received transport header and inline body of a Call being read.
pub(super) enum CallMsg {
    /// In its Receive buffer, whose context is held from the device until
    /// the Call is assembled.
    Held(HeldRecv),
    /// Copied out, its Receive posted again at once (when the connection
    /// holds as many Receives as it may).
    Copied(KVec<u8>),
}

impl CallMsg {
    /// A copy of `bytes`.
    pub(super) fn copy(bytes: &[u8]) -> Result<Self> {
        let mut kept = KVec::with_capacity(bytes.len(), GFP_KERNEL)?;
        kept.extend_from_slice(bytes, GFP_KERNEL)?;
        Ok(Self::Copied(kept))
    }

    /// The message, as the receive contexts `recvs` (the connection's)
    /// hold it or as it was copied.
    pub(super) fn bytes<'a>(&'a self, recvs: &'a RecvSlots<RecvQ>) -> &'a [u8] {
        match self {
            Self::Held(held) => recvs.bytes(held),
            Self::Copied(v) => v,
        }
    }

    /// The receive context it held, given up.
    pub(super) fn release(self) -> Option<HeldRecv> {
        match self {
            Self::Held(held) => Some(held),
            Self::Copied(_) => None,
        }
    }
}

/// A Call whose Read chunks are being pulled (C `svc_rdma_recv_ctxt`
/// with its `rc_readlist`): two words and the message, so that it moves
/// cheaply into its read context and out again; the rest of its state
/// stays in the boxed request state.
pub(super) struct ReadWork {
    /// The received transport header and inline body.
    msg: CallMsg,
    /// The request's state with the decoded header, the planned Reads
    /// (`read_pieces`) and, when the Read chunk lands in pages of its own,
    /// those pages (`paged`; else the pieces land in cached sinks), until
    /// the Call is assembled: they stay where they were planned.
    ctxt: KBox<CallCtxt>,
    /// Pieces `[..next]` were posted.
    next: usize,
}

/// A planned Read, not posted yet.
fn planned((src, piece): (usize, Piece)) -> ReadPiece {
    ReadPiece {
        src,
        piece,
        sink: None,
        run: None,
    }
}

/// Plans the RDMA Reads of `pcl`'s call chunk and Read chunks into
/// `pieces` (emptied first, its allocation reused), each at most
/// `piece_size` bytes: called where the Call's chunk lists were just
/// parsed, so they are walked once. The shape of an NFS WRITE (one Read
/// chunk, no call chunk) is cut straight from its segments
/// ([`plan_chunk_reads`]).
pub(super) fn plan_reads(
    pcl: &ParsedChunks<'_>,
    piece_size: usize,
    pieces: &mut KVec<ReadPiece>,
) -> Result {
    if let (None, [chunk]) = (pcl.call_chunk(), pcl.read_chunks()) {
        return plan_chunk_reads(pcl.segments(chunk), chunk.length, piece_size, pieces);
    }
    pieces.clear();
    let reads = CallReadPieces::new(pcl, piece_size);
    // Room for every piece at once, not grown by doubling as they come.
    pieces.reserve(reads.max_count(), GFP_KERNEL)?;
    for p in reads {
        pieces.push(planned(p.map_err(piece_error)?), GFP_KERNEL)?;
    }
    Ok(())
}

/// Plans the Reads of a Call's only Read chunk, `length` bytes over
/// `segs`, into `pieces` as [`plan_reads`] does (as [`CallReadPieces`]
/// would cut them): from the segments a one-pass decode stored, with no
/// parsed lists built.
pub(super) fn plan_chunk_reads(
    segs: &[Segment],
    length: u32,
    piece_size: usize,
    pieces: &mut KVec<ReadPiece>,
) -> Result {
    pieces.clear();
    let total = usize::try_from(length).map_err(|_| EINVAL)?;
    // The usual WRITE: one segment, one piece, not cut by the iterator.
    if let Some(p) = Pieces::single(segs, total, piece_size) {
        pieces.push(planned((FIRST_READ_CHUNK, p)), GFP_KERNEL)?;
        return Ok(());
    }
    // As `CallReadPieces::max_count` bounds it.
    let most = (total / piece_size.max(1)).saturating_add(segs.len());
    pieces.reserve(most, GFP_KERNEL)?;
    for p in Pieces::new(segs, total, piece_size) {
        let p = p.map_err(piece_error)?;
        pieces.push(planned((FIRST_READ_CHUNK, p)), GFP_KERNEL)?;
    }
    Ok(())
}

impl ReadWork {
    /// The work of reading the Call whose Reads [`plan_reads`] planned
    /// into `ctxt`'s `read_pieces` (into `ctxt`'s `paged` pages, if it has
    /// them), parsed from `msg`.
    pub(super) fn new(msg: CallMsg, ctxt: KBox<CallCtxt>) -> Self {
        Self { msg, ctxt, next: 0 }
    }

    /// Whether every Read was posted.
    pub(super) fn all_posted(&self) -> bool {
        self.ctxt.single_read.is_none() && self.next >= self.ctxt.read_pieces.len()
    }

    /// The received message and the request's state with the pieces read
    /// (and their sinks) and the pages the Read chunk landed in, if it
    /// did: to assemble the Call from, once every Read completed.
    pub(super) fn into_parts(self) -> (CallMsg, KBox<CallCtxt>) {
        (self.msg, self.ctxt)
    }
}

/// Calls `put(at, buf, buf_off, len)` for the bytes `[start, start + len)`
/// of chunk `src` as `pieces` read them, in order, `at` counting from
/// `start`. Fails if the pieces do not cover the range.
pub(super) fn copy_out(
    pieces: &[ReadPiece],
    src: usize,
    start: usize,
    len: usize,
    mut put: impl FnMut(usize, &MappedBuf, usize, usize) -> Result,
) -> Result {
    let of_src = pieces.iter().filter(|p| p.src == src);
    for found in RangeInPieces::new(of_src.map(|p| (p, p.piece)), start, len) {
        let (p, run) = found.map_err(piece_error)?;
        let (buf, _) = p.sink.as_ref().ok_or(EINVAL)?;
        put(run.at, buf, run.in_piece, run.len)?;
    }
    Ok(())
}

/// Empties `pieces`, whose Reads all succeeded, in place (the allocation
/// stays for the next Call), giving their sink buffers back to the cache:
/// their registration, if any, is known to be good (a work that failed
/// is dropped instead, which frees its buffers).
pub(super) fn recycle(pieces: &mut KVec<ReadPiece>, cache: &BufCache) {
    // The usual WRITE's one Read was planned without the list: nothing to
    // drain.
    if pieces.is_empty() {
        return;
    }
    for p in pieces.drain_all() {
        if let Some((buf, slot)) = p.sink {
            cache.put(buf, slot);
        }
    }
}

impl Io<'_> {
    /// Posts the next Reads of `work` (taken out of the operation of read
    /// context `ctxt` of `q`) that the send queue has room for now,
    /// without waiting (C posts them all and waits for room; a thread here
    /// never waits on a peer). Reads straight into the Call's pages go as
    /// chains with one completion each (C posts a Read list as one chain).
    /// Returns how many completions the posted Reads will have, for
    /// `ParkHolder::park` to count; the rest are posted by a later
    /// `xpo_recvfrom`, when completions have made room.
    ///
    /// On an error the connection must be closed and `work` held with
    /// `ParkHolder::keep`: if a sink's registration was posted but its Read
    /// was not, the queued REG_MR still names the sink's MR, so the sink
    /// may only be freed once the queue pair is drained. That REG_MR's
    /// send queue slot stays taken (no completion will return it: the
    /// entry is retired by the drain), so the gate never counts more free
    /// slots than the queue has.
    pub(super) fn post_reads(
        &self,
        ctxt: usize,
        q: &Arc<RecvQ>,
        work: &mut ReadWork,
    ) -> Result<usize> {
        if let Some(piece) = work.ctxt.single_read {
            return self.post_single(ctxt, q, work, piece);
        }
        let mut completions = 0;
        let mut reads = 0;
        let mut bytes = 0;
        let c = &mut *work.ctxt;
        while work.next < c.read_pieces.len() {
            // Into the Call's own pages, as one chain through one of the
            // read context's completion entries when one is free (no work
            // request object or reference per page: the common case).
            let direct = c.paged.as_ref().and_then(PagedSinks::unregistered);
            if let Some(pages) = direct.filter(|_| q.ops.has_free(ctxt)) {
                let next = c.read_pieces.get(work.next..).unwrap_or(&[]);
                let mut chain = [Piece::default(); READ_SLOTS];
                let n = next.len().min(READ_SLOTS);
                for (c, p) in chain.iter_mut().zip(next) {
                    *c = p.piece;
                }
                match self.post_direct(ctxt, q, pages, chain.get(..n).unwrap_or(&[]))? {
                    Direct::Posted { reads: k, bytes: b } => {
                        work.next += k;
                        completions += 1;
                        reads += k;
                        bytes += b;
                        continue;
                    }
                    Direct::NoRoom => break,
                    // Taken meanwhile (cannot happen: only this thread
                    // posts the operation's Reads): the way below.
                    Direct::EntryBusy => {}
                }
            }
            let Some(p) = c.read_pieces.get_mut(work.next) else {
                break;
            };
            // Into the Call's own pages (scattered over, or through a
            // registration of them), or into a sink from the cache.
            let (sink, taken, run) = match &c.paged {
                Some(paged) => match paged.target(self.ep, &p.piece)? {
                    PagedTarget::Pages(pages) => (ReadSink::Pages(pages), None, None),
                    PagedTarget::Run(run) => (ReadSink::Buf(run.clone()), None, Some(run)),
                },
                None => {
                    let t = self.cache.get(self.ep, Class::ReadPiece, p.piece.len)?;
                    (ReadSink::Buf(t.buf.clone()), Some(t), None)
                }
            };
            // The sink whose MR is registered ahead of the Read, if any.
            let register = match (&run, &taken) {
                (Some(run), _) => Some(run.clone()),
                (None, Some(t)) if t.needs_registration => Some(t.buf.clone()),
                _ => None,
            };
            let slots = if register.is_some() { 2 } else { 1 };
            if !self.sq.try_acquire_read(slots)? {
                // Nothing was posted with it: it goes back as it came (a
                // registration of pages returns its MR, never registered).
                if let Some(t) = taken {
                    self.cache.put(t.buf, t.slot);
                }
                break;
            }
            let handler = ReadHandler {
                slots,
                ctxt,
                q: q.clone(),
            };
            let built = match sink {
                // One entry per page, all held by one reference.
                ReadSink::Pages(pages) => {
                    WorkRequest::with_sinks(handler, &pages, p.piece.off, p.piece.len)
                }
                ReadSink::Buf(buf) => WorkRequest::new(handler, one_segment(buf, p.piece.len)),
            };
            let wr = match built {
                Ok(wr) => wr,
                Err(e) => {
                    self.sq.release(slots);
                    return Err(e);
                }
            };
            if let Some(sink) = register {
                if let Err(e) = sink.post_sink_registration(self.ep) {
                    crate::pr_warn_ratelimited!(
                        "svcrdma: cannot post a sink registration: {:?}\n",
                        e
                    );
                    self.sq.release(slots);
                    return Err(e);
                }
            }
            // From here the sink stays with the work (see above).
            if let Some(t) = taken {
                p.sink = Some((t.buf, t.slot));
            }
            if run.is_some() {
                REGISTERED_READS.count(1);
            }
            p.run = run;
            let read = SendOp::RdmaRead {
                remote_addr: p.piece.addr,
                rkey: p.piece.rkey,
            };
            if let Err(e) = self.ep.post_send(wr, read) {
                // Not posted: no completion for it, and not counted.
                self.sq.release(1);
                return Err(e);
            }
            stat_add(Stat::Read, 1);
            stat_add(Stat::ReadBytes, p.piece.len as u64);
            work.next += 1;
            completions += 1;
            reads += 1;
            bytes += p.piece.len;
        }
        if reads > 0 {
            trace::svcrdma_post_chunk(ChunkOp::Read, reads, bytes);
        }
        Ok(completions)
    }

    /// [`Self::post_reads`] for a work whose one Read is `piece`, straight
    /// into its pages through an entry of its read context: 1 if posted, 0
    /// if the send queue has no room for it now.
    fn post_single(
        &self,
        ctxt: usize,
        q: &Arc<RecvQ>,
        work: &mut ReadWork,
        piece: Piece,
    ) -> Result<usize> {
        let pages = work
            .ctxt
            .paged
            .as_ref()
            .and_then(PagedSinks::unregistered)
            .ok_or(EINVAL)?;
        match self.post_direct(ctxt, q, pages, core::slice::from_ref(&piece))? {
            Direct::Posted { .. } => {
                work.ctxt.single_read = None;
                trace::svcrdma_post_chunk(ChunkOp::Read, 1, piece.len);
                Ok(1)
            }
            Direct::NoRoom => Ok(0),
            // Every entry of the context is free: it was claimed with none
            // posted, and this is its only Read.
            Direct::EntryBusy => Err(EBUSY),
        }
    }

    /// Posts the Reads of `pieces` (one to [`READ_SLOTS`]) straight into
    /// `pages` as one chain through a free completion entry of read
    /// context `ctxt` of `q`, with a send queue slot each (given back
    /// unless they were posted), and counts them. When the send queue has
    /// room for fewer, the chain is cut to those. Inlined into both
    /// callers: called out of line it cost a 4 KiB WRITE 15 module
    /// instructions and a 1 MiB write 200 (kcount).
    #[inline(always)]
    fn post_direct(
        &self,
        ctxt: usize,
        q: &Arc<RecvQ>,
        pages: &Arc<PageSinks>,
        pieces: &[Piece],
    ) -> Result<Direct> {
        let mut n = pieces.len();
        while n > 0 && !self.sq.try_acquire_read(n as u32)? {
            n -= 1;
        }
        let Some(pieces) = pieces.get(..n).filter(|p| !p.is_empty()) else {
            return Ok(Direct::NoRoom);
        };
        let read = |p: &Piece| ChainRead {
            off: p.off,
            len: p.len,
            remote_addr: p.addr,
            rkey: p.rkey,
        };
        // A chain's length is a constant of its post, which sizes the
        // lists it builds: the usual WRITE's one Read builds one.
        let posted = match pieces {
            [a] => q.ops.post_chain(ctxt, self.ep, pages, &[read(a)]),
            [a, b] => q.ops.post_chain(ctxt, self.ep, pages, &[read(a), read(b)]),
            [a, b, c] => q
                .ops
                .post_chain(ctxt, self.ep, pages, &[read(a), read(b), read(c)]),
            _ => Err((EINVAL, 0)),
        };
        match posted {
            Ok(true) => {
                let bytes = pieces.iter().map(|p| p.len).sum();
                stat_add(Stat::Read, n as u64);
                stat_add(Stat::ReadBytes, bytes as u64);
                Ok(Direct::Posted { reads: n, bytes })
            }
            Ok(false) => {
                self.sq.release(n as u32);
                Ok(Direct::EntryBusy)
            }
            Err((e, went)) => {
                // Those not posted have no completion to give their slots
                // back; those that went out keep theirs (the connection is
                // closed). Not counted.
                self.sq.release(n.saturating_sub(went) as u32);
                Err(e)
            }
        }
    }
}

/// What [`Io::post_direct`] came to.
enum Direct {
    /// `reads` Reads of `bytes` in all are posted, as one chain.
    Posted { reads: usize, bytes: usize },
    /// The send queue has no room for it now.
    NoRoom,
    /// Every completion entry of the context is posted.
    EntryBusy,
}
