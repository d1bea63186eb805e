# shellcheck shell=sh
# fstests: kernel.org's fstests (xfstests) over NFS/RDMA, through its own
# FSTYP=nfs configuration, in two VMs (scripts/vm --two-vm fstests ...).
# The server exports a test and a scratch file system (tmpfs, or ext4 on
# the server's virtio disk); the client runs fstests' ./check with
# TEST_DEV=server:/test, SCRATCH_DEV=server:/scratch and
# NFS_MOUNT_OPTIONS="-o vers=V,proto=rdma,port=20049".
# The build comes from scripts/fstests-build (scripts/setup), found at
# $CACHE_DIR/fstests/current (the guest sees the host's root).
#
# Arguments: [DIRECTION CLIENT-SERVER module: rust-c, c-rust, rust-rust,
# c-c] [VERSIONS, '+' between: 4.2+3] [TESTS: list (every test of
# scripts/guest/fstests.list), a tag of that list: ci (scripts/test's
# default), or a part of the list as scripts/test --full runs it: list1
# and list2 (the shorter tests), long1 (generic/013, 070, 075), long2 (091),
# long3 (438), long4 (112, 263), each meant to end within the bounds below
# on a 2-core TCG host but long2, long3 and long5 (127: hours), which are in
# no entry; long (the five long parts); direct (no
# harness: fsx and fsstress run directly, for the debug kernel), or tests
# with '+' between (075+091 or generic/075)] [EXCLUDED: verify (run the tests
# fstests.exclude says fail on NFS in general, or on NFSv3 in general for
# the NFSv3 sections, over RDMA and over TCP in this boot and require the
# same failure) or '-'] [BACKING: tmpfs or
# ext4] [DIRECT_OPS: fsx operations per run in direct mode]
# Bounds: ./check runs each section within FST_TIMEOUT (3000 s), the
# client's environment; scripts/test gives the two VMs 5400 s.
DIRECTION=${1:-rust-c}
VERSIONS=$(echo "${2:-4.2+3}" | tr '+' ' ')
TESTS=${3:-list}
EXCLUDED=${4:--}
BACKING=${5:-tmpfs}
DIRECT_OPS=${6:-2000}
CLIENT_MOD=${DIRECTION%-*}
SERVER_MOD=${DIRECTION#*-}
FSTESTS_DIR=${FSTESTS_DIR:-${KBUILD%/*}/fstests/current}
FST_LIST=$REPO_ROOT/scripts/guest/fstests.list
FST_EXCLUDE=$REPO_ROOT/scripts/guest/fstests.exclude
FST_CONFIG=/tmp/fstests.config
FST_RESULTS=/tmp/fstests-results
FST_TEST_DIR=/tmp/fst-test
FST_SCRATCH_MNT=/tmp/fst-scratch
# fstests' users (ACL and permission tests), the same ids on both VMs.
FST_USERS="fsgqa:1500 fsgqa2:1501 123456-fsgqa:1502"

fst_have_build() { [ -f "$FSTESTS_DIR/.built" ] && [ -x "$FSTESTS_DIR/check" ]; }

fst_load_module() {   # fst_load_module c|rust
    case $1 in
        c) check "load-c-rpcrdma" load_c_rpcrdma ;;
        rust) check "load-rust-rpcrdma" load_rust_rpcrdma ;;
        *) fail fstests-direction "module '$1' (c or rust)" ;;
    esac
}

fst_unload_module() {
    case $1 in
        c) check unload-c-rpcrdma unload_c_rpcrdma ;;
        rust) check unload-rust-rpcrdma unload_rust_rpcrdma ;;
    esac
}

fst_add_users() {
    for _u in $FST_USERS; do
        _name=${_u%:*} _id=${_u#*:}
        getent group "$_name" >/dev/null || groupadd -g "$_id" "$_name" 2>/dev/null
        id "$_name" >/dev/null 2>&1 || useradd -M -d /tmp -s /bin/sh -u "$_id" -g "$_id" "$_name" 2>/dev/null ||
            say "warning: useradd $_name failed"
    done
}

# ---- server -------------------------------------------------------------------
fst_server_fs() {
    mkdir -p "$EXPORT/test" "$EXPORT/scratch"
    case $BACKING in
        tmpfs)
            mount -t tmpfs -o size=384m,mode=1777 fst-test "$EXPORT/test" &&
                mount -t tmpfs -o size=384m,mode=1777 fst-scratch "$EXPORT/scratch" ;;
        ext4)
            [ -b /dev/vda ] || { say "no /dev/vda"; return 1; }
            mkfs.ext4 -q -F -E lazy_itable_init=1,lazy_journal_init=1 /dev/vda &&
                mkdir -p /srv/fst && mount -t ext4 -o acl,user_xattr /dev/vda /srv/fst &&
                mkdir -p /srv/fst/test /srv/fst/scratch && chmod 1777 /srv/fst/test /srv/fst/scratch &&
                mount --bind /srv/fst/test "$EXPORT/test" && mount --bind /srv/fst/scratch "$EXPORT/scratch" ;;
        *) say "backing '$BACKING' (tmpfs or ext4)"; return 1 ;;
    esac
}

fst_server() {
    fst_load_module "$SERVER_MOD" || return 1
    fst_add_users
    check fstests-server-fs-$BACKING fst_server_fs || return 1
    if start_nfs_server; then pass nfs-server-start; else fail nfs-server-start "$NFS_ERR"; return 1; fi
    for _e in test:11 scratch:12; do
        export_dir "rw,no_root_squash,insecure,no_subtree_check,fsid=${_e#*:}" "$EXPORT/${_e%:*}" ||
            { fail fstests-export "exportfs $EXPORT/${_e%:*}"; return 1; }
    done
    grep -q "^rdma $NFS_RDMA_PORT" /proc/fs/nfsd/portlist && pass "rdma-listener-$SERVER_MOD" ||
        fail "rdma-listener-$SERVER_MOD" "portlist"
}

fst_server_end() {
    if [ "$SERVER_MOD" = rust ]; then
        _st=""
        for f in /proc/sys/sunrpc/svc_rdma/rdma_stat_*; do
            [ -e "$f" ] && _st="$_st $(basename "$f" | sed 's/^rdma_stat_//')=$(cat "$f")"
        done
        info "svc_rdma stats:$_st"
    fi
    check nfs-server-stop stop_nfs_server
    umount "$EXPORT/test" "$EXPORT/scratch" 2>/dev/null
    fst_unload_module "$SERVER_MOD"
    if [ "$SERVER_MOD" = rust ]; then
        _leak='RDMA objects still live|still live at unload|still in use at unload'
        if dmesg | grep -Eq "$_leak"; then
            fail server-unload-no-leaks "$(dmesg | grep -E "$_leak" | tail -n 1)"
        else
            pass server-unload-no-leaks
        fi
    fi
}

# ---- client: fstests' harness ---------------------------------------------------
# fst_dev V NAME: the export as fstests' TEST_DEV/SCRATCH_DEV for version V
# (NFSv4 paths are below the fsid=0 root).
fst_dev() {
    case $1 in 3) echo "$SERVER_IP:$EXPORT/$2" ;; *) echo "$SERVER_IP:/$2" ;; esac
}

# fst_sec PROTO V: the config section of a transport and version (fstests
# allows no '.' in a section's name): rdma-v42, tcp-v3.
fst_sec() { echo "$1-v$(echo "$2" | tr -d .)"; }

# fst_config: one section per transport and version. Each section sets
# MOUNT_OPTIONS and TEST_FS_MOUNT_OPTS itself: fstests derives them from
# NFS_MOUNT_OPTIONS only when FSTYP changes between sections
# (common/config's get_next_config), and otherwise keeps the previous
# section's, here the first section's (fstests reads it at start-up): every
# later section would mount with rdma-v42's options.
fst_config() {
    : > $FST_CONFIG
    for _v in $VERSIONS; do
        for _p in rdma tcp; do
            _o="vers=$_v,proto=$_p"
            [ $_p = rdma ] && _o="$_o,port=$NFS_RDMA_PORT"
            [ "$_v" = 3 ] && _o="$_o,nolock"
            _s=$(fst_sec $_p "$_v")
            cat >> $FST_CONFIG <<EOF
[$_s]
FSTYP=nfs
TEST_DEV=$(fst_dev "$_v" test)
TEST_DIR=$FST_TEST_DIR
SCRATCH_DEV=$(fst_dev "$_v" scratch)
SCRATCH_MNT=$FST_SCRATCH_MNT
NFS_MOUNT_OPTIONS="-o $_o"
MOUNT_OPTIONS="-o $_o"
TEST_FS_MOUNT_OPTS="-o $_o"
RESULT_BASE=$FST_RESULTS

EOF
        done
    done
}

# fst_tests: the tests to run, fstests names.
fst_tests() {
    case $TESTS in
        list) grep -v '^#' "$FST_LIST" | awk 'NF { print $1 }' ;;
        # test names, '+' between (075+091 or generic/075)
        [0-9]*|*/*|*+*) echo "$TESTS" | tr '+' '\n' | sed -e '/^$/d' -e 's|^\([0-9]\)|generic/\1|' ;;
        # a tag of the list (ci, list1, list2, long1 ...); "long" is every longN
        *) grep -v '^#' "$FST_LIST" | awk -v t="$TESTS" '{ for (i = 2; i <= NF; i++)
               if ($i == t || (t == "long" && $i ~ /^long[0-9]+$/)) { print $1; break } }' ;;
    esac
}

