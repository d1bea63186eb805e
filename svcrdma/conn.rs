// SPDX-License-Identifier: GPL-2.0

//! One accepted connection (C `svc_rdma_accept`, `svc_rdma_recvfrom.c`,
//! `svc_rdma_sendto.c`).
//!
//! Receives are posted once, at accept, into buffers of the negotiated
//! inline size; a completion queues its slot and marks the transport
//! `XPT_DATA`. `xpo_recvfrom` takes one slot, copies the message out,
//! reposts the Receive at once and then works on the copy: the header is
//! decoded by the protocol core, errors are answered with `RDMA_ERROR`, and
//! the Call is assembled in the request's pages from the inline body and any
//! Read chunks. Read chunks are pulled with RDMA Reads that no thread waits
//! for (see `rw.rs`): the Call is finished by a later `xpo_recvfrom`, which
//! looks at the read-complete queue before the receive ring (C
//! `svc_rdma_recvfrom`). The received message stays with the request
//! ([`CallCtxt`]) so `xpo_sendto` can decode its chunk lists again and place
//! the Reply: result payloads through Write chunks, the rest inline or
//! through the Reply chunk.

use super::cache::BufCache;
use super::listener::Pending;
use super::rw::{Io, ReadOp, ReadWork, SqGate, Taken};
use super::Settings;
use crate::proto::backchannel::is_backchannel_reply;
use crate::proto::cm::{negotiate, ConnectPrivate};
use crate::proto::credits::ServerCredits;
use crate::proto::decode::decode_call;
use crate::proto::encode::{encode_error_for, ErrorReply};
use crate::proto::msg::{ChunkLists, DecodeError, DecodeLimits, ErrorBody, Segment};
use crate::proto::pcl::{ParsedChunks, PclChunk};
use crate::proto::svc_call::{CallLayout, Source, StepError, MAX_PAYLOAD};
use crate::proto::svc_reply::{
    route_result_payload, set_result_payloads, PayloadRoute, PayloadWrites, ReplyBody,
};
use crate::rdma::cm::{CmEvent, CmHandler, CmId};
use crate::rdma::svc::{stat_add, BcCall, Rqst, Stat, XprtLink};
use crate::rdma::verbs::{
    CompletionHandler, DmaDir, Endpoint, EndpointConfig, WorkCompletion, WorkRequest,
    RECV_BATCH_MAX,
};
use kernel::alloc::KVec;
use kernel::new_spinlock_irq;
use kernel::prelude::*;
use kernel::sync::{Arc, SpinLockIrq};

/// Receives posted beyond the credit grant (C: 2 backchannel requests and
/// a batch of 7 in flight while being refilled).
const RECV_EXTRA_BC: u32 = 2;
const RECV_BATCH: u32 = 7;

/// Ring of completed Receives (slot, byte length) in arrival order, and
/// the Calls being read.
///
/// # Invariants
///
/// `ready`, `sq_wait` and `dead` hold distinct operations, at most `reads`
/// of them together, and `reads <= max_reads`, each list's capacity: so
/// pushing (from completion handlers too) never allocates and never fails.
struct Ring {
    slots: KVec<(usize, u32)>,
    head: usize,
    len: usize,
    /// Slots consumed by `recvfrom`, waiting to be reposted as one batch.
    repost: KVec<usize>,
    /// Calls whose Reads all completed, or that may post more (C
    /// `sc_read_complete_q`).
    ready: KVec<Arc<ReadOp>>,
    /// Calls with Reads left to post and no send queue room for them.
    sq_wait: KVec<Arc<ReadOp>>,
    /// Calls given up on that must outlive the queue pair's drain.
    dead: KVec<Arc<ReadOp>>,
    /// Calls being read (counted from the first post to assembly).
    reads: u32,
    /// At most this many Calls are read at once: the credit grant, which
    /// a client never exceeds (a Call being read has no Reply yet).
    max_reads: u32,
}

/// Takes the oldest operation of `list`.
fn pop_front(list: &mut KVec<Arc<ReadOp>>) -> Option<Arc<ReadOp>> {
    if list.is_empty() {
        None
    } else {
        list.remove(0).ok()
    }
}

/// Takes the oldest operation of `list` if there is one and `ok()`.
fn pop_front_if(list: &mut KVec<Arc<ReadOp>>, ok: impl FnOnce() -> bool) -> Option<Arc<ReadOp>> {
    if list.is_empty() || !ok() {
        None
    } else {
        pop_front(list)
    }
}

