/*
 * Layout planning benchmark: builds, validates and queries layouts of a
 * shape list (or of N tensors cycled from it) and prints measured times.
 *
 *   bench_layout FILE [--tensors N] [--dp D] [--repeat R] [--node-size K]
 *
 * Each phase is run R times; the best time is reported (ms), with ns per
 * tensor so that lists of different sizes can be compared for linearity.
 */
#include "dbuf/dbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double
now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static dbuf_tensors_t *
cycle_list(const dbuf_tensors_t *src, int64_t n)
{
  dbuf_tensors_t *t;
  int64_t m = dbuf_tensors_count(src);
  if (dbuf_tensors_create(&t) != 0 || dbuf_tensors_reserve(t, n) != 0)
    exit(1);
  for (int64_t i = 0; i < n; i++) {
    char name[64];
    int64_t k = i % m;
    snprintf(name, sizeof name, "t%lld.%.40s", (long long)i,
             dbuf_tensors_name(src, k));
    if (dbuf_tensors_add(t, name, dbuf_tensors_ndim(src, k),
                         dbuf_tensors_dims(src, k), NULL) != 0)
      exit(1);
  }
  return t;
}

int
main(int argc, char **argv)
{
  const char *file = NULL;
  int64_t ntensors = 0;
  int dp = 8, repeat = 3, node_size = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--tensors") == 0 && i + 1 < argc)
      ntensors = atoll(argv[++i]);
    else if (strcmp(argv[i], "--dp") == 0 && i + 1 < argc)
      dp = atoi(argv[++i]);
    else if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc)
      repeat = atoi(argv[++i]);
    else if (strcmp(argv[i], "--node-size") == 0 && i + 1 < argc)
      node_size = atoi(argv[++i]); /* padded, compact, unpadded: node-aware */
    else
      file = argv[i];
  }
  if (file == NULL || dp < 1 || repeat < 1) {
    fprintf(stderr, "usage: bench_layout FILE [--tensors N] [--dp D] [--repeat R] "
                    "[--node-size K]\n");
    return 2;
  }
  dbuf_tensors_t *t;
  dbuf_diag_t d;
  double best_read = 1e30;
  for (int r = 0; r < repeat; r++) {
    double t0 = now();
    if (dbuf_shapes_read(file, &t, NULL, &d) != 0) {
      fprintf(stderr, "%s\n", d.msg);
      return 2;
    }
    double el = now() - t0;
    if (el < best_read)
      best_read = el;
    if (r + 1 < repeat)
      dbuf_tensors_destroy(t);
  }
  if (ntensors > 0) {
    dbuf_tensors_t *c = cycle_list(t, ntensors);
    dbuf_tensors_destroy(t);
    t = c;
  }
  int64_t n = dbuf_tensors_count(t);
  printf("input %s: %lld tensors, %lld elements, read %.1f ms\n", file,
         (long long)n, (long long)dbuf_tensors_total(t), best_read * 1e3);
  printf("%-9s %6s %10s %10s %10s %10s %12s\n", "layout", "dp", "build_ms",
         "valid_ms", "pieces_ms", "stats_ms", "build_ns/t");
  for (int kind = DBUF_LAYOUT_PADDED; kind <= DBUF_LAYOUT_COMPACT; kind++) {
    double tb = 1e30, tv = 1e30, tp = 1e30, ts = 1e30;
    for (int r = 0; r < repeat; r++) {
      dbuf_layout_params_t p;
      dbuf_layout_t *l;
      dbuf_layout_params_init(&p);
      p.kind = (dbuf_layout_kind_t)kind;
      p.nranks = dp;
      p.auto_owners = 1;
      p.node_size = kind == DBUF_LAYOUT_TENSOR ? 0 : node_size;
      double t0 = now();
      if (dbuf_layout_build(t, &p, &l, &d) != 0) {
        fprintf(stderr, "%s\n", d.msg);
        return 1;
      }
      double t1 = now();
      if (dbuf_layout_validate(l, NULL, NULL, NULL, &d) != 0) {
        fprintf(stderr, "invalid: %s\n", d.msg);
        return 1;
      }
      double t2 = now();
      int64_t total = 0;
      for (int rk = 0; rk < dp; rk++) {
        int64_t np;
        dbuf_layout_rank_pieces(l, rk, NULL, 0, &np);
        total += np;
      }
      double t3 = now();
      dbuf_layout_stats_t st;
      dbuf_layout_stats(l, &st);
      double t4 = now();
      if (total < n - 1)
        fprintf(stderr, "warning: %lld pieces for %lld tensors\n",
                (long long)total, (long long)n);
      tb = t1 - t0 < tb ? t1 - t0 : tb;
      tv = t2 - t1 < tv ? t2 - t1 : tv;
      tp = t3 - t2 < tp ? t3 - t2 : tp;
      ts = t4 - t3 < ts ? t4 - t3 : ts;
      dbuf_layout_destroy(l);
    }
    printf("%-9s %6d %10.2f %10.2f %10.2f %10.2f %12.0f\n",
           dbuf_layout_kind_name(kind), dp, tb * 1e3, tv * 1e3, tp * 1e3,
           ts * 1e3, tb * 1e9 / (double)(n ? n : 1));
  }
  dbuf_tensors_destroy(t);
  return 0;
}
