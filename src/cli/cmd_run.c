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
#include "dbuf/layout_facts.h"
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
#define MIB 1048576.0  /* progress lines use binary units */
#define GIB 1073741824.0

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
          "                         checked before the run; a run stopped by a bad\n"
          "                         input or a failed phase still writes it (verdict\n"
          "                         ERROR, the phase and the reason)\n"
          "  --timeout SECONDS      end the job (MPI_Abort) when one phase of the run\n"
          "                         lasts longer: a rank that died while the launcher\n"
          "                         keeps the job would leave the others waiting\n"
          "                         (default %d; 0: never)\n"
          "  -q, --quiet            no progress lines on stderr\n"
          "  -h, --help             this help\n"
          "Every option but -q must be the same on every rank: a difference ends every\n"
          "rank with exit 2, naming the option and the ranks.\n"
          "Exit status (the same on every rank): 0 PASS, 1 verification or runtime\n"
          "failure, 2 bad usage or input.  Without a launcher it runs as one rank\n"
          "and says so.\n",
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
    case 'h': /* is_help() saw it before MPI started */
      return CLI_EXIT_USAGE;
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
    fprintf(stderr, "dbuf-shard: rank 0: %.0f%% (%.0f of %.0f MiB)\n",
            100.0 * (double)done / (double)total, (double)done / MIB, (double)total / MIB);
    p->last = now;
  }
  return 0;
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

/* agree_exit() for errors every rank finds on its own (its options, its
 * environment), which only rank 0 prints: when rank 0 passed and another
 * rank did not, rank 0 prints the lowest failing rank's message, so a bad
 * option given to one rank alone never ends the job in silence. */
static int
agree_exit_said(dbuf_comm_t *ctx, int code)
{
  dbuf_diag_t d;
  dbuf_diag_clear(&d);
  if (code != 0)
    snprintf(d.msg, sizeof d.msg, "%s", cli_err_last());
  int g = dbuf_comm_agree_diag(ctx, -code, &d);
  if (g == DBUF_EMPI)
    return CLI_EXIT_FAIL;
  if (g != 0 && code == 0 && dbuf_comm_rank(ctx) == 0)
    fprintf(stderr, "dbuf-shard: %s\n", d.msg);
  return -g;
}

/* The integer options in effect as text (x.v in the order agree_options
 * names them), --pp-layers, and the --safetensors list (*st, malloc'd; NULL
 * without the option or out of memory). */
typedef struct {
  char v[12][24];
  char ppl[24 * DBUF_PARALLEL_MAX_PP];
} opt_text_t;

