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

With the per-job kcount pass (icount-kjob, icount-kstage lines: the
plugin's stage attribution, scripts/guest/kcount_stages.py), it prints per
job the instructions per I/O of each stage, client and server: the
module's own, the fair total (the module + rust_helper_* + sunrpc +
ib_core run inside the stage: what each module makes the kernel's RPC and
RDMA layers do for it, C's xdr_* and rdma_rw included) and all that ran
inside the stage (locks, the allocator, copies, wakeups, the device);
then what ran outside every stage, the module's total (the stages' and the
outside's sum), the whole kernel and the whole guest per I/O.
"""
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'guest'))
from kcount_stages import NAMES, SIDE  # noqa: E402

configs = sys.argv[1].split('+')
cats, funcs, iops = {}, {}, {}
kstage, kstats, kjob, koutside, kcal = {}, {}, {}, {}, {}
for line in sys.stdin:
    head, _, sym = line.partition(' sym=')
    kv = dict(re.findall(r'(\w+)=(\S+)', head))
    if line.startswith('icount-kstage '):
        kstage.setdefault(kv['prof'], {}).setdefault(kv['cfg'], {}).setdefault(int(kv['stage']), {})[kv['cat']] = \
            float(kv['instr_per_io'])
    elif line.startswith('icount-kstage-stats '):
        kstats[(kv['prof'], kv['cfg'])] = {k: int(v) for k, v in kv.items() if k not in ('cfg', 'prof')}
    elif line.startswith('icount-kstage-outside '):
        koutside.setdefault((kv['prof'], kv['cfg']), []).append(
            (float(kv['instr_per_io']), re.sub(r'\[[0-9a-f]{16}\]', '', sym.strip()).replace('rpcrdma_rs_main::', '')))
    elif line.startswith('icount-kcal '):
        kcal[kv['cfg']] = float(kv['kernel_instr'])
    elif line.startswith('icount-kjob '):
        kjob[(kv['job'], kv['cfg'])] = (int(kv['ios']), float(kv['IOPS']), kv.get('rpcs_per_op'))
    elif line.startswith('icount '):
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


# Per job and stage (the kcount pass, PROFILE bit 16).
FAIR = ('transport', 'rust_helper', 'sunrpc', 'ib_core')
# The jobs in the order the guest ran them (its JOBS list in
# scripts/scenarios/bench-icount.sh, the one place they are named): the
# order their lines first came in.
for job in kstage:
    per = kstage[job]
    cfgs = [c for c in configs if c in per]
    if not cfgs:
        continue
    unit = 'fstat()' if job.startswith('meta') else 'I/O'
    rpcs = [f"{c} {kjob[(job, c)][2]}" for c in cfgs if (job, c) in kjob and kjob[(job, c)][2]]
    note = f" (RPCs per fstat(): {', '.join(rpcs)})" if rpcs else ''
    print(f"\nkcount by stage, {job}: instructions per {unit}{note}, counted (a stage: while its entry")
    print("point is on the stack). module: the transport module's own; fair: module + rust_helper_*")
    print("+ sunrpc + ib_core inside the stage; all: everything inside it (locks, allocator, copies,")
    print("wakeups, the device's work it does inline)")

    def val(c, sid, kinds=None):
        d = per[c].get(sid, {})
        return sum(v for k, v in d.items() if kinds is None or k in kinds)

    def cell(vals):
        return ''.join(f"{v:>9.0f}" for v in vals)

    w = 9 * len(cfgs)
    print(f"{'':24}" + ''.join(f"{g:>{w}}" for g in ('module', 'fair', 'all')))
    print(f"{'stage':24}" + ''.join(f"{c[-8:]:>9}" for c in cfgs) * 3)
    sids = sorted({sid for c in cfgs for sid in per[c] if sid})
    rows = []
    for side in ('client', 'server'):
        mine = [sid for sid in sids if SIDE.get(sid) == side]
        for sid in mine:
            rows.append((NAMES.get(sid, str(sid)), [sid]))
        rows.append((f"{side} total", mine))
    rows.append(('all stages', sids))
    rows.append(('outside any stage', [0]))
    for name, group in rows:
        m = [sum(val(c, sid, ('transport',)) for sid in group) for c in cfgs]
        f = [sum(val(c, sid, FAIR) for sid in group) for c in cfgs]
        a = [sum(val(c, sid) for sid in group) for c in cfgs]
        print(f"{name:24}" + cell(m) + cell(f) + cell(a))
        if name.endswith(' total') or name == 'outside any stage':
            print()
    tot = [sum(val(c, sid, ('transport',)) for sid in per[c]) for c in cfgs]
    print(f"{'module total (kcount)':24}" + cell(tot) + ''.join(
        f"  {c}: {sum(val(c, sid, ('transport',)) for sid in sids):.0f} in stages + "
        f"{val(c, 0, ('transport',)):.0f} outside" for c in cfgs))
    kern = [sum(val(c, sid) for sid in per[c]) for c in cfgs]
    print(f"{'whole kernel':24}" + cell(kern) + ''.join(
        f"  {c}: idle {sum(per[c].get(sid, {}).get('idle', 0) for sid in per[c]):.0f}" for c in cfgs))
    if all(c in kcal and (job, c) in kjob for c in cfgs):
        print(f"{'  less the window':24}" + cell([k - kcal[c] / max(kjob[(job, c)][0], 1) for k, c in zip(kern, cfgs)])
              + "  (the snapshots' own shells: " + ', '.join(f"{c} {kcal[c]:.0f}" for c in cfgs) + " in all)")
    guest = [1e9 / kjob[(job, c)][1] if (job, c) in kjob and kjob[(job, c)][1] else 0 for c in cfgs]
    print(f"{'whole guest (1e9/IOPS)':24}" + cell(guest))
    print("inside all stages, by where it ran (per " + unit + "):")
    kinds = sorted({k for c in cfgs for sid in sids for k in per[c].get(sid, {})},
                   key=lambda k: (k not in FAIR, FAIR.index(k) if k in FAIR else 0, k))
    for k in kinds:
        print(f"  {k:22}" + cell([sum(per[c].get(sid, {}).get(k, 0) for sid in sids) for c in cfgs]))
    for c in cfgs:
        st = kstats.get((job, c))
        if st:
            print(f"  {c}: stage entries {st.get('entries', 0)} (with no frame to mark: {st.get('unplaced', 0)}), "
                  f"calls not followed for depth {st.get('overflow', 0)}, stacks dropped from a full table "
                  f"{st.get('collisions', 0)}")
        out = [(n, sym) for n, sym in koutside.get((job, c), []) if n >= 0.5]
        if out:
            print(f"  {c}: module functions outside every stage: " + '; '.join(
                f"{sym[:70]} {n:.0f}" for n, sym in out[:4]))
