// SPDX-License-Identifier: GPL-2.0

//! The object that owns a ring of work request contexts, found from the
//! ring: a completion reaches the ring from its context, and the ring's
//! owner (the connection) from the ring by the offset of the field that
//! holds it, as a workqueue item finds its container
//! (`kernel::workqueue::HasWork`). No reference is taken per work request.

use crate::rust::kext::percpu::PerCpuCount;
use kernel::alloc::KVec;

/// An object that holds a ring of type `R` as a field. Implemented by
/// [`impl_ring_in!`].
///
/// # Safety
///
/// `RING_OFFSET` is the offset of a field of type `R` in `Self`, and every
/// object of type `Self` lives in an `Arc` (pinned, never moved).
pub unsafe trait RingIn<R>: Sized {
    /// The offset of the ring in `Self`.
    const RING_OFFSET: usize;
}

/// The owner of `ring`.
///
/// # Safety
///
/// `ring` is the `RING_OFFSET` field of an `O`.
pub(in crate::rust) unsafe fn owner_of<O: RingIn<R>, R>(ring: &R) -> *const O {
    // SAFETY: By the caller's requirement the ring lies `RING_OFFSET`
    // bytes into its owner, within the same allocation.
    unsafe {
        core::ptr::from_ref(ring)
            .cast::<u8>()
            .sub(O::RING_OFFSET)
            .cast::<O>()
    }
}

/// What a ring dropped with `posted` contexts still posted does with
/// them (its owner did not drain its endpoint first): the device may still
/// reach them, so they are leaked, never freed, and one line says so.
/// The number of work requests a ring's count says are posted: its sum,
/// exact once no completion runs (after the drain, or in a test that
/// waited for them); a sum below 0 or past `u32::MAX`, which only a
/// miscount makes, reads as `u32::MAX`, so that a dropped ring is leaked
/// rather than freed while the device might reach it.
pub(in crate::rust) fn posted_count(c: &PerCpuCount) -> u32 {
    u32::try_from(c.sum()).unwrap_or(u32::MAX)
}

pub(in crate::rust) fn leak_if_posted<T>(ctxts: &mut KVec<T>, posted: u32, what: &str) {
    if posted == 0 {
        return;
    }
    crate::pr_err_ratelimited!(
        "rpcrdma_rs: a {} ring dropped with {} posted; leaked\n",
        what,
        posted
    );
    core::mem::forget(core::mem::take(ctxts));
}

/// Declares the field `$field` of `$owner`, of type `$ring`, a ring that
/// finds `$owner` ([`RingIn`]). Every `$owner` lives in an `Arc`.
#[macro_export]
macro_rules! impl_ring_in {
    ($owner:ty, $field:ident: $ring:ty) => {
        // SAFETY: The offset is that of the field, which has the ring's
        // type (checked below); the owner lives in an `Arc`, never moved.
        unsafe impl $crate::rust::rdma::ring_owner::RingIn<$ring> for $owner {
            const RING_OFFSET: usize = {
                fn _check(o: &$owner) -> &$ring {
                    &o.$field
                }
                ::core::mem::offset_of!($owner, $field)
            };
        }
    };
}
pub use impl_ring_in;
