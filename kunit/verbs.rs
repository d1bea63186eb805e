// SPDX-License-Identifier: GPL-2.0

//! The verbs layer on a real (soft-RoCE) device: two RC endpoints connected
//! through rdma_cm, a Send/Receive round trip, multi-page RDMA Write and
//! RDMA Read with the data checked, an error completion for a bad rkey, and
//! teardown that releases every object.

use crate::proto::pieces::page_spans;
use crate::regcache::{self, CacheUser, ClassSpec, RegCache};
use crate::rust::kext::percpu::{self, PerCpuCount, PerCpuCounter};
use crate::rust::kext::slab::SlabCache;
use crate::rust::module::live;
use crate::rust::rdma::cm::{Addr, CmEvent, CmId};
use crate::rust::rdma::device;
use crate::rust::rdma::sink_pool::SinkMrPool;
use crate::rust::rdma::verbs::{
    CompletionHandler, ConnParam, DmaDir, Endpoint, EndpointConfig, MappedBuf, PageRange, PageRef,
    Segment, SendOp, SgEntry, WorkCompletion, WorkRequest,
};
use crate::rust::rdma::wr_pool::WrPool;
use crate::rust::sunrpc::page_sinks::PageSinks;
use kernel::alloc::KVec;
use kernel::new_condvar;
use kernel::new_spinlock;
use kernel::prelude::*;
use kernel::sync::atomic::{Atomic, Relaxed};
use kernel::sync::{Arc, Completion, CondVar, CondVarTimeoutResult, SpinLock};
use kernel::time::msecs_to_jiffies;

/// How long any single step may take under TCG emulation before the test
/// fails instead of hanging.
const STEP_TIMEOUT_MS: u32 = 20_000;

/// Bytes moved by the RDMA Write and Read cases: 16 pages.
const BULK_LEN: usize = 16 * 4096;

static PEER_IPV4: Atomic<u32> = Atomic::new(0x0a63_0001);

/// Sets the address the suite connects over.
pub(crate) fn set_peer(addr: u32) {
    PEER_IPV4.store(addr, Relaxed);
}

fn peer(port: u16) -> Addr {
    Addr::V4(PEER_IPV4.load(Relaxed).to_be_bytes(), port)
}

/// A completion handler that hands the completion back to the test thread
/// (assertions on the completion workqueue would not be counted by KUnit).
#[pin_data]
pub(crate) struct Waiter {
    #[pin]
    state: SpinLock<Option<WorkCompletion>>,
    #[pin]
    cv: CondVar,
}

impl Waiter {
    pub(crate) fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                state <- new_spinlock!(None, "rpcrdma_rs_kunit::waiter"),
                cv <- new_condvar!("rpcrdma_rs_kunit::waiter"),
            }),
            GFP_KERNEL,
        )
    }

    pub(crate) fn wait(&self) -> Result<WorkCompletion> {
        let mut left = msecs_to_jiffies(STEP_TIMEOUT_MS);
        let mut state = self.state.lock();
        loop {
            if let Some(wc) = state.take() {
                return Ok(wc);
            }
            if left == 0 {
                pr_err!("no completion within {} ms\n", STEP_TIMEOUT_MS);
                return Err(ETIMEDOUT);
            }
            match self.cv.wait_interruptible_timeout(&mut state, left) {
                CondVarTimeoutResult::Timeout => left = 0,
                CondVarTimeoutResult::Woken { jiffies } => left = jiffies,
                CondVarTimeoutResult::Signal { .. } => return Err(EINTR),
            }
        }
    }
}

impl Waiter {
    /// Hands `wc` to the thread in [`Self::wait`].
    fn notify(&self, wc: &WorkCompletion) {
        *self.state.lock() = Some(*wc);
        self.cv.notify_all();
    }
}

impl CompletionHandler for Arc<Waiter> {
    fn complete(&self, _wr: &Arc<WorkRequest<Self>>, wc: &WorkCompletion) {
        self.notify(wc);
    }
}

/// A completion handler whose work requests come from, and go back to, a
/// [`WrPool`]; it tells the test thread like [`Waiter`].
struct Pooled {
    waiter: Arc<Waiter>,
    pool: Arc<PoolHolder>,
}

#[pin_data]
struct PoolHolder {
    #[pin]
    wrs: WrPool<Pooled>,
}

impl CompletionHandler for Pooled {
    fn complete(&self, _wr: &Arc<WorkRequest<Self>>, wc: &WorkCompletion) {
        self.waiter.notify(wc);
    }

    fn pool(&self) -> Option<&WrPool<Self>> {
        Some(&self.pool.wrs)
    }
}

/// Waits until `pool` keeps `n` allocations: the completion gives one
/// back after its handler ran, so shortly after the test thread woke.
fn wait_kept(pool: &WrPool<Pooled>, n: usize) -> Result {
    wait_for(STEP_TIMEOUT_MS, || pool.kept() == n).inspect_err(|_| {
        pr_err!("the pool keeps {} allocations, not {}\n", pool.kept(), n);
    })
}

/// Waits up to `limit_ms` for `done`, looking every 10 ms. What a work
/// request holds (its buffers, its pages) is let go after its handler ran,
/// on the completion workqueue: shortly after the test thread that waited
/// for the handler woke.
pub(crate) fn wait_for(limit_ms: u32, done: impl Fn() -> bool) -> Result {
    for _ in 0..limit_ms / 10 {
        if done() {
            return Ok(());
        }
        kernel::time::delay::fsleep(kernel::time::Delta::from_millis(10));
    }
    Err(ETIMEDOUT)
}

fn conn_param(private_data: &[u8]) -> ConnParam<'_> {
    ConnParam {
        private_data,
        responder_resources: 4,
        initiator_depth: 4,
        retry_count: 6,
        ..ConnParam::default()
    }
}

fn config() -> EndpointConfig {
    EndpointConfig {
        max_send_wr: 16,
        max_recv_wr: 16,
        max_send_sge: 4,
        max_recv_sge: 1,
        // The test exposes buffers to its own peer through the global rkey;
        // this is the "physical" strategy, which the test module may use.
        unsafe_global_rkey: true,
        comp_vector: 0,
    }
}

