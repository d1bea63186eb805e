# shellcheck shell=sh
# The administration surface of the C module (sourced after lib.sh; the
# "admin" phase of scenarios/main.sh, client and server in one guest, both
# rpcrdma_rs, loaded without parameters):
#   - before the load (admin_refused_loads): parameters out of range refuse
#     it;
#   - all eleven module parameters listed, read-only, in
#     /sys/module/rpcrdma_rs/parameters with the values loaded;
#   - the six client sysctls /proc/sys/sunrpc/rdma_* and every file of C's
#     /proc/sys/sunrpc/svc_rdma, writable where C's are, starting at the
#     module parameters;
#   - writes out of range fail with EINVAL and change nothing; C's unused
#     tunables accept a value in range;
#   - rdma_slot_table_entries, rdma_max_inline_write and the server's
#     max_requests and max_req_size, written before a mount, show on its
#     connection (the client's "connected:" line and xprt_info, the
#     server's "svcrdma: accepted:" line); then everything is restored;
#   - with the fewest slots (4), 16 concurrent O_DIRECT writers: tasks wait
#     on the transport's backlog for a freed slot (mountstats bklog_u) and
#     every file reads back as written.

ADMIN_PARAMS=/sys/module/rpcrdma_rs/parameters
ADMIN_SYS=/proc/sys/sunrpc
ADMIN_SVC=/proc/sys/sunrpc/svc_rdma
# The values of a load without parameters (scenarios/main.sh).
ADMIN_EXPECT="max_requests=128 max_inline_read=4096 max_inline_write=4096 memreg=fmr
fmr_pool_size=0 fmr_pages_per_mr=0 fmr_dirty_watermark=0 cache_max_mb=64 svc_memreg=direct svc_buf_cache=Y force_mr=N"
ADMIN_CLIENT_FILES="rdma_slot_table_entries rdma_max_inline_read rdma_max_inline_write
rdma_inline_write_padding rdma_memreg_strategy rdma_pad_optimize"
ADMIN_SVC_FILES="max_requests max_req_size max_outbound_read_requests rdma_stat_read
rdma_stat_recv rdma_stat_write rdma_stat_sq_starve rdma_stat_rq_starve rdma_stat_rq_poll
rdma_stat_rq_prod rdma_stat_sq_poll rdma_stat_sq_prod"
# FILE=VALUE pairs C refuses (out of its ranges), relative to /proc/sys/sunrpc.
ADMIN_BAD="rdma_slot_table_entries=3 rdma_slot_table_entries=16385
rdma_max_inline_read=1023 rdma_max_inline_read=65537 rdma_max_inline_write=0
rdma_inline_write_padding=$(( $(getconf PAGESIZE) + 1 )) rdma_memreg_strategy=7
svc_rdma/max_requests=3 svc_rdma/max_requests=16385 svc_rdma/max_req_size=4095
svc_rdma/max_req_size=65537 svc_rdma/max_outbound_read_requests=0
svc_rdma/max_outbound_read_requests=256 svc_rdma/rdma_stat_rq_starve=1
svc_rdma/rdma_stat_sq_prod=-1"
# What the mount of the last part runs with.
ADMIN_SLOTS=64
ADMIN_INLINE_WRITE=8192
ADMIN_SVC_CREDITS=32
ADMIN_SVC_REQ_SIZE=16384

