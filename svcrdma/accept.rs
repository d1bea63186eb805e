// SPDX-License-Identifier: GPL-2.0

//! Accepting a connection (C `svc_rdma_accept` in
//! `svc_rdma_transport.c`): the negotiation of inline sizes and credits,
//! queue pair sizing, the Receives posted before the accept, and the CM
//! events of an accepted connection.

use super::cache::BufCache;
use super::conn::{usize_of, Conn, Shared};
use super::listener::Pending;
use super::read_sinks::{ReadSinks, PAGED_SGES, REGISTERED_PAGES};
use super::recv_queue::{Fifo, RecvQ, Ring, HELD_RECV_BYTES, RECV_BATCH, RECV_EXTRA_BC};
use super::sq_gate::SqGate;
use super::Settings;
use crate::proto::cm::{negotiate, ConnectPrivate};
use crate::proto::credits::ServerCredits;
use crate::proto::msg::DecodeLimits;
use crate::proto::svc_call::MAX_PAYLOAD;
use crate::rust::kext::spin_lock::new_spinlock;
use crate::rust::module::trace::{self, AcceptStep, PeerAddr};
use crate::rust::rdma::cm::{CmEvent, CmHandler};
use crate::rust::rdma::read_ctxts::ReadCtxts;
use crate::rust::rdma::recv_slots::RecvSlots;
use crate::rust::rdma::sink_pool::SinkMrPool;
use crate::rust::rdma::verbs::{ConnParam, Endpoint, EndpointConfig, MAX_SGE};
use crate::rust::sunrpc::svc::XprtLink;
use kernel::alloc::KVec;
use kernel::prelude::*;
use kernel::sync::atomic::{Atomic, Relaxed};
use kernel::sync::Arc;

/// Each accepted connection takes the next completion vector of its device.
static NEXT_COMP_VECTOR: Atomic<u32> = Atomic::new(0);

impl Conn {
    /// Sets up a connection for a request taken off a listener and accepts
    /// it (C `svc_rdma_accept`).
    pub(super) fn accept(p: Pending, link: Arc<XprtLink>, set: &Settings) -> Result<Self> {
        // Kept by value: the identifier goes to the queue pair, or back to
        // the CM on failure, before the outcome is known.
        let peer = PeerAddr::of(&p.id);
        let mut step = AcceptStep::Accept;
        let res = Self::set_up(p, link, set, &peer, &mut step);
        if let Err(e) = &res {
            trace::svcrdma_accept_err(&peer, step, *e);
        }
        res
    }

