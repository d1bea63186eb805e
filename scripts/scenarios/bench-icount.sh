# shellcheck shell=sh
# bench-icount: the CPU cost of NFS/RDMA, client and server in one guest
# (scripts/vm --icount bench-icount CONFIGS REPS SIZE_MIB PROFILE [ALT_KO]).
#
# Under -icount shift=0,sleep=off guest time is instructions executed (one
# nanosecond each), so the MB/s fio reports measures instructions per byte of
# the whole stack, not the host's load: repetitions agree within a few
# percent where two-VM runs under TCG spread by 15%.
#
# CONFIGS: '+' between names, each one of
#   c             the in-tree C rpcrdma.ko on both ends
#   rust          rpcrdma_rs.ko on both ends, default parameters (memreg=fmr,
#                 the server's registration cache on)
#   rust-physical rpcrdma_rs.ko, memreg=physical
#   rust-cache    rpcrdma_rs.ko, memreg=cache (the client's registration
#                 cache, default cache_max_mb)
#   rust-nocache  rpcrdma_rs.ko, svc_buf_cache=0 (the server's buffer cache
#                 off; the client as in rust: nothing to do with rust-cache)
#   rust-svccopy  rpcrdma_rs.ko, svc_memreg=cache (the server copies Write
#                 chunks into cached buffers instead of sending them from
#                 the Reply's pages, the default)
#   rust-physical-64k  rpcrdma_rs.ko, memreg=physical with 64 KiB inline
#                 thresholds on both ends and nfsd's largest I/O raised to
#                 1 MiB (/proc/fs/nfsd/max_block_size; every other config
#                 runs with the guest's default): physical at full size
#   rust-inline8k rpcrdma_rs.ko, max_inline_read=8192: the client takes
#                 replies of up to 8 KiB inline and the server sends them
#                 (a 4 KiB READ's reply needs no Write chunk)
#   c-inline8k    the C rpcrdma.ko with the same thresholds
#                 (sunrpc.rdma_max_inline_read and svc_rdma.max_req_size
#                 8192), to compare rust-inline8k with
#   alt           ALT_KO on both ends, default parameters (another build of
#                 the project, for before/after comparisons in one boot)
#   alt-cache     ALT_KO with memreg=cache, to compare rust-cache with
# REPS: repetitions, interleaved (every config once, then again).
# SIZE_MIB[:RAND_MIB]: bytes of each 1 MiB job (and the file's size); the
# 4 KiB random read reads RAND_MIB, by default an eighth of SIZE_MIB (a
# longer random read resolves smaller differences: fio's runtime is whole
# milliseconds).
# PROFILE: 1 runs the jobs once more per config under
#   perf record -e cpu-clock (guest time, i.e. instructions), sampling only
#   while fio moves data, and splits the sampled time by where it lands: one
#   profile of the 1 MiB write and read together ("1m"), one of the 4 KiB
#   random read ("4k"). The kernel samples are resolved against a copy of
#   /proc/kallsyms (scripts/guest/perf-categorise.py), not by perf.
#   2 runs the idle probe first (each job plain with /proc counters around
#   it, then under perf record --switch-events; the raw dumps go to the
#   results directory as idle-CFG-JOB.*, for scripts/bench-idle/*.py);
#   3 runs both the idle probe and the profile.
#   4 (a bit: 5 adds it to the profile, 7 to both) counts each job's slab
#   allocations per I/O by the function that made them (kmem tracepoints).
#   8 (a bit, with 1: 9) records the profiles with call chains (perf record
#   -g): icount-incl lines say what the transport module's frames cause,
#   callees included, by category, and calls-CFG-PROF.txt in the results
#   directory lists each transport function's inclusive instructions per
#   MiB and the callers of the copy functions.
#   16 (a bit, with 1: 17) counts the kernel's instructions exactly around
#   each profile's jobs (the kcount QEMU plugin that scripts/bench-icount
#   loads for this bit; scripts/icount-plugin/kcount.c): icount-kcount
#   lines give each category's instructions per I/O, icount-kfunc lines the
#   transport's costliest functions, and kfuncs-CFG-PROF.txt in the results
#   directory every function's, kips-CFG-PROF.txt the transport's by
#   instruction (scripts/guest/kcount-diff.py).
#
# One INFO line per config and repetition, the mount's sizes:
#   icount-mount cfg=<c> rep=<n> rsize=<n> wsize=<n>
# One INFO line per job and repetition:
#   icount cfg=<c> rep=<n> job=<j> MBps=<n> IOPS=<n> idle_pct=<n> ms=<n>
# and, when rpcrdma_rs is the module (every config but c), the client's
# registration work during the job, from debugfs before and after it:
#   icount-regs cfg=<c> rep=<n> job=<j> ios=<n> reg_mrs=<n> local_invs=<n>
#     remote_invs=<n> cache_hits=<n> cache_misses=<n>
#   ios: the job's I/Os (fio's KiB moved / block size: every I/O is whole);
#   reg_mrs: REG_MRs, i.e. client_registration's "registrations" of the fmr
#     and cache rows (ranges mapped into pool MRs: each is at least one MR,
#     so a lower bound when a range needs several) plus client_cache's
#     "registrations" (one REG_MR per cache entry). memreg=physical posts
#     none: its row (DMA mappings) is left out;
#   local_invs: LOCAL_INVs, i.e. "invalidations" and "batched_invalidations"
#     of those rows plus client_cache's "invalidations";
#   remote_invs: the server's Send With Invalidate (those rows and
#     client_cache's), which need no LOCAL_INV;
#   cache_hits, cache_misses: client_cache's page runs looked up (the
#     module is loaded anew for each config and repetition, so every
#     repetition starts with an empty cache: there is no warm-up run);
#   svc_regs: the server's REG_MRs of RDMA Read sinks, i.e.
#     svc_registration_cache's "registrations" (every class) plus
#     svc_memreg's "registered_reads" (Reads into pages through the
#     connection's MR pool: iWARP);
#   svc_hits, svc_misses: svc_registration_cache's "hits" and "misses"
#     (every class: Send, Write and Read buffers);
# and for every config the RDMA device's packets during the job, per fio
# I/O (hw_counters of rxe or siw, every device summed; client and server
# share the guest, so each packet is counted sent once and received once):
#   icount-wire cfg=<c> rep=<n> job=<j> ios=<n> sent_pkts_per_io=<n>
#     rcvd_pkts_per_io=<n> rdma_sends_per_io=<n> rdma_recvs_per_io=<n>
#     ctxt_per_io=<n> (the guest's context switches, /proc/stat "ctxt")
# and with PROFILE 1 or 3, per config, profile (1m, 4k) and category, then
# the profile's coverage (the non-idle time sampled, against the time fio
# measured for its jobs):
#   icount-profile cfg=<c> prof=<p> cat=<category> ns=<n> pct=<n> kinstr_per_MiB=<n>
#   icount-profile-coverage cfg=<c> prof=<p> busy_sampled_ms=<n> fio_ms=<n>
# A benchmark, not a test: it passes when every job ran; scripts/bench-icount
# prints the medians and spreads.
CONFIGS=$(echo "${1:-c+rust}" | tr '+' ' ')
REPS=${2:-3}
SIZE=${3:-64}
case $SIZE in
    *:*) RAND_KIB=$(( ${SIZE#*:} * 1024 )); SIZE=${SIZE%%:*} ;;
    *) RAND_KIB=$((SIZE * 128)) ;;
esac
PROFILE=${4:-0}
ALT_KO=${5:-}
# The jobs, NAME:RW:BS:IODEPTH:IO_SIZE, writing first (the reads read its
# file; the 4 KiB random write writes into it after them). meta-getattr is
# no fio job: fstat() of META_FILES small files in turn, each opened once
# with O_PATH (a lookup, no OPEN: no delegation), on a second mount of the
# export with actimeo=0 (and nosharecache: its own superblock), so that
# every fstat() is one GETATTR, an RPC that carries no data (the RPCs per
# fstat() are counted, icount-meta; stat() by path sent 1 to 3: the
# lookup's revalidation); IO_SIZE is the number of fstat() calls
# (META_OPS), its "I/O" one fstat().
META_OPS=${META_OPS:-4096}
META_FILES=4
# The 4 KiB jobs once more one I/O at a time (-qd1), over a quarter as
# much: with 32 in flight the server's queue rarely empties, so what a
# transport costs when each Call finds its threads idle (a wakeup per
# Call, XPT_DATA cleared or left set) shows only here.
QD1_KIB=$((RAND_KIB / 4))
JOBS="seq-write-1m:write:1m:8:${SIZE}m seq-read-1m:read:1m:8:${SIZE}m rand-read-4k:randread:4k:32:${RAND_KIB}k rand-write-4k:randwrite:4k:32:${RAND_KIB}k rand-read-4k-qd1:randread:4k:1:${QD1_KIB}k rand-write-4k-qd1:randwrite:4k:1:${QD1_KIB}k meta-getattr:meta:1:1:$META_OPS"
MNT=/tmp/mnt
META_MNT=/tmp/mnt-meta
FILE=$MNT/bench.dat
# perf samples per second of guest time (a sample weighs its period in ns,
# i.e. instructions).
FREQ=10000

# use_config NAME: the module of NAME serves and mounts $MNT. nfsd is
# restarted around the swap: its RDMA listeners (IPv4 and IPv6) hold the
# module.
use_config() {
    NFS_ERR=
    mountpoint -q $META_MNT && { nfs_umount $META_MNT || return 1; }
    mountpoint -q $MNT && { nfs_umount $MNT || return 1; }
    pidof rpc.mountd >/dev/null && { stop_nfs_server || { NFS_ERR="nfsd did not stop"; return 1; }; }
    case $1 in
        c) load_c_rpcrdma && c_inline_read 4096 ;;
        c-inline8k) load_c_rpcrdma && c_inline_read 8192 ;;
        rust) load_rust_rpcrdma ;;
        rust-physical) load_rust_rpcrdma memreg=physical ;;
        rust-cache) load_rust_rpcrdma memreg=cache ;;
        rust-nocache) load_rust_rpcrdma svc_buf_cache=0 ;;
        rust-svccopy) load_rust_rpcrdma svc_memreg=cache ;;
        rust-physical-64k) load_rust_rpcrdma memreg=physical max_inline_read=65536 max_inline_write=65536 ;;
        rust-inline8k) load_rust_rpcrdma max_inline_read=8192 ;;
        alt|alt-cache) [ -f "$ALT_KO" ] || { say "no ALT_KO"; return 1; }
             _ko=$RUST_RPCRDMA_KO; RUST_RPCRDMA_KO=$ALT_KO
             if [ "$1" = alt-cache ]; then load_rust_rpcrdma memreg=cache; else load_rust_rpcrdma; fi
             _lrc=$?; RUST_RPCRDMA_KO=$_ko; [ $_lrc = 0 ] ;;
        *) say "unknown config $1"; return 1 ;;
    esac || { NFS_ERR="module load for $1"; return 1; }
    case $1 in
        rust-physical-64k) nfsd_max_block 1048576 ;;
        *) nfsd_max_block ;;
    esac || { NFS_ERR="cannot set nfsd's max_block_size"; return 1; }
    start_nfs_server || return 1
    nfs_mount 4.2 "$SERVER_IP" $MNT "rsize=1048576,wsize=1048576"
}

