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
#include <unistd.h>

int
dbuf__st_fopen(const char *path, const char *via, FILE **fp, int64_t *size,
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
