/*
 * safetensors reader, one data file: the dtypes, the 8-byte length prefix,
 * the JSON header, each tensor record, and the check that the records tile
 * the data region.  See safetensors_internal.h for the four files.
 */
#include "safetensors_internal.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* A safetensors dtype name (exact case) as its dbuf_dtype_t; NONE if unknown. */
static dbuf_dtype_t
st_dtype_find(const char *name)
{
  for (int i = 1; i < DBUF_DTYPE_COUNT; i++) {
    if (strcmp(dbuf_dtype_st_name((dbuf_dtype_t)i), name) == 0)
      return (dbuf_dtype_t)i;
  }
  return DBUF_DTYPE_NONE;
}

int
dbuf_st_dtype_bits(const char *name, int *bits)
{
  if (name == NULL || bits == NULL)
    return DBUF_EINVAL;
  dbuf_dtype_t d = st_dtype_find(name);
  if (d == DBUF_DTYPE_NONE)
    return DBUF_ENOTFOUND;
  *bits = dbuf_dtype_bits(d);
  return 0;
}

int
dbuf_st_dtype_size(const char *name, int64_t *elem_size)
{
  if (name == NULL || elem_size == NULL)
    return DBUF_EINVAL;
  dbuf_dtype_t d = st_dtype_find(name);
  if (d == DBUF_DTYPE_NONE)
    return DBUF_ENOTFOUND;
  if (dbuf_dtype_size(d) == 0)
    return DBUF_EUNSUPPORTED;
  *elem_size = dbuf_dtype_size(d);
  return 0;
}

/* ------------------------------------------------------ the length prefix */

/* Read the length prefix and header of one data file.  On success *hdr
 * (malloc'd, *hlen bytes) and the raw prefix; *fsize is the file size.
 * A file named by an index (via) may be a symbolic link to any file: its
 * messages never quote its bytes (here: the length prefix). */
static int
st_read_header(const char *path, const char *via, unsigned char prefix[8], char **hdr,
               int64_t *hlen, int64_t *fsize, struct st_file_id *id, dbuf_diag_t *diag)
{
  FILE *f = NULL;
  char *buf = NULL;
  int64_t size;
  uint64_t n = 0;
  int rc;

  if ((rc = dbuf__st_fopen(path, via, &f, &size, id, diag)) != 0)
    return rc;
  if (size < 8) {
    rc = dbuf__diag(diag, DBUF_EFORMAT,
                    "%s: file is %lld bytes, shorter than the 8-byte header "
                    "length",
                    path, (long long)size);
    goto cleanup;
  }
  if ((rc = dbuf__st_fread(f, prefix, 8, path, "header length", diag)) != 0)
    goto cleanup;
  for (int i = 7; i >= 0; i--)
    n = (n << 8) | prefix[i];
  if (via != NULL && (n > (uint64_t)DBUF_ST_MAX_HEADER || (int64_t)n > size - 8)) {
    rc = dbuf__diag(diag, DBUF_EFORMAT,
                    "%s (named in %s): not a safetensors file: its header "
                    "length is over the limit of %lld bytes or past the end "
                    "of the file",
                    path, via, (long long)DBUF_ST_MAX_HEADER);
    goto cleanup;
  }
  if (n > (uint64_t)DBUF_ST_MAX_HEADER) {
    rc = dbuf__diag(diag, DBUF_EFORMAT,
                    "%s: header length %llu is over the safetensors limit of "
                    "%lld bytes",
                    path, (unsigned long long)n,
                    (long long)DBUF_ST_MAX_HEADER);
    goto cleanup;
  }
  if ((int64_t)n > size - 8) {
    rc = dbuf__diag(diag, DBUF_EFORMAT,
                    "%s: header length %llu runs past the end of the file "
                    "(%lld bytes): truncated file?",
                    path, (unsigned long long)n, (long long)size);
    goto cleanup;
  }
  if ((buf = dbuf__mallocn((int64_t)n, 1)) == NULL) {
    rc = dbuf__diag(diag, DBUF_ENOMEM, "%s: no memory for a %llu-byte header",
                    path, (unsigned long long)n);
    goto cleanup;
  }
  if ((rc = dbuf__st_fread(f, buf, (int64_t)n, path, "header", diag)) != 0)
    goto cleanup;
  *hdr = buf;
  buf = NULL;
  *hlen = (int64_t)n;
  *fsize = size;
cleanup:
  free(buf);
  fclose(f);
  return rc;
}

/* ------------------------------------------------------- tensor records */

static int
st_push(dbuf_st_t *st, const struct st_tensor *rec)
{
  if (st->n == st->cap) {
    int64_t cap;
    if (dbuf__mul(st->cap ? st->cap : 32, 2, &cap))
      return DBUF_EOVERFLOW;
    struct st_tensor *t = dbuf__reallocn(st->t, cap, sizeof *t);
    if (t == NULL)
      return DBUF_ENOMEM;
    st->t = t;
    st->cap = cap;
  }
  st->t[st->n++] = *rec;
  return 0;
}

