#!/bin/sh
# Self-test of scripts/ktap-count: each tests/ktap/X.ktap has X.expected
# (expected stdout, then the expected exit status as the last line).
cd "$(dirname "$0")/ktap" || exit 2
bad=0
for k in *.ktap; do
    exp=${k%.ktap}.expected
    got=$(python3 ../../ktap-count "$k"; echo $?)
    if [ "$got" = "$(cat "$exp")" ]; then
        echo "ok $k"
    else
        echo "FAIL $k"; echo "--- expected"; cat "$exp"; echo "--- got"; echo "$got"; bad=1
    fi
done
# stdin and several files at once
got=$(cat pass-params.ktap | python3 ../../ktap-count - mixed.ktap | tail -n 1)
[ "$got" = "8 passed, 2 failed, 1 skipped" ] && echo "ok stdin+multi" || { echo "FAIL stdin+multi: $got"; bad=1; }
exit $bad
