/* Ownership queries: rank ranges, mesh-local ranges, owners, pieces, stats. */
#include "core_internal.h"
#include "layout_internal.h"

#include <string.h>

int
dbuf_layout_rank_range(const dbuf_layout_t *l, int rank, int64_t *start,
                       int64_t *end)
{
  if (l == NULL || start == NULL || end == NULL)
    return DBUF_EINVAL;
  if (rank < 0 || rank >= l->nranks)
    return DBUF_ERANGE;
  *start = l->range[rank];
  *end = l->range[rank + 1];
  return 0;
}

int
dbuf_layout_local_range(const dbuf_layout_t *l, int naxes, const int *sizes,
                        const int *coords, const int *sharded, int64_t *start,
                        int64_t *end, int *first_seg, int *nseg,
                        dbuf_diag_t *diag)
{
  int64_t nshards = 1, idx = 0;
  if (l == NULL || sizes == NULL || coords == NULL || sharded == NULL ||
      start == NULL || end == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "NULL argument");
  if (naxes < 1 || naxes > DBUF_MAX_DIMS)
    return dbuf__diag(diag, DBUF_EINVAL, "mesh has %d axes (1 to %d)", naxes,
                      DBUF_MAX_DIMS);
  /* Outermost sharded axis least significant, innermost most significant. */
  for (int a = 0; a < naxes; a++) {
    if (sizes[a] < 1)
      return dbuf__diag(diag, DBUF_EINVAL, "mesh axis %d has size %d", a,
                        sizes[a]);
    if (coords[a] < 0 || coords[a] >= sizes[a])
      return dbuf__diag(diag, DBUF_ERANGE,
                        "mesh axis %d: coordinate %d outside [0, %d)", a,
                        coords[a], sizes[a]);
    if (!sharded[a])
      continue;
    int64_t term;
    if (dbuf__mul(coords[a], nshards, &term) || dbuf__add(idx, term, &idx) ||
        dbuf__mul(nshards, sizes[a], &nshards))
      return dbuf__diag(diag, DBUF_EOVERFLOW, "mesh shard count overflows");
  }
  if (nshards > l->nranks || l->nranks % nshards != 0)
    return dbuf__diag(diag, DBUF_ENRANKS,
                      "layout has %d segments, not a multiple of the %lld "
                      "shards of the mesh",
                      l->nranks, (long long)nshards);
  return dbuf_layout_rank_segments(l, (int)nshards, (int)idx, start, end,
                                   first_seg, nseg);
}

int
dbuf_layout_rank_segments(const dbuf_layout_t *l, int nranks, int rank,
                          int64_t *start, int64_t *end, int *first_seg, int *nseg)
{
  if (l == NULL || start == NULL || end == NULL)
    return DBUF_EINVAL;
  if (nranks < 1 || l->nranks % nranks != 0)
    return DBUF_ENRANKS;
  if (rank < 0 || rank >= nranks)
    return DBUF_ERANGE;
  int k = l->nranks / nranks, first = rank * k; /* <= l->nranks: no overflow */
  *start = l->range[first];
  *end = l->range[first + k];
  if (first_seg != NULL)
    *first_seg = first;
  if (nseg != NULL)
    *nseg = k;
  return 0;
}

