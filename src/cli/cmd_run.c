/*
 * `dbuf-shard run` -- the MPI service, and the default command:
 * `mpirun -np N dbuf-shard [OPTIONS]`.
 *
 * Rank 0 reads the input and plans; the layout is broadcast and re-validated
 * on every rank; the ranks prove together that every row is owned exactly
 * once; each rank allocates its segment in NUMA-bound memory, writes the
 * pattern and checks it; rank 0 prints the report.  Every failure is agreed,
 * so all ranks exit with the same code: 0 PASS, 1 FAIL or runtime error,
 * 2 bad usage or input.  Options must be equal on every rank and are
 * compared first.  Only rank 0 prints, except for a rank's own fatal MPI
 * start-up error and the --timeout watchdog, which ends the job from any rank.
 */
#include "cli.h"
#include "run_report.h"
#include "watchdog.h"

#include "dbuf/comm.h"
#include "dbuf/mem.h"
#include "dbuf/nodes.h"
#include "dbuf/pattern.h"
#include "dbuf/wire.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
  OPT_MEMBIND = CLI_OPT_FIRST_FREE,
  OPT_STRICT,
  OPT_BIND,
  OPT_LOCK,
  OPT_NO_MATERIALIZE,
  OPT_CHECK_INPUTS,
  OPT_REPORT,
  OPT_QUIET,
  OPT_LAYOUT_FILE,
  OPT_TIMEOUT
};

#define SAMPLE_ROWS 8 /* rows per rank that rank 0 spot-checks */

static void
run_usage(FILE *f)
{
  fprintf(f,
          "Usage: mpirun -np N dbuf-shard [run] [OPTIONS]\n"
          "Plan on rank 0, broadcast, materialize every rank's segment in bound memory,\n"
          "and prove that every row is owned exactly once.  With no options: the model\n"
          "%s, bf16, padded, dp = the number of ranks.\n\n%s"
          "  (run: --dp must be the rank count or a multiple of it; rank r then holds\n"
          "   the dp/N consecutive segments [r dp/N, (r+1) dp/N); with --tp/--pp every\n"
          "   rank is one data-parallel rank of one model-parallel group)\n"
          "Trainer's layout:\n"
          "  --layout-file FILE     rank 0 reads this layout JSON (as 'plan --format\n"
          "                         json' writes it) instead of planning; its dp_size\n"
          "                         must be the rank count; a broken layout is FAIL\n"
          "                         with every problem listed\n"
          "Memory:\n"
          "  --membind P            local (default): the NUMA nodes of the CPU binding;\n"
          "                         node:N, interleave, or none (first touch)\n"
          "  --membind-strict       fail when the binding does not really happen\n"
          "  --bind B               core, numa or none (default): bind each rank when\n"
          "                         the launcher did not\n"
          "  --lock                 mlock the segments (RLIMIT_MEMLOCK permitting)\n"
          "  --no-materialize       plan, broadcast and check the structure only\n"
          "Checks and output:\n"
          "  --check-inputs         every rank reads the input itself; fail, naming the\n"
          "                         ranks and hosts, if any sees different bytes\n"
          "  --report FILE          also write the report as JSON (rank 0, atomically);\n"
          "                         checked before the run\n"
          "  --timeout SECONDS      end the job (MPI_Abort) when one phase of the run\n"
          "                         lasts longer: a rank that died while the launcher\n"
          "                         keeps the job would leave the others waiting\n"
          "                         (default %d; 0: never)\n"
          "  -q, --quiet            no progress lines on stderr\n"
          "  -h, --help             this help\n"
          "Every option but -q must be the same on every rank: a difference ends every\n"
          "rank with exit 2, naming the option and the ranks.\n"
          "Exit status (the same on every rank): 0 PASS, 1 verification or runtime\n"
          "failure, 2 bad usage or input.\n",
          "llama-3.2-1b", cli_plan_help, CLI_TIMEOUT_DEFAULT);
}

typedef struct {
  cli_plan_opts_t plan;
  dbuf_membind_t membind;
  const char *membind_text;
  const char *bind_text;
  dbuf_bind_t bind;
  int strict, lock, materialize, check_inputs, quiet;
  int64_t timeout; /* seconds, 0: no watchdog */
  const char *report;
  const char *layout_file; /* --layout-file FILE: instead of planning */
} run_opts_t;

