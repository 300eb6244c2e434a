/*
 * Comparing a tensor list with a reference list: missing and extra names,
 * shape mismatches, and the fewest tensors out of the reference's order.
 */
#include "dbuf/tensors.h"
#include "core_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  dbuf_tensors_diff_fn fn;
  void *arg;
  int64_t count;
  int stop;
} dctx_t;

static void report(dctx_t *c, dbuf_tensors_diff_kind_t kind, int64_t id,
                   int64_t ref_id, const char *fmt, ...) DBUF__PRINTF(5, 6);

static void
report(dctx_t *c, dbuf_tensors_diff_kind_t kind, int64_t id, int64_t ref_id,
       const char *fmt, ...)
{
  dbuf_tensors_diff_t d;
  va_list ap;
  if (c->stop)
    return;
  c->count++;
  if (c->fn == NULL)
    return;
  d.kind = kind;
  d.id = id;
  d.ref_id = ref_id;
  va_start(ap, fmt);
  vsnprintf(d.msg, sizeof d.msg, fmt, ap);
  va_end(ap);
  if (c->fn(&d, c->arg) != 0)
    c->stop = 1;
}

static int
same_shape(const dbuf_tensors_t *a, int64_t i, const dbuf_tensors_t *b,
           int64_t j)
{
  int nd = dbuf_tensors_ndim(a, i);
  return nd == dbuf_tensors_ndim(b, j) &&
         memcmp(dbuf_tensors_dims(a, i), dbuf_tensors_dims(b, j),
                (size_t)nd * sizeof(int64_t)) == 0;
}

/*
 * Mark in keep[] a longest strictly increasing subsequence of seq[0..k)
 * (patience sorting with back links, O(k log k)).
 */
static int
mark_lis(const int64_t *seq, int64_t k, char *keep)
{
  if (k <= 0)
    return 0; /* nothing in common (and the sizes below are positive) */
  int64_t *tail = dbuf__mallocn(k, sizeof *tail); /* index ending a run of length i+1 */
  int64_t *prev = dbuf__mallocn(k, sizeof *prev);
  int64_t len = 0;
  if (tail == NULL || prev == NULL) {
    free(tail);
    free(prev);
    return DBUF_ENOMEM;
  }
  for (int64_t i = 0; i < k; i++) {
    int64_t lo = 0, hi = len;
    while (lo < hi) {
      int64_t mid = lo + (hi - lo) / 2;
      if (seq[tail[mid]] < seq[i])
        lo = mid + 1;
      else
        hi = mid;
    }
    prev[i] = lo > 0 ? tail[lo - 1] : -1;
    tail[lo] = i;
    if (lo == len)
      len++;
  }
  memset(keep, 0, (size_t)k);
  for (int64_t i = len > 0 ? tail[len - 1] : -1; i >= 0; i = prev[i])
    keep[i] = 1;
  free(tail);
  free(prev);
  return 0;
}

int
dbuf_tensors_compare(const dbuf_tensors_t *t, const dbuf_tensors_t *ref,
                     dbuf_tensors_diff_fn fn, void *arg, int64_t *ndiff)
{
  dctx_t c = {fn, arg, 0, 0};
  if (t == NULL || ref == NULL)
    return DBUF_EINVAL;
  int64_t n = dbuf_tensors_count(t), m = dbuf_tensors_count(ref);
  int64_t *ref_of = dbuf__mallocn(n, sizeof *ref_of); /* id in ref, or -1 */
  char *seen = dbuf__calloc(m, 1);                    /* ref tensor in t */
  int64_t *seq = dbuf__mallocn(n, sizeof *seq);       /* ref ids, common */
  char *keep = dbuf__mallocn(n, 1);
  int rc = DBUF_ENOMEM;
  if (ref_of == NULL || seen == NULL || seq == NULL || keep == NULL)
    goto out;

  int64_t k = 0;
  for (int64_t i = 0; i < n; i++) {
    int64_t j;
    ref_of[i] = dbuf_tensors_find(ref, dbuf_tensors_name(t, i), &j) == 0 ? j : -1;
    if (ref_of[i] >= 0) {
      seen[ref_of[i]] = 1;
      seq[k++] = ref_of[i];
    }
  }
  if ((rc = mark_lis(seq, k, keep)) != 0)
    goto out;

  char s1[64 + 24 * DBUF_MAX_DIMS], s2[sizeof s1];
  int64_t p = 0; /* position of i among the common tensors */
  for (int64_t i = 0; i < n && !c.stop; i++) {
    const char *name = dbuf_tensors_name(t, i);
    int64_t j = ref_of[i];
    if (j < 0) {
      dbuf_tensors_shape_str(t, i, s1, sizeof s1);
      report(&c, DBUF_TDIFF_EXTRA, i, -1,
             "tensor %s (%s, id %lld) is not in the reference", name, s1,
             (long long)i);
      continue;
    }
    if (!same_shape(t, i, ref, j)) {
      dbuf_tensors_shape_str(t, i, s1, sizeof s1);
      dbuf_tensors_shape_str(ref, j, s2, sizeof s2);
      report(&c, DBUF_TDIFF_SHAPE, i, j,
             "tensor %s has shape %s, the reference has %s", name, s1, s2);
    }
    if (!keep[p])
      report(&c, DBUF_TDIFF_ORDER, i, j,
             "tensor %s is out of order: id %lld here, %lld in the reference",
             name, (long long)i, (long long)j);
    p++;
  }
  for (int64_t j = 0; j < m && !c.stop; j++) {
    if (seen[j])
      continue;
    dbuf_tensors_shape_str(ref, j, s2, sizeof s2);
    report(&c, DBUF_TDIFF_MISSING, -1, j,
           "tensor %s (%s, id %lld in the reference) is missing",
           dbuf_tensors_name(ref, j), s2, (long long)j);
  }
  rc = c.count ? DBUF_EVERIFY : 0;
  if (ndiff != NULL)
    *ndiff = c.count;
out:
  free(ref_of);
  free(seen);
  free(seq);
  free(keep);
  return rc;
}
