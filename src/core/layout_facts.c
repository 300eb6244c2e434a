/* Facts about a range of a layout: first and last rows, a moved cut. */
#include "dbuf/layout_facts.h"
#include "core_internal.h"
#include "layout_internal.h"

#include <stdlib.h>
#include <string.h>

int
dbuf_layout_span_rows(const dbuf_layout_t *l, int64_t start, int64_t end,
                      dbuf_span_rows_t *out)
{
  if (l == NULL || out == NULL || start > end)
    return DBUF_EINVAL;
  dbuf_span_rows_t s = {-1, -1, -1, -1};
  start = start < 0 ? 0 : start > l->size ? l->size : start;
  end = end < start ? start : end > l->size ? l->size : end;
  /* Only the last non-empty tensor starting before start can reach into
   * the range from the left; every other candidate starts inside it. */
  int64_t p = dbuf__layout_last_before(l, start, NULL);
  for (p = p < 0 ? 0 : p; p < l->n && start < end; p++) {
    int64_t id = dbuf__layout_at(l, p), off = l->offsets[id];
    int64_t numel = dbuf_tensors_numel(l->tensors, id);
    if (off >= end)
      break;
    if (numel == 0 || !dbuf__layout_in_buffer(l, id) || off + numel <= start)
      continue;
    int64_t re = dbuf_tensors_row_elems(l->tensors, id);
    int64_t a = off > start ? off : start;
    int64_t b = off + numel < end ? off + numel : end; /* in [0, size] */
    if (s.first_tensor < 0) {
      s.first_tensor = id;
      s.first_row = (a - off) / re;
    }
    s.last_tensor = id;
    s.last_row = (b - 1 - off) / re;
  }
  *out = s;
  return 0;
}

/* The row size of the tensor holding element e of the buffer, or 1 (padding,
 * or e outside the buffer). */
static int64_t
row_at(const dbuf_layout_t *l, int64_t e)
{
  int64_t t = -1;
  if (e >= 0 && e < l->size)
    dbuf_layout_tensor_at(l, e, &t);
  return t >= 0 ? dbuf_tensors_row_elems(l->tensors, t) : 1;
}

int
dbuf_layout_move_cut(const dbuf_layout_t *l, int cut, dbuf_layout_t **out)
{
  if (l == NULL || out == NULL)
    return DBUF_EINVAL;
  if (cut < 1 || cut >= l->nranks)
    return DBUF_ERANGE;
  /* A layout from a file may hold any offsets: every difference is
   * checked (an overflow is "no room"). */
  int64_t x = l->range[cut], before, after, moved = x;
  if (__builtin_sub_overflow(x, l->range[cut - 1], &before))
    before = -1;
  if (__builtin_sub_overflow(l->range[cut + 1], x, &after))
    after = -1;
  int64_t back = row_at(l, x - 1), fwd = row_at(l, x);
  if (before >= back)
    moved = x - back; /* x - before >= range[cut - 1]: no overflow */
  else if (after >= fwd)
    moved = x + fwd;
  if (moved == x)
    return DBUF_ERANGE;
  int64_t *range = malloc((size_t)(l->nranks + 1) * sizeof *range);
  if (range == NULL)
    return DBUF_ENOMEM;
  memcpy(range, l->range, (size_t)(l->nranks + 1) * sizeof *range);
  range[cut] = moved;
  int rc = dbuf_layout_from_parts(l->tensors, l->kind, l->nranks, l->block_size,
                                  l->chunk_size, l->size, l->offsets, range, l->owners,
                                  out, NULL);
  free(range);
  return rc;
}
