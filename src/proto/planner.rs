// SPDX-License-Identifier: GPL-2.0

//! The client's chunk planner: how to convey an RPC Call and its Reply.
//!
//! Mirrors C `rpcrdma_marshal_req()` and its helpers
//! `rpcrdma_args_inline()`, `rpcrdma_results_inline()`,
//! `rpcrdma_nonpayload_inline()`, `rpcrdma_set_max_header_sizes()`,
//! `rpcrdma_prepare_send_sges()` and, for segment counts, the way
//! `frwr_map()` walks an `xdr_buf` (net/sunrpc/xprtrdma/rpc_rdma.c and
//! frwr_ops.c). It decides; it registers and sends nothing.
//!
//! Deliberate differences from C, each tested in `host/tests/planner.rs`:
//! 1. A DDP-eligible buffer with an empty page list does not get a Read or
//!    Write chunk (C would try to register an empty MR and fail the RPC
//!    with `-EIO`); it gets a long call or Reply chunk instead.
//! 2. A Read chunk whose Send part (header, head and non-pad tail) would
//!    exceed the inline send threshold becomes a long call (C assumes the
//!    upper layer never does this and would overrun the peer's receive
//!    buffer).
//! 3. An empty head is never registered. C tells "head done" from the
//!    chunk position, so with `head_len == 0` its Write chunk gains a
//!    zero-length head segment and its Read chunk gets position zero inside
//!    an `RDMA_MSG` (which RFC 8166 reserves for `RDMA_NOMSG`); here such a
//!    Call becomes a long call, and no chunk ever gets an empty head segment.
//! 4. A chunk needing more than `max_rdma_segs` segments, or a message
//!    that cannot fit the inline threshold at all, is refused up front with
//!    a [`PlanError`] (C finds out while encoding, with `-EMSGSIZE`).

use super::msg::Proc;
use super::msg::HDRLEN_MIN;
use super::msg::READ_ITEM_LEN;
use super::msg::SEGMENT_LEN;

/// Send SGEs the C client needs besides page SGEs
/// (`RPCRDMA_MIN_SEND_SGES`: header, head, tail).
pub const MIN_SEND_SGES: u32 = 3;

/// Largest number of segments the C client puts in one chunk
/// (`RPCRDMA_MAX_HDR_SEGS`).
pub const MAX_HDR_SEGS: u32 = 16;

/// Shape of an `xdr_buf`: what the planner needs to know about it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XdrBufShape {
    /// `head[0].iov_len`.
    pub head_len: u32,
    /// `offset_in_page(head[0].iov_base)`.
    pub head_page_offset: u32,
    /// `page_base`: offset of the page data from the first page.
    pub page_base: u32,
    /// `page_len`.
    pub page_len: u32,
    /// `tail[0].iov_len`.
    pub tail_len: u32,
    /// `offset_in_page(tail[0].iov_base)`.
    pub tail_page_offset: u32,
    /// `buflen`: the most the buffer can hold (receive buffers).
    pub buflen: u32,
}

impl XdrBufShape {
    /// A buffer with the given lengths, page-aligned pieces, and a
    /// `buflen` equal to their sum.
    pub fn new(head_len: u32, page_len: u32, tail_len: u32) -> Self {
        let buflen = head_len.saturating_add(page_len).saturating_add(tail_len);
        Self {
            head_len,
            head_page_offset: 0,
            page_base: 0,
            page_len,
            tail_len,
            tail_page_offset: 0,
            buflen,
        }
    }

    /// `head + pages + tail`, or `None` on overflow (C `xdr->len`).
    pub fn len(&self) -> Option<u32> {
        self.head_len
            .checked_add(self.page_len)?
            .checked_add(self.tail_len)
    }

    /// Whether the buffer holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == Some(0)
    }
}

