//! The `server_receive` target: what the server does with a received
//! message ([`super::server_flow`]) under the input's parameters
//! ([`super::server_input`]), checked against [`super::server_oracle`].
//!
//! Invariants, besides "no panic" (overflow checks are on):
//! - every rejected header with an XID gets the error reply its error
//!   calls for; `ERR_CHUNK` after decoding only for a Call that is empty or
//!   too large for the request; a Call is dropped only if a segment's
//!   addresses wrap;
//! - the RDMA Reads tile every Read chunk, each inside one segment and at
//!   most a piece long; the argument is written once, in order, exactly
//!   up to the Call's length (inline body, chunks and pads add up), with
//!   the bytes of the inline body and the client's memory in XDR order;
//! - result payloads go to their own Write chunk in pieces inside its
//!   segments with the Reply's bytes; the rest of the Reply, inline or
//!   through the Reply chunk, is exactly the Reply without the payloads
//!   and their pads; `ERR_CHUNK` only when the rest does not fit; the
//!   header echoes the chunks trimmed to what was written, and Send With
//!   Invalidate names only a key the Call used alone.

use alloc::vec::Vec;

use super::error_reply::{check_err_chunk, check_error_reply, word, ANY};
use super::server_flow::{Call, CallCtxt, Conn, Read, Received, Replied, Request, Target, Written};
use super::server_input::{flags, split, ServerParams, MAX_REPLY};
use super::server_io::Res;
use super::server_oracle as oracle;
use crate::proto::decode::{decode_call, decode_header, decode_reply};
use crate::proto::msg::{Body, ChunkLists, Segment, RPCRDMA_VERSION};
use crate::proto::pieces::Piece;
use crate::proto::svc_call::{Source, MAX_PAYLOAD};

/// What one run ended with (for corpus statistics).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Outcome {
    /// Dropped silently (an `RDMA_DONE`/`RDMA_ERROR` call, or no XID).
    Dropped,
    /// `ERR_VERS` for a bad version.
    ErrVers,
    /// `ERR_CHUNK` for a header that did not decode.
    DecodeErrChunk,
    /// Handed to the backchannel.
    Backchannel,
    /// `ERR_CHUNK` for a Call that decoded.
    CallErrChunk,
    /// Dropped after decoding (a wrapping Read address).
    CallDropped,
    /// `ERR_CHUNK` when replying.
    ReplyErrChunk,
    /// `xpo_sendto` failed (the connection is closed).
    ReplyFailed,
    /// Replied through the Reply chunk.
    ReplyChunk,
    /// Replied inline.
    ReplyInline,
}

/// The target: the input's parameters, then the same message on a
/// connection without private data (1 KiB inline both ways) and no
/// argument limit, then with 64 KiB inline sizes, nfsd-shaped payloads and
/// an argument limit around the largest Call.
pub fn server_receive_target(data: &[u8]) -> [Outcome; 3] {
    let (p, msg) = split(data);
    let a = server_receive(&p, msg);
    let mut q = p.clone();
    q.flags &= !flags::PRIVATE_DATA;
    q.arg_max = u32::MAX;
    let b = server_receive(&q, msg);
    let mut q = p.clone();
    q.local_send = 65536;
    q.local_recv = 65536;
    q.flags |= flags::SHAPED;
    q.arg_max %= MAX_PAYLOAD + 8192 + 1;
    let c = server_receive(&q, msg);
    [a, b, c]
}

