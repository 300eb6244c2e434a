/*
 * `dbuf-shard run` -- the MPI service, and the default command:
 * `mpirun -np N dbuf-shard [OPTIONS]`.
 *
 * Rank 0 reads the input and plans; the layout is broadcast and re-validated
 * on every rank; the ranks prove together that every row is owned exactly
 * once; each rank allocates its segment in NUMA-bound memory, writes the
 * pattern and checks it; rank 0 prints the report.  Every failure is agreed,
 * so all ranks exit with the same code: 0 PASS, 1 FAIL or runtime error,
 * 2 bad usage or input.  Every rank must run the same build and be given
 * the same options: both are compared first.  Only rank 0 prints, except
 * for a rank's own fatal MPI start-up error and the --timeout watchdog,
 * which ends the job from any rank.
 */
#include "cli.h"
#include "run_report.h"
#include "watchdog.h"

#include "dbuf/comm.h"
#include "dbuf/layout_facts.h"
#include "dbuf/load.h"
#include "dbuf/mem.h"
#include "dbuf/nodes.h"
#include "dbuf/pattern.h"
#include "dbuf/shapes_io.h"
#include "dbuf/version.h"
#include "dbuf/wire.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <mpi.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
  OPT_TIMEOUT,
  OPT_FORCE,
  OPT_LOAD,
  OPT_IO
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
          "                         json' writes it: one layout, or version 2 with one\n"
          "                         buffer per unit and dtype) instead of planning;\n"
          "                         its dp_size must be the rank count; a broken\n"
          "                         layout is FAIL with every problem listed\n"
          "                         (with --load, --safetensors names the weights)\n"
          "Memory:\n"
          "  --membind P            local (default): the NUMA nodes of the CPU binding;\n"
          "                         node:N, interleave, or none (first touch)\n"
          "  --membind-strict       fail when the binding does not really happen\n"
          "  --bind B               core, numa or none (default): bind each rank when\n"
          "                         the launcher did not\n"
          "  --lock                 mlock the segments (RLIMIT_MEMLOCK permitting)\n"
          "  --no-materialize       plan, broadcast and check the structure only\n"
          "  --force                skip the memory pre-flight (every rank's buffers\n"
          "                         against its NUMA node's free memory, MemAvailable\n"
          "                         and its cgroup limit, shared by the node's ranks)\n"
          "Real weights:\n"
          "  --load                 every rank reads its own rows of the --safetensors\n"
          "                         checkpoint (files or INDEX.json) into its segment\n"
          "                         instead of the pattern (converted to --dtype when\n"
          "                         given); then each rank's rows are checksummed\n"
          "                         again from the files by another rank (of another\n"
          "                         node when the ranks span several; at one rank, by\n"
          "                         itself): the load verdict lists every tensor and\n"
          "                         row that differs\n"
          "  --io M                 how --load reads: posix (pread, default), mpiio\n"
          "                         (MPI_File_read_at) or mpiio-coll\n"
          "                         (MPI_File_read_at_all)\n"
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
  int strict, lock, materialize, check_inputs, quiet, force;
  int load;                /* --load: real weights instead of the pattern */
  dbuf_io_t io;            /* --io */
  const char *io_text;     /* NULL: not given (posix) */
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
  else if (p->nsafetensors > 0 && !o->load) /* --load: the weights of its tensors */
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
  else if (p->units != NULL)
    other = "--units";
  else if (p->ndtype_map > 0)
    other = "--dtype-map";
  else if (p->params.node_size != def.node_size)
    other = "--node-size";
  else if (p->align_bytes != 0)
    other = "--align-bytes";
  else if (p->order != NULL)
    other = "--order";
  if (other == NULL)
    return 0;
  cli_err("--layout-file replaces planning: drop %s%s", other[0] == '-' ? "" : "--", other);
  return CLI_EXIT_USAGE;
}

/* --load needs a checkpoint and memory to load into; --io needs --load. */
static int
load_conflict(const run_opts_t *o)
{
  const char *why = NULL;
  if (o->io_text != NULL && !o->load)
    why = "--io applies to --load only";
  else if (o->load && o->plan.nsafetensors == 0)
    why = "--load needs a checkpoint: give --safetensors FILE... or "
          "--safetensors INDEX.json";
  else if (o->load && !o->materialize)
    why = "--load writes the segments: drop --no-materialize";
  if (why == NULL)
    return 0;
  cli_err("%s", why);
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
      {"force", no_argument, NULL, OPT_FORCE},
      {"load", no_argument, NULL, OPT_LOAD},
      {"io", required_argument, NULL, OPT_IO},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  dbuf_diag_t d;
  int c;

  o->membind_text = "local";
  o->bind_text = "none";
  o->materialize = 1;
  o->timeout = CLI_TIMEOUT_DEFAULT;
  o->io = DBUF_IO_POSIX;
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
    case OPT_FORCE:
      o->force = 1;
      break;
    case OPT_LOAD:
      o->load = 1;
      break;
    case OPT_IO:
      if (dbuf_io_parse(optarg, &o->io) != 0) {
        cli_err("--io: '%s' is not posix, mpiio or mpiio-coll", optarg);
        return CLI_EXIT_USAGE;
      }
      o->io_text = optarg;
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
  int rc = layout_file_conflict(o);
  return rc != 0 ? rc : load_conflict(o);
}

/* ------------------------------------------------------------------------ */
/* Fault injection for tests (DBUF_FAULT); the library knows nothing of it.  */

typedef struct {
  int shift, stale, corrupt, kill, flip, linger, rewrite; /* the rank to hit, or -1 */
  int version, wire, options; /* the rank that claims another build, or -1 */
} fault_t;

static const struct {
  const char *name;
  size_t at; /* offsetof(fault_t, the rank) */
} fault_names[] = {
    {"shift", offsetof(fault_t, shift)},     {"stale", offsetof(fault_t, stale)},
    {"corrupt", offsetof(fault_t, corrupt)}, {"kill", offsetof(fault_t, kill)},
    {"flip", offsetof(fault_t, flip)},       {"linger", offsetof(fault_t, linger)},
    {"rewrite", offsetof(fault_t, rewrite)}, {"version", offsetof(fault_t, version)},
    {"wire", offsetof(fault_t, wire)},       {"options", offsetof(fault_t, options)}};
#define NFAULTS (sizeof fault_names / sizeof fault_names[0])

static int *
fault_slot(fault_t *f, size_t i)
{
  return (int *)((char *)f + fault_names[i].at);
}

static int
parse_faults(const char *spec, fault_t *f)
{
  for (size_t i = 0; i < NFAULTS; i++)
    *fault_slot(f, i) = -1;
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
      for (size_t i = 0; i < NFAULTS && slot == NULL; i++)
        if (strcmp(tok, fault_names[i].name) == 0)
          slot = fault_slot(f, i);
    }
    if (slot == NULL || colon[1] == '\0' || *end != '\0' || r < 0 || r > INT_MAX) {
      char list[256] = "";
      for (size_t i = 0, at = 0; i < NFAULTS; i++)
        at += (size_t)snprintf(list + at, sizeof list - at, "%s%s:R", i ? ", " : "",
                               fault_names[i].name);
      cli_err("DBUF_FAULT: '%s' is not a list of %s", spec, list);
      rc = CLI_EXIT_USAGE;
    } else {
      *slot = (int)r;
    }
  }
  free(copy);
  return rc;
}

/* Flip the first byte of the first tensor element at or after `from` (the
 * middle of the segment: corrupt; its start, so the rank's first row: flip). */
