// SPDX-License-Identifier: GPL-2.0

//! The client transport: `mount -o proto=rdma` through rpcrdma-rs (the Rust
//! counterpart of `net/sunrpc/xprtrdma/{transport,rpc_rdma,verbs,frwr_ops}.c`).
//!
//! - `transport`: the sunrpc side ([`XprtOps`](crate::rust::sunrpc::xprt_class::XprtOps)):
//!   connect, send, close, statistics;
//! - `conn`: the state of one connection, and the files that act on it,
//!   named like their C counterparts: `connect`, `marshal` (with
//!   `marshal_fast` and `marshal_in_place` for the common calls), `reply`,
//!   `frwr`, `physical`, `send_buf`, `backchannel`;
//! - `reg`: the registration strategy chosen by `memreg` and its counters;
//! - marshaling decisions come from the protocol core's planner
//!   ([`crate::proto::planner`]).

use crate::config::Config;
#[cfg(CONFIG_FAULT_INJECTION)]
use crate::rust::kext::debugfs::{write_u32_file, SetU32};
use crate::rust::kext::sysctl::Sysctl;
use crate::rust::sunrpc::xprt_class::Registration;
use kernel::prelude::*;

mod backchannel;
mod conn;
mod connect;
mod disconnect;
mod frwr;
mod invalidate;
mod marshal;
mod marshal_fast;
mod marshal_in_place;
mod physical;
mod reg;
mod regcache;
mod reply;
mod send_buf;
mod stats;
mod sysctl;
mod transport;

use kernel::debugfs::{Dir, File};

/// The client side's registration with sunrpc, held by the module.
pub(crate) struct ClientTransport {
    // Dropped first: the tunables' files go before the class (they only
    // point to statics, so this order is for tidiness, as C's cleanup).
    _sysctl: Option<Sysctl>,
    _reg: Registration<transport::Client>,
    _debugfs: Pin<KBox<File<()>>>,
    _debugfs_bc: Pin<KBox<File<()>>>,
    _debugfs_cache: Pin<KBox<File<()>>>,
    #[cfg(CONFIG_FAULT_INJECTION)]
    _fault: Pin<KBox<File<SetU32>>>,
}

impl ClientTransport {
    /// Registers the client transport class "rdma".
    /// `dir` is the module's debugfs directory, `module` the class's owner.
    pub(crate) fn register(cfg: &Config, dir: &Dir, module: &'static ThisModule) -> Result<Self> {
        let strategy = reg::Strategy::from_param()?;
        match strategy {
            reg::Strategy::Physical => pr_warn!(
                "memreg=physical: every NFS server this host mounts from over RDMA can read and write ALL of its memory through a global steering tag; use only with trusted servers\n"
            ),
            reg::Strategy::Cache => pr_warn!(
                "memreg=cache: NFS servers mounted over RDMA can read or write the whole pages of recent I/O (up to cache_max_mb={} MiB per connection) until their registrations are evicted, not only during the RPC; use only with trusted servers\n",
                cfg.cache_max_mb
            ),
            reg::Strategy::Fmr => {}
        }
        transport::set_config(cfg, strategy)?;
        sysctl::init(cfg, strategy);
        // /sys/kernel/debug/rpcrdma_rs/client_registration: which strategy
        // transports use and what each strategy did.
        let file = KBox::pin_init(
            dir.read_callback_file(c"client_registration", (), &|(): &(), f| reg::show(f)),
            GFP_KERNEL,
        )?;
        let bc_file = KBox::pin_init(
            dir.read_callback_file(c"client_backchannel", (), &|(): &(), f| {
                backchannel::show(f)
            }),
            GFP_KERNEL,
        )?;
        // /sys/kernel/debug/rpcrdma_rs/client_cache: what memreg=cache did.
        let cache_file = KBox::pin_init(
            dir.read_callback_file(c"client_cache", (), &|(): &(), f| regcache::show(f)),
            GFP_KERNEL,
        )?;
        // /sys/kernel/debug/rpcrdma_rs/client_fault_connect: the next
        // connect fails with the errno written (tests of the retry;
        // kernels with fault injection only).
        #[cfg(CONFIG_FAULT_INJECTION)]
        let fault_file = KBox::pin_init(
            write_u32_file(dir, c"client_fault_connect", transport::arm_connect_fault),
            GFP_KERNEL,
        )?;
        let reg = Registration::new(module).inspect_err(|e| {
            pr_err!(
                "cannot register the rdma client transport ({:?}): is the in-tree rpcrdma loaded?\n",
                e
            )
        })?;
        pr_info!("client memory registration: memreg={}\n", strategy.name());
        // After the class, as C: were the in-tree module loaded, its class
        // registration fails first, before a clash of file names here.
        let sysctl = sysctl::register();
        Ok(Self {
            _sysctl: sysctl,
            _reg: reg,
            _debugfs: file,
            _debugfs_bc: bc_file,
            _debugfs_cache: cache_file,
            #[cfg(CONFIG_FAULT_INJECTION)]
            _fault: fault_file,
        })
    }
}
