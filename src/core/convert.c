/* Element conversion between F32, BF16 and F16 (dbuf/convert.h). */
#include "core_internal.h"

#include "dbuf/convert.h"

#include <string.h>

/* ------------------------------------------------------------------------ */
/* One element, on bit patterns                                              */

static inline uint32_t
f32_bits(float f)
{
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static inline float
bits_f32(uint32_t u)
{
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* F16 -> F32 bits, exact; a NaN keeps its sign and payload and is made quiet. */
static inline uint32_t
h2f(uint16_t h)
{
  uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) { /* zero or m x 2^-24: exact in F32 arithmetic */
    float v = (float)m * 0x1p-24f;
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return s | u;
  }
  if (e == 0x1f)
    return m == 0 ? s | 0x7f800000u : s | 0x7fc00000u | (m << 13);
  return s | (e + 112) << 23 | m << 13;
}

static inline uint32_t
b2f(uint16_t b)
{
  uint32_t u = (uint32_t)b << 16;
  if ((u & 0x7fffffffu) > 0x7f800000u)
    u |= 0x00400000u; /* quiet */
  return u;
}

/* F32 bits -> BF16, nearest even; NaN quiet with the top payload bits. */
static inline uint16_t
f2b(uint32_t u)
{
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return (uint16_t)((u >> 16) | 0x0040u);
  /* Adding 0x7fff (+1 when the kept part is odd) carries exactly when the
   * dropped half is above half, or half with an odd kept part; a carry out
   * of the largest finite value gives the infinity. */
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

/* F32 bits -> F16, nearest even, with subnormals. */
static inline uint16_t
f2h(uint32_t u)
{
  uint16_t s = (uint16_t)((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u)
    return (uint16_t)(s | 0x7e00u | ((a >> 13) & 0x3ffu));
  if (a >= 0x477ff000u) /* 65520 = halfway past 65504 (odd): ties up to inf */
    return (uint16_t)(s | 0x7c00u);
  if (a >= 0x38800000u) { /* 2^-14: an F16 normal */
    uint32_t h = (a - 0x38000000u) >> 13, rem = a & 0x1fffu;
    h += (rem > 0x1000u) | ((rem == 0x1000u) & h); /* no branch: rem is noise */
    return (uint16_t)(s | h);
  }
  if (a <= 0x33000000u) /* at most 2^-25: half the least subnormal, even 0 */
    return s;
  /* A subnormal result: the value in units of 2^-24 is m >> shift. */
  uint32_t m = (a & 0x7fffffu) | 0x800000u;
  int shift = 126 - (int)(a >> 23); /* -(E + 1) for the exponent E, 14..24 */
  uint32_t h = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
  h += (rem > half) | ((rem == half) & h);
  return (uint16_t)(s | h);
}

float
dbuf_f16_to_f32(uint16_t h)
{
  return bits_f32(h2f(h));
}

float
dbuf_bf16_to_f32(uint16_t b)
{
  return bits_f32(b2f(b));
}

uint16_t
dbuf_f32_to_f16(float f)
{
  return f2h(f32_bits(f));
}

uint16_t
dbuf_f32_to_bf16(float f)
{
  return f2b(f32_bits(f));
}

/* ------------------------------------------------------------------------ */
/* Classes, for the counts                                                    */

/* Exponent field mask and mantissa mask of each of the three types. */
typedef struct {
  uint32_t emask, mmask;
} fmt_t;

static const fmt_t FMT_F32 = {0x7f800000u, 0x007fffffu};
static const fmt_t FMT_BF16 = {0x7f80u, 0x007fu};
static const fmt_t FMT_F16 = {0x7c00u, 0x03ffu};

enum { C_ZERO, C_SUB, C_NORMAL, C_INF, C_NAN };

static inline int
fclass(uint32_t bits, fmt_t f)
{
  uint32_t e = bits & f.emask, m = bits & f.mmask;
  if (e == f.emask)
    return m ? C_NAN : C_INF;
  if (e == 0)
    return m ? C_SUB : C_ZERO;
  return C_NORMAL;
}

typedef struct {
  int64_t changed, overflowed, subnormal, zeroed;
} counts_t;

/* Count one conversion: source (bits in its own format and as F32), result
 * (bits in its own format and widened back to F32). */
static inline void
count_one(counts_t *c, int sc, uint32_t src_f32, int dc, uint32_t dst_f32)
{
  if (sc == C_NAN)
    return;
  c->changed += dst_f32 != src_f32;
  c->overflowed += sc != C_INF && dc == C_INF;
  c->subnormal += sc == C_NORMAL && dc == C_SUB;
  c->zeroed += sc != C_ZERO && dc == C_ZERO;
}

/* ------------------------------------------------------------------------ */
/* Arrays                                                                     */

static int
is_conv_float(dbuf_dtype_t d)
{
  return d == DBUF_DTYPE_F32 || d == DBUF_DTYPE_BF16 || d == DBUF_DTYPE_F16;
}

int
dbuf_convert_check(dbuf_dtype_t src, dbuf_dtype_t dst, dbuf_diag_t *diag)
{
  if (dbuf_dtype_size(src) <= 0 || dbuf_dtype_size(dst) <= 0)
    return dbuf__diag(diag, DBUF_EINVAL, "no conversion from %s to %s: %s has no byte size",
                      dbuf_dtype_name(src), dbuf_dtype_name(dst),
                      dbuf_dtype_size(src) <= 0 ? dbuf_dtype_name(src) : dbuf_dtype_name(dst));
  if (src == dst || (is_conv_float(src) && is_conv_float(dst)))
    return 0;
  return dbuf__diag(diag, DBUF_EUNSUPPORTED,
                    "no conversion from %s to %s (only fp32, bf16 and fp16 convert into "
                    "each other)",
                    dbuf_dtype_name(src), dbuf_dtype_name(dst));
}

int
dbuf_convert_stats_add(dbuf_convert_stats_t *a, const dbuf_convert_stats_t *b)
{
  dbuf_convert_stats_t s;
  if (a == NULL || b == NULL)
    return DBUF_EINVAL;
  if (dbuf__add(a->values, b->values, &s.values) || dbuf__add(a->changed, b->changed, &s.changed) ||
      dbuf__add(a->overflowed, b->overflowed, &s.overflowed) ||
      dbuf__add(a->subnormal, b->subnormal, &s.subnormal) ||
      dbuf__add(a->zeroed, b->zeroed, &s.zeroed))
    return DBUF_EOVERFLOW;
  *a = s;
  return 0;
}

/* Source readers: element i as F32 bits, and its class in its own format. */
#define LOAD16(p, i) (((const uint16_t *)(p))[i])

int
dbuf_convert(dbuf_dtype_t dst_type, void *dst, dbuf_dtype_t src_type, const void *src,
             int64_t n, dbuf_convert_stats_t *stats, dbuf_diag_t *diag)
{
  int rc;
  int64_t bytes;
  if (n < 0 || ((dst == NULL || src == NULL) && n > 0))
    return dbuf__diag(diag, DBUF_EINVAL, "convert: NULL buffer or negative count");
  if ((rc = dbuf_convert_check(src_type, dst_type, diag)) != 0)
    return rc;
  if (dbuf__mul(n, dbuf_dtype_size(src_type) > dbuf_dtype_size(dst_type)
                       ? dbuf_dtype_size(src_type)
                       : dbuf_dtype_size(dst_type),
                &bytes) != 0 || (uint64_t)bytes > SIZE_MAX)
    return dbuf__diag(diag, DBUF_EOVERFLOW, "convert: %lld elements overflow", (long long)n);
  counts_t c = {0, 0, 0, 0};
  if (src_type == dst_type) {
    if (n > 0 && dst != src)
      memcpy(dst, src, (size_t)(n * dbuf_dtype_size(src_type)));
  } else if (dst_type == DBUF_DTYPE_F32) { /* widening: exact */
    uint32_t *d = dst;
    if (src_type == DBUF_DTYPE_F16)
      for (int64_t i = 0; i < n; i++)
        d[i] = h2f(LOAD16(src, i));
    else
      for (int64_t i = 0; i < n; i++)
        d[i] = b2f(LOAD16(src, i));
  } else if (src_type == DBUF_DTYPE_F32) {
    const uint32_t *s = src;
    uint16_t *d = dst;
    if (dst_type == DBUF_DTYPE_BF16)
      for (int64_t i = 0; i < n; i++) { /* the counts without branches */
        uint32_t u = s[i], a = u & 0x7fffffffu;
        uint16_t r = f2b(u), ra = r & 0x7fffu;
        int nan = a > 0x7f800000u;
        d[i] = r;
        /* exact iff the dropped half is zero; BF16 has F32's exponent range,
         * so nothing normal becomes subnormal */
        c.changed += !nan & ((u & 0xffffu) != 0);
        c.overflowed += (a < 0x7f800000u) & (ra == 0x7f80u);
        c.zeroed += (a != 0) & (ra == 0);
      }
    else
      for (int64_t i = 0; i < n; i++) {
        uint16_t r = f2h(s[i]);
        d[i] = r;
        count_one(&c, fclass(s[i], FMT_F32), s[i], fclass(r, FMT_F16), h2f(r));
      }
  } else if (src_type == DBUF_DTYPE_F16) { /* F16 -> BF16 through exact F32 */
    uint16_t *d = dst;
    for (int64_t i = 0; i < n; i++) {
      uint16_t h = LOAD16(src, i), r;
      uint32_t f = h2f(h);
      d[i] = r = f2b(f);
      count_one(&c, fclass(h, FMT_F16), f, fclass(r, FMT_BF16), b2f(r));
    }
  } else { /* BF16 -> F16 */
    uint16_t *d = dst;
    for (int64_t i = 0; i < n; i++) {
      uint16_t b = LOAD16(src, i), r;
      uint32_t f = b2f(b);
      d[i] = r = f2h(f);
      count_one(&c, fclass(b, FMT_BF16), f, fclass(r, FMT_F16), h2f(r));
    }
  }
  if (stats != NULL) {
    dbuf_convert_stats_t add = {n, c.changed, c.overflowed, c.subnormal, c.zeroed};
    if (dbuf_convert_stats_add(stats, &add) != 0)
      return dbuf__diag(diag, DBUF_EOVERFLOW, "convert: a count overflows");
  }
  return 0;
}
