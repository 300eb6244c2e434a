/* The node report: per-node ranges and tensors crossing node boundaries. */
#include "dbuf/nodes.h"

#include "core_internal.h"
#include "layout_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct dbuf_nodes {
  int nranks, nnodes;
  int *node_of_rank;        /* [nranks] */
  int *ranks;               /* [nranks], grouped by node, ascending */
  int *first_rank_of;       /* [nnodes + 1]: node i's ranks in ranks[...] */
  char **names;             /* [nnodes] */
  int *contiguous;          /* [nnodes] */
  int64_t *first, *end, *elements, *bytes; /* [nnodes] */
  int64_t ncross, nsides;
  int64_t *cross_tensor;    /* [ncross] */
  int64_t *cross_first;     /* [ncross + 1]: sides of crossing i */
  dbuf_node_side_t *sides;  /* [nsides] */
};

void
dbuf_nodes_destroy(dbuf_nodes_t *n)
{
  if (n == NULL)
    return;
  if (n->names != NULL)
    for (int i = 0; i < n->nnodes; i++)
      free(n->names[i]);
  free(n->names);
  free(n->node_of_rank);
  free(n->ranks);
  free(n->first_rank_of);
  free(n->contiguous);
  free(n->first);
  free(n->end);
  free(n->elements);
  free(n->bytes);
  free(n->cross_tensor);
  free(n->cross_first);
  free(n->sides);
  free(n);
}

/* Append a side, growing the array geometrically. */
static int
push_side(dbuf_nodes_t *n, int64_t *cap, const dbuf_node_side_t *s)
{
  if (n->nsides == *cap) {
    int64_t nc = *cap ? 2 * *cap : 64;
    dbuf_node_side_t *v = dbuf__reallocn(n->sides, nc, sizeof *v);
    if (v == NULL)
      return DBUF_ENOMEM;
    n->sides = v;
    *cap = nc;
  }
  n->sides[n->nsides++] = *s;
  return 0;
}

static int
push_cross(dbuf_nodes_t *n, int64_t *cap, int64_t tensor, int64_t first_side)
{
  if (n->ncross + 1 >= *cap) {
    int64_t nc = *cap ? 2 * *cap : 64;
    int64_t *t = dbuf__reallocn(n->cross_tensor, nc, sizeof *t);
    if (t == NULL)
      return DBUF_ENOMEM;
    n->cross_tensor = t;
    int64_t *f = dbuf__reallocn(n->cross_first, nc + 1, sizeof *f);
    if (f == NULL)
      return DBUF_ENOMEM;
    n->cross_first = f;
    *cap = nc;
  }
  n->cross_tensor[n->ncross] = tensor;
  n->cross_first[n->ncross] = first_side;
  n->ncross++;
  return 0;
}

/* Close the side cur of tensor id, whose run ends at global end_at. */
static int
close_side(dbuf_nodes_t *n, int64_t *cap, const dbuf_layout_t *l, int64_t id,
           dbuf_node_side_t *cur, int64_t end_at)
{
  dbuf_rows_t rows;
  int64_t off = dbuf_layout_offsets(l)[id];
  dbuf_layout_piece_rows(dbuf_layout_tensors(l), id, cur->elem_begin,
                         end_at - off - cur->elem_begin, &rows);
  cur->nelems = rows.nelems;
  cur->first_row = rows.first_row;
  cur->rows = rows.nrows;
  return push_side(n, cap, cur);
}

/* Every tensor whose elements lie on more than one node run.  The tensors
 * are walked in offset order with a segment cursor that never moves back, so
 * each segment is visited once per tensor it intersects: O(n + segments). */
