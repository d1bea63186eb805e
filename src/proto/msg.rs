// SPDX-License-Identifier: GPL-2.0

//! RPC-over-RDMA version 1 (RFC 8166) message model: constants, plain
//! segment types, the borrowed views produced by the decoder, and the error
//! type with its mapping to an `RDMA_ERROR` reply.
//!
//! C header: [`include/linux/sunrpc/rpc_rdma.h`](srctree/include/linux/sunrpc/rpc_rdma.h).
//!
//! Wire layout (all fields big-endian 32-bit words unless noted):
//!
//! ```text
//! xid | vers | credits | proc | body
//! body(MSG, NOMSG)  = read_list write_list reply_chunk [RPC message if MSG]
//! body(MSGP)        = align thresh read_list write_list reply_chunk ...
//! body(DONE)        = (empty)
//! body(ERROR)       = ERR_VERS low high | ERR_CHUNK
//! read_list         = { 1 position handle length offset64 }* 0
//! write_list        = { 1 count { handle length offset64 }^count }* 0
//! reply_chunk       = 0 | 1 count { handle length offset64 }^count
//! ```

use super::xdr::XdrError;
use super::xdr::XdrReader;
use super::xdr::XdrWriter;

/// The only protocol version this implementation speaks.
pub const RPCRDMA_VERSION: u32 = 1;

/// Inline threshold every RPC-over-RDMA v1 peer supports (RFC 8166 §3.3.2).
pub const RPCRDMA_V1_DEF_INLINE_SIZE: u32 = 1024;

/// Linux's default inline threshold in each direction.
pub const RPCRDMA_DEF_INLINE: u32 = 4096;

/// Smallest inline threshold Linux accepts as a tunable.
pub const RPCRDMA_MIN_INLINE: u32 = 1024;

/// Largest inline threshold Linux accepts as a tunable.
pub const RPCRDMA_MAX_INLINE: u32 = 65536;

/// Size of the fixed header words: xid, vers, credits, proc.
pub const FIXED_HDR_LEN: usize = 16;

/// Smallest `RDMA_MSG`/`RDMA_NOMSG` header: fixed words plus three empty
/// chunk list discriminators (C `RPCRDMA_HDRLEN_MIN`).
pub const HDRLEN_MIN: usize = 28;

/// Length of an `RDMA_ERROR` with `ERR_CHUNK` (C `RPCRDMA_HDRLEN_ERR`).
pub const HDRLEN_ERR: usize = 20;

/// Length of an `RDMA_ERROR` with `ERR_VERS` (adds the low/high words).
pub const HDRLEN_ERR_VERS: usize = 28;

/// Wire size of one RDMA segment (handle, length, offset64).
pub const SEGMENT_LEN: usize = 16;

/// Words of a header whose lists hold one chunk of one segment and nothing
/// else (an NFS READ's Call with its Write chunk, its usual Reply; an NFS
/// WRITE's Call with its Read chunk): four fixed words and nine of lists.
pub(crate) const ONE_SEGMENT_HEADER_WORDS: usize = 13;

/// Bytes of such a header.
pub(crate) const ONE_SEGMENT_HEADER_LEN: usize = 4 * ONE_SEGMENT_HEADER_WORDS;

/// Wire size of one Read list item: discriminator, position, segment.
pub const READ_ITEM_LEN: usize = 4 + 4 + SEGMENT_LEN;

/// `ERR_VERS` error code.
pub const ERR_VERS: u32 = 1;

/// `ERR_CHUNK` error code.
pub const ERR_CHUNK: u32 = 2;

/// The `rdma_proc` values of RFC 8166 §4.2.1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Proc {
    /// `RDMA_MSG`: an RPC message follows the transport header inline.
    Msg = 0,
    /// `RDMA_NOMSG`: the RPC message is entirely in a chunk.
    NoMsg = 1,
    /// `RDMA_MSGP`: the RFC 5666 padded message, not used by v1 peers.
    Msgp = 2,
    /// `RDMA_DONE`: the RFC 5666 "Reply chunk done" message, not used.
    Done = 3,
    /// `RDMA_ERROR`: a transport-level error report.
    Error = 4,
}

impl Proc {
    /// Maps a wire value to a [`Proc`], or `None` if it is unknown.
    pub const fn from_u32(v: u32) -> Option<Self> {
        match v {
            0 => Some(Self::Msg),
            1 => Some(Self::NoMsg),
            2 => Some(Self::Msgp),
            3 => Some(Self::Done),
            4 => Some(Self::Error),
            _ => None,
        }
    }

