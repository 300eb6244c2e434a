/*
 * Sharding schemes side by side: this project's layouts and the peers'
 * rules (PyTorch FSDP2, FSDP1, DeepSpeed ZeRO-3), measured alike.  A scheme
 * is one entry of the table at the end of this file.
 */
#include "dbuf/peers.h"
#include "dbuf/nodes.h"

#include "core_internal.h"

#include <stdlib.h>
#include <string.h>

/* The figures of a scheme in elements; scaled to bytes at the end. */
typedef struct {
  int64_t buffer, logical, max_rank, min_rank;
  int64_t rows_cut, split, crossing;
} counts_t;

/* Bytes per rank summed over the buffers of a plan: v[nranks], es the
 * element size of the buffer being measured.  NULL: not wanted. */
typedef struct {
  int64_t *v;
  int64_t es;
} rank_acc_t;

/* Add elems x es to rank r's bytes. */
static int
acc_add(rank_acc_t *acc, int r, int64_t elems)
{
  int64_t by;
  if (dbuf__mul(elems, acc->es, &by) != 0 || dbuf__add(acc->v[r], by, &acc->v[r]) != 0)
    return DBUF_EOVERFLOW;
  return 0;
}

static int64_t
ceil_div(int64_t a, int64_t b)
{
  return a / b + (a % b != 0);
}

/* ------------------------------------------------------------------ */
/* Flat layouts: this project's kinds, and FSDP1's flat parameter        */

/*
 * Rows cut: every rank boundary strictly inside a row of a tensor, each
 * (tensor, row) counted once however many boundaries it holds.  Tensors in
 * offset order against the ascending boundaries: a boundary is looked at
 * once per tensor that contains it, so a layout without overlapping tensors
 * takes O(n + nranks).
 */
static int
rows_cut(const dbuf_layout_t *l, int64_t *out, dbuf_diag_t *diag)
{
  const dbuf_tensors_t *t = dbuf_layout_tensors(l);
  const int64_t *order = dbuf__layout_order_or_null(l), *off = dbuf_layout_offsets(l);
  const int64_t *range = dbuf_layout_range(l);
  int64_t n = dbuf_layout_ntensors(l), cut = 0;
  int nranks = dbuf_layout_nranks(l), r0 = 1;

  for (int64_t p = 0; p < n; p++) {
    int64_t id = DBUF__AT(order, p), b = off[id], e, row = dbuf_tensors_row_elems(t, id);
    int64_t last = -1;
    if (dbuf__add(b, dbuf_tensors_numel(t, id), &e) != 0)
      return dbuf__diag(diag, DBUF_ELAYOUT, "tensor %s: offset %lld + size overflows",
                        dbuf_tensors_name(t, id), (long long)b);
    while (r0 < nranks && range[r0] <= b)
      r0++;
    for (int r = r0; r < nranks && range[r] < e; r++) {
      int64_t in = range[r] - b;
      if (in % row != 0 && in / row != last) {
        cut++;
        last = in / row;
      }
    }
  }
  *out = cut;
  return 0;
}

static int
layout_counts(const dbuf_layout_t *l, int ranks_per_node, counts_t *c, rank_acc_t *acc,
              dbuf_diag_t *diag)
{
  dbuf_layout_stats_t st;
  int rc = dbuf_layout_stats(l, &st);
  if (rc != 0)
    return dbuf__diag(diag, rc, "layout statistics: %s", dbuf_strerror(rc));
  c->buffer = dbuf_layout_size(l);
  c->logical = st.logical;
  c->max_rank = st.max_segment;
  c->min_rank = st.min_segment;
  c->split = st.split_tensors;
  c->crossing = -1;
  if ((rc = rows_cut(l, &c->rows_cut, diag)) != 0)
    return rc;
  if (acc != NULL) {
    const int64_t *range = dbuf_layout_range(l);
    for (int r = 0; r < dbuf_layout_nranks(l); r++)
      if (acc_add(acc, r, range[r + 1] - range[r]) != 0)
        return dbuf__diag(diag, DBUF_EOVERFLOW, "rank %d: bytes over the buffers overflow 64 bits", r);
  }
  if (ranks_per_node > 0) {
    dbuf_nodes_t *nodes;
    rc = dbuf_nodes_create_blocked(l, dbuf_layout_nranks(l), ranks_per_node, 1,
                                   &nodes, diag);
    if (rc != 0)
      return rc;
    c->crossing = dbuf_nodes_ncrossing(nodes);
    dbuf_nodes_destroy(nodes);
  }
  return 0;
}

