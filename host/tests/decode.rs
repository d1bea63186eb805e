//! Decoder tests: accepted shapes, every rejection class, the error reply
//! mapping, and the XDR codec underneath.

use rpcrdma_proto::proto::decode::{decode_call, decode_header, decode_reply};
use rpcrdma_proto::proto::encode::{
    encode_error_for, encode_header, error_reply_for, BodyRef, ChunkListsRef, EncodeError,
    HeaderRef,
};
use rpcrdma_proto::proto::msg::{
    Body, DecodeError, DecodeLimits, ErrorAction, ErrorBody, Proc, ReadSegment, Segment,
};
use rpcrdma_proto::proto::xdr::{pad_len, XdrError, XdrReader, XdrWriter};

const LIM: DecodeLimits = DecodeLimits {
    max_segments_per_chunk: 8,
    max_chunks: 4,
    max_payload: 1 << 20,
    max_inline: 4096,
};

fn seg(h: u32, l: u32) -> Segment {
    Segment::new(h, l, u64::from(h) << 32)
}

/// Encodes a header followed by `payload` zero bytes.
fn build(body: BodyRef<'_>, payload: usize) -> Vec<u8> {
    let h = HeaderRef {
        xid: 0xdead_beef,
        vers: 1,
        credits: 32,
        body,
    };
    let mut buf = vec![0u8; 4096];
    let n = encode_header(&h, &mut buf).unwrap();
    buf.resize(n + payload, 0);
    buf
}

fn msg(
    read: &[ReadSegment],
    write: &[&[Segment]],
    reply: Option<&[Segment]>,
    payload: usize,
) -> Vec<u8> {
    build(BodyRef::Msg(ChunkListsRef { read, write, reply }), payload)
}

fn nomsg(read: &[ReadSegment], write: &[&[Segment]], reply: Option<&[Segment]>) -> Vec<u8> {
    build(BodyRef::NoMsg(ChunkListsRef { read, write, reply }), 0)
}

fn words(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|x| x.to_be_bytes()).collect()
}

// ---- accepted ----

#[test]
fn write_list_totals_are_the_sums_of_its_chunks() {
    // What the client's reply handler reads as the bytes written: summed
    // while decoding, equal to a walk of the chunks.
    let a = [seg(1, 4096), seg(2, 100)];
    let b = [seg(3, 8192)];
    let wire = msg(&[], &[&a, &b], None, 8);
    let h = decode_header(&wire, &LIM).unwrap();
    let Body::Msg { chunks, .. } = h.body else {
        panic!("not RDMA_MSG");
    };
    let walked: u32 = chunks.write.iter().map(|c| c.total_length()).sum();
    assert_eq!(chunks.write.total_length(), walked);
    assert_eq!(walked, 4096 + 100 + 8192);
    // So is the segment count the server sizes its parsed lists by.
    let segs: u32 = chunks.write.iter().map(|c| c.segment_count()).sum();
    assert_eq!(chunks.write.segment_count(), segs);
    assert_eq!(segs, 3);
    // Each chunk fits u32; their sum saturates rather than fail the call.
    let big = [seg(4, u32::MAX - 1)];
    let wire = msg(&[], &[&big, &b], None, 8);
    let h = decode_header(&wire, &LIM).unwrap();
    let Body::Msg { chunks, .. } = h.body else {
        panic!("not RDMA_MSG");
    };
    assert_eq!(chunks.write.total_length(), u32::MAX);
    assert_eq!(chunks.write.iter().count(), 2);
}

#[test]
fn accepts_plain_msg_and_exposes_payload() {
    let b = msg(&[], &[], None, 12);
    let h = decode_call(&b, &LIM).unwrap();
    assert_eq!(h.xid, 0xdead_beef);
    assert_eq!(h.credits, 32);
    assert_eq!(h.header_len, 28);
    match h.body {
        Body::Msg { payload, chunks } => {
            assert_eq!(payload.len(), 12);
            assert!(chunks.read.is_empty() && chunks.write.is_empty() && chunks.reply.is_none());
        }
        _ => panic!("not a MSG"),
    }
}