    /// The wire value of this procedure.
    pub const fn to_u32(self) -> u32 {
        self as u32
    }
}

/// One RDMA segment: a steering tag, a byte count and a remote offset.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Segment {
    /// Remote steering tag (R_key) of the registered memory.
    pub handle: u32,
    /// Length of the segment in bytes.
    pub length: u32,
    /// Remote virtual address or offset of the segment.
    pub offset: u64,
}

impl Segment {
    /// Its four XDR words: handle, length, then the offset's high and low
    /// words (XDR "unsigned hyper").
    #[inline(always)]
    pub(crate) fn words(&self) -> [u32; 4] {
        let (hi, lo) = ((self.offset >> 32) as u32, self.offset as u32);
        [self.handle, self.length, hi, lo]
    }

    /// Creates a segment.
    pub const fn new(handle: u32, length: u32, offset: u64) -> Self {
        Self {
            handle,
            length,
            offset,
        }
    }
}

/// One item of a Read list: a segment and its XDR position.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadSegment {
    /// Byte offset of the chunk in the (unreduced) XDR stream of the RPC
    /// message; zero for the position-zero ("call") chunk.
    pub position: u32,
    /// The RDMA segment.
    pub segment: Segment,
}

impl ReadSegment {
    /// Creates a Read segment.
    pub const fn new(position: u32, handle: u32, length: u32, offset: u64) -> Self {
        Self {
            position,
            segment: Segment::new(handle, length, offset),
        }
    }
}

/// Body of an `RDMA_ERROR` message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorBody {
    /// `ERR_VERS`: the responder supports versions `low..=high`.
    Vers {
        /// Lowest supported version.
        low: u32,
        /// Highest supported version.
        high: u32,
    },
    /// `ERR_CHUNK`: the header or its chunks could not be processed.
    Chunk,
    /// An error code this implementation does not know. Decoded (so a
    /// requester can still retire the XID) but never encoded by us.
    Other(u32),
}

/// Reads one segment; the caller has already bounds-checked the list, but
/// the reads stay fallible so a logic slip cannot panic.
#[inline]
pub(crate) fn read_segment(r: &mut XdrReader<'_>) -> Result<Segment, XdrError> {
    let b = r.take(SEGMENT_LEN)?;
    let b = <&[u8; SEGMENT_LEN]>::try_from(b).map_err(|_| XdrError::Truncated)?;
    Ok(segment_from(b))
}

/// Decodes the segment in `b` (handle, length, offset64): the one decoder
/// of a segment's bytes, for the reader above and for walks over lists
/// the decoder has already bounds-checked.
#[inline]
pub(crate) fn segment_from(b: &[u8; SEGMENT_LEN]) -> Segment {
    let [h0, h1, h2, h3, l0, l1, l2, l3, o0, o1, o2, o3, o4, o5, o6, o7] = *b;
    Segment {
        handle: u32::from_be_bytes([h0, h1, h2, h3]),
        length: u32::from_be_bytes([l0, l1, l2, l3]),
        offset: u64::from_be_bytes([o0, o1, o2, o3, o4, o5, o6, o7]),
    }
}

/// Writes one segment (handle, length, then the offset's high and low
/// words: XDR "unsigned hyper") with one bounds check.
#[inline]
pub(crate) fn write_segment(w: &mut XdrWriter<'_>, s: &Segment) -> Result<(), XdrError> {
    w.write_words(s.words())
}

/// The wire bytes of segment `s` with the length `length`: the encoder's
/// twin of [`segment_from`].
#[inline]
fn segment_bytes(s: &Segment, length: u32) -> [u8; SEGMENT_LEN] {
    let words = (u128::from(s.handle) << 96) | (u128::from(length) << 64) | u128::from(s.offset);
    words.to_be_bytes()
}

