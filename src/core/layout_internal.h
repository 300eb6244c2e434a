/* The layout object, shared by the builders, validators and queries. */
#ifndef DBUF_LAYOUT_INTERNAL_H
#define DBUF_LAYOUT_INTERNAL_H

#include "dbuf/layout.h"

#include "core_internal.h"

#include <stdatomic.h>

struct dbuf_layout {
  dbuf_layout_kind_t kind;
  int nranks;
  int64_t block_size;
  int64_t chunk_size; /* PADDED and COMPACT, else 0 */
  int64_t size;
  int64_t n;              /* tensors */
  dbuf_tensors_t *tensors; /* owned copy */
  int64_t *offsets;       /* [n] */
  int64_t *range;         /* [nranks + 1] */
  int *owners;            /* [n] or NULL */
  int64_t *order;         /* [n] ids sorted by (offset, id); NULL when the
                             offsets rise with the ids (the identity: no
                             array, dbuf__layout_at()) */
  _Atomic(int64_t *) ident; /* that identity as an array, made by the first
                               dbuf_layout_order() that asks for it */
  int sane; /* range runs from 0 up to size and every tensor lies inside
               [0, size): all offset arithmetic stays in [0, size] */
  int has_digest;  /* digest is set: the layout was sent or decoded */
  uint64_t digest; /* the checksum of its message, which is dbuf_wire_digest()'s
                      value (set by the plan sender, and by the decoder for a
                      message that is the encoder's own bytes for the layout) */
};

/* The tensor at position p of the offset order. */
static inline int64_t
dbuf__layout_at(const dbuf_layout_t *l, int64_t p)
{
  return l->order != NULL ? l->order[p] : p;
}

/* numel elements at off lie inside [0, size); no sum is formed. */
static inline int
dbuf__in_buffer(int64_t off, int64_t numel, int64_t size)
{
  return off >= 0 && off <= size && numel <= size - off;
}

/* Tensor id lies inside the buffer. */
static inline int
dbuf__layout_in_buffer(const dbuf_layout_t *l, int64_t id)
{
  return dbuf__in_buffer(l->offsets[id], dbuf_tensors_numel(l->tensors, id), l->size);
}

/* range[r] clamped to [0, size]: the queries accept layouts that fail
 * validation, and their differences must not overflow. */
static inline int64_t
dbuf__layout_cut(const dbuf_layout_t *l, int r)
{
  int64_t x = l->range[r];
  return x < 0 ? 0 : x > l->size ? l->size : x;
}

/* The intersection [*s, *e) of [a, b) and [lo, hi); non-zero when it is not
 * empty (then *s < *e).  Every clip of a range to a segment goes here. */
static inline int
dbuf__clip(int64_t a, int64_t b, int64_t lo, int64_t hi, int64_t *s, int64_t *e)
{
  *s = a > lo ? a : lo;
  *e = b < hi ? b : hi;
  return *s < *e;
}

/* The rows of elements [b, b + n) of a tensor with rows of re elements;
 * b >= 0, n >= 0, b + n <= numel (no sum overflows).  The one formula of
 * rows touched (dbuf_layout_piece_rows() checks its arguments first). */
static inline void
dbuf__rows(int64_t re, int64_t b, int64_t n, dbuf_rows_t *rows)
{
  int64_t e = b + n;
  rows->elem_begin = b;
  rows->nelems = n;
  rows->first_row = b / re;
  rows->first_col = b % re;
  rows->nrows = n > 0 ? dbuf__ceil_div(e, re) - rows->first_row : 0;
  rows->cut_first = n > 0 && rows->first_col != 0;
  rows->cut_last = n > 0 && e % re != 0;
}

/* Whether the layout is sane (see struct dbuf_layout); O(1). */
int dbuf__layout_sane(const dbuf_layout_t *l);

/* Take ownership of the arrays (freed on failure too) and build the order. */
int dbuf__layout_assemble(const dbuf_tensors_t *tensors, dbuf_layout_kind_t kind,
                          int nranks, int64_t block_size, int64_t chunk_size,
                          int64_t size, int64_t *offsets, int64_t *range,
                          int *owners, dbuf_layout_t **out);
/* The same with the builder's order[n] of the ids by rising offset (taken
 * too; NULL: none), as its placement made it: ties need not be in id order.
 * It becomes the layout's order once checked in one pass and its ties put
 * in id order; one that does not rise is sorted as without it. */
