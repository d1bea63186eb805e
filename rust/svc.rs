// SPDX-License-Identifier: GPL-2.0

//! Safe wrappers of the sunrpc server transport API (`svc_xprt`,
//! `svc_rqst`, `svc_xprt_class`) used by `svcrdma/`.
//!
//! C header: [`include/linux/sunrpc/svc_xprt.h`](srctree/include/linux/sunrpc/svc_xprt.h).
