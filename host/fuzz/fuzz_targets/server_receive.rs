//! Fuzz target for the server's receive and reply decisions: the input is
//! connection and request parameters, then a received message
//! (`rpcrdma_proto::targets::server_input`). The body is
//! `rpcrdma_proto::targets::server_receive::server_receive_target`, which
//! `host/tests/corpus.rs` also runs over the committed corpus.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = rpcrdma_proto::targets::server_receive::server_receive_target(data);
});
