// SPDX-License-Identifier: GPL-2.0

//! The pages a Call's Read chunk is read into (C's `rc_pages`).
//!
//! The server takes them from the request that posts the RDMA Reads, as C
//! does (`svc_rdma_clear_rqst_pages`: `svc_alloc_arg` refills the slots in
//! bulk), maps each once for the device to write, and scatters the Reads
//! over them. The request that assembles the Call takes them over
//! ([`PageSinks::take_received_pages`]). A 1 MiB WRITE costs two allocations
//! here (the DMA addresses and the shared object; the page array is the
//! one the request's pages came in), not one page and one buffer object
//! per page.

use core::mem::MaybeUninit;
use core::ptr::NonNull;
use kernel::sync::atomic::{Atomic, Relaxed};
use kernel::{alloc::flags::GFP_KERNEL, error::to_result, page::PAGE_SIZE, prelude::*, sync::Arc};

use crate::rust::bindings;
use crate::rust::module::live;
use crate::rust::rdma::verbs::{Endpoint, PageRef, Pd};
use crate::rust::sunrpc::reply_pages::copy_page_ptrs;
use crate::rust::sunrpc::svc::SvcRqst;
use core::pin::Pin;
use kernel::sync::UniqueArc;

/// Pages mapped whole for the device to write: the sinks of the RDMA Reads
/// of one Call's Read chunk, whose bytes lie from offset 0 of the first
/// page on. Shared (`Arc`) by the Reads that land in them (each holds it
/// until its completion is released) and by the work that assembles the
/// Call. One helper call maps them all; once they were read into, one
/// unmaps them and hands their references to the request
/// ([`PageSinks::take_received_pages`]); otherwise one unmaps and puts
/// them on drop.
///
/// # Invariants
///
/// `pages` and `dmas` have the same length. Until `taken` is set, each
/// `dmas[i]` maps the whole page `pages[i]`, on which the sinks hold a
/// reference, for the device to write, on `pd`'s device; after, the sinks
/// hold neither the mappings nor the references. `taken` is set once.
pub struct PageSinks {
    pages: KVec<NonNull<bindings::page>>,
    dmas: KVec<u64>,
    pd: Arc<Pd>,
    taken: Atomic<bool>,
}

// SAFETY: The page references may be put from any thread, and the pages'
// mappings are only read.
unsafe impl Send for PageSinks {}
// SAFETY: Shared references only read the page and DMA addresses.
unsafe impl Sync for PageSinks {}

impl Endpoint {
    /// Maps `pages` for the device to write, as the sinks of RDMA Reads
    /// (a request's own are mapped with [`Self::map_arg_pages`]).
    /// On an error the pages are put.
    pub fn map_page_sinks(&self, pages: KVec<PageRef>) -> Result<Arc<PageSinks>> {
        let pd = self.pd();
        let n = pages.len();
        let dmas = KVec::<u64>::with_capacity(n, GFP_KERNEL)?;
        // SAFETY: `PageRef` is a transparent `NonNull<page>` of the same
        // layout, so the vector's allocation holds as many page pointers,
        // whose references the new vector takes over.
        let pages = unsafe {
            let (ptr, len, cap) = pages.into_raw_parts();
            KVec::from_raw_parts(ptr.cast::<NonNull<bindings::page>>(), len, cap)
        };
        let mut sinks = PageSinks {
            pages,
            dmas,
            pd: pd.clone(),
            taken: Atomic::new(false),
        };
        sinks.map_pages()?;
        Ok(Arc::new(sinks, GFP_KERNEL)?)
    }
}

