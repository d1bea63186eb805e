// SPDX-License-Identifier: GPL-2.0

//! Parsed chunk lists for the server (C `svc_rdma_pcl.c`).
//!
//! [`ParsedChunks::build`] turns the validated chunk lists of a decoded
//! call into four lists the server works from:
//! - the call chunk: all position-zero Read segments (C `rc_call_pcl`);
//! - Read chunks: the other Read segments grouped by position and sorted by
//!   position, segments of one chunk kept in wire order (C `rc_read_pcl`);
//! - Write chunks in wire order (C `rc_write_pcl`);
//! - the Reply chunk (C `rc_reply_pcl`).
//!
//! Nothing is allocated: chunks and segments go into slices the caller
//! provides (in the kernel, part of the per-receive context, so nothing big
//! lands on the stack). [`ParsedChunks::chunks_needed`] and
//! [`ParsedChunks::segments_needed`] size them exactly.
//!
//! [`ReadRegions`] and [`NonPayloadRegions`] walk the pieces between
//! payloads, like C `svc_rdma_read_multiple_chunks()` and
//! `pcl_process_nonpayloads()`, with every offset computed checked.

use super::encode::EncodeError;
use super::msg::write_present_chunk;
use super::msg::ChunkLists;
use super::msg::DecodeLimits;
use super::msg::Proc;
use super::msg::Segment;
use super::msg::RPCRDMA_VERSION;
use super::xdr::align_up_u32;
use super::xdr::XdrWriter;

/// One chunk of a parsed chunk list (C `struct svc_rdma_chunk`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PclChunk {
    /// XDR position: the Read position for Read chunks; for Write chunks
    /// the offset of the result payload in the reply, set by
    /// [`ParsedChunks::set_result_payload`].
    pub position: u32,
    /// Sum of the segment lengths.
    pub length: u32,
    /// Bytes of result payload written into this (Write) chunk.
    pub payload_length: u32,
    /// Index of the chunk's first segment in the segment storage.
    pub first_segment: u32,
    /// Number of segments.
    pub segcount: u32,
}

/// Errors from building or walking parsed chunk lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PclError {
    /// The chunk storage slice is too small.
    NoChunkSpace,
    /// The segment storage slice is too small.
    NoSegmentSpace,
    /// Offsets or lengths are inconsistent (C `-EMSGSIZE`/`-EINVAL`).
    BadRegion,
    /// A payload does not fit the chunk it is placed in (C `-E2BIG`,
    /// reported to the client as `ERR_CHUNK`).
    TooBig,
    /// No such chunk.
    NoChunk,
    /// A [`ChunkLayout`] that does not describe the storage it is given.
    Inconsistent,
}

/// Server-side parsed chunk lists backed by caller storage.
///
/// # Invariants
///
/// The lists lie one after the other in `chunks`: the call chunk (none or
/// one) in `..read`, the Read chunks in `read..write`, the Write chunks in
/// `write..reply` and the Reply chunk (none or one) in `reply..`. Three
/// boundaries rather than four ranges keep the lists from disagreeing and
/// the value small, as it is built again for every Reply.
#[derive(Debug)]
pub struct ParsedChunks<'s> {
    chunks: &'s mut [PclChunk],
    segments: &'s [Segment],
    read: usize,
    write: usize,
    reply: usize,
}

/// Where [`ParsedChunks`] put each list in its storage: what the server
/// keeps of a decoded Call so that its Reply is placed without decoding
/// the header again ([`ParsedChunks::layout`], [`ParsedChunks::from_layout`]).
///
/// Its boundaries are those of [`ParsedChunks`]; `chunks` and `segments`
/// are how much of the storage the lists use.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChunkLayout {
    chunks: usize,
    segments: usize,
    read: usize,
    write: usize,
    reply: usize,
}

/// The length of the transport header of a Reply with no chunk lists
/// ([`ParsedChunks::encode_plain_reply_header`]): seven words.
pub const PLAIN_REPLY_HEADER_LEN: usize = 28;

