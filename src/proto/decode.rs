// SPDX-License-Identifier: GPL-2.0

//! Validating decoder for RPC-over-RDMA v1 transport headers.
//!
//! Three entry points:
//! - [`decode_header`]: direction-neutral; decodes every procedure and
//!   validates all chunk lists against [`DecodeLimits`].
//! - [`decode_call`]: what a responder (server) accepts, mirroring and
//!   tightening C `svc_rdma_xdr_decode_req()`.
//! - [`decode_reply`]: what a requester (client) accepts, mirroring C
//!   `rpcrdma_decode_msg()`/`rpcrdma_decode_nomsg()`/`rpcrdma_decode_error()`.
//!
//! Every check of the C server (`xdr_check_read_list()`,
//! `xdr_check_write_list()`, `xdr_check_reply_chunk()`,
//! `pcl_check_read_chunk_positions()`) is done here, before anything is
//! stored, plus: strict 0/1 list discriminators, a bound on the number of
//! Read segments and Write chunks, overflow-checked Write/Reply chunk
//! lengths, a cap on the received length, and call/reply shape checks.
//! The checks need no storage: Read chunk positions are walked in sorted
//! order by repeated minimum search, bounded by `max_chunks`.

use super::msg::read_segment;
use super::msg::sum_segment_lengths;
use super::msg::Body;
use super::msg::ChunkLists;
use super::msg::DecodeError;
use super::msg::DecodeLimits;
use super::msg::ErrorBody;
use super::msg::Header;
use super::msg::Proc;
use super::msg::ReadList;
use super::msg::WriteChunk;
use super::msg::WriteList;
use super::msg::ERR_CHUNK;
use super::msg::ERR_VERS;
use super::msg::RPCRDMA_VERSION;
use super::msg::SEGMENT_LEN;
use super::xdr::XdrReader;

/// Decodes and validates a transport header of any procedure.
///
/// `buf` must be exactly the received bytes. On success every chunk list in
/// the result satisfies `limits`, and Read chunk positions have been
/// checked against the inline data (or the position-zero chunk).
pub fn decode_header<'a>(buf: &'a [u8], limits: &DecodeLimits) -> Result<Header<'a>, DecodeError> {
    decode_as(buf, limits, |_| Ok(()))
}

/// [`decode_header`] with `accept` judging the body before the header is
/// built: the callers' shape checks run on the decoded lists in place,
/// and the header (about 140 bytes) is written once, into the result.
#[inline(always)]
fn decode_as<'a>(
    buf: &'a [u8],
    limits: &DecodeLimits,
    accept: impl FnOnce(&Body<'a>) -> Result<(), DecodeError>,
) -> Result<Header<'a>, DecodeError> {
    let max_inline = usize::try_from(limits.max_inline).unwrap_or(usize::MAX);
    if buf.len() > max_inline {
        return Err(DecodeError::TooLong);
    }
    let mut r = XdrReader::new(buf);
    if r.remaining() < 16 {
        return Err(DecodeError::Truncated);
    }
    let [xid, vers, credits, proc_word] = r.read_words::<4>()?;
    if vers != RPCRDMA_VERSION {
        return Err(DecodeError::BadVersion(vers));
    }
    let proc_ = Proc::from_u32(proc_word).ok_or(DecodeError::UnknownProc(proc_word))?;
    // The three procedures with chunk lists share one decode of them
    // (written once, so that inlining it costs one copy of the code), and
    // every procedure meets `accept` at one place, so that it is inlined.
    let (body, header_len) = match proc_ {
        Proc::Done => (Body::Done, r.position()),
        Proc::Error => (Body::Error(decode_error_body(&mut r)?), r.position()),
        Proc::Msg | Proc::NoMsg | Proc::Msgp => {
            let msgp = if proc_ == Proc::Msgp {
                let align = r.read_u32()?;
                let thresh = r.read_u32()?;
                Some((align, thresh))
            } else {
                None
            };
            let chunks = decode_chunk_lists(&mut r, limits)?;
            // Inline payload (RDMA_MSG, RDMA_MSGP) or trailing bytes
            // (RDMA_NOMSG).
            let rest = r.rest();
            // Most headers have no Read list: nothing to check, and no
            // call that would need the lists spilled to memory (the list
            // goes by value, so that only it is, when there is one).
            if !chunks.read.is_empty() {
                check_read_positions(chunks.read, rest.len())?;
            }
            let header_len = buf.len().saturating_sub(rest.len());
            let body = match msgp {
                Some((align, thresh)) => Body::Msgp {
                    align,
                    thresh,
                    chunks,
                    payload: rest,
                },
                None if proc_ == Proc::NoMsg => Body::NoMsg {
                    chunks,
                    trailing: rest,
                },
                None => Body::Msg {
                    chunks,
                    payload: rest,
                },
            };
            (body, header_len)
        }
    };
    accept(&body)?;
    Ok(Header {
        xid,
        vers,
        credits,
        body,
        header_len,
    })
}

