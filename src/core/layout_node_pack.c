/*
 * Node-aware packing for the equal-segment kinds (padded and compact with
 * node_size K): nodes hold runs of K segments of S elements, so node
 * boundaries are the multiples of B = K x S.
 *
 * Tensors larger than B cannot avoid a boundary; they go first, back to
 * back in id order, each at a multiple of its unit.  Every other non-empty
 * tensor is given a node in decreasing size (ties by id), each node filled
 * from its start in that order, every tensor at the next multiple of its
 * unit after the node's fill mark.  Rules, each tried only when the ones
 * before leave a tensor without a node:
 *  - first fit: the lowest node whose free space (node end minus fill mark,
 *    kept in a max segment tree over the nodes) holds the tensor;
 *  - worst fit: first the node the large tensors end in takes the largest
 *    tensors that fit its rest; then each tensor goes to the lowest node
 *    with the most free space.  First fit packs the largest tensors two or
 *    three to a node and may leave every node a rest too small for the
 *    next size down (llama-3.1-70b at dp 1024: two 56 Mi MLP weights a node
 *    leave 28 Mi, room for one 16 Mi q/o weight); worst fit spreads them
 *    so that the nodes left with one fewer take the next size in bulk;
 *  - worst fit with a head, when there are large tensors: the h = 1 ..
 *    HEADS largest other tensors first, at the start of node 0 (they must
 *    fit in it), then the large tensors, then worst fit.  The large run
 *    then ends one node later, and that node's rest, with the head, can
 *    take tensors the rest of the shorter run could not (llama-3.1-70b at
 *    dp 1024: two MLP weights ahead of the embeddings, 137u instead of
 *    139.25u a node, u = 4 Mi).
 * Either way, when the chosen node cannot take the tensor once aligned, it
 * goes to the lowest node with at least numel + unit - 1 free, where it
 * always fits.  O(n log nodes) a packing, at most 2 + HEADS of them for
 * one segment size.
 * A tensor given a node never crosses its end, and alignment costs only the
 * gaps it really leaves (no per-node reserve), so a node-sized tensor at a
 * node start fills the node exactly.
 *
 * Why the padding can still grow much more than 1% (README, --node-size):
 * tensors barely more than half, a third, ... of a node's span cannot share
 * a node with one another, and the leftover of each node is wasted when no
 * other tensor is small enough for it.  On llama-3.1-8b, llama-3.1-70b and
 * mixtral-8x7b at dp 1024 with K = 8 no whole-tensor placement meets 1%
 * (the first and the last reach their bound; 70b +4.24%, bound +3.45%).
 *
 * Offsets are multiples of each tensor's unit and segments multiples of the
 * chunk: every rank cut lands on a row boundary (see layout_compact.c), and
 * the layout satisfies every padded invariant.  S is the least multiple of
 * the chunk, from the padding lower bound up, for which one rule finds
 * every tensor a node (exponential then binary search: O(log) sizes).
 */
#include "core_internal.h"
#include "layout_internal.h"

#include <stdlib.h>
#include <string.h>

enum {
  ROUNDS = 62, /* doublings of the step before giving up */
  HEADS = 4    /* the most tensors put before the large ones */
};

/* Max segment tree over the free space of the nodes. */
typedef struct {
  int64_t base;
  int64_t *v;
} maxtree_t;

static void
maxtree_set(maxtree_t *mt, int64_t i, int64_t val)
{
  int64_t k = mt->base + i;
  mt->v[k] = val;
  for (k /= 2; k >= 1; k /= 2)
    mt->v[k] = mt->v[2 * k] > mt->v[2 * k + 1] ? mt->v[2 * k] : mt->v[2 * k + 1];
}

/* Lowest node with at least need free, or -1. */
static int64_t
maxtree_first(const maxtree_t *mt, int64_t need)
{
  if (mt->v[1] < need)
    return -1;
  int64_t k = 1;
  while (k < mt->base)
    k = mt->v[2 * k] >= need ? 2 * k : 2 * k + 1;
  return k - mt->base;
}

typedef struct {
  const dbuf_tensors_t *t;
  int64_t n, nnodes;
  int64_t *unit;   /* [n] */
  dbuf__key3_t *bysize;  /* [m] non-empty tensors, numel descending, then id */
  int64_t m;
  int64_t *fill;   /* [nnodes] fill mark of each node */
  char *done;      /* [n] placed in this run (worst fit) */
  int large;       /* the last run had tensors larger than a node */
  maxtree_t mt;
} npack_t;

