/* Plans: one buffer per (unit, dtype), each laid out by the builders (dbuf/plan.h). */
#include "dbuf/plan.h"

#include "core_internal.h"
#include "strmap.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct plan_buf {
  char *unit;
  dbuf_dtype_t dtype;
  dbuf_layout_t *layout;
  int64_t *model_ids; /* or NULL */
} plan_buf_t;

struct dbuf_plan {
  plan_buf_t *b;
  int64_t n, cap;
  dbuf__strmap_t keys; /* "DTYPE UNIT" of every buffer: one (unit, dtype) once */
};

int
dbuf_plan_create(dbuf_plan_t **out)
{
  if (out == NULL)
    return DBUF_EINVAL;
  if ((*out = calloc(1, sizeof **out)) == NULL)
    return DBUF_ENOMEM;
  return 0;
}

void
dbuf_plan_destroy(dbuf_plan_t *p)
{
  if (p == NULL)
    return;
  for (int64_t i = 0; i < p->n; i++) {
    free(p->b[i].unit);
    dbuf_layout_destroy(p->b[i].layout);
    free(p->b[i].model_ids);
  }
  dbuf__strmap_free(&p->keys);
  free(p->b);
  free(p);
}

int64_t
dbuf_plan_nbuffers(const dbuf_plan_t *p)
{
  return p ? p->n : 0;
}

int
dbuf_plan_nranks(const dbuf_plan_t *p)
{
  return p != NULL && p->n > 0 ? dbuf_layout_nranks(p->b[0].layout) : 0;
}

int
dbuf_plan_buffer(const dbuf_plan_t *p, int64_t b, dbuf_plan_buffer_t *out)
{
  if (p == NULL || out == NULL)
    return DBUF_EINVAL;
  if (b < 0 || b >= p->n)
    return DBUF_ERANGE;
  out->unit = p->b[b].unit;
  out->dtype = p->b[b].dtype;
  out->elem_size = dbuf_dtype_size(p->b[b].dtype);
  out->layout = p->b[b].layout;
  out->model_ids = p->b[b].model_ids;
  return 0;
}

/* dbuf_plan_add(); with own, the plan takes model_ids (malloc'd, freed on
 * failure too) instead of a copy. */
