#!/usr/bin/env python3
"""The transport's stages, for kcount's attribution (bench-icount PROFILE 16).

    kcount_stages.py KALLSYMS > kcount-stages-NAME.req

Prints "hexaddr stage" for every entry point of a stage found in KALLSYMS
(the guest's /proc/kallsyms, both modules' symbols where loaded): the
table the kcount QEMU plugin (scripts/icount-plugin/kcount.c) attributes
executions by; and "hexaddr -1" for its snapshot trigger (TRIGGER). A stage is open while its entry point is on the call stack;
what runs inside it (the module, rust_helper_*, sunrpc, ib_core, locks,
the allocator, wakeups) counts to it. Imported by kcount-diff.py for the
names.

The stages are those of the per-RPC review (C1 to C4 client, S1 to S6
server): each module's functions that sunrpc or ib_core call, i.e. the
ops tables' entries (rpc_xprt_ops, svc_xprt_ops) and the completion
handlers (ib_cqe.done). For the C module (rpcrdma) they are the functions
named; for rpcrdma_rs the ops tables' trampolines (rust/sunrpc/
xprt_class.rs, svc.rs) and the monomorphised completion trampolines
(done::<H> in rust/rdma/verbs.rs; the client's Send and Receive rings'
ring_done and recv_done in rust/rdma/send_ring.rs and recv_ring.rs; the
server's send contexts' pool_done in rust/rdma/send_pool.rs, its
Reads' read_done in rust/rdma/read_ctxts.rs and its Receives' recv_done
in rust/rdma/recv_slots.rs),
matched on their mangled names. Both
clients' alloc_slot/free_slot are in C4: each module's own (the project's
transport allocates its request slots, rust/sunrpc/xprt_slots.rs), and
sunrpc's xprt_alloc_slot/xprt_free_slot, which a module from before that
used (sunrpc's instructions, so in C4's fair total, not its module
column). Stage S2r (RDMA Read
completion: the 1 MiB WRITE's data pulled by the server) and S0
(has_wspace) are not in the review's table.
"""
import re
import sys

# (id, name, side, C functions, rpcrdma_rs mangled-name patterns, other kernel functions)
STAGES = [
    (1, 'C1 send', 'client', ['xprt_rdma_send_request'],
     [r'10xprt_class.*8OpsTable.*6ClientE12send_request'], []),
    (2, 'C2 Send completion', 'client',
     ['rpcrdma_wc_send', 'frwr_wc_fastreg', 'frwr_wc_localinv', 'frwr_wc_localinv_wake',
      'frwr_wc_localinv_done'],
     # SendDone: before the Send ring (an older BENCH_ALT_REV).
     [r'5verbs4done.*(8send_buf8SendDone|7InvDone|12BatchInvDone|11SyncInvDone|9EvictDone)E',
      r'9send_ring9ring_done.*8xprtrdma4conn4ConnE',
      r'2mr15unsignaled_done$'], []),
    (3, 'C3 reply', 'client', ['rpcrdma_wc_receive', 'rpcrdma_reply_handler'],
     # Kb0_/Kb1_: the ring's variant (memreg=cache's replies are Kb1_).
     [r'9recv_ring9recv_done.*8xprtrdma4conn4Conn(Kb[01]_)?E',
      # Before the rings (BENCH_ALT_REV of an older module).
      r'5verbs4done.*5reply8RecvDoneE'], []),
    (4, 'C4 slot/buf', 'client',
     ['xprt_rdma_alloc_slot', 'xprt_rdma_free_slot', 'xprt_rdma_allocate', 'xprt_rdma_free'],
     [r'10xprt_class.*8OpsTable.*6ClientE(9buf_alloc|8buf_free|10alloc_slot|9free_slot)'],
     ['xprt_alloc_slot', 'xprt_free_slot']),
    (11, 'S1 Receive completion', 'server', ['svc_rdma_wc_receive'],
     [r'5verbs4done.*11RecvHandlerE', r'10recv_slots9recv_done.*5RecvQE'], []),
    (12, 'S2 recvfrom', 'server', ['svc_rdma_recvfrom'],
     [r'3svc.*8OpsTable.*7SvcRdmaE8recvfrom'], []),
    (13, 'S2r Read completion', 'server', ['svc_rdma_wc_read_done'],
     [r'5verbs4done.*11ReadHandlerE', r'10read_ctxts9read_done.*5RecvQE'], []),
    (14, 'S3 result_payload', 'server', ['svc_rdma_result_payload'],
     [r'3svc.*8OpsTable.*7SvcRdmaE14result_payload'], []),
    (15, 'S4 sendto', 'server', ['svc_rdma_sendto'],
     [r'3svc.*8OpsTable.*7SvcRdmaE6sendto'], []),
    (16, 'S5 Send completion', 'server',
     ['svc_rdma_wc_send', 'svc_rdma_write_done', 'svc_rdma_reply_done'],
     # The Send context's completion, which completes the Writes ahead
     # of it (before the send pool: done::<SqHandler> of the Send too).
     [r'5verbs4done.*9SqHandlerE',
      r'9send_pool9pool_done.*7sq_gate6SqGateE'], []),
    (17, 'S6 release_ctxt', 'server', ['svc_rdma_release_ctxt'],
     [r'3svc.*8OpsTable.*7SvcRdmaE12release_ctxt'], []),
    (18, 'S0 has_wspace', 'server', ['svc_rdma_has_wspace'],
     [r'3svc.*8OpsTable.*7SvcRdmaE10has_wspace'], []),
]
NAMES = {sid: name for sid, name, *_ in STAGES}
SIDE = {sid: side for sid, _, side, *_ in STAGES}


# The kernel function whose execution makes the plugin take the snapshot
# named in kcount-next: proc_taint, run by a write to
# /proc/sys/kernel/tainted (bench-icount.sh writes 0: no taint is added).
TRIGGER = 'proc_taint'


def entries(kallsyms):
    """(address, stage id, symbol) of every entry point in KALLSYMS."""
    out = []
    c_names = {f: sid for sid, _, _, cs, _, _ in STAGES for f in cs}
    k_names = {f: sid for sid, _, _, _, _, ks in STAGES for f in ks}
    rust = [(re.compile(p), sid) for sid, _, _, _, ps, _ in STAGES for p in ps]
    for line in open(kallsyms):
        f = line.split()
        if len(f) < 3 or f[1] not in 'tT':
            continue
        mod = f[3].strip('[]') if len(f) > 3 else ''
        sym = f[2]
        sid = None
        if mod == 'rpcrdma':
            sid = c_names.get(sym)
        elif mod == 'rpcrdma_rs':
            sid = next((s for p, s in rust if p.search(sym)), None)
        elif sym in k_names:
            sid = k_names[sym]
        if sym == TRIGGER and not mod:
            sid = -1
        if sid:
            out.append((int(f[0], 16), sid, sym))
    return out


if __name__ == '__main__':
    for addr, sid, sym in entries(sys.argv[1]):
        print(f"{addr:x} {sid}")
        print(f"stage {sid} {NAMES.get(sid, 'snapshot trigger')}: {sym}", file=sys.stderr)
