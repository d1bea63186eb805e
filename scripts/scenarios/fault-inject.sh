# shellcheck shell=sh
# fault-inject: faults injected under load, two VMs, on the debug kernel
# (kernel/debug.config: FAILSLAB, FAIL_PAGE_ALLOC, FAIL_SUNRPC).
#   scripts/vm --two-vm fault-inject DIRECTIONS [SIZE_MIB]
# DIRECTIONS: one or more CLIENT-SERVER[:VERS[:PHASES]] joined by "+", run
# one after the other in the same two VMs, e.g. rust-c:3+c-rust+rust-rust:4.1.
# CLIENT and SERVER: rust (rpcrdma_rs.ko) or c (the in-tree rpcrdma.ko);
# VERS defaults to 4.2. PHASES, '.' between, picks the phases below that
# the direction runs (all of them when absent), e.g.
# rust-c:3:alloc.disconnect.memcg; devremove-client and devremove-server
# name devremove's two halves. Between directions the client unmounts and the
# server stops nfsd, and each side swaps its transport module (a rust
# module must unload with nothing live).
# The client runs fio (O_DIRECT writes, then a verifying read pass, over the
# wire) through each phase:
#   alloc       failslab and fail_page_alloc fail ALLOC_PERCENT of the
#               allocations whose call stack passes through rpcrdma_rs's
#               code (the stack-trace filter), on each side that runs
#               rpcrdma_rs, until ALLOC_TIMES faults per filter have been
#               injected
#   disconnect  sunrpc's fail_sunrpc breaks the client's connection every
#               DISC_INTERVAL RPCs (the transport's inject_disconnect op),
#               and with rpcrdma_rs serving, the server closes one every
#               DISC_INTERVAL calls too
#   connect     the project's client only: for each errno of
#               CONNECT_ERRNOS, the next connect fails with it (debugfs
#               client_fault_connect) and a disconnect is injected; fio
#               must not see it, and the failed connect must show
#   restart     nfsd restarted 5 times while fio runs
#   devremove   the rxe device removed and added back under I/O, on the
#               client, then on the server
#   memcg       buffered writes from a memory cgroup capped at MEMCG_MIB,
#               read back and verified after the caches are dropped
# Under load means fio passes of SIZE MiB one after the other until the
# fault's action has finished (each pass verified). Every phase is bounded
# in time; the counts of injected faults are INFO lines; a rust module
# unloads with no RDMA object live (and the harness fails the run on any
# kmemleak, KASAN or lockdep report). Case names carry the direction.
# The two VMs talk through files in the export: the client asks
# (.fi-req-NAME), the server answers (.fi-ack-NAME).
case ${1:-} in
    rust|c) DIRECTIONS="$1-${2:-c}"; SIZE=${3:-2} ;;   # the old form: CLIENT SERVER [SIZE]
    *) DIRECTIONS=${1:-rust-c}; SIZE=${2:-2} ;;
esac
MNT=/tmp/mnt
DISC_INTERVAL=${DISC_INTERVAL:-60}
MEMCG_MIB=${MEMCG_MIB:-8}
# A connection's setup makes hundreds of allocations (a Receive buffer and
# its work request per credit), so any steady rate fails nearly every
# accept and connect. A budget of faults per side instead: each one lands
# on a data-path or a setup path and costs a reconnect at worst, and the
# run goes on once it is spent. Each failed connect doubles sunrpc's
# reconnect delay (up to a minute here), so the budget is small. The rate
# only says how soon the budget is spent. rpcrdma_rs allocates nothing per
# RPC on either side once a connection's contexts are made (the server's
# grow with its first Calls and Replies), so in fi-alloc each of its sides
# breaks its connection once (disconnects_arm client 1, server 1): the
# faults land on the connect and accept paths and on the new connection's
# first RPCs, and a phase that injected nothing fails.
ALLOC_PERCENT=${ALLOC_PERCENT:-5}
ALLOC_TIMES=${ALLOC_TIMES:-3}
PHASE_TIMEOUT=${PHASE_TIMEOUT:-420}
DBG=/sys/kernel/debug

load_mod() {  # load_mod rust|c
    if [ "$1" = rust ]; then load_rust_rpcrdma; else load_c_rpcrdma; fi
}

