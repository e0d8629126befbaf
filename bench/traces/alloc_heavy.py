"""alloc_heavy.py — an allocation-heavy Python program whose malloc traffic
bench/traces/record.sh records: building and discarding dicts of lists,
growing strings and byte buffers, sorting, JSON round trips, and a cache with
evictions, so the trace mixes short-lived small objects, medium buffers that
grow by realloc, and long-lived tables.

    python3 alloc_heavy.py [SCALE]     (SCALE 1 is ~1 s; prints "check ok")
"""
import json
import random
import sys


def records(rng, n):
    return [{"id": i, "name": "item-%d-%s" % (i, "x" * rng.randrange(1, 600)),
             "tags": [rng.randrange(1000) for _ in range(rng.randrange(1, 40))],
             "score": rng.random()} for i in range(n)]


def main():
    scale = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
    rng = random.Random(12345)
    total = 0
    cache = {}
    rounds = max(1, int(12 * scale))
    for r in range(rounds):
        rows = records(rng, 6000)
        # Index by tag: dicts of growing lists.
        by_tag = {}
        for row in rows:
            for t in row["tags"]:
                by_tag.setdefault(t, []).append(row["id"])
        total += sum(len(v) for v in by_tag.values())
        # Growing text and byte buffers (realloc-heavy).
        text = ""
        buf = bytearray()
        for row in rows[:3000]:
            text += row["name"][:50]
            buf += row["name"].encode()
        total += len(text) + len(buf)
        # Sort and serialise a slice, then parse it back.
        rows.sort(key=lambda x: (x["score"], x["id"]))
        blob = json.dumps(rows[:2000])
        back = json.loads(blob)
        total += len(back)
        # A bounded cache: long-lived entries, evicted at random.
        for row in rows[::7]:
            cache[(r, row["id"])] = row["name"] * 3
        while len(cache) > 4000:
            cache.pop(next(iter(cache)))
        del rows, by_tag, text, buf, blob, back
    expect = total > 0 and len(cache) <= 4000
    print("total %d cache %d" % (total, len(cache)))
    print("check ok" if expect else "check FAILED")
    return 0 if expect else 1


if __name__ == "__main__":
    sys.exit(main())
