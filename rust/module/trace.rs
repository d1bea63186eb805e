// SPDX-License-Identifier: GPL-2.0

//! Trace events (`/sys/kernel/tracing/events/rpcrdma/`), named and shaped
//! like the C module's.
//!
//! The events are defined in C ([`rpcrdma_trace.h`], instantiated by
//! `rpcrdma_trace.c` with `CREATE_RUST_TRACE_POINTS`); this file declares
//! their static keys (`__tracepoint_<name>`) and entry points
//! (`rust_do_trace_<name>`) and wraps them in safe functions that transport
//! code calls. A disabled event costs the static branch only (a patched
//! `nop` with `CONFIG_JUMP_LABEL`): every argument that takes work to
//! compute (a peer address, header words) is computed after the branch.
//!
//! The events exist in kernels with `CONFIG_TRACEPOINTS` and in the
//! transport module only (its crate is built with `--cfg rpcrdma_trace`,
//! see `Kbuild`): elsewhere, in the KUnit module too, every function here
//! is an empty inline function.
//!
//! C header: [`include/linux/tracepoint.h`](srctree/include/linux/tracepoint.h).
//!
//! [`rpcrdma_trace.h`]: rpcrdma_trace.h

use crate::rust::bindings;
use crate::rust::rdma::cm::CmId;
use crate::rust::sunrpc::xprt::{Mr, RpcRqst, Xprt};
use crate::rust::sunrpc::xprt_reply::ReplyRqst;
use kernel::error::Error;
use kernel::ffi::{c_long, c_ulong};

/// Declares events: their C symbols, and per event a module with
/// `enabled()` (the static branch) and `emit()` (the call into C).
macro_rules! events {
    ($($name:ident($($arg:ident: $ty:ty),* $(,)?);)*) => {
        kernel::macros::paste! {
            #[cfg(all(CONFIG_TRACEPOINTS, rpcrdma_trace))]
            // bindgen gives C's empty structs (config-dependent members of
            // `struct tracepoint` and `struct rpc_xprt`) no fields; only C
            // touches them.
            #[allow(improper_ctypes, reason = "pointers to, and statics of, C-defined structs")]
            mod ffi {
                use super::*;
                extern "C" {
                    $(
                        pub(in crate::rust) static [<__tracepoint_ $name>]: kernel::bindings::tracepoint;
                        pub(in crate::rust) fn [<rust_do_trace_ $name>]($($arg: $ty),*);
                    )*
                }
            }

            $(
                mod $name {
                    // For the argument types; events with only integer
                    // arguments need none of them.
                    #[allow(unused_imports, reason = "not every event uses these names")]
                    use super::*;

                    /// Whether the event is enabled (the static branch).
                    #[inline(always)]
                    pub(in crate::rust) fn enabled() -> bool {
                        #[cfg(all(CONFIG_TRACEPOINTS, rpcrdma_trace))]
                        {
                            // SAFETY: The key is the `key` field of a
                            // `struct tracepoint` the C side defines
                            // (`rpcrdma_trace.c`), which lives as long as
                            // the module.
                            unsafe {
                                kernel::jump_label::static_branch_unlikely!(
                                    super::ffi::[<__tracepoint_ $name>],
                                    kernel::bindings::tracepoint,
                                    key
                                )
                            }
                        }
                        #[cfg(not(all(CONFIG_TRACEPOINTS, rpcrdma_trace)))]
                        {
                            false
                        }
                    }

                    /// Records the event.
                    ///
                    /// # Safety
                    ///
                    /// Pointer arguments point to live objects (or are
                    /// null where the event allows) for the call.
                    #[inline(always)]
                    pub(in crate::rust) unsafe fn emit($($arg: $ty),*) {
                        #[cfg(all(CONFIG_TRACEPOINTS, rpcrdma_trace))]
                        // SAFETY: By the function's safety requirement; the
                        // prototype matches the event's `TP_PROTO`.
                        unsafe {
                            super::ffi::[<rust_do_trace_ $name>]($($arg),*)
                        };
                        #[cfg(not(all(CONFIG_TRACEPOINTS, rpcrdma_trace)))]
                        {
                            $(let _ = $arg;)*
                        }
                    }
                }
            )*
        }
    };
}

