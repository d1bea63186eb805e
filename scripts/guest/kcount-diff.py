#!/usr/bin/env python3
"""The kernel's instructions between two kcount snapshots (bench-icount).

kcount-diff.py KALLSYMS BEGIN END CFG PROF IOS KIB FUNCS_OUT [IPS_OUT [STAGES_OUT]]

BEGIN and END are snapshots of scripts/icount-plugin/kcount.c ("vaddr
executions" per instruction, cumulative); their difference is what the
guest kernel executed in between, counted, not sampled. Each instruction
resolves to its symbol through KALLSYMS (scripts/guest/ksyms.py).
Prints, per category (the sampled profile's, plus cat=kernel, their sum):
  icount-kcount cfg=CFG prof=PROF cat=C instr_per_io=N kinstr_per_MiB=K
and the transport module's 20 costliest functions:
  icount-kfunc cfg=CFG prof=PROF rank=R instr_per_io=N sym=SYMBOL
and writes FUNCS_OUT: "instr_per_io category [module] symbol" for every
symbol that ran, costliest first; and IPS_OUT, if given, the transport's
executions by address ("executions symbol+0xoffset", the format of the
sampled ips-CFG-PROF.txt, which scripts/ips-lines.py resolves to source
lines). IOS: fio's I/Os between the snapshots; KIB: the KiB they moved.

When the snapshots hold the plugin's per-stage counts (kcount_stages.py
names the stages), it also prints what ran inside each stage, by
category, with rust_helper_* apart from other_kernel; stage=0 is what ran
outside every stage (the whole count less the stages'):
  icount-kstage cfg=CFG prof=PROF stage=ID cat=C instr_per_io=N
and the plugin's counters of stage entries between the snapshots:
  icount-kstage-stats cfg=CFG prof=PROF entries=N unplaced=N overflow=N collisions=N
the transport's 8 costliest functions outside every stage:
  icount-kstage-outside cfg=CFG prof=PROF instr_per_io=N sym=SYMBOL
and writes STAGES_OUT: "instr_per_io stage category [module] symbol" for
every symbol that ran inside a stage.
"""
import re
import sys

from ksyms import Symbols
from kcount_stages import NAMES


def load(path, stages=None, stats=None):
    counts = {}
    for line in open(path):
        f = line.split()
        if len(f) == 2:
            counts[int(f[0], 16)] = int(f[1])
        elif len(f) == 3 and stages is not None:
            stages[(int(f[2]), int(f[0], 16))] = int(f[1])
        elif line.startswith('# stages') and stats is not None:
            stats.update({k: int(v) for k, v in re.findall(r'(\w+)=(\d+)', line)})
    return counts


kallsyms, begin, end, cfg, prof, ios, kib, funcs_out = sys.argv[1:9]
ips_out = sys.argv[9] if len(sys.argv) > 9 else None
stages_out = sys.argv[10] if len(sys.argv) > 10 else None
ios, mib = max(int(ios), 1), max(float(kib) / 1024, 1 / 1024)
syms = Symbols(kallsyms)
if not syms.addrs:
    sys.exit("no addresses in %s (kptr_restrict?)" % kallsyms)
st_before, st_end, stats_before, stats_end = {}, {}, {}, {}
before = load(begin, st_before, stats_before)
after = load(end, st_end, stats_end)
per_cat, per_sym, ips = {}, {}, {}
for vaddr, n in after.items():
    n -= before.get(vaddr, 0)
    if n <= 0:
        continue
    cat, key, off = syms.resolve_at(vaddr)
    per_cat[cat] = per_cat.get(cat, 0) + n
    per_sym[(cat, key)] = per_sym.get((cat, key), 0) + n
    if cat == 'transport':
        ips[(key[0], off)] = n
per_cat['kernel'] = sum(per_cat.values())
for cat, n in sorted(per_cat.items(), key=lambda kv: -kv[1]):
    print(f"icount-kcount cfg={cfg} prof={prof} cat={cat} instr_per_io={n / ios:.1f} "
          f"kinstr_per_MiB={n / mib / 1000:.1f}")
ranked = sorted(per_sym.items(), key=lambda kv: -kv[1])
transport = [(key, n) for (cat, key), n in ranked if cat == 'transport']
for rank, ((sym, _mod), n) in enumerate(transport[:20], 1):
    print(f"icount-kfunc cfg={cfg} prof={prof} rank={rank} instr_per_io={n / ios:.1f} sym={sym}")
with open(funcs_out, 'w') as out:
    for (cat, (sym, mod)), n in ranked:
        out.write(f"{n / ios:.1f} {cat} [{mod or 'kernel'}] {sym}\n")
if ips_out:
    with open(ips_out, 'w') as out:
        for (sym, off), n in sorted(ips.items(), key=lambda kv: -kv[1]):
            out.write(f"{n} {sym}+{off:#x}\n")

if st_end:
    def stage_cat(cat, sym):
        return 'rust_helper' if sym.startswith('rust_helper_') else cat

    in_stage, stage_syms, inside = {}, {}, {}
    for (sid, vaddr), n in st_end.items():
        n -= st_before.get((sid, vaddr), 0)
        if n <= 0:
            continue
        cat, (sym, mod) = syms.resolve(vaddr)
        cat = stage_cat(cat, sym)
        in_stage[(sid, cat)] = in_stage.get((sid, cat), 0) + n
        inside[cat] = inside.get(cat, 0) + n
        stage_syms[(sid, cat, sym, mod)] = stage_syms.get((sid, cat, sym, mod), 0) + n
    # Outside every stage: the whole count less the stages', per category.
    whole = {}
    for (cat, (sym, _mod)), n in per_sym.items():
        c = stage_cat(cat, sym)
        whole[c] = whole.get(c, 0) + n
    for cat, n in whole.items():
        in_stage[(0, cat)] = n - inside.get(cat, 0)
    # The transport's own functions that ran outside every stage, costliest
    # first: what the stage table leaves out.
    in_mod = {}
    for (sid, cat, sym, mod), n in stage_syms.items():
        if cat == 'transport':
            in_mod[sym] = in_mod.get(sym, 0) + n
    outside = sorted(((n - in_mod.get(sym, 0), sym) for (cat, (sym, _m)), n in per_sym.items()
                      if cat == 'transport' and n > in_mod.get(sym, 0)), reverse=True)
    for n, sym in outside[:8]:
        print(f"icount-kstage-outside cfg={cfg} prof={prof} instr_per_io={n / ios:.1f} sym={sym}")
    for (sid, cat), n in sorted(in_stage.items()):
        print(f"icount-kstage cfg={cfg} prof={prof} stage={sid} cat={cat} instr_per_io={n / ios:.1f}")
    print(f"icount-kstage-stats cfg={cfg} prof={prof} "
          + ' '.join(f"{k}={stats_end.get(k, 0) - stats_before.get(k, 0)}"
                     for k in ('entries', 'unplaced', 'overflow', 'collisions', 'calls', 'rets')))
    if stages_out:
        with open(stages_out, 'w') as out:
            for (sid, cat, sym, mod), n in sorted(stage_syms.items(), key=lambda kv: (kv[0][0], -kv[1])):
                out.write(f"{n / ios:.1f} {NAMES.get(sid, sid)!r} {cat} [{mod or 'kernel'}] {sym}\n")
