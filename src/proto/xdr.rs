// SPDX-License-Identifier: GPL-2.0

//! A small, zero-copy XDR (RFC 4506) codec.
//!
//! [`XdrReader`] decodes from a borrowed byte slice and hands out sub-slices
//! of it, so decoded opaque data always points into the caller's buffer.
//! [`XdrWriter`] encodes into a caller-provided `&mut [u8]`.
//!
//! Every read is bounds-checked and every length computation is done with
//! checked arithmetic: malformed or hostile input produces an [`XdrError`],
//! never a panic and never an arithmetic overflow (the kernel builds with
//! `CONFIG_RUST_OVERFLOW_CHECKS`, where an overflow would be a panic).

/// Size in bytes of one XDR unit (`u32`).
pub const XDR_UNIT: usize = 4;

/// Errors produced by the XDR codec.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XdrError {
    /// The input ended before the item being decoded was complete.
    Truncated,
    /// A length or count computation overflowed.
    Overflow,
    /// The output buffer is too small for the item being encoded.
    NoSpace,
    /// An XDR `bool` had a value other than 0 or 1.
    BadBool(u32),
    /// A counted item exceeded the caller's maximum.
    TooLong,
}

/// Number of zero bytes that follow `len` bytes of opaque data so that the
/// next item starts on a 4-byte boundary.
#[inline]
pub const fn pad_len(len: usize) -> usize {
    // (4 - len % 4) % 4, written without a subtraction that could wrap.
    len.wrapping_neg() & (XDR_UNIT - 1)
}

/// `len` rounded up to a multiple of 4, or `None` on overflow.
#[inline]
pub const fn align_up(len: usize) -> Option<usize> {
    len.checked_add(pad_len(len))
}

/// `len` rounded up to a multiple of 4 as a `u32`, or `None` on overflow.
#[inline]
pub const fn align_up_u32(len: u32) -> Option<u32> {
    len.checked_add(len.wrapping_neg() & 3)
}

/// Zero-copy XDR decoder over a borrowed byte slice.
///
/// It keeps the bytes not yet consumed as a slice of their own, so that a
/// read is one length comparison: no position to add to (and to check
/// for overflow) and no second bound to check.
#[derive(Clone, Debug)]
pub struct XdrReader<'a> {
    buf: &'a [u8],
    /// The bytes not yet consumed: always a suffix of `buf`.
    rest: &'a [u8],
}

impl<'a> XdrReader<'a> {
    /// Creates a reader positioned at the start of `buf`.
    #[inline]
    pub const fn new(buf: &'a [u8]) -> Self {
        Self { buf, rest: buf }
    }

    /// Number of bytes consumed so far.
    #[inline]
    pub const fn position(&self) -> usize {
        // `rest` is a suffix of `buf`: no wrap.
        self.buf.len().wrapping_sub(self.rest.len())
    }

    /// Number of bytes not yet consumed.
    #[inline]
    pub fn remaining(&self) -> usize {
        self.rest.len()
    }

