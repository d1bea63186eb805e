// SPDX-License-Identifier: GPL-2.0

//! The module's one memory region type: a fast-registration MR (`struct
//! ib_mr` of type `IB_MR_TYPE_MEM_REG` with its scatterlist and `REG_MR`
//! work request, C `struct rpcrdma_rs_mr`). The client maps request
//! buffers into it ([`crate::rust::sunrpc::xprt`]: FRWR segments and the write pad); the
//! server registers RDMA Read sinks with it ([`crate::rust::rdma::verbs::MappedBuf`]).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h).

use crate::rust::bindings;
use crate::rust::module::live;
use crate::rust::rdma::verbs::Pd;
use crate::rust::sunrpc::xprt::{page_span_of, walk_xdr_spans, Span};
use core::ptr::{addr_of, addr_of_mut, NonNull};
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
    #[inline(always)]
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
        let max = unsafe { (*mr).max_pages };
        // SAFETY: `rqst` by the safety requirement.
        let buf = unsafe {
            if rcv {
                addr_of!((*rqst).rq_rcv_buf)
            } else {
                addr_of!((*rqst).rq_snd_buf)
            }
        };
        // SAFETY: `buf` by the safety requirement.
        let run = unsafe { page_span_of(buf, offset, len) };
        let (n, done) = match run {
            // A range within the page list (a READ's Write chunk, a
            // WRITE's Read chunk): one run, set without the walk.
            // SAFETY: The MR is live; `run` heads pages covering `off + l`
            // bytes (`Span::Pages`), valid until unmapped (the safety
            // requirement).
            Some(Span::Pages(run, off, l)) => unsafe { set_page_run(mr, 0, 0, max, run, off, l) }?,
            // SAFETY: As above.
            _ => unsafe { set_xdr_range(mr, max, buf, offset, len) }?,
        };
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

    /// Maps whole pages, in order, into the MR (one page per entry).
    ///
    /// # Safety
    ///
    /// Every page in `pages` stays allocated until this MR is unmapped or
    /// dropped (its owner holds a reference).
    pub(in crate::rust) unsafe fn map_pages(
        &mut self,
        pages: &[NonNull<bindings::page>],
        writable: bool,
    ) -> Result {
        self.unmap();
        let mr = self.ptr.as_ptr();
        let n = u32::try_from(pages.len()).map_err(|_| EINVAL)?;
        let len = n
            .checked_mul(kernel::page::PAGE_SIZE as u32)
            .ok_or(EINVAL)?;
        // SAFETY: The MR is live; `pages` holds `n` pages (`NonNull` has the
        // layout of a pointer), each valid by the safety requirement
        // (`sg_set_page` records it); the helper bounds the entries by the
        // MR's and fails for none.
        to_result(unsafe {
            bindings::rpcrdma_rs_mr_sg_set_pages(mr, 0, pages.as_ptr().cast(), 0, len)
        })?;
        // SAFETY: The MR and the device are live; its first `n` entries name
        // the pages, valid until unmapped.
        to_result(unsafe {
            bindings::rpcrdma_rs_mr_map_sg(self.pd.device_ptr(), mr, n, writable)
        })?;
        // INVARIANT: Mapped above, until `unmap` or drop.
        self.mapped = true;
        Ok(())
    }

    /// Hands the mapped pages to the device (`for_device`, before it reads
    /// or writes them again) or back to the CPU (after it wrote them).
    pub(in crate::rust) fn sync(&self, for_device: bool) {
        if self.mapped {
            // SAFETY: The MR and the device are live; the helper syncs only
            // the entries `map_pages` or `map_rqst` mapped.
            unsafe {
                bindings::rpcrdma_rs_mr_sync(self.pd.device_ptr(), self.ptr.as_ptr(), for_device)
            };
        }
    }

    /// Maps `[dma, dma + len)`, already DMA-mapped on the MR's device by its
    /// owner (the client's write pad, a server Read sink).
    pub(in crate::rust) fn map_dma(&mut self, dma: u64, len: u32) -> Result {
        self.map_dma_runs([(dma, len)])
    }

    /// Maps the ranges `(dma, len)`, in order, already DMA-mapped on the
    /// MR's device by their owner (the pages of a server Read sink): only
    /// the first may start inside a page and only the last may end inside
    /// one. Fails with `EINVAL` for more ranges than the MR has entries.
    pub(in crate::rust) fn map_dma_runs(
        &mut self,
        runs: impl IntoIterator<Item = (u64, u32)>,
    ) -> Result {
        self.unmap();
        let mr = self.ptr.as_ptr();
        let mut n = 0u32;
        for (dma, len) in runs {
            // SAFETY: The MR is live; the helper bounds `n` by its entries
            // and only records the address, whose mapping the owner keeps
            // while the MR names it.
            to_result(unsafe { bindings::rpcrdma_rs_mr_set_dma(mr, n, dma, len) })?;
            n = n.checked_add(1).ok_or(EINVAL)?;
        }
        // SAFETY: The MR and device are live; its first `n` entries were
        // set above.
        to_result(unsafe { bindings::rpcrdma_rs_mr_map_dma(self.pd.device_ptr(), mr, n) })
    }

    /// The `struct ib_mr`.
    fn ib_mr(&self) -> *mut bindings::ib_mr {
        // SAFETY: The MR is live (type invariant) and holds its `ib_mr`.
        unsafe { (*self.ptr.as_ptr()).mr }
    }

    /// The C MR, for trace events (`crate::rust::module::trace`).
    pub(in crate::rust) fn as_ptr(&self) -> *const bindings::rpcrdma_rs_mr {
        self.ptr.as_ptr()
    }

    /// The registered segment.
    pub fn segment(&self) -> MrSegment {
        // SAFETY: The `ib_mr` is live; its keys and mapping change only
        // through this object's methods, used by one owner at a time.
        let m = unsafe { &*self.ib_mr() };
        MrSegment {
            handle: m.rkey,
            length: m.length as u32,
            offset: m.iova,
        }
    }

    /// The current lkey (every registration re-makes the key).
    pub fn lkey(&self) -> u32 {
        // SAFETY: As in `segment`.
        unsafe { (*self.ib_mr()).lkey }
    }

    /// Replaces the key byte of both keys (C `ib_update_fast_reg_key`).
    fn set_key_byte(&self, key: u8) {
        let m = self.ib_mr();
        // SAFETY: The `ib_mr` is live; no registration of it is in flight
        // (callers post one at a time and the previous one completed).
        unsafe {
            (*m).lkey = ((*m).lkey & 0xffff_ff00) | u32::from(key);
            (*m).rkey = ((*m).rkey & 0xffff_ff00) | u32::from(key);
        }
    }

    /// Posts the MR's REG_MR (unsignaled) with `access`.
    ///
    /// # Safety
    ///
    /// As [`Self::post_reg`].
    unsafe fn post_reg_access(&self, qp: *mut bindings::ib_qp, access: u32) -> Result {
        let reg = self.prepare_reg_access(access);
        // SAFETY: `reg` is the MR's own work request, just filled; the
        // queue pair is live (the caller's requirement).
        to_result(unsafe { bindings::rpcrdma_rs_ib_post_send(qp, reg, core::ptr::null_mut()) })
    }

    /// Fills the MR's REG_MR (unsignaled, nothing chained behind it) for
    /// `access` and returns it, to be posted.
    fn prepare_reg_access(&self, access: u32) -> *mut bindings::ib_send_wr {
        let m = self.ptr.as_ptr();
        // SAFETY: The MR is live; its work request is only written here,
        // by the single owner, before it is posted (providers copy it, so
        // an earlier post of it does not read it any more).
        unsafe {
            let reg = addr_of_mut!((*m).reg_wr);
            reg.write_bytes(0, 1);
            (*reg).wr.opcode = bindings::ib_wr_opcode_IB_WR_REG_MR;
            (*reg).wr.__bindgen_anon_1.wr_cqe = unsignaled_cqe();
            (*reg).mr = (*m).mr;
            (*reg).key = (*(*m).mr).rkey;
            (*reg).access = access as i32;
            addr_of_mut!((*reg).wr)
        }
    }

    /// Fills the registration (REG_MR, unsignaled) for remote write
    /// (`writable`) or remote read without posting it. The work request
    /// lives in the MR ([`Self::reg_wr`]), to be chained ahead of a Send.
    pub(in crate::rust) fn prepare_reg(&self, writable: bool) {
        self.prepare_reg_access(reg_access(writable));
    }

    /// The registration work request [`Self::prepare_reg`] filled.
    pub(in crate::rust) fn reg_wr(&self) -> *mut bindings::ib_send_wr {
        let m = self.ptr.as_ptr();
        // SAFETY: The MR is live; only the field's address is taken.
        unsafe { addr_of_mut!((*m).reg_wr.wr) }
    }

    /// Whether the MR holds a DMA mapping (`map_rqst` or `map_pages`
    /// since the last `unmap`).
    pub fn is_mapped(&self) -> bool {
        self.mapped
    }

    /// Releases the DMA mapping of the last `map_rqst`.
    pub fn unmap(&mut self) {
        if !self.mapped {
            return;
        }
        if self.pd.virt_dma() {
            // SAFETY: The MR is live and owned by `self`. On a device whose
            // DMA addresses are kernel addresses (rxe, siw) the mapping left
            // nothing to undo: only its count of mapped entries is cleared,
            // as the helper would (a call less on every reply).
            unsafe { (*self.ptr.as_ptr()).nents = 0 };
        } else {
            // SAFETY: The MR is live and mapped.
            unsafe { bindings::rpcrdma_rs_mr_unmap(self.pd.device_ptr(), self.ptr.as_ptr()) };
        }
        self.mapped = false;
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
        // SAFETY: By the safety requirement.
        unsafe { self.post_reg_access(qp, reg_access(writable)) }
    }

    /// Posts the registration of a server RDMA Read sink for one use
    /// (audit finding 2). With `remote_write` (iWARP, where a Read sink
    /// needs it) the key byte is re-made at random and never equal to the
    /// previous one, so a key a client saw in an earlier Read Request (the
    /// Data Sink STag) does not name the MR again; such an MR is then
    /// invalidated by the RDMA_READ_WITH_INV that uses it. Local-only sinks
    /// (IB/RoCE, `force_mr`) keep their key: it is never sent, and the
    /// Read's SGE may already name it.
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
        let mut access = bindings::ib_access_flags_IB_ACCESS_LOCAL_WRITE;
        if remote_write {
            // SAFETY: No preconditions.
            let step = unsafe { kernel::bindings::__get_random_u32_below(255) } as u8;
            let old = self.lkey() as u8;
            self.set_key_byte(old.wrapping_add(1).wrapping_add(step));
            access |= bindings::ib_access_flags_IB_ACCESS_REMOTE_WRITE;
        }
        // SAFETY: By the safety requirement.
        unsafe { self.post_reg_access(qp, access) }
    }
}

