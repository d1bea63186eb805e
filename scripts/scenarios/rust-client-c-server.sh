# shellcheck shell=sh
# rust-client-c-server: the project's client (rpcrdma_rs.ko) against the
# in-tree C server, across two VMs (scripts/vm --two-vm rust-client-c-server).
# Per NFS version: SIZE_MIB written and read back with a checksum (buffered
# and O_DIRECT), a directory of DIR_ENTRIES (5000) entries listed (Reply
# chunks; the server creates them locally, since 5000 creates over two TCG
# VMs take minutes with either client), a 4000-byte symlink target read
# back, CHURN (200) small files created, read and removed, a 3000-byte
# file whose inline WRITE sends its page mapped (mapped_send_check).
# NFSv4.1+: a delegation the server recalls (CB_RECALL over the RDMA
# backchannel, answered by our client). Then, once: a mount over IPv6
# (proto=rdma6), a server restart under a mounted client (the transport
# reconnects and the data is still there), and the client's RDMA device
# removed and added back under a mounted client.
# With memreg=cache in the client's parameters, after the data phases of
# the first version: an O_DIRECT file written and read back twice through
# the registration cache and a shrinker run (cache_check), and at the end,
# once every mount
# is gone, the cache's entries must have been dropped (cache_released).
# Arguments: [SIZE_MIB] [VERSIONS, e.g. 4.2+4.1+4.0+3] [rpcrdma_rs params, ':'-separated, - for none,
#            c-client to run the in-tree C client instead, for comparison]
#            [DIR_ENTRIES] [CHURN] [EXTRAS: ipv6+restart+devremove (default), - for none;
#            also the parity phases of scripts/guest/parity.sh: acl, nconnect, limits, krb5]
SIZE=${1:-256}
ENTRIES=${4:-5000}
CHURN=${5:-200}
EXTRAS=$(echo "${6:-ipv6+restart+devremove}" | tr '+' ' ')
VERSIONS=$(echo "${2:-4.2+3}" | tr '+' ' ')
PARAMS=$(echo "${3:--}" | tr ':' ' ')
[ "$PARAMS" = - ] && PARAMS=
MNT=/tmp/mnt
PARITY=$EXTRAS
KRB5_SERVER=c
. "$REPO_ROOT/scripts/guest/parity.sh"

