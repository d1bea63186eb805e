// SPDX-License-Identifier: GPL-2.0

//! The server's one-pass decoder of the Calls it nearly always gets: an
//! `RDMA_MSG` with at most one Read chunk, a Write list and a Reply chunk
//! or neither (an NFS READ: one Write chunk of one segment; a READDIR: a
//! Reply chunk; a GETATTR: nothing; an NFS WRITE: one Read chunk). C
//! `svc_rdma_xdr_decode_req` walks such a header once; so does this.
//!
//! The header is recognised from fixed words and decoded with every bound
//! of [`decode_call`](super::decode::decode_call) still checked, and its
//! chunk lists go straight into the parsed lists' storage, as
//! [`ParsedChunks::build`](super::pcl::ParsedChunks::build) would have
//! placed them: no [`Header`](super::msg::Header) is built and no list is
//! walked a second time. Anything else (a Read list, another procedure or
//! version, a malformed or oversized header, more chunks or segments than
//! the storage holds) is left to the general path: [`decode_call_fast`]
//! returns `None`, never an error of its own, so what it accepts is
//! exactly what the general path accepts with the same result, and what it
//! leaves is judged there. The host property test `call_fast` holds it to
//! that.

use super::msg::segment_from;
use super::msg::DecodeLimits;
use super::msg::Proc;
use super::msg::Segment;
use super::msg::ONE_SEGMENT_HEADER_LEN;
use super::msg::ONE_SEGMENT_HEADER_WORDS;
use super::msg::READ_ITEM_LEN;
use super::msg::RPCRDMA_VERSION;
use super::msg::SEGMENT_LEN;
use super::pcl::ChunkLayout;
use super::pcl::PclChunk;
use super::xdr::XdrReader;

/// A Call decoded by [`decode_call_fast`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FastCall {
    /// The Call's XID.
    pub xid: u32,
    /// The credits it asks for.
    pub credits: u32,
    /// Length of the transport header: the inline body (the RPC Call,
    /// all of it) starts here.
    pub header_len: usize,
    /// Where the lists went in the storage (the Read chunk first, then
    /// the Write chunks, then the Reply chunk), as
    /// [`ParsedChunks::layout`](super::pcl::ParsedChunks::layout) would say.
    pub layout: ChunkLayout,
    /// Whether the Call has a Read chunk (its data is pulled with RDMA
    /// Reads; the inline body is not the whole Call).
    pub read_chunk: bool,
    /// Whether the Call carries no chunk at all (then it may be a
    /// backchannel Reply, see [`is_backchannel_reply`](super::backchannel::is_backchannel_reply)).
    pub no_chunks: bool,
}

/// Length of the transport header of a Call without chunks: XID,
/// version, credits, procedure and three empty lists.
const NO_CHUNKS_HEADER_LEN: usize = 28;

/// The big-endian word at byte `at` of `buf`.
#[inline(always)]
fn word(buf: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(*buf.get(at..)?.first_chunk::<4>()?))
}

/// Storage being filled: how much of it is used.
struct Fill<'s> {
    chunks: &'s mut [PclChunk],
    segs: &'s mut [Segment],
    nc: usize,
    ns: usize,
}

