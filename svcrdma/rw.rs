// SPDX-License-Identifier: GPL-2.0

//! RDMA Read and Write of chunks (C `svc_rdma_rw.c`); the send queue gate
//! they post through is in `sq_gate.rs`.
//!
//! Data moves through buffers of at most [`PIECE`] bytes mapped on the
//! connection's device, taken from the registration cache: a Write or
//! Reply chunk is copied out of `rq_res` into them and pushed; a Read chunk
//! is pulled into them and later copied into the pages of whichever
//! request finishes the Call. With `svc_memreg=direct` there is no copy
//! for Write chunks (pushed from the Reply's pages) nor for a Call's single
//! Read chunk where the device allows (pulled into pages taken from the
//! request that posts the Reads, as C does, mapped once: [`PagedSinks`];
//! the finishing request takes them over). On iWARP,
//! where a Read's sink needs a remotely writable registration, each such
//! Read goes through an MR of the connection's pool registered over the
//! pages it lands in ([`ReadSinks::RegisteredPages`]).
//! The client's segments are addressed piecewise, so one segment may take
//! several work requests and one piece never spans two segments.
//!
//! RDMA Reads are asynchronous (C `svc_rdma_process_read_list`,
//! `svc_rdma_wc_read_done`): a Call with Read chunks becomes a [`ReadOp`]
//! whose Reads are posted without waiting. When the last one completes,
//! the operation is queued on its connection's read-complete queue
//! ([`RecvQ::read_done`]) and the transport marked `XPT_DATA`; a later
//! `xpo_recvfrom`, on any server thread, takes it from there and either
//! posts the Reads that did not fit in the send queue yet or assembles the
//! Call. No server thread ever waits for a peer to answer a Read.

use super::cache::{self, BufCache, Class};
use super::conn::CallCtxt;
use super::recv_queue::RecvQ;
use super::sq_gate::{SqGate, SqHandler};
use crate::proto::msg::Segment;
use crate::proto::pieces::{CallReadPieces, Piece, PieceError, Pieces, RangeInPieces};
use crate::proto::svc_call::PagedCall;
use crate::rust::page_sinks::PageSinks;
use crate::rust::percpu::{PerCpuCounter, SVC_PATH_FIRST, TEST_SLOT};
use crate::rust::reply_pages::ReplyPages;
use crate::rust::send_chain::SendChain;
use crate::rust::sink_pool::SinkMrPool;
use crate::rust::svc::{stat_add, ResPages, Rqst, Stat};
use crate::rust::trace::{self, ChunkOp};
use crate::rust::verbs::{
    CompletionHandler, DmaBuf, Endpoint, Segment as SgSegment, SendOp, SgEntry, WorkCompletion,
    WorkRequest, MAX_SGE,
};
use kernel::alloc::KVec;
use kernel::new_spinlock;
use kernel::page::PAGE_SIZE;
use kernel::prelude::*;
use kernel::sync::{Arc, SpinLock};

/// Counters of debugfs `svc_memreg`, per CPU since nfsd threads on every
/// CPU count into them per RPC (slots from `percpu::SVC_PATH_FIRST`).
///
/// Write and Reply chunk pieces sent straight from Reply pages, the pages
/// they named, and pieces copied into a cached buffer instead.
static DIRECT_WRITES: PerCpuCounter = PerCpuCounter::new(SVC_PATH_FIRST);
static DIRECT_PAGES: PerCpuCounter = PerCpuCounter::new(SVC_PATH_FIRST + 1);
static COPIED_WRITES: PerCpuCounter = PerCpuCounter::new(SVC_PATH_FIRST + 2);
/// Calls whose Read chunk was read into pages handed to the request, the
/// pages handed over, and Calls whose Read chunks were copied out of
/// cached sinks instead.
static PAGED_READS: PerCpuCounter = PerCpuCounter::new(SVC_PATH_FIRST + 3);
static PAGED_PAGES: PerCpuCounter = PerCpuCounter::new(SVC_PATH_FIRST + 4);
static COPIED_READS: PerCpuCounter = PerCpuCounter::new(SVC_PATH_FIRST + 5);
/// RDMA Writes posted unsignaled ahead of a Send or another Write in one
/// chain ([`Io::post_chain`]).
static CHAINED_WRITES: PerCpuCounter = PerCpuCounter::new(SVC_PATH_FIRST + 6);
/// RDMA Reads into pages through a registration from the connection's MR
/// pool (iWARP).
static REGISTERED_READS: PerCpuCounter = PerCpuCounter::new(SVC_PATH_FIRST + 7);
/// Inline Replies whose page data went out as Send SGEs of its own, and
/// the pages they mapped ([`Io::send_filled_around`]).
static MAPPED_SENDS: PerCpuCounter = PerCpuCounter::new(SVC_PATH_FIRST + 8);
static MAPPED_SEND_PAGES: PerCpuCounter = PerCpuCounter::new(SVC_PATH_FIRST + 9);
const _: () = assert!(SVC_PATH_FIRST + 9 < TEST_SLOT);

