// SPDX-License-Identifier: GPL-2.0

//! RDMA Reads through the read contexts of a connection
//! (`rust/rdma/read_ctxts.rs`, the server's Reads of an NFS WRITE into its
//! pages) on a real (soft-RoCE) device: contexts are claimed up to their
//! number, each claim holding its context's work, and given back with it,
//! the work left for the next claim; Reads of two contexts posted at once land in
//! their pieces of the pages, each completion names its own context, and
//! every entry and the posted count are given back; a chain of Reads
//! completes once, with its count, and lands in its pieces; a range past
//! the pages is refused with nothing posted; a drain completes a posted
//! Read as its context's, and a post after it is refused with everything
//! given back.

use crate::proto::pieces::page_spans;
use crate::rust::kext::park::CountedPark;
use crate::rust::module::live;
use crate::rust::rdma::read_ctxts::{ChainRead, ReadCtxts, ReadCtxtsOwner, READ_SLOTS};
use crate::rust::rdma::ring_owner::impl_ring_in;
use crate::rust::rdma::verbs::{DmaDir, MappedBuf, WorkCompletion};
use crate::rust::sunrpc::page_sinks::PageSinks;
use crate::verbs::{connect_pair, fresh_sinks, pattern, wait_for, Pair};
use kernel::alloc::KVec;
use kernel::page::PAGE_SIZE;
use kernel::prelude::*;
use kernel::sync::atomic::{Atomic, Relaxed};
use kernel::sync::Arc;

/// Contexts of the test owner.
const CTXTS: usize = 2;

/// The owner of read contexts, as a server connection's receive queues
/// are, with a tally per context.
struct CtxtOwner {
    ctxts: ReadCtxts<CtxtOwner>,
    tallies: [Tally; CTXTS],
}

/// What a context's completions did: how many came, the Reads they
/// completed, and how many came with an error status (or naming another
/// context's park, by the hundred).
struct Tally {
    done: Atomic<u32>,
    reads: Atomic<u32>,
    failed: Atomic<u32>,
}

impl Tally {
    const fn new() -> Self {
        Self {
            done: Atomic::new(0),
            reads: Atomic::new(0),
            failed: Atomic::new(0),
        }
    }
}

impl CtxtOwner {
    fn new(ctxts: usize) -> Result<Arc<Self>> {
        let owner = Self {
            ctxts: ReadCtxts::new(ctxts)?,
            tallies: [const { Tally::new() }; CTXTS],
        };
        Ok(Arc::new(owner, GFP_KERNEL)?)
    }
}

impl_ring_in!(CtxtOwner, ctxts: ReadCtxts<CtxtOwner>);

impl ReadCtxtsOwner for CtxtOwner {
    /// A number, as a server's Call being read is its work.
    type Work = u32;

    fn read_done(&self, ctxt: usize, park: &CountedPark<u32>, reads: u32, wc: &WorkCompletion) {
        let Some(tally) = self.tallies.get(ctxt) else {
            return;
        };
        // The completion names the context whose park it was given.
        if self.ctxts.park(ctxt).map(core::ptr::from_ref) != Some(core::ptr::from_ref(park)) {
            tally.failed.fetch_add(100, Relaxed);
        }
        if !wc.is_ok() {
            tally.failed.fetch_add(1, Relaxed);
        }
        tally.reads.fetch_add(reads, Relaxed);
        tally.done.fetch_add(1, Relaxed);
    }
}

/// An owner and the pages its Reads land in.
struct Reader {
    owner: Arc<CtxtOwner>,
    sinks: Arc<PageSinks>,
}

impl Reader {
    fn new(pair: &Pair, pages: usize) -> Result<Self> {
        let owner = CtxtOwner::new(CTXTS)?;
        let sinks = fresh_sinks(&pair.client, pages)?;
        Ok(Self { owner, sinks })
    }

    /// Reads `len` bytes at `remote` into bytes `off..` of the pages
    /// through context `ctxt`.
    fn post(
        &self,
        pair: &Pair,
        ctxt: usize,
        off: usize,
        len: usize,
        remote: u64,
        rkey: u32,
    ) -> Result<bool> {
        let read = ChainRead {
            off,
            len,
            remote_addr: remote,
            rkey,
        };
        let c = &self.owner.ctxts;
        c.post_chain(ctxt, &pair.client, &self.sinks, &[read])
            .map_err(|(e, went)| {
                assert_eq!(went, 0);
                e
            })
    }

    fn tally(&self, ctxt: usize) -> (u32, u32) {
        self.owner
            .tallies
            .get(ctxt)
            .map_or((u32::MAX, u32::MAX), |t| {
                (t.done.load(Relaxed), t.failed.load(Relaxed))
            })
    }
}

/// The index of a context `c` claims, if any, its work left held for
/// good (the context is never given back).
fn claimed(c: &ReadCtxts<CtxtOwner>) -> Option<usize> {
    c.claim().map(|(ctxt, holder)| {
        holder.keep();
        ctxt
    })
}

