# shellcheck shell=sh
# mountstats: the "xprt: rdma" line of /proc/self/mountstats counted as the
# C module counts it. One VM; the same fixed workload runs twice, first with
# the in-tree C rpcrdma on both ends, then with rpcrdma_rs on both ends, on
# a fresh mount per NFS version each time:
#   - SIZE_MIB (default 3) MiB written and read back with O_DIRECT, bs=1M
#     (one Read chunk per WRITE, one Write chunk per READ);
#   - 32 KiB written and read with O_DIRECT, bs=1k (inline: the WRITE data
#     is pulled up behind the head, the READ data fixed up into the pages);
#   - NFILES small files created by the shell, a symlink with a 4000-byte
#     target (a long call, RDMA_NOMSG) and `ls -l` of the directory
#     (READDIR and READLINK replies in Reply chunks).
# After the workload it records the xprt line (lib.sh xprt_fields), and on
# the first version of each run it runs nfs-utils' `mountstats --xprt`,
# `mountstats` and `nfsiostat 1 1` on the mount (exit 0, the rdma
# transport section printed with the numbers of the line).
# At the end it prints a C-vs-project table (info) and passes or fails per
# group of fields that the client's marshaling decides for the same
# workload: chunk segments, RDMA bytes, copy bytes, errors. The rest is
# printed for information (see Documentation/admin-guide/mountstats.rst).
# The project sends the page data of an inline call of 1 KiB or more
# through Send SGEs of its own where C pulls it up (the 1 KiB O_DIRECT
# writes): those bytes, from debugfs client_registration's mapped_bytes
# during the project's run, are added to its pullup_copy_count before the
# comparison; the table shows them.
# The project is loaded with RUST_PARAMS (default fmr_pages_per_mr=32): C
# caps an MR at the device's max_sge_rd when that exceeds 16 (a quirk in
# frwr_query_device; 32 on rxe), so a 256 KiB chunk takes two MRs in C and
# one with the project's default depth. The same depth makes the segment
# counts comparable; the counting is what is checked here.
# C counts chunk segments and registered bytes while it encodes a call, so
# an attempt that then fails (its MR pool, filled on demand, runs short:
# -EAGAIN, failed_marshal_count, and the call is marshaled again) counts
# its segments twice. The project counts posted calls only. With the C
# module the rpcrdma marshal and chunk tracepoints are recorded
# ($RESULTS/c-rpcrdma-trace-VERSION.txt) and what C counted for attempts
# that failed is taken off its fields 11-14 before the comparison; the
# table shows both.
# Arguments: [SIZE_MIB] [VERSIONS, '+' between, default 4.2+3] [NFILES]
# [RUST_PARAMS, '+' between]
SIZE_MIB=${1:-3}
VERSIONS=$(echo "${2:-4.2+3}" | tr '+' ' ')
NFILES=${3:-40}
RUST_PARAMS=$(echo "${4:-fmr_pages_per_mr=32}" | tr '+' ' ')
MNT=/tmp/mnt
WORK=/tmp/.mstats

# Fields of the xprt line, numbered as xprt_fields counts them (after
# "rdma"), and their names (C xprt_rdma_print_stats order).
FIELDS="6 7 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26"
field_name() {
    case $1 in
        6) echo sends ;; 7) echo recvs ;;
        11) echo read_chunk_count ;; 12) echo write_chunk_count ;;
        13) echo reply_chunk_count ;; 14) echo total_rdma_request ;;
        15) echo total_rdma_reply ;; 16) echo pullup_copy_count ;;
        17) echo fixup_copy_count ;; 18) echo hardway_register_count ;;
        19) echo failed_marshal_count ;; 20) echo bad_reply_count ;;
        21) echo nomsg_call_count ;; 22) echo mrs_recycled ;;
        23) echo mrs_orphaned ;; 24) echo mrs_allocated ;;
        25) echo local_inv_needed ;; 26) echo empty_sendctx_q ;;
        *) echo "field$1" ;;
    esac
}

# Compared groups: "name:tolerance:fields". Tolerance is a percentage of
# the C value, or "le": the project may count less than C but not more.
# Counts must agree exactly; byte totals within 1%. failed_marshal is
# "le": C counts its on-demand MR pool running short (-EAGAIN, retried)
# as a failed marshal, and the project's pool is allocated at connect.
# hardway, mrs_allocated, local_inv_needed, recycled, orphaned and
# empty_sendctx_q depend on buffer and MR pool management, which differs
# by design; they are printed, not compared.
CMP_GROUPS="chunk-segments:0:11+12+13 nomsg-calls:0:21 rdma-bytes:1:14+15 copy-bytes:1:16+17 bad-replies:0:20 failed-marshals:le:19"