/// The length of the transport header of a Reply whose one chunk is a
/// Write chunk of one segment
/// ([`ParsedChunks::encode_one_write_reply_header`]): thirteen words.
pub const ONE_WRITE_REPLY_HEADER_LEN: usize = 52;

impl ChunkLayout {
    /// Whether the lists hold no chunk at all.
    pub fn is_empty(&self) -> bool {
        self.chunks == 0
    }

    /// Whether the lists hold no Write chunk and no Reply chunk (Read
    /// chunks or not): a Reply to such a Call echoes no list and goes
    /// inline.
    pub fn has_no_result_chunks(&self) -> bool {
        self.write == self.reply && self.reply == self.chunks
    }

    /// Whether the lists hold one chunk, a Write chunk of one segment (an
    /// NFS READ's): its Reply echoes that segment alone
    /// ([`ParsedChunks::encode_one_write_reply_header`]).
    pub fn is_one_write_segment(&self) -> bool {
        self.chunks == 1
            && self.segments == 1
            && self.read == 0
            && self.write == 0
            && self.reply == 1
    }

    /// The layout of lists with no call chunk: `write` Read chunks, then
    /// Write chunks up to `reply`, then a Reply chunk if `chunks` is one
    /// more (as the server's one-pass decoder stores them,
    /// [`decode_call_fast`](super::call_fast::decode_call_fast)), over
    /// `segments` segments.
    pub(crate) fn of_lists(chunks: usize, segments: usize, write: usize, reply: usize) -> Self {
        Self {
            chunks,
            segments,
            read: 0,
            write,
            reply,
        }
    }

    /// The R_key the server may invalidate with Send With Invalidate, as
    /// [`ParsedChunks::inv_rkey`] says of the lists this layout places in
    /// `segment_store`, without building them again (a Reply to an NFS
    /// WRITE asks only this of its Call's lists); `None` also for storage
    /// that does not hold them.
    pub fn inv_rkey(&self, segment_store: &[Segment]) -> Option<u32> {
        single_handle(segment_store.get(..self.segments)?)
    }

    /// The Read chunk of lists with no call chunk and exactly one Read
    /// chunk (an NFS WRITE's), with its segments, from `chunk_store` and
    /// `segment_store` as this layout places the lists, without building
    /// them again; `None` for any other lists or storage that does not
    /// hold them.
    pub fn only_read_chunk<'s>(
        &self,
        chunk_store: &'s [PclChunk],
        segment_store: &'s [Segment],
    ) -> Option<(&'s PclChunk, &'s [Segment])> {
        if self.read != 0 || self.write != 1 {
            return None;
        }
        let chunk = chunk_store.first()?;
        Some((chunk, segments_of(segment_store, chunk)?))
    }

    /// Records result payload `index` (at XDR `position`, `length` bytes)
    /// in Write chunk `index` of `chunk_store` as this layout places the
    /// lists (C `svc_rdma_result_payload`, which writes the chunk it
    /// names; [`ParsedChunks::set_result_payload`] on lists built again):
    /// `Ok(false)`, with nothing written, when there is no such Write
    /// chunk (the payload then goes inline); `TooBig` for a payload longer
    /// than its chunk.
    pub fn set_result_payload(
        &self,
        chunk_store: &mut [PclChunk],
        index: usize,
        position: u32,
        length: u32,
    ) -> Result<bool, PclError> {
        let Some(chunk) =
            write_chunk_at(self.write, self.reply, index).and_then(|at| chunk_store.get_mut(at))
        else {
            return Ok(false);
        };
        record_payload(chunk, position, length)?;
        Ok(true)
    }

    /// The result payload recorded in Write chunk `index` of `chunk_store`
    /// ([`Self::set_result_payload`]): its XDR position and length.
    pub fn result_payload(&self, chunk_store: &[PclChunk], index: usize) -> Option<(u32, u32)> {
        let at = write_chunk_at(self.write, self.reply, index)?;
        chunk_store.get(at).map(|c| (c.position, c.payload_length))
    }
}

