#!/usr/bin/env python3
"""results_page.py RUN_DIR [OUT] — the users' results page (bench/RESULTS.md).

Made from one benchmark run (its results.csv and meta.json: the committed
record in bench/results/ when `make bench-record` calls it), so every figure
on the page comes from that run: the machine and versions, each family's
geometric means of time and peak RSS for every allocator compared, Strata
against the best other allocator per family, the workloads where Strata is
behind with the reason where one is known (bench/report/why.tsv), and how to
reproduce.  Writes OUT (default: RUN_DIR/../RESULTS.md) or, with '-', prints.
"""
import csv
import json
import math
import os
import re
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bounds import against_fastest_other  # noqa: E402  (beside this file)
BEHIND_TIME = 1.10   # Strata's time over the fastest other's that counts as behind
BEHIND_RSS = 1.25    # and peak RSS over the smallest other's


def fail(msg):
    sys.exit("results_page: %s" % msg)


def load(run_dir):
    csv_path, meta_path = os.path.join(run_dir, "results.csv"), os.path.join(run_dir, "meta.json")
    for p in (csv_path, meta_path):
        if not os.path.exists(p):
            fail("%s: no such file (a run directory holds results.csv and meta.json)" % p)
    try:
        with open(meta_path) as f:
            meta = json.load(f)
    except ValueError as e:
        fail("%s: not JSON (%s)" % (meta_path, e))
    rows = {}
    with open(csv_path, newline="") as f:
        reader = csv.DictReader(f)
        need = {"name", "family", "allocator", "status", "wall_s", "maxrss_kib"}
        if not reader.fieldnames or not need <= set(reader.fieldnames):
            fail("%s: header lacks %s" % (csv_path, ", ".join(sorted(need - set(reader.fieldnames or [])))))
        for n, r in enumerate(reader, 2):
            if r["status"] != "ok":
                continue
            try:
                t, rss = float(r["wall_s"]), float(r["maxrss_kib"]) / 1024
            except ValueError:
                fail("%s:%d: wall_s or maxrss_kib is not a number" % (csv_path, n))
            rows.setdefault((r["name"], r["allocator"]), (r["family"], [], []))
            rows[(r["name"], r["allocator"])][1].append(t)
            rows[(r["name"], r["allocator"])][2].append(rss)
    return meta, rows


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def fmt(x):
    if x != x:
        return "–"
    return ("%#.3g" % x).rstrip(".") if x < 100 else "%.0f" % x


def why_table():
    out = []
    path = os.path.join(HERE, "why.tsv")
    if os.path.exists(path):
        with open(path) as f:
            for n, line in enumerate(f, 1):
                line = line.rstrip("\n")
                if not line or line.startswith("#"):
                    continue
                if "\t" not in line:
                    fail("%s:%d: want PATTERN<TAB>REASON" % (path, n))
                pat, reason = line.split("\t", 1)
                try:
                    out.append((re.compile(pat), reason))
                except re.error as e:
                    fail("%s:%d: bad pattern (%s)" % (path, n, e))
    return out


def every_allocator(w, med, complete, allocs):
    """The same question asked of every allocator: the bar this machine sets."""
    w("The same question asked of every allocator, over all %d workloads: each one's time" % len(complete))
    w("divided by the fastest of the others on each workload (`bench/report/bounds.py`).  The")
    w("fastest of %d noisy medians is a bar no single allocator clears everywhere." % (len(allocs) - 1))
    w("")
    w("| allocator | time ÷ fastest other | within 1.10× of it | worst |")
    w("|---|---:|---:|---|")
    times = {k: v[0] for k, v in med.items()}
    for a, _, vs_fastest, within10, _, worst in against_fastest_other(times, complete, allocs):
        w("| %s | %s | %d of %d | %s× (%s) |" % (a, fmt(vs_fastest), within10, len(complete), fmt(worst[0]), worst[1]))
    w("")