mkdir -p $WORK
head -c $((SIZE_MIB * 1048576)) /dev/urandom > $WORK/big
head -c 32768 /dev/urandom > $WORK/small
LONG_TARGET=$(printf '%04000d' 0)

# workload MNT: the fixed sequence above; non-zero if a step failed.
workload() {
    _m=$1 _bad=
    dd if=$WORK/big of="$_m/big" bs=1M oflag=direct 2>/dev/null || _bad="$_bad big-write"
    dd if="$_m/big" of=$WORK/big.rb bs=1M iflag=direct 2>/dev/null || _bad="$_bad big-read"
    cmp -s $WORK/big $WORK/big.rb || _bad="$_bad big-compare"
    dd if=$WORK/small of="$_m/small" bs=1k oflag=direct 2>/dev/null || _bad="$_bad small-write"
    dd if="$_m/small" of=$WORK/small.rb bs=1k iflag=direct 2>/dev/null || _bad="$_bad small-read"
    cmp -s $WORK/small $WORK/small.rb || _bad="$_bad small-compare"
    rm -f $WORK/big.rb $WORK/small.rb
    mkdir "$_m/d" || _bad="$_bad mkdir"
    _i=0
    while [ $_i -lt "$NFILES" ]; do
        echo "file $_i" > "$_m/d/f$_i" || { _bad="$_bad create"; break; }
        _i=$((_i + 1))
    done
    ln -s "$LONG_TARGET" "$_m/d/long-link" || _bad="$_bad symlink"
    # Writes of files under a write delegation may still be in flight.
    sync
    _n=$(ls -l "$_m/d" | grep -c -e '^-' -e '^l')
    [ "$_n" = $((NFILES + 1)) ] || _bad="$_bad ls:$_n-entries"
    [ -z "$_bad" ] || { say "workload failed:$_bad"; return 1; }
}

# tools_check KIND MNT: nfs-utils' mountstats and nfsiostat on the mount.
tools_check() {
    _k=$1 _m=$2 _t=mountstats-tools-$1
    _reads=$(xprt_fields "$_m" 11)
    _out=$(mountstats --xprt "$_m" 2>&1); _rc=$?
    printf '%s\n' "$_out" | sed "s/^/vm:   [mountstats --xprt $_k] /"
    if [ $_rc != 0 ]; then fail $_t "mountstats --xprt exited $_rc"; return 1; fi
    if ! printf '%s\n' "$_out" | grep -q 'Transport protocol: rdma'; then
        fail $_t "mountstats --xprt printed no rdma transport section"; return 1
    fi
    # The line was read before: nothing but this tool ran since, and reading
    # it sends no RPC.
    if ! printf '%s\n' "$_out" | grep -q "Read segments: $_reads\$"; then
        fail $_t "mountstats --xprt does not show the line's $_reads Read segments"; return 1
    fi
    _out=$(mountstats "$_m" 2>&1); _rc=$?
    printf '%s\n' "$_out" | tail -n 4 | sed "s/^/vm:   [mountstats $_k] /"
    if [ $_rc != 0 ] || ! printf '%s\n' "$_out" | grep -q 'RPC statistics'; then
        fail $_t "mountstats exited $_rc or printed no RPC statistics"; return 1
    fi
    _out=$(nfsiostat 1 1 "$_m" 2>&1); _rc=$?
    printf '%s\n' "$_out" | sed "s/^/vm:   [nfsiostat $_k] /"
    if [ $_rc != 0 ] || ! printf '%s\n' "$_out" | grep -q "mounted on $_m"; then
        fail $_t "nfsiostat exited $_rc or printed no report for $_m"; return 1
    fi
    pass $_t
}

# mapped_bytes: page bytes the project's client sent mapped so far.
mapped_bytes() {
    awk 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "mapped_bytes") c = i; next }
        c { n += $c } END { print n + 0 }' /sys/kernel/debug/rpcrdma_rs/client_registration
}