impl Endpoint {
    /// Takes `n` argument pages out of `rqst` ([`SvcRqst::take_arg_pages`])
    /// and maps them for the device to write, as the sinks of one Call's
    /// RDMA Reads, in the allocations of `spare` when it is given, is the
    /// only reference to its sinks and they were handed over
    /// ([`PageSinks::take_received_pages`]): a Call's sinks made from the
    /// last one's allocate nothing. On an error the pages taken are put.
    pub fn map_arg_pages(
        &self,
        rqst: &mut SvcRqst,
        n: usize,
        spare: Option<Arc<PageSinks>>,
    ) -> Result<Arc<PageSinks>> {
        let pd = self.pd();
        let reusable = spare
            .and_then(Arc::into_unique_or_drop)
            .filter(|s| s.taken.load(Relaxed) && Arc::ptr_eq(&s.pd, pd));
        let mut sinks = match reusable {
            Some(s) => s,
            // INVARIANT: taken, holding nothing.
            None => Pin::from(UniqueArc::new(
                PageSinks {
                    pages: KVec::new(),
                    dmas: KVec::new(),
                    pd: pd.clone(),
                    taken: Atomic::new(true),
                },
                GFP_KERNEL,
            )?),
        };
        let s = Pin::get_mut(sinks.as_mut());
        // Taken: the entries name nothing the sinks hold.
        s.pages.clear();
        s.dmas.clear();
        s.dmas.reserve(n, GFP_KERNEL)?;
        rqst.take_arg_pages(n, &mut s.pages)?;
        // INVARIANT: the sinks hold the pages' references from here, no
        // mapping yet (`dmas` is empty): dropped, they put the pages.
        s.taken.store(false, Relaxed);
        s.map_pages()?;
        Ok(sinks.into())
    }
}

impl PageSinks {
    /// Maps the pages, which the sinks hold and `dmas` has room for, with
    /// no mapping yet, for the device to write: one helper call. On an
    /// error it mapped none (and the sinks dropped put the pages).
    fn map_pages(&mut self) -> Result {
        let n = self.pages.len();
        if self.dmas.capacity() < n || !self.dmas.is_empty() || self.taken.load(Relaxed) {
            return Err(EINVAL);
        }
        let count = u32::try_from(n)?;
        // SAFETY: The `n` pages are live (referenced by the sinks, not
        // taken), and `dmas` has room for `n` addresses (both checked
        // above); on success the helper wrote them all, so the first `n`
        // entries are initialised.
        to_result(unsafe {
            bindings::rpcrdma_rs_dma_map_sink_pages(
                self.pd.device_ptr(),
                self.pages.as_ptr().cast(),
                count,
                self.dmas.as_mut_ptr(),
            )
        })?;
        // SAFETY: Written just above, within the capacity.
        // INVARIANT: every page is mapped whole for the device to write.
        unsafe { self.dmas.inc_len(n) };
        live::add(live::Kind::MappedBuf, n);
        Ok(())
    }
}

impl PageSinks {
    /// How many pages.
    pub fn len(&self) -> usize {
        self.pages.len()
    }

    /// Whether there are no pages.
    pub fn is_empty(&self) -> bool {
        self.pages.is_empty()
    }

    /// Whether the pages were handed to a request: the sinks hold nothing.
    pub fn handed_over(&self) -> bool {
        self.taken.load(Relaxed)
    }

    /// The protection domain the pages are mapped on.
    pub(in crate::rust) fn pd(&self) -> &Arc<Pd> {
        &self.pd
    }

