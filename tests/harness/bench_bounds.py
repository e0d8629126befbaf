#!/usr/bin/env python3
"""bench_bounds.py ROOT — bench/report/bounds.py against a results file whose
answer is worked out by hand: medians of several runs, failed runs and
workloads not every allocator ran left out, each allocator over the fastest
of the others, and a bad file refused with where it is bad."""
import os
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
TOOL = os.path.join(ROOT, "bench", "report", "bounds.py")

ROWS = [
    # w1: glibc 2.0, strata 1.0, tcmalloc 1.12 (median of three, one run failed)
    ("w1", "glibc", "ok", "2.0"), ("w1", "strata", "ok", "1.0"),
    ("w1", "tcmalloc", "ok", "1.12"), ("w1", "tcmalloc", "ok", "1.3"), ("w1", "tcmalloc", "ok", "1.0"),
    ("w1", "tcmalloc", "failed", "0.001"),
    # w2: glibc 1.0, strata 1.2 (median of 1.2, 1.2, 9.9), tcmalloc 0.8
    ("w2", "glibc", "ok", "1.0"), ("w2", "strata", "ok", "1.2"), ("w2", "strata", "ok", "9.9"),
    ("w2", "strata", "ok", "1.2"), ("w2", "tcmalloc", "ok", "0.8"),
    # w3: tcmalloc never ran it, so no allocator is judged on it
    ("w3", "glibc", "ok", "1.0"), ("w3", "strata", "ok", "100"),
]

# allocator: (time/glibc, time/fastest other, within 1.10x, within 1.05x, worst ratio, worst workload)
WANT = {
    "glibc": (1.0, (2.0 / 1.0 * 1.0 / 0.8) ** 0.5, 0, 0, 2.0, "w1"),
    "strata": ((0.5 * 1.2) ** 0.5, (1.0 / 1.12 * 1.2 / 0.8) ** 0.5, 1, 1, 1.5, "w2"),
    "tcmalloc": ((1.12 / 2.0 * 0.8) ** 0.5, (1.12 / 1.0 * 0.8 / 1.0) ** 0.5, 1, 1, 1.12, "w1"),
}


def run(path, *args):
    return subprocess.run([sys.executable, TOOL, path, "--allocators", "glibc,strata,tcmalloc", *args],
                          capture_output=True, text=True, timeout=60)


def main():
    bad = 0
    with tempfile.TemporaryDirectory() as d:
        good = os.path.join(d, "results.csv")
        with open(good, "w") as f:
            f.write("suite,name,allocator,run,status,wall_s\n")
            for n, a, s, t in ROWS:
                f.write("s,%s,%s,1,%s,%s\n" % (n, a, s, t))
        r = run(good)
        if r.returncode != 0:
            print("FAIL: exit %d on a good file: %s" % (r.returncode, r.stderr.strip()))
            return 1
        if not r.stdout.startswith("2 workloads"):
            print("FAIL: expected 2 workloads, got: %s" % r.stdout.splitlines()[0])
            bad += 1
        got = {ln.split()[0]: ln.split() for ln in r.stdout.splitlines()[2:]}
        for a, (g, fo, w10, w05, worst, wname) in WANT.items():
            row = got.get(a)
            want = ["%.3f" % g, "%.3f" % fo, "%d/2" % w10, "%d/2" % w05, "%.2f" % worst, wname]
            if not row or row[1:] != want:
                print("FAIL: %s: got %s, want %s" % (a, row[1:] if row else None, want))
                bad += 1
        r = run(good, "--only", "^w2$")
        if r.returncode != 0 or not r.stdout.startswith("1 workloads"):
            print("FAIL: --only ^w2$ did not keep one workload: %s" % (r.stdout or r.stderr))
            bad += 1
        broken = os.path.join(d, "broken.csv")
        with open(broken, "w") as f:
            f.write("suite,name,allocator,run,status,wall_s\ns,w1,glibc,1,ok,1.0\ns,w1,strata,1,ok,fast\n")
        r = run(broken)
        if r.returncode == 0 or "broken.csv" not in r.stderr or "line 3" not in r.stderr or "Traceback" in r.stderr:
            print("FAIL: a bad wall_s: exit %d, stderr %r" % (r.returncode, r.stderr))
            bad += 1
        r = run(good, "--only", "(")
        if r.returncode == 0 or "--only" not in r.stderr or "Traceback" in r.stderr:
            print("FAIL: a bad --only: exit %d, stderr %r" % (r.returncode, r.stderr))
            bad += 1
        r = run(os.path.join(d, "missing.csv"))
        if r.returncode == 0 or "missing.csv" not in r.stderr or "Traceback" in r.stderr:
            print("FAIL: a missing file: exit %d, stderr %r" % (r.returncode, r.stderr))
            bad += 1
    print("%s: %d failure(s)" % ("ok" if not bad else "FAIL", bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
