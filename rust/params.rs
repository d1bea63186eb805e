// SPDX-License-Identifier: GPL-2.0

//! The module parameters, declared in `rust/params.c` so that sysfs shows
//! them (`/sys/module/rpcrdma_rs/parameters/`, read-only): the kernel's
//! `module!` macro gives the parameters it declares permissions 0.
//!
//! C header: [`include/linux/moduleparam.h`](srctree/include/linux/moduleparam.h).

use super::bindings;
use kernel::str::CStrExt;

/// The parameters as loaded, before any check (`src/config.rs` checks
/// them).
#[derive(Clone, Copy, Debug)]
pub struct Params {
    /// `max_requests`.
    pub max_requests: u32,
    /// `max_inline_read`.
    pub max_inline_read: u32,
    /// `max_inline_write`.
    pub max_inline_write: u32,
    /// `fmr_pool_size`.
    pub fmr_pool_size: u32,
    /// `fmr_pages_per_mr`.
    pub fmr_pages_per_mr: u32,
    /// `fmr_dirty_watermark`.
    pub fmr_dirty_watermark: u32,
    /// `cache_max_mb`.
    pub cache_max_mb: u32,
    /// `svc_buf_cache`.
    pub svc_buf_cache: bool,
    /// `force_mr`.
    pub force_mr: bool,
}

/// Reads the numeric and boolean parameters.
pub fn get() -> Params {
    let mut p = bindings::rpcrdma_rs_params::default();
    // SAFETY: `p` is a valid, writable `struct rpcrdma_rs_params`; the
    // parameters it is filled from are written only while the module loads
    // (permissions 0444), before any Rust code runs.
    unsafe { bindings::rpcrdma_rs_params_get(&mut p) };
    Params {
        max_requests: p.max_requests,
        max_inline_read: p.max_inline_read,
        max_inline_write: p.max_inline_write,
        fmr_pool_size: p.fmr_pool_size,
        fmr_pages_per_mr: p.fmr_pages_per_mr,
        fmr_dirty_watermark: p.fmr_dirty_watermark,
        cache_max_mb: p.cache_max_mb,
        svc_buf_cache: p.svc_buf_cache,
        force_mr: p.force_mr,
    }
}

/// A string parameter's value (empty if it is not UTF-8).
///
/// # Safety
///
/// `p` is a string parameter's NUL-terminated static buffer, written only
/// at module load (permissions 0444).
unsafe fn string_param(p: *const kernel::ffi::c_char) -> &'static str {
    // SAFETY: By the safety requirement.
    let s = unsafe { kernel::str::CStr::from_char_ptr(p) };
    s.to_str().unwrap_or("")
}

/// The `memreg` parameter (a string).
pub fn memreg() -> &'static str {
    // SAFETY: The helper returns the parameter's buffer.
    unsafe { string_param(bindings::rpcrdma_rs_param_memreg()) }
}

/// The `svc_memreg` parameter (a string).
pub fn svc_memreg() -> &'static str {
    // SAFETY: The helper returns the parameter's buffer.
    unsafe { string_param(bindings::rpcrdma_rs_param_svc_memreg()) }
}
