/* `dbuf-shard compare`: the sharding schemes side by side (serial: no MPI). */
#include "cli.h"

#include "dbuf/models.h"
#include "dbuf/peers.h"
#include "dbuf/plan.h"

#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { OPT_FORMAT = CLI_OPT_FIRST_FREE, OPT_NODE_SIZE, OPT_SCHEMES };

static void
compare_usage(FILE *f)
{
  fprintf(f,
          "Usage: dbuf-shard compare [--shapes FILE | --model NAME | "
          "--safetensors FILE...]\n"
          "                          --dp N [--dtype T] [--units U] [--node-size K]\n"
          "                          [--schemes LIST] [--format text|json] [-o OUT]\n"
          "Shard the tensors by every scheme and compare them, one line per scheme\n"
          "(serial: no MPI).  Schemes:\n");
  for (int i = 0; i < dbuf_scheme_count(); i++)
    fprintf(f, "  %-9s %s\n", dbuf_scheme_name(i), dbuf_scheme_describe(i));
  fprintf(f,
          "Options:\n"
          "  --shapes FILE          shape list ('-' reads stdin)\n"
          "  --model NAME           a built-in model (default " DBUF_MODEL_DEFAULT ")\n"
          "  --safetensors FILE...  checkpoint headers\n"
          "  --order FILE           tensor order for --safetensors\n"
          "  --dp N                 shard count W, 1 to 2^24 (required)\n"
          "  --dtype T              element type of the byte figures (default bf16;\n"
          "                         with --units: of every tensor, default the\n"
          "                         file's own, else bf16)\n"
          "  --units U              one buffer per FSDP unit and dtype, as plan\n"
          "                         --units: none, layer, re:REGEX or a file; each\n"
          "                         scheme shards every buffer on its own (fsdp1:\n"
          "                         one flat parameter a buffer) and the line sums\n"
          "                         them, max/min rank over the per-rank sums\n"
          "  --node-size K          nodes of K consecutive ranks: build padded,\n"
          "                         compact and unpadded node-aware (as plan\n"
          "                         --node-size) and add the tensors crossing node\n"
          "                         boundaries\n"
          "  --schemes LIST         only these schemes, comma-separated\n"
          "  --format F             text (default) or json (an array of objects)\n"
          "  -o, --output OUT       write OUT atomically instead of stdout\n"
          "  -h, --help             this help\n"
          "Columns: buffer bytes (all ranks, padding included), padding bytes and\n"
          "percent, the largest and smallest rank in bytes, rows cut by a rank\n"
          "boundary, tensors split across ranks, tensors crossing node boundaries.\n"
          "Exit status: 0 compared, 1 runtime failure, 2 bad usage or input.\n");
}

/* Mark the schemes of a comma-separated list. */
static int
parse_schemes(const char *list, char *on)
{
  const char *p = list;
  memset(on, 0, (size_t)dbuf_scheme_count());
  for (;;) {
    size_t len = strcspn(p, ",");
    char name[64];
    int i;
    snprintf(name, sizeof name, "%.*s", (int)(len < 63 ? len : 63), p);
    if (len == 0 || len >= sizeof name || dbuf_scheme_find(name, &i) != 0) {
      char known[256] = "";
      for (int k = 0; k < dbuf_scheme_count(); k++)
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s",
                 k ? ", " : "", dbuf_scheme_name(k));
      cli_err("--schemes: '%.*s' is not a scheme (%s)", (int)len, p, known);
      return CLI_EXIT_USAGE;
    }
    on[i] = 1;
    if (p[len] == '\0')
      return 0;
    p += len + 1;
  }
}

typedef struct {
  const char *scheme;
  dbuf_shard_stats_t st;
} row_t;

