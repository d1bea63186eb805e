//! Fuzz target for the transport header decoders.
//!
//! Feeds arbitrary bytes to every decoder under several limit sets, and for
//! every accepted call also builds the parsed chunk lists and walks the
//! Call's regions, so the code the server runs on peer input is covered.
//! Any panic (including an arithmetic overflow, since overflow checks are
//! on) or an accepted header whose invariants fail is a crash.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rpcrdma_proto::proto::cm::ConnectPrivate;
use rpcrdma_proto::proto::decode::{decode_call, decode_header, decode_reply};
use rpcrdma_proto::proto::encode::{
    encode_error_for, encode_header, BodyRef, ChunkListsRef, HeaderRef,
};
use rpcrdma_proto::proto::msg::{Body, DecodeLimits, ErrorBody, Segment};
use rpcrdma_proto::proto::pcl::{ParsedChunks, PclChunk};

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

fuzz_target!(|data: &[u8]| {
    for lim in &LIMITS {
        if let Ok(h) = decode_header(data, lim) {
            assert!(h.header_len <= data.len());
            // Re-encode from the decoded fields: must reproduce the header.
            if let Some(c) = h.chunks() {
                let mut read = [Default::default(); 64];
                let mut nr = 0;
                for s in c.read.iter() {
                    if nr == read.len() {
                        return;
                    }
                    read[nr] = s;
                    nr += 1;
                }
                let mut segs = [Segment::default(); 256];
                let mut ns = 0;
                let mut bounds = [(0usize, 0usize); 16];
                let mut nw = 0;
                for w in c.write.iter() {
                    if nw == bounds.len() {
                        return;
                    }
                    let start = ns;
                    for s in w.segments() {
                        if ns == segs.len() {
                            return;
                        }
                        segs[ns] = s;
                        ns += 1;
                    }
                    bounds[nw] = (start, ns);
                    nw += 1;
                }
                let rstart = ns;
                if let Some(r) = c.reply {
                    for s in r.segments() {
                        if ns == segs.len() {
                            return;
                        }
                        segs[ns] = s;
                        ns += 1;
                    }
                }
                let mut wrefs: [&[Segment]; 16] = [&[]; 16];
                for i in 0..nw {
                    wrefs[i] = &segs[bounds[i].0..bounds[i].1];
                }
                let chunks = ChunkListsRef {
                    read: &read[..nr],
                    write: &wrefs[..nw],
                    reply: c.reply.map(|_| &segs[rstart..ns]),
                };
                let body = match h.body {
                    Body::Msg { .. } => BodyRef::Msg(chunks),
                    Body::NoMsg { .. } => BodyRef::NoMsg(chunks),
                    Body::Msgp { align, thresh, .. } => BodyRef::Msgp {
                        align,
                        thresh,
                        chunks,
                    },
                    _ => unreachable!(),
                };
                let r = HeaderRef {
                    xid: h.xid,
                    vers: h.vers,
                    credits: h.credits,
                    body,
                };
                let mut out = vec![0u8; h.header_len];
                let n = encode_header(&r, &mut out).expect("re-encode");
                assert_eq!(&out[..n], &data[..h.header_len]);
            } else if !matches!(h.body, Body::Error(ErrorBody::Other(_))) {
                let mut out = [0u8; 32];
                let body = match h.body {
                    Body::Done => BodyRef::Done,
                    Body::Error(e) => BodyRef::Error(e),
                    _ => unreachable!(),
                };
                let r = HeaderRef {
                    xid: h.xid,
                    vers: h.vers,
                    credits: h.credits,
                    body,
                };
                let n = encode_header(&r, &mut out).expect("re-encode");
                assert_eq!(&out[..n], &data[..h.header_len]);
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
                    r.expect("validated call reassembles");
                }
            }
            Err(e) => {
                let mut out = [0u8; 32];
                let _ = encode_error_for(data, &e, 128, &mut out);
            }
        }
        let _ = decode_reply(data, lim);
    }
    let _ = ConnectPrivate::decode(data);
});
