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
        // INVARIANT: every entry is taken out; `len` is 0.
        let mut taken = [const { None }; CHAIN_MAX];
        core::mem::swap(&mut taken, &mut self.wrs);
        let Some((last, last_op)) = taken.get_mut(last_at).and_then(Option::take) else {
            return Err((EINVAL, 0));
        };
        let ahead = taken.get(..last_at).unwrap_or(&[]);
        // The ahead requests' `ib_rdma_wr`s, alive for the post.
        // SAFETY: All-zero is a valid `ib_rdma_wr`; each used one is
        // overwritten below.
        let mut raw: [bindings::ib_rdma_wr; CHAIN_MAX] = unsafe { core::mem::zeroed() };
        for (i, entry) in ahead.iter().enumerate() {
            let Some((wr, op)) = entry else {
                return Err((EINVAL, 0));
            };
            let prep = SendPrep::new(wr, *op).map_err(|e| (e, 0))?;
            let w = prep.unsignaled_wr(wr).map_err(|e| (e, 0))?;
            if let Some(r) = raw.get_mut(i) {
                *r = w;
            }
        }
        for i in 1..last_at {
            let next: *mut bindings::ib_send_wr = &mut raw[i].wr;
            raw[i - 1].wr.next = next;
        }
        // The completion of `last` completes the ahead requests: it holds
        // the first, each holds the next.
        let first = ahead
            .first()
            .and_then(|e| e.as_ref())
            .map(|(wr, _)| wr.clone());
        for pair in ahead.windows(2) {
            if let [Some((wr, _)), Some((next, _))] = pair {
                // SAFETY: Not posted yet; this thread is their only poster.
                unsafe { wr.set_ahead(Some(next.clone())) };
            }
        }
        // SAFETY: As above.
        unsafe { last.set_ahead(first) };
        let chain = match last_at {
            0 => None,
            k => {
                let head: *mut bindings::ib_send_wr = &mut raw[0].wr;
                let tail: *mut bindings::ib_send_wr = &mut raw[k - 1].wr;
                Some((head, tail))
            }
        };
        // SAFETY: `chain` links `raw[..last_at]` in order, the last one
        // ending it; they live in this frame across the post and describe
        // the ahead requests, whose buffers those requests (held by
        // `taken` and by the links) keep mapped on `ep`'s device.
        let res = unsafe { ep.post_send_behind(last.clone(), last_op, chain) };
        let Err((e, posted)) = res else {
            return Ok(());
        };
        // `last` was not posted: its links are this thread's again.
        // SAFETY: Not posted, so no completion walks them.
        drop(unsafe { last.set_ahead(None) });
        if posted > 0 {
            // The first `posted` went out: cut the chain behind them and
            // keep them until the drain.
            if let Some(Some((wr, _))) = taken.get(posted - 1) {
                // SAFETY: Those behind it were not posted.
                drop(unsafe { wr.set_ahead(None) });
            }
            if let Some(Some((first, _))) = taken.first() {
                ep.park(first.clone());
            }
        } else if let Some(Some((first, _))) = taken.first() {
            // None posted: undo every link.
            let mut next = Some(first.clone());
            while let Some(wr) = next {
                // SAFETY: Not posted.
                next = unsafe { wr.set_ahead(None) };
            }
        }
        Err((e, posted))
    }
}
