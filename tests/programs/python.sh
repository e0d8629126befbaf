#!/usr/bin/env bash
# python.sh — the system python3 runs an allocation-heavy script (dicts,
# lists, strings, sets, many small objects, json) with and without Strata;
# the results must be identical, and the script checks its own invariants.
source "$(dirname "$0")/common.sh"
PY=/usr/bin/python3
[ -x $PY ] || fail "$PY missing (apt-get install python3)"

cat > "$WORK/alloc.py" <<'PYEOF'
import hashlib, json, random
rng = random.Random(20261121)
# many small objects: a dict of lists of strings
d = {}
for i in range(100000):
    key = "k%07d-%s" % (i, "x" * (i % 23))
    d[key] = [i, str(i * i), (i, i + 1), "v" * (i % 40)]
assert len(d) == 100000
# churn: delete and re-insert a third, grow and shrink lists
for i in range(0, 100000, 3):
    del d["k%07d-%s" % (i, "x" * (i % 23))]
for i in range(0, 100000, 3):
    d["n%07d" % i] = list(range(i % 50))
lst = [rng.random() for _ in range(100000)]
lst.sort()
assert all(lst[i] <= lst[i + 1] for i in range(len(lst) - 1))
s = set(str(int(x * 1e6)) for x in lst)
words = " ".join("w%d" % (i % 1000) for i in range(100000)).split()
counts = {}
for w in words:
    counts[w] = counts.get(w, 0) + 1
assert all(c == 100 for c in counts.values())
text = json.dumps(d, sort_keys=True)
back = json.loads(text)
assert back == {k: [list(x) if isinstance(x, tuple) else x for x in v] for k, v in d.items()}
# an independently known value: sum of squares 0..n-1 = (n-1)n(2n-1)/6
n = 10**5
assert sum(i * i for i in range(n)) == (n - 1) * n * (2 * n - 1) // 6
h = hashlib.sha256(text.encode()).hexdigest()
print(len(d), len(s), len(counts), round(sum(lst), 6), h)
PYEOF

# Every object through malloc (python's own small-object arenas would hide them).
export PYTHONMALLOC=malloc
$PY "$WORK/alloc.py" > "$WORK/plain.out"
strata_run "$WORK/err" $PY "$WORK/alloc.py" > "$WORK/strata.out" || { cat "$WORK/err" >&2; fail "python3 failed under Strata"; }
same "$WORK/plain.out" "$WORK/strata.out" "python3 output"
check_preloaded "$WORK/err" 100000
echo "python3: $(cat "$WORK/strata.out")"
