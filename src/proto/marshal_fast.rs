// SPDX-License-Identifier: GPL-2.0

//! The client's one-pass plan and header for the calls it nearly always
//! sends (C `rpcrdma_marshal_req` handles them with a few comparisons and
//! `xdr_stream` words):
//!
//! - the whole Call inline, pulled up into the Send buffer, and the Reply
//!   inline (GETATTR, LOOKUP, ACCESS, a short WRITE);
//! - the same Call, and the Reply's page data through one Write chunk (a
//!   READ, a READDIR);
//! - a Call whose page data goes as one Read chunk, the rest inline, and
//!   whose Reply is inline (a WRITE too long to go inline).
//!
//! [`plan_fast`] and [`plan_fast_read`] recognise them with the general
//! planner's own tests and return what [`plan`](super::planner::plan)
//! would decide for them; for every other shape they return `None`, never a
//! plan of their own, and the general planner decides. [`FastLimits::plan`]
//! recognises those whose chunk one MR maps by a few comparisons against
//! limits worked out once per connection, and returns what they would.
//! [`encode_fast_header`] and [`encode_fast_read_header`] write their
//! transport headers word by word, byte for byte what
//! [`encode_header`](super::encode::encode_header) writes for the same
//! header. The host property test `marshal_fast` holds all five to that.

use super::msg::{Proc, Segment, HDRLEN_MIN, RPCRDMA_VERSION, SEGMENT_LEN};
use super::planner::{
    args_inline, nonpayload_inline, page_list_segments, read_chunk_tail, read_chunk_tail_len,
    results_inline, RpcShape, TransportParams, MIN_SEND_SGES,
};
use super::xdr::XdrWriter;

/// Transport header bytes a Read list entry takes: discriminator,
/// position, and the segment.
const READ_ENTRY_LEN: u32 = 4 + 4 + SEGMENT_LEN as u32;

/// How the Reply of a call in one of the common shapes comes back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FastResult {
    /// The whole Reply fits inline.
    Inline,
    /// The Reply's page data lands through one Write chunk.
    WriteChunk {
        /// Segments, including the write-pad segment.
        segments: u32,
        /// A 4-byte pad segment follows the page data's.
        write_pad: bool,
    },
}

/// The plan of a call in one of the common shapes: the Call goes inline,
/// pulled up (C `rpcrdma_noch_pullup`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FastPlan {
    /// How the Reply comes back.
    pub result: FastResult,
    /// The Call's length, all of it in the Send behind the header.
    pub call_len: u32,
    /// Exact transport header length in bytes.
    pub header_len: u32,
}

/// Transport header bytes of an `RDMA_MSG` without chunks: xid, version,
/// credits, procedure and the three empty lists.
const PLAIN_HEADER_LEN: u32 = HDRLEN_MIN as u32;

/// The plan of `shape` if it is one of the common shapes and `page_len`
/// of its Call is below `pullup_max` (longer page data may be mapped
/// instead of pulled up, which the general path decides); `None`
/// otherwise.
#[inline]
pub fn plan_fast(shape: &RpcShape, p: &TransportParams, pullup_max: u32) -> Option<FastPlan> {
    let send = &shape.send;
    if send.page_len >= pullup_max {
        return None;
    }
    let call_len = send.len()?;
    // `plan`'s `InlinePullup`: the Call fits inline and is shorter than
    // the Send buffer.
    if call_len >= shape.send_buf_len || !args_inline(send, p).ok()? {
        return None;
    }
    let recv = &shape.recv;
    let (result, header_len) = if results_inline(recv, p) {
        (FastResult::Inline, PLAIN_HEADER_LEN)
    } else if shape.ddp_allowed && shape.recv_ddp && recv.page_len > 0 && nonpayload_inline(recv, p)
    {
        let write_pad = recv.page_len & 3 != 0;
        let segments = page_list_segments(recv, p)
            .ok()?
            .checked_add(u32::from(write_pad))?;
        if segments > p.max_rdma_segs {
            return None;
        }
        // Discriminator, count, segments; the list's terminator is among
        // the plain header's words.
        let chunk = segments.checked_mul(SEGMENT_LEN as u32)?.checked_add(8)?;
        let header_len = PLAIN_HEADER_LEN.checked_add(chunk)?;
        (
            FastResult::WriteChunk {
                segments,
                write_pad,
            },
            header_len,
        )
    } else {
        return None;
    };
    if header_len.checked_add(call_len)? > p.inline_send {
        return None;
    }
    Some(FastPlan {
        result,
        call_len,
        header_len,
    })
}

