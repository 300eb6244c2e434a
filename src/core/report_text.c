/* Text reports for people: summary, table (one line per rank), diagram. */
#include "core_internal.h"
#include "report_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Room for a tensor name (names are not bounded) plus a row suffix. */
#define LABEL_LEN 1024

static const char *
atomicity(const dbuf_layout_t *l)
{
  if (dbuf_layout_kind(l) == DBUF_LAYOUT_TENSOR)
    return "TensorAtomic";
  return dbuf_layout_block_size(l) > 1 ? "BlockAtomic" : "RowAtomic";
}

/* Bytes of rank r's segment rounded up to align_bytes (or plain bytes). */
static int
seg_bytes(const dbuf__rep_t *rep, int r, int aligned, int64_t *out)
{
  int64_t bytes = (rep->range[r + 1] - rep->range[r]) * rep->o.elem_size;
  if (aligned && rep->o.align_bytes > 0)
    return dbuf__round_up(bytes, rep->o.align_bytes, out);
  *out = bytes;
  return 0;
}

/* The one notation for rows of a tensor in the text reports: "NAME row R"
 * for one row, "NAME rows A-B" (both ends included) for several.  Element
 * ranges, by contrast, are half-open: "[start, end)". */
static const char *
rows_label(char *buf, const dbuf_tensors_t *t, int64_t id, int64_t first,
           int64_t nrows)
{
  const char *name = dbuf_tensors_name(t, id);
  if (nrows == 1)
    snprintf(buf, LABEL_LEN, "%s row %lld", name, (long long)first);
  else
    snprintf(buf, LABEL_LEN, "%s rows %lld-%lld", name, (long long)first,
             (long long)(first + nrows - 1));
  return buf;
}

static const char *
row_label(char *buf, const dbuf_tensors_t *t, int64_t id, int64_t row)
{
  return rows_label(buf, t, id, row, 1);
}

/* "NAME" for a whole tensor, else its rows. */
static const char *
piece_label(char *buf, const dbuf_tensors_t *t, const dbuf_piece_t *p)
{
  if (p->elem_begin == 0 && p->nelems == dbuf_tensors_numel(t, p->tensor)) {
    snprintf(buf, LABEL_LEN, "%s", dbuf_tensors_name(t, p->tensor));
    return buf;
  }
  return rows_label(buf, t, p->tensor, p->first_row, p->nrows);
}

static void
key(dbuf__sb_t *b, const char *k)
{
  dbuf__sb_printf(b, "%-17s", k);
}

/* total / nranks with thousands separators, two decimals when inexact. */
static void
mean(dbuf__sb_t *b, int64_t total, int nranks)
{
  char g[32];
  int64_t q = total / nranks, rem = total % nranks;
  if (rem == 0) {
    dbuf__sb_printf(b, "%s", dbuf__rep_group(g, q));
    return;
  }
  int64_t cents = (rem * 100 + nranks / 2) / nranks; /* rem < nranks < 2^31 */
  if (cents == 100) {
    q++;
    cents = 0;
  }
  dbuf__sb_printf(b, "%s.%02lld", dbuf__rep_group(g, q), (long long)cents);
}

/* ------------------------------------------------------------------ */
/* summary                                                              */

/* "ns load balance:" line of a layout with owners: the Newton-Schulz cost
 * per rank, max over mean.  A cost that overflows is reported in the line,
 * not as a failure of the whole summary. */