# fst_tags: the tags fstests.list gives, ',' between.
fst_tags() { grep -v '^#' "$FST_LIST" | awk '{ for (i = 2; i <= NF; i++) print $i }' | sort -u | paste -sd, -; }

# fst_excluded CLASS: the excluded tests of a class (nfs, nfs3, tcg), names only.
fst_excluded() { grep -v '^#' "$FST_EXCLUDE" 2>/dev/null | awk -v c="$1" 'NF && $2 == c { print $1 }'; }

# fst_excluded_for V: the tests left out of a section of NFS version V:
# every class's, but class nfs3's only over NFSv3.
fst_excluded_for() {
    grep -v '^#' "$FST_EXCLUDE" 2>/dev/null |
        awk -v v="$1" 'NF && ($2 != "nfs3" || v == "3") { print $1 }'
}

# fst_check SECTION TESTS...: runs ./check, its output in
# $RESULTS/fstests-SECTION.log (appended); leaves "test result detail" lines in
# /tmp/.fst-SECTION (result: pass, fail, notrun).
fst_check() {
    _sec=$1; shift
    _log=/tmp/.fst-run.log
    : > $_log
    _t0=$(date +%s)
    # (the results share shows the host how far it got)
    # A test killed by the bound leaves its line unterminated: the exit
    # status goes on a line of its own.
    _bound=${FST_TIMEOUT:-3000}
    ( cd "$FSTESTS_DIR" && HOST_OPTIONS=$FST_CONFIG timeout "$_bound" ./check -s "$_sec" "$@"
      _e=$?; echo; echo "check exit $_e" ) 2>&1 | tee -a "$RESULTS/fstests-$_sec.log" > $_log
    _rc=$(sed -n 's/^check exit //p' $_log)
    # The last test ./check started (the one running if it was stopped).
    _last=$(grep -oE '^[a-z]+/[0-9]+ ' $_log | tail -n 1 | tr -d ' ')
    _unreached=0
    # The section's own mount options, as ./check printed them.
    _want="-o $(sed -n "/^\[$_sec\]/,/^\[/s/^MOUNT_OPTIONS=\"-o \(.*\)\"$/\1/p" $FST_CONFIG)"
    _got=$(sed -n 's/^MOUNT_OPTIONS *-- *\(-o [^ ]*\) .*/\1/p' $_log | head -n 1)
    if [ -n "$_got" ] && [ "$_got" != "$_want" ]; then
        fail "fstests-$_sec-mount-options" "./check used '$_got', the section says '$_want'"
    fi
    # ./check leaves the test file system mounted: the next section's
    # TEST_DEV may be another export
    umount $FST_TEST_DIR $FST_SCRATCH_MNT 2>/dev/null
    if grep -q 'could not mount' $_log; then
        say "$_sec: ./check could not mount; the server exports: $(showmount -e "$SERVER_IP" 2>&1 | tr '\n' ' ')"
    fi
    _dt=$(( $(date +%s) - _t0 ))
    # "Ran:", "Not run:" and "Failures:"
    awk '/^(Ran|Not run|Failures):/ { k = substr($0, 1, index($0, ":")); sub(/^[^:]*: */, ""); print k, $0 }' "$_log" > /tmp/.fst-sum
    : > "/tmp/.fst-$_sec"
    for _t in "$@"; do
        if grep -q "^Failures:.* $_t\( \|$\)" /tmp/.fst-sum || grep -q "^Failures: $_t\( \|$\)" /tmp/.fst-sum; then
            _why=$(grep -m1 "^$_t " "$_log" | sed "s|^$_t *||" | cut -c1-120)
            _bad=$FST_RESULTS/$_sec/$_t.out.bad
            [ -f "$_bad" ] && _why="$_why: $(diff "$FSTESTS_DIR/tests/$_t.out" "$_bad" 2>/dev/null | grep '^[<>]' | head -n 2 | tr '\n' ' ' | cut -c1-120)"
            echo "$_t fail $_why" >> "/tmp/.fst-$_sec"
        elif grep -q "^Not run:.*$_t\( \|$\)" /tmp/.fst-sum; then
            _why=$(grep -m1 "^$_t " "$_log" | sed -e "s|^$_t *||" -e 's/\[not run\] *//' | cut -c1-120)
            echo "$_t notrun $_why" >> "/tmp/.fst-$_sec"
        elif grep -q "^Ran:.*$_t\( \|$\)" /tmp/.fst-sum; then
            echo "$_t pass" >> "/tmp/.fst-$_sec"
        else
            # No summary lists it: ./check was stopped (the FST_TIMEOUT
            # bound) or died. Its own line says how far the test got.
            _line=$(grep -m1 "^$_t " "$_log")
            if [ -z "$_line" ]; then
                echo "$_t notrun not reached: ./check stopped first (exit $_rc)" >> "/tmp/.fst-$_sec"
                _unreached=$((_unreached + 1))
            elif [ "$_t" = "$_last" ]; then
                echo "$_t fail stopped while it ran (check exit $_rc)" >> "/tmp/.fst-$_sec"
            elif echo "$_line" | grep -q '\[not run\]'; then
                echo "$_t notrun $(echo "$_line" | sed -e "s|^$_t *||" -e 's/\[not run\] *//' | cut -c1-120)" >> "/tmp/.fst-$_sec"
            elif echo "$_line" | grep -qE "^$_t( +[0-9]+s \.\.\.)? +[0-9]+s\$"; then
                echo "$_t pass" >> "/tmp/.fst-$_sec"
            else
                echo "$_t fail $(echo "$_line" | sed "s|^$_t *||" | cut -c1-120)" >> "/tmp/.fst-$_sec"
            fi
        fi
    done
    if [ "$_rc" = 124 ]; then
        fail "fstests-$_sec-within-bound" "./check stopped by its ${_bound} s bound (FST_TIMEOUT) while running $_last; $_unreached tests not reached"
    elif [ "$_rc" != 0 ] && [ "$_unreached" -gt 0 ]; then
        fail "fstests-$_sec-check-ran" "./check exited $_rc before $_unreached of the tests"
    fi
    # failed tests' output and full logs, for the host
    mkdir -p "$RESULTS/fstests/$_sec"
    for _f in "$FST_RESULTS/$_sec"/generic/*.out.bad "$FST_RESULTS/$_sec"/generic/*.full "$FST_RESULTS/$_sec"/generic/*.dmesg; do
        [ -f "$_f" ] || continue
        case $_f in *.full) grep -q "^$(basename "${_f%.full}") fail" "/tmp/.fst-$_sec" 2>/dev/null ||
            grep -q "generic/$(basename "${_f%.full}") fail" "/tmp/.fst-$_sec" || continue ;; esac
        tail -c 65536 "$_f" > "$RESULTS/fstests/$_sec/$(basename "$_f")"
    done
    _np=$(grep -c '^[^ ]* pass$' "/tmp/.fst-$_sec") _nf=$(grep -c '^[^ ]* fail' "/tmp/.fst-$_sec")
    _nn=$(grep -c '^[^ ]* notrun' "/tmp/.fst-$_sec")
    info "fstests $DIRECTION $_sec $BACKING: $# tests, $_np passed, $_nf failed, $_nn not run, ${_dt} s"
}

# fst_record SECTION: a status line per test that ran.
fst_record() {
    while read -r _t _r _why; do
        case $_r in
            pass) pass "fstests-$1-$_t" ;;
            fail) fail "fstests-$1-$_t" "$_why" ;;
            notrun) say "not run: $1 $_t: $_why" ;;
        esac
    done < "/tmp/.fst-$1"
    grep '^[^ ]* notrun' "/tmp/.fst-$1" | awk '{ printf "%s ", $1 } END { print "" }' | sed "s|^|not run ($1): |" >> "$RESULTS/info"
}

# fst_signature SECTION TEST: how the test failed, the difference from its
# golden output with addresses and transports taken out.
fst_signature() {
    _bad=$FST_RESULTS/$1/$2.out.bad
    if [ -f "$_bad" ]; then
        diff "$FSTESTS_DIR/tests/$2.out" "$_bad" | grep '^[<>]' | sed -e 's/proto=[a-z0-9]*//g' -e 's/port=[0-9]*//g' | sha256sum | cut -c1-16
    else
        echo "no-out.bad:$(grep "^$2 " "/tmp/.fst-$1" | cut -d' ' -f2-)"
    fi
}

