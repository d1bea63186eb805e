//! Chunk planner tests: a table of RPC shapes with hand-computed results,
//! a literal transcription of the C client's decisions to compare against
//! (on the table and on random shapes), and the deliberate differences.

// The C model keeps C's `x % n != 0` spelling so it reads like the source.
#![allow(clippy::manual_is_multiple_of)]

use proptest::prelude::*;
use rpcrdma_proto::proto::msg::Proc;
use rpcrdma_proto::proto::planner::{
    count_segments, max_call_header_size, max_reply_header_size, physical_max_segs, plan,
    CallStrategy, DeviceCaps, PlanError, ResultStrategy, RpcShape, TransportParams, XdrBufShape,
    MAX_HDR_SEGS,
};

/// The C client's logic, transcribed statement by statement from
/// rpc_rdma.c (`rpcrdma_marshal_req` and helpers) and frwr_ops.c
/// (`frwr_map`), with C's unsigned arithmetic.
mod c_model {
    use super::*;

    const XC_HEAD_DONE: u32 = 1;
    const XC_PAGES_DONE: u32 = 2;
    const XC_TAIL_DONE: u32 = 4;

    #[derive(Clone, Copy, PartialEq, Eq, Debug)]
    pub(crate) enum Ch {
        NochPullup,
        NochMapped,
        Readch,
        Areadch,
        Noch,
        Writech,
        Replych,
    }

    /// rpcrdma_xdr_cursor_init + repeated frwr_map: number of MRs, or
    /// None where C would fail (an MR with no SG entries).
    pub(crate) fn mrs(b: &XdrBufShape, pos: u32, t: Ch, p: &TransportParams) -> Option<u32> {
        let ps = p.page_size;
        let mut flags = 0;
        let mut page_offset = 0u32;
        if pos != 0 {
            flags |= XC_HEAD_DONE;
        }
        if b.page_len == 0 {
            flags |= XC_PAGES_DONE;
        }
        if t == Ch::Readch || t == Ch::Writech || b.tail_len == 0 {
            flags |= XC_TAIL_DONE;
        }
        let mut n = 0;
        loop {
            // frwr_map
            let mut i = 0u32;
            let mut prev_off = 0u32;
            let mut prev_len = 0u32;
            'finish: {
                if flags & XC_HEAD_DONE == 0 {
                    prev_off = b.head_page_offset;
                    prev_len = b.head_len;
                    flags |= XC_HEAD_DONE;
                    i += 1;
                    if !p.sg_gaps {
                        break 'finish;
                    }
                }
                if flags & XC_PAGES_DONE == 0 && b.page_len != 0 {
                    let mut remaining = b.page_len - page_offset;
                    let mut page_base = (b.page_base + page_offset) % ps;
                    while remaining > 0 && i < p.max_fr_depth {
                        let len = (ps - page_base).min(remaining);
                        prev_off = page_base;
                        prev_len = len;
                        page_offset += len;
                        i += 1;
                        remaining -= len;
                        if !p.sg_gaps && remaining > 0 && (page_base + len) % ps != 0 {
                            break 'finish;
                        }
                        page_base = 0;
                    }
                    if remaining == 0 {
                        flags |= XC_PAGES_DONE;
                    }
                } else if flags & XC_PAGES_DONE == 0 {
                    flags |= XC_PAGES_DONE;
                }
                if flags & XC_TAIL_DONE == 0 && b.tail_len != 0 && i < p.max_fr_depth {
                    if !p.sg_gaps
                        && i > 0
                        && ((prev_off + prev_len) % ps != 0 || b.tail_page_offset % ps != 0)
                    {
                        break 'finish;
                    }
                    flags |= XC_TAIL_DONE;
                    i += 1;
                } else if flags & XC_TAIL_DONE == 0 && b.tail_len == 0 {
                    flags |= XC_TAIL_DONE;
                }
            }
            if i == 0 {
                return None; // ib_dma_map_sg of nothing: -EIO
            }
            n += 1;
            if flags & 7 == 7 {
                return Some(n);
            }
        }
    }

    pub(crate) fn args_inline(s: &RpcShape, p: &TransportParams) -> bool {
        let x = &s.send;
        if x.head_len + x.page_len + x.tail_len > p.max_inline_send() {
            return false;
        }
        if x.page_len != 0 {
            let mut remaining = x.page_len;
            let mut offset = x.page_base % p.page_size;
            let mut count = 3;
            while remaining != 0 {
                remaining -= (p.page_size - offset).min(remaining);
                offset = 0;
                count += 1;
                if count > p.max_send_sge {
                    return false;
                }
            }
        }
        true
    }

    pub(crate) fn marshal(s: &RpcShape, p: &TransportParams) -> (Ch, Ch) {
        let wtype = if s.recv.buflen <= p.max_inline_recv() {
            Ch::Noch
        } else if s.ddp_allowed
            && s.recv_ddp
            && s.recv.head_len + s.recv.tail_len < p.max_inline_recv()
        {
            Ch::Writech
        } else {
            Ch::Replych
        };
        let len = s.send.head_len + s.send.page_len + s.send.tail_len;
        let rtype = if args_inline(s, p) {
            if len < s.send_buf_len {
                Ch::NochPullup
            } else {
                Ch::NochMapped
            }
        } else if s.ddp_allowed && s.send_ddp {
            Ch::Readch
        } else {
            Ch::Areadch
        };
        (rtype, wtype)
    }
}

