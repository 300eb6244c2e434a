/* The report of the MPI run and the node report: text and JSON. */
#include "run_report.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* "0-3,6" */
static const char *
fmt_ranks(char *buf, size_t len, const int *r, int n)
{
  size_t at = 0;
  buf[0] = '\0';
  for (int i = 0; i < n && at < len; i++) {
    int j = i;
    while (j + 1 < n && r[j + 1] == r[j] + 1)
      j++;
    if (j > i)
      at += (size_t)snprintf(buf + at, len - at, "%s%d-%d", i ? "," : "", r[i], r[j]);
    else
      at += (size_t)snprintf(buf + at, len - at, "%s%d", i ? "," : "", r[i]);
    i = j;
  }
  return buf;
}

/* A JSON string of any text (jansson takes UTF-8 only): text from outside
 * (paths, host names, the --units argument, messages quoting an input)
 * with its bytes that are not UTF-8 written as \xNN (dbuf_escape_ctl).
 * NULL only out of memory, which makes the json_pack() it goes into fail. */
static json_t *
jstr(const char *s)
{
  json_t *v = json_string(s);
  if (v != NULL || s == NULL)
    return v;
  size_t n = dbuf_escape_ctl(NULL, 0, s) + 1;
  char *e = malloc(n);
  if (e != NULL) {
    dbuf_escape_ctl(e, n, s);
    v = json_string(e);
  }
  free(e);
  return v;
}

static const char *
tensor_name(const dbuf_layout_t *l, int64_t t)
{
  const char *n = dbuf_tensors_name(dbuf_layout_tensors(l), t);
  return n ? n : "?";
}

/* "name row R" (the one row notation of every report) or "-" */
static const char *
fmt_pos(char *buf, size_t len, const dbuf_layout_t *l, int64_t t, int64_t row)
{
  if (t < 0)
    snprintf(buf, len, "-");
  else
    snprintf(buf, len, "%s row %" PRId64, tensor_name(l, t), row);
  return buf;
}

static void crossing_print(FILE *f, const dbuf_layout_t *l, const dbuf_nodes_t *n);

void
cli_nodes_print(FILE *f, const dbuf_layout_t *l, const dbuf_nodes_t *n)
{
  char a[32], b[32], rk[256];
  int nn = dbuf_nodes_count(n);
  fprintf(f, "Nodes (%d):\n", nn);
  fprintf(f, "  %-4s %-16s %-10s %-32s %16s %10s\n", "node", "host", "ranks", "global range",
          "elements", "bytes");
  for (int i = 0; i < nn; i++) {
    dbuf_node_info_t in;
    char range[64];
    dbuf_nodes_info(n, i, &in);
    if (in.contiguous)
      snprintf(range, sizeof range, "[%" PRId64 ", %" PRId64 ")", in.first, in.end);
    else
      snprintf(range, sizeof range, "not contiguous, in [%" PRId64 ", %" PRId64 ")", in.first,
               in.end);
    fprintf(f, "  %-4d %-16s %-10s %-32s %16s %10s\n", i, in.name,
            fmt_ranks(rk, sizeof rk, in.ranks, in.nranks), range,
            dbuf_report_count(a, sizeof a, in.elements),
            dbuf_report_bytes(b, sizeof b, in.bytes));
  }
  if (nn < 2)
    return;
  if (dbuf_nodes_ncrossing(n) == 0) {
    fprintf(f, "Tensors crossing node boundaries: none\n");
    return;
  }
  crossing_print(f, l, n);
}

/* "Tensors crossing node boundaries (N):" and one line per tensor. */
static void
crossing_print(FILE *f, const dbuf_layout_t *l, const dbuf_nodes_t *n)
{
  char c[32];
  int64_t nc = dbuf_nodes_ncrossing(n);
  fprintf(f, "Tensors crossing node boundaries (%" PRId64 "):\n", nc);
  for (int64_t i = 0; i < nc; i++) {
    dbuf_node_crossing_t cr;
    char shape[128];
    dbuf_nodes_crossing(n, i, &cr);
    dbuf_tensors_shape_str(dbuf_layout_tensors(l), cr.tensor, shape, sizeof shape);
    fprintf(f, "  %s (%s):", tensor_name(l, cr.tensor), shape);
    for (int64_t s = 0; s < cr.nsides; s++) {
      dbuf_node_info_t in;
      const dbuf_node_side_t *sd = &cr.sides[s];
      dbuf_nodes_info(n, sd->node, &in);
      snprintf(c, sizeof c, sd->first_rank == sd->last_rank ? "rank %d" : "ranks %d-%d",
               sd->first_rank, sd->last_rank);
      if (sd->rows == 1)
        fprintf(f, "%s %s row %" PRId64 " (%s)", s ? " |" : "", in.name, sd->first_row, c);
      else
        fprintf(f, "%s %s rows %" PRId64 "-%" PRId64 " (%s)", s ? " |" : "", in.name,
                sd->first_row, sd->first_row + sd->rows - 1, c);
    }
    fputc('\n', f);
  }
}

