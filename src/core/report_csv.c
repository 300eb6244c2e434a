/* CSV report: one line per piece (columns in dbuf/report.h). */
#include "report_internal.h"

#include <string.h>

/* A CSV field: quoted (quotes doubled) only when it needs it. */
static void
field(dbuf__sb_t *b, const char *s)
{
  if (strpbrk(s, ",\"\r\n") == NULL) {
    dbuf__sb_puts(b, s);
    return;
  }
  dbuf__sb_append(b, "\"", 1);
  for (; *s; s++) {
    if (*s == '"')
      dbuf__sb_append(b, "\"", 1);
    dbuf__sb_append(b, s, 1);
  }
  dbuf__sb_append(b, "\"", 1);
}

int
dbuf__report_csv(dbuf__rep_t *rep, dbuf__sb_t *b, dbuf_diag_t *diag)
{
  int rc;
  dbuf__sb_puts(b, "rank,tensor,name,first_row,rows,elements,offset,"
                   "global_offset\n");
  for (int r = 0; r < rep->nranks && !b->failed; r++) {
    if ((rc = dbuf__rep_pieces(rep, r)) != 0)
      return dbuf__diag(diag, rc, "csv: %s", dbuf_strerror(rc));
    for (int64_t k = 0; k < rep->np; k++) {
      const dbuf_piece_t *p = &rep->pc[k];
      dbuf__sb_printf(b, "%d,%lld,", r, (long long)p->tensor);
      field(b, dbuf_tensors_name(rep->t, p->tensor));
      dbuf__sb_printf(b, ",%lld,%lld,%lld,%lld,%lld\n", (long long)p->first_row,
                      (long long)p->nrows, (long long)p->nelems,
                      (long long)p->offset,
                      (long long)(rep->range[r] + p->offset));
    }
  }
  return 0;
}
