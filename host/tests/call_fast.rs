//! The server's one-pass Call decoder against the general path, its
//! oracle (`decode_call`, then `ParsedChunks::build`): on the shapes it
//! takes it must store what the general path stores and say what it
//! says, and everything else it must leave to it (`None`), on valid,
//! random and mutated input.

mod common;

use common::{cfg, seg, words};
use proptest::prelude::*;
use rpcrdma_proto::proto::call_fast::decode_call_fast;
use rpcrdma_proto::proto::decode::decode_call;
use rpcrdma_proto::proto::msg::{DecodeLimits, Segment};
use rpcrdma_proto::proto::pcl::{ParsedChunks, PclChunk};
use rpcrdma_proto::proto::svc_call::{CallLayout, PagedCall};

const LIM: DecodeLimits = DecodeLimits {
    max_segments_per_chunk: 8,
    max_chunks: 4,
    max_payload: 1 << 20,
    max_inline: 4096,
};

/// Storage as the server gives the fast decoder (its inline lists).
const STORE: usize = 4;

/// The fast decoder either agrees with the general path or defers to it.
fn agrees(buf: &[u8], lim: &DecodeLimits) -> Result<bool, TestCaseError> {
    // Storage left dirty by an earlier Call: the decoder must write what
    // it hands out.
    let junk = PclChunk {
        position: 7,
        length: 7,
        payload_length: 7,
        first_segment: 7,
        segcount: 7,
    };
    let mut chunks = [junk; STORE];
    let mut segs = [Segment::new(9, 9, 9); STORE];
    let Some(f) = decode_call_fast(buf, lim, || Some((&mut chunks[..], &mut segs[..]))) else {
        return Ok(false);
    };
    let hdr = decode_call(buf, lim);
    prop_assert!(hdr.is_ok(), "general decoder refused: {:?}", hdr);
    let hdr = hdr.unwrap();
    prop_assert_eq!(hdr.xid, f.xid);
    prop_assert_eq!(hdr.credits, f.credits);
    prop_assert_eq!(hdr.header_len, f.header_len);
    let (lists, _) = hdr.body.chunks_and_inline().unwrap();
    let mut gc = vec![PclChunk::default(); ParsedChunks::chunks_needed(lists)];
    let mut gs = vec![Segment::default(); ParsedChunks::segments_needed(lists)];
    let pcl = ParsedChunks::build(lists, &mut gc, &mut gs);
    prop_assert!(pcl.is_ok(), "build refused: {:?}", pcl);
    let layout = pcl.unwrap().layout();
    prop_assert_eq!(&layout, &f.layout);
    // The Read chunk as the layout finds it in the storage (copied out:
    // the parsed lists below borrow the storage).
    let only = f
        .layout
        .only_read_chunk(&chunks, &segs)
        .map(|(c, s)| (*c, s.to_vec()));
    let fast_inv = f.layout.inv_rkey(&segs);
    let fast = ParsedChunks::from_layout(&f.layout, &mut chunks, &segs).unwrap();
    let mut gc2 = gc.clone();
    let general = ParsedChunks::from_layout(&layout, &mut gc2, &gs).unwrap();
    prop_assert!(fast.call_chunk().is_none() && general.call_chunk().is_none());
    prop_assert!(fast.read_chunks().len() <= 1);
    prop_assert_eq!(fast.read_chunks(), general.read_chunks());
    prop_assert_eq!(f.read_chunk, !fast.read_chunks().is_empty());
    for (a, b) in fast.read_chunks().iter().zip(general.read_chunks()) {
        prop_assert_eq!(fast.segments(a), general.segments(b));
    }
    // That Read chunk, and the paged layout decided from it alone, against
    // the general path's.
    prop_assert_eq!(only.is_some(), f.read_chunk);
    if let (Some((c, s)), [chunk]) = (&only, general.read_chunks()) {
        prop_assert_eq!((c.position, c.length), (chunk.position, chunk.length));
        prop_assert_eq!(&s[..], general.segments(chunk));
        let inline_len = buf.len() - f.header_len;
        for (arg_max, page, pages) in [(1 << 20, 4096, 257), (300, 4096, 2), (4096, 64, 8)] {
            let general_paged = CallLayout::new(&general, inline_len, arg_max)
                .and_then(|_| PagedCall::new(&general, inline_len, page, pages));
            let fast_paged =
                PagedCall::of_one_chunk(c.position, c.length, inline_len, arg_max, page, pages);
            prop_assert_eq!(fast_paged, general_paged);
        }
    }
    prop_assert_eq!(fast_inv, general.inv_rkey());
    prop_assert_eq!(fast.write_chunks(), general.write_chunks());
    prop_assert_eq!(fast.reply_chunk(), general.reply_chunk());
    for (a, b) in fast.write_chunks().iter().zip(general.write_chunks()) {
        prop_assert_eq!(fast.segments(a), general.segments(b));
    }
    if let (Some(a), Some(b)) = (fast.reply_chunk(), general.reply_chunk()) {
        prop_assert_eq!(fast.segments(a), general.segments(b));
    }
    prop_assert_eq!(
        f.no_chunks,
        lists.write.is_empty() && lists.reply.is_none() && lists.read.is_empty()
    );
    Ok(true)
}