/// What `xpo_recvfrom` found to work on.
enum Next {
    /// A Call being read.
    Op(Arc<ReadOp>),
    /// A received message: its receive slot and length.
    Recv(usize, u32),
    /// Nothing.
    Idle,
}

impl Ring {
    fn push(&mut self, v: (usize, u32)) -> bool {
        let cap = self.slots.len();
        if cap == 0 || self.len >= cap {
            return false;
        }
        let idx = (self.head + self.len) % cap;
        match self.slots.get_mut(idx) {
            Some(s) => {
                *s = v;
                self.len += 1;
                true
            }
            None => false,
        }
    }

    fn pop(&mut self) -> Option<(usize, u32)> {
        let cap = self.slots.len();
        if self.len == 0 || cap == 0 {
            return None;
        }
        let v = *self.slots.get(self.head)?;
        self.head = (self.head + 1) % cap;
        self.len -= 1;
        Some(v)
    }
}

/// A connection's queues of work for `xpo_recvfrom`, under one lock so
/// that `XPT_DATA` is cleared only when all are empty (C `sc_rq_dto_lock`).
#[pin_data]
pub(super) struct RecvQ {
    #[pin]
    ring: SpinLockIrq<Ring>,
    link: Arc<XprtLink>,
}

impl RecvQ {
    pub(super) fn link(&self) -> &Arc<XprtLink> {
        &self.link
    }

    /// Queues an operation whose Reads have all completed (C
    /// `svc_rdma_wc_read_done`) and marks the transport `XPT_DATA`.
    pub(super) fn read_done(&self, op: Arc<ReadOp>) {
        let lost = {
            let mut r = self.ring.lock();
            match r.ready.push_within_capacity(op) {
                Ok(()) => {
                    // Under the ring lock, like a Receive's completion.
                    self.link.data_ready();
                    None
                }
                Err(e) => Some(e),
            }
        };
        // Unreachable by the type invariant of `Ring`; dropped outside the
        // lock in any case (dropping may free buffers).
        if lost.is_some() {
            self.link.close();
        }
    }

    /// Leaves an operation waiting for send queue room; the release that
    /// makes room marks the transport `XPT_DATA` ([`SqGate::starve`]).
    fn wait_for_room(&self, op: Arc<ReadOp>, sq: &SqGate) {
        let lost = {
            let mut r = self.ring.lock();
            match r.sq_wait.push_within_capacity(op) {
                Ok(()) => {
                    if !sq.starve() {
                        // Room appeared meanwhile.
                        self.link.data_ready();
                    }
                    None
                }
                Err(e) => Some(e),
            }
        };
        if lost.is_some() {
            self.link.close();
        }
    }

    /// Keeps an operation given up on until the connection is freed,
    /// after its queue pair was drained (see [`Io::post_reads`]).
    fn hold(&self, op: Arc<ReadOp>) {
        let lost = self.ring.lock().dead.push_within_capacity(op).err();
        // Unreachable by the type invariant of `Ring`.
        drop(lost);
    }

    /// A Call being read was assembled or given up on.
    fn read_finished(&self) {
        let mut r = self.ring.lock();
        r.reads = r.reads.saturating_sub(1);
    }
}

/// Completion of one posted Receive.
struct RecvHandler {
    slot: usize,
    q: Arc<RecvQ>,
}

impl CompletionHandler for RecvHandler {
    fn complete(&self, _wr: &Arc<WorkRequest<Self>>, wc: &WorkCompletion) {
        if wc.is_ok() {
            let mut r = self.q.ring.lock();
            if r.push((self.slot, wc.byte_len)) {
                // Under the ring lock, pairing with `recvfrom` clearing
                // XPT_DATA under it (C `sc_rq_dto_lock`).
                self.q.link.data_ready();
            }
        } else if !wc.is_flush() {
            crate::pr_warn_ratelimited!("svcrdma: receive failed, status {}\n", wc.status);
            self.q.link.close();
        }
    }
}

struct Shared {
    // Dropped first: draining completes every posted work request, RDMA
    // Reads included (their operations land in `rq`'s queues). `rq` goes
    // after it, so the sinks of Calls still being read, and any sink a
    // queued REG_MR named, are freed only once nothing can touch them.
    ep: Endpoint,
    recvs: KVec<Arc<WorkRequest<RecvHandler>>>,
    rq: Arc<RecvQ>,
    sq: Arc<SqGate>,
    cache: Arc<BufCache>,
    link: Arc<XprtLink>,
    credits: u32,
    inline_send: u32,
    snd_w_inv: bool,
    limits: DecodeLimits,
}

