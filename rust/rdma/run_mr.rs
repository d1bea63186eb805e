// SPDX-License-Identifier: GPL-2.0

//! A registration of whole pages that outlives the RPC that made it: the
//! entries of the client's registration cache (`memreg=cache`,
//! `xprtrdma/regcache.rs`). It holds a reference on every page it maps, so
//! a page stays allocated (never reused for anything else) for as long as
//! a steering tag can name it, whatever becomes of the request, the file
//! or the process it came from.
//!
//! C header: [`include/linux/mm.h`](srctree/include/linux/mm.h) (page
//! references), [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h).

use crate::rust::bindings;
use crate::rust::rdma::mr::{Mr, MrSegment};
use crate::rust::rdma::verbs::{Anchor, Endpoint};
use crate::rust::sunrpc::xprt::RpcRqst;
use core::ptr::NonNull;
use kernel::alloc::KVec;
use kernel::page::{BorrowedPage, Page, PAGE_SIZE};
use kernel::prelude::*;
use kernel::sync::atomic::{Atomic, Relaxed};
use kernel::sync::Arc;

/// Calls of [`RunMr::release`] refused because the run's registration may
/// still be in force: its pages would have been unmapped and put while the
/// peer could still write them.
static REFUSED_RELEASES: Atomic<u64> = Atomic::new(0);

/// How many [`RunMr::release`] calls were refused (a caller's bug).
pub fn refused_releases() -> u64 {
    REFUSED_RELEASES.load(Relaxed)
}

/// References on pages, put on drop.
///
/// # Invariants
///
/// The holder took one reference (`get_page`) on every entry of `pages`.
struct PageRefs {
    pages: KVec<NonNull<bindings::page>>,
}

impl PageRefs {
    fn release(&mut self) {
        for page in self.pages.drain_all() {
            // SAFETY: A reference this holder took (type invariant).
            unsafe { bindings::rpcrdma_rs_page_put(page.as_ptr()) };
        }
    }
}

impl Drop for PageRefs {
    fn drop(&mut self) {
        self.release();
    }
}

// SAFETY: Page references may be put from any thread.
unsafe impl Send for PageRefs {}
// SAFETY: Shared references do not touch the pages.
unsafe impl Sync for PageRefs {}

/// An FRWR MR mapping whole pages it keeps referenced, in the order they
/// were given (not necessarily physically contiguous).
///
/// # Invariants
///
/// While `refs` is not empty, the MR maps exactly its pages, in order.
/// `mr` is declared before `refs`: on drop it is deregistered (its steering
/// tag revoked) and unmapped before the page references go. While
/// `registered` (a REG_MR was posted and no invalidation is known to have
/// completed since) the pages stay mapped and referenced.
pub struct RunMr {
    mr: Mr,
    refs: PageRefs,
    writable: bool,
    registered: bool,
    _anchor: Arc<Anchor>,
}

impl RunMr {
    /// Allocates an MR for runs of up to `max_pages` pages on `ep`'s
    /// device (it may sleep: not from completion or reclaim context).
    pub fn new(ep: &Endpoint, max_pages: u32) -> Result<Self> {
        let anchor = ep.anchor().clone();
        let mut pages = KVec::new();
        pages.reserve(max_pages as usize, GFP_KERNEL)?;
        Ok(Self {
            mr: Mr::new(anchor.pd(), max_pages)?,
            refs: PageRefs { pages },
            writable: false,
            registered: false,
            _anchor: anchor,
        })
    }

    /// Most pages one run may have.
    pub fn max_pages(&self) -> u32 {
        u32::try_from(self.refs.pages.capacity()).unwrap_or(u32::MAX)
    }

    /// Takes a reference on pages `first .. first + count` of the request's
    /// send (`rcv` false) or receive buffer's page array and maps them
    /// whole, for the peer to write (`writable`) or to read. Any earlier
    /// run is released first.
    pub fn map(
        &mut self,
        rqst: &RpcRqst<'_>,
        rcv: bool,
        first: u32,
        count: u32,
        writable: bool,
    ) -> Result {
        self.release();
        if count == 0 || count > self.max_pages() {
            return Err(EINVAL);
        }
        for &page in rqst.page_array(rcv, first, count).ok_or(EINVAL)? {
            // SAFETY: A page of the request: live while it is borrowed.
            unsafe { self.hold(NonNull::new(page).ok_or(EINVAL)?) }?;
        }
        self.map_held(writable)
    }

    /// Takes a reference on every page of `pages` (which the caller owns,
    /// and may free afterwards) and maps them whole, as [`Self::map`].
    pub fn map_owned(&mut self, pages: &[Page], writable: bool) -> Result {
        self.release();
        if pages.is_empty() || pages.len() > self.max_pages() as usize {
            return Err(EINVAL);
        }
        for p in pages {
            let page = NonNull::new(p.as_ptr().cast::<bindings::page>()).ok_or(EINVAL)?;
            // SAFETY: The page is live: `p` owns it.
            unsafe { self.hold(page) }?;
        }
        self.map_held(writable)
    }

    /// Takes a reference on `page` and records it.
    ///
    /// # Safety
    ///
    /// `page` is a live page.
    unsafe fn hold(&mut self, page: NonNull<bindings::page>) -> Result {
        // Capacity for `max_pages` was reserved at allocation.
        self.refs
            .pages
            .push_within_capacity(page)
            .map_err(|_| EINVAL)?;
        // SAFETY: The page is live by the safety requirement.
        // INVARIANT: The reference is recorded in `refs` just above.
        unsafe { bindings::rpcrdma_rs_page_get(page.as_ptr()) };
        Ok(())
    }

