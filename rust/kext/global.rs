// SPDX-License-Identifier: GPL-2.0

//! Module-wide locks that safe code declares and sets up: the kernel
//! crate's [`GlobalLock`] (`kernel::sync::global_lock!`,
//! `rust/kernel/sync/lock/global.rs`) needs an `unsafe` promise that
//! `init` runs once before the first lock. [`module_lock!`] declares such a
//! lock behind a [`ModuleLock`], which keeps that promise itself:
//! [`ModuleLock::init`] initialises it once (a second call fails), and
//! [`ModuleLock::lock`] hands out no guard before that.

use kernel::prelude::*;
use kernel::sync::atomic::{Acquire, Atomic, Relaxed, Release};
use kernel::sync::lock::{GlobalGuard, GlobalLock, GlobalLockBackend};

/// Not initialised.
const UNINIT: i32 = 0;
/// [`ModuleLock::init`] is running.
const INITIALISING: i32 = 1;
/// Initialised: it may be locked.
const READY: i32 = 2;

/// A [`GlobalLock`] that is locked only after its one initialisation.
///
/// # Invariants
///
/// `lock` is used with no other `ModuleLock`; `GlobalLock::init` has been
/// called on it exactly once if and only if `state` is [`READY`] or was
/// [`INITIALISING`] for the call that made it so.
pub struct ModuleLock<B: GlobalLockBackend + 'static> {
    lock: &'static GlobalLock<B>,
    state: Atomic<i32>,
}

impl<B: GlobalLockBackend + 'static> ModuleLock<B> {
    /// Wraps `lock`. Only for [`module_lock!`], which declares `lock` for
    /// this `ModuleLock` alone and initialises it nowhere else.
    #[doc(hidden)]
    pub const fn new(lock: &'static GlobalLock<B>) -> Self {
        // INVARIANT: not initialised; `module_lock!` gives `lock` to this
        // wrapper only.
        Self {
            lock,
            state: Atomic::new(UNINIT),
        }
    }

    /// Initialises the lock (at module load); `EBUSY` if it was already.
    pub fn init(&'static self) -> Result {
        if self.state.cmpxchg(UNINIT, INITIALISING, Relaxed).is_err() {
            return Err(EBUSY);
        }
        // SAFETY: The compare-exchange above succeeds once in the life of
        // the static, so this is the lock's only `init`, and no guard was
        // handed out before it (`lock` waits for `READY`).
        unsafe { self.lock.init() };
        // INVARIANT: initialised just above.
        self.state.store(READY, Release);
        Ok(())
    }

    /// Locks it; `None` before [`Self::init`].
    pub fn lock(&'static self) -> Option<GlobalGuard<B>> {
        if self.state.load(Acquire) != READY {
            return None;
        }
        Some(self.lock.lock())
    }
}

/// Declares a module-wide lock, `static NAME: Kind<T> = value;` with Kind
/// `Mutex` or `SpinLock`, as a [`ModuleLock`]: `NAME.init()` once at module
/// load, then `NAME.lock()`.
macro_rules! module_lock {
    ($(#[$meta:meta])* $vis:vis static $name:ident: $kind:ident<$ty:ty> = $value:expr;) => {
        ::kernel::macros::paste! {
            ::kernel::sync::global_lock! {
                // SAFETY: Initialised only by the `ModuleLock` below, which
                // calls `init` once and hands out no guard before it.
                #[allow(non_upper_case_globals)]
                unsafe(uninit) static [<__ $name _raw>]: $kind<$ty> = $value;
            }
            $(#[$meta])*
            $vis static $name: $crate::rust::kext::global::ModuleLock<[<__ $name _raw>]> =
                $crate::rust::kext::global::ModuleLock::new(&[<__ $name _raw>]);
        }
    };
}
pub(crate) use module_lock;
