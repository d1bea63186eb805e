# shellcheck shell=sh
# svc-hostile: crafted RPC-over-RDMA calls against our server transport.
# One VM: rpcrdma_rs.ko serves nfsd's RDMA listener (port 20049), then the
# KUnit module's suite rpcrdma_rs_svc_hostile (kunit/svc_hostile.rs)
# connects to it with the verbs layer and checks each answer (ERR_VERS,
# ERR_CHUNK, silence for RDMA_DONE, a NULL call still answered afterwards,
# a failed RDMA Read closing only its own connection). nfsd runs 4 threads:
# 6 connections whose clients never answer the server's RDMA Reads must not
# keep a 7th connection's NULL call from being answered within 2 s (audit
# finding 1; the latencies are echoed). A connection that posts no Receives
# and asks for unlimited receiver-not-ready retries floods the server with
# NULL calls until its send queue is full and every thread waits for room:
# another connection's NULL call must still be answered within 5 s, and the
# server must close the stalled connection (audit M2). A connection whose
# Reply fails (no Receives, no receiver-not-ready retries), leaving the
# server's queue pair in the error state, must be closed by the server
# within 5 s. Then the server must still be
# running; nfsd's netlink listener-set creates an RDMA listener through our
# class that a mount uses; the module must unload without leaks. The
# server's decode-error and RDMA_ERROR trace events are recorded during the
# suite and must show the ERR_VERS and ERR_CHUNK answers.
# Argument: filter_glob=GLOB runs only the matching cases (as in kunit.sh);
# the checks of the cases left out then fail.
TIMEOUT=${KUNIT_TIMEOUT:-300}
kunit_filter "${1:-}" && shift
KUNIT_KO=${KUNIT_KO:-$REPO_ROOT/rpcrdma_rs_kunit.ko}
SUITE=rpcrdma_rs_svc_hostile

check load-rust-rpcrdma load_rust_rpcrdma || return 1
# Fewer nfsd threads than the suite's stalled connections (kunit/svc_hostile.rs),
# and few enough that one connection's waiting Replies hold them all.
NFSD_THREADS=4
# nfsd's largest block size (the default on hosts with 16 GiB and more):
# Calls of up to 4 MiB + 12 KiB, so the suite's 4 MiB + 4 KiB call chunk is
# served, above the largest kmalloc (audit finding 4). Set before nfsd starts.
mountpoint -q /proc/fs/nfsd || mount -t nfsd nfsd /proc/fs/nfsd
echo 4194304 > /proc/fs/nfsd/max_block_size 2>/dev/null || say "cannot set max_block_size"
if start_nfs_server; then pass nfs-server-start; else fail nfs-server-start "$NFS_ERR"; return 1; fi
echo 4 > /proc/fs/nfsd/threads
[ "$(cat /proc/fs/nfsd/threads)" = 4 ] && pass nfsd-4-threads || fail nfsd-4-threads "threads=$(cat /proc/fs/nfsd/threads)"
dmesg -c > /dev/null 2>&1
info "nfsd max_block_size=$(cat /proc/fs/nfsd/max_block_size 2>/dev/null)"
# The server's error events (rust/module/rpcrdma_trace.h) during the suite: every
# bad header it answers shows as a decode error and as the RDMA_ERROR it sent.
HOSTILE_EVENTS="svcrdma_decode_badvers_err svcrdma_decode_badproc_err svcrdma_decode_parse_err svcrdma_decode_drop_err svcrdma_err_vers svcrdma_err_chunk"
if rpcrdma_events; then
    echo 0 > $TRACEFS/tracing_on; : > $TRACEFS/trace
    echo 2048 > $TRACEFS/buffer_size_kb 2>/dev/null
    for _e in $HOSTILE_EVENTS; do echo 1 > "$TRACEFS/events/rpcrdma/$_e/enable" || say "no event $_e"; done
    echo 1 > $TRACEFS/tracing_on
