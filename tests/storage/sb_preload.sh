#!/bin/sh
# Preload mode: the same unmodified program with and without
# STRATA_SB_DIR/STRATA_SB_BUDGET under LD_PRELOAD=libstrata.so.  Same
# checksum; with storage backing its blocks were evicted and its peak
# resident size stayed far below its 72 MiB of data.
# usage: sb_preload.sh APP LIBSTRATA
set -u
app=$1 lib=$2
d=$(mktemp -d) || exit 1
trap 'rm -rf "$d"' EXIT
plain=$(LD_PRELOAD=$lib "$app") || { echo "FAIL: plain run"; exit 1; }
backed=$(STRATA_SB_DIR=$d STRATA_SB_BUDGET=8M LD_PRELOAD=$lib "$app") || { echo "FAIL: backed run: $backed"; exit 1; }
echo "without: $plain" | tr '\n' ' '; echo
echo "with:    $backed" | tr '\n' ' '; echo
sum1=$(echo "$plain" | grep checksum) sum2=$(echo "$backed" | grep checksum)
[ -n "$sum1" ] && [ "$sum1" = "$sum2" ] || { echo "FAIL: checksums differ"; exit 1; }
echo "$backed" | grep -q "usable 1" || { echo "FAIL: malloc_usable_size"; exit 1; }
echo "$backed" | grep -q "exempt: 0 0 1" || { echo "FAIL: strata_sb_exempt (want: 0 0 1)"; exit 1; }
echo "$backed" | grep -q "allocated 72 MiB, budget 8 MiB" || { echo "FAIL: big blocks not storage-backed"; exit 1; }
ev=$(echo "$backed" | sed -n 's/.*evictions \([0-9]*\).*/\1/p')
[ "${ev:-0}" -gt 0 ] || { echo "FAIL: nothing evicted"; exit 1; }
peak=$(echo "$backed" | sed -n 's/peak resident \([0-9]*\) KiB/\1/p')
# 8 MiB budget + program, libraries and Strata's tables; the data is 72 MiB.
[ "$peak" -lt 32768 ] || { echo "FAIL: peak resident $peak KiB"; exit 1; }
[ -z "$(ls -A "$d")" ] || { echo "FAIL: files left in $d"; exit 1; }
# STRATA_SHOW_STATS: the storage-backed lines at exit when it was used, not otherwise.
said=$(STRATA_SHOW_STATS=1 STRATA_SB_DIR=$d STRATA_SB_BUDGET=8M LD_PRELOAD=$lib "$app" 2>&1 >/dev/null)
echo "$said" | grep -q "^strata: storage-backed memory (" || { echo "FAIL: no storage-backed statistics: $said"; exit 1; }
echo "$said" | grep -Eq "^  sb_evictions +[1-9]" || { echo "FAIL: storage-backed statistics without evictions"; exit 1; }
said=$(STRATA_SHOW_STATS=1 LD_PRELOAD=$lib "$app" 2>&1 >/dev/null)
echo "$said" | grep -q "^strata: statistics" || { echo "FAIL: no statistics: $said"; exit 1; }
echo "$said" | grep -q "storage-backed" && { echo "FAIL: storage-backed statistics printed without storage"; exit 1; }
echo ok
