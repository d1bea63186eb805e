// SPDX-License-Identifier: GPL-2.0

//! Credit accounting (RFC 8166 §3.3.1) for both sides.
//!
//! Client: the credit grant in each reply sets the congestion window, as
//! in C `rpcrdma_reply_handler()`/`rpcrdma_update_cwnd()`: the wire value
//! is clamped to `[1, max_requests]`, the window is `credits <<
//! RPC_CWNDSHIFT`, and every (re)connect starts again from one credit
//! (`rpcrdma_reset_cwnd()`). [`ClientCredits`] also does the slot
//! accounting of the generic RPC client (`__xprt_get_cong()`/
//! `__xprt_put_cong()`): each request in flight holds `RPC_CWNDSCALE`.
//!
//! Server: C grants a fixed `max_requests` in every reply and ignores the
//! client's request. [`ServerCredits`] does that by default and can also
//! cap the grant by the Receives actually posted, so a client is never
//! invited to send more than the server can receive.

/// Shift from credits to congestion window units (C `RPC_CWNDSHIFT`).
pub const RPC_CWNDSHIFT: u32 = 8;

/// Window units one request occupies (C `RPC_CWNDSCALE`).
pub const RPC_CWNDSCALE: u32 = 1 << RPC_CWNDSHIFT;

/// Fewest slots the Linux client allows (C `RPCRDMA_MIN_SLOT_TABLE`).
pub const MIN_SLOT_TABLE: u32 = 4;

/// Default slots (C `RPCRDMA_DEF_SLOT_TABLE`).
pub const DEF_SLOT_TABLE: u32 = 128;

/// Most slots (C `RPCRDMA_MAX_SLOT_TABLE`).
pub const MAX_SLOT_TABLE: u32 = 16384;

/// Client-side credit state and congestion window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientCredits {
    max_requests: u32,
    credits: u32,
    cong: u32,
}

impl ClientCredits {
    /// State for a transport with `max_requests` slots, before any reply:
    /// one credit. `max_requests` is clamped to
    /// `[MIN_SLOT_TABLE, MAX_SLOT_TABLE]`, so the window cannot overflow.
    pub fn new(max_requests: u32) -> Self {
        Self {
            max_requests: max_requests.clamp(MIN_SLOT_TABLE, MAX_SLOT_TABLE),
            credits: 1,
            cong: 0,
        }
    }

    /// The credits a connection with `slots` slots asks for on a device,
    /// or `None` when the device cannot hold [`MIN_SLOT_TABLE`]: every
    /// credit needs a Receive posted before the server may reply, so the
    /// credits and `extra_recvs` more Receives (held back for a batched
    /// repost, or for backchannel Calls) must fit in the receive queue
    /// (`max_qp_wr`) and its completion queue (`max_cqe`, less the drain's
    /// entry). C `frwr_query_device` lowers `re_max_requests` likewise; the
    /// slot table keeps its size, and the window follows the credits.
    pub fn fit_to_device(
        slots: u32,
        extra_recvs: u32,
        max_qp_wr: u32,
        max_cqe: u32,
    ) -> Option<u32> {
        let room = max_qp_wr
            .min(max_cqe.saturating_sub(1))
            .saturating_sub(extra_recvs);
        (room >= MIN_SLOT_TABLE).then_some(slots.min(room))
    }

    /// The value the client puts in the credits field of each Call (C
    /// `rb_max_requests`).
    pub const fn requested(&self) -> u32 {
        self.max_requests
    }

    /// Current credits.
    pub const fn credits(&self) -> u32 {
        self.credits
    }

    /// Congestion window (C `xprt->cwnd`).
    pub const fn cwnd(&self) -> u32 {
        // credits <= MAX_SLOT_TABLE (2^14), so the shift cannot overflow.
        self.credits << RPC_CWNDSHIFT
    }

    /// Window units in use (C `xprt->cong`).
    pub const fn cong(&self) -> u32 {
        self.cong
    }

    /// Requests in flight.
    pub const fn in_flight(&self) -> u32 {
        self.cong >> RPC_CWNDSHIFT
    }

    /// Sanitizes a credit value from the wire: 0 becomes 1 (so the client
    /// cannot deadlock), anything above `max_requests` is capped.
    pub fn sanitize(&self, wire: u32) -> u32 {
        wire.clamp(1, self.max_requests)
    }

    /// Applies the grant of a matched reply and returns whether the window
    /// changed. Replies that fail version checks must not be applied (C
    /// keeps the old credits then).
    pub fn update(&mut self, wire: u32) -> bool {
        let grant = self.sanitize(wire);
        let changed = grant != self.credits;
        self.credits = grant;
        changed
    }

    /// Resets for a new connection: one credit, nothing in flight.
    pub fn reset(&mut self) {
        self.credits = 1;
        self.cong = 0;
    }

    /// Whether the window is full (C `RPCXPRT_CONGESTED`).
    pub const fn congested(&self) -> bool {
        self.cong >= self.cwnd()
    }

    /// Takes a window slot for a request, if the window allows (C
    /// `__xprt_get_cong()`).
    pub fn try_get(&mut self) -> bool {
        if self.congested() {
            return false;
        }
        match self.cong.checked_add(RPC_CWNDSCALE) {
            Some(c) => {
                self.cong = c;
                true
            }
            None => false,
        }
    }

