// SPDX-License-Identifier: GPL-2.0

//! RDMA-CM connection private data (RFC 8797).
//!
//! C: `struct rpcrdma_connect_private` in
//! [`include/linux/sunrpc/rpc_rdma.h`](srctree/include/linux/sunrpc/rpc_rdma.h),
//! built in `rpcrdma_ep_create()` (client) and `svc_rdma_accept()` (server),
//! read in `rpcrdma_update_cm_private()` and
//! `svc_rdma_parse_connect_private()`.
//!
//! Layout (8 bytes, packed):
//!
//! ```text
//! 0..4  magic   0xf6ab0e18, big-endian
//! 4     version 1
//! 5     flags   bit 0 = SEND_W_INV_OK (peer accepts Send With Invalidate)
//! 6     send    inline send size, (bytes >> 10) - 1
//! 7     recv    inline receive size, (bytes >> 10) - 1
//! ```
//!
//! The CM may hand over more bytes than were sent (InfiniBand pads private
//! data), and RFC 8797 lets later versions append fields, so decoding reads
//! the first 8 bytes and ignores the rest, as C does.

use super::msg::RPCRDMA_V1_DEF_INLINE_SIZE;

/// Magic number identifying RPC-over-RDMA private data.
pub const CM_MAGIC: u32 = 0xf6ab_0e18;

/// The private data format version this code produces and understands.
pub const CM_VERSION: u8 = 1;

/// Flag: the sender accepts Send With Invalidate.
pub const CM_FLAG_SEND_W_INV_OK: u8 = 1 << 0;

/// Encoded size of [`ConnectPrivate`].
pub const CM_PRIVATE_LEN: usize = 8;

/// Why private data was not understood.
///
/// C treats every one of these as "no private data" and falls back to
/// the 1 KiB v1 default; [`negotiate`] does the same.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmError {
    /// Fewer than [`CM_PRIVATE_LEN`] bytes.
    Short,
    /// The magic number is wrong (some other protocol's private data).
    BadMagic(u32),
    /// A version this code does not understand.
    BadVersion(u8),
    /// The output buffer is smaller than [`CM_PRIVATE_LEN`].
    NoSpace,
}

/// Encodes an inline buffer size for the private data.
///
/// RFC 8797 sizes are in KiB minus one, so 1 KiB..=256 KiB is the
/// representable range. Sizes outside it saturate, and sizes that are not
/// a multiple of 1 KiB round down. The C helper computes `(size >> 10) - 1`
/// in `u8` and so wraps a size below 1 KiB to 256 KiB: a deliberate
/// difference.
pub fn encode_buffer_size(size: u32) -> u8 {
    let kib = size >> 10;
    u8::try_from(kib.saturating_sub(1)).unwrap_or(u8::MAX)
}

/// Decodes an inline buffer size from the private data (1..=256 KiB).
pub fn decode_buffer_size(v: u8) -> u32 {
    // At most 256 << 10: no overflow.
    (u32::from(v) + 1) << 10
}

/// RPC-over-RDMA connection private data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectPrivate {
    /// Format version ([`CM_VERSION`]).
    pub version: u8,
    /// Flags ([`CM_FLAG_SEND_W_INV_OK`]); unknown bits are preserved.
    pub flags: u8,
    /// Encoded inline send size of the sender.
    pub send_size: u8,
    /// Encoded inline receive size of the sender.
    pub recv_size: u8,
}

impl ConnectPrivate {
    /// Private data advertising the given inline sizes in bytes.
    pub fn new(inline_send: u32, inline_recv: u32, send_w_inv_ok: bool) -> Self {
        Self {
            version: CM_VERSION,
            flags: if send_w_inv_ok {
                CM_FLAG_SEND_W_INV_OK
            } else {
                0
            },
            send_size: encode_buffer_size(inline_send),
            recv_size: encode_buffer_size(inline_recv),
        }
    }

    /// What the Linux client sends (C `rpcrdma_ep_create()`).
    pub fn client(inline_send: u32, inline_recv: u32) -> Self {
        Self::new(inline_send, inline_recv, true)
    }

    /// What the Linux server sends (C `svc_rdma_accept()`): no flags and
    /// its maximum request size in both fields.
    pub fn server(max_req_size: u32) -> Self {
        Self::new(max_req_size, max_req_size, false)
    }

    /// The sender's inline send size in bytes.
    pub fn inline_send(&self) -> u32 {
        decode_buffer_size(self.send_size)
    }

    /// The sender's inline receive size in bytes.
    pub fn inline_recv(&self) -> u32 {
        decode_buffer_size(self.recv_size)
    }

    /// Whether the sender accepts Send With Invalidate.
    pub const fn send_w_inv_ok(&self) -> bool {
        self.flags & CM_FLAG_SEND_W_INV_OK != 0
    }

    /// Encodes into the first [`CM_PRIVATE_LEN`] bytes of `out`.
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, CmError> {
        let dst = out.get_mut(..CM_PRIVATE_LEN).ok_or(CmError::NoSpace)?;
        dst.copy_from_slice(&self.to_bytes());
        Ok(CM_PRIVATE_LEN)
    }

    /// The encoded form.
    pub const fn to_bytes(&self) -> [u8; CM_PRIVATE_LEN] {
        let m = CM_MAGIC.to_be_bytes();
        [
            m[0],
            m[1],
            m[2],
            m[3],
            self.version,
            self.flags,
            self.send_size,
            self.recv_size,
        ]
    }

    /// Decodes private data received from the CM.
    pub fn decode(data: &[u8]) -> Result<Self, CmError> {
        match *data {
            [a, b, c, d, version, flags, send_size, recv_size, ..] => {
                let magic = u32::from_be_bytes([a, b, c, d]);
                if magic != CM_MAGIC {
                    return Err(CmError::BadMagic(magic));
                }
                if version != CM_VERSION {
                    return Err(CmError::BadVersion(version));
                }
                Ok(Self {
                    version,
                    flags,
                    send_size,
                    recv_size,
                })
            }
            _ => Err(CmError::Short),
        }
    }
}

/// Inline thresholds and options agreed for a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Negotiated {
    /// Largest message this side may send inline.
    pub inline_send: u32,
    /// Largest message this side may receive inline.
    pub inline_recv: u32,
    /// Whether the peer accepts Send With Invalidate.
    pub peer_send_w_inv_ok: bool,
}

/// Combines local inline sizes with the peer's private data.
///
/// Like C `rpcrdma_update_cm_private()`: without valid private data the
/// peer is assumed to handle only the 1 KiB v1 default; each direction is
/// the smaller of what this side wants and what the peer can do (the
/// peer's send size bounds our receive size and vice versa).
pub fn negotiate(local_send: u32, local_recv: u32, peer: Option<&[u8]>) -> Negotiated {
    let parsed = peer.and_then(|d| ConnectPrivate::decode(d).ok());
    let (peer_send, peer_recv, inv) = match parsed {
        Some(p) => (p.inline_send(), p.inline_recv(), p.send_w_inv_ok()),
        None => (
            RPCRDMA_V1_DEF_INLINE_SIZE,
            RPCRDMA_V1_DEF_INLINE_SIZE,
            false,
        ),
    };
    Negotiated {
        inline_send: local_send.min(peer_recv),
        inline_recv: local_recv.min(peer_send),
        peer_send_w_inv_ok: inv,
    }
}