# c_inline_read BYTES: the C module's client takes replies of up to BYTES
# inline and its server sends them (its sysctls outlive a config: the C
# module stays loaded between c and c-inline8k).
c_inline_read() {
    echo "$1" > /proc/sys/sunrpc/rdma_max_inline_read &&
        echo "$1" > /proc/sys/sunrpc/svc_rdma/max_req_size
}

# nfsd_max_block [BYTES]: nfsd's largest I/O for the next start: BYTES, or
# the guest's default. The setting outlives nfsd's restarts, so every config
# sets it. It reads 0 until nfsd first starts and works out its default from
# the guest's memory (writing 0 would make it 1 KiB): the default is taken
# then, with a start and stop of nfsd first if a config asks for BYTES
# before that.
NFSD_BLOCK_DEFAULT=
nfsd_max_block() {
    mountpoint -q /proc/fs/nfsd || mount -t nfsd nfsd /proc/fs/nfsd || return 1
    if [ -z "$NFSD_BLOCK_DEFAULT" ]; then
        _cur=$(cat /proc/fs/nfsd/max_block_size)
        if [ "$_cur" = 0 ]; then
            [ -n "${1:-}" ] || return 0
            { start_nfs_server && stop_nfs_server; } || return 1
            _cur=$(cat /proc/fs/nfsd/max_block_size)
        fi
        NFSD_BLOCK_DEFAULT=$_cur
    fi
    echo "${1:-$NFSD_BLOCK_DEFAULT}" > /proc/fs/nfsd/max_block_size
}

