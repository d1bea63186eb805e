# shellcheck shell=sh
# stock-kernel: rpcrdma_rs on Debian's own kernel (scripts/stock-kernel boots
# it: two VMs, Debian's vmlinuz and module tree, the module from a DKMS
# install in that tree, modprobe.d aliases from its POST_INSTALL).
#
# Nothing is insmod'ed from the checkout: the module comes in through
# modprobe, the way the kernel's own requests load it. The in-tree C
# rpcrdma.ko of the same kernel is the peer (loaded by path, since the
# aliases send the name "rpcrdma" to rpcrdma_rs).
#
# Server VM: phase 1 nfsd with the C transport; phase 2 nfsd from nfs.conf
# with rdma=y, which loads rpcrdma_rs through the kernel's request for
# "svcrdma". Client VM: phase 1 the project's client (autoloaded by the
# mount) against C's server, NFSv4.2 and v3; phase 2 the project's client
# and then the C client against the project's server, v4.2 and v3. Every
# mount writes data and reads it back after a remount. Both VMs unload
# rpcrdma_rs with modprobe -r at the end.
#
# The two VMs step through the phases with TCP barriers on the virtio link
# (a listener on 9000+N means "server ready for phase N"; the client
# connecting to 9100+N means "client done with phase N").
# Arguments: [SIZE_MIB] (default 16)
SIZE=${1:-16}
MNT=/tmp/mnt
KREL=$(uname -r)
MODDIR=/lib/modules/$KREL
C_KO=$(ls "$MODDIR"/kernel/net/sunrpc/xprtrdma/rpcrdma.ko* 2>/dev/null | head -n 1)

only_rust_loaded() { mod_loaded rpcrdma_rs && ! mod_loaded rpcrdma; }
only_c_loaded() { mod_loaded rpcrdma && ! mod_loaded rpcrdma_rs; }
loaded() { grep -E '^rpcrdma(_rs)? ' /proc/modules | cut -d' ' -f1 | tr '\n' ' '; }

# The C module of this kernel, by path (its name is aliased away).
load_stock_c() {
    modprobe -a sunrpc ib_core rdma_cm || return 1
    mod_loaded rpcrdma || insmod "$C_KO"
}

# barrier_ready N: listen on 9000+N until killed (the client polls it).
barrier_ready() {
    ( while :; do busybox nc -l -p $((9000 + $1)) </dev/null >/dev/null 2>&1 || sleep 1; done ) &
    READY_PID=$!
}
barrier_unready() { kill "$READY_PID" 2>/dev/null; pkill -f "nc -l -p $((9000 + $1))" 2>/dev/null; }
# barrier_wait_ready N: the client waits for the server's phase N.
barrier_wait_ready() { wait_for "${2:-600}" tcp_probe "$SERVER_IP" $((9000 + $1)); }
# barrier_done N: the client says it is done with phase N.
barrier_done() { wait_for 120 tcp_probe "$SERVER_IP" $((9100 + $1)); }
# barrier_wait_done N: the server waits for that.
barrier_wait_done() { timeout "${2:-900}" busybox nc -l -p $((9100 + $1)) </dev/null >/dev/null 2>&1; }

# mount_data NAME VERS: a proto=rdma mount, data through it, umount.
mount_data() {
    if nfs_mount "$2" "$SERVER_IP" $MNT; then
        pass "$1-nfs$2-mount"
        data_check "$1-nfs$2-data-${SIZE}M" $MNT "$SIZE"
        nfs_umount $MNT || fail "$1-nfs$2-umount" "umount $MNT"
    else
        fail "$1-nfs$2-mount" "$NFS_ERR"
    fi
}

# The kernel's module requests go to modprobe, as on an installed system
# (nfs, nfsd, the transports are modules here).
echo /sbin/modprobe > /proc/sys/kernel/modprobe
dmesg -c >/dev/null 2>&1
info "kernel $KREL: $(cat /proc/version)"
[ -n "$C_KO" ] || fail stock-c-module "no rpcrdma.ko in $MODDIR/kernel"

# The DKMS install and the aliases, on either VM.
_path=$(modinfo -n rpcrdma_rs 2>&1)
case $_path in
    "$MODDIR"/updates/dkms/rpcrdma_rs.ko*) pass dkms-module-installed ;;
    *) fail dkms-module-installed "modinfo -n rpcrdma_rs: $_path" ;;
esac
info "rpcrdma_rs: vermagic '$(modinfo -F vermagic rpcrdma_rs 2>&1)' signer '$(modinfo -F signer rpcrdma_rs 2>&1)'"
_bad=
for _a in rpcrdma rpcrdma6 xprtrdma svcrdma; do
    _r=$(modprobe -R "$_a" 2>&1 | tr '\n' ' ')
    [ "$_r" = "rpcrdma_rs " ] || _bad="$_bad $_a->$_r"
done
if [ -z "$_bad" ]; then pass modprobe-resolves-rpcrdma-to-rpcrdma_rs
else fail modprobe-resolves-rpcrdma-to-rpcrdma_rs "$_bad"; fi

