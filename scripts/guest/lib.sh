# shellcheck shell=sh
# Helper functions for guest scenarios (POSIX sh; sourced by scripts/guest/init
# before scripts/scenarios/<name>.sh). Environment provided by init:
#   ROLE (single|server|client), VMNAME, SERVER_IP, CLIENT_IP, SERVER_IP6,
#   CLIENT_IP6, NETIF, MYIP, KBUILD, REPO_ROOT, RESULTS, SCENARIO, RDMA_OK
# Result protocol: one line per case in $RESULTS/status, "PASS <case>" or
# "FAIL <case> <reason>"; KTAP files in $RESULTS/ktap/*.ktap.

EXPORT=${EXPORT:-/tmp/export}         # exported directory (tmpfs)
NFS_RDMA_PORT=${NFS_RDMA_PORT:-20049}
# How long nfs_mount keeps retrying (the server VM may still be booting).
if [ "$ROLE" = client ]; then NFS_MOUNT_WAIT=${NFS_MOUNT_WAIT:-420}; else NFS_MOUNT_WAIT=${NFS_MOUNT_WAIT:-20}; fi
NFS_ERR=

# ---- logging and results --------------------------------------------------
say()  { echo "vm: [$(cut -d' ' -f1 /proc/uptime)] $*"; }

# kunit_filter ARG: if ARG is filter_glob=GLOB, KUnit runs only the cases
# GLOB matches (its filter, applied when a test module loads); true then,
# so that the caller shifts it off.
kunit_filter() {
    case $1 in
        filter_glob=*)
            # No newline: a charp parameter keeps it, and the glob would not match.
            printf %s "${1#filter_glob=}" > /sys/module/kunit/parameters/filter_glob
            say "kunit filter_glob $(cat /sys/module/kunit/parameters/filter_glob)"
            return 0 ;;
    esac
    return 1
}
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

pass() {
    echo "PASS $1" >> "$RESULTS/status"
    say "PASS $1"
}

# fail NAME REASON...
fail() {
    _n=$1; shift
    _r=$(echo "${*:-failed}" | tr '\n' ' ' | cut -c1-200)
    echo "FAIL $_n $_r" >> "$RESULTS/status"
    say "FAIL $_n $_r"
    return 1
}

# check NAME cmd...: PASS if cmd succeeds, else FAIL with its last output line.
check() {
    _n=$1; shift
    _out=$("$@" 2>&1); _rc=$?
    [ -n "$_out" ] && printf '%s\n' "$_out" | sed "s/^/vm:   [$_n] /"
    if [ $_rc -eq 0 ]; then pass "$_n"; else fail "$_n" "exit $_rc: $(printf '%s\n' "$_out" | tail -n 1)"; return 1; fi
}

# info KEY VALUE...: free-form measurements, collected by scripts/vm.
info() { echo "$*" >> "$RESULTS/info"; say "INFO $*"; }

# wait_for TIMEOUT_S cmd...: poll cmd every second until it succeeds.
wait_for() {
    _t=$1; shift
    _end=$(( $(date +%s) + _t ))
    while ! "$@" >/dev/null 2>&1; do
        [ "$(date +%s)" -ge $_end ] && return 1
        sleep 1
    done
    return 0
}

# export_dir OPTIONS DIR: exportfs DIR to every client, trying three times.
# Right after nfsd starts, exportfs's check of a path (an export to its
# "-test-client-" domain) has failed once with "does not support NFS export"
# for a tmpfs, which does; that is not what any scenario tests, so retry.
export_dir() {
    for _try in 1 2 3; do
        exportfs -i -o "$1" "*:$2" && return 0
        say "exportfs $2 failed (try $_try of 3)"
        sleep 1
    done
    return 1
}

