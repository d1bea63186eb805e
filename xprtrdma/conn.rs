// SPDX-License-Identifier: GPL-2.0

//! One client connection: the queue pair and its receives, the pool of
//! fast-registration MRs (the "fmr" strategy: steering tags allocated when
//! the connection is made, mapped per I/O, invalidated after the reply),
//! marshaling of calls as the planner decides, and reply handling.
//!
//! Ownership: completion handlers hold an `Arc<Conn>` while their work
//! request is posted, so [`Conn::shutdown`] drains the queue pair, after
//! which no handler reposts and the last reference frees everything.

use super::backchannel::{is_call, max_payload, BC_RECVS, BC_SLOTS};
use super::reg::{add, counters, Reg, Strategy, StrategyCounters, DIRTY_FLUSH_MS};
use super::transport::{bump, Settings, Stats};
use crate::proto::cm::{negotiate, ConnectPrivate};
use crate::proto::decode::decode_reply;
use crate::proto::encode::{encode_header, BodyRef, ChunkListsRef, HeaderRef};
use crate::proto::msg::{Body, DecodeLimits, ReadSegment, Segment, RPCRDMA_VERSION};
use crate::proto::planner::{
    plan, CallStrategy, DeviceCaps, ResultStrategy, RpcShape, TransportParams, XdrBufShape,
};
use crate::rdma::cm::{CmEvent, CmHandler, CmId};
use crate::rdma::memalloc::NoIoScope;
use crate::rdma::verbs::{
    CompletionHandler, DmaBuf, DmaDir, Endpoint, EndpointConfig, Segment as SgSegment, SendOp,
    WorkCompletion, WorkRequest,
};
use crate::rdma::xprt::{
    post_local_inv, Mr, PhysMap, PinnedRqst, Rqst, XdrShape, Xprt, XDRBUF_READ, XDRBUF_WRITE,
};
use kernel::alloc::KVec;
use kernel::new_spinlock;
use kernel::prelude::*;
use kernel::sync::atomic::{Atomic, Relaxed};
use kernel::sync::{Arc, Completion, SpinLock};

/// Address and route resolution timeout (C `RDMA_RESOLVE_TIMEOUT`).
const RESOLVE_TIMEOUT_MS: u32 = 5000;
/// How long connection establishment may take.
const CONNECT_TIMEOUT_MS: u32 = 30_000;
/// MRs per request in the pool: Read or Write chunk plus Reply chunk, each
/// possibly split at head/pages/tail boundaries.
const MRS_PER_REQUEST: u32 = 4;
/// Receives kept beyond the credit limit (C keeps a batch extra).
const EXTRA_RECVS: u32 = 8;
/// `PAGE_SIZE` as the u32 the wire sizes use.
const PAGE_SIZE_U32: u32 = kernel::page::PAGE_SIZE as u32;

/// The send queue slots of a connection (its gate): every work request
/// is posted with a slot reserved for it, so the queue never overflows,
/// and work posted from completion context (LOCAL_INV chains, batched
/// invalidations) never has to find room: its slots are reserved up front,
/// when the MR is registered.
///
/// A slot of the hardware queue is free again only once a *signaled* work
/// request posted at or after it has completed. So slots are given back
/// only from the completion of a signaled request, and only for requests
/// posted before it: a request's REG_MRs and its Send by the Send's
/// completion, a LOCAL_INV chain by its last (signaled) LOCAL_INV. Each MR
/// is registered with two slots, its REG_MR's and the one its later
/// LOCAL_INV uses (or which is given back if the server invalidates it
/// remotely). Slots therefore never fall short of what the hardware queue
/// holds.
///
/// A sender that finds too few slots fails with `ENOBUFS`, which sunrpc
/// retries after a short delay (`call_transmit_status`), as it does when
/// the MR pool is empty; nothing fails with EIO.
struct SendSlots {
    free: Atomic<u32>,
}

impl SendSlots {
    fn new(depth: u32) -> Self {
        Self {
            free: Atomic::new(depth),
        }
    }

    /// Takes `n` slots if that many are free.
    fn try_take(&self, n: u32) -> bool {
        let mut cur = self.free.load(Relaxed);
        loop {
            let Some(left) = cur.checked_sub(n) else {
                return false;
            };
            match self.free.cmpxchg(cur, left, Relaxed) {
                Ok(_) => return true,
                Err(now) => cur = now,
            }
        }
    }

    /// Gives back `n` slots taken with [`Self::try_take`].
    fn give(&self, n: u32) {
        self.free.add(n, Relaxed);
    }
}

/// Send queue slots an MR is registered with: its REG_MR's, and its
/// LOCAL_INV's.
const SLOTS_PER_MR: u32 = 2;

/// Registrations of one request, kept until its reply arrives.
struct Pending {
    xid: u32,
    key: usize,
    regs: KVec<Reg>,
}

/// One connection.
#[pin_data]
pub(super) struct Conn {
    ep: Endpoint,
    xprt: Xprt,
    stats: Arc<Stats>,
    settings: Settings,
    /// Set before connecting from our own thresholds, then once from the
    /// negotiation (before any call is sent).
    #[pin]
    params: SpinLock<TransportParams>,
    limits: DecodeLimits,
    credits: Atomic<u32>,
    /// The send queue's gate.
    slots: SendSlots,
    closing: Atomic<bool>,
    /// Set by the first caller of [`Conn::drain_once`].
    drain_started: Atomic<bool>,
    /// Completed once the queue pair is drained: every registration of the
    /// connection is then unreachable by the peer.
    #[pin]
    drained: Completion,
    #[pin]
    mrs: SpinLock<KVec<Mr>>,
    #[pin]
    pending: SpinLock<KVec<Pending>>,
    /// MRs whose RPC completed but which await a batched invalidation.
    #[pin]
    dirty: SpinLock<KVec<Mr>>,
    write_pad: Option<(Mr, Arc<DmaBuf>)>,
    global_rkey: u32,
    /// Send buffers of the negotiated inline size, DMA-mapped once and
    /// reused (C `rpcrdma_sendctx`): taken by `send_wr`, given back by the
    /// Send's completion.
    #[pin]
    send_bufs: SpinLock<KVec<Arc<DmaBuf>>>,
}

fn shape(s: &XdrShape) -> XdrBufShape {
    XdrBufShape {
        head_len: s.head_len,
        head_page_offset: s.head_page_offset,
        page_base: s.page_base,
        page_len: s.page_len,
        tail_len: s.tail_len,
        tail_page_offset: s.tail_page_offset,
        buflen: s.buflen,
    }
}

