#!/usr/bin/env python3
"""tables.py RESULTS_CSV [PLOT.png] — markdown tables of the transfer suite's medians.

One table per metric (bw_MBps, lat_us, memcpy_MBps, a2a_MBps, pull/push/memfd): a
row per size, a column per workload x allocator (glibc = nothing preloaded,
strata, strata-huge = Strata with STRATA_HUGEPAGES=always; see column()).  With PLOT.png,
also one log-log plot of bandwidth against size for the lines that matter
(needs matplotlib; the tables need only the standard library).
"""
import collections
import csv
import statistics
import sys


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: tables.py results.csv [plot.png]")
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
                vals[(base, r["name"], column(r["name"], r["allocator"]), int(size))].append(float(v))
    for base in ("bw_MBps", "memcpy_MBps", "lat_us", "a2a_MBps", "pull_MBps", "push_MBps", "memfd_MBps"):
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
            print("| %s | %s |" % (human(s), " | ".join(cells)), flush=True)
    if len(sys.argv) == 3:
        plot(vals, sys.argv[2])


# (metric, workload, allocator, label) drawn by plot()
LINES = [
    ("memcpy_MBps", "memcpy-strata", "auto", "memcpy (one process)"),
    ("bw_MBps", "chan-auto-strata", "auto", "Strata channel, Strata buffers"),
    ("bw_MBps", "chan-auto-arena", "auto", "Strata channel, shared-arena buffers"),
    ("bw_MBps", "chan-auto-mmap", "auto", "Strata channel, 4 KiB-page buffers"),
    ("bw_MBps", "chan-cma-mmap", "auto", "channel forced single copy, 4 KiB pages"),
    ("bw_MBps", "ompi-cma", "glibc", "Open MPI CMA, glibc"),
    ("bw_MBps", "ompi-cma", "strata", "Open MPI CMA, Strata preloaded"),
    ("bw_MBps", "ompi-nocma", "glibc", "Open MPI no CMA, glibc"),
    ("bw_MBps", "ompi-nocma", "strata", "Open MPI no CMA, Strata preloaded"),
    ("bw_MBps", "mpich", "glibc", "MPICH default, glibc"),
]


def plot(vals, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("tables.py: no matplotlib for the plot (run it with bench/.venv/bin/python)")
    fig, ax = plt.subplots(figsize=(9, 6))
    for base, name, alloc, label in LINES:
        pts = sorted((k[3], statistics.median(v)) for k, v in vals.items()
                     if k[0] == base and k[1] == name and k[2] == alloc)
        if pts:
            ax.plot([p[0] for p in pts], [p[1] / 1000 for p in pts], marker="o", ms=3, label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("bandwidth (GB/s, median)")
    ax.set_title("Transfers between two processes (bench/transfer)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print("\nplot: %s" % path)


def column(name, allocator):
    """The channel, memcpy and raw programs link libstrata and choose their
    buffers by flag, so the preloaded allocator changes nothing for them but
    STRATA_HUGEPAGES: their glibc and strata runs are pooled ("auto"), the
    strata-huge runs are "always".  MPI runs keep their allocator."""
    if name.startswith(("chan-", "memcpy-", "raw-")):
        return "always" if allocator == "strata-huge" else "auto"
    return allocator


def human(n):
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return "%d %s" % (n // div, unit)
    return "%d B" % n


if __name__ == "__main__":
    main()