/// Where Write chunk `index` is stored in lists whose Write chunks are
/// chunks `write..reply`; `None` past the last.
fn write_chunk_at(write: usize, reply: usize, index: usize) -> Option<usize> {
    write.checked_add(index).filter(|&at| at < reply)
}

/// Records a result payload (at XDR `position`, `length` bytes) in its
/// Write chunk `chunk`; `TooBig` for a payload longer than the chunk.
fn record_payload(chunk: &mut PclChunk, position: u32, length: u32) -> Result<(), PclError> {
    if length > chunk.length {
        return Err(PclError::TooBig);
    }
    chunk.position = position;
    chunk.payload_length = length;
    Ok(())
}

fn push<T: Copy>(store: &mut [T], used: &mut usize, v: T, err: PclError) -> Result<(), PclError> {
    let slot = store.get_mut(*used).ok_or(err)?;
    *slot = v;
    *used = used.checked_add(1).ok_or(err)?;
    Ok(())
}

fn idx_u32(v: usize) -> Result<u32, PclError> {
    u32::try_from(v).map_err(|_| PclError::NoSegmentSpace)
}

impl<'s> ParsedChunks<'s> {
    /// Number of [`PclChunk`] slots [`Self::build`] needs for `lists`.
    pub fn chunks_needed(lists: &ChunkLists<'_>) -> usize {
        let call = usize::from(lists.read.has_call_chunk());
        let mut distinct: usize = 0;
        let mut last: u32 = 0;
        while let Some(p) = next_position(lists, last) {
            distinct = distinct.saturating_add(1);
            last = p;
        }
        let write = usize::try_from(lists.write.len()).unwrap_or(usize::MAX);
        call.saturating_add(distinct)
            .saturating_add(write)
            .saturating_add(usize::from(lists.reply.is_some()))
    }

    /// Number of [`Segment`] slots [`Self::build`] needs for `lists`.
    pub fn segments_needed(lists: &ChunkLists<'_>) -> usize {
        // The Write list's count was summed by the decoder.
        let mut n = usize::try_from(lists.read.len()).unwrap_or(usize::MAX);
        n = n.saturating_add(usize::try_from(lists.write.segment_count()).unwrap_or(usize::MAX));
        if let Some(r) = lists.reply {
            n = n.saturating_add(usize::try_from(r.segment_count()).unwrap_or(usize::MAX));
        }
        n
    }

    /// Worst-case `(chunks, segments)` storage for any header accepted
    /// under `limits`, for callers that preallocate per receive context.
    pub fn capacity_for(limits: &DecodeLimits) -> (usize, usize) {
        let c = usize::try_from(limits.max_chunks).unwrap_or(usize::MAX);
        let s = usize::try_from(limits.max_segments_per_chunk).unwrap_or(usize::MAX);
        let chunks = c.saturating_mul(2).saturating_add(2);
        let segments = c.saturating_add(c.saturating_mul(s)).saturating_add(s);
        (chunks, segments)
    }

