/*
 * The compact layout: equal segments, whole rows (blocks), padding at the
 * lower bound ceil(logical / (chunk x nranks)) x chunk x nranks where the
 * packing allows it.
 *
 * Why no rank cut splits a row.  Let C be the chunk, the LCM of
 * block x row_elems over all tensors (as in the padded layout), and let
 * every segment have S = m C elements, so that rank cut r is at r S.  Tensor
 * i starts at o_i, a multiple of its unit u_i = lcm(block x row_elems_i, A)
 * (A = the --align-bytes alignment in elements, 1 without it).  Since
 * block x row_elems_i divides u_i, it divides o_i; it also divides C and so
 * r S.  Hence r S - o_i is a multiple of block x row_elems_i: a cut inside
 * tensor i falls after a whole number of rows (blocks) of it.  Nothing here
 * needs a tensor to start on a chunk boundary or a partner tensor to fill
 * its last chunk, which is all the padded layout's conjugates are for.
 *
 * The packing.  Tensors with the same unit form a class, kept in id order.
 * The "ordered" pass walks a cursor p from 0 and places, each step, the
 * lowest-id unplaced tensor whose unit divides p (it adds no gap), looking
 * at the WINDOW classes with the lowest next ids; when none of them
 * divides p it places the lowest-id unplaced tensor at the next multiple of
 * its unit and fills the gap [p, that offset) with the largest unplaced
 * tensors that fit (each at a multiple of its own unit).  So: tensors of one
 * class keep their id order, a tensor is only postponed while the cursor is
 * not a multiple of its unit, and only gap fillers move ahead of lower ids.
 * When that pass misses the lower bound, a "grouped" pass places the
 * classes by unit, largest first (id order inside a class), filling gaps the
 * same way, and the smaller of the two buffers is kept (ties: the ordered
 * one).  Each step is O(WINDOW log classes + log n): O(n log n) overall.
 * Should both miss the bound and the padded layout's tensors end earlier
 * (never seen on the model zoo; see the README), its offsets are taken:
 * they satisfy every compact invariant, so compact never pads more than
 * padded.  Not with an alignment, which padded ignores.
 *
 * With node_size, padded and compact are built by layout_node_pack.c.
 */
#include "core_internal.h"
#include "layout_internal.h"

#include <stdlib.h>
#include <string.h>

enum {
  WINDOW = 16,     /* classes examined for a gap-free tensor */
  FILL_PROBES = 8  /* fillers tried below the best-fitting one */
};

typedef struct {
  int64_t unit;
  int64_t begin, end; /* this class's ids: cls_ids[begin, end) in id order */
  int64_t head;       /* first position not yet known to be placed */
} pclass_t;

typedef struct {
  const dbuf_tensors_t *t;
  const uint32_t *sid; /* [n] each tensor's shape */
  int64_t *sunit;     /* [nshapes] a shape's unit (-1: no tensor of it yet) */
  int64_t *snumel;    /* [nshapes] a shape's element count */
  int64_t n, m;       /* tensors, non-empty tensors */
  int64_t *cls_ids;   /* [m] sorted by (unit, id) */
  pclass_t *cls;      /* [ncls] by unit ascending */
  int64_t ncls;
  int64_t umax;       /* the largest unit: tensors below it are fillers */
  int64_t *fill_ids;  /* [nfill] the fillers, by (numel, id) */
  int64_t nfill;
  int64_t *fill_pos;  /* [n] position in fill_ids + 1, read for fillers only */
  int64_t *fill_up;   /* [nfill + 1] union-find over positions + 1: the largest
                         unplaced position + 1 at or below, 0 for none */
  char *placed;       /* [n] */
  int64_t *heap;      /* [ncls] class indices, min-heap on the next id */
  int64_t nheap;
  int64_t *off;       /* the offsets being written */
  int64_t *seq;       /* [n] this pass's placements: the empty tensors, then
                         the others as placed, by rising offset */
  int64_t nseq;
  int64_t p;          /* the cursor */
  dbuf_diag_t *diag;
} pack_t;

