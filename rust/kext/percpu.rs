// SPDX-License-Identifier: GPL-2.0

//! Module-wide counters kept per CPU, as C keeps its server counters in
//! `percpu_counter`s. Several are updated for every RPC or work request
//! from whichever CPU runs it; one shared atomic would make each update a
//! locked instruction on a cache line that moves between CPUs. An update
//! here adds to this CPU's copy; a read sums the copies.
//!
//! The copies are one per-CPU array defined in C (`DEFINE_PER_CPU`),
//! [`SLOTS`] counters wide; each module (the KUnit module links its own
//! shims) has its own. On x86_64 an add is inline, the one `%gs`-relative
//! instruction `this_cpu_add` compiles to, since every RPC counts several
//! events; elsewhere, and for sums and resets (`per_cpu` is a macro), it
//! calls a C shim. Users take fixed ranges of slots, below.

use crate::rust::bindings;

/// Slots of the per-CPU array.
pub const SLOTS: u32 = bindings::RPCRDMA_RS_PCPU_SLOTS;

/// First slot of the live-object counts (`live.rs`).
pub(crate) const LIVE_FIRST: u32 = 0;
/// First slot of the counters of `/proc/sys/sunrpc/svc_rdma` (`svcrdma/stats.rs`).
pub(crate) const SVC_SYSCTL_FIRST: u32 = 12;
/// First slot of the server's data-path counters (`svcrdma/rw.rs`).
pub const SVC_PATH_FIRST: u32 = 32;
/// First slot of the client's per-strategy counters (`xprtrdma/reg.rs`).
pub const CLIENT_FIRST: u32 = 48;
/// The last slot, left to the KUnit test of this type.
pub const TEST_SLOT: u32 = SLOTS - 1;

/// One counter of the module's per-CPU array.
///
/// # Invariants
///
/// `slot` is below [`SLOTS`].
#[derive(Clone, Copy, Debug)]
pub struct PerCpuCounter {
    slot: u32,
}

impl PerCpuCounter {
    /// The counter in `slot`; a slot at or past [`SLOTS`] fails the build
    /// where it is used in a constant.
    pub const fn new(slot: u32) -> Self {
        assert!(slot < SLOTS, "per-CPU counter slot out of range");
        // INVARIANT: Checked above.
        Self { slot }
    }

    /// Adds `n` (which may be negative) to this CPU's copy.
    #[inline]
    pub fn add(self, n: i64) {
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: Only the address is taken; the per-CPU copies are
            // read and written only through `%gs` (here) and the shims.
            let copy = unsafe { &raw const bindings::rpcrdma_rs_pcpu.v }.cast::<i64>();
            // `slot` is below `SLOTS` (type invariant): within the array.
            let at = copy.wrapping_add(self.slot as usize);
            // SAFETY: `at` is the per-CPU address of a slot of the module's
            // per-CPU array.
            unsafe { this_cpu_add(at, n) };
        }
        #[cfg(not(target_arch = "x86_64"))]
        // SAFETY: The shim takes any slot; by the type invariant it is in
        // range, and `this_cpu_add` is safe in any context.
        unsafe {
            bindings::rpcrdma_rs_pcpu_add(self.slot, n)
        }
    }

    /// Counts `n` more events (saturating at `i64::MAX` for one call).
    #[inline]
    pub fn count(self, n: u64) {
        self.add(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// The value of an event counter, which only [`Self::count`] and
    /// [`Self::reset`] change: [`Self::sum`], shown as 0 while a reset
    /// racing with counts leaves it below 0.
    pub fn value(self) -> u64 {
        u64::try_from(self.sum()).unwrap_or(0)
    }

    /// The sum of every CPU's copy. Adds running on other CPUs meanwhile
    /// may or may not be counted (as `percpu_counter_sum`).
    pub fn sum(self) -> i64 {
        // SAFETY: The shim takes any slot and only reads per-CPU data.
        unsafe { bindings::rpcrdma_rs_pcpu_sum(self.slot) }
    }

    /// Sets every CPU's copy to 0 (as `percpu_counter_set(c, 0)`: an add
    /// racing with it may survive).
    pub fn reset(self) {
        // SAFETY: The shim takes any slot and only writes per-CPU data.
        unsafe { bindings::rpcrdma_rs_pcpu_reset(self.slot) }
    }
}

/// Adds `n` to this CPU's copy of the `i64` at per-CPU address `at`, as
/// `this_cpu_add` does: `%gs` bases the address on this CPU's copy, in one
/// instruction that preemption or an interrupt cannot split (safe in any
/// context).
///
/// # Safety
///
/// `at` is the per-CPU address of an `i64` (of a `DEFINE_PER_CPU` array or
/// an `alloc_percpu` allocation) that stays allocated for the call.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn this_cpu_add(at: *const i64, n: i64) {
    // SAFETY: By the function's requirement; the add writes the flags: no
    // `preserves_flags`.
    unsafe {
        core::arch::asm!(
            "add qword ptr gs:[{at}], {n}",
            at = in(reg) at,
            n = in(reg) n,
            options(nostack)
        )
    };
}