    /// The bytes not yet consumed, without consuming them.
    #[inline]
    pub fn rest(&self) -> &'a [u8] {
        self.rest
    }

    /// Consumes exactly `len` bytes (no padding) and returns them.
    #[inline]
    pub fn take(&mut self, len: usize) -> Result<&'a [u8], XdrError> {
        let Some((out, rest)) = self.rest.split_at_checked(len) else {
            // An end past `usize::MAX` is an overflow, as a position plus
            // `len` would be; anything else runs past the input.
            return Err(match self.position().checked_add(len) {
                None => XdrError::Overflow,
                Some(_) => XdrError::Truncated,
            });
        };
        self.rest = rest;
        Ok(out)
    }

    /// Skips `len` bytes (no padding).
    #[inline]
    pub fn skip(&mut self, len: usize) -> Result<(), XdrError> {
        self.take(len).map(|_| ())
    }

    /// Decodes a big-endian `u32`.
    #[inline]
    pub fn read_u32(&mut self) -> Result<u32, XdrError> {
        let (b, rest) = self
            .rest
            .split_first_chunk::<4>()
            .ok_or(XdrError::Truncated)?;
        self.rest = rest;
        Ok(u32::from_be_bytes(*b))
    }

    /// Decodes `N` big-endian `u32`s with one bounds check (a header's
    /// fixed words, a segment's).
    #[inline(always)]
    pub fn read_words<const N: usize>(&mut self) -> Result<[u32; N], XdrError> {
        let len = N.checked_mul(4).ok_or(XdrError::Overflow)?;
        let mut rest = self.take(len)?;
        let mut out = [0u32; N];
        for word in out.iter_mut() {
            let Some((bytes, next)) = rest.split_first_chunk::<4>() else {
                return Err(XdrError::Truncated);
            };
            *word = u32::from_be_bytes(*bytes);
            rest = next;
        }
        Ok(out)
    }

    /// Decodes a big-endian `i32`.
    #[inline]
    pub fn read_i32(&mut self) -> Result<i32, XdrError> {
        let b = self.take(4)?;
        match *b {
            [a, b, c, d] => Ok(i32::from_be_bytes([a, b, c, d])),
            _ => Err(XdrError::Truncated),
        }
    }

    /// Decodes a big-endian `u64` (XDR "unsigned hyper").
    #[inline]
    pub fn read_u64(&mut self) -> Result<u64, XdrError> {
        let b = self.take(8)?;
        match *b {
            [a, b, c, d, e, f, g, h] => Ok(u64::from_be_bytes([a, b, c, d, e, f, g, h])),
            _ => Err(XdrError::Truncated),
        }
    }

    /// Decodes an XDR `bool`, rejecting anything but 0 and 1.
    ///
    /// Strictness here is deliberate: the C decoders treat any non-zero
    /// word as "present", which lets garbage through unnoticed.
    #[inline]
    pub fn read_bool(&mut self) -> Result<bool, XdrError> {
        match self.read_u32()? {
            0 => Ok(false),
            1 => Ok(true),
            v => Err(XdrError::BadBool(v)),
        }
    }

    /// Consumes the next word if it is zero (an empty list's terminator,
    /// an absent optional item): `true` if it did. Decoders check for the
    /// common empty case with this before calling out of line.
    #[inline]
    pub fn take_zero(&mut self) -> bool {
        match self.rest.split_first_chunk::<4>() {
            Some((&[0, 0, 0, 0], rest)) => {
                self.rest = rest;
                true
            }
            _ => false,
        }
    }

    /// Decodes fixed-length opaque data of `len` bytes plus its padding.
    ///
    /// The padding bytes are skipped, not checked for zero (RFC 4506 says
    /// the receiver should not rely on their value).
    #[inline]
    pub fn read_opaque_fixed(&mut self, len: usize) -> Result<&'a [u8], XdrError> {
        let padded = align_up(len).ok_or(XdrError::Overflow)?;
        if padded > self.remaining() {
            return Err(XdrError::Truncated);
        }
        let out = self.take(len)?;
        self.skip(pad_len(len))?;
        Ok(out)
    }

    /// Decodes variable-length opaque data of at most `max` bytes.
    #[inline]
    pub fn read_opaque(&mut self, max: usize) -> Result<&'a [u8], XdrError> {
        let len = usize::try_from(self.read_u32()?).map_err(|_| XdrError::Overflow)?;
        if len > max {
            return Err(XdrError::TooLong);
        }
        self.read_opaque_fixed(len)
    }

    /// Decodes the count of a counted array whose elements are each
    /// `elem_size` bytes, and checks that `count` elements fit in the
    /// remaining input *before* the caller iterates over them.
    ///
    /// Returns [`XdrError::TooLong`] if `count > max`.
    #[inline]
    pub fn read_array_count(&mut self, elem_size: usize, max: u32) -> Result<u32, XdrError> {
        let count = self.read_u32()?;
        if count > max {
            return Err(XdrError::TooLong);
        }
        let n = usize::try_from(count).map_err(|_| XdrError::Overflow)?;
        let bytes = n.checked_mul(elem_size).ok_or(XdrError::Overflow)?;
        if bytes > self.remaining() {
            return Err(XdrError::Truncated);
        }
        Ok(count)
    }
}

/// XDR encoder writing into a caller-provided buffer.
#[derive(Debug)]
pub struct XdrWriter<'a> {
    buf: &'a mut [u8],
    pos: usize,
}