static int
plan_add(dbuf_plan_t *p, const char *unit, dbuf_dtype_t dtype, dbuf_layout_t *layout,
         const int64_t *model_ids, int own, dbuf_diag_t *diag)
{
  int rc = 0;
  int64_t nt = dbuf_layout_ntensors(layout), bytes;
  plan_buf_t nb = {NULL, dtype, layout, NULL};
  if (p == NULL || unit == NULL || unit[0] == '\0' || layout == NULL)
    rc = dbuf__diag(diag, DBUF_EINVAL, "plan: NULL argument or empty unit name");
  else if (dbuf_dtype_size(dtype) == 0)
    rc = dbuf__diag(diag, DBUF_EINVAL, "plan: buffer %s: dtype %s has no byte size", unit,
                    dbuf_dtype_name(dtype));
  else if (dbuf__mul(dbuf_layout_size(layout), dbuf_dtype_size(dtype), &bytes))
    rc = dbuf__diag(diag, DBUF_EOVERFLOW,
                    "plan: buffer %s/%s: %" PRId64 " elements of %" PRId64 " bytes overflow 64 bits",
                    unit, dbuf_dtype_name(dtype), dbuf_layout_size(layout),
                    dbuf_dtype_size(dtype));
  else if (p->n > 0 && dbuf_layout_nranks(layout) != dbuf_plan_nranks(p))
    rc = dbuf__diag(diag, DBUF_ENRANKS, "plan: buffer %s/%s has %d ranks, the plan %d", unit,
                    dbuf_dtype_name(dtype), dbuf_layout_nranks(layout), dbuf_plan_nranks(p));
  /* The key of a buffer, so that a plan of many buffers is assembled in
   * linear time: the dtype number, a blank (no unit name has one), the unit. */
  char *key = NULL;
  int64_t kid;
  size_t klen = rc == 0 ? strlen(unit) + 8 : 0;
  if (rc == 0 && (key = malloc(klen)) == NULL)
    rc = dbuf__diag(diag, DBUF_ENOMEM, "plan: out of memory");
  if (rc == 0) {
    snprintf(key, klen, "%d %s", (int)dtype, unit);
    if (dbuf__strmap_find(&p->keys, key, &kid) == 0)
      rc = dbuf__diag(diag, DBUF_EDUP, "plan: buffer %s/%s twice", unit,
                      dbuf_dtype_name(dtype));
  }
  if (rc == 0 && p->n == p->cap) {
    int64_t cap = p->cap ? p->cap * 2 : 8;
    plan_buf_t *b = dbuf__reallocn(p->b, cap, sizeof *b);
    if (b == NULL)
      rc = dbuf__diag(diag, DBUF_ENOMEM, "plan: out of memory");
    else {
      p->b = b;
      p->cap = cap;
    }
  }
  if (own)
    nb.model_ids = (int64_t *)model_ids;
  if (rc == 0 && ((nb.unit = strdup(unit)) == NULL ||
                  (model_ids != NULL && !own &&
                   (nb.model_ids = dbuf__memdup(model_ids, nt, sizeof *model_ids)) == NULL)))
    rc = dbuf__diag(diag, DBUF_ENOMEM, "plan: out of memory");
  if (rc == 0 && (rc = dbuf__strmap_add(&p->keys, key, &kid)) != 0)
    dbuf__diag(diag, rc, "plan: %s", dbuf_strerror(rc));
  free(key);
  if (rc != 0) {
    free(nb.unit);
    free(nb.model_ids);
    dbuf_layout_destroy(layout);
    return rc;
  }
  p->b[p->n++] = nb;
  return 0;
}

int
dbuf_plan_add(dbuf_plan_t *p, const char *unit, dbuf_dtype_t dtype, dbuf_layout_t *layout,
              const int64_t *model_ids, dbuf_diag_t *diag)
{
  return plan_add(p, unit, dtype, layout, model_ids, 0, diag);
}

/* ------------------------------------------------------------------------ */
/* Building                                                                  */

/* A buffer being grouped: its unit, dtype, tensors (model ids, in order). */
typedef struct group {
  int64_t unit;
  dbuf_dtype_t dtype;
  int64_t next;  /* next group of the same unit, or -1 */
  int64_t count; /* tensors */
  int64_t first; /* index of its first tensor in the ids array */
} group_t;

/* Group the tensors: groups[] in the plan's buffer order, ids[] the model
 * ids of every group's tensors back to back (group g at groups[g].first). */
