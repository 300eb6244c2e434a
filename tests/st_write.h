/*
 * Test checkpoints: writes .safetensors files and an index from values the
 * test chooses (shared by tests/check_load.c and tests/mpi/mpi_load.c).
 *
 * Values: element i of the tensor with seed k is the F32 value
 * st_value(k, i), a few bits of mantissa so that every one is exact in BF16
 * and F16 too (small integers times a power of two), with a sign.  A tensor
 * is stored in its file as F32, BF16 or F16 bits of that value, so that the
 * loaded value in any of the three buffer dtypes is known exactly.
 */
#ifndef DBUF_ST_WRITE_H
#define DBUF_ST_WRITE_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  const char *name;
  const char *dtype; /* "F32", "BF16", "F16" (or "I32" for an error case) */
  int ndim;
  int64_t dims[4];
  int seed;
} st_tensor_t;

/* An exact value in all three types: (-1)^? x m x 2^e, m < 128, e in [-6, 3]. */
static inline float
st_value(int seed, int64_t i)
{
  uint64_t h = (uint64_t)(seed * 1000003 + 7) * 0x9e3779b97f4a7c15ull + (uint64_t)i * 0xbf58476d1ce4e5b9ull;
  h ^= h >> 29;
  int m = (int)(h & 127), e = (int)((h >> 7) % 10) - 6;
  float v = ldexpf((float)m, e);
  return (h >> 20) & 1 ? -v : v;
}

static inline int64_t
st_numel(const st_tensor_t *t)
{
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++)
    n *= t->dims[d];
  return n;
}

static inline int
st_elem(const char *dtype)
{
  return strcmp(dtype, "F32") == 0 || strcmp(dtype, "I32") == 0 ? 4 : 2;
}

/* The stored bits of st_value(seed, i) in dtype, written at p. */
static inline void
st_store(const char *dtype, int seed, int64_t i, unsigned char *p)
{
  float v = st_value(seed, i);
  uint32_t u;
  memcpy(&u, &v, 4);
  if (strcmp(dtype, "F32") == 0) {
    memcpy(p, &u, 4);
  } else if (strcmp(dtype, "I32") == 0) {
    int32_t k = (int32_t)i;
    memcpy(p, &k, 4);
  } else if (strcmp(dtype, "BF16") == 0) {
    uint16_t b = (uint16_t)(u >> 16); /* exact: the low half is zero */
    memcpy(p, &b, 2);
  } else { /* F16 of a value with at most 7 significant bits, |v| in [2^-6, 127 x 8] */
    uint16_t h = 0;
    if (v != 0) {
      int e;
      float f = frexpf(fabsf(v), &e); /* v = f x 2^e, f in [0.5, 1) */
      uint32_t mant = (uint32_t)ldexpf(f, 11) & 0x3ff; /* 11 bits with the leading one */
      h = (uint16_t)(((uint32_t)(e - 1 + 15) << 10) | mant);
    }
    if (signbit(v))
      h |= 0x8000;
    memcpy(p, &h, 2);
  }
}

/* Write n tensors (in this order in the file) to path; 0 or -1. */
static inline int
st_write(const char *path, const st_tensor_t *t, int n)
{
  char hdr[8192];
  int len = 0;
  int64_t off = 0;
  len += snprintf(hdr + len, sizeof hdr - (size_t)len, "{\"__metadata__\":{\"format\":\"pt\"}");
  for (int k = 0; k < n; k++) {
    int64_t bytes = st_numel(&t[k]) * st_elem(t[k].dtype);
    len += snprintf(hdr + len, sizeof hdr - (size_t)len, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[",
                    t[k].name, t[k].dtype);
    for (int d = 0; d < t[k].ndim; d++)
      len += snprintf(hdr + len, sizeof hdr - (size_t)len, "%s%lld", d ? "," : "",
                      (long long)t[k].dims[d]);
    len += snprintf(hdr + len, sizeof hdr - (size_t)len, "],\"data_offsets\":[%lld,%lld]}",
                    (long long)off, (long long)(off + bytes));
    off += bytes;
  }
  len += snprintf(hdr + len, sizeof hdr - (size_t)len, "}");
  while (len % 8 != 0)
    hdr[len++] = ' ';
  FILE *f = fopen(path, "wb");
  if (f == NULL)
    return -1;
  uint64_t hl = (uint64_t)len;
  unsigned char le[8];
  for (int i = 0; i < 8; i++)
    le[i] = (unsigned char)(hl >> (8 * i));
  fwrite(le, 1, 8, f);
  fwrite(hdr, 1, (size_t)len, f);
  for (int k = 0; k < n; k++) {
    int es = st_elem(t[k].dtype);
    unsigned char buf[4];
    for (int64_t i = 0; i < st_numel(&t[k]); i++) {
      st_store(t[k].dtype, t[k].seed, i, buf);
      fwrite(buf, 1, (size_t)es, f);
    }
  }
  return fclose(f) == 0 ? 0 : -1;
}

/* An index naming, for each of the n tensors, file names[file_of[k]]. */
static inline int
st_write_index(const char *path, const st_tensor_t *t, int n, const char *const *names,
               const int *file_of)
{
  FILE *f = fopen(path, "w");
  if (f == NULL)
    return -1;
  fprintf(f, "{\"metadata\":{},\"weight_map\":{");
  for (int k = 0; k < n; k++)
    fprintf(f, "%s\"%s\":\"%s\"", k ? "," : "", t[k].name, names[file_of[k]]);
  fprintf(f, "}}\n");
  return fclose(f) == 0 ? 0 : -1;
}

#endif
