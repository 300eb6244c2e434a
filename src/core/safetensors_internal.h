/*
 * Inside the safetensors reader.  Four files, one-way:
 *   safetensors_file.c    file access: open an input, read exact byte counts,
 *                         name JSON types in messages
 *   safetensors_header.c  one data file: dtypes, the length prefix, the JSON
 *                         header, each tensor record, the tiling check
 *   safetensors_index.c   an index file: weight_map, the files it names, and
 *                         the cross-check of weight_map against the headers
 *   safetensors.c         the public API: dbuf_st_open (files, name index,
 *                         tensor order, the tensor list) and the getters
 * Each file calls only the ones above it in this list.
 */
#ifndef DBUF_SAFETENSORS_INTERNAL_H
#define DBUF_SAFETENSORS_INTERNAL_H

#include "dbuf/safetensors.h"
#include "core_internal.h"
#include "strmap.h"

#include <jansson.h>
#include <stdio.h>

/* One tensor as read from a header. */
struct st_tensor {
  char *name;
  int64_t file;
  dbuf_dtype_t dtype; /* a byte-sized type */
  int ndim;
  int64_t dims[DBUF_MAX_DIMS];
  int64_t begin, end; /* relative to the data region while a file is checked,
                         absolute file offsets afterwards */
};

/* A data file as its header was read: a later open must find the same one
 * (dbuf_st_file_check). */
struct st_file_id {
  uint64_t dev, ino;
  int64_t size, mtime_s, mtime_ns;
};

struct dbuf_st {
  int64_t nfiles;
  char **paths;           /* [nfiles] */
  struct st_file_id *ids; /* [nfiles], filled as each header is read */
  int64_t n, cap;
  struct st_tensor *t; /* [n]: file order while reading, tensor-id order at the end */
  dbuf_tensors_t *tensors;
  uint64_t digest; /* FNV-1a of every header (prefix and JSON), then every name */
};

/* ---- safetensors_file.c */

/* Open a regular file for reading and return its size; via names the index
 * that named path, or is NULL.  id (may be NULL): the file's identity. */
int dbuf__st_fopen(const char *path, const char *via, FILE **fp, int64_t *size,
                   struct st_file_id *id, dbuf_diag_t *diag);

/* Read exactly len bytes of what ("header", "index") or fail with DBUF_EIO. */
int dbuf__st_fread(FILE *f, void *buf, int64_t len, const char *path,
                   const char *what, dbuf_diag_t *diag);

/* "object", "array", "string", ... for messages. */
const char *dbuf__st_json_type(const json_t *v);

/* ---- safetensors_header.c */


/* Read, check and append the tensors of data file `file` (st->paths[file]);
 * via is the index that named it, or NULL.  Feeds the header to st->digest. */
int dbuf__st_read_file(dbuf_st_t *st, int64_t file, const char *via,
                       dbuf_diag_t *diag);

/* ---- safetensors_index.c */

/* Whether path names an index file (ends in ".json"). */
int dbuf__st_is_index(const char *path);

/* Read the index: *root (the parsed JSON), *wmap (borrowed from it), and
 * st->paths, the distinct file names in strcmp order joined to the index's
 * directory.  *fnames[f] is the weight_map name of file f (borrowed). */
int dbuf__st_read_index(dbuf_st_t *st, const char *path, json_t **root_out,
                        json_t **wmap_out, const char ***fnames_out,
                        dbuf_diag_t *diag);

/* weight_map and the file headers must describe the same tensors; ix maps
 * each name to its index in st->t. */
int dbuf__st_check_index(const dbuf_st_t *st, const dbuf__strmap_t *ix,
                         const char *index_path, json_t *wmap,
                         const char **fnames, dbuf_diag_t *diag);

#endif /* DBUF_SAFETENSORS_INTERNAL_H */
