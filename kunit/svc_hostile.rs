// SPDX-License-Identifier: GPL-2.0

//! Crafted calls against the server transport (svcrdma) of a running
//! `rpcrdma_rs.ko` with nfsd listening on RDMA port 20049 of the suite's
//! peer address (scenario `svc-hostile`).
//!
//! The suite connects with the verbs layer as an RPC-over-RDMA client and
//! sends malformed transport headers, checking each answer: `ERR_VERS`
//! (with the supported range 1..1) for a bad version, `ERR_CHUNK` for
//! broken chunk lists, nothing for `RDMA_DONE`; and after every bad call a
//! valid NFS `NULL` call on the same connection still gets its Reply.
//!
//! Without a server (the `kunit` scenario) the connection is refused and
//! every case passes without checking anything; it logs
//! "svc_hostile: no server" so the scenario can tell.

use crate::proto::cm::ConnectPrivate;
use crate::rdma::cm::{Addr, CmEvent, CmId};
use crate::rdma::verbs::{
    CompletionHandler, DmaBuf, DmaDir, Endpoint, EndpointConfig, Segment, SendOp, WorkCompletion,
    WorkRequest,
};
use kernel::alloc::KVec;
use kernel::new_condvar;
use kernel::new_spinlock_irq;
use kernel::prelude::*;
use kernel::sync::{Arc, CondVar, CondVarTimeoutResult, SpinLockIrq};
use kernel::time::msecs_to_jiffies;

/// nfsd's RDMA port.
const NFS_RDMA_PORT: u16 = 20049;

const STEP_MS: u32 = 20_000;

/// How long to wait for a Reply that must not come.
const SILENCE_MS: u32 = 1_500;

const RECV_LEN: usize = 4096;
const RECVS: usize = 8;

/// The server's address: the harness's server VM, 10.99.0.1.
const PEER_IPV4: u32 = 0x0a63_0001;

/// Receives delivered to the test thread: (slot, length) in order.
#[pin_data]
struct Inbox {
    #[pin]
    q: SpinLockIrq<KVec<(usize, u32)>>,
    #[pin]
    cv: CondVar,
}

struct RecvDone {
    slot: usize,
    inbox: Arc<Inbox>,
}

impl CompletionHandler for RecvDone {
    fn complete(&self, _wr: &Arc<WorkRequest<Self>>, wc: &WorkCompletion) {
        if wc.is_ok() {
            let _ = self
                .inbox
                .q
                .lock()
                .push((self.slot, wc.byte_len), GFP_ATOMIC);
            self.inbox.cv.notify_all();
        }
    }
}

struct SendDone;

impl CompletionHandler for SendDone {
    fn complete(&self, _wr: &Arc<WorkRequest<Self>>, _wc: &WorkCompletion) {}
}

/// A client connection to the server under test.
struct Client {
    ep: Endpoint,
    recvs: KVec<Arc<WorkRequest<RecvDone>>>,
    inbox: Arc<Inbox>,
    next_xid: u32,
}

fn segs(buf: Arc<DmaBuf>, len: usize) -> Result<KVec<Segment>> {
    let mut v = KVec::new();
    v.push(
        Segment {
            buf,
            offset: 0,
            len,
        },
        GFP_KERNEL,
    )?;
    Ok(v)
}

