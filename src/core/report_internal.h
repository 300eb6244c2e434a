/*
 * Inside the reports.  One-way layers:
 *   report_common.c  the rank walk and number formats (below the writers)
 *   report_text.c, report_csv.c, report_svg.c   the writers
 *   report.c         options, format names, dbuf_report_write (the dispatcher)
 * A writer calls report_common.c and never report.c.
 */
#ifndef DBUF_REPORT_INTERNAL_H
#define DBUF_REPORT_INTERNAL_H

#include "dbuf/report.h"
#include "strbuf.h"

typedef struct dbuf__rep {
  const dbuf_layout_t *l;
  const dbuf_tensors_t *t;
  dbuf_report_opts_t o;
  dbuf_layout_stats_t st;
  int nranks;
  const int64_t *range; /* [nranks + 1] */
  int64_t data_end;     /* end of the last tensor: later holes are "pad" */
  int64_t max_pieces;   /* most pieces on one rank */
  dbuf_piece_t *pc;     /* pieces of the rank last loaded */
  int64_t np, cap;
} dbuf__rep_t;

/* ---- report_common.c */

/* Load the pieces of rank r into rep->pc[0 .. rep->np). */
int dbuf__rep_pieces(dbuf__rep_t *rep, int r);

/* Decimal digits of v >= 0. */
int dbuf__rep_digits(int64_t v);

/* dbuf_report_count() into a buffer of 32 bytes. */
const char *dbuf__rep_group(char buf[32], int64_t v);

/*
 * The one rule for byte counts in the text reports: the exact count, then,
 * from 1 KiB up, its binary-unit form in parentheses (dbuf_report_bytes()).
 * dbuf__rep_unit gives that part alone: "" below 1 KiB, else " (14.96 GiB)"
 * with its leading space; 24 bytes.
 */
const char *dbuf__rep_unit(char buf[24], int64_t v);

/* "120 bytes", "16,060,522,496 bytes (14.96 GiB)"; 64 bytes. */
const char *dbuf__rep_bytes(char buf[64], int64_t v);

/* Short bytes for axes: "0", "512 B", "1.5 KiB", "14.96 GiB"; 24 bytes. */
const char *dbuf__rep_bytes_short(char buf[24], int64_t v);

/* ---- the writers, called by report.c only; each appends to b. */
int dbuf__report_summary(dbuf__rep_t *rep, dbuf__sb_t *b, dbuf_diag_t *diag);
int dbuf__report_table(dbuf__rep_t *rep, dbuf__sb_t *b, dbuf_diag_t *diag);
int dbuf__report_diagram(dbuf__rep_t *rep, dbuf__sb_t *b, dbuf_diag_t *diag);
int dbuf__report_csv(dbuf__rep_t *rep, dbuf__sb_t *b, dbuf_diag_t *diag);
int dbuf__report_svg(dbuf__rep_t *rep, dbuf__sb_t *b, dbuf_diag_t *diag);

#endif /* DBUF_REPORT_INTERNAL_H */