# ---- allocation faults aimed at rpcrdma_rs ---------------------------------
# Only allocations whose call stack passes through the module's .text fail
# (require-start/require-end), sleeping ones included, order 0 included.
alloc_faults_arm() {
    _start=$(cat /sys/module/rpcrdma_rs/sections/.text 2>/dev/null) || return 1
    # "  [ 3] .text  PROGBITS  addr off size ...": drop the index first (a
    # one-digit one is two fields).
    _size=$(readelf -SW "$RUST_RPCRDMA_KO" | sed 's/^ *\[ *[0-9]*\] *//' | awk '$1 == ".text" { print "0x" $5; exit }')
    [ -n "$_size" ] || return 1
    # Module addresses are above 2^63: shell arithmetic would overflow.
    _end=$(python3 -c "import sys; print(hex(int(sys.argv[1], 16) + int(sys.argv[2], 16)))" "$_start" "$_size") &&
        [ -n "$_end" ] || return 1
    for _f in failslab fail_page_alloc; do
        _d=$DBG/$_f
        [ -d "$_d" ] || return 1
        echo "$_start" > "$_d/require-start" || return 1
        echo "$_end" > "$_d/require-end" || return 1
        echo 32 > "$_d/stacktrace-depth"
        echo N > "$_d/ignore-gfp-wait"
        [ -f "$_d/min-order" ] && echo 0 > "$_d/min-order"
        # Each injected fault's call stack in the kernel log (verbose 2; 1
        # prints only that one was injected): the budget is a few faults,
        # so a few stacks, and a failure names the path that failed.
        echo 2 > "$_d/verbose"
        echo 1 > "$_d/interval"
        echo $ALLOC_TIMES > "$_d/times"
        echo "$ALLOC_PERCENT" > "$_d/probability"
    done
    say "allocation faults armed: ${ALLOC_PERCENT}% of rpcrdma_rs allocations in [$_start, $_end)"
}

# Disarms and prints "failslab=N fail_page_alloc=M" (faults injected).
alloc_faults_disarm() {
    _out=
    for _f in failslab fail_page_alloc; do
        _d=$DBG/$_f
        echo 0 > "$_d/probability"
        _left=$(cat "$_d/times")
        _out="$_out $_f=$(( ALLOC_TIMES - _left ))"
    done
    echo "${_out# }"
}

# ---- disconnects through sunrpc's fail_sunrpc -----------------------------------
# disconnects_arm client|server TIMES: the side's connection is broken every
# DISC_INTERVAL RPCs (client) or calls (server), TIMES times at most; false
# without fail_sunrpc (CONFIG_FAIL_SUNRPC).
disconnects_arm() {
    _d=$DBG/fail_sunrpc
    [ -d $_d ] || return 1
    echo N > "$_d/ignore-$1-disconnect"
    echo 0 > $_d/verbose
    echo "$DISC_INTERVAL" > $_d/interval
    echo "$2" > $_d/times
    echo 100 > $_d/probability
}

# disconnects_disarm client|server: stops them; prints the times left.
disconnects_disarm() {
    _d=$DBG/fail_sunrpc
    echo 0 > $_d/probability
    echo Y > "$_d/ignore-$1-disconnect"
    cat $_d/times
}

# ---- server --------------------------------------------------------------------
# restart_nfsd: every transport closes, the listener is made again.
restart_nfsd() {
    echo "-rdma $NFS_RDMA_PORT" > /proc/fs/nfsd/portlist 2>/dev/null
    rpc.nfsd 0
    sleep 2
    rpc.nfsd -V 3 -V 4 -V 4.1 -V 4.2 "${NFSD_THREADS:-8}"
    echo "rdma $NFS_RDMA_PORT" > /proc/fs/nfsd/portlist || say "restart: rdma listener refused"
}

device_cycle() {  # removes this VM's RDMA device and adds it back
    _dev=$(rdma link show | awk '{ split($2, a, "/"); print a[1]; exit }')
    _t0=$(now_ms)
    # Bounded, but generously: under I/O the C client's removal takes over
    # 60 s on the debug kernel (every transport on the device is torn down
    # before ib_unregister_device returns).
    timeout "${DEVREMOVE_TIMEOUT:-240}" rdma link delete "$_dev"; _rc=$?
    _ms=$(( $(now_ms) - _t0 ))
    sleep 2
    rdma link add "$_dev" type "${_dev%%[0-9]*}" netdev "$NETIF" || _rc=1
    echo "$_rc $_ms"
}