# mount_sizes: "rsize=N wsize=N" of the mount on $MNT.
mount_sizes() {
    awk -v m="$MNT" '$2 == m { n = split($4, o, ","); for (i = 1; i <= n; i++) if (o[i] ~ /^[rw]size=/) printf "%s ", o[i] }' /proc/mounts
}

# fio_job NAME RW BS IODEPTH IO_SIZE [fio options...]: one fixed-size
# direct-I/O job on $FILE; prints "MBps IOPS idle% ios ms" (ios: KiB moved
# over the block size in KiB, BS being Nk or Nm). idle%: the CPU's
# idle share during the job from /proc/stat. Recorded, not trusted: under
# -icount it ranged from 45% to 97% between runs whose MB/s agreed to the
# decimal (Documentation/performance.md).
fio_job() {
    [ "$2" = meta ] && { meta_job "$@"; return; }
    _n=$1 _rw=$2 _bs=$3 _qd=$4 _io=$5; shift 5
    case $_bs in *k) _bk=${_bs%k} ;; *m) _bk=$(( ${_bs%m} * 1024 )) ;; *) say "fio $_n: bs $_bs"; return 1 ;; esac
    _s0=$(head -n 1 /proc/stat)
    _out=$(fio --name="$_n" --filename=$FILE --rw="$_rw" --bs="$_bs" --iodepth="$_qd" \
        --size="${SIZE}m" --io_size="$_io" --direct=1 --ioengine=libaio --thread \
        --output-format=terse --terse-version=3 "$@" 2>&1)
    _s1=$(head -n 1 /proc/stat)
    _l=$(echo "$_out" | grep '^3;' | tail -n 1)
    [ -n "$_l" ] || { say "fio $_n: $(echo "$_out" | tail -n 2 | tr '\n' ' ')"; return 1; }
    _idle=$(printf '%s\n%s\n' "$_s0" "$_s1" | awk '{ t = 0; for (i = 2; i <= NF; i++) t += $i; tot[NR] = t; idl[NR] = $5 + $6 }
        END { d = tot[2] - tot[1]; printf "%.1f", (d > 0 ? 100 * (idl[2] - idl[1]) / d : 0) }')
    # terse v3: field 6 read KiB, 7 read KiB/s, 8 read IOPS, 9 read runtime
    # (ms); 47 write KiB, 48 write KiB/s, 49 write IOPS, 50 write runtime (ms)
    echo "$_l" | awk -F';' -v w="$_rw" -v idle="$_idle" -v bk="$_bk" '{ wr = (w ~ /write/); k = wr ? $48 : $7; i = wr ? $49 : $8;
        ms = wr ? $50 : $9; kb = wr ? $47 : $6
        printf "%.1f %d %s %d %d\n", k / 1024, i, idle, kb / bk, ms }'
}

# mount_rpcs MNT: the RPCs the mount on MNT has sent so far (the ops of
# every procedure in its /proc/self/mountstats section).
mount_rpcs() {
    awk -v m="$1" '$1 == "device" { on = ($5 == m) } on && $1 ~ /^[A-Z_0-9]+:$/ && $2 ~ /^[0-9]+$/ { s += $2 }
        END { print s + 0 }' /proc/self/mountstats
}

