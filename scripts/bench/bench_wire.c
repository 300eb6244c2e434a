/*
 * The layout on the wire: size and the serial costs of the broadcast phase
 * for a shape list, padded at DP segments.
 *
 *   bench_wire FILE DP
 *
 * Prints "tensors N bytes B per_tensor X encode_s E decode_s D
 * validate_s V": the message of dbuf_wire_encode (what
 * dbuf_comm_bcast_layout sends every rank), and the best of three timings of
 * encoding it, decoding it and validating the decoded layout (what every
 * rank does with it).  Not a test; run by scripts/bench/run-all.sh.
 */
#include "dbuf/dbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double
now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int
fail(const dbuf_diag_t *d)
{
  fprintf(stderr, "bench_wire: %s\n", d->msg);
  return 1;
}

int
main(int argc, char **argv)
{
  dbuf_tensors_t *t = NULL;
  dbuf_layout_t *l = NULL;
  dbuf_layout_params_t p;
  dbuf_diag_t d;
  int dp = argc == 3 ? atoi(argv[2]) : 0;
  if (dp < 1) {
    fprintf(stderr, "usage: bench_wire FILE DP\n");
    return 2;
  }
  if (dbuf_shapes_read(argv[1], &t, NULL, &d) != 0)
    return fail(&d);
  dbuf_layout_params_init(&p);
  p.nranks = dp;
  if (dbuf_layout_build(t, &p, &l, &d) != 0)
    return fail(&d);
  double best[3] = {1e30, 1e30, 1e30};
  int64_t len = 0;
  for (int r = 0; r < 3; r++) {
    void *buf = NULL;
    dbuf_layout_t *back = NULL;
    double t0 = now();
    if (dbuf_wire_encode(l, &buf, &len, &d) != 0)
      return fail(&d);
    double t1 = now();
    if (dbuf_wire_decode(buf, len, &back, &d) != 0)
      return fail(&d);
    double t2 = now();
    if (dbuf_layout_validate(back, NULL, NULL, NULL, &d) != 0)
      return fail(&d);
    double t3 = now(), el[3] = {t1 - t0, t2 - t1, t3 - t2};
    for (int k = 0; k < 3; k++)
      best[k] = el[k] < best[k] ? el[k] : best[k];
    free(buf);
    dbuf_layout_destroy(back);
  }
  int64_t n = dbuf_tensors_count(t);
  printf("tensors %lld bytes %lld per_tensor %.2f encode_s %.6f decode_s %.6f validate_s %.6f\n",
         (long long)n, (long long)len, (double)len / (double)n, best[0], best[1], best[2]);
  dbuf_layout_destroy(l);
  dbuf_tensors_destroy(t);
  return 0;
}