type XprtPtr = *const bindings::rpc_xprt;
type RqstPtr = *const bindings::rpc_rqst;
type MrPtr = *const bindings::rpcrdma_rs_mr;
type SockaddrPtr = *const bindings::sockaddr;

events! {
    xprtrdma_connect(xprt: XprtPtr, rc: i32);
    xprtrdma_disconnect(xprt: XprtPtr, rc: i32);
    xprtrdma_op_inject_dsc(xprt: XprtPtr);
    xprtrdma_device_removal(xprt: XprtPtr);
    xprtrdma_op_connect(xprt: XprtPtr, delay: c_ulong);
    xprtrdma_inline_thresh(xprt: XprtPtr, inline_send: u32, inline_recv: u32, max_send: u32, max_recv: u32);
    xprtrdma_createmrs(xprt: XprtPtr, count: u32);
    xprtrdma_nomrs_err(xprt: XprtPtr, rqst: RqstPtr);
    xprtrdma_marshal(rqst: RqstPtr, hdrlen: u32, rtype: u32, wtype: u32);
    xprtrdma_marshal_failed(rqst: RqstPtr, ret: i32);
    xprtrdma_post_send(rqst: RqstPtr, length: u32);
    xprtrdma_post_send_err(rqst: RqstPtr, ret: i32);
    xprtrdma_chunk_read(rqst: RqstPtr, pos: u32, handle: u32, length: u32, offset: u64, is_last: bool);
    xprtrdma_chunk_write(rqst: RqstPtr, handle: u32, length: u32, offset: u64, is_last: bool);
    xprtrdma_chunk_reply(rqst: RqstPtr, handle: u32, length: u32, offset: u64, is_last: bool);
    xprtrdma_mr_map(rqst: RqstPtr, mr: MrPtr);
    xprtrdma_mr_fastreg(rqst: RqstPtr, mr: MrPtr);
    xprtrdma_mr_localinv(rqst: RqstPtr, mr: MrPtr);
    xprtrdma_mr_reminv(rqst: RqstPtr, mr: MrPtr);
    xprtrdma_mr_unmap(mr: MrPtr);
    xprtrdma_post_linv_err(xid: u32, status: i32);
    xprtrdma_reply(rqst: RqstPtr, xid: u32, credits: u32);
    xprtrdma_reply_vers_err(xprt: XprtPtr, xid: u32, version: u32, proc_: u32);
    xprtrdma_reply_rqst_err(xprt: XprtPtr, xid: u32, version: u32, proc_: u32);
    xprtrdma_reply_short_err(xprt: XprtPtr, xid: u32, version: u32, proc_: u32);
    xprtrdma_reply_hdr_err(xprt: XprtPtr, xid: u32, version: u32, proc_: u32);
    xprtrdma_err_vers(rqst: RqstPtr, min: u32, max: u32);
    xprtrdma_err_chunk(rqst: RqstPtr);
    xprtrdma_err_unrecognized(rqst: RqstPtr, procedure: u32);
    svcrdma_accept(peer: SockaddrPtr, credits: u32, inline_send: u32, inline_recv: u32, ird: u32);
    svcrdma_pd_err(peer: SockaddrPtr, status: c_long);
    svcrdma_qp_err(peer: SockaddrPtr, status: c_long);
    svcrdma_initdepth_err(peer: SockaddrPtr, status: c_long);
    svcrdma_accept_err(peer: SockaddrPtr, status: c_long);
    svcrdma_decode_rqst(xid: u32, vers: u32, credits: u32, proc_: u32, hdrlen: u32);
    svcrdma_decode_badvers_err(xid: u32, vers: u32, credits: u32, proc_: u32);
    svcrdma_decode_drop_err(xid: u32, vers: u32, credits: u32, proc_: u32);
    svcrdma_decode_badproc_err(xid: u32, vers: u32, credits: u32, proc_: u32);
    svcrdma_decode_parse_err(xid: u32, vers: u32, credits: u32, proc_: u32);
    svcrdma_err_vers(xid: u32);
    svcrdma_err_chunk(xid: u32);
    svcrdma_post_read_chunk(sqecount: i32, length: u32);
    svcrdma_post_write_chunk(sqecount: i32, length: u32);
    svcrdma_post_reply_chunk(sqecount: i32, length: u32);
    svcrdma_post_send(length: u32, inv_rkey: u32);
    svcrdma_send_err(peer: SockaddrPtr, xid: u32, status: i32);
    svcrdma_wc_send_err(status: i32);
    svcrdma_wc_read_err(status: i32);
    svcrdma_sq_full(avail: u32);
    svcrdma_sq_retry(avail: u32);
}

