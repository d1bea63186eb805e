// SPDX-License-Identifier: GPL-2.0

//! Receives as receive contexts whose owner decides when each goes back
//! to the device (`rust/rdma/recv_slots.rs`, the server's Receives) on a
//! real (soft-RoCE) device: messages land in the contexts in posting
//! order and the owner receives each context back with its completion; a
//! context is posted again only when its owner hands it back (a context
//! held for its bytes to be read in place once the hold ends), never into
//! other contexts, and its first post happens once; the drain that ends the connection flushes what is
//! posted, and nothing is posted after it.

use crate::rust::module::live;
use crate::rust::rdma::recv_slots::{Recv, RecvBatch, RecvSlots, RecvSlotsOwner};
use crate::rust::rdma::ring_owner::impl_ring_in;
use crate::rust::rdma::verbs::{DmaDir, SendOp, WorkCompletion};
use crate::verbs::{client_op, connect_pair, one_segment, wait_for, Pair};
use kernel::new_spinlock;
use kernel::prelude::*;
use kernel::sync::atomic::{Atomic, Relaxed};
use kernel::sync::{Arc, SpinLock};

/// Receive contexts of the test owner.
const SLOTS: usize = 4;

/// The owner of receive contexts, as a server connection's receive queue
/// is: records each completion's length by context, keeps the contexts
/// handed back (flushed ones too), and counts the completions.
#[pin_data]
struct RecvOwner {
    recvs: RecvSlots<RecvOwner>,
    lens: [Atomic<u32>; SLOTS],
    #[pin]
    kept: SpinLock<[Option<Recv>; SLOTS]>,
    done: Atomic<u32>,
    flushed: Atomic<u32>,
}

impl_ring_in!(RecvOwner, recvs: RecvSlots<RecvOwner>);

impl RecvSlotsOwner for RecvOwner {
    fn received(&self, recv: Recv, wc: &WorkCompletion) {
        let index = recv.index();
        if wc.is_ok() {
            if let Some(len) = self.lens.get(index) {
                len.store(wc.byte_len, Relaxed);
            }
        } else {
            self.flushed.fetch_add(1, Relaxed);
        }
        if let Some(at) = self.kept.lock().get_mut(index) {
            *at = Some(recv);
        }
        self.done.fetch_add(1, Relaxed);
    }
}

impl RecvOwner {
    /// Takes back the context of `index`, which completed.
    fn take(&self, index: usize) -> Result<Recv> {
        self.kept
            .lock()
            .get_mut(index)
            .and_then(Option::take)
            .ok_or(ENOENT)
    }
}

/// [`SLOTS`] receive contexts of 256 bytes on the server's endpoint.
fn recv_owner(pair: &Pair) -> Result<Arc<RecvOwner>> {
    Arc::pin_init(
        try_pin_init!(RecvOwner {
            recvs: RecvSlots::new(&pair.server, SLOTS, 256)?,
            lens: [const { Atomic::new(0) }; SLOTS],
            kept <- new_spinlock!([const { None }; SLOTS], "recv_slots_tests::kept"),
            done: Atomic::new(0),
            flushed: Atomic::new(0),
        }),
        GFP_KERNEL,
    )
}

/// A batch of `recvs`.
fn batch_of(recvs: impl IntoIterator<Item = Recv>) -> Result<RecvBatch<SLOTS>> {
    let mut batch = RecvBatch::default();
    for recv in recvs {
        batch.push(recv).map_err(|_| E2BIG)?;
    }
    Ok(batch)
}

/// Sends `msg` from the client and waits for its completion.
fn send(pair: &Pair, msg: &[u8]) -> Result {
    let buf = pair.client.alloc_buf(msg.len(), DmaDir::ToDevice)?;
    buf.write(0, msg)?;
    let sent = client_op(pair, one_segment(&buf, msg.len())?, SendOp::Send)?;
    assert!(sent.is_ok());
    Ok(())
}

/// Waits until `owner` heard of `n` completions in all.
fn wait_done(owner: &RecvOwner, n: u32) -> Result {
    wait_for(5_000, || owner.done.load(Relaxed) >= n)
        .inspect_err(|_| pr_err!("{} of {} Receives completed\n", owner.done.load(Relaxed), n))
}

#[kunit_tests(rpcrdma_rs_recv_slots)]
mod tests {
    use super::*;

