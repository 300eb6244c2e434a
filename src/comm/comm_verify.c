/* Collective verification: structure (whole rows, owned once) and data. */
#include "comm_internal.h"
#include "core_internal.h"

#include "dbuf/pattern.h"
#include "dbuf/wire.h"

#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SAMPLE_MAX_BYTES ((int64_t)1 << 20)

/* n int64 values (n >= 0), or NULL if that does not fit size_t. */
static int64_t *
alloc_i64(int64_t n, int zero)
{
  if (n < 0 || (uint64_t)n > SIZE_MAX / sizeof(int64_t))
    return NULL;
  size_t bytes = (size_t)(n > 0 ? n : 1) * sizeof(int64_t);
  return zero ? calloc(1, bytes) : malloc(bytes);
}

static void problem_set(dbuf__problem_t *p, int level, int rank, int64_t tensor,
                        int64_t row, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

static void
problem_set(dbuf__problem_t *p, int level, int rank, int64_t tensor, int64_t row,
            const char *fmt, ...)
{
  va_list ap;
  p->level = level;
  p->rank = rank;
  p->tensor = tensor;
  p->row = row;
  va_start(ap, fmt);
  vsnprintf(p->msg, sizeof p->msg, fmt, ap);
  va_end(ap);
}

/* "tensor NAME row R", "padding" or "the end of the buffer" for offset x,
 * from the layout's own queries; *tensor and *row get the ids (or -1). */
static void
describe(const dbuf_layout_t *l, int64_t x, char *buf, size_t len, int64_t *tensor,
         int64_t *row)
{
  int64_t t = -1;
  *tensor = *row = -1;
  if (x >= dbuf_layout_size(l) || x < 0 || dbuf_layout_tensor_at(l, x, &t) != 0) {
    snprintf(buf, len, "%s", x == dbuf_layout_size(l) ? "the end of the buffer"
                                                       : "outside the buffer");
    return;
  }
  const dbuf_tensors_t *ts = dbuf_layout_tensors(l);
  if (t < 0) { /* name the last tensor before the padding, if any */
    const int64_t *order = dbuf__layout_order_or_null(l);
    int64_t lo = dbuf_layout_order_lower(l, x);
    while (--lo >= 0 && dbuf_tensors_numel(ts, DBUF__AT(order, lo)) == 0)
      ;
    if (lo < 0) {
      snprintf(buf, len, "padding");
      return;
    }
    *tensor = DBUF__AT(order, lo);
    *row = dbuf_tensors_rows(ts, DBUF__AT(order, lo)) - 1;
    snprintf(buf, len, "padding after tensor %s row %" PRId64, dbuf_tensors_name(ts, *tensor),
             *row);
    return;
  }
  dbuf_rows_t at;
  dbuf_layout_rows_in(l, t, x, x + 1, &at); /* x < size: no overflow */
  *tensor = t;
  *row = at.first_row;
  if (at.first_col == 0)
    snprintf(buf, len, "tensor %s row %" PRId64, dbuf_tensors_name(ts, t), at.first_row);
  else
    snprintf(buf, len, "tensor %s row %" PRId64 " column %" PRId64,
             dbuf_tensors_name(ts, t), at.first_row, at.first_col);
}

/* ------------------------------------------------------------------------ */
/* Structure                                                                 */

/* 1. Do all ranks hold rank 0's layout?  A rank that does not compares its
 * cuts and offsets with rank 0's and names the first difference. */
static int
check_same_layout(dbuf_comm_t *ctx, const dbuf_layout_t *l, uint64_t plan,
                  dbuf__problem_t *mine, int64_t *nprob, int *same_shape)
{
  struct {
    uint64_t digest;
    int64_t ntensors, nranks;
  } me, *all;
  dbuf_diag_t d;
  int rc = dbuf_wire_digest(l, &me.digest, &d);
  me.ntensors = dbuf_layout_ntensors(l);
  me.nranks = dbuf_layout_nranks(l);
  all = calloc((size_t)ctx->size, sizeof *all);
  if (all == NULL)
    rc = DBUF_ENOMEM;
  int g;
  if (dbuf_comm_agree(ctx, rc, &g) != 0 || g != 0) {
    free(all);
    return g ? g : DBUF_EMPI;
  }
  if (MPI_Allgather(&me, (int)sizeof me, MPI_BYTE, all, (int)sizeof me, MPI_BYTE,
                    ctx->comm) != MPI_SUCCESS) {
    free(all);
    return DBUF_EMPI;
  }
  int differ = 0, refr = -1;
  if (plan == 0)
    plan = all[0].digest;
  *same_shape = 1;
  for (int r = 0; r < ctx->size; r++) {
    differ |= all[r].digest != plan;
    if (refr < 0 && all[r].digest == plan)
      refr = r;
    if (all[r].ntensors != all[0].ntensors)
      *same_shape = 0;
  }
  if (refr < 0)
    refr = 0; /* nobody holds the plan: compare with rank 0 */
  uint64_t d0 = plan;
  int64_t n0 = all[refr].ntensors, nr0 = all[refr].nranks;
  free(all);
  if (!differ)
    return 0;

  /* The reference rank's cuts and offsets, to name the first difference. */
  int64_t *ref = NULL, nref = nr0 + 1 + n0;
  ref = alloc_i64(nref, 0);
  rc = ref ? 0 : DBUF_ENOMEM;
  if (dbuf_comm_agree(ctx, rc, &g) != 0 || g != 0) {
    free(ref);
    return g ? g : DBUF_EMPI;
  }
  if (ctx->rank == refr) {
    memcpy(ref, dbuf_layout_range(l), (size_t)(nr0 + 1) * sizeof *ref);
    memcpy(ref + nr0 + 1, dbuf_layout_offsets(l), (size_t)n0 * sizeof *ref);
  }
  if ((rc = dbuf__comm_bcast_bytes(ctx, ref, nref * (int64_t)sizeof *ref, refr)) != 0) {
    free(ref);
    return rc;
  }
  if (me.digest != d0) {
    dbuf__problem_t p;
    char what[DBUF_DIAG_LEN / 2], what0[DBUF_DIAG_LEN / 2];
    int64_t t, row, t0, row0;
    const int64_t *range = dbuf_layout_range(l), *off = dbuf_layout_offsets(l);
    (*nprob)++;
    problem_set(&p, 1, ctx->rank, -1, -1,
                "rank %d: stale layout: checksum %016" PRIx64 ", the plan has %016" PRIx64,
                ctx->rank, me.digest, d0);
    if (me.nranks != nr0 || me.ntensors != n0) {
      problem_set(&p, 1, ctx->rank, -1, -1,
                  "rank %d: stale layout: %" PRId64 " segments and %" PRId64
                  " tensors, rank %d has %" PRId64 " and %" PRId64,
                  ctx->rank, me.nranks, me.ntensors, refr, nr0, n0);
    } else {
      int found = 0;
      for (int64_t c = 1; c < nr0 && !found; c++) {
        if (range[c] == ref[c])
          continue;
        found = 1;
        describe(l, range[c], what, sizeof what, &t, &row);
        describe(l, ref[c], what0, sizeof what0, &t0, &row0);
        problem_set(&p, 1, ctx->rank, t, row,
                    "rank %d: stale layout: segment %" PRId64 " starts at %" PRId64
                    " (%s), the plan (rank %d) has %" PRId64 " (%s)",
                    ctx->rank, c, range[c], what, refr, ref[c], what0);
      }
      for (int64_t i = 0; i < n0 && !found; i++) {
        if (off[i] == ref[nr0 + 1 + i])
          continue;
        found = 1;
        problem_set(&p, 1, ctx->rank, i, 0,
                    "rank %d: stale layout: tensor %s row 0 at %" PRId64
                    ", the plan (rank %d) has %" PRId64,
                    ctx->rank, dbuf_tensors_name(dbuf_layout_tensors(l), i), off[i], refr,
                    ref[nr0 + 1 + i]);
      }
    }
    dbuf__problem_offer(mine, &p);
  }
  free(ref);
  return 0;
}

/* 2. Does x (start or end of this rank's range) fall on a boundary? */
static void
check_boundary(dbuf_comm_t *ctx, const dbuf_layout_t *l, int64_t x, const char *which,
               dbuf__problem_t *mine, int64_t *nprob)
{
  int64_t t = -1;
  if (x <= 0 || x >= dbuf_layout_size(l) || dbuf_layout_tensor_at(l, x, &t) != 0 || t < 0)
    return;
  const dbuf_tensors_t *ts = dbuf_layout_tensors(l);
  int64_t re = dbuf_tensors_row_elems(ts, t), block = dbuf_layout_block_size(l);
  dbuf_rows_t at;
  dbuf_layout_rows_in(l, t, x, x + 1, &at); /* x < size: no overflow */
  int64_t row = at.first_row;
  dbuf__problem_t p;
  if (at.elem_begin == 0)
    return;
  if (dbuf_layout_kind(l) == DBUF_LAYOUT_TENSOR) {
    problem_set(&p, 2, ctx->rank, t, row,
                "rank %d: segment %s %" PRId64 " cuts tensor %s row %" PRId64
                " (TensorAtomic: a tensor is never split)",
                ctx->rank, which, x, dbuf_tensors_name(ts, t), row);
  } else if (at.first_col != 0) {
    problem_set(&p, 2, ctx->rank, t, row,
                "rank %d: segment %s %" PRId64 " is inside tensor %s row %" PRId64
                " (column %" PRId64 " of %" PRId64 ")",
                ctx->rank, which, x, dbuf_tensors_name(ts, t), row, at.first_col, re);
  } else if (row % block != 0) {
    problem_set(&p, 2, ctx->rank, t, row,
                "rank %d: segment %s %" PRId64 " is inside a block of tensor %s at row %" PRId64
                " (block size %" PRId64 ")",
                ctx->rank, which, x, dbuf_tensors_name(ts, t), row, block);
  } else {
    return;
  }
  (*nprob)++;
  dbuf__problem_offer(mine, &p);
}

/* Rows of tensor t whose first element lies in [a, b): the rows a rank
 * holding [a, b) owns. */
static int64_t
rows_owned(const dbuf_layout_t *l, int64_t t, int64_t a, int64_t b, int64_t *first)
{
  dbuf_rows_t rows;
  dbuf_layout_rows_in(l, t, a, b, &rows); /* a <= b */
  if (rows.nelems == 0)
    return 0;
  if (first)
    *first = rows.first_row + rows.cut_first;
  return rows.nrows - rows.cut_first;
}

/* 4. Every row owned exactly once, proven by a scan: O(tensors / ranks)
 * local work and O(log ranks) messages of a few words a rank.  Under whole-row ownership a rank
 * holding [a, b) owns the rows whose first element lies in [a, b): in the
 * layout's offset order they are consecutive.  So the rows are owned once
 * exactly when, rank by rank, each rank's first row is the row after the
 * last row of the nearest lower rank that owns any (the first row of the
 * buffer for the lowest), and the last owning rank ends at the buffer's
 * end.  Each rank computes its first row, its row count and the row after
 * its last locally (only the tensors meeting its segment); one MPI_Exscan
 * brings it the "row after" of the nearest owning rank below, and one
 * allreduce of three counters (rows owned, rows in the buffer, findings) is
 * the final tally.  A rank's own finding names the row and both ranks. */

/* A row in offset order: tensor id and row; tensor -1 is the buffer's end. */
typedef struct {
  int64_t has;    /* 0: the rank owns no row (the scan skips it) */
  int64_t rank;   /* who sent it */
  int64_t tensor; /* the row after the sender's last row, -1: the end */
  int64_t row;
} scan_rec_t;

/* MPI_Exscan operator: the record of the highest rank that owns a row. */
static void
scan_last_owner(void *in, void *inout, int *len, MPI_Datatype *type)
{
  (void)type;
  scan_rec_t *a = in, *b = inout;
  for (int i = 0; i < *len; i++)
    if (!b[i].has)
      b[i] = a[i];
}

/* Position of tensor id t in dbuf_layout_order() (ties at one offset are
 * empty tensors: a short walk). */
static int64_t
order_pos(const dbuf_layout_t *l, int64_t t)
{
  const int64_t *order = dbuf__layout_order_or_null(l);
  int64_t n = dbuf_layout_ntensors(l);
  int64_t p = dbuf_layout_order_lower(l, dbuf_layout_offsets(l)[t]);
  while (p < n && DBUF__AT(order, p) != t)
    p++;
  return p;
}

/* The first row at or after position p of the order with row r of its
 * tensor: skips exhausted and empty tensors; tensor -1 past the last. */
static void
row_at(const dbuf_layout_t *l, int64_t p, int64_t r, int64_t *tensor, int64_t *row)
{
  const int64_t *order = dbuf__layout_order_or_null(l);
  const dbuf_tensors_t *ts = dbuf_layout_tensors(l);
  int64_t n = dbuf_layout_ntensors(l);
  while (p < n && r >= dbuf_tensors_rows(ts, DBUF__AT(order, p))) {
    p++;
    r = 0;
  }
  *tensor = p < n ? DBUF__AT(order, p) : -1;
  *row = p < n ? r : 0;
}

/* The rows a rank holding [a, b) owns: count, first row, row after the last. */
static void
own_rows(const dbuf_layout_t *l, int64_t a, int64_t b, int64_t *count, int64_t first[2],
         int64_t after[2])
{
  const int64_t *off = dbuf_layout_offsets(l), *order = dbuf__layout_order_or_null(l);
  int64_t n = dbuf_layout_ntensors(l), t = -1, p, lastp = -1, lastrow = 0;
  *count = 0;
  first[0] = after[0] = -1;
  first[1] = after[1] = 0;
  if (a >= b)
    return;
  p = dbuf_layout_order_lower(l, a);
  if (a < dbuf_layout_size(l) && dbuf_layout_tensor_at(l, a, &t) == 0 && t >= 0 && off[t] < a)
    p = order_pos(l, t); /* the tensor the segment starts inside */
  for (; p < n && off[DBUF__AT(order, p)] < b; p++) {
    int64_t f = 0, k = rows_owned(l, DBUF__AT(order, p), a, b, &f);
    if (k == 0)
      continue;
    if (*count == 0) {
      first[0] = DBUF__AT(order, p);
      first[1] = f;
    }
    *count += k;
    lastp = p;
    lastrow = f + k;
  }
  if (lastp >= 0)
    row_at(l, lastp, lastrow, &after[0], &after[1]);
}

/* Is (ta, ra) before (tb, rb) in l's order?  Tensor -1 is the end. */
static int
row_before(const dbuf_layout_t *l, int64_t ta, int64_t ra, int64_t tb, int64_t rb)
{
  int64_t n = dbuf_layout_ntensors(l);
  int64_t pa = ta < 0 ? n : order_pos(l, ta), pb = tb < 0 ? n : order_pos(l, tb);
  return pa < pb || (pa == pb && ra < rb);
}

static int
check_row_scan(dbuf_comm_t *ctx, const dbuf_layout_t *l, int64_t start, int64_t end,
               dbuf__problem_t *mine, int64_t *nprob)
{
  const dbuf_tensors_t *ts = dbuf_layout_tensors(l);
  int64_t a = start > 0 ? start : 0, b = end < dbuf_layout_size(l) ? end : dbuf_layout_size(l);
  int64_t count, first[2], after[2], head[2];
  own_rows(l, a, b, &count, first, after);
  row_at(l, 0, 0, &head[0], &head[1]);

  scan_rec_t me = {count > 0, ctx->rank, after[0], after[1]}, below;
  memset(&below, 0, sizeof below);
  MPI_Datatype type = MPI_DATATYPE_NULL;
  MPI_Op op = MPI_OP_NULL;
  int ok = MPI_Type_contiguous(4, MPI_INT64_T, &type) == MPI_SUCCESS &&
           MPI_Type_commit(&type) == MPI_SUCCESS &&
           MPI_Op_create(scan_last_owner, 0, &op) == MPI_SUCCESS &&
           MPI_Exscan(&me, &below, 1, type, op, ctx->comm) == MPI_SUCCESS;
  if (op != MPI_OP_NULL)
    MPI_Op_free(&op);
  if (type != MPI_DATATYPE_NULL)
    MPI_Type_free(&type);
  if (!ok)
    return DBUF_EMPI;
  if (ctx->rank == 0 || !below.has) { /* the lowest owner starts the buffer */
    below.tensor = head[0];
    below.row = head[1];
    below.rank = -1;
  }

  dbuf__problem_t p;
  memset(&p, 0, sizeof p);
  int prev = (int)below.rank;
  if (count > 0 && (first[0] != below.tensor || first[1] != below.row)) {
    if (row_before(l, below.tensor, below.row, first[0], first[1])) {
      if (prev < 0)
        problem_set(&p, 3, ctx->rank, below.tensor, below.row,
                    "tensor %s row %" PRId64 " is owned by no rank (lost before rank %d)",
                    dbuf_tensors_name(ts, below.tensor), below.row, ctx->rank);
      else
        problem_set(&p, 3, ctx->rank, below.tensor, below.row,
                    "tensor %s row %" PRId64
                    " is owned by no rank (lost between rank %d and rank %d)",
                    dbuf_tensors_name(ts, below.tensor), below.row, prev, ctx->rank);
    } else {
      problem_set(&p, 3, ctx->rank, first[0], first[1],
                  "tensor %s row %" PRId64 " is owned twice (by rank %d and rank %d)",
                  dbuf_tensors_name(ts, first[0]), first[1], prev, ctx->rank);
    }
  }
  if (p.level == 0 && ctx->rank == ctx->size - 1) {
    scan_rec_t last = count > 0 ? me : below;
    int owner = count > 0 ? ctx->rank : prev;
    if (last.tensor >= 0 && owner < 0)
      problem_set(&p, 3, ctx->rank, last.tensor, last.row,
                  "tensor %s row %" PRId64 " is owned by no rank (no rank owns a row)",
                  dbuf_tensors_name(ts, last.tensor), last.row);
    else if (last.tensor >= 0)
      problem_set(&p, 3, ctx->rank, last.tensor, last.row,
                  "tensor %s row %" PRId64 " is owned by no rank (lost after rank %d)",
                  dbuf_tensors_name(ts, last.tensor), last.row, owner);
  }
  /* The tally: rows owned, rows in the buffer (each rank sums its share of
   * the tensors), and the findings above.  With no finding, the sums agree
   * whenever the ranks hold one layout; it is the last word if they do not. */
  int64_t tally[3] = {count, 0, p.level != 0}, n = dbuf_layout_ntensors(l);
  int64_t lo = n / ctx->size * ctx->rank + (ctx->rank < n % ctx->size ? ctx->rank : n % ctx->size);
  int64_t hi = lo + n / ctx->size + (ctx->rank < n % ctx->size);
  for (int64_t t = lo; t < hi; t++)
    tally[1] += dbuf_tensors_rows(ts, t); /* <= the elements: fits */
  if (MPI_Allreduce(MPI_IN_PLACE, tally, 3, MPI_INT64_T, MPI_SUM, ctx->comm) != MPI_SUCCESS)
    return DBUF_EMPI;
  if (tally[2] == 0 && ctx->rank == 0 && tally[0] != tally[1])
    problem_set(&p, 3, 0, -1, -1, "the ranks own %" PRId64 " rows, the buffer has %" PRId64,
                tally[0], tally[1]);
  if (p.level != 0) {
    (*nprob)++;
    dbuf__problem_offer(mine, &p);
  }
  return 0;
}

int
dbuf_comm_verify_structure(dbuf_comm_t *ctx, const dbuf_layout_t *l, uint64_t plan_digest,
                           int64_t start, int64_t end, dbuf_verdict_t *v)
{
  dbuf__problem_t mine;
  dbuf_verdict_t scratch; /* a NULL v is agreed like any bad argument */
  int64_t nprob = 0;
  int same_shape = 0, rc, v_ok = v != NULL;
  if (ctx == NULL)
    return DBUF_EINVAL;
  if (v == NULL)
    v = &scratch;
  memset(v, 0, sizeof *v);
  memset(&mine, 0, sizeof mine);
  int64_t global[2] = {(int64_t)plan_digest, ctx->chunk};
  if ((rc = dbuf__comm_check_args(ctx, l != NULL && v_ok, 2, global,
                                  (const char *const[]){"plan_digest", "chunk size"}, v->msg,
                                  sizeof v->msg)) != 0)
    return v->code = rc;

  /* 1. The same layout everywhere. */
  if ((rc = check_same_layout(ctx, l, plan_digest, &mine, &nprob, &same_shape)) != 0)
    return v->code = rc;

  /* 2. Local: the range is inside the buffer and cut on boundaries. */
  int64_t size = dbuf_layout_size(l);
  if (start < 0 || end > size || start > end) {
    dbuf__problem_t p;
    problem_set(&p, 2, ctx->rank, -1, -1,
                "rank %d: segment [%" PRId64 ", %" PRId64 ") is not inside the buffer [0, %" PRId64 ")",
                ctx->rank, start, end, size);
    nprob++;
    dbuf__problem_offer(&mine, &p);
  } else {
    check_boundary(ctx, l, start, "start", &mine, &nprob);
    check_boundary(ctx, l, end, "end", &mine, &nprob);
  }

  /* 3. Neighbours share their boundary. */
  int64_t prev_end = 0;
  int up = ctx->rank + 1 < ctx->size ? ctx->rank + 1 : MPI_PROC_NULL;
  int down = ctx->rank > 0 ? ctx->rank - 1 : MPI_PROC_NULL;
  if (MPI_Sendrecv(&end, 1, MPI_INT64_T, up, 71, &prev_end, 1, MPI_INT64_T, down, 71,
                   ctx->comm, MPI_STATUS_IGNORE) != MPI_SUCCESS)
    return v->code = DBUF_EMPI;
  if (prev_end != start) {
    char a[DBUF_DIAG_LEN / 3], b[DBUF_DIAG_LEN / 3];
    int64_t t, row, t2, row2;
    dbuf__problem_t p;
    describe(l, start, a, sizeof a, &t, &row);
    describe(l, prev_end, b, sizeof b, &t2, &row2);
    if (ctx->rank == 0)
      problem_set(&p, 2, 0, t, row, "rank 0: segment starts at %" PRId64 " (%s), not at 0",
                  start, a);
    else
      problem_set(&p, 2, ctx->rank, t >= 0 ? t : t2, t >= 0 ? row : row2,
                  "rank %d: segment starts at %" PRId64 " (%s) but rank %d's ends at %" PRId64
                  " (%s)",
                  ctx->rank, start, a, ctx->rank - 1, prev_end, b);
    nprob++;
    dbuf__problem_offer(&mine, &p);
  }
  if (up == MPI_PROC_NULL && end != size) {
    char a[DBUF_DIAG_LEN / 3];
    int64_t t, row;
    dbuf__problem_t p;
    describe(l, end, a, sizeof a, &t, &row);
    problem_set(&p, 2, ctx->rank, t, row,
                "rank %d: the last segment ends at %" PRId64 " (%s), not at the buffer size %" PRId64,
                ctx->rank, end, a, size);
    nprob++;
    dbuf__problem_offer(&mine, &p);
  }
  v->local_ok = mine.level == 0;
  snprintf(v->local_msg, sizeof v->local_msg, "%s", mine.msg);

  /* 4. Every row owned once (only meaningful if all ranks list the same tensors). */
  if (same_shape && (rc = check_row_scan(ctx, l, start, end, &mine, &nprob)) != 0)
    return v->code = rc;

  int keep_ok = v->local_ok;
  char keep_msg[DBUF_DIAG_LEN];
  memcpy(keep_msg, v->local_msg, sizeof keep_msg);
  rc = dbuf__comm_agree_verdict(ctx, &mine, nprob, v);
  v->local_ok = keep_ok;
  memcpy(v->local_msg, keep_msg, sizeof keep_msg);
  return rc;
}

/* ------------------------------------------------------------------------ */
/* Data                                                                      */

static void
bad_msg(const dbuf_layout_t *l, int rank, const dbuf_pattern_bad_t *b, int64_t nbad,
        int64_t elem_size, const char *how, dbuf__problem_t *p, int level)
{
  int w = (int)(2 * elem_size);
  if (b->tensor < 0)
    problem_set(p, level, rank, -1, -1,
                "rank %d: %spadding at global offset %" PRId64 " holds 0x%0*" PRIx64
                ", expected 0 (%" PRId64 " wrong elements)",
                rank, how, b->offset, w, b->found, nbad);
  else
    problem_set(p, level, rank, b->tensor, b->row,
                "rank %d: %stensor %s row %" PRId64 " column %" PRId64
                " (global offset %" PRId64 ") holds 0x%0*" PRIx64 ", expected 0x%0*" PRIx64
                " (%" PRId64 " wrong elements)",
                rank, how, dbuf_tensors_name(dbuf_layout_tensors(l), b->tensor), b->row,
                b->col, b->offset, w, b->found, w, b->expected, nbad);
}

/* The sample runs of [start, end): whole rows around evenly spaced offsets. */
static int64_t
sample_runs(const dbuf_layout_t *l, int64_t start, int64_t end, int want, int64_t elem_size,
            int64_t *runs /* [2 * want] */)
{
  int64_t n = 0, cap = SAMPLE_MAX_BYTES / elem_size / (want > 0 ? want : 1);
  if (cap < 1)
    cap = 1;
  for (int i = 0; i < want && start < end; i++) {
    int64_t x = i == want - 1 ? end - 1 : start + (end - start) / want * i;
    int64_t t = -1, a = x, b = x + 1;
    dbuf_layout_tensor_at(l, x, &t);
    if (t >= 0) { /* the whole row holding x */
      dbuf_rows_t at;
      dbuf_layout_rows_in(l, t, x, x + 1, &at);
      a = x - at.first_col;
      b = a + dbuf_tensors_row_elems(dbuf_layout_tensors(l), t);
    }
    if (a < start)
      a = start;
    if (b > end)
      b = end;
    if (b - a > cap) {
      a = x - cap / 2 > a ? x - cap / 2 : a;
      b = a + cap < b ? a + cap : b;
    }
    if (n > 0 && a < runs[2 * n - 2] + runs[2 * n - 1])
      continue; /* overlaps the previous sample */
    runs[2 * n] = a;
    runs[2 * n + 1] = b - a;
    n++;
  }
  return n;
}

int
dbuf_comm_verify_data(dbuf_comm_t *ctx, const dbuf_layout_t *l, int64_t start, int64_t end,
                      const void *seg, int64_t elem_size, int sample_rows, dbuf_verdict_t *v)
{
  dbuf__problem_t mine;
  dbuf_verdict_t scratch; /* a NULL v is agreed like any bad argument */
  int64_t nprob = 0, nbad = 0;
  int rc, g;
  if (ctx == NULL)
    return DBUF_EINVAL;
  int bad_args = v == NULL;
  if (v == NULL)
    v = &scratch;
  memset(v, 0, sizeof *v);
  memset(&mine, 0, sizeof mine);
  bad_args = bad_args || l == NULL || (seg == NULL && end > start) || sample_rows < 0 ||
                 (elem_size != 1 && elem_size != 2 && elem_size != 4 && elem_size != 8) ||
                 start < 0 || start > end || end > dbuf_layout_size(l);
  /* elem_size and sample_rows size rank 0's reading of every rank's samples. */
  int64_t global[2] = {elem_size, sample_rows};
  if ((rc = dbuf__comm_check_args(ctx, !bad_args, 2, global,
                                  (const char *const[]){"elem_size", "sample_rows"}, v->msg,
                                  sizeof v->msg)) != 0)
    return v->code = rc;

  /* Every element of this rank's own segment. */
  dbuf_pattern_bad_t first;
  if ((rc = dbuf_pattern_verify(l, start, end, seg, elem_size, NULL, NULL, &nbad, &first)) == 0 &&
      nbad > 0) {
    bad_msg(l, ctx->rank, &first, nbad, elem_size, "", &mine, 1);
    nprob++;
  }
  if ((rc = dbuf_comm_agree(ctx, rc, &g)) != 0 || g != 0)
    return v->code = (g ? g : rc);
  v->local_ok = mine.level == 0;
  snprintf(v->local_msg, sizeof v->local_msg, "%s", mine.msg);

  /* Rank 0's spot check of sample rows of every rank. */
  int64_t *runs = calloc((size_t)(2 * (sample_rows > 0 ? sample_rows : 1)), sizeof *runs);
  int64_t nruns = runs ? sample_runs(l, start, end, sample_rows, elem_size, runs) : 0;
  int64_t bytes = 0;
  for (int64_t i = 0; i < nruns; i++)
    bytes += runs[2 * i + 1] * elem_size;
  /* Message: nruns, then (offset, count) pairs, then the bytes. */
  int64_t msg_len = 8 + 16 * nruns + bytes;
  char *msg = runs ? malloc((size_t)msg_len) : NULL;
  int *counts = NULL, *displs = NULL;
  char *recv = NULL;
  rc = msg ? 0 : DBUF_ENOMEM;
  if (ctx->rank == 0 && rc == 0) {
    counts = calloc((size_t)ctx->size, sizeof *counts);
    displs = calloc((size_t)ctx->size, sizeof *displs);
    if (!counts || !displs)
      rc = DBUF_ENOMEM;
  }
  int my_count = 0;
  if (rc == 0)
    rc = dbuf_comm_count(msg_len, &my_count);
  if ((g = 0, dbuf_comm_agree(ctx, rc, &g)) != 0 || g != 0) {
    rc = g ? g : DBUF_EMPI;
    goto out;
  }
  memcpy(msg, &nruns, 8);
  memcpy(msg + 8, runs, (size_t)(16 * nruns));
  for (int64_t i = 0, at = 8 + 16 * nruns; i < nruns; i++) {
    size_t nb = (size_t)(runs[2 * i + 1] * elem_size);
    memcpy(msg + at, (const char *)seg + (runs[2 * i] - start) * elem_size, nb);
    at += (int64_t)nb;
  }
  if (MPI_Gather(&my_count, 1, MPI_INT, counts, 1, MPI_INT, 0, ctx->comm) != MPI_SUCCESS) {
    rc = DBUF_EMPI;
    goto out;
  }
  rc = 0;
  if (ctx->rank == 0) {
    int64_t total = 0;
    for (int r = 0; r < ctx->size; r++) {
      displs[r] = (int)total;
      total += counts[r];
      if (total > INT_MAX)
        rc = DBUF_EOVERFLOW;
    }
    if (rc == 0 && (recv = malloc((size_t)(total > 0 ? total : 1))) == NULL)
      rc = DBUF_ENOMEM;
  }
  if ((g = 0, dbuf_comm_agree(ctx, rc, &g)) != 0 || g != 0) {
    rc = g ? g : DBUF_EMPI;
    goto out;
  }
  if (MPI_Gatherv(msg, my_count, MPI_BYTE, recv, counts, displs, MPI_BYTE, 0, ctx->comm) !=
      MPI_SUCCESS) {
    rc = DBUF_EMPI;
    goto out;
  }
  if (ctx->rank == 0) {
    dbuf__problem_t spot;
    memset(&spot, 0, sizeof spot);
    for (int r = 0; r < ctx->size; r++) {
      const char *m = recv + displs[r];
      int64_t k;
      memcpy(&k, m, 8);
      for (int64_t i = 0, at = 8 + 16 * k; i < k && counts[r] >= 8 + 16 * k; i++) {
        int64_t off, cnt, nb2 = 0;
        int owner = -1;
        memcpy(&off, m + 8 + 16 * i, 8);
        memcpy(&cnt, m + 16 + 16 * i, 8);
        dbuf__problem_t p;
        memset(&p, 0, sizeof p);
        if (off < 0 || cnt < 1 || off > dbuf_layout_size(l) - cnt ||
            dbuf_layout_owner_of(l, off, &owner) != 0 || owner < 0) {
          problem_set(&p, 2, r, -1, -1,
                      "rank %d: spot check: sample at global offset %" PRId64
                      " is outside rank 0's buffer",
                      r, off);
        } else {
          dbuf_pattern_bad_t b;
          dbuf_pattern_verify(l, off, off + cnt, m + at, elem_size, NULL, NULL, &nb2, &b);
          if (nb2 > 0)
            bad_msg(l, r, &b, nb2, elem_size, "spot check by rank 0: ", &p, 2);
        }
        if (p.level != 0) {
          nprob++;
          dbuf__problem_offer(&spot, &p);
        }
        at += cnt * elem_size;
      }
    }
    dbuf__problem_offer(&mine, &spot);
  }
  rc = dbuf__comm_agree_verdict(ctx, &mine, nprob, v);
  v->local_ok = nbad == 0;
out:
  free(runs);
  free(msg);
  free(counts);
  free(displs);
  free(recv);
  if (rc != 0 && rc != DBUF_EVERIFY)
    v->code = rc;
  return rc;
}