json_t *
cli_nodes_json(const dbuf_layout_t *l, const dbuf_nodes_t *n)
{
  json_t *nodes = json_array(), *cross = json_array();
  for (int i = 0; i < dbuf_nodes_count(n); i++) {
    dbuf_node_info_t in;
    dbuf_nodes_info(n, i, &in);
    json_t *ranks = json_array();
    for (int k = 0; k < in.nranks; k++)
      json_array_append_new(ranks, json_integer(in.ranks[k]));
    json_array_append_new(nodes, json_pack("{s:o, s:i, s:o, s:b, s:I, s:I, s:I, s:I}", "host",
                                           jstr(in.name), "node", i, "ranks", ranks, "contiguous",
                                           in.contiguous, "offset", (json_int_t)in.first, "end",
                                           (json_int_t)in.end, "elements", (json_int_t)in.elements,
                                           "bytes", (json_int_t)in.bytes));
  }
  for (int64_t i = 0; i < dbuf_nodes_ncrossing(n); i++) {
    dbuf_node_crossing_t cr;
    dbuf_nodes_crossing(n, i, &cr);
    json_t *sides = json_array();
    for (int64_t s = 0; s < cr.nsides; s++) {
      const dbuf_node_side_t *sd = &cr.sides[s];
      dbuf_node_info_t in;
      dbuf_nodes_info(n, sd->node, &in);
      json_array_append_new(sides,
                            json_pack("{s:o, s:i, s:i, s:i, s:I, s:I, s:I}", "host", jstr(in.name),
                                      "node", sd->node, "first_rank", sd->first_rank, "last_rank",
                                      sd->last_rank, "first_row", (json_int_t)sd->first_row, "rows",
                                      (json_int_t)sd->rows, "elements", (json_int_t)sd->nelems));
    }
    json_array_append_new(
        cross, json_pack("{s:I, s:o, s:I, s:o}", "tensor", (json_int_t)cr.tensor, "name",
                         jstr(tensor_name(l, cr.tensor)), "rows",
                         (json_int_t)dbuf_tensors_rows(dbuf_layout_tensors(l), cr.tensor), "sides",
                         sides));
  }
  return json_pack("{s:o, s:o}", "nodes", nodes, "crossing", cross);
}

/* The plan: the core's summary (the figures `plan` prints), indented, then
 * what only the run knows. */
static int
plan_lines(FILE *f, const dbuf_layout_t *l, const run_summary_t *s, dbuf_diag_t *d)
{
  char *text, *line, *save = NULL;
  size_t len;
  int rc = dbuf_report_write(l, DBUF_REPORT_SUMMARY, &s->report, &text, &len, d);
  if (rc != 0)
    return rc;
  fprintf(f, "Plan:\n");
  for (line = strtok_r(text, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save))
    fprintf(f, "  %s\n", line);
  free(text);
  fprintf(f, "Ranks: dp %d on %d MPI ranks (%d segment%s per rank), layout checksum %016" PRIx64
             "\n",
          dbuf_layout_nranks(l), s->nranks, s->per_rank, s->per_rank == 1 ? "" : "s", s->digest);
  return 0;
}

/* Figures of one buffer, or of the sum of all (overflow-checked by the plan
 * before the run: the sums here stay below its totals). */
typedef struct {
  int64_t tensors, elements, logical, padding, bytes, split;
} buf_fig_t;

