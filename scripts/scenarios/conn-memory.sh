# shellcheck shell=sh
# conn-memory: the kernel memory one idle RPC-over-RDMA connection costs, on
# the server and on the client, with the C module and with the project's.
# Two VMs (scripts/vm --two-vm conn-memory ...); a benchmark, not a test:
# scripts/bench-conn-memory runs it and prints the table.
#
# Phases, one after the other in the same boot pair: for each repetition,
# for each credit setting, for each SERVER-CLIENT pair of modules. A phase
# loads both modules afresh (their defaults), writes the credits to the
# sysctls both modules have (server /proc/sys/sunrpc/svc_rdma/max_requests,
# client /proc/sys/sunrpc/rdma_slot_table_entries; "default" writes
# nothing) and starts nfsd with its RDMA listener; then, on each VM:
# caches dropped, /proc/meminfo, /proc/zoneinfo, /proc/slabinfo and
# `rdma resource` read; the client mounts the server MOUNTS times over
# NFSv3 with nconnect=NCONNECT (each mount through its own address of the
# server, so each is its own nfs_client with its own connections) and sends
# statfs calls until every transport is connected; both read again (caches
# dropped); the client unmounts; both read a third time (memory returned?),
# nfsd stops (7.3's portlist cannot close a listener) and the modules are
# unloaded.
# Bytes per connection = the fall of MemFree (plus the free pages on the
# per-CPU lists, which MemFree leaves out) / connections (the server
# counts its RC queue pairs, the client its connected transports), split
# into slab (the caches of /proc/slabinfo, and kmalloc beyond 8 KiB, whole
# pages that meminfo's Slab counts and no cache lists), vmalloc (rxe's
# queues), per-CPU and the rest (other pages from the page allocator). The client's figure
# includes its NFS mounts' own memory (superblock, nfs_server, rpc_clnt),
# shared by NCONNECT connections.
#
# The VMs coordinate through a marker service on the server (TCP port
# CM_PORT, python3; nfsd restarts between phases): "put NAME VALUE" and
# "get NAME" ("-" when unset). Markers: cm-K-ready (server: nfsd up,
# measured), cm-K-up (client: all connected, measured; VALUE the
# connections), cm-K-measured (server), cm-K-down (client: unmounted,
# measured), cm-abort (server: gave up), client-done.
#
# One INFO line per side and phase, read by scripts/bench-conn-memory:
#   connmem side=S rep=R pair=SRV-CLI credits=C conns=N memfree=B slab=B
#     slabcaches=B kmalloc_large=B sunreclaim=B vmalloc=B percpu=B rest=B
#     mrs=N qps=N
# (bytes and RDMA objects per connection), and the slab caches that grew
# most, per connection ("connmem-slab ...").
# Checks (not thresholds on the figures): modules load, mounts succeed,
# every transport connects, the server sees the connections, RDMA
# resources go back to where they were, and MemFree comes back within
# 10% of what the connections took plus 4 MiB.
#
# Arguments: [PAIRS: SERVER-CLIENT module pairs, '+' between, default
# c-c+rust-c+c-rust] [CREDITS: '+' between, "default" or a number,
# default default+256] [REPS, default 2] [MOUNTS, default 4]
# [NCONNECT, default 16]
CM_PAIRS=$(echo "${1:-c-c+rust-c+c-rust}" | tr '+' ' ')
CM_CREDITS=$(echo "${2:-default+256}" | tr '+' ' ')
CM_REPS=${3:-2}
CM_MOUNTS=${4:-4}
CM_NCONNECT=${5:-16}
CM_PORT=7049
CM_MARK=/tmp/cm-markers
# The server's extra addresses, one per mount: 10.99.0.11, .12, ...
cm_addr() { echo "${SERVER_IP%.*}.$((10 + $1))"; }

