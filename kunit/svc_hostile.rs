// SPDX-License-Identifier: GPL-2.0

//! Crafted calls against the server transport (svcrdma) of a running
//! `rpcrdma_rs.ko` with nfsd listening on RDMA port 20049 of the suite's
//! peer address (scenario `svc-hostile`).
//!
//! The suite connects with the verbs layer as an RPC-over-RDMA client and
//! sends malformed transport headers, checking each answer: `ERR_VERS`
//! (with the supported range 1..1) for a bad version, `ERR_CHUNK` for
//! broken chunk lists, nothing for `RDMA_DONE`; and after every bad call a
//! valid NFS `NULL` call on the same connection still gets its Reply.
//!
//! One case plays clients that never answer the server's RDMA Reads (a
//! long ACK timeout and their own queue pair in the error state): more of
//! them than nfsd has threads (the scenario sets 4) each send a Call with a
//! Read chunk, and another connection's NULL call must still be answered
//! within 2 s, and again once they are gone (audit finding 1). The
//! latencies are logged ("svc_hostile: NULL latency ...").
//!
//! One case plays a client with no Receives posted and no
//! receiver-not-ready retries: the server's Reply fails and its queue pair
//! goes to the error state with the CM connection up, and the server must
//! close the connection within 5 s (as C does on any completion that did
//! not succeed, flushed or not).
//!
//! The last case plays a client whose Replies can never be delivered (no
//! Receives posted, receiver-not-ready retries without limit): it sends
//! NULL calls until the server's send queue is full and its threads wait
//! for room, and another connection's NULL call must still be answered
//! within 5 s, and the server must close the stalled connection (audit
//! M2).
//!
//! Without a server (the `kunit` scenario) the connection is refused and
//! every case passes without checking anything; it logs
//! "svc_hostile: no server" so the scenario can tell.

use crate::proto::cm::ConnectPrivate;
use crate::rust::rdma::cm::{Addr, CmEvent, CmId};
use crate::rust::rdma::verbs::{
    CompletionHandler, ConnParam, DmaDir, Endpoint, EndpointConfig, MappedBuf, Segment, SendOp,
    WorkCompletion, WorkRequest,
};
use crate::verbs::expose_into;
use kernel::alloc::KVec;
use kernel::new_condvar;
use kernel::new_spinlock_irq;
use kernel::prelude::*;
use kernel::sync::{Arc, CondVar, CondVarTimeoutResult, SpinLockIrq};
use kernel::time::{msecs_to_jiffies, Delta, Instant, Monotonic};

/// nfsd's RDMA port.
const NFS_RDMA_PORT: u16 = 20049;

const STEP_MS: u32 = 20_000;

/// How long to wait for a Reply that must not come.
const SILENCE_MS: u32 = 1_500;

pub(crate) const RECV_LEN: usize = 4096;
pub(crate) const RECVS: usize = 8;

/// The server's address: the harness's server VM, 10.99.0.1.
const PEER_IPV4: u32 = 0x0a63_0001;

/// Receives delivered to the test thread: (slot, length) in order.
#[pin_data]
pub(crate) struct Inbox {
    #[pin]
    pub(crate) q: SpinLockIrq<KVec<(usize, u32)>>,
    #[pin]
    pub(crate) cv: CondVar,
}

pub(crate) struct RecvDone {
    pub(crate) slot: usize,
    pub(crate) inbox: Arc<Inbox>,
}

impl CompletionHandler for RecvDone {
    fn complete(&self, _wr: &Arc<WorkRequest<Self>>, wc: &WorkCompletion) {
        if wc.is_ok() {
            let _ = self
                .inbox
                .q
                .lock()
                .push((self.slot, wc.byte_len), GFP_ATOMIC);
            self.inbox.cv.notify_all();
        }
    }
}

/// Completed Sends, counted for the test thread: (all, failed).
#[pin_data]
pub(crate) struct Sent {
    #[pin]
    pub(crate) n: SpinLockIrq<u32>,
    #[pin]
    pub(crate) failed: SpinLockIrq<u32>,
    #[pin]
    pub(crate) cv: CondVar,
}

/// Waits until `n` Sends in all have completed; `false` after `ms`.
pub(crate) fn wait_sent(sent: &Sent, n: u32, ms: u32) -> Result<bool> {
    let mut left = msecs_to_jiffies(ms);
    let mut got = sent.n.lock();
    while *got < n {
        if left == 0 {
            return Ok(false);
        }
        match sent.cv.wait_interruptible_timeout(&mut got, left) {
            CondVarTimeoutResult::Timeout => left = 0,
            CondVarTimeoutResult::Woken { jiffies } => left = jiffies,
            CondVarTimeoutResult::Signal { .. } => return Err(EINTR),
        }
    }
    Ok(true)
}

