/*
 * `--layout-file FILE` of the MPI run: rank 0 reads the trainer's own layout
 * (the layout JSON of `plan --format json` and `verify`) instead of
 * planning, and lists every invariant it breaks.
 */
#include "cli.h"

#include "dbuf/layout_json.h"
#include "dbuf/shapes_io.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void
cli_problems_free(cli_problems_t *p)
{
  if (p == NULL)
    return;
  for (int64_t i = 0; i < p->n; i++)
    free(p->line[i]);
  free(p->line);
  p->line = NULL;
  p->n = p->cap = 0;
}

/* Append one "KIND: message" line; non-zero stops the validation (no memory). */
static int
on_violation(const dbuf_violation_t *v, void *arg)
{
  cli_problems_t *p = arg;
  char buf[DBUF_DIAG_LEN + 32];
  if (p->n == p->cap) {
    int64_t cap = p->cap ? 2 * p->cap : 16;
    char **nl = realloc(p->line, (size_t)cap * sizeof *nl);
    if (nl == NULL)
      return 1;
    p->line = nl;
    p->cap = cap;
  }
  snprintf(buf, sizeof buf, "%s: %s", cli_violation_name(v->kind), v->msg);
  if ((p->line[p->n] = strdup(buf)) == NULL)
    return 1;
  p->n++;
  return 0;
}

int
cli_layout_file_load(const char *path, int nranks, dbuf_layout_t **out, cli_problems_t *probs,
                     uint64_t *digest)
{
  char *text = NULL;
  size_t len = 0;
  dbuf_layout_t *l = NULL;
  dbuf_diag_t d;
  int rc;

  if ((rc = dbuf_file_read_all(path, &text, &len, &d)) != 0) {
    cli_err("%s", d.msg);
    return rc;
  }
  if (digest != NULL)
    *digest = dbuf_hash64(text, len, 0);
  if ((rc = dbuf_layout_from_json(path, text, len, &l, &d)) != 0) {
    cli_err("%s", d.msg);
    goto out;
  }
  if (dbuf_layout_nranks(l) != nranks) {
    cli_err("%s: dp_size %d does not match the %d ranks of the job (run it with mpirun -np %d)",
            path, dbuf_layout_nranks(l), nranks, dbuf_layout_nranks(l));
    rc = DBUF_ENRANKS;
    goto out;
  }
  int e = dbuf_layout_validate(l, on_violation, probs, NULL, &d);
  if (e == DBUF_ELAYOUT && probs->n > 0) {
    cli_err("%s: FAIL: %lld problem%s, the first: %s", path, (long long)probs->n,
            probs->n == 1 ? "" : "s", probs->line[0]);
    rc = DBUF_EVERIFY; /* read and checked: it fails the check, like verify */
    goto out;
  }
  if (e != 0) {
    /* DBUF_ELAYOUT with no problem listed: on_violation ran out of memory. */
    rc = e == DBUF_ELAYOUT ? DBUF_ENOMEM : e;
    cli_err("%s: %s", path, dbuf_strerror(rc));
    goto out;
  }
  *out = l;
  l = NULL;
  rc = 0;
out:
  dbuf_layout_destroy(l);
  free(text);
  return rc;
}

int
cli_file_digest(const char *path, uint64_t *digest)
{
  char *text = NULL;
  size_t len = 0;
  dbuf_diag_t d;
  int rc = dbuf_file_read_all(path, &text, &len, &d);
  if (rc != 0)
    return rc;
  *digest = dbuf_hash64(text, len, 0);
  free(text);
  return 0;
}