/// Two connected endpoints on the same device.
///
/// Fields drop in order: both queue pairs are drained and destroyed
/// before the buffers in `exposed` are freed.
pub(crate) struct Pair {
    pub(crate) client: Endpoint,
    pub(crate) server: Endpoint,
    _listener: CmId,
    /// Buffers the peer was given an address and key for
    /// ([`Pair::expose`]). The peer's device may read one after the work
    /// request that named it completed: a responder replays a
    /// retransmitted Read Request, and goes on answering a Read its
    /// requester has flushed. Only the end of the queue pair ends that.
    exposed: Pin<KBox<SpinLock<KVec<Arc<MappedBuf>>>>>,
}

/// The address and key a peer reaches `buf` at (the global rkey), with
/// `buf` kept in `kept`, which its holder drops only after the queue pairs
/// the peer reaches it through; `None` when the protection domain has no
/// global rkey. The one place KUnit code hands a peer a buffer (layout
/// rule 7).
pub(crate) fn expose_into(
    kept: &mut KVec<Arc<MappedBuf>>,
    buf: &Arc<MappedBuf>,
    flags: kernel::alloc::Flags,
) -> Result<Option<(u64, u32)>> {
    let Some(handle) = buf.remote_handle() else {
        return Ok(None);
    };
    kept.push(buf.clone(), flags)?;
    Ok(Some(handle))
}

impl Pair {
    /// The address and key the peer reaches `buf` at, keeping `buf` until
    /// the queue pairs are gone ([`expose_into`]).
    pub(crate) fn expose(&self, buf: &Arc<MappedBuf>) -> Result<Option<(u64, u32)>> {
        expose_into(&mut self.exposed.lock(), buf, GFP_ATOMIC)
    }
}

fn step<T>(what: &str, r: Result<T>) -> Result<T> {
    r.inspect_err(|e| pr_err!("{} failed: {:?}\n", what, e))
}

fn expect_event(what: &str, ev: Result<CmEvent>, want: fn(&CmEvent) -> bool) -> Result<CmEvent> {
    let ev = step(what, ev)?;
    if want(&ev) {
        Ok(ev)
    } else {
        pr_err!("{}: unexpected CM event\n", what);
        Err(EPROTO)
    }
}

const CLIENT_PDATA: &[u8] = b"rpcrdma-rs-kunit";
const SERVER_PDATA: &[u8] = b"accepted";

pub(crate) fn connect_pair() -> Result<Pair> {
    connect_pair_on(false).map(|(p, _)| p)
}

/// Like [`connect_pair`], with the client endpoint on its device's
/// registration cache's shared protection domain (the server's set-up).
fn connect_pair_on(cached: bool) -> Result<(Pair, Option<CacheUser>)> {
    let listener = step("create listener", CmId::new())?;
    step("bind", listener.bind(peer(0)))?;
    step("listen", listener.listen(4))?;
    let port = listener.local_port();

    let id = step("create id", CmId::new())?;
    step("resolve_addr", id.resolve_addr(peer(port), 5000))?;
    expect_event("addr resolution", id.wait_event(STEP_TIMEOUT_MS), |e| {
        matches!(e, CmEvent::AddrResolved)
    })?;
    step("resolve_route", id.resolve_route(5000))?;
    expect_event("route resolution", id.wait_event(STEP_TIMEOUT_MS), |e| {
        matches!(e, CmEvent::RouteResolved)
    })?;
    let (client, user) = if cached {
        let user = step("cache attach", CacheUser::attach(&id))?;
        let ep = step(
            "client endpoint",
            Endpoint::with_pd(id, &config(), user.pd().clone()),
        )?;
        (ep, Some(user))
    } else {
        (step("client endpoint", Endpoint::new(id, &config()))?, None)
    };
    step("connect", client.connect(&conn_param(CLIENT_PDATA)))?;

    let req = expect_event(
        "connect request",
        listener.wait_event(STEP_TIMEOUT_MS),
        |e| matches!(e, CmEvent::ConnectRequest { .. }),
    )?;
    let CmEvent::ConnectRequest {
        id: child,
        private_data,
        ..
    } = req
    else {
        return Err(EPROTO);
    };
    if private_data.as_bytes().get(..CLIENT_PDATA.len()) != Some(CLIENT_PDATA) {
        pr_err!("connect request private data mismatch\n");
        return Err(EPROTO);
    }
    let server = step("server endpoint", Endpoint::new(child, &config()))?;
    step("accept", server.accept(&conn_param(SERVER_PDATA)))?;
    expect_event(
        "server established",
        server.wait_event(STEP_TIMEOUT_MS),
        |e| matches!(e, CmEvent::Established { .. }),
    )?;
    let est = expect_event(
        "client established",
        client.wait_event(STEP_TIMEOUT_MS),
        |e| matches!(e, CmEvent::Established { .. }),
    )?;
    if let CmEvent::Established { private_data } = est {
        if private_data.as_bytes().get(..SERVER_PDATA.len()) != Some(SERVER_PDATA) {
            pr_err!("accept private data mismatch\n");
            return Err(EPROTO);
        }
    }
    let exposed = KBox::pin_init(
        new_spinlock!(KVec::new(), "rpcrdma_rs_kunit::exposed"),
        GFP_KERNEL,
    )?;
    Ok((
        Pair {
            client,
            server,
            _listener: listener,
            exposed,
        },
        user,
    ))
}

pub(crate) fn one_segment(buf: &Arc<MappedBuf>, len: usize) -> Result<KVec<Segment>> {
    let mut v = KVec::new();
    v.push(
        Segment {
            buf: buf.clone(),
            offset: 0,
            len,
        },
        GFP_KERNEL,
    )?;
    Ok(v)
}

/// Fills `source` (a server buffer the client may read at `addr`/`rkey`)
/// with `seed`'s pattern, RDMA-Reads it into `sink` from the client and
/// checks what arrived.
fn read_pattern_into(
    pair: &Pair,
    source: &Arc<MappedBuf>,
    (addr, rkey): (u64, u32),
    sink: &Arc<MappedBuf>,
    seed: u8,
) -> Result {
    let mut expect = KVec::from_elem(0u8, BULK_LEN, GFP_KERNEL)?;
    pattern(seed, &mut expect);
    source.write(0, &expect)?;
    let wc = client_op(
        pair,
        one_segment(sink, BULK_LEN)?,
        SendOp::RdmaRead {
            remote_addr: addr,
            rkey,
        },
    )?;
    assert!(wc.is_ok());
    let mut got = KVec::from_elem(0u8, BULK_LEN, GFP_KERNEL)?;
    sink.read(0, &mut got)?;
    assert!(got[..] == expect[..]);
    Ok(())
}

