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
//! plan of their own, and the general planner decides.
//! [`encode_fast_header`] and [`encode_fast_read_header`] write their
//! transport headers word by word, byte for byte what
//! [`encode_header`](super::encode::encode_header) writes for the same
//! header. The host property test `marshal_fast` holds all four to that.

use super::msg::{Proc, Segment, HDRLEN_MIN, RPCRDMA_VERSION, SEGMENT_LEN};
use super::planner::{
    args_inline, nonpayload_inline, page_list_segments, read_chunk_tail, results_inline, RpcShape,
    TransportParams,
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

/// Writes the big-endian `word` at byte `at` of `out`.
#[inline(always)]
fn put(out: &mut [u8], at: usize, word: u32) -> Option<()> {
    *out.get_mut(at..)?.first_chunk_mut::<4>()? = word.to_be_bytes();
    Some(())
}

/// Writes the first four words of an `RDMA_MSG` header: xid, version,
/// credits, procedure.
#[inline(always)]
fn put_msg_start(out: &mut [u8], xid: u32, credits: u32) -> Option<()> {
    put(out, 0, xid)?;
    put(out, 4, RPCRDMA_VERSION)?;
    put(out, 8, credits)?;
    put(out, 12, Proc::Msg.to_u32())
}

/// Writes `words` big-endian at the start of `out`, with one bounds check;
/// their length in bytes, or `None` when `out` is too short.
#[inline(always)]
fn put_words<const N: usize>(out: &mut [u8], words: [u32; N]) -> Option<usize> {
    let mut w = XdrWriter::new(out);
    w.write_words(words).ok()?;
    Some(w.position())
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
    let msg = Proc::Msg.to_u32();
    // The shapes calls take (no chunk; a Write chunk of one MR, with or
    // without the write pad) as whole words, with one bounds check.
    match writes {
        [] => return put_words(out, [xid, RPCRDMA_VERSION, credits, msg, 0, 0, 0]),
        [a] => {
            let [a0, a1, a2, a3] = a.words();
            return put_words(
                out,
                [
                    xid,
                    RPCRDMA_VERSION,
                    credits,
                    msg,
                    0,
                    1,
                    1,
                    a0,
                    a1,
                    a2,
                    a3,
                    0,
                    0,
                ],
            );
        }
        [a, b] => {
            let [a0, a1, a2, a3] = a.words();
            let [b0, b1, b2, b3] = b.words();
            return put_words(
                out,
                [
                    xid,
                    RPCRDMA_VERSION,
                    credits,
                    msg,
                    0,
                    1,
                    2,
                    a0,
                    a1,
                    a2,
                    a3,
                    b0,
                    b1,
                    b2,
                    b3,
                    0,
                    0,
                ],
            );
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
