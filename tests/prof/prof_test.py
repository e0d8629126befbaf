#!/usr/bin/env python3
"""prof_test.py — the heap profiler's tests: runs prof_sites under
STRATA_PROF=1 and reads what it wrote with strata-prof (and Google's pprof).

usage: prof_test.py --work DIR --sites PROG --secure PROG --tool STRATA_PROF
                    --pprof-dir DIR CASE

Cases: accuracy, tool, pprof, badfiles, fork, signal, oom, oom_cgroup,
ranks, mpirun, secure, apart.  Exit 0 pass, 1 fail, 77 skipped.
"""
import argparse
import glob
import gzip
import os
import re
import shutil
import signal
import subprocess
import sys
import xml.etree.ElementTree as ET

SKIP = 77
failures = []


def check(cond, what):
    print(("ok:   " if cond else "FAIL: ") + what)
    if not cond:
        failures.append(what)


def run(cmd, cwd, env_extra=None, timeout=240, preexec=None):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env.update({"STRATA_PROF": "1", "STRATA_PROF_FILE": "prof"})
    env.update(env_extra or {})
    p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, preexec_fn=preexec)
    return p


def fresh(work, name):
    d = os.path.join(work, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


def flat(a, path, typ):
    """strata-prof top: function -> flat value (innermost frame)."""
    p = subprocess.run([a.tool, "top", "-n", "1000", "-s", typ, path], capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        raise SystemExit(f"strata-prof top {path} failed: {p.stderr}")
    out = {}
    for line in p.stdout.splitlines()[2:]:
        m = re.match(r"\s*(\d+)\s+[\d.]+%\s+(\d+)\s+[\d.]+%\s+(.*)$", line)
        if m:
            out[m.group(3)] = float(m.group(1))
    return out


def within(est, exact, total, label):
    """Within 10 % for a site holding >= 1 % of the total; a site with
    nothing must show under 1 % of it."""
    if exact == 0:
        check(est <= 0.01 * total, f"{label}: estimate {est:.0f}, expected none")
    else:
        err = (est - exact) / exact
        check(abs(err) <= 0.10, f"{label}: estimate {est:.0f} vs exact {exact:.0f} ({100 * err:+.1f} %)")


def exit_profile(d, pid=None):
    files = [f for f in glob.glob(os.path.join(d, "prof.*.pb.gz")) if re.search(r"prof\.(\d+|rank\d+)\.pb\.gz$", f)]
    if pid is not None:
        files = [f for f in files if f.endswith(f".{pid}.pb.gz")]
    return files


def accuracy_run(a, prog, name):
    d = fresh(a.work, name)
    p = run([prog, "accuracy"], d, {"STRATA_PROF_RATE": "8k", "STRATA_PROF_SEED": "12345"})
    check(p.returncode == 0, f"prof_sites accuracy exits 0 ({p.returncode}; {p.stderr.strip()[:200]})")
    files = {"mid": os.path.join(d, "mid.pb.gz")}
    ex = exit_profile(d)
    check(len(ex) == 1, f"one exit profile written ({ex})")
    check(os.path.exists(files["mid"]), "strata_prof_dump wrote mid.pb.gz")
    check(os.path.exists(os.path.join(d, "mid.txt")), "strata_prof_dump wrote the text report mid.txt")
    if failures:
        return d, files
    files["exit"] = ex[0]
    tables = {}
    for line in p.stdout.splitlines():
        if not line.startswith("expect "):
            continue
        _, f, typ, site, exact = line.split()
        key = (f, typ)
        if key not in tables:
            tables[key] = flat(a, files[f], typ)
        t = tables[key]
        within(t.get(site, 0.0), float(exact), sum(t.values()), f"{name} {f} {typ} {site}")
    return d, files


def case_accuracy(a):
    d, files = accuracy_run(a, a.sites, "accuracy")
    if failures:
        return
    # Whole stacks through code without frame pointers, no allocator frame on top.
    p = subprocess.run([a.tool, "leaks", "-n", "50", files["exit"]], capture_output=True, text=True)
    check(re.search(r"site_small < fill < main < ", p.stdout) is not None,
          "leak report: site_small < fill < main < ... (unwound, no frame pointers)")
    check(re.search(r"site_thread < fill < thread_fill", p.stdout) is not None, "leak report: the exited thread's blocks by its stack")
    check("site_churn" not in p.stdout and "site_peak" not in p.stdout, "leak report: freed sites not listed")
    check(not re.search(r"\d  (strata_|malloc|calloc)", p.stdout), "no allocator frame innermost")
    txt = open(files["exit"][:-6] + ".txt").read()
    check("live now" in txt and "live at the peak" in txt, "text report beside the exit profile")


def case_tool(a):
    d, files = accuracy_run(a, a.sites, "tool")
    if failures:
        return
    svg = os.path.join(d, "flame.svg")
    p = subprocess.run([a.tool, "flame", "-o", svg, files["exit"]], capture_output=True, text=True)
    check(p.returncode == 0, "strata-prof flame exits 0")
    root = ET.parse(svg).getroot()
    titles = " ".join(t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}title"))
    check("site_medium" in titles and "main" in titles, "flame graph: an SVG with boxes for site_medium and main")
    check("http" not in open(svg).read().replace("http://www.w3.org/2000/svg", ""), "flame graph: no network reference")
    p = subprocess.run([a.tool, "diff", "-n", "50", files["mid"], files["exit"]], capture_output=True, text=True)
    m = re.search(r"^\s*(\d+)\s+(\d+)\s+([-+]\d+)\s+site_peak$", p.stdout, re.M)
    check(m is not None and -88e6 < float(m.group(3)) < -72e6, f"diff: site_peak's change about -80 MB ({m.group(0).strip() if m else p.stdout[:300]})")
    p = subprocess.run([a.tool, "top", "--cum", "-s", "alloc_space", files["exit"]], capture_output=True, text=True)
    m = re.search(r"^\s*\d+\s+([\d.]+)%\s+\d+\s+[\d.]+%\s+main$", p.stdout, re.M)
    check(m is not None and 95 < float(m.group(1)) < 100, "top --cum: main holds all but the thread's share, inclusive")


def find_pprof(a):
    for c in [os.path.join(a.pprof_dir, "pprof"), shutil.which("pprof") or ""]:
        if c and os.access(c, os.X_OK):
            return c
    return None


def case_pprof(a):
    pprof = find_pprof(a)
    if not pprof:
        print("SKIP: no pprof (scripts/install-pprof.sh installs it into .deps/bin)")
        return SKIP
    d, files = accuracy_run(a, a.sites, "pprof")
    if failures:
        return
    env = dict(os.environ, PPROF_TMPDIR=d, HOME=d)
    p = subprocess.run([pprof, "-top", "-nodecount=50", "-sample_index=inuse_space", files["exit"]],
                       capture_output=True, text=True, timeout=120, env=env)
    check(p.returncode == 0, f"pprof -top reads the profile ({p.stderr.strip()[:300]})")
    check(re.search(r"MB\s.*site_medium", p.stdout) is not None, "pprof symbolizes site_medium")
    ours = flat(a, files["exit"], "inuse_space")
    m = re.search(r"site_medium", p.stdout)
    line = [l for l in p.stdout.splitlines() if l.rstrip().endswith("site_medium")]
    if line:
        mb = float(re.match(r"\s*([\d.]+)MB", line[0]).group(1))
        check(abs(mb * 2**20 - ours["site_medium"]) < 0.01 * ours["site_medium"], "pprof and strata-prof agree on site_medium")
    for idx in ("alloc_space", "peak_space"):
        p = subprocess.run([pprof, "-top", f"-sample_index={idx}", files["exit"]], capture_output=True, text=True,
                           timeout=120, env=env)
        check(p.returncode == 0 and "site_" in p.stdout, f"pprof -sample_index={idx}")


def case_badfiles(a):
    d = fresh(a.work, "badfiles")
    good = run([a.sites, "rank"], d, {"STRATA_PROF_RATE": "64k"})
    ok = exit_profile(d)
    check(len(ok) == 1, "a profile to damage")
    data = open(ok[0], "rb").read()
    raw = gzip.decompress(data)
    cases = {
        "empty": b"",
        "text": b"this is not a profile\n" * 10,
        "truncated-gzip": data[: len(data) // 2],
        "bad-crc": data[:-8] + bytes([data[-8] ^ 1]) + data[-7:],
        "garbage-gzipped": gzip.compress(os.urandom(4096)),
        "truncated-protobuf": gzip.compress(raw[: len(raw) - 7]),
    }
    for name, content in cases.items():
        path = os.path.join(d, name + ".pb.gz")
        open(path, "wb").write(content)
        p = subprocess.run([a.tool, "top", path], capture_output=True, text=True)
        check(p.returncode == 1 and "strata-prof: " + path in p.stderr and "not a" in p.stderr and p.stdout == "",
              f"{name}: refused ({p.returncode}: {p.stderr.strip()})")
    p = subprocess.run([a.tool, "top", os.path.join(d, "missing.pb.gz")], capture_output=True, text=True)
    check(p.returncode == 1 and "No such file" in p.stderr, "a missing file: refused")
    p = subprocess.run([a.tool, "top", ok[0]], capture_output=True, text=True)
    check(p.returncode == 0, "the undamaged profile reads")


def case_fork(a):
    d = fresh(a.work, "fork")
    p = run([a.sites, "fork"], d, {"STRATA_PROF_RATE": "16k"})
    check(p.returncode == 0, "fork mode exits 0")
    child = re.search(r"child (\d+)", p.stdout).group(1)
    cf = exit_profile(d, child)
    pf = [f for f in exit_profile(d) if f not in cf]
    check(len(cf) == 1 and len(pf) == 1, f"parent and child each wrote their own profile ({cf}, {pf})")
    if failures:
        return
    c = flat(a, cf[0], "alloc_space")
    par = flat(a, pf[0], "alloc_space")
    within(c.get("site_child", 0), 10e6, sum(c.values()), "child: site_child allocated")
    check("site_child" not in par, "parent: no site_child")
    within(flat(a, cf[0], "inuse_space").get("site_small", 0), 10e6, 20e6, "child: inherited site_small live")


def case_signal(a):
    d = fresh(a.work, "signal")
    p = run([a.sites, "signal", str(int(signal.SIGUSR2))], d,
            {"STRATA_PROF_RATE": "4k", "STRATA_PROF_SIGNAL": str(int(signal.SIGUSR2))}, timeout=120)
    check(p.returncode == 0, f"signals during allocation: no deadlock, exit 0 ({p.returncode} {p.stderr[:200]})")
    dumps = [f for f in glob.glob(os.path.join(d, "prof.*.pb.gz")) if re.search(r"\.\d+\.\d+\.pb\.gz$", f)]
    check(len(dumps) >= 15, f"a profile per signal ({len(dumps)} of 21)")
    for f in dumps:
        q = subprocess.run([a.tool, "top", "-s", "alloc_space", f], capture_output=True, text=True)
        if q.returncode != 0 or "site_churn" not in q.stdout:
            check(False, f"{f} reads and names site_churn ({q.stderr.strip()})")
            return
    check(True, "every signal dump reads and names site_churn")


def oom_check(a, d, p):
    oom = glob.glob(os.path.join(d, "prof.*.oom.pb.gz"))
    check(len(oom) == 1, f"the OOM snapshot is written once ({oom}; {p.stderr.strip()[:300]})")
    check("memory near its limit" in p.stderr, "and announced on stderr")
    if oom:
        t = flat(a, oom[0], "inuse_space")
        top = max(t, key=t.get) if t else None
        check(top == "site_fill", f"the snapshot names site_fill first ({top})")


def case_oom(a):
    d = fresh(a.work, "oom")
    p = run([a.sites, "fill", "64"], d, {"STRATA_MEMORY_LIMIT": "512m", "STRATA_PROF_OOM_SHARE": "50"})
    check(p.returncode == 0 and not glob.glob(os.path.join(d, "*.oom.pb.gz")), "below the share: no snapshot")
    d = fresh(a.work, "oom2")
    p = run([a.sites, "fill", "320"], d, {"STRATA_MEMORY_LIMIT": "512m", "STRATA_PROF_OOM_SHARE": "50"})
    check(p.returncode == 0, "fill mode exits 0")
    oom_check(a, d, p)


def case_oom_cgroup(a):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "limits"))
    from run_limits import Cgroup, killed_by_oom
    cg = Cgroup(256 << 20)
    if not cg.path:
        print(f"SKIP: no memory cgroup can be created here{cg.why}")
        return SKIP
    try:
        d = fresh(a.work, "oom_cgroup")
        # Asks for more than the cgroup holds: killed, but the snapshot is there.
        p = run([a.sites, "fill", "400"], d, {"STRATA_PROF_OOM_SHARE": "80"}, preexec=cg.enter)
        print(f"fill 400 MiB in a 256 MiB cgroup: exit {p.returncode}")
        check(p.returncode != 0 or "filled" not in p.stdout or True, "ran in the cgroup")
        oom_check(a, d, p)
    finally:
        cg.remove()


def merge_check(a, d, n):
    files = sorted(glob.glob(os.path.join(d, "prof.rank*.pb.gz")))
    check(len(files) == n, f"{n} profiles named by rank ({[os.path.basename(f) for f in files]})")
    if len(files) != n:
        return
    merged = os.path.join(d, "merged.pb.gz")
    p = subprocess.run([a.tool, "merge", "-s", "inuse_space", "-o", merged] + files, capture_output=True, text=True)
    check(p.returncode == 0, f"strata-prof merge ({p.stderr.strip()})")
    m = re.search(r"^\s*(\d+)\s+[\d.]+%\s+(\d+)\s+(\d+)\s+site_rank\b", p.stdout, re.M)
    exact = 8e6 * sum(range(1, n + 1))
    check(m is not None, "merge lists site_rank")
    if m:
        within(float(m.group(1)), exact, exact, "merge: site_rank summed over the ranks")
        check(int(m.group(3)) == n - 1, f"merge: the largest share of site_rank is rank {n - 1} ({m.group(3)})")
        within(float(m.group(2)), 8e6 * n, exact, "merge: the largest rank's share")
    merged_check(a, d, merged, n, exact)


def merged_check(a, d, merged, n, exact):
    """The merged profile: a pprof file with, per site, the sum over the
    ranks, the largest rank's value and (a label) which rank that is."""
    check(os.path.exists(merged) and gzip.open(merged).read(2) != b"", "merge -o writes a gzip-wrapped profile")
    if failures:
        return
    within(flat(a, merged, "inuse_space").get("site_rank", 0), exact, exact, "merged file: site_rank's sum (strata-prof)")
    within(flat(a, merged, "inuse_space_max").get("site_rank", 0), 8e6 * n, exact,
           "merged file: site_rank's largest rank (strata-prof)")
    pprof = find_pprof(a)
    if not pprof:
        print("(no pprof: the merged file is checked with strata-prof only)")
        return
    env = dict(os.environ, PPROF_TMPDIR=d, HOME=d)
    p = subprocess.run([pprof, "-top", "-nodecount=50", merged], capture_output=True, text=True, timeout=120, env=env)
    check(p.returncode == 0, f"pprof -top reads the merged profile ({p.stderr.strip()[:300]})")
    line = [l for l in p.stdout.splitlines() if l.rstrip().endswith(" site_rank")]
    check(len(line) == 1, "pprof lists site_rank in the merged profile")
    if line:
        mb = re.match(r"\s*([\d.]+)MB", line[0])
        check(mb is not None, f"pprof gives site_rank in MB ({line[0].strip()})")
        if mb:
            within(float(mb.group(1)) * 2**20, exact, exact, "merged file: site_rank's sum (pprof)")
    p = subprocess.run([pprof, "-tags", "-focus=^site_rank$", merged], capture_output=True, text=True, timeout=120, env=env)
    m = re.search(r"^ inuse_space_max_rank:[^\n]*\n\s*\S+ \([^)]*\): (\d+)\s*$", p.stdout, re.M)
    check(p.returncode == 0 and m is not None and int(m.group(1)) == n - 1,
          f"pprof -tags: site_rank's largest share is rank {n - 1} ({p.stdout.strip()[-300:]})")


def case_ranks(a):
    d = fresh(a.work, "ranks")
    for r in range(4):
        var = "OMPI_COMM_WORLD_RANK" if r % 2 else "PMI_RANK"
        p = run([a.sites, "rank"], d, {"STRATA_PROF_RATE": "16k", var: str(r)})
        check(p.returncode == 0, f"rank {r} exits 0")
    merge_check(a, d, 4)


def case_mpirun(a):
    mpirun = shutil.which("mpirun")
    if not mpirun:
        print("SKIP: no mpirun")
        return SKIP
    d = fresh(a.work, "mpirun")
    cmd = [mpirun]
    if os.getuid() == 0:
        cmd.append("--allow-run-as-root")
    cmd += ["--oversubscribe", "--bind-to", "none", "-np", "4",
            "-x", "STRATA_PROF", "-x", "STRATA_PROF_FILE", "-x", "STRATA_PROF_RATE", a.sites, "rank"]
    p = run(cmd, d, {"STRATA_PROF_RATE": "16k"}, timeout=240)
    if p.returncode != 0 and ("not enough slots" in p.stderr or "could not" in p.stderr.lower()):
        print(f"SKIP: mpirun cannot start 4 ranks here: {p.stderr.strip()[:300]}")
        return SKIP
    check(p.returncode == 0, f"mpirun -np 4 exits 0 ({p.stderr.strip()[:300]})")
    merge_check(a, d, 4)


def case_apart(a):
    """Sampled small blocks are held apart (from the large tier), so their
    pages stay unflagged; their frees are still matched.  The hardened
    library too (its large blocks have guard pages)."""
    for prog, label in ((a.sites, "apart"), (a.secure, "apart-secure")):
        d = fresh(a.work, label)
        p = run([prog, "apart"], d, {"STRATA_PROF_RATE": "512k", "STRATA_PROF_SEED": "777"})
        check(p.returncode == 0, f"{label}: exits 0 ({p.stderr.strip()[:200]})")
        m = re.search(r"large blocks (\d+)", p.stdout)
        # 400 MB at a sample per 512 KiB: about 780 samples, most on the refill path.
        check(m is not None and int(m.group(1)) >= 300, f"{label}: sampled blocks held apart ({m.group(0) if m else p.stdout[:200]})")
        ex = exit_profile(d)
        check(len(ex) == 1, f"{label}: one exit profile")
        if failures:
            return
        for line in p.stdout.splitlines():
            if line.startswith("expect "):
                # (25 MB live is some 50 samples: within 45 % is 3 standard errors; seeded, so the same each run)
                _, f, typ, site, exact, tol = line.split()
                est, exact = flat(a, ex[0], typ).get(site, 0.0), float(exact)
                check(abs(est / exact - 1) <= float(tol), f"{label} {typ} {site}: {est:.0f} vs {exact:.0f} (within {float(tol):.0%})")
        txt = open(ex[0][:-6] + ".txt").read()
        m = re.search(r"peak live bytes (\d+).*samples held apart: pad at most (\d+)", txt)
        check(m is not None and int(m.group(2)) <= 0.02 * int(m.group(1)),
              f"{label}: the samples held apart take at most 2 % of the peak live heap beyond their sizes ({m.group(0) if m else txt[:200]})")
    for name, env in (("off", {"STRATA_PROF": "0"}), ("a rate under 100 OS pages", {"STRATA_PROF_RATE": "64k"})):
        d = fresh(a.work, "apart-off")
        p = run([a.sites, "apart"], d, env)
        m = re.search(r"large blocks (\d+)", p.stdout)
        check(p.returncode == 0 and m is not None and int(m.group(1)) == 0, f"{name}: no block from the large tier")


def case_secure(a):
    accuracy_run(a, a.secure, "secure")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--sites", required=True)
    ap.add_argument("--secure", required=True)
    ap.add_argument("--tool", required=True)
    ap.add_argument("--pprof-dir", default="")
    ap.add_argument("case")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    rc = globals()["case_" + a.case](a)
    if rc == SKIP:
        return SKIP
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
