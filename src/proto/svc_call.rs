// SPDX-License-Identifier: GPL-2.0

//! Where the bytes of a received Call go in the request's argument (C
//! `svc_rdma_recvfrom.c`: `svc_rdma_read_multiple_chunks`,
//! `svc_rdma_read_call_chunk`).
//!
//! A Call is its inline body (or, for `RDMA_NOMSG`, the call chunk) with
//! the Read chunks spliced in at their positions, each followed by the XDR
//! pad the client does not send (RFC 8166 s. 3.4.5.2). [`CallLayout`]
//! decides whether the server takes a Call at all and lists the
//! [`Step`]s that build it; the server carries them out with copies from
//! the Receive buffer and from the RDMA Read sinks.

use super::pcl::ParsedChunks;
use super::pcl::PclChunk;
use super::pcl::ReadRegion;
use super::pcl::ReadRegions;
use super::pieces::CALL_CHUNK;
use super::xdr::align_up_u32;

/// Largest Call payload the server accepts (C `RPCSVC_MAXPAYLOAD_RDMA`,
/// 4 MiB); the request's pages bound it further.
pub const MAX_PAYLOAD: u32 = 4 * 1024 * 1024;

/// The layout of a Call the server takes.
///
/// # Invariants
///
/// `total` is the sum of the base and every Read chunk rounded up to XDR
/// alignment, is not zero, and the Read regions over the base are
/// consistent.
#[derive(Clone, Copy, Debug)]
pub struct CallLayout<'c> {
    read_chunks: &'c [PclChunk],
    base_len: u32,
    base_in_call_chunk: bool,
    total: u32,
}

impl<'c> CallLayout<'c> {
    /// The layout of the Call `pcl` describes over an inline body of
    /// `inline_len` bytes, if the server takes it: it is not empty, its
    /// regions are consistent and it fits an argument of `arg_max` bytes.
    /// `None` is answered with `ERR_CHUNK`; a call chunk too large for the
    /// request is refused here, before anything is read.
    // Inlined into the receive path; the walk of the Read regions, which
    // most Calls (none with a Read chunk) skip, stays out of line.
    #[inline]
    pub fn new(pcl: &'c ParsedChunks<'_>, inline_len: usize, arg_max: u32) -> Option<Self> {
        let (base_len, base_in_call_chunk) = match pcl.call_chunk() {
            Some(cc) if cc.length == 0 => return None,
            Some(cc) => (cc.length, true),
            None => (u32::try_from(inline_len).ok()?, false),
        };
        let read_chunks = pcl.read_chunks();
        let mut total = base_len;
        for c in read_chunks {
            total = total.checked_add(align_up_u32(c.length)?)?;
        }
        if total == 0 || total > arg_max {
            return None;
        }
        // Without Read chunks the base is the whole Call, which cannot be
        // inconsistent: only chunks need the walk.
        if !read_chunks.is_empty() && !regions_consistent(read_chunks, base_len) {
            return None;
        }
        // INVARIANT: checked just above.
        Some(Self {
            read_chunks,
            base_len,
            base_in_call_chunk,
            total,
        })
    }

    /// Length of the Call in bytes.
    pub fn total(&self) -> u32 {
        self.total
    }

    /// Whether any of the Call is read with RDMA Read.
    pub fn needs_reads(&self) -> bool {
        self.base_in_call_chunk || !self.read_chunks.is_empty()
    }

    /// The steps that build the Call, in order.
    pub fn steps(&self) -> CallSteps<'c> {
        CallSteps {
            regions: ReadRegions::new(self.read_chunks, self.base_len),
            read_chunks: self.read_chunks,
            base_in_call_chunk: self.base_in_call_chunk,
            at: 0,
            pad: 0,
            finished: false,
        }
    }
}

/// Whether the Read regions of `read_chunks` over a base of `base_len`
/// bytes are consistent (their walk yields no error).
fn regions_consistent(read_chunks: &[PclChunk], base_len: u32) -> bool {
    ReadRegions::new(read_chunks, base_len).all(|r| r.is_ok())
}

/// Where the bytes of one [`Step`] come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// `len` bytes at `offset` of the inline body.
    Inline {
        /// Offset in the inline body.
        offset: u32,
        /// Length in bytes (never zero).
        len: u32,
    },
    /// `len` bytes at `start` of the Read source `src` (see
    /// [`CALL_CHUNK`](super::pieces::CALL_CHUNK)).
    Chunk {
        /// The Read source.
        src: usize,
        /// Offset in the source's bytes.
        start: u32,
        /// Length in bytes.
        len: u32,
    },
    /// `len` (1 to 3) zero bytes: the XDR pad after a Read chunk.
    Pad {
        /// Length in bytes.
        len: u32,
    },
}

/// One copy into the argument: the bytes of `source` go at offset `at`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    /// Offset in the argument.
    pub at: u32,
    /// Where the bytes come from.
    pub source: Source,
}

/// Why the steps of a Call stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepError {
    /// The Read regions are inconsistent: answered with `ERR_CHUNK`.
    BadRegion,
    /// An offset overflowed or named no chunk. [`CallLayout::new`] rules
    /// this out; the Call is dropped.
    Inconsistent,
}

/// Iterator over the [`Step`]s of a Call; they tile `[0, total)` in
/// order. An error ends the iteration.
#[derive(Clone, Debug)]
pub struct CallSteps<'c> {
    regions: ReadRegions<'c>,
    read_chunks: &'c [PclChunk],
    base_in_call_chunk: bool,
    /// Offset in the argument of the next step.
    at: u32,
    /// Pad owed after the Read chunk just yielded.
    pad: u32,
    finished: bool,
}