/*
 * PyTorch FSDP1 (torch/distributed/fsdp/_flat_param.py, FlatParamHandle):
 * the unit's parameters concatenated in order into one flat parameter,
 * padded to a multiple of W and chunked: rank r holds [r p, (r + 1) p),
 * p = ceil(total / W).  That is a flat layout with equal segments and the
 * padding at the end, so it is measured as one.
 */
static int
fsdp1_counts(const dbuf_tensors_t *t, int nranks, int ranks_per_node, counts_t *c,
             rank_acc_t *acc, dbuf_diag_t *diag)
{
  int64_t n = dbuf_tensors_count(t), total = dbuf_tensors_total(t), size;
  int64_t per = ceil_div(total, nranks);
  if (dbuf__mul(per, nranks, &size) != 0)
    return dbuf__diag(diag, DBUF_EOVERFLOW,
                      "%lld elements padded to a multiple of %d overflow 64 bits",
                      (long long)total, nranks);
  int64_t *off = dbuf__mallocn(n, sizeof *off);
  int64_t *range = dbuf__mallocn(nranks, sizeof *range);
  dbuf_layout_t *l = NULL;
  int rc;
  if (off == NULL || range == NULL) {
    rc = dbuf__diag(diag, DBUF_ENOMEM, "out of memory for %lld tensors", (long long)n);
    goto out;
  }
  for (int64_t i = 0, o = 0; i < n; i++) {
    off[i] = o;
    o += dbuf_tensors_numel(t, i); /* <= total: checked by the list */
  }
  for (int r = 0; r < nranks; r++)
    range[r] = per * r; /* <= size */
  rc = dbuf_layout_from_parts(t, DBUF_LAYOUT_UNPADDED, nranks, 1, 0, size, off,
                              range, NULL, &l, diag);
  if (rc == 0)
    rc = layout_counts(l, ranks_per_node, c, acc, diag);
out:
  dbuf_layout_destroy(l);
  free(off);
  free(range);
  return rc;
}

/* ------------------------------------------------------------------ */
/* Per-parameter sharding: FSDP2 and ZeRO-3                              */

/* How one parameter is sharded on its own: every rank stores `stored`
 * elements of it, the first `holders` ranks hold real elements. */
typedef struct {
  int64_t stored, holders, rows_cut;
} param_shard_t;

typedef int (*param_rule_fn)(int64_t d0, int64_t row, int64_t numel, int nranks,
                             param_shard_t *ps);

/*
 * PyTorch FSDP2 (torch/distributed/fsdp/_fully_shard/_fsdp_param.py and
 * _fsdp_common.py): Shard(0) with torch.chunk, c = ceil(d0 / W) rows a
 * chunk, ceil(d0 / c) non-empty chunks; every rank's storage padded to c
 * rows.  Rows are never cut.
 */
static int
fsdp2_param(int64_t d0, int64_t row, int64_t numel, int nranks, param_shard_t *ps)
{
  int64_t c = ceil_div(d0, nranks);
  (void)numel;
  ps->holders = c ? ceil_div(d0, c) : 0;
  ps->rows_cut = 0;
  return dbuf__mul(c, row, &ps->stored);
}

/*
 * DeepSpeed ZeRO-3 (deepspeed/runtime/zero/partition_parameters.py): the
 * flattened parameter padded to a multiple of W, partitions of p =
 * ceil(numel / W) elements, rank r holding [r p, (r + 1) p).  The R =
 * holders - 1 boundaries p, 2p, ..., Rp lie inside the parameter.  A row is
 * cut when a boundary falls strictly inside it:
 *  - p >= row: a row holds at most one boundary, so every boundary not on a
 *    row start cuts its own row; r p is a row start when row / gcd(p, row)
 *    divides r;
 *  - p < row: every row's interior holds a multiple of p, and row j holds
 *    one of p..Rp exactly when j row < R p: ceil(R p / row) rows.
 */
