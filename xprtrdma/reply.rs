// SPDX-License-Identifier: GPL-2.0

//! Receiving replies (C `rpc_rdma.c`, `rpcrdma_reply_handler`): the
//! Receive completion, decoding, credits, backchannel Calls, placing the
//! reply in the request's buffer and handing it to invalidation.

use super::backchannel::is_call;
use super::conn::{Conn, Offered, Pending, ReqState};
use super::stats::bump;
use super::stats::{add, add_some};
use crate::proto::decode::decode_reply;
use crate::proto::msg::{Body, DecodeError, ErrorBody, Header};
use crate::proto::reply_fast::decode_reply_fast;
use crate::rust::module::trace::{self, ReplyError};
use crate::rust::rdma::recv_ring::{RecvRing, RecvRingOwner};
use crate::rust::rdma::ring_owner::impl_ring_in;
use crate::rust::rdma::verbs::{Endpoint, WorkCompletion};
use crate::rust::sunrpc::xprt_reply::ReplyRqst;
use kernel::prelude::*;
use kernel::sync::atomic::Relaxed;
use kernel::sync::ArcBorrow;

/// The client's Receives (C `rpcrdma_rep`): a reply is decoded where the
/// device put it, its bytes copied once into the request's receive buffer,
/// and the Receive posted again only after that, with seven others (C
/// `rpcrdma_post_recvs` posts its batch as one chain). The `EXTRA_RECVS`
/// posted beyond the credit limit cover those waiting for their batch, so
/// the server never finds the receive queue short.
impl RecvRingOwner for Conn {
    // `CACHED`: the connection's strategy is `memreg=cache`, whose reply
    // handler is compiled apart (its release, in the reply's lock section,
    // would otherwise be code in the other strategies' handler, which costs
    // their replies even where it does not run: kcount, fmr's 4 KiB READ
    // reply 415 -> 425 with it out of line, 432 cold). Out of line, as
    // one function per Receive completion.
    #[inline(never)]
    fn received<const CACHED: bool>(
        this: ArcBorrow<'_, Self>,
        bytes: &[u8],
        inv_rkey: Option<u32>,
    ) -> bool {
        // Of a reply's handling only the invalidation (`Conn::finish`) and
        // a backchannel Call allocate: each runs in a `NoIoScope` of its
        // own, so the usual reply pays for none.
        this.handle_reply::<CACHED>(this, bytes, inv_rkey);
        !this.closing.load(Relaxed)
    }

    fn failed(&self, wc: &WorkCompletion) {
        if !wc.is_flush() {
            crate::pr_warn_ratelimited!("receive failed: status {}\n", wc.status);
        }
        if !self.closing.load(Relaxed) {
            self.xprt.force_disconnect();
        }
    }

    fn repost_failed(&self, e: Error) {
        if !self.closing.load(Relaxed) {
            crate::pr_warn_ratelimited!("a Receive lost ({:?}): reconnecting\n", e);
            self.xprt.force_disconnect();
        }
    }

    fn endpoint(&self) -> &Endpoint {
        &self.ep
    }
}

impl_ring_in!(Conn, recv_ring: RecvRing<Conn>);

/// Receives given back to the queue pair with one doorbell.
pub(super) const RECV_REPOST_BATCH: u32 = 8;

impl Conn {
    /// Takes what the request of a reply registered, from the request's
    /// own state.
    fn take_pending_of(&self, rqst: &ReplyRqst) -> Option<Pending> {
        rqst.state::<ReqState>().and_then(ReqState::take)
    }

    /// Whether a reply's chunk claims more than the request offered: the
    /// server would have written past our registration, or the length is
    /// a lie that would make sunrpc read pages nobody wrote.
    #[inline]
    fn overrun(&self, xid: u32, what: &str, claimed: u32, offered: u32) -> bool {
        if claimed <= offered {
            return false;
        }
        self.report_overrun(xid, what, claimed, offered);
        true
    }

    /// Counts and reports a chunk [`Self::overrun`] found: out of line,
    /// so that the check is not a call.
    #[cold]
    fn report_overrun(&self, xid: u32, what: &str, claimed: u32, offered: u32) {
        bump(&self.stats.bad_reply_count);
        crate::pr_warn_ratelimited!(
            "reply xid {:#x}: {} chunk of {} bytes, but {} were registered\n",
            xid,
            what,
            claimed,
            offered
        );
    }