/// Writes a chunk its list says is there: the discriminator 1, `count`
/// (the number of `segs`) and the segments, each with the length
/// `length` gives it, with one bounds check for the whole chunk.
#[inline]
pub(crate) fn write_present_chunk(
    w: &mut XdrWriter<'_>,
    segs: &[Segment],
    count: u32,
    mut length: impl FnMut(&Segment) -> u32,
) -> Result<(), XdrError> {
    let len = segs
        .len()
        .checked_mul(SEGMENT_LEN)
        .and_then(|n| n.checked_add(8))
        .ok_or(XdrError::Overflow)?;
    let Some((head, body)) = w.reserve(len)?.split_first_chunk_mut::<8>() else {
        return Err(XdrError::NoSpace);
    };
    *head = ((1u64 << 32) | u64::from(count)).to_be_bytes();
    for (out, s) in body.chunks_exact_mut(SEGMENT_LEN).zip(segs) {
        out.copy_from_slice(&segment_bytes(s, length(s)));
    }
    Ok(())
}

/// Sum of the lengths of the segments encoded in `bytes` (whole segments
/// only: a partial one at the end is ignored), or `None` if it overflows
/// `u32`. Reads only the length words, each at a fixed offset in its
/// segment, with one bound check per segment.
#[inline]
pub(crate) fn sum_segment_lengths(bytes: &[u8]) -> Option<u32> {
    let mut total: u32 = 0;
    let mut rest = bytes;
    while let Some((seg, next)) = rest.split_first_chunk::<SEGMENT_LEN>() {
        let [_, _, _, _, a, b, c, d, ..] = *seg;
        total = total.checked_add(u32::from_be_bytes([a, b, c, d]))?;
        rest = next;
    }
    Some(total)
}

/// A validated Read list, borrowed from the received header.
///
/// Holds the raw list items (each discriminator + position + segment,
/// without the terminating zero) and re-decodes them on iteration, so no
/// storage is needed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadList<'a> {
    pub(crate) bytes: &'a [u8],
    pub(crate) count: u32,
}

impl<'a> ReadList<'a> {
    /// Number of Read segments in the list.
    pub const fn len(&self) -> u32 {
        self.count
    }

    /// Whether the list is empty.
    pub const fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Iterates over the Read segments in wire order.
    pub fn iter(&self) -> ReadSegments<'a> {
        ReadSegments {
            rest: self.bytes,
            left: self.count,
        }
    }

    /// Whether any segment has position zero (a "call" chunk).
    pub fn has_call_chunk(&self) -> bool {
        self.iter().any(|s| s.position == 0)
    }
}

/// Iterator over a [`ReadList`].
#[derive(Clone, Debug)]
pub struct ReadSegments<'a> {
    /// The items not yet yielded: whole items, read with one bound check
    /// each.
    rest: &'a [u8],
    left: u32,
}

impl Iterator for ReadSegments<'_> {
    type Item = ReadSegment;

    fn next(&mut self) -> Option<ReadSegment> {
        self.left = self.left.checked_sub(1)?;
        let (item, rest) = self.rest.split_first_chunk::<READ_ITEM_LEN>()?;
        self.rest = rest;
        // The "present" discriminator, already validated as 1, then the
        // position and the segment.
        let [_, _, _, _, p0, p1, p2, p3, segment @ ..] = item;
        Some(ReadSegment {
            position: u32::from_be_bytes([*p0, *p1, *p2, *p3]),
            segment: segment_from(segment),
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = usize::try_from(self.left).unwrap_or(usize::MAX);
        (0, Some(n))
    }
}

/// A validated Write or Reply chunk (a counted array of segments),
/// borrowed from the received header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteChunk<'a> {
    pub(crate) bytes: &'a [u8],
    pub(crate) count: u32,
    pub(crate) length: u32,
}

impl<'a> WriteChunk<'a> {
    /// Number of segments in the chunk (never zero once validated).
    pub const fn segment_count(&self) -> u32 {
        self.count
    }

    /// Sum of the segment lengths (validated not to overflow `u32`).
    pub const fn total_length(&self) -> u32 {
        self.length
    }

    /// Iterates over the segments in wire order.
    pub fn segments(&self) -> Segments<'a> {
        Segments {
            rest: self.bytes,
            left: self.count,
        }
    }
}

/// Iterator over the segments of a [`WriteChunk`].
#[derive(Clone, Debug)]
pub struct Segments<'a> {
    /// The segments not yet yielded, read with one bound check each.
    rest: &'a [u8],
    left: u32,
}

impl Iterator for Segments<'_> {
    type Item = Segment;

    fn next(&mut self) -> Option<Segment> {
        self.left = self.left.checked_sub(1)?;
        let (segment, rest) = self.rest.split_first_chunk::<SEGMENT_LEN>()?;
        self.rest = rest;
        Some(segment_from(segment))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = usize::try_from(self.left).unwrap_or(usize::MAX);
        (0, Some(n))
    }
}