static int
group_tensors(const dbuf_tensors_t *t, const dbuf_units_t *units, dbuf_dtype_t dtype,
              group_t **groups_out, int64_t *ngroups, int64_t **ids_out)
{
  int64_t n = dbuf_tensors_count(t), nunits = units ? dbuf_units_count(units) : 1, ng = 0;
  /* The common plan, one unit and one dtype, is one group: its ids are
   * 0 .. n-1, no grouping pass.  same: the tensors from the first on in
   * the first one's unit and dtype. */
  int64_t same = 0, u0 = units && n > 0 ? dbuf_units_of(units, 0) : 0;
  const uint8_t *dt = dbuf__tensors_dtypes(t);
  dbuf_dtype_t d0 = n > 0 ? (dbuf_dtype_t)dt[0] : DBUF_DTYPE_NONE;
  d0 = d0 == DBUF_DTYPE_NONE ? dtype : d0;
  while (same < n) {
    dbuf_dtype_t d = (dbuf_dtype_t)dt[same];
    if ((d == DBUF_DTYPE_NONE ? dtype : d) != d0 || (units && dbuf_units_of(units, same) != u0))
      break;
    same++;
  }
  int one = n > 0 && same == n;
  int64_t *head = NULL, *group_of = NULL, *order = NULL, *at = NULL;
  group_t *g = dbuf__mallocn(one ? 1 : n, sizeof *g); /* at most one a tensor */
  int64_t *ids = dbuf__mallocn(n, sizeof *ids);
  int rc = DBUF_ENOMEM;
  if (one) {
    if (g == NULL || ids == NULL)
      goto out;
    g[0] = (group_t){u0, d0, -1, n, 0};
    for (int64_t i = 0; i < n; i++)
      ids[i] = i;
    ng = 1;
    goto done;
  }
  head = dbuf__mallocn(nunits, sizeof *head);
  group_of = dbuf__mallocn(n, sizeof *group_of);
  if (head == NULL || group_of == NULL || g == NULL || ids == NULL)
    goto out;
  for (int64_t u = 0; u < nunits; u++)
    head[u] = -1;
  /* One pass: each unit keeps the list of its dtype groups (a handful). */
  for (int64_t i = 0; i < n; i++) {
    int64_t u = units ? dbuf_units_of(units, i) : 0, k, last = -1;
    dbuf_dtype_t d = dbuf_tensors_dtype(t, i);
    if (d == DBUF_DTYPE_NONE)
      d = dtype;
    for (k = head[u]; k >= 0 && g[k].dtype != d; k = g[k].next)
      last = k;
    if (k < 0) {
      k = ng++;
      g[k] = (group_t){u, d, -1, 0, 0};
      if (last < 0)
        head[u] = k;
      else
        g[last].next = k;
    }
    g[k].count++;
    group_of[i] = k;
  }
  /* Buffer order: by unit (ids follow first appearance), then creation
   * order within the unit -- the order of each unit's list. */
  if ((order = dbuf__mallocn(ng, sizeof *order)) == NULL ||
      (at = dbuf__mallocn(ng, sizeof *at)) == NULL)
    goto out;
  int64_t pos = 0, off = 0;
  for (int64_t u = 0; u < nunits; u++) {
    for (int64_t k = head[u]; k >= 0; k = g[k].next) {
      order[k] = pos++;
      g[k].first = off;
      at[k] = off;
      off += g[k].count;
    }
  }
  for (int64_t i = 0; i < n; i++)
    ids[at[group_of[i]]++] = i;
  /* Permute the groups into buffer order. */
  group_t *sorted = dbuf__mallocn(ng, sizeof *sorted);
  if (sorted == NULL)
    goto out;
  for (int64_t k = 0; k < ng; k++)
    sorted[order[k]] = g[k];
  free(g);
  g = sorted;
done:
  *groups_out = g;
  *ngroups = ng;
  *ids_out = ids;
  g = NULL;
  ids = NULL;
  rc = 0;
out:
  free(head);
  free(group_of);
  free(g);
  free(ids);
  free(order);
  free(at);
  return rc;
}

/* The sub-list of a group's tensors (names, shapes and dtypes as in t). */
static int
sub_tensors(const dbuf_tensors_t *t, const int64_t *ids, int64_t n, dbuf_dtype_t dtype,
            dbuf_tensors_t **out, dbuf_diag_t *diag)
{
  dbuf_tensors_t *s;
  int rc = dbuf_tensors_create(&s);
  /* t's names are distinct: no duplicate check, the index comes with the
   * first lookup */
  if (rc == 0)
    rc = dbuf__tensors_bulk_begin(s, n);
  for (int64_t i = 0; rc == 0 && i < n; i++) {
    rc = dbuf__tensors_add_bulk(s, dbuf_tensors_name(t, ids[i]),
                                dbuf__tensors_name_len(t, ids[i]), dbuf_tensors_ndim(t, ids[i]),
                                dbuf_tensors_dims(t, ids[i]), diag);
    if (rc == 0)
      rc = dbuf_tensors_set_dtype(s, i, dtype);
  }
  if (rc != 0) {
    dbuf_tensors_destroy(s);
    return dbuf__diag(diag, rc, "plan: %s", dbuf_strerror(rc));
  }
  *out = s;
  return 0;
}