/* The "dtype" of tensor name: a known dtype of whole bytes. */
static int
st_parse_dtype(const char *path, const char *name, const json_t *jd,
               struct st_tensor *rec, dbuf_diag_t *diag)
{
  if (!json_is_string(jd))
    return dbuf__diag(diag, DBUF_EFORMAT,
                      "%s: tensor '%s': \"dtype\" is a JSON %s, not a string",
                      path, name, dbuf__st_json_type(jd));
  rec->dtype = st_dtype_find(json_string_value(jd));
  if (rec->dtype == DBUF_DTYPE_NONE)
    return dbuf__diag(diag, DBUF_EUNSUPPORTED,
                      "%s: tensor '%s': unknown dtype '%s'", path, name,
                      json_string_value(jd));
  if (dbuf_dtype_size(rec->dtype) == 0)
    return dbuf__diag(diag, DBUF_EUNSUPPORTED,
                      "%s: tensor '%s': dtype %s has %d-bit elements; "
                      "sub-byte dtypes are not supported",
                      path, name, dbuf_dtype_st_name(rec->dtype),
                      dbuf_dtype_bits(rec->dtype));
  return 0;
}

/* The "shape" of tensor name (rec->dtype set): dims into rec, its byte
 * count into *bytes and its text into shape[DBUF__SHAPE_STR_LEN]. */
static int
st_parse_shape(const char *path, const char *name, const json_t *js,
               struct st_tensor *rec, int64_t *bytes, char *shape,
               dbuf_diag_t *diag)
{
  int64_t numel = 1, elem = dbuf_dtype_size(rec->dtype);

  if (!json_is_array(js))
    return dbuf__diag(diag, DBUF_EFORMAT,
                      "%s: tensor '%s': \"shape\" is a JSON %s, not an array",
                      path, name, dbuf__st_json_type(js));
  if (json_array_size(js) > DBUF_MAX_DIMS)
    return dbuf__diag(diag, DBUF_ESHAPE,
                      "%s: tensor '%s': %zu dims (at most %d)", path, name,
                      json_array_size(js), DBUF_MAX_DIMS);
  rec->ndim = (int)json_array_size(js);
  for (int d = 0; d < rec->ndim; d++) {
    const json_t *x = json_array_get(js, (size_t)d);
    if (!json_is_integer(x))
      return dbuf__diag(diag, DBUF_EFORMAT,
                        "%s: tensor '%s': shape[%d] is a JSON %s, not an "
                        "integer",
                        path, name, d, dbuf__st_json_type(x));
    rec->dims[d] = (int64_t)json_integer_value(x);
    if (rec->dims[d] < 0)
      return dbuf__diag(diag, DBUF_ESHAPE,
                        "%s: tensor '%s': shape[%d] is negative (%lld)", path,
                        name, d, (long long)rec->dims[d]);
  }
  dbuf__shape_str(rec->dims, rec->ndim, shape, DBUF__SHAPE_STR_LEN);
  for (int d = 0; d < rec->ndim; d++) {
    if (dbuf__mul(numel, rec->dims[d], &numel))
      return dbuf__diag(diag, DBUF_EOVERFLOW,
                        "%s: tensor '%s': shape %s has more than INT64_MAX "
                        "elements",
                        path, name, shape);
  }
  if (dbuf__mul(numel, elem, bytes))
    return dbuf__diag(diag, DBUF_EOVERFLOW,
                      "%s: tensor '%s': shape %s %s is more than INT64_MAX "
                      "bytes",
                      path, name, shape, dbuf_dtype_st_name(rec->dtype));
  return 0;
}

static int
st_offset(const json_t *v, int64_t *out)
{
  if (!json_is_integer(v) || json_integer_value(v) < 0)
    return -1;
  *out = (int64_t)json_integer_value(v);
  return 0;
}

