"""selftest.py — tests of the benchmark harness itself (`bench/run-bench --selftest`).

Checks, without any allocator other than the C library's: suite.tsv parsing
(placeholders, thread sweeps, quick selection, setup, variants, errors naming
file and line), the launcher's measurements (time, peak RSS, timeouts, exit
codes), the interleaved run order, the classification of runs (ok, no check,
failed check, timeout), medians, ratios and geometric means, and the CSV and
markdown outputs.  Prints one line per check and `N passed, N failed`.
"""
import argparse
import csv
import os
import re
import sys
import tempfile

passed = 0
failed = 0


def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
        print("ok    %s" % what)
    else:
        failed += 1
        print("FAIL  %s" % what)


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def test_parse(rb, tmp):
    subst = {"bin": "/B", "traces": "/T", "build": "/D", "src": "/S", "quick": "0"}
    p = os.path.join(tmp, "suite.tsv")
    write(p, "# comment\n\n#threads 1 2 4\n#quick-threads 2\n"
             "sw-{threads}\tfam\t1\t{bin}/prog -t {threads} {traces}/x\n"
             "#setup echo {src}\n#variant nopurge STRATA_PURGE_DELAY_MS=-1 STRATA_VERBOSE=0\n"
             "plain\tother\t0\t{build}/p a\tb\n")
    s = rb.parse_suite(p, False, subst)
    names = [e.name for e in s.entries]
    check(names == ["sw-1", "sw-2", "sw-4", "plain"], "thread sweep expands to one entry per count: %s" % names)
    check(s.entries[1].command == "/B/prog -t 2 /T/x", "placeholders substituted: %r" % s.entries[1].command)
    check(s.entries[1].threads == 2 and s.entries[1].base == "sw", "entry keeps threads and base name")
    check(s.entries[3].command == "/D/p a\tb", "a command keeps its own tabs")
    check(s.setup == ["echo /S"], "#setup read and expanded")
    check(s.variants == [("strata-nopurge", {"STRATA_PURGE_DELAY_MS": "-1", "STRATA_VERBOSE": "0"})],
          "#variant read: %s" % s.variants)
    write(p, "#time-metric run_ms ms\n#rss-metric run_kb\nown\tf\t1\tx\n")
    own = rb.parse_suite(p, False, subst).entries[0]
    check(own.time_metric == ("run_ms", 1e-3) and own.rss_metric == "run_kb", "#time-metric, #rss-metric read")
    o = rb.with_own_measures(own, rb.Outcome("ok", 9.0, 5000, 0, {"run_ms": 250.0, "run_kb": 1200.0}, []))
    check(abs(o.wall - 0.25) < 1e-9 and o.maxrss == 1200 and o.status == "ok",
          "the program's own time and RSS replace the whole command's")
    o = rb.with_own_measures(own, rb.Outcome("ok", 9.0, 5000, 0, {}, []))
    check(o.status == "no-metric", "a run without the metric it promised fails")
    write(p, "# comment\n\n#threads 1 2 4\n#quick-threads 2\n"
             "sw-{threads}\tfam\t1\t{bin}/prog -t {threads} {traces}/x\n"
             "#setup echo {src}\n#variant nopurge STRATA_PURGE_DELAY_MS=-1 STRATA_VERBOSE=0\n"
             "plain\tother\t0\t{build}/p a\tb\n")
    q = rb.parse_suite(p, True, dict(subst, quick="1"))
    check([e.name for e in q.entries if e.quick] == ["sw-2"], "quick mode: #quick-threads and quick=1 select")
    write(p, "a\tf\t1\tx\n#quick-runs 1\nb\tf\t1\tx\n")
    check([e.quick_runs for e in rb.parse_suite(p, True, subst).entries] == [None, 1],
          "#quick-runs holds for the lines after it")
    bad = {
        "a\tb\t2\tcmd\n": "quick must be 0 or 1",
        "a\tb\t1\n": "field",
        "a-{threads}\tb\t1\tx\n": "#threads",
        "a\tb\t1\tx\na\tb\t1\ty\n": "twice",
        "a\tb\t1\t{nope}\n": "placeholder",
        "#threads two\n": "whole numbers",
        "#variant x NOEQUALS\n": "ENV=VALUE",
        "#time-metric t minutes\n": "#time-metric",
        "#quick-runs 0\n": "#quick-runs",
    }
    for text, want in bad.items():
        write(p, "# first line\n" + text)
        try:
            rb.parse_suite(p, False, subst)
            check(False, "rejects %r" % text)
        except rb.SuiteError as e:
            msg = str(e)
            line = "suite.tsv:3" if want == "twice" else "suite.tsv:2"
            check(want in msg and (line in msg or want == "placeholder"),
                  "rejects %r with %r" % (text, msg))


