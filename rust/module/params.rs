// SPDX-License-Identifier: GPL-2.0

//! The module parameters, all eleven, each read-only in
//! `/sys/module/<module>/parameters/` (C `module_param_named` and
//! `module_param_string` with permissions 0444, built here as those macros
//! build them: a `struct kernel_param` in section `__param` and its
//! `parm`/`parmtype` strings in `.modinfo`). The kernel's `module!` macro
//! gives the parameters it declares permissions 0, which hides them from
//! sysfs, and has no string parameters.
//!
//! Rust reads them once at load ([`get`]), `src/config.rs` checks them and
//! refuses the load on a bad value; 0444 keeps them fixed afterwards. The
//! runtime tunables are sysctls, seeded from these.
//!
//! C header: [`include/linux/moduleparam.h`](srctree/include/linux/moduleparam.h).

use core::cell::UnsafeCell;
use kernel::ffi::{c_char, c_void};

/// A parameter's storage, which the module loader writes while it parses
/// the load's arguments.
///
/// # Invariants
///
/// Written only by the module loader, before the module's `init` runs:
/// the parameter's permissions (0444) let nothing write it later.
#[repr(transparent)]
pub struct Param<T>(UnsafeCell<T>);

// SAFETY: After `init` starts the value is only read (type invariant).
unsafe impl<T: Sync> Sync for Param<T> {}

impl<T: Copy> Param<T> {
    const fn new(value: T) -> Self {
        Self(UnsafeCell::new(value))
    }

    /// The value the module was loaded with.
    pub fn get(&self) -> T {
        // SAFETY: No one writes it any more (type invariant).
        unsafe { *self.0.get() }
    }

    /// Where the loader writes it (`kernel_param.arg`, `kparam_string.string`).
    const fn as_ptr(&self) -> *mut c_void {
        self.0.get().cast()
    }
}

impl<const N: usize> Param<[u8; N]> {
    /// A string parameter's value, up to its NUL (empty if not UTF-8).
    pub fn as_str(&'static self) -> &'static str {
        // SAFETY: No one writes it any more (type invariant).
        let bytes: &'static [u8; N] = unsafe { &*self.0.get() };
        let len = bytes.iter().position(|&b| b == 0).unwrap_or(N);
        core::str::from_utf8(bytes.get(..len).unwrap_or(&[])).unwrap_or("")
    }
}

/// A string parameter's default: `s` in `N` bytes, NUL-padded.
const fn string_default<const N: usize>(s: &str) -> [u8; N] {
    let b = s.as_bytes();
    let mut out = [0u8; N];
    let mut i = 0;
    // Keeps the last byte for the NUL.
    while i < b.len() && i + 1 < N {
        out[i] = b[i];
        i += 1;
    }
    out
}

/// `text` with its NUL, as the bytes of a `.modinfo` entry.
#[doc(hidden)]
pub const fn modinfo_bytes<const N: usize>(text: &str) -> [u8; N] {
    string_default::<N>(text)
}

/// The `struct kparam_string` of a string parameter, which the loader
/// reads.
#[repr(transparent)]
#[doc(hidden)]
pub struct StringParam(kernel::bindings::kparam_string);

// SAFETY: Only the module loader and sysfs read it; nothing writes it.
unsafe impl Sync for StringParam {}

/// Bytes of a string parameter, its NUL included.
const STRING_MAX: usize = 16;

/// One `.modinfo` entry, `key=value`.
macro_rules! modinfo {
    ($text:expr) => {
        const _: () = {
            const TEXT: &str = concat!($text, "\0");
            #[link_section = ".modinfo"]
            #[used]
            static INFO: [u8; TEXT.len()] = modinfo_bytes(TEXT);
        };
    };
}

/// The `struct kernel_param` of parameter `$name` and its `.modinfo`
/// entries (C `module_param_cb` and `MODULE_PARM_DESC`).
macro_rules! kernel_param {
    ($name:ident, $type:literal, $ops:ident, $arg:ident : $value:expr, $desc:expr) => {
        const _: () = {
            #[link_section = "__param"]
            #[used]
            static KERNEL_PARAM: kernel::module_param::KernelParam =
                kernel::module_param::KernelParam::new(kernel::bindings::kernel_param {
                    name: concat!(stringify!($name), "\0").as_ptr().cast::<c_char>(),
                    // The module's own `struct module`, which the loader
                    // builds before it parses parameters: only its address
                    // is taken.
                    mod_: (&raw const kernel::bindings::__this_module).cast_mut(),
                    // SAFETY: The kernel's own operations for this type, a
                    // static; only its address is taken.
                    ops: unsafe { core::ptr::from_ref(&kernel::bindings::$ops) },
                    perm: 0o444,
                    level: -1,
                    flags: 0,
                    __bindgen_anon_1: kernel::bindings::kernel_param__bindgen_ty_1 { $arg: $value },
                });
            modinfo!(concat!("parmtype=", stringify!($name), ":", $type));
            modinfo!(concat!("parm=", stringify!($name), ":", $desc));
        };
    };
}

/// Declares the parameters: `uint`, `bool` or `string` (of
/// [`STRING_MAX`] bytes), each with its default and description.
macro_rules! params {
    ($($kind:ident $name:ident: $default:expr, $desc:expr;)*) => {
        $(params!(@one $kind $name $default, $desc);)*
    };
    (@one uint $name:ident $default:expr, $desc:expr) => {
        #[doc = $desc]
        pub(super) static $name: Param<u32> = Param::new($default);
        kernel_param!($name, "uint", param_ops_uint, arg: $name.as_ptr(), $desc);
    };
    (@one bool $name:ident $default:expr, $desc:expr) => {
        #[doc = $desc]
        pub(super) static $name: Param<bool> = Param::new($default);
        kernel_param!($name, "bool", param_ops_bool, arg: $name.as_ptr(), $desc);
    };
    (@one string $name:ident $default:expr, $desc:expr) => {
        #[doc = $desc]
        pub(super) static $name: Param<[u8; STRING_MAX]> = Param::new(string_default($default));
        const _: () = {
            static STRING: StringParam = StringParam(kernel::bindings::kparam_string {
                maxlen: STRING_MAX as u32,
                string: $name.as_ptr().cast::<c_char>(),
            });
            kernel_param!(
                $name,
                "string",
                param_ops_string,
                str_: core::ptr::from_ref(&STRING.0),
                $desc
            );
        };
    };
}

#[allow(non_upper_case_globals)]
mod declared {
    use super::*;

