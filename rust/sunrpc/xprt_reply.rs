// SPDX-License-Identifier: GPL-2.0

//! A request matched to its reply (`xprt_lookup_rqst`): lent to the
//! transport to place the reply and complete the RPC, either under the
//! transport's `queue_lock` for the whole reply ([`LockedRqst`]: one lock
//! section, where C takes two) or pinned (`xprt_pin_rqst`) to be completed
//! later outside it ([`PinnedRqst`]: a reply whose registrations must be
//! invalidated first, which may allocate).
//!
//! C header: [`include/linux/sunrpc/xprt.h`](srctree/include/linux/sunrpc/xprt.h).

use crate::rust::bindings;
use crate::rust::sunrpc::xdr_buf::write_xdr;
use crate::rust::sunrpc::xprt::Xprt;
use crate::rust::sunrpc::xprt_class;
use crate::rust::sunrpc::xprt_locks::queue_lock;
use core::marker::PhantomData;
use core::ops::Deref;
use core::ptr::{addr_of_mut, NonNull};
use kernel::prelude::*;

/// What [`ReplyRqst::fill_reply`] did with an `RDMA_MSG` reply.
#[derive(Clone, Copy, Debug)]
pub struct FilledReply {
    /// The reply length for completing the RPC.
    pub len: u32,
    /// Bytes of the inline reply copied into the receive buffer's page
    /// list (C's `fixup_copy_count` unit).
    pub page_bytes: u32,
}

/// A request lent to the transport for its reply: what may be done with
/// it however it is held ([`LockedRqst`], [`PinnedRqst`]).
///
/// # Invariants
///
/// `rqst` is a request of `xprt` matched to a reply, live and not
/// completed while this is borrowed (held under `queue_lock`, or pinned).
pub struct ReplyRqst {
    xprt: Xprt,
    rqst: NonNull<bindings::rpc_rqst>,
}

impl ReplyRqst {
    /// The C request, for trace events (`crate::rust::module::trace`).
    pub(in crate::rust) fn as_raw(&self) -> *const bindings::rpc_rqst {
        self.rqst.as_ptr()
    }

    /// Places an `RDMA_MSG` reply's inline part (`src`) in the receive
    /// buffer; `writelist` is the number of bytes the server wrote through
    /// the Write chunk.
    #[inline(always)]
    pub fn fill_reply(&self, src: &[u8], writelist: u32) -> Result<FilledReply> {
        let len = u32::try_from(src.len()).map_err(|_| EINVAL)?;
        // SAFETY: The request is lent for its reply (type invariant), so its
        // receive buffer is live and only ours to fill until it is completed.
        let buf = unsafe { addr_of_mut!((*self.rqst.as_ptr()).rq_rcv_buf) };
        if writelist == 0 {
            // The inline reply continues from the head into the pages and
            // the tail, as sunrpc lays it out.
            // SAFETY: `buf` is live (above); `src` is readable for `len`
            // bytes and only read; the copy is bounded by `buflen`.
            let (rc, head_len, page_len) = unsafe {
                if len > (*buf).buflen {
                    return Err(EIO);
                }
                let rc = write_xdr(buf, 0, src.as_ptr(), len);
                (rc, (*buf).head[0].iov_len, (*buf).page_len)
            };
            if rc.is_err() {
                return Err(EIO);
            }
            // What went past the head landed in the page list first (C
            // `rpcrdma_inline_fixup` counts these bytes).
            let past_head = u32::try_from(src.len().saturating_sub(head_len)).unwrap_or(u32::MAX);
            return Ok(FilledReply {
                len,
                page_bytes: past_head.min(page_len),
            });
        }
        // With a Write chunk its data is already in the pages: the part of
        // the inline reply that does not fit the head goes to the tail,
        // behind the chunk's XDR pad (C `rpcrdma_inline_fixup`).
        // SAFETY: `buf` is live (above).
        let (head, tail) = unsafe { ((*buf).head[0], (*buf).tail[0]) };
        if src.len() < head.iov_len {
            // A short READ reply (a server that omits optional fields
            // before the payload): the head ends where the inline reply
            // does, so that decoding never moves the directly placed data
            // in the pages. sunrpc checks that both views of the buffer
            // agree, so the private copy is trimmed the same way.
            let delta = (head.iov_len - src.len()) as u32;
            // SAFETY: The request is lent (above); the head shrinks
            // within itself and `buflen` counts it.
            unsafe {
                let r = self.rqst.as_ptr();
                for b in [
                    addr_of_mut!((*r).rq_rcv_buf),
                    addr_of_mut!((*r).rq_private_buf),
                ] {
                    (*b).head[0].iov_len = src.len();
                    (*b).buflen = (*b).buflen.saturating_sub(delta);
                }
            }
        }
        let (to_head, rest) = src.split_at(src.len().min(head.iov_len));
        let pad = ((4 - (writelist & 3)) & 3) as usize;
        if !rest.is_empty()
            && rest
                .len()
                .checked_add(pad)
                .is_none_or(|end| end > tail.iov_len)
        {
            return Err(EIO);
        }
        // SAFETY: The head holds `iov_len` bytes and the tail `iov_len`
        // bytes (checked above against the pad and the rest); `src` does
        // not overlap sunrpc's buffers.
        unsafe {
            core::ptr::copy_nonoverlapping(
                to_head.as_ptr(),
                head.iov_base.cast::<u8>(),
                to_head.len(),
            );
            if !rest.is_empty() {
                core::ptr::copy_nonoverlapping(
                    rest.as_ptr(),
                    tail.iov_base.cast::<u8>().add(pad),
                    rest.len(),
                );
            }
        }
        // Nothing of the inline part went to the pages: the Write chunk
        // filled them.
        Ok(FilledReply {
            len: len.saturating_add((writelist.saturating_add(3)) & !3),
            page_bytes: 0,
        })
    }