server_requests() {
    while [ ! -e "$EXPORT/.client-done" ]; do
        for _r in "$EXPORT"/.fi-req-*; do
            [ -e "$_r" ] || continue
            _name=${_r##*/.fi-req-}
            rm -f "$_r"
            say "request: $_name"
            case $_name in
                alloc-arm)
                    # One close under the faults: the client's next
                    # connect is accepted with them armed (the server's
                    # allocations once its contexts are made).
                    if [ "$SERVER_MOD" = rust ]; then
                        alloc_faults_arm && disconnects_arm server 1 && _a=armed || _a=failed
                    else
                        _a=none
                    fi ;;
                alloc-disarm)
                    if [ "$SERVER_MOD" = rust ]; then
                        [ -d $DBG/fail_sunrpc ] && disconnects_disarm server > /dev/null
                        _a=$(alloc_faults_disarm)
                    else
                        _a=none
                    fi ;;
                disc-arm)
                    # svc_process: the server closes a connection every
                    # DISC_INTERVAL calls (svc_xprt_deferred_close).
                    if [ "$SERVER_MOD" = rust ] && disconnects_arm server 1000; then
                        _a=armed
                    else
                        _a=none
                    fi ;;
                disc-disarm)
                    if [ "$SERVER_MOD" = rust ] && [ -d $DBG/fail_sunrpc ]; then
                        _a=$(( 1000 - $(disconnects_disarm server) ))
                    else
                        _a=none
                    fi ;;
                restart)
                    _i=0
                    while [ $_i -lt 5 ]; do
                        _i=$((_i + 1)); restart_nfsd; say "nfsd restart $_i of 5"; sleep 2
                    done
                    _a=5 ;;
                devremove)
                    _a=$(device_cycle) ;;
                *) _a=unknown ;;
            esac
            marker "$EXPORT/.fi-ack-$_name" "$_a"
        done
        sleep 1
    done
}

# serve_direction N: one direction's server side, nfsd started and stopped.
serve_direction() {
    check "$DIR_TAG:load-$SERVER_MOD-rpcrdma" load_mod "$SERVER_MOD" || return 1
    if start_nfs_server; then pass "$DIR_TAG:nfs-server-start"
    else fail "$DIR_TAG:nfs-server-start" "$NFS_ERR"; return 1; fi
    server_requests &
    _helper=$!
    server_wait_client_done $(( PHASE_TIMEOUT * 8 ))
    kill $_helper 2>/dev/null
    [ "$SERVER_MOD" = rust ] && [ -d $DBG/failslab ] && echo 0 > $DBG/failslab/probability &&
        echo 0 > $DBG/fail_page_alloc/probability
    rm -f "$EXPORT"/.client-done "$EXPORT"/.fi-*
    check "$DIR_TAG:nfs-server-stop" stop_nfs_server
}

# ---- client --------------------------------------------------------------------
# ask NAME [SECONDS]: the server's answer to request NAME, or non-zero.
# The request is a file made over the mount under test: should making it
# fail (a hard mount must never see an error), that is the failure, said
# at once, not a server that did not answer.
ask() {
    _f=$MNT/.fi-ack-$1
    rm -f "$_f"
    if ! _err=$(marker "$MNT/.fi-req-$1" 2>&1 && sync 2>&1); then
        echo "cannot make the request over the mount: $_err" >&2
        return 2
    fi
    wait_for "${2:-120}" sh -c "ls -a $MNT | grep -q '^.fi-ack-$1$'" || return 1
    cat "$_f"; rm -f "$_f"
}

# fio_verify NAME MiB [more fio options]: O_DIRECT sequential writes with
# crc32c headers, then a verifying read pass; bounded by PHASE_TIMEOUT.
fio_verify() {
    _n=$1 _mib=$2; shift 2
    timeout -k 10 "$PHASE_TIMEOUT" fio --name="$_n" --filename="$MNT/$_n.dat" --rw=write \
        --bs=64k --size="${_mib}M" --ioengine=psync --direct=1 --verify=crc32c \
        --verify_fatal=1 --do_verify=1 "$@" > "/tmp/.fio-$_n.log" 2>&1
    _rc=$?
    [ $_rc = 0 ] || tail -n 5 "/tmp/.fio-$_n.log" | sed "s/^/vm:   fio $_n: /"
    rm -f "$MNT/$_n.dat"
    return $_rc
}

