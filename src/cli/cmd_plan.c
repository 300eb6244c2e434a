/* `dbuf-shard plan`: plan a layout serially (never initializes MPI). */
#include "cli.h"
#include "run_report.h"

#include "dbuf/layout_json.h"
#include "dbuf/nodes.h"
#include "dbuf/report.h"

#include <assert.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { OPT_FORMAT = CLI_OPT_FIRST_FREE, OPT_PIECES, OPT_RANKS, OPT_STATE, OPT_HELP };

static void
plan_usage(FILE *f)
{
  fprintf(f,
          "Usage: dbuf-shard plan [--shapes FILE | --model NAME | "
          "--safetensors FILE...]\n"
          "                       [--dp N] [--layout padded|unpadded|tensor|compact]\n"
          "                       [--block-size B] [--owners FILE|auto|auto-ns]\n"
          "                       [--dtype T] [--dtype-map PATTERN=T] [--units U]\n"
          "                       [--align-bytes N] [--state adam|sgd|none]\n"
          "                       [--ranks-per-node K] [--node-size K]\n"
          "                       [--tp N] [--pp N] [--pp-layers A,B,...] [--stage S]\n"
          "                       [--ep N] [--expert-tp N] [--vocab-divisor N]\n"
          "                       [--naming hf|megatron]\n"
          "                       [--format F] [--pieces] [--ranks A-B] [-o OUT]\n"
          "Plan the global layout and report it (serial: no MPI).\n\n%s"
          "Output:\n"
          "  --format F             summary (default): sizes, padding, balance\n"
          "                         table: one line per rank\n"
          "                         diagram: one picture line per rank\n"
          "                         json: the layout file (see 'verify')\n"
          "                         csv: one line per (rank, tensor) piece\n"
          "                         svg: a picture of the buffer\n"
          "  --pieces               json: add each rank's pieces\n"
          "  --state S              summary: add the training memory per rank:\n"
          "                         sgd: gradients in the buffer dtype; adam: also\n"
          "                         fp32 main weights (4 B) and two fp32 moments\n"
          "                         (8 B) per element held, padding included\n"
          "  --ranks A-B            svg: draw only ranks A to B; from 256 ranks\n"
          "                         drawn, one band per node (--node-size) or\n"
          "                         per group of ranks instead of one per rank\n"
          "  -o, --output OUT       write OUT atomically instead of stdout\n"
          "  -h, --help             this help\n"
          "With --ranks-per-node K, summary, table and diagram end with the node\n"
          "report of the MPI run (per node: ranks, global range, elements, bytes;\n"
          "every tensor crossing a node boundary with the rows on each side), and\n"
          "json adds its \"nodes\" and \"crossing\" arrays; csv and svg refuse it.\n"
          "A plan of several buffers (--units, --dtype-map, mixed dtypes): summary\n"
          "has one line per buffer and the totals; table and diagram one block per\n"
          "buffer under 'buffer UNIT/DTYPE:'; csv 'unit,dtype' columns in front;\n"
          "svg one picture per buffer; json the layout file version 2.\n"
          "Exit status: 0 planned, 1 runtime failure, 2 bad usage or input.\n",
          cli_plan_help);
}

/* Close the memory stream m (open_memstream(out, outlen)) and replace
 * *text (len bytes) by what was written to it. */
static int
take_stream(FILE *m, char **out, size_t *outlen, char **text, size_t *len)
{
  int bad = ferror(m);
  if (fclose(m) != 0 || bad) { /* fclose sets *out and *outlen */
    free(*out);
    return DBUF_ENOMEM;
  }
  free(*text);
  *text = *out;
  *len = *outlen;
  return 0;
}

/* The run report's "nodes" and "crossing" arrays as members of a JSON
 * object indented by ind spaces, one element a line, each member after
 * ",\n" (what goes before the object's closing line). */
static int
nodes_json_members(FILE *m, const dbuf_layout_t *l, const dbuf_nodes_t *n, int ind)
{
  static const char *const keys[] = {"nodes", "crossing"};
  json_t *doc = cli_nodes_json(l, n);
  if (doc == NULL)
    return DBUF_ENOMEM;
  for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
    json_t *a = json_object_get(doc, keys[k]);
    size_t na = json_array_size(a);
    fprintf(m, ",\n%*s\"%s\": [", ind, "", keys[k]);
    for (size_t i = 0; i < na; i++) {
      char *e = json_dumps(json_array_get(a, i), JSON_PRESERVE_ORDER);
      if (e == NULL) {
        json_decref(doc);
        return DBUF_ENOMEM;
      }
      fprintf(m, "%s\n%*s%s", i ? "," : "", ind + 2, "", e);
      free(e);
    }
    if (na)
      fprintf(m, "\n%*s]", ind, "");
    else
      fputs("]", m);
  }
  json_decref(doc);
  return 0;
}

