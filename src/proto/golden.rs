// SPDX-License-Identifier: GPL-2.0

//! Byte-exact golden vectors for every RPC-over-RDMA v1 message kind and
//! for RFC 8797 private data, plus rejections with their expected errors.
//!
//! [`run_all`] checks every vector without allocating: a vector that should
//! decode must decode to exactly the expected fields, and encoding those
//! fields must give back exactly the header bytes; a vector that should be
//! rejected must fail with exactly the expected [`DecodeError`] and, where
//! given, produce exactly the expected `RDMA_ERROR` reply. Host tests and
//! the kernel's KUnit suite both call it; [`VECTORS`] and [`check`] allow
//! one KUnit case per vector.
//!
//! Cross-checks against independent encoders, by reading their code:
//! - C client `rpcrdma_marshal_req()`: fixed words `rq_xid`,
//!   `rpcrdma_version`, `rb_max_requests`, proc; `rpcrdma_encode_read_list()`
//!   writes `1 - PHLOO - 1 - PHLOO - 0` with the same position for every
//!   segment of the chunk (see [`MSG_READ_LIST`]);
//!   `rpcrdma_encode_write_list()` writes `1 - N - HLOO... - 0` and appends
//!   the write-pad segment when `page_len` is unaligned (see
//!   [`MSG_WRITE_LIST`], whose second segment is the 4-byte pad);
//!   `rpcrdma_encode_reply_chunk()` writes `1 - N - HLOO...` with no list
//!   terminator (see [`MSG_REPLY_CHUNK`]); a long call is `RDMA_NOMSG` with
//!   position-zero Read segments (see [`NOMSG_POS0_READ`]).
//! - C server `svc_rdma_send_error_msg()`: xid and vers copied from the
//!   call, `sc_fc_credits`, `rdma_error`, then `err_vers, 1, 1` or
//!   `err_chunk` (see [`REJECT_ERR_VERS_REPLY`], [`REJECT_ERR_CHUNK_REPLY`]).
//! - Wireshark's `packet-rpcrdma.c`: `RDMA_MSGP` carries `rdma_align` and
//!   `rdma_thresh` before the chunk lists (see [`MSGP`]); `RDMA_ERROR` has
//!   the error code, then for `ERR_VERS` low and high.
//! - `struct rpcrdma_connect_private` as filled by `rpcrdma_ep_create()`
//!   and `svc_rdma_accept()` (see [`CM_CLIENT`], [`CM_SERVER`]).

use super::cm::ConnectPrivate;
use super::decode::decode_call;
use super::decode::decode_header;
use super::decode::decode_reply;
use super::encode::encode_error_for;
use super::encode::encode_header;
use super::encode::BodyRef;
use super::encode::ChunkListsRef;
use super::encode::HeaderRef;
use super::msg::Body;
use super::msg::ChunkLists;
use super::msg::DecodeError;
use super::msg::DecodeLimits;
use super::msg::ErrorBody;
use super::msg::Header;
use super::msg::Proc;
use super::msg::ReadSegment;
use super::msg::Segment;

/// Which decoder a vector goes through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decoder {
    /// [`decode_header`] with [`DecodeLimits::server_default`].
    Any,
    /// [`decode_call`] with [`DecodeLimits::server_default`].
    Call,
    /// [`decode_reply`] with [`DecodeLimits::client_default`].
    Reply,
    /// [`ConnectPrivate::decode`].
    ConnectPrivate,
}

/// What a vector must produce.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// Decodes to `header`, with `payload_len` bytes after the header.
    Header {
        /// Expected fields; also encoded and compared with the bytes.
        header: HeaderRef<'static>,
        /// Bytes following the transport header.
        payload_len: usize,
    },
    /// Fails with `error`; `reply` is the expected `RDMA_ERROR` (with
    /// [`GOLDEN_CREDITS`]) or `None` if the message must be dropped.
    Reject {
        /// The exact error.
        error: DecodeError,
        /// Expected error reply bytes, checked when `Some`.
        reply: Option<&'static [u8]>,
    },
    /// Decodes to this private data, which encodes back to the first
    /// eight bytes.
    ConnectPrivate(ConnectPrivate),
}

/// One golden vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GoldenVector {
    /// Name, reported on failure.
    pub name: &'static str,
    /// The bytes on the wire.
    pub bytes: &'static [u8],
    /// The decoder to use.
    pub decoder: Decoder,
    /// The expected outcome.
    pub expect: Expect,
}

/// A failed golden check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GoldenFailure {
    /// Name of the failing vector.
    pub name: &'static str,
    /// What did not match.
    pub reason: &'static str,
}

/// Credits the server grants in the expected error replies.
pub const GOLDEN_CREDITS: u32 = 64;

/// Bytes of the `msg_no_chunks` vector.
pub const MSG_NO_CHUNKS: &[u8] = &[
    0x01, 0x02, 0x03, 0x04, // xid
    0x00, 0x00, 0x00, 0x01, // vers
    0x00, 0x00, 0x00, 0x80, // credits
    0x00, 0x00, 0x00, 0x00, // proc = RDMA_MSG
    0x00, 0x00, 0x00, 0x00, // read list: end
    0x00, 0x00, 0x00, 0x00, // write list: end
    0x00, 0x00, 0x00, 0x00, // reply chunk: absent
    0xa0, 0xa0, 0xa0, 0x00, // inline RPC word 0
    0xa0, 0xa0, 0xa0, 0x01, // inline RPC word 1
];