def test_launcher(rb, tmp):
    rb.find_launcher(os.path.join(tmp, "no-build"))
    o = rb.run_measured("sh -c 'echo metric x 2.5; echo metric ns@64 7; echo check ok'", {}, 10, rb.base_env())
    check(o.status == "ok" and o.metrics == {"x": 2.5, "ns@64": 7.0}, "check ok and metrics collected: %s %s"
          % (o.status, o.metrics))
    o = rb.run_measured("true", {}, 10, rb.base_env())
    check(o.status == "no-check", "a program without `check ok` is a failure: %s" % o.status)
    check(0 < o.maxrss < 8 * 1024, "a tiny program's peak RSS is small (%d KiB): the launcher adds no floor"
          % o.maxrss)
    o = rb.run_measured("sh -c 'echo check failed: boom; exit 1'", {}, 10, rb.base_env())
    check(o.status == "check-failed" and o.exit == 1, "a failed check is reported: %s" % o.status)
    o = rb.run_measured("sh -c 'echo check ok; exit 3'", {}, 10, rb.base_env())
    check(o.status == "exit-3", "a non-zero exit fails even with `check ok`: %s" % o.status)
    o = rb.run_measured("sleep 5", {}, 0.3, rb.base_env())
    check(o.status == "timeout" and 0.25 < o.wall < 2, "a run past its timeout is killed: %s after %.2f s"
          % (o.status, o.wall))
    o = rb.run_measured("%s -c 'import os; os.kill(os.getpid(), 11)'" % sys.executable, {}, 10, rb.base_env())
    check(o.status == "signal-11", "a crash is reported with its signal: %s" % o.status)
    o = rb.run_measured("sleep 0.2", {}, 10, rb.base_env())
    check(0.19 < o.wall < 1.0, "wall time measured: %.3f s for sleep 0.2" % o.wall)
    check(rb.command_argv("a 'b; c' \"d|e\"") == ["a", "b; c", "d|e"], "quoted operators need no shell")
    check(rb.command_argv("a | b")[:2] == ["/bin/sh", "-c"] and rb.command_argv("X=1 a")[0] == "/bin/sh"
          and rb.command_argv("a $HOME")[0] == "/bin/sh", "pipes, assignments and variables go to /bin/sh")
    big = "%s -c \"b = bytearray(96 << 20); print('check ok')\"" % sys.executable
    o = rb.run_measured(big, {}, 20, rb.base_env())
    check(o.status == "ok" and o.maxrss > 96 * 1024, "peak RSS sees 96 MiB touched: %d KiB" % o.maxrss)
    o = rb.run_measured("sh -c 'echo $BENCH_X; echo check ok'", {"BENCH_X": "42"}, 10, rb.base_env())
    check(o.tail[:1] == ["42"], "an allocator's environment reaches the command: %s" % o.tail[:1])


