/* The plan JSON: version 1 (one layout) and version 2 (a "buffers" array),
 * written and read over the layout JSON's own members (layout_json.c). */
#include "dbuf/layout_json.h"
#include "core_internal.h"
#include "layout_internal.h"
#include "strbuf.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether a plan is written as version 1: one buffer of the unit "all". */
static int
plan_is_v1(const dbuf_plan_t *p)
{
  dbuf_plan_buffer_t b;
  return dbuf_plan_nbuffers(p) == 1 && dbuf_plan_buffer(p, 0, &b) == 0 &&
         strcmp(b.unit, DBUF_UNIT_ALL) == 0;
}

/* The whole plan document into b (a string or a streaming buffer). */
static void
plan_json(dbuf__sb_t *b, const dbuf_plan_t *p, unsigned flags)
{
  dbuf_plan_buffer_t pb;
  int64_t n = dbuf_plan_nbuffers(p);
  if (plan_is_v1(p)) {
    dbuf_plan_buffer(p, 0, &pb);
    dbuf__sb_printf(b, "{\n  \"format\": \"dbuf-shard-layout\",\n  \"version\": %d,\n",
                    DBUF_LAYOUT_JSON_VERSION);
    if (pb.dtype != DBUF_DTYPE_BF16) /* bf16 is the reader's default */
      dbuf__sb_printf(b, "  \"dtype\": \"%s\",\n", dbuf_dtype_name(pb.dtype));
    dbuf__layout_json_members(b, pb.layout, flags, 2);
    dbuf__sb_printf(b, "\n}\n");
    return;
  }
  dbuf__sb_printf(b,
                  "{\n  \"format\": \"dbuf-shard-layout\",\n  \"version\": %d,\n"
                  "  \"buffers\": [",
                  DBUF_PLAN_JSON_VERSION);
  for (int64_t i = 0; i < n && !b->failed; i++) {
    dbuf_plan_buffer(p, i, &pb);
    dbuf__sb_printf(b, "%s\n    {\n      \"unit\": ", i ? "," : "");
    dbuf__sb_json_string(b, pb.unit);
    dbuf__sb_printf(b, ",\n      \"dtype\": \"%s\",\n", dbuf_dtype_name(pb.dtype));
    dbuf__layout_json_members(b, pb.layout, flags, 6);
    dbuf__sb_printf(b, "\n    }");
  }
  dbuf__sb_printf(b, "\n  ]\n}\n");
}

int
dbuf_plan_to_json(const dbuf_plan_t *p, unsigned flags, char **text, size_t *len)
{
  dbuf__sb_t b = DBUF__SB_INIT;
  if (p == NULL || text == NULL || len == NULL || dbuf_plan_nbuffers(p) < 1)
    return DBUF_EINVAL;
  plan_json(&b, p, flags);
  return dbuf__sb_finish(&b, text, len);
}

int
dbuf_plan_write_json(const dbuf_plan_t *p, unsigned flags, dbuf_write_fn write, void *arg)
{
  dbuf__sb_t b;
  if (p == NULL || write == NULL || dbuf_plan_nbuffers(p) < 1)
    return DBUF_EINVAL;
  dbuf__sb_init_sink(&b, write, arg);
  plan_json(&b, p, flags);
  return dbuf__sb_drain(&b);
}

/* ------------------------------------------------------------------ */

/* The "dtype" member of obj: *d, or def when absent (def NONE: required). */
static int
read_dtype(const char *where, json_t *obj, dbuf_dtype_t def, dbuf_dtype_t *d, dbuf_diag_t *diag)
{
  json_t *v = json_object_get(obj, "dtype");
  if (v == NULL && def != DBUF_DTYPE_NONE) {
    *d = def;
    return 0;
  }
  if (v == NULL)
    return dbuf__diag(diag, DBUF_EPARSE, "%s: missing \"dtype\"", where);
  if (!json_is_string(v) || dbuf_dtype_parse(json_string_value(v), d) != 0 ||
      dbuf_dtype_size(*d) == 0)
    return dbuf__diag(diag, DBUF_EPARSE, "%s: \"dtype\" must be one of %s", where,
                      dbuf_dtype_list());
  return 0;
}