/*
 * Pack for segments of seg elements.  *left gets the elements that found no
 * node (0 on success, and then off is complete).
 */
static int
npack_run(npack_t *np, int64_t seg, int nranks, int k, int worst, int head, int64_t *off,
          int64_t *left)
{
  int64_t B, size, p = 0;
  if (dbuf__mul(seg, k, &B) || dbuf__mul(seg, nranks, &size))
    return DBUF_EOVERFLOW;
  *left = 0;
  for (int64_t i = 0; i < np->n; i++)
    off[i] = 0; /* empty tensors: 0, a multiple of every unit */
  if (worst)
    memset(np->done, 0, (size_t)np->n);
  /* Worst fit with a head: the head largest tensors of at most B elements
   * at the start of node 0, in size order, before the large ones. */
  for (int64_t q = 0; q < np->m && head > 0; q++) {
    int64_t id = np->bysize[q].id, numel = -np->bysize[q].a;
    if (numel > B)
      continue;
    if (dbuf__round_up(p, np->unit[id], &off[id]) || dbuf__add(off[id], numel, &p))
      return DBUF_EOVERFLOW;
    np->done[id] = 1;
    head--;
  }
  if (p > B) { /* the head does not fit in node 0 */
    *left = p;
    return 0;
  }
  /* Large tensors, in id order. */
  int64_t p0 = p;
  for (int64_t i = 0; i < np->n; i++) {
    int64_t numel = dbuf_tensors_numel(np->t, i);
    if (numel <= B)
      continue;
    if (dbuf__round_up(p, np->unit[i], &off[i]) || dbuf__add(off[i], numel, &p))
      return DBUF_EOVERFLOW;
  }
  np->large = p > p0;
  if (p > size) { /* a head pushed the large tensors past the buffer's end */
    *left = p - size;
    return 0;
  }
  for (int64_t j = 0; j < np->mt.base; j++) {
    int64_t free = 0;
    if (j < np->nnodes) {
      /* min(start + B, size) without forming start + B, which may pass
       * INT64_MAX for the last node (start <= size here) */
      int64_t start = j * B, stop = size - start > B ? start + B : size;
      np->fill[j] = start > p ? start : p;
      free = stop - np->fill[j];
    }
    np->mt.v[np->mt.base + j] = free > 0 ? free : 0;
  }
  for (int64_t j = np->mt.base - 1; j >= 1; j--)
    np->mt.v[j] = np->mt.v[2 * j] > np->mt.v[2 * j + 1] ? np->mt.v[2 * j] : np->mt.v[2 * j + 1];
  /*
   * Worst fit first fills the node the large tensors end in, with the
   * largest tensors that fit its rest (pass 0), then spreads the others
   * (pass 1).  First fit has only pass 1.  Each tensor is placed as it is
   * given its node.
   */
  int64_t jp = worst && p % B != 0 && p / B < np->nnodes ? p / B : -1;
  for (int pass = jp >= 0 ? 0 : 1; pass < 2; pass++) {
    for (int64_t q = 0; q < np->m; q++) {
      int64_t id = np->bysize[q].id, numel = -np->bysize[q].a, u = np->unit[id], o, e, j;
      if (numel > B || (worst && np->done[id]))
        continue;
      if (pass == 0) {
        j = jp;
      } else {
        /* worst fit: the lowest node with the most room; first fit: the
         * lowest with numel free */
        j = maxtree_first(&np->mt, worst ? np->mt.v[1] : numel);
        if (j >= 0 && np->mt.v[np->mt.base + j] < numel)
          j = -1;
      }
      if (j >= 0) {
        if (dbuf__round_up(np->fill[j], u, &o) || dbuf__add(o, numel, &e))
          return DBUF_EOVERFLOW;
        if (e - np->fill[j] > np->mt.v[np->mt.base + j]) { /* the gap does not fit */
          int64_t need;
          if (pass == 0)
            continue;
          if (dbuf__add(numel, u - 1, &need))
            return DBUF_EOVERFLOW;
          j = maxtree_first(&np->mt, need);
          if (j >= 0 && (dbuf__round_up(np->fill[j], u, &o) || dbuf__add(o, numel, &e)))
            return DBUF_EOVERFLOW;
        }
      }
      if (j < 0) {
        *left += numel; /* <= the logical total: no overflow */
        continue;
      }
      if (worst)
        np->done[id] = 1;
      off[id] = o;
      maxtree_set(&np->mt, j, np->mt.v[np->mt.base + j] - (e - np->fill[j]));
      np->fill[j] = e;
    }
  }
  return 0;
}

