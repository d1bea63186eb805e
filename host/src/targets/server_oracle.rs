//! What the server should have produced, computed straight from the
//! decoded header and RFC 8166, without the core's walkers: the `server_receive`
//! target compares the core's results against these.

use alloc::vec::Vec;

use super::server_io::{client_byte, reply_byte};
use crate::proto::msg::{ChunkLists, Segment};

/// The Read segments of `lists` grouped into chunks: the call chunk
/// (position zero), then each position in increasing order, segments in
/// wire order.
pub fn read_chunks(lists: &ChunkLists<'_>) -> (Option<Vec<Segment>>, Vec<(u32, Vec<Segment>)>) {
    let call: Vec<Segment> = lists
        .read
        .iter()
        .filter(|s| s.position == 0)
        .map(|s| s.segment)
        .collect();
    let mut positions: Vec<u32> = lists
        .read
        .iter()
        .map(|s| s.position)
        .filter(|&p| p != 0)
        .collect();
    positions.sort_unstable();
    positions.dedup();
    let chunks = positions
        .into_iter()
        .map(|p| {
            let segs = lists
                .read
                .iter()
                .filter(|s| s.position == p)
                .map(|s| s.segment);
            (p, segs.collect())
        })
        .collect();
    ((!call.is_empty()).then_some(call), chunks)
}

/// Sum of the segment lengths.
pub fn length(segs: &[Segment]) -> u64 {
    segs.iter().map(|s| u64::from(s.length)).sum()
}

/// Length of the Call the server assembles: the inline body or call
/// chunk, plus every Read chunk rounded up to XDR alignment.
pub fn call_len(lists: &ChunkLists<'_>, inline_len: usize) -> u64 {
    let (call, chunks) = read_chunks(lists);
    let base = call.map_or(inline_len as u64, |c| length(&c));
    base + chunks
        .iter()
        .map(|(_, c)| (length(c) + 3) & !3)
        .sum::<u64>()
}

/// Whether some segment's addresses wrap around the end of the address
/// space (a client may offer that; the server must refuse, not panic).
pub fn wraps(segs: impl IntoIterator<Item = Segment>) -> bool {
    segs.into_iter()
        .any(|s| s.offset.checked_add(u64::from(s.length)).is_none())
}

/// The bytes of the client's memory behind `segs`, in order.
pub fn chunk_bytes(segs: &[Segment]) -> Vec<u8> {
    let mut out = Vec::new();
    for s in segs {
        out.extend(
            (0..u64::from(s.length)).map(|i| client_byte(s.handle, s.offset.wrapping_add(i))),
        );
    }
    out
}

/// The Call in XDR order, as C `svc_rdma_read_multiple_chunks` lays it
/// out: a Read chunk goes at offset `position - (bytes of the Read chunks
/// before it)` of the base, and is followed by its XDR pad.
pub fn call_bytes(lists: &ChunkLists<'_>, inline: &[u8]) -> Vec<u8> {
    let (call, chunks) = read_chunks(lists);
    let base = call.map_or_else(|| inline.to_vec(), |c| chunk_bytes(&c));
    let mut out = Vec::new();
    let mut base_at = 0usize;
    let mut before = 0u64;
    for (pos, segs) in &chunks {
        let to = (u64::from(*pos) - before) as usize;
        out.extend_from_slice(&base[base_at..to]);
        base_at = to;
        let data = chunk_bytes(segs);
        before += data.len() as u64;
        let pad = (4 - data.len() % 4) % 4;
        out.extend_from_slice(&data);
        out.extend(core::iter::repeat_n(0, pad));
    }
    out.extend_from_slice(&base[base_at..]);
    out
}

/// The Reply of `res_len` bytes without the result payloads `(position,
/// length)` and their XDR pads; `None` if they do not lie in order inside
/// it.
pub fn reply_body(payloads: &[(u32, u32)], res_len: u32) -> Option<Vec<(u32, u32)>> {
    let mut regions = Vec::new();
    let mut at = 0u64;
    for &(pos, len) in payloads {
        let pos = u64::from(pos);
        if pos < at {
            return None;
        }
        if pos > at {
            regions.push((at as u32, (pos - at) as u32));
        }
        at = (pos + u64::from(len) + 3) & !3;
    }
    if at > u64::from(res_len) {
        return None;
    }
    if at < u64::from(res_len) {
        regions.push((at as u32, (u64::from(res_len) - at) as u32));
    }
    Some(regions)
}

/// The bytes of the Reply's `regions`, concatenated.
pub fn region_bytes(regions: &[(u32, u32)]) -> Vec<u8> {
    let mut out = Vec::new();
    for &(off, len) in regions {
        out.extend((off..off + len).map(reply_byte));
    }
    out
}

/// Length of an `RDMA_MSG` reply header echoing `write_segments` (the
/// segment count of each Write chunk) and no Reply chunk: four words,
/// the empty Read list, each Write chunk (discriminator, count, segments),
/// the end of the Write list, the absent Reply chunk.
pub fn msg_header_len(write_segments: impl Iterator<Item = usize>) -> usize {
    28 + write_segments.map(|n| 8 + 16 * n).sum::<usize>()
}
