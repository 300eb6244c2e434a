/*
 * Agreement on arguments: local checks are agreed before any rank enters a
 * collective, and values that must be global are compared across the ranks.
 *
 * Equality costs one MPI_Allreduce(MPI_MIN) of a vector holding every value v
 * and its complement ~v: min(~v) = ~max(v), so the one reduction gives both
 * the minimum and the maximum without negating INT64_MIN.
 */
#include "comm_internal.h"

#include "dbuf/shapes_io.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Room for one value in a message (longer values are cut). */
#define VALUE_LEN 160

/* Spin this long on a request before sleeping between looks, and sleep
 * this long between them. */
#define WAIT_SPIN_NS 100000L
#define WAIT_SLEEP_NS 200000L

static int64_t
now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * Wait for a non-blocking request without holding a core: MPI_Test in a
 * loop, sleeping WAIT_SLEEP_NS between looks once WAIT_SPIN_NS have passed
 * (Open MPI's blocking calls poll a core at 100% while they wait, which on
 * a node whose ranks share cores is the core rank 0 plans on).  0 or
 * DBUF_EMPI.
 */
static int
comm_wait(MPI_Request *req)
{
  int64_t t0 = now_ns();
  for (;;) {
    int done = 0;
    if (MPI_Test(req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
      return DBUF_EMPI;
    if (done)
      return 0;
    if (now_ns() - t0 > WAIT_SPIN_NS) {
      struct timespec ts = {0, WAIT_SLEEP_NS};
      nanosleep(&ts, NULL);
    }
  }
}

/*
 * In-place MIN reduction of [v[0..n), ~v[0..n)] (v has room for 2n); on return
 * v[i] is the minimum and v[n + i] the maximum of value i.
 */
static int
min_max(dbuf_comm_t *ctx, int64_t *v, int n)
{
  for (int i = 0; i < n; i++)
    v[n + i] = ~v[i];
  /* One call, not dbuf__comm_allreduce_i64: the chunk size it splits by is
   * one of the values that may differ. */
  if (n > INT_MAX / 2)
    return DBUF_EOVERFLOW;
  MPI_Request req;
  if (MPI_Iallreduce(MPI_IN_PLACE, v, 2 * n, MPI_INT64_T, MPI_MIN, ctx->comm, &req) !=
          MPI_SUCCESS ||
      comm_wait(&req) != 0)
    return DBUF_EMPI;
  for (int i = 0; i < n; i++)
    v[n + i] = ~v[n + i];
  return 0;
}

int
dbuf__comm_check_args(dbuf_comm_t *ctx, int local_ok, int n, const int64_t *global,
                      const char *const *names, char *msg, size_t msg_len)
{
  /* w[0]: lowest rank whose local check failed; then the global values
   * (min_max also gives w[0]'s maximum, which is not used). */
  int64_t w[2 * (1 + DBUF__ARGS_MAX)];
  if (n < 0 || n > DBUF__ARGS_MAX)
    return DBUF_EINVAL; /* a bug of the caller inside this library */
  /* Every call reduces the same count (unused values 0), so that ranks that
   * enter different collectives by mistake find values that differ, not a
   * truncated reduction. */
  const int m = DBUF__ARGS_MAX;
  w[0] = local_ok ? INT64_MAX : ctx->rank;
  for (int i = 0; i < m; i++)
    w[1 + i] = i < n ? global[i] : 0;
  int rc = min_max(ctx, w, 1 + m);
  if (rc != 0) {
    if (msg != NULL)
      snprintf(msg, msg_len, "agreeing on the arguments: %s", dbuf_strerror(rc));
    return rc;
  }
  if (w[0] != INT64_MAX) {
    if (msg != NULL)
      snprintf(msg, msg_len, "rank %" PRId64 ": invalid argument", w[0]);
    return DBUF_EINVAL;
  }
  for (int i = 0; i < m; i++) {
    if (w[1 + i] != w[1 + m + 1 + i]) {
      if (msg != NULL && i < n)
        snprintf(msg, msg_len,
                 "argument %s differs between ranks (from %" PRId64 " to %" PRId64
                 "); it must be the same on every rank",
                 names[i], w[1 + i], w[1 + m + 1 + i]);
      else if (msg != NULL)
        snprintf(msg, msg_len, "the ranks are in different collective calls");
      return DBUF_EMISMATCH;
    }
  }
  return 0;
}

int
dbuf__comm_root_values(dbuf_comm_t *ctx, int64_t tag, int n, int64_t *v)
{
  int64_t w[2 * (1 + DBUF__ARGS_MAX)];
  const int m = DBUF__ARGS_MAX;
  if (n < 0 || n > m - 1)
    return DBUF_EINVAL; /* a bug of the caller inside this library */
  /* The shape of dbuf__comm_check_args(): every rank's check passed, then
   * the tag (compared), then rank 0's values (the others give the largest,
   * so the minimum is rank 0's), then zeros (compared). */
  w[0] = INT64_MAX;
  w[1] = tag;
  for (int i = 0; i < m - 1; i++)
    w[2 + i] = i >= n ? 0 : ctx->rank == 0 ? v[i] : INT64_MAX;
  int rc = min_max(ctx, w, 1 + m);
  if (rc != 0)
    return rc;
  if (w[0] != INT64_MAX)
    return DBUF_EINVAL; /* a rank in another call failed its own check: its code */
  if (w[1] != w[1 + m + 1])
    return DBUF_EMISMATCH; /* the ranks are in different calls */
  for (int i = n; i < m - 1; i++)
    if (w[2 + i] != w[1 + m + 2 + i])
      return DBUF_EMISMATCH;
  for (int i = 0; i < n; i++)
    v[i] = w[2 + i];
  return 0;
}

/* NULL ("not given") and "" must differ: they are seeded apart. */
static int64_t
value_hash(const char *s)
{
  return (int64_t)(s != NULL ? dbuf_hash64(s, strlen(s), 1) : dbuf_hash64("", 0, 2));
}

int
dbuf_comm_check_equal(dbuf_comm_t *ctx, int n, const char *const *names,
                      const char *const *values, dbuf_diag_t *diag)
{
  if (ctx == NULL)
    return DBUF_EINVAL;
  int local_ok = n >= 0 && n <= INT_MAX / 2 && (n == 0 || (names != NULL && values != NULL));
  for (int i = 0; local_ok && i < n; i++)
    local_ok = names[i] != NULL;
  /* The count itself must match before the vectors can be compared. */
  int64_t count = n;
  char why[DBUF_DIAG_LEN];
  int rc = dbuf__comm_check_args(ctx, local_ok, 1, &count, (const char *const[]){"n"}, why,
                                 sizeof why);
  if (rc == DBUF_EMISMATCH)
    rc = DBUF_EINVAL; /* a count that differs is a caller's error, not a finding */
  int64_t *h = NULL;
  if (rc == 0) {
    h = malloc((size_t)(n > 0 ? 2 * n : 1) * sizeof *h);
    rc = h != NULL ? 0 : DBUF_ENOMEM;
    snprintf(why, sizeof why, "comparing %d values: out of memory", n);
    int g = 0;
    int arc = dbuf_comm_agree(ctx, rc, &g);
    rc = arc != 0 ? arc : g;
  }
  if (rc != 0) {
    free(h);
    if (diag != NULL) {
      diag->code = rc;
      snprintf(diag->msg, sizeof diag->msg, "%s", why);
    }
    return rc;
  }

  /* One reduction: which values differ anywhere. */
  for (int i = 0; i < n; i++)
    h[i] = value_hash(values[i]);
  if ((rc = min_max(ctx, h, n)) != 0) {
    free(h);
    return rc;
  }
  int first = -1, ndiff = 0;
  for (int i = 0; i < n; i++) {
    if (h[i] != h[n + i]) {
      ndiff++;
      if (first < 0)
        first = i;
    }
  }
  free(h);
  if (first < 0)
    return 0;

  /* Name it: rank 0's value, and the lowest and highest rank that differ from it. */
  int64_t mine = value_hash(values[first]), root = mine;
  char v0[VALUE_LEN], vk[VALUE_LEN];
  snprintf(v0, sizeof v0, "%s", values[first] ? values[first] : "(not given)");
  memcpy(vk, v0, sizeof vk);
  int span[2];
  if (MPI_Bcast(&root, 1, MPI_INT64_T, 0, ctx->comm) != MPI_SUCCESS ||
      MPI_Bcast(v0, (int)sizeof v0, MPI_CHAR, 0, ctx->comm) != MPI_SUCCESS)
    return DBUF_EMPI;
  span[0] = mine != root ? ctx->rank : INT_MAX;
  span[1] = mine != root ? -ctx->rank : INT_MAX;
  if (MPI_Allreduce(MPI_IN_PLACE, span, 2, MPI_INT, MPI_MIN, ctx->comm) != MPI_SUCCESS ||
      span[0] == INT_MAX ||
      MPI_Bcast(vk, (int)sizeof vk, MPI_CHAR, span[0], ctx->comm) != MPI_SUCCESS)
    return DBUF_EMPI; /* span[0] == INT_MAX: a hash no rank holds, cannot be */
  v0[sizeof v0 - 1] = vk[sizeof vk - 1] = '\0';
  if (diag != NULL) {
    int lo = span[0], hi = -span[1];
    char more[96] = "", others[64] = "";
    if (hi > lo)
      snprintf(more, sizeof more, " (ranks %d-%d differ from rank 0)", lo, hi);
    if (ndiff > 1)
      snprintf(others, sizeof others, " (and %d more value%s)", ndiff - 1,
               ndiff > 2 ? "s differ" : " differs");
    diag->code = DBUF_EMISMATCH;
    snprintf(diag->msg, sizeof diag->msg, "%s differs between ranks: rank 0 has %s, rank %d has %s%s%s",
             names[first], v0, lo, vk, more, others);
  }
  return DBUF_EMISMATCH;
}
