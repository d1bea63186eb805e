"""Kernel addresses to symbols and categories, for the benchmark's profiles.

Shared by perf-categorise.py (sampled profiles) and kcount-diff.py (exact
counts from the kcount QEMU plugin). A copy of /proc/kallsyms taken while
the profiled modules are still loaded (kptr_restrict 0) resolves every
kernel address to the text symbol at or below it, with that symbol's
module: perf's own module maps are wrong on this kernel (see
perf-categorise.py).
"""
import bisect
import re

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


class Symbols:
    """The text symbols of a kallsyms copy, sorted by address."""

    def __init__(self, kallsyms):
        entries = []
        for line in open(kallsyms):
            f = line.split()
            if len(f) < 3 or f[1] not in 'tTwW':
                continue
            a = int(f[0], 16)
            if a == 0:
                continue
            entries.append((a, (f[2], f[3].strip('[]') if len(f) > 3 else '')))
        entries.sort(key=lambda e: e[0])
        self.addrs = [a for a, _ in entries]
        self.names = [n for _, n in entries]

    def resolve_at(self, ip):
        """(category, (symbol, module), offset in the symbol) of an address."""
        if ip < KERNEL:
            return 'user', ('', 'user'), 0
        i = bisect.bisect_right(self.addrs, ip) - 1
        if i < 0:
            return category('?', ''), ('?', ''), 0
        return category(*self.names[i]), self.names[i], ip - self.addrs[i]

    def resolve(self, ip):
        """(category, (symbol, module)) of an address."""
        c, key, _ = self.resolve_at(ip)
        return c, key
