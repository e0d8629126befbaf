#!/usr/bin/env python3
"""stats_output.py VICTIM — what STRATA_SHOW_STATS=1 and strata_stats_json say
about the process: its program name and pid, the kernel's peak RSS (never
below the current RSS), reserved shown as address space, per-class pages and
their exact peaks adding up to the totals."""
import json
import os
import re
import subprocess
import sys

VICTIM = sys.argv[1]
env = {k: v for k, v in os.environ.items() if not k.startswith("STRATA_") and k != "LD_PRELOAD"}
UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def size(text):
    num, unit = text.split()
    return float(num) * UNITS[unit]


p = subprocess.run([VICTIM, "VERBOSE"], env=dict(env, STRATA_SHOW_STATS="1"), capture_output=True, text=True,
                   timeout=30)
lines = p.stderr.splitlines()
if p.returncode != 0 or not lines:
    fail("victim: rc %d, stderr %r" % (p.returncode, p.stderr))
m = re.match(r"^strata: statistics of (\S+) \(pid (\d+)\): rss ([\d.]+ \w+), peak rss ([\d.]+ \w+)$", lines[0])
if not m:
    fail("title line: %r" % lines[0])
if os.path.basename(m.group(1)) != "options_victim":
    fail("title names %r, not the program" % m.group(1))
if size(m.group(4)) < size(m.group(3)):
    fail("peak rss %s below rss %s" % (m.group(4), m.group(3)))
reserved = [ln for ln in lines if ln.split()[:1] == ["reserved"]]
if len(reserved) != 1 or "address space" not in reserved[0] or "not memory in use" not in reserved[0]:
    fail("reserved is not labelled as address space: %r" % reserved)
head = [ln for ln in lines if ln.split()[:1] == ["class"]]
if len(head) != 1 or head[0].split() != ["class", "allocated", "freed", "live", "pages", "peak", "pages"]:
    fail("class table header: %r" % head)
# Every peak printed is exact: a class's peak pages is never below its pages
# now, and the class rows' pages add up to the pages line.
rows = [ln.split() for ln in lines[lines.index(head[0]) + 1:] if ln.split() and ln.split()[0].isdigit()]
if not rows:
    fail("no class rows")
for r in rows:
    if int(r[5]) < int(r[4]) or int(r[3]) < 0:
        fail("class row: %r" % r)
pages = [ln.split() for ln in lines if ln.split()[:1] == ["pages"]]
if sum(int(r[4]) for r in rows) != int(pages[0][1]):
    fail("class pages %d != pages %s" % (sum(int(r[4]) for r in rows), pages[0][1]))
print("ok    text: %s" % lines[0])

p = subprocess.run([VICTIM, "--json"], env=env, capture_output=True, text=True, timeout=30)
doc = json.loads(p.stdout)
if os.path.basename(doc.get("program", "")) != "options_victim" or doc.get("pid", 0) <= 0:
    fail("json: program/pid %r %r" % (doc.get("program"), doc.get("pid")))
if not doc.get("peak_rss") or doc["peak_rss"] < doc["rss"]:
    fail("json: peak_rss %r, rss %r" % (doc.get("peak_rss"), doc.get("rss")))
print("ok    json: program %s, rss %d, peak_rss %d" % (doc["program"], doc["rss"], doc["peak_rss"]))
