# shellcheck shell=sh
# rust-client-c-server: the project's client (rpcrdma_rs.ko) against the
# in-tree C server, across two VMs (scripts/vm --two-vm rust-client-c-server).
# Per NFS version: SIZE_MIB written and read back with a checksum (buffered
# and O_DIRECT), a directory of DIR_ENTRIES (5000) entries listed (Reply
# chunks; the server creates them locally, since 5000 creates over two TCG
# VMs take minutes with either client), a 4000-byte symlink target read
# back, CHURN (200) small files created, read and removed.
# Arguments: [SIZE_MIB] [VERSIONS, e.g. 4.2+3] [rpcrdma_rs params, ':'-separated, - for none,
#            c-client to run the in-tree C client instead, for comparison]
#            [DIR_ENTRIES] [CHURN]
SIZE=${1:-256}
ENTRIES=${4:-5000}
CHURN=${5:-200}
VERSIONS=$(echo "${2:-4.2+3}" | tr '+' ' ')
PARAMS=$(echo "${3:--}" | tr ':' ' ')
[ "$PARAMS" = - ] && PARAMS=
MNT=/tmp/mnt

run_server() {
    check load-c-rpcrdma load_c_rpcrdma || return 1
    mkdir -p "$EXPORT/dir$ENTRIES"
    (cd "$EXPORT/dir$ENTRIES" && i=0 && while [ $i -lt "$ENTRIES" ]; do
        : > entry-with-a-longish-name-$i; i=$((i + 1)); done)
    if start_nfs_server; then pass nfs-server-start; else fail nfs-server-start "$NFS_ERR"; return 1; fi
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

run_client() {
    if [ "$PARAMS" = c-client ]; then
        # Reference run: the in-tree C client with the same workload.
        check load-c-rpcrdma-client load_c_rpcrdma || return 1
    else
        check rpcrdma_rs-load load_rust_rpcrdma $PARAMS || return 1
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
                _s=fmr; case " $PARAMS " in *" memreg=physical "*) _s=physical ;; esac
                _f=/sys/kernel/debug/rpcrdma_rs/client_registration
                sed 's/^/vm:   /' $_f
                if awk -v s=$_s '$1 == s && $2 >= 1 { ok = 1 } END { exit !ok }' $_f; then
                    pass "nfs$v-memreg-$_s-in-debugfs"
                else
                    fail "nfs$v-memreg-$_s-in-debugfs" "no $_s transport in $_f"
                fi
            fi
            data_check "nfs$v-data-${SIZE}M" $MNT "$SIZE"
            direct_check "nfs$v-direct-${SIZE}M"
            tree_checks "$v"
            show_xprt
            nfs_umount $MNT || fail "nfs$v-umount" "umount $MNT"
        else
            fail "nfs$v-mount-rdma" "$NFS_ERR"
        fi
    done
}

case $ROLE in
    server)
        run_server && server_wait_client_done "${CLIENT_WAIT:-1500}"
        check nfs-server-stop stop_nfs_server
        ;;
    client)
        run_client
        client_signal_done || fail client-signal-done "$NFS_ERR"
        [ "$PARAMS" = c-client ] || check rpcrdma_rs-unload unload_rust_rpcrdma
        ;;
    single)
        fail rust-client-c-server "needs two VMs (scripts/vm --two-vm): the C and Rust modules both register the rdma transport"
        ;;
esac