# meta_job NAME meta - - OPS [kcount=BEGIN,END]: fstat() of $META_FILES
# files in turn on $META_MNT (mounted here with actimeo=0 when it is not),
# OPS calls; prints fio_job's "MBps IOPS idle% ios ms" (MBps 0, IOPS the
# fstat() calls per second of guest time, ms rounded up) and the RPCs per
# fstat() after them. With kcount=BEGIN,END the loop asks the kcount plugin
# for its snapshots itself, right before and after it.
meta_job() {
    _n=$1 _ops=$5 _kc=
    case ${6:-} in kcount=*) _kc=${6#kcount=} ;; esac
    if ! mountpoint -q $META_MNT; then
        nfs_mount 4.2 "$SERVER_IP" $META_MNT "actimeo=0,nosharecache" >&2 || { say "meta: $NFS_ERR"; return 1; }
    fi
    _i=0 _made=
    while [ $_i -lt $META_FILES ]; do
        [ -e $META_MNT/meta-$_i ] || { : > $META_MNT/meta-$_i && _made=1; } || return 1
        _i=$((_i + 1))
    done
    # A file this client just created may come with a delegation, under
    # which fstat() sends no GETATTR whatever actimeo says: the unmount
    # returns it, and the loop runs on a fresh mount.
    if [ -n "$_made" ]; then
        umount $META_MNT || return 1
        nfs_mount 4.2 "$SERVER_IP" $META_MNT "actimeo=0,nosharecache" >&2 || { say "meta: $NFS_ERR"; return 1; }
    fi
    _g0=$(mount_rpcs $META_MNT) _s0=$(head -n 1 /proc/stat)
    _ns=$(python3 - "$META_MNT" "$META_FILES" "$_ops" "$RESULTS" "$_kc" <<'PY'
import os, sys, time
mnt, nfiles, ops, results, kc = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
fds = [os.open(f"{mnt}/meta-{i}", os.O_PATH) for i in range(nfiles)]
def snap(name):
    # the plugin's trigger (kcount_stages.py): a snapshot there and then
    with open(f"{results}/kcount-next", "w") as f:
        f.write(name + "\n")
    with open("/proc/sys/kernel/tainted", "w") as f:
        f.write("0")
kc = kc.split(',') if kc else None
if kc:
    snap(kc[0])
t0 = time.monotonic_ns()
for i in range(ops):
    os.fstat(fds[i % nfiles])
t1 = time.monotonic_ns()
if kc:
    snap(kc[1])
print(t1 - t0)
PY
) || return 1
    _s1=$(head -n 1 /proc/stat) _g1=$(mount_rpcs $META_MNT)
    _idle=$(printf '%s\n%s\n' "$_s0" "$_s1" | awk '{ t = 0; for (i = 2; i <= NF; i++) t += $i; tot[NR] = t; idl[NR] = $5 + $6 }
        END { d = tot[2] - tot[1]; printf "%.1f", (d > 0 ? 100 * (idl[2] - idl[1]) / d : 0) }')
    awk -v ns="$_ns" -v ops="$_ops" -v idle="$_idle" -v g="$((_g1 - _g0))" \
        'BEGIN { printf "0.0 %d %s %d %d %.2f\n", ops * 1e9 / ns, idle, ops, int((ns + 999999) / 1e6), g / ops }'
}

# reg_counters: the client's registration counters so far, from debugfs:
# "REG_MRs LOCAL_INVs remote_invalidations cache_hits cache_misses", then
# the server's "Read_sink_REG_MRs cache_hits cache_misses" (what each sums:
# the header). Nothing when rpcrdma_rs is not loaded; a column or file an
# older build (alt) lacks counts 0.
REG_F=/sys/kernel/debug/rpcrdma_rs/client_registration
CACHE_F=/sys/kernel/debug/rpcrdma_rs/client_cache
SVC_CACHE_F=/sys/kernel/debug/rpcrdma_rs/svc_registration_cache
SVC_MEMREG_F=/sys/kernel/debug/rpcrdma_rs/svc_memreg
reg_counters() {
    [ -r $REG_F ] || return 0
    _files=$REG_F
    for _f in $CACHE_F $SVC_CACHE_F $SVC_MEMREG_F; do [ -r $_f ] && _files="$_files $_f"; done
    awk 'function v(name) { return (name in col) ? $col[name] + 0 : 0 }
        # svc_registration_cache: its first line is the settings, the
        # second the header.
        FILENAME ~ /svc_registration_cache$/ && FNR == 1 { next }
        FILENAME ~ /svc_registration_cache$/ && FNR == 2 { split("", col); for (i = 1; i <= NF; i++) col[$i] = i; next }
        FILENAME ~ /svc_registration_cache$/ { sreg += v("registrations"); shit += v("hits"); smiss += v("misses"); next }
        FNR == 1 { split("", col); for (i = 1; i <= NF; i++) col[$i] = i; next }
        FILENAME ~ /client_registration$/ && ($1 == "fmr" || $1 == "cache") {
            reg += v("registrations"); inv += v("invalidations") + v("batched_invalidations")
            rinv += v("remote_invalidations") }
        FILENAME ~ /client_cache$/ {
            reg += v("registrations"); inv += v("invalidations"); rinv += v("remote_invalidations")
            hits += v("hits"); miss += v("misses") }
        FILENAME ~ /svc_memreg$/ { sreg += v("registered_reads") }
        END { printf "%d %d %d %d %d %d %d %d\n", reg, inv, rinv, hits, miss, sreg, shit, smiss }' $_files
}

# wire_counters: the RDMA device's packet counters so far, summed over every
# device in the guest (rxe or siw: whichever carries the mount), from
# hw_counters, and the guest's context switches (/proc/stat "ctxt"):
# "sent_pkts rcvd_pkts rdma_sends rdma_recvs ctxt". Nothing when the device
# keeps no such counters.
wire_counters() {
    _hw=$(ls -d /sys/class/infiniband/*/ports/*/hw_counters 2>/dev/null)
    [ -n "$_hw" ] || return 0
    {
        for _d in $_hw; do
            for _n in sent_pkts rcvd_pkts rdma_sends rdma_recvs; do
                printf '%s %s\n' "$_n" "$(cat "$_d/$_n" 2>/dev/null || echo 0)"
            done
        done
        grep '^ctxt ' /proc/stat
    } | awk '{ c[$1] += $2 } END { printf "%d %d %d %d %d\n", c["sent_pkts"], c["rcvd_pkts"], c["rdma_sends"], c["rdma_recvs"], c["ctxt"] }'
}

# deltas BEFORE AFTER DIV FMT NAMES: two snapshots of whitespace-separated
# counters, as "NAME=VALUE" for each column in turn, VALUE being (after -
# before) / DIV printed with the printf format FMT.
deltas() {
    printf '%s\n%s\n' "$1" "$2" | awk -v div="$3" -v fmt="$4" -v names="$5" '
        { for (i = 1; i <= NF; i++) c[NR, i] = $i }
        END { n = split(names, k, " ")
            for (i = 1; i <= n; i++) printf "%s%s=" fmt, (i > 1 ? " " : ""), k[i], (c[2, i] - c[1, i]) / div }'
}

# run_jobs CFG REP: the three jobs, writing first (the reads read its file).
run_jobs() {
    for _spec in $JOBS; do
        IFS=: read -r _j _rw _bs _qd _io <<EOF
$_spec
EOF
        _c0=$(reg_counters) _w0=$(wire_counters)
        if _res=$(fio_job "$_j" "$_rw" "$_bs" "$_qd" "$_io"); then
            _c1=$(reg_counters) _w1=$(wire_counters)
            set -- "$1" "$2" $_res
            info "icount cfg=$1 rep=$2 job=$_j MBps=$3 IOPS=$4 idle_pct=$5 ms=$7"
            [ "$_rw" = meta ] && info "icount-meta cfg=$1 rep=$2 job=$_j ops=$6 rpcs_per_op=$8"
            if [ -n "$_w0" ] && [ -n "$_w1" ] && [ "$6" -gt 0 ]; then
                info "icount-wire cfg=$1 rep=$2 job=$_j ios=$6 $(deltas "$_w0" "$_w1" "$6" %.2f \
                    'sent_pkts_per_io rcvd_pkts_per_io rdma_sends_per_io rdma_recvs_per_io ctxt_per_io')"
            fi
            if [ -n "$_c0" ] && [ -n "$_c1" ]; then
                info "icount-regs cfg=$1 rep=$2 job=$_j ios=$6 $(deltas "$_c0" "$_c1" 1 %d \
                    'reg_mrs local_invs remote_invs cache_hits cache_misses svc_regs svc_hits svc_misses')"
            fi
            set -- "$1" "$2"
        else
            fail "fio-$1-$_j-rep$2" "fio failed"; return 1
        fi
    done
}

# kcount_snap NAME: the kcount plugin's snapshot of the kernel's
# instruction counts, as $RESULTS/kcount-NAME.txt; waits for it (the
# plugin's thread on the host polls for the request every 20 ms).
kcount_snap() {
    rm -f "$RESULTS/kcount-$1.done" "$RESULTS/kcount-$1.txt"
    : > "$RESULTS/kcount-$1.req"
    _w=0
    while [ ! -e "$RESULTS/kcount-$1.done" ]; do
        _w=$((_w + 1))
        [ $_w -gt 3000 ] && { say "kcount: no snapshot $1 (is the plugin loaded?)"; return 1; }
        sleep 0.1
    done
}

# kcount_stages CFG: gives the kcount plugin the stages' entry points of
# the modules loaded now (scripts/guest/kcount_stages.py, from
# /proc/kallsyms; the table replaces the previous one) and waits for it.
kcount_stages() {
    _t=$RESULTS/kcount-stages-$1
    rm -f "$_t.done"
    python3 "$REPO_ROOT/scripts/guest/kcount_stages.py" /proc/kallsyms > "$_t.tmp" 2> "$RESULTS/kstage-entries-$1.txt" ||
        return 1
    mv "$_t.tmp" "$_t.req"
    _w=0
    while [ ! -e "$_t.done" ]; do
        _w=$((_w + 1))
        [ $_w -gt 3000 ] && { say "kcount: stage table not taken (is the plugin loaded?)"; return 1; }
        sleep 0.1
    done
    rm -f "$_t.done"
}

# kcount_jobs CFG: every job once more, each between two kcount snapshots
# that fio's own thread asks for right before its I/O loop and after it
# (--exec_prerun/--exec_postrun; meta-getattr's loop asks itself): the
# name goes to kcount-next, then a write to /proc/sys/kernel/tainted runs
# the plugin's trigger, which takes the snapshot there and then, in the
# vCPU thread (kcount.c). Inside the window: the prerun shell's exit and
# the postrun shell's fork and exec (fio's system()), a fixed cost of a
# few hundred thousand instructions per job (the "; true": fio appends
# a redirection of its own to the command, perf_jobs). With
# the stage table of CFG's modules loaded: the kernel's instructions per
# I/O by category (icount-kcount) and by stage (icount-kstage, see
# scripts/guest/kcount-diff.py), and per job
#   icount-kjob cfg=<c> job=<j> ios=<n> IOPS=<n> ms=<n> [rpcs_per_op=<n>]
# (the whole guest's instructions per I/O of this run: 1e9 / IOPS; the
# RPCs per fstat() of meta-getattr).
# kfuncs-, kips- and kstages-CFG-JOB.txt go to the results directory.
kcount_jobs() {
    _cfg=$1
    kcount_stages "$_cfg" || { fail "kcount-$_cfg" "no stage table"; return 1; }
    cp /proc/kallsyms "/tmp/kallsyms-$_cfg"
    # The window's own cost: a begin and an end snapshot taken as fio's
    # prerun and postrun take them (a shell each), with no job between:
    #   icount-kcal cfg=<c> kernel_instr=<n>
    rm -f "$RESULTS/kcount-$_cfg-cal-"*
    sh -c "echo $_cfg-cal-begin > $RESULTS/kcount-next && echo 0 > /proc/sys/kernel/tainted; true"
    sh -c "echo $_cfg-cal-end > $RESULTS/kcount-next && echo 0 > /proc/sys/kernel/tainted; true"
    if [ -f "$RESULTS/kcount-$_cfg-cal-end.txt" ]; then
        info "icount-kcal cfg=$_cfg kernel_instr=$(awk 'NF == 2 { s[FILENAME] += $2 } END { printf "%.0f", s[ARGV[2]] - s[ARGV[1]] }' \
            "$RESULTS/kcount-$_cfg-cal-begin.txt" "$RESULTS/kcount-$_cfg-cal-end.txt")"
    fi
    rm -f "$RESULTS/kcount-$_cfg-cal-"*
    _ok=1
    for _spec in $JOBS; do
        IFS=: read -r _j _rw _bs _qd _io <<SPEC
$_spec
SPEC
        _b=$_cfg-$_j-begin _e=$_cfg-$_j-end
        rm -f "$RESULTS/kcount-$_b."* "$RESULTS/kcount-$_e."*
        if [ "$_rw" = meta ]; then
            _res=$(meta_job "$_j" "$_rw" "$_bs" "$_qd" "$_io" "kcount=$_b,$_e")
        else
            _res=$(cd /tmp && fio_job "$_j" "$_rw" "$_bs" "$_qd" "$_io" \
                "--exec_prerun=echo $_b > $RESULTS/kcount-next && echo 0 > /proc/sys/kernel/tainted; true" \
                "--exec_postrun=echo $_e > $RESULTS/kcount-next && echo 0 > /proc/sys/kernel/tainted; true")
        fi
        rm -f "/tmp/$_j.prerun.txt" "/tmp/$_j.postrun.txt"
        if [ -z "$_res" ] || [ ! -f "$RESULTS/kcount-$_e.txt" ]; then
            fail "kcount-$_cfg-$_j" "job or snapshot failed"; _ok=0; continue
        fi
        read -r _mbps _iops _idle _ios _ms _rest <<RES
$_res
RES
        case $_bs in
            *k) _kib=$((_ios * ${_bs%k})) ;;
            *m) _kib=$((_ios * ${_bs%m} * 1024)) ;;
            *) _kib=0 ;;
        esac
        info "icount-kjob cfg=$_cfg job=$_j ios=$_ios IOPS=$_iops ms=$_ms${_rest:+ rpcs_per_op=$_rest}"
        if python3 "$REPO_ROOT/scripts/guest/kcount-diff.py" "/tmp/kallsyms-$_cfg" \
            "$RESULTS/kcount-$_b.txt" "$RESULTS/kcount-$_e.txt" "$_cfg" "$_j" "$_ios" "$_kib" \
            "$RESULTS/kfuncs-$_cfg-$_j.txt" "$RESULTS/kips-$_cfg-$_j.txt" \
            "$RESULTS/kstages-$_cfg-$_j.txt" > "/tmp/kcount-$_cfg-$_j.txt" 2>"/tmp/kcount-$_cfg-$_j.err"; then
            while read -r _l; do info "$_l"; done < "/tmp/kcount-$_cfg-$_j.txt"
        else
            fail "kcount-$_cfg-$_j" "kcount-diff: $(tail -n 1 "/tmp/kcount-$_cfg-$_j.err")"; _ok=0
        fi
        rm -f "$RESULTS/kcount-$_b."* "$RESULTS/kcount-$_e."*
        for _f in "$RESULTS/kfuncs-$_cfg-$_j.txt" "$RESULTS/kips-$_cfg-$_j.txt" "$RESULTS/kstages-$_cfg-$_j.txt"; do
            [ -f "$_f" ] && command -v c++filt >/dev/null && c++filt < "$_f" > /tmp/kfuncs.txt &&
                cp /tmp/kfuncs.txt "$_f"
        done
    done
    rm -f "/tmp/kallsyms-$_cfg"
    [ $_ok = 1 ] && pass "kcount-$_cfg"
}

