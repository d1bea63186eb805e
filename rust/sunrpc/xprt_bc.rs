// SPDX-License-Identifier: GPL-2.0

//! The client's pool of reverse-direction (backchannel) requests, as
//! `net/sunrpc/xprtrdma/backchannel.c` keeps it: a received callback Call
//! is copied into an `rpc_rqst` of our own and queued for the NFS callback
//! service with `xprt_enqueue_bc_request`; its Reply comes back through
//! `send_request` with no `rq_buffer`. Copying keeps the Receive buffer
//! free to be reposted at once.
//!
//! At most the transport's number of callback slots exist (its
//! `XprtOps::BC_SLOTS`, at most [`MAX_BC_SLOTS`]), each with a page for the
//! Call and a page for the Reply; free ones wait in the transport's
//! [`BcPool`] (under `xprt->bc_pa_lock`) between uses.
//!
//! C header: [`include/linux/sunrpc/bc_xprt.h`](srctree/include/linux/sunrpc/bc_xprt.h).

use crate::rust::bindings;
use crate::rust::sunrpc::xprt_locks::bc_pa_lock;
use core::ptr::{addr_of_mut, null_mut};
use kernel::bindings as kb;
use kernel::ffi::{c_uint, c_ulong};
use kernel::page::PAGE_SIZE;
use kernel::prelude::*;

/// The most callback requests a transport may ask for.
pub(in crate::rust) const MAX_BC_SLOTS: usize = 64;

/// `RPC_BC_PA_IN_USE`, used by sunrpc as a bit number of `rq_bc_pa_state`.
const BC_PA_IN_USE: c_ulong = 1;

/// The free callback requests of one transport and how many exist.
///
/// # Invariants
///
/// Guarded by the transport's `bc_pa_lock`. `free[..n]` are requests of
/// this transport allocated by [`alloc_rqst`] and not in use;
/// `allocated` counts every such request, free or in use, and never
/// exceeds `limit` (at most [`MAX_BC_SLOTS`]).
#[repr(C)]
pub(in crate::rust) struct BcPool {
    n: usize,
    allocated: usize,
    limit: usize,
    free: [*mut bindings::rpc_rqst; MAX_BC_SLOTS],
}

/// Sets how many callback requests `xprt` may have (at most
/// [`MAX_BC_SLOTS`]).
///
/// # Safety
///
/// `xprt` is a live transport of this class.
pub(in crate::rust) unsafe fn set_limit(xprt: *mut bindings::rpc_xprt, slots: usize) {
    // SAFETY: By the safety requirement.
    unsafe { with_pool(xprt, |p| p.limit = slots.min(MAX_BC_SLOTS)) };
}

/// Runs `f` on `xprt`'s pool with `bc_pa_lock` held.
///
/// # Safety
///
/// `xprt` is a live transport of this class.
unsafe fn with_pool<R>(xprt: *mut bindings::rpc_xprt, f: impl FnOnce(&mut BcPool) -> R) -> R {
    // SAFETY: By the safety requirement; the pool lives in the transport
    // (zeroed by `xprt_alloc`: empty).
    let pool = unsafe { crate::rust::sunrpc::xprt_class::bc_pool(xprt) };
    // SAFETY: Live transport (safety requirement).
    let _guard = unsafe { bc_pa_lock(xprt) }.lock();
    // SAFETY: The lock guards the pool (type invariant of `BcPool`), and
    // is held: exclusive.
    f(unsafe { &mut *pool })
}

/// Frees a request of [`alloc_rqst`] and its two pages.
///
/// # Safety
///
/// `rqst` came from [`alloc_rqst`] and nothing refers to it any more.
unsafe fn free_rqst_memory(rqst: *mut bindings::rpc_rqst) {
    // SAFETY: By the safety requirement; `kfree` accepts NULL.
    unsafe {
        kb::kfree((*rqst).rq_rcv_buf.head[0].iov_base);
        kb::kfree((*rqst).rq_snd_buf.head[0].iov_base);
        kb::kfree(rqst.cast());
    }
}

/// Allocates a callback request with a page for the Call and one for the
/// Reply. Called from the Receive completion, which the transport's swap
/// support forbids to wait on reclaim: no reclaim at all (as C
/// `XPRTRDMA_GFP_FLAGS`).
///
/// # Safety
///
/// `xprt` is a live transport of this class.
unsafe fn alloc_rqst(xprt: *mut bindings::rpc_xprt) -> *mut bindings::rpc_rqst {
    let gfp = kb::GFP_NOWAIT | kb::__GFP_NOWARN;
    // SAFETY: Plain allocations; a zeroed `rpc_rqst` is a valid one.
    unsafe {
        let rqst = kb::__kmalloc_noprof(
            core::mem::size_of::<bindings::rpc_rqst>(),
            gfp | kb::__GFP_ZERO,
        )
        .cast::<bindings::rpc_rqst>();
        if rqst.is_null() {
            return null_mut();
        }
        (*rqst).rq_rcv_buf.head[0].iov_base = kb::__kmalloc_noprof(PAGE_SIZE, gfp);
        (*rqst).rq_snd_buf.head[0].iov_base = kb::__kmalloc_noprof(PAGE_SIZE, gfp);
        if (*rqst).rq_rcv_buf.head[0].iov_base.is_null()
            || (*rqst).rq_snd_buf.head[0].iov_base.is_null()
        {
            free_rqst_memory(rqst);
            return null_mut();
        }
        (*rqst).rq_xprt = xprt;
        kb::INIT_LIST_HEAD(addr_of_mut!((*rqst).rq_bc_pa_list).cast());
        rqst
    }
}