/// A validated Write list, borrowed from the received header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteList<'a> {
    pub(crate) bytes: &'a [u8],
    pub(crate) count: u32,
    /// Sum of the lengths of every chunk's segments, saturated at
    /// `u32::MAX`.
    pub(crate) length: u32,
    /// Number of segments of every chunk, saturated at `u32::MAX`.
    pub(crate) segments: u32,
}

impl<'a> WriteList<'a> {
    /// Number of Write chunks in the list.
    pub const fn len(&self) -> u32 {
        self.count
    }

    /// Whether the list is empty.
    pub const fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Sum of the lengths of every chunk, saturated at `u32::MAX` (each
    /// chunk's own is validated not to overflow): what a reply says the
    /// server wrote.
    pub const fn total_length(&self) -> u32 {
        self.length
    }

    /// Number of segments of every chunk, saturated at `u32::MAX`.
    pub const fn segment_count(&self) -> u32 {
        self.segments
    }

    /// Iterates over the Write chunks in wire order.
    pub fn iter(&self) -> WriteChunks<'a> {
        WriteChunks {
            rest: self.bytes,
            left: self.count,
        }
    }
}

/// Iterator over the chunks of a [`WriteList`].
#[derive(Clone, Debug)]
pub struct WriteChunks<'a> {
    /// The chunks not yet yielded.
    rest: &'a [u8],
    left: u32,
}

impl<'a> Iterator for WriteChunks<'a> {
    type Item = WriteChunk<'a>;

    fn next(&mut self) -> Option<WriteChunk<'a>> {
        self.left = self.left.checked_sub(1)?;
        // Discriminator (validated as 1), then the counted array.
        let ([_, _, _, _, c0, c1, c2, c3], rest) = self.rest.split_first_chunk::<8>()?;
        let count = u32::from_be_bytes([*c0, *c1, *c2, *c3]);
        let len = usize::try_from(count).ok()?.checked_mul(SEGMENT_LEN)?;
        let (bytes, rest) = rest.split_at_checked(len)?;
        self.rest = rest;
        let length = sum_segment_lengths(bytes)?;
        Some(WriteChunk {
            bytes,
            count,
            length,
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = usize::try_from(self.left).unwrap_or(usize::MAX);
        (0, Some(n))
    }
}

/// The three chunk lists of an `RDMA_MSG`, `RDMA_NOMSG` or `RDMA_MSGP`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChunkLists<'a> {
    /// The Read list.
    pub read: ReadList<'a>,
    /// The Write list.
    pub write: WriteList<'a>,
    /// The Reply chunk, if present.
    pub reply: Option<WriteChunk<'a>>,
}

/// The procedure-specific part of a decoded header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Body<'a> {
    /// `RDMA_MSG`: chunk lists, then the RPC message inline.
    Msg {
        /// The chunk lists.
        chunks: ChunkLists<'a>,
        /// The inline RPC message (everything after the header).
        payload: &'a [u8],
    },
    /// `RDMA_NOMSG`: chunk lists only; the RPC message is in a chunk.
    NoMsg {
        /// The chunk lists.
        chunks: ChunkLists<'a>,
        /// Bytes after the header; RFC 8166 has none here, and they are
        /// ignored (like the C code does).
        trailing: &'a [u8],
    },
    /// `RDMA_MSGP` (RFC 5666): decoded so it can be reported, but the
    /// direction-specific entry points reject it.
    Msgp {
        /// Requested alignment of the padded data.
        align: u32,
        /// Padding threshold.
        thresh: u32,
        /// The chunk lists.
        chunks: ChunkLists<'a>,
        /// Bytes after the header.
        payload: &'a [u8],
    },
    /// `RDMA_DONE` (RFC 5666): no body.
    Done,
    /// `RDMA_ERROR`.
    Error(ErrorBody),
}

impl<'a> Body<'a> {
    /// The chunk lists and inline RPC message of a Call the server works
    /// on: `RDMA_MSG` carries the message inline, `RDMA_NOMSG` none (it
    /// comes in the call chunk; trailing bytes are ignored). `None` for
    /// every other procedure.
    pub fn chunks_and_inline(&self) -> Option<(&ChunkLists<'a>, &'a [u8])> {
        match self {
            Body::Msg { chunks, payload } => Some((chunks, payload)),
            Body::NoMsg { chunks, .. } => Some((chunks, &[])),
            _ => None,
        }
    }
}