/// An accepted connection.
pub(super) struct Conn {
    shared: Arc<Shared>,
}

/// Per-request state, from `xpo_recvfrom` to `xpo_release_ctxt`.
pub(crate) struct CallCtxt {
    /// The received transport header and inline body.
    msg: KVec<u8>,
    /// Length of each Write chunk the client offered.
    write_lens: KVec<u32>,
    /// (position, length) of result payloads, one per Write chunk in order.
    payloads: KVec<(u32, u32)>,
}

impl CallCtxt {
    fn new(msg: KVec<u8>, write_lens: KVec<u32>) -> Result<KBox<Self>> {
        Ok(KBox::new(
            Self {
                msg,
                write_lens,
                payloads: KVec::new(),
            },
            GFP_KERNEL,
        )?)
    }

    /// Records a result payload for the next Write chunk (C
    /// `svc_rdma_result_payload`); without a Write chunk it stays inline.
    pub(super) fn result_payload(&mut self, offset: u32, length: u32) -> Result {
        match route_result_payload(&self.write_lens, self.payloads.len(), length) {
            Ok(PayloadRoute::Inline) => Ok(()),
            Ok(PayloadRoute::WriteChunk) => Ok(self.payloads.push((offset, length), GFP_KERNEL)?),
            Err(_) => Err(E2BIG),
        }
    }
}

/// Storage for parsed chunk lists.
struct PclStore {
    chunks: KVec<PclChunk>,
    segs: KVec<Segment>,
}

impl PclStore {
    fn for_lists(lists: &ChunkLists<'_>) -> Result<Self> {
        Ok(Self {
            chunks: KVec::from_elem(
                PclChunk::default(),
                ParsedChunks::chunks_needed(lists),
                GFP_KERNEL,
            )?,
            segs: KVec::from_elem(
                Segment::default(),
                ParsedChunks::segments_needed(lists),
                GFP_KERNEL,
            )?,
        })
    }
}

/// Transport header of a backchannel Call: xid, vers, credits, proc and
/// three empty chunk lists.
const BC_HDR_LEN: usize = 28;

/// Backchannel requests the server may have outstanding (C
/// `RPCRDMA_MAX_BC_REQUESTS`), advertised in backchannel Calls.
const BC_CREDITS: u32 = 2;

fn usize_of(v: u32) -> Result<usize> {
    usize::try_from(v).map_err(|_| EINVAL)
}

/// Copies `len` bytes at `start` of chunk `src` of `work` (0: the call
/// chunk, `i + 1`: Read chunk `i`) into the Call at `at`.
fn copy_read(
    rqst: &mut Rqst,
    work: Option<&ReadWork>,
    src: usize,
    start: u32,
    len: u32,
    at: u32,
) -> Result {
    let work = work.ok_or(EINVAL)?;
    work.copy_out(src, usize_of(start)?, usize_of(len)?, |rel, buf, off, n| {
        let to = at
            .checked_add(u32::try_from(rel).map_err(|_| EINVAL)?)
            .ok_or(EINVAL)?;
        rqst.write_arg_from_buf(to, buf, off, n)
    })
}