static void
corrupt_one(const dbuf_layout_t *l, int64_t start, int64_t end, int64_t from, void *seg,
            int64_t es)
{
  for (int64_t x = from, n = 0; n < end - start; n++, x++) {
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
  double every; /* seconds between lines: 1, or 0 with DBUF_PROGRESS_ALL=1 (tests) */
  /* --load, rank 0: the job's file bytes, of the buffers before this one and
   * of this one (its share is estimated as rank 0's own fraction of it). */
  double t0;
  int64_t job_total, job_before, buf_total;
} progress_t;

/* The whole job's load on rank 0: bytes, GB/s and time left. */
static int
on_load_progress(int64_t done, int64_t total, void *arg)
{
  progress_t *p = arg;
  double now = MPI_Wtime();
  if (p->quiet || now - p->last < p->every || total <= 0 || p->job_total <= 0)
    return 0;
  double est = (double)p->job_before + (double)p->buf_total * (double)done / (double)total;
  double rate = now > p->t0 ? est / (now - p->t0) : 0;
  double left = rate > 0 ? ((double)p->job_total - est) / rate : 0;
  fprintf(stderr, "dbuf-shard: rank 0: %.0f%% (%.0f of %.0f MiB loaded, %.2f GB/s, ETA %.0f s)\n",
          100.0 * est / (double)p->job_total, est / MIB, (double)p->job_total / MIB, rate / 1e9,
          left);
  p->last = now;
  return 0;
}

static int
on_progress(int64_t done, int64_t total, void *arg)
{
  progress_t *p = arg;
  double now = MPI_Wtime();
  if (!p->quiet && now - p->last >= p->every && done < total) {
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

/* A list of option values joined by sep (malloc'd; NULL for none or out of
 * memory). */
static char *
join_values(const char *const *v, int n, const char *sep)
{
  size_t len = 1;
  for (int i = 0; i < n; i++)
    len += strlen(v[i]) + strlen(sep);
  char *out = n > 0 ? malloc(len) : NULL;
  if (out != NULL) {
    size_t at = 0;
    for (int i = 0; i < n; i++)
      at += (size_t)sprintf(out + at, "%s%s", i ? sep : "", v[i]);
  }
  return out;
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
  *st = join_values(p->safetensors, p->nsafetensors, " ");
}

/* The options agree_options() compares, in the order it gives their
 * values; the last one only a rank hit by DBUF_FAULT=options:R compares, as
 * a build with a longer list would. */
static const char *const option_names[] = {
    "option --check-inputs", "option --shapes",        "option --model",
    "option --safetensors",  "option --order",         "option --dp",
    "option --layout",       "option --block-size",    "option --owners",
    "option --dtype",        "option --align-bytes",   "option --ranks-per-node",
    "option --membind",      "option --membind-strict", "option --bind",
    "option --lock",         "option --no-materialize", "option --report",
    "option --timeout",      "option --layout-file",   "option --node-size",
    "option --tp",           "option --pp",            "option --ep",
    "option --expert-tp",    "option --stage",         "option --pp-layers",
    "option --vocab-divisor", "option --naming", "option --units",
    "option --dtype-map",    "option --force",         "option --load",
    "option --io",           "option --fault-extra"};
#define NOPTIONS ((int)(sizeof option_names / sizeof option_names[0]) - 1)

/* The options this rank compares: NOPTIONS, one more on the rank that
 * DBUF_FAULT=options:R hits. */
static int
options_compared(const fault_t *f, int rank)
{
  return NOPTIONS + (f->options == rank);
}

/* The option schema: a hash of the names of the n options compared, so
 * that builds whose lists differ are told apart before the options are
 * compared (dbuf_comm_check_equal() refuses vectors of different lengths
 * with no word of why).  Computed from the list itself: no number to bump. */
static uint32_t
options_schema(int n)
{
  uint64_t h = 0;
  for (int i = 0; i < n; i++) /* the NUL too: "ab", "c" is not "a", "bc" */
    h = dbuf_hash64(option_names[i], strlen(option_names[i]) + 1, h);
  return (uint32_t)(h ^ h >> 32);
}

/*
 * Every option that shapes the run must be the same on every rank (a rank
 * with another --dp would read past the layout's ranges, another --dtype past
 * the samples rank 0 reads).  Compared as the values in effect, so a default
 * and the same value given explicitly agree; -q only silences progress.
 * With --check-inputs every rank reads its own --shapes or --safetensors and
 * the bytes are compared, so node-local copies may have other names.
 * n: options_compared().
 */
static int
agree_options(dbuf_comm_t *ctx, const run_opts_t *o, int size, int n)
{
  opt_text_t x;
  char *st = NULL, *dm = join_values(o->plan.dtype_map, o->plan.ndtype_map, ",");
  const char *dp = x.v[0], *block = x.v[1], *align = x.v[2], *rpn = x.v[3], *timeout = x.v[4],
             *nodesz = x.v[5], *tp = x.v[6], *pp = x.v[7], *ep = x.v[8], *etp = x.v[9],
             *stage = x.v[10], *vdiv = x.v[11], *ppl = x.ppl;
  option_text(o, size, &x, &st);
#define ONOFF(x) ((x) ? "on" : "off")
  const char *by_content = "(compared by content: --check-inputs)";
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
      o->plan.par.naming == DBUF_NAMING_MEGATRON ? "megatron" : "hf",
      o->plan.units, o->plan.ndtype_map == 0 ? NULL : dm ? dm : "(out of memory)",
      ONOFF(o->force), ONOFF(o->load), dbuf_io_name(o->io), "on"};
#undef ONOFF
  _Static_assert(sizeof option_names / sizeof option_names[0] == sizeof values / sizeof values[0],
                 "one value per option");
  dbuf_diag_t d;
  dbuf_diag_clear(&d);
  int rc = dbuf_comm_check_equal(ctx, n, option_names, values, &d);
  free(st);
  free(dm);
  if (rc == 0)
    return CLI_EXIT_OK;
  cli_err("%s", rc == DBUF_EMISMATCH ? d.msg : dbuf_strerror(rc));
  return cli_exit_code(rc);
}


/* ------------------------------------------------------------------------ */
/* The run, one function per phase.  Each returns a CLI exit code that every
 * rank agrees on, so a failing phase ends every rank the same way.          */

/*
 * One buffer of the plan on this rank: the unit of the per-buffer work.
 * Everything a phase does to a buffer reads or writes only its record, so
 * another producer of the segment's bytes (loading real weights) plugs in
 * where fill_buffer() writes the pattern.
 */
typedef struct run_buf {
  const char *unit;           /* borrowed from the plan */
  dbuf_dtype_t dtype;
  int64_t elem_size;          /* bytes per element of dtype */
  const dbuf_layout_t *l;     /* the broadcast layout (borrowed from the plan) */
  dbuf_layout_t *stale;       /* a test fault's stale copy, or NULL */
  const dbuf_layout_t *use;   /* l, or stale */
  uint64_t digest;            /* dbuf_wire_digest(l): the buffer's identity */
  int64_t start, end, bytes;  /* this rank's range [start, end) and its bytes */
  dbuf_seg_t *seg;            /* this rank's segment, NULL until allocated */
  dbuf_verdict_t vs, vd;      /* structure and data verdicts (agreed) */
  double fill_s;              /* seconds writing the segment */
  dbuf_comm_load_stats_t ls;  /* --load: the load's figures (agreed totals) */
  dbuf_load_verdict_t lv;     /* --load: the checkpoint proof (agreed) */
  int64_t file_bytes;         /* --load, rank 0: the file bytes of the whole
                                 buffer (0 when its read plan fails) */
  char name[160];             /* "UNIT/DTYPE", for messages */
} run_buf_t;

typedef struct run {
  run_opts_t o;
  fault_t fault;
  dbuf_comm_t *ctx;
  dbuf_comm_nodemap_t map;
  int rank, size, per;        /* per: segments per rank */
  int can_report;             /* options agreed, --report checked */
  cli_out_t *report_out;      /* rank 0: --report's stream, open from the check on */
  int launched;               /* started by mpirun, srun, ... */
  int root_failed;            /* rank 0 could not read or plan */
  dbuf_tensors_t *t;
  dbuf_plan_t *planned, *plan; /* rank 0's plan while it plans; the shared one */
  run_buf_t *buf;             /* [nbuf] in plan order */
  int64_t nbuf;
  int64_t fault_buf;          /* the buffer the shift, stale and corrupt faults hit */
  int64_t bytes;              /* this rank's bytes over every buffer, -1 overflow */
  int materialize;
  dbuf_topo_t *topo;
  dbuf_st_t *st;              /* --load: the checkpoint, opened by every rank */
  int64_t load_files;         /* --load, rank 0: the files some rank reads */
  run_rank_rec_t rec;
  run_timings_t tm;
  cli_problems_t probs;       /* rank 0: every problem of a broken --layout-file */
  dbuf_verdict_t vs, vd;      /* the first failing buffer's verdicts, problems summed */
  char what[1024];            /* the input, for the report */
  uint64_t digest, in_digest; /* one buffer: its layout digest; else the plan's */
  double t_start;
  const char *phase;          /* the watchdog's phase, for a stopped run's report */
} run_t;

static void
set_phase(run_t *r, const char *phase)
{
  r->phase = phase;
  cli_watchdog_phase(phase);
}

/* Rank 0: the --report JSON, into the stream the check opened or the file.
 * Returns CLI_EXIT_*, the error printed. */
static int
put_report(run_t *r, const char *json)
{
  cli_out_t *o = r->report_out;
  r->report_out = NULL;
  int code = o != NULL ? CLI_EXIT_OK : cli_out_open("--report", r->o.report, &o);
  if (code != CLI_EXIT_OK)
    return code;
  cli_out_write(o, json, strlen(json));
  return cli_out_close(o, 1);
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
    put_report(r, json);
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

/* This process's rank as its launcher set it (read before MPI_Init), or 0. */
static int
launcher_rank(void)
{
  const char *names[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    const char *v = getenv(names[i]);
    char *end;
    long r = v != NULL ? strtol(v, &end, 10) : -1;
    if (v != NULL && *v != '\0' && *end == '\0' && r >= 0 && r <= INT_MAX)
      return (int)r;
  }
  return 0;
}

/* The --timeout the options give, looked for before MPI_Init (as
 * "--timeout N" or "--timeout=N"; the options are parsed, and their errors
 * reported, once MPI is up): the watchdog's limit while MPI_Init waits for
 * every rank.  The default when absent or not a valid value. */
static double
early_timeout(int argc, char **argv)
{
  int64_t t = CLI_TIMEOUT_DEFAULT;
  for (int i = 1; i < argc; i++) {
    const char *v = NULL;
    if (strcmp(argv[i], "--") == 0)
      break;
    if (strcmp(argv[i], "--timeout") == 0 && i + 1 < argc)
      v = argv[++i];
    else if (strncmp(argv[i], "--timeout=", 10) == 0)
      v = argv[i] + 10;
    char *end;
    errno = 0;
    long long x = v != NULL ? strtoll(v, &end, 10) : -1;
    if (v != NULL && *v != '\0' && *end == '\0' && errno == 0 && x >= 0 && x <= 7 * 86400)
      t = x;
  }
  return (double)t;
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

/* Every rank runs the same build: the library's version, its message
 * formats and the options this program compares, checked before anything
 * else is exchanged.  DBUF_FAULT=version:R, wire:R and options:R make rank
 * R claim the next patch version, the next wire format, or one more
 * option.  A CLI exit code, the same on every rank. */
static int
agree_build(run_t *r)
{
  dbuf_comm_build_t b;
  dbuf_diag_t d;
  dbuf_diag_clear(&d);
  (void)dbuf_comm_build_init(&b);
  b.schema = options_schema(options_compared(&r->fault, r->rank));
  if (r->fault.version == r->rank)
    snprintf(b.version, sizeof b.version, "%d.%d.%d", DBUF_VERSION_MAJOR, DBUF_VERSION_MINOR,
             DBUF_VERSION_PATCH + 1);
  if (r->fault.wire == r->rank)
    b.wire++;
  int rc = dbuf_comm_check_build(r->ctx, &b, "options", &d);
  if (rc == DBUF_EMISMATCH)
    cli_err("%s; every rank must run the same dbuf-shard", d.msg);
  else if (rc != 0)
    cli_err("%s", d.msg[0] != '\0' ? d.msg : dbuf_strerror(rc));
  return cli_exit_code(rc);
}

/* Options: parsed by every rank, printed by rank 0, agreed -- first that
 * every rank runs the same build, then that every rank could parse its
 * own, then that they are all the same; then --dp against the ranks and
 * the --report folder. */
static int
run_options(run_t *r, int argc, char **argv)
{
  int code = parse_opts(argc, argv, &r->o);
  if (code == 0 && (code = parse_faults(getenv("DBUF_FAULT"), &r->fault)) != 0)
    parse_faults(NULL, &r->fault); /* none acts: the error is agreed below */
  if (cli_watchdog_start((double)r->o.timeout, r->rank, "start-up") != 0) {
    cli_err("rank %d: cannot start the --timeout watchdog", r->rank);
    code = CLI_EXIT_FAIL;
  }
  int built = agree_build(r);
  if (built != 0)
    return built;
  if ((code = agree_exit_said(r->ctx, code)) != 0 ||
      (code = agree_exit(r->ctx, agree_options(r->ctx, &r->o, r->size,
                                               options_compared(&r->fault, r->rank)))) != 0)
    return code;
  note_singleton(r);
  /* The report is written at the end, by rank 0: a folder that is not there,
   * or a node no report can be written to, must fail now, not after the run. */
  if (r->rank == 0 && r->o.report != NULL)
    code = cli_output_check("--report", r->o.report, &r->report_out);
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

/* Rank 0's plan: the plan of the options, or the --layout-file's (one
 * buffer of unit "all" for a version-1 file).  A library code. */
static int
plan_on_root(run_t *r)
{
  int rc;
  if (r->o.layout_file != NULL) {
    snprintf(r->what, sizeof r->what, "layout file %s", r->o.layout_file);
    return cli_layout_file_load(r->o.layout_file, r->size, r->o.plan.dtype_code,
                                r->o.plan.dtype_set, &r->planned, &r->probs, &r->in_digest);
  }
  rc = cli_load_tensors(&r->o.plan, &r->t, &r->in_digest, r->what, sizeof r->what);
  /* The other ranks make room for the plan while it is built: for one
   * buffer, what --units none gives unless the dtypes differ (a hint: the
   * broadcast makes an empty announcement if this did not go out). */
  if (rc == 0 && (r->o.plan.units == NULL || strcmp(r->o.plan.units, "none") == 0))
    (void)dbuf_comm_announce_plan(r->ctx, r->t, r->o.plan.params.kind);
  if (rc == 0)
    rc = cli_build_plan(&r->o.plan, r->t, r->what, &r->planned);
  dbuf_plan_buffer_t b;
  if (rc == 0 && dbuf_plan_nbuffers(r->planned) == 1 &&
      dbuf_plan_buffer(r->planned, 0, &b) == 0)
    cli_warn_layout(r->t, b.layout, r->what);
  return rc;
}

static int
diag_oom(dbuf_diag_t *d)
{
  snprintf(d->msg, sizeof d->msg, "out of memory");
  return d->code = DBUF_ENOMEM;
}

/* Every buffer's record from the broadcast plan, and the run's identity. */
static int
buffers_init(run_t *r, uint64_t plan_digest, dbuf_diag_t *d)
{
  r->nbuf = dbuf_plan_nbuffers(r->plan);
  /* Every buffer's bytes fit (dbuf_plan_add); their sum must too, or the
   * totals of the report and the node table would wrap. */
  dbuf_plan_totals_t tt;
  int trc = dbuf_plan_totals(r->plan, &tt);
  if (trc != 0) {
    snprintf(d->msg, sizeof d->msg, "plan: the bytes of its %" PRId64 " buffers together: %s",
             r->nbuf, dbuf_strerror(trc));
    return d->code = trc;
  }
  if ((r->buf = calloc((size_t)r->nbuf, sizeof *r->buf)) == NULL)
    return diag_oom(d);
  for (int64_t i = 0; i < r->nbuf; i++) {
    run_buf_t *b = &r->buf[i];
    dbuf_plan_buffer_t pb;
    int rc = dbuf_plan_buffer(r->plan, i, &pb);
    if (rc == 0)
      rc = dbuf_wire_digest(pb.layout, &b->digest, d);
    if (rc != 0)
      return rc;
    b->unit = pb.unit;
    b->dtype = pb.dtype;
    b->elem_size = pb.elem_size;
    b->l = b->use = pb.layout;
    snprintf(b->name, sizeof b->name, "%.120s/%s", pb.unit, dbuf_dtype_name(pb.dtype));
  }
  r->digest = r->nbuf == 1 ? r->buf[0].digest : plan_digest;
  r->per = dbuf_plan_nranks(r->plan) / r->size;
  return 0;
}

/* Plan on rank 0 (or read --layout-file), then broadcast: every rank gets
 * the plan or rank 0's error.  A library code all the way. */
static int
run_plan(run_t *r)
{
  int rc = 0;
  dbuf_diag_t d;
  set_phase(r, "planning and broadcast");
  double t0 = MPI_Wtime();
  if (r->rank == 0) {
    cli_prog = "dbuf-shard: rank 0";
    rc = plan_on_root(r);
    cli_prog = "dbuf-shard";
    r->root_failed = rc != 0;
  }
  r->tm.plan = MPI_Wtime() - t0;
  t0 = MPI_Wtime();
  uint64_t plan_digest = 0;
  r->plan = r->planned; /* rank 0 keeps the plan it made; the others receive it */
  r->planned = NULL;
  int brc = dbuf_comm_share_plan(r->ctx, rc, r->rank == 0 ? cli_err_last() : NULL, &r->plan,
                                 r->o.plan.params.nranks, &plan_digest, &d);
  r->tm.broadcast = MPI_Wtime() - t0;
  if (brc != 0 && r->rank == 0) { /* no rank has a shared plan */
    r->planned = r->plan;
    r->plan = NULL;
  }
  if (brc != 0 && !(r->rank == 0 && rc != 0)) /* rank 0 printed its own error */
    cli_err("%s", d.msg);
  if (brc == 0) {
    dbuf_diag_clear(&d);
    brc = dbuf_comm_agree_diag(r->ctx, buffers_init(r, plan_digest, &d), &d);
    if (brc != 0)
      cli_err("%s", d.msg);
  }
  if (brc != 0 && r->rank == 0 && r->probs.n > 0) {
    run_summary_t s = {.nranks = r->size, .problems = r->probs.n,
                       .problem_lines = r->probs.line, .nproblem_lines = r->probs.n};
    run_report_problems_text(stdout, r->o.layout_file, &s);
    (void)cli_stdout_flush(); /* the run stops with brc's code anyway */
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

/* This rank's range in buffer b (after the test faults that act on the
 * plan: a stale layout, a shifted start); 0 or a library code, d filled. */
static int
buffer_range(run_t *r, int64_t i, dbuf_diag_t *d)
{
  run_buf_t *b = &r->buf[i];
  const int one = 1;
  int first_seg = 0, rc = dbuf_layout_local_range(b->l, 1, &r->size, &r->rank, &one, &b->start,
                                                  &b->end, &first_seg, NULL, d);
  int hit = i == r->fault_buf;
  if (rc == 0 && hit && r->fault.stale == r->rank &&
      dbuf_layout_move_cut(b->l, first_seg > 0 ? first_seg : 1, &b->stale) == 0) {
    b->use = b->stale;
    rc = dbuf_layout_local_range(b->use, 1, &r->size, &r->rank, &one, &b->start, &b->end, NULL,
                                 NULL, d);
  }
  if (rc == 0 && hit && r->fault.shift == r->rank)
    b->start += 1;
  if (rc == 0 && __builtin_mul_overflow(b->end > b->start ? b->end - b->start : 0,
                                        b->elem_size, &b->bytes)) {
    snprintf(d->msg, sizeof d->msg, "rank %d: %" PRId64 " elements of %" PRId64
             " bytes overflow 64 bits", r->rank, b->end - b->start, b->elem_size);
    rc = DBUF_EOVERFLOW;
  }
  if (rc == 0 && r->bytes >= 0 && __builtin_add_overflow(r->bytes, b->bytes, &r->bytes))
    r->bytes = -1;
  if (rc != 0 && r->nbuf > 1) {
    char m[DBUF_DIAG_LEN];
    snprintf(m, sizeof m, "%s", d->msg);
    snprintf(d->msg, sizeof d->msg, "buffer %s: %.300s", b->name, m);
  }
  return rc;
}

/* The faults hit the largest buffer (the first of equal ones): in a test
 * its name is known and the rank surely holds rows of it. */
static int64_t
fault_buffer(const run_t *r)
{
  int64_t best = 0;
  for (int64_t i = 1; i < r->nbuf; i++)
    if (dbuf_layout_size(r->buf[i].l) > dbuf_layout_size(r->buf[best].l))
      best = i;
  return best;
}

/* A verdict of buffer b into the run's: the first failing buffer's message
 * (named with its buffer when there are several), problems summed. */
static void
verdict_merge(const run_t *r, dbuf_verdict_t *all, const dbuf_verdict_t *v, const run_buf_t *b)
{
  int64_t problems = all->problems + v->problems;
  if (all->code == 0 && v->code != 0) {
    /* the agreed part only: this rank's own is merged below */
    int local_ok = all->local_ok;
    char local_msg[sizeof all->local_msg];
    memcpy(local_msg, all->local_msg, sizeof local_msg);
    *all = *v;
    all->local_ok = local_ok;
    memcpy(all->local_msg, local_msg, sizeof local_msg);
    if (r->nbuf > 1)
      snprintf(all->msg, sizeof all->msg, "buffer %.150s: %.340s", b->name, v->msg);
  }
  if (all->local_ok && !v->local_ok) {
    all->local_ok = 0;
    if (r->nbuf > 1)
      snprintf(all->local_msg, sizeof all->local_msg, "buffer %.150s: %.340s", b->name,
               v->local_msg);
    else
      snprintf(all->local_msg, sizeof all->local_msg, "%s", v->local_msg);
  }
  all->problems = problems;
}

/* This rank's record: its ranges over every buffer. */
static void
rank_record(run_t *r)
{
  run_rank_rec_t *x = &r->rec;
  x->rank = r->rank;
  x->node = r->map.node_of_rank[r->rank];
  snprintf(x->host, sizeof x->host, "%s", r->map.host[r->rank]);
  x->offset = r->nbuf == 1 ? r->buf[0].start : -1;
  x->end = r->nbuf == 1 ? r->buf[0].end : -1;
  x->elements = 0;
  x->bytes = r->bytes;
  x->on_node = -1;
  x->first_tensor = x->last_tensor = x->first_row = x->last_row = -1;
  x->first_buf = x->last_buf = -1;
  for (int64_t i = 0; i < r->nbuf; i++) {
    const run_buf_t *b = &r->buf[i];
    dbuf_span_rows_t sp = {-1, -1, -1, -1};
    if (b->end > b->start)
      x->elements += b->end - b->start; /* <= bytes, which did not overflow */
    dbuf_layout_span_rows(b->use, b->start, b->end, &sp);
    if (sp.first_tensor >= 0 && x->first_tensor < 0) {
      x->first_tensor = sp.first_tensor;
      x->first_row = sp.first_row;
      x->first_buf = (int32_t)i;
    }
    if (sp.last_tensor >= 0) {
      x->last_tensor = sp.last_tensor;
      x->last_row = sp.last_row;
      x->last_buf = (int32_t)i;
    }
  }
}

/* Every buffer: this rank's range, its record, and the collective proof of
 * whole-row ownership.  A failed proof is a verdict, not an error. */
static int
run_layout(run_t *r)
{
  dbuf_diag_t d;
  int rc = 0;
  dbuf_diag_clear(&d);
  r->fault_buf = fault_buffer(r);
  for (int64_t i = 0; i < r->nbuf && rc == 0; i++)
    rc = buffer_range(r, i, &d);
  if (rc != 0)
    cli_err("rank %d: %s", r->rank, d.msg);
  int code = phase_end(r, cli_exit_code(rc)); /* every rank, before the next collective */
  if (code != 0)
    return code;

  set_phase(r, "structure verification");
  double t0 = MPI_Wtime();
  r->vs.local_ok = 1;
  for (int64_t i = 0; i < r->nbuf && (rc == 0 || rc == DBUF_EVERIFY); i++) {
    run_buf_t *b = &r->buf[i];
    int brc = dbuf_comm_verify_structure(r->ctx, b->use, b->digest, b->start, b->end, &b->vs);
    verdict_merge(r, &r->vs, &b->vs, b);
    if (brc != 0 && (rc == 0 || brc != DBUF_EVERIFY))
      rc = brc;
  }
  r->tm.validate = MPI_Wtime() - t0;
  if (rc != 0 && rc != DBUF_EVERIFY)
    cli_err("structure verification failed: %s", dbuf_strerror(rc));
  r->materialize = r->o.materialize && rc == 0;
  rank_record(r);
  return phase_end(r, rc == DBUF_EVERIFY ? 0 : cli_exit_code(rc));
}

/* The hwloc topology once, and the CPU binding (--bind when the launcher
 * left the rank unbound). */
static int
bind_rank(run_t *r, dbuf_diag_t *d)
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
    snprintf(d->msg, sizeof d->msg, "the bytes of this rank's %" PRId64 " buffers overflow",
             r->nbuf);
    return DBUF_EOVERFLOW;
  }
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Memory pre-flight: before any allocation, every rank's bytes against what
 * it can have, shared by the ranks of its node.                            */

typedef struct {
  int32_t rank, short_of;  /* short_of: it does not fit */
  char line[320];          /* "rank 3 on node1 needs ..., NUMA node 0 has ..." */
} preflight_rec_t;

/* "18.2 GiB" (binary units, one decimal; bytes below 1 KiB). */
static const char *
fmt_gib(char *buf, size_t len, int64_t v)
{
  static const char *const unit[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  double x = (double)v;
  int u = -1;
  while (x >= 1024.0 && u < 4) {
    x /= 1024.0;
    u++;
  }
  if (u < 0)
    snprintf(buf, len, "%" PRId64 " bytes", v);
  else
    snprintf(buf, len, "%.1f %s", x, unit[u]);
  return buf;
}

/* What a rank can have: the free memory of the NUMA nodes it binds to (nodes
 * is their list), MemAvailable and the cgroup room of its host.
 * DBUF_FAKE_MEM_AVAIL=BYTES (tests only) stands for the NUMA nodes' free
 * memory and MemAvailable, without a cgroup limit. */
static int
preflight_figures(run_t *r, char *nodes, size_t nodes_len, dbuf_mem_avail_t *a, dbuf_diag_t *d)
{
  char cpus[64];
  int rc = dbuf_membind_select(r->topo, &r->o.membind, NULL, nodes, nodes_len, NULL, 0, d);
  if (rc == 0 && nodes[0] == '\0') /* first touch: the nodes of the CPUs */
    rc = dbuf_topo_get_cpubind(r->topo, cpus, sizeof cpus, nodes, nodes_len, NULL, d);
  if (rc == 0)
    rc = dbuf_mem_available(r->topo, nodes, NULL, a, d);
  if (rc != 0)
    return rc;
  const char *fake = getenv("DBUF_FAKE_MEM_AVAIL");
  if (fake != NULL) {
    char *end;
    errno = 0;
    long long v = strtoll(fake, &end, 10);
    if (errno != 0 || end == fake || *end != '\0' || v < 0) {
      snprintf(d->msg, sizeof d->msg, "DBUF_FAKE_MEM_AVAIL: '%.64s' is not a byte count", fake);
      return DBUF_EINVAL;
    }
    a->numa_free = a->mem_available = (int64_t)v;
    a->cgroup_room = -1;
  }
  return 0;
}

/* Who shares what: the NUMA figure is shared by the ranks of this host
 * bound to the same NUMA nodes, the host's figures by every rank of the
 * host.  One allgather of (host, nodes, bytes) of every rank, summed here
 * (O(ranks), no rank waits on another's failure: the figures were agreed
 * first).  need[0] and n[0] are the NUMA group's, need[1] and n[1] the
 * host's; a sum past int64 is INT64_MAX (it fits nowhere). */
typedef struct {
  int64_t node, nodes_hash, bytes;
} preflight_who_t;

static int
preflight_share(run_t *r, const char *nodes, int64_t need[2], int n[2])
{
  preflight_who_t me = {r->map.node_of_rank[r->rank],
                        (int64_t)dbuf_hash64(nodes, strlen(nodes), 0), r->bytes};
  preflight_who_t *all = malloc((size_t)r->size * sizeof *all);
  int rc = all == NULL ? DBUF_ENOMEM : 0;
  if (rc == 0 && MPI_Allgather(&me, (int)sizeof me, MPI_BYTE, all, (int)sizeof me, MPI_BYTE,
                               dbuf_comm_mpi(r->ctx)) != MPI_SUCCESS)
    rc = DBUF_EMPI;
  need[0] = need[1] = 0;
  n[0] = n[1] = 0;
  for (int k = 0; rc == 0 && k < r->size; k++) {
    if (all[k].node != me.node)
      continue;
    for (int g = 0; g < 2; g++) {
      if (g == 0 && all[k].nodes_hash != me.nodes_hash)
        continue;
      n[g]++;
      if (__builtin_add_overflow(need[g], all[k].bytes, &need[g]))
        need[g] = INT64_MAX;
    }
  }
  free(all);
  return rc;
}

/* This rank's verdict: short_of when its NUMA group or its host needs more
 * than the figure says; the line names the tightest figure short. */
static void
preflight_verdict(run_t *r, const char *nodes, const dbuf_mem_avail_t *a,
                  const int64_t need[2], const int n[2], preflight_rec_t *p)
{
  char mine[32], group[32], have[32];
  const int64_t fig[3] = {a->numa_free, a->mem_available, a->cgroup_room};
  int what = -1;
  for (int k = 0; k < 3; k++) {
    int g = k == 0 ? 0 : 1;
    if (fig[k] >= 0 && need[g] > fig[k] &&
        (what < 0 || fig[k] / n[g] < fig[what] / n[what == 0 ? 0 : 1]))
      what = k;
  }
  p->rank = r->rank;
  p->short_of = what >= 0;
  if (!p->short_of)
    return;
  int g = what == 0 ? 0 : 1;
  int at = snprintf(p->line, sizeof p->line, "rank %d on %s needs %s, ", r->rank,
                    r->map.host[r->rank], fmt_gib(mine, sizeof mine, r->bytes));
  fmt_gib(have, sizeof have, fig[what]);
  fmt_gib(group, sizeof group, need[g]);
  size_t left = sizeof p->line - (size_t)at;
  const char *s = n[g] == 1 ? "" : "s";
  if (what == 0)
    snprintf(p->line + at, left, "NUMA node%s %s %s %s free for %d rank%s needing %s",
             strpbrk(nodes, ",-") ? "s" : "", nodes, strpbrk(nodes, ",-") ? "have" : "has", have,
             n[g], s, group);
  else if (what == 1)
    snprintf(p->line + at, left, "%s has %s available (MemAvailable) for %d rank%s needing %s",
             r->map.host[r->rank], have, n[g], s, group);
  else
    snprintf(p->line + at, left, "cgroup %.100s has %s left below memory.max for %d rank%s needing %s",
             a->cgroup, have, n[g], s, group);
}

/* Every rank's verdict gathered on rank 0, which prints one line per short
 * rank; agreed: exit 1 on every rank when one does not fit. */
static int
run_preflight(run_t *r)
{
  if (!r->materialize || r->o.force)
    return 0;
  preflight_rec_t mine, *all = NULL;
  dbuf_diag_t d;
  memset(&mine, 0, sizeof mine);
  dbuf_diag_clear(&d);
  char nodes[DBUF_MEM_LIST_LEN];
  dbuf_mem_avail_t a;
  int64_t need[2];
  int n[2];
  int rc = preflight_figures(r, nodes, sizeof nodes, &a, &d);
  if (rc == 0 && r->rank == 0 && (all = calloc((size_t)r->size, sizeof *all)) == NULL)
    rc = diag_oom(&d);
  /* A bad policy (node:99) fails as the allocation would, in its phase. */
  if ((rc = dbuf_comm_agree_diag(r->ctx, rc, &d)) != 0) {
    cli_err("%s", d.msg);
    free(all);
    return phase_end(r, cli_exit_code(rc));
  }
  set_phase(r, "memory pre-flight");
  rc = preflight_share(r, nodes, need, n);
  if (rc != 0)
    snprintf(d.msg, sizeof d.msg, "memory pre-flight: rank %d: %s", r->rank, dbuf_strerror(rc));
  if ((rc = dbuf_comm_agree_diag(r->ctx, rc, &d)) != 0) {
    cli_err("%s", d.msg);
    free(all);
    return phase_end(r, cli_exit_code(rc));
  }
  preflight_verdict(r, nodes, &a, need, n, &mine);
  if ((rc = dbuf_comm_gather(r->ctx, &mine, sizeof mine, all)) != 0) {
    cli_err("memory pre-flight: %s", dbuf_strerror(rc));
    free(all);
    return phase_end(r, cli_exit_code(rc));
  }
  int nshort = 0;
  for (int k = 0; r->rank == 0 && k < r->size; k++) {
    if (!all[k].short_of)
      continue;
    all[k].line[sizeof all[k].line - 1] = '\0';
    if (nshort++ == 0)
      cli_err("memory pre-flight: the buffers do not fit; nothing was allocated "
              "(--force skips this check)");
    fprintf(stderr, "dbuf-shard: %s\n", all[k].line);
  }
  free(all);
  return phase_end(r, nshort > 0 ? CLI_EXIT_FAIL : 0);
}

/* --load, rank 0: each buffer's whole read plan, once, for the progress
 * line (its file bytes) and the report (the files some rank reads: the
 * ranks' ranges cover each buffer).  A plan that fails counts nothing: the
 * load itself then names the problem.  0 or -1 (no memory). */
static int
whole_read_plans(run_t *r)
{
  int64_t nf = dbuf_st_file_count(r->st);
  char *used = calloc((size_t)(nf > 0 ? nf : 1), 1);
  if (used == NULL)
    return -1;
  for (int64_t i = 0; i < r->nbuf; i++) {
    run_buf_t *b = &r->buf[i];
    dbuf_load_plan_t *p = NULL;
    dbuf_load_stats_t st;
    if (dbuf_load_plan_create(b->l, 0, dbuf_layout_size(b->l), b->dtype, r->st, &p, NULL) == 0) {
      if (dbuf_load_plan_stats(p, &st) == 0)
        b->file_bytes = st.bytes;
      for (int64_t f = 0; f < nf; f++)
        used[f] |= (char)dbuf_load_plan_uses_file(p, f);
    }
    dbuf_load_plan_destroy(p);
  }
  r->load_files = 0;
  for (int64_t f = 0; f < nf; f++)
    r->load_files += used[f];
  free(used);
  return 0;
}

/* DBUF_FAULT=rewrite:R: the checkpoint's first data file as if written again
 * once its header was read (its modification time one second later); the
 * agreements before the first read order this before every rank's open. */
static void
rewrite_first_file(const run_t *r)
{
  const char *path = dbuf_st_file_path(r->st, 0);
  struct stat sb;
  if (path != NULL && stat(path, &sb) == 0) {
    struct timespec ts[2] = {sb.st_atim, sb.st_mtim};
    ts[1].tv_sec += 1;
    (void)utimensat(AT_FDCWD, path, ts, 0);
  }
}

/* --load, before any buffer is read: every rank makes the read plan of its
 * rows of every buffer, as dbuf_comm_load() will, so that what the plan
 * refuses (a dtype with no conversion rule, a tensor the checkpoint lacks)
 * stops the run with the load's own message before the first byte is read,
 * not after the buffers before it.  Collective; 0 or the agreed code. */
static int
check_read_plans(run_t *r, dbuf_diag_t *d)
{
  int rc = 0;
  for (int64_t i = 0; i < r->nbuf && rc == 0; i++) {
    const run_buf_t *b = &r->buf[i];
    dbuf_load_plan_t *p = NULL;
    dbuf_diag_clear(d);
    rc = dbuf_load_plan_create(b->use, b->start, b->end, b->dtype, r->st, &p, d);
    dbuf_load_plan_destroy(p);
    if ((rc = dbuf_comm_agree_diag(r->ctx, rc, d)) != 0 && r->nbuf > 1) {
      char m[DBUF_DIAG_LEN];
      snprintf(m, sizeof m, "%s", d->msg);
      snprintf(d->msg, sizeof d->msg, "buffer %s: %.300s", b->name, m);
    }
  }
  return rc;
}

/* --load: every rank opens the checkpoint itself (its headers: the data is
 * read per buffer), agreed, the ranks must see the same headers, and every
 * buffer's read plan must hold (check_read_plans). */
static int
run_open_checkpoint(run_t *r)
{
  if (!r->o.load || !r->materialize)
    return 0;
  set_phase(r, "opening the checkpoint");
  dbuf_diag_t d;
  dbuf_diag_clear(&d);
  int rc = dbuf_st_open(r->o.plan.safetensors, r->o.plan.nsafetensors, NULL, 0, &r->st, &d);
  if ((rc = dbuf_comm_agree_diag(r->ctx, rc, &d)) == 0 &&
      (rc = dbuf_comm_check_inputs(r->ctx, dbuf_st_digest(r->st), 1, &d)) != 0) {
    char m[DBUF_DIAG_LEN];
    snprintf(m, sizeof m, "%s", d.msg);
    snprintf(d.msg, sizeof d.msg, "checkpoint %.150s: %.300s", r->o.plan.safetensors[0], m);
  }
  if (rc == 0)
    rc = check_read_plans(r, &d);
  if (rc == 0 && r->fault.rewrite == r->rank)
    rewrite_first_file(r);
  if (rc != 0)
    cli_err("%s", d.msg);
  return phase_end(r, cli_exit_code(rc));
}

/* Write the pattern, or with --load the checkpoint's rows (collective, its
 * errors agreed into d), into buffer b's segment; the corrupt, flip and
 * kill faults act here.  Returns 0 or a library code. */
static int
fill_buffer(run_t *r, int64_t i, progress_t *pr, dbuf_diag_t *d)
{
  run_buf_t *b = &r->buf[i];
  double f0 = MPI_Wtime();
  int rc;
  if (r->o.load) {
    rc = dbuf_comm_load(r->ctx, b->use, b->start, b->end, b->dtype, r->st, dbuf_seg_ptr(b->seg),
                        b->bytes, r->o.io, on_load_progress, pr, &b->ls, d);
    pr->job_before += pr->buf_total;
  } else {
    rc = dbuf_pattern_fill(b->use, b->start, b->end, dbuf_seg_ptr(b->seg), b->elem_size,
                           on_progress, pr);
    snprintf(d->msg, sizeof d->msg, "writing the segment: %s", dbuf_strerror(rc));
  }
  b->fill_s = MPI_Wtime() - f0;
  int hit = rc == 0 && i == r->fault_buf && b->end > b->start;
  if (hit && r->fault.corrupt == r->rank)
    corrupt_one(b->use, b->start, b->end, b->start + (b->end - b->start) / 2,
                dbuf_seg_ptr(b->seg), b->elem_size);
  if (hit && r->fault.flip == r->rank)
    corrupt_one(b->use, b->start, b->end, b->start, dbuf_seg_ptr(b->seg), b->elem_size);
  if (i == r->fault_buf && r->fault.kill == r->rank)
    raise(SIGKILL); /* a rank dying mid-run: the launcher must end the job */
  return rc;
}

/* The record of this rank's segments: bound only if every one is, the
 * first one's nodes and note, the least fraction of pages on node. */
static void
segment_record(run_t *r)
{
  run_rank_rec_t *x = &r->rec;
  double fill = 0;
  x->materialized = 1;
  x->mem_bound = x->locked = 1;
  x->hugepage = 0;
  for (int64_t i = 0; i < r->nbuf; i++) {
    const run_buf_t *b = &r->buf[i];
    double on = -1;
    fill += b->fill_s;
    if (b->bytes > 0 && dbuf_seg_locate(b->seg, &on, NULL, NULL) == 0 && on >= 0 &&
        (x->on_node < 0 || on < x->on_node))
      x->on_node = on;
    x->mem_bound &= dbuf_seg_is_bound(b->seg) != 0;
    x->locked &= dbuf_seg_is_locked(b->seg) != 0;
    x->hugepage |= dbuf_seg_hugepage(b->seg) != 0;
    if (i == 0)
      snprintf(x->numa, sizeof x->numa, "%s", dbuf_seg_nodes(b->seg));
    if (x->note[0] == '\0')
      snprintf(x->note, sizeof x->note, "%s", dbuf_seg_note(b->seg));
  }
  x->fill_s = fill;
  x->gbps = fill > 0 ? (double)r->bytes / fill / 1e9 : 0;
  for (int64_t i = 0; r->o.load && i < r->nbuf; i++) {
    const dbuf_load_stats_t *ls = &r->buf[i].ls.local;
    if (__builtin_add_overflow(x->load_bytes, ls->bytes, &x->load_bytes))
      x->load_bytes = -1;
    x->load_s += ls->seconds;
  }
  x->load_gbps = x->load_s > 0 && x->load_bytes > 0 ? (double)x->load_bytes / x->load_s / 1e9 : 0;
}

static int
run_materialize(run_t *r)
{
  set_phase(r, "materialization");
  double t0 = MPI_Wtime();
  if (!r->materialize)
    return 0;
  dbuf_diag_t d;
  dbuf_diag_clear(&d);
  d.code = bind_rank(r, &d);
  int rc = dbuf_comm_agree_diag(r->ctx, d.code, &d);
  if (rc != 0) {
    cli_err("%s", d.msg);
    return phase_end(r, cli_exit_code(rc));
  }
  if ((rc = run_preflight(r)) != 0)
    return rc;
  set_phase(r, "materialization");
  if (r->rank == 0 && !r->o.quiet) {
    dbuf_plan_totals_t tot;
    double gib = dbuf_plan_totals(r->plan, &tot) == 0 ? (double)tot.buffer_bytes / GIB : 0;
    if (r->o.load)
      fprintf(stderr,
              "dbuf-shard: loading %.2f GiB from %" PRId64 " file%s on %d rank%s (io %s)\n", gib,
              dbuf_st_file_count(r->st), dbuf_st_file_count(r->st) == 1 ? "" : "s", r->size,
              r->size == 1 ? "" : "s", dbuf_io_name(r->o.io));
    else if (r->nbuf == 1)
      fprintf(stderr, "dbuf-shard: materializing %.2f GiB on %d ranks\n", gib, r->size);
    else
      fprintf(stderr, "dbuf-shard: materializing %.2f GiB in %" PRId64 " buffers on %d ranks\n",
              gib, r->nbuf, r->size);
  }
  const unsigned flags = DBUF_SEG_HUGEPAGE | (r->o.lock ? DBUF_SEG_LOCK : 0u);
  for (int64_t i = 0; i < r->nbuf && d.code == 0; i++) {
    if ((d.code = dbuf_seg_alloc(r->topo, r->buf[i].bytes, &r->o.membind, flags, &r->buf[i].seg,
                                 &d)) != 0 && r->nbuf > 1) {
      char m[DBUF_DIAG_LEN];
      snprintf(m, sizeof m, "%s", d.msg);
      snprintf(d.msg, sizeof d.msg, "buffer %s: %.300s", r->buf[i].name, m);
    }
  }
  rc = dbuf_comm_agree_diag(r->ctx, d.code, &d);
  if (rc == 0) {
    const char *all = getenv("DBUF_PROGRESS_ALL");
    progress_t pr = {MPI_Wtime(), r->o.quiet || r->rank != 0,
                     all != NULL && strcmp(all, "1") == 0 ? 0.0 : 1.0, MPI_Wtime(), 0, 0, 0};
    if (r->o.load && r->rank == 0 && whole_read_plans(r) != 0)
      pr.quiet = 1; /* no memory for the estimate: no progress line */
    for (int64_t i = 0; r->o.load && !pr.quiet && i < r->nbuf; i++)
      if (__builtin_add_overflow(pr.job_total, r->buf[i].file_bytes, &pr.job_total))
        pr.job_total = 0; /* no estimate */
    for (int64_t i = 0; i < r->nbuf && rc == 0; i++) {
      pr.buf_total = r->buf[i].file_bytes;
      dbuf_diag_clear(&d);
      rc = fill_buffer(r, i, &pr, &d);
      if (rc != 0 && r->o.load && r->nbuf > 1) {
        char m[DBUF_DIAG_LEN];
        snprintf(m, sizeof m, "%s", d.msg);
        snprintf(d.msg, sizeof d.msg, "buffer %s: %.300s", r->buf[i].name, m);
      }
    }
    if (!r->o.load) /* the load agreed on its own errors */
      rc = dbuf_comm_agree_diag(r->ctx, rc, &d);
  }
  if (rc != 0) {
    cli_err("%s", d.msg);
    return phase_end(r, cli_exit_code(rc));
  }
  segment_record(r);
  r->tm.materialize = MPI_Wtime() - t0;
  return 0;
}

/* A load verdict as the run's data verdict of its buffer: the first listed
 * mismatch is the message; a rank that holds a listed row failed locally. */
static void
load_verdict(const run_t *r, const dbuf_load_verdict_t *lv, dbuf_verdict_t *vd)
{
  memset(vd, 0, sizeof *vd);
  vd->code = lv->code;
  vd->rank = -1;
  vd->tensor = vd->row = -1;
  vd->problems = lv->problems;
  vd->local_ok = 1;
  if (lv->code == 0)
    return;
  if (lv->nlisted > 0) {
    snprintf(vd->msg, sizeof vd->msg, "%s", lv->listed[0].msg);
    vd->rank = lv->listed[0].rank;
    vd->tensor = lv->listed[0].tensor;
    vd->row = lv->listed[0].row;
  } else {
    snprintf(vd->msg, sizeof vd->msg, "%s", lv->msg);
  }
  for (int64_t k = 0; k < lv->nlisted && vd->local_ok; k++)
    if (lv->listed[k].rank == r->rank) {
      vd->local_ok = 0;
      snprintf(vd->local_msg, sizeof vd->local_msg, "%s", lv->listed[k].msg);
    }
}

/* One buffer's data: the pattern, every element locally and samples on rank
 * 0; or, with --load, its rows against the checkpoint. */
static int
verify_buffer(run_t *r, run_buf_t *b)
{
  if (!r->o.load)
    return dbuf_comm_verify_data(r->ctx, b->use, b->start, b->end, dbuf_seg_ptr(b->seg),
                                 b->elem_size, SAMPLE_ROWS, &b->vd);
  int rc = dbuf_comm_verify_load(r->ctx, b->use, b->start, b->end, b->dtype, r->st,
                                 dbuf_seg_ptr(b->seg), b->bytes, &b->lv);
  load_verdict(r, &b->lv, &b->vd);
  return rc;
}

/* Every buffer's data, buffer by buffer. */
static int
run_verify(run_t *r)
{
  set_phase(r, "data verification");
  double t0 = MPI_Wtime();
  int rc = 0;
  r->vd.local_ok = 1;
  if (r->materialize) {
    if (r->rank == 0 && !r->o.quiet)
      fprintf(stderr, "dbuf-shard: verifying\n");
    for (int64_t i = 0; i < r->nbuf && (rc == 0 || rc == DBUF_EVERIFY); i++) {
      run_buf_t *b = &r->buf[i];
      int brc = verify_buffer(r, b);
      verdict_merge(r, &r->vd, &b->vd, b);
      if (brc != 0 && (rc == 0 || brc != DBUF_EVERIFY))
        rc = brc;
    }
    if (rc != 0 && rc != DBUF_EVERIFY) {
      cli_err("data verification failed: %s", r->o.load ? r->vd.msg : dbuf_strerror(rc));
      return phase_end(r, cli_exit_code(rc));
    }
  }
  r->tm.verify = MPI_Wtime() - t0;
  return 0;
}

/* The report's view of the buffers (rank 0): borrowed from r. */
static run_buffer_sum_t *
buffer_sums(const run_t *r)
{
  run_buffer_sum_t *v = calloc((size_t)r->nbuf, sizeof *v);
  for (int64_t i = 0; v != NULL && i < r->nbuf; i++) {
    const run_buf_t *b = &r->buf[i];
    v[i] = (run_buffer_sum_t){.unit = b->unit, .dtype = dbuf_dtype_name(b->dtype),
                              .elem_size = b->elem_size, .l = b->l, .digest = b->digest,
                              .structure_ok = b->vs.code == 0,
                              .data_ok = r->materialize ? b->vd.code == 0 : -1,
                              .problems = b->vs.problems + (r->materialize ? b->vd.problems : 0),
                              .message = b->vs.code != 0 ? b->vs.msg
                                         : r->materialize && b->vd.code != 0 ? b->vd.msg
                                                                             : ""};
  }
  return v;
}

/* Rank 0: the report for people on stdout, every problem on stderr with
 * their count, and the JSON.  Returns CLI_EXIT_*. */
static int
write_report(run_t *r, const run_rank_rec_t *recs, run_summary_t *s)
{
  dbuf_diag_t d;
  int code = 0;
  run_buffer_sum_t *bs = buffer_sums(r);
  if (bs == NULL) {
    cli_err("report: out of memory");
    return CLI_EXIT_FAIL;
  }
  s->buffers = bs;
  s->nbuffers = r->nbuf;
  for (int64_t i = 0; i < r->nbuf && code == 0; i++) {
    if (dbuf_nodes_create(bs[i].l, r->size, r->map.node_of_rank, r->map.nnodes,
                          r->map.node_name, bs[i].elem_size, &bs[i].nodes, &d) != 0) {
      cli_err("node report: %s", d.msg);
      code = cli_exit_code(d.code);
    }
  }
  if (code == 0 && run_report_text(stdout, s, recs, &r->tm, &d) != 0) {
    cli_err("report: %s", d.msg);
    code = cli_exit_code(d.code);
  }
  /* The code is agreed after this: a failed write ends every rank with 1. */
  int out = cli_stdout_flush();
  if (code == 0 && !s->pass)
    run_report_problems_err(s);
  if (code == 0 && r->o.report != NULL) {
    char *json = run_report_json(s, recs, &r->tm);
    int w = json == NULL ? CLI_EXIT_FAIL : put_report(r, json);
    if (json == NULL)
      cli_err("%s: out of memory writing the report", r->o.report);
    free(json);
    code = w > code ? w : code;
  }
  for (int64_t i = 0; i < r->nbuf; i++)
    dbuf_nodes_destroy(bs[i].nodes);
  free(bs);
  return out > code ? out : code;
}

/* Rank 0, --load: the load over every buffer for the report (the totals of
 * dbuf_comm_load and the verdicts are agreed, so rank 0 has them all).
 * Files: those the buffers' read plans use (a --layout-file may name only
 * some of the checkpoint's tensors).  Returns 0, or -1 out of memory (lines
 * freed by the caller with run_report_lines_free). */
static int
load_summary(const run_t *r, run_load_sum_t *ld)
{
  memset(ld, 0, sizeof *ld);
  ld->io = dbuf_io_name(r->o.io);
  ld->pass = 1;
  ld->lines = calloc((size_t)r->nbuf * DBUF_LOAD_MAX_LISTED + 1, sizeof *ld->lines);
  if (ld->lines == NULL)
    return -1;
  ld->files = r->load_files; /* whole_read_plans() */
  /* Sums of agreed figures, each below a file size or the buffers' bytes. */
  for (int64_t i = 0; i < r->nbuf; i++) {
    const run_buf_t *b = &r->buf[i];
    const dbuf_load_stats_t *t = &b->ls.total;
    ld->tensors += t->tensors;
    ld->rows += t->rows;
    ld->bytes += t->bytes;
    ld->seconds += t->seconds;
    dbuf_convert_stats_add(&ld->convert, &t->convert);
    ld->pass &= b->lv.code == 0;
    ld->problems += b->lv.problems;
    ld->checked_tensors += b->lv.tensors;
    ld->checked_rows += b->lv.rows;
    ld->checked_bytes += b->lv.bytes;
    ld->checked_by = b->lv.checked_by; /* the same for every buffer: one communicator */
    for (int64_t k = 0; k < b->lv.nlisted; k++) {
      char line[DBUF_DIAG_LEN + 200];
      if (r->nbuf > 1)
        snprintf(line, sizeof line, "buffer %s: %s", b->name, b->lv.listed[k].msg);
      else
        snprintf(line, sizeof line, "%s", b->lv.listed[k].msg);
      if ((ld->lines[ld->nlines] = strdup(line)) == NULL)
        return -1;
      ld->nlines++;
    }
  }
  ld->gbps = ld->seconds > 0 ? (double)ld->bytes / ld->seconds / 1e9 : 0;
  return 0;
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
                       .pass = pass, .problems = v->problems, .message = v->msg,
                       .units = r->o.layout_file ? "layout-file"
                                : r->o.plan.units  ? r->o.plan.units
                                                   : "none"};
    char src[1100], **lines = NULL;
    run_load_sum_t ld;
    snprintf(src, sizeof src, "%s", r->what);
    cli_report_opts(&r->o.plan, src, &s.report);
    int w = !pass && run_report_rank_problems(&s, recs, &lines, &s.nproblem_lines) != 0
                ? CLI_EXIT_FAIL
                : CLI_EXIT_OK;
    if (r->o.load && r->materialize) {
      if (load_summary(r, &ld) != 0)
        w = CLI_EXIT_FAIL;
      s.load = &ld;
    }
    if (w != 0)
      cli_err("listing the problems: out of memory");
    s.problem_lines = lines;
    w = w ? w : write_report(r, recs, &s);
    code = w > code ? w : code;
    run_report_lines_free(lines, s.nproblem_lines);
    if (s.load != NULL)
      run_report_lines_free(ld.lines, ld.nlines);
  }
  free(recs);
  return agree_exit(r->ctx, code);
}

static void
run_free(run_t *r)
{
  cli_out_close(r->report_out, 0);
  cli_problems_free(&r->probs);
  for (int64_t i = 0; r->buf != NULL && i < r->nbuf; i++) {
    dbuf_seg_free(r->buf[i].seg);
    dbuf_layout_destroy(r->buf[i].stale);
  }
  free(r->buf);
  dbuf_topo_destroy(r->topo);
  dbuf_st_destroy(r->st);
  dbuf_plan_destroy(r->plan);
  dbuf_plan_destroy(r->planned);
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
  parse_faults(NULL, &r.fault); /* none until the options are read */
  cli_plan_opts_init(&r.o.plan);
  r.launched = launched();
  /* MPI_Init waits for every rank of the job: one given another command
   * (its --help, a serial command) never comes, so the watchdog covers it. */
  const double t_init = early_timeout(argc, argv);
  const int l_rank = launcher_rank();
  if (cli_watchdog_start_init(t_init, l_rank) != 0) {
    cli_err("cannot start the --timeout watchdog");
    cli_plan_opts_free(&r.o.plan);
    return CLI_EXIT_FAIL;
  }
  /* The watchdog thread may call MPI_Abort while this one waits in MPI. */
  int provided = 0;
  if (MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
    cli_err("MPI_Init failed");
    cli_watchdog_stop();
    cli_plan_opts_free(&r.o.plan);
    return cli_exit_code(DBUF_EMPI);
  }
  r.t_start = MPI_Wtime();
  /* MPI is up: from here a timeout may end the job with MPI_Abort (the
   * watchdog runs, or is disabled: this only changes its state). */
  (void)cli_watchdog_start(t_init, l_rank, "start-up");
  if ((rc = dbuf_comm_create(MPI_COMM_WORLD, &r.ctx)) != 0) {
    cli_err("cannot set up MPI: %s", dbuf_strerror(rc));
    cli_watchdog_shutdown();
    cli_plan_opts_free(&r.o.plan);
    MPI_Finalize();
    cli_watchdog_stop();
    return cli_exit_code(rc);
  }
  r.rank = dbuf_comm_rank(r.ctx);
  r.size = dbuf_comm_size(r.ctx);
  cli_quiet = r.rank != 0;

  if ((code = run_options(&r, argc, argv)) == 0 && (code = run_plan(&r)) == 0 &&
      (code = run_check_inputs(&r)) == 0 && (code = run_layout(&r)) == 0 &&
      (code = run_open_checkpoint(&r)) == 0 && (code = run_materialize(&r)) == 0 && (code = run_verify(&r)) == 0)
    code = run_report(&r);

  int linger = code == 0 && r.fault.linger == r.rank ? (int)r.o.timeout + 2 : 0;
  run_free(&r);
  cli_watchdog_shutdown();
  dbuf_comm_destroy(r.ctx);
  MPI_Finalize();
  if (linger > 0) /* DBUF_FAULT=linger:R: a rank slow to end after MPI_Finalize */
    sleep((unsigned)linger);
  cli_watchdog_stop();
  return code;
}