fn wait_for(id: &CmId, what: &str, want: fn(&CmEvent) -> bool) -> Result<CmEvent> {
    let ev = id.wait_event(RESOLVE_TIMEOUT_MS * 2)?;
    if want(&ev) {
        return Ok(ev);
    }
    crate::pr_warn_ratelimited!("{} failed\n", what);
    Err(match ev {
        CmEvent::AddrError(_) | CmEvent::RouteError(_) | CmEvent::Unreachable(_) => EHOSTUNREACH,
        CmEvent::Rejected { .. } => ECONNREFUSED,
        _ => EIO,
    })
}

/// Receive completion: a reply (or a flush when the connection goes away).
struct RecvDone {
    conn: Arc<Conn>,
}

impl CompletionHandler for RecvDone {
    fn complete(&self, wr: &Arc<WorkRequest<Self>>, wc: &WorkCompletion) {
        // Reply handling may allocate (the reply copy, invalidation
        // tracking, a backchannel slot): never by reclaim that could wait
        // for this very reply (swap over NFS, NFS writeback).
        let _noio = NoIoScope::new();
        let conn = &self.conn;
        if !wc.is_ok() {
            if !wc.is_flush() {
                crate::pr_warn_ratelimited!("receive failed: status {}\n", wc.status);
            }
            if !conn.closing.load(Relaxed) {
                conn.xprt.force_disconnect();
            }
            return;
        }
        if let Some(buf) = wr.buf(0) {
            let len = (wc.byte_len as usize).min(buf.len());
            match KVec::from_elem(0u8, len, GFP_KERNEL) {
                Ok(mut bytes) => {
                    if buf.read(0, &mut bytes).is_ok() {
                        conn.handle_reply(&self.conn, &bytes, wc.invalidated_rkey);
                    }
                }
                Err(_) => conn.xprt.force_disconnect(),
            }
        }
        if !conn.closing.load(Relaxed) && conn.ep.post_recv(wr.clone()).is_err() {
            conn.xprt.force_disconnect();
        }
    }
}

/// Send completion: the buffer goes back to the pool; errors lose the
/// connection.
pub(super) struct SendDone {
    conn: Arc<Conn>,
    /// Send queue slots this completion frees: the Send's, and those of
    /// the REG_MRs posted before it.
    slots: u32,
}

impl CompletionHandler for SendDone {
    fn complete(&self, wr: &Arc<WorkRequest<Self>>, wc: &WorkCompletion) {
        // Flushed or not, the Send and everything before it left the queue.
        self.conn.slots.give(self.slots);
        if !wc.is_ok() && !wc.is_flush() && !self.conn.closing.load(Relaxed) {
            crate::pr_warn_ratelimited!("send failed: status {}\n", wc.status);
            self.conn.xprt.force_disconnect();
        }
        if let Some(buf) = wr.buf(0) {
            self.conn.put_send_buf(buf);
        }
    }
}

/// Completion of a batched invalidation: the MRs return to the pool.
#[pin_data]
struct BatchInvDone {
    conn: Arc<Conn>,
    /// Send queue slots its completion frees (the chain's, and for
    /// abandoned registrations their REG_MRs').
    slots: u32,
    #[pin]
    mrs: SpinLock<Option<KVec<Mr>>>,
}

impl CompletionHandler for Arc<BatchInvDone> {
    fn complete(&self, _wr: &Arc<WorkRequest<Self>>, wc: &WorkCompletion) {
        // Completion context: nothing here may wait on reclaim.
        let _noio = NoIoScope::new();
        let taken = self.mrs.lock().take();
        if let Some(mrs) = taken {
            if wc.is_ok() {
                self.conn.recycle(mrs);
            }
            self.conn.slots.give(self.slots);
        }
    }
}

/// Completion of a LOCAL_INV chain someone waits for (`release_request`).
#[pin_data]
struct SyncInvDone {
    ok: Atomic<bool>,
    #[pin]
    done: Completion,
}

impl CompletionHandler for Arc<SyncInvDone> {
    fn complete(&self, _wr: &Arc<WorkRequest<Self>>, wc: &WorkCompletion) {
        self.ok.store(wc.is_ok(), Relaxed);
        self.done.complete_all();
    }
}

/// LOCAL_INV completion: the request's registrations are gone, so its
/// reply may be handed to the RPC layer.
#[pin_data]
struct InvDone {
    conn: Arc<Conn>,
    /// Send queue slots its completion frees (the chain's).
    slots: u32,
    #[pin]
    state: SpinLock<Option<(PinnedRqst, i32, KVec<Mr>)>>,
}

impl CompletionHandler for Arc<InvDone> {
    fn complete(&self, _wr: &Arc<WorkRequest<Self>>, wc: &WorkCompletion) {
        // Completing the RPC runs sunrpc code: no reclaim from here.
        let _noio = NoIoScope::new();
        let taken = self.state.lock().take();
        if let Some((rqst, status, mrs)) = taken {
            self.conn.slots.give(self.slots);
            if wc.is_ok() {
                self.conn.recycle(mrs);
            } else {
                // The MRs' state is unknown: drop them with the connection.
                drop(mrs);
            }
            rqst.complete(status);
        }
    }
}

