/* The dbuf-shard command: shared declarations of the subcommands. */
#ifndef DBUF_CLI_H
#define DBUF_CLI_H

#include "dbuf/error.h"
#include "dbuf/layout.h"
#include "dbuf/parallel.h"
#include "dbuf/plan.h"
#include "dbuf/report.h"
#include "dbuf/tensors.h"

#include <getopt.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CLI_EXIT_OK 0
#define CLI_EXIT_FAIL 1  /* runtime failure, failed verification */
#define CLI_EXIT_USAGE 2 /* usage or input error */

/* "dbuf-shard: message" on stderr (nothing while cli_quiet is set). */
void cli_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The text of the last cli_err() message, without the program prefix. */
const char *cli_err_last(void);
extern int cli_quiet; /* the MPI run sets it on ranks other than 0 */

/*
 * The one rule from a library code to the exit status, used by every
 * subcommand: 0 for 0; CLI_EXIT_USAGE (2) for a code that says the request
 * or its input is wrong (EINVAL, EOVERFLOW, ESHAPE, EBLOCK, ENRANKS, EOWNER,
 * ERANGE, ELAYOUT, EPARSE, EIO, EFORMAT, EDUP, ENOTFOUND, EMISMATCH,
 * EUNSUPPORTED, EPARALLEL); CLI_EXIT_FAIL (1) for a failure of the run or a
 * failed check (ENOMEM, ECHECKSUM, EVERSION, EMPI, ETOPO, EBIND, EMLOCK,
 * EVERIFY, ENOBUFS, ECANCELED) and for any code outside the table.  A layout
 * that is read whole but breaks its invariants is a failed check: EVERIFY.  The
 * README's "Exit status" table says the same; tests/check_error.c holds it.
 */
int cli_exit_code(int err);

/*
 * getopt_long returned ':' (missing value) or '?' (unknown option) for
 * subcommand cmd, whose options are longopts: print the one-line error,
 * with "did you mean" for a misspelled long option.  Returns CLI_EXIT_USAGE.
 */
int cli_bad_option(const char *cmd, int c, char **argv, const struct option *longopts);

/*
 * "Did you mean": feed the candidates to cli_suggest_add one by one; the
 * closest (a few edits at most, or a word that starts one) are kept, ties
 * up to CLI_SUGGEST_MAX.  O(candidates x 64 x 64).
 */
#define CLI_SUGGEST_MAX 3
typedef struct cli_suggest {
  const char *word; /* the misspelled word, len bytes */
  size_t len;
  int best;         /* distance of cand[], or the most allowed while n is 0 */
  int n;
  const char *cand[CLI_SUGGEST_MAX];
} cli_suggest_t;
void cli_suggest_init(cli_suggest_t *s, const char *word, size_t len);
void cli_suggest_add(cli_suggest_t *s, const char *cand);
/* "; did you mean 'PREFIXa' or 'PREFIXb'?" in buf, or "" when none is close. */
const char *cli_suggest_text(const cli_suggest_t *s, const char *prefix, char *buf, size_t len);

/* Integer option: whole string, no overflow, within [min, max]. */
int cli_parse_i64(const char *opt, const char *s, int64_t min, int64_t max,
                  int64_t *out);

/*
 * Where an output option (opt: "-o", "--report") writes path: stdout for
 * NULL or "-"; a regular file or a new name atomically (a temporary file in
 * the same folder, renamed to path once every byte is written; a symlink
 * there is replaced as rename(2) replaces it); an existing character device
 * or FIFO, or a symlink to one, in place (a FIFO that nobody reads is
 * refused at once, never waited on).  A folder, a block device, a socket is
 * refused, left as it was.  Messages read "OPT PATH: ..." ("<stdout>: ...").
 *
 * cli_write_output() writes data there.  Returns CLI_EXIT_* and prints the
 * error: 2 when path cannot be opened or created, 1 when a write fails (a
 * failed write leaves no file behind).
 */
int cli_write_output(const char *opt, const char *path, const char *data, size_t len);

/*
 * The same output written piece by piece (for documents too large to build
 * in memory): cli_out_open() opens it (a temporary file for a file),
 * cli_out_write() (a dbuf_write_fn) appends, returning 0 or -1 after a
 * failed write, and cli_out_close() renames the file into place when ok is
 * non-zero and every write succeeded, else removes it.  Open and close
 * return CLI_EXIT_* and print the error (close prints nothing when !ok: the
 * caller reported why).  Stdout and a stream get their text as it comes.
 */
