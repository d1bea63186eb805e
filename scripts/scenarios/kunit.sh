# shellcheck shell=sh
# kunit: load rpcrdma_rs.ko (its KUnit suites, named rpcrdma_rs*, run at
# insmod), collect each suite's KTAP from debugfs into $RESULTS/ktap/<suite>.ktap
# (dmesg is the fallback), then unload the module.
# Arguments: module parameters for insmod.
TIMEOUT=${KUNIT_TIMEOUT:-300}

if [ ! -f "$RUST_RPCRDMA_KO" ]; then
    fail kunit-load "module file $RUST_RPCRDMA_KO does not exist (build it first: make)"
    return 1
fi
dmesg -c > /dev/null 2>&1   # start the dmesg capture here
if ! check kunit-load load_rust_rpcrdma "$@"; then
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

check module-unload rmmod rpcrdma_rs
