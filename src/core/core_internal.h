/* Internal helpers shared by the core: checked arithmetic and diagnostics. */
#ifndef DBUF_CORE_INTERNAL_H
#define DBUF_CORE_INTERNAL_H

#include "dbuf/error.h"

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define DBUF__PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define DBUF__PRINTF(a, b)
#endif

/* Fill diag (when not NULL) with a formatted message; returns code. */
int dbuf__diag(dbuf_diag_t *diag, int code, const char *fmt, ...)
    DBUF__PRINTF(3, 4);

/* Checked 64-bit arithmetic: 0 on success, DBUF_EOVERFLOW otherwise. */
static inline int
dbuf__mul(int64_t a, int64_t b, int64_t *out)
{
  return __builtin_mul_overflow(a, b, out) ? DBUF_EOVERFLOW : 0;
}

static inline int
dbuf__add(int64_t a, int64_t b, int64_t *out)
{
  return __builtin_add_overflow(a, b, out) ? DBUF_EOVERFLOW : 0;
}

/* Round a (>= 0) up to a multiple of m (> 0), checked. */
static inline int
dbuf__round_up(int64_t a, int64_t m, int64_t *out)
{
  int64_t r = a % m;
  if (r == 0) {
    *out = a;
    return 0;
  }
  return dbuf__add(a, m - r, out);
}

/* Greatest common divisor of two non-negative values. */
static inline int64_t
dbuf__gcd(int64_t a, int64_t b)
{
  while (b != 0) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

/* Ceiling of a / b for a >= 0 and b >= 1, without the overflow of
 * (a + b - 1) / b when a is near INT64_MAX. */
static inline int64_t
dbuf__ceil_div(int64_t a, int64_t b)
{
  return a / b + (a % b != 0);
}

/* Checked allocation of n elements of size sz (never returns for n*sz overflow). */
void *dbuf__calloc(int64_t n, size_t sz);
void *dbuf__mallocn(int64_t n, size_t sz);
void *dbuf__reallocn(void *p, int64_t n, size_t sz);

#endif /* DBUF_CORE_INTERNAL_H */
