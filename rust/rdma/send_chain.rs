// SPDX-License-Identifier: GPL-2.0

//! Work requests posted as one chain by one `ib_post_send`, only the last
//! asking for its completion (C `svc_rdma_cc_link_wrs` and
//! `svc_rdma_post_send`: a Reply's RDMA Writes ride ahead of its Send).
//! A send queue completes in order, and a failure flushes everything
//! behind it, so the last request's completion stands for the others: it
//! runs their handlers first, in posting order, with its own status. One
//! doorbell, one completion and one handler run from the queue instead of
//! one per request.

use crate::rust::bindings;
use crate::rust::rdma::verbs::{CompletionHandler, Endpoint, SendOp, SendPrep, WorkRequest};
use core::mem::MaybeUninit;
use kernel::prelude::*;
use kernel::sync::Arc;

/// Most work requests of one chain; a longer run is posted as several.
pub const CHAIN_MAX: usize = 8;

/// Work requests waiting to be posted as one chain.
///
/// # Invariants
///
/// `wrs[..len]` are initialised and owned by the chain, the rest are not;
/// none of them was posted. Only the entries in use are written, read and
/// dropped (a Reply's chain is mostly one Write and its Send).
pub struct SendChain<H: CompletionHandler> {
    wrs: [MaybeUninit<(Arc<WorkRequest<H>>, SendOp)>; CHAIN_MAX],
    len: usize,
}

impl<H: CompletionHandler> Default for SendChain<H> {
    fn default() -> Self {
        Self::new()
    }
}

impl<H: CompletionHandler> Drop for SendChain<H> {
    // Nearly every chain is empty when dropped (posted, or never used):
    // that costs one comparison where it is dropped, not a call.
    #[inline(always)]
    fn drop(&mut self) {
        if self.len != 0 {
            self.clear();
        }
    }
}