impl Client {
    /// Connects; `Ok(None)` when no server listens.
    fn connect() -> Result<Option<Self>> {
        let addr = Addr::V4(PEER_IPV4.to_be_bytes(), NFS_RDMA_PORT);
        let id = CmId::new()?;
        id.resolve_addr(addr, 5000)?;
        if !matches!(id.wait_event(STEP_MS)?, CmEvent::AddrResolved) {
            return Ok(None);
        }
        id.resolve_route(5000)?;
        if !matches!(id.wait_event(STEP_MS)?, CmEvent::RouteResolved) {
            return Ok(None);
        }
        let ep = Endpoint::new(
            id,
            &EndpointConfig {
                max_send_wr: 16,
                max_recv_wr: 16,
                max_send_sge: 1,
                max_recv_sge: 1,
                unsafe_global_rkey: false,
            },
        )?;
        let inbox = Arc::pin_init(
            pin_init!(Inbox {
                q <- new_spinlock_irq!(KVec::new(), "svc_hostile::inbox"),
                cv <- new_condvar!("svc_hostile::inbox"),
            }),
            GFP_KERNEL,
        )?;
        let mut recvs = KVec::new();
        for slot in 0..RECVS {
            let buf = ep.alloc_buf(RECV_LEN, DmaDir::FromDevice)?;
            let wr = WorkRequest::new(
                RecvDone {
                    slot,
                    inbox: inbox.clone(),
                },
                segs(buf, RECV_LEN)?,
            )?;
            ep.post_recv(wr.clone())?;
            recvs.push(wr, GFP_KERNEL)?;
        }
        let pdata = ConnectPrivate::client(4096, 4096).to_bytes();
        ep.connect(&pdata, 4, 0)?;
        match ep.wait_event(STEP_MS)? {
            CmEvent::Established { .. } => {}
            _ => return Ok(None),
        }
        pr_info!("svc_hostile: connected to the server\n");
        Ok(Some(Self {
            ep,
            recvs,
            inbox,
            next_xid: 0x5eed_0000,
        }))
    }

    fn xid(&mut self) -> u32 {
        self.next_xid = self.next_xid.wrapping_add(1);
        self.next_xid
    }

    fn send(&self, msg: &[u8]) -> Result {
        let buf = self.ep.alloc_buf(msg.len(), DmaDir::ToDevice)?;
        buf.write(0, msg)?;
        let wr = WorkRequest::new(SendDone, segs(buf, msg.len())?)?;
        self.ep.post_send(wr, SendOp::Send)
    }

    /// The next received message, or `None` after `ms`.
    fn recv(&self, ms: u32) -> Result<Option<KVec<u8>>> {
        let mut left = msecs_to_jiffies(ms);
        let mut q = self.inbox.q.lock();
        loop {
            if !q.is_empty() {
                let (slot, len) = q.remove(0).map_err(|_| EINVAL)?;
                drop(q);
                let wr = self.recvs.get(slot).ok_or(EINVAL)?;
                let buf = wr.buf(0).ok_or(EINVAL)?;
                let mut v = KVec::from_elem(0u8, (len as usize).min(RECV_LEN), GFP_KERNEL)?;
                buf.read(0, &mut v)?;
                self.ep.post_recv(wr.clone())?;
                return Ok(Some(v));
            }
            if left == 0 {
                return Ok(None);
            }
            match self.inbox.cv.wait_interruptible_timeout(&mut q, left) {
                CondVarTimeoutResult::Timeout => left = 0,
                CondVarTimeoutResult::Woken { jiffies } => left = jiffies,
                CondVarTimeoutResult::Signal { .. } => return Err(EINTR),
            }
        }
    }

    /// A valid NFSv3 NULL call in an RDMA_MSG; checks its Reply.
    fn null_call_works(&mut self) -> Result<bool> {
        let xid = self.xid();
        let mut m = KVec::new();
        for w in [
            xid, 1, 32, 0, 0, 0, 0, // transport header: MSG, empty lists
            xid, 0, 2, 100003, 3, 0, // RPC call: NFSv3 NULL
            0, 0, 0, 0, // AUTH_NONE credential and verifier
        ] {
            m.extend_from_slice(&u32::to_be_bytes(w), GFP_KERNEL)?;
        }
        self.send(&m)?;
        let Some(r) = self.recv(STEP_MS)? else {
            pr_err!("svc_hostile: no reply to NULL\n");
            return Ok(false);
        };
        // xid, vers 1, credits, RDMA_MSG, 3 empty lists, then the RPC reply
        // with the same xid, REPLY (1), MSG_ACCEPTED (0).
        let ok = word(&r, 0) == Some(xid)
            && word(&r, 1) == Some(1)
            && word(&r, 3) == Some(0)
            && word(&r, 7) == Some(xid)
            && word(&r, 8) == Some(1)
            && word(&r, 9) == Some(0);
        if !ok {
            pr_err!("svc_hostile: bad reply to NULL ({} bytes)\n", r.len());
        }
        Ok(ok)
    }