# Server side of the client's requests, through files in the export:
# .deleg-ready: the client holds deleg.dat open; note whether nfsd granted
#   a delegation, append to the file locally (nfsd must recall the
#   delegation first) and report "granted seconds" in .deleg-done.
# .restart-request: restart nfsd (every transport closes), then listen again.
server_helper() {
    while [ ! -e "$EXPORT/.client-done" ]; do
        if [ -e "$EXPORT/.deleg-ready" ]; then
            rm -f "$EXPORT/.deleg-ready"
            sleep 1
            _g=0
            cat /proc/fs/nfsd/clients/*/states 2>/dev/null | grep -q 'type: deleg' && _g=1
            _t0=$(date +%s)
            timeout 100 sh -c "echo recalled >> '$EXPORT/deleg.dat'"
            marker "$EXPORT/.deleg-done" "$_g $(( $(date +%s) - _t0 ))"
        fi
        if [ -e "$EXPORT/.restart-request" ]; then
            rm -f "$EXPORT/.restart-request"
            say "restarting nfsd"
            echo "-rdma $NFS_RDMA_PORT" > /proc/fs/nfsd/portlist 2>/dev/null
            rpc.nfsd 0
            sleep 3
            rpc.nfsd -V 3 -V 4 -V 4.1 -V 4.2 "${NFSD_THREADS:-8}"
            echo "rdma $NFS_RDMA_PORT" > /proc/fs/nfsd/portlist || say "restart: rdma listener refused"
            say "nfsd restarted: $(tr '\n' ' ' < /proc/fs/nfsd/portlist)"
        fi
        sleep 1
    done
}

# An inline WRITE with 1 KiB or more of page data goes out with its pages
# mapped as Send SGEs (debugfs client_registration's mapped_sends), not
# pulled up; the data must read back from the server intact. memreg=fmr
# only: the other strategies leave no room for such a WRITE inline.
# reg_col NAME: column NAME of debugfs client_registration, summed over
# the strategies.
reg_col() {
    awk -v name="$1" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == name) c = i; next }
        c { n += $c } END { print n + 0 }' /sys/kernel/debug/rpcrdma_rs/client_registration
}
mapped_sends() { reg_col mapped_sends; }
mapped_send_check() {  # mapped_send_check VERSION
    _m0=$(mapped_sends)
    head -c 3000 /dev/urandom > /tmp/mapped.src
    cp /tmp/mapped.src $MNT/mapped.$$ && sync
    _m1=$(mapped_sends)
    # Read back past the page cache (O_DIRECT), from the server.
    if dd if=$MNT/mapped.$$ iflag=direct bs=4096 2>/dev/null | cmp -s - /tmp/mapped.src &&
        [ "$_m1" -gt "$_m0" ]; then
        pass "nfs$1-inline-write-pages-mapped"
    else
        fail "nfs$1-inline-write-pages-mapped" "mapped_sends $_m0 -> $_m1 or data differs"
    fi
    rm -f $MNT/mapped.$$ /tmp/mapped.src
}

# reg_grew NAME CHECK VERSION BEFORE: passes nfsVERSION-CHECK if column
# NAME of debugfs client_registration grew from BEFORE.
reg_grew() {
    _n=$(reg_col "$1")
    if [ "$_n" -gt "$4" ]; then
        pass "nfs$3-$2"
    else
        fail "nfs$3-$2" "$1 $4 -> $_n"
    fi
}

# Calls' Sends go out unsignaled but for every Nth (C re_send_batch):
# after the data checks some must have (debugfs unsignaled_sends), while
# every byte read back intact.
sends_batched_check() {  # sends_batched_check VERSION BEFORE
    reg_grew unsignaled_sends sends-unsignaled-batched "$1" "$2"
}

# A request keeps the MR its reply's server invalidated for its next call
# (Send With Invalidate, which C's server uses when a call's chunks share
# one key): with memreg=fmr and its default pool the data checks' READs and
# WRITEs register such kept MRs (debugfs kept_mr_reuses), and every byte
# reads back intact.
kept_mr_check() {  # kept_mr_check VERSION BEFORE
    reg_grew kept_mr_reuses kept-mr-reused "$1" "$2"
}

# With fmr_dirty_watermark, MRs of completed RPCs stay registered until a
# batch invalidates them; on an idle mount the batch must still run within
# about a second (a delayed work), not wait for the watermark.
dirty_check() {  # dirty_check VERSION
    sleep 3
    _f=/sys/kernel/debug/rpcrdma_rs/client_registration
    sed 's/^/vm:   /' $_f
    _d=$(awk '$1 == "fmr" { print $9 }' $_f)
    if [ "$_d" = 0 ]; then
        pass "nfs$1-dirty-mrs-flushed-when-idle"
    else
        fail "nfs$1-dirty-mrs-flushed-when-idle" "${_d:-?} MRs still dirty 3 s after the I/O ($_f)"
    fi
}

# ---- memreg=cache ---------------------------------------------------------
CACHE_F=/sys/kernel/debug/rpcrdma_rs/client_cache

# cache_fields FIELD...: the values of client_cache's columns FIELD...
# (header names), space-separated; "?" for a column the file lacks.
cache_fields() {
    awk -v f="$*" 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i }
        NR == 2 { n = split(f, a, " "); s = ""
            for (i = 1; i <= n; i++) s = s (i > 1 ? " " : "") (a[i] in col ? $col[a[i]] : "?")
            print s }' $CACHE_F 2>/dev/null
}

# cache_info LABEL: client_cache's line into the log and the results' info,
# as "column=value" pairs.
cache_info() {
    sed 's/^/vm:   /' $CACHE_F
    info "client-cache $1 $(awk 'NR == 1 { for (i = 1; i <= NF; i++) h[i] = $i }
        NR == 2 { for (i = 1; i <= NF; i++) printf "%s%s=%s", (i > 1 ? " " : ""), h[i], $i }' $CACHE_F)"
}

# The cache_max_mb the client was loaded with (the module's default: 64).
cache_max_mb() {
    for _p in $PARAMS; do
        case $_p in cache_max_mb=*) echo "${_p#cache_max_mb=}"; return ;; esac
    done
    echo 64
}

# all_numbers VALUE...: every VALUE is a decimal number (dash exits on
# arithmetic with anything else, e.g. "?" from cache_fields).
all_numbers() {
    for _x in "$@"; do
        case $_x in ''|*[!0-9]*) return 1 ;; esac
    done
}

# cache_check VERS: a 4 MiB file written with O_DIRECT and read back twice
# with O_DIRECT, 256 KiB a block (64 pages: one Write chunk). dd reuses one
# page-aligned buffer for every block, so after its first block the
# buffer's pieces should hit the cache. Checks the data (a stale or misplaced cached registration
# would show as a mismatch), then the counters: hits during the phase,
# registrations made, no cached entry lost to Send With Invalidate (the
# connection does not offer it), at most cache_max_mb pinned per transport
# and, when the data phases' file (SIZE MiB, written and read through the
# page cache) is at least twice cache_max_mb, evictions and at least one
# invalidation batch. Last, memory pressure (drop_caches 2 runs every
# shrinker): the cache's shrinker must evict entries.
cache_check() {
    _cv=nfs$1 _src=/tmp/.cache-src _cf=$MNT/cache.dat
    [ -r $CACHE_F ] || { fail "$_cv-cache-debugfs" "no $CACHE_F"; return 1; }
    dd if=/dev/urandom of=$_src bs=1M count=4 2>/dev/null
    _s0=$(sha256sum < $_src | cut -d' ' -f1)
    read -r _h0 _m0 <<EOF
$(cache_fields hits misses)
EOF
    all_numbers "$_h0" "$_m0" || { fail "$_cv-cache-debugfs" "no hits and misses columns in $CACHE_F"; return 1; }
    _s1=x _s2=y
    if dd if=$_src of=$_cf bs=256k oflag=direct 2>/dev/null; then
        _s1=$(dd if=$_cf bs=256k iflag=direct 2>/dev/null | sha256sum | cut -d' ' -f1)
        _s2=$(dd if=$_cf bs=256k iflag=direct 2>/dev/null | sha256sum | cut -d' ' -f1)
    fi
    rm -f $_src $_cf
    if [ "$_s1" = "$_s0" ] && [ "$_s2" = "$_s0" ]; then
        pass "$_cv-cache-direct-reread"
    else
        fail "$_cv-cache-direct-reread" "sha256 of the source $_s0, first read $_s1, second read $_s2"
    fi
    cache_info "$_cv"
    read -r _tr _pb _h1 _m1 _rg _iv _ib _ev _ri <<EOF
$(cache_fields transports pinned_bytes hits misses registrations invalidations invalidation_batches evictions remote_invalidations)
EOF
    _mb=$(cache_max_mb)
    all_numbers "$_tr" "$_pb" "$_h1" "$_m1" "$_rg" "$_iv" "$_ib" "$_ev" "$_ri" "$_mb" ||
        { fail "$_cv-cache-debugfs" "$CACHE_F lacks a column, or cache_max_mb=$_mb"; return 1; }
    info "client-cache $_cv phase: hits=$((_h1 - _h0)) misses=$((_m1 - _m0))"
    if [ $((_h1 - _h0)) -gt 0 ]; then
        pass "$_cv-cache-hits"
    else
        fail "$_cv-cache-hits" "no hit while rereading with one buffer (hits $_h0 -> $_h1, misses $_m0 -> $_m1)"
    fi
    if [ "$_rg" -gt 0 ]; then
        pass "$_cv-cache-registrations"
    else
        fail "$_cv-cache-registrations" "registrations=$_rg"
    fi
    if [ "$_ri" = 0 ]; then
        pass "$_cv-cache-no-remote-invalidation"
    else
        fail "$_cv-cache-no-remote-invalidation" "remote_invalidations=$_ri (the server invalidated cached rkeys)"
    fi
    if [ "$_tr" -ge 1 ] && [ "$_pb" -le $((_tr * _mb * 1048576)) ]; then
        pass "$_cv-cache-within-cache_max_mb"
    else
        fail "$_cv-cache-within-cache_max_mb" "pinned_bytes=$_pb over $_tr transports x $_mb MiB"
    fi
    if [ "$SIZE" -ge $((2 * _mb)) ]; then
        if [ "$_ev" -gt 0 ] && [ "$_ib" -gt 0 ]; then
            pass "$_cv-cache-evictions-batched"
        else
            fail "$_cv-cache-evictions-batched" "$SIZE MiB moved through a $_mb MiB cache: evictions=$_ev invalidation_batches=$_ib invalidations=$_iv"
        fi
    fi
    # Memory pressure: drop_caches mode 2 runs every shrinker, and the
    # cache's must let entries go (the mount is idle and holds some).
    read -r _en0 _se0 <<EOF
$(cache_fields entries shrinker_evictions)
EOF
    echo 2 > /proc/sys/vm/drop_caches
    sleep 1
    read -r _en1 _se1 <<EOF
$(cache_fields entries shrinker_evictions)
EOF
    if all_numbers "$_en0" "$_se0" "$_en1" "$_se1" && [ "$_en0" -gt 0 ] &&
        [ "$_se1" -gt "$_se0" ] && [ "$_en1" -lt "$_en0" ]; then
        pass "$_cv-cache-shrinker"
    else
        fail "$_cv-cache-shrinker" "entries $_en0 -> $_en1, shrinker_evictions $_se0 -> $_se1 after drop_caches 2"
    fi
}

# cache_released: no transport uses the cache and it holds nothing.
cache_released() { [ "$(cache_fields transports entries pinned_bytes)" = "0 0 0" ]; }

run_server() {
    check load-c-rpcrdma load_c_rpcrdma || return 1
    echo "delegate me" > "$EXPORT/deleg.dat" 2>/dev/null || { mkdir -p "$EXPORT" && echo "delegate me" > "$EXPORT/deleg.dat"; }
    server_helper &
    mkdir -p "$EXPORT/dir$ENTRIES"
    (cd "$EXPORT/dir$ENTRIES" && i=0 && while [ $i -lt "$ENTRIES" ]; do
        : > entry-with-a-longish-name-$i; i=$((i + 1)); done)
    parity_server_prepare
    if start_nfs_server; then pass nfs-server-start; else fail nfs-server-start "$NFS_ERR"; return 1; fi
    parity_server_export
}

direct_check() {  # O_DIRECT write and read back of SIZE MiB
    _n=$1 _f=$MNT/direct.dat _src=/tmp/.direct-src
    dd if=/dev/urandom of=$_src bs=1M count="$SIZE" 2>/dev/null
    _s1=$(sha256sum < $_src | cut -d' ' -f1)
    _t0=$(now_ms)
    dd if=$_src of=$_f bs=1M oflag=direct 2>/dev/null || { fail "$_n" "O_DIRECT write failed"; rm -f $_src; return 1; }
    _t1=$(now_ms)
    _s2=$(dd if=$_f bs=1M iflag=direct 2>/dev/null | sha256sum | cut -d' ' -f1)
    _t2=$(now_ms)
    rm -f $_src $_f
    info "perf $_n size_MiB=$SIZE write_MBps=$(mbps $((SIZE * 1048576)) $((_t1 - _t0))) read_MBps=$(mbps $((SIZE * 1048576)) $((_t2 - _t1)))"
    [ "$_s1" = "$_s2" ] && pass "$_n" || fail "$_n" "sha256 mismatch $_s1 != $_s2"
}

tree_checks() {  # Reply chunks (READDIR, READLINK) and small-file churn
    _v=$1 _d=$MNT/dir$ENTRIES
    _t0=$(now_ms)
    _n=$(ls -f $_d | grep -c '^entry-')
    info "perf nfs$_v-readdir-$ENTRIES ms=$(( $(now_ms) - _t0 ))"
    [ "$_n" = "$ENTRIES" ] && pass "nfs$_v-readdir-$ENTRIES" || fail "nfs$_v-readdir-$ENTRIES" "listed $_n entries"
    _t=$(head -c 4000 /dev/zero | tr '\0' 'x')
    ln -s "$_t" $MNT/longlink
    nfs_remount $MNT || { fail "nfs$_v-readlink-4000" "remount: $NFS_ERR"; return 1; }
    [ "$(readlink $MNT/longlink)" = "$_t" ] && pass "nfs$_v-readlink-4000" || fail "nfs$_v-readlink-4000" "target differs"
    rm -f $MNT/longlink
    mkdir -p $MNT/churn
    _t0=$(now_ms)
    i=0; while [ $i -lt $CHURN ]; do echo "small file $i" > $MNT/churn/f$i; i=$((i + 1)); done
    _ok=1
    i=0; while [ $i -lt $CHURN ]; do [ "$(cat $MNT/churn/f$i)" = "small file $i" ] || _ok=0; rm -f $MNT/churn/f$i; i=$((i + 1)); done
    rmdir $MNT/churn || _ok=0
    info "perf nfs$_v-churn-$CHURN ms=$(( $(now_ms) - _t0 ))"
    [ $_ok = 1 ] && pass "nfs$_v-small-file-churn-$CHURN" || fail "nfs$_v-small-file-churn-$CHURN" "content or removal failed"
}

bc_counter() {  # bc_counter FIELD: from our client's debugfs (0 for the C client)
    awk -v f="$1" 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i } NR == 2 { print $col[f] + 0 }' \
        /sys/kernel/debug/rpcrdma_rs/client_backchannel 2>/dev/null || echo 0
}

# deleg_recall VERS: hold deleg.dat open for reading (a read delegation)
# while the server appends to it locally; the server recalls the
# delegation with CB_RECALL, our client answers and returns it.
deleg_recall() {
    _n="nfs$1-deleg-recall" _c0=$(bc_counter calls) _r0=$(bc_counter replies)
    # nfsd grants no delegation during a grace period (its own or lockd's):
    # try again a few times.
    for _try in 1 2 3 4 5 6; do
        rm -f $MNT/.deleg-done
        exec 3< $MNT/deleg.dat || { fail "$_n" "open"; return 1; }
        cat <&3 >/dev/null
        marker $MNT/.deleg-ready
        if ! wait_for 120 sh -c "ls -a $MNT | grep -q '^.deleg-done$'"; then
            exec 3<&-
            fail "$_n" "the server's write did not complete"; return 1
        fi
        exec 3<&-
        read -r _g _w < $MNT/.deleg-done
        [ "$_g" = 1 ] && break
        say "no delegation granted (try $_try); retrying in 10s"
        sleep 10
    done
    _c=$(( $(bc_counter calls) - _c0 )) _r=$(( $(bc_counter replies) - _r0 ))
    info "backchannel nfs$1: delegation granted=$_g, server write waited ${_w}s, $_c callback calls, $_r replies"
    if [ "$_g" != 1 ]; then
        fail "$_n" "the server granted no delegation (callback path down?)"
    elif [ "$PARAMS" = c-client ]; then
        [ "$_w" -lt 30 ] && pass "$_n" || fail "$_n" "write waited ${_w}s"
    elif [ "$_c" -ge 1 ] && [ "$_r" -ge 1 ] && [ "$_w" -lt 30 ]; then
        pass "$_n"
    else
        fail "$_n" "write waited ${_w}s, $_c calls, $_r replies"
    fi
}

# reconnect_check NAME WHAT DISRUPT SIZE: under a mounted NFSv4.2 client,
# write SIZE bytes, run DISRUPT (a function that fails the check itself
# and returns non-zero if it cannot do its part), then read the file back
# through a new connection and write another one; mountstats must count a
# reconnect.
reconnect_check() {
    _n=$1 _what=$2 _disrupt=$3 _size=$4
    nfs_mount 4.2 "$SERVER_IP" $MNT || { fail $_n "mount: $NFS_ERR"; return 1; }
    head -c "$_size" /dev/urandom > /tmp/.rc-src
    if cp /tmp/.rc-src $MNT/rc.dat && sync; then
        _cc0=$(xprt_fields $MNT 3)
        if $_disrupt; then
            echo 3 > /proc/sys/vm/drop_caches
            _ok=1
            timeout 300 cmp -s /tmp/.rc-src $MNT/rc.dat || _ok=0
            { echo after > $MNT/rc-after.txt && sync &&
                [ "$(cat $MNT/rc-after.txt 2>/dev/null)" = after ]; } || _ok=0
            _cc1=$(xprt_fields $MNT 3)
            info "$_what: connect_count $_cc0 -> $_cc1"
            if [ $_ok = 0 ]; then
                fail $_n "I/O after the $_what failed (data read back or a new write)"
            elif [ "${_cc1:-0}" -le "${_cc0:-0}" ]; then
                fail $_n "no reconnect counted (connect_count $_cc0 -> $_cc1)"
            else
                pass $_n
            fi
        fi
    else
        fail $_n "write before the $_what"
    fi
    rm -f /tmp/.rc-src $MNT/rc.dat $MNT/rc-after.txt
    nfs_umount $MNT
}

# nfsd restarts under the mount (server_helper does it on request).
restart_server() {
    marker $MNT/.restart-request && sync
    sleep 12
}

# The client's RDMA device goes away (rdma link delete must not hang: the
# transport releases everything it holds on the device) and comes back.
remove_client_device() {
    _t0=$(now_ms)
    # The guest's device: rxe0, or siw0 on an iWARP-only guest.
    _dev=${RDMA_DEV:-rxe}
    if ! timeout 60 rdma link delete ${_dev}0; then
        fail $_n "rdma link delete ${_dev}0 failed or hung"; return 1
    fi
    info "device removal: rdma link delete took $(( $(now_ms) - _t0 )) ms"
    dmesg | grep -i 'device.*remov' | tail -n 3 | sed 's/^/vm:   dmesg: /'
    sleep 2
    rdma link add ${_dev}0 type $_dev netdev "$NETIF" || { fail $_n "rdma link add ${_dev}0"; return 1; }
}

ipv6_mount() {
    _n=nfs4.2-mount-rdma6
    [ -n "$SERVER_IP6" ] || { fail $_n "no IPv6 address"; return 1; }
    mkdir -p $MNT
    if timeout 90 mount -t nfs -o "vers=4.2,proto=rdma6,port=$NFS_RDMA_PORT,retry=0" "[$SERVER_IP6]:/" $MNT 2>&1; then
        _line=$(awk -v m="$MNT" '$2 == m && $3 ~ /^nfs/' /proc/mounts | tail -n 1)
        case $_line in
            *proto=rdma6*) ;;
            *) fail $_n "not proto=rdma6: $_line"; umount $MNT; return 1 ;;
        esac
        head -c 1048576 /dev/urandom > /tmp/.v6
        cp /tmp/.v6 $MNT/v6.dat && echo 3 > /proc/sys/vm/drop_caches
        if cmp -s /tmp/.v6 $MNT/v6.dat; then pass $_n; else fail $_n "data differs"; fi
        rm -f /tmp/.v6 $MNT/v6.dat
        nfs_umount $MNT || umount $MNT
    else
        fail $_n "mount [$SERVER_IP6]:/ failed"
    fi
}

run_client() {
    if [ "$PARAMS" = c-client ]; then
        # Reference run: the in-tree C client with the same workload.
        check load-c-rpcrdma-client load_c_rpcrdma || return 1
    else
        check rpcrdma_rs-load load_rust_rpcrdma $PARAMS || return 1
    fi
    _cache=0; case " $PARAMS " in *" memreg=cache "*) _cache=1 ;; esac
    if [ $_cache = 1 ]; then
        # The trust trade-off is logged at load.
        _w=$(dmesg | grep 'memreg=cache:' | tail -n 1)
        if [ -n "$_w" ]; then
            say "  dmesg: $_w"
            pass memreg-cache-load-warning
        else
            fail memreg-cache-load-warning "no 'memreg=cache:' warning in the kernel log"
        fi
    fi
    # xprt_register_transport() logs this for client transport classes.
    if [ "$PARAMS" = c-client ] || dmesg | grep -q 'RPC: Registered rdma transport module'; then
        pass rdma-transport-registered
    else
        fail rdma-transport-registered "rpcrdma_rs did not register the rdma client transport"; return 1
    fi
    for v in $VERSIONS; do
        if nfs_mount "$v" "$SERVER_IP" $MNT; then
            pass "nfs$v-mount-rdma"
            if [ "$PARAMS" != c-client ]; then
                # debugfs tells which strategy the transport uses.
                _s=fmr; case " $PARAMS " in *" memreg=physical "*) _s=physical ;; *" memreg=cache "*) _s=cache ;; esac
                _f=/sys/kernel/debug/rpcrdma_rs/client_registration
                sed 's/^/vm:   /' $_f
                if awk -v s=$_s '$1 == s && $2 >= 1 { ok = 1 } END { exit !ok }' $_f; then
                    pass "nfs$v-memreg-$_s-in-debugfs"
                else
                    fail "nfs$v-memreg-$_s-in-debugfs" "no $_s transport in $_f"
                fi
            fi
            case $v in 4.[12]) deleg_recall "$v" ;; esac
            _u0=0; [ "$PARAMS" != c-client ] && _u0=$(reg_col unsignaled_sends)
            _k0=0; [ "$PARAMS" != c-client ] && _k0=$(reg_col kept_mr_reuses)
            data_check "nfs$v-data-${SIZE}M" $MNT "$SIZE"
            case " $PARAMS " in *" fmr_dirty_watermark="[1-9]*) dirty_check "$v" ;; esac
            direct_check "nfs$v-direct-${SIZE}M"
            [ "$PARAMS" != c-client ] && sends_batched_check "$v" "$_u0"
            case " $PARAMS " in
                " c-client "|*" memreg="*|*" fmr_pool_size="*|*" fmr_pages_per_mr="*) ;;
                *) kept_mr_check "$v" "$_k0" ;;
            esac
            [ $_cache = 1 ] && [ "$v" = "${VERSIONS%% *}" ] && cache_check "$v"
            tree_checks "$v"
            # memreg=physical sizes the Call header for long chunk
            # lists, so no 3000-byte WRITE is inline there.
            case " $PARAMS " in
                " c-client "|*" memreg=physical "*) ;;
                *) mapped_send_check "$v" ;;
            esac
            show_xprt
            nfs_umount $MNT || fail "nfs$v-umount" "umount $MNT"
        else
            fail "nfs$v-mount-rdma" "$NFS_ERR"
        fi
    done
    for x in $EXTRAS; do
        case $x in
            ipv6) ipv6_mount ;;
            restart) reconnect_check server-restart-reconnect "server restart" restart_server 8388608 ;;
            devremove) reconnect_check client-device-removal "device removal" remove_client_device 4194304 ;;
            acl) acl_check 3 $MNT; acl_check 4.2 $MNT ;;
            nconnect) nconnect_check $MNT ;;
            limits) limits_check $MNT ;;
            krb5|krb5-once) krb5_check $MNT ;;
            -) ;;
            *) fail "extra-$x" "unknown extra" ;;
        esac
    done
}

case $ROLE in
    server)
        run_server && server_wait_client_done "${CLIENT_WAIT:-1500}"
        parity_server_report
        check nfs-server-stop stop_nfs_server
        ;;
    client)
        run_client
        client_signal_done || fail client-signal-done "$NFS_ERR"
        [ "${_cache:-0}" = 1 ] && mod_loaded rpcrdma_rs && {
            # Every mount is gone: its transports close asynchronously and
            # drop their cached entries (and page references) when they do.
            if wait_for 30 cache_released; then
                pass memreg-cache-released-at-close
            else
                fail memreg-cache-released-at-close "30 s after the last umount: transports entries pinned_bytes = $(cache_fields transports entries pinned_bytes)"
            fi
            cache_info end
            # No cached registration had its pages released while its tag
            # could be in force (rust/rdma/run_mr.rs refuses and logs it).
            if dmesg | grep -q 'run MR released while its registration may be in force'; then
                fail memreg-cache-no-early-release "$(dmesg | grep -c 'run MR released while') refused releases"
            else
                pass memreg-cache-no-early-release
            fi
        }
        [ "$PARAMS" = c-client ] || check rpcrdma_rs-unload unload_rust_rpcrdma
        ;;
    single)
        fail rust-client-c-server "needs two VMs (scripts/vm --two-vm): the C and Rust modules both register the rdma transport"
        ;;
esac
