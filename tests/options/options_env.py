#!/usr/bin/env python3
"""options_env.py VICTIM — STRATA_* variables as a user sets them.

Each case runs VICTIM (linked with libstrata; prints NAME=VALUE of the
options it is asked about) with some variables set, and checks the values
Strata took and every line it printed on stderr.
"""
import os
import re
import subprocess
import sys

VICTIM = sys.argv[1]
failures = 0


def run(env_add, names):
    env = {k: v for k, v in os.environ.items() if not k.startswith("STRATA_") and k != "LD_PRELOAD"}
    env.update(env_add)
    p = subprocess.run([VICTIM] + names, env=env, capture_output=True, text=True, timeout=30)
    if p.returncode != 0:
        raise SystemExit("FAIL: victim exited %d with %s:\n%s" % (p.returncode, env_add, p.stderr))
    values = dict(line.split("=", 1) for line in p.stdout.split())
    return {k: int(v) for k, v in values.items()}, p.stderr


def case(what, env_add, name, want_value, want_err=None):
    """want_err: None for a silent run, else a regex the one stderr line must match."""
    global failures
    values, err = run(env_add, [name])
    lines = err.splitlines()
    problems = []
    if values.get(name) != want_value:
        problems.append("%s = %s, want %s" % (name, values.get(name), want_value))
    if want_err is None and err:
        problems.append("unexpected stderr: %r" % err)
    if want_err is not None:
        if len(lines) != 1 or not err.endswith("\n"):
            problems.append("want exactly one whole stderr line, got %r" % err[:600])
        elif not re.search(want_err, lines[0]):
            problems.append("stderr %r does not match %r" % (lines[0], want_err))
        elif len(lines[0]) > 300:
            problems.append("stderr line of %d characters" % len(lines[0]))
    if problems:
        failures += 1
        print("FAIL  %s: %s" % (what, "; ".join(problems)))
    else:
        print("ok    %s" % what)


MIB = 1 << 20
# Sizes take suffixes everywhere, LARGE_CACHE_MB included (a count of MiB
# without one, bytes rounded up to MiB with one).
case("LARGE_CACHE_MB=1g is 1024 MiB", {"STRATA_LARGE_CACHE_MB": "1g"}, "LARGE_CACHE_MB", 1024)
case("LARGE_CACHE_MB=512MiB", {"STRATA_LARGE_CACHE_MB": "512MiB"}, "LARGE_CACHE_MB", 512)
case("LARGE_CACHE_MB=1500k rounds up to 2", {"STRATA_LARGE_CACHE_MB": "1500k"}, "LARGE_CACHE_MB", 2)
case("LARGE_CACHE_MB=300 is MiB", {"STRATA_LARGE_CACHE_MB": "300"}, "LARGE_CACHE_MB", 300)
case("LARGE_CACHE_MB=2t is above the maximum", {"STRATA_LARGE_CACHE_MB": "2048g"}, "LARGE_CACHE_MB", 1024,
     r'^strata: STRATA_LARGE_CACHE_MB="2048g" is not valid \(want MiB from 0 to 1048576, or a size with a k, m '
     r'or g suffix .*\); using the default 1024$')
case("LARGE_THRESHOLD=64k", {"STRATA_LARGE_THRESHOLD": "64k"}, "LARGE_THRESHOLD", 64 * 1024)
case("LARGE_THRESHOLD=1m is above 128 KiB", {"STRATA_LARGE_THRESHOLD": "1m"}, "LARGE_THRESHOLD", 128 * 1024,
     r'^strata: STRATA_LARGE_THRESHOLD="1m" is not valid \(want a size in bytes from 0 to 131072, with an '
     r'optional k, m or g suffix \(e\.g\. 64k\)\); using the default 131072$')
# Enums by name only: a number would change meaning if a name were added.
case("HUGEPAGES=never", {"STRATA_HUGEPAGES": "never"}, "HUGEPAGES", 0)
case("HUGEPAGES=ALWAYS (any case)", {"STRATA_HUGEPAGES": "ALWAYS"}, "HUGEPAGES", 2)
case("HUGEPAGES=0 refused", {"STRATA_HUGEPAGES": "0"}, "HUGEPAGES", 1,
     r'^strata: STRATA_HUGEPAGES="0" is not valid \(want one of never, auto, always\); using the default auto$')
case("NUMA=2 refused", {"STRATA_NUMA": "2"}, "NUMA", 1,
     r'^strata: STRATA_NUMA="2" is not valid \(want one of off, local, interleave\); using the default local$')
# Every warning states the expected format.
case("PURGE_DELAY_MS=soon", {"STRATA_PURGE_DELAY_MS": "soon"}, "PURGE_DELAY_MS", 10,
     r'^strata: STRATA_PURGE_DELAY_MS="soon" is not valid \(want a whole number from -1 to 3600000\); '
     r'using the default 10$')
case("CHECK=maybe", {"STRATA_CHECK": "maybe"}, "CHECK", 0,
     r'^strata: STRATA_CHECK="maybe" is not valid \(want 1/0, on/off, yes/no or true/false\); '
     r'using the default 0$')
# A 5000-character value: still one whole line, the value cut short.
case("5000-character value", {"STRATA_LARGE_THRESHOLD": "7" * 5000}, "LARGE_THRESHOLD", 128 * 1024,
     r'^strata: STRATA_LARGE_THRESHOLD="7{40}\.\.\." is not valid \(want a size in bytes')
# A value is escaped where it is echoed: a newline in it cannot start a
# line of its own (here one that reads as a double-free report), and an
# escape sequence cannot reach the terminal.  case() wants one line.
case("value with a newline stays on its line",
     {"STRATA_PURGE_DELAY_MS": "5\nstrata: free(): double free 0x1234"}, "PURGE_DELAY_MS", 10,
     r'^strata: STRATA_PURGE_DELAY_MS="5\\nstrata: free\(\): double free 0x1234" is not valid')
