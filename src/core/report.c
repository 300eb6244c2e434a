/*
 * Report entry point: options, format names, and the dispatch to the
 * writers.  Layering: report_common.c (the rank walk, number formats) <-
 * the writers (report_text.c, report_csv.c, report_svg.c) <- this file.
 * The writers never call into this file.
 */
#include "core_internal.h"
#include "report_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const format_names[] = {NULL, "summary", "table", "diagram",
                                           "csv", "svg"};

const char *
dbuf_report_format_name(int format)
{
  if (format >= DBUF_REPORT_SUMMARY && format <= DBUF_REPORT_SVG)
    return format_names[format];
  return "unknown";
}

int
dbuf_report_format_parse(const char *name, dbuf_report_format_t *format)
{
  if (name == NULL || format == NULL)
    return DBUF_EINVAL;
  for (int f = DBUF_REPORT_SUMMARY; f <= DBUF_REPORT_SVG; f++) {
    if (strcmp(name, format_names[f]) == 0) {
      *format = (dbuf_report_format_t)f;
      return 0;
    }
  }
  return DBUF_EINVAL;
}

void
dbuf_report_opts_init(dbuf_report_opts_t *opts)
{
  if (opts == NULL)
    return;
  memset(opts, 0, sizeof *opts);
  opts->elem_size = 2;
  opts->dtype = "bf16";
  opts->diagram_max_elems = 32;
  opts->svg_width = 1200;
}

int
dbuf_report_check(dbuf_report_format_t format, int nranks, dbuf_diag_t *diag)
{
  char g1[32], g2[32];
  if (format < DBUF_REPORT_SUMMARY || format > DBUF_REPORT_SVG)
    return dbuf__diag(diag, DBUF_EINVAL, "unknown report format %d", (int)format);
  if ((format == DBUF_REPORT_TABLE || format == DBUF_REPORT_DIAGRAM) &&
      nranks > DBUF_REPORT_MAX_LINES)
    return dbuf__diag(diag, DBUF_ERANGE,
                      "%s: dp %s is over the limit of %s ranks (one line per "
                      "rank); the summary and csv formats have no limit",
                      format_names[format], dbuf__rep_group(g1, nranks),
                      dbuf__rep_group(g2, DBUF_REPORT_MAX_LINES));
  if (format == DBUF_REPORT_SVG && nranks > DBUF_REPORT_SVG_MAX_RANKS)
    return dbuf__diag(diag, DBUF_ERANGE,
                      "svg: dp %s is over the limit of %s ranks; the summary "
                      "and csv formats have no limit",
                      dbuf__rep_group(g1, nranks),
                      dbuf__rep_group(g2, DBUF_REPORT_SVG_MAX_RANKS));
  return 0;
}

/* rep->o from opts (NULL: the defaults), checked. */
static int
rep_opts(dbuf__rep_t *rep, const dbuf_report_opts_t *opts,
         dbuf_report_format_t format, int nranks, dbuf_diag_t *diag)
{
  int rc;
  if (opts != NULL)
    rep->o = *opts;
  else
    dbuf_report_opts_init(&rep->o);
  if (rep->o.dtype == NULL)
    rep->o.dtype = "";
  if (rep->o.elem_size < 1)
    return dbuf__diag(diag, DBUF_EINVAL, "element size %lld is not positive",
                      (long long)rep->o.elem_size);
  if (rep->o.align_bytes < 0)
    return dbuf__diag(diag, DBUF_EINVAL, "alignment %lld is negative",
                      (long long)rep->o.align_bytes);
  if (rep->o.diagram_max_elems < 0)
    return dbuf__diag(diag, DBUF_EINVAL, "diagram limit %lld is negative",
                      (long long)rep->o.diagram_max_elems);
  if ((rc = dbuf_report_check(format, nranks, diag)) != 0)
    return rc;
  if (rep->o.svg_width < 400 || rep->o.svg_width > 20000)
    return dbuf__diag(diag, DBUF_EINVAL,
                      "svg width %d is outside [400, 20000] pixels",
                      rep->o.svg_width);
  return 0;
}