/// A client page filled with `pattern(seed)` the way the server fills one,
/// by an RDMA Read into a page sink, and the bytes: `None` on iWARP, whose
/// sinks need a registration.
fn client_page_with(pair: &Pair, seed: u8) -> Result<Option<(PageRef, KVec<u8>)>> {
    if pair.client.pd().is_iwarp() {
        return Ok(None);
    }
    let page_size = kernel::page::PAGE_SIZE;
    let source = pair.server.alloc_buf(page_size, DmaDir::ToDevice)?;
    let (addr, rkey) = pair.expose(&source)?.ok_or(EINVAL)?;
    let mut data = KVec::from_elem(0u8, page_size, GFP_KERNEL)?;
    pattern(seed, &mut data);
    source.write(0, &data)?;
    let sinks = fresh_sinks(&pair.client, 1)?;
    let read = SendOp::RdmaRead {
        remote_addr: addr,
        rkey,
    };
    let build = |w| WorkRequest::with_sinks(w, &sinks, 0, page_size);
    assert!(op_with(&pair.client, build, read)?.is_ok());
    let page = sinks.take_received_pages()?.pop().ok_or(EINVAL)?;
    Ok(Some((page, data)))
}

/// As [`client_page_with`] for a page per seed: the pages in order and
/// their bytes one after the other (`None` on iWARP).
pub(crate) fn client_pages_with<const N: usize>(
    pair: &Pair,
    seeds: [u8; N],
) -> Result<Option<(KVec<PageRef>, KVec<u8>)>> {
    let mut pages = KVec::with_capacity(N, GFP_KERNEL)?;
    let mut data = KVec::new();
    for seed in seeds {
        let Some((page, bytes)) = client_page_with(pair, seed)? else {
            return Ok(None);
        };
        pages.push(page, GFP_KERNEL)?;
        data.extend_from_slice(&bytes, GFP_KERNEL)?;
    }
    Ok(Some((pages, data)))
}

/// The test chunk of the Reads into pages: bytes [100, 100 + 3 pages) of a
/// chunk laid out over four pages, so a Read starts inside its first page
/// as a piece of a client's unaligned segment may.
const CHUNK_OFF: usize = 100;
const CHUNK_LEN: usize = 3 * kernel::page::PAGE_SIZE;
const CHUNK_PAGES: usize = 4;

/// `n` freshly allocated pages mapped on `ep` as Read sinks, as the server
/// maps a request's pages.
pub(crate) fn fresh_sinks(ep: &Endpoint, n: usize) -> Result<Arc<PageSinks>> {
    let mut pages = KVec::new();
    for _ in 0..n {
        pages.push(PageRef::alloc()?, GFP_KERNEL)?;
    }
    ep.map_page_sinks(pages)
}

/// Writes `seed`'s pattern into `source`, RDMA-Reads it from the client
/// with the work request `build` makes (over `sinks` or a registration of
/// them) and checks that each page of `sinks` holds its part of the test
/// chunk at the span's offset.
fn read_chunk_into_pages(
    pair: &Pair,
    source: &Arc<MappedBuf>,
    sinks: &PageSinks,
    build: impl FnOnce(Arc<Waiter>) -> Result<Arc<WorkRequest<Arc<Waiter>>>>,
    seed: u8,
) -> Result {
    let (addr, rkey) = pair.expose(source)?.ok_or(EINVAL)?;
    let mut expect = KVec::from_elem(0u8, CHUNK_LEN, GFP_KERNEL)?;
    pattern(seed, &mut expect);
    source.write(0, &expect)?;
    let wc = op_with(
        &pair.client,
        build,
        SendOp::RdmaRead {
            remote_addr: addr,
            rkey,
        },
    )?;
    assert!(wc.is_ok());
    let mut at = 0;
    for span in page_spans(CHUNK_OFF, CHUNK_LEN, kernel::page::PAGE_SIZE).ok_or(EINVAL)? {
        let mut got = KVec::from_elem(0u8, span.len, GFP_KERNEL)?;
        sinks.read(span.page, span.offset, &mut got)?;
        assert!(got[..] == expect[at..at + span.len]);
        at += span.len;
    }
    Ok(())
}

/// The pool's (idle, allocated) MRs once they are `want`, or as they are
/// after [`STEP_TIMEOUT_MS`]. A Read's work request, which holds its sink
/// (and the sink its MR), is released by the completion handler after it
/// has woken the test, so a sink dropped by the test may reach the pool a
/// moment later, and later still on a guest whose host is busy.
fn pool_settles(pool: &SinkMrPool, want: (usize, u64)) -> (usize, u64) {
    // Not settled in time: the caller's comparison says what it is.
    let _ = wait_for(STEP_TIMEOUT_MS, || (pool.idle(), pool.allocated()) == want);
    (pool.idle(), pool.allocated())
}

pub(crate) fn pattern(seed: u8, out: &mut [u8]) {
    for (i, b) in out.iter_mut().enumerate() {
        *b = seed.wrapping_add((i % 251) as u8).wrapping_mul(7);
    }
}

/// Posts `op` from the client over `segments` and waits for its completion.
pub(crate) fn client_op<E: Into<SgEntry>>(
    pair: &Pair,
    segments: impl IntoIterator<Item = E>,
    op: SendOp,
) -> Result<WorkCompletion> {
    op_on(&pair.client, segments, op)
}

/// Posts `op` on `ep` over `segments` and waits for its completion.
pub(crate) fn op_on<E: Into<SgEntry>>(
    ep: &Endpoint,
    segments: impl IntoIterator<Item = E>,
    op: SendOp,
) -> Result<WorkCompletion> {
    op_with(ep, |w| WorkRequest::new(w, segments), op)
}

/// Posts `op` on `ep` as the work request `build` makes for a waiter, and
/// waits for its completion.
pub(crate) fn op_with(
    ep: &Endpoint,
    build: impl FnOnce(Arc<Waiter>) -> Result<Arc<WorkRequest<Arc<Waiter>>>>,
    op: SendOp,
) -> Result<WorkCompletion> {
    let waiter = Waiter::new()?;
    let wr = build(waiter.clone())?;
    step("post_send", ep.post_send(wr, op))?;
    waiter.wait()
}