/// Decodes a call as a responder (server) must.
///
/// On top of [`decode_header`]: only `RDMA_MSG` and `RDMA_NOMSG` are
/// accepted (`RDMA_DONE`/`RDMA_ERROR` yield an error whose
/// [`DecodeError::action`] is `Drop`, `RDMA_MSGP` one that asks for
/// `ERR_CHUNK`, like C); an `RDMA_NOMSG` call must carry a position-zero
/// Read chunk and an `RDMA_MSG` call must not (RFC 8166 §3.5.3; the C
/// server does not check this and would then parse an empty or duplicated
/// RPC message).
pub fn decode_call<'a>(buf: &'a [u8], limits: &DecodeLimits) -> Result<Header<'a>, DecodeError> {
    // C drops RDMA_DONE/RDMA_ERROR "calls" before looking at their
    // bodies; answering a malformed error with an error could make two
    // peers ping-pong, so keep dropping them.
    decode_as(buf, limits, accept_call).map_err(|e| {
        if matches!(e, DecodeError::BadVersion(_)) {
            return e;
        }
        let proc_ = buf
            .get(12..16)
            .and_then(|w| <[u8; 4]>::try_from(w).ok())
            .map(u32::from_be_bytes)
            .and_then(Proc::from_u32);
        match proc_ {
            Some(p @ (Proc::Done | Proc::Error)) => DecodeError::UnsupportedProc(p),
            _ => e,
        }
    })
}

/// The bodies [`decode_call`] accepts.
fn accept_call(body: &Body<'_>) -> Result<(), DecodeError> {
    match body {
        Body::Msg { chunks, .. } => {
            if chunks.read.has_call_chunk() {
                return Err(DecodeError::UnexpectedCallChunk);
            }
        }
        Body::NoMsg { chunks, .. } => {
            if !chunks.read.has_call_chunk() {
                return Err(DecodeError::MissingCallChunk);
            }
        }
        Body::Msgp { .. } => return Err(DecodeError::UnsupportedProc(Proc::Msgp)),
        Body::Done => return Err(DecodeError::UnsupportedProc(Proc::Done)),
        Body::Error(_) => return Err(DecodeError::UnsupportedProc(Proc::Error)),
    }
    Ok(())
}

/// Decodes a reply as a requester (client) must.
///
/// On top of [`decode_header`], like the C client: a reply never carries a
/// Read list and at most one Write chunk; an `RDMA_MSG` reply has no Reply
/// chunk; an `RDMA_NOMSG` reply has a Reply chunk and no Write list;
/// `RDMA_ERROR` is returned for the caller to retire the XID; `RDMA_MSGP`
/// and `RDMA_DONE` are rejected.
pub fn decode_reply<'a>(buf: &'a [u8], limits: &DecodeLimits) -> Result<Header<'a>, DecodeError> {
    decode_as(buf, limits, accept_reply)
}