fi
check kunit-load insmod "$KUNIT_KO" || return 1

suite_done() {
    _plan=$(grep -m1 -E '^    1\.\.[0-9]+' "$1" 2>/dev/null | sed 's/^ *1\.\.//')
    [ -n "$_plan" ] || return 1
    [ "$(grep -cE '^    (not )?ok [0-9]+' "$1")" -ge "$_plan" ]
}
R=/sys/kernel/debug/kunit/$SUITE/results
if wait_for "$TIMEOUT" suite_done "$R"; then
    pass hostile-suite-finished
else
    fail hostile-suite-finished "suite not finished after ${TIMEOUT}s"
fi
mkdir -p "$RESULTS/ktap"
[ -e "$R" ] && cat "$R" > "$RESULTS/ktap/$SUITE.ktap"
# The suite passes trivially without a server: it must really have connected.
if dmesg | grep -q 'svc_hostile: connected to the server'; then
    pass hostile-suite-connected
else
    fail hostile-suite-connected "the suite never reached the server"
fi
dmesg | grep -E 'svcrdma|svc_hostile' | sed 's/^/vm:   dmesg: /' | tail -n 40
# The stalled-Read case's measurements (the case itself asserts < 2 s).
dmesg | grep -o 'svc_hostile: NULL latency.*' | while read -r _l; do info "$_l"; say "$_l"; done
if dmesg | grep -q 'svc_hostile: NULL latency after'; then
    pass stalled-reads-measured
else
    fail stalled-reads-measured "no latency line from the stalled-Read case"
fi
dmesg | grep -o 'svc_hostile: 4 MiB + 4 KiB call chunk.*' | while read -r _l; do info "$_l"; done
# The failed-queue-pair case (the case asserts the close within 5 s).
dmesg | grep -o 'svc_hostile: connection whose Reply failed.*' | while read -r _l; do info "$_l"; done
# The stalled-Send case (audit M2; the case asserts the 5 s bound and the close).
dmesg | grep -oE 'svc_hostile: (send-stalled|NULL latency beside).*' | while read -r _l; do info "$_l"; done
dmesg | grep -o 'svcrdma: no Send completed.*' | head -n 3 | while read -r _l; do info "server: $_l"; done
if dmesg | grep -q 'svc_hostile: send-stalled connection closed by the server: yes'; then
    pass send-stall-closed
else
    fail send-stall-closed "the server did not close the connection whose Replies could not be sent"
fi
# No allocation sized by the peer: no WARN, no page allocation failure.
if dmesg | grep -qE 'WARNING:|page allocation failure'; then
    fail no-kernel-warning "$(dmesg | grep -m1 -E 'WARNING:|page allocation failure')"
else
    pass no-kernel-warning
fi
# The stalled calls were taken (not refused with ERR_CHUNK): each posted
# RDMA Reads, and so did the failed-Read case.
_reads=$(cat /proc/sys/sunrpc/svc_rdma/rdma_stat_read 2>/dev/null || echo 0)
if [ "$_reads" -ge 7 ]; then pass stalled-reads-posted; else fail stalled-reads-posted "rdma_stat_read=$_reads, want >= 7"; fi
# Our counters in /proc/sys/sunrpc/svc_rdma saw the bad calls.
S=/proc/sys/sunrpc/svc_rdma
info "svc_rdma stats: recv=$(cat $S/rdma_stat_recv 2>/dev/null) err_sent=$(cat $S/rdma_stat_err_sent 2>/dev/null) read=$(cat $S/rdma_stat_read 2>/dev/null)"
if [ "$(cat $S/rdma_stat_err_sent 2>/dev/null || echo 0)" -ge 8 ] && [ "$(cat $S/rdma_stat_recv 2>/dev/null || echo 0)" -ge 20 ]; then
    pass svc-rdma-stats
