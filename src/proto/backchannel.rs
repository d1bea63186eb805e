// SPDX-License-Identifier: GPL-2.0

//! Reverse-direction RPC (RFC 8167) shared by both sides: the transport
//! header of a backchannel message, what is a reverse-direction Call or
//! Reply, and how large a backchannel message may be.

use super::encode::{self, BodyRef, ChunkListsRef, EncodeError, HeaderRef};
use super::msg::{ChunkLists, RPCRDMA_VERSION};

/// Size of an `RDMA_MSG` header without chunks (C `RPCRDMA_HDRLEN_MIN`),
/// the header of every backchannel message.
pub const HDRLEN_MIN: u32 = super::msg::HDRLEN_MIN as u32;

/// Encodes the transport header of a backchannel Call or Reply into
/// `out`: `RDMA_MSG` with empty chunk lists (backchannel messages always
/// go inline), transport XID `xid` (the RPC message's own) and `credits`
/// (the sender's backchannel window). Returns its length,
/// [`HDRLEN_MIN`].
pub fn encode_header(xid: u32, credits: u32, out: &mut [u8]) -> Result<usize, EncodeError> {
    let hdr = HeaderRef {
        xid,
        vers: RPCRDMA_VERSION,
        credits,
        body: BodyRef::Msg(ChunkListsRef {
            read: &[],
            write: &[],
            reply: None,
        }),
    };
    encode::encode_header(&hdr, out)
}

/// Is this `RDMA_MSG` payload (an RPC message, xid first) a Call? Its
/// message type word after the xid is CALL (0); replies carry REPLY (1).
/// A peer's forward-direction Reply is never a Call, so the client uses
/// this to tell reverse-direction Calls from replies to its own Calls (the
/// server uses [`is_backchannel_reply`], which also checks the XID).
pub fn is_call(payload: &[u8]) -> bool {
    payload.get(4..8) == Some(&[0, 0, 0, 0])
}

/// Is this `RDMA_MSG` (transport XID `xid`, chunk lists `lists`, inline RPC
/// message `payload`) a Reply to one of the server's backchannel Calls (C
/// `svc_rdma_is_reverse_direction_reply`)? Backchannel messages carry no
/// chunks, and the RPC message repeats the transport XID and has message
/// type REPLY (1).
pub fn is_backchannel_reply(xid: u32, lists: &ChunkLists<'_>, payload: &[u8]) -> bool {
    let word = |i: usize| -> Option<u32> {
        let at = i.checked_mul(4)?;
        let b = payload.get(at..at.checked_add(4)?)?;
        <[u8; 4]>::try_from(b).ok().map(u32::from_be_bytes)
    };
    lists.read.is_empty()
        && lists.write.is_empty()
        && lists.reply.is_none()
        && word(0) == Some(xid)
        && word(1) == Some(1)
}

/// The largest backchannel RPC message: it goes inline in both directions
/// and fits one page (C `xprt_rdma_bc_maxpayload`).
pub fn max_payload(inline_send: u32, inline_recv: u32, page_size: u32) -> u32 {
    inline_send
        .min(inline_recv)
        .min(page_size)
        .saturating_sub(HDRLEN_MIN)
}
