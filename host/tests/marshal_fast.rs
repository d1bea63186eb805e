//! The client's one-pass plan and header of the common calls against the
//! general planner and encoder, their oracles: where the fast plan takes
//! a shape it must be the general plan, and the shapes of an inline pulled
//! up Call with an inline or Write chunk Reply it must take, and so for a
//! Call with a Read chunk and an inline Reply; its headers must be the
//! general encoder's, byte for byte.

use proptest::prelude::*;
use rpcrdma_proto::proto::encode::{encode_header, BodyRef, ChunkListsRef, HeaderRef};
use rpcrdma_proto::proto::marshal_fast::{
    encode_fast_header, encode_fast_read_header, plan_fast, plan_fast_read, CallSketch, CommonPlan,
    FastLimits, FastResult,
};
use rpcrdma_proto::proto::msg::{Proc, ReadSegment, Segment, RPCRDMA_VERSION};
use rpcrdma_proto::proto::planner::{
    plan, CallStrategy, DeviceCaps, ResultStrategy, RpcShape, TransportParams, XdrBufShape,
};

/// The page data below which the fast plan may take a Call (the module's
/// `MAP_PAGES_MIN`).
const PULLUP_MAX: u32 = 1024;

fn check(s: &RpcShape, q: &TransportParams) -> Result<(), TestCaseError> {
    let general = plan(s, q);
    match plan_fast(s, q, PULLUP_MAX) {
        Some(fast) => {
            let general = general.expect("the general planner plans what the fast one does");
            prop_assert_eq!(general.call, CallStrategy::InlinePullup);
            prop_assert_eq!(general.proc_, Proc::Msg);
            let result = match fast.result {
                FastResult::Inline => ResultStrategy::Inline,
                FastResult::WriteChunk {
                    segments,
                    write_pad,
                } => ResultStrategy::WriteChunk {
                    segments,
                    write_pad,
                },
            };
            prop_assert_eq!(general.result, result);
            prop_assert_eq!(general.header_len, fast.header_len);
            prop_assert_eq!(general.inline_len, fast.call_len);
        }
        None => {
            // What it leaves is never one of its shapes.
            if let Ok(g) = general {
                let common_result = matches!(
                    g.result,
                    ResultStrategy::Inline | ResultStrategy::WriteChunk { .. }
                );
                prop_assert!(
                    !(g.call == CallStrategy::InlinePullup
                        && common_result
                        && s.send.page_len < PULLUP_MAX),
                    "left a common shape: {:?}",
                    g
                );
            }
        }
    }
    Ok(())
}

/// [`plan_fast_read`] against the general planner: where it takes a
/// shape, the general plan is a Read chunk at the head's end with an
/// inline Reply and the same lengths; every such general plan it takes.
fn check_read(s: &RpcShape, q: &TransportParams) -> Result<(), TestCaseError> {
    let general = plan(s, q);
    match plan_fast_read(s, q) {
        Some(fast) => {
            let general = general.expect("the general planner plans what the fast one does");
            prop_assert_eq!(
                general.call,
                CallStrategy::ReadChunk {
                    position: fast.position,
                    segments: fast.segments
                }
            );
            prop_assert_eq!(general.result, ResultStrategy::Inline);
            prop_assert_eq!(general.proc_, Proc::Msg);
            prop_assert_eq!(general.header_len, fast.header_len);
            prop_assert_eq!(general.inline_len, fast.inline_len);
        }
        None => {
            if let Ok(g) = general {
                prop_assert!(
                    !(matches!(g.call, CallStrategy::ReadChunk { .. })
                        && g.result == ResultStrategy::Inline),
                    "left a Read chunk call: {:?}",
                    g
                );
            }
        }
    }
    Ok(())
}

