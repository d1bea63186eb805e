// SPDX-License-Identifier: GPL-2.0

//! The client's registration pool and planner on a real (soft-RoCE)
//! device: a fast-registration MR grants exactly the access it was
//! registered for and LOCAL_INV revokes it; a REG_MR chained ahead of a
//! Send is in force when the Send arrives; the planner, fed the device's
//! limits, keeps 1 MiB READ and WRITE payloads in one chunk each; a
//! cached registration (`memreg=cache`'s entries) serves the peer again
//! and again without a new registration, keeps its pages after their owner
//! let them go, and LOCAL_INV (an eviction) revokes it.

use crate::proto::planner::{
    plan, CallStrategy, DeviceCaps, ResultStrategy, RpcShape, TransportParams, XdrBufShape,
};
use crate::rust::module::live;
use crate::rust::rdma::device;
use crate::rust::rdma::mr::MrSegment;
use crate::rust::rdma::recv_ring::{RecvRing, RecvRingOwner};
use crate::rust::rdma::ring_owner::impl_ring_in;
use crate::rust::rdma::run_mr::{refused_releases, RunMr};
use crate::rust::rdma::send_chain::SendChain;
use crate::rust::rdma::send_ring::{SendRing, SendRingHead, SendRingOwner};
use crate::rust::rdma::verbs::{
    CompletionHandler, DmaDir, Endpoint, MappedBuf, Segment, SendOp, SgEntry, WorkCompletion,
    WorkRequest, MAX_SGE,
};
use crate::rust::sunrpc::xprt::{post_local_inv, post_send_after_regs, Mr};
use crate::verbs::{client_op, connect_pair, one_segment, op_on, pattern, wait_for, Pair, Waiter};
use kernel::alloc::KVec;
use kernel::page::{Page, PAGE_SIZE};
use kernel::prelude::*;
use kernel::sync::atomic::{Atomic, Relaxed};
use kernel::sync::{Arc, ArcBorrow, CondVar, CondVarTimeoutResult, SpinLock};
use kernel::time::msecs_to_jiffies;
use kernel::{new_condvar, new_spinlock};

const LEN: usize = 8192;

/// Completions of a batch of Sends: how many ran, whether in order, and
/// how many work requests their completions accounted for
/// (`WorkCompletion::covers`, which must add up to the count).
#[pin_data]
pub(crate) struct Log {
    #[pin]
    state: SpinLock<(u32, bool, u32)>,
    #[pin]
    cv: CondVar,
}

impl Log {
    pub(crate) fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                state <- new_spinlock!((0, true, 0), "rpcrdma_rs_kunit::log"),
                cv <- new_condvar!("rpcrdma_rs_kunit::log"),
            }),
            GFP_KERNEL,
        )
    }

    pub(crate) fn record(&self, n: u32, covers: u32) {
        let mut st = self.state.lock();
        if st.0 != n {
            st.1 = false;
        }
        st.0 += 1;
        st.2 += covers;
        self.cv.notify_all();
    }

    pub(crate) fn covered(&self) -> u32 {
        self.state.lock().2
    }

    pub(crate) fn count(&self) -> u32 {
        self.state.lock().0
    }

    pub(crate) fn in_order(&self) -> bool {
        self.state.lock().1
    }

    /// Waits (at most a few seconds) until `n` completions ran.
    pub(crate) fn wait_for(&self, n: u32) -> Result<u32> {
        let mut st = self.state.lock();
        let mut left = msecs_to_jiffies(20_000);
        while st.0 < n && left > 0 {
            match self.cv.wait_interruptible_timeout(&mut st, left) {
                CondVarTimeoutResult::Timeout => left = 0,
                CondVarTimeoutResult::Woken { jiffies } => left = jiffies,
                CondVarTimeoutResult::Signal { .. } => return Err(EINTR),
            }
        }
        Ok(st.0)
    }
}

/// The handler of a batched Send: logs its number.
pub(crate) struct Counted {
    pub(crate) log: Arc<Log>,
    pub(crate) n: u32,
}

impl CompletionHandler for Counted {
    fn complete(&self, _wr: &Arc<WorkRequest<Self>>, wc: &WorkCompletion) {
        self.log.record(self.n, wc.covers);
    }
}

/// The owner of a Send ring, as a client connection is: logs each retired
/// context's number.
struct RingOwner {
    ring: SendRing<RingOwner>,
    log: Arc<Log>,
}

impl SendRingOwner for RingOwner {
    type Data = u32;

    fn retire(&self, n: &mut u32) {
        self.log.record(*n, 1);
    }

    fn failed(&self, wc: &WorkCompletion) {
        pr_err!("ring Send failed: status {}\n", wc.status);
    }
}

impl_ring_in!(RingOwner, ring: SendRing<RingOwner>);

