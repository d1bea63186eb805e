// SPDX-License-Identifier: GPL-2.0

//! Listening endpoints (C `svc_rdma_create`, `handle_connect_req`).
//!
//! A listener owns an RDMA CM identifier bound to nfsd's address in nfsd's
//! network namespace. Its CM events go straight to an [`AcceptQueue`] from
//! the CM's event callback: each connection request is queued (at most
//! [`BACKLOG`], in space allocated with the listener, so the callback never
//! allocates) and the listener is marked `XPT_CONN`, so a server thread
//! calls `xpo_accept`, which takes the request off the queue. A request that
//! does not fit is given back to the CM, which destroys its identifier and
//! rejects the peer: no identifier is ever destroyed from the callback or
//! under the queue's lock.

use crate::rust::kext::spin_lock::{new_spinlock, SpinLock};
use crate::rust::rdma::cm::{Addr, CmEvent, CmHandler, CmId, Net, PrivateData};
use crate::rust::sunrpc::svc::XprtLink;
use kernel::alloc::KVec;
use kernel::prelude::*;
use kernel::sync::Arc;

/// Connection requests queued before new ones are refused. Clients open
/// their connections in bursts (a mount with `nconnect=16` opens sixteen
/// at once, and every client reconnects at once after a server restart),
/// and a refused one waits for sunrpc's reconnect and then for its
/// requests' major timeout (60 s by default): C's accept queue has no
/// bound at all. Each entry is a CM identifier not yet accepted and its
/// private data (about a hundred bytes, allocated with the listener).
const BACKLOG: usize = 256;

/// A connection request waiting for `xpo_accept`.
pub(super) struct Pending {
    pub(super) id: CmId,
    pub(super) private_data: PrivateData,
    /// RDMA Reads we may have outstanding against the client.
    pub(super) initiator_depth: u8,
}

/// The connection requests of a listener, filled by its CM event handler.
#[pin_data]
struct AcceptQueue {
    /// Allocated for [`BACKLOG`] entries up front and never grown.
    #[pin]
    queue: SpinLock<KVec<Pending>>,
    link: Arc<XprtLink>,
}

impl CmHandler for AcceptQueue {
    fn handle(&self, ev: CmEvent) -> core::result::Result<(), CmEvent> {
        let CmEvent::ConnectRequest {
            id,
            private_data,
            initiator_depth,
            responder_resources,
        } = ev
        else {
            // Nothing else concerns a wildcard listener.
            return Ok(());
        };
        let p = Pending {
            id,
            private_data,
            initiator_depth,
        };
        let refused = self.queue.lock().push_within_capacity(p);
        match refused {
            Ok(()) => {
                self.link.conn_ready();
                Ok(())
            }
            Err(kernel::alloc::kvec::PushError(p)) => {
                crate::pr_warn_ratelimited!("svcrdma: accept queue full, refusing a connection\n");
                // The CM destroys the identifier and rejects the peer.
                Err(CmEvent::ConnectRequest {
                    id: p.id,
                    private_data: p.private_data,
                    initiator_depth: p.initiator_depth,
                    responder_resources,
                })
            }
        }
    }
}

/// A listening endpoint.
pub(super) struct Listener {
    // Dropped first: once the identifier is destroyed its handler never
    // runs again, and the requests still queued are destroyed after it.
    id: CmId,
    accept_q: Arc<AcceptQueue>,
}

impl Listener {
    pub(super) fn new(net: &Net, addr: Addr, link: Arc<XprtLink>) -> Result<Self> {
        let backlog = KVec::with_capacity(BACKLOG, GFP_KERNEL)?;
        let accept_q = Arc::pin_init(
            pin_init!(AcceptQueue {
                queue <- new_spinlock!(backlog, "svcrdma::accept_q"),
                link,
            }),
            GFP_KERNEL,
        )?;
        let id = listen(net, addr, accept_q.clone()).inspect_err(|e| {
            pr_warn!("svcrdma: cannot listen on {:?}: {:?}\n", addr, e);
        })?;
        Ok(Self { id, accept_q })
    }

    pub(super) fn cm_id(&self) -> &CmId {
        &self.id
    }

    /// Takes the next connection request (C `svc_rdma_accept`'s queue).
    pub(super) fn next(&self) -> Option<Pending> {
        let aq = &self.accept_q;
        aq.link.clear_conn();
        let mut q = aq.queue.lock();
        let p = if q.is_empty() { None } else { q.remove(0).ok() };
        let more = !q.is_empty();
        drop(q);
        if more {
            aq.link.conn_ready();
        }
        p
    }

    /// `xpo_detach`: nothing to stop; the identifier goes in `xpo_free`.
    pub(super) fn detach(&self) {}
}

impl Drop for Listener {
    fn drop(&mut self) {
        // Requests nobody accepted: taken out under the lock, destroyed
        // (rejected) after it is released, since `rdma_destroy_id` sleeps.
        // The handler may still queue more until `id` is destroyed; those
        // go with the queue's last reference, after `id`.
        let pending = core::mem::take(&mut *self.accept_q.queue.lock());
        drop(pending);
    }
}

/// A CM identifier in the network namespace `net` listening on `addr`,
/// whose events (connection requests) go to `handler` from the start. An
/// IPv6 listener takes IPv6 only, so that both families can share a port
/// (C `svc_rdma_create_listen_id`).
fn listen(net: &Net, addr: Addr, handler: Arc<dyn CmHandler>) -> Result<CmId> {
    let id = CmId::new_in(net)?;
    id.set_handler(handler);
    if cfg!(CONFIG_IPV6) {
        id.set_afonly(true)?;
    }
    id.bind(addr)?;
    id.listen(LISTEN_BACKLOG)?;
    Ok(id)
}

/// Connection requests rdma_cm queues for a listener before it accepts.
const LISTEN_BACKLOG: i32 = 10;