# fst_verify_excluded V: the tests excluded as failing on NFS in general (and,
# over NFSv3, on NFSv3 in general) run over RDMA and over TCP in this boot;
# each must fail, and fail alike.
fst_verify_excluded() {
    _v=$1 _rs=$(fst_sec rdma "$1") _ts=$(fst_sec tcp "$1")
    _ex=$(fst_excluded nfs)
    if [ "$_v" = 3 ]; then
        _ex=$(printf '%s\n%s\n' "$_ex" "$(fst_excluded nfs3)" | awk 'NF')
    fi
    [ -n "$_ex" ] || return 0
    # shellcheck disable=SC2086
    fst_check "$_rs" $_ex
    # shellcheck disable=SC2086
    fst_check "$_ts" $_ex
    for _t in $_ex; do
        _r=$(grep "^$_t " "/tmp/.fst-$_rs" | cut -d' ' -f2)
        _tc=$(grep "^$_t " "/tmp/.fst-$_ts" | cut -d' ' -f2)
        _sr=$(fst_signature "$_rs" "$_t") _st=$(fst_signature "$_ts" "$_t")
        info "excluded $_t v$_v ($CLIENT_MOD client, $SERVER_MOD server): rdma $_r [$_sr], tcp $_tc [$_st]"
        # (a test ./check never got to, as when it cannot mount, has no
        # failure to compare)
        if [ "$_r" = fail ] && [ "$_tc" = fail ] && [ "$_sr" = "$_st" ] &&
            ! grep -q "^$_t fail did not run to its end" "/tmp/.fst-$_rs" "/tmp/.fst-$_ts"; then
            pass "fstests-excluded-v$_v-$_t-fails-alike-rdma-tcp"
        else
            fail "fstests-excluded-v$_v-$_t-fails-alike-rdma-tcp" "rdma $_r [$_sr], tcp $_tc [$_st]"
        fi
    done
}