    /// What [`Conn::accept`] does, noting in `step` what it is doing in
    /// case it fails.
    fn set_up(
        p: Pending,
        link: Arc<XprtLink>,
        set: &Settings,
        peer: &PeerAddr,
        step: &mut AcceptStep,
    ) -> Result<Self> {
        let neg = negotiate(
            set.inline_send,
            set.inline_recv,
            Some(p.private_data.as_bytes()),
        );
        // Receives for requests to hold: at most `HELD_RECV_BYTES` of them.
        let held_max = HELD_RECV_BYTES / neg.inline_recv.max(1);
        let sizing = ServerCredits::fit_to_device(
            set.max_requests,
            RECV_EXTRA_BC,
            RECV_BATCH,
            held_max,
            crate::proto::credits::MAX_SLOT_TABLE * 2,
        );
        // Receives lent to requests need no Reply room of their own.
        let sq_depth = (sizing.rq_depth - sizing.held_recvs)
            .saturating_mul(4)
            .saturating_add(64);
        // With `svc_memreg=cache`, the device's registration cache, whose
        // protection domain every server connection on the device shares
        // (see `cache.rs`), so its buffers and MRs serve them all. With
        // `svc_memreg=direct` (the default), a cache and a protection
        // domain of the connection's own, as C: no key another client
        // learns or guesses names anything of this connection (audit
        // finding 2's residual).
        *step = AcceptStep::Pd;
        let cache = BufCache::attach(&p.id, set.direct)?;
        *step = AcceptStep::Qp;
        let ep = Endpoint::with_pd(
            p.id,
            &EndpointConfig {
                max_send_wr: sq_depth,
                max_recv_wr: sizing.rq_depth,
                // A page per entry for Writes from the Reply's pages.
                max_send_sge: if set.direct { MAX_SGE as u32 } else { 1 },
                max_recv_sge: 1,
                unsafe_global_rkey: false,
                comp_vector: NEXT_COMP_VECTOR.fetch_add(1, Relaxed),
            },
            cache.pd().clone(),
        )?;
        *step = AcceptStep::Accept;
        let attr = *ep.device_attr();
        let max_wr = attr.max_qp_wr.max(1);
        let sizing = ServerCredits::fit_to_device(
            set.max_requests,
            RECV_EXTRA_BC,
            RECV_BATCH,
            held_max,
            max_wr,
        );
        // What the gate hands out: the queue pair's spare entry for the
        // drain is not included (see `Endpoint::send_depth`).
        let sq_depth = ep.send_depth();
        // A quarter of the send queue (at least one entry per credit: it
        // is 4 times the receive queue) is left to Sends and Writes by
        // RDMA Reads.
        let read_keep = sq_depth / 4;
        // How many RDMA Reads we issue at once: what the client accepts,
        // within what the device can initiate (C `svc_rdma_accept` clamps
        // to `max_qp_init_rd_atom`).
        let ird = u32::from(p.initiator_depth).min(attr.max_qp_init_rd_atom);
        let ird = u8::try_from(ird).unwrap_or(u8::MAX);
        if ird == 0 {
            crate::pr_warn_ratelimited!(
                "svcrdma: client allows no RDMA Reads, refusing connection\n"
            );
            *step = AcceptStep::InitDepth;
            return Err(EINVAL);
        }
        let credits = ServerCredits::new(
            sizing.max_requests,
            crate::proto::credits::GrantPolicy::Fixed,
        );
        let nrecv = usize_of(sizing.rq_depth.saturating_sub(1).max(1))?;
        let received = Fifo::new(nrecv)?;
        let max_reads = credits.grant().max(1);
        let reads_cap = usize_of(max_reads)?;
        let ready = Fifo::new(reads_cap)?;
        let sq_wait = Fifo::new(reads_cap)?;
        let ctxts = KVec::with_capacity(reads_cap, GFP_KERNEL)?;
        let rq_link = link.clone();
        let sq: Arc<SqGate> = SqGate::new(
            sq_depth,
            read_keep,
            usize_of(neg.inline_send)?,
            link.clone(),
            cache.clone(),
        )?;
        let rq_sq = sq.clone();
        let recvs = RecvSlots::new(&ep, nrecv, usize_of(neg.inline_recv)?)?;
        let ops = ReadCtxts::new(reads_cap)?;
        let rq = Arc::pin_init(
            pin_init!(RecvQ {
                recvs,
                ring <- new_spinlock!(
                    Ring {
                        received,
                        repost: Default::default(),
                        ready,
                        sq_wait,
                        ctxts,
                        held: 0,
                        max_held: sizing.held_recvs,
                    },
                    "svcrdma::rq"
                ),
                link: rq_link,
                sq: rq_sq,
                ops,
            }),
            GFP_KERNEL,
        )?;
        // Posted in chains, one doorbell each.
        rq.recvs.post_all(&ep)?;
        // The pool of Read sink MRs, if any, is allocated before the
        // accept.
        let read_sinks = read_sinks(&ep, set, (sq_depth - read_keep) / 2)?;
        let pdata = ConnectPrivate::new(neg.inline_send, neg.inline_recv, false).to_bytes();
        // As C's `svc_rdma_accept`: the server never lets the client read
        // from it, issues up to `ird` RDMA Reads, and leaves flow control to
        // the credits (retry counts are the active side's).
        ep.accept(&ConnParam {
            private_data: &pdata,
            initiator_depth: ird,
            ..ConnParam::default()
        })?;
        // One line per connection, like the client's "connected:" line: an
        // administrator sees what was negotiated, where completions land and
        // where RDMA Reads land. Rate-limited: a peer decides how often it
        // connects (the trace event has every one).
        trace::svcrdma_accept(peer, credits.grant(), neg.inline_send, neg.inline_recv, ird);
        crate::pr_info_ratelimited!(
            "svcrdma: accepted: credits {}, inline send {} recv {}, max RDMA Reads {}, peer accepts remote invalidation {}, completion vector {}, Reads into {}\n",
            credits.grant(),
            neg.inline_send,
            neg.inline_recv,
            ird,
            neg.peer_send_w_inv_ok && attr.mem_mgt_extensions,
            ep.comp_vector(),
            read_sinks
        );
        let shared = Arc::new(
            Shared {
                ep,
                rq,
                sq,
                cache,
                link,
                credits: credits.grant(),
                inline_send: neg.inline_send,
                snd_w_inv: neg.peer_send_w_inv_ok && attr.mem_mgt_extensions,
                direct: set.direct,
                read_sinks,
                limits: DecodeLimits::server(MAX_PAYLOAD, neg.inline_recv),
            },
            GFP_KERNEL,
        )?;
        // Any close asked for through the link ends the Replies' wait for
        // send queue room; `Shared`'s drop removes the hook again.
        shared.link.set_on_close(shared.sq.clone());
        // From here on the connection's CM events (those queued since the
        // request arrived first) mark the transport from the CM's callback.
        let events = Arc::new(
            ConnEvents {
                link: shared.link.clone(),
            },
            GFP_KERNEL,
        )?;
        shared.ep.cm_id().set_handler(events);
        Ok(Self { shared })
    }
}

