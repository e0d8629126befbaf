#!/usr/bin/env python3
"""sampler.py — run inside one node: how much of its ranks' storage-backed
blocks is resident, summed over the node's ranks, sampled until told to stop.

Each rank writes DIR/ranges.<host>.<pid> ("pid start length"); every 10 ms
this reads, for each rank still running, the present bit of every page of
its range from /proc/<pid>/pagemap, and keeps the largest sum seen.

The ranks are read one after another, not at one instant, and the group moves
memory between them all the time (one evicts, the other loads into the room):
on a loaded host the sampler was preempted between two ranks' reads, and the
sum counted the memory that moved twice (up to 4 MiB over a 16 MiB budget, with
no load over budget in the ranks' own counts).  So each sample reads every
rank's map, then all again in reverse order, and counts each rank at the
smaller of its two readings: memory moving one way between the reads is
counted once.
  sampler.py DIR HOST     prints "max_resident=BYTES samples=N ranks=R" when DIR/stop appears
"""
import glob, os, struct, sys, time

d, host = sys.argv[1], sys.argv[2]
page = os.sysconf("SC_PAGE_SIZE")
best = samples = 0
seen = set()
deadline = time.time() + 600   # a bound, should the caller never say stop
open(os.path.join(d, f"sampler-ready.{host}"), "w").close()   # the job starts after this
def read_map(pid, start, length):
    with open(f"/proc/{pid}/pagemap", "rb") as pm:
        pm.seek(start // page * 8)
        return pm.read(length // page * 8)


def present(raw):
    return sum(1 for (e,) in struct.iter_unpack("Q", raw) if e >> 63) * page


while not os.path.exists(os.path.join(d, "stop")) and time.time() < deadline:
    ranks = []
    for f in glob.glob(os.path.join(d, f"ranges.{host}.*")):
        try:
            r = tuple(int(x) for x in open(f).read().split())
        except (OSError, ValueError):
            continue
        if len(r) == 3:                    # (else not written yet)
            ranks.append(r)
    first, second = {}, {}
    for r in ranks:                        # raw reads only: close together
        try:
            first[r] = read_map(*r)
        except OSError:
            pass                           # the rank has exited
    for r in reversed(ranks):
        try:
            second[r] = read_map(*r)
        except OSError:
            pass
    total = 0
    for r in first:
        seen.add(r[0])
        total += min(present(first[r]), present(second[r])) if r in second else present(first[r])
    if first:
        samples += 1
        best = max(best, total)
    time.sleep(0.01)
print(f"max_resident={best} samples={samples} ranks={len(seen)}")
