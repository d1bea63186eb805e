// SPDX-License-Identifier: GPL-2.0

//! rpcrdma-rs: an RPC-over-RDMA version 1 transport (RFC 8166) for the Linux
//! sunrpc layer, the Rust counterpart of `net/sunrpc/xprtrdma`.
//!
//! The module is layered as the kernel's own Rust drivers are:
//!
//! - `rust` (directory `rust/`): kernel-API abstractions by subsystem
//!   (`rdma`, `sunrpc`, `kext`, and `module` for this module's parameters,
//!   trace events and live counts), the only code with `unsafe`;
//! - `proto` (directory `src/proto/`): the pure protocol core (XDR codec,
//!   RPC-over-RDMA messages, chunk lists, planning, credits), which a host
//!   Cargo crate also builds and tests;
//! - the transports (`xprtrdma/`, `svcrdma/`), built on the two above.

use kernel::prelude::*;

#[path = "../rust/mod.rs"]
pub mod rust;

/// The name this module's `ib_client` registers under.
const IB_CLIENT_NAME: &core::ffi::CStr = c"rpcrdma_rs";

#[path = "proto/mod.rs"]
pub mod proto;

mod config;

mod small_list;

#[path = "../xprtrdma/mod.rs"]
mod xprtrdma;

#[path = "../svcrdma/mod.rs"]
mod svcrdma;

module! {
    type: RpcRdmaModule,
    name: "rpcrdma_rs",
    authors: ["rpcrdma-rs developers"],
    description: "RPC-over-RDMA v1 transport (NFS/RDMA) written in Rust",
    license: "GPL",
    // The in-tree module's names: sunrpc asks for "rpcrdma"/"rpcrdma6" (a
    // mount with proto=rdma/rdma6) and "svcrdma" (an nfsd RDMA listener);
    // rdma-core loads "xprtrdma". With the in-tree rpcrdma.ko installed its
    // name wins over these; packaging/modprobe.d/rpcrdma-rs.conf (make
    // install) aliases all four to this module.
    alias: ["rpcrdma", "rpcrdma6", "xprtrdma", "svcrdma"],
    // The parameters are declared in C (`rust/module/params.c`, read through
    // `crate::rust::module::params`): the `params` of this macro get permissions 0
    // and would be missing from /sys/module/rpcrdma_rs/parameters/.
}

struct RpcRdmaModule {
    // Dropped in this order: transports first, then the device client.
    _server: svcrdma::ServerTransport,
    _client: xprtrdma::ClientTransport,
    // /sys/kernel/debug/rpcrdma_rs/, shared by both sides' files (which
    // hold it too, so the order does not matter).
    _debugfs: kernel::debugfs::Dir,
    _devices: crate::rust::rdma::device::DeviceClient,
}

impl kernel::Module for RpcRdmaModule {
    fn init(module: &'static ThisModule) -> Result<Self> {
        let p = crate::rust::module::params::get();
        let cfg = config::Config::from_params(&config::Config {
            max_requests: p.max_requests,
            max_inline_read: p.max_inline_read,
            max_inline_write: p.max_inline_write,
            fmr_pool_size: p.fmr_pool_size,
            fmr_pages_per_mr: p.fmr_pages_per_mr,
            fmr_dirty_watermark: p.fmr_dirty_watermark,
            cache_max_mb: p.cache_max_mb,
            svc_buf_cache: p.svc_buf_cache,
            force_mr: p.force_mr,
        })
        .inspect_err(|e| pr_err!("not loaded: {}\n", e.reason()))
        .map_err(|_| EINVAL)?;
        let devices = crate::rust::rdma::device::DeviceClient::register(IB_CLIENT_NAME)
            .inspect_err(|e| pr_err!("ib_client registration failed: {:?}\n", e))?;
        pr_info!(
            "rpcrdma_rs {} loaded: max_requests={} max_inline_read={} max_inline_write={} rdma_devices={}\n",
            config::VERSION,
            cfg.max_requests,
            cfg.max_inline_read,
            cfg.max_inline_write,
            crate::rust::rdma::device::count()
        );
        let debugfs = kernel::debugfs::Dir::new(c"rpcrdma_rs");
        let client = xprtrdma::ClientTransport::register(&cfg, &debugfs, module)?;
        let server = svcrdma::ServerTransport::register(&cfg, &debugfs, module)?;
        Ok(Self {
            _server: server,
            _client: client,
            _debugfs: debugfs,
            _devices: devices,
        })
    }
}

impl Drop for RpcRdmaModule {
    fn drop(&mut self) {
        let live = crate::rust::module::live::total();
        if live != 0 {
            pr_err!("unloading with {} RDMA objects still live\n", live);
        }
        pr_info!("rpcrdma_rs unloaded\n");
    }
}
