// SPDX-License-Identifier: GPL-2.0

//! RDMA Reads of a Call's Read chunks (C `svc_rdma_process_read_list`,
//! `svc_rdma_wc_read_done`): where they land ([`ReadSinks`]), the work
//! of one Call ([`ReadWork`]) and its asynchronous completion ([`ReadOp`]).

use super::cache::{BufCache, Class};
use super::conn::CallCtxt;
use super::read_sinks::{PagedSinks, PagedTarget, ReadSink, ReadSinks};
use super::recv_queue::RecvQ;
use super::rw::{one_segment, Io, PIECE, REGISTERED_READS};
use super::stats::{stat_add, Stat};
use crate::impl_ring_in;
use crate::proto::pieces::{CallReadPieces, Piece, PieceError, RangeInPieces};
use crate::proto::svc_call::PagedCall;
use crate::rust::module::trace::{self, ChunkOp};
use crate::rust::rdma::read_slots::{ReadSlots, ReadSlotsOwner};
use crate::rust::rdma::verbs::{
    CompletionHandler, MappedBuf, ReceivedLoan, SendOp, WorkCompletion, WorkRequest,
};
use crate::rust::sunrpc::page_sinks::PageSinks;
use kernel::alloc::KVec;
use kernel::new_spinlock;
use kernel::prelude::*;
use kernel::sync::{Arc, SpinLock};

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
    /// In its Receive buffer (the slot named), kept from the device until
    /// the Call is assembled.
    Held(ReceivedLoan, usize),
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

    /// Whether it keeps its Receive.
    pub(super) fn holds_recv(&self) -> bool {
        matches!(self, Self::Held(..))
    }

    pub(super) fn bytes(&self) -> &[u8] {
        match self {
            Self::Held(loan, _) => loan.bytes(),
            Self::Copied(v) => v,
        }
    }

    /// The Receive slot it kept, given up (the loan ends here).
    pub(super) fn release(self) -> Option<usize> {
        match self {
            Self::Held(_, slot) => Some(slot),
            Self::Copied(_) => None,
        }
    }
}

/// A Call whose Read chunks are being pulled (C `svc_rdma_recv_ctxt`
/// with its `rc_readlist`).
pub(super) struct ReadWork {
    /// The received transport header and inline body.
    pub(super) msg: CallMsg,
    /// The request's state with the decoded header, until the Call is
    /// assembled.
    ctxt: Option<KBox<CallCtxt>>,
    pieces: KVec<ReadPiece>,
    /// Pieces `[..next]` were posted.
    next: usize,
    /// Where the Read chunk lands when it is read into pages of its own;
    /// `None` when the pieces land in cached sinks.
    pub(super) paged: Option<PagedSinks>,
}

impl ReadWork {
    /// Plans the Reads of the call chunk and Read chunks of `pcl`, parsed
    /// from `msg`: into pages of their own with `paged`, else into cached
    /// sinks.
    pub(super) fn new(
        msg: CallMsg,
        mut ctxt: KBox<CallCtxt>,
        paged: Option<(PagedCall, Arc<PageSinks>)>,
        sinks: &ReadSinks,
    ) -> Result<Self> {
        let pool = match sinks {
            ReadSinks::RegisteredPages(pool) => Some(pool.clone()),
            _ => None,
        };
        let piece_size = match paged {
            Some(_) => sinks.piece_size(),
            None => PIECE,
        };
        let paged = paged
            .map(|(l, pages)| PagedSinks::new(l, pages, pool))
            .transpose()?;
        // The list of an earlier Call this state carried, if any: its
        // allocation is reused.
        let mut pieces = core::mem::take(&mut ctxt.read_pieces);
        pieces.clear();
        let pcl = ctxt.call.pcl()?;
        let reads = CallReadPieces::new(&pcl, piece_size);
        // Room for every piece at once, not grown by doubling as they come.
        pieces.reserve(reads.max_count(), GFP_KERNEL)?;
        for p in reads {
            let (src, piece) = p.map_err(piece_error)?;
            let (sink, run) = (None, None);
            pieces.push(
                ReadPiece {
                    src,
                    piece,
                    sink,
                    run,
                },
                GFP_KERNEL,
            )?;
        }
        Ok(Self {
            msg,
            ctxt: Some(ctxt),
            pieces,
            next: 0,
            paged,
        })
    }

    /// Takes the request's state with the Call's decoded header (once).
    pub(super) fn take_ctxt(&mut self) -> Option<KBox<CallCtxt>> {
        self.ctxt.take()
    }

    /// Whether every Read was posted.
    pub(super) fn all_posted(&self) -> bool {
        self.next >= self.pieces.len()
    }