# run_kind KIND: the workload on a fresh mount per version with the
# module(s) already loaded; the lines go to $WORK/KIND-VERSION.
run_kind() {
    _k=$1 _first=1
    if start_nfs_server; then pass nfs-server-start-$_k; else fail nfs-server-start-$_k "$NFS_ERR"; return 1; fi
    for _v in $VERSIONS; do
        rm -f "$WORK/$_k-$_v"
        [ "$_k" = c ] && trace_c on
        if ! nfs_mount "$_v" "$SERVER_IP" $MNT; then
            fail "mount-$_k-nfs$_v" "$NFS_ERR"; continue
        fi
        [ "$_k" = rust ] && _mb0=$(mapped_bytes)
        if workload $MNT; then pass "workload-$_k-nfs$_v"; else fail "workload-$_k-nfs$_v" "see the log"; fi
        [ "$_k" = rust ] && echo $(($(mapped_bytes) - _mb0)) > "$WORK/rust-$_v.mapped"
        xprt_fields $MNT $FIELDS > "$WORK/$_k-$_v"
        [ "$_k" = c ] && trace_c off "$_v"
        # The line, and the operations behind it (name, count, bytes sent
        # and received) for comparing the two runs by eye.
        awk -v m=$MNT -v k="$_k nfs$_v" '$1 == "device" { on = ($5 == m) }
            on && $1 == "xprt:" { print "vm: xprt " k ": " $0 }
            on && $1 == "per-op" { ops = 1 }
            on && ops && $1 ~ /:$/ && NF >= 9 && $2 > 0 { print "vm: ops " k ": " $1 " " $2 " " $5 " " $6 }
            $1 == "device" { ops = 0 }' /proc/self/mountstats
        if [ $_first = 1 ]; then tools_check "$_k" $MNT; _first=0; fi
        rm -rf "${MNT:?}/d" "$MNT/big" "$MNT/small"
        nfs_umount $MNT || fail "umount-$_k-nfs$_v" "umount $MNT"
    done
    check nfs-server-stop-$_k stop_nfs_server
}

# value FILE N: field N (xprt_fields numbering) of a recorded line (shell
# builtins only: every exec costs seconds under TCG with KASAN). The
# ms_ prefix keeps lib.sh's helpers (fail sets _r) off these variables.
value() {
    read -r ms_line < "$1" || return 1
    ms_want=$2
    # shellcheck disable=SC2086
    set -- $ms_line
    for ms_vf in $FIELDS; do
        [ "$ms_vf" = "$ms_want" ] && { echo "$1"; return 0; }
        shift
    done
    return 1
}

# mapped_part VERSION N: for pullup_copy_count (16), the page bytes the
# project sent mapped where C pulls them up; 0 for other fields.
mapped_part() {
    ms_mn=0
    if [ "$2" = 16 ] && [ -f "$WORK/rust-$1.mapped" ]; then
        read -r ms_mn < "$WORK/rust-$1.mapped"
    fi
    echo "${ms_mn:-0}"
}

# failed_part VERSION N: what C counted in field N for marshal attempts
# that failed (0 when not traced or not a chunk field).
failed_part() {
    ms_pn=0
    if [ -f "$WORK/c-$1.failed" ]; then
        while read -r ms_pf ms_pv; do
            [ "$ms_pf" = "$2" ] && ms_pn=$ms_pv
        done < "$WORK/c-$1.failed"
    fi
    echo "$ms_pn"
}

