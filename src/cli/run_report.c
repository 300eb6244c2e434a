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

void
cli_nodes_print(FILE *f, const dbuf_layout_t *l, const dbuf_nodes_t *n)
{
  char a[32], b[32], c[32], rk[256];
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
  int64_t nc = dbuf_nodes_ncrossing(n);
  if (nn < 2)
    return;
  if (nc == 0) {
    fprintf(f, "Tensors crossing node boundaries: none\n");
    return;
  }
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
    json_array_append_new(
        nodes, json_pack("{s:s, s:i, s:o, s:b, s:I, s:I, s:I, s:I}", "host", in.name, "node", i,
                         "ranks", ranks, "contiguous", in.contiguous, "offset",
                         (json_int_t)in.first, "end", (json_int_t)in.end, "elements",
                         (json_int_t)in.elements, "bytes", (json_int_t)in.bytes));
  }
  for (int64_t i = 0; i < dbuf_nodes_ncrossing(n); i++) {
    dbuf_node_crossing_t cr;
    dbuf_nodes_crossing(n, i, &cr);
    json_t *sides = json_array();
    for (int64_t s = 0; s < cr.nsides; s++) {
      const dbuf_node_side_t *sd = &cr.sides[s];
      dbuf_node_info_t in;
      dbuf_nodes_info(n, sd->node, &in);
      json_array_append_new(
          sides, json_pack("{s:s, s:i, s:i, s:i, s:I, s:I, s:I}", "host", in.name, "node",
                           sd->node, "first_rank", sd->first_rank, "last_rank", sd->last_rank,
                           "first_row", (json_int_t)sd->first_row, "rows",
                           (json_int_t)sd->rows, "elements", (json_int_t)sd->nelems));
    }
    json_array_append_new(
        cross, json_pack("{s:I, s:s, s:I, s:o}", "tensor", (json_int_t)cr.tensor, "name",
                         tensor_name(l, cr.tensor), "rows",
                         (json_int_t)dbuf_tensors_rows(dbuf_layout_tensors(l), cr.tensor),
                         "sides", sides));
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

int
run_report_text(FILE *f, const dbuf_layout_t *l, const run_summary_t *s,
                const run_rank_rec_t *recs, const dbuf_nodes_t *n, const run_timings_t *t,
                dbuf_diag_t *d)
{
  char a[32], b[32], by[32], p1[160], p2[160], pn[16], gb[16];
  int rc = plan_lines(f, l, s, d);
  if (rc != 0)
    return rc;
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
            dbuf_report_count(a, sizeof a, x->offset),
            dbuf_report_count(b, sizeof b, x->elements), dbuf_report_bytes(by, sizeof by, x->bytes),
            fmt_pos(p1, sizeof p1, l, x->first_tensor, x->first_row),
            fmt_pos(p2, sizeof p2, l, x->last_tensor, x->last_row), pn, gb,
            x->verify[0] ? x->verify : "-");
  }
  for (int r = 0; r < s->nranks; r++)
    if (recs[r].note[0])
      fprintf(f, "  note: rank %d: %s\n", r, recs[r].note);
  fputc('\n', f);
  cli_nodes_print(f, l, n);
  fprintf(f, "\nTimings: plan %.3f s, broadcast %.3f s, validate %.3f s, materialize %.3f s, "
             "verify %.3f s, total %.3f s\n",
          t->plan, t->broadcast, t->validate, t->materialize, t->verify, t->total);
  if (s->pass)
    fprintf(f, "PASS: every row owned exactly once on %d ranks%s\n", s->nranks,
            s->materialize ? ", every element verified" : "");
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
  return json_pack("{s:I, s:s, s:I}", "tensor", (json_int_t)t, "name", tensor_name(l, t), "row",
                   (json_int_t)row);
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
      json_array_append_new(a, json_string(s->problem_lines[i]));
  } else if (!s->pass && s->message != NULL && s->message[0] != '\0') {
    json_array_append_new(a, json_string(s->message));
  }
  return a;
}

