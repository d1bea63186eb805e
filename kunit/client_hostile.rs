// SPDX-License-Identifier: GPL-2.0

//! A hostile server for the client transport (xprtrdma) of a running
//! `rpcrdma_rs.ko` (scenario `client-hostile`).
//!
//! The suite listens on the port given as `client_hostile_port` and plays
//! an NFS/RDMA server with the verbs layer; the scenario mounts it with
//! `proto=rdma` through the project's client. To the client's first Call
//! (the mount's NULL ping) it first sends a Reply whose xid matches no
//! request, granting other credits ([`STRAY_CREDITS`]), then holds the
//! Call for [`HOLD_MS`]: the scenario reads the transport's congestion
//! window (`cong_win` of sunrpc's `xprt_info`), which must still be the
//! one credit a new connection starts with (audit finding 20: the client
//! took a stray reply's credits before its xid lookup). Then the Call's
//! own Reply grants [`GRANT`] credits, and the next Call must arrive on
//! the same connection; it is held as long, and the scenario reads the
//! window again: now [`GRANT`] credits, which shows it is the window the
//! reply handler moves.
//!
//! Without `client_hostile_port` (the `kunit` scenario) the case passes
//! without checking anything; it logs "client_hostile: no client".

use crate::proto::cm::ConnectPrivate;
use crate::rust::rdma::cm::{Addr, CmEvent, CmId};
use crate::rust::rdma::verbs::{ConnParam, DmaDir, Endpoint, SendOp, WorkRequest};
use crate::svc_hostile::{
    recv, segs, wait_sent, word, Inbox, PeerEnd, RecvDone, SendDone, Sent, RECVS,
};
use kernel::alloc::KVec;
use kernel::prelude::*;
use kernel::sync::atomic::{Atomic, Relaxed};
use kernel::sync::Arc;
use kernel::time::{delay::fsleep, Delta};

/// The port to listen on; 0: no client comes, the case checks nothing.
static PORT: Atomic<u32> = Atomic::new(0);

/// Sets the port the suite listens on (the module's parameter).
pub(crate) fn set_port(port: u32) {
    PORT.store(port, Relaxed);
}

/// This VM's address (the harness's single VM, 10.99.0.1).
const LOCAL_IPV4: u32 = 0x0a63_0001;

/// How long the mount has to connect (it retries while nobody listens).
const ACCEPT_MS: u32 = 120_000;

const STEP_MS: u32 = 30_000;

/// How long a Call is held while the scenario reads the window.
const HOLD_MS: i64 = 10_000;

/// Credits of the stray Reply: neither the 1 of a new connection nor
/// [`GRANT`].
const STRAY_CREDITS: u32 = 9;

/// Credits of the matched Replies.
const GRANT: u32 = 2;

/// One accepted connection of the project's client.
struct Server {
    ep: Endpoint,
    recvs: KVec<Arc<WorkRequest<RecvDone>>>,
    inbox: Arc<Inbox>,
    sent: Arc<Sent>,
    sends: u32,
    _listener: CmId,
}

impl Server {
    /// Listens on `port` and accepts the first connection; `Ok(None)` if
    /// none came.
    fn accept(port: u16) -> Result<Option<Self>> {
        let listener = CmId::new()?;
        listener.bind(Addr::V4(LOCAL_IPV4.to_be_bytes(), port))?;
        listener.listen(4)?;
        pr_info!("client_hostile: listening on port {}\n", port);
        let ev = match listener.wait_event(ACCEPT_MS) {
            Ok(ev) => ev,
            Err(e) if e == ETIMEDOUT => return Ok(None),
            Err(e) => return Err(e),
        };
        let CmEvent::ConnectRequest { id, .. } = ev else {
            pr_err!("client_hostile: unexpected listener event\n");
            return Ok(None);
        };
        let PeerEnd {
            ep,
            recvs,
            inbox,
            sent,
        } = PeerEnd::new(id, false, RECVS)?;
        // A server that never sends with invalidate and issues no RDMA Reads.
        let pdata = ConnectPrivate::new(4096, 4096, false).to_bytes();
        ep.accept(&ConnParam {
            private_data: &pdata,
            ..ConnParam::default()
        })?;
        match ep.wait_event(STEP_MS)? {
            CmEvent::Established { .. } => {}
            _ => return Ok(None),
        }
        pr_info!("client_hostile: client connected\n");
        Ok(Some(Self {
            ep,
            recvs,
            inbox,
            sent,
            sends: 0,
            _listener: listener,
        }))
    }