/// Writes the debugfs view of how Write chunk pieces left and Read chunks
/// arrived.
pub(super) fn show_writes(f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
    writeln!(
        f,
        "direct_writes direct_pages copied_writes paged_reads paged_pages copied_reads chained_writes registered_reads mapped_sends mapped_send_pages"
    )?;
    writeln!(
        f,
        "{} {} {} {} {} {} {} {} {} {}",
        DIRECT_WRITES.value(),
        DIRECT_PAGES.value(),
        COPIED_WRITES.value(),
        PAGED_READS.value(),
        PAGED_PAGES.value(),
        COPIED_READS.value(),
        CHAINED_WRITES.value(),
        REGISTERED_READS.value(),
        MAPPED_SENDS.value(),
        MAPPED_SEND_PAGES.value()
    )
}

/// Counts a Call assembled from its Read chunks: `pages` handed over, or
/// copied out of cached sinks when `None`.
pub(super) fn count_read_call(pages: Option<usize>) {
    match pages {
        Some(n) => {
            PAGED_READS.count(1);
            PAGED_PAGES.count(u64::try_from(n).unwrap_or(u64::MAX));
        }
        None => COPIED_READS.count(1),
    }
}

/// A Send, or a Send With Invalidate of `inv`.
fn send_op(inv: Option<u32>) -> SendOp {
    match inv {
        Some(k) => SendOp::SendWithInvalidate(k),
        None => SendOp::Send,
    }
}

/// The RDMA Write of piece `p` to the client's segment.
fn write_op(p: &Piece) -> SendOp {
    SendOp::RdmaWrite {
        remote_addr: p.addr,
        rkey: p.rkey,
    }
}

/// Largest buffer an RDMA Read or Write goes through (order-4 slab
/// object). A Write straight from pages may be longer (up to `MAX_SGE - 1`
/// pages, see [`Io::write_chunk_direct`]).
pub(super) const PIECE: usize = 64 * 1024;

/// A Reply being sent: its request and, once a long chunk's Writes go out
/// straight from its pages, the array those Writes hold the pages in
/// ([`ReplyPages`], made by the first such chunk). The request's page
/// references go to the array once the Reply is sent, whatever the
/// outcome ([`Rqst::give_reply_pages`]; Writes may have been posted even
/// if the rest failed).
pub(super) struct ReplyFrom<'a> {
    pub(super) rqst: &'a Rqst,
    pages: Option<Arc<ReplyPages>>,
}

impl<'a> ReplyFrom<'a> {
    /// The Reply of `rqst`, no array made yet.
    pub(super) fn new(rqst: &'a Rqst) -> Self {
        Self { rqst, pages: None }
    }

    /// The array, if a chunk made one: the request's references go to it.
    pub(super) fn into_pages(self) -> Option<Arc<ReplyPages>> {
        self.pages
    }
}

/// Bytes from which a chunk's Writes straight from the Reply's pages hold
/// the Reply's page array ([`ReplyPages`]) rather than a reference per
/// page: the array costs two allocations and a pass over the Reply's
/// pages, a page's reference two atomic operations and its lookups.
const REPLY_PAGES_MIN: usize = 16 * PAGE_SIZE;

/// Most pages one RDMA Read into pages scatters over (its SGEs).
pub(super) const PAGED_SGES: usize = MAX_SGE;

