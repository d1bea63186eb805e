// SPDX-License-Identifier: GPL-2.0

//! Send contexts on a free list (`rust/rdma/send_pool.rs`, the server's
//! Replies) on a real (soft-RoCE) device: work requests chained ahead of a
//! pooled Send complete with it, in order, and are reported with it; a
//! context comes back to the list when its Send completes and is reused;
//! the pool makes no more than its bound; a drain leaves nothing posted;
//! a context's own RDMA Writes land before its Send arrives, and their
//! pages are let go when it completes, those it holds itself too.

use crate::client_tests::{server_recvs, writable_by_client, Counted, Log};
use crate::rust::module::live;
use crate::rust::rdma::ring_owner::impl_ring_in;
use crate::rust::rdma::send_chain::SendChain;
use crate::rust::rdma::send_pool::{PooledSend, SendPool, SendPoolOwner};
use crate::rust::rdma::verbs::{DmaDir, PageRange, PageRef, SendOp, WorkCompletion, WorkRequest};
use crate::verbs::{client_pages_with, connect_pair, one_segment, wait_for, Pair};
use kernel::alloc::KVec;
use kernel::page::PAGE_SIZE;
use kernel::prelude::*;
use kernel::sync::atomic::{Atomic, Relaxed};
use kernel::sync::Arc;

/// Bytes of each context's Send buffer.
const BUF: usize = 64;

/// The owner of a send pool, as a server connection's send queue gate
/// is: logs each Send's completion under the number the test gave it, and
/// counts what the completions reported.
#[pin_data]
struct PoolOwner {
    #[pin]
    pool: SendPool<PoolOwner>,
    log: Arc<Log>,
    /// The number the next Send's completion is logged under.
    send_no: Atomic<u32>,
    /// Work requests reported as completed ahead of a Send.
    ahead: Atomic<u32>,
    /// Completions with an error status.
    failed: Atomic<u32>,
}

impl SendPoolOwner for PoolOwner {
    type Ahead = Counted;

    fn sent(&self, ahead: u32, wc: &WorkCompletion) {
        self.ahead.fetch_add(ahead, Relaxed);
        if !wc.is_ok() {
            self.failed.fetch_add(1, Relaxed);
        }
        self.log.record(self.send_no.load(Relaxed), wc.covers);
    }
}

impl_ring_in!(PoolOwner, pool: SendPool<PoolOwner>);

/// A pool of at most `max` contexts for the client's endpoint.
fn pool_owner(max: u32) -> Result<Arc<PoolOwner>> {
    let pool = SendPool::new(BUF, max);
    let log = Log::new()?;
    Arc::pin_init(
        try_pin_init!(PoolOwner {
            pool <- pool,
            log,
            send_no: Atomic::new(0),
            ahead: Atomic::new(0),
            failed: Atomic::new(0),
        }? Error),
        GFP_KERNEL,
    )
}

/// Writes `msg` into `send` and posts it behind `chain` on the client.
fn post(
    pair: &Pair,
    mut send: PooledSend<'_, PoolOwner>,
    chain: &mut SendChain<Counted>,
    msg: &[u8],
) -> Result {
    send.fill(|out| {
        out.get_mut(..msg.len()).ok_or(EINVAL)?.copy_from_slice(msg);
        Ok(msg.len())
    })?;
    send.post_behind(&pair.client, chain, None)
        .map_err(|(e, _)| e)
}

/// Waits until no context of `owner` is posted: its completion has given
/// it back to the free list.
fn wait_idle(owner: &PoolOwner) -> Result {
    wait_for(5_000, || owner.pool.posted() == 0)
        .inspect_err(|_| pr_err!("{} pooled Sends still posted\n", owner.pool.posted()))
}

/// Waits a second at most for the count of live page mappings to come
/// back to `before`, and says both counts if it does not: a check made as
/// soon as the pool is idle failed once (a run beside a benchmark) and
/// passed on the rerun, which a late release on another CPU would explain.
fn mappings_back_to(before: i64) -> Result {
    wait_for(1_000, || live::count(live::Kind::MappedBuf) == before).inspect_err(|_| {
        let now = live::count(live::Kind::MappedBuf);
        pr_err!("{} page mappings live, {} before the test\n", now, before)
    })
}

