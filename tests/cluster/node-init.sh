#!/bin/bash
# node-init.sh — the first process (pid 1) of one node of the test cluster,
# started by cluster.sh inside fresh network, mount, UTS, IPC, PID and cgroup
# namespaces.  It gives the node what a machine of its own has: a hostname,
# private /tmp, /dev/shm and /run (so a storage group's table, a channel's
# file, munge's socket and Slurm's spool are the node's alone), its own /proc
# and /sys, a boot id of its own, the cgroup v1 hierarchies rooted at the node's cgroup, and the
# cluster's /etc/hosts; then it stays, reaping orphans (slurmd and slurmstepd
# daemonize), until the cluster is torn down.  Killing it ends every process
# of the node: the kernel kills a PID namespace with its first process.
# usage: node-init.sh NAME HOSTS_FILE READY_FILE
set -eu
name=$1 hosts=$2 ready=$3
mount --make-rprivate /
# The source and build trees may lie under /tmp (a checkout there, as CI's
# may be): the trees the node needs (its scripts, the run directory, the
# programs and libraries) stay visible under its private /tmp, bound from
# the machine's /tmp before that is covered.
keep=()
for p in "$(cd "$(dirname "$0")" && pwd)" "$hosts" "$ready" ${CLUSTER_KEEP:-}; do
  case $p in /tmp/?*) r=${p#/tmp/}; keep+=("/tmp/${r%%/*}") ;; esac
done
old=""
if [ ${#keep[@]} -gt 0 ]; then
  old=$(mktemp -d /dev/shm/strata-node-tmp.XXXXXX)
  mount --bind /tmp "$old"
fi
mount -t tmpfs -o mode=1777 tmpfs /tmp
if [ -n "$old" ]; then
  for k in $(printf '%s\n' "${keep[@]}" | sort -u); do
    mkdir -p "$k"
    mount --bind "$old/${k#/tmp/}" "$k"
  done
  umount "$old"
  rmdir "$old"
fi
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
mount -t tmpfs -o mode=755 tmpfs /run
mount -t sysfs sysfs /sys
mount -t tmpfs -o mode=755 cgroup_root /sys/fs/cgroup
for c in memory freezer; do
  mkdir /sys/fs/cgroup/$c
  mount -t cgroup -o $c cgroup /sys/fs/cgroup/$c
done
mount --bind "$hosts" /etc/hosts
# A boot id of its own: UCX (under MPICH) takes two processes with the same
# boot id for one machine and joins them by shared memory, which does not
# cross nodes: MPI_Finalize then hung in most runs.
cat /proc/sys/kernel/random/uuid > /run/boot_id
mount --bind /run/boot_id /proc/sys/kernel/random/boot_id
hostname "$name"
ip link set lo up
echo ok > "$ready"
trap 'exit 0' TERM INT
while :; do
  sleep 3600 &
  wait $! || true
done