typedef struct cli_out cli_out_t;
int cli_out_open(const char *opt, const char *path, cli_out_t **out);
int cli_out_write(void *out, const char *data, size_t len);
int cli_out_close(cli_out_t *out, int ok);

/*
 * Check early that cli_write_output(opt, path, ...) can write path: the
 * same rules, and for a new name or a regular file that the temporary file
 * can be created (it is removed).  A stream is opened now and returned in
 * *held, to be written with cli_out_write() and closed with cli_out_close():
 * a FIFO must have its reader now, and closing it would end the reader's
 * input.  *held is NULL otherwise.  NULL or "-" (stdout) always pass.
 * Returns CLI_EXIT_*.
 */
int cli_output_check(const char *opt, const char *path, cli_out_t **held);

/*
 * Flush stdout: after a failed write (now or earlier) print
 * "<stdout>: write failed: REASON" (without the reason when stdio did not
 * keep it), once however often it is called, and return CLI_EXIT_FAIL;
 * else CLI_EXIT_OK.
 */
int cli_stdout_flush(void);

/* The planning options shared by `plan` and the MPI run. */
typedef struct cli_plan_opts {
  const char *shapes;       /* --shapes FILE */
  const char *model;        /* --model NAME */
  const char **safetensors; /* --safetensors FILE... */
  int nsafetensors;
  const char *order;        /* --order FILE */
  const char *owners;       /* --owners FILE|auto */
  int dp_set;               /* --dp given */
  int64_t ranks_per_node;   /* --ranks-per-node K (0 = not given) */
  const char *dtype;        /* --dtype NAME: the default dtype's short name */
  dbuf_dtype_t dtype_code;  /* the default dtype (bf16 unless --dtype) */
  int64_t elem_size;        /* bytes per element of dtype */
  int dtype_set;            /* --dtype given: it forces every tensor's dtype */
  const char **dtype_map;   /* --dtype-map PATTERN=DTYPE, in the order given */
  int ndtype_map;
  const char *units;        /* --units none|layer|re:REGEX|FILE; NULL: none */
  int64_t align_bytes;      /* --align-bytes N (0 = none) */
  dbuf_layout_params_t params;
  dbuf_parallel_t par;      /* --tp, --pp, --ep, --expert-tp, --vocab-divisor,
                               --pp-layers, --naming (built-in models only) */
  const char *par_opt;      /* the first of those (or --stage) given, or NULL */
  int64_t stage;            /* --stage S; -1: plan every stage, run the largest */
  int state;                /* plan --state: CLI_STATE_* */
} cli_plan_opts_t;

/* Option codes of the shared planning options (>= 256). */
enum {
  CLI_OPT_SHAPES = 256,
  CLI_OPT_MODEL,
  CLI_OPT_SAFETENSORS,
  CLI_OPT_ORDER,
  CLI_OPT_DP,
  CLI_OPT_LAYOUT,
  CLI_OPT_BLOCK,
  CLI_OPT_OWNERS,
  CLI_OPT_DTYPE,
  CLI_OPT_ALIGN,
  CLI_OPT_RPN,
  CLI_OPT_TP,
  CLI_OPT_PP,
  CLI_OPT_EP,
  CLI_OPT_EXPERT_TP,
  CLI_OPT_STAGE,
  CLI_OPT_PP_LAYERS,
  CLI_OPT_VOCAB_DIVISOR,
  CLI_OPT_NAMING,
  CLI_OPT_NODE_SIZE,
  CLI_OPT_UNITS,
  CLI_OPT_DTYPE_MAP,
  CLI_OPT_FIRST_FREE /* subcommands number their own options from here */
};

/* The input options (plan, run, verify, compare). */
#define CLI_INPUT_LONGOPTS                                                     \
  {"shapes", required_argument, NULL, CLI_OPT_SHAPES},                         \
      {"model", required_argument, NULL, CLI_OPT_MODEL},                       \
      {"safetensors", required_argument, NULL, CLI_OPT_SAFETENSORS},           \
      {"order", required_argument, NULL, CLI_OPT_ORDER}

