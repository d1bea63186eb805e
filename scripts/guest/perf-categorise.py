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

Kernel addresses are resolved here, not by perf: perf (6.1, Debian's) places
each module at /proc/modules' address with /proc/modules' size, but since
Linux 6.4 a module's text, data and read-only data are allocated apart and
that size is their sum, so its maps overlap the next modules' text (a
sample in rpcrdma.ko landed in [rdma_rxe], one in rdma_rxe.ko in
[udp_tunnel]), and it looks for the .ko files under /lib/modules, which the
guest does not have. Here every kernel address goes to the text symbol at
or below it in KALLSYMS, with that symbol's module.
"""
import bisect
import re
import sys

kallsyms, cfg, prof, kib, fio_ms, syms_out = sys.argv[1:7]
mib = float(kib) / 1024

addrs, names = [], []
for line in open(kallsyms):
    f = line.split()
    if len(f) < 3 or f[1] not in 'tTwW':
        continue
    a = int(f[0], 16)
    if a == 0:
        continue
    mod = f[3].strip('[]') if len(f) > 3 else ''
    addrs.append(a)
    names.append((f[2], mod))
order = sorted(range(len(addrs)), key=addrs.__getitem__)
addrs = [addrs[i] for i in order]
names = [names[i] for i in order]
if not addrs:
    sys.exit("no addresses in %s (kptr_restrict?)" % kallsyms)

KERNEL = 0xffff800000000000
IDLE = re.compile(r'^(default_idle|pv_native_safe_halt|native_safe_halt|arch_cpu_idle|do_idle|cpu_idle|default_idle_call)')
COPY = re.compile(r'(memcpy|memmove|copy_user|copy_page|copy_to_iter|copy_from_iter|rep_movs|copy_mc)')
CRC = re.compile(r'(crc32|icrc)')
IB = re.compile(r'^(ib_|rdma_|cma_|iw_|ucma_|__ib_)')
NFSD = re.compile(r'^(nfsd|nfs3svc|nfs4svc|nfssvc|svcxdr)')
NFS = re.compile(r'^(nfs|pnfs)')
SUNRPC = re.compile(r'^(rpc_|rpcauth|xprt_|svc_|xdr_|gss_|cache_|auth_|__rpc|__svc|__xprt)')


def category(sym, mod):
    if mod in ('rpcrdma', 'rpcrdma_rs'):
        return 'transport'
    if mod in ('rdma_rxe', 'siw'):
        # The software RDMA device (BENCH_DEV=siw runs siw): one category.
        return 'rxe'
    if IDLE.search(sym):
        return 'idle'
    if COPY.search(sym):
        return 'copy'
    if CRC.search(sym):
        return 'crc'
    if mod in ('ib_core', 'rdma_cm', 'iw_cm', 'ib_cm', 'ib_uverbs') or IB.search(sym):
        return 'ib_core'
    if mod == 'nfsd' or NFSD.search(sym):
        return 'nfsd'
    if mod in ('nfs', 'nfsv4') or NFS.search(sym):
        return 'nfs'
    if mod == 'sunrpc' or SUNRPC.search(sym):
        return 'sunrpc'
    return 'other_kernel'


cats, syms = {}, {}
for line in sys.stdin:
    f = line.split()
    if len(f) < 2:
        continue
    try:
        period, ip = int(f[0]), int(f[1], 16)
    except ValueError:
        continue
    if ip < KERNEL:
        key, c = ('', 'user'), 'user'
    else:
        i = bisect.bisect_right(addrs, ip) - 1
        key = names[i] if i >= 0 else ('?', '')
        c = category(*key)
    cats[c] = cats.get(c, 0) + period
    syms[(c,) + key] = syms.get((c,) + key, 0) + period

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