# tcp_probe HOST PORT: can we open a TCP connection (IPv4 or IPv6)?
# (there is no ping on the host image; bash's /dev/tcp does the job)
tcp_probe() { timeout 5 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$1" "$2" 2>/dev/null; }

# ---- trace events ------------------------------------------------------------
TRACEFS=/sys/kernel/tracing
# rpcrdma_events: tracefs mounted, and the rpcrdma trace system present
# (a kernel with CONFIG_TRACEPOINTS and a transport module loaded).
rpcrdma_events() {
    [ -d $TRACEFS/events ] || mount -t tracefs tracefs $TRACEFS 2>/dev/null
    [ -d $TRACEFS/events/rpcrdma ]
}

# ---- transport modules -----------------------------------------------------
mod_loaded() { [ -d "/sys/module/$1" ] && grep -q "^$1 " /proc/modules; }

C_RPCRDMA_KO=${C_RPCRDMA_KO:-$KBUILD/net/sunrpc/xprtrdma/rpcrdma.ko}
RUST_RPCRDMA_KO=${RUST_RPCRDMA_KO:-$REPO_ROOT/rpcrdma_rs.ko}

# Both modules register transport ident 256 / netid "rdma": one at a time.
load_c_rpcrdma() {
    if mod_loaded rpcrdma_rs; then rmmod rpcrdma_rs || { say "cannot unload rpcrdma_rs"; return 1; }; fi
    mod_loaded rpcrdma && return 0
    [ -f "$C_RPCRDMA_KO" ] || { say "missing $C_RPCRDMA_KO"; return 1; }
    insmod "$C_RPCRDMA_KO"
}

unload_c_rpcrdma() { ! mod_loaded rpcrdma || rmmod rpcrdma; }

# load_rust_rpcrdma [param=value...]
load_rust_rpcrdma() {
    if mod_loaded rpcrdma; then rmmod rpcrdma || { say "cannot unload the C rpcrdma"; return 1; }; fi
    if mod_loaded rpcrdma_rs; then rmmod rpcrdma_rs || return 1; fi
    [ -f "$RUST_RPCRDMA_KO" ] || { say "missing $RUST_RPCRDMA_KO (module not built?)"; return 1; }
    insmod "$RUST_RPCRDMA_KO" "$@"
}

unload_rust_rpcrdma() { ! mod_loaded rpcrdma_rs || rmmod rpcrdma_rs; }

# ---- NFS server --------------------------------------------------------------
# rpcbind: Debian's runs as user _rpc with its state in /run/rpcbind (tmpfs
# here); it must be reachable (rpcinfo) or NFSv3/mountd registration fails.
start_rpcbind() {
    getent passwd _rpc >/dev/null || say "warning: user _rpc missing (rpcbind may not drop privileges)"
    if ! pidof rpcbind >/dev/null; then
        mkdir -p /run/rpcbind
        chown _rpc /run/rpcbind 2>/dev/null
        rm -f /run/rpcbind.sock /run/rpcbind.lock
        rpcbind -w || return 1
    fi
    wait_for 15 rpcinfo -p 127.0.0.1 || { say "rpcbind not reachable"; rpcinfo -p 127.0.0.1 2>&1 | sed 's/^/vm:   /'; return 1; }
}

start_statd() {
    pidof rpc.statd >/dev/null && return 0
    rpc.statd --no-notify 2>&1 | sed 's/^/vm:   statd: /'
    wait_for 10 pidof rpc.statd
}

# start_nfs_server: NFSv3 + NFSv4.x with an RDMA listener on $NFS_RDMA_PORT,
# exporting $EXPORT. Returns non-zero (with a reason in NFS_ERR) on failure.
start_nfs_server() {
    NFS_ERR=
    mkdir -p "$EXPORT"
    chmod 1777 "$EXPORT"
    mountpoint -q /proc/fs/nfsd || mount -t nfsd nfsd /proc/fs/nfsd || { NFS_ERR="mount nfsd fs"; return 1; }
    # rpc_pipefs where nfs.conf's pipefs-directory says (Debian: /run/rpc_pipefs)
    _pipefs=$(nfsconf --get general pipefs-directory 2>/dev/null || echo /var/lib/nfs/rpc_pipefs)
    mkdir -p "$_pipefs"
    mountpoint -q "$_pipefs" || mount -t rpc_pipefs sunrpc "$_pipefs" || say "warning: cannot mount rpc_pipefs on $_pipefs"
    start_rpcbind || { NFS_ERR="rpcbind not reachable"; return 1; }
    # nfsdcld: without it nfsd has no client tracking ("Is nfsdcld running?"),
    # its upcall times out and v4_end_grace refuses to end the grace period.
    if ! pidof nfsdcld >/dev/null; then
        mkdir -p /var/lib/nfs/nfsdcld
        # (it waits for $_pipefs/nfsd/cld, which nfsd creates when it starts)
        nfsdcld 2>&1 | sed 's/^/vm:   nfsdcld: /'
        wait_for 5 pidof nfsdcld || say "warning: nfsdcld did not start"
    fi
    start_statd || say "warning: rpc.statd did not start (NFSv3 mounts use nolock)"
    # NFSv4 grace period: the kernel's minimum is 10 s for both; set before nfsd starts.
    echo "${NFSD_GRACE:-10}" > /proc/fs/nfsd/nfsv4gracetime 2>/dev/null || say "cannot set nfsv4gracetime"
    echo "${NFSD_LEASE:-15}" > /proc/fs/nfsd/nfsv4leasetime 2>/dev/null || say "cannot set nfsv4leasetime"
    # lockd's grace period (NFSv3 locks) also keeps nfsd from handing out
    # delegations (locks_in_grace); by default it lasts 50 s.
    echo "${NFSD_GRACE:-10}" > /proc/sys/fs/nfs/nlm_grace_period 2>/dev/null || say "cannot set nlm_grace_period"
    # crossmnt: file systems mounted below (parity.sh's ext4 disk) are
    # reached through this export too. EXPORT_SEC adds flavors (krb5).
    export_dir "rw,no_root_squash,insecure,no_subtree_check,crossmnt,fsid=0${EXPORT_SEC:+,sec=$EXPORT_SEC}" "$EXPORT" ||
        { NFS_ERR="exportfs"; return 1; }
    pidof rpc.mountd >/dev/null || rpc.mountd || { NFS_ERR="rpc.mountd"; return 1; }
    rpc.nfsd -V 3 -V 4 -V 4.1 -V 4.2 "${NFSD_THREADS:-8}" 2>&1 | sed 's/^/vm:   nfsd: /'
    [ "$(cat /proc/fs/nfsd/threads 2>/dev/null)" -gt 0 ] 2>/dev/null || { NFS_ERR="rpc.nfsd did not start threads"; return 1; }
    # No client has state to reclaim: end the grace period now. Done before
    # the RDMA listener exists, so RDMA clients never see the grace period.
    # The write only schedules the laundromat: wait until it reads back Y.
    # (With nfsdcld and no clients to reclaim nfsd may have ended it already:
    # then the write is refused with EBUSY.)
    echo Y > /proc/fs/nfsd/v4_end_grace 2>/dev/null || grep -q Y /proc/fs/nfsd/v4_end_grace ||
        say "v4_end_grace write refused; waiting for the grace period to run out"
    wait_for $(( ${NFSD_GRACE:-10} + 20 )) grep -q Y /proc/fs/nfsd/v4_end_grace ||
        say "warning: NFSv4 grace period still on"
    # (rpc.nfsd opened it already when nfs.conf says rdma=y: drop-in.sh)
    grep -q "^rdma $NFS_RDMA_PORT" /proc/fs/nfsd/portlist ||
        echo "rdma $NFS_RDMA_PORT" > /proc/fs/nfsd/portlist || { NFS_ERR="portlist: rdma listener refused"; return 1; }
    grep -q "^rdma $NFS_RDMA_PORT" /proc/fs/nfsd/portlist || { NFS_ERR="portlist lacks rdma $NFS_RDMA_PORT"; return 1; }
    say "nfsd: versions $(cat /proc/fs/nfsd/versions) ports: $(tr '\n' ' ' < /proc/fs/nfsd/portlist)"
    # one rpcinfo (each exec costs about two seconds under TCG with KASAN)
    _rpcinfo=$(rpcinfo -p 127.0.0.1 2>&1)
    echo "$_rpcinfo" | sed 's/^/vm:   rpcinfo: /'
    echo "$_rpcinfo" | grep -q ' 3 .*nfs$' || { NFS_ERR="nfs v3 not registered with rpcbind"; return 1; }
    echo "$_rpcinfo" | grep -q 'mountd$' || { NFS_ERR="mountd not registered with rpcbind"; return 1; }
    return 0
}

stop_nfs_server() {
    echo "-rdma $NFS_RDMA_PORT" > /proc/fs/nfsd/portlist 2>/dev/null
    rpc.nfsd 0 2>/dev/null
    exportfs -ua 2>/dev/null
    for d in rpc.mountd rpc.statd nfsdcld rpcbind; do
        p=$(pidof $d) && kill $p
    done
    wait_for 10 sh -c '! pidof rpc.mountd rpc.statd rpcbind'
    [ "$(cat /proc/fs/nfsd/threads 2>/dev/null || echo 0)" = 0 ]
}

# ---- NFS client -----------------------------------------------------------------
_mntkey() { echo "/tmp/.nfsmnt$(echo "$1" | tr '/' '_')"; }

# nfs_mount VERS SERVER MNT [extra,opts]: mount over RDMA (proto=rdma,port=20049),
# retrying for up to NFS_MOUNT_WAIT seconds, then verify /proc/mounts really
# says proto=rdma. NFSv3 mounts use nolock unless NFS_V3_LOCK=1.
nfs_mount() {
    _v=$1 _srv=$2 _mnt=$3 _extra=${4:-}
    NFS_ERR=
    case $_v in
        3) _path=$EXPORT; _o="vers=3,proto=rdma,port=$NFS_RDMA_PORT"
           [ "${NFS_V3_LOCK:-0}" = 1 ] || _o="$_o,nolock" ;;
        4*) _path=/; _o="vers=$_v,proto=rdma,port=$NFS_RDMA_PORT" ;;
        *) NFS_ERR="bad version $_v"; return 1 ;;
    esac
    case $_srv in *:*) _srvspec="[$_srv]";; *) _srvspec=$_srv;; esac
    [ -n "$_extra" ] && _o="$_o,$_extra"
    mkdir -p "$_mnt"
    _end=$(( $(date +%s) + NFS_MOUNT_WAIT ))
    _try=0
    while :; do
        _try=$((_try + 1))
        _out=$(timeout 90 mount -t nfs -o "$_o,retry=0" "$_srvspec:$_path" "$_mnt" 2>&1) && break
        if [ "$(date +%s)" -ge $_end ]; then
            NFS_ERR="mount failed after $_try tries: $(echo "$_out" | tail -n 1)"
            say "$NFS_ERR"; return 1
        fi
        [ $((_try % 10)) = 1 ] && say "mount $_srvspec:$_path (vers=$_v) not yet: $(echo "$_out" | tail -n 1); retrying"
        sleep 3
    done
    _line=$(awk -v m="$_mnt" '$2 == m && $3 ~ /^nfs/' /proc/mounts | tail -n 1)
    say "mounted: $_line"
    case ",$(echo "$_line" | awk '{print $4}')," in
        *,proto=rdma,*) ;;
        *) NFS_ERR="not proto=rdma: $_line"; umount "$_mnt"; say "$NFS_ERR"; return 1 ;;
    esac
    case ",$(echo "$_line" | awk '{print $4}')," in
        *,vers=$_v,*) ;;
        *) NFS_ERR="wrong version (wanted $_v): $_line"; umount "$_mnt"; say "$NFS_ERR"; return 1 ;;
    esac
    echo "$_v $_srv $_extra" > "$(_mntkey "$_mnt")"
    return 0
}

