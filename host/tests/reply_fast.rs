//! The client's one-pass reply decoder against the general one, its
//! oracle: on the shapes it takes it must give the general decoder's
//! result, and everything else it must leave to it (`None`), on valid,
//! random and mutated input.

mod common;

use common::{cfg, seg, words};
use proptest::prelude::*;
use rpcrdma_proto::proto::decode::decode_reply;
use rpcrdma_proto::proto::msg::{Body, DecodeLimits};
use rpcrdma_proto::proto::reply_fast::decode_reply_fast;

const LIM: DecodeLimits = DecodeLimits {
    max_segments_per_chunk: 8,
    max_chunks: 4,
    max_payload: 1 << 20,
    max_inline: 4096,
};

/// The fast decoder either agrees with the general one or defers to it.
fn agrees(buf: &[u8], lim: &DecodeLimits) -> Result<bool, TestCaseError> {
    match decode_reply_fast(buf, lim) {
        Some(h) => {
            prop_assert_eq!(Ok(h), decode_reply(buf, lim));
            Ok(true)
        }
        None => Ok(false),
    }
}

/// The common shapes, well formed: 0 inline, 1 one Write chunk, 2 a Reply
/// chunk; with a payload.
fn common() -> impl Strategy<Value = Vec<u8>> {
    (
        0u8..3,
        any::<u32>(),
        0u32..512,
        prop::collection::vec(seg(), 1..10),
        prop::collection::vec(any::<u8>(), 0..200),
    )
        .prop_map(|(shape, xid, credits, segs, payload)| {
            let mut w = vec![xid, 1, credits, if shape == 2 { 1 } else { 0 }, 0];
            match shape {
                0 => w.extend([0, 0]),
                1 => {
                    w.extend([1, segs.len() as u32]);
                    segs.iter().for_each(|s| w.extend(s));
                    w.extend([0, 0]);
                }
                _ => {
                    w.extend([0, 1, segs.len() as u32]);
                    segs.iter().for_each(|s| w.extend(s));
                }
            }
            let mut b = words(&w);
            b.extend(payload);
            b
        })
}

proptest! {
    #![proptest_config(cfg(4000))]

    #[test]
    fn common_shapes_decode_as_the_general_decoder_does(buf in common()) {
        let taken = agrees(&buf, &LIM)?;
        // Every common shape the general decoder accepts is taken here.
        prop_assert_eq!(taken, decode_reply(&buf, &LIM).is_ok());
    }

    #[test]
    fn mutated_shapes_agree_or_defer(
        buf in common(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        cut in any::<prop::sample::Index>(),
        cut_it in any::<bool>(),
    ) {
        let mut b = buf;
        for (i, v) in flips {
            let i = i.index(b.len());
            b[i] = v;
        }
        if cut_it {
            b.truncate(cut.index(b.len() + 1));
        }
        agrees(&b, &LIM)?;
    }

    #[test]
    fn word_soup_agrees_or_defers(
        ws in prop::collection::vec(prop_oneof![0u32..3, Just(1u32), any::<u32>()], 0..40),
        tail in prop::collection::vec(any::<u8>(), 0..5),
    ) {
        let mut b = words(&ws);
        b.extend(tail);
        agrees(&b, &LIM)?;
        let tight = DecodeLimits { max_segments_per_chunk: 1, max_chunks: 0, max_inline: 64, ..LIM };
        agrees(&b, &tight)?;
    }

    /// An NFS READ's usual reply (one Write chunk of one segment), which
    /// the decoder takes from its thirteen words at once, with any
    /// segment, trailing payload and limits: as the general decoder, or
    /// left to it.
    #[test]
    fn one_segment_replies_agree_under_any_limits(
        xid in any::<u32>(),
        count in prop_oneof![Just(1u32), 0u32..3],
        seg in prop::array::uniform4(any::<u32>()),
        tail in prop::array::uniform2(prop_oneof![Just(0u32), 0u32..3]),
        payload in prop::collection::vec(any::<u8>(), 0..40),
        segs in 0u32..3,
        chunks in 0u32..3,
        inline in prop_oneof![Just(4096u32), 40u32..100],
    ) {
        let mut ws = vec![xid, 1, 32, 0, 0, 1, count];
        ws.extend(seg);
        ws.extend(tail);
        let mut b = words(&ws);
        b.extend(payload);
        let lim = DecodeLimits {
            max_segments_per_chunk: segs,
            max_chunks: chunks,
            max_inline: inline,
            ..LIM
        };
        agrees(&b, &lim)?;
        // Under the usual limits the well-formed ones are taken.
        if count == 1 && tail == [0, 0] {
            prop_assert!(agrees(&b, &LIM)?);
        }
    }
}

#[test]
fn the_common_shapes_take_the_fast_path() {
    let seg = [7, 4096, 0, 0x1000];
    let inline = words(&[1, 1, 32, 0, 0, 0, 0, 0xdead]);
    let mut one_write = words(&[2, 1, 32, 0, 0, 1, 1]);
    one_write.extend(words(&seg));
    one_write.extend(words(&[0, 0, 0xbeef]));
    let mut reply_chunk = words(&[3, 1, 32, 1, 0, 0, 1, 1]);
    reply_chunk.extend(words(&seg));
    for (buf, written) in [(&inline, 0), (&one_write, 4096)] {
        let h = decode_reply_fast(buf, &LIM).expect("fast path");
        assert_eq!(Ok(h), decode_reply(buf, &LIM));
        match h.body {
            Body::Msg { chunks, payload } => {
                assert_eq!(chunks.write.total_length(), written);
                assert_eq!(payload.len(), 4);
            }
            _ => panic!("not RDMA_MSG"),
        }
    }
    let h = decode_reply_fast(&reply_chunk, &LIM).expect("fast path");
    assert_eq!(Ok(h), decode_reply(&reply_chunk, &LIM));
    // Two Write chunks, a Read list, RDMA_ERROR: the general decoder's.
    let mut two = words(&[2, 1, 32, 0, 0, 1, 1]);
    two.extend(words(&seg));
    two.extend(words(&[1, 1]));
    two.extend(words(&seg));
    two.extend(words(&[0, 0]));
    assert!(decode_reply_fast(&two, &LIM).is_none());
    assert!(decode_reply_fast(&words(&[4, 1, 32, 0, 1, 0, 1, 7, 8, 0, 0, 0, 0]), &LIM).is_none());
    assert!(decode_reply_fast(&words(&[5, 1, 32, 4, 1]), &LIM).is_none());
}
