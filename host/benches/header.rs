//! Criterion benchmarks of transport header encode and decode.

// criterion_group! generates an undocumented public function.
#![allow(missing_docs)]

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use rpcrdma_proto::proto::decode::{decode_call, decode_header};
use rpcrdma_proto::proto::encode::{encode_header, BodyRef, ChunkListsRef, HeaderRef};
use rpcrdma_proto::proto::golden;
use rpcrdma_proto::proto::msg::{DecodeLimits, ReadSegment, Segment};
use rpcrdma_proto::proto::pcl::{ParsedChunks, PclChunk};

fn headers() -> Vec<(&'static str, HeaderRef<'static>)> {
    const READ: &[ReadSegment] = &[ReadSegment::new(132, 0x1234, 1 << 20, 0x10_0000_0000)];
    const W: &[Segment] = &[
        Segment::new(1, 1 << 19, 0x1000),
        Segment::new(2, 1 << 19, 0x9_0000),
        Segment::new(3, 4, 0x20_0000),
    ];
    const WRITE: &[&[Segment]] = &[W];
    const LONG: &[ReadSegment] = &[
        ReadSegment::new(0, 7, 4096, 0),
        ReadSegment::new(0, 8, 4096, 4096),
        ReadSegment::new(0, 9, 1000, 8192),
    ];
    let h = |body| HeaderRef {
        xid: 0x1234_5678,
        vers: 1,
        credits: 128,
        body,
    };
    vec![
        ("msg_no_chunks", h(BodyRef::Msg(ChunkListsRef::EMPTY))),
        (
            "msg_read_chunk",
            h(BodyRef::Msg(ChunkListsRef {
                read: READ,
                write: &[],
                reply: None,
            })),
        ),
        (
            "msg_write_chunk_3seg",
            h(BodyRef::Msg(ChunkListsRef {
                read: &[],
                write: WRITE,
                reply: None,
            })),
        ),
        (
            "nomsg_long_call_reply",
            h(BodyRef::NoMsg(ChunkListsRef {
                read: LONG,
                write: &[],
                reply: Some(W),
            })),
        ),
    ]
}

fn bench(c: &mut Criterion) {
    let lim = DecodeLimits::server_default();
    let mut g = c.benchmark_group("header");
    g.throughput(Throughput::Elements(1));
    for (name, h) in headers() {
        let mut buf = [0u8; 512];
        let n = encode_header(&h, &mut buf).unwrap();
        let mut wire = buf[..n].to_vec();
        // Inline RPC payload so Read positions are in range.
        wire.resize(n + 256, 0);
        g.bench_function(format!("encode/{name}"), |b| {
            let mut out = [0u8; 512];
            b.iter(|| encode_header(black_box(&h), black_box(&mut out)).unwrap())
        });
        g.bench_function(format!("decode/{name}"), |b| {
            b.iter(|| decode_header(black_box(&wire), &lim).unwrap().header_len)
        });
        g.bench_function(format!("decode_call+pcl/{name}"), |b| {
            let mut chunks = [PclChunk::default(); 8];
            let mut segs = [Segment::default(); 16];
            b.iter(|| {
                let hdr = decode_call(black_box(&wire), &lim).unwrap();
                let pcl =
                    ParsedChunks::build(hdr.chunks().unwrap(), &mut chunks, &mut segs).unwrap();
                pcl.read_chunks().len()
            })
        });
    }
    g.bench_function("golden/run_all", |b| b.iter(|| golden::run_all().unwrap()));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