static int
ns_balance(const dbuf__rep_t *rep, dbuf__sb_t *b)
{
  int64_t *loads = dbuf__mallocn(rep->nranks, sizeof *loads), total = 0;
  dbuf_diag_t d;
  int max_rank = 0, rc;
  if (loads == NULL)
    return DBUF_ENOMEM;
  dbuf__sb_puts(b, "\n");
  key(b, "ns load balance:");
  rc = dbuf_layout_owner_loads(rep->l, DBUF_OWNERS_NS, loads, &d);
  for (int r = 0; rc == 0 && r < rep->nranks; r++) {
    if (dbuf__add(total, loads[r], &total) != 0)
      rc = dbuf__diag(&d, DBUF_EOVERFLOW,
                      "the total Newton-Schulz cost overflows 64 bits");
    if (loads[r] > loads[max_rank])
      max_rank = r;
  }
  if (rc == DBUF_ENOMEM) {
    free(loads);
    return rc;
  }
  if (rc != 0)
    dbuf__sb_printf(b, "n/a (%s)", d.msg);
  else if (total == 0)
    dbuf__sb_printf(b, "n/a (no cost)");
  else
    dbuf__sb_printf(b, "max/mean %.4f (rank %d)",
                    (double)loads[max_rank] * rep->nranks / (double)total,
                    max_rank);
  free(loads);
  return 0;
}

/* Summary lines: layout, tensors, logical and buffer size, padding. */
static void
summary_sizes(const dbuf__rep_t *rep, dbuf__sb_t *b)
{
  const dbuf_layout_t *l = rep->l;
  const dbuf_layout_stats_t *st = &rep->st;
  int64_t es = rep->o.elem_size, size = dbuf_layout_size(l);
  char g1[32], g2[32], g3[32], by[64];

  key(b, "layout:");
  dbuf__sb_printf(b, "%s (%s), dp %d", dbuf_layout_kind_name(dbuf_layout_kind(l)),
                  atomicity(l), rep->nranks);
  if (dbuf_layout_block_size(l) > 1)
    dbuf__sb_printf(b, ", block %lld rows",
                    (long long)dbuf_layout_block_size(l));
  if (dbuf_layout_chunk_size(l) > 0)
    dbuf__sb_printf(b, ", chunk %s elements",
                    dbuf__rep_group(g1, dbuf_layout_chunk_size(l)));
  dbuf__sb_puts(b, "\n");
  key(b, "tensors:");
  dbuf__sb_printf(b, "%s", dbuf__rep_group(g1, dbuf_layout_ntensors(l)));
  if (rep->o.source != NULL && rep->o.source[0] != '\0')
    dbuf__sb_printf(b, " (%s)", rep->o.source);
  dbuf__sb_printf(b, ", dtype %s, %lld byte%s per element", rep->o.dtype,
                  (long long)es, es == 1 ? "" : "s");

  dbuf__sb_puts(b, "\n");
  key(b, "logical size:");
  dbuf__sb_printf(b, "%s elements, %s", dbuf__rep_group(g1, st->logical),
                  dbuf__rep_bytes(by, st->logical * es));
  dbuf__sb_puts(b, "\n");
  key(b, "buffer size:");
  dbuf__sb_printf(b, "%s elements, %s", dbuf__rep_group(g1, size),
                  dbuf__rep_bytes(by, size * es));
  dbuf__sb_puts(b, "\n");
  key(b, "padding:");
  dbuf__sb_printf(b, "%s elements (%.2f%% of the buffer), %s in gaps, %s at "
                  "the end",
                  dbuf__rep_group(g1, st->padding),
                  size > 0 ? 100.0 * (double)st->padding / (double)size : 0.0,
                  dbuf__rep_group(g2, st->gap_elems),
                  dbuf__rep_group(g3, st->tail_elems));
}

