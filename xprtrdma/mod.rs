// SPDX-License-Identifier: GPL-2.0

//! The client transport: `mount -o proto=rdma` through rpcrdma-rs (the Rust
//! counterpart of `net/sunrpc/xprtrdma/{transport,rpc_rdma,verbs,frwr_ops}.c`).

use kernel::prelude::*;

/// The client side's registration with sunrpc, held by the module.
pub(crate) struct ClientTransport(());

impl ClientTransport {
    /// Registers the client transport class.
    pub(crate) fn register() -> Result<Self> {
        Ok(Self(()))
    }
}