# compare VERSION: the table and the verdicts of one NFS version.
compare() {
    ms_v=$1 ms_cf=$WORK/c-$1 ms_rf=$WORK/rust-$1
    if [ ! -s "$ms_cf" ] || [ ! -s "$ms_rf" ]; then
        fail "mountstats-nfs$ms_v-compare" "a run recorded no xprt line"; return 1
    fi
    info "mountstats nfs$ms_v: field C C-in-failed-marshals project"
    for ms_f in $FIELDS; do
        info "mountstats nfs$ms_v: $(field_name "$ms_f") $(value "$ms_cf" "$ms_f") $(failed_part "$ms_v" "$ms_f") $(value "$ms_rf" "$ms_f")"
    done
    info "mountstats nfs$ms_v: project page bytes sent mapped, not pulled up: $(mapped_part "$ms_v" 16)"
    for ms_g in $CMP_GROUPS; do
        ms_name=${ms_g%%:*} ms_rest=${ms_g#*:}
        ms_tol=${ms_rest%%:*} ms_fl=$(echo "${ms_rest#*:}" | tr '+' ' ')
        ms_bad=
        for ms_f in $ms_fl; do
            ms_cv=$(value "$ms_cf" "$ms_f")
            ms_rv=$(value "$ms_rf" "$ms_f")
            if [ -z "$ms_cv" ] || [ -z "$ms_rv" ]; then
                ms_bad="$ms_bad $(field_name "$ms_f") missing"; continue
            fi
            ms_cv=$((ms_cv - $(failed_part "$ms_v" "$ms_f")))
            ms_rv=$((ms_rv + $(mapped_part "$ms_v" "$ms_f")))
            if [ "$ms_tol" = le ]; then
                [ "$ms_rv" -le "$ms_cv" ] && continue
            else
                ms_d=$((ms_cv > ms_rv ? ms_cv - ms_rv : ms_rv - ms_cv))
                [ "$ms_d" -le $((ms_cv * ms_tol / 100)) ] && continue
            fi
            ms_bad="$ms_bad $(field_name "$ms_f") C=$ms_cv project=$ms_rv"
        done
        if [ -n "$ms_bad" ]; then
            fail "mountstats-nfs$ms_v-$ms_name" "differ (tolerance $ms_tol):$ms_bad"
        else
            pass "mountstats-nfs$ms_v-$ms_name"
        fi
    done
    # Every compared field should have counted something in C; say so if
    # not (the workload did not exercise it), without failing.
    for ms_f in 11 12 13 14 15 16 17 21; do
        [ "$(value "$ms_cf" "$ms_f")" != 0 ] || info "mountstats nfs$ms_v: $(field_name "$ms_f") is 0 in C: not exercised"
    done
}

# trace_c on|off VERSION: the C client's marshal and chunk tracepoints;
# "off" also writes $WORK/c-VERSION.failed: what C counted in fields 11-14
# for marshal attempts that failed (xprt_fields numbering, one per line).
trace_c() {
    rpcrdma_events || { say "no rpcrdma tracepoints: C's failed attempts not accounted"; return 0; }
    if [ "$1" = on ]; then
        echo > $TRACEFS/trace
        for ms_e in xprtrdma_marshal xprtrdma_marshal_failed xprtrdma_chunk_read \
            xprtrdma_chunk_write xprtrdma_chunk_wp xprtrdma_chunk_reply; do
            echo 1 > $TRACEFS/events/rpcrdma/$ms_e/enable
        done
    else
        echo 0 > $TRACEFS/events/rpcrdma/enable
        cp $TRACEFS/trace "$RESULTS/c-rpcrdma-trace-$2.txt"
        echo > $TRACEFS/trace
        # Chunk events accumulate per task until its marshal succeeds
        # (counted for good) or fails (counted for nothing).
        awk 'function task(l) { match(l, /task:[0-9a-f]+@[0-9a-f]+/); return substr(l, RSTART, RLENGTH) }
            function len(l) { match(l, /[0-9]+@0x/); return substr(l, RSTART, RLENGTH - 3) + 0 }
            / xprtrdma_chunk_read: / { t = task($0); r[t]++ }
            / xprtrdma_chunk_(write|wp): / { t = task($0); w[t]++; b[t] += len($0) }
            / xprtrdma_chunk_reply: / { t = task($0); p[t]++; b[t] += len($0) }
            / xprtrdma_marshal_failed: / { t = task($0); fr += r[t]; fw += w[t]; fp += p[t]; fb += b[t]; n++ }
            / xprtrdma_marshal(_failed)?: / { t = task($0); delete r[t]; delete w[t]; delete p[t]; delete b[t] }
            END { printf "11 %d\n12 %d\n13 %d\n14 %d\n", fr, fw, fp, fb
                  printf "failed-attempts %d\n", n }' "$RESULTS/c-rpcrdma-trace-$2.txt" > "$WORK/c-$2.failed"
        say "C marshal attempts that failed, and what they counted: $(tr '\n' ' ' < "$WORK/c-$2.failed")"
    fi
}

if check load-c-rpcrdma load_c_rpcrdma; then
    run_kind c
else
    fail mountstats-c-run "the C module did not load"
fi
# The C client's transport is destroyed asynchronously after the umount.
wait_for 60 unload_c_rpcrdma || fail unload-c-rpcrdma "rpcrdma still in use"
# shellcheck disable=SC2086
if check rpcrdma_rs-load load_rust_rpcrdma $RUST_PARAMS; then
    run_kind rust
    wait_for 60 unload_rust_rpcrdma || fail rpcrdma_rs-unload "rpcrdma_rs still in use"
fi
for v in $VERSIONS; do compare "$v"; done
rm -rf $WORK