/* Summary lines: per rank in elements and bytes, aligned sizes, balance. */
static int
summary_ranks(const dbuf__rep_t *rep, dbuf__sb_t *b, dbuf_diag_t *diag)
{
  const dbuf_layout_t *l = rep->l;
  const dbuf_layout_stats_t *st = &rep->st;
  int64_t es = rep->o.elem_size, size = dbuf_layout_size(l);
  char g[32], by[64], by2[64], u[24];
  int rc;

  dbuf__sb_puts(b, "\n");
  key(b, "per rank:");
  dbuf__sb_printf(b, "min %s (rank %d), ", dbuf__rep_group(g, st->min_segment),
                  st->min_rank);
  dbuf__sb_printf(b, "max %s (rank %d), mean ",
                  dbuf__rep_group(g, st->max_segment), st->max_rank);
  mean(b, size, rep->nranks);
  dbuf__sb_printf(b, " elements");
  if (st->empty_segments > 0)
    dbuf__sb_printf(b, "; %d empty", st->empty_segments);
  dbuf__sb_puts(b, "\n");
  key(b, "per rank bytes:");
  dbuf__sb_printf(b, "min %s%s, ", dbuf__rep_group(g, st->min_segment * es),
                  dbuf__rep_unit(u, st->min_segment * es));
  dbuf__sb_printf(b, "max %s%s, mean ", dbuf__rep_group(g, st->max_segment * es),
                  dbuf__rep_unit(u, st->max_segment * es));
  mean(b, size * es, rep->nranks);
  dbuf__sb_puts(b, dbuf__rep_unit(u, size * es / rep->nranks));

  if (rep->o.align_bytes > 0) {
    int64_t max = 0, sum = 0, a;
    for (int r = 0; r < rep->nranks; r++) {
      if (seg_bytes(rep, r, 1, &a) != 0 || dbuf__add(sum, a, &sum) != 0)
        return dbuf__diag(diag, DBUF_EOVERFLOW,
                          "rank %d: segment bytes aligned to %lld overflow 64 "
                          "bits",
                          r, (long long)rep->o.align_bytes);
      if (a > max)
        max = a;
    }
    dbuf__sb_puts(b, "\n");
    key(b, "aligned:");
    dbuf__sb_printf(b, "segments rounded up to %s: ",
                    dbuf__rep_bytes(by, rep->o.align_bytes));
    dbuf__sb_printf(b, "max %s per rank, %s in all", dbuf__rep_bytes(by, max),
                    dbuf__rep_bytes(by2, sum));
  }
  if (dbuf_layout_chunk_size(l) == 0) { /* equal segments have no imbalance */
    dbuf__sb_puts(b, "\n");
    key(b, "load balance:");
    if (size > 0)
      dbuf__sb_printf(b, "max/mean %.4f (rank %d)",
                      (double)st->max_segment * rep->nranks / (double)size,
                      st->max_rank);
    else
      dbuf__sb_printf(b, "n/a (empty buffer)");
  }
  if (dbuf_layout_owners(l) != NULL && (rc = ns_balance(rep, b)) != 0)
    return dbuf__diag(diag, rc, "out of memory for %d ranks", rep->nranks);
  return 0;
}

/* Summary line: the largest tensor, its shape, size and ranks. */
static int
summary_largest(const dbuf__rep_t *rep, dbuf__sb_t *b, dbuf_diag_t *diag)
{
  const dbuf_tensors_t *t = rep->t;
  int64_t id = rep->st.largest_tensor, np;
  char g[32], by[64], shape[DBUF__SHAPE_STR_LEN];
  int rc;

  key(b, "largest tensor:");
  if (id < 0) {
    dbuf__sb_printf(b, "none\n");
    return 0;
  }
  dbuf_tensors_shape_str(t, id, shape, sizeof shape);
  dbuf__sb_printf(b, "%s %s, %s elements, %s", dbuf_tensors_name(t, id), shape,
                  dbuf__rep_group(g, dbuf_tensors_numel(t, id)),
                  dbuf__rep_bytes(by, dbuf_tensors_numel(t, id) * rep->o.elem_size));
  if ((rc = dbuf_layout_tensor_pieces(rep->l, id, NULL, 0, &np)) != 0)
    return dbuf__diag(diag, rc, "tensor pieces: %s", dbuf_strerror(rc));
  if (np > 0) {
    dbuf_piece_t *pc = dbuf__mallocn(np, sizeof *pc);
    if (pc == NULL)
      return dbuf__diag(diag, DBUF_ENOMEM, "out of memory");
    dbuf_layout_tensor_pieces(rep->l, id, pc, np, &np);
    if (np == 1)
      dbuf__sb_printf(b, ", on rank %d", pc[0].rank);
    else
      dbuf__sb_printf(b, ", on ranks %d-%d", pc[0].rank, pc[np - 1].rank);
    free(pc);
  }
  dbuf__sb_printf(b, "\n");
  return 0;
}