/* The "data_offsets" of tensor name: [begin, end) holding exactly bytes. */
static int
st_parse_offsets(const char *path, const char *name, const json_t *jo,
                 struct st_tensor *rec, int64_t bytes, const char *shape,
                 dbuf_diag_t *diag)
{
  if (!json_is_array(jo) || json_array_size(jo) != 2 ||
      !json_is_integer(json_array_get(jo, 0)) ||
      !json_is_integer(json_array_get(jo, 1)))
    return dbuf__diag(diag, DBUF_EFORMAT,
                      "%s: tensor '%s': \"data_offsets\" is not an array of "
                      "2 integers",
                      path, name);
  if (st_offset(json_array_get(jo, 0), &rec->begin) != 0 ||
      st_offset(json_array_get(jo, 1), &rec->end) != 0)
    return dbuf__diag(diag, DBUF_EFORMAT,
                      "%s: tensor '%s': data_offsets [%lld, %lld] has a "
                      "negative offset",
                      path, name,
                      (long long)json_integer_value(json_array_get(jo, 0)),
                      (long long)json_integer_value(json_array_get(jo, 1)));
  if (rec->end < rec->begin)
    return dbuf__diag(diag, DBUF_EFORMAT,
                      "%s: tensor '%s': data_offsets [%lld, %lld] end before "
                      "they begin",
                      path, name, (long long)rec->begin, (long long)rec->end);
  if (rec->end - rec->begin != bytes)
    return dbuf__diag(diag, DBUF_EFORMAT,
                      "%s: tensor '%s': data_offsets [%lld, %lld] hold %lld "
                      "bytes, shape %s %s needs %lld",
                      path, name, (long long)rec->begin, (long long)rec->end,
                      (long long)(rec->end - rec->begin), shape,
                      dbuf_dtype_st_name(rec->dtype), (long long)bytes);
  return 0;
}

/* Check one tensor entry of a header and append it to st. */
static int
st_parse_tensor(dbuf_st_t *st, int64_t file, const char *path,
                const char *name, const json_t *v, dbuf_diag_t *diag)
{
  struct st_tensor rec;
  const json_t *jd, *js, *jo;
  int64_t bytes = 0;
  char shape[DBUF__SHAPE_STR_LEN];
  int rc;

  memset(&rec, 0, sizeof rec);
  if (!json_is_object(v))
    return dbuf__diag(diag, DBUF_EFORMAT,
                      "%s: tensor '%s': entry is a JSON %s, not an object",
                      path, name, dbuf__st_json_type(v));
  jd = json_object_get(v, "dtype");
  js = json_object_get(v, "shape");
  jo = json_object_get(v, "data_offsets");
  if (jd == NULL || js == NULL || jo == NULL)
    return dbuf__diag(diag, DBUF_EFORMAT, "%s: tensor '%s': missing \"%s\"",
                      path, name,
                      jd == NULL ? "dtype" : js == NULL ? "shape"
                                                         : "data_offsets");
  if ((rc = st_parse_dtype(path, name, jd, &rec, diag)) != 0 ||
      (rc = st_parse_shape(path, name, js, &rec, &bytes, shape, diag)) != 0 ||
      (rc = st_parse_offsets(path, name, jo, &rec, bytes, shape, diag)) != 0)
    return rc;

  rec.file = file;
  if ((rec.name = strdup(name)) == NULL)
    return dbuf__diag(diag, DBUF_ENOMEM, "%s: tensor '%s': out of memory",
                      path, name);
  if ((rc = st_push(st, &rec)) != 0) {
    free(rec.name);
    return dbuf__diag(diag, rc, "%s: tensor '%s': %s", path, name,
                      dbuf_strerror(rc));
  }
  return 0;
}

static int
st_cmp_offsets(const void *pa, const void *pb)
{
  const struct st_tensor *a = pa, *b = pb;
  if (a->begin != b->begin)
    return a->begin < b->begin ? -1 : 1;
  if (a->end != b->end)
    return a->end < b->end ? -1 : 1;
  return strcmp(a->name, b->name);
}

/* Sorted by offset, the tensors [first, st->n) must tile [0, data_len). */
static int
st_check_tiling(dbuf_st_t *st, int64_t first, const char *path,
                int64_t data_len, dbuf_diag_t *diag)
{
  int64_t n = st->n - first, pos = 0;
  struct st_tensor *t = n > 0 ? st->t + first : NULL; /* st->t may be NULL */

  if (n > 0)
    qsort(t, (size_t)n, sizeof *t, st_cmp_offsets);
  for (int64_t i = 0; i < n; i++) {
    if (t[i].begin < pos)
      return dbuf__diag(diag, DBUF_EFORMAT,
                        "%s: tensor '%s': data_offsets [%lld, %lld] overlap "
                        "tensor '%s' [%lld, %lld]",
                        path, t[i].name, (long long)t[i].begin,
                        (long long)t[i].end, t[i - 1].name,
                        (long long)t[i - 1].begin, (long long)t[i - 1].end);
    if (t[i].begin > pos) {
      if (i == 0)
        return dbuf__diag(diag, DBUF_EFORMAT,
                          "%s: tensor '%s': data_offsets [%lld, %lld] leave "
                          "a gap of %lld bytes at the start of the data",
                          path, t[i].name, (long long)t[i].begin,
                          (long long)t[i].end, (long long)t[i].begin);
      return dbuf__diag(diag, DBUF_EFORMAT,
                        "%s: tensor '%s': data_offsets [%lld, %lld] leave a "
                        "gap of %lld bytes after tensor '%s' [%lld, %lld]",
                        path, t[i].name, (long long)t[i].begin,
                        (long long)t[i].end, (long long)(t[i].begin - pos),
                        t[i - 1].name, (long long)t[i - 1].begin,
                        (long long)t[i - 1].end);
    }
    if (t[i].end > data_len)
      return dbuf__diag(diag, DBUF_EFORMAT,
                        "%s: tensor '%s': data_offsets [%lld, %lld] run past "
                        "the end of the file (data region is %lld bytes): "
                        "truncated file?",
                        path, t[i].name, (long long)t[i].begin,
                        (long long)t[i].end, (long long)data_len);
    pos = t[i].end;
  }
  if (pos < data_len) {
    if (n == 0)
      return dbuf__diag(diag, DBUF_EFORMAT,
                        "%s: %lld bytes of data but no tensors", path,
                        (long long)data_len);
    return dbuf__diag(diag, DBUF_EFORMAT,
                      "%s: %lld bytes after the last tensor ('%s', ends at "
                      "data offset %lld) belong to no tensor",
                      path, (long long)(data_len - pos), t[n - 1].name,
                      (long long)pos);
  }
  return 0;
}