    /// Calls `put(at, buf, buf_off, len)` for the bytes `[start, start +
    /// len)` of chunk `src`, in order, `at` counting from `start`. Fails if
    /// the pieces do not cover the range.
    pub(super) fn copy_out(
        &self,
        src: usize,
        start: usize,
        len: usize,
        mut put: impl FnMut(usize, &MappedBuf, usize, usize) -> Result,
    ) -> Result {
        let of_src = self.pieces.iter().filter(|p| p.src == src);
        for found in RangeInPieces::new(of_src.map(|p| (p, p.piece)), start, len) {
            let (p, run) = found.map_err(piece_error)?;
            let (buf, _) = p.sink.as_ref().ok_or(EINVAL)?;
            put(run.at, buf, run.in_piece, run.len)?;
        }
        Ok(())
    }

    /// Gives the sink buffers back to the cache: their Reads all
    /// succeeded, so their registration, if any, is known to be good (a
    /// work that failed is dropped instead, which frees its buffers).
    /// Returns the emptied list, for the request's state to keep.
    pub(super) fn recycle(mut self, cache: &BufCache) -> KVec<ReadPiece> {
        for p in self.pieces.drain_all() {
            if let Some((buf, slot)) = p.sink {
                cache.put(buf, slot);
            }
        }
        core::mem::take(&mut self.pieces)
    }
}

struct OpState {
    /// Posted Reads whose completion has not run yet.
    pending: u32,
    /// A Read failed (or was flushed).
    failed: bool,
    /// Kept as is until the connection is freed: a registration posted
    /// for a Read that could not be posted still names one of its sinks
    /// (see [`Io::post_reads`]).
    hold: bool,
    /// The work, while no thread has it.
    work: Option<ReadWork>,
}

/// A Call being read: shared by the completion handlers of its Reads,
/// the connection's queues and the thread that works on it.
///
/// # Invariants
///
/// When `pending` drops to zero while the work is parked here (and not
/// held), the operation is queued on its connection's read-complete queue
/// exactly once; a thread that takes the work puts it back and queues the
/// operation itself if nothing is pending by then.
#[pin_data]
pub(super) struct ReadOp {
    #[pin]
    state: SpinLock<OpState>,
    /// The completion entries of the Call's Reads into its pages (C
    /// `svc_rdma_chunk_ctxt` in the receive context). Each posted Read
    /// keeps the connection's receive queues, where the operation goes
    /// when its last Read completes: the operation holds no reference to
    /// its connection, which keeps idle operations for reuse.
    slots: ReadSlots<ReadOp>,
}

impl_ring_in!(ReadOp, slots: ReadSlots<ReadOp>);

impl ReadSlotsOwner for ReadOp {
    type Context = RecvQ;

    fn read_done(this: Arc<Self>, q: Arc<RecvQ>, wc: &WorkCompletion) {
        read_completed(&q, &this, 1, wc);
    }
}

/// A Read of `op` completed with `wc` (C `svc_rdma_wc_read_done`): returns
/// its `slots` send queue slots and, for the operation's last Read,
/// queues the operation on the connection's read-complete queue `q`.
fn read_completed(q: &RecvQ, op: &Arc<ReadOp>, slots: u32, wc: &WorkCompletion) {
    if !wc.is_ok() && !wc.is_flush() {
        trace::svcrdma_wc_read_err(wc.status);
        crate::pr_warn_ratelimited!(
            "svcrdma: RDMA Read failed, status {}; closing the connection\n",
            wc.status
        );
        // Only this connection (C `svc_rdma_wc_read_done`).
        q.link().close();
    }
    if op.done(wc.is_ok()) {
        q.read_done(op.clone());
    }
    q.sq.release(slots);
}

/// What a thread finds in an operation it took off a queue.
pub(super) enum Taken {
    /// A Read failed: the connection is being closed.
    Failed(ReadWork),
    /// Work to continue (post the rest, or assemble the Call).
    Work(ReadWork),
    /// Nothing (a held operation, or one already taken).
    Nothing,
}

impl ReadOp {
    pub(super) fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                state <- new_spinlock!(
                    OpState { pending: 0, failed: false, hold: false, work: None },
                    "svcrdma::read_op"
                ),
                slots: ReadSlots::new(),
            }),
            GFP_KERNEL,
        )
    }

    /// The operation again for another Call, if nothing else holds it
    /// (the completion of its last Read may not have dropped its handler
    /// yet) and it ended well: then it is as [`Self::new`] made it.
    pub(super) fn reusable(this: Arc<Self>) -> Option<Arc<Self>> {
        let unique = Arc::into_unique_or_drop(this)?;
        let clean = {
            let st = unique.state.lock();
            st.pending == 0 && !st.failed && !st.hold && st.work.is_none()
        };
        clean.then(|| unique.into())
    }

    /// Takes the work out (after the operation came off a queue).
    pub(super) fn take(&self) -> Taken {
        let mut st = self.state.lock();
        if st.hold || st.pending > 0 {
            return Taken::Nothing;
        }
        match st.work.take() {
            Some(w) if st.failed => Taken::Failed(w),
            Some(w) => Taken::Work(w),
            None => Taken::Nothing,
        }
    }

    /// Puts the work back; `true` if no Read is pending, so the caller
    /// must queue the operation again.
    pub(super) fn put_back(&self, work: ReadWork) -> bool {
        let mut st = self.state.lock();
        st.work = Some(work);
        st.pending == 0
    }

    /// Puts the work back for good: it is freed with the connection, after
    /// its queue pair was drained.
    pub(super) fn hold(&self, work: ReadWork) {
        let mut st = self.state.lock();
        st.failed = true;
        st.hold = true;
        st.work = Some(work);
    }

    fn add_pending(&self) {
        let mut st = self.state.lock();
        st.pending = st.pending.saturating_add(1);
    }

    /// One Read completed (or was not posted after all); `true` if the
    /// operation must now be queued.
    fn done(&self, ok: bool) -> bool {
        let mut st = self.state.lock();
        st.pending = st.pending.saturating_sub(1);
        if !ok {
            st.failed = true;
        }
        st.pending == 0 && st.work.is_some() && !st.hold
    }
}

