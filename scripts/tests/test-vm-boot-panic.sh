#!/bin/sh
# Self-test of scripts/vm's boot_panic, which decides whether a VM whose
# kernel panicked is booted again: only a panic before the guest's init said
# "guest up", with no oops naming a module of this project. Each
# tests/vm-boot/X.log is a console log; the list below says which of them
# start a run again.
here=$(cd "$(dirname "$0")" && pwd)
fn=$(sed -n '/^boot_panic() {/,/^}/p' "$here/../vm")
[ -n "$fn" ] || { echo "FAIL: no boot_panic in scripts/vm"; exit 1; }
bad=0
for case in early-panic:yes module-oops:no late-panic:no clean-boot:no; do
    name=${case%%:*} want=${case#*:}
    RUN_DIR=$(mktemp -d)
    mkdir "$RUN_DIR/vm"
    cp "$here/vm-boot/$name.log" "$RUN_DIR/vm/console.log"
    got=$(RUN_DIR=$RUN_DIR bash -c "$fn"'
boot_panic vm && echo yes || echo no')
    rm -rf "$RUN_DIR"
    if [ "$got" = "$want" ]; then
        echo "ok $name"
    else
        echo "FAIL $name: boot again $got, expected $want"; bad=1
    fi
done
exit $bad
