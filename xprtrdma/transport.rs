// SPDX-License-Identifier: GPL-2.0

//! The client transport as sunrpc sees it: one [`Client`] per `rpc_xprt`,
//! holding at most one live connection.

use super::conn::Conn;
use super::reg::{counters, Strategy};
use crate::config::Config;
use crate::rdma::memalloc::NoIoScope;
use crate::rdma::xprt::{Rqst, Xprt, XprtOps, XprtStats};
use kernel::new_mutex;
use kernel::prelude::*;
use kernel::sync::atomic::{Atomic, Relaxed};
use kernel::sync::{Arc, Mutex};

static MAX_REQUESTS: Atomic<u32> = Atomic::new(128);
static INLINE_READ: Atomic<u32> = Atomic::new(4096);
static INLINE_WRITE: Atomic<u32> = Atomic::new(4096);
static POOL_SIZE: Atomic<u32> = Atomic::new(512);
static PAGES_PER_MR: Atomic<u32> = Atomic::new(0);
static DIRTY_WATERMARK: Atomic<u32> = Atomic::new(0);
static PHYSICAL: Atomic<bool> = Atomic::new(false);

/// Largest payload of the "physical" strategy: one segment per page and
/// at most 16 segments per chunk (two for misaligned head and tail).
const PHYSICAL_MAX_PAYLOAD: u32 = 14 * 4096;

/// Records the module's settings for transports created later.
pub(super) fn set_config(cfg: &Config, strategy: Strategy) {
    MAX_REQUESTS.store(cfg.max_requests, Relaxed);
    INLINE_READ.store(cfg.max_inline_read, Relaxed);
    INLINE_WRITE.store(cfg.max_inline_write, Relaxed);
    POOL_SIZE.store(cfg.fmr_pool_size, Relaxed);
    PAGES_PER_MR.store(cfg.fmr_pages_per_mr, Relaxed);
    DIRTY_WATERMARK.store(cfg.fmr_dirty_watermark, Relaxed);
    PHYSICAL.store(strategy == Strategy::Physical, Relaxed);
}

/// Settings of one transport, fixed at setup.
#[derive(Clone, Copy)]
pub(super) struct Settings {
    pub(super) max_requests: u32,
    pub(super) inline_read: u32,
    pub(super) inline_write: u32,
    pub(super) strategy: Strategy,
    pub(super) pool_size: u32,
    pub(super) pages_per_mr: u32,
    pub(super) dirty_watermark: u32,
}

/// Counters of one transport (mountstats and debugging).
pub(super) struct Stats {
    pub(super) read_chunk_count: Atomic<u64>,
    pub(super) write_chunk_count: Atomic<u64>,
    pub(super) reply_chunk_count: Atomic<u64>,
    pub(super) total_rdma_request: Atomic<u64>,
    pub(super) total_rdma_reply: Atomic<u64>,
    pub(super) pullup_copy_count: Atomic<u64>,
    pub(super) fixup_copy_count: Atomic<u64>,
    pub(super) failed_marshal_count: Atomic<u64>,
    pub(super) bad_reply_count: Atomic<u64>,
    pub(super) nomsg_call_count: Atomic<u64>,
    pub(super) mrs_allocated: Atomic<u64>,
    pub(super) local_inv_needed: Atomic<u64>,
    pub(super) remote_inv: Atomic<u64>,
    pub(super) mr_pool_empty: Atomic<u64>,
    /// Sends that found every pooled Send buffer in flight.
    pub(super) empty_send_pool: Atomic<u64>,
}

impl Stats {
    fn new() -> Self {
        let z = || Atomic::new(0);
        Self {
            read_chunk_count: z(),
            write_chunk_count: z(),
            reply_chunk_count: z(),
            total_rdma_request: z(),
            total_rdma_reply: z(),
            pullup_copy_count: z(),
            fixup_copy_count: z(),
            failed_marshal_count: z(),
            bad_reply_count: z(),
            nomsg_call_count: z(),
            mrs_allocated: z(),
            local_inv_needed: z(),
            remote_inv: z(),
            mr_pool_empty: z(),
            empty_send_pool: z(),
        }
    }
}

/// Adds one to a counter.
pub(super) fn bump(c: &Atomic<u64>) {
    c.add(1, Relaxed);
}

/// The state of one client transport.
#[pin_data]
struct Inner {
    xprt: Xprt,
    settings: Settings,
    stats: Arc<Stats>,
    #[pin]
    conn: Mutex<Option<Arc<Conn>>>,
}

/// One client transport (`struct rpc_xprt` of class "rdma").
pub(crate) struct Client {
    inner: Arc<Inner>,
}

impl Client {
    fn conn(&self) -> Option<Arc<Conn>> {
        self.inner.conn.lock().clone()
    }
}

