// SPDX-License-Identifier: GPL-2.0

//! Kernel-API abstractions of rpcrdma-rs: the only place in the project
//! with generated bindings, raw pointers or `unsafe`
//! (`Documentation/dev-guide/layout.rst`).
//!
//! One sub-module per kernel subsystem, each file one kernel object or one
//! ops table, named as `rust/kernel/` would name it, so that a part can be
//! proposed upstream as `kernel::rdma` or `kernel::sunrpc`:
//!
//! - [`rdma`]: the RDMA core (`include/rdma/`): devices, the connection
//!   manager, verbs objects, work requests, memory regions;
//! - [`sunrpc`]: the sunrpc transport APIs (`include/linux/sunrpc/`): the
//!   client's `rpc_xprt` and `xprt_class`, the server's `svc_xprt` and
//!   `svc_xprt_class`, `xdr_buf`, the backchannel;
//! - [`kext`]: what the kernel crate lacks in 7.3 (slab caches, shrinkers,
//!   sysctl tables, workqueues, per-CPU counters, allocation scopes, rate
//!   limits);
//! - [`module`]: this module's own FFI: its parameters, its trace events,
//!   its live-object counts (and, until they move to the transports, the
//!   server's registration cache and its `svc_rdma` counters).
//!
//! A transport uses these types in safe code. C is used only where bindgen
//! cannot reach (`helpers/*.c`: static inlines and macros; `module/*.c`:
//! `module_param_named` and the trace events); the bindings are generated
//! from [`bindings_helper.h`] on every build and are private to `rust/`.
//!
//! [`bindings_helper.h`]: bindings_helper.h

mod bindings;
pub mod kext;
pub mod module;
pub mod rdma;
pub mod sunrpc;
