// SPDX-License-Identifier: GPL-2.0

//! The send queue gate and the Send contexts of a client connection (C
//! `rpcrdma_sendctx` and the `sc_*` accounting of `verbs.c`), and what a
//! call's Send carries: its bytes in the context's buffer and the pages it
//! maps (C `rpcrdma_prepare_send_sges`).

use super::conn::Conn;
use super::stats::add;
use super::stats::bump;
use crate::proto::encode::{encode_header, HeaderRef};
use crate::proto::pieces::page_spans;
use crate::proto::planner::{read_chunk_tail_len, CallStrategy, XdrBufShape};
use crate::rust::rdma::ring_owner::impl_ring_in;
use crate::rust::rdma::send_ring::{SendCtxt, SendRing, SendRingHead, SendRingOwner};
use crate::rust::rdma::verbs::{MappedPage, WorkCompletion};
use crate::rust::sunrpc::xprt::RpcRqst;
use kernel::alloc::KVec;
use kernel::page::PAGE_SIZE;
use kernel::prelude::*;
use kernel::sync::atomic::{Atomic, Relaxed};

/// The send queue slots of a connection (its gate): every work request
/// is posted with a slot reserved for it, so the queue never overflows,
/// and work posted from completion context (LOCAL_INV chains, batched
/// invalidations) never has to find room: its slots are reserved up front,
/// when the MR is registered.
///
/// A slot of the hardware queue is free again only once a *signaled* work
/// request posted at or after it has completed. So slots are given back
/// only from the completion of a signaled request, and only for requests
/// posted before it: a request's REG_MRs and its Send by the Send's
/// completion, a LOCAL_INV chain by its last (signaled) LOCAL_INV. A Send
/// posted unsignaled gives its slots back when the next signaled Send
/// completes, which retires its context with its own. Each MR
/// is registered with two slots, its REG_MR's and the one its later
/// LOCAL_INV uses (or which is given back if the server invalidates it
/// remotely). Slots therefore never fall short of what the hardware queue
/// holds.
///
/// A sender that finds too few slots fails with `ENOBUFS`, which sunrpc
/// retries after a short delay (`call_transmit_status`), as it does when
/// the MR pool is empty; nothing fails with EIO.
pub(super) struct SendSlots {
    free: Atomic<u32>,
}

impl SendSlots {
    pub(super) fn new(depth: u32) -> Self {
        Self {
            free: Atomic::new(depth),
        }
    }

    /// Takes `n` slots if that many are free: one atomic operation when
    /// they are. A take that finds too few gives them back at once; until
    /// then a concurrent take may find too few as well (a sender then
    /// retries, as when the queue is full), but senders take one at a time
    /// (`XPRT_LOCKED`).
    pub(super) fn try_take(&self, n: u32) -> bool {
        // Compared as signed: a count another take left below zero for a
        // moment reads as too few, not as a wrapped multitude (the depth
        // is far below 2^31).
        let before = self.free.fetch_sub(n, Relaxed) as i32;
        if i64::from(before) >= i64::from(n) {
            return true;
        }
        self.free.add(n, Relaxed);
        false
    }

    /// Gives back `n` slots taken with [`Self::try_take`].
    pub(super) fn give(&self, n: u32) {
        self.free.add(n, Relaxed);
    }
}

/// Send queue slots an MR is registered with: its REG_MR's, and its
/// LOCAL_INV's.
pub(super) const SLOTS_PER_MR: u32 = 2;

/// What a client Send context carries to its retirement: the send queue
/// slots it frees, the Send's and those of the REG_MRs posted before it.
#[derive(Default)]
pub(super) struct SendData {
    pub(super) slots: u32,
}

impl SendRingOwner for Conn {
    type Data = SendData;

    fn retire(&self, data: &mut SendData) {
        // Flushed or not, the Send and everything before it left the queue.
        self.slots.give(core::mem::take(&mut data.slots));
    }

    fn failed(&self, wc: &WorkCompletion) {
        if !self.closing.load(Relaxed) {
            crate::pr_warn_ratelimited!("send failed: status {}\n", wc.status);
            self.xprt.force_disconnect();
        }
    }
}

impl_ring_in!(Conn, send_ring: SendRing<Conn>);

impl Conn {
    /// A free Send context of the ring for a Send that frees `slots`
    /// send queue slots when it retires (the caller reserved them);
    /// `ENOBUFS`, counted, when every context is posted: sunrpc retries
    /// after a delay, as when the send queue is full.
    pub(super) fn send_ctxt<'a>(
        &'a self,
        head: &'a mut SendRingHead<Conn>,
        slots: u32,
    ) -> Result<SendCtxt<'a, Conn>> {
        let Some(mut ctxt) = self.send_ring.next(head) else {
            self.note_send_queue_full();
            return Err(ENOBUFS);
        };
        ctxt.data().slots = slots;
        Ok(ctxt)
    }

    /// Reserves the send queue slot of a Send that carries no
    /// registration (a backchannel reply); `ENOBUFS` when the queue is full.
    pub(super) fn reserve_send_slot(&self) -> Result {
        if self.slots.try_take(1) {
            Ok(())
        } else {
            self.note_send_queue_full();
            Err(ENOBUFS)
        }
    }

    /// Counts a call or reply that found no room in the send queue and
    /// will be retried: the module-wide counter, and the transport's
    /// `empty_sendctx_q` (C counts a Send that found its ring of send
    /// contexts empty, which stands for the same room).
    pub(super) fn note_send_queue_full(&self) {
        add(&self.counters().send_queue_full, 1);
        bump(&self.stats.empty_sendctx_q);
    }

    /// Gives back a slot of [`Self::reserve_send_slot`] whose Send was not
    /// posted.
    pub(super) fn unreserve_send_slot(&self) {
        self.slots.give(1);
    }
}