/* "__metadata__": an object of strings, otherwise unread. */
static int
st_check_metadata(const char *path, json_t *val, dbuf_diag_t *diag)
{
  const char *mk;
  json_t *mv;
  if (!json_is_object(val))
    return dbuf__diag(diag, DBUF_EFORMAT,
                      "%s: \"__metadata__\" is a JSON %s, not an object", path,
                      dbuf__st_json_type(val));
  json_object_foreach(val, mk, mv)
  {
    if (!json_is_string(mv))
      return dbuf__diag(diag, DBUF_EFORMAT,
                        "%s: \"__metadata__\" entry '%s' is a JSON %s, not a "
                        "string",
                        path, mk, dbuf__st_json_type(mv));
  }
  return 0;
}

int
dbuf__st_read_file(dbuf_st_t *st, int64_t file, const char *via,
                   dbuf_diag_t *diag)
{
  const char *path = st->paths[file];
  unsigned char prefix[8];
  char *hdr = NULL;
  int64_t hlen = 0, fsize = 0, first = st->n, base;
  json_t *root = NULL;
  json_error_t jerr;
  const char *key;
  json_t *val;
  int rc;

  if (st->ids == NULL && (st->ids = dbuf__calloc(st->nfiles, sizeof *st->ids)) == NULL)
    return dbuf__diag(diag, DBUF_ENOMEM, "%s: out of memory", path);
  if ((rc = st_read_header(path, via, prefix, &hdr, &hlen, &fsize, &st->ids[file], diag)) != 0)
    return rc;
  st->digest = dbuf__fnv1a(st->digest, prefix, sizeof prefix);
  st->digest = dbuf__fnv1a(st->digest, hdr, (size_t)hlen);

  root = json_loadb(hdr, (size_t)hlen, JSON_REJECT_DUPLICATES, &jerr);
  if (root == NULL && via != NULL) { /* no quote of the bytes, see above */
    rc = dbuf__diag(diag, DBUF_EPARSE,
                    "%s (named in %s): header is not valid JSON (line %d, "
                    "column %d)",
                    path, via, jerr.line, jerr.column);
    goto cleanup;
  }
  if (root == NULL) {
    rc = dbuf__diag(diag, DBUF_EPARSE,
                    "%s: header is not valid JSON: %s (line %d, column %d)",
                    path, jerr.text, jerr.line, jerr.column);
    goto cleanup;
  }
  if (!json_is_object(root)) {
    rc = dbuf__diag(diag, DBUF_EFORMAT,
                    "%s: header is a JSON %s, not an object", path,
                    dbuf__st_json_type(root));
    goto cleanup;
  }
  json_object_foreach(root, key, val)
  {
    if (strcmp(key, "__metadata__") == 0)
      rc = st_check_metadata(path, val, diag);
    else
      rc = st_parse_tensor(st, file, path, key, val, diag);
    if (rc != 0)
      goto cleanup;
  }
  /* fsize - 8 - hlen >= 0: st_read_header checked hlen <= fsize - 8. */
  if ((rc = st_check_tiling(st, first, path, fsize - 8 - hlen, diag)) != 0)
    goto cleanup;
  base = 8 + hlen;
  for (int64_t i = first; i < st->n; i++) {
    if (dbuf__add(base, st->t[i].begin, &st->t[i].begin) ||
        dbuf__add(base, st->t[i].end, &st->t[i].end)) {
      rc = dbuf__diag(diag, DBUF_EOVERFLOW,
                      "%s: tensor '%s': file offset past INT64_MAX", path,
                      st->t[i].name);
      goto cleanup;
    }
  }
cleanup:
  json_decref(root);
  free(hdr);
  return rc;
}
