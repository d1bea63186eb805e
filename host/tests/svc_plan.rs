//! The server's plans for a Call and its Reply (src/proto/pieces.rs,
//! svc_call.rs, svc_reply.rs) on small worked examples; the
//! `server_receive` fuzz target checks them on everything else.

use rpcrdma_proto::proto::decode::decode_call;
use rpcrdma_proto::proto::encode::{encode_header, BodyRef, ChunkListsRef, HeaderRef};
use rpcrdma_proto::proto::msg::{DecodeLimits, ReadSegment, Segment};
use rpcrdma_proto::proto::pcl::{ParsedChunks, PclChunk, PclError};
use rpcrdma_proto::proto::pieces::{
    page_spans, CallReadPieces, PageSpan, Piece, PieceError, PieceRun, Pieces, RangeInPieces,
};
use rpcrdma_proto::proto::svc_call::{CallLayout, PagedCall, Source, Step};
use rpcrdma_proto::proto::svc_reply::{BodyRun, PayloadWrites, ReplyBody};

/// An `RDMA_MSG` Call with these chunk lists and `inline` bytes of body.
fn call(lists: ChunkListsRef<'_>, inline: usize) -> Vec<u8> {
    let h = HeaderRef {
        xid: 7,
        vers: 1,
        credits: 1,
        body: BodyRef::Msg(lists),
    };
    let mut buf = vec![0u8; 4096];
    let n = encode_header(&h, &mut buf).unwrap();
    buf.truncate(n);
    buf.extend((0..inline).map(|i| i as u8));
    buf
}

/// An `RDMA_MSG` Call with the Read list `reads`, no Write list or Reply
/// chunk, and `inline` bytes of body.
fn read_call(reads: &[ReadSegment], inline: usize) -> Vec<u8> {
    call(
        ChunkListsRef {
            read: reads,
            write: &[],
            reply: None,
        },
        inline,
    )
}

