// SPDX-License-Identifier: GPL-2.0

//! The spinlocks of an `rpc_xprt` (`include/linux/sunrpc/xprt.h`) as the
//! kernel crate's [`Lock`]s: sunrpc initialises them in `xprt_alloc`, and
//! a guard releases them on every path out of the section it covers.
//!
//! - `transport_lock`: the congestion window and the connect timeouts;
//! - `queue_lock`: the requests waiting for replies (`xprt_lookup_rqst`,
//!   `xprt_pin_rqst`, `xprt_complete_rqst`);
//! - `reserve_lock`: the slot table (`xprt_slots.rs`);
//! - `bc_pa_lock`: the backchannel's preallocated requests (`xprt_bc.rs`).

use crate::rust::bindings;
use crate::rust::kext::spin_lock::SpinLockBackend;
use core::ptr::addr_of_mut;
use kernel::bindings as kb;
use kernel::sync::lock::Lock;

/// One of a transport's spinlocks.
pub(in crate::rust) type XprtLock = Lock<(), SpinLockBackend>;

/// The transport's `transport_lock`.
///
/// # Safety
///
/// `xprt` is a live transport, and the reference is not used past its life.
pub(in crate::rust) unsafe fn transport_lock<'a>(xprt: *mut bindings::rpc_xprt) -> &'a XprtLock {
    // SAFETY: `xprt_alloc` initialised the lock; it lives with the
    // transport (safety requirement).
    unsafe { Lock::from_raw(addr_of_mut!((*xprt).transport_lock).cast::<kb::spinlock_t>()) }
}

/// The transport's `queue_lock`.
///
/// # Safety
///
/// As [`transport_lock`].
pub(in crate::rust) unsafe fn queue_lock<'a>(xprt: *mut bindings::rpc_xprt) -> &'a XprtLock {
    // SAFETY: As in `transport_lock`.
    unsafe { Lock::from_raw(addr_of_mut!((*xprt).queue_lock).cast::<kb::spinlock_t>()) }
}

/// The transport's `reserve_lock`.
///
/// # Safety
///
/// As [`transport_lock`].
pub(in crate::rust) unsafe fn reserve_lock<'a>(xprt: *mut bindings::rpc_xprt) -> &'a XprtLock {
    // SAFETY: As in `transport_lock`.
    unsafe { Lock::from_raw(addr_of_mut!((*xprt).reserve_lock).cast::<kb::spinlock_t>()) }
}

/// The transport's `bc_pa_lock`.
///
/// # Safety
///
/// As [`transport_lock`].
pub(in crate::rust) unsafe fn bc_pa_lock<'a>(xprt: *mut bindings::rpc_xprt) -> &'a XprtLock {
    // SAFETY: As in `transport_lock`.
    unsafe { Lock::from_raw(addr_of_mut!((*xprt).bc_pa_lock).cast::<kb::spinlock_t>()) }
}