/* --layout-file replaces the input and planning options. */
static int
layout_file_conflict(const run_opts_t *o)
{
  const cli_plan_opts_t *p = &o->plan;
  dbuf_layout_params_t def;
  const char *other = NULL;
  if (o->layout_file == NULL)
    return 0;
  dbuf_layout_params_init(&def);
  if (p->shapes != NULL)
    other = "--shapes";
  else if (p->model != NULL)
    other = "--model";
  else if (p->nsafetensors > 0)
    other = "--safetensors";
  else if (p->dp_set)
    other = "--dp";
  else if (p->owners != NULL)
    other = "--owners";
  else if (p->params.kind != def.kind)
    other = "--layout";
  else if (p->params.block_size != def.block_size)
    other = "--block-size";
  else if (p->par_opt != NULL)
    other = p->par_opt;
  if (other == NULL)
    return 0;
  cli_err("--layout-file replaces planning: drop %s%s", other[0] == '-' ? "" : "--", other);
  return CLI_EXIT_USAGE;
}

/* Returns 0, or CLI_EXIT_USAGE (printed; quiet ranks print nothing), or -1 for --help. */
static int
parse_opts(int argc, char **argv, run_opts_t *o)
{
  static const struct option longopts[] = {
      CLI_PLAN_LONGOPTS,
      {"membind", required_argument, NULL, OPT_MEMBIND},
      {"membind-strict", no_argument, NULL, OPT_STRICT},
      {"bind", required_argument, NULL, OPT_BIND},
      {"lock", no_argument, NULL, OPT_LOCK},
      {"no-materialize", no_argument, NULL, OPT_NO_MATERIALIZE},
      {"check-inputs", no_argument, NULL, OPT_CHECK_INPUTS},
      {"report", required_argument, NULL, OPT_REPORT},
      {"timeout", required_argument, NULL, OPT_TIMEOUT},
      {"quiet", no_argument, NULL, 'q'},
      {"layout-file", required_argument, NULL, OPT_LAYOUT_FILE},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  dbuf_diag_t d;
  int c;

  o->membind_text = "local";
  o->bind_text = "none";
  o->materialize = 1;
  o->timeout = CLI_TIMEOUT_DEFAULT;
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, ":qh", longopts, NULL)) != -1) {
    int h = cli_plan_opt(&o->plan, c, optarg, argv, argc);
    if (h == 1)
      continue;
    if (h == CLI_OPT_BAD)
      return CLI_EXIT_USAGE;
    switch (c) {
    case OPT_MEMBIND:
      o->membind_text = optarg;
      break;
    case OPT_STRICT:
      o->strict = 1;
      break;
    case OPT_BIND:
      if (dbuf_bind_parse(optarg, &o->bind, &d) != 0) {
        cli_err("--bind: '%s' is not core, numa or none", optarg);
        return CLI_EXIT_USAGE;
      }
      o->bind_text = optarg;
      break;
    case OPT_LOCK:
      o->lock = 1;
      break;
    case OPT_NO_MATERIALIZE:
      o->materialize = 0;
      break;
    case OPT_CHECK_INPUTS:
      o->check_inputs = 1;
      break;
    case OPT_REPORT:
      o->report = optarg;
      break;
    case OPT_TIMEOUT:
      if (cli_parse_i64("timeout", optarg, 0, 7 * 86400, &o->timeout) != 0)
        return CLI_EXIT_USAGE;
      break;
    case 'q':
      o->quiet = 1;
      break;
    case OPT_LAYOUT_FILE:
      o->layout_file = optarg;
      break;
    case 'h':
      return -1;
    default: /* ':' missing value, '?' unknown option */
      return cli_bad_option("run", c, argv, longopts);
    }
  }
  if (optind < argc) {
    cli_err("run: unexpected argument '%s'", argv[optind]);
    return CLI_EXIT_USAGE;
  }
  if (dbuf_membind_parse(o->membind_text, &o->membind, &d) != 0) {
    cli_err("--membind: '%s' is not local, node:N, interleave or none", o->membind_text);
    return CLI_EXIT_USAGE;
  }
  o->membind.strict = o->strict;
  if (o->report != NULL && strcmp(o->report, "-") == 0) {
    cli_err("--report: give a file name (the text report goes to stdout)");
    return CLI_EXIT_USAGE;
  }
  return layout_file_conflict(o);
}

/* ------------------------------------------------------------------------ */
/* Fault injection for tests (DBUF_FAULT); the library knows nothing of it.  */

typedef struct {
  int shift, stale, corrupt, kill; /* the rank to hit, or -1 */
} fault_t;

