// SPDX-License-Identifier: GPL-2.0

//! Memory registration strategies of the client: marshaling asks for a
//! range of a request's buffer to be registered and gets RDMA segments
//! back, plus a [`Reg`] it keeps until the reply; reply handling releases
//! each [`Reg`] as its kind requires. The strategies live in `frwr.rs`,
//! `physical.rs` and `regcache.rs`; each adds a variant here and a branch
//! in `Conn::register` and `Conn::finish`, nothing in marshaling.
//!
//! - `fmr` (default): FMR-style pool semantics, as in the design papers,
//!   built on FRWR work requests (`ib_alloc_mr`, `IB_WR_REG_MR`,
//!   `IB_WR_LOCAL_INV`). It is not the kernel's FMR API (`ib_fmr_pool`,
//!   removed in Linux 5.8); the name is the pool's behaviour: a pool of MRs
//!   allocated at connect time, so every steering tag exists before any
//!   I/O, and optionally batched invalidation. Each chunk is
//!   mapped into an MR with REG_MR chained in front of the Send and
//!   invalidated after the reply (LOCAL_INV, or remotely by Send With
//!   Invalidate). With `fmr_dirty_watermark` > 0, invalidations are batched:
//!   the RPC completes before its MRs are invalidated, and until the batch
//!   runs (at the watermark, or at most [`DIRTY_FLUSH_MS`] after an MR
//!   became dirty) the server can still read and write whatever the MRs
//!   cover: pages the client may have reused, and the `rq_buffer` behind
//!   Reply chunks, which a later RPC reuses (see `Documentation/xprtrdma.md`).
//! - `physical` (opt-in): the protection domain's unsafe global rkey plus
//!   DMA addresses; no per-I/O registration work, and the server can read
//!   and write all client memory at any time. Trusted servers only.
//! - `cache` (opt-in): registrations of the I/O's pages kept across RPCs
//!   (`regcache.rs`); the server can read or write the cached pages until
//!   they are evicted. Trusted servers only.

use super::regcache::CacheUse;
use crate::proto::marshal_fast::CallSketch;
use crate::proto::msg::Segment;
use crate::proto::planner::{RpcShape, XdrBufShape};
use crate::rust::kext::percpu::{PerCpuCounter, CLIENT_FIRST, TEST_SLOT};
use crate::rust::module::params;
use crate::rust::sunrpc::xprt::{CallLayout, CallLengths, Mr, PhysMap, XdrBufLayout};
use crate::small_list::SmallList;
use kernel::prelude::*;
use kernel::sync::atomic::{Atomic, Relaxed};

/// The part of a request's buffer a chunk registers.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Span {
    /// The receive buffer (the peer writes: Write and Reply chunks), or
    /// the send buffer (the peer reads: Read chunks and long calls).
    pub(crate) rcv: bool,
    /// Byte range within that `xdr_buf`.
    pub(crate) offset: u32,
    pub(crate) len: u32,
}

impl Span {
    /// Part of the send buffer, for the peer to read.
    pub(crate) fn send(offset: u32, len: u32) -> Self {
        Self {
            rcv: false,
            offset,
            len,
        }
    }

    /// Part of the receive buffer, for the peer to write.
    pub(crate) fn recv(offset: u32, len: u32) -> Self {
        Self {
            rcv: true,
            offset,
            len,
        }
    }

    /// Whether the peer writes into it.
    pub(crate) fn writable(&self) -> bool {
        self.rcv
    }
}

/// Longest time an MR stays registered after its RPC completed when
/// invalidations are batched (`fmr_dirty_watermark`): a delayed work runs
/// the batch of an idle connection this long after an MR became dirty.
pub(crate) const DIRTY_FLUSH_MS: u32 = 1000;

/// The registration strategy of a transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Strategy {
    /// FMR-style pool semantics on FRWR: MRs allocated at connect,
    /// mapped per I/O with REG_MR, invalidated with LOCAL_INV.
    Fmr,
    /// Global steering tag and DMA addresses.
    Physical,
    /// Registrations of pieces of page lists kept across RPCs; head and tail parts
    /// as `Fmr`.
    Cache,
}

impl Strategy {
    /// Reads the `memreg` module parameter.
    pub(crate) fn from_param() -> Result<Self> {
        match params::memreg() {
            "" | "fmr" | "frwr" => Ok(Self::Fmr),
            "physical" => Ok(Self::Physical),
            "cache" => Ok(Self::Cache),
            other => {
                pr_err!(
                    "memreg={} is not a registration strategy (fmr, physical, cache)\n",
                    other
                );
                Err(EINVAL)
            }
        }
    }