static void
buf_fig(const run_buffer_sum_t *b, buf_fig_t *x, buf_fig_t *tot)
{
  dbuf_layout_stats_t st;
  dbuf_layout_stats(b->l, &st);
  x->tensors = dbuf_layout_ntensors(b->l);
  x->elements = dbuf_layout_size(b->l);
  x->logical = st.logical;
  x->padding = st.padding;
  x->bytes = x->elements * b->elem_size;
  x->split = st.split_tensors;
  tot->tensors += x->tensors;
  tot->elements += x->elements;
  tot->logical += x->logical;
  tot->padding += x->padding;
  tot->bytes += x->bytes;
  tot->split += x->split;
}

/* Several buffers: one line each, and the totals. */
static void
plan_buffer_lines(FILE *f, const run_summary_t *s)
{
  char a[32], b[32], c[32], e[32];
  buf_fig_t x, tot = {0};
  const dbuf_layout_t *l0 = s->buffers[0].l;
  fprintf(f, "Plan: %s, %" PRId64 " buffers (units %s), layout %s, dp %d\n", s->report.source,
          s->nbuffers, s->units, dbuf_layout_kind_name(dbuf_layout_kind(l0)),
          dbuf_layout_nranks(l0));
  fprintf(f, "  %-32s %-9s %8s %16s %12s %14s %7s %s\n", "unit", "dtype", "tensors", "elements",
          "bytes", "padding", "split", "verify");
  for (int64_t i = 0; i < s->nbuffers; i++) {
    const run_buffer_sum_t *bs = &s->buffers[i];
    buf_fig(bs, &x, &tot);
    fprintf(f, "  %-32s %-9s %8" PRId64 " %16s %12s %14s %7" PRId64 " %s\n", bs->unit, bs->dtype,
            x.tensors, dbuf_report_count(a, sizeof a, x.elements),
            dbuf_report_bytes(b, sizeof b, x.bytes), dbuf_report_count(c, sizeof c, x.padding),
            x.split, !bs->structure_ok || bs->data_ok == 0 ? "FAIL" : "ok");
  }
  fprintf(f, "  %-32s %-9s %8" PRId64 " %16s %12s %14s %7" PRId64 "\n", "total", "", tot.tensors,
          dbuf_report_count(a, sizeof a, tot.elements), dbuf_report_bytes(b, sizeof b, tot.bytes),
          dbuf_report_count(c, sizeof c, tot.padding), tot.split);
  fprintf(f, "  padding %s of %s elements (%.2f%%)\n", dbuf_report_count(c, sizeof c, tot.padding),
          dbuf_report_count(e, sizeof e, tot.elements),
          tot.elements > 0 ? 100.0 * (double)tot.padding / (double)tot.elements : 0.0);
  fprintf(f, "Ranks: dp %d on %d MPI ranks (%d segment%s per rank), plan checksum %016" PRIx64
             "\n",
          dbuf_layout_nranks(l0), s->nranks, s->per_rank, s->per_rank == 1 ? "" : "s",
          s->digest);
}

/* Node i over every buffer: its info (of the first buffer), elements and
 * bytes summed. */
static void
node_sums(const run_summary_t *s, int i, dbuf_node_info_t *in, int64_t *el, int64_t *by)
{
  *el = *by = 0;
  for (int64_t k = 0; k < s->nbuffers; k++) {
    dbuf_nodes_info(s->buffers[k].nodes, i, in);
    *el += in->elements;
    *by += in->bytes;
  }
  dbuf_nodes_info(s->buffers[0].nodes, i, in);
}

/* Several buffers: the nodes with their bytes over every buffer, then the
 * tensors crossing node boundaries, buffer by buffer. */
static void
nodes_print_buffers(FILE *f, const run_summary_t *s)
{
  char a[32], b[32], rk[256];
  const dbuf_nodes_t *n0 = s->buffers[0].nodes;
  int nn = dbuf_nodes_count(n0);
  fprintf(f, "Nodes (%d), over the %" PRId64 " buffers:\n", nn, s->nbuffers);
  fprintf(f, "  %-4s %-16s %-10s %16s %10s\n", "node", "host", "ranks", "elements", "bytes");
  for (int i = 0; i < nn; i++) {
    dbuf_node_info_t in;
    int64_t el, by;
    node_sums(s, i, &in, &el, &by);
    fprintf(f, "  %-4d %-16s %-10s %16s %10s\n", i, in.name,
            fmt_ranks(rk, sizeof rk, in.ranks, in.nranks), dbuf_report_count(a, sizeof a, el),
            dbuf_report_bytes(b, sizeof b, by));
  }
  if (nn < 2)
    return;
  int64_t any = 0;
  for (int64_t k = 0; k < s->nbuffers; k++) {
    if (dbuf_nodes_ncrossing(s->buffers[k].nodes) == 0)
      continue;
    any++;
    fprintf(f, "Buffer %s/%s: ", s->buffers[k].unit, s->buffers[k].dtype);
    crossing_print(f, s->buffers[k].l, s->buffers[k].nodes);
  }
  if (any == 0)
    fprintf(f, "Tensors crossing node boundaries: none\n");
}

