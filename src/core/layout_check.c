/*
 * Layout validation: every invariant of the layout's kind, on any layout,
 * including one read from a file.  O(n log n) (the order is precomputed)
 * plus O(nranks log n) for the cuts.
 */
#include "core_internal.h"
#include "layout_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  dbuf_violation_fn fn;
  void *arg;
  int64_t count;
  int stop;
  dbuf_diag_t *first;
} vctx_t;

static void report(vctx_t *c, dbuf_violation_kind_t kind, int64_t tensor,
                   int64_t other, int rank, int64_t a, int64_t b,
                   const char *fmt, ...) DBUF__PRINTF(8, 9);

static void
report(vctx_t *c, dbuf_violation_kind_t kind, int64_t tensor, int64_t other,
       int rank, int64_t a, int64_t b, const char *fmt, ...)
{
  dbuf_violation_t v;
  va_list ap;

  if (c->stop)
    return;
  v.kind = kind;
  v.tensor = tensor;
  v.other = other;
  v.rank = rank;
  v.a = a;
  v.b = b;
  char raw[sizeof v.msg];
  va_start(ap, fmt);
  vsnprintf(raw, sizeof raw, fmt, ap);
  va_end(ap);
  dbuf_escape_ctl(v.msg, sizeof v.msg, raw);
  if (c->count++ == 0 && c->first != NULL)
    dbuf__diag(c->first, DBUF_ELAYOUT, "%s", v.msg);
  if (c->fn != NULL && c->fn(&v, c->arg) != 0)
    c->stop = 1;
}

#define NAME(l, i) dbuf_tensors_name((l)->tensors, (i))
#define NUMEL(l, i) dbuf_tensors_numel((l)->tensors, (i))

static int
range_ok(const dbuf_layout_t *l, vctx_t *c)
{
  int ok = 1;
  if (l->range[0] != 0) {
    report(c, DBUF_VIOL_RANGE, -1, -1, 0, l->range[0], 0,
           "rank 0: segment starts at %lld, not 0", (long long)l->range[0]);
    ok = 0;
  }
  for (int r = 0; r < l->nranks; r++) {
    if (l->range[r + 1] < l->range[r]) {
      report(c, DBUF_VIOL_RANGE, -1, -1, r, l->range[r], l->range[r + 1],
             "rank %d: segment [%lld, %lld) ends before it starts", r,
             (long long)l->range[r], (long long)l->range[r + 1]);
      ok = 0;
    }
  }
  return ok;
}

/*
 * The non-empty tensor inside the buffer strictly containing position x
 * (off < x < end), or -1.  A tensor outside the buffer is reported as such
 * and not looked at again, so every offset difference below is in [0, size].
 */
static int64_t
tensor_cut_by(const dbuf_layout_t *l, int64_t x)
{
  int64_t p = dbuf__layout_last_before(l, x, NULL);
  if (p < 0)
    return -1;
  int64_t id = dbuf__layout_at(l, p);
  if (!dbuf__layout_in_buffer(l, id))
    return -1;
  return dbuf__reaches_past(l->offsets[id], NUMEL(l, id), x) ? id : -1;
}

/* What the checks of a tensor need of its shape: rows (dim 0), elements,
 * whether the rows fill whole blocks, and block x row size (0: past 64
 * bits, which dbuf_layout_from_parts() refuses) with its reciprocal. */
typedef struct {
  int64_t rows, numel, align;
  double inv;
  int block_bad;
} vshape_t;

static void
shape_figs(const dbuf_layout_t *l, int64_t s, vshape_t *v)
{
  v->rows = dbuf__tensors_shape_rows(l->tensors, s);
  v->numel = dbuf__tensors_shape_numel(l->tensors, s);
  v->block_bad = v->rows % l->block_size != 0;
  if (dbuf__mul(l->block_size, dbuf__tensors_shape_row_elems(l->tensors, s), &v->align))
    v->align = 0;
  v->inv = v->align > 0 ? 1.0 / (double)v->align : 0.0;
}

