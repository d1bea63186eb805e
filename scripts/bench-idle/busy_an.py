#!/usr/bin/env python3
# Reads idle probe perf-script dumps (idle-CFG-JOB.script, PROFILE=2/3); prints per dump the perf window, its idle time and the longest busy stretches between idle periods.
import sys
from idle_an import main, short
for path in sys.argv[1:]:
    idle, comm, events = main(path)
    # busy stretches between idle periods
    st = []
    prev_end = events[0][0]
    for a, b, *x in idle:
        st.append((a - prev_end, prev_end, a)); prev_end = b
    st.append((events[-1][0] - prev_end, prev_end, events[-1][0]))
    st.sort(reverse=True)
    tot = events[-1][0] - events[0][0]; it = sum(b - a for a, b, *_ in idle)
    print(f"{path.split('/')[-1]:32} perf window {1e3*tot:.1f} ms, idle {1e3*it:.1f} ms in {len(idle)} periods; longest busy stretches (ms): " +
          ', '.join(f"{1e3*d:.1f}" for d, a, b in st[:4]))
