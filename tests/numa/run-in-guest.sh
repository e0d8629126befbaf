#!/bin/sh
# run-in-guest.sh BUILD — inside the two-node guest: each NUMA check of
# numa_locality under the STRATA_NUMA mode, numactl policy or cpuset it is
# about.  Prints PASS/FAIL per check; fails if any failed.
build=${1:?usage: run-in-guest.sh BUILD}
t="$build/bin/numa_locality"
lib="$build/libstrata.so"
failed=0
run() {   # name, then the command
  name=$1; shift
  start=$(date +%s)
  if out=$("$@" 2>&1); then r=PASS; else
    r=FAIL; failed=1
    # Free memory per node: a node short of memory makes the kernel fall back to the other.
    out="$out
$(grep -h MemFree /sys/devices/system/node/node*/meminfo)"
  fi
  echo "$r $name ($(( $(date +%s) - start )) s)"
  [ -n "$out" ] && echo "$out" | sed 's/^/    /'
}
[ "$(ls -d /sys/devices/system/node/node* | wc -l)" -ge 2 ] || { echo "FAIL: the guest has fewer than two nodes"; exit 1; }
for mode in local interleave off; do
  run "place STRATA_NUMA=$mode" env STRATA_NUMA=$mode "$t" place $mode
done
run "crossfree" env STRATA_NUMA=local "$t" crossfree
run "purge" env STRATA_NUMA=local "$t" purge
run "migrate" env STRATA_NUMA=local "$t" migrate
run "storage" env STRATA_NUMA=local "$t" storage
run "api" env STRATA_NUMA=local "$t" api
run "api STRATA_NUMA=off" env STRATA_NUMA=off "$t" api
run "policy numactl --membind=1" env STRATA_NUMA=local numactl --membind=1 "$t" policy membind1
run "policy numactl --interleave=all" env STRATA_NUMA=local numactl --interleave=all "$t" policy interleave
# A cpuset with both CPUs but only node 1's memory (cgroup v1, mounted by the guest's init).
cs=/sys/fs/cgroup/strata-node1
if mkdir -p $cs 2>/dev/null && echo 0-1 > $cs/cpuset.cpus && echo 1 > $cs/cpuset.mems; then
  run "policy cpuset mems=1" sh -c "echo \$\$ > $cs/tasks && exec env STRATA_NUMA=local '$t' policy cpuset1"
else
  echo "FAIL policy cpuset: cannot make a cpuset"; failed=1
fi
exit $failed
