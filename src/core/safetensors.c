/*
 * safetensors header reader: one or more data files, or an index file that
 * names them.  Reads the 8-byte length and the JSON header of each file,
 * never the tensor data.  All checks live here, so the later row loader can
 * trust every byte range it is given.
 */
#define _POSIX_C_SOURCE 200809L

#include "dbuf/safetensors.h"
#include "core_internal.h"
#include "strmap.h"

#include <assert.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

/* The safetensors dtypes and their element widths in bits (safetensors
 * 0.6 Dtype::bitsize).  Read-only, so not mutable global state. */
static const struct st_dtype {
  const char *name;
  int bits;
} st_dtypes[] = {
    {"BOOL", 8},     {"F4", 4},       {"F6_E2M3", 6}, {"F6_E3M2", 6},
    {"U8", 8},       {"I8", 8},       {"F8_E5M2", 8}, {"F8_E4M3", 8},
    {"F8_E8M0", 8},  {"I16", 16},     {"U16", 16},    {"F16", 16},
    {"BF16", 16},    {"I32", 32},     {"U32", 32},    {"F32", 32},
    {"C64", 64},     {"F64", 64},     {"I64", 64},    {"U64", 64},
};

#define ST_NDTYPES ((int)(sizeof st_dtypes / sizeof st_dtypes[0]))

/* One tensor as read from a header. */
struct st_tensor {
  char *name;
  int64_t file;
  int dtype; /* index into st_dtypes */
  int ndim;
  int64_t dims[DBUF_MAX_DIMS];
  int64_t begin, end; /* relative to the data region while a file is checked,
                         absolute file offsets afterwards */
};

struct dbuf_st {
  int64_t nfiles;
  char **paths; /* [nfiles] */
  int64_t n, cap;
  struct st_tensor *t; /* [n]: file order while reading, tensor-id order at the end */
  dbuf_tensors_t *tensors;
  uint64_t digest;
};

static char *
st_strdup(const char *s)
{
  size_t len = strlen(s) + 1;
  char *c = malloc(len);
  if (c != NULL)
    memcpy(c, s, len);
  return c;
}

static int
st_dtype_find(const char *name)
{
  for (int i = 0; i < ST_NDTYPES; i++) {
    if (strcmp(st_dtypes[i].name, name) == 0)
      return i;
  }
  return -1;
}

int
dbuf_st_dtype_bits(const char *name, int *bits)
{
  if (name == NULL || bits == NULL)
    return DBUF_EINVAL;
  int d = st_dtype_find(name);
  if (d < 0)
    return DBUF_ENOTFOUND;
  *bits = st_dtypes[d].bits;
  return 0;
}

int
dbuf_st_dtype_size(const char *name, int64_t *elem_size)
{
  if (name == NULL || elem_size == NULL)
    return DBUF_EINVAL;
  int d = st_dtype_find(name);
  if (d < 0)
    return DBUF_ENOTFOUND;
  if (st_dtypes[d].bits % 8 != 0)
    return DBUF_EUNSUPPORTED;
  *elem_size = st_dtypes[d].bits / 8;
  return 0;
}

static const char *
st_json_type(const json_t *v)
{
  switch (json_typeof(v)) {
  case JSON_OBJECT:
    return "object";
  case JSON_ARRAY:
    return "array";
  case JSON_STRING:
    return "string";
  case JSON_INTEGER:
    return "integer";
  case JSON_REAL:
    return "real";
  case JSON_TRUE:
  case JSON_FALSE:
    return "boolean";
  default:
    return "null";
  }
}

/* ---------------------------------------------------------------- files */

/* Open a regular file for reading and return its size; via names the index
 * that named path, or is NULL. */
static int
st_fopen(const char *path, const char *via, FILE **fp, int64_t *size,
         dbuf_diag_t *diag)
{
  char why[256];
  int fd, rc = dbuf__input_open(path, -1, &fd, size, why, sizeof why);
  if (rc != 0) {
    if (via != NULL)
      return dbuf__diag(diag, rc, "%s (named in %s): %s", path, via, why);
    return dbuf__diag(diag, rc, "%s: %s", path, why);
  }
  FILE *f = fdopen(fd, "rb");
  if (f == NULL) {
    int err = errno;
    close(fd);
    return dbuf__diag(diag, DBUF_ENOMEM, "%s: cannot read: %s", path,
                      strerror(err));
  }
  *fp = f;
  return 0;
}

