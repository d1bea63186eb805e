//! Host build of the rpcrdma-rs protocol core.
//!
//! The kernel module compiles `src/proto/` directly; this crate compiles the
//! very same files for the host so that unit tests, property tests, fuzzing
//! and benchmarks can run without a kernel:
//!
//! - `cargo test` (in `host/`): golden vectors, every decoder rejection
//!   class, the planner against a transcription of the C client, credits,
//!   parsed chunk lists, proptest round-trip/robustness properties, and a
//!   replay of the committed fuzz corpus (`tests/corpus.rs`).
//! - `RUSTC_BOOTSTRAP=1 cargo fuzz run decode_header` and
//!   `... server_receive` (in `host/fuzz/`): libFuzzer on the decoders and
//!   on the server's receive and reply decisions ([`targets`]);
//!   `scripts/bench-core` runs both to 100 million executions each,
//!   then the criterion benchmark (`cargo bench`).
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

#[path = "../../src/proto/mod.rs"]
pub mod proto;

pub mod targets;