# perf_jobs CFG PROF JOB:RW:BS:IODEPTH:IO_SIZE...: the jobs once more, in
# order, under one perf record -e cpu-clock that samples only while fio moves
# data; reports profile PROF (icount-profile lines; per MiB: what these jobs
# moved). Its log and the split by symbol go to the results directory
# (perf-CFG-PROF.log, syms-CFG-PROF.txt).
perf_jobs() {
    _cfg=$1 _prof=$2; shift 2
    _ctl=/tmp/perf-$_cfg-$_prof.ctl _ack=/tmp/perf-$_cfg-$_prof.ack
    _data=/tmp/perf-$_cfg-$_prof.data _log=$RESULTS/perf-$_cfg-$_prof.log
    rm -f "$_ctl" "$_ack"; mkfifo "$_ctl" "$_ack"
    : > "$_log"
    _g=; [ $((PROFILE & 8)) != 0 ] && _g=-g
    perf record -a $_g -e cpu-clock -F $FREQ -D -1 --control "fifo:$_ctl,$_ack" -o "$_data" -- sleep 100000 \
        >>"$_log" 2>&1 &
    _perf=$!
    # perf's start-up (reading every task and the symbols) takes a while
    # under -icount, more than 2 s of guest time for the first perf of a
    # boot: the jobs start when it answers (an "enable" sent earlier was
    # carried out late, and the profile missed 40% of the write).
    if ! timeout 300 sh -c 'echo ping > "$1" && head -n 1 "$2"' sh "$_ctl" "$_ack" >> "$_log" 2>&1; then
        kill -INT $_perf 2>/dev/null; wait $_perf
        fail "profile-$_cfg-$_prof" "perf record did not start ($(tail -n 1 "$_log"))"; return 1
    fi
    # Sampling only while the jobs move data: fio's own thread turns it on
    # just before its I/O loop and off after it (fio's start-up, its 100 ms
    # start-up poll and its exit are left out), and waits for perf's ack.
    # fio appends "> <job>.prerun.txt 2>&1" (in its working directory, /tmp)
    # to the command: it applies to head, which gets the ack.
    _on="--exec_prerun=echo enable > $_ctl; head -n 1 $_ack"
    _off="--exec_postrun=echo disable > $_ctl; head -n 1 $_ack"
    _ok=1 _fio_ms=0 _kib=0 _nios=0 _kc=0
    [ $((PROFILE & 16)) != 0 ] && kcount_snap "$_cfg-$_prof-begin" && _kc=1
    for _spec in "$@"; do
        IFS=: read -r _j _rw _bs _qd _io <<SPEC
$_spec
SPEC
        if _res=$(cd /tmp && fio_job "$_j" "$_rw" "$_bs" "$_qd" "$_io" "$_on" "$_off"); then
            echo "fio $_j: $_res" >> "$_log"
            # "MBps IOPS idle% ios ms": fio's guest time (the coverage line
            # sets the busy time perf sampled against it) and KiB moved
            read -r _mbps _iops _idle _ios _ms <<RES
$_res
RES
            _fio_ms=$((_fio_ms + _ms))
            _nios=$((_nios + _ios))
            case $_bs in
                *k) _kib=$((_kib + _ios * ${_bs%k})) ;;
                *m) _kib=$((_kib + _ios * ${_bs%m} * 1024)) ;;
            esac
        else
            _ok=0
        fi
        for _f in /tmp/$_j.prerun.txt /tmp/$_j.postrun.txt; do
            [ -f "$_f" ] && { echo "== $_f"; cat "$_f"; rm -f "$_f"; } >> "$_log"
        done
    done
    [ $_kc = 1 ] && { kcount_snap "$_cfg-$_prof-end" || _kc=0; }
    kill -INT $_perf 2>/dev/null; pkill -INT -f 'sleep 100000'; wait $_perf
    # The addresses of the kernel's and the modules' symbols, taken while the
    # profiled modules are still loaded: perf-categorise.py resolves the
    # kernel samples with them (perf's own module maps are wrong on this
    # kernel; see there).
    cp /proc/kallsyms "/tmp/kallsyms-$_cfg"
    if [ $_kc = 1 ]; then
        python3 "$REPO_ROOT/scripts/guest/kcount-diff.py" "/tmp/kallsyms-$_cfg" \
            "$RESULTS/kcount-$_cfg-$_prof-begin.txt" "$RESULTS/kcount-$_cfg-$_prof-end.txt" \
            "$_cfg" "$_prof" "$_nios" "$_kib" "$RESULTS/kfuncs-$_cfg-$_prof.txt" \
            "$RESULTS/kips-$_cfg-$_prof.txt" > "/tmp/kcount-$_cfg-$_prof.txt" 2>>"$_log" &&
            while read -r _l; do info "$_l"; done < "/tmp/kcount-$_cfg-$_prof.txt"
        # The snapshots are large; the per-function split stays.
        rm -f "$RESULTS/kcount-$_cfg-$_prof-"*.txt "$RESULTS/kcount-$_cfg-$_prof-"*.done
        for _f in "$RESULTS/kfuncs-$_cfg-$_prof.txt" "$RESULTS/kips-$_cfg-$_prof.txt"; do
            [ -f "$_f" ] && command -v c++filt >/dev/null && c++filt < "$_f" > /tmp/kfuncs.txt &&
                cp /tmp/kfuncs.txt "$_f"
        done
    fi
    ls -la "$_data" >> "$_log" 2>&1
    [ $_ok = 1 ] || { fail "profile-$_cfg-$_prof" "fio failed under perf"; return 1; }
    perf report -i "$_data" --stats >> "$_log" 2>&1
    perf script -i "$_data" -F period,ip 2>>"$_log" |
        python3 "$REPO_ROOT/scripts/guest/perf-categorise.py" "/tmp/kallsyms-$_cfg" "$_cfg" "$_prof" \
            "$_kib" "$_fio_ms" "$RESULTS/syms-$_cfg-$_prof.txt" "$RESULTS/calls-$_cfg-$_prof.txt" \
            "$RESULTS/ips-$_cfg-$_prof.txt" > "/tmp/profile-$_cfg-$_prof.txt" 2>>"$_log"
    rm -f "$_data" "/tmp/kallsyms-$_cfg" "$_ctl" "$_ack"
    # Rust's symbols demangled (binutils' c++filt knows Rust's v0 mangling)
    for _f in "$RESULTS/syms-$_cfg-$_prof.txt" "$RESULTS/calls-$_cfg-$_prof.txt" \
        "$RESULTS/ips-$_cfg-$_prof.txt"; do
        [ -f "$_f" ] && command -v c++filt >/dev/null && c++filt < "$_f" > /tmp/syms.txt && cp /tmp/syms.txt "$_f"
    done
    grep -q '^icount-profile cfg' "/tmp/profile-$_cfg-$_prof.txt" ||
        { fail "profile-$_cfg-$_prof" "no samples ($(tail -n 1 "$_log"))"; return 1; }
    while read -r _l; do info "$_l"; done < "/tmp/profile-$_cfg-$_prof.txt"
}

