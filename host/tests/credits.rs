//! Credit accounting tests for both sides.

use rpcrdma_proto::proto::credits::{
    send_batch, ClientCredits, GrantPolicy, ServerCredits, MAX_SEND_BATCH, MAX_SLOT_TABLE,
    MIN_SLOT_TABLE, RPC_CWNDSCALE,
};

#[test]
fn client_starts_with_one_credit() {
    let c = ClientCredits::new(128);
    assert_eq!(c.credits(), 1);
    assert_eq!(c.cwnd(), 256);
    assert_eq!(c.requested(), 128);
}

#[test]
fn client_grant_is_clamped_like_c() {
    let mut c = ClientCredits::new(128);
    assert!(!c.update(0)); // 0 -> 1: don't deadlock
    assert_eq!(c.credits(), 1);
    assert!(c.update(32));
    assert_eq!(c.cwnd(), 32 << 8);
    assert!(c.update(u32::MAX)); // capped at max_requests
    assert_eq!(c.credits(), 128);
    assert!(!c.update(500));
    assert_eq!(c.sanitize(7), 7);
}

#[test]
fn client_slot_table_is_clamped() {
    assert_eq!(ClientCredits::new(0).requested(), MIN_SLOT_TABLE);
    assert_eq!(ClientCredits::new(u32::MAX).requested(), MAX_SLOT_TABLE);
    let mut c = ClientCredits::new(u32::MAX);
    c.update(u32::MAX);
    assert_eq!(c.cwnd(), MAX_SLOT_TABLE << 8);
}

#[test]
fn client_credits_fit_the_device() {
    // Room to spare: the slot table.
    assert_eq!(
        ClientCredits::fit_to_device(128, 40, 16384, 65536),
        Some(128)
    );
    // The receive queue, less the extra Receives, bounds the credits.
    assert_eq!(
        ClientCredits::fit_to_device(16384, 40, 16384, 1 << 20),
        Some(16344)
    );
    // So does the receive CQ, less the drain's entry.
    assert_eq!(
        ClientCredits::fit_to_device(16384, 40, 16384, 1025),
        Some(984)
    );
    // A device that cannot hold the minimum refuses the connection.
    assert_eq!(ClientCredits::fit_to_device(128, 40, 43, 65536), None);
    assert_eq!(
        ClientCredits::fit_to_device(128, 40, 44, 65536),
        Some(MIN_SLOT_TABLE)
    );
}

#[test]
fn congestion_window_gates_requests() {
    let mut c = ClientCredits::new(16);
    assert!(c.try_get());
    assert!(c.congested());
    assert!(!c.try_get()); // one credit: one request in flight
    c.update(3);
    assert!(c.try_get());
    assert!(c.try_get());
    assert!(!c.try_get());
    assert_eq!(c.in_flight(), 3);
    assert_eq!(c.cong(), 3 * RPC_CWNDSCALE);
    c.put();
    assert!(c.try_get());
    // Shrinking the grant leaves requests in flight but blocks new ones.
    c.update(1);
    assert!(!c.try_get());
    for _ in 0..5 {
        c.put(); // extra puts saturate at zero
    }
    assert_eq!(c.cong(), 0);
}

#[test]
fn reconnect_resets_to_one_credit() {
    let mut c = ClientCredits::new(128);
    c.update(100);
    assert!(c.try_get());
    c.reset();
    assert_eq!((c.credits(), c.cong()), (1, 0));
    assert_eq!(c.receives_wanted(16), 1 + 32);
}

#[test]
fn server_fixed_grant_like_c() {
    let mut s = ServerCredits::new(128, GrantPolicy::Fixed);
    s.set_posted_receives(3);
    assert_eq!(s.grant(), 128);
    assert!(s.within_grant(128));
    assert!(!s.within_grant(129));
    assert_eq!(ServerCredits::new(0, GrantPolicy::Fixed).grant(), 1);
}

#[test]
fn server_grant_bounded_by_receives() {
    let mut s = ServerCredits::new(128, GrantPolicy::BoundedByReceives);
    assert_eq!(s.grant(), 1); // never zero
    s.set_posted_receives(40);
    assert_eq!(s.grant(), 40);
    s.set_posted_receives(1000);
    assert_eq!(s.grant(), 128);
    assert_eq!(s.max_requests(), 128);
}

#[test]
fn server_receive_queue_fits_device() {
    // C defaults: 128 requests, 2 bc, batch 8 (RPCRDMA_MAX_RECV_BATCH).
    let f = ServerCredits::fit_to_device(128, 2, 8, 256, 1 << 20);
    assert_eq!((f.max_requests, f.held_recvs, f.rq_depth), (128, 128, 267));
    // Room for some Receives lent to requests, not one per credit.
    let f = ServerCredits::fit_to_device(128, 2, 8, 256, 200);
    assert_eq!((f.max_requests, f.held_recvs, f.rq_depth), (128, 61, 200));
    // And no more than the caller can spare.
    let f = ServerCredits::fit_to_device(128, 2, 8, 16, 1 << 20);
    assert_eq!((f.max_requests, f.held_recvs, f.rq_depth), (128, 16, 155));
    // Small device: everything fits exactly (C would oversubscribe by 2),
    // and no Receive is lent.
    let f = ServerCredits::fit_to_device(128, 2, 8, 256, 64);
    assert_eq!((f.rq_depth, f.held_recvs), (64, 0));
    assert_eq!(f.max_requests + f.bc_requests + f.recv_batch + 1, 64);
    let f = ServerCredits::fit_to_device(128, 2, 8, 256, 2);
    assert_eq!(f.max_requests, 1);
}

#[test]
fn send_batch_is_an_eighth_of_the_credits_within_bounds() {
    // C `re_send_batch = re_max_requests >> 3`, kept to 1..=16.
    assert_eq!(send_batch(0), 1);
    assert_eq!(send_batch(7), 1);
    assert_eq!(send_batch(32), 4);
    assert_eq!(send_batch(128), MAX_SEND_BATCH);
    assert_eq!(send_batch(u32::MAX), MAX_SEND_BATCH);
}

/// Audit finding 15: the server holds back up to `recv_batch - 1`
/// consumed Receives until a batch is complete (`svcrdma/recv_queue.rs`),
/// so the Receives it posts (the queue depth less the drain's entry) must
/// cover the credits and the backchannel's Receives with that many held
/// back, on any device, with the batch it asked for.
#[test]
fn server_receives_cover_the_grant_with_a_batch_held_back() {
    for batch in [1u32, 7, 8] {
        for max_qp_wr in [16u32, 64, 100, 137, 138, 139, 140, 1000, 16384] {
            for max_requests in [4u32, 32, 128, 16384] {
                let f = ServerCredits::fit_to_device(max_requests, 2, batch, u32::MAX, max_qp_wr);
                // Receives lent to requests are not posted.
                let posted = f.rq_depth - 1 - f.held_recvs;
                // What `recv_queue.rs` holds back is its own batch, whatever
                // the sizing says.
                let held = batch - 1;
                assert!(
                    posted - held >= f.max_requests + f.bc_requests,
                    "{max_requests} {max_qp_wr} {batch}: {f:?}"
                );
                assert_eq!(f.recv_batch, batch, "{max_requests} {max_qp_wr} {batch}");
                assert!(
                    f.rq_depth <= max_qp_wr,
                    "{max_requests} {max_qp_wr} {batch}"
                );
                assert!(f.max_requests <= max_requests);
            }
        }
    }
}
