#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The transport's profile samples by source line and by function.

    scripts/ips-lines.py MODULE.ko IPS-FILE [TOP]
    scripts/ips-lines.py --within SYMBOL [ANCHOR] MODULE.ko IPS-FILE [TOP]

IPS-FILE is a bench-icount profile by address (`ips-CFG-PROF.txt` in the
VM's results: lines of `samples symbol+0xoffset`); MODULE.ko the module
that profile ran, built with debug information (bench-icount's
BENCH_LINES=1 builds it so: `KRUSTFLAGS=-Cdebuginfo=2`, which changes the
code a little, so profile that build, not the plain one; it keeps that
build as `rust.ko` in the results directory it prints). Each sample's
address is resolved with llvm-addr2line through the inlined frames, and
counted for the innermost frame in this repository's sources: its line,
and the function that line belongs to (inlined helpers such as
`XdrReader::take` count as themselves, not as the function they were
inlined into). Prints the TOP (default 40) functions and lines.

With --within, only the samples of the symbols whose name contains SYMBOL
(a function as the profile names it, e.g. `XprtOps>::send_request`), by
that function's own lines (the outermost frame: which of its calls or
statements the time went to) and by the function inlined at that line.
ANCHOR (a name inlined into it, e.g. `xprtrdma::conn::Conn>::send`) takes
the frame of that function as the outermost instead, to look one level
further in; samples outside it are counted apart. The anchor matches any
frame whose name contains it, generic parameters included; ending it with
`$` matches only names that end with it (`send_fast_in_place::{closure#0}$`
is the closure, not a function generic over it).
"""
import collections
import re
import subprocess
import sys

# This repository's source directories, as the build names them
# (<tree>/src/../xprtrdma/conn.rs), the abstractions of `rust/` by
# subsystem included (the kernel's own `rust/kernel/` is not ours).
OUR_DIRS = r'src/proto|src|xprtrdma|svcrdma|rust/(?:rdma|sunrpc|kext|module)|rust'


def ours_only(name):
    """A function name without the transport crate's prefix."""
    return re.sub(r'rpcrdma_rs_main::', '', name)


def main():
    args = sys.argv[1:]
    within = anchor = None
    if args[:1] == ['--within']:
        if len(args) < 2:
            sys.exit(__doc__)
        within = args[1]
        args = args[2:]
        # An anchor is a Rust path, never a file name.
        if args and not args[0].endswith('.ko'):
            anchor, args = args[0], args[1:]
    if len(args) < 2:
        sys.exit(__doc__)
    ko, ips = args[0], args[1]
    top = int(args[2]) if len(args) > 2 else 40
    # Symbols as perf printed them carry crate hashes; nm's do not.
    # perf prints a const generic with its type (`post_chain::<1: usize>`,
    # `received::<false: bool>`), nm without.
    unhash = lambda s: re.sub(r'(\d+|true|false): [a-z0-9]+>', r'\1>',
                              re.sub(r'\[[0-9a-f]{16}\]', '', s))
    syms = {}
    nm = subprocess.run(['nm', '-C', '--defined-only', ko], capture_output=True, text=True, check=True)
    for line in nm.stdout.splitlines():
        parts = line.split(' ', 2)
        if len(parts) == 3 and parts[1] in 'tT':
            syms.setdefault(parts[2], int(parts[0], 16))
    samples, unresolved = [], 0
    for line in open(ips):
        n, rest = line.split(None, 1)
        sym, _, off = rest.strip().rpartition('+0x')
        if within is not None and within not in sym:
            continue
        addr = syms.get(unhash(sym))
        if addr is None or not off:
            unresolved += int(n)
            continue
        samples.append((addr + int(off, 16), int(n)))
    addrs = sorted({a for a, _ in samples})
    out = subprocess.run(['llvm-addr2line-19', '-e', ko, '-a', '-i', '-f', '-C'],
                         input=''.join(f'{a:#x}\n' for a in addrs),
                         capture_output=True, text=True, check=True).stdout.splitlines()
    frames, cur, i = {}, None, 0
    while i < len(out):
        if out[i].startswith('0x'):
            cur = int(out[i], 16)
            frames[cur] = []
            i += 1
            continue
        func, loc = out[i], out[i + 1] if i + 1 < len(out) else '?'
        frames[cur].append((func, loc))
        i += 2
    if within is not None:
        print_within(samples, unresolved, frames, within, anchor, top)
        return
    # This repository's sources, as the build named them
    # (<tree>/src/../xprtrdma/conn.rs); not the kernel's rust/ nor core's.
    ours = re.compile(rf'/((?:{OUR_DIRS})/[a-z0-9_]+\.rs:\d+)')
    foreign = re.compile(r'/library/|/rust-src|/linux-source|/rustc-')
    by_line, by_func = collections.Counter(), collections.Counter()
    total = sum(n for _, n in samples) + unresolved
    other = unresolved
    for a, n in samples:
        for func, loc in frames.get(a, []):
            loc = loc.replace('src/../', '')
            m = None if foreign.search(loc) else ours.search(loc)
            if m:
                by_line[m.group(1)] += n
                by_func[ours_only(func)] += n
                break
        else:
            other += n
    print(f"{total} samples, {other} outside this repository's sources (or unresolved)")
    print_counts("by function (innermost of ours, inlined ones counted as themselves):",
                 by_func, top)
    print_counts("by line:", by_line, top)


def print_counts(title, counts, top):
    """The TOP most counted keys under a title, names cut at 140 characters."""
    print(title)
    for k, v in counts.most_common(top):
        print(f"{v:6} {k[:140]}")


def anchored(name, anchor):
    """Whether the frame `name` is the anchor's (see --within)."""
    if anchor.endswith('$'):
        return name.endswith(anchor[:-1])
    return anchor in name


def print_within(samples, unresolved, frames, within, anchor, top):
    """One function's samples by its own lines and by the function each
    line inlined (see --within in the module's documentation)."""
    short = lambda loc: re.sub(rf'.*/({OUR_DIRS}|library)/', r'\1/', loc.replace('src/../', ''))
    by_line, by_callee = collections.Counter(), collections.Counter()
    total = sum(n for _, n in samples) + unresolved
    apart = unresolved
    for a, n in samples:
        f = frames.get(a, [])
        if anchor:
            k = next((j for j in range(len(f) - 1, -1, -1) if anchored(f[j][0], anchor)), None)
            f = f[:k + 1] if k is not None else []
        if not f:
            apart += n
            continue
        by_line[short(f[-1][1])] += n
        callee = f[-2][0] if len(f) > 1 else '(its own code)'
        by_callee[ours_only(callee)] += n
    outside = f', {apart} outside {anchor} (or unresolved)' if anchor else f', {apart} unresolved'
    print(f"{total} samples in {within}{outside}")
    print_counts("by its own line:", by_line, top)
    print_counts("by the function inlined there:", by_callee, top)


if __name__ == '__main__':
    main()
