//! Host build of the rpcrdma-rs protocol core.
//!
//! The kernel module compiles `src/proto/` directly; this crate compiles the
//! very same files for the host so that unit tests, property tests, fuzzing
//! and benchmarks can run without a kernel:
//!
//! - `cargo test` (in `host/`): golden vectors, every decoder rejection
//!   class, the planner against a transcription of the C client, credits,
//!   parsed chunk lists, and proptest round-trip/robustness properties.
//! - `RUSTC_BOOTSTRAP=1 cargo fuzz run decode_header` (in `host/fuzz/`):
//!   libFuzzer on the decoders; `scripts/bench-core` runs it for five
//!   minutes together with the criterion benchmark (`cargo bench`).
#![no_std]
#![forbid(unsafe_code)]

#[path = "../../src/proto/mod.rs"]
pub mod proto;