/// Largest RDMA Read into pages: one page less than [`PAGED_SGES`], so a
/// piece that starts anywhere in a page (a client's segments need not be
/// page-sized) still spans at most that many pages.
const PAGED_PIECE: usize = (PAGED_SGES - 1) * PAGE_SIZE;

/// Pages one MR of a connection's pool maps (fewer if the device allows
/// fewer): a Read of up to 64 pages, one page less (see [`PAGED_PIECE`]),
/// so a 256 KiB WRITE is one Read and a 1 MiB one four, as with C's
/// `rdma_rw` MRs.
pub(super) const REGISTERED_PAGES: u32 = 65;

/// Where a connection's RDMA Reads land.
pub(super) enum ReadSinks {
    /// Buffers from the registration cache, copied into the request's
    /// pages when the Call is assembled.
    Cached,
    /// A Call's single Read chunk lands in pages of its own, which the
    /// request takes over: each Read scatters over its pages with one
    /// entry per page (devices whose sinks need no registration).
    Pages,
    /// As `Pages`, each Read through an MR of this pool registered over
    /// its pages and invalidated by the Read (iWARP).
    RegisteredPages(Arc<SinkMrPool>),
}

impl ReadSinks {
    /// The largest piece one Read moves.
    fn piece_size(&self) -> usize {
        match self {
            Self::Cached => PIECE,
            Self::Pages => PAGED_PIECE,
            // One page less than the MR maps, as for `PAGED_PIECE`.
            Self::RegisteredPages(pool) => {
                (pool.pages() as usize).saturating_sub(1).max(1) * PAGE_SIZE
            }
        }
    }

    /// Whether a Call's single Read chunk lands in pages of its own.
    pub(super) fn land_in_pages(&self) -> bool {
        !matches!(self, Self::Cached)
    }
}

impl kernel::fmt::Display for ReadSinks {
    fn fmt(&self, f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
        match self {
            Self::Cached => f.write_str("cached buffers"),
            Self::Pages => f.write_str("pages"),
            Self::RegisteredPages(pool) => {
                write!(f, "pages through a pool of {} MRs", pool.idle())
            }
        }
    }
}

/// The pages a Call's single Read chunk is read into (see [`PagedCall`]):
/// taken from the request that posts the Reads, mapped once, and handed
/// to the request that assembles the Call.
pub(super) struct PagedSinks {
    pub(super) layout: PagedCall,
    sinks: Arc<PageSinks>,
    /// The MR pool each Read's pages are registered through (iWARP).
    pool: Option<Arc<SinkMrPool>>,
}

/// What one Read's work request scatters into.
enum ReadSink {
    /// A Call's pages, one entry per page.
    Pages(Arc<PageSinks>),
    /// One buffer: a cached sink or a registration of pages.
    Buf(Arc<DmaBuf>),
}

/// Where one Read into a Call's pages lands.
enum PagedTarget {
    /// Scattered over the pages, one entry per page.
    Pages(Arc<PageSinks>),
    /// Through a registration of the pages it covers (its one entry).
    Run(Arc<DmaBuf>),
}

impl PagedSinks {
    /// The sinks of `layout`'s chunk: `sinks` has one page per page of
    /// the chunk.
    fn new(
        layout: PagedCall,
        sinks: Arc<PageSinks>,
        pool: Option<Arc<SinkMrPool>>,
    ) -> Result<Self> {
        if sinks.len() != layout.pages {
            return Err(EINVAL);
        }
        Ok(Self {
            layout,
            sinks,
            pool,
        })
    }

    /// Where the Read of `piece` (bytes of the chunk) lands: scattered
    /// over the pages, or through a registration of them when the
    /// connection registers its sinks.
    fn target(&self, ep: &Endpoint, piece: &Piece) -> Result<PagedTarget> {
        Ok(match &self.pool {
            Some(pool) => {
                PagedTarget::Run(ep.register_page_run(pool, &self.sinks, piece.off, piece.len)?)
            }
            None => PagedTarget::Pages(self.sinks.clone()),
        })
    }

    /// The pages the chunk was read into, every one of them (the chunk
    /// covers all), for the request that assembles the Call to take.
    pub(super) fn sinks(&self) -> &PageSinks {
        &self.sinks
    }
}

