#!/usr/bin/env python3
"""tables.py RESULTS_CSV — markdown tables of the transfer suite's medians.

One table per metric (bw_MBps, lat_us, memcpy_MBps, a2a_MBps): a row per
size, a column per workload x allocator (glibc = nothing preloaded, strata,
strata-huge = Strata with STRATA_HUGEPAGES=always).  Standard library only.
"""
import collections
import csv
import statistics
import sys


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: tables.py results.csv")
    try:
        rows = list(csv.DictReader(open(sys.argv[1])))
    except OSError as e:
        sys.exit("tables.py: cannot read %s: %s" % (sys.argv[1], e))
    vals = collections.defaultdict(list)
    for r in rows:
        if r.get("status") != "ok" or "transfer" not in r.get("suite", ""):
            continue
        for kv in r["metrics"].split(";"):
            if "=" in kv and "@" in kv:
                k, v = kv.split("=", 1)
                base, size = k.split("@", 1)
                vals[(base, r["name"], r["allocator"], int(size))].append(float(v))
    for base in ("bw_MBps", "memcpy_MBps", "lat_us", "a2a_MBps"):
        cols = sorted({(k[1], k[2]) for k in vals if k[0] == base})
        if not cols:
            continue
        sizes = sorted({k[3] for k in vals if k[0] == base})
        print("\n%s (median of runs)\n" % base)
        print("| size | " + " | ".join("%s %s" % c for c in cols) + " |")
        print("|---:|" + "---:|" * len(cols))
        for s in sizes:
            cells = []
            for c in cols:
                v = vals.get((base, c[0], c[1], s))
                cells.append("%.0f" % statistics.median(v) if v and base != "lat_us" else
                             "%.1f" % statistics.median(v) if v else "")
            print("| %s | %s |" % (human(s), " | ".join(cells)))


def human(n):
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return "%d %s" % (n // div, unit)
    return "%d B" % n


if __name__ == "__main__":
    main()
