// SPDX-License-Identifier: GPL-2.0

//! The server transport: nfsd serves NFS/RDMA through rpcrdma-rs (the Rust
//! counterpart of `net/sunrpc/xprtrdma/svc_rdma*.c`).
//!
//! - `listener`: `xpo_create` (an RDMA CM listener) and the queue of
//!   connection requests `xpo_accept` takes from;
//! - `conn`: the state of one connection, and the files that act on it,
//!   named like their C counterparts: `accept` (sizing, Receives, CM
//!   events), `recv_queue`, `recvfrom` (decoding each Call with
//!   [`crate::proto::decode::decode_call`], building `rq_arg`), `sendto`
//!   (Replies inline, through Write chunks, or a Reply chunk),
//!   `backchannel`;
//! - `rw`: RDMA Read and Write of chunks, the send queue gate and the
//!   Calls whose RDMA Reads run while no thread waits for them.
//!
//! Everything here is safe Rust over [`crate::rust::sunrpc::svc`] and
//! [`crate::rust::rdma::verbs`]; peer input is validated by the protocol core
//! before it is used.

use crate::config::{Config, INLINE_MAX, REQUESTS_MAX, REQUESTS_MIN, SVC_REQ_SIZE_MIN};
#[cfg(CONFIG_FAULT_INJECTION)]
use crate::rust::kext::debugfs::{write_u32_file, SetU32};
use crate::rust::kext::sysctl::{Entry, Sysctl, Tunable};
use crate::rust::rdma::cm::Addr;
use crate::rust::rdma::cm::CmId;
use crate::rust::rdma::cm::Net;
use crate::rust::rdma::recv_slots::{HeldRecv, RecvSlots};
use crate::rust::sunrpc::svc::{ArgLoan, BcCall, Registration, SvcRqst, SvcTransport, XprtLink};
use kernel::debugfs::{Dir, File};
use kernel::prelude::*;
use kernel::sync::{Arc, SetOnce};
use regcache::RegCache;
use stats::{stat_add, Stat};

mod accept;
mod backchannel;
mod cache;
mod conn;
mod listener;
mod read;
mod read_call;
mod read_op;
mod read_sinks;
mod recv_queue;
mod recvfrom;
pub(crate) mod regcache;
mod rw;
mod sendto;
mod sq_done;
mod sq_gate;
mod stats;
mod write;

/// Settings of one connection: the module parameters, with the limits of
/// the sysctls below as they are when the connection is accepted.
#[derive(Clone, Copy)]
struct Settings {
    max_requests: u32,
    /// Largest Reply we send inline (before the client's limit).
    inline_send: u32,
    /// Largest Call we receive inline (our receive buffers).
    inline_recv: u32,
    /// Write chunks leave straight from the Reply's pages
    /// (`svc_memreg=direct`) rather than through cached buffers.
    direct: bool,
    /// RDMA Read sinks are registered on every device (`force_mr`).
    force_mr: bool,
}

/// Reads the `svc_memreg` parameter: whether Write chunks are sent from
/// the Reply's pages.
fn direct_from_param() -> Result<bool> {
    match crate::rust::module::params::svc_memreg() {
        "" | "direct" => Ok(true),
        "cache" => Ok(false),
        other => {
            pr_err!(
                "svc_memreg={} is not a server registration strategy (direct, cache)\n",
                other
            );
            Err(EINVAL)
        }
    }
}

/// The module's validated configuration, handed over once by
/// [`ServerTransport::register`] before the class is registered (sunrpc's
/// `xpo_create` and `xpo_accept` carry no class-private pointer); no
/// defaults of its own.
static SETTINGS: SetOnce<Settings> = SetOnce::new();

/// `/proc/sys/sunrpc/svc_rdma/max_requests` (C `svcrdma_max_requests`):
/// the credits of connections accepted from now on. Starts at the
/// `max_requests` parameter.
static MAX_REQUESTS: Tunable = Tunable::new(128, REQUESTS_MIN, REQUESTS_MAX);