/// The plan of a Call whose page data goes as one Read chunk at the end of
/// its head, with its Reply inline (C `rpcrdma_marshal_req` with
/// `rpcrdma_readch` and `rpcrdma_noch`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FastReadPlan {
    /// The Read chunk's XDR position: the head's length.
    pub position: u32,
    /// Segments of the Read chunk.
    pub segments: u32,
    /// The inline bytes behind the header: the head, and the tail without
    /// the page data's XDR pad when it holds more than that pad.
    pub inline_len: u32,
    /// Exact transport header length in bytes.
    pub header_len: u32,
}

/// The plan of `shape` if its Call takes a Read chunk and its Reply comes
/// back inline, as the general planner would decide; `None` otherwise
/// (also where the general planner would fall back to a long call).
#[inline]
pub fn plan_fast_read(shape: &RpcShape, p: &TransportParams) -> Option<FastReadPlan> {
    let send = &shape.send;
    // `plan`'s `ReadChunk`: DDP allowed and asked for, page data behind a
    // head, and a Call that does not fit inline.
    if !(shape.ddp_allowed && shape.send_ddp && send.page_len > 0 && send.head_len > 0) {
        return None;
    }
    if args_inline(send, p).ok()? || !results_inline(&shape.recv, p) {
        return None;
    }
    let segments = page_list_segments(send, p).ok()?;
    let header_len = segments
        .checked_mul(READ_ENTRY_LEN)?
        .checked_add(PLAIN_HEADER_LEN)?;
    let inline_len = send.head_len.checked_add(read_chunk_tail(send))?;
    if header_len.checked_add(inline_len)? > p.inline_send {
        return None;
    }
    Some(FastReadPlan {
        position: send.head_len,
        segments,
        inline_len,
        header_len,
    })
}

/// The lengths of a Call and of its Reply buffer that [`FastLimits::plan`]
/// reads: the few words of the request's two `xdr_buf`s a common call is
/// recognised by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CallSketch {
    /// The Call's head (`rq_snd_buf.head[0].iov_len`).
    pub send_head_len: u32,
    /// Where the Call's page data starts in its page array
    /// (`page_base`).
    pub send_page_base: u32,
    /// The Call's page data.
    pub send_page_len: u32,
    /// The Call's tail.
    pub send_tail_len: u32,
    /// The Call's page data may be sent by DDP (C `XDRBUF_WRITE`).
    pub send_ddp: bool,
    /// The most the Reply buffer holds (`rq_rcv_buf.buflen`).
    pub recv_buflen: u32,
    /// The Reply buffer's head.
    pub recv_head_len: u32,
    /// Where the Reply's page data goes in its page array.
    pub recv_page_base: u32,
    /// The Reply buffer's page data.
    pub recv_page_len: u32,
    /// The Reply buffer's tail.
    pub recv_tail_len: u32,
    /// The Reply's page data may be received by DDP (C `XDRBUF_READ`).
    pub recv_ddp: bool,
}

impl From<&RpcShape> for CallSketch {
    fn from(s: &RpcShape) -> Self {
        Self {
            send_head_len: s.send.head_len,
            send_page_base: s.send.page_base,
            send_page_len: s.send.page_len,
            send_tail_len: s.send.tail_len,
            send_ddp: s.send_ddp,
            recv_buflen: s.recv.buflen,
            recv_head_len: s.recv.head_len,
            recv_page_base: s.recv.page_base,
            recv_page_len: s.recv.page_len,
            recv_tail_len: s.recv.tail_len,
            recv_ddp: s.recv_ddp,
        }
    }
}

/// A call of a common shape as [`FastLimits::plan`] recognised it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommonPlan {
    /// What [`plan_fast`] plans for it.
    Pullup(FastPlan),
    /// What [`plan_fast_read`] plans for it ([`plan_fast`] takes none).
    ReadChunk(FastReadPlan),
}