/// Completion of one RDMA Read (C `svc_rdma_wc_read_done`): returns its
/// send queue slots (two when its sink was registered just before it: the
/// unsignaled REG_MR ahead of it used one) and, for the operation's last
/// Read, queues the operation on the connection's read-complete queue.
pub(super) struct ReadHandler {
    slots: u32,
    op: Arc<ReadOp>,
    q: Arc<RecvQ>,
}

impl CompletionHandler for ReadHandler {
    fn complete(&self, _wr: &Arc<WorkRequest<Self>>, wc: &WorkCompletion) {
        read_completed(&self.q, &self.op, self.slots, wc);
    }
}

impl Io<'_> {
    /// Posts the next Reads of `work` (taken out of `op`) that the send
    /// queue has room for now, without waiting (C posts them all and
    /// waits for room; a thread here never waits on a peer). Returns how
    /// many were posted; the rest are posted by a later `xpo_recvfrom`,
    /// when completions have made room.
    ///
    /// On an error the connection must be closed and `work` held with
    /// [`ReadOp::hold`]: if a sink's registration was posted but its Read
    /// was not, the queued REG_MR still names the sink's MR, so the sink
    /// may only be freed once the queue pair is drained. That REG_MR's
    /// send queue slot stays taken (no completion will return it: the
    /// entry is retired by the drain), so the gate never counts more free
    /// slots than the queue has.
    pub(super) fn post_reads(
        &self,
        op: &Arc<ReadOp>,
        q: &Arc<RecvQ>,
        work: &mut ReadWork,
    ) -> Result<usize> {
        let mut posted = 0;
        let mut bytes = 0;
        while let Some(p) = work.pieces.get_mut(work.next) {
            // Into the Call's own pages through one of the operation's
            // completion entries when one is free (no work request object
            // or reference per page: the common case).
            let direct = work.paged.as_ref().and_then(PagedSinks::unregistered);
            if let Some(pages) = direct.filter(|_| op.slots.free() > 0) {
                if !self.sq.try_acquire_read(1)? {
                    break;
                }
                op.add_pending();
                let piece = p.piece;
                let (off, len) = (piece.off, piece.len);
                match ReadSlots::post(op, q, self.ep, pages, off, len, piece.addr, piece.rkey) {
                    Ok(true) => {
                        stat_add(Stat::Read, 1);
                        stat_add(Stat::ReadBytes, piece.len as u64);
                        work.next += 1;
                        posted += 1;
                        bytes += piece.len;
                        continue;
                    }
                    // Taken meanwhile (cannot happen: only this thread
                    // posts the operation's Reads): the way below.
                    Ok(false) => {
                        op.done(true);
                        self.sq.release(1);
                    }
                    Err(e) => {
                        // Not posted: no completion for it. The work is
                        // held by the thread, so this cannot queue the
                        // operation.
                        op.done(false);
                        self.sq.release(1);
                        return Err(e);
                    }
                }
            }
            // Into the Call's own pages (scattered over, or through a
            // registration of them), or into a sink from the cache.
            let (sink, taken, run) = match &work.paged {
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
                op: op.clone(),
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
            op.add_pending();
            let read = SendOp::RdmaRead {
                remote_addr: p.piece.addr,
                rkey: p.piece.rkey,
            };
            if let Err(e) = self.ep.post_send(wr, read) {
                // Not posted: no completion for it. The work is held by
                // the thread, so this cannot queue the operation.
                op.done(false);
                self.sq.release(1);
                return Err(e);
            }
            stat_add(Stat::Read, 1);
            stat_add(Stat::ReadBytes, p.piece.len as u64);
            work.next += 1;
            posted += 1;
            bytes += p.piece.len;
        }
        if posted > 0 {
            trace::svcrdma_post_chunk(ChunkOp::Read, posted, bytes);
        }
        Ok(posted)
    }
}