    /// Its name as the `memreg` parameter spells it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Fmr => "fmr",
            Self::Physical => "physical",
            Self::Cache => "cache",
        }
    }

    fn index(self) -> usize {
        match self {
            Self::Fmr => 0,
            Self::Physical => 1,
            Self::Cache => 2,
        }
    }

    /// Whether its chunks are made of page-sized segments (as many as the
    /// inline header holds), rather than of MRs of many pages.
    pub(crate) fn page_segments(self) -> bool {
        matches!(self, Self::Physical)
    }

    /// Whether it registers with the connection's MR pool (all or part of
    /// each chunk).
    pub(crate) fn uses_mr_pool(self) -> bool {
        matches!(self, Self::Fmr | Self::Cache)
    }
}

/// Segments a chunk usually fits in without an allocation of its own.
pub(super) const INLINE_SEGS: usize = 4;

/// The segments of one chunk as a call is built.
pub(super) type Segs = SmallList<Segment, INLINE_SEGS>;

/// One registration a request holds until its reply.
pub(super) enum Reg {
    /// A mapped and registered MR (returns to the pool once invalidated).
    Mr(Mr),
    /// DMA mappings under the global rkey (unmapped on drop). Boxed: the
    /// mapping is twice the size of the other kinds, and every request's
    /// list of registrations moves (built, kept in the request's state,
    /// taken from it) at the size of its largest kind.
    Phys(#[expect(dead_code, reason = "held only to be unmapped on drop")] KBox<PhysMap>),
    /// A use of a cached registration (released after the reply).
    Cached(CacheUse),
}

/// The registrations of one request: the first kept inline, the others in
/// a vector. Most requests hold one (an NFS READ's Write chunk, one MR per
/// 256 KiB of a larger I/O), so building a call allocates nothing for its
/// list (C keeps a request's MRs on a list in its preallocated
/// `rpcrdma_req`). Order is kept: `Conn::unpost` relies on it.
///
/// # Invariants
///
/// `rest` is `None` or empty whenever `first` is `None`.
#[derive(Default)]
pub(super) struct RegList {
    first: Option<Reg>,
    /// Made at the second registration only: the kernel's `Vec` calls the
    /// allocator when dropped even if it never allocated, and a list is
    /// dropped once per RPC.
    rest: Option<KVec<Reg>>,
}

impl RegList {
    /// An empty list.
    pub(super) fn new() -> Self {
        Self::default()
    }

    /// How many registrations the list holds.
    pub(super) fn len(&self) -> usize {
        usize::from(self.first.is_some()) + self.rest.as_ref().map_or(0, |r| r.len())
    }

    /// Whether the list is empty.
    pub(super) fn is_empty(&self) -> bool {
        self.first.is_none()
    }

    /// The registrations, in order.
    pub(super) fn iter(&self) -> impl Iterator<Item = &Reg> {
        // The rest as a slice: no second `Option` to step through.
        Iterator::chain(self.first.iter(), self.rest_slice().iter())
    }

    /// The registrations after the first.
    fn rest_slice(&self) -> &[Reg] {
        self.rest.as_deref().unwrap_or_default()
    }

    /// The registration, if the list holds exactly one (a cached
    /// request's usual list): looked at without stepping an iterator.
    pub(super) fn only(&self) -> Option<&Reg> {
        self.rest_slice()
            .is_empty()
            .then_some(self.first.as_ref())
            .flatten()
    }

    /// The pool MRs among the registrations, in order.
    pub(super) fn mrs(&self) -> impl Iterator<Item = &Mr> {
        self.iter().filter_map(|r| match r {
            Reg::Mr(m) => Some(m),
            _ => None,
        })
    }

    /// The first registration, if it is a pool MR: the only one of a call
    /// registered in place (`Conn::send_fast_in_place`), posted without
    /// walking the list.
    pub(super) fn first_mr(&self) -> Option<&Mr> {
        match &self.first {
            Some(Reg::Mr(m)) => Some(m),
            _ => None,
        }
    }

    /// Makes room for one more, so that [`Self::push_within_capacity`]
    /// succeeds.
    pub(super) fn reserve_one(&mut self) -> Result {
        if self.first.is_some() {
            self.rest
                .get_or_insert_with(KVec::new)
                .reserve(1, GFP_KERNEL)?;
        }
        Ok(())
    }

    /// Appends `reg`.
    #[inline]
    pub(super) fn push(&mut self, reg: Reg) -> Result {
        match self.push_within_capacity(reg) {
            Ok(()) => Ok(()),
            Err(reg) => Ok(self
                .rest
                .get_or_insert_with(KVec::new)
                .push(reg, GFP_KERNEL)?),
        }
    }