    /// Builds parsed chunk lists from validated chunk lists.
    ///
    /// `lists` should come from [`decode_call`](super::decode::decode_call)
    /// (so lengths cannot overflow); the arithmetic is checked anyway.
    pub fn build(
        lists: &ChunkLists<'_>,
        chunk_store: &'s mut [PclChunk],
        seg_store: &'s mut [Segment],
    ) -> Result<Self, PclError> {
        let mut nc: usize = 0;
        let mut ns: usize = 0;

        // Call chunk: every position-zero segment, in wire order.
        if lists.read.has_call_chunk() {
            let first = ns;
            let mut length: u32 = 0;
            for rs in lists.read.iter().filter(|s| s.position == 0) {
                push(seg_store, &mut ns, rs.segment, PclError::NoSegmentSpace)?;
                length = length
                    .checked_add(rs.segment.length)
                    .ok_or(PclError::BadRegion)?;
            }
            let chunk = PclChunk {
                position: 0,
                length,
                payload_length: 0,
                first_segment: idx_u32(first)?,
                segcount: idx_u32(ns.saturating_sub(first))?,
            };
            push(chunk_store, &mut nc, chunk, PclError::NoChunkSpace)?;
        }

        // Read chunks, in increasing position order.
        let read = nc;
        let mut last: u32 = 0;
        while let Some(pos) = next_position(lists, last) {
            let first = ns;
            let mut length: u32 = 0;
            for rs in lists.read.iter().filter(|s| s.position == pos) {
                push(seg_store, &mut ns, rs.segment, PclError::NoSegmentSpace)?;
                length = length
                    .checked_add(rs.segment.length)
                    .ok_or(PclError::BadRegion)?;
            }
            let chunk = PclChunk {
                position: pos,
                length,
                payload_length: 0,
                first_segment: idx_u32(first)?,
                segcount: idx_u32(ns.saturating_sub(first))?,
            };
            push(chunk_store, &mut nc, chunk, PclError::NoChunkSpace)?;
            last = pos;
        }

        // Write chunks, then the Reply chunk.
        let write = nc;
        for wc in lists.write.iter() {
            let first = ns;
            for s in wc.segments() {
                push(seg_store, &mut ns, s, PclError::NoSegmentSpace)?;
            }
            let chunk = PclChunk {
                position: 0,
                length: wc.total_length(),
                payload_length: 0,
                first_segment: idx_u32(first)?,
                segcount: idx_u32(ns.saturating_sub(first))?,
            };
            push(chunk_store, &mut nc, chunk, PclError::NoChunkSpace)?;
        }

        let reply = nc;
        if let Some(rc) = lists.reply {
            let first = ns;
            for s in rc.segments() {
                push(seg_store, &mut ns, s, PclError::NoSegmentSpace)?;
            }
            let chunk = PclChunk {
                position: 0,
                length: rc.total_length(),
                payload_length: 0,
                first_segment: idx_u32(first)?,
                segcount: idx_u32(ns.saturating_sub(first))?,
            };
            push(chunk_store, &mut nc, chunk, PclError::NoChunkSpace)?;
        }

        let (chunks, _) = chunk_store.split_at_mut(nc);
        let segments: &'s [Segment] = seg_store;
        let segments = segments.get(..ns).ok_or(PclError::NoSegmentSpace)?;
        // INVARIANT: the lists were stored in this order, at most one call
        // chunk and one Reply chunk.
        Ok(Self {
            chunks,
            segments,
            read,
            write,
            reply,
        })
    }

    /// Where the lists are in the storage, for [`Self::from_layout`].
    pub fn layout(&self) -> ChunkLayout {
        ChunkLayout {
            chunks: self.chunks.len(),
            segments: self.segments.len(),
            read: self.read,
            write: self.write,
            reply: self.reply,
        }
    }

    /// Parsed chunk lists again over the storage [`Self::build`] filled,
    /// as `layout` (from [`Self::layout`]) describes it. Storage or a
    /// layout that do not match (lists out of order or beyond the storage,
    /// a chunk whose segments are not stored) give `Inconsistent`.
    #[inline]
    pub fn from_layout(
        layout: &ChunkLayout,
        chunk_store: &'s mut [PclChunk],
        seg_store: &'s [Segment],
    ) -> Result<Self, PclError> {
        let l = layout;
        // At most one call chunk before the Read chunks, at most one Reply
        // chunk after the Write chunks.
        let ordered = l.read <= 1
            && l.read <= l.write
            && l.write <= l.reply
            && l.reply <= l.chunks
            && l.chunks.saturating_sub(l.reply) <= 1;
        if !ordered {
            return Err(PclError::Inconsistent);
        }
        let chunks = chunk_store
            .get_mut(..l.chunks)
            .ok_or(PclError::Inconsistent)?;
        let segments = seg_store.get(..l.segments).ok_or(PclError::Inconsistent)?;
        for c in chunks.iter() {
            let end = c.first_segment.checked_add(c.segcount);
            match end.and_then(|e| usize::try_from(e).ok()) {
                Some(e) if e <= segments.len() => {}
                _ => return Err(PclError::Inconsistent),
            }
        }
        // INVARIANT: `ordered` holds and `chunks` is `l.chunks` long.
        Ok(Self {
            chunks,
            segments,
            read: l.read,
            write: l.write,
            reply: l.reply,
        })
    }

