#!/usr/bin/env python3
"""Prints bench-icount's exact kernel instruction counts (PROFILE bit 16).

    grep '^icount-k' results.txt | c++filt | scripts/kcount-report.py CONFIGS

Reads the guest's icount-kcount and icount-kfunc lines
(scripts/guest/kcount-diff.py) and prints, per profile, the kernel's
instructions per fio I/O by category for each config ('+' between), the
transport's ratio to the first config, and each config's costliest
transport functions. With the guest's `icount` lines among its input (fio's
IOPS per job), it also prints the transport module's share of the whole
guest's instructions per I/O and, from it, the most a config could gain on
the first with a transport module that ran no instructions at all: how far
the transport alone can move that profile's jobs.
"""
import re
import statistics
import sys

configs = sys.argv[1].split('+')
cats, funcs, iops = {}, {}, {}
for line in sys.stdin:
    head, _, sym = line.partition(' sym=')
    kv = dict(re.findall(r'(\w+)=(\S+)', head))
    if line.startswith('icount '):
        if 'job' in kv and 'IOPS' in kv and float(kv['IOPS']) > 0:
            iops.setdefault((kv['cfg'], kv['job']), []).append(float(kv['IOPS']))
    elif line.startswith('icount-kcount '):
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
    # The whole guest's instructions per I/O of the profile's jobs (their
    # names end in the profile's: the 1m profile is one 1 MiB write and one
    # read of as many I/Os, so the mean of the two is its per-I/O figure).
    whole = {}
    for c in configs:
        per_job = [1e9 / statistics.median(v) for (cfg, job), v in iops.items()
                   if cfg == c and job.endswith('-' + prof)]
        if per_job:
            whole[c] = statistics.mean(per_job)
    trans = per_cat.get('transport', {})
    if all(c in whole and c in trans for c in configs):
        print("transport module share of the whole guest's instructions per I/O (1e9 / IOPS of")
        print("the profile's jobs), and the ratio to the first config each would reach if its")
        print("transport module ran no instructions (the most the module alone can gain):")
        for c in configs:
            bound = whole[configs[0]] / max(whole[c] - trans[c], 1)
            print(f"  {c}: {100 * trans[c] / whole[c]:.2f}% of {whole[c]:.0f}, at most {bound:.3f}x")
    for c in configs:
        if (prof, c) in funcs:
            print(f"\n{c}, profile {prof}: the transport's costliest functions, instructions per fio I/O")
            for n, sym in funcs[(prof, c)]:
                print(f"{n:10.1f}  {sym[:150]}")