static inline int64_t
numel_of(const pack_t *ps, int64_t id)
{
  return ps->snumel[ps->sid[id]];
}

static inline int64_t
unit_of(const pack_t *ps, int64_t id)
{
  return ps->sunit[ps->sid[id]];
}

int
dbuf__tensor_unit(const dbuf_tensors_t *t, int64_t i, int64_t block, int64_t align,
                  int64_t *unit, dbuf_diag_t *diag)
{
  int64_t br;
  if (dbuf__mul(block, dbuf_tensors_row_elems(t, i), &br) ||
      dbuf__mul(br / dbuf__gcd(br, align), align, unit))
    return dbuf__diag(diag, DBUF_EOVERFLOW,
                      "tensor %s: block x row size aligned to %lld elements "
                      "overflows 64 bits",
                      dbuf_tensors_name(t, i), (long long)align);
  return 0;
}

int
dbuf__key3_cmp(const void *x, const void *y)
{
  const dbuf__key3_t *a = x, *b = y;
  if (a->a != b->a)
    return a->a < b->a ? -1 : 1;
  if (a->b != b->b)
    return a->b < b->b ? -1 : 1;
  return (a->id > b->id) - (a->id < b->id);
}

static void
pack_free(pack_t *ps)
{
  free(ps->sunit);
  free(ps->snumel);
  free(ps->cls_ids);
  free(ps->cls);
  free(ps->fill_ids);
  free(ps->fill_pos);
  free(ps->fill_up);
  free(ps->placed);
  free(ps->heap);
}

/*
 * The classes.  A unit is its shape's, so the distinct units come from the
 * shapes (sorted, O(shapes log shapes)) and a counting sort over the
 * tensors lists each class's ids in id order: two passes, no per-tensor
 * keys.  scls[nshapes] is scratch: a shape's class, -1 for empty shapes.
 */
static int
make_classes(pack_t *ps, int64_t ns, int64_t *scls)
{
  int64_t n = ps->n, k = 0, d = 0;
  dbuf__key3_t *units = dbuf__mallocn(ns, sizeof *units); /* (unit, -, shape) */
  if (units == NULL)
    return DBUF_ENOMEM;
  for (int64_t s = 0; s < ns; s++) {
    scls[s] = -1;
    if (ps->snumel[s] > 0 && ps->sunit[s] > 0) /* a shape some tensor has */
      units[d++] = (dbuf__key3_t){ps->sunit[s], 0, s};
  }
  qsort(units, (size_t)d, sizeof *units, dbuf__key3_cmp);
  ps->cls = dbuf__mallocn(d, sizeof *ps->cls);
  if (ps->cls == NULL) {
    free(units);
    return DBUF_ENOMEM;
  }
  for (int64_t j = 0; j < d; j++) {
    if (j == 0 || units[j].a != units[j - 1].a) {
      ps->cls[k].unit = units[j].a;
      ps->cls[k].begin = 0;
      k++;
    }
    scls[units[j].id] = k - 1;
  }
  free(units);
  ps->ncls = k;
  for (int64_t i = 0; i < n; i++) { /* counts, then starts */
    int64_t c = scls[ps->sid[i]];
    if (c >= 0)
      ps->cls[c].begin++;
  }
  for (int64_t c = 0, at = 0; c < k; c++) {
    int64_t cnt = ps->cls[c].begin;
    ps->cls[c].begin = ps->cls[c].end = at;
    at += cnt;
  }
  for (int64_t i = 0; i < n; i++) { /* ids come in order: stable */
    int64_t c = scls[ps->sid[i]];
    if (c >= 0)
      ps->cls_ids[ps->cls[c].end++] = i;
  }
  return 0;
}

