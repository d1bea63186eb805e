//! What the property tests of the one-pass decoders share: their
//! configuration, header words and segments.

use proptest::prelude::*;

/// A configuration of `cases` cases that keeps no failure file.
pub fn cfg(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// The big-endian bytes of `ws`.
pub fn words(ws: &[u32]) -> Vec<u8> {
    ws.iter().flat_map(|w| w.to_be_bytes()).collect()
}

/// A segment: handle, length, 64-bit offset.
pub fn seg() -> impl Strategy<Value = [u32; 4]> {
    (
        any::<u32>(),
        prop_oneof![0u32..70_000, any::<u32>()],
        any::<u32>(),
        any::<u32>(),
    )
        .prop_map(|(h, l, a, b)| [h, l, a, b])
}