impl Fill<'_> {
    /// Decodes the counted array of segments at byte `at` of `buf` (the
    /// count word first) as the general decoder's `decode_write_chunk`
    /// accepts it, into the next chunk and segments of the storage;
    /// returns where the array ends.
    #[inline(always)]
    fn chunk(&mut self, buf: &[u8], at: usize, limits: &DecodeLimits) -> Option<usize> {
        let count = word(buf, at)?;
        if count == 0 || count > limits.max_segments_per_chunk {
            return None;
        }
        let n = usize::try_from(count).ok()?;
        let start = at.checked_add(4)?;
        let end = start.checked_add(n.checked_mul(SEGMENT_LEN)?)?;
        let mut bytes = buf.get(start..end)?;
        let first = self.ns;
        let segs = self.segs.get_mut(first..first.checked_add(n)?)?;
        let mut length: u32 = 0;
        for slot in segs {
            let (seg, rest) = bytes.split_first_chunk::<SEGMENT_LEN>()?;
            let s = segment_from(seg);
            length = length.checked_add(s.length)?;
            *slot = s;
            bytes = rest;
        }
        *self.chunks.get_mut(self.nc)? = PclChunk {
            position: 0,
            length,
            payload_length: 0,
            first_segment: u32::try_from(first).ok()?,
            segcount: count,
        };
        self.nc = self.nc.checked_add(1)?;
        self.ns = self.ns.checked_add(n)?;
        Some(end)
    }

    /// Decodes the Read list at byte `at` of `buf` (after its first
    /// discriminator, which was 1) if it is one Read chunk: every segment
    /// at the same position, not zero (an `RDMA_MSG` has no call chunk),
    /// with the bounds of the general decoder's `decode_read_list`.
    /// Stores it as the first chunk; returns where the list ends, the
    /// chunk's position and its length.
    #[inline(always)]
    fn read_chunk(
        &mut self,
        buf: &[u8],
        mut at: usize,
        limits: &DecodeLimits,
    ) -> Option<(usize, u32, u32)> {
        let first = self.ns;
        let mut position = None;
        let mut count: u32 = 0;
        let mut length: u32 = 0;
        loop {
            let (item, _) = buf.get(at..)?.split_first_chunk::<READ_ITEM_LEN>()?;
            let (disc, item) = item.split_first_chunk::<4>()?;
            let (pos, seg) = item.split_first_chunk::<4>()?;
            let seg = seg.first_chunk::<SEGMENT_LEN>()?;
            if u32::from_be_bytes(*disc) != 1 {
                return None;
            }
            let pos = u32::from_be_bytes(*pos);
            if pos == 0 || pos & 3 != 0 || *position.get_or_insert(pos) != pos {
                return None;
            }
            count = count.checked_add(1)?;
            if count > limits.max_chunks {
                return None;
            }
            let s = segment_from(seg);
            length = length.checked_add(s.length)?;
            if length > limits.max_payload {
                return None;
            }
            *self.segs.get_mut(self.ns)? = s;
            self.ns = self.ns.checked_add(1)?;
            at = at.checked_add(READ_ITEM_LEN)?;
            match word(buf, at)? {
                0 => break,
                1 => {}
                _ => return None,
            }
        }
        let position = position?;
        *self.chunks.get_mut(self.nc)? = PclChunk {
            position,
            length,
            payload_length: 0,
            first_segment: u32::try_from(first).ok()?,
            segcount: count,
        };
        self.nc = self.nc.checked_add(1)?;
        Some((at.checked_add(4)?, position, length))
    }
}

/// Decodes `buf` in one pass if it is one of the common Call shapes,
/// its chunk lists into the storage `store` gives (which must hold them
/// all; asked for only once the fixed words say the shape may be one);
/// `None` leaves it to the general path
/// ([`decode_call`](super::decode::decode_call), then
/// [`ParsedChunks::build`](super::pcl::ParsedChunks::build)). Storage
/// beyond what the returned layout names is left as it was.
#[inline]
pub fn decode_call_fast<'s>(
    buf: &[u8],
    limits: &DecodeLimits,
    store: impl FnOnce() -> Option<(&'s mut [PclChunk], &'s mut [Segment])>,
) -> Option<FastCall> {
    if buf.len() > usize::try_from(limits.max_inline).ok()? {
        return None;
    }
    let xid = word(buf, 0)?;
    let credits = word(buf, 8)?;
    if word(buf, 4)? != RPCRDMA_VERSION || Proc::from_u32(word(buf, 12)?)? != Proc::Msg {
        // Another version or procedure.
        return None;
    }
    let has_read = match word(buf, 16)? {
        0 => false,
        1 => true,
        _ => return None,
    };
    if !has_read && word(buf, 20)? == 0 && word(buf, 24)? == 0 {
        // No chunk at all (a GETATTR, most metadata): three empty lists,
        // seven words of header, and no storage asked for.
        return Some(FastCall {
            xid,
            credits,
            header_len: NO_CHUNKS_HEADER_LEN,
            layout: ChunkLayout::of_lists(0, 0, 0, 0),
            read_chunk: false,
            no_chunks: true,
        });
    }
    if let Some(one) = one_segment(buf, limits, has_read) {
        return one.store(xid, credits, store);
    }
    let (chunks, segs) = store()?;
    let mut fill = Fill {
        chunks,
        segs,
        nc: 0,
        ns: 0,
    };
    let (mut at, read) = if has_read {
        let (end, position, length) = fill.read_chunk(buf, 16, limits)?;
        (end, Some((position, length)))
    } else {
        (20, None)
    };
    let write = fill.nc;
    // The Write list: a strict 0/1 discriminator before each chunk.
    let mut writes: u32 = 0;
    loop {
        match word(buf, at)? {
            0 => break,
            1 => {
                writes = writes.checked_add(1)?;
                if writes > limits.max_chunks {
                    return None;
                }
                at = fill.chunk(buf, at.checked_add(4)?, limits)?;
            }
            _ => return None,
        }
    }
    let reply = fill.nc;
    at = at.checked_add(4)?;
    // The Reply chunk, or its absence.
    at = match word(buf, at)? {
        0 => at.checked_add(4)?,
        1 => fill.chunk(buf, at.checked_add(4)?, limits)?,
        _ => return None,
    };
    if let Some((position, length)) = read {
        // As the general decoder's `check_read_positions` for one chunk:
        // it starts within the inline body, and its end is a number.
        let inline_len = buf.len().checked_sub(at)?;
        if usize::try_from(position).ok()? > inline_len {
            return None;
        }
        position.checked_add(length)?;
    }
    let layout = ChunkLayout::of_lists(fill.nc, fill.ns, write, reply);
    Some(FastCall {
        xid,
        credits,
        header_len: at,
        layout,
        read_chunk: read.is_some(),
        no_chunks: fill.nc == 0,
    })
}