/// One run with explicit parameters.
pub fn server_receive(p: &ServerParams, wire: &[u8]) -> Outcome {
    let private = p.has(flags::PRIVATE_DATA).then_some(&p.private_data[..]);
    let mem_mgt = p.has(flags::MEM_MGT);
    let conn = Conn::accept(
        p.local_send,
        p.local_recv,
        private,
        mem_mgt,
        p.credits,
        p.max_piece(),
    );
    assert!(conn.inline_send <= p.local_send && conn.inline_recv <= p.local_recv);
    assert!(conn.inline_send >= 1024 && conn.inline_recv >= 1024);
    let msg = conn.received(wire);
    let rq = Request {
        arg_max: p.arg_max,
        finish_arg_max: if p.has(flags::SMALLER_FINISH) {
            p.arg_max / 2
        } else {
            p.arg_max
        },
        has_backchannel: p.has(flags::BACKCHANNEL),
    };
    let xid = word(msg, 0).unwrap_or(0);
    let call = match conn.process(&rq, msg) {
        Received::DecodeError { err, reply } => {
            check_error_reply(msg, &err, p.credits, reply.as_deref());
            return match reply.as_deref().and_then(|r| word(r, 4)) {
                None => Outcome::Dropped,
                Some(1) => Outcome::ErrVers,
                Some(_) => Outcome::DecodeErrChunk,
            };
        }
        Received::NotACall => panic!("decode_call accepted a message that is not a Call"),
        Received::Backchannel => {
            assert!(rq.has_backchannel);
            let h = decode_call(msg, &conn.limits).expect("decoded before");
            let lists = h.chunks().expect("a call");
            assert!(lists.read.is_empty() && lists.write.is_empty() && lists.reply.is_none());
            return Outcome::Backchannel;
        }
        Received::ErrChunk(bytes) => {
            check_err_chunk(&bytes, xid, p.credits);
            let h = decode_call(msg, &conn.limits).expect("decoded before");
            let (lists, inline) = h.body.chunks_and_inline().expect("a call");
            let len = oracle::call_len(lists, inline.len());
            let (call, _) = oracle::read_chunks(lists);
            let empty_call_chunk = call.is_some_and(|c| oracle::length(&c) == 0);
            let limit = u64::from(rq.arg_max.min(rq.finish_arg_max));
            assert!(
                len == 0 || len > limit || empty_call_chunk,
                "ERR_CHUNK for a Call of {len} bytes that fits {limit}"
            );
            return Outcome::CallErrChunk;
        }
        Received::Dropped(e) => {
            let h = decode_call(msg, &conn.limits).expect("decoded before");
            let lists = h.chunks().expect("a call");
            assert!(
                oracle::wraps(lists.read.iter().map(|s| s.segment)),
                "Call dropped ({e:?}) without a wrapping Read address"
            );
            return Outcome::CallDropped;
        }
        Received::Call(call) => call,
    };
    check_call(&conn, &rq, msg, &call);
    reply(p, &conn, call.ctxt)
}

/// Reads and argument of an assembled Call.
fn check_call(conn: &Conn, rq: &Request, msg: &[u8], call: &Call) {
    let h = decode_call(msg, &conn.limits).expect("decoded before");
    let (lists, inline) = h.body.chunks_and_inline().expect("a call");
    let (call_chunk, read_chunks) = oracle::read_chunks(lists);

    // The Reads: source by source, tiling each chunk.
    let mut reads: &[Read] = &call.reads;
    let sources = call_chunk
        .iter()
        .map(|c| (0, c))
        .chain(read_chunks.iter().enumerate().map(|(i, (_, c))| (i + 1, c)));
    for (src, segs) in sources {
        let n = reads.iter().take_while(|r| r.0 == src).count();
        let pieces: Vec<Piece> = reads[..n].iter().map(|r| r.1).collect();
        check_pieces(&pieces, segs, oracle::length(segs), conn.max_piece);
        reads = &reads[n..];
    }
    assert!(reads.is_empty(), "RDMA Reads of no chunk: {reads:?}");

    // The argument: written once, in order, up to the Call's length.
    let arg = &call.arg;
    let total = oracle::call_len(lists, inline.len());
    let needs_reads = call_chunk.is_some() || !read_chunks.is_empty();
    let limit = if needs_reads {
        rq.finish_arg_max
    } else {
        rq.arg_max
    };
    assert_eq!(arg.arg_max, limit);
    assert!(total <= u64::from(limit));
    assert_eq!(arg.len.map(u64::from), Some(total), "argument length");
    assert_eq!(u64::from(arg.cursor), total, "argument not fully written");
    assert_eq!(
        (arg.gaps, arg.refused),
        (0, 0),
        "argument written out of order"
    );
    let chunk_len = |src: usize| match src {
        0 => call_chunk.as_deref().map(oracle::length),
        i => read_chunks.get(i - 1).map(|(_, c)| oracle::length(c)),
    };
    let mut prev_unaligned = false;
    for s in &call.steps {
        match s.source {
            Source::Inline { offset, len } => {
                assert!(len > 0 && offset as usize + len as usize <= inline.len());
                prev_unaligned = false;
            }
            Source::Chunk { src, start, len } => {
                let have = chunk_len(src).expect("a step from a chunk the Call has");
                assert!(
                    u64::from(start) + u64::from(len) <= have,
                    "step outside its chunk"
                );
                prev_unaligned = src != 0 && len % 4 != 0;
            }
            Source::Pad { len } => {
                assert!(prev_unaligned && (1..=3).contains(&len), "pad of {len}");
                prev_unaligned = false;
            }
        }
    }
    if let Some(data) = &arg.data {
        assert!(
            data.as_slice() == oracle::call_bytes(lists, inline),
            "the Call's bytes"
        );
    }
    let write_lens: Vec<u32> = lists.write.iter().map(|w| w.total_length()).collect();
    assert_eq!(call.ctxt.write_lens(), write_lens);
}

