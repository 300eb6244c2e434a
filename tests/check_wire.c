/*
 * Wire format tests: round trips of every golden and zoo layout, and every
 * kind of corruption (each bit flipped, each truncation, wrong magic, a
 * future version, forged counts) rejected with the right code; messages
 * streamed window by window equal to the whole encodings.
 */
#include "core_internal.h"
#include "dbuf/layout.h"
#include "dbuf/layout_json.h"
#include "dbuf/shapes_io.h"
#include "dbuf/wire.h"

#include <check.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "layout_internal.h"
#include "testutil.h"

static json_t *cases; /* golden cases from both files, error cases dropped */

static void
load_cases(void)
{
  const char *files[] = {"layouts.jsonl", "zoo-layouts.jsonl"};
  cases = json_array();
  for (int f = 0; f < 2; f++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/golden/%s", test_data_dir(), files[f]);
    FILE *in = fopen(path, "r");
    if (in == NULL) {
      fprintf(stderr, "cannot open %s\n", path);
      exit(2);
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, in)) > 0) {
      json_t *c = json_loadb(line, (size_t)len, 0, NULL);
      if (c == NULL) {
        fprintf(stderr, "%s: bad JSON\n", path);
        exit(2);
      }
      if (json_object_get(c, "expect_error") == NULL)
        json_array_append_new(cases, c);
      else
        json_decref(c);
    }
    free(line);
    fclose(in);
  }
}

/* Build the layout of golden case i. */
static dbuf_layout_t *
case_layout(size_t i)
{
  json_t *c = json_array_get(cases, i);
  dbuf_tensors_t *t = NULL;
  dbuf_diag_t d;
  json_t *sf = json_object_get(c, "shapes_file");
  if (sf != NULL) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", test_data_dir(), json_string_value(sf));
    ck_assert_int_eq(dbuf_shapes_read(path, &t, NULL, &d), 0);
  } else {
    ck_assert_int_eq(dbuf_tensors_create(&t), 0);
    size_t k;
    json_t *s;
    json_array_foreach(json_object_get(c, "shapes"), k, s) {
      int64_t dims[DBUF_MAX_DIMS];
      int nd = (int)json_array_size(s);
      for (int j = 0; j < nd; j++)
        dims[j] = json_integer_value(json_array_get(s, (size_t)j));
      char name[32];
      snprintf(name, sizeof name, "t%zu", k);
      ck_assert_int_eq(dbuf_tensors_add(t, name, nd, dims, &d), 0);
    }
  }
  dbuf_layout_params_t p;
  dbuf_layout_params_init(&p);
  ck_assert_int_eq(dbuf_layout_kind_parse(json_string_value(json_object_get(c, "layout")),
                                          &p.kind), 0);
  p.nranks = (int)json_integer_value(json_object_get(c, "dp_size"));
  p.block_size = json_integer_value(json_object_get(c, "block_size"));
  int *owners = NULL;
  json_t *ow = json_object_get(c, "owners");
  if (ow != NULL) {
    owners = calloc(json_array_size(ow) + 1, sizeof *owners);
    for (size_t k = 0; k < json_array_size(ow); k++)
      owners[k] = (int)json_integer_value(json_array_get(ow, k));
    p.owners = owners;
    p.nowners = (int64_t)json_array_size(ow);
  }
  dbuf_layout_t *l = NULL;
  int rc = dbuf_layout_build(t, &p, &l, &d);
  ck_assert_msg(rc == 0, "%s: %s", json_string_value(json_object_get(c, "name")), d.msg);
  free(owners);
  dbuf_tensors_destroy(t);
  return l;
}

/* A small layout of every feature: 5 tensors, 1-D and 2-D, padding. */
static dbuf_layout_t *
seed_layout(dbuf_layout_kind_t kind)
{
  const char *names[] = {"P0", "P1", "P2", "P3", "P4"};
  const int64_t shapes[][2] = {{2, 6}, {4, 4}, {4, 4}, {1, 2}, {6, 1}};
  dbuf_tensors_t *t;
  dbuf_layout_t *l;
  dbuf_layout_params_t p;
  ck_assert_int_eq(dbuf_tensors_create(&t), 0);
  for (int i = 0; i < 5; i++)
    ck_assert_int_eq(dbuf_tensors_add(t, names[i], i == 4 ? 1 : 2, shapes[i], NULL), 0);
  dbuf_layout_params_init(&p);
  p.kind = kind;
  p.nranks = 3;
  p.auto_owners = kind == DBUF_LAYOUT_TENSOR;
  ck_assert_int_eq(dbuf_layout_build(t, &p, &l, NULL), 0);
  dbuf_tensors_destroy(t);
  return l;
}

static void
assert_same(const dbuf_layout_t *a, const dbuf_layout_t *b)
{
  int64_t n = dbuf_layout_ntensors(a);
  int nr = dbuf_layout_nranks(a);
  ck_assert_int_eq(dbuf_layout_kind(a), dbuf_layout_kind(b));
  ck_assert_int_eq(nr, dbuf_layout_nranks(b));
  ck_assert_int_eq(dbuf_layout_block_size(a), dbuf_layout_block_size(b));
  ck_assert_int_eq(dbuf_layout_chunk_size(a), dbuf_layout_chunk_size(b));
  ck_assert_int_eq(dbuf_layout_size(a), dbuf_layout_size(b));
  ck_assert_int_eq(n, dbuf_layout_ntensors(b));
  const dbuf_tensors_t *ta = dbuf_layout_tensors(a), *tb = dbuf_layout_tensors(b);
  for (int64_t i = 0; i < n; i++) {
    ck_assert_str_eq(dbuf_tensors_name(ta, i), dbuf_tensors_name(tb, i));
    ck_assert_int_eq(dbuf_tensors_ndim(ta, i), dbuf_tensors_ndim(tb, i));
    for (int d = 0; d < dbuf_tensors_ndim(ta, i); d++)
      ck_assert_int_eq(dbuf_tensors_dims(ta, i)[d], dbuf_tensors_dims(tb, i)[d]);
    ck_assert_int_eq(dbuf_layout_offsets(a)[i], dbuf_layout_offsets(b)[i]);
  }
  for (int r = 0; r <= nr; r++)
    ck_assert_int_eq(dbuf_layout_range(a)[r], dbuf_layout_range(b)[r]);
  ck_assert_int_eq(dbuf_layout_owners(a) == NULL, dbuf_layout_owners(b) == NULL);
  for (int64_t i = 0; dbuf_layout_owners(a) && i < n; i++)
    ck_assert_int_eq(dbuf_layout_owners(a)[i], dbuf_layout_owners(b)[i]);
}

/* Round trip: decode(encode(l)) == l, the re-encoding is byte-identical,
 * the result validates, and the digests agree. */
static void
round_trip(const dbuf_layout_t *l)
{
  void *buf, *buf2;
  int64_t len, len2;
  dbuf_layout_t *back = NULL;
  dbuf_diag_t d;
  uint64_t d1, d2;
  ck_assert_int_eq(dbuf_wire_encode(l, &buf, &len, &d), 0);
  int rc = dbuf_wire_decode(buf, len, &back, &d);
  ck_assert_msg(rc == 0, "decode: %s", d.msg);
  assert_same(l, back);
  ck_assert_int_eq(dbuf_layout_validate(back, NULL, NULL, NULL, NULL), 0);
  ck_assert_int_eq(dbuf_wire_encode(back, &buf2, &len2, &d), 0);
  ck_assert_int_eq(len, len2);
  ck_assert(memcmp(buf, buf2, (size_t)len) == 0);
  ck_assert_int_eq(dbuf_wire_digest(l, &d1, NULL), 0);
  ck_assert_int_eq(dbuf_wire_digest(back, &d2, NULL), 0);
  ck_assert(d1 == d2);
  free(buf);
  free(buf2);
  dbuf_layout_destroy(back);
}

START_TEST(test_golden_round_trip)
{
  dbuf_layout_t *l = case_layout((size_t)_i);
  round_trip(l);
  dbuf_layout_destroy(l);
}
END_TEST

START_TEST(test_seed_kinds)
{
  for (int k = DBUF_LAYOUT_PADDED; k <= DBUF_LAYOUT_COMPACT; k++) {
    dbuf_layout_t *l = seed_layout((dbuf_layout_kind_t)k);
    round_trip(l);
    dbuf_layout_destroy(l);
  }
}
END_TEST

/* Little-endian word helpers for forging messages. */
static uint64_t
get64(const uint8_t *p)
{
  uint64_t v = 0;
  for (int i = 0; i < 8; i++)
    v |= (uint64_t)p[i] << (8 * i);
  return v;
}