/// A ring of `n` Send contexts on the client's endpoint signaling at least
/// every `every`th, and its head.
fn ring_on(
    pair: &Pair,
    n: u32,
    every: u32,
) -> Result<(Arc<RingOwner>, SendRingHead<RingOwner>, Arc<Log>)> {
    let log = Log::new()?;
    let owner = Arc::new(
        RingOwner {
            ring: SendRing::new(n, every)?,
            log: log.clone(),
        },
        GFP_KERNEL,
    )?;
    owner.ring.provision(&pair.client, 64)?;
    // Once.
    assert!(owner.ring.provision(&pair.client, 64).is_err());
    let head = owner.ring.take_head().ok_or(EINVAL)?;
    // One head per ring.
    assert!(owner.ring.take_head().is_none());
    Ok((owner, head, log))
}

/// Takes the next context of `owner`'s ring as number `n`, writes `msg`
/// into its buffer and posts it; `Ok(true)` when it went unsignaled.
fn ring_send(
    pair: &Pair,
    owner: &RingOwner,
    head: &mut SendRingHead<RingOwner>,
    n: u32,
    msg: &[u8],
    signal: bool,
) -> Result<bool> {
    let mut ctxt = owner.ring.next(head).ok_or(ENOBUFS)?;
    *ctxt.data() = n;
    ctxt.fill(64, |out| {
        out.get_mut(..msg.len()).ok_or(EINVAL)?.copy_from_slice(msg);
        Ok((msg.len(), 0))
    })?;
    ctxt.post(&pair.client, signal)
}

/// Posts `n` Receives of 64 bytes on the server; their waiters.
pub(crate) fn server_recvs(pair: &Pair, n: usize) -> Result<KVec<Arc<Waiter>>> {
    let mut recvs = KVec::new();
    for _ in 0..n {
        let buf = pair.server.alloc_buf(64, DmaDir::FromDevice)?;
        let wait = Waiter::new()?;
        pair.server
            .post_recv(WorkRequest::new(wait.clone(), one_segment(&buf, 64)?)?)?;
        recvs.push(wait, GFP_KERNEL)?;
    }
    Ok(recvs)
}

/// The owner of a Receive ring on the client's endpoint of `pair`, as a
/// client connection is: logs the number each message carries in its first
/// byte, and counts the failed (flushed) Receives and the messages its
/// ring's variant handled.
struct RecvOwner {
    pair: Pair,
    ring: RecvRing<RecvOwner>,
    log: Arc<Log>,
    flushed: Atomic<u32>,
    variant_msgs: Atomic<u32>,
}

impl RecvRingOwner for RecvOwner {
    fn received<const VARIANT: bool>(
        this: ArcBorrow<'_, Self>,
        bytes: &[u8],
        _inv_rkey: Option<u32>,
    ) -> bool {
        if VARIANT {
            this.variant_msgs.fetch_add(1, Relaxed);
        }
        this.log
            .record(u32::from(bytes.first().copied().unwrap_or(0xff)), 1);
        true
    }

    fn failed(&self, wc: &WorkCompletion) {
        if wc.is_flush() {
            self.flushed.fetch_add(1, Relaxed);
        }
    }

    fn repost_failed(&self, e: Error) {
        pr_err!("Receives not reposted: {:?}\n", e);
    }

    fn endpoint(&self) -> &Endpoint {
        &self.pair.client
    }
}

impl_ring_in!(RecvOwner, ring: RecvRing<RecvOwner>);

/// A run of `PAGES` fresh pages the client registered for the server to
/// write, as `memreg=cache` does, with its segment: the run's references
/// alone keep the pages (their owner has let them go).
fn registered_run<const PAGES: usize>(pair: &Pair) -> Result<(RunMr, MrSegment)> {
    let mut pages = KVec::new();
    for _ in 0..PAGES {
        pages.push(Page::alloc_page(GFP_KERNEL)?, GFP_KERNEL)?;
    }
    let mut run = RunMr::new(&pair.client, PAGES as u32)?;
    run.map_owned(&pages, true)?;
    run.post_reg(&pair.client)?;
    fence_behind_reg(&pair.client)?;
    let seg = run.segment();
    drop(pages);
    Ok((run, seg))
}

/// Waits until the REG_MR just posted unsignaled on `ep`'s send queue is in
/// force: a signaled zero-length RDMA Write (no key checked, IBA C9-88)
/// behind it completes only after the provider executed it, in order.
/// Without this fence a peer's Write could reach the key first (seen on the
/// debug kernel under load, for both callers).
fn fence_behind_reg(ep: &Endpoint) -> Result {
    let fence = op_on(
        ep,
        core::iter::empty::<SgEntry>(),
        SendOp::RdmaWrite {
            remote_addr: 0,
            rkey: 0,
        },
    )?;
    if !fence.is_ok() {
        pr_err!(
            "the fence behind a REG_MR failed: status {}\n",
            fence.status
        );
        return Err(EIO);
    }
    Ok(())
}