/*
 * np->bysize[m], filled in id order, sorted by numel descending, then id: a
 * hash table finds the distinct sizes (a model has few: its layer shapes),
 * only those are sorted, and a counting sort, stable, lists the tensors.
 * O(m + sizes log sizes) instead of a comparison sort of m keys.
 */
static int
sort_by_size(npack_t *np)
{
  int64_t m = np->m, cap = 16, bits = 4, d = 0;
  while (cap < 2 * m) {
    cap *= 2;
    bits++;
  }
  int64_t *slot = dbuf__calloc(cap, sizeof *slot);        /* size class + 1, 0 = free */
  dbuf__key3_t *sizes = dbuf__mallocn(m, sizeof *sizes);   /* (-numel, 0, class) */
  int64_t *cls = dbuf__mallocn(m, sizeof *cls), *pos = dbuf__mallocn(m + 1, sizeof *pos);
  dbuf__key3_t *sorted = dbuf__mallocn(m, sizeof *sorted);
  int rc = DBUF_ENOMEM;
  if (slot == NULL || sizes == NULL || cls == NULL || pos == NULL || sorted == NULL)
    goto out;
  for (int64_t q = 0; q < m; q++) {
    int64_t a = np->bysize[q].a;
    uint64_t h = ((uint64_t)a * 0x9e3779b97f4a7c15ULL) >> (64 - bits);
    while (slot[h] != 0 && sizes[slot[h] - 1].a != a)
      h = (h + 1) & (uint64_t)(cap - 1);
    if (slot[h] == 0) {
      sizes[d].a = a;
      sizes[d].b = 0;
      sizes[d].id = d;
      slot[h] = ++d;
    }
    cls[q] = slot[h] - 1;
  }
  qsort(sizes, (size_t)d, sizeof *sizes, dbuf__key3_cmp);
  for (int64_t c = 0; c < d; c++) /* slot reused: class -> its sorted place */
    slot[sizes[c].id] = c;
  memset(pos, 0, (size_t)(m + 1) * sizeof *pos);
  for (int64_t q = 0; q < m; q++)
    pos[slot[cls[q]] + 1]++;
  for (int64_t c = 0; c < d; c++)
    pos[c + 1] += pos[c];
  for (int64_t q = 0; q < m; q++)
    sorted[pos[slot[cls[q]]]++] = np->bysize[q];
  memcpy(np->bysize, sorted, (size_t)m * sizeof *sorted);
  rc = 0;
out:
  free(slot);
  free(sizes);
  free(cls);
  free(pos);
  free(sorted);
  return rc;
}

/*
 * First fit decreasing, and when it leaves tensors without a node, worst
 * fit decreasing (see the top of the file): *left is the latter's.
 */
static int
npack_try(npack_t *np, int64_t seg, int nranks, int k, int64_t *off, int64_t *left)
{
  int64_t h_left;
  int rc = npack_run(np, seg, nranks, k, 0, 0, off, left);
  if (rc != 0 || *left == 0 || (rc = npack_run(np, seg, nranks, k, 1, 0, off, left)) != 0 ||
      *left == 0 || !np->large)
    return rc;
  for (int h = 1; h <= HEADS; h++) {
    if ((rc = npack_run(np, seg, nranks, k, 1, h, off, &h_left)) != 0 || h_left == 0) {
      *left = h_left;
      return rc;
    }
  }
  return 0; /* *left: worst fit's without a head, for the search's step */
}