#[test]
fn accepts_read_chunk_at_end_of_inline_data() {
    // Position equal to the inline length is allowed (C uses `>`).
    let b = msg(&[ReadSegment::new(16, 1, 100, 0)], &[], None, 16);
    decode_call(&b, &LIM).unwrap();
}

#[test]
fn accepts_adjacent_and_unsorted_read_chunks() {
    // Chunks at 8 (len 8) and 16 (len 4), listed out of order, with one
    // split into two segments that are not adjacent in the list.
    let b = msg(
        &[
            ReadSegment::new(16, 3, 4, 0),
            ReadSegment::new(8, 1, 4, 0),
            ReadSegment::new(8, 2, 4, 0),
        ],
        &[],
        None,
        12,
    );
    decode_call(&b, &LIM).unwrap();
}

#[test]
fn accepts_nomsg_long_call_with_reply_chunk() {
    let b = nomsg(
        &[
            ReadSegment::new(0, 1, 4000, 0),
            ReadSegment::new(0, 2, 96, 0),
        ],
        &[],
        Some(&[seg(3, 8192)]),
    );
    let h = decode_call(&b, &LIM).unwrap();
    assert_eq!(h.proc_(), Proc::NoMsg);
    let c = h.chunks().unwrap();
    assert_eq!(c.read.len(), 2);
    assert_eq!(c.reply.unwrap().total_length(), 8192);
}

#[test]
fn accepts_read_chunk_inside_call_chunk() {
    // NOMSG: other Read chunks are bounded by the call chunk's length.
    let b = nomsg(
        &[
            ReadSegment::new(0, 1, 200, 0),
            ReadSegment::new(100, 2, 4096, 0),
        ],
        &[],
        None,
    );
    decode_call(&b, &LIM).unwrap();
}

#[test]
fn accepts_write_list_and_reply_chunk_together() {
    let b = msg(
        &[],
        &[&[seg(1, 4096), seg(2, 4)], &[seg(3, 10)]],
        Some(&[seg(4, 1)]),
        4,
    );
    let h = decode_call(&b, &LIM).unwrap();
    let c = h.chunks().unwrap();
    let lens: Vec<u32> = c.write.iter().map(|w| w.total_length()).collect();
    assert_eq!(lens, vec![4100, 10]);
}

#[test]
fn reply_decoder_accepts_c_reply_shapes() {
    decode_reply(&msg(&[], &[&[seg(1, 4096)]], None, 8), &LIM).unwrap();
    decode_reply(&nomsg(&[], &[], Some(&[seg(1, 4096)])), &LIM).unwrap();
    let e = build(BodyRef::Error(ErrorBody::Chunk), 0);
    assert_eq!(
        decode_reply(&e, &LIM).unwrap().body,
        Body::Error(ErrorBody::Chunk)
    );
    let e = build(BodyRef::Error(ErrorBody::Vers { low: 1, high: 1 }), 0);
    decode_reply(&e, &LIM).unwrap();
}

#[test]
fn client_limits_follow_the_receive_buffer() {
    // A 64 KiB inline reply fits a client with 64 KiB receive buffers, not
    // the default 4 KiB ones; one byte more fits neither.
    let b = msg(&[], &[], None, 60_000);
    let big = DecodeLimits::client(65536);
    assert_eq!(decode_reply(&b, &big).unwrap().xid, 0xdead_beef);
    assert_eq!(
        decode_reply(&b, &DecodeLimits::client_default()).unwrap_err(),
        DecodeError::TooLong
    );
    let over = msg(&[], &[], None, 65536);
    assert_eq!(decode_reply(&over, &big).unwrap_err(), DecodeError::TooLong);
}

#[test]
fn unknown_error_code_is_decoded_for_xid_retirement() {
    let b = words(&[9, 1, 1, 4, 77]);
    let h = decode_reply(&b, &LIM).unwrap();
    assert_eq!(h.xid, 9);
    assert_eq!(h.body, Body::Error(ErrorBody::Other(77)));
}

// ---- every rejection class ----

fn rej(b: &[u8]) -> DecodeError {
    decode_call(b, &LIM).unwrap_err()
}