/// The test chunk: bytes [100, 100 + 3 pages) of four pages, so that each
/// piece starts inside a page, as a piece of a client's unaligned segment
/// may.
const CHUNK_OFF: usize = 100;
const CHUNK_LEN: usize = 3 * PAGE_SIZE;
const CHUNK_PAGES: usize = 4;

/// Whether the client's device scatters a Read over page sinks without a
/// registration (not iWARP, enough entries per Read).
fn scatters_into_pages(pair: &Pair) -> bool {
    let attr = *pair.client.device_attr();
    !pair.client.pd().is_iwarp() && attr.max_sge_rd >= 4 && pair.client.max_send_sge() >= 4
}

/// Waits until context `ctxt` of `r` saw `posted` completions and every
/// entry of every context and the posted count are given back (all
/// before the owner hears of a completion).
fn wait_all_done(r: &Reader, ctxt: usize, posted: u32, posted_before: i64) -> Result {
    let c = &r.owner.ctxts;
    let all_free = || (0..CTXTS).all(|i| c.free(i) == READ_SLOTS);
    wait_for(5_000, || {
        r.tally(ctxt).0 == posted
            && all_free()
            && live::count(live::Kind::PostedWr) == posted_before
    })
    .inspect_err(|_| {
        pr_err!(
            "{} of {} Reads of context {} completed, {} entries free\n",
            r.tally(ctxt).0,
            posted,
            ctxt,
            c.free(ctxt)
        )
    })
}

/// The test chunk on the server's side, filled from `seed`: the buffer
/// the Reads read from, and its bytes.
fn chunk_source(pair: &Pair, seed: u8) -> Result<(Arc<MappedBuf>, KVec<u8>)> {
    let source = pair.server.alloc_buf(CHUNK_LEN, DmaDir::ToDevice)?;
    let mut expect = KVec::from_elem(0u8, CHUNK_LEN, GFP_KERNEL)?;
    pattern(seed, &mut expect);
    source.write(0, &expect)?;
    Ok((source, expect))
}

/// Checks that each page of `sinks` holds its part of `expect`, laid out
/// at [`CHUNK_OFF`].
fn check_chunk(sinks: &PageSinks, expect: &[u8]) -> Result {
    let mut at = 0;
    for span in page_spans(CHUNK_OFF, CHUNK_LEN, PAGE_SIZE).ok_or(EINVAL)? {
        let mut got = KVec::from_elem(0u8, span.len, GFP_KERNEL)?;
        sinks.read(span.page, span.offset, &mut got)?;
        assert!(got[..] == expect[at..at + span.len]);
        at += span.len;
    }
    Ok(())
}

#[kunit_tests(rpcrdma_rs_read_ctxts)]
mod tests {
    use super::*;

    /// Contexts are claimed up to their number, then none; one given back
    /// with its holder is claimed again, with the work the last claim left
    /// in it; a holder given back as another context's gives nothing back.
    #[test]
    fn contexts_are_claimed_up_to_their_number() -> Result {
        let owner = CtxtOwner::new(70)?;
        let c = &owner.ctxts;
        assert_eq!(c.len(), 70);
        let mut holders = KVec::new();
        for i in 0..70 {
            let (ctxt, mut holder) = c.claim().ok_or(EBUSY)?;
            assert_eq!(ctxt, i);
            // A fresh context's work is empty.
            assert_eq!(*holder.value(), None);
            *holder.value() = Some(i as u32);
            holders.push(holder, GFP_KERNEL)?;
        }
        assert!(c.claim().is_none());
        let h65 = holders.remove(65)?;
        let h3 = holders.remove(3)?;
        // As another context's: nothing given back (context 3 stays
        // claimed, never held again).
        c.release(4, h3);
        assert!(c.claim().is_none());
        c.release(65, h65);
        let (ctxt, mut holder) = c.claim().ok_or(EBUSY)?;
        assert_eq!(ctxt, 65);
        assert_eq!(*holder.value(), Some(65));
        assert!(c.claim().is_none());
        // A park held by its claim is not taken.
        assert!(c.park(65).ok_or(EINVAL)?.take().is_none());
        holder.keep();
        for h in holders.drain_all() {
            h.keep();
        }
        Ok(())
    }