    /// The call chunk (position-zero Read segments), if any.
    pub fn call_chunk(&self) -> Option<&PclChunk> {
        self.chunks.get(..self.read).and_then(<[PclChunk]>::first)
    }

    /// Read chunks sorted by position.
    pub fn read_chunks(&self) -> &[PclChunk] {
        self.chunks.get(self.read..self.write).unwrap_or(&[])
    }

    /// Write chunks in wire order.
    pub fn write_chunks(&self) -> &[PclChunk] {
        self.chunks.get(self.write..self.reply).unwrap_or(&[])
    }

    /// The Reply chunk, if any: the chunk after the Write chunks, the last.
    pub fn reply_chunk(&self) -> Option<&PclChunk> {
        self.chunks.get(self.reply)
    }

    /// The segments of `chunk` (a chunk of this list).
    pub fn segments(&self, chunk: &PclChunk) -> &[Segment] {
        segments_of(self.segments, chunk).unwrap_or(&[])
    }

    /// Records that the result payload for Write chunk `index` sits at
    /// XDR offset `position` of the reply and is `length` bytes long (C
    /// `svc_rdma_result_payload()`), rejecting a payload larger than the
    /// chunk.
    // Inlined into the loop over nfsd's payloads: the lists stay in
    // registers rather than going to memory for a call per payload.
    #[inline]
    pub fn set_result_payload(
        &mut self,
        index: usize,
        position: u32,
        length: u32,
    ) -> Result<(), PclError> {
        let chunk = write_chunk_at(self.write, self.reply, index)
            .and_then(|i| self.chunks.get_mut(i))
            .ok_or(PclError::NoChunk)?;
        record_payload(chunk, position, length)
    }

    /// Encodes the transport header of the Reply to this call, as C
    /// `svc_rdma_sendto()` does, and returns its length.
    ///
    /// The procedure is `RDMA_NOMSG` when the client provided a Reply
    /// chunk (C always uses it then) and `RDMA_MSG` otherwise; the Read list
    /// is empty; every Write chunk is echoed with its segment lengths cut
    /// down to the payload written into it ([`Self::set_result_payload`]),
    /// zero where nothing was written; the Reply chunk is echoed cut down
    /// to `reply_len`, the bytes of Reply written into it. A Reply longer
    /// than the Reply chunk is [`EncodeError::TooLarge`] (C `-E2BIG`; send
    /// `ERR_CHUNK`).
    pub fn encode_reply_header(
        &self,
        xid: u32,
        credits: u32,
        reply_len: u32,
        out: &mut [u8],
    ) -> Result<usize, EncodeError> {
        let mut w = XdrWriter::new(out);
        let reply = self.reply_chunk();
        let proc_ = if reply.is_some() {
            Proc::NoMsg
        } else {
            Proc::Msg
        };
        // The fixed words and an empty Read list.
        w.write_words([xid, RPCRDMA_VERSION, credits, proc_.to_u32(), 0])?;
        for chunk in self.write_chunks() {
            self.encode_trimmed(&mut w, chunk, chunk.payload_length)?;
        }
        match reply {
            Some(chunk) => {
                w.write_bool(false)?;
                if reply_len > chunk.length {
                    return Err(EncodeError::TooLarge);
                }
                self.encode_trimmed(&mut w, chunk, reply_len)?;
            }
            // The end of the Write list and no Reply chunk.
            None => w.write_words([0, 0])?,
        }
        Ok(w.position())
    }