static int
find_crossings(dbuf_nodes_t *n, const dbuf_layout_t *l, int k)
{
  const dbuf_tensors_t *t = dbuf_layout_tensors(l);
  const int64_t *off = dbuf_layout_offsets(l), *range = dbuf_layout_range(l);
  const int64_t *order = dbuf__layout_order_or_null(l);
  int64_t nt = dbuf_layout_ntensors(l), scap = 0, ccap = 0;
  int nseg = dbuf_layout_nranks(l), s = 0;

  /* The layout is sane (dbuf_nodes_create checks it): b <= e <= size. */
  for (int64_t p = 0; p < nt; p++) {
    int64_t id = DBUF__AT(order, p), b = off[id], e = b + dbuf_tensors_numel(t, id);
    int64_t first_side = n->nsides, cur_end = 0, lo, hi;
    if (e == b)
      continue;
    while (s < nseg && range[s + 1] <= b)
      s++;
    dbuf_node_side_t cur = {-1, -1, -1, 0, 0, 0, 0};
    for (int g = s; g < nseg && range[g] < e; g++) {
      if (!dbuf__clip(b, e, range[g], range[g + 1], &lo, &hi))
        continue;
      int rank = g / k, node = n->node_of_rank[rank];
      if (node != cur.node) {
        if (cur.node >= 0 && close_side(n, &scap, l, id, &cur, cur_end) != 0)
          return DBUF_ENOMEM;
        cur.node = node;
        cur.first_rank = rank;
        cur.elem_begin = lo - b;
      }
      cur.last_rank = rank;
      cur_end = hi;
    }
    if (first_side == n->nsides)
      continue; /* one node holds it all: not a crossing */
    if (close_side(n, &scap, l, id, &cur, cur_end) != 0 ||
        push_cross(n, &ccap, id, first_side) != 0)
      return DBUF_ENOMEM;
  }
  if (n->cross_first == NULL && (n->cross_first = malloc(sizeof *n->cross_first)) == NULL)
    return DBUF_ENOMEM;
  n->cross_first[n->ncross] = n->nsides;
  return 0;
}

int
dbuf_nodes_create(const dbuf_layout_t *l, int nranks, const int *node_of_rank,
                  int nnodes, const char *const *names, int64_t elem_size,
                  dbuf_nodes_t **out, dbuf_diag_t *diag)
{
  int rc = DBUF_ENOMEM;
  if (l == NULL || node_of_rank == NULL || out == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "NULL argument");
  if (nnodes < 1 || elem_size < 1)
    return dbuf__diag(diag, DBUF_EINVAL, "node count %d and element size %lld must be positive",
                      nnodes, (long long)elem_size);
  if (!dbuf__layout_sane(l))
    return dbuf__diag(diag, DBUF_ELAYOUT,
                      "the layout has rank offsets out of order or tensors "
                      "outside the buffer (see dbuf_layout_validate)");
  int nseg = dbuf_layout_nranks(l);
  if (nranks < 1 || nseg % nranks != 0)
    return dbuf__diag(diag, DBUF_ENRANKS,
                      "%d ranks do not divide the layout's %d segments", nranks, nseg);
  for (int r = 0; r < nranks; r++)
    if (node_of_rank[r] < 0 || node_of_rank[r] >= nnodes)
      return dbuf__diag(diag, DBUF_EINVAL, "rank %d: node %d out of range [0, %d)", r,
                        node_of_rank[r], nnodes);
  for (int i = 0; names != NULL && i < nnodes; i++)
    if (names[i] == NULL || names[i][0] == '\0')
      return dbuf__diag(diag, DBUF_EINVAL, "node %d has no name", i);

  int k = nseg / nranks;
  dbuf_nodes_t *n = calloc(1, sizeof *n);
  if (n == NULL)
    return dbuf__diag(diag, DBUF_ENOMEM, "out of memory");
  n->nranks = nranks;
  n->nnodes = nnodes;
  n->node_of_rank = dbuf__mallocn(nranks, sizeof *n->node_of_rank);
  n->ranks = dbuf__mallocn(nranks, sizeof *n->ranks);
  n->first_rank_of = dbuf__calloc((int64_t)nnodes + 1, sizeof *n->first_rank_of);
  n->names = dbuf__calloc(nnodes, sizeof *n->names);
  n->contiguous = dbuf__calloc(nnodes, sizeof *n->contiguous);
  n->first = dbuf__calloc(nnodes, sizeof *n->first);
  n->end = dbuf__calloc(nnodes, sizeof *n->end);
  n->elements = dbuf__calloc(nnodes, sizeof *n->elements);
  n->bytes = dbuf__calloc(nnodes, sizeof *n->bytes);
  if (!n->node_of_rank || !n->ranks || !n->first_rank_of || !n->names ||
      !n->contiguous || !n->first || !n->end || !n->elements || !n->bytes)
    goto fail;
  memcpy(n->node_of_rank, node_of_rank, (size_t)nranks * sizeof *node_of_rank);
  for (int i = 0; i < nnodes; i++) {
    char buf[32];
    const char *nm = names ? names[i] : buf;
    if (names == NULL)
      snprintf(buf, sizeof buf, "node%d", i);
    if ((n->names[i] = strdup(nm)) == NULL)
      goto fail;
  }

  /* Counting sort of the ranks by node keeps them ascending within a node. */
  for (int r = 0; r < nranks; r++)
    n->first_rank_of[node_of_rank[r] + 1]++;
  for (int i = 0; i < nnodes; i++) {
    if (n->first_rank_of[i + 1] == 0) {
      rc = dbuf__diag(diag, DBUF_EINVAL, "node %d (%s) has no rank", i, n->names[i]);
      goto fail;
    }
    n->first_rank_of[i + 1] += n->first_rank_of[i];
  }
  {
    int *fill = dbuf__mallocn(nnodes, sizeof *fill);
    if (fill == NULL)
      goto fail;
    memcpy(fill, n->first_rank_of, (size_t)nnodes * sizeof *fill);
    for (int r = 0; r < nranks; r++)
      n->ranks[fill[node_of_rank[r]]++] = r;
    free(fill);
  }

  for (int i = 0; i < nnodes; i++) {
    int have = 0;
    n->contiguous[i] = 1;
    for (int j = n->first_rank_of[i]; j < n->first_rank_of[i + 1]; j++) {
      int r = n->ranks[j];
      int64_t b, e;
      dbuf_layout_rank_segments(l, nranks, r, &b, &e, NULL, NULL); /* checked above */
      if (j == n->first_rank_of[i])
        n->first[i] = n->end[i] = b;
      n->elements[i] += e - b; /* <= size: cannot overflow */
      if (b == e)
        continue;
      if (!have) {
        n->first[i] = b;
        have = 1;
      } else if (b != n->end[i]) {
        n->contiguous[i] = 0;
      }
      n->end[i] = e;
    }
    if (dbuf__mul(n->elements[i], elem_size, &n->bytes[i]) != 0) {
      rc = dbuf__diag(diag, DBUF_EOVERFLOW, "node %s: %lld elements of %lld bytes overflow",
                      n->names[i], (long long)n->elements[i], (long long)elem_size);
      goto fail;
    }
  }
  if (find_crossings(n, l, k) != 0)
    goto fail;
  *out = n;
  return 0;
fail:
  if (rc == DBUF_ENOMEM)
    dbuf__diag(diag, rc, "out of memory for the node report");
  dbuf_nodes_destroy(n);
  return rc;
}

