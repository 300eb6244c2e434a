/*
 * The memory baselines of the materialize benchmark, on every rank at once:
 *
 *   mpirun -np 2 bench_mem BYTES [ROUNDS]
 *
 * Each round, on each rank: a segment of BYTES allocated as the service
 * allocates it (dbuf_seg_alloc: bound to the local NUMA nodes, transparent
 * huge pages advised), then, alternately and timed separately (the slowest
 * rank counts, as for the service's phases):
 *   touch  a memset of the fresh segment (first touch + write),
 *   read   a 64-bit sum over the touched bytes,
 *   write  a memset of the touched segment,
 * then the segment is freed.  Rank 0 prints one line per measure with the
 * best and the median GB/s (1e9 bytes) of the rounds, and whether the
 * segments were bound and huge-page advised.
 */
#include "dbuf/dbuf.h"
#include "dbuf/mem.h"

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_ROUNDS = 64, NMEASURES = 3 };

static const char *const measure_name[NMEASURES] = {"touch", "read", "write"};

static int
cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The slowest rank's time of fn, started together. */
static double
timed_max(void (*fn)(void *, int64_t, uint64_t *), void *p, int64_t bytes, uint64_t *sink)
{
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  fn(p, bytes, sink);
  double t = MPI_Wtime() - t0, tmax = 0;
  MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return tmax;
}

static void
do_memset(void *p, int64_t bytes, uint64_t *sink)
{
  memset(p, 0x5a, (size_t)bytes);
  *sink += ((volatile unsigned char *)p)[bytes - 1];
}

static void
do_sum(void *p, int64_t bytes, uint64_t *sink)
{
  const uint64_t *w = p;
  int64_t n = bytes / 8;
  uint64_t s = 0;
  for (int64_t i = 0; i < n; i++)
    s += w[i];
  *sink += s;
}

int
main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  char *end = NULL;
  long long bytes = argc > 1 ? strtoll(argv[1], &end, 10) : 0;
  long rounds = argc > 2 ? strtol(argv[2], NULL, 10) : 3;
  if (argc < 2 || *end != '\0' || bytes < 8 || rounds < 1 || rounds > MAX_ROUNDS) {
    if (rank == 0)
      fprintf(stderr, "usage: bench_mem BYTES (>= 8) [ROUNDS (1-%d)]\n", MAX_ROUNDS);
    MPI_Finalize();
    return 2;
  }
  bytes -= bytes % 8;

  dbuf_topo_t *topo = NULL;
  dbuf_diag_t d;
  dbuf_membind_t local = {.kind = DBUF_MEMBIND_LOCAL};
  int rc = dbuf_topo_create(&topo, NULL, &d), bound = 1, huge = 1, g = 0;
  double gbps[NMEASURES][MAX_ROUNDS];
  uint64_t sink = 0;
  for (long r = 0; r < rounds; r++) {
    dbuf_seg_t *seg = NULL;
    if (rc == 0)
      rc = dbuf_seg_alloc(topo, bytes, &local, DBUF_SEG_HUGEPAGE, &seg, &d);
    MPI_Allreduce(&rc, &g, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (g != 0) {
      if (rc != 0)
        fprintf(stderr, "bench_mem: rank %d: %s\n", rank, d.msg);
      dbuf_seg_free(seg);
      dbuf_topo_destroy(topo);
      MPI_Finalize();
      return 1;
    }
    bound &= dbuf_seg_is_bound(seg);
    huge &= dbuf_seg_hugepage(seg);
    void *p = dbuf_seg_ptr(seg);
    gbps[0][r] = (double)bytes / timed_max(do_memset, p, bytes, &sink) / 1e9;
    gbps[1][r] = (double)bytes / timed_max(do_sum, p, bytes, &sink) / 1e9;
    gbps[2][r] = (double)bytes / timed_max(do_memset, p, bytes, &sink) / 1e9;
    dbuf_seg_free(seg);
  }
  int all[2] = {bound, huge}, both[2];
  MPI_Allreduce(all, both, 2, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (rank == 0) {
    for (int m = 0; m < NMEASURES; m++) {
      qsort(gbps[m], (size_t)rounds, sizeof gbps[m][0], cmp_double);
      printf("%s best %.3f median %.3f\n", measure_name[m], gbps[m][rounds - 1],
             gbps[m][rounds / 2]);
    }
    printf("bound %d hugepage %d bytes %lld rounds %ld sink %llu\n", both[0], both[1], bytes,
           rounds, (unsigned long long)(sink & 1));
  }
  dbuf_topo_destroy(topo);
  MPI_Finalize();
  return 0;
}