fn p() -> TransportParams {
    TransportParams::linux_default()
}

fn shape(send: XdrBufShape, send_ddp: bool, recv: XdrBufShape, recv_ddp: bool) -> RpcShape {
    RpcShape {
        send,
        send_ddp,
        recv,
        recv_ddp,
        ddp_allowed: true,
        send_buf_len: 2048,
    }
}

fn buf(h: u32, pg: u32, t: u32) -> XdrBufShape {
    XdrBufShape::new(h, pg, t)
}

#[test]
fn derived_parameters_match_frwr_query_device() {
    let p = p();
    // rxe: max_sge_rd 32 > 16, so depth 32; ceil(257 / 32) + 2 = 11.
    assert_eq!(p.max_fr_depth, 32);
    assert_eq!(p.max_rdma_segs, 11);
    assert_eq!(p.max_send_sge, 19);
    assert_eq!(max_call_header_size(11), 28 + 11 * 24 + 24);
    assert_eq!(max_reply_header_size(11), 28 + 4 + 11 * 16 + 4);
    assert_eq!(p.max_inline_send(), 4096 - 316);
    assert_eq!(p.max_inline_recv(), 4096 - 212);
    // A device with a 256-page list and small max_sge_rd: depth 256, 2+2.
    let d = DeviceCaps {
        max_fast_reg_page_list_len: 256,
        max_sge_rd: 16,
        max_send_sge: 8,
        sg_gaps: true,
    };
    let q = TransportParams::from_device(4096, 4096, &d);
    assert_eq!(
        (q.max_fr_depth, q.max_rdma_segs, q.max_send_sge),
        (256, 4, 8)
    );
}

struct Row {
    name: &'static str,
    shape: RpcShape,
    call: CallStrategy,
    result: ResultStrategy,
    header_len: u32,
}