/// Bytes of the `msg_read_list` vector.
pub const MSG_READ_LIST: &[u8] = &[
    0x00, 0x00, 0x00, 0x11, // xid
    0x00, 0x00, 0x00, 0x01, // vers
    0x00, 0x00, 0x00, 0x80, // credits
    0x00, 0x00, 0x00, 0x00, // proc = RDMA_MSG
    0x00, 0x00, 0x00, 0x01, // read list: item present
    0x00, 0x00, 0x00, 0x10, // position
    0x11, 0x22, 0x33, 0x44, // handle
    0x00, 0x00, 0x20, 0x00, // length
    0x00, 0x00, 0x00, 0x11, // offset (hi)
    0x00, 0x00, 0x10, 0x00, // offset (lo)
    0x00, 0x00, 0x00, 0x01, // read list: item present
    0x00, 0x00, 0x00, 0x10, // position
    0x11, 0x22, 0x33, 0x55, // handle
    0x00, 0x00, 0x0f, 0xfc, // length
    0x00, 0x00, 0x00, 0x11, // offset (hi)
    0x00, 0x00, 0x30, 0x00, // offset (lo)
    0x00, 0x00, 0x00, 0x00, // read list: end
    0x00, 0x00, 0x00, 0x00, // write list: end
    0x00, 0x00, 0x00, 0x00, // reply chunk: absent
    0xa0, 0xa0, 0xa0, 0x00, // inline RPC word 0
    0xa0, 0xa0, 0xa0, 0x01, // inline RPC word 1
    0xa0, 0xa0, 0xa0, 0x02, // inline RPC word 2
    0xa0, 0xa0, 0xa0, 0x03, // inline RPC word 3
];

/// Bytes of the `msg_write_list` vector.
pub const MSG_WRITE_LIST: &[u8] = &[
    0x00, 0x00, 0x00, 0x22, // xid
    0x00, 0x00, 0x00, 0x01, // vers
    0x00, 0x00, 0x00, 0x20, // credits
    0x00, 0x00, 0x00, 0x00, // proc = RDMA_MSG
    0x00, 0x00, 0x00, 0x00, // read list: end
    0x00, 0x00, 0x00, 0x01, // write list: chunk present
    0x00, 0x00, 0x00, 0x02, // segment count
    0x55, 0x66, 0x77, 0x88, // handle
    0x00, 0x01, 0x00, 0x00, // length
    0x00, 0x00, 0x00, 0x22, // offset (hi)
    0x00, 0x00, 0x00, 0x00, // offset (lo)
    0x00, 0x00, 0x0a, 0xbc, // handle
    0x00, 0x00, 0x00, 0x04, // length
    0x00, 0x00, 0x00, 0x22, // offset (hi)
    0xff, 0xff, 0xff, 0xf0, // offset (lo)
    0x00, 0x00, 0x00, 0x00, // write list: end
    0x00, 0x00, 0x00, 0x00, // reply chunk: absent
    0xa0, 0xa0, 0xa0, 0x00, // inline RPC word 0
    0xa0, 0xa0, 0xa0, 0x01, // inline RPC word 1
];

/// Bytes of the `msg_reply_chunk` vector.
pub const MSG_REPLY_CHUNK: &[u8] = &[
    0x00, 0x00, 0x00, 0x33, // xid
    0x00, 0x00, 0x00, 0x01, // vers
    0x00, 0x00, 0x00, 0x80, // credits
    0x00, 0x00, 0x00, 0x00, // proc = RDMA_MSG
    0x00, 0x00, 0x00, 0x00, // read list: end
    0x00, 0x00, 0x00, 0x00, // write list: end
    0x00, 0x00, 0x00, 0x01, // reply chunk: present
    0x00, 0x00, 0x00, 0x03, // segment count
    0x01, 0x02, 0x00, 0x01, // handle
    0x00, 0x00, 0x04, 0x00, // length
    0x00, 0x00, 0x00, 0x33, // offset (hi)
    0x00, 0x00, 0x00, 0x00, // offset (lo)
    0x01, 0x02, 0x00, 0x02, // handle
    0x00, 0x00, 0x80, 0x00, // length
    0x00, 0x00, 0x00, 0x33, // offset (hi)
    0x00, 0x01, 0x00, 0x00, // offset (lo)
    0x01, 0x02, 0x00, 0x03, // handle
    0x00, 0x00, 0x01, 0x00, // length
    0x00, 0x00, 0x00, 0x33, // offset (hi)
    0x00, 0x02, 0x00, 0x00, // offset (lo)
    0xa0, 0xa0, 0xa0, 0x00, // inline RPC word 0
    0xa0, 0xa0, 0xa0, 0x01, // inline RPC word 1
];