/// Everything the planner needs to know about one RPC.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RpcShape {
    /// The Call (`rq_snd_buf`).
    pub send: XdrBufShape,
    /// The Call's page data may be sent by DDP (C `XDRBUF_WRITE`, set by
    /// NFS WRITE encoders per RFC 8267).
    pub send_ddp: bool,
    /// The Reply buffer (`rq_rcv_buf`), sized for the largest reply.
    pub recv: XdrBufShape,
    /// The Reply's page data may be received by DDP (C `XDRBUF_READ`).
    pub recv_ddp: bool,
    /// DDP is allowed at all: false when the auth flavor checksums or
    /// encrypts the payload (C `RPCAUTH_AUTH_DATATOUCH`).
    pub ddp_allowed: bool,
    /// Size of the request's send buffer: the Call is pulled up into it
    /// when strictly shorter (C `rdmab_length(req->rl_sendbuf)`).
    pub send_buf_len: u32,
}

/// Connection parameters the plan depends on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransportParams {
    /// Negotiated inline send threshold (C `re_inline_send`).
    pub inline_send: u32,
    /// Negotiated inline receive threshold (C `re_inline_recv`).
    pub inline_recv: u32,
    /// Most segments in one chunk (C `re_max_rdma_segs`).
    pub max_rdma_segs: u32,
    /// Most pages one MR can map (C `re_max_fr_depth`).
    pub max_fr_depth: u32,
    /// Send SGEs the device allows (C `re_attr.cap.max_send_sge`).
    pub max_send_sge: u32,
    /// The device registers scatter lists with gaps (C
    /// `IB_MR_TYPE_SG_GAPS`).
    pub sg_gaps: bool,
    /// Page size in bytes (a power of two).
    pub page_size: u32,
}

impl TransportParams {
    /// Derives the parameters the way C `frwr_query_device()` does from a
    /// device's capabilities, for 4 KiB pages and the given thresholds.
    pub fn from_device(inline_send: u32, inline_recv: u32, dev: &DeviceCaps) -> Self {
        // RPCRDMA_MAX_DATA_SEGS: 1 MiB of pages plus one.
        const MAX_DATA_SEGS: u32 = (1024 * 1024 / 4096) + 1;
        // RPCRDMA_MAX_SEND_SGES: header, head, 64 KiB of pages, tail.
        const MAX_SEND_SGES: u32 = 1 + 1 + (65536 / 4096) + 1;
        // Quirk kept from C: a large max_sge_rd wins over the page list
        // length, because such devices do better with small MRs.
        let depth = if dev.max_sge_rd > MAX_HDR_SEGS {
            dev.max_sge_rd
        } else {
            dev.max_fast_reg_page_list_len
        };
        let depth = depth.clamp(1, MAX_DATA_SEGS);
        let segs = MAX_DATA_SEGS
            .div_ceil(depth)
            .saturating_add(2)
            .min(MAX_HDR_SEGS);
        Self {
            inline_send,
            inline_recv,
            max_rdma_segs: segs,
            max_fr_depth: depth,
            max_send_sge: dev.max_send_sge.min(MAX_SEND_SGES),
            sg_gaps: dev.sg_gaps,
            page_size: 4096,
        }
    }

    /// The parameters of `memreg=physical`: no MRs, every segment one page
    /// (or a run of DMA-contiguous pages, which can only need fewer), and
    /// as many segments per chunk as [`physical_max_segs`] gives for the
    /// thresholds, instead of C's `RPCRDMA_MAX_HDR_SEGS`.
    pub fn physical(inline_send: u32, inline_recv: u32, dev: &DeviceCaps) -> Self {
        let one_page = DeviceCaps {
            max_fast_reg_page_list_len: 1,
            max_sge_rd: 0,
            ..*dev
        };
        Self {
            max_rdma_segs: physical_max_segs(inline_send, inline_recv),
            ..Self::from_device(inline_send, inline_recv, &one_page)
        }
    }

    /// Largest payload (rsize, wsize) whose chunks always fit
    /// `max_rdma_segs` one-page segments: the segments less the head, the
    /// tail and a misaligned first page (a long call or a Reply chunk
    /// carries all three), at most 1 MiB.
    pub fn physical_max_payload(&self) -> u32 {
        physical_payload_of(self.max_rdma_segs, self.page_size)
    }