/// Client `who` (its own queue pair `ep`) RDMA-Writes a foreign pattern to
/// a server sink at `addr` with `key`: the write must fail. On IB/RoCE the
/// responder's NAK fails the Write's completion; on iWARP a Write completes
/// at the requester once sent, and the responder's refusal (a Terminate)
/// moves the queue pair to error, so a Write posted after it completes in
/// error (flush): repeated, every 20 ms for up to [`STEP_TIMEOUT_MS`]
/// (a busy host delays the Terminate), until one does.
fn foreign_write_fails(who: &str, ep: &Endpoint, addr: u64, key: u32) -> Result {
    let src = ep.alloc_buf(BULK_LEN, DmaDir::ToDevice)?;
    let mut bytes = KVec::from_elem(0u8, BULK_LEN, GFP_KERNEL)?;
    pattern(0xee, &mut bytes);
    src.write(0, &bytes)?;
    for attempt in 0..STEP_TIMEOUT_MS / 20 {
        let wc = op_on(
            ep,
            one_segment(&src, BULK_LEN)?,
            SendOp::RdmaWrite {
                remote_addr: addr,
                rkey: key,
            },
        )?;
        if !wc.is_ok() {
            pr_info!(
                "client {} RDMA Write to sink key {:#x}: attempt {} status {}\n",
                who,
                key,
                attempt,
                wc.status
            );
            return Ok(());
        }
        kernel::time::delay::fsleep(kernel::time::Delta::from_millis(20));
    }
    pr_err!(
        "client {}: RDMA Write to sink key {:#x} never failed\n",
        who,
        key
    );
    // A case returning an error fails.
    Err(EIO)
}

/// A completion handler that holds an endpoint: when its work request is
/// done with, the endpoint's reference goes with it, on the endpoint's own
/// completion work. It waits for `go` first, so that the test's own
/// reference is gone by then.
struct HoldsEndpoint {
    ep: Arc<Endpoint>,
    go: Arc<Completion>,
}

impl CompletionHandler for HoldsEndpoint {
    fn complete(&self, _wr: &Arc<WorkRequest<Self>>, _wc: &WorkCompletion) {
        self.go.wait_for_completion();
        let _ = &self.ep;
    }
}

#[kunit_tests(rpcrdma_rs_verbs)]
mod tests {
    use super::*;

    #[test]
    fn device_discovery_finds_rdma_device() {
        let mut names = 0;
        device::for_each(|d| {
            pr_info!("device {} max_qp_wr {}\n", d.name(), d.attr.max_qp_wr);
            if !d.name().is_empty() && d.attr.max_qp_wr > 0 {
                names += 1;
            }
        });
        assert!(names >= 1);
    }

    #[test]
    fn per_cpu_counter_sums_and_resets() {
        let c = PerCpuCounter::new(percpu::TEST_SLOT);
        c.reset();
        c.add(5);
        c.add(-2);
        assert_eq!(c.sum(), 3);
        c.count(7);
        assert_eq!(c.value(), 10);
        c.reset();
        assert_eq!(c.sum(), 0);
        // A count that dips below 0 (a reset racing with adds) reads 0.
        c.add(-1);
        assert_eq!(c.sum(), -1);
        assert_eq!(c.value(), 0);
        c.reset();
    }

    #[test]
    fn per_cpu_count_of_one_object_sums_its_adds() -> Result {
        let a = PerCpuCount::new()?;
        let b = PerCpuCount::new()?;
        assert_eq!(a.sum(), 0);
        for i in 0..1000 {
            a.add(3);
            if i % 100 == 0 {
                // A sleep: the adds after it may run on another CPU.
                kernel::time::delay::fsleep(kernel::time::Delta::from_micros(50));
            }
            a.add(-1);
        }
        b.add(-5);
        assert_eq!(a.sum(), 2000);
        assert_eq!(b.sum(), -5);
        drop(a);
        // A new allocation starts at 0 on every CPU.
        let c = PerCpuCount::new()?;
        assert_eq!(c.sum(), 0);
        Ok(())
    }

    #[test]
    fn connect_and_send_receive() -> Result {
        let pair = connect_pair()?;
        let recv_buf = pair.server.alloc_buf(4096, DmaDir::FromDevice)?;
        let recv_wait = Waiter::new()?;
        let recv_wr = WorkRequest::new(recv_wait.clone(), one_segment(&recv_buf, 4096)?)?;
        pair.server.post_recv(recv_wr)?;

        let msg = b"RPC-over-RDMA v1 hello from rpcrdma-rs";
        let send_buf = pair.client.alloc_buf(msg.len(), DmaDir::ToDevice)?;
        send_buf.write(0, msg)?;
        let sent = client_op(&pair, one_segment(&send_buf, msg.len())?, SendOp::Send)?;
        assert!(sent.is_ok());

        let got = recv_wait.wait()?;
        assert!(got.is_ok());
        assert_eq!(got.byte_len as usize, msg.len());
        let mut back = [0u8; 38];
        recv_buf.read(0, &mut back)?;
        assert!(back[..] == msg[..]);
        Ok(())
    }

    #[test]
    fn completed_sends_reuse_their_allocation() -> Result {
        let pair = connect_pair()?;
        let wrs = WrPool::new(1)?;
        let holder = Arc::pin_init(
            pin_init!(PoolHolder {
                wrs <- wrs,
            }),
            GFP_KERNEL,
        )?;
        let recv_buf = pair.server.alloc_buf(4096, DmaDir::FromDevice)?;
        let send_buf = pair.client.alloc_buf(64, DmaDir::ToDevice)?;
        let mut first = 0usize;
        for (round, msg) in [&b"first Send"[..], &b"second, longer Send"[..]]
            .into_iter()
            .enumerate()
        {
            let recv_wait = Waiter::new()?;
            let recv_wr = WorkRequest::new(recv_wait.clone(), one_segment(&recv_buf, 4096)?)?;
            pair.server.post_recv(recv_wr)?;
            send_buf.write(0, msg)?;
            let waiter = Waiter::new()?;
            let handler = Pooled {
                waiter: waiter.clone(),
                pool: holder.clone(),
            };
            let wr = WorkRequest::new(handler, one_segment(&send_buf, msg.len())?)?;
            let at = Arc::as_ptr(&wr) as usize;
            if round == 0 {
                first = at;
            } else {
                // Built in the allocation the first Send gave back.
                assert_eq!(at, first);
                assert_eq!(holder.wrs.kept(), 0);
            }
            pair.client.post_send(wr, SendOp::Send)?;
            assert!(waiter.wait()?.is_ok());
            let got = recv_wait.wait()?;
            assert!(got.is_ok());
            assert_eq!(got.byte_len as usize, msg.len());
            let mut back = [0u8; 32];
            recv_buf.read(0, &mut back[..msg.len()])?;
            assert!(back[..msg.len()] == msg[..]);
            // Given back, emptied: the buffer it named is only ours again.
            wait_kept(&holder.wrs, 1)?;
        }
        Ok(())
    }