nfs_umount() {
    # Submounts the client made where it crossed into another export
    # (crossmnt) go first.
    for _sub in $(awk -v m="$1/" 'index($2, m) == 1 { print $2 }' /proc/mounts | sort -r); do
        umount "$_sub" 2>/dev/null
    done
    umount "$1" || { sleep 2; umount "$1"; } || umount -l "$1"
    _rc=$?
    rm -f "$(_mntkey "$1")"
    return $_rc
}

# nfs_remount MNT: umount, drop all caches, mount again with the same options,
# so that the next read really goes over the wire.
nfs_remount() {
    _k=$(_mntkey "$1")
    [ -f "$_k" ] || { NFS_ERR="$1 not mounted by nfs_mount"; return 1; }
    read -r _rv _rs _rx < "$_k"
    nfs_umount "$1" || { NFS_ERR="umount $1 failed"; return 1; }
    sync; echo 3 > /proc/sys/vm/drop_caches
    nfs_mount "$_rv" "$_rs" "$1" "$_rx"
}

# mbps BYTES MS
mbps() { awk -v b="$1" -v ms="$2" 'BEGIN { if (ms < 1) ms = 1; printf "%.1f", b / 1048576 / (ms / 1000) }'; }

# data_check NAME MNT SIZE_MIB: write a random file, remount + drop caches,
# read it back over the wire, compare sha256. PASS/FAIL NAME; prints MB/s and
# appends "perf NAME write_MBps=X read_MBps=Y" to $RESULTS/info.
data_check() {
    _n=$1 _m=$2 _sz=$3
    _src=/tmp/.dc-src.$$ _rb=/tmp/.dc-rb.$$ _f=$_m/$_n.dat
    dd if=/dev/urandom of=$_src bs=1M count="$_sz" 2>/dev/null || { fail "$_n" "cannot create source data"; return 1; }
    _sum1=$(sha256sum < $_src | cut -d' ' -f1)
    _t0=$(now_ms)
    _out=$(dd if=$_src of="$_f" bs=1M conv=fsync 2>&1) || { rm -f $_src; fail "$_n" "write: $(echo "$_out" | tail -n 1)"; return 1; }
    _t1=$(now_ms)
    rm -f $_src
    nfs_remount "$_m" || { fail "$_n" "remount: $NFS_ERR"; return 1; }
    _t2=$(now_ms)
    _out=$(dd if="$_f" of=$_rb bs=1M 2>&1) || { rm -f $_rb; fail "$_n" "read: $(echo "$_out" | tail -n 1)"; return 1; }
    _t3=$(now_ms)
    _sum2=$(sha256sum < $_rb | cut -d' ' -f1)
    _bytes=$(stat -c %s $_rb)
    rm -f $_rb "$_f"
    _w=$(mbps $((_sz * 1048576)) $((_t1 - _t0)))
    _r=$(mbps "$_bytes" $((_t3 - _t2)))
    info "perf $_n size_MiB=$_sz write_MBps=$_w read_MBps=$_r write_ms=$((_t1 - _t0)) read_ms=$((_t3 - _t2))"
    if [ "$_sum1" = "$_sum2" ] && [ "$_bytes" = $((_sz * 1048576)) ]; then
        pass "$_n"
    else
        fail "$_n" "sha256 mismatch or short read ($_bytes bytes): $_sum1 != $_sum2"
    fi
}

