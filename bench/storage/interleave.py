#!/usr/bin/env python3
"""interleave.py — runs one command under several environments in turn
(A B C A B C ...), so load from other jobs falls on every variant alike,
and prints the median wall and CPU (user + system) seconds of each, and
each median relative to the first variant's.  For the storage-backed
benchmarks on a shared machine, where single runs are too noisy to compare.

usage: interleave.py --runs N [--lib build/libstrata.so] \
           --variant 'glibc=' --variant 'sb=STRATA_SB_DIR=/var/tmp STRATA_SB_BUDGET=1G' \
           -- command args...
A variant whose environment is not empty is run with --lib preloaded.
The command's 'metric NAME VALUE' lines are collected too (median each).
"""
import argparse
import os
import resource
import statistics
import subprocess
import sys
import time


def run(cmd, env):
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out, _ = p.communicate()
    # rusage of this one child: wait4 was done by communicate(), so use the
    # difference of RUSAGE_CHILDREN around the run.
    wall = time.monotonic() - t0
    if p.returncode != 0:
        sys.exit("interleave.py: %s failed (%d):\n%s" % (" ".join(cmd), p.returncode, out))
    metrics = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) == 3 and f[0] == "metric":
            metrics[f[1]] = float(f[2])
    return wall, metrics


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--lib", default="build/libstrata.so")
    ap.add_argument("--variant", action="append", required=True)
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    variants = []
    for v in a.variant:
        name, _, envs = v.partition("=")
        env = dict(os.environ)
        if envs.strip():
            env["LD_PRELOAD"] = os.path.abspath(a.lib)
            for kv in envs.split():
                k, _, val = kv.partition("=")
                env[k] = val
        variants.append((name, env))
    res = {n: {"wall": [], "cpu": [], "m": {}} for n, _ in variants}
    for _ in range(a.runs):
        for name, env in variants:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            wall, m = run(cmd, env)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            r = res[name]
            r["wall"].append(wall)
            r["cpu"].append(cpu)
            for k, val in m.items():
                r["m"].setdefault(k, []).append(val)
    base = None
    keys = sorted({k for r in res.values() for k in r["m"]})
    print("%-16s %9s %7s %9s %7s  %s" % ("variant", "wall_s", "ratio", "cpu_s", "ratio", "  ".join(keys)))
    for name, _ in variants:
        r = res[name]
        w, c = statistics.median(r["wall"]), statistics.median(r["cpu"])
        if base is None:
            base = (w, c)
        ms = "  ".join("%s=%.4g" % (k, statistics.median(r["m"][k])) if k in r["m"] else "-" for k in keys)
        print("%-16s %9.3f %7.2f %9.3f %7.2f  %s" % (name, w, w / base[0], c, c / base[1], ms))


if __name__ == "__main__":
    main()