/// Takes a free callback request, or allocates one while fewer than the
/// transport's limit exist; `None` when every slot is in use (a peer must not
/// make us allocate without bound) or memory is short.
///
/// # Safety
///
/// `xprt` is a live transport of this class.
unsafe fn get_rqst(xprt: *mut bindings::rpc_xprt) -> Option<*mut bindings::rpc_rqst> {
    enum Take {
        Free(*mut bindings::rpc_rqst),
        Allocate,
        Full,
    }
    // SAFETY: By the safety requirement.
    let take = unsafe {
        with_pool(xprt, |p| {
            if p.n > 0 {
                p.n -= 1;
                Take::Free(p.free.get(p.n).copied().unwrap_or(null_mut()))
            } else if p.allocated < p.limit {
                p.allocated += 1;
                Take::Allocate
            } else {
                Take::Full
            }
        })
    };
    match take {
        Take::Free(r) if !r.is_null() => Some(r),
        Take::Free(_) | Take::Full => None,
        Take::Allocate => {
            // SAFETY: By the safety requirement.
            let r = unsafe { alloc_rqst(xprt) };
            if r.is_null() {
                // SAFETY: By the safety requirement.
                unsafe { with_pool(xprt, |p| p.allocated = p.allocated.saturating_sub(1)) };
                return None;
            }
            Some(r)
        }
    }
}

/// Hands a reverse-direction Call (`call`, xid first) to the NFS callback
/// service (C `rpcrdma_bc_receive_call`).
///
/// # Safety
///
/// `xprt` is a live transport of this class.
pub(in crate::rust) unsafe fn receive_call(xprt: *mut bindings::rpc_xprt, call: &[u8]) -> Result {
    if call.len() < 8 || call.len() > PAGE_SIZE {
        return Err(EMSGSIZE);
    }
    // SAFETY: By the safety requirement.
    let rqst = unsafe { get_rqst(xprt) }.ok_or(ENOBUFS)?;
    let xid = u32::from_ne_bytes([call[0], call[1], call[2], call[3]]);
    // SAFETY: `rqst` is ours until queued; its two heads hold a page each
    // and `call` fits one (checked above). svc_process_bc() encodes the
    // Reply into a full page.
    unsafe {
        let r = &mut *rqst;
        xdr_buf_init(&mut r.rq_rcv_buf, PAGE_SIZE);
        xdr_buf_init(&mut r.rq_snd_buf, PAGE_SIZE);
        core::ptr::copy_nonoverlapping(
            call.as_ptr(),
            r.rq_rcv_buf.head[0].iov_base.cast::<u8>(),
            call.len(),
        );
        r.rq_rcv_buf.head[0].iov_len = call.len();
        r.rq_rcv_buf.len = call.len() as c_uint;
        r.rq_private_buf = r.rq_rcv_buf;
        r.rq_xid = xid;
        r.rq_reply_bytes_recvd = 0;
        r.rq_connect_cookie = (*xprt).connect_cookie;
        kb::set_bit(BC_PA_IN_USE, addr_of_mut!(r.rq_bc_pa_state));
        // svc_process_bc() and xprt_enqueue_bc_request() decrement it.
        kb::atomic_inc(addr_of_mut!((*xprt).bc_slot_count).cast());
        bindings::xprt_enqueue_bc_request(rqst);
    }
    Ok(())
}

/// Resets an `xdr_buf` to its head alone, `len` bytes (C `xdr_buf_init`).
fn xdr_buf_init(buf: &mut bindings::xdr_buf, len: usize) {
    buf.head[0].iov_len = len;
    buf.tail[0].iov_len = 0;
    buf.pages = null_mut();
    buf.page_len = 0;
    buf.flags = 0;
    buf.len = 0;
    buf.buflen = len as c_uint;
}

/// `bc_free_rqst`: the callback service is done with `rqst`.
///
/// # Safety
///
/// Called by sunrpc with a callback request of a live transport.
pub(in crate::rust) unsafe extern "C" fn free_rqst(rqst: *mut bindings::rpc_rqst) {
    // SAFETY: By the safety requirement.
    unsafe {
        let xprt = (*rqst).rq_xprt;
        kb::clear_bit(BC_PA_IN_USE, addr_of_mut!((*rqst).rq_bc_pa_state));
        let lost = with_pool(xprt, |p| match p.free.get_mut(p.n) {
            Some(slot) => {
                *slot = rqst;
                p.n += 1;
                false
            }
            // More free requests than ever allocated cannot happen; do not
            // lose track of the memory if it does.
            None => {
                p.allocated = p.allocated.saturating_sub(1);
                true
            }
        });
        if lost {
            free_rqst_memory(rqst);
        }
        // The reference xprt_enqueue_bc_request() took.
        bindings::xprt_put(xprt);
    }
}

/// `bc_destroy`, and `destroy`: frees the free callback requests (each
/// in-flight one holds a transport reference, so at `destroy` none is in
/// use).
///
/// # Safety
///
/// Called by sunrpc, or by `destroy`, with a live transport of this class.
pub(in crate::rust) unsafe extern "C" fn destroy(xprt: *mut bindings::rpc_xprt, _max_reqs: c_uint) {
    let mut free = [null_mut(); MAX_BC_SLOTS];
    // SAFETY: By the safety requirement.
    let n = unsafe {
        with_pool(xprt, |p| {
            let n = p.n;
            free = p.free;
            p.n = 0;
            p.allocated = p.allocated.saturating_sub(n);
            n
        })
    };
    for &rqst in free.iter().take(n) {
        // SAFETY: Free requests of this transport: nothing refers to them.
        unsafe { free_rqst_memory(rqst) };
    }
}
