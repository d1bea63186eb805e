//! Parsed chunk list tests (server side, C svc_rdma_pcl.c equivalents).

use rpcrdma_proto::proto::decode::decode_call;
use rpcrdma_proto::proto::encode::{encode_header, BodyRef, ChunkListsRef, HeaderRef};
use rpcrdma_proto::proto::msg::{DecodeLimits, ReadSegment, Segment};
use rpcrdma_proto::proto::pcl::{
    ChunkLayout, NonPayloadRegions, ParsedChunks, PclChunk, PclError, ReadRegion, ReadRegions,
    Region, PLAIN_REPLY_HEADER_LEN,
};

fn build(body: BodyRef<'_>, payload: usize) -> Vec<u8> {
    let h = HeaderRef {
        xid: 1,
        vers: 1,
        credits: 1,
        body,
    };
    let mut buf = vec![0u8; 4096];
    let n = encode_header(&h, &mut buf).unwrap();
    buf.resize(n + payload, 0);
    buf
}

fn s(h: u32, l: u32) -> Segment {
    Segment::new(h, l, u64::from(h))
}

#[test]
fn groups_and_sorts_read_chunks() {
    let read = [
        ReadSegment::new(24, 30, 8, 30),
        ReadSegment::new(0, 1, 100, 1),
        ReadSegment::new(8, 10, 4, 10),
        ReadSegment::new(0, 2, 28, 2),
        ReadSegment::new(8, 11, 4, 11),
    ];
    let w0 = [s(40, 4096), s(41, 4)];
    let w1 = [s(50, 10)];
    let reply = [s(60, 1000)];
    let b = build(
        BodyRef::NoMsg(ChunkListsRef {
            read: &read,
            write: &[&w0, &w1],
            reply: Some(&reply),
        }),
        0,
    );
    let h = decode_call(&b, &DecodeLimits::server_default()).unwrap();
    let lists = h.chunks().unwrap();
    assert_eq!(ParsedChunks::chunks_needed(lists), 1 + 2 + 2 + 1);
    assert_eq!(ParsedChunks::segments_needed(lists), 5 + 3 + 1);

    let mut chunks = [PclChunk::default(); 6];
    let mut segs = [Segment::default(); 9];
    let pcl = ParsedChunks::build(lists, &mut chunks, &mut segs).unwrap();

    let call = pcl.call_chunk().unwrap();
    assert_eq!((call.position, call.length, call.segcount), (0, 128, 2));
    assert_eq!(pcl.segments(call), &[s(1, 100), s(2, 28)]);

    let rc = pcl.read_chunks();
    assert_eq!(rc.len(), 2);
    assert_eq!((rc[0].position, rc[0].length), (8, 8));
    assert_eq!(pcl.segments(&rc[0]), &[s(10, 4), s(11, 4)]);
    assert_eq!((rc[1].position, rc[1].length), (24, 8));

    let wc = pcl.write_chunks();
    assert_eq!(wc.len(), 2);
    assert_eq!(wc[0].length, 4100);
    assert_eq!(pcl.segments(&wc[1]), &[s(50, 10)]);
    assert_eq!(pcl.reply_chunk().unwrap().length, 1000);
    assert_eq!(pcl.inv_rkey(), None);
}

/// The server keeps a Call's layout and storage and rebuilds the lists for
/// the Reply from them, without decoding again.
#[test]
fn layout_rebuilds_the_same_lists() {
    let read = [
        ReadSegment::new(0, 1, 100, 1),
        ReadSegment::new(8, 10, 4, 10),
    ];
    let w0 = [s(40, 4096), s(41, 4)];
    let reply = [s(60, 1000)];
    let b = build(
        BodyRef::NoMsg(ChunkListsRef {
            read: &read,
            write: &[&w0],
            reply: Some(&reply),
        }),
        0,
    );
    let h = decode_call(&b, &DecodeLimits::server_default()).unwrap();
    let lists = h.chunks().unwrap();
    let mut chunks = [PclChunk::default(); 4];
    let mut segs = [Segment::default(); 5];
    let layout = {
        let mut pcl = ParsedChunks::build(lists, &mut chunks, &mut segs).unwrap();
        pcl.set_result_payload(0, 100, 4000).unwrap();
        pcl.layout()
    };
    let again = ParsedChunks::from_layout(&layout, &mut chunks, &segs).unwrap();
    assert_eq!(again.call_chunk().unwrap().length, 100);
    assert_eq!(again.read_chunks().len(), 1);
    assert_eq!(again.read_chunks()[0].position, 8);
    assert_eq!(again.write_chunks().len(), 1);
    // What was set through the first view is seen through the second.
    assert_eq!(again.write_chunks()[0].payload_length, 4000);
    assert_eq!(
        again.segments(&again.write_chunks()[0]),
        &[s(40, 4096), s(41, 4)]
    );
    assert_eq!(again.reply_chunk().unwrap().length, 1000);
}

