// SPDX-License-Identifier: GPL-2.0

//! Cutting chunks into the pieces the server moves with one RDMA Read or
//! Write each (C `svc_rdma_rw.c`).
//!
//! A piece is at most as long as the server's buffers and never crosses
//! one of the client's segments. [`Pieces`] cuts one chunk,
//! [`CallReadPieces`] every chunk a Call is read from, and
//! [`RangeInPieces`] finds a range of a chunk's bytes in the pieces it was
//! read into. Segment lengths and addresses come from the peer: every
//! offset and address is computed checked.

use super::msg::Segment;
use super::pcl::ParsedChunks;
use super::pcl::PclChunk;

/// The Read source of a Call's bytes that come from the call chunk (the
/// position-zero Read segments of an `RDMA_NOMSG`). Read chunk `i` of
/// [`ParsedChunks::read_chunks`] is source `i + 1`.
pub const CALL_CHUNK: usize = 0;

/// One RDMA Read or Write of a chunk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Piece {
    /// Offset of the piece in its chunk's bytes.
    pub off: usize,
    /// Length: at least one byte, at most the largest piece.
    pub len: usize,
    /// Remote address of the piece's first byte.
    pub addr: u64,
    /// The segment's handle (R_key).
    pub rkey: u32,
}

impl Piece {
    /// The piece cut into parts of at most `max` bytes (at least one), in
    /// order: what a piece longer than a buffer is moved through. The
    /// addresses cannot overflow: a piece's bytes were checked to fit
    /// when it was cut.
    pub fn parts(self, max: usize) -> impl Iterator<Item = Piece> {
        let max = max.max(1);
        (0..self.len).step_by(max).map(move |k| Piece {
            off: self.off.saturating_add(k),
            len: max.min(self.len.saturating_sub(k)),
            addr: self
                .addr
                .saturating_add(u64::try_from(k).unwrap_or(u64::MAX)),
            rkey: self.rkey,
        })
    }
}

/// Why a chunk cannot be cut into pieces or found in them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PieceError {
    /// An address or offset does not fit its type (C `-EINVAL`).
    Overflow,
    /// The segments hold fewer bytes than the chunk carries (C
    /// `-EMSGSIZE`).
    ShortSegments,
    /// The pieces do not cover the range asked for (C `-EINVAL`).
    NotCovered,
}

/// The pieces of the first `total` bytes of the segments `segs`, in
/// order: each at most `max_piece` bytes and inside one segment. Ends with
/// an error if the segments are shorter than `total` or an address
/// overflows; pieces before the error are yielded first.
#[derive(Clone, Debug)]
pub struct Pieces<'s> {
    segs: &'s [Segment],
    total: usize,
    max_piece: usize,
    /// Index of the segment being cut.
    seg: usize,
    /// Bytes of that segment already cut.
    in_seg: usize,
    /// Bytes of the chunk already cut.
    done: usize,
    finished: bool,
}

impl<'s> Pieces<'s> {
    /// Cuts `total` bytes of `segs` into pieces of at most `max_piece`
    /// bytes (at least one).
    pub fn new(segs: &'s [Segment], total: usize, max_piece: usize) -> Self {
        Self {
            segs,
            total,
            max_piece: max_piece.max(1),
            seg: 0,
            in_seg: 0,
            done: 0,
            finished: false,
        }
    }

    /// The one piece [`Self::new`] would cut `total` bytes of `segs` into
    /// when they are one segment of exactly `total` bytes, at most
    /// `max_piece` (an NFS WRITE's usual chunk); `None` for anything else,
    /// which the iterator cuts (the host property test
    /// `a_single_piece_is_what_the_cutter_cuts` holds the two equal).
    pub fn single(segs: &[Segment], total: usize, max_piece: usize) -> Option<Piece> {
        let [s] = segs else {
            return None;
        };
        let len = usize::try_from(s.length).ok()?;
        if len != total || len == 0 || len > max_piece.max(1) {
            return None;
        }
        Some(Piece {
            off: 0,
            len,
            addr: s.offset,
            rkey: s.handle,
        })
    }

