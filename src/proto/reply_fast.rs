// SPDX-License-Identifier: GPL-2.0

//! The client's one-pass decoder of the replies it nearly always gets
//! (C `rpcrdma_reply_handler` decodes them with a handful of
//! `xdr_inline_decode`s):
//!
//! - `RDMA_MSG` without chunks: an inline reply;
//! - `RDMA_MSG` with one Write chunk: a READ's data was written;
//! - `RDMA_NOMSG` with a Reply chunk: the reply was written.
//!
//! Each is recognised from fixed words and decoded with every bound of
//! [`decode_reply`](super::decode::decode_reply) still checked, straight
//! into the same [`Header`]. Anything else (errors, backchannel shapes,
//! malformed or oversized headers, another chunk where none may be) is
//! left to the general decoder: [`decode_reply_fast`] returns `None`, never
//! an error of its own, so what it accepts is exactly what the general
//! decoder accepts with the same result, and what it leaves is judged by
//! that decoder. The host property test `reply_fast` holds it to that.

use super::msg::sum_segment_lengths;
use super::msg::Body;
use super::msg::ChunkLists;
use super::msg::DecodeLimits;
use super::msg::Header;
use super::msg::Proc;
use super::msg::WriteChunk;
use super::msg::WriteList;
use super::msg::ONE_SEGMENT_HEADER_LEN;
use super::msg::ONE_SEGMENT_HEADER_WORDS;
use super::msg::RPCRDMA_VERSION;
use super::msg::SEGMENT_LEN;
use super::xdr::XdrReader;

/// The big-endian word at byte `at` of `buf`.
#[inline(always)]
fn word(buf: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(*buf.get(at..)?.first_chunk::<4>()?))
}

/// A counted array of segments at byte `at` (the count word first), as
/// the general decoder's `decode_write_chunk` accepts it; and where it
/// ends.
#[inline(always)]
fn write_chunk<'a>(
    buf: &'a [u8],
    at: usize,
    limits: &DecodeLimits,
) -> Option<(WriteChunk<'a>, usize)> {
    let count = word(buf, at)?;
    if count == 0 || count > limits.max_segments_per_chunk {
        return None;
    }
    let start = at.checked_add(4)?;
    let len = usize::try_from(count).ok()?.checked_mul(SEGMENT_LEN)?;
    let end = start.checked_add(len)?;
    let bytes = buf.get(start..end)?;
    let length = sum_segment_lengths(bytes)?;
    Some((
        WriteChunk {
            bytes,
            count,
            length,
        },
        end,
    ))
}

/// Decodes `buf` in one pass if it is one of the common reply shapes;
/// `None` leaves it to [`decode_reply`](super::decode::decode_reply).
// Always inlined: the client's reply handler is compiled once per
// registration strategy kind, and with two callers the compiler called it
// out of line and copied its result (23 instructions more a reply, kcount).
#[inline(always)]
pub fn decode_reply_fast<'a>(buf: &'a [u8], limits: &DecodeLimits) -> Option<Header<'a>> {
    if buf.len() > usize::try_from(limits.max_inline).ok()? {
        return None;
    }
    let xid = word(buf, 0)?;
    let credits = word(buf, 8)?;
    if word(buf, 4)? != RPCRDMA_VERSION || word(buf, 16)? != 0 {
        // Another version, or a Read list: not a reply we expect.
        return None;
    }
    let (body, end) = match (Proc::from_u32(word(buf, 12)?)?, word(buf, 20)?) {
        // RDMA_MSG: no Write list, or one Write chunk; no Reply chunk.
        (Proc::Msg, 0) => (ChunkLists::default(), 24),
        (Proc::Msg, 1) if limits.max_chunks >= 1 => {
            if let Some(header) = one_segment(buf, limits, xid, credits) {
                return Some(header);
            }
            let (chunk, end) = write_chunk(buf, 24, limits)?;
            // One chunk only: the Write list ends here.
            if word(buf, end)? != 0 {
                return None;
            }
            let write = WriteList {
                bytes: buf.get(20..end)?,
                count: 1,
                length: chunk.length,
                segments: chunk.count,
            };
            let lists = ChunkLists {
                write,
                ..ChunkLists::default()
            };
            (lists, end.checked_add(4)?)
        }
        // RDMA_NOMSG: no Write list, and a Reply chunk.
        (Proc::NoMsg, 0) => {
            if word(buf, 24)? != 1 {
                return None;
            }
            let (reply, end) = write_chunk(buf, 28, limits)?;
            let lists = ChunkLists {
                reply: Some(reply),
                ..ChunkLists::default()
            };
            return Some(Header {
                xid,
                vers: RPCRDMA_VERSION,
                credits,
                body: Body::NoMsg {
                    chunks: lists,
                    trailing: buf.get(end..)?,
                },
                header_len: end,
            });
        }
        _ => return None,
    };
    // RDMA_MSG: the Reply chunk's absence, then the payload.
    if word(buf, end)? != 0 {
        return None;
    }
    let header_len = end.checked_add(4)?;
    Some(Header {
        xid,
        vers: RPCRDMA_VERSION,
        credits,
        body: Body::Msg {
            chunks: body,
            payload: buf.get(header_len..)?,
        },
        header_len,
    })
}

/// `buf` as an NFS READ's usual reply (its procedure `RDMA_MSG` and its
/// Write list present, checked by the caller, with one chunk allowed):
/// one Write chunk of one segment and nothing else, recognised from its
/// thirteen words at once; `None` leaves it to the general loop of
/// [`decode_reply_fast`], which accepts it the same way. Out of line: the
/// replies without chunks (most metadata) are decoded without its code.
#[inline(never)]
fn one_segment<'a>(
    buf: &'a [u8],
    limits: &DecodeLimits,
    xid: u32,
    credits: u32,
) -> Option<Header<'a>> {
    let mut r = XdrReader::new(buf);
    let w = r.read_words::<ONE_SEGMENT_HEADER_WORDS>().ok()?;
    // Word 6 the segment count, 8 the segment's length, 11 the end of the
    // Write list, 12 the absent Reply chunk.
    let [.., count, _, length, _, _, end, reply] = w;
    if count != 1 || limits.max_segments_per_chunk == 0 || end != 0 || reply != 0 {
        return None;
    }
    let write = WriteList {
        bytes: buf.get(20..44)?,
        count: 1,
        length,
        segments: 1,
    };
    Some(Header {
        xid,
        vers: RPCRDMA_VERSION,
        credits,
        body: Body::Msg {
            chunks: ChunkLists {
                write,
                ..ChunkLists::default()
            },
            payload: r.rest(),
        },
        header_len: ONE_SEGMENT_HEADER_LEN,
    })
}
