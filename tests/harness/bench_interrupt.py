#!/usr/bin/env python3
"""bench_interrupt.py SRC BUILD — `make bench` stopped by a signal.

Runs `make bench` on a two-line suite (an instant workload, then one that
sleeps a minute), with its runs folder in a temporary directory, and stops it
twice: with SIGINT to its whole process group (what Ctrl-C at a terminal
does), then with SIGTERM to make alone.  Each time: make exits within seconds
and non-zero, no process the run started survives (found by a token in their
environment), run-bench says so in exactly one line and prints no traceback,
the partial results (results.csv with the instant workload's row, report.md)
are readable, and bench/results/ (the committed record) is unchanged.
"""
import hashlib
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid

SRC, BUILD = sys.argv[1], sys.argv[2]


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def tree_digest(path):
    h = hashlib.sha256()
    for root, dirs, files in sorted(os.walk(path)):
        dirs.sort()
        for f in sorted(files):
            p = os.path.join(root, f)
            h.update(os.path.relpath(p, path).encode())
            with open(p, "rb") as fh:
                h.update(hashlib.sha256(fh.read()).digest())
    return h.hexdigest()


def with_token(token):
    """Pids of live processes whose environment carries the token."""
    pids = []
    needle = ("BENCH_INTERRUPT_TOKEN=%s" % token).encode()
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/environ" % d, "rb") as f:
                if needle in f.read().split(b"\0"):
                    with open("/proc/%s/stat" % d) as st:
                        if st.read().split(")")[-1].split()[0] != "Z":
                            pids.append(int(d))
        except OSError:
            continue
    return pids


def one_run(tmp, how):
    token = uuid.uuid4().hex
    runs = os.path.join(tmp, how, "runs")
    suite = os.path.join(tmp, how, "suite.tsv")
    os.makedirs(os.path.dirname(suite))
    with open(suite, "w") as f:
        f.write("instant\tquick\t1\t/bin/echo check ok\n"
                "sleeper\tslow\t1\t/bin/sh -c 'sleep 60; echo check ok'\n")
    env = dict(os.environ, BENCH_RUNS_DIR=runs, BENCH_INTERRUPT_TOKEN=token)
    env.pop("MAKEFLAGS", None)
    env.pop("MFLAGS", None)
    cmd = ["make", "--no-print-directory", "-C", SRC, "bench", "BUILD=" + BUILD, "NODEPS=1", "JOBS=2",
           "BENCH_ARGS=--suite %s --allocators glibc --runs 1 --no-plots" % suite]
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    # Wait for the sleeper to be running (the instant workload is then recorded).
    deadline = time.monotonic() + 120
    while True:
        pids = with_token(token)
        if any(b"sleep" in open("/proc/%d/cmdline" % q, "rb").read() for q in pids if os.path.exists("/proc/%d" % q)):
            break
        if p.poll() is not None or time.monotonic() > deadline:
            out = p.communicate()[0] if p.poll() is not None else ""
            fail("%s: the sleeper never started (make rc %s):\n%s" % (how, p.returncode, out))
        time.sleep(0.2)
    time.sleep(1)
    if how == "sigint-group":
        os.killpg(p.pid, signal.SIGINT)
    else:
        os.kill(p.pid, signal.SIGTERM)
    try:
        out, _ = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        fail("%s: make still running 30 s after the signal" % how)
    survivors = []
    for _ in range(50):
        survivors = with_token(token)
        if not survivors:
            break
        time.sleep(0.1)
    if survivors:
        for q in survivors:
            try:
                os.kill(q, signal.SIGKILL)
            except OSError:
                pass
        fail("%s: processes of the run survived it: %s\n%s" % (how, survivors, out))
    if p.returncode == 0:
        fail("%s: make exited 0 after being stopped\n%s" % (how, out))
    if "Traceback" in out or "No child processes" in out:
        fail("%s: noisy stop:\n%s" % (how, out))
    said = [ln for ln in out.splitlines() if ln.startswith("run-bench: interrupted")]
    if len(said) != 1:
        fail("%s: want one 'run-bench: interrupted' line, got %d:\n%s" % (how, len(said), out))
    latest = os.path.join(runs, "latest")
    csv_text = open(os.path.join(latest, "results.csv")).read()
    if "instant" not in csv_text or "sleeper" in csv_text:
        fail("%s: partial results.csv should hold the instant run only:\n%s" % (how, csv_text))
    report = open(os.path.join(latest, "report.md")).read()
    if "nterrupted" not in report:
        fail("%s: report.md does not say the run was interrupted" % how)
    print("ok: %s: %s" % (how, said[0]))


def main():
    if not os.path.exists(os.path.join(BUILD, "build.ninja")):
        print("SKIP: %s is not a Ninja build directory (make bench needs one)" % BUILD)
        return 77
    results = os.path.join(SRC, "bench", "results")
    before = tree_digest(results) if os.path.isdir(results) else None
    with tempfile.TemporaryDirectory(prefix="strata-bench-interrupt-") as tmp:
        one_run(tmp, "sigint-group")
        one_run(tmp, "sigterm-make")
    after = tree_digest(results) if os.path.isdir(results) else None
    if before != after:
        fail("bench/results/ changed")
    print("ok: bench/results/ unchanged")
    return 0


if __name__ == "__main__":
    sys.exit(main())
