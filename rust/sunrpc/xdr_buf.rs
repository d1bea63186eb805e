// SPDX-License-Identifier: GPL-2.0

//! Copies out of and into a `struct xdr_buf` (sunrpc's
//! `read_bytes_from_xdr_buf` and `write_bytes_to_xdr_buf`), the head
//! straight: a small Call or Reply (a 4 KiB READ's) lies in its head, which
//! one `memcpy` copies, without building the sub-buffer those functions
//! walk (C's transport copies a head so too, `rpcrdma_prepare_noch_pullup`,
//! `svc_rdma_xb_linearize`).

use kernel::error::to_result;
use kernel::prelude::*;

use crate::rust::bindings;

/// Where the bytes `[offset, offset + len)` of `buf` start when they all
/// lie in its head (and `len > 0`): the one `memcpy` both directions take.
///
/// # Safety
///
/// `buf` is a live `xdr_buf` whose head's `iov_base` spans its `iov_len`
/// bytes.
unsafe fn in_head(buf: *const bindings::xdr_buf, offset: u32, len: u32) -> Option<*mut u8> {
    // SAFETY: `buf` is live (the safety requirement).
    let head = unsafe { &(*buf).head[0] };
    let end = u64::from(offset) + u64::from(len);
    if len == 0 || end > head.iov_len as u64 {
        return None;
    }
    // SAFETY: `offset < end <= iov_len`: within the head (not null: it
    // holds at least `len > 0` bytes).
    Some(unsafe { head.iov_base.cast::<u8>().add(offset as usize) })
}

/// Copies `len` bytes at `offset` of `buf`, whose content is `total` bytes
/// long, to `dst`; `EMSGSIZE` for a range beyond `total`.
///
/// # Safety
///
/// `buf` is a live `xdr_buf` not written meanwhile, whose head is readable
/// for its `iov_len` bytes; `dst` is writable for `len` bytes and does not
/// overlap it.
pub(in crate::rust) unsafe fn read_xdr(
    buf: *const bindings::xdr_buf,
    total: u32,
    offset: u32,
    dst: *mut u8,
    len: u32,
) -> Result {
    if offset > total || len > total - offset {
        return Err(EMSGSIZE);
    }
    // SAFETY: `buf` is live and its head spans `iov_len` bytes (the
    // safety requirement).
    if let Some(at) = unsafe { in_head(buf, offset, len) } {
        // SAFETY: `at` starts `len` bytes within the head, readable (the
        // safety requirement); `dst` is writable for `len` bytes and apart
        // from it.
        unsafe { core::ptr::copy_nonoverlapping(at, dst, len as usize) };
        return Ok(());
    }
    // SAFETY: By the safety requirement; the range is within the content.
    to_result(unsafe { bindings::read_bytes_from_xdr_buf(buf, offset, dst.cast(), len) })
}

/// Copies `len` bytes from `src` into `buf` at `offset`, within its
/// `buflen` (sunrpc's check); `EMSGSIZE` beyond.
///
/// # Safety
///
/// `buf` is a live `xdr_buf` that only the caller writes meanwhile, whose
/// head is writable for its `iov_len` bytes; `src` is readable for `len`
/// bytes and does not overlap it.
pub(in crate::rust) unsafe fn write_xdr(
    buf: *const bindings::xdr_buf,
    offset: u32,
    src: *const u8,
    len: u32,
) -> Result {
    // SAFETY: `buf` is live and its head spans `iov_len` bytes (the
    // safety requirement).
    if let Some(at) = unsafe { in_head(buf, offset, len) } {
        // SAFETY: `at` starts `len` bytes within the head, writable (the
        // safety requirement); `src` is readable for `len` bytes and apart
        // from it.
        unsafe { core::ptr::copy_nonoverlapping(src, at, len as usize) };
        return Ok(());
    }
    // SAFETY: By the safety requirement; sunrpc bounds the copy by the
    // buffer's length and fails beyond it.
    to_result(unsafe { bindings::write_bytes_to_xdr_buf(buf, offset, src.cast_mut().cast(), len) })
        .map_err(|_| EMSGSIZE)
}