    #[test]
    fn rdma_write_gathers_multi_page_buffer() -> Result {
        let pair = connect_pair()?;
        let target = pair.server.alloc_buf(BULK_LEN, DmaDir::FromDevice)?;
        let Some((addr, rkey)) = pair.expose(&target)? else {
            return Err(EINVAL);
        };
        // Four 4-page source buffers gathered by one work request.
        let quarter = BULK_LEN / 4;
        let mut segments = KVec::new();
        let mut expect = KVec::from_elem(0u8, BULK_LEN, GFP_KERNEL)?;
        for (i, chunk) in expect.chunks_mut(quarter).enumerate() {
            pattern(i as u8 + 1, chunk);
            let src = pair.client.alloc_buf(quarter, DmaDir::ToDevice)?;
            src.write(0, chunk)?;
            segments.push(
                Segment {
                    buf: src,
                    offset: 0,
                    len: quarter,
                },
                GFP_KERNEL,
            )?;
        }
        let wc = client_op(
            &pair,
            segments,
            SendOp::RdmaWrite {
                remote_addr: addr,
                rkey,
            },
        )?;
        assert!(wc.is_ok());
        let mut got = KVec::from_elem(0u8, BULK_LEN, GFP_KERNEL)?;
        target.read(0, &mut got)?;
        assert!(got[..] == expect[..]);
        Ok(())
    }

    #[test]
    fn rdma_read_multi_page_buffer() -> Result {
        let pair = connect_pair()?;
        let source = pair.server.alloc_buf(BULK_LEN, DmaDir::ToDevice)?;
        let handle = pair.expose(&source)?.ok_or(EINVAL)?;
        let sink = pair.client.alloc_buf(BULK_LEN, DmaDir::FromDevice)?;
        read_pattern_into(&pair, &source, handle, &sink, 0x5a)
    }

    /// The server's RDMA Reads into pages (`svc_memreg=direct`): one Read
    /// scattered over page sinks (pages mapped as a request's are),
    /// starting inside the first page as a piece of a client's unaligned
    /// segment may, and the pages then handed on: they keep the bytes
    /// after the sinks are gone. Devices whose sinks need a registration
    /// (iWARP) or that scatter a Read over too few entries never take this
    /// path (`svcrdma/accept.rs`, `paged_reads_fit`): nothing to check
    /// there.
    #[test]
    fn rdma_read_scatters_into_page_sinks() -> Result {
        let pair = connect_pair()?;
        let attr = *pair.client.device_attr();
        if pair.client.pd().is_iwarp() || attr.max_sge_rd < 4 || pair.client.max_send_sge() < 4 {
            return Ok(());
        }
        let source = pair.server.alloc_buf(CHUNK_LEN, DmaDir::ToDevice)?;
        let sinks = fresh_sinks(&pair.client, CHUNK_PAGES)?;
        let build = |w| {
            let wr = WorkRequest::with_sinks(w, &sinks, CHUNK_OFF, CHUNK_LEN)?;
            assert_eq!(wr.sge_count(), CHUNK_PAGES);
            Ok(wr)
        };
        read_chunk_into_pages(&pair, &source, &sinks, build, 0x3c)?;
        // The pages are handed on, with the sinks' references, holding
        // what was read; the sinks map nothing after, and hand nothing
        // over twice.
        let maps = live::count(live::Kind::MappedBuf);
        let pages = sinks.take_received_pages()?;
        assert_eq!(pages.len(), CHUNK_PAGES);
        assert_eq!(
            live::count(live::Kind::MappedBuf),
            maps - CHUNK_PAGES as i64
        );
        assert_eq!(sinks.take_received_pages().err(), Some(EINVAL));
        assert_eq!(sinks.read(1, 0, &mut [0u8; 8]).err(), Some(EINVAL));
        let mut expect = KVec::from_elem(0u8, CHUNK_LEN, GFP_KERNEL)?;
        pattern(0x3c, &mut expect);
        let mut first = [0u8; 8];
        pages[1].read(0, &mut first)?;
        let at = kernel::page::PAGE_SIZE - CHUNK_OFF;
        assert!(first[..] == expect[at..at + first.len()]);
        drop(sinks);
        pages[1].read(0, &mut first)?;
        assert!(first[..] == expect[at..at + first.len()]);
        Ok(())
    }