#[test]
fn reject_truncated_everywhere() {
    let full = msg(
        &[ReadSegment::new(0, 1, 4, 0)],
        &[&[seg(2, 4)]],
        Some(&[seg(3, 4)]),
        0,
    );
    // Every strict prefix of a NOMSG-less MSG header must be rejected as
    // truncated (the message has no payload so the header is the whole).
    let nm = nomsg(
        &[ReadSegment::new(0, 1, 4, 0)],
        &[&[seg(2, 4)]],
        Some(&[seg(3, 4)]),
    );
    for cut in 0..nm.len() {
        let e = decode_header(&nm[..cut], &LIM).unwrap_err();
        assert!(
            matches!(e, DecodeError::Truncated | DecodeError::CountExceedsBuffer),
            "cut {cut}: {e:?}"
        );
    }
    assert_eq!(rej(&full[..10]), DecodeError::Truncated);
}

#[test]
fn reject_too_long() {
    let b = msg(&[], &[], None, 5000);
    assert_eq!(rej(&b), DecodeError::TooLong);
}

#[test]
fn reject_bad_version_maps_to_err_vers() {
    let mut b = msg(&[], &[], None, 0);
    b[7] = 2;
    let e = rej(&b);
    assert_eq!(e, DecodeError::BadVersion(2));
    assert_eq!(e.action(), ErrorAction::ErrVers);
}

#[test]
fn reject_unknown_and_unsupported_procs() {
    let mut b = msg(&[], &[], None, 0);
    b[15] = 9;
    assert_eq!(rej(&b), DecodeError::UnknownProc(9));
    assert_eq!(rej(&b).action(), ErrorAction::ErrChunk);

    let p = build(
        BodyRef::Msgp {
            align: 4,
            thresh: 0,
            chunks: ChunkListsRef::EMPTY,
        },
        0,
    );
    assert_eq!(rej(&p), DecodeError::UnsupportedProc(Proc::Msgp));
    assert_eq!(rej(&p).action(), ErrorAction::ErrChunk);
    assert_eq!(
        decode_reply(&p, &LIM).unwrap_err(),
        DecodeError::UnsupportedProc(Proc::Msgp)
    );

    let d = build(BodyRef::Done, 0);
    assert_eq!(rej(&d), DecodeError::UnsupportedProc(Proc::Done));
    assert_eq!(rej(&d).action(), ErrorAction::Drop);
    assert_eq!(
        decode_reply(&d, &LIM).unwrap_err(),
        DecodeError::UnsupportedProc(Proc::Done)
    );

    let e = build(BodyRef::Error(ErrorBody::Chunk), 0);
    assert_eq!(rej(&e), DecodeError::UnsupportedProc(Proc::Error));
    assert_eq!(rej(&e).action(), ErrorAction::Drop);
}

#[test]
fn malformed_error_and_done_calls_are_dropped_not_answered() {
    // RDMA_ERROR with no error code, and an oversized RDMA_DONE: C drops
    // both without parsing; so do we (no ERR_CHUNK ping-pong).
    let e = words(&[1, 1, 1, 4]);
    assert_eq!(rej(&e), DecodeError::UnsupportedProc(Proc::Error));
    assert_eq!(error_reply_for(&e, &rej(&e), 1), None);
    let mut d = words(&[1, 1, 1, 3]);
    d.resize(5000, 0);
    assert_eq!(rej(&d), DecodeError::UnsupportedProc(Proc::Done));
    // The version check still comes first.
    let v = words(&[1, 9, 1, 4]);
    assert_eq!(rej(&v), DecodeError::BadVersion(9));
    // The generic decoder reports the real problem.
    assert_eq!(decode_header(&e, &LIM).unwrap_err(), DecodeError::Truncated);
}

#[test]
fn reject_bad_discriminators() {
    for at in [16usize, 20, 24] {
        let mut b = msg(&[], &[], None, 0);
        b[at + 3] = 7;
        assert_eq!(rej(&b), DecodeError::BadDiscriminator(7), "word at {at}");
    }
}