    /// The reply length of an `RDMA_NOMSG` reply that arrived entirely in
    /// the Reply chunk (`len` bytes written by the server).
    pub fn reply_chunk_len(&self, len: u32) -> u32 {
        // SAFETY: The request is lent (type invariant).
        len.min(unsafe { (*self.rqst.as_ptr()).rq_rcv_buf.buflen })
    }

    /// The transport's state for this request (see [`RpcRqst::state`]).
    pub fn state<R: 'static>(&self) -> Option<&R> {
        // SAFETY: The request is lent (type invariant), of a live transport
        // of this class; its slot lives with the transport.
        unsafe { xprt_class::slot_of::<R>(self.rqst.as_ptr()) }.map(|s| s.state())
    }

    /// Completes the RPC with `status` (the reply length, or a negative
    /// errno).
    ///
    /// # Safety
    ///
    /// `queue_lock` is held, and this is the request's only completion.
    unsafe fn complete_locked(&self, status: i32) {
        let r = self.rqst.as_ptr();
        // SAFETY: Live (type invariant); completion is under `queue_lock`
        // (held by the requirement), as sunrpc requires, once.
        unsafe {
            let task = (*r).rq_task;
            let copied = if status < 0 {
                (*task).tk_status = status;
                0
            } else {
                status
            };
            bindings::xprt_complete_rqst(task, copied);
        }
    }
}