    /// The server's RDMA Reads into pages on iWARP (`svc_memreg=direct`,
    /// `svcrdma/rw.rs` `ReadSinks::RegisteredPages`): a Read lands in page
    /// sinks through an MR of a connection's pool registered over them,
    /// starting inside the first page; the Read invalidates it and the MR
    /// goes back to the pool, to be registered with a new key for the next
    /// Read over the same pages. An MR registered for a Read that never
    /// ran is freed, not pooled (its key may be valid); a pool run dry
    /// allocates. The key a Read used no longer writes the pages (audit
    /// finding 2). Other devices scatter Reads over the pages with no
    /// registration: nothing to check there.
    #[test]
    fn rdma_read_lands_in_pages_through_a_pooled_registration() -> Result {
        let pair = connect_pair()?;
        if !pair.client.pd().is_iwarp() {
            return Ok(());
        }
        let source = pair.server.alloc_buf(CHUNK_LEN, DmaDir::ToDevice)?;
        let sinks = fresh_sinks(&pair.client, CHUNK_PAGES)?;
        let pool = SinkMrPool::new(pair.client.pd(), 8, 1)?;
        // Registers a run over the pages and reads `seed`'s pattern
        // through it; returns the run and the key the Read used.
        let read_through = |seed: u8| -> Result<(Arc<MappedBuf>, u32)> {
            let run = pair
                .client
                .register_page_run(&pool, &sinks, CHUNK_OFF, CHUNK_LEN)?;
            assert!(run.sink_registers_per_use());
            run.post_sink_registration(&pair.client)?;
            let key = run.sink_key().ok_or(EINVAL)?;
            let one = one_segment(&run, CHUNK_LEN)?;
            let build = |w| WorkRequest::new(w, one);
            read_chunk_into_pages(&pair, &source, &sinks, build, seed)?;
            // The CPU reaches the pages, never the registration.
            let mut byte = [0u8; 1];
            assert_eq!(run.read(0, &mut byte), Err(EPERM));
            Ok((run, key))
        };
        let (run, first_key) = read_through(0x5d)?;
        assert_eq!(pool.idle(), 0);
        drop(run);
        assert_eq!(pool_settles(&pool, (1, 1)), (1, 1));
        let (run, second_key) = read_through(0x6e)?;
        assert!(second_key != first_key);
        drop(run);
        assert_eq!(pool_settles(&pool, (1, 1)), (1, 1));
        // Registered, never read: its key may be valid, so it is freed
        // (after a later Read on the queue pair, which the registration
        // preceded, completed); the Read took a new MR.
        let armed = pair
            .client
            .register_page_run(&pool, &sinks, CHUNK_OFF, CHUNK_LEN)?;
        armed.post_sink_registration(&pair.client)?;
        let (run, third_key) = read_through(0x7f)?;
        assert_eq!(pool.allocated(), 2);
        let run_addr = run.dma_addr();
        drop(run);
        drop(armed);
        assert_eq!(pool_settles(&pool, (1, 2)), (1, 2));
        // The key the last Read carried no longer writes the pages.
        foreign_write_fails("self", &pair.server, run_addr, third_key)?;
        Ok(())
    }

    /// A Send gathered from a buffer filled in place and a mapped page
    /// (the client's inline call with its page data mapped, marshal.rs
    /// `map_send_pages`): header, then page bytes at an offset inside the
    /// page, then a tail from the same buffer behind the header. The page
    /// is filled the way the server fills one, by an RDMA Read into a page
    /// sink, and handed on to the mapping.
    #[test]
    fn send_gathers_header_mapped_page_and_tail() -> Result {
        let pair = connect_pair()?;
        if pair.client.max_send_sge() < 3 {
            return Ok(());
        }
        let Some((sink, data)) = client_page_with(&pair, 0x42)? else {
            return Ok(());
        };
        let (off, len) = (100, 2000);
        let page = pair.client.map_page(sink, off, len)?;

        let recv_buf = pair.server.alloc_buf(4096, DmaDir::FromDevice)?;
        let recv_wait = Waiter::new()?;
        pair.server.post_recv(WorkRequest::new(
            recv_wait.clone(),
            one_segment(&recv_buf, 4096)?,
        )?)?;
        let (head, tail) = (b"transport header", b"and tail");
        let buf = pair.client.alloc_buf(64, DmaDir::ToDevice)?;
        let used = buf.fill(|out| {
            out[..head.len()].copy_from_slice(head);
            out[head.len()..head.len() + tail.len()].copy_from_slice(tail);
            Ok(head.len() + tail.len())
        })?;
        assert_eq!(used, head.len() + tail.len());
        let segment = |buf: &Arc<MappedBuf>, offset, len| {
            SgEntry::from(Segment {
                buf: buf.clone(),
                offset,
                len,
            })
        };
        let segments = [
            segment(&buf, 0, head.len()),
            SgEntry::from(page),
            segment(&buf, head.len(), tail.len()),
        ];
        assert!(client_op(&pair, segments, SendOp::Send)?.is_ok());
        let got = recv_wait.wait()?;
        assert!(got.is_ok());
        let total = head.len() + len + tail.len();
        assert_eq!(got.byte_len as usize, total);
        let mut back = KVec::from_elem(0u8, total, GFP_KERNEL)?;
        recv_buf.read(0, &mut back)?;
        assert!(back[..head.len()] == head[..]);
        assert!(back[head.len()..head.len() + len] == data[off..off + len]);
        assert!(back[head.len() + len..] == tail[..]);
        Ok(())
    }

    /// An RDMA Write straight from pages each mapped for it alone
    /// (`Endpoint::map_page`, as the client maps an inline call's page
    /// data, marshal.rs `map_send_pages`): the end of one page, a whole
    /// page and the start of a third land in order in the peer's buffer,
    /// and the mappings are undone with the work request (none is left
    /// once the connections are gone).
    #[test]
    fn rdma_write_from_mapped_pages() -> Result {
        let before = live::count(live::Kind::MappedBuf);
        {
            let pair = connect_pair()?;
            if pair.client.max_send_sge() < 3 {
                return Ok(());
            }
            let page_size = kernel::page::PAGE_SIZE;
            let mut pages = KVec::new();
            for seed in [0x21u8, 0x43, 0x65] {
                let Some(page) = client_page_with(&pair, seed)? else {
                    return Ok(());
                };
                pages.push(page, GFP_KERNEL)?;
            }
            let spans = [(100, page_size - 100), (0, page_size), (0, 500)];
            let total: usize = spans.iter().map(|(_, l)| l).sum();
            let sink = pair.server.alloc_buf(total, DmaDir::FromDevice)?;
            let (addr, rkey) = pair.expose(&sink)?.ok_or(EINVAL)?;
            let mut expect = KVec::with_capacity(total, GFP_KERNEL)?;
            let mut mapped = KVec::with_capacity(spans.len(), GFP_KERNEL)?;
            for ((page, data), (off, len)) in pages.into_iter().zip(spans) {
                expect.extend_from_slice(&data[off..off + len], GFP_KERNEL)?;
                mapped.push(pair.client.map_page(page, off, len)?, GFP_KERNEL)?;
            }
            let write = SendOp::RdmaWrite {
                remote_addr: addr,
                rkey,
            };
            assert!(client_op(&pair, mapped, write)?.is_ok());
            let mut got = KVec::from_elem(0u8, total, GFP_KERNEL)?;
            sink.read(0, &mut got)?;
            assert!(got[..] == expect[..]);
        }
        // The pages were unmapped with their work request: no mapping of
        // the test outlives the drained connections.
        assert_eq!(live::count(live::Kind::MappedBuf), before);
        Ok(())
    }

