# shellcheck shell=sh
# netns: the transport honours network namespaces (audit finding 5). One VM:
#
# - ns1 and ns2 are joined by a veth pair (10.98.0.1 / 10.98.0.2), each end
#   with its own soft-RoCE device created from inside its namespace (rxe on
#   7.3 keeps its UDP sockets per namespace; the RDMA subsystem stays in its
#   default "shared" mode, where the CM matches a request to the listeners of
#   the namespace of the netdev it arrived on);
# - nfsd runs in ns1 (NFSv4 only: no rpcbind or lockd there) with its own
#   /proc/fs/nfsd (the nfsd file system is per namespace, mounted from inside
#   it) and its own mountd and /var/lib/nfs, and an RDMA listener through
#   rpcrdma_rs on port 20049;
# - the initial namespace has no RDMA listener yet: a mount from it to its
#   own rxe0 address must fail (it would succeed if ns1's listener had been
#   created in init_net, as before the fix);
# - the project's client mounts ns1's export from ns2 (nsenter --net: the
#   mount lands in the common mount namespace), writes, remounts and verifies
#   data; `rdma res show cm_id` shows the server side of that connection on
#   ns1's address;
# - nfsd in the initial namespace then also listens on rdma 20049 (no
#   EADDRINUSE: two listeners, one per namespace) and serves its own export,
#   which does not show ns1's files;
# - everything is torn down and the module unloads with no live objects.
# Arguments: [SIZE_MIB]
SIZE=${1:-16}
NS1_IP=10.98.0.1
NS2_IP=10.98.0.2
NS1_EXPORT=/tmp/export-ns1
NS1_STATE=/tmp/varlibnfs-ns1
MNT2=/tmp/mnt-ns2
MNT0=/tmp/mnt-init

in_ns() { _ns=$1; shift; ip netns exec "$_ns" "$@"; }
# Run a shell command in ns1 with ns1's nfsd file system on /proc/fs/nfsd
# (ip netns exec gives each call a private mount namespace).
in_ns1_nfsd() {
    ip netns exec ns1 sh -c 'umount /proc/fs/nfsd 2>/dev/null; mount -t nfsd nfsd /proc/fs/nfsd && '"$1"
}

setup_namespaces() {
    ip netns add ns1 && ip netns add ns2 || return 1
    ip link add vns1 type veth peer name vns2 || return 1
    ip link set vns1 netns ns1 && ip link set vns2 netns ns2 || return 1
    in_ns ns1 ip link set lo up && in_ns ns2 ip link set lo up || return 1
    in_ns ns1 ip addr add $NS1_IP/24 dev vns1 && in_ns ns1 ip link set vns1 up || return 1
    in_ns ns2 ip addr add $NS2_IP/24 dev vns2 && in_ns ns2 ip link set vns2 up || return 1
    # The netdev is looked up in the caller's namespace.
    in_ns ns1 rdma link add rxens1 type rxe netdev vns1 || return 1
    in_ns ns2 rdma link add rxens2 type rxe netdev vns2 || return 1
    rdma link show | sed 's/^/vm:   /'
    return 0
}

# nfsd in ns1: own state directory, own mountd, NFSv4.x only.
start_ns1_nfsd() {
    mkdir -p $NS1_EXPORT $NS1_STATE/rpc_pipefs $NS1_STATE/v4recovery && chmod 1777 $NS1_EXPORT
    touch $NS1_STATE/etab $NS1_STATE/rmtab $NS1_STATE/state
    echo ns1 > $NS1_EXPORT/ns1-marker
    ip netns exec ns1 sh -c "
        mount --bind $NS1_STATE /var/lib/nfs || exit 1
        umount /proc/fs/nfsd 2>/dev/null; mount -t nfsd nfsd /proc/fs/nfsd || exit 1
        echo 10 > /proc/fs/nfsd/nfsv4gracetime; echo 15 > /proc/fs/nfsd/nfsv4leasetime
        exportfs -i -o rw,no_root_squash,insecure,no_subtree_check,fsid=0 '*:$NS1_EXPORT' || exit 1
        rpc.mountd -N 2 -N 3 || exit 1
        rpc.nfsd -N 3 -V 4 -V 4.1 -V 4.2 4 || exit 1
        echo Y > /proc/fs/nfsd/v4_end_grace 2>/dev/null
        echo 'rdma $NFS_RDMA_PORT' > /proc/fs/nfsd/portlist || exit 1
        echo \"ns1 nfsd threads \$(cat /proc/fs/nfsd/threads) ports: \$(tr '\n' ' ' < /proc/fs/nfsd/portlist)\"
        grep -q '^rdma $NFS_RDMA_PORT' /proc/fs/nfsd/portlist
    " 2>&1 | sed 's/^/vm:   ns1: /'
    in_ns1_nfsd "grep -q '^rdma $NFS_RDMA_PORT' /proc/fs/nfsd/portlist"
}

stop_ns1_nfsd() {
    in_ns1_nfsd "echo '-rdma $NFS_RDMA_PORT' > /proc/fs/nfsd/portlist; rpc.nfsd 0; exportfs -ua" 2>/dev/null
    for p in $(pidof rpc.mountd); do
        [ "$(readlink /proc/$p/ns/net)" = "$(ip netns exec ns1 readlink /proc/self/ns/net)" ] && kill "$p"
    done
    [ "$(in_ns1_nfsd 'cat /proc/fs/nfsd/threads')" = 0 ]
}