fn table() -> Vec<Row> {
    let small = buf(200, 0, 0);
    let mut rows = vec![
        Row {
            name: "getattr",
            shape: shape(buf(120, 0, 0), false, buf(400, 0, 0), false),
            call: CallStrategy::InlinePullup,
            result: ResultStrategy::Inline,
            header_len: 28,
        },
        Row {
            name: "write 64k",
            shape: shape(buf(200, 65536, 0), true, small, false),
            call: CallStrategy::ReadChunk {
                position: 200,
                segments: 1,
            },
            result: ResultStrategy::Inline,
            header_len: 52,
        },
        Row {
            name: "read 1m",
            shape: shape(small, false, buf(200, 1 << 20, 4), true),
            call: CallStrategy::InlinePullup,
            result: ResultStrategy::WriteChunk {
                segments: 8,
                write_pad: false,
            },
            header_len: 28 + 8 + 8 * 16,
        },
        Row {
            name: "read unaligned",
            shape: shape(small, false, buf(200, 5001, 0), true),
            call: CallStrategy::InlinePullup,
            result: ResultStrategy::WriteChunk {
                segments: 2,
                write_pad: true,
            },
            header_len: 28 + 8 + 2 * 16,
        },
        Row {
            name: "readdir reply chunk",
            shape: shape(small, false, buf(1024, 32768, 0), false),
            call: CallStrategy::InlinePullup,
            result: ResultStrategy::ReplyChunk { segments: 2 },
            header_len: 28 + 8 + 2 * 16,
        },
        Row {
            name: "long call",
            shape: shape(buf(200, 10000, 0), false, small, false),
            call: CallStrategy::LongCall { segments: 2 },
            result: ResultStrategy::Inline,
            header_len: 28 + 2 * 24,
        },
        Row {
            name: "inline mapped",
            shape: RpcShape {
                send_buf_len: 1024,
                ..shape(buf(100, 2000, 0), false, small, false)
            },
            call: CallStrategy::InlineMapped,
            result: ResultStrategy::Inline,
            header_len: 28,
        },
        Row {
            name: "krb5i read: no DDP",
            shape: RpcShape {
                ddp_allowed: false,
                ..shape(small, false, buf(200, 65536, 0), true)
            },
            call: CallStrategy::InlinePullup,
            result: ResultStrategy::ReplyChunk { segments: 2 },
            header_len: 28 + 8 + 2 * 16,
        },
        Row {
            name: "big non-payload reply",
            shape: shape(small, false, buf(3900, 65536, 0), true),
            call: CallStrategy::InlinePullup,
            result: ResultStrategy::ReplyChunk { segments: 2 },
            header_len: 28 + 8 + 2 * 16,
        },
        Row {
            name: "reply chunk tail joins aligned pages",
            shape: shape(small, false, buf(1024, 8192, 100), false),
            call: CallStrategy::InlinePullup,
            result: ResultStrategy::ReplyChunk { segments: 2 },
            header_len: 28 + 8 + 2 * 16,
        },
        Row {
            name: "reply chunk tail after unaligned pages",
            shape: shape(small, false, buf(1024, 5000, 100), false),
            call: CallStrategy::InlinePullup,
            result: ResultStrategy::ReplyChunk { segments: 3 },
            header_len: 28 + 8 + 3 * 16,
        },
        Row {
            name: "write + reply chunk",
            shape: shape(buf(300, 1 << 20, 0), true, buf(300, 8192, 0), false),
            call: CallStrategy::ReadChunk {
                position: 300,
                segments: 8,
            },
            result: ResultStrategy::ReplyChunk { segments: 2 },
            header_len: 28 + 8 * 24 + 8 + 2 * 16,
        },
    ];
    // Too many send SGEs for inline: 2 pages + 3 > 4.
    let mut s = shape(buf(100, 200, 0), true, small, false);
    s.send.page_base = 4000;
    rows.push(Row {
        name: "sge limit forces read chunk",
        shape: s,
        call: CallStrategy::ReadChunk {
            position: 100,
            segments: 1,
        },
        result: ResultStrategy::Inline,
        header_len: 52,
    });
    rows
}

#[test]
fn table_matches_hand_computed_and_c_model() {
    for row in table() {
        let mut params = p();
        if row.name == "sge limit forces read chunk" {
            params.max_send_sge = 4;
        }
        let got = plan(&row.shape, &params).unwrap_or_else(|e| panic!("{}: {e:?}", row.name));
        assert_eq!(got.call, row.call, "{}", row.name);
        assert_eq!(got.result, row.result, "{}", row.name);
        assert_eq!(got.header_len, row.header_len, "{}", row.name);
        assert_eq!(
            got.proc_,
            if matches!(row.call, CallStrategy::LongCall { .. }) {
                Proc::NoMsg
            } else {
                Proc::Msg
            }
        );
        compare_with_c(&row.shape, &params, &got);
    }
}

fn compare_with_c(
    s: &RpcShape,
    params: &TransportParams,
    got: &rpcrdma_proto::proto::planner::Plan,
) {
    use c_model::Ch;
    let (r, w) = c_model::marshal(s, params);
    let want_call = match r {
        Ch::NochPullup => CallStrategy::InlinePullup,
        Ch::NochMapped => CallStrategy::InlineMapped,
        Ch::Readch => CallStrategy::ReadChunk {
            position: s.send.head_len,
            segments: c_model::mrs(&s.send, s.send.head_len, Ch::Readch, params).unwrap(),
        },
        Ch::Areadch => CallStrategy::LongCall {
            segments: c_model::mrs(&s.send, 0, Ch::Areadch, params).unwrap(),
        },
        _ => unreachable!(),
    };
    let want_result = match w {
        Ch::Noch => ResultStrategy::Inline,
        Ch::Writech => {
            let pad = s.recv.page_len % 4 != 0;
            ResultStrategy::WriteChunk {
                segments: c_model::mrs(&s.recv, s.recv.head_len, Ch::Writech, params).unwrap()
                    + u32::from(pad),
                write_pad: pad,
            }
        }
        Ch::Replych => ResultStrategy::ReplyChunk {
            segments: c_model::mrs(&s.recv, 0, Ch::Replych, params).unwrap(),
        },
        _ => unreachable!(),
    };
    assert_eq!(got.call, want_call, "call vs C for {s:?}");
    assert_eq!(got.result, want_result, "result vs C for {s:?}");
}

