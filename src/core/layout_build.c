/*
 * The layout builders: padded (Megatron-FSDP RowAtomic/BlockAtomic),
 * unpadded, tensor (TensorAtomic) and the LPT owner planner.
 *
 * None of them loops quadratically over tensors: the padded builder finds
 * conjugates with a min segment tree over remainders and fills gaps from
 * fragments grouped by element count, so 45,395 DeepSeek-V3 tensors take
 * milliseconds.
 */
#include "core_internal.h"
#include "layout_internal.h"

#include <stdlib.h>
#include <string.h>

static int
check_common(const dbuf_tensors_t *t, const dbuf_layout_params_t *p,
             dbuf_diag_t *diag)
{
  if (p->nranks < 1)
    return dbuf__diag(diag, DBUF_ENRANKS, "dp size must be positive, got %d",
                      p->nranks);
  if (p->block_size < 1)
    return dbuf__diag(diag, DBUF_EINVAL, "block size must be positive, got %lld",
                      (long long)p->block_size);
  if (p->align_elems < 0)
    return dbuf__diag(diag, DBUF_EINVAL, "alignment must not be negative, got %lld",
                      (long long)p->align_elems);
  if (p->node_size < 0)
    return dbuf__diag(diag, DBUF_EINVAL, "node size must not be negative, got %d",
                      p->node_size);
  /* Once a distinct shape; only when one fails, the tensors in id order
   * for the first that has it. */
  int64_t n = dbuf_tensors_count(t), ns = dbuf__tensors_nshapes(t), bad = 0;
  for (int64_t s = 0; s < ns && !bad; s++)
    bad = dbuf__tensors_shape_rows(t, s) % p->block_size != 0;
  for (int64_t i = 0; i < n && bad; i++) {
    int64_t rows = dbuf_tensors_rows(t, i);
    if (rows % p->block_size != 0) {
      char shape[256];
      dbuf_tensors_shape_str(t, i, shape, sizeof shape);
      return dbuf__diag(diag, DBUF_EBLOCK,
                        "tensor %s (shape %s): dim 0 = %lld not divisible by "
                        "block size %lld",
                        dbuf_tensors_name(t, i), shape, (long long)rows,
                        (long long)p->block_size);
    }
  }
  return 0;
}

int
dbuf__layout_chunk(const dbuf_tensors_t *t, int64_t block_size, int64_t *chunk,
                   dbuf_diag_t *diag)
{
  int64_t c = 1, n = dbuf_tensors_count(t), ns = dbuf__tensors_nshapes(t);
  /* Once a distinct shape the tensors use, not once a tensor: a shape seen
   * again changes no LCM.  An overflow goes to the loop over the tensors,
   * which names the first tensor it hits. */
  uint8_t *used = ns < n ? dbuf__calloc(ns, 1) : NULL;
  if (used != NULL) {
    for (int64_t i = 0; i < n; i++)
      used[dbuf__tensors_shape_id(t, i)] = 1;
    int ok = 1;
    for (int64_t s = 0; s < ns && ok; s++) {
      int64_t a;
      if (used[s])
        ok = !dbuf__mul(block_size, dbuf__tensors_shape_row_elems(t, s), &a) &&
             !dbuf__mul(c / dbuf__gcd(c, a), a, &c);
    }
    free(used);
    if (ok) {
      *chunk = c;
      return 0;
    }
    c = 1;
  }
  for (int64_t i = 0; i < n; i++) {
    int64_t a;
    if (dbuf__mul(block_size, dbuf_tensors_row_elems(t, i), &a))
      return dbuf__diag(diag, DBUF_EOVERFLOW,
                        "tensor %s: block size x row size overflows 64 bits",
                        dbuf_tensors_name(t, i));
    if (dbuf__mul(c / dbuf__gcd(c, a), a, &c))
      return dbuf__diag(diag, DBUF_EOVERFLOW,
                        "tensor %s: chunk size (LCM of block x row sizes) "
                        "overflows 64 bits",
                        dbuf_tensors_name(t, i));
  }
  *chunk = c;
  return 0;
}

int
dbuf__layout_segments(int64_t end, int64_t unit, int nranks, int64_t **range_out,
                   int64_t *size_out)
{
  int64_t total_unit, size;
  if (dbuf__mul(unit, nranks, &total_unit) ||
      dbuf__round_up(end, total_unit, &size))
    return DBUF_EOVERFLOW;
  int64_t *range = dbuf__mallocn((int64_t)nranks + 1, sizeof *range);
  if (range == NULL)
    return DBUF_ENOMEM;
  int64_t seg = size / nranks;
  for (int r = 0; r <= nranks; r++)
    range[r] = seg * r;
  *range_out = range;
  *size_out = size;
  return 0;
}

/* ------------------------------------------------------------------ */
/* padded                                                               */

/* Min segment tree over the remainders of the unplaced regular tensors. */
typedef struct {
  int64_t n, base; /* leaves at [base, base + n) */
  int64_t *v;
} mintree_t;