static int
parse_faults(const char *spec, fault_t *f)
{
  f->shift = f->stale = f->corrupt = f->kill = -1;
  if (spec == NULL || *spec == '\0')
    return 0;
  char *copy = strdup(spec), *save = NULL;
  if (copy == NULL)
    return CLI_EXIT_FAIL;
  int rc = 0;
  for (char *tok = strtok_r(copy, ",", &save); tok != NULL && rc == 0;
       tok = strtok_r(NULL, ",", &save)) {
    char *colon = strchr(tok, ':'), *end;
    long r = colon ? strtol(colon + 1, &end, 10) : -1;
    int *slot = NULL;
    if (colon != NULL) {
      *colon = '\0';
      if (strcmp(tok, "shift") == 0)
        slot = &f->shift;
      else if (strcmp(tok, "stale") == 0)
        slot = &f->stale;
      else if (strcmp(tok, "corrupt") == 0)
        slot = &f->corrupt;
      else if (strcmp(tok, "kill") == 0)
        slot = &f->kill;
    }
    if (slot == NULL || colon[1] == '\0' || *end != '\0' || r < 0 || r > INT_MAX) {
      cli_err("DBUF_FAULT: '%s' is not a list of shift:R, stale:R, corrupt:R, kill:R", spec);
      rc = CLI_EXIT_USAGE;
    } else {
      *slot = (int)r;
    }
  }
  free(copy);
  return rc;
}

/* A stale plan: the layout with one cut moved by one row, as an older plan
 * for other shapes would have it.  Cut c = the hit rank's first segment
 * (segment 1 for rank 0).  NULL if no cut can move. */
static dbuf_layout_t *
stale_layout(const dbuf_layout_t *l, int first_seg)
{
  int nr = dbuf_layout_nranks(l), c = first_seg > 0 ? first_seg : 1;
  if (nr < 2)
    return NULL;
  int64_t *range = malloc((size_t)(nr + 1) * sizeof *range), t = -1;
  if (range == NULL)
    return NULL;
  memcpy(range, dbuf_layout_range(l), (size_t)(nr + 1) * sizeof *range);
  int64_t x = range[c];
  if (x > 0)
    dbuf_layout_tensor_at(l, x - 1, &t);
  int64_t step = t >= 0 ? dbuf_tensors_row_elems(dbuf_layout_tensors(l), t) : 1;
  if (x - step >= range[c - 1])
    range[c] = x - step;
  else if (x + step <= range[c + 1])
    range[c] = x + step;
  dbuf_layout_t *s = NULL;
  if (range[c] != x)
    dbuf_layout_from_parts(dbuf_layout_tensors(l), dbuf_layout_kind(l), nr,
                           dbuf_layout_block_size(l), dbuf_layout_chunk_size(l),
                           dbuf_layout_size(l), dbuf_layout_offsets(l), range,
                           dbuf_layout_owners(l), &s, NULL);
  free(range);
  return s;
}

/* Flip one element of a tensor row near the middle of the segment. */
static void
corrupt_one(const dbuf_layout_t *l, int64_t start, int64_t end, void *seg, int64_t es)
{
  for (int64_t x = start + (end - start) / 2, n = 0; n < end - start; n++, x++) {
    if (x >= end)
      x = start;
    int64_t t = -1;
    dbuf_layout_tensor_at(l, x, &t);
    if (t >= 0) {
      ((unsigned char *)seg)[(x - start) * es] ^= 0xFF;
      return;
    }
  }
}

/* ------------------------------------------------------------------------ */

typedef struct {
  double last;
  int quiet;
} progress_t;

static int
on_progress(int64_t done, int64_t total, void *arg)
{
  progress_t *p = arg;
  double now = MPI_Wtime();
  if (!p->quiet && now - p->last >= 1.0 && done < total) {
    fprintf(stderr, "dbuf-shard: rank 0: %.0f%% (%.0f of %.0f MB)\n",
            100.0 * (double)done / (double)total, (double)done / 1e6, (double)total / 1e6);
    p->last = now;
  }
  return 0;
}

