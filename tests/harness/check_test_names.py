#!/usr/bin/env python3
"""check_test_names.py ROOT — one naming scheme for the tests' sources.

A C or C++ program that is itself a test (CTest runs it and its exit status
is the verdict) is named test_<what>.c, or fuzz_<what>.c for a fuzz target;
a program a test runs to look at (a victim, an app, a probe) or a part
several tests share is named for what it is, never test_* or *_test.  The
script reads every tests/**/CMakeLists.txt (expanding set() lists and
foreach() loops), finds the programs that are tests (strata_test(), and
add_test(... COMMAND <target>) of an add_executable() target) and checks
their main source (the first listed) both ways.  Exit 1 on a violation.
"""
import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
PENDING = {}
TEST_NAME = re.compile(r"^(test|fuzz)_[a-z0-9_]+\.(c|cpp)$")
CALL_RE = re.compile(r"\b([A-Za-z_]\w*)\s*\(([^()]*(?:\([^()]*\)[^()]*)*)\)",
                     re.S | re.I)


def words(args):
    return re.findall(r'"[^"]*"|[^\s"]+', re.sub(r"#[^\n]*", "", args))


def expand(word, env):
    return re.sub(r"\$\{(\w+)\}", lambda m: env.get(m.group(1), m.group(0)), word)


def run(calls, env, out):
    """Interprets a list of (command, args) with set() and foreach()."""
    i = 0
    while i < len(calls):
        cmd, args = calls[i]
        if cmd == "function":
            j = i + 1
            while calls[j][0] != "endfunction":
                j += 1
            ws = words(args)
            out["functions"][ws[0].lower()] = (ws[1:], calls[i + 1:j])
            i = j + 1
            continue
        if cmd in out["functions"]:
            params, body = out["functions"][cmd]
            ws = [expand(w, env).strip('"') for w in words(args)]
            run(body, dict(env, ARGN=";".join(ws[len(params):]), **dict(zip(params, ws))), out)
            i += 1
            continue
        if cmd == "foreach":
            depth, j = 1, i + 1
            while depth:
                depth += {"foreach": 1, "endforeach": -1}.get(calls[j][0], 0)
                j += 1
            ws = words(args)
            items = []
            for w in ws[1:]:
                if w in ("IN", "LISTS", "ITEMS"):
                    continue
                items += expand(w, env).split(";") if "${" in w else [w.strip('"')]
            for item in items:
                run(calls[i + 1:j - 1], dict(env, **{ws[0]: item}), out)
            i = j
            continue
        ws = [x for w in words(args) for x in expand(w, env).strip('"').split(";") if x]
        if cmd == "set" and ws:
            env[ws[0]] = ";".join(ws[1:])
        elif cmd == "string" and len(ws) >= 4 and ws[0] == "REPLACE":
            raw = [expand(w, env).strip('"') for w in words(args)]   # keeps the ";" a REPLACE may insert
            env[raw[3]] = "".join(raw[4:]).replace(raw[1], raw[2])
        elif cmd == "list" and len(ws) == 4 and ws[0] == "GET":
            items = env.get(ws[1], "").split(";")
            if ws[2].isdigit() and int(ws[2]) < len(items):
                env[ws[3]] = items[int(ws[2])]
        elif cmd in ("strata_test", "add_executable") and len(ws) > 1:
            if cmd == "strata_test":
                out["names"].add(ws[0])
            srcs = ws[ws.index("SOURCES") + 1:] if "SOURCES" in ws else ws[1:]
            srcs = [s for s in srcs if re.search(r"\.(c|cpp|cc)$", s)]
            if srcs:
                out["exe"][ws[0]] = srcs[0]
            if cmd == "strata_test":
                out["tests"].add(ws[0])
        elif cmd == "add_test" and "COMMAND" in ws:
            if "NAME" in ws:
                out["names"].add(ws[ws.index("NAME") + 1])
            c = ws[ws.index("COMMAND") + 1]
            m = re.match(r"\$<TARGET_FILE:(\w+)>$", c)
            out["tests"].add(m.group(1) if m else c)
            out["run"].update(re.findall(r"\$<TARGET_FILE:(\w+)>", " ".join(ws)))
        i += 1


def read_cmake(folder):
    """What one tests/ folder's CMakeLists.txt builds and runs: exe (target:
    main source), tests (targets run as a test), run (targets any test
    runs), names (the CTest names it registers)."""
    with open(os.path.join(folder, "CMakeLists.txt")) as f:
        calls = [(m.group(1).lower(), m.group(2)) for m in CALL_RE.finditer(f.read())]
    out = {"exe": {}, "tests": set(), "functions": {}, "run": set(), "names": set()}
    run(calls, {"CMAKE_CURRENT_SOURCE_DIR": folder, "CMAKE_SOURCE_DIR": ROOT}, out)
    return out


def test_names():
    """Every CTest name the tests/ folders register (as far as set(),
    foreach() and function() expand them)."""
    names = set()
    for base, subdirs, files in os.walk(os.path.join(ROOT, "tests")):
        subdirs[:] = [s for s in subdirs if not s.startswith(".")]
        if "CMakeLists.txt" in files and base != os.path.join(ROOT, "tests"):
            names |= read_cmake(base)["names"]
    return names


def main():
    problems, mains, run_by_test = [], {}, set()
    for base, subdirs, files in os.walk(os.path.join(ROOT, "tests")):
        subdirs[:] = sorted(s for s in subdirs if not s.startswith("."))
        if "CMakeLists.txt" not in files or base == os.path.join(ROOT, "tests"):
            continue
        out = read_cmake(base)
        for t in sorted(out["tests"] & set(out["exe"])):
            src = os.path.normpath(os.path.join(base, out["exe"][t]))
            if src.startswith(os.path.join(ROOT, "tests") + os.sep):   # docs/examples are examples
                mains[src] = t
        for t in sorted(out["run"] & set(out["exe"])):   # run by a script that checks little itself
            run_by_test.add(os.path.normpath(os.path.join(base, out["exe"][t])))
    for src, t in sorted(mains.items()):
        if not TEST_NAME.match(os.path.basename(src)):
            problems.append("%s: the main source of test program %s: name it test_<what>.c"
                            % (os.path.relpath(src, ROOT), t))
    for base, subdirs, files in os.walk(os.path.join(ROOT, "tests")):
        for f in files:
            path = os.path.join(base, f)
            if re.search(r"_test\.(c|cpp)$", f):
                problems.append("%s: *_test.c is no name in the scheme (test_<what>.c)" % os.path.relpath(path, ROOT))
            elif f.startswith("test_") and TEST_NAME.match(f) and path not in mains and path not in run_by_test:
                problems.append("%s: named as a test program, but no test runs it as one: name it for what it is"
                                % os.path.relpath(path, ROOT))
    problems = [p for p in problems if p.split(":")[0] not in PENDING]
    for p in problems:
        print(p)
    print("check_test_names: %d problem(s), %d test programs" % (len(problems), len(mains)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
