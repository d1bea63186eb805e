// SPDX-License-Identifier: GPL-2.0

//! Pure-logic protocol core of rpcrdma-rs.
//!
//! Everything here uses only `core`: no allocation, no kernel API and no
//! `unsafe`. The kernel module includes this directory with
//! `#[path = "proto/mod.rs"] pub mod proto;` and the host crate in `host/`
//! compiles the same files for unit tests, property tests, fuzzing and
//! benchmarks.
//!
//! - [`xdr`]: the XDR codec everything else is built on.
//! - [`msg`]: RPC-over-RDMA v1 (RFC 8166) types, [`msg::DecodeLimits`] and
//!   [`msg::DecodeError`].
//! - [`decode`]: the validating header decoders.
//! - [`encode`]: header encoders, including `RDMA_ERROR` replies.
//! - [`backchannel`]: reverse-direction Call detection and sizes.
//! - [`cm`]: RDMA-CM private data (RFC 8797).
//! - [`pcl`]: parsed chunk lists for the server.
//! - [`pieces`]: chunks cut into the server's RDMA Read and Write pieces.
//! - [`svc_call`]: where the bytes of a received Call go.
//! - [`svc_reply`]: where the bytes of a Reply go.
//! - [`planner`]: the client's chunk planner.
//! - [`credits`]: credit accounting for both sides.
//! - [`reply_fast`]: the client's one-pass decoder of the common reply
//!   shapes, [`decode::decode_reply`] being its fallback and oracle.
//! - [`marshal_fast`]: the client's one-pass plan and header of the
//!   common call shapes, [`planner::plan`] and [`encode::encode_header`]
//!   being their fallback and oracle.
//! - [`call_fast`]: the server's one-pass decoder of the common Call
//!   shapes, straight into parsed chunk lists; [`decode::decode_call`]
//!   with [`pcl::ParsedChunks::build`] is its fallback and oracle.
//! - [`regcache_policy`]: lookup and replacement (LRU, MRRC's MRE) of a
//!   client registration cache.
//! - [`golden`]: byte-exact golden vectors, runnable from KUnit.

// Peer input must never panic the kernel: no unchecked arithmetic (the
// kernel builds with overflow checks), no indexing, no unwrap/expect/panic.
// These clippy lints hold the whole core to that; rustc ignores them when
// clippy is not running.
#![deny(
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::float_arithmetic
)]
#![forbid(unsafe_code)]

pub mod backchannel;
pub mod call_fast;
pub mod cm;
pub mod credits;
pub mod decode;
pub mod encode;
pub mod golden;
pub mod marshal_fast;
pub mod msg;
pub mod pcl;
pub mod pieces;
pub mod planner;
pub mod regcache_policy;
pub mod reply_fast;
pub mod ring_index;
pub mod sq_slots;
pub mod svc_call;
pub mod svc_reply;
pub mod xdr;