/* Build the layout of one group: its tensors and, for owner lists, its
 * share of the owners. */
static int
build_group(const dbuf_tensors_t *t, const group_t *g, const int64_t *ids,
            const dbuf_layout_params_t *params, int64_t align_bytes, int whole,
            dbuf_layout_t **out, dbuf_diag_t *diag)
{
  dbuf_layout_params_t p = *params;
  if (align_bytes > 0)
    p.align_elems = align_bytes / dbuf__gcd(align_bytes, dbuf_dtype_size(g->dtype));
  dbuf_tensors_t *s = NULL;
  int *owners = NULL, rc;
  /* The one buffer of a plan holds the model in order: no copy. */
  if (!whole && (rc = sub_tensors(t, ids + g->first, g->count, g->dtype, &s, diag)) != 0)
    return rc;
  if (params->owners != NULL) {
    if (params->nowners != dbuf_tensors_count(t)) {
      dbuf_tensors_destroy(s);
      return dbuf__diag(diag, DBUF_EOWNER, "owners count mismatch: %lld owners for %lld tensors",
                        (long long)params->nowners, (long long)dbuf_tensors_count(t));
    }
    if ((owners = dbuf__mallocn(g->count, sizeof *owners)) == NULL) {
      dbuf_tensors_destroy(s);
      return dbuf__diag(diag, DBUF_ENOMEM, "plan: out of memory");
    }
    for (int64_t i = 0; i < g->count; i++)
      owners[i] = params->owners[ids[g->first + i]];
    p.owners = owners;
    p.nowners = g->count;
  }
  rc = dbuf_layout_build(s ? s : t, &p, out, diag);
  free(owners);
  dbuf_tensors_destroy(s);
  return rc;
}

int
dbuf_plan_build(const dbuf_tensors_t *t, const dbuf_units_t *units, dbuf_dtype_t dtype,
                const dbuf_layout_params_t *params, int64_t align_bytes, dbuf_plan_t **out,
                dbuf_diag_t *diag)
{
  group_t *g = NULL;
  int64_t ng = 0, *ids = NULL;
  dbuf_plan_t *p = NULL;
  if (t == NULL || params == NULL || out == NULL || align_bytes < 0)
    return dbuf__diag(diag, DBUF_EINVAL, "plan: NULL argument or negative alignment");
  if (dbuf_dtype_size(dtype) == 0)
    return dbuf__diag(diag, DBUF_EINVAL, "plan: default dtype %s has no byte size",
                      dbuf_dtype_name(dtype));
  /* The dtypes a list holds are a handful: each checked once, and only if
   * one fails, the tensors in id order for the first that has it. */
  int64_t n = dbuf_tensors_count(t);
  const uint8_t *dt = dbuf__tensors_dtypes(t);
  unsigned char used[256] = {0}, bad = 0;
  for (int64_t i = 0; i < n; i++)
    used[dt[i]] = 1;
  for (int v = 0; v < 256; v++)
    bad |= used[v] && v != DBUF_DTYPE_NONE && dbuf_dtype_size((dbuf_dtype_t)v) == 0;
  for (int64_t i = 0; i < n && bad; i++) {
    dbuf_dtype_t d = (dbuf_dtype_t)dt[i];
    if (d != DBUF_DTYPE_NONE && dbuf_dtype_size(d) == 0)
      return dbuf__diag(diag, DBUF_EINVAL, "tensor %s: dtype %s has no byte size",
                        dbuf_tensors_name(t, i), dbuf_dtype_name(d));
  }
  if (units != NULL && dbuf_units_count(units) < 1 && n > 0)
    return dbuf__diag(diag, DBUF_EINVAL, "plan: units of another model");
  for (int64_t i = 0; units != NULL && i < n; i++) {
    if (dbuf_units_of(units, i) < 0)
      return dbuf__diag(diag, DBUF_EINVAL, "plan: units of another model (tensor %s)",
                        dbuf_tensors_name(t, i));
  }
  int rc = group_tensors(t, units, dtype, &g, &ng, &ids);
  if (rc != 0)
    return dbuf__diag(diag, rc, "plan: %s", dbuf_strerror(rc));
  if ((rc = dbuf_plan_create(&p)) != 0) {
    dbuf__diag(diag, rc, "plan: %s", dbuf_strerror(rc));
    goto out;
  }
  if (ng == 0) { /* an empty model: one empty buffer, as the builders allow */
    g = realloc(g, sizeof *g);
    if (g == NULL) {
      rc = dbuf__diag(diag, DBUF_ENOMEM, "plan: out of memory");
      goto out;
    }
    g[0] = (group_t){0, dtype, -1, 0, 0};
    ng = 1;
  }
  for (int64_t k = 0; k < ng; k++) {
    dbuf_layout_t *l = NULL;
    dbuf_diag_t d;
    const char *unit = units ? dbuf_units_name(units, g[k].unit) : DBUF_UNIT_ALL;
    dbuf_diag_clear(&d);
    rc = build_group(t, &g[k], ids, params, align_bytes, ng == 1, &l, &d);
    if (rc != 0) {
      if (ng > 1)
        dbuf__diag(diag, rc, "buffer %s/%s: %s", unit, dbuf_dtype_name(g[k].dtype), d.msg);
      else if (diag != NULL)
        *diag = d;
      goto out;
    }
    /* The one buffer's ids are all of them: the plan takes the array. */
    int own = ng == 1 && ids != NULL;
    rc = plan_add(p, unit ? unit : DBUF_UNIT_ROOT, g[k].dtype, l, ids + g[k].first, own, diag);
    if (own)
      ids = NULL;
    if (rc != 0)
      goto out;
  }
  *out = p;
  p = NULL;
out:
  dbuf_plan_destroy(p);
  free(g);
  free(ids);
  return rc;
}

