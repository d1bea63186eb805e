//! Fuzz target for the transport header decoders: the body is
//! `rpcrdma_proto::targets::decode_header::decode_header_target`, which
//! `host/tests/corpus.rs` also runs over the committed corpus.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    rpcrdma_proto::targets::decode_header::decode_header_target(data);
});