/// A connection's parameters as the common calls' test compares against
/// them, worked out once (C keeps `re_max_inline_send` and
/// `re_max_inline_recv` likewise): the test is then a handful of
/// comparisons where [`plan_fast`] works every threshold out again.
///
/// # Invariants
///
/// Built only from parameters [`plan_fast`] and [`plan_fast_read`] accept:
/// a power-of-two page size, a non-zero MR depth, room for the minimum
/// Send SGEs and for a two-segment Write chunk. `call_max` is below the
/// Send buffer's size and at most the largest inline Call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FastLimits {
    /// The negotiated inline send size.
    inline_send: u32,
    /// The longest Call that goes inline and pulled up.
    call_max: u32,
    /// The largest Reply received inline.
    max_inline_recv: u32,
    /// The largest Call sent inline ([`TransportParams::max_inline_send`]).
    max_inline_send: u32,
    /// log2 of the page size, and the in-page offset's mask.
    page_shift: u32,
    page_mask: u32,
    /// Pages one MR maps: one segment covers at most this many.
    depth: u32,
}

/// Transport header bytes of an `RDMA_MSG` with a Write list of one chunk
/// of one segment: the plain header, the list's discriminator, the chunk's
/// count and its segment (the list's terminator is among the plain
/// header's words).
const WRITE_ONE_HEADER_LEN: u32 = PLAIN_HEADER_LEN + 8 + SEGMENT_LEN as u32;

/// [`WRITE_ONE_HEADER_LEN`] with the write-pad segment behind the one.
const WRITE_PADDED_HEADER_LEN: u32 = WRITE_ONE_HEADER_LEN + SEGMENT_LEN as u32;

/// Transport header bytes of an `RDMA_MSG` with a Read list of one
/// segment.
const READ_ONE_HEADER_LEN: u32 = PLAIN_HEADER_LEN + READ_ENTRY_LEN;

impl FastLimits {
    /// The limits of a connection with parameters `p` whose Calls are
    /// pulled up into a Send buffer of `send_buf_len` bytes, or `None`
    /// where the common calls' test would not be [`plan_fast`]'s (every
    /// call then takes the planner's way).
    pub fn new(p: &TransportParams, send_buf_len: u32) -> Option<Self> {
        let ps = p.page_size;
        if ps == 0
            || !ps.is_power_of_two()
            || p.max_fr_depth == 0
            || p.max_send_sge < MIN_SEND_SGES
            || p.max_rdma_segs < 2
        {
            return None;
        }
        let max_inline_send = p.max_inline_send();
        Some(Self {
            inline_send: p.inline_send,
            call_max: send_buf_len.checked_sub(1)?.min(max_inline_send),
            max_inline_recv: p.max_inline_recv(),
            max_inline_send,
            page_shift: ps.trailing_zeros(),
            // No overflow: `ps` is not zero.
            page_mask: ps.wrapping_sub(1),
            depth: p.max_fr_depth,
        })
    }

    /// Pages touched by `len` bytes starting `base` bytes into a page
    /// list, or `None` where `base + len` overflows (where
    /// [`page_list_segments`] walks instead).
    #[inline(always)]
    fn pages_touched(&self, base: u32, len: u32) -> Option<u32> {
        base.checked_add(len)?;
        let mask = self.page_mask;
        // No overflow: the sum is at most `base + len`, checked above; nor
        // below, where a page of more than a byte halves the first term.
        let span = (base & mask).wrapping_add(len);
        Some((span >> self.page_shift).wrapping_add(u32::from(span & mask != 0)))
    }

