"""report.py — turns bench/results/results.csv into report.md.

Standard library only (run-bench imports it before any virtual environment
exists).  Medians are taken over the runs that passed their check; a workload
with a failed run says so in its cell.  "Best other" is the best of every
allocator that is not Strata (glibc included); the project targets compare with
the best of every other allocator for time and the smallest of all for peak
RSS, and the Targets section checks exactly those.
"""
import csv
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bounds import against_fastest_other  # noqa: E402  (beside this file)

ORDER = ["glibc", "jemalloc", "tcmalloc", "mimalloc", "mimalloc3", "snmalloc", "strata"]
TIME_SLACK = 1.10   # within 10 % of the fastest other allocator, per workload
RSS_SLACK = 1.20    # peak RSS within 1.2x of the smallest
# Strata's time geomean of (Strata / fastest other) per workload must stay at or below this.
BEST_RATIO_TARGET = 0.97
# Strata's peak RSS geomean at most this times glibc's, and below every other allocator's.
RSS_GLIBC_SLACK = 1.05
PACKAGES = {"jemalloc": "libjemalloc2", "tcmalloc": "libgoogle-perftools4", "mimalloc": "libmimalloc2.0"}
# Peers installed by scripts/install-peers.sh: a VERSION file beside the library.
PEER_VERSIONS = {"mimalloc3": ("mimalloc3", "cmeel-mimalloc wheel"), "snmalloc": ("snmalloc", "snmalloc-sys crate")}
# Families run under emulation (bench/numa: a qemu guest under TCG): their
# times and RSS mean nothing, so they stay out of the time/RSS summaries and
# targets; the NUMA locality target is on their local_pct metric.
EMULATED_FAMILIES = {"numa"}
LOCAL_PCT_TARGET = 95.0


# ---- metadata -------------------------------------------------------------------

def _cmd(argv):
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def collect_meta(root, build, allocators, missing, runs, quick, command, suites, load_start="?", duration=0.0):
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            for ln in f:
                if ln.startswith("model name"):
                    cpu = ln.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    thp = ""
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            m = re.search(r"\[(\w+)\]", f.read())
            thp = m.group(1) if m else ""
    except OSError:
        pass
    versions = {"glibc": os.confstr("CS_GNU_LIBC_VERSION").replace("glibc ", "") if hasattr(os, "confstr") else ""}
    for a, pkg in PACKAGES.items():
        versions[a] = _cmd(["dpkg-query", "-W", "-f", "${Version}", pkg])
    peers = os.path.abspath(os.environ.get("BENCH_PEERS_DIR") or os.path.join(root, "bench", ".peers"))
    for a, (sub, source) in PEER_VERSIONS.items():
        try:
            with open(os.path.join(peers, sub, "VERSION")) as f:
                versions[a] = "%s (%s)" % (f.read().strip(), source)
        except OSError:
            versions[a] = ""
    commit = _cmd(["git", "-C", root, "rev-parse", "--short", "HEAD"])
    if commit and _cmd(["git", "-C", root, "status", "--porcelain", "--untracked-files=no", "src", "include"]):
        commit += " (with uncommitted changes in src/ or include/)"
    versions["strata"] = commit
    return {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": command, "quick": bool(quick), "runs": runs,
        "machine": "%s, %d cores, %s GiB, Linux %s, THP %s" % (
            cpu or platform.machine(), os.cpu_count() or 0, _mem_gib(), platform.release(), thp or "?"),
        "allocators": allocators, "missing": [m[0] for m in missing], "versions": versions,
        "load": "%s at the start, %s at the end" % (load_start, loadavg()), "duration_s": round(duration, 1),
        "commands": {e.name: e.command.replace(root + "/", "") for s in suites for e in s.entries},
    }


def _mem_gib():
    try:
        with open("/proc/meminfo") as f:
            kb = int(f.readline().split()[1])
        return "%.0f" % (kb / 1048576.0)
    except (OSError, ValueError, IndexError):
        return "?"