/// Bytes of the `nomsg_pos0_read` vector.
pub const NOMSG_POS0_READ: &[u8] = &[
    0x00, 0x00, 0x00, 0x44, // xid
    0x00, 0x00, 0x00, 0x01, // vers
    0x00, 0x00, 0x00, 0x80, // credits
    0x00, 0x00, 0x00, 0x01, // proc = RDMA_NOMSG
    0x00, 0x00, 0x00, 0x01, // read list: item present
    0x00, 0x00, 0x00, 0x00, // position
    0x0a, 0x0b, 0x0c, 0x01, // handle
    0x00, 0x00, 0x10, 0x00, // length
    0x00, 0x00, 0x00, 0x44, // offset (hi)
    0x00, 0x00, 0x00, 0x00, // offset (lo)
    0x00, 0x00, 0x00, 0x01, // read list: item present
    0x00, 0x00, 0x00, 0x00, // position
    0x0a, 0x0b, 0x0c, 0x02, // handle
    0x00, 0x00, 0x02, 0x34, // length
    0x00, 0x00, 0x00, 0x44, // offset (hi)
    0x00, 0x00, 0x10, 0x00, // offset (lo)
    0x00, 0x00, 0x00, 0x00, // read list: end
    0x00, 0x00, 0x00, 0x00, // write list: end
    0x00, 0x00, 0x00, 0x01, // reply chunk: present
    0x00, 0x00, 0x00, 0x01, // segment count
    0x0a, 0x0b, 0x0c, 0x03, // handle
    0x00, 0x00, 0x20, 0x00, // length
    0x00, 0x00, 0x00, 0x44, // offset (hi)
    0x00, 0x01, 0x00, 0x00, // offset (lo)
];

/// Bytes of the `error_vers` vector.
pub const ERROR_VERS: &[u8] = &[
    0x00, 0x00, 0x00, 0x55, // xid
    0x00, 0x00, 0x00, 0x01, // vers
    0x00, 0x00, 0x00, 0x80, // credits
    0x00, 0x00, 0x00, 0x04, // proc = RDMA_ERROR
    0x00, 0x00, 0x00, 0x01, // ERR_VERS
    0x00, 0x00, 0x00, 0x01, // low
    0x00, 0x00, 0x00, 0x01, // high
];

/// Bytes of the `error_chunk` vector.
pub const ERROR_CHUNK: &[u8] = &[
    0x00, 0x00, 0x00, 0x66, // xid
    0x00, 0x00, 0x00, 0x01, // vers
    0x00, 0x00, 0x00, 0x80, // credits
    0x00, 0x00, 0x00, 0x04, // proc = RDMA_ERROR
    0x00, 0x00, 0x00, 0x02, // ERR_CHUNK
];

/// Bytes of the `done` vector.
pub const DONE: &[u8] = &[
    0x00, 0x00, 0x00, 0x77, // xid
    0x00, 0x00, 0x00, 0x01, // vers
    0x00, 0x00, 0x00, 0x00, // credits
    0x00, 0x00, 0x00, 0x03, // proc = RDMA_DONE
];

/// Bytes of the `msgp` vector.
pub const MSGP: &[u8] = &[
    0x00, 0x00, 0x00, 0x88, // xid
    0x00, 0x00, 0x00, 0x01, // vers
    0x00, 0x00, 0x00, 0x10, // credits
    0x00, 0x00, 0x00, 0x02, // proc = RDMA_MSGP
    0x00, 0x00, 0x00, 0x04, // align
    0x00, 0x00, 0x04, 0x00, // thresh
    0x00, 0x00, 0x00, 0x00, // read list: end
    0x00, 0x00, 0x00, 0x00, // write list: end
    0x00, 0x00, 0x00, 0x00, // reply chunk: absent
    0xa0, 0xa0, 0xa0, 0x00, // inline RPC word 0
    0xa0, 0xa0, 0xa0, 0x01, // inline RPC word 1
];

/// Bytes of the `reject_bad_version` vector.
pub const REJECT_BAD_VERSION: &[u8] = &[
    0x00, 0x00, 0x01, 0x01, // xid
    0x00, 0x00, 0x00, 0x02, // vers
    0x00, 0x00, 0x00, 0x80, // credits
    0x00, 0x00, 0x00, 0x00, // proc = RDMA_MSG
    0x00, 0x00, 0x00, 0x00, // read list: end
    0x00, 0x00, 0x00, 0x00, // write list: end
    0x00, 0x00, 0x00, 0x00, // reply chunk: absent
];

/// Bytes of the `reject_err_vers_reply` vector.
pub const REJECT_ERR_VERS_REPLY: &[u8] = &[
    0x00, 0x00, 0x01, 0x01, // xid
    0x00, 0x00, 0x00, 0x02, // vers
    0x00, 0x00, 0x00, 0x40, // credits
    0x00, 0x00, 0x00, 0x04, // proc = RDMA_ERROR
    0x00, 0x00, 0x00, 0x01, // ERR_VERS
    0x00, 0x00, 0x00, 0x01, // low
    0x00, 0x00, 0x00, 0x01, // high
];