impl Conn {
    /// Resolves, creates the queue pair and MR pool, and connects.
    pub(super) fn connect(xprt: Xprt, settings: Settings, stats: Arc<Stats>) -> Result<Arc<Self>> {
        let addr = xprt.addr()?;
        // In the transport's network namespace, as C `rpcrdma_create_id`.
        let id = CmId::new_in(xprt.net())?;
        id.resolve_addr(addr, RESOLVE_TIMEOUT_MS as i32)?;
        wait_for(&id, "address resolution", |e| {
            matches!(e, CmEvent::AddrResolved)
        })?;
        id.resolve_route(RESOLVE_TIMEOUT_MS)?;
        wait_for(&id, "route resolution", |e| {
            matches!(e, CmEvent::RouteResolved)
        })?;

        let reqs = settings.max_requests;
        let fmr = settings.strategy == Strategy::Fmr;
        let pool = if fmr { settings.pool_size.max(reqs) } else { 0 };
        // Per request: registrations, the Send, invalidations; and at
        // least room for every MR of the pool with its REG_MR and LOCAL_INV
        // plus a Send per credit and callback reply and the write pad, so
        // that the send queue gate (`SendSlots`) only ever makes a call
        // wait for completions, never for slots that cannot exist. The
        // endpoint adds one entry for `ib_drain_sq` (C `frwr_query_device`:
        // `max_send_wr += 1`).
        let max_send_wr = reqs.saturating_mul(2 * MRS_PER_REQUEST + 2).max(
            pool.saturating_mul(SLOTS_PER_MR)
                .saturating_add(reqs)
                .saturating_add(BC_SLOTS + 1),
        );
        let ep = Endpoint::new(
            id,
            &EndpointConfig {
                max_send_wr,
                max_recv_wr: reqs + EXTRA_RECVS + BC_RECVS,
                max_send_sge: 1,
                max_recv_sge: 1,
                unsafe_global_rkey: settings.strategy == Strategy::Physical,
            },
        )?;
        let attr = *ep.device_attr();
        // Without the drain's extra entry, which is not ours to use.
        let send_depth = ep.send_depth();
        if fmr && !attr.mem_mgt_extensions {
            pr_err!("device lacks fast registration (FRWR), needed by memreg=fmr; try memreg=physical\n");
            return Err(EOPNOTSUPP);
        }
        let global_rkey = ep.global_rkey().unwrap_or(0);
        let caps = DeviceCaps {
            // "physical" maps one page per segment.
            max_fast_reg_page_list_len: match (fmr, settings.pages_per_mr) {
                (false, _) => 1,
                (true, 0) => attr.max_fast_reg_page_list_len,
                (true, n) => n.min(attr.max_fast_reg_page_list_len),
            },
            max_sge_rd: 0,
            max_send_sge: attr.max_send_sge,
            sg_gaps: false,
        };
        // Our own thresholds until the peer's private data is known; only
        // the inline sizes change with the negotiation.
        let params =
            TransportParams::from_device(settings.inline_write, settings.inline_read, &caps);

        // The MR pool: every steering tag exists before the first I/O.
        let mut mrs = KVec::with_capacity(pool as usize, GFP_KERNEL)?;
        for _ in 0..pool {
            mrs.push(Mr::new(&ep, params.max_fr_depth)?, GFP_KERNEL)?;
        }
        add(&stats.mrs_allocated, u64::from(pool));
        let dirty = KVec::with_capacity(pool as usize, GFP_KERNEL)?;

        // The write pad: a 4-byte sink for the XDR pad of unaligned Write
        // chunks, registered once for the life of the connection (its
        // REG_MR is posted once connected: a send queue takes work only
        // then).
        let write_pad = if fmr {
            let pad_buf = ep.alloc_buf(4, DmaDir::FromDevice)?;
            let mut pad_mr = Mr::new(&ep, 1)?;
            pad_mr.map_buf(&pad_buf)?;
            Some((pad_mr, pad_buf))
        } else {
            None
        };

        let recv_len = settings.inline_read as usize;
        // Filled once the negotiated inline send size is known.
        let send_bufs = KVec::with_capacity((reqs + BC_SLOTS) as usize, GFP_KERNEL)?;
        let pending = KVec::with_capacity(2 * reqs as usize, GFP_KERNEL)?;
        let conn = Arc::pin_init(
            try_pin_init!(Self {
                ep,
                xprt,
                stats,
                settings,
                params <- new_spinlock!(params, "rpcrdma_rs::xprt::params"),
                limits: DecodeLimits::client_default(),
                credits: Atomic::new(1),
                slots: SendSlots::new(send_depth),
                closing: Atomic::new(false),
                drain_started: Atomic::new(false),
                drained <- Completion::new(),
                mrs <- new_spinlock!(mrs, "rpcrdma_rs::xprt::mrs"),
                pending <- new_spinlock!(pending, "rpcrdma_rs::xprt::pending"),
                dirty <- new_spinlock!(dirty, "rpcrdma_rs::xprt::dirty"),
                write_pad,
                global_rkey,
                send_bufs <- new_spinlock!(send_bufs, "rpcrdma_rs::xprt::send_bufs"),
            }),
            GFP_KERNEL,
        )?;
        // Every Receive is posted before connecting (C
        // `rpcrdma_xprt_connect` posts before `rdma_connect`): a server that
        // Sends right after establishment must find one, since our
        // `rnr_retry_count` of 0 makes a receiver-not-ready fatal. The
        // queue pair takes Receives from its INIT state on.
        if let Err(e) = conn.post_initial_recvs(recv_len, reqs + EXTRA_RECVS + BC_RECVS) {
            conn.shutdown();
            return Err(e);
        }
        let res = conn.establish(settings, &caps, pool, reqs);
        if res.is_err() {
            // Flushes the Receives, whose handlers hold the connection.
            conn.shutdown();
        }
        res.map(|()| conn)
    }

    /// Posts `n` Receives of `len` bytes.
    fn post_initial_recvs(self: &Arc<Self>, len: usize, n: u32) -> Result {
        for _ in 0..n {
            let buf = self.ep.alloc_buf(len, DmaDir::FromDevice)?;
            let mut segs = KVec::new();
            segs.push(
                SgSegment {
                    buf,
                    offset: 0,
                    len,
                },
                GFP_KERNEL,
            )?;
            let wr = WorkRequest::new(RecvDone { conn: self.clone() }, segs)?;
            self.ep.post_recv(wr)?;
        }
        Ok(())
    }

