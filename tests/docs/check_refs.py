#!/usr/bin/env python3
"""check_refs.py ROOT — the text cannot drift from the code.

Every file path named in README.md, docs/, the READMEs of bench/, tools/,
tests/ and the comments of src/,
include/, mpi/ and tools/ must exist; every function or option named in
them that looks like one of Strata's (a strata_/STRATA_ name, or a name()
with an underscore) must occur in the code; and none of that text names an
issue or a development stop, which mean nothing to a reader of the code.
docs/notes/, the development record, follows the same rules (a tool's
quoted output, as Slurm's "task 2:", is no issue).

Beyond paths from the top of the tree, the user docs and the source
comments are read for:
- a path within src/ as comments write it (core/process.c), and a bare file
  name (random.c, block.h) outside a fenced code block: some file of the tree
  has that name (or it is a system header, <malloc.h>);
- a backticked identifier that looks like one of Strata's (a module's
  prefix, `heap_release`, `page_foreign`, `DELAYED_MARK`-style macros of
  those modules): it occurs in the code, or is the name of a CTest test.
The code of the tests, benchmarks, scripts and build (their comments, and
the whole text of Python, shell and CMake files) names no issue either.

The development record may name what is gone (it says what was tried), so
these two checks stop at docs/notes/.
"""
import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
CODE_DIRS = ("src", "include", "mpi", "tools", "bench", "tests", "scripts", "cmake")
TOP_DIRS = ("src", "include", "tests", "tools", "bench", "docs", "scripts", "mpi", "cmake")
PATH_RE = re.compile(r"(?<![\w./-])((?:%s)/[A-Za-z0-9_.+/-]*[A-Za-z0-9_+/])" % "|".join(TOP_DIRS))
# A name() with an underscore, not qualified (std::get_new_handler() is the
# C++ library's) and not reserved to the implementation (__name).
CALL_RE = re.compile(r"(?<![:\w])((?!__)[A-Za-z_][A-Za-z0-9_]*_[A-Za-z0-9_]*)\(\)")
OPT_RE = re.compile(r"\b((?:strata|STRATA)_[A-Za-z0-9_]*[A-Za-z0-9])\b")
ISSUE_RE = re.compile(r"\b(?:[Ii]ssue|task) #?\d+\b(?!:)|\bstop \d+\b|\bh-[a-z]+(?:-[a-z]+)*\b(?= branch)")
SRC_PATH_RE = re.compile(r"(?<![\w/.-])((?:%s)/[A-Za-z0-9_.+-]+\.[ch])\b"
                         % "|".join(("core", "large", "arena", "os", "options", "storage", "transfer", "prof",
                                     "segmap", "stats", "init")))
FILE_RE = re.compile(r"(?<![\w/.<-])([A-Za-z0-9_+-]+\.(?:c|h|cc|cpp|py|sh))\b(?![\w/-])")
# The prefixes of Strata's modules: a backticked name_with_them is Strata's.
MODULES = ("heap", "page", "pages", "segment", "segmap", "pagemap", "large", "huge", "arena", "addrmap", "tree",
           "os", "options", "opt", "sb", "storage", "chan", "cma", "xfer", "transfer", "prof", "stats", "takeover",
           "purge", "canary", "guard", "budget", "pager", "ring", "block", "foreign", "remote", "malloc", "free",
           "limits", "tier", "kept", "delayed", "size", "class", "thread", "process", "fork", "big", "small")
SYMBOL_RE = re.compile(r"`((?:%s)_[A-Za-z0-9_]*[A-Za-z0-9]|(?:%s)_[A-Z0-9_]*[A-Z0-9])(?:\(\))?`"
                       % ("|".join(MODULES), "|".join(m.upper() for m in MODULES)))
COMMENT_RE = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
# Trees produced by a build or a run, named in docs as where output lands.
ISSUE_PENDING = ()
GENERATED = ("bench/runs", "build", "bench/results/latest", "bench/.venv", "bench/.peers")


def rel(p):
    return os.path.relpath(p, ROOT)


def walk(dirs, exts):
    for d in dirs:
        for base, subdirs, files in os.walk(os.path.join(ROOT, d)):
            subdirs[:] = [s for s in subdirs if not s.startswith(".") and s != "__pycache__"]
            for f in files:
                if f.endswith(exts):
                    yield os.path.join(base, f)


def comments(text):
    """The comments of a C file, with their line numbers."""
    out = []
    for m in COMMENT_RE.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        for i, part in enumerate(m.group(0).split("\n")):
            out.append((line + i, part))
    return out


