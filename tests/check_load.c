/*
 * Check suite for element conversion (dbuf/convert.h) and loading real
 * weights (dbuf/load.h): the read plan, the pread loader and the row
 * checksums, on checkpoints the tests write themselves (tests/st_write.h).
 *
 * Expected values are derived independently of the library: widened values
 * from the bit fields with ldexp, narrowed values by searching the table of
 * every finite target value for the nearest one (ties to the even pattern),
 * and hand-derived bit patterns for the known rounding cases.
 */
#define _XOPEN_SOURCE 700

#include "dbuf/convert.h"
#include "dbuf/load.h"
#include "st_write.h"
#include "testutil.h"
#include "tmpdir.h"

#include <check.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

static void
setup(void)
{
  tmpdir_setup("check_load");
}

static void
teardown(void)
{
  tmpdir_teardown();
}

static uint32_t
fbits(float f)
{
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

static float
bitsf(uint32_t u)
{
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* ------------------------------------------------------------------------ */
/* Conversion                                                                 */

/* The value of a 16-bit pattern from its fields: e_bits exponent bits, the
 * rest mantissa (F16: 5 and 10, bias 15; BF16: 8 and 7, bias 127). */
static double
ref16(uint16_t h, int ebits, int mbits)
{
  int bias = (1 << (ebits - 1)) - 1, emax = (1 << ebits) - 1;
  int s = h >> 15, e = (h >> mbits) & emax, m = h & ((1 << mbits) - 1);
  double v;
  if (e == emax)
    v = m ? NAN : INFINITY;
  else if (e == 0)
    v = ldexp(m, 1 - bias - mbits);
  else
    v = ldexp((1 << mbits) + m, e - bias - mbits);
  return s ? -v : v;
}

static void
check_widen(dbuf_dtype_t type, int ebits, int mbits)
{
  static uint16_t src[65536];
  static float dst[65536];
  for (int i = 0; i < 65536; i++)
    src[i] = (uint16_t)i;
  dbuf_convert_stats_t st = {0};
  ck_assert_int_eq(dbuf_convert(DBUF_DTYPE_F32, dst, type, src, 65536, &st, NULL), 0);
  ck_assert_int_eq(st.values, 65536);
  ck_assert_int_eq(st.changed + st.overflowed + st.subnormal + st.zeroed, 0);
  for (int i = 0; i < 65536; i++) {
    double r = ref16((uint16_t)i, ebits, mbits);
    if (isnan(r)) {
      ck_assert_msg(isnan(dst[i]), "pattern %04x: not a NaN", i);
      ck_assert(!!signbit(dst[i]) == (i >> 15 != 0));
      ck_assert_msg(fbits(dst[i]) & 0x00400000u, "pattern %04x: NaN not quiet", i);
    } else {
      ck_assert_msg(fbits(dst[i]) == fbits((float)r), "pattern %04x: %08x, want %08x", i,
                    fbits(dst[i]), fbits((float)r));
    }
  }
}

START_TEST(test_f16_widen_all) { check_widen(DBUF_DTYPE_F16, 5, 10); }
END_TEST

START_TEST(test_bf16_widen_all) { check_widen(DBUF_DTYPE_BF16, 8, 7); }
END_TEST

/* Every pattern through F32 and back: unchanged, NaNs quiet NaNs. */
static void
check_round_trip(dbuf_dtype_t type, uint16_t quiet)
{
  static uint16_t src[65536], back[65536];
  static float mid[65536];
  for (int i = 0; i < 65536; i++)
    src[i] = (uint16_t)i;
  dbuf_convert_stats_t st = {0};
  ck_assert_int_eq(dbuf_convert(DBUF_DTYPE_F32, mid, type, src, 65536, NULL, NULL), 0);
  ck_assert_int_eq(dbuf_convert(type, back, DBUF_DTYPE_F32, mid, 65536, &st, NULL), 0);
  ck_assert_int_eq(st.changed + st.overflowed + st.zeroed, 0);
  /* F16's 2 x 1023 subnormals are F32 normals that become subnormal again;
   * BF16's are F32 subnormals already. */
  ck_assert_int_eq(st.subnormal, type == DBUF_DTYPE_F16 ? 2046 : 0);
  uint16_t emask = type == DBUF_DTYPE_F16 ? 0x7c00 : 0x7f80;
  for (int i = 0; i < 65536; i++) {
    int nan = (i & emask) == emask && (i & ~emask & 0x7fff);
    if (nan)
      ck_assert_msg(back[i] == (i | quiet), "NaN %04x came back as %04x", i, back[i]);
    else
      ck_assert_msg(back[i] == i, "%04x came back as %04x", i, back[i]);
  }
}

START_TEST(test_f16_round_trip) { check_round_trip(DBUF_DTYPE_F16, 0x0200); }
END_TEST

START_TEST(test_bf16_round_trip) { check_round_trip(DBUF_DTYPE_BF16, 0x0040); }
END_TEST

/* Nearest finite pattern of a type by table search, ties to the even
 * pattern; past the largest finite value + half a step: the infinity. */
static uint16_t
nearest(float x, const double *table, int nfin, uint16_t inf)
{
  double a = fabs((double)x);
  uint16_t sign = signbit(x) ? 0x8000 : 0;
  /* table[nfin] is the value one step above the largest finite (the
   * infinity's place). */
  int lo = 0, hi = nfin;
  if (a >= table[nfin])
    return sign | inf;
  while (hi - lo > 1) { /* table[lo] <= a < table[hi] */
    int mid = (lo + hi) / 2;
    if (table[mid] <= a)
      lo = mid;
    else
      hi = mid;
  }
  double dl = a - table[lo], dh = table[hi] - a;
  int pick = dl < dh ? lo : dh < dl ? hi : (lo % 2 == 0 ? lo : hi);
  return (uint16_t)(sign | (pick == nfin ? inf : pick));
}

static void
check_narrow(dbuf_dtype_t type, int ebits, int mbits, uint16_t inf, uint64_t seed)
{
  int nfin = inf; /* finite positive patterns are 0 .. inf - 1 */
  double *table = malloc(sizeof(double) * (size_t)(nfin + 1));
  for (int i = 0; i < nfin; i++)
    table[i] = ref16((uint16_t)i, ebits, mbits);
  /* one step past the largest finite value */
  table[nfin] = 2 * table[nfin - 1] - table[nfin - 2];
  enum { NRAND = 200000 };
  int n = 0, cap = NRAND + 6 * nfin;
  float *in = malloc(sizeof(float) * (size_t)cap);
  uint16_t *out = malloc(2 * (size_t)cap);
  test_rng_state = seed;
  for (int i = 0; i < NRAND; i++) {
    uint32_t u = (uint32_t)test_rng();
    if (((u >> 23) & 0xff) == 0xff)
      u &= ~0x40000000u; /* keep it finite */
    in[n++] = bitsf(u);
  }
  for (int i = 0; i + 1 <= nfin; i++) { /* every value, every midpoint, +-1 ulp */
    float m = (float)((table[i] + table[i + 1]) / 2); /* exact: few bits */
    in[n++] = (float)table[i];
    in[n++] = m;
    in[n++] = nextafterf(m, 0);
    in[n++] = nextafterf(m, INFINITY);
    in[n++] = -m;
  }
  ck_assert_int_eq(dbuf_convert(type, out, DBUF_DTYPE_F32, in, n, NULL, NULL), 0);
  for (int i = 0; i < n; i++) {
    uint16_t want = nearest(in[i], table, nfin, inf);
    ck_assert_msg(out[i] == want, "%a (%08x): got %04x, want %04x", (double)in[i], fbits(in[i]),
                  out[i], want);
  }
  free(table);
  free(in);
  free(out);
}

START_TEST(test_f32_to_f16_nearest) { check_narrow(DBUF_DTYPE_F16, 5, 10, 0x7c00, 0x1234567); }
END_TEST

START_TEST(test_f32_to_bf16_nearest) { check_narrow(DBUF_DTYPE_BF16, 8, 7, 0x7f80, 0x7654321); }
END_TEST

/* Known cases, bit patterns derived by hand. */
static const struct known {
  dbuf_dtype_t from, to;
  uint32_t in, want;
  int changed, overflowed, subnormal, zeroed;
} known[] = {
    /* 1.0 = 0x3f800000: F16 exponent 15 -> 0x3c00, BF16 the top half. */
    {DBUF_DTYPE_F32, DBUF_DTYPE_F16, 0x3f800000, 0x3c00, 0, 0, 0, 0},
    {DBUF_DTYPE_F32, DBUF_DTYPE_BF16, 0x3f800000, 0x3f80, 0, 0, 0, 0},
    /* 65504 = (2 - 2^-10) 2^15 = 0x477fe000: the largest F16, 0x7bff. */
    {DBUF_DTYPE_F32, DBUF_DTYPE_F16, 0x477fe000, 0x7bff, 0, 0, 0, 0},
    /* 65520 = 0x477ff000, halfway to 65536: 0x7bff is odd, so up: inf. */
    {DBUF_DTYPE_F32, DBUF_DTYPE_F16, 0x477ff000, 0x7c00, 1, 1, 0, 0},
    /* one ulp below 65520: down to 65504. */
    {DBUF_DTYPE_F32, DBUF_DTYPE_F16, 0x477fefff, 0x7bff, 1, 0, 0, 0},
    /* 1 + 2^-11 = 0x3f801000: halfway between 0x3c00 and 0x3c01: even 0x3c00. */
    {DBUF_DTYPE_F32, DBUF_DTYPE_F16, 0x3f801000, 0x3c00, 1, 0, 0, 0},
    /* 1 + 3 x 2^-11 = 0x3f803000: halfway between 0x3c01 and 0x3c02: even 0x3c02. */
    {DBUF_DTYPE_F32, DBUF_DTYPE_F16, 0x3f803000, 0x3c02, 1, 0, 0, 0},
    /* 2^-24 = 0x33800000: the least F16 subnormal 0x0001, exact. */
    {DBUF_DTYPE_F32, DBUF_DTYPE_F16, 0x33800000, 0x0001, 0, 0, 1, 0},
    /* 2^-25 = 0x33000000: halfway between 0 and 0x0001: even 0. */
    {DBUF_DTYPE_F32, DBUF_DTYPE_F16, 0x33000000, 0x0000, 1, 0, 0, 1},
    /* just above 2^-25: up to 0x0001. */
    {DBUF_DTYPE_F32, DBUF_DTYPE_F16, 0x33000001, 0x0001, 1, 0, 1, 0},
    /* 2^-14 = 0x38800000: the least F16 normal 0x0400. */
    {DBUF_DTYPE_F32, DBUF_DTYPE_F16, 0x38800000, 0x0400, 0, 0, 0, 0},
    /* 1.5 x 2^-24 = 0x33c00000: halfway between 0x0001 and 0x0002: even 0x0002. */
    {DBUF_DTYPE_F32, DBUF_DTYPE_F16, 0x33c00000, 0x0002, 1, 0, 1, 0},
    /* 1 + 2^-8 = 0x3f808000: halfway between BF16 0x3f80 and 0x3f81: 0x3f80. */
    {DBUF_DTYPE_F32, DBUF_DTYPE_BF16, 0x3f808000, 0x3f80, 1, 0, 0, 0},
    /* 1 + 3 x 2^-8 = 0x3f818000: halfway between 0x3f81 and 0x3f82: 0x3f82. */
    {DBUF_DTYPE_F32, DBUF_DTYPE_BF16, 0x3f818000, 0x3f82, 1, 0, 0, 0},
    /* FLT_MAX 0x7f7fffff: above BF16's largest + half a step: inf. */
    {DBUF_DTYPE_F32, DBUF_DTYPE_BF16, 0x7f7fffff, 0x7f80, 1, 1, 0, 0},
    /* signalling NaN 0x7f800001: a quiet NaN, BF16 0x7fc0, F16 0x7e00. */
    {DBUF_DTYPE_F32, DBUF_DTYPE_BF16, 0x7f800001, 0x7fc0, 0, 0, 0, 0},
    {DBUF_DTYPE_F32, DBUF_DTYPE_F16, 0x7f800001, 0x7e00, 0, 0, 0, 0},
    /* -NaN 0xffc00000 keeps its sign. */
    {DBUF_DTYPE_F32, DBUF_DTYPE_BF16, 0xffc00000, 0xffc0, 0, 0, 0, 0},
    {DBUF_DTYPE_F32, DBUF_DTYPE_F16, 0xffc00000, 0xfe00, 0, 0, 0, 0},
    /* +-inf stay. */
    {DBUF_DTYPE_F32, DBUF_DTYPE_F16, 0xff800000, 0xfc00, 0, 0, 0, 0},
    {DBUF_DTYPE_F32, DBUF_DTYPE_BF16, 0x7f800000, 0x7f80, 0, 0, 0, 0},
    /* -0.0 stays -0.0. */
    {DBUF_DTYPE_F32, DBUF_DTYPE_F16, 0x80000000, 0x8000, 0, 0, 0, 0},
    /* an F32 subnormal 0x00000001 (2^-149) is far below F16's least: -> 0. */
    {DBUF_DTYPE_F32, DBUF_DTYPE_F16, 0x00000001, 0x0000, 1, 0, 0, 1},
    /* F16 1 + 2^-10 = 0x3c01 -> BF16: between 0x3f80 and 0x3f81 (step 2^-7), nearer 0x3f80. */
    {DBUF_DTYPE_F16, DBUF_DTYPE_BF16, 0x3c01, 0x3f80, 1, 0, 0, 0},
    /* F16 0x0001 = 2^-24 -> BF16 exponent 127 - 24 = 103 = 0x67: 0x3380, exact. */
    {DBUF_DTYPE_F16, DBUF_DTYPE_BF16, 0x0001, 0x3380, 0, 0, 0, 0},
    /* F16 0x7bff = 65504 = 1.1111111111b x 2^15 -> BF16 rounds 1.1111111|111 up: 2^16 = 0x4780. */
    {DBUF_DTYPE_F16, DBUF_DTYPE_BF16, 0x7bff, 0x4780, 1, 0, 0, 0},
    /* BF16 0x4780 = 65536 -> F16: past 65520: inf. */
    {DBUF_DTYPE_BF16, DBUF_DTYPE_F16, 0x4780, 0x7c00, 1, 1, 0, 0},
    /* BF16 0x3380 = 2^-24 -> F16 0x0001, a subnormal now. */
    {DBUF_DTYPE_BF16, DBUF_DTYPE_F16, 0x3380, 0x0001, 0, 0, 1, 0},
    /* BF16 0x3300 = 2^-25 -> F16: tie between 0 and 0x0001: 0. */
    {DBUF_DTYPE_BF16, DBUF_DTYPE_F16, 0x3300, 0x0000, 1, 0, 0, 1},
    /* BF16 0x3f81 = 1 + 2^-7 -> F16 0x3c08 (mantissa 2^-7 = 8 x 2^-10), exact. */
    {DBUF_DTYPE_BF16, DBUF_DTYPE_F16, 0x3f81, 0x3c08, 0, 0, 0, 0},
};

START_TEST(test_known)
{
  const struct known *k = &known[_i];
  unsigned char in[4], out[4] = {0};
  int64_t is = dbuf_dtype_size(k->from), os = dbuf_dtype_size(k->to);
  if (is == 4)
    memcpy(in, &k->in, 4);
  else {
    uint16_t h = (uint16_t)k->in;
    memcpy(in, &h, 2);
  }
  dbuf_convert_stats_t st = {0};
  ck_assert_int_eq(dbuf_convert(k->to, out, k->from, in, 1, &st, NULL), 0);
  uint32_t got = 0;
  if (os == 4)
    memcpy(&got, out, 4);
  else {
    uint16_t h;
    memcpy(&h, out, 2);
    got = h;
  }
  ck_assert_msg(got == k->want, "case %d: %08x -> %08x, want %08x", _i, k->in, got, k->want);
  ck_assert_int_eq(st.values, 1);
  ck_assert_int_eq(st.changed, k->changed);
  ck_assert_int_eq(st.overflowed, k->overflowed);
  ck_assert_int_eq(st.subnormal, k->subnormal);
  ck_assert_int_eq(st.zeroed, k->zeroed);
}
END_TEST

START_TEST(test_unsupported)
{
  dbuf_diag_t d;
  int32_t a[3] = {1, -2, 3}, b[3] = {0};
  uint16_t h[3];
  ck_assert_int_eq(dbuf_convert(DBUF_DTYPE_BF16, h, DBUF_DTYPE_I32, a, 3, NULL, &d),
                   DBUF_EUNSUPPORTED);
  ck_assert_ptr_nonnull(strstr(d.msg, "int32"));
  ck_assert_ptr_nonnull(strstr(d.msg, "bf16"));
  ck_assert_int_eq(dbuf_convert_check(DBUF_DTYPE_F8_E4M3, DBUF_DTYPE_F32, &d), DBUF_EUNSUPPORTED);
  ck_assert_ptr_nonnull(strstr(d.msg, "fp8"));
  ck_assert_int_eq(dbuf_convert_check(DBUF_DTYPE_F32, DBUF_DTYPE_I32, NULL), DBUF_EUNSUPPORTED);
  ck_assert_int_eq(dbuf_convert_check(DBUF_DTYPE_F64, DBUF_DTYPE_F32, NULL), DBUF_EUNSUPPORTED);
  ck_assert_int_eq(dbuf_convert_check(DBUF_DTYPE_F4, DBUF_DTYPE_F32, NULL), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_convert_check(DBUF_DTYPE_NONE, DBUF_DTYPE_F32, NULL), DBUF_EINVAL);
  /* identity for any type with a byte size */
  ck_assert_int_eq(dbuf_convert(DBUF_DTYPE_I32, b, DBUF_DTYPE_I32, a, 3, NULL, NULL), 0);
  ck_assert_int_eq(memcmp(a, b, sizeof a), 0);
  ck_assert_int_eq(dbuf_convert(DBUF_DTYPE_F32, NULL, DBUF_DTYPE_BF16, h, 1, NULL, NULL),
                   DBUF_EINVAL);
  ck_assert_int_eq(dbuf_convert(DBUF_DTYPE_F32, b, DBUF_DTYPE_BF16, h, -1, NULL, NULL),
                   DBUF_EINVAL);
  dbuf_convert_stats_t x = {INT64_MAX, 0, 0, 0, 0}, y = {1, 0, 0, 0, 0};
  ck_assert_int_eq(dbuf_convert_stats_add(&x, &y), DBUF_EOVERFLOW);
  ck_assert_int_eq(x.values, INT64_MAX);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Loading                                                                    */

/* The model, in layout order; the files hold them in another order. */
static const st_tensor_t model[] = {
    {"w.b", "BF16", 2, {7, 3}, 2},  {"w.a", "F32", 2, {5, 4}, 1},
    {"w.c", "F16", 1, {9}, 3},      {"w.z", "F32", 2, {0, 4}, 6},
    {"w.d", "F32", 2, {6, 2}, 4},   {"w.e", "F16", 3, {3, 5, 2}, 5},
};
enum { NMODEL = 6 };
/* File order: a, e, b | z, d, c (shard 1 | shard 2). */
static const int file_order[NMODEL] = {1, 5, 0, 3, 4, 2};

static dbuf_tensors_t *
model_tensors(int n, const st_tensor_t *m)
{
  dbuf_tensors_t *t;
  ck_assert_int_eq(dbuf_tensors_create(&t), 0);
  for (int i = 0; i < n; i++)
    ck_assert_int_eq(dbuf_tensors_add(t, m[i].name, m[i].ndim, m[i].dims, NULL), 0);
  return t;
}

/* Writes the model: one file, or two shards and an index; returns the path to open. */
static const char *
write_model(int sharded)
{
  st_tensor_t in_file[NMODEL];
  for (int i = 0; i < NMODEL; i++)
    in_file[i] = model[file_order[i]];
  if (!sharded) {
    ck_assert_int_eq(st_write(tpath("model.safetensors"), in_file, NMODEL), 0);
    return tpath("model.safetensors");
  }
  ck_assert_int_eq(st_write(tpath("model-00001-of-00002.safetensors"), in_file, 3), 0);
  ck_assert_int_eq(st_write(tpath("model-00002-of-00002.safetensors"), in_file + 3, 3), 0);
  const char *names[2] = {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"};
  int file_of[NMODEL] = {0, 0, 0, 1, 1, 1};
  ck_assert_int_eq(st_write_index(tpath("model.safetensors.index.json"), in_file, NMODEL, names,
                                  file_of),
                   0);
  return tpath("model.safetensors.index.json");
}

static dbuf_st_t *
open_st(const char *path)
{
  dbuf_st_t *st;
  dbuf_diag_t d;
  int rc = dbuf_st_open(&path, 1, NULL, 0, &st, &d);
  ck_assert_msg(rc == 0, "open %s: %s", path, d.msg);
  return st;
}

/* The expected bits of element i of model tensor k in buffer dtype dt. */
static void
expect_elem(int k, int64_t i, dbuf_dtype_t dt, unsigned char *out)
{
  st_store(dt == DBUF_DTYPE_F32 ? "F32" : dt == DBUF_DTYPE_BF16 ? "BF16" : "F16", model[k].seed,
           i, out);
}

static const dbuf_dtype_t buf_types[3] = {DBUF_DTYPE_F32, DBUF_DTYPE_BF16, DBUF_DTYPE_F16};
static const dbuf_layout_kind_t kinds[3] = {DBUF_LAYOUT_PADDED, DBUF_LAYOUT_UNPADDED,
                                            DBUF_LAYOUT_COMPACT};

/* Loop index: sharded (2) x kind (3) x buffer dtype (3). */
START_TEST(test_load_all_ranks)
{
  int sharded = _i % 2, kind = _i / 2 % 3, dti = _i / 6;
  dbuf_dtype_t dt = buf_types[dti];
  int64_t es = dbuf_dtype_size(dt);
  dbuf_st_t *st = open_st(write_model(sharded));
  dbuf_tensors_t *t = model_tensors(NMODEL, model);
  int split_seen = 0;
  for (int nranks = 1; nranks <= 7; nranks++) {
    dbuf_layout_params_t p;
    dbuf_layout_params_init(&p);
    p.kind = kinds[kind];
    p.nranks = nranks;
    dbuf_layout_t *l;
    dbuf_diag_t d;
    ck_assert_int_eq(dbuf_layout_build(t, &p, &l, &d), 0);
    const int64_t *off = dbuf_layout_offsets(l);
    uint64_t total_mem[NMODEL] = {0}, total_file[NMODEL] = {0};
    int64_t total_rows[NMODEL] = {0};
    for (int r = 0; r < nranks; r++) {
      int64_t s, e;
      ck_assert_int_eq(dbuf_layout_rank_range(l, r, &s, &e), 0);
      dbuf_load_plan_t *plan;
      ck_assert_msg(dbuf_load_plan_create(l, s, e, dt, st, &plan, &d) == 0, "%s", d.msg);
      int64_t nb = (e - s) * es;
      unsigned char *mem = malloc((size_t)nb + 1);
      memset(mem, 0xa5, (size_t)nb + 1);
      dbuf_load_stats_t ls;
      ck_assert_msg(dbuf_load_posix(plan, mem, nb, NULL, NULL, &ls, &d) == 0, "%s", d.msg);
      ck_assert_int_eq(ls.convert.changed, 0); /* every value is exact in all three */
      int64_t tensor_bytes = 0;
      /* Every element of the range: tensor elements as expected, the rest zero. */
      unsigned char *seen = calloc((size_t)nb + 1, 1);
      for (int k = 0; k < NMODEL; k++) {
        int64_t numel = st_numel(&model[k]);
        for (int64_t i = 0; i < numel; i++) {
          int64_t g = off[k] + i;
          if (g < s || g >= e)
            continue;
          unsigned char want[4];
          expect_elem(k, i, dt, want);
          ck_assert_msg(memcmp(mem + (g - s) * es, want, (size_t)es) == 0,
                        "nranks %d rank %d tensor %s elem %lld", nranks, r, model[k].name,
                        (long long)i);
          memset(seen + (g - s) * es, 1, (size_t)es);
          tensor_bytes += es;
        }
      }
      for (int64_t b = 0; b < nb; b++)
        if (!seen[b])
          ck_assert_msg(mem[b] == 0, "nranks %d rank %d: padding byte %lld is %02x", nranks, r,
                        (long long)b, mem[b]);
      ck_assert_int_eq(mem[nb], 0xa5); /* nothing written past the end */
      ck_assert_int_eq(ls.dst_bytes, tensor_bytes);
      ck_assert_int_eq(ls.padding_bytes, nb - tensor_bytes);
      int64_t bad_off, nbad;
      ck_assert_int_eq(dbuf_load_check_zeros(plan, mem, nb, &bad_off, &nbad), 0);
      ck_assert_int_eq(bad_off, -1);
      /* Checksums from memory and from the files agree. */
      uint64_t sm[NMODEL], sf[NMODEL];
      int64_t rm[NMODEL], rf[NMODEL], rd = 0;
      ck_assert_int_eq(dbuf_load_sums_mem(l, s, e, dt, mem, nb, sm, rm, &d), 0);
      ck_assert_msg(dbuf_load_sums_file(l, s, e, dt, st, sf, rf, &rd, &d) == 0, "%s", d.msg);
      for (int k = 0; k < NMODEL; k++) {
        ck_assert_uint_eq(sm[k], sf[k]);
        ck_assert_int_eq(rm[k], rf[k]);
        total_mem[k] += sm[k];
        total_file[k] += sf[k];
        total_rows[k] += rm[k];
      }
      free(seen);
      free(mem);
      dbuf_load_plan_destroy(plan);
    }
    /* Over the ranks: every row once, and the sum an independent hash gives. */
    for (int k = 0; k < NMODEL; k++) {
      int64_t rows = model[k].dims[0], re = st_numel(&model[k]) / (rows ? rows : 1);
      uint64_t want = 0;
      unsigned char *row = malloc((size_t)(re * es) + 1);
      for (int64_t r = 0; r < rows; r++) {
        for (int64_t c = 0; c < re; c++)
          expect_elem(k, r * re + c, dt, row + c * es);
        want += XXH3_64bits_withSeed(row, (size_t)(re * es), (XXH64_hash_t)r);
      }
      free(row);
      ck_assert_int_eq(total_rows[k], rows);
      ck_assert_uint_eq(total_mem[k], want);
      ck_assert_uint_eq(total_file[k], want);
      int64_t np;
      dbuf_layout_tensor_pieces(l, k, NULL, 0, &np);
      split_seen |= np > 1;
    }
    dbuf_layout_destroy(l);
  }
  ck_assert_msg(split_seen, "no tensor straddled a rank boundary");
  dbuf_tensors_destroy(t);
  dbuf_st_destroy(st);
}
END_TEST

/* One file in layout order, one dtype: one read of everything. */
START_TEST(test_merge)
{
  const st_tensor_t m[3] = {{"m1", "F32", 2, {4, 4}, 7},
                            {"m2", "F32", 2, {3, 4}, 8},
                            {"m3", "F32", 1, {5}, 9}};
  ck_assert_int_eq(st_write(tpath("m.safetensors"), m, 3), 0);
  dbuf_st_t *st = open_st(tpath("m.safetensors"));
  dbuf_tensors_t *t = model_tensors(3, m);
  dbuf_layout_params_t p;
  dbuf_layout_params_init(&p);
  p.kind = DBUF_LAYOUT_UNPADDED;
  dbuf_layout_t *l;
  ck_assert_int_eq(dbuf_layout_build(t, &p, &l, NULL), 0);
  dbuf_load_plan_t *plan;
  ck_assert_int_eq(dbuf_load_plan_create(l, 0, 33, DBUF_DTYPE_F32, st, &plan, NULL), 0);
  int64_t n;
  const dbuf_load_extent_t *e = dbuf_load_plan_extents(plan, &n);
  ck_assert_int_eq(n, 1);
  dbuf_st_info_t in;
  dbuf_st_tensor_info(st, 0, &in);
  ck_assert_int_eq(e[0].file_offset, in.data_begin);
  ck_assert_int_eq(e[0].bytes, 33 * 4);
  ck_assert_int_eq(e[0].dst_offset, 0);
  dbuf_load_stats_t s;
  ck_assert_int_eq(dbuf_load_plan_stats(plan, &s), 0);
  ck_assert_int_eq(s.files, 1);
  ck_assert_int_eq(s.tensors, 3);
  ck_assert_int_eq(s.rows, 4 + 3 + 5); /* a 1-D tensor: rows of one element */
  ck_assert_int_eq(s.bytes, 132);
  int64_t reads[1];
  ck_assert_int_eq(dbuf_load_plan_reads(plan, 16, reads), 0);
  ck_assert_int_eq(reads[0], 9); /* ceil(132 / 16) */
  /* A converting buffer: the same single extent, read through the bounce. */
  dbuf_load_plan_destroy(plan);
  ck_assert_int_eq(dbuf_load_plan_create(l, 8, 28, DBUF_DTYPE_BF16, st, &plan, NULL), 0);
  e = dbuf_load_plan_extents(plan, &n);
  ck_assert_int_eq(n, 1);
  ck_assert_int_eq(e[0].file_offset, in.data_begin + 8 * 4);
  ck_assert_int_eq(e[0].bytes, 20 * 4);
  /* A range cutting a row. */
  dbuf_diag_t d;
  dbuf_load_plan_destroy(plan);
  ck_assert_int_eq(dbuf_load_plan_create(l, 2, 28, DBUF_DTYPE_F32, st, &plan, &d), DBUF_ELAYOUT);
  ck_assert_ptr_nonnull(strstr(d.msg, "m1 row 0"));
  ck_assert_int_eq(dbuf_load_plan_create(l, 0, 34, DBUF_DTYPE_F32, st, &plan, &d), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_load_plan_create(l, 0, 8, DBUF_DTYPE_F4, st, &plan, &d), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_load_plan_create(NULL, 0, 8, DBUF_DTYPE_F32, st, &plan, &d), DBUF_EINVAL);
  dbuf_layout_destroy(l);
  dbuf_tensors_destroy(t);
  dbuf_st_destroy(st);
}
END_TEST

static int
plan_error_st(const st_tensor_t *lay, int nlay, dbuf_st_t *st, dbuf_dtype_t dt, dbuf_diag_t *d)
{
  dbuf_tensors_t *t = model_tensors(nlay, lay);
  dbuf_layout_params_t p;
  dbuf_layout_params_init(&p);
  p.nranks = 2;
  dbuf_layout_t *l;
  ck_assert_int_eq(dbuf_layout_build(t, &p, &l, NULL), 0);
  int64_t s, e;
  dbuf_layout_rank_range(l, 1, &s, &e);
  dbuf_load_plan_t *plan = NULL;
  int rc = dbuf_load_plan_create(l, s, e, dt, st, &plan, d);
  ck_assert(rc != 0 || plan != NULL);
  if (rc == 0) { /* the plan was fine: load and sum, to see those errors */
    int64_t nb = (e - s) * dbuf_dtype_size(dt);
    void *mem = calloc((size_t)nb + 1, 1);
    rc = dbuf_load_posix(plan, mem, nb, NULL, NULL, NULL, d);
    uint64_t sums[8];
    dbuf_diag_t d2;
    int rc2 = dbuf_load_sums_file(l, s, e, dt, st, sums, NULL, NULL, &d2);
    ck_assert_int_eq(rc2, rc);
    if (rc != 0)
      ck_assert_str_eq(d2.msg, d->msg);
    free(mem);
  }
  dbuf_load_plan_destroy(plan);
  dbuf_layout_destroy(l);
  dbuf_tensors_destroy(t);
  return rc;
}

static int
plan_error(const st_tensor_t *lay, int nlay, const char *path, dbuf_dtype_t dt, dbuf_diag_t *d)
{
  dbuf_st_t *st = open_st(path);
  int rc = plan_error_st(lay, nlay, st, dt, d);
  dbuf_st_destroy(st);
  return rc;
}

START_TEST(test_errors)
{
  dbuf_diag_t d;
  const char *one = write_model(0);
  st_tensor_t lay[NMODEL];
  memcpy(lay, model, sizeof lay);
  /* fine as is */
  ck_assert_int_eq(plan_error(lay, NMODEL, one, DBUF_DTYPE_F32, &d), 0);
  /* a tensor the checkpoint lacks */
  lay[2].name = "w.missing";
  ck_assert_int_eq(plan_error(lay, NMODEL, one, DBUF_DTYPE_F32, &d), DBUF_ENOTFOUND);
  ck_assert_ptr_nonnull(strstr(d.msg, "w.missing"));
  /* another shape */
  memcpy(lay, model, sizeof lay);
  lay[1].dims[1] = 5;
  ck_assert_int_eq(plan_error(lay, NMODEL, one, DBUF_DTYPE_F32, &d), DBUF_ESHAPE);
  ck_assert_ptr_nonnull(strstr(d.msg, "w.a"));
  ck_assert_ptr_nonnull(strstr(d.msg, "5x5"));
  ck_assert_ptr_nonnull(strstr(d.msg, "5x4"));
  /* an integer tensor into a float buffer */
  const st_tensor_t it[2] = {{"i", "I32", 1, {4}, 1}, {"f", "F32", 1, {4}, 2}};
  ck_assert_int_eq(st_write(tpath("int.safetensors"), it, 2), 0);
  ck_assert_int_eq(plan_error(it, 2, tpath("int.safetensors"), DBUF_DTYPE_BF16, &d),
                   DBUF_EUNSUPPORTED);
  ck_assert_ptr_nonnull(strstr(d.msg, "tensor i"));
  ck_assert_ptr_nonnull(strstr(d.msg, "int32"));
  ck_assert_ptr_nonnull(strstr(d.msg, "bf16"));
  /* int32 into an int32 buffer: the identity */
  const st_tensor_t ii[1] = {{"i", "I32", 1, {4}, 1}};
  ck_assert_int_eq(plan_error(ii, 1, tpath("int.safetensors"), DBUF_DTYPE_I32, &d), 0);
  /* a file shorter than its header says: cut after opening */
  dbuf_st_t *st = open_st(one);
  struct stat sb;
  ck_assert_int_eq(stat(one, &sb), 0);
  ck_assert_int_eq(truncate(one, sb.st_size - 6), 0);
  memcpy(lay, model, sizeof lay);
  ck_assert_int_eq(plan_error_st(lay, NMODEL, st, DBUF_DTYPE_F32, &d), DBUF_EIO);
  dbuf_st_destroy(st);
  ck_assert_ptr_nonnull(strstr(d.msg, one));
  ck_assert_ptr_nonnull(strstr(d.msg, "shorter than its header says"));
  /* a shard missing: deleted after the index was read */
  const char *ix = write_model(1);
  dbuf_st_t *st2 = open_st(ix);
  ck_assert_int_eq(unlink(tpath("model-00002-of-00002.safetensors")), 0);
  dbuf_tensors_t *t = model_tensors(NMODEL, model);
  dbuf_layout_params_t p;
  dbuf_layout_params_init(&p);
  dbuf_layout_t *l;
  ck_assert_int_eq(dbuf_layout_build(t, &p, &l, NULL), 0);
  dbuf_load_plan_t *plan;
  ck_assert_int_eq(dbuf_load_plan_create(l, 0, dbuf_layout_size(l), DBUF_DTYPE_F32, st2, &plan, &d),
                   0);
  int64_t nb = dbuf_layout_size(l) * 4;
  void *mem = malloc((size_t)nb);
  ck_assert_int_eq(dbuf_load_posix(plan, mem, nb, NULL, NULL, NULL, &d), DBUF_ENOTFOUND);
  ck_assert_ptr_nonnull(strstr(d.msg, "model-00002-of-00002.safetensors: cannot open"));
  ck_assert_int_eq(dbuf_load_posix(plan, mem, nb - 4, NULL, NULL, NULL, &d), DBUF_EINVAL);
  free(mem);
  dbuf_load_plan_destroy(plan);
  dbuf_layout_destroy(l);
  dbuf_tensors_destroy(t);
  dbuf_st_destroy(st2);
}
END_TEST

/* A data file replaced or written again after its header was read is
 * refused by the load and by the proof's re-read, with the reason; a file
 * left alone passes.  Returns the load's code for file path, after change()
 * (applied between opening the checkpoint and loading it). */
static int
load_after(const char *path, void (*change)(const char *), dbuf_diag_t *d)
{
  st_tensor_t lay[NMODEL];
  memcpy(lay, model, sizeof lay);
  dbuf_st_t *st = open_st(path);
  change(path);
  dbuf_diag_t dc;
  int rc = plan_error_st(lay, NMODEL, st, DBUF_DTYPE_F32, d);
  ck_assert_int_eq(dbuf_st_file_check(st, 0, -1, &dc), rc);
  if (rc != 0)
    ck_assert_str_eq(dc.msg, d->msg);
  dbuf_st_destroy(st);
  return rc;
}

static void
leave(const char *path)
{
  (void)path;
}

/* The same bytes under the same name, but another inode (rename over it). */
static void
replace(const char *path)
{
  ck_assert_int_eq(st_write(tpath("other.safetensors"), model, NMODEL), 0);
  ck_assert_int_eq(rename(tpath("other.safetensors"), path), 0);
}

/* Written again in place: same inode and size, another modification time. */
static void
touch_later(const char *path)
{
  struct stat sb;
  ck_assert_int_eq(stat(path, &sb), 0);
  struct timespec ts[2] = {sb.st_atim, sb.st_mtim};
  ts[1].tv_sec += 1;
  ck_assert_int_eq(utimensat(AT_FDCWD, path, ts, 0), 0);
}

/* One byte more at the end: long enough still, but not the same file. */
static void
grow(const char *path)
{
  FILE *f = fopen(path, "ab");
  ck_assert_ptr_nonnull(f);
  ck_assert_int_eq(fputc(0, f), 0);
  ck_assert_int_eq(fclose(f), 0);
}

START_TEST(test_file_changed)
{
  dbuf_diag_t d;
  char want[512];
  const char *one = write_model(0);
  ck_assert_int_eq(load_after(one, leave, &d), 0);
  ck_assert_int_eq(load_after(one, replace, &d), DBUF_EIO);
  snprintf(want, sizeof want,
           "%s: changed since its header was read: the name now leads to another file "
           "(replaced while the run went on?)",
           one);
  ck_assert_str_eq(d.msg, want);
  one = write_model(0);
  ck_assert_int_eq(load_after(one, touch_later, &d), DBUF_EIO);
  snprintf(want, sizeof want,
           "%s: changed since its header was read: written again (modification time)", one);
  ck_assert_str_eq(d.msg, want);
  one = write_model(0);
  struct stat sb;
  ck_assert_int_eq(stat(one, &sb), 0);
  ck_assert_int_eq(load_after(one, grow, &d), DBUF_EIO);
  snprintf(want, sizeof want, "%s: changed since its header was read: now %lld bytes, was %lld",
           one, (long long)sb.st_size + 1, (long long)sb.st_size);
  ck_assert_str_eq(d.msg, want);
  /* Arguments */
  dbuf_st_t *st = open_st(write_model(0));
  ck_assert_int_eq(dbuf_st_file_check(st, 1, -1, &d), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_st_file_check(NULL, 0, -1, &d), DBUF_EINVAL);
  ck_assert_int_eq(unlink(one), 0);
  ck_assert_int_eq(dbuf_st_file_check(st, 0, -1, &d), DBUF_ENOTFOUND);
  dbuf_st_destroy(st);
}
END_TEST

/* Progress: the last call reports everything; stop after the first. */
typedef struct {
  int calls, stop_at;
  int64_t done, total;
} prog_t;

static int
on_progress(int64_t done, int64_t total, void *arg)
{
  prog_t *p = arg;
  p->calls++;
  ck_assert(done > p->done && done <= total);
  p->done = done;
  p->total = total;
  return p->calls == p->stop_at;
}

/* A row larger than the bounce buffer: streamed from the file, one shot from
 * memory; a flipped byte changes exactly that tensor's sum. */
START_TEST(test_big_row)
{
  const st_tensor_t m[2] = {{"big", "F16", 2, {1, 5000000}, 11}, {"small", "BF16", 2, {3, 2}, 12}};
  ck_assert_int_eq(st_write(tpath("big.safetensors"), m, 2), 0);
  dbuf_st_t *st = open_st(tpath("big.safetensors"));
  dbuf_tensors_t *t = model_tensors(2, m);
  dbuf_layout_params_t p;
  dbuf_layout_params_init(&p);
  dbuf_layout_t *l;
  ck_assert_int_eq(dbuf_layout_build(t, &p, &l, NULL), 0);
  int64_t n = dbuf_layout_size(l), nb = n * 4;
  unsigned char *mem = malloc((size_t)nb);
  dbuf_load_plan_t *plan;
  dbuf_diag_t d;
  ck_assert_int_eq(dbuf_load_plan_create(l, 0, n, DBUF_DTYPE_F32, st, &plan, &d), 0);
  dbuf_load_stats_t ls;
  prog_t pr = {0, 0, 0, 0};
  ck_assert_msg(dbuf_load_posix(plan, mem, nb, on_progress, &pr, &ls, &d) == 0, "%s", d.msg);
  ck_assert_int_eq(pr.calls, ls.reads);
  ck_assert_int_eq(pr.done, 5000006 * 2);
  ck_assert_int_eq(pr.total, 5000006 * 2);
  prog_t stop = {0, 1, 0, 0};
  ck_assert_int_eq(dbuf_load_posix(plan, mem, nb, on_progress, &stop, NULL, &d), DBUF_ECANCELED);
  ck_assert_int_eq(stop.calls, 1);
  ck_assert_int_eq(ls.convert.values, 5000006);
  ck_assert(ls.reads >= 2); /* 10 MB through an 8 MiB bounce */
  float v;
  memcpy(&v, mem + 4 * 4999999, 4);
  ck_assert(v == st_value(11, 4999999));
  uint64_t sm[2], sf[2];
  int64_t rows[2];
  ck_assert_int_eq(dbuf_load_sums_mem(l, 0, n, DBUF_DTYPE_F32, mem, nb, sm, rows, &d), 0);
  ck_assert_int_eq(dbuf_load_sums_file(l, 0, n, DBUF_DTYPE_F32, st, sf, NULL, NULL, &d), 0);
  ck_assert_int_eq(rows[0], 1);
  ck_assert_uint_eq(sm[0], sf[0]);
  ck_assert_uint_eq(sm[1], sf[1]);
  ck_assert_uint_eq(sm[0], XXH3_64bits_withSeed(mem, 5000000 * 4, 0));
  mem[4 * 1234567] ^= 0x10;
  uint64_t sx[2];
  ck_assert_int_eq(dbuf_load_sums_mem(l, 0, n, DBUF_DTYPE_F32, mem, nb, sx, NULL, &d), 0);
  ck_assert_uint_ne(sx[0], sf[0]);
  ck_assert_uint_eq(sx[1], sf[1]);
  /* per-row hashes name the row: tensor small's rows from both sides */
  uint64_t hm[3], hf[3];
  int64_t fr, nr;
  ck_assert_int_eq(dbuf_load_row_hashes(l, 0, n, DBUF_DTYPE_F32, mem, nb, NULL, 1, hm, 3, &fr, &nr,
                                        &d), 0);
  ck_assert_int_eq(fr, 0);
  ck_assert_int_eq(nr, 3);
  ck_assert_int_eq(dbuf_load_row_hashes(l, 0, n, DBUF_DTYPE_F32, NULL, 0, st, 1, hf, 3, &fr, &nr,
                                        &d), 0);
  ck_assert_int_eq(memcmp(hm, hf, sizeof hm), 0);
  mem[4 * (5000000 + 2 * 2)] ^= 1; /* small, row 2 */
  ck_assert_int_eq(dbuf_load_row_hashes(l, 0, n, DBUF_DTYPE_F32, mem, nb, NULL, 1, hm, 3, &fr, &nr,
                                        &d), 0);
  ck_assert_uint_eq(hm[0], hf[0]);
  ck_assert_uint_eq(hm[1], hf[1]);
  ck_assert_uint_ne(hm[2], hf[2]);
  ck_assert_int_eq(dbuf_load_row_hashes(l, 0, n, DBUF_DTYPE_F32, mem, nb, NULL, 2, hm, 3, &fr, &nr,
                                        &d), DBUF_ERANGE);
  dbuf_load_plan_destroy(plan);
  free(mem);
  dbuf_layout_destroy(l);
  dbuf_tensors_destroy(t);
  dbuf_st_destroy(st);
}
END_TEST

START_TEST(test_io_names)
{
  dbuf_io_t io;
  ck_assert_int_eq(dbuf_io_parse("posix", &io), 0);
  ck_assert_int_eq(io, DBUF_IO_POSIX);
  ck_assert_int_eq(dbuf_io_parse("mpiio-coll", &io), 0);
  ck_assert_str_eq(dbuf_io_name(io), "mpiio-coll");
  ck_assert_int_eq(dbuf_io_parse("mmap", &io), DBUF_ENOTFOUND);
  ck_assert_str_eq(dbuf_io_name(0), "unknown");
}
END_TEST

static Suite *
load_suite(void)
{
  Suite *s = suite_create("load");
  TCase *tc = tcase_create("convert");
  tcase_set_timeout(tc, 60); /* a loaded machine: the table searches take seconds */
  tcase_add_test(tc, test_f16_widen_all);
  tcase_add_test(tc, test_bf16_widen_all);
  tcase_add_test(tc, test_f16_round_trip);
  tcase_add_test(tc, test_bf16_round_trip);
  tcase_add_test(tc, test_f32_to_f16_nearest);
  tcase_add_test(tc, test_f32_to_bf16_nearest);
  tcase_add_loop_test(tc, test_known, 0, (int)(sizeof known / sizeof known[0]));
  tcase_add_test(tc, test_unsupported);
  suite_add_tcase(s, tc);
  tc = tcase_create("load");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 60);
  tcase_add_loop_test(tc, test_load_all_ranks, 0, 18);
  tcase_add_test(tc, test_merge);
  tcase_add_test(tc, test_errors);
  tcase_add_test(tc, test_file_changed);
  tcase_add_test(tc, test_big_row);
  tcase_add_test(tc, test_io_names);
  suite_add_tcase(s, tc);
  return s;
}

int
main(void)
{
  SRunner *sr = srunner_create(load_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