    /// Connects the queue pair, whose Receives are posted, and finishes the
    /// setup that depends on the peer's private data.
    fn establish(&self, settings: Settings, caps: &DeviceCaps, pool: u32, reqs: u32) -> Result {
        let fmr = settings.strategy == Strategy::Fmr;
        let attr = *self.ep.device_attr();
        let mut pdata = [0u8; 8];
        // Remote invalidation only makes sense for MRs: a server that
        // tried to invalidate the global rkey would break the connection.
        ConnectPrivate::new(settings.inline_write, settings.inline_read, fmr)
            .encode(&mut pdata)
            .map_err(|_| EINVAL)?;
        let rd_atom = u8::try_from(attr.max_qp_rd_atom.min(255)).unwrap_or(u8::MAX);
        // The client never issues RDMA Reads: initiator depth 0.
        self.ep.connect(&pdata, rd_atom, 0)?;
        let ev = self.ep.wait_event(CONNECT_TIMEOUT_MS)?;
        let CmEvent::Established { private_data } = ev else {
            crate::pr_warn_ratelimited!("connection not established\n");
            return Err(match ev {
                CmEvent::Rejected { .. } => ECONNREFUSED,
                CmEvent::Unreachable(_) => EHOSTUNREACH,
                _ => ECONNABORTED,
            });
        };
        let peer = private_data.as_bytes();
        let neg = negotiate(
            settings.inline_write,
            settings.inline_read,
            (!peer.is_empty()).then_some(peer),
        );
        let params = TransportParams::from_device(neg.inline_send, neg.inline_recv, caps);
        *self.params.lock() = params;

        if let Some((pad_mr, _)) = &self.write_pad {
            // Its slot is never given back (no completion of ours follows
            // it for sure); one slot of the whole queue.
            if !self.slots.try_take(1) {
                return Err(ENOBUFS);
            }
            pad_mr.post_reg(&self.ep, true)?;
        }

        // Enough Send buffers for every credit and callback reply; more are
        // allocated (and dropped after use) only if they are all in flight.
        let send_len = params.inline_send as usize;
        for _ in 0..reqs + BC_SLOTS {
            let buf = self.ep.alloc_buf(send_len, DmaDir::ToDevice)?;
            // Capacity for all of them was reserved at allocation.
            let rejected = self.send_bufs.lock().push_within_capacity(buf).err();
            drop(rejected);
        }
        // Disconnects by the server, device removal and address changes
        // arrive as CM events: the handler turns them into a reconnect,
        // from the CM's callback (events since ESTABLISHED first).
        let events = Arc::new(ConnEvents { xprt: self.xprt }, GFP_KERNEL)?;
        self.ep.cm_id().set_handler(events);
        self.xprt.update_cwnd(1);
        self.xprt
            .set_bc_max_payload(max_payload(neg.inline_send, neg.inline_recv, PAGE_SIZE_U32));
        pr_info!(
            "connected: memreg {}, inline send {} recv {}, max_requests {}, {} MRs of {} pages, peer accepts remote invalidation {}\n",
            settings.strategy.name(),
            neg.inline_send,
            neg.inline_recv,
            reqs,
            pool,
            params.max_fr_depth,
            neg.peer_send_w_inv_ok
        );
        Ok(())
    }

    /// Disconnects and waits for every posted work request to complete;
    /// the CM event handler is removed first (so nothing touches the sunrpc
    /// transport once this returns). Removing it waits only for a handler
    /// call in progress, which never blocks.
    pub(super) fn shutdown(&self) {
        self.closing.store(true, Relaxed);
        drop(self.ep.cm_id().clear_handler());
        self.drain_once();
        // Registrations of requests still waiting are invalid now that the
        // QP is in the error state; drop them with their MRs.
        let pending = core::mem::take(&mut *self.pending.lock());
        drop(pending);
        // So do the MRs awaiting a batched invalidation.
        let dirty = core::mem::take(&mut *self.dirty.lock());
        self.counters().dirty.add(-(dirty.len() as i64), Relaxed);
        drop(dirty);
    }

    /// Disconnects as a network failure would (C
    /// `xprt_rdma_inject_disconnect`): the CM then reports DISCONNECTED,
    /// whose handler forces the transport closed, and the next call
    /// reconnects. Outstanding work requests are flushed on the way, so
    /// this exercises the same recovery as a lost link.
    pub(super) fn inject_disconnect(&self) {
        if self.closing.load(Relaxed) {
            return;
        }
        add(&self.counters().injected_disconnects, 1);
        if let Err(e) = self.ep.cm_id().disconnect() {
            crate::pr_warn_ratelimited!("injected disconnect failed ({:?}); closing\n", e);
            self.xprt.force_disconnect();
        }
    }

    /// The delayed batch of an idle connection (`fmr_dirty_watermark`):
    /// invalidates whatever is still dirty.
    pub(super) fn flush_timer(&self, this: &Arc<Self>) {
        if self.closing.load(Relaxed) {
            return;
        }
        if !self.dirty.lock().is_empty() {
            add(&self.counters().timer_flushes, 1);
            self.flush_dirty(this);
        }
    }

    fn get_mr(&self) -> Result<Mr> {
        match self.mrs.lock().pop() {
            Some(mr) => Ok(mr),
            None => {
                add(&self.counters().pool_empty_waits, 1);
                if self.stats.mr_pool_empty.fetch_add(1, Relaxed) == 0 {
                    pr_warn!("MR pool empty: calls wait for registrations to be released\n");
                }
                Err(ENOBUFS)
            }
        }
    }

    fn recycle(&self, mrs: KVec<Mr>) {
        for mr in mrs {
            self.recycle_one(mr);
        }
    }

    /// Registers `[offset, offset + len)` of the request's send or receive
    /// buffer with as many MRs as needed, posting each REG_MR.
    #[expect(clippy::too_many_arguments)]
    fn register(
        &self,
        rqst: &Rqst<'_>,
        rcv: bool,
        offset: u32,
        len: u32,
        writable: bool,
        regs: &mut KVec<Reg>,
        segs: &mut KVec<Segment>,
    ) -> Result {
        add(&self.counters().registrations, 1);
        if self.settings.strategy == Strategy::Physical {
            let max = self.params().max_rdma_segs;
            let pm = PhysMap::map_rqst(&self.ep, rqst, rcv, offset, len, writable, max)?;
            for i in 0..pm.count() {
                let (addr, l) = pm.piece(i);
                segs.push(Segment::new(self.global_rkey, l, addr), GFP_KERNEL)?;
            }
            regs.push(Reg::Phys(pm), GFP_KERNEL)?;
            return Ok(());
        }
        let end = offset.checked_add(len).ok_or(EINVAL)?;
        let mut at = offset;
        while at < end {
            let mut mr = self.get_mr()?;
            let res = mr.map_rqst(rqst, rcv, at, end - at, writable);
            let n = match res {
                Ok(n) if n > 0 => n,
                _ => {
                    self.recycle_one(mr);
                    return Err(EIO);
                }
            };
            // The REG_MR's slot and the one of its LOCAL_INV, reserved
            // now so that the invalidation never waits for room.
            if !self.slots.try_take(SLOTS_PER_MR) {
                add(&self.counters().send_queue_full, 1);
                self.recycle_one(mr);
                return Err(ENOBUFS);
            }
            if let Err(e) = mr.post_reg(&self.ep, writable) {
                self.slots.give(SLOTS_PER_MR);
                self.recycle_one(mr);
                return Err(e);
            }
            let s = mr.segment();
            segs.push(Segment::new(s.handle, s.length, s.offset), GFP_KERNEL)?;
            regs.push(Reg::Mr(mr), GFP_KERNEL)?;
            at += n;
        }
        Ok(())
    }