/// The CM event handler of a connection. It holds only the link, which
/// `xpo_free` severs before the connection is dropped, so it never reaches a
/// freed `svc_xprt`; the connection's identifier is destroyed when the
/// connection is dropped (in `xpo_free`), and no handler runs after that.
struct ConnEvents {
    link: Arc<XprtLink>,
}

impl CmHandler for ConnEvents {
    fn handle(&self, ev: CmEvent) -> core::result::Result<(), CmEvent> {
        match ev {
            // C `svc_rdma_cma_handler`: `svc_xprt_deferred_close`.
            CmEvent::Disconnected
            | CmEvent::DeviceRemoval
            | CmEvent::ConnectError(_)
            | CmEvent::Unreachable(_)
            | CmEvent::Rejected { .. } => self.link.close(),
            CmEvent::Established { .. } => self.link.data_ready(),
            _ => {}
        }
        Ok(())
    }
}

/// Most MRs a connection's Read sink pool keeps: as many as its send
/// queue admits registered Reads at once, at most this many (a busier
/// connection allocates the rest as it needs them).
const SINK_POOL_MAX: u32 = 64;

/// Where RDMA Reads land on `ep` (`reads`: how many registered Reads its
/// send queue admits at once) with `svc_memreg=direct`: straight in the
/// Call's pages, scattered over them where one Read may have an entry per
/// page and the sink needs no registration; on iWARP through an MR of a
/// pool of the connection's own, registered over the pages of each Read.
/// With `svc_memreg=cache`, `force_mr` or a device that allows neither,
/// into the registration cache's sink buffers.
fn read_sinks(ep: &Endpoint, set: &Settings, reads: u32) -> Result<ReadSinks> {
    if !set.direct || set.force_mr {
        return Ok(ReadSinks::Cached);
    }
    let attr = ep.device_attr();
    if ep.pd().is_iwarp() {
        let pages = attr.max_fast_reg_page_list_len.min(REGISTERED_PAGES);
        if pages < 2 {
            return Ok(ReadSinks::Cached);
        }
        let count = usize_of(reads.clamp(1, SINK_POOL_MAX))?;
        return Ok(ReadSinks::RegisteredPages(SinkMrPool::new(
            ep.pd(),
            pages,
            count,
        )?));
    }
    let sges = u32::try_from(PAGED_SGES).unwrap_or(u32::MAX);
    if attr.max_sge_rd >= sges && ep.max_send_sge() >= PAGED_SGES {
        Ok(ReadSinks::Pages)
    } else {
        Ok(ReadSinks::Cached)
    }
}