    /// The transport header of a Reply to a Call without Write and Reply
    /// chunks (an `RDMA_MSG` with empty lists), as
    /// [`Self::encode_reply_header`] writes it for such lists, without the
    /// lists: the Replies that carry no chunk (a GETATTR's, a WRITE's) are
    /// the most common.
    pub fn encode_plain_reply_header(
        xid: u32,
        credits: u32,
        out: &mut [u8],
    ) -> Result<usize, EncodeError> {
        let mut w = XdrWriter::new(out);
        // The fixed words, an empty Read list, Write list and Reply chunk.
        w.write_words([xid, RPCRDMA_VERSION, credits, Proc::Msg.to_u32(), 0, 0, 0])?;
        Ok(w.position())
    }

    /// The transport header of a Reply to a Call whose one chunk is a
    /// Write chunk of the one segment `seg`, `written` bytes of which the
    /// result payload used, as [`Self::encode_reply_header`] writes it for
    /// such lists, without the lists: the Reply of an NFS READ whose data
    /// went through RDMA Write.
    pub fn encode_one_write_reply_header(
        xid: u32,
        credits: u32,
        seg: &Segment,
        written: u32,
        out: &mut [u8],
    ) -> Result<usize, EncodeError> {
        let mut w = XdrWriter::new(out);
        let (hi, lo) = ((seg.offset >> 32) as u32, seg.offset as u32);
        // The fixed words, an empty Read list, a Write list of one chunk
        // of one segment trimmed to what was written, no Reply chunk.
        w.write_words([
            xid,
            RPCRDMA_VERSION,
            credits,
            Proc::Msg.to_u32(),
            0,
            1,
            1,
            seg.handle,
            written.min(seg.length),
            hi,
            lo,
            0,
            0,
        ])?;
        Ok(w.position())
    }

    /// Fault injection (the server plays a lying peer for the client's
    /// check, debugfs `svc_fault_write_overrun`): adds `extra` bytes to the
    /// length of the first segment of the first Write chunk in a reply
    /// header [`Self::encode_reply_header`] wrote into `hdr` (its Read list
    /// is always empty, so the segment's length is word 8). `None` when
    /// the header has no Write chunk or the length would overflow.
    pub fn overstate_first_write_segment(hdr: &mut [u8], extra: u32) -> Option<()> {
        let word = |h: &[u8], i: usize| -> Option<u32> {
            let at = i.checked_mul(4)?;
            let b = h.get(at..at.checked_add(4)?)?;
            Some(u32::from_be_bytes(<[u8; 4]>::try_from(b).ok()?))
        };
        // Word 4: Read list absent; 5: a Write chunk follows; 6: its
        // segment count; 7..: handle, length, offset (2 words).
        if word(hdr, 4)? != 0 || word(hdr, 5)? != 1 || word(hdr, 6)? == 0 {
            return None;
        }
        let len = word(hdr, 8)?.checked_add(extra)?;
        hdr.get_mut(32..36)?.copy_from_slice(&len.to_be_bytes());
        Some(())
    }

    /// Encodes `chunk`, present (its discriminator), as a counted array
    /// with lengths trimmed to `used` bytes in total (C
    /// `svc_rdma_encode_write_chunk()`).
    #[inline]
    fn encode_trimmed(
        &self,
        w: &mut XdrWriter<'_>,
        chunk: &PclChunk,
        used: u32,
    ) -> Result<(), EncodeError> {
        let segs = self.segments(chunk);
        let Ok(count) = u32::try_from(segs.len()) else {
            // After the discriminator, as it is written first.
            w.write_bool(true)?;
            return Err(EncodeError::TooLarge);
        };
        let mut remaining = used;
        write_present_chunk(w, segs, count, |s| {
            let length = remaining.min(s.length);
            remaining = remaining.saturating_sub(length);
            length
        })?;
        Ok(())
    }