else
    fail svc-rdma-stats "err_sent=$(cat $S/rdma_stat_err_sent 2>/dev/null) recv=$(cat $S/rdma_stat_recv 2>/dev/null)"
fi
# The RDMA_ERROR answers arrived as trace events, with their error codes.
if rpcrdma_events; then
    echo 0 > $TRACEFS/tracing_on
    _counts= _missing=
    for _e in $HOSTILE_EVENTS; do
        _c=$(grep -c " $_e: " $TRACEFS/trace)
        _counts="$_counts $_e=$_c"
        case $_e in svcrdma_decode_badvers_err|svcrdma_err_vers|svcrdma_err_chunk) [ "$_c" -ge 1 ] || _missing="$_missing $_e" ;; esac
        echo 0 > "$TRACEFS/events/rpcrdma/$_e/enable"
    done
    info "hostile trace events:$_counts"
    for _e in svcrdma_decode_badvers_err svcrdma_err_vers svcrdma_err_chunk; do
        grep -m1 " $_e: " $TRACEFS/trace | sed 's/^/vm:   trace: /'
    done
    : > $TRACEFS/trace; echo 1 > $TRACEFS/tracing_on
    if [ -z "$_missing" ]; then pass hostile-error-events; else fail hostile-error-events "none of:$_missing"; fi
else
    info "no rpcrdma trace events (kernel without tracing): hostile-error-events not checked"
fi
grep -q '^rdma 20049' /proc/fs/nfsd/portlist && pass server-still-listening || fail server-still-listening "portlist"
check kunit-module-unload rmmod rpcrdma_rs_kunit

# nfsd's netlink path (what nfsdctl uses instead of portlist): with the
# threads stopped, listener-set asks for a TCP and an RDMA listener, which
# nfsd creates through our class; then a mount over it (our client, this
# VM) writes and reads a file.
netlink_listener() {
    NL_ERR=
    echo 0 > /proc/fs/nfsd/threads || { NL_ERR="stop threads"; return 1; }
    _out=$(python3 "$REPO_ROOT/scripts/guest/nfsd-listener-set.py" "tcp:0.0.0.0:2049" "rdma:0.0.0.0:$NFS_RDMA_PORT" 2>&1) ||
        { NL_ERR="listener-set: $_out"; return 1; }
    echo 4 > /proc/fs/nfsd/threads || { NL_ERR="start threads"; return 1; }
    say "portlist after listener-set: $(tr '\n' ' ' < /proc/fs/nfsd/portlist)"
    grep -q "^rdma $NFS_RDMA_PORT" /proc/fs/nfsd/portlist || { NL_ERR="no rdma listener in portlist"; return 1; }
    _save=$NFS_MOUNT_WAIT; NFS_MOUNT_WAIT=60
    nfs_mount 4.2 "$MYIP" /tmp/mnt-nl; _rc=$?; NFS_MOUNT_WAIT=$_save
    [ $_rc = 0 ] || { NL_ERR="mount: $NFS_ERR"; return 1; }
    head -c 1048576 /dev/urandom > /tmp/.nl-src
    cp /tmp/.nl-src /tmp/mnt-nl/nl.dat && echo 3 > /proc/sys/vm/drop_caches
    cmp -s /tmp/.nl-src /tmp/mnt-nl/nl.dat || NL_ERR="data differs"
    rm -f /tmp/.nl-src /tmp/mnt-nl/nl.dat
    nfs_umount /tmp/mnt-nl
    [ -z "$NL_ERR" ]
}
if netlink_listener; then pass nfsd-netlink-rdma-listener; else fail nfsd-netlink-rdma-listener "$NL_ERR"; fi
check nfs-server-stop stop_nfs_server
check rpcrdma_rs-unload unload_rust_rpcrdma
if dmesg | grep -q 'RDMA objects still live'; then
    fail unload-no-leaks "$(dmesg | grep 'RDMA objects still live')"
else
    pass unload-no-leaks
fi