/* The layout a record's first or last position names. */
static const dbuf_layout_t *
buf_layout(const run_summary_t *s, int32_t b)
{
  return b >= 0 && b < s->nbuffers ? s->buffers[b].l : s->buffers[0].l;
}

/* --load: what was read, per rank and in total, and the proof. */
static void
load_lines(FILE *f, const run_summary_t *s, const run_rank_rec_t *recs)
{
  const run_load_sum_t *ld = s->load;
  char a[32], b[32], c[32];
  fprintf(f, "\nLoad: %" PRId64 " file%s, %" PRId64 " tensors, %s rows, %s read in %.3f s, "
             "%.2f GB/s, io %s\n",
          ld->files, ld->files == 1 ? "" : "s", ld->tensors,
          dbuf_report_count(a, sizeof a, ld->rows), dbuf_report_bytes(b, sizeof b, ld->bytes),
          ld->seconds, ld->gbps, ld->io);
  if (ld->convert.values > 0)
    fprintf(f, "  converted %s values: %" PRId64 " changed, %" PRId64 " overflowed, %" PRId64
               " subnormal, %" PRId64 " zeroed\n",
            dbuf_report_count(a, sizeof a, ld->convert.values), ld->convert.changed,
            ld->convert.overflowed, ld->convert.subnormal, ld->convert.zeroed);
  fprintf(f, "  %4s %-12s %14s %10s %8s\n", "rank", "host", "bytes read", "seconds", "GB/s");
  for (int r = 0; r < s->nranks; r++)
    fprintf(f, "  %4d %-12s %14s %10.3f %8.2f\n", recs[r].rank, recs[r].host,
            dbuf_report_bytes(c, sizeof c, recs[r].load_bytes), recs[r].load_s,
            recs[r].load_gbps);
  if (ld->pass) {
    fprintf(f,
            "Load check: PASS: %" PRId64 " tensors, %s rows, %s checked against the "
            "checkpoint by %s\n",
            ld->checked_tensors, dbuf_report_count(a, sizeof a, ld->checked_rows),
            dbuf_report_bytes(b, sizeof b, ld->checked_bytes),
            ld->checked_by != NULL ? ld->checked_by : "the checking ranks");
    return;
  }
  fprintf(f, "Load check: FAIL: %" PRId64 " problem%s\n", ld->problems,
          ld->problems == 1 ? "" : "s");
  for (int64_t i = 0; i < ld->nlines; i++)
    fprintf(f, "  %s\n", ld->lines[i]);
}