#[kunit_tests(rpcrdma_rs_send_pool)]
mod tests {
    use super::*;

    /// Two Sends chained ahead of a pooled one go out with it in one
    /// post: all three arrive, in order; the two complete first (their
    /// handlers see `covers` 0), then the pooled Send's completion, which
    /// reports them (`covers` 3 in all); the pool made one context.
    #[test]
    fn chained_work_requests_complete_with_the_pooled_send() -> Result {
        let pair = connect_pair()?;
        let recvs = server_recvs(&pair, 3)?;
        let owner = pool_owner(4)?;
        let log = owner.log.clone();
        let mut chain = SendChain::new();
        for n in 0..2 {
            let buf = pair.client.alloc_buf(BUF, DmaDir::ToDevice)?;
            buf.write(0, b"ahead")?;
            let wr = WorkRequest::new(
                Counted {
                    log: log.clone(),
                    n,
                },
                one_segment(&buf, 5)?,
            )?;
            chain.push(wr, SendOp::Send)?;
        }
        owner.send_no.store(2, Relaxed);
        let send = owner.pool.get(&pair.client).ok_or(ENOBUFS)?;
        post(&pair, send, &mut chain, b"last")?;
        assert!(chain.is_empty());
        assert_eq!(log.wait_for(3)?, 3);
        assert!(log.in_order());
        assert_eq!(log.covered(), 3);
        assert_eq!(owner.ahead.load(Relaxed), 2);
        for (r, len) in recvs.iter().zip([5u32, 5, 4]) {
            let wc = r.wait()?;
            assert!(wc.is_ok());
            assert_eq!(wc.byte_len, len);
        }
        wait_idle(&owner)?;
        assert_eq!(owner.pool.made(), 1);
        Ok(())
    }

    /// Six Sends one after another use one context; three held at once
    /// make three, a fourth is refused (the pool's bound), and once they
    /// are given back unposted they serve again without a new one.
    #[test]
    fn contexts_are_reused_and_bounded() -> Result {
        let pair = connect_pair()?;
        let owner = pool_owner(3)?;
        let recvs = server_recvs(&pair, 6)?;
        for (n, r) in recvs.iter().enumerate() {
            owner.send_no.store(n as u32, Relaxed);
            let send = owner.pool.get(&pair.client).ok_or(ENOBUFS)?;
            post(&pair, send, &mut SendChain::new(), b"one at a time")?;
            assert!(r.wait()?.is_ok());
            wait_idle(&owner)?;
        }
        assert_eq!(owner.log.count(), 6);
        assert!(owner.log.in_order());
        assert_eq!(owner.pool.made(), 1);
        let held = [
            owner.pool.get(&pair.client),
            owner.pool.get(&pair.client),
            owner.pool.get(&pair.client),
        ];
        assert!(held.iter().all(Option::is_some));
        assert_eq!(owner.pool.made(), 3);
        assert!(owner.pool.get(&pair.client).is_none());
        drop(held);
        let again = [owner.pool.get(&pair.client), owner.pool.get(&pair.client)];
        assert!(again.iter().all(Option::is_some));
        assert_eq!(owner.pool.made(), 3);
        Ok(())
    }

    /// A pooled Send written in place through `PooledSend::bytes` and
    /// recorded with `PooledSend::filled`: the bytes lent are the
    /// context's buffer, `filled` refuses a length past its end, and the
    /// bytes recorded are the bytes sent.
    #[test]
    fn a_pooled_send_written_in_place_is_bounded_by_its_buffer() -> Result {
        let pair = connect_pair()?;
        let owner = pool_owner(2)?;
        let recvs = server_recvs(&pair, 1)?;
        let mut send = owner.pool.get(&pair.client).ok_or(ENOBUFS)?;
        assert_eq!(send.filled(BUF + 1), Err(EINVAL));
        let msg = b"pooled, in place";
        let out = send.bytes()?;
        assert_eq!(out.len(), BUF);
        out.get_mut(..msg.len()).ok_or(EINVAL)?.copy_from_slice(msg);
        send.filled(msg.len())?;
        send.post_behind(&pair.client, &mut SendChain::new(), None)
            .map_err(|(e, _)| e)?;
        let wc = recvs[0].wait()?;
        assert!(wc.is_ok());
        assert_eq!(wc.byte_len, msg.len() as u32);
        wait_idle(&owner)?;
        assert_eq!(owner.log.count(), 1);
        Ok(())
    }

