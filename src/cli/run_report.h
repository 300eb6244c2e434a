/* The report of the MPI run (text on rank 0's stdout, JSON with --report),
 * and the node report, which `plan --ranks-per-node K` prints too: both
 * commands call cli_nodes_print() and cli_nodes_json(). */
#ifndef DBUF_CLI_RUN_REPORT_H
#define DBUF_CLI_RUN_REPORT_H

#include "dbuf/convert.h"
#include "dbuf/layout.h"
#include "dbuf/nodes.h"
#include "dbuf/report.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

/* One rank's record: plain data, gathered on rank 0 as bytes. */
typedef struct run_rank_rec {
  int32_t rank, node;
  int32_t materialized;     /* the segment was allocated and written */
  int32_t cpu_bound;        /* CPU binding narrower than the machine */
  int32_t mem_bound;        /* memory binding really happened (read back) */
  int32_t hugepage, locked;
  int32_t verify_ok;        /* this rank's own checks passed */
  int64_t offset, end;      /* global range [offset, end); -1 with several buffers */
  int64_t elements, bytes;
  int64_t first_tensor, first_row, last_tensor, last_row; /* -1: none */
  int32_t first_buf, last_buf; /* the buffers of first and last, -1: none */
  double on_node;           /* fraction of pages on the intended nodes, -1 unknown */
  double fill_s, gbps;
  int64_t load_bytes;       /* --load: bytes this rank read from the files */
  double load_s, load_gbps; /* --load: its seconds reading, and GB/s */
  char host[256];
  char cpus[64];            /* CPU binding list */
  char numa[64];            /* intended NUMA nodes ("" none) */
  char verify[512];         /* "ok" or this rank's first problem */
  char note[192];           /* why binding is as it is, when not obvious */
} run_rank_rec_t;

typedef struct run_timings {
  double plan, broadcast, validate, materialize, verify, total;
} run_timings_t;

/* One buffer as the report sees it (borrowed from the run). */
typedef struct run_buffer_sum {
  const char *unit, *dtype;   /* unit name, dtype short name */
  int64_t elem_size;
  const dbuf_layout_t *l;
  uint64_t digest;            /* its layout's digest */
  int structure_ok, data_ok;  /* agreed verdicts; data_ok -1: not materialized */
  int64_t problems;           /* found in this buffer, both verifications */
  const char *message;        /* its first problem, or "" */
  dbuf_nodes_t *nodes;        /* its node report */
} run_buffer_sum_t;

/* --load: the load and its proof over every buffer (rank 0). */
typedef struct run_load_sum {
  const char *io;           /* "posix", "mpiio", "mpiio-coll" */
  int64_t files, tensors, rows, bytes; /* read from the checkpoint */
  double seconds, gbps;     /* the slowest rank's, summed over the buffers */
  dbuf_convert_stats_t convert; /* values converted to the buffer dtypes */
  int pass;
  int64_t problems;         /* tensors that differ, ranks with non-zero padding */
  int64_t checked_tensors, checked_rows, checked_bytes; /* by the checking ranks */
  const char *checked_by;   /* who re-read each rank's rows (dbuf_load_verdict_t) */
  char **lines;             /* every named mismatch ("buffer B: " with several) */
  int64_t nlines;
} run_load_sum_t;

typedef struct run_summary {
  dbuf_report_opts_t report; /* source, dtype, elem_size, align_bytes of the plan */
  int nranks, per_rank;     /* MPI ranks; segments per rank */
  uint64_t digest;          /* plan digest (wire checksum) */
  int materialize;          /* 0 with --no-materialize */
  const char *membind;      /* policy text */
  int pass;
  int64_t problems;
  const char *message;      /* the agreed first problem, or "" */
  char *const *problem_lines; /* every problem known on rank 0 */
  int64_t nproblem_lines;
  /* A run stopped before its report (run_report_stopped_json): */
  const char *verdict;      /* "FAIL" (a broken --layout-file) or "ERROR" */
  const char *phase;        /* the phase that failed ("planning and broadcast") */
  int exit_code;            /* the exit status of every rank */
  /* The plan's buffers (run_report_text and _json): */
  const run_buffer_sum_t *buffers;
  int64_t nbuffers;
  const char *units;        /* the --units text ("none") */
  const run_load_sum_t *load; /* --load, or NULL */
} run_summary_t;

/* Version of the report JSON (2: "problems" is the array of problems,
 * "problem_count" their number). */
#define RUN_REPORT_VERSION 2

/* The node report as text (nodes, then tensors crossing node boundaries). */
void cli_nodes_print(FILE *f, const dbuf_layout_t *l, const dbuf_nodes_t *n);

/* {"nodes": [...], "crossing": [...]} (a new reference). */
json_t *cli_nodes_json(const dbuf_layout_t *l, const dbuf_nodes_t *n);

/* The whole report for people; its plan section is the core's summary
 * (dbuf_report_write), as `plan --format summary` prints it.  Returns 0, or
 * the dbuf_report_write() error with d filled and nothing printed. */
int run_report_text(FILE *f, const run_summary_t *s, const run_rank_rec_t *recs,
                    const run_timings_t *t, dbuf_diag_t *d);

/* The whole report as JSON text (malloc'd, ends in a newline), or NULL. */
char *run_report_json(const run_summary_t *s, const run_rank_rec_t *recs,
                      const run_timings_t *t);

/* The report of a run stopped before its end (bad input, a failed phase, a
 * broken --layout-file): verdict, phase, exit code, the reason and every
 * problem line of s; source names the input ("layout_file" key for a
 * --layout-file).  Malloc'd text, or NULL. */
char *run_report_stopped_json(const char *source, int is_layout_file, const run_summary_t *s);

/* A --layout-file run stopped by a broken layout: every problem on f, then
 * the FAIL line. */
void run_report_problems_text(FILE *f, const char *source, const run_summary_t *s);

/* Every problem of a failed verification, one line each on stderr as
 * "dbuf-shard: LINE", then, when there are several, their count. */
void run_report_problems_err(const run_summary_t *s);

/* s->problem_lines of a failed verification: the agreed first problem, then
 * the first problem of every other rank that found one (recs: nranks
 * records).  The lines are malloc'd into *lines (free with
 * run_report_lines_free); returns 0 or -1 when out of memory. */
int run_report_rank_problems(const run_summary_t *s, const run_rank_rec_t *recs, char ***lines,
                             int64_t *n);
void run_report_lines_free(char **lines, int64_t n);

#endif