/// A decoded transport header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header<'a> {
    /// Transaction ID, in host order (the C code keeps it big-endian).
    pub xid: u32,
    /// Protocol version (always [`RPCRDMA_VERSION`] once decoded).
    pub vers: u32,
    /// Credit value: requested (in a call) or granted (in a reply).
    pub credits: u32,
    /// Procedure and body.
    pub body: Body<'a>,
    /// Length of the transport header in bytes.
    pub header_len: usize,
}

impl Header<'_> {
    /// The procedure of this header.
    pub const fn proc_(&self) -> Proc {
        match self.body {
            Body::Msg { .. } => Proc::Msg,
            Body::NoMsg { .. } => Proc::NoMsg,
            Body::Msgp { .. } => Proc::Msgp,
            Body::Done => Proc::Done,
            Body::Error(_) => Proc::Error,
        }
    }

    /// The chunk lists, for procedures that carry them.
    pub const fn chunks(&self) -> Option<&ChunkLists<'_>> {
        match &self.body {
            Body::Msg { chunks, .. } | Body::NoMsg { chunks, .. } | Body::Msgp { chunks, .. } => {
                Some(chunks)
            }
            Body::Done | Body::Error(_) => None,
        }
    }
}

/// Limits the decoder enforces on untrusted input.
///
/// The decoder is a contract: a header that decodes successfully under
/// these limits is safe to hand to code that builds RDMA Reads and Writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeLimits {
    /// Maximum segments in one Write or Reply chunk (C: `rc_maxpages`).
    pub max_segments_per_chunk: u32,
    /// Maximum number of Read segments, and separately of Write chunks.
    /// The C server bounds these only by header space; a bound here keeps
    /// the position checks' work small.
    pub max_chunks: u32,
    /// Maximum total bytes of all Read segments (C: `rc_maxpages <<
    /// PAGE_SHIFT`, checked page-aligned, which is the same bound).
    pub max_payload: u32,
    /// Largest received message accepted (the receive buffer size, i.e.
    /// the inline threshold this side advertised).
    pub max_inline: u32,
}

impl DecodeLimits {
    /// Limits like the C server's for a given maximum payload: pages of
    /// payload plus the slack `svc_serv_maxpages()` adds, with 4 KiB pages.
    pub const fn server(max_payload: u32, max_inline: u32) -> Self {
        // Round up to pages; cannot overflow.
        let pages = max_payload.div_ceil(4096);
        let maxpages = pages.saturating_add(3);
        Self {
            max_segments_per_chunk: maxpages,
            max_chunks: 64,
            max_payload: maxpages.saturating_mul(4096),
            max_inline,
        }
    }

    /// Defaults matching a Linux 7.3 server with 4 KiB pages: 4 MiB
    /// payload and the 4 KiB inline threshold.
    pub const fn server_default() -> Self {
        Self::server(4 * 1024 * 1024, RPCRDMA_DEF_INLINE)
    }

    /// Defaults for a client decoding replies: the Linux client uses at
    /// most 16 segments per chunk (`RPCRDMA_MAX_HDR_SEGS`) and one chunk.
    pub const fn client_default() -> Self {
        Self::client(RPCRDMA_DEF_INLINE)
    }

    /// A client's limits with receive buffers of `max_inline` bytes (its
    /// `max_inline_read`, up to [`RPCRDMA_MAX_INLINE`]): a Reply may fill
    /// the whole buffer.
    pub const fn client(max_inline: u32) -> Self {
        Self {
            max_segments_per_chunk: 16,
            max_chunks: 1,
            max_payload: 1024 * 1024 + 4096,
            max_inline,
        }
    }

    /// The same with up to `max_segments` segments per chunk: a Reply
    /// echoes the Write chunk the client sent, and `memreg=physical` sends
    /// more than 16 (one per page).
    pub const fn with_segments(self, max_segments: u32) -> Self {
        Self {
            max_segments_per_chunk: max_segments,
            ..self
        }
    }
}