def test_tables(report):
    rows = []

    def add(name, alloc, walls, rss=100, status="ok", fam="f", metrics=""):
        for i, w in enumerate(walls):
            rows.append({"suite": "s", "name": name, "base": name.split("-")[0], "family": fam,
                         "threads": name.split("-")[1] if "-" in name else "", "allocator": alloc,
                         "run": str(i + 1), "status": status if i == 0 else "ok", "wall_s": str(w),
                         "maxrss_kib": str(rss * 1024), "exit": "0", "metrics": metrics})
    add("w-1", "glibc", [2.0, 4.0, 3.0], 100)
    add("w-1", "jemalloc", [1.0, 1.0, 5.0], 150)
    add("w-1", "strata", [1.5, 1.2, 1.8], 90, metrics="ns@8=3;x=1")
    add("w-2", "glibc", [1.0, 1.0, 1.0], 100)
    add("w-2", "jemalloc", [2.0, 2.0, 2.0], 100)
    add("w-2", "strata", [1.0, 1.0, 1.0], 200)
    add("v", "glibc", [1.0, 1.0], 10, fam="g")
    add("v", "jemalloc", [1.0, 1.0], 10, fam="g")
    add("v", "strata", [9.0, 9.0], 10, status="no-check", fam="g")
    t = report.Table(rows)
    check(t.value("w-1", "glibc", "time") == 3.0, "median of three runs")
    check(t.value("w-1", "jemalloc", "rss") == 150.0, "peak RSS in MiB")
    check(t.allocators == ["glibc", "jemalloc", "strata"], "allocators in the usual order")
    c = t.cell("v", "strata")
    check(not c.ok and c.time() == 9.0 and c.failure() == "no-check", "a failed run marks its cell")
    check(t.best("w-1", "time", ["glibc", "jemalloc"]) == (1.0, "jemalloc"), "best other allocator")
    g = report.geomean([2.0, 8.0])
    check(abs(g - 4.0) < 1e-9, "geometric mean: %s" % g)
    md = report.render(rows, {"date": "D", "command": "C", "runs": 3, "machine": "M", "versions": {}}, [])
    check("| w-1 | 3.00 s (2.00–4.00) | 1.00 s (1.00–5.00) | 1.50 s (1.20–1.80) | 0.500× | 1.50× (jemalloc) |"
          in md, "time row: units, min-max spread, ratios to glibc and best")
    check("| w-2 | 100 MiB | 100 MiB | 200 MiB | 2.00× | 2.00× (glibc) |" in md, "peak RSS row with ratios")
    check("9.00 s (1/2 ok: no-check)" in md, "partly failed cell says so")
    # f: strata/glibc 0.5 and 1.0 -> 0.707 (1.4x faster); strata/jemalloc 1.5 and 0.5 -> 0.866
    check("**For f** — the f workloads; 2 workloads: Strata is **1.4× faster than glibc** and **1.2× faster "
          "than the best other, jemalloc**; its peak memory is **1.3× glibc's**." in md, "verdict per family")
    check("- `jemalloc`: jemalloc" in md, "every allocator explained")
    summ = report.summary_lines(rows, 75, True)
    check(len(summ) <= 9 and summ[0].startswith("run-bench: 24 runs of 3 workloads in 1 min 15 s (quick set)")
          and any(ln.split()[:2] == ["strata", "0.707×"] for ln in summ)
          and any("failed" in ln for ln in summ), "terminal summary: %s" % summ)
    check(report.human_size(65536) == "64 KiB" and report.human_size(1 << 20) == "1 MiB"
          and report.human_size(1536) == "1.50 KiB", "readable sizes")
    check("Strata where every request, however small, goes to the large tier"
          in report.variant_about("strata-1tier", {"STRATA_LARGE_THRESHOLD": "0"}), "variants explained")
    check("over the 2 of 3 workloads" in md, "geometric means use only workloads everyone completed")
    # strata/glibc: w-1 0.5, w-2 1.0 -> geomean 0.707
    check("| time | 1.00 | 0.816 | 0.707 |" in md, "geometric mean row of time")
    # Strata / fastest other (glibc included): w-1 1.5/1.0, w-2 1.0/1.0 -> 1.22
    check("geometric mean of Strata ÷ fastest other 1.22, target ≤ 0.970: **missed**" in md,
          "time against the fastest other per workload")
    # peak RSS vs glibc: w-1 0.9, w-2 2.0 -> 1.34; jemalloc 1.5, 1.0 -> 1.22
    check("Strata's geometric mean 1.34× glibc's (limit 1.05×) and the lowest of the other allocators "
          "(the leanest, jemalloc: 1.22): **missed**" in md, "peak RSS against glibc and the leanest other")
    check(report.allocator_order(["strata", "snmalloc", "glibc", "mimalloc3", "mimalloc"])
          == ["glibc", "mimalloc", "mimalloc3", "snmalloc", "strata"], "the peers in the usual order")
    check("- w-2: not faster than glibc" in md and "peak RSS 2.00× the smallest (glibc" in md,
          "target misses are listed")
    check("| ns at size | glibc | jemalloc | strata |" in md and "| 8 B | – | – | 3.00 |" in md, "sweep metric table")
    # The NUMA locality target: a locality line that ran several workloads in one guest boot: one target row each.
    loc = []
    saved_rows, rows = rows, loc
    add("numaall", "glibc", [1.0], fam="numa", metrics="local_pct=60;local_pct_km=60;local_pct_ss=99")
    add("numaall", "strata", [1.0], fam="numa", metrics="local_pct=98;local_pct_km=100;local_pct_ss=98")
    rows = saved_rows
    lmd = report.render(loc, {"date": "D", "command": "C", "runs": 1, "machine": "M", "versions": {}}, [])
    targets = lmd.split("## Target: NUMA locality")[-1].split("\n## ")[0].split("\n")
    km = [ln for ln in targets if ln.startswith("| numaall: km |")]
    ss = [ln for ln in targets if ln.startswith("| numaall: ss |")]
    check(len(km) == 1 and km[0].endswith("| met |") and len(ss) == 1 and ss[0].endswith("| **missed** |")
          and not any(ln.startswith("| numaall |") for ln in targets),
          "locality targets: one row per workload of a --each line: %s %s" % (km, ss))
    check("## Failed runs" in md and "v under strata: 1 of 2 runs failed (no-check)" in md, "failed runs listed")
    named = [ln for ln in (md + lmd).splitlines() if re.search(r"\b[Ii]ssue \d+", ln)]
    check(not named, "a report names its targets, not issues: %s" % named[:3])


