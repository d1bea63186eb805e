# shellcheck shell=sh
# kunit: load the transport module rpcrdma_rs.ko (it must load with its
# parameters and find the rxe device), then the test module
# rpcrdma_rs_kunit.ko (its KUnit suites, named rpcrdma_rs_*, run at insmod
# over the rxe device), collect each suite's KTAP from debugfs into
# $RESULTS/ktap/<suite>.ktap (dmesg is the fallback), then unload both and
# check the unload left no RDMA object behind.
# Arguments: module parameters for the test module's insmod; a first
# argument filter_glob=GLOB runs only the matching suites/cases (KUnit's
# filter, applied when a test module loads), e.g. on siw, where only
# rpcrdma_rs_verbs is written for both rxe and iWARP.
TIMEOUT=${KUNIT_TIMEOUT:-300}
kunit_filter "${1:-}" && shift

KUNIT_KO=${KUNIT_KO:-$REPO_ROOT/rpcrdma_rs_kunit.ko}
for ko in "$RUST_RPCRDMA_KO" "$KUNIT_KO"; do
    if [ ! -f "$ko" ]; then
        fail kunit-load "module file $ko does not exist (build it first: make)"
        return 1
    fi
done
dmesg -c > /dev/null 2>&1   # start the dmesg capture here
if check rpcrdma_rs-load load_rust_rpcrdma; then
    line=$(dmesg | grep -m1 'rpcrdma_rs .* loaded:')
    say "$line"
    case $line in
        *max_requests=*rdma_devices=[1-9]*) pass rpcrdma_rs-load-line ;;
        *) fail rpcrdma_rs-load-line "no load line naming an RDMA device: $line" ;;
    esac
    check rpcrdma_rs-rejects-bad-param sh -c "rmmod rpcrdma_rs && ! insmod $RUST_RPCRDMA_KO max_requests=1 && dmesg | grep -q 'max_requests must be' && insmod $RUST_RPCRDMA_KO"
fi
if ! check kunit-load insmod "$KUNIT_KO" "$@"; then
    dmesg > "$RESULTS/dmesg-insmod.txt"
    return 1
fi

# debugfs always ends the file with a suite "ok 1 <suite>" line, even before the
# suite ran, so a suite counts as finished when its plan ("    1..N") has N
# case result lines at the case indentation (4 spaces), or it was skipped.
suite_done() {
    tail -n 1 "$1" 2>/dev/null | grep -q '# SKIP' && return 0
    _plan=$(grep -m1 -E '^    1\.\.[0-9]+' "$1" 2>/dev/null | sed 's/^ *1\.\.//')
    [ -n "$_plan" ] || return 1
    [ "$(grep -cE '^    (not )?ok [0-9]+' "$1")" -ge "$_plan" ]
}
all_done() {
    _any=0
    for r in /sys/kernel/debug/kunit/rpcrdma_rs*/results; do
        [ -e "$r" ] || return 1
        _any=1
        suite_done "$r" || return 1
    done
    [ $_any = 1 ]
}
if wait_for "$TIMEOUT" all_done; then
    pass kunit-suites-finished
else
    fail kunit-suites-finished "suites not finished (or none found) after ${TIMEOUT}s"
fi

n=0
for d in /sys/kernel/debug/kunit/rpcrdma_rs*; do
    [ -e "$d/results" ] || continue
    s=$(basename "$d")
    cat "$d/results" > "$RESULTS/ktap/$s.ktap"   # already KTAP, with its own header
    n=$((n + 1))
    say "suite $s: $(tail -n 1 "$d/results")"
done

# Fallback / cross-check: the KTAP lines from dmesg (not counted unless debugfs had nothing).
mkdir -p "$RESULTS/ktap-dmesg"
dmesg | sed -n 's/^\[[ 0-9.]*\] //p' | awk '/KTAP version|^ *#? *Subtest: rpcrdma_rs|^ *(not )?ok |^ *1\.\.[0-9]|^ *# /' \
    > "$RESULTS/ktap-dmesg/dmesg.ktap"
if [ $n = 0 ]; then
    if grep -q 'rpcrdma_rs' "$RESULTS/ktap-dmesg/dmesg.ktap"; then
        cp "$RESULTS/ktap-dmesg/dmesg.ktap" "$RESULTS/ktap/dmesg.ktap"
        say "no debugfs results: using the KTAP from dmesg"
    else
        fail kunit-results "no rpcrdma_rs KUnit suite results in debugfs or dmesg"
    fi
fi

check kunit-module-unload rmmod rpcrdma_rs_kunit
check rpcrdma_rs-unload rmmod rpcrdma_rs
if dmesg | grep -q 'RDMA objects still live'; then
    fail unload-no-leaks "$(dmesg | grep 'RDMA objects still live')"
else
    pass unload-no-leaks
fi