/// The next message received on `ep` (its Receive posted again), or
/// `None` after `ms`.
pub(crate) fn recv(
    ep: &Endpoint,
    recvs: &[Arc<WorkRequest<RecvDone>>],
    inbox: &Inbox,
    ms: u32,
) -> Result<Option<KVec<u8>>> {
    let mut left = msecs_to_jiffies(ms);
    let mut q = inbox.q.lock();
    loop {
        if !q.is_empty() {
            let (slot, len) = q.remove(0).map_err(|_| EINVAL)?;
            drop(q);
            let wr = recvs.get(slot).ok_or(EINVAL)?;
            let buf = wr.buf(0).ok_or(EINVAL)?;
            let mut v = KVec::from_elem(0u8, (len as usize).min(RECV_LEN), GFP_KERNEL)?;
            buf.read(0, &mut v)?;
            ep.post_recv(wr.clone())?;
            return Ok(Some(v));
        }
        if left == 0 {
            return Ok(None);
        }
        match inbox.cv.wait_interruptible_timeout(&mut q, left) {
            CondVarTimeoutResult::Timeout => left = 0,
            CondVarTimeoutResult::Woken { jiffies } => left = jiffies,
            CondVarTimeoutResult::Signal { .. } => return Err(EINTR),
        }
    }
}

/// One end of a test connection, for either role: its endpoint with
/// Receives posted, what they deliver, and the count of completed Sends.
pub(crate) struct PeerEnd {
    pub(crate) ep: Endpoint,
    pub(crate) recvs: KVec<Arc<WorkRequest<RecvDone>>>,
    pub(crate) inbox: Arc<Inbox>,
    pub(crate) sent: Arc<Sent>,
}

impl PeerEnd {
    /// A small queue pair on `id` (one SGE, 16 work requests each way)
    /// with `recvs` (at most [`RECVS`]) Receives of [`RECV_LEN`] posted.
    pub(crate) fn new(id: CmId, global_rkey: bool, recvs: usize) -> Result<Self> {
        let ep = Endpoint::new(
            id,
            &EndpointConfig {
                max_send_wr: 16,
                max_recv_wr: 16,
                max_send_sge: 1,
                max_recv_sge: 1,
                unsafe_global_rkey: global_rkey,
                comp_vector: 0,
            },
        )?;
        let sent = Arc::pin_init(
            pin_init!(Sent {
                n <- new_spinlock_irq!(0, "hostile::sent"),
                failed <- new_spinlock_irq!(0, "hostile::sent_failed"),
                cv <- new_condvar!("hostile::sent"),
            }),
            GFP_KERNEL,
        )?;
        let inbox = Arc::pin_init(
            pin_init!(Inbox {
                q <- new_spinlock_irq!(KVec::new(), "hostile::inbox"),
                cv <- new_condvar!("hostile::inbox"),
            }),
            GFP_KERNEL,
        )?;
        let mut list = KVec::new();
        for slot in 0..recvs.min(RECVS) {
            let buf = ep.alloc_buf(RECV_LEN, DmaDir::FromDevice)?;
            let wr = WorkRequest::new(
                RecvDone {
                    slot,
                    inbox: inbox.clone(),
                },
                segs(buf, RECV_LEN)?,
            )?;
            ep.post_recv(wr.clone())?;
            list.push(wr, GFP_KERNEL)?;
        }
        Ok(Self {
            ep,
            recvs: list,
            inbox,
            sent,
        })
    }
}

pub(crate) struct SendDone {
    pub(crate) sent: Arc<Sent>,
}

impl CompletionHandler for SendDone {
    fn complete(&self, _wr: &Arc<WorkRequest<Self>>, wc: &WorkCompletion) {
        if !wc.is_ok() {
            *self.sent.failed.lock() += 1;
        }
        *self.sent.n.lock() += 1;
        self.sent.cv.notify_all();
    }
}

/// How a test client connects.
#[derive(Clone, Copy)]
struct Opts {
    /// RDMA Reads the server may have outstanding against us.
    responder_resources: u8,
    /// Local ACK timeout asked for (see `CmId::set_ack_timeout`).
    ack_timeout: Option<u8>,
    /// A protection domain with a global rkey, so Read chunks can name
    /// any mapped buffer.
    global_rkey: bool,
    /// Receives posted: none makes every Send of the server to us meet a
    /// receiver-not-ready NAK.
    recvs: usize,
    /// The server's retries after such a NAK (7: without limit on rxe).
    rnr_retry: u8,
}

const NORMAL: Opts = Opts {
    responder_resources: 4,
    ack_timeout: None,
    global_rkey: false,
    recvs: RECVS,
    rnr_retry: 0,
};

/// A client connection to the server under test.
///
/// Fields drop in order: the queue pair is drained and destroyed before
/// the buffers in `exposed` are freed.
struct Client {
    ep: Endpoint,
    recvs: KVec<Arc<WorkRequest<RecvDone>>>,
    inbox: Arc<Inbox>,
    sent: Arc<Sent>,
    next_xid: u32,
    /// Buffers the server was given an address and key for
    /// ([`Client::expose`]): its Reads may reach one until this end of
    /// the connection is gone.
    exposed: KVec<Arc<MappedBuf>>,
}

