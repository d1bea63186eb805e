// SPDX-License-Identifier: GPL-2.0

//! The client transport: `mount -o proto=rdma` through rpcrdma-rs (the Rust
//! counterpart of `net/sunrpc/xprtrdma/{transport,rpc_rdma,verbs,frwr_ops}.c`).
//!
//! - `transport`: the sunrpc side ([`XprtOps`](crate::rdma::xprt::XprtOps)):
//!   connect, send, close, statistics;
//! - `conn`: one connection: queue pair, receives, the FRWR pool ("fmr"
//!   strategy: steering tags allocated at connect, mapped per I/O), and
//!   reply handling;
//! - marshaling decisions come from the protocol core's planner
//!   ([`crate::proto::planner`]).

use crate::config::Config;
use crate::rdma::xprt::Registration;
use kernel::prelude::*;

mod conn;
mod transport;

/// The client side's registration with sunrpc, held by the module.
pub(crate) struct ClientTransport {
    _reg: Registration<transport::Client>,
}

impl ClientTransport {
    /// Registers the client transport class "rdma".
    pub(crate) fn register(cfg: &Config) -> Result<Self> {
        transport::set_config(cfg);
        let reg = Registration::new().inspect_err(|e| {
            pr_err!(
                "cannot register the rdma client transport ({:?}): is the in-tree rpcrdma loaded?\n",
                e
            )
        })?;
        Ok(Self { _reg: reg })
    }
}