    /// Appends `reg` if there is room without an allocation; gives it back
    /// otherwise.
    pub(super) fn push_within_capacity(&mut self, reg: Reg) -> core::result::Result<(), Reg> {
        if self.first.is_none() {
            // INVARIANT: `rest` is empty (the invariant), and stays so.
            // The `None` replaced is forgotten: dropped, it would cost a
            // call to the drop glue of `Reg` on every call's way (LLVM
            // does not see through it).
            core::mem::forget(self.first.replace(reg));
            return Ok(());
        }
        match &mut self.rest {
            Some(rest) => rest.push_within_capacity(reg).map_err(|e| e.0),
            None => Err(reg),
        }
    }

    /// Takes out the pool MR whose steering tag is `rkey`, if there is
    /// one, keeping the order of the others.
    pub(super) fn take_mr(&mut self, rkey: u32) -> Option<Mr> {
        let is_it = |r: &Reg| matches!(r, Reg::Mr(m) if m.segment().handle == rkey);
        // The usual case (a READ's Write chunk, invalidated by the server's
        // Send) is the only entry: no search, no entries to move up.
        let taken = if self.rest_slice().is_empty() {
            // INVARIANT: `rest` stays empty.
            self.first.take_if(|r| is_it(r))
        } else {
            let i = self.iter().position(is_it)?;
            self.remove(i)
        };
        match taken {
            Some(Reg::Mr(m)) => Some(m),
            // No such MR (only an MR is ever taken).
            _ => None,
        }
    }

    /// Removes and returns entry `i`, keeping the order of the others.
    #[inline]
    pub(super) fn remove(&mut self, i: usize) -> Option<Reg> {
        if i == 0 {
            let taken = self.first.take()?;
            if let Some(rest) = self.rest.as_mut().filter(|r| !r.is_empty()) {
                // INVARIANT: the next entry moves up into `first`.
                self.first = rest.remove(0).ok();
            }
            return Some(taken);
        }
        self.rest.as_mut()?.remove(i - 1).ok()
    }
}

impl IntoIterator for RegList {
    type Item = Reg;
    type IntoIter = core::iter::Chain<
        core::option::IntoIter<Reg>,
        core::iter::Flatten<core::option::IntoIter<KVec<Reg>>>,
    >;

    fn into_iter(self) -> Self::IntoIter {
        Iterator::chain(self.first.into_iter(), self.rest.into_iter().flatten())
    }
}

/// Module-wide counters of one strategy. Those every RPC moves are kept
/// per CPU (`rust/kext/percpu.rs`): an atomic would be a locked
/// instruction on a line every CPU's calls share.
pub(crate) struct StrategyCounters {
    /// Transports using it now.
    pub(crate) transports: Atomic<i64>,
    /// Ranges registered: mapped into pool MRs (`fmr`; with `cache` the
    /// head and tail parts, the cache's own registrations being counted in
    /// `client_cache`), or physical mappings made.
    pub(crate) registrations: PerCpuCounter,
    /// LOCAL_INV work requests posted per reply.
    pub(crate) invalidations: Atomic<u64>,
    /// MRs invalidated remotely by the server (Send With Invalidate).
    pub(crate) remote_invalidations: PerCpuCounter,
    /// MRs invalidated in batches (dirty watermark reached).
    pub(crate) batched_invalidations: Atomic<u64>,
    /// Calls that found the MR pool empty and were retried.
    pub(crate) pool_empty_waits: Atomic<u64>,
    /// Batches started by the timer rather than the watermark.
    pub(crate) timer_flushes: Atomic<u64>,
    /// MRs whose RPC completed and that await a batched invalidation now.
    pub(crate) dirty: Atomic<i64>,
    /// Calls that found the send queue full and were retried.
    pub(crate) send_queue_full: Atomic<u64>,
    /// Disconnects injected by sunrpc's `fail_sunrpc`.
    pub(crate) injected_disconnects: Atomic<u64>,
    /// `physical`: DMA mappings made (pages, head and tail ranges).
    pub(crate) mappings: Atomic<u64>,
    /// `physical`: segments advertised for them (DMA-contiguous mappings
    /// share one).
    pub(crate) segments: Atomic<u64>,
    /// Inline calls whose page data went out through Send SGEs of its own
    /// rather than pulled up (marshal.rs `map_send_pages`).
    pub(crate) mapped_sends: Atomic<u64>,
    /// The page bytes those calls sent mapped: what a pull-up would have
    /// copied (and counted in mountstats' `pullup_copy_count`).
    pub(crate) mapped_bytes: Atomic<u64>,
    /// Calls' Sends posted without a completion of their own: the next
    /// signaled Send's completes them (`Conn::send_batch`).
    pub(crate) unsignaled_sends: PerCpuCounter,
    /// Calls that registered the MR their request kept from its last
    /// reply, not one of the pool's (`Conn::send_fast_in_place`).
    pub(crate) kept_mr_reuses: PerCpuCounter,
}

/// Per-CPU counters each strategy takes from [`CLIENT_FIRST`].
const PER_CPU_COUNTERS: u32 = 4;
const _: () = assert!(CLIENT_FIRST + 3 * PER_CPU_COUNTERS <= TEST_SLOT);

impl StrategyCounters {
    /// The counters of the strategy of index `i`.
    const fn new(i: u32) -> Self {
        let first = CLIENT_FIRST + i * PER_CPU_COUNTERS;
        Self {
            transports: Atomic::new(0),
            registrations: PerCpuCounter::new(first),
            invalidations: Atomic::new(0),
            remote_invalidations: PerCpuCounter::new(first + 1),
            batched_invalidations: Atomic::new(0),
            pool_empty_waits: Atomic::new(0),
            timer_flushes: Atomic::new(0),
            dirty: Atomic::new(0),
            send_queue_full: Atomic::new(0),
            injected_disconnects: Atomic::new(0),
            mappings: Atomic::new(0),
            segments: Atomic::new(0),
            mapped_sends: Atomic::new(0),
            mapped_bytes: Atomic::new(0),
            unsignaled_sends: PerCpuCounter::new(first + 2),
            kept_mr_reuses: PerCpuCounter::new(first + 3),
        }
    }
}

/// By [`Strategy::index`].
static COUNTERS: [StrategyCounters; 3] = [
    StrategyCounters::new(0),
    StrategyCounters::new(1),
    StrategyCounters::new(2),
];

/// The counters of `s`.
pub(crate) fn counters(s: Strategy) -> &'static StrategyCounters {
    // `index` is 0, 1 or 2.
    &COUNTERS[s.index()]
}