int
dbuf_nodes_create_blocked(const dbuf_layout_t *l, int nranks, int ranks_per_node,
                          int64_t elem_size, dbuf_nodes_t **out, dbuf_diag_t *diag)
{
  if (ranks_per_node < 1)
    return dbuf__diag(diag, DBUF_EINVAL, "ranks per node must be positive, got %d",
                      ranks_per_node);
  if (nranks < 1)
    return dbuf__diag(diag, DBUF_ENRANKS, "rank count must be positive, got %d", nranks);
  int *node = dbuf__mallocn(nranks, sizeof *node);
  if (node == NULL)
    return dbuf__diag(diag, DBUF_ENOMEM, "out of memory");
  for (int r = 0; r < nranks; r++)
    node[r] = r / ranks_per_node;
  int rc = dbuf_nodes_create(l, nranks, node, (nranks - 1) / ranks_per_node + 1,
                             NULL, elem_size, out, diag);
  free(node);
  return rc;
}

int
dbuf_nodes_count(const dbuf_nodes_t *n)
{
  return n ? n->nnodes : 0;
}

int
dbuf_nodes_node_of(const dbuf_nodes_t *n, int rank)
{
  if (n == NULL || rank < 0 || rank >= n->nranks)
    return -1;
  return n->node_of_rank[rank];
}

int
dbuf_nodes_info(const dbuf_nodes_t *n, int node, dbuf_node_info_t *info)
{
  if (n == NULL || info == NULL)
    return DBUF_EINVAL;
  if (node < 0 || node >= n->nnodes)
    return DBUF_ERANGE;
  info->name = n->names[node];
  info->nranks = n->first_rank_of[node + 1] - n->first_rank_of[node];
  info->ranks = n->ranks + n->first_rank_of[node];
  info->contiguous = n->contiguous[node];
  info->first = n->first[node];
  info->end = n->end[node];
  info->elements = n->elements[node];
  info->bytes = n->bytes[node];
  return 0;
}

int64_t
dbuf_nodes_ncrossing(const dbuf_nodes_t *n)
{
  return n ? n->ncross : 0;
}

int
dbuf_nodes_crossing(const dbuf_nodes_t *n, int64_t i, dbuf_node_crossing_t *c)
{
  if (n == NULL || c == NULL)
    return DBUF_EINVAL;
  if (i < 0 || i >= n->ncross)
    return DBUF_ERANGE;
  c->tensor = n->cross_tensor[i];
  c->nsides = n->cross_first[i + 1] - n->cross_first[i];
  c->sides = n->sides + n->cross_first[i];
  return 0;
}
