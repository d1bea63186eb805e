// SPDX-License-Identifier: GPL-2.0

//! Listening endpoints (C `svc_rdma_create`, `handle_connect_req`).
//!
//! A listener owns an RDMA CM identifier bound to nfsd's address. A watcher
//! on the long-running system workqueue takes its CM events: each connection
//! request is queued (at most [`BACKLOG`]) and the listener is marked
//! `XPT_CONN`, so a server thread calls `xpo_accept`, which takes the
//! request off the queue.

use crate::rdma::cm::{Addr, CmEvent, CmId, PrivateData};
use crate::rdma::svc::{self, XprtLink};
use kernel::alloc::KVec;
use kernel::new_spinlock;
use kernel::prelude::*;
use kernel::sync::atomic::{Atomic, Relaxed};
use kernel::sync::{Arc, Completion, SpinLock};
use kernel::workqueue;

/// Connection requests queued before new ones are refused.
const BACKLOG: usize = 16;

/// How long a watcher sleeps between checks of its stop flag.
pub(super) const WATCH_MS: u32 = 200;

/// A connection request waiting for `xpo_accept`.
pub(super) struct Pending {
    pub(super) id: CmId,
    pub(super) private_data: PrivateData,
    /// RDMA Reads we may have outstanding against the client.
    pub(super) initiator_depth: u8,
}

#[pin_data]
struct Shared {
    id: CmId,
    #[pin]
    queue: SpinLock<KVec<Pending>>,
    stop: Atomic<i32>,
    link: Arc<XprtLink>,
}

/// A listening endpoint.
pub(super) struct Listener {
    shared: Arc<Shared>,
    done: Arc<Completion>,
}

impl Listener {
    pub(super) fn new(addr: Addr, link: Arc<XprtLink>) -> Result<Self> {
        let id = svc::listen(addr, 10).inspect_err(|e| {
            pr_warn!("svcrdma: cannot listen on {:?}: {:?}\n", addr, e);
        })?;
        let shared = Arc::pin_init(
            pin_init!(Shared {
                id,
                queue <- new_spinlock!(KVec::new(), "svcrdma::accept_q"),
                stop: Atomic::new(0),
                link,
            }),
            GFP_KERNEL,
        )?;
        let done = Arc::pin_init(Completion::new(), GFP_KERNEL)?;
        let (s, d) = (shared.clone(), done.clone());
        workqueue::system_long().try_spawn(GFP_KERNEL, move || watch(s, d))?;
        Ok(Self { shared, done })
    }

    pub(super) fn cm_id(&self) -> &CmId {
        &self.shared.id
    }

    /// Takes the next connection request (C `svc_rdma_accept`'s queue).
    pub(super) fn next(&self) -> Option<Pending> {
        self.shared.link.clear_conn();
        let mut q = self.shared.queue.lock();
        let p = if q.is_empty() {
            None
        } else {
            Some(q.remove(0).ok()?)
        };
        let more = !q.is_empty();
        drop(q);
        if more {
            self.shared.link.conn_ready();
        }
        p
    }

    pub(super) fn detach(&self) {
        self.shared.stop.store(1, Relaxed);
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.shared.stop.store(1, Relaxed);
        self.done.wait_for_completion();
        // The watcher dropped its reference before completing: the CM
        // identifier is destroyed here, synchronously.
    }
}

fn watch(shared: Arc<Shared>, done: Arc<Completion>) {
    while shared.stop.load(Relaxed) == 0 {
        if let Ok(CmEvent::ConnectRequest {
            id,
            private_data,
            initiator_depth,
            ..
        }) = shared.id.wait_event(WATCH_MS)
        {
            let mut q = shared.queue.lock();
            if q.len() >= BACKLOG {
                drop(q);
                pr_warn!("svcrdma: accept queue full, refusing a connection\n");
                // Dropping the identifier destroys it, rejecting the peer.
                drop(id);
                continue;
            }
            let p = Pending {
                id,
                private_data,
                initiator_depth,
            };
            if q.push(p, GFP_ATOMIC).is_err() {
                continue;
            }
            drop(q);
            shared.link.conn_ready();
        }
    }
    drop(shared);
    done.complete_all();
}