fst_run_list() {
    _all=$(fst_tests)
    [ -n "$_all" ] || { fail fstests-tests "TESTS '$TESTS' names no test (tags: list, long, $(fst_tags))"; return 1; }
    for _v in $VERSIONS; do
        # The excluded tests are left out of the list (-E would print them
        # as not run).
        _ex=$(fst_excluded_for "$_v")
        _run=$(for _t in $_all; do echo "$_ex" | grep -qx "$_t" || echo "$_t"; done)
        if [ -n "$_run" ]; then
            _s=$(fst_sec rdma "$_v")
            # shellcheck disable=SC2086
            fst_check "$_s" $_run
            fst_record "$_s"
            # the mounts ./check made are rdma ones: show the transport counters
            show_xprt
        else
            info "v$_v: every test of '$TESTS' is excluded"
        fi
        [ "$EXCLUDED" = verify ] && fst_verify_excluded "$_v"
    done
}

# ---- client: fsx and fsstress without the harness (debug kernel) -----------------
FSX=$FSTESTS_DIR/ltp/fsx
FSSTRESS=$FSTESTS_DIR/ltp/fsstress

# fst_run NAME CMD...: PASS if CMD exits 0 (bounded), its output's tail in the log.
fst_run() {
    _n=$1; shift
    _t0=$(date +%s)
    timeout "${FST_DIRECT_TIMEOUT:-900}" "$@" > "/tmp/.$_n.log" 2>&1; _rc=$?
    _dt=$(( $(date +%s) - _t0 ))
    tail -n 5 "/tmp/.$_n.log" | sed "s/^/vm:   [$_n] /"
    cp "/tmp/.$_n.log" "$RESULTS/$_n.log" 2>/dev/null
    info "perf $_n seconds=$_dt"
    if [ $_rc = 0 ]; then pass "$_n"; else fail "$_n" "exit $_rc after ${_dt}s: $(tail -n 1 "/tmp/.$_n.log")"; fi
}

