/* strata_mpi.c — libstrata-mpi: the BDMPI execution model on an unmodified
 * MPI, through the standard profiling interface (PMPI).
 *
 * Before a call that may block (receives, waits, probes, barriers and the
 * other blocking collectives, and blocking sends), a rank of a
 * storage-backed group with other members (strata_sb_group_pressure) gives its memory back
 * (strata_sb_release_all) and marks itself idle, so the ranks that can run
 * get the node's memory.
 *
 * Peers read and write message memory by single copy (Open MPI's vader
 * and MPICH's CMA call process_vm_readv), and the kernel does not fault
 * storage-backed pages in for them: a page not resident fails the copy
 * with EFAULT, and the MPI library, which does not expect that, hangs or
 * aborts.  So no such page is ever left evicted under a peer's copy:
 *  - message buffers that are storage-backed are acquired (made resident
 *    and pinned) before MPI sees them, whole, past the budget if it must
 *    (STRATA_SB_OVER: a message may be larger than the budget), and
 *    unpinned when the operation is complete (for nonblocking sends and
 *    receives: when a wait or test completes the request);
 *  - inside every MPI call, this thread's mallocs are ordinary memory
 *    (strata_sb_exempt): the MPI library's own buffers (a collective's
 *    scratch space, reduction buffers, the fragments of a pipeline) are
 *    never storage-backed.
 *
 * Strata's functions are weak references: without libstrata loaded every
 * wrapper is a plain pass-through.  Use:
 *   LD_PRELOAD="libstrata.so libstrata-mpi.so" STRATA_SB_DIR=... STRATA_SB_GROUP=... mpirun ...
 * Built against each MPI found (mpicc: Open MPI and MPICH are not ABI
 * compatible), see mpi/CMakeLists.txt.
 */
#include <mpi.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "strata.h"

#pragma weak strata_sb_owns
#pragma weak strata_sb_acquire
#pragma weak strata_sb_unpin
#pragma weak strata_sb_release_all
#pragma weak strata_sb_group_pressure
#pragma weak strata_sb_idle
#pragma weak strata_sb_exempt

/* ---- buffers ------------------------------------------------------------ */

/* Bytes from buf spanned by count elements of type (0 if not storage-backed). */
static size_t sb_span(const void *buf, int count, MPI_Datatype type) {
    if (!strata_sb_owns || !buf || count <= 0 || buf == MPI_IN_PLACE || !strata_sb_owns(buf)) return 0;
    MPI_Aint lb, extent, tlb, textent;
    if (PMPI_Type_get_extent(type, &lb, &extent) != MPI_SUCCESS ||
        PMPI_Type_get_true_extent(type, &tlb, &textent) != MPI_SUCCESS)
        return 0;
    return (size_t)((MPI_Aint)(count - 1) * extent + textent + tlb);
}

/* Acquires the buffer whole: a peer may copy any part of it while the
 * operation runs, so past the budget if it must. */
static size_t pin(const void *buf, int count, MPI_Datatype type, int mode) {
    size_t len = sb_span(buf, count, type);
    if (len && strata_sb_acquire((void *)buf, len, mode | STRATA_SB_OVER) != 0) len = 0;
    return len;
}

static void unpin(const void *buf, size_t len) {
    if (len) strata_sb_unpin((void *)buf, len);
}

/* Nonblocking operations: their pinned buffers by request, unpinned when
 * a wait or test completes the request.  A full table leaves the buffer
 * pinned until it is freed or released (safe, only less memory to move). */
#define PENDING 4096
static struct {
    MPI_Request req;
    const void *buf;
    size_t len;
} pending[PENDING];
static int pending_count;
static pthread_mutex_t pending_lock = PTHREAD_MUTEX_INITIALIZER;

static void remember(MPI_Request req, const void *buf, size_t len) {
    if (!len) return;
    pthread_mutex_lock(&pending_lock);
    if (pending_count < PENDING) pending[pending_count++] = (typeof(pending[0])){req, buf, len};
    pthread_mutex_unlock(&pending_lock);
}

/* Unpins the buffers of requests that are now MPI_REQUEST_NULL among
 * before[] (what the caller passed) — the ones the call completed. */