cm_load() {  # cm_load c|rust
    case $1 in
        c) load_c_rpcrdma ;;
        *) load_rust_rpcrdma ;;
    esac
}
cm_unload() {
    mod_loaded rpcrdma && { rmmod rpcrdma || return 1; }
    mod_loaded rpcrdma_rs && { rmmod rpcrdma_rs || return 1; }
    return 0
}
# cm_res: "pd N cq N qp N cm_id N mr N" of the first RDMA device.
cm_res() {
    rdma resource show 2>/dev/null | head -n 1 |
        awk '{ for (i = 3; i < NF; i += 2) if ($i ~ /^(pd|cq|qp|cm_id|mr)$/) printf "%s %s ", $i, $(i + 1) }'
}
cm_rc_qps() { rdma resource show qp 2>/dev/null | grep -c ' type RC '; }

# cm_snap TAG: caches dropped, then meminfo, slabinfo and the RDMA
# resource counts into /tmp/.cm-TAG.*
cm_snap() {
    sync
    echo 3 > /proc/sys/vm/drop_caches
    sleep 2
    echo 3 > /proc/sys/vm/drop_caches
    cat /proc/meminfo > "/tmp/.cm-$1.mi"
    # free pages on the per-CPU lists, which MemFree leaves out (up to
    # high_max, tens of MiB on a 4 GiB guest): counted as free
    awk '$1 == "count:" { n += $2 } END { printf "PcpFree: %d kB\n", n * 4 }' /proc/zoneinfo >> "/tmp/.cm-$1.mi"
    cat /proc/slabinfo > "/tmp/.cm-$1.si" 2>/dev/null
    echo "$(cm_res) rcqp $(cm_rc_qps)" > "/tmp/.cm-$1.res"
}

# cm_mi A B: kB differences B - A of two meminfo snapshots, as "memfree D
# slab D ..." (memfree, MemFree with the per-CPU lists' free pages, as
# A - B: what was taken).
cm_mi() {
    awk 'FNR == NR { a[$1] = $2; next } { b[$1] = $2 }
        END {
            printf "memfree %d slab %d sunreclaim %d vmalloc %d percpu %d\n",
                a["MemFree:"] + a["PcpFree:"] - b["MemFree:"] - b["PcpFree:"], b["Slab:"] - a["Slab:"], b["SUnreclaim:"] - a["SUnreclaim:"],
                b["VmallocUsed:"] - a["VmallocUsed:"], b["Percpu:"] - a["Percpu:"]
        }' "/tmp/.cm-$1.mi" "/tmp/.cm-$2.mi"
}
# cm_resd A B FIELD: the increase of an RDMA resource count
cm_resd() {
    awk -v f="$3" 'FNR == NR { for (i = 1; i < NF; i += 2) a[$i] = $(i + 1); next }
        { for (i = 1; i < NF; i += 2) b[$i] = $(i + 1) } END { print b[f] - a[f] }' "/tmp/.cm-$1.res" "/tmp/.cm-$2.res"
}

