# shellcheck shell=sh
# drop-in: the project installed the way an administrator installs it and
# loaded only through the kernel's own module requests, as rpcrdma.ko is.
#
# The guest gets a module tree for its kernel (the in-tree modules of the
# cached build, rpcrdma.ko among them, in an overlay over the read-only
# /usr), `make install` puts rpcrdma_rs.ko under updates/ with the
# modprobe.d aliases and runs depmod, and modprobe works normally again
# (guest init points kernel.modprobe at /bin/true for every other scenario).
# Then:
#   1. a mount with proto=rdma, with no server yet, autoloads rpcrdma_rs
#      (sunrpc's request for "rpcrdma") with the options of a modprobe.d
#      file, and modprobe -r unloads it;
#   2. nfsd started from an nfs.conf with rdma=y and rdma-port=20049 opens
#      its RDMA listener through rpcrdma_rs (the request for "svcrdma");
#   3. an NFSv4.2 mount over it writes and reads back data;
#   4. after the umount and nfsd's stop, modprobe -r unloads it cleanly.
# The in-tree rpcrdma must never load.
# Arguments: [SIZE_MIB] (default 4)
SIZE=${1:-4}
MNT=/tmp/mnt
KREL=$(uname -r)
MODDIR=/lib/modules/$KREL

# only_rust_loaded: rpcrdma_rs is in /proc/modules and the C rpcrdma is not.
only_rust_loaded() { mod_loaded rpcrdma_rs && ! mod_loaded rpcrdma; }
neither_loaded() { ! mod_loaded rpcrdma_rs && ! mod_loaded rpcrdma; }

# The running kernel's module tree, as modules_install lays it out: /lib is
# /usr/lib here, and /usr is the host's, read-only: an overlay makes it
# writable for this boot.
module_tree() {
    mkdir -p /tmp/.usrovl/upper /tmp/.usrovl/work
    mount -t overlay usrovl -o lowerdir=/usr,upperdir=/tmp/.usrovl/upper,workdir=/tmp/.usrovl/work /usr ||
        { say "cannot put an overlay on /usr"; return 1; }
    mkdir -p "$MODDIR/kernel" || return 1
    : > "$MODDIR/modules.order"
    while read -r _o; do
        _ko=${_o%.o}.ko
        install -D -m 0644 "$KBUILD/$_ko" "$MODDIR/kernel/$_ko" || return 1
        echo "kernel/$_ko" >> "$MODDIR/modules.order"
    done < "$KBUILD/modules.order"
    cp "$KBUILD/modules.builtin" "$KBUILD/modules.builtin.modinfo" "$MODDIR/" || return 1
    depmod -a "$KREL"
}

dmesg -c >/dev/null 2>&1
neither_loaded || { unload_rust_rpcrdma; unload_c_rpcrdma; }
check module-tree module_tree || return 1
info "module tree: $(wc -l < "$MODDIR/modules.order") in-tree modules in $MODDIR"

# make install from the checkout (the module is already built: the host built it).
if _out=$(make -s -C "$REPO_ROOT" install KDIR="$KBUILD" 2>&1); then
    pass make-install
else
    fail make-install "$(echo "$_out" | tail -n 3 | tr '\n' ' ')"; return 1
fi
[ -z "$_out" ] || echo "$_out" | sed 's/^/vm:   install: /'
_path=$(modinfo -n rpcrdma_rs 2>&1)
case $_path in
    "$MODDIR/updates/rpcrdma_rs.ko") pass installed-under-updates ;;
    *) fail installed-under-updates "modinfo -n rpcrdma_rs: $_path" ;;
esac
# Every name sunrpc and rdma-core ask for resolves to rpcrdma_rs alone,
# although the in-tree rpcrdma.ko is in the same tree.
_bad=
for _a in rpcrdma rpcrdma6 xprtrdma svcrdma; do
    _r=$(modprobe -R "$_a" 2>&1 | tr '\n' ' ')
    info "modprobe -R $_a: $_r"
    [ "$_r" = "rpcrdma_rs " ] || _bad="$_bad $_a->$_r"
done
if [ -z "$_bad" ]; then pass aliases-resolve-to-rpcrdma_rs; else fail aliases-resolve-to-rpcrdma_rs "$_bad"; fi

