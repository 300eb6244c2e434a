/*
 * `--layout-file FILE` of the MPI run: rank 0 reads the trainer's own layout
 * (the layout JSON of `plan --format json` and `verify`) instead of
 * planning, and lists every invariant it breaks.
 */
#include "cli.h"

#include "dbuf/layout_json.h"
#include "dbuf/shapes_io.h"
#include "dbuf/wire.h"

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

/* The problems of a plan's validation, each line after label. */
typedef struct {
  cli_problems_t *probs;
  const char *label; /* "buffer UNIT/DTYPE: " or "" */
} collect_t;

/* Append one "[LABEL]KIND: message" line; non-zero stops the validation (no memory). */
static int
on_violation(const dbuf_violation_t *v, void *arg)
{
  collect_t *c = arg;
  cli_problems_t *p = c->probs;
  char buf[DBUF_DIAG_LEN + 32];
  if (p->n == p->cap) {
    int64_t cap = p->cap ? 2 * p->cap : 16;
    char **nl = realloc(p->line, (size_t)cap * sizeof *nl);
    if (nl == NULL)
      return 1;
    p->line = nl;
    p->cap = cap;
  }
  snprintf(buf, sizeof buf, "%s%s: %s", c->label, cli_violation_name(v->kind), v->msg);
  if ((p->line[p->n] = strdup(buf)) == NULL)
    return 1;
  p->n++;
  return 0;
}

/* Validate l (or, with l NULL, what must hold across the buffers of p: a
 * tensor in one of them only), its problems appended to probs after label;
 * 0, or the error (printed) when the validation could not run. */
static int
validate(const char *path, const dbuf_layout_t *l, const dbuf_plan_t *p, const char *label,
         cli_problems_t *probs)
{
  collect_t c = {probs, label};
  int64_t before = probs->n;
  int e = l != NULL ? dbuf_layout_validate(l, on_violation, &c, NULL, NULL)
                    : dbuf_plan_validate(p, on_violation, &c, NULL, NULL);
  if (e == 0 || (e == DBUF_ELAYOUT && probs->n > before))
    return 0;
  /* DBUF_ELAYOUT with no problem listed: on_violation ran out of memory. */
  e = e == DBUF_ELAYOUT ? DBUF_ENOMEM : e;
  cli_err("%s: %s%s", path, label, dbuf_strerror(e));
  return e;
}

/* Problems found: the one-line verdict, DBUF_EVERIFY; else 0. */
static int
problems_verdict(const char *path, const cli_problems_t *probs)
{
  if (probs->n == 0)
    return 0;
  cli_err("%s: FAIL: %lld problem%s, the first: %s", path, (long long)probs->n,
          probs->n == 1 ? "" : "s", probs->line[0]);
  return DBUF_EVERIFY; /* read and checked: it fails the check, like verify */
}

/* The file's one buffer again, as the one buffer (unit "all") of dtype:
 * --dtype forces the dtype of a file that holds a single layout.  The
 * layout is copied through the wire format (the plan owns its own). */
static int
retype_single(const char *path, dbuf_dtype_t dtype, dbuf_plan_t **p)
{
  dbuf_plan_buffer_t b;
  dbuf_layout_t *l = NULL;
  dbuf_plan_t *np = NULL;
  void *msg = NULL;
  int64_t len = 0;
  dbuf_diag_t d;
  dbuf_diag_clear(&d);
  int rc = dbuf_plan_buffer(*p, 0, &b);
  if (rc == 0)
    rc = dbuf_wire_encode(b.layout, &msg, &len, &d);
  if (rc == 0)
    rc = dbuf_wire_decode(msg, len, &l, &d);
  free(msg);
  if (rc == 0 && (rc = dbuf_plan_create(&np)) != 0)
    snprintf(d.msg, sizeof d.msg, "%s", dbuf_strerror(rc));
  if (rc == 0) {
    rc = dbuf_plan_add(np, DBUF_UNIT_ALL, dtype, l, NULL, &d);
    l = NULL; /* the plan's now, added or not */
  }
  if (rc != 0) {
    cli_err("%s: %s", path, d.msg[0] ? d.msg : dbuf_strerror(rc));
    dbuf_layout_destroy(l);
    dbuf_plan_destroy(np);
    return rc;
  }
  dbuf_plan_destroy(*p);
  *p = np;
  return 0;
}

int
cli_layout_file_load(const char *path, int nranks, dbuf_dtype_t dtype, int dtype_set,
                     dbuf_plan_t **out, cli_problems_t *probs, uint64_t *digest)
{
  char *text = NULL, label[DBUF_DIAG_LEN];
  size_t len = 0;
  dbuf_plan_t *p = NULL;
  dbuf_plan_buffer_t b;
  dbuf_diag_t d;
  int rc;

  if ((rc = dbuf_file_read_all(path, &text, &len, &d)) != 0) {
    cli_err("%s", d.msg);
    return rc;
  }
  if (digest != NULL)
    *digest = dbuf_hash64(text, len, 0);
  if ((rc = dbuf_plan_from_json(path, text, len, &p, &d)) != 0) {
    cli_err("%s", d.msg);
    goto out;
  }
  if (dbuf_plan_nranks(p) != nranks) {
    cli_err("%s: dp_size %d does not match the %d ranks of the job (run it with mpirun -np %d)",
            path, dbuf_plan_nranks(p), nranks, dbuf_plan_nranks(p));
    rc = DBUF_ENRANKS;
    goto out;
  }
  int single = cli_plan_is_single(p);
  if (dtype_set && !single) {
    cli_err("%s: --dtype cannot retype a plan of %lld buffers (each buffer keeps the dtype "
            "the file gives it)", path, (long long)dbuf_plan_nbuffers(p));
    rc = DBUF_EINVAL;
    goto out;
  }
  if (dtype_set && dbuf_plan_buffer(p, 0, &b) == 0 && b.dtype != dtype &&
      (rc = retype_single(path, dtype, &p)) != 0)
    goto out;
  for (int64_t k = 0; k < dbuf_plan_nbuffers(p) && rc == 0; k++) {
    dbuf_plan_buffer(p, k, &b);
    snprintf(label, sizeof label, single ? "" : "buffer %s/%s: ", b.unit,
             dbuf_dtype_name(b.dtype));
    rc = validate(path, b.layout, NULL, label, probs);
  }
  if (rc == 0)
    rc = validate(path, NULL, p, "", probs);
  if (rc != 0 || (rc = problems_verdict(path, probs)) != 0)
    goto out;
  *out = p;
  p = NULL;
out:
  dbuf_plan_destroy(p);
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