/// One RDMA Read of a Call: where it is read from and, once posted, the
/// buffer it lands in.
struct ReadPiece {
    /// The chunk read from (see [`crate::proto::pieces::CALL_CHUNK`]).
    src: usize,
    piece: Piece,
    /// The sink buffer and its cache class, once the Read was posted.
    sink: Option<(Arc<DmaBuf>, usize)>,
    /// The registration of pages a Read went through (iWARP), kept with
    /// the work: a work held until the drain keeps an MR a queued REG_MR
    /// names (see [`Io::post_reads`]).
    run: Option<Arc<DmaBuf>>,
}

/// The error a failure to cut or find pieces is reported as (C uses the
/// same codes).
fn piece_error(e: PieceError) -> Error {
    match e {
        PieceError::ShortSegments => EMSGSIZE,
        PieceError::Overflow | PieceError::NotCovered => EINVAL,
    }
}

/// A Call whose Read chunks are being pulled (C `svc_rdma_recv_ctxt`
/// with its `rc_readlist`).
pub(super) struct ReadWork {
    /// The received transport header and inline body.
    pub(super) msg: KVec<u8>,
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
        msg: KVec<u8>,
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
        let pcl = ctxt.call.pcl()?;
        let reads = CallReadPieces::new(&pcl, piece_size);
        // Room for every piece at once, not grown by doubling as they come.
        let mut pieces = KVec::with_capacity(reads.max_count(), GFP_KERNEL)?;
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
        mut put: impl FnMut(usize, &DmaBuf, usize, usize) -> Result,
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
    pub(super) fn recycle(self, cache: &BufCache) {
        for p in self.pieces {
            if let Some((buf, slot)) = p.sink {
                cache.put(buf, slot);
            }
        }
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
            }),
            GFP_KERNEL,
        )
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
    sq: Arc<SqGate>,
    slots: u32,
    op: Arc<ReadOp>,
    q: Arc<RecvQ>,
}

impl CompletionHandler for ReadHandler {
    fn complete(&self, _wr: &Arc<WorkRequest<Self>>, wc: &WorkCompletion) {
        if !wc.is_ok() && !wc.is_flush() {
            trace::svcrdma_wc_read_err(wc.status);
            crate::pr_warn_ratelimited!(
                "svcrdma: RDMA Read failed, status {}; closing the connection\n",
                wc.status
            );
            // Only this connection (C `svc_rdma_wc_read_done`).
            self.q.link().close();
        }
        if self.op.done(wc.is_ok()) {
            self.q.read_done(self.op.clone());
        }
        self.sq.release(self.slots);
    }
}

/// What posting needs: the queue pair, its send queue gate and the
/// connection's buffer cache.
pub(super) struct Io<'a> {
    pub(super) ep: &'a Endpoint,
    pub(super) sq: &'a Arc<SqGate>,
    pub(super) cache: &'a Arc<BufCache>,
}

/// The scatter list of `buf[..len]`: one range, no allocation.
fn one_segment(buf: Arc<DmaBuf>, len: usize) -> [SgSegment; 1] {
    [SgSegment {
        buf,
        offset: 0,
        len,
    }]
}