pub(crate) fn segs(buf: Arc<MappedBuf>, len: usize) -> Result<KVec<Segment>> {
    let mut v = KVec::new();
    v.push(
        Segment {
            buf,
            offset: 0,
            len,
        },
        GFP_KERNEL,
    )?;
    Ok(v)
}

impl Client {
    /// Connects; `Ok(None)` when no server listens.
    fn connect() -> Result<Option<Self>> {
        Self::connect_with(NORMAL)
    }

    fn connect_with(opts: Opts) -> Result<Option<Self>> {
        let addr = Addr::V4(PEER_IPV4.to_be_bytes(), NFS_RDMA_PORT);
        let id = CmId::new()?;
        id.resolve_addr(addr, 5000)?;
        if !matches!(id.wait_event(STEP_MS)?, CmEvent::AddrResolved) {
            return Ok(None);
        }
        if let Some(t) = opts.ack_timeout {
            id.set_ack_timeout(t)?;
        }
        id.resolve_route(5000)?;
        if !matches!(id.wait_event(STEP_MS)?, CmEvent::RouteResolved) {
            return Ok(None);
        }
        let PeerEnd {
            ep,
            recvs,
            inbox,
            sent,
        } = PeerEnd::new(id, opts.global_rkey, opts.recvs)?;
        // A client whose chunks name the PD's global rkey cannot let the
        // server invalidate them: it must not accept Send With Invalidate
        // (the Reply would fail at this end with a remote invalid request).
        let pdata = ConnectPrivate::new(4096, 4096, !opts.global_rkey).to_bytes();
        ep.connect(&ConnParam {
            private_data: &pdata,
            responder_resources: opts.responder_resources,
            retry_count: 6,
            rnr_retry_count: opts.rnr_retry,
            ..ConnParam::default()
        })?;
        match ep.wait_event(STEP_MS)? {
            CmEvent::Established { .. } => {}
            _ => return Ok(None),
        }
        pr_info!("svc_hostile: connected to the server\n");
        Ok(Some(Self {
            ep,
            recvs,
            inbox,
            sent,
            next_xid: 0x5eed_0000,
            exposed: KVec::new(),
        }))
    }

    /// The address and key the server reaches `buf` at, keeping `buf`
    /// until the connection is gone ([`expose_into`]).
    fn expose(&mut self, buf: &Arc<MappedBuf>) -> Result<(u64, u32)> {
        expose_into(&mut self.exposed, buf, GFP_KERNEL)?.ok_or(EINVAL)
    }

    fn xid(&mut self) -> u32 {
        self.next_xid = self.next_xid.wrapping_add(1);
        self.next_xid
    }

    fn send(&self, msg: &[u8]) -> Result {
        let buf = self.ep.alloc_buf(msg.len(), DmaDir::ToDevice)?;
        buf.write(0, msg)?;
        let wr = WorkRequest::new(
            SendDone {
                sent: self.sent.clone(),
            },
            segs(buf, msg.len())?,
        )?;
        self.ep.post_send(wr, SendOp::Send)
    }

    /// Waits until `n` Sends in all have completed; `false` after `ms`.
    fn wait_sent(&self, n: u32, ms: u32) -> Result<bool> {
        wait_sent(&self.sent, n, ms)
    }

    /// The next received message, or `None` after `ms`.
    fn recv(&self, ms: u32) -> Result<Option<KVec<u8>>> {
        recv(&self.ep, &self.recvs, &self.inbox, ms)
    }

    /// A valid NFSv3 NULL call in an RDMA_MSG; checks its Reply.
    fn null_call_works(&mut self) -> Result<bool> {
        self.null_call_within(STEP_MS)
    }

    /// Like [`Self::null_call_works`], with the Reply due within `ms`.
    fn null_call_within(&mut self, ms: u32) -> Result<bool> {
        Ok(self.null_reply_within(ms)?.is_some())
    }

    /// Sends an NFSv3 NULL call; its valid Reply, if one came within `ms`.
    fn null_reply_within(&mut self, ms: u32) -> Result<Option<KVec<u8>>> {
        let xid = self.xid();
        self.send(&null_call(xid)?)?;
        let Some(r) = self.recv(ms)? else {
            pr_err!("svc_hostile: no reply to NULL within {} ms\n", ms);
            return Ok(None);
        };
        // xid, vers 1, credits, RDMA_MSG, 3 empty lists, then the RPC reply
        // with the same xid, REPLY (1), MSG_ACCEPTED (0).
        let ok = word(&r, 0) == Some(xid)
            && word(&r, 1) == Some(1)
            && word(&r, 3) == Some(0)
            && word(&r, 7) == Some(xid)
            && word(&r, 8) == Some(1)
            && word(&r, 9) == Some(0);
        if !ok {
            pr_err!("svc_hostile: bad reply to NULL ({} bytes)\n", r.len());
            return Ok(None);
        }
        Ok(Some(r))
    }

