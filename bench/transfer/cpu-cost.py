#!/usr/bin/env python3
"""cpu-cost.py [RUNS] [BUILD] — bytes a channel moves per second of CPU time
(user + system of both processes, from the children's rusage), for each
large-message path at 64 KiB, 1 MiB and 16 MiB, median of RUNS interleaved
runs (default 3).  On a loaded machine wall-clock bandwidth mostly measures
the wait for a CPU; CPU time per byte does not (docs/notes/transfer.md).
A waiting end's spinning and yielding counts, as it should; so does the
setup (filling the buffers), which BUDGET (bytes per size) must outweigh.
Environment: SIZES (bytes, space-separated), BUDGET, BLOCK, ONLY (see below).
"""
import os
import resource
import statistics
import subprocess
import sys

RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 3
BUILD = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), "..", "..", "build")
BIN = os.path.join(BUILD, "bin", "bench-chan-bw")
VARIANTS = {
    "shared arena": ["--buf", "arena"],
    "auto, Strata buf": ["--buf", "strata"],
    "cma, Strata buf": ["--path", "cma", "--buf", "strata"],
    "copy, Strata buf": ["--path", "copy", "--buf", "strata"],
    "copy, 4K": ["--path", "copy", "--buf", "mmap"],
    "cma, 4K": ["--path", "cma", "--buf", "mmap"],
}
ONLY = os.environ.get("ONLY")      # a regular expression: only the variants it finds
if ONLY:
    import re
    VARIANTS = {k: v for k, v in VARIANTS.items() if re.search(ONLY, k)}
SIZES = [int(x) for x in os.environ.get("SIZES", "65536 1048576 16777216").split()]
BUDGET = int(os.environ.get("BUDGET", 256 << 20))
BLOCK = os.environ.get("BLOCK")     # one buffer of this size per end (--block), e.g. a big one on huge pages


def window(s):   # as sizes.h
    return 64 if s <= 65536 else 16 if s <= (4 << 20) else 4


def windows(s):
    return max(2, min(200, BUDGET // (s * window(s))))


def main():
    res = {}
    for _ in range(RUNS):
        for s in SIZES:
            for name, args in VARIANTS.items():
                r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
                block = ["--block", BLOCK] if BLOCK else []
                out = subprocess.run([BIN] + args + ["--min", str(s), "--max", str(s), "--budget", str(BUDGET),
                                                     "--no-lat"] + block, capture_output=True, text=True).stdout
                r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                if "check ok" not in out:
                    sys.exit("cpu-cost.py: %s at %d failed:\n%s" % (name, s, out))
                cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
                moved = s * window(s) * (windows(s) + 1)   # the warm-up window too
                res.setdefault((name, s), []).append(moved / cpu / 1e9)
    print("GB moved per CPU-second (both processes), median of %d" % RUNS)
    print("| size | " + " | ".join(VARIANTS) + " |")
    print("|---:|" + "---:|" * len(VARIANTS))
    for s in SIZES:
        label = "%d KiB" % (s >> 10) if s < (1 << 20) else "%d MiB" % (s >> 20)
        print("| %s | %s |" % (label, " | ".join("%.1f" % statistics.median(res[(v, s)]) for v in VARIANTS)))


if __name__ == "__main__":
    main()
