#!/usr/bin/env python3
"""summarize.py — pools one or more results.csv files written by bench/run-bench
for this suite and prints the markdown tables of docs/notes/workloads.md ("MapReduce-on-SMP workloads"): medians
of wall time, of the MapReduce phase alone (the programs' mr_seconds metric,
which leaves out data generation and the serial reference), of that phase's
CPU time (mr_cpu_seconds, when the programs printed it) and of peak RSS, per
workload and allocator, with geometric means of the ratios to glibc.

usage: summarize.py results.csv [results.csv ...]
"""
import csv
import math
import statistics
import sys
from collections import defaultdict

ALLOCATORS = ["glibc", "jemalloc", "tcmalloc", "mimalloc", "strata"]


def load(paths):
    rows = defaultdict(list)   # (workload, allocator) -> [(wall, mr, rss_mib)]
    order = []
    for path in paths:
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                if r["status"] != "ok":
                    continue
                metrics = dict(kv.split("=", 1) for kv in r["metrics"].split(";") if "=" in kv)
                key = (r["name"], r["allocator"])
                if r["name"] not in order:
                    order.append(r["name"])
                rows[key].append((float(r["wall_s"]), float(metrics.get("mr_seconds", "nan")),
                                  int(r["maxrss_kib"]) / 1024.0,
                                  float(metrics.get("mr_cpu_seconds", "nan"))))
    return rows, order


def table(title, rows, order, index, fmt):
    print("### " + title + "\n")
    print("| workload | runs | " + " | ".join(ALLOCATORS) + " | strata ÷ glibc | strata ÷ best other |")
    print("|---|---:|" + "---:|" * (len(ALLOCATORS) + 2))
    ratios = defaultdict(list)   # allocator -> median / glibc's median, per workload
    for name in order:
        med, spread, runs = {}, {}, set()
        for a in ALLOCATORS:
            vals = [v[index] for v in rows.get((name, a), []) if v[index] == v[index]]
            if vals:
                med[a] = statistics.median(vals)
                spread[a] = (min(vals), max(vals))
                runs.add(len(vals))
        if "glibc" in med:
            for a in med:
                ratios[a].append(med[a] / med["glibc"])
        cells = []
        for a in ALLOCATORS:
            cells.append((fmt % med[a]) if a in med else "–")
        others = {a: med[a] for a in ("jemalloc", "tcmalloc", "mimalloc") if a in med}
        ratio_g = ratio_b = "–"
        if "strata" in med and "glibc" in med:
            ratio_g = "%.2f" % (med["strata"] / med["glibc"])
        if "strata" in med and others:
            best = min(others, key=others.get)
            ratio_b = "%.2f (%s)" % (med["strata"] / others[best], best)
        print("| %s | %s | %s | %s | %s |" % (name, "/".join(str(r) for r in sorted(runs)),
                                              " | ".join(cells), ratio_g, ratio_b))
    # Geometric mean of the ratios to glibc, over workloads every allocator ran.
    full = [a for a in ALLOCATORS if len(ratios[a]) == len(order)]
    geo = {a: math.exp(statistics.mean(math.log(r) for r in ratios[a])) for a in full}
    print("| geometric mean ÷ glibc | | %s | | |" % " | ".join(
        ("%.3f" % geo[a]) if a in geo else "–" for a in ALLOCATORS))
    print()


def main():
    if len(sys.argv) < 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    rows, order = load(sys.argv[1:])
    table("Wall time, whole program (s, median)", rows, order, 0, "%.3f")
    table("MapReduce phase only: metric mr_seconds (s, median)", rows, order, 1, "%.3f")
    if any(v[3] == v[3] for vals in rows.values() for v in vals):
        table("MapReduce phase CPU time (user + system, all threads and ranks): metric "
              "mr_cpu_seconds (s, median)", rows, order, 3, "%.3f")
    table("Peak RSS (MiB, median)", rows, order, 2, "%.1f")
    return 0


if __name__ == "__main__":
    sys.exit(main())