    /// Sends `words` (the first is replaced by a fresh xid) and returns the
    /// answer, if any arrives within `ms`.
    fn exchange(&mut self, words: &[u32], ms: u32) -> Result<(u32, Option<KVec<u8>>)> {
        let xid = self.xid();
        let mut m = KVec::new();
        for (i, w) in words.iter().enumerate() {
            let w = if i == 0 { xid } else { *w };
            m.extend_from_slice(&u32::to_be_bytes(w), GFP_KERNEL)?;
        }
        self.send(&m)?;
        Ok((xid, self.recv(ms)?))
    }
}

/// Connections that never answer the server's RDMA Reads: more than the
/// nfsd threads the scenario starts (4).
const STALLED: usize = 6;

/// A stalled call's Read chunk: this many segments of [`STALL_SEG_LEN`]
/// bytes, all naming one buffer (256 KiB in all: nfsd's largest Call in a
/// 2 GiB VM is 512 KiB). The server issues them one at a time (we grant it
/// one outstanding Read), so at most the first can be answered before our
/// queue pair is in the error state.
const STALL_SEGS: u32 = 4;
const STALL_SEG_LEN: u32 = 64 * 1024;

/// How a stalling client connects: one outstanding Read, and an ACK
/// timeout of 4.096 us * 2^24 = 69 s, which the server's queue pair
/// inherits: it would retransmit an unanswered Read only after a minute,
/// and give up after 7 tries.
const STALLER: Opts = Opts {
    responder_resources: 1,
    ack_timeout: Some(24),
    global_rkey: true,
    recvs: RECVS,
    rnr_retry: 0,
};

/// Longest a NULL call may take on a connection of its own while other
/// connections' Reads are stalled.
const NULL_DUE_MS: u32 = 2_000;

impl Client {
    /// Sends an NFSv3 NULL Call carrying a 256 KiB Read chunk (position 40,
    /// after the RPC header) that names `src`, then stops answering: once
    /// the Send completed, the queue pair goes to the error state, where
    /// the server's Read Requests are dropped without a reply.
    fn send_stalled_call(&mut self, src: &Arc<MappedBuf>) -> Result<bool> {
        let (addr, rkey) = self.expose(src)?;
        let hi = u32::try_from(addr >> 32).map_err(|_| EINVAL)?;
        let lo = u32::try_from(addr & 0xffff_ffff).map_err(|_| EINVAL)?;
        let xid = self.xid();
        let mut words = KVec::new();
        // Transport header: RDMA_MSG, then the Read list.
        words.extend_from_slice(&[xid, 1, 32, 0], GFP_KERNEL)?;
        for _ in 0..STALL_SEGS {
            words.extend_from_slice(&[1, 40, rkey, STALL_SEG_LEN, hi, lo], GFP_KERNEL)?;
        }
        // End of the Read list, no Write list, no Reply chunk; the RPC
        // Call: NFSv3 NULL, AUTH_NONE.
        words.extend_from_slice(&[0, 0, 0, xid, 0, 2, 100003, 3, 0, 0, 0, 0, 0], GFP_KERNEL)?;
        let mut m = KVec::new();
        for w in words.iter() {
            m.extend_from_slice(&w.to_be_bytes(), GFP_KERNEL)?;
        }
        self.send(&m)?;
        if !self.wait_sent(1, STEP_MS)? {
            pr_err!("svc_hostile: stalled call not sent\n");
            return Ok(false);
        }
        self.ep.force_error()?;
        Ok(true)
    }
}

/// A call chunk of 4 MiB + 4 KiB (nfsd's largest Call with
/// `max_block_size` 4 MiB is 4 MiB + 12 KiB; above the largest kmalloc):
/// 64 segments (the most a Read list may have) of this many bytes, all
/// naming one buffer that holds an NFSv3 NULL Call.
const BIG_SEG_LEN: u32 = (4 * 1024 * 1024 + 4096) / 64;

const BIG: Opts = Opts {
    responder_resources: 4,
    ack_timeout: None,
    global_rkey: true,
    recvs: RECVS,
    rnr_retry: 0,
};