impl XprtOps for Client {
    fn setup(xprt: Xprt) -> Result<Self> {
        let strategy = if PHYSICAL.load(Relaxed) {
            Strategy::Physical
        } else {
            Strategy::Fmr
        };
        let settings = Settings {
            max_requests: MAX_REQUESTS.load(Relaxed),
            inline_read: INLINE_READ.load(Relaxed),
            inline_write: INLINE_WRITE.load(Relaxed),
            strategy,
            pool_size: POOL_SIZE.load(Relaxed),
            pages_per_mr: PAGES_PER_MR.load(Relaxed),
            dirty_watermark: DIRTY_WATERMARK.load(Relaxed),
        };
        if strategy == Strategy::Physical {
            xprt.set_max_payload(PHYSICAL_MAX_PAYLOAD);
        }
        counters(strategy).transports.add(1, Relaxed);
        let stats = Arc::new(Stats::new(), GFP_KERNEL)?;
        let inner = Arc::pin_init(
            pin_init!(Inner {
                xprt,
                settings,
                stats,
                conn <- new_mutex!(None, "rpcrdma_rs::xprt::conn"),
            }),
            GFP_KERNEL,
        )?;
        Ok(Self { inner })
    }

    fn connect(&self) -> Result {
        self.close();
        let conn = Conn::connect(
            self.inner.xprt,
            self.inner.settings,
            self.inner.stats.clone(),
        )
        .map_err(|e| {
            crate::pr_warn_ratelimited!("connect failed: error {}\n", e.to_errno());
            transient_as_not_connected(e)
        })?;
        *self.inner.conn.lock() = Some(conn);
        Ok(())
    }

    fn send_request(&self, rqst: &Rqst<'_>) -> Result {
        let conn = self.conn().ok_or(ENOTCONN)?;
        conn.send(&conn, rqst)
    }

    fn close(&self) {
        let Some(conn) = self.conn() else {
            return;
        };
        // Drain first, hide the connection afterwards: a `buf_free` that
        // races with this close must still find the connection, so that it
        // waits for the drain (which revokes the request's registrations)
        // before its buffers go back (C `rpcrdma_xprt_disconnect` drains
        // first, too). No lock is held while draining: completion handlers
        // may need the transport.
        conn.shutdown();
        let mut current = self.inner.conn.lock();
        if current.as_ref().is_some_and(|c| Arc::ptr_eq(c, &conn)) {
            *current = None;
        }
    }

    fn inject_disconnect(&self) {
        if let Some(conn) = self.conn() {
            conn.inject_disconnect();
        }
    }

    fn bc_send_reply(&self, rqst: &Rqst<'_>) -> Result {
        let conn = self.conn().ok_or(ENOTCONN)?;
        conn.bc_send_reply(&conn, rqst)
    }

    fn buf_free(&self, rqst: &Rqst<'_>) {
        if let Some(conn) = self.conn() {
            conn.release_request(rqst.key());
        }
    }

    fn flush(&self) {
        // Runs on a WQ_MEM_RECLAIM queue and frees MRs writeback may be
        // waiting for: no reclaim from here.
        let _noio = NoIoScope::new();
        if let Some(conn) = self.conn() {
            conn.flush_timer(&conn);
        }
    }

    fn stats(&self) -> XprtStats {
        let s = &self.inner.stats;
        let g = |c: &Atomic<u64>| c.load(Relaxed);
        XprtStats {
            read_chunk_count: g(&s.read_chunk_count),
            write_chunk_count: g(&s.write_chunk_count),
            reply_chunk_count: g(&s.reply_chunk_count),
            total_rdma_request: g(&s.total_rdma_request),
            total_rdma_reply: g(&s.total_rdma_reply),
            pullup_copy_count: g(&s.pullup_copy_count),
            fixup_copy_count: g(&s.fixup_copy_count),
            hardway_register_count: 0,
            failed_marshal_count: g(&s.failed_marshal_count),
            bad_reply_count: g(&s.bad_reply_count),
            nomsg_call_count: g(&s.nomsg_call_count),
            mrs_recycled: 0,
            mrs_orphaned: 0,
            mrs_allocated: g(&s.mrs_allocated),
            local_inv_needed: g(&s.local_inv_needed),
            // C counts Sends that found no send context free.
            empty_sendctx_q: g(&s.empty_send_pool),
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.close();
        counters(self.inner.settings.strategy)
            .transports
            .add(-1, Relaxed);
    }
}

/// What the connect worker reports to the waiting RPCs for a failed connect.
///
/// sunrpc's `call_connect_status` retries a task after -ENOTCONN (and the
/// like) but fails the RPC on any errno it does not list: a memory shortage
/// while building the connection would reach the application (an NFS
/// `open()` returning ENOMEM under fault injection). Shortages pass, so they
/// become -ENOTCONN: the task waits and the connect worker tries again.
fn transient_as_not_connected(e: Error) -> Error {
    if e == ENOMEM || e == ENOBUFS || e == EAGAIN {
        ENOTCONN
    } else {
        e
    }
}