# mount_in NS SERVER MNT: NFSv4.2 over RDMA from namespace NS (the mount
# itself is visible everywhere); retried while ns1's grace period ends.
mount_in() {
    _ns=$1 _srv=$2 _mnt=$3
    mkdir -p "$_mnt"
    _end=$(( $(date +%s) + 60 ))
    while :; do
        _out=$(timeout -s KILL 60 nsenter --net=/run/netns/"$_ns" \
            mount -t nfs -o vers=4.2,proto=rdma,port=$NFS_RDMA_PORT,retry=0 "$_srv:/" "$_mnt" 2>&1) && break
        [ "$(date +%s)" -ge $_end ] && { echo "mount from $_ns failed: $_out"; return 1; }
        sleep 3
    done
    grep " $_mnt " /proc/mounts | sed 's/^/vm:   /'
    grep " $_mnt " /proc/mounts | grep -q 'proto=rdma'
}

# A mount that must fail: soft, one try, killed after 60 s at the latest.
mount_must_fail() {
    _srv=$1 _mnt=$2
    mkdir -p "$_mnt"
    if timeout -s KILL 60 mount -t nfs -o vers=4.2,proto=rdma,port=$NFS_RDMA_PORT,soft,timeo=30,retrans=1,retry=0 \
        "$_srv:/" "$_mnt" 2>&1 | sed 's/^/vm:   /'; then
        :
    fi
    if grep -q " $_mnt " /proc/mounts; then
        umount -l "$_mnt"
        echo "mounted $_srv from the initial namespace"
        return 1
    fi
    return 0
}

verify_data() {
    _m=$1
    dd if=/dev/urandom of=/tmp/.ns-src bs=1M count="$SIZE" 2>/dev/null || return 1
    _s1=$(sha256sum < /tmp/.ns-src | cut -d' ' -f1)
    dd if=/tmp/.ns-src of="$_m/data" bs=1M conv=fsync 2>/dev/null || { echo "write failed"; return 1; }
    umount "$_m" || return 1
    sync; echo 3 > /proc/sys/vm/drop_caches
    mount_in ns2 $NS1_IP "$_m" >/dev/null || return 1
    _s2=$(sha256sum < "$_m/data" | cut -d' ' -f1)
    rm -f /tmp/.ns-src "$_m/data"
    [ "$_s1" = "$_s2" ] || { echo "sha256 differs: $_s1 != $_s2"; return 1; }
    cmp -s "$_m/ns1-marker" $NS1_EXPORT/ns1-marker || { echo "ns1 marker not seen"; return 1; }
}

dmesg -c >/dev/null 2>&1
check load-rust-rpcrdma load_rust_rpcrdma || return 1
check netns-setup setup_namespaces || return 1
check ns1-nfsd-rdma-listener start_ns1_nfsd || return 1

# The listener lives in ns1: nothing listens in the initial namespace.
check init-ns-cannot-reach-ns1-listener mount_must_fail "$MYIP" $MNT0

if check ns2-mount-ns1-rdma mount_in ns2 $NS1_IP $MNT2; then
    _ids=$(rdma res show cm_id 2>&1)
    printf '%s\n' "$_ids" | sed 's/^/vm:   cm_id: /'
    if printf '%s\n' "$_ids" | grep -q "src-addr $NS1_IP:$NFS_RDMA_PORT "; then
        pass cm-id-server-side-on-ns1-address
    else
        fail cm-id-server-side-on-ns1-address "no cm_id with src-addr $NS1_IP:$NFS_RDMA_PORT"
    fi
    check ns2-data-${SIZE}M verify_data $MNT2
    show_xprt
fi

# A second listener on the same port, in the initial namespace. Its own
# mountd first: start_nfs_server skips starting one when ns1's is running.
mountpoint -q /proc/fs/nfsd || mount -t nfsd nfsd /proc/fs/nfsd
start_rpcbind && rpc.mountd
if start_nfs_server; then
    pass init-ns-rdma-listener-same-port
    NFS_MOUNT_WAIT=30
    if nfs_mount 4.2 "$MYIP" $MNT0; then
        if [ -e $MNT0/ns1-marker ]; then
            fail init-ns-serves-own-export "ns1's marker visible through the initial namespace's server"
        else
            pass init-ns-serves-own-export
        fi
        nfs_umount $MNT0
    else
        fail init-ns-serves-own-export "$NFS_ERR"
    fi
else
    fail init-ns-rdma-listener-same-port "$NFS_ERR"
fi

umount $MNT2 2>/dev/null || umount -l $MNT2
check nfs-server-stop stop_nfs_server
check ns1-nfsd-stop stop_ns1_nfsd
in_ns ns1 rdma link delete rxens1
in_ns ns2 rdma link delete rxens2
ip netns del ns1; ip netns del ns2
# Transports go away asynchronously after umount/nfsd stop: retry rmmod.
check rpcrdma_rs-unload wait_for 60 rmmod rpcrdma_rs
if dmesg | grep -q 'RDMA objects still live'; then
    fail unload-no-leaks "$(dmesg | grep 'RDMA objects still live')"
else
    pass unload-no-leaks
fi
dmesg | grep -E 'rpcrdma_rs|svcrdma' | tail -n 30 | sed 's/^/vm:   dmesg: /'
