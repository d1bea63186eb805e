// SPDX-License-Identifier: GPL-2.0

//! The protocol core inside the kernel: the same golden vectors the host
//! tests use, and a mutation sweep over them that proves the decoders return
//! an error instead of panicking on hostile bytes when built with the
//! kernel's overflow checks (`CONFIG_RUST_OVERFLOW_CHECKS`); and the
//! short lists chunk lists are built in.

use crate::proto::decode::{decode_call, decode_header, decode_reply};
use crate::proto::golden;
use crate::proto::msg::DecodeLimits;
use crate::small_list::SmallList;
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
    fn small_lists_start_empty_and_go_inline_then_to_a_vector() {
        // New: no storage (a vector without capacity), nothing zeroed.
        let mut l = SmallList::<u32, 2>::new();
        assert!(l.is_empty());
        assert!(matches!(&l, SmallList::Heap(v) if v.capacity() == 0));
        // The first item makes it inline; past N it moves to a vector.
        assert_eq!(l.push(7), Ok(()));
        assert!(matches!(&l, SmallList::Inline { len: 1, .. }));
        assert_eq!(l.push_within_capacity(8), Ok(()));
        assert_eq!(l.push_within_capacity(9), Err(9));
        assert_eq!(l.push(9), Ok(()));
        assert!(matches!(&l, SmallList::Heap(_)));
        assert_eq!(l.as_slice(), &[7, 8, 9]);
        // Cleared, it keeps its vector.
        l.clear();
        assert!(l.is_empty());
        assert_eq!(l.push(1), Ok(()));
        assert_eq!(l.as_slice(), &[1]);
        // A new list taken straight to within-capacity pushes, or
        // reserved, or refilled, starts inline too.
        let mut l = SmallList::<u32, 2>::new();
        assert_eq!(l.push_within_capacity(5), Ok(()));
        assert_eq!(l.as_slice(), &[5]);
        let mut l = SmallList::<u32, 2>::new();
        assert_eq!(l.reserve(2), Ok(()));
        assert!(matches!(&l, SmallList::Inline { len: 0, .. }));
        let mut l = SmallList::<u32, 2>::new();
        assert_eq!(l.refill(2), Ok(()));
        assert_eq!(l.as_slice(), &[0, 0]);
        if let Some(first) = l.as_mut_slice().first_mut() {
            *first = 3;
        }
        assert_eq!(l.as_slice(), &[3, 0]);
        // More than N reserved at once goes to a vector.
        let mut l = SmallList::<u32, 2>::new();
        assert_eq!(l.reserve(3), Ok(()));
        assert!(matches!(&l, SmallList::Heap(v) if v.capacity() >= 3));
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