static void completed(const MPI_Request *before, const MPI_Request *after, int n) {
    if (!strata_sb_unpin || pending_count == 0) return;
    pthread_mutex_lock(&pending_lock);
    for (int i = 0; i < n; i++) {
        if (before[i] == MPI_REQUEST_NULL || after[i] != MPI_REQUEST_NULL) continue;
        for (int k = 0; k < pending_count; k++)
            if (pending[k].req == before[i]) {
                strata_sb_unpin((void *)pending[k].buf, pending[k].len);
                pending[k] = pending[--pending_count];
                break;
            }
    }
    pthread_mutex_unlock(&pending_lock);
}

/* ---- entering and leaving MPI -------------------------------------------- */

/* Every wrapper: the MPI library's mallocs in the call are ordinary memory. */
static void enter(void) {
    if (strata_sb_exempt) strata_sb_exempt(1);
}

static void leave(void) {
    if (strata_sb_exempt) strata_sb_exempt(0);
}

/* A call that may block. */
static void will_block(void) {
    enter();
    if (!strata_sb_group_pressure) return;
    if (strata_sb_group_pressure()) strata_sb_release_all();
    strata_sb_idle(1);
}

static void woke(void) {
    if (strata_sb_idle) strata_sb_idle(0);
    leave();
}

static int comm_size(MPI_Comm comm) {
    int n = 1;
    PMPI_Comm_size(comm, &n);
    return n;
}

static int comm_rank(MPI_Comm comm) {
    int r = 0;
    PMPI_Comm_rank(comm, &r);
    return r;
}

/* The v-variants: a buffer spans the furthest block. */
static int span_v(const int counts[], const int displs[], MPI_Comm comm) {
    int n = comm_size(comm), end = 0;
    for (int i = 0; i < n; i++)
        if (counts[i] > 0 && displs[i] + counts[i] > end) end = displs[i] + counts[i];
    return end;
}

static int sum_of(const int counts[], MPI_Comm comm) {
    int n = comm_size(comm), sum = 0;
    for (int i = 0; i < n; i++) sum += counts[i] > 0 ? counts[i] : 0;
    return sum;
}

/* A blocking call's buffers: the one it reads and the one it writes
 * (count 0 or NULL: none), pinned for the call. */
typedef struct {
    const void *sbuf, *rbuf;
    size_t ns, nr;
} call_pins;

static call_pins begin(const void *sbuf, int scount, MPI_Datatype stype, const void *rbuf, int rcount,
                       MPI_Datatype rtype) {
    will_block();
    call_pins c = {sbuf, rbuf, 0, 0};
    c.ns = pin(sbuf, scount, stype, STRATA_SB_READ);
    c.nr = pin(rbuf, rcount, rtype, STRATA_SB_WRITE);
    return c;
}

static int end(call_pins c, int rc) {
    unpin(c.sbuf, c.ns);
    unpin(c.rbuf, c.nr);
    woke();
    return rc;
}

/* ---- wrappers ------------------------------------------------------------ */

int MPI_Send(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
    call_pins c = begin(buf, count, type, NULL, 0, MPI_BYTE);
    return end(c, PMPI_Send(buf, count, type, dest, tag, comm));
}

int MPI_Ssend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
    call_pins c = begin(buf, count, type, NULL, 0, MPI_BYTE);
    return end(c, PMPI_Ssend(buf, count, type, dest, tag, comm));
}

int MPI_Recv(void *buf, int count, MPI_Datatype type, int src, int tag, MPI_Comm comm, MPI_Status *st) {
    call_pins c = begin(NULL, 0, MPI_BYTE, buf, count, type);
    return end(c, PMPI_Recv(buf, count, type, src, tag, comm, st));
}

int MPI_Sendrecv(const void *sbuf, int scount, MPI_Datatype stype, int dest, int stag, void *rbuf, int rcount,
                 MPI_Datatype rtype, int src, int rtag, MPI_Comm comm, MPI_Status *st) {
    call_pins c = begin(sbuf, scount, stype, rbuf, rcount, rtype);
    return end(c, PMPI_Sendrecv(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, src, rtag, comm, st));
}

/* A nonblocking operation's buffer stays pinned until it completes. */
static int started(int rc, MPI_Request *req, const void *buf, size_t n) {
    if (rc == MPI_SUCCESS) remember(*req, buf, n);
    else unpin(buf, n);
    leave();
    return rc;
}