/// Why a header was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// The message ended inside the header.
    Truncated,
    /// The message is longer than [`DecodeLimits::max_inline`].
    TooLong,
    /// `vers` is not [`RPCRDMA_VERSION`].
    BadVersion(u32),
    /// `proc` is not a known procedure.
    UnknownProc(u32),
    /// A known procedure this side does not accept: `RDMA_MSGP` anywhere,
    /// `RDMA_DONE`/`RDMA_ERROR` as a call, `RDMA_DONE` as a reply.
    UnsupportedProc(Proc),
    /// A list discriminator or optional-data flag was not 0 or 1.
    BadDiscriminator(u32),
    /// More Read segments than [`DecodeLimits::max_chunks`].
    TooManyReadSegments,
    /// More Write chunks than [`DecodeLimits::max_chunks`].
    TooManyWriteChunks,
    /// A Write or Reply chunk has more segments than allowed.
    TooManySegments,
    /// A Write or Reply chunk has no segments.
    ZeroSegments,
    /// A segment count cannot fit in the remaining bytes.
    CountExceedsBuffer,
    /// A non-zero Read position is not a multiple of 4.
    MisalignedPosition(u32),
    /// A Read chunk lies beyond the inline data (or the call chunk).
    PositionOutOfRange(u32),
    /// Two Read chunks overlap in the XDR stream.
    OverlappingReadChunks,
    /// A length sum overflowed.
    LengthOverflow,
    /// Read segments add up to more than [`DecodeLimits::max_payload`].
    PayloadTooLarge,
    /// `RDMA_NOMSG` call without a position-zero Read chunk.
    MissingCallChunk,
    /// Position-zero Read chunk in an `RDMA_MSG` call.
    UnexpectedCallChunk,
    /// A chunk list a reply must not carry (Read list in a reply, Reply
    /// chunk in an `RDMA_MSG` reply, Write list in an `RDMA_NOMSG` reply,
    /// more than one Write chunk).
    UnexpectedChunk,
    /// `RDMA_NOMSG` reply without a Reply chunk.
    MissingReplyChunk,
}

/// What a responder should do about a rejected call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorAction {
    /// Reply `RDMA_ERROR` / `ERR_VERS`.
    ErrVers,
    /// Reply `RDMA_ERROR` / `ERR_CHUNK`.
    ErrChunk,
    /// Drop silently (C does this for `RDMA_DONE` and `RDMA_ERROR` calls).
    Drop,
}

impl DecodeError {
    /// The response this error calls for (C `svc_rdma_send_error_msg`:
    /// `-EPROTONOSUPPORT` gives `ERR_VERS`, everything else `ERR_CHUNK`,
    /// and `RDMA_DONE`/`RDMA_ERROR` calls are dropped).
    pub const fn action(&self) -> ErrorAction {
        match self {
            Self::BadVersion(_) => ErrorAction::ErrVers,
            Self::UnsupportedProc(Proc::Done) | Self::UnsupportedProc(Proc::Error) => {
                ErrorAction::Drop
            }
            _ => ErrorAction::ErrChunk,
        }
    }

    /// A short, stable name for logs and tracepoints.
    pub const fn name(&self) -> &'static str {
        match self {
            Self::Truncated => "truncated",
            Self::TooLong => "too-long",
            Self::BadVersion(_) => "bad-version",
            Self::UnknownProc(_) => "unknown-proc",
            Self::UnsupportedProc(_) => "unsupported-proc",
            Self::BadDiscriminator(_) => "bad-discriminator",
            Self::TooManyReadSegments => "too-many-read-segments",
            Self::TooManyWriteChunks => "too-many-write-chunks",
            Self::TooManySegments => "too-many-segments",
            Self::ZeroSegments => "zero-segments",
            Self::CountExceedsBuffer => "count-exceeds-buffer",
            Self::MisalignedPosition(_) => "misaligned-position",
            Self::PositionOutOfRange(_) => "position-out-of-range",
            Self::OverlappingReadChunks => "overlapping-read-chunks",
            Self::LengthOverflow => "length-overflow",
            Self::PayloadTooLarge => "payload-too-large",
            Self::MissingCallChunk => "missing-call-chunk",
            Self::UnexpectedCallChunk => "unexpected-call-chunk",
            Self::UnexpectedChunk => "unexpected-chunk",
            Self::MissingReplyChunk => "missing-reply-chunk",
        }
    }
}

impl From<XdrError> for DecodeError {
    fn from(e: XdrError) -> Self {
        match e {
            XdrError::Truncated | XdrError::NoSpace => Self::Truncated,
            XdrError::Overflow => Self::LengthOverflow,
            XdrError::BadBool(v) => Self::BadDiscriminator(v),
            XdrError::TooLong => Self::TooManySegments,
        }
    }
}
