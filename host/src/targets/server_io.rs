//! Models of the server's I/O for the `server_receive` target: the
//! client's memory that RDMA Reads read and RDMA Writes write, and the
//! request's argument and Reply as `rust/sunrpc/svc.rs` `SvcRqst` exposes them.
//!
//! Memory is a pattern, so nothing is stored to know what a byte should
//! be; bytes are produced and compared only for messages up to
//! [`CAPTURE_MAX`], which keeps every execution fast.

use alloc::vec;
use alloc::vec::Vec;

/// Bytes are produced and checked for Calls and Replies up to this size.
pub const CAPTURE_MAX: usize = 64 * 1024;

/// The kernel error codes the server's code returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Errno {
    /// `EINVAL`.
    Inval,
    /// `E2BIG`.
    TooBig,
    /// `EMSGSIZE`.
    MsgSize,
}

/// Byte at `addr` of the client's memory registered under `rkey`.
pub fn client_byte(rkey: u32, addr: u64) -> u8 {
    let x = addr ^ u64::from(rkey).rotate_left(29);
    (x ^ (x >> 8) ^ (x >> 19) ^ 0xa5) as u8
}

/// Byte `off` of the Reply nfsd encoded (`rq_res`).
pub fn reply_byte(off: u32) -> u8 {
    let b = off.to_le_bytes();
    b[0] ^ b[1].rotate_left(3) ^ b[2].rotate_left(5) ^ 0x5a
}

/// The request's argument (`SvcRqst::set_arg`, `write_arg`,
/// `write_arg_from_buf`): a write outside it fails, as the C shim's do.
#[derive(Debug)]
pub struct Arg {
    /// `SvcRqst::arg_max`.
    pub arg_max: u32,
    /// Length set by `set_arg`.
    pub len: Option<u32>,
    /// End of the last write.
    pub cursor: u32,
    /// Writes that did not start where the previous one ended.
    pub gaps: u32,
    /// Calls the shim refused (outside the argument).
    pub refused: u32,
    /// The bytes written, when captured.
    pub data: Option<Vec<u8>>,
}

impl Arg {
    /// A request whose pages hold `arg_max` bytes.
    pub fn new(arg_max: u32) -> Self {
        Self {
            arg_max,
            len: None,
            cursor: 0,
            gaps: 0,
            refused: 0,
            data: None,
        }
    }

    /// `Rqst::set_arg`.
    pub fn set_arg(&mut self, len: u32) -> Result<(), Errno> {
        if len > self.arg_max {
            self.refused += 1;
            return Err(Errno::Inval);
        }
        self.len = Some(len);
        self.cursor = 0;
        self.data = (len as usize <= CAPTURE_MAX).then(|| vec![0; len as usize]);
        Ok(())
    }

    /// `Rqst::write_arg`: `len` bytes at `at`, byte `k` being `byte(k)`.
    pub fn write_arg(
        &mut self,
        at: u32,
        len: usize,
        byte: impl Fn(usize) -> u8,
    ) -> Result<(), Errno> {
        let end = u32::try_from(len).ok().and_then(|l| at.checked_add(l));
        let (Some(arg), Some(end)) = (self.len, end) else {
            self.refused += 1;
            return Err(Errno::Inval);
        };
        if end > arg {
            self.refused += 1;
            return Err(Errno::Inval);
        }
        if at != self.cursor {
            self.gaps += 1;
        }
        self.cursor = end;
        if let Some(d) = &mut self.data {
            for (k, b) in d[at as usize..end as usize].iter_mut().enumerate() {
                *b = byte(k);
            }
        }
        Ok(())
    }
}

/// The Reply nfsd encoded (`SvcRqst::res_len`, `read_res`,
/// `read_res_into_buf`).
#[derive(Clone, Copy, Debug)]
pub struct Res {
    /// `Rqst::res_len`.
    pub len: u32,
}

impl Res {
    /// Whether bytes are produced when read.
    pub fn captured(&self) -> bool {
        self.len as usize <= CAPTURE_MAX
    }

    /// `Rqst::read_res`: `len` bytes at `off` into `dst`, which is empty
    /// when the Reply is not captured; fails outside the Reply.
    pub fn read_res(&self, off: u32, len: usize, dst: &mut [u8]) -> Result<(), Errno> {
        let end = u32::try_from(len).ok().and_then(|l| off.checked_add(l));
        if end.is_none_or(|e| e > self.len) {
            return Err(Errno::Inval);
        }
        if !dst.is_empty() {
            assert_eq!(dst.len(), len, "read_res into a buffer of another length");
            for (k, b) in dst.iter_mut().enumerate() {
                *b = reply_byte(off + k as u32);
            }
        }
        Ok(())
    }
}
