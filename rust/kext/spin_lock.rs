// SPDX-License-Identifier: GPL-2.0

//! The kernel crate's spinlock with its guard's lockdep check compiled as
//! C compiles `lockdep_assert_held`: only on a kernel with lockdep.
//!
//! The kernel crate's `Guard::new` calls its backend's `assert_is_held` on
//! every `lock()`, and its [`kernel::sync::lock::spinlock::SpinLockBackend`]
//! makes that an out-of-line call to `rust_helper_spin_assert_is_held`,
//! which does nothing unless `CONFIG_LOCKDEP` is set: a call per lock
//! section that C never makes (kcount: 9 a 4 KiB READ, 11 a WRITE, 52 a
//! 1 MiB write, client and server together). [`SpinLockBackend`] is that
//! backend with the check kept under lockdep alone; the lock, its state
//! and every other operation are the kernel crate's. Use [`SpinLock`] and
//! [`new_spinlock!`] from here, not the kernel crate's
//! (`scripts/layout-check` holds the rest of the tree to it).

use kernel::sync::lock::spinlock::SpinLockBackend as KernelSpinLockBackend;
use kernel::sync::lock::{Backend, Lock};

/// The kernel crate's spinlock backend whose `assert_is_held` runs only
/// with lockdep (`CONFIG_LOCKDEP`), where it checks something.
pub struct SpinLockBackend;

/// A spinlock (`spinlock_t`) protecting a `T`, as `kernel::sync::SpinLock`.
pub type SpinLock<T> = Lock<T, SpinLockBackend>;

// SAFETY: Every operation is the kernel crate's `SpinLockBackend`'s, on the
// same state: the `spinlock_t` ensures mutual exclusion as it does there.
// Only the lockdep check is left out where lockdep is not built (where it
// is an empty function), which no guarantee rests on.
unsafe impl Backend for SpinLockBackend {
    type State = <KernelSpinLockBackend as Backend>::State;
    type GuardState = <KernelSpinLockBackend as Backend>::GuardState;

    #[inline]
    unsafe fn init(
        ptr: *mut Self::State,
        name: *const kernel::ffi::c_char,
        key: *mut kernel::bindings::lock_class_key,
    ) {
        // SAFETY: The caller's requirements, which are the same.
        unsafe { KernelSpinLockBackend::init(ptr, name, key) }
    }

    #[inline]
    unsafe fn lock(ptr: *mut Self::State) -> Self::GuardState {
        // SAFETY: The caller's requirements, which are the same.
        unsafe { KernelSpinLockBackend::lock(ptr) }
    }

    #[inline]
    unsafe fn try_lock(ptr: *mut Self::State) -> Option<Self::GuardState> {
        // SAFETY: The caller's requirements, which are the same.
        unsafe { KernelSpinLockBackend::try_lock(ptr) }
    }

    #[inline]
    unsafe fn unlock(ptr: *mut Self::State, guard_state: &Self::GuardState) {
        // SAFETY: The caller's requirements, which are the same.
        unsafe { KernelSpinLockBackend::unlock(ptr, guard_state) }
    }

    #[inline(always)]
    unsafe fn assert_is_held(ptr: *mut Self::State) {
        #[cfg(CONFIG_LOCKDEP)]
        // SAFETY: The caller's requirements, which are the same.
        unsafe {
            KernelSpinLockBackend::assert_is_held(ptr)
        };
        #[cfg(not(CONFIG_LOCKDEP))]
        let _ = ptr;
    }
}

/// Creates a [`SpinLock`] initialiser with the given name and a new lock
/// class, as `kernel::new_spinlock!` does for the kernel crate's.
macro_rules! new_spinlock {
    ($inner:expr $(, $name:literal)? $(,)?) => {
        $crate::rust::kext::spin_lock::SpinLock::new(
            $inner,
            ::kernel::optional_name!($($name)?),
            ::kernel::static_lock_class!(),
        )
    };
}
pub(crate) use new_spinlock;