# profile CFG: the 1 MiB write and read, then the 4 KiB random read, with
# the measured jobs' parameters, once more each under perf: profile "1m"
# (the write and the read together) and profile "4k"; the samples split by
# where they land (scripts/guest/perf-categorise.py).
profile() {
    perf_jobs "$1" 1m "prof-w:write:1m:8:${SIZE}m" "prof-r:read:1m:8:${SIZE}m" &&
        perf_jobs "$1" 4k "prof-4k:randread:4k:32:${RAND_KIB}k" && pass "profile-$1"
}

# alloc_census CFG: each job once more with the slab allocation tracepoints
# on (kmem:kmalloc, kmem:kmem_cache_alloc), counting allocations per fio I/O
# by the function that asked (ftrace resolves call_site itself; Rust names
# demangled and their crate hashes dropped):
#   icount-alloc cfg=<c> job=<j> ios=<n> site=<function> per_io=<n>
# for every site at 0.05 per I/O or more, and site=TOTAL for all of them.
# Guest time is not measured here: tracing costs instructions.
alloc_census() {
    [ -d $TRACEFS/events ] || mount -t tracefs tracefs $TRACEFS 2>/dev/null
    _ev="$TRACEFS/events/kmem/kmalloc/enable $TRACEFS/events/kmem/kmem_cache_alloc/enable"
    for _e in $_ev; do
        [ -w "$_e" ] || { fail "alloc-census-$1" "no kmem tracepoints ($_e)"; return 1; }
    done
    for _spec in $JOBS; do
        IFS=: read -r _j _rw _bs _qd _io <<EOF
$_spec
EOF
        echo 0 > $TRACEFS/tracing_on; : > $TRACEFS/trace
        echo 65536 > $TRACEFS/buffer_size_kb
        for _e in $_ev; do echo 1 > "$_e"; done
        echo 1 > $TRACEFS/tracing_on
        _res=$(fio_job "$_j" "$_rw" "$_bs" "$_qd" "$_io")
        echo 0 > $TRACEFS/tracing_on
        for _e in $_ev; do echo 0 > "$_e"; done
        [ -n "$_res" ] || { fail "alloc-census-$1-$_j" "fio failed"; return 1; }
        set -- "$1" $_res
        _ios=$5
        _lost=$(grep -c 'LOST' $TRACEFS/trace)
        # call_site=<symbol>+<offset>/<size> [module]: one count per function
        sed -n 's/.*call_site=\([^ +]*\).*/\1/p' $TRACEFS/trace |
            { command -v c++filt >/dev/null && c++filt || cat; } |
            sed 's/\[[0-9a-f]*\]//g; s/ /_/g' | sort | uniq -c | sort -rn |
            awk -v cfg="$1" -v j="$_j" -v ios="$_ios" '{ t += $1; if ($1 / ios >= 0.05) printf "icount-alloc cfg=%s job=%s ios=%d site=%s per_io=%.2f\n", cfg, j, ios, $2, $1 / ios }
                END { printf "icount-alloc cfg=%s job=%s ios=%d site=TOTAL per_io=%.2f\n", cfg, j, ios, t / ios }' |
            while read -r _l; do info "$_l"; done
        [ "$_lost" = 0 ] || info "icount-alloc-lost cfg=$1 job=$_j events_lost_lines=$_lost"
        : > $TRACEFS/trace
        set -- "$1"
    done
    echo 1408 > $TRACEFS/buffer_size_kb
    pass "alloc-census-$1"
}

