#!/usr/bin/env python3
"""tables.py — the markdown tables of docs/notes/large.md ("Large-object tier: measured results") from the
harness's results.csv (medians over the runs that passed):

    bench/large/tables.py RESULTS.csv > tables.md

Wall times come from the harness (and the programs' own timers); CPU times
(user + system, from getrusage in the programs) are shown next to them,
because on a shared machine wall time also counts time spent waiting for a
core.  Peak RSS is the harness's ru_maxrss of the whole run.
"""
import csv
import statistics
import sys
from collections import defaultdict

ALLOCS = ["strata", "glibc", "jemalloc", "tcmalloc", "mimalloc"]


def load(paths):
    runs = defaultdict(list)   # (name, allocator) -> [row]
    for path in paths:
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                if row["status"] != "ok":
                    continue
                metrics = {}
                for kv in filter(None, row["metrics"].split(";")):
                    k, v = kv.split("=", 1)
                    metrics[k] = float(v)
                row["m"] = metrics
                runs[(row["name"], row["allocator"])].append(row)
    return runs


def med(rows, key):
    vals = []
    for r in rows:
        if key == "wall_s":
            vals.append(float(r["wall_s"]))
        elif key == "rss_mib":
            vals.append(float(r["maxrss_kib"]) / 1024)
        elif key in r["m"]:
            vals.append(r["m"][key])
    return statistics.median(vals) if vals else None


def fmt(v, digits=3):
    if v is None:
        return "—"
    if v == 0:
        return "0"
    if abs(v) >= 1e5 or abs(v) < 1e-2:
        return "%.3g" % v
    return ("%." + str(digits) + "g") % v


def human(n):
    n = int(n)
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return "%d %s" % (n >> shift, unit)
    return "%d B" % n


def allocs_of(runs, name, extra=()):
    have = [a for a in list(ALLOCS) + list(extra) if (name, a) in runs]
    return have


def sweep_table(runs, name, extra=()):
    al = allocs_of(runs, name, extra)
    if not al:
        return ""
    sizes = sorted({int(k.split("@")[1]) for r in runs[(name, al[0])] for k in r["m"] if k.startswith("ns@")})
    out = ["| size | " + " | ".join("%s ns (faults)" % a for a in al) + " | glibc/strata | tcmalloc/strata |",
           "|---|" + "---|" * (len(al) + 2)]
    for s in sizes:
        cells, ns = [], {}
        for a in al:
            t = med(runs[(name, a)], "ns@%d" % s)
            f = med(runs[(name, a)], "faults@%d" % s)
            ns[a] = t
            cells.append("%s (%s)" % (fmt(t), fmt(f)))
        ratio = lambda a: fmt(ns[a] / ns["strata"]) if ns.get(a) and ns.get("strata") else "—"
        out.append("| %s | %s | %s | %s |" % (human(s), " | ".join(cells), ratio("glibc"), ratio("tcmalloc")))
    out.append("")
    out.append("CPU time (user + system) per iteration, ns:")
    out.append("")
    out.append("| size | " + " | ".join(al) + " |")
    out.append("|---|" + "---|" * len(al))
    for s in sizes:
        out.append("| %s | %s |" % (human(s), " | ".join(fmt(med(runs[(name, a)], "cpu_ns@%d" % s)) for a in al)))
    return "\n".join(out) + "\n"


def metric_table(runs, names, metrics, extra=()):
    """One row per (workload, allocator): the given metrics plus wall and RSS."""
    out = ["| workload | allocator | wall s | peak RSS MiB | " + " | ".join(m for m, _ in metrics) + " |",
           "|---|---|---|---|" + "---|" * len(metrics)]
    for n in names:
        al = allocs_of(runs, n, extra)
        for a in al:
            rows = runs[(n, a)]
            cells = [fmt(med(rows, m), d) for m, d in metrics]
            out.append("| %s | %s | %s | %s | %s |" % (n, a, fmt(med(rows, "wall_s")), fmt(med(rows, "rss_mib"), 4),
                                                       " | ".join(cells)))
    return "\n".join(out) + "\n"


def main():
    runs = load(sys.argv[1:])
    names = sorted({n for n, _ in runs})
    print("### 1. Size sweep (`sweep`): wall ns per malloc + touch + free, minor faults per iteration\n")
    print(sweep_table(runs, "sweep"))
    rnd = [n for n in ["random-256", "random-1024", "random-4096", "random-16384", "random-16384-200k"] if n in names]
    print("### 2. Random residency\n")
    print(metric_table(runs, rnd, [("ops_ms", 4), ("cpu_ms", 4), ("ns_per_op", 4)]))
    ml = [n for n in ["ml", "ml-half"] if n in names]
    print("### 3. ML-training-like trace\n")
    print(metric_table(runs, ml, [("ms_per_iter", 3), ("faults_per_iter", 3), ("first_iter_ms", 4), ("cpu_ms", 4)]))
    th = [n for n in names if n.startswith("threads-")]
    print("### Threads (large malloc/free, fixed total work)\n")
    print(metric_table(runs, th, [("ns_per_op", 4), ("mops_per_s", 3)]))
    if "ablation-sweep-16m" in names:
        print("### 4. Ablation: size sweep to 16 MiB (`ablation-sweep-16m`)\n")
        print(sweep_table(runs, "ablation-sweep-16m", extra=("strata-1tier", "strata-firstfit")))
    ab = [n for n in names if n.startswith("ablation-") and n != "ablation-sweep-16m"]
    if ab:
        print("### 4. Ablation\n")
        print(metric_table(runs, ab, [("ops_ms", 4), ("cpu_ms", 4), ("ms_per_iter", 3), ("faults_per_iter", 3)],
                           extra=("strata-1tier", "strata-firstfit")))


if __name__ == "__main__":
    main()
