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

/// The backchannel header is the chunkless `RDMA_MSG` header both sides
/// decode as such.
#[test]
fn backchannel_header_is_a_chunkless_msg() {
    use rpcrdma_proto::proto::backchannel::encode_header;
    use rpcrdma_proto::proto::decode::decode_reply;
    use rpcrdma_proto::proto::msg::{Body, DecodeLimits};
    let mut out = [0u8; 64];
    let n = encode_header(0x1234_5678, 2, &mut out).unwrap();
    assert_eq!(n, HDRLEN_MIN as usize);
    let h = decode_reply(&out[..n], &DecodeLimits::client_default()).unwrap();
    assert_eq!((h.xid, h.vers, h.credits), (0x1234_5678, 1, 2));
    match h.body {
        Body::Msg { chunks, payload } => {
            assert!(chunks.read.is_empty() && chunks.write.is_empty() && chunks.reply.is_none());
            assert!(payload.is_empty());
        }
        other => panic!("not RDMA_MSG: {other:?}"),
    }
    assert!(encode_header(1, 2, &mut out[..27]).is_err());
}