int
run_report_text(FILE *f, const run_summary_t *s, const run_rank_rec_t *recs,
                const run_timings_t *t, dbuf_diag_t *d)
{
  char a[32], b[32], by[32], p1[160], p2[160], pn[16], gb[16];
  const dbuf_layout_t *l = s->buffers[0].l;
  if (s->nbuffers == 1) {
    int rc = plan_lines(f, l, s, d);
    if (rc != 0)
      return rc;
  } else {
    plan_buffer_lines(f, s);
  }
  fprintf(f, "Memory: %s%s\n", s->materialize ? "membind " : "not materialized (--no-materialize)",
          s->materialize ? s->membind : "");
  /* Memory binding (membind: read back from the kernel) and CPU binding
   * (cpubind: the CPUs the rank may run on, "none" when it may run on all),
   * as mpirun --report-bindings tells them apart. */
  fprintf(f, "\n%4s %-12s %-6s %-7s %-8s %14s %14s %10s %-44s %-44s %7s %7s %s\n", "rank",
          "host", "numa", "membind", "cpubind", "offset", "elements", "bytes", "first row", "last row",
          "on-node", "GiB/s", "verify");
  for (int r = 0; r < s->nranks; r++) {
    const run_rank_rec_t *x = &recs[r];
    if (!x->materialized || x->on_node < 0)
      snprintf(pn, sizeof pn, "-");
    else
      snprintf(pn, sizeof pn, "%.1f%%", 100.0 * x->on_node);
    if (x->materialized && x->bytes > 0)
      snprintf(gb, sizeof gb, "%.2f", x->gbps * 1e9 / 1073741824.0);
    else
      snprintf(gb, sizeof gb, "-");
    fprintf(f, "%4d %-12s %-6s %-7s %-8s %14s %14s %10s %-44s %-44s %7s %7s %s\n", x->rank,
            x->host, x->numa[0] ? x->numa : "-",
            !x->materialized ? "-" : x->mem_bound ? "yes" : "no",
            !x->cpus[0] ? "-" : x->cpu_bound ? x->cpus : "none",
            x->offset < 0 ? "-" : dbuf_report_count(a, sizeof a, x->offset),
            dbuf_report_count(b, sizeof b, x->elements), dbuf_report_bytes(by, sizeof by, x->bytes),
            fmt_pos(p1, sizeof p1, buf_layout(s, x->first_buf), x->first_tensor, x->first_row),
            fmt_pos(p2, sizeof p2, buf_layout(s, x->last_buf), x->last_tensor, x->last_row), pn,
            gb,
            x->verify[0] ? x->verify : "-");
  }
  for (int r = 0; r < s->nranks; r++)
    if (recs[r].note[0])
      fprintf(f, "  note: rank %d: %s\n", r, recs[r].note);
  fputc('\n', f);
  if (s->nbuffers == 1)
    cli_nodes_print(f, l, s->buffers[0].nodes);
  else
    nodes_print_buffers(f, s);
  if (s->load != NULL)
    load_lines(f, s, recs);
  fprintf(f, "\nTimings: plan %.3f s, broadcast %.3f s, validate %.3f s, materialize %.3f s, "
             "verify %.3f s, total %.3f s\n",
          t->plan, t->broadcast, t->validate, t->materialize, t->verify, t->total);
  if (s->pass)
    fprintf(f, "PASS: every row owned exactly once on %d ranks%s\n", s->nranks,
            s->load != NULL     ? ", every row loaded and checked against the checkpoint"
            : s->materialize ? ", every element verified"
                             : "");
  else
    fprintf(f, "FAIL: %s (%" PRId64 " problem%s)\n", s->message, s->problems,
            s->problems == 1 ? "" : "s");
  return 0;
}

static json_t *
pos_json(const dbuf_layout_t *l, int64_t t, int64_t row)
{
  if (t < 0)
    return json_null();
  return json_pack("{s:I, s:o, s:I}", "tensor", (json_int_t)t, "name", jstr(tensor_name(l, t)),
                   "row", (json_int_t)row);
}

static char *dump_doc(json_t *doc);

/* Every problem known on rank 0: the listed lines, else the agreed first
 * problem, else none. */
static json_t *
problems_json(const run_summary_t *s)
{
  json_t *a = json_array();
  if (s->nproblem_lines > 0) {
    for (int64_t i = 0; i < s->nproblem_lines; i++)
      json_array_append_new(a, jstr(s->problem_lines[i]));
  } else if (!s->pass && s->message != NULL && s->message[0] != '\0') {
    json_array_append_new(a, jstr(s->message));
  }
  return a;
}

/* The plan object: one buffer's figures, or the totals of several (then
 * chunk_size is null, dtype "mixed" and elem_size 0 when the dtypes differ). */