impl Conn {
    /// Sets up a connection for a request taken off a listener and accepts
    /// it (C `svc_rdma_accept`).
    pub(super) fn accept(p: Pending, link: Arc<XprtLink>, set: &Settings) -> Result<Self> {
        let neg = negotiate(
            set.inline_send,
            set.inline_recv,
            Some(p.private_data.as_bytes()),
        );
        let sizing = ServerCredits::fit_to_device(
            set.max_requests,
            RECV_EXTRA_BC,
            RECV_BATCH,
            crate::proto::credits::MAX_SLOT_TABLE * 2,
        );
        let sq_depth = sizing.rq_depth.saturating_mul(4).saturating_add(64);
        // The device's registration cache, whose protection domain every
        // server connection on the device shares (see `cache.rs`).
        let cache = BufCache::attach(&p.id)?;
        let ep = Endpoint::with_pd(
            p.id,
            &EndpointConfig {
                max_send_wr: sq_depth,
                max_recv_wr: sizing.rq_depth,
                max_send_sge: 1,
                max_recv_sge: 1,
                unsafe_global_rkey: false,
            },
            cache.pd().clone(),
        )?;
        let attr = *ep.device_attr();
        let max_wr = attr.max_qp_wr.max(1);
        let sizing =
            ServerCredits::fit_to_device(set.max_requests, RECV_EXTRA_BC, RECV_BATCH, max_wr);
        // What the gate hands out: the queue pair's spare entry for the
        // drain is not included (see `Endpoint::send_depth`).
        let sq_depth = ep.send_depth();
        // How many RDMA Reads we issue at once: what the client accepts,
        // within what the device can initiate (C `svc_rdma_accept` clamps
        // to `max_qp_init_rd_atom`).
        let ird = u32::from(p.initiator_depth).min(attr.max_qp_init_rd_atom);
        let ird = u8::try_from(ird).unwrap_or(u8::MAX);
        if ird == 0 {
            crate::pr_warn_ratelimited!(
                "svcrdma: client allows no RDMA Reads, refusing connection\n"
            );
            return Err(EINVAL);
        }
        let credits = ServerCredits::new(
            sizing.max_requests,
            crate::proto::credits::GrantPolicy::Fixed,
        );
        let nrecv = usize_of(sizing.rq_depth.saturating_sub(1).max(1))?;
        let ring_slots = KVec::from_elem((0, 0), nrecv, GFP_KERNEL)?;
        let repost = KVec::with_capacity(RECV_BATCH as usize, GFP_KERNEL)?;
        let max_reads = credits.grant().max(1);
        let reads_cap = usize_of(max_reads)?;
        let ready = KVec::with_capacity(reads_cap, GFP_KERNEL)?;
        let sq_wait = KVec::with_capacity(reads_cap, GFP_KERNEL)?;
        let dead = KVec::with_capacity(reads_cap, GFP_KERNEL)?;
        let rq_link = link.clone();
        let rq = Arc::pin_init(
            pin_init!(RecvQ {
                ring <- new_spinlock_irq!(
                    Ring {
                        slots: ring_slots,
                        head: 0,
                        len: 0,
                        repost,
                        ready,
                        sq_wait,
                        dead,
                        reads: 0,
                        max_reads,
                    },
                    "svcrdma::rq"
                ),
                link: rq_link,
            }),
            GFP_KERNEL,
        )?;
        let recv_len = usize_of(neg.inline_recv)?;
        let mut recvs = KVec::with_capacity(nrecv, GFP_KERNEL)?;
        for slot in 0..nrecv {
            let buf = ep.alloc_buf(recv_len, DmaDir::FromDevice)?;
            let mut segs = KVec::new();
            segs.push(
                crate::rdma::verbs::Segment {
                    buf,
                    offset: 0,
                    len: recv_len,
                },
                GFP_KERNEL,
            )?;
            let wr = WorkRequest::new(
                RecvHandler {
                    slot,
                    q: rq.clone(),
                },
                segs,
            )?;
            recvs.push(wr, GFP_KERNEL)?;
        }
        // Posted in chains, one doorbell each.
        for batch in recvs.chunks(RECV_BATCH_MAX) {
            ep.post_recv_batch(batch)?;
        }
        let pdata = ConnectPrivate::new(neg.inline_send, neg.inline_recv, false).to_bytes();
        ep.accept(&pdata, 0, ird)?;
        let shared = Arc::new(
            Shared {
                ep,
                recvs,
                rq,
                // A quarter of the send queue (at least one entry per
                // credit: it is 4 times the receive queue) is left to
                // Sends and Writes by RDMA Reads.
                sq: SqGate::new(sq_depth, sq_depth / 4, link.clone())?,
                cache,
                link,
                credits: credits.grant(),
                inline_send: neg.inline_send,
                snd_w_inv: neg.peer_send_w_inv_ok && attr.mem_mgt_extensions,
                limits: DecodeLimits::server(MAX_PAYLOAD, neg.inline_recv),
            },
            GFP_KERNEL,
        )?;
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

    pub(super) fn cm_id(&self) -> &CmId {
        self.shared.ep.cm_id()
    }

    /// Always true: a thread that finds the send queue full waits for a
    /// slot in [`SqGate::acquire`], and returning false here would leave
    /// `XPT_DATA` work undispatched until something enqueues the transport.
    pub(super) fn has_wspace(&self) -> bool {
        true
    }

    pub(super) fn detach(&self) {
        let s = &self.shared;
        s.sq.close();
        let _ = s.ep.cm_id().disconnect();
    }

    /// Queues a consumed Receive for reposting and posts the queue as one
    /// chain once it holds [`RECV_BATCH`] (C `svc_rdma_refresh_recvs`).
    /// The queue is never longer than the batch, and the receive queue
    /// holds the credits, the backchannel's Receives and one batch more,
    /// so the client never finds fewer posted Receives than it may use.
    fn repost(&self, slot: usize) {
        let s = &self.shared;
        let mut batch = [0usize; RECV_BATCH as usize];
        let n = {
            let mut r = s.rq.ring.lock();
            let q = &mut r.repost;
            if q.push_within_capacity(slot).is_err() {
                // Cannot happen (capacity is the batch): post what we have.
                0
            } else if q.len() < RECV_BATCH as usize {
                return;
            } else {
                let n = q.len().min(batch.len());
                for (dst, src) in batch.iter_mut().zip(q.drain_all()) {
                    *dst = src;
                }
                n
            }
        };
        let mut wrs = KVec::new();
        for slot in batch.iter().take(n) {
            if let Some(wr) = s.recvs.get(*slot) {
                if wrs.push(wr.clone(), GFP_KERNEL).is_err() {
                    break;
                }
            }
        }
        if wrs.len() != n || s.ep.post_recv_batch(&wrs).is_err() {
            crate::pr_warn_ratelimited!(
                "svcrdma: cannot repost {} receives; closing the connection\n",
                n
            );
            s.link.close();
        }
    }

    /// `xpo_recvfrom`: the next Call, if any (C `svc_rdma_recvfrom`).
    /// Calls whose Reads completed come first, then Calls waiting for send
    /// queue room if there is room, then the receive ring.
    pub(super) fn recvfrom(&self, rqst: &mut Rqst) -> Option<KBox<CallCtxt>> {
        let s = &self.shared;
        let next = {
            let mut r = s.rq.ring.lock();
            if let Some(op) = pop_front(&mut r.ready) {
                Next::Op(op)
            } else if let Some(op) = pop_front_if(&mut r.sq_wait, || s.sq.read_room()) {
                Next::Op(op)
            } else if let Some((slot, len)) = r.pop() {
                Next::Recv(slot, len)
            } else {
                rqst.clear_data();
                // Cleared before the gate notes the starvation, so the
                // release that makes room sets `XPT_DATA` after this.
                if !r.sq_wait.is_empty() && !s.sq.starve() {
                    s.link.data_ready();
                }
                Next::Idle
            }
        };
        rqst.received();
        let (slot, byte_len) = match next {
            Next::Idle => return None,
            Next::Op(op) => return self.resume(rqst, op),
            Next::Recv(slot, len) => (slot, len),
        };
        stat_add(Stat::Recv, 1);
        let wr = s.recvs.get(slot)?;
        let msg = wr.buf(0).and_then(|buf| {
            let n = usize_of(byte_len).ok()?.min(buf.len());
            let mut v = KVec::from_elem(0u8, n, GFP_KERNEL).ok()?;
            buf.read(0, &mut v).ok()?;
            Some(v)
        });
        self.repost(slot);
        match self.process(rqst, msg?) {
            Ok(ctxt) => ctxt,
            Err(e) => {
                crate::pr_warn_ratelimited!("svcrdma: dropping a call: {:?}\n", e);
                None
            }
        }
    }

    /// Sends `RDMA_ERROR` for a call that failed to decode.
    fn send_decode_error(&self, msg: &[u8], err: &DecodeError) {
        let s = &self.shared;
        crate::pr_warn_ratelimited!("svcrdma: bad call header ({})\n", err.name());
        let mut out = [0u8; 32];
        if let Ok(Some(n)) = encode_error_for(msg, err, s.credits, &mut out) {
            stat_add(Stat::ErrSent, 1);
            let _ = self.send_bytes(out.get(..n).unwrap_or(&[]), None);
        }
    }

    /// Sends `RDMA_ERROR`/`ERR_CHUNK` for the call with this XID.
    fn send_err_chunk(&self, xid: u32) {
        let reply = ErrorReply {
            xid,
            vers: crate::proto::msg::RPCRDMA_VERSION,
            credits: self.shared.credits,
            body: ErrorBody::Chunk,
        };
        let mut out = [0u8; 32];
        if let Ok(n) = reply.encode(&mut out) {
            stat_add(Stat::ErrSent, 1);
            let _ = self.send_bytes(out.get(..n).unwrap_or(&[]), None);
        }
    }

    fn io(&self) -> Io<'_> {
        let s = &self.shared;
        Io {
            ep: &s.ep,
            sq: &s.sq,
            cache: &s.cache,
        }
    }