int dbuf__layout_assemble_ordered(const dbuf_tensors_t *tensors, dbuf_layout_kind_t kind,
                                  int nranks, int64_t block_size, int64_t chunk_size,
                                  int64_t size, int64_t *offsets, int64_t *range,
                                  int *owners, int64_t *order, dbuf_layout_t **out);
/* order[n], a permutation of the ids 0 .. n-1 (the caller's promise: not
 * checked) whose offsets rise, ties in any order, to the order by (offset,
 * id), in place: 0, or 1 when the offsets do not rise along it (order then
 * unchanged). */
int dbuf__order_settle(const int64_t *offsets, int64_t n, int64_t *order);

/* dbuf_layout_from_parts() on arrays it takes (freed on failure too):
 * offsets[n], range[nranks + 1] (range[nranks] is set to size), owners[n]
 * or NULL.  The same checks and messages, no copies. */
int dbuf__layout_from_owned(const dbuf_tensors_t *tensors, dbuf_layout_kind_t kind, int nranks,
                            int64_t block_size, int64_t chunk_size, int64_t size,
                            int64_t *offsets, int64_t *range, int *owners, dbuf_layout_t **out,
                            dbuf_diag_t *diag);

/* order[] (n ids) sorted by (keys[id], id), in O(n) passes of a radix
 * sort.  0 or DBUF_ENOMEM. */
int dbuf__sort_ids(const int64_t *keys, int64_t n, int64_t *order);

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

/* Kinds with equal segments that are multiples of the chunk (the padded
 * layout's invariants). */
static inline int
dbuf__layout_chunked(dbuf_layout_kind_t kind)
{
  return kind == DBUF_LAYOUT_PADDED || kind == DBUF_LAYOUT_COMPACT;
}

/* range[nranks + 1] of equal segments for a buffer of at least end
 * elements, the size rounded up to unit x nranks; checked. */
int dbuf__layout_segments(int64_t end, int64_t unit, int nranks,
                          int64_t **range_out, int64_t *size_out);

/* The padded builder (layout_build.c); params already checked. */
int dbuf__layout_build_padded(const dbuf_tensors_t *t,
                              const dbuf_layout_params_t *p,
                              dbuf_layout_t **out, dbuf_diag_t *diag);

/* Padded and compact with node_size > 1 and more ranks than one node
 * (layout_node_pack.c); params already checked. */
int dbuf__layout_build_node_packed(const dbuf_tensors_t *t,
                                   const dbuf_layout_params_t *p,
                                   dbuf_layout_t **out, dbuf_diag_t *diag);

/* The compact builder (layout_compact.c); params already checked. */
int dbuf__layout_build_compact(const dbuf_tensors_t *t,
                               const dbuf_layout_params_t *p,
                               dbuf_layout_t **out, dbuf_diag_t *diag);

/* dbuf_layout_check_owner() for owners[0 .. count(t)); the first failure. */
int dbuf__layout_check_owners(const dbuf_tensors_t *t, const int *owners, int nranks,
                              dbuf_diag_t *diag);

/* Rank whose non-empty segment holds i (0 <= i < size). */
int dbuf__layout_owner(const dbuf_layout_t *l, int64_t i);

/* A sort key of two values and a tensor id, and its qsort order (a, then b,
 * then id, all ascending): the compact and node-aware packers sort by it. */
typedef struct {
  int64_t a, b, id;
} dbuf__key3_t;
int dbuf__key3_cmp(const void *x, const void *y);

/* The placement unit of tensor i: block x row size rounded up to a multiple
 * of align elements (their LCM).  DBUF_EOVERFLOW, named in diag, past 64 bits. */
int dbuf__tensor_unit(const dbuf_tensors_t *t, int64_t i, int64_t block, int64_t align,
                      int64_t *unit, dbuf_diag_t *diag);

/* The layout JSON pieces shared with the plan JSON (plan_json.c). */
struct dbuf__sb;
struct json_t;
/* A layout's members from "layout" on, one a line indented by ind spaces
 * (nested lines by ind + 2 and ind + 4), the last without its newline. */
void dbuf__layout_json_members(struct dbuf__sb *b, const dbuf_layout_t *l, unsigned flags,
                               int ind);
/* A layout from a parsed JSON object; name starts every message. */
int dbuf__layout_from_obj(const char *name, struct json_t *obj, dbuf_layout_t **out,
                          dbuf_diag_t *diag);

#endif /* DBUF_LAYOUT_INTERNAL_H */