# cm_report SIDE TAG0 TAG1 CONNS: INFO lines of one side's phase
cm_report() {
    _side=$1 _a=$2 _b=$3 _n=$4
    [ "$_n" -gt 0 ] || { fail "$_side-$CM_PHASE-connections" "no connections to divide by"; return 1; }
    read -r _x _mf _x _sl _x _su _x _vm _x _pc <<EOF
$(cm_mi "$_a" "$_b")
EOF
    _per() { echo $(( $1 * 1024 / _n )); }
    _mrs=$(cm_resd "$_a" "$_b" mr) _qps=$(cm_resd "$_a" "$_b" qp)
    # what the slab caches of /proc/slabinfo grew by, in kB: meminfo's
    # Slab also counts kmalloc beyond 8 KiB (whole pages), which no cache lists
    _sc=$(awk 'FNR == NR { if (FNR > 2) m[$1] = $15 * $6 * 4; next }
        FNR > 2 { d += $15 * $6 * 4 - m[$1] } END { print d + 0 }' "/tmp/.cm-$_a.si" "/tmp/.cm-$_b.si")
    info "connmem side=$_side rep=$CM_REP pair=$CM_PAIR credits=$CM_CR conns=$_n memfree=$(_per "$_mf") slab=$(_per "$_sl") slabcaches=$(_per "$_sc") kmalloc_large=$(_per $((_sl - _sc))) sunreclaim=$(_per "$_su") vmalloc=$(_per "$_vm") percpu=$(_per "$_pc") rest=$(_per $((_mf - _sl - _vm - _pc))) mrs=$((_mrs / _n)) qps=$((_qps / _n)) total_kB=$_mf"
    # the slab caches that grew most: bytes and objects per connection
    _top=$(awk -v n="$_n" 'FNR == NR { if (FNR > 2) { ao[$1] = $2; m[$1] = $15 * $6 * 4096 }; next }
        FNR > 2 { d = $15 * $6 * 4096 - m[$1]; if (d > 0) printf "%d %s=%d(%d)\n", d, $1, d / n, ($2 - ao[$1]) / n }' \
        "/tmp/.cm-$_a.si" "/tmp/.cm-$_b.si" | sort -rn | head -n 8 | awk '{ printf "%s ", $2 }')
    info "connmem-slab side=$_side rep=$CM_REP pair=$CM_PAIR credits=$CM_CR bytes(objects)/conn: $_top"
}

# cm_returned SIDE TAG0 TAG1 TAG2: MemFree after the unmount within 10% of
# what the connections took (TAG0 to TAG1), plus 4 MiB
cm_returned() {
    _taken=$(cm_mi "$2" "$3" | awk '{ print $2 }')
    _left=$(cm_mi "$2" "$4" | awk '{ print $2 }')
    info "connmem-return side=$1 rep=$CM_REP pair=$CM_PAIR credits=$CM_CR taken_kB=$_taken left_kB=$_left"
    if [ "$_left" -le $((_taken / 10 + 4096)) ]; then
        pass "$1-memory-returned-$CM_PHASE"
    else
        fail "$1-memory-returned-$CM_PHASE" "$_left kB of $_taken kB still taken after the unmount"
    fi
}

# the marker service (server)
cm_ctl_serve() {
    mkdir -p $CM_MARK
    python3 -c '
import os, socketserver, sys
d = sys.argv[1]
class H(socketserver.StreamRequestHandler):
    def handle(self):
        w = self.rfile.readline().decode().split()
        if len(w) < 2:
            return
        p = os.path.join(d, os.path.basename(w[1]))
        if w[0] == "put":
            with open(p + ".tmp", "w") as f:
                f.write(" ".join(w[2:] or ["1"]) + "\n")
            os.rename(p + ".tmp", p)
            self.wfile.write(b"ok\n")
        else:
            self.wfile.write(open(p, "rb").read() if os.path.exists(p) else b"-\n")
socketserver.TCPServer.allow_reuse_address = True
socketserver.TCPServer(("0.0.0.0", int(sys.argv[2])), H).serve_forever()
' $CM_MARK $CM_PORT &
    CM_CTL_PID=$!
}
cm_mark() { echo "${2:-1}" > "$CM_MARK/.$1.tmp" && mv "$CM_MARK/.$1.tmp" "$CM_MARK/$1"; }   # server
cm_marked() { test -s "$CM_MARK/$1"; }                                                    # server
# client: cm_ctl put NAME [VALUE] | get NAME
cm_ctl() {
    timeout 10 bash -c 'exec 3<>"/dev/tcp/$0/$1" && echo "$2" >&3 && head -n 1 <&3' "$SERVER_IP" $CM_PORT "$*" 2>/dev/null
}
cm_has() { _v=$(cm_ctl get "$1") && [ -n "$_v" ] && [ "$_v" != - ]; }
# client: wait for NAME (or cm-abort), up to $2 seconds
cm_await() {
    _end=$(( $(date +%s) + $2 ))
    while [ "$(date +%s)" -lt $_end ]; do
        cm_has "$1" && return 0
        cm_has cm-abort && return 1
        sleep 1
    done
    return 1
}

cm_phases() {  # one line per phase: K REP PAIR CREDITS
    _k=0
    for _r in $(seq 1 "$CM_REPS"); do
        for _c in $CM_CREDITS; do
            for _p in $CM_PAIRS; do
                _k=$((_k + 1)); echo "$_k $_r $_p $_c"
            done
        done
    done
}

cm_server() {
    _i=1
    while [ $_i -le "$CM_MOUNTS" ]; do
        ip addr add "$(cm_addr $_i)/24" dev "$NETIF" || say "ip addr add $(cm_addr $_i) failed"
        _i=$((_i + 1))
    done
    NFSD_THREADS=16
    cm_ctl_serve
    cm_phases > /tmp/.cm-phases
    while read -r CM_PHASE CM_REP CM_PAIR CM_CR <&3; do
        _smod=${CM_PAIR%-*}
        check "server-load-$_smod-$CM_PHASE" cm_load "$_smod" || return 1
        [ "$CM_CR" = default ] || echo "$CM_CR" > /proc/sys/sunrpc/svc_rdma/max_requests ||
            { fail "server-credits-$CM_PHASE" "cannot write svc_rdma/max_requests"; return 1; }
        CM_CR_SET=$(cat /proc/sys/sunrpc/svc_rdma/max_requests)
        start_nfs_server > /tmp/.cm-nfsd.log 2>&1 ||
            { fail "nfs-server-start-$CM_PHASE" "$NFS_ERR"; cat /tmp/.cm-nfsd.log; return 1; }
        say "phase $CM_PHASE: rep $CM_REP, $CM_PAIR, credits $CM_CR (svc_rdma/max_requests $CM_CR_SET)"
        cm_snap s0
        cm_mark "cm-$CM_PHASE-ready"
        if ! wait_for 900 cm_marked "cm-$CM_PHASE-up"; then
            fail "server-phase-$CM_PHASE" "the client never said its connections were up"; return 1
        fi
        _cn=$(cat "$CM_MARK/cm-$CM_PHASE-up")
        cm_snap s1
        _q=$(( $(awk '{ print $NF }' /tmp/.cm-s1.res) - $(awk '{ print $NF }' /tmp/.cm-s0.res) ))
        if [ "$_q" -ge "$_cn" ]; then pass "server-sees-connections-$CM_PHASE"
        else fail "server-sees-connections-$CM_PHASE" "$_q RC queue pairs for $_cn client transports"; fi
        dmesg | grep 'svcrdma: accepted' | tail -n 1 | sed 's/^/vm:   /'
        cm_report server s0 s1 "$_q"
        cm_mark "cm-$CM_PHASE-measured"
        wait_for 600 cm_marked "cm-$CM_PHASE-down" ||
            { fail "server-phase-$CM_PHASE" "the client never said it had unmounted"; return 1; }
        _r0=$(cat /tmp/.cm-s0.res) _t0=$(date +%s)
        while [ "$(cm_res) rcqp $(cm_rc_qps)" != "$_r0" ] && [ $(( $(date +%s) - _t0 )) -lt 120 ]; do sleep 2; done
        cm_snap s2
        if [ "$(cat /tmp/.cm-s2.res)" = "$_r0" ]; then pass "server-rdma-resources-back-$CM_PHASE"
        else fail "server-rdma-resources-back-$CM_PHASE" "start: $_r0; now: $(cat /tmp/.cm-s2.res)"; fi
        cm_returned server s0 s1 s2
        stop_nfs_server || say "nfsd threads still running"
        wait_for 60 cm_unload || { fail "server-unload-$CM_PHASE" "$(grep rpcrdma /proc/modules)"; return 1; }
    done 3< /tmp/.cm-phases
    return 0
}

cm_client() {
    cm_phases > /tmp/.cm-phases
    while read -r CM_PHASE CM_REP CM_PAIR CM_CR <&3; do
        _cmod=${CM_PAIR#*-}
        # (the first phase: the server VM may still be booting)
        cm_await "cm-$CM_PHASE-ready" 900 ||
            { fail "client-phase-$CM_PHASE" "the server never said it was ready"; return 1; }
        check "client-load-$_cmod-$CM_PHASE" cm_load "$_cmod" || return 1
        [ "$CM_CR" = default ] || echo "$CM_CR" > /proc/sys/sunrpc/rdma_slot_table_entries ||
            { fail "client-credits-$CM_PHASE" "cannot write rdma_slot_table_entries"; return 1; }
        say "phase $CM_PHASE: rep $CM_REP, $CM_PAIR, credits $CM_CR (rdma_slot_table_entries $(cat /proc/sys/sunrpc/rdma_slot_table_entries))"
        cm_snap c0
        _i=1 _ok=1
        while [ $_i -le "$CM_MOUNTS" ]; do
            if ! nfs_mount 3 "$(cm_addr $_i)" "/tmp/cm$_i" "nconnect=$CM_NCONNECT"; then
                fail "client-mount-$_i-$CM_PHASE" "$NFS_ERR"; _ok=0; break
            fi
            _i=$((_i + 1))
        done
        [ $_ok = 1 ] && pass "client-mounts-$CM_PHASE"
        # statfs calls until every transport has connected (round robin
        # over a mount's transports: NCONNECT calls reach each once)
        _t0=$(date +%s) _conns=0 _all=$((CM_MOUNTS * CM_NCONNECT))
        while [ $_ok = 1 ] && [ $(( $(date +%s) - _t0 )) -lt 120 ]; do
            _i=1
            while [ $_i -le "$CM_MOUNTS" ]; do
                _j=0
                while [ $_j -lt "$CM_NCONNECT" ]; do stat -f "/tmp/cm$_i" > /dev/null; _j=$((_j + 1)); done
                _i=$((_i + 1))
            done
            _conns=0 _i=1
            while [ $_i -le "$CM_MOUNTS" ]; do
                _conns=$((_conns + $(xprt_fields_all "/tmp/cm$_i" 3 | awk '$1 > 0' | wc -l)))
                _i=$((_i + 1))
            done
            [ $_conns -ge $_all ] && break
        done
        if [ $_conns -ge $_all ]; then pass "client-all-connected-$CM_PHASE"
        else fail "client-all-connected-$CM_PHASE" "$_conns of $_all transports connected"; fi
        for _x in /sys/kernel/sunrpc/xprt-switches/switch-*/xprt-*-rdma; do
            [ -r "$_x/xprt_info" ] && { say "$(basename "$_x"): $(tr '\n' ' ' < "$_x/xprt_info")"; break; }
        done
        dmesg | grep 'rpcrdma_rs.*connected' | tail -n 1 | sed 's/^/vm:   /'
        cm_snap c1
        cm_report client c0 c1 "$_conns"
        cm_ctl put "cm-$CM_PHASE-up" "$_conns" > /dev/null
        cm_await "cm-$CM_PHASE-measured" 600 ||
            { fail "client-phase-$CM_PHASE" "the server never said it had measured"; return 1; }
        _i=1
        while [ $_i -le "$CM_MOUNTS" ]; do
            mountpoint -q "/tmp/cm$_i" && { nfs_umount "/tmp/cm$_i" || fail "client-umount-$_i-$CM_PHASE" "umount failed"; }
            _i=$((_i + 1))
        done
        _r0=$(cat /tmp/.cm-c0.res) _t0=$(date +%s)
        while [ "$(cm_res) rcqp $(cm_rc_qps)" != "$_r0" ] && [ $(( $(date +%s) - _t0 )) -lt 120 ]; do sleep 2; done
        cm_snap c2
        if [ "$(cat /tmp/.cm-c2.res)" = "$_r0" ]; then pass "client-rdma-resources-back-$CM_PHASE"
        else fail "client-rdma-resources-back-$CM_PHASE" "start: $_r0; now: $(cat /tmp/.cm-c2.res)"; fi
        cm_returned client c0 c1 c2
        wait_for 60 cm_unload || fail "client-unload-$CM_PHASE" "$(lsmod | grep rpcrdma)"
        cm_ctl put "cm-$CM_PHASE-down" > /dev/null
    done 3< /tmp/.cm-phases
    return 0
}

case $ROLE in
    single)
        fail conn-memory "needs two VMs (scripts/vm --two-vm conn-memory)"
        ;;
    server)
        cm_server || cm_mark cm-abort
        if wait_for "${CLIENT_WAIT:-600}" cm_marked client-done; then pass server-client-finished
        else fail server-client-finished "no client-done marker"; fi
        stop_nfs_server > /dev/null 2>&1
        kill "$CM_CTL_PID" 2>/dev/null
        ;;
    client)
        cm_client
        cm_ctl put client-done > /dev/null || fail client-signal-done "marker service unreachable"
        ;;
esac
