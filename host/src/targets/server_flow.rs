//! What the server does with a received message, from `xpo_recvfrom` to
//! `xpo_sendto`, with its I/O modelled ([`super::server_io`]).
//!
//! Every decision is the protocol core's: decoding, the backchannel test,
//! parsed chunk lists, [`CallLayout`] and its steps, [`CallReadPieces`],
//! [`RangeInPieces`], [`ChunkLayout::set_result_payload`], [`PayloadWrites`],
//! [`ReplyBody`] and its runs, [`Pieces`], the header encoders. The kernel
//! calls them from `svcrdma/conn.rs` and `svcrdma/rw.rs`; this file holds
//! only the order of those calls and what each outcome turns into, each
//! function naming the one it follows. A change to that order there needs
//! the same change here.

use alloc::vec;
use alloc::vec::Vec;

use super::server_io::{client_byte, Arg, Errno, Res};
use crate::proto::backchannel::is_backchannel_reply;
use crate::proto::cm::negotiate;
use crate::proto::decode::decode_call;
use crate::proto::encode::{encode_error_for, ErrorReply};
use crate::proto::msg::{
    ChunkLists, DecodeError, DecodeLimits, ErrorBody, Segment, RPCRDMA_VERSION,
};
use crate::proto::pcl::{ChunkLayout, ParsedChunks, PclChunk};
use crate::proto::pieces::{CallReadPieces, Piece, PieceError, Pieces, RangeInPieces};
use crate::proto::svc_call::{CallLayout, Source, Step, StepError, MAX_PAYLOAD};
use crate::proto::svc_reply::{PayloadWrites, ReplyBody};

/// An RDMA Read the server posted: its Read source and piece.
pub type Read = (usize, Piece);

/// `rw.rs` `piece_error`.
fn piece_error(e: PieceError) -> Errno {
    match e {
        PieceError::ShortSegments => Errno::MsgSize,
        PieceError::Overflow | PieceError::NotCovered => Errno::Inval,
    }
}

/// `conn.rs` `PclStore::for_lists`: storage sized exactly for `lists`.
fn pcl_store(lists: &ChunkLists<'_>) -> (Vec<PclChunk>, Vec<Segment>) {
    (
        vec![PclChunk::default(); ParsedChunks::chunks_needed(lists)],
        vec![Segment::default(); ParsedChunks::segments_needed(lists)],
    )
}

/// A connection's settings (`conn.rs` `Shared`).
#[derive(Clone, Copy, Debug)]
pub struct Conn {
    /// Credit grant in every header.
    pub credits: u32,
    /// Negotiated inline send size.
    pub inline_send: u32,
    /// Negotiated inline receive size (the Receive buffers' length).
    pub inline_recv: u32,
    /// Send With Invalidate allowed.
    pub snd_w_inv: bool,
    /// Decode limits for Calls.
    pub limits: DecodeLimits,
    /// Largest RDMA Read or Write (`rw.rs` `PIECE`).
    pub max_piece: usize,
}

/// What the request that receives a message offers.
#[derive(Clone, Copy, Debug)]
pub struct Request {
    /// `SvcRqst::arg_max` of the request that receives the message.
    pub arg_max: u32,
    /// `SvcRqst::arg_max` of the request that finishes a Call after its
    /// Reads.
    pub finish_arg_max: u32,
    /// `SvcRqst::has_backchannel`.
    pub has_backchannel: bool,
}

/// A Call's chunk lists as `xpo_recvfrom` parsed them (`conn.rs`
/// `DecodedCall`): the storage they were parsed into and where each list
/// lies in it, kept until the Reply is sent.
#[derive(Clone, Debug, Default)]
pub struct DecodedCall {
    /// The Call's XID.
    pub xid: u32,
    chunks: Vec<PclChunk>,
    segs: Vec<Segment>,
    layout: ChunkLayout,
}

