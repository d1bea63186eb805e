//! The protocol core's pieces of one 4 KiB NFS READ, each run a given
//! number of times, for counting their instructions under callgrind:
//!
//! ```sh
//! cargo build --release --example read4k_pieces
//! for n in 1000 2000; do valgrind --tool=callgrind --callgrind-out-file=/dev/null \
//!     target/release/examples/read4k_pieces plan $n 2>&1 | grep refs; done
//! ```
//!
//! The difference of the two totals over 1000 is one run's instructions,
//! inputs included, whatever else the machine is doing. Pieces: `plan`
//! (the client's planner), `encode` (the client's call header), `reply`
//! (the client's `decode_reply`), `call` (the server's `decode_call`),
//! `build` (the server's parsed chunk lists and Call layout), `sreply`
//! (the server's Reply: the lists again from their layout, the payload
//! recorded, its Write, the inline body's runs and the Reply's header),
//! `all`.

use core::hint::black_box;
use rpcrdma_proto::proto::decode::{decode_call, decode_reply};
use rpcrdma_proto::proto::encode::{encode_header, BodyRef, ChunkListsRef, HeaderRef};
use rpcrdma_proto::proto::msg::{DecodeLimits, Segment};
use rpcrdma_proto::proto::pcl::{ChunkLayout, ParsedChunks, PclChunk};
use rpcrdma_proto::proto::planner::{plan, RpcShape, TransportParams, XdrBufShape};
use rpcrdma_proto::proto::svc_call::CallLayout;
use rpcrdma_proto::proto::svc_reply::{PayloadWrites, ReplyBody};

/// The Write chunk a 4 KiB READ offers: one segment over the page.
const WRITE: &[Segment] = &[Segment::new(0x1234, 4096, 0x7f00_1000)];

/// The call header of the 4 KiB READ: its Write list, `write`.
fn read_header<'a>(xid: u32, write: &'a [&'a [Segment]; 1]) -> HeaderRef<'a> {
    HeaderRef {
        xid,
        vers: 1,
        credits: 128,
        body: BodyRef::Msg(ChunkListsRef {
            read: &[],
            write,
            reply: None,
        }),
    }
}

/// A transport header with the 4 KiB READ's Write list and `body` bytes
/// of RPC message behind it.
fn message(body: usize) -> Vec<u8> {
    let write: [&[Segment]; 1] = [WRITE];
    let mut out = vec![0u8; 1024];
    let n = encode_header(&read_header(0x1234_5678, &write), &mut out).expect("the header fits");
    out.truncate(n + body);
    out
}

fn run_plan(params: &TransportParams) -> u32 {
    let shape = RpcShape {
        send: XdrBufShape::new(140, 0, 0),
        send_ddp: false,
        recv: XdrBufShape {
            head_len: 120,
            head_page_offset: 0,
            page_base: 0,
            page_len: 4096,
            tail_len: 0,
            tail_page_offset: 0,
            buflen: 4216,
        },
        recv_ddp: true,
        ddp_allowed: true,
        send_buf_len: 4096,
    };
    plan(black_box(&shape), params).map_or(0, |p| p.header_len)
}

fn run_encode(out: &mut [u8]) -> usize {
    let write: [&[Segment]; 1] = [black_box(WRITE)];
    let hdr = read_header(black_box(0x1234_5678), &write);
    encode_header(&hdr, out).unwrap_or(0)
}

fn run_reply(msg: &[u8], limits: &DecodeLimits) -> usize {
    decode_reply(black_box(msg), limits).map_or(0, |h| h.header_len)
}

fn run_call(msg: &[u8], limits: &DecodeLimits) -> usize {
    decode_call(black_box(msg), limits).map_or(0, |h| h.header_len)
}

fn run_build(
    msg: &[u8],
    limits: &DecodeLimits,
    chunks: &mut [PclChunk],
    segs: &mut [Segment],
) -> u32 {
    let Ok(hdr) = decode_call(msg, limits) else {
        return 0;
    };
    let Some((lists, inline)) = hdr.body.chunks_and_inline() else {
        return 0;
    };
    let Ok(pcl) = ParsedChunks::build(black_box(lists), chunks, segs) else {
        return 0;
    };
    CallLayout::new(&pcl, inline.len(), 1 << 20).map_or(0, |l| l.total())
}

/// The server's side of the Reply to the 4 KiB READ: the payload at
/// offset 120 of a 236-byte Reply goes to the Write chunk, the rest inline.
fn run_sreply(layout: &ChunkLayout, chunks: &mut [PclChunk], segs: &[Segment]) -> usize {
    let Ok(mut pcl) = ParsedChunks::from_layout(black_box(layout), chunks, segs) else {
        return 0;
    };
    if pcl.set_result_payload(0, 120, 4096).is_err() {
        return 0;
    }
    let xdr_len = black_box(120 + 4096 + 20);
    let mut n = 0;
    for w in PayloadWrites::new(&pcl, xdr_len).flatten() {
        n += pcl.segments(w.chunk).len();
    }
    let Ok(body) = ReplyBody::new(&pcl, xdr_len) else {
        return 0;
    };
    for run in body.runs(0, body.len() as usize).flatten() {
        n += run.len;
    }
    let mut out = [0u8; 256];
    n + pcl
        .encode_reply_header(0x1234_5678, 128, 0, &mut out)
        .unwrap_or(0)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let piece = args.next().unwrap_or_else(|| "all".into());
    let n: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(1000);
    let params = TransportParams::linux_default();
    let client = DecodeLimits::client_default();
    let server = DecodeLimits::server_default();
    let call = message(140);
    let reply = message(120);
    let mut out = [0u8; 1024];
    let mut chunks = [PclChunk::default(); 8];
    let mut segs = [Segment::default(); 8];
    let mut sum = 0u64;
    // The layout `xpo_recvfrom` keeps for the Reply, over storage of its own.
    let mut reply_chunks = [PclChunk::default(); 8];
    let mut reply_segs = [Segment::default(); 8];
    let layout = {
        let hdr = decode_call(&call, &server).expect("the call decodes");
        let (lists, _) = hdr.body.chunks_and_inline().expect("it has lists");
        ParsedChunks::build(lists, &mut reply_chunks, &mut reply_segs)
            .expect("the lists fit")
            .layout()
    };
    let mut build = |sum: &mut u64| {
        *sum += u64::from(run_build(&call, &server, &mut chunks, &mut segs));
    };
    for _ in 0..n {
        match piece.as_str() {
            "plan" => sum += u64::from(run_plan(&params)),
            "encode" => sum += run_encode(&mut out) as u64,
            "reply" => sum += run_reply(&reply, &client) as u64,
            "call" => sum += run_call(&call, &server) as u64,
            "build" => build(&mut sum),
            "sreply" => sum += run_sreply(&layout, &mut reply_chunks, &reply_segs) as u64,
            "all" => {
                sum += u64::from(run_plan(&params));
                sum += run_encode(&mut out) as u64;
                sum += run_reply(&reply, &client) as u64;
                build(&mut sum);
                sum += run_sreply(&layout, &mut reply_chunks, &reply_segs) as u64;
            }
            other => {
                eprintln!("unknown piece {other}: plan, encode, reply, call, build, sreply or all");
                std::process::exit(2);
            }
        }
    }
    println!("{piece} x{n}: {sum}");
}