    /// Posts a Send of `bytes`.
    fn send_bytes(&self, bytes: &[u8], inv: Option<u32>) -> Result {
        self.io().send(bytes, inv)
    }

    /// Works on a received message: answers what is wrong with it,
    /// assembles an inline Call, or starts the RDMA Reads of its chunks.
    fn process(&self, rqst: &mut Rqst, msg: KVec<u8>) -> Result<Option<KBox<CallCtxt>>> {
        let s = &self.shared;
        let hdr = match decode_call(&msg, &s.limits) {
            Ok(h) => h,
            Err(e) => {
                self.send_decode_error(&msg, &e);
                return Ok(None);
            }
        };
        let xid = hdr.xid;
        let Some((lists, inline)) = hdr.body.chunks_and_inline() else {
            return Ok(None);
        };
        if is_backchannel_reply(xid, lists, inline) && rqst.has_backchannel() {
            // C svc_rdma_handle_bc_reply: a Reply to one of nfsd's callbacks.
            stat_add(Stat::BcReplies, 1);
            if let Err(e) = rqst.backchannel_reply(xid, inline, hdr.credits) {
                crate::pr_warn_ratelimited!("svcrdma: backchannel reply dropped: {:?}\n", e);
            }
            return Ok(None);
        }
        let mut store = PclStore::for_lists(lists)?;
        let Ok(pcl) = ParsedChunks::build(lists, &mut store.chunks, &mut store.segs) else {
            self.send_err_chunk(xid);
            return Ok(None);
        };
        // Checked before anything is read: the request's pages must hold
        // the Call (a call chunk of 4 MiB and more is refused here, never
        // allocated), and its regions must be consistent.
        let Some(layout) = CallLayout::new(&pcl, inline.len(), rqst.arg_max()) else {
            self.send_err_chunk(xid);
            return Ok(None);
        };
        if !layout.needs_reads() {
            let Some(write_lens) = self.assemble(rqst, xid, &pcl, inline, None)? else {
                return Ok(None);
            };
            return Ok(Some(CallCtxt::new(msg, write_lens)?));
        }
        let work = ReadWork::new(msg, &pcl)?;
        self.start_reads(work)?;
        Ok(None)
    }

