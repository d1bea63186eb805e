// SPDX-License-Identifier: GPL-2.0

//! The sunrpc transport APIs: the client side ([`xprt`], [`xprt_class`]:
//! `rpc_xprt`, `rpc_rqst`, `xprt_class`), the server side ([`svc`]:
//! `svc_xprt`, `svc_rqst`, `svc_xprt_class`), the backchannel, and
//! `xdr_buf` copies.
//!
//! C headers: [`include/linux/sunrpc/xprt.h`](srctree/include/linux/sunrpc/xprt.h),
//! [`include/linux/sunrpc/svc_xprt.h`](srctree/include/linux/sunrpc/svc_xprt.h).

pub mod page_sinks;
pub mod reply_pages;
pub mod svc;
mod svc_bc;
mod svc_class;
mod xdr_buf;
pub mod xprt;
#[cfg(CONFIG_SUNRPC_BACKCHANNEL)]
mod xprt_bc;
pub mod xprt_class;
mod xprt_locks;
pub mod xprt_reply;
pub mod xprt_slots;
