// SPDX-License-Identifier: GPL-2.0

//! Making and breaking a client connection (C `verbs.c`:
//! `rpcrdma_xprt_connect`, `rpcrdma_ep_create`, `rpcrdma_xprt_disconnect`,
//! `rpcrdma_cm_event_handler`): address and route resolution, the queue
//! pair and its Receives, the MR pool and write pad, the negotiation of
//! inline sizes, and the drain that revokes every registration.

use super::backchannel::{max_payload, BC_RECVS, BC_SLOTS};
use super::conn::{Conn, Negotiated};
use super::reg::Strategy;
use super::reply::RECV_REPOST_BATCH;
use super::send_buf::{SendSlots, SLOTS_PER_MR};
use super::stats::add;
use super::stats::Stats;
use super::transport::Settings;
use crate::config::{fmr_dirty_watermark, fmr_pool};
use crate::proto::cm::{negotiate, ConnectPrivate};
use crate::proto::credits::{send_batch, ClientCredits, MIN_SLOT_TABLE};
use crate::proto::msg::DecodeLimits;
use crate::proto::planner::{DeviceCaps, TransportParams, MAX_HDR_SEGS, PHYSICAL_MAX_SEGS};
use crate::rust::kext::spin_lock::new_spinlock;
use crate::rust::module::trace;
use crate::rust::rdma::cm::{CmEvent, CmHandler, CmId};
use crate::rust::rdma::recv_ring::RecvRing;
use crate::rust::rdma::send_ring::SendRing;
use crate::rust::rdma::verbs::{ConnParam, DmaDir, Endpoint, EndpointConfig, Pd, MAX_SGE};
use crate::rust::sunrpc::xprt::{Mr, Xprt};
use kernel::alloc::KVec;
use kernel::prelude::*;
use kernel::sync::atomic::{Atomic, Relaxed};
use kernel::sync::{Arc, Completion, SetOnce};

/// Address and route resolution timeout (C `RDMA_RESOLVE_TIMEOUT`).
const RESOLVE_TIMEOUT_MS: u32 = 5000;
/// How long connection establishment may take.
const CONNECT_TIMEOUT_MS: u32 = 30_000;
/// MRs per request in the pool: Read or Write chunk plus Reply chunk, each
/// possibly split at head/pages/tail boundaries.
const MRS_PER_REQUEST: u32 = 4;
/// Receives kept beyond the credit limit (C keeps a batch extra): they
/// cover those held back for a batched repost.
const EXTRA_RECVS: u32 = RECV_REPOST_BATCH;
/// `PAGE_SIZE` as the u32 the wire sizes use.
const PAGE_SIZE_U32: u32 = kernel::page::PAGE_SIZE as u32;
/// Each new connection takes the next completion vector of its device.
static NEXT_COMP_VECTOR: Atomic<u32> = Atomic::new(0);

fn wait_for(id: &CmId, what: &str, want: fn(&CmEvent) -> bool) -> Result<CmEvent> {
    let ev = id.wait_event(RESOLVE_TIMEOUT_MS * 2)?;
    if want(&ev) {
        return Ok(ev);
    }
    crate::pr_warn_ratelimited!("{} failed\n", what);
    Err(match ev {
        CmEvent::AddrError(_) | CmEvent::RouteError(_) | CmEvent::Unreachable(_) => EHOSTUNREACH,
        CmEvent::Rejected { .. } => ECONNREFUSED,
        // Another event, such as the device's removal once the address
        // resolved to it: an errno sunrpc retries, as for a connection
        // that is not established, where any other would fail the RPC
        // (EIO to a hard mount's application).
        _ => ECONNABORTED,
    })
}