    /// Largest payload (rsize, wsize) whose chunks always fit the FRWR
    /// strategy's segments: each segment one MR of up to `max_fr_depth`
    /// pages, two segments kept for the head and the tail, and one page
    /// lost when the payload does not start at a page boundary; at most
    /// 1 MiB. With the device's own depth this is 1 MiB; an MR of a few
    /// pages (`fmr_pages_per_mr`) brings it down.
    pub fn frwr_max_payload(&self) -> u32 {
        self.max_rdma_segs
            .saturating_sub(2)
            .saturating_mul(self.max_fr_depth)
            .saturating_sub(1)
            .saturating_mul(self.page_size)
            .min(PHYSICAL_MAX_PAYLOAD)
    }

    /// Linux defaults (4 KiB inline each way) on a Soft-RoCE (rxe) device.
    pub fn linux_default() -> Self {
        Self::from_device(4096, 4096, &DeviceCaps::RXE)
    }

    /// Largest Call sent inline (C `re_max_inline_send`): the threshold
    /// minus the largest Call header.
    pub fn max_inline_send(&self) -> u32 {
        let hdr = u32::try_from(max_call_header_size(self.max_rdma_segs)).unwrap_or(u32::MAX);
        self.inline_send.saturating_sub(hdr)
    }

    /// Largest Reply received inline (C `re_max_inline_recv`).
    pub fn max_inline_recv(&self) -> u32 {
        let hdr = u32::try_from(max_reply_header_size(self.max_rdma_segs)).unwrap_or(u32::MAX);
        self.inline_recv.saturating_sub(hdr)
    }
}

/// The device capabilities C `frwr_query_device()` reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceCaps {
    /// `attrs.max_fast_reg_page_list_len`.
    pub max_fast_reg_page_list_len: u32,
    /// `attrs.max_sge_rd`.
    pub max_sge_rd: u32,
    /// `attrs.max_send_sge`.
    pub max_send_sge: u32,
    /// `IBK_SG_GAPS_REG`.
    pub sg_gaps: bool,
}

impl DeviceCaps {
    /// Soft-RoCE (drivers/infiniband/sw/rxe) limits.
    pub const RXE: Self = Self {
        max_fast_reg_page_list_len: 512,
        max_sge_rd: 32,
        max_send_sge: 32,
        sg_gaps: false,
    };
}

/// `memreg=physical`'s largest payload (as C's `RPCRDMA_MAX_DATA_SEGS`
/// pages: 1 MiB).
pub const PHYSICAL_MAX_PAYLOAD: u32 = 1024 * 1024;
/// Segments of a chunk beyond its payload pages: head, tail, and one more
/// page when the payload does not start at a page boundary.
const PHYSICAL_EXTRA_SEGS: u32 = 3;
/// Most segments a `memreg=physical` chunk ever has: 1 MiB of 4 KiB pages
/// and the extra three.
pub const PHYSICAL_MAX_SEGS: u32 = PHYSICAL_MAX_PAYLOAD / 4096 + PHYSICAL_EXTRA_SEGS;

/// Most segments one `memreg=physical` chunk may carry: as many as the
/// largest Call header (a Read list of that many items) and the largest
/// Reply header (a Write list of that many segments) hold while each leaves
/// half of its inline threshold for the RPC message, and no more than
/// 1 MiB of 4 KiB pages needs. With 4 KiB thresholds that is 83 (320 KiB
/// of payload); with 64 KiB, 1 MiB.
pub fn physical_max_segs(inline_send: u32, inline_recv: u32) -> u32 {
    let room = |inline: u32, fixed: usize, per: usize| -> u32 {
        let half = usize::try_from(inline / 2).unwrap_or(usize::MAX);
        let n = half.saturating_sub(fixed).checked_div(per).unwrap_or(0);
        u32::try_from(n).unwrap_or(u32::MAX)
    };
    let call = room(inline_send, max_call_header_size(0), READ_ITEM_LEN);
    let reply = room(inline_recv, max_reply_header_size(0), SEGMENT_LEN);
    call.min(reply).min(PHYSICAL_MAX_SEGS)
}

