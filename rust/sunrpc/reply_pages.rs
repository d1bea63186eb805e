// SPDX-License-Identifier: GPL-2.0

//! The pages of a Reply whose RDMA Writes leave straight from them, held
//! by those Writes until they complete (C's send context, filled by
//! `svc_rdma_save_io_pages` and put by `svc_rdma_send_ctxt_release`).
//!
//! Taking a reference on each page a Write names, and putting it when the
//! Write completes, costs two atomic operations per page on top of the
//! request's own reference, which sunrpc puts after the reply. Instead the
//! request gives its references up: [`crate::rust::sunrpc::svc::SvcRqst::reply_pages`]
//! makes the (empty) array when the Reply's first long Write is built, and
//! [`crate::rust::sunrpc::svc::SvcRqst::give_reply_pages`], once the Reply has been sent
//! (its pages are read from the request's page array until then), moves
//! the request's page pointers into it and empties their slots, so that
//! the references are the array's: one batch puts them all when the last
//! Write holding it is released.

use core::cell::UnsafeCell;
use kernel::prelude::*;
use kernel::sync::atomic::{Acquire, Atomic, Release};
use kernel::sync::Arc;

use crate::rust::bindings;
use crate::rust::module::live;
use crate::rust::rdma::verbs::PageRef;

/// A Reply's page array, shared (`Arc`) by the RDMA Writes that name its
/// pages ([`crate::rust::rdma::verbs::WorkRequest::with_reply_pages`]) and by the
/// server thread sending the Reply.
///
/// # Invariants
///
/// Until `given` is set, `pages` is empty and the Writes' pages are the
/// request's. Setting it (once, [`Self::claim`]) entitles one caller to
/// fill `pages`, within its capacity, before its reference to `self` goes;
/// nothing else touches `pages` but the drop. Each page filled in is live
/// and `self` holds a reference on it, or it is null; the drop puts them.
pub struct ReplyPages {
    pages: UnsafeCell<KVec<*mut bindings::page>>,
    given: Atomic<bool>,
}

// SAFETY: The page references may be put from any thread. `pages` is
// written by one thread (the claim's winner) while the others holding the
// array only hold it, and read only by the drop, after every reference is
// gone (which orders it after that write).
unsafe impl Send for ReplyPages {}
// SAFETY: See `Send`: shared references never read `pages`, and `given`
// is atomic.
unsafe impl Sync for ReplyPages {}

impl ReplyPages {
    /// An empty array with room for `capacity` pages.
    pub(in crate::rust) fn with_capacity(capacity: usize) -> Result<Arc<Self>> {
        let pages = KVec::with_capacity(capacity, GFP_KERNEL)?;
        // INVARIANT: empty and not given.
        Ok(Arc::new(
            Self {
                pages: UnsafeCell::new(pages),
                given: Atomic::new(false),
            },
            GFP_KERNEL,
        )?)
    }

    /// Marks the array given: `Some` (the array to fill) the first time,
    /// `None` after that.
    ///
    /// # Safety
    ///
    /// On `Some`, the caller writes only pages on which `self` then holds a
    /// reference each (the request's, given up), or nulls, within the
    /// array's capacity, before its own reference to `self` goes.
    #[expect(clippy::mut_from_ref)]
    pub(in crate::rust) unsafe fn claim(&self) -> Option<&mut KVec<*mut bindings::page>> {
        if self.given.xchg(true, Release) {
            return None;
        }
        live::inc(live::Kind::ReplyPages);
        // SAFETY: The first claim is the only one to get here, and nothing
        // else touches `pages` before the drop (type invariant).
        Some(unsafe { &mut *self.pages.get() })
    }

    /// An array holding the references of `refs` from the start, as a
    /// Reply's once its request gave them (for the KUnit suite's Writes
    /// from such pages).
    pub fn of_refs(refs: KVec<PageRef>) -> Result<Arc<Self>> {
        // SAFETY: `PageRef` is a transparent `NonNull<page>`, of the layout
        // of a page pointer, so the vector's allocation holds as many page
        // pointers, whose references the new vector takes over.
        let pages = unsafe {
            let (ptr, len, cap) = refs.into_raw_parts();
            KVec::from_raw_parts(ptr.cast::<*mut bindings::page>(), len, cap)
        };
        live::inc(live::Kind::ReplyPages);
        // INVARIANT: given, holding a reference on each of its pages.
        Ok(Arc::new(
            Self {
                pages: UnsafeCell::new(pages),
                given: Atomic::new(true),
            },
            GFP_KERNEL,
        )?)
    }
}

impl Drop for ReplyPages {
    fn drop(&mut self) {
        if !self.given.load(Acquire) {
            // The request still holds the pages and puts them itself.
            return;
        }
        let pages = self.pages.get_mut();
        // A request has far fewer than `u32::MAX` pages; were it otherwise,
        // none is put (a leak) rather than too many.
        let n = u32::try_from(pages.len()).unwrap_or(0);
        // SAFETY: The array holds one reference on each of its non-null
        // pages (type invariant), put here once (the helper skips nulls);
        // the vector holds `n` entries and then frees its memory.
        unsafe { bindings::rpcrdma_rs_release_page_slots(pages.as_mut_ptr(), n) };
        live::dec(live::Kind::ReplyPages);
    }
}
