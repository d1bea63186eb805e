# shellcheck shell=sh
# c-baseline: the in-tree C rpcrdma on both ends, NFSv4.2 and NFSv3 over
# soft-RoCE (proto=rdma), SIZE_MIB (default 256) written and read back with a
# sha256 compare per version. Roles: single (server and client in one guest),
# server / client (scripts/vm --two-vm c-baseline).
# Arguments: [SIZE_MIB] [VERSIONS, e.g. 4.2+3] [EXTRA_MOUNT_OPTS, '+' between
# options; e.g. "proto=tcp+port=2049" must make the mount checks FAIL]
SIZE=${1:-256}
VERSIONS=$(echo "${2:-4.2+3}" | tr '+' ' ')
EXTRA_OPTS=$(echo "${3:-}" | tr '+' ',')
MNT=/tmp/mnt

check load-c-rpcrdma load_c_rpcrdma || return 1

run_server() {
    if start_nfs_server; then pass nfs-server-start; else fail nfs-server-start "$NFS_ERR"; return 1; fi
}

run_client() {
    for v in $VERSIONS; do
        if nfs_mount "$v" "$SERVER_IP" $MNT "$EXTRA_OPTS"; then
            pass "nfs$v-mount-rdma"
            data_check "nfs$v-data-${SIZE}M" $MNT "$SIZE"
            show_xprt
            nfs_umount $MNT || fail "nfs$v-umount" "umount $MNT"
        else
            fail "nfs$v-mount-rdma" "$NFS_ERR"
        fi
    done
}

case $ROLE in
    single)
        run_server && run_client
        check nfs-server-stop stop_nfs_server
        ;;
    server)
        run_server && server_wait_client_done "${CLIENT_WAIT:-900}"
        check nfs-server-stop stop_nfs_server
        ;;
    client)
        run_client
        client_signal_done || fail client-signal-done "$NFS_ERR"
        ;;
esac
check unload-c-rpcrdma unload_c_rpcrdma