    /// Three RDMA Writes from pages in the context itself (a fourth is
    /// refused: it has room for three) and its Send, in one post: the
    /// peer's buffer holds the pages' bytes when the Send arrives, the
    /// completion reports the three with the Send, and every page mapping
    /// is gone afterwards.
    #[test]
    fn a_contexts_own_writes_land_before_its_send() -> Result {
        let pair = connect_pair()?;
        let recvs = server_recvs(&pair, 1)?;
        // The server side registers two pages the client may write.
        let (target, mr) = writable_by_client(&pair, 2 * PAGE_SIZE)?;
        let seg = mr.segment();
        let pages = [PageRef::alloc()?, PageRef::alloc()?];
        let mapped_before = live::count(live::Kind::MappedBuf);
        let owner = pool_owner(2)?;
        let mut send = owner.pool.get(&pair.client).ok_or(ENOBUFS)?;
        // Page 1 to the second page, page 0 to the first, twice.
        for (page, at) in [(1usize, PAGE_SIZE), (0, 0), (0, 0)] {
            let range = PageRange::of_refs(&pages[page..page + 1], 0, PAGE_SIZE)?;
            let addr = seg.offset + at as u64;
            assert!(send.add_write(&pair.client, range, addr, seg.handle)?);
        }
        let range = PageRange::of_refs(&pages[..1], 0, PAGE_SIZE)?;
        assert!(!send.add_write(&pair.client, range, seg.offset, seg.handle)?);
        assert_eq!(send.writes(), 3);
        post(&pair, send, &mut SendChain::new(), b"after the writes")?;
        assert_eq!(owner.log.wait_for(1)?, 1);
        assert_eq!(owner.log.covered(), 4);
        assert_eq!(owner.ahead.load(Relaxed), 3);
        assert_eq!(owner.failed.load(Relaxed), 0);
        assert!(recvs[0].wait()?.is_ok());
        let mut want = KVec::from_elem(0u8, PAGE_SIZE, GFP_KERNEL)?;
        let mut got = KVec::from_elem(0u8, PAGE_SIZE, GFP_KERNEL)?;
        for (page, at) in [(0usize, 0), (1, PAGE_SIZE)] {
            pages[page].read(0, &mut want)?;
            target.read(at, &mut got)?;
            assert!(got[..] == want[..]);
        }
        wait_idle(&owner)?;
        assert_eq!(live::count(live::Kind::MappedBuf), mapped_before);
        Ok(())
    }