/// [`TransportParams::physical_max_payload`] for thresholds before they are
/// negotiated (4 KiB pages): what a transport offers NFS at setup.
pub fn physical_payload_for(inline_send: u32, inline_recv: u32) -> u32 {
    physical_payload_of(physical_max_segs(inline_send, inline_recv), 4096)
}

/// The payload `segs` one-page segments always carry: less the head, the
/// tail and a misaligned first page, at most [`PHYSICAL_MAX_PAYLOAD`].
fn physical_payload_of(segs: u32, page_size: u32) -> u32 {
    segs.saturating_sub(PHYSICAL_EXTRA_SEGS)
        .saturating_mul(page_size)
        .min(PHYSICAL_MAX_PAYLOAD)
}

/// Largest Call header: a full Read list and a one-segment Reply chunk
/// (C `rpcrdma_max_call_header_size()`). Saturates instead of wrapping.
pub fn max_call_header_size(maxsegs: u32) -> usize {
    let n = usize::try_from(maxsegs).unwrap_or(usize::MAX);
    HDRLEN_MIN
        .saturating_add(n.saturating_mul(READ_ITEM_LEN))
        .saturating_add(4 + SEGMENT_LEN + 4)
}

/// Largest Reply header: one full Write chunk (C
/// `rpcrdma_max_reply_header_size()`). Saturates instead of wrapping.
pub fn max_reply_header_size(maxsegs: u32) -> usize {
    let n = usize::try_from(maxsegs).unwrap_or(usize::MAX);
    HDRLEN_MIN
        .saturating_add(4)
        .saturating_add(n.saturating_mul(SEGMENT_LEN))
        .saturating_add(4)
}

/// How the Call is conveyed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallStrategy {
    /// `RDMA_MSG`, the whole Call copied into the send buffer (C
    /// `rpcrdma_noch_pullup`).
    InlinePullup,
    /// `RDMA_MSG`, head, pages and tail each mapped as a Send SGE (C
    /// `rpcrdma_noch_mapped`).
    InlineMapped,
    /// `RDMA_MSG` with the page data in a Read chunk at `position` (the
    /// head length) (C `rpcrdma_readch`).
    ReadChunk {
        /// XDR position of the chunk.
        position: u32,
        /// Segments in the chunk.
        segments: u32,
    },
    /// `RDMA_NOMSG` with the whole Call in a position-zero Read chunk (C
    /// `rpcrdma_areadch`, "long call").
    LongCall {
        /// Segments in the chunk.
        segments: u32,
    },
}

/// How the Reply is conveyed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResultStrategy {
    /// The whole Reply fits inline (C `rpcrdma_noch`).
    Inline,
    /// The page data lands through a Write chunk (C `rpcrdma_writech`).
    WriteChunk {
        /// Segments, including the write-pad segment.
        segments: u32,
        /// A 4-byte pad segment is appended because `page_len` is not a
        /// multiple of 4 (C `frwr_wp_create()`'s MR).
        write_pad: bool,
    },
    /// The whole Reply lands in a Reply chunk (C `rpcrdma_replych`).
    ReplyChunk {
        /// Segments in the chunk.
        segments: u32,
    },
}

/// The planner's decision for one RPC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Call strategy.
    pub call: CallStrategy,
    /// Result strategy.
    pub result: ResultStrategy,
    /// `RDMA_MSG` or `RDMA_NOMSG`.
    pub proc_: Proc,
    /// Exact transport header length in bytes.
    pub header_len: u32,
    /// Bytes of the RPC message carried in the Send (besides the header).
    pub inline_len: u32,
    /// Send SGEs used, including the header's.
    pub send_sges: u32,
}

/// Why no plan exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlanError {
    /// Parameters are unusable (zero or non-power-of-two page size, zero
    /// MR depth, lengths that overflow).
    BadParams,
    /// A chunk needs more than `max_rdma_segs` segments.
    TooManySegments,
    /// Header plus inline data exceed the inline send threshold.
    TooLarge,
    /// A chunk would cover no bytes.
    EmptyChunk,
}

