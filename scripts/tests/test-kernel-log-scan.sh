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
expect lockdep "lockdep " 1 lockdep.log
expect mixed "BUG WARNING hung-task rcu-stall rust-panic " 1 mixed.log
expect kmemleak "kmemleak " 1 clean.log leaks.kmemleak
# An upstream rdma_rxe bug (kernel-log-scan's KNOWN list) does not fail the
# scan, unless one of the report's frames is in rpcrdma_rs.
expect known-rxe "" 0 known-rxe.log
expect known-rxe-receiver "" 0 known-rxe-receiver.log
expect known-rxe-through-ours "WARNING " 1 known-rxe-ours.log
expect missing-files "" 0 no-such.log no-such.kmemleak
exit $bad