static int
st_fread(FILE *f, void *buf, int64_t len, const char *path, const char *what,
         dbuf_diag_t *diag)
{
  if (len > 0 && fread(buf, 1, (size_t)len, f) != (size_t)len)
    return dbuf__diag(diag, DBUF_EIO, "%s: %s reading the %s", path,
                      ferror(f) ? "I/O error" : "unexpected end of file",
                      what);
  return 0;
}

/* Read the length prefix and header of one data file.  On success *hdr
 * (malloc'd, *hlen bytes) and the raw prefix; *fsize is the file size.
 * A file named by an index (via) may be a symbolic link to any file: its
 * messages never quote its bytes (here: the length prefix). */
static int
st_read_header(const char *path, const char *via, unsigned char prefix[8],
               char **hdr, int64_t *hlen, int64_t *fsize, dbuf_diag_t *diag)
{
  FILE *f = NULL;
  char *buf = NULL;
  int64_t size;
  uint64_t n = 0;
  int rc;

  if ((rc = st_fopen(path, via, &f, &size, diag)) != 0)
    return rc;
  if (size < 8) {
    rc = dbuf__diag(diag, DBUF_EFORMAT,
                    "%s: file is %lld bytes, shorter than the 8-byte header "
                    "length",
                    path, (long long)size);
    goto cleanup;
  }
  if ((rc = st_fread(f, prefix, 8, path, "header length", diag)) != 0)
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
  if ((rc = st_fread(f, buf, (int64_t)n, path, "header", diag)) != 0)
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

/* ---------------------------------------------------------- one header */

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

static int
st_offset(const json_t *v, int64_t *out)
{
  if (!json_is_integer(v) || json_integer_value(v) < 0)
    return -1;
  *out = (int64_t)json_integer_value(v);
  return 0;
}

/* Check one tensor entry of a header and append it to st. */
static int
st_parse_tensor(dbuf_st_t *st, int64_t file, const char *path,
                const char *name, const json_t *v, dbuf_diag_t *diag)
{
  struct st_tensor rec;
  const json_t *jd, *js, *jo;
  int64_t numel = 1, bytes, elem;
  char shape[DBUF__SHAPE_STR_LEN];
  int rc;

  memset(&rec, 0, sizeof rec);
  if (!json_is_object(v))
    return dbuf__diag(diag, DBUF_EFORMAT,
                      "%s: tensor '%s': entry is a JSON %s, not an object",
                      path, name, st_json_type(v));
  jd = json_object_get(v, "dtype");
  js = json_object_get(v, "shape");
  jo = json_object_get(v, "data_offsets");
  if (jd == NULL || js == NULL || jo == NULL)
    return dbuf__diag(diag, DBUF_EFORMAT, "%s: tensor '%s': missing \"%s\"",
                      path, name,
                      jd == NULL ? "dtype" : js == NULL ? "shape"
                                                         : "data_offsets");

  if (!json_is_string(jd))
    return dbuf__diag(diag, DBUF_EFORMAT,
                      "%s: tensor '%s': \"dtype\" is a JSON %s, not a string",
                      path, name, st_json_type(jd));
  rec.dtype = st_dtype_find(json_string_value(jd));
  if (rec.dtype < 0)
    return dbuf__diag(diag, DBUF_EUNSUPPORTED,
                      "%s: tensor '%s': unknown dtype '%s'", path, name,
                      json_string_value(jd));
  if (st_dtypes[rec.dtype].bits % 8 != 0)
    return dbuf__diag(diag, DBUF_EUNSUPPORTED,
                      "%s: tensor '%s': dtype %s has %d-bit elements; "
                      "sub-byte dtypes are not supported",
                      path, name, st_dtypes[rec.dtype].name,
                      st_dtypes[rec.dtype].bits);
  elem = st_dtypes[rec.dtype].bits / 8;

  if (!json_is_array(js))
    return dbuf__diag(diag, DBUF_EFORMAT,
                      "%s: tensor '%s': \"shape\" is a JSON %s, not an array",
                      path, name, st_json_type(js));
  if (json_array_size(js) > DBUF_MAX_DIMS)
    return dbuf__diag(diag, DBUF_ESHAPE,
                      "%s: tensor '%s': %zu dims (at most %d)", path, name,
                      json_array_size(js), DBUF_MAX_DIMS);
  rec.ndim = (int)json_array_size(js);
  for (int d = 0; d < rec.ndim; d++) {
    const json_t *x = json_array_get(js, (size_t)d);
    if (!json_is_integer(x))
      return dbuf__diag(diag, DBUF_EFORMAT,
                        "%s: tensor '%s': shape[%d] is a JSON %s, not an "
                        "integer",
                        path, name, d, st_json_type(x));
    rec.dims[d] = (int64_t)json_integer_value(x);
    if (rec.dims[d] < 0)
      return dbuf__diag(diag, DBUF_ESHAPE,
                        "%s: tensor '%s': shape[%d] is negative (%lld)", path,
                        name, d, (long long)rec.dims[d]);
  }
  dbuf__shape_str(rec.dims, rec.ndim, shape, sizeof shape);
  for (int d = 0; d < rec.ndim; d++) {
    if (dbuf__mul(numel, rec.dims[d], &numel))
      return dbuf__diag(diag, DBUF_EOVERFLOW,
                        "%s: tensor '%s': shape %s has more than INT64_MAX "
                        "elements",
                        path, name, shape);
  }
  if (dbuf__mul(numel, elem, &bytes))
    return dbuf__diag(diag, DBUF_EOVERFLOW,
                      "%s: tensor '%s': shape %s %s is more than INT64_MAX "
                      "bytes",
                      path, name, shape, st_dtypes[rec.dtype].name);

  if (!json_is_array(jo) || json_array_size(jo) != 2 ||
      !json_is_integer(json_array_get(jo, 0)) ||
      !json_is_integer(json_array_get(jo, 1)))
    return dbuf__diag(diag, DBUF_EFORMAT,
                      "%s: tensor '%s': \"data_offsets\" is not an array of "
                      "2 integers",
                      path, name);
  if (st_offset(json_array_get(jo, 0), &rec.begin) != 0 ||
      st_offset(json_array_get(jo, 1), &rec.end) != 0)
    return dbuf__diag(diag, DBUF_EFORMAT,
                      "%s: tensor '%s': data_offsets [%lld, %lld] has a "
                      "negative offset",
                      path, name,
                      (long long)json_integer_value(json_array_get(jo, 0)),
                      (long long)json_integer_value(json_array_get(jo, 1)));
  if (rec.end < rec.begin)
    return dbuf__diag(diag, DBUF_EFORMAT,
                      "%s: tensor '%s': data_offsets [%lld, %lld] end before "
                      "they begin",
                      path, name, (long long)rec.begin, (long long)rec.end);
  if (rec.end - rec.begin != bytes)
    return dbuf__diag(diag, DBUF_EFORMAT,
                      "%s: tensor '%s': data_offsets [%lld, %lld] hold %lld "
                      "bytes, shape %s %s needs %lld",
                      path, name, (long long)rec.begin, (long long)rec.end,
                      (long long)(rec.end - rec.begin), shape,
                      st_dtypes[rec.dtype].name, (long long)bytes);

  rec.file = file;
  if ((rec.name = st_strdup(name)) == NULL)
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

/* Read, check and append the tensors of data file `file`. */
static int
st_read_file(dbuf_st_t *st, int64_t file, const char *via, dbuf_diag_t *diag)
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

  if ((rc = st_read_header(path, via, prefix, &hdr, &hlen, &fsize, diag)) != 0)
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
                    st_json_type(root));
    goto cleanup;
  }
  json_object_foreach(root, key, val)
  {
    if (strcmp(key, "__metadata__") == 0) {
      const char *mk;
      json_t *mv;
      if (!json_is_object(val)) {
        rc = dbuf__diag(diag, DBUF_EFORMAT,
                        "%s: \"__metadata__\" is a JSON %s, not an object",
                        path, st_json_type(val));
        goto cleanup;
      }
      json_object_foreach(val, mk, mv)
      {
        if (!json_is_string(mv)) {
          rc = dbuf__diag(diag, DBUF_EFORMAT,
                          "%s: \"__metadata__\" entry '%s' is a JSON %s, "
                          "not a string",
                          path, mk, st_json_type(mv));
          goto cleanup;
        }
      }
      continue;
    }
    if ((rc = st_parse_tensor(st, file, path, key, val, diag)) != 0)
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

/* ----------------------------------------------------------- the index */

static int
st_ends_with_json(const char *path)
{
  size_t len = strlen(path);
  return len >= 5 && strcmp(path + len - 5, ".json") == 0;
}

/* A weight_map file name must stay inside the index's directory. */
static int
st_name_ok(const char *name)
{
  const char *p = name;
  if (name[0] == '\0' || name[0] == '/')
    return 0;
  while (*p != '\0') {
    size_t len = strcspn(p, "/");
    if (len == 2 && p[0] == '.' && p[1] == '.')
      return 0;
    p += len;
    if (*p == '/')
      p++;
  }
  return 1;
}

static int
st_cmp_str(const void *pa, const void *pb)
{
  return strcmp(*(const char *const *)pa, *(const char *const *)pb);
}

/* Read the index: *root (the parsed JSON), *wmap (borrowed from it), and
 * st->paths, the distinct file names in strcmp order joined to the index's
 * directory.  *fnames[f] is the weight_map name of file f (borrowed). */
static int
st_read_index(dbuf_st_t *st, const char *path, json_t **root_out,
              json_t **wmap_out, const char ***fnames_out, dbuf_diag_t *diag)
{
  FILE *f = NULL;
  char *buf = NULL;
  int64_t size, nent, nf = 0, dirlen;
  json_t *root = NULL, *wmap, *meta;
  const char **names = NULL;
  json_error_t jerr;
  const char *key, *slash;
  json_t *val;
  int rc;

  if ((rc = st_fopen(path, NULL, &f, &size, diag)) != 0)
    return rc;
  if (size > DBUF_ST_MAX_HEADER) {
    rc = dbuf__diag(diag, DBUF_EFORMAT,
                    "%s: index file is %lld bytes, over the limit of %lld",
                    path, (long long)size, (long long)DBUF_ST_MAX_HEADER);
    goto cleanup;
  }
  if ((buf = dbuf__mallocn(size, 1)) == NULL) {
    rc = dbuf__diag(diag, DBUF_ENOMEM, "%s: out of memory", path);
    goto cleanup;
  }
  if ((rc = st_fread(f, buf, size, path, "index", diag)) != 0)
    goto cleanup;
  root = json_loadb(buf, (size_t)size, JSON_REJECT_DUPLICATES, &jerr);
  if (root == NULL) {
    rc = dbuf__diag(diag, DBUF_EPARSE,
                    "%s: index is not valid JSON: %s (line %d, column %d)",
                    path, jerr.text, jerr.line, jerr.column);
    goto cleanup;
  }
  if (!json_is_object(root)) {
    rc = dbuf__diag(diag, DBUF_EFORMAT, "%s: index is a JSON %s, not an object",
                    path, st_json_type(root));
    goto cleanup;
  }
  meta = json_object_get(root, "metadata");
  if (meta != NULL && !json_is_object(meta)) {
    rc = dbuf__diag(diag, DBUF_EFORMAT,
                    "%s: index \"metadata\" is a JSON %s, not an object", path,
                    st_json_type(meta));
    goto cleanup;
  }
  wmap = json_object_get(root, "weight_map");
  if (wmap == NULL || !json_is_object(wmap)) {
    rc = dbuf__diag(diag, DBUF_EFORMAT,
                    "%s: index has no \"weight_map\" object", path);
    goto cleanup;
  }
  nent = (int64_t)json_object_size(wmap);
  if (nent == 0) {
    rc = dbuf__diag(diag, DBUF_EFORMAT,
                    "%s: \"weight_map\" is empty: no tensors", path);
    goto cleanup;
  }
  if ((names = dbuf__mallocn(nent, sizeof *names)) == NULL) {
    rc = dbuf__diag(diag, DBUF_ENOMEM, "%s: out of memory", path);
    goto cleanup;
  }
  json_object_foreach(wmap, key, val)
  {
    if (!json_is_string(val)) {
      rc = dbuf__diag(diag, DBUF_EFORMAT,
                      "%s: weight_map entry for tensor '%s' is a JSON %s, "
                      "not a file name",
                      path, key, st_json_type(val));
      goto cleanup;
    }
    if (!st_name_ok(json_string_value(val))) {
      rc = dbuf__diag(diag, DBUF_EFORMAT,
                      "%s: weight_map entry for tensor '%s': file name '%s' "
                      "is empty, absolute or contains '..'",
                      path, key, json_string_value(val));
      goto cleanup;
    }
    names[nf++] = json_string_value(val);
  }
  qsort(names, (size_t)nf, sizeof *names, st_cmp_str);
  {
    int64_t u = 0;
    for (int64_t i = 0; i < nf; i++) {
      if (u == 0 || strcmp(names[u - 1], names[i]) != 0)
        names[u++] = names[i];
    }
    nf = u;
  }

  slash = strrchr(path, '/');
  dirlen = slash ? (int64_t)(slash - path) + 1 : 0;
  if ((st->paths = dbuf__calloc(nf, sizeof *st->paths)) == NULL) {
    rc = dbuf__diag(diag, DBUF_ENOMEM, "%s: out of memory", path);
    goto cleanup;
  }
  st->nfiles = nf;
  for (int64_t i = 0; i < nf; i++) {
    int64_t len = (int64_t)strlen(names[i]), total;
    if (dbuf__add(dirlen, len, &total) || dbuf__add(total, 1, &total)) {
      rc = dbuf__diag(diag, DBUF_EOVERFLOW, "%s: path too long", path);
      goto cleanup;
    }
    if ((st->paths[i] = dbuf__mallocn(total, 1)) == NULL) {
      rc = dbuf__diag(diag, DBUF_ENOMEM, "%s: out of memory", path);
      goto cleanup;
    }
    memcpy(st->paths[i], path, (size_t)dirlen);
    memcpy(st->paths[i] + dirlen, names[i], (size_t)len + 1);
  }
  *root_out = root;
  *wmap_out = wmap;
  *fnames_out = names;
  root = NULL;
  names = NULL;
cleanup:
  free(names);
  json_decref(root);
  free(buf);
  fclose(f);
  return rc;
}

/* ---------------------------------------------------------- name index */

/* Index every tensor of st by name (id = index into st->t); a name in two
 * files is DBUF_EDUP. */
static int
st_names_build(dbuf__strmap_t *ix, const dbuf_st_t *st, dbuf_diag_t *diag)
{
  int rc = dbuf__strmap_reserve(ix, st->n);
  for (int64_t i = 0; rc == 0 && i < st->n; i++) {
    int64_t id;
    rc = dbuf__strmap_add(ix, st->t[i].name, &id);
    if (rc == DBUF_EDUP) {
      const struct st_tensor *o = &st->t[id];
      if (o->file == st->t[i].file) /* JSON_REJECT_DUPLICATES prevents this */
        return dbuf__diag(diag, DBUF_EDUP, "%s: tensor '%s' appears twice",
                          st->paths[o->file], o->name);
      return dbuf__diag(diag, DBUF_EDUP, "%s: tensor '%s' is also in %s",
                        st->paths[st->t[i].file], st->t[i].name,
                        st->paths[o->file]);
    }
  }
  if (rc != 0)
    return dbuf__diag(diag, rc, "indexing %lld tensors: %s", (long long)st->n,
                      dbuf_strerror(rc));
  return 0;
}

/* Index into st->t of the tensor called name, or -1. */
static int64_t
st_names_find(const dbuf__strmap_t *ix, const char *name)
{
  int64_t id;
  return dbuf__strmap_find(ix, name, &id) == 0 ? id : -1;
}

/* weight_map and the file headers must describe the same tensors. */
static int
st_check_index(const dbuf_st_t *st, const dbuf__strmap_t *ix,
               const char *index_path, json_t *wmap, const char **fnames,
               dbuf_diag_t *diag)
{
  const char *key;
  json_t *val;

  json_object_foreach(wmap, key, val)
  {
    const char *fname = json_string_value(val);
    const char **hit = bsearch(&fname, fnames, (size_t)st->nfiles,
                               sizeof *fnames, st_cmp_str);
    assert(hit != NULL); /* fnames holds every weight_map value */
    int64_t file = hit - fnames, r = st_names_find(ix, key);
    if (r < 0)
      return dbuf__diag(diag, DBUF_ENOTFOUND,
                        "%s: weight_map puts tensor '%s' in '%s', but %s has "
                        "no such tensor",
                        index_path, key, fname, st->paths[file]);
    if (st->t[r].file != file)
      return dbuf__diag(diag, DBUF_EFORMAT,
                        "%s: weight_map puts tensor '%s' in '%s', but it is "
                        "in %s",
                        index_path, key, fname, st->paths[st->t[r].file]);
  }
  for (int64_t i = 0; i < st->n; i++) {
    if (json_object_get(wmap, st->t[i].name) == NULL)
      return dbuf__diag(diag, DBUF_ENOTFOUND,
                        "%s: tensor '%s' is not in the weight_map of %s",
                        st->paths[st->t[i].file], st->t[i].name, index_path);
  }
  return 0;
}

/* ---------------------------------------------------------------- order */

/* perm[id] = index into st->t of the tensor with that id. */
static int
st_order(const dbuf_st_t *st, const dbuf__strmap_t *ix,
         const char *const *order, int64_t norder, int64_t *perm,
         dbuf_diag_t *diag)
{
  unsigned char *seen;
  int rc = 0;

  if (order == NULL) {
    for (int64_t i = 0; i < st->n; i++)
      perm[i] = i;
    return 0;
  }
  if ((seen = dbuf__calloc(st->n, 1)) == NULL)
    return dbuf__diag(diag, DBUF_ENOMEM, "out of memory");
  for (int64_t i = 0; i < norder; i++) {
    int64_t r = st_names_find(ix, order[i]);
    if (r < 0) {
      rc = dbuf__diag(diag, DBUF_ENOTFOUND,
                      "order list entry %lld: '%s' is not a tensor of the "
                      "checkpoint",
                      (long long)i + 1, order[i]);
      goto cleanup;
    }
    if (seen[r]) {
      rc = dbuf__diag(diag, DBUF_EDUP,
                      "order list entry %lld: tensor '%s' (%s) is listed "
                      "twice",
                      (long long)i + 1, order[i], st->paths[st->t[r].file]);
      goto cleanup;
    }
    assert(i < st->n); /* i + 1 distinct tensor names so far */
    seen[r] = 1;
    perm[i] = r;
  }
  for (int64_t r = 0; r < st->n; r++) {
    if (!seen[r]) {
      rc = dbuf__diag(diag, DBUF_ENOTFOUND,
                      "%s: tensor '%s' is not in the order list (%lld of "
                      "%lld tensors listed)",
                      st->paths[st->t[r].file], st->t[r].name,
                      (long long)norder, (long long)st->n);
      goto cleanup;
    }
  }
cleanup:
  free(seen);
  return rc;
}

/* -------------------------------------------------------------- public */

void
dbuf_st_destroy(dbuf_st_t *st)
{
  if (st == NULL)
    return;
  for (int64_t i = 0; i < st->n; i++)
    free(st->t[i].name);
  free(st->t);
  for (int64_t f = 0; f < st->nfiles; f++)
    free(st->paths[f]);
  free(st->paths);
  dbuf_tensors_destroy(st->tensors);
  free(st);
}

int
dbuf_st_open(const char *const *paths, int64_t npaths,
             const char *const *order, int64_t norder, dbuf_st_t **out,
             dbuf_diag_t *diag)
{
  dbuf_st_t *st = NULL;
  json_t *index = NULL, *wmap = NULL;
  const char **fnames = NULL;
  const char *index_path = NULL;
  dbuf__strmap_t ix = DBUF__STRMAP_INIT;
  int64_t *perm = NULL;
  struct st_tensor *sorted = NULL;
  int rc;

  if (paths == NULL || out == NULL || npaths < 1 || norder < 0 ||
      (order == NULL && norder > 0))
    return dbuf__diag(diag, DBUF_EINVAL,
                      "safetensors: NULL argument or bad count");
  for (int64_t i = 0; i < npaths; i++) {
    if (paths[i] == NULL || paths[i][0] == '\0')
      return dbuf__diag(diag, DBUF_EINVAL, "safetensors: path %lld is %s",
                        (long long)i, paths[i] ? "empty" : "NULL");
    if (npaths > 1 && st_ends_with_json(paths[i]))
      return dbuf__diag(diag, DBUF_EINVAL,
                        "%s: an index file must be the only path given",
                        paths[i]);
  }
  for (int64_t i = 0; i < norder; i++) {
    if (order[i] == NULL)
      return dbuf__diag(diag, DBUF_EINVAL, "order list entry %lld is NULL",
                        (long long)i + 1);
  }

  if ((st = calloc(1, sizeof *st)) == NULL)
    return dbuf__diag(diag, DBUF_ENOMEM, "safetensors: out of memory");
  st->digest = DBUF__FNV_OFFSET;
  if (npaths == 1 && st_ends_with_json(paths[0])) {
    index_path = paths[0];
    if ((rc = st_read_index(st, index_path, &index, &wmap, &fnames, diag)) != 0)
      goto cleanup;
  } else {
    if ((st->paths = dbuf__calloc(npaths, sizeof *st->paths)) == NULL) {
      rc = dbuf__diag(diag, DBUF_ENOMEM, "safetensors: out of memory");
      goto cleanup;
    }
    st->nfiles = npaths;
    for (int64_t i = 0; i < npaths; i++) {
      if ((st->paths[i] = st_strdup(paths[i])) == NULL) {
        rc = dbuf__diag(diag, DBUF_ENOMEM, "safetensors: out of memory");
        goto cleanup;
      }
    }
  }

  for (int64_t f = 0; f < st->nfiles; f++) {
    if ((rc = st_read_file(st, f, index_path, diag)) != 0)
      goto cleanup;
  }
  if (st->n == 0) {
    rc = dbuf__diag(diag, DBUF_EFORMAT, "%s: no tensors",
                    index_path != NULL ? index_path : st->paths[0]);
    goto cleanup;
  }
  if ((rc = st_names_build(&ix, st, diag)) != 0)
    goto cleanup;
  if (index != NULL &&
      (rc = st_check_index(st, &ix, index_path, wmap, fnames, diag)) != 0)
    goto cleanup;

  if ((perm = dbuf__mallocn(st->n, sizeof *perm)) == NULL ||
      (sorted = dbuf__mallocn(st->n, sizeof *sorted)) == NULL) {
    rc = dbuf__diag(diag, DBUF_ENOMEM, "safetensors: out of memory");
    goto cleanup;
  }
  if ((rc = st_order(st, &ix, order, norder, perm, diag)) != 0)
    goto cleanup;
  for (int64_t i = 0; i < st->n; i++)
    sorted[i] = st->t[perm[i]]; /* names move with their records */
  free(st->t);
  st->t = sorted;
  st->cap = st->n;
  sorted = NULL;

  if ((rc = dbuf_tensors_create(&st->tensors)) != 0 ||
      (rc = dbuf_tensors_reserve(st->tensors, st->n)) != 0) {
    rc = dbuf__diag(diag, rc, "safetensors: %s", dbuf_strerror(rc));
    goto cleanup;
  }
  for (int64_t i = 0; i < st->n; i++) {
    const struct st_tensor *t = &st->t[i];
    dbuf_diag_t inner;
    dbuf_diag_clear(&inner);
    rc = dbuf_tensors_add(st->tensors, t->name, t->ndim, t->dims, &inner);
    if (rc != 0) {
      rc = dbuf__diag(diag, rc, "%s: %s", st->paths[t->file],
                      inner.msg[0] ? inner.msg : dbuf_strerror(rc));
      goto cleanup;
    }
    st->digest = dbuf__fnv1a(st->digest, t->name, strlen(t->name) + 1);
  }
  *out = st;
  st = NULL;
  rc = 0;
cleanup:
  free(sorted);
  free(perm);
  dbuf__strmap_free(&ix);
  free(fnames);
  json_decref(index);
  dbuf_st_destroy(st);
  return rc;
}

const dbuf_tensors_t *
dbuf_st_tensors(const dbuf_st_t *st)
{
  return st ? st->tensors : NULL;
}

int64_t
dbuf_st_file_count(const dbuf_st_t *st)
{
  return st ? st->nfiles : 0;
}

const char *
dbuf_st_file_path(const dbuf_st_t *st, int64_t f)
{
  return (st != NULL && f >= 0 && f < st->nfiles) ? st->paths[f] : NULL;
}

int
dbuf_st_tensor_info(const dbuf_st_t *st, int64_t id, dbuf_st_info_t *info)
{
  if (st == NULL || info == NULL)
    return DBUF_EINVAL;
  if (id < 0 || id >= st->n)
    return DBUF_ERANGE;
  const struct st_tensor *t = &st->t[id];
  info->file = t->file;
  info->path = st->paths[t->file];
  info->dtype = st_dtypes[t->dtype].name;
  info->elem_size = st_dtypes[t->dtype].bits / 8;
  info->data_begin = t->begin;
  info->data_end = t->end;
  return 0;
}

uint64_t
dbuf_st_digest(const dbuf_st_t *st)
{
  return st ? st->digest : 0;
}