/// Bytes of the `reject_zero_segments` vector.
pub const REJECT_ZERO_SEGMENTS: &[u8] = &[
    0x00, 0x00, 0x01, 0x02, // xid
    0x00, 0x00, 0x00, 0x01, // vers
    0x00, 0x00, 0x00, 0x80, // credits
    0x00, 0x00, 0x00, 0x00, // proc = RDMA_MSG
    0x00, 0x00, 0x00, 0x00, // read list: end
    0x00, 0x00, 0x00, 0x01, // write list: chunk present
    0x00, 0x00, 0x00, 0x00, // segment count = 0
    0x00, 0x00, 0x00, 0x00, // write list: end
    0x00, 0x00, 0x00, 0x00, // reply chunk: absent
];

/// Bytes of the `reject_err_chunk_reply` vector.
pub const REJECT_ERR_CHUNK_REPLY: &[u8] = &[
    0x00, 0x00, 0x01, 0x02, // xid
    0x00, 0x00, 0x00, 0x01, // vers
    0x00, 0x00, 0x00, 0x40, // credits
    0x00, 0x00, 0x00, 0x04, // proc = RDMA_ERROR
    0x00, 0x00, 0x00, 0x02, // ERR_CHUNK
];

/// Bytes of the `reject_misaligned_position` vector.
pub const REJECT_MISALIGNED_POSITION: &[u8] = &[
    0x00, 0x00, 0x01, 0x03, // xid
    0x00, 0x00, 0x00, 0x01, // vers
    0x00, 0x00, 0x00, 0x80, // credits
    0x00, 0x00, 0x00, 0x00, // proc = RDMA_MSG
    0x00, 0x00, 0x00, 0x01, // read list: item present
    0x00, 0x00, 0x00, 0x06, // position
    0x00, 0x00, 0x00, 0x01, // handle
    0x00, 0x00, 0x01, 0x00, // length
    0x00, 0x00, 0x00, 0x00, // offset (hi)
    0x00, 0x00, 0x10, 0x00, // offset (lo)
    0x00, 0x00, 0x00, 0x00, // read list: end
    0x00, 0x00, 0x00, 0x00, // write list: end
    0x00, 0x00, 0x00, 0x00, // reply chunk: absent
    0xa0, 0xa0, 0xa0, 0x00, // inline RPC word 0
    0xa0, 0xa0, 0xa0, 0x01, // inline RPC word 1
];

/// Bytes of the `reject_position_range` vector.
pub const REJECT_POSITION_RANGE: &[u8] = &[
    0x00, 0x00, 0x01, 0x04, // xid
    0x00, 0x00, 0x00, 0x01, // vers
    0x00, 0x00, 0x00, 0x80, // credits
    0x00, 0x00, 0x00, 0x00, // proc = RDMA_MSG
    0x00, 0x00, 0x00, 0x01, // read list: item present
    0x00, 0x00, 0x00, 0x40, // position
    0x00, 0x00, 0x00, 0x01, // handle
    0x00, 0x00, 0x01, 0x00, // length
    0x00, 0x00, 0x00, 0x00, // offset (hi)
    0x00, 0x00, 0x10, 0x00, // offset (lo)
    0x00, 0x00, 0x00, 0x00, // read list: end
    0x00, 0x00, 0x00, 0x00, // write list: end
    0x00, 0x00, 0x00, 0x00, // reply chunk: absent
    0xa0, 0xa0, 0xa0, 0x00, // inline RPC word 0
    0xa0, 0xa0, 0xa0, 0x01, // inline RPC word 1
];

/// Bytes of the `reject_overlap` vector.
pub const REJECT_OVERLAP: &[u8] = &[
    0x00, 0x00, 0x01, 0x05, // xid
    0x00, 0x00, 0x00, 0x01, // vers
    0x00, 0x00, 0x00, 0x80, // credits
    0x00, 0x00, 0x00, 0x00, // proc = RDMA_MSG
    0x00, 0x00, 0x00, 0x01, // read list: item present
    0x00, 0x00, 0x00, 0x04, // position
    0x00, 0x00, 0x00, 0x01, // handle
    0x00, 0x00, 0x01, 0x00, // length
    0x00, 0x00, 0x00, 0x00, // offset (hi)
    0x00, 0x00, 0x10, 0x00, // offset (lo)
    0x00, 0x00, 0x00, 0x01, // read list: item present
    0x00, 0x00, 0x00, 0x08, // position
    0x00, 0x00, 0x00, 0x02, // handle
    0x00, 0x00, 0x01, 0x00, // length
    0x00, 0x00, 0x00, 0x00, // offset (hi)
    0x00, 0x00, 0x20, 0x00, // offset (lo)
    0x00, 0x00, 0x00, 0x00, // read list: end
    0x00, 0x00, 0x00, 0x00, // write list: end
    0x00, 0x00, 0x00, 0x00, // reply chunk: absent
    0xa0, 0xa0, 0xa0, 0x00, // inline RPC word 0
    0xa0, 0xa0, 0xa0, 0x01, // inline RPC word 1
    0xa0, 0xa0, 0xa0, 0x02, // inline RPC word 2
    0xa0, 0xa0, 0xa0, 0x03, // inline RPC word 3
];