#[test]
fn difference_ddp_with_empty_page_list() {
    // C: Read chunk over nothing -> frwr_map maps 0 entries -> -EIO.
    let s = shape(buf(5000, 0, 0), true, buf(200, 0, 0), false);
    assert_eq!(c_model::marshal(&s, &p()).0, c_model::Ch::Readch);
    assert_eq!(c_model::mrs(&s.send, 5000, c_model::Ch::Readch, &p()), None);
    let got = plan(&s, &p()).unwrap();
    assert_eq!(got.call, CallStrategy::LongCall { segments: 1 });
    // Same on the reply side: no Write chunk over an empty page list.
    let s = shape(buf(100, 0, 0), false, buf(5000, 0, 0), true);
    assert_eq!(
        plan(&s, &p()).unwrap().result,
        ResultStrategy::ReplyChunk { segments: 1 }
    );
}

#[test]
fn difference_read_chunk_send_part_too_big() {
    // Head 4080 + header 52 > 4096: C would send it and overrun the peer.
    let s = shape(buf(4080, 8192, 0), true, buf(200, 0, 0), false);
    assert_eq!(c_model::marshal(&s, &p()).0, c_model::Ch::Readch);
    let got = plan(&s, &p()).unwrap();
    assert_eq!(got.call, CallStrategy::LongCall { segments: 2 });
    assert_eq!(got.proc_, Proc::NoMsg);
    // Just under the limit stays a Read chunk.
    let s = shape(buf(4044, 8192, 0), true, buf(200, 0, 0), false);
    assert!(matches!(
        plan(&s, &p()).unwrap().call,
        CallStrategy::ReadChunk { .. }
    ));
}

#[test]
fn difference_too_many_segments_refused_up_front() {
    let d = DeviceCaps {
        max_fast_reg_page_list_len: 1,
        max_sge_rd: 1,
        max_send_sge: 8,
        sg_gaps: false,
    };
    let q = TransportParams::from_device(4096, 4096, &d);
    assert_eq!(q.max_rdma_segs, 16);
    let s = shape(buf(200, 1 << 20, 0), true, buf(200, 0, 0), false);
    assert_eq!(plan(&s, &q), Err(PlanError::TooManySegments));
}

#[test]
fn difference_empty_head_is_never_registered() {
    // C would register a zero-length head MR in the Write chunk.
    let s = shape(buf(200, 0, 0), false, buf(0, 8192, 0), true);
    assert_eq!(
        c_model::mrs(&s.recv, 0, c_model::Ch::Writech, &p()),
        Some(2)
    );
    let got = plan(&s, &p()).unwrap();
    assert_eq!(
        got.result,
        ResultStrategy::WriteChunk {
            segments: 1,
            write_pad: false
        }
    );
    // C would put a position-zero Read chunk in an RDMA_MSG.
    let s = shape(buf(0, 8192, 0), true, buf(200, 0, 0), false);
    assert_eq!(c_model::marshal(&s, &p()).0, c_model::Ch::Readch);
    let got = plan(&s, &p()).unwrap();
    assert_eq!(got.call, CallStrategy::LongCall { segments: 1 });
    assert_eq!(got.proc_, Proc::NoMsg);
}

#[test]
fn read_chunk_tail_pad_is_not_sent() {
    // Tail of 3 bytes is only XDR pad: not in the Send. Tail of 10: 8 sent.
    let s = shape(buf(200, 8191, 3), true, buf(200, 0, 0), false);
    let got = plan(&s, &p()).unwrap();
    assert_eq!((got.inline_len, got.send_sges), (200, 2));
    let s = shape(buf(200, 8190, 10), true, buf(200, 0, 0), false);
    let got = plan(&s, &p()).unwrap();
    assert_eq!((got.inline_len, got.send_sges), (208, 3));
}

#[test]
fn sg_gaps_merges_pieces_into_one_mr() {
    let mut q = p();
    q.sg_gaps = true;
    let b = buf(1024, 8192, 100);
    assert_eq!(count_segments(&b, true, true, &q), Ok(1));
    q.sg_gaps = false;
    assert_eq!(count_segments(&b, true, true, &q), Ok(2));
    assert_eq!(
        count_segments(&buf(0, 0, 0), false, false, &q),
        Err(PlanError::EmptyChunk)
    );
    q.page_size = 3000;
    assert_eq!(
        count_segments(&b, true, true, &q),
        Err(PlanError::BadParams)
    );
}