    fn recycle_one(&self, mut mr: Mr) {
        mr.unmap();
        // Capacity was reserved for every MR at connect time. Should the
        // pool still be full, the MR is dropped (`ib_dereg_mr`, which may
        // sleep) only after the statement, once the guard is released.
        let rejected = self.mrs.lock().push_within_capacity(mr).err();
        drop(rejected);
    }

    /// Invalidates registrations that were posted but will not be used
    /// (a failed send): one LOCAL_INV chain; the MRs return to the pool,
    /// and their slots (REG_MR and LOCAL_INV) to the send queue, when it
    /// completes.
    fn abandon(&self, this: &Arc<Self>, regs: KVec<Reg>) {
        let (mrs, lost) = mrs_of(regs);
        if lost {
            // An MR was dropped (deregistered) for lack of memory; its
            // slots are lost with it, so start afresh.
            self.xprt.force_disconnect();
        }
        if mrs.is_empty() {
            return;
        }
        let n = mrs.len() as u32;
        let tracked = rkeys(&mrs).and_then(|keys| {
            let done = Arc::pin_init(
                pin_init!(BatchInvDone {
                    conn: this.clone(),
                    slots: n * SLOTS_PER_MR,
                    mrs <- new_spinlock!(None, "rpcrdma_rs::xprt::abandon"),
                }),
                GFP_KERNEL,
            )?;
            Ok((keys, done))
        });
        let Ok((keys, done)) = tracked else {
            // Cannot invalidate: deregister, and revoke the rest.
            drop(mrs);
            self.xprt.force_disconnect();
            return;
        };
        *done.mrs.lock() = Some(mrs);
        if self.post_inv_chain(&keys, done.clone()).is_err() {
            // The QP is gone: deregister the MRs now.
            // Taken first: deregistering may sleep, not under the lock.
            let taken = done.mrs.lock().take();
            drop(taken);
            self.xprt.force_disconnect();
        }
    }