    params! {
    uint max_requests: 128,
        "Credits (concurrent RPC requests) per connection, 4..16384 (default 128)";
    uint max_inline_read: 4096,
        "Largest inline reply in bytes, 1024..65536 (default 4096)";
    uint max_inline_write: 4096,
        "Largest inline call in bytes, 1024..65536 (default 4096)";
    string memreg: "fmr",
        concat!(
            "Client memory registration: fmr (default; FMR-style pool semantics built on ",
            "FRWR work requests, since the kernel removed the FMR verbs in 5.8: MRs ",
            "allocated per connection at connect time, mapped per I/O with REG_MR, ",
            "invalidated with LOCAL_INV, optionally in batches) physical (global steering ",
            "tag: the server can read and write ALL client memory; trusted servers only) or ",
            "cache (registrations of whole I/O pages kept across RPCs, up to cache_max_mb ",
            "per connection: the server can read or write those pages until they are ",
            "evicted; trusted servers only)",
        );
    uint fmr_pool_size: 0,
        concat!(
            "Client memreg=fmr (FMR-style pool on FRWR work requests): MRs allocated per ",
            "connection at connect time (0: 4 per credit)",
        );
    uint fmr_pages_per_mr: 0,
        "Client memreg=fmr: pages per MR, 1..257 (0: the device's limit, at most 257)";
    uint fmr_dirty_watermark: 0,
        concat!(
            "Client memreg=fmr: MRs left registered after their RPC before a batched ",
            "invalidation (0: invalidate before every RPC completes; >0 lets the server ",
            "read and write the pages and the kmalloc'd reply buffer of completed RPCs, ",
            "i.e. memory reused by others, until the batch runs, at most 1 s later)",
        );
    uint cache_max_mb: 64,
        concat!(
            "Client memreg=cache: MiB of pages each connection keeps registered (and ",
            "referenced) across RPCs, 1..65536 (default 64); the server can read or write ",
            "them while they stay cached",
        );
    string svc_memreg: "direct",
        concat!(
            "Server: how Write chunks leave and Read chunks arrive: direct (default; RDMA ",
            "Writes straight from the Reply's pages, and on devices whose Read sinks need ",
            "no registration a Call's single Read chunk RDMA-Read into pages handed to the ",
            "request; no copy) or cache (both copied through buffers of the slab-backed ",
            "registration cache, see svc_buf_cache)",
        );
    bool svc_buf_cache: true,
        concat!(
            "Server: keep RDMA bounce and Send buffers mapped, and RDMA Read sinks ",
            "registered where the device needs it, for reuse (default Y)",
        );
    bool force_mr: false,
        concat!(
            "Server: register RDMA Read sinks with a fast-registration MR even where the ",
            "device does not need it (RoCE/IB; iWARP always does) (default N)",
        );
    }
}

use declared::*;

/// The numeric and boolean parameters as loaded, before any check
/// (`src/config.rs` checks them).
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
    Params {
        max_requests: max_requests.get(),
        max_inline_read: max_inline_read.get(),
        max_inline_write: max_inline_write.get(),
        fmr_pool_size: fmr_pool_size.get(),
        fmr_pages_per_mr: fmr_pages_per_mr.get(),
        fmr_dirty_watermark: fmr_dirty_watermark.get(),
        cache_max_mb: cache_max_mb.get(),
        svc_buf_cache: svc_buf_cache.get(),
        force_mr: force_mr.get(),
    }
}

/// The `memreg` parameter (a string).
pub fn memreg() -> &'static str {
    declared::memreg.as_str()
}

/// The `svc_memreg` parameter (a string).
pub fn svc_memreg() -> &'static str {
    declared::svc_memreg.as_str()
}
