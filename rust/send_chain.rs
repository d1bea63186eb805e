// SPDX-License-Identifier: GPL-2.0

//! Work requests posted as one chain by one `ib_post_send`, only the last
//! asking for its completion (C `svc_rdma_cc_link_wrs` and
//! `svc_rdma_post_send`: a Reply's RDMA Writes ride ahead of its Send).
//! A send queue completes in order, and a failure flushes everything
//! behind it, so the last request's completion stands for the others: it
//! runs their handlers first, in posting order, with its own status. One
//! doorbell, one completion and one handler run from the queue instead of
//! one per request.

use super::bindings;
use super::verbs::{CompletionHandler, Endpoint, SendOp, SendPrep, WorkRequest};
use core::mem::MaybeUninit;
use kernel::prelude::*;
use kernel::sync::Arc;

/// Most work requests of one chain; a longer run is posted as several.
pub const CHAIN_MAX: usize = 8;

/// Work requests waiting to be posted as one chain.
///
/// # Invariants
///
/// `wrs[..len]` are `Some`, the rest `None`; none of them was posted.
pub struct SendChain<H: CompletionHandler> {
    wrs: [Option<(Arc<WorkRequest<H>>, SendOp)>; CHAIN_MAX],
    len: usize,
}

impl<H: CompletionHandler> Default for SendChain<H> {
    fn default() -> Self {
        Self::new()
    }
}

impl<H: CompletionHandler> SendChain<H> {
    /// An empty chain (no allocation).
    pub fn new() -> Self {
        Self {
            wrs: [const { None }; CHAIN_MAX],
            len: 0,
        }
    }

    /// How many work requests wait.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether none waits.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether it holds [`CHAIN_MAX`]: post it before adding more.
    pub fn is_full(&self) -> bool {
        self.len >= CHAIN_MAX
    }

    /// Adds a Send or RDMA Write (`EINVAL` for a Read, whose completion
    /// must be seen on its own; `ENOSPC` when full).
    pub fn push(&mut self, wr: Arc<WorkRequest<H>>, op: SendOp) -> Result {
        if matches!(op, SendOp::RdmaRead { .. }) {
            return Err(EINVAL);
        }
        let slot = self.wrs.get_mut(self.len).ok_or(ENOSPC)?;
        // INVARIANT: `wrs[len]` is filled, then counted.
        *slot = Some((wr, op));
        self.len += 1;
        Ok(())
    }

    /// Posts the work requests on `ep` as one chain, the last signaled,
    /// and empties the chain. On failure returns how many went out: those
    /// complete as flushed once `ep` is drained ([`Endpoint::park`]); the
    /// others were not posted and are dropped, their handlers not run.
    pub fn post(&mut self, ep: &Endpoint) -> core::result::Result<(), (Error, usize)> {
        let n = core::mem::take(&mut self.len);
        let Some(last_at) = n.checked_sub(1) else {
            return Ok(());
        };
        // The ahead requests' `ib_rdma_wr`s, alive for the post: only the
        // first `last_at` are written.
        let mut raw = [const { MaybeUninit::<bindings::ib_rdma_wr>::uninit() }; CHAIN_MAX];
        let base = raw.as_mut_ptr().cast::<bindings::ib_rdma_wr>();
        for i in 0..last_at {
            let w = match self.wrs.get(i).and_then(Option::as_ref) {
                Some((wr, op)) => SendPrep::new(wr, *op).and_then(|p| p.unsignaled_wr(wr)),
                None => Err(EINVAL),
            };
            let w = match w {
                Ok(w) => w,
                Err(e) => {
                    // INVARIANT: nothing was posted; every entry goes.
                    self.wrs = [const { None }; CHAIN_MAX];
                    return Err((e, 0));
                }
            };
            // SAFETY: `i < last_at < CHAIN_MAX`, within `raw`; entry
            // `i - 1` was written in the previous round.
            unsafe {
                base.add(i).write(w);
                if i > 0 {
                    (*base.add(i - 1)).wr.next = &raw mut (*base.add(i)).wr;
                }
            }
        }
        // The completion of the last request completes the others: it
        // holds the first, each holds the next (moved there, back to
        // front). INVARIANT: every entry is taken out; `len` is 0.
        let mut next = None;
        for entry in self.wrs.iter_mut().take(last_at).rev() {
            if let Some((wr, _)) = entry.take() {
                // SAFETY: Not posted yet; this thread is its only poster.
                drop(unsafe { wr.set_ahead(next) });
                next = Some(wr);
            }
        }
        let Some((last, last_op)) = self.wrs.get_mut(last_at).and_then(Option::take) else {
            return Err((EINVAL, 0));
        };
        // SAFETY: As above.
        drop(unsafe { last.set_ahead(next) });
        let chain = match last_at {
            0 => None,
            // SAFETY: `k - 1 < CHAIN_MAX`, and entries `..k` were written.
            k => unsafe { Some((&raw mut (*base).wr, &raw mut (*base.add(k - 1)).wr)) },
        };
        // SAFETY: `chain` links the written `raw[..last_at]` in order, the
        // last one ending it (`next` null: written by `unsignaled_wr`);
        // they live in this frame across the post and describe the ahead
        // requests, whose buffers those requests (held by the links) keep
        // mapped on `ep`'s device.
        let res = unsafe { ep.post_send_behind(last, last_op, chain) };
        let Err(failed) = res else {
            return Ok(());
        };
        let (e, posted, last) = (failed.error, failed.chain_posted, failed.wr);
        // `last` was not posted, so no completion walks the links: they
        // are this thread's again.
        // SAFETY: As just said.
        let first = unsafe { last.set_ahead(None) };
        if posted == 0 {
            let mut at = first;
            while let Some(wr) = at {
                // SAFETY: Not posted.
                at = unsafe { wr.set_ahead(None) };
            }
            return Err((e, 0));
        }
        // The first `posted` went out: cut the chain behind them (the
        // rest is dropped) and keep them until the drain.
        let mut at = first.clone();
        for _ in 1..posted {
            // SAFETY: See above.
            at = at.and_then(|wr| unsafe { wr.next_ahead() });
        }
        if let Some(wr) = at {
            // SAFETY: See above.
            drop(unsafe { wr.set_ahead(None) });
        }
        if let Some(first) = first {
            ep.park(first);
        }
        Err((e, posted))
    }
}
