// SPDX-License-Identifier: GPL-2.0

//! The pages of a Reply whose RDMA Writes leave straight from them, held
//! until those Writes complete (C's send context, filled by
//! `svc_rdma_save_io_pages` and put by `svc_rdma_send_ctxt_release`): by
//! the send context itself when they are few ([`HeldPages`], a Reply with
//! one short Write chunk, an NFS READ's), else by an array the Writes
//! share ([`ReplyPages`]).
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
use crate::rust::rdma::verbs::{PageRange, PageRef};

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

/// Most Reply pages a send context holds ([`HeldPages`]): those of a Reply
/// whose one Write chunk is shorter than 16 pages (an NFS READ's), with its
/// head page and the page an unaligned payload spills into, and room to
/// spare.
pub const HELD_PAGES: usize = 20;

/// Reply pages a send context holds, with the request's references, until
/// its Send completes (C `sc_pages`, filled by `svc_rdma_save_io_pages` and
/// put by `svc_rdma_send_ctxt_release`): kept in the context, so no
/// allocation, and no reference taken and put per page.
///
/// # Invariants
///
/// `n <= HELD_PAGES`; each of `pages[..n]` is a page on which `self`
/// holds a reference, or null.
pub struct HeldPages {
    pages: [*mut bindings::page; HELD_PAGES],
    n: usize,
}

// SAFETY: The page references may be put from any thread; the array is
// reached only through its owner (a send context's holder).
unsafe impl Send for HeldPages {}
// SAFETY: A shared reference only reads the pointers.
unsafe impl Sync for HeldPages {}

impl HeldPages {
    /// None held.
    pub const fn new() -> Self {
        // INVARIANT: none.
        Self {
            pages: [core::ptr::null_mut(); HELD_PAGES],
            n: 0,
        }
    }

    /// How many pages (or nulls) are held.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Takes over the `n` page pointers at `slots`, with their references,
    /// and empties the slots; `false`, with nothing done, when there is no
    /// room for `n` more.
    ///
    /// # Safety
    ///
    /// `slots[..n]` are valid for reads and writes, each a page whose
    /// reference the caller gives up by this call, or null.
    pub(in crate::rust) unsafe fn take_from(
        &mut self,
        slots: *mut *mut bindings::page,
        n: usize,
    ) -> bool {
        if n > HELD_PAGES - self.n {
            return false;
        }
        // A few pointers each time (an NFS READ's two or three): moved one
        // by one, not with calls to `memcpy` and `memset`.
        let to = self.pages.iter_mut().skip(self.n).take(n);
        for (i, slot) in to.enumerate() {
            // SAFETY: `i < n`: `slots[i]` is valid for reads and writes by
            // the caller's requirement. INVARIANT: each reference moves
            // here once, its slot emptied.
            unsafe {
                let from = slots.add(i);
                *slot = *from;
                *from = core::ptr::null_mut();
            }
        }
        self.n += n;
        live::add(live::Kind::HeldPage, n);
        true
    }

    /// Takes over the references of `refs` (the KUnit suite's pages, held
    /// as a Reply's are); `false`, with `refs` dropped, when there is no
    /// room for them.
    pub fn take_refs(&mut self, refs: KVec<PageRef>) -> bool {
        let n = refs.len();
        let (ptr, len, cap) = refs.into_raw_parts();
        // SAFETY: `PageRef` is a transparent `NonNull<page>`, so the
        // vector's `len` entries are page pointers with a reference each,
        // given up here: taken over, or (no room) rebuilt and dropped.
        unsafe {
            let slots = ptr.cast::<*mut bindings::page>();
            let taken = self.take_from(slots, n);
            drop(KVec::from_raw_parts(ptr, if taken { 0 } else { len }, cap));
            taken
        }
    }

    /// The bytes `[off, off + len)` of the held pages from `first` on (an
    /// RDMA Write's source); `EINVAL` unless they span held pages only.
    pub fn range(&self, first: usize, off: usize, len: usize) -> Result<PageRange<'_>> {
        let end = off.checked_add(len).ok_or(EINVAL)?;
        let count = end.div_ceil(kernel::page::PAGE_SIZE);
        let last = first.checked_add(count).ok_or(EINVAL)?;
        let pages = self.pages.get(first..last.min(self.n)).ok_or(EINVAL)?;
        // SAFETY: Each entry is a page `self` holds a reference on, or null
        // (type invariant), while `self` is borrowed; `PageRange::new`
        // refuses a range that does not span exactly them.
        unsafe { PageRange::new(pages, off, len) }
    }

    /// Puts every held page (one batch) and holds none.
    pub fn release(&mut self) {
        let n = core::mem::take(&mut self.n);
        if n == 0 {
            return;
        }
        // SAFETY: `pages[..n]` are referenced pages or nulls (type
        // invariant), put once here (the helper skips nulls): `n` is 0
        // now. `n <= HELD_PAGES` fits a `c_uint`.
        unsafe { bindings::rpcrdma_rs_release_page_slots(self.pages.as_mut_ptr(), n as u32) };
        live::sub(live::Kind::HeldPage, n);
    }
}

impl Default for HeldPages {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for HeldPages {
    fn drop(&mut self) {
        self.release();
    }
}
