#!/bin/sh
# Self-test of scripts/kernel-log-scan on the samples in tests/kernel-log:
# which reports it finds (kind and count) and its exit status.
cd "$(dirname "$0")/kernel-log" || exit 2
bad=0
scan() { python3 ../../kernel-log-scan "$@" | sed -n 's/^REPORT \([^:]*\):.*/\1/p' | tr '\n' ' '; }
expect() {   # expect NAME EXPECTED-KINDS EXPECTED-STATUS FILES...
    name=$1 want=$2 want_rc=$3; shift 3
    got=$(scan "$@")
    python3 ../../kernel-log-scan "$@" >/dev/null; rc=$?
    if [ "$got" = "$want" ] && [ "$rc" = "$want_rc" ]; then echo "ok $name"
    else echo "FAIL $name: got '$got' status $rc, want '$want' status $want_rc"; bad=1; fi
}
expect clean "" 0 clean.log empty.kmemleak
expect kasan "KASAN " 1 kasan.log
expect kasan-stacks "KASAN " 1 kasan-stacks.log
# The whole KASAN report, to its closing rule: the stacks of the object's
# allocation and free are in it.
report=$(python3 ../../kernel-log-scan kasan-stacks.log)
for want in "Allocated by task" "Freed by task" "Memory state around"; do
    if printf '%s\n' "$report" | grep -q "  | $want"; then echo "ok kasan-report-has '$want'"
    else echo "FAIL kasan-report-has '$want'"; bad=1; fi
done
expect lockdep "lockdep " 1 lockdep.log
expect mixed "BUG WARNING hung-task rcu-stall rust-panic " 1 mixed.log
expect kmemleak "kmemleak " 1 clean.log leaks.kmemleak
# rdma_rxe's drain-with-IRQs-off bug, once excused as upstream's, is fixed in
# the harness's kernel (kernel/patches): its reports fail a scenario again.
expect known-rxe "WARNING WARNING lockdep " 1 known-rxe.log
expect known-rxe-receiver "WARNING WARNING lockdep " 1 known-rxe-receiver.log
expect known-rxe-through-ours "WARNING WARNING lockdep " 1 known-rxe-ours.log
expect missing-files "" 0 no-such.log no-such.kmemleak
exit $bad