static int
zero3_param(int64_t d0, int64_t row, int64_t numel, int nranks, param_shard_t *ps)
{
  int64_t p = ceil_div(numel, nranks);
  (void)d0;
  ps->stored = p;
  ps->holders = p ? ceil_div(numel, p) : 0;
  int64_t bounds = ps->holders > 0 ? ps->holders - 1 : 0;
  if (row == 1 || bounds == 0)
    ps->rows_cut = 0;
  else if (p >= row)
    ps->rows_cut = bounds - bounds / (row / dbuf__gcd(p, row));
  else
    ps->rows_cut = ceil_div(bounds * p, row); /* bounds x p < numel */
  return 0;
}

static int
per_param_counts(const dbuf_tensors_t *t, int nranks, int ranks_per_node,
                 param_rule_fn rule, counts_t *c, rank_acc_t *acc, dbuf_diag_t *diag)
{
  int64_t n = dbuf_tensors_count(t), per_rank = 0;
  memset(c, 0, sizeof *c);
  c->logical = dbuf_tensors_total(t);
  c->crossing = ranks_per_node > 0 ? 0 : -1;
  for (int64_t i = 0; i < n; i++) {
    param_shard_t ps;
    int64_t all;
    if (rule(dbuf_tensors_rows(t, i), dbuf_tensors_row_elems(t, i),
             dbuf_tensors_numel(t, i), nranks, &ps) != 0 ||
        dbuf__mul(ps.stored, nranks, &all) != 0 ||
        dbuf__add(c->buffer, all, &c->buffer) != 0 ||
        dbuf__add(per_rank, ps.stored, &per_rank) != 0)
      return dbuf__diag(diag, DBUF_EOVERFLOW,
                        "tensor %s: the sharded size overflows 64 bits",
                        dbuf_tensors_name(t, i));
    c->rows_cut += ps.rows_cut; /* <= rows, whose sum is <= total */
    c->split += ps.holders > 1;
    if (ranks_per_node > 0 && ps.holders > 0)
      c->crossing += (ps.holders - 1) / ranks_per_node > 0;
  }
  c->max_rank = c->min_rank = per_rank;
  for (int r = 0; acc != NULL && r < nranks; r++)
    if (acc_add(acc, r, per_rank) != 0)
      return dbuf__diag(diag, DBUF_EOVERFLOW, "rank %d: bytes over the buffers overflow 64 bits", r);
  return 0;
}

static int
fsdp2_counts(const dbuf_tensors_t *t, int nranks, int ranks_per_node, counts_t *c,
             rank_acc_t *acc, dbuf_diag_t *diag)
{
  return per_param_counts(t, nranks, ranks_per_node, fsdp2_param, c, acc, diag);
}

static int
zero3_counts(const dbuf_tensors_t *t, int nranks, int ranks_per_node, counts_t *c,
             rank_acc_t *acc, dbuf_diag_t *diag)
{
  return per_param_counts(t, nranks, ranks_per_node, zero3_param, c, acc, diag);
}

/* ------------------------------------------------------------------ */
/* The schemes                                                          */

typedef int (*counts_fn)(const dbuf_tensors_t *t, int nranks, int ranks_per_node,
                         counts_t *c, rank_acc_t *acc, dbuf_diag_t *diag);

/* A layout kind of this project (counts NULL), or a peer's rule. */
static const struct {
  const char *name;
  dbuf_layout_kind_t kind;
  counts_fn counts;
  const char *what;
} schemes[] = {
    {"padded", DBUF_LAYOUT_PADDED, NULL,
     "dbuf-shard padded: RowAtomic, equal segments of whole LCM chunks"},
    {"compact", DBUF_LAYOUT_COMPACT, NULL,
     "dbuf-shard compact: equal segments of whole chunks, at the padding lower bound"},
    {"unpadded", DBUF_LAYOUT_UNPADDED, NULL,
     "dbuf-shard unpadded: back to back, cuts moved to the nearest row boundary"},
    {"tensor", DBUF_LAYOUT_TENSOR, NULL,
     "dbuf-shard tensor: TensorAtomic, owners by LPT on element counts"},
    {"fsdp2", 0, fsdp2_counts,
     "PyTorch FSDP2: each parameter split on dim 0, ceil(d0/W) rows a rank, padded"},
    {"fsdp1", 0, fsdp1_counts,
     "PyTorch FSDP1: each unit one flat parameter, padded to a multiple of W"},
    {"zero3", 0, zero3_counts,
     "DeepSpeed ZeRO-3: each parameter flattened, padded to a multiple of W"},
};