impl Client {
    /// Sends an RDMA_NOMSG whose call chunk is 4 MiB + 4 KiB; returns its
    /// XID and the answer.
    fn send_big_call_chunk(&mut self, src: &Arc<MappedBuf>) -> Result<(u32, Option<KVec<u8>>)> {
        let (addr, rkey) = self.expose(src)?;
        let hi = u32::try_from(addr >> 32).map_err(|_| EINVAL)?;
        let lo = u32::try_from(addr & 0xffff_ffff).map_err(|_| EINVAL)?;
        let xid = self.xid();
        // The Call (NFSv3 NULL, AUTH_NONE) at the start of every segment;
        // the rest of the message is its (ignored) arguments.
        let mut call = KVec::new();
        for w in [xid, 0, 2, 100003, 3, 0, 0, 0, 0, 0] {
            call.extend_from_slice(&u32::to_be_bytes(w), GFP_KERNEL)?;
        }
        src.write(0, &call)?;
        let mut words = KVec::new();
        words.extend_from_slice(&[xid, 1, 32, 1], GFP_KERNEL)?;
        for _ in 0..64 {
            words.extend_from_slice(&[1, 0, rkey, BIG_SEG_LEN, hi, lo], GFP_KERNEL)?;
        }
        words.extend_from_slice(&[0, 0, 0], GFP_KERNEL)?;
        let mut m = KVec::new();
        for w in words.iter() {
            m.extend_from_slice(&w.to_be_bytes(), GFP_KERNEL)?;
        }
        self.send(&m)?;
        Ok((xid, self.recv(STEP_MS)?))
    }
}

/// How a client whose Replies can never be delivered connects (audit
/// M2): no Receives posted, and a receiver-not-ready retry count of 7,
/// which the server's queue pair inherits and rxe takes as "retry
/// forever". Each of the server's Sends to it then neither completes nor
/// fails. The ACK timeout of 69 s (see [`STALLER`]) keeps them outstanding
/// for minutes too should our queue pair fail first (our own Sends may
/// meet the server's NAK once it stops taking Calls: the server accepts
/// with no RNR retries).
const SEND_STALLER: Opts = Opts {
    responder_resources: 4,
    ack_timeout: Some(24),
    global_rkey: false,
    recvs: 0,
    rnr_retry: 7,
};

/// A client that posts no Receives and allows no receiver-not-ready
/// retries: the server's first Reply to it fails (RNR retry exceeded) and
/// the server's queue pair goes to the error state, with the connection
/// still up as far as the CM knows.
const REPLY_FAILER: Opts = Opts {
    recvs: 0,
    rnr_retry: 0,
    ..NORMAL
};

/// Longest the server may take to close a connection whose queue pair
/// went to the error state (it closes at the failed Send's completion).
const FAILED_QP_CLOSE_MS: u32 = 5_000;

/// How long the client waits after connecting before its Call: the
/// server's CM must have taken our RTU by the time the server disconnects,
/// or it sends no DREQ (the IB CM sends one only once established,
/// `cm_send_dreq_locked`) and we are not told.
const RTU_SETTLE_MS: i64 = 500;

/// Calls sent at once by a client that floods the server (at most our
/// send queue's 16), and the pause after each burst: at most 160 Calls a
/// second, so the server's threads take them as fast as they come, until
/// its send queue is full.
const FLOOD_BURST: u32 = 8;
const FLOOD_PAUSE_MS: i64 = 50;

/// Longest another connection's NULL call may take while a connection's
/// Replies wait for a send queue that never drains (audit M2's bound).
const SEND_STALL_NULL_DUE_MS: u32 = 5_000;

/// The server's send queue slots for a credit grant of `credits`
/// (`svcrdma/accept.rs`: 4 x the receive queue of the credits, 2
/// backchannel Receives, a batch of 7 and the drain, plus 64), the device
/// aside.
fn server_sq_depth(credits: u32) -> u32 {
    credits
        .saturating_add(10)
        .saturating_mul(4)
        .saturating_add(64)
}

impl Client {
    /// Sends up to `max` NFSv3 NULL calls in bursts of [`FLOOD_BURST`],
    /// each burst sent once the previous one completed (the server's
    /// queue pair took it), until `enough` were taken, and stops at the
    /// first Send that fails (the server stopped posting Receives) or
    /// that the server does not take within 2 s: (taken, not taken).
    fn flood_null_calls(&mut self, enough: u32, max: u32) -> Result<(u32, u32)> {
        let mut posted = 0u32;
        while posted < max.min(enough) {
            let burst = FLOOD_BURST.min(max - posted);
            for _ in 0..burst {
                let xid = self.xid();
                self.send(&null_call(xid)?)?;
            }
            posted += burst;
            let done = self.wait_sent(posted, 2_000)?;
            if !done || *self.sent.failed.lock() > 0 {
                break;
            }
            kernel::time::delay::fsleep(Delta::from_millis(FLOOD_PAUSE_MS));
        }
        let completed = *self.sent.n.lock();
        let failed = *self.sent.failed.lock();
        let taken = completed.saturating_sub(failed);
        Ok((taken, posted.saturating_sub(taken)))
    }

    /// Whether the server disconnected us within `ms`.
    fn disconnected_within(&self, ms: u32) -> Result<bool> {
        let t = Instant::<Monotonic>::now();
        loop {
            let left = i64::from(ms).saturating_sub(t.elapsed().as_millis());
            if left <= 0 {
                return Ok(false);
            }
            match self.ep.wait_event(u32::try_from(left).unwrap_or(0)) {
                Ok(CmEvent::Disconnected) => return Ok(true),
                Ok(_) => {}
                Err(e) if e == ETIMEDOUT => return Ok(false),
                Err(e) => return Err(e),
            }
        }
    }
}