int
dbuf__layout_build_node_packed(const dbuf_tensors_t *t, const dbuf_layout_params_t *p,
                               dbuf_layout_t **out, dbuf_diag_t *diag)
{
  int64_t n = dbuf_tensors_count(t), chunk, stripe, bound, seg, left;
  int64_t align = p->kind == DBUF_LAYOUT_COMPACT && p->align_elems > 1 ? p->align_elems : 1;
  int64_t *off = NULL, *range = NULL, size;
  npack_t np;
  int k = p->node_size, rc;

  memset(&np, 0, sizeof np);
  if ((rc = dbuf__layout_chunk(t, p->block_size, &chunk, diag)) != 0)
    return rc;
  if (dbuf__mul(chunk, p->nranks, &stripe) ||
      dbuf__round_up(dbuf_tensors_total(t), stripe, &bound))
    return dbuf__diag(diag, DBUF_EOVERFLOW,
                      "buffer size (%lld elements padded to chunk %lld x %d "
                      "ranks) overflows 64 bits",
                      (long long)dbuf_tensors_total(t), (long long)chunk, p->nranks);
  np.t = t;
  np.n = n;
  np.nnodes = (p->nranks + k - 1) / k;
  np.mt.base = 1;
  while (np.mt.base < np.nnodes)
    np.mt.base *= 2;
  off = dbuf__mallocn(n, sizeof *off);
  np.unit = dbuf__mallocn(n, sizeof *np.unit);
  np.bysize = dbuf__mallocn(n, sizeof *np.bysize);
  np.fill = dbuf__mallocn(np.nnodes, sizeof *np.fill);
  np.done = dbuf__mallocn(n, 1);
  np.mt.v = dbuf__mallocn(2 * np.mt.base, sizeof *np.mt.v);
  if (off == NULL || np.unit == NULL || np.bysize == NULL || np.fill == NULL ||
      np.done == NULL || np.mt.v == NULL) {
    rc = dbuf__diag(diag, DBUF_ENOMEM, "out of memory for %lld tensors", (long long)n);
    goto fail;
  }
  for (int64_t i = 0; i < n; i++) {
    int64_t u;
    if ((rc = dbuf__tensor_unit(t, i, p->block_size, align, &u, diag)) != 0)
      goto fail;
    np.unit[i] = u;
    if (dbuf_tensors_numel(t, i) > 0) {
      np.bysize[np.m].a = -dbuf_tensors_numel(t, i);
      np.bysize[np.m].b = 0;
      np.bysize[np.m].id = i;
      np.m++;
    }
  }
  if (sort_by_size(&np) != 0) {
    rc = dbuf__diag(diag, DBUF_ENOMEM, "out of memory for %lld tensors", (long long)n);
    goto fail;
  }

  /*
   * The least segment (in chunks) found feasible: from the lower bound, grow
   * by the leftover's share, doubling the step until everything fits, then
   * bisect between the last failure and the first success.
   */
  int64_t lo = bound / p->nranks, hi, step;
  if ((rc = npack_try(&np, lo, p->nranks, k, off, &left)) != 0)
    goto overflow;
  if (left > 0) {
    if (dbuf__round_up((left + p->nranks - 1) / p->nranks, chunk, &step))
      goto overflow;
    for (int round = 0;; round++) {
      if (round == ROUNDS) {
        rc = dbuf__diag(diag, DBUF_ELAYOUT,
                        "node-aware packing found no room for %lld elements",
                        (long long)left);
        goto fail;
      }
      if (dbuf__add(lo, step, &hi) ||
          (rc = npack_try(&np, hi, p->nranks, k, off, &left)) != 0)
        goto overflow;
      if (left == 0)
        break;
      lo = hi;
      if (dbuf__mul(step, 2, &step))
        goto overflow;
    }
    while (hi - lo > chunk) {
      int64_t mid = lo + (hi - lo) / chunk / 2 * chunk;
      if ((rc = npack_try(&np, mid, p->nranks, k, off, &left)) != 0)
        goto overflow;
      if (left == 0)
        hi = mid;
      else
        lo = mid;
    }
    if ((rc = npack_try(&np, hi, p->nranks, k, off, &left)) != 0)
      goto overflow;
    lo = hi;
  }
  seg = lo;
  if (dbuf__mul(seg, p->nranks, &size) ||
      (rc = dbuf__layout_segments(size, chunk, p->nranks, &range, &size)) != 0)
    goto overflow;
  free(np.unit);
  free(np.bysize);
  free(np.fill);
  free(np.done);
  free(np.mt.v);
  rc = dbuf__layout_assemble(t, p->kind, p->nranks, p->block_size, chunk, size, off,
                             range, NULL, out);
  if (rc != 0)
    return dbuf__diag(diag, rc, "layout: %s", dbuf_strerror(rc));
  return 0;
overflow:
  rc = dbuf__diag(diag, DBUF_EOVERFLOW, "node-aware buffer size overflows 64 bits");
fail:
  free(off);
  free(np.unit);
  free(np.bysize);
  free(np.fill);
  free(np.done);
  free(np.mt.v);
  return rc;
}
