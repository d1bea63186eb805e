// SPDX-License-Identifier: GPL-2.0

//! Safe wrappers of the sunrpc client transport API (`rpc_xprt`,
//! `rpc_rqst`, `xprt_class`) used by `xprtrdma/`.
//!
//! C header: [`include/linux/sunrpc/xprt.h`](srctree/include/linux/sunrpc/xprt.h).
