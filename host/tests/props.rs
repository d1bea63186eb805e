//! Property tests: encode/decode round trips for arbitrary valid messages,
//! and robustness of the decoder on arbitrary and mutated input.

use proptest::prelude::*;
use rpcrdma_proto::proto::cm::{decode_buffer_size, encode_buffer_size, ConnectPrivate};
use rpcrdma_proto::proto::decode::{decode_call, decode_header, decode_reply};
use rpcrdma_proto::proto::encode::{
    encode_header, error_reply_for, BodyRef, ChunkListsRef, EncodeError, HeaderRef,
};
use rpcrdma_proto::proto::golden::compare_header;
use rpcrdma_proto::proto::msg::{Body, DecodeLimits, ErrorBody, Header, ReadSegment, Segment};
use rpcrdma_proto::proto::pcl::{NonPayloadRegions, ParsedChunks, PclChunk, PclError, ReadRegion};
use rpcrdma_proto::proto::pieces::{page_spans, CallReadPieces, Pieces};
use rpcrdma_proto::proto::svc_call::PagedCall;
use rpcrdma_proto::proto::svc_reply::ReplyBody;
use rpcrdma_proto::proto::xdr::XdrWriter;
use rpcrdma_proto::targets::decode_header::reencode;

const LIM: DecodeLimits = DecodeLimits {
    max_segments_per_chunk: 16,
    max_chunks: 16,
    max_payload: 1 << 24,
    max_inline: 1 << 16,
};