/* Crossing tensors, their bytes and the padding of a layout's node report. */
typedef struct {
  int64_t crossing, bytes, padding;
} node_fig_t;

static int
node_figures(const dbuf_layout_t *l, const dbuf_nodes_t *n, int64_t elem_size,
             node_fig_t *f)
{
  int64_t elems = 0;
  f->crossing = dbuf_nodes_ncrossing(n);
  for (int64_t i = 0; i < f->crossing; i++) {
    dbuf_node_crossing_t cr;
    dbuf_nodes_crossing(n, i, &cr);
    elems += dbuf_tensors_numel(dbuf_layout_tensors(l), cr.tensor); /* <= total */
  }
  f->padding = dbuf_layout_size(l) - dbuf_tensors_total(dbuf_layout_tensors(l));
  return __builtin_mul_overflow(elems, elem_size, &f->bytes) ? DBUF_EOVERFLOW : 0;
}

/*
 * With --node-size: the node figures of lb, the layout built without it
 * ("before"), and of l with it ("after"), as text lines or as a JSON member
 * (after ",\n", indented by ind spaces).
 */
static int
node_packing(FILE *m, const cli_plan_opts_t *o, const dbuf_layout_t *lb, const dbuf_layout_t *l,
             const dbuf_nodes_t *n, int64_t elem_size, int json, int ind)
{
  dbuf_nodes_t *nb = NULL;
  node_fig_t b, a;
  dbuf_diag_t d;
  int rc;

  if ((rc = dbuf_nodes_create_blocked(lb, dbuf_layout_nranks(lb), (int)o->ranks_per_node,
                                      elem_size, &nb, &d)) != 0) {
    cli_err("node report: %s", d.msg);
    return cli_exit_code(rc);
  }
  if ((rc = node_figures(lb, nb, elem_size, &b)) != 0 ||
      (rc = node_figures(l, n, elem_size, &a)) != 0) {
    dbuf_nodes_destroy(nb);
    cli_err("node report: %s", dbuf_strerror(rc)); /* node_figures fills no diag */
    return cli_exit_code(rc);
  }
  dbuf_nodes_destroy(nb);
  if (json) {
    fprintf(m,
            ",\n%*s\"node_packing\": {\"node_size\": %d, \"crossing_before\": %lld, "
            "\"crossing_after\": %lld, \"crossing_bytes_before\": %lld, "
            "\"crossing_bytes_after\": %lld, \"padding_before\": %lld, "
            "\"padding_after\": %lld}",
            ind, "", o->params.node_size, (long long)b.crossing, (long long)a.crossing,
            (long long)b.bytes, (long long)a.bytes, (long long)b.padding, (long long)a.padding);
    return 0;
  }
  char x[32], y[32];
  fprintf(m, "Node-aware packing (--node-size %d), without -> with:\n", o->params.node_size);
  fprintf(m, "  tensors crossing node boundaries: %lld -> %lld\n", (long long)b.crossing,
          (long long)a.crossing);
  fprintf(m, "  bytes crossing node boundaries:   %s -> ", dbuf_report_bytes(x, sizeof x, b.bytes));
  fprintf(m, "%s\n", dbuf_report_bytes(y, sizeof y, a.bytes));
  fprintf(m, "  padding elements:                 %s -> ", dbuf_report_count(x, sizeof x, b.padding));
  fprintf(m, "%s (%+.4f%% of the buffer without)\n", dbuf_report_count(y, sizeof y, a.padding),
          dbuf_layout_size(lb) > 0 ? 100.0 * (double)(a.padding - b.padding) /
                                         (double)dbuf_layout_size(lb)
                                   : 0.0);
  return 0;
}

/*
 * --ranks A-B: ranks A to B of nranks as the half-open range[0..1]
 * (printing the error).  Returns CLI_EXIT_*.
 */