/// Posts LOCAL_INV of `rkey` on `qp`: unsignaled (`cqe` null) or signaled
/// to `cqe`. Returns 0 or a negative errno.
///
/// # Safety
///
/// `qp` is live; a non-null `cqe` stays valid until its completion runs.
pub(in crate::rust) unsafe fn post_local_inv(
    qp: *mut bindings::ib_qp,
    rkey: u32,
    cqe: *mut bindings::ib_cqe,
) -> kernel::ffi::c_int {
    // SAFETY: A zeroed `ib_send_wr` is an empty one; providers copy it.
    unsafe {
        let mut wr: bindings::ib_send_wr = core::mem::zeroed();
        wr.opcode = bindings::ib_wr_opcode_IB_WR_LOCAL_INV;
        wr.ex.invalidate_rkey = rkey;
        if cqe.is_null() {
            wr.__bindgen_anon_1.wr_cqe = unsignaled_cqe();
        } else {
            wr.__bindgen_anon_1.wr_cqe = cqe;
            wr.send_flags = bindings::ib_send_flags_IB_SEND_SIGNALED;
        }
        bindings::rpcrdma_rs_ib_post_send(qp, &wr, core::ptr::null_mut())
    }
}

/// Completion of the unsignaled work requests (REG_MR, LOCAL_INV, Sends
/// of a `SendBatch`): only failures reach it.
///
/// # Safety
///
/// Called by the RDMA core with a live work completion.
unsafe extern "C" fn unsignaled_done(_cq: *mut bindings::ib_cq, wc: *mut bindings::ib_wc) {
    // SAFETY: By the safety requirement.
    let status = unsafe { (*wc).status };
    if status != bindings::ib_wc_status_IB_WC_SUCCESS
        && status != bindings::ib_wc_status_IB_WC_WR_FLUSH_ERR
    {
        crate::pr_warn_ratelimited!(
            "rpcrdma_rs: unsignaled work request failed: status {}\n",
            status
        );
    }
}

