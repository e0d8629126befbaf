# cluster.sh — a two-node Slurm cluster on one machine, for the tests in
# this folder (sourced: cluster_up, on, cluster_down).
#
# Each node is a set of Linux namespaces (network, mount, UTS, IPC, PID,
# cgroup) whose first process is node-init.sh.  A veth pair joins the two
# network namespaces on 10.213.0.0/24; both ends are created inside the
# namespaces, so nothing of it exists outside them, and every daemon listens
# inside a node's network namespace (lo and its veth end) or on a Unix socket
# in the node's private /run.  Each node runs munged and slurmd (node1 also
# slurmctld), from the distribution's packages, with a slurm.conf of two
# nodes and task/cgroup memory enforcement on cgroup v1: each node's cgroup
# namespace is rooted at a child of the caller's own memory (and freezer)
# cgroup, so the two slurmds' job cgroups never meet and the caller's limit
# still holds.  A launch helper per node (launch.py) lets mpirun and hydra
# start their daemons on the other node in place of ssh.
#
# Everything lives in $CLUSTER_DIR (logs, slurm.conf, state); cluster_down
# kills both nodes (their first process: the kernel ends the rest), removes
# the cgroups and the directory.  Callers trap EXIT INT TERM to it.
#
# Settings: CLUSTER_DIR (required, an empty directory outside /tmp: the
# nodes mount their own /tmp), CLUSTER_TIMEOUT (seconds to wait for each
# daemon, default 30).

CLUSTER_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CLUSTER_NET=10.213.0
CLUSTER_NODES="node1 node2"
: "${CLUSTER_TIMEOUT:=30}"

cluster_log() { echo "cluster: $*" >&2; }
cluster_fail() { cluster_log "$*"; return 1; }

# The host pid of a node's first process.
node_pid() { cat "$CLUSTER_DIR/$1.pid"; }

# on NODE CMD...: runs CMD inside NODE's namespaces (as if logged in there),
# in CLUSTER_DIR, with the cluster's slurm.conf.
on() {
  local node=$1; shift
  nsenter -t "$(node_pid "$node")" -m -u -i -n -p -C --wd="$CLUSTER_DIR" \
    env SLURM_CONF="$CLUSTER_DIR/slurm.conf" PATH="$PATH" "$@"
}

# What the tests need, before anything is started: a clear word and a
# distinct exit status (77, skip) when the machine cannot run the cluster.
cluster_requirements() {
  local miss=""
  for c in munged slurmctld slurmd srun nsenter unshare ip; do
    command -v "$c" >/dev/null 2>&1 || miss="$miss $c"
  done
  if [ -n "$miss" ]; then
    cluster_log "missing:$miss (install with scripts/install-deps.sh cluster: packages munge slurmctld slurmd slurm-client)"
    return 77
  fi
  if [ "$(id -u)" -ne 0 ]; then
    cluster_log "needs root: network namespaces, mounts and slurmd's cgroups"
    return 77
  fi
  if ! unshare -n -m -u -i -p -C -f true 2>/dev/null; then
    cluster_log "namespaces refused here (unshare -n -m -u -i -p -C failed: $(unshare -n -m -u -i -p -C -f true 2>&1 | head -1))"
    return 77
  fi
  if ! grep -q ' /sys/fs/cgroup/memory cgroup .*memory' /proc/mounts; then
    cluster_log "no cgroup v1 memory hierarchy at /sys/fs/cgroup/memory: task/cgroup memory enforcement needs it here"
    return 77
  fi
  [ -r /etc/munge/munge.key ] || { cluster_log "no /etc/munge/munge.key (the munge package makes it)"; return 77; }
  return 0
}

# The caller's own cgroup of a v1 hierarchy, as a path under /sys/fs/cgroup/$1.
own_cgroup() { sed -n "s/^[0-9]*:$1:\(.*\)/\1/p" /proc/self/cgroup | head -1; }