#[test]
fn reject_too_many_read_segments() {
    let r: Vec<ReadSegment> = (0..5).map(|i| ReadSegment::new(0, i, 4, 0)).collect();
    assert_eq!(rej(&nomsg(&r, &[], None)), DecodeError::TooManyReadSegments);
}

#[test]
fn reject_too_many_write_chunks() {
    let s = [seg(1, 4)];
    let w: Vec<&[Segment]> = (0..5).map(|_| &s[..]).collect();
    assert_eq!(rej(&msg(&[], &w, None, 0)), DecodeError::TooManyWriteChunks);
}

#[test]
fn reject_too_many_segments() {
    let s: Vec<Segment> = (0..9).map(|i| seg(i, 4)).collect();
    assert_eq!(rej(&msg(&[], &[&s], None, 0)), DecodeError::TooManySegments);
    assert_eq!(
        rej(&msg(&[], &[], Some(&s), 0)),
        DecodeError::TooManySegments
    );
}

#[test]
fn reject_zero_segment_write_and_reply_chunks() {
    let w = words(&[1, 1, 1, 0, 0, 1, 0, 0, 0]);
    assert_eq!(rej(&w), DecodeError::ZeroSegments);
    let r = words(&[1, 1, 1, 0, 0, 0, 1, 0]);
    assert_eq!(rej(&r), DecodeError::ZeroSegments);
}

#[test]
fn reject_count_exceeding_buffer_before_iterating() {
    // Count 8 (within limits) but only one segment's bytes follow.
    let mut b = words(&[1, 1, 1, 0, 0, 0, 1, 8]);
    b.extend_from_slice(&[0u8; 16]);
    assert_eq!(rej(&b), DecodeError::CountExceedsBuffer);
    // A huge count is refused by the limit before any multiplication.
    let b = words(&[1, 1, 1, 0, 0, 0, 1, u32::MAX]);
    assert_eq!(rej(&b), DecodeError::TooManySegments);
    let unlimited = DecodeLimits {
        max_segments_per_chunk: u32::MAX,
        ..LIM
    };
    assert_eq!(
        decode_call(&b, &unlimited).unwrap_err(),
        DecodeError::CountExceedsBuffer
    );
}

#[test]
fn reject_misaligned_position() {
    let b = msg(&[ReadSegment::new(6, 1, 4, 0)], &[], None, 8);
    assert_eq!(rej(&b), DecodeError::MisalignedPosition(6));
}

#[test]
fn reject_position_beyond_inline_data() {
    let b = msg(&[ReadSegment::new(20, 1, 4, 0)], &[], None, 16);
    assert_eq!(rej(&b), DecodeError::PositionOutOfRange(20));
    // Second chunk: reduced offset = 40 - 8 = 32 > 24.
    let b = msg(
        &[ReadSegment::new(8, 1, 8, 0), ReadSegment::new(40, 2, 4, 0)],
        &[],
        None,
        24,
    );
    assert_eq!(rej(&b), DecodeError::PositionOutOfRange(40));
    // Beyond the call chunk for NOMSG.
    let b = nomsg(
        &[ReadSegment::new(0, 1, 64, 0), ReadSegment::new(68, 2, 4, 0)],
        &[],
        None,
    );
    assert_eq!(rej(&b), DecodeError::PositionOutOfRange(68));
}

#[test]
fn reject_overlapping_read_chunks() {
    let b = msg(
        &[ReadSegment::new(8, 1, 16, 0), ReadSegment::new(12, 2, 4, 0)],
        &[],
        None,
        32,
    );
    assert_eq!(rej(&b), DecodeError::OverlappingReadChunks);
    // Overlap created by a second segment of the same chunk listed last.
    let b = msg(
        &[
            ReadSegment::new(8, 1, 4, 0),
            ReadSegment::new(12, 2, 4, 0),
            ReadSegment::new(8, 3, 4, 0),
        ],
        &[],
        None,
        32,
    );
    assert_eq!(rej(&b), DecodeError::OverlappingReadChunks);
}