int
dbuf_layout_validate(const dbuf_layout_t *l, dbuf_violation_fn fn, void *arg,
                     int64_t *nviol, dbuf_diag_t *diag)
{
  vctx_t c = {fn, arg, 0, 0, diag};
  int64_t logical = dbuf_tensors_total(l != NULL ? l->tensors : NULL);

  if (l == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "NULL argument");
  int ranges_good = range_ok(l, &c);

  /* Per tensor: bounds, block divisibility, alignment (padded, compact).
   * A tensor's figures are its shape's, made once a distinct shape (no
   * function call and no 64-bit division a tensor: dbuf__mod()). */
  const int64_t ns = dbuf__tensors_nshapes(l->tensors);
  const uint32_t *sid = dbuf__tensors_shape_ids(l->tensors);
  vshape_t *vs = dbuf__mallocn(ns, sizeof *vs), one;
  for (int64_t s = 0; vs != NULL && s < ns; s++)
    shape_figs(l, s, &vs[s]);
  for (int64_t i = 0; i < l->n && !c.stop; i++) {
    const vshape_t *v = vs != NULL ? &vs[sid[i]] : (shape_figs(l, sid[i], &one), &one);
    int64_t off = l->offsets[i], numel = v->numel;
    if (!dbuf__in_buffer(off, numel, l->size)) {
      int64_t end;
      if (dbuf__add(off, numel, &end))
        end = off; /* past INT64_MAX: the offset is the figure to show */
      report(&c, DBUF_VIOL_BOUNDS, i, -1, -1, off, end,
             "tensor %s: [%lld, +%lld) is outside the buffer [0, %lld)",
             NAME(l, i), (long long)off, (long long)numel, (long long)l->size);
      continue;
    }
    if (v->block_bad)
      report(&c, DBUF_VIOL_BLOCK, i, -1, -1, v->rows, l->block_size,
             "tensor %s: dim 0 = %lld not divisible by block size %lld",
             NAME(l, i), (long long)v->rows, (long long)l->block_size);
    if (dbuf__layout_chunked(l->kind) && v->align > 0 && dbuf__mod(off, v->align, v->inv) != 0)
      report(&c, DBUF_VIOL_ALIGN, i, -1, -1, off, v->align,
             "tensor %s: offset %lld is not a multiple of its block x row "
             "size %lld",
             NAME(l, i), (long long)off, (long long)v->align);
  }

  /* Overlaps: a sweep over the tensors in offset order. */
  int64_t max_end = 0, max_id = -1;
  for (int64_t p = 0; p < l->n && !c.stop; p++) {
    int64_t id = dbuf__layout_at(l, p), off = l->offsets[id];
    int64_t numel = vs != NULL ? vs[sid[id]].numel : NUMEL(l, id);
    if (numel == 0 || !dbuf__in_buffer(off, numel, l->size))
      continue;
    if (max_id >= 0 && off < max_end)
      report(&c, DBUF_VIOL_OVERLAP, id, max_id, -1, off, max_end,
             "tensor %s [%lld, %lld) overlaps tensor %s [%lld, %lld)",
             NAME(l, id), (long long)off, (long long)(off + numel),
             NAME(l, max_id), (long long)l->offsets[max_id],
             (long long)max_end);
    if (max_id < 0 || off + numel > max_end) {
      max_end = off + numel;
      max_id = id;
    }
  }
  free(vs);

  /* Padded, compact: chunk is the LCM, segments equal and multiples of it. */
  if (dbuf__layout_chunked(l->kind) && !c.stop) {
    int64_t chunk;
    if (dbuf__layout_chunk(l->tensors, l->block_size, &chunk, NULL) != 0 ||
        chunk != l->chunk_size)
      report(&c, DBUF_VIOL_CHUNK, -1, -1, -1, l->chunk_size, chunk,
             "chunk size %lld is not the LCM of block x row sizes",
             (long long)l->chunk_size);
    /* With good ranges every rank offset is in [0, size]: no difference
     * below overflows.  Bad ranges are already reported. */
    int64_t seg0 = ranges_good ? l->range[1] - l->range[0] : 0;
    for (int r = 0; r < l->nranks && ranges_good && !c.stop; r++) {
      int64_t seg = l->range[r + 1] - l->range[r];
      if (seg != seg0)
        report(&c, DBUF_VIOL_UNEQUAL, -1, -1, r, l->range[r], l->range[r + 1],
               "rank %d: segment [%lld, %lld) has %lld elements, rank 0 has "
               "%lld (padded segments must be equal)",
               r, (long long)l->range[r], (long long)l->range[r + 1],
               (long long)seg, (long long)seg0);
      else if (l->chunk_size > 0 && seg % l->chunk_size != 0)
        report(&c, DBUF_VIOL_CHUNK, -1, -1, r, l->range[r], l->range[r + 1],
               "rank %d: segment of %lld elements is not a multiple of chunk "
               "%lld",
               r, (long long)seg, (long long)l->chunk_size);
    }
  }

  /* Rank cuts: on a row (block) boundary, or between tensors. */
  if (ranges_good) {
    for (int r = 1; r < l->nranks && !c.stop; r++) {
      int64_t cut = l->range[r];
      int64_t id = tensor_cut_by(l, cut);
      if (id < 0)
        continue;
      /* In bounds: 0 <= off < cut <= size, and the block fits
       * (dbuf_layout_from_parts() checks block x row size). */
      int64_t off = l->offsets[id], within = cut - off, align;
      if (dbuf__mul(l->block_size, dbuf_tensors_row_elems(l->tensors, id),
                    &align))
        continue; /* a layout not made by from_parts or the builders */
      if (l->kind == DBUF_LAYOUT_TENSOR)
        report(&c, DBUF_VIOL_SPLIT, id, -1, r, off, cut,
               "tensor %s [%lld, %lld) is split at %lld between rank %d and "
               "rank %d (TensorAtomic)",
               NAME(l, id), (long long)off, (long long)(off + NUMEL(l, id)),
               (long long)cut, r - 1, r);
      else if (within % align != 0)
        report(&c, DBUF_VIOL_CUT, id, -1, r, cut, off + within / align * align,
               "rank %d: boundary %lld cuts tensor %s inside row %lld (element "
               "%lld of a %lld-element %s)",
               r, (long long)cut, NAME(l, id),
               (long long)(within / dbuf_tensors_row_elems(l->tensors, id)),
               (long long)within, (long long)align,
               l->block_size > 1 ? "block" : "row");
    }
  }

  /* TensorAtomic with recorded owners: each tensor in its owner's segment. */
  if (l->kind == DBUF_LAYOUT_TENSOR && l->owners != NULL && ranges_good) {
    for (int64_t i = 0; i < l->n && !c.stop; i++) {
      int o = l->owners[i];
      if (!dbuf__layout_in_buffer(l, i) ||
          dbuf_layout_check_owner(l->tensors, i, o, l->nranks, NULL) != 0)
        continue;
      int64_t off = l->offsets[i], end = off + NUMEL(l, i); /* <= size */
      if (off < l->range[o] || end > l->range[o + 1])
        report(&c, DBUF_VIOL_SPLIT, i, -1, o, off, end,
               "tensor %s [%lld, %lld) is not inside the segment [%lld, %lld) "
               "of its owner rank %d",
               NAME(l, i), (long long)off, (long long)end,
               (long long)l->range[o], (long long)l->range[o + 1], o);
    }
  }

  /* The tensors must fit: a buffer smaller than its tensors has no
   * padding to speak of (never a negative count). */
  if (logical > l->size && !c.stop)
    report(&c, DBUF_VIOL_BOUNDS, -1, -1, -1, l->size, logical,
           "the tensors hold %lld elements, %lld more than the buffer size "
           "%lld",
           (long long)logical, (long long)(logical - l->size),
           (long long)l->size);
  /* Unpadded and tensor layouts have no padding at all. */
  else if (!dbuf__layout_chunked(l->kind) && logical != l->size && !c.stop) {
    int64_t cursor = 0, at = -1;
    for (int64_t p = 0; p < l->n; p++) {
      int64_t id = dbuf__layout_at(l, p);
      if (NUMEL(l, id) == 0 || !dbuf__layout_in_buffer(l, id))
        continue;
      if (l->offsets[id] > cursor) {
        at = cursor;
        break;
      }
      if (l->offsets[id] + NUMEL(l, id) > cursor) /* <= size */
        cursor = l->offsets[id] + NUMEL(l, id);
    }
    if (at < 0)
      at = cursor;
    report(&c, DBUF_VIOL_GAP, -1, -1, -1, at, l->size - logical,
           "%s layout has %lld padding elements (first hole at %lld); it "
           "promises none",
           dbuf_layout_kind_name(l->kind), (long long)(l->size - logical),
           (long long)at);
  }

  if (nviol != NULL)
    *nviol = c.count;
  return c.count ? DBUF_ELAYOUT : 0;
}
