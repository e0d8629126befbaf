#!/bin/bash
# cluster-test.sh — Strata on a two-node Slurm cluster built on this machine
# (cluster.sh): brings the cluster up, runs the named checks, tears it down
# (also on failure, Ctrl-C or a kill).
#
# usage: cluster-test.sh BUILD_DIR CHECK...     (all: every check below)
#   mpi_openmpi mpi_mpich  srun -N2 -n4 and mpirun across both nodes, under
#                          Strata and the PMPI library: glibc's result
#   limit                  srun --mem: every rank's cgroup limit, Strata's
#                          auto budget from it, caches capped (waves), and a
#                          rank filling memory stops where glibc's does
#   group                  storage groups: each node's ranks within that
#                          node's budget + 5 % (from /proc), one table per node
#   transfer               channel and single copy within a node, refused
#                          with their error across nodes
#   kill                   a rank killed on one node: the job ends, bounded
#   release                a rank blocked in MPI_Recv on the other node gives
#                          back its storage-backed memory, as on one node
#   faults                 a node's slurmd dead: a clear error, bounded
#   prereqs                missing packages, no root, namespaces refused: a
#                          clear message and 77
#   teardown               Ctrl-C while the cluster runs leaves nothing behind
# Exit: 0 all passed, 1 a check failed, 77 this machine cannot run the
# cluster (the reason on stderr).  The Slurm and MPI command lines come from
# docs/mpi.md and docs/storage.md (the blocks marked "cluster-test: NAME"),
# so the documentation shows what runs here.
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
[ $# -ge 2 ] || { echo "usage: $0 BUILD_DIR CHECK... (or all)" >&2; exit 2; }
B=$(cd "$1" && pwd) || exit 2
shift
checks="$*"
[ "$checks" = all ] && checks="prereqs mpi_openmpi mpi_mpich limit group transfer kill release faults teardown"

. "$here/cluster.sh"

# Site settings a real cluster also needs (docs/mpi.md, "running on a real
# cluster"): Open MPI's TCP traffic on the cluster's network, root allowed,
# and the launchers' stand-in for ssh.
export OMPI_MCA_btl_tcp_if_include=$CLUSTER_NET.0/24 OMPI_MCA_oob_tcp_if_include=$CLUSTER_NET.0/24
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_plm_rsh_agent=$here/launch-agent HYDRA_LAUNCHER=ssh HYDRA_LAUNCHER_EXEC=$here/launch-agent HYDRA_IFACE=eth0
export B

failed=""
fail() { echo "FAIL: $current: $*"; failed="$failed $current"; }
note() { echo "  $current: $*"; }

# doc_block FILE NAME: the shell block after "<!-- cluster-test: NAME -->".
doc_block() {
  awk -v want="<!-- cluster-test: $2 -->" '
    $0 == want { armed = 1; next }
    armed && /^```/ { if (inside) exit; inside = 1; next }
    inside { print }' "$src/docs/$1"
}

# job DIR ARGS...: a job directory whose ./app runs the test program with
# ARGS (the documented commands say ./app).  FLAVOR picks the MPI build.
jobn=0
new_job() {
  local flavor=$1; shift
  jobn=$((jobn + 1))
  job=$CLUSTER_DIR/job$jobn
  mkdir -p "$job"
  printf '#!/bin/sh\nexec %s %s\n' "$B/tests/cluster/cluster-app-$flavor" "$*" > "$job/app"
  chmod +x "$job/app"
}

# run_doc FILE NAME SECONDS SALLOC_OPTS...: runs a documented block inside
# an allocation of two nodes (SALLOC_OPTS '-': without one) (salloc sets SLURM_JOB_ID, which the blocks
# use), in $job, on node1; output in $job/out, status returned.
run_doc() {
  local file=$1 name=$2 secs=$3 block; shift 3
  block=$(doc_block "$file" "$name")
  [ -n "$block" ] || { fail "docs/$file has no block marked cluster-test: $name"; return 1; }
  if [ "$1" = - ]; then   # no allocation: mpirun started over the launch agent
    in_background on node1 timeout -k 15 "$secs" bash -c "cd '$job' && $block" > "$job/out" 2>&1
  else
    in_background on node1 timeout -k 15 "$secs" salloc -Q -N2 "$@" bash -c "cd '$job' && $block" > "$job/out" 2>&1
  fi
}

# Runs a command in the background and waits for it: bash runs a trap (Ctrl-C)
# at once during `wait`, but only after a foreground command has ended.
in_background() { "$@" & wait $!; }

# run_plain SECONDS CMD...: a command on node1, in $job, output in $job/out.
run_plain() {
  local secs=$1; shift
  in_background on node1 timeout -k 15 "$secs" bash -c "cd '$job' && $*" > "$job/out" 2>&1
}

# expect N REGEX WHAT: exactly N lines of the job's output match, or WHAT failed.
expect() { [ "$(count "$2")" -eq "$1" ] || { fail "$3"; show 30; }; }
# show [LINES]: the tail of a job's output, and first any crash
# report in it (Open MPI prints a backtrace for a rank that faults; the
# tail alone showed only srun's "Segmentation fault").
show() {
  grep -E -A25 'Process received signal' "$job/out" | head -40 | sed 's/^/    ! /'
  sed 's/^/    | /' "$job/out" | tail -${1:-15}
}
count() { grep -c -E "$1" "$job/out"; }
result_of() { sed -n 's/^result //p' "$job/out"; }

# finalize_hang STATUS: the run was cut short (timeout) after all 4 ranks
# and rank 0 had printed: MPI_Finalize hung (MPICH over UCX's TCP, above).
finalize_hang() {
  { [ "$1" -eq 124 ] || [ "$1" -eq 137 ]; } && [ "$(count '^rank [0-3] host ')" -eq 4 ] && [ -n "$(result_of)" ] || return 1
  note "MPI_Finalize did not return within the limit (all ranks had printed): the UCX TCP hang, cut short"
}

# --- 1. the same result under glibc and under Strata, srun and mpirun ---
check_mpi() {
  local flavor=$1 pmi plain rc
  case $flavor in openmpi) pmi=pmix ;; mpich) pmi=pmi2 ;; esac
  [ -x "$B/tests/cluster/cluster-app-$flavor" ] && [ -f "$B/$flavor/libstrata-mpi.so" ] ||
    { fail "not built for $flavor (no mpicc.$flavor?)"; return; }
  new_job "$flavor" ring 8
  # MPICH's UCX (1.13) hangs in MPI_Finalize across nodes over TCP in most
  # runs, under glibc as well (a UCX bug: TCP endpoints stop being progressed
  # while they are flushed at close; docs/notes/cluster.md): its runs are cut
  # short, and a run that printed every rank's line and the result counts,
  # the hang noted.
  local limit=120 try; [ $flavor = mpich ] && limit=30
  # MPICH's UCX gave up at once ("Destination is unreachable", only lo seen)
  # in runs started right after the cluster came up: tried again, at most
  # twice, 5 s apart, when it failed within 10 s.
  for try in 1 2 3; do
    local t0=$SECONDS
    run_plain $limit srun --mpi=$pmi -N2 -n4 ./app; rc=$?
    [ $rc -ne 0 ] && [ $flavor = mpich ] && [ $((SECONDS - t0)) -lt 10 ] && [ $try -lt 3 ] &&
      grep -q "Destination is unreachable" "$job/out" || break
    note "srun under glibc: UCX found no transport (try $try), again in 5 s"
    sleep 5
  done
  [ $rc -eq 0 ] || finalize_hang $rc || { fail "srun under glibc failed"; show; return; }
  plain=$(result_of)
  [ -n "$plain" ] && [ "$(count 'strata=0')" -eq 4 ] || { fail "glibc run: no result or not 4 ranks"; show; return; }
  local how rc
  for how in slurm mpirun; do
    local alloc=-n4; [ $how = mpirun ] && alloc=-
    run_doc mpi.md "$how-$flavor" $limit $alloc; rc=$?
    if [ $rc -ne 0 ] && ! finalize_hang $rc; then fail "$how under Strata failed (status $rc)"; show; continue; fi
    local r; r=$(result_of)
    [ "$r" = "$plain" ] || { fail "$how: result '$r' under Strata, '$plain' under glibc"; show; continue; }
    [ "$(count 'host node1 strata=1')" -eq 2 ] && [ "$(count 'host node2 strata=1')" -eq 2 ] ||
      { fail "$how: not 2 ranks per node, each on Strata"; show; continue; }
    note "$how: result $r on 4 ranks (2 per node), as under glibc"
  done
}

# --- 2. the job's memory cgroup: read, followed, and not given away early ---
check_limit() {
  local mem=256 limit
  limit=$((mem << 20))
  new_job openmpi limit
  export STRATA_SB_DIR=/tmp STRATA_SB_BUDGET=auto STRATA_VERBOSE=1
  run_doc mpi.md slurm-mem 120 -n4 --mem=${mem}M || { fail "srun --mem failed"; show; }
  unset STRATA_SB_DIR STRATA_SB_BUDGET STRATA_VERBOSE
  local want=$((limit - limit / 4))   # Strata's auto budget below 512 MiB: a quarter of headroom
  if [ "$(count "cgroup_limit=$limit sb_budget=$want\$")" -eq 4 ] &&
     [ "$(count "^strata: memory limit $limit bytes,")" -ge 4 ] &&   # (every process of a rank says it)
     [ "$(count "^strata: memory limit ")" -eq "$(count "^strata: memory limit $limit bytes,")" ]; then
    note "4 ranks on 2 nodes read the cgroup limit $limit (STRATA_VERBOSE says so), Strata's auto budget $want"
  else
    fail "not every rank saw cgroup_limit=$limit (STRATA_VERBOSE's 'memory limit' line) and sb_budget=$want"
    grep -E "memory limit|cgroup_limit" "$job/out" | sed 's/^/    | /'; show
  fi

  # Caches capped by the limit: waves of 1 MiB and 64 KiB blocks that glibc
  # survives in this cgroup must not get Strata killed.
  local peak_glibc peak_strata
  new_job openmpi waves 160 3
  run_plain 180 srun --mpi=pmix -N2 -n2 --mem=${mem}M ./app || { fail "waves under glibc failed: the test's sizes are wrong"; show; }
  peak_glibc=$(sed -n 's/.*peak_rss_kib=//p' "$job/out" | sort -n | tail -1)
  run_plain 180 srun --mpi=pmix -N2 -n2 --mem=${mem}M --export=ALL,LD_PRELOAD=$B/libstrata.so ./app ||
    { fail "waves under Strata failed (killed at the cgroup limit?)"; show; }
  peak_strata=$(sed -n 's/.*peak_rss_kib=//p' "$job/out" | sort -n | tail -1)
  if [ -n "$peak_glibc" ] && [ -n "$peak_strata" ]; then
    note "waves of 160 MiB in ${mem} MiB: peak RSS glibc ${peak_glibc} KiB, Strata ${peak_strata} KiB"
    # What Strata keeps for reuse stays within a share of the headroom
    # (docs/limits.md): 1.01 x glibc here; 1.12 x with the limit overridden
    # (STRATA_MEMORY_LIMIT=100g), which this bound catches.
    [ "$peak_strata" -le $((peak_glibc * 106 / 100)) ] ||
      fail "waves: Strata's peak RSS $peak_strata KiB is over 1.06 x glibc's $peak_glibc KiB"
  fi

  # A rank that allocates past the limit ends where glibc's does, not earlier.
  local n_glibc n_strata lib
  for lib in glibc strata; do
    new_job openmpi fill
    if [ $lib = glibc ]; then run_plain 120 srun --mpi=pmix -N1 -n1 --mem=128M ./app
    else run_plain 120 srun --mpi=pmix -N1 -n1 --mem=128M --export=ALL,LD_PRELOAD=$B/libstrata.so ./app; fi
    local rc=$? n; n=$(sed -n 's/.*filled \([0-9]*\)$/\1/p' "$job/out" | tail -1)
    [ $rc -ne 124 ] && [ $rc -ne 137 ] || { fail "$lib: fill did not end (timeout)"; show; return; }
    grep -q -E 'oom|enomem|Killed|out of memory|Out Of Memory' "$job/out" ||
      { fail "$lib: fill ended (status $rc) without ENOMEM or an OOM kill"; show; return; }
    eval "n_$lib=${n:-0}"
    note "$lib: filled ${n:-0} MiB of 128, then: $(grep -m1 -o -i -E 'enomem.*|[^ ]*oom[^.]*|out of memory.*' "$job/out")"
  done
  # 2 MiB of slack: Strata's own metadata and the first segment.
  [ "$n_strata" -ge $((n_glibc - 2)) ] || fail "Strata stopped at $n_strata MiB, glibc at $n_glibc: earlier"
}

# --- 3. storage groups: one budget per node, held on each node ---
check_group() {
  local budget=$((16 << 20)) n
  new_job openmpi group 24 4 "$CLUSTER_DIR/job$((jobn + 1))"
  local samplers=""
  for n in $CLUSTER_NODES; do
    on "$n" python3 "$here/sampler.py" "$job" "$n" > "$job/sampler.$n" 2>&1 &
    samplers="$samplers $!"
  done
  # Under load a sampler may start after a short job has ended.
  local i
  for i in $(seq 300); do
    [ -e "$job/sampler-ready.node1" ] && [ -e "$job/sampler-ready.node2" ] && break
    sleep 0.1
  done
  run_doc storage.md slurm-group 180 -n4; local rc=$?
  touch "$job/stop"; wait $samplers
  [ $rc -eq 0 ] || { fail "the storage-backed job failed (status $rc)"; show; return; }
  local id; id=$(sed -n 's/.* job=\([0-9]*\).*/\1/p' "$job/out" | head -1)
  [ "$(count "members=2 group_budget=$budget ")" -eq 4 ] ||
    { fail "not every rank in a group of 2 members with budget $budget (one table per node)"; show; }
  for n in $CLUSTER_NODES; do
    local line max samples ranks
    line=$(cat "$job/sampler.$n")
    max=$(echo "$line" | sed -n 's/.*max_resident=\([0-9]*\).*/\1/p')
    samples=$(echo "$line" | sed -n 's/.*samples=\([0-9]*\).*/\1/p')
    ranks=$(echo "$line" | sed -n 's/.*ranks=\([0-9]*\).*/\1/p')
    [ -n "$max" ] && [ "${ranks:-0}" -eq 2 ] && [ "${samples:-0}" -ge 5 ] ||
      { fail "$n: the sampler saw too little ($line)"; continue; }
    [ "$max" -le $((budget + budget / 20)) ] ||
      { fail "$n: its ranks held $max bytes of storage-backed data, over the node budget $budget + 5 %"
        grep -E "members=" "$job/out" | sed 's/^/    | /'; }
    note "$n: at most $max of its ranks' 48 MiB resident at once ($samples samples from /proc/PID/pagemap), budget $budget"
    on "$n" test -e "/dev/shm/strata-sb-job$id" || fail "$n: no group table /dev/shm/strata-sb-job$id on the node"
  done
  [ ! -e "/dev/shm/strata-sb-job$id" ] || fail "a group table in this machine's /dev/shm: the nodes share it"
}

# --- 4. transfers: within a node, and refused across nodes ---
check_transfer() {
  new_job openmpi transfer
  run_plain 120 srun --mpi=pmix -N2 -n4 --export=ALL,LD_PRELOAD=$B/libstrata.so,STRATA_CHAN_TIMEOUT_MS=3000 ./app ||
    { fail "the transfer job failed"; show 30; return; }
  # 4 ranks: each has 1 partner on its node and 2 on the other.
  expect 4 'cma peer=[0-9] same_node=1 moved=4194304 errno=0 got_peer_data=1' \
    "single copy within a node did not move the peer's data"
  expect 8 'cma peer=[0-9] same_node=0 .*got_peer_data=0' "single copy across nodes returned the peer's data"
  expect 8 'cma peer=[0-9] same_node=0 moved=-1 errno=(3|1|14) .*msg="strata: ' \
    "single copy across nodes not refused with ESRCH/EPERM/EFAULT and a message"
  expect 2 'chan peer=[0-9] same_node=1 role=send rc=0 errno=0 cma_sent=[1-9]' \
    "a channel within a node did not send 4 MiB by single copy"
  expect 2 'chan peer=[0-9] same_node=1 role=open opened=1 errno=0 received_ok=1' \
    "a channel within a node did not deliver 4 MiB"
  expect 4 'chan peer=[0-9] same_node=0 role=open opened=0 errno=110 .*nobody created it' \
    "opening a channel across nodes did not time out with 'nobody created it'"
  expect 4 'chan peer=[0-9] same_node=0 role=send rc=(-1|110|32) errno=(110|32) .*msg="strata: ' \
    "sending on a channel nobody opened (other node) did not fail with a message"
  note "within a node: single copy and the channel (by single copy); across: $(grep -m1 -o 'same_node=0 moved=-1 errno=[0-9]* got_peer_data=0 msg="[^"]*"' "$job/out")"
  note "across nodes, channel: $(grep -m1 -o 'role=open opened=0 .*' "$job/out")"
}

# --- 4b. a rank killed on one node: the job ends within a bounded time ---
check_kill() {
  new_job openmpi spin "$CLUSTER_DIR/job$((jobn + 1))"
  local block; block=$(doc_block storage.md slurm-group)
  [ -n "$block" ] || { fail "docs/storage.md has no slurm-group block"; return; }
  on node1 timeout -k 15 150 salloc -Q -N2 -n4 bash -c "cd '$job' && $block" > "$job/out" 2>&1 &
  local job_pid=$! i pid=""
  for i in $(seq 600); do
    [ "$(count spinning)" -eq 4 ] && pid=$(cat "$job"/pid.2.node2 2>/dev/null) && break
    kill -0 $job_pid 2>/dev/null || break
    sleep 0.1
  done
  [ -n "$pid" ] || { fail "the job did not start 4 ranks"; show; kill $job_pid; wait; return; }
  on node2 kill -KILL "$pid"
  local t0=$SECONDS rc
  wait $job_pid; rc=$?
  local took=$((SECONDS - t0))
  [ $rc -ne 0 ] || fail "the job succeeded although rank 2 was killed"
  [ $rc -ne 124 ] && [ $rc -ne 137 ] || { fail "the job did not end within 150 s of the kill"; show; return; }
  local left=0 f n
  for f in "$job"/pid.*; do
    n=${f##*.}
    on "$n" kill -0 "$(cat "$f")" 2>/dev/null && left=$((left + 1))
  done
  [ $left -eq 0 ] || fail "$left rank(s) still running after the job ended"
  note "rank 2 (node2) killed: srun ended in $took s with status $rc: $(grep -m1 -E 'error|Killed|killed' "$job/out")"
}

# --- 5. release-on-block across nodes, as on one node ---
check_release() {
  local nodes preload ok=1 r
  for nodes in 2 1; do
    for preload in with without; do
      new_job openmpi block 6
      local lib="$B/libstrata.so $B/openmpi/libstrata-mpi.so"
      [ $preload = without ] && lib=$B/libstrata.so
      local over=""; [ $nodes = 1 ] && over=-O   # 4 ranks on a node of 2 CPUs
      run_plain 120 srun --mpi=pmix -N$nodes -n4 $over "'--export=ALL,LD_PRELOAD=$lib,STRATA_SB_DIR=/tmp,STRATA_SB_BUDGET=32M,STRATA_SB_GROUP=block$jobn'" ./app ||
        { fail "block job (-N$nodes) failed"; show; ok=0; continue; }
      local released=0 lines
      lines=$(grep 'blocked_on=' "$job/out")
      while read -r r; do
        local b a
        b=$(echo "$r" | sed -n 's/.*resident_before=\([0-9]*\).*/\1/p')
        a=$(echo "$r" | sed -n 's/.*resident_after=\([0-9]*\).*/\1/p')
        [ -n "$b" ] && [ "$b" -ge $((4 << 20)) ] && [ "$a" -le $((b / 4)) ] && released=$((released + 1))
      done <<< "$lines"
      note "-N$nodes, PMPI library $preload: $(echo "$lines" | sed 's/.*\(host [^ ]*\) \(.*\)/\1 \2/' | tr '\n' ';')"
      if [ $preload = with ] && [ $released -ne 2 ]; then
        fail "-N$nodes: a rank blocked in MPI_Recv kept its storage-backed memory"; show
      fi
      # Without the PMPI library nothing releases: the check can tell.
      if [ $preload = without ] && [ $released -ne 0 ]; then
        fail "-N$nodes: memory released without the PMPI library: the check cannot tell"; show
      fi
    done
  done
  return 0
}

# --- faults: a node's slurmd dead ---
check_faults() {
  new_job openmpi ring 1
  on node2 sh -c 'kill -KILL $(cat /run/slurm/slurmd.pid)'
  local t0=$SECONDS rc
  run_plain 150 srun -N2 -n2 hostname; rc=$?
  [ $rc -ne 0 ] || { fail "srun on two nodes succeeded with node2's slurmd dead"; show; return; }
  [ $rc -ne 124 ] && [ $rc -ne 137 ] || { fail "srun did not end within 150 s with node2's slurmd dead"; show; return; }
  grep -q node2 "$job/out" || { fail "srun's error does not name node2"; show; return; }
  note "slurmd of node2 dead: srun ended after $((SECONDS - t0)) s, status $rc: $(grep -m1 node2 "$job/out")"
}

# --- the harness itself: missing packages, not root ---
check_prereqs() {
  local out rc
  out=$(PATH=/usr/bin:/bin bash -c ". '$here/cluster.sh'; cluster_requirements" 2>&1); rc=$?
  [ $rc -eq 77 ] && echo "$out" | grep -q 'missing:.*slurmd.*install' ||
    fail "no slurmd in PATH: status $rc, '$out'"
  note "without /usr/sbin in PATH: $out"
  out=$(setpriv --reuid=65534 --regid=65534 --clear-groups bash -c ". '$here/cluster.sh'; cluster_requirements" 2>&1); rc=$?
  [ $rc -eq 77 ] && echo "$out" | grep -q 'needs root' || fail "as nobody: status $rc, '$out'"
  note "as nobody: $out"
  # Namespaces refused (a container without CAP_SYS_ADMIN, a seccomp profile):
  # an unshare that fails as the kernel's refusal makes it fail.
  local fake; fake=$(mktemp -d)
  printf '#!/bin/sh\necho "unshare: unshare failed: Operation not permitted" >&2\nexit 1\n' > "$fake/unshare"
  chmod +x "$fake/unshare"
  out=$(PATH=$fake:$PATH bash -c ". '$here/cluster.sh'; cluster_requirements" 2>&1); rc=$?
  rm -rf "$fake"
  [ $rc -eq 77 ] && echo "$out" | grep -q 'namespaces refused.*Operation not permitted' ||
    fail "unshare refused: status $rc, '$out'"
  note "unshare refused: $out"
}

# --- the harness itself: Ctrl-C tears the cluster down ---
check_teardown() {
  local d=$CLUSTER_DIR.int out before=$failed
  mkdir -p "$d"
  out=$d.out
  # A background command of a script starts with SIGINT ignored (and a
  # script cannot trap a signal ignored at its start): python gives the inner
  # run the default back, as a terminal's foreground job has it.
  CLUSTER_DIR=$d python3 -c 'import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.setsid()
os.execv(sys.argv[1], sys.argv[1:])' "$0" "$B" hold > "$out" 2>&1 &
  local p=$! i
  for i in $(seq 300); do grep -q holding "$out" && break; kill -0 $p 2>/dev/null || break; sleep 0.1; done
  grep -q holding "$out" || { fail "the inner cluster did not come up: $(cat "$out")"; kill -KILL -- -$p; return; }
  local pids cgs; pids=$(cat "$d"/*.pid) cgs=$(cat "$d/cgroups")
  kill -INT -- -$p   # Ctrl-C reaches the whole foreground process group
  for i in $(seq 300); do kill -0 $p 2>/dev/null || break; sleep 0.1; done
  kill -0 $p 2>/dev/null && { fail "still running 30 s after Ctrl-C"; kill -KILL -- -$p; }
  for i in $pids; do kill -0 "$i" 2>/dev/null && fail "node process $i survived Ctrl-C"; done
  for i in $cgs; do [ -d "$i" ] && fail "cgroup $i left behind"; done
  [ -d "$d" ] && fail "cluster directory $d left behind"
  if [ "$failed" = "$before" ]; then
    note "Ctrl-C: nodes, cgroups and directory gone"
  else
    echo "    | $(tail -3 "$out")"
    (CLUSTER_DIR=$d; cluster_down)   # what the inner run left
  fi
  rm -f "$out"
}

check_hold() { echo holding; while :; do sleep 1; done; }

on_signal() { trap - EXIT INT TERM; cluster_down; echo "cluster-test: interrupted, cluster torn down" >&2; exit 130; }

if [ "$checks" = prereqs ]; then   # needs no cluster
  current=prereqs; check_prereqs
  [ -z "$failed" ] && { echo "PASS: prereqs"; exit 0; } || exit 1
fi
if [ -z "${CLUSTER_DIR:-}" ]; then
  CLUSTER_DIR=$B/tests/cluster/run.$$
  mkdir -p "$CLUSTER_DIR"
fi
trap cluster_down EXIT
trap on_signal INT TERM
t0=$SECONDS
cluster_up; rc=$?
[ $rc -eq 0 ] || { [ $rc -eq 77 ] && exit 77; echo "FAIL: the cluster did not come up"; exit 1; }
echo "cluster up in $((SECONDS - t0)) s ($CLUSTER_DIR)"
for current in $checks; do
  t1=$SECONDS
  before=$failed
  case $current in
    mpi_openmpi) check_mpi openmpi ;;
    mpi_mpich) check_mpi mpich ;;
    limit|group|transfer|kill|release|faults|prereqs|teardown|hold) check_$current ;;
    *) fail "no such check" ;;
  esac
  [ "$failed" = "$before" ] && echo "PASS: $current ($((SECONDS - t1)) s)"
done
[ -z "$failed" ] || { echo "FAILED:$failed"; exit 1; }
exit 0
