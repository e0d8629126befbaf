#!/usr/bin/env python3
"""tools_test.py — the trace tools' tests, one CTest test per subcommand.

    tools_test.py --bin BUILD/bin --work DIR [--preload LIB] SUBCOMMAND [ARGS]

Each subcommand runs the real tools on real or generated traces and exits
non-zero (with a reason) on the first wrong result.  --preload runs the
recorded programs and the replays on top of another allocator (e.g.
libstrata.so) instead of the system one.
"""
import argparse
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


def record(out, argv, expect_rc=0):
    return run([tool("strata-trace"), "-o", out, "--"] + argv, expect_rc=expect_rc)


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
    p = record(tr, [prog])
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
    rows = [l for l in p.stdout.splitlines()[1:] if l.strip()]
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
    tr = os.path.join(d, "f.trace")
    p = record(tr, [prog])
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
    # new image writes FILE.<pid>.1, which becomes FILE.
    tr = os.path.join(d, "exec.trace")
    for f in os.listdir(d):
        if f.startswith("exec.trace"):
            os.unlink(os.path.join(d, f))
    record(tr, [prog, "exec"])
    others = [f for f in os.listdir(d) if f.startswith("exec.trace.")]
    if len(others) != 1:
        fail("exec: expected one earlier-image trace, found %s" % others)
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
             "fork": t_fork, "exits": t_exits, "overhead": t_overhead}
    if ARGS.test == "tracegen":
        t_tracegen()
    elif ARGS.test == "stats":
        t_stats()
    elif ARGS.test in tests and ARGS.prog:
        tests[ARGS.test](ARGS.prog)
    else:
        fail("unknown test or missing program: %s" % ARGS.test)


if __name__ == "__main__":
    main()
