// SPDX-License-Identifier: GPL-2.0

//! Where the bytes of a Reply go (C `svc_rdma_sendto.c`): result payloads
//! through the client's Write chunks, the rest inline or through its
//! Reply chunk.
//!
//! nfsd names its result payloads as it encodes the Reply, each recorded
//! in the Write chunk it goes to (`ChunkLayout::set_result_payload`); when
//! it sends, [`PayloadWrites`] lists what goes through the Write chunks and
//! [`ReplyBody`] the rest, with the runs of the Reply ([`BodyRuns`]) that
//! make up each byte range of it.
//! Chunk lengths come from the peer, payload positions from nfsd: every
//! offset is computed checked.

use super::pcl::NonPayloadRegions;
use super::pcl::ParsedChunks;
use super::pcl::PclChunk;
use super::pcl::PclError;
use super::xdr::align_up_u32;

/// The body of a Reply of `xdr_len` bytes whose one result payload, `len`
/// bytes at `position`, went through a Write chunk: the bytes before the
/// payload and those after its XDR pad, each as `(offset, length)` (either
/// may be empty), as [`ReplyBody`] finds them; `None` where it finds the
/// payload outside the Reply ([`PclError::BadRegion`]). `len` is not zero.
#[inline]
pub fn around_one_payload(position: u32, len: u32, xdr_len: u32) -> Option<[(u32, u32); 2]> {
    let after = position.checked_add(len).and_then(align_up_u32)?;
    if position > xdr_len {
        return None;
    }
    let rest = xdr_len.checked_sub(after)?;
    Some([(0, position), (after, rest)])
}

/// A result payload to push into its Write chunk with RDMA Writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PayloadWrite<'c> {
    /// The Write chunk.
    pub chunk: &'c PclChunk,
    /// Offset of the payload in the Reply.
    pub position: u32,
    /// Length in bytes (never zero); `position + len` is inside the Reply.
    pub len: u32,
}

impl PayloadWrite<'_> {
    /// Offset in the Reply of byte `off` of the payload.
    pub fn reply_offset(&self, off: usize) -> Option<u32> {
        self.position.checked_add(u32::try_from(off).ok()?)
    }
}

/// The result payloads of a Reply of `xdr_len` bytes, one per Write chunk
/// that has one; a payload outside the Reply ends the iteration with
/// [`PclError::BadRegion`] (the connection is closed).
#[derive(Clone, Debug)]
pub struct PayloadWrites<'c> {
    chunks: core::slice::Iter<'c, PclChunk>,
    xdr_len: u32,
    finished: bool,
}

impl<'c> PayloadWrites<'c> {
    /// The payload writes of `pcl` for a Reply of `xdr_len` bytes.
    #[inline]
    pub fn new(pcl: &'c ParsedChunks<'_>, xdr_len: u32) -> Self {
        Self {
            chunks: pcl.write_chunks().iter(),
            xdr_len,
            finished: false,
        }
    }
}

impl<'c> Iterator for PayloadWrites<'c> {
    type Item = Result<PayloadWrite<'c>, PclError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.finished {
            return None;
        }
        for chunk in self.chunks.by_ref() {
            if chunk.payload_length == 0 {
                continue;
            }
            let inside = chunk
                .position
                .checked_add(chunk.payload_length)
                .is_some_and(|end| end <= self.xdr_len);
            if !inside {
                self.finished = true;
                return Some(Err(PclError::BadRegion));
            }
            return Some(Ok(PayloadWrite {
                chunk,
                position: chunk.position,
                len: chunk.payload_length,
            }));
        }
        self.finished = true;
        None
    }
}

/// What is left of a Reply once the result payloads went through Write
/// chunks: its non-payload regions, sent inline or through the Reply chunk.
///
/// # Invariants
///
/// The regions are consistent and their lengths add up to `len`, at most
/// `xdr_len`.
#[derive(Clone, Debug)]
pub struct ReplyBody<'c> {
    regions: NonPayloadRegions<'c>,
    len: u32,
    xdr_len: u32,
}

impl<'c> ReplyBody<'c> {
    /// The rest of a Reply of `xdr_len` bytes around the payloads recorded
    /// in `pcl`; [`PclError::BadRegion`] if they do not fit in it.
    #[inline]
    pub fn new(pcl: &'c ParsedChunks<'_>, xdr_len: u32) -> Result<Self, PclError> {
        let regions = pcl.nonpayload_regions(xdr_len);
        let len = regions.total_len()?;
        // INVARIANT: `total_len` checks every region (each within the
        // Reply, in order).
        Ok(Self {
            regions,
            len,
            xdr_len,
        })
    }

    /// Length in bytes.
    pub fn len(&self) -> u32 {
        self.len
    }

    /// Whether there is nothing left to send.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the client's Reply chunk `reply_chunk` holds it; if not,
    /// the Reply is answered with `ERR_CHUNK`.
    pub fn fits(&self, reply_chunk: &PclChunk) -> bool {
        self.len <= reply_chunk.length
    }