/* The layout's side of rep, with the bounds every writer relies on. */
static int
rep_layout(dbuf__rep_t *rep, const dbuf_layout_t *l, dbuf_diag_t *diag)
{
  int64_t bytes;
  int rc;
  rep->l = l;
  rep->t = dbuf_layout_tensors(l);
  rep->nranks = dbuf_layout_nranks(l);
  rep->range = dbuf_layout_range(l);
  /* A layout read from a file may fail validation and still be reported
   * (verify prints its table): every per-rank figure is bounded by size only
   * when the ranges are ordered inside [0, size]. */
  for (int r = 0; r < rep->nranks; r++) {
    if (rep->range[r] < 0 || rep->range[r] > rep->range[r + 1] ||
        rep->range[r + 1] > dbuf_layout_size(l))
      return dbuf__diag(diag, DBUF_ELAYOUT,
                        "rank %d: segment [%lld, %lld) is not ordered inside "
                        "the buffer [0, %lld)",
                        r, (long long)rep->range[r],
                        (long long)rep->range[r + 1],
                        (long long)dbuf_layout_size(l));
  }
  if ((rc = dbuf_layout_stats(l, &rep->st)) != 0)
    return dbuf__diag(diag, rc, "layout statistics: %s", dbuf_strerror(rc));
  /* Every byte figure is at most size x elem_size (aligned sums are checked
   * where they are formed). */
  if (dbuf__mul(dbuf_layout_size(l), rep->o.elem_size, &bytes) != 0)
    return dbuf__diag(diag, DBUF_EOVERFLOW,
                      "%lld elements of %lld bytes overflow 64 bits",
                      (long long)dbuf_layout_size(l),
                      (long long)rep->o.elem_size);
  /* The tensors may hold more than the buffer in a layout that fails
   * validation: their byte figure is checked on its own. */
  if (dbuf__mul(rep->st.logical, rep->o.elem_size, &bytes) != 0)
    return dbuf__diag(diag, DBUF_EOVERFLOW,
                      "the tensors' %lld elements of %lld bytes overflow 64 bits",
                      (long long)rep->st.logical, (long long)rep->o.elem_size);
  rep->data_end = dbuf_layout_size(l) - rep->st.tail_elems;
  return 0;
}

/* The writer of each format, by dbuf_report_format_t. */
static int (*const writers[])(dbuf__rep_t *, dbuf__sb_t *, dbuf_diag_t *) = {
    NULL,
    dbuf__report_summary,
    dbuf__report_table,
    dbuf__report_diagram,
    dbuf__report_csv,
    dbuf__report_svg,
};
_Static_assert(sizeof writers / sizeof writers[0] == DBUF_REPORT_SVG + 1,
               "one writer per format");

int
dbuf_report_write(const dbuf_layout_t *l, dbuf_report_format_t format,
                  const dbuf_report_opts_t *opts, char **text, size_t *len,
                  dbuf_diag_t *diag)
{
  dbuf__rep_t rep;
  dbuf__sb_t b = DBUF__SB_INIT;
  int rc;

  if (l == NULL || text == NULL || len == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "NULL argument");
  memset(&rep, 0, sizeof rep);
  if ((rc = rep_opts(&rep, opts, format, dbuf_layout_nranks(l), diag)) != 0 ||
      (rc = rep_layout(&rep, l, diag)) != 0)
    return rc;
  /* dbuf_report_check() admitted format: a writer exists. */
  rc = writers[format](&rep, &b, diag);
  free(rep.pc);
  if (rc != 0) {
    dbuf__sb_free(&b);
    return rc;
  }
  if ((rc = dbuf__sb_finish(&b, text, len)) != 0)
    return dbuf__diag(diag, rc, "out of memory writing the %s report",
                      dbuf_report_format_name(format));
  return 0;
}