/// Counts the segments (MRs) `frwr_map()` would produce for `buf`.
///
/// `with_head`/`with_tail` say whether the head and tail are part of the
/// chunk. Without SG-gap support each MR stops after the head, and before
/// a tail that does not continue the previous piece's page.
#[inline]
pub fn count_segments(
    buf: &XdrBufShape,
    with_head: bool,
    with_tail: bool,
    p: &TransportParams,
) -> Result<u32, PlanError> {
    if !with_head && !with_tail {
        return page_list_segments(buf, p);
    }
    check_page_params(p)?;
    count_segments_walk(buf, with_head, with_tail, p)
}

/// [`count_segments`] of a chunk of the page list alone (a Write chunk, a
/// WRITE's Read chunk: most calls that register). Each MR maps
/// `max_fr_depth` of the pages it touches, so the count is two divisions
/// where no offset can overflow (else the walk reports it). Inlined into
/// the one-pass planners, which call nothing else to size a chunk.
#[inline(always)]
pub fn page_list_segments(buf: &XdrBufShape, p: &TransportParams) -> Result<u32, PlanError> {
    check_page_params(p)?;
    if buf.page_base.checked_add(buf.page_len).is_none() {
        return count_segments_walk(buf, false, false, p);
    }
    if buf.page_len == 0 {
        return Err(PlanError::EmptyChunk);
    }
    let ps = p.page_size;
    // No overflow: the in-page offset is at most `page_base`, and `ps`
    // is a non-zero power of two, so `ps - 1` is the in-page mask.
    let touched = (buf.page_base & ps.wrapping_sub(1))
        .saturating_add(buf.page_len)
        .div_ceil(ps);
    let nsegs = touched.div_ceil(p.max_fr_depth);
    if nsegs > p.max_rdma_segs {
        return Err(PlanError::TooManySegments);
    }
    Ok(nsegs)
}

/// Whether the page size and MR depth can size a chunk: a power-of-two
/// page size and a non-zero depth.
#[inline(always)]
fn check_page_params(p: &TransportParams) -> Result<(), PlanError> {
    if p.page_size == 0 || !p.page_size.is_power_of_two() || p.max_fr_depth == 0 {
        return Err(PlanError::BadParams);
    }
    Ok(())
}

/// [`count_segments`] for a chunk with its head or tail, or offsets that
/// may overflow: MR by MR, as `frwr_map()` does. Apart, so that the page
/// list alone (the common case) is counted without its frame.
#[inline(never)]
fn count_segments_walk(
    buf: &XdrBufShape,
    with_head: bool,
    with_tail: bool,
    p: &TransportParams,
) -> Result<u32, PlanError> {
    let ps = p.page_size;
    // ps is a non-zero power of two (checked by the caller), so ps - 1 is
    // the in-page mask.
    let mask = ps.wrapping_sub(1);
    let in_page = |v: u32| v & mask;
    // Difference 3: an empty head is not registered.
    let mut head_done = !with_head || buf.head_len == 0;
    let mut pages_done = buf.page_len == 0;
    let mut tail_done = !with_tail || buf.tail_len == 0;
    let mut page_off: u32 = 0;
    let mut nsegs: u32 = 0;
    while !(head_done && pages_done && tail_done) {
        let mut i: u32 = 0;
        let mut prev_end: u32 = 0;
        'mr: {
            if !head_done {
                i = 1;
                head_done = true;
                let end = buf
                    .head_page_offset
                    .checked_add(buf.head_len)
                    .ok_or(PlanError::BadParams)?;
                prev_end = in_page(end);
                if !p.sg_gaps {
                    break 'mr;
                }
            }
            if !pages_done {
                let mut remaining = buf
                    .page_len
                    .checked_sub(page_off)
                    .ok_or(PlanError::BadParams)?;
                let mut pb = in_page(
                    buf.page_base
                        .checked_add(page_off)
                        .ok_or(PlanError::BadParams)?,
                );
                while remaining > 0 && i < p.max_fr_depth {
                    let len = ps
                        .checked_sub(pb)
                        .ok_or(PlanError::BadParams)?
                        .min(remaining);
                    page_off = page_off.checked_add(len).ok_or(PlanError::BadParams)?;
                    i = i.checked_add(1).ok_or(PlanError::BadParams)?;
                    // len <= remaining by construction.
                    remaining = remaining.saturating_sub(len);
                    prev_end = in_page(pb.checked_add(len).ok_or(PlanError::BadParams)?);
                    pb = 0;
                }
                if remaining == 0 {
                    pages_done = true;
                }
            }
            if !tail_done && i < p.max_fr_depth {
                if !p.sg_gaps && i > 0 && (prev_end != 0 || in_page(buf.tail_page_offset) != 0) {
                    break 'mr;
                }
                i = i.checked_add(1).ok_or(PlanError::BadParams)?;
                tail_done = true;
            }
        }
        if i == 0 {
            return Err(PlanError::EmptyChunk);
        }
        nsegs = nsegs.checked_add(1).ok_or(PlanError::TooManySegments)?;
        if nsegs > p.max_rdma_segs {
            return Err(PlanError::TooManySegments);
        }
    }
    if nsegs == 0 {
        return Err(PlanError::EmptyChunk);
    }
    Ok(nsegs)
}