/// How a call or its result is conveyed (`xprtrdma_marshal`), numbered as
/// C's `enum rpcrdma_chunktype`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum ChunkType {
    /// No chunk: the result comes back inline.
    Inline = 0,
    /// The call is copied into the Send buffer.
    Pullup = 1,
    /// The call is sent from its own pages.
    Mapped = 2,
    /// A Read chunk carries the call's payload.
    ReadList = 3,
    /// The whole call goes in a Read chunk at position zero (a long call).
    LongCall = 4,
    /// A Write chunk receives the result's payload.
    WriteList = 5,
    /// A Reply chunk receives the whole reply.
    ReplyChunk = 6,
}

/// `len` as the u32 of an event field (lengths here are buffer sizes,
/// far below 4 GiB; clamped if not).
fn field_len(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

/// The first four words of an RPC-over-RDMA header (xid, vers, credits,
/// proc), each 0 where the message is too short to hold it.
fn header_words(msg: &[u8]) -> [u32; 4] {
    let mut words = [0u32; 4];
    for (i, w) in words.iter_mut().enumerate() {
        if let Some(&[a, b, c, d]) = msg.get(i * 4..i * 4 + 4) {
            *w = u32::from_be_bytes([a, b, c, d]);
        }
    }
    words
}

// Client: connections.

/// The connect worker finished (C `xprtrdma_connect`): `rc` 0 or the error
/// handed to the waiting tasks.
#[inline]
pub fn xprtrdma_connect(xprt: &Xprt, rc: i32) {
    if xprtrdma_connect::enabled() {
        // SAFETY: `xprt` is live while borrowed (its type invariant).
        unsafe { xprtrdma_connect::emit(xprt.as_raw(), rc) }
    }
}

/// The connection was closed by sunrpc (C `xprtrdma_disconnect`).
#[inline]
pub fn xprtrdma_disconnect(xprt: &Xprt, rc: i32) {
    if xprtrdma_disconnect::enabled() {
        // SAFETY: As in `xprtrdma_connect`.
        unsafe { xprtrdma_disconnect::emit(xprt.as_raw(), rc) }
    }
}

/// A disconnect injected through `fail_sunrpc` (C `xprtrdma_op_inject_dsc`).
#[inline]
pub fn xprtrdma_op_inject_dsc(xprt: &Xprt) {
    if xprtrdma_op_inject_dsc::enabled() {
        // SAFETY: As in `xprtrdma_connect`.
        unsafe { xprtrdma_op_inject_dsc::emit(xprt.as_raw()) }
    }
}

/// The connection's device is going away (C `xprtrdma_device_removal`,
/// which names the device; this one the peer).
#[inline]
pub fn xprtrdma_device_removal(xprt: &Xprt) {
    if xprtrdma_device_removal::enabled() {
        // SAFETY: As in `xprtrdma_connect`.
        unsafe { xprtrdma_device_removal::emit(xprt.as_raw()) }
    }
}

/// sunrpc asked for a connection; a reconnect waits `delay` jiffies (C
/// `xprtrdma_op_connect`).
///
/// # Safety
///
/// `xprt` is a live transport.
#[inline]
pub(in crate::rust) unsafe fn xprtrdma_op_connect(xprt: *const bindings::rpc_xprt, delay: c_ulong) {
    if xprtrdma_op_connect::enabled() {
        // SAFETY: By the function's safety requirement.
        unsafe { xprtrdma_op_connect::emit(xprt, delay) }
    }
}

/// The inline sizes negotiated at connect time, and the largest inline
/// call and reply the planner then allows (C `xprtrdma_inline_thresh`).
#[inline]
pub fn xprtrdma_inline_thresh(
    xprt: &Xprt,
    inline_send: u32,
    inline_recv: u32,
    max_send: u32,
    max_recv: u32,
) {
    if xprtrdma_inline_thresh::enabled() {
        // SAFETY: As in `xprtrdma_connect`.
        unsafe {
            xprtrdma_inline_thresh::emit(
                xprt.as_raw(),
                inline_send,
                inline_recv,
                max_send,
                max_recv,
            )
        }
    }
}

/// The connection's MR pool was allocated (C `xprtrdma_createmrs`).
#[inline]
pub fn xprtrdma_createmrs(xprt: &Xprt, count: u32) {
    if xprtrdma_createmrs::enabled() {
        // SAFETY: As in `xprtrdma_connect`.
        unsafe { xprtrdma_createmrs::emit(xprt.as_raw(), count) }
    }
}

/// A call found the MR pool empty (C `xprtrdma_nomrs_err`).
#[inline]
pub fn xprtrdma_nomrs_err(xprt: &Xprt, rqst: &RpcRqst<'_>) {
    if xprtrdma_nomrs_err::enabled() {
        // SAFETY: Both are live while borrowed.
        unsafe { xprtrdma_nomrs_err::emit(xprt.as_raw(), rqst.as_raw()) }
    }
}

// Client: calls.

/// A call was marshaled: transport header length and the chunk types of
/// call and result (C `xprtrdma_marshal`).
#[inline]
pub fn xprtrdma_marshal(rqst: &RpcRqst<'_>, hdrlen: usize, rtype: ChunkType, wtype: ChunkType) {
    if xprtrdma_marshal::enabled() {
        // SAFETY: The request is live while borrowed.
        unsafe {
            xprtrdma_marshal::emit(rqst.as_raw(), field_len(hdrlen), rtype as u32, wtype as u32)
        }
    }
}

/// A call could not be marshaled (C `xprtrdma_marshal_failed`).
#[inline]
pub fn xprtrdma_marshal_failed(rqst: &RpcRqst<'_>, err: Error) {
    if xprtrdma_marshal_failed::enabled() {
        // SAFETY: The request is live while borrowed.
        unsafe { xprtrdma_marshal_failed::emit(rqst.as_raw(), err.to_errno()) }
    }
}

/// The call's Send was posted, `length` bytes (C `xprtrdma_post_send`).
#[inline]
pub fn xprtrdma_post_send(rqst: &RpcRqst<'_>, length: usize) {
    if xprtrdma_post_send::enabled() {
        // SAFETY: The request is live while borrowed.
        unsafe { xprtrdma_post_send::emit(rqst.as_raw(), field_len(length)) }
    }
}

/// The call's Send could not be posted (C `xprtrdma_post_send_err`).
#[inline]
pub fn xprtrdma_post_send_err(rqst: &RpcRqst<'_>, err: Error) {
    if xprtrdma_post_send_err::enabled() {
        // SAFETY: The request is live while borrowed.
        unsafe { xprtrdma_post_send_err::emit(rqst.as_raw(), err.to_errno()) }
    }
}

/// One segment of a call's Read chunk at XDR position `pos` (C
/// `xprtrdma_chunk_read`).
#[inline]
pub fn xprtrdma_chunk_read(
    rqst: &RpcRqst<'_>,
    pos: u32,
    handle: u32,
    length: u32,
    offset: u64,
    is_last: bool,
) {
    if xprtrdma_chunk_read::enabled() {
        // SAFETY: The request is live while borrowed.
        unsafe { xprtrdma_chunk_read::emit(rqst.as_raw(), pos, handle, length, offset, is_last) }
    }
}

/// One segment of a call's Write chunk (C `xprtrdma_chunk_write`).
#[inline]
pub fn xprtrdma_chunk_write(
    rqst: &RpcRqst<'_>,
    handle: u32,
    length: u32,
    offset: u64,
    is_last: bool,
) {
    if xprtrdma_chunk_write::enabled() {
        // SAFETY: The request is live while borrowed.
        unsafe { xprtrdma_chunk_write::emit(rqst.as_raw(), handle, length, offset, is_last) }
    }
}

/// One segment of a call's Reply chunk (C `xprtrdma_chunk_reply`).
#[inline]
pub fn xprtrdma_chunk_reply(
    rqst: &RpcRqst<'_>,
    handle: u32,
    length: u32,
    offset: u64,
    is_last: bool,
) {
    if xprtrdma_chunk_reply::enabled() {
        // SAFETY: The request is live while borrowed.
        unsafe { xprtrdma_chunk_reply::emit(rqst.as_raw(), handle, length, offset, is_last) }
    }
}

// Client: memory registration.

/// An MR was DMA-mapped for part of a request (C `xprtrdma_mr_map`).
#[inline]
pub fn xprtrdma_mr_map(rqst: &RpcRqst<'_>, mr: &Mr) {
    if xprtrdma_mr_map::enabled() {
        // SAFETY: The request and the MR are live while borrowed.
        unsafe { xprtrdma_mr_map::emit(rqst.as_raw(), mr.as_raw()) }
    }
}

/// An MR's REG_MR was posted (C `xprtrdma_mr_fastreg`).
#[inline]
pub fn xprtrdma_mr_fastreg(rqst: &RpcRqst<'_>, mr: &Mr) {
    if xprtrdma_mr_fastreg::enabled() {
        // SAFETY: As in `xprtrdma_mr_map`.
        unsafe { xprtrdma_mr_fastreg::emit(rqst.as_raw(), mr.as_raw()) }
    }
}

/// A LOCAL_INV of the MR is about to be posted (C `xprtrdma_mr_localinv`);
/// `rqst` is the request whose reply waits for it, if one does.
#[inline]
pub fn xprtrdma_mr_localinv(rqst: Option<&ReplyRqst>, mr: &Mr) {
    if xprtrdma_mr_localinv::enabled() {
        let rqst = rqst.map_or(core::ptr::null(), ReplyRqst::as_raw);
        // SAFETY: The MR is live while borrowed; `rqst` is null or a
        // pinned request.
        unsafe { xprtrdma_mr_localinv::emit(rqst, mr.as_raw()) }
    }
}

/// The server invalidated the MR with Send With Invalidate (C
/// `xprtrdma_mr_reminv`).
#[inline]
pub fn xprtrdma_mr_reminv(rqst: &ReplyRqst, mr: &Mr) {
    if xprtrdma_mr_reminv::enabled() {
        // SAFETY: The pinned request and the MR are live while borrowed.
        unsafe { xprtrdma_mr_reminv::emit(rqst.as_raw(), mr.as_raw()) }
    }
}

/// An MR's DMA mapping is about to be released (C `xprtrdma_mr_unmap`).
#[inline]
pub fn xprtrdma_mr_unmap(mr: &Mr) {
    if xprtrdma_mr_unmap::enabled() {
        // SAFETY: The MR is live while borrowed.
        unsafe { xprtrdma_mr_unmap::emit(mr.as_raw()) }
    }
}

/// A LOCAL_INV chain could not be posted (C `xprtrdma_post_linv_err`);
/// `xid` 0 for a batch that serves no single request.
#[inline]
pub fn xprtrdma_post_linv_err(xid: u32, err: Error) {
    if xprtrdma_post_linv_err::enabled() {
        // SAFETY: Scalars only.
        unsafe { xprtrdma_post_linv_err::emit(xid, err.to_errno()) }
    }
}

// Client: replies.

/// A reply matched its request; `credits` is the server's grant (C
/// `xprtrdma_reply`).
#[inline]
pub fn xprtrdma_reply(rqst: &ReplyRqst, xid: u32, credits: u32) {
    if xprtrdma_reply::enabled() {
        // SAFETY: The pinned request is live while borrowed.
        unsafe { xprtrdma_reply::emit(rqst.as_raw(), xid, credits) }
    }
}

/// Why a reply was dropped before it reached a request (C
/// `xprtrdma_reply_*_err`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplyError {
    /// Not RPC-over-RDMA version 1 (`xprtrdma_reply_vers_err`).
    Version,
    /// No request waits for its xid (`xprtrdma_reply_rqst_err`).
    NoRequest,
    /// Shorter than its header (`xprtrdma_reply_short_err`).
    Short,
    /// A header that does not decode (`xprtrdma_reply_hdr_err`).
    Header,
}

