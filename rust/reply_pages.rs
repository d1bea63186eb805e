// SPDX-License-Identifier: GPL-2.0

//! The pages of a Reply whose RDMA Writes leave straight from them, held
//! by those Writes until they complete (C's send context, filled by
//! `svc_rdma_save_io_pages` and put by `svc_rdma_send_ctxt_release`).
//!
//! Taking a reference on each page a Write names, and putting it when the
//! Write completes, costs two atomic operations per page on top of the
//! request's own reference, which sunrpc puts after the reply. Instead the
//! request gives its references up: [`super::svc::Rqst::reply_pages`]
//! copies the page pointers when the Reply's first Write is built (the
//! Reply is still read from the request's page array after that), and
//! [`super::svc::Rqst::give_reply_pages`] empties the slots once the Reply
//! has been sent, so that the references are this object's: one batch puts
//! them all when the last Write holding it is released.

use core::ptr::NonNull;
use kernel::prelude::*;
use kernel::sync::atomic::{Acquire, Atomic, Release};
use kernel::sync::Arc;

use super::bindings;
use super::live;
use super::verbs::PageRef;

/// A Reply's page array, shared (`Arc`) by the RDMA Writes that name its
/// pages ([`super::verbs::WorkRequest::with_reply_pages`]) and by the
/// server thread sending the Reply.
///
/// # Invariants
///
/// `pages` are live pages while `self` lives: the request's until it gives
/// them up, then `self`'s, one reference each, once `given` is set. It is
/// set once, by [`super::svc::Rqst::give_reply_pages`] (`claim`), and the pages are
/// put once, on drop.
pub struct ReplyPages {
    pages: KVec<NonNull<bindings::page>>,
    given: Atomic<bool>,
}

// SAFETY: The page references may be put from any thread; the pointers
// are only read.
unsafe impl Send for ReplyPages {}
// SAFETY: Shared references read the pointers and set `given` atomically.
unsafe impl Sync for ReplyPages {}

impl ReplyPages {
    /// The request's pages `pages`, whose references it still holds.
    ///
    /// # Safety
    ///
    /// Each page stays live until the request gives its references
    /// ([`Self::claim`]) or, if it never does, until `self` is dropped.
    pub(in crate::rust) unsafe fn borrowed(pages: KVec<NonNull<bindings::page>>) -> Self {
        // INVARIANT: live by the caller's requirement; not given yet.
        Self {
            pages,
            given: Atomic::new(false),
        }
    }

    /// The page pointers, in the order of the request's slots.
    pub(in crate::rust) fn pages(&self) -> &[NonNull<bindings::page>] {
        &self.pages
    }

    /// Marks the pages given to `self`: `true` the first time, when the
    /// caller then gives them; `false` after that.
    ///
    /// # Safety
    ///
    /// On `true`, the caller makes `self` hold one reference on each of its
    /// pages (the request's, or one taken for it) before its own reference
    /// to `self` goes.
    pub(in crate::rust) unsafe fn claim(&self) -> bool {
        let first = !self.given.xchg(true, Release);
        if first {
            live::inc(live::Kind::ReplyPages);
        }
        first
    }

    /// An array holding the references of `refs` from the start, as a
    /// Reply's once its request gave them (for the KUnit suite's Writes
    /// from such pages).
    pub fn of_refs(refs: KVec<PageRef>) -> Result<Arc<Self>> {
        // SAFETY: `PageRef` is a transparent `NonNull<page>`, so the
        // vector's allocation holds as many page pointers, whose references
        // the new vector takes over.
        let pages = unsafe {
            let (ptr, len, cap) = refs.into_raw_parts();
            KVec::from_raw_parts(ptr.cast::<NonNull<bindings::page>>(), len, cap)
        };
        // SAFETY: The references just taken over keep the pages live.
        let this = unsafe { Self::borrowed(pages) };
        // SAFETY: `this` holds one reference on each of its pages.
        unsafe { this.claim() };
        Ok(Arc::new(this, GFP_KERNEL)?)
    }
}

impl Drop for ReplyPages {
    fn drop(&mut self) {
        if !self.given.load(Acquire) {
            // The request still holds them and puts them itself.
            return;
        }
        // A request has far fewer than `u32::MAX` pages; were it otherwise, none
        // is put (a leak) rather than too many.
        let n = u32::try_from(self.pages.len()).unwrap_or(0);
        // SAFETY: `self` holds one reference on each of its pages (type
        // invariant, `given`), put here once; `NonNull<page>` has the layout
        // of a page pointer, none is null, and the vector holds `n` of them.
        unsafe {
            bindings::rpcrdma_rs_release_page_array(
                self.pages.as_mut_ptr().cast::<*mut bindings::page>(),
                n,
            )
        };
        live::dec(live::Kind::ReplyPages);
    }
}
