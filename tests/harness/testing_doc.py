#!/usr/bin/env python3
"""testing_doc.py SRC BUILD [--print] — docs/testing.md against CTest.

docs/testing.md has a table of CTest labels, each with its number of tests,
and a total (between the markers <!-- test-counts --> and
<!-- /test-counts -->).  This compares it with what `ctest --show-only=json-v1`
says in BUILD: every label with its count, the tests without a label, the
total.  On a mismatch it prints the table as it should be, to paste into the
document; --print prints that table and exits 0.
"""
import json
import os
import re
import subprocess
import sys


def actual(build):
    out = subprocess.run(["ctest", "--show-only=json-v1"], cwd=build, capture_output=True, text=True,
                         timeout=120)
    if out.returncode != 0:
        raise SystemExit("FAIL: ctest --show-only=json-v1 in %s: %s" % (build, out.stderr))
    counts, total = {}, 0
    for t in json.loads(out.stdout)["tests"]:
        total += 1
        labels = []
        for p in t.get("properties", []):
            if p["name"] == "LABELS":
                labels = p["value"]
        for lab in labels or ["(none)"]:
            counts[lab] = counts.get(lab, 0) + 1
    return counts, total


def table(counts, total):
    lines = ["| Label | Tests |", "|---|---:|"]
    for lab in sorted(counts, key=lambda x: (x == "(none)", x)):
        lines.append("| `%s` | %d |" % (lab, counts[lab]) if lab != "(none)" else "| (no label) | %d |" % counts[lab])
    lines.append("| **all tests** | **%d** |" % total)
    return "\n".join(lines)


def documented(path):
    text = open(path, encoding="utf-8").read()
    m = re.search(r"<!-- test-counts -->\n(.*?)\n<!-- /test-counts -->", text, re.S)
    if not m:
        raise SystemExit("FAIL: %s has no <!-- test-counts --> table" % path)
    counts, total = {}, None
    for line in m.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 2 or not re.fullmatch(r"\**\d+\**", cells[1]):
            continue
        n = int(cells[1].strip("*"))
        if "all tests" in cells[0]:
            total = n
        elif cells[0] == "(no label)":
            counts["(none)"] = n
        else:
            counts[cells[0].strip("`")] = n
    return counts, total


def main():
    src, build = sys.argv[1], sys.argv[2]
    counts, total = actual(build)
    if "--print" in sys.argv:
        print(table(counts, total))
        return 0
    doc_counts, doc_total = documented(os.path.join(src, "docs", "testing.md"))
    problems = []
    for lab in sorted(set(counts) | set(doc_counts)):
        if counts.get(lab) != doc_counts.get(lab):
            problems.append("label %s: ctest has %s, docs/testing.md says %s" % (lab, counts.get(lab, 0),
                                                                                 doc_counts.get(lab, "nothing")))
    if doc_total != total:
        problems.append("total: ctest has %d tests, docs/testing.md says %s" % (total, doc_total))
    if problems:
        print("FAIL: docs/testing.md does not match ctest -N:\n  " + "\n  ".join(problems))
        print("\nThe table as it should be (between the test-counts markers):\n\n" + table(counts, total))
        return 1
    print("ok: %d tests, %d labels, as docs/testing.md says" % (total, len(counts)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