/// A reply of `msg` was dropped for `why`.
#[inline]
pub fn xprtrdma_reply_err(xprt: &Xprt, why: ReplyError, msg: &[u8]) {
    let enabled = match why {
        ReplyError::Version => xprtrdma_reply_vers_err::enabled(),
        ReplyError::NoRequest => xprtrdma_reply_rqst_err::enabled(),
        ReplyError::Short => xprtrdma_reply_short_err::enabled(),
        ReplyError::Header => xprtrdma_reply_hdr_err::enabled(),
    };
    if !enabled {
        return;
    }
    let [xid, vers, _credits, proc_] = header_words(msg);
    let x = xprt.as_raw();
    // SAFETY: `xprt` is live while borrowed (its type invariant).
    unsafe {
        match why {
            ReplyError::Version => xprtrdma_reply_vers_err::emit(x, xid, vers, proc_),
            ReplyError::NoRequest => xprtrdma_reply_rqst_err::emit(x, xid, vers, proc_),
            ReplyError::Short => xprtrdma_reply_short_err::emit(x, xid, vers, proc_),
            ReplyError::Header => xprtrdma_reply_hdr_err::emit(x, xid, vers, proc_),
        }
    }
}

/// The server answered with `RDMA_ERROR`/`ERR_VERS` (C `xprtrdma_err_vers`).
#[inline]
pub fn xprtrdma_err_vers(rqst: &ReplyRqst, min: u32, max: u32) {
    if xprtrdma_err_vers::enabled() {
        // SAFETY: The pinned request is live while borrowed.
        unsafe { xprtrdma_err_vers::emit(rqst.as_raw(), min, max) }
    }
}

