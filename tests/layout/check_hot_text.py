#!/usr/bin/env python3
"""check_hot_text.py LIB LIST PROBE — libstrata's code layout (its footprint).

1. The text segment is aligned to 64 KiB (the fault-around window), so the
   windows fall the same way in every process.
2. The functions named in cmake/hot-text.list are in the library (a list
   gone stale, by renames, would leave them scattered: more than a tenth
   missing fails) and all lie in .text.strata_hot, at the front of the text.
3. A program that allocates and frees blocks of the size classes (8 B to
   40 KB) has at most half of the library's text resident (all of it was,
   before the layout): skipped where pagemap cannot be read.
"""
import subprocess, sys, shutil

lib, listfile, probe = sys.argv[1:4]
fail = []
for tool in ("readelf", "nm"):
    if not shutil.which(tool):
        print(f"layout_hot_text: {tool} not found: skipped")
        sys.exit(0)

ph = subprocess.run(["readelf", "-lW", lib], capture_output=True, text=True, check=True).stdout
text_align = [l.split()[-1] for l in ph.splitlines() if l.strip().startswith("LOAD") and " R E " in l]
if text_align != ["0x10000"]:
    fail.append(f"text segment alignment {text_align}, want ['0x10000']")

sh = subprocess.run(["readelf", "-SW", lib], capture_output=True, text=True, check=True).stdout
hot = None
for l in sh.splitlines():
    p = l.replace("[ ", "[").split()
    if len(p) > 5 and p[1] == ".text.strata_hot":
        hot = (int(p[3], 16), int(p[3], 16) + int(p[5], 16))
if hot is None:
    fail.append("no .text.strata_hot section")

syms = {}
for l in subprocess.run(["nm", lib], capture_output=True, text=True, check=True).stdout.splitlines():
    p = l.split()
    if len(p) == 3 and p[1] in "tT":
        syms[p[2]] = int(p[0], 16)
names = [l.strip() for l in open(listfile) if l.strip() and not l.startswith("#")]
missing = [n for n in names if n not in syms]
if len(missing) * 10 > len(names):
    fail.append(f"{len(missing)} of {len(names)} functions of the list are not in the library: {missing[:20]}")
if hot:
    outside = [n for n in names if n in syms and not hot[0] <= syms[n] < hot[1]]
    if outside:
        fail.append(f"listed functions outside .text.strata_hot: {outside[:20]}")

out = subprocess.run([probe], capture_output=True, text=True)
if out.returncode != 0:
    fail.append(f"probe failed: {out.stderr.strip()}")
else:
    w = out.stdout.split()
    if len(w) == 4 and w[0] == "text_resident":
        res, total = int(w[1]), int(w[3])
        print(f"text resident: {res} of {total} pages")
        if total == 0 or res * 2 > total:
            fail.append(f"{res} of {total} pages of the text resident in a malloc-only program, want at most half")
    else:
        print("pagemap not readable: residency not checked")

for f in fail:
    print("FAIL:", f)
print("ok" if not fail else f"{len(fail)} failure(s)")
sys.exit(1 if fail else 0)