impl DecodedCall {
    /// Parses `lists` into storage of their own; `None` where
    /// `ParsedChunks::build` refuses them.
    fn parse(xid: u32, lists: &ChunkLists<'_>) -> Option<Self> {
        let (mut chunks, mut segs) = pcl_store(lists);
        let layout = ParsedChunks::build(lists, &mut chunks, &mut segs)
            .ok()?
            .layout();
        Some(Self {
            xid,
            chunks,
            segs,
            layout,
        })
    }

    /// `DecodedCall::pcl`: the parsed lists again.
    fn pcl(&mut self) -> Result<ParsedChunks<'_>, Errno> {
        ParsedChunks::from_layout(&self.layout, &mut self.chunks, &self.segs)
            .map_err(|_| Errno::Inval)
    }
}

/// Per-request state from `xpo_recvfrom` to `xpo_sendto` (`conn.rs`
/// `CallCtxt`).
#[derive(Clone, Debug, Default)]
pub struct CallCtxt {
    /// The received message.
    pub msg: Vec<u8>,
    /// Its chunk lists, where result payloads are recorded.
    pub call: DecodedCall,
    /// How many result payloads were recorded, one in each of the first
    /// Write chunks.
    pub payloads: usize,
}

impl CallCtxt {
    /// `CallCtxt::result_payload` (a flavor that allows direct placement).
    pub fn result_payload(&mut self, offset: u32, length: u32) -> Result<(), Errno> {
        if length == 0 {
            return Ok(());
        }
        let c = &mut self.call;
        match c
            .layout
            .set_result_payload(&mut c.chunks, self.payloads, offset, length)
        {
            Ok(true) => {
                self.payloads += 1;
                Ok(())
            }
            Ok(false) => Ok(()),
            Err(_) => Err(Errno::TooBig),
        }
    }

    /// The result payloads recorded, `(position, length)` in Write chunk
    /// order (`DecodedCall::result_payload`).
    pub fn recorded_payloads(&self) -> Vec<(u32, u32)> {
        let c = &self.call;
        (0..self.payloads)
            .filter_map(|i| c.layout.result_payload(&c.chunks, i))
            .collect()
    }

    /// The length of each Write chunk the Call offered.
    pub fn write_lens(&self) -> Vec<u32> {
        let mut c = self.call.clone();
        c.pcl()
            .map(|pcl| pcl.write_chunks().iter().map(|w| w.length).collect())
            .unwrap_or_default()
    }
}

/// A Call assembled for nfsd.
#[derive(Debug)]
pub struct Call {
    /// The request's state.
    pub ctxt: CallCtxt,
    /// The argument of the request that assembled it.
    pub arg: Arg,
    /// The RDMA Reads posted.
    pub reads: Vec<Read>,
    /// The steps that built the argument.
    pub steps: Vec<Step>,
}

/// What `xpo_recvfrom` did with a message.
#[derive(Debug)]
pub enum Received {
    /// The header did not decode; the `RDMA_ERROR` sent, if any.
    DecodeError {
        /// The decoder's verdict.
        err: DecodeError,
        /// The reply sent.
        reply: Option<Vec<u8>>,
    },
    /// Not a procedure that carries a Call.
    NotACall,
    /// Handed to the backchannel.
    Backchannel,
    /// Answered with `ERR_CHUNK`: these bytes were sent.
    ErrChunk(Vec<u8>),
    /// Dropped ("dropping a call"), nothing sent.
    Dropped(Errno),
    /// Assembled.
    Call(Call),
}

/// Where an RDMA Write went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// The Write chunk of result payload `k`.
    WriteChunk(usize),
    /// The Reply chunk.
    ReplyChunk,
}

/// An RDMA Write the server posted.
#[derive(Clone, Debug)]
pub struct Written {
    /// Where it went.
    pub target: Target,
    /// The piece.
    pub piece: Piece,
    /// Its bytes, when the Reply is captured.
    pub data: Vec<u8>,
}