#[test]
fn reject_length_overflow() {
    let big = DecodeLimits {
        max_payload: u32::MAX,
        ..LIM
    };
    let b = nomsg(
        &[
            ReadSegment::new(0, 1, 0x8000_0000, 0),
            ReadSegment::new(0, 2, 0x8000_0000, 0),
        ],
        &[],
        None,
    );
    assert_eq!(
        decode_call(&b, &big).unwrap_err(),
        DecodeError::LengthOverflow
    );
    let b = msg(&[], &[&[seg(1, u32::MAX), seg(2, 1)]], None, 0);
    assert_eq!(rej(&b), DecodeError::LengthOverflow);
    let b = msg(&[], &[], Some(&[seg(1, u32::MAX), seg(2, 1)]), 0);
    assert_eq!(rej(&b), DecodeError::LengthOverflow);
}

#[test]
fn reject_payload_too_large() {
    let b = nomsg(&[ReadSegment::new(0, 1, (1 << 20) + 1, 0)], &[], None);
    assert_eq!(rej(&b), DecodeError::PayloadTooLarge);
    // The total across segments counts, not just each one.
    let b = nomsg(
        &[
            ReadSegment::new(0, 1, 1 << 19, 0),
            ReadSegment::new(0, 2, (1 << 19) + 4, 0),
        ],
        &[],
        None,
    );
    assert_eq!(rej(&b), DecodeError::PayloadTooLarge);
}

#[test]
fn reject_call_chunk_shape_errors() {
    assert_eq!(
        rej(&nomsg(&[], &[], Some(&[seg(1, 4)]))),
        DecodeError::MissingCallChunk
    );
    let b = msg(&[ReadSegment::new(0, 1, 4, 0)], &[], None, 8);
    assert_eq!(rej(&b), DecodeError::UnexpectedCallChunk);
    // The direction-neutral decoder leaves that policy to the caller.
    decode_header(&b, &LIM).unwrap();
}

#[test]
fn reject_reply_shape_errors() {
    let r = |b: &[u8]| decode_reply(b, &LIM).unwrap_err();
    assert_eq!(
        r(&msg(&[ReadSegment::new(4, 1, 4, 0)], &[], None, 8)),
        DecodeError::UnexpectedChunk
    );
    assert_eq!(
        r(&msg(&[], &[], Some(&[seg(1, 4)]), 0)),
        DecodeError::UnexpectedChunk
    );
    assert_eq!(
        r(&msg(&[], &[&[seg(1, 4)], &[seg(2, 4)]], None, 0)),
        DecodeError::UnexpectedChunk
    );
    assert_eq!(
        r(&nomsg(&[], &[&[seg(1, 4)]], Some(&[seg(1, 4)]))),
        DecodeError::UnexpectedChunk
    );
    assert_eq!(r(&nomsg(&[], &[], None)), DecodeError::MissingReplyChunk);
}

#[test]
fn every_error_has_a_distinct_name_and_action() {
    let all = [
        DecodeError::Truncated,
        DecodeError::TooLong,
        DecodeError::BadVersion(0),
        DecodeError::UnknownProc(0),
        DecodeError::UnsupportedProc(Proc::Msgp),
        DecodeError::BadDiscriminator(0),
        DecodeError::TooManyReadSegments,
        DecodeError::TooManyWriteChunks,
        DecodeError::TooManySegments,
        DecodeError::ZeroSegments,
        DecodeError::CountExceedsBuffer,
        DecodeError::MisalignedPosition(0),
        DecodeError::PositionOutOfRange(0),
        DecodeError::OverlappingReadChunks,
        DecodeError::LengthOverflow,
        DecodeError::PayloadTooLarge,
        DecodeError::MissingCallChunk,
        DecodeError::UnexpectedCallChunk,
        DecodeError::UnexpectedChunk,
        DecodeError::MissingReplyChunk,
    ];
    let mut names: Vec<&str> = all.iter().map(|e| e.name()).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), all.len());
    for e in &all[2..] {
        let want = if matches!(e, DecodeError::BadVersion(_)) {
            ErrorAction::ErrVers
        } else {
            ErrorAction::ErrChunk
        };
        assert_eq!(e.action(), want, "{e:?}");
    }
}

// ---- error replies ----