int
dbuf__layout_owner(const dbuf_layout_t *l, int64_t i)
{
  /* Last rank r with range[r] <= i; then range[r+1] > i. */
  int lo = 0, hi = l->nranks;
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (l->range[mid + 1] <= i)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

int
dbuf_layout_owner_of(const dbuf_layout_t *l, int64_t i, int *rank)
{
  if (l == NULL || rank == NULL)
    return DBUF_EINVAL;
  if (i < 0 || i >= l->size)
    return DBUF_ERANGE;
  *rank = dbuf__layout_owner(l, i);
  return 0;
}

/* First position in order whose tensor may hold elements at or after x. */
static int64_t
first_touching(const dbuf_layout_t *l, int64_t x)
{
  int64_t lower, p = dbuf__layout_last_before(l, x, &lower);
  /* In a valid layout only that one tensor before x can reach past it. */
  if (p >= 0 && dbuf__reaches_past(l->offsets[dbuf__layout_at(l, p)],
                                   dbuf_tensors_numel(l->tensors, dbuf__layout_at(l, p)),
                                   x))
    return p;
  return lower;
}

int
dbuf_layout_tensor_at(const dbuf_layout_t *l, int64_t i, int64_t *tensor)
{
  if (l == NULL || tensor == NULL)
    return DBUF_EINVAL;
  if (i < 0 || i >= l->size)
    return DBUF_ERANGE;
  *tensor = -1;
  for (int64_t p = first_touching(l, i); p < l->n; p++) {
    int64_t id = dbuf__layout_at(l, p), off = l->offsets[id];
    if (off > i)
      break;
    if (dbuf__layout_in_buffer(l, id) &&
        i < off + dbuf_tensors_numel(l->tensors, id)) { /* <= size */
      *tensor = id;
      break;
    }
  }
  return 0;
}

int
dbuf_layout_piece_rows(const dbuf_tensors_t *t, int64_t tensor, int64_t elem_begin,
                       int64_t nelems, dbuf_rows_t *rows)
{
  if (t == NULL || rows == NULL)
    return DBUF_EINVAL;
  int64_t numel = dbuf_tensors_numel(t, tensor);
  if (numel < 0 || elem_begin < 0 || nelems < 0 || elem_begin > numel ||
      nelems > numel - elem_begin)
    return DBUF_ERANGE;
  dbuf__rows(dbuf_tensors_row_elems(t, tensor), elem_begin, nelems, rows);
  return 0;
}

/* Tensor id clipped to global [start, end): its rows, or an empty run. */
static void
rows_in(const dbuf_layout_t *l, int64_t id, int64_t start, int64_t end,
        dbuf_rows_t *rows)
{
  int64_t off = l->offsets[id], numel = dbuf_tensors_numel(l->tensors, id);
  int64_t lo, hi;
  memset(rows, 0, sizeof *rows);
  /* In the buffer, off + numel <= size cannot overflow. */
  if (numel > 0 && dbuf__layout_in_buffer(l, id) &&
      dbuf__clip(off, off + numel, start, end, &lo, &hi))
    dbuf__rows(dbuf_tensors_row_elems(l->tensors, id), lo - off, hi - lo, rows);
}

int
dbuf_layout_rows_in(const dbuf_layout_t *l, int64_t tensor, int64_t start,
                    int64_t end, dbuf_rows_t *rows)
{
  if (l == NULL || rows == NULL || start > end)
    return DBUF_EINVAL;
  if (tensor < 0 || tensor >= l->n)
    return DBUF_ERANGE;
  rows_in(l, tensor, start, end, rows);
  return 0;
}

/* The piece of tensor id (inside the buffer) at global [lo, hi) of rank's
 * segment, off <= lo <= hi <= off + numel: every difference is in [0, size]. */
static void
fill_piece(const dbuf_layout_t *l, int64_t id, int rank, int64_t lo, int64_t hi,
           dbuf_piece_t *pc)
{
  dbuf_rows_t rows;
  dbuf__rows(dbuf_tensors_row_elems(l->tensors, id), lo - l->offsets[id], hi - lo,
             &rows);
  pc->tensor = id;
  pc->rank = rank;
  pc->elem_begin = rows.elem_begin;
  pc->nelems = rows.nelems;
  pc->first_row = rows.first_row;
  pc->nrows = rows.nrows;
  pc->whole_rows = !rows.cut_first && !rows.cut_last;
  pc->offset = lo - dbuf__layout_cut(l, rank);
}

int
dbuf_layout_piece_clip(const dbuf_layout_t *l, const dbuf_piece_t *piece,
                       int64_t start, int64_t end, dbuf_piece_t *out)
{
  if (l == NULL || piece == NULL || out == NULL || start > end)
    return DBUF_EINVAL;
  int64_t id = piece->tensor;
  int rank = piece->rank;
  if (id < 0 || id >= l->n || rank < 0 || rank >= l->nranks ||
      !dbuf__layout_in_buffer(l, id))
    return DBUF_ERANGE;
  /* The piece must lie in its tensor and its segment: then every position
   * below is in [0, size]. */
  int64_t s = dbuf__layout_cut(l, rank), e = dbuf__layout_cut(l, rank + 1);
  int64_t off = l->offsets[id], numel = dbuf_tensors_numel(l->tensors, id);
  if (piece->offset < 0 || piece->nelems < 0 || piece->offset > e - s ||
      piece->nelems > e - s - piece->offset ||
      s + piece->offset - off != piece->elem_begin || piece->elem_begin < 0 ||
      piece->nelems > numel - piece->elem_begin)
    return DBUF_ERANGE;
  int64_t gb = s + piece->offset, ge = gb + piece->nelems, lo, hi;
  if (!dbuf__clip(gb, ge, start, end, &lo, &hi)) /* empty: clamp into the piece */
    hi = lo = lo < gb ? gb : lo > ge ? ge : lo;
  fill_piece(l, id, rank, lo, hi, out);
  return 0;
}

int
dbuf_layout_rank_pieces(const dbuf_layout_t *l, int rank, dbuf_piece_t *buf,
                        int64_t cap, int64_t *n)
{
  int64_t count = 0;
  if (l == NULL || n == NULL || cap < 0)
    return DBUF_EINVAL;
  if (rank < 0 || rank >= l->nranks)
    return DBUF_ERANGE;
  int64_t s = dbuf__layout_cut(l, rank), e = dbuf__layout_cut(l, rank + 1);
  if (s < e) {
    for (int64_t p = first_touching(l, s); p < l->n; p++) {
      int64_t id = dbuf__layout_at(l, p), off = l->offsets[id];
      int64_t numel = dbuf_tensors_numel(l->tensors, id);
      if (off >= e)
        break;
      /* A tensor outside the buffer is in no segment (validate says so). */
      int64_t lo, hi;
      if (numel == 0 || !dbuf__layout_in_buffer(l, id) ||
          !dbuf__clip(off, off + numel, s, e, &lo, &hi))
        continue;
      if (buf != NULL && count < cap)
        fill_piece(l, id, rank, lo, hi, &buf[count]);
      count++;
    }
  }
  *n = count;
  return 0;
}

int
dbuf_layout_tensor_pieces(const dbuf_layout_t *l, int64_t tensor,
                          dbuf_piece_t *buf, int64_t cap, int64_t *n)
{
  int64_t count = 0;
  if (l == NULL || n == NULL || cap < 0)
    return DBUF_EINVAL;
  if (tensor < 0 || tensor >= l->n)
    return DBUF_ERANGE;
  int64_t off = l->offsets[tensor];
  int64_t numel = dbuf_tensors_numel(l->tensors, tensor);
  if (numel > 0 && dbuf__layout_in_buffer(l, tensor)) {
    int64_t end = off + numel; /* <= size */
    for (int r = dbuf__layout_owner(l, off);
         r < l->nranks && dbuf__layout_cut(l, r) < end; r++) {
      int64_t lo, hi;
      if (!dbuf__clip(off, end, dbuf__layout_cut(l, r), dbuf__layout_cut(l, r + 1),
                      &lo, &hi))
        continue;
      if (buf != NULL && count < cap)
        fill_piece(l, tensor, r, lo, hi, &buf[count]);
      count++;
    }
  }
  *n = count;
  return 0;
}

int
dbuf_layout_stats(const dbuf_layout_t *l, dbuf_layout_stats_t *st)
{
  if (l == NULL || st == NULL)
    return DBUF_EINVAL;
  memset(st, 0, sizeof *st);
  int64_t last_end = 0, largest = -1;
  st->logical = dbuf_tensors_total(l->tensors);
  st->largest_tensor = -1;
  for (int64_t i = 0; i < l->n; i++) {
    int64_t off = l->offsets[i], numel = dbuf_tensors_numel(l->tensors, i);
    if (numel > largest) {
      largest = numel;
      st->largest_tensor = i;
    }
    if (numel == 0 || !dbuf__in_buffer(off, numel, l->size))
      continue;
    if (off + numel > last_end)
      last_end = off + numel;
    /* Split: it runs past the end of the segment it starts in. */
    if (off + numel > l->range[dbuf__layout_owner(l, off) + 1])
      st->split_tensors++;
  }
  /* A buffer smaller than its tensors (an invalid layout) has no padding,
   * not a negative amount of it. */
  st->padding = l->size > st->logical ? l->size - st->logical : 0;
  st->tail_elems = l->size - last_end;
  st->gap_elems = st->padding > st->tail_elems ? st->padding - st->tail_elems : 0;
  for (int r = 0; r < l->nranks; r++) {
    int64_t seg = dbuf__layout_cut(l, r + 1) - dbuf__layout_cut(l, r);
    if (r == 0 || seg < st->min_segment) {
      st->min_segment = seg;
      st->min_rank = r;
    }
    if (r == 0 || seg > st->max_segment) {
      st->max_segment = seg;
      st->max_rank = r;
    }
    if (seg == 0)
      st->empty_segments++;
  }
  return 0;
}