/// What `xpo_sendto` did.
#[derive(Debug)]
pub enum Replied {
    /// Failed: the connection is closed.
    Failed(Errno),
    /// Answered with `ERR_CHUNK`: these bytes were sent.
    ErrChunk(Vec<u8>),
    /// The rest of the Reply went through the Reply chunk.
    ReplyChunk {
        /// The transport header sent.
        header: Vec<u8>,
        /// Bytes written into the Reply chunk.
        body_len: u32,
        /// Send With Invalidate key.
        inv: Option<u32>,
    },
    /// Sent inline.
    Inline {
        /// The message sent.
        msg: Vec<u8>,
        /// Length of its transport header.
        header_len: usize,
        /// Send With Invalidate key.
        inv: Option<u32>,
    },
}

impl Conn {
    /// `Conn::accept`: the module's inline sizes (`max_inline_read` is the
    /// send size), the client's private data, the device's memory
    /// management extensions.
    pub fn accept(
        local_send: u32,
        local_recv: u32,
        private_data: Option<&[u8]>,
        mem_mgt_extensions: bool,
        credits: u32,
        max_piece: usize,
    ) -> Self {
        let neg = negotiate(local_send, local_recv, private_data);
        Self {
            credits,
            inline_send: neg.inline_send,
            inline_recv: neg.inline_recv,
            snd_w_inv: neg.peer_send_w_inv_ok && mem_mgt_extensions,
            limits: DecodeLimits::server(MAX_PAYLOAD, neg.inline_recv),
            max_piece,
        }
    }

