// SPDX-License-Identifier: GPL-2.0

//! Reverse-direction RPC (RFC 8167) decisions shared by both sides: what
//! is a reverse-direction Call, and how large a backchannel message may be.

/// Size of an `RDMA_MSG` header without chunks (C `RPCRDMA_HDRLEN_MIN`).
pub const HDRLEN_MIN: u32 = 28;

/// Is this `RDMA_MSG` payload (an RPC message, xid first) a Call? Its
/// message type word after the xid is CALL (0); replies carry REPLY (1).
/// A peer's forward-direction Reply is never a Call, so a client uses this
/// to tell reverse-direction Calls from replies to its own Calls, and a
/// server to tell backchannel Replies from Calls.
pub fn is_call(payload: &[u8]) -> bool {
    payload.get(4..8) == Some(&[0, 0, 0, 0])
}

/// The largest backchannel RPC message: it goes inline in both directions
/// and fits one page (C `xprt_rdma_bc_maxpayload`).
pub fn max_payload(inline_send: u32, inline_recv: u32, page_size: u32) -> u32 {
    inline_send
        .min(inline_recv)
        .min(page_size)
        .saturating_sub(HDRLEN_MIN)
}