if [ "$ROLE" = server ]; then
    # ---- phase 1: the stock C server ------------------------------------
    if load_stock_c && only_c_loaded; then pass server-c-rpcrdma-loaded
    else fail server-c-rpcrdma-loaded "loaded: $(loaded)"; fi
    if start_nfs_server; then pass server-c-nfsd-start; else fail server-c-nfsd-start "$NFS_ERR"; fi
    grep -q "^rdma $NFS_RDMA_PORT\$" /proc/fs/nfsd/portlist && pass server-c-rdma-listener ||
        fail server-c-rdma-listener "portlist: $(tr '\n' ' ' < /proc/fs/nfsd/portlist)"
    barrier_ready 1
    if barrier_wait_done 1; then pass server-phase1-client-done; else fail server-phase1-client-done "no client after 900s"; fi
    barrier_unready 1
    stop_nfs_server || say "nfsd did not stop cleanly"
    wait_for 30 sh -c '! grep -q "^rpcrdma " /proc/modules || rmmod rpcrdma' ||
        fail server-c-rpcrdma-unload "refcount $(cat /sys/module/rpcrdma/refcnt 2>/dev/null)"

    # ---- phase 2: rpcrdma_rs as the server, from nfs.conf --------------
    nfsconf --set nfsd rdma y && nfsconf --set nfsd rdma-port "$NFS_RDMA_PORT"
    if start_nfs_server; then pass server-rust-nfsd-start; else fail server-rust-nfsd-start "$NFS_ERR"; fi
    if only_rust_loaded; then pass server-nfsd-autoloads-rpcrdma_rs
    else fail server-nfsd-autoloads-rpcrdma_rs "loaded: $(loaded)"; fi
    grep -q "^rdma $NFS_RDMA_PORT\$" /proc/fs/nfsd/portlist && pass server-rust-rdma-listener ||
        fail server-rust-rdma-listener "portlist: $(tr '\n' ' ' < /proc/fs/nfsd/portlist)"
    barrier_ready 2
    if barrier_wait_done 2; then pass server-phase2-client-done; else fail server-phase2-client-done "no client after 900s"; fi
    barrier_unready 2
    _acc=$(dmesg | grep -c 'svcrdma: accepted:')
    [ "$_acc" -ge 4 ] && pass server-rust-accepted-connections ||
        fail server-rust-accepted-connections "$_acc svcrdma accept lines (4 mounts)"
    check server-nfsd-stop stop_nfs_server
    unload_by_modprobe() { modprobe -r rpcrdma_rs 2>/dev/null; ! mod_loaded rpcrdma_rs; }
    if wait_for 30 unload_by_modprobe; then pass server-modprobe-r-unloads
    else fail server-modprobe-r-unloads "refcount $(cat /sys/module/rpcrdma_rs/refcnt 2>/dev/null)"; fi
else
    # ---- phase 1: the project's client against the stock C server ------
    barrier_wait_ready 1 || fail client-phase1-server-ready "server not ready after 600s"
    mount_data rust-client-c-server 4.2
    if only_rust_loaded; then pass client-mount-autoloads-rpcrdma_rs
    else fail client-mount-autoloads-rpcrdma_rs "loaded: $(loaded)"; fi
    mount_data rust-client-c-server 3
    barrier_done 1 || fail client-phase1-done "cannot reach the server's barrier"

    # ---- phase 2: against rpcrdma_rs as the server ---------------------
    barrier_wait_ready 2 || fail client-phase2-server-ready "server not ready after 600s"
    mount_data rust-client-rust-server 4.2
    mount_data rust-client-rust-server 3
    unload_by_modprobe() { modprobe -r rpcrdma_rs 2>/dev/null; ! mod_loaded rpcrdma_rs; }
    if wait_for 30 unload_by_modprobe; then pass client-modprobe-r-unloads
    else fail client-modprobe-r-unloads "refcount $(cat /sys/module/rpcrdma_rs/refcnt 2>/dev/null)"; fi
    # The stock C client against rpcrdma_rs as the server.
    if load_stock_c && only_c_loaded; then pass client-c-rpcrdma-loaded
    else fail client-c-rpcrdma-loaded "loaded: $(loaded)"; fi
    mount_data c-client-rust-server 4.2
    mount_data c-client-rust-server 3
    only_c_loaded || fail c-client-stayed-c "loaded: $(loaded)"
    wait_for 30 sh -c '! grep -q "^rpcrdma " /proc/modules || rmmod rpcrdma' ||
        fail client-c-rpcrdma-unload "refcount $(cat /sys/module/rpcrdma/refcnt 2>/dev/null)"
    barrier_done 2 || fail client-phase2-done "cannot reach the server's barrier"
fi
if ! mod_loaded rpcrdma_rs && ! mod_loaded rpcrdma; then pass nothing-left-loaded
else fail nothing-left-loaded "$(loaded)"; fi
echo /bin/true > /proc/sys/kernel/modprobe
