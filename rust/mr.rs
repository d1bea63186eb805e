// SPDX-License-Identifier: GPL-2.0

//! The module's one memory region type: a fast-registration MR (`struct
//! ib_mr` of type `IB_MR_TYPE_MEM_REG` with its scatterlist and `REG_MR`
//! work request, C `struct rpcrdma_rs_mr`). The client maps request
//! buffers into it ([`super::xprt`]: FRWR segments and the write pad); the
//! server registers RDMA Read sinks with it ([`super::verbs::DmaBuf`]).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h).

use super::bindings;
use super::live;
use super::verbs::Pd;
use super::xprt::{walk_xdr_buf, Piece};
use core::ptr::{addr_of, NonNull};
use kernel::error::{from_err_ptr, to_result};
use kernel::prelude::*;
use kernel::sync::Arc;

/// A registered segment: what goes on the wire.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MrSegment {
    /// The steering tag (rkey).
    pub handle: u32,
    /// Registered length.
    pub length: u32,
    /// Registered address (iova).
    pub offset: u64,
}

/// A fast-registration memory region.
///
/// # Invariants
///
/// `ptr` was allocated on `pd` and is freed in `drop`. While `mapped`, its
/// scatterlist holds a DMA mapping of the last `map_rqst` on `pd`'s device.
pub struct Mr {
    ptr: NonNull<bindings::rpcrdma_rs_mr>,
    pd: Arc<Pd>,
    mapped: bool,
}

// SAFETY: An MR is used by one owner at a time (a pool or a buffer hands it
// out); the C object has no thread affinity.
unsafe impl Send for Mr {}
// SAFETY: Shared references only read the registration's keys.
unsafe impl Sync for Mr {}

impl Mr {
    /// Allocates an MR for up to `max_pages` pages on `pd`.
    pub(in crate::rust) fn new(pd: &Arc<Pd>, max_pages: u32) -> Result<Self> {
        // SAFETY: The PD is live while `pd` is held.
        let ptr = from_err_ptr(unsafe { bindings::rpcrdma_rs_mr_alloc(pd.pd_ptr(), max_pages) })?;
        let ptr = NonNull::new(ptr).ok_or(ENOMEM)?;
        live::inc(live::Kind::Mr);
        // INVARIANT: Allocated on `pd`, not mapped.
        Ok(Self {
            ptr,
            pd: pd.clone(),
            mapped: false,
        })
    }

    /// Maps `len` bytes from `offset` of a request's send (`rcv` false) or
    /// receive buffer; returns how many bytes it covered (it stops at its
    /// depth or at a gap FRWR cannot map).
    ///
    /// # Safety
    ///
    /// `rqst` is a live request whose buffers stay valid until this MR is
    /// unmapped (`unmap` or drop).
    pub(in crate::rust) unsafe fn map_rqst(
        &mut self,
        rqst: *mut bindings::rpc_rqst,
        rcv: bool,
        offset: u32,
        len: u32,
        writable: bool,
    ) -> Result<u32> {
        self.unmap();
        let mr = self.ptr.as_ptr();
        // SAFETY: The MR is live (type invariant).
        let max = unsafe { bindings::rpcrdma_rs_mr_max_pages(mr) };
        let page_size = kernel::page::PAGE_SIZE as u32;
        let (mut n, mut pages, mut prev_end) = (0u32, 0u32, 0u32);
        // SAFETY: `rqst` by the safety requirement.
        let buf = unsafe {
            if rcv {
                addr_of!((*rqst).rq_rcv_buf)
            } else {
                addr_of!((*rqst).rq_snd_buf)
            }
        };
        // FRWR maps page lists: only the first entry may start inside a
        // page and only the last may end inside one. The walk stops at the
        // MR's depth or at a gap it cannot map (C `frwr_map`).
        // SAFETY: As above; the MR is live.
        let done = unsafe {
            walk_xdr_buf(buf, offset, len, |piece| {
                let (page, off, l) = match piece {
                    Piece::Page(p, off, l) => (p, off, l),
                    Piece::Virt(v, l) => (
                        bindings::rpcrdma_rs_virt_to_page(v),
                        (v as usize % kernel::page::PAGE_SIZE) as u32,
                        l,
                    ),
                };
                if n > 0 && (off != 0 || prev_end % page_size != 0) {
                    return Ok(false);
                }
                let npages = (off + l).div_ceil(page_size);
                if n >= max || pages.saturating_add(npages) > max {
                    return Ok(false);
                }
                to_result(bindings::rpcrdma_rs_mr_sg_set(mr, n, page, off, l))?;
                n += 1;
                pages += npages;
                prev_end = off + l;
                Ok(true)
            })
        }?;
        if n == 0 {
            return Err(EINVAL);
        }
        // SAFETY: The MR and the device are live; its first `n` entries
        // name the request's memory, valid until unmapped.
        to_result(unsafe {
            bindings::rpcrdma_rs_mr_map_sg(self.pd.device_ptr(), mr, n, writable)
        })?;
        // INVARIANT: Mapped above, until `unmap` or drop.
        self.mapped = true;
        Ok(done)
    }