#[test]
fn layout_not_matching_its_storage_is_an_error() {
    let w0 = [s(40, 4096), s(41, 4)];
    let b = build(
        BodyRef::Msg(ChunkListsRef {
            read: &[],
            write: &[&w0],
            reply: None,
        }),
        8,
    );
    let h = decode_call(&b, &DecodeLimits::server_default()).unwrap();
    let lists = h.chunks().unwrap();
    let mut chunks = [PclChunk::default(); 1];
    let mut segs = [Segment::default(); 2];
    let layout = ParsedChunks::build(lists, &mut chunks, &mut segs)
        .unwrap()
        .layout();
    // Storage shorter than the layout.
    let mut few: [PclChunk; 0] = [];
    assert_eq!(
        ParsedChunks::from_layout(&layout, &mut few, &segs).unwrap_err(),
        PclError::Inconsistent
    );
    assert_eq!(
        ParsedChunks::from_layout(&layout, &mut chunks, &segs[..1]).unwrap_err(),
        PclError::Inconsistent
    );
    // A default layout describes empty lists: valid over any storage.
    let empty = ParsedChunks::from_layout(&ChunkLayout::default(), &mut chunks, &segs).unwrap();
    assert!(empty.write_chunks().is_empty());
    // A chunk naming segments beyond the storage.
    chunks[0].segcount = 3;
    assert_eq!(
        ParsedChunks::from_layout(&layout, &mut chunks, &segs).unwrap_err(),
        PclError::Inconsistent
    );
}

#[test]
fn storage_too_small_is_an_error_not_a_panic() {
    let read = [ReadSegment::new(0, 1, 4, 0), ReadSegment::new(0, 2, 4, 0)];
    let b = build(
        BodyRef::NoMsg(ChunkListsRef {
            read: &read,
            write: &[],
            reply: None,
        }),
        0,
    );
    let h = decode_call(&b, &DecodeLimits::server_default()).unwrap();
    let lists = h.chunks().unwrap();
    let mut chunks = [PclChunk::default(); 1];
    let mut segs = [Segment::default(); 1];
    assert_eq!(
        ParsedChunks::build(lists, &mut chunks, &mut segs).unwrap_err(),
        PclError::NoSegmentSpace
    );
    let mut chunks: [PclChunk; 0] = [];
    let mut segs = [Segment::default(); 2];
    assert_eq!(
        ParsedChunks::build(lists, &mut chunks, &mut segs).unwrap_err(),
        PclError::NoChunkSpace
    );
}

#[test]
fn capacity_for_limits_covers_worst_case() {
    let lim = DecodeLimits {
        max_segments_per_chunk: 3,
        max_chunks: 2,
        max_payload: 1 << 20,
        max_inline: 4096,
    };
    assert_eq!(ParsedChunks::capacity_for(&lim), (6, 2 + 6 + 3));
}

#[test]
fn inv_rkey_single_handle_even_zero() {
    let w = [s(0, 4096)];
    let b = build(
        BodyRef::Msg(ChunkListsRef {
            read: &[],
            write: &[&w],
            reply: None,
        }),
        0,
    );
    let h = decode_call(&b, &DecodeLimits::server_default()).unwrap();
    let mut chunks = [PclChunk::default(); 1];
    let mut segs = [Segment::default(); 1];
    let pcl = ParsedChunks::build(h.chunks().unwrap(), &mut chunks, &mut segs).unwrap();
    assert_eq!(pcl.inv_rkey(), Some(0));
}

fn rc(position: u32, length: u32) -> PclChunk {
    PclChunk {
        position,
        length,
        ..PclChunk::default()
    }
}

fn collect<I: Iterator<Item = Result<T, PclError>>, T>(it: I) -> Result<Vec<T>, PclError> {
    it.collect()
}