#[test]
fn error_reply_echoes_xid_and_version_like_c() {
    let mut b = msg(&[], &[], None, 0);
    b[7] = 3;
    let e = rej(&b);
    let r = error_reply_for(&b, &e, 17).unwrap();
    assert_eq!(r.xid, 0xdead_beef);
    assert_eq!(r.vers, 3);
    assert_eq!(r.credits, 17);
    assert_eq!(r.body, ErrorBody::Vers { low: 1, high: 1 });
    let mut out = [0u8; 28];
    assert_eq!(r.encode(&mut out).unwrap(), 28);
    assert_eq!(out.to_vec(), words(&[0xdead_beef, 3, 17, 4, 1, 1, 1]));
}

#[test]
fn error_reply_chunk_and_drop_cases() {
    let b = words(&[5, 1, 1, 0, 2]);
    let e = rej(&b);
    let mut out = [0u8; 64];
    let n = encode_error_for(&b, &e, 128, &mut out).unwrap().unwrap();
    assert_eq!(out[..n].to_vec(), words(&[5, 1, 128, 4, 2]));
    // Too short to carry an XID: nothing to answer.
    assert_eq!(error_reply_for(&[1, 2], &DecodeError::Truncated, 1), None);
    // Six bytes: XID known, version not: answer with version 1.
    let r = error_reply_for(&[0, 0, 0, 9, 0, 0], &DecodeError::Truncated, 1).unwrap();
    assert_eq!((r.xid, r.vers), (9, 1));
    // DONE as a call: dropped.
    let d = build(BodyRef::Done, 0);
    assert_eq!(encode_error_for(&d, &rej(&d), 1, &mut out).unwrap(), None);
    // Output too small.
    assert_eq!(
        encode_error_for(&b, &e, 1, &mut out[..19]),
        Err(EncodeError::NoSpace)
    );
}

// ---- encoder ----

#[test]
fn encoder_refuses_empty_chunks_and_small_buffers() {
    let h = HeaderRef {
        xid: 1,
        vers: 1,
        credits: 1,
        body: BodyRef::Msg(ChunkListsRef {
            read: &[],
            write: &[&[]],
            reply: None,
        }),
    };
    let mut out = [0u8; 64];
    assert_eq!(encode_header(&h, &mut out), Err(EncodeError::EmptyChunk));
    let h = HeaderRef {
        body: BodyRef::Msg(ChunkListsRef::EMPTY),
        ..h
    };
    assert_eq!(encode_header(&h, &mut out[..27]), Err(EncodeError::NoSpace));
    assert_eq!(h.encoded_len(), Some(28));
    let h = HeaderRef {
        body: BodyRef::Error(ErrorBody::Other(3)),
        ..h
    };
    assert_eq!(
        encode_header(&h, &mut out),
        Err(EncodeError::UnknownErrorCode)
    );
}

// ---- XDR ----

#[test]
fn xdr_round_trip_and_padding() {
    let mut buf = [0u8; 64];
    let mut w = XdrWriter::new(&mut buf);
    w.write_u32(7).unwrap();
    w.write_u64(0x0102_0304_0506_0708).unwrap();
    w.write_opaque(b"abcde").unwrap();
    w.write_bool(true).unwrap();
    w.write_i32(-2).unwrap();
    let at = w.reserve_u32().unwrap();
    w.patch_u32(at, 99).unwrap();
    assert!(w.patch_u32(at + 4, 1).is_err());
    let n = w.position();
    assert_eq!(n, 4 + 8 + 4 + 8 + 4 + 4 + 4);
    let mut r = XdrReader::new(&buf[..n]);
    assert_eq!(r.read_u32().unwrap(), 7);
    assert_eq!(r.read_u64().unwrap(), 0x0102_0304_0506_0708);
    assert_eq!(r.read_opaque(16).unwrap(), b"abcde");
    assert!(r.read_bool().unwrap());
    assert_eq!(r.read_i32().unwrap(), -2);
    assert_eq!(r.read_u32().unwrap(), 99);
    assert_eq!(r.remaining(), 0);
    assert_eq!(r.read_u32(), Err(XdrError::Truncated));
    assert_eq!(pad_len(5), 3);
    assert_eq!(pad_len(8), 0);
}

