#!/usr/bin/env python3
# Reads an idle probe's perf-script dump (idle-CFG-JOB.script, PROFILE=2/3) [JOB]; prints the idle periods in the job thread's window, grouped by what woke the CPU and what ran before (-v: each one).
"""Idle periods in a `perf script --show-switch-events` dump of
perf record -a -g --switch-events -e context-switches -c 1 (one CPU)."""
import sys, re, collections
sw = re.compile(r'^(.+?)\s+(\d+)/(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+PERF_RECORD_SWITCH_CPU_WIDE (IN|OUT)\s*(preempt)?\s+(next|prev) pid/tid:\s+(\d+)/(\d+)')
cs = re.compile(r'^(.+?)\s+(\d+)/(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+context-switches:')
SKIP = {'schedule', 'schedule_idle', '__schedule', 'schedule_timeout', 'io_schedule', 'schedule_hrtimeout_range_clock',
        'schedule_hrtimeout_range', 'schedule_preempt_disabled', 'preempt_schedule_common', '__cond_resched'}
def main(path, t0=None, t1=None, top=4):
    lines = open(path).read().split('\n')
    cur = None  # tid running
    comm = {}
    lastchain = {}  # tid -> sleep chain (last context-switch sample)
    events = []
    i = 0
    while i < len(lines):
        l = lines[i]
        m = sw.match(l)
        if m:
            c, pid, tid, cpu, t, io, pre, np, npid, ntid = m.groups()
            t = float(t); tid = int(tid); comm[tid] = c.strip()
            events.append((t, io, tid, pre, int(ntid)))
            i += 1; continue
        m = cs.match(l)
        if m:
            c, pid, tid, cpu, t = m.groups(); tid = int(tid)
            chain = []
            i += 1
            while i < len(lines) and lines[i].startswith('\t'):
                parts = lines[i].split()
                if len(parts) >= 2: chain.append(parts[1])
                i += 1
            events.append((float(t), 'CS', tid, chain, None))
            continue
        i += 1
    # walk
    idle = []  # (start, end, next tid, next chain, prev tid, prev chain)
    sleepchain = {}
    running = None; idle_start = None; prev_before_idle = None
    for t, kind, tid, x, y in events:
        if kind == 'CS':
            sleepchain[tid] = x
        elif kind == 'IN':
            if tid == 0:
                idle_start = t; prev_before_idle = y
            elif running == 0 or y == 0:
                pass
        elif kind == 'OUT':
            if tid == 0 and idle_start is not None:
                idle.append((idle_start, t, y, list(sleepchain.get(y, [])), prev_before_idle, list(sleepchain.get(prev_before_idle, []))))
                idle_start = None
    return idle, comm, events
def short(chain, n=5):
    c = [f for f in chain if f not in SKIP and not f.startswith('[unknown]')]
    return ' < '.join(c[:n])
if __name__ == '__main__':
    path = sys.argv[1]
    idle, comm, events = main(path)
    # window: first and last event of the fio job thread(s): comm == job name
    job = sys.argv[2] if len(sys.argv) > 2 else None
    ts = [e[0] for e in events if job and comm.get(e[2], '') == job]
    w0, w1 = (min(ts), max(ts)) if ts else (events[0][0], events[-1][0])
    tot = w1 - w0
    inw = [x for x in idle if x[0] >= w0 and x[1] <= w1]
    idle_t = sum(b - a for a, b, *_ in inw)
    print(f"{path.split('/')[-1]}: job thread window {w0:.6f}-{w1:.6f} = {tot*1e3:.3f} ms; idle periods {len(inw)} totalling {idle_t*1e3:.3f} ms ({100*idle_t/tot if tot else 0:.1f}%)")
    by = collections.defaultdict(lambda: [0, 0.0])
    for a, b, nt, nch, pt, pch in inw:
        k = f"woke {comm.get(nt,'?')} [{short(nch)}]  | before idle: {comm.get(pt,'?')} [{short(pch,4)}]"
        by[k][0] += 1; by[k][1] += b - a
    for k, (n, d) in sorted(by.items(), key=lambda kv: -kv[1][1]):
        print(f"  {n:4d} x {d*1e3:8.3f} ms  {k}")
    if '-v' in sys.argv:
        for a, b, nt, nch, pt, pch in inw:
            print(f"    {a:.6f} {1e6*(b-a):7.0f}us -> {comm.get(nt,'?')}/{nt} [{short(nch)}]  prev {comm.get(pt,'?')}/{pt} [{short(pch,4)}]")

def io_window(path):
    """Window of the I/O phase: first to last context switch whose chain shows
    aio (read_events / io_getevents / io_submit) or an nfs direct wait."""
    idle, comm, events = main(path)
    ts = [e[0] for e in events if e[1] == 'CS' and any(('getevents' in f or 'read_events' in f or 'io_submit' in f or 'nfs_direct' in f or 'nfs_file_direct' in f) for f in e[3])]
    return idle, comm, events, (min(ts), max(ts)) if ts else (None, None)
