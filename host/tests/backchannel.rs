//! Reverse-direction Call detection and backchannel sizes.

use rpcrdma_proto::proto::backchannel::{is_call, max_payload, HDRLEN_MIN};

fn rpc(xid: u32, msg_type: u32) -> [u8; 8] {
    let mut b = [0u8; 8];
    b[..4].copy_from_slice(&xid.to_be_bytes());
    b[4..].copy_from_slice(&msg_type.to_be_bytes());
    b
}

#[test]
fn a_call_is_message_type_zero() {
    assert!(is_call(&rpc(0x1234_5678, 0)));
    assert!(!is_call(&rpc(0x1234_5678, 1)));
    // Any other message type is not a Call either (it is malformed).
    assert!(!is_call(&rpc(1, 2)));
}

#[test]
fn short_messages_are_not_calls() {
    for len in 0..8 {
        assert!(!is_call(&[0u8; 8][..len]), "{len} bytes");
    }
}

#[test]
fn max_payload_is_the_smallest_inline_size_less_the_header() {
    assert_eq!(max_payload(4096, 4096, 4096), 4096 - HDRLEN_MIN);
    assert_eq!(max_payload(1024, 4096, 4096), 1024 - HDRLEN_MIN);
    assert_eq!(max_payload(4096, 2048, 4096), 2048 - HDRLEN_MIN);
    assert_eq!(max_payload(65536, 65536, 4096), 4096 - HDRLEN_MIN);
    // Degenerate sizes never underflow.
    assert_eq!(max_payload(0, 4096, 4096), 0);
    assert_eq!(max_payload(27, 27, 4096), 0);
}
