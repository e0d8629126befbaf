#!/usr/bin/env python3
"""tools_test.py — the trace tools' tests, one CTest test per subcommand.

    tools_test.py --bin BUILD/bin --work DIR [--preload LIB] SUBCOMMAND [ARGS]

Each subcommand runs the real tools on real or generated traces and exits
non-zero (with a reason) on the first wrong result.  --preload runs the
recorded programs and the replays on top of another allocator (e.g.
libstrata.so) instead of the system one.
"""
import argparse
import csv
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time

ARGS = None


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def tool(name):
    return os.path.join(ARGS.bin, name)


def env_with_preload():
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if ARGS.preload:
        env["LD_PRELOAD"] = ARGS.preload
    return env


def run(cmd, expect_rc=0, env=None, timeout=120):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env or env_with_preload(),
                       timeout=timeout)
    if expect_rc is not None and p.returncode != expect_rc:
        fail("%s exited %d (expected %d)\nstdout:\n%s\nstderr:\n%s"
             % (" ".join(cmd), p.returncode, expect_rc, p.stdout[-3000:], p.stderr[-3000:]))
    return p


def record(out, argv, expect_rc=0, opts=()):
    return run([tool("strata-trace"), "-o", out] + list(opts) + ["--"] + argv, expect_rc=expect_rc)


def stats(path):
    return json.loads(run([tool("strata-trace-stats"), path, "--json"]).stdout)


def dump(path):
    rows = []
    for line in run([tool("strata-trace-stats"), path, "--dump"]).stdout.splitlines():
        seq, tid, op, size, align, bid, old, flags = line.split()
        rows.append(dict(seq=int(seq), tid=int(tid), op=op, size=int(size), align=int(align),
                         id=int(bid), old=int(old), flags=flags))
    return rows


def replay(path, extra=()):
    p = run([tool("strata-replay"), path] + list(extra), expect_rc=None)
    if p.returncode != 0 or "check ok" not in p.stdout:
        fail("replay of %s failed (rc %d):\n%s\n%s" % (path, p.returncode, p.stdout, p.stderr))
    metrics = {}
    for line in p.stdout.splitlines():
        m = re.match(r"metric (\S+) (\S+)", line)
        if m:
            metrics[m.group(1)] = float(m.group(2))
    return metrics


def expectations(stdout):
    exp = {}
    for line in stdout.splitlines():
        parts = line.split()
        if parts and parts[0] == "expect":
            exp[parts[1]] = [int(x) for x in parts[2:]]
    return exp


