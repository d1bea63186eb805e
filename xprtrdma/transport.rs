// SPDX-License-Identifier: GPL-2.0

//! The client transport as sunrpc sees it: one [`Client`] per `rpc_xprt`,
//! holding at most one live connection.

use super::conn::{Conn, ReqState};
use super::reg::{counters, Strategy};
use super::stats::Stats;
use super::sysctl;
use crate::config::Config;
use crate::proto::planner::physical_payload_for;
use crate::rust::kext::memalloc::NoIoScope;
use crate::rust::kext::percpu::PerCpuCount;
use crate::rust::module::trace;
use crate::rust::rdma::send_ring::SendRingHead;
use crate::rust::sunrpc::xprt::{RpcRqst, Xprt, XprtCounters, XprtLocked, XprtLockedBy};
use crate::rust::sunrpc::xprt_class::XprtOps;
use kernel::new_mutex;
use kernel::prelude::*;
use kernel::seq_file::SeqFile;
use kernel::seq_print;
use kernel::sync::atomic::Relaxed;
use kernel::sync::{Arc, Mutex, SetOnce};

/// The module's validated configuration, handed over once by
/// [`set_config`] before the class is registered. sunrpc's `setup` callback
/// carries no class-private pointer, so this is where transports find it;
/// it has no defaults of its own.
static SETTINGS: SetOnce<Settings> = SetOnce::new();

/// Hands the module's configuration to the transports created later
/// (once, before the class is registered).
pub(super) fn set_config(cfg: &Config, strategy: Strategy) -> Result {
    let settings = Settings {
        max_requests: cfg.max_requests,
        inline_read: cfg.max_inline_read,
        inline_write: cfg.max_inline_write,
        strategy,
        pool_size: cfg.fmr_pool_size,
        pages_per_mr: cfg.fmr_pages_per_mr,
        dirty_watermark: cfg.fmr_dirty_watermark,
        cache_pages: u64::from(cfg.cache_max_mb) << (20 - kernel::page::PAGE_SHIFT),
    };
    if SETTINGS.populate(settings) {
        Ok(())
    } else {
        Err(EBUSY)
    }
}

/// Settings of one transport: fixed at setup, except the inline sizes,
/// which each connection reads from the sysctls when it is made (as C).
#[derive(Clone, Copy)]
pub(super) struct Settings {
    /// The transport's slot table size: the credits each connection asks
    /// for, unless its device's receive queue holds fewer (`connect.rs`).
    pub(super) max_requests: u32,
    pub(super) inline_read: u32,
    pub(super) inline_write: u32,
    pub(super) strategy: Strategy,
    /// The `fmr_pool_size` parameter (0: 4 MRs per credit).
    pub(super) pool_size: u32,
    pub(super) pages_per_mr: u32,
    /// The `fmr_dirty_watermark` parameter; each connection keeps it below
    /// half its pool.
    pub(super) dirty_watermark: u32,
    /// `memreg=cache`: pages each connection's cache may hold.
    pub(super) cache_pages: u64,
}

/// The state of one client transport.
#[pin_data]
struct Inner {
    xprt: Xprt,
    settings: Settings,
    stats: Arc<Stats>,
    /// The connection, for what runs without the send lock (replies'
    /// `buf_free`, the flush worker, mountstats).
    #[pin]
    conn: Mutex<Option<Arc<Conn>>>,
    /// The same connection for what sunrpc runs under the transport's
    /// send lock (`XPRT_LOCKED`: send, connect, close), which sets and
    /// clears both: a send borrows it without a lock or a reference; with
    /// the head of its ring of Send contexts, which only a sender holds.
    send_conn: XprtLockedBy<Option<SendConn>>,
}

/// The connection as senders reach it: the connection, and the head of
/// its Send ring.
struct SendConn {
    conn: Arc<Conn>,
    head: SendRingHead<Conn>,
}

/// One client transport (`struct rpc_xprt` of class "rdma").
pub(crate) struct Client {
    inner: Arc<Inner>,
}

impl Client {
    /// What a released request still keeps (a reply that never came, or
    /// one whose invalidation was left): out of line, so that `buf_free`
    /// of the usual request, which keeps nothing, is a check and a return.
    #[inline(never)]
    fn release_kept(&self, state: &ReqState) {
        // The connection first, then what the request keeps: a request
        // being released is not sent again, so what it keeps was
        // registered on the connection read here. An older one's shutdown,
        // which ends before its successor is published, took everything
        // registered on it; taken the other way round, a close and a
        // reconnect in between would hand one connection's MRs to the next.
        let conn = self.conn();
        let Some(p) = state.take() else {
            return;
        };
        match conn {
            Some(conn) => conn.release_request(conn.as_arc_borrow(), p),
            // Closed: the shutdown's drain revoked them.
            None => drop(p),
        }
    }

    fn conn(&self) -> Option<Arc<Conn>> {
        self.inner.conn.lock().clone()
    }
}