/// A Read list: segments at positions from `positions` (a multiple of
/// four, small enough to fall within or just beyond the inline body), so
/// that one chunk, several and misplaced ones all occur.
fn read_list() -> impl Strategy<Value = Vec<(u32, [u32; 4])>> {
    prop::collection::vec(
        (prop_oneof![Just(0u32), Just(4), Just(8), 0u32..64], seg()),
        0..4,
    )
}

/// The common shapes, well formed: a Read list or not, up to three Write
/// chunks and a Reply chunk or not; with an RPC message behind.
fn common() -> impl Strategy<Value = Vec<u8>> {
    (
        any::<u32>(),
        0u32..512,
        read_list(),
        prop::collection::vec(prop::collection::vec(seg(), 1..4), 0..4),
        prop::option::of(prop::collection::vec(seg(), 1..4)),
        prop::collection::vec(any::<u8>(), 0..200),
    )
        .prop_map(|(xid, credits, reads, writes, reply, payload)| {
            let mut w = vec![xid, 1, credits, 0];
            for (pos, s) in &reads {
                w.extend([1, *pos]);
                w.extend(s);
            }
            w.push(0);
            for c in &writes {
                w.extend([1, c.len() as u32]);
                c.iter().for_each(|s| w.extend(s));
            }
            w.push(0);
            match &reply {
                Some(c) => {
                    w.extend([1, c.len() as u32]);
                    c.iter().for_each(|s| w.extend(s));
                }
                None => w.push(0),
            }
            let mut b = words(&w);
            b.extend(payload);
            b
        })
}

#[test]
fn a_read_call_is_decoded_in_one_pass() {
    // NFS READ: one Write chunk of one 4 KiB segment, no Reply chunk.
    let mut w = vec![0x1234, 1, 64, 0, 0, 1, 1, 0xabc, 4096, 0, 0x1000, 0, 0];
    w.extend([0x1234, 0, 2, 100003, 4, 25]);
    let b = words(&w);
    let mut chunks = [PclChunk::default(); STORE];
    let mut segs = [Segment::default(); STORE];
    let f = decode_call_fast(&b, &LIM, || Some((&mut chunks[..], &mut segs[..]))).unwrap();
    assert_eq!(
        (f.xid, f.credits, f.header_len, f.no_chunks),
        (0x1234, 64, 52, false)
    );
    assert_eq!(chunks[0].length, 4096);
    assert_eq!(segs[0], Segment::new(0xabc, 4096, 0x1000));
    assert!(agrees(&b, &LIM).unwrap());
}

