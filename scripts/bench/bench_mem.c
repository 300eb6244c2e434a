/*
 * The memory baselines of the materialize benchmark, on every rank at once:
 *
 *   mpirun -np 2 bench_mem BYTES [ROUNDS [MODEL]]
 *
 * Each round, on each rank: a segment of BYTES allocated as the service
 * allocates it (dbuf_seg_alloc: bound to the local NUMA nodes, transparent
 * huge pages advised), then, timed separately (the slowest rank counts, as
 * for the service's phases):
 *   touch  a memset of the fresh segment (first touch + write),
 *   read   a 64-bit sum over the touched bytes,
 *   write  a memset of the touched segment,
 * then the segment is freed.  With MODEL (a --model name), each round also
 * plans the model as the service does by default (padded, bf16, dp = the
 * number of ranks) and, on a second fresh segment allocated the same way:
 *   fill   dbuf_pattern_fill of this rank's elements (first touch + pattern),
 *   verify dbuf_pattern_verify of them;
 * the fill and the touch alternate which goes first from round to round, so
 * that both meet the memory in the same state (a VM may have handed freed
 * memory back to its host, which makes the next first touch slow).  Rank 0
 * prints one line per measure with the best and the median GB/s (1e9 bytes)
 * of the rounds, and whether the segments were bound and huge-page advised;
 * "first" is round 0's touch alone, which comes first in the process (its
 * first large segment, as the service's fill is: a new process's first
 * touch meets memory in another state than one right after a free in the
 * same process, see docs/performance.md).
 */
#include "dbuf/dbuf.h"
#include "dbuf/mem.h"
#include "dbuf/models.h"
#include "dbuf/pattern.h"

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_ROUNDS = 64, NMEASURES = 5 };

static const char *const measure_name[NMEASURES] = {"touch", "read", "write", "fill", "verify"};

/* This rank's elements of the model's default layout (padded, bf16). */
typedef struct {
  dbuf_layout_t *l;
  int64_t start, end, bad;
} part_t;