int MPI_Isend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *req) {
    enter();
    size_t n = pin(buf, count, type, STRATA_SB_READ);
    return started(PMPI_Isend(buf, count, type, dest, tag, comm, req), req, buf, n);
}

int MPI_Issend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *req) {
    enter();
    size_t n = pin(buf, count, type, STRATA_SB_READ);
    return started(PMPI_Issend(buf, count, type, dest, tag, comm, req), req, buf, n);
}

int MPI_Irecv(void *buf, int count, MPI_Datatype type, int src, int tag, MPI_Comm comm, MPI_Request *req) {
    enter();
    size_t n = pin(buf, count, type, STRATA_SB_WRITE);
    return started(PMPI_Irecv(buf, count, type, src, tag, comm, req), req, buf, n);
}

int MPI_Wait(MPI_Request *req, MPI_Status *st) {
    MPI_Request before = *req;
    will_block();
    int rc = PMPI_Wait(req, st);
    woke();
    completed(&before, req, 1);
    return rc;
}

int MPI_Test(MPI_Request *req, int *flag, MPI_Status *st) {
    MPI_Request before = *req;
    enter();
    int rc = PMPI_Test(req, flag, st);
    leave();
    completed(&before, req, 1);
    return rc;
}

#define MANY 256   /* requests remembered on the stack per wait/test call */

int MPI_Waitall(int n, MPI_Request reqs[], MPI_Status sts[]) {
    MPI_Request before[MANY];
    int k = n < MANY ? n : MANY;
    for (int i = 0; i < k; i++) before[i] = reqs[i];
    will_block();
    int rc = PMPI_Waitall(n, reqs, sts);
    woke();
    completed(before, reqs, k);
    return rc;
}

int MPI_Waitany(int n, MPI_Request reqs[], int *index, MPI_Status *st) {
    MPI_Request before[MANY];
    int k = n < MANY ? n : MANY;
    for (int i = 0; i < k; i++) before[i] = reqs[i];
    will_block();
    int rc = PMPI_Waitany(n, reqs, index, st);
    woke();
    completed(before, reqs, k);
    return rc;
}

int MPI_Waitsome(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status sts[]) {
    MPI_Request before[MANY];
    int k = n < MANY ? n : MANY;
    for (int i = 0; i < k; i++) before[i] = reqs[i];
    will_block();
    int rc = PMPI_Waitsome(n, reqs, outcount, indices, sts);
    woke();
    completed(before, reqs, k);
    return rc;
}

int MPI_Testall(int n, MPI_Request reqs[], int *flag, MPI_Status sts[]) {
    MPI_Request before[MANY];
    int k = n < MANY ? n : MANY;
    for (int i = 0; i < k; i++) before[i] = reqs[i];
    enter();
    int rc = PMPI_Testall(n, reqs, flag, sts);
    leave();
    completed(before, reqs, k);
    return rc;
}

int MPI_Probe(int src, int tag, MPI_Comm comm, MPI_Status *st) {
    will_block();
    int rc = PMPI_Probe(src, tag, comm, st);
    woke();
    return rc;
}

int MPI_Barrier(MPI_Comm comm) {
    will_block();
    int rc = PMPI_Barrier(comm);
    woke();
    return rc;
}

int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
    call_pins c = begin(NULL, 0, MPI_BYTE, buf, count, type);
    return end(c, PMPI_Bcast(buf, count, type, root, comm));
}

int MPI_Reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm) {
    call_pins c = begin(sbuf, count, type, rbuf, comm_rank(comm) == root ? count : 0, type);
    return end(c, PMPI_Reduce(sbuf, rbuf, count, type, op, root, comm));
}

int MPI_Allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
    call_pins c = begin(sbuf, count, type, rbuf, count, type);
    return end(c, PMPI_Allreduce(sbuf, rbuf, count, type, op, comm));
}

/* The all-to-one and one-to-all collectives: each side pins what it
 * passes (the root's buffer only at the root); a buffer of all ranks'
 * blocks spans comm-size of them. */
int MPI_Gather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype, int root,
               MPI_Comm comm) {
    call_pins c = begin(sbuf, scount, stype, rbuf, comm_rank(comm) == root ? rcount * comm_size(comm) : 0, rtype);
    return end(c, PMPI_Gather(sbuf, scount, stype, rbuf, rcount, rtype, root, comm));
}