    /// The pages' DMA runs for the bytes `[off, off + len)`, counted from
    /// the first page's first byte: one per page they touch, for a
    /// registration over them or a Read's scatter list
    /// ([`Self::page_sges`]). Fails with `EINVAL` for an empty range or one
    /// past the last page.
    pub(in crate::rust) fn dma_runs(
        &self,
        off: usize,
        len: usize,
    ) -> Result<impl Iterator<Item = (u64, u32)> + '_> {
        let (dmas, first) = self.page_dmas(off, len)?;
        runs_of(dmas, first, len)
    }

    /// The DMA addresses of the pages the bytes `[off, off + len)` touch
    /// (counted from the first page's first byte), and the range's offset
    /// in the first of them: a Read's scatter list without a walk of
    /// pieces. `EINVAL` for an empty range or one past the last page.
    pub(in crate::rust) fn page_dmas(&self, off: usize, len: usize) -> Result<(&[u64], usize)> {
        let end = off.checked_add(len).ok_or(EINVAL)?;
        if len == 0 {
            return Err(EINVAL);
        }
        let (first, last) = (off / PAGE_SIZE, (end - 1) / PAGE_SIZE);
        let dmas = self.dmas.get(first..=last).ok_or(EINVAL)?;
        Ok((dmas, off % PAGE_SIZE))
    }

    /// Writes the scatter/gather list of bytes `[off, off + len)` of the
    /// pages (counted from the first page's first byte) into the first
    /// entries of `sges`, one per page they touch under the protection
    /// domain's local key, and returns how many it wrote (the rest are
    /// left as they were). `EINVAL` for an empty range, one past the last
    /// page, or one over more pages than `sges` holds.
    // Inlined into each Read's post, as it was while the one-page piece
    // (a 4 KiB WRITE's) was all it did: a call costs such a piece about
    // as much again.
    #[inline(always)]
    pub(in crate::rust) fn page_sges(
        &self,
        off: usize,
        len: usize,
        sges: &mut [MaybeUninit<bindings::ib_sge>],
    ) -> Result<usize> {
        let (dmas, first) = self.page_dmas(off, len)?;
        let lkey = self.pd.lkey();
        let n = dmas.len();
        let sges = sges.get_mut(..n).ok_or(EINVAL)?;
        let (Some((sge, sges)), Some((&dma, dmas))) = (sges.split_first_mut(), dmas.split_first())
        else {
            return Err(EINVAL);
        };
        // Every page between the first and the last is whole, so its entry
        // needs no length worked out (a 1 MiB WRITE's pages are all such).
        let (head, tail) = page_shares(n, first, len)?;
        let addr = dma.wrapping_add(first as u64);
        sge.write(bindings::ib_sge {
            addr,
            length: head as u32,
            lkey,
        });
        let (Some((last, whole)), Some((&last_dma, whole_dmas))) =
            (sges.split_last_mut(), dmas.split_last())
        else {
            return Ok(n);
        };
        for (sge, &addr) in whole.iter_mut().zip(whole_dmas) {
            sge.write(bindings::ib_sge {
                addr,
                length: PAGE_SIZE as u32,
                lkey,
            });
        }
        last.write(bindings::ib_sge {
            addr: last_dma,
            length: tail as u32,
            lkey,
        });
        Ok(n)
    }

    /// Unmaps the pages, which makes what the device wrote visible to the
    /// CPU, and hands their references over, in order, for a request
    /// (C `svc_rdma_read_complete` moves `rc_pages` into `rq_pages`): no
    /// reference taken or put per page. Every Read into the pages must have
    /// completed: the device is done with them. Once only: `EINVAL` after,
    /// and the sinks then map and hold nothing.
    pub fn take_received_pages(&self) -> Result<KVec<PageRef>> {
        let n = self.pages.len();
        let mut out = KVec::<PageRef>::with_capacity(n, GFP_KERNEL)?;
        // SAFETY: `out` has room for `n` entries, and a `PageRef` is a
        // transparent page pointer: on success its first `n` entries are
        // initialised references (the sinks' own). The caller's
        // requirement is this function's.
        unsafe {
            self.hand_over_received_pages(out.as_mut_ptr().cast(), n)?;
            out.inc_len(n);
        }
        Ok(out)
    }

    /// As [`Self::take_received_pages`], into the `n` page slots at
    /// `slots` (a request's page array) rather than a vector of their own.
    /// `EINVAL`, with nothing written, if `n` is not the number of pages
    /// or the pages were taken before.
    ///
    /// # Safety
    ///
    /// `slots` is valid for writes of `n` page pointers, whose previous
    /// contents the caller has given up; every Read into the pages has
    /// completed.
    pub(in crate::rust) unsafe fn hand_over_received_pages(
        &self,
        slots: *mut *mut bindings::page,
        n: usize,
    ) -> Result {
        if n != self.pages.len() {
            return Err(EINVAL);
        }
        let count = u32::try_from(n)?;
        if self.taken.xchg(true, Relaxed) {
            return Err(EINVAL);
        }
        if self.pd.virt_dma() {
            // SAFETY: On a device whose DMA addresses are the pages' kernel
            // addresses (rxe, siw) a mapping leaves nothing to undo, so the
            // pages, referenced by the sinks (type invariant, not taken
            // before), are handed over as they are: written to the `n`
            // slots `slots` has room for (the caller's requirements), a
            // `NonNull<page>` being a `*mut page` that is not null. The
            // sinks' own references go with them, which `taken` (set above,
            // once) gives up. INVARIANT: no longer mapped or held.
            unsafe { copy_page_ptrs(self.pages.as_ptr().cast(), slots, n) };
        } else {
            // SAFETY: As above, the device done with the pages: the helper
            // unmaps each page and writes it to its slot, handing over the
            // sinks' own reference. INVARIANT: as above.
            unsafe {
                bindings::rpcrdma_rs_sink_pages_received(
                    self.pd.device_ptr(),
                    self.pages.as_ptr().cast(),
                    self.dmas.as_ptr(),
                    count,
                    slots,
                );
            }
        }
        live::sub(live::Kind::MappedBuf, n);
        Ok(())
    }

    /// Copies `out.len()` bytes at `offset` of page `page` out (to check
    /// what a completed Read put there).
    pub fn read(&self, page: usize, offset: usize, out: &mut [u8]) -> Result {
        if self.taken.load(Relaxed) {
            return Err(EINVAL);
        }
        let (p, dma) = match (self.pages.get(page), self.dmas.get(page)) {
            (Some(p), Some(dma)) => (*p, *dma),
            _ => return Err(EINVAL),
        };
        // SAFETY: The mapping is live by the type invariant (not taken:
        // only a test reads, not racing the take).
        unsafe {
            bindings::rpcrdma_rs_dma_sync_for_cpu(
                self.pd.device_ptr(),
                dma,
                PAGE_SIZE,
                i32::from(false),
            )
        };
        // SAFETY: The sinks hold a reference on the page (type invariant),
        // which the temporary takes another of.
        let page = unsafe { PageRef::get(p) };
        page.read(offset, out)
    }
}

