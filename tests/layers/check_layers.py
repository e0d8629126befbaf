#!/usr/bin/env python3
"""check_layers.py — the directories of src/ form layers: each may include
only headers of its own directory and of the directories below it in
LAYERS (docs/design.md says why each sits where it does).  Fails on any
include that goes up or sideways, and on a directory missing from LAYERS.

usage: check_layers.py SRC_DIR
"""
import os
import re
import sys

# Lowest first.  A directory may use those before it.
LAYERS = ["os", "options", "stats", "segmap", "arena", "large", "storage", "prof", "core", "transfer", "init"]

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    src = os.path.abspath(sys.argv[1])
    rank = {d: i for i, d in enumerate(LAYERS)}
    passed = failed = 0
    for d in sorted(os.listdir(src)):
        if not os.path.isdir(os.path.join(src, d)):
            continue
        if d not in rank:
            print("FAIL src/%s is not in the layer list (tests/layers/check_layers.py)" % d)
            failed += 1
            continue
        for root, _, files in os.walk(os.path.join(src, d)):
            for f in sorted(files):
                if not f.endswith((".c", ".h")):
                    continue
                path = os.path.join(root, f)
                with open(path, encoding="utf-8") as fh:
                    for n, line in enumerate(fh, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        target = os.path.normpath(os.path.join(os.path.dirname(path), m.group(1)))
                        rel = os.path.relpath(target, src)
                        if rel.startswith(".."):
                            continue            # include/strata.h and system-like headers
                        tdir = rel.split(os.sep)[0]
                        if tdir == d:
                            continue
                        if tdir not in rank or rank[tdir] > rank[d]:
                            print("FAIL %s:%d: src/%s includes %s, a layer above it" %
                                  (os.path.relpath(path, os.path.dirname(src)), n, d, rel))
                            failed += 1
                        else:
                            passed += 1
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
