# shellcheck shell=sh
# smoke: harness self-test. Soft-RoCE device is up, rpcbind and the NFS server
# start, and (two-VM) the client reaches the server's rpcbind over eth0 (IPv4 and IPv6).
# Argument "hang": hang after the first check (tests the watchdog/timeouts).
check rxe-link sh -c 'rdma link show | grep -q "rxe0.*ACTIVE"'
if [ "${1:-}" = hang ]; then say "hanging on purpose"; sleep 100000; fi
case $ROLE in
    single|server)
        check load-c-rpcrdma load_c_rpcrdma
        if start_nfs_server; then pass nfs-server-start; else fail nfs-server-start "$NFS_ERR"; fi
        [ $ROLE = server ] && server_wait_client_done 300
        check nfs-server-stop stop_nfs_server
        check unload-c-rpcrdma unload_c_rpcrdma ;;
    client)
        # the server's rpcbind (port 111) over eth0, IPv4 and IPv6
        check tcp-server wait_for 90 tcp_probe "$SERVER_IP" 111
        check tcp6-server wait_for 30 tcp_probe "$SERVER_IP6" 111
        check load-c-rpcrdma load_c_rpcrdma
        if nfs_mount 4.2 "$SERVER_IP" /tmp/mnt; then pass nfs4.2-mount-rdma; nfs_umount /tmp/mnt; else fail nfs4.2-mount-rdma "$NFS_ERR"; fi
        client_signal_done ;;
esac