    /// Four messages land in the four contexts in the order they were
    /// posted, and each is read in place while its context is held; a
    /// hold is cut to the buffer's length; nothing is posted again until
    /// handed back, a held context once its hold ends; the first post of
    /// all happens once.
    #[test]
    fn messages_land_in_order_and_contexts_go_back_when_handed_back() -> Result {
        const MSGS: [&[u8]; SLOTS] = [b"one", b"second call", b"the third", b"4"];
        let pair = connect_pair()?;
        let owner = recv_owner(&pair)?;
        owner.recvs.post_all(&pair.server)?;
        assert_eq!(owner.recvs.posted(), SLOTS as u32);
        assert_eq!(owner.recvs.post_all(&pair.server), Err(EINVAL));
        assert_eq!(owner.recvs.posted(), SLOTS as u32);
        for msg in MSGS {
            send(&pair, msg)?;
        }
        wait_done(&owner, SLOTS as u32)?;
        assert_eq!(owner.recvs.posted(), 0);
        let mut recvs = KVec::new();
        for (slot, msg) in MSGS.iter().enumerate() {
            let recv = owner.take(slot)?;
            let len = owner.lens[slot].load(Relaxed) as usize;
            assert_eq!(len, msg.len());
            let held = owner.recvs.hold(recv, len).map_err(|_| EINVAL)?;
            assert!(owner.recvs.holds(&held));
            assert_eq!(held.len(), len);
            assert!(owner.recvs.bytes(&held) == *msg);
            recvs.push(held.into_recv(), GFP_KERNEL)?;
        }
        let mut recvs = recvs.into_iter();
        let (first, second) = (recvs.next().ok_or(EINVAL)?, recvs.next().ok_or(EINVAL)?);
        let held = owner.recvs.hold(first, 1 << 20).map_err(|_| EINVAL)?;
        assert_eq!(held.len(), 256);
        assert!(owner.recvs.bytes(&held).starts_with(MSGS[0]));
        assert_eq!(owner.recvs.posted(), 0);
        let mut batch = batch_of([held.into_recv(), second])?;
        owner.recvs.post(&pair.server, &mut batch)?;
        assert!(batch.is_empty());
        assert_eq!(owner.recvs.posted(), 2);
        send(&pair, b"again")?;
        wait_done(&owner, SLOTS as u32 + 1)?;
        assert_eq!(owner.lens[0].load(Relaxed), 5);
        assert_eq!(owner.recvs.posted(), 1);
        // The contexts may only go once nothing is posted: the drain
        // flushes the last one.
        pair.server.drain();
        wait_done(&owner, SLOTS as u32 + 2)?;
        assert_eq!(owner.flushed.load(Relaxed), 1);
        assert_eq!(owner.recvs.posted(), 0);
        Ok(())
    }

    /// A context is taken back only by the contexts it belongs to: another
    /// connection's refuses to post it, to hold it or to show its bytes.
    #[test]
    fn a_context_is_refused_by_other_contexts() -> Result {
        let (pair, other_pair) = (connect_pair()?, connect_pair()?);
        let (owner, other) = (recv_owner(&pair)?, recv_owner(&other_pair)?);
        other.recvs.post_all(&other_pair.server)?;
        send(&other_pair, b"elsewhere")?;
        wait_done(&other, 1)?;
        let foreign = other.take(0)?;
        let Err(foreign) = owner.recvs.hold(foreign, 1) else {
            return Err(EINVAL);
        };
        let held = other.recvs.hold(foreign, 9).map_err(|_| EINVAL)?;
        assert!(!owner.recvs.holds(&held));
        assert!(owner.recvs.bytes(&held).is_empty());
        assert!(other.recvs.bytes(&held) == b"elsewhere");
        let foreign = held.into_recv();
        let mut batch = batch_of([foreign])?;
        assert_eq!(owner.recvs.post(&pair.server, &mut batch), Err(EINVAL));
        assert_eq!(batch.len(), 1);
        assert_eq!(owner.recvs.posted(), 0);
        // Its own contexts take it back.
        other.recvs.post(&other_pair.server, &mut batch)?;
        assert_eq!(other.recvs.posted(), SLOTS as u32);
        other_pair.server.drain();
        wait_done(&other, SLOTS as u32 + 1)?;
        assert_eq!(other.recvs.posted(), 0);
        Ok(())
    }

    /// The drain flushes every posted Receive to the owner; a post after
    /// it is refused (`ESHUTDOWN`), leaves nothing posted and the contexts
    /// with their owner.
    #[test]
    fn a_drain_flushes_posted_receives_and_refuses_more() -> Result {
        let pair = connect_pair()?;
        let owner = recv_owner(&pair)?;
        let posted_before = live::count(live::Kind::PostedWr);
        owner.recvs.post_all(&pair.server)?;
        pair.server.drain();
        wait_done(&owner, SLOTS as u32)?;
        assert_eq!(owner.flushed.load(Relaxed), SLOTS as u32);
        assert_eq!(owner.recvs.posted(), 0);
        let mut batch = batch_of([owner.take(0)?, owner.take(1)?])?;
        assert_eq!(owner.recvs.post(&pair.server, &mut batch), Err(ESHUTDOWN));
        assert_eq!(batch.len(), 2);
        assert_eq!(owner.recvs.posted(), 0);
        assert_eq!(live::count(live::Kind::PostedWr), posted_before);
        Ok(())
    }
}
