# shellcheck shell=sh
# client-hostile: a hostile server against our client transport. One VM:
# rpcrdma_rs.ko is loaded (no nfsd); the KUnit module's suite
# rpcrdma_rs_client_hostile (kunit/client_hostile.rs) listens on port
# $CH_PORT as an NFS/RDMA server while a proto=rdma mount of it is retried
# in the background. To the mount's first Call the suite sends a Reply with
# an unknown xid granting 9 credits, then holds the Call 10 s; meanwhile
# this script reads the transport's congestion window from sunrpc's sysfs
# (xprt_info's cong_win), which must still be one credit (256): a Reply that
# answers no request grants nothing (audit finding 20). The Call's own
# Reply then grants 2 credits and the next Call must arrive on the same
# connection (the suite checks that); the window read during that second
# hold must be 2 credits (512), so the first reading is not vacuous.
TIMEOUT=${KUNIT_TIMEOUT:-300}
KUNIT_KO=${KUNIT_KO:-$REPO_ROOT/rpcrdma_rs_kunit.ko}
SUITE=rpcrdma_rs_client_hostile
CH_PORT=20050
MNT=/tmp/mnt-hostile

check load-rust-rpcrdma load_rust_rpcrdma || return 1
printf %s "$SUITE" > /sys/module/kunit/parameters/filter_glob
dmesg -c > /dev/null 2>&1
mkdir -p "$MNT"

# The window of the mount's transport (dst_port=$CH_PORT), once the suite
# logs the line matching $1.
cwnd_at() {
    wait_for 90 sh -c "dmesg | grep -q '$1'" || { echo none; return; }
    NFS_RDMA_PORT=$CH_PORT
    _i=$(mount_xprt_info) || { echo noxprt; return; }
    echo "$_i" | tr ' ' '\n' | sed -n 's/^cong_win=//p'
}
(
    echo "stray $(cwnd_at 'client_hostile: stray reply sent')"
    echo "granted $(cwnd_at 'client_hostile: next call')"
) > /tmp/.ch-cwnd 2>&1 &
WATCH=$!
# The mount retries until the suite listens; it fails in the end (the suite
# answers no NFSv4 operation).
(
    for _t in $(seq 40); do
        # mount.nfs itself (not mount, which would fork it): killable below.
        mount.nfs 10.99.0.1:/ "$MNT" -o vers=4.2,proto=rdma,port=$CH_PORT,retry=0 &
        echo $! > /tmp/.ch-mount-pid
        wait $! && break
        dmesg | grep -q 'client_hostile: done' && break
        sleep 2
    done
) > /tmp/.ch-mount 2>&1 &
MOUNT=$!

check kunit-load insmod "$KUNIT_KO" client_hostile_port=$CH_PORT
R=/sys/kernel/debug/kunit/$SUITE/results
mkdir -p "$RESULTS/ktap"
[ -e "$R" ] && cat "$R" > "$RESULTS/ktap/$SUITE.ktap"
dmesg | grep -E 'client_hostile|rpcrdma_rs' | sed 's/^/vm:   dmesg: /' | tail -n 20
wait_for 60 sh -c "! kill -0 $WATCH 2>/dev/null"
kill "$WATCH" 2>/dev/null
sed 's/^/vm:   cwnd: /' /tmp/.ch-cwnd
_stray=$(sed -n 's/^stray //p' /tmp/.ch-cwnd)
_granted=$(sed -n 's/^granted //p' /tmp/.ch-cwnd)
info "client-hostile cong_win after the stray reply: $_stray, after the matched reply: $_granted"
if [ "$_stray" = 256 ]; then
    pass stray-reply-keeps-window
else
    fail stray-reply-keeps-window "cong_win=$_stray after a reply with an unknown xid granting 9 credits, want 256 (1 credit)"
fi
if [ "$_granted" = 512 ]; then
    pass matched-reply-sets-window
else
    fail matched-reply-sets-window "cong_win=$_granted after a matched reply granting 2 credits, want 512"
fi
# The mount cannot succeed: stop its retries (the loop, then its mount).
kill "$MOUNT" 2>/dev/null
kill -9 "$(cat /tmp/.ch-mount-pid)" 2>/dev/null
wait_for 120 sh -c "! kill -0 $MOUNT 2>/dev/null" || say "mount loop still running"
sed 's/^/vm:   mount: /' /tmp/.ch-mount | tail -n 3
umount "$MNT" 2>/dev/null
check kunit-module-unload rmmod rpcrdma_rs_kunit
if wait_for 60 unload_rust_rpcrdma; then
    pass rpcrdma_rs-unload
else
    fail rpcrdma_rs-unload "$(grep '^rpcrdma_rs ' /proc/modules)"
    ps -eo pid,stat,wchan:24,args | grep -E 'mount|STAT' | sed 's/^/vm:   /'
fi
if dmesg | grep -q 'RDMA objects still live'; then
    fail unload-no-leaks "$(dmesg | grep 'RDMA objects still live')"
else
    pass unload-no-leaks
fi