    /// The plan of a call of one of the common shapes whose chunk, if it
    /// has one, one MR maps: a Call without page data, inline, whose Reply
    /// comes inline or through a Write chunk (a GETATTR, a READ); or a
    /// Call whose page data goes as a Read chunk, whose Reply comes
    /// inline (a WRITE). Where it returns a plan it is [`plan_fast`]'s,
    /// or [`plan_fast_read`]'s where [`plan_fast`] takes none; `None`
    /// leaves the call to them. `ddp_allowed` (C `RPCAUTH_AUTH_DATATOUCH`
    /// clear) is asked only of a call that would place data directly.
    #[inline(always)]
    pub fn plan(&self, c: &CallSketch, ddp_allowed: impl FnOnce() -> bool) -> Option<CommonPlan> {
        if c.send_page_len != 0 {
            return self.plan_read_chunk(c, ddp_allowed);
        }
        let call_len = c.send_head_len.checked_add(c.send_tail_len)?;
        if call_len > self.call_max {
            return None;
        }
        let (result, header_len) = if c.recv_buflen <= self.max_inline_recv {
            (FastResult::Inline, PLAIN_HEADER_LEN)
        } else {
            if !(c.recv_ddp && c.recv_page_len > 0 && ddp_allowed()) {
                return None;
            }
            if c.recv_head_len.checked_add(c.recv_tail_len)? >= self.max_inline_recv {
                return None;
            }
            if self.pages_touched(c.recv_page_base, c.recv_page_len)? > self.depth {
                return None;
            }
            let write_pad = c.recv_page_len & 3 != 0;
            let (segments, header_len) = if write_pad {
                (2, WRITE_PADDED_HEADER_LEN)
            } else {
                (1, WRITE_ONE_HEADER_LEN)
            };
            let result = FastResult::WriteChunk {
                segments,
                write_pad,
            };
            (result, header_len)
        };
        if call_len > self.inline_send.checked_sub(header_len)? {
            return None;
        }
        Some(CommonPlan::Pullup(FastPlan {
            result,
            call_len,
            header_len,
        }))
    }

    /// [`Self::plan`]'s Calls with page data: a Read chunk of one
    /// segment at the end of the head, and an inline Reply.
    #[inline(always)]
    fn plan_read_chunk(
        &self,
        c: &CallSketch,
        ddp_allowed: impl FnOnce() -> bool,
    ) -> Option<CommonPlan> {
        if !c.send_ddp || c.send_head_len == 0 || c.recv_buflen > self.max_inline_recv {
            return None;
        }
        // Too long to go inline: [`plan_fast`] takes none of these.
        let len = c
            .send_head_len
            .checked_add(c.send_page_len)?
            .checked_add(c.send_tail_len)?;
        if len <= self.max_inline_send || !ddp_allowed() {
            return None;
        }
        if self.pages_touched(c.send_page_base, c.send_page_len)? > self.depth {
            return None;
        }
        let header_len = READ_ONE_HEADER_LEN;
        let inline_len = c
            .send_head_len
            .checked_add(read_chunk_tail_len(c.send_tail_len))?;
        if inline_len > self.inline_send.checked_sub(header_len)? {
            return None;
        }
        Some(CommonPlan::ReadChunk(FastReadPlan {
            position: c.send_head_len,
            segments: 1,
            inline_len,
            header_len,
        }))
    }
}

/// Writes the big-endian `word` at byte `at` of `out`.
#[inline(always)]
fn put(out: &mut [u8], at: usize, word: u32) -> Option<()> {
    *out.get_mut(at..)?.first_chunk_mut::<4>()? = word.to_be_bytes();
    Some(())
}

/// Writes the first four words of an `RDMA_MSG` header: xid, version,
/// credits, procedure, with one bounds check.
#[inline(always)]
fn put_msg_start(out: &mut [u8], xid: u32, credits: u32) -> Option<()> {
    put_words(out, [xid, RPCRDMA_VERSION, credits, Proc::Msg.to_u32()]).map(|_| ())
}

/// Writes `words` big-endian at the start of `out`, with one bounds check;
/// their length in bytes, or `None` when `out` is too short.
#[inline(always)]
fn put_words<const N: usize>(out: &mut [u8], words: [u32; N]) -> Option<usize> {
    let mut w = XdrWriter::new(out);
    w.write_words(words).ok()?;
    Some(w.position())
}