/* Units, classes and the filler order.  Called once. */
static int
pack_init(pack_t *ps, const dbuf_tensors_t *t, const dbuf_layout_params_t *p,
          dbuf_diag_t *diag)
{
  int64_t n = dbuf_tensors_count(t), ns = dbuf__tensors_nshapes(t);
  int64_t align = p->align_elems > 1 ? p->align_elems : 1;
  dbuf__key3_t *keys = NULL;
  int64_t *scls = NULL;
  int rc = DBUF_ENOMEM;

  memset(ps, 0, sizeof *ps);
  ps->t = t;
  ps->n = n;
  ps->diag = diag;
  ps->sid = dbuf__tensors_shape_ids(t);
  ps->sunit = dbuf__mallocn(ns, sizeof *ps->sunit);
  ps->snumel = dbuf__mallocn(ns, sizeof *ps->snumel);
  scls = dbuf__mallocn(ns, sizeof *scls);
  ps->fill_pos = dbuf__calloc(n, sizeof *ps->fill_pos);
  ps->placed = dbuf__calloc(n, 1);
  if (ps->sunit == NULL || ps->snumel == NULL || scls == NULL ||
      ps->fill_pos == NULL || ps->placed == NULL)
    goto out;
  for (int64_t s = 0; s < ns; s++) {
    ps->sunit[s] = -1;
    ps->snumel[s] = dbuf__tensors_shape_numel(t, s);
  }
  /* Each shape's unit from its first tensor, in id order: an overflow
   * names the first tensor that has it, as a loop over every tensor would. */
  for (int64_t i = 0; i < n; i++) {
    int64_t *u = &ps->sunit[ps->sid[i]];
    if (*u < 0 && (rc = dbuf__tensor_unit(t, i, p->block_size, align, u, diag)) != 0)
      goto out;
    ps->m += ps->snumel[ps->sid[i]] > 0;
  }
  int64_t m = ps->m;
  rc = DBUF_ENOMEM;
  ps->cls_ids = dbuf__mallocn(m, sizeof *ps->cls_ids);
  if (ps->cls_ids == NULL || (rc = make_classes(ps, ns, scls)) != 0)
    goto out;
  rc = DBUF_ENOMEM;
  ps->heap = dbuf__mallocn(ps->ncls, sizeof *ps->heap);
  if (ps->heap == NULL)
    goto out;
  /* Fillers: a gap is shorter than the largest unit, so only tensors
   * below it can ever fill one (on real models a few hundred of many
   * thousands: the sort stays small). */
  int64_t umax = ps->ncls > 0 ? ps->cls[ps->ncls - 1].unit : 0, nf = 0;
  ps->umax = umax;
  for (int64_t k = 0; k < m; k++)
    nf += numel_of(ps, ps->cls_ids[k]) < umax;
  keys = dbuf__mallocn(nf, sizeof *keys);
  ps->fill_ids = dbuf__mallocn(nf, sizeof *ps->fill_ids);
  ps->fill_up = dbuf__mallocn(nf + 1, sizeof *ps->fill_up);
  if (keys == NULL || ps->fill_ids == NULL || ps->fill_up == NULL)
    goto out;
  nf = 0;
  for (int64_t k = 0; k < m; k++) {
    int64_t id = ps->cls_ids[k], numel = numel_of(ps, id);
    if (numel < umax)
      keys[nf++] = (dbuf__key3_t){numel, 0, id};
  }
  qsort(keys, (size_t)nf, sizeof *keys, dbuf__key3_cmp);
  for (int64_t k = 0; k < nf; k++) {
    ps->fill_ids[k] = keys[k].id;
    ps->fill_pos[keys[k].id] = k + 1;
  }
  ps->nfill = nf;
  rc = 0;
out:
  free(keys);
  free(scls);
  return rc;
}

/* Forget every placement: before each pass, which writes off[n] and
 * seq[n] (each pass places every non-empty tensor once).  Empty tensors
 * go at 0, a multiple of every unit, and come first in seq. */
