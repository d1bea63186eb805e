#!/bin/sh
# Self-test of scripts/kernel-toolchain and the Makefile's use of it (issue
# 45 item 1), on made-up kernel directories and stand-in rustc/bindgen
# scripts: the kernel's exact rustc is found even behind another one in
# PATH (rustup's ~/.cargo/bin ahead of /usr/bin), and every mismatch stops
# `make modules` with one line naming what is needed, before any rustc runs.
repo=$(cd "$(dirname "$0")/../.." && pwd)
t=$(mktemp -d /tmp/rpcrdma-kt.XXXXXX)
trap 'rm -rf "$t"' EXIT
bad=0
want='rustc 1.0.0 (rpcrdma-kt-test 2000-01-01) (built from a source tarball)'

fake() {   # fake DIR NAME VERSION-LINE: an executable printing its version
    mkdir -p "$1"
    printf '#!/bin/sh\necho "%s"\n' "$3" > "$1/$2"
    chmod +x "$1/$2"
}
kernel() { # kernel DIR RELEASE CONFIG-LINES...: a minimal kernel directory
    d=$1 rel=$2; shift 2
    mkdir -p "$d/include/config"
    echo "$rel" > "$d/include/config/kernel.release"
    printf '%s\n' "$@" > "$d/.config"
}
fake "$t/wrong" rustc 'rustc 1.95.0 (59807616e 2026-04-14)'
fake "$t/right" rustc "$want"
fake "$t/right" bindgen 'bindgen 0.71.1'
gcc_ok=$(command -v gcc || command -v cc)
kernel "$t/k" 7.3.4-test CONFIG_RUST=y CONFIG_CC_IS_GCC=y \
    "CONFIG_CC_VERSION_TEXT=\"${gcc_ok##*/} (test) 1.0\"" \
    "CONFIG_RUSTC_VERSION_TEXT=\"$want\"" 'CONFIG_BINDGEN_VERSION_TEXT="bindgen 0.71.1"'
kernel "$t/norust" 7.3.4-norust CONFIG_CC_IS_GCC=y
kernel "$t/nogcc" 7.3.4-nogcc CONFIG_RUST=y CONFIG_CC_IS_GCC=y \
    'CONFIG_CC_VERSION_TEXT="x86_64-linux-gnu-gcc-99 (test) 99.0"' "CONFIG_RUSTC_VERSION_TEXT=\"$want\""

kt() {     # kt PATH [VAR=VALUE...]: scripts/kernel-toolchain on $t/k, no rustup
    p=$1; shift
    env -i HOME="$t/home" PATH="$p" "$@" sh "$repo/scripts/kernel-toolchain" "$t/k"
}
check() {  # check NAME GOT EXPECTED
    if [ "$2" = "$3" ]; then echo "ok $1"; else echo "FAIL $1: got '$2', want '$3'"; bad=1; fi
}
sys=/usr/bin:/bin
check right-behind-wrong-in-path "$(kt "$t/wrong:$t/right:$sys" | grep '^RUSTC=')" "RUSTC=$t/right/rustc"
check wrong-RUSTC-ignored "$(kt "$t/right:$sys" RUSTC="$t/wrong/rustc" | grep '^RUSTC=')" "RUSTC=$t/right/rustc"
check RUSTC-outside-path "$(kt "$t/wrong:$sys" RUSTC="$t/right/rustc" | grep '^RUSTC=')" "RUSTC=$t/right/rustc"
out=$(kt "$t/wrong:$sys"); rc=$?
check no-match-status "$rc" 1
case $out in
    *"ERROR=kernel 7.3.4-test was built with '$want'; no such rustc found (tried: $t/wrong/rustc"*"apt install rustc rust-src at version 1.0.0"*)
        echo "ok no-match-message" ;;
    *) echo "FAIL no-match-message: $out"; bad=1 ;;
esac

# make modules: one line on stderr, status 2, for each kind of mismatch.
mk() {     # mk KDIR PATH: the Makefile's output and status
    env -i HOME="$t/home" PATH="$2" make -s -C "$repo" KDIR="$1" KT_FILE="$t/kt.mk" modules 2>&1
}
for c in "rustc:$t/k:$t/wrong:$sys:no such rustc found" \
         "norust:$t/norust:$t/right:$sys:has no CONFIG_RUST" \
         "gcc:$t/nogcc:$t/right:$sys:x86_64-linux-gnu-gcc-99, which is not installed (Debian: the gcc-99 package)"; do
    name=${c%%:*} r=${c#*:}; kd=${r%%:*} r=${r#*:}; p=${r%:*}; msg=${r##*:}
    out=$(mk "$kd" "$p"); rc=$?
    lines=$(printf '%s\n' "$out" | grep -c .)
    case $out in
        *"*** rpcrdma-rs: "*"$msg"*) [ "$rc" = 2 ] && [ "$lines" = 1 ] && { echo "ok make-$name"; continue; } ;;
    esac
    echo "FAIL make-$name: status $rc, $lines lines: $out"; bad=1
done
exit $bad