/// The two commonest Calls with a chunk, each a chunk of one segment and
/// nothing else: an NFS READ's Write chunk (an empty Read list, one Write
/// chunk, no Reply chunk) or an NFS WRITE's Read chunk (one Read segment,
/// empty Write list, no Reply chunk). Recognised from their thirteen
/// words at once, with the checks the general loop makes of them.
struct OneSegment {
    /// The Read chunk's position; `None` for the Write chunk.
    position: Option<u32>,
    seg: Segment,
}

/// `buf` as one of the [`OneSegment`] shapes (`has_read`: its Read list
/// is not empty), if it is one the loop of [`decode_call_fast`] would
/// take; `None` leaves it to the loop.
#[inline(always)]
fn one_segment(buf: &[u8], limits: &DecodeLimits, has_read: bool) -> Option<OneSegment> {
    let w = XdrReader::new(buf)
        .read_words::<ONE_SEGMENT_HEADER_WORDS>()
        .ok()?;
    let seg_at = |i: usize| -> Option<Segment> {
        let [handle, length, hi, lo] = *w.get(i..)?.first_chunk::<4>()?;
        Some(Segment::new(
            handle,
            length,
            (u64::from(hi) << 32) | u64::from(lo),
        ))
    };
    let [_, _, _, _, read_list, w5, w6, .., w10, w11, w12] = w;
    // One chunk, within the chunk count the loop bounds; then the end of
    // the Write list and an absent Reply chunk.
    if limits.max_chunks == 0 || w11 != 0 || w12 != 0 {
        return None;
    }
    let (position, seg) = if has_read {
        // The Read list's first discriminator (1), one Read segment at a
        // position within the inline body, not zero (no call chunk), a
        // multiple of four; its length within the payload bound and its
        // end a number, as `Fill::read_chunk` and the final check of the
        // loop say; then the end of the Read list (word 10).
        let (position, seg) = (w5, seg_at(6)?);
        let inline_len = buf.len().checked_sub(ONE_SEGMENT_HEADER_LEN)?;
        if read_list != 1
            || w10 != 0
            || position == 0
            || position & 3 != 0
            || seg.length > limits.max_payload
            || usize::try_from(position).ok()? > inline_len
        {
            return None;
        }
        position.checked_add(seg.length)?;
        (Some(position), seg)
    } else {
        // The empty Read list (0); one Write chunk of one segment, as
        // `Fill::chunk` bounds it.
        if read_list != 0 || w5 != 1 || w6 != 1 || limits.max_segments_per_chunk == 0 {
            return None;
        }
        (None, seg_at(7)?)
    };
    Some(OneSegment { position, seg })
}

impl OneSegment {
    /// The Call, its chunk stored where the loop would have stored it
    /// (chunk and segment 0 of `store`).
    #[inline(always)]
    fn store<'s>(
        self,
        xid: u32,
        credits: u32,
        store: impl FnOnce() -> Option<(&'s mut [PclChunk], &'s mut [Segment])>,
    ) -> Option<FastCall> {
        let (chunks, segs) = store()?;
        *segs.first_mut()? = self.seg;
        *chunks.first_mut()? = PclChunk {
            position: self.position.unwrap_or(0),
            length: self.seg.length,
            payload_length: 0,
            first_segment: 0,
            segcount: 1,
        };
        // The Write list starts after the Read chunk, if there is one; the
        // Reply chunk (none) after the one chunk.
        let write = usize::from(self.position.is_some());
        Some(FastCall {
            xid,
            credits,
            header_len: ONE_SEGMENT_HEADER_LEN,
            layout: ChunkLayout::of_lists(1, 1, write, 1),
            read_chunk: self.position.is_some(),
            no_chunks: false,
        })
    }
}
