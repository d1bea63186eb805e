# shellcheck shell=sh
# many-conns: one NFS/RDMA server holding many connections under load.
# Two VMs (scripts/vm --two-vm many-conns ...). The client mounts the
# server several times with nconnect (NFSv3 mounts through addresses the
# server adds to its interface, each its own nfs_client and set of
# connections; one NFSv4.2 mount, since NFSv4.1+ trunking detection would
# fold further v4 mounts of the same server into its client), runs fio with
# verification on every mount at once, then unmounts them one by one while
# fio still writes on the others. The server counts its connections under
# load (RC queue pairs in `rdma resource`), and after the last unmount its
# RDMA resources (PD, CQ, QP, CM id, MR counts) must return to what they
# were before the first mount, within a bound; the project's server also
# reports its registration cache's live buffers. fio's largest completion
# latency must stay under a bound (no request waits longer). kmemleak (the
# debug kernel) is scanned by the guest init after the scenario, and any
# report fails the run (scripts/vm).
# Arguments: [SERVER_MOD rust|c] [CLIENT_MOD c|rust] [MOUNTS: versions, '+'
# between, default 4.2+3+3+3+3] [NCONNECT, default 16] [FIO_MIB per job,
# default 8] [BOUND_S: the largest completion latency allowed, default 60]
# [TXQLEN: both guests' transmit queue in packets, default 25000]
SERVER_MOD=${1:-rust}
CLIENT_MOD=${2:-c}
MOUNTS=$(echo "${3:-4.2+3+3+3+3}" | tr '+' ' ')
NCONNECT=${4:-16}
FIO_MIB=${5:-8}
BOUND_S=${6:-60}
# rxe (7.3.4) cannot survive a transmit the guest's queue refuses: a Read
# response that fails to go out leaves its queue pair resuming the Read
# mid-way (the peer's WARN at rxe_comp.c:841, the queue pair in error),
# and a CM message that fails leaves the GSI queue pair in error for good
# (no connect, no disconnect heard). Under this load the default queue
# (1000 packets) overflows against either server; what rxe may have
# outstanding is about 250 packets a queue pair (128 unacknowledged PSNs
# and one Read of up to 116), 80 queue pairs here: a queue of 25000 holds
# it (Documentation/dev-guide/testing.rst, "The many-conns scenario").
TXQLEN=${7:-25000}
# The server's extra addresses: 10.99.0.11, .12, ...
mc_addr() { if [ "$1" = 1 ]; then echo "$SERVER_IP"; else echo "${SERVER_IP%.*}.$((9 + $1))"; fi; }

mc_load() {
    case $1 in
        c) check load-c-rpcrdma load_c_rpcrdma ;;
        *) check load-rust-rpcrdma load_rust_rpcrdma ;;
    esac
}

# mc_res: the RDMA resource counts of the first device, "pd N cq N qp N
# cm_id N mr N" (module-independent: the C server's too).
mc_res() {
    rdma resource show 2>/dev/null | head -n 1 |
        awk '{ for (i = 3; i < NF; i += 2) if ($i ~ /^(pd|cq|qp|cm_id|mr)$/) printf "%s %s ", $i, $(i + 1) }'
}
mc_rc_qps() { rdma resource show qp 2>/dev/null | grep -c ' type RC '; }
mc_live_bufs() {
    awk 'NR > 2 { n += $9 } END { print n + 0 }' /sys/kernel/debug/rpcrdma_rs/svc_registration_cache 2>/dev/null
}
mc_mem() { awk '/^(MemAvailable|Slab):/ { printf "%s=%dMiB ", $1, $2 / 1024 }' /proc/meminfo; }

# mc_server_watch: the most RC queue pairs seen while the client's fio
# runs (from its .load-on marker to its .load-off): nconnect's transports
# connect as they are first used, so one look at the start sees a part.
mc_server_watch() {
    wait_for 1500 test -e "$EXPORT/.load-on" || return
    _peak=-1 _t=0
    while [ ! -e "$EXPORT/.load-off" ] && [ $_t -lt 600 ]; do
        _q=$(mc_rc_qps)
        if [ "$_q" -gt "$_peak" ]; then
            _peak=$_q
            echo "$_q $(mc_res)" > /tmp/.mc-peak
        fi
        sleep 2; _t=$((_t + 2))
    done
    marker "$EXPORT/.load-seen"
}

# mc_rxe_errors: rxe's transmit and retry counters in this guest (the
# failures the queue above is there to prevent, and their sequels).
mc_rxe_errors() {
    info "rxe counters ($1): $(rdma statistic show 2>/dev/null | head -n 1 |
        awk '{ for (i = 3; i < NF; i += 2) if ($i ~ /^(send_err|send_rnr_err|completer_retry_err|retry_exceeded_err|rcvd_seq_err)$/) printf "%s %s ", $i, $(i + 1) }')"
}

# mc_txqueue: this guest's transmit queue at TXQLEN packets.
mc_txqueue() {
    ip link set dev "$NETIF" txqueuelen "$TXQLEN" &&
        info "transmit queue: $(ip link show dev "$NETIF" | grep -o 'qlen [0-9]*')"
}

