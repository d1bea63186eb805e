// SPDX-License-Identifier: GPL-2.0

//! Reverse-direction RPC (the NFSv4.1+ backchannel) on the client, as
//! `net/sunrpc/xprtrdma/backchannel.c` does it: the server sends callback
//! Calls (CB_NULL, CB_SEQUENCE + CB_RECALL, ...) as `RDMA_MSG` messages on
//! the forward connection; the client hands each to the NFS callback
//! service and sends the Reply inline, without chunks.
//!
//! The rpc_rqst bookkeeping (a bounded set of callback slots, queueing to
//! `xprt->bc_serv`) lives in `rust/sunrpc/xprt_bc.rs`; this file decides what
//! is a Call, bounds it, and marshals the Reply.

use super::conn::Conn;
use super::stats::bump;
use crate::proto::backchannel::encode_header;
pub(super) use crate::proto::backchannel::{is_call, max_payload};
use crate::rust::kext::memalloc::NoIoScope;
use crate::rust::rdma::send_ring::SendRingHead;
use crate::rust::sunrpc::xprt::RpcRqst;
use kernel::prelude::*;
use kernel::sync::atomic::{Atomic, Relaxed};

/// Callback slots per transport (C `RPCRDMA_BACKWARD_WRS >> 1`): the
/// transport's `XprtOps::BC_SLOTS`, which the request pool
/// (`rust/sunrpc/xprt_bc.rs`) enforces.
pub(super) const BC_SLOTS: u32 = 16;

/// Receives posted for reverse-direction Calls beyond the forward credits
/// (C `RPCRDMA_BACKWARD_WRS`): a Call may arrive while every forward
/// Receive waits for a reply.
pub(super) const BC_RECVS: u32 = 2 * BC_SLOTS;

/// Module-wide backchannel counters (debugfs `client_backchannel`).
pub(super) struct BcCounters {
    /// Calls handed to the callback service.
    pub(super) calls: Atomic<u64>,
    /// Replies sent.
    pub(super) replies: Atomic<u64>,
    /// Calls that found every slot busy (the connection is reset, as C does).
    pub(super) overflows: Atomic<u64>,
    /// Calls dropped as malformed (shorter than an RPC header, longer
    /// than a slot).
    pub(super) malformed: Atomic<u64>,
}

pub(super) static BC: BcCounters = BcCounters {
    calls: Atomic::new(0),
    replies: Atomic::new(0),
    overflows: Atomic::new(0),
    malformed: Atomic::new(0),
};

/// Writes the debugfs view.
pub(super) fn show(f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
    writeln!(f, "calls replies overflows malformed")?;
    writeln!(
        f,
        "{} {} {} {}",
        BC.calls.load(Relaxed),
        BC.replies.load(Relaxed),
        BC.overflows.load(Relaxed),
        BC.malformed.load(Relaxed)
    )
}

impl Conn {
    /// A reverse-direction Call arrived (`payload`: the RPC message).
    pub(super) fn bc_call(&self, payload: &[u8]) {
        // Completion context: nothing here may wait on reclaim (a slot is
        // allocated without reclaim anyway).
        let _noio = NoIoScope::new();
        match self.xprt().bc_receive_call(payload) {
            Ok(()) => bump(&BC.calls),
            Err(e) if e == ENOBUFS => {
                // Every slot busy, or no memory for a new one (allocated
                // here, in completion context, without reclaim). C resets
                // the connection too: the server then retries on a fresh
                // one, after its slots were released.
                bump(&BC.overflows);
                crate::pr_warn_ratelimited!(
                    "backchannel overflow: more than {} callbacks in flight, or no memory for one; reconnecting\n",
                    BC_SLOTS
                );
                self.xprt().force_disconnect();
            }
            Err(_) => {
                bump(&BC.malformed);
                crate::pr_warn_ratelimited!(
                    "dropped a malformed backchannel call of {} bytes\n",
                    payload.len()
                );
            }
        }
    }

    /// Sends the Reply to a reverse-direction Call: an `RDMA_MSG` header
    /// without chunks, then the RPC Reply, inline.
    pub(super) fn bc_send_reply(
        &self,
        head: &mut SendRingHead<Conn>,
        rqst: &RpcRqst<'_>,
    ) -> Result {
        let info = rqst.info();
        let len = info.snd_len;
        // A full send queue: sunrpc retries the reply after a delay.
        self.reserve_send_slot()?;
        let mut ctxt = match self.send_ctxt(head, 1) {
            Ok(ctxt) => ctxt,
            Err(e) => {
                self.unreserve_send_slot();
                return Err(e);
            }
        };
        let limit = self.inline_send() as usize;
        let filled = ctxt.fill(limit, |out| {
            let hlen = encode_header(info.xid, BC_SLOTS, out).map_err(|_| EIO)?;
            let end = hlen.checked_add(len as usize).ok_or(EIO)?;
            let Some(dst) = out.get_mut(hlen..end) else {
                crate::pr_warn_ratelimited!(
                    "backchannel reply xid {:#x} of {} bytes exceeds the inline size {}\n",
                    info.xid,
                    len,
                    self.inline_send()
                );
                return Err(EIO);
            };
            rqst.read(0, dst)?;
            Ok((end, 0))
        });
        if let Err(e) = filled {
            self.unreserve_send_slot();
            return Err(e);
        }
        rqst.mark_sent();
        // Asks for its completion: a reply is rare, and its context should
        // not wait for the next call's.
        if ctxt.post(self.ep(), true).is_err() {
            self.unreserve_send_slot();
            return Err(ENOTCONN);
        }
        bump(&BC.replies);
        Ok(())
    }
}
