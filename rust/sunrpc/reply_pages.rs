// SPDX-License-Identifier: GPL-2.0

//! The pages of a Reply whose RDMA Writes leave straight from them, held
//! by the Reply's send context until those Writes complete (C's send
//! context, filled by `svc_rdma_save_io_pages` and put by
//! `svc_rdma_send_ctxt_release`).
//!
//! Taking a reference on each page a Write names, and putting it when the
//! Write completes, costs two atomic operations per page on top of the
//! request's own reference, which sunrpc puts after the Reply. Instead the
//! request gives its references up: once the Reply's bytes have been read
//! from its pages, [`crate::rust::sunrpc::svc::SvcRqst::give_reply_pages_to`]
//! moves the request's page pointers into the context's [`HeldPages`] and
//! empties their slots, so that the references are the context's: one
//! batch puts them all when its Send completes.

use kernel::prelude::*;

use crate::rust::bindings;
use crate::rust::module::live;
use crate::rust::rdma::verbs::{PageRange, PageRef};

/// Reply pages a send context holds, with the request's references, until
/// its Send completes (C `sc_pages`, filled by `svc_rdma_save_io_pages` and
/// put by `svc_rdma_send_ctxt_release`): no reference is taken and put per
/// page. The array is the context's: made on its first Reply and grown to
/// the most pages one has had (at most the request's pages, as C sizes
/// `sc_pages`), not allocated per Reply.
///
/// # Invariants
///
/// Each of `pages[..]` (its length) is a page on which `self` holds a
/// reference, or null.
pub struct HeldPages {
    pages: KVec<*mut bindings::page>,
}

// SAFETY: The page references may be put from any thread; the array is
// reached only through its owner (a send context's holder).
unsafe impl Send for HeldPages {}
// SAFETY: A shared reference only reads the pointers.
unsafe impl Sync for HeldPages {}

impl HeldPages {
    /// None held, no array made.
    pub const fn new() -> Self {
        // INVARIANT: none.
        Self { pages: KVec::new() }
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.pages.is_empty()
    }

    /// Takes over the `n` page pointers at `slots`, with their references,
    /// and empties the slots (one copy and one clear, as many as a 1 MiB
    /// Reply's). Fails, with nothing done, when the array cannot grow to
    /// hold them.
    ///
    /// # Safety
    ///
    /// `slots[..n]` are valid for reads and writes, each a page whose
    /// reference the caller gives up by this call, or null.
    #[inline(always)]
    pub(in crate::rust) unsafe fn take_from(
        &mut self,
        slots: *mut *mut bindings::page,
        n: usize,
    ) -> Result {
        let len = self.pages.len();
        // Grown only while the context's Replies grow: not a call a Reply.
        if self.pages.capacity() - len < n {
            self.pages.reserve(n, GFP_KERNEL)?;
        }
        // SAFETY: `slots[..n]` by the caller's requirement; the array has
        // room for `n` more (reserved above), which do not overlap them,
        // and they are written before they are counted. INVARIANT: each
        // reference moves here once, its slot emptied.
        unsafe {
            copy_page_ptrs(slots.cast_const(), self.pages.as_mut_ptr().add(len), n);
            self.pages.inc_len(n);
            clear_page_ptrs(slots, n);
        }
        live::add(live::Kind::HeldPage, n);
        Ok(())
    }

    /// Takes over the references of `refs` (the KUnit suite's pages, held
    /// as a Reply's are); fails, with `refs` dropped, when the array
    /// cannot grow to hold them.
    pub fn take_refs(&mut self, refs: KVec<PageRef>) -> Result {
        self.pages.reserve(refs.len(), GFP_KERNEL)?;
        let (ptr, len, cap) = refs.into_raw_parts();
        // SAFETY: `PageRef` is a transparent `NonNull<page>`, so the
        // vector's `len` entries are page pointers with a reference each,
        // taken over (room was made above, so all of them; were it
        // otherwise, those left would be leaked, not put twice). The
        // vector is then freed empty.
        unsafe {
            let taken = self.take_from(ptr.cast::<*mut bindings::page>(), len);
            drop(KVec::from_raw_parts(ptr, 0, cap));
            taken
        }
    }

