// SPDX-License-Identifier: GPL-2.0

//! rpcrdma-rs: an RPC-over-RDMA version 1 transport (RFC 8166) for the Linux
//! sunrpc layer, the Rust counterpart of `net/sunrpc/xprtrdma`.
//!
//! The module is layered as the kernel's own Rust drivers are:
//!
//! - `rust` (directory `rust/`): the FFI layer, the only code with `unsafe`;
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
    params: {
        max_requests: u32 {
            default: 128,
            description: "Credits (concurrent RPC requests) per connection, 4..16384 (default 128)",
        },
        max_inline_read: u32 {
            default: 4096,
            description: "Largest inline reply in bytes, 1024..65536 (default 4096)",
        },
        max_inline_write: u32 {
            default: 4096,
            description: "Largest inline call in bytes, 1024..65536 (default 4096)",
        },
        fmr_pool_size: u32 {
            default: 0,
            description: "Client memreg=fmr (FMR-style pool on FRWR work requests): MRs allocated per connection at connect time (0: 4 per credit)",
        },
        fmr_pages_per_mr: u32 {
            default: 0,
            description: "Client memreg=fmr: pages per MR, 1..257 (0: the device's limit, at most 257)",
        },
        fmr_dirty_watermark: u32 {
            default: 0,
            description: "Client memreg=fmr: MRs left registered after their RPC before a batched invalidation (0: invalidate before every RPC completes; >0 lets the server read and write the pages and the kmalloc'd reply buffer of completed RPCs, i.e. memory reused by others, until the batch runs, at most 1 s later)",
        },
        svc_buf_cache: bool {
            default: true,
            description: "Server: keep RDMA bounce and Send buffers mapped, and RDMA Read sinks registered where the device needs it, for reuse (default Y)",
        },
        force_mr: bool {
            default: false,
            description: "Server: register RDMA Read sinks with a fast-registration MR even where the device does not need it (RoCE/IB; iWARP always does) (default N)",
        },
    },
}

struct RpcRdmaModule {
    // Dropped in this order: transports first, then the device client.
    _server: svcrdma::ServerTransport,
    _client: xprtrdma::ClientTransport,
    // /sys/kernel/debug/rpcrdma_rs/, shared by both sides' files (which
    // hold it too, so the order does not matter).
    _debugfs: kernel::debugfs::Dir,
    _devices: crate::rust::device::DeviceClient,
}

impl kernel::Module for RpcRdmaModule {
    fn init(module: &'static ThisModule) -> Result<Self> {
        let cfg = config::Config::from_params(&config::Config {
            max_requests: module_parameters::max_requests.value(),
            max_inline_read: module_parameters::max_inline_read.value(),
            max_inline_write: module_parameters::max_inline_write.value(),
            fmr_pool_size: module_parameters::fmr_pool_size.value(),
            fmr_pages_per_mr: module_parameters::fmr_pages_per_mr.value(),
            fmr_dirty_watermark: module_parameters::fmr_dirty_watermark.value(),
            svc_buf_cache: module_parameters::svc_buf_cache.value(),
            force_mr: module_parameters::force_mr.value(),
        })
        .inspect_err(|e| pr_err!("not loaded: {}\n", e.reason()))
        .map_err(|_| EINVAL)?;
        let devices = crate::rust::device::DeviceClient::register()
            .inspect_err(|e| pr_err!("ib_client registration failed: {:?}\n", e))?;
        pr_info!(
            "rpcrdma_rs {} loaded: max_requests={} max_inline_read={} max_inline_write={} rdma_devices={}\n",
            config::VERSION,
            cfg.max_requests,
            cfg.max_inline_read,
            cfg.max_inline_write,
            crate::rust::device::count()
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
        let live = crate::rust::live::total();
        if live != 0 {
            pr_err!("unloading with {} RDMA objects still live\n", live);
        }
        pr_info!("rpcrdma_rs unloaded\n");
    }
}