/// C `rpcrdma_args_inline()`: the Call fits under the inline threshold
/// and its page list needs no more Send SGEs than the device has.
pub fn args_inline(send: &XdrBufShape, p: &TransportParams) -> Result<bool, PlanError> {
    let len = send.len().ok_or(PlanError::BadParams)?;
    args_fit_inline(send, len, p)
}

/// [`args_inline`] for a Call of `len` bytes (`send.len()`, which the
/// planner has at hand).
fn args_fit_inline(send: &XdrBufShape, len: u32, p: &TransportParams) -> Result<bool, PlanError> {
    if len > p.max_inline_send() {
        return Ok(false);
    }
    Ok(page_sges(send, p)?.saturating_add(MIN_SEND_SGES) <= p.max_send_sge)
}

/// Send SGEs needed to map the page list (one per page touched).
fn page_sges(buf: &XdrBufShape, p: &TransportParams) -> Result<u32, PlanError> {
    let ps = p.page_size;
    if ps == 0 || !ps.is_power_of_two() {
        return Err(PlanError::BadParams);
    }
    if buf.page_len == 0 {
        return Ok(0);
    }
    let first = buf.page_base & ps.wrapping_sub(1);
    let span = first
        .checked_add(buf.page_len)
        .ok_or(PlanError::BadParams)?;
    // Pages touched; ps is non-zero (checked above).
    Ok(span.div_ceil(ps))
}

/// C `rpcrdma_results_inline()`.
pub fn results_inline(recv: &XdrBufShape, p: &TransportParams) -> bool {
    recv.buflen <= p.max_inline_recv()
}

/// C `rpcrdma_nonpayload_inline()`: the Reply's non-payload part fits.
pub fn nonpayload_inline(recv: &XdrBufShape, p: &TransportParams) -> bool {
    match recv.head_len.checked_add(recv.tail_len) {
        Some(n) => n < p.max_inline_recv(),
        None => false,
    }
}

/// The bytes of a Read chunk Call's tail that go in the Send: only a tail
/// that holds more than the page data's XDR pad is sent, and then without
/// that pad (C `rpcrdma_prepare_readch`).
pub fn read_chunk_tail(send: &XdrBufShape) -> u32 {
    read_chunk_tail_len(send.tail_len)
}

/// [`read_chunk_tail`] of a tail of `tail_len` bytes.
pub fn read_chunk_tail_len(tail_len: u32) -> u32 {
    if tail_len > 3 {
        tail_len & !3
    } else {
        0
    }
}