phase() {  # phase NAME CMD...: PASS/FAIL DIRECTION:NAME with the time it took
    _pn=$DIR_TAG:$1; shift
    _t0=$(date +%s)
    if "$@"; then pass "$_pn"; else fail "$_pn" "${PHASE_ERR:-exit $?}"; fi
    info "phase $_pn took $(( $(date +%s) - _t0 ))s"
    PHASE_ERR=
}

alloc_phase() {
    if [ "$CLIENT_MOD" = rust ]; then
        alloc_faults_arm || { PHASE_ERR="cannot arm the client"; return 1; }
        # One reconnect under the faults: the client's allocations.
        disconnects_arm client 1 || { PHASE_ERR="no fail_sunrpc (CONFIG_FAIL_SUNRPC)"; return 1; }
    fi
    if ! _srv=$(ask alloc-arm 2>/tmp/.fi-ask-err); then
        PHASE_ERR="server did not arm$(sed "s/^/: /" /tmp/.fi-ask-err)"
        [ "$CLIENT_MOD" = rust ] && { disconnects_disarm client > /dev/null; alloc_faults_disarm > /dev/null; }
        return 1
    fi
    fio_verify fi-alloc $(( SIZE * 2 )); _rc=$?
    _cli=none
    if [ "$CLIENT_MOD" = rust ]; then
        disconnects_disarm client > /dev/null
        _cli=$(alloc_faults_disarm)
    fi
    _srv=$(ask alloc-disarm 300) || _srv="no answer"
    info "$DIR_TAG injected allocation failures: client $_cli; server $_srv"
    [ $_rc = 0 ] || { PHASE_ERR="fio failed under allocation faults"; return 1; }
    # A phase that injected nothing proved nothing.
    case "$_cli $_srv" in
        *=[1-9]*) ;;
        *) PHASE_ERR="no allocation fault was injected (client $_cli, server $_srv)"; return 1 ;;
    esac
}

disconnect_phase() {
    _before=$(awk '/xprt:/ { print $5; exit }' /proc/self/mountstats 2>/dev/null)
    disconnects_arm client 1000 || { PHASE_ERR="no fail_sunrpc (CONFIG_FAIL_SUNRPC)"; return 1; }
    _srv=$(ask disc-arm) || _srv="no answer"
    fio_verify fi-disconnect "$SIZE"; _rc=$?
    _n=$(( 1000 - $(disconnects_disarm client) ))
    _srv=$(ask disc-disarm 300) || _srv="no answer"
    _after=$(awk '/xprt:/ { print $5; exit }' /proc/self/mountstats 2>/dev/null)
    info "$DIR_TAG injected disconnects (every $DISC_INTERVAL RPCs): client $_n, server $_srv; transport connects ${_before:-?} -> ${_after:-?}"
    [ $_rc = 0 ] || { PHASE_ERR="fio failed under injected disconnects"; return 1; }
    [ "$_n" -gt 0 ] || { PHASE_ERR="no disconnect was injected"; return 1; }
}

# connect_phase: a connect that fails for want of memory or of a file
# (rxe's queue pair allocates a socket) is retried, not reported to the
# RPCs waiting for it: sunrpc fails an RPC on an errno it does not retry,
# and a hard mount must never see one.
CONNECT_ERRNOS=${CONNECT_ERRNOS:-12 23 24}
connects_failed() {  # connects_failed ERRNO: the log's count of them
    dmesg | grep -c "connect failed: error -$1\$"
}
connect_phase() {
    _f=$DBG/rpcrdma_rs/client_fault_connect
    [ -w "$_f" ] || { PHASE_ERR="no $_f (CONFIG_FAULT_INJECTION)"; return 1; }
    for _e in $CONNECT_ERRNOS; do
        _seen=$(connects_failed "$_e")
        echo "$_e" > "$_f" || { PHASE_ERR="cannot arm errno $_e"; return 1; }
        disconnects_arm client 1 || { PHASE_ERR="no fail_sunrpc (CONFIG_FAIL_SUNRPC)"; return 1; }
        fio_verify "fi-connect-$_e" $(( SIZE * 2 )); _rc=$?
        disconnects_disarm client > /dev/null
        echo 0 > "$_f"
        [ $_rc = 0 ] || { PHASE_ERR="fio failed after a connect failed with errno $_e"; return 1; }
        [ "$(connects_failed "$_e")" -gt "$_seen" ] ||
            { PHASE_ERR="no connect failed with errno $_e"; return 1; }
    done
    info "$DIR_TAG connects failed with errnos $CONNECT_ERRNOS; fio went on"
}