    /// Pieces of the Call message: the inline body (or, for `RDMA_NOMSG`,
    /// the call chunk) of `base_len` bytes interleaved with Read chunks.
    pub fn read_regions(&self, base_len: u32) -> ReadRegions<'_> {
        ReadRegions::new(self.read_chunks(), base_len)
    }

    /// Parts of a reply of `xdr_len` bytes that are not result payloads
    /// already sent through Write chunks.
    pub fn nonpayload_regions(&self, xdr_len: u32) -> NonPayloadRegions<'_> {
        NonPayloadRegions::new(self.write_chunks(), xdr_len)
    }

    /// The R_key the server may invalidate with Send With Invalidate: the
    /// single handle used by every segment of every list, if there is
    /// exactly one (C `svc_rdma_get_inv_rkey()`, which uses 0 as "none"
    /// and so mishandles a real handle of 0).
    pub fn inv_rkey(&self) -> Option<u32> {
        single_handle(self.segments)
    }
}

/// The segments of `chunk` in `segment_store`; `None` if it does not hold
/// them.
fn segments_of<'s>(segment_store: &'s [Segment], chunk: &PclChunk) -> Option<&'s [Segment]> {
    let first = usize::try_from(chunk.first_segment).ok()?;
    let count = usize::try_from(chunk.segcount).ok()?;
    segment_store.get(first..first.checked_add(count)?)
}

/// The one handle every segment of `segments` uses, if there is exactly
/// one.
fn single_handle(segments: &[Segment]) -> Option<u32> {
    let mut handles = segments.iter().map(|s| s.handle);
    let first = handles.next()?;
    handles.all(|h| h == first).then_some(first)
}

/// Smallest non-zero Read position greater than `last`.
fn next_position(lists: &ChunkLists<'_>, last: u32) -> Option<u32> {
    lists
        .read
        .iter()
        .map(|s| s.position)
        .filter(|&p| p > last)
        .min()
}

/// A piece of a Call message being reassembled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadRegion {
    /// `len` bytes at `offset` of the inline body (or call chunk).
    Base {
        /// Offset in the inline body or call chunk.
        offset: u32,
        /// Length in bytes (never zero).
        len: u32,
    },
    /// The Read chunk with this index in
    /// [`ParsedChunks::read_chunks`].
    Chunk(usize),
}

/// Iterator over the pieces of a Call message in XDR order.
///
/// Positions are in the unreduced stream, so the base bytes between chunk
/// `k` and `k + 1` are `position[k+1] - (position[k] + length[k])` long.
/// Zero-length base pieces are skipped. An inconsistency yields one
/// `Err` and ends the iteration.
#[derive(Clone, Debug)]
pub struct ReadRegions<'c> {
    chunks: &'c [PclChunk],
    base_len: u32,
    /// Offset in the base of the next base piece.
    start: u32,
    /// Index of the next chunk; `chunks.len()` once all chunks are out.
    next: usize,
    /// Whether the next item is the chunk `next` (vs. the base before it).
    chunk_due: bool,
    done: bool,
}

impl<'c> ReadRegions<'c> {
    /// Walks `chunks` (sorted Read chunks) over a base of `base_len` bytes.
    pub fn new(chunks: &'c [PclChunk], base_len: u32) -> Self {
        Self {
            chunks,
            base_len,
            start: 0,
            next: 0,
            chunk_due: false,
            done: false,
        }
    }

    fn fail(&mut self) -> Option<Result<ReadRegion, PclError>> {
        self.done = true;
        Some(Err(PclError::BadRegion))
    }
}