/// Pieces tile `[0, total)` in order, each non-empty, at most `max_piece`
/// long and inside one segment, with the segment's handle and address.
fn check_pieces(pieces: &[Piece], segs: &[Segment], total: u64, max_piece: usize) {
    let mut at = 0u64;
    let mut seg = 0usize;
    let mut seg_start = 0u64;
    for p in pieces {
        assert_eq!(p.off as u64, at, "pieces not contiguous");
        assert!(p.len > 0 && p.len <= max_piece, "piece of {} bytes", p.len);
        while seg_start + u64::from(segs[seg].length) <= at {
            seg_start += u64::from(segs[seg].length);
            seg += 1;
        }
        let s = segs[seg];
        let in_seg = at - seg_start;
        assert!(
            in_seg + p.len as u64 <= u64::from(s.length),
            "piece crosses a segment"
        );
        assert_eq!(p.rkey, s.handle);
        assert_eq!(p.addr, s.offset + in_seg);
        at += p.len as u64;
    }
    assert_eq!(at, total, "pieces do not cover the chunk");
}

/// nfsd's side: result payloads, then `xpo_sendto`.
fn reply(p: &ServerParams, conn: &Conn, mut ctxt: CallCtxt) -> Outcome {
    let shaped = p.has(flags::SHAPED);
    let mut res_len = p.res_len % (MAX_REPLY + 1);
    let write_lens = ctxt.write_lens();
    if shaped {
        // As nfsd: positions increasing and 4-aligned, each payload after
        // the pad of the one before, all inside the Reply.
        let mut cursor: u32 = 0;
        for &(gap, len) in &p.payloads {
            let pos = cursor + (gap & 0xfffc);
            let len = len % (MAX_PAYLOAD + 1);
            let placed = ctxt.payloads;
            match ctxt.result_payload(pos, len) {
                Ok(()) if ctxt.payloads > placed => cursor = (pos + len + 3) & !3,
                Ok(()) => assert!(len == 0 || placed == write_lens.len()),
                Err(_) => assert!(len > write_lens[placed], "E2BIG for a payload that fits"),
            }
        }
        res_len = cursor + (res_len & 0xffff);
    } else {
        for &(pos, len) in &p.payloads {
            let _ = ctxt.result_payload(pos, len);
        }
    }
    assert!(ctxt.payloads <= write_lens.len());
    let recorded = ctxt.recorded_payloads();
    for (&(_, len), &max) in recorded.iter().zip(&write_lens) {
        assert!(len != 0 && len <= max);
    }

    let res = Res { len: res_len };
    let mut writes = Vec::new();
    let replied = conn.send_reply(&ctxt, res, &mut writes);
    let h = decode_call(&ctxt.msg, &conn.limits).expect("decoded before");
    let lists = h.chunks().expect("a call");
    let xid = h.xid;
    let body = oracle::reply_body(&recorded, res_len);
    if let Replied::Failed(e) = replied {
        // Only payloads nfsd would never place, or a client's segment
        // whose addresses wrap, fail a Reply.
        let segs = lists
            .write
            .iter()
            .flat_map(|w| w.segments())
            .chain(lists.reply.iter().flat_map(|r| r.segments()));
        assert!(
            body.is_none() || oracle::wraps(segs),
            "xpo_sendto failed on a well-formed Reply: {e:?}"
        );
        assert!(!shaped || body.is_some());
        return Outcome::ReplyFailed;
    }
    let body = body.expect("the Reply was sent, so its payloads lie inside it");
    let body_len: u64 = body.iter().map(|&(_, l)| u64::from(l)).sum();
    let payload_len: u64 = recorded
        .iter()
        .map(|&(pos, len)| ((u64::from(pos) + u64::from(len) + 3) & !3) - u64::from(pos))
        .sum();
    assert_eq!(
        body_len + payload_len,
        u64::from(res_len),
        "lengths do not add up"
    );

    if let Replied::ErrChunk(bytes) = &replied {
        check_err_chunk(bytes, xid, p.credits);
        let header_len =
            oracle::msg_header_len(lists.write.iter().map(|w| w.segment_count() as usize));
        let fits = match lists.reply {
            Some(r) => body_len <= u64::from(r.total_length()),
            None => body_len + header_len as u64 <= u64::from(conn.inline_send),
        };
        assert!(!fits, "ERR_CHUNK for a Reply that fits");
        return Outcome::ReplyErrChunk;
    }
    check_payload_writes(&ctxt, lists, &writes, res);
    let body_bytes = res.captured().then(|| oracle::region_bytes(&body));
    match replied {
        Replied::ReplyChunk {
            header,
            body_len: sent,
            inv,
        } => {
            assert_eq!(u64::from(sent), body_len);
            let segs: Vec<Segment> = lists.reply.expect("a Reply chunk").segments().collect();
            let into_reply: Vec<&Written> = writes
                .iter()
                .filter(|w| w.target == Target::ReplyChunk)
                .collect();
            let pieces: Vec<Piece> = into_reply.iter().map(|w| w.piece).collect();
            check_pieces(&pieces, &segs, body_len, conn.max_piece);
            if let Some(expected) = body_bytes {
                let data: Vec<u8> = into_reply
                    .iter()
                    .flat_map(|w| w.data.iter().copied())
                    .collect();
                assert!(data == expected, "Reply chunk bytes");
            }
            check_reply_header(&header, xid, p.credits, &ctxt, lists, Some(sent));
            check_inv(conn, inv, lists);
            Outcome::ReplyChunk
        }
        Replied::Inline {
            msg,
            header_len,
            inv,
        } => {
            assert!(lists.reply.is_none());
            assert!(msg.len() <= conn.inline_send as usize);
            assert_eq!(msg.len() as u64, header_len as u64 + body_len);
            assert!(writes.iter().all(|w| w.target != Target::ReplyChunk));
            check_reply_header(&msg[..header_len], xid, p.credits, &ctxt, lists, None);
            if let Some(expected) = body_bytes {
                assert!(msg[header_len..] == expected[..], "inline Reply bytes");
            }
            check_inv(conn, inv, lists);
            Outcome::ReplyInline
        }
        Replied::Failed(_) | Replied::ErrChunk(_) => unreachable!("handled above"),
    }
}

