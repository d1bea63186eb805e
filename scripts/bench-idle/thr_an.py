#!/usr/bin/env python3
# Reads idle probe perf-script dumps (idle-CFG-JOB.script, PROFILE=2/3); prints per dump the fio job thread's lifetime, the idle time in it, and the idle periods grouped by wake-up.
import sys, collections
from idle_an import main, short
for path in sys.argv[1:]:
    idle, comm, events = main(path)
    fio_tids = sorted({e[2] for e in events if comm.get(e[2], '').startswith(('fio',)) or comm.get(e[2],'') in ('seq-write-1m','seq-read-1m','rand-read-4k')})
    # job thread: fio tid with most context switches whose chains mention aio
    cnt = collections.Counter(e[2] for e in events if e[1] == 'CS' and any('io_getevents' in f or 'read_events' in f for f in e[3]))
    if not cnt: print(path, 'no aio thread'); continue
    jt = cnt.most_common(1)[0][0]
    ts = [e[0] for e in events if e[2] == jt or (e[1] in ('IN', 'OUT') and e[4] == jt)]
    w0, w1 = min(ts), max(ts)
    inw = [(max(a, w0), min(b, w1), x) for a, b, *x in idle if b > w0 and a < w1]
    it = sum(b - a for a, b, _ in inw)
    print(f"{path.split('/')[-1]:32} job thread {jt} ({comm.get(jt)}) lifetime {1e3*(w1-w0):.1f} ms, idle in it {1e3*it:.1f} ms in {len(inw)} periods")
    by = collections.defaultdict(lambda: [0, 0.0])
    for a, b, x in inw:
        k = f"-> {comm.get(x[0])} [{short(x[1],4)}] | prev {comm.get(x[2])} [{short(x[3],4)}]"
        by[k][0] += 1; by[k][1] += b - a
    for k, (n, d) in sorted(by.items(), key=lambda kv: -kv[1][1])[:8]:
        print(f"   {n:4d} x {1e3*d:7.2f} ms {k}")