    fn counters(&self) -> &'static StrategyCounters {
        counters(self.settings.strategy)
    }

    /// Invalidates every dirty MR in one chain; they return to the pool
    /// when the last LOCAL_INV completes.
    fn flush_dirty(&self, this: &Arc<Self>) {
        // The list keeps room for the whole pool (so a dirty MR never has
        // to be dropped): the batch is swapped out for an empty list of
        // the same capacity, allocated outside the lock.
        let cap = self.dirty.lock().capacity();
        let Ok(mut mrs) = KVec::with_capacity(cap, GFP_KERNEL) else {
            // Revoking every registration is the only safe fallback.
            self.xprt.force_disconnect();
            return;
        };
        core::mem::swap(&mut *self.dirty.lock(), &mut mrs);
        if mrs.is_empty() {
            return;
        }
        self.counters().dirty.add(-(mrs.len() as i64), Relaxed);
        add(&self.counters().batched_invalidations, mrs.len() as u64);
        let Ok(keys) = rkeys(&mrs) else {
            self.xprt.force_disconnect();
            return;
        };
        // Each dirty MR kept its LOCAL_INV slot.
        let slots = keys.len() as u32;
        let done = Arc::pin_init(
            pin_init!(BatchInvDone {
                conn: this.clone(),
                slots,
                mrs <- new_spinlock!(Some(mrs), "rpcrdma_rs::xprt::batch"),
            }),
            GFP_KERNEL,
        );
        // The QP is gone or the batch cannot be tracked: revoke all.
        if done.and_then(|d| self.post_inv_chain(&keys, d)).is_err() {
            self.xprt.force_disconnect();
        }
    }

    /// Posts LOCAL_INV for every key, unsignaled except the last, whose
    /// completion runs `done`'s handler.
    fn post_inv_chain<H: CompletionHandler>(&self, keys: &[u32], done: H) -> Result {
        let (last, rest) = keys.split_last().ok_or(EINVAL)?;
        for key in rest {
            post_local_inv::<SendDone>(&self.ep, *key, None)?;
        }
        post_local_inv(&self.ep, *last, Some(WorkRequest::new(done, KVec::new())?))
    }

    /// Marshals one call as the planner decides and posts it.
    pub(super) fn send(&self, this: &Arc<Self>, rqst: &Rqst<'_>) -> Result {
        let params = self.params();
        let info = rqst.info();
        let snd = shape(&info.snd);
        let rcv = shape(&info.rcv);
        let rpc = RpcShape {
            send: snd,
            send_ddp: info.snd.flags & XDRBUF_WRITE != 0,
            recv: rcv,
            recv_ddp: info.rcv.flags & XDRBUF_READ != 0,
            ddp_allowed: true,
            // Every call is pulled up into one Send buffer.
            send_buf_len: params.inline_send,
        };
        let p = plan(&rpc, &params).map_err(|e| {
            bump(&self.stats.failed_marshal_count);
            crate::pr_warn_ratelimited!("cannot marshal call xid {:#x}: {:?}\n", info.xid, e);
            EIO
        })?;

        // The Send's slot; the MRs take theirs as they are registered.
        if !self.slots.try_take(1) {
            add(&self.counters().send_queue_full, 1);
            // Dirty MRs hold slots for their LOCAL_INV: run the batch.
            self.flush_dirty(this);
            return Err(ENOBUFS);
        }
        let mut mrs = KVec::<Reg>::new();
        let mut reads = KVec::<ReadSegment>::new();
        let mut writes = KVec::<Segment>::new();
        let mut reply = KVec::<Segment>::new();
        let res = self.register_chunks(
            rqst,
            &p.call,
            &p.result,
            &snd,
            &rcv,
            &mut mrs,
            &mut reads,
            &mut writes,
            &mut reply,
        );
        if let Err(e) = res {
            self.slots.give(1);
            self.abandon(this, mrs);
            if e == ENOBUFS {
                // Dirty MRs come back only through a batch: run it now.
                self.flush_dirty(this);
            } else {
                bump(&self.stats.failed_marshal_count);
                crate::pr_warn_ratelimited!(
                    "cannot register chunks of xid {:#x}: {:?}\n",
                    info.xid,
                    e
                );
            }
            return Err(e);
        }

        let write_list: [&[Segment]; 1] = [&writes];
        let chunks = ChunkListsRef {
            read: &reads,
            write: if writes.is_empty() { &[] } else { &write_list },
            reply: if reply.is_empty() { None } else { Some(&reply) },
        };
        let long_call = matches!(p.call, CallStrategy::LongCall { .. });
        let hdr = HeaderRef {
            xid: info.xid,
            vers: RPCRDMA_VERSION,
            credits: self.settings.max_requests,
            body: if long_call {
                BodyRef::NoMsg(chunks)
            } else {
                BodyRef::Msg(chunks)
            },
        };

        let send_len = params.inline_send as usize;
        let out = match self.build_send(rqst, &hdr, &p.call, &snd, send_len) {
            Ok(v) => v,
            Err(e) => {
                self.slots.give(1);
                self.abandon(this, mrs);
                bump(&self.stats.failed_marshal_count);
                return Err(e);
            }
        };
        let reg_slots = mr_count(&mrs);
        let res = (|| -> Result {
            let wr = self.send_wr(this, &out, 1 + reg_slots)?;
            if !mrs.is_empty() {
                let pending = Pending {
                    xid: info.xid,
                    key: rqst.key(),
                    regs: core::mem::take(&mut mrs),
                };
                if let Err(p) = self.pending.lock().push_within_capacity(pending) {
                    mrs = p.0.regs;
                    return Err(ENOBUFS);
                }
            }
            rqst.mark_sent();
            self.ep.post_send(wr, SendOp::Send)
        })();
        if let Err(e) = res {
            // The Send was not posted; the REG_MRs' slots go back with the
            // abandoned MRs' invalidation.
            self.slots.give(1);
            if let Some(p) = self.take_pending(info.xid) {
                mrs = p.regs;
            }
            self.abandon(this, mrs);
            return Err(if e == ENOBUFS { e } else { ENOTCONN });
        }
        match p.call {
            CallStrategy::ReadChunk { .. } => bump(&self.stats.read_chunk_count),
            CallStrategy::LongCall { .. } => {
                bump(&self.stats.read_chunk_count);
                bump(&self.stats.nomsg_call_count);
            }
            _ => bump(&self.stats.pullup_copy_count),
        }
        match p.result {
            ResultStrategy::WriteChunk { .. } => bump(&self.stats.write_chunk_count),
            ResultStrategy::ReplyChunk { .. } => bump(&self.stats.reply_chunk_count),
            ResultStrategy::Inline => {}
        }
        Ok(())
    }

    /// A Send work request carrying a copy of `bytes` (at most the inline
    /// send size), in a pooled buffer.
    /// Its completion gives back `slots` send queue slots, which the caller
    /// reserved.
    pub(super) fn send_wr(
        &self,
        this: &Arc<Self>,
        bytes: &[u8],
        slots: u32,
    ) -> Result<Arc<WorkRequest<SendDone>>> {
        let pooled = self.send_bufs.lock().pop();
        let buf = match pooled {
            Some(b) if b.len() >= bytes.len() => b,
            _ => {
                bump(&self.stats.empty_send_pool);
                self.ep.alloc_buf(
                    bytes.len().max(self.inline_send() as usize),
                    DmaDir::ToDevice,
                )?
            }
        };
        buf.write(0, bytes)?;
        let mut segs = KVec::new();
        segs.push(
            SgSegment {
                buf,
                offset: 0,
                len: bytes.len(),
            },
            GFP_KERNEL,
        )?;
        WorkRequest::new(
            SendDone {
                conn: this.clone(),
                slots,
            },
            segs,
        )
    }

    /// Reserves the send queue slot of a Send that carries no
    /// registration (a backchannel reply); `ENOBUFS` when the queue is full.
    pub(super) fn reserve_send_slot(&self) -> Result {
        if self.slots.try_take(1) {
            Ok(())
        } else {
            add(&self.counters().send_queue_full, 1);
            Err(ENOBUFS)
        }
    }

    /// Gives back a slot of [`Self::reserve_send_slot`] whose Send was not
    /// posted.
    pub(super) fn unreserve_send_slot(&self) {
        self.slots.give(1);
    }

    /// Gives a Send buffer back (from its completion; never allocates).
    fn put_send_buf(&self, buf: &Arc<DmaBuf>) {
        if buf.len() == self.inline_send() as usize {
            // A full pool drops the extra buffer.
            let _ = self.send_bufs.lock().push_within_capacity(buf.clone());
        }
    }

    /// The sunrpc transport this connection serves.
    pub(super) fn xprt(&self) -> &Xprt {
        &self.xprt
    }

    /// The queue pair's endpoint.
    pub(super) fn ep(&self) -> &Endpoint {
        &self.ep
    }

    /// The negotiated inline send size.
    pub(super) fn inline_send(&self) -> u32 {
        self.params().inline_send
    }

    /// The connection's parameters (negotiated once connected).
    fn params(&self) -> TransportParams {
        *self.params.lock()
    }

    #[expect(clippy::too_many_arguments)]
    fn register_chunks(
        &self,
        rqst: &Rqst<'_>,
        call: &CallStrategy,
        result: &ResultStrategy,
        snd: &XdrBufShape,
        rcv: &XdrBufShape,
        mrs: &mut KVec<Reg>,
        reads: &mut KVec<ReadSegment>,
        writes: &mut KVec<Segment>,
        reply: &mut KVec<Segment>,
    ) -> Result {
        let mut segs = KVec::new();
        let position = match call {
            CallStrategy::ReadChunk { position, .. } => {
                self.register(
                    rqst,
                    false,
                    snd.head_len,
                    snd.page_len,
                    false,
                    mrs,
                    &mut segs,
                )?;
                Some(*position)
            }
            CallStrategy::LongCall { .. } => {
                let len = snd.len().ok_or(EINVAL)?;
                self.register(rqst, false, 0, len, false, mrs, &mut segs)?;
                Some(0)
            }
            _ => None,
        };
        if let Some(position) = position {
            for s in segs.iter() {
                reads.push(
                    ReadSegment {
                        position,
                        segment: *s,
                    },
                    GFP_KERNEL,
                )?;
                add(&self.stats.total_rdma_request, u64::from(s.length));
            }
        }
        match result {
            ResultStrategy::Inline => {}
            ResultStrategy::WriteChunk { write_pad, .. } => {
                self.register(rqst, true, rcv.head_len, rcv.page_len, true, mrs, writes)?;
                if *write_pad {
                    if let Some((mr, _)) = &self.write_pad {
                        let s = mr.segment();
                        writes.push(Segment::new(s.handle, s.length, s.offset), GFP_KERNEL)?;
                    }
                }
            }
            ResultStrategy::ReplyChunk { .. } => {
                // The whole receive buffer as head, pages and tail describe
                // it (C rpcrdma_convert_iovs), not its allocation size.
                let len = rcv.len().ok_or(EINVAL)?;
                self.register(rqst, true, 0, len, true, mrs, reply)?;
            }
        }
        Ok(())
    }

    /// The Send: transport header, then the inline part of the call.
    fn build_send(
        &self,
        rqst: &Rqst<'_>,
        hdr: &HeaderRef<'_>,
        call: &CallStrategy,
        snd: &XdrBufShape,
        max: usize,
    ) -> Result<KVec<u8>> {
        let mut out = KVec::from_elem(0u8, max, GFP_KERNEL)?;
        let hlen = encode_header(hdr, &mut out).map_err(|_| EMSGSIZE)?;
        let mut at = hlen;
        let mut copy = |from: u32, len: u32, at: &mut usize| -> Result {
            let end = at.checked_add(len as usize).ok_or(EMSGSIZE)?;
            let dst = out.get_mut(*at..end).ok_or(EMSGSIZE)?;
            rqst.read(from, dst)?;
            *at = end;
            Ok(())
        };
        match call {
            CallStrategy::InlinePullup | CallStrategy::InlineMapped => {
                copy(0, snd.len().ok_or(EINVAL)?, &mut at)?;
            }
            CallStrategy::ReadChunk { .. } => {
                copy(0, snd.head_len, &mut at)?;
                // A tail that is only the XDR pad of the pages is not sent;
                // otherwise skip that pad so the rest lands XDR-aligned.
                if snd.tail_len > 3 {
                    let skip = snd.tail_len & 3;
                    let from = snd.head_len + snd.page_len + skip;
                    copy(from, snd.tail_len - skip, &mut at)?;
                }
            }
            CallStrategy::LongCall { .. } => {}
        }
        out.truncate(at);
        Ok(out)
    }

    fn take_pending(&self, xid: u32) -> Option<Pending> {
        let mut pending = self.pending.lock();
        let pos = pending.iter().position(|p| p.xid == xid)?;
        pending.remove(pos).ok()
    }

    /// The request's reply will never be processed (signal, timeout): make
    /// sure the server can no longer reach its buffers before they are
    /// freed. Its MRs are invalidated and this waits for that (C
    /// `frwr_unmap_sync`); only if that cannot be done is the connection
    /// closed, which revokes every registration at once.
    pub(super) fn release_request(&self, key: usize) {
        let found = {
            let mut pending = self.pending.lock();
            pending
                .iter()
                .position(|p| p.key == key)
                .and_then(|pos| pending.remove(pos).ok())
        };
        let Some(p) = found else {
            return;
        };
        if self.closing.load(Relaxed) {
            // The connection is being closed (or revoked): its drain
            // revokes every registration at once. Wait for it before the
            // buffers go back (C `rpcrdma_xprt_disconnect` drains before
            // anything is freed).
            self.drain_once();
            drop(p);
            return;
        }
        let (mrs, lost) = mrs_of(p.regs);
        if lost {
            self.revoke_all();
            return;
        }
        if mrs.is_empty() {
            return;
        }
        add(&self.stats.local_inv_needed, mrs.len() as u64);
        add(&self.counters().invalidations, mrs.len() as u64);
        let done = rkeys(&mrs).and_then(|keys| {
            let done = Arc::pin_init(
                pin_init!(SyncInvDone {
                    ok: Atomic::new(false),
                    done <- Completion::new(),
                }),
                GFP_KERNEL,
            )?;
            self.post_inv_chain(&keys, done.clone())?;
            Ok(done)
        });
        if let Ok(done) = done {
            // Completes even when the queue pair is flushed.
            done.done.wait_for_completion();
            // The chain left the queue: its slots, reserved at
            // registration, are free again.
            self.slots.give(mrs.len() as u32);
            if done.ok.load(Relaxed) {
                self.recycle(mrs);
                return;
            }
        }
        drop(mrs);
        self.revoke_all();
    }

    /// Revokes every registration at once, synchronously, for when one
    /// cannot be invalidated: the queue pair is moved to the error state
    /// and drained, and sunrpc reconnects.
    fn revoke_all(&self) {
        self.closing.store(true, Relaxed);
        self.drain_once();
        self.xprt.force_disconnect();
    }

    /// Disconnects and drains the queue pair, or waits for the caller that
    /// does: when this returns no registration of the connection can be
    /// used by the peer any more (the QP is in the error state and every
    /// posted work request has completed). Process context only.
    fn drain_once(&self) {
        if self.drain_started.xchg(true, Relaxed) {
            self.drained.wait_for_completion();
            return;
        }
        self.ep.drain();
        self.drained.complete_all();
    }

    fn handle_reply(&self, this: &Arc<Self>, bytes: &[u8], inv_rkey: Option<u32>) {
        self.xprt.data_seen();
        let hdr = match decode_reply(bytes, &self.limits) {
            Ok(h) => h,
            Err(e) => {
                bump(&self.stats.bad_reply_count);
                crate::pr_warn_ratelimited!("malformed reply ({:?}), {} bytes\n", e, bytes.len());
                // Fail the RPC if its xid can be read, so it is not left waiting.
                if let Some(x) = bytes.get(..4) {
                    let xid = u32::from_be_bytes([x[0], x[1], x[2], x[3]]);
                    if let Some(rqst) = self.xprt.lookup(xid) {
                        self.finish(this, rqst, xid, EIO.to_errno(), inv_rkey);
                    }
                }
                return;
            }
        };
        // A reverse-direction (backchannel) Call: never matched against
        // our own xids, and its credit field is the server's backchannel
        // window, not a grant for our Calls.
        if let Body::Msg { payload, .. } = hdr.body {
            if is_call(payload) {
                self.bc_call(payload);
                return;
            }
        }
        let credits = hdr.credits.clamp(1, self.settings.max_requests);
        if self.credits.xchg(credits, Relaxed) != credits {
            self.xprt.update_cwnd(credits);
        }
        let Some(rqst) = self.xprt.lookup(hdr.xid) else {
            return;
        };
        let status = match hdr.body {
            Body::Msg { chunks, payload } => {
                let written = chunks
                    .write
                    .iter()
                    .map(|c| c.total_length())
                    .fold(0u32, |a, b| a.saturating_add(b));
                add(&self.stats.total_rdma_reply, u64::from(written));
                if written > 0 {
                    bump(&self.stats.fixup_copy_count);
                }
                match rqst.fill_reply(payload, written) {
                    Ok(n) => i32::try_from(n).unwrap_or(EIO.to_errno()),
                    Err(_) => {
                        bump(&self.stats.bad_reply_count);
                        EIO.to_errno()
                    }
                }
            }
            Body::NoMsg { chunks, .. } => match chunks.reply {
                Some(r) => {
                    add(&self.stats.total_rdma_reply, u64::from(r.total_length()));
                    i32::try_from(rqst.reply_chunk_len(r.total_length())).unwrap_or(EIO.to_errno())
                }
                None => {
                    bump(&self.stats.bad_reply_count);
                    EIO.to_errno()
                }
            },
            Body::Error(e) => {
                bump(&self.stats.bad_reply_count);
                crate::pr_warn_ratelimited!(
                    "server answered xid {:#x} with RDMA_ERROR {:?}\n",
                    hdr.xid,
                    e
                );
                EIO.to_errno()
            }
            _ => {
                bump(&self.stats.bad_reply_count);
                EIO.to_errno()
            }
        };
        self.finish(this, rqst, hdr.xid, status, inv_rkey);
    }

    /// Invalidates what the request registered, then completes it.
    fn finish(
        &self,
        this: &Arc<Self>,
        rqst: PinnedRqst,
        xid: u32,
        status: i32,
        inv_rkey: Option<u32>,
    ) {
        let Some(p) = self.take_pending(xid) else {
            rqst.complete(status);
            return;
        };
        // Physical mappings are simply unmapped; MRs need invalidation.
        let (mut mrs, lost) = mrs_of(p.regs);
        if lost {
            // An MR was freed without invalidation: revoke all.
            self.xprt.force_disconnect();
        }
        // An MR the server invalidated remotely needs no LOCAL_INV.
        // We always offer Send With Invalidate (RFC 8797 flag).
        if let Some(rkey) = inv_rkey {
            if let Some(pos) = mrs.iter().position(|m| m.segment().handle == rkey) {
                if let Ok(mr) = mrs.remove(pos) {
                    bump(&self.stats.remote_inv);
                    add(&self.counters().remote_invalidations, 1);
                    self.recycle_one(mr);
                    // The slot reserved for its LOCAL_INV is not needed.
                    self.slots.give(1);
                }
            }
        }
        let n = mrs.len();
        if n == 0 {
            rqst.complete(status);
            return;
        }
        if self.settings.dirty_watermark > 0 {
            // Batched invalidation: complete now, invalidate later.
            let mut full = false;
            for mr in mrs {
                // An MR that does not fit (capacity is reserved for the
                // whole pool, so never) is dropped, i.e. deregistered, which
                // may sleep: only after the guard is released.
                let rejected = {
                    let mut dirty = self.dirty.lock();
                    let r = dirty.push_within_capacity(mr).err();
                    full = dirty.len() >= self.settings.dirty_watermark as usize;
                    r
                };
                if rejected.is_none() {
                    self.counters().dirty.add(1, Relaxed);
                }
                drop(rejected);
            }
            rqst.complete(status);
            if full {
                self.flush_dirty(this);
            } else {
                // An idle connection must not keep them valid for long:
                // the batch runs within DIRTY_FLUSH_MS whatever happens
                // (an earlier deadline already scheduled stands).
                self.xprt.schedule_flush(DIRTY_FLUSH_MS);
            }
            return;
        }
        add(&self.stats.local_inv_needed, n as u64);
        add(&self.counters().invalidations, n as u64);
        let Ok(keys) = rkeys(&mrs) else {
            // Cannot track the invalidation: deregister the MRs first, then
            // revoke everything (dropping `rqst` fails the RPC).
            drop(mrs);
            self.xprt.force_disconnect();
            drop(rqst);
            return;
        };
        // Allocated empty and filled afterwards: should the allocation
        // fail, the MRs must be deregistered before the RPC completes,
        // which a failed initializer dropping both would not guarantee.
        let done = Arc::pin_init(
            pin_init!(InvDone {
                conn: this.clone(),
                slots: n as u32,
                state <- new_spinlock!(None, "rpcrdma_rs::xprt::inv"),
            }),
            GFP_KERNEL,
        );
        let Ok(done) = done else {
            // Cannot track the invalidation: revoke everything instead.
            drop(mrs);
            self.xprt.force_disconnect();
            drop(rqst);
            return;
        };
        *done.state.lock() = Some((rqst, status, mrs));
        if self.post_inv_chain(&keys, done.clone()).is_err() {
            // The QP is gone or its queue refused the chain: deregister the
            // MRs (which revokes their steering tags) before the RPC
            // completes and its buffers can go back.
            let taken = done.state.lock().take();
            if let Some((rqst, status, mrs)) = taken {
                drop(mrs);
                rqst.complete(status);
            }
            self.xprt.force_disconnect();
        }
    }
}