/// Plans one RPC.
pub fn plan(shape: &RpcShape, p: &TransportParams) -> Result<Plan, PlanError> {
    let result = plan_result(shape, p)?;
    let send = &shape.send;
    let len = send.len().ok_or(PlanError::BadParams)?;

    let call = if args_fit_inline(send, len, p)? {
        if len < shape.send_buf_len {
            CallStrategy::InlinePullup
        } else {
            CallStrategy::InlineMapped
        }
    } else if shape.ddp_allowed && shape.send_ddp && send.page_len > 0 && send.head_len > 0 {
        CallStrategy::ReadChunk {
            position: send.head_len,
            segments: count_segments(send, false, false, p)?,
        }
    } else {
        long_call(send, p)?
    };

    match finish(shape, len, p, call, result) {
        // Difference 2: fall back to a long call rather than overrun.
        Err(PlanError::TooLarge) if matches!(call, CallStrategy::ReadChunk { .. }) => {
            finish(shape, len, p, long_call(send, p)?, result)
        }
        other => other,
    }
}

fn long_call(send: &XdrBufShape, p: &TransportParams) -> Result<CallStrategy, PlanError> {
    Ok(CallStrategy::LongCall {
        segments: count_segments(send, true, true, p)?,
    })
}

fn plan_result(shape: &RpcShape, p: &TransportParams) -> Result<ResultStrategy, PlanError> {
    let recv = &shape.recv;
    if results_inline(recv, p) {
        return Ok(ResultStrategy::Inline);
    }
    if shape.ddp_allowed && shape.recv_ddp && recv.page_len > 0 && nonpayload_inline(recv, p) {
        let write_pad = recv.page_len & 3 != 0;
        let segments = count_segments(recv, false, false, p)?
            .checked_add(u32::from(write_pad))
            .ok_or(PlanError::TooManySegments)?;
        if segments > p.max_rdma_segs {
            return Err(PlanError::TooManySegments);
        }
        return Ok(ResultStrategy::WriteChunk {
            segments,
            write_pad,
        });
    }
    Ok(ResultStrategy::ReplyChunk {
        segments: count_segments(recv, true, true, p)?,
    })
}

/// Computes header length, inline bytes and SGEs, and checks the Send fits
/// (`len` is the Call's length, `shape.send.len()`).
fn finish(
    shape: &RpcShape,
    len: u32,
    p: &TransportParams,
    call: CallStrategy,
    result: ResultStrategy,
) -> Result<Plan, PlanError> {
    let send = &shape.send;
    let seg_len =
        |n: u32| -> Result<u32, PlanError> { n.checked_mul(16).ok_or(PlanError::TooLarge) };
    // Fixed words plus the three list terminators / absent flags.
    let mut hdr: u32 = 28;
    let (proc_, inline_len, send_sges) = match call {
        CallStrategy::InlinePullup => (Proc::Msg, len, 2),
        CallStrategy::InlineMapped => {
            let sges = add(2, page_sges(send, p)?)?;
            let sges = add(sges, u32::from(send.tail_len != 0))?;
            (Proc::Msg, len, sges)
        }
        CallStrategy::ReadChunk { segments, .. } => {
            hdr = add(hdr, segments.checked_mul(24).ok_or(PlanError::TooLarge)?)?;
            let tail = read_chunk_tail(send);
            let inline = add(send.head_len, tail)?;
            (Proc::Msg, inline, add(2, u32::from(tail != 0))?)
        }
        CallStrategy::LongCall { segments } => {
            hdr = add(hdr, segments.checked_mul(24).ok_or(PlanError::TooLarge)?)?;
            (Proc::NoMsg, 0, 1)
        }
    };
    match result {
        ResultStrategy::Inline => {}
        // Discriminator, count, segments; the list terminator is counted.
        ResultStrategy::WriteChunk { segments, .. } | ResultStrategy::ReplyChunk { segments } => {
            hdr = add(hdr, add(8, seg_len(segments)?)?)?;
        }
    }
    if add(hdr, inline_len)? > p.inline_send {
        return Err(PlanError::TooLarge);
    }
    Ok(Plan {
        call,
        result,
        proc_,
        header_len: hdr,
        inline_len,
        send_sges,
    })
}

fn add(a: u32, b: u32) -> Result<u32, PlanError> {
    a.checked_add(b).ok_or(PlanError::TooLarge)
}