static json_t *
plan_json(const run_summary_t *s)
{
  const run_buffer_sum_t *b0 = &s->buffers[0];
  const dbuf_layout_t *l = b0->l;
  buf_fig_t x, tot = {0};
  const char *dtype = s->nbuffers == 1 ? s->report.dtype : b0->dtype;
  int64_t es = s->nbuffers == 1 ? s->report.elem_size : b0->elem_size;
  for (int64_t i = 0; i < s->nbuffers; i++) {
    buf_fig(&s->buffers[i], &x, &tot);
    if (s->nbuffers > 1 && strcmp(s->buffers[i].dtype, dtype) != 0) {
      dtype = "mixed";
      es = 0;
    }
  }
  if (s->nbuffers == 1)
    tot.bytes = tot.elements * s->report.elem_size;
  char dig[32];
  snprintf(dig, sizeof dig, "%016" PRIx64, s->digest);
  json_t *plan = json_pack(
      "{s:o, s:s, s:i, s:i, s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:s, s:I, s:I, s:I, s:s}", "source",
      jstr(s->report.source), "layout", dbuf_layout_kind_name(dbuf_layout_kind(l)), "dp",
      dbuf_layout_nranks(l), "nranks", s->nranks, "segments_per_rank", s->per_rank, "block_size",
      (json_int_t)dbuf_layout_block_size(l), "chunk_size", (json_int_t)dbuf_layout_chunk_size(l),
      "tensors", (json_int_t)tot.tensors, "size", (json_int_t)tot.elements, "logical",
      (json_int_t)tot.logical, "padding", (json_int_t)tot.padding, "dtype", dtype, "elem_size",
      (json_int_t)es, "bytes", (json_int_t)tot.bytes, "split_tensors", (json_int_t)tot.split,
      "checksum", dig);
  if (s->nbuffers > 1) {
    json_object_set_new(plan, "chunk_size", json_null());
    json_object_set_new(plan, "buffers", json_integer((json_int_t)s->nbuffers));
    json_object_set_new(plan, "units", jstr(s->units));
  }
  return plan;
}

/* The buffers array: per buffer its unit, dtype, layout figures, verdicts and
 * the tensors crossing node boundaries. */
static json_t *
buffers_json(const run_summary_t *s)
{
  json_t *a = json_array();
  for (int64_t i = 0; i < s->nbuffers; i++) {
    const run_buffer_sum_t *b = &s->buffers[i];
    buf_fig_t x, tot = {0};
    char dig[32];
    buf_fig(b, &x, &tot);
    snprintf(dig, sizeof dig, "%016" PRIx64, b->digest);
    json_t *nodes = cli_nodes_json(b->l, b->nodes);
    json_t *o = json_pack(
        "{s:o, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:s, s:s, s:o, s:I, s:o, "
        "s:O}",
        "unit", jstr(b->unit), "dtype", b->dtype, "elem_size", (json_int_t)b->elem_size, "tensors",
        (json_int_t)x.tensors, "block_size", (json_int_t)dbuf_layout_block_size(b->l), "chunk_size",
        (json_int_t)dbuf_layout_chunk_size(b->l), "size", (json_int_t)x.elements, "logical",
        (json_int_t)x.logical, "padding", (json_int_t)x.padding, "bytes", (json_int_t)x.bytes,
        "split_tensors", (json_int_t)x.split, "checksum", dig, "structure",
        b->structure_ok ? "PASS" : "FAIL", "data",
        b->data_ok < 0 ? json_null() : json_string(b->data_ok ? "PASS" : "FAIL"), "problem_count",
        (json_int_t)b->problems, "message", jstr(b->message ? b->message : ""), "crossing",
        json_object_get(nodes, "crossing"));
    json_decref(nodes);
    json_array_append_new(a, o);
  }
  return a;
}

/* Several buffers: the node table with every buffer's elements and bytes
 * summed (no ranges: each buffer has its own), and every crossing tensor
 * with its buffer's index. */
static void
nodes_json_buffers(const run_summary_t *s, json_t **nodes, json_t **cross)
{
  *nodes = json_array();
  *cross = json_array();
  int nn = dbuf_nodes_count(s->buffers[0].nodes);
  for (int i = 0; i < nn; i++) {
    dbuf_node_info_t in;
    int64_t el, by;
    node_sums(s, i, &in, &el, &by);
    json_t *ranks = json_array();
    for (int k = 0; k < in.nranks; k++)
      json_array_append_new(ranks, json_integer(in.ranks[k]));
    json_array_append_new(*nodes, json_pack("{s:o, s:i, s:o, s:I, s:I}", "host", jstr(in.name),
                                            "node", i, "ranks", ranks, "elements", (json_int_t)el,
                                            "bytes", (json_int_t)by));
  }
  for (int64_t k = 0; k < s->nbuffers; k++) {
    json_t *one = cli_nodes_json(s->buffers[k].l, s->buffers[k].nodes), *c;
    size_t i;
    json_array_foreach(json_object_get(one, "crossing"), i, c) {
      json_object_set_new(c, "buffer", json_integer((json_int_t)k));
      json_array_append(*cross, c);
    }
    json_decref(one);
  }
}