    /// Returns a window slot (C `__xprt_put_cong()`). Saturates so a
    /// double put cannot wrap.
    pub fn put(&mut self) {
        self.cong = self.cong.saturating_sub(RPC_CWNDSCALE);
    }

    /// Receives to keep posted after a reply (C `rpcrdma_post_recvs()`
    /// target): one per credit plus two per backchannel slot.
    pub fn receives_wanted(&self, bc_slots: u32) -> u32 {
        self.credits.saturating_add(bc_slots.saturating_mul(2))
    }
}

/// How the server chooses its grant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GrantPolicy {
    /// Always `max_requests`, like C `svc_rdma` (`sc_fc_credits`).
    Fixed,
    /// `max_requests`, but never more than the Receives currently posted
    /// (and at least one, so the client can make progress).
    BoundedByReceives,
}

/// Server-side credit grant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerCredits {
    max_requests: u32,
    posted_receives: u32,
    policy: GrantPolicy,
}

impl ServerCredits {
    /// Grant state for `max_requests` (at least 1).
    pub fn new(max_requests: u32, policy: GrantPolicy) -> Self {
        Self {
            max_requests: max_requests.max(1),
            posted_receives: 0,
            policy,
        }
    }

    /// Fits the server's receive queue to a device, like C
    /// `svc_rdma_accept()`: requests, backchannel requests, the receive
    /// batch and one drain WR must not exceed `max_qp_wr`. When they do, C sets
    /// `max_requests = max_qp_wr - 2` with 2 backchannel requests, a batch
    /// of 1 and the drain WR, which oversubscribes the queue by two; here
    /// the requests are cut so the total fits exactly (a deliberate fix),
    /// and the batch and backchannel requests stay what the caller uses:
    /// a receive side that holds back up to `recv_batch - 1` consumed
    /// Receives for a batched repost still has one posted per credit and
    /// backchannel request (audit finding 15: the cut used to assume a
    /// batch of 1 while the server holds back 6). What room the device has
    /// left then takes Receives for requests to hold (up to one per
    /// request and `held_max`: [`RecvQueueSizing::held_recvs`]); they are
    /// never taken from the requests.
    pub fn fit_to_device(
        max_requests: u32,
        bc_requests: u32,
        recv_batch: u32,
        held_max: u32,
        max_qp_wr: u32,
    ) -> RecvQueueSizing {
        let depth = max_requests
            .saturating_add(bc_requests)
            .saturating_add(recv_batch)
            .saturating_add(1);
        if depth <= max_qp_wr {
            // What room is left holds Receives lent to requests (C
            // allocates its receive contexts on demand instead): one per
            // credit at most, and at most what the caller can spare.
            let held_recvs = max_requests
                .min(held_max)
                .min(max_qp_wr.saturating_sub(depth));
            return RecvQueueSizing {
                max_requests,
                bc_requests,
                recv_batch,
                held_recvs,
                rq_depth: depth.saturating_add(held_recvs),
            };
        }
        // The backchannel's, the batch's and the drain's WRs besides the
        // requests (at least one).
        let besides = bc_requests.saturating_add(recv_batch).saturating_add(1);
        let max_requests = max_qp_wr.saturating_sub(besides).max(1);
        RecvQueueSizing {
            max_requests,
            bc_requests,
            recv_batch,
            held_recvs: 0,
            rq_depth: max_requests.saturating_add(besides),
        }
    }

    /// The configured maximum.
    pub const fn max_requests(&self) -> u32 {
        self.max_requests
    }

    /// Records how many Receives are posted now.
    pub fn set_posted_receives(&mut self, n: u32) {
        self.posted_receives = n;
    }

    /// The grant to put in the next reply.
    pub fn grant(&self) -> u32 {
        match self.policy {
            GrantPolicy::Fixed => self.max_requests,
            GrantPolicy::BoundedByReceives => self.max_requests.min(self.posted_receives).max(1),
        }
    }

    /// Whether a client that sent `in_flight` requests is within what it
    /// was granted (a client above it is misbehaving; C does not check).
    pub fn within_grant(&self, in_flight: u32) -> bool {
        in_flight <= self.max_requests
    }
}

/// Receive queue sizing chosen by [`ServerCredits::fit_to_device`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvQueueSizing {
    /// Forward-channel requests (the credit grant).
    pub max_requests: u32,
    /// Backchannel requests.
    pub bc_requests: u32,
    /// Receives posted per refill batch.
    pub recv_batch: u32,
    /// Receives beyond those that a request may keep from being posted
    /// again while it works on the Call in their buffer (a Call served in
    /// place): posted like the others, they keep the Receives the client
    /// may use posted while requests hold theirs. Requests hold at most
    /// this many at once; a Call received when they do is copied out of
    /// its buffer instead.
    pub held_recvs: u32,
    /// Receive queue depth: every Receive posted at once, `held_recvs`
    /// included, and one WR for draining.
    pub rq_depth: u32,
}

/// Most Sends of a client connection that share one requested completion.
pub const MAX_SEND_BATCH: u32 = 16;

/// How many of a client connection's Sends share one requested completion
/// (C `re_send_batch`: an eighth of the credits), from 1 (every Send
/// signaled) to [`MAX_SEND_BATCH`].
pub const fn send_batch(credits: u32) -> u32 {
    let b = credits >> 3;
    if b == 0 {
        1
    } else if b > MAX_SEND_BATCH {
        MAX_SEND_BATCH
    } else {
        b
    }
}
