/*
 * safetensors reader, file access: opening an input file (never blocking,
 * regular files only), reading exact byte counts, and the JSON type names
 * of the messages.  See safetensors_internal.h for the four files.
 */
#define _POSIX_C_SOURCE 200809L

#include "safetensors_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void
file_id(const struct stat *sb, struct st_file_id *id)
{
  id->dev = (uint64_t)sb->st_dev;
  id->ino = (uint64_t)sb->st_ino;
  id->size = (int64_t)sb->st_size;
  id->mtime_s = (int64_t)sb->st_mtim.tv_sec;
  id->mtime_ns = (int64_t)sb->st_mtim.tv_nsec;
}

int
dbuf__st_fopen(const char *path, const char *via, FILE **fp, int64_t *size, struct st_file_id *id,
               dbuf_diag_t *diag)
{
  char why[256];
  struct stat sb;
  int fd, rc = dbuf__input_open(path, -1, &fd, size, why, sizeof why);
  if (rc != 0) {
    if (via != NULL)
      return dbuf__diag(diag, rc, "%s (named in %s): %s", path, via, why);
    return dbuf__diag(diag, rc, "%s: %s", path, why);
  }
  if (id != NULL) {
    if (fstat(fd, &sb) != 0) {
      int err = errno;
      close(fd);
      return dbuf__diag(diag, DBUF_EIO, "%s: cannot stat: %s", path, strerror(err));
    }
    file_id(&sb, id);
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

int
dbuf_st_file_check(const dbuf_st_t *st, int64_t f, int fd, dbuf_diag_t *diag)
{
  struct stat sb;
  struct st_file_id now;
  if (st == NULL || f < 0 || f >= st->nfiles || st->ids == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "dbuf_st_file_check: no such file");
  const char *path = st->paths[f];
  const struct st_file_id *was = &st->ids[f];
  if ((fd >= 0 ? fstat(fd, &sb) : stat(path, &sb)) != 0) {
    int err = errno;
    return dbuf__diag(diag, err == ENOENT ? DBUF_ENOTFOUND : DBUF_EIO, "%s: cannot stat: %s", path,
                      strerror(err));
  }
  file_id(&sb, &now);
  if (now.dev != was->dev || now.ino != was->ino)
    return dbuf__diag(diag, DBUF_EIO,
                      "%s: changed since its header was read: the name now leads to another "
                      "file (replaced while the run went on?)",
                      path);
  if (now.size != was->size)
    return dbuf__diag(diag, DBUF_EIO,
                      "%s: changed since its header was read: now %lld bytes, was %lld", path,
                      (long long)now.size, (long long)was->size);
  if (now.mtime_s != was->mtime_s || now.mtime_ns != was->mtime_ns)
    return dbuf__diag(diag, DBUF_EIO,
                      "%s: changed since its header was read: written again (modification "
                      "time)",
                      path);
  return 0;
}

int
dbuf__st_fread(FILE *f, void *buf, int64_t len, const char *path,
               const char *what, dbuf_diag_t *diag)
{
  if (len > 0 && fread(buf, 1, (size_t)len, f) != (size_t)len)
    return dbuf__diag(diag, DBUF_EIO, "%s: %s reading the %s", path,
                      ferror(f) ? "I/O error" : "unexpected end of file",
                      what);
  return 0;
}

const char *
dbuf__st_json_type(const json_t *v)
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