    /// Counts a new Call being read and posts its first Reads.
    fn start_reads(&self, work: ReadWork) -> Result {
        let s = &self.shared;
        let op = ReadOp::new()?;
        let admitted = {
            let mut r = s.rq.ring.lock();
            if r.reads < r.max_reads {
                r.reads += 1;
                true
            } else {
                false
            }
        };
        if !admitted {
            // More Calls in flight than credits granted: a protocol
            // violation that would otherwise let a client tie up
            // unbounded buffers.
            crate::pr_warn_ratelimited!(
                "svcrdma: client exceeds its credits with Read chunks; closing the connection\n"
            );
            s.link.close();
            return Ok(());
        }
        self.continue_reads(op, work);
        Ok(())
    }

    /// Posts what fits of the rest of `op`'s Reads (`work` taken out of
    /// it) and leaves the operation where it will be found again.
    fn continue_reads(&self, op: Arc<ReadOp>, mut work: ReadWork) {
        let s = &self.shared;
        match self.io().post_reads(&op, &s.rq, &mut work) {
            Err(e) => {
                if e != ENOTCONN {
                    crate::pr_warn_ratelimited!(
                        "svcrdma: cannot post RDMA Reads ({:?}); closing the connection\n",
                        e
                    );
                }
                s.link.close();
                op.hold(work);
                s.rq.hold(op);
            }
            Ok(posted) => {
                let more = !work.all_posted();
                if op.put_back(work) {
                    // Nothing is pending: no completion will queue it.
                    if posted == 0 && more {
                        s.rq.wait_for_room(op, &s.sq);
                    } else {
                        s.rq.read_done(op);
                    }
                }
            }
        }
    }