    /// Maps the pages `refs` holds.
    fn map_held(&mut self, writable: bool) -> Result {
        // SAFETY: The pages are referenced until `release` or drop, which
        // unmap the MR first.
        let res = unsafe { self.mr.map_pages(&self.refs.pages, writable) };
        if res.is_err() {
            self.refs.release();
        }
        self.writable = writable;
        res
    }

    /// Copies `dst.len()` bytes from `offset` in the mapped pages (call
    /// [`Self::sync_for_cpu`] first after the device wrote them).
    pub fn read(&self, offset: usize, dst: &mut [u8]) -> Result {
        let mut done = 0usize;
        while done < dst.len() {
            let at = offset.checked_add(done).ok_or(EINVAL)?;
            let (index, off) = (at / PAGE_SIZE, at % PAGE_SIZE);
            let len = (PAGE_SIZE - off).min(dst.len() - done);
            let page = *self.refs.pages.get(index).ok_or(EINVAL)?;
            // SAFETY: The page is referenced by `refs` while `self` is
            // borrowed.
            let page = unsafe { BorrowedPage::from_raw(page.cast()) };
            let to = dst.get_mut(done..done + len).ok_or(EINVAL)?;
            // SAFETY: `to` is valid for `len` bytes; the device does not
            // write the page while its owner reads it (after the sync).
            unsafe { page.read_raw(to.as_mut_ptr(), off, len) }?;
            done += len;
        }
        Ok(())
    }

    /// Unmaps the pages and puts their references, if the MR was never
    /// registered since it mapped them. After a registration use
    /// [`Self::retire`]: a call here is refused (and counted,
    /// [`refused_releases`]), the pages then going when the MR drops.
    pub fn release(&mut self) {
        if self.registered {
            REFUSED_RELEASES.fetch_add(1, Relaxed);
            crate::pr_err_ratelimited!(
                "run MR released while its registration may be in force; its pages wait for its deregistration\n"
            );
            return;
        }
        self.mr.unmap();
        self.refs.release();
    }

    /// Retires a registration whose pages leave: `invalidated` (its
    /// LOCAL_INV completed), the pages are unmapped and put and the MR is
    /// returned for reuse; otherwise (the invalidation failed, was flushed
    /// or could not be posted, so the steering tag may still be valid) the
    /// MR is dropped whole, which deregisters it (revoking its tag) before
    /// its pages are unmapped and put.
    pub fn retire(mut self, invalidated: bool) -> Option<Self> {
        if !invalidated {
            drop(self);
            return None;
        }
        // INVARIANT: The caller saw the invalidation complete.
        self.registered = false;
        self.release();
        Some(self)
    }

    /// Whether the mapped pages from the `at`-th on are, in order, pages
    /// `first .. first + count` of the request's send (`rcv` false) or
    /// receive buffer's page array: a registration that serves them.
    pub fn maps_request_pages(
        &self,
        at: u32,
        rqst: &RpcRqst<'_>,
        rcv: bool,
        first: u32,
        count: u32,
    ) -> bool {
        let Some(wanted) = rqst.page_array(rcv, first, count) else {
            return false;
        };
        let at = at as usize;
        let Some(mapped) = self.refs.pages.get(at..at.saturating_add(count as usize)) else {
            return false;
        };
        // Both are `count` long (`get` and `page_array` give all or none).
        // Every page compared, without a branch each: the loop the
        // compiler unrolls costs a 64-page hit about four instructions a
        // page, where stopping at the first difference cost six (and a
        // hit, the usual answer, compares them all anyway).
        let differ = mapped.iter().zip(wanted).fold(0usize, |acc, (m, w)| {
            acc | (m.as_ptr() as usize ^ *w as usize)
        });
        differ == 0
    }

    /// Number of pages mapped now.
    pub fn pages(&self) -> u32 {
        u32::try_from(self.refs.pages.len()).unwrap_or(u32::MAX)
    }

    /// Whether the peer may write the pages.
    pub fn writable(&self) -> bool {
        self.writable
    }

    /// The registered segment (steering tag, length and address of the
    /// first page).
    pub fn segment(&self) -> MrSegment {
        self.mr.segment()
    }

    /// Posts the registration (REG_MR, unsignaled) on `ep`, ahead of the
    /// Send that advertises it.
    pub fn post_reg(&mut self, ep: &Endpoint) -> Result {
        let posting = ep.start_post()?;
        // SAFETY: The QP is live and on the MR's protection domain; the
        // connection drains it before its cache drops any `RunMr`.
        unsafe { self.mr.post_reg(posting.qp(), self.writable) }?;
        // INVARIANT: Posted: the tag may be in force from now on.
        self.registered = true;
        Ok(())
    }

    /// Hands the pages to the device before it reads or writes them again:
    /// the CPU may have written them since they were mapped.
    pub fn sync_for_device(&self) {
        self.mr.sync(true);
    }

    /// Hands the pages back to the CPU after the device wrote them.
    pub fn sync_for_cpu(&self) {
        if self.writable {
            self.mr.sync(false);
        }
    }
}