    /// Length of the inline message after a transport header of
    /// `header_len` bytes, if it fits the negotiated `inline_send`; `None`
    /// (without a Reply chunk) is answered with `ERR_CHUNK`.
    pub fn inline_len(
        &self,
        header_len: usize,
        inline_send: u32,
    ) -> Result<Option<usize>, PclError> {
        let body = usize::try_from(self.len).map_err(|_| PclError::BadRegion)?;
        let total = body.checked_add(header_len).ok_or(PclError::BadRegion)?;
        let max = usize::try_from(inline_send).map_err(|_| PclError::BadRegion)?;
        Ok(if total > max { None } else { Some(total) })
    }

    /// The body's bytes that lie in `[start, start + len)` of the Reply
    /// (its page list), if they are one run of at least `min` bytes: an
    /// inline Reply's page data that can go out as Send SGEs of its own,
    /// not copied. `None` when they are fewer, in more than one run (a
    /// payload moved to a Write chunk splits them), or the body is not
    /// whole. Runs that continue each other, in the Reply and in the
    /// body, count as one.
    pub fn page_part(&self, start: u32, len: u32, min: usize) -> Option<BodyRun> {
        let end = start.checked_add(len)?;
        // Nothing moved out (a Reply without payloads in Write chunks, the
        // common inline case): the body is the Reply, offset for offset.
        if self.len == self.xdr_len {
            let n = usize::try_from(end.min(self.xdr_len).checked_sub(start)?).ok()?;
            return (n > 0 && n >= min).then_some(BodyRun {
                reply_offset: start,
                at: usize::try_from(start).ok()?,
                len: n,
            });
        }
        let mut found: Option<BodyRun> = None;
        for run in self.runs(0, usize::try_from(self.len).ok()?) {
            let run = run.ok()?;
            let run_end = run.reply_offset.checked_add(u32::try_from(run.len).ok()?)?;
            let (lo, hi) = (run.reply_offset.max(start), run_end.min(end));
            if lo >= hi {
                continue;
            }
            let part = BodyRun {
                reply_offset: lo,
                at: run
                    .at
                    .checked_add(usize::try_from(lo.checked_sub(run.reply_offset)?).ok()?)?,
                len: usize::try_from(hi.checked_sub(lo)?).ok()?,
            };
            found = match found {
                None => Some(part),
                Some(f) => {
                    let f_end = f.reply_offset.checked_add(u32::try_from(f.len).ok()?)?;
                    if f_end != part.reply_offset || f.at.checked_add(f.len)? != part.at {
                        return None;
                    }
                    Some(BodyRun {
                        len: f.len.checked_add(part.len)?,
                        ..f
                    })
                }
            };
        }
        found.filter(|p| p.len >= min)
    }

    /// The runs of the Reply that make up bytes `[off, off + len)` of the
    /// body.
    pub fn runs(&self, off: usize, len: usize) -> BodyRuns<'c> {
        BodyRuns {
            regions: self.regions.clone(),
            skip: off,
            at: 0,
            left: len,
            finished: false,
        }
    }
}

/// A run of the Reply copied into part of a body range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BodyRun {
    /// Offset in the Reply.
    pub reply_offset: u32,
    /// Offset in the body range.
    pub at: usize,
    /// Length in bytes (never zero).
    pub len: usize,
}

/// Iterator over the [`BodyRun`]s of a body range, in order; they tile the
/// range. Ends with [`PclError::BadRegion`] if the body is shorter than
/// the range.
#[derive(Clone, Debug)]
pub struct BodyRuns<'c> {
    regions: NonPayloadRegions<'c>,
    /// Bytes of the body before the range not walked past yet.
    skip: usize,
    /// Bytes of the range already yielded.
    at: usize,
    /// Bytes of the range still to yield.
    left: usize,
    finished: bool,
}

impl BodyRuns<'_> {
    fn fail(&mut self) -> Option<Result<BodyRun, PclError>> {
        self.finished = true;
        Some(Err(PclError::BadRegion))
    }
}

impl Iterator for BodyRuns<'_> {
    type Item = Result<BodyRun, PclError>;

    // Inlined, with the regions' walk, into the loop that copies the
    // runs: no call and no `Option<Result>` in memory per run.
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        while !self.finished && self.left != 0 {
            let r = match self.regions.next() {
                None => break,
                Some(Err(_)) => return self.fail(),
                Some(Ok(r)) => r,
            };
            let Ok(rlen) = usize::try_from(r.len) else {
                return self.fail();
            };
            // What is left to skip and to yield is counted down, with no
            // sums to check for overflow.
            if self.skip >= rlen {
                // The range starts past this region.
                self.skip = self.skip.saturating_sub(rlen);
                continue;
            }
            let in_region = core::mem::take(&mut self.skip);
            let n = rlen.saturating_sub(in_region).min(self.left);
            let Some(reply_offset) = u32::try_from(in_region)
                .ok()
                .and_then(|o| r.offset.checked_add(o))
            else {
                return self.fail();
            };
            let run = BodyRun {
                reply_offset,
                at: self.at,
                len: n,
            };
            // `n <= left`, and `at + left` is the range's length.
            self.at = self.at.saturating_add(n);
            self.left = self.left.saturating_sub(n);
            return Some(Ok(run));
        }
        if self.finished {
            return None;
        }
        self.finished = true;
        if self.left != 0 {
            return Some(Err(PclError::BadRegion));
        }
        None
    }
}