static int
mintree_init(mintree_t *mt, int64_t n)
{
  mt->n = n;
  mt->base = 1;
  while (mt->base < n)
    mt->base *= 2;
  mt->v = dbuf__mallocn(2 * mt->base, sizeof *mt->v);
  if (mt->v == NULL)
    return DBUF_ENOMEM;
  for (int64_t i = 0; i < 2 * mt->base; i++)
    mt->v[i] = INT64_MAX;
  return 0;
}

/* Set leaf i; the walk up stops where a minimum does not change (the ones
 * above it cannot change either). */
static void
mintree_set(mintree_t *mt, int64_t i, int64_t val)
{
  int64_t k = mt->base + i;
  mt->v[k] = val;
  for (k /= 2; k >= 1; k /= 2) {
    int64_t a = mt->v[2 * k], b = mt->v[2 * k + 1], m = a < b ? a : b;
    if (mt->v[k] == m)
      break;
    mt->v[k] = m;
  }
}

/* The inner nodes from the leaves, bottom up: O(n), where setting the
 * leaves one by one is O(n log n). */
static void
mintree_build(mintree_t *mt)
{
  for (int64_t k = mt->base - 1; k >= 1; k--) {
    int64_t a = mt->v[2 * k], b = mt->v[2 * k + 1];
    mt->v[k] = a < b ? a : b;
  }
}

/* Leftmost index >= lo whose value is <= limit, or -1. */
static int64_t
mintree_first(const mintree_t *mt, int64_t node, int64_t nlo, int64_t nhi,
              int64_t lo, int64_t limit)
{
  if (nhi <= lo || mt->v[node] > limit)
    return -1;
  if (nhi - nlo == 1)
    return nlo;
  int64_t mid = (nlo + nhi) / 2;
  int64_t r = mintree_first(mt, 2 * node, nlo, mid, lo, limit);
  if (r >= 0)
    return r;
  return mintree_first(mt, 2 * node + 1, mid, nhi, lo, limit);
}

/*
 * Fragments grouped by element count (descending); within a group, by
 * alignment, each alignment a queue of ids in id order.  The walk of one gap
 * visits fragments in (numel desc, id asc) order exactly as a linear scan
 * would, but skips groups that cannot fit and alignments that already failed.
 */
typedef struct {
  int64_t numel;
  int64_t sub_begin, sub_end; /* subgroups of this group */
  int64_t live;               /* subgroups not exhausted */
} fgroup_t;

typedef struct {
  int64_t align;
  int64_t head, end; /* ids[head..end) not yet placed */
} fsub_t;

typedef struct {
  int64_t *ids; /* fragment ids grouped: group, then alignment, then id */
  fgroup_t *g;
  int64_t ng;
  fsub_t *s;
  int64_t ns;
  int64_t *skip; /* union-find: next group index >= i that is not empty */
  char *dead;    /* [ns]: alignment failed in the gap being filled */
} frags_t;

typedef struct {
  int64_t numel, align, id;
} frag_key_t;

static int
cmp_frag_key(const void *a, const void *b)
{
  const frag_key_t *x = a, *y = b;
  if (x->numel != y->numel)
    return x->numel > y->numel ? -1 : 1;
  if (x->align != y->align)
    return x->align < y->align ? -1 : 1;
  return (x->id > y->id) - (x->id < y->id);
}

static void
frags_free(frags_t *f)
{
  free(f->ids);
  free(f->g);
  free(f->s);
  free(f->skip);
  free(f->dead);
}

/* The groups of the nf fragment keys, which are sorted in place. */
static int
frags_init(frags_t *f, frag_key_t *keys, int64_t nf)
{
  memset(f, 0, sizeof *f);
  f->ids = dbuf__mallocn(nf, sizeof *f->ids);
  f->g = dbuf__mallocn(nf, sizeof *f->g);
  f->s = dbuf__mallocn(nf, sizeof *f->s);
  f->skip = dbuf__mallocn(nf + 1, sizeof *f->skip);
  f->dead = dbuf__calloc(nf, 1);
  if (f->ids == NULL || f->g == NULL || f->s == NULL || f->skip == NULL ||
      f->dead == NULL)
    return DBUF_ENOMEM;
  qsort(keys, (size_t)nf, sizeof *keys, cmp_frag_key);
  for (int64_t i = 0; i < nf; i++) {
    f->ids[i] = keys[i].id;
    if (i == 0 || keys[i].numel != keys[i - 1].numel) {
      f->g[f->ng].numel = keys[i].numel;
      f->g[f->ng].sub_begin = f->ns;
      f->g[f->ng].live = 0;
      f->ng++;
    }
    if (i == 0 || keys[i].numel != keys[i - 1].numel ||
        keys[i].align != keys[i - 1].align) {
      f->s[f->ns].align = keys[i].align;
      f->s[f->ns].head = i;
      f->ns++;
      f->g[f->ng - 1].live++;
    }
    f->s[f->ns - 1].end = i + 1;
    f->g[f->ng - 1].sub_end = f->ns;
  }
  for (int64_t i = 0; i <= f->ng; i++)
    f->skip[i] = i;
  return 0;
}