/// A buffer of `len` bytes on the server's end of `pair` that an MR
/// registered for the client to write, and the MR, in force.
pub(crate) fn writable_by_client(pair: &Pair, len: usize) -> Result<(Arc<MappedBuf>, Mr)> {
    let target = pair.server.alloc_buf(len, DmaDir::FromDevice)?;
    let mut mr = Mr::new(&pair.server, 4)?;
    mr.map_buf(&target)?;
    mr.post_reg(&pair.server, true)?;
    // The REG_MR goes unsignaled: in force once the fence completes.
    fence_behind_reg(&pair.server)?;
    Ok((target, mr))
}

fn device_params() -> Option<TransportParams> {
    let mut caps = None;
    device::for_each(|d| {
        caps.get_or_insert(DeviceCaps {
            max_fast_reg_page_list_len: d.attr.max_fast_reg_page_list_len,
            max_sge_rd: 0,
            max_send_sge: d.attr.max_send_sge,
            sg_gaps: false,
        });
    });
    caps.map(|c| TransportParams::from_device(4096, 4096, &c))
}

#[kunit_tests(rpcrdma_rs_client)]
mod tests {
    use super::*;

    /// The one conversion between `Addr` and C socket addresses (used by
    /// bind, resolve, the client's server address and the server's
    /// listener) gives back what it was given.
    #[test]
    fn socket_addresses_round_trip() {
        use crate::rust::rdma::cm::Addr;
        let v4 = Addr::V4([10, 99, 0, 1], 20049);
        assert_eq!(v4.to_sockaddr().addr(), Some(v4));
        let mut a6 = [0u8; 16];
        a6[0] = 0xfd;
        a6[15] = 2;
        let v6 = Addr::V6(a6, 2049);
        assert_eq!(v6.to_sockaddr().addr(), Some(v6));
    }

    #[test]
    fn frwr_grants_access_and_local_inv_revokes_it() -> Result {
        let pair = connect_pair()?;
        // The server side registers a buffer the client may write.
        let (target, mr) = writable_by_client(&pair, LEN)?;
        let seg = mr.segment();
        assert_eq!(seg.length as usize, LEN);

        let src = pair.client.alloc_buf(LEN, DmaDir::ToDevice)?;
        let mut data = KVec::from_elem(0u8, LEN, GFP_KERNEL)?;
        pattern(0x33, &mut data);
        src.write(0, &data)?;
        let op = SendOp::RdmaWrite {
            remote_addr: seg.offset,
            rkey: seg.handle,
        };
        let wc = client_op(&pair, one_segment(&src, LEN)?, op)?;
        assert!(wc.is_ok());
        let mut got = KVec::from_elem(0u8, LEN, GFP_KERNEL)?;
        target.read(0, &mut got)?;
        assert!(got[..] == data[..]);

        // Invalidate, and the same steering tag no longer works.
        let waiter = Waiter::new()?;
        post_local_inv(
            &pair.server,
            seg.handle,
            Some(WorkRequest::without_sges(waiter.clone())?),
        )?;
        assert!(waiter.wait()?.is_ok());
        let wc = client_op(&pair, one_segment(&src, LEN)?, op)?;
        pr_info!("write after LOCAL_INV: status {}\n", wc.status);
        assert!(!wc.is_ok());
        assert!(!wc.is_flush());
        Ok(())
    }

    /// Remote invalidation (RFC 8797; the server's Send With Invalidate of
    /// a Reply): the receiver's completion names the steering tag the peer
    /// invalidated, which the client's reply handler matches against the
    /// request's own MRs (`RegList::take_mr`) to skip their LOCAL_INV, and
    /// the tag no longer grants access.
    #[test]
    fn send_with_invalidate_names_and_revokes_the_key() -> Result {
        let pair = connect_pair()?;
        // The server's end of the pair plays the NFS client: it registers
        // a buffer the other end may write, and receives.
        let (_target, mr) = writable_by_client(&pair, LEN)?;
        let seg = mr.segment();
        let recvs = server_recvs(&pair, 1)?;
        let src = pair.client.alloc_buf(LEN, DmaDir::ToDevice)?;
        let write = SendOp::RdmaWrite {
            remote_addr: seg.offset,
            rkey: seg.handle,
        };
        assert!(client_op(&pair, one_segment(&src, LEN)?, write)?.is_ok());
        let msg = pair.client.alloc_buf(64, DmaDir::ToDevice)?;
        msg.write(0, &[7u8; 16])?;
        let sent = client_op(
            &pair,
            one_segment(&msg, 16)?,
            SendOp::SendWithInvalidate(seg.handle),
        )?;
        assert!(sent.is_ok());
        let got = recvs[0].wait()?;
        assert!(got.is_ok());
        assert_eq!(got.byte_len, 16);
        assert_eq!(got.invalidated_rkey, Some(seg.handle));
        // Revoked: the same Write now fails at the responder.
        let wc = client_op(&pair, one_segment(&src, LEN)?, write)?;
        pr_info!("write after remote invalidation: status {}\n", wc.status);
        assert!(!wc.is_ok());
        assert!(!wc.is_flush());
        Ok(())
    }