fst_run_direct() {
    _m=/tmp/mnt-fst
    for _v in $VERSIONS; do
        nfs_mount "$_v" "$SERVER_IP" $_m || { fail "fstests-direct-v$_v-mount" "$NFS_ERR"; continue; }
        _d=$_m/fst-direct
        mkdir -p "$_d"
        # buffered, with mmap reads and writes
        fst_run "fsx-v$_v-buffered-mmap" "$FSX" -q -N "$DIRECT_OPS" -l 1048576 -o 131072 -S 1 "$_d/fsx.buf"
        # O_DIRECT (no mmap: fsx leaves it out with -Z)
        fst_run "fsx-v$_v-odirect" "$FSX" -q -N "$DIRECT_OPS" -Z -R -W -r 4096 -w 4096 -l 1048576 -o 131072 -S 2 "$_d/fsx.dio"
        # AIO O_DIRECT
        fst_run "fsx-v$_v-aio-odirect" "$FSX" -q -N "$DIRECT_OPS" -A -Z -R -W -r 4096 -w 4096 -l 1048576 -o 131072 -S 3 "$_d/fsx.aio"
        # fsstress: 4 processes
        mkdir -p "$_d/fss"
        fst_run "fsstress-v$_v" "$FSSTRESS" -d "$_d/fss" -n "$((DIRECT_OPS / 4))" -p 4 -s 4
        rm -rf "$_d" 2>/dev/null
        show_xprt
        nfs_umount $_m || fail "fstests-direct-v$_v-umount" "umount $_m"
    done
}