static int64_t
frags_next(frags_t *f, int64_t i)
{
  int64_t root = i;
  while (f->skip[root] != root)
    root = f->skip[root];
  while (f->skip[i] != root) {
    int64_t nx = f->skip[i];
    f->skip[i] = root;
    i = nx;
  }
  return root;
}

/* First group index >= from whose numel <= space (groups sorted desc). */
static int64_t
frags_first_fitting(const frags_t *f, int64_t from, int64_t space)
{
  int64_t lo = from, hi = f->ng;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (f->g[mid].numel <= space)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

/* Place the fragments that fit in [cursor, end), in the single-pass order;
 * each id also goes to seq[(*nseq)++] (their offsets rise). */
static void
frags_fill(frags_t *f, int64_t cursor, int64_t end, int64_t *offsets, int64_t *seq,
           int64_t *nseq)
{
  int64_t k = frags_next(f, frags_first_fitting(f, 0, end - cursor));
  while (k < f->ng) {
    fgroup_t *g = &f->g[k];
    if (g->numel > end - cursor) {
      k = frags_next(f, frags_first_fitting(f, k, end - cursor));
      continue;
    }
    /* Candidates of this group: heads of the live alignments, by id. */
    int64_t nsub = g->sub_end - g->sub_begin;
    char *dead = f->dead + g->sub_begin;
    memset(dead, 0, (size_t)nsub);
    for (;;) {
      int64_t best = -1;
      for (int64_t j = 0; j < nsub; j++) {
        fsub_t *s = &f->s[g->sub_begin + j];
        if (dead[j] || s->head == s->end)
          continue;
        if (best < 0 || f->ids[s->head] < f->ids[f->s[g->sub_begin + best].head])
          best = j;
      }
      if (best < 0)
        break;
      fsub_t *s = &f->s[g->sub_begin + best];
      int64_t at = cursor % s->align ? cursor + (s->align - cursor % s->align)
                                     : cursor;
      if (at <= end && g->numel <= end - at) {
        offsets[f->ids[s->head]] = at;
        seq[(*nseq)++] = f->ids[s->head];
        cursor = at + g->numel;
        if (++s->head == s->end)
          g->live--;
      } else {
        dead[best] = 1;
      }
    }
    if (g->live == 0)
      f->skip[k] = k + 1;
    k = frags_next(f, k + 1);
  }
}

/* The padded builder's state: tensors split into regular ones (at least a
 * chunk) and fragments, and where the placement has got to. */
typedef struct {
  const dbuf_tensors_t *t;
  int64_t n, chunk;
  int64_t *offsets;   /* [n], the result */
  int64_t *seq, nseq; /* [n] the ids as placed, by rising offset */
  int64_t *reg, nreg; /* regular tensor ids, id order */
  frag_key_t *fk;     /* [nfrag] fragment keys */
  int64_t nfrag;
  frags_t fr;
  mintree_t mt;       /* remainders of the unplaced regular tensors */
  char *placed;       /* [nreg] */
  int64_t end;        /* end of what is placed so far */
} padded_t;

static void
padded_free(padded_t *pd)
{
  frags_free(&pd->fr);
  free(pd->mt.v);
  free(pd->offsets);
  free(pd->seq);
  free(pd->reg);
  free(pd->fk);
  free(pd->placed);
}

/* Split the tensors into regular ones and fragments; build their indexes. */
static int
padded_init(padded_t *pd, const dbuf_tensors_t *t, int64_t block, dbuf_diag_t *diag)
{
  int rc;
  pd->t = t;
  pd->n = dbuf_tensors_count(t);
  if ((rc = dbuf__layout_chunk(t, block, &pd->chunk, diag)) != 0)
    return rc;
  pd->offsets = dbuf__mallocn(pd->n, sizeof *pd->offsets);
  pd->seq = dbuf__mallocn(pd->n, sizeof *pd->seq);
  pd->reg = dbuf__mallocn(pd->n, sizeof *pd->reg);
  pd->fk = dbuf__mallocn(pd->n, sizeof *pd->fk);
  if (pd->offsets == NULL || pd->seq == NULL || pd->reg == NULL || pd->fk == NULL)
    return dbuf__diag(diag, DBUF_ENOMEM, "out of memory for %lld tensors",
                      (long long)pd->n);
  const uint32_t *sid = dbuf__tensors_shape_ids(t);
  for (int64_t i = 0; i < pd->n; i++) {
    int64_t numel = dbuf__tensors_shape_numel(t, sid[i]);
    if (numel < pd->chunk) {
      /* block x row size divides the chunk: no overflow */
      pd->fk[pd->nfrag++] =
          (frag_key_t){numel, block * dbuf__tensors_shape_row_elems(t, sid[i]), i};
    } else {
      pd->reg[pd->nreg++] = i;
    }
  }
  if ((rc = frags_init(&pd->fr, pd->fk, pd->nfrag)) != 0 ||
      (rc = mintree_init(&pd->mt, pd->nreg)) != 0 ||
      (pd->placed = dbuf__calloc(pd->nreg, 1)) == NULL)
    return dbuf__diag(diag, DBUF_ENOMEM, "out of memory for %lld tensors",
                      (long long)pd->n);
  for (int64_t k = 0; k < pd->nreg; k++) {
    int64_t rem = dbuf__tensors_shape_numel(t, sid[pd->reg[k]]) % pd->chunk;
    if (rem != 0)
      pd->mt.v[pd->mt.base + k] = rem;
  }
  mintree_build(&pd->mt);
  return 0;
}

static void
padded_take(padded_t *pd, int64_t k, int64_t at)
{
  pd->placed[k] = 1;
  mintree_set(&pd->mt, k, INT64_MAX);
  pd->offsets[pd->reg[k]] = at;
}

static int
overflow_at(const padded_t *pd, int64_t id, dbuf_diag_t *diag)
{
  return dbuf__diag(diag, DBUF_EOVERFLOW, "tensor %s: buffer offset overflows 64 bits",
                    dbuf_tensors_name(pd->t, id));
}

/*
 * Regular tensor k at the (chunk-aligned) end.  A tensor that ends inside a
 * chunk takes the first later conjugate whose remainder fits the rest of the
 * chunk, placed to end on the chunk boundary, and fragments fill the gap
 * between them.
 */
static int
place_regular(padded_t *pd, int64_t k, dbuf_diag_t *diag)
{
  int64_t id = pd->reg[k], numel = dbuf_tensors_numel(pd->t, id);
  int64_t rem = numel % pd->chunk, end, next;
  padded_take(pd, k, pd->end);
  pd->seq[pd->nseq++] = id;
  if (dbuf__add(pd->end, numel, &end) || dbuf__round_up(end, pd->chunk, &next))
    return overflow_at(pd, id, diag);
  if (rem == 0) {
    pd->end = end;
    return 0;
  }
  int64_t gap_end = next;
  int64_t j = mintree_first(&pd->mt, 1, 0, pd->mt.base, k + 1, pd->chunk - rem);
  if (j >= 0) {
    int64_t cid = pd->reg[j], cnumel = dbuf_tensors_numel(pd->t, cid);
    gap_end = next - cnumel % pd->chunk;
    padded_take(pd, j, gap_end);
    if (dbuf__add(gap_end, cnumel, &next))
      return overflow_at(pd, cid, diag);
  }
  frags_fill(&pd->fr, end, gap_end, pd->offsets, pd->seq, &pd->nseq);
  if (j >= 0)
    pd->seq[pd->nseq++] = pd->reg[j]; /* after the fragments before it */
  pd->end = next;
  return 0;
}

/* Fragments left over go at the tail, largest first, each aligned; within a
 * group the tail order is by id across alignments. */
static int
place_tail(padded_t *pd, dbuf_diag_t *diag)
{
  frags_t *fr = &pd->fr;
  for (int64_t gi = 0; gi < fr->ng; gi++) {
    fgroup_t *g = &fr->g[gi];
    for (;;) {
      fsub_t *best = NULL;
      for (int64_t j = g->sub_begin; j < g->sub_end; j++) {
        fsub_t *s = &fr->s[j];
        if (s->head < s->end && (best == NULL || fr->ids[s->head] < fr->ids[best->head]))
          best = s;
      }
      if (best == NULL)
        break;
      int64_t at;
      if (dbuf__round_up(pd->end, best->align, &at) || dbuf__add(at, g->numel, &pd->end))
        return overflow_at(pd, fr->ids[best->head], diag);
      pd->offsets[fr->ids[best->head]] = at;
      pd->seq[pd->nseq++] = fr->ids[best->head];
      best->head++;
    }
  }
  return 0;
}

int
dbuf__layout_build_padded(const dbuf_tensors_t *t, const dbuf_layout_params_t *p,
                          dbuf_layout_t **out, dbuf_diag_t *diag)
{
  padded_t pd;
  int64_t *range = NULL, size;
  int rc;

  memset(&pd, 0, sizeof pd);
  if ((rc = padded_init(&pd, t, p->block_size, diag)) != 0)
    goto fail;
  /* Regular tensors in id order; the end stays chunk-aligned between them. */
  for (int64_t k = 0; k < pd.nreg; k++)
    if (!pd.placed[k] && (rc = place_regular(&pd, k, diag)) != 0)
      goto fail;
  if ((rc = place_tail(&pd, diag)) != 0)
    goto fail;
  if ((rc = dbuf__layout_segments(pd.end, pd.chunk, p->nranks, &range, &size)) != 0) {
    if (rc == DBUF_ENOMEM)
      rc = dbuf__diag(diag, rc, "out of memory for the offsets of %d ranks", p->nranks);
    else
      rc = dbuf__diag(diag, rc,
                      "buffer size (%lld elements padded to chunk %lld x %d "
                      "ranks) overflows 64 bits",
                      (long long)pd.end, (long long)pd.chunk, p->nranks);
    goto fail;
  }
  int64_t *offsets = pd.offsets, *order = pd.nseq == pd.n ? pd.seq : NULL;
  pd.offsets = NULL; /* assemble owns them now */
  if (order != NULL)
    pd.seq = NULL;
  padded_free(&pd);
  rc = dbuf__layout_assemble_ordered(t, DBUF_LAYOUT_PADDED, p->nranks, p->block_size,
                                     pd.chunk, size, offsets, range, NULL, order, out);
  if (rc != 0)
    return dbuf__diag(diag, rc, "layout: %s", dbuf_strerror(rc));
  return 0;
fail: /* diag is written where rc is set */
  padded_free(&pd);
  return rc;
}

/* ------------------------------------------------------------------ */
/* unpadded                                                             */

/*
 * Node-aware unpadded cuts: every node cut (rank r, r a multiple of K) that
 * falls strictly inside a tensor no larger than a node's share (K x size /
 * nranks) moves to that tensor's nearer end (ties to its start), and the
 * cuts inside a node are clamped between its two node cuts.  Tensor ends are
 * row boundaries, so every cut stays one; the segments stay non-decreasing.
 * O(nranks / K x log n + nranks).
 */
static void
node_cuts(const dbuf_tensors_t *t, int k, const int64_t *offsets,
          int64_t *range, int nranks, int64_t size)
{
  int64_t n = dbuf_tensors_count(t);
  __int128 share = (__int128)size * k; /* node share x nranks */
  for (int r = k; r < nranks; r += k) {
    int64_t cut = range[r], lo = 0, hi = n;
    /* Last tensor starting at or before cut (offsets ascend with id). */
    while (lo < hi) {
      int64_t mid = lo + (hi - lo) / 2;
      if (offsets[mid] <= cut)
        lo = mid + 1;
      else
        hi = mid;
    }
    if (lo == 0)
      continue;
    int64_t id = lo - 1, start = offsets[id], numel = dbuf_tensors_numel(t, id);
    if (cut != start && cut < start + numel &&
        (__int128)numel * nranks <= share)
      range[r] = cut - start <= start + numel - cut ? start : start + numel;
    if (r > k && range[r] < range[r - k]) /* keep the node cuts ordered */
      range[r] = range[r - k];
  }
  /* Clamp every cut between the node cuts around it (both already final). */
  for (int r = 1; r < nranks; r++) {
    if (r % k == 0)
      continue;
    int64_t lo = range[r / k * k], hi = r / k * k + k < nranks ? range[r / k * k + k] : size;
    if (range[r] < lo)
      range[r] = lo;
    if (range[r] > hi)
      range[r] = hi;
  }
}

static int
build_unpadded(const dbuf_tensors_t *t, const dbuf_layout_params_t *p,
               dbuf_layout_t **out, dbuf_diag_t *diag)
{
  int64_t n = dbuf_tensors_count(t), size = dbuf_tensors_total(t);
  int nranks = p->nranks;
  int64_t *offsets = dbuf__mallocn(n, sizeof *offsets);
  int64_t *range = dbuf__mallocn((int64_t)nranks + 1, sizeof *range);
  int rc;

  if (offsets == NULL || range == NULL) {
    free(offsets);
    free(range);
    return dbuf__diag(diag, DBUF_ENOMEM, "out of memory for %lld tensors",
                      (long long)n);
  }
  int64_t off = 0;
  for (int64_t i = 0; i < n; i++) {
    offsets[i] = off;
    off += dbuf_tensors_numel(t, i); /* total checked by the tensor list */
  }
  /*
   * Ideal cut r x size / nranks as an exact rational: compare numerators
   * over nranks in 128 bits.  Cuts only move forward, so one walk over the
   * tensors serves all ranks.
   */
  range[0] = 0;
  range[nranks] = size;
  int64_t ti = 0;
  for (int r = 1; r < nranks; r++) {
    __int128 ideal = (__int128)r * size; /* position x nranks */
    while (ti < n &&
           (__int128)(offsets[ti] + dbuf_tensors_numel(t, ti)) * nranks <= ideal)
      ti++;
    if (ti == n) {
      range[r] = size;
      continue;
    }
    __int128 start = (__int128)offsets[ti] * nranks;
    if (ideal <= start) {
      range[r] = offsets[ti];
      continue;
    }
    int64_t align = p->block_size * dbuf_tensors_row_elems(t, ti);
    __int128 unit = (__int128)align * nranks;
    int64_t k = (int64_t)((ideal - start) / unit);
    int64_t lower = offsets[ti] + k * align, upper = lower + align;
    __int128 dl = ideal - (__int128)lower * nranks;
    __int128 du = (__int128)upper * nranks - ideal;
    range[r] = du < dl ? upper : lower;
  }
  if (p->node_size > 1 && nranks > p->node_size)
    node_cuts(t, p->node_size, offsets, range, nranks, size);
  rc = dbuf__layout_assemble(t, DBUF_LAYOUT_UNPADDED, nranks, p->block_size, 0,
                             size, offsets, range, NULL, out);
  if (rc != 0)
    return dbuf__diag(diag, rc, "layout: %s", dbuf_strerror(rc));
  return 0;
}

/* ------------------------------------------------------------------ */
/* tensor                                                               */

static int
place_by_owners(const dbuf_tensors_t *t, const dbuf_layout_params_t *p,
                int *owners, dbuf_layout_t **out, dbuf_diag_t *diag)
{
  int64_t n = dbuf_tensors_count(t);
  int nranks = p->nranks;
  int64_t *offsets = dbuf__mallocn(n, sizeof *offsets);
  int64_t *range = dbuf__calloc((int64_t)nranks + 1, sizeof *range);
  int64_t *cursor = dbuf__mallocn(nranks, sizeof *cursor);
  int64_t *at = dbuf__mallocn(nranks, sizeof *at), *order = dbuf__mallocn(n, sizeof *order);
  int rc;

  if (offsets == NULL || range == NULL || cursor == NULL || at == NULL || order == NULL) {
    rc = dbuf__diag(diag, DBUF_ENOMEM, "out of memory for %lld tensors",
                    (long long)n);
    goto fail;
  }
  if ((rc = dbuf__layout_check_owners(t, owners, nranks, diag)) != 0)
    goto fail;
  /* Each rank's tensors in id order from its cursor; the order by offset
   * is the ids counted out by owner (at[r]: rank r's next place in it). */
  const uint32_t *sid = dbuf__tensors_shape_ids(t);
  int rising = 1; /* owners that never go down: offsets rise, no order */
  for (int r = 0; r < nranks; r++)
    at[r] = 0;
  for (int64_t i = 0; i < n; i++) {
    range[owners[i] + 1] += dbuf__tensors_shape_numel(t, sid[i]); /* <= total */
    at[owners[i]]++;
    rising &= i == 0 || owners[i - 1] <= owners[i];
  }
  if (rising) {
    free(order);
    order = NULL;
  }
  for (int64_t r = 0, k = 0; r < nranks; r++) {
    range[r + 1] += range[r];
    cursor[r] = range[r];
    int64_t c = at[r];
    at[r] = k;
    k += c;
  }
  for (int64_t i = 0; i < n; i++) {
    int o = owners[i];
    offsets[i] = cursor[o];
    cursor[o] += dbuf__tensors_shape_numel(t, sid[i]);
    if (order != NULL)
      order[at[o]++] = i;
  }
  free(cursor);
  free(at);
  rc = dbuf__layout_assemble_ordered(t, DBUF_LAYOUT_TENSOR, nranks, p->block_size, 0,
                                     range[nranks], offsets, range, owners, order, out);
  if (rc != 0)
    return dbuf__diag(diag, rc, "layout: %s", dbuf_strerror(rc));
  return 0;
fail:
  free(offsets);
  free(range);
  free(cursor);
  free(at);
  free(order);
  free(owners);
  return rc;
}

int
dbuf_layout_owner_cost(const dbuf_tensors_t *t, int64_t id, dbuf_owner_cost_t cost,
                       int64_t *out, dbuf_diag_t *diag)
{
  if (t == NULL || out == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "NULL argument");
  if (id < 0 || id >= dbuf_tensors_count(t))
    return dbuf__diag(diag, DBUF_ERANGE, "tensor id %lld out of range [0, %lld)",
                      (long long)id, (long long)dbuf_tensors_count(t));
  int64_t numel = dbuf_tensors_numel(t, id);
  switch (cost) {
  case DBUF_OWNERS_NUMEL:
    *out = numel;
    return 0;
  case DBUF_OWNERS_NS: {
    /* numel x min(rows, cols), cols = the product of dims 1..; a 1-D tensor
     * is a vector whose Newton-Schulz cost is taken as its numel. */
    int64_t rows = dbuf_tensors_rows(t, id), cols = dbuf_tensors_row_elems(t, id);
    int64_t side = dbuf_tensors_ndim(t, id) < 2 ? 1 : (rows < cols ? rows : cols);
    if (dbuf__mul(numel, side, out) != 0) {
      char shape[64 + 24 * DBUF_MAX_DIMS];
      dbuf_tensors_shape_str(t, id, shape, sizeof shape);
      return dbuf__diag(diag, DBUF_EOVERFLOW,
                        "tensor %s (shape %s): Newton-Schulz cost %lld x %lld "
                        "overflows 64 bits",
                        dbuf_tensors_name(t, id), shape, (long long)numel,
                        (long long)side);
    }
    return 0;
  }
  default:
    return dbuf__diag(diag, DBUF_EINVAL, "unknown owner cost %d", (int)cost);
  }
}

typedef struct {
  int64_t load;
  int rank;
} heap_item_t;

static int
heap_less(const heap_item_t *a, const heap_item_t *b)
{
  return a->load < b->load || (a->load == b->load && a->rank < b->rank);
}

int
dbuf_layout_plan_owners_cost(const dbuf_tensors_t *t, int nranks,
                             dbuf_owner_cost_t cost, int *owners,
                             dbuf_diag_t *diag)
{
  int rc = 0;
  if (t == NULL || owners == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "NULL argument");
  if (nranks < 1)
    return dbuf__diag(diag, DBUF_ENRANKS, "dp size must be positive, got %d",
                      nranks);
  if (cost != DBUF_OWNERS_NUMEL && cost != DBUF_OWNERS_NS)
    return dbuf__diag(diag, DBUF_EINVAL, "unknown owner cost %d", (int)cost);
  int64_t n = dbuf_tensors_count(t), ns = dbuf__tensors_nshapes(t);
  int64_t *items = dbuf__mallocn(n, sizeof *items);
  int64_t *of_shape = dbuf__mallocn(ns, sizeof *of_shape);
  int64_t *rank_of = dbuf__mallocn(ns, sizeof *rank_of), *at = dbuf__mallocn(ns + 1, sizeof *at);
  dbuf__key3_t *by = dbuf__mallocn(ns, sizeof *by);
  const uint32_t *sid = dbuf__tensors_shape_ids(t);
  heap_item_t *h = dbuf__mallocn(nranks, sizeof *h);
  int *own = dbuf__mallocn(n, sizeof *own);
  if (items == NULL || (ns > 0 && (of_shape == NULL || rank_of == NULL || by == NULL)) ||
      at == NULL || h == NULL || own == NULL) {
    rc = dbuf__diag(diag, DBUF_ENOMEM, "out of memory for %lld tensors",
                    (long long)n);
    goto out;
  }
  /* A cost is the shape's: computed for the first tensor of each shape
   * (-1: not yet), which names an overflow as a loop over tensors would. */
  for (int64_t k = 0; k < ns; k++)
    of_shape[k] = -1;
  for (int64_t i = 0; i < n; i++) {
    int64_t *c = &of_shape[sid[i]];
    if (*c < 0 && (rc = dbuf_layout_owner_cost(t, i, cost, c, diag)) != 0)
      goto out;
  }
  /* The tensors by cost descending, then id: the shapes' costs sorted (-cost,
   * shape), each distinct cost a rank, and the ids counted out by rank in
   * id order.  O(n + shapes log shapes); a shape no tensor has (cost -1)
   * counts nothing. */
  int64_t nc = 0;
  for (int64_t k = 0; k < ns; k++)
    by[k] = (dbuf__key3_t){-of_shape[k], 0, k};
  qsort(by, (size_t)ns, sizeof *by, dbuf__key3_cmp);
  for (int64_t k = 0; k < ns; k++) {
    if (k == 0 || by[k].a != by[k - 1].a)
      at[nc++] = 0;
    rank_of[by[k].id] = nc - 1;
  }
  at[nc] = 0;
  for (int64_t i = 0; i < n; i++)
    at[rank_of[sid[i]] + 1]++;
  for (int64_t c = 0; c < nc; c++)
    at[c + 1] += at[c];
  for (int64_t i = 0; i < n; i++)
    items[at[rank_of[sid[i]]]++] = i;
  /* All loads start at 0, so ranks in order form a valid min-heap. */
  for (int r = 0; r < nranks; r++) {
    h[r].load = 0;
    h[r].rank = r;
  }
  for (int64_t i = 0; i < n; i++) {
    own[items[i]] = h[0].rank;
    if (dbuf__add(h[0].load, of_shape[sid[items[i]]], &h[0].load) != 0) {
      rc = dbuf__diag(diag, DBUF_EOVERFLOW,
                      "tensor %s: the load of rank %d overflows 64 bits",
                      dbuf_tensors_name(t, items[i]), h[0].rank);
      goto out;
    }
    int k = 0;
    for (;;) {
      int c = 2 * k + 1;
      if (c >= nranks)
        break;
      if (c + 1 < nranks && heap_less(&h[c + 1], &h[c]))
        c++;
      if (!heap_less(&h[c], &h[k]))
        break;
      heap_item_t tmp = h[k];
      h[k] = h[c];
      h[c] = tmp;
      k = c;
    }
  }
  if (n > 0)
    memcpy(owners, own, (size_t)n * sizeof *owners);
out:
  free(items);
  free(of_shape);
  free(rank_of);
  free(at);
  free(by);
  free(h);
  free(own);
  return rc;
}

int
dbuf_layout_plan_owners(const dbuf_tensors_t *t, int nranks, int *owners,
                        dbuf_diag_t *diag)
{
  return dbuf_layout_plan_owners_cost(t, nranks, DBUF_OWNERS_NUMEL, owners, diag);
}

int
dbuf_layout_owner_loads(const dbuf_layout_t *l, dbuf_owner_cost_t cost,
                        int64_t *loads, dbuf_diag_t *diag)
{
  if (l == NULL || loads == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "NULL argument");
  const int *owners = dbuf_layout_owners(l);
  if (owners == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "%s layout has no owners",
                      dbuf_layout_kind_name(dbuf_layout_kind(l)));
  const dbuf_tensors_t *t = dbuf_layout_tensors(l);
  int nranks = dbuf_layout_nranks(l);
  int64_t n = dbuf_layout_ntensors(l);
  dbuf_diag_t d;
  /* An owner out of range is the layout's fault here, not the caller's. */
  if (dbuf__layout_check_owners(t, owners, nranks, &d) != 0)
    return dbuf__diag(diag, DBUF_ELAYOUT, "%s", d.msg);
  int64_t ns = dbuf__tensors_nshapes(t);
  int64_t *sum = dbuf__calloc(nranks, sizeof *sum), *of_shape = dbuf__mallocn(ns, sizeof *of_shape);
  const uint32_t *sid = dbuf__tensors_shape_ids(t);
  int rc = 0;
  if (sum == NULL || of_shape == NULL) {
    free(sum);
    free(of_shape);
    return dbuf__diag(diag, DBUF_ENOMEM, "out of memory for %d ranks and %lld shapes", nranks,
                      (long long)ns);
  }
  /* A cost is its shape's, computed at the first tensor of the shape (-1:
   * not yet); the loop stops at the first tensor whose cost or sum fails. */
  for (int64_t k = 0; k < ns; k++)
    of_shape[k] = -1;
  for (int64_t i = 0; i < n && rc == 0; i++) {
    int64_t *c = &of_shape[sid[i]];
    if ((*c >= 0 || (rc = dbuf_layout_owner_cost(t, i, cost, c, diag)) == 0) &&
        dbuf__add(sum[owners[i]], *c, &sum[owners[i]]) != 0)
      rc = dbuf__diag(diag, DBUF_EOVERFLOW,
                      "tensor %s: the load of rank %d overflows 64 bits",
                      dbuf_tensors_name(t, i), owners[i]);
  }
  if (rc == 0)
    memcpy(loads, sum, (size_t)nranks * sizeof *loads);
  free(sum);
  free(of_shape);
  return rc;
}

static int
build_tensor(const dbuf_tensors_t *t, const dbuf_layout_params_t *p,
             dbuf_layout_t **out, dbuf_diag_t *diag)
{
  int64_t n = dbuf_tensors_count(t);
  int *owners;
  int rc;

  if (p->owners == NULL && !p->auto_owners)
    return dbuf__diag(diag, DBUF_EOWNER,
                      "tensor layout needs an owner list or auto owners");
  if (p->owners != NULL && p->nowners != n)
    return dbuf__diag(diag, DBUF_EOWNER,
                      "owners count mismatch: %lld owners for %lld tensors",
                      (long long)p->nowners, (long long)n);
  owners = dbuf__mallocn(n, sizeof *owners);
  if (owners == NULL)
    return dbuf__diag(diag, DBUF_ENOMEM, "out of memory for %lld tensors",
                      (long long)n);
  if (p->owners != NULL) {
    if (n > 0)
      memcpy(owners, p->owners, (size_t)n * sizeof *owners);
  } else if ((rc = dbuf_layout_plan_owners_cost(
                  t, p->nranks, (dbuf_owner_cost_t)p->auto_owners, owners,
                  diag)) != 0) {
    free(owners);
    return rc;
  }
  return place_by_owners(t, p, owners, out, diag);
}

int
dbuf_layout_build(const dbuf_tensors_t *tensors, const dbuf_layout_params_t *p,
                  dbuf_layout_t **out, dbuf_diag_t *diag)
{
  int rc;
  if (tensors == NULL || p == NULL || out == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "NULL argument");
  if ((rc = check_common(tensors, p, diag)) != 0)
    return rc;
  switch (p->kind) {
  case DBUF_LAYOUT_PADDED:
    if (p->node_size > 1 && p->nranks > p->node_size)
      return dbuf__layout_build_node_packed(tensors, p, out, diag);
    return dbuf__layout_build_padded(tensors, p, out, diag);
  case DBUF_LAYOUT_UNPADDED:
    return build_unpadded(tensors, p, out, diag);
  case DBUF_LAYOUT_TENSOR:
    return build_tensor(tensors, p, out, diag);
  case DBUF_LAYOUT_COMPACT:
    if (p->node_size > 1 && p->nranks > p->node_size)
      return dbuf__layout_build_node_packed(tensors, p, out, diag);
    return dbuf__layout_build_compact(tensors, p, out, diag);
  default:
    return dbuf__diag(diag, DBUF_EINVAL, "unknown layout kind %d", (int)p->kind);
  }
}