    /// A REG_MR chained ahead of the Send that advertises it and posted
    /// with it (`post_send_after_regs`, C `frwr_send`): the Send arrives,
    /// and the registration is in force by then: the peer RDMA-Writes
    /// through the key and the data lands in the client's buffer.
    #[test]
    fn reg_mr_chained_ahead_of_send_is_in_force() -> Result {
        let pair = connect_pair()?;
        let target = pair.client.alloc_buf(LEN, DmaDir::FromDevice)?;
        let mut mr = Mr::new(&pair.client, 4)?;
        mr.map_buf(&target)?;
        mr.prepare_reg(true);
        let seg = mr.segment();
        assert_eq!(seg.length as usize, LEN);

        let recv_buf = pair.server.alloc_buf(64, DmaDir::FromDevice)?;
        let recv_wait = Waiter::new()?;
        pair.server.post_recv(WorkRequest::new(
            recv_wait.clone(),
            one_segment(&recv_buf, 64)?,
        )?)?;
        let call = b"chained call";
        let (owner, mut head, log) = ring_on(&pair, 1, 1)?;
        let mut ctxt = owner.ring.next(&mut head).ok_or(ENOBUFS)?;
        ctxt.fill(64, |out| {
            out.get_mut(..call.len())
                .ok_or(EINVAL)?
                .copy_from_slice(call);
            Ok((call.len(), 0))
        })?;
        post_send_after_regs(&pair.client, ctxt, [&mr], true).map_err(|(e, _)| e)?;
        assert_eq!(log.wait_for(1)?, 1);
        let got = recv_wait.wait()?;
        assert!(got.is_ok());
        assert_eq!(got.byte_len as usize, call.len());

        let src = pair.server.alloc_buf(LEN, DmaDir::ToDevice)?;
        let mut data = KVec::from_elem(0u8, LEN, GFP_KERNEL)?;
        pattern(0x5a, &mut data);
        src.write(0, &data)?;
        let op = SendOp::RdmaWrite {
            remote_addr: seg.offset,
            rkey: seg.handle,
        };
        assert!(op_on(&pair.server, one_segment(&src, LEN)?, op)?.is_ok());
        let mut back = KVec::from_elem(0u8, LEN, GFP_KERNEL)?;
        target.read(0, &mut back)?;
        assert!(back[..] == data[..]);
        Ok(())
    }

    /// Sends of a ring that signals every fourth: the first three go
    /// unsignaled, and their contexts retire, in order, when the fourth's
    /// completion arrives; a Send posted unsignaled after it is retired
    /// (as flushed) by `release_after_drain`, and only after the drain.
    /// Every Send arrives.
    #[test]
    fn unsignaled_sends_retire_with_the_signaled_one() -> Result {
        let pair = connect_pair()?;
        let (owner, mut head, log) = ring_on(&pair, 8, 4)?;
        let recvs = server_recvs(&pair, 5)?;
        for n in 0..4 {
            // Unsignaled but for the fourth.
            assert_eq!(
                ring_send(&pair, &owner, &mut head, n, b"batched", false)?,
                n < 3
            );
        }
        assert_eq!(log.wait_for(4)?, 4);
        assert!(log.in_order());
        for r in recvs.iter().take(4) {
            assert!(r.wait()?.is_ok());
        }
        assert!(ring_send(&pair, &owner, &mut head, 4, b"batched", false)?);
        assert!(recvs[4].wait()?.is_ok());
        assert_eq!(log.count(), 4);
        assert_eq!(owner.ring.outstanding(), 1);
        owner.ring.release_after_drain(&pair.client);
        assert_eq!(log.count(), 4);
        pair.client.drain();
        owner.ring.release_after_drain(&pair.client);
        assert_eq!(log.count(), 5);
        assert!(log.in_order());
        assert_eq!(owner.ring.outstanding(), 0);
        Ok(())
    }