/// Bytes of the `reject_count_exceeds` vector.
pub const REJECT_COUNT_EXCEEDS: &[u8] = &[
    0x00, 0x00, 0x01, 0x06, // xid
    0x00, 0x00, 0x00, 0x01, // vers
    0x00, 0x00, 0x00, 0x80, // credits
    0x00, 0x00, 0x00, 0x00, // proc = RDMA_MSG
    0x00, 0x00, 0x00, 0x00, // read list: end
    0x00, 0x00, 0x00, 0x00, // write list: end
    0x00, 0x00, 0x00, 0x01, // reply chunk: present
    0x00, 0x00, 0x00, 0x08, // segment count = 8, only 1 follows
    0x00, 0x00, 0x00, 0x01, // handle
    0x00, 0x00, 0x01, 0x00, // length
    0x00, 0x00, 0x00, 0x00, // offset (hi)
    0x00, 0x00, 0x10, 0x00, // offset (lo)
];

/// Bytes of the `reject_unknown_proc` vector.
pub const REJECT_UNKNOWN_PROC: &[u8] = &[
    0x00, 0x00, 0x01, 0x07, // xid
    0x00, 0x00, 0x00, 0x01, // vers
    0x00, 0x00, 0x00, 0x80, // credits
    0x00, 0x00, 0x00, 0x07, // proc = 7 (unknown)
];

/// Bytes of the `reject_discriminator` vector.
pub const REJECT_DISCRIMINATOR: &[u8] = &[
    0x00, 0x00, 0x01, 0x08, // xid
    0x00, 0x00, 0x00, 0x01, // vers
    0x00, 0x00, 0x00, 0x80, // credits
    0x00, 0x00, 0x00, 0x00, // proc = RDMA_MSG
    0x00, 0x00, 0x00, 0x02, // read list: bad discriminator 2
    0x00, 0x00, 0x00, 0x00, // write list: end
    0x00, 0x00, 0x00, 0x00, // reply chunk: absent
];

/// Bytes of the `reject_truncated` vector.
pub const REJECT_TRUNCATED: &[u8] = &[
    0x00, 0x00, 0x01, 0x09, // xid
    0x00, 0x00, 0x00, 0x01, // vers
    0x00, 0x00, 0x00, 0x80, // credits
    0x00, 0x00, 0x00, 0x00, // proc = RDMA_MSG
    0x00, 0x00, 0x00, 0x01, // read list: item present
    0x00, 0x00, 0x00, 0x00, // position
    0x00, 0x00, 0x00, 0x05, // handle, then nothing
];

/// Bytes of the `reject_nomsg_no_call_chunk` vector.
pub const REJECT_NOMSG_NO_CALL_CHUNK: &[u8] = &[
    0x00, 0x00, 0x01, 0x0a, // xid
    0x00, 0x00, 0x00, 0x01, // vers
    0x00, 0x00, 0x00, 0x80, // credits
    0x00, 0x00, 0x00, 0x01, // proc = RDMA_NOMSG
    0x00, 0x00, 0x00, 0x00, // read list: end
    0x00, 0x00, 0x00, 0x00, // write list: end
    0x00, 0x00, 0x00, 0x00, // reply chunk: absent
];

/// Bytes of the `reject_payload_too_large` vector.
pub const REJECT_PAYLOAD_TOO_LARGE: &[u8] = &[
    0x00, 0x00, 0x01, 0x0b, // xid
    0x00, 0x00, 0x00, 0x01, // vers
    0x00, 0x00, 0x00, 0x80, // credits
    0x00, 0x00, 0x00, 0x01, // proc = RDMA_NOMSG
    0x00, 0x00, 0x00, 0x01, // read list: item present
    0x00, 0x00, 0x00, 0x00, // position
    0x00, 0x00, 0x00, 0x01, // handle
    0x01, 0x00, 0x00, 0x00, // length
    0x00, 0x00, 0x00, 0x00, // offset (hi)
    0x00, 0x00, 0x10, 0x00, // offset (lo)
    0x00, 0x00, 0x00, 0x00, // read list: end
    0x00, 0x00, 0x00, 0x00, // write list: end
    0x00, 0x00, 0x00, 0x00, // reply chunk: absent
];

/// Bytes of the `reject_reply_with_read_list` vector.
pub const REJECT_REPLY_WITH_READ_LIST: &[u8] = &[
    0x00, 0x00, 0x01, 0x0c, // xid
    0x00, 0x00, 0x00, 0x01, // vers
    0x00, 0x00, 0x00, 0x80, // credits
    0x00, 0x00, 0x00, 0x00, // proc = RDMA_MSG
    0x00, 0x00, 0x00, 0x01, // read list: item present
    0x00, 0x00, 0x00, 0x04, // position
    0x00, 0x00, 0x00, 0x01, // handle
    0x00, 0x00, 0x00, 0x10, // length
    0x00, 0x00, 0x00, 0x00, // offset (hi)
    0x00, 0x00, 0x10, 0x00, // offset (lo)
    0x00, 0x00, 0x00, 0x00, // read list: end
    0x00, 0x00, 0x00, 0x00, // write list: end
    0x00, 0x00, 0x00, 0x00, // reply chunk: absent
    0xa0, 0xa0, 0xa0, 0x00, // inline RPC word 0
    0xa0, 0xa0, 0xa0, 0x01, // inline RPC word 1
];

