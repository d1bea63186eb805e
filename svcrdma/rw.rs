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
use super::sq_done::SqHandler;
use super::sq_gate::SqGate;
use crate::proto::pieces::Piece;
use crate::rust::kext::percpu::{PerCpuCounter, SVC_PATH_FIRST, TEST_SLOT};
use crate::rust::module::trace;
use crate::rust::rdma::send_chain::SendChain;
use crate::rust::rdma::send_pool::PooledSend;
use crate::rust::rdma::verbs::{
    Endpoint, MappedBuf, Segment as SgSegment, SendOp, SgEntry, WorkRequest,
};
use crate::rust::sunrpc::svc::ResPages;
use kernel::prelude::*;
use kernel::sync::Arc;

/// Counters of debugfs `svc_memreg`, per CPU since nfsd threads on every
/// CPU count into them per RPC (slots from `percpu::SVC_PATH_FIRST`).
///
/// Write and Reply chunk pieces sent straight from Reply pages, the pages
/// they named, and pieces copied into a cached buffer instead.
pub(super) static DIRECT_WRITES: PerCpuCounter = PerCpuCounter::new(SVC_PATH_FIRST);
pub(super) static DIRECT_PAGES: PerCpuCounter = PerCpuCounter::new(SVC_PATH_FIRST + 1);
pub(super) static COPIED_WRITES: PerCpuCounter = PerCpuCounter::new(SVC_PATH_FIRST + 2);
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
pub(super) static REGISTERED_READS: PerCpuCounter = PerCpuCounter::new(SVC_PATH_FIRST + 7);
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
pub(super) fn write_op(p: &Piece) -> SendOp {
    SendOp::RdmaWrite {
        remote_addr: p.addr,
        rkey: p.rkey,
    }
}

/// Largest buffer an RDMA Read or Write goes through (order-4 slab
/// object). A Write straight from pages may be longer (up to `MAX_SGE - 1`
/// pages, see [`Io::write_chunk_direct`]).
pub(super) const PIECE: usize = 64 * 1024;

/// What posting needs: the queue pair, its send queue gate and the
/// connection's buffer cache.
pub(super) struct Io<'a> {
    pub(super) ep: &'a Endpoint,
    pub(super) sq: &'a Arc<SqGate>,
    pub(super) cache: &'a Arc<BufCache>,
}

impl<'a> Io<'a> {
    /// A free send context, to carry a Reply's Writes and its Send
    /// (`None` when the pool made all it may and all are in use).
    #[inline(always)]
    pub(super) fn take_send(&self) -> Option<PooledSend<'a, SqGate>> {
        self.sq.sends.get(self.ep)
    }
}

/// A Reply's Send filled in a send context, to post with
/// [`Io::post_pooled`] behind the Writes chained where it was filled (once
/// the context holds the Reply's pages, if its Writes are from them). The
/// chain stays with its caller: it is an array of work requests, which a
/// return would copy whole, for most Replies empty.
pub(super) struct Ready<'a> {
    pub(super) send: PooledSend<'a, SqGate>,
    pub(super) len: usize,
    pub(super) inv: Option<u32>,
}

/// The scatter list of `buf[..len]`: one range, no allocation.
pub(super) fn one_segment(buf: Arc<MappedBuf>, len: usize) -> [SgSegment; 1] {
    [SgSegment {
        buf,
        offset: 0,
        len,
    }]
}