# fio_passes NAME: verified fio passes of SIZE MiB, one after the other,
# until /tmp/.fi-stop exists; prints the count, fails on the first bad pass.
fio_passes() {
    _i=0
    while [ ! -e /tmp/.fi-stop ]; do
        fio_verify "$1" "$SIZE" || { echo "$_i"; return 1; }
        _i=$((_i + 1))
    done
    echo "$_i"
}

under_load() {  # under_load NAME REQUEST|local-devremove: fio while it happens
    rm -f /tmp/.fi-stop
    fio_passes "fi-$1" > /tmp/.fi-passes &
    _fio=$!
    sleep 3
    if [ "$2" = local-devremove ]; then
        _a=$(device_cycle)
    else
        _a=$(ask "$2" 300) || _a="no answer"
    fi
    # one more pass after the fault: I/O goes on once it is over
    sleep 1; touch /tmp/.fi-stop
    wait $_fio; _rc=$?
    info "$DIR_TAG $1: $_a; $(cat /tmp/.fi-passes) verified fio passes of $SIZE MiB"
    [ $_rc = 0 ] || { PHASE_ERR="fio failed ($2: $_a)"; return 1; }
    case $2 in *devremove) [ "${_a%% *}" = 0 ] || { PHASE_ERR="rdma link delete: $_a"; return 1; } ;; esac
}

memcg_phase() {
    _cg=/sys/fs/cgroup
    mountpoint -q $_cg || mount -t cgroup2 none $_cg || { PHASE_ERR="no cgroup2"; return 1; }
    echo +memory > $_cg/cgroup.subtree_control 2>/dev/null
    mkdir -p $_cg/fi-writer
    echo $(( MEMCG_MIB * 1048576 )) > $_cg/fi-writer/memory.max || { PHASE_ERR="no memory controller"; return 1; }
    _mib=$(( MEMCG_MIB * 3 / 2 ))
    # The data comes from tmpfs, charged outside the group; dd's few pages
    # leave the cap to the NFS page cache (fio's own 18 MiB would not fit).
    head -c $(( _mib * 1048576 )) /dev/urandom > /tmp/.memcg-src
    # buffered writes from inside the group: writeback under reclaim
    timeout -k 10 "$PHASE_TIMEOUT" sh -c "echo \$\$ > $_cg/fi-writer/cgroup.procs && exec dd \
        if=/tmp/.memcg-src of=$MNT/fi-memcg.dat bs=256k conv=fsync" > /tmp/.dd-memcg.log 2>&1; _rc=$?
    _ev=$(awk '$1 == "max" { print $2 }' $_cg/fi-writer/memory.events 2>/dev/null)
    _hi=$(cat $_cg/fi-writer/memory.peak 2>/dev/null)
    info "$DIR_TAG memcg: ${_mib} MiB written from a ${MEMCG_MIB} MiB group; memory.max events ${_ev:-?}, peak ${_hi:-?} bytes"
    if [ $_rc != 0 ]; then
        tail -n 5 /tmp/.dd-memcg.log | sed 's/^/vm:   dd: /'; PHASE_ERR="buffered write failed"
    else
        sync; echo 3 > /proc/sys/vm/drop_caches
        timeout -k 10 "$PHASE_TIMEOUT" cmp -s /tmp/.memcg-src $MNT/fi-memcg.dat || PHASE_ERR="verify after memcg pressure failed"
    fi
    rm -f $MNT/fi-memcg.dat /tmp/.memcg-src
    rmdir $_cg/fi-writer 2>/dev/null
    [ -z "$PHASE_ERR" ]
}

