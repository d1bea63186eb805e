#!/usr/bin/env python3
# Reads idle probe perf-script dumps (idle-CFG-JOB.script, PROFILE=2/3); prints per dump the I/O window (first to last aio or NFS direct-I/O wait), its idle time, and each idle period in it.
import sys, collections
from idle_an import io_window, short
for path in sys.argv[1:]:
    idle, comm, events, (w0, w1) = io_window(path)
    if w0 is None:
        print(path, 'no io window'); continue
    inw = [(max(a, w0), min(b, w1), x) for a, b, *x in idle if b > w0 and a < w1]
    it = sum(b - a for a, b, _ in inw)
    ncs = sum(1 for e in events if e[1] == 'CS' and w0 <= e[0] <= w1)
    print(f"{path.split('/')[-1]:32} io window {1e3*(w1-w0):8.3f} ms, idle {1e3*it:7.3f} ms in {len(inw)} periods, {ncs} context switches")
    for a, b, x in inw:
        print(f"     idle {1e6*(b-a):.0f}us at {a:.6f} -> {comm.get(x[0])} [{short(x[1])}] prev {comm.get(x[2])} [{short(x[3],4)}]")