/// The server answered with `RDMA_ERROR`/`ERR_CHUNK` (C `xprtrdma_err_chunk`).
#[inline]
pub fn xprtrdma_err_chunk(rqst: &ReplyRqst) {
    if xprtrdma_err_chunk::enabled() {
        // SAFETY: The pinned request is live while borrowed.
        unsafe { xprtrdma_err_chunk::emit(rqst.as_raw()) }
    }
}

/// The server answered with an `RDMA_ERROR` code we do not know (C
/// `xprtrdma_err_unrecognized`).
#[inline]
pub fn xprtrdma_err_unrecognized(rqst: &ReplyRqst, procedure: u32) {
    if xprtrdma_err_unrecognized::enabled() {
        // SAFETY: The pinned request is live while borrowed.
        unsafe { xprtrdma_err_unrecognized::emit(rqst.as_raw(), procedure) }
    }
}

// Server.

/// The peer of a connection being accepted, kept by value: the connection
/// identifier is handed on (to the queue pair, or back to the CM on
/// failure) before the outcome is known.
#[derive(Clone, Copy)]
#[repr(C, align(8))]
pub struct PeerAddr {
    /// A `struct sockaddr_in` or `sockaddr_in6`, what the events copy.
    bytes: [u8; PEER_ADDR_LEN],
}