#[test]
fn a_write_call_is_decoded_in_one_pass() {
    // NFS WRITE: one Read chunk of one 4 KiB segment at position 8, no
    // Write list, no Reply chunk, an 8-byte inline body.
    let w = vec![0x77, 1, 32, 0, 1, 8, 0xabc, 4096, 0, 0x1000, 0, 0, 0, 5, 6];
    let b = words(&w);
    let mut chunks = [PclChunk::default(); STORE];
    let mut segs = [Segment::default(); STORE];
    let f = decode_call_fast(&b, &LIM, || Some((&mut chunks[..], &mut segs[..]))).unwrap();
    assert_eq!(
        (f.xid, f.credits, f.header_len, f.read_chunk, f.no_chunks),
        (0x77, 32, 52, true, false)
    );
    assert_eq!((chunks[0].position, chunks[0].length), (8, 4096));
    assert_eq!(segs[0], Segment::new(0xabc, 4096, 0x1000));
    assert!(agrees(&b, &LIM).unwrap());
}

#[test]
fn what_the_fast_decoder_leaves_goes_to_the_general_path() {
    let mut chunks = [PclChunk::default(); STORE];
    let mut segs = [Segment::default(); STORE];
    let base = [1u32, 1, 8, 0, 0, 0, 0, 1, 0];
    let mut cases: Vec<Vec<u32>> = vec![];
    // A call chunk (Read segment at position zero) in an RDMA_MSG.
    cases.push(vec![1, 1, 8, 0, 1, 0, 1, 16, 0, 0, 0, 0, 0, 0]);
    // Two Read chunks (positions 4 and 8).
    let mut c = vec![1, 1, 8, 0, 1, 4, 1, 16, 0, 0, 1, 8, 1, 16, 0, 0, 0, 0, 0];
    c.extend([7, 7, 7]);
    cases.push(c);
    // A Read chunk beyond the inline body (position 16, 4 bytes inline).
    cases.push(vec![1, 1, 8, 0, 1, 16, 1, 16, 0, 0, 0, 0, 0, 7]);
    // A misaligned position.
    cases.push(vec![1, 1, 8, 0, 1, 2, 1, 16, 0, 0, 0, 0, 0, 7]);
    // RDMA_NOMSG, RDMA_DONE, version 2.
    let mut c = base.to_vec();
    c[3] = 1;
    cases.push(c);
    let mut c = base.to_vec();
    c[3] = 3;
    cases.push(c);
    let mut c = base.to_vec();
    c[1] = 2;
    cases.push(c);
    // A discriminator of 2.
    cases.push(vec![1, 1, 8, 0, 0, 2]);
    // Five segments in all: more than the storage holds.
    let mut c = vec![1, 1, 8, 0, 0, 1, 5];
    (0..5).for_each(|_| c.extend([1, 1, 0, 0]));
    c.extend([0, 0]);
    cases.push(c);
    // Truncated.
    cases.push(vec![1, 1, 8, 0, 0, 1, 2, 1, 1, 0, 0]);
    for c in cases {
        assert!(
            decode_call_fast(&words(&c), &LIM, || Some((&mut chunks[..], &mut segs[..]))).is_none(),
            "{c:?}"
        );
    }
}

/// Common shapes the server's inline storage holds (four segments at
/// most, lengths that cannot overflow): the fast decoder must take them.
fn held() -> impl Strategy<Value = Vec<u8>> {
    (
        any::<u32>(),
        0usize..2,
        prop::collection::vec(any::<u32>(), 0..2),
        prop::option::of(1usize..2),
        0u32..70_000,
    )
        .prop_map(|(xid, read_segs, handles, reply, len)| {
            let mut w = vec![xid, 1, 32, 0];
            // A Read chunk at position 8 of the 12-byte body below.
            (0..read_segs).for_each(|_| w.extend([1, 8, 3, len, 0, 0x4000]));
            w.push(0);
            for h in &handles {
                w.extend([1, 1, *h, len, 0, 0x2000]);
            }
            w.push(0);
            match reply {
                Some(n) => {
                    w.extend([1, n as u32]);
                    (0..n).for_each(|_| w.extend([5, len, 1, 0]));
                }
                None => w.push(0),
            }
            w.extend([xid, 0, 2]);
            words(&w)
        })
}