# admin_params: every parameter present, 0444, with its loaded value.
admin_params() {
    _n=admin-module-parameters _bad=
    for _pv in $ADMIN_EXPECT; do
        _p=${_pv%%=*} _want=${_pv#*=}
        if [ ! -f $ADMIN_PARAMS/$_p ]; then _bad="$_bad $_p:missing"; continue; fi
        _got=$(cat $ADMIN_PARAMS/$_p) _mode=$(stat -c %a $ADMIN_PARAMS/$_p)
        [ "$_got" = "$_want" ] || _bad="$_bad $_p=$_got(want $_want)"
        [ "$_mode" = 444 ] || _bad="$_bad $_p:mode-$_mode"
    done
    info "admin: parameters: $(ls $ADMIN_PARAMS 2>/dev/null | tr '\n' ' ')"
    if [ -n "$_bad" ]; then fail $_n "$_bad"; else pass $_n; fi
}

# admin_files: the files exist, writable where C's are, and the limits start
# at the module parameters.
admin_files() {
    _n=admin-sysctl-files _bad=
    for _f in $ADMIN_CLIENT_FILES; do
        [ -f $ADMIN_SYS/$_f ] || { _bad="$_bad $_f:missing"; continue; }
        [ "$(stat -c %a $ADMIN_SYS/$_f)" = 644 ] || _bad="$_bad $_f:mode-$(stat -c %a $ADMIN_SYS/$_f)"
    done
    for _f in $ADMIN_SVC_FILES; do
        [ -f $ADMIN_SVC/$_f ] || { _bad="$_bad svc_rdma/$_f:missing"; continue; }
        [ "$(stat -c %a $ADMIN_SVC/$_f)" = 644 ] || _bad="$_bad svc_rdma/$_f:mode-$(stat -c %a $ADMIN_SVC/$_f)"
    done
    for _pair in rdma_slot_table_entries=max_requests rdma_max_inline_read=max_inline_read \
        rdma_max_inline_write=max_inline_write svc_rdma/max_requests=max_requests \
        svc_rdma/max_req_size=max_inline_write; do
        _f=${_pair%%=*} _p=${_pair#*=}
        _a=$(cat $ADMIN_SYS/$_f 2>/dev/null) _b=$(cat $ADMIN_PARAMS/$_p 2>/dev/null)
        [ -n "$_a" ] && [ "$_a" = "$_b" ] || _bad="$_bad $_f=$_a(parameter $_p=$_b)"
    done
    _m=$(cat $ADMIN_SYS/rdma_memreg_strategy 2>/dev/null)
    [ "$_m" = 5 ] || _bad="$_bad rdma_memreg_strategy=$_m(want 5, FRWR)"
    info "admin: client: $(for _f in $ADMIN_CLIENT_FILES; do printf '%s=%s ' $_f "$(cat $ADMIN_SYS/$_f 2>/dev/null)"; done)"
    info "admin: svc_rdma: $(for _f in $ADMIN_SVC_FILES; do printf '%s=%s ' $_f "$(cat $ADMIN_SVC/$_f 2>/dev/null)"; done)"
    if [ -n "$_bad" ]; then fail $_n "$_bad"; else pass $_n; fi
}

# admin_write FILE VALUE: one write(2) of "VALUE\n" to /proc/sys/sunrpc/FILE,
# as sysctl(8) does; on failure prints the error (coreutils' printf names
# the errno: "write error: Invalid argument").
admin_write() { ( env printf '%s\n' "$2" > "$ADMIN_SYS/$1" ) 2>&1; }

# admin_bad_writes: each write out of range fails with EINVAL and changes
# nothing; C's unused tunables take a value in range.
admin_bad_writes() {
    _n=admin-sysctl-range _bad=
    for _fv in $ADMIN_BAD; do
        _f=${_fv%%=*} _v=${_fv#*=}
        _before=$(cat $ADMIN_SYS/$_f)
        if _err=$(admin_write "$_f" "$_v"); then
            _bad="$_bad $_f=$_v:accepted"
        else
            case $_err in *"nvalid argument"*) ;; *) _bad="$_bad $_f=$_v:$_err" ;; esac
        fi
        [ "$(cat $ADMIN_SYS/$_f)" = "$_before" ] || _bad="$_bad $_f:changed-to-$(cat $ADMIN_SYS/$_f)"
    done
    if [ -n "$_bad" ]; then fail $_n "$_bad"; else pass $_n; fi
    _n=admin-sysctl-vestigial _bad=
    for _fv in rdma_pad_optimize=1 rdma_inline_write_padding=4096 rdma_memreg_strategy=6; do
        _f=${_fv%%=*} _v=${_fv#*=}
        _before=$(cat $ADMIN_SYS/$_f)
        _err=$(admin_write "$_f" "$_v") || _bad="$_bad $_f=$_v:$_err"
        [ "$(cat $ADMIN_SYS/$_f)" = "$_v" ] || _bad="$_bad $_f:not-$_v"
        admin_write "$_f" "$_before" >/dev/null || _bad="$_bad $_f:not-restored"
    done
    if [ -n "$_bad" ]; then fail $_n "$_bad"; else pass $_n; fi
}

# admin_effect MNT: new limits written before a mount show on its
# connection, at both ends; the mount moves data; then restore.
admin_effect() {
    _m=$1 _n=admin-sysctl-new-connection
    _slots0=$(cat $ADMIN_SYS/rdma_slot_table_entries) _iw0=$(cat $ADMIN_SYS/rdma_max_inline_write)
    _cr0=$(cat $ADMIN_SVC/max_requests) _rs0=$(cat $ADMIN_SVC/max_req_size)
    _c0=$(dmesg | grep -c 'rpcrdma_rs: connected:') _a0=$(dmesg | grep -c 'svcrdma: accepted:')
    admin_write rdma_slot_table_entries $ADMIN_SLOTS &&
        admin_write rdma_max_inline_write $ADMIN_INLINE_WRITE &&
        admin_write svc_rdma/max_requests $ADMIN_SVC_CREDITS &&
        admin_write svc_rdma/max_req_size $ADMIN_SVC_REQ_SIZE ||
        fail $_n "cannot write the limits"
    if nfs_mount 4.2 "$SERVER_IP" "$_m"; then
        head -c 262144 /dev/urandom > /tmp/.adm-src
        _ok=1
        dd if=/tmp/.adm-src of="$_m/adm.dat" bs=32k oflag=direct 2>/dev/null || _ok=0
        _s=$(dd if="$_m/adm.dat" bs=32k iflag=direct 2>/dev/null | sha256sum | cut -d' ' -f1)
        [ "$_s" = "$(sha256sum < /tmp/.adm-src | cut -d' ' -f1)" ] || _ok=0
        rm -f "$_m/adm.dat" /tmp/.adm-src
        _c=$(dmesg | grep 'rpcrdma_rs: connected:' | tail -n +$((_c0 + 1)) | tail -n 1)
        _a=$(dmesg | grep 'svcrdma: accepted:' | tail -n +$((_a0 + 1)) | tail -n 1)
        _i=$(mount_xprt_info) _x=${_i%% *}
        info "admin: rdma transports: $(for _t in /sys/kernel/sunrpc/xprt-switches/switch-*/xprt-*-rdma; do
            printf '%s(%s) ' "${_t##*/}" "$(grep -E '^(max_num_slots|dst_port)=' "$_t/xprt_info" 2>/dev/null | tr '\n' ' ' | sed 's/ $//')"; done)"
        _max=$(echo "$_i" | grep -o 'max_num_slots=[0-9]*' | head -n 1 | cut -d= -f2)
        _cwnd=$(echo "$_i" | grep -o 'cong_win=[0-9]*' | head -n 1 | cut -d= -f2)
        info "admin: client: ${_c#*rpcrdma_rs: }"
        info "admin: server: ${_a#*svcrdma: }"
        info "admin: ${_x:-no-rdma-transport} max_num_slots=$_max cong_win=$_cwnd (credits $(( ${_cwnd:-0} / 256 )))"
        _bad=
        case $_c in *"inline send $ADMIN_INLINE_WRITE "*"max_requests $ADMIN_SLOTS,"*) ;;
            *) _bad="$_bad client-line:'${_c#*rpcrdma_rs: }'" ;; esac
        case $_a in *"credits $ADMIN_SVC_CREDITS, inline send "*" recv $ADMIN_INLINE_WRITE,"*) ;;
            *) _bad="$_bad server-line:'${_a#*svcrdma: }'" ;; esac
        [ "${_max:-0}" = $ADMIN_SLOTS ] || _bad="$_bad max_num_slots=$_max"
        [ $(( ${_cwnd:-0} / 256 )) = $ADMIN_SVC_CREDITS ] || _bad="$_bad credits-granted=$(( ${_cwnd:-0} / 256 ))"
        [ $_ok = 1 ] || _bad="$_bad 32k-O_DIRECT-data-differs"
        if [ -n "$_bad" ]; then fail $_n "$_bad"; else pass $_n; fi
        nfs_umount "$_m"
    else
        fail $_n "mount: $NFS_ERR"
    fi
    admin_write rdma_slot_table_entries "$_slots0" >/dev/null
    admin_write rdma_max_inline_write "$_iw0" >/dev/null
    admin_write svc_rdma/max_requests "$_cr0" >/dev/null
    # max_req_size may start below what a write accepts (the parameter
    # allows 1024): not restored then, and said so.
    admin_write svc_rdma/max_req_size "$_rs0" >/dev/null || info "admin: svc_rdma/max_req_size not restored to $_rs0"
    if [ "$(cat $ADMIN_SYS/rdma_slot_table_entries) $(cat $ADMIN_SYS/rdma_max_inline_write) $(cat $ADMIN_SVC/max_requests)" = "$_slots0 $_iw0 $_cr0" ]; then
        pass admin-sysctl-restored
    else
        fail admin-sysctl-restored "now $(cat $ADMIN_SYS/rdma_slot_table_entries) $(cat $ADMIN_SYS/rdma_max_inline_write) $(cat $ADMIN_SVC/max_requests)"
    fi
}