/// Page data shorter than this is pulled up into the Send buffer even
/// where it could be mapped: a short copy costs less than mapping and
/// unmapping a page (C pulls up every call that fits its Send buffer for
/// that reason).
pub(super) const MAP_PAGES_MIN: u32 = 1024;

impl Conn {
    /// For an inline call with page data: the pages mapped for the device
    /// as Send SGEs behind the header and head, so they are not copied;
    /// `None` (pull the call up) when there is little page data or the
    /// queue pair has too few SGEs for header and head, every page piece
    /// and the tail.
    pub(super) fn map_send_pages(
        &self,
        rqst: &RpcRqst<'_>,
        snd: &XdrBufShape,
    ) -> Result<Option<KVec<MappedPage>>> {
        if snd.page_len < MAP_PAGES_MIN {
            return Ok(None);
        }
        let base = snd.page_base as usize;
        let first_page = u32::try_from(base / PAGE_SIZE).map_err(|_| EINVAL)?;
        let spans = || page_spans(base % PAGE_SIZE, snd.page_len as usize, PAGE_SIZE).ok_or(EINVAL);
        let sges = 1 + spans()?.count() + usize::from(snd.tail_len > 0);
        if sges > self.ep.max_send_sge() {
            return Ok(None);
        }
        let mut pages = KVec::with_capacity(sges, GFP_KERNEL)?;
        for span in spans()? {
            let index = first_page
                .checked_add(u32::try_from(span.page).map_err(|_| EINVAL)?)
                .ok_or(EINVAL)?;
            let page = rqst.send_page(index).ok_or(EINVAL)?;
            pages.push(self.ep.map_page(page, span.offset, span.len)?, GFP_KERNEL)?;
        }
        Ok(Some(pages))
    }
}

/// Writes the Send into `out`, its context's Send buffer, in place: the
/// transport header, then the inline part of the call (C
/// `rpcrdma_prepare_send_sges`, whose pull-up copies the call behind the
/// header the same way). With `mapped` (the page data goes out through
/// SGEs of its own), the head, then the tail right behind it. Returns the
/// Send's parts in the buffer (the bytes before the pages, the tail's
/// after them; see [`SendCtxt::fill`]) and the header's length.
pub(super) fn fill_send(
    rqst: &RpcRqst<'_>,
    hdr: &HeaderRef<'_>,
    call: &CallStrategy,
    snd: &XdrBufShape,
    mapped: bool,
    out: &mut [u8],
) -> Result<((usize, usize), usize)> {
    let hlen = encode_header(hdr, out).map_err(|_| EMSGSIZE)?;
    let mut at = hlen;
    let mut copy = |from: u32, len: u32, at: &mut usize| -> Result {
        let end = at.checked_add(len as usize).ok_or(EMSGSIZE)?;
        let dst = out.get_mut(*at..end).ok_or(EMSGSIZE)?;
        rqst.read(from, dst)?;
        *at = end;
        Ok(())
    };
    match call {
        CallStrategy::InlinePullup | CallStrategy::InlineMapped if mapped => {
            copy(0, snd.head_len, &mut at)?;
            let first = at;
            let from = snd.head_len.checked_add(snd.page_len).ok_or(EINVAL)?;
            copy(from, snd.tail_len, &mut at)?;
            return Ok(((first, at - first), hlen));
        }
        CallStrategy::InlinePullup | CallStrategy::InlineMapped => {
            copy(0, snd.len().ok_or(EINVAL)?, &mut at)?;
        }
        CallStrategy::ReadChunk { .. } => {
            at = fill_read_chunk_inline(rqst, CallParts::of(snd), out, at)?;
        }
        CallStrategy::LongCall { .. } => {}
    }
    Ok(((at, 0), hlen))
}

/// The lengths of a Call's head, page data and tail.
#[derive(Clone, Copy)]
pub(super) struct CallParts {
    pub(super) head_len: u32,
    pub(super) page_len: u32,
    pub(super) tail_len: u32,
}

impl CallParts {
    /// Those of the Call `snd`.
    pub(super) fn of(snd: &XdrBufShape) -> Self {
        Self {
            head_len: snd.head_len,
            page_len: snd.page_len,
            tail_len: snd.tail_len,
        }
    }
}

/// Copies the inline part of a Call whose page data goes as a Read chunk
/// to byte `at` of `out`: its head, then its tail without the page data's
/// XDR pad, so the rest lands XDR-aligned (none if the pad is all the tail
/// holds: `planner::read_chunk_tail_len`). Returns where it ends.
#[inline(always)]
pub(super) fn fill_read_chunk_inline(
    rqst: &RpcRqst<'_>,
    call: CallParts,
    out: &mut [u8],
    at: usize,
) -> Result<usize> {
    let mut copy = |from: u32, len: u32, at: usize| -> Result<usize> {
        let end = at.checked_add(len as usize).ok_or(EMSGSIZE)?;
        rqst.read(from, out.get_mut(at..end).ok_or(EMSGSIZE)?)?;
        Ok(end)
    };
    let at = copy(0, call.head_len, at)?;
    let tail = read_chunk_tail_len(call.tail_len);
    if tail == 0 {
        return Ok(at);
    }
    let from = call
        .head_len
        .checked_add(call.page_len)
        .and_then(|n| n.checked_add(call.tail_len - tail))
        .ok_or(EINVAL)?;
    copy(from, tail, at)
}
