# shellcheck shell=bash
# Common settings for the rpcrdma-rs scripts: where the toolchain and the kernel
# build are cached (outside the repository), and how the cache key is computed.
# Sourced, never executed.

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE_DIR=${RPCRDMA_CACHE:-/var/cache/rpcrdma-rs}
KERNEL_SERIES=7.3
FRAGMENT="$REPO_ROOT/kernel/rpcrdma-rs.config"
DEBUG_FRAGMENT="$REPO_ROOT/kernel/debug.config"
FAST_FRAGMENT="$REPO_ROOT/kernel/fast.config"
INLINE_FRAGMENT="$REPO_ROOT/kernel/inline-helpers.config"
# Which kernel: "fast" (kernel/rpcrdma-rs.config plus kernel/fast.config:
# kallsyms for profiles), "debug" (kernel/rpcrdma-rs.config plus
# kernel/debug.config: KASAN, lockdep, kmemleak, Rust overflow checks, fault
# injection) or "inline" (the fast kernel built with clang-22, rustc's LLVM,
# and kernel/inline-helpers.config: the kernel's C helpers inlined into Rust
# code). scripts/test runs on the debug kernel, benchmarks on the fast one
# (BENCH_KERNEL=inline for the inlined helpers).
KERNEL_FLAVOR=${RPCRDMA_KERNEL:-fast}
case $KERNEL_FLAVOR in fast|debug|inline) ;; *) echo "error: RPCRDMA_KERNEL=$KERNEL_FLAVOR (fast, debug or inline)" >&2; exit 1 ;; esac
LLVM_SUFFIX=-19
# CONFIG_RUST_INLINE_HELPERS links the helpers' LLVM bitcode into Rust
# objects: clang and rustc must share an LLVM major.
[ "$KERNEL_FLAVOR" = inline ] && LLVM_SUFFIX=-22
export LIBCLANG_PATH=/usr/lib/llvm${LLVM_SUFFIX}/lib
export PATH="$HOME/.cargo/bin:$CACHE_DIR/bin:$PATH"

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# The kernel source package version that was downloaded (set by setup).
kernel_pkg_version() { cat "$CACHE_DIR/src/linux-source.version" 2>/dev/null; }

# The config fragments of the selected kernel, base first.
kernel_fragments() {
    echo "$FRAGMENT"
    if [ "$KERNEL_FLAVOR" = debug ]; then echo "$DEBUG_FRAGMENT"; else echo "$FAST_FRAGMENT"; fi
    if [ "$KERNEL_FLAVOR" = inline ]; then echo "$INLINE_FRAGMENT"; fi
}

# The fixes scripts/setup applies to the kernel source (kernel/patches), in
# order.
kernel_patches() {
    local p
    for p in "$REPO_ROOT"/kernel/patches/*.patch; do [ -e "$p" ] && echo "$p"; done
}

# Build directory keyed by kernel package version + the hash of the fragments
# and the patches.
kbuild_dir() {
    local ver hash prefix=kbuild
    ver=$(kernel_pkg_version) || return 1
    [ -n "$ver" ] || return 1
    # shellcheck disable=SC2046
    hash=$(cat $(kernel_fragments) $(kernel_patches) | sha256sum | cut -c1-12)
    [ "$KERNEL_FLAVOR" = debug ] && prefix=kbuild-debug
    [ "$KERNEL_FLAVOR" = inline ] && prefix=kbuild-inline
    echo "$CACHE_DIR/$prefix-${ver//[^A-Za-z0-9.+-]/_}-$hash"
}

ksrc_dir() { echo "$CACHE_DIR/src/linux-source-$KERNEL_SERIES"; }

rust_lib_src() { cat "$CACHE_DIR/src/rust-src.path" 2>/dev/null; }

# Environment every kernel make needs.
kmake_env() {
    RUST_LIB_SRC=$(rust_lib_src)
    export RUST_LIB_SRC
}