def workdir(name):
    d = os.path.join(ARGS.work, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


# ---- tests ----------------------------------------------------------------

def t_roundtrip(prog):
    """Record a program with known calls, compare counts and bytes, replay it,
    record the replay and check the replayed calls are the recorded ones."""
    d = workdir("roundtrip")
    tr = os.path.join(d, "known.trace")
    # The program's own calls are compared: under Strata the background
    # purge's start adds glibc's calloc of the new thread (docs/tools.md).
    os.environ["STRATA_BACKGROUND_PURGE"] = "0"
    p = record(tr, [prog])
    del os.environ["STRATA_BACKGROUND_PURGE"]
    exp = expectations(p.stdout)
    if len(exp) != 7:
        fail("known program printed no expectations: " + p.stdout)
    s = stats(tr)
    for op, (count, nbytes) in exp.items():
        got_c, got_b = s["operations"][op], s["bytes"][op]
        if got_c != count or got_b != nbytes:
            fail("%s: trace has %d calls/%d bytes, program made %d/%d" % (op, got_c, got_b, count, nbytes))
    if s["unknown_releases"] or s["failed"] or s["reused"]:
        fail("unexpected unknown/failed/reused counts: %s" % s)
    if s["realloc"]["longest_chain"] != 2:
        fail("realloc chain of 2 expected, got %d" % s["realloc"]["longest_chain"])
    if s["alignments"].get("64") != exp["posix_memalign"][0] or s["alignments"].get("256") != exp["memalign"][0]:
        fail("alignments not recorded: %s" % s["alignments"])
    m = replay(tr)
    total = sum(c for c, _ in exp.values())
    if int(m["ops"]) != total:
        fail("replay made %d calls, trace has %d" % (m["ops"], total))
    # A comparison run: one row per allocator, each replayed in its own process.
    names = "glibc," + (ARGS.preload or "glibc")
    p = run([tool("strata-replay"), tr, "--allocator", names])
    rows = [l for l in p.stdout.split("\n\n")[0].splitlines()[1:] if l.strip()]
    bands = p.stdout.split("\n\n")[1].splitlines() if "\n\n" in p.stdout else []
    if len(bands) != 4 or not bands[0].startswith("ns per call by requested size"):
        fail("comparison: no size-band table:\n" + p.stdout)
    if len(rows) != 2 or not all(l.rstrip().endswith(" ok") for l in rows):
        fail("comparison table wrong:\n" + p.stdout)
    # Record the replay itself: every recorded (op, size) must come back.
    tr2 = os.path.join(d, "replayed.trace")
    p = record(tr2, [tool("strata-replay"), tr, "--quiet"])
    orig = {}
    for r in dump(tr):
        orig[(r["op"], r["size"], r["align"])] = orig.get((r["op"], r["size"], r["align"]), 0) + 1
    again = {}
    for r in dump(tr2):
        key = (r["op"], r["size"], r["align"])
        again[key] = again.get(key, 0) + 1
    for key, n in orig.items():
        op, size, align = key
        if op == "calloc":   # replayed as calloc(1, size): same total
            pass
        if again.get(key, 0) < n:
            fail("replay made %s(%d, align %d) %d times, trace has %d" % (op, size, align, again.get(key, 0), n))
    print("roundtrip ok: %d calls, replay %.3f ms" % (total, m["replay_ms"]))


def t_crossthread(prog):
    """Blocks made on one thread and let go on another replay in order."""
    d = workdir("crossthread")
    tr = os.path.join(d, "x.trace")
    p = record(tr, [prog])
    exp = expectations(p.stdout)
    s = stats(tr)
    if s["threads"] < 3:
        fail("expected main + 2 threads, trace has %d" % s["threads"])
    if s["cross_thread"]["frees"] != exp["cross"][0]:
        fail("cross-thread releases: trace %d, program %d" % (s["cross_thread"]["frees"], exp["cross"][0]))
    # Pairing: every release refers to a block made earlier in global order.
    made = {}
    for r in dump(tr):
        if r["old"] > 0:
            if r["old"] not in made or made[r["old"]] >= r["seq"]:
                fail("block %d let go at seq %d before it was made" % (r["old"], r["seq"]))
        if r["id"] > 0:
            made[r["id"]] = r["seq"]
    for _ in range(3):
        replay(tr)
    # The replay, recorded, must let go of the same blocks across threads.
    tr2 = os.path.join(d, "again.trace")
    record(tr2, [tool("strata-replay"), tr, "--quiet"])
    s2 = stats(tr2)
    # A free run before its block was made would be free(NULL) plus a leak,
    # not a cross-thread release: the count would fall short.
    if s2["cross_thread"]["frees"] < exp["cross"][0]:
        fail("replay let go of %d blocks across threads, trace has %d" % (s2["cross_thread"]["frees"], exp["cross"][0]))
    # A generated trace with many threads and half the frees cross-thread.
    g = os.path.join(d, "gen.trace")
    run([tool("strata-tracegen"), "random", "-o", g, "--threads", "6", "--cross", "0.5",
         "--live", "2000", "--ops", "200000", "--realloc", "0.1", "--seed", "7"])
    gs = stats(g)
    if gs["cross_thread"]["share"] < 0.3:
        fail("generated trace has a cross share of %.2f" % gs["cross_thread"]["share"])
    for _ in range(3):
        replay(g)
    print("crossthread ok: %d cross-thread releases" % s["cross_thread"]["frees"])


def corruptions(good, d):
    data = open(good, "rb").read()
    out = {}

    def put(name, blob):
        path = os.path.join(d, name)
        with open(path, "wb") as f:
            f.write(blob)
        out[name] = path
    put("truncated-mid.trace", data[: len(data) // 2])
    put("truncated-end.trace", data[:-24])
    put("truncated-header.trace", data[:20])
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0x5A
    put("corrupt.trace", bytes(flipped))
    version = bytearray(data)
    version[8] = 9
    put("version.trace", bytes(version))
    rnd = random.Random(4)
    put("garbage.trace", bytes(rnd.randrange(256) for _ in range(5000)))
    put("text.trace", b"this is not a trace at all\n" * 10)
    put("empty.trace", b"")
    put("trailing.trace", data + b"xx")
    out["missing.trace"] = os.path.join(d, "missing.trace")
    out["directory"] = d
    return out


def t_badinput(prog):
    """Every reading tool gives one error line with the file and a byte offset."""
    d = workdir("badinput")
    good = os.path.join(d, "good.trace")
    run([tool("strata-tracegen"), "random", "-o", good, "--live", "500", "--ops", "50000"])
    replay(good)
    expect_word = {"truncated-mid.trace": "truncated", "truncated-end.trace": "truncated",
                   "truncated-header.trace": "truncated", "corrupt.trace": "corrupt",
                   "version.trace": "version", "garbage.trace": "not a Strata trace",
                   "text.trace": "not a Strata trace", "empty.trace": "empty",
                   "trailing.trace": "after the end", "missing.trace": "cannot open",
                   "directory": "not a regular file"}
    for name, path in corruptions(good, d).items():
        for t in ("strata-replay", "strata-trace-stats"):
            for extra in ([], ["--json"]) if t == "strata-trace-stats" else ([],):
                p = run([tool(t), path] + extra, expect_rc=None)
                lines = p.stderr.strip().splitlines()
                if p.returncode == 0:
                    fail("%s accepted %s" % (t, name))
                if len(lines) != 1:
                    fail("%s on %s: expected one error line, got:\n%s" % (t, name, p.stderr))
                if not re.match(r"^%s: %s: .* at byte \d+$" % (re.escape(t), re.escape(path)), lines[0]):
                    fail("%s on %s: badly formed error: %s" % (t, name, lines[0]))
                if expect_word[name] not in lines[0]:
                    fail("%s on %s: error does not say '%s': %s" % (t, name, expect_word[name], lines[0]))
                if "check ok" in p.stdout:
                    fail("%s on %s printed check ok" % (t, name))
    # The writing tools: bad arguments, missing programs.
    for cmd in ([tool("strata-tracegen"), "nosuchkind", "-o", os.path.join(d, "x")],
                [tool("strata-tracegen"), "random", "-o", os.path.join(d, "x"), "--sizes", "log:9"],
                [tool("strata-tracegen"), "random", "-o", "/nonexistent/dir/x"],
                [tool("strata-trace"), "-o", os.path.join(d, "y"), "--", "/nonexistent/program"],
                [tool("strata-trace"), "-o", "/nonexistent/dir/y", "--", prog],
                [tool("strata-replay"), good, "--allocator", "/nonexistent/lib.so"],
                [tool("strata-replay"), good, "--touch", "sometimes"]):
        p = run(cmd, expect_rc=None)
        if p.returncode == 0:
            fail("accepted: " + " ".join(cmd))
        if not p.stderr.strip():
            fail("no error message from: " + " ".join(cmd))
    print("badinput ok")


def checksum(payload):
    """The chunk checksum of docs/tools.md."""
    mask = (1 << 64) - 1
    n = len(payload)
    h = 0x9E3779B97F4A7C15 ^ n
    i = 0
    while i + 8 <= n:
        w = int.from_bytes(payload[i:i + 8], "little")
        h = ((h ^ w) * 0x100000001B3) & mask
        h ^= h >> 29
        i += 8
    for b in payload[i:]:
        h = ((h ^ b) * 0x100000001B3) & mask
    return h ^ (h >> 32)


def t_fuzz(prog):
    """Mutated traces whose checksums are made right again reach the record
    decoder and the id pairing: each must be read or refused with one error
    line, never crash or hang."""
    d = workdir("fuzz")
    good = os.path.join(d, "good.trace")
    record(good, [prog])
    data = open(good, "rb").read()
    plen = int.from_bytes(data[12:16], "little")
    chunks, off = [], 32 + plen
    while int.from_bytes(data[off:off + 4], "little") == 0x4B4E4843:
        n = int.from_bytes(data[off + 8:off + 12], "little")
        if checksum(data[off + 40:off + 40 + n]) != int.from_bytes(data[off + 32:off + 40], "little"):
            fail("checksum in docs/tools.md does not match the file's")
        chunks.append((off, n))
        off += 40 + n
    rnd = random.Random(11)
    path = os.path.join(d, "mutant.trace")
    refused = 0
    for i in range(300):
        blob = bytearray(data)
        coff, n = rnd.choice(chunks)
        for _ in range(rnd.randrange(1, 4)):
            blob[coff + 40 + rnd.randrange(n)] = rnd.randrange(256)
        blob[coff + 32:coff + 40] = checksum(bytes(blob[coff + 40:coff + 40 + n])).to_bytes(8, "little")
        with open(path, "wb") as f:
            f.write(blob)
        tool_name = "strata-trace-stats" if i % 2 else "strata-replay"
        p = run([tool(tool_name), path] + (["--json"] if i % 2 else ["--quiet"]), expect_rc=None, timeout=60)
        if p.returncode not in (0, 1):
            fail("%s crashed (rc %d) on mutant %d:\n%s" % (tool_name, p.returncode, i, p.stderr[-2000:]))
        if p.returncode == 1 and p.stderr.strip():
            refused += 1
            if len(p.stderr.strip().splitlines()) != 1 or " at byte " not in p.stderr:
                fail("%s: bad error for mutant %d: %s" % (tool_name, i, p.stderr))
    print("fuzz ok: 300 mutants, %d refused" % refused)


def t_stats():
    """strata-trace-stats on generated traces whose answers are known: tracegen's
    clock is 100 ns per call and its sweep makes C blocks of a size, then frees
    them in the same order, so every block lives exactly C calls."""
    d = workdir("stats")
    sw = os.path.join(d, "sweep.trace")
    count = 40
    run([tool("strata-tracegen"), "sweep", "-o", sw, "--min", "16", "--max", "4096", "--steps", "1",
         "--count", str(count)])
    s = stats(sw)
    nsizes = 9   # 16, 32, ..., 4096
    if s["operations"]["malloc"] != nsizes * count or s["operations"]["free"] != nsizes * count:
        fail("sweep: %s" % s["operations"])
    if s["live"]["peak_blocks"] != count or s["live"]["peak_bytes"] != 4096 * count:
        fail("sweep: peak %d blocks / %d bytes, expected %d / %d"
             % (s["live"]["peak_blocks"], s["live"]["peak_bytes"], count, 4096 * count))
    if s["lifetimes"]["mean_ns"] != count * 100 or s["lifetimes"]["live_at_end"] != 0:
        fail("sweep: mean lifetime %s ns, expected %d" % (s["lifetimes"]["mean_ns"], count * 100))
    buckets = {b["max"]: b["count"] for b in s["sizes"]}
    if buckets != {1 << k: count for k in range(4, 13)}:
        fail("sweep: size histogram %s" % buckets)
    if s["bytes"]["malloc"] != count * sum(1 << k for k in range(4, 13)) or s["bytes"]["free"] != s["bytes"]["malloc"]:
        fail("sweep: bytes %s" % s["bytes"])
    if s["cross_thread"]["frees"] != 0:
        fail("sweep: cross-thread frees on one thread")
    # All replacements reallocs, on one thread: every realloc grows or shrinks a
    # known block, and each freed block's chain counts the reallocs behind it.
    ra = os.path.join(d, "realloc.trace")
    run([tool("strata-tracegen"), "random", "-o", ra, "--live", "10", "--ops", "1000", "--realloc", "1",
         "--sizes", "uniform:1:100000"])
    s = stats(ra)
    r = s["realloc"]
    if r["count"] != 1000 or r["from_null"] or r["unknown"] or r["grow"] + r["shrink"] + r["same"] != 1000:
        fail("realloc patterns: %s" % r)
    if s["operations"]["malloc"] != 10 or s["operations"]["free"] != 10:
        fail("realloc trace operations: %s" % s["operations"])
    if sum(r["chains"].values()) != 10 or r["longest_chain"] < 100:
        fail("realloc chains: %s (10 lineages of ~100 reallocs expected)" % r)
    # Text output agrees with the JSON.
    text = run([tool("strata-trace-stats"), ra]).stdout
    if "realloc            1000" not in text or "cross-thread frees  0 of" not in text:
        fail("text output:\n" + text)
    print("stats ok")


def t_tracegen():
    """Same seed, same bytes; other seed, other bytes; every kind replays."""
    d = workdir("tracegen")
    kinds = {
        "random": ["--live", "1000", "--ops", "30000", "--threads", "3", "--cross", "0.2",
                   "--sizes", "log:8:100000", "--realloc", "0.05"],
        "sweep": ["--min", "8", "--max", "1m", "--count", "50", "--steps", "3"],
        "ml": ["--iters", "3", "--layers", "6", "--tensor", "256k"],
    }
    for kind, opts in kinds.items():
        a, b, c = (os.path.join(d, "%s-%s.trace" % (kind, x)) for x in "abc")
        run([tool("strata-tracegen"), kind, "-o", a, "--seed", "42"] + opts)
        run([tool("strata-tracegen"), kind, "-o", b, "--seed", "42"] + opts)
        run([tool("strata-tracegen"), kind, "-o", c, "--seed", "43"] + opts)
        if open(a, "rb").read() != open(b, "rb").read():
            fail("%s: same seed, different output" % kind)
        if kind != "sweep" and open(a, "rb").read() == open(c, "rb").read():
            fail("%s: different seed, same output" % kind)
        s = stats(a)
        if s["events"] == 0 or s["unknown_releases"] or s["failed"]:
            fail("%s: bad generated trace %s" % (kind, s))
        if kind == "random" and s["live"]["peak_blocks"] < 1000:
            fail("random: peak live blocks %d < 1000" % s["live"]["peak_blocks"])
        if kind == "ml" and s["cross_thread"]["frees"] != 3 * 2:
            fail("ml: %d cross-thread frees, expected 6 (batch and labels per iteration)" % s["cross_thread"]["frees"])
        if kind == "sweep":
            sizes = {r["size"] for r in dump(a) if r["op"] == "malloc"}
            if min(sizes) != 8 or max(sizes) > 1 << 20 or len(sizes) < 3 * 17:
                fail("sweep: sizes %s" % sorted(sizes)[:10])
        replay(a)
    print("tracegen ok")


def t_fork(prog):
    """A forked child writes its own trace, with its own pid and calls."""
    d = workdir("fork")
    # By default only the started process is recorded: no file for the child.
    solo = os.path.join(d, "solo.trace")
    p = record(solo, [prog])
    child = int(re.search(r"child (\d+)", p.stdout).group(1))
    if os.path.exists(solo + "." + str(child)) or "also wrote" in p.stderr:
        fail("without --children the child was recorded: %s" % os.listdir(d))
    tr = os.path.join(d, "f.trace")
    p = record(tr, [prog], opts=["--children"])
    exp = expectations(p.stdout)
    child = int(re.search(r"child (\d+)", p.stdout).group(1))
    child_file = tr + "." + str(child)
    if not os.path.exists(child_file):
        fail("no trace for child %d (files: %s)" % (child, os.listdir(d)))
    cs, ps = stats(child_file), stats(tr)
    if cs["pid"] != child:
        fail("child trace says pid %d, child was %d" % (cs["pid"], child))
    big = [r for r in dump(child_file) if r["op"] == "malloc" and r["size"] >= 5000]
    if len(big) != exp["child_malloc"][0]:
        fail("child trace has %d of the child's mallocs, expected %d" % (len(big), exp["child_malloc"][0]))
    pbig = [r for r in dump(tr) if r["op"] == "malloc" and r["size"] >= 5000]
    if pbig:
        fail("parent trace holds %d of the child's calls" % len(pbig))
    if ps["operations"]["malloc"] < exp["parent_malloc"][0]:
        fail("parent trace lacks its own mallocs")
    # The child's frees of blocks made before fork are unknown to it, never wrong.
    replay(child_file)
    replay(tr)
    print("fork ok: child %d" % child)


def t_exits(prog):
    """Buffers are flushed however the program ends."""
    d = workdir("exits")
    for how, rc in (("exit", 0), ("_exit", 3), ("abort", 128 + 6), ("term", 128 + 15), ("segv", 128 + 11)):
        tr = os.path.join(d, how + ".trace")
        record(tr, [prog, how], expect_rc=rc)
        s = stats(tr)
        if s["operations"]["malloc"] < 5000:
            fail("%s: trace has %d mallocs, expected 5000" % (how, s["operations"]["malloc"]))
    # exec: the first image's trace is finished before exec (FILE.<pid>), the
    # new image writes FILE.<pid>.1, which becomes FILE.  By default the
    # earlier image's file is dropped (a shim is not the program asked for);
    # --children keeps it.
    tr = os.path.join(d, "exec.trace")
    for f in os.listdir(d):
        if f.startswith("exec.trace"):
            os.unlink(os.path.join(d, f))
    record(tr, [prog, "exec"])
    others = [f for f in os.listdir(d) if f.startswith("exec.trace.")]
    if others:
        fail("exec: the earlier image's trace was kept without --children: %s" % others)
    record(tr, [prog, "exec"], opts=["--children"])
    others = [f for f in os.listdir(d) if f.startswith("exec.trace.")]
    if len(others) != 1:
        fail("exec --children: expected one earlier-image trace, found %s" % others)
    for path in (tr, os.path.join(d, others[0])):
        s = stats(path)
        if s["operations"]["malloc"] < 5000:
            fail("exec: %s has %d mallocs, expected 5000" % (path, s["operations"]["malloc"]))
    print("exits ok")


def t_overhead(prog):
    """Recorder overhead on an allocation-heavy program: printed, not asserted
    (timing on a shared 2-core machine is no pass/fail criterion); the test
    fails if the recorded run or its trace is wrong."""
    d = workdir("overhead")
    tr = os.path.join(d, "churn.trace")
    argv = [prog, "2", "300000"]
    best_plain = best_rec = None
    for _ in range(3):
        t0 = time.monotonic()
        plain = run(argv)
        t1 = time.monotonic()
        rec = record(tr, argv)
        t2 = time.monotonic()
        if plain.stdout != rec.stdout:
            fail("recorded run printed %r, plain run %r" % (rec.stdout, plain.stdout))
        best_plain = min(best_plain or 1e9, t1 - t0)
        best_rec = min(best_rec or 1e9, t2 - t1)
    s = stats(tr)
    want = 2 * 300000 * 2 + 2 * 4096
    calls = s["operations"]["malloc"] + s["operations"]["free"]
    if calls < want:
        fail("trace has %d malloc+free calls, program made at least %d" % (calls, want))
    print("overhead: plain %.3f s, recorded %.3f s, ratio %.2f (%d calls, %.1f bytes per call)"
          % (best_plain, best_rec, best_rec / best_plain, calls, os.path.getsize(tr) / calls))


def expect_error(cmd, rc, pattern, what):
    """cmd must exit with rc and print one stderr line matching pattern."""
    p = run(cmd, expect_rc=None, timeout=60)
    lines = [ln for ln in p.stderr.strip().splitlines() if ln.strip()]
    if p.returncode != rc:
        fail("%s: exit %d, expected %d: %s\n%s" % (what, p.returncode, rc, " ".join(cmd), p.stderr))
    if not lines or not re.search(pattern, lines[0]):
        fail("%s: error %r does not match %r" % (what, lines[0] if lines else "", pattern))
    if len(lines) > 1 and not lines[1].startswith("usage:"):
        fail("%s: more than one error line:\n%s" % (what, p.stderr))
    return p


def snapshot(path):
    """What lstat says about path, and its bytes if a regular file: must not change."""
    st = os.lstat(path)
    data = open(path, "rb").read() if os.path.isfile(path) and not os.path.islink(path) else None
    return (st.st_mode, st.st_ino, st.st_rdev, st.st_size, data)


def t_outputs(prog):
    """-o never writes through a symbolic link nor replaces a device, FIFO,
    socket or directory; empty names, missing and unwritable directories are
    refused; the message says which and the exit code is 2."""
    d = workdir("outputs")
    victim = os.path.join(d, "victim")
    with open(victim, "w") as f:
        f.write("precious\n")
    targets = {"symlink": (os.path.join(d, "link"), "exists and is a symbolic link"),
               "fifo": (os.path.join(d, "fifo"), "exists and is a FIFO"),
               "directory": (os.path.join(d, "dir"), "exists and is a directory")}
    os.symlink(victim, targets["symlink"][0])
    os.mkfifo(targets["fifo"][0])
    os.mkdir(targets["directory"][0])
    if os.geteuid() == 0:
        # A copy of /dev/null's node: a device we may watch without risking the real one.
        os.mknod(os.path.join(d, "null"), 0o666 | 0o020000, os.makedev(1, 3))
        targets["device"] = (os.path.join(d, "null"), "exists and is a character device")
    else:
        targets["device"] = ("/dev/null", "exists and is a character device")
    writers = {"strata-trace": lambda out: [tool("strata-trace"), "-o", out, "--", prog],
               "strata-tracegen": lambda out: [tool("strata-tracegen"), "random", "-o", out, "--ops", "10"]}
    for wname, mk in writers.items():
        for kind, (path, msg) in targets.items():
            before = snapshot(path)
            victim_before = snapshot(victim)
            expect_error(mk(path), 2, r"^%s: -o %s: %s" % (re.escape(wname), re.escape(path), msg),
                         "%s -o %s" % (wname, kind))
            if snapshot(path) != before or snapshot(victim) != victim_before:
                fail("%s -o %s: the target or what it points to changed" % (wname, kind))
        expect_error(mk(""), 2, r"^%s: -o: empty file name" % wname, wname + " -o ''")
        expect_error(mk(os.path.join(d, "missing", "x")), 2,
                     r"^%s: -o .*: directory .*missing: No such file or directory" % wname, wname + " missing dir")
        expect_error(mk("/proc/strata-cannot-be-here.trace"), 2,
                     r"^%s: -o /proc/strata-cannot-be-here.trace: cannot create files in directory /proc" % wname,
                     wname + " unwritable dir")
    left = sorted(f for f in os.listdir(d) if f not in ("victim", "link", "fifo", "dir", "null"))
    if left:
        fail("files left behind by refused runs: %s" % left)
    # A regular file is replaced whole (rename), and no temporary stays.
    out = os.path.join(d, "regular.trace")
    with open(out, "w") as f:
        f.write("old")
    run([tool("strata-tracegen"), "random", "-o", out, "--ops", "100"])
    if stats(out)["events"] == 0:
        fail("tracegen -o over a regular file: bad trace")
    record(out, [prog])
    if stats(out)["events"] == 0:
        fail("strata-trace -o over a regular file: bad trace")
    left = sorted(f for f in os.listdir(d) if f.startswith("."))
    if left:
        fail("temporary files left: %s" % left)
    print("outputs ok")


def t_shim(prog):
    """Tracing through a shim script (like pyenv's python3) that runs a helper
    and then execs the real program: only the real program is recorded, one
    file, no 'also wrote' lines; --children records the helper too."""
    d = workdir("shim")
    shim = os.path.join(d, "shim.sh")
    with open(shim, "w") as f:
        f.write("#!/bin/sh\n/bin/true\nls / >/dev/null\nexec %s \"$@\"\n" % prog)
    os.chmod(shim, 0o755)
    tr = os.path.join(d, "shim.trace")
    p = record(tr, [shim])
    files = sorted(f for f in os.listdir(d) if f.startswith("shim.trace"))
    if files != ["shim.trace"]:
        fail("shim: expected one trace file, found %s" % files)
    if "also wrote" in p.stderr or len(p.stderr.strip().splitlines()) != 1:
        fail("shim: expected one line from strata-trace, got:\n%s" % p.stderr)
    exp = expectations(p.stdout)
    st = stats(tr)
    if not st["program"].startswith(prog):
        fail("shim: the trace is of %r, not the real program" % st["program"])
    if st["operations"]["malloc"] < exp["malloc"][0]:
        fail("shim: trace lacks the program's mallocs")
    p = record(os.path.join(d, "all.trace"), [shim], opts=["--children"])
    kids = [f for f in os.listdir(d) if f.startswith("all.trace.")]
    if len(kids) < 2 or "also wrote" not in p.stderr:
        fail("shim --children: expected the helpers' traces, found %s" % kids)
    print("shim ok: %d child traces with --children" % len(kids))


def t_static(prog):
    """A statically linked program cannot take the recorder: said before it runs."""
    d = workdir("static")
    out = os.path.join(d, "s.trace")
    expect_error([tool("strata-trace"), "-o", out, "--", prog], 2,
                 r"^strata-trace: .*tools_static is statically linked: the recorder cannot be preloaded",
                 "static program")
    if os.listdir(d):
        fail("static: files left: %s" % os.listdir(d))
    print("static ok")


def t_hostile(craft):
    """Well-formed traces that say hostile things, and bad numbers."""
    d = workdir("hostile")
    huge = os.path.join(d, "huge.trace")
    run([craft, "huge", huge])
    # strata-trace-stats: sizes above 2^63 land in the last size bucket.
    s = stats(huge)
    top = [b for b in s["sizes"] if b["max"] == (1 << 64) - 1]
    if not top or top[0]["count"] != 1:
        fail("stats: a 2^63+4096 byte block is not in the last bucket: %s" % s["sizes"])
    run([tool("strata-trace-stats"), huge])
    # strata-replay: refuses what is above its live-memory limit, before allocating.
    expect_error([tool("strata-replay"), huge], 1,
                 r"^strata-replay: .*huge.trace: the trace needs 8\.0 EiB in one block, above the replay "
                 r"limit of .* \(half the RAM\); raise it with --max-live SIZE", "replay default cap")
    expect_error([tool("strata-replay"), huge, "--max-live", "1g"], 1,
                 r"the trace needs .* above the replay limit of 1\.0 GiB \(--max-live\)", "replay --max-live")
    for bad in ("0", "-1", "nan", "1x", "inf"):
        expect_error([tool("strata-replay"), huge, "--max-live", bad], 2,
                     r"^strata-replay: --max-live %s: want a size in bytes > 0" % re.escape(bad), "max-live " + bad)
    # Addresses that differ only in their high bits: the address table must
    # stay O(1) per lookup (a weak hash made this quadratic: minutes).  The
    # bound is generous; the point is quadratic against linear.
    col = os.path.join(d, "collide.trace")
    run([craft, "collide", "200000", col])
    t0 = time.monotonic()
    p = run([tool("strata-trace-stats"), col, "--json"], expect_rc=None, timeout=60)
    if p.returncode != 0 or json.loads(p.stdout)["live"]["peak_blocks"] != 200000:
        fail("colliding addresses: stats failed (rc %d): %s" % (p.returncode, p.stderr))
    replay(col)
    print("colliding addresses: read and replayed in %.1f s" % (time.monotonic() - t0))
    # A FIFO as input: refused at once, not waited on.
    fifo = os.path.join(d, "fifo")
    os.mkfifo(fifo)
    for t in ("strata-replay", "strata-trace-stats"):
        expect_error([tool(t), fifo], 1, r"^%s: %s: not a regular file at byte 0$" % (t, re.escape(fifo)), t + " fifo")
    # Unknown allocators: refused, never exit 0.
    good = os.path.join(d, "good.trace")
    run([tool("strata-tracegen"), "random", "-o", good, "--live", "100", "--ops", "1000"])
    for lst in ("all,hoard", "hoard", "glibc,,nothing"):
        expect_error([tool("strata-replay"), good, "--allocator", lst], 2,
                     r"^strata-replay: --allocator: unknown allocator '(hoard|nothing)' \(known: ", "allocator " + lst)
    expect_error([tool("strata-replay"), good, "--format", "xml"], 2,
                 r"^strata-replay: --format xml: want text, json or csv", "format xml")
    # strata-tracegen: numbers out of range, not finite, not whole; caps.
    gen = [tool("strata-tracegen"), "random", "-o", os.path.join(d, "g.trace")]
    cases = [(["--live", "1g"], r"value out of range: --live 1g: above the limit of 10000000"),
             (["--ops", "1e9"], r"value out of range: --ops 1e9: above the limit of 100000000"),
             (["--seed", "18446744073709551616"], r"value out of range: --seed 18446744073709551616"),
             (["--ops", "99999999999999999999999"], r"value out of range: --ops"),
             (["--live", "nan"], r"bad value: --live nan: want a whole number >= 0"),
             (["--ops", "inf"], r"bad value: --ops inf: want a whole number >= 0"),
             (["--live", "-3"], r"bad value: --live -3: want a whole number >= 0"),
             (["--live", "2.5"], r"bad value: --live 2.5: not a whole number"),
             (["--cross", "nan"], r"not a fraction in \[0,1\]: nan"),
             (["--sizes", "log:1:1e300"], r"value out of range: --sizes 1e300: above the limit"),
             (["--threads", "5000"], r"value out of range: --threads 5000: above the limit of 4096")]
    for extra, pattern in cases:
        expect_error(gen + extra, 2, r"^strata-tracegen: " + pattern, "tracegen " + " ".join(extra))
    expect_error([tool("strata-tracegen"), "sweep", "-o", os.path.join(d, "g.trace"), "--min", "1", "--max", "1t",
                  "--steps", "64", "--count", "10000000", "--budget", "1t"], 2,
                 r"^strata-tracegen: trace too long: more than 250000000 records", "tracegen record cap")
    if any(f.startswith((".g.trace", "g.trace")) for f in os.listdir(d)):
        fail("tracegen left a partial output: %s" % os.listdir(d))
    print("hostile ok")


def t_formats():
    """strata-replay --format json|csv: a row per allocator with peak RSS and
    the six size bands, the same numbers of calls in both."""
    d = workdir("formats")
    tr = os.path.join(d, "f.trace")
    run([tool("strata-tracegen"), "random", "-o", tr, "--live", "200", "--ops", "5000",
         "--sizes", "log:8:2000000"])
    allocs = "glibc,strata" if os.path.exists(os.path.join(ARGS.bin, "..", "libstrata.so")) else "glibc"
    doc = json.loads(run([tool("strata-replay"), tr, "--allocator", allocs, "--format", "json"]).stdout)
    names = [a["allocator"] for a in doc["allocators"]]
    if names != allocs.split(","):
        fail("json: allocators %s" % names)
    for a in doc["allocators"]:
        if a["status"] != "ok" or not a["peak_rss_kib"] or a["peak_rss_kib"] < a["replay_rss_kib"]:
            fail("json: bad row %s" % a)
        bands = a["size_bands"]
        if [b["band"] for b in bands] != doc["bands"] or len(bands) != 6:
            fail("json: bands %s" % bands)
        calls = sum(b["calls"] for b in bands)
        if calls != 2 * 5200:
            fail("json: %d calls over the bands, expected %d" % (calls, 2 * 5200))
        if not all(b["ns_per_call"] is not None for b in bands[:5]):
            fail("json: a used band without a time: %s" % bands)
    rows = list(csv.DictReader(run([tool("strata-replay"), tr, "--allocator", allocs, "--format", "csv"])
                               .stdout.splitlines()))
    if [r["allocator"] for r in rows] != names or any(r["status"] != "ok" for r in rows):
        fail("csv: rows %s" % rows)
    for r in rows:
        if sum(int(r["calls_" + m]) for m in ("le64", "le512", "le4k", "le64k", "le1m", "gt1m")) != 2 * 5200:
            fail("csv: calls over the bands in %s" % r)
        if int(r["peak_rss_kib"]) <= 0:
            fail("csv: peak RSS %s" % r["peak_rss_kib"])
    # With nothing named: the allocator in force, one row.
    one = json.loads(run([tool("strata-replay"), tr, "--format", "json"]).stdout)
    if len(one["allocators"]) != 1 or one["allocators"][0]["status"] != "ok":
        fail("json without --allocator: %s" % one)
    print("formats ok: %s" % ", ".join(names))


def t_peers():
    """strata-replay --allocator mimalloc3|snmalloc|all: the peers come from
    $BENCH_PEERS_DIR (scripts/install-peers.sh's layout); one missing there is
    named with its path; present, it is replayed like any other."""
    d = workdir("peers")
    tr = os.path.join(d, "p.trace")
    run([tool("strata-tracegen"), "random", "-o", tr, "--live", "100", "--ops", "2000"])
    peers = os.path.join(d, "peers")
    env = dict(env_with_preload(), BENCH_PEERS_DIR=peers)
    expect = os.path.join(peers, "snmalloc", "libsnmallocshim.so")
    p = run([tool("strata-replay"), tr, "--allocator", "snmalloc"], expect_rc=2, env=env)
    if "allocator snmalloc: library %s not found" % expect not in p.stderr:
        fail("a missing peer is not named with its path: %r" % p.stderr)
    lib = os.path.realpath(os.path.join(ARGS.bin, "..", "libstrata.so"))
    if not os.path.exists(lib):
        print("peers ok (no libstrata.so to stand in for the peers)")
        return
    # Any malloc-replacing library stands in for them here.
    for sub, name in (("mimalloc3", "libmimalloc.so.3"), ("snmalloc", "libsnmallocshim.so")):
        os.makedirs(os.path.join(peers, sub))
        os.symlink(lib, os.path.join(peers, sub, name))
    doc = json.loads(run([tool("strata-replay"), tr, "--allocator", "all", "--format", "json"], env=env,
                         expect_rc=None).stdout)
    rows = {a["allocator"]: a["status"] for a in doc["allocators"]}
    if [a["allocator"] for a in doc["allocators"]] != ["glibc", "jemalloc", "tcmalloc", "mimalloc", "mimalloc3",
                                                       "snmalloc", "strata"]:
        fail("--allocator all: rows %s" % list(rows))
    if rows["mimalloc3"] != "ok" or rows["snmalloc"] != "ok" or rows["strata"] != "ok":
        fail("--allocator all: peers not replayed: %s" % rows)
    print("peers ok: %s" % rows)


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--preload", default="")
    ap.add_argument("test")
    ap.add_argument("prog", nargs="?")
    ARGS = ap.parse_args()
    if ARGS.preload and not os.path.exists(ARGS.preload):
        fail("preload library %s not built" % ARGS.preload)
    tests = {"fuzz": t_fuzz, "roundtrip": t_roundtrip, "crossthread": t_crossthread, "badinput": t_badinput,
             "fork": t_fork, "exits": t_exits, "overhead": t_overhead, "outputs": t_outputs, "shim": t_shim,
             "static": t_static, "hostile": t_hostile}
    if ARGS.test == "tracegen":
        t_tracegen()
    elif ARGS.test == "stats":
        t_stats()
    elif ARGS.test == "formats":
        t_formats()
    elif ARGS.test == "peers":
        t_peers()
    elif ARGS.test in tests and ARGS.prog:
        tests[ARGS.test](ARGS.prog)
    else:
        fail("unknown test or missing program: %s" % ARGS.test)


if __name__ == "__main__":
    main()