int MPI_Allgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
                  MPI_Comm comm) {
    call_pins c = begin(sbuf, scount, stype, rbuf, rcount * comm_size(comm), rtype);
    return end(c, PMPI_Allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm));
}

int MPI_Allgatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, const int rcounts[],
                   const int displs[], MPI_Datatype rtype, MPI_Comm comm) {
    call_pins c = begin(sbuf, scount, stype, rbuf, span_v(rcounts, displs, comm), rtype);
    return end(c, PMPI_Allgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm));
}

int MPI_Gatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, const int rcounts[], const int displs[],
                MPI_Datatype rtype, int root, MPI_Comm comm) {
    int rn = comm_rank(comm) == root ? span_v(rcounts, displs, comm) : 0;
    call_pins c = begin(sbuf, scount, stype, rbuf, rn, rtype);
    return end(c, PMPI_Gatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm));
}

int MPI_Scatter(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype, int root,
                MPI_Comm comm) {
    call_pins c = begin(sbuf, comm_rank(comm) == root ? scount * comm_size(comm) : 0, stype, rbuf, rcount, rtype);
    return end(c, PMPI_Scatter(sbuf, scount, stype, rbuf, rcount, rtype, root, comm));
}

int MPI_Alltoall(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
                 MPI_Comm comm) {
    int p = comm_size(comm);
    call_pins c = begin(sbuf, scount * p, stype, rbuf, rcount * p, rtype);
    return end(c, PMPI_Alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm));
}

int MPI_Alltoallv(const void *sbuf, const int scounts[], const int sdispls[], MPI_Datatype stype, void *rbuf,
                  const int rcounts[], const int rdispls[], MPI_Datatype rtype, MPI_Comm comm) {
    call_pins c = begin(sbuf, span_v(scounts, sdispls, comm), stype, rbuf, span_v(rcounts, rdispls, comm), rtype);
    return end(c, PMPI_Alltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm));
}

int MPI_Scatterv(const void *sbuf, const int scounts[], const int displs[], MPI_Datatype stype, void *rbuf,
                 int rcount, MPI_Datatype rtype, int root, MPI_Comm comm) {
    int sn = comm_rank(comm) == root ? span_v(scounts, displs, comm) : 0;
    call_pins c = begin(sbuf, sn, stype, rbuf, rcount, rtype);
    return end(c, PMPI_Scatterv(sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm));
}

/* The reductions that scatter or scan: the send buffer spans every
 * rank's block (or the count), the receive buffer this rank's. */
int MPI_Reduce_scatter(const void *sbuf, void *rbuf, const int rcounts[], MPI_Datatype type, MPI_Op op,
                       MPI_Comm comm) {
    int all = sum_of(rcounts, comm);
    call_pins c = begin(sbuf, all, type, rbuf, sbuf == MPI_IN_PLACE ? all : rcounts[comm_rank(comm)], type);
    return end(c, PMPI_Reduce_scatter(sbuf, rbuf, rcounts, type, op, comm));
}

int MPI_Reduce_scatter_block(const void *sbuf, void *rbuf, int rcount, MPI_Datatype type, MPI_Op op,
                             MPI_Comm comm) {
    int all = rcount * comm_size(comm);
    call_pins c = begin(sbuf, all, type, rbuf, sbuf == MPI_IN_PLACE ? all : rcount, type);
    return end(c, PMPI_Reduce_scatter_block(sbuf, rbuf, rcount, type, op, comm));
}

int MPI_Scan(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
    call_pins c = begin(sbuf, count, type, rbuf, count, type);
    return end(c, PMPI_Scan(sbuf, rbuf, count, type, op, comm));
}

int MPI_Exscan(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
    call_pins c = begin(sbuf, count, type, rbuf, count, type);
    return end(c, PMPI_Exscan(sbuf, rbuf, count, type, op, comm));
}

/* Start-up and shut-down allocate too (free lists, shared segments). */
int MPI_Init(int *argc, char ***argv) {
    enter();
    int rc = PMPI_Init(argc, argv);
    leave();
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
    enter();
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    leave();
    return rc;
}

int MPI_Finalize(void) {
    enter();
    int rc = PMPI_Finalize();
    leave();
    return rc;
}