    /// Pages given to a context (as a Reply's are, with their references)
    /// are the source of its Writes without a reference of their own: the
    /// end of one page and a whole page, then the start of a third, land
    /// in the peer's buffer before the Send arrives; a Write outside them
    /// is refused; the context puts them when its Send completes. A
    /// context given pages and given back unposted puts them too.
    #[test]
    fn a_context_puts_the_pages_it_holds() -> Result {
        let pair = connect_pair()?;
        if pair.client.max_send_sge() < 2 {
            return Ok(());
        }
        let Some((pages, data)) = client_pages_with(&pair, [0x9a, 0xbc, 0xde])? else {
            return Ok(());
        };
        let recvs = server_recvs(&pair, 1)?;
        let (off, first_len, second_len) = (100, 2 * PAGE_SIZE - 100, 500);
        let total = first_len + second_len;
        let (target, mr) = writable_by_client(&pair, total)?;
        let seg = mr.segment();
        let mut given = KVec::with_capacity(pages.len(), GFP_KERNEL)?;
        for p in pages.iter() {
            given.push(p.clone(), GFP_KERNEL)?;
        }
        let held_before = live::count(live::Kind::HeldPage);
        let mapped_before = live::count(live::Kind::MappedBuf);
        let owner = pool_owner(2)?;
        let mut send = owner.pool.get(&pair.client).ok_or(ENOBUFS)?;
        send.hold_refs(given)?;
        assert_eq!(live::count(live::Kind::HeldPage), held_before + 3);
        let writes = [((0, off, first_len), 0), ((2, 0, second_len), first_len)];
        for (span, at) in writes {
            let addr = seg.offset + at as u64;
            assert!(send.add_held_write(&pair.client, span, addr, seg.handle)?);
        }
        // Past the pages it holds, or a page more than the last.
        for span in [(3, 0, PAGE_SIZE), (2, 8, PAGE_SIZE)] {
            let refused = send.add_held_write(&pair.client, span, seg.offset, seg.handle);
            assert_eq!(refused.err(), Some(EINVAL));
        }
        assert_eq!(send.writes(), 2);
        post(&pair, send, &mut SendChain::new(), b"after the held writes")?;
        assert_eq!(owner.log.wait_for(1)?, 1);
        assert_eq!(owner.log.covered(), 3);
        assert!(recvs[0].wait()?.is_ok());
        let mut got = KVec::from_elem(0u8, total, GFP_KERNEL)?;
        target.read(0, &mut got)?;
        assert!(got[..] == data[off..off + total]);
        wait_idle(&owner)?;
        assert_eq!(live::count(live::Kind::HeldPage), held_before);
        assert!(mappings_back_to(mapped_before).is_ok());
        // Given pages, then given back without a post.
        let mut send = owner.pool.get(&pair.client).ok_or(ENOBUFS)?;
        let mut given = KVec::with_capacity(1, GFP_KERNEL)?;
        given.push(pages[0].clone(), GFP_KERNEL)?;
        send.hold_refs(given)?;
        assert!(send.add_held_write(&pair.client, (0, 0, 64), seg.offset, seg.handle)?);
        drop(send);
        assert_eq!(live::count(live::Kind::HeldPage), held_before);
        assert_eq!(live::count(live::Kind::MappedBuf), mapped_before);
        Ok(())
    }

    /// Pooled Sends the peer has no Receives for fail (receiver not
    /// ready, then flushed) and the drain that ends the connection
    /// follows at once: every Send is reported, with its Write ahead,
    /// nothing stays posted, and every context is free again.
    #[test]
    fn a_drain_leaves_no_pooled_send_posted() -> Result {
        const SENDS: u32 = 3;
        let pair = connect_pair()?;
        let posted_before = live::count(live::Kind::PostedWr);
        let owner = pool_owner(SENDS)?;
        for n in 0..SENDS {
            let buf = pair.client.alloc_buf(BUF, DmaDir::ToDevice)?;
            let mut chain = SendChain::new();
            let wr = WorkRequest::new(
                Counted {
                    log: Log::new()?,
                    n: 0,
                },
                one_segment(&buf, 8)?,
            )?;
            chain.push(wr, SendOp::Send)?;
            let send = owner.pool.get(&pair.client).ok_or(ENOBUFS)?;
            owner.send_no.store(n, Relaxed);
            // Refused once the queue pair is in error: then nothing posted.
            if post(&pair, send, &mut chain, b"unheard").is_err() {
                break;
            }
        }
        pair.client.drain();
        assert_eq!(owner.pool.posted(), 0);
        let sent = owner.log.count();
        pr_info!(
            "{} pooled Sends reported, {} failed, {} ahead\n",
            sent,
            owner.failed.load(Relaxed),
            owner.ahead.load(Relaxed)
        );
        assert!(sent >= 1);
        assert_eq!(owner.failed.load(Relaxed), sent);
        assert_eq!(owner.ahead.load(Relaxed), sent);
        assert_eq!(live::count(live::Kind::PostedWr), posted_before);
        let made = owner.pool.made();
        let free: [_; SENDS as usize] = core::array::from_fn(|_| owner.pool.get(&pair.client));
        assert!(free.iter().take(made as usize).all(Option::is_some));
        assert_eq!(owner.pool.made(), SENDS);
        Ok(())
    }
}
