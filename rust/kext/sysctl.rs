// SPDX-License-Identifier: GPL-2.0

//! Tables of files under `/proc/sys` (`register_sysctl_sz`), described with
//! safe [`Entry`] values over `'static` Rust data:
//!
//! - [`Tunable`]: an unsigned integer the sysctl core reads and writes in
//!   place with its own `proc_douintvec_minmax`, so a write outside the
//!   range fails with `EINVAL` exactly as for C's tunables;
//! - [`IntTunable`]: a signed integer without a range (`proc_dointvec`);
//! - a counter (a [`PerCpuCounter`]): reading gives its value, writing
//!   anything resets it (C `svcrdma_counter_handler`).
//!
//! C header: [`include/linux/sysctl.h`](srctree/include/linux/sysctl.h).

use crate::rust::bindings;
use crate::rust::kext::percpu::PerCpuCounter;
use core::ffi::CStr;
use core::fmt::Write;
use core::ptr::{null_mut, NonNull};
use kernel::alloc::KVec;
use kernel::ffi::{c_int, c_void};
use kernel::prelude::*;
use kernel::str::as_char_ptr_in_const_context;
use kernel::str::Formatter;
use kernel::sync::atomic::{Atomic, Relaxed};

/// An unsigned integer tunable with the range a write must respect.
///
/// The sysctl core reads and writes `value` with `READ_ONCE`/`WRITE_ONCE`
/// through the entry's `data` pointer, and reads `min` and `max` through
/// `extra1` and `extra2`; Rust reads `value` atomically too.
#[repr(C)]
pub struct Tunable {
    value: Atomic<u32>,
    min: u32,
    max: u32,
}

impl Tunable {
    /// A tunable holding `initial`, writable within `min..=max`.
    pub const fn new(initial: u32, min: u32, max: u32) -> Self {
        Self {
            value: Atomic::new(initial),
            min,
            max,
        }
    }

    /// The current value.
    pub fn get(&self) -> u32 {
        self.value.load(Relaxed)
    }

    /// Sets the value without a range check: the initial value comes from a
    /// module parameter, whose own range may be wider (C does the same:
    /// only writes through `/proc/sys` are checked).
    pub fn set(&self, value: u32) {
        self.value.store(value, Relaxed);
    }
}

/// A signed integer tunable without a range (C `proc_dointvec`).
#[repr(transparent)]
pub struct IntTunable(Atomic<i32>);

impl IntTunable {
    /// A tunable holding `initial`.
    pub const fn new(initial: i32) -> Self {
        Self(Atomic::new(initial))
    }

    /// The current value.
    pub fn get(&self) -> i32 {
        self.0.load(Relaxed)
    }
}

/// One file of a table: a name, permissions and what it shows.
#[derive(Clone, Copy)]
pub struct Entry(bindings::ctl_table);

const fn ctl_table(
    name: &'static CStr,
    data: *mut c_void,
    maxlen: usize,
    mode: u16,
    handler: bindings::proc_handler,
    extra1: *mut c_void,
    extra2: *mut c_void,
) -> bindings::ctl_table {
    bindings::ctl_table {
        procname: as_char_ptr_in_const_context(name),
        data,
        maxlen: maxlen as c_int,
        mode,
        proc_handler: handler,
        poll: null_mut(),
        extra1,
        extra2,
    }
}

impl Entry {
    /// A file showing `t`, writable (if `mode` allows) within its range.
    pub const fn uint(name: &'static CStr, t: &'static Tunable, mode: u16) -> Self {
        Self(ctl_table(
            name,
            // The sysctl core writes through `data` only: `value` is an
            // atomic, so shared mutation is allowed.
            (&raw const t.value).cast_mut().cast(),
            core::mem::size_of::<u32>(),
            mode,
            Some(bindings::proc_douintvec_minmax),
            // Only read by the sysctl core.
            (&raw const t.min).cast_mut().cast(),
            (&raw const t.max).cast_mut().cast(),
        ))
    }