int
dbuf__report_summary(dbuf__rep_t *rep, dbuf__sb_t *b, dbuf_diag_t *diag)
{
  char g1[32], g2[32];
  int rc;

  summary_sizes(rep, b);
  if ((rc = summary_ranks(rep, b, diag)) != 0)
    return rc;
  dbuf__sb_puts(b, "\n");
  key(b, "split tensors:");
  dbuf__sb_printf(b, "%s of %s held by more than one rank",
                  dbuf__rep_group(g1, rep->st.split_tensors),
                  dbuf__rep_group(g2, dbuf_layout_ntensors(rep->l)));
  dbuf__sb_puts(b, "\n");
  return summary_largest(rep, b, diag);
}

/* ------------------------------------------------------------------ */
/* table                                                                */

/* Padding elements in the rank whose pieces are loaded. */
static int64_t
rank_padding(const dbuf__rep_t *rep, int r)
{
  int64_t used = 0;
  for (int64_t k = 0; k < rep->np; k++)
    used += rep->pc[k].nelems;
  int64_t pad = rep->range[r + 1] - rep->range[r] - used;
  return pad > 0 ? pad : 0; /* overlapping tensors count twice */
}

static void
first_last(const dbuf__rep_t *rep, char *first, char *last)
{
  if (rep->np == 0) {
    strcpy(first, "-");
    strcpy(last, "-");
    return;
  }
  const dbuf_piece_t *a = &rep->pc[0], *z = &rep->pc[rep->np - 1];
  row_label(first, rep->t, a->tensor, a->first_row);
  row_label(last, rep->t, z->tensor, z->first_row + z->nrows - 1);
}

static int
imax(int a, int b)
{
  return a > b ? a : b;
}

/* Widths of the byte columns: exact count, then the unit part. */
typedef struct {
  int exact, unit;
} bytes_w_t;

static void
bytes_w_fit(bytes_w_t *w, int64_t v)
{
  char u[24];
  w->exact = imax(w->exact, dbuf__rep_digits(v));
  w->unit = imax(w->unit, (int)strlen(dbuf__rep_unit(u, v)));
}

/* One byte cell: the exact count right-aligned, its unit part left-aligned. */
static void
bytes_cell(dbuf__sb_t *b, const bytes_w_t *w, int64_t v)
{
  char u[24];
  dbuf__sb_printf(b, "  %*lld%-*s", w->exact, (long long)v, w->unit,
                  dbuf__rep_unit(u, v));
}

