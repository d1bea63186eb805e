//! The server's short way for the Reply of an NFS READ (one Write chunk
//! of one segment) against the general Reply path, its oracle: the header
//! byte for byte as `ParsedChunks::encode_reply_header` writes it for those
//! lists, and the body's regions as `NonPayloadRegions` finds them.

use proptest::prelude::*;
use rpcrdma_proto::proto::decode::decode_call;
use rpcrdma_proto::proto::msg::{DecodeLimits, Segment};
use rpcrdma_proto::proto::pcl::{
    NonPayloadRegions, ParsedChunks, PclChunk, Region, ONE_WRITE_REPLY_HEADER_LEN,
};
use rpcrdma_proto::proto::svc_reply::around_one_payload;

fn words(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|x| x.to_be_bytes()).collect()
}

/// A Call (an NFS READ's) whose one chunk is a Write chunk of `seg`.
fn read_call(seg: &Segment) -> Vec<u8> {
    let (hi, lo) = ((seg.offset >> 32) as u32, seg.offset as u32);
    let mut call = words(&[7, 1, 8, 0, 0, 1, 1, seg.handle, seg.length, hi, lo, 0, 0]);
    call.extend_from_slice(&[0u8; 40]);
    call
}

const LIM: DecodeLimits = DecodeLimits {
    max_segments_per_chunk: 8,
    max_chunks: 4,
    max_payload: u32::MAX,
    max_inline: 4096,
};

proptest! {
    #![proptest_config(ProptestConfig { cases: 4000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn header_is_the_general_one(
        handle: u32, length in 1u32..=u32::MAX, offset: u64, used: u32,
        xid: u32, credits: u32, room in prop_oneof![Just(64usize), 0usize..64],
    ) {
        let seg = Segment::new(handle, length, offset);
        let call = read_call(&seg);
        let h = decode_call(&call, &LIM).unwrap();
        let mut cs = [PclChunk::default(); 1];
        let mut ss = [Segment::default(); 1];
        let mut pcl = ParsedChunks::build(h.chunks().unwrap(), &mut cs, &mut ss).unwrap();
        prop_assert!(pcl.layout().is_one_write_segment());
        // A payload the chunk holds (the general path refuses a longer one
        // before it encodes).
        let written = used % length.saturating_add(1).max(1);
        let written = if written == 0 { 1.min(length) } else { written };
        pcl.set_result_payload(0, 100, written).unwrap();
        let mut general = vec![0u8; room];
        let mut fast = vec![0u8; room];
        let g = pcl.encode_reply_header(xid, credits, 0, &mut general).ok();
        let f = ParsedChunks::encode_one_write_reply_header(xid, credits, &seg, written, &mut fast).ok();
        prop_assert_eq!(g, f);
        if let Some(n) = f {
            prop_assert_eq!(n, ONE_WRITE_REPLY_HEADER_LEN);
            prop_assert_eq!(&general[..n], &fast[..n]);
        }
    }

    #[test]
    fn body_is_what_the_general_walk_finds(
        position in prop_oneof![0u32..9000, (u32::MAX - 9000)..=u32::MAX],
        len in prop_oneof![1u32..70_000, (u32::MAX - 9000)..=u32::MAX],
        xdr_len in prop_oneof![0u32..80_000, (u32::MAX - 9000)..=u32::MAX],
    ) {
        let chunk = PclChunk { position, length: len, payload_length: len, first_segment: 0, segcount: 1 };
        let chunks = [chunk];
        let general: Result<Vec<Region>, _> = NonPayloadRegions::new(&chunks, xdr_len).collect();
        let fast = around_one_payload(position, len, xdr_len);
        match (general, fast) {
            (Ok(regions), Some(parts)) => {
                let mine: Vec<Region> = parts
                    .iter()
                    .filter(|(_, n)| *n != 0)
                    .map(|&(offset, len)| Region { offset, len })
                    .collect();
                prop_assert_eq!(regions, mine);
            }
            (Err(_), None) => {}
            (g, f) => prop_assert!(false, "general {:?}, fast {:?}", g, f),
        }
    }
}

/// Lists of other shapes are not taken: no chunk, a Read chunk, two
/// segments, a Reply chunk.
#[test]
fn other_lists_are_not_one_write_segment() {
    for call in [
        words(&[7, 1, 8, 0, 0, 0, 0, 0x77]),
        words(&[7, 1, 8, 0, 1, 4, 0xabc, 4096, 0, 0x1000, 0, 0, 0, 0x77]),
        words(&[7, 1, 8, 0, 0, 1, 2, 1, 8, 0, 0, 2, 8, 0, 0, 0, 0, 0x77]),
        words(&[7, 1, 8, 0, 0, 0, 1, 1, 1, 64, 0, 0, 0x77]),
    ] {
        let h = decode_call(&call, &LIM).unwrap();
        let mut cs = [PclChunk::default(); 2];
        let mut ss = [Segment::default(); 2];
        let pcl = ParsedChunks::build(h.chunks().unwrap(), &mut cs, &mut ss).unwrap();
        assert!(!pcl.layout().is_one_write_segment());
    }
}