/// `RPCRDMA_CMP` private data the Linux client sends with 4 KiB inline
/// thresholds: magic, version 1, `SEND_W_INV_OK`, (4096 >> 10) - 1 twice.
pub const CM_CLIENT: &[u8] = &[0xf6, 0xab, 0x0e, 0x18, 0x01, 0x01, 0x03, 0x03];

/// Private data the Linux server sends (no flags, `sc_max_req_size` 4096).
pub const CM_SERVER: &[u8] = &[0xf6, 0xab, 0x0e, 0x18, 0x01, 0x00, 0x03, 0x03];

/// Client private data as padded by the InfiniBand CM (extra zero bytes,
/// which RFC 8797 receivers ignore), with 1 KiB send and 64 KiB receive.
pub const CM_PADDED: &[u8] = &[
    0xf6, 0xab, 0x0e, 0x18, 0x01, 0x01, 0x00, 0x3f, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
];

const fn hdr(xid: u32, credits: u32, body: BodyRef<'static>) -> HeaderRef<'static> {
    HeaderRef {
        xid,
        vers: 1,
        credits,
        body,
    }
}

const fn reject(error: DecodeError, reply: Option<&'static [u8]>) -> Expect {
    Expect::Reject { error, reply }
}

/// Every golden vector.
pub const VECTORS: &[GoldenVector] = &[
    GoldenVector {
        name: "msg_no_chunks",
        bytes: MSG_NO_CHUNKS,
        decoder: Decoder::Call,
        expect: Expect::Header {
            header: hdr(0x0102_0304, 128, BodyRef::Msg(ChunkListsRef::EMPTY)),
            payload_len: 8,
        },
    },
    GoldenVector {
        name: "msg_read_list",
        bytes: MSG_READ_LIST,
        decoder: Decoder::Call,
        expect: Expect::Header {
            header: hdr(
                0x11,
                128,
                BodyRef::Msg(ChunkListsRef {
                    read: &[
                        ReadSegment::new(16, 0x1122_3344, 0x2000, 0x0000_0011_0000_1000),
                        ReadSegment::new(16, 0x1122_3355, 0x0ffc, 0x0000_0011_0000_3000),
                    ],
                    write: &[],
                    reply: None,
                }),
            ),
            payload_len: 16,
        },
    },
    GoldenVector {
        name: "msg_write_list",
        bytes: MSG_WRITE_LIST,
        decoder: Decoder::Call,
        expect: Expect::Header {
            header: hdr(
                0x22,
                32,
                BodyRef::Msg(ChunkListsRef {
                    read: &[],
                    write: &[&[
                        Segment::new(0x5566_7788, 0x0001_0000, 0x0000_0022_0000_0000),
                        Segment::new(0x0000_0abc, 4, 0x0000_0022_ffff_fff0),
                    ]],
                    reply: None,
                }),
            ),
            payload_len: 8,
        },
    },
    GoldenVector {
        name: "msg_reply_chunk",
        bytes: MSG_REPLY_CHUNK,
        decoder: Decoder::Call,
        expect: Expect::Header {
            header: hdr(
                0x33,
                128,
                BodyRef::Msg(ChunkListsRef {
                    read: &[],
                    write: &[],
                    reply: Some(&[
                        Segment::new(0x0102_0001, 0x0400, 0x0000_0033_0000_0000),
                        Segment::new(0x0102_0002, 0x8000, 0x0000_0033_0001_0000),
                        Segment::new(0x0102_0003, 0x0100, 0x0000_0033_0002_0000),
                    ]),
                }),
            ),
            payload_len: 8,
        },
    },
    GoldenVector {
        name: "nomsg_pos0_read",
        bytes: NOMSG_POS0_READ,
        decoder: Decoder::Call,
        expect: Expect::Header {
            header: hdr(
                0x44,
                128,
                BodyRef::NoMsg(ChunkListsRef {
                    read: &[
                        ReadSegment::new(0, 0x0a0b_0c01, 0x1000, 0x0000_0044_0000_0000),
                        ReadSegment::new(0, 0x0a0b_0c02, 0x0234, 0x0000_0044_0000_1000),
                    ],
                    write: &[],
                    reply: Some(&[Segment::new(0x0a0b_0c03, 0x2000, 0x0000_0044_0001_0000)]),
                }),
            ),
            payload_len: 0,
        },
    },
    GoldenVector {
        name: "error_vers",
        bytes: ERROR_VERS,
        decoder: Decoder::Reply,
        expect: Expect::Header {
            header: hdr(
                0x55,
                128,
                BodyRef::Error(ErrorBody::Vers { low: 1, high: 1 }),
            ),
            payload_len: 0,
        },
    },
    GoldenVector {
        name: "error_chunk",
        bytes: ERROR_CHUNK,
        decoder: Decoder::Reply,
        expect: Expect::Header {
            header: hdr(0x66, 128, BodyRef::Error(ErrorBody::Chunk)),
            payload_len: 0,
        },
    },
    GoldenVector {
        name: "done",
        bytes: DONE,
        decoder: Decoder::Any,
        expect: Expect::Header {
            header: hdr(0x77, 0, BodyRef::Done),
            payload_len: 0,
        },
    },
    GoldenVector {
        name: "msgp",
        bytes: MSGP,
        decoder: Decoder::Any,
        expect: Expect::Header {
            header: hdr(
                0x88,
                16,
                BodyRef::Msgp {
                    align: 4,
                    thresh: 1024,
                    chunks: ChunkListsRef::EMPTY,
                },
            ),
            payload_len: 8,
        },
    },
    GoldenVector {
        name: "cm_client",
        bytes: CM_CLIENT,
        decoder: Decoder::ConnectPrivate,
        expect: Expect::ConnectPrivate(ConnectPrivate {
            version: 1,
            flags: 1,
            send_size: 3,
            recv_size: 3,
        }),
    },
    GoldenVector {
        name: "cm_server",
        bytes: CM_SERVER,
        decoder: Decoder::ConnectPrivate,
        expect: Expect::ConnectPrivate(ConnectPrivate {
            version: 1,
            flags: 0,
            send_size: 3,
            recv_size: 3,
        }),
    },
    GoldenVector {
        name: "cm_padded",
        bytes: CM_PADDED,
        decoder: Decoder::ConnectPrivate,
        expect: Expect::ConnectPrivate(ConnectPrivate {
            version: 1,
            flags: 1,
            send_size: 0,
            recv_size: 63,
        }),
    },
    GoldenVector {
        name: "reject_bad_version",
        bytes: REJECT_BAD_VERSION,
        decoder: Decoder::Call,
        expect: reject(DecodeError::BadVersion(2), Some(REJECT_ERR_VERS_REPLY)),
    },
    GoldenVector {
        name: "reject_zero_segments",
        bytes: REJECT_ZERO_SEGMENTS,
        decoder: Decoder::Call,
        expect: reject(DecodeError::ZeroSegments, Some(REJECT_ERR_CHUNK_REPLY)),
    },
    GoldenVector {
        name: "reject_misaligned_position",
        bytes: REJECT_MISALIGNED_POSITION,
        decoder: Decoder::Call,
        expect: reject(DecodeError::MisalignedPosition(6), None),
    },
    GoldenVector {
        name: "reject_position_range",
        bytes: REJECT_POSITION_RANGE,
        decoder: Decoder::Call,
        expect: reject(DecodeError::PositionOutOfRange(64), None),
    },
    GoldenVector {
        name: "reject_overlap",
        bytes: REJECT_OVERLAP,
        decoder: Decoder::Call,
        expect: reject(DecodeError::OverlappingReadChunks, None),
    },
    GoldenVector {
        name: "reject_count_exceeds",
        bytes: REJECT_COUNT_EXCEEDS,
        decoder: Decoder::Call,
        expect: reject(DecodeError::CountExceedsBuffer, None),
    },
    GoldenVector {
        name: "reject_unknown_proc",
        bytes: REJECT_UNKNOWN_PROC,
        decoder: Decoder::Call,
        expect: reject(DecodeError::UnknownProc(7), None),
    },
    GoldenVector {
        name: "reject_discriminator",
        bytes: REJECT_DISCRIMINATOR,
        decoder: Decoder::Call,
        expect: reject(DecodeError::BadDiscriminator(2), None),
    },
    GoldenVector {
        name: "reject_truncated",
        bytes: REJECT_TRUNCATED,
        decoder: Decoder::Call,
        expect: reject(DecodeError::Truncated, None),
    },
    GoldenVector {
        name: "reject_nomsg_no_call_chunk",
        bytes: REJECT_NOMSG_NO_CALL_CHUNK,
        decoder: Decoder::Call,
        expect: reject(DecodeError::MissingCallChunk, None),
    },
    GoldenVector {
        name: "reject_payload_too_large",
        bytes: REJECT_PAYLOAD_TOO_LARGE,
        decoder: Decoder::Call,
        expect: reject(DecodeError::PayloadTooLarge, None),
    },
    GoldenVector {
        name: "reject_reply_with_read_list",
        bytes: REJECT_REPLY_WITH_READ_LIST,
        decoder: Decoder::Reply,
        expect: reject(DecodeError::UnexpectedChunk, None),
    },
    GoldenVector {
        name: "reject_msgp_call",
        bytes: MSGP,
        decoder: Decoder::Call,
        expect: reject(DecodeError::UnsupportedProc(Proc::Msgp), None),
    },
    GoldenVector {
        name: "reject_done_call",
        bytes: DONE,
        decoder: Decoder::Call,
        expect: reject(DecodeError::UnsupportedProc(Proc::Done), None),
    },
    GoldenVector {
        name: "reject_error_as_call",
        bytes: ERROR_CHUNK,
        decoder: Decoder::Call,
        expect: reject(DecodeError::UnsupportedProc(Proc::Error), None),
    },
];

fn decode<'a>(v: &GoldenVector, bytes: &'a [u8]) -> Result<Header<'a>, DecodeError> {
    match v.decoder {
        Decoder::Any | Decoder::ConnectPrivate => {
            decode_header(bytes, &DecodeLimits::server_default())
        }
        Decoder::Call => decode_call(bytes, &DecodeLimits::server_default()),
        Decoder::Reply => decode_reply(bytes, &DecodeLimits::client_default()),
    }
}