int
dbuf__report_table(dbuf__rep_t *rep, dbuf__sb_t *b, dbuf_diag_t *diag)
{
  int aligned = rep->o.align_bytes > 0;
  int64_t max_pieces = 0, es = rep->o.elem_size;
  int w_first = 5, rc;
  bytes_w_t w_by = {5, 0}, w_al = {7, 0};
  char *first = malloc(2 * LABEL_LEN), *last = first ? first + LABEL_LEN : NULL;

  if (first == NULL)
    return dbuf__diag(diag, DBUF_ENOMEM, "out of memory");
  /* Pass 1: column widths. */
  for (int r = 0; r < rep->nranks; r++) {
    int64_t a;
    if ((rc = dbuf__rep_pieces(rep, r)) != 0)
      goto fail;
    if (aligned && seg_bytes(rep, r, 1, &a) != 0) {
      rc = dbuf__diag(diag, DBUF_EOVERFLOW,
                      "rank %d: segment bytes aligned to %lld overflow 64 bits",
                      r, (long long)rep->o.align_bytes);
      goto fail;
    }
    bytes_w_fit(&w_by, (rep->range[r + 1] - rep->range[r]) * es);
    if (aligned)
      bytes_w_fit(&w_al, a);
    if (rep->np > max_pieces)
      max_pieces = rep->np;
    first_last(rep, first, last);
    w_first = imax(w_first, (int)strlen(first));
  }
  int64_t maxseg = rep->st.max_segment;
  int w_rank = imax(4, dbuf__rep_digits(rep->nranks - 1));
  int w_off = imax(6, dbuf__rep_digits(dbuf_layout_size(rep->l)));
  int w_el = imax(8, dbuf__rep_digits(maxseg));
  int w_pad = imax(7, dbuf__rep_digits(maxseg));
  int w_np = imax(7, dbuf__rep_digits(max_pieces));

  dbuf__sb_printf(b, "%*s  %*s  %*s  %*s", w_rank, "rank", w_off, "offset",
                  w_el, "elements", w_by.exact + w_by.unit, "bytes");
  if (aligned)
    dbuf__sb_printf(b, "  %*s", w_al.exact + w_al.unit, "aligned");
  dbuf__sb_printf(b, "  %*s  %*s  %-*s  last\n", w_pad, "padding", w_np,
                  "tensors", w_first, "first");
  /* Pass 2: the rows. */
  for (int r = 0; r < rep->nranks && !b->failed; r++) {
    int64_t seg = rep->range[r + 1] - rep->range[r], a = 0;
    if ((rc = dbuf__rep_pieces(rep, r)) != 0)
      goto fail;
    first_last(rep, first, last);
    dbuf__sb_printf(b, "%*d  %*lld  %*lld", w_rank, r, w_off,
                    (long long)rep->range[r], w_el, (long long)seg);
    bytes_cell(b, &w_by, seg * es);
    if (aligned) {
      seg_bytes(rep, r, 1, &a);
      bytes_cell(b, &w_al, a);
    }
    dbuf__sb_printf(b, "  %*lld  %*lld  %-*s  %s\n", w_pad,
                    (long long)rank_padding(rep, r), w_np, (long long)rep->np,
                    w_first, first, last);
  }
  free(first);
  return 0;
fail:
  free(first);
  if (rc == DBUF_ENOMEM)
    return dbuf__diag(diag, rc, "out of memory");
  return rc;
}

/* ------------------------------------------------------------------ */
/* diagram                                                              */

/* One cell: "| label" in four columns per element, label cut to fit. */
static void
cell(dbuf__sb_t *b, const char *label, int64_t elems)
{
  size_t room = (size_t)(4 * elems - 2), n = strlen(label);
  if (n > room)
    n = room;
  dbuf__sb_append(b, "| ", 2);
  dbuf__sb_append(b, label, n);
  dbuf__sb_fill(b, ' ', room - n);
}

/* Cells of one piece [gs, ge) of the loaded rank. */
static void
piece_cells(const dbuf__rep_t *rep, dbuf__sb_t *b, const dbuf_piece_t *p,
            int64_t gs, int64_t ge, char *label)
{
  const dbuf_tensors_t *t = rep->t;
  int64_t re = dbuf_tensors_row_elems(t, p->tensor);
  int64_t rows = dbuf_tensors_rows(t, p->tensor);
  int clipped = ge - gs != p->nelems;
  if (!clipped && p->whole_rows && re >= 2 && rows > 1) {
    /* One cell per row, as in the Megatron-FSDP documentation. */
    for (int64_t k = 0; k < p->nrows; k++)
      cell(b, row_label(label, t, p->tensor, p->first_row + k), re);
  } else {
    piece_label(label, t, p);
    cell(b, label, ge - gs);
  }
}

static void
hole_cell(const dbuf__rep_t *rep, dbuf__sb_t *b, int64_t a, int64_t c)
{
  cell(b, a >= rep->data_end ? "pad" : "gap", c - a);
}