static void
option_text(const run_opts_t *o, int size, opt_text_t *x, char **st)
{
  const cli_plan_opts_t *p = &o->plan;
  const int64_t n[12] = {p->dp_set ? p->params.nranks : size, p->params.block_size,
                         p->align_bytes, p->ranks_per_node, o->timeout, p->params.node_size,
                         p->par.tp, p->par.pp, p->par.ep, dbuf_parallel_expert_tp(&p->par),
                         p->stage, p->par.vocab_divisor};
  for (int i = 0; i < 12; i++)
    snprintf(x->v[i], sizeof x->v[i], "%" PRId64, n[i]);
  x->ppl[0] = '\0';
  for (int64_t i = 0, at = 0; i < p->par.npp_layers && i < DBUF_PARALLEL_MAX_PP; i++)
    at += snprintf(x->ppl + at, sizeof x->ppl - (size_t)at, "%s%" PRId64, i ? "," : "",
                   p->par.pp_layers[i]);
  *st = NULL;
  if (p->nsafetensors > 0) {
    size_t len = 1;
    for (int i = 0; i < p->nsafetensors; i++)
      len += strlen(p->safetensors[i]) + 1;
    if ((*st = malloc(len)) != NULL) {
      size_t at = 0;
      for (int i = 0; i < p->nsafetensors; i++)
        at += (size_t)sprintf(*st + at, "%s%s", i ? " " : "", p->safetensors[i]);
    }
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
  opt_text_t x;
  char *st = NULL;
  const char *dp = x.v[0], *block = x.v[1], *align = x.v[2], *rpn = x.v[3], *timeout = x.v[4],
             *nodesz = x.v[5], *tp = x.v[6], *pp = x.v[7], *ep = x.v[8], *etp = x.v[9],
             *stage = x.v[10], *vdiv = x.v[11], *ppl = x.ppl;
  option_text(o, size, &x, &st);
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
  return cli_exit_code(rc);
}


/* ------------------------------------------------------------------------ */
/* The run, one function per phase.  Each returns a CLI exit code that every
 * rank agrees on, so a failing phase ends every rank the same way.          */

typedef struct run {
  run_opts_t o;
  fault_t fault;
  dbuf_comm_t *ctx;
  dbuf_comm_nodemap_t map;
  int rank, size, per;        /* per: segments per rank */
  int can_report;             /* options agreed, --report checked */
  int launched;               /* started by mpirun, srun, ... */
  int root_failed;            /* rank 0 could not read or plan */
  dbuf_tensors_t *t;
  dbuf_layout_t *planned, *l, *stale;
  const dbuf_layout_t *use;   /* l, or the stale plan of a fault */
  int64_t start, end, bytes;  /* this rank's range and its size in bytes */
  int materialize;
  dbuf_topo_t *topo;
  dbuf_seg_t *seg;
  run_rank_rec_t rec;
  run_timings_t tm;
  cli_problems_t probs;       /* rank 0: every problem of a broken --layout-file */
  dbuf_verdict_t vs, vd;
  char what[1024];            /* the input, for the report */
  uint64_t digest, in_digest;
  double t_start;
  const char *phase;          /* the watchdog's phase, for a stopped run's report */
} run_t;

static void
set_phase(run_t *r, const char *phase)
{
  r->phase = phase;
  cli_watchdog_phase(phase);
}

/* Rank 0: the --report JSON of a run that stopped before its report (bad
 * input, a failed phase): the verdict, the phase and every known problem. */
static void
report_stopped(run_t *r, int code)
{
  if (r->rank != 0 || r->o.report == NULL || !r->can_report)
    return;
  /* The reason as stderr has it after "dbuf-shard: " (rank 0's own
   * reading or planning error was printed as "rank 0: ..."). */
  char last[DBUF_DIAG_LEN + 16];
  snprintf(last, sizeof last, "%s%s", r->root_failed ? "rank 0: " : "", cli_err_last());
  char *one[1] = {last};
  run_summary_t s = {.nranks = r->size, .per_rank = r->per, .exit_code = code,
                     .verdict = r->probs.n > 0 ? "FAIL" : "ERROR",
                     .phase = r->phase ? r->phase : "start-up", .message = last,
                     .problem_lines = one, .nproblem_lines = last[0] ? 1 : 0};
  if (r->probs.n > 0) {
    s.problem_lines = r->probs.line;
    s.nproblem_lines = r->probs.n;
    s.message = r->probs.line[0];
  }
  s.problems = s.nproblem_lines;
  char *json = r->o.layout_file != NULL ? run_report_stopped_json(r->o.layout_file, 1, &s)
                                         : run_report_stopped_json(r->what, 0, &s);
  if (json == NULL)
    cli_err("%s: out of memory writing the report", r->o.report);
  else
    cli_write_output(r->o.report, json, strlen(json));
  free(json);
}

/* The agreed exit code of a phase; a failure is reported before it ends the run. */
static int
phase_end(run_t *r, int code)
{
  code = agree_exit(r->ctx, code);
  if (code != 0)
    report_stopped(r, code);
  return code;
}

/* Whether a launcher started this process: read before MPI_Init, which
 * sets PMIX_RANK itself for a singleton. */
static int
launched(void)
{
  return getenv("OMPI_COMM_WORLD_SIZE") != NULL || getenv("PMIX_RANK") != NULL ||
         getenv("PMI_RANK") != NULL || getenv("PMI_SIZE") != NULL;
}

/* A bare `dbuf-shard` outside a launcher is one rank: say so, and how to
 * start more, before it runs. */
static void
note_singleton(const run_t *r)
{
  if (r->size != 1 || r->launched || r->o.quiet)
    return;
  fprintf(stderr, "dbuf-shard: running as a single rank (started without mpirun); start more "
                  "with 'mpirun -np 8 dbuf-shard'\n");
}

/* Options: parsed by every rank, printed by rank 0, agreed -- first that
 * every rank could parse its own, then that they are all the same; then
 * --dp against the ranks and the --report folder. */
static int
run_options(run_t *r, int argc, char **argv)
{
  int code = parse_opts(argc, argv, &r->o);
  if (code == 0)
    code = parse_faults(getenv("DBUF_FAULT"), &r->fault);
  if (cli_watchdog_start((double)r->o.timeout, r->rank, "start-up") != 0) {
    cli_err("rank %d: cannot start the --timeout watchdog", r->rank);
    code = CLI_EXIT_FAIL;
  }
  if ((code = agree_exit_said(r->ctx, code)) != 0 ||
      (code = agree_exit(r->ctx, agree_options(r->ctx, &r->o, r->size))) != 0)
    return code;
  note_singleton(r);
  /* The report is written at the end, by rank 0: a folder that is not there
   * must fail now, not after the run. */
  if (r->rank == 0 && r->o.report != NULL)
    code = cli_output_check(r->o.report, "--report");
  if ((code = agree_exit(r->ctx, code)) != 0)
    return code;
  r->can_report = 1; /* from here a stopped run still writes its report */
  if (!r->o.plan.dp_set) {
    r->o.plan.params.nranks = r->size;
  } else if (r->o.plan.params.nranks % r->size != 0) {
    cli_err("--dp %d is not a multiple of the %d ranks", r->o.plan.params.nranks, r->size);
    code = CLI_EXIT_USAGE;
  }
  if ((code = phase_end(r, code)) != 0)
    return code;
  if (r->o.plan.ranks_per_node > 0 && r->rank == 0)
    fprintf(stderr, "dbuf-shard: --ranks-per-node is ignored under MPI: nodes come from "
                    "the launcher\n");
  dbuf_diag_t d;
  int rc = dbuf_comm_nodes(r->ctx, &r->map, &d);
  if (rc != 0)
    cli_err("%s", d.msg);
  return phase_end(r, cli_exit_code(rc));
}

/* Plan on rank 0 (or read --layout-file), then broadcast: every rank gets
 * the layout or rank 0's error.  A library code all the way. */
static int
run_plan(run_t *r)
{
  int rc = 0;
  dbuf_diag_t d;
  set_phase(r, "planning and broadcast");
  double t0 = MPI_Wtime();
  if (r->rank == 0) {
    cli_prog = "dbuf-shard: rank 0";
    if (r->o.layout_file != NULL) {
      snprintf(r->what, sizeof r->what, "layout file %s", r->o.layout_file);
      rc = cli_layout_file_load(r->o.layout_file, r->size, &r->planned, &r->probs,
                                &r->in_digest);
    } else {
      rc = cli_load_tensors(&r->o.plan, &r->t, &r->in_digest, r->what, sizeof r->what);
      if (rc == 0)
        rc = cli_build_layout(&r->o.plan, r->t, r->what, &r->planned);
      if (rc == 0)
        cli_warn_layout(r->t, r->planned, r->what);
    }
    cli_prog = "dbuf-shard";
    r->root_failed = rc != 0;
  }
  r->tm.plan = MPI_Wtime() - t0;
  t0 = MPI_Wtime();
  int brc = dbuf_comm_bcast_layout(r->ctx, rc, r->rank == 0 ? cli_err_last() : NULL,
                                   r->planned, r->o.plan.params.nranks, &r->l, &r->digest, &d);
  r->tm.broadcast = MPI_Wtime() - t0;
  if (brc != 0 && !(r->rank == 0 && rc != 0)) /* rank 0 printed its own error */
    cli_err("%s", d.msg);
  if (brc == 0)
    r->per = dbuf_layout_nranks(r->l) / r->size;
  if (brc != 0 && r->rank == 0 && r->probs.n > 0) {
    run_summary_t s = {.nranks = r->size, .problems = r->probs.n,
                       .problem_lines = r->probs.line, .nproblem_lines = r->probs.n};
    run_report_problems_text(stdout, r->o.layout_file, &s);
    fflush(stdout);
  }
  return phase_end(r, cli_exit_code(brc));
}

/* --check-inputs: every rank reads the input itself; the digests must agree. */
static int
run_check_inputs(run_t *r)
{
  if (!r->o.check_inputs)
    return 0;
  set_phase(r, "input check");
  int readable = 1;
  if (r->rank != 0) {
    dbuf_tensors_t *mine = NULL;
    readable = r->o.layout_file != NULL
                   ? cli_file_digest(r->o.layout_file, &r->in_digest) == 0
                   : cli_load_tensors(&r->o.plan, &mine, &r->in_digest, r->what,
                                      sizeof r->what) == 0;
    dbuf_tensors_destroy(mine);
  }
  dbuf_diag_t d;
  int rc = dbuf_comm_check_inputs(r->ctx, r->in_digest, readable, &d);
  if (rc != 0)
    cli_err("%s", d.msg);
  return phase_end(r, cli_exit_code(rc));
}

/* This rank's range (after the test faults that act on the plan: a stale
 * layout, a shifted start), its record, and the collective proof of
 * whole-row ownership.  A failed proof is a verdict, not an error. */
static int
run_layout(run_t *r)
{
  /* The rank's run of segments and its range, from the library (one mesh
   * axis of r->size shards): the same on the layout and a stale copy. */
  const int one = 1;
  dbuf_diag_t d;
  int first_seg = 0, rc = dbuf_layout_local_range(r->l, 1, &r->size, &r->rank, &one, &r->start,
                                                  &r->end, &first_seg, NULL, &d);
  r->use = r->l;
  if (rc == 0 && r->fault.stale == r->rank &&
      dbuf_layout_move_cut(r->l, first_seg > 0 ? first_seg : 1, &r->stale) == 0) {
    r->use = r->stale;
    rc = dbuf_layout_local_range(r->use, 1, &r->size, &r->rank, &one, &r->start, &r->end, NULL,
                                 NULL, &d);
  }
  if (rc != 0)
    cli_err("rank %d: %s", r->rank, d.msg);
  int code = phase_end(r, cli_exit_code(rc)); /* every rank, before the next collective */
  if (code != 0)
    return code;
  if (r->fault.shift == r->rank)
    r->start += 1;

  set_phase(r, "structure verification");
  double t0 = MPI_Wtime();
  rc = dbuf_comm_verify_structure(r->ctx, r->use, r->digest, r->start, r->end, &r->vs);
  r->tm.validate = MPI_Wtime() - t0;
  if (rc != 0 && rc != DBUF_EVERIFY)
    cli_err("structure verification failed: %s", dbuf_strerror(rc));
  r->materialize = r->o.materialize && rc == 0;

  run_rank_rec_t *x = &r->rec;
  int64_t es = r->o.plan.elem_size, elems = r->end - r->start;
  dbuf_span_rows_t sp = {-1, -1, -1, -1};
  x->rank = r->rank;
  x->node = r->map.node_of_rank[r->rank];
  snprintf(x->host, sizeof x->host, "%s", r->map.host[r->rank]);
  x->offset = r->start;
  x->end = r->end;
  x->elements = elems;
  if (__builtin_mul_overflow(elems > 0 ? elems : 0, es, &r->bytes))
    r->bytes = -1;
  x->bytes = r->bytes;
  x->on_node = -1;
  dbuf_layout_span_rows(r->use, r->start, r->end, &sp);
  x->first_tensor = sp.first_tensor;
  x->first_row = sp.first_row;
  x->last_tensor = sp.last_tensor;
  x->last_row = sp.last_row;
  return phase_end(r, rc == DBUF_EVERIFY ? 0 : cli_exit_code(rc));
}

/* The hwloc topology once, the CPU binding (--bind when the launcher left
 * the rank unbound), then the segment under the memory policy. */
static int
bind_and_allocate(run_t *r, dbuf_diag_t *d)
{
  char nodes[DBUF_MEM_LIST_LEN];
  int bound = 0, rc = dbuf_topo_create(&r->topo, NULL, d);
  if (rc != 0)
    return rc;
  run_rank_rec_t *x = &r->rec;
  if (dbuf_topo_get_cpubind(r->topo, x->cpus, sizeof x->cpus, nodes, sizeof nodes, &bound,
                            NULL) == 0 &&
      !bound && r->o.bind != DBUF_BIND_NONE) {
    if ((rc = dbuf_topo_bind(r->topo, r->o.bind, r->map.local_index, d)) != 0)
      return rc;
    dbuf_topo_get_cpubind(r->topo, x->cpus, sizeof x->cpus, nodes, sizeof nodes, &bound,
                          NULL);
  }
  x->cpu_bound = bound;
  if (r->bytes < 0) {
    snprintf(d->msg, sizeof d->msg, "%" PRId64 " elements of %" PRId64 " bytes overflow",
             r->end - r->start, r->o.plan.elem_size);
    return DBUF_EOVERFLOW;
  }
  return dbuf_seg_alloc(r->topo, r->bytes, &r->o.membind,
                        DBUF_SEG_HUGEPAGE | (r->o.lock ? DBUF_SEG_LOCK : 0u), &r->seg, d);
}

/* Write the pattern into the segment (the corrupt and kill faults act
 * here) and record where its pages are. */
static int
fill_segment(run_t *r)
{
  run_rank_rec_t *x = &r->rec;
  int64_t es = r->o.plan.elem_size;
  progress_t pr = {MPI_Wtime(), r->o.quiet || r->rank != 0};
  double f0 = MPI_Wtime();
  int rc = dbuf_pattern_fill(r->use, r->start, r->end, dbuf_seg_ptr(r->seg), es, on_progress,
                             &pr);
  x->fill_s = MPI_Wtime() - f0;
  x->gbps = x->fill_s > 0 ? (double)r->bytes / x->fill_s / 1e9 : 0;
  if (rc == 0 && r->fault.corrupt == r->rank && r->end > r->start)
    corrupt_one(r->use, r->start, r->end, dbuf_seg_ptr(r->seg), es);
  if (r->fault.kill == r->rank)
    raise(SIGKILL); /* a rank dying mid-run: the launcher must end the job */
  if (rc == 0)
    dbuf_seg_locate(r->seg, &x->on_node, NULL, NULL);
  x->materialized = rc == 0;
  x->mem_bound = dbuf_seg_is_bound(r->seg);
  x->hugepage = dbuf_seg_hugepage(r->seg);
  x->locked = dbuf_seg_is_locked(r->seg);
  snprintf(x->numa, sizeof x->numa, "%s", dbuf_seg_nodes(r->seg));
  snprintf(x->note, sizeof x->note, "%s", dbuf_seg_note(r->seg));
  return rc;
}

static int
run_materialize(run_t *r)
{
  set_phase(r, "materialization");
  double t0 = MPI_Wtime();
  if (r->materialize) {
    dbuf_diag_t d;
    if (r->rank == 0 && !r->o.quiet)
      fprintf(stderr, "dbuf-shard: materializing %.2f GiB on %d ranks\n",
              (double)dbuf_layout_size(r->l) * (double)r->o.plan.elem_size / GIB, r->size);
    dbuf_diag_clear(&d);
    d.code = bind_and_allocate(r, &d);
    int rc = dbuf_comm_agree_diag(r->ctx, d.code, &d);
    if (rc == 0) {
      rc = fill_segment(r);
      snprintf(d.msg, sizeof d.msg, "writing the segment: %s", dbuf_strerror(rc));
      rc = dbuf_comm_agree_diag(r->ctx, rc, &d);
    }
    if (rc != 0) {
      cli_err("%s", d.msg);
      return phase_end(r, cli_exit_code(rc));
    }
  }
  r->tm.materialize = MPI_Wtime() - t0;
  return 0;
}

/* Every element locally, samples on rank 0. */
static int
run_verify(run_t *r)
{
  set_phase(r, "data verification");
  double t0 = MPI_Wtime();
  int rc = 0;
  if (r->materialize) {
    if (r->rank == 0 && !r->o.quiet)
      fprintf(stderr, "dbuf-shard: verifying\n");
    rc = dbuf_comm_verify_data(r->ctx, r->use, r->start, r->end, dbuf_seg_ptr(r->seg),
                               r->o.plan.elem_size, SAMPLE_ROWS, &r->vd);
    if (rc != 0 && rc != DBUF_EVERIFY) {
      cli_err("data verification failed: %s", dbuf_strerror(rc));
      return phase_end(r, cli_exit_code(rc));
    }
  }
  r->tm.verify = MPI_Wtime() - t0;
  return 0;
}

/* Rank 0: the report for people on stdout, every problem on stderr with
 * their count, and the JSON.  Returns CLI_EXIT_*. */
static int
write_report(run_t *r, const run_rank_rec_t *recs, const run_summary_t *s)
{
  dbuf_nodes_t *nodes = NULL;
  dbuf_diag_t d;
  int code = 0;
  if (dbuf_nodes_create(r->l, r->size, r->map.node_of_rank, r->map.nnodes, r->map.node_name,
                        r->o.plan.elem_size, &nodes, &d) != 0) {
    cli_err("node report: %s", d.msg);
    return cli_exit_code(d.code);
  }
  if (run_report_text(stdout, r->l, s, recs, nodes, &r->tm, &d) != 0) {
    cli_err("report: %s", d.msg);
    code = cli_exit_code(d.code);
  }
  fflush(stdout);
  if (!s->pass)
    run_report_problems_err(s);
  if (r->o.report != NULL) {
    char *json = run_report_json(r->l, s, recs, nodes, &r->tm);
    int w = json == NULL ? CLI_EXIT_FAIL : cli_write_output(r->o.report, json, strlen(json));
    if (json == NULL)
      cli_err("%s: out of memory writing the report", r->o.report);
    free(json);
    code = w > code ? w : code;
  }
  dbuf_nodes_destroy(nodes);
  return code;
}

/* The verdict (agreed by the verifications), the records, the report. */
static int
run_report(run_t *r)
{
  set_phase(r, "report");
  const dbuf_verdict_t *v = r->vs.code != 0 ? &r->vs : &r->vd;
  int pass = r->vs.code == 0 && r->vd.code == 0;
  run_rank_rec_t *x = &r->rec, *recs = NULL;
  x->verify_ok = r->vs.local_ok && (!r->materialize || r->vd.local_ok);
  snprintf(x->verify, sizeof x->verify, "%s",
           x->verify_ok ? "ok" : !r->vs.local_ok ? r->vs.local_msg : r->vd.local_msg);
  int rc = r->rank == 0 && (recs = calloc((size_t)r->size, sizeof *recs)) == NULL ? DBUF_ENOMEM
                                                                                  : 0;
  if ((rc = dbuf_comm_agree_diag(r->ctx, rc, NULL)) != 0 ||
      (rc = dbuf_comm_gather(r->ctx, x, sizeof *x, recs)) != 0) {
    cli_err("gathering the report: %s", dbuf_strerror(rc));
    free(recs);
    return phase_end(r, cli_exit_code(rc));
  }
  int code = pass ? CLI_EXIT_OK : CLI_EXIT_FAIL;
  r->tm.total = MPI_Wtime() - r->t_start;
  if (r->rank == 0) {
    run_summary_t s = {.nranks = r->size, .per_rank = r->per, .digest = r->digest,
                       .materialize = r->o.materialize, .membind = r->o.membind_text,
                       .pass = pass, .problems = v->problems, .message = v->msg};
    char src[1100], **lines = NULL;
    snprintf(src, sizeof src, "%s", r->what);
    cli_report_opts(&r->o.plan, src, &s.report);
    int w = !pass && run_report_rank_problems(&s, recs, &lines, &s.nproblem_lines) != 0
                ? CLI_EXIT_FAIL
                : CLI_EXIT_OK;
    if (w != 0)
      cli_err("listing the problems: out of memory");
    s.problem_lines = lines;
    w = w ? w : write_report(r, recs, &s);
    code = w > code ? w : code;
    run_report_lines_free(lines, s.nproblem_lines);
  }
  free(recs);
  return agree_exit(r->ctx, code);
}

static void
run_free(run_t *r)
{
  cli_problems_free(&r->probs);
  dbuf_seg_free(r->seg);
  dbuf_topo_destroy(r->topo);
  dbuf_layout_destroy(r->stale);
  dbuf_layout_destroy(r->l);
  dbuf_layout_destroy(r->planned);
  dbuf_tensors_destroy(r->t);
  dbuf_comm_nodemap_free(&r->map);
  cli_plan_opts_free(&r->o.plan);
}

/* "--help", or what getopt takes for it: a prefix down to "--h", or a
 * cluster of run's flags "-q" and "-h" that holds an h ("-qh"). */
static int
is_help(const char *a)
{
  size_t n = strlen(a);
  if (n >= 3 && n <= 6 && strncmp(a, "--help", n) == 0)
    return 1;
  return a[0] == '-' && a[1] != '-' && a[1] != '\0' && strspn(a + 1, "qh") == n - 1 &&
         strchr(a + 1, 'h') != NULL;
}

/* --help needs no MPI: print it once (the launcher's rank 0, or alone). */
static int
wants_help(int argc, char **argv)
{
  for (int i = 1; i < argc; i++) {
    if (is_help(argv[i])) {
      const char *r = getenv("OMPI_COMM_WORLD_RANK");
      if (r == NULL)
        r = getenv("PMIX_RANK");
      if (r == NULL || strcmp(r, "0") == 0)
        run_usage(stdout);
      return 1;
    }
  }
  return 0;
}

int
cmd_run(int argc, char **argv)
{
  run_t r;
  int rc, code;

  if (wants_help(argc, argv))
    return CLI_EXIT_OK;
  memset(&r, 0, sizeof r);
  cli_plan_opts_init(&r.o.plan);
  r.launched = launched();
  /* The watchdog thread may call MPI_Abort while this one waits in MPI. */
  int provided = 0;
  if (MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
    cli_err("MPI_Init failed");
    cli_plan_opts_free(&r.o.plan);
    return cli_exit_code(DBUF_EMPI);
  }
  r.t_start = MPI_Wtime();
  if ((rc = dbuf_comm_create(MPI_COMM_WORLD, &r.ctx)) != 0) {
    cli_err("cannot set up MPI: %s", dbuf_strerror(rc));
    cli_plan_opts_free(&r.o.plan);
    MPI_Finalize();
    return cli_exit_code(rc);
  }
  r.rank = dbuf_comm_rank(r.ctx);
  r.size = dbuf_comm_size(r.ctx);
  cli_quiet = r.rank != 0;

  if ((code = run_options(&r, argc, argv)) == 0 && (code = run_plan(&r)) == 0 &&
      (code = run_check_inputs(&r)) == 0 && (code = run_layout(&r)) == 0 &&
      (code = run_materialize(&r)) == 0 && (code = run_verify(&r)) == 0)
    code = run_report(&r);

  run_free(&r);
  cli_watchdog_phase("shutdown");
  dbuf_comm_destroy(r.ctx);
  MPI_Finalize();
  cli_watchdog_stop();
  return code;
}
