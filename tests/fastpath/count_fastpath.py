#!/usr/bin/env python3
"""count_fastpath.py — counts the instructions and conditional branches of
the compiled fast paths of malloc and free, from the disassembly of the
built library, and fails when a path grew past its stated limit.

The fast path of a function is its shortest path (in instructions) from the
entry to a `ret`, following fall-through and in-function jumps: tail calls
to the generic paths end a path without reaching `ret`, so they never count.

usage: count_fastpath.py LIBRARY [FUNCTION=MAX_INSNS/MAX_BRANCHES ...]
"""
import heapq
import re
import subprocess
import sys

LIMITS = {
    # Stated in docs/design.md ("Fast paths"); raise only with a reason there.
    "strata_malloc": (20, 3),
    "strata_free": (30, 4),
    # free's fast path, plus the move that keeps the size for the generic path
    "strata_free_sized": (31, 4),
}

LINE = re.compile(r"^\s*([0-9a-f]+):\s+(\S+)\s*(.*)$")
TARGET = re.compile(r"^([0-9a-f]+) <([^>+]+)(\+0x[0-9a-f]+)?>")


def symbols(lib):
    """name -> (address, size) of the library's defined dynamic symbols."""
    out = subprocess.run(["nm", "-D", "-S", "--defined-only", lib], capture_output=True, text=True, check=True).stdout
    table = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4:
            table[parts[3]] = (int(parts[0], 16), int(parts[1], 16))
    return table


def disassemble(lib, func, table):
    """The function's instructions, by address range (aliases share the code,
    so objdump may label it with another name)."""
    if func not in table:
        sys.exit("count_fastpath: %s not found in %s" % (func, lib))
    start, size = table[func]
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "--start-address=%#x" % start,
                          "--stop-address=%#x" % (start + size), lib],
                         capture_output=True, text=True, check=True).stdout
    insns = []
    for line in out.splitlines():
        m = LINE.match(line)
        if m:
            insns.append((int(m.group(1), 16), m.group(2), m.group(3)))
    return insns


def fast_path(insns, func):
    index = {addr: i for i, (addr, _, _) in enumerate(insns)}
    # Dijkstra over instructions: cost = instructions executed so far.
    best = {0: 0}
    queue = [(1, 0, 0, 0)]        # (insns incl. this one, branches, index, tiebreak)
    while queue:
        cost, branches, i, _ = heapq.heappop(queue)
        addr, op, args = insns[i]
        if op.startswith("ret"):
            return cost, branches
        succ = []
        is_cond = op.startswith("j") and op != "jmp"
        if op == "jmp" or is_cond:
            m = TARGET.match(args)
            if m and int(m.group(1), 16) in index:      # a jump inside the function
                succ.append(index[int(m.group(1), 16)])
        if op != "jmp" and i + 1 < len(insns):
            succ.append(i + 1)
        for j in succ:
            c = cost + 1
            if best.get(j, 1 << 30) > c:
                best[j] = c
                heapq.heappush(queue, (c, branches + (1 if is_cond else 0), j, j))
    sys.exit("count_fastpath: no path to ret in " + func)


# The standard names must be the same symbols as the strata_* functions
# (aliases), not wrappers that call them.
ALIASES = ["malloc", "free", "calloc", "realloc", "posix_memalign", "aligned_alloc", "memalign",
           "__libc_malloc", "__libc_free"]


def check_aliases(lib):
    out = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True, check=True).stdout
    addr = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3:
            addr[parts[2]] = parts[0]
    passed = failed = 0
    for name in ALIASES:
        target = "strata_" + name.replace("__libc_", "")
        ok = name in addr and addr.get(name) == addr.get(target)
        print("%-4s %s is %s" % ("ok" if ok else "FAIL", name, ("an alias of " + target) if ok else
                                 "not an alias of %s (%s vs %s)" % (target, addr.get(name), addr.get(target))))
        passed += ok
        failed += not ok
    return passed, failed


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    lib = sys.argv[1]
    limits = dict(LIMITS)
    for arg in sys.argv[2:]:
        name, _, lim = arg.partition("=")
        n, _, b = lim.partition("/")
        limits[name] = (int(n), int(b))
    passed, failed = check_aliases(lib)
    table = symbols(lib)
    for func, (max_n, max_b) in sorted(limits.items()):
        n, b = fast_path(disassemble(lib, func, table), func)
        ok = n <= max_n and b <= max_b
        print("%-4s %s: %d instructions, %d conditional branches (limit %d, %d)" %
              ("ok" if ok else "FAIL", func, n, b, max_n, max_b))
        passed += ok
        failed += not ok
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