/* --load: the load object. */
static json_t *
load_json(const run_summary_t *s, const run_rank_rec_t *recs)
{
  const run_load_sum_t *ld = s->load;
  json_t *problems = json_array(), *ranks = json_array();
  for (int64_t i = 0; i < ld->nlines; i++)
    json_array_append_new(problems, jstr(ld->lines[i]));
  for (int r = 0; r < s->nranks; r++)
    json_array_append_new(ranks, json_pack("{s:i, s:I, s:f, s:f}", "rank", recs[r].rank,
                                           "bytes", (json_int_t)recs[r].load_bytes, "seconds",
                                           recs[r].load_s, "gbps", recs[r].load_gbps));
  const dbuf_convert_stats_t *c = &ld->convert;
  return json_pack("{s:I, s:I, s:I, s:I, s:f, s:f, s:s, s:s, s:o, s:I, s:{s:I, s:I, s:I}, "
                   "s:{s:I, s:I, s:I, s:I, s:I}, s:o}",
                   "files", (json_int_t)ld->files, "tensors", (json_int_t)ld->tensors, "rows",
                   (json_int_t)ld->rows, "bytes", (json_int_t)ld->bytes, "seconds", ld->seconds,
                   "gbps", ld->gbps, "io", ld->io, "verdict", ld->pass ? "PASS" : "FAIL",
                   "problems", problems, "problem_count", (json_int_t)ld->problems, "checked",
                   "tensors", (json_int_t)ld->checked_tensors, "rows",
                   (json_int_t)ld->checked_rows, "bytes", (json_int_t)ld->checked_bytes,
                   "convert", "values", (json_int_t)c->values, "changed", (json_int_t)c->changed,
                   "overflowed", (json_int_t)c->overflowed, "subnormal",
                   (json_int_t)c->subnormal, "zeroed", (json_int_t)c->zeroed, "ranks", ranks);
}

char *
run_report_json(const run_summary_t *s, const run_rank_rec_t *recs, const run_timings_t *t)
{
  json_t *plan = plan_json(s);
  json_t *ranks = json_array();
  for (int r = 0; r < s->nranks; r++) {
    const run_rank_rec_t *x = &recs[r];
    const dbuf_layout_t *lf = buf_layout(s, x->first_buf), *ll = buf_layout(s, x->last_buf);
    json_t *o = json_pack(
        "{s:i, s:o, s:i, s:o, s:o, s:b, s:b, s:b, s:b, s:b, s:o, s:o, s:I, s:I, s:o, s:o, s:o, "
        "s:o}",
        "rank", x->rank, "host", jstr(x->host), "node", x->node, "numa", jstr(x->numa), "cpus",
        jstr(x->cpus), "cpu_bound", x->cpu_bound, "bound", x->mem_bound, "hugepage", x->hugepage,
        "locked", x->locked, "materialized", x->materialized, "offset",
        x->offset < 0 ? json_null() : json_integer((json_int_t)x->offset), "end",
        x->end < 0 ? json_null() : json_integer((json_int_t)x->end), "elements",
        (json_int_t)x->elements, "bytes", (json_int_t)x->bytes, "first",
        pos_json(lf, x->first_tensor, x->first_row), "last",
        pos_json(ll, x->last_tensor, x->last_row), "verify", jstr(x->verify_ok ? "ok" : x->verify),
        "note", jstr(x->note));
    if (s->nbuffers > 1 && x->first_tensor >= 0) {
      json_object_set_new(json_object_get(o, "first"), "buffer", json_integer(x->first_buf));
      json_object_set_new(json_object_get(o, "last"), "buffer", json_integer(x->last_buf));
    }
    json_object_set_new(o, "pages_on_node",
                        x->materialized && x->on_node >= 0 ? json_real(x->on_node) : json_null());
    json_object_set_new(o, "fill_seconds", x->materialized ? json_real(x->fill_s) : json_null());
    json_object_set_new(o, "gbps", x->materialized && x->bytes > 0 ? json_real(x->gbps)
                                                                    : json_null());
    json_array_append_new(ranks, o);
  }
  json_t *nodes, *cross;
  if (s->nbuffers == 1) {
    json_t *both = cli_nodes_json(s->buffers[0].l, s->buffers[0].nodes);
    nodes = json_incref(json_object_get(both, "nodes"));
    cross = json_incref(json_object_get(both, "crossing"));
    json_decref(both);
  } else {
    nodes_json_buffers(s, &nodes, &cross);
  }
  json_t *doc = json_pack(
      "{s:s, s:i, s:s, s:o, s:I, s:o, s:o, s:o, s:b, s:o, s:o, s:o, s:{s:f, s:f, s:f, s:f, "
      "s:f, s:f}, s:o}",
      "format", "dbuf-shard-report", "version", RUN_REPORT_VERSION, "verdict",
      s->pass ? "PASS" : "FAIL", "problems", problems_json(s), "problem_count",
      (json_int_t)s->problems, "message", jstr(s->message ? s->message : ""), "plan", plan,
      "membind", jstr(s->membind), "materialize", s->materialize, "ranks", ranks, "nodes", nodes,
      "crossing", cross, "timings", "plan", t->plan, "broadcast", t->broadcast, "validate",
      t->validate, "materialize", t->materialize, "verify", t->verify, "total", t->total, "buffers",
      buffers_json(s));
  if (doc != NULL && s->load != NULL)
    json_object_set_new(doc, "load", load_json(s, recs));
  return dump_doc(doc);
}