impl CallSteps<'_> {
    fn fail(&mut self, e: StepError) -> Option<Result<Step, StepError>> {
        self.finished = true;
        Some(Err(e))
    }

    /// The step of `len` bytes from `source` at the current offset; the
    /// offset moves past it.
    fn emit(&mut self, source: Source, len: u32) -> Option<Result<Step, StepError>> {
        let step = Step {
            at: self.at,
            source,
        };
        let Some(at) = self.at.checked_add(len) else {
            return self.fail(StepError::Inconsistent);
        };
        self.at = at;
        Some(Ok(step))
    }
}

impl Iterator for CallSteps<'_> {
    type Item = Result<Step, StepError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.finished {
            return None;
        }
        if self.pad > 0 {
            let len = core::mem::take(&mut self.pad);
            return self.emit(Source::Pad { len }, len);
        }
        let region = match self.regions.next() {
            None => {
                self.finished = true;
                return None;
            }
            Some(Err(_)) => return self.fail(StepError::BadRegion),
            Some(Ok(r)) => r,
        };
        match region {
            ReadRegion::Base { offset, len } if self.base_in_call_chunk => {
                let src = CALL_CHUNK;
                let start = offset;
                self.emit(Source::Chunk { src, start, len }, len)
            }
            ReadRegion::Base { offset, len } => self.emit(Source::Inline { offset, len }, len),
            ReadRegion::Chunk(i) => {
                let (Some(c), Some(src)) = (self.read_chunks.get(i), i.checked_add(1)) else {
                    return self.fail(StepError::Inconsistent);
                };
                let len = c.length;
                let Some(padded) = align_up_u32(len) else {
                    return self.fail(StepError::Inconsistent);
                };
                self.pad = padded.saturating_sub(len);
                self.emit(Source::Chunk { src, start: 0, len }, len)
            }
        }
    }
}

/// The layout of a Call whose one Read chunk is RDMA-Read straight into
/// pages of its own, handed to the request whole (C
/// `svc_rdma_read_data_item` and `svc_rdma_read_complete_one`): the
/// chunk's bytes start at offset 0 of its first page, and the inline body
/// stays in the head page, split at the chunk's position into the head and
/// the tail of the argument. No byte of the chunk is copied by the CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PagedCall {
    /// The Read chunk's XDR position: inline bytes before it are the head,
    /// the rest the tail.
    pub position: u32,
    /// The chunk's length.
    pub chunk_len: u32,
    /// The chunk's length with its XDR pad (zeros the server writes).
    pub padded_len: u32,
    /// Pages the chunk's bytes and pad fill.
    pub pages: usize,
}

impl PagedCall {
    /// The paged layout of a Call [`CallLayout::new`] accepted, `pcl`
    /// over an inline body of `inline_len` bytes, if it has one: exactly one Read chunk and no
    /// call chunk, an inline body that fits the head page, and a head page
    /// plus chunk pages within `max_pages`. Anything else (no chunk, a
    /// long call, several chunks) is assembled by copying.
    pub fn new(
        pcl: &ParsedChunks<'_>,
        inline_len: usize,
        page_size: usize,
        max_pages: usize,
    ) -> Option<Self> {
        if pcl.call_chunk().is_some() || inline_len > page_size || page_size == 0 {
            return None;
        }
        let [chunk] = pcl.read_chunks() else {
            return None;
        };
        if usize::try_from(chunk.position).ok()? > inline_len {
            return None;
        }
        Self::in_pages(chunk.position, chunk.length, page_size, max_pages)
    }

    /// The layout of a chunk of `length` bytes at `position` (checked to
    /// be within an inline body that fits a page) in pages of
    /// `page_size` bytes (not zero), the head page and the chunk's within
    /// `max_pages`.
    fn in_pages(position: u32, length: u32, page_size: usize, max_pages: usize) -> Option<Self> {
        if length == 0 {
            return None;
        }
        let padded_len = align_up_u32(length)?;
        let pages = usize::try_from(padded_len).ok()?.div_ceil(page_size);
        if pages.checked_add(1)? > max_pages {
            return None;
        }
        Some(Self {
            position,
            chunk_len: length,
            padded_len,
            pages,
        })
    }

    /// The paged layout of a Call with no call chunk and one Read chunk,
    /// `length` bytes at `position`, over an inline body of `inline_len`
    /// bytes: what [`CallLayout::new`] (with `arg_max`) and then
    /// [`Self::new`] decide for it, from the two numbers a one-pass
    /// decoder found, without the parsed lists (the host property test
    /// `svc_call` holds the two ways to the same answers). `None` when
    /// either would refuse it: the Call then goes the general way, which
    /// answers or copies it.
    pub fn of_one_chunk(
        position: u32,
        length: u32,
        inline_len: usize,
        arg_max: u32,
        page_size: usize,
        max_pages: usize,
    ) -> Option<Self> {
        if inline_len > page_size || page_size == 0 {
            return None;
        }
        let base_len = u32::try_from(inline_len).ok()?;
        // One chunk's regions are consistent when it starts in the base.
        if position > base_len {
            return None;
        }
        let total = base_len.checked_add(align_up_u32(length)?)?;
        if total > arg_max {
            return None;
        }
        Self::in_pages(position, length, page_size, max_pages)
    }
}