/// `N` consecutive counters from slot `FIRST`.
pub const fn counters<const FIRST: u32, const N: usize>() -> [PerCpuCounter; N] {
    let mut out = [PerCpuCounter { slot: 0 }; N];
    let mut i = 0;
    while i < N {
        out[i] = PerCpuCounter::new(FIRST + i as u32);
        i += 1;
    }
    out
}

/// A count of one object's, kept per CPU in an allocation of its own
/// (`alloc_percpu`): for counts every completion changes and only the
/// object's teardown (or a test) reads, such as a ring's posted work
/// requests, which one atomic would make a locked instruction, and a
/// helper call, on a cache line every CPU writes. An add is the one
/// `%gs`-relative instruction `this_cpu_add` compiles to on x86_64; a
/// read sums the copies (`percpu_counter_sum`), exact once no CPU adds.
/// Elsewhere it is one atomic.
///
/// # Invariants
///
/// On x86_64 `ptr` is a per-CPU allocation of one `i64` per CPU, owned
/// (freed on drop).
pub struct PerCpuCount {
    #[cfg(target_arch = "x86_64")]
    ptr: core::ptr::NonNull<i64>,
    #[cfg(not(target_arch = "x86_64"))]
    count: kernel::sync::atomic::Atomic<i64>,
}

// SAFETY: The allocation is shared by design: each CPU adds to its own
// copy, and sums read every copy with `READ_ONCE`.
unsafe impl Send for PerCpuCount {}
// SAFETY: As above.
unsafe impl Sync for PerCpuCount {}

impl PerCpuCount {
    /// A count of 0.
    pub fn new() -> kernel::error::Result<Self> {
        #[cfg(target_arch = "x86_64")]
        {
            let size = core::mem::size_of::<i64>();
            // SAFETY: A plain per-CPU allocation, zeroed by the allocator
            // and freed by `drop`.
            let p = unsafe {
                kernel::bindings::pcpu_alloc_noprof(size, size, false, kernel::bindings::GFP_KERNEL)
            };
            // INVARIANT: a per-CPU allocation of one `i64`, owned.
            core::ptr::NonNull::new(p.cast::<i64>())
                .map(|ptr| Self { ptr })
                .ok_or(kernel::error::code::ENOMEM)
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            Ok(Self {
                count: kernel::sync::atomic::Atomic::new(0),
            })
        }
    }

    /// Adds `n` (which may be negative) to this CPU's copy.
    #[inline]
    pub fn add(&self, n: i64) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `ptr` is a per-CPU address of an `i64` (type invariant).
        unsafe {
            this_cpu_add(self.ptr.as_ptr(), n)
        };
        #[cfg(not(target_arch = "x86_64"))]
        self.count.fetch_add(n, kernel::sync::atomic::Relaxed);
    }

    /// The sum of every CPU's copy: adds running on other CPUs meanwhile
    /// may or may not be counted (as `percpu_counter_sum`).
    pub fn sum(&self) -> i64 {
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: `__cpu_possible_mask` is the kernel's, set up at boot
            // and valid for its life.
            let possible = unsafe {
                kernel::cpumask::Cpumask::from_raw(&raw const kernel::bindings::__cpu_possible_mask)
            };
            // The CPUs' offsets (`__per_cpu_offset`, `NR_CPUS` of them: 8192
            // in distribution kernels, so never copied), read in place.
            let offsets = &raw const kernel::bindings::__per_cpu_offset;
            let slots = array_len(offsets);
            let mut sum = 0i64;
            for cpu in 0..kernel::cpu::nr_cpu_ids() {
                // SAFETY: Below `nr_cpu_ids`.
                let id = unsafe { kernel::cpu::CpuId::from_u32_unchecked(cpu) };
                if !possible.test(id) {
                    continue;
                }
                let at = cpu as usize;
                if at >= slots {
                    break;
                }
                // SAFETY: Element `at` of the array (checked above), set up
                // at boot for a possible CPU and not changed since.
                let off = unsafe { offsets.cast::<kernel::ffi::c_ulong>().add(at).read() };
                // `per_cpu_ptr`: the copy of a possible CPU is the per-CPU
                // address plus its offset.
                let copy = self.ptr.as_ptr().wrapping_byte_add(off);
                // SAFETY: `copy` is that CPU's `i64` of the allocation (type
                // invariant), aligned and live while `self` is; other CPUs
                // only add to their own copies, so the load is `READ_ONCE`
                // of a value another CPU may be changing, as
                // `percpu_counter_sum` reads them.
                sum = sum.wrapping_add(unsafe {
                    kernel::sync::atomic::Atomic::<i64>::from_ptr(copy)
                        .load(kernel::sync::atomic::Relaxed)
                });
            }
            sum
        }
        #[cfg(not(target_arch = "x86_64"))]
        self.count.load(kernel::sync::atomic::Relaxed)
    }
}

/// The length of the array `_a` points to, without a reference to it.
#[cfg(target_arch = "x86_64")]
fn array_len<T, const N: usize>(_a: *const [T; N]) -> usize {
    N
}

impl Drop for PerCpuCount {
    fn drop(&mut self) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: Owned (type invariant); no one adds any more.
        unsafe {
            kernel::bindings::free_percpu(self.ptr.as_ptr().cast())
        };
    }
}