/// The completion entry of every unsignaled work request.
struct Cqe(bindings::ib_cqe);

// SAFETY: Never written after initialisation; the RDMA core only reads it.
unsafe impl Sync for Cqe {}

static UNSIGNALED_CQE: Cqe = Cqe(bindings::ib_cqe {
    done: Some(unsignaled_done),
});

/// The access a client registration grants the server: remote write
/// (with the local write it needs) for a chunk it writes, remote read for
/// one it reads.
fn reg_access(writable: bool) -> u32 {
    if writable {
        bindings::ib_access_flags_IB_ACCESS_REMOTE_WRITE
            | bindings::ib_access_flags_IB_ACCESS_LOCAL_WRITE
    } else {
        bindings::ib_access_flags_IB_ACCESS_REMOTE_READ
    }
}

/// The completion entry of unsignaled work requests (registrations,
/// LOCAL_INVs, batched Sends): only their failures reach it.
pub(in crate::rust) fn unsignaled_cqe() -> *mut bindings::ib_cqe {
    // The RDMA core takes a mutable pointer but only reads the entry.
    (&raw const UNSIGNALED_CQE.0).cast_mut()
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

/// The bytes of a page, as a constant: the divisions below then have no
/// division-by-zero panic path (objtool took that path's call for a
/// fall-through into the next function).
const PAGE: u32 = kernel::page::PAGE_SIZE as u32;

/// Sets entries from `n` of `mr` (of `max` pages) for the page run `run`,
/// `l` bytes from `off` in its first page, cut at the MR's depth: one
/// entry per page. `used` is how many of the MR's pages the `n` entries
/// set already take. Returns the entries set and the bytes they cover.
///
/// # Safety
///
/// `mr` is a live MR; `run` heads pages covering `off + l` bytes, valid
/// until the MR is unmapped.
#[inline(always)]
unsafe fn set_page_run(
    mr: *mut bindings::rpcrdma_rs_mr,
    n: u32,
    used: u32,
    max: u32,
    run: *const *mut bindings::page,
    off: u32,
    l: u32,
) -> Result<(u32, u32)> {
    let room = max.saturating_sub(used);
    if room == 0 {
        return Ok((0, 0));
    }
    let fits = u64::from(room) * u64::from(PAGE);
    let take = if u64::from(off) + u64::from(l) <= fits {
        l
    } else {
        // `room` whole entries, the first from `off`: fewer bytes than
        // `l`.
        (fits - u64::from(off)) as u32
    };
    // SAFETY: By the safety requirement; the run's first entry is a page
    // when `take` is not 0; the helpers bound the entries by the MR's.
    let k = unsafe {
        if take > 0 && take <= PAGE.saturating_sub(off) {
            // One page (a 4 KiB I/O's): one entry, without the run's setup.
            match bindings::rpcrdma_rs_mr_sg_set(mr, n, *run, off, take) {
                0 => 1,
                e => e,
            }
        } else {
            bindings::rpcrdma_rs_mr_sg_set_pages(mr, n, run, off, take)
        }
    };
    to_result(k)?;
    Ok((k as u32, take))
}

/// Sets the entries of `mr` (of `max` entries) for `[offset, offset +
/// len)` of `buf`, head, pages and tail as they come. FRWR maps page lists:
/// only the first entry may start inside a page and only the last may end
/// inside one. The walk stops at the MR's depth or at a gap it cannot map
/// (C `frwr_map`). The page part of the buffer comes as one run of whole
/// pages that is set in one call: inside it only its first page may start
/// inside the page and only its last end inside one, so the rule is
/// checked at its ends, and it is cut at the MR's depth. Returns the
/// entries set and the bytes they cover.
///
/// # Safety
///
/// `mr` is a live MR; `buf` a live `xdr_buf` whose memory stays valid
/// until the MR is unmapped.
unsafe fn set_xdr_range(
    mr: *mut bindings::rpcrdma_rs_mr,
    max: u32,
    buf: *const bindings::xdr_buf,
    offset: u32,
    len: u32,
) -> Result<(u32, u32)> {
    // Entries set, pages they cover, and where the last one ends inside
    // its page (0 at a page boundary).
    let (mut n, mut pages, mut end) = (0u32, 0u32, 0u32);
    let add = |span| match span {
        Span::Virt(v, l) => {
            let off = (v as usize % kernel::page::PAGE_SIZE) as u32;
            if n > 0 && (off != 0 || end != 0) {
                return Ok(0);
            }
            let npages = off.saturating_add(l).div_ceil(PAGE);
            if n >= max || pages.saturating_add(npages) > max {
                return Ok(0);
            }
            // SAFETY: The MR is live; `v` is memory of the buffer, valid
            // until unmapped (the safety requirement).
            let rc = unsafe {
                let page = bindings::rpcrdma_rs_virt_to_page(v);
                bindings::rpcrdma_rs_mr_sg_set(mr, n, page, off, l)
            };
            to_result(rc)?;
            n += 1;
            pages += npages;
            // `PAGE` divides 2^32: the wrapped sum has the same offset.
            end = off.wrapping_add(l) % PAGE;
            Ok(l)
        }
        Span::Pages(run, off, l) => {
            if n > 0 && (off != 0 || end != 0) {
                return Ok(0);
            }
            // One entry per page, as many as the MR has left.
            // SAFETY: `run` heads pages covering `off + l` bytes
            // (`Span::Pages`), valid until unmapped; the `n` entries set
            // take `pages.max(n)` of the MR's pages.
            let (k, take) = unsafe { set_page_run(mr, n, pages.max(n), max, run, off, l) }?;
            n += k;
            pages += k;
            end = off.wrapping_add(take) % PAGE;
            Ok(take)
        }
    };
    // SAFETY: `buf` by the safety requirement.
    let done = unsafe { walk_xdr_spans(buf, offset, len, add) }?;
    Ok((n, done))
}
