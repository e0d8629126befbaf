#!/usr/bin/env python3
"""options_doc.py ROOT [--write] — the options table is the one source.

src/options/options.c holds every option's name, kind, default, range and
help.  From it this script generates the body of strata_option_t in
include/strata.h (its groups, and each member's comment; the numeric values
are ABI and are kept as they are) and README's options table (between the
<!-- options-table --> markers).  Without --write it compares and exits 1 on
any drift, printing what differs (the options_doc test); with --write it
rewrites both.  A new option: add it to the enum with the next free number,
add its entry to the table, run with --write.
"""
import difflib
import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("-") else ".")
WRITE = "--write" in sys.argv
OPTIONS_C = os.path.join(ROOT, "src/options/options.c")
HEADER = os.path.join(ROOT, "include/strata.h")
README = os.path.join(ROOT, "README.md")
ENUM_OPEN = "typedef enum strata_option_e {\n"
ENUM_CLOSE = "} strata_option_t;"
README_OPEN = "<!-- options-table -->\n"
README_CLOSE = "<!-- /options-table -->"

ENTRY_RE = re.compile(
    r'\bOPT\((\w+),\s*(KIND_\w+),\s*([^,]+),\s*([^,]+),\s*([^,]+),\s*(\w+),\s*'
    r'((?:"(?:[^"\\]|\\.)*"\s*)+)\)')
GROUP_RE = re.compile(r"/\* -- (.*?) -- \*/")


def fail(msg):
    print("options_doc: " + msg)
    sys.exit(1)


def c_value(expr, consts):
    expr = re.sub(r"\b(\d+)L\b", r"\1", expr.strip())
    expr = re.sub(r"\b[A-Z_][A-Z0-9_]*\b", lambda m: str(consts[m.group(0)]), expr)
    return int(eval(expr, {"__builtins__": {}}))


def read_table(header_text):
    with open(OPTIONS_C) as f:
        text = f.read()
    consts = {m.group(1): int(m.group(2)) for m in re.finditer(r"\b(STRATA_[A-Z0-9_]+) = (\d+)", header_text)}
    words = {m.group(1): re.findall(r'"([^"]*)"', m.group(2))
             for m in re.finditer(r"static const char \*const (\w+)\[\] = \{([^}]*)\}", text)}
    start = text.index("table[STRATA_OPTION_COUNT] = {")
    body = text[start:text.index("\n};", start)]
    opts, group = [], None
    for m in re.finditer(GROUP_RE.pattern + "|" + ENTRY_RE.pattern, body):
        if m.group(1) is not None:
            group = m.group(1)
            continue
        e = ENTRY_RE.match(m.group(0))
        name, kind, d, lo, hi, w, help_ = e.groups()
        if group is None:
            fail("table entry %s comes before any /* -- group -- */ comment" % name)
        opts.append(dict(name=name, kind=kind[5:].lower(), default=c_value(d, consts), min=c_value(lo, consts),
                         max=c_value(hi, consts), words=None if w == "NULL" else words[w], group=group,
                         help="".join(re.findall(r'"((?:[^"\\]|\\.)*)"', help_)).replace('\\"', '"')))
    return opts


def read_enum(header_text):
    start = header_text.index(ENUM_OPEN) + len(ENUM_OPEN)
    end = header_text.index(ENUM_CLOSE, start)
    values = {m.group(1): int(m.group(2))
              for m in re.finditer(r"STRATA_OPTION_(\w+)\s*=\s*(\d+)", header_text[start:end]) if m.group(1) != "COUNT"}
    return start, end, values


def size_text(v):
    for suffix, unit in (("g", 1 << 30), ("m", 1 << 20), ("k", 1 << 10)):
        if v and v % unit == 0:
            return "%d%s" % (v // unit, suffix)
    return str(v)


def value_text(o, v):
    if o["words"] and (o["kind"] == "enum" or v == 0):
        return o["words"][v]
    return size_text(v) if o["kind"] == "size" else str(v)


def values_text(o):
    """What the variable accepts, for the README and the header."""
    k = o["kind"]
    if k == "bool":
        return "0, 1"
    if k == "enum":
        return ", ".join(o["words"])
    if k == "size":
        t = "bytes, %s to %s" % (size_text(o["min"]), size_text(o["max"]))
        return t + (" or " + o["words"][0] if o["words"] else "")
    if k == "mib":
        return "MiB, %d to %d (or a size: 2g)" % (o["min"], o["max"])
    return "%d to %d" % (o["min"], o["max"])


def gen_enum(opts, values):
    lines, group = [], None
    width = max(len(o["name"]) for o in opts) + len("STRATA_OPTION_ = 00,") + 1
    for o in opts:
        if o["group"] != group:
            group = o["group"]
            lines.append("    /* -- %s -- */" % group)
        member = "STRATA_OPTION_%s = %d," % (o["name"], values[o["name"]])
        lines.append("    %-*s/* %s (default %s): %s */"
                     % (width, member, values_text(o), value_text(o, o["default"]), o["help"]))
    lines.append("    STRATA_OPTION_COUNT = %d" % len(opts))
    return "\n".join(lines) + "\n"


def gen_readme(opts):
    lines = ["| variable | default | values | meaning |", "|---|---|---|---|"]
    group = None
    for o in opts:
        if o["group"] != group:
            group = o["group"]
            lines.append("| **%s** | | | |" % group)
        lines.append("| `STRATA_%s` | %s | %s | %s |" % (o["name"], value_text(o, o["default"]), values_text(o),
                                                     o["help"].replace("|", "\\|")))
    return "\n".join(lines) + "\n"


def replace(text, open_, close, body, what):
    if open_ not in text or close not in text:
        fail("%s has no %r ... %r markers" % (what, open_.strip(), close))
    start = text.index(open_) + len(open_)
    end = text.index(close, start)
    return text[:start] + body + text[end:]


def main():
    with open(HEADER) as f:
        header = f.read()
    with open(README) as f:
        readme = f.read()
    opts = read_table(header)
    _, _, values = read_enum(header)
    names = [o["name"] for o in opts]
    if sorted(names) != sorted(values):
        fail("the table and strata_option_t differ: table only %s, enum only %s"
             % (sorted(set(names) - set(values)), sorted(set(values) - set(names))))
    if sorted(values.values()) != list(range(len(values))):
        fail("strata_option_t's values are not 0..%d, each once" % (len(values) - 1))
    for o in opts:
        if not o["min"] <= o["default"] <= o["max"]:
            fail("STRATA_%s: default %d outside %d..%d" % (o["name"], o["default"], o["min"], o["max"]))
    new_header = replace(header, ENUM_OPEN, ENUM_CLOSE, gen_enum(opts, values), "include/strata.h")
    new_readme = replace(readme, README_OPEN, README_CLOSE, gen_readme(opts), "README.md")
    drift = 0
    for path, old, new in ((HEADER, header, new_header), (README, readme, new_readme)):
        if old == new:
            continue
        if WRITE:
            with open(path, "w") as f:
                f.write(new)
            print("options_doc: wrote %s" % os.path.relpath(path, ROOT))
        else:
            drift += 1
            sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), new.splitlines(True),
                                                       os.path.relpath(path, ROOT), "generated"))
    if drift:
        fail("%d file(s) drifted from the options table: run scripts/options_doc.py . --write" % drift)
    print("options_doc: %d options, strata.h and README agree with the table" % len(opts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
