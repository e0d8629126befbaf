#!/usr/bin/env python3
"""check_results_page.py ROOT — bench/RESULTS.md is exactly what
bench/report/results_page.py makes from the committed run in bench/results/
(so no figure on it can drift from that run), and the generator refuses bad
input with the file and line it could not use."""
import csv
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
GEN = os.path.join(ROOT, "bench", "report", "results_page.py")
failed = 0


def run(*args):
    return subprocess.run([sys.executable, GEN] + list(args), capture_output=True, text=True)


def check(ok, what):
    global failed
    print(("ok   " if ok else "FAIL ") + what)
    failed += not ok


r = run(os.path.join(ROOT, "bench", "results"), "-")
with open(os.path.join(ROOT, "bench", "RESULTS.md")) as f:
    committed = f.read()
check(r.returncode == 0 and r.stdout == committed,
      "bench/RESULTS.md is the page made from bench/results/ (remake it: python3 bench/report/results_page.py bench/results)")

with tempfile.TemporaryDirectory() as tmp:
    r = run(os.path.join(tmp, "nothing"), "-")
    check(r.returncode != 0 and "results.csv: no such file" in r.stderr, "a missing run is refused, naming the file")
    shutil.copy(os.path.join(ROOT, "bench", "results", "meta.json"), tmp)
    with open(os.path.join(ROOT, "bench", "results", "results.csv"), newline="") as f:
        rows = list(csv.reader(f))
    bad = rows[:3] + [rows[3][:8] + ["fast"] + rows[3][9:]] + rows[4:]
    with open(os.path.join(tmp, "results.csv"), "w", newline="") as f:
        csv.writer(f).writerows(bad)
    r = run(tmp, "-")
    check(r.returncode != 0 and "results.csv:4: wall_s or maxrss_kib is not a number" in r.stderr,
          "a figure that is not a number is refused with its line")
    with open(os.path.join(tmp, "meta.json"), "w") as f:
        f.write("{broken")
    r = run(tmp, "-")
    check(r.returncode != 0 and "meta.json: not JSON" in r.stderr, "a broken meta.json is refused")
print("%d passed, %d failed" % (4 - failed, failed))
sys.exit(1 if failed else 0)