/* First and last (tensor, row) held in [start, end) of segments [s0, s1). */
static void
first_last(const dbuf_layout_t *l, int s0, int s1, int64_t start, int64_t end,
           run_rank_rec_t *rec)
{
  rec->first_tensor = rec->last_tensor = rec->first_row = rec->last_row = -1;
  const dbuf_tensors_t *ts = dbuf_layout_tensors(l);
  for (int g = s0; g < s1; g++) {
    int64_t n = 0;
    dbuf_layout_rank_pieces(l, g, NULL, 0, &n);
    dbuf_piece_t *pc = malloc((size_t)(n > 0 ? n : 1) * sizeof *pc);
    if (pc == NULL)
      return;
    dbuf_layout_rank_pieces(l, g, pc, n, &n);
    int64_t base = dbuf_layout_range(l)[g];
    for (int64_t i = 0; i < n; i++) {
      int64_t a = base + pc[i].offset, b = a + pc[i].nelems;
      int64_t e0 = pc[i].elem_begin, re = dbuf_tensors_row_elems(ts, pc[i].tensor);
      if (a < start) {
        e0 += start - a;
        a = start;
      }
      if (b > end)
        b = end;
      if (a >= b)
        continue;
      if (rec->first_tensor < 0) {
        rec->first_tensor = pc[i].tensor;
        rec->first_row = e0 / re;
      }
      rec->last_tensor = pc[i].tensor;
      rec->last_row = (e0 + (b - a) - 1) / re;
    }
    free(pc);
  }
}

/* Exit code of an agreed library code in the input phases. */
static int
input_exit(int rc)
{
  switch (rc) {
  case DBUF_EPARSE:
  case DBUF_EINVAL:
  case DBUF_ESHAPE:
  case DBUF_EBLOCK:
  case DBUF_ENRANKS:
  case DBUF_EOWNER:
  case DBUF_EIO:
  case DBUF_EDUP:
  case DBUF_ENOTFOUND:
  case DBUF_EOVERFLOW:
  case DBUF_EMISMATCH:
  case DBUF_ERANGE:
    return CLI_EXIT_USAGE;
  default:
    return CLI_EXIT_FAIL;
  }
}

/* Agree on CLI exit codes: the largest wins (2 over 1 over 0). */
static int
agree_exit(dbuf_comm_t *ctx, int code)
{
  int g = 0;
  if (dbuf_comm_agree(ctx, -code, &g) != 0)
    return CLI_EXIT_FAIL;
  return -g;
}

/* Rank 0, --layout-file with a broken layout: every problem on stdout and
 * in the --report JSON (the exit code stays 1 on every rank). */
static void
report_problems(const run_opts_t *o, int size, const cli_problems_t *probs)
{
  run_summary_t s = {.nranks = size, .problems = probs->n, .message = probs->line[0],
                     .problem_lines = probs->line, .nproblem_lines = probs->n};
  run_report_problems_text(stdout, o->layout_file, &s);
  fflush(stdout);
  if (o->report != NULL) {
    char *json = run_report_problems_json(o->layout_file, &s);
    if (json == NULL)
      cli_err("%s: out of memory writing the report", o->report);
    else
      cli_write_output(o->report, json, strlen(json));
    free(json);
  }
}

/*
 * Every option that shapes the run must be the same on every rank (a rank
 * with another --dp would read past the layout's ranges, another --dtype past
 * the samples rank 0 reads).  Compared as the values in effect, so a default
 * and the same value given explicitly agree; -q only silences progress.
 * With --check-inputs every rank reads its own --shapes or --safetensors and
 * the bytes are compared, so node-local copies may have other names.
 */
