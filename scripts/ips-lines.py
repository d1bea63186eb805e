#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The transport's profile samples by source line and by function.

    scripts/ips-lines.py MODULE.ko IPS-FILE [TOP]

IPS-FILE is a bench-icount profile by address (`ips-CFG-PROF.txt` in the
VM's results: lines of `samples symbol+0xoffset`); MODULE.ko the module
that profile ran, built with debug information (bench-icount's
BENCH_LINES=1 builds it so: `KRUSTFLAGS=-Cdebuginfo=2`, which changes the
code a little, so profile that build, not the plain one). Each sample's
address is resolved with llvm-addr2line through the inlined frames, and
counted for the innermost frame in this repository's sources: its line,
and the function that line belongs to (inlined helpers such as
`XdrReader::take` count as themselves, not as the function they were
inlined into). Prints the TOP (default 40) functions and lines.
"""
import collections
import re
import subprocess
import sys


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    ko, ips = sys.argv[1], sys.argv[2]
    top = int(sys.argv[3]) if len(sys.argv) > 3 else 40
    # Symbols as perf printed them carry crate hashes; nm's do not.
    unhash = lambda s: re.sub(r'\[[0-9a-f]{16}\]', '', s)
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
    # This repository's sources, as the build named them
    # (<tree>/src/../xprtrdma/conn.rs); not the kernel's rust/ nor core's.
    ours = re.compile(r'/((?:src/proto|src|xprtrdma|svcrdma|rust)/[a-z0-9_]+\.rs:\d+)')
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
                by_func[re.sub(r'rpcrdma_rs_main::', '', func)] += n
                break
        else:
            other += n
    print(f"{total} samples, {other} outside this repository's sources (or unresolved)")
    print("by function (innermost of ours, inlined ones counted as themselves):")
    for k, v in by_func.most_common(top):
        print(f"{v:6} {k[:140]}")
    print("by line:")
    for k, v in by_line.most_common(top):
        print(f"{v:6} {k}")


if __name__ == '__main__':
    main()