static int
diagram_full(dbuf__rep_t *rep, dbuf__sb_t *b, char *label)
{
  int w_rank = dbuf__rep_digits(rep->nranks - 1);
  int w_off = dbuf__rep_digits(dbuf_layout_size(rep->l));
  int rc;
  for (int r = 0; r < rep->nranks && !b->failed; r++) {
    int64_t s = rep->range[r], e = rep->range[r + 1], cursor = s;
    if ((rc = dbuf__rep_pieces(rep, r)) != 0)
      return rc;
    dbuf__sb_printf(b, "rank %*d [%*lld, %*lld):", w_rank, r, w_off,
                    (long long)s, w_off, (long long)e);
    if (s >= e) {
      dbuf__sb_printf(b, " (empty)\n");
      continue;
    }
    dbuf__sb_append(b, " ", 1);
    for (int64_t k = 0; k < rep->np; k++) {
      const dbuf_piece_t *p = &rep->pc[k];
      int64_t gs = s + p->offset, ge = gs + p->nelems;
      if (gs > cursor)
        hole_cell(rep, b, cursor, gs);
      if (gs < cursor)
        gs = cursor; /* overlapping tensors: draw what is left */
      if (ge > gs)
        piece_cells(rep, b, p, gs, ge, label);
      if (ge > cursor)
        cursor = ge;
    }
    if (cursor < e)
      hole_cell(rep, b, cursor, e);
    dbuf__sb_append(b, " |\n", 3);
  }
  return 0;
}

static int
diagram_condensed(dbuf__rep_t *rep, dbuf__sb_t *b, char *label)
{
  int w_rank = dbuf__rep_digits(rep->nranks - 1);
  int w_off = dbuf__rep_digits(dbuf_layout_size(rep->l));
  int rc;
  dbuf__sb_printf(b, "# rank [start, end) elements: first piece | +N tensors "
                     "| last piece | padding\n");
  for (int r = 0; r < rep->nranks && !b->failed; r++) {
    int64_t s = rep->range[r], e = rep->range[r + 1];
    if ((rc = dbuf__rep_pieces(rep, r)) != 0)
      return rc;
    dbuf__sb_printf(b, "rank %*d [%*lld, %*lld) %*lld:", w_rank, r, w_off,
                    (long long)s, w_off, (long long)e, w_off,
                    (long long)(e - s));
    if (s >= e) {
      dbuf__sb_printf(b, " (empty)\n");
      continue;
    }
    const char *sep = " ";
    if (rep->np > 0) {
      dbuf__sb_printf(b, " %s", piece_label(label, rep->t, &rep->pc[0]));
      if (rep->np > 2)
        dbuf__sb_printf(b, " | +%lld tensor%s", (long long)(rep->np - 2),
                        rep->np == 3 ? "" : "s");
      if (rep->np > 1)
        dbuf__sb_printf(b, " | %s",
                        piece_label(label, rep->t, &rep->pc[rep->np - 1]));
      sep = " | ";
    }
    int64_t pad = rank_padding(rep, r);
    if (pad > 0)
      dbuf__sb_printf(b, "%spadding %lld", sep, (long long)pad);
    dbuf__sb_append(b, "\n", 1);
  }
  return 0;
}

int
dbuf__report_diagram(dbuf__rep_t *rep, dbuf__sb_t *b, dbuf_diag_t *diag)
{
  char *label = malloc(LABEL_LEN);
  int rc;
  if (label == NULL)
    return dbuf__diag(diag, DBUF_ENOMEM, "out of memory");
  if (rep->st.max_segment <= rep->o.diagram_max_elems && rep->nranks <= 256)
    rc = diagram_full(rep, b, label);
  else
    rc = diagram_condensed(rep, b, label);
  free(label);
  if (rc != 0)
    return dbuf__diag(diag, rc, "diagram: %s", dbuf_strerror(rc));
  return 0;
}