case("value with an escape sequence and a backslash",
     {"STRATA_HUGEPAGES": "\x1b[2J\\n\x7f\x9b"}, "HUGEPAGES", 1,
     r'^strata: STRATA_HUGEPAGES="\\e\[2J\\\\n\\x7f\\xc2\\x9b" is not valid')
case("UTF-8 text passes as it is", {"STRATA_HUGEPAGES": "n\u00e9ver"}, "HUGEPAGES", 1,
     '^strata: STRATA_HUGEPAGES="n\u00e9ver" is not valid')
case("name with a newline", {"STRATA_NUM\nA": "1"}, "VERBOSE", 0,
     r'^strata: STRATA_NUM\\nA is not an option: ignored \(did you mean STRATA_NUMA\?\)$')
case("name with an escape sequence", {"STRATA_CHEC\x1b": "1"}, "VERBOSE", 0,
     r'^strata: STRATA_CHEC\\e is not an option: ignored \(did you mean STRATA_CHECK\?\)$')
# Unknown names: once each, with the closest option.
case("misspelled STRATA_PURGE_DELAY", {"STRATA_PURGE_DELAY": "5"}, "PURGE_DELAY_MS", 10,
     r'^strata: STRATA_PURGE_DELAY is not an option: ignored \(did you mean STRATA_PURGE_DELAY_MS\?\)$')
case("misspelled STRATA_LARGE_TRESHOLD", {"STRATA_LARGE_TRESHOLD": "64k"}, "LARGE_THRESHOLD", 128 * 1024,
     r'^strata: STRATA_LARGE_TRESHOLD is not an option: ignored \(did you mean STRATA_LARGE_THRESHOLD\?\)$')
case("the API's name as the variable's", {"STRATA_OPTION_NUMA": "off"}, "NUMA", 1,
     r'^strata: STRATA_OPTION_NUMA is not an option: ignored \(did you mean STRATA_NUMA\?\)$')
case("misspelled STRATA_SB_BUGDET (read by storage, not the table)", {"STRATA_SB_BUGDET": "1g"}, "VERBOSE", 0,
     r'^strata: STRATA_SB_BUGDET is not an option: ignored \(did you mean STRATA_SB_BUDGET\?\)$')
case("misspelled strata_prof_rate (case)", {"STRATA_prof_rat": "1k"}, "PROF_RATE", 512 * 1024,
     r'^strata: STRATA_prof_rat is not an option: ignored \(did you mean STRATA_PROF_RATE\?\)$')
# A name near no option is a script's or a tool's own (a launcher's
# STRATA_LIB naming the library to preload): not the allocator's business,
# so silent, or every process under the preload would print it.
case("a script's own STRATA_LIB is quiet", {"STRATA_LIB": "/opt/strata/lib/libstrata.so"}, "VERBOSE", 0)
case("other names near no option are quiet",
     {"STRATA_COLOUR": "blue", "STRATA_CC": "gcc", "STRATA_HOME": "/opt", "STRATA_DIR": "/opt",
      "STRATA_ROOT": "/", "STRATA_PRELOAD": "1"}, "VERBOSE", 0)
# The tools' and tests' own variables are not options and not reported.
case("STRATA_TRACE_FILE and STRATA_TEST_SECONDS are quiet",
     {"STRATA_TRACE_FILE": "", "STRATA_TEST_SECONDS": "1", "STRATA_REPLAY_ALLOCATOR": "x"}, "VERBOSE", 0)
case("variables other parts read (STRATA_SB_DIR, STRATA_MEMORY_LIMIT) are quiet",
     {"STRATA_SB_DIR": "/tmp", "STRATA_MEMORY_LIMIT": "1g"}, "VERBOSE", 0)
# STRATA_VERBOSE=1 prints the options table with the values in force.
values, err = run({"STRATA_VERBOSE": "1", "STRATA_NUMA": "off", "STRATA_LARGE_THRESHOLD": "64k"}, ["VERBOSE"])
table = [l for l in err.splitlines() if l.startswith("strata: option ")]
want = [r"^strata: option STRATA_NUMA +off +\(default local\) NUMA placement",
        r"^strata: option STRATA_LARGE_THRESHOLD +64k +\(default 128k\) requests of this many bytes",
        r"^strata: option STRATA_PROF_OOM_SHARE +90 +\(default 90\) per cent"]
missing = [w for w in want if not any(re.search(w, l) for l in table)]
if missing or len(table) != 35:
    failures += 1
    print("FAIL  STRATA_VERBOSE prints the table (%d lines, missing %s): %r" % (len(table), missing, err[:600]))
else:
    print("ok    STRATA_VERBOSE prints the table with the values in force")
# STRATA_VERBOSE=1 says which limits the caches yield to, as read at start.
values, err = run({"STRATA_VERBOSE": "1", "STRATA_MEMORY_LIMIT": "100m"}, ["VERBOSE"])
if "strata: memory limit 104857600 bytes, address space limit " not in err:
    failures += 1
    print("FAIL  STRATA_VERBOSE names the memory limit: %r" % err[:300])
else:
    print("ok    STRATA_VERBOSE names the memory limit")
# Two problems: two lines, each once.
values, err = run({"STRATA_PURGE_DELAY": "5", "STRATA_NUMA": "9"}, ["NUMA"])
if sorted(l.split()[1] for l in err.splitlines()) != ['STRATA_NUMA="9"', "STRATA_PURGE_DELAY"]:
    failures += 1
    print("FAIL  two problems, two lines: %r" % err)
else:
    print("ok    two problems, two lines")

print("%d failed" % failures)
sys.exit(1 if failures else 0)