static int
parse_ranks(const char *arg, int nranks, int range[2])
{
  int64_t v[2];
  const char *s = arg;
  for (int i = 0; i < 2; i++) {
    char *end;
    if (*s < '0' || *s > '9')
      goto bad;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (errno == ERANGE || *end != (i == 0 ? '-' : '\0'))
      goto bad;
    v[i] = x;
    s = end + 1;
  }
  if (v[1] < v[0]) {
    cli_err("--ranks: %s ends before it starts", arg);
    return CLI_EXIT_USAGE;
  }
  if (v[1] >= nranks) {
    cli_err("--ranks: %s is outside the ranks 0-%d of --dp %d", arg, nranks - 1, nranks);
    return CLI_EXIT_USAGE;
  }
  range[0] = (int)v[0];
  range[1] = (int)v[1] + 1;
  return CLI_EXIT_OK;
bad:
  cli_err("--ranks: '%s' is not a range A-B of ranks", arg);
  return CLI_EXIT_USAGE;
}

/* What plan_block reports: the plan, the one built without --node-size
 * (or NULL), each buffer's node report (or NULL). */
typedef struct {
  const cli_plan_opts_t *o;
  const char *what;
  dbuf_plan_t *p, *before;
  dbuf_nodes_t **nodes;
  int64_t nb;
  int v1; /* one buffer of the unit "all": today's single-layout output */
} planned_t;

/* The node report and node packing figures of buffer k, as text (ind < 0)
 * or as JSON members indented by ind spaces. */
static int
buffer_nodes(FILE *m, const planned_t *pl, int64_t k, int ind)
{
  dbuf_plan_buffer_t pb, bb;
  if (pl->nodes[k] == NULL)
    return 0;
  dbuf_plan_buffer(pl->p, k, &pb);
  if (ind < 0)
    cli_nodes_print(m, pb.layout, pl->nodes[k]);
  else if (nodes_json_members(m, pb.layout, pl->nodes[k], ind) != 0) {
    cli_err("out of memory writing the node report");
    return CLI_EXIT_FAIL;
  }
  if (pl->before == NULL)
    return 0;
  dbuf_plan_buffer(pl->before, k, &bb);
  return node_packing(m, pl->o, bb.layout, pb.layout, pl->nodes[k], pb.elem_size, ind >= 0,
                      ind < 0 ? 0 : ind);
}

/*
 * The layout JSON of the plan on its way to the output, with each buffer's
 * node members added before its closing line ("\n}\n" for version 1,
 * "\n    }" for version 2: the writer indents nothing else that way, and
 * strings hold no newline).  The writer hands the text over in chunks; the
 * end of a chunk that may begin a marker is held back until the next one.
 */
typedef struct {
  const planned_t *pl;
  cli_out_t *out;
  const char *marker;
  size_t mlen;
  int64_t k;        /* the buffer whose closing line comes next */
  char *work;       /* held text, then the chunk after it */
  size_t held, cap; /* bytes held (< mlen), size of work */
  int rc;           /* CLI_EXIT_* of the node members */
} splice_t;

/* Buffer k's node members, then the marker, to the output. */
static int
splice_nodes(splice_t *s)
{
  char *text = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&text, &len);
  if (m == NULL) {
    cli_err("out of memory writing the layout");
    s->rc = CLI_EXIT_FAIL;
    return -1;
  }
  int rc = buffer_nodes(m, s->pl, s->k, s->pl->v1 ? 2 : 6);
  if ((fclose(m) != 0 || text == NULL) && rc == 0) {
    cli_err("out of memory writing the layout");
    rc = CLI_EXIT_FAIL;
  }
  if (rc != 0) {
    s->rc = rc;
    free(text);
    return -1;
  }
  int w = cli_out_write(s->out, text, len);
  free(text);
  s->k++;
  return w != 0 ? -1 : cli_out_write(s->out, s->marker, s->mlen);
}

/* dbuf_write_fn of the layout JSON when node members go in. */
static int
splice_write(void *arg, const char *data, size_t len)
{
  splice_t *s = arg;
  if (s->k >= s->pl->nb)
    return cli_out_write(s->out, data, len);
  if (s->held + len > s->cap) {
    char *w = realloc(s->work, s->held + len);
    if (w == NULL) {
      cli_err("out of memory writing the layout");
      s->rc = CLI_EXIT_FAIL;
      return -1;
    }
    s->work = w;
    s->cap = s->held + len;
  }
  memcpy(s->work + s->held, data, len);
  size_t n = s->held + len, at = 0;
  const char *end;
  while (s->k < s->pl->nb && (end = memmem(s->work + at, n - at, s->marker, s->mlen)) != NULL) {
    size_t e = (size_t)(end - s->work);
    if (cli_out_write(s->out, s->work + at, e - at) != 0 || splice_nodes(s) != 0)
      return -1;
    at = e + s->mlen;
  }
  /* Hold back what may begin the next marker. */
  size_t keep = s->k < s->pl->nb ? s->mlen - 1 : 0;
  if (keep > n - at)
    keep = n - at;
  if (cli_out_write(s->out, s->work + at, n - at - keep) != 0)
    return -1;
  memmove(s->work, s->work + n - keep, keep);
  s->held = keep;
  return 0;
}