char *
run_report_json(const dbuf_layout_t *l, const run_summary_t *s, const run_rank_rec_t *recs,
                const dbuf_nodes_t *n, const run_timings_t *t)
{
  dbuf_layout_stats_t st;
  char dig[32];
  dbuf_layout_stats(l, &st);
  snprintf(dig, sizeof dig, "%016" PRIx64, s->digest);
  json_t *plan = json_pack(
      "{s:s, s:s, s:i, s:i, s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:s, s:I, s:I, s:I, s:s}",
      "source", s->report.source, "layout", dbuf_layout_kind_name(dbuf_layout_kind(l)), "dp",
      dbuf_layout_nranks(l), "nranks", s->nranks, "segments_per_rank", s->per_rank,
      "block_size", (json_int_t)dbuf_layout_block_size(l), "chunk_size",
      (json_int_t)dbuf_layout_chunk_size(l), "tensors", (json_int_t)dbuf_layout_ntensors(l),
      "size", (json_int_t)dbuf_layout_size(l), "logical", (json_int_t)st.logical, "padding",
      (json_int_t)st.padding, "dtype", s->report.dtype, "elem_size", (json_int_t)s->report.elem_size,
      "bytes", (json_int_t)(dbuf_layout_size(l) * s->report.elem_size), "split_tensors",
      (json_int_t)st.split_tensors, "checksum", dig);
  json_t *ranks = json_array();
  for (int r = 0; r < s->nranks; r++) {
    const run_rank_rec_t *x = &recs[r];
    json_t *o = json_pack(
        "{s:i, s:s, s:i, s:s, s:s, s:b, s:b, s:b, s:b, s:b, s:I, s:I, s:I, s:I, s:o, s:o, s:s, "
        "s:s}",
        "rank", x->rank, "host", x->host, "node", x->node, "numa", x->numa, "cpus", x->cpus,
        "cpu_bound", x->cpu_bound, "bound", x->mem_bound, "hugepage", x->hugepage, "locked",
        x->locked, "materialized", x->materialized, "offset", (json_int_t)x->offset, "end",
        (json_int_t)x->end, "elements", (json_int_t)x->elements, "bytes", (json_int_t)x->bytes,
        "first", pos_json(l, x->first_tensor, x->first_row), "last",
        pos_json(l, x->last_tensor, x->last_row), "verify", x->verify_ok ? "ok" : x->verify,
        "note", x->note);
    json_object_set_new(o, "pages_on_node",
                        x->materialized && x->on_node >= 0 ? json_real(x->on_node) : json_null());
    json_object_set_new(o, "fill_seconds", x->materialized ? json_real(x->fill_s) : json_null());
    json_object_set_new(o, "gbps", x->materialized && x->bytes > 0 ? json_real(x->gbps)
                                                                    : json_null());
    json_array_append_new(ranks, o);
  }
  json_t *nodes = cli_nodes_json(l, n);
  json_t *doc = json_pack(
      "{s:s, s:i, s:s, s:o, s:I, s:s, s:o, s:s, s:b, s:o, s:O, s:O, s:{s:f, s:f, s:f, s:f, "
      "s:f, s:f}}",
      "format", "dbuf-shard-report", "version", RUN_REPORT_VERSION, "verdict",
      s->pass ? "PASS" : "FAIL", "problems", problems_json(s), "problem_count",
      (json_int_t)s->problems, "message", s->message ? s->message : "", "plan", plan,
      "membind", s->membind, "materialize", s->materialize, "ranks", ranks, "nodes",
      json_object_get(nodes, "nodes"), "crossing", json_object_get(nodes, "crossing"),
      "timings", "plan", t->plan, "broadcast", t->broadcast, "validate", t->validate,
      "materialize", t->materialize, "verify", t->verify, "total", t->total);
  json_decref(nodes);
  return dump_doc(doc);
}

char *
run_report_stopped_json(const char *source, int is_layout_file, const run_summary_t *s)
{
  json_t *doc = json_pack("{s:s, s:i, s:s, s:s, s:i, s:o, s:I, s:s, s:s, s:i}", "format",
                          "dbuf-shard-report", "version", RUN_REPORT_VERSION, "verdict",
                          s->verdict ? s->verdict : "ERROR", "phase", s->phase ? s->phase : "",
                          "exit_code", s->exit_code, "problems", problems_json(s),
                          "problem_count", (json_int_t)s->problems, "message",
                          s->message ? s->message : "", is_layout_file ? "layout_file" : "source",
                          source ? source : "", "ranks", s->nranks);
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
