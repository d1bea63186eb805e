#!/usr/bin/env python3
"""Split a cpu-clock profile by where its samples landed (bench-icount).

perf-categorise.py KALLSYMS CFG PROF KIB FIO_MS SYMS_OUT < perf-script-output

Reads `perf script -F period,ip` on stdin and KALLSYMS, a copy of
/proc/kallsyms taken while the profiled modules were still loaded (with
kptr_restrict 0, so that it holds addresses). Prints one line per category
and one coverage line (KIB: what the profiled jobs moved, for the
per-MiB figures):
  icount-profile cfg=CFG prof=PROF cat=C ns=N pct=P kinstr_per_MiB=K
  icount-profile-coverage cfg=CFG prof=PROF busy_sampled_ms=M fio_ms=FIO_MS
and writes SYMS_OUT: "ns pct category [module] symbol" per symbol, most
sampled first.

A profile recorded with call chains (perf record -g: PROFILE bit 8) also
prints what the transport module causes, its callees included:
  icount-incl cfg=CFG prof=PROF cat=C kinstr_per_MiB=K
one line per category of the sampled function, counting the samples with a
frame of the transport module anywhere in their chain (cat=ALL: all of
them); and writes CALLS_OUT (the 7th argument): per transport function its
inclusive instructions per MiB, and per caller of a copy function (the
first frame of the chain outside the copy category) the copies' share.

IPS_OUT (the 8th argument) gets the samples that landed in the transport
module by address, as "samples symbol+0xoffset", most sampled first: with
a long job, where inside a function the instructions go (to read against
`objdump -dr` of the module the benchmark built).

Kernel addresses are resolved here, not by perf: perf (6.1, Debian's) places
each module at /proc/modules' address with /proc/modules' size, but since
Linux 6.4 a module's text, data and read-only data are allocated apart and
that size is their sum, so its maps overlap the next modules' text (a
sample in rpcrdma.ko landed in [rdma_rxe], one in rdma_rxe.ko in
[udp_tunnel]), and it looks for the .ko files under /lib/modules, which the
guest does not have. Here every kernel address goes to the text symbol at
or below it in KALLSYMS, with that symbol's module.
"""
import sys

from ksyms import Symbols

kallsyms, cfg, prof, kib, fio_ms, syms_out = sys.argv[1:7]
calls_out = sys.argv[7] if len(sys.argv) > 7 else None
ips_out = sys.argv[8] if len(sys.argv) > 8 else None
mib = float(kib) / 1024

SYMS = Symbols(kallsyms)
if not SYMS.addrs:
    sys.exit("no addresses in %s (kptr_restrict?)" % kallsyms)
resolve_at, resolve = SYMS.resolve_at, SYMS.resolve


def samples(lines):
    """(period, [ip, ...]) per sample, leaf first: `perf script -F
    period,ip` prints "period ip" per sample, or, for a profile with call
    chains, the period alone and the chain below it, one address a line."""
    period, chain = None, []
    for line in lines:
        f = line.split()
        if not f:
            continue
        if line[:1] == '\t' or (period is not None and len(f) == 1 and line[:1].isspace()
                                   and len(f[0]) > 8):
            try:
                chain.append(int(f[0], 16))
            except ValueError:
                pass
            continue
        if period is not None and chain:
            yield period, chain
        period, chain = None, []
        try:
            period = int(f[0])
        except ValueError:
            continue
        if len(f) > 1:
            try:
                chain = [int(f[1], 16)]
            except ValueError:
                pass
    if period is not None and chain:
        yield period, chain


cats, syms = {}, {}
# Transport samples by (symbol, offset in it).
ips = {}
# With call chains: what samples under a transport frame landed in, by
# category; inclusive instructions per transport function; copy callers.
incl_cats, incl_funcs, copy_callers, leaves = {}, {}, {}, {}
chained = False
period_ns = 0
for period, chain in samples(sys.stdin):
    period_ns = period_ns or period
    c, key, off = resolve_at(chain[0])
    cats[c] = cats.get(c, 0) + period
    if c == 'transport':
        ips[(key[0], off)] = ips.get((key[0], off), 0) + 1
    syms[(c,) + key] = syms.get((c,) + key, 0) + period
    if len(chain) < 2:
        continue
    chained = True
    frames = [resolve(ip) for ip in chain]
    funcs = {k for fc, k in frames if fc == 'transport'}
    if funcs:
        incl_cats[c] = incl_cats.get(c, 0) + period
        for k in funcs:
            incl_funcs[k] = incl_funcs.get(k, 0) + period
            under = leaves.setdefault(k, {})
            under[key] = under.get(key, 0) + period
    if c == 'copy':
        caller = next((k for fc, k in frames if fc != 'copy'), ('?', ''))
        copy_callers[caller] = copy_callers.get(caller, 0) + period

total = sum(cats.values()) or 1
busy = 0
for c, n in sorted(cats.items(), key=lambda x: -x[1]):
    ki = 0 if c == 'idle' else n / 1000 / mib
    if c != 'idle':
        busy += n
    print("icount-profile cfg=%s prof=%s cat=%s ns=%d pct=%.1f kinstr_per_MiB=%.0f"
          % (cfg, prof, c, n, 100 * n / total, ki))
print("icount-profile-coverage cfg=%s prof=%s busy_sampled_ms=%.1f fio_ms=%s"
      % (cfg, prof, busy / 1e6, fio_ms))
with open(syms_out, 'w') as out:
    for (c, sym, mod), n in sorted(syms.items(), key=lambda x: -x[1]):
        out.write("%d %.2f %s [%s] %s\n" % (n, 100 * n / total, c, mod or 'kernel', sym))
if chained:
    for c, n in sorted(incl_cats.items(), key=lambda x: -x[1]):
        print("icount-incl cfg=%s prof=%s cat=%s kinstr_per_MiB=%.0f" % (cfg, prof, c, n / 1000 / mib))
    print("icount-incl cfg=%s prof=%s cat=ALL kinstr_per_MiB=%.0f"
          % (cfg, prof, sum(incl_cats.values()) / 1000 / mib))
if chained and calls_out:
    with open(calls_out, 'w') as out:
        out.write("# transport functions, inclusive (callees too): kinstr_per_MiB [module] symbol\n")
        ranked = sorted(incl_funcs.items(), key=lambda x: -x[1])
        for (sym, mod), n in ranked:
            out.write("%.0f [%s] %s\n" % (n / 1000 / mib, mod, sym))
        # Where the time under the biggest ones went: the sampled functions
        # (the leaves), with the number of samples, which says how far to
        # trust a line (one sample is one period of cpu-clock).
        for k, _ in ranked[:12]:
            out.write("# under %s: kinstr_per_MiB samples [module] leaf\n" % k[0])
            for (sym, mod), n in sorted(leaves[k].items(), key=lambda x: -x[1])[:15]:
                out.write("  %.0f %d [%s] %s\n" % (n / 1000 / mib, round(n / period_ns), mod or 'kernel', sym))
        out.write("# callers of copy functions: kinstr_per_MiB (in the copy) [module] caller\n")
        for (sym, mod), n in sorted(copy_callers.items(), key=lambda x: -x[1]):
            out.write("%.0f [%s] %s\n" % (n / 1000 / mib, mod or 'kernel', sym))
if ips_out:
    with open(ips_out, 'w') as out:
        for (sym, off), n in sorted(ips.items(), key=lambda x: -x[1]):
            out.write("%d %s+%#x\n" % (n, sym, off))