static void
pack_reset(pack_t *ps, int64_t *off, int64_t *seq)
{
  memset(ps->placed, 0, (size_t)ps->n);
  for (int64_t k = 0; k <= ps->nfill; k++)
    ps->fill_up[k] = k;
  for (int64_t c = 0; c < ps->ncls; c++)
    ps->cls[c].head = ps->cls[c].begin;
  ps->nseq = 0;
  for (int64_t i = 0; i < ps->n; i++) {
    if (numel_of(ps, i) == 0) {
      off[i] = 0;
      seq[ps->nseq++] = i;
    }
  }
  ps->off = off;
  ps->seq = seq;
  ps->p = 0;
  ps->nheap = 0;
}

static int64_t
fill_find(pack_t *ps, int64_t k)
{
  int64_t root = k;
  while (ps->fill_up[root] != root)
    root = ps->fill_up[root];
  while (ps->fill_up[k] != root) {
    int64_t next = ps->fill_up[k];
    ps->fill_up[k] = root;
    k = next;
  }
  return root;
}

/* Tensor id is taken: no longer a candidate of any class or gap. */
static void
mark_placed(pack_t *ps, int64_t id)
{
  ps->placed[id] = 1;
  if (numel_of(ps, id) < ps->umax) { /* a filler */
    int64_t k = ps->fill_pos[id];
    ps->fill_up[k] = k - 1;
  }
}

/* Tensor id goes at offset at, past every tensor placed before it. */
static void
put(pack_t *ps, int64_t id, int64_t at)
{
  ps->off[id] = at;
  ps->seq[ps->nseq++] = id;
}