/* ------------------------------------------------------------------------ */
/* Figures                                                                   */

int
dbuf_plan_rank_bytes(const dbuf_plan_t *p, int rank, int64_t *bytes)
{
  int64_t sum = 0;
  if (p == NULL || bytes == NULL)
    return DBUF_EINVAL;
  if (rank < 0 || rank >= dbuf_plan_nranks(p))
    return DBUF_ERANGE;
  for (int64_t b = 0; b < p->n; b++) {
    int64_t s, e, by;
    int rc = dbuf_layout_rank_range(p->b[b].layout, rank, &s, &e);
    if (rc != 0)
      return rc;
    if (dbuf__mul(e - s, dbuf_dtype_size(p->b[b].dtype), &by) || dbuf__add(sum, by, &sum))
      return DBUF_EOVERFLOW;
  }
  *bytes = sum;
  return 0;
}

int
dbuf_plan_totals(const dbuf_plan_t *p, dbuf_plan_totals_t *out)
{
  dbuf_plan_totals_t x;
  if (p == NULL || out == NULL)
    return DBUF_EINVAL;
  memset(&x, 0, sizeof x);
  x.buffers = p->n;
  for (int64_t b = 0; b < p->n; b++) {
    const dbuf_layout_t *l = p->b[b].layout;
    int64_t es = dbuf_dtype_size(p->b[b].dtype), lb, bb;
    int64_t logical = dbuf_tensors_total(dbuf_layout_tensors(l)), size = dbuf_layout_size(l);
    if (dbuf__add(x.tensors, dbuf_layout_ntensors(l), &x.tensors) ||
        dbuf__add(x.logical_elems, logical, &x.logical_elems) ||
        dbuf__add(x.buffer_elems, size, &x.buffer_elems) || dbuf__mul(logical, es, &lb) ||
        dbuf__mul(size, es, &bb) || dbuf__add(x.logical_bytes, lb, &x.logical_bytes) ||
        dbuf__add(x.buffer_bytes, bb, &x.buffer_bytes))
      return DBUF_EOVERFLOW;
  }
  x.padding_elems = x.buffer_elems - x.logical_elems;
  x.padding_bytes = x.buffer_bytes - x.logical_bytes;
  /* Per rank: one pass over every buffer's ranks, O(buffers x nranks). */
  int nr = dbuf_plan_nranks(p);
  int64_t *rb = dbuf__calloc(nr, sizeof *rb);
  if (rb == NULL)
    return DBUF_ENOMEM;
  for (int64_t b = 0; b < p->n; b++) {
    const int64_t *range = dbuf_layout_range(p->b[b].layout);
    int64_t es = dbuf_dtype_size(p->b[b].dtype), by;
    for (int r = 0; r < nr; r++) {
      if (dbuf__mul(range[r + 1] - range[r], es, &by) || dbuf__add(rb[r], by, &rb[r])) {
        free(rb);
        return DBUF_EOVERFLOW;
      }
    }
  }
  x.min_rank_bytes = nr > 0 ? rb[0] : 0;
  for (int r = 0; r < nr; r++) {
    x.max_rank_bytes = rb[r] > x.max_rank_bytes ? rb[r] : x.max_rank_bytes;
    x.min_rank_bytes = rb[r] < x.min_rank_bytes ? rb[r] : x.min_rank_bytes;
  }
  free(rb);
  *out = x;
  return 0;
}

