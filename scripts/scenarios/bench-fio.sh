# shellcheck shell=sh
# bench-fio: fio over NFSv4.2 proto=rdma between two VMs
# (scripts/vm --two-vm bench-fio CLIENT SERVER [CLIENT_PARAMS] [SERVER_PARAMS] [RUNTIME]).
# CLIENT and SERVER are "rust" (rpcrdma_rs.ko) or "c" (the in-tree rpcrdma.ko);
# params are ':'-separated module parameters, "-" for none. Jobs: 1 MiB
# sequential read and write (direct, iodepth 8) and 4 KiB random read
# (direct, iodepth 32), each with numjobs 1 and 4. One INFO line per job:
#   fio job=<name> MBps=<n> IOPS=<n>
# A benchmark, not a test: it passes when every job ran. scripts/bench-fio
# runs the combinations and prints the ratios.
CLIENT_MOD=${1:-rust}
SERVER_MOD=${2:-c}
CLIENT_PARAMS=$(echo "${3:--}" | tr ':' ' '); [ "$CLIENT_PARAMS" = - ] && CLIENT_PARAMS=
SERVER_PARAMS=$(echo "${4:--}" | tr ':' ' '); [ "$SERVER_PARAMS" = - ] && SERVER_PARAMS=
RUNTIME=${5:-10}
MNT=/tmp/mnt

load_side() {  # load_side rust|c [params]
    _m=$1; shift
    if [ "$_m" = rust ]; then load_rust_rpcrdma "$@"; else load_c_rpcrdma; fi
}

run_jobs() {
    _dir=$MNT/fio
    mkdir -p $_dir
    for spec in "seq-read-1m:read:1m:8" "seq-write-1m:write:1m:8" "rand-read-4k:randread:4k:32"; do
        _name=${spec%%:*}; _rest=${spec#*:}
        _rw=${_rest%%:*}; _rest=${_rest#*:}
        _bs=${_rest%%:*}; _qd=${_rest#*:}
        for nj in 1 4; do
            _out=$(fio --name="$_name" --directory=$_dir --rw="$_rw" --bs="$_bs" --iodepth="$_qd" \
                --numjobs="$nj" --size=64m --direct=1 --ioengine=libaio --thread --group_reporting \
                --time_based --runtime="$RUNTIME" --ramp_time=2 --output-format=terse --terse-version=3 2>&1)
            # terse v3: field 7 read KiB/s, 8 read IOPS, 48 write KiB/s, 49 write IOPS
            _l=$(echo "$_out" | grep '^3;' | tail -n 1)
            if [ -z "$_l" ]; then
                fail "fio-$_name-nj$nj" "$(echo "$_out" | tail -n 1)"; continue
            fi
            _kbs=$(echo "$_l" | awk -F';' -v w="$_rw" '{ print (w == "write") ? $48 : $7 }')
            _iops=$(echo "$_l" | awk -F';' -v w="$_rw" '{ print (w == "write") ? $49 : $8 }')
            info "fio job=$_name-nj$nj MBps=$(awk -v k="$_kbs" 'BEGIN { printf "%.1f", k / 1024 }') IOPS=$_iops"
            pass "fio-$_name-nj$nj"
        done
    done
    rm -rf $_dir
}

case $ROLE in
    server)
        check "load-$SERVER_MOD-server" load_side "$SERVER_MOD" $SERVER_PARAMS || return 1
        if start_nfs_server; then pass nfs-server-start; else fail nfs-server-start "$NFS_ERR"; return 1; fi
        server_wait_client_done "${CLIENT_WAIT:-1500}"
        # The registration cache's totals over the run (rpcrdma_rs server).
        _f=/sys/kernel/debug/rpcrdma_rs/svc_registration_cache
        if [ "$SERVER_MOD" = rust ] && [ -r $_f ]; then
            sed 's/^/vm:   regcache: /' $_f
            info "regcache $(awk 'NR == 1 { en = $2 } NR > 2 { h += $3; m += $4; r += $5; e += $7 }
                END { printf "enabled=%d hits=%d misses=%d registrations=%d evictions=%d hit_ratio=%.3f",
                      en, h, m, r, e, (h + m > 0) ? h / (h + m) : 0 }' $_f)"
        fi
        check nfs-server-stop stop_nfs_server
        ;;
    client)
        check "load-$CLIENT_MOD-client" load_side "$CLIENT_MOD" $CLIENT_PARAMS || return 1
        if nfs_mount 4.2 "$SERVER_IP" $MNT "rsize=1048576,wsize=1048576"; then
            pass nfs4.2-mount-rdma
            grep " $MNT " /proc/mounts | sed 's/^/vm:   /'
            run_jobs
            show_xprt
            nfs_umount $MNT
        else
            fail nfs4.2-mount-rdma "$NFS_ERR"
        fi
        client_signal_done || fail client-signal-done "$NFS_ERR"
        ;;
    single)
        fail bench-fio "needs two VMs: scripts/vm --two-vm bench-fio ..."
        ;;
esac