static void
put64(uint8_t *p, uint64_t v)
{
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

/* Recompute both checksums after a deliberate change. */
static void
reseal(uint8_t *p, int64_t len)
{
  put64(p + 120, XXH3_64bits(p, 120));
  put64(p + len - 8, XXH3_64bits(p, (size_t)len - 8));
}

static int
decode_rc(const void *buf, int64_t len)
{
  dbuf_layout_t *l = NULL;
  dbuf_diag_t d;
  dbuf_diag_clear(&d);
  int rc = dbuf_wire_decode(buf, len, &l, &d);
  dbuf_layout_destroy(l);
  if (rc != 0)
    ck_assert_msg(d.msg[0] != '\0' && d.code == rc, "no message for %d", rc);
  return rc;
}

START_TEST(test_every_bit_flip)
{
  dbuf_layout_t *l = seed_layout((dbuf_layout_kind_t)(DBUF_LAYOUT_PADDED + _i));
  uint8_t *buf;
  int64_t len;
  ck_assert_int_eq(dbuf_wire_encode(l, (void **)&buf, &len, NULL), 0);
  for (int64_t byte = 0; byte < len; byte++) {
    for (int bit = 0; bit < 8; bit++) {
      buf[byte] ^= (uint8_t)(1u << bit);
      int rc = decode_rc(buf, len);
      int want = byte < 8 ? DBUF_EFORMAT : DBUF_ECHECKSUM;
      ck_assert_msg(rc == want, "flip byte %lld bit %d: %s, want %s", (long long)byte, bit,
                    dbuf_err_name(rc), dbuf_err_name(want));
      buf[byte] ^= (uint8_t)(1u << bit);
    }
  }
  ck_assert_int_eq(decode_rc(buf, len), 0);
  free(buf);
  dbuf_layout_destroy(l);
}
END_TEST

START_TEST(test_truncated_and_long)
{
  dbuf_layout_t *l = seed_layout(DBUF_LAYOUT_TENSOR);
  uint8_t *buf;
  int64_t len;
  ck_assert_int_eq(dbuf_wire_encode(l, (void **)&buf, &len, NULL), 0);
  for (int64_t n = 0; n < len; n++)
    ck_assert_int_eq(decode_rc(buf, n), DBUF_EFORMAT);
  uint8_t *more = calloc(1, (size_t)len + 8);
  memcpy(more, buf, (size_t)len);
  ck_assert_int_eq(decode_rc(more, len + 8), DBUF_EFORMAT);
  free(more);
  free(buf);
  dbuf_layout_destroy(l);
}
END_TEST

START_TEST(test_magic_version_kind)
{
  dbuf_layout_t *l = seed_layout(DBUF_LAYOUT_PADDED);
  uint8_t *buf;
  int64_t len;
  ck_assert_int_eq(dbuf_wire_encode(l, (void **)&buf, &len, NULL), 0);
  ck_assert(memcmp(buf, DBUF_WIRE_MAGIC, 8) == 0);
  ck_assert_int_eq(get64(buf + 8), DBUF_WIRE_VERSION);
  ck_assert_int_eq((int64_t)get64(buf + 16), len);

  memcpy(buf, "PNG\r\n\x1a\n\0", 8);
  reseal(buf, len);
  ck_assert_int_eq(decode_rc(buf, len), DBUF_EFORMAT);
  memcpy(buf, DBUF_WIRE_MAGIC, 8);

  put64(buf + 8, DBUF_WIRE_VERSION + 1); /* a future version, properly sealed */
  reseal(buf, len);
  ck_assert_int_eq(decode_rc(buf, len), DBUF_EVERSION);
  put64(buf + 8, 1); /* the format before the compact one */
  reseal(buf, len);
  {
    dbuf_layout_t *old = NULL;
    dbuf_diag_t dv;
    ck_assert_int_eq(dbuf_wire_decode(buf, len, &old, &dv), DBUF_EVERSION);
    ck_assert_str_eq(dv.msg, "wire: format version 1, this build reads only version 2 "
                             "(every rank must run the same dbuf-shard)");
  }
  put64(buf + 8, 0);
  reseal(buf, len);
  ck_assert_int_eq(decode_rc(buf, len), DBUF_EVERSION);
  put64(buf + 8, DBUF_WIRE_VERSION);

  put64(buf + 32, 5); /* one past compact, the last kind */
  reseal(buf, len);
  ck_assert_int_eq(decode_rc(buf, len), DBUF_EFORMAT);
  put64(buf + 32, 9);
  reseal(buf, len);
  ck_assert_int_eq(decode_rc(buf, len), DBUF_EFORMAT);
  put64(buf + 32, DBUF_LAYOUT_PADDED);

  reseal(buf, len);
  ck_assert_int_eq(decode_rc(buf, len), 0);
  free(buf);
  dbuf_layout_destroy(l);
}
END_TEST

/* Sealed messages with forged counts and fields: never a crash, always a code. */
START_TEST(test_forged_fields)
{
  dbuf_layout_t *l = seed_layout(DBUF_LAYOUT_TENSOR);
  uint8_t *buf;
  int64_t len;
  ck_assert_int_eq(dbuf_wire_encode(l, (void **)&buf, &len, NULL), 0);
  struct {
    int at;
    uint64_t val;
    int want;
  } forged[] = {
      {40, 0, DBUF_EFORMAT},                      /* nranks 0 */
      {40, (uint64_t)1 << 40, DBUF_EFORMAT},      /* nranks past INT_MAX */
      {40, 4, DBUF_EFORMAT},                      /* RANGE section too short */
      {72, (uint64_t)1 << 60, DBUF_EFORMAT},      /* absurd tensor count */
      {72, (uint64_t)1 << 61, DBUF_EFORMAT},      /* count x record bytes overflows */
      {72, (uint64_t)-1, DBUF_EFORMAT},           /* negative tensor count */
      {72, 4, DBUF_EFORMAT},                      /* fewer tensors than recorded */
      {64, 12345, DBUF_ELAYOUT},                  /* size != range end */
      {80, 1, DBUF_EFORMAT},                      /* unknown layout flags */
      {88, (uint64_t)1 << 62, DBUF_EFORMAT},      /* absurd shape count */
      {104, (uint64_t)1 << 62, DBUF_EFORMAT},     /* absurd record bytes */
      {96, 5, DBUF_EFORMAT},                      /* a section left unread */
      {96, 7, DBUF_EFORMAT},                      /* one section too many */
      {24, 64, DBUF_EFORMAT},                     /* header length */
      {136, (uint64_t)1 << 62, DBUF_EFORMAT},     /* SHAPES payload length */
  };
  for (size_t i = 0; i < sizeof forged / sizeof forged[0]; i++) {
    uint8_t *c = malloc((size_t)len);
    memcpy(c, buf, (size_t)len);
    put64(c + forged[i].at, forged[i].val);
    reseal(c, len);
    int rc = decode_rc(c, len);
    ck_assert_msg(rc == forged[i].want, "forged word at %d = %llu: %s, want %s",
                  forged[i].at, (unsigned long long)forged[i].val, dbuf_err_name(rc),
                  dbuf_err_name(forged[i].want));
    free(c);
  }
  free(buf);
  dbuf_layout_destroy(l);
}
END_TEST

/*
 * Issue 8, defect 1: a sealed message whose block x row size overflows
 * (block 2^32, tensor a 2 x 2^32) decoded without error, and validating it
 * took `% 0` (SIGFPE).  It is refused at decode, naming the tensor.
 */
START_TEST(test_block_row_overflow)
{
  dbuf_tensors_t *t;
  dbuf_layout_t *l, *back = NULL;
  dbuf_layout_params_t p;
  dbuf_diag_t d;
  uint8_t *buf;
  int64_t len;
  const int64_t shape[2] = {2, 4};
  ck_assert_int_eq(dbuf_tensors_create(&t), 0);
  ck_assert_int_eq(dbuf_tensors_add(t, "a", 2, shape, NULL), 0);
  dbuf_layout_params_init(&p);
  p.kind = DBUF_LAYOUT_UNPADDED;
  p.nranks = 2;
  ck_assert_int_eq(dbuf_layout_build(t, &p, &l, NULL), 0);
  ck_assert_int_eq(dbuf_wire_encode(l, (void **)&buf, &len, NULL), 0);
  /* Layout of the message: header (128 bytes), SHAPES tag and length,
   * then the one shape: its dim count (32 bits) at 144, dims at 148 and 156. */
  ck_assert_int_eq(get64(buf + 136), 20);
  ck_assert_int_eq(buf[144], 2);
  ck_assert_int_eq(get64(buf + 148), 2);
  ck_assert_int_eq(get64(buf + 156), 4);
  /* RANGE is the last section: [0, 4, 8] in the 3 words before the sum. */
  ck_assert_int_eq(get64(buf + len - 16), 8);
  put64(buf + 48, (uint64_t)1 << 32);  /* block size */
  put64(buf + 64, (uint64_t)1 << 33);  /* size */
  put64(buf + 156, (uint64_t)1 << 32); /* row size of a */
  put64(buf + len - 24, 1);            /* rank 1 starts at 1 */
  put64(buf + len - 16, (uint64_t)1 << 33);
  reseal(buf, len);
  dbuf_diag_clear(&d);
  int rc = dbuf_wire_decode(buf, len, &back, &d);
  ck_assert_msg(rc == DBUF_EOVERFLOW, "decode: %s (%s)", dbuf_err_name(rc), d.msg);
  ck_assert_ptr_null(back);
  ck_assert_str_eq(d.msg, "tensor a: block size 4294967296 x row size 4294967296 "
                          "overflows 64 bits");
  free(buf);
  dbuf_layout_destroy(back);
  dbuf_layout_destroy(l);
  dbuf_tensors_destroy(t);
}
END_TEST

/* An optional section (tag >= 256) is skipped: room for later additions. */
START_TEST(test_optional_section)
{
  dbuf_layout_t *l = seed_layout(DBUF_LAYOUT_UNPADDED), *back = NULL;
  uint8_t *buf;
  int64_t len;
  ck_assert_int_eq(dbuf_wire_encode(l, (void **)&buf, &len, NULL), 0);
  int64_t nlen = len + 24;
  uint8_t *c = calloc(1, (size_t)nlen);
  memcpy(c, buf, (size_t)len - 8);
  put64(c + len - 8, 300); /* tag */
  put64(c + len, 8);       /* payload bytes */
  put64(c + len + 8, 42);  /* payload */
  put64(c + 16, (uint64_t)nlen);
  put64(c + 96, get64(c + 96) + 1);
  reseal(c, nlen);
  ck_assert_int_eq(dbuf_wire_decode(c, nlen, &back, NULL), 0);
  assert_same(l, back);
  dbuf_layout_destroy(back);
  put64(c + len - 8, 200); /* a required tag this version does not know */
  reseal(c, nlen);
  ck_assert_int_eq(decode_rc(c, nlen), DBUF_EFORMAT);
  free(c);
  free(buf);
  dbuf_layout_destroy(l);
}
END_TEST

/*
 * Structural errors behind a good checksum: a valid message of the seed
 * tensor layout (3 ranks; P0 2x6, P1 4x4, P2 4x4, P3 1x2, P4 6; sections
 * SHAPES, TENSORS, NAMES, OFFSETS, RANGE, OWNERS), one field changed, both
 * checksums recomputed as the encoder computes them; each gives its own code
 * and message.  Where a field is: a header word, a section's tag or payload
 * length, or a 64-bit word, 32-bit word or byte at a payload byte offset.
 * The seed's payloads (derived by hand from the byte map in dbuf/wire.h):
 * SHAPES 4 shapes, [2,6] at 0, [4,4] at 20, [1,2] at 40, [6] at 60 (72
 * bytes); TENSORS 5 records of 16 bytes (shape, prefix, suffix, flags);
 * NAMES "P01234" (P0, then P1..P4 as a 1-byte prefix and a 1-byte suffix);
 * OFFSETS 5 words; RANGE 4 words; OWNERS 5 32-bit words.
 */
enum { AT_ABS, AT_TAG, AT_LEN, AT_P64, AT_P32, AT_P8 };
enum { S_SHAPES, S_TENSORS, S_NAMES, S_OFFSETS, S_RANGE, S_OWNERS };

typedef struct {
  const char *what;
  int where, sec; /* AT_TAG .. AT_P8: the section index */
  int64_t at;     /* AT_ABS: header offset; AT_P*: payload byte offset */
  uint64_t val;
  int want;
  const char *msg;
} structural_t;

static const structural_t structural[] = {
    {"reserved header word", AT_ABS, 0, 112, 1, DBUF_EFORMAT, "wire: unknown header fields"},
    {"layout flags 1", AT_ABS, 0, 80, 1, DBUF_EFORMAT, "wire: unknown header fields"},
    {"8-byte records", AT_ABS, 0, 104, 8, DBUF_EFORMAT,
     "wire: tensor records of 8 bytes (16 to 256)"},
    {"257-byte records", AT_ABS, 0, 104, 257, DBUF_EFORMAT,
     "wire: tensor records of 257 bytes (16 to 256)"},
    {"17-byte records", AT_ABS, 0, 104, 17, DBUF_EFORMAT,
     "wire: section 2 (tensor records) holds 80 bytes, 5 of 17 bytes expected"},
    {"kind 0", AT_ABS, 0, 32, 0, DBUF_EFORMAT, "wire: unknown layout kind 0"},
    {"rank count -1", AT_ABS, 0, 40, (uint64_t)-1, DBUF_EFORMAT,
     "wire: rank count -1 out of range"},
    {"tensor count -1", AT_ABS, 0, 72, (uint64_t)-1, DBUF_EFORMAT,
     "wire: tensor count -1 out of range (0 to 4294967295)"},
    {"tensor count 2^32", AT_ABS, 0, 72, (uint64_t)1 << 32, DBUF_EFORMAT,
     "wire: tensor count 4294967296 out of range (0 to 4294967295)"},
    {"6 shapes for 5 tensors", AT_ABS, 0, 88, 6, DBUF_EFORMAT, "wire: 6 shapes for 5 tensors"},
    {"shape count -1", AT_ABS, 0, 88, (uint64_t)-1, DBUF_EFORMAT,
     "wire: -1 shapes for 5 tensors"},
    {"3 shapes recorded, 4 sent", AT_ABS, 0, 88, 3, DBUF_EFORMAT,
     "wire: 12 stray bytes after the shapes"},
    {"4 tensors recorded, 5 sent", AT_ABS, 0, 72, 4, DBUF_EFORMAT,
     "wire: section 2 (tensor records) holds 80 bytes, 4 of 16 bytes expected"},
    {"4 ranks recorded, a range of 4 words", AT_ABS, 0, 40, 4, DBUF_EFORMAT,
     "wire: section 5 (rank range) holds 32 bytes, 5 of 8 bytes expected"},
    /* The tensor layout's size is its 52 elements. */
    {"size 12345", AT_ABS, 0, 64, 12345, DBUF_ELAYOUT, "wire: range ends at 52, size is 12345"},
    /* OWNERS: tag, length and 5 32-bit words. */
    {"5 sections recorded, 6 sent", AT_ABS, 0, 96, 5, DBUF_EFORMAT,
     "wire: 36 stray bytes after the sections"},
    {"7 sections recorded, 6 sent", AT_ABS, 0, 96, 7, DBUF_EFORMAT,
     "wire: section 6 does not fit"},
    {"TENSORS tagged SHAPES", AT_TAG, S_TENSORS, 0, 1, DBUF_EFORMAT,
     "wire: unknown or repeated section 1"},
    {"section tag 7", AT_TAG, S_TENSORS, 0, 7, DBUF_EFORMAT,
     "wire: unknown or repeated section 7"},
    {"section tag 0", AT_TAG, S_TENSORS, 0, 0, DBUF_EFORMAT,
     "wire: unknown or repeated section 0"},
    {"RANGE tagged optional", AT_TAG, S_RANGE, 0, 300, DBUF_EFORMAT,
     "wire: required section 5 is missing"},
    {"OWNERS of 16 bytes", AT_LEN, S_OWNERS, 0, 16, DBUF_EFORMAT,
     "wire: 4 stray bytes after the sections"},
    {"OFFSETS past the end", AT_LEN, S_OFFSETS, 0, (uint64_t)1 << 40, DBUF_EFORMAT,
     "wire: section 3 does not fit"},
    {"OFFSETS of -8 bytes", AT_LEN, S_OFFSETS, 0, (uint64_t)-8, DBUF_EFORMAT,
     "wire: section 3 does not fit"},
    {"shape of 0 dims", AT_P32, S_SHAPES, 0, 0, DBUF_EFORMAT,
     "wire: shape 0: 0 dims (1 to 16, in the section)"},
    {"shape of 17 dims", AT_P32, S_SHAPES, 0, 17, DBUF_EFORMAT,
     "wire: shape 0: 17 dims (1 to 16, in the section)"},
    {"last shape runs past its section", AT_P32, S_SHAPES, 60, 3, DBUF_EFORMAT,
     "wire: shape 3: 3 dims (1 to 16, in the section)"},
    {"a negative dim", AT_P64, S_SHAPES, 4, (uint64_t)-1, DBUF_ESHAPE,
     "wire: tensor P0: dim 0 is negative (-1)"},
    {"element count past 64 bits", AT_P64, S_SHAPES, 4, (uint64_t)1 << 62, DBUF_EOVERFLOW,
     "wire: tensor P0: element count overflows 64 bits"},
    {"shape index 4 of 4", AT_P32, S_TENSORS, 0, 4, DBUF_EFORMAT,
     "wire: tensor 0: shape index out of the table"},
    {"tensor flags 1", AT_P32, S_TENSORS, 12, 1, DBUF_EFORMAT, "wire: tensor 0: unknown flags"},
    {"first name shares a prefix", AT_P32, S_TENSORS, 4, 1, DBUF_EFORMAT,
     "wire: tensor 0: name prefix longer than the previous name"},
    {"prefix of 3 after a 2-byte name", AT_P32, S_TENSORS, 16 + 4, 3, DBUF_EFORMAT,
     "wire: tensor 1: name prefix longer than the previous name"},
    {"empty name", AT_P32, S_TENSORS, 8, 0, DBUF_EFORMAT, "wire: tensor 0: empty name"},
    {"last suffix past the names", AT_P32, S_TENSORS, 64 + 8, 2, DBUF_EFORMAT,
     "wire: tensor 4: name runs past the names section"},
    {"suffix of 2^32 - 1 bytes", AT_P32, S_TENSORS, 8, UINT32_MAX, DBUF_EFORMAT,
     "wire: tensor 0: name runs past the names section"},
    {"a byte of names left over", AT_P32, S_TENSORS, 8, 1, DBUF_EFORMAT,
     "wire: 1 stray bytes after the names"},
    {"NUL in a name", AT_P8, S_NAMES, 1, 0, DBUF_EFORMAT, "wire: tensor 0: NUL byte in the name"},
    {"duplicate name", AT_P8, S_NAMES, 2, '0', DBUF_EDUP,
     "wire: tensor P0: duplicate name (tensor 0)"},
    {"owner 7 of 3 ranks", AT_P32, S_OWNERS, 16, 7, DBUF_EOWNER,
     "wire: tensor P4: owner 7 out of range [0, 3)"},
    {"owner 2^32 - 1", AT_P32, S_OWNERS, 0, UINT32_MAX, DBUF_EOWNER,
     "wire: tensor P0: owner 4294967295 out of range [0, 3)"},
    {"first rank offset 5", AT_P64, S_RANGE, 0, 5, DBUF_ELAYOUT,
     "rank 0: segment starts at 5, not 0"},
    {"block size 0", AT_ABS, 0, 48, 0, DBUF_EINVAL, "block size must be positive, got 0"},
    {"chunk size -1", AT_ABS, 0, 56, (uint64_t)-1, DBUF_ELAYOUT,
     "chunk size -1 is not positive"},
};

/* Offset of section sec's tag in a message. */
static int64_t
section_at(const uint8_t *buf, int sec)
{
  int64_t pos = 128;
  for (int s = 0; s < sec; s++)
    pos += 16 + (int64_t)get64(buf + pos + 8);
  return pos;
}

/*
 * Front-coded names cannot decode to unbounded memory: at most 64 times the
 * message plus 64 MiB.  A forged message of 2,000 names of 65,536 bytes
 * (131 MB) in about 123 KB: tensor 0 spells its name out, every other
 * record is changed to share 65,531 bytes of the previous name and add its
 * own 5 (the encoder wrote them sharing nothing); it is refused before the
 * budget (64 x 123 KB + 64 MiB, about 75 MB) is passed, naming the tensor.
 * The encoder refuses the same names, and a chain of 12,000 names growing a
 * byte at a time (72 MB of names from 300 KB) is within the budget.
 */
static dbuf_layout_t *
names_layout(int64_t n, const char *(*name)(int64_t, char *))
{
  dbuf_tensors_t *t;
  dbuf_layout_t *l;
  dbuf_layout_params_t lp;
  const int64_t one = 1;
  char *buf = malloc(65537 + (size_t)n);
  ck_assert_ptr_nonnull(buf);
  ck_assert_int_eq(dbuf_tensors_create(&t), 0);
  for (int64_t i = 0; i < n; i++)
    ck_assert_int_eq(dbuf_tensors_add(t, name(i, buf), 1, &one, NULL), 0);
  free(buf);
  dbuf_layout_params_init(&lp);
  lp.kind = DBUF_LAYOUT_UNPADDED;
  ck_assert_int_eq(dbuf_layout_build(t, &lp, &l, NULL), 0);
  dbuf_tensors_destroy(t);
  return l;
}

/* Tensor 0: 65,536 'Z'; tensor i: "A0001" / "B0002"..., first letters
 * alternating so that the encoder shares nothing. */
static const char *
short_name(int64_t i, char *buf)
{
  if (i == 0) {
    memset(buf, 'Z', 65536);
    buf[65536] = '\0';
  } else {
    snprintf(buf, 16, "%c%04d", i % 2 ? 'A' : 'B', (int)i);
  }
  return buf;
}

/* The same names as the forged message decodes them: 65,531 'Z' first. */
static const char *
long_name(int64_t i, char *buf)
{
  short_name(i, buf);
  if (i > 0) {
    char tail[8];
    memcpy(tail, buf, 6);
    memset(buf, 'Z', 65531);
    memcpy(buf + 65531, tail, 6);
  }
  return buf;
}

/* "k", "kx", "kxx", ...: each name shares the whole one before it. */
static const char *
chain_name(int64_t i, char *buf)
{
  buf[0] = 'k';
  memset(buf + 1, 'x', (size_t)i);
  buf[i + 1] = '\0';
  return buf;
}

START_TEST(test_names_budget)
{
  dbuf_layout_t *l = names_layout(2000, short_name), *back = NULL;
  uint8_t *buf;
  int64_t len;
  dbuf_diag_t d;
  ck_assert_int_eq(dbuf_wire_encode(l, (void **)&buf, &len, NULL), 0);
  dbuf_layout_destroy(l);
  ck_assert_int_lt(len, 130000);
  uint8_t *rec = buf + section_at(buf, S_TENSORS) + 16;
  for (int64_t i = 1; i < 2000; i++) {
    ck_assert_int_eq(rec[16 * i + 4], 0); /* shared nothing: prefix 0, suffix 5 */
    ck_assert_int_eq(rec[16 * i + 8], 5);
    rec[16 * i + 4] = (uint8_t)(65531 & 0xff);
    rec[16 * i + 5] = (uint8_t)(65531 >> 8);
  }
  reseal(buf, len);
  dbuf_diag_clear(&d);
  ck_assert_int_eq(dbuf_wire_decode(buf, len, &back, &d), DBUF_EFORMAT);
  ck_assert_ptr_null(back);
  /* The budget: 64 x len + 64 MiB bytes of names; tensor k is the first
   * whose 65,536 bytes pass it. */
  int64_t k = (64 * len + ((int64_t)64 << 20)) / 65536;
  char want[160];
  snprintf(want, sizeof want,
           "wire: tensor %lld: the names decode to more than 64 times the %lld-byte message",
           (long long)k, (long long)len);
  ck_assert_str_eq(d.msg, want);
  free(buf);
  /* The encoder refuses those names itself. */
  l = names_layout(2000, long_name);
  dbuf_diag_clear(&d);
  ck_assert_int_eq(dbuf_wire_encode(l, (void **)&buf, &len, &d), DBUF_EOVERFLOW);
  ck_assert_ptr_nonnull(strstr(d.msg, "share so much"));
  dbuf_layout_destroy(l);
  /* A chain of 12,000 names (72 MB of names) is within the budget. */
  l = names_layout(12000, chain_name);
  ck_assert_int_eq(dbuf_wire_encode(l, (void **)&buf, &len, NULL), 0);
  ck_assert_int_eq(dbuf_wire_decode(buf, len, &back, NULL), 0);
  ck_assert_int_eq(dbuf_layout_ntensors(back), 12000);
  ck_assert_int_eq((int64_t)strlen(dbuf_tensors_name(dbuf_layout_tensors(back), 11999)), 12000);
  dbuf_layout_destroy(back);
  dbuf_layout_destroy(l);
  free(buf);
}
END_TEST

/* The seed tensor layout's message with case c's field changed, resealed. */
static void
structural_message(const structural_t *c, uint8_t **out, int64_t *outlen)
{
  dbuf_layout_t *l = seed_layout(DBUF_LAYOUT_TENSOR);
  uint8_t *buf;
  int64_t len;
  ck_assert_int_eq(dbuf_wire_encode(l, (void **)&buf, &len, NULL), 0);
  dbuf_layout_destroy(l);
  /* The message as derived above: 6 sections of these tags and lengths. */
  static const int64_t plen[6] = {72, 80, 6, 40, 32, 20};
  ck_assert_int_eq(get64(buf + 96), 6);
  ck_assert_int_eq(get64(buf + 88), 4);
  for (int k = 0; k < 6; k++) {
    ck_assert_int_eq(get64(buf + section_at(buf, k)), k + 1);
    ck_assert_int_eq(get64(buf + section_at(buf, k) + 8), plen[k]);
  }
  ck_assert_int_eq(len, 128 + 6 * 16 + 72 + 80 + 6 + 40 + 32 + 20 + 8);
  ck_assert(memcmp(buf + section_at(buf, S_NAMES) + 16, "P01234", 6) == 0);
  uint8_t *pay = buf + section_at(buf, c->sec) + 16;
  switch (c->where) {
  case AT_ABS:
    put64(buf + c->at, c->val);
    break;
  case AT_TAG:
    put64(buf + section_at(buf, c->sec), c->val);
    break;
  case AT_LEN:
    put64(buf + section_at(buf, c->sec) + 8, c->val);
    break;
  case AT_P64:
    put64(pay + c->at, c->val);
    break;
  case AT_P32:
    for (int k = 0; k < 4; k++)
      pay[c->at + k] = (uint8_t)(c->val >> (8 * k));
    break;
  default:
    pay[c->at] = (uint8_t)c->val;
    break;
  }
  reseal(buf, len);
  *out = buf;
  *outlen = len;
}

START_TEST(test_structural)
{
  const structural_t *c = &structural[_i];
  dbuf_layout_t *back = NULL;
  uint8_t *buf;
  int64_t len;
  dbuf_diag_t d;
  structural_message(c, &buf, &len);
  dbuf_diag_clear(&d);
  int rc = dbuf_wire_decode(buf, len, &back, &d);
  ck_assert_msg(rc == c->want, "%s: %s (%s), want %s", c->what, dbuf_err_name(rc), d.msg,
                dbuf_err_name(c->want));
  ck_assert_msg(strcmp(d.msg, c->msg) == 0, "%s: '%s', want '%s'", c->what, d.msg, c->msg);
  ck_assert_ptr_null(back);
  free(buf);
}
END_TEST

/* The compact format: 5000 tensors of two shapes and names sharing long
 * prefixes, then one with a 70,000-byte name, travel as 3 shapes, 16-byte
 * records and the names' suffixes; the digest, hashed a 64 KiB window at a
 * time without the message, is the message's own checksum. */
START_TEST(test_compact_size)
{
  enum { N = 5000, LONG = 70000 };
  dbuf_tensors_t *t = NULL;
  dbuf_layout_t *l = NULL, *back = NULL;
  dbuf_layout_params_t prm;
  ck_assert_int_eq(dbuf_tensors_create(&t), 0);
  int64_t names = 0;
  char prev[64] = "";
  for (int i = 0; i < N; i++) {
    char name[64];
    int64_t dims[2] = {i % 2 ? 8 : 4, 16};
    snprintf(name, sizeof name, "model.layers.%04d.w", i);
    int64_t k = 0;
    while (prev[k] != '\0' && prev[k] == name[k])
      k++;
    names += (int64_t)strlen(name) - k;
    snprintf(prev, sizeof prev, "%s", name);
    ck_assert_int_eq(dbuf_tensors_add(t, name, 2, dims, NULL), 0);
  }
  char *lname = malloc(LONG + 1);
  memset(lname, 'x', LONG);
  lname[LONG] = '\0';
  int64_t one = 3;
  ck_assert_int_eq(dbuf_tensors_add(t, lname, 1, &one, NULL), 0);
  names += LONG; /* shares nothing with "model..." */
  free(lname);
  dbuf_layout_params_init(&prm);
  prm.nranks = 4;
  ck_assert_int_eq(dbuf_layout_build(t, &prm, &l, NULL), 0);
  uint8_t *buf;
  int64_t len;
  uint64_t sum = 0, dig = 1;
  ck_assert_int_eq(dbuf_wire_encode(l, (void **)&buf, &len, NULL), 0);
  ck_assert_int_eq(get64(buf + 88), 3);
  /* header, 5 sections, shapes (2 of 2 dims, 1 of 1), records, names,
   * offsets, range, trailer */
  ck_assert_int_eq(len, 128 + 5 * 16 + 2 * 20 + 12 + (N + 1) * 16 + names + (N + 1) * 8 +
                            5 * 8 + 8);
  ck_assert_int_eq(dbuf_wire_checksum(buf, len, &sum), 0);
  ck_assert_int_eq(dbuf_wire_digest(l, &dig, NULL), 0);
  ck_assert(sum == dig);
  ck_assert_int_eq(dbuf_wire_decode(buf, len, &back, NULL), 0);
  assert_same(l, back);
  dbuf_layout_destroy(back);
  free(buf);
  dbuf_layout_destroy(l);
  dbuf_tensors_destroy(t);
}
END_TEST

START_TEST(test_digest_and_args)
{
  dbuf_layout_t *a = seed_layout(DBUF_LAYOUT_PADDED), *b = seed_layout(DBUF_LAYOUT_UNPADDED);
  uint64_t da, da2, db, sum;
  void *buf;
  int64_t len;
  dbuf_layout_t *out = NULL;
  ck_assert_int_eq(dbuf_wire_digest(a, &da, NULL), 0);
  ck_assert_int_eq(dbuf_wire_digest(a, &da2, NULL), 0);
  ck_assert_int_eq(dbuf_wire_digest(b, &db, NULL), 0);
  ck_assert(da == da2 && da != db);
  ck_assert_int_eq(dbuf_wire_encode(a, &buf, &len, NULL), 0);
  ck_assert_int_eq(dbuf_wire_checksum(buf, len, &sum), 0);
  ck_assert(sum == da);
  ck_assert_int_eq(dbuf_wire_checksum(buf, 10, &sum), DBUF_EFORMAT);
  ck_assert_int_eq(dbuf_wire_checksum(NULL, len, &sum), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_wire_encode(NULL, &buf, &len, NULL), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_wire_encode(a, NULL, &len, NULL), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_wire_decode(NULL, len, &out, NULL), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_wire_decode(buf, -1, &out, NULL), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_wire_decode(buf, len, NULL, NULL), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_wire_digest(a, NULL, NULL), DBUF_EINVAL);
  ck_assert_ptr_null(out);
  free(buf);
  dbuf_layout_destroy(a);
  dbuf_layout_destroy(b);
}
END_TEST

/*
 * A decoded layout carries its message's checksum as its digest, but only
 * when the message is the encoder's own bytes for it.  Each message below
 * decodes to the seed layout yet is not those bytes, so its checksum is not
 * the layout's digest: the decoded layout's digest must still be the one
 * of the seed built directly (and of its re-encoding).  Built from the
 * seed's sections (byte map in the structural table's comment):
 *   0 an optional section appended       1 SHAPES after TENSORS
 *   2 records of 20 bytes                3 tensor P1 sharing nothing ("P1")
 *   4 shapes 0 and 1 swapped in the table 5 shape [4,4] twice (P2 the copy)
 *   6 a chunk size of 7 in an unpadded layout (kept only by chunked kinds)
 */
typedef struct {
  const uint8_t *p;
  int64_t len;
} span_t;

/* The message of header hdr (128 bytes, total, sections and checksums
 * rewritten) and the tagged sections sec[0 .. nsec), sealed. */
static uint8_t *
build_message(const uint8_t *hdr, const uint64_t *tag, const span_t *sec, int nsec,
              int64_t *len)
{
  int64_t total = 128 + 8;
  for (int s = 0; s < nsec; s++)
    total += 16 + sec[s].len;
  uint8_t *m = calloc(1, (size_t)total), *at = m + 128;
  ck_assert_ptr_nonnull(m);
  memcpy(m, hdr, 128);
  put64(m + 16, (uint64_t)total);
  put64(m + 96, (uint64_t)nsec);
  for (int s = 0; s < nsec; s++) {
    put64(at, tag[s]);
    put64(at + 8, (uint64_t)sec[s].len);
    memcpy(at + 16, sec[s].p, (size_t)sec[s].len);
    at += 16 + sec[s].len;
  }
  reseal(m, total);
  *len = total;
  return m;
}

START_TEST(test_digest_not_canonical)
{
  dbuf_layout_t *l = seed_layout(DBUF_LAYOUT_UNPADDED), *back = NULL;
  uint8_t *buf, hdr[128], rec20[5 * 20], tens[80], shapes[92], names[8];
  int64_t len, nlen;
  uint64_t want, got, sum;
  ck_assert_int_eq(dbuf_wire_encode(l, (void **)&buf, &len, NULL), 0);
  ck_assert_int_eq(dbuf_wire_digest(l, &want, NULL), 0);
  memcpy(hdr, buf, 128);
  span_t sec[6];
  uint64_t tag[6] = {1, 2, 3, 4, 5, 300}, opt = 42;
  for (int s = 0; s < 5; s++) {
    int64_t at = section_at(buf, s);
    sec[s] = (span_t){buf + at + 16, (int64_t)get64(buf + at + 8)};
  }
  ck_assert_int_eq(sec[0].len, 72);
  ck_assert_int_eq(sec[1].len, 80);
  ck_assert_int_eq(sec[2].len, 6);
  memcpy(tens, sec[1].p, 80);
  switch (_i) {
  case 0:
    sec[5] = (span_t){(const uint8_t *)&opt, 8};
    break;
  case 1: {
    span_t x = sec[0];
    sec[0] = sec[1];
    sec[1] = x;
    tag[0] = 2;
    tag[1] = 1;
    break;
  }
  case 2:
    memset(rec20, 0, sizeof rec20);
    for (int i = 0; i < 5; i++)
      memcpy(rec20 + 20 * i, tens + 16 * i, 16);
    put64(hdr + 104, 20);
    sec[1] = (span_t){rec20, sizeof rec20};
    break;
  case 3: /* "P0" "1" ... becomes "P0" "P1" ...: P1's prefix 1 -> 0, suffix 1 -> 2 */
    tens[16 + 4] = 0;
    tens[16 + 8] = 2;
    memcpy(names, "P0P1234", 7);
    sec[1] = (span_t){tens, 80};
    sec[2] = (span_t){(const uint8_t *)names, 7};
    break;
  case 4: /* [2,6] and [4,4] are 20 bytes each */
    memcpy(shapes, sec[0].p + 20, 20);
    memcpy(shapes + 20, sec[0].p, 20);
    memcpy(shapes + 40, sec[0].p + 40, 32);
    for (int i = 0; i < 3; i++)
      tens[16 * i] = i == 0 ? 1 : 0;
    sec[0] = (span_t){shapes, 72};
    sec[1] = (span_t){tens, 80};
    break;
  case 5: /* shapes [2,6] [4,4] [4,4] [1,2] [6]: P2, P3, P4 use 2, 3, 4 */
    memcpy(shapes, sec[0].p, 40);
    memcpy(shapes + 40, sec[0].p + 20, 20);
    memcpy(shapes + 60, sec[0].p + 40, 32);
    for (int i = 2; i < 5; i++)
      tens[16 * i] = (uint8_t)i;
    put64(hdr + 88, 5);
    sec[0] = (span_t){shapes, 92};
    sec[1] = (span_t){tens, 80};
    break;
  default:
    put64(hdr + 56, 7);
    break;
  }
  uint8_t *m = build_message(hdr, tag, sec, _i == 0 ? 6 : 5, &nlen);
  dbuf_diag_t d;
  int rc = dbuf_wire_decode(m, nlen, &back, &d);
  ck_assert_msg(rc == 0, "case %d: %s", _i, d.msg);
  assert_same(l, back);
  ck_assert_int_eq(dbuf_wire_checksum(m, nlen, &sum), 0);
  ck_assert_msg(sum != want, "case %d: the message is the encoder's own", _i);
  ck_assert_int_eq(dbuf_wire_digest(back, &got, NULL), 0);
  ck_assert_msg(got == want, "case %d: digest %016llx, the layout's is %016llx", _i,
                (unsigned long long)got, (unsigned long long)want);
  /* The encoder's bytes, decoded, carry their checksum. */
  dbuf_layout_destroy(back);
  back = NULL;
  ck_assert_int_eq(dbuf_wire_decode(buf, len, &back, NULL), 0);
  ck_assert_int_eq(dbuf_wire_digest(back, &got, NULL), 0);
  ck_assert(got == want);
  free(m);
  free(buf);
  dbuf_layout_destroy(back);
  dbuf_layout_destroy(l);
}
END_TEST

/* Plan messages: a round trip keeps every buffer (unit, dtype, layout
 * digest); every bit flip is caught; forged counts and lengths are refused. */
static dbuf_plan_t *
seed_plan(void)
{
  dbuf_plan_t *p = NULL;
  ck_assert_int_eq(dbuf_plan_create(&p), 0);
  ck_assert_int_eq(dbuf_plan_add(p, "root", DBUF_DTYPE_F32, seed_layout(DBUF_LAYOUT_PADDED), NULL,
                                 NULL), 0);
  ck_assert_int_eq(dbuf_plan_add(p, "model.layers.0", DBUF_DTYPE_BF16,
                                 seed_layout(DBUF_LAYOUT_UNPADDED), NULL, NULL), 0);
  return p;
}

static void
reseal_plan(uint8_t *m, int64_t len)
{
  put64(m + 56, XXH3_64bits(m, 56));
  put64(m + len - 8, XXH3_64bits(m, (size_t)len - 8));
}

/* Buffer i of plans a and b: the same unit, dtype, layout and digest. */
static void
assert_same_buffer(const dbuf_plan_t *a, const dbuf_plan_t *b, int64_t i)
{
  dbuf_plan_buffer_t x, y;
  uint64_t dx, dy;
  dbuf_plan_buffer(a, i, &x);
  dbuf_plan_buffer(b, i, &y);
  ck_assert_str_eq(x.unit, y.unit);
  ck_assert_int_eq(x.dtype, y.dtype);
  assert_same(x.layout, y.layout);
  ck_assert_int_eq(dbuf_wire_digest(x.layout, &dx, NULL), 0);
  ck_assert_int_eq(dbuf_wire_digest(y.layout, &dy, NULL), 0);
  ck_assert(dx == dy);
}

START_TEST(test_plan_messages)
{
  dbuf_plan_t *p = seed_plan(), *q = NULL;
  void *buf;
  int64_t len;
  dbuf_diag_t d;
  ck_assert_int_eq(dbuf_wire_plan_encode(p, &buf, &len, NULL), 0);
  uint8_t *m = buf;
  ck_assert_int_eq(memcmp(m, DBUF_WIRE_PLAN_MAGIC, 8), 0);
  ck_assert_int_eq(get64(m + 24), 2);
  ck_assert_int_eq(dbuf_wire_plan_decode(buf, len, &q, NULL), 0);
  ck_assert_int_eq(dbuf_plan_nbuffers(q), 2);
  for (int64_t i = 0; i < 2; i++) {
    dbuf_plan_buffer_t b;
    dbuf_plan_buffer(q, i, &b);
    ck_assert_int_eq(b.elem_size, i == 0 ? 4 : 2);
    assert_same_buffer(p, q, i);
  }
  dbuf_plan_destroy(q);
  /* Every bit flip outside the magic: refused (checksums). */
  for (int64_t bit = 64; bit < 8 * len; bit += 7) {
    m[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    q = NULL;
    ck_assert_int_eq(dbuf_wire_plan_decode(buf, len, &q, NULL), DBUF_ECHECKSUM);
    ck_assert_ptr_null(q);
    m[bit / 8] ^= (uint8_t)(1u << (bit % 8));
  }
  /* Truncated, over-long, bad magic, version. */
  ck_assert_int_eq(dbuf_wire_plan_decode(buf, len - 1, &q, NULL), DBUF_EFORMAT);
  ck_assert_int_eq(dbuf_wire_plan_decode(buf, 10, &q, NULL), DBUF_EFORMAT);
  m[0] ^= 1;
  ck_assert_int_eq(dbuf_wire_plan_decode(buf, len, &q, NULL), DBUF_EFORMAT);
  m[0] ^= 1;
  put64(m + 8, 1); /* the plan format before the compact layouts */
  reseal_plan(m, len);
  ck_assert_int_eq(dbuf_wire_plan_decode(buf, len, &q, NULL), DBUF_EVERSION);
  put64(m + 8, 3);
  reseal_plan(m, len);
  ck_assert_int_eq(dbuf_wire_plan_decode(buf, len, &q, NULL), DBUF_EVERSION);
  put64(m + 8, 2);
  /* A forged buffer count (too many for the bytes, then one too few). */
  put64(m + 24, (uint64_t)1 << 40);
  reseal_plan(m, len);
  ck_assert_int_eq(dbuf_wire_plan_decode(buf, len, &q, &d), DBUF_EFORMAT);
  put64(m + 24, 1);
  reseal_plan(m, len);
  ck_assert_int_eq(dbuf_wire_plan_decode(buf, len, &q, &d), DBUF_EFORMAT);
  ck_assert_ptr_nonnull(strstr(d.msg, "after the last plan buffer"));
  put64(m + 24, 2);
  /* Another rank count in the header than the buffers'. */
  ck_assert_int_eq(get64(m + 32), 3); /* seed_layout()'s ranks */
  put64(m + 32, 5);
  reseal_plan(m, len);
  ck_assert_int_eq(dbuf_wire_plan_decode(buf, len, &q, &d), DBUF_ENRANKS);
  ck_assert_ptr_nonnull(strstr(d.msg, "plan buffer 0 (root/fp32)"));
  put64(m + 32, 3);
  /* A unit name length beyond the message, a dtype without a byte size. */
  uint64_t ul = get64(m + 64);
  put64(m + 64, (uint64_t)len);
  reseal_plan(m, len);
  ck_assert_int_eq(dbuf_wire_plan_decode(buf, len, &q, NULL), DBUF_EFORMAT);
  put64(m + 64, ul);
  put64(m + 72 + ul, DBUF_DTYPE_F4);
  reseal_plan(m, len);
  ck_assert_int_eq(dbuf_wire_plan_decode(buf, len, &q, &d), DBUF_EFORMAT);
  ck_assert_ptr_nonnull(strstr(d.msg, "no byte size"));
  put64(m + 72 + ul, DBUF_DTYPE_F32);
  /* A blank in the unit name. */
  m[72] = ' ';
  reseal_plan(m, len);
  ck_assert_int_eq(dbuf_wire_plan_decode(buf, len, &q, NULL), DBUF_EFORMAT);
  m[72] = 'r';
  reseal_plan(m, len);
  ck_assert_int_eq(dbuf_wire_plan_decode(buf, len, &q, NULL), 0);
  dbuf_plan_destroy(q);
  /* Arguments; an empty plan round-trips as no buffer. */
  ck_assert_int_eq(dbuf_wire_plan_encode(NULL, &buf, &len, NULL), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_wire_plan_decode(NULL, len, &q, NULL), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_wire_plan_decode(buf, len, NULL, NULL), DBUF_EINVAL);
  free(buf);
  dbuf_plan_destroy(p);
  ck_assert_int_eq(dbuf_plan_create(&p), 0);
  ck_assert_int_eq(dbuf_wire_plan_encode(p, &buf, &len, NULL), 0);
  ck_assert_int_eq(len, DBUF_WIRE_PLAN_MIN_BYTES);
  ck_assert_int_eq(dbuf_wire_plan_decode(buf, len, &q, NULL), 0);
  ck_assert_int_eq(dbuf_plan_nbuffers(q), 0);
  dbuf_plan_destroy(q);
  dbuf_plan_destroy(p);
  free(buf);
}
END_TEST

/* A sink that keeps what it is given and checks how: one begin() with
 * the length first, then windows of exactly `window` bytes but the last;
 * fail_at: the call (0: begin, k: the k-th window) that fails. */
typedef struct {
  uint8_t *p;
  int64_t total, len, window, calls, fail_at;
  int begins, last_seen;
} sink_rec_t;

static int
rec_begin(void *arg, int64_t total)
{
  sink_rec_t *r = arg;
  r->begins++;
  r->total = total;
  if (r->fail_at == 0)
    return DBUF_EMPI;
  r->p = malloc((size_t)total);
  ck_assert_ptr_nonnull(r->p);
  return 0;
}

static int
rec_bytes(void *arg, const void *p, int64_t n)
{
  sink_rec_t *r = arg;
  ck_assert_int_eq(r->begins, 1);
  ck_assert(!r->last_seen);
  ck_assert(n >= 1 && n <= r->window && r->len + n <= r->total);
  r->last_seen = n < r->window;
  memcpy(r->p + r->len, p, (size_t)n);
  r->len += n;
  return ++r->calls == r->fail_at ? DBUF_EMPI : 0;
}

static const int64_t stream_windows[] = {1, 7, 64, 127, 128, 129, 4096, (int64_t)1 << 20};

START_TEST(test_stream_send)
{
  int64_t win = stream_windows[_i];
  dbuf_plan_t *p = seed_plan();
  ck_assert_int_eq(dbuf_plan_add(p, "model.layers.1", DBUF_DTYPE_F16,
                                 seed_layout(DBUF_LAYOUT_TENSOR), NULL, NULL), 0);
  void *whole;
  int64_t len;
  uint64_t want = 0, sum = 0, dig[3];
  ck_assert_int_eq(dbuf_wire_plan_encode(p, &whole, &len, NULL), 0);
  ck_assert_int_eq(dbuf_wire_checksum(whole, len, &want), 0);
  for (int b = 0; b < 3; b++) {
    dbuf_plan_buffer_t pb;
    dbuf_plan_buffer(p, b, &pb);
    ck_assert_int_eq(dbuf_wire_digest(pb.layout, &dig[b], NULL), 0);
    ck_assert(!pb.layout->has_digest);
  }
  /* The plan, without and with its digests noted. */
  for (int note = 0; note < 2; note++) {
    sink_rec_t r = {.window = win, .fail_at = -1};
    dbuf__wire_sink_t sink = {rec_begin, rec_bytes, &r, win};
    ck_assert_int_eq(dbuf__wire_plan_send(p, &sink, &sum, note, NULL), 0);
    ck_assert_int_eq(r.begins, 1);
    ck_assert_int_eq(r.len, len);
    ck_assert_int_eq(r.calls, (len + win - 1) / win);
    ck_assert_int_eq(memcmp(r.p, whole, (size_t)len), 0);
    ck_assert(sum == want);
    free(r.p);
    for (int b = 0; b < 3; b++) {
      dbuf_plan_buffer_t pb;
      uint64_t d = 0;
      dbuf_plan_buffer(p, b, &pb);
      ck_assert_int_eq(pb.layout->has_digest, note);
      ck_assert_int_eq(dbuf_wire_digest(pb.layout, &d, NULL), 0);
      ck_assert(d == dig[b]);
    }
  }
  free(whole);
  const int64_t nwin = (len + win - 1) / win;
  /* Each layout alone, as dbuf_wire_encode() writes it. */
  for (int b = 0; b < 3; b++) {
    dbuf_plan_buffer_t pb;
    dbuf_plan_buffer(p, b, &pb);
    ck_assert_int_eq(dbuf_wire_encode(pb.layout, &whole, &len, NULL), 0);
    sink_rec_t r = {.window = win, .fail_at = -1};
    dbuf__wire_sink_t sink = {rec_begin, rec_bytes, &r, win};
    ck_assert_int_eq(dbuf__wire_send(pb.layout, &sink, &sum, NULL), 0);
    ck_assert_int_eq(r.len, len);
    ck_assert_int_eq(memcmp(r.p, whole, (size_t)len), 0);
    ck_assert(sum == dig[b]);
    free(r.p);
    free(whole);
  }
  /* A failing begin: no window; a failing window: none after it. */
  for (int64_t at = 0; at < 3 && at <= nwin; at++) {
    sink_rec_t r = {.window = win, .fail_at = at};
    dbuf__wire_sink_t sink = {rec_begin, rec_bytes, &r, win};
    ck_assert_int_eq(dbuf__wire_plan_send(p, &sink, NULL, 0, NULL), DBUF_EMPI);
    ck_assert_int_eq(r.calls, at);
    free(r.p);
  }
  /* A unit name every decoder refuses is refused by the encoders too. */
  dbuf_plan_t *bad = NULL;
  ck_assert_int_eq(dbuf_plan_create(&bad), 0);
  ck_assert_int_eq(dbuf_plan_add(bad, "bad unit", DBUF_DTYPE_F32, seed_layout(DBUF_LAYOUT_PADDED),
                                 NULL, NULL), 0);
  dbuf_diag_t bd;
  ck_assert_int_eq(dbuf_wire_plan_encode(bad, &whole, &len, &bd), DBUF_EINVAL);
  ck_assert_str_eq(bd.msg, "wire: buffer 0: unit name 'bad unit' has a blank or control "
                           "character");
  dbuf_plan_destroy(bad);
  ck_assert_int_eq(dbuf_plan_create(&bad), 0); /* a newline: still one line */
  ck_assert_int_eq(dbuf_plan_add(bad, "a\nb", DBUF_DTYPE_F32, seed_layout(DBUF_LAYOUT_PADDED),
                                 NULL, NULL), 0);
  ck_assert_int_eq(dbuf_wire_plan_encode(bad, &whole, &len, &bd), DBUF_EINVAL);
  ck_assert_str_eq(bd.msg, "wire: buffer 0: unit name 'a\\x0ab' has a blank or control "
                           "character");
  dbuf_plan_destroy(bad);
  /* What the encoder refuses fails before begin, with its message. */
  char unit[DBUF_WIRE_UNIT_MAX + 2];
  memset(unit, 'u', sizeof unit - 1);
  unit[sizeof unit - 1] = '\0';
  ck_assert_int_eq(dbuf_plan_add(p, unit, DBUF_DTYPE_F32, seed_layout(DBUF_LAYOUT_PADDED), NULL,
                                 NULL), 0);
  sink_rec_t r = {.window = win, .fail_at = -1};
  dbuf__wire_sink_t sink = {rec_begin, rec_bytes, &r, win};
  dbuf_diag_t d;
  ck_assert_int_eq(dbuf__wire_plan_send(p, &sink, NULL, 0, &d), DBUF_EINVAL);
  ck_assert_int_eq(r.begins, 0);
  ck_assert_ptr_nonnull(strstr(d.msg, "unit name of 4097 bytes"));
  sink.window = 0;
  ck_assert_int_eq(dbuf__wire_plan_send(p, &sink, NULL, 0, NULL), DBUF_EINVAL);
  dbuf_plan_destroy(p);
}
END_TEST

/*
 * A plan message decoded as a receiver gets it (dbuf__wire_rx_t): fed
 * window by window, then decoded with the head start.  The result must be
 * what dbuf_wire_plan_decode() gives for the same bytes, code and message,
 * whatever the windows; *ahead: the layouts whose tensor lists were built
 * ahead and taken by the decode.  A second decode of the same rx starts
 * from scratch and must give the same again (code and message).
 */
static int
rx_decode(const uint8_t *m, int64_t len, int64_t win, dbuf_plan_t **out, int64_t *ahead,
          dbuf_diag_t *d)
{
  dbuf__wire_rx_t *rx = NULL;
  /* The bytes not received yet are junk, as in a receiver's buffer: a
   * decoder that read past what it was given would go wrong. */
  uint8_t *buf = malloc((size_t)len);
  ck_assert_ptr_nonnull(buf);
  memset(buf, 0xa5, (size_t)len);
  ck_assert_int_eq(dbuf__wire_rx_create(len, &rx), 0);
  for (int64_t have = 0; have < len;) {
    int64_t from = have;
    have = len - have < win ? len : have + win;
    memcpy(buf + from, m + from, (size_t)(have - from));
    dbuf__wire_rx_feed(rx, buf, have);
  }
  dbuf_diag_clear(d);
  int rc = dbuf__wire_rx_plan_decode(rx, buf, len, out, d);
  *ahead = dbuf__wire_rx_ahead(rx);
  dbuf_plan_t *again = NULL;
  dbuf_diag_t d2;
  dbuf_diag_clear(&d2);
  ck_assert_int_eq(dbuf__wire_rx_plan_decode(rx, buf, len, &again, &d2), rc);
  ck_assert_str_eq(d2.msg, d->msg);
  ck_assert_int_eq(dbuf__wire_rx_ahead(rx), *ahead);
  dbuf_plan_destroy(again);
  dbuf__wire_rx_destroy(rx);
  free(buf);
  return rc;
}

static const int64_t rx_windows[] = {1, 5, 16, 128, 1000, 4096, (int64_t)1 << 20};

/* Decoded window by window and whole: the same plan, or the same refusal. */
static void
rx_same(const uint8_t *m, int64_t len, int64_t want_ahead)
{
  dbuf_plan_t *whole = NULL;
  dbuf_diag_t dw;
  dbuf_diag_clear(&dw);
  int rcw = dbuf_wire_plan_decode(m, len, &whole, &dw);
  for (size_t w = 0; w < sizeof rx_windows / sizeof rx_windows[0]; w++) {
    dbuf_plan_t *got = NULL;
    dbuf_diag_t d;
    int64_t ahead = -1;
    int rc = rx_decode(m, len, rx_windows[w], &got, &ahead, &d);
    ck_assert_msg(rc == rcw && strcmp(d.msg, dw.msg) == 0,
                  "window %lld: %s '%s', whole: %s '%s'", (long long)rx_windows[w],
                  dbuf_err_name(rc), d.msg, dbuf_err_name(rcw), dw.msg);
    if (want_ahead >= 0)
      ck_assert_int_eq(ahead, want_ahead);
    if (rc != 0) {
      ck_assert_ptr_null(got);
      continue;
    }
    ck_assert_int_eq(dbuf_plan_nbuffers(got), dbuf_plan_nbuffers(whole));
    for (int64_t b = 0; b < dbuf_plan_nbuffers(got); b++) {
      dbuf_plan_buffer_t x, y;
      dbuf_plan_buffer(whole, b, &x);
      dbuf_plan_buffer(got, b, &y);
      ck_assert_int_eq(y.layout->has_digest, x.layout->has_digest);
      assert_same_buffer(whole, got, b);
    }
    dbuf_plan_destroy(got);
  }
  dbuf_plan_destroy(whole);
}

/* Every layout of a plan message of every kind (and a zoo model's 45,395
 * tensors) is built ahead, whatever the windows, and decodes as a whole. */
START_TEST(test_rx_round_trip)
{
  dbuf_plan_t *p = seed_plan();
  ck_assert_int_eq(dbuf_plan_add(p, "model.layers.1", DBUF_DTYPE_F16,
                                 seed_layout(DBUF_LAYOUT_TENSOR), NULL, NULL), 0);
  ck_assert_int_eq(dbuf_plan_add(p, "model.layers.2", DBUF_DTYPE_F16,
                                 seed_layout(DBUF_LAYOUT_COMPACT), NULL, NULL), 0);
  char path[4096];
  dbuf_tensors_t *t;
  dbuf_layout_t *l;
  dbuf_layout_params_t lp;
  snprintf(path, sizeof path, "%s/zoo/deepseek-v3.shapes", test_data_dir());
  ck_assert_int_eq(dbuf_shapes_read(path, &t, NULL, NULL), 0);
  dbuf_layout_params_init(&lp);
  lp.nranks = 3;
  ck_assert_int_eq(dbuf_layout_build(t, &lp, &l, NULL), 0);
  dbuf_tensors_destroy(t);
  ck_assert_int_eq(dbuf_plan_add(p, "deepseek", DBUF_DTYPE_BF16, l, NULL, NULL), 0);
  void *m;
  int64_t len;
  ck_assert_int_eq(dbuf_wire_plan_encode(p, &m, &len, NULL), 0);
  ck_assert_int_gt(len, 1000000);
  rx_same(m, len, 5);
  /* Every 7th bit flipped past the magic: refused alike (checksums), and
   * never a head start taken as a result. */
  uint8_t *b = m;
  for (int64_t bit = 64; bit < 8 * 1200; bit += 7) {
    b[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    dbuf_plan_t *q = NULL;
    dbuf_diag_t d;
    int64_t ahead;
    ck_assert_int_eq(rx_decode(b, len, 4096, &q, &ahead, &d), DBUF_ECHECKSUM);
    ck_assert_ptr_null(q);
    b[bit / 8] ^= (uint8_t)(1u << (bit % 8));
  }
  /* Fed less than the whole: decoded from scratch, and right. */
  dbuf__wire_rx_t *rx = NULL;
  dbuf_plan_t *q = NULL;
  ck_assert_int_eq(dbuf__wire_rx_create(len, &rx), 0);
  dbuf__wire_rx_feed(rx, m, len / 2);
  ck_assert_int_eq(dbuf__wire_rx_plan_decode(rx, m, len, &q, NULL), 0);
  ck_assert_int_eq(dbuf_plan_nbuffers(q), 5);
  dbuf_plan_destroy(q);
  dbuf__wire_rx_destroy(rx);
  free(m);
  dbuf_plan_destroy(p);
}
END_TEST

/* Layout messages in a plan message of k buffers (units "u", "v", ..., fp32, 3
 * ranks). */
static uint8_t *
plan_of(uint8_t *const *msg, const int64_t *mlen, int k, int64_t *len)
{
  int64_t n = 64 + 8;
  for (int b = 0; b < k; b++)
    n += 24 + 1 + mlen[b];
  uint8_t *m = calloc(1, (size_t)n);
  ck_assert_ptr_nonnull(m);
  memcpy(m, DBUF_WIRE_PLAN_MAGIC, 8);
  put64(m + 8, DBUF_WIRE_PLAN_VERSION);
  put64(m + 16, (uint64_t)n);
  put64(m + 24, (uint64_t)k);
  put64(m + 32, 3);
  int64_t at = 64;
  for (int b = 0; b < k; b++) {
    put64(m + at, 1);
    m[at + 8] = (uint8_t)('u' + b);
    put64(m + at + 9, DBUF_DTYPE_F32);
    put64(m + at + 17, (uint64_t)mlen[b]);
    memcpy(m + at + 25, msg[b], (size_t)mlen[b]);
    at += 25 + mlen[b];
  }
  reseal_plan(m, n);
  *len = n;
  return m;
}

static uint8_t *
plan_around(uint8_t *msg, int64_t mlen, int64_t *len)
{
  return plan_of(&msg, &mlen, 1, len);
}

/* Each structural error behind good checksums: the same code and message
 * window by window as whole (where the head start stops, and after), in
 * a plan of that one layout, and as the third layout of a plan whose first
 * two were built ahead and taken. */
START_TEST(test_rx_structural)
{
  uint8_t *msg[3];
  int64_t mlen[3], len;
  dbuf_layout_t *good = seed_layout(DBUF_LAYOUT_TENSOR);
  ck_assert_int_eq(dbuf_wire_encode(good, (void **)&msg[0], &mlen[0], NULL), 0);
  ck_assert_int_eq(dbuf_wire_encode(good, (void **)&msg[1], &mlen[1], NULL), 0);
  dbuf_layout_destroy(good);
  structural_message(&structural[_i], &msg[2], &mlen[2]);
  uint8_t *m = plan_around(msg[2], mlen[2], &len);
  dbuf_plan_t *q = NULL;
  ck_assert_int_ne(dbuf_wire_plan_decode(m, len, &q, NULL), 0);
  rx_same(m, len, -1);
  free(m);
  m = plan_of(msg, mlen, 3, &len);
  dbuf_diag_t d;
  dbuf_diag_clear(&d);
  ck_assert_int_ne(dbuf_wire_plan_decode(m, len, &q, &d), 0);
  ck_assert_msg(strncmp(d.msg, "plan buffer 2 ", 14) == 0, "%s", d.msg);
  int64_t ahead;
  ck_assert_int_ne(rx_decode(m, len, 4096, &q, &ahead, &d), 0);
  ck_assert_int_ge(ahead, 2); /* the third too when its error is past its names */
  rx_same(m, len, -1);
  free(m);
  for (int b = 0; b < 3; b++)
    free(msg[b]);
}
END_TEST

/* The seed message unchanged goes through, built ahead. */
START_TEST(test_rx_seed)
{
  dbuf_layout_t *l = seed_layout(DBUF_LAYOUT_TENSOR);
  uint8_t *msg;
  int64_t mlen, len;
  ck_assert_int_eq(dbuf_wire_encode(l, (void **)&msg, &mlen, NULL), 0);
  uint8_t *m = plan_around(msg, mlen, &len);
  rx_same(m, len, 1);
  free(m);
  free(msg);
  dbuf_layout_destroy(l);
}
END_TEST

/* Warm blocks (what dbuf_comm_announce_plan() makes a receiver fault in):
 * taken by allocations of their sizes only (exact ones first, calloc's
 * zeroed), at most DBUF__WARM_BLOCKS, the rest freed by a release. */
START_TEST(test_warm_blocks)
{
  ck_assert_int_eq(dbuf__warm_add(-1, 10), DBUF_EINVAL);
  ck_assert_int_eq(dbuf__warm_add(11, 10), DBUF_EINVAL);
  ck_assert_int_eq(dbuf__warm_count(), 0);
  ck_assert_int_eq(dbuf__warm_add(3 << 20, 3 << 20), 0);
  unsigned char *a = dbuf__mallocn((3 << 20) - 1, 1), *b = dbuf__calloc(3 << 20, 1);
  ck_assert_int_eq(dbuf__warm_count(), 0); /* b took it, a did not */
  for (int64_t i = 0; i < 3 << 20; i++)
    ck_assert_int_eq(b[i], 0);
  free(a);
  free(b);
  ck_assert_int_eq(dbuf__warm_add(100, 5000), 0);
  ck_assert_int_eq(dbuf__warm_add(3000, 3000), 0);
  a = dbuf__mallocn(3000, 1); /* the exact one, though the range holds it too */
  ck_assert_int_eq(dbuf__warm_count(), 1);
  b = dbuf__mallocn(99, 1);
  ck_assert_int_eq(dbuf__warm_count(), 1);
  unsigned char *c = dbuf__reallocn(NULL, 625, 8); /* 5000 bytes: the range's */
  ck_assert_int_eq(dbuf__warm_count(), 0);
  memset(a, 1, 3000);
  memset(c, 2, 5000); /* its whole size is there (sanitizers would say) */
  free(a);
  free(b);
  free(c);
  for (int i = 0; i < DBUF__WARM_BLOCKS; i++)
    ck_assert_int_eq(dbuf__warm_add(64, 64), 0);
  ck_assert_int_eq(dbuf__warm_add(64, 64), DBUF_ENOMEM);
  ck_assert_int_eq(dbuf__warm_count(), DBUF__WARM_BLOCKS);
  dbuf__warm_release();
  ck_assert_int_eq(dbuf__warm_count(), 0);
  /* Numbers no plan has make none. */
  const int64_t bad[][5] = {{0, 2, 1, 1, 0},
                            {10, 19, 1, 1, 0},
                            {10, 20, 0, 1, 0},
                            {10, 20, 11, 1, 0},
                            {10, 20, 1, -1, 0},
                            {10, 20, 1, 1, -1},
                            {10, 20, 1, 1, DBUF_LAYOUT_COMPACT + 1},
                            {10, 20, 2, 1, 0},
                            {10, 20, 1, DBUF_MAX_DIMS + 1, 0},
                            {10, 10 * 4096 + 1, 1, 1, 0},
                            {INT64_C(1) << 31, INT64_C(1) << 33, 1, 1, 0},
                            {(int64_t)UINT32_MAX + 1, INT64_MAX, 1, 1, 0}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ck_assert_int_eq(dbuf__wire_rx_warm(bad[i][0], bad[i][1], bad[i][2], bad[i][3],
                                        (int)bad[i][4]),
                     DBUF_EINVAL);
    ck_assert_int_eq(dbuf__warm_count(), 0);
  }
  /* The largest numbers a plan may have make blocks of that size. */
  int64_t made0, taken0, made1, taken1;
  dbuf__warm_stats(&made0, &taken0);
  ck_assert_int_eq(dbuf__wire_rx_warm(3, 3 * 4096, 2, 2 * DBUF_MAX_DIMS, DBUF_LAYOUT_UNPADDED),
                   0);
  ck_assert_int_eq(dbuf__warm_count(), 7);
  void *names = dbuf__mallocn(3 * 4096, 1);
  dbuf__warm_stats(&made1, &taken1);
  ck_assert_int_eq(made1 - made0, 7);
  ck_assert_int_eq(taken1 - taken0, 1);
  free(names);
  dbuf__warm_release();
  ck_assert_int_eq(dbuf__warm_count(), 0);
}
END_TEST

/* A receiver told the list of a one-buffer plan ahead (dbuf__wire_rx_warm()
 * as dbuf_comm_announce_plan() makes it) has every warm block taken: the
 * message's by its buffer, the others by the decode (the sizes made and
 * the sizes asked for agree), for DeepSeek-V3 (45,395 tensors) at 3 ranks
 * padded, tensor and unpadded (no order: none made); and it decodes the
 * plan the whole-message decoder does.  A plan of two buffers frees them
 * as soon as its header is in. */
START_TEST(test_rx_warm)
{
  static const dbuf_layout_kind_t kinds[] = {DBUF_LAYOUT_PADDED, DBUF_LAYOUT_TENSOR,
                                             DBUF_LAYOUT_UNPADDED};
  char path[4096];
  dbuf_tensors_t *t;
  snprintf(path, sizeof path, "%s/zoo/deepseek-v3.shapes", test_data_dir());
  ck_assert_int_eq(dbuf_shapes_read(path, &t, NULL, NULL), 0);
  for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
    dbuf_layout_t *l;
    dbuf_layout_params_t lp;
    dbuf_plan_t *p = NULL, *whole = NULL, *got = NULL;
    dbuf_layout_params_init(&lp);
    lp.nranks = 3;
    lp.kind = kinds[k];
    lp.auto_owners = kinds[k] == DBUF_LAYOUT_TENSOR;
    ck_assert_int_eq(dbuf_layout_build(t, &lp, &l, NULL), 0);
    ck_assert_int_eq(dbuf_plan_create(&p), 0);
    ck_assert_int_eq(dbuf_plan_add(p, "deepseek", DBUF_DTYPE_BF16, l, NULL, NULL), 0);
    void *m;
    int64_t len;
    ck_assert_int_eq(dbuf_wire_plan_encode(p, &m, &len, NULL), 0);
    ck_assert_int_eq(dbuf_wire_plan_decode(m, len, &whole, NULL), 0);
    ck_assert_int_eq(dbuf__wire_rx_warm(dbuf_tensors_count(t), dbuf__tensors_name_bytes(t),
                                        dbuf__tensors_nshapes(t), dbuf__tensors_ndims(t),
                                        kinds[k]),
                     0);
    ck_assert_int_eq(dbuf__warm_count(), kinds[k] == DBUF_LAYOUT_UNPADDED ? 7 : 8);
    uint8_t *buf = dbuf__mallocn(len, 1); /* as bcast_message() */
    ck_assert_int_eq(dbuf__warm_count(), kinds[k] == DBUF_LAYOUT_UNPADDED ? 6 : 7);
    dbuf__wire_rx_t *rx = NULL;
    ck_assert_int_eq(dbuf__wire_rx_create(len, &rx), 0);
    for (int64_t have = 0; have < len;) {
      int64_t from = have;
      have = len - have < (1 << 20) ? len : have + (1 << 20);
      memcpy(buf + from, (uint8_t *)m + from, (size_t)(have - from));
      dbuf__wire_rx_feed(rx, buf, have);
    }
    ck_assert_int_eq(dbuf__wire_rx_plan_decode(rx, buf, len, &got, NULL), 0);
    ck_assert_int_eq(dbuf__warm_count(), 0);
    ck_assert_int_eq(dbuf__wire_rx_ahead(rx), 1);
    assert_same_buffer(whole, got, 0);
    dbuf__wire_rx_destroy(rx);
    free(buf);
    free(m);
    dbuf_plan_destroy(got);
    dbuf_plan_destroy(whole);
    dbuf_plan_destroy(p);
  }
  dbuf_tensors_destroy(t);
  /* A plan of two buffers: the blocks go once its header is in. */
  dbuf_plan_t *two = seed_plan();
  void *m;
  int64_t len;
  ck_assert_int_eq(dbuf_wire_plan_encode(two, &m, &len, NULL), 0);
  ck_assert_int_eq(dbuf__wire_rx_warm(1000, 20000, 1, 2, DBUF_LAYOUT_PADDED), 0);
  dbuf__wire_rx_t *rx = NULL;
  ck_assert_int_eq(dbuf__wire_rx_create(len, &rx), 0);
  dbuf__wire_rx_feed(rx, m, DBUF_WIRE_PLAN_HEADER_BYTES - 1);
  ck_assert_int_eq(dbuf__warm_count(), 8);
  dbuf__wire_rx_feed(rx, m, DBUF_WIRE_PLAN_HEADER_BYTES);
  ck_assert_int_eq(dbuf__warm_count(), 0);
  dbuf__wire_rx_destroy(rx);
  free(m);
  dbuf_plan_destroy(two);
}
END_TEST

/* Every zoo model at 8 ranks, padded, including deepseek-v3's 45,395 tensors. */
START_TEST(test_zoo_models)
{
  const char *zoo[] = {"llama-3.2-1b", "tinyllama-1.1b", "llama-3.1-8b", "llama-3.1-70b",
                       "llama-3.1-405b", "mixtral-8x7b", "deepseek-v3"};
  char path[4096];
  dbuf_tensors_t *t;
  dbuf_layout_t *l;
  dbuf_layout_params_t p;
  snprintf(path, sizeof path, "%s/zoo/%s.shapes", test_data_dir(), zoo[_i]);
  ck_assert_int_eq(dbuf_shapes_read(path, &t, NULL, NULL), 0);
  dbuf_layout_params_init(&p);
  p.nranks = 8;
  ck_assert_int_eq(dbuf_layout_build(t, &p, &l, NULL), 0);
  round_trip(l);
  dbuf_layout_destroy(l);
  dbuf_tensors_destroy(t);
}
END_TEST

static Suite *
wire_suite(void)
{
  Suite *s = suite_create("wire");
  TCase *tc = tcase_create("round trip");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, test_golden_round_trip, 0, (int)json_array_size(cases));
  tcase_add_test(tc, test_seed_kinds);
  tcase_add_loop_test(tc, test_zoo_models, 0, 7);
  suite_add_tcase(s, tc);
  tc = tcase_create("corruption");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, test_every_bit_flip, 0, 3);
  tcase_add_test(tc, test_truncated_and_long);
  tcase_add_test(tc, test_magic_version_kind);
  tcase_add_test(tc, test_forged_fields);
  tcase_add_loop_test(tc, test_structural, 0, (int)(sizeof structural / sizeof structural[0]));
  tcase_add_test(tc, test_block_row_overflow);
  tcase_add_test(tc, test_compact_size);
  tcase_add_test(tc, test_optional_section);
  tcase_add_test(tc, test_digest_and_args);
  tcase_add_loop_test(tc, test_digest_not_canonical, 0, 7);
  tcase_add_test(tc, test_names_budget);
  tcase_add_test(tc, test_plan_messages);
  tcase_add_loop_test(tc, test_stream_send, 0,
                      (int)(sizeof stream_windows / sizeof stream_windows[0]));
  tcase_add_test(tc, test_rx_round_trip);
  tcase_add_test(tc, test_rx_seed);
  tcase_add_test(tc, test_warm_blocks);
  tcase_add_test(tc, test_rx_warm);
  tcase_add_loop_test(tc, test_rx_structural, 0,
                      (int)(sizeof structural / sizeof structural[0]));
  suite_add_tcase(s, tc);
  return s;
}

int
main(void)
{
  load_cases();
  SRunner *sr = srunner_create(wire_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  json_decref(cases);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
