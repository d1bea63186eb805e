//! Checks of the `RDMA_ERROR` replies the server sends, shared by both
//! targets.

use crate::proto::decode::decode_reply;
use crate::proto::encode::encode_error_for;
use crate::proto::msg::{
    Body, DecodeError, DecodeLimits, ErrorAction, ErrorBody, Proc, RPCRDMA_VERSION,
};

/// Limits that accept any well-formed header: for decoding back what the
/// server encoded.
pub const ANY: DecodeLimits = DecodeLimits {
    max_segments_per_chunk: u32::MAX,
    max_chunks: u32::MAX,
    max_payload: u32::MAX,
    max_inline: u32::MAX,
};

/// Word `i` of `b`, if it has one.
pub fn word(b: &[u8], i: usize) -> Option<u32> {
    let s = b.get(i * 4..i * 4 + 4)?;
    Some(u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
}

/// The reply the server sends for a Call rejected with `err`: encodes it
/// as the server does and checks it (see [`check_error_reply`]).
pub fn check_decode_error_reply(msg: &[u8], err: &DecodeError, credits: u32) {
    let mut out = [0u8; 32];
    let reply = match encode_error_for(msg, err, credits, &mut out) {
        Ok(Some(n)) => Some(&out[..n]),
        Ok(None) => None,
        Err(e) => panic!("cannot encode the error reply: {e:?}"),
    };
    check_error_reply(msg, err, credits, reply);
}

/// Every rejected Call with an XID gets the reply its error calls for, and
/// only those: `ERR_VERS` with the version range for a bad version,
/// `ERR_CHUNK` otherwise, nothing for `RDMA_DONE`/`RDMA_ERROR` "calls"
/// (as in C) and for messages too short to carry an XID.
pub fn check_error_reply(msg: &[u8], err: &DecodeError, credits: u32, reply: Option<&[u8]>) {
    let action = err.action();
    let Some(r) = reply else {
        assert!(
            action == ErrorAction::Drop || msg.len() < 4,
            "no error reply to a rejected call with an XID ({err:?})"
        );
        return;
    };
    assert!(action != ErrorAction::Drop, "a reply to a dropped message");
    assert_eq!(word(r, 0), word(msg, 0), "xid not echoed");
    assert_eq!(word(r, 1), Some(word(msg, 1).unwrap_or(RPCRDMA_VERSION)));
    assert_eq!(word(r, 2), Some(credits));
    assert_eq!(word(r, 3), Some(Proc::Error.to_u32()));
    match action {
        ErrorAction::ErrVers => {
            assert_eq!(r.len(), 28);
            assert_eq!(word(r, 4), Some(1));
            assert_eq!(word(r, 5), Some(RPCRDMA_VERSION));
            assert_eq!(word(r, 6), Some(RPCRDMA_VERSION));
        }
        ErrorAction::ErrChunk => {
            assert_eq!(r.len(), 20);
            if word(msg, 1) == Some(RPCRDMA_VERSION) {
                check_err_chunk(r, word(msg, 0).unwrap_or(0), credits);
            }
        }
        ErrorAction::Drop => unreachable!("checked above"),
    }
}

/// `bytes` is an `RDMA_ERROR`/`ERR_CHUNK` for `xid` that a client decodes.
pub fn check_err_chunk(bytes: &[u8], xid: u32, credits: u32) {
    let h = decode_reply(bytes, &ANY).expect("ERR_CHUNK decodes");
    assert_eq!(h.xid, xid);
    assert_eq!(h.credits, credits);
    assert_eq!(h.body, Body::Error(ErrorBody::Chunk));
    assert_eq!(h.header_len, bytes.len());
}