/// The bodies [`decode_reply`] accepts.
fn accept_reply(body: &Body<'_>) -> Result<(), DecodeError> {
    match body {
        Body::Msg { chunks, .. } => {
            if !chunks.read.is_empty() || chunks.write.len() > 1 || chunks.reply.is_some() {
                return Err(DecodeError::UnexpectedChunk);
            }
        }
        Body::NoMsg { chunks, .. } => {
            if !chunks.read.is_empty() || !chunks.write.is_empty() {
                return Err(DecodeError::UnexpectedChunk);
            }
            if chunks.reply.is_none() {
                return Err(DecodeError::MissingReplyChunk);
            }
        }
        Body::Msgp { .. } => return Err(DecodeError::UnsupportedProc(Proc::Msgp)),
        Body::Done => return Err(DecodeError::UnsupportedProc(Proc::Done)),
        Body::Error(_) => {}
    }
    Ok(())
}

fn decode_error_body(r: &mut XdrReader<'_>) -> Result<ErrorBody, DecodeError> {
    match r.read_u32()? {
        ERR_VERS => {
            let low = r.read_u32()?;
            let high = r.read_u32()?;
            Ok(ErrorBody::Vers { low, high })
        }
        ERR_CHUNK => Ok(ErrorBody::Chunk),
        other => Ok(ErrorBody::Other(other)),
    }
}

/// Decodes the Read list, Write list and Reply chunk.
#[inline(always)]
fn decode_chunk_lists<'a>(
    r: &mut XdrReader<'a>,
    limits: &DecodeLimits,
) -> Result<ChunkLists<'a>, DecodeError> {
    // Most headers have no Read list, and most replies no Write list:
    // their terminating zero is taken here, without a call of the list's
    // decoder (whose result for it is the same empty list).
    let read = if r.take_zero() {
        ReadList::default()
    } else {
        decode_read_list(r, limits)?
    };
    let write = if r.take_zero() {
        WriteList::default()
    } else {
        decode_write_list(r, limits)?
    };
    let reply = if r.read_bool()? {
        Some(decode_write_chunk(r, limits)?)
    } else {
        None
    };
    Ok(ChunkLists { read, write, reply })
}

/// The items of a list whose decode began where `list` (the reader's
/// unread bytes then) begins and has just read the list's terminating
/// zero: all read since, but that zero. No end position is kept up to
/// date in the decode loops.
#[inline]
fn list_items<'a>(list: &'a [u8], r: &XdrReader<'a>) -> Result<&'a [u8], DecodeError> {
    let len = list.len().saturating_sub(r.remaining()).saturating_sub(4);
    list.get(..len).ok_or(DecodeError::Truncated)
}

/// Decodes the Read list (C `xdr_count_read_segments()`), checking
/// alignment, the segment bound and the payload bound as it goes.
fn decode_read_list<'a>(
    r: &mut XdrReader<'a>,
    limits: &DecodeLimits,
) -> Result<ReadList<'a>, DecodeError> {
    let list = r.rest();
    let mut count: u32 = 0;
    let mut total: u32 = 0;
    while r.read_bool()? {
        count = count
            .checked_add(1)
            .ok_or(DecodeError::TooManyReadSegments)?;
        if count > limits.max_chunks {
            return Err(DecodeError::TooManyReadSegments);
        }
        let position = r.read_u32()?;
        let seg = read_segment(r)?;
        if position & 3 != 0 {
            return Err(DecodeError::MisalignedPosition(position));
        }
        total = total
            .checked_add(seg.length)
            .ok_or(DecodeError::LengthOverflow)?;
        if total > limits.max_payload {
            return Err(DecodeError::PayloadTooLarge);
        }
    }
    let bytes = list_items(list, r)?;
    Ok(ReadList { bytes, count })
}