    /// `recvfrom`: a Receive delivers at most its buffer's length.
    pub fn received<'m>(&self, wire: &'m [u8]) -> &'m [u8] {
        &wire[..wire.len().min(self.inline_recv as usize)]
    }

    /// `send_err_chunk`.
    fn err_chunk(&self, xid: u32) -> Vec<u8> {
        let reply = ErrorReply {
            xid,
            vers: RPCRDMA_VERSION,
            credits: self.credits,
            body: ErrorBody::Chunk,
        };
        let mut out = [0u8; 32];
        let n = reply.encode(&mut out).unwrap_or(0);
        out[..n].to_vec()
    }

    /// `send_decode_error`.
    fn decode_error(&self, msg: &[u8], err: DecodeError) -> Received {
        let mut out = [0u8; 32];
        let reply = match encode_error_for(msg, &err, self.credits, &mut out) {
            Ok(Some(n)) => Some(out[..n].to_vec()),
            _ => None,
        };
        Received::DecodeError { err, reply }
    }

    /// `Conn::process`, then (for a Call with Read chunks, once its Reads
    /// completed) `Conn::finish_read` on the request that finishes it.
    pub fn process(&self, rq: &Request, msg: &[u8]) -> Received {
        let hdr = match decode_call(msg, &self.limits) {
            Ok(h) => h,
            Err(e) => return self.decode_error(msg, e),
        };
        let xid = hdr.xid;
        let Some((lists, inline)) = hdr.body.chunks_and_inline() else {
            return Received::NotACall;
        };
        if is_backchannel_reply(xid, lists, inline) && rq.has_backchannel {
            return Received::Backchannel;
        }
        let Some(mut call) = DecodedCall::parse(xid, lists) else {
            return Received::ErrChunk(self.err_chunk(xid));
        };
        let Ok(pcl) = call.pcl() else {
            return Received::Dropped(Errno::Inval);
        };
        let Some(layout) = CallLayout::new(&pcl, inline.len(), rq.arg_max) else {
            return Received::ErrChunk(self.err_chunk(xid));
        };
        if !layout.needs_reads() {
            let arg = Arg::new(rq.arg_max);
            return self.assemble(arg, call, inline, msg, None);
        }
        // `ReadWork::new`; the Reads are then posted and complete.
        let mut reads = Vec::new();
        for p in CallReadPieces::new(&pcl, self.max_piece) {
            match p {
                Ok(r) => reads.push(r),
                Err(e) => return Received::Dropped(piece_error(e)),
            }
        }
        self.finish_read(rq.finish_arg_max, msg, inline, call, reads)
    }

    /// `Conn::finish_read`: the Call's lists as `process` parsed them,
    /// kept with it while it was read (`ReadWork`).
    fn finish_read(
        &self,
        arg_max: u32,
        msg: &[u8],
        inline: &[u8],
        call: DecodedCall,
        reads: Vec<Read>,
    ) -> Received {
        self.assemble(Arg::new(arg_max), call, inline, msg, Some(reads))
    }

    /// `Conn::assemble`, and the `CallCtxt` its caller makes.
    fn assemble(
        &self,
        mut arg: Arg,
        mut call: DecodedCall,
        inline: &[u8],
        msg: &[u8],
        reads: Option<Vec<Read>>,
    ) -> Received {
        let xid = call.xid;
        let Ok(pcl) = call.pcl() else {
            return Received::Dropped(Errno::Inval);
        };
        let Some(layout) = CallLayout::new(&pcl, inline.len(), arg.arg_max) else {
            return Received::ErrChunk(self.err_chunk(xid));
        };
        if let Err(e) = arg.set_arg(layout.total()) {
            return Received::Dropped(e);
        }
        let mut steps = Vec::new();
        for step in layout.steps() {
            let step = match step {
                Ok(step) => step,
                Err(StepError::BadRegion) => return Received::ErrChunk(self.err_chunk(xid)),
                Err(StepError::Inconsistent) => return Received::Dropped(Errno::Inval),
            };
            if let Err(e) = place(&mut arg, step, inline, reads.as_deref()) {
                return Received::Dropped(e);
            }
            steps.push(step);
        }
        let ctxt = CallCtxt {
            msg: msg.to_vec(),
            call,
            payloads: 0,
        };
        Received::Call(Call {
            ctxt,
            arg,
            reads: reads.unwrap_or_default(),
            steps,
        })
    }

    /// `Conn::send_reply` for a Reply of `res.len` bytes.
    pub fn send_reply(&self, ctxt: &CallCtxt, res: Res, writes: &mut Vec<Written>) -> Replied {
        match self.try_send_reply(ctxt, res, writes) {
            Ok(r) => r,
            Err(e) => Replied::Failed(e),
        }
    }

    fn try_send_reply(
        &self,
        ctxt: &CallCtxt,
        res: Res,
        writes: &mut Vec<Written>,
    ) -> Result<Replied, Errno> {
        // The lists the Call was parsed into, with the result payloads
        // recorded in their Write chunks (`DecodedCall::pcl`).
        let mut call = ctxt.call.clone();
        let xid = call.xid;
        let pcl = call.pcl()?;

        for (k, w) in PayloadWrites::new(&pcl, res.len).enumerate() {
            let w = w.map_err(|_| Errno::Inval)?;
            let target = Target::WriteChunk(k);
            let segs = pcl.segments(w.chunk);
            self.write_chunk(
                writes,
                target,
                segs,
                w.len as usize,
                res,
                |off, len, dst| {
                    let at = w.reply_offset(off).ok_or(Errno::Inval)?;
                    res.read_res(at, len, dst)
                },
            )?;
        }

        let body = ReplyBody::new(&pcl, res.len).map_err(|_| Errno::Inval)?;
        let rest = body.len();
        let inv = if self.snd_w_inv { pcl.inv_rkey() } else { None };
        let mut hbuf = vec![0u8; ctxt.msg.len().saturating_add(16)];
        if let Some(rc) = pcl.reply_chunk() {
            if !body.fits(rc) {
                return Ok(Replied::ErrChunk(self.err_chunk(xid)));
            }
            let segs = pcl.segments(rc);
            self.write_chunk(
                writes,
                Target::ReplyChunk,
                segs,
                rest as usize,
                res,
                |off, len, dst| {
                    for run in body.runs(off, len) {
                        let run = run.map_err(|_| Errno::Inval)?;
                        let end = run.at.checked_add(run.len).ok_or(Errno::Inval)?;
                        let sub = if dst.is_empty() {
                            &mut [][..]
                        } else {
                            &mut dst[run.at..end]
                        };
                        res.read_res(run.reply_offset, run.len, sub)?;
                    }
                    Ok(())
                },
            )?;
            let n = pcl
                .encode_reply_header(xid, self.credits, rest, &mut hbuf)
                .map_err(|_| Errno::Inval)?;
            let header = hbuf[..n].to_vec();
            return Ok(Replied::ReplyChunk {
                header,
                body_len: rest,
                inv,
            });
        }
        let n = pcl
            .encode_reply_header(xid, self.credits, 0, &mut hbuf)
            .map_err(|_| Errno::Inval)?;
        let Some(total) = body
            .inline_len(n, self.inline_send)
            .map_err(|_| Errno::Inval)?
        else {
            return Ok(Replied::ErrChunk(self.err_chunk(xid)));
        };
        let mut out = vec![0u8; total];
        out[..n].copy_from_slice(&hbuf[..n]);
        let dst = &mut out[n..];
        for run in body.runs(0, dst.len()) {
            let run = run.map_err(|_| Errno::Inval)?;
            let end = run.at.checked_add(run.len).ok_or(Errno::Inval)?;
            let sub = dst.get_mut(run.at..end).ok_or(Errno::Inval)?;
            res.read_res(run.reply_offset, run.len, sub)?;
        }
        Ok(Replied::Inline {
            msg: out,
            header_len: n,
            inv,
        })
    }

    /// `Io::write_chunk`: `fill(off, len, buf)` puts the bytes at `off` of
    /// the chunk's data into `buf` (empty when the Reply is not captured).
    fn write_chunk(
        &self,
        writes: &mut Vec<Written>,
        target: Target,
        segs: &[Segment],
        total: usize,
        res: Res,
        mut fill: impl FnMut(usize, usize, &mut [u8]) -> Result<(), Errno>,
    ) -> Result<(), Errno> {
        for p in Pieces::new(segs, total, self.max_piece) {
            let piece = p.map_err(piece_error)?;
            let mut data = if res.captured() {
                vec![0u8; piece.len]
            } else {
                Vec::new()
            };
            fill(piece.off, piece.len, &mut data)?;
            writes.push(Written {
                target,
                piece,
                data,
            });
        }
        Ok(())
    }
}

