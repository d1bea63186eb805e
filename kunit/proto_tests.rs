// SPDX-License-Identifier: GPL-2.0

//! The protocol core inside the kernel: the same golden vectors the host
//! tests use, and a mutation sweep over them that proves the decoders return
//! an error instead of panicking on hostile bytes when built with the
//! kernel's overflow checks (`CONFIG_RUST_OVERFLOW_CHECKS`).

use crate::proto::decode::{decode_call, decode_header, decode_reply};
use crate::proto::golden;
use crate::proto::msg::DecodeLimits;
use kernel::prelude::*;

/// Largest vector the mutation sweep copies onto the stack.
const SWEEP_MAX: usize = 256;

/// Decodes `bytes` with every decoder and limit set; only must not panic.
fn decode_all(bytes: &[u8]) -> usize {
    let server = DecodeLimits::server_default();
    let client = DecodeLimits::client_default();
    usize::from(decode_header(bytes, &server).is_ok())
        + usize::from(decode_call(bytes, &server).is_ok())
        + usize::from(decode_reply(bytes, &client).is_ok())
}

#[kunit_tests(rpcrdma_rs_proto)]
mod tests {
    use super::*;

    #[test]
    fn golden_vectors_all_pass() {
        let mut failed = 0;
        for v in golden::VECTORS {
            if let Err(f) = golden::check(v) {
                pr_err!("golden vector {} failed: {}\n", f.name, f.reason);
                failed += 1;
            }
        }
        assert_eq!(failed, 0);
        assert!(golden::VECTORS.len() >= 10);
    }

    #[test]
    fn golden_run_all_counts_every_vector() {
        assert_eq!(golden::run_all(), Ok(golden::VECTORS.len()));
    }

    #[test]
    fn mutated_headers_never_panic() {
        let mut buf = [0u8; SWEEP_MAX];
        let mut decoded = 0usize;
        let mut tried = 0usize;
        for v in golden::VECTORS {
            let len = v.bytes.len().min(SWEEP_MAX);
            let Some(dst) = buf.get_mut(..len) else {
                continue;
            };
            // Every byte set to the values that stress counts and lengths,
            // and every truncation.
            for i in 0..len {
                for val in [0x00u8, 0x01, 0x7f, 0x80, 0xff] {
                    dst.copy_from_slice(&v.bytes[..len]);
                    dst[i] = val;
                    decoded += decode_all(dst);
                    tried += 1;
                }
                decoded += decode_all(&v.bytes[..i]);
                tried += 1;
            }
        }
        pr_info!(
            "mutation sweep: {} inputs, {} decodes accepted\n",
            tried,
            decoded
        );
        assert!(tried > 1000);
    }
}