/// The CM event handler of a connection. It holds the sunrpc transport
/// (not the connection: a handler must never drop the last reference to the
/// identifier it serves) and is removed by [`Conn::shutdown`] before the
/// transport can go away.
struct ConnEvents {
    xprt: Xprt,
}

impl CmHandler for ConnEvents {
    fn handle(&self, ev: CmEvent) -> core::result::Result<(), CmEvent> {
        let why = match ev {
            CmEvent::Disconnected => "the server disconnected",
            CmEvent::DeviceRemoval => "the RDMA device is being removed",
            CmEvent::AddrChange => "the local address changed",
            _ => return Ok(()),
        };
        crate::pr_warn_ratelimited!("{}: closing the connection; it reconnects on demand\n", why);
        // C `rpcrdma_cm_event_handler`: `xprt_force_disconnect`, which only
        // takes a spinlock and queues the transport's close.
        self.xprt.force_disconnect();
        Ok(())
    }
}

/// The MRs among `regs` (physical mappings are unmapped as they drop
/// here), and whether any MR had to be dropped because there was no
/// memory to keep it.
fn mrs_of(regs: KVec<Reg>) -> (KVec<Mr>, bool) {
    let mut mrs = KVec::new();
    let mut lost = false;
    for reg in regs {
        if let Reg::Mr(mr) = reg {
            lost |= mrs.push(mr, GFP_KERNEL).is_err();
        }
    }
    (mrs, lost)
}

/// Send queue slots the MRs among `regs` hold for their REG_MRs.
fn mr_count(regs: &KVec<Reg>) -> u32 {
    let n = regs.iter().filter(|r| matches!(r, Reg::Mr(_))).count();
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The steering tags of `mrs`.
fn rkeys(mrs: &KVec<Mr>) -> Result<KVec<u32>> {
    let mut keys = KVec::with_capacity(mrs.len(), GFP_KERNEL)?;
    for mr in mrs.iter() {
        keys.push(mr.segment().handle, GFP_KERNEL)?;
    }
    Ok(keys)
}