/// Every result payload went to its own Write chunk, in pieces inside its
/// segments, with the Reply's bytes.
fn check_payload_writes(ctxt: &CallCtxt, lists: &ChunkLists<'_>, writes: &[Written], res: Res) {
    let chunks: Vec<Vec<Segment>> = lists.write.iter().map(|w| w.segments().collect()).collect();
    for w in writes {
        if let Target::WriteChunk(k) = w.target {
            assert!(k < ctxt.payloads, "a Write for no payload");
        }
    }
    for (k, &(pos, len)) in ctxt.recorded_payloads().iter().enumerate() {
        let mine: Vec<&Written> = writes
            .iter()
            .filter(|w| w.target == Target::WriteChunk(k))
            .collect();
        let pieces: Vec<Piece> = mine.iter().map(|w| w.piece).collect();
        check_pieces(&pieces, &chunks[k], u64::from(len), usize::MAX);
        if res.captured() {
            for w in mine {
                let at = pos + w.piece.off as u32;
                let expected = oracle::region_bytes(&[(at, w.piece.len as u32)]);
                assert!(w.data == expected, "payload bytes");
            }
        }
    }
}

/// The Reply's transport header decodes back to what the Call offered,
/// trimmed to what was written.
fn check_reply_header(
    header: &[u8],
    xid: u32,
    credits: u32,
    ctxt: &CallCtxt,
    call: &ChunkLists<'_>,
    reply_chunk_used: Option<u32>,
) {
    let h = decode_header(header, &ANY).expect("the reply header decodes");
    assert_eq!(h.header_len, header.len());
    assert_eq!((h.xid, h.vers, h.credits), (xid, RPCRDMA_VERSION, credits));
    match (&h.body, reply_chunk_used) {
        (Body::NoMsg { .. }, Some(_)) | (Body::Msg { .. }, None) => {}
        (b, u) => panic!("reply procedure {b:?} with Reply chunk use {u:?}"),
    }
    let lists = h.chunks().expect("a reply carries chunk lists");
    assert!(lists.read.is_empty());
    assert_eq!(lists.write.len(), call.write.len());
    for (i, (rw, cw)) in lists.write.iter().zip(call.write.iter()).enumerate() {
        let used = ctxt.recorded_payloads().get(i).map_or(0, |p| p.1);
        check_trimmed(rw.segments(), cw.segments(), used);
    }
    match (lists.reply, call.reply, reply_chunk_used) {
        (Some(r), Some(c), Some(used)) => check_trimmed(r.segments(), c.segments(), used),
        (None, None, None) => {}
        other => panic!("Reply chunk echo mismatch: {:?}", other.2),
    }
    // What the Linux client accepts: at most one Write chunk, and no Write
    // list in RDMA_NOMSG.
    let client_ok = match reply_chunk_used {
        Some(_) => call.write.is_empty(),
        None => call.write.len() <= 1,
    };
    if client_ok {
        decode_reply(header, &ANY).expect("a client accepts the reply header");
    }
}

