// SPDX-License-Identifier: GPL-2.0

//! The server's one-pass decoder of the Calls it nearly always gets: an
//! `RDMA_MSG` without a Read list, with a Write list and a Reply chunk or
//! neither (an NFS READ: one Write chunk of one segment; a READDIR: a
//! Reply chunk; a GETATTR: nothing). C `svc_rdma_xdr_decode_req` walks
//! such a header once; so does this.
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
use super::msg::RPCRDMA_VERSION;
use super::msg::SEGMENT_LEN;
use super::pcl::ChunkLayout;
use super::pcl::PclChunk;

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
    /// Where the lists went in the storage (Write chunks first, then the
    /// Reply chunk), as [`ParsedChunks::layout`](super::pcl::ParsedChunks::layout)
    /// would say.
    pub layout: ChunkLayout,
    /// Whether the Call carries no chunk at all (then it may be a
    /// backchannel Reply, see [`is_backchannel_reply`](super::backchannel::is_backchannel_reply)).
    pub no_chunks: bool,
}

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
    if word(buf, 4)? != RPCRDMA_VERSION
        || Proc::from_u32(word(buf, 12)?)? != Proc::Msg
        || word(buf, 16)? != 0
    {
        // Another version or procedure, or a Read list.
        return None;
    }
    let (chunks, segs) = store()?;
    let mut fill = Fill {
        chunks,
        segs,
        nc: 0,
        ns: 0,
    };
    // The Write list: a strict 0/1 discriminator before each chunk.
    let mut at: usize = 20;
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
    let layout = ChunkLayout::of_write_and_reply(fill.nc, fill.ns, reply);
    Some(FastCall {
        xid,
        credits,
        header_len: at,
        layout,
        no_chunks: fill.nc == 0,
    })
}
