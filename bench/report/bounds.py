#!/usr/bin/env python3
"""bounds.py — each allocator of a run against the fastest of the others.

The report judges Strata by its time over the fastest other allocator per
workload.  This asks the same of every allocator in the run, which is the
bound such a target has on this machine: with several allocators and run-to-run
noise, the fastest of the others is a bar none of them clears everywhere.

usage: bounds.py RESULTS_CSV [--only REGEX] [--allocators A,B,...]

Per allocator: time geomean over glibc's, geomean of its time over the fastest
other's, the workloads within 1.10x and 1.05x of the fastest other, and its
worst workload.  Only workloads every listed allocator ran without failure
count, so all rows cover the same set.
"""
import argparse
import collections
import csv
import math
import re
import statistics
import sys

DEFAULT = "glibc,jemalloc,tcmalloc,mimalloc,mimalloc3,snmalloc,strata"


def medians(path, names_re):
    runs = collections.defaultdict(list)
    with open(path, newline="") as f:
        rows = csv.DictReader(f)
        for row in rows:
            if row.get("status") != "ok" or not names_re.search(row["name"]):
                continue
            try:
                runs[(row["name"], row["allocator"])].append(float(row["wall_s"]))
            except (KeyError, ValueError):
                sys.exit("bounds.py: %s: a row without a numeric wall_s (line %d)" % (path, rows.line_num))
    return {k: statistics.median(v) for k, v in runs.items()}


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def against_fastest_other(times, names, allocs):
    """Per allocator (in allocs' order): (time over glibc's, geomean of its
    time over the fastest other's, workloads within 1.10x, within 1.05x,
    (worst ratio, its workload)).  times: (workload, allocator) -> median
    seconds, for every pair of names x allocs."""
    out = []
    for al in allocs:
        ratios = [(times[(n, al)] / min(times[(n, o)] for o in allocs if o != al), n) for n in names]
        vs_glibc = geomean([times[(n, al)] / times[(n, "glibc")] for n in names]) if "glibc" in allocs else float("nan")
        out.append((al, vs_glibc, geomean([r for r, _ in ratios]), sum(r <= 1.10 for r, _ in ratios),
                    sum(r <= 1.05 for r, _ in ratios), max(ratios)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results")
    ap.add_argument("--only", default="", help="regular expression on workload names")
    ap.add_argument("--allocators", default=DEFAULT)
    a = ap.parse_args()
    allocs = a.allocators.split(",")
    if len(allocs) < 2:
        sys.exit("bounds.py: need at least two allocators")
    try:
        med = medians(a.results, re.compile(a.only))
    except OSError as e:
        sys.exit("bounds.py: %s" % e)
    except re.error as e:
        sys.exit("bounds.py: --only %r: %s" % (a.only, e))
    names = sorted({n for n, _ in med if all((n, al) in med for al in allocs)})
    if not names:
        sys.exit("bounds.py: no workload that all of %s ran in %s" % (",".join(allocs), a.results))
    print("%d workloads; time over the fastest of the other %d allocators, per workload" % (len(names), len(allocs) - 1))
    print("%-10s %12s %16s %9s %9s  %s" % ("allocator", "time/glibc", "time/fastest-oth", "<=1.10x", "<=1.05x", "worst"))
    for al, vs_glibc, vs_fastest, within10, within05, worst in against_fastest_other(med, names, allocs):
        print("%-10s %12.3f %16.3f %5d/%-3d %5d/%-3d  %.2f %s" % (
            al, vs_glibc, vs_fastest, within10, len(names), within05, len(names), worst[0], worst[1]))


if __name__ == "__main__":
    main()