# idle_snap TAG FILE: counters that tell idle from busy, appended to FILE.
idle_snap() {
    {
        echo "== $1 t_ns=$(date +%s%N)"
        echo "stat $(head -n 1 /proc/stat)"
        echo "uptime $(cat /proc/uptime)"
        grep -E 'idle_calls|idle_sleeps|nr_events|nr_retries|nr_hangs' /proc/timer_list | head -n 8 | sed 's/^/tl /'
        grep -E '^ *(LOC|RES|CAL|TLB|NMI|PMI|IWI|SPU|MCP|ERR|MIS)' /proc/interrupts | sed 's/^/irq /'
        sed 's/^/sirq /' /proc/softirqs
        grep -E 'xprt:|^ *(READ|WRITE|GETATTR|COMMIT):' /proc/self/mountstats | sed 's/^/ms /'
    } >> "$2"
}

# idle_probe CFG: each job once plain with counters around it, then once
# under perf (context switches with the switched-out task's call chain, and
# the CPU-wide switch records); raw data to $RESULTS/idle-CFG-JOB.*.
idle_probe() {
    for _spec in $JOBS; do
        IFS=: read -r _j _rw _bs _qd _io <<EOF
$_spec
EOF
        [ "$_rw" = meta ] && continue
        _b=$RESULTS/idle-$1-$_j
        _res=$(fio_job "$_j" "$_rw" "$_bs" "$_qd" "$_io")
        info "idleprobe-run cfg=$1 run=0 job=$_j res=$_res"
        idle_snap before "$_b.snap"
        ( sleep 0.1; cat /proc/timer_list > "$_b.timer_list" ) &
        _res=$(fio_job "$_j" "$_rw" "$_bs" "$_qd" "$_io")
        idle_snap after "$_b.snap"
        wait
        info "idleprobe-run cfg=$1 run=1 job=$_j res=$_res"
        idle_snap before-perf "$_b.snap"
        perf record -a -g --switch-events -e context-switches -c 1 -o /tmp/idle.data -- \
            fio --name="$_j" --filename=$FILE --rw="$_rw" --bs="$_bs" --iodepth="$_qd" \
            --size="${SIZE}m" --io_size="$_io" --direct=1 --ioengine=libaio --thread \
            --output-format=terse --terse-version=3 > "$_b.fio" 2> "$_b.perf-log"
        idle_snap after-perf "$_b.snap"
        perf script -i /tmp/idle.data --show-switch-events -F comm,pid,tid,cpu,time,event,ip,sym > "$_b.script" 2>>"$_b.perf-log"
        info "idle-probe cfg=$1 job=$_j script_lines=$(wc -l < "$_b.script")"
        rm -f /tmp/idle.data
    done
}