/// `/proc/sys/sunrpc/svc_rdma/max_req_size` (C `svcrdma_max_req_size`):
/// the largest Call connections accepted from now on receive inline (their
/// Receive buffers, and the inline size they advertise). Starts at the
/// `max_inline_write` parameter, which may be below the 4096 a write needs.
static MAX_REQ_SIZE: Tunable = Tunable::new(4096, SVC_REQ_SIZE_MIN, INLINE_MAX);

/// `/proc/sys/sunrpc/svc_rdma/max_outbound_read_requests` (C
/// `svcrdma_ord`): kept for scripts that set it, and unused, as in C,
/// where every connection issues as many RDMA Reads at once as its client
/// allows (within the device's limit) whatever this says.
static MAX_OUTBOUND_READ_REQUESTS: Tunable = Tunable::new(16, 1, 255);

/// A transport of the class: a listener or a connection.
enum Xprt {
    Listener(listener::Listener),
    Conn(conn::Conn),
}

/// The `"rdma"` server transport class.
struct SvcRdma;

#[vtable]
impl SvcTransport for SvcRdma {
    type Data = Xprt;
    type Ctxt = conn::CallCtxt;
    type RecvOwner = recv_queue::RecvQ;

    fn create(net: &Net, addr: Addr, link: &Arc<XprtLink>) -> Result<Xprt> {
        listener::Listener::new(net, addr, link.clone()).map(Xprt::Listener)
    }

    fn accept(listener: &Xprt, link: &Arc<XprtLink>) -> Option<Xprt> {
        match listener {
            Xprt::Listener(l) => {
                let pending = l.next()?;
                // Set before the class was registered; the limits are read
                // for each connection, so that a write to the sysctls
                // applies to the connections accepted after it.
                let settings = Settings {
                    max_requests: MAX_REQUESTS.get(),
                    inline_recv: MAX_REQ_SIZE.get(),
                    ..*SETTINGS.as_ref()?
                };
                match conn::Conn::accept(pending, link.clone(), &settings) {
                    Ok(c) => Some(Xprt::Conn(c)),
                    Err(e) => {
                        crate::pr_warn_ratelimited!(
                            "svcrdma: cannot accept a connection: error {}\n",
                            e.to_errno()
                        );
                        None
                    }
                }
            }
            Xprt::Conn(_) => None,
        }
    }

    fn cm_id(data: &Xprt) -> &CmId {
        match data {
            Xprt::Listener(l) => l.cm_id(),
            Xprt::Conn(c) => c.cm_id(),
        }
    }

    fn recvfrom(data: &Xprt, rqst: &mut SvcRqst) -> Option<KBox<conn::CallCtxt>> {
        match data {
            Xprt::Conn(c) => c.recvfrom(rqst),
            Xprt::Listener(_) => None,
        }
    }

    fn sendto(data: &Xprt, rqst: &mut SvcRqst, ctxt: Option<&mut conn::CallCtxt>) -> Result {
        match data {
            Xprt::Conn(c) => c.sendto(rqst, ctxt),
            Xprt::Listener(_) => Err(ENOTCONN),
        }
    }

    fn result_payload(
        ctxt: &mut conn::CallCtxt,
        offset: u32,
        length: u32,
        ddp_allowed: bool,
    ) -> Result {
        ctxt.result_payload(offset, length, ddp_allowed)
    }

    fn arg_loan(ctxt: &mut conn::CallCtxt) -> &mut ArgLoan {
        &mut ctxt.arg
    }

    fn recv_slots(data: &Xprt) -> Option<&RecvSlots<recv_queue::RecvQ>> {
        match data {
            Xprt::Conn(c) => Some(c.recv_slots()),
            Xprt::Listener(_) => None,
        }
    }

    fn release_ctxt(data: &Xprt, ctxt: KBox<conn::CallCtxt>, held: Option<HeldRecv>) {
        if let Xprt::Conn(c) = data {
            c.release_ctxt(ctxt, held);
        }
    }

    fn has_wspace(data: &Xprt) -> bool {
        match data {
            Xprt::Conn(c) => c.has_wspace(),
            Xprt::Listener(_) => true,
        }
    }

    fn bc_send(data: &Xprt, call: &BcCall) -> Result {
        match data {
            Xprt::Conn(c) => c.bc_send(call),
            Xprt::Listener(_) => Err(ENOTCONN),
        }
        .inspect_err(|_| stat_add(Stat::BcSendErr, 1))
    }