/// Compares decoded chunk lists with expected ones.
pub fn compare_chunks(got: &ChunkLists<'_>, want: &ChunkListsRef<'_>) -> Result<(), &'static str> {
    if usize::try_from(got.read.len()).ok() != Some(want.read.len())
        || !got.read.iter().eq(want.read.iter().copied())
    {
        return Err("read list differs");
    }
    if usize::try_from(got.write.len()).ok() != Some(want.write.len()) {
        return Err("write chunk count differs");
    }
    for (g, w) in got.write.iter().zip(want.write.iter()) {
        if !g.segments().eq(w.iter().copied()) {
            return Err("write chunk differs");
        }
    }
    match (&got.reply, want.reply) {
        (None, None) => Ok(()),
        (Some(g), Some(w)) if g.segments().eq(w.iter().copied()) => Ok(()),
        _ => Err("reply chunk differs"),
    }
}

/// Compares a decoded header with expected fields.
pub fn compare_header(got: &Header<'_>, want: &HeaderRef<'_>) -> Result<(), &'static str> {
    if got.xid != want.xid {
        return Err("xid differs");
    }
    if got.vers != want.vers {
        return Err("vers differs");
    }
    if got.credits != want.credits {
        return Err("credits differ");
    }
    match (&got.body, &want.body) {
        (Body::Msg { chunks, .. }, BodyRef::Msg(w))
        | (Body::NoMsg { chunks, .. }, BodyRef::NoMsg(w)) => compare_chunks(chunks, w),
        (
            Body::Msgp {
                align,
                thresh,
                chunks,
                ..
            },
            BodyRef::Msgp {
                align: wa,
                thresh: wt,
                chunks: w,
            },
        ) => {
            if align != wa || thresh != wt {
                return Err("msgp align/thresh differ");
            }
            compare_chunks(chunks, w)
        }
        (Body::Done, BodyRef::Done) => Ok(()),
        (Body::Error(g), BodyRef::Error(w)) if g == w => Ok(()),
        _ => Err("procedure or body differs"),
    }
}