impl Io<'_> {
    /// Adds a Send or RDMA Write over `buf[..len]` to `chain`; the buffer
    /// goes back to the cache (class `slot`) when it completes.
    fn queue_one(
        &self,
        chain: &mut SendChain<SqHandler>,
        buf: Arc<DmaBuf>,
        len: usize,
        op: SendOp,
        slot: usize,
    ) -> Result {
        self.queue_wr(chain, Some(slot), one_segment(buf, len).map(Ok), op)
    }

    /// Adds `op` over `sgl` (made as the request is built: the first
    /// error fails it) to `chain`, posting the chain first if it is full;
    /// on completion the first buffer goes back to the cache if `cache_slot`
    /// names its class, and the others (page mappings) are released.
    fn queue_wr(
        &self,
        chain: &mut SendChain<SqHandler>,
        cache_slot: Option<usize>,
        sgl: impl IntoIterator<Item = Result<impl Into<SgEntry>>>,
        op: SendOp,
    ) -> Result {
        let sq = self.sq.clone();
        let wr = WorkRequest::try_new(SqHandler { sq, cache_slot }, sgl)?;
        self.queue_built(chain, wr, op)
    }

    /// Adds the built request `wr` to `chain` as `op`, posting the chain
    /// first if it is full.
    fn queue_built(
        &self,
        chain: &mut SendChain<SqHandler>,
        wr: Arc<WorkRequest<SqHandler>>,
        op: SendOp,
    ) -> Result {
        // A chain takes its slots at once: never more than the gate has.
        if chain.is_full() || chain.len() >= self.sq.depth() as usize {
            self.post_chain(chain)?;
        }
        chain.push(wr, op)
    }

    /// Posts `chain` with a send queue slot per work request (C
    /// `svc_rdma_post_send`: one `ib_post_send`, only the last signaled);
    /// each request's completion returns its slot.
    pub(super) fn post_chain(&self, chain: &mut SendChain<SqHandler>) -> Result {
        let n = chain.len();
        if n == 0 {
            return Ok(());
        }
        self.sq.acquire_n(u32::try_from(n)?)?;
        if let Err((e, posted)) = chain.post(self.ep) {
            // Those not posted never complete: their slots come back here.
            self.sq.release(u32::try_from(n - posted.min(n))?);
            return Err(e);
        }
        CHAINED_WRITES.count((n - 1) as u64);
        Ok(())
    }

    /// Posts a Send of `bytes` from a cached buffer.
    pub(super) fn send(&self, bytes: &[u8], inv: Option<u32>) -> Result {
        self.send_after(&mut SendChain::new(), bytes, inv)
    }

    /// Posts a Send of `bytes` from a cached buffer behind the RDMA Writes
    /// in `chain`, in one chain.
    pub(super) fn send_after(
        &self,
        chain: &mut SendChain<SqHandler>,
        bytes: &[u8],
        inv: Option<u32>,
    ) -> Result {
        self.send_filled(chain, bytes.len(), inv, |out| {
            out.get_mut(..bytes.len())
                .ok_or(EINVAL)?
                .copy_from_slice(bytes);
            Ok(bytes.len())
        })
    }

    /// Posts a Send of `len` bytes that `fill` writes in place into a
    /// cached buffer (of at least `len` bytes), returning how many it
    /// wrote, behind the RDMA Writes in `chain`, in one chain.
    pub(super) fn send_filled(
        &self,
        chain: &mut SendChain<SqHandler>,
        len: usize,
        inv: Option<u32>,
        fill: impl FnOnce(&mut [u8]) -> Result<usize>,
    ) -> Result {
        let (t, len) = self.filled_send_buf(len, fill)?;
        let op = send_op(inv);
        self.queue_one(chain, t.buf, len, op, t.slot)?;
        self.post_chain(chain)?;
        trace::svcrdma_post_send(len, inv);
        Ok(())
    }

    /// A cached Send buffer of at least `len` bytes that `fill` wrote in
    /// place, and how many bytes it wrote; on an error the buffer goes
    /// back to the cache.
    #[inline(always)]
    fn filled_send_buf(
        &self,
        len: usize,
        fill: impl FnOnce(&mut [u8]) -> Result<usize>,
    ) -> Result<(cache::Taken, usize)> {
        let t = self.cache.get(self.ep, Class::Send, len)?;
        match t.buf.fill(fill) {
            Ok(len) => Ok((t, len)),
            Err(e) => {
                self.cache.put(t.buf, t.slot);
                Err(e)
            }
        }
    }

    /// As [`Self::send_filled`], with `pages` going out as Send SGEs of
    /// their own (referenced and mapped until the Send completes) between
    /// the first bytes `fill` wrote and the rest (C
    /// `svc_rdma_map_reply_msg`): an inline Reply's page data, not copied.
    /// `fill` returns where the pages go in what it wrote, and how much it
    /// wrote.
    pub(super) fn send_filled_around(
        &self,
        chain: &mut SendChain<SqHandler>,
        len: usize,
        inv: Option<u32>,
        pages: &ResPages<'_>,
        fill: impl FnOnce(&mut [u8]) -> Result<(usize, usize)>,
    ) -> Result {
        let range = pages.range()?;
        let mut split = 0;
        let (t, len) = self.filled_send_buf(len, |out| {
            let (at, n) = fill(out)?;
            if at == 0 || at > n {
                return Err(EINVAL);
            }
            split = at;
            Ok(n)
        })?;
        let op = send_op(inv);
        // The bytes behind the pages come from the same buffer, which the
        // request holds (and gives back to the cache on completion).
        let handler = SqHandler {
            sq: self.sq.clone(),
            cache_slot: Some(t.slot),
        };
        let wr = WorkRequest::with_pages_between(handler, self.ep, t.buf, split, len, range)?;
        self.queue_built(chain, wr, op)?;
        self.post_chain(chain)?;
        MAPPED_SENDS.count(1);
        MAPPED_SEND_PAGES.count(pages.count_pages() as u64);
        trace::svcrdma_post_send(len, inv);
        Ok(())
    }

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
                sq: self.sq.clone(),
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
        mut fill: impl FnMut(usize, &DmaBuf, usize) -> Result,
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
        fill: impl FnOnce(&DmaBuf) -> Result,
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
    /// [`Rqst::res_pages`]) is copied through cached buffers, [`PIECE`]
    /// bytes at a time.
    ///
    /// A long chunk's Writes hold the Reply's page array (see
    /// [`ReplyFrom`]); a short one's take a reference per page, cheaper
    /// than making the array.
    pub(super) fn write_chunk_direct(
        &self,
        chain: &mut SendChain<SqHandler>,
        kind: ChunkOp,
        segs: &[Segment],
        total: usize,
        from: &mut ReplyFrom<'_>,
        start: u32,
    ) -> Result {
        let rqst = from.rqst;
        // Where the chunk's byte `off` is in the Reply.
        let reply_at =
            |off: usize| -> Result<u32> { start.checked_add(u32::try_from(off)?).ok_or(EINVAL) };
        // The pages of one piece at a time: at most `sges`.
        let sges = self.ep.max_send_sge().min(MAX_SGE);
        // An unaligned piece spans one page more than its length needs.
        // Pieces written from pages may be longer than a buffer (`PIECE`):
        // fewer Writes. One that is copied after all goes through buffers
        // in parts.
        let max_piece = sges
            .saturating_sub(1)
            .saturating_mul(kernel::page::PAGE_SIZE);
        if max_piece == 0 {
            return self.write_chunk(chain, kind, segs, total, |off, buf, len| {
                rqst.read_res_into_buf(reply_at(off)?, buf, 0, len)
            });
        }
        if from.pages.is_none() && total >= REPLY_PAGES_MIN {
            from.pages = Some(rqst.reply_pages()?);
        }
        let mut posted = 0;
        for p in Pieces::new(segs, total, max_piece) {
            let p = p.map_err(piece_error)?;
            let at = reply_at(p.off)?;
            let len = u32::try_from(p.len)?;
            if let Some(pages) = rqst.res_pages(at, len, sges) {
                // The pages are mapped (and, without the Reply's array,
                // referenced) as the work request is built, for that
                // request alone, all in one call (no allocation or object
                // per page or for the list).
                let n = pages.count_pages() as u64;
                let handler = SqHandler {
                    sq: self.sq.clone(),
                    cache_slot: None,
                };
                let wr = match &from.pages {
                    Some(reply) => {
                        WorkRequest::with_reply_pages(handler, self.ep, reply, pages.range()?)?
                    }
                    None => WorkRequest::with_pages(handler, self.ep, pages.range()?)?,
                };
                stat_add(Stat::Write, 1);
                stat_add(Stat::WriteBytes, p.len as u64);
                self.queue_built(chain, wr, write_op(&p))?;
                DIRECT_WRITES.count(1);
                DIRECT_PAGES.count(n);
                posted += 1;
            } else {
                for part in p.parts(PIECE) {
                    let at = reply_at(part.off)?;
                    let copy = |buf: &DmaBuf| rqst.read_res_into_buf(at, buf, 0, part.len);
                    self.write_copied(chain, &part, copy)?;
                    posted += 1;
                }
            }
        }
        trace::svcrdma_post_chunk(kind, posted, total);
        Ok(())
    }
}
