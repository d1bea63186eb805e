// SPDX-License-Identifier: GPL-2.0

//! Encoders for RPC-over-RDMA v1 transport headers.
//!
//! The client encodes calls (C `rpcrdma_marshal_req()`), the server encodes
//! replies (C `svc_rdma_sendto.c`) and `RDMA_ERROR` messages (C
//! `svc_rdma_send_error_msg()`). Chunk lists are described by plain slices
//! so callers need no allocation; [`ChunkListsRef`] mirrors the decoded
//! [`ChunkLists`](super::msg::ChunkLists).

use super::msg::write_segment;
use super::msg::DecodeError;
use super::msg::ErrorAction;
use super::msg::ErrorBody;
use super::msg::Proc;
use super::msg::ReadSegment;
use super::msg::Segment;
use super::msg::ERR_CHUNK;
use super::msg::ERR_VERS;
use super::msg::READ_ITEM_LEN;
use super::msg::RPCRDMA_VERSION;
use super::msg::SEGMENT_LEN;
use super::xdr::XdrError;
use super::xdr::XdrWriter;

/// Why a header could not be encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EncodeError {
    /// The output buffer is too small.
    NoSpace,
    /// A Write or Reply chunk has no segments; a peer must reject that
    /// (C `xdr_check_write_chunk()`), so it is never sent.
    EmptyChunk,
    /// A count or length does not fit the wire format.
    TooLarge,
    /// An `ErrorBody::Other` code: only `ERR_VERS` and `ERR_CHUNK` exist.
    UnknownErrorCode,
}

impl From<XdrError> for EncodeError {
    fn from(e: XdrError) -> Self {
        match e {
            XdrError::NoSpace | XdrError::Truncated => Self::NoSpace,
            XdrError::Overflow | XdrError::TooLong | XdrError::BadBool(_) => Self::TooLarge,
        }
    }
}

/// Chunk lists to encode, as borrowed slices.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChunkListsRef<'x> {
    /// Read list items, in wire order.
    pub read: &'x [ReadSegment],
    /// Write chunks, each a non-empty array of segments.
    pub write: &'x [&'x [Segment]],
    /// Reply chunk, if any (non-empty).
    pub reply: Option<&'x [Segment]>,
}

impl ChunkListsRef<'_> {
    /// An empty set of chunk lists.
    pub const EMPTY: ChunkListsRef<'static> = ChunkListsRef {
        read: &[],
        write: &[],
        reply: None,
    };

    /// Encoded size of the three lists, or `None` on overflow.
    pub fn encoded_len(&self) -> Option<usize> {
        let mut n = self.read.len().checked_mul(READ_ITEM_LEN)?.checked_add(4)?;
        for chunk in self.write {
            n = n
                .checked_add(8)?
                .checked_add(chunk.len().checked_mul(SEGMENT_LEN)?)?;
        }
        n = n.checked_add(4)?;
        n = n.checked_add(4)?;
        if let Some(reply) = self.reply {
            n = n
                .checked_add(4)?
                .checked_add(reply.len().checked_mul(SEGMENT_LEN)?)?;
        }
        Some(n)
    }
}

/// Procedure-specific part of a header to encode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyRef<'x> {
    /// `RDMA_MSG`; the RPC message is sent after the header by the caller.
    Msg(ChunkListsRef<'x>),
    /// `RDMA_NOMSG`.
    NoMsg(ChunkListsRef<'x>),
    /// `RDMA_MSGP`; encodable only so tests can produce it.
    Msgp {
        /// Alignment.
        align: u32,
        /// Threshold.
        thresh: u32,
        /// Chunk lists.
        chunks: ChunkListsRef<'x>,
    },
    /// `RDMA_DONE`.
    Done,
    /// `RDMA_ERROR`.
    Error(ErrorBody),
}

/// A header to encode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeaderRef<'x> {
    /// Transaction ID (host order).
    pub xid: u32,
    /// Version word; [`RPCRDMA_VERSION`] except when echoing a peer's.
    pub vers: u32,
    /// Credits requested (call) or granted (reply).
    pub credits: u32,
    /// Procedure and body.
    pub body: BodyRef<'x>,
}

impl HeaderRef<'_> {
    /// The procedure of this header.
    pub const fn proc_(&self) -> Proc {
        match self.body {
            BodyRef::Msg(_) => Proc::Msg,
            BodyRef::NoMsg(_) => Proc::NoMsg,
            BodyRef::Msgp { .. } => Proc::Msgp,
            BodyRef::Done => Proc::Done,
            BodyRef::Error(_) => Proc::Error,
        }
    }

    /// Encoded size of this header, or `None` on overflow.
    pub fn encoded_len(&self) -> Option<usize> {
        let body = match &self.body {
            BodyRef::Msg(c) | BodyRef::NoMsg(c) => c.encoded_len()?,
            BodyRef::Msgp { chunks, .. } => chunks.encoded_len()?.checked_add(8)?,
            BodyRef::Done => 0,
            BodyRef::Error(ErrorBody::Vers { .. }) => 12,
            BodyRef::Error(_) => 4,
        };
        body.checked_add(16)
    }
}

fn encode_write_chunk(w: &mut XdrWriter<'_>, segs: &[Segment]) -> Result<(), EncodeError> {
    if segs.is_empty() {
        return Err(EncodeError::EmptyChunk);
    }
    let count = u32::try_from(segs.len()).map_err(|_| EncodeError::TooLarge)?;
    w.write_u32(count)?;
    for s in segs {
        write_segment(w, s)?;
    }
    Ok(())
}