case $ROLE in
    single) ;;
    *) fail bench-icount "runs in one VM: scripts/vm --icount bench-icount ..."; return 1 ;;
esac
say "bench-icount: configs $CONFIGS, $REPS repetitions, ${SIZE} MiB, profile $PROFILE, 4 KiB random read ${RAND_KIB} KiB"
if [ $((PROFILE & 2)) != 0 ]; then
    for _c in $CONFIGS; do
        use_config "$_c" && idle_probe "$_c"
    done
fi
_rep=1
while [ $_rep -le "$REPS" ]; do
    for _c in $CONFIGS; do
        if use_config "$_c"; then
            info "icount-mount cfg=$_c rep=$_rep $(mount_sizes)"
            run_jobs "$_c" $_rep && pass "jobs-$_c-rep$_rep"
        else
            fail "config-$_c-rep$_rep" "${NFS_ERR:-module load or listener failed}"
        fi
    done
    _rep=$((_rep + 1))
done
if [ $((PROFILE & 1)) != 0 ]; then
    for _c in $CONFIGS; do
        use_config "$_c" && profile "$_c"
    done
fi
if [ $((PROFILE & 16)) != 0 ]; then
    for _c in $CONFIGS; do
        use_config "$_c" && kcount_jobs "$_c"
    done
fi
if [ $((PROFILE & 4)) != 0 ]; then
    for _c in $CONFIGS; do
        use_config "$_c" && alloc_census "$_c"
    done
fi
mountpoint -q $META_MNT && nfs_umount $META_MNT
mountpoint -q $MNT && nfs_umount $MNT
check nfs-server-stop stop_nfs_server
unload_c_rpcrdma
unload_rust_rpcrdma