int
dbuf_plan_validate(const dbuf_plan_t *p, dbuf_violation_fn fn, void *arg, int64_t *nviol,
                   dbuf_diag_t *diag)
{
  if (p == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "plan: NULL argument");
  int64_t total = 0, found = 0;
  for (int64_t k = 0; k < p->n; k++)
    if (dbuf__add(total, dbuf_layout_ntensors(p->b[k].layout), &total))
      return dbuf__diag(diag, DBUF_EOVERFLOW, "plan: the tensor count overflows 64 bits");
  /* Names in one map; home[id]: the buffer and tensor where the name was
   * seen first. */
  dbuf__strmap_t names = DBUF__STRMAP_INIT;
  int64_t *home = dbuf__mallocn(total + 1, 2 * sizeof *home);
  int rc = home == NULL ? DBUF_ENOMEM : dbuf__strmap_reserve(&names, total);
  dbuf_violation_t v;
  int stop = 0;
  for (int64_t k = 0; rc == 0 && !stop && k < p->n; k++) {
    const dbuf_tensors_t *t = dbuf_layout_tensors(p->b[k].layout);
    int64_t nt = dbuf_tensors_count(t);
    for (int64_t i = 0; rc == 0 && !stop && i < nt; i++) {
      int64_t id;
      int e = dbuf__strmap_add(&names, dbuf_tensors_name(t, i), &id);
      if (e == 0) {
        home[2 * id] = k;
        home[2 * id + 1] = i;
        continue;
      }
      if (e != DBUF_EDUP) {
        rc = e;
        break;
      }
      const plan_buf_t *a = &p->b[home[2 * id]], *b = &p->b[k];
      memset(&v, 0, sizeof v);
      v.kind = DBUF_VIOL_DUPLICATE;
      v.tensor = i;
      v.other = home[2 * id + 1];
      v.rank = -1;
      v.a = home[2 * id];
      v.b = k;
      snprintf(v.msg, sizeof v.msg,
               "tensor %s is in buffer %s/%s and in buffer %s/%s (a tensor belongs to one "
               "buffer)",
               dbuf_tensors_name(t, i), a->unit, dbuf_dtype_name(a->dtype), b->unit,
               dbuf_dtype_name(b->dtype));
      if (found++ == 0 && diag != NULL)
        dbuf__diag(diag, DBUF_ELAYOUT, "%s", v.msg);
      stop = fn != NULL && fn(&v, arg) != 0;
    }
  }
  dbuf__strmap_free(&names);
  free(home);
  if (rc != 0)
    return dbuf__diag(diag, rc, "plan: %s", dbuf_strerror(rc));
  if (nviol != NULL)
    *nviol = found;
  return found > 0 ? DBUF_ELAYOUT : 0;
}