static int
write_json(FILE *m, const row_t *rows, int n)
{
  fputs("[", m);
  for (int i = 0; i < n; i++) {
    const dbuf_shard_stats_t *s = &rows[i].st;
    json_t *cross = s->tensors_crossing_nodes < 0
                        ? json_null()
                        : json_integer((json_int_t)s->tensors_crossing_nodes);
    json_t *o = json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:o}", "scheme",
                          rows[i].scheme, "buffer_bytes", (json_int_t)s->buffer_bytes,
                          "padding_bytes", (json_int_t)s->padding_bytes,
                          "max_rank_bytes", (json_int_t)s->max_rank_bytes,
                          "min_rank_bytes", (json_int_t)s->min_rank_bytes, "rows_cut",
                          (json_int_t)s->rows_cut, "tensors_split",
                          (json_int_t)s->tensors_split, "tensors_crossing_nodes", cross);
    char *e = o ? json_dumps(o, JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    if (e == NULL)
      return DBUF_ENOMEM;
    fprintf(m, "%s\n  %s", i ? "," : "", e);
    free(e);
  }
  fputs(n ? "\n]\n" : "]\n", m);
  return 0;
}

#define NCOLS 9

static int
write_text(FILE *m, const row_t *rows, int n, const char *head)
{
  static const char *const titles[NCOLS] = {
      "scheme",         "buffer bytes", "padding bytes", "padding",       "max rank bytes",
      "min rank bytes", "rows cut",     "tensors split", "crossing nodes"};
  char(*cell)[NCOLS][32] = calloc((size_t)n + 1, sizeof *cell);
  int width[NCOLS];
  if (cell == NULL)
    return DBUF_ENOMEM;
  for (int c = 0; c < NCOLS; c++)
    snprintf(cell[0][c], sizeof cell[0][c], "%s", titles[c]);
  for (int i = 0; i < n; i++) {
    const dbuf_shard_stats_t *s = &rows[i].st;
    char(*r)[32] = cell[i + 1];
    snprintf(r[0], 32, "%s", rows[i].scheme);
    dbuf_report_count(r[1], 32, s->buffer_bytes);
    dbuf_report_count(r[2], 32, s->padding_bytes);
    snprintf(r[3], 32, "%.4f%%",
             s->buffer_bytes > 0
                 ? 100.0 * (double)s->padding_bytes / (double)s->buffer_bytes
                 : 0.0);
    dbuf_report_count(r[4], 32, s->max_rank_bytes);
    dbuf_report_count(r[5], 32, s->min_rank_bytes);
    dbuf_report_count(r[6], 32, s->rows_cut);
    dbuf_report_count(r[7], 32, s->tensors_split);
    if (s->tensors_crossing_nodes < 0)
      snprintf(r[8], 32, "-");
    else
      dbuf_report_count(r[8], 32, s->tensors_crossing_nodes);
  }
  for (int c = 0; c < NCOLS; c++) {
    width[c] = 0;
    for (int i = 0; i <= n; i++) {
      int w = (int)strlen(cell[i][c]);
      width[c] = w > width[c] ? w : width[c];
    }
  }
  fputs(head, m);
  for (int i = 0; i <= n; i++) {
    fprintf(m, "%-*s", width[0], cell[i][0]);
    for (int c = 1; c < NCOLS; c++)
      fprintf(m, "  %*s", width[c], cell[i][c]);
    fputc('\n', m);
  }
  free(cell);
  return 0;
}