impl Xprt {
    /// Finds the request waiting for `xid` and lends it to `f` under the
    /// transport's `queue_lock`, which `f` may keep for the whole reply
    /// ([`LockedRqst::complete`]) or leave with the request pinned
    /// ([`LockedRqst::pin`]); `None` when no request waits for `xid`.
    /// `f` runs in that section: it must not take the lock again (no
    /// [`Self::lookup`] or [`PinnedRqst::complete`]), which would wait on
    /// itself, nor sleep.
    pub fn with_reply_rqst<T>(&self, xid: u32, f: impl FnOnce(LockedRqst<'_>) -> T) -> Option<T> {
        let x = self.as_raw().cast_mut();
        // SAFETY: Valid while `self` is (type invariant of `Xprt`).
        let _queue = unsafe { queue_lock(x) }.lock();
        // SAFETY: Requests are looked up under `queue_lock` (held), as
        // sunrpc requires.
        let rqst = NonNull::new(unsafe { bindings::xprt_lookup_rqst(x, xid.to_be()) })?;
        // INVARIANT: Found under the lock, which outlives the borrow: no
        // one else completes or frees the request meanwhile.
        let lent = ReplyRqst { xprt: *self, rqst };
        Some(f(LockedRqst {
            lent: core::mem::ManuallyDrop::new(lent),
            _queue: PhantomData,
        }))
    }

    /// Finds the request waiting for `xid` and pins it so it stays valid
    /// until [`PinnedRqst::complete`] or drop.
    pub fn lookup(&self, xid: u32) -> Option<PinnedRqst> {
        self.with_reply_rqst(xid, |r| r.pin())
    }
}

/// A request matched to a reply, under the transport's `queue_lock`
/// (borrowed for `'a`, the lock's section): completed in it, or pinned to
/// leave it. Dropped otherwise, it fails the RPC, so that no request is
/// left waiting.
///
/// # Invariants
///
/// `queue_lock` of `lent`'s transport is held for `'a`; `lent` is
/// completed or pinned at most once, when this is consumed.
pub struct LockedRqst<'a> {
    lent: core::mem::ManuallyDrop<ReplyRqst>,
    _queue: PhantomData<&'a ()>,
}

impl LockedRqst<'_> {
    /// Completes the RPC with `status` (the reply length, or a negative
    /// errno) without leaving the lock.
    pub fn complete(self, status: i32) {
        let this = core::mem::ManuallyDrop::new(self);
        // SAFETY: Under `queue_lock` (type invariant), once: `self` is
        // consumed and its drop does not run.
        unsafe { this.lent.complete_locked(status) };
    }

    /// Pins the request, to complete it after the lock is left.
    pub fn pin(self) -> PinnedRqst {
        let this = core::mem::ManuallyDrop::new(self);
        // SAFETY: Pinned under `queue_lock` (type invariant), as sunrpc
        // requires.
        unsafe { bindings::xprt_pin_rqst(this.lent.rqst.as_ptr()) };
        // INVARIANT: Pinned just above; unpinned by `PinnedRqst::finish`.
        PinnedRqst {
            lent: ReplyRqst {
                xprt: this.lent.xprt,
                rqst: this.lent.rqst,
            },
        }
    }
}

impl Deref for LockedRqst<'_> {
    type Target = ReplyRqst;

    fn deref(&self) -> &ReplyRqst {
        &self.lent
    }
}

impl Drop for LockedRqst<'_> {
    fn drop(&mut self) {
        // Never leave a request behind: fail it.
        // SAFETY: Under `queue_lock` (type invariant), once: dropped.
        unsafe { self.lent.complete_locked(EIO.to_errno()) };
    }
}

/// A request matched to a reply, pinned until completed.
///
/// # Invariants
///
/// `lent.rqst` was pinned by `xprt_pin_rqst` and is unpinned exactly once
/// (by `finish`).
pub struct PinnedRqst {
    lent: ReplyRqst,
}

// SAFETY: A pinned request may be completed from any process context.
unsafe impl Send for PinnedRqst {}

impl PinnedRqst {
    /// Completes the RPC with `status` (the reply length, or a negative
    /// errno) and unpins it.
    pub fn complete(self, status: i32) {
        let this = core::mem::ManuallyDrop::new(self);
        this.finish(status);
    }

    /// Completes the RPC and drops the pin (C `rpcrdma_complete_rqst`).
    fn finish(&self, status: i32) {
        let x = self.lent.xprt.as_raw().cast_mut();
        // SAFETY: Pinned by the type invariant, so the request and its
        // transport are live.
        let _queue = unsafe { queue_lock(x) }.lock();
        // SAFETY: Under `queue_lock` (held); callers use the pin once.
        unsafe {
            self.lent.complete_locked(status);
            bindings::xprt_unpin_rqst(self.lent.rqst.as_ptr());
        }
    }
}

impl Deref for PinnedRqst {
    type Target = ReplyRqst;

    fn deref(&self) -> &ReplyRqst {
        &self.lent
    }
}

impl Drop for PinnedRqst {
    fn drop(&mut self) {
        // Never leave a pinned request behind: fail it.
        self.finish(EIO.to_errno());
    }
}
