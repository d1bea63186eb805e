// SPDX-License-Identifier: GPL-2.0

//! A short list kept inline, a longer one in a vector.
//!
//! Chunk lists hold one or two entries almost always (an NFS READ: one
//! Write chunk of one segment). Kept inline in per-request state (the
//! server's parsed chunk lists and result payloads, the client's segment
//! lists while it builds a call) they cost no allocation per request; C
//! keeps them in its preallocated `svc_rdma_recv_ctxt` and `rpcrdma_req`
//! for the same reason.

use kernel::alloc::KVec;
use kernel::prelude::*;

/// Up to `N` items inline, more in a vector.
pub(crate) enum SmallList<T: Copy + Default, const N: usize> {
    /// The first `len` of `items` are the list.
    Inline { items: [T; N], len: usize },
    /// More than `N` items.
    Heap(KVec<T>),
}

impl<T: Copy + Default, const N: usize> SmallList<T, N> {
    /// An empty list.
    pub(crate) fn new() -> Self {
        Self::Inline {
            items: [T::default(); N],
            len: 0,
        }
    }

    /// A list of `len` default items (storage for a parser to fill).
    pub(crate) fn filled(len: usize) -> Result<Self> {
        if len <= N {
            return Ok(Self::Inline {
                items: [T::default(); N],
                len,
            });
        }
        Ok(Self::Heap(KVec::from_elem(T::default(), len, GFP_KERNEL)?))
    }

    /// Makes the list `len` items long in place, as storage for a parser
    /// that writes every item it hands out (`ParsedChunks::build` exposes
    /// only the items it stored). The inline storage is reused when `len`
    /// fits it, its items left as they were (the previous call's, or
    /// defaults) rather than zeroed for the parser to overwrite: no new
    /// list is built and moved, and no `memset` runs per call.
    pub(crate) fn refill(&mut self, len: usize) -> Result {
        match self {
            Self::Inline { len: used, .. } if len <= N => {
                *used = len;
                Ok(())
            }
            _ => {
                *self = Self::filled(len)?;
                Ok(())
            }
        }
    }

    /// Appends `v`; the first push past `N` moves the list to a vector.
    #[inline]
    pub(crate) fn push(&mut self, v: T) -> Result {
        // The usual list (a chunk of one or two segments) has room: one
        // look at the storage, not one to reserve and one to store.
        match self.push_within_capacity(v) {
            Ok(()) => Ok(()),
            Err(v) => self.push_slow(v),
        }
    }

    /// [`Self::push`] with no room left: grows the storage first.
    #[inline(never)]
    fn push_slow(&mut self, v: T) -> Result {
        self.reserve(1)?;
        self.push_within_capacity(v).map_err(|_| ENOMEM)
    }

    /// Makes room for `additional` more items, so that as many
    /// [`Self::push_within_capacity`] calls succeed.
    pub(crate) fn reserve(&mut self, additional: usize) -> Result {
        match self {
            Self::Inline { items, len } => {
                let need = len.checked_add(additional).ok_or(ENOMEM)?;
                if need <= N {
                    return Ok(());
                }
                let mut heap = KVec::with_capacity(need, GFP_KERNEL)?;
                heap.extend_from_slice(items.get(..*len).unwrap_or(&[]), GFP_KERNEL)?;
                *self = Self::Heap(heap);
                Ok(())
            }
            Self::Heap(heap) => Ok(heap.reserve(additional, GFP_KERNEL)?),
        }
    }

    /// Appends `v` if there is room without an allocation; gives it back
    /// otherwise.
    pub(crate) fn push_within_capacity(&mut self, v: T) -> core::result::Result<(), T> {
        match self {
            Self::Inline { items, len } => match items.get_mut(*len) {
                Some(slot) => {
                    *slot = v;
                    *len += 1;
                    Ok(())
                }
                None => Err(v),
            },
            Self::Heap(heap) => heap.push_within_capacity(v).map_err(|e| e.0),
        }
    }

    /// The items.
    pub(crate) fn as_slice(&self) -> &[T] {
        match self {
            Self::Inline { items, len } => items.get(..*len).unwrap_or(&[]),
            Self::Heap(heap) => heap,
        }
    }

    /// The items, to fill in place.
    pub(crate) fn as_mut_slice(&mut self) -> &mut [T] {
        match self {
            Self::Inline { items, len } => items.get_mut(..*len).unwrap_or(&mut []),
            Self::Heap(heap) => heap,
        }
    }

    /// How many items there are.
    pub(crate) fn len(&self) -> usize {
        self.as_slice().len()
    }
}
