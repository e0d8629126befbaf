/* kmeans_mpi.c — k-means as a hybrid MPI + OpenMP program.
 *
 * Rank r generates only its slice of the points (the generator is
 * counter-based, so no rank needs the others' data), runs the MapReduce
 * runtime on it with OpenMP threads, and MPI_Allreduce sums the per-cluster
 * sums of all ranks after every round.  Rank 0 then generates all the points
 * and runs the serial reference to check the result.
 * Run: mpirun -np 2 kmeans_mpi [same options as kmeans]
 */
#include "kmeans_app.h"
#include "mr_mpi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void sum_over_ranks(double *sums, size_t len, void *arg)
{
    (void)arg;
    MPI_Allreduce(MPI_IN_PLACE, sums, (int)len, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    int rank, size;
    mr_mpi_init(&argc, &argv, &rank, &size);
    km_params p;
    km_parse(&p, argc, argv);
    size_t cells = (size_t)p.k * (size_t)p.dim, row_cells = (size_t)p.k * ((size_t)p.dim + 1);
    size_t lo = p.n * (size_t)rank / (size_t)size, hi = p.n * ((size_t)rank + 1) / (size_t)size;

    double *centres = km_true_centres(&p);
    double *pts = malloc(((hi - lo) ? hi - lo : 1) * (size_t)p.dim * sizeof *pts);
    double *cent = malloc(cells * sizeof *cent);
    double *sums = malloc(row_cells * sizeof *sums);
    mr_runtime *rt = mr_create(mr_mpi_threads(p.threads));
    if (!centres || !pts || !cent || !sums || !rt) {
        mr_check_failed("rank %d: setup failed", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    km_points(&p, centres, lo, hi, pts);
    km_initial(&p, centres, cent);

    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = mr_now();
    int rc = km_run(rt, &p, pts, hi - lo, cent, sums, sum_over_ranks, NULL);
    double t1 = mr_now();
    if (rc != 0) {
        mr_check_failed("rank %d: runtime failed: %s", rank, strerror(rc));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    mr_mpi_metrics(rt, rank, size, p.iters, t1 - t0);

    int failed = 0;
    if (rank == 0) {
        double *all = malloc(p.n * (size_t)p.dim * sizeof *all);
        double *ref = malloc(cells * sizeof *ref);
        double *ref_sums = malloc(row_cells * sizeof *ref_sums);
        if (!all || !ref || !ref_sums) {
            mr_check_failed("reference: out of memory");
            failed = 1;
        } else {
            km_points(&p, centres, 0, p.n, all);
            km_initial(&p, centres, ref);
            double t2 = mr_now();
            km_serial(&p, all, ref, ref_sums);
            mr_metric("serial_seconds", mr_now() - t2);
            if (p.corrupt)
                cent[0] += 1.0;
            failed = km_check(&p, centres, cent, sums, ref);
        }
        free(ref_sums);
        free(ref);
        free(all);
    }
    mr_destroy(rt);
    free(sums);
    free(cent);
    free(pts);
    free(centres);
    return mr_mpi_finish(failed);
}