    /// A Send written in place through `SendCtxt::bytes` and recorded
    /// with `SendCtxt::filled`: neither reaches past the context's buffer
    /// (64 bytes here), and the bytes recorded are the bytes sent.
    #[test]
    fn a_send_written_in_place_is_bounded_by_its_buffer() -> Result {
        let pair = connect_pair()?;
        let (owner, mut head, log) = ring_on(&pair, 4, 1)?;
        let recvs = server_recvs(&pair, 1)?;
        let mut ctxt = owner.ring.next(&mut head).ok_or(ENOBUFS)?;
        *ctxt.data() = 0;
        assert_eq!(ctxt.bytes(65).err(), Some(EINVAL));
        assert_eq!(ctxt.filled(65, 0), Err(EINVAL));
        assert_eq!(ctxt.filled(60, 5), Err(EINVAL));
        assert_eq!(ctxt.filled(usize::MAX, 1), Err(EINVAL));
        let msg = b"in place";
        let out = ctxt.bytes(64)?;
        assert_eq!(out.len(), 64);
        out.get_mut(..msg.len()).ok_or(EINVAL)?.copy_from_slice(msg);
        ctxt.filled(msg.len(), 0)?;
        // Signaled (every Send, in this ring): retired by its completion.
        assert!(!ctxt.post(&pair.client, true)?);
        let wc = recvs[0].wait()?;
        assert!(wc.is_ok());
        assert_eq!(wc.byte_len, msg.len() as u32);
        assert_eq!(log.wait_for(1)?, 1);
        assert_eq!(owner.ring.outstanding(), 0);
        Ok(())
    }

    /// Twenty Sends through a ring of four contexts, every second
    /// signaled: the ring wraps five times, a sender that finds every
    /// context posted waits for a completion, each context carries its
    /// own bytes, and every one retires, in order, with nothing left
    /// posted.
    #[test]
    fn a_send_ring_wraps_around() -> Result {
        const SENDS: u32 = 20;
        let pair = connect_pair()?;
        let posted_before = live::count(live::Kind::PostedWr);
        let (owner, mut head, log) = ring_on(&pair, 4, 2)?;
        let mut bufs = KVec::new();
        let mut recvs = KVec::new();
        for _ in 0..SENDS {
            let buf = pair.server.alloc_buf(64, DmaDir::FromDevice)?;
            let wait = Waiter::new()?;
            pair.server
                .post_recv(WorkRequest::new(wait.clone(), one_segment(&buf, 64)?)?)?;
            recvs.push(wait, GFP_KERNEL)?;
            bufs.push(buf, GFP_KERNEL)?;
        }
        for n in 0..SENDS {
            let msg = [
                b's',
                b'e',
                b'n',
                b'd',
                b'0' + (n / 10) as u8,
                b'0' + (n % 10) as u8,
            ];
            // A full ring frees up as signaled Sends complete.
            wait_for(20_000, || owner.ring.outstanding() < 4)?;
            ring_send(&pair, &owner, &mut head, n, &msg, false)?;
        }
        assert_eq!(log.wait_for(SENDS)?, SENDS);
        assert!(log.in_order());
        assert_eq!(owner.ring.outstanding(), 0);
        for (n, (r, buf)) in recvs.iter().zip(bufs.iter()).enumerate() {
            let wc = r.wait()?;
            assert!(wc.is_ok());
            assert_eq!(wc.byte_len, 6);
            let mut got = [0u8; 6];
            buf.read(0, &mut got)?;
            assert_eq!(got[4..], [b'0' + (n / 10) as u8, b'0' + (n % 10) as u8]);
        }
        assert_eq!(live::count(live::Kind::PostedWr), posted_before);
        Ok(())
    }

    /// A ring whose queue pair is drained: the contexts posted unsignaled
    /// retire as flushed, a Send posted after the drain is refused
    /// (`ESHUTDOWN`) and leaves its context free, and nothing stays
    /// counted as posted.
    #[test]
    fn a_send_ring_is_released_after_the_drain() -> Result {
        let pair = connect_pair()?;
        let posted_before = live::count(live::Kind::PostedWr);
        let (owner, mut head, log) = ring_on(&pair, 4, 4)?;
        let recvs = server_recvs(&pair, 3)?;
        for n in 0..3 {
            assert!(ring_send(&pair, &owner, &mut head, n, b"flush", false)?);
        }
        for r in recvs.iter() {
            assert!(r.wait()?.is_ok());
        }
        assert_eq!(log.count(), 0);
        pair.client.drain();
        owner.ring.release_after_drain(&pair.client);
        assert_eq!(log.count(), 3);
        assert!(log.in_order());
        let refused = ring_send(&pair, &owner, &mut head, 3, b"late", true);
        assert!(matches!(refused, Err(e) if e == ESHUTDOWN));
        assert_eq!(owner.ring.outstanding(), 0);
        assert!(owner.ring.next(&mut head).is_some());
        assert_eq!(live::count(live::Kind::PostedWr), posted_before);
        Ok(())
    }

