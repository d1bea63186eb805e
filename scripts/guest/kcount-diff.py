#!/usr/bin/env python3
"""The kernel's instructions between two kcount snapshots (bench-icount).

kcount-diff.py KALLSYMS BEGIN END CFG PROF IOS KIB FUNCS_OUT [IPS_OUT]

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
"""
import sys

from ksyms import Symbols


def load(path):
    counts = {}
    for line in open(path):
        f = line.split()
        if len(f) == 2:
            counts[int(f[0], 16)] = int(f[1])
    return counts


kallsyms, begin, end, cfg, prof, ios, kib, funcs_out = sys.argv[1:9]
ips_out = sys.argv[9] if len(sys.argv) > 9 else None
ios, mib = max(int(ios), 1), max(float(kib) / 1024, 1 / 1024)
syms = Symbols(kallsyms)
if not syms.addrs:
    sys.exit("no addresses in %s (kptr_restrict?)" % kallsyms)
before = load(begin)
per_cat, per_sym, ips = {}, {}, {}
for vaddr, n in load(end).items():
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
