# sb_mpi_setup.sh — sourced by the MPI tests (sb_mpi.sh, sb_mpi_patterns.sh)
# with flavor, app and mpilib set: picks the launcher for 4 ranks ($run),
# skips (77) when the flavor is not built, makes a backing directory ($d)
# and a group name ($group) that are removed at exit.
case $flavor in
  openmpi) run="mpirun.openmpi --allow-run-as-root --oversubscribe -np 4" ;;
  mpich) run="mpirun.mpich -np 4" ;;
esac
[ -x "$app" ] && [ -f "$mpilib" ] || { echo "SKIP: $flavor not built (no MPI compiler)"; exit 77; }
d=$(mktemp -d) || exit 1
group=sbmpi-$$
trap 'rm -rf "$d"; rm -f /dev/shm/strata-sb-$group' EXIT