impl<'a> XdrWriter<'a> {
    /// Creates a writer that encodes from the start of `buf`.
    #[inline]
    pub fn new(buf: &'a mut [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    /// Number of bytes written so far.
    #[inline]
    pub const fn position(&self) -> usize {
        self.pos
    }

    /// Number of bytes still available.
    #[inline]
    pub fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    /// The bytes written so far.
    #[inline]
    pub fn written(&self) -> &[u8] {
        self.buf.get(..self.pos).unwrap_or(&[])
    }

    /// Reserves `len` bytes and returns them for the caller to fill.
    #[inline]
    pub(crate) fn reserve(&mut self, len: usize) -> Result<&mut [u8], XdrError> {
        let start = self.pos;
        let end = start.checked_add(len).ok_or(XdrError::Overflow)?;
        let out = self.buf.get_mut(start..end).ok_or(XdrError::NoSpace)?;
        self.pos = end;
        Ok(out)
    }

    /// Writes raw bytes with no length prefix and no padding.
    #[inline]
    pub fn write_raw(&mut self, data: &[u8]) -> Result<(), XdrError> {
        self.reserve(data.len())?.copy_from_slice(data);
        Ok(())
    }

    /// Encodes a big-endian `u32`.
    #[inline]
    pub fn write_u32(&mut self, v: u32) -> Result<(), XdrError> {
        self.write_raw(&v.to_be_bytes())
    }

    /// Encodes `N` big-endian `u32`s with one bounds check.
    #[inline]
    pub fn write_words<const N: usize>(&mut self, words: [u32; N]) -> Result<(), XdrError> {
        let len = N.checked_mul(4).ok_or(XdrError::Overflow)?;
        let mut out = self.reserve(len)?;
        for word in words {
            let Some((bytes, next)) = out.split_first_chunk_mut::<4>() else {
                return Err(XdrError::NoSpace);
            };
            *bytes = word.to_be_bytes();
            out = next;
        }
        Ok(())
    }

    /// Encodes a big-endian `i32`.
    #[inline]
    pub fn write_i32(&mut self, v: i32) -> Result<(), XdrError> {
        self.write_raw(&v.to_be_bytes())
    }

    /// Encodes a big-endian `u64` (XDR "unsigned hyper").
    #[inline]
    pub fn write_u64(&mut self, v: u64) -> Result<(), XdrError> {
        self.write_raw(&v.to_be_bytes())
    }

    /// Encodes an XDR `bool` as 0 or 1.
    #[inline]
    pub fn write_bool(&mut self, v: bool) -> Result<(), XdrError> {
        self.write_u32(u32::from(v))
    }

    /// Encodes fixed-length opaque data followed by zero padding.
    #[inline]
    pub fn write_opaque_fixed(&mut self, data: &[u8]) -> Result<(), XdrError> {
        let padded = align_up(data.len()).ok_or(XdrError::Overflow)?;
        if padded > self.remaining() {
            return Err(XdrError::NoSpace);
        }
        self.write_raw(data)?;
        self.reserve(pad_len(data.len()))?.fill(0);
        Ok(())
    }

    /// Encodes variable-length opaque data (length prefix, data, padding).
    #[inline]
    pub fn write_opaque(&mut self, data: &[u8]) -> Result<(), XdrError> {
        let len = u32::try_from(data.len()).map_err(|_| XdrError::TooLong)?;
        self.write_u32(len)?;
        self.write_opaque_fixed(data)
    }

    /// Reserves one XDR word to be filled in later with [`Self::patch_u32`]
    /// (for example an array count known only after the elements are
    /// written) and returns its offset.
    #[inline]
    pub fn reserve_u32(&mut self) -> Result<usize, XdrError> {
        let at = self.pos;
        self.reserve(4)?.fill(0);
        Ok(at)
    }

    /// Overwrites the word at `offset`, which must have been written before.
    #[inline]
    pub fn patch_u32(&mut self, offset: usize, v: u32) -> Result<(), XdrError> {
        let end = offset.checked_add(4).ok_or(XdrError::Overflow)?;
        if end > self.pos {
            return Err(XdrError::NoSpace);
        }
        self.buf
            .get_mut(offset..end)
            .ok_or(XdrError::NoSpace)?
            .copy_from_slice(&v.to_be_bytes());
        Ok(())
    }
}