#define NSCHEMES ((int)(sizeof schemes / sizeof schemes[0]))

int
dbuf_scheme_count(void)
{
  return NSCHEMES;
}

const char *
dbuf_scheme_name(int i)
{
  return i >= 0 && i < NSCHEMES ? schemes[i].name : NULL;
}

const char *
dbuf_scheme_describe(int i)
{
  return i >= 0 && i < NSCHEMES ? schemes[i].what : NULL;
}

int
dbuf_scheme_find(const char *name, int *i)
{
  if (name == NULL || i == NULL)
    return DBUF_EINVAL;
  for (int k = 0; k < NSCHEMES; k++) {
    if (strcmp(name, schemes[k].name) == 0) {
      *i = k;
      return 0;
    }
  }
  return DBUF_EINVAL;
}

/* Element figures to the byte figures of st, checked. */
static int
to_bytes(const counts_t *c, int64_t elem_size, dbuf_shard_stats_t *st,
         dbuf_diag_t *diag)
{
  dbuf_shard_stats_t s;
  if (dbuf__mul(c->buffer, elem_size, &s.buffer_bytes) != 0 ||
      dbuf__mul(c->buffer - c->logical, elem_size, &s.padding_bytes) != 0 ||
      dbuf__mul(c->max_rank, elem_size, &s.max_rank_bytes) != 0 ||
      dbuf__mul(c->min_rank, elem_size, &s.min_rank_bytes) != 0)
    return dbuf__diag(diag, DBUF_EOVERFLOW,
                      "%lld elements of %lld bytes overflow 64 bits",
                      (long long)c->buffer, (long long)elem_size);
  s.rows_cut = c->rows_cut;
  s.tensors_split = c->split;
  s.tensors_crossing_nodes = c->crossing;
  *st = s;
  return 0;
}

static int
check_args(int ranks_per_node, int64_t elem_size, const dbuf_shard_stats_t *st,
           dbuf_diag_t *diag)
{
  if (st == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "NULL argument");
  if (elem_size < 1)
    return dbuf__diag(diag, DBUF_EINVAL, "element size %lld is not positive",
                      (long long)elem_size);
  if (ranks_per_node < 0)
    return dbuf__diag(diag, DBUF_EINVAL, "ranks per node %d is negative",
                      ranks_per_node);
  return 0;
}

/* The element figures of scheme i over t (acc: add each rank's bytes). */
static int
scheme_counts(const dbuf_tensors_t *t, int i, int nranks, int ranks_per_node, counts_t *c,
              rank_acc_t *acc, dbuf_diag_t *diag)
{
  dbuf_layout_params_t p;
  dbuf_layout_t *l;
  int rc;
  if (schemes[i].counts != NULL)
    return schemes[i].counts(t, nranks, ranks_per_node, c, acc, diag);
  dbuf_layout_params_init(&p);
  p.kind = schemes[i].kind;
  p.nranks = nranks;
  p.auto_owners = p.kind == DBUF_LAYOUT_TENSOR ? DBUF_OWNERS_NUMEL : 0;
  /* The flat kinds are built node-aware, as `plan --node-size` builds them. */
  if (p.kind != DBUF_LAYOUT_TENSOR)
    p.node_size = ranks_per_node;
  if ((rc = dbuf_layout_build(t, &p, &l, diag)) != 0)
    return rc;
  rc = layout_counts(l, ranks_per_node, c, acc, diag);
  dbuf_layout_destroy(l);
  return rc;
}