/// Decodes the Write list (C `xdr_count_write_chunks()`).
fn decode_write_list<'a>(
    r: &mut XdrReader<'a>,
    limits: &DecodeLimits,
) -> Result<WriteList<'a>, DecodeError> {
    let list = r.rest();
    let mut count: u32 = 0;
    let mut length: u32 = 0;
    let mut segments: u32 = 0;
    while r.read_bool()? {
        count = count
            .checked_add(1)
            .ok_or(DecodeError::TooManyWriteChunks)?;
        if count > limits.max_chunks {
            return Err(DecodeError::TooManyWriteChunks);
        }
        // Each chunk's own length is checked; their sum only saturates,
        // as nothing depends on it fitting (a server writes each chunk).
        let chunk = decode_write_chunk(r, limits)?;
        length = length.saturating_add(chunk.length);
        segments = segments.saturating_add(chunk.count);
    }
    let bytes = list_items(list, r)?;
    Ok(WriteList {
        bytes,
        count,
        length,
        segments,
    })
}

/// Decodes one counted array of segments (C `xdr_check_write_chunk()`).
///
/// The count is range-checked and checked against the remaining bytes
/// before any segment is read.
fn decode_write_chunk<'a>(
    r: &mut XdrReader<'a>,
    limits: &DecodeLimits,
) -> Result<WriteChunk<'a>, DecodeError> {
    let count = r.read_u32()?;
    if count == 0 {
        return Err(DecodeError::ZeroSegments);
    }
    if count > limits.max_segments_per_chunk {
        return Err(DecodeError::TooManySegments);
    }
    let len = usize::try_from(count)
        .ok()
        .and_then(|n| n.checked_mul(SEGMENT_LEN))
        .ok_or(DecodeError::LengthOverflow)?;
    if len > r.remaining() {
        return Err(DecodeError::CountExceedsBuffer);
    }
    let bytes = r.take(len)?;
    let length = sum_segment_lengths(bytes).ok_or(DecodeError::LengthOverflow)?;
    Ok(WriteChunk {
        bytes,
        count,
        length,
    })
}

/// Checks Read chunk positions (C `pcl_check_read_chunk_positions()`).
///
/// Positions are offsets in the unreduced XDR stream (RFC 8166 §3.4.4), so
/// a chunk's offset in the reduced (inline) stream is its position minus
/// the lengths of the chunks before it. Each chunk must start within the
/// inline data, or within the position-zero chunk when there is one, and
/// chunks, grouped by position, must not overlap.
///
/// Chunks are visited in position order without storage: each step finds
/// the smallest position above the previous one. Work is
/// O(distinct positions × segments), bounded by `max_chunks²`.
fn check_read_positions(list: ReadList<'_>, inline_len: usize) -> Result<(), DecodeError> {
    let mut call_len: Option<u32> = None;
    for s in list.iter().filter(|s| s.position == 0) {
        let prev = call_len.unwrap_or(0);
        call_len = Some(
            prev.checked_add(s.segment.length)
                .ok_or(DecodeError::LengthOverflow)?,
        );
    }
    let bound = match call_len {
        Some(len) => len,
        None => u32::try_from(inline_len).unwrap_or(u32::MAX),
    };

    let mut last: u32 = 0;
    let mut prev_end: Option<u32> = None;
    let mut total_read: u32 = 0;
    loop {
        let next = list.iter().map(|s| s.position).filter(|&p| p > last).min();
        let Some(pos) = next else {
            break;
        };
        let mut len: u32 = 0;
        for s in list.iter().filter(|s| s.position == pos) {
            len = len
                .checked_add(s.segment.length)
                .ok_or(DecodeError::LengthOverflow)?;
        }
        if let Some(end) = prev_end {
            if end > pos {
                return Err(DecodeError::OverlappingReadChunks);
            }
        }
        let reduced = pos
            .checked_sub(total_read)
            .ok_or(DecodeError::PositionOutOfRange(pos))?;
        if reduced > bound {
            return Err(DecodeError::PositionOutOfRange(pos));
        }
        prev_end = Some(pos.checked_add(len).ok_or(DecodeError::LengthOverflow)?);
        total_read = total_read
            .checked_add(len)
            .ok_or(DecodeError::LengthOverflow)?;
        last = pos;
    }
    Ok(())
}
