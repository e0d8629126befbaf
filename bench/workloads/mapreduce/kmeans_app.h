/* kmeans_app.h — k-means on the MapReduce runtime, shared by the
 * shared-memory program (kmeans.c) and the MPI + OpenMP one (kmeans_mpi.c).
 *
 * Data: n points in dim dimensions; point i belongs to cluster i % k and is
 * that cluster's true centre plus unit Gaussian noise.  True centres are
 * drawn at least KM_SEPARATION apart, so a correct run recovers them and
 * assigns every point to its own cluster.  Each round maps points to their
 * nearest centroid (key = centroid, value = coordinates + a count of 1, summed
 * by the combiner) and the sums give the next centroids.
 */
#ifndef KMEANS_APP_H
#define KMEANS_APP_H

#include "mr.h"

#include <stddef.h>
#include <stdint.h>

#define KM_MAX_DIM 32
#define KM_SEPARATION 20.0   /* in units of the noise's standard deviation */
#define KM_INIT_OFFSET 4.0   /* initial centroids are this far from the true ones */

typedef struct km_params {
    size_t n;
    int dim;
    int k;
    int iters;
    uint64_t seed;
    size_t chunk;      /* points per map task */
    int threads;       /* <= 0: default */
    int corrupt;       /* test hook: falsify the result so the check must fail */
} km_params;

/* Fills defaults, then parses -n -d -k -i -s -c -t and --corrupt; prints usage
 * and exits on a bad option. */
void km_parse(km_params *p, int argc, char **argv);

/* k*dim true centres (malloc'd), or NULL. */
double *km_true_centres(const km_params *p);
/* Points begin .. end-1, row-major, into out ((end-begin)*dim doubles). */
void km_points(const km_params *p, const double *centres, size_t begin, size_t end, double *out);
/* The k initial centroids, each KM_INIT_OFFSET from its true centre. */
void km_initial(const km_params *p, const double *centres, double *cent);

/* Called after each round with the local sums (k rows of dim sums and a
 * count); the MPI program sums them over the ranks here. */
typedef void (*km_merge_fn)(double *sums, size_t len, void *arg);

/* Runs p->iters rounds from the centroids in cent (updated in place) over
 * npts points; sums receives the last round's sums (k*(dim+1) doubles).
 * Returns 0 or an errno. */
int km_run(mr_runtime *rt, const km_params *p, const double *pts, size_t npts,
           double *cent, double *sums, km_merge_fn merge, void *merge_arg);

/* The same iterations, serially and without the runtime: the reference. */
void km_serial(const km_params *p, const double *pts, double *cent, double *sums);

/* Checks cent (and the last round's sums) against the true centres, the
 * exact cluster sizes and, when ref is not NULL, the serial reference's
 * centroids.  Prints `check ok` or `check FAILED: ...`; returns 0 if ok. */
int km_check(const km_params *p, const double *centres, const double *cent,
             const double *sums, const double *ref);

#endif /* KMEANS_APP_H */
