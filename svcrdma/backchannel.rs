// SPDX-License-Identifier: GPL-2.0

//! Backchannel Calls to the client (C `svc_rdma_backchannel.c`): nfsd's
//! callbacks go out as `RDMA_MSG` with empty chunk lists, always inline.
//! Replies to them arrive as Receives and are told apart in `recvfrom`.

use super::conn::{usize_of, Conn};
use super::stats::{stat_add, Stat};
use crate::proto::backchannel::{encode_header, HDRLEN_MIN};
use crate::rust::sunrpc::svc::BcCall;
use kernel::alloc::KVec;
use kernel::prelude::*;

/// Backchannel requests the server may have outstanding (C
/// `RPCRDMA_MAX_BC_REQUESTS`), advertised in backchannel Calls.
const BC_CREDITS: u32 = 2;

impl Conn {
    /// Sends a backchannel Call (C `rpcrdma_bc_send_request`): an
    /// `RDMA_MSG` with empty chunk lists, always inline.
    pub(super) fn bc_send(&self, call: &BcCall) -> Result {
        let s = &self.shared;
        let len = usize_of(call.len())?;
        let total = len.checked_add(HDRLEN_MIN as usize).ok_or(EINVAL)?;
        if total > usize_of(s.inline_send)? {
            return Err(EIO);
        }
        let mut out = KVec::from_elem(0u8, total, GFP_KERNEL)?;
        let hlen = encode_header(call.xid(), BC_CREDITS, &mut out).map_err(|_| EINVAL)?;
        call.read(0, out.get_mut(hlen..).ok_or(EINVAL)?)?;
        stat_add(Stat::BcCalls, 1);
        self.send_bytes(&out, None)
    }
}
