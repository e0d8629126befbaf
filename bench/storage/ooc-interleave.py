#!/usr/bin/env python3
"""ooc-interleave.py — the out-of-core comparison of docs/notes/storage.md:
one workload in a memory cgroup of LIMIT with a swap file
(in-swap-cgroup.sh), OS swap (glibc) against one or more builds of Strata
(--libs name=path/libstrata.so,...) under each read policy (--pols), and
--inmem the plain program without any limit (the bound: no speed-up over swap
can beat swap's time over this one).  Runs are interleaved (A B C A B C ...),
and the table gives medians: wall (whole command), the main thread's time as
schedstat-shim.c splits it (m_cpu, m_blocked, m_rq, m_idlewall = wall less
the time spent waiting for a CPU), the program's own metrics and Strata's
counters (sb read/written MiB, faults, prefetches, io_ms, over budget).
xwall / xidle: glibc's median over the variant's (wall, idle wall).
--mpi BUDGET runs the command by mpi-run.sh as 4 ranks under that group budget
(each --libs path's directory must hold libstrata.so and openmpi/libstrata-mpi.so).
Needs root (cgroup, swap), and the shim built:
  cc -O2 -shared -fPIC -o /tmp/schedstat-shim.so bench/storage/schedstat-shim.c
usage: ooc-interleave.py [--runs N] [--inmem] [--libs name=path[+K=V...],...] [--pols aggressive,lazy]
                         [--env K=V ...] [--mpi BUDGET] [--shim PATH] LIMIT -- program args
"""
import argparse, os, re, statistics, subprocess, sys, time
ap = argparse.ArgumentParser()
ap.add_argument("--runs", type=int, default=3)
ap.add_argument("--libs", default="strata=build/libstrata.so")
ap.add_argument("--pols", default="aggressive,lazy")
ap.add_argument("--env", action="append", default=[])
ap.add_argument("--mpi", default=None, help="group budget: run via mpi-run.sh")
ap.add_argument("--noglibc", action="store_true")
ap.add_argument("--shim", default="/tmp/schedstat-shim.so")
ap.add_argument("--inmem", action="store_true")
ap.add_argument("limit")
ap.add_argument("cmd", nargs=argparse.REMAINDER)
a = ap.parse_args()
cmd = a.cmd[1:] if a.cmd[0] == "--" else a.cmd
os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SH = a.shim
variants = []
if not a.noglibc:
    variants.append(("glibc", {"LD_PRELOAD": SH}, None))
if a.inmem:
    variants.append(("inmem", {"LD_PRELOAD": SH}, "MEM"))
if a.mpi: variants = [(n, e, l) for n, e, l in variants]
for nl in (a.libs.split(",") if a.libs else []):
    n, l = nl.split("=", 1)
    l, *own = l.split("+")   # name=path+K=V+...: settings of this variant only
    l = os.path.abspath(l)
    for pol in a.pols.split(","):
        e = {"STRATA_SB_DIR": "/var/tmp", "STRATA_SB_BUDGET": "auto", "STRATA_SB_READ": pol, "STRATA_SHOW_STATS": "1"}
        for kv in a.env:
            k, v = kv.split("=", 1); e[k] = v
        if a.mpi:
            e = {"BENCH_SB_BUDGET": a.mpi, "BENCH_SB_READ": pol, "LD_PRELOAD": SH, "STRATA_SHOW_STATS": "1", "BENCH_SB_BUILD": os.path.dirname(l)}
            for kv in a.env:
                k, v = kv.split("=", 1); e[k] = v
        for kv in own:
            k, v = kv.split("=", 1); e[k] = v
        else:
            e["LD_PRELOAD"] = SH + ":" + l
        variants.append((n + "-" + pol[:4], e, l))
full = ["bench/storage/in-swap-cgroup.sh", a.limit, "1G"] + cmd
def fullfor(l):
    if not a.mpi or l is None or l == "MEM":
        return (["bench/storage/mpi-run.sh", "build"] + cmd) if a.mpi and l is None else full
    return ["bench/storage/in-swap-cgroup.sh", a.limit, "1G", "bench/storage/mpi-run.sh", os.path.dirname(l)] + cmd