/// Times a NULL call due within [`NULL_DUE_MS`]: (answered, milliseconds).
fn timed_null(c: &mut Client) -> Result<(bool, i64)> {
    let t = Instant::<Monotonic>::now();
    let ok = c.null_call_within(NULL_DUE_MS)?;
    Ok((ok, t.elapsed().as_millis()))
}

/// A valid NFSv3 NULL call in an RDMA_MSG.
fn null_call(xid: u32) -> Result<KVec<u8>> {
    let mut m = KVec::new();
    for w in [
        xid, 1, 32, 0, 0, 0, 0, // transport header: MSG, empty lists
        xid, 0, 2, 100003, 3, 0, // RPC call: NFSv3 NULL
        0, 0, 0, 0, // AUTH_NONE credential and verifier
    ] {
        m.extend_from_slice(&u32::to_be_bytes(w), GFP_KERNEL)?;
    }
    Ok(m)
}

pub(crate) fn word(b: &[u8], i: usize) -> Option<u32> {
    let s = b.get(i * 4..i * 4 + 4)?;
    Some(u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
}

/// RDMA_ERROR (4) / ERR_CHUNK (2) for `xid`.
fn is_err_chunk(r: &Option<KVec<u8>>, xid: u32) -> bool {
    match r {
        Some(r) => word(r, 0) == Some(xid) && word(r, 3) == Some(4) && word(r, 4) == Some(2),
        None => false,
    }
}

/// Runs `f` on a fresh connection, then checks the connection still serves
/// a valid call. Passes trivially without a server.
fn with_client(f: impl FnOnce(&mut Client) -> Result<bool>) -> Result<bool> {
    let Some(mut c) = Client::connect()? else {
        pr_info!("svc_hostile: no server\n");
        return Ok(true);
    };
    let ok = f(&mut c)?;
    let alive = c.null_call_works()?;
    Ok(ok && alive)
}

#[kunit_tests(rpcrdma_rs_svc_hostile)]
mod tests {
    use super::*;

    #[test]
    fn valid_null_call_is_answered() -> Result {
        assert!(with_client(|_| Ok(true))?);
        Ok(())
    }

    #[test]
    fn bad_version_gets_err_vers() -> Result {
        assert!(with_client(|c| {
            let (xid, r) = c.exchange(&[0, 2, 32, 0, 0, 0, 0, 0], STEP_MS)?;
            let Some(r) = r else { return Ok(false) };
            // xid, vers (echoed), credits, RDMA_ERROR, ERR_VERS, low 1, high 1
            Ok(word(&r, 0) == Some(xid)
                && word(&r, 3) == Some(4)
                && word(&r, 4) == Some(1)
                && word(&r, 5) == Some(1)
                && word(&r, 6) == Some(1))
        })?);
        Ok(())
    }

    #[test]
    fn unknown_procedure_gets_err_chunk() -> Result {
        assert!(with_client(|c| {
            let (xid, r) = c.exchange(&[0, 1, 32, 7, 0, 0, 0], STEP_MS)?;
            Ok(is_err_chunk(&r, xid))
        })?);
        Ok(())
    }

    #[test]
    fn truncated_header_gets_err_chunk() -> Result {
        assert!(with_client(|c| {
            let (xid, r) = c.exchange(&[0, 1, 32], STEP_MS)?;
            Ok(is_err_chunk(&r, xid))
        })?);
        Ok(())
    }

    #[test]
    fn bad_list_discriminator_gets_err_chunk() -> Result {
        assert!(with_client(|c| {
            let (xid, r) = c.exchange(&[0, 1, 32, 0, 2, 0, 0], STEP_MS)?;
            Ok(is_err_chunk(&r, xid))
        })?);
        Ok(())
    }

    #[test]
    fn huge_write_segment_count_gets_err_chunk() -> Result {
        assert!(with_client(|c| {
            // Write list: one chunk claiming 0x40000000 segments.
            let (xid, r) = c.exchange(&[0, 1, 32, 0, 0, 1, 0x4000_0000, 1, 2, 0, 0], STEP_MS)?;
            Ok(is_err_chunk(&r, xid))
        })?);
        Ok(())
    }

    #[test]
    fn misaligned_read_position_gets_err_chunk() -> Result {
        assert!(with_client(|c| {
            // Read list: position 3, handle 1, length 8, offset 0; then the
            // end of the list, empty Write list and Reply chunk, 8 bytes.
            let (xid, r) = c.exchange(&[0, 1, 32, 0, 1, 3, 1, 8, 0, 0, 0, 0, 0, 0, 0], STEP_MS)?;
            Ok(is_err_chunk(&r, xid))
        })?);
        Ok(())
    }

    #[test]
    fn read_position_beyond_message_gets_err_chunk() -> Result {
        assert!(with_client(|c| {
            let (xid, r) =
                c.exchange(&[0, 1, 32, 0, 1, 4096, 1, 8, 0, 0, 0, 0, 0, 0, 0], STEP_MS)?;
            Ok(is_err_chunk(&r, xid))
        })?);
        Ok(())
    }

    #[test]
    fn nomsg_without_call_chunk_gets_err_chunk() -> Result {
        assert!(with_client(|c| {
            let (xid, r) = c.exchange(&[0, 1, 32, 1, 0, 0, 0], STEP_MS)?;
            Ok(is_err_chunk(&r, xid))
        })?);
        Ok(())
    }

    #[test]
    fn zero_segment_reply_chunk_gets_err_chunk() -> Result {
        assert!(with_client(|c| {
            // Empty Read and Write lists, a Reply chunk with no segments.
            let (xid, r) = c.exchange(&[0, 1, 32, 0, 0, 0, 1, 0], STEP_MS)?;
            Ok(is_err_chunk(&r, xid))
        })?);
        Ok(())
    }

    #[test]
    fn call_chunk_in_rdma_msg_gets_err_chunk() -> Result {
        assert!(with_client(|c| {
            // RDMA_MSG with a position-zero Read segment (RFC 8166 s. 3.5.3).
            let (xid, r) = c.exchange(&[0, 1, 32, 0, 1, 0, 1, 64, 0, 0, 0, 0, 0, 0, 0], STEP_MS)?;
            Ok(is_err_chunk(&r, xid))
        })?);
        Ok(())
    }

    #[test]
    fn rdma_msgp_gets_err_chunk() -> Result {
        assert!(with_client(|c| {
            let (xid, r) = c.exchange(&[0, 1, 32, 2, 4, 1024, 0, 0, 0, 0, 0], STEP_MS)?;
            Ok(is_err_chunk(&r, xid))
        })?);
        Ok(())
    }

    #[test]
    fn rdma_done_is_dropped() -> Result {
        assert!(with_client(|c| {
            let (_, r) = c.exchange(&[0, 1, 32, 3], SILENCE_MS)?;
            Ok(r.is_none())
        })?);
        Ok(())
    }

    #[test]
    fn stalled_reads_leave_other_connections_served() -> Result {
        let Some(mut normal) = Client::connect()? else {
            pr_info!("svc_hostile: no server\n");
            return Ok(());
        };
        assert!(normal.null_call_works()?);
        let mut stalled = KVec::new();
        let mut all_sent = true;
        for i in 0..STALLED {
            let Some(mut c) = Client::connect_with(STALLER)? else {
                pr_err!("svc_hostile: stalled connection {} not accepted\n", i);
                return Err(ENOTCONN);
            };
            let src = c.ep.alloc_buf(STALL_SEG_LEN as usize, DmaDir::ToDevice)?;
            all_sent &= c.send_stalled_call(&src)?;
            stalled.push(c, GFP_KERNEL)?;
        }
        // Time for the server to take every call and post its Reads.
        kernel::time::delay::fsleep(Delta::from_millis(500));
        let (during_ok, during_ms) = timed_null(&mut normal)?;
        pr_info!(
            "svc_hostile: NULL latency with {} stalled connections: {} ms\n",
            STALLED,
            during_ms
        );
        // Closing them must flush their Reads and free what they held.
        drop(stalled);
        kernel::time::delay::fsleep(Delta::from_millis(500));
        let (after_ok, after_ms) = timed_null(&mut normal)?;
        pr_info!(
            "svc_hostile: NULL latency after the stalled connections closed: {} ms\n",
            after_ms
        );
        // Asserted once every connection is gone: a failed assertion ends
        // the test thread without unwinding, and a connection it held would
        // outlive the module (its CM identifier's next event would then run
        // the module's freed code).
        drop(normal);
        assert!(all_sent);
        assert!(during_ok);
        assert!(after_ok);
        Ok(())
    }

    #[test]
    fn call_chunk_above_kmalloc_max_is_served_or_refused() -> Result {
        assert!(with_client(|_| Ok(true))?);
        let Some(mut c) = Client::connect_with(BIG)? else {
            return Ok(());
        };
        let src = c.ep.alloc_buf(BIG_SEG_LEN as usize, DmaDir::ToDevice)?;
        let (xid, r) = c.send_big_call_chunk(&src)?;
        let refused = is_err_chunk(&r, xid);
        let served = r.as_ref().is_some_and(|r| {
            word(r, 0) == Some(xid) && word(r, 7) == Some(xid) && word(r, 8) == Some(1)
        });
        let mut words = [0u32; 9];
        if let Some(r) = &r {
            for (i, w) in words.iter_mut().enumerate() {
                *w = word(r, i).unwrap_or(u32::MAX);
            }
        }
        pr_info!(
            "svc_hostile: 4 MiB + 4 KiB call chunk: {} (answer {}: {:x?})\n",
            if served {
                "served"
            } else if refused {
                "ERR_CHUNK"
            } else {
                "no valid answer"
            },
            r.as_ref().map_or(0, |r| r.len()),
            words
        );
        let still_serves = c.null_call_works()?;
        // Asserted only once the connection and its buffer are gone: a
        // failed assertion ends the test thread without unwinding.
        drop(src);
        drop(c);
        assert!(served || refused);
        assert!(still_serves);
        Ok(())
    }

    #[test]
    fn failed_rdma_read_drops_only_that_connection() -> Result {
        let Some(mut c) = Client::connect()? else {
            pr_info!("svc_hostile: no server\n");
            return Ok(());
        };
        // NOMSG with a call chunk at a handle the client never registered:
        // the server's RDMA Read fails and it closes this connection
        // without answering the call.
        let (_, r) = c.exchange(&[0, 1, 32, 1, 1, 0, 0xdead, 64, 0, 0, 0, 0, 0], SILENCE_MS)?;
        drop(c);
        assert!(r.is_none());
        // Other connections keep being served.
        assert!(with_client(|_| Ok(true))?);
        Ok(())
    }

    /// A queue pair the server did not fail itself: its Reply's Send fails
    /// and every other work request is flushed, the CM connection still
    /// up. The server must close the connection, as C does on any
    /// completion that did not succeed, flushed or not; otherwise the
    /// client gets its Replies only once it gives up on the connection
    /// (its RPC timeout, 60 s with `timeo=600`, or its own retries). rxe
    /// fails a server's queue pair that way after a Read response it did
    /// not expect (the many-conns scenario's rxe warning).
    #[test]
    fn failed_queue_pair_closes_the_connection() -> Result {
        let Some(mut c) = Client::connect_with(REPLY_FAILER)? else {
            pr_info!("svc_hostile: no server\n");
            return Ok(());
        };
        kernel::time::delay::fsleep(Delta::from_millis(RTU_SETTLE_MS));
        let xid = c.xid();
        c.send(&null_call(xid)?)?;
        let taken = c.wait_sent(1, STEP_MS)? && *c.sent.failed.lock() == 0;
        let t = Instant::<Monotonic>::now();
        let closed = c.disconnected_within(FAILED_QP_CLOSE_MS)?;
        pr_info!(
            "svc_hostile: connection whose Reply failed: closed by the server {} ({} ms)\n",
            closed,
            t.elapsed().as_millis()
        );
        drop(c);
        assert!(taken);
        assert!(closed);
        // Other connections keep being served.
        assert!(with_client(|_| Ok(true))?);
        Ok(())
    }

    /// Audit M2. Last: without the send queue's progress bound the
    /// server's threads stay parked and nothing after this is served.
    #[test]
    fn stalled_sends_leave_other_connections_served() -> Result {
        let Some(mut normal) = Client::connect()? else {
            pr_info!("svc_hostile: no server\n");
            return Ok(());
        };
        // The server's grant (the same for every connection) sizes its
        // send queue.
        let Some(r) = normal.null_reply_within(STEP_MS)? else {
            pr_err!("svc_hostile: no reply to the first NULL call\n");
            return Err(EIO);
        };
        let credits = word(&r, 2).unwrap_or(0);
        let Some(mut c) = Client::connect_with(SEND_STALLER)? else {
            pr_err!("svc_hostile: send-stalled connection not accepted\n");
            return Err(ENOTCONN);
        };
        // Enough to fill the server's send queue and leave its 4 threads
        // waiting, with a burst to spare; fewer than the server has
        // Receives for beyond that, so our Sends never meet its NAK. At
        // most twice the send queue, in case it is larger than thought.
        let sq = server_sq_depth(credits);
        let enough = sq.saturating_add(2 * FLOOD_BURST);
        let (taken, refused) = c.flood_null_calls(enough, sq.saturating_mul(2))?;
        pr_info!(
            "svc_hostile: send-stalled connection: credits {}, send queue about {}, {} NULL calls taken, {} not\n",
            credits,
            server_sq_depth(credits),
            taken,
            refused
        );
        let t = Instant::<Monotonic>::now();
        let ok = normal.null_call_within(SEND_STALL_NULL_DUE_MS)?;
        pr_info!(
            "svc_hostile: NULL latency beside a connection whose Replies cannot be sent: {} ms{}\n",
            t.elapsed().as_millis(),
            if ok { "" } else { " (no reply)" }
        );
        let closed = c.disconnected_within(STEP_MS)?;
        pr_info!(
            "svc_hostile: send-stalled connection closed by the server: {}\n",
            if closed { "yes" } else { "no" }
        );
        // Asserted once both connections are gone (see
        // `stalled_reads_leave_other_connections_served`).
        drop(c);
        drop(normal);
        assert!(ok);
        assert!(closed);
        Ok(())
    }
}
