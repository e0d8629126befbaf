#!/usr/bin/env python3
"""sampler.py — run inside one node: how much of its ranks' storage-backed
blocks is resident, summed over the node's ranks, sampled until told to stop.

Each rank writes DIR/ranges.<host>.<pid> ("pid start length"); every 10 ms
this reads, for each rank still running, the present bit of every page of
its range from /proc/<pid>/pagemap, and keeps the largest sum seen.
  sampler.py DIR HOST     prints "max_resident=BYTES samples=N ranks=R" when DIR/stop appears
"""
import glob, os, struct, sys, time

d, host = sys.argv[1], sys.argv[2]
page = os.sysconf("SC_PAGE_SIZE")
best = samples = 0
seen = set()
deadline = time.time() + 600   # a bound, should the caller never say stop
open(os.path.join(d, f"sampler-ready.{host}"), "w").close()   # the job starts after this
while not os.path.exists(os.path.join(d, "stop")) and time.time() < deadline:
    total = 0
    for f in glob.glob(os.path.join(d, f"ranges.{host}.*")):
        try:
            pid, start, length = (int(x) for x in open(f).read().split())
            with open(f"/proc/{pid}/pagemap", "rb") as pm:
                pm.seek(start // page * 8)
                raw = pm.read(length // page * 8)
        except (OSError, ValueError):
            continue   # not written yet, or the rank has exited
        seen.add(pid)
        total += sum(1 for (e,) in struct.iter_unpack("Q", raw) if e >> 63) * page
    if seen:
        samples += 1
        best = max(best, total)
    time.sleep(0.01)
print(f"max_resident={best} samples={samples} ranks={len(seen)}")