impl<H: CompletionHandler> SendChain<H> {
    /// An empty chain (no allocation, nothing written).
    pub fn new() -> Self {
        // INVARIANT: none in use.
        Self {
            wrs: [const { MaybeUninit::uninit() }; CHAIN_MAX],
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

    /// The waiting requests, in order.
    fn entries(&self) -> &[(Arc<WorkRequest<H>>, SendOp)] {
        let n = self.len.min(CHAIN_MAX);
        // SAFETY: `wrs[..len]` are initialised (type invariant), and
        // `MaybeUninit<T>` has the layout of `T`.
        unsafe { core::slice::from_raw_parts(self.wrs.as_ptr().cast(), n) }
    }

    /// Drops every waiting request (none was posted).
    #[inline(never)]
    fn clear(&mut self) {
        let n = core::mem::take(&mut self.len).min(CHAIN_MAX);
        // SAFETY: `wrs[..n]` were initialised and owned (type invariant);
        // `len` is 0 first, so they are dropped once. INVARIANT: none in
        // use.
        unsafe {
            core::ptr::drop_in_place(core::ptr::slice_from_raw_parts_mut(
                self.wrs
                    .as_mut_ptr()
                    .cast::<(Arc<WorkRequest<H>>, SendOp)>(),
                n,
            ))
        };
    }

    /// Moves entry `i` out.
    ///
    /// # Safety
    ///
    /// `wrs[i]` is initialised and no longer counted in `len`, and is
    /// taken once.
    unsafe fn take_at(&mut self, i: usize) -> Option<(Arc<WorkRequest<H>>, SendOp)> {
        // SAFETY: By the caller's requirement.
        self.wrs.get(i).map(|e| unsafe { e.assume_init_read() })
    }

    /// Adds a Send or RDMA Write (`EINVAL` for a Read, whose completion
    /// must be seen on its own; `ENOSPC` when full).
    pub fn push(&mut self, wr: Arc<WorkRequest<H>>, op: SendOp) -> Result {
        if matches!(op, SendOp::RdmaRead { .. }) {
            return Err(EINVAL);
        }
        let slot = self.wrs.get_mut(self.len).ok_or(ENOSPC)?;
        slot.write((wr, op));
        // INVARIANT: `wrs[len]` was written, then counted.
        self.len += 1;
        Ok(())
    }

    /// Posts the work requests on `ep` as one chain, the last signaled,
    /// and empties the chain. On failure returns how many went out: those
    /// complete as flushed once `ep` is drained ([`Endpoint::park`]); the
    /// others were not posted and are dropped, their handlers not run.
    pub fn post(&mut self, ep: &Endpoint) -> core::result::Result<(), (Error, usize)> {
        let Some(last_at) = self.len.checked_sub(1) else {
            return Ok(());
        };
        // INVARIANT: the last entry is no longer counted; it is taken once,
        // here.
        self.len = last_at;
        // SAFETY: `last_at` was initialised and is no longer counted.
        let Some((last, last_op)) = (unsafe { self.take_at(last_at) }) else {
            self.clear();
            return Err((EINVAL, 0));
        };
        self.post_ahead_of(ep, |first, chain| {
            // The completion of the last request completes the others.
            // SAFETY: Not posted yet; this thread is its only poster.
            drop(unsafe { last.set_ahead(first) });
            // SAFETY: `chain` is as `post_ahead_of` describes it, which is
            // what `post_send_behind` requires.
            match unsafe { ep.post_send_behind(last, last_op, chain) } {
                Ok(()) => Ok(()),
                Err(failed) => Err(EndNotPosted {
                    error: failed.error,
                    chain_posted: failed.chain_posted,
                    // `last` was not posted, so no completion walks the
                    // links: they are this thread's again.
                    // SAFETY: As just said.
                    first: unsafe { failed.wr.set_ahead(None) },
                }),
            }
        })
    }

    /// Posts the waiting requests unsignaled, as one chain ahead of a
    /// signaled work request that `end` posts, and empties the chain.
    ///
    /// `end` gets the first of them, each linked to the next
    /// ([`WorkRequest::set_ahead`]): its completion must complete them,
    /// in order ([`complete_chain`](crate::rust::rdma::verbs::complete_chain)).
    /// It gets too their `ib_send_wr`s (first and last), linked in order,
    /// the last ending the list, alive until it returns, which it posts
    /// ahead of its own with one `ib_post_send`. If that fails it gives
    /// back the first request and says how many of the chain went out.
    /// Those that did complete as flushed once `ep` is drained
    /// ([`Endpoint::park`]); the others are dropped, their handlers not
    /// run. On failure returns that count.
    pub(in crate::rust) fn post_ahead_of(
        &mut self,
        ep: &Endpoint,
        end: impl FnOnce(
            Option<Arc<WorkRequest<H>>>,
            Option<(*mut bindings::ib_send_wr, *mut bindings::ib_send_wr)>,
        ) -> core::result::Result<(), EndNotPosted<H>>,
    ) -> core::result::Result<(), (Error, usize)> {
        let n = self.len.min(CHAIN_MAX);
        // Their `ib_rdma_wr`s, alive for the post: only the first `n` are
        // written.
        let mut raw = [const { MaybeUninit::<bindings::ib_rdma_wr>::uninit() }; CHAIN_MAX];
        let base = raw.as_mut_ptr().cast::<bindings::ib_rdma_wr>();
        for (i, (wr, op)) in self.entries().iter().enumerate() {
            let w = match SendPrep::new(wr, *op).and_then(|p| p.unsignaled_wr(wr)) {
                Ok(w) => w,
                Err(e) => {
                    // Nothing was posted; every entry goes.
                    self.clear();
                    return Err((e, 0));
                }
            };
            // SAFETY: `i < n <= CHAIN_MAX`, within `raw`; entry `i - 1` was
            // written in the previous round.
            unsafe {
                base.add(i).write(w);
                if i > 0 {
                    (*base.add(i - 1)).wr.next = &raw mut (*base.add(i)).wr;
                }
            }
        }
        // Each holds the next (moved there, back to front). INVARIANT:
        // every entry is moved out: none in use.
        self.len = 0;
        let mut next = None;
        for i in (0..n).rev() {
            // SAFETY: `i < n`: initialised, no longer counted, taken once.
            if let Some((wr, _)) = unsafe { self.take_at(i) } {
                // SAFETY: Not posted yet; this thread is its only poster.
                drop(unsafe { wr.set_ahead(next) });
                next = Some(wr);
            }
        }
        let chain = match n {
            0 => None,
            // SAFETY: `k - 1 < CHAIN_MAX`, and entries `..k` were written.
            k => unsafe { Some((&raw mut (*base).wr, &raw mut (*base.add(k - 1)).wr)) },
        };
        let Err(failed) = end(next, chain) else {
            return Ok(());
        };
        let (e, posted, first) = (failed.error, failed.chain_posted, failed.first);
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
            // SAFETY: Not posted, or posted unsignaled with no completion
            // of their own: only this thread walks the links.
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

/// What the end of a chain that was not posted gives back
/// ([`SendChain::post_ahead_of`]).
pub(in crate::rust) struct EndNotPosted<H: CompletionHandler> {
    /// Why.
    pub(in crate::rust) error: Error,
    /// How many of the chain ahead went out.
    pub(in crate::rust) chain_posted: usize,
    /// The first request of the chain, as it was handed over.
    pub(in crate::rust) first: Option<Arc<WorkRequest<H>>>,
}
