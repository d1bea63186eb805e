// SPDX-License-Identifier: GPL-2.0

//! A short list kept inline, a longer one in a vector.
//!
//! A Call's chunk lists and its result payloads hold one or two entries
//! almost always (an NFS READ: one Write chunk of one segment). Kept inline
//! in the per-request state they cost no allocation per request; C keeps
//! them in its preallocated `svc_rdma_recv_ctxt` for the same reason.

use kernel::alloc::KVec;
use kernel::prelude::*;

/// Up to `N` items inline, more in a vector.
pub(super) enum SmallList<T: Copy + Default, const N: usize> {
    /// The first `len` of `items` are the list.
    Inline { items: [T; N], len: usize },
    /// More than `N` items.
    Heap(KVec<T>),
}

impl<T: Copy + Default, const N: usize> SmallList<T, N> {
    /// An empty list.
    pub(super) fn new() -> Self {
        Self::Inline {
            items: [T::default(); N],
            len: 0,
        }
    }

    /// A list of `len` default items (storage for a parser to fill).
    pub(super) fn filled(len: usize) -> Result<Self> {
        if len <= N {
            return Ok(Self::Inline {
                items: [T::default(); N],
                len,
            });
        }
        Ok(Self::Heap(KVec::from_elem(T::default(), len, GFP_KERNEL)?))
    }

    /// Appends `v`; the first push past `N` moves the list to a vector.
    pub(super) fn push(&mut self, v: T) -> Result {
        match self {
            Self::Inline { items, len } => {
                if let Some(slot) = items.get_mut(*len) {
                    *slot = v;
                    *len += 1;
                    return Ok(());
                }
                let mut heap = KVec::with_capacity(N.saturating_mul(2).max(1), GFP_KERNEL)?;
                heap.extend_from_slice(items, GFP_KERNEL)?;
                heap.push(v, GFP_KERNEL)?;
                *self = Self::Heap(heap);
                Ok(())
            }
            Self::Heap(heap) => Ok(heap.push(v, GFP_KERNEL)?),
        }
    }

    /// The items.
    pub(super) fn as_slice(&self) -> &[T] {
        match self {
            Self::Inline { items, len } => items.get(..*len).unwrap_or(&[]),
            Self::Heap(heap) => heap,
        }
    }

    /// The items, to fill in place.
    pub(super) fn as_mut_slice(&mut self) -> &mut [T] {
        match self {
            Self::Inline { items, len } => items.get_mut(..*len).unwrap_or(&mut []),
            Self::Heap(heap) => heap,
        }
    }

    /// How many items there are.
    pub(super) fn len(&self) -> usize {
        self.as_slice().len()
    }
}