/// [`FastLimits::plan`] against [`plan_fast`] and [`plan_fast_read`], its
/// oracles: what it plans is theirs; and it takes every call of theirs
/// whose chunk is one segment, but for page lists whose end overflows
/// (which the planner walks) and Calls short enough to go inline that take
/// a Read chunk for want of Send SGEs.
fn check_common(s: &RpcShape, q: &TransportParams) -> Result<(), TestCaseError> {
    let Some(limits) = FastLimits::new(q, s.send_buf_len) else {
        return Ok(());
    };
    let fast = plan_fast(s, q, PULLUP_MAX);
    let fast_read = plan_fast_read(s, q);
    let mut asked = false;
    let common = limits.plan(&CallSketch::from(s), || {
        asked = true;
        s.ddp_allowed
    });
    match common {
        Some(CommonPlan::Pullup(p)) => prop_assert_eq!(fast, Some(p)),
        Some(CommonPlan::ReadChunk(p)) => {
            prop_assert_eq!(fast, None);
            prop_assert_eq!(fast_read, Some(p));
        }
        None => {
            let fits = |b: &XdrBufShape| b.page_base.checked_add(b.page_len).is_some();
            let one_segment = match fast {
                Some(f) if s.send.page_len == 0 => match f.result {
                    FastResult::Inline => true,
                    FastResult::WriteChunk {
                        segments,
                        write_pad,
                    } => segments == 1 + u32::from(write_pad) && fits(&s.recv),
                },
                Some(_) => false,
                // Calls too long to go inline (not those that would
                // take too many Send SGEs).
                None => fast_read.is_some_and(|f| {
                    f.segments == 1
                        && fits(&s.send)
                        && s.send.len().is_some_and(|n| n > q.max_inline_send())
                }),
            };
            prop_assert!(
                !one_segment,
                "left a common call: {:?} {:?}",
                fast,
                fast_read
            );
        }
    }
    // Asked only of calls that would place data directly.
    if asked {
        prop_assert!(s.recv_ddp || s.send_ddp);
    }
    Ok(())
}