/// `sizeof(struct sockaddr_in6)`, what the events keep of an address.
const PEER_ADDR_LEN: usize = core::mem::size_of::<bindings::sockaddr_in6>();

impl PeerAddr {
    /// The destination (peer) address of `id`'s route.
    pub fn of(id: &CmId) -> Self {
        let mut bytes = [0u8; PEER_ADDR_LEN];
        // SAFETY: The identifier is live while borrowed; `route.addr`
        // holds its addresses as `sockaddr_storage` unions, of which the
        // first `sizeof(struct sockaddr_in6)` bytes are read.
        unsafe {
            let dst = &raw const (*id.as_ptr()).route.addr.dst_addr;
            core::ptr::copy_nonoverlapping(dst.cast::<u8>(), bytes.as_mut_ptr(), PEER_ADDR_LEN);
        }
        Self { bytes }
    }

    fn as_raw(&self) -> SockaddrPtr {
        self.bytes.as_ptr().cast()
    }
}

/// A connection was accepted (no C event: C logs it at `dprintk` level).
#[inline]
pub fn svcrdma_accept(peer: &PeerAddr, credits: u32, inline_send: u32, inline_recv: u32, ird: u8) {
    if svcrdma_accept::enabled() {
        // SAFETY: `peer` holds a socket address for the call.
        unsafe {
            svcrdma_accept::emit(
                peer.as_raw(),
                credits,
                inline_send,
                inline_recv,
                u32::from(ird),
            )
        }
    }
}