/* Write the layout JSON of the plan to out (see splice_t), in chunks: the
 * document is never held in memory whole. */
static int
plan_json(const planned_t *pl, unsigned flags, cli_out_t *out)
{
  splice_t s = {.pl = pl, .out = out, .marker = pl->v1 ? "\n}\n" : "\n    }"};
  int e;
  s.mlen = strlen(s.marker);
  if (pl->nodes[0] == NULL)
    e = dbuf_plan_write_json(pl->p, flags, cli_out_write, out);
  else if ((e = dbuf_plan_write_json(pl->p, flags, splice_write, &s)) == 0 &&
           cli_out_write(out, s.work, s.held) != 0)
    e = DBUF_EIO;
  free(s.work);
  if (s.rc != 0)
    return s.rc;
  if (e == DBUF_EIO) /* a failed write: cli_out_close() names it */
    return 0;
  if (e != 0) {
    cli_err("%s writing the layout", dbuf_strerror(e));
    return cli_exit_code(e);
  }
  assert(pl->nodes[0] == NULL || s.k == pl->nb);
  return 0;
}

/* The report of buffer k in format rfmt (NULL ro: node figures only), then its
 * node report and node packing figures. */
static int
buffer_text(FILE *m, const planned_t *pl, int64_t k, dbuf_report_format_t rfmt,
            const char *format, const dbuf_report_opts_t *ro0)
{
  dbuf_plan_buffer_t pb;
  dbuf_report_opts_t ro;
  dbuf_diag_t d;
  char *text = NULL;
  size_t len = 0;
  dbuf_plan_buffer(pl->p, k, &pb);
  if (ro0 != NULL) {
    ro = *ro0;
    ro.elem_size = pb.elem_size; /* the buffer's own: honest bytes */
    ro.dtype = dbuf_dtype_name(pb.dtype);
    int e = dbuf_report_write(pb.layout, rfmt, &ro, &text, &len, &d);
    if (e != 0) {
      cli_err("%s report: %s", format, d.msg);
      return cli_exit_code(e);
    }
    fwrite(text, 1, len, m);
    free(text);
    if (pl->nodes[k] != NULL)
      fputc('\n', m);
  }
  return buffer_nodes(m, pl, k, -1);
}

/* Plan the tensors the options name and write the report in text/len, or
 * the layout JSON (json) straight to the output path (*text stays NULL);
 * svg_ranks: the ranks an svg draws, or NULL for all. */