static int
agree_options(dbuf_comm_t *ctx, const run_opts_t *o, int size)
{
  char dp[24], block[24], align[24], rpn[24], timeout[24], nodesz[24], *st = NULL;
  char tp[24], pp[24], ep[24], etp[24], stage[24], vdiv[24], ppl[24 * DBUF_PARALLEL_MAX_PP];
  snprintf(dp, sizeof dp, "%d", o->plan.dp_set ? o->plan.params.nranks : size);
  snprintf(block, sizeof block, "%" PRId64, o->plan.params.block_size);
  snprintf(align, sizeof align, "%" PRId64, o->plan.align_bytes);
  snprintf(rpn, sizeof rpn, "%" PRId64, o->plan.ranks_per_node);
  snprintf(timeout, sizeof timeout, "%" PRId64, o->timeout);
  snprintf(nodesz, sizeof nodesz, "%d", (int)o->plan.params.node_size);
  snprintf(tp, sizeof tp, "%" PRId64, o->plan.par.tp);
  snprintf(pp, sizeof pp, "%" PRId64, o->plan.par.pp);
  snprintf(ep, sizeof ep, "%" PRId64, o->plan.par.ep);
  snprintf(etp, sizeof etp, "%" PRId64, dbuf_parallel_expert_tp(&o->plan.par));
  snprintf(stage, sizeof stage, "%" PRId64, o->plan.stage);
  snprintf(vdiv, sizeof vdiv, "%" PRId64, o->plan.par.vocab_divisor);
  ppl[0] = '\0';
  for (int64_t i = 0, at = 0; i < o->plan.par.npp_layers && i < DBUF_PARALLEL_MAX_PP; i++)
    at += snprintf(ppl + at, sizeof ppl - (size_t)at, "%s%" PRId64, i ? "," : "",
                   o->plan.par.pp_layers[i]);
  if (o->plan.nsafetensors > 0) {
    size_t len = 1;
    for (int i = 0; i < o->plan.nsafetensors; i++)
      len += strlen(o->plan.safetensors[i]) + 1;
    if ((st = malloc(len)) != NULL) {
      size_t at = 0;
      for (int i = 0; i < o->plan.nsafetensors; i++)
        at += (size_t)sprintf(st + at, "%s%s", i ? " " : "", o->plan.safetensors[i]);
    }
  }
#define ONOFF(x) ((x) ? "on" : "off")
  const char *by_content = "(compared by content: --check-inputs)";
  const char *const names[] = {
      "option --check-inputs", "option --shapes",        "option --model",
      "option --safetensors",  "option --order",         "option --dp",
      "option --layout",       "option --block-size",    "option --owners",
      "option --dtype",        "option --align-bytes",   "option --ranks-per-node",
      "option --membind",      "option --membind-strict", "option --bind",
      "option --lock",         "option --no-materialize", "option --report",
      "option --timeout",      "option --layout-file",   "option --node-size",
      "option --tp",           "option --pp",            "option --ep",
      "option --expert-tp",    "option --stage",         "option --pp-layers",
      "option --vocab-divisor", "option --naming"};
  const char *const values[] = {
      ONOFF(o->check_inputs),
      o->check_inputs && o->plan.shapes ? by_content : o->plan.shapes,
      o->plan.model,
      o->plan.nsafetensors == 0 ? NULL
      : o->check_inputs         ? by_content
      : st                      ? st
                                : "(out of memory)",
      o->plan.order, dp, dbuf_layout_kind_name(o->plan.params.kind),
      block, o->plan.owners, o->plan.dtype,
      align, rpn, o->membind_text,
      ONOFF(o->strict), o->bind_text, ONOFF(o->lock),
      ONOFF(!o->materialize), o->report, timeout,
      o->layout_file, nodesz, tp, pp, ep, etp, stage, ppl, vdiv,
      o->plan.par.naming == DBUF_NAMING_MEGATRON ? "megatron" : "hf"};
#undef ONOFF
  _Static_assert(sizeof names / sizeof names[0] == sizeof values / sizeof values[0],
                 "one value per option");
  dbuf_diag_t d;
  dbuf_diag_clear(&d);
  int rc = dbuf_comm_check_equal(ctx, (int)(sizeof names / sizeof names[0]), names, values, &d);
  free(st);
  if (rc == 0)
    return CLI_EXIT_OK;
  cli_err("%s", rc == DBUF_EMISMATCH ? d.msg : dbuf_strerror(rc));
  return rc == DBUF_EMISMATCH ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
}