#[vtable]
impl XprtOps for Client {
    type Req = ReqState;

    const BC_SLOTS: u32 = super::backchannel::BC_SLOTS;

    fn new_req() -> impl PinInit<ReqState, Error> {
        ReqState::new()
    }

    fn max_slots() -> u32 {
        // `rdma_slot_table_entries` as it is now (C `xprt_setup_rdma`),
        // which starts at `max_requests`.
        sysctl::slot_table_entries()
    }

    fn setup(xprt: Xprt) -> Result<Self> {
        // Set before the class was registered, so before any setup.
        let mut settings = SETTINGS.copy().ok_or(EINVAL)?;
        // One credit per slot sunrpc allocated for this transport (what
        // `max_slots` said then: the sysctl may have changed since).
        settings.max_requests = xprt.max_slots();
        let strategy = settings.strategy;
        if strategy.page_segments() {
            // One segment per page, as many as the inline headers hold
            // (planner::physical_max_segs); each connection lowers it to
            // what its negotiated thresholds hold.
            let (inline_write, inline_read) = sysctl::inline_sizes();
            xprt.set_max_payload(physical_payload_for(inline_write, inline_read));
        }
        counters(strategy).transports.add(1, Relaxed);
        let stats = Arc::new(Stats::new()?, GFP_KERNEL)?;
        let send_conn = XprtLockedBy::new(&xprt, None);
        let inner = Arc::pin_init(
            pin_init!(Inner {
                xprt,
                settings,
                stats,
                conn <- new_mutex!(None, "rpcrdma_rs::xprt::conn"),
                send_conn,
            }),
            GFP_KERNEL,
        )?;
        Ok(Self { inner })
    }

    fn connect(&self, locked: &mut XprtLocked<'_>) -> Result {
        self.close(locked);
        // The inline sizes of the sysctls as they are now (C reads them in
        // `rpcrdma_ep_create`, at each connect).
        let (inline_write, inline_read) = sysctl::inline_sizes();
        let settings = Settings {
            inline_write,
            inline_read,
            ..self.inner.settings
        };
        let res = match injected_connect_failure() {
            Some(e) => Err(e),
            None => Conn::connect(self.inner.xprt, settings, self.inner.stats.clone()),
        };
        let res = res.map_err(|e| {
            crate::pr_warn_ratelimited!("connect failed: error {}\n", e.to_errno());
            transient_as_not_connected(e)
        });
        // What the waiting tasks are told, as C traces it.
        trace::xprtrdma_connect(
            &self.inner.xprt,
            res.as_ref().map_or_else(|e| e.to_errno(), |_| 0),
        );
        let conn = res?;
        // Taken once, from a connection just made.
        let Some(head) = conn.send_ring.take_head() else {
            conn.shutdown();
            return Err(EINVAL);
        };
        *self.inner.conn.lock() = Some(conn.clone());
        if let Some(c) = self.inner.send_conn.get_mut(locked) {
            *c = Some(SendConn { conn, head });
        }
        Ok(())
    }

    /// The send policy of C `xprt_rdma_send_request`.
    fn send_request(&self, rqst: &RpcRqst<'_>, locked: &mut XprtLocked<'_>) -> Result {
        // Dereferenced once: each `self.inner` is a load of the `Arc`.
        let inner = &*self.inner;
        let xprt = &inner.xprt;
        let conn = inner.send_conn.get_mut(locked).and_then(Option::as_mut);
        if !xprt.is_connected() {
            return Err(ENOTCONN);
        }
        // A call, and equally a backchannel Reply, consumes one of the
        // server's Receives: both wait for a congestion window slot.
        if !rqst.take_cong_slot() {
            return Err(EBADSLT);
        }
        if rqst.is_backchannel() {
            let res = conn
                .ok_or(ENOTCONN)
                .and_then(|c| c.conn.bc_send_reply(&mut c.head, rqst))
                .map_err(closed_is_not_connected);
            if res == Err(ENOTCONN) {
                xprt.drop_connection();
            }
            return res;
        }
        // A retransmission on the same connection would consume a credit
        // the server never granted: reconnect instead.
        if rqst.sent_on_this_connection() {
            xprt.drop_connection();
            return Err(ENOTCONN);
        }
        match conn
            .ok_or(ENOTCONN)
            .and_then(|c| c.conn.send(c.conn.as_arc_borrow(), &mut c.head, rqst))
            .map_err(closed_is_not_connected)
        {
            Ok(()) => {}
            Err(e) if e == ENOTCONN => {
                xprt.drop_connection();
                return Err(ENOTCONN);
            }
            Err(e) => return Err(e),
        }
        rqst.count_sent();
        // An RPC without a reply throws the credit accounting off.
        if !rqst.reply_expected() {
            xprt.drop_connection();
            return Err(ENOTCONN);
        }
        Ok(())
    }