    fn fail(&mut self, e: PieceError) -> Option<Result<Piece, PieceError>> {
        self.finished = true;
        Some(Err(e))
    }
}

impl Iterator for Pieces<'_> {
    type Item = Result<Piece, PieceError>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.finished {
            if self.done >= self.total {
                self.finished = true;
                break;
            }
            let Some(s) = self.segs.get(self.seg) else {
                return self.fail(PieceError::ShortSegments);
            };
            let Ok(seg_len) = usize::try_from(s.length) else {
                return self.fail(PieceError::Overflow);
            };
            if self.in_seg >= seg_len {
                self.seg = self.seg.saturating_add(1);
                self.in_seg = 0;
                continue;
            }
            let len = seg_len
                .saturating_sub(self.in_seg)
                .min(self.total.saturating_sub(self.done))
                .min(self.max_piece);
            let Some(addr) = u64::try_from(self.in_seg)
                .ok()
                .and_then(|o| s.offset.checked_add(o))
            else {
                return self.fail(PieceError::Overflow);
            };
            let piece = Piece {
                off: self.done,
                len,
                addr,
                rkey: s.handle,
            };
            // Both stay within `seg_len` and `total`: no overflow.
            self.in_seg = self.in_seg.saturating_add(len);
            self.done = self.done.saturating_add(len);
            return Some(Ok(piece));
        }
        None
    }
}

/// The chunk of `pcl` that Read source `src` names (see [`CALL_CHUNK`]).
pub fn read_source<'p>(pcl: &'p ParsedChunks<'_>, src: usize) -> Option<&'p PclChunk> {
    match src.checked_sub(1) {
        None => pcl.call_chunk(),
        Some(i) => pcl.read_chunks().get(i),
    }
}

/// Every RDMA Read of a Call, as (source, piece): the call chunk's pieces,
/// then each Read chunk's in position order (C
/// `svc_rdma_process_read_list`). Ends with an error as [`Pieces`] does.
#[derive(Clone, Debug)]
pub struct CallReadPieces<'p> {
    pcl: &'p ParsedChunks<'p>,
    max_piece: usize,
    /// The next source to start.
    next_src: usize,
    /// The source being cut.
    current: Option<(usize, Pieces<'p>)>,
    finished: bool,
}

impl<'p> CallReadPieces<'p> {
    /// The Reads of `pcl`'s call chunk and Read chunks, in pieces of at
    /// most `max_piece` bytes.
    pub fn new(pcl: &'p ParsedChunks<'p>, max_piece: usize) -> Self {
        Self {
            pcl,
            max_piece,
            next_src: CALL_CHUNK,
            current: None,
            finished: false,
        }
    }

    /// At most how many pieces this yields, from the chunks' lengths and
    /// segment counts alone: a chunk's length in whole pieces, plus one per
    /// segment (each segment ends at most one short piece). Room for them
    /// can be reserved at once; the chunk lists are bounded by the
    /// decoder's limits, and so is this.
    pub fn max_count(&self) -> usize {
        let chunks = self.pcl.call_chunk().into_iter();
        chunks
            .chain(self.pcl.read_chunks())
            .map(|c| {
                let len = usize::try_from(c.length).unwrap_or(usize::MAX);
                // `Pieces::new` cuts pieces of at least one byte likewise.
                let whole = len.checked_div(self.max_piece.max(1)).unwrap_or(len);
                whole.saturating_add(self.pcl.segments(c).len())
            })
            .fold(0, usize::saturating_add)
    }
}

impl Iterator for CallReadPieces<'_> {
    type Item = Result<(usize, Piece), PieceError>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.finished {
            if let Some((src, pieces)) = &mut self.current {
                match pieces.next() {
                    Some(Ok(p)) => return Some(Ok((*src, p))),
                    Some(Err(e)) => {
                        self.finished = true;
                        return Some(Err(e));
                    }
                    None => self.current = None,
                }
            }
            let src = self.next_src;
            if src > self.pcl.read_chunks().len() {
                self.finished = true;
                break;
            }
            self.next_src = src.saturating_add(1);
            if let Some(c) = read_source(self.pcl, src) {
                let Ok(total) = usize::try_from(c.length) else {
                    self.finished = true;
                    return Some(Err(PieceError::Overflow));
                };
                let segs = self.pcl.segments(c);
                self.current = Some((src, Pieces::new(segs, total, self.max_piece)));
            }
        }
        None
    }
}