/// The step of accepting a connection that failed (C `svcrdma_*_err`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AcceptStep {
    /// The protection domain (the device's registration cache).
    Pd,
    /// The queue pair and its completion queues.
    Qp,
    /// The client allows no RDMA Reads.
    InitDepth,
    /// Everything else: buffers, Receives, `rdma_accept`.
    Accept,
}

/// Accepting a connection from `peer` failed at `step` with `err`.
#[inline]
pub fn svcrdma_accept_err(peer: &PeerAddr, step: AcceptStep, err: Error) {
    let enabled = match step {
        AcceptStep::Pd => svcrdma_pd_err::enabled(),
        AcceptStep::Qp => svcrdma_qp_err::enabled(),
        AcceptStep::InitDepth => svcrdma_initdepth_err::enabled(),
        AcceptStep::Accept => svcrdma_accept_err::enabled(),
    };
    if !enabled {
        return;
    }
    let (p, status) = (peer.as_raw(), err.to_errno() as c_long);
    // SAFETY: `peer` holds a socket address for the call.
    unsafe {
        match step {
            AcceptStep::Pd => svcrdma_pd_err::emit(p, status),
            AcceptStep::Qp => svcrdma_qp_err::emit(p, status),
            AcceptStep::InitDepth => svcrdma_initdepth_err::emit(p, status),
            AcceptStep::Accept => svcrdma_accept_err::emit(p, status),
        }
    }
}

/// A call's transport header decoded (C `svcrdma_decode_rqst`).
#[inline]
pub fn svcrdma_decode_rqst(msg: &[u8], hdrlen: usize) {
    if svcrdma_decode_rqst::enabled() {
        let [xid, vers, credits, proc_] = header_words(msg);
        // SAFETY: Scalars only.
        unsafe { svcrdma_decode_rqst::emit(xid, vers, credits, proc_, field_len(hdrlen)) }
    }
}

/// Why a call's transport header was refused (C `svcrdma_decode_*_err`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BadRequest {
    /// Not version 1: answered with `ERR_VERS`.
    Version,
    /// Dropped without an answer (too short to answer).
    Drop,
    /// An unknown or unexpected procedure.
    Proc,
    /// The header or its chunk lists do not parse: answered with `ERR_CHUNK`.
    Parse,
}

/// A call of `msg` was refused for `why`.
#[inline]
pub fn svcrdma_decode_err(why: BadRequest, msg: &[u8]) {
    let enabled = match why {
        BadRequest::Version => svcrdma_decode_badvers_err::enabled(),
        BadRequest::Drop => svcrdma_decode_drop_err::enabled(),
        BadRequest::Proc => svcrdma_decode_badproc_err::enabled(),
        BadRequest::Parse => svcrdma_decode_parse_err::enabled(),
    };
    if !enabled {
        return;
    }
    let [xid, vers, credits, proc_] = header_words(msg);
    // SAFETY: Scalars only.
    unsafe {
        match why {
            BadRequest::Version => svcrdma_decode_badvers_err::emit(xid, vers, credits, proc_),
            BadRequest::Drop => svcrdma_decode_drop_err::emit(xid, vers, credits, proc_),
            BadRequest::Proc => svcrdma_decode_badproc_err::emit(xid, vers, credits, proc_),
            BadRequest::Parse => svcrdma_decode_parse_err::emit(xid, vers, credits, proc_),
        }
    }
}

/// `RDMA_ERROR`/`ERR_VERS` is sent for the call `xid` (C `svcrdma_err_vers`).
#[inline]
pub fn svcrdma_err_vers(xid: u32) {
    if svcrdma_err_vers::enabled() {
        // SAFETY: Scalars only.
        unsafe { svcrdma_err_vers::emit(xid) }
    }
}