def write_meta(path, meta):
    with open(path, "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)


def read_meta(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


# ---- data -------------------------------------------------------------------------

def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def parse_metrics(text):
    out = {}
    for kv in (text or "").split(";"):
        k, eq, v = kv.partition("=")
        if eq:
            try:
                out[k] = float(v)
            except ValueError:
                pass
    return out


def allocator_order(names):
    known = [a for a in ORDER if a in names]
    rest = sorted(a for a in names if a not in ORDER)
    return known + rest


def is_strata(a):
    return a == "strata" or a.startswith("strata-")


class Cell:
    """The runs of one workload under one allocator."""

    def __init__(self):
        self.walls, self.rss, self.statuses, self.metrics = [], [], [], []

    def add(self, row):
        self.statuses.append(row["status"])
        if row["status"] == "ok":
            self.walls.append(float(row["wall_s"]))
            self.rss.append(float(row["maxrss_kib"]) / 1024.0)
            self.metrics.append(parse_metrics(row.get("metrics", "")))

    @property
    def ok(self):
        return bool(self.walls) and len(self.walls) == len(self.statuses)

    def time(self):
        return statistics.median(self.walls) if self.walls else None

    def peak(self):
        return statistics.median(self.rss) if self.rss else None

    def spread(self, what):
        """(min, max) of the runs that passed, or None."""
        vals = self.walls if what == "time" else self.rss
        return (min(vals), max(vals)) if vals else None

    def metric(self, name):
        vals = [m[name] for m in self.metrics if name in m]
        return statistics.median(vals) if vals else None

    def failure(self):
        bad = sorted(set(s for s in self.statuses if s != "ok"))
        return ", ".join(bad)


class Table:
    """Every workload (in order of appearance) by every allocator."""

    def __init__(self, rows):
        self.workloads = []      # names in order
        self.info = {}           # name -> (family, base, threads, suite)
        self.cells = {}          # (name, allocator) -> Cell
        allocs = set()
        for r in rows:
            n = r["name"]
            if n not in self.info:
                self.workloads.append(n)
                self.info[n] = (r["family"], r["base"], int(r["threads"]) if r["threads"] else None, r["suite"])
            allocs.add(r["allocator"])
            self.cells.setdefault((n, r["allocator"]), Cell()).add(r)
        self.allocators = allocator_order(allocs)

    def families(self):
        fams = []
        for n in self.workloads:
            f = self.info[n][0]
            if f not in fams:
                fams.append(f)
        return fams

    def cell(self, name, alloc):
        return self.cells.get((name, alloc))

    def value(self, name, alloc, what):
        c = self.cell(name, alloc)
        if c is None:
            return None
        return c.time() if what == "time" else c.peak()

    def best(self, name, what, among):
        vals = [(self.value(name, a, what), a) for a in among if self.value(name, a, what) is not None]
        return min(vals) if vals else (None, None)


def geomean(xs):
    xs = [x for x in xs if x is not None and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def fmt(v, digits=3):
    if v is None:
        return "–"
    if v == 0:
        return "0"
    mag = int(math.floor(math.log10(abs(v))))
    dec = max(0, digits - 1 - mag)
    return "%.*f" % (dec, v)


# ---- words for a user -----------------------------------------------------------------

# What each family stands for, to finish "for programs like ...".  A family not
# listed here is named as it is.
FAMILY_ABOUT = {
    "micro": "single-threaded loops of malloc/free, 8 B to 1 MiB",
    "programs": "single-threaded allocation-heavy programs: bignum arithmetic, a logic minimizer, an interpreter, a slow leak",
    "threads": "short-lived threads, blocks passed between threads, a C++ map built and destroyed by 8 threads",
    "streamflow": "multi-threaded servers and producer/consumer pipelines, many blocks freed by other threads",
    "mapreduce": "MapReduce-style data processing: k-means and graph search, on threads and MPI ranks",
    "large": "programs with large blocks, KiB to GiB: scientific arrays, ML tensors",
    "large-ablation": "large blocks, comparing Strata's own large-tier designs",
    "replay": "real programs replayed from recorded traces: Python, SQLite, GCC",
    "replay-synthetic": "synthetic allocation traces: random sizes, an ML training loop, a size sweep",
    "storage": "programs that keep data in storage-backed or tiered memory",
    "transfer": "programs that hand buffers between processes or devices",
}

ALLOCATOR_ABOUT = {
    "glibc": "the C library's own malloc (what a program uses with nothing preloaded)",
    "jemalloc": "jemalloc (Debian's libjemalloc2), preloaded",
    "tcmalloc": "tcmalloc from gperftools (libgoogle-perftools4), preloaded",
    "mimalloc": "mimalloc 2 (Debian's libmimalloc2.0), preloaded",
    "mimalloc3": "mimalloc 3 (the shared library of the cmeel-mimalloc wheel, PyPI), preloaded, with "
                 "`MIMALLOC_ALLOW_THP=0` (its default asks for transparent huge pages, and each large block "
                 "then costs whole 2 MiB pages: tens of times the peak RSS of the others on random large blocks)",
    "snmalloc": "snmalloc (libsnmallocshim.so built in Release from the snmalloc-sys crate's sources), preloaded",
    "strata": "Strata as built (build/libstrata.so), preloaded, default options",
}

# What a Strata option in a #variant changes, for the variant's one line.
OPTION_ABOUT = {
    ("STRATA_LARGE_THRESHOLD", "0"): "every request, however small, goes to the large tier (a single tier)",
    ("STRATA_LARGE_FIT", "first"): "the large tier places blocks first-fit (address order) instead of best-fit",
    ("STRATA_PURGE_DELAY_MS", "-1"): "free memory is never given back to the OS",
    ("STRATA_PURGE_DELAY_MS", "0"): "free memory is given back to the OS at once",
    ("STRATA_HUGEPAGES", "never"): "no transparent huge pages",
    ("STRATA_HUGEPAGES", "always"): "transparent huge pages on every mapping",
    ("STRATA_CHECK", "1"): "full double-free and invalid-free checks",
}


def variant_about(name, env):
    parts = [OPTION_ABOUT.get((k, v), "%s=%s" % (k, v)) for k, v in sorted(env.items())]
    return "Strata where %s (`%s`)" % ("; ".join(parts), " ".join("%s=%s" % kv for kv in sorted(env.items())))


def fmt_mib(v):
    """A size given in MiB, as a reader says it (512 KiB, 21.4 MiB, 1.43 GiB)."""
    return human_size(v * 1024 * 1024)


def human_size(x):
    """64 KiB, 1 MiB, 1.5 GiB: a byte count as a reader says it."""
    x = float(x)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(x) < 1024 or unit == "TiB":
            return ("%d %s" % (x, unit)) if x == int(x) else ("%s %s" % (fmt(x), unit))
        x /= 1024.0


def times(r):
    """A ratio as '2.1× faster' / '1.3× slower' (of time; lower is better)."""
    if r is None:
        return "–"
    if abs(r - 1) < 0.05:
        return "about as fast as"
    return "%s× faster than" % fmt(1 / r, 2) if r < 1 else "%s× slower than" % fmt(r, 2)


def verdict_lines(t, ref):
    """One line per family: how Strata compares, in words a user acts on."""
    out = []
    base = [a for a in t.allocators if not a.startswith("strata-")]
    others = [a for a in base if a != "strata"]
    if "strata" not in base or not others:
        return out
    for fam in t.families():
        if fam in EMULATED_FAMILIES:
            continue
        names = [n for n in t.workloads if t.info[n][0] == fam
                 and all(t.cell(n, a) and t.cell(n, a).ok for a in base)]
        if not names:
            continue
        g = {a: geomean([t.value(n, a, "time") / t.value(n, ref, "time") for n in names]) for a in base}
        m = {a: geomean([t.value(n, a, "rss") / t.value(n, ref, "rss") for n in names]) for a in base}
        best = min(others, key=lambda a: g[a])
        lean = min(others, key=lambda a: m[a])
        about = FAMILY_ABOUT.get(fam, "the %s workloads" % fam)
        memory = "**%s× %s's**" % (fmt(m["strata"] / m[ref], 2), ref)
        if lean != ref:
            memory += " and %s× the leanest other's (%s)" % (fmt(m["strata"] / m[lean], 2), lean)
        out.append("- **For %s** — %s; %d workload%s: Strata is **%s %s** and **%s the best other, %s**; "
                   "its peak memory is %s."
                   % (fam, about, len(names), "" if len(names) == 1 else "s", times(g["strata"] / g[ref]), ref,
                      times(g["strata"] / g[best]), best, memory))
    return out


# ---- rendering ----------------------------------------------------------------------

def render(rows, meta, plots):
    t = Table(rows)
    out = []
    w = out.append
    w("# Strata benchmark report\n")
    if meta and meta.get("interrupted"):
        w("**Interrupted run** (%s): the figures below cover only what was measured before.\n"
          % meta["interrupted"])
    ref0 = "glibc" if "glibc" in t.allocators else (t.allocators[0] if t.allocators else "?")
    verdict = verdict_lines(t, ref0)
    if verdict:
        w("## Should I use Strata?\n")
        w("Per kind of program, the geometric mean over its workloads of the median wall time and "
          "median peak RSS, relative to %s (the workloads every allocator completed; lower time "
          "and memory are better). \"The best other\" is the fastest of the other allocators for those "
          "workloads.\n" % ref0)
        out.extend(verdict)
        w("")
    w("## What was compared\n")
    for a in t.allocators:
        if a in (meta or {}).get("extra", {}):
            w("- `%s`: `%s`, preloaded (given with `--with`)" % (a, meta["extra"][a]))
        elif a in ALLOCATOR_ABOUT:
            w("- `%s`: %s" % (a, ALLOCATOR_ABOUT[a]))
        elif a.startswith("strata-") and a in (meta or {}).get("variants", {}):
            w("- `%s`: %s" % (a, variant_about(a, meta["variants"][a])))
        else:
            w("- `%s`: a Strata variant defined by a `#variant` line of its suite" % a)
    w("")
    w("Every workload ran under each of them, from the repository root, in its own process. Times "
      "are wall-clock seconds of the whole program (or its own measured part where the suite says so), "
      "peak RSS is the kernel's `ru_maxrss` (MiB), both the median over the runs that passed the "
      "program's own output check; the range after a median is the fastest and slowest of those "
      "runs (min–max).\n")
    w("## This run\n")
    if meta:
        w("- Date: %s" % meta.get("date", "?"))
        w("- Command: `%s`%s" % (meta.get("command", "?"), " (quick set)" if meta.get("quick") else ""))
        w("- Runs per allocator and workload: %s, interleaved (run 1 of every allocator, then run 2, ...)"
          % meta.get("runs", "?"))
        w("- Machine: %s" % meta.get("machine", "?"))
        if meta.get("load"):
            w("- Load average (1, 5, 15 min): %s; the run took %s s. Other jobs on the machine make "
              "times noisier; a load above the core count means they shared the cores with it."
              % (meta["load"], meta.get("duration_s", "?")))
        v = meta.get("versions", {})
        w("- Versions: " + "; ".join("%s %s" % (a, v.get(a) or "?") for a in t.allocators if not
                                      a.startswith("strata-")))
        if meta.get("missing"):
            w("- Not available here, left out: %s" % ", ".join(meta["missing"]))
        w("")
    others = [a for a in t.allocators if not is_strata(a)]
    fast = [a for a in t.allocators if not is_strata(a)]
    has_strata = "strata" in t.allocators
    ref = "glibc" if "glibc" in t.allocators else t.allocators[0]

    # Geometric means over the workloads every allocator completed.  Strata
    # variants (#variant) run in one suite only: theirs cover the workloads
    # they ran, and say over how many.
    base = [a for a in t.allocators if not a.startswith("strata-")]
    complete = [n for n in t.workloads if all(t.cell(n, a) and t.cell(n, a).ok for a in base)
                and t.info[n][0] not in EMULATED_FAMILIES]

    def gmean(a, what, names):
        names = [n for n in names if t.cell(n, a) and t.cell(n, a).ok]
        g = geomean([t.value(n, a, what) / t.value(n, ref, what) for n in names])
        if g is None:
            return "–"
        return fmt(g) if len(names) == len(complete) or a in base else "%s (%d)" % (fmt(g), len(names))
    w("## All workloads: geometric means\n")
    w("Geometric mean, over the %d of %d workloads that every allocator completed, of each allocator's "
      "median relative to %s's (lower is better). A Strata variant's mean covers the workloads it ran "
      "(their number in parentheses).\n" % (len(complete), len(t.workloads), ref))
    w("| | " + " | ".join(t.allocators) + " |")
    w("|---|" + "---:|" * len(t.allocators))
    for what, label in (("time", "time"), ("rss", "peak RSS")):
        w("| %s | " % label + " | ".join(gmean(a, what, complete) for a in t.allocators) + " |")
    for fam in t.families():
        names = [n for n in complete if t.info[n][0] == fam]
        if not names:
            continue
        w("| time, %s (%d) | " % (fam, len(names)) + " | ".join(
            gmean(a, "time", names) if any(t.cell(n, a) for n in names) else "–" for a in t.allocators) + " |")
    w("")
    if has_strata and complete:
        gm_t = {a: geomean([t.value(n, a, "time") / t.value(n, ref, "time") for n in complete]) for a in base}
        gm_r = {a: geomean([t.value(n, a, "rss") / t.value(n, ref, "rss") for n in complete]) for a in base}
        if fast:
            best_t = min(fast, key=lambda a: gm_t[a])
            ok_t = gm_t["strata"] <= gm_t[best_t]
            w("- Project target, time: Strata's geometric mean %s vs the best of the other allocators "
              "(%s) %s: **%s**." % (fmt(gm_t["strata"]), best_t, fmt(gm_t[best_t]), "met" if ok_t else "missed"))
            # The bound no single allocator reaches: the fastest other per workload.
            vs_best = geomean([t.value(n, "strata", "time") / t.best(n, "time", fast)[0] for n in complete])
            w("- Project target, time against the fastest other per workload: geometric mean of "
              "Strata ÷ fastest other %s, target ≤ %s: **%s**."
              % (fmt(vs_best), fmt(BEST_RATIO_TARGET), "met" if vs_best <= BEST_RATIO_TARGET else "missed"))
            # The same asked of every allocator: what the bar is on this machine.
            if len(base) > 2:
                tmed = {(n, a): t.value(n, a, "time") for n in complete for a in base}
                every = against_fastest_other(tmed, complete, base)
                w("  The same of every allocator (its time ÷ the fastest of the others, geometric mean; "
                  "`bench/report/bounds.py`): %s; the lowest, %s, is the bar this machine sets."
                  % (", ".join("%s %s" % (a, fmt(g)) for a, _, g, _, _, _ in every),
                     fmt(min(g for _, _, g, _, _, _ in every))))
        if others:
            best_r = min(others, key=lambda a: gm_r[a])
            ok_r = gm_r["strata"] <= RSS_SLACK * gm_r[best_r]
            w("- Project target, peak RSS: Strata's geometric mean %s vs the smallest (%s) %s, limit %.1f×: **%s**."
              % (fmt(gm_r["strata"]), best_r, fmt(gm_r[best_r]), RSS_SLACK, "met" if ok_r else "missed"))
            lean = [a for a in others if a != ref and a in gm_r]
            if ref == "glibc" and lean:
                lean_r = min(lean, key=lambda a: gm_r[a])
                ok_l = gm_r["strata"] <= RSS_GLIBC_SLACK and gm_r["strata"] <= gm_r[lean_r]
                w("- Project target, peak RSS against glibc: Strata's geometric mean %s× glibc's (limit %s×) "
                  "and the lowest of the other allocators (the leanest, %s: %s): **%s**."
                  % (fmt(gm_r["strata"]), fmt(RSS_GLIBC_SLACK), lean_r, fmt(gm_r[lean_r]),
                     "met" if ok_l else "missed"))
        w("")

    for fam in t.families():
        names = [n for n in t.workloads if t.info[n][0] == fam]
        w("## Family: %s\n" % fam)
        about = FAMILY_ABOUT.get(fam, "the %s workloads" % fam)
        w("%s.\n" % (about[0].upper() + about[1:]))
        for what, label in (("time", "Time"), ("rss", "Peak RSS")):
            w("### %s (median, and min–max of the runs when they differ)\n" % label)
            head = ["workload"] + t.allocators
            if has_strata:
                head += ["strata ÷ glibc", "strata ÷ best other"]
            w("| " + " | ".join(head) + " |")
            w("|---|" + "---:|" * (len(head) - 1))
            for n in names:
                cells = []
                for a in t.allocators:
                    c = t.cell(n, a)
                    if c is None:
                        cells.append("–")
                    elif not c.walls:
                        cells.append("FAIL (%s)" % c.failure())
                    else:
                        v = c.time() if what == "time" else c.peak()
                        lo, hi = c.spread(what)
                        show = (lambda x: fmt(x) + " s") if what == "time" else fmt_mib
                        s = show(v)
                        if fmt(lo) != fmt(hi):
                            s += " (%s–%s)" % (show(lo)[:-2].rstrip() if what == "time" else show(lo),
                                               show(hi)[:-2].rstrip() if what == "time" else show(hi))
                        if not c.ok:
                            s += " (%d/%d ok: %s)" % (len(c.walls), len(c.statuses), c.failure())
                        cells.append(s)
                if has_strata:
                    sv = t.value(n, "strata", what)
                    g = t.value(n, "glibc", what)
                    bv, ba = t.best(n, what, others)
                    cells.append(fmt(sv / g) + "×" if sv and g else "–")
                    cells.append("%s× (%s)" % (fmt(sv / bv), ba) if sv and bv else "–")
                w("| %s | " % n + " | ".join(cells) + " |")
            w("")
        for p in plots:
            if os.path.basename(p) == "family-%s.png" % fam:
                w("![%s](plots/%s)\n" % (fam, os.path.basename(p)))

    scaling = [p for p in plots if os.path.basename(p).startswith("scaling-")]
    sweeps = [p for p in plots if os.path.basename(p).startswith("sweep-")]
    if scaling or sweeps:
        w("## Thread scaling and size sweeps\n")
        for p in scaling + sweeps:
            w("![%s](plots/%s)\n" % (os.path.basename(p)[:-4], os.path.basename(p)))

    if has_strata:
        w("## Project targets (for Strata's developers)\n")
        w("Per workload: Strata faster than glibc; Strata's time within %d %% of the fastest of "
          "the other allocators; Strata's peak RSS within %.1f× of the smallest of all.\n"
          % (round((TIME_SLACK - 1) * 100), RSS_SLACK))
        misses = []
        met = 0
        timed = [n for n in t.workloads if t.info[n][0] not in EMULATED_FAMILIES]
        for n in timed:
            c = t.cell(n, "strata")
            if c is None:
                continue
            if not c.ok:
                misses.append("- %s: Strata failed (%s)" % (n, c.failure() or "no run"))
                continue
            st, sr = c.time(), c.peak()
            why = []
            g = t.value(n, "glibc", "time")
            if g is not None and st >= g:
                why.append("not faster than glibc (%s s vs %s s)" % (fmt(st), fmt(g)))
            bv, ba = t.best(n, "time", fast)
            if bv is not None and st > TIME_SLACK * bv:
                why.append("time %s× the fastest (%s, %s s vs %s s)" % (fmt(st / bv), ba, fmt(st), fmt(bv)))
            rv, ra = t.best(n, "rss", others)
            if rv is not None and sr > RSS_SLACK * rv:
                why.append("peak RSS %s× the smallest (%s, %s MiB vs %s MiB)" % (fmt(sr / rv), ra, fmt(sr), fmt(rv)))
            if why:
                misses.append("- %s: %s" % (n, "; ".join(why)))
            else:
                met += 1
        w("All targets met on %d of %d workloads.\n" % (met, len(timed)))
        out.extend(misses)
        w("")
        render_locality_targets(t, w)

    render_metrics(t, w)

    failed = [(n, a, t.cell(n, a)) for n in t.workloads for a in t.allocators
              if t.cell(n, a) and not t.cell(n, a).ok]
    if failed:
        w("## Failed runs\n")
        w("A run fails when it exits non-zero, is killed, or does not print `check ok`; "
          "`failures.log` next to this report has the last lines of each one's output.\n")
        for n, a, c in failed:
            w("- %s under %s: %d of %d runs failed (%s)" % (n, a, len(c.statuses) - len(c.walls),
                                                            len(c.statuses), c.failure()))
        w("")

    cmds = meta.get("commands", {}) if meta else {}
    if cmds:
        w("## Commands\n")
        w("Each ran from the repository root, once per allocator and run, with LD_PRELOAD set to the "
          "allocator's library (none for glibc).\n")
        w("| workload | family | command |")
        w("|---|---|---|")
        for n in t.workloads:
            if n in cmds:
                w("| %s | %s | `%s` |" % (n, t.info[n][0], cmds[n]))
        w("")
    return "\n".join(out) + "\n"


SWEEP = re.compile(r"^(.+)@([0-9.]+)$")


def render_locality_targets(t, w):
    """The NUMA locality target: Strata keeps >= 95 % of blocks on their thread's node, the most of all."""
    names = [n for n in t.workloads if t.info[n][0] in EMULATED_FAMILIES]
    if not names:
        return
    w("## Target: NUMA locality\n")
    w("Share of sampled blocks on their allocating thread's node (`local_pct`, medians), in the "
      "two-node qemu guest. Times under TCG emulation are not comparable and are left out of every "
      "summary above. Target: Strata at least %g %% and the highest of all.\n" % LOCAL_PCT_TARGET)
    allocs = [a for a in t.allocators if any(t.cell(n, a) for n in names)]
    w("| workload | " + " | ".join(allocs) + " | target |")
    w("|---|" + "---:|" * len(allocs) + "---|")
    for n in names:
        # A line that runs several workloads in one guest boot (locality.sh
        # --each) reports local_pct_NAME for each: one row per workload.
        each = sorted({m[len("local_pct_"):] for a in allocs if t.cell(n, a)
                       for ms in t.cell(n, a).metrics for m in ms if m.startswith("local_pct_")})
        for label, metric in ([("%s: %s" % (n, e), "local_pct_" + e) for e in each] or [(n, "local_pct")]):
            vals = {}
            for a in allocs:
                c = t.cell(n, a)
                v = c.metric(metric) if c and c.ok else None
                if v is not None:
                    vals[a] = v
            sv = vals.get("strata")
            best = max((v for a, v in vals.items() if a != "strata"), default=None)
            ok = sv is not None and sv >= LOCAL_PCT_TARGET and (best is None or sv >= best)
            w("| %s | " % label + " | ".join(fmt(vals[a]) if a in vals else "–" for a in allocs)
              + " | %s |" % ("met" if ok else "**missed**"))
    w("")


def render_metrics(t, w):
    """Sweep metrics (NAME@X) as an X-by-allocator table; the rest in one table."""
    any_out = False
    for n in t.workloads:
        allocs = [a for a in t.allocators if t.cell(n, a)]
        names = set()
        for a in allocs:
            c = t.cell(n, a)
            if c:
                for m in c.metrics:
                    names.update(m)
        if not names:
            continue
        sweeps = {}
        scalars = []
        for m in names:
            mm = SWEEP.match(m)
            if mm:
                sweeps.setdefault(mm.group(1), []).append((float(mm.group(2)), m))
            else:
                scalars.append(m)
        if not any_out:
            w("## Metrics reported by the programs\n")
            w("Medians of the `metric NAME VALUE` lines the workloads print.\n")
            any_out = True
        w("### %s\n" % n)
        for base, pts in sorted(sweeps.items()):
            pts.sort()
            w("| %s at size | " % base + " | ".join(allocs) + " |")
            w("|---:|" + "---:|" * len(allocs))
            for x, m in pts:
                w("| %s | " % human_size(x) + " | ".join(fmt(t.cell(n, a).metric(m)) for a in allocs) + " |")
            w("")
        if scalars:
            w("| metric | " + " | ".join(allocs) + " |")
            w("|---|" + "---:|" * len(allocs))
            for m in sorted(scalars):
                w("| %s | " % m + " | ".join(fmt(t.cell(n, a).metric(m)) for a in allocs) + " |")
            w("")


# ---- the terminal summary -----------------------------------------------------------

def run_spread(c, what):
    """(max - min) / median of one cell's runs: how much the runs disagree."""
    vals = c.walls if what == "time" else c.rss
    if len(vals) < 2:
        return None
    m = statistics.median(vals)
    return (max(vals) - min(vals)) / m if m > 0 else None


def summary_lines(rows, duration_s, quick):
    """At most 10 lines for the end of a run: per allocator, the geometric mean
    of its median time and peak RSS relative to glibc over the workloads every
    allocator completed, the range of those per-workload ratios, and how much
    its runs spread."""
    t = Table(rows)
    base = [a for a in t.allocators if not a.startswith("strata-")]
    ref = "glibc" if "glibc" in base else (base[0] if base else None)
    complete = [n for n in t.workloads if all(t.cell(n, a) and t.cell(n, a).ok for a in base)
                and t.info[n][0] not in EMULATED_FAMILIES]
    head = "run-bench: %d runs of %d workloads in %s (%s)" % (
        len(rows), len(t.workloads), _clock(duration_s), "quick set" if quick else "full run")
    if not complete or ref is None:
        return [head, "run-bench: no workload completed under every allocator: no summary (see the report)"]
    out = [head + "; relative to %s, geometric mean over %d workloads (lower is better):" % (ref, len(complete)),
           "  %-10s %-26s %-26s %s" % ("allocator", "time (workload range)", "peak RSS (workload range)",
                                       "run-to-run spread")]
    for a in base[:7]:
        cols = []
        for what in ("time", "rss"):
            ratios = [t.value(n, a, what) / t.value(n, ref, what) for n in complete]
            cols.append("%5s× (%s–%s×)" % (fmt(geomean(ratios)), fmt(min(ratios), 2), fmt(max(ratios), 2)))
        spreads = [s for s in (run_spread(t.cell(n, a), "time") for n in complete) if s is not None]
        spread = "±%.0f %% time" % (50 * statistics.median(spreads)) if spreads else "one run"
        out.append("  %-10s %-26s %-26s %s" % (a, cols[0], cols[1], spread))
    bad = sum(1 for r in rows if r["status"] != "ok")
    if bad:
        out.append("  %d run(s) failed: see failures.log next to the report" % bad)
    return out[:10]


def _clock(s):
    s = int(s + 0.5)
    return "%d min %02d s" % (s // 60, s % 60) if s >= 60 else "%d s" % s