fst_client() {
    fst_load_module "$CLIENT_MOD" || return 1
    fst_add_users
    mkdir -p $FST_TEST_DIR $FST_SCRATCH_MNT
    # Wait for the server (nfs_mount retries while it boots).
    if nfs_mount 4.2 "$SERVER_IP" /tmp/mnt-wait; then
        nfs_umount /tmp/mnt-wait
    else
        fail fstests-server-up "$NFS_ERR"; return 1
    fi
    if [ "$TESTS" = direct ]; then
        fst_run_direct
    else
        fst_config
        fst_run_list
    fi
}

if ! fst_have_build; then
    # scripts/test skips the scenario (or fails it with CI=true) without a source.
    fail fstests-build "no fstests build at $FSTESTS_DIR (FSTESTS_SRC, then scripts/setup)"
    [ "$ROLE" = client ] && client_signal_done
    return 0 2>/dev/null || exit 0
fi

case $ROLE in
    single)
        fail fstests "needs two VMs (scripts/vm --two-vm fstests)"
        ;;
    server)
        fst_server && server_wait_client_done "${CLIENT_WAIT:-7200}"
        fst_server_end
        ;;
    client)
        fst_client
        client_signal_done || fail client-signal-done "$NFS_ERR"
        fst_unload_module "$CLIENT_MOD"
        ;;
esac