char *
run_report_stopped_json(const char *source, int is_layout_file, const run_summary_t *s)
{
  json_t *doc = json_pack(
      "{s:s, s:i, s:s, s:s, s:i, s:o, s:I, s:o, s:o, s:i}", "format", "dbuf-shard-report",
      "version", RUN_REPORT_VERSION, "verdict", s->verdict ? s->verdict : "ERROR", "phase",
      s->phase ? s->phase : "", "exit_code", s->exit_code, "problems", problems_json(s),
      "problem_count", (json_int_t)s->problems, "message", jstr(s->message ? s->message : ""),
      is_layout_file ? "layout_file" : "source", jstr(source ? source : ""), "ranks", s->nranks);
  return dump_doc(doc);
}

void
run_report_problems_err(const run_summary_t *s)
{
  if (s->nproblem_lines == 0) {
    fprintf(stderr, "dbuf-shard: %s\n", s->message ? s->message : "FAIL");
    return;
  }
  for (int64_t i = 0; i < s->nproblem_lines; i++)
    fprintf(stderr, "dbuf-shard: %s\n", s->problem_lines[i]);
  if (s->nproblem_lines > 1 || s->problems > 1)
    fprintf(stderr, "dbuf-shard: FAIL: %" PRId64 " problem%s (above: the first of each rank "
                    "that found one)\n",
            s->problems, s->problems == 1 ? "" : "s");
}

void
run_report_lines_free(char **lines, int64_t n)
{
  for (int64_t i = 0; i < n; i++)
    free(lines[i]);
  free(lines);
}

int
run_report_rank_problems(const run_summary_t *s, const run_rank_rec_t *recs, char ***lines,
                         int64_t *n)
{
  char **v = calloc((size_t)s->nranks + 1, sizeof *v);
  int64_t k = 0;
  if (v == NULL)
    return -1;
  const char *agreed = s->message != NULL ? s->message : "";
  if (agreed[0] != '\0' && (v[k++] = strdup(agreed)) == NULL)
    goto oom;
  for (int r = 0; r < s->nranks; r++) {
    if (recs[r].verify_ok || strcmp(recs[r].verify, agreed) == 0)
      continue;
    if ((v[k++] = strdup(recs[r].verify)) == NULL)
      goto oom;
  }
  *lines = v;
  *n = k;
  return 0;
oom:
  run_report_lines_free(v, k);
  return -1;
}

void
run_report_problems_text(FILE *f, const char *source, const run_summary_t *s)
{
  for (int64_t i = 0; i < s->nproblem_lines; i++)
    fprintf(f, "%s: %s\n", source, s->problem_lines[i]);
  fprintf(f, "FAIL: %s breaks the layout invariants (%" PRId64 " problem%s); nothing was "
             "materialized on the %d ranks\n",
          source, s->problems, s->problems == 1 ? "" : "s", s->nranks);
}

/* The report document as indented text ending in a newline; takes doc. */
static char *
dump_doc(json_t *doc)
{
  if (doc == NULL)
    return NULL;
  char *text = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
  json_decref(doc);
  if (text == NULL)
    return NULL;
  size_t len = strlen(text);
  char *out = realloc(text, len + 2);
  if (out == NULL) {
    free(text);
    return NULL;
  }
  out[len] = '\n';
  out[len + 1] = '\0';
  return out;
}