    /// Continues a Call being read, taken off the read-complete queue or
    /// the queue of Calls waiting for send queue room (C
    /// `svc_rdma_read_complete`): posts more Reads, or assembles the Call
    /// into this request's pages.
    fn resume(&self, rqst: &mut Rqst, op: Arc<ReadOp>) -> Option<KBox<CallCtxt>> {
        let s = &self.shared;
        match op.take() {
            Taken::Nothing => None,
            Taken::Failed(work) => {
                // Only this connection (C `svc_rdma_wc_read_done`). Every
                // Read of the work completed, so nothing queued names its
                // sinks: they are freed with it, not cached.
                s.link.close();
                s.rq.read_finished();
                drop(work);
                None
            }
            Taken::Work(work) if !work.all_posted() => {
                self.continue_reads(op, work);
                None
            }
            Taken::Work(work) => {
                s.rq.read_finished();
                match self.finish_read(rqst, work) {
                    Ok(ctxt) => ctxt,
                    Err(e) => {
                        crate::pr_warn_ratelimited!("svcrdma: dropping a call: {:?}\n", e);
                        None
                    }
                }
            }
        }
    }

    /// Assembles a Call whose Reads all completed.
    fn finish_read(&self, rqst: &mut Rqst, mut work: ReadWork) -> Result<Option<KBox<CallCtxt>>> {
        let s = &self.shared;
        let msg = core::mem::replace(&mut work.msg, KVec::new());
        let write_lens = {
            let hdr = decode_call(&msg, &s.limits).map_err(|_| EINVAL)?;
            let (lists, inline) = hdr.body.chunks_and_inline().ok_or(EINVAL)?;
            let mut store = PclStore::for_lists(lists)?;
            let pcl = ParsedChunks::build(lists, &mut store.chunks, &mut store.segs)
                .map_err(|_| EINVAL)?;
            self.assemble(rqst, hdr.xid, &pcl, inline, Some(&work))?
        };
        work.recycle(&s.cache);
        match write_lens {
            Some(w) => Ok(Some(CallCtxt::new(msg, w)?)),
            None => Ok(None),
        }
    }

    /// Lays the Call out in `rqst`'s pages: the inline body (`inline`) or
    /// the call chunk, and the Read chunks, copied from `work`'s sinks
    /// straight into the pages. Returns the Write chunk lengths, or `None`
    /// when the Call was answered with `ERR_CHUNK`.
    fn assemble(
        &self,
        rqst: &mut Rqst,
        xid: u32,
        pcl: &ParsedChunks<'_>,
        inline: &[u8],
        work: Option<&ReadWork>,
    ) -> Result<Option<KVec<u32>>> {
        // The request finishing the Call may have other pages than the one
        // that started it: checked again.
        let Some(layout) = CallLayout::new(pcl, inline.len(), rqst.arg_max()) else {
            self.send_err_chunk(xid);
            return Ok(None);
        };
        rqst.set_arg(layout.total())?;
        for step in layout.steps() {
            let step = match step {
                Ok(step) => step,
                Err(StepError::BadRegion) => {
                    self.send_err_chunk(xid);
                    return Ok(None);
                }
                Err(StepError::Inconsistent) => return Err(EINVAL),
            };
            let at = step.at;
            match step.source {
                Source::Inline { offset, len } => {
                    let start = usize_of(offset)?;
                    let end = start.checked_add(usize_of(len)?).ok_or(EINVAL)?;
                    rqst.write_arg(at, inline.get(start..end).ok_or(EINVAL)?)?;
                }
                Source::Chunk { src, start, len } => copy_read(rqst, work, src, start, len, at)?,
                Source::Pad { len } => {
                    rqst.write_arg(at, [0u8; 4].get(..usize_of(len)?).ok_or(EINVAL)?)?;
                }
            }
        }
        let mut write_lens = KVec::new();
        for c in pcl.write_chunks() {
            write_lens.push(c.length, GFP_KERNEL)?;
        }
        Ok(Some(write_lens))
    }

    /// Sends a backchannel Call (C `rpcrdma_bc_send_request`): an
    /// `RDMA_MSG` with empty chunk lists, always inline.
    pub(super) fn bc_send(&self, call: &BcCall) -> Result {
        let s = &self.shared;
        let len = usize_of(call.len())?;
        let total = len.checked_add(BC_HDR_LEN).ok_or(EINVAL)?;
        if total > usize_of(s.inline_send)? {
            return Err(EIO);
        }
        let mut out = KVec::from_elem(0u8, total, GFP_KERNEL)?;
        let words = [
            call.xid(),
            crate::proto::msg::RPCRDMA_VERSION,
            BC_CREDITS,
            crate::proto::msg::Proc::Msg.to_u32(),
            0,
            0,
            0,
        ];
        for (i, w) in words.iter().enumerate() {
            let at = i * 4;
            out.get_mut(at..at + 4)
                .ok_or(EINVAL)?
                .copy_from_slice(&w.to_be_bytes());
        }
        call.read(0, out.get_mut(BC_HDR_LEN..).ok_or(EINVAL)?)?;
        stat_add(Stat::BcCalls, 1);
        self.send_bytes(&out, None)
    }

