#!/usr/bin/env python3
"""alloc-share.py — how much of each bench workload's user-space work is the
allocator's.  Runs every quick workload once under callgrind with Strata
preloaded and splits its instructions into those executed in libstrata.so and
the rest (the program, libc, the loader).  The rest does not depend on the
allocator, so it bounds what any allocator could win: with a results.csv, the
script also prints the geomean time relative to glibc that Strata would reach
if its own instructions cost nothing (an estimate: kernel time and cache
effects are not in callgrind's counts).

usage: bench/micro/alloc-share.py [--build build] [--only REGEX] [--csv results.csv]
"""
import argparse, collections, csv, math, os, re, statistics, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
LINE = re.compile(r"^\s*([\d,]+)\s.*\[(.+)\]\s*$")


def workloads(build, only):
    """(name, command) of each quick workload, from run-bench --list."""
    out = subprocess.run([os.path.join(ROOT, "bench", "run-bench"), "--quick", "--list",
                          "--build", build], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        if not line.startswith("  "):
            continue
        name, _family, command = line.split(None, 2)
        if only and not re.search(only, name):
            continue
        yield name, command


def split_instructions(build, command, timeout):
    """(instructions in libstrata.so, all instructions) of one run, or None."""
    lib = os.path.join(os.path.abspath(build), "libstrata.so")
    with tempfile.TemporaryDirectory() as work:
        out = os.path.join(work, "cg.out")
        env = dict(os.environ, LD_PRELOAD=lib)
        try:
            run = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out]
                                 + command.split(), env=env, capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        if run.returncode != 0 or not os.path.exists(out):
            return None
        text = subprocess.run(["callgrind_annotate", "--inclusive=no", "--threshold=100", out],
                              capture_output=True, text=True).stdout
    per_object = collections.Counter()
    for line in text.splitlines():
        m = LINE.match(line)
        if m:
            per_object[os.path.basename(m.group(2))] += int(m.group(1).replace(",", ""))
    total = sum(per_object.values())
    mine = sum(n for obj, n in per_object.items() if obj.startswith("libstrata.so"))
    return (mine, total) if total else None


def medians(path):
    times = collections.defaultdict(list)
    with open(path) as f:
        for r in csv.DictReader(f):
            if r["status"] == "ok":
                times[(r["name"], r["allocator"])].append(float(r["wall_s"]))
    return {k: statistics.median(v) for k, v in times.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--only", default=None)
    ap.add_argument("--csv", default=None, help="a run-bench results.csv for the floor estimate")
    ap.add_argument("--timeout", type=float, default=600)
    args = ap.parse_args()
    med = medians(args.csv) if args.csv else {}
    logs_now, logs_floor = [], []
    print("%-20s %14s %14s %7s %9s %9s" % ("workload", "all Ir", "strata Ir", "share",
                                           "now/glibc", "floor/glibc"))
    for name, command in workloads(args.build, args.only):
        split = split_instructions(args.build, command, args.timeout)
        if split is None:
            print("%-20s  skipped (did not run to completion under callgrind)" % name)
            continue
        mine, total = split
        share = mine / total
        row = "%-20s %14d %14d %6.1f%%" % (name, total, mine, 100 * share)
        if (name, "strata") in med and (name, "glibc") in med:
            now = med[(name, "strata")] / med[(name, "glibc")]
            floor = now * (1 - share)
            logs_now.append(math.log(now))
            logs_floor.append(math.log(floor))
            row += " %9.3f %9.3f" % (now, floor)
        print(row, flush=True)
    if logs_now:
        print("geomean over %d workloads: now %.3f, with Strata's instructions free %.3f"
              % (len(logs_now), math.exp(sum(logs_now) / len(logs_now)),
                 math.exp(sum(logs_floor) / len(logs_floor))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