/// `reply` echoes `call` with lengths cut down to `used` bytes in all.
fn check_trimmed(
    reply: impl Iterator<Item = Segment>,
    call: impl Iterator<Item = Segment>,
    used: u32,
) {
    let mut left = used;
    for (r, c) in reply.zip(call) {
        assert_eq!((r.handle, r.offset), (c.handle, c.offset));
        let l = left.min(c.length);
        assert_eq!(r.length, l, "segment not trimmed to the bytes written");
        left -= l;
    }
    assert_eq!(left, 0, "more written than the chunk holds");
}

/// Send With Invalidate names a key only where allowed, and only the one
/// key every segment of the Call used.
fn check_inv(conn: &Conn, inv: Option<u32>, lists: &ChunkLists<'_>) {
    let handles: Vec<u32> = lists
        .read
        .iter()
        .map(|s| s.segment.handle)
        .chain(
            lists
                .write
                .iter()
                .flat_map(|w| w.segments().map(|s| s.handle)),
        )
        .chain(
            lists
                .reply
                .iter()
                .flat_map(|r| r.segments().map(|s| s.handle)),
        )
        .collect();
    let sole = handles
        .first()
        .copied()
        .filter(|&k| handles.iter().all(|&h| h == k));
    assert_eq!(inv, if conn.snd_w_inv { sole } else { None });
}