mc_server() {
    mc_load "$SERVER_MOD" || return 1
    mc_txqueue
    _i=2
    for _v in $MOUNTS; do
        [ $_i -gt "$(echo $MOUNTS | wc -w)" ] && break
        ip addr add "$(mc_addr $_i)/24" dev "$NETIF" || say "ip addr add $(mc_addr $_i) failed"
        _i=$((_i + 1))
    done
    NFSD_THREADS=32
    # before the listener, which the client races to connect to; compared
    # again once nfsd has closed it
    MC_RES0=$(mc_res) MC_LIVE0=$(mc_live_bufs) MC_MEM0=$(mc_mem)
    if start_nfs_server; then pass nfs-server-start; else fail nfs-server-start "$NFS_ERR"; return 1; fi
    info "server ($SERVER_MOD) at start: $MC_RES0; $MC_MEM0${MC_LIVE0:+; live buffers $MC_LIVE0}"
    mc_server_watch &
}

mc_server_end() {
    if [ -s /tmp/.mc-peak ]; then
        read -r _q _rest < /tmp/.mc-peak
        info "server ($SERVER_MOD) under load: $_q RC queue pairs; $_rest"
        if [ "$_q" -ge 64 ]; then pass server-64-connections; else fail server-64-connections "$_q RC queue pairs"; fi
    else
        fail server-64-connections "the client never said the load was on"
    fi
    check nfs-server-stop stop_nfs_server
    # Everything the connections held is released within a bound.
    _t0=$(date +%s)
    while [ "$(mc_res)" != "$MC_RES0" ] && [ $(( $(date +%s) - _t0 )) -lt 120 ]; do sleep 2; done
    if [ "$(mc_res)" = "$MC_RES0" ]; then
        pass server-rdma-resources-back-to-start
    else
        fail server-rdma-resources-back-to-start "start: $MC_RES0; now: $(mc_res)"
    fi
    _dt=$(( $(date +%s) - _t0 ))
    # idle cached buffers are the cache's by design: ask the shrinker
    echo 2 > /proc/sys/vm/drop_caches
    _live=$(mc_live_bufs)
    info "server ($SERVER_MOD) after the last unmount (+${_dt}s): $(mc_res); $(mc_mem)${_live:+; live buffers $_live (start $MC_LIVE0)}"
    if [ "$SERVER_MOD" = rust ]; then
        sed 's/^/vm:   regcache: /' /sys/kernel/debug/rpcrdma_rs/svc_registration_cache 2>/dev/null
        _st=""
        for f in /proc/sys/sunrpc/svc_rdma/rdma_stat_*; do _st="$_st $(basename "$f" | sed 's/^rdma_stat_//')=$(cat "$f")"; done
        info "svc_rdma stats:$_st"
    fi
    mc_rxe_errors server
    if [ "$SERVER_MOD" = c ]; then
        check unload-c-rpcrdma unload_c_rpcrdma
    else
        check unload-rust-rpcrdma unload_rust_rpcrdma
        _leak='RDMA objects still live|still live at unload|still in use at unload'
        if dmesg | grep -Eq "$_leak"; then
            fail server-unload-no-leaks "$(dmesg | grep -E "$_leak" | tail -n 1)"
        else
            pass server-unload-no-leaks
        fi
    fi
}

# mc_fio_max_lat FILE: the largest completion latency of a fio JSON report,
# in ms, and its error count.
mc_fio_max_lat() {
    python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
m = 0; e = 0
for j in d["jobs"]:
    e += j.get("error", 0)
    for k in ("read", "write"):
        m = max(m, j[k]["clat_ns"]["max"], j[k]["lat_ns"]["max"])
print("%d %d" % (m / 1e6, e))' "$1" 2>/dev/null || echo "? ?"
}