static int
plan_block(const cli_plan_opts_t *o, int json, dbuf_report_format_t rfmt, const char *format,
           unsigned flags, const int *svg_ranks, const char *path, char **text, size_t *len)
{
  dbuf_tensors_t *t = NULL;
  planned_t pl = {.o = o};
  dbuf_diag_t d;
  char what[1024], *out = NULL;
  size_t outlen = 0;
  FILE *m = NULL;
  int rc, e;

  pl.what = what;
  if ((rc = cli_load_tensors(o, &t, NULL, what, sizeof what)) != 0 ||
      (rc = cli_build_plan(o, t, what, &pl.p)) != 0) {
    rc = cli_exit_code(rc);
    goto out;
  }
  pl.nb = dbuf_plan_nbuffers(pl.p);
  pl.v1 = cli_plan_is_single(pl.p);
  if ((pl.nodes = calloc((size_t)pl.nb, sizeof *pl.nodes)) == NULL) {
    cli_err("out of memory");
    rc = CLI_EXIT_FAIL;
    goto out;
  }
  cli_warn_plan(pl.p, what);
  for (int64_t k = 0; k < pl.nb && o->ranks_per_node > 0; k++) {
    dbuf_plan_buffer_t pb;
    dbuf_plan_buffer(pl.p, k, &pb);
    e = dbuf_nodes_create_blocked(pb.layout, dbuf_layout_nranks(pb.layout),
                                  (int)o->ranks_per_node, pb.elem_size, &pl.nodes[k], &d);
    if (e != 0) {
      cli_err("node report: %s", d.msg);
      rc = cli_exit_code(e);
      goto out;
    }
  }
  if (o->ranks_per_node > 0 && o->params.node_size > 0) {
    cli_plan_opts_t ob = *o;
    ob.params.node_size = 0;
    if ((rc = cli_build_plan(&ob, t, what, &pl.before)) != 0) {
      rc = cli_exit_code(rc);
      goto out;
    }
  }
  if (json) {
    cli_out_t *w = NULL;
    if ((rc = cli_out_open("-o", path, &w)) == 0) {
      rc = plan_json(&pl, flags, w);
      e = cli_out_close(w, rc == 0);
      rc = rc != 0 ? rc : e;
    }
    goto out;
  }
  dbuf_report_opts_t ro;
  cli_report_opts(o, what, &ro);
  ro.svg_node_ranks = o->params.node_size;
  if (svg_ranks != NULL) {
    ro.svg_rank_begin = svg_ranks[0];
    ro.svg_rank_end = svg_ranks[1];
  }
  if ((m = open_memstream(&out, &outlen)) == NULL) {
    cli_err("out of memory");
    rc = CLI_EXIT_FAIL;
    goto out;
  }
  if (pl.v1) {
    rc = buffer_text(m, &pl, 0, rfmt, format, &ro);
  } else if (rfmt == DBUF_REPORT_SUMMARY) {
    rc = cli_plan_summary(m, pl.p, o, what);
    for (int64_t k = 0; k < pl.nb && rc == 0 && pl.nodes[k] != NULL; k++) {
      dbuf_plan_buffer_t pb;
      dbuf_plan_buffer(pl.p, k, &pb);
      fprintf(m, "\nbuffer %s/%s:\n", pb.unit, dbuf_dtype_name(pb.dtype));
      rc = buffer_text(m, &pl, k, rfmt, format, NULL);
    }
  } else if (rfmt == DBUF_REPORT_CSV || rfmt == DBUF_REPORT_SVG) {
    rc = cli_plan_merged(m, pl.p, rfmt, &ro);
  } else {
    for (int64_t k = 0; k < pl.nb && rc == 0; k++) {
      dbuf_plan_buffer_t pb;
      dbuf_plan_buffer(pl.p, k, &pb);
      fprintf(m, "%sbuffer %s/%s:\n", k ? "\n" : "", pb.unit, dbuf_dtype_name(pb.dtype));
      rc = buffer_text(m, &pl, k, rfmt, format, &ro);
    }
  }
  if (rc == 0 && o->state != CLI_STATE_NONE)
    rc = cli_plan_state(m, pl.p, o->state);
  e = take_stream(m, &out, &outlen, text, len);
  m = NULL;
  if (e != 0 && rc == 0) {
    cli_err("out of memory writing the report");
    rc = CLI_EXIT_FAIL;
  }
out:
  if (m != NULL) {
    fclose(m);
    free(out);
  }
  for (int64_t k = 0; pl.nodes != NULL && k < pl.nb; k++)
    dbuf_nodes_destroy(pl.nodes[k]);
  free(pl.nodes);
  dbuf_plan_destroy(pl.before);
  dbuf_plan_destroy(pl.p);
  dbuf_tensors_destroy(t);
  return rc;
}

/* Every stage of a pipeline, one block each: "stage S of P:" and its report,
 * blocks separated by a blank line. */
static int
plan_stages(cli_plan_opts_t *o, int64_t nstages, dbuf_report_format_t rfmt, const char *format,
            char **text, size_t *len)
{
  char *out = NULL, *block = NULL;
  size_t outlen = 0, blen = 0;
  int rc = 0;
  FILE *m = open_memstream(&out, &outlen);
  if (m == NULL)
    return CLI_EXIT_FAIL;
  for (int64_t s = 0; s < nstages && rc == 0; s++) {
    o->stage = s;
    if ((rc = plan_block(o, 0, rfmt, format, 0, NULL, NULL, &block, &blen)) == 0) {
      fprintf(m, "%sstage %lld of %lld:\n", s ? "\n" : "", (long long)s, (long long)nstages);
      fwrite(block, 1, blen, m);
    }
    free(block);
    block = NULL;
  }
  o->stage = -1;
  if (take_stream(m, &out, &outlen, text, len) != 0 && rc == 0) {
    cli_err("out of memory writing the report");
    rc = CLI_EXIT_FAIL;
  }
  return rc;
}