int
dbuf_layout_measure(const dbuf_layout_t *l, int ranks_per_node, int64_t elem_size,
                    dbuf_shard_stats_t *st, dbuf_diag_t *diag)
{
  counts_t c;
  int rc;
  if (l == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "NULL argument");
  if ((rc = check_args(ranks_per_node, elem_size, st, diag)) != 0 ||
      (rc = layout_counts(l, ranks_per_node, &c, NULL, diag)) != 0)
    return rc;
  return to_bytes(&c, elem_size, st, diag);
}

int
dbuf_scheme_measure(const dbuf_tensors_t *t, int i, int nranks, int ranks_per_node,
                    int64_t elem_size, dbuf_shard_stats_t *st, dbuf_diag_t *diag)
{
  counts_t c;
  int rc;
  if (t == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "NULL argument");
  if (i < 0 || i >= NSCHEMES)
    return dbuf__diag(diag, DBUF_EINVAL, "scheme %d out of range [0, %d)", i, NSCHEMES);
  if (nranks < 1)
    return dbuf__diag(diag, DBUF_ENRANKS, "dp size must be positive, got %d", nranks);
  if ((rc = check_args(ranks_per_node, elem_size, st, diag)) != 0)
    return rc;
  if ((rc = scheme_counts(t, i, nranks, ranks_per_node, &c, NULL, diag)) != 0)
    return rc;
  return to_bytes(&c, elem_size, st, diag);
}

int
dbuf_scheme_measure_plan(const dbuf_plan_t *p, int i, int ranks_per_node,
                         dbuf_shard_stats_t *st, dbuf_diag_t *diag)
{
  int64_t nb = dbuf_plan_nbuffers(p);
  int nranks = dbuf_plan_nranks(p), rc;
  dbuf_shard_stats_t sum;
  rank_acc_t acc;
  if (p == NULL || nb < 1)
    return dbuf__diag(diag, DBUF_EINVAL, "NULL or empty plan");
  if (i < 0 || i >= NSCHEMES)
    return dbuf__diag(diag, DBUF_EINVAL, "scheme %d out of range [0, %d)", i, NSCHEMES);
  if ((rc = check_args(ranks_per_node, 1, st, diag)) != 0)
    return rc;
  if ((acc.v = dbuf__calloc(nranks, sizeof *acc.v)) == NULL)
    return dbuf__diag(diag, DBUF_ENOMEM, "out of memory for %d ranks", nranks);
  memset(&sum, 0, sizeof sum);
  sum.tensors_crossing_nodes = ranks_per_node > 0 ? 0 : -1;
  for (int64_t b = 0; b < nb; b++) {
    dbuf_plan_buffer_t buf;
    dbuf_shard_stats_t one;
    counts_t c;
    if ((rc = dbuf_plan_buffer(p, b, &buf)) != 0) {
      rc = dbuf__diag(diag, rc, "buffer %lld: %s", (long long)b, dbuf_strerror(rc));
      goto out;
    }
    acc.es = buf.elem_size;
    if ((rc = scheme_counts(dbuf_layout_tensors(buf.layout), i, nranks, ranks_per_node, &c,
                            &acc, diag)) != 0 ||
        (rc = to_bytes(&c, buf.elem_size, &one, diag)) != 0)
      goto out;
    if (dbuf__add(sum.buffer_bytes, one.buffer_bytes, &sum.buffer_bytes) != 0 ||
        dbuf__add(sum.padding_bytes, one.padding_bytes, &sum.padding_bytes) != 0) {
      rc = dbuf__diag(diag, DBUF_EOVERFLOW, "bytes over the buffers overflow 64 bits");
      goto out;
    }
    /* counts of tensors and rows: each at most the tensors' elements */
    sum.rows_cut += one.rows_cut;
    sum.tensors_split += one.tensors_split;
    if (ranks_per_node > 0)
      sum.tensors_crossing_nodes += one.tensors_crossing_nodes;
  }
  sum.max_rank_bytes = sum.min_rank_bytes = acc.v[0];
  for (int r = 1; r < nranks; r++) {
    sum.max_rank_bytes = acc.v[r] > sum.max_rank_bytes ? acc.v[r] : sum.max_rank_bytes;
    sum.min_rank_bytes = acc.v[r] < sum.min_rank_bytes ? acc.v[r] : sum.min_rank_bytes;
  }
  *st = sum;
out:
  free(acc.v);
  return rc;
}