/// `RDMA_ERROR`/`ERR_CHUNK` is sent for the call `xid` (C
/// `svcrdma_err_chunk`).
#[inline]
pub fn svcrdma_err_chunk(xid: u32) {
    if svcrdma_err_chunk::enabled() {
        // SAFETY: Scalars only.
        unsafe { svcrdma_err_chunk::emit(xid) }
    }
}

/// Which chunk RDMA operations were posted for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChunkOp {
    /// RDMA Reads of a call's Read chunks (`svcrdma_post_read_chunk`).
    Read,
    /// RDMA Writes of a result's Write chunk (`svcrdma_post_write_chunk`).
    Write,
    /// RDMA Writes of a Reply chunk (`svcrdma_post_reply_chunk`).
    Reply,
}

/// `sqecount` RDMA operations moving `length` bytes were posted for a
/// chunk (C `svcrdma_post_{read,write,reply}_chunk`).
#[inline]
pub fn svcrdma_post_chunk(op: ChunkOp, sqecount: usize, length: usize) {
    let enabled = match op {
        ChunkOp::Read => svcrdma_post_read_chunk::enabled(),
        ChunkOp::Write => svcrdma_post_write_chunk::enabled(),
        ChunkOp::Reply => svcrdma_post_reply_chunk::enabled(),
    };
    if !enabled {
        return;
    }
    let sqes = i32::try_from(sqecount).unwrap_or(i32::MAX);
    let len = field_len(length);
    // SAFETY: Scalars only.
    unsafe {
        match op {
            ChunkOp::Read => svcrdma_post_read_chunk::emit(sqes, len),
            ChunkOp::Write => svcrdma_post_write_chunk::emit(sqes, len),
            ChunkOp::Reply => svcrdma_post_reply_chunk::emit(sqes, len),
        }
    }
}

/// A Send of `length` bytes was posted, invalidating `inv_rkey` if any (C
/// `svcrdma_post_send`).
#[inline]
pub fn svcrdma_post_send(length: usize, inv_rkey: Option<u32>) {
    if svcrdma_post_send::enabled() {
        // SAFETY: Scalars only.
        unsafe { svcrdma_post_send::emit(field_len(length), inv_rkey.unwrap_or(0)) }
    }
}

/// The Reply to `xid` could not be sent (C `svcrdma_send_err`).
#[inline]
pub fn svcrdma_send_err(id: &CmId, xid: u32, err: Error) {
    if svcrdma_send_err::enabled() {
        let peer = PeerAddr::of(id);
        // SAFETY: `peer` holds a socket address for the call.
        unsafe { svcrdma_send_err::emit(peer.as_raw(), xid, err.to_errno()) }
    }
}

/// A Send or RDMA Write completed in error, `status` an `ib_wc_status` (C
/// `svcrdma_wc_send_err`, `svcrdma_wc_write_err`).
#[inline]
pub fn svcrdma_wc_send_err(status: i32) {
    if svcrdma_wc_send_err::enabled() {
        // SAFETY: Scalars only.
        unsafe { svcrdma_wc_send_err::emit(status) }
    }
}

/// An RDMA Read completed in error (C `svcrdma_wc_read_err`).
#[inline]
pub fn svcrdma_wc_read_err(status: i32) {
    if svcrdma_wc_read_err::enabled() {
        // SAFETY: Scalars only.
        unsafe { svcrdma_wc_read_err::emit(status) }
    }
}

/// A Send or Write waits for send queue room (C `svcrdma_sq_full`).
#[inline]
pub fn svcrdma_sq_full(avail: u32) {
    if svcrdma_sq_full::enabled() {
        // SAFETY: Scalars only.
        unsafe { svcrdma_sq_full::emit(avail) }
    }
}

/// A Send or Write that waited tries again (C `svcrdma_sq_retry`).
#[inline]
pub fn svcrdma_sq_retry(avail: u32) {
    if svcrdma_sq_retry::enabled() {
        // SAFETY: Scalars only.
        unsafe { svcrdma_sq_retry::emit(avail) }
    }
}