# admin_refused_loads: before the module is loaded, each parameter out of
# its range refuses the load (insmod: EINVAL, "Invalid parameters") with a
# kernel log line naming the parameter, and leaves nothing loaded: the
# values declared in C reach the checks of src/config.rs.
ADMIN_REFUSED="max_requests=3 max_requests=16385 max_inline_read=65537 max_inline_write=1023
fmr_pool_size=4 fmr_pages_per_mr=258 fmr_dirty_watermark=256 cache_max_mb=0 memreg=bogus svc_memreg=bogus"
admin_refused_loads() {
    _n=admin-parameter-range _bad=
    mod_loaded rpcrdma_rs && { info "admin: rpcrdma_rs already loaded, refused loads not tried"; return 0; }
    for _pv in $ADMIN_REFUSED; do
        _p=${_pv%%=*}
        _l0=$(dmesg | grep -c "rpcrdma_rs: .*$_p")
        if _err=$(insmod "$RUST_RPCRDMA_KO" "$_pv" 2>&1); then
            _bad="$_bad $_pv:loaded"
            rmmod rpcrdma_rs
            continue
        fi
        case $_err in *"nvalid"*) ;; *) _bad="$_bad $_pv:'$_err'" ;; esac
        [ "$(dmesg | grep -c "rpcrdma_rs: .*$_p")" -gt "$_l0" ] || _bad="$_bad $_pv:no-log-line"
        ! mod_loaded rpcrdma_rs || _bad="$_bad $_pv:module-left-loaded"
    done
    info "admin: refused loads said: $(dmesg | grep 'rpcrdma_rs: \(not loaded\|memreg=\)' | sed 's/^\[[^]]*\] //' | sort -u | tr '\n' ';')"
    if [ -n "$_bad" ]; then fail $_n "$_bad"; else pass $_n; fi
}

