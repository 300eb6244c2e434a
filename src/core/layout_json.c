/* The layout JSON schema: a direct writer (one tensor a line) and a reader. */
#include "dbuf/layout_json.h"
#include "core_internal.h"
#include "strbuf.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int
dbuf_layout_to_json(const dbuf_layout_t *l, unsigned flags, char **text,
                    size_t *len)
{
  dbuf__sb_t b = DBUF__SB_INIT;
  if (l == NULL || text == NULL || len == NULL)
    return DBUF_EINVAL;
  const dbuf_tensors_t *t = dbuf_layout_tensors(l);
  const int64_t *off = dbuf_layout_offsets(l), *range = dbuf_layout_range(l);
  const int *owners = dbuf_layout_owners(l);
  int nranks = dbuf_layout_nranks(l);
  int64_t n = dbuf_layout_ntensors(l);

  dbuf__sb_printf(&b,
            "{\n  \"format\": \"dbuf-shard-layout\",\n  \"version\": %d,\n"
            "  \"layout\": \"%s\",\n  \"dp_size\": %d,\n  \"block_size\": "
            "%lld,\n",
            DBUF_LAYOUT_JSON_VERSION, dbuf_layout_kind_name(dbuf_layout_kind(l)),
            nranks, (long long)dbuf_layout_block_size(l));
  if (dbuf_layout_chunk_size(l) > 0)
    dbuf__sb_printf(&b, "  \"chunk_size\": %lld,\n",
              (long long)dbuf_layout_chunk_size(l));
  dbuf__sb_printf(&b, "  \"size\": %lld,\n  \"logical_size\": %lld,\n",
            (long long)dbuf_layout_size(l), (long long)dbuf_tensors_total(t));
  dbuf__sb_printf(&b, "  \"rank_offsets\": [");
  for (int r = 0; r < nranks; r++)
    dbuf__sb_printf(&b, r ? ", %lld" : "%lld", (long long)range[r]);
  dbuf__sb_printf(&b, "],\n  \"tensors\": [");
  for (int64_t i = 0; i < n && !b.failed; i++) {
    dbuf__sb_printf(&b, i ? ",\n    {\"name\": " : "\n    {\"name\": ");
    dbuf__sb_json_string(&b, dbuf_tensors_name(t, i));
    dbuf__sb_printf(&b, ", \"shape\": [");
    const int64_t *d = dbuf_tensors_dims(t, i);
    for (int k = 0; k < dbuf_tensors_ndim(t, i); k++)
      dbuf__sb_printf(&b, k ? ", %lld" : "%lld", (long long)d[k]);
    dbuf__sb_printf(&b, "], \"offset\": %lld", (long long)off[i]);
    if (owners != NULL)
      dbuf__sb_printf(&b, ", \"owner\": %d", owners[i]);
    dbuf__sb_printf(&b, "}");
  }
  dbuf__sb_printf(&b, n ? "\n  ]" : "]");
  if (flags & DBUF_JSON_PIECES) {
    dbuf__sb_printf(&b, ",\n  \"ranks\": [");
    dbuf_piece_t *pc = NULL;
    int64_t cap = 0;
    for (int r = 0; r < nranks && !b.failed; r++) {
      int64_t np;
      dbuf_layout_rank_pieces(l, r, NULL, 0, &np);
      if (np > cap) {
        dbuf_piece_t *npc = dbuf__reallocn(pc, np, sizeof *npc);
        if (npc == NULL) {
          b.failed = 1;
          break;
        }
        pc = npc;
        cap = np;
      }
      dbuf_layout_rank_pieces(l, r, pc, cap, &np);
      dbuf__sb_printf(&b,
                "%s\n    {\"rank\": %d, \"offset\": %lld, \"size\": %lld, "
                "\"pieces\": [",
                r ? "," : "", r, (long long)range[r],
                (long long)(range[r + 1] - range[r]));
      for (int64_t k = 0; k < np; k++)
        dbuf__sb_printf(&b,
                  "%s\n      {\"tensor\": %lld, \"first_row\": %lld, \"rows\": "
                  "%lld, \"elements\": %lld, \"offset\": %lld}",
                  k ? "," : "", (long long)pc[k].tensor,
                  (long long)pc[k].first_row, (long long)pc[k].nrows,
                  (long long)pc[k].nelems, (long long)pc[k].offset);
      dbuf__sb_printf(&b, np ? "\n    ]}" : "]}");
    }
    free(pc);
    dbuf__sb_printf(&b, nranks ? "\n  ]" : "]");
  }
  dbuf__sb_printf(&b, "\n}\n");
  return dbuf__sb_finish(&b, text, len);
}