/// Where a run of a chunk range lies in one of the pieces it was read into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PieceRun {
    /// Offset of the run in the range.
    pub at: usize,
    /// Offset of the run in the piece.
    pub in_piece: usize,
    /// Length in bytes (never zero).
    pub len: usize,
}

/// The runs of bytes `[start, start + len)` of a chunk in its pieces, in
/// the pieces' order: yields (the caller's piece, run) for each piece that
/// holds part of the range. Ends with [`PieceError::NotCovered`] if the
/// pieces do not hold exactly `len` bytes of the range.
#[derive(Clone, Debug)]
pub struct RangeInPieces<I> {
    pieces: I,
    start: usize,
    /// End of the range; `None` if it overflows.
    end: Option<usize>,
    len: usize,
    /// Bytes of the range found so far.
    found: usize,
    finished: bool,
}

impl<I> RangeInPieces<I> {
    /// Finds `len` bytes at `start` of a chunk in `pieces`: (the caller's
    /// handle on a piece, the piece) for every piece of that chunk.
    pub fn new(pieces: I, start: usize, len: usize) -> Self {
        Self {
            pieces,
            start,
            end: start.checked_add(len),
            len,
            found: 0,
            finished: false,
        }
    }
}

impl<T, I: Iterator<Item = (T, Piece)>> Iterator for RangeInPieces<I> {
    type Item = Result<(T, PieceRun), PieceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.finished {
            return None;
        }
        let Some(end) = self.end else {
            self.finished = true;
            return Some(Err(PieceError::Overflow));
        };
        for (handle, p) in self.pieces.by_ref() {
            let Some(p_end) = p.off.checked_add(p.len) else {
                self.finished = true;
                return Some(Err(PieceError::Overflow));
            };
            let lo = p.off.max(self.start);
            let hi = p_end.min(end);
            if lo >= hi {
                continue;
            }
            let n = hi.saturating_sub(lo);
            let Some(found) = self.found.checked_add(n) else {
                self.finished = true;
                return Some(Err(PieceError::Overflow));
            };
            self.found = found;
            let run = PieceRun {
                at: lo.saturating_sub(self.start),
                in_piece: lo.saturating_sub(p.off),
                len: n,
            };
            return Some(Ok((handle, run)));
        }
        self.finished = true;
        if self.found != self.len {
            return Some(Err(PieceError::NotCovered));
        }
        None
    }
}

/// One page's part of a range of bytes laid out over pages (see
/// [`page_spans`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageSpan {
    /// Index of the page among the chunk's pages.
    pub page: usize,
    /// Offset in that page.
    pub offset: usize,
    /// Length (at least one byte, at most to the page's end).
    pub len: usize,
}

/// The page pieces of bytes `[off, off + len)` of data laid out from
/// offset 0 of consecutive pages of `page_size` bytes: the scatter list of
/// one RDMA Read into a paged chunk's pages, or of a Send's page data.
/// `None` if the range overflows; an empty range has no spans.
pub fn page_spans(
    off: usize,
    len: usize,
    page_size: usize,
) -> Option<impl Iterator<Item = PageSpan>> {
    let end = off.checked_add(len)?;
    if page_size == 0 {
        return None;
    }
    let mut at = off;
    Some(core::iter::from_fn(move || {
        if at >= end {
            return None;
        }
        let page = at.checked_div(page_size)?;
        let offset = at.checked_rem(page_size)?;
        let len = page_size.saturating_sub(offset).min(end.saturating_sub(at));
        at = at.checked_add(len)?;
        Some(PageSpan { page, offset, len })
    }))
}