# Parameters an administrator sets in modprobe.d apply to autoloads too.
echo "options rpcrdma_rs max_inline_write=8192" > /etc/modprobe.d/rpcrdma-rs-options.conf

# From here on the kernel's module requests go to the real modprobe.
echo /sbin/modprobe > /proc/sys/kernel/modprobe

# 1. The client's request: a mount with proto=rdma before any server is up.
# It fails (nothing listens) but has loaded the transport first.
mkdir -p $MNT
_out=$(timeout 120 mount -t nfs -o vers=4.2,proto=rdma,port=$NFS_RDMA_PORT,retry=0 "$SERVER_IP:/" $MNT 2>&1)
_rc=$?
info "mount with no server: rc=$_rc $(echo "$_out" | tail -n 1)"
[ $_rc = 0 ] && umount $MNT
if only_rust_loaded; then pass mount-autoloads-rpcrdma_rs
else fail mount-autoloads-rpcrdma_rs "loaded: $(grep -E '^rpcrdma(_rs)? ' /proc/modules | cut -d' ' -f1 | tr '\n' ' ')"; fi
_line=$(dmesg | grep -m1 'rpcrdma_rs .* loaded:')
say "$_line"
case $_line in
    *max_inline_write=8192*) pass modprobe-d-options-apply ;;
    *) fail modprobe-d-options-apply "load line: $_line" ;;
esac
_p=$(cat /sys/module/rpcrdma_rs/parameters/max_inline_write 2>&1)
[ "$_p" = 8192 ] && pass parameter-in-sysfs || fail parameter-in-sysfs "parameters/max_inline_write: $_p"
if _out=$(modprobe -r rpcrdma_rs 2>&1) && neither_loaded; then pass modprobe-r-after-client
else fail modprobe-r-after-client "$_out"; fi

# 2. The server's request: nfsd from nfs.conf with rdma=y.
nfsconf --set nfsd rdma y && nfsconf --set nfsd rdma-port "$NFS_RDMA_PORT" ||
    fail nfs-conf-rdma "nfsconf --set failed"
info "nfs.conf [nfsd]: rdma=$(nfsconf --get nfsd rdma) rdma-port=$(nfsconf --get nfsd rdma-port)"
if start_nfs_server; then pass nfs-server-start; else fail nfs-server-start "$NFS_ERR"; return 1; fi
if only_rust_loaded; then pass nfsd-autoloads-rpcrdma_rs
else fail nfsd-autoloads-rpcrdma_rs "loaded: $(grep -E '^rpcrdma(_rs)? ' /proc/modules | cut -d' ' -f1 | tr '\n' ' ')"; fi
if grep -q "^rdma $NFS_RDMA_PORT\$" /proc/fs/nfsd/portlist; then pass nfsd-rdma-listener
else fail nfsd-rdma-listener "portlist: $(tr '\n' ' ' < /proc/fs/nfsd/portlist)"; fi

# 3. Data over it.
if nfs_mount 4.2 "$SERVER_IP" $MNT; then
    pass nfs4.2-mount-rdma
    data_check "nfs4.2-data-${SIZE}M" $MNT "$SIZE"
    show_xprt
    _acc=$(dmesg | grep -c 'svcrdma: accepted:')
    if [ "$_acc" -ge 1 ]; then pass served-by-rpcrdma_rs; else fail served-by-rpcrdma_rs "no svcrdma accept line"; fi
    nfs_umount $MNT || fail nfs4.2-umount "umount $MNT"
else
    fail nfs4.2-mount-rdma "$NFS_ERR"
fi

# 4. Unload as an administrator would.
check nfs-server-stop stop_nfs_server
# (the listener and the last transports go away asynchronously)
unload_by_modprobe() { modprobe -r rpcrdma_rs 2>/dev/null; ! mod_loaded rpcrdma_rs; }
if wait_for 30 unload_by_modprobe; then
    pass modprobe-r-unloads
else
    fail modprobe-r-unloads "$(modprobe -r rpcrdma_rs 2>&1); refcount $(cat /sys/module/rpcrdma_rs/refcnt 2>/dev/null)"
fi
if neither_loaded; then pass nothing-left-loaded; else fail nothing-left-loaded "$(grep -E '^rpcrdma' /proc/modules)"; fi
echo /bin/true > /proc/sys/kernel/modprobe
