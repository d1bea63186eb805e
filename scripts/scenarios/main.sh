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
# between (acl, nconnect, limits); '-' or none for none]
SIZE=${1:-64}
PARITY=$(echo "${2:--}" | tr '+' ' ' | sed 's/^-$//')
MNT=/tmp/mnt
. "$REPO_ROOT/scripts/guest/parity.sh"

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
    show_xprt
    nfs_umount $MNT || fail nfs4.2-umount "umount $MNT"
else
    fail nfs4.2-mount-rdma "$NFS_ERR"
fi
has_phase acl && { acl_check 3 $MNT; acl_check 4.2 $MNT; }
has_phase nconnect && nconnect_check $MNT
has_phase limits && limits_check $MNT
check nfs-server-stop stop_nfs_server
unload_c_rpcrdma
if mod_loaded rpcrdma_rs; then check rpcrdma_rs-unload unload_rust_rpcrdma; fi