/// One step of `Conn::assemble`: the inline bytes, a range of a Read
/// source (`copy_read`, `ReadWork::copy_out`) or the XDR pad.
fn place(arg: &mut Arg, step: Step, inline: &[u8], reads: Option<&[Read]>) -> Result<(), Errno> {
    let at = step.at;
    match step.source {
        Source::Inline { offset, len } => {
            let start = offset as usize;
            let end = start.checked_add(len as usize).ok_or(Errno::Inval)?;
            let bytes = inline.get(start..end).ok_or(Errno::Inval)?;
            arg.write_arg(at, bytes.len(), |k| bytes[k])
        }
        Source::Chunk { src, start, len } => {
            let reads = reads.ok_or(Errno::Inval)?;
            let of_src = reads.iter().filter(|r| r.0 == src).map(|r| (r.1, r.1));
            for found in RangeInPieces::new(of_src, start as usize, len as usize) {
                let (p, run) = found.map_err(piece_error)?;
                let rel = u32::try_from(run.at).map_err(|_| Errno::Inval)?;
                let to = at.checked_add(rel).ok_or(Errno::Inval)?;
                let from = p.addr.wrapping_add(run.in_piece as u64);
                arg.write_arg(to, run.len, |k| {
                    client_byte(p.rkey, from.wrapping_add(k as u64))
                })?;
            }
            Ok(())
        }
        Source::Pad { len } => {
            let zeros = [0u8; 4].get(..len as usize).ok_or(Errno::Inval)?;
            arg.write_arg(at, zeros.len(), |_| 0)
        }
    }
}