/// Writes the debugfs view of every strategy.
pub(crate) fn show(f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
    writeln!(
        f,
        "strategy transports registrations invalidations remote_invalidations batched_invalidations pool_empty_waits timer_flushes dirty send_queue_full injected_disconnects mappings segments mapped_sends mapped_bytes unsignaled_sends kept_mr_reuses"
    )?;
    for s in [Strategy::Fmr, Strategy::Physical, Strategy::Cache] {
        let c = counters(s);
        writeln!(
            f,
            "{} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {}",
            s.name(),
            c.transports.load(Relaxed),
            c.registrations.value(),
            c.invalidations.load(Relaxed),
            c.remote_invalidations.value(),
            c.batched_invalidations.load(Relaxed),
            c.pool_empty_waits.load(Relaxed),
            c.timer_flushes.load(Relaxed),
            c.dirty.load(Relaxed),
            c.send_queue_full.load(Relaxed),
            c.injected_disconnects.load(Relaxed),
            c.mappings.load(Relaxed),
            c.segments.load(Relaxed),
            c.mapped_sends.load(Relaxed),
            c.mapped_bytes.load(Relaxed),
            c.unsignaled_sends.value(),
            c.kept_mr_reuses.value()
        )?;
    }
    Ok(())
}

/// The Call as the planner sees it, with a Send buffer of `send_buf_len`
/// bytes.
#[inline(always)]
pub(super) fn call_shape(c: &CallLayout, send_buf_len: u32) -> (u32, RpcShape) {
    let rpc = RpcShape {
        send: buf_shape(&c.send),
        send_ddp: c.send_ddp,
        recv: buf_shape(&c.recv),
        recv_ddp: c.recv_ddp,
        ddp_allowed: c.ddp_allowed,
        send_buf_len,
    };
    (c.xid, rpc)
}

/// The Call's lengths as the common calls' test takes them.
#[inline(always)]
pub(super) fn call_sketch(c: &CallLengths) -> CallSketch {
    let (s, r) = (&c.send, &c.recv);
    CallSketch {
        send_head_len: s.head,
        send_page_base: s.page_base,
        send_page_len: s.pages,
        send_tail_len: s.tail,
        send_ddp: s.ddp,
        recv_buflen: r.buflen,
        recv_head_len: r.head,
        recv_page_base: r.page_base,
        recv_page_len: r.pages,
        recv_tail_len: r.tail,
        recv_ddp: r.ddp,
    }
}

/// An `xdr_buf`'s layout as the planner takes it.
#[inline(always)]
pub(super) fn buf_shape(b: &XdrBufLayout) -> XdrBufShape {
    XdrBufShape {
        head_len: b.head_len,
        head_page_offset: b.head_page_offset,
        page_base: b.page_base,
        page_len: b.page_len,
        tail_len: b.tail_len,
        tail_page_offset: b.tail_page_offset,
        buflen: b.buflen,
    }
}