    /// Twelve messages into a ring of four Receive contexts reposted two at
    /// a time: each arrives in its own buffer, in order, through the
    /// owner's handler of the ring's variant, the ring wraps three times
    /// with four Receives posted at the end, and the drain flushes those
    /// four, leaving nothing counted as posted.
    #[test]
    fn a_recv_ring_reposts_in_batches() -> Result {
        const MSGS: u8 = 12;
        let posted_before = live::count(live::Kind::PostedWr);
        let pair = connect_pair()?;
        let ring = RecvRing::new(&pair.client, 4, 64, 2, true)?;
        let log = Log::new()?;
        let owner = Arc::new(
            RecvOwner {
                pair,
                ring,
                log: log.clone(),
                flushed: Atomic::new(0),
                variant_msgs: Atomic::new(0),
            },
            GFP_KERNEL,
        )?;
        owner.ring.post_all(&owner.pair.client)?;
        assert!(owner.ring.post_all(&owner.pair.client).is_err());
        assert_eq!(owner.ring.posted(), 4);
        let src = owner.pair.server.alloc_buf(8, DmaDir::ToDevice)?;
        for n in 0..MSGS {
            src.write(0, &[n; 8])?;
            let wc = op_on(&owner.pair.server, one_segment(&src, 8)?, SendOp::Send)?;
            assert!(wc.is_ok());
            // One at a time: the next finds a Receive posted.
            assert_eq!(log.wait_for(u32::from(n) + 1)?, u32::from(n) + 1);
        }
        assert!(log.in_order());
        assert_eq!(owner.variant_msgs.load(Relaxed), u32::from(MSGS));
        assert_eq!(owner.ring.posted(), 4);
        owner.pair.client.drain();
        owner.ring.release_after_drain(&owner.pair.client);
        assert_eq!(owner.flushed.load(Relaxed), 4);
        assert_eq!(owner.ring.posted(), 0);
        drop(owner);
        assert_eq!(live::count(live::Kind::PostedWr), posted_before);
        Ok(())
    }

    /// Three RDMA Writes ahead of a Send in one chain (`SendChain`, as the
    /// server posts a Reply): only the Send asks for its completion, which
    /// runs every handler in posting order; the Writes' data is in place
    /// when the Send has arrived.
    #[test]
    fn chained_writes_complete_with_the_send() -> Result {
        let pair = connect_pair()?;
        let target = pair.client.alloc_buf(3 * PAGE_SIZE, DmaDir::FromDevice)?;
        let (addr, rkey) = pair.expose(&target)?.ok_or(EINVAL)?;
        let recv_buf = pair.client.alloc_buf(64, DmaDir::FromDevice)?;
        let recv_wait = Waiter::new()?;
        pair.client.post_recv(WorkRequest::new(
            recv_wait.clone(),
            one_segment(&recv_buf, 64)?,
        )?)?;
        let log = Log::new()?;
        let mut chain = SendChain::new();
        let mut expect = KVec::from_elem(0u8, 3 * PAGE_SIZE, GFP_KERNEL)?;
        for (i, part) in expect.chunks_mut(PAGE_SIZE).enumerate() {
            pattern(i as u8 + 1, part);
            let src = pair.server.alloc_buf(PAGE_SIZE, DmaDir::ToDevice)?;
            src.write(0, part)?;
            let log = log.clone();
            let n = i as u32;
            let wr = WorkRequest::new(Counted { log, n }, one_segment(&src, PAGE_SIZE)?)?;
            let remote_addr = addr + (i * PAGE_SIZE) as u64;
            chain.push(wr, SendOp::RdmaWrite { remote_addr, rkey })?;
        }
        // A Read's completion must be seen on its own: refused.
        let sink = pair.server.alloc_buf(64, DmaDir::FromDevice)?;
        let read = WorkRequest::new(
            Counted {
                log: log.clone(),
                n: 9,
            },
            one_segment(&sink, 64)?,
        )?;
        let op = SendOp::RdmaRead {
            remote_addr: addr,
            rkey,
        };
        assert!(chain.push(read, op).is_err());
        let send_buf = pair.server.alloc_buf(64, DmaDir::ToDevice)?;
        send_buf.write(0, b"reply")?;
        let send = WorkRequest::new(
            Counted {
                log: log.clone(),
                n: 3,
            },
            one_segment(&send_buf, 5)?,
        )?;
        chain.push(send, SendOp::Send)?;
        chain.post(&pair.server).map_err(|(e, _)| e)?;
        assert!(chain.is_empty());
        assert_eq!(log.wait_for(4)?, 4);
        assert!(log.in_order());
        // The Send's completion accounted for all four.
        assert_eq!(log.covered(), 4);
        assert!(recv_wait.wait()?.is_ok());
        let mut back = KVec::from_elem(0u8, 3 * PAGE_SIZE, GFP_KERNEL)?;
        target.read(0, &mut back)?;
        assert!(back[..] == expect[..]);
        Ok(())
    }