/* The model-parallel options (plan, run, verify). */
#define CLI_PARALLEL_LONGOPTS                                                  \
  {"tp", required_argument, NULL, CLI_OPT_TP},                                 \
      {"pp", required_argument, NULL, CLI_OPT_PP},                             \
      {"ep", required_argument, NULL, CLI_OPT_EP},                             \
      {"expert-tp", required_argument, NULL, CLI_OPT_EXPERT_TP},               \
      {"stage", required_argument, NULL, CLI_OPT_STAGE},                       \
      {"pp-layers", required_argument, NULL, CLI_OPT_PP_LAYERS},               \
      {"vocab-divisor", required_argument, NULL, CLI_OPT_VOCAB_DIVISOR},       \
      {"naming", required_argument, NULL, CLI_OPT_NAMING}

/* The end of a subcommand's option table: -o OUT, --help, the terminator. */
#define CLI_OUTPUT_LONGOPTS                                                    \
  {"output", required_argument, NULL, 'o'}, {"help", no_argument, NULL, 'h'},  \
      {NULL, 0, NULL, 0}

#define CLI_PLAN_LONGOPTS                                                      \
  CLI_INPUT_LONGOPTS, {"dp", required_argument, NULL, CLI_OPT_DP},             \
      {"layout", required_argument, NULL, CLI_OPT_LAYOUT},                     \
      {"block-size", required_argument, NULL, CLI_OPT_BLOCK},                  \
      {"owners", required_argument, NULL, CLI_OPT_OWNERS},                     \
      {"dtype", required_argument, NULL, CLI_OPT_DTYPE},                       \
      {"dtype-map", required_argument, NULL, CLI_OPT_DTYPE_MAP},               \
      {"units", required_argument, NULL, CLI_OPT_UNITS},                       \
      {"align-bytes", required_argument, NULL, CLI_OPT_ALIGN},                 \
      {"ranks-per-node", required_argument, NULL, CLI_OPT_RPN},                \
      CLI_PARALLEL_LONGOPTS,                                                   \
      {"node-size", required_argument, NULL, CLI_OPT_NODE_SIZE}

/*
 * The most ranks (dp) any command plans for: 2^24.  cli_check_dp refuses a
 * larger dp with the reason (printed as "WHAT DP is above ..."); 0 or
 * CLI_EXIT_USAGE.
 */
#define CLI_DP_MAX (1 << 24)
int cli_check_dp(const char *what, int64_t dp);

/* Help text of the shared planning options. */
extern const char cli_plan_help[];

void cli_plan_opts_init(cli_plan_opts_t *o);
void cli_plan_opts_free(cli_plan_opts_t *o);

/*
 * Handle one shared option (c is getopt's code).  Returns 1 if handled,
 * 0 if c is not a planning option, CLI_EXIT_USAGE + 100 on a bad value
 * (the error is printed).
 */
int cli_plan_opt(cli_plan_opts_t *o, int c, const char *arg, char **argv,
                 int argc);
#define CLI_OPT_BAD (CLI_EXIT_USAGE + 100)

/*
 * The option loop of plan and compare: getopt_long (":o:h") over longopts
 * from optind (set optind = 1 and opterr = 0 before the first call), the
 * shared planning options through cli_plan_opt(), -o OUT into *out, --help
 * through usage(stdout), a missing value, an unknown option (cmd names the
 * subcommand) and a stray argument refused with their message.  Returns
 * the next option for the caller's own switch, or CLI_OPTS_END (all read),
 * CLI_OPTS_HELP (help printed: exit 0), CLI_OPTS_BAD (error printed: exit 2).
 */
enum { CLI_OPTS_END = -1, CLI_OPTS_HELP = -2, CLI_OPTS_BAD = -3 };
int cli_next_opt(cli_plan_opts_t *o, const char *cmd, int argc, char **argv,
                 const struct option *longopts, void (*usage)(FILE *), const char **out);

/*
 * Read the tensors named by the options (default: the built-in default
 * model; with the parallel options, its stage o->stage, or the largest
 * stage when -1), set their dtypes (a --dtype-map rule that matches the
 * name, else --dtype when given, else the file's own: safetensors header,
 * shapes column; else none, which planning turns into --dtype's default).
 * digest (may be NULL) hashes the input bytes.  Returns 0 or a DBUF_E* code
 * with the error printed as
 * "dbuf-shard: FILE:LINE: ..." (map it with cli_exit_code).
 */
int cli_load_tensors(const cli_plan_opts_t *o, dbuf_tensors_t **out,
                     uint64_t *digest, char *what, size_t what_len);