    /// Reads of two contexts, one per entry of the first and one of the
    /// second, each a part of the test chunk, posted at once: each lands
    /// in its piece of the pages; every completion is good, names its own
    /// context and gives back its entry and the posted count. A range
    /// past the pages is refused before anything is posted.
    #[test]
    fn reads_land_in_their_pieces_and_give_everything_back() -> Result {
        let pair = connect_pair()?;
        if !scatters_into_pages(&pair) {
            return Ok(());
        }
        let (source, expect) = chunk_source(&pair, 0x6b)?;
        let (addr, rkey) = pair.expose(&source)?.ok_or(EINVAL)?;
        let r = Reader::new(&pair, CHUNK_PAGES)?;
        let (first, second) = (
            claimed(&r.owner.ctxts).ok_or(EBUSY)?,
            claimed(&r.owner.ctxts).ok_or(EBUSY)?,
        );
        let posted_before = live::count(live::Kind::PostedWr);
        let piece = CHUNK_LEN / (READ_SLOTS + 1);
        for i in 0..=READ_SLOTS {
            let at = i * piece;
            let ctxt = if i < READ_SLOTS { first } else { second };
            let remote = addr + at as u64;
            assert!(r.post(&pair, ctxt, CHUNK_OFF + at, piece, remote, rkey)?);
        }
        // Every entry of the first context is posted (or done already).
        wait_all_done(&r, first, READ_SLOTS as u32, posted_before)?;
        wait_all_done(&r, second, 1, posted_before)?;
        assert_eq!(r.tally(first), (READ_SLOTS as u32, 0));
        assert_eq!(r.tally(second), (1, 0));
        check_chunk(&r.sinks, &expect)?;
        let past = CHUNK_PAGES * PAGE_SIZE;
        assert_eq!(r.post(&pair, first, past - 8, 16, addr, rkey), Err(EINVAL));
        assert_eq!(r.owner.ctxts.free(first), READ_SLOTS);
        assert_eq!(live::count(live::Kind::PostedWr), posted_before);
        Ok(())
    }

    /// The test chunk read as one chain of [`READ_SLOTS`] Reads through
    /// one entry: one completion, counting them all, lands every piece
    /// and gives back the entry and the posted count; a chain of more than
    /// [`READ_SLOTS`] Reads, or of none, is refused with nothing posted.
    #[test]
    fn a_chain_of_reads_completes_once() -> Result {
        let pair = connect_pair()?;
        if !scatters_into_pages(&pair) {
            return Ok(());
        }
        let (source, expect) = chunk_source(&pair, 0x3d)?;
        let (addr, rkey) = pair.expose(&source)?.ok_or(EINVAL)?;
        let r = Reader::new(&pair, CHUNK_PAGES)?;
        let ctxt = claimed(&r.owner.ctxts).ok_or(EBUSY)?;
        let posted_before = live::count(live::Kind::PostedWr);
        // Unequal pieces, each starting inside a page.
        let cuts = [0, PAGE_SIZE / 2 + 3, 2 * PAGE_SIZE + 5, CHUNK_LEN];
        let mut reads = [ChainRead {
            off: 0,
            len: 0,
            remote_addr: 0,
            rkey,
        }; READ_SLOTS + 1];
        for (i, read) in reads.iter_mut().take(READ_SLOTS).enumerate() {
            read.off = CHUNK_OFF + cuts[i];
            read.len = cuts[i + 1] - cuts[i];
            read.remote_addr = addr + cuts[i] as u64;
        }
        let c = &r.owner.ctxts;
        assert_eq!(
            c.post_chain(ctxt, &pair.client, &r.sinks, &reads),
            Err((EINVAL, 0))
        );
        assert_eq!(
            c.post_chain(ctxt, &pair.client, &r.sinks, &[]),
            Err((EINVAL, 0))
        );
        assert_eq!(c.free(ctxt), READ_SLOTS);
        let chain: &[ChainRead; READ_SLOTS] = reads[..READ_SLOTS].try_into().map_err(|_| EINVAL)?;
        assert_eq!(c.post_chain(ctxt, &pair.client, &r.sinks, chain), Ok(true));
        wait_all_done(&r, ctxt, 1, posted_before)?;
        assert_eq!(r.tally(ctxt), (1, 0));
        let tally = r.owner.tallies.get(ctxt).ok_or(EINVAL)?;
        assert_eq!(tally.reads.load(Relaxed), READ_SLOTS as u32);
        check_chunk(&r.sinks, &expect)?;
        Ok(())
    }

    /// A Read posted just before the drain that ends the connection
    /// completes (read or flushed) as its context's and gives back its
    /// entry; a post after the drain is refused (`ESHUTDOWN`) with its
    /// entry and references given back.
    #[test]
    fn a_drain_completes_a_posted_read_and_refuses_the_next() -> Result {
        let pair = connect_pair()?;
        if !scatters_into_pages(&pair) {
            return Ok(());
        }
        let source = pair.server.alloc_buf(PAGE_SIZE, DmaDir::ToDevice)?;
        let (addr, rkey) = pair.expose(&source)?.ok_or(EINVAL)?;
        let r = Reader::new(&pair, 1)?;
        let ctxt = claimed(&r.owner.ctxts).ok_or(EBUSY)?;
        let posted_before = live::count(live::Kind::PostedWr);
        assert!(r.post(&pair, ctxt, 0, PAGE_SIZE, addr, rkey)?);
        pair.client.drain();
        wait_all_done(&r, ctxt, 1, posted_before)?;
        pr_info!("the Read before the drain: {} failed\n", r.tally(ctxt).1);
        assert!(r.tally(ctxt).1 < 100);
        assert_eq!(
            r.post(&pair, ctxt, 0, PAGE_SIZE, addr, rkey),
            Err(ESHUTDOWN)
        );
        assert_eq!(r.tally(ctxt).0, 1);
        assert_eq!(r.owner.ctxts.free(ctxt), READ_SLOTS);
        assert_eq!(live::count(live::Kind::PostedWr), posted_before);
        Ok(())
    }
}
