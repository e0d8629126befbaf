#!/usr/bin/env bash
# record.sh OUTDIR [BIN] [QUICK] — records the traces that bench/traces/suite.tsv
# replays: real programs run under strata-trace (python3, sqlite3, gcc's cc1) and
# synthetic ones from strata-tracegen.  Run once by bench/run-bench (#setup) before
# the replays; QUICK=1 records smaller runs.  Prints one line per trace.  A trace
# that cannot be recorded (a program missing) is reported and left out, so only
# its replay fails (the harness would mark the whole suite failed on a non-zero
# status); the status is 1 only if nothing could be recorded.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: record.sh OUTDIR [BIN] [QUICK]}
bin=${2:-$here/../../build/bin}
quick=${3:-0}
mkdir -p "$out"
out=$(cd "$out" && pwd)
# No stale trace may stand in for one that fails to record this time.
for t in python python-pymalloc sqlite gcc ml random sweep; do rm -f "$out/$t.trace"; done
work=$(mktemp -d "${TMPDIR:-/tmp}/strata-record.XXXXXX")
trap 'rm -rf "$work"' EXIT
# The recorder records whatever malloc is underneath: make that the C library's.
unset LD_PRELOAD

python=/usr/bin/python3
[ -x "$python" ] || python=$(command -v python3)
if [ "$quick" = 1 ]; then py_scale=0.15; rows=20000; funcs=30; else py_scale=0.5; rows=120000; funcs=120; fi

note() { printf 'record.sh: %-16s %s\n' "$1" "$("$bin/strata-trace-stats" --json "$2" |
  "$python" -c 'import json,sys; s=json.load(sys.stdin); print("%d events, %d threads, peak live %.1f MiB" % (s["events"], s["threads"], s["live"]["peak_bytes"]/2**20))')"; }

failed=0 steps=0
# Runs one recording step in a subshell (with -e), keeps going if it fails.
# (Not under `if`: bash would ignore set -e inside the subshell there.)
step() {
  local name=$1 rc; shift
  set +e
  (set -e; "$@")
  rc=$?
  set -e
  steps=$((steps + 1))
  if [ $rc -ne 0 ]; then
    echo "record.sh: $name FAILED (its replays will fail: trace missing)" >&2
    failed=$((failed + 1))
  fi
}

# (1) python3 on an allocation-heavy script.  PYTHONMALLOC=malloc sends every
# object to malloc (Python's small-object arenas would otherwise hide them).
rec_python() {
PYTHONMALLOC=malloc "$bin/strata-trace" --quiet -o "$out/python.trace" -- \
  "$python" "$here/alloc_heavy.py" "$py_scale" > "$work/python.out"
grep -q '^check ok' "$work/python.out"
note python "$out/python.trace"
# ... and with Python's own allocator, as Python runs by default.
"$bin/strata-trace" --quiet -o "$out/python-pymalloc.trace" -- \
  "$python" "$here/alloc_heavy.py" "$py_scale" > "$work/python2.out"
grep -q '^check ok' "$work/python2.out"
note python-pymalloc "$out/python-pymalloc.trace"
}

# (2) sqlite3 building, indexing, querying and rewriting a generated database.
rec_sqlite() {
cat > "$work/db.sql" <<SQL
PRAGMA journal_mode=OFF;
PRAGMA synchronous=OFF;
CREATE TABLE items(id INTEGER PRIMARY KEY, grp INTEGER, name TEXT, payload BLOB, score REAL);
WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < $rows)
INSERT INTO items SELECT i, (i * 7919) % 1000, 'name-' || i || '-' || hex(randomblob(1 + i % 48)),
       randomblob(16 + (i * 31) % 1500), ((i * 2654435761) % 1000003) / 1000003.0 FROM c;
CREATE INDEX items_grp ON items(grp);
CREATE INDEX items_name ON items(name);
SELECT grp, count(*), round(avg(score), 3), sum(length(payload)) FROM items GROUP BY grp ORDER BY 3 DESC LIMIT 3;
SELECT count(*) FROM items a JOIN items b ON a.grp = b.grp AND b.id = a.id + 1000;
SELECT name FROM items ORDER BY score, id LIMIT 2 OFFSET 1000;
UPDATE items SET name = name || '-updated' WHERE grp < 300;
DELETE FROM items WHERE grp % 7 = 0;
SELECT 'rows', count(*) FROM items;
VACUUM;
SQL
"$bin/strata-trace" --quiet -o "$out/sqlite.trace" -- sqlite3 "$work/db.sqlite" < "$work/db.sql" > "$work/sqlite.out"
grep -q '^rows|' "$work/sqlite.out"
note sqlite "$out/sqlite.trace"
}

# (3) gcc -O2 compiling a generated file.  The driver forks cc1 and as
# (--children records them all); cc1 (the compiler proper, the biggest trace)
# is the one kept.
rec_gcc() {
"$python" "$here/gen_c.py" "$funcs" > "$work/gen.c"
rm -f "$work"/gcc.trace*
(cd "$work" && "$bin/strata-trace" --quiet --children -o "$work/gcc.trace" -- gcc -O2 -c gen.c -o gen.o)
test -s "$work/gen.o"
biggest=$(ls -S "$work"/gcc.trace* | head -n 1)
mv "$biggest" "$out/gcc.trace"
note gcc "$out/gcc.trace"
}

# Synthetic traces: an ML training loop, random residency on 2 threads with
# cross-thread frees, and a size sweep.
rec_synthetic() {
if [ "$quick" = 1 ]; then iters=4; ops=300000; count=200; else iters=12; ops=2000000; count=1000; fi
"$bin/strata-tracegen" ml -o "$out/ml.trace" --iters "$iters" --layers 24 --tensor 4m --seed 1 2>/dev/null
note ml "$out/ml.trace"
"$bin/strata-tracegen" random -o "$out/random.trace" --live 20000 --ops "$ops" --threads 2 \
  --cross 0.3 --realloc 0.05 --sizes log:16:16384 --seed 1 2>/dev/null
note random "$out/random.trace"
"$bin/strata-tracegen" sweep -o "$out/sweep.trace" --min 8 --max 4m --steps 2 --count "$count" --budget 128m 2>/dev/null
note sweep "$out/sweep.trace"
}

step python rec_python
step sqlite rec_sqlite
step gcc rec_gcc
step synthetic rec_synthetic
[ $failed -lt $steps ]