    /// A chain whose second request the device refuses (more SGEs than
    /// the queue pair takes): the first went out, unsignaled, and nothing
    /// behind it; the post reports one posted, and the first request is
    /// kept until the drain, which completes it as flushed.
    #[test]
    fn chain_posted_in_part_completes_its_posted_part_at_the_drain() -> Result {
        let pair = connect_pair()?;
        let too_many = pair.server.max_send_sge() + 1;
        if too_many > MAX_SGE {
            return Ok(());
        }
        let target = pair.client.alloc_buf(PAGE_SIZE, DmaDir::FromDevice)?;
        let (addr, rkey) = pair.expose(&target)?.ok_or(EINVAL)?;
        let log = Log::new()?;
        let src = pair.server.alloc_buf(PAGE_SIZE, DmaDir::ToDevice)?;
        let mut chain = SendChain::new();
        let first = WorkRequest::new(
            Counted {
                log: log.clone(),
                n: 0,
            },
            one_segment(&src, 64)?,
        )?;
        chain.push(
            first,
            SendOp::RdmaWrite {
                remote_addr: addr,
                rkey,
            },
        )?;
        let mut segs = KVec::new();
        for i in 0..too_many {
            let (buf, offset, len) = (src.clone(), i * 8, 8);
            segs.push(Segment { buf, offset, len }, GFP_KERNEL)?;
        }
        let refused = WorkRequest::new(
            Counted {
                log: log.clone(),
                n: 1,
            },
            segs,
        )?;
        chain.push(
            refused,
            SendOp::RdmaWrite {
                remote_addr: addr,
                rkey,
            },
        )?;
        let send = WorkRequest::new(
            Counted {
                log: log.clone(),
                n: 2,
            },
            one_segment(&src, 8)?,
        )?;
        chain.push(send, SendOp::Send)?;
        let Err((_, posted)) = chain.post(&pair.server) else {
            pr_err!("a request with {} SGEs was posted\n", too_many);
            return Err(EINVAL);
        };
        assert_eq!(posted, 1);
        assert_eq!(log.count(), 0);
        pair.server.drain();
        assert_eq!(log.count(), 1);
        assert!(log.in_order());
        // Flushed alone: it accounts for itself.
        assert_eq!(log.covered(), 1);
        Ok(())
    }

    #[test]
    fn planner_with_device_limits_uses_one_chunk_per_mib() -> Result {
        let Some(p) = device_params() else {
            return Err(ENODEV);
        };
        // 1 MiB READ: 120-byte head, page data, 4-byte tail (XDR pad).
        let read = RpcShape {
            send: XdrBufShape::new(200, 0, 0),
            send_ddp: false,
            recv: XdrBufShape::new(120, 1 << 20, 4),
            recv_ddp: true,
            ddp_allowed: true,
            send_buf_len: 4096,
        };
        let pr = plan(&read, &p).map_err(|_| EINVAL)?;
        assert!(matches!(
            pr.call,
            CallStrategy::InlinePullup | CallStrategy::InlineMapped
        ));
        assert!(matches!(
            pr.result,
            ResultStrategy::WriteChunk { segments: 1, .. }
        ));

        // 1 MiB WRITE with an unaligned page base.
        let mut send = XdrBufShape::new(180, 1 << 20, 0);
        send.page_base = 512;
        let write = RpcShape {
            send,
            send_ddp: true,
            recv: XdrBufShape::new(256, 0, 0),
            recv_ddp: false,
            ddp_allowed: true,
            send_buf_len: 4096,
        };
        let pw = plan(&write, &p).map_err(|_| EINVAL)?;
        assert!(matches!(
            pw.call,
            CallStrategy::ReadChunk {
                position: 180,
                segments: 1
            }
        ));
        assert!(matches!(pw.result, ResultStrategy::Inline));
        Ok(())
    }

    #[test]
    fn cached_run_serves_repeated_io_until_invalidated() -> Result {
        let pair = connect_pair()?;
        const PAGES: usize = 4;
        // The client registers a run of pages for the server to write,
        // once; their owner lets them go.
        let (run, seg) = registered_run::<PAGES>(&pair)?;
        assert_eq!(run.pages(), PAGES as u32);
        assert_eq!(seg.length as usize, PAGES * PAGE_SIZE);

        // Two I/Os through the same steering tag, no registration between
        // them (a cache hit), each at its own offset in the run.
        let src = pair.server.alloc_buf(LEN, DmaDir::ToDevice)?;
        let mut data = KVec::from_elem(0u8, LEN, GFP_KERNEL)?;
        let mut got = KVec::from_elem(0u8, LEN, GFP_KERNEL)?;
        for (page, seed) in [(1usize, 0x11u8), (2, 0x22)] {
            pattern(seed, &mut data);
            src.write(0, &data)?;
            let at = page * PAGE_SIZE;
            let op = SendOp::RdmaWrite {
                remote_addr: seg.offset + at as u64,
                rkey: seg.handle,
            };
            let wc = op_on(&pair.server, one_segment(&src, LEN)?, op)?;
            assert!(wc.is_ok());
            run.sync_for_cpu();
            run.read(at, &mut got)?;
            assert!(got[..] == data[..]);
        }

        // Eviction: LOCAL_INV, then the pages go; the tag is dead.
        let waiter = Waiter::new()?;
        post_local_inv(
            &pair.client,
            seg.handle,
            Some(WorkRequest::without_sges(waiter.clone())?),
        )?;
        assert!(waiter.wait()?.is_ok());
        let refused = refused_releases();
        // Kept for reuse, without pages.
        let run = run.retire(true);
        assert!(run.as_ref().is_some_and(|r| r.pages() == 0));
        assert_eq!(refused_releases(), refused);
        let op = SendOp::RdmaWrite {
            remote_addr: seg.offset,
            rkey: seg.handle,
        };
        let wc = op_on(&pair.server, one_segment(&src, LEN)?, op)?;
        pr_info!("write to an evicted registration: status {}\n", wc.status);
        assert!(!wc.is_ok());
        Ok(())
    }