    /// Sends `words` and waits for the Send's completion.
    fn send(&mut self, words: &[u32]) -> Result<bool> {
        let mut m = KVec::new();
        for w in words {
            m.extend_from_slice(&w.to_be_bytes(), GFP_KERNEL)?;
        }
        let buf = self.ep.alloc_buf(m.len(), DmaDir::ToDevice)?;
        buf.write(0, &m)?;
        let wr = WorkRequest::new(
            SendDone {
                sent: self.sent.clone(),
            },
            segs(buf, m.len())?,
        )?;
        self.ep.post_send(wr, SendOp::Send)?;
        self.sends += 1;
        wait_sent(&self.sent, self.sends, STEP_MS)
    }

    /// A Reply to `xid` granting `credits`: RDMA_MSG with empty chunk
    /// lists, then an accepted RPC reply with no results (NULL's).
    fn reply(&mut self, xid: u32, credits: u32) -> Result<bool> {
        self.send(&[xid, 1, credits, 0, 0, 0, 0, xid, 1, 0, 0, 0, 0])
    }

    /// The xid of the next Call, or `None` after `ms`.
    fn call(&self, ms: u32) -> Result<Option<u32>> {
        let Some(v) = recv(&self.ep, &self.recvs, &self.inbox, ms)? else {
            return Ok(None);
        };
        // Transport header: xid, vers, credits, proc.
        pr_info!(
            "client_hostile: call xid {:#x} ({} bytes, transport proc {:?})\n",
            word(&v, 0).unwrap_or(0),
            v.len(),
            word(&v, 3)
        );
        Ok(word(&v, 0))
    }
}

/// Plays the server of finding 20's case; whether the client still sent
/// its next Call on the same connection after the stray Reply.
fn stray_reply_then_next_call(port: u16) -> Result<bool> {
    let Some(mut s) = Server::accept(port)? else {
        pr_err!("client_hostile: no client connected to port {}\n", port);
        return Ok(false);
    };
    let Some(xid) = s.call(STEP_MS)? else {
        pr_err!("client_hostile: no call\n");
        return Ok(false);
    };
    // No request of the client has this xid: it has one Call outstanding.
    let stray = !xid;
    if !s.reply(stray, STRAY_CREDITS)? {
        return Ok(false);
    }
    pr_info!(
        "client_hostile: stray reply sent (xid {:#x}, credits {}), holding call {:#x}\n",
        stray,
        STRAY_CREDITS,
        xid
    );
    fsleep(Delta::from_millis(HOLD_MS));
    if !s.reply(xid, GRANT)? {
        return Ok(false);
    }
    pr_info!(
        "client_hostile: call {:#x} answered (credits {})\n",
        xid,
        GRANT
    );
    let Some(next) = s.call(STEP_MS)? else {
        pr_err!("client_hostile: no call after the stray reply\n");
        return Ok(false);
    };
    pr_info!(
        "client_hostile: next call {:#x} arrived, holding it\n",
        next
    );
    fsleep(Delta::from_millis(HOLD_MS));
    pr_info!("client_hostile: done\n");
    Ok(true)
}

#[kunit_tests(rpcrdma_rs_client_hostile)]
mod tests {
    use super::*;

    #[test]
    fn stray_reply_grants_no_credits() -> Result {
        let port = PORT.load(Relaxed);
        if port == 0 {
            pr_info!("client_hostile: no client\n");
            return Ok(());
        }
        let ok = stray_reply_then_next_call(u16::try_from(port).map_err(|_| EINVAL)?)?;
        // Asserted once the connection is gone: a failed assertion ends
        // the test thread without unwinding.
        assert!(ok);
        Ok(())
    }
}