# ---- two-VM synchronization (through files in the export) -------------------------
# marker PATH [TEXT]: makes PATH, a file the peer acts on (and may remove at
# once) or reads, in one step: a file made beside it under another name (with
# the line TEXT, if given), then renamed into place, so the peer never sees
# it half made. touch is two RPCs, a create and a SETATTR of the times, and
# a file the peer removed in between fails the second (NFSv3: "Stale file
# handle").
marker() {
    _mk_tmp="$(dirname "$1")/.tmp-marker-$(basename "$1")"
    if [ $# -ge 2 ]; then echo "$2" > "$_mk_tmp"; else : > "$_mk_tmp"; fi &&
        mv -f "$_mk_tmp" "$1"
}

# Server: wait until the client created $EXPORT/.client-done (or .client-failed).
server_wait_client_done() {
    _t=${1:-900}
    say "waiting up to ${_t}s for the client"
    if wait_for "$_t" sh -c "[ -e '$EXPORT/.client-done' ]"; then
        pass server-client-finished
        # The client still unmounts after signalling: stopping nfsd under
        # it would leave its umount hanging. Wait (bounded) until no NFSv4
        # client state is left.
        wait_for 30 sh -c "[ -z \"\$(ls /proc/fs/nfsd/clients 2>/dev/null)\" ]" ||
            say "client state still present after 30s; stopping anyway"
    else
        fail server-client-finished "no .client-done marker after ${_t}s"
    fi
}

# Client: leave the done marker in the export (mounts NFSv4.2 if needed).
client_signal_done() {
    _m=${1:-/tmp/mnt-signal}
    if ! awk -v m="$_m" '$2 == m' /proc/mounts | grep -q nfs; then
        _save=$NFS_MOUNT_WAIT; NFS_MOUNT_WAIT=${SIGNAL_MOUNT_WAIT:-60}
        nfs_mount 4.2 "$SERVER_IP" "$_m"; _rc=$?; NFS_MOUNT_WAIT=$_save
        [ $_rc = 0 ] || { say "cannot signal the server: $NFS_ERR"; return 1; }
        marker "$_m/.client-done"; sync
        nfs_umount "$_m"
    else
        marker "$_m/.client-done"; sync
    fi
}

# xprt_fields MNT N...: fields N... of the "xprt: rdma" line of the NFS
# mount on MNT, counted after "rdma" (1 source port, 3 connect_count,
# 6 sends, 7 receives, 11 Read chunks, 12 Write chunks), space-separated.
# xprt_fields_all: the same for every transport of the mount (nconnect),
# one line each.
xprt_fields() { _xf_all=0 _xf_m=$1; shift; _xprt_fields "$@"; }
xprt_fields_all() { _xf_all=1 _xf_m=$1; shift; _xprt_fields "$@"; }
_xprt_fields() {
    awk -v m="$_xf_m" -v f="$*" -v all=$_xf_all '$1 == "device" { on = ($5 == m) }
        on && $1 == "xprt:" { n = split(f, a, " "); s = ""
            for (i = 1; i <= n; i++) s = s (i > 1 ? " " : "") $(a[i] + 2)
            print s; if (!all) exit }' /proc/self/mountstats
}

# mount_xprt_info: sunrpc's sysfs xprt_info of the mount's transport, on one
# line: a connected rdma transport to the server's port. sunrpc names them
# xprt-ID-PROTO (the TCP ones of lockd or rpcbind are not it); nfsd's NFSv4.1
# callback client has an rdma transport too, on the backchannel, whose
# dst_port is not the server's (0: nfsd keeps the client's address without
# its port). Assumes one rdma mount of the server.
mount_xprt_info() {
    for _mx in /sys/kernel/sunrpc/xprt-switches/switch-*/xprt-*-rdma; do
        _mxi=$(cat "$_mx/xprt_info" 2>/dev/null | tr '\n' ' ')
        case " $_mxi" in *" dst_port=$NFS_RDMA_PORT "*) echo "${_mx##*/} $_mxi"; return 0 ;; esac
    done
    return 1
}

# Show where the transport statistics say the traffic went.
show_xprt() {
    awk '/^device / { nfs = ($0 ~ /fstype nfs4? /); if (nfs) print } nfs && /xprt:/' /proc/self/mountstats 2>/dev/null |
        sed 's/^/vm:   /'
}