/* Stages a plan reports one block each: pp for a built-in model with --pp
 * and no --stage, else 1. */
int64_t cli_plan_stages(const cli_plan_opts_t *o);

/*
 * The plan of the options: units from --units, one buffer per unit and
 * dtype (the tensors' dtypes as cli_load_tensors() left them; tensors
 * without one get --dtype), each built by dbuf_plan_build() with the
 * layout options (--align-bytes per buffer element size).  Returns 0 or a
 * DBUF_E* code with the error printed.
 */
int cli_build_plan(const cli_plan_opts_t *o, const dbuf_tensors_t *t, const char *what,
                   dbuf_plan_t **out);

/* The warnings of a valid layout that is probably not what was meant (dp
 * above the rows, padding above 10%): one stderr line each.  Called for the
 * layout the user asked for, not for the ones built to compare with it. */
void cli_warn_layout(const dbuf_tensors_t *t, const dbuf_layout_t *l, const char *what);
/* cli_warn_layout for every buffer of a plan, each line after "buffer
 * UNIT/DTYPE: " when the plan is not single. */
void cli_warn_plan(const dbuf_plan_t *p, const char *what);
/* One buffer of the unit "all" (--units none, one dtype): the reports and
 * the layout JSON (version 1) of that one layout, as before plans. */
int cli_plan_is_single(const dbuf_plan_t *p);

/* --state of plan: the training state counted beside the parameters. */
enum { CLI_STATE_NONE = 0, CLI_STATE_SGD, CLI_STATE_ADAM };
/* The summary of a plan of several buffers (plan_buffers.c): one line per
 * buffer, then the totals.  Returns CLI_EXIT_*, the error printed. */
int cli_plan_summary(FILE *m, const dbuf_plan_t *p, const cli_plan_opts_t *o,
                     const char *what);
/* csv and svg of a plan of several buffers as one document: csv with
 * "unit,dtype" columns in front, svg one picture per buffer under its
 * heading.  Returns CLI_EXIT_*, the error printed. */
int cli_plan_merged(FILE *m, const dbuf_plan_t *p, dbuf_report_format_t rfmt,
                    const dbuf_report_opts_t *ro);
/* The --state section of the summary: bytes per rank of parameters,
 * gradients, main weights, moments and their total, per buffer and the
 * most any rank holds.  Returns CLI_EXIT_*, the error printed. */
int cli_plan_state(FILE *m, const dbuf_plan_t *p, int state);

/* Report options of the planning options (dtype, element size, alignment)
 * for the tensors described by source (borrowed). */
void cli_report_opts(const cli_plan_opts_t *o, const char *source,
                     dbuf_report_opts_t *ro);

/* Name of a violation kind ("range", "cut", ...), as verify prints it. */
const char *cli_violation_name(int kind);

/* Lines for people, one per problem ("KIND: message"). */
typedef struct cli_problems {
  char **line;
  int64_t n, cap;
} cli_problems_t;
void cli_problems_free(cli_problems_t *p);

/*
 * --layout-file: read a layout JSON file of version 1 (one layout) or 2 (a
 * plan of buffers) whose buffers all have nranks segments, and check every
 * invariant of every buffer.  A version-1 file is one buffer of unit "all"
 * whose dtype is the file's "dtype" (bf16 without one); dtype_set forces it
 * to dtype; with several buffers dtype_set is DBUF_EINVAL.  Returns 0 and
 * *out, or a DBUF_E* code, printed: the reader's (unreadable, not the
 * schema), DBUF_ENRANKS (another dp_size), DBUF_EVERIFY with every
 * violation in probs (the first printed; a problem of a buffer of a plan of
 * several reads "buffer UNIT/DTYPE: KIND: message"), or DBUF_ENOMEM.
 * digest (may be NULL) hashes the file's bytes.
 */
int cli_layout_file_load(const char *path, int nranks, dbuf_dtype_t dtype, int dtype_set,
                         dbuf_plan_t **out, cli_problems_t *probs, uint64_t *digest);
/* The digest of a file's bytes (for --check-inputs); 0 or a DBUF_E* code. */
int cli_file_digest(const char *path, uint64_t *digest);

int cmd_plan(int argc, char **argv);
int cmd_models(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_compare(int argc, char **argv);

extern const char *cli_prog;

#endif /* DBUF_CLI_H */