/// Encodes the Read list, Write list and Reply chunk.
#[inline]
pub fn encode_chunk_lists(
    w: &mut XdrWriter<'_>,
    chunks: &ChunkListsRef<'_>,
) -> Result<(), EncodeError> {
    for rs in chunks.read {
        w.write_bool(true)?;
        w.write_u32(rs.position)?;
        write_segment(w, &rs.segment)?;
    }
    w.write_bool(false)?;
    for chunk in chunks.write {
        w.write_bool(true)?;
        encode_write_chunk(w, chunk)?;
    }
    w.write_bool(false)?;
    match chunks.reply {
        Some(segs) => {
            w.write_bool(true)?;
            encode_write_chunk(w, segs)?;
        }
        None => w.write_bool(false)?,
    }
    Ok(())
}

/// Encodes `hdr` at the start of `out` and returns the header length.
///
/// Nothing is written past the returned length; on error the contents of
/// `out` are unspecified.
pub fn encode_header(hdr: &HeaderRef<'_>, out: &mut [u8]) -> Result<usize, EncodeError> {
    // Every write is bounds-checked: a header longer than `out` fails
    // with `NoSpace` where it would cross the end, without a first pass
    // over the lists to size it (`HeaderRef::encoded_len`).
    let mut w = XdrWriter::new(out);
    w.write_words([hdr.xid, hdr.vers, hdr.credits, hdr.proc_().to_u32()])?;
    // The chunk lists are encoded from one place, so that the call is
    // inlined and the writer stays in registers.
    let chunks = match &hdr.body {
        BodyRef::Msg(c) | BodyRef::NoMsg(c) => c,
        BodyRef::Msgp {
            align,
            thresh,
            chunks,
        } => {
            w.write_u32(*align)?;
            w.write_u32(*thresh)?;
            chunks
        }
        BodyRef::Done => return Ok(w.position()),
        BodyRef::Error(e) => {
            encode_error_body(&mut w, e)?;
            return Ok(w.position());
        }
    };
    encode_chunk_lists(&mut w, chunks)?;
    Ok(w.position())
}

fn encode_error_body(w: &mut XdrWriter<'_>, e: &ErrorBody) -> Result<(), EncodeError> {
    match e {
        ErrorBody::Vers { low, high } => {
            w.write_u32(ERR_VERS)?;
            w.write_u32(*low)?;
            w.write_u32(*high)?;
        }
        ErrorBody::Chunk => w.write_u32(ERR_CHUNK)?,
        ErrorBody::Other(_) => return Err(EncodeError::UnknownErrorCode),
    }
    Ok(())
}

/// An `RDMA_ERROR` reply to a rejected call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ErrorReply {
    /// XID copied from the call.
    pub xid: u32,
    /// Version word copied from the call (C does the same), or 1 when the
    /// call was too short to have one.
    pub vers: u32,
    /// The responder's current credit grant.
    pub credits: u32,
    /// `ERR_VERS` (supported range 1..=1) or `ERR_CHUNK`.
    pub body: ErrorBody,
}

impl ErrorReply {
    /// The header to encode for this reply.
    pub const fn header(&self) -> HeaderRef<'static> {
        HeaderRef {
            xid: self.xid,
            vers: self.vers,
            credits: self.credits,
            body: BodyRef::Error(self.body),
        }
    }

    /// Encodes the reply into `out`, returning its length (20 or 28).
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, EncodeError> {
        encode_header(&self.header(), out)
    }
}

/// Builds the `RDMA_ERROR` reply for a call that failed to decode.
///
/// Returns `None` when the call must be dropped: `RDMA_DONE`/`RDMA_ERROR`
/// "calls" (as in C), and messages shorter than one word, which carry no
/// XID to answer (C would reply with whatever stale bytes the receive
/// buffer held).
pub fn error_reply_for(request: &[u8], err: &DecodeError, credits: u32) -> Option<ErrorReply> {
    let body = match err.action() {
        ErrorAction::Drop => return None,
        ErrorAction::ErrVers => ErrorBody::Vers {
            low: RPCRDMA_VERSION,
            high: RPCRDMA_VERSION,
        },
        ErrorAction::ErrChunk => ErrorBody::Chunk,
    };
    let word = |i: usize| -> Option<u32> {
        let start = i.checked_mul(4)?;
        let b = request.get(start..start.checked_add(4)?)?;
        match *b {
            [a, b, c, d] => Some(u32::from_be_bytes([a, b, c, d])),
            _ => None,
        }
    };
    let xid = word(0)?;
    let vers = word(1).unwrap_or(RPCRDMA_VERSION);
    Some(ErrorReply {
        xid,
        vers,
        credits,
        body,
    })
}

/// Convenience: [`error_reply_for`] then [`ErrorReply::encode`].
///
/// Returns `Ok(None)` when no reply should be sent.
pub fn encode_error_for(
    request: &[u8],
    err: &DecodeError,
    credits: u32,
    out: &mut [u8],
) -> Result<Option<usize>, EncodeError> {
    match error_reply_for(request, err, credits) {
        Some(reply) => reply.encode(out).map(Some),
        None => Ok(None),
    }
}
