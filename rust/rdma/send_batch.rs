// SPDX-License-Identifier: GPL-2.0

//! Sends whose completion is not requested (C `rpcrdma_sendctx`'s
//! `re_send_batch`): a connection asks for the completion of every Nth
//! Send only, and one completion then stands for every Send posted before
//! it, since a send queue completes in order. Each completion costs the
//! device a CQE and the host a poll and a handler run.
//!
//! A [`SendBatch`] keeps each unsignaled Send (its reference: the queue
//! holds none) until the next signaled one is posted, which takes them
//! over as the requests its completion stands for (the chain links of
//! `WorkRequest`, as [`crate::rust::rdma::send_chain`] uses them): that completion
//! runs their handlers first, in posting order and with its own status.
//! Sends still held after the queue pair was drained are completed as
//! flushed by [`SendBatch::release`]. A batch is never freed while the
//! device may still read its Sends: dropped with Sends held, it leaks them
//! instead (and says so).

use crate::rust::bindings;
use crate::rust::rdma::verbs::{CompletionHandler, Endpoint, SendOp, WorkCompletion, WorkRequest};
use kernel::alloc::KVec;
use kernel::new_spinlock;
use kernel::prelude::*;
use kernel::sync::{Arc, SpinLock};

struct Held<H: CompletionHandler> {
    /// Unsignaled Sends posted since the last signaled one, in posting
    /// order.
    sends: KVec<Arc<WorkRequest<H>>>,
    /// The queue pair every Send of the batch goes to (set by the first).
    qp: usize,
}

/// The unsignaled Sends of one queue pair.
///
/// # Invariants
///
/// Every Send in `held` was posted unsignaled on the queue pair `held.qp`
/// after its last signaled Send, and is kept until a signaled Send posted
/// after it takes it over (linked ahead of it) or the queue pair was
/// drained.
#[pin_data(PinnedDrop)]
pub struct SendBatch<H: CompletionHandler> {
    #[pin]
    held: SpinLock<Held<H>>,
    /// At most this many Sends in a row go unsignaled.
    max_unsignaled: usize,
}

impl<H: CompletionHandler> SendBatch<H> {
    /// A batch that requests the completion of at least every `every`th
    /// Send (1: of every Send).
    pub fn new(every: usize) -> Result<Arc<Self>> {
        let max_unsignaled = every.saturating_sub(1);
        let sends = KVec::with_capacity(max_unsignaled, GFP_KERNEL)?;
        Arc::pin_init(
            pin_init!(Self {
                held <- new_spinlock!(
                    Held { sends, qp: 0 },
                    "rpcrdma_rs::send_batch"
                ),
                max_unsignaled,
            }),
            GFP_KERNEL,
        )
    }

    /// Posts `wr` as a Send on `ep` behind `chain` (see
    /// [`Endpoint::post_send_behind`]), unsignaled unless `signal` or the
    /// batch is due; `Ok(true)` when it went unsignaled. On failure
    /// returns how many of `chain` were posted; `wr` was not. Every Send of
    /// a batch must go to the same queue pair (`EINVAL` otherwise).
    ///
    /// # Safety
    ///
    /// As [`Endpoint::post_send_behind`].
    pub(in crate::rust) unsafe fn post(
        &self,
        ep: &Endpoint,
        wr: Arc<WorkRequest<H>>,
        chain: Option<(*mut bindings::ib_send_wr, *mut bindings::ib_send_wr)>,
        signal: bool,
    ) -> core::result::Result<bool, (Error, usize)> {
        // Held across the post: the batch's order is the queue's.
        let mut held = self.held.lock();
        let qp = ep.qp_ptr() as usize;
        if held.qp == 0 {
            held.qp = qp;
        } else if held.qp != qp {
            return Err((EINVAL, 0));
        }
        let room = held.sends.len() < self.max_unsignaled.min(held.sends.capacity());
        if !signal && room {
            // SAFETY: The chain is the caller's requirement; `wr` is kept
            // in the batch until it is known to have completed.
            unsafe { ep.post_send_unsignaled(&wr, SendOp::Send, chain) }?;
            if let Err(e) = held.sends.push_within_capacity(wr) {
                // Cannot happen (`room`). INVARIANT: never freed while the
                // device may read it.
                core::mem::forget(e.0);
                crate::pr_err_ratelimited!("rpcrdma_rs: send batch overflow: a Send leaked\n");
            }
            return Ok(true);
        }
        // The held Sends complete with this one: linked ahead of it, back
        // to front (their vector keeps its capacity).
        let mut first = None;
        while let Some(held_wr) = held.sends.pop() {
            // SAFETY: Held Sends are linked by nothing else, and `wr` is
            // not posted yet.
            drop(unsafe { held_wr.set_ahead(first) });
            first = Some(held_wr);
        }
        // SAFETY: As above.
        drop(unsafe { wr.set_ahead(first) });
        // SAFETY: By the caller's requirement.
        let res = unsafe { ep.post_send_behind(wr, SendOp::Send, chain) };
        let Err(failed) = res else {
            return Ok(false);
        };
        // Not posted: the held Sends stay held, in order.
        // SAFETY: `wr` was not posted, so no completion walks its links.
        let mut next = unsafe { failed.wr.set_ahead(None) };
        while let Some(held_wr) = next {
            // SAFETY: As above.
            next = unsafe { held_wr.set_ahead(None) };
            if let Err(e) = held.sends.push_within_capacity(held_wr) {
                // Cannot happen: they came out of this vector.
                core::mem::forget(e.0);
            }
        }
        Err((failed.error, failed.chain_posted))
    }

    /// Posts `wr` as a Send on `ep`, unsignaled unless `signal` or the
    /// batch is due; `Ok(true)` when it went unsignaled.
    pub fn post_send(&self, ep: &Endpoint, wr: Arc<WorkRequest<H>>, signal: bool) -> Result<bool> {
        // SAFETY: No chain.
        unsafe { self.post(ep, wr, None, signal) }.map_err(|(e, _)| e)
    }

    /// After `ep`'s queue pair was drained: completes every Send still
    /// held, as flushed. Does nothing before the drain, or for another
    /// queue pair's endpoint.
    pub fn release(&self, ep: &Endpoint) {
        if !ep.is_drained() {
            return;
        }
        let sends = {
            let mut held = self.held.lock();
            if held.qp != 0 && held.qp != ep.qp_ptr() as usize {
                return;
            }
            core::mem::take(&mut held.sends)
        };
        let wc = WorkCompletion::flushed();
        for wr in sends {
            wr.handler.complete(&wr, &wc);
        }
    }
}

#[pinned_drop]
impl<H: CompletionHandler> PinnedDrop for SendBatch<H> {
    fn drop(self: Pin<&mut Self>) {
        let sends = core::mem::take(&mut self.held.lock().sends);
        if sends.is_empty() {
            return;
        }
        crate::pr_err_ratelimited!(
            "rpcrdma_rs: {} unsignaled Sends never released; leaked\n",
            sends.len()
        );
        // INVARIANT: the device may still read them: never freed.
        for wr in sends {
            core::mem::forget(wr);
        }
    }
}