int
cmd_plan(int argc, char **argv)
{
  static const struct option longopts[] = {
      CLI_PLAN_LONGOPTS,
      {"format", required_argument, NULL, OPT_FORMAT},
      {"pieces", no_argument, NULL, OPT_PIECES},
      {"ranks", required_argument, NULL, OPT_RANKS},
      {"state", required_argument, NULL, OPT_STATE},
      CLI_OUTPUT_LONGOPTS};
  cli_plan_opts_t o;
  const char *out = NULL, *format = "summary", *ranks = NULL;
  int svg_ranks[2];
  unsigned flags = 0;
  int c, rc = CLI_EXIT_USAGE;
  char *text = NULL;
  size_t len = 0;

  cli_plan_opts_init(&o);
  optind = 1;
  opterr = 0;
  while ((c = cli_next_opt(&o, "plan", argc, argv, longopts, plan_usage, &out)) >= 0) {
    switch (c) {
    case OPT_FORMAT:
      format = optarg;
      break;
    case OPT_PIECES:
      flags |= DBUF_JSON_PIECES;
      break;
    case OPT_RANKS:
      ranks = optarg;
      break;
    case OPT_STATE:
      if (strcmp(optarg, "none") == 0)
        o.state = CLI_STATE_NONE;
      else if (strcmp(optarg, "sgd") == 0)
        o.state = CLI_STATE_SGD;
      else if (strcmp(optarg, "adam") == 0)
        o.state = CLI_STATE_ADAM;
      else {
        cli_err("--state: '%s' is not adam, sgd or none", optarg);
        goto out;
      }
      break;
    }
  }
  if (c != CLI_OPTS_END) {
    rc = c == CLI_OPTS_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    goto out;
  }
  dbuf_report_format_t rfmt = 0;
  int json = strcmp(format, "json") == 0;
  if (!json && dbuf_report_format_parse(format, &rfmt) != 0) {
    cli_err("--format: '%s' is not a known format (summary, table, diagram, "
            "json, csv, svg)",
            format);
    goto out;
  }
  /* Refused before planning: a huge dp takes memory to plan. */
  dbuf_diag_t d;
  if (!json && dbuf_report_check(rfmt, o.params.nranks, &d) != 0) {
    cli_err("--format %s", d.msg);
    goto out;
  }
  if ((flags & DBUF_JSON_PIECES) && !json) {
    cli_err("--pieces applies to --format json only");
    goto out;
  }
  if (o.state != CLI_STATE_NONE && (json || rfmt != DBUF_REPORT_SUMMARY)) {
    cli_err("--state applies to --format summary only");
    goto out;
  }
  if (ranks != NULL && (json || rfmt != DBUF_REPORT_SVG)) {
    cli_err("--ranks applies to --format svg only");
    goto out;
  }
  if (ranks != NULL && (rc = parse_ranks(ranks, o.params.nranks, svg_ranks)) != 0)
    goto out;
  rc = CLI_EXIT_USAGE;
  if (o.ranks_per_node > 0 && !json && rfmt != DBUF_REPORT_SUMMARY &&
      rfmt != DBUF_REPORT_TABLE && rfmt != DBUF_REPORT_DIAGRAM) {
    cli_err("--ranks-per-node applies to --format summary, table, diagram and json");
    goto out;
  }
  if (o.params.node_size > 0 && o.ranks_per_node == 0 &&
      (json || rfmt == DBUF_REPORT_SUMMARY || rfmt == DBUF_REPORT_TABLE ||
       rfmt == DBUF_REPORT_DIAGRAM))
    o.ranks_per_node = o.params.node_size; /* the node report shows its effect */
  int64_t nstages = cli_plan_stages(&o);
  if (nstages > 1 && (json || rfmt == DBUF_REPORT_CSV || rfmt == DBUF_REPORT_SVG)) {
    cli_err("--format %s writes one layout: give --stage S (0..%lld) with --pp %lld", format,
            (long long)nstages - 1, (long long)nstages);
    goto out;
  }
  if (nstages > 1)
    rc = plan_stages(&o, nstages, rfmt, format, &text, &len);
  else
    rc = plan_block(&o, json, rfmt, format, flags, ranks ? svg_ranks : NULL, out, &text, &len);
  if (rc != 0 || json) /* the JSON is written already */
    goto out;
  rc = cli_write_output("-o", out, text, len);
out:
  free(text);
  cli_plan_opts_free(&o);
  return rc;
}