mc_client() {
    mc_load "$CLIENT_MOD" || return 1
    mc_txqueue
    _i=1 _conns=0
    for _v in $MOUNTS; do
        if nfs_mount "$_v" "$(mc_addr $_i)" "/tmp/mc$_i" "nconnect=$NCONNECT"; then
            _n=$(xprt_fields_all "/tmp/mc$_i" 1 | wc -l)
            _conns=$((_conns + _n))
            say "mount $_i (v$_v, $(mc_addr $_i)): $_n transports"
        else
            fail "mount-$_i-v$_v" "$NFS_ERR"; return 1
        fi
        _i=$((_i + 1))
    done
    MC_N=$((_i - 1))
    info "client ($CLIENT_MOD): $MC_N mounts, $_conns RDMA transports"
    if [ $_conns -ge 64 ]; then pass client-64-transports; else fail client-64-transports "$_conns transports"; fi
    # fio writing and verifying on every mount at once
    _t0=$(date +%s)
    for _i in $(seq 1 $MC_N); do
        fio --name=mc$_i --directory=/tmp/mc$_i --rw=randwrite --bs=64k --size=${FIO_MIB}M --numjobs=2 \
            --ioengine=libaio --iodepth=16 --direct=1 --verify=crc32c --verify_fatal=1 --do_verify=1 \
            --output-format=json --output=/tmp/.fio$_i.json > /tmp/.fio$_i.out 2>&1 &
        echo $! > /tmp/.fio$_i.pid
    done
    sleep 3
    marker /tmp/mc1/.load-on
    _ok=1
    for _i in $(seq 1 $MC_N); do
        wait "$(cat /tmp/.fio$_i.pid)"; _rc=$?
        read -r _lat _err <<EOF
$(mc_fio_max_lat /tmp/.fio$_i.json)
EOF
        info "fio mount $_i: exit $_rc, errors $_err, largest latency ${_lat} ms"
        [ "$_rc" = 0 ] && [ "$_err" = 0 ] || { _ok=0; tail -n 3 /tmp/.fio$_i.out | sed "s/^/vm:   fio$_i: /"; }
        if [ "$_lat" = "?" ] || [ "$_lat" -gt $((BOUND_S * 1000)) ]; then
            fail "fio-mount-$_i-latency-bound" "largest completion latency ${_lat} ms (bound ${BOUND_S} s)"
        fi
    done
    info "fio on $MC_N mounts: $(( $(date +%s) - _t0 )) s"
    if [ $_ok = 1 ]; then pass fio-write-verify-all-mounts; else fail fio-write-verify-all-mounts "see the fio lines"; fi
    # every connection carried something
    _idle=0
    for _i in $(seq 1 $MC_N); do
        _idle=$((_idle + $(xprt_fields_all "/tmp/mc$_i" 6 | awk '$1 == 0' | wc -l)))
    done
    if [ $_idle = 0 ]; then pass every-transport-sent; else fail every-transport-sent "$_idle transports sent nothing"; fi
    marker /tmp/mc1/.load-off
    # Read the directory: the client would trust its cached "no such
    # file" for the name itself (directory delegations) for the whole wait.
    wait_for 60 sh -c "ls -a /tmp/mc1 | grep -q '^.load-seen\$'" || say "the server did not see the load marker"
    rm -f /tmp/mc1/.load-on /tmp/mc1/.load-off /tmp/mc1/.load-seen
    # every mount unmounted while fio still writes on the others
    for _i in $(seq 1 $MC_N); do
        rm -f /tmp/mc$_i/mc*.0 2>/dev/null
        fio --name=bg$_i --directory=/tmp/mc$_i --rw=write --bs=64k --size=${FIO_MIB}M --numjobs=2 \
            --ioengine=libaio --iodepth=8 --direct=1 --time_based --runtime=900 > /tmp/.bg$_i.out 2>&1 &
        echo $! > /tmp/.bg$_i.pid
    done
    sleep 5
    for _i in $(seq 1 $MC_N); do
        _p=$(cat /tmp/.bg$_i.pid)
        kill -INT "$_p" 2>/dev/null
        _t0=$(now_ms)
        # bounded: gone, or a zombie (exited, not yet waited for)
        _end=$(( $(date +%s) + BOUND_S ))
        while [ -d /proc/$_p ] && [ "$(awk '{ print $3 }' /proc/$_p/stat 2>/dev/null)" != Z ] &&
            [ "$(date +%s)" -lt $_end ]; do sleep 1; done
        if [ -d /proc/$_p ] && [ "$(awk '{ print $3 }' /proc/$_p/stat 2>/dev/null)" != Z ]; then
            fail "fio-$_i-stops" "fio on mount $_i still running ${BOUND_S}s after SIGINT"
            # what the tasks wait on, into the console
            echo w > /proc/sysrq-trigger 2>/dev/null
            kill -9 "$_p" 2>/dev/null
            umount -l "/tmp/mc$_i"
            continue
        fi
        wait "$_p" 2>/dev/null
        rm -f /tmp/mc$_i/bg$_i.* 2>/dev/null
        _others=$(for _j in $(seq $((_i + 1)) $MC_N); do kill -0 "$(cat /tmp/.bg$_j.pid)" 2>/dev/null && echo $_j; done | wc -l)
        if timeout 120 umount "/tmp/mc$_i"; then
            _ms=$(( $(now_ms) - _t0 ))
            info "umount mount $_i: ${_ms} ms, fio still writing on $_others others"
            if [ $((_ms / 1000)) -le "$BOUND_S" ]; then pass "umount-$_i-under-load"; else fail "umount-$_i-under-load" "${_ms} ms"; fi
        else
            fail "umount-$_i-under-load" "umount failed or hung"; umount -l "/tmp/mc$_i"
        fi
    done
}

case $ROLE in
    single)
        fail many-conns "needs two VMs (scripts/vm --two-vm many-conns)"
        ;;
    server)
        mc_server && server_wait_client_done "${CLIENT_WAIT:-2400}"
        mc_server_end
        ;;
    client)
        mc_client
        mc_rxe_errors client
        client_signal_done || fail client-signal-done "$NFS_ERR"
        case $CLIENT_MOD in
            c) check unload-c-rpcrdma unload_c_rpcrdma ;;
            *) check unload-rust-rpcrdma unload_rust_rpcrdma ;;
        esac
        ;;
esac