write_config() {
  local d=$CLUSTER_DIR
  {
    echo "127.0.0.1 localhost"
    echo "$CLUSTER_NET.1 node1"
    echo "$CLUSTER_NET.2 node2"
  } > "$d/hosts"
  # Paths under /run are each node's own (node-init.sh mounts a tmpfs there).
  cat > "$d/slurm.conf" <<CONF
ClusterName=strata
SlurmctldHost=node1($CLUSTER_NET.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=/run/slurm/ctld
SlurmdSpoolDir=/run/slurm/d
SlurmctldPidFile=/run/slurm/slurmctld.pid
SlurmdPidFile=/run/slurm/slurmd.pid
SlurmctldLogFile=$d/log/slurmctld.log
SlurmdLogFile=$d/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/cgroup
TaskPlugin=task/cgroup
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/builtin
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
ReturnToService=2
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MessageTimeout=10
NodeName=node1 NodeAddr=$CLUSTER_NET.1 CPUs=$(nproc) RealMemory=2048 State=UNKNOWN
NodeName=node2 NodeAddr=$CLUSTER_NET.2 CPUs=$(nproc) RealMemory=2048 State=UNKNOWN
PartitionName=test Nodes=node1,node2 Default=YES MaxTime=10 OverSubscribe=FORCE:4 State=UP
CONF
  cat > "$d/cgroup.conf" <<CONF
CgroupPlugin=cgroup/v1
CgroupMountpoint=/sys/fs/cgroup
ConstrainRAMSpace=yes
ConstrainSwapSpace=no
ConstrainCores=no
ConstrainDevices=no
CONF
}

# Removes the cgroups of clusters whose caller is gone without tearing down
# (killed outright): they are named after the caller's pid.
sweep_cgroups() {
  local c cg pid
  for c in memory freezer; do
    for cg in /sys/fs/cgroup/$c$(own_cgroup $c)/strata-cluster-*-node*; do
      [ -d "$cg" ] || continue
      pid=${cg##*/strata-cluster-}; pid=${pid%%-*}
      kill -0 "$pid" 2>/dev/null || find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null
    done
  done
}

# Starts one node: its cgroups (a child of ours in memory and freezer), its
# namespaces and first process.
start_node() {
  local node=$1 d=$CLUSTER_DIR c cgs=""
  for c in memory freezer; do
    local cg=/sys/fs/cgroup/$c$(own_cgroup $c)/strata-cluster-$$-$node
    mkdir "$cg" || return 1
    echo "$cg" >> "$d/cgroups"
    echo "$cg" >> "$d/$node.cgroups"
    cgs="$cgs $cg"
  done
  # The node's first process enters its cgroups before unshare, so that the
  # new cgroup namespace is rooted there.
  # If the caller is killed outright (SIGKILL, a CTest timeout), no trap runs:
  # the parent-death signal ends unshare, and --kill-child its child, the
  # node's first process, and with it the node.
  setsid sh -c 'for cg in $1; do echo $$ > "$cg/cgroup.procs"; done; shift; exec "$@"' sh "$cgs" \
    setpriv --pdeathsig KILL \
    unshare --kill-child=KILL -n -m -u -i -p -C -f --mount-proc "$CLUSTER_SRC/node-init.sh" "$node" "$d/hosts" "$d/$node.ready" \
    > "$d/log/$node-init.log" 2>&1 &
  local u=$! i child=""
  disown $u   # not a job of the caller's: a plain `wait` there must not wait for the node
  for i in $(seq 100); do
    [ -e "$d/$node.ready" ] && child=$(cat /proc/$u/task/$u/children 2>/dev/null) && [ -n "$child" ] && break
    kill -0 $u 2>/dev/null || break
    sleep 0.1
  done
  if [ ! -e "$d/$node.ready" ] || [ -z "$child" ]; then
    cluster_fail "$node did not start: $(cat "$d/log/$node-init.log")"
    return 1
  fi
  echo "${child%% *}" > "$d/$node.pid"
}

# Waits until CMD succeeds (at most CLUSTER_TIMEOUT s); WHAT names it in the failure.
wait_for() {
  local what=$1 i; shift
  for i in $(seq $((CLUSTER_TIMEOUT * 5))); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  cluster_fail "$what: not ready after ${CLUSTER_TIMEOUT} s"
}

start_daemons() {
  local node=$1 d=$CLUSTER_DIR
  on "$node" sh -c 'mkdir -p /run/munge /run/slurm/d /run/slurm/ctld && chown munge:munge /run/munge'
  # munged runs as munge and refuses files others may write: a directory of its own.
  mkdir -p "$d/munge-$node" && chown munge:munge "$d/munge-$node" && chmod 700 "$d/munge-$node"
  on "$node" runuser -u munge -- /usr/sbin/munged --log-file="$d/munge-$node/munged.log" \
    --seed-file="$d/munge-$node/munged.seed" --pid-file=/run/munge/munged.pid ||
    { cluster_fail "munged did not start on $node: $(tail -3 "$d/munge-$node/munged.log" 2>&1)"; return 1; }
  wait_for "munged on $node" on "$node" munge -n
}

# cluster_up: everything, or a message and a non-zero status (77: this
# machine cannot run it).  The caller must have set its trap to cluster_down.
cluster_up() {
  local rc
  cluster_requirements; rc=$?
  [ $rc -eq 0 ] || return $rc
  [ -n "${CLUSTER_DIR:-}" ] && [ -d "$CLUSTER_DIR" ] || { cluster_log "CLUSTER_DIR is not a directory"; return 1; }
  CLUSTER_DIR=$(cd "$CLUSTER_DIR" && pwd)
  mkdir -p "$CLUSTER_DIR/log"
  write_config
  sweep_cgroups
  local n
  for n in $CLUSTER_NODES; do start_node "$n" || return 1; done
  # The veth pair is created with each end already in its node: no moment
  # where an end is in the caller's namespace.
  ip link add eth0 netns "$(node_pid node1)" type veth peer name eth0 netns "$(node_pid node2)" ||
    { cluster_fail "cannot create the veth pair between the nodes"; return 1; }
  on node1 ip addr add $CLUSTER_NET.1/24 dev eth0 && on node1 ip link set eth0 up &&
  on node2 ip addr add $CLUSTER_NET.2/24 dev eth0 && on node2 ip link set eth0 up ||
    { cluster_fail "cannot configure the veth pair"; return 1; }
  # Up means up on both ends (the carrier too): an MPI library that lists its
  # network devices at once (MPICH's UCX) otherwise found only lo.
  local t
  for n in $CLUSTER_NODES; do
    for t in $(seq 100); do
      [ "$(on "$n" cat /sys/class/net/eth0/operstate 2>/dev/null)" = up ] && break
      sleep 0.1
    done
  done
  for n in $CLUSTER_NODES; do start_daemons "$n" || return 1; done
  for n in $CLUSTER_NODES; do
    setsid setpriv --pdeathsig KILL python3 "$CLUSTER_SRC/launch.py" serve "$CLUSTER_DIR" "$n" > "$CLUSTER_DIR/log/launch-$n.log" 2>&1 &
    echo $! > "$CLUSTER_DIR/$n.helper"
    disown $!   # its end at teardown is no news
    wait_for "launch helper on $n" on "$n" test -S /run/strata-launch.sock || return 1
  done
  on node1 slurmctld -f "$CLUSTER_DIR/slurm.conf" ||
    { cluster_fail "slurmctld did not start: $(tail -5 "$CLUSTER_DIR/log/slurmctld.log")"; return 1; }
  for n in $CLUSTER_NODES; do
    on "$n" slurmd -f "$CLUSTER_DIR/slurm.conf" ||
      { cluster_fail "slurmd did not start on $n: $(tail -5 "$CLUSTER_DIR/log/slurmd-$n.log")"; return 1; }
  done
  wait_for "both nodes idle in Slurm" cluster_idle || { sinfo_dump; return 1; }
}

cluster_idle() { [ "$(on node1 sinfo -h -N -o '%N %t' | grep -c ' idle$')" -eq 2 ]; }
sinfo_dump() { on node1 sinfo -N -l >&2; on node1 scontrol show nodes | grep -E 'NodeName|Reason' >&2; }

# cluster_down: kills both nodes (all their processes go with their pid 1),
# removes the cgroups (deepest first) and the directory.  Safe to call twice,
# and on a half-built cluster.
cluster_down() {
  [ -n "${CLUSTER_DIR:-}" ] && [ -d "$CLUSTER_DIR" ] || return 0
  local n p cg i
  for n in $CLUSTER_NODES; do
    p=$(cat "$CLUSTER_DIR/$n.pid" 2>/dev/null) || continue
    kill -KILL "$p" 2>/dev/null
    # the launch helper and the handlers it forked: one process group
    p=$(cat "$CLUSTER_DIR/$n.helper" 2>/dev/null) && kill -KILL -- "-$p" 2>/dev/null
  done
  if [ -f "$CLUSTER_DIR/cgroups" ]; then
    while read -r cg; do
      for i in $(seq 50); do
        # the kernel empties a cgroup a little after its processes die
        find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null
        [ -d "$cg" ] || break
        sleep 0.1
      done
      [ -d "$cg" ] && cluster_log "could not remove cgroup $cg"
    done < "$CLUSTER_DIR/cgroups"
  fi
  [ -n "${CLUSTER_KEEP:-}" ] || rm -rf "$CLUSTER_DIR"
}
