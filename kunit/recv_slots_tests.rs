// SPDX-License-Identifier: GPL-2.0

//! Receives as receive contexts whose owner decides when each goes back
//! to the device (`rust/rdma/recv_slots.rs`, the server's Receives) on a
//! real (soft-RoCE) device: messages land in the contexts in posting
//! order and the owner hears of each with its context; a context is posted
//! again only when asked, and never while its buffer is lent; the drain
//! that ends the connection flushes what is posted, and nothing is posted
//! after it.

use crate::rust::module::live;
use crate::rust::rdma::recv_slots::{RecvSlots, RecvSlotsOwner};
use crate::rust::rdma::ring_owner::impl_ring_in;
use crate::rust::rdma::verbs::{DmaDir, SendOp, WorkCompletion};
use crate::verbs::{client_op, connect_pair, one_segment, wait_for, Pair};
use kernel::prelude::*;
use kernel::sync::atomic::{Atomic, Relaxed};
use kernel::sync::Arc;

/// Receive contexts of the test owner.
const SLOTS: usize = 4;

/// The owner of receive contexts, as a server connection's receive queue
/// is: records each completion's length by context, and counts them.
struct RecvOwner {
    recvs: RecvSlots<RecvOwner>,
    lens: [Atomic<u32>; SLOTS],
    done: Atomic<u32>,
    flushed: Atomic<u32>,
}

impl_ring_in!(RecvOwner, recvs: RecvSlots<RecvOwner>);

impl RecvSlotsOwner for RecvOwner {
    fn received(&self, slot: usize, wc: &WorkCompletion) {
        if wc.is_ok() {
            if let Some(len) = self.lens.get(slot) {
                len.store(wc.byte_len, Relaxed);
            }
        } else {
            self.flushed.fetch_add(1, Relaxed);
        }
        self.done.fetch_add(1, Relaxed);
    }
}

/// [`SLOTS`] receive contexts of 256 bytes on the server's endpoint.
fn recv_owner(pair: &Pair) -> Result<Arc<RecvOwner>> {
    Ok(Arc::new(
        RecvOwner {
            recvs: RecvSlots::new(&pair.server, SLOTS, 256)?,
            lens: [const { Atomic::new(0) }; SLOTS],
            done: Atomic::new(0),
            flushed: Atomic::new(0),
        },
        GFP_KERNEL,
    )?)
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
    /// posted; nothing is posted again until asked; a context whose buffer
    /// is lent is refused, and posted once the loan ends; an unknown
    /// context is refused.
    #[test]
    fn messages_land_in_order_and_contexts_go_back_when_asked() -> Result {
        const MSGS: [&[u8]; SLOTS] = [b"one", b"second call", b"the third", b"4"];
        let pair = connect_pair()?;
        let owner = recv_owner(&pair)?;
        owner.recvs.post_all(&pair.server)?;
        assert_eq!(owner.recvs.posted(), SLOTS as u32);
        for msg in MSGS {
            send(&pair, msg)?;
        }
        wait_done(&owner, SLOTS as u32)?;
        assert_eq!(owner.recvs.posted(), 0);
        for (slot, msg) in MSGS.iter().enumerate() {
            let len = owner.lens[slot].load(Relaxed) as usize;
            assert_eq!(len, msg.len());
            let buf = owner.recvs.buf(slot).ok_or(EINVAL)?;
            let loan = buf.lend_received(len)?;
            assert!(loan.bytes() == *msg);
        }
        let buf = owner.recvs.buf(0).ok_or(EINVAL)?;
        let loan = buf.lend_received(MSGS[0].len())?;
        assert_eq!(owner.recvs.post(&pair.server, &[0]), Err(EINVAL));
        assert_eq!(owner.recvs.posted(), 0);
        drop(loan);
        owner.recvs.post(&pair.server, &[0, 1])?;
        assert_eq!(owner.recvs.posted(), 2);
        assert_eq!(owner.recvs.post(&pair.server, &[SLOTS]), Err(EINVAL));
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

    /// The drain flushes every posted Receive to the owner; a post after
    /// it is refused (`ESHUTDOWN`) and leaves nothing posted.
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
        assert_eq!(owner.recvs.post(&pair.server, &[0]), Err(ESHUTDOWN));
        assert_eq!(owner.recvs.posted(), 0);
        assert_eq!(live::count(live::Kind::PostedWr), posted_before);
        Ok(())
    }
}