fn seg() -> impl Strategy<Value = Segment> {
    (any::<u32>(), any::<u32>(), any::<u64>()).prop_map(|(h, l, o)| Segment::new(h, l, o))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6000, failure_persistence: None, ..ProptestConfig::default() })]

    /// Random shapes, weighted to the small Calls and READ-like Replies the
    /// fast plan takes.
    #[test]
    fn plan_agrees_with_the_general_planner(
        sh in prop_oneof![0u32..300, 0u32..6000], sp in prop_oneof![Just(0u32), 1u32..2048, 1u32..300_000],
        st in prop_oneof![Just(0u32), 0u32..600], spb in 0u32..8192, sho in 0u32..4096, sto in 0u32..4096,
        rh in prop_oneof![0u32..400, 0u32..6000], rp in prop_oneof![Just(0u32), 1u32..1_100_000, (u32::MAX - 10_000)..=u32::MAX],
        rt in 0u32..600, rpb in prop_oneof![0u32..8192, (u32::MAX - 10_000)..=u32::MAX], rho in 0u32..4096, rto in 0u32..4096,
        extra in prop_oneof![Just(0u32), 0u32..9000],
        send_ddp: bool, recv_ddp: bool, ddp_allowed: bool, sg_gaps: bool,
        sbl in prop_oneof![Just(4096u32), 1024u32..8192], depth in 1u32..64, sge in 3u32..20,
        inline_send in prop_oneof![Just(4096u32), 1024u32..65536], inline_recv in prop_oneof![Just(4096u32), 1024u32..65536],
        segs in 1u32..64,
    ) {
        let send = XdrBufShape { head_len: sh, head_page_offset: sho, page_base: spb, page_len: sp, tail_len: st, tail_page_offset: sto, buflen: sh.saturating_add(sp).saturating_add(st) };
        let rbuf = rh.saturating_add(rp).saturating_add(rt).saturating_add(extra);
        let recv = XdrBufShape { head_len: rh, head_page_offset: rho, page_base: rpb, page_len: rp, tail_len: rt, tail_page_offset: rto, buflen: rbuf };
        let s = RpcShape { send, send_ddp, recv, recv_ddp, ddp_allowed, send_buf_len: sbl };
        let mut q = TransportParams::from_device(inline_send, inline_recv, &DeviceCaps { max_fast_reg_page_list_len: depth, max_sge_rd: 1, max_send_sge: sge, sg_gaps });
        q.max_rdma_segs = segs;
        check(&s, &q)?;
        check_read(&s, &q)?;
        check_common(&s, &q)?;
    }

    /// The header, with and without a Write chunk, against the general
    /// encoder, in buffers long enough and too short.
    #[test]
    fn header_agrees_with_the_general_encoder(
        xid: u32, credits: u32, writes in prop::collection::vec(seg(), 0..20), room in 0usize..400,
    ) {
        let write_list: [&[Segment]; 1] = [&writes];
        let chunks = ChunkListsRef {
            read: &[],
            write: if writes.is_empty() { &[] } else { &write_list },
            reply: None,
        };
        let hdr = HeaderRef { xid, vers: RPCRDMA_VERSION, credits, body: BodyRef::Msg(chunks) };
        let mut general = vec![0u8; room];
        let mut fast = vec![0u8; room];
        let g = encode_header(&hdr, &mut general).ok();
        let f = encode_fast_header(xid, credits, &writes, &mut fast);
        prop_assert_eq!(g, f);
        if let Some(n) = f {
            prop_assert_eq!(&general[..n], &fast[..n]);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, failure_persistence: None, ..ProptestConfig::default() })]

    /// The header of a Call with one Read chunk against the general
    /// encoder, in buffers long enough and too short.
    #[test]
    fn read_header_agrees_with_the_general_encoder(
        xid: u32, credits: u32, position: u32, segs in prop::collection::vec(seg(), 0..20), room in 0usize..600,
    ) {
        let reads: Vec<ReadSegment> = segs.iter().map(|&segment| ReadSegment { position, segment }).collect();
        let chunks = ChunkListsRef { read: &reads, write: &[], reply: None };
        let hdr = HeaderRef { xid, vers: RPCRDMA_VERSION, credits, body: BodyRef::Msg(chunks) };
        let mut general = vec![0u8; room];
        let mut fast = vec![0u8; room];
        let g = encode_header(&hdr, &mut general).ok();
        let f = encode_fast_read_header(xid, credits, position, &segs, &mut fast);
        prop_assert_eq!(g, f);
        if let Some(n) = f {
            prop_assert_eq!(&general[..n], &fast[..n]);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    /// The usual WRITE's header (one Read segment, written as whole
    /// words) against the general encoder, in buffers long enough and too
    /// short.
    #[test]
    fn one_segment_read_header_agrees_with_the_general_encoder(
        xid: u32, credits: u32, position: u32, s in seg(), room in 0usize..80,
    ) {
        let reads = [ReadSegment { position, segment: s }];
        let chunks = ChunkListsRef { read: &reads, write: &[], reply: None };
        let hdr = HeaderRef { xid, vers: RPCRDMA_VERSION, credits, body: BodyRef::Msg(chunks) };
        let mut general = vec![0u8; room];
        let mut fast = vec![0u8; room];
        let g = encode_header(&hdr, &mut general).ok();
        let f = encode_fast_read_header(xid, credits, position, &[s], &mut fast);
        prop_assert_eq!(g, f);
        if let Some(n) = f {
            prop_assert_eq!(&general[..n], &fast[..n]);
        }
    }
}

/// A GETATTR and a 4 KiB READ as the Linux client shapes them, on rxe's
/// parameters: both taken, with the general plan's header lengths.
#[test]
fn getattr_and_read_are_taken() {
    let q = TransportParams::from_device(4096, 4096, &DeviceCaps::RXE);
    let getattr = RpcShape {
        send: XdrBufShape::new(200, 0, 0),
        send_ddp: false,
        recv: XdrBufShape::new(400, 0, 0),
        recv_ddp: false,
        ddp_allowed: true,
        send_buf_len: 4096,
    };
    let limits = FastLimits::new(&q, 4096).expect("rxe's parameters");
    let f = plan_fast(&getattr, &q, PULLUP_MAX).expect("a GETATTR is common");
    assert_eq!(
        limits.plan(&CallSketch::from(&getattr), || true),
        Some(CommonPlan::Pullup(f))
    );
    assert_eq!(
        (f.result, f.header_len, f.call_len),
        (FastResult::Inline, 28, 200)
    );
    let read = RpcShape {
        recv: XdrBufShape {
            buflen: 8192,
            ..XdrBufShape::new(120, 4096, 0)
        },
        recv_ddp: true,
        ..getattr
    };
    let f = plan_fast(&read, &q, PULLUP_MAX).expect("a READ is common");
    assert_eq!(
        limits.plan(&CallSketch::from(&read), || true),
        Some(CommonPlan::Pullup(f))
    );
    // Not with an auth flavor that checksums the data.
    assert_eq!(limits.plan(&CallSketch::from(&read), || false), None);
    assert_eq!(
        f.result,
        FastResult::WriteChunk {
            segments: 1,
            write_pad: false
        }
    );
    assert_eq!(f.header_len, 28 + 8 + 16);
    // A 4 KiB WRITE's Call does not fit inline: the general planner's.
    let write = RpcShape {
        send: XdrBufShape::new(200, 4096, 0),
        send_ddp: true,
        ..getattr
    };
    assert_eq!(plan_fast(&write, &q, PULLUP_MAX), None);
    // ... it takes a Read chunk, which the Read chunk plan takes.
    let f = plan_fast_read(&write, &q).expect("a WRITE is common");
    assert_eq!(
        limits.plan(&CallSketch::from(&write), || true),
        Some(CommonPlan::ReadChunk(f))
    );
    assert_eq!((f.position, f.segments, f.inline_len), (200, 1, 200));
    assert_eq!(f.header_len, 28 + 24);
}