impl Drop for PageSinks {
    fn drop(&mut self) {
        if self.taken.load(Relaxed) {
            // The request has the pages; nothing is mapped.
            return;
        }
        let n = self.dmas.len().min(self.pages.len());
        // SAFETY: The first `n` pages are mapped at `dmas` (type invariant,
        // not taken)
        // and no posted work request names them: each holds a reference to
        // `self`. The helper unmaps and puts each of the `pages.len()`
        // pages (those past `n` were never mapped: a failed map); the
        // vectors then free their memory, dropping no element.
        unsafe {
            bindings::rpcrdma_rs_release_sink_pages(
                self.pd.device_ptr(),
                self.pages.as_ptr().cast(),
                self.dmas.as_ptr(),
                n as u32,
                self.pages.len() as u32,
            )
        };
        live::sub(live::Kind::MappedBuf, n);
    }
}

/// How `len` bytes from `first` bytes into the first of `pages` pages
/// (those the bytes touch, [`PageSinks::page_dmas`]: at least one, and
/// `first` within the first) share them out: the first page's bytes and,
/// over two pages or more, the last's, at least a byte and at most a page
/// (`EINVAL` otherwise); every page between is whole.
#[inline(always)]
fn page_shares(pages: usize, first: usize, len: usize) -> Result<(usize, usize)> {
    let head = (PAGE_SIZE - first).min(len);
    let Some(between) = pages.checked_sub(2) else {
        return Ok((head, 0));
    };
    let tail = (len - head).checked_sub(between * PAGE_SIZE);
    let tail = tail.filter(|&t| t > 0 && t <= PAGE_SIZE).ok_or(EINVAL)?;
    Ok((head, tail))
}

/// The runs of `len` bytes laid over the pages at `dmas` from `first`
/// bytes into the first (the pages they touch, [`PageSinks::page_dmas`]):
/// one per page, each `(address, length)`, shared out as
/// [`PageSinks::page_sges`] writes them ([`page_shares`]).
fn runs_of(
    dmas: &[u64],
    first: usize,
    len: usize,
) -> Result<impl Iterator<Item = (u64, u32)> + '_> {
    let (head, tail) = page_shares(dmas.len(), first, len)?;
    let last = dmas.len().saturating_sub(1);
    Ok(dmas.iter().enumerate().map(move |(i, &dma)| match i {
        0 => (dma.wrapping_add(first as u64), head as u32),
        i if i == last => (dma, tail as u32),
        _ => (dma, PAGE_SIZE as u32),
    }))
}