/* ------------------------------------------------------------------ */

static int
get_int(const char *name, json_t *obj, const char *key, int required,
        int64_t *out, dbuf_diag_t *diag)
{
  json_t *v = json_object_get(obj, key);
  if (v == NULL) {
    if (!required)
      return 1;
    return dbuf__diag(diag, DBUF_EPARSE, "%s: missing \"%s\"", name, key);
  }
  if (!json_is_integer(v))
    return dbuf__diag(diag, DBUF_EPARSE, "%s: \"%s\" is not an integer", name,
                      key);
  *out = json_integer_value(v);
  return 0;
}

int
dbuf_layout_from_json(const char *name, const char *text, size_t len,
                      dbuf_layout_t **out, dbuf_diag_t *diag)
{
  json_error_t jerr;
  json_t *root;
  dbuf_tensors_t *t = NULL;
  int64_t *offsets = NULL, *ranks = NULL;
  int *owners = NULL;
  int rc;

  if (name == NULL || text == NULL || out == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "NULL argument");
  root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
  if (root == NULL)
    return dbuf__diag(diag, DBUF_EPARSE, "%s:%d: invalid JSON: %s", name,
                      jerr.line, jerr.text);
  if (!json_is_object(root)) {
    rc = dbuf__diag(diag, DBUF_EPARSE, "%s: expected a JSON object", name);
    goto out;
  }
  json_t *jk = json_object_get(root, "layout");
  dbuf_layout_kind_t kind;
  if (!json_is_string(jk) ||
      dbuf_layout_kind_parse(json_string_value(jk), &kind) != 0) {
    rc = dbuf__diag(diag, DBUF_EPARSE,
                    "%s: \"layout\" must be \"padded\", \"unpadded\", "
                    "\"tensor\" or \"compact\"",
                    name);
    goto out;
  }
  int64_t dp, block = 1, size, chunk = 0;
  if ((rc = get_int(name, root, "dp_size", 1, &dp, diag)) != 0 ||
      (rc = get_int(name, root, "size", 1, &size, diag)) != 0)
    goto out;
  if ((rc = get_int(name, root, "block_size", 0, &block, diag)) < 0 ||
      (rc = get_int(name, root, "chunk_size", 0, &chunk, diag)) < 0)
    goto out;
  if ((kind == DBUF_LAYOUT_PADDED || kind == DBUF_LAYOUT_COMPACT) && rc == 1) {
    rc = dbuf__diag(diag, DBUF_EPARSE, "%s: %s layout without \"chunk_size\"",
                    name, dbuf_layout_kind_name(kind));
    goto out;
  }
  if (dp < 1 || dp > INT32_MAX) {
    rc = dbuf__diag(diag, DBUF_ENRANKS, "%s: dp_size %lld out of range", name,
                    (long long)dp);
    goto out;
  }
  json_t *jr = json_object_get(root, "rank_offsets");
  if (!json_is_array(jr) || (int64_t)json_array_size(jr) != dp) {
    rc = dbuf__diag(diag, DBUF_EPARSE,
                    "%s: \"rank_offsets\" must be an array of dp_size (%lld) "
                    "integers",
                    name, (long long)dp);
    goto out;
  }
  ranks = dbuf__mallocn(dp, sizeof *ranks);
  json_t *jt = json_object_get(root, "tensors");
  if (!json_is_array(jt)) {
    rc = dbuf__diag(diag, DBUF_EPARSE, "%s: missing \"tensors\" array", name);
    goto out;
  }
  int64_t n = (int64_t)json_array_size(jt);
  offsets = dbuf__mallocn(n, sizeof *offsets);
  owners = dbuf__mallocn(n, sizeof *owners);
  if (ranks == NULL || offsets == NULL || owners == NULL ||
      (rc = dbuf_tensors_create(&t)) != 0) {
    rc = dbuf__diag(diag, DBUF_ENOMEM, "%s: out of memory", name);
    goto out;
  }
  for (int64_t r = 0; r < dp; r++) {
    json_t *v = json_array_get(jr, (size_t)r);
    if (!json_is_integer(v)) {
      rc = dbuf__diag(diag, DBUF_EPARSE, "%s: rank_offsets[%lld] is not an integer",
                      name, (long long)r);
      goto out;
    }
    ranks[r] = json_integer_value(v);
  }
  int nowners = 0;
  for (int64_t i = 0; i < n; i++) {
    json_t *e = json_array_get(jt, (size_t)i);
    json_t *jn = json_object_get(e, "name"), *js = json_object_get(e, "shape");
    int64_t dims[DBUF_MAX_DIMS], own;
    dbuf_diag_t d;
    if (!json_is_object(e) || !json_is_string(jn) || !json_is_array(js) ||
        json_array_size(js) > DBUF_MAX_DIMS) {
      rc = dbuf__diag(diag, DBUF_EPARSE,
                      "%s: tensors[%lld]: expected {\"name\", \"shape\" (at most "
                      "%d dims), \"offset\"}",
                      name, (long long)i, DBUF_MAX_DIMS);
      goto out;
    }
    const char *tn = json_string_value(jn);
    size_t nd = json_array_size(js);
    for (size_t k = 0; k < nd; k++) {
      json_t *v = json_array_get(js, k);
      if (!json_is_integer(v)) {
        rc = dbuf__diag(diag, DBUF_EPARSE, "%s: tensor %s: dim %zu is not an integer",
                        name, tn, k);
        goto out;
      }
      dims[k] = json_integer_value(v);
    }
    if ((rc = dbuf_tensors_add(t, tn, (int)nd, dims, &d)) != 0) {
      dbuf__diag(diag, rc, "%s: tensors[%lld]: %s", name, (long long)i, d.msg);
      goto out;
    }
    if ((rc = get_int(name, e, "offset", 1, &offsets[i], &d)) != 0) {
      dbuf__diag(diag, rc, "%s: tensor %s: missing or non-integer \"offset\"",
                 name, tn);
      goto out;
    }
    rc = get_int(name, e, "owner", 0, &own, &d);
    if (rc < 0) {
      dbuf__diag(diag, rc, "%s: tensor %s: \"owner\" is not an integer", name, tn);
      goto out;
    }
    if (rc == 0) {
      if (own < 0 || own >= dp) {
        rc = dbuf__diag(diag, DBUF_EOWNER,
                        "%s: tensor %s: owner %lld out of range [0, %lld)", name,
                        tn, (long long)own, (long long)dp);
        goto out;
      }
      owners[i] = (int)own;
      nowners++;
    }
  }
  if (nowners != 0 && nowners != n) {
    rc = dbuf__diag(diag, DBUF_EOWNER,
                    "%s: %d of %lld tensors have an \"owner\" (all or none)", name,
                    nowners, (long long)n);
    goto out;
  }
  /* "logical_size" is redundant: when given, it must agree with the shapes. */
  int64_t logical;
  if ((rc = get_int(name, root, "logical_size", 0, &logical, diag)) < 0)
    goto out;
  if (rc == 0 && logical != dbuf_tensors_total(t)) {
    rc = dbuf__diag(diag, DBUF_EPARSE,
                    "%s: \"logical_size\" is %lld but the tensors hold %lld "
                    "elements",
                    name, (long long)logical, (long long)dbuf_tensors_total(t));
    goto out;
  }
  dbuf_diag_t d;
  rc = dbuf_layout_from_parts(t, kind, (int)dp, block, chunk, size, offsets,
                              ranks, nowners ? owners : NULL, out, &d);
  if (rc != 0)
    dbuf__diag(diag, rc, "%s: %s", name, d.msg);
out:
  json_decref(root);
  dbuf_tensors_destroy(t);
  free(offsets);
  free(ranks);
  free(owners);
  return rc;
}