# admin_rescuers: the module's workqueues (connect and flush, teardown)
# have a rescuer thread, which only WQ_MEM_RECLAIM queues get: reconnects
# and the flush of MRs writeback waits for must progress without a new
# kworker. /proc/PID/comm names a rescuer "kworker/R-" and its queue's name
# (wq_worker_comm).
admin_rescuers() {
    _n=admin-workqueues-reclaim _bad=
    _comms=$(cat /proc/[0-9]*/comm 2>/dev/null)
    for _q in rpcrdma_rs_connect rpcrdma_rs_teardown; do
        printf '%s\n' "$_comms" | grep -qx "kworker/R-$_q" || _bad="$_bad $_q"
    done
    if [ -n "$_bad" ]; then
        fail $_n "no rescuer for:$_bad (rescuers: $(printf '%s\n' "$_comms" | grep '^kworker/R-' | tr '\n' ' '))"
    else
        pass $_n
    fi
}

# admin_backlog MNT: more concurrent RPCs than request slots. The client's
# own slots (alloc_slot/free_slot) hand a freed slot to a task waiting on
# the backlog; none may be lost (a lost one hangs the writers), and the
# data must arrive whole. 16 writers of 16 RPCs each keep 4 slots full.
admin_backlog() {
    _m=$1 _n=admin-slots-backlog
    _slots0=$(cat $ADMIN_SYS/rdma_slot_table_entries)
    admin_write rdma_slot_table_entries 4 >/dev/null || { fail $_n "cannot write rdma_slot_table_entries"; return 1; }
    if nfs_mount 4.2 "$SERVER_IP" "$_m"; then
        head -c 262144 /dev/urandom > /tmp/.bkl-src
        _want=$(sha256sum < /tmp/.bkl-src | cut -d' ' -f1)
        for _i in $(seq 1 16); do
            timeout 300 dd if=/tmp/.bkl-src of="$_m/bkl$_i.dat" bs=16k oflag=direct 2>/dev/null &
        done
        wait
        _bad=
        for _i in $(seq 1 16); do
            _s=$(timeout 120 dd if="$_m/bkl$_i.dat" bs=16k iflag=direct 2>/dev/null | sha256sum | cut -d' ' -f1)
            [ "$_s" = "$_want" ] || _bad="$_bad bkl$_i.dat-differs"
        done
        # req_u and bklog_u of the xprt line (mountstats fields 9, 10).
        _u=$(xprt_fields "$_m" 9 10) _max=$(mount_xprt_info | grep -o 'max_num_slots=[0-9]*' | head -n 1)
        info "admin: 4 slots, 16 writers: req_u bklog_u = $_u, $_max"
        [ "${_max#*=}" = 4 ] || _bad="$_bad $_max"
        [ "${_u#* }" -gt 0 ] 2>/dev/null || _bad="$_bad no-task-waited-on-the-backlog($_u)"
        rm -f "$_m"/bkl*.dat /tmp/.bkl-src
        if [ -n "$_bad" ]; then fail $_n "$_bad"; else pass $_n; fi
        nfs_umount "$_m"
    else
        fail $_n "mount: $NFS_ERR"
    fi
    admin_write rdma_slot_table_entries "$_slots0" >/dev/null
}

# admin_check MNT: the whole phase (the server runs, MNT is not mounted).
admin_check() {
    mod_loaded rpcrdma_rs || { fail admin-module-parameters "rpcrdma_rs is not loaded"; return 1; }
    admin_params
    admin_rescuers
    admin_files
    admin_bad_writes
    admin_effect "$1"
    admin_backlog "$1"
}
