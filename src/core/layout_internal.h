/* The layout object, shared by the builders, validators and queries. */
#ifndef DBUF_LAYOUT_INTERNAL_H
#define DBUF_LAYOUT_INTERNAL_H

#include "dbuf/layout.h"

struct dbuf_layout {
  dbuf_layout_kind_t kind;
  int nranks;
  int64_t block_size;
  int64_t chunk_size; /* PADDED only, else 0 */
  int64_t size;
  int64_t n;              /* tensors */
  dbuf_tensors_t *tensors; /* owned copy */
  int64_t *offsets;       /* [n] */
  int64_t *range;         /* [nranks + 1] */
  int *owners;            /* [n] or NULL */
  int64_t *order;         /* [n] ids sorted by (offset, id) */
  int sane; /* range runs from 0 up to size and every tensor lies inside
               [0, size): all offset arithmetic stays in [0, size] */
};

/* Tensor id lies inside [0, size); no sum is formed. */
static inline int
dbuf__layout_in_buffer(const dbuf_layout_t *l, int64_t id)
{
  int64_t off = l->offsets[id];
  return off >= 0 && off <= l->size &&
         dbuf_tensors_numel(l->tensors, id) <= l->size - off;
}

/* range[r] clamped to [0, size]: the queries accept layouts that fail
 * validation, and their differences must not overflow. */
static inline int64_t
dbuf__layout_cut(const dbuf_layout_t *l, int r)
{
  int64_t x = l->range[r];
  return x < 0 ? 0 : x > l->size ? l->size : x;
}

/* Whether the layout is sane (see struct dbuf_layout); O(1). */
int dbuf__layout_sane(const dbuf_layout_t *l);

/* Take ownership of the arrays (freed on failure too) and build the order. */
int dbuf__layout_assemble(const dbuf_tensors_t *tensors, dbuf_layout_kind_t kind,
                          int nranks, int64_t block_size, int64_t chunk_size,
                          int64_t size, int64_t *offsets, int64_t *range,
                          int *owners, dbuf_layout_t **out);

/* LCM of block_size x row size over the tensors (1 for none), checked. */
int dbuf__layout_chunk(const dbuf_tensors_t *t, int64_t block_size,
                       int64_t *chunk, dbuf_diag_t *diag);

/*
 * Position in the offset order of the last non-empty tensor starting before
 * x, or -1; *lower (may be NULL) gets the first position starting at or
 * after x.  O(log n) plus the empty tensors skipped.
 */
int64_t dbuf__layout_last_before(const dbuf_layout_t *l, int64_t x,
                                 int64_t *lower);

/* Rank whose non-empty segment holds i (0 <= i < size). */
int dbuf__layout_owner(const dbuf_layout_t *l, int64_t i);

#endif /* DBUF_LAYOUT_INTERNAL_H */