#[test]
fn read_regions_like_svc_rdma_read_multiple_chunks() {
    // Inline body of 40 bytes; chunks at unreduced 8 (len 12) and 28 (len 4).
    let chunks = [rc(8, 12), rc(28, 4)];
    let got = collect(ReadRegions::new(&chunks, 40)).unwrap();
    assert_eq!(
        got,
        vec![
            ReadRegion::Base { offset: 0, len: 8 },
            ReadRegion::Chunk(0),
            ReadRegion::Base { offset: 8, len: 8 },
            ReadRegion::Chunk(1),
            ReadRegion::Base {
                offset: 16,
                len: 24
            },
        ]
    );
    // Chunk at position 0 of the read list and at the very end.
    let chunks = [rc(16, 100)];
    assert_eq!(
        collect(ReadRegions::new(&chunks, 16)).unwrap(),
        vec![
            ReadRegion::Base { offset: 0, len: 16 },
            ReadRegion::Chunk(0)
        ]
    );
    // No chunks: the whole base.
    assert_eq!(
        collect(ReadRegions::new(&[], 12)).unwrap(),
        vec![ReadRegion::Base { offset: 0, len: 12 }]
    );
    // Inconsistent: chunk beyond the base, or overlapping.
    assert_eq!(
        collect(ReadRegions::new(&[rc(20, 4)], 16)),
        Err(PclError::BadRegion)
    );
    assert_eq!(
        collect(ReadRegions::new(&[rc(8, 8), rc(12, 4)], 64)),
        Err(PclError::BadRegion)
    );
}

#[test]
fn nonpayload_regions_like_pcl_process_nonpayloads() {
    let mut w = [
        PclChunk {
            position: 100,
            payload_length: 4093,
            length: 8192,
            ..PclChunk::default()
        },
        PclChunk {
            position: 4200,
            payload_length: 10,
            length: 10,
            ..PclChunk::default()
        },
        PclChunk {
            length: 10,
            ..PclChunk::default()
        },
    ];
    // 100 + 4093 = 4193, rounded up to 4196.
    let got = collect(NonPayloadRegions::new(&w, 4300)).unwrap();
    assert_eq!(
        got,
        vec![
            Region {
                offset: 0,
                len: 100
            },
            Region {
                offset: 4196,
                len: 4
            },
            Region {
                offset: 4212,
                len: 88
            },
        ]
    );
    // No payload in the first chunk: the whole reply.
    w[0].payload_length = 0;
    assert_eq!(
        collect(NonPayloadRegions::new(&w, 64)).unwrap(),
        vec![Region { offset: 0, len: 64 }]
    );
    assert_eq!(
        collect(NonPayloadRegions::new(&[], 64)).unwrap(),
        vec![Region { offset: 0, len: 64 }]
    );
    // Payload ending past the reply is an error, not a wrap.
    let bad = [PclChunk {
        position: 60,
        payload_length: 10,
        ..PclChunk::default()
    }];
    assert_eq!(
        collect(NonPayloadRegions::new(&bad, 64)),
        Err(PclError::BadRegion)
    );
    let bad = [PclChunk {
        position: u32::MAX - 2,
        payload_length: 10,
        ..PclChunk::default()
    }];
    assert_eq!(
        collect(NonPayloadRegions::new(&bad, 64)),
        Err(PclError::BadRegion)
    );
}

#[test]
fn set_result_payload_checks_chunk_size() {
    let w = [s(1, 4096)];
    let b = build(
        BodyRef::Msg(ChunkListsRef {
            read: &[],
            write: &[&w],
            reply: None,
        }),
        0,
    );
    let h = decode_call(&b, &DecodeLimits::server_default()).unwrap();
    let mut chunks = [PclChunk::default(); 1];
    let mut segs = [Segment::default(); 1];
    let mut pcl = ParsedChunks::build(h.chunks().unwrap(), &mut chunks, &mut segs).unwrap();
    assert_eq!(pcl.set_result_payload(0, 120, 4097), Err(PclError::TooBig));
    assert_eq!(pcl.set_result_payload(1, 120, 1), Err(PclError::NoChunk));
    pcl.set_result_payload(0, 120, 4096).unwrap();
    let regions = collect(pcl.nonpayload_regions(4300)).unwrap();
    assert_eq!(
        regions,
        vec![
            Region {
                offset: 0,
                len: 120
            },
            Region {
                offset: 4216,
                len: 84
            }
        ]
    );
    // A reply shorter than the payload's end is inconsistent.
    assert_eq!(
        collect(pcl.nonpayload_regions(300)),
        Err(PclError::BadRegion)
    );
    assert_eq!(
        collect(pcl.read_regions(10)).unwrap(),
        vec![ReadRegion::Base { offset: 0, len: 10 }]
    );
}