# client_direction: one direction's client side, mounted to unmounted.
client_direction() {
    check "$DIR_TAG:load-$CLIENT_MOD-rpcrdma" load_mod "$CLIENT_MOD" || return 1
    if ! nfs_mount "$VERS" "$SERVER_IP" $MNT; then fail "$DIR_TAG:fi-mount" "$NFS_ERR"; return 1; fi
    pass "$DIR_TAG:fi-mount"
    # A server's report lands in the export; a directory delegation would
    # hold it back (see c-client-rust-server, server_device_removal).
    [ -w /sys/module/nfsv4/parameters/directory_delegations ] &&
        echo N > /sys/module/nfsv4/parameters/directory_delegations
    wanted alloc && phase fi-alloc alloc_phase
    wanted disconnect && phase fi-disconnect disconnect_phase
    wanted connect && [ "$CLIENT_MOD" = rust ] && phase fi-connect connect_phase
    wanted restart && phase fi-nfsd-restart under_load nfsd-restart restart
    wanted devremove-client && phase fi-devremove-client under_load devremove-client local-devremove
    wanted devremove-server && phase fi-devremove-server under_load devremove-server devremove
    wanted memcg && phase fi-memcg memcg_phase
    show_xprt
    marker $MNT/.client-done; sync
    nfs_umount $MNT || fail "$DIR_TAG:fi-umount" "umount"
}

# unload_no_leaks: rpcrdma_rs unloads, and its live-object counters said
# nothing was left at unload.
unload_no_leaks() {
    check "$DIR_TAG:unload-rust-rpcrdma" unload_rust_rpcrdma
    _leak='RDMA objects still live|still live at unload|still in use at unload'
    if dmesg | grep -Eq "$_leak"; then
        fail "$DIR_TAG:$ROLE-unload-no-leaks" "$(dmesg | grep -E "$_leak" | tail -n 1)"
    else
        pass "$DIR_TAG:$ROLE-unload-no-leaks"
    fi
}

server_nfsd_down() { ! tcp_probe "$SERVER_IP" 2049; }

# wanted PHASE: the direction runs PHASE.
wanted() {
    [ -z "$PHASES" ] && return 0
    case ".$PHASES." in *".$1."*) return 0 ;; esac
    # devremove: both halves
    case "$1" in devremove-*) case ".$PHASES." in *.devremove.*) return 0 ;; esac ;; esac
    return 1
}

# set_direction SPEC: CLIENT_MOD, SERVER_MOD, VERS, PHASES and DIR_TAG from
# CLIENT-SERVER[:VERS[:PHASES]].
set_direction() {
    IFS=: read -r _pair VERS PHASES <<EOF_SPEC
$1
EOF_SPEC
    VERS=${VERS:-4.2}
    for _p in $(echo "$PHASES" | tr '.' ' '); do
        case $_p in
            alloc|disconnect|connect|restart|devremove|devremove-client|devremove-server|memcg) ;;
            *) fail fault-inject "bad phase $_p in $1 (alloc, disconnect, connect, restart, devremove[-client|-server], memcg)"; return 1 ;;
        esac
    done
    CLIENT_MOD=${_pair%-*} SERVER_MOD=${_pair#*-}
    DIR_TAG="$CLIENT_MOD-$SERVER_MOD-v$VERS"
    case "$CLIENT_MOD $SERVER_MOD" in
        rust\ rust|rust\ c|c\ rust|c\ c) ;;
        *) fail fault-inject "bad direction $1 (CLIENT-SERVER[:VERS], each rust or c)"; return 1 ;;
    esac
}

_dirs=$(echo "$DIRECTIONS" | tr '+' ' ')
_first=1
for _d in $_dirs; do
    set_direction "$_d" || break
    say "---- direction $DIR_TAG ----"
    case $ROLE in
        server)
            serve_direction
            [ "$SERVER_MOD" = rust ] && unload_no_leaks
            ;;
        client)
            # The next direction's server is up once its nfsd went down
            # and came back: wait until the previous one stopped.
            if [ $_first = 0 ]; then
                wait_for 180 server_nfsd_down || say "the server's nfsd did not stop within 180s"
            fi
            client_direction
            [ "$CLIENT_MOD" = rust ] && unload_no_leaks
            ;;
        *)
            fail fault-inject "needs two VMs (scripts/vm --two-vm fault-inject ...)"
            break
            ;;
    esac
    _first=0
done