/* Largest filler position + 1 whose numel is <= space, or 0. */
static int64_t
fill_last_fitting(const pack_t *ps, int64_t space)
{
  int64_t lo = 0, hi = ps->nfill; /* answer in [0, nfill] */
  while (lo < hi) {
    int64_t mid = lo + (hi - lo + 1) / 2;
    if (numel_of(ps, ps->fill_ids[mid - 1]) <= space)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

/*
 * Fill [p, end) with unplaced tensors, largest fitting first, each at a
 * multiple of its unit.  No overflow: every offset stays below end.
 */
static void
fill_gap(pack_t *ps, int64_t end)
{
  int probes = 0;
  int64_t k = fill_find(ps, fill_last_fitting(ps, end - ps->p));
  while (k > 0 && probes < FILL_PROBES) {
    int64_t id = ps->fill_ids[k - 1], u = unit_of(ps, id);
    int64_t numel = numel_of(ps, id);
    int64_t at = ps->p % u ? ps->p + (u - ps->p % u) : ps->p;
    if (at < end && numel <= end - at) {
      mark_placed(ps, id);
      put(ps, id, at);
      ps->p = at + numel;
      probes = 0;
      k = fill_find(ps, fill_last_fitting(ps, end - ps->p));
    } else {
      probes++;
      k = fill_find(ps, k - 1);
    }
  }
}

/* Place tensor id at the cursor: align, fill the gap. */
static int
place(pack_t *ps, int64_t id)
{
  int64_t u = unit_of(ps, id), numel = numel_of(ps, id);
  int64_t at, end;

  mark_placed(ps, id); /* before its own gap is filled */
  if (dbuf__round_up(ps->p, u, &at) || dbuf__add(at, numel, &end))
    goto overflow;
  if (at > ps->p)
    fill_gap(ps, at);
  put(ps, id, at);
  ps->p = end;
  return 0;
overflow:
  return dbuf__diag(ps->diag, DBUF_EOVERFLOW,
                    "tensor %s: buffer offset overflows 64 bits",
                    dbuf_tensors_name(ps->t, id));
}

/* The class's next unplaced id, or -1; advances its head. */
static int64_t
class_next(pack_t *ps, int64_t c)
{
  pclass_t *k = &ps->cls[c];
  while (k->head < k->end && ps->placed[ps->cls_ids[k->head]])
    k->head++;
  return k->head < k->end ? ps->cls_ids[k->head] : -1;
}

static int
heap_less(const pack_t *ps, int64_t a, int64_t b)
{
  return ps->cls_ids[ps->cls[a].head] < ps->cls_ids[ps->cls[b].head];
}

static void
heap_push(pack_t *ps, int64_t c)
{
  int64_t k = ps->nheap++;
  while (k > 0 && heap_less(ps, c, ps->heap[(k - 1) / 2])) {
    ps->heap[k] = ps->heap[(k - 1) / 2];
    k = (k - 1) / 2;
  }
  ps->heap[k] = c;
}

static int64_t
heap_pop(pack_t *ps)
{
  int64_t top = ps->heap[0], last = ps->heap[--ps->nheap], k = 0;
  for (;;) {
    int64_t ch = 2 * k + 1;
    if (ch >= ps->nheap)
      break;
    if (ch + 1 < ps->nheap && heap_less(ps, ps->heap[ch + 1], ps->heap[ch]))
      ch++;
    if (!heap_less(ps, ps->heap[ch], last))
      break;
    ps->heap[k] = ps->heap[ch];
    k = ch;
  }
  if (ps->nheap > 0)
    ps->heap[k] = last;
  return top;
}

/* The ordered pass (see the top of the file). */
static int
pass_ordered(pack_t *ps)
{
  int64_t probe[WINDOW];
  int rc;

  for (int64_t c = 0; c < ps->ncls; c++)
    heap_push(ps, c);
  while (ps->nheap > 0) {
    int np = 0;
    int64_t chosen = -1;
    while (ps->nheap > 0 && np < WINDOW) {
      int64_t c = heap_pop(ps), head = ps->cls[c].head;
      if (class_next(ps, c) < 0)
        continue;
      if (ps->cls[c].head != head) { /* filled meanwhile: requeue by its new id */
        heap_push(ps, c);
        continue;
      }
      if (ps->p % ps->cls[c].unit == 0) {
        chosen = c;
        break;
      }
      probe[np++] = c;
    }
    if (chosen < 0) {
      if (np == 0)
        break;
      chosen = probe[0];
      memmove(probe, probe + 1, (size_t)(--np) * sizeof *probe);
    }
    for (int j = 0; j < np; j++)
      heap_push(ps, probe[j]);
    if ((rc = place(ps, ps->cls_ids[ps->cls[chosen].head])) != 0)
      return rc;
    if (class_next(ps, chosen) >= 0)
      heap_push(ps, chosen);
  }
  return 0;
}

/* The grouped pass: classes by unit, largest first. */
static int
pass_grouped(pack_t *ps)
{
  int rc;
  for (int64_t c = ps->ncls - 1; c >= 0; c--) {
    int64_t id;
    while ((id = class_next(ps, c)) >= 0)
      if ((rc = place(ps, id)) != 0)
        return rc;
  }
  return 0;
}

/* One pass into fresh off[n] and seq[n] (the caller frees them, also on
 * failure); every offset must be written (a tensor left out would leave
 * its offset unset, and the order short), else an internal error. */
static int
run_pass(pack_t *ps, int (*pass)(pack_t *), int64_t **off, int64_t **seq)
{
  int rc;
  *off = dbuf__mallocn(ps->n, sizeof **off);
  *seq = dbuf__mallocn(ps->n, sizeof **seq);
  if (*off == NULL || *seq == NULL)
    return DBUF_ENOMEM;
  pack_reset(ps, *off, *seq);
  if ((rc = pass(ps)) != 0 || ps->nseq == ps->n)
    return rc;
  return dbuf__diag(ps->diag, DBUF_ELAYOUT, "internal error: compact placed %lld of %lld tensors",
                    (long long)ps->nseq, (long long)ps->n);
}

/* Replace *off by the padded layout's offsets when its tensors end earlier. */
static int
take_padded(const dbuf_tensors_t *t, const dbuf_layout_params_t *p,
            int64_t **off, int64_t *end, dbuf_diag_t *diag)
{
  dbuf_layout_t *l;
  dbuf_layout_params_t pp = *p;
  int rc;

  pp.kind = DBUF_LAYOUT_PADDED;
  if ((rc = dbuf__layout_build_padded(t, &pp, &l, diag)) != 0)
    return rc;
  int64_t n = dbuf_tensors_count(t), pend = 0;
  for (int64_t i = 0; i < n; i++) {
    int64_t e = l->offsets[i] + dbuf_tensors_numel(t, i); /* inside l->size */
    if (e > pend)
      pend = e;
  }
  if (pend < *end) {
    memcpy(*off, l->offsets, (size_t)n * sizeof **off);
    *end = pend;
  }
  dbuf_layout_destroy(l);
  return 0;
}

int
dbuf__layout_build_compact(const dbuf_tensors_t *t, const dbuf_layout_params_t *p,
                           dbuf_layout_t **out, dbuf_diag_t *diag)
{
  int64_t n = dbuf_tensors_count(t), chunk, stripe, bound;
  int64_t *off = NULL, *alt = NULL, *range = NULL, size, end;
  int64_t *seq = NULL, *alt_seq = NULL; /* each pass's order, by offset */
  pack_t ps;
  int rc;

  memset(&ps, 0, sizeof ps);
  if ((rc = dbuf__layout_chunk(t, p->block_size, &chunk, diag)) != 0)
    return rc;
  if (dbuf__mul(chunk, p->nranks, &stripe) ||
      dbuf__round_up(dbuf_tensors_total(t), stripe, &bound))
    return dbuf__diag(diag, DBUF_EOVERFLOW,
                      "buffer size (%lld elements padded to chunk %lld x %d "
                      "ranks) overflows 64 bits",
                      (long long)dbuf_tensors_total(t), (long long)chunk,
                      p->nranks);
  if ((rc = pack_init(&ps, t, p, diag)) != 0 ||
      (rc = run_pass(&ps, pass_ordered, &off, &seq)) != 0)
    goto fail;
  end = ps.p;
  if (end > bound && ps.m > 0) {
    int64_t ordered_end = end;
    if ((rc = run_pass(&ps, pass_grouped, &alt, &alt_seq)) != 0)
      goto fail;
    if (ps.p < ordered_end) {
      int64_t *tmp = off;
      off = alt;
      alt = tmp;
      tmp = seq;
      seq = alt_seq;
      alt_seq = tmp;
      end = ps.p;
    }
  }
  if (end > bound && ps.m > 0 && p->align_elems <= 1) {
    int64_t packed_end = end;
    if ((rc = take_padded(t, p, &off, &end, diag)) != 0)
      goto fail;
    if (end != packed_end) { /* the padded offsets: their order is sorted anew */
      free(seq);
      seq = NULL;
    }
  }

  if ((rc = dbuf__layout_segments(end, chunk, p->nranks, &range, &size)) != 0)
    goto fail;
  pack_free(&ps);
  free(alt);
  free(alt_seq);
  rc = dbuf__layout_assemble_ordered(t, DBUF_LAYOUT_COMPACT, p->nranks, p->block_size,
                                     chunk, size, off, range, NULL, seq, out);
  if (rc != 0)
    return dbuf__diag(diag, rc, "layout: %s", dbuf_strerror(rc));
  return 0;
fail:
  if (rc == DBUF_ENOMEM && diag && diag->code == 0)
    dbuf__diag(diag, rc, "out of memory for %lld tensors", (long long)n);
  else if (rc == DBUF_EOVERFLOW && diag && diag->code == 0)
    dbuf__diag(diag, rc, "compact buffer size overflows 64 bits");
  pack_free(&ps);
  free(off);
  free(alt);
  free(seq);
  free(alt_seq);
  free(range);
  return rc;
}
