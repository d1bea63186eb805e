// SPDX-License-Identifier: GPL-2.0

//! KUnit suites of rpcrdma-rs, built as their own module
//! (`rpcrdma_rs_kunit.ko`) so the transport module carries no test code.
//!
//! The suites run when the module is inserted. `rpcrdma_rs_verbs` needs an
//! RDMA device with an IPv4 address (`rxe_ipv4`, soft-RoCE in the VM
//! harness); the protocol suites need nothing.

use kernel::prelude::*;

#[path = "../rust/mod.rs"]
pub mod rust;

/// The name this module's `ib_client` registers under (the transport
/// module may be loaded beside it).
const IB_CLIENT_NAME: &core::ffi::CStr = c"rpcrdma_rs_kunit";

#[path = "../src/proto/mod.rs"]
pub mod proto;

/// The server's registration cache, which the verbs suite drives over a
/// real device (parts of it only: the rest serves the server).
#[path = "../svcrdma/regcache/mod.rs"]
#[allow(dead_code)]
pub mod regcache;

mod client_hostile;
mod client_tests;
mod park_tests;
mod proto_tests;
mod read_ctxts_tests;
mod recv_slots_tests;
mod send_pool_tests;
mod svc_hostile;
mod verbs;

module! {
    type: RpcRdmaKunit,
    name: "rpcrdma_rs_kunit",
    authors: ["rpcrdma-rs developers"],
    description: "KUnit suites of rpcrdma-rs (verbs layer over a real RDMA device, protocol core)",
    license: "GPL",
    params: {
        rxe_ipv4: u32 {
            default: 0x0a63_0001,
            description: "IPv4 address (host byte order) of the RDMA netdev the verbs suite connects over (default 10.99.0.1)",
        },
        client_hostile_port: u32 {
            default: 0,
            description: "Port the client_hostile suite listens on as a server for the project's client (scenario client-hostile; 0: the suite checks nothing)",
        },
    },
}

struct RpcRdmaKunit {
    _devices: crate::rust::rdma::device::DeviceClient,
}

impl kernel::Module for RpcRdmaKunit {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        verbs::set_peer(module_parameters::rxe_ipv4.value());
        client_hostile::set_port(module_parameters::client_hostile_port.value());
        let devices = crate::rust::rdma::device::DeviceClient::register(IB_CLIENT_NAME)?;
        pr_info!(
            "rpcrdma_rs_kunit loaded: rdma_devices={}\n",
            crate::rust::rdma::device::count()
        );
        Ok(Self { _devices: devices })
    }
}