    /// A file showing `t`, writable (if `mode` allows) with any `int`.
    pub const fn int(name: &'static CStr, t: &'static IntTunable, mode: u16) -> Self {
        Self(ctl_table(
            name,
            (&raw const t.0).cast_mut().cast(),
            core::mem::size_of::<i32>(),
            mode,
            Some(bindings::proc_dointvec),
            null_mut(),
            null_mut(),
        ))
    }

    /// A file showing counter `c`; a write of anything resets it.
    pub const fn counter(name: &'static CStr, c: &'static PerCpuCounter, mode: u16) -> Self {
        Self(ctl_table(
            name,
            (&raw const *c).cast_mut().cast(),
            core::mem::size_of::<PerCpuCounter>(),
            mode,
            Some(counter_handler),
            null_mut(),
            null_mut(),
        ))
    }
}

/// Reads a counter as text; a write resets it.
///
/// # Safety
///
/// Called by the sysctl core with an entry made by [`Entry::counter`], its
/// buffer of `*lenp` bytes and its position.
unsafe extern "C" fn counter_handler(
    ctl: *const bindings::ctl_table,
    write: c_int,
    buffer: *mut c_void,
    lenp: *mut usize,
    ppos: *mut bindings::loff_t,
) -> c_int {
    // SAFETY: `Entry::counter` points `data` at a `'static`
    // `PerCpuCounter`.
    let counter = unsafe { *(*ctl).data.cast::<PerCpuCounter>() };
    if write != 0 {
        counter.reset();
        return 0;
    }
    // A u64 and its newline take at most 21 bytes.
    let mut buf = [0u8; 24];
    let mut out = Formatter::new(&mut buf);
    let _ = writeln!(out, "{}", counter.value());
    let len = out.bytes_written();
    let text = buf.get(..len).unwrap_or(&[]);
    // SAFETY: `ppos` and `lenp` are the caller's; `buffer` holds `*lenp`
    // bytes.
    unsafe {
        let pos = usize::try_from(*ppos).unwrap_or(usize::MAX);
        let Some(rest) = text.get(pos..).filter(|r| !r.is_empty()) else {
            *lenp = 0;
            return 0;
        };
        let n = rest.len().min(*lenp);
        core::ptr::copy_nonoverlapping(rest.as_ptr(), buffer.cast::<u8>(), n);
        *lenp = n;
        *ppos += n as bindings::loff_t;
    }
    0
}

/// A registered table.
///
/// # Invariants
///
/// `header` came from `register_sysctl_sz` for the entries in `table`,
/// whose heap buffer neither moves nor is freed until `drop` has
/// unregistered it.
pub struct Sysctl {
    header: NonNull<bindings::ctl_table_header>,
    table: KVec<bindings::ctl_table>,
}

// SAFETY: The header is only handed back to the sysctl core; the table is
// only read, and what it points to is `'static` and atomic or immutable.
unsafe impl Send for Sysctl {}
// SAFETY: See `Send`; `&Sysctl` gives access to nothing.
unsafe impl Sync for Sysctl {}

impl Sysctl {
    /// Registers `entries` under `/proc/sys/<path>` (a path like
    /// `"sunrpc/svc_rdma"`; missing directories are created). Fails with
    /// `ENOMEM` also when a name is already taken there (the sysctl core
    /// logs which).
    pub fn register(path: &'static CStr, entries: &[Entry]) -> Result<Self> {
        let mut table = KVec::with_capacity(entries.len(), GFP_KERNEL)?;
        for e in entries {
            table.push(e.0, GFP_KERNEL)?;
        }
        // SAFETY: `path` is a `'static` string; `table` holds `len` valid
        // entries whose data is `'static` (`Entry` only takes `'static`
        // references), and it stays in place until `drop` unregisters it.
        let header = unsafe {
            bindings::register_sysctl_sz(path.as_char_ptr().cast(), table.as_ptr(), table.len())
        };
        let header = NonNull::new(header).ok_or(ENOMEM)?;
        // INVARIANT: Registered above with `table`.
        Ok(Self { header, table })
    }
}

impl Drop for Sysctl {
    fn drop(&mut self) {
        // SAFETY: Registered by the type invariant; after this no handler
        // runs (the sysctl core waits for running ones), so `table` may go.
        unsafe { bindings::unregister_sysctl_table(self.header.as_ptr()) };
        self.table.clear();
    }
}