    /// An RDMA Write straight from a run of pages referenced and mapped
    /// in one call for it alone (the server's Write chunks from a Reply's
    /// pages, rw.rs `write_chunk_direct`, `WorkRequest::with_pages`): the
    /// end of one page, a whole page and the start of a third land in
    /// order in the peer's buffer; a range that does not span exactly its
    /// pages is refused; the pages' references and mappings go with the
    /// work request (none is left once the connections are gone).
    #[test]
    fn rdma_write_from_a_page_run() -> Result {
        let before = live::count(live::Kind::MappedBuf);
        {
            let pair = connect_pair()?;
            if pair.client.max_send_sge() < 3 {
                return Ok(());
            }
            let page_size = kernel::page::PAGE_SIZE;
            let Some((pages, data)) = client_pages_with(&pair, [0x12, 0x34, 0x56])? else {
                return Ok(());
            };
            let (off, total) = (100, 2 * page_size - 100 + 500);
            let sink = pair.server.alloc_buf(total, DmaDir::FromDevice)?;
            let (addr, rkey) = pair.expose(&sink)?.ok_or(EINVAL)?;
            // Two pages' bytes over three pages, and four pages' over three.
            assert_eq!(
                PageRange::of_refs(&pages, off, page_size).err(),
                Some(EINVAL)
            );
            assert_eq!(
                PageRange::of_refs(&pages, 0, 3 * page_size + 1).err(),
                Some(EINVAL)
            );
            let range = PageRange::of_refs(&pages, off, total)?;
            let write = SendOp::RdmaWrite {
                remote_addr: addr,
                rkey,
            };
            let build = |w| {
                let wr = WorkRequest::with_pages(w, &pair.client, range)?;
                assert_eq!(wr.sge_count(), 3);
                Ok(wr)
            };
            assert!(op_with(&pair.client, build, write)?.is_ok());
            // The test's own references are the pages' only others.
            drop(pages);
            let mut got = KVec::from_elem(0u8, total, GFP_KERNEL)?;
            sink.read(0, &mut got)?;
            assert!(got[..] == data[off..off + total]);
        }
        // The pages were unmapped with their work request: no mapping of
        // the test outlives the drained connections.
        assert_eq!(live::count(live::Kind::MappedBuf), before);
        Ok(())
    }

    /// The server registration cache's sink path on this device: a slab
    /// object mapped and given an MR, used by two RDMA Reads: on iWARP
    /// (remote write access) registered before each Read, which invalidates
    /// it; elsewhere (local write only) registered once.
    #[test]
    fn rdma_read_into_registered_slab_sink() -> Result {
        let pair = connect_pair()?;
        let slab = SlabCache::new(c"rpcrdma_rs_kunit_sink", BULK_LEN, 4096)?;
        let source = pair.server.alloc_buf(BULK_LEN, DmaDir::ToDevice)?;
        let handle = pair.expose(&source)?.ok_or(EINVAL)?;
        let sink = MappedBuf::from_slab(pair.client.pd(), slab.alloc()?, DmaDir::FromDevice, true)?;
        assert!(sink.has_sink_mr());
        let per_use = sink.sink_registers_per_use();
        assert_eq!(per_use, pair.client.pd().is_iwarp());
        sink.post_sink_registration(&pair.client)?;
        for (i, seed) in [0x11u8, 0x77].into_iter().enumerate() {
            if i > 0 && per_use {
                sink.post_sink_registration(&pair.client)?;
            }
            read_pattern_into(&pair, &source, handle, &sink, seed)?;
        }
        assert_eq!(slab.registrations(), if per_use { 2 } else { 1 });
        assert_eq!(slab.live(), 1);
        drop(sink);
        // The last Read's request holds the sink until its completion has
        // run its handler (which woke this thread) and let the request go.
        assert!(wait_for(STEP_TIMEOUT_MS, || slab.live() == 0).is_ok());
        assert_eq!(slab.deregistrations(), 1);
        Ok(())
    }

    /// The registration cache on this device with `force_mr`, shared by two
    /// server connections (A's and B's) on the device's one PD: a miss
    /// creates a sink for client A's Read (A learns its key and address: an
    /// iWARP Read Request carries them), a hit hands the same sink to client
    /// B's Read. A's RDMA Write (its own QP) to the key it saw, after B's
    /// registration and before B's Read, fails, and B's data verifies; once
    /// B's Read completed, B's own key no longer writes the sink either
    /// (audit finding 2). On iWARP each use registers (new key, remote
    /// write, invalidated by the Read), elsewhere the sink is registered
    /// once with local write only. Then the shrinker frees the idle sink
    /// (deregistering it from its work item). The only case that creates
    /// the kunit module's cache (it can be initialised once per module).
    #[test]
    fn registration_cache_keeps_clients_apart_and_shrinks() -> Result {
        const SPECS: [ClassSpec; 1] = [ClassSpec {
            name: c"rpcrdma_rs_kunit_rc",
            size: BULK_LEN,
            dir: DmaDir::FromDevice,
            read_sink: true,
        }];
        let rc = RegCache::new(&SPECS, true, true, 4)?;
        let (pair_a, user_a) = connect_pair_on(true)?;
        let user_a = user_a.ok_or(EINVAL)?;
        let (pair_b, user_b) = connect_pair_on(true)?;
        let user_b = user_b.ok_or(EINVAL)?;
        let per_use = pair_a.client.pd().is_iwarp();
        // Client A's Read: a miss.
        let src_a = pair_a.server.alloc_buf(BULK_LEN, DmaDir::ToDevice)?;
        let handle_a = pair_a.expose(&src_a)?.ok_or(EINVAL)?;
        let got = user_a.get(0, &pair_a.client)?;
        assert!(!got.hit);
        assert!(got.needs_registration);
        got.buf.post_sink_registration(&pair_a.client)?;
        read_pattern_into(&pair_a, &src_a, handle_a, &got.buf, 0x21)?;
        // What A's Read Request carried (iWARP Data Sink STag and TO).
        let seen = (got.buf.dma_addr(), got.buf.sink_key().ok_or(EINVAL)?);
        user_a.put(0, got.buf.clone());
        let sink = got.buf;
        // Client B's Read: a hit on the same sink.
        let src_b = pair_b.server.alloc_buf(BULK_LEN, DmaDir::ToDevice)?;
        let handle_b = pair_b.expose(&src_b)?.ok_or(EINVAL)?;
        let got = user_b.get(0, &pair_b.client)?;
        assert!(got.hit);
        assert!(Arc::ptr_eq(&got.buf, &sink));
        assert_eq!(got.needs_registration, per_use);
        if got.needs_registration {
            got.buf.post_sink_registration(&pair_b.client)?;
            assert!(got.buf.sink_key() != Some(seen.1));
        }
        foreign_write_fails("A", &pair_a.server, seen.0, seen.1)?;
        read_pattern_into(&pair_b, &src_b, handle_b, &got.buf, 0x42)?;
        // B's key does not outlive B's Read.
        let key_b = got.buf.sink_key().ok_or(EINVAL)?;
        foreign_write_fails("B", &pair_b.server, seen.0, key_b)?;
        let mut expect = KVec::from_elem(0u8, BULK_LEN, GFP_KERNEL)?;
        pattern(0x42, &mut expect);
        let mut now = KVec::from_elem(0u8, BULK_LEN, GFP_KERNEL)?;
        got.buf.read(0, &mut now)?;
        assert!(now[..] == expect[..]);
        user_b.put(0, got.buf.clone());
        drop(got);
        drop(sink);
        let c = regcache::class_counters(0).ok_or(EINVAL)?;
        let regs = if per_use { 2 } else { 1 };
        assert_eq!((c.hits, c.misses, c.registrations), (1, 1, regs));
        assert_eq!(c.entries, 1);
        assert_eq!(regcache::shrink_now(8), 1);
        // The sink's MR is deregistered by the cache's work item (within
        // 2 s; the counters below say whether it was).
        let _ = wait_for(2000, || {
            regcache::class_counters(0).is_none_or(|c| c.entries == 0)
        });
        let c = regcache::class_counters(0).ok_or(EINVAL)?;
        assert_eq!((c.evictions, c.deregistrations, c.entries), (1, 1, 0));
        drop(pair_a);
        drop(pair_b);
        drop(user_a);
        drop(user_b);
        drop(rc);
        Ok(())
    }