def identifiers():
    names = set()
    for path in walk(CODE_DIRS, (".c", ".h", ".cc", ".cpp", ".py", ".sh", ".txt", ".cmake", ".in")):
        with open(path, errors="replace") as f:
            text = f.read()
        if path.endswith((".c", ".h", ".cc", ".cpp")):
            text = COMMENT_RE.sub(" ", text)  # a name only a comment uses does not exist
        names.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))
    # The options table names each option without its STRATA_ prefix.
    with open(os.path.join(ROOT, "src/options/options.c"), errors="replace") as f:
        names.update("STRATA_" + n for n in re.findall(r"\bOPT\(([A-Z][A-Z0-9_]*),", f.read()))
    for extra in ("Makefile", "CMakeLists.txt"):
        with open(os.path.join(ROOT, extra), errors="replace") as f:
            names.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", f.read()))
    return names


def file_names():
    names = {"prog.c", "app.c"}   # the user's program in the docs' examples
    for base, subdirs, files in os.walk(ROOT):
        subdirs[:] = [d for d in subdirs if not d.startswith(".") and d not in ("build", "__pycache__")]
        names.update(files)
    return names


def path_ok(p):
    p = p.rstrip("/.")
    if any(p == g or p.startswith(g + "/") for g in GENERATED):
        return True
    if os.path.exists(os.path.join(ROOT, p)):
        return True
    # "src/core/heap" for heap.c/heap.h, "tools/strata-replay" for its source folder.
    return any(os.path.exists(os.path.join(ROOT, p + ext)) for ext in (".c", ".h", ".py", ".sh", ".md"))


def main():
    known = identifiers()
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))
    import check_test_names
    check_test_names.ROOT = ROOT
    known |= check_test_names.test_names()
    files = file_names()
    problems = []
    texts = []  # (file, line, text, is_user_doc, strict): strict, not the development record
    readmes = sorted(walk(("bench", "tools", "tests", "mpi", "scripts"), ("README.md",)))
    for path in [os.path.join(ROOT, "README.md")] + sorted(walk(("docs",), (".md",))) + readmes:
        strict = not rel(path).startswith("docs/notes/")
        fenced = False
        with open(path, errors="replace") as f:
            for n, line in enumerate(f, 1):
                if line.lstrip().startswith("```"):
                    fenced = not fenced
                texts.append((path, n, line, True, strict and not fenced))
    for path in sorted(walk(("src", "include", "mpi", "tools"), (".c", ".h", ".cc"))):
        with open(path, errors="replace") as f:
            for n, line in comments(f.read()):
                texts.append((path, n, line, True, True))
    for path in sorted(walk(("tests", "bench", "scripts", "cmake", "tools", "mpi"),
                            (".c", ".h", ".cc", ".cpp", ".py", ".sh", ".txt", ".cmake"))):
        if rel(path) in ISSUE_PENDING or "/results/" in rel(path):
            continue
        with open(path, errors="replace") as f:
            text = f.read()
        lines = comments(text) if path.endswith((".c", ".h", ".cc", ".cpp")) else enumerate(text.split("\n"), 1)
        for n, line in lines:
            m = ISSUE_RE.search(line)
            if m:
                problems.append("%s:%d: names %r (say what, not which issue)" % (rel(path), n, m.group(0)))
    for path, n, line, user, strict in texts:
        where = "%s:%d" % (rel(path), n)
        for m in PATH_RE.finditer(line):
            if not path_ok(m.group(1)):
                problems.append("%s: names %s, which does not exist" % (where, m.group(1)))
        if strict:
            for m in SRC_PATH_RE.finditer(line):
                if not path_ok("src/" + m.group(1)) and not path_ok(m.group(1)):
                    problems.append("%s: names %s, which is no file of src/" % (where, m.group(1)))
            for m in FILE_RE.finditer(line):
                if m.group(1) not in files and not os.path.exists("/usr/include/" + m.group(1)):
                    problems.append("%s: names %s, no file of the tree" % (where, m.group(1)))
            for m in SYMBOL_RE.finditer(line):
                if m.group(1) not in known:
                    problems.append("%s: names `%s`, found nowhere in the code" % (where, m.group(1)))
        for name in set(CALL_RE.findall(line)) | set(OPT_RE.findall(line)):
            if name not in known and not name.endswith("_"):
                problems.append("%s: names %s, found nowhere in the code" % (where, name))
        if user:
            m = ISSUE_RE.search(line)
            if m:
                problems.append("%s: names %r (say what, not which issue)" % (where, m.group(0)))
    for p in problems:
        print(p)
    print("check_refs: %d problem(s) in %d lines read" % (len(problems), len(texts)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
