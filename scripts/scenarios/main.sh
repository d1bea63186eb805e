# shellcheck shell=sh
# main: the newcomer's end-to-end job. Soft-RoCE is up (guest init); this
# loads rpcrdma_rs.ko, checks it came up with its parameters and saw the
# rxe device, mounts an NFSv4.2 export with proto=rdma, writes SIZE_MIB
# (default 64) and reads it back with a checksum, and unloads cleanly.
#
# The mount runs client and server through rpcrdma_rs in one VM; should the
# module lack either class, it falls back to the in-tree C transport and says
# so on a line of its own.
# Arguments: [SIZE_MIB] [PARITY: phases of scripts/guest/parity.sh, '+'
# between (acl, nconnect, limits), admin (scripts/guest/admin.sh: module
# parameters in sysfs, the client and svc_rdma sysctls) and trace
# (scripts/guest/trace.sh: the trace events, enabled through tracefs
# during a mount); '-' or none for
# none]
SIZE=${1:-64}
PARITY=$(echo "${2:--}" | tr '+' ' ' | sed 's/^-$//')
MNT=/tmp/mnt
. "$REPO_ROOT/scripts/guest/parity.sh"
. "$REPO_ROOT/scripts/guest/admin.sh"
. "$REPO_ROOT/scripts/guest/trace.sh"

# overrun_check MNT: the client refuses a Write chunk longer than it
# registered. On kernels with fault injection the project's server can
# overstate one (debugfs svc_fault_write_overrun): that O_DIRECT READ fails
# with EIO and the client says why; the next one reads the data.
overrun_check() {
    _f=/sys/kernel/debug/rpcrdma_rs/svc_fault_write_overrun _on=client-refuses-write-chunk-overrun
    [ -w $_f ] && mod_loaded rpcrdma_rs && ! mod_loaded rpcrdma || return 0
    head -c 262144 /dev/urandom > /tmp/.ovr-src
    cp /tmp/.ovr-src "$1/ovr.dat" && sync || { fail $_on "cannot write the file"; return 1; }
    echo 1 > $_f
    if dd if="$1/ovr.dat" of=/dev/null bs=256k iflag=direct 2>/tmp/.ovr-err; then _bad=1; else _bad=0; fi
    echo 0 > $_f
    _said=$(dmesg | grep -c 'Write chunk of [0-9]* bytes, but [0-9]* were registered')
    _again=$(dd if="$1/ovr.dat" bs=256k iflag=direct 2>/dev/null | cmp -s - /tmp/.ovr-src && echo ok)
    info "overrun: dd $(tail -n 1 /tmp/.ovr-err); client warnings: $_said; read again: ${_again:-failed}"
    if [ $_bad = 1 ]; then fail $_on "the READ with an overstated Write chunk succeeded"
    elif [ "$_said" -lt 1 ]; then fail $_on "no warning from the client"
    elif [ "$_again" != ok ]; then fail $_on "the next READ did not return the data"
    else pass $_on; fi
    rm -f "$1/ovr.dat" /tmp/.ovr-src /tmp/.ovr-err
}

has_phase admin && admin_refused_loads
dmesg -c >/dev/null 2>&1
if check rpcrdma_rs-load load_rust_rpcrdma; then
    line=$(dmesg | grep -m1 'rpcrdma_rs .* loaded:')
    say "$line"
    case $line in
        *max_requests=*rdma_devices=[1-9]*) pass rpcrdma_rs-sees-rxe ;;
        *) fail rpcrdma_rs-sees-rxe "no load line with an RDMA device: $line" ;;
    esac
fi

# Which module provides the "rdma" netid: ours when it registers both the
# client class (sunrpc logs it) and the server class.
# (With only rpcrdma_rs loaded, /proc/sys/sunrpc/svc_rdma is its server's.)
if dmesg | grep -q 'RPC: Registered rdma transport module' &&
    [ -d /proc/sys/sunrpc/svc_rdma ]; then
    info "NFS transport: rpcrdma_rs (client and server)"
else
    info "NFS transport: in-tree C rpcrdma (rpcrdma_rs does not register both rdma transports)"
    check unload-rpcrdma_rs-for-c unload_rust_rpcrdma
    check load-c-rpcrdma load_c_rpcrdma || return 1
fi

parity_server_prepare
if start_nfs_server; then pass nfs-server-start; else fail nfs-server-start "$NFS_ERR"; return 1; fi
parity_server_export
if nfs_mount 4.2 "$SERVER_IP" $MNT; then
    pass nfs4.2-mount-rdma
    grep " $MNT " /proc/mounts | sed 's/^/vm:   /'
    data_check "nfs4.2-data-${SIZE}M" $MNT "$SIZE"
    overrun_check $MNT
    show_xprt
    nfs_umount $MNT || fail nfs4.2-umount "umount $MNT"
else
    fail nfs4.2-mount-rdma "$NFS_ERR"
fi
has_phase acl && { acl_check 3 $MNT; acl_check 4.2 $MNT; }
has_phase nconnect && nconnect_check $MNT
has_phase limits && limits_check $MNT
has_phase admin && admin_check $MNT
has_phase trace && trace_check $MNT
check nfs-server-stop stop_nfs_server
unload_c_rpcrdma
if mod_loaded rpcrdma_rs; then check rpcrdma_rs-unload unload_rust_rpcrdma; fi