int
cmd_compare(int argc, char **argv)
{
  static const struct option longopts[] = {
      CLI_INPUT_LONGOPTS,
      {"dp", required_argument, NULL, CLI_OPT_DP},
      {"dtype", required_argument, NULL, CLI_OPT_DTYPE},
      {"units", required_argument, NULL, CLI_OPT_UNITS},
      {"node-size", required_argument, NULL, OPT_NODE_SIZE},
      {"schemes", required_argument, NULL, OPT_SCHEMES},
      {"format", required_argument, NULL, OPT_FORMAT},
      CLI_OUTPUT_LONGOPTS};
  cli_plan_opts_t o;
  const char *out = NULL, *format = "text", *schemes = NULL;
  int64_t node_size = 0;
  int c, rc = CLI_EXIT_USAGE, nrows = 0, nschemes = dbuf_scheme_count();
  char *on = calloc((size_t)nschemes, 1);
  row_t *rows = calloc((size_t)nschemes, sizeof *rows);
  dbuf_tensors_t *t = NULL;
  dbuf_plan_t *plan = NULL;
  char *text = NULL;
  size_t len = 0;
  char what[1024];

  cli_plan_opts_init(&o);
  if (on == NULL || rows == NULL) {
    cli_err("out of memory");
    rc = CLI_EXIT_FAIL;
    goto out;
  }
  optind = 1;
  opterr = 0;
  while ((c = cli_next_opt(&o, "compare", argc, argv, longopts, compare_usage, &out)) >= 0) {
    switch (c) {
    case OPT_NODE_SIZE:
      if (cli_parse_i64("node-size", optarg, 1, INT_MAX, &node_size) != 0)
        goto out;
      break;
    case OPT_SCHEMES:
      schemes = optarg;
      break;
    case OPT_FORMAT:
      format = optarg;
      break;
    }
  }
  if (c != CLI_OPTS_END) {
    rc = c == CLI_OPTS_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    goto out;
  }
  int json = strcmp(format, "json") == 0;
  if (!json && strcmp(format, "text") != 0) {
    cli_err("--format: '%s' is not text or json", format);
    goto out;
  }
  if (!o.dp_set) {
    cli_err("compare: --dp N is required");
    goto out;
  }
  if (schemes != NULL) {
    if (parse_schemes(schemes, on) != 0)
      goto out;
  } else {
    memset(on, 1, (size_t)nschemes);
  }
  if ((rc = cli_load_tensors(&o, &t, NULL, what, sizeof what)) != 0) {
    rc = cli_exit_code(rc);
    goto out;
  }

  if (o.units != NULL) {
    /* Only the grouping of the plan is used: its layouts are the cheapest. */
    o.params.kind = DBUF_LAYOUT_UNPADDED;
    if ((rc = cli_build_plan(&o, t, what, &plan)) != 0) {
      rc = cli_exit_code(rc);
      goto out;
    }
  }
  for (int i = 0; i < nschemes; i++) {
    dbuf_diag_t d;
    if (!on[i])
      continue;
    int e = plan != NULL ? dbuf_scheme_measure_plan(plan, i, (int)node_size, &rows[nrows].st, &d)
                         : dbuf_scheme_measure(t, i, o.params.nranks, (int)node_size,
                                               o.elem_size, &rows[nrows].st, &d);
    if (e != 0) {
      cli_err("%s: %s: %s", what, dbuf_scheme_name(i), d.msg);
      rc = cli_exit_code(e);
      goto out;
    }
    rows[nrows++].scheme = dbuf_scheme_name(i);
  }

  FILE *m = open_memstream(&text, &len);
  if (m == NULL) {
    cli_err("out of memory");
    rc = CLI_EXIT_FAIL;
    goto out;
  }
  int e;
  if (json) {
    e = write_json(m, rows, nrows);
  } else {
    char head[1400], g1[32], g2[32];
    int k = snprintf(head, sizeof head,
                     "compare: %s, %s tensors, %s elements, dtype %s, dp %d", what,
                     dbuf_report_count(g1, sizeof g1, dbuf_tensors_count(t)),
                     dbuf_report_count(g2, sizeof g2, dbuf_tensors_total(t)), o.dtype,
                     o.params.nranks);
    if (plan != NULL && k > 0 && (size_t)k < sizeof head)
      k += snprintf(head + k, sizeof head - (size_t)k, ", units %s (%s buffer%s)", o.units,
                    dbuf_report_count(g1, sizeof g1, dbuf_plan_nbuffers(plan)),
                    dbuf_plan_nbuffers(plan) == 1 ? "" : "s");
    if (node_size > 0 && k > 0 && (size_t)k < sizeof head)
      snprintf(head + k, sizeof head - (size_t)k, ", nodes of %lld ranks",
               (long long)node_size);
    strncat(head, "\n", sizeof head - strlen(head) - 1);
    e = write_text(m, rows, nrows, head);
  }
  int bad = ferror(m) || e != 0;
  if (fclose(m) != 0 || bad) {
    cli_err("out of memory writing the comparison");
    rc = CLI_EXIT_FAIL;
    goto out;
  }
  rc = cli_write_output("-o", out, text, len);
out:
  free(text);
  free(on);
  free(rows);
  dbuf_plan_destroy(plan);
  dbuf_tensors_destroy(t);
  cli_plan_opts_free(&o);
  return rc;
}