    fn bc_setup(_data: &Xprt) {
        stat_add(Stat::BcSetup, 1);
    }

    fn detach(data: &Xprt) {
        match data {
            Xprt::Conn(c) => c.detach(),
            Xprt::Listener(l) => l.detach(),
        }
    }
}

/// The server side's registration with sunrpc, held by the module.
pub(crate) struct ServerTransport {
    // Dropped in this order: the class (no transport exists after it, so
    // no CM identifier either, and no CM event handler runs), the debugfs
    // view, then the registration cache (which flushes and destroys its
    // workqueue). Nothing of the server runs on a system workqueue, so no
    // sleep is needed for code to leave this module's text.
    _reg: Registration<SvcRdma>,
    // `/proc/sys/sunrpc/svc_rdma/`; optional (a failure only costs the
    // files).
    _sysctl: Option<Sysctl>,
    _debugfs: Pin<KBox<File<()>>>,
    _debugfs_memreg: Pin<KBox<File<()>>>,
    #[cfg(CONFIG_FAULT_INJECTION)]
    _fault: Pin<KBox<File<SetU32>>>,
    _cache: RegCache,
}

impl ServerTransport {
    /// Registers the server transport class "rdma"; `dir` is the module's
    /// debugfs directory.
    pub(crate) fn register(cfg: &Config, dir: &Dir, module: &'static ThisModule) -> Result<Self> {
        let settings = Settings {
            max_requests: cfg.max_requests,
            inline_send: cfg.max_inline_read,
            inline_recv: cfg.max_inline_write,
            direct: direct_from_param()?,
            force_mr: cfg.force_mr,
        };
        if !SETTINGS.populate(settings) {
            return Err(EBUSY);
        }
        let cache = cache::module_init(cfg)?;
        pr_info!(
            "svcrdma: Write chunks {}\n",
            if settings.direct {
                "from the Reply's pages (svc_memreg=direct)"
            } else {
                "through the registration cache (svc_memreg=cache)"
            }
        );
        // /sys/kernel/debug/rpcrdma_rs/svc_memreg: how Write chunk pieces
        // left, straight from the Reply's pages or copied.
        let memreg_file = KBox::pin_init(
            dir.read_callback_file(c"svc_memreg", (), &|(): &(), f| rw::show_writes(f)),
            GFP_KERNEL,
        )?;
        // /sys/kernel/debug/rpcrdma_rs/svc_registration_cache: per class
        // hits, misses, registrations, evictions and what is held.
        let file = KBox::pin_init(
            dir.read_callback_file(c"svc_registration_cache", (), &|(): &(), f| {
                regcache::show(f)
            }),
            GFP_KERNEL,
        )?;
        // /sys/kernel/debug/rpcrdma_rs/svc_fault_write_overrun: how many
        // replies with a Write chunk overstate it (tests of the client;
        // kernels with fault injection only).
        #[cfg(CONFIG_FAULT_INJECTION)]
        let fault = KBox::pin_init(
            write_u32_file(dir, c"svc_fault_write_overrun", sendto::arm_write_overrun),
            GFP_KERNEL,
        )?;
        MAX_REQUESTS.set(cfg.max_requests);
        MAX_REQ_SIZE.set(cfg.max_inline_write);
        let limits = [
            Entry::uint(c"max_requests", &MAX_REQUESTS, 0o644),
            Entry::uint(c"max_req_size", &MAX_REQ_SIZE, 0o644),
            Entry::uint(
                c"max_outbound_read_requests",
                &MAX_OUTBOUND_READ_REQUESTS,
                0o644,
            ),
        ];
        let reg = Registration::new(module)
            .inspect_err(|e| pr_err!("svcrdma: class registration failed: {:?}\n", e))?;
        Ok(Self {
            _reg: reg,
            _sysctl: stats::register(&limits),
            _debugfs: file,
            _debugfs_memreg: memreg_file,
            #[cfg(CONFIG_FAULT_INJECTION)]
            _fault: fault,
            _cache: cache,
        })
    }
}