/// Checks one vector.
pub fn check(v: &GoldenVector) -> Result<(), GoldenFailure> {
    let fail = |reason: &'static str| GoldenFailure {
        name: v.name,
        reason,
    };
    match &v.expect {
        Expect::Header {
            header,
            payload_len,
        } => {
            let got = decode(v, v.bytes).map_err(|_| fail("failed to decode"))?;
            compare_header(&got, header).map_err(fail)?;
            let hlen = v
                .bytes
                .len()
                .checked_sub(*payload_len)
                .ok_or(fail("payload longer than vector"))?;
            if got.header_len != hlen {
                return Err(fail("header length differs"));
            }
            // Small fixed buffer: every golden header is under 256 bytes.
            let mut buf = [0u8; 256];
            let n = encode_header(header, &mut buf).map_err(|_| fail("failed to encode"))?;
            let enc = buf.get(..n).ok_or(fail("encoder overran"))?;
            if Some(enc) != v.bytes.get(..hlen) {
                return Err(fail("encoding differs from vector"));
            }
            Ok(())
        }
        Expect::Reject { error, reply } => {
            match decode(v, v.bytes) {
                Ok(_) => return Err(fail("decoded but must be rejected")),
                Err(e) if e != *error => return Err(fail("rejected with the wrong error")),
                Err(_) => {}
            }
            if let Some(want) = reply {
                let mut buf = [0u8; 32];
                let n = encode_error_for(v.bytes, error, GOLDEN_CREDITS, &mut buf)
                    .map_err(|_| fail("failed to encode error reply"))?
                    .ok_or(fail("no error reply produced"))?;
                if buf.get(..n) != Some(*want) {
                    return Err(fail("error reply differs"));
                }
                // The reply itself must decode as an RDMA_ERROR; a reply to
                // a wrong-version call echoes that version, like C, so only
                // version-1 replies are decodable by a v1 requester.
                if let Ok(h) = decode_reply(want, &DecodeLimits::client_default()) {
                    if h.proc_() != Proc::Error {
                        return Err(fail("error reply is not RDMA_ERROR"));
                    }
                }
            }
            Ok(())
        }
        Expect::ConnectPrivate(want) => {
            let got = ConnectPrivate::decode(v.bytes).map_err(|_| fail("failed to decode"))?;
            if got != *want {
                return Err(fail("private data differs"));
            }
            if v.bytes.get(..8) != Some(&want.to_bytes()[..]) {
                return Err(fail("encoding differs from vector"));
            }
            Ok(())
        }
    }
}

/// Checks every vector in [`VECTORS`] and returns how many passed.
pub fn run_all() -> Result<usize, GoldenFailure> {
    for v in VECTORS {
        check(v)?;
    }
    Ok(VECTORS.len())
}
