// SPDX-License-Identifier: GPL-2.0

//! RDMA Reads through completion entries their owner holds
//! (`rust/rdma/read_slots.rs`, the server's Reads of an NFS WRITE into its
//! pages) on a real (soft-RoCE) device: Reads posted at once land in their
//! pieces of the pages and give back their slots, the posted count and
//! their references; a range past the pages is refused with nothing
//! posted; a drain completes a posted Read, and a post after it is refused
//! with everything given back.

use crate::proto::pieces::page_spans;
use crate::rust::module::live;
use crate::rust::rdma::read_slots::{ReadSlots, ReadSlotsOwner, READ_SLOTS};
use crate::rust::rdma::ring_owner::impl_ring_in;
use crate::rust::rdma::verbs::{DmaDir, WorkCompletion};
use crate::rust::sunrpc::page_sinks::PageSinks;
use crate::verbs::{connect_pair, fresh_sinks, pattern, wait_for, Pair};
use kernel::alloc::KVec;
use kernel::page::PAGE_SIZE;
use kernel::prelude::*;
use kernel::sync::atomic::{Atomic, Relaxed};
use kernel::sync::Arc;

/// The owner of Read slots, as a server's Call being read is.
struct SlotOwner {
    slots: ReadSlots<SlotOwner>,
}

/// What the owner's Reads keep for their completions, as the server's keep
/// their connection's queues: counts the completions, and those with an
/// error status.
struct Tally {
    done: Atomic<u32>,
    failed: Atomic<u32>,
}

impl_ring_in!(SlotOwner, slots: ReadSlots<SlotOwner>);

impl ReadSlotsOwner for SlotOwner {
    type Context = Tally;

    fn read_done(_this: Arc<Self>, tally: Arc<Tally>, wc: &WorkCompletion) {
        if !wc.is_ok() {
            tally.failed.fetch_add(1, Relaxed);
        }
        tally.done.fetch_add(1, Relaxed);
    }
}

fn slot_owner() -> Result<(Arc<SlotOwner>, Arc<Tally>)> {
    let owner = Arc::new(
        SlotOwner {
            slots: ReadSlots::new(),
        },
        GFP_KERNEL,
    )?;
    let tally = Arc::new(
        Tally {
            done: Atomic::new(0),
            failed: Atomic::new(0),
        },
        GFP_KERNEL,
    )?;
    Ok((owner, tally))
}

/// An owner, its Reads' tally and the pages they land in.
struct Reader {
    owner: Arc<SlotOwner>,
    tally: Arc<Tally>,
    sinks: Arc<PageSinks>,
}

impl Reader {
    fn new(pair: &Pair, pages: usize) -> Result<Self> {
        let (owner, tally) = slot_owner()?;
        let sinks = fresh_sinks(&pair.client, pages)?;
        Ok(Self {
            owner,
            tally,
            sinks,
        })
    }

    /// Reads `len` bytes at `remote` into bytes `off..` of the pages.
    fn post(&self, pair: &Pair, off: usize, len: usize, remote: u64, rkey: u32) -> Result<bool> {
        ReadSlots::post(
            &self.owner,
            &self.tally,
            &pair.client,
            &self.sinks,
            off,
            len,
            remote,
            rkey,
        )
    }
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

/// Waits until every Read of `owner` completed and gave back its slot and
/// the posted count (both before the owner hears of it).
fn wait_all_done(r: &Reader, posted: u32, posted_before: i64) -> Result {
    let (owner, tally) = (&r.owner, &r.tally);
    wait_for(5_000, || {
        tally.done.load(Relaxed) == posted
            && owner.slots.free() == READ_SLOTS
            && live::count(live::Kind::PostedWr) == posted_before
    })
    .inspect_err(|_| {
        pr_err!(
            "{} of {} Reads completed, {} slots free\n",
            tally.done.load(Relaxed),
            posted,
            owner.slots.free()
        )
    })
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

#[kunit_tests(rpcrdma_rs_read_slots)]
mod tests {
    use super::*;

    /// One Read per slot, each a third of the test chunk, posted at once:
    /// each lands in its piece of the pages; every completion is good and
    /// gives back its slot and the posted count. A range past the pages is
    /// refused before anything is posted.
    #[test]
    fn reads_land_in_their_pieces_and_give_everything_back() -> Result {
        let pair = connect_pair()?;
        if !scatters_into_pages(&pair) {
            return Ok(());
        }
        let source = pair.server.alloc_buf(CHUNK_LEN, DmaDir::ToDevice)?;
        let (addr, rkey) = source.remote_handle().ok_or(EINVAL)?;
        let mut expect = KVec::from_elem(0u8, CHUNK_LEN, GFP_KERNEL)?;
        pattern(0x6b, &mut expect);
        source.write(0, &expect)?;
        let r = Reader::new(&pair, CHUNK_PAGES)?;
        let posted_before = live::count(live::Kind::PostedWr);
        let piece = CHUNK_LEN / READ_SLOTS;
        for i in 0..READ_SLOTS {
            let at = i * piece;
            let remote = addr + at as u64;
            assert!(r.post(&pair, CHUNK_OFF + at, piece, remote, rkey)?);
        }
        wait_all_done(&r, READ_SLOTS as u32, posted_before)?;
        assert_eq!(r.tally.failed.load(Relaxed), 0);
        check_chunk(&r.sinks, &expect)?;
        let past = CHUNK_PAGES * PAGE_SIZE;
        assert_eq!(r.post(&pair, past - 8, 16, addr, rkey), Err(EINVAL));
        assert_eq!(r.owner.slots.free(), READ_SLOTS);
        assert_eq!(live::count(live::Kind::PostedWr), posted_before);
        Ok(())
    }

    /// A Read posted just before the drain that ends the connection
    /// completes (read or flushed) and gives back its slot; a post after
    /// the drain is refused (`ESHUTDOWN`) with its slot and references
    /// given back.
    #[test]
    fn a_drain_completes_a_posted_read_and_refuses_the_next() -> Result {
        let pair = connect_pair()?;
        if !scatters_into_pages(&pair) {
            return Ok(());
        }
        let source = pair.server.alloc_buf(PAGE_SIZE, DmaDir::ToDevice)?;
        let (addr, rkey) = source.remote_handle().ok_or(EINVAL)?;
        let r = Reader::new(&pair, 1)?;
        let posted_before = live::count(live::Kind::PostedWr);
        assert!(r.post(&pair, 0, PAGE_SIZE, addr, rkey)?);
        pair.client.drain();
        wait_all_done(&r, 1, posted_before)?;
        pr_info!(
            "the Read before the drain: {} failed\n",
            r.tally.failed.load(Relaxed)
        );
        assert_eq!(r.post(&pair, 0, PAGE_SIZE, addr, rkey), Err(ESHUTDOWN));
        assert_eq!(r.tally.done.load(Relaxed), 1);
        assert_eq!(r.owner.slots.free(), READ_SLOTS);
        assert_eq!(live::count(live::Kind::PostedWr), posted_before);
        Ok(())
    }
}
