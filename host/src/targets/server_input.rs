//! The input of the `server_receive` target: connection and request
//! parameters, then the received message.
//!
//! Layout (big-endian; missing bytes read as zero, so every input is
//! usable):
//!
//! | bytes  | field                                                     |
//! |--------|-----------------------------------------------------------|
//! | 0..8   | the client's RFC 8797 private data                        |
//! | 8..10  | the server's inline send size, `1024 + v % 64513`         |
//! | 10..12 | the server's inline receive size, `1024 + v % 64513`      |
//! | 12..16 | `arg_max` of the request that receives the Call           |
//! | 16..20 | credits                                                   |
//! | 20..24 | Reply length (see [`MAX_REPLY`])                          |
//! | 24     | [`flags`]                                                 |
//! | 25     | number of result payloads (`& 7`)                         |
//! | 26     | largest RDMA Read/Write piece, one of [`PIECE_SIZES`]     |
//! | 27     | reserved                                                  |
//! | 28..   | result payloads, 8 bytes each, then the received message  |

use alloc::vec::Vec;

use crate::proto::cm::CM_PRIVATE_LEN;

/// Length of the fixed part before the result payloads.
pub const PREFIX_LEN: usize = 28;

/// Piece sizes the server may use: the kernel's (64 KiB), a page, and
/// two that divide nothing the client chooses.
pub const PIECE_SIZES: [usize; 4] = [64 * 1024, 4096, 1000, 1500];

/// Largest Reply nfsd builds: a 4 MiB payload and some slack. Larger
/// values are reduced modulo this, which keeps every execution fast.
pub const MAX_REPLY: u32 = 4 * 1024 * 1024 + 64 * 1024;

/// `flags` bits.
pub mod flags {
    /// nfsd set up a backchannel on the connection.
    pub const BACKCHANNEL: u8 = 1 << 0;
    /// The client sent private data; else none.
    pub const PRIVATE_DATA: u8 = 1 << 1;
    /// The device has memory management extensions (Send With Invalidate).
    pub const MEM_MGT: u8 = 1 << 2;
    /// Result payloads are placed as nfsd places them (increasing,
    /// 4-aligned, inside the Reply); else taken raw.
    pub const SHAPED: u8 = 1 << 3;
    /// The request that finishes a Call after its Reads has half the
    /// `arg_max` of the one that started it.
    pub const SMALLER_FINISH: u8 = 1 << 4;
}

/// Parameters of one run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerParams {
    /// RFC 8797 private data from the client (with `PRIVATE_DATA`).
    pub private_data: [u8; CM_PRIVATE_LEN],
    /// `max_inline_read`: the server's inline send size.
    pub local_send: u32,
    /// `max_inline_write`: the server's inline receive size.
    pub local_recv: u32,
    /// `arg_max` of the request that receives the Call.
    pub arg_max: u32,
    /// Credit grant.
    pub credits: u32,
    /// Raw Reply length.
    pub res_len: u32,
    /// [`flags`].
    pub flags: u8,
    /// Index into [`PIECE_SIZES`].
    pub piece: u8,
    /// Raw result payloads: (position or gap, length).
    pub payloads: Vec<(u32, u32)>,
}

impl ServerParams {
    /// Whether flag `f` is set.
    pub fn has(&self, f: u8) -> bool {
        self.flags & f != 0
    }

    /// The largest RDMA Read or Write.
    pub fn max_piece(&self) -> usize {
        PIECE_SIZES[usize::from(self.piece) % PIECE_SIZES.len()]
    }
}

struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let mut a = [0u8; N];
        let start = self.pos.min(self.data.len());
        let end = self.pos.saturating_add(N).min(self.data.len());
        a[..end - start].copy_from_slice(&self.data[start..end]);
        self.pos = self.pos.saturating_add(N);
        a
    }

    fn u8(&mut self) -> u8 {
        self.take::<1>()[0]
    }

    fn u16(&mut self) -> u16 {
        u16::from_be_bytes(self.take())
    }

    fn u32(&mut self) -> u32 {
        u32::from_be_bytes(self.take())
    }

    fn rest(&self) -> &'a [u8] {
        self.data.get(self.pos..).unwrap_or(&[])
    }
}

/// Splits an input into parameters and the received message.
pub fn split(data: &[u8]) -> (ServerParams, &[u8]) {
    let mut r = Cursor { data, pos: 0 };
    let private_data = r.take();
    let local_send = 1024 + u32::from(r.u16()) % 64513;
    let local_recv = 1024 + u32::from(r.u16()) % 64513;
    let arg_max = r.u32();
    let credits = r.u32();
    let res_len = r.u32();
    let flags = r.u8();
    let n = r.u8() & 7;
    let piece = r.u8();
    let _reserved = r.u8();
    let payloads = (0..n).map(|_| (r.u32(), r.u32())).collect();
    let p = ServerParams {
        private_data,
        local_send,
        local_recv,
        arg_max,
        credits,
        res_len,
        flags,
        piece,
        payloads,
    };
    (p, r.rest())
}

/// Builds an input from parameters and a message (for seeds and tests).
pub fn join(p: &ServerParams, msg: &[u8]) -> Vec<u8> {
    let inline = |v: u32| (v.clamp(1024, 65536) - 1024) as u16;
    let mut v = Vec::new();
    v.extend_from_slice(&p.private_data);
    v.extend_from_slice(&inline(p.local_send).to_be_bytes());
    v.extend_from_slice(&inline(p.local_recv).to_be_bytes());
    v.extend_from_slice(&p.arg_max.to_be_bytes());
    v.extend_from_slice(&p.credits.to_be_bytes());
    v.extend_from_slice(&p.res_len.to_be_bytes());
    v.push(p.flags);
    v.push(p.payloads.len().min(7) as u8);
    v.push(p.piece);
    v.push(0);
    for &(a, b) in p.payloads.iter().take(7) {
        v.extend_from_slice(&a.to_be_bytes());
        v.extend_from_slice(&b.to_be_bytes());
    }
    v.extend_from_slice(msg);
    v
}