def test_end_to_end(rb, report, tmp):
    suite = os.path.join(tmp, "e2e", "suite.tsv")
    os.makedirs(os.path.dirname(suite))
    marker = os.path.join(tmp, "setup-ran")
    write(suite, "#setup touch %s\n#threads 1 2\n"
                 "good-{threads}\tfam\t1\tsh -c 'test -e %s && echo metric ns@{threads} $FAKE && echo check ok'\n"
                 "nocheck\tfam\t1\ttrue\n"
                 "slow\tother\t0\tsleep 3\n"
                 "#quick-runs 1\nonce\tother\t1\techo check ok\n" % (marker, marker))
    fake = [("glibc", {"FAKE": "1"}), ("jemalloc", {"FAKE": "2"}), ("strata", {"FAKE": "3"})]
    saved = rb.allocator_table
    rb.allocator_table = lambda build, suites, wanted: (fake, [], {}, None)
    out = os.path.join(tmp, "out")
    args = argparse.Namespace(build=os.path.join(tmp, "no-build"), quick=True, suite=[suite], only=None,
                              allocators=None, runs=2, list=False, out=out, timeout=1.0, setup_timeout=10.0,
                              no_plots=True, record=False)
    try:
        rc = rb.run_all(args)
    finally:
        rb.allocator_table = saved
    check(rc == 0, "run_all returns 0 (failed runs are reported, not fatal)")
    with open(os.path.join(out, "results.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    check(len(rows) == 3 * 3 * 2 + 3, "one CSV row per run: %d" % len(rows))
    check(sorted(r["allocator"] for r in rows if r["name"] == "once") == ["glibc", "jemalloc", "strata"],
          "#quick-runs 1: one run per allocator in the quick set")
    check(all(r["name"] != "slow" for r in rows), "quick mode leaves out quick=0 lines")
    first = [(r["allocator"], r["run"]) for r in rows if r["name"] == "good-1"]
    check(first == [("glibc", "1"), ("jemalloc", "1"), ("strata", "1"),
                    ("jemalloc", "2"), ("strata", "2"), ("glibc", "2")],
          "interleaved runs, order rotated each run: %s" % first)
    good = [r for r in rows if r["name"].startswith("good")]
    check(all(r["status"] == "ok" for r in good), "setup ran before the suite (its marker file was there)")
    check(all(r["metrics"] == "ns@%s=%s" % (r["threads"], {"glibc": 1, "jemalloc": 2, "strata": 3}[r["allocator"]])
              for r in good), "metrics recorded per run under each allocator's environment")
    check(all(r["status"] == "no-check" for r in rows if r["name"] == "nocheck"), "missing check recorded")
    with open(os.path.join(out, "report.md")) as f:
        md = f.read()
    check("FAIL (no-check)" in md and "## Family: fam" in md, "report.md has the family table and the failure")
    check("| ns at size | glibc | jemalloc | strata |" in md, "report.md has the sweep metric table")
    with open(os.path.join(out, "failures.log")) as f:
        log = f.read()
    check("nocheck under glibc, run 1: no-check" in log, "failures.log names the failed runs")


def test_peers(rb):
    """The peers' libraries are found where install-peers.sh puts them, and
    mimalloc 3 runs with its transparent huge pages off."""
    check(rb.BASE_ALLOCATORS[4] == ("mimalloc3", rb.PEERS + "/mimalloc3/libmimalloc.so.3")
          and rb.BASE_ALLOCATORS[5] == ("snmalloc", rb.PEERS + "/snmalloc/libsnmallocshim.so"),
          "mimalloc3 and snmalloc from bench/.peers")
    saved = rb.BASE_ALLOCATORS
    rb.BASE_ALLOCATORS = [("mimalloc3", sys.executable), ("snmalloc", sys.executable), ("nothere", "/nonexistent")]
    try:
        have, missing, _, _ = rb.allocator_table("/nonexistent", [], None)
    finally:
        rb.BASE_ALLOCATORS = saved
    thp = os.environ.get("MIMALLOC_ALLOW_THP", "0")
    check(have == [("mimalloc3", {"MIMALLOC_ALLOW_THP": thp, "LD_PRELOAD": sys.executable}),
                   ("snmalloc", {"LD_PRELOAD": sys.executable})] and missing == [("nothere", "/nonexistent")],
          "mimalloc3 preloaded with MIMALLOC_ALLOW_THP=%s, a missing library left out: %s" % (thp, have))


def run(rb):
    import report
    with tempfile.TemporaryDirectory(prefix="strata-bench-selftest-") as tmp:
        for name, fn in (("parse", lambda: test_parse(rb, tmp)), ("launcher", lambda: test_launcher(rb, tmp)),
                         ("tables", lambda: test_tables(report)), ("peers", lambda: test_peers(rb)),
                         ("end to end", lambda: test_end_to_end(rb, report, tmp))):
            try:
                fn()
            except Exception as e:  # a crash in a group is one failure, the others still run
                check(False, "%s: %s: %s" % (name, type(e).__name__, e))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0