/// Runs `f` on the parsed chunk lists of `msg` and its inline length.
fn with_pcl<R>(msg: &[u8], f: impl FnOnce(&mut ParsedChunks<'_>, usize) -> R) -> R {
    let h = decode_call(msg, &DecodeLimits::server_default()).unwrap();
    let (lists, inline) = h.body.chunks_and_inline().unwrap();
    let mut chunks = vec![PclChunk::default(); ParsedChunks::chunks_needed(lists)];
    let mut segs = vec![Segment::default(); ParsedChunks::segments_needed(lists)];
    let mut pcl = ParsedChunks::build(lists, &mut chunks, &mut segs).unwrap();
    f(&mut pcl, inline.len())
}

fn piece(off: usize, len: usize, addr: u64, rkey: u32) -> Piece {
    Piece {
        off,
        len,
        addr,
        rkey,
    }
}

#[test]
fn pieces_stay_inside_segments_and_the_piece_size() {
    let segs = [Segment::new(1, 10, 100), Segment::new(2, 5, 200)];
    let got: Vec<_> = Pieces::new(&segs, 15, 4).collect();
    assert_eq!(
        got,
        [
            Ok(piece(0, 4, 100, 1)),
            Ok(piece(4, 4, 104, 1)),
            Ok(piece(8, 2, 108, 1)),
            Ok(piece(10, 4, 200, 2)),
            Ok(piece(14, 1, 204, 2)),
        ]
    );
    // Fewer bytes wanted than the segments hold: the rest is not cut.
    let got: Vec<_> = Pieces::new(&segs, 9, 64).collect();
    assert_eq!(got, [Ok(piece(0, 9, 100, 1))]);
}

#[test]
fn pieces_report_short_segments_and_wrapping_addresses() {
    let segs = [Segment::new(1, 3, 0)];
    let got: Vec<_> = Pieces::new(&segs, 4, 64).collect();
    assert_eq!(got, [Ok(piece(0, 3, 0, 1)), Err(PieceError::ShortSegments)]);
    let segs = [Segment::new(1, 4, u64::MAX - 1)];
    let got: Vec<_> = Pieces::new(&segs, 4, 1).collect();
    assert_eq!(
        got,
        [
            Ok(piece(0, 1, u64::MAX - 1, 1)),
            Ok(piece(1, 1, u64::MAX, 1)),
            Err(PieceError::Overflow),
        ]
    );
}

#[test]
fn a_range_is_found_across_pieces_or_reported_uncovered() {
    let pieces = [piece(0, 4, 0, 1), piece(4, 4, 4, 1), piece(8, 2, 8, 1)];
    let runs: Vec<_> = RangeInPieces::new(pieces.iter().map(|p| (p.off, *p)), 3, 6)
        .map(|r| r.map(|(p, run)| (p, run.at, run.in_piece, run.len)))
        .collect();
    assert_eq!(runs, [Ok((0, 0, 3, 1)), Ok((4, 1, 0, 4)), Ok((8, 5, 0, 1))]);
    let short: Vec<_> = RangeInPieces::new(pieces.iter().map(|p| (p.off, *p)), 8, 4).collect();
    let first = PieceRun {
        at: 0,
        in_piece: 0,
        len: 2,
    };
    assert_eq!(short, [Ok((8, first)), Err(PieceError::NotCovered)]);
}

#[test]
fn call_steps_splice_read_chunks_with_their_pad() {
    // 8 inline bytes; a 5-byte Read chunk at XDR position 4.
    let read = [ReadSegment::new(4, 9, 5, 0x900)];
    let msg = call(
        ChunkListsRef {
            read: &read,
            write: &[],
            reply: None,
        },
        8,
    );
    with_pcl(&msg, |pcl, inline| {
        let layout = CallLayout::new(pcl, inline, 16).unwrap();
        assert_eq!(layout.total(), 16);
        assert!(layout.needs_reads());
        let steps: Vec<_> = layout.steps().collect();
        let step = |at, source| Ok(Step { at, source });
        assert_eq!(
            steps,
            [
                step(0, Source::Inline { offset: 0, len: 4 }),
                step(
                    4,
                    Source::Chunk {
                        src: 1,
                        start: 0,
                        len: 5
                    }
                ),
                step(9, Source::Pad { len: 3 }),
                step(12, Source::Inline { offset: 4, len: 4 }),
            ]
        );
        // One byte more than the request holds is refused.
        assert!(CallLayout::new(pcl, inline, 15).is_none());
    });
}

/// Result payloads are recorded in the Write chunks the request state
/// stores (`ChunkLayout::set_result_payload`, no lists rebuilt), in order,
/// past a Read chunk stored ahead of them: one longer than its chunk is
/// refused, none is recorded past the last Write chunk (it stays inline),
/// and the lists built again from the layout carry them.
#[test]
fn result_payloads_are_recorded_in_the_stored_write_chunks_in_order() {
    let r0 = [ReadSegment {
        position: 8,
        segment: Segment::new(9, 12, 0x900),
    }];
    let w0 = [Segment::new(1, 60, 0), Segment::new(2, 40, 0)];
    let w1 = [Segment::new(3, 8, 0)];
    let msg = call(
        ChunkListsRef {
            read: &r0,
            write: &[&w0, &w1],
            reply: Some(&w1),
        },
        8,
    );
    let h = decode_call(&msg, &DecodeLimits::server_default()).unwrap();
    let (lists, _) = h.body.chunks_and_inline().unwrap();
    let mut chunks = vec![PclChunk::default(); ParsedChunks::chunks_needed(lists)];
    let mut segs = vec![Segment::default(); ParsedChunks::segments_needed(lists)];
    let layout = ParsedChunks::build(lists, &mut chunks, &mut segs)
        .unwrap()
        .layout();
    assert_eq!(layout.set_result_payload(&mut chunks, 0, 8, 100), Ok(true));
    assert_eq!(
        layout.set_result_payload(&mut chunks, 1, 120, 9),
        Err(PclError::TooBig)
    );
    assert_eq!(layout.set_result_payload(&mut chunks, 1, 120, 8), Ok(true));
    assert_eq!(layout.set_result_payload(&mut chunks, 2, 140, 1), Ok(false));
    assert_eq!(
        layout.set_result_payload(&mut chunks, usize::MAX, 140, 1),
        Ok(false)
    );
    assert_eq!(layout.result_payload(&chunks, 0), Some((8, 100)));
    assert_eq!(layout.result_payload(&chunks, 1), Some((120, 8)));
    assert_eq!(layout.result_payload(&chunks, 2), None);
    let pcl = ParsedChunks::from_layout(&layout, &mut chunks, &segs).unwrap();
    let recorded: Vec<_> = pcl
        .write_chunks()
        .iter()
        .map(|c| (c.position, c.payload_length))
        .collect();
    assert_eq!(recorded, [(8, 100), (120, 8)]);
}

#[test]
fn the_reply_body_is_the_reply_without_payloads_and_pads() {
    let w = [Segment::new(3, 64, 0x300)];
    let msg = call(
        ChunkListsRef {
            read: &[],
            write: &[&w],
            reply: None,
        },
        0,
    );
    with_pcl(&msg, |pcl, _| {
        // A 5-byte payload at 8 of a 20-byte Reply: its pad ends at 16.
        pcl.set_result_payload(0, 8, 5).unwrap();
        let writes: Vec<_> = PayloadWrites::new(pcl, 20)
            .map(|w| w.map(|w| (w.position, w.len)))
            .collect();
        assert_eq!(writes, [Ok((8, 5))]);
        assert_eq!(
            PayloadWrites::new(pcl, 12).last(),
            Some(Err(PclError::BadRegion))
        );
        let body = ReplyBody::new(pcl, 20).unwrap();
        assert_eq!(body.len(), 12);
        let run = |reply_offset, at, len| {
            Ok(BodyRun {
                reply_offset,
                at,
                len,
            })
        };
        let runs: Vec<_> = body.runs(6, 4).collect();
        assert_eq!(runs, [run(6, 0, 2), run(16, 2, 2)]);
        assert_eq!(body.runs(10, 3).last(), Some(Err(PclError::BadRegion)));
        assert_eq!(body.inline_len(28, 40), Ok(Some(40)));
        assert_eq!(body.inline_len(28, 39), Ok(None));
        assert!(ReplyBody::new(pcl, 14).is_err());
        // The body's page part (the page list at [4, 18) of the Reply):
        // two runs, [4, 8) and [16, 18), split by the payload.
        assert_eq!(body.page_part(4, 14, 1), None);
        // A page list of [10, 20) holds one run of four body bytes, at
        // eight in the body.
        assert_eq!(
            body.page_part(10, 10, 4),
            Some(BodyRun {
                reply_offset: 16,
                at: 8,
                len: 4,
            })
        );
        assert_eq!(body.page_part(10, 10, 5), None);
        // Within the payload and its pad: no body bytes.
        assert_eq!(body.page_part(8, 8, 1), None);
        assert_eq!(body.page_part(0, 6, 1), Some(run(0, 0, 6).unwrap()));
        assert_eq!(body.page_part(u32::MAX, 2, 1), None);
    });
}

#[test]
fn a_calls_reads_never_outnumber_their_bound() {
    let seg = |position, handle, len| ReadSegment {
        position,
        segment: Segment::new(handle, len, 0x1000),
    };
    // Two chunks: one of three segments (10, 5 and 1 bytes), one of one
    // (12 bytes), cut into pieces of at most 4 bytes: 3 + 2 + 1 and 3.
    let reads = [
        seg(100, 1, 10),
        seg(100, 2, 5),
        seg(100, 3, 1),
        seg(120, 4, 12),
    ];
    let msg = read_call(&reads, 140);
    with_pcl(&msg, |pcl, _| {
        let pieces = CallReadPieces::new(pcl, 4);
        assert_eq!(pieces.clone().count(), 9);
        // 16 / 4 + 3 and 12 / 4 + 1.
        assert_eq!(pieces.max_count(), 11);
        // One piece per segment when pieces are larger than segments.
        let whole = CallReadPieces::new(pcl, 1 << 20);
        assert_eq!(whole.clone().count(), 4);
        assert_eq!(whole.max_count(), 4);
    });
}

#[test]
fn one_read_chunk_is_laid_out_in_pages_of_its_own() {
    let seg = |len| ReadSegment {
        position: 100,
        segment: Segment::new(1, len, 0x1000),
    };
    // 8 KiB + 3 of data: three pages, padded to 8196.
    let reads = [seg(8192), seg(3)];
    let msg = read_call(&reads, 140);
    with_pcl(&msg, |pcl, inline| {
        assert_eq!(
            PagedCall::new(pcl, inline, 4096, 64),
            Some(PagedCall {
                position: 100,
                chunk_len: 8195,
                padded_len: 8196,
                pages: 3
            })
        );
        // The head page and three chunk pages need four.
        assert_eq!(PagedCall::new(pcl, inline, 4096, 3), None);
        // An inline body longer than the head page is copied instead.
        assert_eq!(PagedCall::new(pcl, inline, 128, 1000), None);
    });
    // Two chunks: copied.
    let two = [
        seg(4),
        ReadSegment {
            position: 120,
            segment: Segment::new(2, 4, 0x2000),
        },
    ];
    let msg = read_call(&two, 140);
    with_pcl(&msg, |pcl, inline| {
        assert_eq!(PagedCall::new(pcl, inline, 4096, 64), None)
    });
}

#[test]
fn page_spans_cut_a_range_at_page_boundaries() {
    let spans: Vec<_> = page_spans(4000, 9000, 4096).unwrap().collect();
    assert_eq!(
        spans,
        vec![
            PageSpan {
                page: 0,
                offset: 4000,
                len: 96
            },
            PageSpan {
                page: 1,
                offset: 0,
                len: 4096
            },
            PageSpan {
                page: 2,
                offset: 0,
                len: 4096
            },
            PageSpan {
                page: 3,
                offset: 0,
                len: 712
            },
        ]
    );
    assert_eq!(spans.iter().map(|s| s.len).sum::<usize>(), 9000);
    assert_eq!(page_spans(0, 0, 4096).unwrap().count(), 0);
    assert!(page_spans(usize::MAX, 2, 4096).is_none());
}

#[test]
fn a_piece_is_cut_into_parts_of_a_buffer_at_most() {
    let p = piece(4, 10, 104, 7);
    let parts: Vec<_> = p.parts(4).collect();
    assert_eq!(
        parts,
        [
            piece(4, 4, 104, 7),
            piece(8, 4, 108, 7),
            piece(12, 2, 112, 7)
        ]
    );
    // A piece that fits is its only part; a zero size still cuts.
    assert_eq!(p.parts(64).collect::<Vec<_>>(), [p]);
    assert_eq!(p.parts(0).count(), 10);
}