/// The two one-segment shapes the decoder takes at once, from their
/// thirteen words (an NFS READ's Write chunk, an NFS WRITE's Read chunk):
/// any segment, a position within, at or beyond the inline body, any
/// body.
fn one_segment_shapes() -> impl Strategy<Value = Vec<u8>> {
    (
        any::<bool>(),
        any::<u32>(),
        prop_oneof![Just(0u32), Just(4), Just(8), 0u32..80],
        seg(),
        prop::collection::vec(any::<u8>(), 0..64),
    )
        .prop_map(|(read, xid, pos, s, body)| {
            let mut w = vec![xid, 1, 32, 0];
            if read {
                w.extend([1, pos]);
                w.extend(s);
                w.extend([0, 0, 0]);
            } else {
                w.extend([0, 1, 1]);
                w.extend(s);
                w.extend([0, 0]);
            }
            let mut b = words(&w);
            b.extend(body);
            b
        })
}

proptest! {
    #![proptest_config(cfg(4096))]

    #[test]
    fn shapes_the_storage_holds_are_taken(buf in held()) {
        prop_assert!(agrees(&buf, &LIM)?);
    }

    #[test]
    fn the_common_shapes_agree(buf in common()) {
        agrees(&buf, &LIM)?;
    }

    #[test]
    fn mutated_common_shapes_agree_or_defer(
        buf in common(),
        at in any::<prop::sample::Index>(),
        v in any::<u8>(),
    ) {
        let mut buf = buf;
        let i = at.index(buf.len().min(120));
        buf[i] = v;
        agrees(&buf, &LIM)?;
    }

    #[test]
    fn random_bytes_agree_or_defer(buf in prop::collection::vec(any::<u8>(), 0..160)) {
        agrees(&buf, &LIM)?;
    }

    #[test]
    fn tight_limits_agree_or_defer(buf in common(), segs in 1u32..3, chunks in 0u32..3) {
        let lim = DecodeLimits { max_segments_per_chunk: segs, max_chunks: chunks, ..LIM };
        agrees(&buf, &lim)?;
    }

    #[test]
    fn one_segment_shapes_agree_or_defer_under_any_limits(
        buf in one_segment_shapes(),
        segs in 0u32..3,
        chunks in 0u32..3,
        payload in prop_oneof![Just(0u32), 0u32..70_000, Just(1 << 20)],
        inline in prop_oneof![Just(4096u32), 40u32..120],
    ) {
        let lim = DecodeLimits {
            max_segments_per_chunk: segs,
            max_chunks: chunks,
            max_payload: payload,
            max_inline: inline,
        };
        agrees(&buf, &lim)?;
    }

    #[test]
    fn one_segment_shapes_are_taken_under_the_usual_limits(buf in one_segment_shapes()) {
        // Taken unless the Read chunk's position is zero, not a multiple
        // of four or beyond the body: those the general path judges too.
        let taken = agrees(&buf, &LIM)?;
        let read = buf[19] == 1;
        let pos = u32::from_be_bytes([buf[20], buf[21], buf[22], buf[23]]);
        let body = buf.len() - 52;
        let placed = pos != 0 && pos % 4 == 0 && pos as usize <= body;
        let length = u32::from_be_bytes([buf[28], buf[29], buf[30], buf[31]]);
        let fits = !read || (length <= LIM.max_payload && pos.checked_add(length).is_some());
        prop_assert_eq!(taken, !read || (placed && fits));
    }
}
