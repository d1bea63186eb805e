//! Host build of the rpcrdma-rs protocol core.
//!
//! The kernel module compiles `src/proto/` directly; this crate compiles the
//! very same files for the host so that unit tests, property tests, fuzzing
//! and benchmarks can run without a kernel.
#![no_std]
#![forbid(unsafe_code)]

#[path = "../../src/proto/mod.rs"]
pub mod proto;