fn words(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|x| x.to_be_bytes()).collect()
}

#[test]
fn reply_header_echoes_trimmed_write_list_like_svc_rdma_sendto() {
    use rpcrdma_proto::proto::encode::EncodeError;
    // The golden Write-list call: a 64 KiB segment plus the 4-byte pad.
    let b = rpcrdma_proto::proto::golden::MSG_WRITE_LIST;
    let h = decode_call(b, &DecodeLimits::server_default()).unwrap();
    let mut chunks = [PclChunk::default(); 1];
    let mut segs = [Segment::default(); 2];
    let mut pcl = ParsedChunks::build(h.chunks().unwrap(), &mut chunks, &mut segs).unwrap();
    pcl.set_result_payload(0, 112, 4097).unwrap();
    let mut out = [0u8; 128];
    let n = pcl.encode_reply_header(0x22, 64, 200, &mut out).unwrap();
    #[rustfmt::skip]
    let want = words(&[
        0x22, 1, 64, 0,               // xid, vers, credits, RDMA_MSG
        0,                            // empty Read list
        1, 2,                         // Write chunk of 2 segments
        0x5566_7788, 4097, 0x22, 0,   // trimmed to the payload
        0x0abc, 0, 0x22, 0xffff_fff0, // pad segment: nothing written
        0,                            // end of Write list
        0,                            // no Reply chunk
    ]);
    assert_eq!(&out[..n], &want[..]);
    // The fault the server injects for the client's overrun check: the
    // first segment claims 4096 bytes more, and the decoder sees them.
    let mut lie = out;
    ParsedChunks::overstate_first_write_segment(&mut lie[..n], 4096).unwrap();
    let r = rpcrdma_proto::proto::decode::decode_reply(&lie[..n], &DecodeLimits::client_default())
        .unwrap();
    match r.body {
        rpcrdma_proto::proto::msg::Body::Msg { chunks, .. } => {
            let total: u32 = chunks.write.iter().map(|c| c.total_length()).sum();
            assert_eq!(total, 4097 + 4096);
        }
        _ => panic!("not RDMA_MSG"),
    }
    // Only where there is a Write chunk, and never by overflowing.
    assert_eq!(
        ParsedChunks::overstate_first_write_segment(&mut lie[..n], u32::MAX),
        None
    );
    assert_eq!(
        ParsedChunks::overstate_first_write_segment(&mut lie[..16], 1),
        None
    );
    // Not enough room.
    assert_eq!(
        pcl.encode_reply_header(0x22, 64, 0, &mut out[..40]),
        Err(EncodeError::NoSpace)
    );

    // A Reply chunk makes it RDMA_NOMSG, trimmed to the reply length.
    let b = rpcrdma_proto::proto::golden::MSG_REPLY_CHUNK;
    let h = decode_call(b, &DecodeLimits::server_default()).unwrap();
    let mut chunks = [PclChunk::default(); 1];
    let mut segs = [Segment::default(); 3];
    let pcl = ParsedChunks::build(h.chunks().unwrap(), &mut chunks, &mut segs).unwrap();
    let n = pcl.encode_reply_header(0x33, 64, 0x500, &mut out).unwrap();
    #[rustfmt::skip]
    let want = words(&[
        0x33, 1, 64, 1, 0, 0, 1, 3,
        0x0102_0001, 0x400, 0x33, 0,
        0x0102_0002, 0x100, 0x33, 0x0001_0000,
        0x0102_0003, 0, 0x33, 0x0002_0000,
    ]);
    assert_eq!(&out[..n], &want[..]);
    // The decoder accepts what the encoder produced, as a reply.
    rpcrdma_proto::proto::decode::decode_reply(&out[..n], &DecodeLimits::client_default()).unwrap();
    assert_eq!(
        pcl.encode_reply_header(0x33, 64, 0x8501, &mut out),
        Err(EncodeError::TooLarge)
    );
}

