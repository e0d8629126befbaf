#!/usr/bin/env python3
"""overhead.py — measures what recording costs: each program of record.sh is
run plain and under strata-trace, alternately, RUNS times; prints a markdown
table of median wall and CPU (user+sys) time and their ratios.

    bench/traces/overhead.py [--bin BUILD/bin] [--runs 5] [--quick]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.realpath(__file__))


def measure(argv, env, cwd, stdin_path=None):
    """Wall and CPU seconds of one run (children included), via wait4."""
    stdin = open(stdin_path) if stdin_path else subprocess.DEVNULL
    t0 = time.monotonic()
    p = subprocess.Popen(argv, env=env, cwd=cwd, stdin=stdin, stdout=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if stdin_path:
        stdin.close()
    # wait4's rusage covers the process and the children it reaped (cc1, as).
    if p.returncode != 0:
        sys.exit("overhead.py: %s exited %d" % (" ".join(argv), p.returncode))
    return wall, ru.ru_utime + ru.ru_stime


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(HERE, "..", "..", "build", "bin"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    tracer = os.path.join(os.path.abspath(args.bin), "strata-trace")
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else shutil.which("python3")
    work = tempfile.mkdtemp(prefix="strata-overhead.")
    base_env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    py_scale, rows, funcs = ("0.15", 20000, 30) if args.quick else ("0.5", 120000, 120)

    # The same inputs as record.sh: the SQL script and the generated C file.
    sql = os.path.join(work, "db.sql")
    rec_sh = open(os.path.join(HERE, "record.sh")).read()
    body = rec_sh.split("<<SQL\n", 1)[1].split("\nSQL\n", 1)[0].replace("$rows", str(rows))
    with open(sql, "w") as f:
        f.write(body + "\n")
    with open(os.path.join(work, "gen.c"), "w") as f:
        f.write(subprocess.run([python, os.path.join(HERE, "gen_c.py"), str(funcs)],
                               capture_output=True, text=True, check=True).stdout)

    programs = [
        ("python3 (PYTHONMALLOC=malloc)", [python, os.path.join(HERE, "alloc_heavy.py"), py_scale],
         dict(base_env, PYTHONMALLOC="malloc"), None, None),
        ("python3 (pymalloc)", [python, os.path.join(HERE, "alloc_heavy.py"), py_scale], base_env, None, None),
        ("sqlite3", ["sqlite3", os.path.join(work, "db.sqlite")], base_env, sql, "db.sqlite"),
        ("gcc -O2 -c", ["gcc", "-O2", "-c", "gen.c", "-o", "gen.o"], base_env, None, None),
    ]
    rows_out = []
    for name, argv, env, stdin_path, fresh in programs:
        plain_w, plain_c, rec_w, rec_c = [], [], [], []
        for r in range(args.runs):
            for recorded in ((False, True) if r % 2 == 0 else (True, False)):
                if fresh:
                    for suffix in ("", "-journal"):
                        try:
                            os.unlink(os.path.join(work, fresh + suffix))
                        except FileNotFoundError:
                            pass
                cmd = ([tracer, "--quiet", "--children", "-o", os.path.join(work, "t.trace"), "--"] + argv) if recorded else argv
                w, c = measure(cmd, env, work, stdin_path)
                (rec_w if recorded else plain_w).append(w)
                (rec_c if recorded else plain_c).append(c)
                for f in os.listdir(work):
                    if f.startswith("t.trace"):
                        os.unlink(os.path.join(work, f))
        pw, pc, rw, rc = (statistics.median(x) for x in (plain_w, plain_c, rec_w, rec_c))
        rows_out.append((name, pw, rw, rw / pw, pc, rc, rc / pc))
        print("overhead.py: %-30s wall %.3f -> %.3f s (x%.2f), cpu %.3f -> %.3f s (x%.2f)"
              % (name, pw, rw, rw / pw, pc, rc, rc / pc), file=sys.stderr, flush=True)
    print("| program | wall plain (s) | wall recorded (s) | ratio | CPU plain (s) | CPU recorded (s) | ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, pw, rw, wr, pc, rc, cr in rows_out:
        print("| %s | %.3f | %.3f | %.2f | %.3f | %.3f | %.2f |" % (name, pw, rw, wr, pc, rc, cr))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