impl<'a> Io<'a> {
    /// Adds a Send or RDMA Write over `buf[..len]` to `chain`; the buffer
    /// goes back to the cache (class `slot`) when it completes.
    pub(super) fn queue_one(
        &self,
        chain: &mut SendChain<SqHandler>,
        buf: Arc<MappedBuf>,
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
    pub(super) fn queue_built(
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
        self.post_with_slots(n, || chain.post(self.ep))
    }

    /// Takes a send queue slot for each of `n` work requests, which
    /// `post` posts as one chain, only the last signaled; gives back the
    /// slots of those `post` says did not go out (they never complete).
    #[inline(always)]
    fn post_with_slots(
        &self,
        n: usize,
        post: impl FnOnce() -> core::result::Result<(), (Error, usize)>,
    ) -> Result {
        self.sq.acquire_n(u32::try_from(n)?)?;
        self.slots_posted(n, post())
    }

    /// After `n` work requests were posted as one chain with a send queue
    /// slot each (`res`): gives back the slots of those that did not go
    /// out (they never complete), and counts the chained Writes.
    #[inline(always)]
    fn slots_posted(&self, n: usize, res: core::result::Result<(), (Error, usize)>) -> Result {
        if let Err((e, posted)) = res {
            self.sq.release(u32::try_from(n - posted.min(n))?);
            return Err(e);
        }
        CHAINED_WRITES.count(n.saturating_sub(1) as u64);
        Ok(())
    }

    /// Posts a Send of `bytes`.
    pub(super) fn send(&self, bytes: &[u8], inv: Option<u32>) -> Result {
        self.send_filled(None, bytes.len(), inv, |out| {
            out.get_mut(..bytes.len())
                .ok_or(EINVAL)?
                .copy_from_slice(bytes);
            Ok(bytes.len())
        })
    }

    /// Posts a Send of at most `len` bytes that `fill` writes in place,
    /// returning how many it wrote, behind the RDMA Writes of `send`
    /// ([`Self::fill_send`], then [`Self::post_pooled`]).
    pub(super) fn send_filled(
        &self,
        send: Option<PooledSend<'a, SqGate>>,
        len: usize,
        inv: Option<u32>,
        fill: impl FnOnce(&mut [u8]) -> Result<usize>,
    ) -> Result {
        let mut chain = SendChain::new();
        match self.fill_send(&mut chain, send, len, inv, fill)? {
            Some(r) => self.post_pooled(&mut chain, r.send, r.len, r.inv),
            None => Ok(()),
        }
    }

    /// Fills a Send of at most `len` bytes that `fill` writes in place,
    /// returning how many it wrote, to go behind the RDMA Writes of `send`
    /// and of `chain`. The Send goes from `send`, or another of the
    /// connection's send contexts, and is returned to post; from a cached
    /// buffer (of at least `len` bytes), posted at once behind `chain`, if
    /// it is longer than theirs and `send` carries no Writes, or every
    /// context is in use and the pool may make no more.
    pub(super) fn fill_send(
        &self,
        chain: &mut SendChain<SqHandler>,
        send: Option<PooledSend<'a, SqGate>>,
        len: usize,
        inv: Option<u32>,
        fill: impl FnOnce(&mut [u8]) -> Result<usize>,
    ) -> Result<Option<Ready<'a>>> {
        let sends = &self.sq.sends;
        let fits = len <= sends.buf_len();
        // One with Writes is sent even if `len` is only a bound that does
        // not fit: `fill` fails if the Send really does not.
        let send = match send {
            Some(s) if fits || s.writes() > 0 => Some(s),
            Some(_) | None => fits.then(|| sends.get(self.ep)).flatten(),
        };
        if let Some(mut send) = send {
            let len = send.fill(fill)?;
            return Ok(Some(Ready { send, len, inv }));
        }
        let (t, len) = self.filled_send_buf(len, fill)?;
        let op = send_op(inv);
        self.queue_one(chain, t.buf, len, op, t.slot)?;
        self.post_chain(chain)?;
        trace::svcrdma_post_send(len, inv);
        Ok(None)
    }

    /// Posts `send`, `len` bytes, behind `chain`, with a send queue slot
    /// for each (one `ib_post_send`, only the Send signaled; its
    /// completion returns the slots).
    // Inlined, as the calls that build a Reply are (`res_pages`, `SendPool::get`,
    // `PooledSend::fill`): out of line each cost a 4 KiB READ's `sendto` its
    // call and its saved registers, about 40 instructions in all (kcount).
    #[inline(always)]
    pub(super) fn post_pooled(
        &self,
        chain: &mut SendChain<SqHandler>,
        send: PooledSend<'_, SqGate>,
        len: usize,
        inv: Option<u32>,
    ) -> Result {
        // A chain takes its slots at once: never more than the gate has.
        if chain.len() + send.writes() >= self.sq.depth() as usize {
            self.post_chain(chain)?;
        }
        let n = chain.len() + send.writes() + 1;
        // The slots first, then the post, with no closure between (one
        // LLVM kept out of line cost every Reply its call).
        self.sq.acquire_n(u32::try_from(n)?)?;
        self.slots_posted(n, send.post_behind(self.ep, chain, inv))?;
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
}
