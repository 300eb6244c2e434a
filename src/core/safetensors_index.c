/*
 * safetensors reader, the index file (model.safetensors.index.json):
 * weight_map, the data files it names, and the cross-check of weight_map
 * against the headers of those files.  See safetensors_internal.h for the
 * four files.
 */
#include "safetensors_internal.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

int
dbuf__st_is_index(const char *path)
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

/* Read and parse the index file: *root, and *wmap (borrowed from it), a
 * weight_map object with at least one entry. */
static int
st_index_load(const char *path, json_t **root_out, json_t **wmap_out,
              dbuf_diag_t *diag)
{
  FILE *f = NULL;
  char *buf = NULL;
  int64_t size;
  json_t *root = NULL, *wmap, *meta;
  json_error_t jerr;
  int rc;

  if ((rc = dbuf__st_fopen(path, NULL, &f, &size, NULL, diag)) != 0)
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
  if ((rc = dbuf__st_fread(f, buf, size, path, "index", diag)) != 0)
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
                    path, dbuf__st_json_type(root));
    goto cleanup;
  }
  meta = json_object_get(root, "metadata");
  if (meta != NULL && !json_is_object(meta)) {
    rc = dbuf__diag(diag, DBUF_EFORMAT,
                    "%s: index \"metadata\" is a JSON %s, not an object", path,
                    dbuf__st_json_type(meta));
    goto cleanup;
  }
  wmap = json_object_get(root, "weight_map");
  if (wmap == NULL || !json_is_object(wmap)) {
    rc = dbuf__diag(diag, DBUF_EFORMAT,
                    "%s: index has no \"weight_map\" object", path);
    goto cleanup;
  }
  if (json_object_size(wmap) == 0) {
    rc = dbuf__diag(diag, DBUF_EFORMAT,
                    "%s: \"weight_map\" is empty: no tensors", path);
    goto cleanup;
  }
  *root_out = root;
  *wmap_out = wmap;
  root = NULL;
cleanup:
  json_decref(root);
  free(buf);
  fclose(f);
  return rc;
}

/* The distinct file names of weight_map in strcmp order: *names (malloc'd,
 * the strings borrowed from wmap) and *nf. */
static int
st_index_files(const char *path, json_t *wmap, const char ***names_out,
               int64_t *nf_out, dbuf_diag_t *diag)
{
  int64_t nf = 0, u = 0;
  const char **names, *key;
  json_t *val;

  if ((names = dbuf__mallocn((int64_t)json_object_size(wmap), sizeof *names)) ==
      NULL)
    return dbuf__diag(diag, DBUF_ENOMEM, "%s: out of memory", path);
  json_object_foreach(wmap, key, val)
  {
    int rc = 0;
    if (!json_is_string(val))
      rc = dbuf__diag(diag, DBUF_EFORMAT,
                      "%s: weight_map entry for tensor '%s' is a JSON %s, "
                      "not a file name",
                      path, key, dbuf__st_json_type(val));
    else if (!st_name_ok(json_string_value(val)))
      rc = dbuf__diag(diag, DBUF_EFORMAT,
                      "%s: weight_map entry for tensor '%s': file name '%s' "
                      "is empty, absolute or contains '..'",
                      path, key, json_string_value(val));
    if (rc != 0) {
      free(names);
      return rc;
    }
    names[nf++] = json_string_value(val);
  }
  qsort(names, (size_t)nf, sizeof *names, st_cmp_str);
  for (int64_t i = 0; i < nf; i++) {
    if (u == 0 || strcmp(names[u - 1], names[i]) != 0)
      names[u++] = names[i];
  }
  *names_out = names;
  *nf_out = u;
  return 0;
}

/* st->paths: each of the nf names joined to the index's directory. */
static int
st_index_paths(dbuf_st_t *st, const char *path, const char **names, int64_t nf,
               dbuf_diag_t *diag)
{
  const char *slash = strrchr(path, '/');
  int64_t dirlen = slash ? (int64_t)(slash - path) + 1 : 0;

  if ((st->paths = dbuf__calloc(nf, sizeof *st->paths)) == NULL)
    return dbuf__diag(diag, DBUF_ENOMEM, "%s: out of memory", path);
  st->nfiles = nf;
  for (int64_t i = 0; i < nf; i++) {
    int64_t len = (int64_t)strlen(names[i]), total;
    if (dbuf__add(dirlen, len, &total) || dbuf__add(total, 1, &total))
      return dbuf__diag(diag, DBUF_EOVERFLOW, "%s: path too long", path);
    if ((st->paths[i] = dbuf__mallocn(total, 1)) == NULL)
      return dbuf__diag(diag, DBUF_ENOMEM, "%s: out of memory", path);
    memcpy(st->paths[i], path, (size_t)dirlen);
    memcpy(st->paths[i] + dirlen, names[i], (size_t)len + 1);
  }
  return 0;
}

int
dbuf__st_read_index(dbuf_st_t *st, const char *path, json_t **root_out,
                    json_t **wmap_out, const char ***fnames_out,
                    dbuf_diag_t *diag)
{
  json_t *root = NULL, *wmap = NULL;
  const char **names = NULL;
  int64_t nf = 0;
  int rc;

  if ((rc = st_index_load(path, &root, &wmap, diag)) != 0 ||
      (rc = st_index_files(path, wmap, &names, &nf, diag)) != 0 ||
      (rc = st_index_paths(st, path, names, nf, diag)) != 0) {
    free(names);
    json_decref(root);
    return rc; /* st->paths, if any, go with st */
  }
  *root_out = root;
  *wmap_out = wmap;
  *fnames_out = names;
  return 0;
}

int
dbuf__st_check_index(const dbuf_st_t *st, const dbuf__strmap_t *ix,
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
    int64_t file = hit - fnames, r;
    if (dbuf__strmap_find(ix, key, &r) != 0)
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
