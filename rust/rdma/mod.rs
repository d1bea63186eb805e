// SPDX-License-Identifier: GPL-2.0

//! The RDMA core: devices ([`device`]), the connection manager ([`cm`]),
//! verbs objects of a reliable connection ([`verbs`]), memory regions
//! ([`mr`]) and the ways work requests are posted and reused.
//!
//! C headers: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h),
//! [`include/rdma/rdma_cm.h`](srctree/include/rdma/rdma_cm.h).

pub mod cm;
pub mod device;
pub mod mr;
pub mod read_ctxts;
pub mod recv_ring;
pub mod recv_slots;
pub mod ring_owner;
pub mod run_mr;
pub mod send_chain;
pub mod send_pool;
pub mod send_ring;
pub mod sink_pool;
pub mod verbs;
pub mod wr_pool;