static int
cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The slowest rank's GB/s of fn over bytes, started together. */
static double
timed_min_gbps(void (*fn)(void *, int64_t, uint64_t *), void *p, int64_t bytes, uint64_t *sink)
{
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  fn(p, bytes, sink);
  double t = MPI_Wtime() - t0, gbps = t > 0 ? (double)bytes / t / 1e9 : 0, g = 0;
  MPI_Allreduce(&gbps, &g, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
  return g;
}

static void
do_memset(void *p, int64_t bytes, uint64_t *sink)
{
  memset(p, 0x5a, (size_t)bytes);
  *sink += ((volatile unsigned char *)p)[bytes - 1];
}

/* The read pass as fast as the verifier may be: four independent sums
 * of 32-byte vectors, built for AVX2 too where the CPU has it (the
 * verifier's compare is; a scalar sum would be the slower of the two). */
typedef uint64_t v4u64 __attribute__((vector_size(32)));
#if defined(__x86_64__) && defined(__has_attribute)
#if __has_attribute(target_clones)
__attribute__((target_clones("avx2", "default")))
#endif
#endif
static void
do_sum(void *p, int64_t bytes, uint64_t *sink)
{
  const unsigned char *b = p;
  int64_t n = bytes / 128 * 128, i;
  v4u64 s[4] = {{0}, {0}, {0}, {0}};
  for (i = 0; i < n; i += 128)
    for (int k = 0; k < 4; k++) {
      v4u64 x;
      memcpy(&x, b + i + 32 * k, 32);
      s[k] += x;
    }
  uint64_t t = 0;
  for (int k = 0; k < 4; k++)
    t += s[k][0] + s[k][1] + s[k][2] + s[k][3];
  for (; i + 8 <= bytes; i += 8) {
    uint64_t x;
    memcpy(&x, b + i, 8);
    t += x;
  }
  *sink += t;
}

static part_t part; /* the model's layout, for do_fill and do_verify */

static void
do_fill(void *p, int64_t bytes, uint64_t *sink)
{
  (void)bytes;
  if (dbuf_pattern_fill(part.l, part.start, part.end, p, 2, NULL, NULL) != 0)
    part.bad = -1;
  *sink += ((volatile unsigned char *)p)[0];
}

static void
do_verify(void *p, int64_t bytes, uint64_t *sink)
{
  int64_t nbad = 0;
  (void)bytes;
  if (dbuf_pattern_verify(part.l, part.start, part.end, p, 2, NULL, NULL, &nbad, NULL) != 0 ||
      nbad != 0)
    part.bad = -1;
  *sink += (uint64_t)nbad;
}

/* Plan model on nranks as the service does by default; 0 or a code. */
static int
plan_part(const char *model, int rank, int nranks, dbuf_diag_t *d)
{
  dbuf_tensors_t *t = NULL;
  dbuf_layout_params_t lp;
  int rc = dbuf_model_build(model, &t, d);
  dbuf_layout_params_init(&lp);
  lp.nranks = nranks;
  if (rc == 0)
    rc = dbuf_layout_build(t, &lp, &part.l, d);
  dbuf_tensors_destroy(t);
  if (rc == 0) {
    part.start = dbuf_layout_range(part.l)[rank];
    part.end = rank + 1 < nranks ? dbuf_layout_range(part.l)[rank + 1] : dbuf_layout_size(part.l);
  }
  return rc;
}

/* A fresh segment of bytes, as the service allocates it; 0 or a code
 * agreed by every rank (the failing rank prints why). */
static int
alloc_seg(dbuf_topo_t *topo, int64_t bytes, int rank, dbuf_seg_t **seg)
{
  dbuf_membind_t local = {.kind = DBUF_MEMBIND_LOCAL};
  dbuf_diag_t d;
  int rc = dbuf_seg_alloc(topo, bytes, &local, DBUF_SEG_HUGEPAGE, seg, &d), g = 0;
  MPI_Allreduce(&rc, &g, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (rc != 0)
    fprintf(stderr, "bench_mem: rank %d: %s\n", rank, d.msg);
  if (g != 0) {
    dbuf_seg_free(*seg);
    *seg = NULL;
  }
  return g;
}

int
main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  int rank = 0, nranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  char *end = NULL;
  long long bytes = argc > 1 ? strtoll(argv[1], &end, 10) : 0;
  long rounds = argc > 2 ? strtol(argv[2], NULL, 10) : 3;
  const char *model = argc > 3 ? argv[3] : NULL;
  if (argc < 2 || argc > 4 || *end != '\0' || bytes < 8 || rounds < 1 || rounds > MAX_ROUNDS) {
    if (rank == 0)
      fprintf(stderr, "usage: bench_mem BYTES (>= 8) [ROUNDS (1-%d) [MODEL]]\n", MAX_ROUNDS);
    MPI_Finalize();
    return 2;
  }
  bytes -= bytes % 8;

  dbuf_topo_t *topo = NULL;
  dbuf_diag_t d;
  int rc = dbuf_topo_create(&topo, NULL, &d), bound = 1, huge = 1, g = 0;
  if (rc == 0 && model != NULL)
    rc = plan_part(model, rank, nranks, &d);
  MPI_Allreduce(&rc, &g, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (g != 0) {
    if (rc != 0)
      fprintf(stderr, "bench_mem: rank %d: %s\n", rank, d.msg);
    dbuf_topo_destroy(topo);
    MPI_Finalize();
    return 1;
  }
  int nm = model != NULL ? NMEASURES : 3;
  double gbps[NMEASURES][MAX_ROUNDS];
  uint64_t sink = 0;
  for (long r = 0; r < rounds; r++) {
    /* The fill (with MODEL) first in odd rounds, the touch first in even. */
    for (int step = 0; step < 2; step++) {
      dbuf_seg_t *seg = NULL;
      int fill = model != NULL && step == (r % 2 == 0);
      if (step == 1 && model == NULL)
        break;
      int64_t n = fill ? (part.end - part.start) * 2 : bytes;
      if (alloc_seg(topo, n > 0 ? n : 1, rank, &seg) != 0) {
        dbuf_layout_destroy(part.l);
        dbuf_topo_destroy(topo);
        MPI_Finalize();
        return 1;
      }
      bound &= dbuf_seg_is_bound(seg);
      huge &= dbuf_seg_hugepage(seg);
      void *p = dbuf_seg_ptr(seg);
      if (fill) {
        gbps[3][r] = timed_min_gbps(do_fill, p, n, &sink);
        gbps[4][r] = timed_min_gbps(do_verify, p, n, &sink);
      } else {
        gbps[0][r] = timed_min_gbps(do_memset, p, n, &sink);
        gbps[1][r] = timed_min_gbps(do_sum, p, n, &sink);
        gbps[2][r] = timed_min_gbps(do_memset, p, n, &sink);
      }
      dbuf_seg_free(seg);
    }
  }
  int mine = part.bad, worst = 0;
  MPI_Allreduce(&mine, &worst, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (worst != 0) {
    if (rank == 0)
      fprintf(stderr, "bench_mem: the pattern fill or its verification failed\n");
    dbuf_layout_destroy(part.l);
    dbuf_topo_destroy(topo);
    MPI_Finalize();
    return 1;
  }
  int all[2] = {bound, huge}, both[2];
  MPI_Allreduce(all, both, 2, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (rank == 0) {
    double first = gbps[0][0]; /* before the sort below */
    for (int m = 0; m < nm; m++) {
      qsort(gbps[m], (size_t)rounds, sizeof gbps[m][0], cmp_double);
      printf("%s best %.3f median %.3f\n", measure_name[m], gbps[m][rounds - 1],
             gbps[m][rounds / 2]);
    }
    printf("first %.3f\n", first);
    printf("bound %d hugepage %d bytes %lld rounds %ld sink %llu\n", both[0], both[1], bytes,
           rounds, (unsigned long long)(sink & 1));
  }
  dbuf_layout_destroy(part.l);
  dbuf_topo_destroy(topo);
  MPI_Finalize();
  return 0;
}