    /// `xpo_sendto`: sends the Reply in `rq_res`.
    pub(super) fn sendto(&self, rqst: &mut Rqst, ctxt: Option<&mut CallCtxt>) -> Result {
        let ctxt = ctxt.ok_or(EINVAL)?;
        let res = self.send_reply(rqst, ctxt);
        if let Err(e) = res {
            if e != ENOTCONN {
                crate::pr_warn_ratelimited!("svcrdma: cannot send a reply: {:?}\n", e);
                // Like C: drop the connection so the client retransmits.
                self.shared.link.close();
            }
        }
        res
    }

    fn send_reply(&self, rqst: &mut Rqst, ctxt: &CallCtxt) -> Result {
        let s = &self.shared;
        let hdr = decode_call(&ctxt.msg, &s.limits).map_err(|_| EINVAL)?;
        let xid = hdr.xid;
        let (lists, _) = hdr.body.chunks_and_inline().ok_or(EINVAL)?;
        let mut store = PclStore::for_lists(lists)?;
        let mut pcl =
            ParsedChunks::build(lists, &mut store.chunks, &mut store.segs).map_err(|_| EINVAL)?;
        if set_result_payloads(&mut pcl, &ctxt.payloads).is_err() {
            self.send_err_chunk(xid);
            return Ok(());
        }
        let xdr_len = rqst.res_len();

        // Result payloads through the Write chunks.
        for w in PayloadWrites::new(&pcl, xdr_len) {
            let w = w.map_err(|_| EINVAL)?;
            self.io()
                .write_chunk(pcl.segments(w.chunk), usize_of(w.len)?, |off, buf, len| {
                    let at = w.reply_offset(off).ok_or(EINVAL)?;
                    rqst.read_res_into_buf(at, buf, 0, len)
                })?;
        }

        // Everything else, inline or through the Reply chunk.
        let body = ReplyBody::new(&pcl, xdr_len).map_err(|_| EINVAL)?;
        let rest = body.len();
        let inv = if s.snd_w_inv { pcl.inv_rkey() } else { None };
        let mut hbuf = KVec::from_elem(0u8, ctxt.msg.len().saturating_add(16), GFP_KERNEL)?;
        if let Some(rc) = pcl.reply_chunk() {
            if !body.fits(rc) {
                self.send_err_chunk(xid);
                return Ok(());
            }
            self.io()
                .write_chunk(pcl.segments(rc), usize_of(rest)?, |off, buf, len| {
                    for run in body.runs(off, len) {
                        let run = run.map_err(|_| EINVAL)?;
                        rqst.read_res_into_buf(run.reply_offset, buf, run.at, run.len)?;
                    }
                    Ok(())
                })?;
            let n = pcl
                .encode_reply_header(xid, s.credits, rest, &mut hbuf)
                .map_err(|_| EINVAL)?;
            stat_add(Stat::ReplyChunk, 1);
            return self.send_bytes(hbuf.get(..n).ok_or(EINVAL)?, inv);
        }
        let n = pcl
            .encode_reply_header(xid, s.credits, 0, &mut hbuf)
            .map_err(|_| EINVAL)?;
        let Some(total) = body.inline_len(n, s.inline_send).map_err(|_| EINVAL)? else {
            // Too long for inline and the client gave no Reply chunk.
            self.send_err_chunk(xid);
            return Ok(());
        };
        let mut out = KVec::from_elem(0u8, total, GFP_KERNEL)?;
        out.get_mut(..n)
            .ok_or(EINVAL)?
            .copy_from_slice(hbuf.get(..n).ok_or(EINVAL)?);
        let dst = out.get_mut(n..).ok_or(EINVAL)?;
        for run in body.runs(0, dst.len()) {
            let run = run.map_err(|_| EINVAL)?;
            let end = run.at.checked_add(run.len).ok_or(EINVAL)?;
            rqst.read_res(run.reply_offset, dst.get_mut(run.at..end).ok_or(EINVAL)?)?;
        }
        self.send_bytes(&out, inv)
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