/* The "unit" member: a unit name (dbuf__unit_name_check), no NUL inside. */
static int
read_unit(const char *where, json_t *obj, const char **unit, dbuf_diag_t *diag)
{
  json_t *v = json_object_get(obj, "unit");
  const char *s = json_is_string(v) ? json_string_value(v) : NULL;
  char why[DBUF_DIAG_LEN];
  if (s == NULL || strlen(s) != json_string_length(v))
    return dbuf__diag(diag, DBUF_EPARSE,
                      "%s: \"unit\" must be a non-empty string without blanks or "
                      "control characters",
                      where);
  if (dbuf__unit_name_check(s, strlen(s), why, sizeof why) != 0)
    return dbuf__diag(diag, DBUF_EPARSE, "%s: %s", where, why);
  *unit = s;
  return 0;
}

/* Version 2: every entry of "buffers" appended to p. */
static int
read_buffers(const char *name, json_t *bufs, dbuf_plan_t *p, dbuf_diag_t *diag)
{
  size_t n = json_array_size(bufs);
  char where[DBUF_DIAG_LEN];
  if (!json_is_array(bufs) || n == 0)
    return dbuf__diag(diag, DBUF_EPARSE, "%s: \"buffers\" must be a non-empty array", name);
  for (size_t i = 0; i < n; i++) {
    json_t *e = json_array_get(bufs, i);
    const char *unit = NULL;
    dbuf_dtype_t dt = DBUF_DTYPE_NONE;
    dbuf_layout_t *l = NULL;
    dbuf_diag_t sub;
    int rc;
    snprintf(where, sizeof where, "%s: buffers[%zu]", name, i);
    if (!json_is_object(e))
      return dbuf__diag(diag, DBUF_EPARSE, "%s: expected a JSON object", where);
    if ((rc = read_unit(where, e, &unit, diag)) != 0 ||
        (rc = read_dtype(where, e, DBUF_DTYPE_NONE, &dt, diag)) != 0)
      return rc;
    snprintf(where, sizeof where, "%s: buffer %s/%s", name, unit, dbuf_dtype_name(dt));
    if ((rc = dbuf__layout_from_obj(where, e, &l, diag)) != 0)
      return rc;
    if ((rc = dbuf_plan_add(p, unit, dt, l, NULL, &sub)) != 0) /* takes l */
      return dbuf__diag(diag, rc, "%s: %s", name, sub.msg);
  }
  return 0;
}

int
dbuf_plan_from_json(const char *name, const char *text, size_t len, dbuf_plan_t **out,
                    dbuf_diag_t *diag)
{
  json_error_t jerr;
  dbuf_plan_t *p = NULL;
  dbuf_layout_t *l = NULL;
  dbuf_dtype_t dt = DBUF_DTYPE_BF16;
  dbuf_diag_t sub;
  int64_t version = 1;
  int rc;

  if (name == NULL || text == NULL || out == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "NULL argument");
  json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
  if (root == NULL)
    return dbuf__diag(diag, DBUF_EPARSE, "%s:%d: invalid JSON: %s", name, jerr.line,
                      jerr.text);
  json_t *jv = json_is_object(root) ? json_object_get(root, "version") : NULL;
  json_t *bufs = json_is_object(root) ? json_object_get(root, "buffers") : NULL;
  if (jv != NULL)
    version = json_is_integer(jv) ? json_integer_value(jv) : -1;
  if (!json_is_object(root))
    rc = dbuf__diag(diag, DBUF_EPARSE, "%s: expected a JSON object", name);
  else if (version != 1 && version != DBUF_PLAN_JSON_VERSION)
    rc = dbuf__diag(diag, DBUF_EPARSE, "%s: \"version\" must be 1 or 2", name);
  else if (version == 1 && bufs != NULL)
    rc = dbuf__diag(diag, DBUF_EPARSE, "%s: \"buffers\" needs \"version\": 2", name);
  else if (version == 2 && bufs == NULL)
    rc = dbuf__diag(diag, DBUF_EPARSE, "%s: version 2 without \"buffers\"", name);
  else if ((rc = dbuf_plan_create(&p)) != 0)
    rc = dbuf__diag(diag, rc, "%s: out of memory", name);
  else if (version == 2)
    rc = read_buffers(name, bufs, p, diag);
  else if ((rc = read_dtype(name, root, DBUF_DTYPE_BF16, &dt, diag)) == 0 &&
           (rc = dbuf__layout_from_obj(name, root, &l, diag)) == 0 &&
           (rc = dbuf_plan_add(p, DBUF_UNIT_ALL, dt, l, NULL, &sub)) != 0)
    dbuf__diag(diag, rc, "%s: %s", name, sub.msg);
  json_decref(root);
  if (rc != 0) {
    dbuf_plan_destroy(p);
    return rc;
  }
  *out = p;
  return 0;
}
