/*
 * safetensors header reader: one or more data files, or an index file that
 * names them.  Reads the 8-byte length and the JSON header of each file,
 * never the tensor data.  All checks live in this reader, so the later row
 * loader can trust every byte range it is given.
 *
 * This file is the public API: dbuf_st_open (the files, the name index, the
 * tensor order, the tensor list) and the getters.  The header of one data
 * file is read in safetensors_header.c, the index in safetensors_index.c,
 * bytes in safetensors_file.c (see safetensors_internal.h).
 */
#include "safetensors_internal.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

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
  free(st->ids);
  dbuf_tensors_destroy(st->tensors);
  free(st);
}

/* The arguments of dbuf_st_open. */
static int
st_check_args(const char *const *paths, int64_t npaths,
              const char *const *order, int64_t norder, dbuf_st_t **out,
              dbuf_diag_t *diag)
{
  if (paths == NULL || out == NULL || npaths < 1 || norder < 0 ||
      (order == NULL && norder > 0))
    return dbuf__diag(diag, DBUF_EINVAL,
                      "safetensors: NULL argument or bad count");
  for (int64_t i = 0; i < npaths; i++) {
    if (paths[i] == NULL || paths[i][0] == '\0')
      return dbuf__diag(diag, DBUF_EINVAL, "safetensors: path %lld is %s",
                        (long long)i, paths[i] ? "empty" : "NULL");
    if (npaths > 1 && dbuf__st_is_index(paths[i]))
      return dbuf__diag(diag, DBUF_EINVAL,
                        "%s: an index file must be the only path given",
                        paths[i]);
  }
  for (int64_t i = 0; i < norder; i++) {
    if (order[i] == NULL)
      return dbuf__diag(diag, DBUF_EINVAL, "order list entry %lld is NULL",
                        (long long)i + 1);
  }
  return 0;
}

/* st->paths: copies of the npaths data file paths. */
static int
st_copy_paths(dbuf_st_t *st, const char *const *paths, int64_t npaths,
              dbuf_diag_t *diag)
{
  if ((st->paths = dbuf__calloc(npaths, sizeof *st->paths)) == NULL)
    return dbuf__diag(diag, DBUF_ENOMEM, "safetensors: out of memory");
  st->nfiles = npaths;
  for (int64_t i = 0; i < npaths; i++) {
    if ((st->paths[i] = strdup(paths[i])) == NULL)
      return dbuf__diag(diag, DBUF_ENOMEM, "safetensors: out of memory");
  }
  return 0;
}

/* Put st->t in tensor-id order (the order list, or file order). */
static int
st_sort(dbuf_st_t *st, const dbuf__strmap_t *ix, const char *const *order,
        int64_t norder, dbuf_diag_t *diag)
{
  int64_t *perm = dbuf__mallocn(st->n, sizeof *perm);
  struct st_tensor *sorted = dbuf__mallocn(st->n, sizeof *sorted);
  int rc;

  if (perm == NULL || sorted == NULL)
    rc = dbuf__diag(diag, DBUF_ENOMEM, "safetensors: out of memory");
  else if ((rc = st_order(st, ix, order, norder, perm, diag)) == 0) {
    for (int64_t i = 0; i < st->n; i++)
      sorted[i] = st->t[perm[i]]; /* names move with their records */
    free(st->t);
    st->t = sorted;
    st->cap = st->n;
    sorted = NULL;
  }
  free(sorted);
  free(perm);
  return rc;
}

/* st->tensors from st->t, and the names into st->digest. */
static int
st_make_tensors(dbuf_st_t *st, dbuf_diag_t *diag)
{
  int rc;
  if ((rc = dbuf_tensors_create(&st->tensors)) != 0 ||
      (rc = dbuf_tensors_reserve(st->tensors, st->n)) != 0)
    return dbuf__diag(diag, rc, "safetensors: %s", dbuf_strerror(rc));
  for (int64_t i = 0; i < st->n; i++) {
    const struct st_tensor *t = &st->t[i];
    dbuf_diag_t inner;
    dbuf_diag_clear(&inner);
    rc = dbuf_tensors_add(st->tensors, t->name, t->ndim, t->dims, &inner);
    if (rc == 0)
      rc = dbuf_tensors_set_dtype(st->tensors, i, t->dtype);
    if (rc != 0)
      return dbuf__diag(diag, rc, "%s: %s", st->paths[t->file],
                        inner.msg[0] ? inner.msg : dbuf_strerror(rc));
    st->digest = dbuf__fnv1a(st->digest, t->name, strlen(t->name) + 1);
  }
  return 0;
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
  int rc;

  if ((rc = st_check_args(paths, npaths, order, norder, out, diag)) != 0)
    return rc;
  if ((st = calloc(1, sizeof *st)) == NULL)
    return dbuf__diag(diag, DBUF_ENOMEM, "safetensors: out of memory");
  st->digest = DBUF__FNV_OFFSET;
  if (npaths == 1 && dbuf__st_is_index(paths[0])) {
    index_path = paths[0];
    rc = dbuf__st_read_index(st, index_path, &index, &wmap, &fnames, diag);
  } else {
    rc = st_copy_paths(st, paths, npaths, diag);
  }
  for (int64_t f = 0; rc == 0 && f < st->nfiles; f++)
    rc = dbuf__st_read_file(st, f, index_path, diag);
  if (rc != 0)
    goto cleanup;
  if (st->n == 0) {
    rc = dbuf__diag(diag, DBUF_EFORMAT, "%s: no tensors",
                    index_path != NULL ? index_path : st->paths[0]);
    goto cleanup;
  }
  if ((rc = st_names_build(&ix, st, diag)) != 0 ||
      (index != NULL && (rc = dbuf__st_check_index(st, &ix, index_path, wmap,
                                                   fnames, diag)) != 0) ||
      (rc = st_sort(st, &ix, order, norder, diag)) != 0 ||
      (rc = st_make_tensors(st, diag)) != 0)
    goto cleanup;
  *out = st;
  st = NULL;
cleanup:
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
  info->dtype = dbuf_dtype_st_name(t->dtype);
  info->elem_size = dbuf_dtype_size(t->dtype);
  info->type = t->dtype;
  info->data_begin = t->begin;
  info->data_end = t->end;
  return 0;
}

uint64_t
dbuf_st_digest(const dbuf_st_t *st)
{
  return st ? st->digest : 0;
}
