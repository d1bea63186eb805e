// SPDX-License-Identifier: GPL-2.0

//! The pages a Call's Read chunk is read into (C's `rc_pages`).
//!
//! The server takes them from the request that posts the RDMA Reads, as C
//! does (`svc_rdma_clear_rqst_pages`: `svc_alloc_arg` refills the slots in
//! bulk), maps each once for the device to write, and scatters the Reads
//! over them. The request that assembles the Call takes them over
//! ([`PageSinks::received_pages`]). A 1 MiB WRITE costs one allocation
//! here, not one page and one buffer object per page.

use kernel::{alloc::flags::GFP_KERNEL, page::PAGE_SIZE, prelude::*, sync::Arc};

use super::bindings;
use super::live;
use super::verbs::{map_page_range, DmaDir, Endpoint, PageRef, Pd, SgEntry};
use crate::proto::pieces::{page_spans, PageSpan};

/// One page of [`PageSinks`] and where the device sees it.
struct SinkPage {
    /// Only held: put after the mapping is undone.
    page: PageRef,
    dma: u64,
}

/// Pages mapped whole for the device to write: the sinks of the RDMA Reads
/// of one Call's Read chunk, whose bytes lie from offset 0 of the first
/// page on. Shared (`Arc`) by the Reads that land in them (each holds it
/// until its completion is released) and by the work that assembles the
/// Call.
///
/// # Invariants
///
/// Each `pages[i].dma` maps the whole page `pages[i].page` references, for
/// the device to write, on `pd`'s device, until `drop`.
pub struct PageSinks {
    pages: KVec<SinkPage>,
    pd: Arc<Pd>,
}

/// Part of one page of a [`PageSinks`]: one scatter/gather entry of an
/// RDMA Read ([`PageSinks::spans`]), which holds the pages while posted.
///
/// # Invariants
///
/// `offset + len <= PAGE_SIZE`, `len > 0` and `page < sinks.pages.len()`.
pub struct SinkSpan {
    pub(in crate::rust) sinks: Arc<PageSinks>,
    page: usize,
    offset: u32,
    len: u32,
}

impl SinkSpan {
    /// The entry's DMA address and length, and the protection domain whose
    /// local key covers it.
    pub(in crate::rust) fn dma_range(&self) -> (u64, u32, &Pd) {
        // In bounds by the type invariant; the offset is below a page.
        let dma = self.sinks.pages[self.page]
            .dma
            .wrapping_add(u64::from(self.offset));
        (dma, self.len, &self.sinks.pd)
    }
}

impl From<SinkSpan> for SgEntry {
    fn from(span: SinkSpan) -> Self {
        Self::Sink(span)
    }
}

impl Endpoint {
    /// Maps `pages` (taken from a request: [`super::svc::Rqst::take_arg_pages`])
    /// for the device to write, as the sinks of one Call's RDMA Reads.
    /// On an error the pages are put.
    pub fn map_page_sinks(&self, pages: KVec<PageRef>) -> Result<Arc<PageSinks>> {
        let pd = self.pd();
        let mut sinks = PageSinks {
            pages: KVec::with_capacity(pages.len(), GFP_KERNEL)?,
            pd: pd.clone(),
        };
        for page in pages {
            // The sinks keep `page` until `drop` undoes the mapping.
            let (_, dma) = map_page_range(pd, &page, 0, PAGE_SIZE, DmaDir::FromDevice)?;
            live::inc(live::Kind::DmaBuf);
            // Room was reserved above: this push does not allocate.
            // INVARIANT: mapped whole for the device to write just above.
            sinks.pages.push(SinkPage { page, dma }, GFP_KERNEL)?;
        }
        Ok(Arc::new(sinks, GFP_KERNEL)?)
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

    /// The protection domain the pages are mapped on.
    pub(in crate::rust) fn pd(&self) -> &Arc<Pd> {
        &self.pd
    }

    /// The scatter list of an RDMA Read of the bytes `[off, off + len)`,
    /// counted from the first page's first byte: one entry per page they
    /// touch. Fails with `EINVAL` past the last page.
    pub fn spans(
        self: &Arc<Self>,
        off: usize,
        len: usize,
    ) -> Result<impl Iterator<Item = Result<SinkSpan>>> {
        let spans = self.page_spans(off, len)?;
        let sinks = self.clone();
        Ok(spans.map(move |s| {
            // INVARIANT: `page_spans` keeps each span within its page and
            // non-empty, and within the pages.
            Ok(SinkSpan {
                sinks: sinks.clone(),
                page: s.page,
                offset: u32::try_from(s.offset)?,
                len: u32::try_from(s.len)?,
            })
        }))
    }

    /// The pages' DMA runs for the bytes `[off, off + len)` (see
    /// [`Self::spans`]), for a registration over them.
    pub(in crate::rust) fn dma_runs(
        &self,
        off: usize,
        len: usize,
    ) -> Result<impl Iterator<Item = (u64, u32)> + '_> {
        Ok(self.page_spans(off, len)?.map(move |s| {
            // In bounds (`page_spans`); a span is at most a page long.
            let page = &self.pages[s.page];
            (page.dma.wrapping_add(s.offset as u64), s.len as u32)
        }))
    }

    /// The per-page pieces of the bytes `[off, off + len)`; `EINVAL` for
    /// a range that is empty or reaches past the last page.
    fn page_spans(&self, off: usize, len: usize) -> Result<impl Iterator<Item = PageSpan>> {
        let end = off.checked_add(len).ok_or(EINVAL)?;
        let room = self.pages.len().checked_mul(PAGE_SIZE).ok_or(EINVAL)?;
        if len == 0 || end > room {
            return Err(EINVAL);
        }
        page_spans(off, len, PAGE_SIZE).ok_or(EINVAL)
    }

    /// Makes what the device wrote visible to the CPU and returns new
    /// references on the pages, in order, to hand them to a request
    /// without a copy. Every Read into the pages must have completed.
    pub fn received_pages(&self) -> Result<KVec<PageRef>> {
        let mut out = KVec::with_capacity(self.pages.len(), GFP_KERNEL)?;
        for p in self.pages.iter() {
            self.sync_for_cpu(p);
            // Room was reserved above: this push does not allocate.
            out.push(p.page.clone(), GFP_KERNEL)?;
        }
        Ok(out)
    }

    /// Copies `out.len()` bytes at `offset` of page `page` out (to check
    /// what a completed Read put there).
    pub fn read(&self, page: usize, offset: usize, out: &mut [u8]) -> Result {
        let p = self.pages.get(page).ok_or(EINVAL)?;
        self.sync_for_cpu(p);
        p.page.read(offset, out)
    }

    fn sync_for_cpu(&self, p: &SinkPage) {
        // SAFETY: The mapping is live by the type invariant.
        unsafe {
            bindings::rpcrdma_rs_dma_sync_for_cpu(
                self.pd.device_ptr(),
                p.dma,
                PAGE_SIZE,
                i32::from(false),
            )
        };
    }
}

impl Drop for PageSinks {
    fn drop(&mut self) {
        for p in self.pages.iter() {
            // SAFETY: The mapping is live (type invariant) and no posted
            // work request names it: each holds a reference to `self`.
            unsafe {
                bindings::rpcrdma_rs_dma_unmap(
                    self.pd.device_ptr(),
                    p.dma,
                    PAGE_SIZE,
                    i32::from(false),
                )
            };
            live::dec(live::Kind::DmaBuf);
        }
        // The pages are put when `pages` drops, their mappings undone.
    }
}
