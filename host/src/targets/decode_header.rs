//! The `decode_header` target: every decoder under several limit sets.
//!
//! Accepted headers re-encode to the same bytes; the client's one-pass
//! reply decoder agrees with the general one on what it takes; accepted Calls build
//! parsed chunk lists and reassemble; every rejected Call with an XID gets
//! the error reply its error calls for.

use alloc::vec;
use alloc::vec::Vec;

use crate::proto::cm::ConnectPrivate;
use crate::proto::decode::{decode_call, decode_header, decode_reply};
use crate::proto::encode::{encode_header, BodyRef, ChunkListsRef, HeaderRef};
use crate::proto::msg::{Body, ChunkLists, DecodeLimits, ErrorBody, Header, ReadSegment, Segment};
use crate::proto::pcl::{ParsedChunks, PclChunk};
use crate::proto::reply_fast::decode_reply_fast;

use super::error_reply::check_decode_error_reply;

const LIMITS: [DecodeLimits; 3] = [
    DecodeLimits {
        max_segments_per_chunk: 16,
        max_chunks: 8,
        max_payload: 1 << 20,
        max_inline: 4096,
    },
    DecodeLimits {
        max_segments_per_chunk: u32::MAX,
        max_chunks: u32::MAX,
        max_payload: u32::MAX,
        max_inline: u32::MAX,
    },
    DecodeLimits::client_default(),
];

/// Credits the error replies carry.
const CREDITS: u32 = 128;

/// Runs every decoder on `data`; panics on a broken invariant.
pub fn decode_header_target(data: &[u8]) {
    for lim in &LIMITS {
        if let Ok(h) = decode_header(data, lim) {
            assert!(h.header_len <= data.len());
            if !matches!(h.body, Body::Error(ErrorBody::Other(_))) {
                assert_eq!(reencode(&h), &data[..h.header_len], "re-encoded header");
            }
        }
        match decode_call(data, lim) {
            Ok(h) => {
                let lists = h.chunks().expect("calls carry chunk lists");
                let mut chunks = vec![PclChunk::default(); ParsedChunks::chunks_needed(lists)];
                let mut segs = vec![Segment::default(); ParsedChunks::segments_needed(lists)];
                let pcl = ParsedChunks::build(lists, &mut chunks, &mut segs).expect("pcl build");
                let base = match (pcl.call_chunk(), &h.body) {
                    (Some(c), _) => c.length,
                    (None, Body::Msg { payload, .. }) => payload.len() as u32,
                    _ => 0,
                };
                for r in pcl.read_regions(base) {
                    r.expect("a validated call reassembles");
                }
            }
            Err(e) => check_decode_error_reply(data, &e, CREDITS),
        }
        let reply = decode_reply(data, lim);
        // The client's one-pass decoder agrees with the general one on
        // every reply it takes.
        if let Some(h) = decode_reply_fast(data, lim) {
            assert_eq!(Ok(h), reply, "fast reply decoder disagrees");
        }
    }
    let _ = ConnectPrivate::decode(data);
}

/// Re-encodes a decoded header from its own fields (not for unknown
/// error codes, which are decoded but never encoded).
pub fn reencode(h: &Header<'_>) -> Vec<u8> {
    fn own(c: &ChunkLists<'_>) -> (Vec<ReadSegment>, Vec<Vec<Segment>>, Option<Vec<Segment>>) {
        (
            c.read.iter().collect(),
            c.write.iter().map(|w| w.segments().collect()).collect(),
            c.reply.map(|r| r.segments().collect()),
        )
    }
    let (read, write, reply) = h.chunks().map(own).unwrap_or_default();
    let wr: Vec<&[Segment]> = write.iter().map(|c| &c[..]).collect();
    let chunks = ChunkListsRef {
        read: &read,
        write: &wr,
        reply: reply.as_deref(),
    };
    let body = match h.body {
        Body::Msg { .. } => BodyRef::Msg(chunks),
        Body::NoMsg { .. } => BodyRef::NoMsg(chunks),
        Body::Msgp { align, thresh, .. } => BodyRef::Msgp {
            align,
            thresh,
            chunks,
        },
        Body::Done => BodyRef::Done,
        Body::Error(e) => BodyRef::Error(e),
    };
    let r = HeaderRef {
        xid: h.xid,
        vers: h.vers,
        credits: h.credits,
        body,
    };
    let mut buf = vec![0u8; r.encoded_len().expect("a decoded header has a length")];
    encode_header(&r, &mut buf).expect("a decoded header re-encodes");
    buf
}