    /// A cached registration whose invalidation failed, was flushed or
    /// could not be posted (audit L2): its tag may still be in force, so
    /// the cache's `retire(.., false)` must deregister it before its pages
    /// are unmapped and put, never put them first (a page freed and
    /// reused while the server can still write it).
    #[test]
    fn unknown_registration_is_deregistered_before_its_pages_go() -> Result {
        const PAGES: usize = 4;
        let pair = connect_pair()?;
        // The run's references alone keep the pages.
        let (mut run, seg) = registered_run::<PAGES>(&pair)?;
        // In force: the server writes through the tag.
        let src = pair.server.alloc_buf(LEN, DmaDir::ToDevice)?;
        let op = SendOp::RdmaWrite {
            remote_addr: seg.offset,
            rkey: seg.handle,
        };
        let wc = op_on(&pair.server, one_segment(&src, LEN)?, op)?;
        assert!(wc.is_ok());

        // No invalidation known to have completed: releasing the pages
        // now is refused, and they stay referenced.
        let refused = refused_releases();
        run.release();
        assert_eq!(refused_releases(), refused + 1);
        assert_eq!(run.pages(), PAGES as u32);

        // The cache's path for a failed or flushed LOCAL_INV: the MR is
        // deregistered first, nothing releases pages of a live tag.
        let refused = refused_releases();
        assert!(run.retire(false).is_none());
        let early = refused_releases() - refused;
        pr_info!(
            "retire of a registration in force: {} release(s) of its pages tried before its deregistration\n",
            early
        );
        assert_eq!(early, 0);
        // The tag is revoked.
        let wc = op_on(&pair.server, one_segment(&src, LEN)?, op)?;
        pr_info!("write to a retired registration: status {}\n", wc.status);
        assert!(!wc.is_ok());
        Ok(())
    }
}

/// The client's own request slots (`alloc_slot`/`free_slot`) on a bare
/// sunrpc transport: each task gets its own slot and buffer, found again
/// from the request; a task that finds none waits on the backlog and gets
/// the next slot freed, first come first served; no slot is lost.
#[kunit_tests(rpcrdma_rs_xprt_slots)]
mod slot_tests {
    use crate::rust::sunrpc::xprt_slots::SlotBench;
    use kernel::prelude::*;

    #[test]
    fn each_task_gets_its_own_slot_and_buffer() -> Result {
        let bench = SlotBench::new(4, 4)?;
        let mut seen = [usize::MAX; 4];
        for (i, s) in seen.iter_mut().enumerate() {
            *s = bench.alloc(i)?.ok_or(EBUSY)?;
        }
        for (i, a) in seen.iter().enumerate() {
            for b in seen.iter().skip(i + 1) {
                assert_ne!(a, b);
                assert_ne!(bench.buf_addr(*a), bench.buf_addr(*b));
            }
            assert!(bench.buf_addr(*a).is_some());
        }
        assert!(!bench.other_request_is_a_slot()?);
        Ok(())
    }

    #[test]
    fn a_freed_slot_goes_to_the_first_waiting_task() -> Result {
        let bench = SlotBench::new(2, 5)?;
        let s0 = bench.alloc(0)?.ok_or(EBUSY)?;
        let s1 = bench.alloc(1)?.ok_or(EBUSY)?;
        // The table is empty: these two wait, in this order.
        assert_eq!(bench.alloc(2)?, None);
        assert_eq!(bench.alloc(3)?, None);
        bench.free(0)?;
        // Handed over, not put back: task 2 holds it, task 3 still waits.
        assert_eq!(bench.holds(2)?, Some(s0));
        assert_eq!(bench.holds(3)?, None);
        bench.free(1)?;
        assert_eq!(bench.holds(3)?, Some(s1));
        // No one waits: freed slots go back on the stack, and both can be
        // taken again, after which the next task waits.
        bench.free(2)?;
        bench.free(3)?;
        let a = bench.alloc(0)?.ok_or(EBUSY)?;
        let b = bench.alloc(1)?.ok_or(EBUSY)?;
        assert_ne!(a, b);
        assert_eq!(bench.alloc(4)?, None);
        Ok(())
    }
}
