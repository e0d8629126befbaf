#!/bin/bash
# interleave.sh RUNS LABEL:COMMAND ... — runs each command once per round,
# RUNS rounds (A B C A B C ...), and prints one markdown table of the
# medians of every `metric NAME@SIZE VALUE` line: GB/s for bandwidths
# (MB/s / 1000), µs for latencies (columns marked "(lat)").  For quick
# same-run comparisons on a loaded machine (docs/notes/transfer.md);
# `make bench` uses suite.tsv instead.  BEST=1: the best run of each cell
# (highest bandwidth, lowest latency) instead of the median, what the
# mechanism gives when no other process takes the CPUs.  Below 4 KiB a
# bandwidth is shown as µs per message (lower is better).  RAW=FILE keeps
# the measured lines, and RERUN=FILE (with RUNS 0) tables them again, e.g.
# BEST=1 RERUN=FILE interleave.sh 0.
#   bench/transfer/interleave.sh 3 "a:build/bin/bench-chan-bw --buf strata" \
#                                  "b:STRATA_CHAN_PUSH=1 build/bin/bench-chan-bw --buf strata"
runs=$1; shift
out=$(mktemp); trap "rm -f $out" EXIT
[ -n "$RERUN" ] && cat "$RERUN" > $out
for r in $(seq $runs); do
  for spec in "$@"; do
    label=${spec%%:*}; cmd=${spec#*:}
    eval "$cmd" 2>/dev/null | grep -E "^metric " | sed "s/^/$label /" >> $out
  done
done
[ -n "$RAW" ] && cp $out "$RAW"   # RAW=FILE keeps the metric lines (label first) for another look
BEST=${BEST:-0} python3 - $out <<'PY'
import sys,statistics,collections,os
best=os.environ.get('BEST')=='1'
d=collections.defaultdict(list); labs=[]; sizes=[]; kinds=set()
for l in open(sys.argv[1]):
    lab,_,m,v=l.split(); name,size=m.split('@'); size=int(size)
    lat = name.startswith('lat')
    key=(lab+('(lat)' if lat else ''))
    d[(key,size)].append(float(v)/(1 if lat else 1000) if size>=4096 or lat else size/float(v))
    if key not in labs: labs.append(key)
    if size not in sizes: sizes.append(size)
sizes.sort()
def fmt(n):
    for u,k in (('MiB',1<<20),('KiB',1<<10)):
        if n>=k and n%k==0: return "%d %s"%(n//k,u)
    return "%d B"%n
print("| size | "+" | ".join(labs)+" |"); print("|---:|"+"---:|"*len(labs))
for s in sizes:
    pick=lambda l,v: (min(v) if (l.endswith('(lat)') or s<4096) else max(v)) if best else statistics.median(v)
    print("| "+fmt(s)+" | "+" | ".join(("%.2f"%pick(l,d[(l,s)])) if (l,s) in d else "-" for l in labs)+" |")
print("runs per cell:", {l: len(d[(l,sizes[-1])]) if (l,sizes[-1]) in d else 0 for l in labs})
PY
