#!/usr/bin/env python3
"""Prints bench-icount's exact kernel instruction counts (PROFILE bit 16).

    grep '^icount-k' results.txt | c++filt | scripts/kcount-report.py CONFIGS

Reads the guest's icount-kcount and icount-kfunc lines
(scripts/guest/kcount-diff.py) and prints, per profile, the kernel's
instructions per fio I/O by category for each config ('+' between), the
transport's ratio to the first config, and each config's costliest
transport functions.
"""
import re
import sys

configs = sys.argv[1].split('+')
cats, funcs = {}, {}
for line in sys.stdin:
    head, _, sym = line.partition(' sym=')
    kv = dict(re.findall(r'(\w+)=(\S+)', head))
    if line.startswith('icount-kcount '):
        cats.setdefault(kv['prof'], {}).setdefault(kv['cat'], {})[kv['cfg']] = float(kv['instr_per_io'])
    elif line.startswith('icount-kfunc '):
        # Crate hashes and the crate's own name add nothing to a name.
        sym = re.sub(r'\[[0-9a-f]{16}\]', '', sym.strip()).replace('rpcrdma_rs_main::', '')
        funcs.setdefault((kv['prof'], kv['cfg']), []).append((float(kv['instr_per_io']), sym))
ORDER = ['kernel', 'transport', 'rxe', 'ib_core', 'sunrpc', 'nfs', 'nfsd', 'copy', 'crc',
         'other_kernel', 'idle']
for prof, per_cat in sorted(cats.items()):
    print(f"\nkcount, profile {prof}: the kernel's instructions per fio I/O, counted by the kcount")
    print("plugin (each kernel translation block's executions between snapshots around the jobs)")
    print(f"{'category':14}" + ''.join(f"{c:>16}" for c in configs))
    for cat in ORDER + sorted(set(per_cat) - set(ORDER)):
        if cat in per_cat:
            row = per_cat[cat]
            print(f"{cat:14}" + ''.join(f"{row[c]:>16.1f}" if c in row else f"{'-':>16}" for c in configs))
    ref = per_cat.get('transport', {}).get(configs[0])
    for c in configs[1:]:
        t = per_cat.get('transport', {}).get(c)
        if ref and t:
            print(f"transport instructions per I/O, {c} / {configs[0]}: {t / ref:.2f}")
    for c in configs:
        if (prof, c) in funcs:
            print(f"\n{c}, profile {prof}: the transport's costliest functions, instructions per fio I/O")
            for n, sym in funcs[(prof, c)]:
                print(f"{n:10.1f}  {sym[:150]}")