def page(meta, rows):
    allocs = [a for a in meta.get("allocators", []) if not a.startswith("strata-")]
    if "strata" not in allocs or "glibc" not in allocs:
        fail("the run must compare strata with glibc (allocators: %s)" % ", ".join(allocs))
    others = [a for a in allocs if a != "strata"]
    med = {}   # (workload, allocator) -> (time, rss)
    family = {}
    for (name, alloc), (fam, ts, rs) in rows.items():
        if alloc in allocs:
            med[(name, alloc)] = (statistics.median(ts), statistics.median(rs))
            family[name] = fam
    # Workloads every allocator completed: the means compare like with like.
    complete = sorted(w for w in family if all((w, a) in med for a in allocs))
    fams = sorted({family[w] for w in complete})
    L = []
    w = L.append
    w("# Benchmark results")
    w("")
    w("What Strata costs against the allocators people use instead of it, measured on one")
    w("machine in one run (`make bench-record`; this page is made from that run by")
    w("`bench/report/results_page.py`, the run itself is in `bench/results/`). Times are")
    w("wall-clock seconds of the whole program, peak RSS the kernel's `ru_maxrss`; each")
    w("figure is the median of %s interleaved runs, and a run counts only when the" % meta.get("runs", "?"))
    w("program's own output check passed.")
    w("")
    w("- Date: %s; Strata %s" % (meta.get("date", "?"), meta.get("versions", {}).get("strata", "?")))
    w("- Machine: %s" % meta.get("machine", "?"))
    w("- Load average: %s" % meta.get("load", "?"))
    vers = meta.get("versions", {})
    w("- Versions: " + "; ".join("%s %s" % (a, vers.get(a, "?")) for a in allocs))
    w("- Command: `%s`%s" % (meta.get("command", "?"), " (the full set)" if not meta.get("quick") else " (the quick set)"))
    w("- Workloads every allocator completed: %d" % len(complete))
    w("")
    w("## Geometric means by family, relative to glibc (lower is better)")
    w("")
    w("Each cell: time / peak RSS, the geometric mean over the family's workloads of each")
    w("allocator's median divided by glibc's.")
    w("")
    w("| family (workloads) | " + " | ".join(allocs) + " |")
    w("|---|" + "---:|" * len(allocs))
    for fam in fams + [None]:
        ws = [x for x in complete if fam is None or family[x] == fam]
        cells = []
        for a in allocs:
            t = geomean([med[(x, a)][0] / med[(x, "glibc")][0] for x in ws])
            r = geomean([med[(x, a)][1] / med[(x, "glibc")][1] for x in ws])
            cells.append("%s / %s" % (fmt(t), fmt(r)))
        label = "**all (%d)**" % len(ws) if fam is None else "%s (%d)" % (fam, len(ws))
        w("| %s | %s |" % (label, " | ".join(cells)))
    w("")
    w("## Strata against the best other allocator, by family")
    w("")
    w("Geometric mean over the family of Strata's median divided by the fastest other")
    w("allocator's on each workload (time) and by the smallest other's (peak RSS): below 1")
    w("Strata is ahead of every other allocator.")
    w("")
    w("| family | time ÷ fastest other | peak RSS ÷ smallest other |")
    w("|---|---:|---:|")
    for fam in fams + [None]:
        ws = [x for x in complete if fam is None or family[x] == fam]
        t = geomean([med[(x, "strata")][0] / min(med[(x, a)][0] for a in others) for x in ws])
        r = geomean([med[(x, "strata")][1] / min(med[(x, a)][1] for a in others) for x in ws])
        w("| %s | %s | %s |" % ("**all**" if fam is None else fam, fmt(t), fmt(r)))
    w("")
    if complete:
        every_allocator(w, med, complete, allocs)
    w("## Where Strata is behind")
    w("")
    w("Workloads where Strata's time is over %.2f× the fastest other's or its peak RSS over" % BEHIND_TIME)
    w("%.2f× the smallest other's, with the reason where it is known." % BEHIND_RSS)
    w("")
    reasons = why_table()
    behind = []
    for x in complete:
        st, sr = med[(x, "strata")]
        fast = min(others, key=lambda a: med[(x, a)][0])
        small = min(others, key=lambda a: med[(x, a)][1])
        tt, rr = st / med[(x, fast)][0], sr / med[(x, small)][1]
        if tt > BEHIND_TIME or rr > BEHIND_RSS:
            why = next((r for p, r in reasons if p.search(x)), "not analysed yet")
            behind.append("| %s | %s× %s | %s× %s | %s |" % (x, fmt(tt), fast, fmt(rr), small, why))
    if behind:
        w("| workload | time | peak RSS | why |")
        w("|---|---:|---:|---|")
        L.extend(behind)
    else:
        w("None.")
    w("")
    w("## How to reproduce")
    w("")
    w("```sh")
    w("make bench                 # the quick set, a few minutes; report in bench/runs/latest/")
    w("make bench FULL=1          # every workload, about 45 minutes")
    w("make bench-record          # a full run copied into bench/results/ and this page remade")
    w("```")
    w("")
    w("`bench/README.md` says what each workload does and how the harness runs it;")
    w("`bench/results/report.md` has every workload's table, the metrics each program")
    w("printed and the plots. What was measured while Strata was developed, and why it")
    w("is built as it is, is in `docs/notes/`.")
    return "\n".join(L) + "\n"


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    run_dir = sys.argv[1]
    meta, rows = load(run_dir)
    text = page(meta, rows)
    out = sys.argv[2] if len(sys.argv) == 3 else os.path.join(run_dir, "..", "RESULTS.md")
    if out == "-":
        sys.stdout.write(text)
    else:
        with open(out, "w") as f:
            f.write(text)
        print("results_page: wrote %s" % out)


if __name__ == "__main__":
    main()