#[test]
fn plain_reply_header_is_the_general_one_for_empty_lists() {
    let call = words(&[7, 1, 8, 0, 0, 0, 0, 0x77]);
    let h = decode_call(&call, &LIM_FOR_PLAIN).unwrap();
    let mut cs = [PclChunk::default(); 1];
    let mut ss = [Segment::default(); 1];
    let pcl = ParsedChunks::build(h.chunks().unwrap(), &mut cs, &mut ss).unwrap();
    assert!(pcl.layout().is_empty() && pcl.layout().has_no_result_chunks());
    for (xid, credits) in [(0, 0), (0x1234_5678, 128), (u32::MAX, u32::MAX)] {
        let mut general = [0u8; 64];
        let mut plain = [0u8; 64];
        let n = pcl
            .encode_reply_header(xid, credits, 0, &mut general)
            .unwrap();
        let m = ParsedChunks::encode_plain_reply_header(xid, credits, &mut plain).unwrap();
        assert_eq!((n, &general[..n]), (m, &plain[..m]));
        assert_eq!(m, PLAIN_REPLY_HEADER_LEN);
    }
    // Too little room is an error, not a short header.
    assert!(ParsedChunks::encode_plain_reply_header(1, 1, &mut [0u8; 27]).is_err());
    // A Call with a Read chunk (an NFS WRITE's) and no Write or Reply
    // chunk: the same header.
    let call = words(&[7, 1, 8, 0, 1, 4, 0xabc, 4096, 0, 0x1000, 0, 0, 0, 0x77]);
    let h = decode_call(&call, &LIM_FOR_PLAIN).unwrap();
    let mut cs = [PclChunk::default(); 1];
    let mut ss = [Segment::default(); 1];
    let pcl = ParsedChunks::build(h.chunks().unwrap(), &mut cs, &mut ss).unwrap();
    assert!(pcl.layout().has_no_result_chunks() && !pcl.layout().is_empty());
    assert_eq!(pcl.inv_rkey(), Some(0xabc));
    let mut general = [0u8; 64];
    let mut plain = [0u8; 64];
    let n = pcl.encode_reply_header(9, 32, 0, &mut general).unwrap();
    let m = ParsedChunks::encode_plain_reply_header(9, 32, &mut plain).unwrap();
    assert_eq!((n, &general[..n]), (m, &plain[..m]));
}

const LIM_FOR_PLAIN: DecodeLimits = DecodeLimits {
    max_segments_per_chunk: 8,
    max_chunks: 4,
    max_payload: 1 << 20,
    max_inline: 4096,
};

/// The server records a result payload in the stored Write chunk it names
/// (`ChunkLayout::set_result_payload`) as the built lists would
/// (`ParsedChunks::set_result_payload`): the same chunks written, the same
/// refusals, and no Write chunk past the last.
#[test]
fn a_payload_recorded_through_the_layout_is_the_lists_one() {
    let w0 = [s(40, 4096), s(41, 4)];
    let w1 = [s(50, 10)];
    let reply = [s(60, 1000)];
    let b = build(
        BodyRef::Msg(ChunkListsRef {
            read: &[],
            write: &[&w0, &w1],
            reply: Some(&reply),
        }),
        0,
    );
    let h = decode_call(&b, &DecodeLimits::server_default()).unwrap();
    let lists = h.chunks().unwrap();
    let mut chunks = [PclChunk::default(); 3];
    let mut segs = [Segment::default(); 4];
    let layout = ParsedChunks::build(lists, &mut chunks, &mut segs)
        .unwrap()
        .layout();
    for (index, length) in [(0, 4100), (0, 4101), (1, 10), (1, 0), (2, 1), (9, 1)] {
        let mut by_layout = chunks;
        let mut by_lists = chunks;
        let got = layout.set_result_payload(&mut by_layout, index, 8, length);
        let want = ParsedChunks::from_layout(&layout, &mut by_lists, &segs)
            .unwrap()
            .set_result_payload(index, 8, length);
        match want {
            Ok(()) => {
                assert_eq!(got, Ok(true));
                assert_eq!(layout.result_payload(&by_layout, index), Some((8, length)));
            }
            Err(PclError::NoChunk) => assert_eq!(got, Ok(false)),
            Err(e) => assert_eq!(got, Err(e)),
        }
        assert_eq!(by_layout, by_lists, "payload {index} of {length} bytes");
    }
    // The Reply chunk is no Write chunk.
    assert_eq!(layout.result_payload(&chunks, 2), None);
}