fn cfg(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn segment() -> impl Strategy<Value = Segment> {
    (any::<u32>(), 0u32..70_000, any::<u64>()).prop_map(|(h, l, o)| Segment::new(h, l, o))
}

fn chunk() -> impl Strategy<Value = Vec<Segment>> {
    prop::collection::vec(segment(), 1..6)
}

/// A valid Read list: chunks at increasing aligned positions that do not
/// overlap, segments shuffled, plus the inline length they need.
fn read_list(call: bool) -> impl Strategy<Value = (Vec<ReadSegment>, u32)> {
    (
        prop::collection::vec((0u32..16, prop::collection::vec(0u32..3000, 1..3)), 0..4),
        prop::collection::vec(0u32..3000, 1..3),
        0u32..64,
    )
        .prop_flat_map(move |(chunks, call_lens, extra)| {
            let mut segs = Vec::new();
            let mut pos = 0u32;
            let mut consumed = 0u32;
            let mut need = 0u32;
            let mut h = 1u32;
            for (gap, lens) in &chunks {
                pos = pos.next_multiple_of(4) + gap * 4;
                if pos == 0 {
                    pos = 4;
                }
                let len: u32 = lens.iter().sum();
                need = need.max(pos - consumed);
                for l in lens {
                    segs.push(ReadSegment::new(pos, h, *l, u64::from(h) << 12));
                    h += 1;
                }
                pos += len;
                consumed += len;
            }
            let mut base = need + extra * 4;
            if call {
                // Position-zero segments sized to hold everything.
                let total: u32 = call_lens.iter().sum::<u32>() + base;
                let n = call_lens.len() as u32;
                for (i, l) in call_lens.iter().enumerate() {
                    let l = if i == 0 {
                        l + (total - call_lens.iter().sum::<u32>())
                    } else {
                        *l
                    };
                    segs.push(ReadSegment::new(0, 1000 + i as u32, l, 7));
                }
                let _ = n;
                base = 0;
            }
            (Just(segs).prop_shuffle(), Just(base))
        })
}

#[derive(Debug, Clone)]
struct Owned {
    xid: u32,
    credits: u32,
    kind: u8,
    read: Vec<ReadSegment>,
    write: Vec<Vec<Segment>>,
    reply: Option<Vec<Segment>>,
    payload: u32,
    err: ErrorBody,
    align: u32,
    thresh: u32,
}

fn owned() -> impl Strategy<Value = Owned> {
    (
        any::<u32>(),
        any::<u32>(),
        0u8..5,
        any::<bool>(),
        prop::collection::vec(chunk(), 0..3),
        prop::option::of(chunk()),
        prop_oneof![
            Just(ErrorBody::Chunk),
            (any::<u32>(), any::<u32>()).prop_map(|(low, high)| ErrorBody::Vers { low, high })
        ],
        any::<u32>(),
        any::<u32>(),
    )
        .prop_flat_map(
            |(xid, credits, kind, call, write, reply, err, align, thresh)| {
                // Position-zero chunks belong to RDMA_NOMSG only.
                let _ = call;
                let call = kind == 1;
                (
                    read_list(call),
                    Just((xid, credits, kind, write, reply, err, align, thresh)),
                )
            },
        )
        .prop_map(
            |((read, payload), (xid, credits, kind, write, reply, err, align, thresh))| Owned {
                xid,
                credits,
                kind,
                read,
                write,
                reply,
                payload,
                err,
                align,
                thresh,
            },
        )
}

fn with_ref<R>(o: &Owned, f: impl FnOnce(&HeaderRef<'_>) -> R) -> R {
    let write: Vec<&[Segment]> = o.write.iter().map(|c| &c[..]).collect();
    let chunks = ChunkListsRef {
        read: &o.read,
        write: &write,
        reply: o.reply.as_deref(),
    };
    let body = match o.kind {
        0 => BodyRef::Msg(chunks),
        1 => BodyRef::NoMsg(chunks),
        2 => BodyRef::Msgp {
            align: o.align,
            thresh: o.thresh,
            chunks,
        },
        3 => BodyRef::Done,
        _ => BodyRef::Error(o.err),
    };
    f(&HeaderRef {
        xid: o.xid,
        vers: 1,
        credits: o.credits,
        body,
    })
}

fn encode(o: &Owned) -> Vec<u8> {
    with_ref(o, |h| {
        let mut buf = vec![0u8; h.encoded_len().unwrap()];
        let n = encode_header(h, &mut buf).unwrap();
        assert_eq!(n, buf.len());
        if matches!(o.kind, 0 | 2) {
            buf.resize(n + o.payload as usize, 0xee);
        }
        buf
    })
}

/// Invariants of any successfully decoded header.
fn check_invariants(buf: &[u8], h: &Header<'_>, lim: &DecodeLimits) {
    assert!(h.header_len <= buf.len());
    let in_buf = |s: &[u8]| {
        let b = buf.as_ptr_range();
        let r = s.as_ptr_range();
        s.is_empty() || (r.start >= b.start && r.end <= b.end)
    };
    match h.body {
        Body::Msg { payload, .. } | Body::Msgp { payload, .. } => {
            assert!(in_buf(payload));
            assert_eq!(payload.len(), buf.len() - h.header_len);
        }
        Body::NoMsg { trailing, .. } => assert!(in_buf(trailing)),
        _ => {}
    }
    if let Some(c) = h.chunks() {
        assert!(c.read.len() <= lim.max_chunks);
        assert_eq!(c.read.iter().count() as u32, c.read.len());
        let mut total = 0u64;
        for s in c.read.iter() {
            assert_eq!(s.position % 4, 0);
            total += u64::from(s.segment.length);
        }
        assert!(total <= u64::from(lim.max_payload));
        assert!(c.write.len() <= lim.max_chunks);
        assert_eq!(c.write.iter().count() as u32, c.write.len());
        for w in c.write.iter().chain(c.reply) {
            assert!(w.segment_count() >= 1 && w.segment_count() <= lim.max_segments_per_chunk);
            assert_eq!(w.segments().count() as u32, w.segment_count());
            let sum: u64 = w.segments().map(|s| u64::from(s.length)).sum();
            assert_eq!(sum, u64::from(w.total_length()));
        }
    }
    // Re-encoding the decoded fields gives back the header bytes exactly
    // (except unknown error codes, which are decoded but never encoded).
    if !matches!(h.body, Body::Error(ErrorBody::Other(_))) {
        assert_eq!(&reencode(h)[..], &buf[..h.header_len]);
    }
}

/// Server-side follow-up on an accepted call: the parsed chunk lists build
/// in exactly-sized storage and the call reassembles without error.
fn check_server_side(h: &Header<'_>) {
    let Some(lists) = h.chunks() else { return };
    let mut chunks = vec![PclChunk::default(); ParsedChunks::chunks_needed(lists)];
    let mut segs = vec![Segment::default(); ParsedChunks::segments_needed(lists)];
    let pcl = ParsedChunks::build(lists, &mut chunks, &mut segs).unwrap();
    let base = match (pcl.call_chunk(), &h.body) {
        (Some(c), _) => c.length,
        (None, Body::Msg { payload, .. }) => payload.len() as u32,
        (None, _) => 0,
    };
    let mut nchunks = 0;
    for r in pcl.read_regions(base) {
        if let ReadRegion::Chunk(_) = r.unwrap() {
            nchunks += 1;
        }
    }
    assert_eq!(nchunks, pcl.read_chunks().len());
    let mut w = pcl.read_chunks().windows(2);
    assert!(w.all(|p| p[0].position < p[1].position));
    if let Body::Msg { payload, .. } = &h.body {
        check_paged(&pcl, payload.len());
    }
}

/// A Call read into pages of its own: its layout stays inside the pages it
/// asks for, and every Read of at most 15 pages scatters over at most 16
/// of them, all inside the chunk's pages (svcrdma/rw.rs `PAGED_PIECE`).
fn check_paged(pcl: &ParsedChunks<'_>, inline_len: usize) {
    const PAGE: usize = 4096;
    const MAX_PAGES: usize = 260;
    let Some(p) = PagedCall::new(pcl, inline_len, PAGE, MAX_PAGES) else {
        return;
    };
    assert!(p.position as usize <= inline_len && inline_len <= PAGE);
    assert!(p.padded_len >= p.chunk_len && p.padded_len - p.chunk_len < 4);
    assert_eq!(p.padded_len % 4, 0);
    assert_eq!((p.padded_len as usize).div_ceil(PAGE), p.pages);
    assert!(p.pages < MAX_PAGES);
    let pieces = CallReadPieces::new(pcl, 15 * PAGE);
    assert!(pieces.clone().count() <= pieces.max_count());
    for piece in pieces {
        let Ok((src, piece)) = piece else { return };
        assert_eq!(src, 1);
        let spans: Vec<_> = page_spans(piece.off, piece.len, PAGE).unwrap().collect();
        assert!(spans.len() <= 16);
        assert_eq!(spans.iter().map(|s| s.len).sum::<usize>(), piece.len);
        assert!(spans
            .iter()
            .all(|s| s.page < p.pages && s.offset + s.len <= PAGE));
    }
}

proptest! {
    #![proptest_config(cfg(4000))]

    #[test]
    fn round_trip(o in owned()) {
        let bytes = encode(&o);
        let h = decode_header(&bytes, &LIM).unwrap();
        with_ref(&o, |want| compare_header(&h, want)).unwrap();
        check_invariants(&bytes, &h, &LIM);
        if matches!(o.kind, 0 | 1) {
            let h = decode_call(&bytes, &LIM).unwrap();
            check_server_side(&h);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(buf in prop::collection::vec(any::<u8>(), 0..300)) {
        for lim in [LIM, DecodeLimits::server_default(), DecodeLimits::client_default()] {
            if let Ok(h) = decode_header(&buf, &lim) {
                check_invariants(&buf, &h, &lim);
            }
            match decode_call(&buf, &lim) {
                Ok(h) => check_server_side(&h),
                Err(e) => { let _ = error_reply_for(&buf, &e, 1); }
            }
            let _ = decode_reply(&buf, &lim);
        }
        let _ = ConnectPrivate::decode(&buf);
    }

    /// Word-structured noise reaches deeper than random bytes: small
    /// values in every word make discriminators and counts plausible.
    #[test]
    fn arbitrary_words_never_panic(words in prop::collection::vec(prop_oneof![0u32..3, 0u32..64, any::<u32>()], 4..64)) {
        let mut buf: Vec<u8> = words.iter().flat_map(|w| w.to_be_bytes()).collect();
        buf[4..8].copy_from_slice(&1u32.to_be_bytes());
        if let Ok(h) = decode_header(&buf, &LIM) {
            check_invariants(&buf, &h, &LIM);
        }
        if let Ok(h) = decode_call(&buf, &LIM) {
            check_server_side(&h);
        }
    }

    #[test]
    fn mutated_valid_headers_never_panic(
        o in owned(),
        muts in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..4), 1..6),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut bytes = encode(&o);
        for (at, v, how) in muts {
            let i = at.index(bytes.len());
            match how {
                0 => bytes[i] = v,
                1 => bytes[i] ^= 1 << (v % 8),
                2 => {
                    let w = (i & !3).min(bytes.len().saturating_sub(4));
                    let n = bytes.len().min(4);
                    bytes[w..w + n].copy_from_slice(&u32::from(v).to_be_bytes()[..n]);
                }
                _ => { let w = i & !3; bytes.splice(w..w, u32::from(v % 3).to_be_bytes()); }
            }
        }
        for b in [&bytes[..], &bytes[..cut.index(bytes.len() + 1)]] {
            if let Ok(h) = decode_header(b, &LIM) {
                check_invariants(b, &h, &LIM);
            }
            match decode_call(b, &LIM) {
                Ok(h) => check_server_side(&h),
                Err(e) => { let _ = error_reply_for(b, &e, 1); }
            }
            let _ = decode_reply(b, &LIM);
        }
    }

    #[test]
    fn cm_private_round_trip(send in any::<u32>(), recv in any::<u32>(), inv: bool, pad in prop::collection::vec(any::<u8>(), 0..48)) {
        let p = ConnectPrivate::new(send, recv, inv);
        let mut bytes = p.to_bytes().to_vec();
        bytes.extend_from_slice(&pad);
        let d = ConnectPrivate::decode(&bytes).unwrap();
        prop_assert_eq!(d, p);
        prop_assert_eq!(d.send_w_inv_ok(), inv);
        let s = d.inline_send();
        prop_assert!((1024..=262_144).contains(&s));
        prop_assert!(s <= send.max(1024));
        prop_assert_eq!(encode_buffer_size(decode_buffer_size(p.send_size)), p.send_size);
    }
}

/// A position or length of a Reply's payload: mostly small, so that
/// payloads meet, overlap and fit, sometimes near `u32::MAX`.
fn reply_offset() -> impl Strategy<Value = u32> {
    prop_oneof![8 => 0u32..300, 1 => (u32::MAX - 300)..=u32::MAX]
}

proptest! {
    #![proptest_config(cfg(4000))]

    /// The length of a Reply's non-payload regions, counted in one loop,
    /// is the sum of what the walk yields, and an error exactly when the
    /// walk yields one.
    #[test]
    fn nonpayload_total_len_is_the_walks_sum(
        payloads in prop::collection::vec((reply_offset(), reply_offset()), 0..5),
        xdr_len in reply_offset(),
    ) {
        let chunks: Vec<PclChunk> = payloads
            .iter()
            .map(|&(position, payload_length)| PclChunk {
                position,
                payload_length,
                ..PclChunk::default()
            })
            .collect();
        let walk = NonPayloadRegions::new(&chunks, xdr_len);
        let mut sum: Result<u32, PclError> = Ok(0);
        for r in walk.clone() {
            sum = sum.and_then(|s| s.checked_add(r?.len).ok_or(PclError::BadRegion));
        }
        prop_assert_eq!(walk.total_len(), sum);
    }
}

/// `ParsedChunks::encode_reply_header` as it was written word by word,
/// each word bounds-checked: what the encoder must match, bytes and
/// errors, for every output length.
fn reply_header_word_by_word(
    pcl: &ParsedChunks<'_>,
    xid: u32,
    credits: u32,
    reply_len: u32,
    out: &mut [u8],
) -> Result<usize, EncodeError> {
    let trimmed = |w: &mut XdrWriter<'_>, chunk: &PclChunk, used: u32| {
        let segs = pcl.segments(chunk);
        w.write_u32(u32::try_from(segs.len()).unwrap())?;
        let mut remaining = used;
        for s in segs {
            let length = remaining.min(s.length);
            remaining -= length;
            w.write_words([s.handle, length, (s.offset >> 32) as u32, s.offset as u32])?;
        }
        Ok::<(), EncodeError>(())
    };
    let mut w = XdrWriter::new(out);
    let reply = pcl.reply_chunk();
    w.write_words([xid, 1, credits, u32::from(reply.is_some()), 0])?;
    for chunk in pcl.write_chunks() {
        w.write_bool(true)?;
        trimmed(&mut w, chunk, chunk.payload_length)?;
    }
    w.write_bool(false)?;
    match reply {
        Some(chunk) => {
            if reply_len > chunk.length {
                return Err(EncodeError::TooLarge);
            }
            w.write_bool(true)?;
            trimmed(&mut w, chunk, reply_len)?;
        }
        None => w.write_bool(false)?,
    }
    Ok(w.position())
}

/// The server's parsed chunk lists of `o` made a Call without Read
/// chunks, with `payloads` recorded as result payloads where they fit:
/// what `xpo_sendto` works from.
fn with_reply_pcl<R>(
    o: &Owned,
    payloads: &[(u32, u32)],
    f: impl FnOnce(&ParsedChunks<'_>) -> R,
) -> R {
    let o = Owned {
        kind: 0,
        read: Vec::new(),
        ..o.clone()
    };
    let bytes = encode(&o);
    let h = decode_call(&bytes, &LIM).unwrap();
    let (lists, _) = h.body.chunks_and_inline().unwrap();
    let mut chunks = [PclChunk::default(); 8];
    let mut segs = [Segment::default(); 32];
    let mut pcl = ParsedChunks::build(lists, &mut chunks, &mut segs).unwrap();
    for (i, &(position, length)) in payloads.iter().enumerate() {
        let _ = pcl.set_result_payload(i, position, length);
    }
    f(&pcl)
}

proptest! {
    #![proptest_config(cfg(1000))]

    /// The Reply's header is the same, bytes or error, as written word by
    /// word, whatever room it is given.
    #[test]
    fn reply_header_matches_word_by_word(
        o in owned(),
        payloads in prop::collection::vec((0u32..300, 0u32..80_000), 0..3),
        reply_len in 0u32..80_000,
    ) {
        with_reply_pcl(&o, &payloads, |pcl| {
            let mut a = [0u8; 512];
            let mut b = [0u8; 512];
            for room in 0..=a.len() {
                let got = pcl.encode_reply_header(o.xid, o.credits, reply_len, &mut a[..room]);
                let want = reply_header_word_by_word(pcl, o.xid, o.credits, reply_len, &mut b[..room]);
                prop_assert_eq!(got, want);
                if let Ok(n) = got {
                    prop_assert_eq!(&a[..n], &b[..n]);
                }
            }
            Ok(())
        })?;
    }
}

proptest! {
    #![proptest_config(cfg(1000))]

    /// An inline Reply's page part is the body's one run in the page
    /// list, where the body has exactly one there: it lies in the list and
    /// in the body, the body's bytes at its place are that run, and the
    /// body around it holds no other bytes of the list.
    #[test]
    fn a_bodys_page_part_is_its_one_run_in_the_page_list(
        o in owned(),
        payloads in prop::collection::vec((0u32..3000, 0u32..3000), 0..3),
        reply_len in 0u32..8000,
        start in 0u32..8000,
        len in 0u32..8000,
    ) {
        with_reply_pcl(&o, &payloads, |pcl| {
            let Ok(body) = ReplyBody::new(pcl, reply_len) else {
                return Ok(());
            };
            let total = body.len() as usize;
            let end = start.saturating_add(len);
            // The body's runs within the list, by brute force.
            // Runs that continue each other (in the Reply and the body) merged.
            let mut inside: Vec<(u32, usize, usize)> = Vec::new();
            for r in body.runs(0, total).map(|r| r.unwrap()) {
                let (lo, hi) = (r.reply_offset.max(start), (r.reply_offset + r.len as u32).min(end));
                if lo >= hi {
                    continue;
                }
                let (at, n) = (r.at + (lo - r.reply_offset) as usize, (hi - lo) as usize);
                match inside.last_mut() {
                    Some(l) if l.0 + l.2 as u32 == lo && l.1 + l.2 == at => l.2 += n,
                    _ => inside.push((lo, at, n)),
                }
            }
            let got = body.page_part(start, len, 1);
            match inside.as_slice() {
                [(reply_offset, at, n)] => {
                    let part = got.unwrap();
                    prop_assert_eq!((part.reply_offset, part.at, part.len), (*reply_offset, *at, *n));
                    // The body's bytes there are the Reply's at the part's offset.
                    let mut next = part.reply_offset;
                    for r in body.runs(part.at, part.len).map(|r| r.unwrap()) {
                        prop_assert_eq!(r.reply_offset, next);
                        next += r.len as u32;
                    }
                    prop_assert_eq!(next, part.reply_offset + part.len as u32);
                    prop_assert!(part.at + part.len <= total);
                    prop_assert_eq!(body.page_part(start, len, part.len + 1), None);
                }
                _ => prop_assert_eq!(got, None),
            }
            Ok(())
        })?;
    }
}

proptest! {
    #![proptest_config(cfg(4000))]

    /// `Pieces::single` is the one piece the cutter cuts, or `None` when
    /// the cutter cuts anything else.
    #[test]
    fn a_single_piece_is_what_the_cutter_cuts(
        raw in prop::collection::vec(
            (any::<u32>(), prop_oneof![0u32..70_000, any::<u32>()], any::<u64>()),
            0..3,
        ),
        total in prop_oneof![0usize..70_000, Just(4096)],
        max_piece in prop_oneof![0usize..70_000, Just(4096), Just(118_784)],
        whole in any::<bool>(),
    ) {
        let segs: Vec<Segment> = raw
            .iter()
            .map(|&(h, l, a)| Segment::new(h, l, a))
            .collect();
        // Often the segment's own length, so that the single case occurs.
        let total = match (whole, segs.first()) {
            (true, Some(s)) => s.length as usize,
            _ => total,
        };
        // Two pieces say all the property needs (one, or more than one);
        // a segment of up to 4 GiB cut into pieces of a few bytes would
        // not fit in memory.
        let cut: Vec<_> = Pieces::new(&segs, total, max_piece).take(2).collect();
        match Pieces::single(&segs, total, max_piece) {
            Some(p) => prop_assert_eq!(cut, vec![Ok(p)]),
            None => prop_assert!(segs.len() != 1 || cut.len() != 1 || cut[0].is_err()
                || cut[0].as_ref().is_ok_and(|p| p.len != segs[0].length as usize)),
        }
    }
}