    /// Handles a reply of `bytes`; `CACHED`: the connection's strategy is
    /// `memreg=cache` ([`Self::release_in_place`]).
    fn handle_reply<const CACHED: bool>(
        &self,
        this: ArcBorrow<'_, Self>,
        bytes: &[u8],
        inv_rkey: Option<u32>,
    ) {
        self.xprt.data_seen();
        // The common shapes in one pass, anything else by the general
        // decoder. Borrowed from the result, not moved out of it: the
        // header with its chunk lists is not copied again.
        let decoded = match decode_reply_fast(bytes, &self.limits) {
            Some(h) => Ok(h),
            None => decode_reply(bytes, &self.limits),
        };
        let hdr = match &decoded {
            Ok(h) => h,
            Err(e) => {
                let e = *e;
                bump(&self.stats.bad_reply_count);
                crate::pr_warn_ratelimited!("malformed reply ({:?}), {} bytes\n", e, bytes.len());
                let why = match e {
                    DecodeError::BadVersion(_) => ReplyError::Version,
                    DecodeError::Truncated => ReplyError::Short,
                    _ => ReplyError::Header,
                };
                trace::xprtrdma_reply_err(&self.xprt, why, bytes);
                // Fail the RPC if its xid can be read, so it is not left waiting.
                if let Some(x) = bytes.get(..4) {
                    let xid = u32::from_be_bytes([x[0], x[1], x[2], x[3]]);
                    if let Some(rqst) = self.xprt.lookup(xid) {
                        let pending = self.take_pending_of(&rqst);
                        self.finish(this, rqst, pending, EIO.to_errno(), inv_rkey);
                    }
                }
                return;
            }
        };
        // A reverse-direction (backchannel) Call: never matched against
        // our own xids, and its credit field is the server's backchannel
        // window, not a grant for our Calls.
        if let Body::Msg { payload, .. } = &hdr.body {
            if is_call(payload) {
                self.bc_call(payload);
                return;
            }
        }
        // A reply that answers no request of ours grants nothing: its
        // credits are taken only once its xid is found (as C's
        // rpcrdma_reply_handler), so a stray or forged reply cannot move
        // the congestion window.
        let credits = hdr.credits.clamp(1, self.settings.max_requests);
        // The request is found, its reply placed and, unless registrations
        // are left to invalidate, the RPC completed in one `queue_lock`
        // section (C takes it twice, to pin and to complete).
        let found = self.xprt.with_reply_rqst(hdr.xid, |rqst| {
            let changed = self.credits.xchg(credits, Relaxed) != credits;
            trace::xprtrdma_reply(&rqst, hdr.xid, credits);
            // What the request registered, worked on where it is: the
            // offer the chunk checks below read, and the MR the server
            // invalidated, taken out; the rest, if any, is taken out for
            // the invalidation.
            // A call without chunks (most metadata) kept nothing: the
            // request's lock is not taken.
            let (offered, mr, left) = match rqst.state::<ReqState>() {
                Some(state) if state.may_keep() => {
                    let ((offered, mr), left) = state.reply_in_place(|p, spare| {
                        self.release_in_place::<CACHED>(&rqst, p, spare, inv_rkey)
                    });
                    (offered, mr, if left { state.take() } else { None })
                }
                _ => (Offered::default(), None, None),
            };
            let status = self.reply_status(&rqst, hdr, offered);
            match left {
                None => {
                    rqst.complete(status);
                    (changed, None, mr)
                }
                Some(p) => (changed, Some((rqst.pin(), Some(p), status)), mr),
            }
        });
        let Some((changed, left, invalidated)) = found else {
            trace::xprtrdma_reply_err(&self.xprt, ReplyError::NoRequest, bytes);
            return;
        };
        if let Some(mr) = invalidated {
            self.recycle_one(mr);
        }
        if changed {
            self.xprt.update_cwnd(credits);
        }
        if let Some((rqst, pending, status)) = left {
            self.finish(this, rqst, pending, status, inv_rkey);
        }
    }

    /// The status a reply completes its RPC with (its length, or a
    /// negative errno), its inline part placed in the request's receive
    /// buffer; `offered` is what the request registered for the server to
    /// write.
    // Inlined into the reply handler, as `take_remotely_invalidated` and
    // `ReplyRqst::fill_reply` are: a reply's steps without a call each.
    #[inline(always)]
    fn reply_status(&self, rqst: &ReplyRqst, hdr: &Header<'_>, offered: Offered) -> i32 {
        match &hdr.body {
            Body::Msg { chunks, payload } => {
                // Summed by the decoder: the list is not walked again.
                let written = chunks.write.total_length();
                if written > 0 && self.overrun(hdr.xid, "Write", written, offered.write) {
                    return EIO.to_errno();
                }
                add(&self.stats.total_rdma_reply, u64::from(written));
                match rqst.fill_reply(payload, written) {
                    Ok(filled) => {
                        // C's `rpcrdma_inline_fixup` counts the bytes it
                        // copies from the Receive buffer into the page list;
                        // head and tail are pointed at, not copied, in C.
                        add_some(&self.stats.fixup_copy_count, u64::from(filled.page_bytes));
                        i32::try_from(filled.len).unwrap_or(EIO.to_errno())
                    }
                    Err(_) => {
                        bump(&self.stats.bad_reply_count);
                        EIO.to_errno()
                    }
                }
            }
            Body::NoMsg { chunks, .. } => match chunks.reply {
                Some(r) if self.overrun(hdr.xid, "Reply", r.total_length(), offered.reply) => {
                    EIO.to_errno()
                }
                Some(r) => {
                    add(&self.stats.total_rdma_reply, u64::from(r.total_length()));
                    i32::try_from(rqst.reply_chunk_len(r.total_length())).unwrap_or(EIO.to_errno())
                }
                None => {
                    bump(&self.stats.bad_reply_count);
                    EIO.to_errno()
                }
            },
            Body::Error(e) => {
                match e {
                    ErrorBody::Vers { low, high } => trace::xprtrdma_err_vers(rqst, *low, *high),
                    ErrorBody::Chunk => trace::xprtrdma_err_chunk(rqst),
                    ErrorBody::Other(code) => trace::xprtrdma_err_unrecognized(rqst, *code),
                }
                bump(&self.stats.bad_reply_count);
                crate::pr_warn_ratelimited!(
                    "server answered xid {:#x} with RDMA_ERROR {:?}\n",
                    hdr.xid,
                    e
                );
                EIO.to_errno()
            }
            _ => {
                bump(&self.stats.bad_reply_count);
                EIO.to_errno()
            }
        }
    }
}