/// Writes at the start of `out` an `RDMA_MSG` header of whole words: xid,
/// version, credits and procedure, then `lists` (its chunk lists), with
/// one bounds check for all of them; the header's length, or `None` when
/// `out` is too short.
#[inline(always)]
fn put_msg_words<const N: usize>(
    out: &mut [u8],
    xid: u32,
    credits: u32,
    lists: [u32; N],
) -> Option<usize> {
    let len = N.checked_mul(4)?.checked_add(16)?;
    let (start, rest) = out.get_mut(..len)?.split_first_chunk_mut::<16>()?;
    put_msg_start(start, xid, credits)?;
    put_words(rest, lists)?;
    Some(len)
}

/// Writes the segment `s` at byte `at` of `out`.
#[inline(always)]
fn put_segment(out: &mut [u8], at: usize, s: &Segment) -> Option<()> {
    let seg = out
        .get_mut(at..at.checked_add(SEGMENT_LEN)?)?
        .first_chunk_mut::<SEGMENT_LEN>()?;
    let (handle, rest) = seg.split_first_chunk_mut::<4>()?;
    let (length, offset) = rest.split_first_chunk_mut::<4>()?;
    *handle = s.handle.to_be_bytes();
    *length = s.length.to_be_bytes();
    *offset.first_chunk_mut::<8>()? = s.offset.to_be_bytes();
    Some(())
}

/// Encodes at the start of `out` the `RDMA_MSG` header of a call in one of
/// the common shapes: no Read list, the Write list empty or holding one
/// chunk of `writes`, no Reply chunk. Returns its length, or `None` when
/// `out` is too short.
#[inline]
pub fn encode_fast_header(
    xid: u32,
    credits: u32,
    writes: &[Segment],
    out: &mut [u8],
) -> Option<usize> {
    // The shapes calls take (no chunk; a Write chunk of one MR, with or
    // without the write pad) as whole words, with one bounds check.
    match writes {
        [] => return put_msg_words(out, xid, credits, [0, 0, 0]),
        [a] => {
            let [a0, a1, a2, a3] = a.words();
            return put_msg_words(out, xid, credits, [0, 1, 1, a0, a1, a2, a3, 0, 0]);
        }
        [a, b] => {
            let [a0, a1, a2, a3] = a.words();
            let [b0, b1, b2, b3] = b.words();
            let lists = [0, 1, 2, a0, a1, a2, a3, b0, b1, b2, b3, 0, 0];
            return put_msg_words(out, xid, credits, lists);
        }
        _ => {}
    }
    put_msg_start(out, xid, credits)?;
    // No Read list.
    put(out, 16, 0)?;
    let mut at = 20usize;
    if !writes.is_empty() {
        put(out, at, 1)?;
        put(out, at.checked_add(4)?, u32::try_from(writes.len()).ok()?)?;
        at = at.checked_add(8)?;
        for s in writes {
            put_segment(out, at, s)?;
            at = at.checked_add(SEGMENT_LEN)?;
        }
    }
    // The Write list's terminator, then no Reply chunk.
    put(out, at, 0)?;
    put(out, at.checked_add(4)?, 0)?;
    at.checked_add(8)
}

/// Encodes at the start of `out` the `RDMA_MSG` header of a call whose
/// Read list is one chunk of `reads` at `position`, with no Write list and
/// no Reply chunk. Returns its length, or `None` when `out` is too short.
#[inline]
pub fn encode_fast_read_header(
    xid: u32,
    credits: u32,
    position: u32,
    reads: &[Segment],
    out: &mut [u8],
) -> Option<usize> {
    // The usual WRITE: one segment, its header as whole words with one
    // bounds check (the loop below checks each word it writes).
    if let [a] = reads {
        let [a0, a1, a2, a3] = a.words();
        return put_msg_words(out, xid, credits, [1, position, a0, a1, a2, a3, 0, 0, 0]);
    }
    put_msg_start(out, xid, credits)?;
    let mut at = 16usize;
    for s in reads {
        put(out, at, 1)?;
        put(out, at.checked_add(4)?, position)?;
        put_segment(out, at.checked_add(8)?, s)?;
        at = at.checked_add(READ_ENTRY_LEN as usize)?;
    }
    // The Read list's terminator, an empty Write list, no Reply chunk.
    put(out, at, 0)?;
    put(out, at.checked_add(4)?, 0)?;
    put(out, at.checked_add(8)?, 0)?;
    at.checked_add(12)
}