    /// The bytes `[off, off + len)` of the held pages from `first` on (an
    /// RDMA Write's source); `EINVAL` unless they span held pages only.
    pub fn range(&self, first: usize, off: usize, len: usize) -> Result<PageRange<'_>> {
        let end = off.checked_add(len).ok_or(EINVAL)?;
        let last = first.checked_add(end.div_ceil(kernel::page::PAGE_SIZE));
        let pages = self.pages.get(first..last.ok_or(EINVAL)?).ok_or(EINVAL)?;
        // SAFETY: Each entry is a page `self` holds a reference on, or null
        // (type invariant), while `self` is borrowed; `PageRange::new`
        // refuses a range that does not span exactly them.
        unsafe { PageRange::new(pages, off, len) }
    }

    /// Puts every held page (one batch) and holds none; the array stays
    /// for the context's next Reply.
    pub fn release(&mut self) {
        let n = self.pages.len();
        if n == 0 {
            return;
        }
        // SAFETY: `pages[..n]` are referenced pages or nulls (type
        // invariant), put once here: the array is emptied just below.
        unsafe { put_page_slots(&mut self.pages) };
        self.pages.clear();
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

/// Copies `n` page pointers from `src` to `dst`: one or two (a 4 KiB
/// I/O's pages) move by themselves, where a `memcpy` call would cost more
/// than the moves; more go with `memcpy`.
///
/// # Safety
///
/// `src` is valid for reads and `dst` for writes of `n` pointers, and the
/// two do not overlap.
#[inline(always)]
pub(in crate::rust) unsafe fn copy_page_ptrs(
    src: *const *mut bindings::page,
    dst: *mut *mut bindings::page,
    n: usize,
) {
    // SAFETY: `n` entries of each, by the caller's requirement.
    unsafe {
        match n {
            0 => {}
            1 => *dst = *src,
            2 => {
                *dst = *src;
                *dst.add(1) = *src.add(1);
            }
            _ => core::ptr::copy_nonoverlapping(src, dst, n),
        }
    }
}

/// Empties `n` page slots at `slots` (null pointers), as
/// [`copy_page_ptrs`] copies them.
///
/// # Safety
///
/// `slots` is valid for writes of `n` pointers.
#[inline(always)]
pub(in crate::rust) unsafe fn clear_page_ptrs(slots: *mut *mut bindings::page, n: usize) {
    // SAFETY: `n` entries, by the caller's requirement.
    unsafe {
        match n {
            0 => {}
            1 => *slots = core::ptr::null_mut(),
            2 => {
                *slots = core::ptr::null_mut();
                *slots.add(1) = core::ptr::null_mut();
            }
            _ => core::ptr::write_bytes(slots, 0, n),
        }
    }
}

/// Puts the pages of `slots` in one batch, skipping nulls.
///
/// # Safety
///
/// Each entry is a page whose reference the caller gives up by this call,
/// or null; the entries are not used again (the helper may reorder them).
#[inline(always)]
pub(in crate::rust) unsafe fn put_page_slots(slots: &mut [*mut bindings::page]) {
    // Usually every slot holds a page. The AND of all the addresses is
    // not 0 only if none is null (on x86-64 and arm64, where every kernel
    // address has its top bit set, it is not 0 whenever none is): one
    // instruction a slot, no branch, where the helper's search for a null
    // takes a compare and a branch each. A few slots (a 4 KiB READ's
    // Reply, a 4 KiB WRITE's page) are searched faster than that is set
    // up.
    let looked = slots.len() >= 8 && slots.iter().fold(usize::MAX, |acc, p| acc & p.addr()) != 0;
    let pages = if looked { slots.len() } else { 0 };
    // A request has far fewer than `u32::MAX` pages; were it otherwise,
    // none would be put (a leak) rather than too many.
    let Ok(nr) = u32::try_from(slots.len()) else {
        return;
    };
    // SAFETY: By the caller's requirement; `slots[..pages]` hold pages
    // (found above), `pages <= nr`, so the cast keeps its value.
    unsafe { bindings::rpcrdma_rs_release_page_slots(slots.as_mut_ptr(), nr, pages as u32) };
}