res = {n: {} for n, _, _ in variants}
def units(s):
    m = re.match(r"([\d.]+) (B|KiB|MiB|GiB)", s)
    f = {"B": 1/2**20, "KiB": 1/1024, "MiB": 1, "GiB": 1024}[m.group(2)]
    return float(m.group(1)) * f
print(time.strftime("%H:%M:%S"), open("/proc/loadavg").read().strip(), flush=True)
for r in range(a.runs):
    for n, e, l in variants:
        env = dict(os.environ); env.update(e)
        t0 = time.monotonic()
        p = subprocess.run(((["bench/storage/mpi-run.sh", "build"] + cmd) if a.mpi else cmd) if l == "MEM" else (["bench/storage/in-swap-cgroup.sh", a.limit, "1G"] + fullfor(l) if a.mpi and l is None else fullfor(l)), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        w = time.monotonic() - t0
        if p.returncode:
            print("FAILED", n, p.stdout[-3000:]); sys.exit(1)
        d = res[n]
        d.setdefault("wall", []).append(w)
        acc = {}
        for line in p.stdout.splitlines():
            f = line.split()
            if len(f) == 3 and f[0] == "metric":
                acc.setdefault(f[1], []).append(float(f[2]))
            m = re.match(r"\s+sb_(written|read)\s+([\d.]+ \w+)", line)
            if m: acc.setdefault(m.group(1) + "MiB", []).append(units(m.group(2)))
            m = re.match(r"\s+sb_faults\s+(\d+)\s+loads on access \(prefetches (\d+)", line)
            if m:
                acc.setdefault("faults", []).append(float(m.group(1))); acc.setdefault("pref", []).append(float(m.group(2)))
            m = re.match(r"\s+sb_io_ms\s+(\d+)", line)
            if m: acc.setdefault("io_ms", []).append(float(m.group(1)))
            m = re.match(r"\s+sb_over_budget\s+(\d+)", line)
            if m: acc.setdefault("over", []).append(float(m.group(1)))
            if line.startswith("result"): d.setdefault("result", set()).add(line)
        for k, v in acc.items():
            # metrics of several processes (ranks): sum for sb counters and cpu, max for times
            if k in ("m_wall", "m_idlewall", "iter_s", "levels_s", "total_s"): val = max(v)
            elif k.startswith("m_") or k.startswith("t_") or k in ("writtenMiB", "readMiB", "faults", "pref", "io_ms", "over"): val = sum(v) if k[0] != "m" or a.mpi else v[-1]
            else: val = v[0]
            d.setdefault(k, []).append(val)
    print("run", r + 1, "done", time.strftime("%H:%M:%S"), open("/proc/loadavg").read().strip(), flush=True)
keys = ["wall", "m_wall", "m_idlewall", "m_cpu", "m_blocked", "m_rq", "t_cpu", "iter_s", "levels_s", "total_s", "readMiB", "writtenMiB", "faults", "pref", "io_ms", "over"]
base = statistics.median(res[variants[0][0]]["wall"]); baseI = statistics.median(res[variants[0][0]].get("m_idlewall", [1]))
print("%-10s" % "variant" + "".join("%11s" % k for k in keys if any(k in res[n] for n, _, _ in variants)) + "  xwall  xidle")
for n, _, _ in variants:
    d = res[n]
    row = "%-10s" % n
    for k in keys:
        if not any(k in res[m] for m, _, _ in variants): continue
        row += "%11.3f" % statistics.median(d[k]) if k in d else "%11s" % "-"
    row += "  %5.2f  %5.2f" % (base / statistics.median(d["wall"]), baseI / statistics.median(d.get("m_idlewall", [1])))
    print(row)
    print("   walls", " ".join("%.2f" % x for x in d["wall"]), "results", len(d.get("result", [])))