#[test]
fn message_too_large_for_any_strategy() {
    // A reply chunk so big its header alone exceeds a 1 KiB threshold.
    let mut q = TransportParams::from_device(
        1024,
        1024,
        &DeviceCaps {
            max_fast_reg_page_list_len: 1,
            max_sge_rd: 1,
            max_send_sge: 4,
            sg_gaps: false,
        },
    );
    q.max_rdma_segs = 100;
    let s = shape(buf(600, 0, 0), false, buf(200, 80 * 4096, 0), false);
    assert_eq!(plan(&s, &q), Err(PlanError::TooLarge));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, failure_persistence: None, ..ProptestConfig::default() })]

    /// On shapes where C succeeds, the planner makes C's choice; where it
    /// differs, it is one of the documented differences.
    #[test]
    fn agrees_with_c_model(
        sh in 0u32..6000, sp in prop_oneof![Just(0u32), 1u32..300_000], st in 0u32..600,
        spb in 0u32..8192, sho in 0u32..4096, sto in 0u32..4096,
        rh in 0u32..6000, rp in prop_oneof![Just(0u32), 1u32..1_100_000], rt in 0u32..600,
        rpb in 0u32..8192, rho in 0u32..4096, rto in 0u32..4096,
        send_ddp: bool, recv_ddp: bool, ddp_allowed: bool, sg_gaps: bool,
        sbl in 1024u32..8192, depth in 1u32..64, sge in 3u32..20,
    ) {
        let send = XdrBufShape { head_len: sh, head_page_offset: sho, page_base: spb, page_len: sp, tail_len: st, tail_page_offset: sto, buflen: sh + sp + st };
        let recv = XdrBufShape { head_len: rh, head_page_offset: rho, page_base: rpb, page_len: rp, tail_len: rt, tail_page_offset: rto, buflen: rh + rp + rt };
        let s = RpcShape { send, send_ddp, recv, recv_ddp, ddp_allowed, send_buf_len: sbl };
        let mut q = TransportParams::from_device(4096, 4096, &DeviceCaps { max_fast_reg_page_list_len: depth, max_sge_rd: 1, max_send_sge: sge, sg_gaps });
        q.max_rdma_segs = 64;
        let (r, w) = c_model::marshal(&s, &q);
        // Shapes where C fails or hits a documented difference (1, 3).
        let c_fails = (r == c_model::Ch::Readch && (sp == 0 || sh == 0 || c_model::mrs(&send, sh, r, &q).is_none()))
            || (r == c_model::Ch::Areadch && sh == 0)
            || (w == c_model::Ch::Writech && (rp == 0 || rh == 0 || c_model::mrs(&recv, rh, w, &q).is_none()))
            || (w == c_model::Ch::Replych && rh == 0);
        match plan(&s, &q) {
            Ok(got) => {
                let readch_too_big = r == c_model::Ch::Readch && matches!(got.call, CallStrategy::LongCall { .. });
                if !c_fails && !readch_too_big {
                    compare_with_c(&s, &q, &got);
                }
                prop_assert!(got.header_len + got.inline_len <= 4096);
            }
            Err(PlanError::TooLarge) | Err(PlanError::TooManySegments) => {}
            Err(e) => prop_assert!(false, "unexpected {e:?}"),
        }
    }

    /// A page list alone is counted by two divisions; the full walk (an
    /// empty tail that is asked for takes it) agrees, errors included.
    #[test]
    fn page_list_count_agrees_with_the_walk(
        page_base in prop_oneof![0u32..65536, (u32::MAX - 70_000)..=u32::MAX],
        page_len in prop_oneof![Just(0u32), 1u32..1_100_000, (u32::MAX - 70_000)..=u32::MAX],
        depth in 1u32..600, segs in 1u32..100, sg_gaps: bool,
        page_shift in 9u32..17,
    ) {
        let b = XdrBufShape { head_len: 0, head_page_offset: 0, page_base, page_len, tail_len: 0, tail_page_offset: 0, buflen: page_len };
        let mut q = TransportParams::from_device(4096, 4096, &DeviceCaps { max_fast_reg_page_list_len: depth, max_sge_rd: 1, max_send_sge: 8, sg_gaps });
        q.max_fr_depth = depth;
        q.max_rdma_segs = segs;
        q.page_size = 1 << page_shift;
        prop_assert_eq!(count_segments(&b, false, false, &q), count_segments(&b, false, true, &q));
    }
}

