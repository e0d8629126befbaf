#!/usr/bin/env bash
# sqlite.sh — sqlite3 builds a generated database (200k rows, an index, a
# join table), queries it (group by, order by, join, LIKE, window function),
# updates, deletes, vacuums and checks integrity; the answers must be the
# same with and without Strata (and with STRATA_CHECK=1).
source "$(dirname "$0")/common.sh"
command -v sqlite3 >/dev/null || fail "sqlite3 missing (apt-get install sqlite3)"

cat > "$WORK/script.sql" <<'SQL'
PRAGMA cache_size = -20000;
CREATE TABLE t(id INTEGER PRIMARY KEY, k TEXT, v REAL, g INTEGER);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200000)
INSERT INTO t SELECT i, printf('key-%08d-%s', (i * 7919) % 200003, substr('abcdefghij', 1 + i % 10)),
                     (i % 1000) / 7.0, i % 97 FROM n;
CREATE INDEX t_k ON t(k);
CREATE TABLE g(g INTEGER PRIMARY KEY, name TEXT);
WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 96)
INSERT INTO g SELECT i, 'group ' || i FROM n;
SELECT count(*), sum(g), round(sum(v), 3) FROM t;
SELECT g, count(*), round(avg(v), 4), min(k), max(k) FROM t GROUP BY g ORDER BY g LIMIT 20;
SELECT name, count(*) FROM t JOIN g USING (g) WHERE k LIKE 'key-0001%' GROUP BY name ORDER BY 2 DESC, 1 LIMIT 10;
SELECT id, k, rank() OVER (PARTITION BY g ORDER BY v DESC, id) r FROM t WHERE g = 5 ORDER BY r, id LIMIT 10;
UPDATE t SET k = upper(k), v = v * 2 WHERE id % 5 = 0;
DELETE FROM t WHERE id % 11 = 0;
SELECT count(*), round(sum(v), 3), count(DISTINCT substr(k, 1, 9)) FROM t;
SELECT group_concat(k, ',') FROM (SELECT k FROM t ORDER BY k DESC LIMIT 50);
VACUUM;
PRAGMA integrity_check;
SQL

sqlite3 "$WORK/plain.db" < "$WORK/script.sql" > "$WORK/plain.out" || fail "sqlite3 failed without Strata"
strata_run "$WORK/err" sqlite3 "$WORK/strata.db" < "$WORK/script.sql" > "$WORK/strata.out" \
  || { cat "$WORK/err" >&2; fail "sqlite3 failed under Strata"; }
same "$WORK/plain.out" "$WORK/strata.out" "sqlite3 output"
# Once more with Strata's full checks: no false alarm on a real program.
STRATA_CHECK=1 strata_run "$WORK/err" sqlite3 "$WORK/check.db" < "$WORK/script.sql" > "$WORK/check.out" \
  || { tail -20 "$WORK/err" >&2; fail "sqlite3 failed under Strata with STRATA_CHECK=1"; }
same "$WORK/plain.out" "$WORK/check.out" "sqlite3 output (STRATA_CHECK=1)"
grep -qx ok "$WORK/strata.out" || fail "integrity_check did not say ok"
grep -q '^200000|' "$WORK/strata.out" || fail "expected 200000 rows"
check_preloaded "$WORK/err" 10000
echo "sqlite3: $(wc -l < "$WORK/strata.out") result lines identical, integrity ok"
