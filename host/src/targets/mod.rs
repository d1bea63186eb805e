//! Bodies of the fuzz targets, shared by `host/fuzz` (libFuzzer) and
//! `host/tests/corpus.rs` (which replays the committed corpus under
//! `cargo test`). Each panics on a broken invariant; with overflow checks
//! on in every profile, an arithmetic overflow is a crash too.
//!
//! - [`decode_header::decode_header_target`]: the header decoders.
//! - [`server_receive::server_receive_target`]: what the server does with
//!   a received message, from decoding to the Reply ([`server_flow`]).

pub mod decode_header;
pub mod error_reply;
pub mod server_flow;
pub mod server_input;
pub mod server_io;
pub mod server_oracle;
pub mod server_receive;