    /// Maps `[dma, dma + len)`, already DMA-mapped on the MR's device by its
    /// owner (the client's write pad, a server Read sink).
    pub(in crate::rust) fn map_dma(&mut self, dma: u64, len: u32) -> Result {
        self.unmap();
        // SAFETY: The MR and device are live; the MR only records the
        // address, whose mapping its owner keeps while the MR names it.
        to_result(unsafe {
            bindings::rpcrdma_rs_mr_map_buf(self.pd.device_ptr(), self.ptr.as_ptr(), dma, len)
        })
    }

    /// The registered segment.
    pub fn segment(&self) -> MrSegment {
        let mut s = MrSegment::default();
        // SAFETY: The MR is live.
        unsafe {
            bindings::rpcrdma_rs_mr_segment(
                self.ptr.as_ptr(),
                &mut s.handle,
                &mut s.length,
                &mut s.offset,
            )
        };
        s
    }

    /// The current lkey (every registration re-makes the key).
    pub fn lkey(&self) -> u32 {
        // SAFETY: The MR is live.
        unsafe { bindings::rpcrdma_rs_mr_lkey(self.ptr.as_ptr()) }
    }

    /// Releases the DMA mapping of the last `map_rqst`.
    pub fn unmap(&mut self) {
        if self.mapped {
            // SAFETY: The MR is live and mapped.
            unsafe { bindings::rpcrdma_rs_mr_unmap(self.pd.device_ptr(), self.ptr.as_ptr()) };
            self.mapped = false;
        }
    }

    /// Posts the registration (REG_MR, unsignaled) on `qp`, for remote
    /// write (`writable`) or remote read.
    ///
    /// # Safety
    ///
    /// `qp` is a live queue pair on the MR's protection domain, drained
    /// before the MR is dropped (its REG_MR lives in the MR).
    pub(in crate::rust) unsafe fn post_reg(
        &self,
        qp: *mut bindings::ib_qp,
        writable: bool,
    ) -> Result {
        // SAFETY: By the safety requirement; the MR is live.
        to_result(unsafe { bindings::rpcrdma_rs_post_reg_mr(qp, self.ptr.as_ptr(), writable) })
    }

    /// Posts the registration of a server RDMA Read sink for one use (a
    /// new key; remote write only with `remote_write`, iWARP).
    ///
    /// # Safety
    ///
    /// As [`Self::post_reg`]; the previous registration of the MR has
    /// completed.
    pub(in crate::rust) unsafe fn post_sink_reg(
        &self,
        qp: *mut bindings::ib_qp,
        remote_write: bool,
    ) -> Result {
        // SAFETY: By the safety requirement; the MR is live.
        to_result(unsafe {
            bindings::rpcrdma_rs_post_sink_reg(qp, self.ptr.as_ptr(), remote_write)
        })
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        // Deregistration comes before the DMA unmapping: an MR dropped
        // while still valid (its invalidation could not be posted) must not
        // leave a steering tag naming unmapped addresses, even briefly.
        // SAFETY: The MR and the device are live (type invariant); no work
        // request refers to it (owners drain their queue pairs before they
        // drop MRs). The C side unmaps only what `map_rqst` mapped, and
        // frees the MR: it is not used again.
        unsafe { bindings::rpcrdma_rs_mr_destroy(self.pd.device_ptr(), self.ptr.as_ptr()) };
        self.mapped = false;
        live::dec(live::Kind::Mr);
    }
}
