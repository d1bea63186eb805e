// SPDX-License-Identifier: GPL-2.0

//! Where a connection's RDMA Reads land ([`ReadSinks`]): cached buffers,
//! pages taken from the request that posts them ([`PagedSinks`]), or those
//! pages registered through an MR of the connection's pool (iWARP).

use super::rw::PIECE;
use crate::proto::pieces::Piece;
use crate::proto::svc_call::PagedCall;
use crate::rust::rdma::sink_pool::SinkMrPool;
use crate::rust::rdma::verbs::{Endpoint, MappedBuf, MAX_SGE};
use crate::rust::sunrpc::page_sinks::PageSinks;
use kernel::page::PAGE_SIZE;
use kernel::prelude::*;
use kernel::sync::Arc;

/// Most pages one RDMA Read into pages scatters over (its SGEs).
pub(super) const PAGED_SGES: usize = MAX_SGE;

/// Largest RDMA Read into pages: one page less than [`PAGED_SGES`], so a
/// piece that starts anywhere in a page (a client's segments need not be
/// page-sized) still spans at most that many pages.
const PAGED_PIECE: usize = (PAGED_SGES - 1) * PAGE_SIZE;

/// Pages one MR of a connection's pool maps (fewer if the device allows
/// fewer): a Read of up to 64 pages, one page less (see [`PAGED_PIECE`]),
/// so a 256 KiB WRITE is one Read and a 1 MiB one four, as with C's
/// `rdma_rw` MRs.
pub(super) const REGISTERED_PAGES: u32 = 65;

/// Where a connection's RDMA Reads land.
pub(super) enum ReadSinks {
    /// Buffers from the registration cache, copied into the request's
    /// pages when the Call is assembled.
    Cached,
    /// A Call's single Read chunk lands in pages of its own, which the
    /// request takes over: each Read scatters over its pages with one
    /// entry per page (devices whose sinks need no registration).
    Pages,
    /// As `Pages`, each Read through an MR of this pool registered over
    /// its pages and invalidated by the Read (iWARP).
    RegisteredPages(Arc<SinkMrPool>),
}

impl ReadSinks {
    /// The largest piece one Read moves.
    pub(super) fn piece_size(&self) -> usize {
        match self {
            Self::Cached => PIECE,
            Self::Pages => PAGED_PIECE,
            // One page less than the MR maps, as for `PAGED_PIECE`.
            Self::RegisteredPages(pool) => {
                (pool.pages() as usize).saturating_sub(1).max(1) * PAGE_SIZE
            }
        }
    }

    /// The largest piece a Call's Reads are cut into: this kind's when
    /// its Read chunk lands in pages of its own (`paged`), else a cached
    /// buffer's.
    pub(super) fn read_piece(&self, paged: bool) -> usize {
        if paged {
            self.piece_size()
        } else {
            PIECE
        }
    }

    /// Whether a Call's single Read chunk lands in pages of its own.
    pub(super) fn land_in_pages(&self) -> bool {
        !matches!(self, Self::Cached)
    }

    /// Whether Reads land in a Call's pages with no registration, each
    /// through a completion entry of the Call's read context.
    pub(super) fn direct(&self) -> bool {
        matches!(self, Self::Pages)
    }

    /// Where a Call's Read chunk of layout `layout` lands in `sinks`, its
    /// pages (one per page of the chunk), with this connection's MR pool
    /// when each Read goes through a registration of them. Inlined, as
    /// [`PagedSinks::new`] is: each call of its own cost a 4 KiB WRITE its
    /// call and saved registers (kcount).
    #[inline(always)]
    pub(super) fn paged(&self, layout: PagedCall, sinks: Arc<PageSinks>) -> Result<PagedSinks> {
        let pool = match self {
            Self::RegisteredPages(pool) => Some(pool.clone()),
            _ => None,
        };
        PagedSinks::new(layout, sinks, pool)
    }
}

impl kernel::fmt::Display for ReadSinks {
    fn fmt(&self, f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
        match self {
            Self::Cached => f.write_str("cached buffers"),
            Self::Pages => f.write_str("pages"),
            Self::RegisteredPages(pool) => {
                write!(f, "pages through a pool of {} MRs", pool.idle())
            }
        }
    }
}

/// The pages a Call's single Read chunk is read into (see [`PagedCall`]):
/// taken from the request that posts the Reads, mapped once, and handed
/// to the request that assembles the Call.
pub(super) struct PagedSinks {
    pub(super) layout: PagedCall,
    sinks: Arc<PageSinks>,
    /// The MR pool each Read's pages are registered through (iWARP).
    pool: Option<Arc<SinkMrPool>>,
}

/// What one Read's work request scatters into.
pub(super) enum ReadSink {
    /// A Call's pages, one entry per page.
    Pages(Arc<PageSinks>),
    /// One buffer: a cached sink or a registration of pages.
    Buf(Arc<MappedBuf>),
}

/// Where one Read into a Call's pages lands.
pub(super) enum PagedTarget {
    /// Scattered over the pages, one entry per page.
    Pages(Arc<PageSinks>),
    /// Through a registration of the pages it covers (its one entry).
    Run(Arc<MappedBuf>),
}

impl PagedSinks {
    /// The sinks of `layout`'s chunk: `sinks` has one page per page of
    /// the chunk.
    #[inline(always)]
    fn new(
        layout: PagedCall,
        sinks: Arc<PageSinks>,
        pool: Option<Arc<SinkMrPool>>,
    ) -> Result<Self> {
        if sinks.len() != layout.pages {
            return Err(EINVAL);
        }
        Ok(Self {
            layout,
            sinks,
            pool,
        })
    }

    /// Where the Read of `piece` (bytes of the chunk) lands: scattered
    /// over the pages, or through a registration of them when the
    /// connection registers its sinks.
    pub(super) fn target(&self, ep: &Endpoint, piece: &Piece) -> Result<PagedTarget> {
        Ok(match &self.pool {
            Some(pool) => {
                PagedTarget::Run(ep.register_page_run(pool, &self.sinks, piece.off, piece.len)?)
            }
            None => PagedTarget::Pages(self.sinks.clone()),
        })
    }

    /// Sets `slot`, where a Call's Read chunk lands (a request state's
    /// `paged`), to `paged`: its own pages, or cached sinks (`None`). The
    /// last Call to set it took them (`finish_read`): emptied first, the
    /// assignment drops nothing, and costs no call of the drop's code.
    #[inline(always)]
    pub(super) fn set(slot: &mut Option<Self>, paged: Option<Self>) {
        if let Some(stale) = slot.take() {
            drop(stale);
        }
        *slot = paged;
    }

    /// The pages, when each Read scatters over them with no registration.
    pub(super) fn unregistered(&self) -> Option<&Arc<PageSinks>> {
        match self.pool {
            None => Some(&self.sinks),
            Some(_) => None,
        }
    }

    /// The pages, given up.
    pub(super) fn into_sinks(self) -> Arc<PageSinks> {
        self.sinks
    }

    /// The pages the chunk was read into, every one of them (the chunk
    /// covers all), for the request that assembles the Call to take.
    pub(super) fn sinks(&self) -> &PageSinks {
        &self.sinks
    }
}