    /// Sends `words` (the first is replaced by a fresh xid) and returns the
    /// answer, if any arrives within `ms`.
    fn exchange(&mut self, words: &[u32], ms: u32) -> Result<(u32, Option<KVec<u8>>)> {
        let xid = self.xid();
        let mut m = KVec::new();
        for (i, w) in words.iter().enumerate() {
            let w = if i == 0 { xid } else { *w };
            m.extend_from_slice(&u32::to_be_bytes(w), GFP_KERNEL)?;
        }
        self.send(&m)?;
        Ok((xid, self.recv(ms)?))
    }
}

fn word(b: &[u8], i: usize) -> Option<u32> {
    let s = b.get(i * 4..i * 4 + 4)?;
    Some(u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
}

/// RDMA_ERROR (4) / ERR_CHUNK (2) for `xid`.
fn is_err_chunk(r: &Option<KVec<u8>>, xid: u32) -> bool {
    match r {
        Some(r) => word(r, 0) == Some(xid) && word(r, 3) == Some(4) && word(r, 4) == Some(2),
        None => false,
    }
}

/// Runs `f` on a fresh connection, then checks the connection still serves
/// a valid call. Passes trivially without a server.
fn with_client(f: impl FnOnce(&mut Client) -> Result<bool>) -> Result<bool> {
    let Some(mut c) = Client::connect()? else {
        pr_info!("svc_hostile: no server\n");
        return Ok(true);
    };
    let ok = f(&mut c)?;
    let alive = c.null_call_works()?;
    Ok(ok && alive)
}

#[kunit_tests(rpcrdma_rs_svc_hostile)]
mod tests {
    use super::*;

    #[test]
    fn valid_null_call_is_answered() -> Result {
        assert!(with_client(|_| Ok(true))?);
        Ok(())
    }

    #[test]
    fn bad_version_gets_err_vers() -> Result {
        assert!(with_client(|c| {
            let (xid, r) = c.exchange(&[0, 2, 32, 0, 0, 0, 0, 0], STEP_MS)?;
            let Some(r) = r else { return Ok(false) };
            // xid, vers (echoed), credits, RDMA_ERROR, ERR_VERS, low 1, high 1
            Ok(word(&r, 0) == Some(xid)
                && word(&r, 3) == Some(4)
                && word(&r, 4) == Some(1)
                && word(&r, 5) == Some(1)
                && word(&r, 6) == Some(1))
        })?);
        Ok(())
    }

    #[test]
    fn unknown_procedure_gets_err_chunk() -> Result {
        assert!(with_client(|c| {
            let (xid, r) = c.exchange(&[0, 1, 32, 7, 0, 0, 0], STEP_MS)?;
            Ok(is_err_chunk(&r, xid))
        })?);
        Ok(())
    }

    #[test]
    fn truncated_header_gets_err_chunk() -> Result {
        assert!(with_client(|c| {
            let (xid, r) = c.exchange(&[0, 1, 32], STEP_MS)?;
            Ok(is_err_chunk(&r, xid))
        })?);
        Ok(())
    }

    #[test]
    fn bad_list_discriminator_gets_err_chunk() -> Result {
        assert!(with_client(|c| {
            let (xid, r) = c.exchange(&[0, 1, 32, 0, 2, 0, 0], STEP_MS)?;
            Ok(is_err_chunk(&r, xid))
        })?);
        Ok(())
    }

    #[test]
    fn huge_write_segment_count_gets_err_chunk() -> Result {
        assert!(with_client(|c| {
            // Write list: one chunk claiming 0x40000000 segments.
            let (xid, r) = c.exchange(&[0, 1, 32, 0, 0, 1, 0x4000_0000, 1, 2, 0, 0], STEP_MS)?;
            Ok(is_err_chunk(&r, xid))
        })?);
        Ok(())
    }

    #[test]
    fn misaligned_read_position_gets_err_chunk() -> Result {
        assert!(with_client(|c| {
            // Read list: position 3, handle 1, length 8, offset 0; then the
            // end of the list, empty Write list and Reply chunk, 8 bytes.
            let (xid, r) = c.exchange(&[0, 1, 32, 0, 1, 3, 1, 8, 0, 0, 0, 0, 0, 0, 0], STEP_MS)?;
            Ok(is_err_chunk(&r, xid))
        })?);
        Ok(())
    }

    #[test]
    fn read_position_beyond_message_gets_err_chunk() -> Result {
        assert!(with_client(|c| {
            let (xid, r) =
                c.exchange(&[0, 1, 32, 0, 1, 4096, 1, 8, 0, 0, 0, 0, 0, 0, 0], STEP_MS)?;
            Ok(is_err_chunk(&r, xid))
        })?);
        Ok(())
    }

    #[test]
    fn nomsg_without_call_chunk_gets_err_chunk() -> Result {
        assert!(with_client(|c| {
            let (xid, r) = c.exchange(&[0, 1, 32, 1, 0, 0, 0], STEP_MS)?;
            Ok(is_err_chunk(&r, xid))
        })?);
        Ok(())
    }

    #[test]
    fn zero_segment_reply_chunk_gets_err_chunk() -> Result {
        assert!(with_client(|c| {
            // Empty Read and Write lists, a Reply chunk with no segments.
            let (xid, r) = c.exchange(&[0, 1, 32, 0, 0, 0, 1, 0], STEP_MS)?;
            Ok(is_err_chunk(&r, xid))
        })?);
        Ok(())
    }

    #[test]
    fn call_chunk_in_rdma_msg_gets_err_chunk() -> Result {
        assert!(with_client(|c| {
            // RDMA_MSG with a position-zero Read segment (RFC 8166 s. 3.5.3).
            let (xid, r) = c.exchange(&[0, 1, 32, 0, 1, 0, 1, 64, 0, 0, 0, 0, 0, 0, 0], STEP_MS)?;
            Ok(is_err_chunk(&r, xid))
        })?);
        Ok(())
    }

    #[test]
    fn rdma_msgp_gets_err_chunk() -> Result {
        assert!(with_client(|c| {
            let (xid, r) = c.exchange(&[0, 1, 32, 2, 4, 1024, 0, 0, 0, 0, 0], STEP_MS)?;
            Ok(is_err_chunk(&r, xid))
        })?);
        Ok(())
    }

    #[test]
    fn rdma_done_is_dropped() -> Result {
        assert!(with_client(|c| {
            let (_, r) = c.exchange(&[0, 1, 32, 3], SILENCE_MS)?;
            Ok(r.is_none())
        })?);
        Ok(())
    }

    #[test]
    fn failed_rdma_read_drops_only_that_connection() -> Result {
        let Some(mut c) = Client::connect()? else {
            pr_info!("svc_hostile: no server\n");
            return Ok(());
        };
        // NOMSG with a call chunk at a handle the client never registered:
        // the server's RDMA Read fails and it closes this connection
        // without answering the call.
        let (_, r) = c.exchange(&[0, 1, 32, 1, 1, 0, 0xdead, 64, 0, 0, 0, 0, 0], SILENCE_MS)?;
        assert!(r.is_none());
        drop(c);
        // Other connections keep being served.
        assert!(with_client(|_| Ok(true))?);
        Ok(())
    }
}