#[test]
fn physical_segments_follow_the_inline_room() {
    // Half of 4096 for the header: (2048 - 52) / 24 Read items, (2048 - 36)
    // / 16 Write segments; the Read list is the tighter one.
    assert_eq!(physical_max_segs(4096, 4096), 83);
    let p = TransportParams::physical(4096, 4096, &DeviceCaps::RXE);
    assert_eq!((p.max_fr_depth, p.max_rdma_segs), (1, 83));
    assert_eq!(p.physical_max_payload(), 80 * 4096);
    assert!(max_call_header_size(83) <= 2048);
    assert!(max_call_header_size(84) > 2048);
    // 64 KiB thresholds: 1 MiB of pages plus head, tail and a misaligned page.
    let q = TransportParams::physical(65536, 65536, &DeviceCaps::RXE);
    assert_eq!(q.max_rdma_segs, 259);
    assert_eq!(q.physical_max_payload(), 1024 * 1024);
    // The RFC 8797 minimum of 1024: (512 - 52) / 24 = 19 segments.
    assert_eq!(physical_max_segs(1024, 1024), 19);
    assert_eq!(
        TransportParams::physical(1024, 1024, &DeviceCaps::RXE).physical_max_payload(),
        16 * 4096
    );
    // The receive side limits too: a small inline_recv (Write list room).
    assert_eq!(physical_max_segs(65536, 1024), (512 - 36) / 16);
    // Degenerate thresholds give no room rather than wrapping.
    assert_eq!(physical_max_segs(0, 0), 0);
    assert_eq!(
        TransportParams::physical(0, 0, &DeviceCaps::RXE).physical_max_payload(),
        0
    );
}

#[test]
fn physical_plans_fit_their_segments() {
    // The largest READ, WRITE and krb5i-style READ (no DDP: a Reply chunk
    // with head, pages and tail) at 4 KiB and 64 KiB thresholds, with a
    // misaligned page list: every plan fits its segments.
    for inline in [4096u32, 65536] {
        let p = TransportParams::physical(inline, inline, &DeviceCaps::RXE);
        let max = p.physical_max_payload();
        let mut recv = buf(120, max, 8);
        recv.page_base = 100;
        let read = shape(buf(120, 0, 0), false, recv, true);
        let r = plan(&read, &p).unwrap();
        assert!(
            matches!(r.result, ResultStrategy::WriteChunk { segments, .. } if segments <= p.max_rdma_segs)
        );
        let mut send = buf(160, max, 0);
        send.page_base = 100;
        let write = shape(send, true, buf(200, 0, 0), false);
        let w = plan(&write, &p).unwrap();
        assert!(
            matches!(w.call, CallStrategy::ReadChunk { segments, .. } if segments <= p.max_rdma_segs)
        );
        let mut krb = read;
        krb.ddp_allowed = false;
        assert!(plan(&krb, &p).is_ok(), "{inline}: {:?}", plan(&krb, &p));
        // Three pages more than the payload do not fit when misaligned.
        let mut over = buf(120, max + 3 * 4096, 8);
        over.page_base = 100;
        let too_big = shape(buf(120, 0, 0), false, over, true);
        assert!(plan(&too_big, &p).is_err());
    }
}

#[test]
fn frwr_payload_follows_the_pages_per_mr() {
    let caps = |pages| DeviceCaps {
        max_fast_reg_page_list_len: pages,
        max_sge_rd: 0,
        ..DeviceCaps::RXE
    };
    // The device's depth: 1 MiB in three segments (head, pages, tail).
    let full = TransportParams::from_device(4096, 4096, &caps(512));
    assert_eq!(full.max_rdma_segs, 3);
    assert_eq!(full.frwr_max_payload(), 1024 * 1024);
    // fmr_pages_per_mr=4: 16 segments, 14 of them 4 pages, one page lost
    // to a payload that does not start at a page boundary.
    let small = TransportParams::from_device(4096, 4096, &caps(4));
    assert_eq!(small.max_rdma_segs, MAX_HDR_SEGS);
    assert_eq!(small.frwr_max_payload(), 55 * 4096);
    assert_eq!(
        TransportParams::from_device(4096, 4096, &caps(1)).frwr_max_payload(),
        13 * 4096
    );
}