    fn close(&self, locked: &mut XprtLocked<'_>) {
        // Nothing sends while the lock is held: gone for sends at once.
        if let Some(c) = self.inner.send_conn.get_mut(locked) {
            *c = None;
        }
        let Some(conn) = self.conn() else {
            return;
        };
        trace::xprtrdma_disconnect(&self.inner.xprt, 0);
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

    fn buf_free(&self, req: &ReqState) {
        // Most replies took the request's registrations already (C checks
        // `rl_registered` likewise): nothing else runs for them.
        if req.may_keep() {
            self.release_kept(req);
        }
    }

    fn flush(&self) {
        // Runs on a WQ_MEM_RECLAIM queue and frees MRs writeback may be
        // waiting for: no reclaim from here.
        let _noio = NoIoScope::new();
        if let Some(conn) = self.conn() {
            conn.flush_timer(conn.as_arc_borrow());
        }
    }

    fn print_stats(&self, m: &SeqFile, x: &XprtCounters) {
        let s = &self.inner.stats;
        let g = |c: &PerCpuCount| u64::try_from(c.sum()).unwrap_or(0);
        // The C module's fields in its order (`xprt_rdma_print_stats`):
        // mountstats and nfsiostat parse this line.
        seq_print!(
            m,
            "\txprt:\trdma 0 {} {} {} {} {} {} {} {} {} ",
            x.bind_count,
            x.connect_count,
            x.connect_secs,
            x.idle_secs,
            x.sends,
            x.recvs,
            x.bad_xids,
            x.req_u,
            x.bklog_u
        );
        seq_print!(
            m,
            "{} {} {} {} {} {} {} {} {} {} {} ",
            g(&s.read_chunk_count),
            g(&s.write_chunk_count),
            g(&s.reply_chunk_count),
            g(&s.total_rdma_request),
            g(&s.total_rdma_reply),
            g(&s.pullup_copy_count),
            g(&s.fixup_copy_count),
            g(&s.hardway_register_count),
            g(&s.failed_marshal_count),
            g(&s.bad_reply_count),
            g(&s.nomsg_call_count)
        );
        seq_print!(
            m,
            "{} {} {} {} {} 0\n",
            g(&s.mrs_recycled),
            g(&s.mrs_orphaned),
            g(&s.mrs_allocated),
            g(&s.local_inv_needed),
            g(&s.empty_sendctx_q)
        );
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        // The connection is closed already: `destroy` closes before it
        // drops the state.
        counters(self.inner.settings.strategy)
            .transports
            .add(-1, Relaxed);
    }
}

/// What the connect worker reports to the waiting RPCs for a failed connect.
///
/// sunrpc's `call_connect_status` retries a task after -ENOTCONN (and the
/// like) but fails the RPC on any errno it does not list: a shortage while
/// building the connection would reach the application (an NFS `open()`
/// returning ENOMEM, or ENFILE when rxe cannot allocate the socket of its
/// queue pair, under fault injection). Shortages pass, so they become
/// -ENOTCONN: the task waits and the connect worker tries again.
fn transient_as_not_connected(e: Error) -> Error {
    const SHORTAGES: [Error; 5] = [ENOMEM, ENOBUFS, EAGAIN, ENFILE, EMFILE];
    if SHORTAGES.contains(&e) {
        ENOTCONN
    } else {
        e
    }
}

/// Connects to fail with this errno, as if making the connection had
/// failed so (debugfs `client_fault_connect`, kernels with fault
/// injection only): each failed connect takes one, and 0 is none.
#[cfg(CONFIG_FAULT_INJECTION)]
static CONNECT_FAULT: kernel::sync::atomic::Atomic<i32> = kernel::sync::atomic::Atomic::new(0);

/// Arms [`CONNECT_FAULT`] with `errno` (debugfs `client_fault_connect`);
/// 0 disarms it, and what `Error::from_errno` does not take is refused.
#[cfg(CONFIG_FAULT_INJECTION)]
pub(super) fn arm_connect_fault(errno: u32) -> Result {
    let errno = i32::try_from(errno)
        .ok()
        .filter(|e| (0..=4095).contains(e))
        .ok_or(EINVAL)?;
    CONNECT_FAULT.store(errno, Relaxed);
    Ok(())
}

/// The failure armed through [`CONNECT_FAULT`], taken; so the scenario
/// shows that what `transient_as_not_connected` turns into a retry reaches
/// no application.
#[cfg(CONFIG_FAULT_INJECTION)]
fn injected_connect_failure() -> Option<Error> {
    let errno = CONNECT_FAULT.xchg(0, Relaxed);
    (errno != 0).then(|| Error::from_errno(-errno))
}

#[cfg(not(CONFIG_FAULT_INJECTION))]
fn injected_connect_failure() -> Option<Error> {
    None
}

/// A post the connection refused because its final drain has started
/// (`ESHUTDOWN`) is a lost connection to sunrpc: it reconnects and sends
/// again, where another error would fail the RPC.
fn closed_is_not_connected(e: Error) -> Error {
    if e == ESHUTDOWN {
        ENOTCONN
    } else {
        e
    }
}