impl Iterator for ReadRegions<'_> {
    type Item = Result<ReadRegion, PclError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.done {
                return None;
            }
            if self.chunk_due {
                self.chunk_due = false;
                let i = self.next;
                self.next = i.saturating_add(1);
                return Some(Ok(ReadRegion::Chunk(i)));
            }
            let offset = self.start;
            let len = match self.chunks.get(self.next) {
                Some(chunk) => {
                    // Bytes already placed before this chunk: the chunk's
                    // unreduced position; minus what came from chunks.
                    let placed_end = match self.next.checked_sub(1) {
                        None => Some(0),
                        Some(p) => self
                            .chunks
                            .get(p)
                            .and_then(|c| c.position.checked_add(c.length)),
                    };
                    let Some(len) = placed_end.and_then(|e| chunk.position.checked_sub(e)) else {
                        return self.fail();
                    };
                    self.chunk_due = true;
                    len
                }
                None => {
                    self.done = true;
                    let Some(len) = self.base_len.checked_sub(offset) else {
                        return self.fail();
                    };
                    len
                }
            };
            let Some(end) = offset.checked_add(len).filter(|&e| e <= self.base_len) else {
                return self.fail();
            };
            self.start = end;
            if len != 0 {
                return Some(Ok(ReadRegion::Base { offset, len }));
            }
        }
    }
}

/// A byte range of a reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    /// Offset in the reply's XDR stream.
    pub offset: u32,
    /// Length in bytes (never zero).
    pub len: u32,
}

/// Iterator over the parts of a reply that must still be sent inline or
/// through the Reply chunk: everything except result payloads already
/// written through Write chunks and their XDR padding (C
/// `pcl_process_nonpayloads()`).
///
/// The walk stops at the first Write chunk without a payload, as in C.
/// Zero-length regions are skipped; an inconsistency yields one `Err`.
#[derive(Clone, Debug)]
pub struct NonPayloadRegions<'c> {
    chunks: &'c [PclChunk],
    xdr_len: u32,
    start: u32,
    next: usize,
    done: bool,
}

impl<'c> NonPayloadRegions<'c> {
    /// Walks a reply of `xdr_len` bytes around the payloads of `chunks`.
    pub fn new(chunks: &'c [PclChunk], xdr_len: u32) -> Self {
        Self {
            chunks,
            xdr_len,
            start: 0,
            next: 0,
            done: false,
        }
    }

    /// The sum of the lengths of the regions still to come, or
    /// [`PclError::BadRegion`] if the walk would yield an error: the
    /// checks of [`Iterator::next`] in one loop, without an `Option` and
    /// a `Result` per region (what a Reply's body length is counted with).
    #[inline]
    pub fn total_len(&self) -> Result<u32, PclError> {
        if self.done {
            return Ok(0);
        }
        let chunks = self.chunks.get(self.next..).unwrap_or(&[]);
        let mut start = self.start;
        let mut len: u32 = 0;
        for c in chunks.iter().take_while(|c| c.payload_length != 0) {
            // The region before the payload: from the end of the previous
            // payload's pad to the payload, inside the reply.
            let gap = c
                .position
                .checked_sub(start)
                .filter(|_| c.position <= self.xdr_len)
                .ok_or(PclError::BadRegion)?;
            start = c
                .position
                .checked_add(c.payload_length)
                .and_then(align_up_u32)
                .ok_or(PclError::BadRegion)?;
            len = len.checked_add(gap).ok_or(PclError::BadRegion)?;
        }
        let tail = self.xdr_len.checked_sub(start).ok_or(PclError::BadRegion)?;
        len.checked_add(tail).ok_or(PclError::BadRegion)
    }
}

impl Iterator for NonPayloadRegions<'_> {
    type Item = Result<Region, PclError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.done {
                return None;
            }
            let offset = self.start;
            let end = match self.chunks.get(self.next).filter(|c| c.payload_length != 0) {
                Some(c) => {
                    let Some(after) = c
                        .position
                        .checked_add(c.payload_length)
                        .and_then(align_up_u32)
                    else {
                        self.done = true;
                        return Some(Err(PclError::BadRegion));
                    };
                    self.next = self.next.saturating_add(1);
                    self.start = after;
                    c.position
                }
                None => {
                    self.done = true;
                    self.xdr_len
                }
            };
            let Some(len) = end.checked_sub(offset).filter(|_| end <= self.xdr_len) else {
                self.done = true;
                return Some(Err(PclError::BadRegion));
            };
            if len != 0 {
                return Some(Ok(Region { offset, len }));
            }
        }
    }
}