#[test]
fn xdr_words_match_single_words() {
    let mut a = [0u8; 16];
    let mut b = [0u8; 16];
    XdrWriter::new(&mut a)
        .write_words([1, 0xdead_beef, 0x0102_0304, 7])
        .unwrap();
    let mut w = XdrWriter::new(&mut b);
    w.write_u32(1).unwrap();
    w.write_u32(0xdead_beef).unwrap();
    w.write_u64(0x0102_0304_0000_0007).unwrap();
    assert_eq!(a, b);
    let mut r = XdrReader::new(&a);
    assert_eq!(r.read_words::<4>(), Ok([1, 0xdead_beef, 0x0102_0304, 7]));
    assert_eq!(r.remaining(), 0);
    // Short input or output: nothing is consumed or written.
    let mut r = XdrReader::new(&a[..15]);
    assert_eq!(r.read_words::<4>(), Err(XdrError::Truncated));
    assert_eq!(r.position(), 0);
    let mut short = [0u8; 12];
    let mut w = XdrWriter::new(&mut short);
    assert_eq!(w.write_words([1, 2, 3, 4]), Err(XdrError::NoSpace));
    assert_eq!(w.position(), 0);
    assert_eq!(short, [0u8; 12]);
}

#[test]
fn xdr_take_zero_consumes_only_a_zero_word() {
    let b = words(&[0, 1, 0]);
    let mut r = XdrReader::new(&b);
    assert!(r.take_zero());
    assert_eq!(r.position(), 4);
    // A non-zero word, or fewer than four bytes, is left where it is.
    assert!(!r.take_zero());
    assert_eq!(r.position(), 4);
    assert_eq!(r.read_u32(), Ok(1));
    let mut short = XdrReader::new(&b[8..11]);
    assert!(!short.take_zero());
    assert_eq!(short.remaining(), 3);
    assert!(r.take_zero());
    assert_eq!(r.remaining(), 0);
    assert!(!r.take_zero());
}

#[test]
fn xdr_rejects_hostile_lengths() {
    let b = words(&[u32::MAX]);
    assert_eq!(
        XdrReader::new(&b).read_opaque(usize::MAX),
        Err(XdrError::Truncated)
    );
    assert_eq!(XdrReader::new(&b).read_opaque(16), Err(XdrError::TooLong));
    let b = words(&[3, 1]);
    assert_eq!(
        XdrReader::new(&b).read_array_count(4, 10),
        Err(XdrError::Truncated)
    );
    assert_eq!(
        XdrReader::new(&b).read_array_count(4, 2),
        Err(XdrError::TooLong)
    );
    assert_eq!(
        XdrReader::new(&words(&[1, 1])).read_array_count(4, 2),
        Ok(1)
    );
    assert_eq!(
        XdrReader::new(&words(&[2])).read_bool(),
        Err(XdrError::BadBool(2))
    );
    let mut r = XdrReader::new(&[1, 2, 3, 4, 5]);
    assert_eq!(r.read_opaque_fixed(5), Err(XdrError::Truncated));
    assert_eq!(r.position(), 0);
    assert_eq!(r.take(usize::MAX), Err(XdrError::Truncated));
    r.skip(1).unwrap();
    assert_eq!(r.take(usize::MAX), Err(XdrError::Overflow));
}

#[test]
fn client_limits_follow_the_segments_it_sends() {
    // memreg=physical sends Write chunks of one segment per page: a reply
    // echoing 83 of them decodes with the physical limit, not with 16.
    let segs: Vec<Segment> = (0..83).map(|i| seg(i, 4096)).collect();
    let b = msg(&[], &[&segs], None, 100);
    let fmr = DecodeLimits::client(4096);
    assert_eq!(
        decode_reply(&b, &fmr).err(),
        Some(DecodeError::TooManySegments)
    );
    let physical =
        DecodeLimits::client(4096).with_segments(rpcrdma_proto::proto::planner::PHYSICAL_MAX_SEGS);
    assert!(decode_reply(&b, &physical).is_ok());
}