    #[test]
    fn bad_rkey_completes_with_error() -> Result {
        let pair = connect_pair()?;
        let target = pair.server.alloc_buf(4096, DmaDir::FromDevice)?;
        let Some((addr, rkey)) = pair.expose(&target)? else {
            return Err(EINVAL);
        };
        if pair.client.pd().is_iwarp() {
            // An iWARP Write completes at the requester once sent; the
            // responder's refusal terminates the connection instead.
            return foreign_write_fails("bad-rkey", &pair.client, addr, rkey ^ 0x00ff_ff00);
        }
        let src = pair.client.alloc_buf(4096, DmaDir::ToDevice)?;
        let wc = client_op(
            &pair,
            one_segment(&src, 4096)?,
            SendOp::RdmaWrite {
                remote_addr: addr,
                rkey: rkey ^ 0x00ff_ff00,
            },
        )?;
        pr_info!("bad rkey completion status {}\n", wc.status);
        // An error, reported as a completion (not a hang), and not a flush:
        // the responder refused the access.
        assert!(!wc.is_ok());
        assert!(!wc.is_flush());
        Ok(())
    }

    #[test]
    fn teardown_flushes_and_releases_everything() -> Result {
        let before = live::total();
        let waiter = Waiter::new()?;
        {
            let pair = connect_pair()?;
            let buf = pair.server.alloc_buf(4096, DmaDir::FromDevice)?;
            // A Receive that no Send will match: only the drain completes it.
            let wr = WorkRequest::new(waiter.clone(), one_segment(&buf, 4096)?)?;
            pair.server.post_recv(wr)?;
            assert!(live::count(live::Kind::PostedWr) >= 1);
        }
        let flushed = waiter.wait()?;
        assert!(flushed.is_flush());
        assert_eq!(live::total(), before);
        Ok(())
    }

    /// Nothing reaches a queue pair after the drain that ends its
    /// connection: a Receive or a Send posted then is refused
    /// (`ESHUTDOWN`), and no work request stays queued.
    #[test]
    fn nothing_is_posted_after_the_drain() -> Result {
        let pair = connect_pair()?;
        pair.server.drain();
        pair.client.drain();
        let posted = live::count(live::Kind::PostedWr);
        let buf = pair.server.alloc_buf(4096, DmaDir::FromDevice)?;
        let recv = WorkRequest::new(Waiter::new()?, one_segment(&buf, 4096)?)?;
        assert!(matches!(pair.server.post_recv(recv), Err(e) if e == ESHUTDOWN));
        let msg = pair.client.alloc_buf(64, DmaDir::ToDevice)?;
        let send = WorkRequest::new(Waiter::new()?, one_segment(&msg, 64)?)?;
        assert!(matches!(pair.client.post_send(send, SendOp::Send), Err(e) if e == ESHUTDOWN));
        assert_eq!(live::count(live::Kind::PostedWr), posted);
        Ok(())
    }

    /// The last reference to an endpoint goes with a completion on its own
    /// CQ, as a late completion after its connection was closed does: the
    /// queue pair is torn down off that CQ's work, not on it (there the
    /// drain would wait for the worker that runs it, for ever).
    #[test]
    fn endpoint_dropped_by_its_own_completion_is_torn_down() -> Result {
        let before = live::count(live::Kind::Qp);
        let Pair {
            client,
            server,
            _listener,
            exposed: _exposed,
        } = connect_pair()?;
        let recv_buf = server.alloc_buf(64, DmaDir::FromDevice)?;
        server.post_recv(WorkRequest::new(
            Waiter::new()?,
            one_segment(&recv_buf, 64)?,
        )?)?;
        let client = Arc::new(client, GFP_KERNEL)?;
        let go = Arc::pin_init(Completion::new(), GFP_KERNEL)?;
        let msg = client.alloc_buf(64, DmaDir::ToDevice)?;
        let handler = HoldsEndpoint {
            ep: client.clone(),
            go: go.clone(),
        };
        let posted = client.post_send(
            WorkRequest::new(handler, one_segment(&msg, 64)?)?,
            SendOp::Send,
        );
        drop(msg);
        drop(client);
        go.complete_all();
        posted?;
        // Only the server's queue pair is left once the client's is gone.
        let gone = wait_for(5000, || live::count(live::Kind::Qp) == before + 1);
        assert!(gone.is_ok());
        Ok(())
    }
}