impl Conn {
    /// Resolves, creates the queue pair and MR pool, and connects.
    pub(super) fn connect(
        xprt: Xprt,
        mut settings: Settings,
        stats: Arc<Stats>,
    ) -> Result<Arc<Self>> {
        let addr = xprt.addr()?;
        // In the transport's network namespace, as C `rpcrdma_create_id`.
        let id = CmId::new_in(xprt.net())?;
        id.resolve_addr(addr, RESOLVE_TIMEOUT_MS)?;
        wait_for(&id, "address resolution", |e| {
            matches!(e, CmEvent::AddrResolved)
        })?;
        id.resolve_route(RESOLVE_TIMEOUT_MS)?;
        wait_for(&id, "route resolution", |e| {
            matches!(e, CmEvent::RouteResolved)
        })?;

        // The protection domain first: its device's limits lower the
        // credits (not the slot table) when the queues cannot hold them.
        let pd = Pd::new(&id, settings.strategy == Strategy::Physical)?;
        let dev = pd.device_attr();
        let Some(reqs) = ClientCredits::fit_to_device(
            settings.max_requests,
            EXTRA_RECVS + BC_RECVS,
            dev.max_qp_wr,
            dev.max_cqe,
        ) else {
            crate::pr_warn_ratelimited!("device queues too small for {} credits\n", MIN_SLOT_TABLE);
            return Err(EINVAL);
        };
        // Asked for in every call and the cap of every grant.
        settings.max_requests = reqs;
        let fmr = settings.strategy.uses_mr_pool();
        let pool = if fmr {
            fmr_pool(settings.pool_size, reqs)
        } else {
            0
        };
        // Within half of this connection's pool, which a slot table made
        // smaller since the module was loaded may have shrunk.
        settings.dirty_watermark = fmr_dirty_watermark(settings.dirty_watermark, pool);
        // Per request: registrations, the Send, invalidations; and at
        // least room for every MR of the pool with its REG_MR and LOCAL_INV
        // plus a Send per credit and callback reply and the write pad, so
        // that the send queue gate (`SendSlots`) only ever makes a call
        // wait for completions, never for slots that cannot exist. The
        // endpoint adds one entry for `ib_drain_sq` (C `frwr_query_device`:
        // `max_send_wr += 1`).
        // `memreg=cache` adds a chunk's worth of REG_MRs for misses and a
        // LOCAL_INV chain of evictions.
        let cache_wrs = if settings.strategy == Strategy::Cache {
            2 * PHYSICAL_MAX_SEGS
        } else {
            0
        };
        // Unsignaled Sends keep their slots until the next signaled one
        // completes, maybe after their calls ended: room for that many
        // more calls.
        let batch = send_batch(reqs);
        let max_send_wr = reqs
            .saturating_add(batch.saturating_sub(1))
            .saturating_mul(2 * MRS_PER_REQUEST + 2)
            .saturating_add(cache_wrs)
            .max(
                pool.saturating_mul(SLOTS_PER_MR)
                    .saturating_add(reqs)
                    .saturating_add(BC_SLOTS + 1),
            );
        let ep = Endpoint::with_pd(
            id,
            &EndpointConfig {
                max_send_wr,
                max_recv_wr: reqs + EXTRA_RECVS + BC_RECVS,
                // Header and head, the page data of an inline call
                // (marshal.rs `map_send_pages`) and its tail.
                max_send_sge: MAX_SGE as u32,
                max_recv_sge: 1,
                unsafe_global_rkey: settings.strategy == Strategy::Physical,
                comp_vector: NEXT_COMP_VECTOR.fetch_add(1, Relaxed),
            },
            pd,
        )?;
        let attr = *ep.device_attr();
        // Without the drain's extra entry, which is not ours to use.
        let send_depth = ep.send_depth();
        if fmr && !attr.mem_mgt_extensions {
            pr_err!(
                "device lacks fast registration (FRWR), needed by memreg={}; try memreg=physical\n",
                settings.strategy.name()
            );
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
        if pool > 0 {
            trace::xprtrdma_createmrs(&xprt, pool);
        }
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
        // A Send context for every credit and callback reply, and for the
        // calls whose unsignaled Sends wait for the next signaled one (as
        // the send queue has room for): a full ring makes a call wait, and
        // should not before the send queue does. Their buffers come once
        // the inline send size is negotiated.
        let send_ring = SendRing::new(reqs + batch + BC_SLOTS, batch)?;
        // Replies of `memreg=cache` go to its own handler (`CACHED`).
        let recv_ring = RecvRing::new(
            &ep,
            reqs + EXTRA_RECVS + BC_RECVS,
            recv_len,
            RECV_REPOST_BATCH,
            settings.strategy == Strategy::Cache,
        )?;
        // The requests that may each keep a spare MR.
        let xprt_slots = xprt.max_slots();
        let cache = if settings.strategy == Strategy::Cache {
            Some(super::regcache::CacheState::new(settings.cache_pages)?)
        } else {
            None
        };
        let conn = Arc::pin_init(
            try_pin_init!(Self {
                ep,
                xprt,
                stats,
                settings,
                initial_params: params,
                negotiated: SetOnce::new(),
                // Replies fill at most our receive buffer, and echo Write
                // chunks of up to as many segments as we send.
                limits: DecodeLimits::client(settings.inline_read).with_segments(
                    if settings.strategy.page_segments() {
                        PHYSICAL_MAX_SEGS
                    } else {
                        MAX_HDR_SEGS
                    }
                ),
                credits: Atomic::new(1),
                slots: SendSlots::new(send_depth),
                closing: Atomic::new(false),
                drain_started: Atomic::new(false),
                drained <- Completion::new(),
                mrs <- new_spinlock!(mrs, "rpcrdma_rs::xprt::mrs"),
                dirty <- new_spinlock!(dirty, "rpcrdma_rs::xprt::dirty"),
                keep_spares: settings.strategy == Strategy::Fmr
                    && pool >= xprt_slots.saturating_mul(2),
                write_pad,
                global_rkey,
                send_ring,
                recv_ring,
                cache <- new_spinlock!(cache, "rpcrdma_rs::xprt::cache"),
                shrinker <- new_spinlock!(None, "rpcrdma_rs::xprt::shrinker"),
            }),
            GFP_KERNEL,
        )?;
        // Every Receive is posted before connecting (C
        // `rpcrdma_xprt_connect` posts before `rdma_connect`): a server that
        // Sends right after establishment must find one, since our
        // `rnr_retry_count` of 0 makes a receiver-not-ready fatal. The
        // queue pair takes Receives from its INIT state on.
        if let Err(e) = conn.recv_ring.post_all(&conn.ep) {
            conn.shutdown();
            return Err(e);
        }
        let res = conn
            .establish(settings, &caps, pool, reqs)
            .and_then(|()| conn.register_shrinker());
        if res.is_err() {
            // Flushes the Receives, whose handlers hold the connection.
            conn.shutdown();
        }
        res.map(|()| conn)
    }

    /// Connects the queue pair, whose Receives are posted, and finishes the
    /// setup that depends on the peer's private data.
    fn establish(&self, settings: Settings, caps: &DeviceCaps, pool: u32, reqs: u32) -> Result {
        let fmr = settings.strategy == Strategy::Fmr;
        let attr = *self.ep.device_attr();
        let mut pdata = [0u8; 8];
        // Remote invalidation only makes sense for pool MRs: a server that
        // tried to invalidate the global rkey would break the connection,
        // and one that invalidated a cached registration would cost it.
        ConnectPrivate::new(settings.inline_write, settings.inline_read, fmr)
            .encode(&mut pdata)
            .map_err(|_| EINVAL)?;
        let rd_atom = u8::try_from(attr.max_qp_rd_atom.min(255)).unwrap_or(u8::MAX);
        self.ep.connect(&ConnParam {
            private_data: &pdata,
            responder_resources: rd_atom,
            // The client never issues RDMA Reads.
            initiator_depth: 0,
            // RPC-over-RDMA's credits are its flow control (RFC 8166,
            // section 3.3); an RNR NAK then means the peer broke them, so
            // none is retried (C `rpcrdma_ep_create` sets the same).
            flow_control: false,
            rnr_retry_count: 0,
            // Few transport retries, so that a server whose address moved
            // is noticed soon; sunrpc reconnects and retransmits.
            retry_count: 6,
        })?;
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
        let params = if settings.strategy.page_segments() {
            self.physical_params(neg.inline_send, neg.inline_recv, caps)
        } else {
            let params = TransportParams::from_device(neg.inline_send, neg.inline_recv, caps);
            // MRs of a few pages (`fmr_pages_per_mr`) carry less than the
            // 1 MiB sunrpc would otherwise size mounts for.
            self.xprt.limit_max_payload(params.frwr_max_payload());
            params
        };
        if !self.negotiated.populate(Negotiated::new(params)) {
            // Cannot happen: a connection is established once.
            return Err(EINVAL);
        }
        trace::xprtrdma_inline_thresh(
            &self.xprt,
            neg.inline_send,
            neg.inline_recv,
            params.max_inline_send(),
            params.max_inline_recv(),
        );

        // A buffer of the negotiated inline send size for every Send
        // context (C sizes `rl_sendbuf` the same way).
        self.send_ring
            .provision(&self.ep, neg.inline_send as usize)?;

        if let Some((pad_mr, _)) = &self.write_pad {
            // Its slot is never given back (no completion of ours follows
            // it for sure); one slot of the whole queue.
            if !self.slots.try_take(1) {
                return Err(ENOBUFS);
            }
            pad_mr.post_reg(&self.ep, true)?;
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
            "connected: memreg {}, inline send {} recv {}, max_requests {}, {} MRs of {} pages, peer accepts remote invalidation {}, completion vector {}\n",
            settings.strategy.name(),
            neg.inline_send,
            neg.inline_recv,
            reqs,
            pool,
            params.max_fr_depth,
            neg.peer_send_w_inv_ok,
            self.ep.comp_vector()
        );
        Ok(())
    }

    /// `memreg=physical`: chunks of one-page segments (or runs of
    /// contiguous pages), as many as the negotiated inline headers hold.
    /// The transport's payload limit comes down to what they carry; a
    /// mount sized by an earlier connection with larger thresholds keeps
    /// its rsize and wsize, whose largest I/Os then fail, which is said
    /// here.
    fn physical_params(
        &self,
        inline_send: u32,
        inline_recv: u32,
        caps: &DeviceCaps,
    ) -> TransportParams {
        let params = TransportParams::physical(inline_send, inline_recv, caps);
        let payload = params.physical_max_payload();
        let before = self.xprt.limit_max_payload(payload);
        if before > payload as usize && self.xprt.connect_count() > 0 {
            crate::pr_warn_ratelimited!(
                "memreg={}: this connection's inline thresholds (send {}, receive {}) hold chunks of {} bytes, less than the {} the transport offered before: larger I/Os of existing mounts fail\n",
                self.settings.strategy.name(),
                inline_send,
                inline_recv,
                payload,
                before
            );
        }
        pr_info!(
            "memreg={}: {} segments per chunk, rsize and wsize up to {} KiB\n",
            self.settings.strategy.name(),
            params.max_rdma_segs,
            payload / 1024
        );
        params
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
            CmEvent::DeviceRemoval => {
                trace::xprtrdma_device_removal(&self.xprt);
                "the RDMA device is being removed"
            }
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