int
cmd_run(int argc, char **argv)
{
  run_opts_t o;
  fault_t fault;
  dbuf_comm_t *ctx = NULL;
  dbuf_comm_nodemap_t map;
  dbuf_tensors_t *t = NULL;
  dbuf_layout_t *planned = NULL, *l = NULL, *stale = NULL;
  dbuf_topo_t *topo = NULL;
  dbuf_seg_t *seg = NULL;
  dbuf_nodes_t *nodes = NULL;
  run_rank_rec_t rec, *recs = NULL;
  run_timings_t tm;
  cli_problems_t probs = {NULL, 0, 0};
  dbuf_diag_t d;
  dbuf_verdict_t vs, vd;
  char what[1024] = "";
  uint64_t digest = 0, in_digest = 0;
  int rank, size, rc, code = CLI_EXIT_OK, root_rc = 0;

  memset(&o, 0, sizeof o);
  memset(&map, 0, sizeof map);
  memset(&tm, 0, sizeof tm);
  memset(&rec, 0, sizeof rec);
  memset(&vs, 0, sizeof vs);
  memset(&vd, 0, sizeof vd);
  cli_plan_opts_init(&o.plan);

  /* --help needs no MPI: print it once (the launcher's rank 0, or alone). */
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      const char *r = getenv("OMPI_COMM_WORLD_RANK");
      if (r == NULL)
        r = getenv("PMIX_RANK");
      if (r == NULL || strcmp(r, "0") == 0)
        run_usage(stdout);
      cli_plan_opts_free(&o.plan);
      return CLI_EXIT_OK;
    }
  }

  /* The watchdog thread may call MPI_Abort while this one waits in MPI. */
  int provided = 0;
  if (MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
    cli_err("MPI_Init failed");
    return CLI_EXIT_FAIL;
  }
  double t_start = MPI_Wtime();
  if ((rc = dbuf_comm_create(MPI_COMM_WORLD, &ctx)) != 0) {
    cli_err("cannot set up MPI: %s", dbuf_strerror(rc));
    MPI_Finalize();
    return CLI_EXIT_FAIL;
  }
  rank = dbuf_comm_rank(ctx);
  size = dbuf_comm_size(ctx);
  cli_quiet = rank != 0;

  /* Options: parsed by every rank, printed by rank 0, agreed -- first that
   * every rank could parse its own, then that they are all the same. */
  code = parse_opts(argc, argv, &o);
  if (code == 0)
    code = parse_faults(getenv("DBUF_FAULT"), &fault);
  if (cli_watchdog_start((double)o.timeout, rank, "start-up") != 0) {
    cli_err("rank %d: cannot start the --timeout watchdog", rank);
    code = CLI_EXIT_FAIL;
  }
  if ((code = agree_exit(ctx, code)) != 0)
    goto done;
  if ((code = agree_exit(ctx, agree_options(ctx, &o, size))) != 0)
    goto done;
  if (!o.plan.dp_set) {
    o.plan.params.nranks = size;
  } else if (o.plan.params.nranks % size != 0) {
    cli_err("--dp %d is not a multiple of the %d ranks", o.plan.params.nranks, size);
    code = CLI_EXIT_USAGE;
  }
  /* The report is written at the end, by rank 0: a folder that is not there
   * must fail now, not after the run. */
  if (code == 0 && rank == 0 && o.report != NULL)
    code = cli_output_check(o.report, "--report");
  if ((code = agree_exit(ctx, code)) != 0)
    goto done;
  if (o.plan.ranks_per_node > 0 && rank == 0)
    fprintf(stderr, "dbuf-shard: --ranks-per-node is ignored under MPI: nodes come from "
                    "the launcher\n");

  if ((rc = dbuf_comm_nodes(ctx, &map, &d)) != 0) {
    cli_err("%s", d.msg);
    code = CLI_EXIT_FAIL;
    goto done;
  }

  /* Plan on rank 0; every other rank reads the input only for --check-inputs. */
  cli_watchdog_phase("planning and broadcast");
  double t0 = MPI_Wtime();
  if (rank == 0) {
    cli_prog = "dbuf-shard: rank 0";
    if (o.layout_file != NULL) {
      snprintf(what, sizeof what, "layout file %s", o.layout_file);
      rc = cli_layout_file_load(o.layout_file, size, &planned, &probs, &in_digest);
    } else {
      rc = cli_load_tensors(&o.plan, &t, &in_digest, what, sizeof what);
      if (rc == 0)
        rc = cli_build_layout(&o.plan, t, what, &planned);
    }
    cli_prog = "dbuf-shard";
    if (rc != 0)
      root_rc = rc == CLI_EXIT_USAGE ? DBUF_EPARSE : probs.n > 0 ? DBUF_ELAYOUT : DBUF_ENOMEM;
  }
  tm.plan = MPI_Wtime() - t0;

  t0 = MPI_Wtime();
  rc = dbuf_comm_bcast_layout(ctx, root_rc, rank == 0 ? cli_err_last() : NULL, planned,
                              o.plan.params.nranks, &l, &digest, &d);
  tm.broadcast = MPI_Wtime() - t0;
  if (rc != 0) {
    if (rank == 0 && root_rc == 0) /* rank 0 printed its own input error already */
      cli_err("%s", d.msg);
    code = rc == DBUF_EPARSE ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
    if (rank == 0 && probs.n > 0)
      report_problems(&o, size, &probs);
    goto done;
  }
  /* What the layout says is used from the layout, the same on every rank. */
  int per = dbuf_layout_nranks(l) / size;

  if (o.check_inputs) {
    cli_watchdog_phase("input check");
    int readable = 1;
    if (rank != 0) {
      dbuf_tensors_t *mine = NULL;
      readable = o.layout_file != NULL
                     ? cli_file_digest(o.layout_file, &in_digest) == 0
                     : cli_load_tensors(&o.plan, &mine, &in_digest, what, sizeof what) == 0;
      dbuf_tensors_destroy(mine);
    }
    if ((rc = dbuf_comm_check_inputs(ctx, in_digest, readable, &d)) != 0) {
      cli_err("%s", d.msg);
      code = input_exit(rc);
      goto done;
    }
  }

  /* Test faults that act on the plan: a stale layout, a shifted start. */
  const dbuf_layout_t *use = l;
  if (fault.stale == rank) {
    if ((stale = stale_layout(l, rank * per)) != NULL)
      use = stale;
  }
  int64_t start = dbuf_layout_range(use)[rank * per];
  int64_t end = dbuf_layout_range(use)[(rank + 1) * per];
  if (fault.shift == rank)
    start += 1;

  /* Validate: the ranks prove whole-row ownership together. */
  cli_watchdog_phase("structure verification");
  t0 = MPI_Wtime();
  rc = dbuf_comm_verify_structure(ctx, use, digest, start, end, &vs);
  tm.validate = MPI_Wtime() - t0;
  if (rc != 0 && rc != DBUF_EVERIFY) {
    cli_err("structure verification failed: %s", dbuf_strerror(rc));
    code = CLI_EXIT_FAIL;
    goto done;
  }
  int materialize = o.materialize && rc == 0;
  int64_t es = o.plan.elem_size, elems = end - start, bytes = 0;

  rec.rank = rank;
  rec.node = map.node_of_rank[rank];
  snprintf(rec.host, sizeof rec.host, "%s", map.host[rank]);
  rec.offset = start;
  rec.end = end;
  rec.elements = elems;
  if (__builtin_mul_overflow(elems > 0 ? elems : 0, es, &bytes))
    bytes = -1;
  rec.bytes = bytes;
  rec.on_node = -1;
  first_last(use, rank * per, (rank + 1) * per, start, end, &rec);

  /* Materialize: topology once, binding, allocation, the pattern, page check. */
  cli_watchdog_phase("materialization");
  t0 = MPI_Wtime();
  if (materialize) {
    if (rank == 0 && !o.quiet)
      fprintf(stderr, "dbuf-shard: materializing %.2f GB on %d ranks\n",
              (double)dbuf_layout_size(l) * (double)es / 1e9, size);
    dbuf_diag_clear(&d);
    rc = dbuf_topo_create(&topo, NULL, &d);
    if (rc == 0) {
      char nodes_l[DBUF_MEM_LIST_LEN];
      int bound = 0;
      if (dbuf_topo_get_cpubind(topo, rec.cpus, sizeof rec.cpus, nodes_l, sizeof nodes_l,
                                &bound, NULL) == 0 &&
          !bound && o.bind != DBUF_BIND_NONE) {
        rc = dbuf_topo_bind(topo, o.bind, map.local_index, &d);
        if (rc == 0)
          dbuf_topo_get_cpubind(topo, rec.cpus, sizeof rec.cpus, nodes_l, sizeof nodes_l,
                                &bound, NULL);
      }
      rec.cpu_bound = bound;
    }
    if (rc == 0 && bytes < 0) {
      rc = DBUF_EOVERFLOW;
      snprintf(d.msg, sizeof d.msg, "%" PRId64 " elements of %" PRId64 " bytes overflow",
               elems, es);
    }
    if (rc == 0)
      rc = dbuf_seg_alloc(topo, bytes, &o.membind,
                          DBUF_SEG_HUGEPAGE | (o.lock ? DBUF_SEG_LOCK : 0u), &seg, &d);
    d.code = rc;
    if ((rc = dbuf_comm_agree_diag(ctx, rc, &d)) != 0) {
      cli_err("%s", d.msg);
      code = rc == DBUF_ERANGE ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
      goto done;
    }
    progress_t pr = {MPI_Wtime(), o.quiet || rank != 0};
    double f0 = MPI_Wtime();
    rc = dbuf_pattern_fill(use, start, end, dbuf_seg_ptr(seg), es, on_progress, &pr);
    rec.fill_s = MPI_Wtime() - f0;
    rec.gbps = rec.fill_s > 0 ? (double)bytes / rec.fill_s / 1e9 : 0;
    if (rc == 0 && fault.corrupt == rank && elems > 0)
      corrupt_one(use, start, end, dbuf_seg_ptr(seg), es);
    if (fault.kill == rank)
      raise(SIGKILL); /* a rank dying mid-run: the launcher must end the job */
    if (rc == 0)
      dbuf_seg_locate(seg, &rec.on_node, NULL, NULL);
    rec.materialized = rc == 0;
    rec.mem_bound = dbuf_seg_is_bound(seg);
    rec.hugepage = dbuf_seg_hugepage(seg);
    rec.locked = dbuf_seg_is_locked(seg);
    snprintf(rec.numa, sizeof rec.numa, "%s", dbuf_seg_nodes(seg));
    snprintf(rec.note, sizeof rec.note, "%s", dbuf_seg_note(seg));
    snprintf(d.msg, sizeof d.msg, "writing the segment: %s", dbuf_strerror(rc));
    if ((rc = dbuf_comm_agree_diag(ctx, rc, &d)) != 0) {
      cli_err("%s", d.msg);
      code = CLI_EXIT_FAIL;
      goto done;
    }
  }
  tm.materialize = MPI_Wtime() - t0;

  /* Verify the data: every element locally, samples on rank 0. */
  cli_watchdog_phase("data verification");
  t0 = MPI_Wtime();
  if (materialize) {
    if (rank == 0 && !o.quiet)
      fprintf(stderr, "dbuf-shard: verifying\n");
    rc = dbuf_comm_verify_data(ctx, use, start, end, dbuf_seg_ptr(seg), es, SAMPLE_ROWS, &vd);
    if (rc != 0 && rc != DBUF_EVERIFY) {
      cli_err("data verification failed: %s", dbuf_strerror(rc));
      code = CLI_EXIT_FAIL;
      goto done;
    }
  }
  tm.verify = MPI_Wtime() - t0;

  /* The verdict (agreed by the verifications), the records, the report. */
  cli_watchdog_phase("report");
  const dbuf_verdict_t *v = vs.code != 0 ? &vs : &vd;
  int pass = vs.code == 0 && vd.code == 0;
  rec.verify_ok = vs.local_ok && (!materialize || vd.local_ok);
  snprintf(rec.verify, sizeof rec.verify, "%s",
           rec.verify_ok ? "ok" : !vs.local_ok ? vs.local_msg : vd.local_msg);
  if (rank == 0 && (recs = calloc((size_t)size, sizeof *recs)) == NULL)
    rc = DBUF_ENOMEM;
  else
    rc = 0;
  if ((rc = dbuf_comm_agree_diag(ctx, rc, NULL)) != 0 ||
      (rc = dbuf_comm_gather(ctx, &rec, sizeof rec, recs)) != 0) {
    cli_err("gathering the report: %s", dbuf_strerror(rc));
    code = CLI_EXIT_FAIL;
    goto done;
  }
  code = pass ? CLI_EXIT_OK : CLI_EXIT_FAIL;
  tm.total = MPI_Wtime() - t_start;
  if (rank == 0) {
    int wrc = 0;
    char src[1100];
    snprintf(src, sizeof src, "%s", what);
    if (dbuf_nodes_create(l, size, map.node_of_rank, map.nnodes, map.node_name, es, &nodes,
                          &d) != 0) {
      cli_err("node report: %s", d.msg);
      wrc = CLI_EXIT_FAIL;
    } else {
      run_summary_t s = {.nranks = size, .per_rank = per, .digest = digest,
                         .materialize = o.materialize, .membind = o.membind_text,
                         .pass = pass, .problems = v->problems, .message = v->msg};
      cli_report_opts(&o.plan, src, &s.report);
      if (run_report_text(stdout, l, &s, recs, nodes, &tm, &d) != 0) {
        cli_err("report: %s", d.msg);
        wrc = CLI_EXIT_FAIL;
      }
      fflush(stdout);
      if (!pass)
        cli_err("%s", v->msg);
      if (o.report != NULL) {
        char *json = run_report_json(l, &s, recs, nodes, &tm);
        if (json == NULL) {
          cli_err("%s: out of memory writing the report", o.report);
          wrc = CLI_EXIT_FAIL;
        } else {
          int w = cli_write_output(o.report, json, strlen(json));
          if (w > wrc)
            wrc = w;
          free(json);
        }
      }
    }
    if (wrc > code)
      code = wrc;
  }
  code = agree_exit(ctx, code);

done:
  cli_problems_free(&probs);
  dbuf_nodes_destroy(nodes);
  free(recs);
  dbuf_seg_free(seg);
  dbuf_topo_destroy(topo);
  dbuf_layout_destroy(stale);
  dbuf_layout_destroy(l);
  dbuf_layout_destroy(planned);
  dbuf_tensors_destroy(t);
  dbuf_comm_nodemap_free(&map);
  cli_plan_opts_free(&o.plan);
  cli_watchdog_phase("shutdown");
  dbuf_comm_destroy(ctx);
  MPI_Finalize();
  cli_watchdog_stop();
  return code;
}
