//! Writes seed inputs for a fuzz target to a directory, one file each:
//! `cargo run --example write_seeds -- DIR [decode_header|server_receive]`.
//!
//! `decode_header` seeds are the golden vectors. `server_receive` seeds are
//! the golden vectors and a few hand-made calls (Write + Reply chunks, Read
//! chunks at inner positions, a backchannel Reply), each behind several
//! parameter prefixes (`targets::server_input`).

use rpcrdma_proto::proto::cm::ConnectPrivate;
use rpcrdma_proto::proto::encode::{encode_header, BodyRef, ChunkListsRef, HeaderRef};
use rpcrdma_proto::proto::golden::VECTORS;
use rpcrdma_proto::proto::msg::{ReadSegment, Segment, RPCRDMA_VERSION};
use rpcrdma_proto::targets::server_input::{flags, join, ServerParams};

fn msg(xid: u32, body: BodyRef<'_>, payload: &[u8]) -> Vec<u8> {
    let h = HeaderRef {
        xid,
        vers: RPCRDMA_VERSION,
        credits: 32,
        body,
    };
    let mut out = vec![0u8; 4096];
    let n = encode_header(&h, &mut out).expect("seed encodes");
    out.truncate(n);
    out.extend_from_slice(payload);
    out
}

/// Hand-made calls that reach the deeper decisions of the server.
fn crafted() -> Vec<(&'static str, Vec<u8>)> {
    let rpc: Vec<u8> = (0u8..64).collect();
    let w1 = [
        Segment::new(0x11, 4096, 0x1000),
        Segment::new(0x11, 4096, 0x3000),
    ];
    let w2 = [Segment::new(0x22, 512, 0x9000)];
    let rc = [Segment::new(0x11, 8192, 0x8000)];
    let rd = [
        ReadSegment::new(8, 0x11, 5, 0x100),
        ReadSegment::new(8, 0x11, 3, 0x200),
        ReadSegment::new(24, 0x11, 7, 0x300),
    ];
    let call = [
        ReadSegment::new(0, 0x11, 100, 0x400),
        ReadSegment::new(0, 0x11, 60, 0x500),
        ReadSegment::new(40, 0x11, 9, 0x600),
    ];
    let none: [&[Segment]; 0] = [];
    vec![
        (
            "write_and_reply",
            msg(
                1,
                BodyRef::Msg(ChunkListsRef {
                    read: &[],
                    write: &[&w1],
                    reply: Some(&rc),
                }),
                &rpc,
            ),
        ),
        (
            "two_writes",
            msg(
                2,
                BodyRef::Msg(ChunkListsRef {
                    read: &[],
                    write: &[&w1, &w2],
                    reply: None,
                }),
                &rpc,
            ),
        ),
        (
            "inner_reads",
            msg(
                3,
                BodyRef::Msg(ChunkListsRef {
                    read: &rd,
                    write: &[&w2],
                    reply: None,
                }),
                &rpc[..40],
            ),
        ),
        (
            "nomsg_call_and_read",
            msg(
                4,
                BodyRef::NoMsg(ChunkListsRef {
                    read: &call,
                    write: &none,
                    reply: Some(&rc),
                }),
                &[],
            ),
        ),
        (
            "backchannel_reply",
            msg(
                5,
                BodyRef::Msg(ChunkListsRef {
                    read: &[],
                    write: &none,
                    reply: None,
                }),
                &[0, 0, 0, 5, 0, 0, 0, 1, 0, 0, 0, 0],
            ),
        ),
    ]
}

fn server_params() -> Vec<(&'static str, ServerParams)> {
    let cm = ConnectPrivate::new(8192, 8192, true).to_bytes();
    vec![
        (
            "p0",
            ServerParams {
                private_data: cm,
                local_send: 4096,
                local_recv: 4096,
                arg_max: 1024 * 1024 + 8192,
                credits: 128,
                res_len: 400,
                flags: flags::PRIVATE_DATA | flags::MEM_MGT | flags::SHAPED,
                piece: 0,
                payloads: vec![(100, 300)],
            },
        ),
        (
            "p1",
            ServerParams {
                private_data: [0; 8],
                local_send: 1024,
                local_recv: 1024,
                arg_max: 4096,
                credits: 32,
                res_len: 3000,
                flags: flags::BACKCHANNEL,
                piece: 1,
                payloads: vec![(16, 8)],
            },
        ),
        (
            "p2",
            ServerParams {
                private_data: cm,
                local_send: 65536,
                local_recv: 65536,
                arg_max: 128,
                credits: 1,
                res_len: 70000,
                flags: flags::PRIVATE_DATA | flags::MEM_MGT | flags::BACKCHANNEL,
                piece: 3,
                payloads: vec![(64, 5000), (8, 100)],
            },
        ),
    ]
}

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let dir = args
        .next()
        .unwrap_or_else(|| "fuzz/corpus/decode_header".into());
    let target = args.next().unwrap_or_else(|| "decode_header".into());
    std::fs::create_dir_all(&dir)?;
    let mut n = 0;
    match target.as_str() {
        "decode_header" => {
            for v in VECTORS {
                std::fs::write(format!("{dir}/golden-{}", v.name), v.bytes)?;
                n += 1;
            }
        }
        "server_receive" => {
            let mut msgs: Vec<(String, Vec<u8>)> = VECTORS
                .iter()
                .filter(|v| !v.name.starts_with("cm_"))
                .map(|v| (format!("golden-{}", v.name), v.bytes.to_vec()))
                .collect();
            msgs.extend(
                crafted()
                    .into_iter()
                    .map(|(k, m)| (format!("crafted-{k}"), m)),
            );
            let params = server_params();
            for (i, (name, m)) in msgs.iter().enumerate() {
                // Every message with the first parameter set, and each with
                // one other set in turn, to keep the corpus small.
                for (pname, p) in [&params[0], &params[1 + i % (params.len() - 1)]] {
                    std::fs::write(format!("{dir}/{name}-{pname}"), join(p, m))?;
                    n += 1;
                }
            }
        }
        other => panic!("unknown target {other}"),
    }
    println!("wrote {n} seeds to {dir}");
    Ok(())
}
