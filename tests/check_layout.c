/*
 * Layout core tests: every golden case (both files), errors, validators on
 * broken layouts, queries, and property tests on random inputs.
 */
#include "dbuf/layout.h"
#include "dbuf/layout_json.h"
#include "dbuf/shapes_io.h"
#include "dbuf/tensors.h"

#include <check.h>
#include <limits.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layout_internal.h" /* test_order_identity: no order array kept */
#include "testutil.h"

/* ------------------------------------------------------------------ */
/* Golden cases                                                         */

static json_t *golden;     /* layouts.jsonl cases */
static json_t *zoo_golden; /* zoo-layouts.jsonl cases */

static json_t *
load_jsonl(const char *file)
{
  char path[4096];
  snprintf(path, sizeof path, "%s/golden/%s", test_data_dir(), file);
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    fprintf(stderr, "cannot open %s\n", path);
    exit(2);
  }
  json_t *arr = json_array();
  char *line = NULL;
  size_t cap = 0;
  ssize_t len;
  while ((len = getline(&line, &cap, f)) > 0) {
    json_error_t e;
    json_t *c = json_loadb(line, (size_t)len, 0, &e);
    if (c == NULL) {
      fprintf(stderr, "%s: bad JSON: %s\n", path, e.text);
      exit(2);
    }
    json_array_append_new(arr, c);
  }
  free(line);
  fclose(f);
  return arr;
}

static dbuf_tensors_t *
case_tensors(json_t *c, dbuf_diag_t *diag, int *rc)
{
  dbuf_tensors_t *t = NULL;
  json_t *sf = json_object_get(c, "shapes_file");
  if (sf != NULL) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", test_data_dir(),
             json_string_value(sf));
    *rc = dbuf_shapes_read(path, &t, NULL, diag);
    return t;
  }
  ck_assert_int_eq(dbuf_tensors_create(&t), 0);
  json_t *shapes = json_object_get(c, "shapes");
  size_t i;
  json_t *s;
  *rc = 0;
  json_array_foreach(shapes, i, s) {
    int64_t dims[DBUF_MAX_DIMS];
    size_t nd = json_array_size(s);
    for (size_t k = 0; k < nd && k < DBUF_MAX_DIMS; k++)
      dims[k] = json_integer_value(json_array_get(s, k));
    char name[32];
    snprintf(name, sizeof name, "t%zu", i);
    *rc = dbuf_tensors_add(t, name, (int)nd, dims, diag);
    if (*rc != 0)
      break;
  }
  return t;
}

static int
run_case(json_t *c, dbuf_layout_t **out, dbuf_diag_t *diag)
{
  int rc;
  dbuf_layout_params_t p;
  dbuf_layout_params_init(&p);
  dbuf_tensors_t *t = case_tensors(c, diag, &rc);
  int *owners = NULL;
  if (rc == 0) {
    ck_assert_int_eq(
        dbuf_layout_kind_parse(json_string_value(json_object_get(c, "layout")),
                               &p.kind),
        0);
    p.nranks = (int)json_integer_value(json_object_get(c, "dp_size"));
    p.block_size = json_integer_value(json_object_get(c, "block_size"));
    json_t *jo = json_object_get(c, "owners");
    if (jo != NULL) {
      p.nowners = (int64_t)json_array_size(jo);
      owners = calloc(p.nowners + 1, sizeof *owners);
      for (int64_t i = 0; i < p.nowners; i++)
        owners[i] = (int)json_integer_value(json_array_get(jo, (size_t)i));
      p.owners = owners;
    }
    rc = dbuf_layout_build(t, &p, out, diag);
  }
  free(owners);
  dbuf_tensors_destroy(t);
  return rc;
}

static void
assert_i64_array(const char *what, const char *name, const int64_t *got,
                 json_t *want, int64_t n)
{
  ck_assert_msg((int64_t)json_array_size(want) == n,
                "%s: %s has %lld entries, expected %zu", name, what,
                (long long)n, json_array_size(want));
  for (int64_t i = 0; i < n; i++) {
    int64_t w = json_integer_value(json_array_get(want, (size_t)i));
    ck_assert_msg(got[i] == w, "%s: %s[%lld] = %lld, expected %lld", name,
                  what, (long long)i, (long long)got[i], (long long)w);
  }
}

static void
check_golden_case(json_t *c)
{
  const char *name = json_string_value(json_object_get(c, "name"));
  dbuf_layout_t *l = NULL;
  dbuf_diag_t diag;
  dbuf_diag_clear(&diag);
  int rc = run_case(c, &l, &diag);
  json_t *exp = json_object_get(c, "expected");
  if (exp == NULL) {
    ck_assert_msg(rc < 0, "%s: expected an error (%s), got success", name,
                  json_string_value(json_object_get(c, "expect_error")));
    ck_assert_msg(diag.msg[0] != '\0', "%s: error without a message", name);
    ck_assert_int_eq(diag.code, rc);
    return;
  }
  ck_assert_msg(rc == 0, "%s: %s", name, diag.msg);
  ck_assert_int_eq(dbuf_layout_size(l),
                   json_integer_value(json_object_get(exp, "size")));
  json_t *ch = json_object_get(exp, "chunk_size");
  if (ch != NULL)
    ck_assert_int_eq(dbuf_layout_chunk_size(l), json_integer_value(ch));
  assert_i64_array("tensor_offsets", name, dbuf_layout_offsets(l),
                   json_object_get(exp, "tensor_offsets"),
                   dbuf_layout_ntensors(l));
  assert_i64_array("rank_offsets", name, dbuf_layout_range(l),
                   json_object_get(exp, "rank_offsets"),
                   dbuf_layout_nranks(l));
  int64_t nv = -1;
  ck_assert_msg(dbuf_layout_validate(l, NULL, NULL, &nv, &diag) == 0,
                "%s: built layout fails validation: %s", name, diag.msg);
  ck_assert_int_eq(nv, 0);
  dbuf_layout_destroy(l);
}

START_TEST(test_golden)
{
  check_golden_case(json_array_get(golden, (size_t)_i));
}
END_TEST

START_TEST(test_golden_zoo)
{
  check_golden_case(json_array_get(zoo_golden, (size_t)_i));
}
END_TEST

/* Every error case of the golden file carries a message naming the value. */
START_TEST(test_error_messages)
{
  static const struct {
    int64_t d0, d1;
    int nranks;
    int64_t block;
    int err;
    const char *needle;
  } cases[] = {
      {3, 4, 2, 2, DBUF_EBLOCK, "dim 0 = 3"},
      {4, 4, 0, 1, DBUF_ENRANKS, "got 0"},
      {4, 4, 2, 0, DBUF_EINVAL, "got 0"},
      {4, 4, -3, 1, DBUF_ENRANKS, "got -3"},
      {4, 4, 2, -1, DBUF_EINVAL, "got -1"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    dbuf_tensors_t *t;
    dbuf_layout_t *l = NULL;
    dbuf_diag_t d;
    int64_t dims[2] = {cases[k].d0, cases[k].d1};
    dbuf_layout_params_t p;
    ck_assert_int_eq(dbuf_tensors_create(&t), 0);
    ck_assert_int_eq(dbuf_tensors_add(t, "w", 2, dims, NULL), 0);
    dbuf_layout_params_init(&p);
    p.nranks = cases[k].nranks;
    p.block_size = cases[k].block;
    for (int kind = DBUF_LAYOUT_PADDED; kind <= DBUF_LAYOUT_UNPADDED; kind++) {
      p.kind = (dbuf_layout_kind_t)kind;
      ck_assert_int_eq(dbuf_layout_build(t, &p, &l, &d), cases[k].err);
      ck_assert_ptr_null(l);
      ck_assert_msg(strstr(d.msg, cases[k].needle) != NULL, "'%s' lacks '%s'",
                    d.msg, cases[k].needle);
    }
    dbuf_tensors_destroy(t);
  }
}
END_TEST

START_TEST(test_tensor_errors)
{
  dbuf_tensors_t *t;
  dbuf_layout_t *l = NULL;
  dbuf_diag_t d;
  dbuf_layout_params_t p;
  int64_t dims[2] = {4, 4};
  int owners[2] = {0, 5};
  ck_assert_int_eq(dbuf_tensors_create(&t), 0);
  ck_assert_int_eq(dbuf_tensors_add(t, "a", 2, dims, NULL), 0);
  ck_assert_int_eq(dbuf_tensors_add(t, "b", 2, dims, NULL), 0);
  dbuf_layout_params_init(&p);
  p.kind = DBUF_LAYOUT_TENSOR;
  p.nranks = 2;
  ck_assert_int_eq(dbuf_layout_build(t, &p, &l, &d), DBUF_EOWNER); /* none */
  p.owners = owners;
  p.nowners = 2;
  ck_assert_int_eq(dbuf_layout_build(t, &p, &l, &d), DBUF_EOWNER);
  ck_assert_msg(strstr(d.msg, "tensor b") && strstr(d.msg, "owner 5"), "%s",
                d.msg);
  owners[1] = -1;
  ck_assert_int_eq(dbuf_layout_build(t, &p, &l, &d), DBUF_EOWNER);
  p.nowners = 1;
  ck_assert_int_eq(dbuf_layout_build(t, &p, &l, &d), DBUF_EOWNER);
  ck_assert_msg(strstr(d.msg, "1 owners for 2 tensors"), "%s", d.msg);
  ck_assert_ptr_null(l);
  dbuf_tensors_destroy(t);
}
END_TEST

/* A copy shares its source's arrays until one of the two changes: a change
 * to either never shows in the other, and each outlives the other. */
START_TEST(test_dup_independent)
{
  dbuf_tensors_t *t, *c, *c2;
  dbuf_layout_t *l;
  dbuf_layout_params_t p;
  int64_t dims[2] = {3, 5}, id;
  ck_assert_int_eq(dbuf_tensors_create(&t), 0);
  ck_assert_int_eq(dbuf_tensors_add(t, "a", 2, dims, NULL), 0);
  ck_assert_int_eq(dbuf_tensors_add(t, "b", 1, dims, NULL), 0);
  ck_assert_int_eq(dbuf_tensors_dup(t, &c), 0);
  ck_assert_int_eq(dbuf_tensors_dup(c, &c2), 0);
  /* Added to the source: not in either copy. */
  ck_assert_int_eq(dbuf_tensors_add(t, "x", 1, dims, NULL), 0);
  ck_assert_int_eq(dbuf_tensors_count(t), 3);
  ck_assert_int_eq(dbuf_tensors_count(c), 2);
  ck_assert_int_eq(dbuf_tensors_total(c), 18);
  ck_assert_int_eq(dbuf_tensors_find(c, "x", &id), DBUF_ENOTFOUND);
  /* A dtype set on one copy: not in the other two. */
  ck_assert_int_eq(dbuf_tensors_set_dtype(c, 1, DBUF_DTYPE_F32), 0);
  ck_assert_int_eq(dbuf_tensors_dtype(c, 1), DBUF_DTYPE_F32);
  ck_assert_int_eq(dbuf_tensors_dtype(c2, 1), DBUF_DTYPE_NONE);
  ck_assert_int_eq(dbuf_tensors_dtype(t, 1), DBUF_DTYPE_NONE);
  /* The same name added to two copies: each gets it once. */
  ck_assert_int_eq(dbuf_tensors_add(c2, "x", 2, dims, NULL), 0);
  ck_assert_int_eq(dbuf_tensors_add(c2, "x", 2, dims, NULL), DBUF_EDUP);
  ck_assert_int_eq(dbuf_tensors_ndim(c2, 2), 2);
  ck_assert_int_eq(dbuf_tensors_ndim(t, 2), 1);
  /* A layout keeps its own copy: the source may go first. */
  dbuf_layout_params_init(&p);
  p.nranks = 2;
  ck_assert_int_eq(dbuf_layout_build(t, &p, &l, NULL), 0);
  dbuf_tensors_destroy(t);
  dbuf_tensors_destroy(c2);
  ck_assert_str_eq(dbuf_tensors_name(dbuf_layout_tensors(l), 2), "x");
  ck_assert_int_eq(dbuf_tensors_rows(dbuf_layout_tensors(l), 0), 3);
  ck_assert_str_eq(dbuf_tensors_name(c, 1), "b");
  ck_assert_int_eq(dbuf_tensors_find(c, "b", &id), 0);
  ck_assert_int_eq(id, 1);
  dbuf_tensors_destroy(c);
  dbuf_layout_destroy(l);
}
END_TEST

/* The offset order of a layout from parts with offsets of every size and
 * sign, many of them equal: by offset, then by id (checked pair by pair,
 * and as a permutation); _i 3: ten distinct offsets in all. */
START_TEST(test_order_any_offsets)
{
  enum { N = 3000 };
  /* _i 1: multiples of 16 in a window of 2^47, so that an offset's
   * differing bits and an id fit one word (the packed sort). */
  const int64_t base = INT64_C(1) << 50;
  dbuf_tensors_t *t;
  dbuf_layout_t *l;
  dbuf_diag_t d;
  int64_t *off = malloc(N * sizeof *off), range[2] = {0, 1}, dims[1] = {0};
  char *seen = calloc(N, 1);
  uint64_t x = 12345;
  ck_assert_int_eq(dbuf_tensors_create(&t), 0);
  for (int64_t i = 0; i < N; i++) {
    char name[16];
    snprintf(name, sizeof name, "t%lld", (long long)i);
    ck_assert_int_eq(dbuf_tensors_add(t, name, 1, dims, NULL), 0);
    x = x * 6364136223846793005u + 1442695040888963407u;
    if (_i == 0)
      off[i] = i % 3 == 0 ? (int64_t)(x >> 60) - 8 : (int64_t)x; /* small ones repeat */
    else if (_i == 2) /* in id order but for a few (the nearly sorted path) */
      off[i] = i % 97 == 5 ? (int64_t)(x >> 33) % (10 * i) /* anywhere before */
               : i % 89 == 0 ? 10 * (i - 3)        /* equal to an earlier one */
               : i % 50 == 1 && i > 100 ? 10 * i - 1000 /* late, in order */
                                        : 10 * i;
    else if (_i == 3) /* few distinct offsets (the few-keys counting path) */
      off[i] = ((int64_t)(x >> 61) - 4) * 1000;
    else
      off[i] = base + 16 * (i % 3 == 0 ? (int64_t)(x >> 60) : (int64_t)(x >> 24 & ((INT64_C(1) << 40) - 1)));
  }
  off[7] = _i == 0 || _i >= 2 ? INT64_MIN : base - 16;
  off[_i == 2 ? N - 1 : 8] = _i != 1 ? INT64_MAX : base + (INT64_C(1) << 45);
  ck_assert_int_eq(dbuf_layout_from_parts(t, DBUF_LAYOUT_UNPADDED, 1, 1, 0, 1, off, range,
                                          NULL, &l, &d), 0);
  const int64_t *order = dbuf_layout_order(l);
  for (int64_t p = 0; p < N; p++) {
    ck_assert(order[p] >= 0 && order[p] < N && !seen[order[p]]);
    seen[order[p]] = 1;
    if (p > 0) {
      int64_t a = order[p - 1], b = order[p];
      ck_assert_msg(off[a] < off[b] || (off[a] == off[b] && a < b), "at %lld", (long long)p);
    }
  }
  ck_assert_int_eq(order[0], 7);
  ck_assert_int_eq(order[N - 1], _i == 2 ? N - 1 : 8);
  dbuf_layout_destroy(l);
  dbuf_tensors_destroy(t);
  free(seen);
  free(off);
}
END_TEST

/* Write len bytes of text to a fresh temporary file; its path in path. */
static void
write_temp(char *path, size_t plen, const char *text, size_t len)
{
  const char *dir = getenv("TMPDIR");
  snprintf(path, plen, "%s/check_layout.XXXXXX", dir && dir[0] ? dir : "/tmp");
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  FILE *f = fdopen(fd, "w");
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(fwrite(text, 1, len, f), len);
  ck_assert_int_eq(fclose(f), 0);
}

/* dbuf_shapes_read() reads a file in chunks of 1 MiB: a file of several
 * chunks, lines of every length up to the longest (4095 bytes) across the
 * chunk ends, gives the list, digest and errors of dbuf_shapes_parse() on
 * the same text, and the digest is the hash of the bytes. */
START_TEST(test_shapes_read_chunks)
{
  size_t cap = (size_t)3 << 20, len = 0;
  char *text = malloc(cap + 8192), path[1024];
  uint64_t x = 99;
  int64_t i = 0;
  while (len < cap) {
    x = x * 6364136223846793005u + 1442695040888963407u;
    int name_len = x >> 61 == 0 ? 4000 + (int)(x >> 40 & 63) : 1 + (int)(x >> 40 & 63);
    if (i % 7 == 3)
      len += (size_t)sprintf(text + len, "# comment %lld\n", (long long)i);
    len += (size_t)sprintf(text + len, "t%lld.", (long long)i);
    memset(text + len, 'n', (size_t)name_len);
    len += (size_t)name_len;
    len += (size_t)sprintf(text + len, " %lldx%lld%s\n", (long long)(x >> 50),
                           (long long)(x >> 58 & 7) + 1, i % 5 == 0 ? " fp32" : "");
    i++;
  }
  text[len - 1] = ' '; /* the last line ends without a newline */
  for (int variant = 0; variant < 3; variant++) {
    size_t n = len;
    if (variant == 1) /* a bad line late in the file */
      n += (size_t)sprintf(text + n, "\nbad 3x");
    if (variant == 2) /* ... and a NUL byte after it, which is named first */
      n += (size_t)sprintf(text + n, "\nbad 3x\nz 1") + 1;
    write_temp(path, sizeof path, text, n);
    dbuf_tensors_t *a = NULL, *b = NULL;
    dbuf_diag_t da, db;
    uint64_t digest = 0;
    int ra = dbuf_shapes_read(path, &a, &digest, &da);
    int rb = dbuf_shapes_parse(path, text, n, &b, &db);
    ck_assert_int_eq(ra, rb);
    if (variant == 0) {
      ck_assert_int_eq(ra, 0);
      ck_assert_uint_eq(digest, dbuf_hash64(text, n, 0));
      ck_assert_int_eq(dbuf_tensors_count(a), i);
      ck_assert_int_eq(dbuf_tensors_count(b), i);
      for (int64_t k = 0; k < i; k++) {
        ck_assert_str_eq(dbuf_tensors_name(a, k), dbuf_tensors_name(b, k));
        ck_assert_int_eq(dbuf_tensors_numel(a, k), dbuf_tensors_numel(b, k));
        ck_assert_int_eq(dbuf_tensors_row_elems(a, k), dbuf_tensors_row_elems(b, k));
        ck_assert_int_eq(dbuf_tensors_dtype(a, k), k % 5 == 0 ? DBUF_DTYPE_F32 : DBUF_DTYPE_NONE);
      }
    } else {
      ck_assert_int_eq(ra, DBUF_EPARSE);
      ck_assert_str_eq(da.msg, db.msg);
      ck_assert_ptr_nonnull(strstr(da.msg, variant == 1 ? "bad" : "NUL"));
      if (variant == 2) { /* named with its line, the last */
        char want[1100];
        int64_t line = 1;
        for (size_t k = 0; k < n; k++)
          line += text[k] == '\n';
        snprintf(want, sizeof want, "%s:%lld: contains a NUL byte (binary file?)", path,
                 (long long)line);
        ck_assert_str_eq(da.msg, want);
      }
    }
    dbuf_tensors_destroy(a);
    dbuf_tensors_destroy(b);
    remove(path);
  }
  free(text);
}
END_TEST

/* Found by tests/fuzz (fuzz_shapes_text): a name with a byte that is not
 * UTF-8 was accepted, and `plan --format json` then wrote a layout JSON that
 * no JSON reader (verify included) accepts.  Names must be UTF-8. */
START_TEST(test_name_utf8)
{
  static const char *const bad[] = {
      "blo\xf4k",          /* lead byte of 4 with no continuation */
      "a\xc0\xaf",         /* overlong '/' */
      "a\xed\xa0\x80",     /* UTF-16 surrogate */
      "a\xf4\x90\x80\x80", /* past U+10FFFF */
      "\x80",              /* continuation byte alone */
      "a\xe2\x82",         /* truncated 3-byte sequence */
  };
  static const char *const good[] = {"gr\xc3\xb6\xc3\x9f" "e", "\xe5\xbc\xa0\xe9\x87\x8f",
                                     "e\xf0\x9f\x98\x80", "\xf4\x8f\xbf\xbf"};
  int64_t dims[1] = {3};
  dbuf_tensors_t *t;
  dbuf_diag_t d;
  ck_assert_int_eq(dbuf_tensors_create(&t), 0);
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ck_assert_int_eq(dbuf_tensors_add(t, bad[i], 1, dims, &d), DBUF_EINVAL);
    ck_assert_msg(strstr(d.msg, "not UTF-8") != NULL, "%s", d.msg);
  }
  ck_assert_int_eq(dbuf_tensors_count(t), 0);
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
    ck_assert_int_eq(dbuf_tensors_add(t, good[i], 1, dims, &d), 0);
  ck_assert_int_eq(dbuf_tensors_count(t), 4);
  dbuf_tensors_destroy(t);
}
END_TEST

START_TEST(test_shape_errors)
{
  dbuf_tensors_t *t;
  dbuf_diag_t d;
  int64_t big[3] = {INT64_MAX / 2, 3, 1};
  int64_t zero_row[2] = {4, 0};
  int64_t neg[2] = {-1, 4};
  int64_t ok[2] = {1, INT64_MAX};
  int64_t many[17] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  ck_assert_int_eq(dbuf_tensors_create(&t), 0);
  ck_assert_int_eq(dbuf_tensors_add(t, "s", 0, NULL, &d), DBUF_ESHAPE);
  ck_assert_msg(strstr(d.msg, "tensor s") && strstr(d.msg, "0-D"), "%s", d.msg);
  ck_assert_int_eq(dbuf_tensors_add(t, "z", 2, zero_row, &d), DBUF_ESHAPE);
  ck_assert_msg(strstr(d.msg, "zero-sized non-leading dim 1"), "%s", d.msg);
  ck_assert_int_eq(dbuf_tensors_add(t, "n", 2, neg, &d), DBUF_ESHAPE);
  ck_assert_int_eq(dbuf_tensors_add(t, "m", 17, many, &d), DBUF_ESHAPE);
  ck_assert_int_eq(dbuf_tensors_add(t, "big", 3, big, &d), DBUF_EOVERFLOW);
  ck_assert_msg(strstr(d.msg, "tensor big"), "%s", d.msg);
  ck_assert_int_eq(dbuf_tensors_add(t, "ok", 2, ok, &d), 0);
  ck_assert_int_eq(dbuf_tensors_add(t, "ok2", 2, ok, &d), DBUF_EOVERFLOW);
  ck_assert_msg(strstr(d.msg, "total"), "%s", d.msg);
  ck_assert_int_eq(dbuf_tensors_add(t, "ok", 1, ok, &d), DBUF_EDUP);
  ck_assert_int_eq(dbuf_tensors_add(t, "a b", 1, ok, &d), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_tensors_add(t, "", 1, ok, &d), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_tensors_count(t), 1);
  ck_assert_int_eq(dbuf_tensors_total(t), INT64_MAX);
  dbuf_tensors_destroy(t);
}
END_TEST

/* The LCM of row sizes overflows 64 bits: pairwise-coprime large primes. */
START_TEST(test_lcm_overflow)
{
  static const int64_t primes[] = {2147483647LL, 2147483629LL, 2147483587LL};
  dbuf_tensors_t *t;
  dbuf_layout_t *l = NULL;
  dbuf_diag_t d;
  dbuf_layout_params_t p;
  ck_assert_int_eq(dbuf_tensors_create(&t), 0);
  for (int i = 0; i < 3; i++) {
    int64_t dims[2] = {1, primes[i]};
    char name[8];
    snprintf(name, sizeof name, "p%d", i);
    ck_assert_int_eq(dbuf_tensors_add(t, name, 2, dims, NULL), 0);
  }
  dbuf_layout_params_init(&p);
  p.nranks = 2;
  ck_assert_int_eq(dbuf_layout_build(t, &p, &l, &d), DBUF_EOVERFLOW);
  ck_assert_msg(strstr(d.msg, "tensor p2") && strstr(d.msg, "LCM"), "%s",
                d.msg);
  /* unpadded has no chunk: the same list builds. */
  p.kind = DBUF_LAYOUT_UNPADDED;
  ck_assert_int_eq(dbuf_layout_build(t, &p, &l, &d), 0);
  ck_assert_int_eq(dbuf_layout_validate(l, NULL, NULL, NULL, &d), 0);
  dbuf_layout_destroy(l);
  /* block x row size overflow */
  dbuf_tensors_t *t2;
  int64_t dims[2] = {4, INT64_MAX / 4};
  ck_assert_int_eq(dbuf_tensors_create(&t2), 0);
  ck_assert_int_eq(dbuf_tensors_add(t2, "wide", 2, dims, NULL), 0);
  p.kind = DBUF_LAYOUT_PADDED;
  p.block_size = 8;
  ck_assert_int_eq(dbuf_layout_build(t2, &p, &l, &d), DBUF_EBLOCK);
  p.block_size = 4;
  ck_assert_int_eq(dbuf_layout_build(t2, &p, &l, &d), DBUF_EOVERFLOW);
  /* size padded to chunk x nranks overflows */
  p.block_size = 1;
  p.nranks = 3;
  ck_assert_int_eq(dbuf_layout_build(t2, &p, &l, &d), DBUF_EOVERFLOW);
  dbuf_tensors_destroy(t2);
  dbuf_tensors_destroy(t);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Validators on broken layouts                                         */

typedef struct {
  int kinds[16];
  int n;
} viol_list_t;

static int
collect(const dbuf_violation_t *v, void *arg)
{
  viol_list_t *vl = arg;
  if (vl->n < 16)
    vl->kinds[vl->n++] = v->kind;
  return 0;
}

static int
has_kind(const viol_list_t *vl, int kind)
{
  for (int i = 0; i < vl->n; i++)
    if (vl->kinds[i] == kind)
      return 1;
  return 0;
}

/* Seed example: P0=(2,6) P1=(4,4) P2=(4,4) P3=(1,2) P4=(1,6). */
static dbuf_tensors_t *
seed_tensors(void)
{
  static const int64_t shapes[5][2] = {{2, 6}, {4, 4}, {4, 4}, {1, 2}, {1, 6}};
  dbuf_tensors_t *t;
  ck_assert_int_eq(dbuf_tensors_create(&t), 0);
  for (int i = 0; i < 5; i++) {
    char name[8];
    snprintf(name, sizeof name, "P%d", i);
    ck_assert_int_eq(dbuf_tensors_add(t, name, 2, shapes[i], NULL), 0);
  }
  return t;
}

static void
expect_violation(dbuf_layout_kind_t kind, int nranks, int64_t chunk,
                 int64_t size, const int64_t *offsets, const int64_t *ranks,
                 int want, const char *needle)
{
  dbuf_tensors_t *t = seed_tensors();
  dbuf_layout_t *l;
  dbuf_diag_t d;
  viol_list_t vl = {{0}, 0};
  int64_t nv = 0;
  ck_assert_int_eq(dbuf_layout_from_parts(t, kind, nranks, 1, chunk, size,
                                          offsets, ranks, NULL, &l, &d),
                   0);
  ck_assert_int_eq(dbuf_layout_validate(l, collect, &vl, &nv, &d), DBUF_ELAYOUT);
  ck_assert_int_eq(nv, vl.n);
  ck_assert_msg(has_kind(&vl, want), "violation %d not reported (first: %s)",
                want, d.msg);
  ck_assert_msg(strstr(d.msg, needle) != NULL, "'%s' lacks '%s'", d.msg, needle);
  dbuf_layout_destroy(l);
  dbuf_tensors_destroy(t);
}

START_TEST(test_validate_broken)
{
  /* The good seed layout, then one defect at a time. */
  int64_t good[5] = {0, 12, 32, 28, 48};
  int64_t ranks5[5] = {0, 12, 24, 36, 48};
  dbuf_tensors_t *t = seed_tensors();
  dbuf_layout_t *l;
  ck_assert_int_eq(dbuf_layout_from_parts(t, DBUF_LAYOUT_PADDED, 5, 1, 12, 60,
                                          good, ranks5, NULL, &l, NULL),
                   0);
  ck_assert_int_eq(dbuf_layout_validate(l, NULL, NULL, NULL, NULL), 0);
  dbuf_layout_destroy(l);
  /* Bad scalars are refused before the parts are copied: a rank count of
   * INT_MAX must not size the copy of a 5-word rank array (it read past it). */
  dbuf_diag_t e;
  l = NULL;
  ck_assert_int_eq(dbuf_layout_from_parts(t, (dbuf_layout_kind_t)99, INT_MAX, 1, 12, 60, good,
                                          ranks5, NULL, &l, &e),
                   DBUF_EINVAL);
  ck_assert_str_eq(e.msg, "unknown layout kind 99");
  ck_assert_int_eq(dbuf_layout_from_parts(t, DBUF_LAYOUT_PADDED, INT_MAX, 0, 12, 60, good,
                                          ranks5, NULL, &l, &e),
                   DBUF_EINVAL);
  ck_assert_str_eq(e.msg, "block size must be positive, got 0");
  ck_assert_int_eq(dbuf_layout_from_parts(t, DBUF_LAYOUT_PADDED, INT_MAX, 1, 12, -1, good,
                                          ranks5, NULL, &l, &e),
                   DBUF_ELAYOUT);
  ck_assert_ptr_null(l);
  dbuf_tensors_destroy(t);

  int64_t overlap[5] = {0, 12, 28, 28, 48}; /* P2 [28, 44) overlaps P3 [28, 30) */
  expect_violation(DBUF_LAYOUT_PADDED, 5, 12, 60, overlap, ranks5,
                   DBUF_VIOL_OVERLAP, "overlaps");
  int64_t past[5] = {0, 12, 32, 28, 56}; /* P4 [56, 62) past 60 */
  expect_violation(DBUF_LAYOUT_PADDED, 5, 12, 60, past, ranks5,
                   DBUF_VIOL_BOUNDS, "tensor P4");
  int64_t cut_ranks[5] = {0, 14, 24, 36, 48}; /* 14 cuts P1 row 0 (P1 at 12) */
  expect_violation(DBUF_LAYOUT_UNPADDED, 5, 0, 60, good, cut_ranks,
                   DBUF_VIOL_CUT, "rank 1: boundary 14 cuts tensor P1");
  int64_t misaligned[5] = {0, 12, 32, 26, 48}; /* P3 (row 2) at 26: ok; P2 moved */
  misaligned[2] = 34;                           /* P2 at 34: not a multiple of 4 */
  expect_violation(DBUF_LAYOUT_PADDED, 5, 12, 60, misaligned, ranks5,
                   DBUF_VIOL_ALIGN, "tensor P2: offset 34");
  int64_t unequal[5] = {0, 12, 24, 48, 48};
  expect_violation(DBUF_LAYOUT_PADDED, 5, 12, 60, good, unequal,
                   DBUF_VIOL_UNEQUAL, "rank 2");
  int64_t tsplit[5] = {0, 12, 28, 44, 46}; /* packed; rank cut at 24 inside P1 */
  int64_t tranks[2] = {0, 24};
  {
    dbuf_tensors_t *t2 = seed_tensors();
    dbuf_layout_t *l2;
    viol_list_t vl = {{0}, 0};
    dbuf_diag_t d;
    ck_assert_int_eq(dbuf_layout_from_parts(t2, DBUF_LAYOUT_TENSOR, 2, 1, 0, 52,
                                            tsplit, tranks, NULL, &l2, NULL),
                     0);
    ck_assert_int_eq(dbuf_layout_validate(l2, collect, &vl, NULL, &d),
                     DBUF_ELAYOUT);
    ck_assert(has_kind(&vl, DBUF_VIOL_SPLIT));
    ck_assert_msg(strstr(d.msg, "tensor P1") && strstr(d.msg, "split"), "%s",
                  d.msg);
    dbuf_layout_destroy(l2);
    dbuf_tensors_destroy(t2);
  }
  int64_t gapped[5] = {0, 12, 28, 44, 48}; /* hole [46, 48) in an unpadded layout */
  int64_t granks[2] = {0, 28};
  {
    dbuf_tensors_t *t3 = seed_tensors();
    dbuf_layout_t *l3;
    viol_list_t vl = {{0}, 0};
    dbuf_diag_t d;
    ck_assert_int_eq(dbuf_layout_from_parts(t3, DBUF_LAYOUT_UNPADDED, 2, 1, 0,
                                            54, gapped, granks, NULL, &l3, NULL),
                     0);
    ck_assert_int_eq(dbuf_layout_validate(l3, collect, &vl, NULL, &d),
                     DBUF_ELAYOUT);
    ck_assert(has_kind(&vl, DBUF_VIOL_GAP));
    ck_assert_msg(strstr(d.msg, "first hole at 46"), "%s", d.msg);
    dbuf_layout_destroy(l3);
    dbuf_tensors_destroy(t3);
  }
  int64_t wrong_chunk = 24;
  expect_violation(DBUF_LAYOUT_PADDED, 5, wrong_chunk, 60, good, ranks5,
                   DBUF_VIOL_CHUNK, "chunk size 24");
  int64_t bad_range[5] = {0, 24, 12, 36, 48};
  expect_violation(DBUF_LAYOUT_UNPADDED, 5, 0, 60, good, bad_range,
                   DBUF_VIOL_RANGE, "rank 1");
}
END_TEST

/* ------------------------------------------------------------------ */
/* Queries                                                              */

/* The seed padded layout at 5 ranks (the seed diagram): P0 [0, 12),
 * P1 [12, 28), P3 [28, 30), gap, P2 [32, 48), P4 [48, 54), tail; segments
 * of 12 elements. */
static dbuf_layout_t *
seed_padded(void)
{
  dbuf_tensors_t *t = seed_tensors();
  dbuf_layout_t *l;
  dbuf_layout_params_t p;
  dbuf_layout_params_init(&p);
  p.nranks = 5;
  ck_assert_int_eq(dbuf_layout_build(t, &p, &l, NULL), 0);
  dbuf_tensors_destroy(t);
  ck_assert_int_eq(dbuf_layout_offsets(l)[1], 12);
  ck_assert_int_eq(dbuf_layout_offsets(l)[2], 32);
  return l;
}

START_TEST(test_queries_seed)
{
  dbuf_layout_t *l = seed_padded();
  int r = -1;
  int64_t s, e, tid;
  ck_assert_int_eq(dbuf_layout_owner_of(l, -1, &r), DBUF_ERANGE);
  ck_assert_int_eq(dbuf_layout_owner_of(l, 60, &r), DBUF_ERANGE);
  ck_assert_int_eq(dbuf_layout_owner_of(l, 59, &r), 0);
  ck_assert_int_eq(r, 4);
  ck_assert_int_eq(dbuf_layout_owner_of(l, 0, &r), 0);
  ck_assert_int_eq(r, 0);
  ck_assert_int_eq(dbuf_layout_owner_of(l, 24, &r), 0);
  ck_assert_int_eq(r, 2);
  ck_assert_int_eq(dbuf_layout_rank_range(l, 2, &s, &e), 0);
  ck_assert_int_eq(s, 24);
  ck_assert_int_eq(e, 36);
  ck_assert_int_eq(dbuf_layout_rank_range(l, 5, &s, &e), DBUF_ERANGE);
  /* Rank 2 of the seed diagram: P1 row 3, P3, gap, P2 row 0. */
  dbuf_piece_t pc[8];
  int64_t n;
  ck_assert_int_eq(dbuf_layout_rank_pieces(l, 2, pc, 8, &n), 0);
  ck_assert_int_eq(n, 3);
  ck_assert_int_eq(pc[0].tensor, 1);
  ck_assert_int_eq(pc[0].first_row, 3);
  ck_assert_int_eq(pc[0].nrows, 1);
  ck_assert_int_eq(pc[0].offset, 0);
  ck_assert_int_eq(pc[1].tensor, 3);
  ck_assert_int_eq(pc[1].offset, 4);
  ck_assert_int_eq(pc[2].tensor, 2);
  ck_assert_int_eq(pc[2].first_row, 0);
  ck_assert_int_eq(pc[2].offset, 8);
  ck_assert_int_eq(dbuf_layout_tensor_at(l, 29, &tid), 0);
  ck_assert_int_eq(tid, 3);
  ck_assert_int_eq(dbuf_layout_tensor_at(l, 31, &tid), 0);
  ck_assert_int_eq(tid, -1); /* the gap */
  /* P1 spans ranks 1 and 2: rows 0-2 and row 3. */
  ck_assert_int_eq(dbuf_layout_tensor_pieces(l, 1, pc, 8, &n), 0);
  ck_assert_int_eq(n, 2);
  ck_assert_int_eq(pc[0].rank, 1);
  ck_assert_int_eq(pc[0].nrows, 3);
  ck_assert_int_eq(pc[1].rank, 2);
  ck_assert_int_eq(pc[1].first_row, 3);
  dbuf_layout_stats_t st;
  ck_assert_int_eq(dbuf_layout_stats(l, &st), 0);
  ck_assert_int_eq(st.logical, 12 + 16 + 16 + 2 + 6);
  ck_assert_int_eq(st.padding, 60 - 52);
  ck_assert_int_eq(st.tail_elems, 6);
  ck_assert_int_eq(st.gap_elems, 2);
  ck_assert_int_eq(st.split_tensors, 2); /* P1 and P2 */
  ck_assert_int_eq(st.min_segment, 12);
  ck_assert_int_eq(st.max_segment, 12);
  ck_assert_int_eq(st.largest_tensor, 1);
  dbuf_layout_destroy(l);
}
END_TEST

/* Found by tests/fuzz (fuzz_shapes_text): the rows of a piece ending near
 * INT64_MAX were rounded up as (end + row_elems - 1) / row_elems, a signed
 * overflow.  One tensor of R rows of 3, R * 3 = INT64_MAX - 1, on 2 ranks:
 * the last piece ends at the tensor's last row. */
START_TEST(test_pieces_near_int64_max)
{
  const int64_t rows = INT64_C(3074457345618258602);
  int64_t dims[2] = {rows, 3}, n = 0;
  dbuf_tensors_t *t;
  dbuf_layout_t *l;
  dbuf_layout_params_t p;
  dbuf_piece_t pc[2];
  ck_assert_int_eq(dbuf_tensors_create(&t), 0);
  ck_assert_int_eq(dbuf_tensors_add(t, "big", 2, dims, NULL), 0);
  dbuf_layout_params_init(&p);
  p.kind = DBUF_LAYOUT_UNPADDED;
  p.nranks = 2;
  ck_assert_int_eq(dbuf_layout_build(t, &p, &l, NULL), 0);
  ck_assert_int_eq(dbuf_layout_rank_pieces(l, 1, pc, 2, &n), 0);
  ck_assert_int_eq(n, 1);
  ck_assert_int_gt(pc[0].nrows, 0);
  ck_assert_int_eq(pc[0].first_row + pc[0].nrows, rows);
  ck_assert_int_eq(pc[0].nelems, pc[0].nrows * 3);
  ck_assert_int_eq(dbuf_layout_tensor_pieces(l, 0, pc, 2, &n), 0);
  ck_assert_int_eq(n, 2);
  ck_assert_int_eq(pc[0].nrows + pc[1].nrows, rows);
  dbuf_layout_destroy(l);
  dbuf_tensors_destroy(t);
}
END_TEST

START_TEST(test_local_range)
{
  /* 8 segments; mesh (outer 2) x (inner 2) x (tp 2), shard over outer+inner. */
  dbuf_tensors_t *t;
  dbuf_layout_t *l;
  dbuf_layout_params_t p;
  int64_t dims[2] = {64, 4};
  ck_assert_int_eq(dbuf_tensors_create(&t), 0);
  ck_assert_int_eq(dbuf_tensors_add(t, "w", 2, dims, NULL), 0);
  dbuf_layout_params_init(&p);
  p.nranks = 8;
  ck_assert_int_eq(dbuf_layout_build(t, &p, &l, NULL), 0);
  ck_assert_int_eq(dbuf_layout_size(l), 256);
  int sizes[3] = {2, 2, 2}, sharded[3] = {1, 1, 0};
  for (int a = 0; a < 2; a++) {
    for (int b = 0; b < 2; b++) {
      int coords[3] = {a, b, 1};
      int64_t s, e;
      int first, nseg;
      ck_assert_int_eq(dbuf_layout_local_range(l, 3, sizes, coords, sharded, &s,
                                               &e, &first, &nseg, NULL),
                       0);
      /* 4 shards over 8 segments: 2 each; inner axis b most significant. */
      int idx = b * 2 + a;
      ck_assert_int_eq(nseg, 2);
      ck_assert_int_eq(first, idx * 2);
      ck_assert_int_eq(s, (int64_t)idx * 64);
      ck_assert_int_eq(e, (int64_t)idx * 64 + 64);
    }
  }
  int coords[3] = {0, 2, 0};
  int64_t s, e;
  ck_assert_int_eq(dbuf_layout_local_range(l, 3, sizes, coords, sharded, &s, &e,
                                           NULL, NULL, NULL),
                   DBUF_ERANGE);
  int sizes3[3] = {3, 1, 1}, c0[3] = {0, 0, 0};
  ck_assert_int_eq(dbuf_layout_local_range(l, 3, sizes3, c0, sharded, &s, &e,
                                           NULL, NULL, NULL),
                   DBUF_ENRANKS);
  dbuf_layout_destroy(l);
  dbuf_tensors_destroy(t);
}
END_TEST

START_TEST(test_auto_owners)
{
  /* LPT: 10,8,7,6,5 elements on 2 ranks -> r0 10,6,5? check by hand:
   * 10->r0(10) 8->r1(8) 7->r1(15) 6->r0(16) 5->r1(20). */
  static const int64_t sizes[5] = {7, 10, 5, 8, 6};
  static const int want[5] = {1, 0, 1, 1, 0};
  dbuf_tensors_t *t;
  ck_assert_int_eq(dbuf_tensors_create(&t), 0);
  for (int i = 0; i < 5; i++) {
    char name[8];
    snprintf(name, sizeof name, "v%d", i);
    ck_assert_int_eq(dbuf_tensors_add(t, name, 1, &sizes[i], NULL), 0);
  }
  int owners[5];
  ck_assert_int_eq(dbuf_layout_plan_owners(t, 2, owners, NULL), 0);
  for (int i = 0; i < 5; i++)
    ck_assert_int_eq(owners[i], want[i]);
  /* Ties: equal sizes go round-robin from the lowest rank. */
  dbuf_layout_params_t p;
  dbuf_layout_t *l;
  dbuf_layout_params_init(&p);
  p.kind = DBUF_LAYOUT_TENSOR;
  p.auto_owners = 1;
  p.nranks = 2;
  ck_assert_int_eq(dbuf_layout_build(t, &p, &l, NULL), 0);
  ck_assert_int_eq(dbuf_layout_range(l)[1], 16); /* 10 + 6 */
  ck_assert_int_eq(dbuf_layout_validate(l, NULL, NULL, NULL, NULL), 0);
  dbuf_layout_destroy(l);
  dbuf_tensors_destroy(t);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Properties on random inputs                                          */

static dbuf_tensors_t *
random_tensors(int64_t block)
{
  dbuf_tensors_t *t;
  ck_assert_int_eq(dbuf_tensors_create(&t), 0);
  int n = 1 + (int)(test_rng() % 12);
  static const int64_t rowsz[] = {1, 2, 3, 4, 5, 6, 7, 8, 12, 16};
  for (int i = 0; i < n; i++) {
    int64_t dims[3];
    int nd = 1 + (int)(test_rng() % 3);
    dims[0] = block * (int64_t)(test_rng() % 6); /* 0 rows sometimes */
    if (nd >= 2)
      dims[1] = rowsz[test_rng() % 10];
    if (nd == 3)
      dims[2] = 1 + (int64_t)(test_rng() % 3);
    char name[16];
    snprintf(name, sizeof name, "r%d", i);
    ck_assert_int_eq(dbuf_tensors_add(t, name, nd, dims, NULL), 0);
  }
  return t;
}

static dbuf_tensors_t *
tensors_of(const char *const *names, const int *ndims, const int64_t (*dims)[3],
           int n)
{
  dbuf_tensors_t *t;
  ck_assert_int_eq(dbuf_tensors_create(&t), 0);
  for (int i = 0; i < n; i++)
    ck_assert_int_eq(dbuf_tensors_add(t, names[i], ndims[i], dims[i], NULL), 0);
  return t;
}

START_TEST(test_auto_ns_hand)
{
  /*
   * Newton-Schulz costs, numel x min(rows, cols), 1-D = numel:
   *   A 4x8    32 x min(4, 8)  = 128     B 8x2    16 x 2 = 32
   *   C 100    1-D             = 100     D 2x3x5  30 x min(2, 15) = 60
   *   E 3x3    9 x 3           = 27      F 0x4    0
   * LPT on 2 ranks, cost descending: A -> r0 (128), C -> r1 (100),
   * D -> r1 (160), B -> r0 (160), E: tie 160/160 -> r0 (187), F -> r1 (160).
   * By elements instead (A 32, B 16, C 100, D 30, E 9, F 0): C -> r0 (100),
   * A -> r1 (32), D -> r1 (62), B -> r1 (78), E -> r1 (87), F -> r1.
   */
  static const char *const names[] = {"A", "B", "C", "D", "E", "F"};
  static const int ndims[] = {2, 2, 1, 3, 2, 2};
  static const int64_t dims[][3] = {{4, 8}, {8, 2}, {100}, {2, 3, 5}, {3, 3}, {0, 4}};
  static const int64_t cost[] = {128, 32, 100, 60, 27, 0};
  static const int want_ns[] = {0, 0, 1, 1, 0, 1};
  static const int want_numel[] = {1, 1, 0, 1, 1, 1};
  dbuf_tensors_t *t = tensors_of(names, ndims, dims, 6);
  int owners[6];
  int64_t c, loads[2];
  for (int i = 0; i < 6; i++) {
    ck_assert_int_eq(dbuf_layout_owner_cost(t, i, DBUF_OWNERS_NS, &c, NULL), 0);
    ck_assert_int_eq(c, cost[i]);
  }
  ck_assert_int_eq(dbuf_layout_plan_owners_cost(t, 2, DBUF_OWNERS_NS, owners, NULL), 0);
  for (int i = 0; i < 6; i++)
    ck_assert_msg(owners[i] == want_ns[i], "ns: tensor %s on %d, want %d",
                  names[i], owners[i], want_ns[i]);
  ck_assert_int_eq(dbuf_layout_plan_owners_cost(t, 2, DBUF_OWNERS_NUMEL, owners, NULL), 0);
  for (int i = 0; i < 6; i++)
    ck_assert_msg(owners[i] == want_numel[i], "numel: tensor %s on %d, want %d",
                  names[i], owners[i], want_numel[i]);

  /* Through the builder: rank 0 holds A, B, E (57 elements, cost 187). */
  dbuf_layout_params_t p;
  dbuf_layout_t *l;
  dbuf_layout_params_init(&p);
  p.kind = DBUF_LAYOUT_TENSOR;
  p.nranks = 2;
  p.auto_owners = DBUF_OWNERS_NS;
  ck_assert_int_eq(dbuf_layout_build(t, &p, &l, NULL), 0);
  ck_assert_int_eq(dbuf_layout_validate(l, NULL, NULL, NULL, NULL), 0);
  ck_assert_int_eq(dbuf_layout_range(l)[1], 57);
  ck_assert_int_eq(dbuf_layout_owner_loads(l, DBUF_OWNERS_NS, loads, NULL), 0);
  ck_assert_int_eq(loads[0], 187);
  ck_assert_int_eq(loads[1], 160);
  ck_assert_int_eq(dbuf_layout_owner_loads(l, DBUF_OWNERS_NUMEL, loads, NULL), 0);
  ck_assert_int_eq(loads[0], 57);
  ck_assert_int_eq(loads[1], 130);
  dbuf_layout_destroy(l);

  /* Bad arguments. */
  dbuf_diag_t d;
  p.auto_owners = 7;
  ck_assert_int_eq(dbuf_layout_build(t, &p, &l, &d), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_layout_plan_owners_cost(t, 0, DBUF_OWNERS_NS, owners, NULL),
                   DBUF_ENRANKS);
  ck_assert_int_eq(dbuf_layout_owner_cost(t, 6, DBUF_OWNERS_NS, &c, NULL), DBUF_ERANGE);
  ck_assert_int_eq(dbuf_layout_owner_cost(t, 0, (dbuf_owner_cost_t)0, &c, NULL),
                   DBUF_EINVAL);
  p.kind = DBUF_LAYOUT_UNPADDED;
  p.auto_owners = 0;
  ck_assert_int_eq(dbuf_layout_build(t, &p, &l, NULL), 0);
  ck_assert_int_eq(dbuf_layout_owner_loads(l, DBUF_OWNERS_NS, loads, NULL), DBUF_EINVAL);
  dbuf_layout_destroy(l);
  dbuf_tensors_destroy(t);
}
END_TEST

START_TEST(test_auto_ns_overflow)
{
  /* 2^31 x 2^31 holds 2^62 elements (fits) but costs 2^62 x 2^31. */
  static const char *const names[] = {"small", "huge"};
  static const int ndims[] = {1, 2};
  static const int64_t dims[][3] = {{3}, {INT64_C(1) << 31, INT64_C(1) << 31}};
  dbuf_tensors_t *t = tensors_of(names, ndims, dims, 2);
  dbuf_diag_t d;
  int owners[2] = {-1, -1};
  ck_assert_int_eq(dbuf_layout_plan_owners_cost(t, 2, DBUF_OWNERS_NS, owners, &d),
                   DBUF_EOVERFLOW);
  ck_assert_msg(strstr(d.msg, "tensor huge (shape 2147483648x2147483648)"), "%s", d.msg);
  ck_assert_int_eq(owners[0], -1); /* nothing written on failure */
  /* By elements it plans. */
  ck_assert_int_eq(dbuf_layout_plan_owners_cost(t, 2, DBUF_OWNERS_NUMEL, owners, NULL), 0);
  ck_assert_int_eq(owners[1], 0);
  dbuf_tensors_destroy(t);

  /* Each cost fits (2^20 x 2^20: 2^40 elements x 2^20 = 2^60), but nine of
   * them on one rank reach 2^63 at the eighth, m7. */
  ck_assert_int_eq(dbuf_tensors_create(&t), 0);
  for (int i = 0; i < 9; i++) {
    char name[8];
    int64_t dd[2] = {INT64_C(1) << 20, INT64_C(1) << 20};
    snprintf(name, sizeof name, "m%d", i);
    ck_assert_int_eq(dbuf_tensors_add(t, name, 2, dd, NULL), 0);
  }
  int own9[9];
  ck_assert_int_eq(dbuf_layout_plan_owners_cost(t, 1, DBUF_OWNERS_NS, own9, &d),
                   DBUF_EOVERFLOW);
  ck_assert_msg(strstr(d.msg, "tensor m7: the load of rank 0 overflows"), "%s", d.msg);
  ck_assert_int_eq(dbuf_layout_plan_owners_cost(t, 2, DBUF_OWNERS_NS, own9, NULL), 0);
  dbuf_tensors_destroy(t);
}
END_TEST

/* The reference planner of the auto-ns test: costs from the dims, a stable
 * insertion sort, and a linear scan for the least-loaded rank, O(n^2 + nP). */
static void
reference_lpt(const dbuf_tensors_t *t, int nranks, int ns, int *owners)
{
  int64_t n = dbuf_tensors_count(t), cost[16], load[16] = {0};
  int order[16];
  ck_assert_int_le(n, 16);
  ck_assert_int_le(nranks, 16);
  for (int64_t i = 0; i < n; i++) {
    const int64_t *d = dbuf_tensors_dims(t, i);
    int nd = dbuf_tensors_ndim(t, i);
    int64_t numel = 1, cols = 1;
    for (int k = 0; k < nd; k++)
      numel *= d[k];
    for (int k = 1; k < nd; k++)
      cols *= d[k];
    cost[i] = !ns || nd == 1 ? numel : numel * (d[0] < cols ? d[0] : cols);
  }
  for (int i = 0; i < n; i++) {
    int j = i;
    while (j > 0 && cost[order[j - 1]] < cost[i]) {
      order[j] = order[j - 1];
      j--;
    }
    order[j] = i;
  }
  for (int k = 0; k < n; k++) {
    int best = 0;
    for (int r = 1; r < nranks; r++)
      if (load[r] < load[best])
        best = r;
    owners[order[k]] = best;
    load[best] += cost[order[k]];
  }
}

START_TEST(test_auto_ns_random)
{
  test_rng_state = 0x2545f4914f6cdd1dULL ^ (uint64_t)_i * 0x9e3779b97f4a7c15ULL;
  for (int iter = 0; iter < 400; iter++) {
    dbuf_tensors_t *t = random_tensors(1);
    int nranks = 1 + (int)(test_rng() % 7);
    int got[16], want[16];
    for (int ns = 0; ns <= 1; ns++) {
      reference_lpt(t, nranks, ns, want);
      ck_assert_int_eq(dbuf_layout_plan_owners_cost(
                           t, nranks, ns ? DBUF_OWNERS_NS : DBUF_OWNERS_NUMEL, got, NULL),
                       0);
      for (int64_t i = 0; i < dbuf_tensors_count(t); i++)
        ck_assert_msg(got[i] == want[i], "iter %d ns %d dp %d: tensor %lld on %d, want %d",
                      iter, ns, nranks, (long long)i, got[i], want[i]);
    }
    dbuf_tensors_destroy(t);
  }
}
END_TEST

START_TEST(test_random_properties)
{
  test_rng_state = 0x9e3779b97f4a7c15ULL ^ (uint64_t)_i * 0x100000001b3ULL;
  for (int iter = 0; iter < 250; iter++) {
    int64_t block = 1 + (int64_t)(test_rng() % 3);
    dbuf_tensors_t *t = random_tensors(block);
    int64_t n = dbuf_tensors_count(t);
    for (int kind = DBUF_LAYOUT_PADDED; kind <= DBUF_LAYOUT_COMPACT; kind++) {
      dbuf_layout_params_t p;
      dbuf_layout_t *l;
      dbuf_diag_t d;
      dbuf_layout_params_init(&p);
      p.kind = (dbuf_layout_kind_t)kind;
      p.nranks = 1 + (int)(test_rng() % 9);
      p.block_size = block;
      p.auto_owners = 1;
      ck_assert_msg(dbuf_layout_build(t, &p, &l, &d) == 0, "%s", d.msg);
      ck_assert_msg(dbuf_layout_validate(l, NULL, NULL, NULL, &d) == 0,
                    "iter %d kind %d: %s", iter, kind, d.msg);
      int64_t size = dbuf_layout_size(l);
      const int64_t *off = dbuf_layout_offsets(l);
      /* Every element of every tensor: exactly one owner, the owner's
       * pieces hold it, and pieces of all ranks cover each row once. */
      int64_t *seen = calloc((size_t)size + 1, sizeof *seen);
      for (int r = 0; r < p.nranks; r++) {
        int64_t np, s, e;
        ck_assert_int_eq(dbuf_layout_rank_pieces(l, r, NULL, 0, &np), 0);
        dbuf_piece_t *pc = calloc((size_t)np + 1, sizeof *pc);
        ck_assert_int_eq(dbuf_layout_rank_pieces(l, r, pc, np, &np), 0);
        dbuf_layout_rank_range(l, r, &s, &e);
        for (int64_t k = 0; k < np; k++) {
          int64_t re = dbuf_tensors_row_elems(t, pc[k].tensor);
          ck_assert(pc[k].whole_rows);
          ck_assert_int_eq(pc[k].nelems, pc[k].nrows * re);
          ck_assert_int_eq(pc[k].first_row % block, 0);
          ck_assert_int_eq(pc[k].nrows % block, 0);
          for (int64_t x = 0; x < pc[k].nelems; x++) {
            int64_t g = s + pc[k].offset + x;
            ck_assert_int_eq(g, off[pc[k].tensor] + pc[k].elem_begin + x);
            int owner;
            ck_assert_int_eq(dbuf_layout_owner_of(l, g, &owner), 0);
            ck_assert_int_eq(owner, r);
            seen[g]++;
          }
        }
        free(pc);
      }
      for (int64_t i = 0; i < n; i++) {
        int64_t numel = dbuf_tensors_numel(t, i);
        for (int64_t x = 0; x < numel; x++)
          ck_assert_int_eq(seen[off[i] + x], 1);
        int64_t np, rows = 0;
        dbuf_piece_t pc[16];
        ck_assert_int_eq(dbuf_layout_tensor_pieces(l, i, pc, 16, &np), 0);
        for (int64_t k = 0; k < np && k < 16; k++) {
          ck_assert_int_eq(pc[k].first_row, rows);
          rows += pc[k].nrows;
        }
        ck_assert_int_eq(rows, numel ? dbuf_tensors_rows(t, i) : 0);
      }
      int64_t covered = 0;
      for (int64_t g = 0; g < size; g++)
        covered += seen[g];
      ck_assert_int_eq(covered, dbuf_tensors_total(t));
      if (kind == DBUF_LAYOUT_PADDED || kind == DBUF_LAYOUT_COMPACT) {
        int64_t seg = size / p.nranks;
        ck_assert_int_eq(seg % dbuf_layout_chunk_size(l), 0);
        for (int r = 0; r <= p.nranks; r++)
          ck_assert_int_eq(dbuf_layout_range(l)[r], seg * r);
      } else {
        ck_assert_int_eq(size, dbuf_tensors_total(t));
      }
      free(seen);
      dbuf_layout_destroy(l);
    }
    dbuf_tensors_destroy(t);
  }
}
END_TEST

/*
 * Hostile layouts from files or the wire (issue 8): every value at the
 * int64 limits.  Each is either refused by dbuf_layout_from_parts() or
 * validated into exactly the listed violations, and every query then
 * answers without overflowing (the UBSan build halts on any overflow).
 */
typedef struct {
  const char *what;
  dbuf_layout_kind_t kind;
  int64_t block, chunk, size;
  int nt;                 /* tensors t0..: 1-D or 2-D */
  int64_t dims[2][2];     /* {rows, row_elems}; row_elems 0: 1-D */
  int64_t offsets[2];
  int64_t ranks[2];       /* dp 2 */
  int owners;             /* tensor kind: owners {0, 1} */
  int from_parts_rc;      /* 0, or the refusal */
  int kinds[4];           /* violations expected (0-terminated), in order */
  const char *needle;     /* in the first message (or the refusal) */
} hostile_t;

static const hostile_t hostile[] = {
    {"block x row size past INT64_MAX (SIGFPE before)", DBUF_LAYOUT_UNPADDED,
     INT64_C(4294967296), 0, INT64_C(8589934592), 1,
     {{2, INT64_C(4294967296)}}, {0}, {0, 1}, 0, DBUF_EOVERFLOW, {0},
     "tensor t0: block size 4294967296 x row size 4294967296 overflows"},
    {"empty tensor with a huge block", DBUF_LAYOUT_PADDED, INT64_MAX, 1, 0, 1,
     {{0, 2}}, {0}, {0, 0}, 0, DBUF_EOVERFLOW, {0}, "tensor t0: block size"},
    {"rank offset INT64_MIN", DBUF_LAYOUT_PADDED, 1, 1, 8, 1, {{8, 0}}, {0},
     {0, INT64_MIN}, 0, 0, {DBUF_VIOL_RANGE, 0},
     "rank 0: segment [0, -9223372036854775808) ends before it starts"},
    {"rank offset INT64_MAX", DBUF_LAYOUT_UNPADDED, 1, 0, 8, 1, {{8, 0}}, {0},
     {0, INT64_MAX}, 0, 0, {DBUF_VIOL_RANGE, 0},
     "rank 1: segment [9223372036854775807, 8) ends before it starts"},
    {"shape [INT64_MAX] at offset 1", DBUF_LAYOUT_UNPADDED, 1, 0, 8, 1,
     {{INT64_MAX, 0}}, {1}, {0, 4}, 0, 0,
     {DBUF_VIOL_BOUNDS, DBUF_VIOL_BOUNDS, 0},
     "tensor t0: [1, +9223372036854775807) is outside the buffer [0, 8)"},
    {"offset INT64_MAX with an owner", DBUF_LAYOUT_TENSOR, 1, 0, 8, 2,
     {{4, 0}, {4, 0}}, {INT64_MAX, 4}, {0, 4}, 1, 0,
     {DBUF_VIOL_BOUNDS, 0},
     "tensor t0: [9223372036854775807, +4) is outside the buffer [0, 8)"},
    {"offset INT64_MIN", DBUF_LAYOUT_UNPADDED, 1, 0, 8, 2, {{4, 0}, {4, 0}},
     {INT64_MIN, 4}, {0, 4}, 0, 0, {DBUF_VIOL_BOUNDS, 0},
     "tensor t0: [-9223372036854775808, +4) is outside the buffer [0, 8)"},
    {"buffer smaller than its tensors", DBUF_LAYOUT_UNPADDED, 1, 0, 4, 1,
     {{8, 0}}, {0}, {0, 2}, 0, 0, {DBUF_VIOL_BOUNDS, DBUF_VIOL_BOUNDS, 0},
     "tensor t0: [0, +8) is outside the buffer [0, 4)"},
    {"size INT64_MAX, cut in a row", DBUF_LAYOUT_UNPADDED, 1, 0, INT64_MAX, 1,
     {{1, INT64_MAX}}, {0}, {0, 5}, 0, 0, {DBUF_VIOL_CUT, 0},
     "rank 1: boundary 5 cuts tensor t0 inside row 0"},
};

START_TEST(test_validate_hostile)
{
  const hostile_t *h = &hostile[_i];
  dbuf_tensors_t *t;
  dbuf_layout_t *l = NULL;
  dbuf_diag_t d;
  viol_list_t vl = {{0}, 0};
  int own[2] = {0, 1};

  ck_assert_int_eq(dbuf_tensors_create(&t), 0);
  for (int i = 0; i < h->nt; i++) {
    char name[16];
    snprintf(name, sizeof name, "t%d", i);
    ck_assert_int_eq(dbuf_tensors_add(t, name, h->dims[i][1] ? 2 : 1, h->dims[i], &d), 0);
  }
  int rc = dbuf_layout_from_parts(t, h->kind, 2, h->block, h->chunk, h->size,
                                  h->offsets, h->ranks, h->owners ? own : NULL,
                                  &l, &d);
  ck_assert_msg(rc == h->from_parts_rc, "%s: from_parts %s (%s), want %s",
                h->what, dbuf_err_name(rc), rc ? d.msg : "",
                dbuf_err_name(h->from_parts_rc));
  if (rc != 0) {
    ck_assert_msg(strstr(d.msg, h->needle) != NULL, "%s: '%s' lacks '%s'",
                  h->what, d.msg, h->needle);
    ck_assert_ptr_null(l);
    dbuf_tensors_destroy(t);
    return;
  }
  ck_assert_int_eq(dbuf_layout_validate(l, collect, &vl, NULL, &d), DBUF_ELAYOUT);
  int nk = 0;
  while (h->kinds[nk] != 0)
    nk++;
  ck_assert_msg(vl.n == nk, "%s: %d violations, want %d (first: %s)", h->what,
                vl.n, nk, d.msg);
  for (int k = 0; k < nk; k++)
    ck_assert_msg(vl.kinds[k] == h->kinds[k], "%s: violation %d is kind %d, want %d",
                  h->what, k, vl.kinds[k], h->kinds[k]);
  ck_assert_msg(strstr(d.msg, h->needle) != NULL, "%s: '%s' lacks '%s'", h->what,
                d.msg, h->needle);

  /* The queries on the same layout: defined answers, no overflow. */
  dbuf_layout_stats_t st;
  ck_assert_int_eq(dbuf_layout_stats(l, &st), 0);
  ck_assert(st.padding >= 0 && st.gap_elems >= 0);
  for (int r = 0; r < 2; r++) {
    dbuf_piece_t pc[4];
    int64_t np;
    ck_assert_int_eq(dbuf_layout_rank_pieces(l, r, pc, 4, &np), 0);
    for (int64_t k = 0; k < np && k < 4; k++)
      ck_assert(pc[k].nelems > 0 && pc[k].offset >= 0);
  }
  for (int i = 0; i < h->nt; i++) {
    int64_t np;
    ck_assert_int_eq(dbuf_layout_tensor_pieces(l, i, NULL, 0, &np), 0);
  }
  int64_t probe[] = {0, 1, h->size / 2, h->size - 1};
  for (size_t k = 0; k < sizeof probe / sizeof probe[0]; k++) {
    int64_t id;
    int owner;
    if (probe[k] < 0 || probe[k] >= h->size)
      continue;
    ck_assert_int_eq(dbuf_layout_tensor_at(l, probe[k], &id), 0);
    ck_assert_int_eq(dbuf_layout_owner_of(l, probe[k], &owner), 0);
  }
  dbuf_layout_destroy(l);
  dbuf_tensors_destroy(t);
}
END_TEST

/* ------------------------------------------------------------------ */
/* dbuf_layout_from_parts: one bad argument at a time                   */

/* The base call: seed tensors, unpadded, 2 ranks {0, 24}, size 52, offsets
 * packed {0, 12, 28, 44, 46}; each case changes one argument. */
typedef struct {
  const char *what;
  int null_tensors, null_out, null_ranks, null_offsets;
  int kind, nranks;
  int64_t block, chunk, size, rank0;
  int owner0; /* owners {owner0, 0, 0, 0, 0}; -2: no owners */
  int want;
  const char *needle; /* in the message, or NULL */
} parts_case_t;

static const parts_case_t parts_cases[] = {
    {"valid", 0, 0, 0, 0, DBUF_LAYOUT_UNPADDED, 2, 1, 0, 52, 0, -2, 0, NULL},
    {"valid with owners", 0, 0, 0, 0, DBUF_LAYOUT_TENSOR, 2, 1, 0, 52, 0, 1, 0, NULL},
    {"NULL tensors", 1, 0, 0, 0, DBUF_LAYOUT_UNPADDED, 2, 1, 0, 52, 0, -2, DBUF_EINVAL,
     "NULL argument"},
    {"NULL out", 0, 1, 0, 0, DBUF_LAYOUT_UNPADDED, 2, 1, 0, 52, 0, -2, DBUF_EINVAL,
     "NULL argument"},
    {"NULL rank offsets", 0, 0, 1, 0, DBUF_LAYOUT_UNPADDED, 2, 1, 0, 52, 0, -2,
     DBUF_EINVAL, "NULL argument"},
    {"NULL offsets", 0, 0, 0, 1, DBUF_LAYOUT_UNPADDED, 2, 1, 0, 52, 0, -2, DBUF_EINVAL,
     "NULL argument"},
    {"kind 0", 0, 0, 0, 0, 0, 2, 1, 0, 52, 0, -2, DBUF_EINVAL, "unknown layout kind 0"},
    {"kind 5", 0, 0, 0, 0, 5, 2, 1, 0, 52, 0, -2, DBUF_EINVAL, "unknown layout kind 5"},
    {"nranks 0", 0, 0, 0, 0, DBUF_LAYOUT_UNPADDED, 0, 1, 0, 52, 0, -2, DBUF_ENRANKS,
     "got 0"},
    {"nranks -3", 0, 0, 0, 0, DBUF_LAYOUT_UNPADDED, -3, 1, 0, 52, 0, -2, DBUF_ENRANKS,
     "got -3"},
    {"block 0", 0, 0, 0, 0, DBUF_LAYOUT_UNPADDED, 2, 0, 0, 52, 0, -2, DBUF_EINVAL,
     "block size must be positive, got 0"},
    {"size -1", 0, 0, 0, 0, DBUF_LAYOUT_UNPADDED, 2, 1, 0, -1, 0, -2, DBUF_ELAYOUT,
     "size is negative (-1)"},
    {"first rank offset 4", 0, 0, 0, 0, DBUF_LAYOUT_UNPADDED, 2, 1, 0, 52, 4, -2,
     DBUF_ELAYOUT, "rank 0: segment starts at 4, not 0"},
    {"first rank offset -1", 0, 0, 0, 0, DBUF_LAYOUT_UNPADDED, 2, 1, 0, 52, -1, -2,
     DBUF_ELAYOUT, "rank 0: segment starts at -1, not 0"},
    {"chunk -1", 0, 0, 0, 0, DBUF_LAYOUT_UNPADDED, 2, 1, -1, 52, 0, -2, DBUF_ELAYOUT,
     "chunk size -1 is not positive"},
    {"padded chunk 0", 0, 0, 0, 0, DBUF_LAYOUT_PADDED, 2, 1, 0, 52, 0, -2, DBUF_ELAYOUT,
     "chunk size 0 is not positive"},
    {"block x row past INT64_MAX", 0, 0, 0, 0, DBUF_LAYOUT_UNPADDED, 2,
     INT64_C(1) << 62, 0, 52, 0, -2, DBUF_EOVERFLOW,
     "tensor P0: block size 4611686018427387904 x row size 6 overflows"},
    {"owner -1", 0, 0, 0, 0, DBUF_LAYOUT_TENSOR, 2, 1, 0, 52, 0, -1, DBUF_EOWNER,
     "tensor P0: owner -1 out of range [0, 2)"},
    {"owner nranks", 0, 0, 0, 0, DBUF_LAYOUT_TENSOR, 2, 1, 0, 52, 0, 2, DBUF_EOWNER,
     "tensor P0: owner 2 out of range [0, 2)"},
};

START_TEST(test_from_parts_args)
{
  const parts_case_t *c = &parts_cases[_i];
  dbuf_tensors_t *t = seed_tensors();
  const int64_t offsets[5] = {0, 12, 28, 44, 46};
  int64_t ranks[2] = {c->rank0, 24};
  int owners[5] = {c->owner0, 0, 0, 0, 0};
  dbuf_layout_t *sentinel = (dbuf_layout_t *)&ranks, *l = sentinel;
  dbuf_diag_t d;
  dbuf_diag_clear(&d);
  int rc = dbuf_layout_from_parts(c->null_tensors ? NULL : t, (dbuf_layout_kind_t)c->kind,
                                  c->nranks, c->block, c->chunk, c->size,
                                  c->null_offsets ? NULL : offsets,
                                  c->null_ranks ? NULL : ranks,
                                  c->owner0 == -2 ? NULL : owners,
                                  c->null_out ? NULL : &l, &d);
  ck_assert_msg(rc == c->want, "%s: %s (%s), want %s", c->what, dbuf_err_name(rc), d.msg,
                dbuf_err_name(c->want));
  if (c->want != 0) {
    ck_assert_msg(l == sentinel, "%s: out written on failure", c->what);
    ck_assert_msg(d.code == c->want, "%s: diag code %d", c->what, d.code);
    ck_assert_msg(strstr(d.msg, c->needle) != NULL, "%s: '%s' lacks '%s'", c->what, d.msg,
                  c->needle);
  } else {
    ck_assert_int_eq(dbuf_layout_nranks(l), 2);
    ck_assert_int_eq(dbuf_layout_range(l)[1], 24);
    ck_assert_int_eq(dbuf_layout_range(l)[2], 52);
    ck_assert_int_eq(dbuf_layout_offsets(l)[4], 46);
    dbuf_layout_destroy(l);
  }
  dbuf_tensors_destroy(t);
}
END_TEST

/* The layout JSON reader goes through from_parts: a file whose first rank
 * offset is not 0 is refused with the file named. */
START_TEST(test_json_first_rank_offset)
{
  const char *doc = "{\"layout\": \"unpadded\", \"dp_size\": 2, \"size\": 8, "
                    "\"rank_offsets\": [2, 4], \"tensors\": [{\"name\": \"a\", "
                    "\"shape\": [8], \"offset\": 0}]}";
  dbuf_layout_t *l = NULL;
  dbuf_diag_t d;
  int rc = dbuf_layout_from_json("x.json", doc, strlen(doc), &l, &d);
  ck_assert_int_eq(rc, DBUF_ELAYOUT);
  ck_assert_ptr_null(l);
  ck_assert_str_eq(d.msg, "x.json: rank 0: segment starts at 2, not 0");
}
END_TEST

/* ------------------------------------------------------------------ */
/* The arithmetic helpers, against values worked out by hand           */

START_TEST(test_rank_segments)
{
  /* Six segments cut at 0, 8, 16, 24, 32, 40, size 52 (not validated). */
  dbuf_tensors_t *t = seed_tensors();
  const int64_t offsets[5] = {0, 12, 28, 44, 46}, cuts[6] = {0, 8, 16, 24, 32, 40};
  dbuf_layout_t *l;
  int64_t s = -1, e = -1;
  int first = -1, nseg = -1;
  ck_assert_int_eq(dbuf_layout_from_parts(t, DBUF_LAYOUT_UNPADDED, 6, 1, 0, 52, offsets,
                                          cuts, NULL, &l, NULL),
                   0);
  /* 3 ranks of 2 segments: rank 1 holds segments 2 and 3, [16, 32). */
  ck_assert_int_eq(dbuf_layout_rank_segments(l, 3, 1, &s, &e, &first, &nseg), 0);
  ck_assert_int_eq(s, 16);
  ck_assert_int_eq(e, 32);
  ck_assert_int_eq(first, 2);
  ck_assert_int_eq(nseg, 2);
  /* 2 ranks of 3: rank 1 holds segments 3..5, [24, size 52). */
  ck_assert_int_eq(dbuf_layout_rank_segments(l, 2, 1, &s, &e, NULL, NULL), 0);
  ck_assert_int_eq(s, 24);
  ck_assert_int_eq(e, 52);
  /* One rank holds everything; 6 ranks are the segments themselves. */
  ck_assert_int_eq(dbuf_layout_rank_segments(l, 1, 0, &s, &e, &first, &nseg), 0);
  ck_assert_int_eq(s, 0);
  ck_assert_int_eq(e, 52);
  ck_assert_int_eq(first, 0);
  ck_assert_int_eq(nseg, 6);
  ck_assert_int_eq(dbuf_layout_rank_segments(l, 6, 5, &s, &e, &first, &nseg), 0);
  ck_assert_int_eq(s, 40);
  ck_assert_int_eq(e, 52);
  ck_assert_int_eq(first, 5);
  ck_assert_int_eq(nseg, 1);
  /* Errors; the outputs keep their last values. */
  ck_assert_int_eq(dbuf_layout_rank_segments(l, 4, 0, &s, &e, NULL, NULL), DBUF_ENRANKS);
  ck_assert_int_eq(dbuf_layout_rank_segments(l, 0, 0, &s, &e, NULL, NULL), DBUF_ENRANKS);
  ck_assert_int_eq(dbuf_layout_rank_segments(l, -2, 0, &s, &e, NULL, NULL), DBUF_ENRANKS);
  ck_assert_int_eq(dbuf_layout_rank_segments(l, 12, 0, &s, &e, NULL, NULL), DBUF_ENRANKS);
  ck_assert_int_eq(dbuf_layout_rank_segments(l, 3, 3, &s, &e, NULL, NULL), DBUF_ERANGE);
  ck_assert_int_eq(dbuf_layout_rank_segments(l, 3, -1, &s, &e, NULL, NULL), DBUF_ERANGE);
  ck_assert_int_eq(dbuf_layout_rank_segments(NULL, 3, 0, &s, &e, NULL, NULL), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_layout_rank_segments(l, 3, 0, NULL, &e, NULL, NULL), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_layout_rank_segments(l, 3, 0, &s, NULL, NULL, NULL), DBUF_EINVAL);
  ck_assert_int_eq(s, 40);
  ck_assert_int_eq(e, 52);
  dbuf_layout_destroy(l);
  dbuf_tensors_destroy(t);
}
END_TEST

/* One query of the rows of a run: dbuf_layout_piece_rows() on the seed
 * tensors (a = elem_begin, b = nelems), or dbuf_layout_rows_in() on the seed
 * padded layout (a = start, b = end); the rows worked out by hand. */
typedef struct {
  const char *what;
  int in_layout;
  int64_t tensor, a, b;
  int want;
  dbuf_rows_t r; /* elem_begin, nelems, first_row, first_col, nrows, cuts */
} rows_case_t;

static const rows_case_t rows_cases[] = {
    /* P1: 4 rows of 4. */
    {"P1 elements 6..12: row 1 from column 2 to row 3 column 0", 0, 1, 6, 7, 0,
     {6, 7, 1, 2, 3, 1, 1}},
    {"P1 elements 4..11: rows 1 and 2 whole", 0, 1, 4, 8, 0, {4, 8, 1, 0, 2, 0, 0}},
    {"P1 element 15: last column of row 3", 0, 1, 15, 1, 0, {15, 1, 3, 3, 1, 1, 0}},
    {"P1 elements 1..2: inside row 0", 0, 1, 1, 2, 0, {1, 2, 0, 1, 1, 1, 1}},
    {"P1 empty run at its end", 0, 1, 16, 0, 0, {16, 0, 4, 0, 0, 0, 0}},
    {"P1 empty run inside row 1", 0, 1, 5, 0, 0, {5, 0, 1, 1, 0, 0, 0}},
    {"P0 whole: 2 rows of 6", 0, 0, 0, 12, 0, {0, 12, 0, 0, 2, 0, 0}},
    {"run past the tensor", 0, 1, 10, 7, DBUF_ERANGE, {0}},
    {"begin past the tensor", 0, 1, 17, 0, DBUF_ERANGE, {0}},
    {"negative begin", 0, 1, -1, 1, DBUF_ERANGE, {0}},
    {"negative count", 0, 1, 0, -1, DBUF_ERANGE, {0}},
    {"count INT64_MAX", 0, 1, 1, INT64_MAX, DBUF_ERANGE, {0}},
    {"tensor 5", 0, 5, 0, 0, DBUF_ERANGE, {0}},
    {"tensor -1", 0, -1, 0, 0, DBUF_ERANGE, {0}},
    /* The seed padded layout: P1 at 12, P2 at 32, segments of 12. */
    {"P1 in rank 1 [12, 24): rows 0..2", 1, 1, 12, 24, 0, {0, 12, 0, 0, 3, 0, 0}},
    {"P1 in [14, 27): rows 0..3 cut at both ends", 1, 1, 14, 27, 0,
     {2, 13, 0, 2, 4, 1, 1}},
    {"P1 in rank 2 [24, 36): row 3", 1, 1, 24, 36, 0, {12, 4, 3, 0, 1, 0, 0}},
    {"P1 in [30, 40): after it", 1, 1, 30, 40, 0, {0}},
    {"P1 in [0, 12): before it", 1, 1, 0, 12, 0, {0}},
    {"P1 in [20, 20): empty range", 1, 1, 20, 20, 0, {0}},
    {"P2 in the whole int64 line", 1, 2, INT64_MIN, INT64_MAX, 0, {0, 16, 0, 0, 4, 0, 0}},
    {"start after end", 1, 1, 24, 12, DBUF_EINVAL, {0}},
    {"layout tensor 5", 1, 5, 0, 60, DBUF_ERANGE, {0}},
    {"layout tensor -1", 1, -1, 0, 60, DBUF_ERANGE, {0}},
};

static void
assert_rows(const char *what, const dbuf_rows_t *got, const dbuf_rows_t *want)
{
  const int64_t g[7] = {got->elem_begin, got->nelems, got->first_row, got->first_col,
                        got->nrows, got->cut_first, got->cut_last};
  const int64_t w[7] = {want->elem_begin, want->nelems, want->first_row, want->first_col,
                        want->nrows, want->cut_first, want->cut_last};
  static const char *const field[7] = {"elem_begin", "nelems", "first_row", "first_col",
                                       "nrows", "cut_first", "cut_last"};
  for (int k = 0; k < 7; k++)
    ck_assert_msg(g[k] == w[k], "%s: %s %lld, want %lld", what, field[k], (long long)g[k],
                  (long long)w[k]);
}

START_TEST(test_rows)
{
  const rows_case_t *c = &rows_cases[_i];
  dbuf_tensors_t *t = seed_tensors();
  dbuf_layout_t *l = seed_padded();
  dbuf_rows_t r, keep;
  memset(&r, 0x5a, sizeof r);
  keep = r;
  int rc = c->in_layout ? dbuf_layout_rows_in(l, c->tensor, c->a, c->b, &r)
                        : dbuf_layout_piece_rows(t, c->tensor, c->a, c->b, &r);
  ck_assert_msg(rc == c->want, "%s: %s, want %s", c->what, dbuf_err_name(rc),
                dbuf_err_name(c->want));
  if (rc == 0)
    assert_rows(c->what, &r, &c->r);
  else
    ck_assert_msg(memcmp(&r, &keep, sizeof r) == 0, "%s: rows written on failure", c->what);
  dbuf_layout_destroy(l);
  dbuf_tensors_destroy(t);
}
END_TEST

START_TEST(test_rows_args)
{
  dbuf_tensors_t *t = seed_tensors();
  dbuf_layout_t *l = seed_padded();
  dbuf_rows_t r;
  ck_assert_int_eq(dbuf_layout_piece_rows(NULL, 1, 0, 0, &r), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_layout_piece_rows(t, 1, 0, 0, NULL), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_layout_rows_in(NULL, 1, 0, 60, &r), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_layout_rows_in(l, 1, 0, 60, NULL), DBUF_EINVAL);
  dbuf_layout_destroy(l);
  dbuf_tensors_destroy(t);
}
END_TEST

/* A 1-D tensor has rows of one element; a tensor of INT64_MAX - 1 elements
 * (R rows of 3) has its last row at R - 1, and no sum overflows. */
START_TEST(test_rows_limits)
{
  const int64_t v[1] = {10}, big[2] = {INT64_C(3074457345618258602), 3};
  const dbuf_rows_t want_v = {3, 4, 3, 0, 4, 0, 0};
  const dbuf_rows_t want_last = {INT64_MAX - 2, 1, big[0] - 1, 2, 1, 1, 0};
  const dbuf_rows_t want_all = {1, INT64_MAX - 2, 0, 1, big[0], 1, 0};
  dbuf_tensors_t *t;
  dbuf_rows_t r;
  ck_assert_int_eq(dbuf_tensors_create(&t), 0);
  ck_assert_int_eq(dbuf_tensors_add(t, "v", 1, v, NULL), 0);
  ck_assert_int_eq(dbuf_layout_piece_rows(t, 0, 3, 4, &r), 0);
  assert_rows("1-D", &r, &want_v);
  dbuf_tensors_destroy(t);
  ck_assert_int_eq(dbuf_tensors_create(&t), 0);
  ck_assert_int_eq(dbuf_tensors_add(t, "big", 2, big, NULL), 0);
  ck_assert_int_eq(dbuf_layout_piece_rows(t, 0, INT64_MAX - 2, 1, &r), 0);
  assert_rows("last element", &r, &want_last);
  ck_assert_int_eq(dbuf_layout_piece_rows(t, 0, 1, INT64_MAX - 2, &r), 0);
  assert_rows("all but the first", &r, &want_all);
  ck_assert_int_eq(dbuf_layout_piece_rows(t, 0, 2, INT64_MAX - 2, &r), DBUF_ERANGE);
  dbuf_tensors_destroy(t);
}
END_TEST

START_TEST(test_rows_in_outside_buffer)
{
  /* A tensor past the end of the buffer (an invalid layout) holds no run. */
  dbuf_tensors_t *t;
  const int64_t a[1] = {8}, offsets[2] = {0, INT64_MAX - 2}, cuts[1] = {0};
  dbuf_layout_t *l;
  dbuf_rows_t r;
  ck_assert_int_eq(dbuf_tensors_create(&t), 0);
  ck_assert_int_eq(dbuf_tensors_add(t, "a", 1, a, NULL), 0);
  ck_assert_int_eq(dbuf_tensors_add(t, "b", 1, a, NULL), 0);
  ck_assert_int_eq(dbuf_layout_from_parts(t, DBUF_LAYOUT_UNPADDED, 1, 1, 0, 8, offsets,
                                          cuts, NULL, &l, NULL),
                   0);
  ck_assert_int_eq(dbuf_layout_rows_in(l, 1, 0, INT64_MAX, &r), 0);
  ck_assert_int_eq(r.nelems, 0);
  ck_assert_int_eq(r.nrows, 0);
  dbuf_layout_destroy(l);
  dbuf_tensors_destroy(t);
}
END_TEST

static void
assert_piece(const dbuf_piece_t *pc, int64_t tensor, int rank, int64_t b, int64_t n,
             int64_t row, int64_t nrows, int whole, int64_t offset)
{
  ck_assert_int_eq(pc->tensor, tensor);
  ck_assert_int_eq(pc->rank, rank);
  ck_assert_int_eq(pc->elem_begin, b);
  ck_assert_int_eq(pc->nelems, n);
  ck_assert_int_eq(pc->first_row, row);
  ck_assert_int_eq(pc->nrows, nrows);
  ck_assert_int_eq(pc->whole_rows, whole);
  ck_assert_int_eq(pc->offset, offset);
}

START_TEST(test_piece_clip)
{
  dbuf_layout_t *l = seed_padded();
  dbuf_piece_t pc[4], out;
  int64_t n;
  /* Rank 1 [12, 24) holds P1 elements 0..11 at offset 0. */
  ck_assert_int_eq(dbuf_layout_rank_pieces(l, 1, pc, 4, &n), 0);
  ck_assert_int_eq(n, 1);
  assert_piece(&pc[0], 1, 1, 0, 12, 0, 3, 1, 0);
  /* [14, 21): elements 2..8, rows 0..2, offset 2 in the segment. */
  ck_assert_int_eq(dbuf_layout_piece_clip(l, &pc[0], 14, 21, &out), 0);
  assert_piece(&out, 1, 1, 2, 7, 0, 3, 0, 2);
  /* [16, 20): row 1 exactly. */
  ck_assert_int_eq(dbuf_layout_piece_clip(l, &pc[0], 16, 20, &out), 0);
  assert_piece(&out, 1, 1, 4, 4, 1, 1, 1, 4);
  /* A range holding the piece leaves it as it is. */
  ck_assert_int_eq(dbuf_layout_piece_clip(l, &pc[0], INT64_MIN, INT64_MAX, &out), 0);
  assert_piece(&out, 1, 1, 0, 12, 0, 3, 1, 0);
  /* Ranges after and before the piece: empty, clamped to its ends. */
  ck_assert_int_eq(dbuf_layout_piece_clip(l, &pc[0], 30, 40, &out), 0);
  assert_piece(&out, 1, 1, 12, 0, 3, 0, 1, 12);
  ck_assert_int_eq(dbuf_layout_piece_clip(l, &pc[0], 0, 12, &out), 0);
  assert_piece(&out, 1, 1, 0, 0, 0, 0, 1, 0);
  /* out may be the piece itself. */
  out = pc[0];
  ck_assert_int_eq(dbuf_layout_piece_clip(l, &out, 20, 24, &out), 0);
  assert_piece(&out, 1, 1, 8, 4, 2, 1, 1, 8);
  /* Rank 2 [24, 36): P1 row 3 (offset 0), P3 (offset 4), P2 row 0 (offset 8). */
  ck_assert_int_eq(dbuf_layout_rank_pieces(l, 2, pc, 4, &n), 0);
  ck_assert_int_eq(n, 3);
  ck_assert_int_eq(dbuf_layout_piece_clip(l, &pc[2], 33, 34, &out), 0);
  assert_piece(&out, 2, 2, 1, 1, 0, 1, 0, 9);
  /* Pieces that are not pieces of this layout; bad arguments. */
  dbuf_piece_t bad = pc[2];
  bad.rank = 5;
  ck_assert_int_eq(dbuf_layout_piece_clip(l, &bad, 0, 60, &out), DBUF_ERANGE);
  bad = pc[2];
  bad.tensor = 7;
  ck_assert_int_eq(dbuf_layout_piece_clip(l, &bad, 0, 60, &out), DBUF_ERANGE);
  bad = pc[2];
  bad.nelems = 5; /* P2 row 0 and one more element: past the segment */
  ck_assert_int_eq(dbuf_layout_piece_clip(l, &bad, 0, 60, &out), DBUF_ERANGE);
  bad = pc[2];
  bad.offset = 13;
  ck_assert_int_eq(dbuf_layout_piece_clip(l, &bad, 0, 60, &out), DBUF_ERANGE);
  bad = pc[2];
  bad.elem_begin = 1; /* not where the offset puts it */
  ck_assert_int_eq(dbuf_layout_piece_clip(l, &bad, 0, 60, &out), DBUF_ERANGE);
  bad = pc[2];
  bad.offset = INT64_MAX;
  ck_assert_int_eq(dbuf_layout_piece_clip(l, &bad, 0, 60, &out), DBUF_ERANGE);
  ck_assert_int_eq(dbuf_layout_piece_clip(l, &pc[2], 34, 33, &out), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_layout_piece_clip(NULL, &pc[2], 0, 60, &out), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_layout_piece_clip(l, NULL, 0, 60, &out), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_layout_piece_clip(l, &pc[2], 0, 60, NULL), DBUF_EINVAL);
  dbuf_layout_destroy(l);
}
END_TEST

START_TEST(test_check_owner)
{
  dbuf_tensors_t *t = seed_tensors();
  dbuf_diag_t d;
  ck_assert_int_eq(dbuf_layout_check_owner(t, 1, 0, 5, &d), 0);
  ck_assert_int_eq(dbuf_layout_check_owner(t, 1, 4, 5, &d), 0);
  ck_assert_int_eq(dbuf_layout_check_owner(t, 1, 5, 5, &d), DBUF_EOWNER);
  ck_assert_str_eq(d.msg, "tensor P1: owner 5 out of range [0, 5)");
  ck_assert_int_eq(dbuf_layout_check_owner(t, 4, -1, 5, &d), DBUF_EOWNER);
  ck_assert_str_eq(d.msg, "tensor P4: owner -1 out of range [0, 5)");
  /* 2^32 would be 0 once narrowed to int: it is checked before. */
  ck_assert_int_eq(dbuf_layout_check_owner(t, 0, INT64_C(1) << 32, 5, NULL), DBUF_EOWNER);
  ck_assert_int_eq(dbuf_layout_check_owner(t, 0, INT64_MAX, 1, &d), DBUF_EOWNER);
  ck_assert_str_eq(d.msg, "tensor P0: owner 9223372036854775807 out of range [0, 1)");
  ck_assert_int_eq(dbuf_layout_check_owner(t, 0, 0, 0, NULL), DBUF_ENRANKS);
  ck_assert_int_eq(dbuf_layout_check_owner(t, 5, 0, 5, NULL), DBUF_ERANGE);
  ck_assert_int_eq(dbuf_layout_check_owner(t, -1, 0, 5, NULL), DBUF_ERANGE);
  ck_assert_int_eq(dbuf_layout_check_owner(NULL, 0, 0, 5, NULL), DBUF_EINVAL);
  dbuf_tensors_destroy(t);
}
END_TEST

/* The chunk (LCM of block x row sizes) of tensors that repeat a few shapes:
 * rows of 6, 4, 6, 10 and 4 elements, block 2: LCM(12, 8, 20) = 120, with
 * segments its multiples.  A chunk past 64 bits names the first tensor
 * that takes it there (b, after three a's and a c of row 2): the
 * message of the tensor loop, also when the shapes are counted once each. */
START_TEST(test_chunk_shared_shapes)
{
  dbuf_tensors_t *t;
  dbuf_layout_t *l = NULL;
  dbuf_layout_params_t p;
  dbuf_diag_t d;
  const int64_t rows[] = {6, 4, 6, 10, 4};
  ck_assert_int_eq(dbuf_tensors_create(&t), 0);
  for (int i = 0; i < 5; i++) {
    char name[8];
    int64_t dims[2] = {4, rows[i]};
    snprintf(name, sizeof name, "w%d", i);
    ck_assert_int_eq(dbuf_tensors_add(t, name, 2, dims, NULL), 0);
  }
  dbuf_layout_params_init(&p);
  p.nranks = 2;
  p.block_size = 2;
  ck_assert_int_eq(dbuf_layout_build(t, &p, &l, NULL), 0);
  ck_assert_int_eq(dbuf_layout_chunk_size(l), 120);
  ck_assert_int_eq(dbuf_layout_range(l)[1] % 120, 0);
  dbuf_layout_destroy(l);
  dbuf_tensors_destroy(t);
  /* Two primes past 2^32: their product passes 2^63. */
  const struct { const char *name; int64_t row; } big[] = {
      {"a0", 4294967311}, {"a1", 4294967311}, {"c", 2}, {"a2", 4294967311}, {"b", 4294967357}};
  ck_assert_int_eq(dbuf_tensors_create(&t), 0);
  for (int i = 0; i < 5; i++) {
    int64_t dims[2] = {1, big[i].row};
    ck_assert_int_eq(dbuf_tensors_add(t, big[i].name, 2, dims, NULL), 0);
  }
  p.block_size = 1;
  l = NULL;
  dbuf_diag_clear(&d);
  ck_assert_int_eq(dbuf_layout_build(t, &p, &l, &d), DBUF_EOVERFLOW);
  ck_assert_str_eq(d.msg, "tensor b: chunk size (LCM of block x row sizes) overflows 64 bits");
  ck_assert_ptr_null(l);
  dbuf_tensors_destroy(t);
}
END_TEST

/* Offsets that rise with the ids keep no order array: the queries read the
 * identity, dbuf_layout_order() makes it once (the same array on every
 * call) and the lower bound finds positions in it.  Equal offsets (empty
 * tensors) count as rising; one offset lower than the one before does not. */
START_TEST(test_order_identity)
{
  dbuf_tensors_t *t;
  dbuf_layout_t *l = NULL;
  const int64_t rows[] = {2, 0, 3, 1};
  const int64_t off[] = {0, 8, 8, 20}, down[] = {0, 8, 8, 4};
  const int64_t range[] = {0, 12};
  ck_assert_int_eq(dbuf_tensors_create(&t), 0);
  for (int i = 0; i < 4; i++) {
    char name[8];
    int64_t dims[2] = {rows[i], 4};
    snprintf(name, sizeof name, "t%d", i);
    ck_assert_int_eq(dbuf_tensors_add(t, name, 2, dims, NULL), 0);
  }
  ck_assert_int_eq(dbuf_layout_from_parts(t, DBUF_LAYOUT_UNPADDED, 1, 1, 0, 24, off, range,
                                          NULL, &l, NULL), 0);
  ck_assert_ptr_null(l->order);
  ck_assert_ptr_null(dbuf__layout_order_or_null(l));
  ck_assert_int_eq(dbuf_layout_order_lower(l, 8), 1);
  ck_assert_int_eq(dbuf_layout_order_lower(l, 9), 3);
  ck_assert_int_eq(dbuf_layout_order_lower(l, 21), 4);
  ck_assert_int_eq(dbuf_layout_validate(l, NULL, NULL, NULL, NULL), 0);
  const int64_t *o = dbuf_layout_order(l);
  ck_assert_ptr_nonnull(o);
  for (int64_t p = 0; p < 4; p++)
    ck_assert_int_eq(o[p], p);
  ck_assert_ptr_eq(dbuf_layout_order(l), o);
  dbuf_layout_destroy(l);
  l = NULL;
  ck_assert_int_eq(dbuf_layout_from_parts(t, DBUF_LAYOUT_UNPADDED, 1, 1, 0, 24, down, range,
                                          NULL, &l, NULL), 0);
  ck_assert_ptr_nonnull(l->order);
  o = dbuf_layout_order(l);
  ck_assert_ptr_eq(o, l->order);
  ck_assert_int_eq(o[0], 0);
  ck_assert_int_eq(o[1], 3); /* 4 */
  ck_assert_int_eq(o[2], 1); /* 8 */
  ck_assert_int_eq(o[3], 2); /* 8 */
  dbuf_layout_destroy(l);
  dbuf_tensors_destroy(t);
}
END_TEST

/* The tensor, compact and padded builders hand their own order to the
 * layout (the ids counted out by owner; the ids as placed), whose ties they
 * leave in any order: empty tensors sit where the next tensor starts,
 * across an owner's end (tensor), at 0 (compact), in a gap's end (padded).  Against (offset, id) sorted
 * here by qsort, on random lists with empty tensors.  And
 * dbuf__order_settle() itself: ties put in id order, an order that does
 * not rise refused and left as it was. */
static const int64_t *order_off;

static int
cmp_off_id(const void *a, const void *b)
{
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  if (order_off[x] != order_off[y])
    return order_off[x] < order_off[y] ? -1 : 1;
  return (x > y) - (x < y);
}

START_TEST(test_builder_order)
{
  test_rng_state = 0x51f15e5d2c6e0b3bULL;
  int64_t ties = 0;
  for (int iter = 0; iter < 300; iter++) {
    dbuf_tensors_t *t;
    int64_t n = 1 + (int64_t)(test_rng() % 200);
    ck_assert_int_eq(dbuf_tensors_create(&t), 0);
    for (int64_t i = 0; i < n; i++) {
      int64_t dims[2] = {test_rng() % 3 == 0 ? 0 : 1 + (int64_t)(test_rng() % 9),
                         1 + (int64_t)(test_rng() % 4)};
      char name[24];
      snprintf(name, sizeof name, "t%lld", (long long)i);
      ck_assert_int_eq(dbuf_tensors_add(t, name, 2, dims, NULL), 0);
    }
    int *own = malloc((size_t)n * sizeof *own);
    int64_t *want = malloc((size_t)n * sizeof *want);
    for (int c = 0; c < 4; c++) {
      dbuf_layout_params_t p;
      dbuf_layout_t *l;
      dbuf_diag_t d;
      dbuf_layout_params_init(&p);
      p.kind = c < 2 ? DBUF_LAYOUT_TENSOR : c == 2 ? DBUF_LAYOUT_COMPACT : DBUF_LAYOUT_PADDED;
      p.nranks = 1 + (int)(test_rng() % 6);
      p.auto_owners = c == 0;
      if (c == 1) { /* owners given, in short runs that wrap around the ranks */
        for (int64_t i = 0; i < n; i++)
          own[i] = (int)((i / 3) % p.nranks);
        p.owners = own;
        p.nowners = n;
      }
      ck_assert_msg(dbuf_layout_build(t, &p, &l, &d) == 0, "%s", d.msg);
      order_off = dbuf_layout_offsets(l);
      for (int64_t i = 0; i < n; i++)
        want[i] = i;
      qsort(want, (size_t)n, sizeof *want, cmp_off_id);
      const int64_t *got = dbuf_layout_order(l);
      for (int64_t k = 0; k < n; k++) {
        ck_assert_msg(got[k] == want[k], "iter %d case %d: position %lld holds %lld, want %lld",
                      iter, c, (long long)k, (long long)got[k], (long long)want[k]);
        ties += k > 0 && order_off[want[k - 1]] == order_off[want[k]];
      }
      dbuf_layout_destroy(l);
    }
    free(own);
    free(want);
    dbuf_tensors_destroy(t);
  }
  ck_assert(ties > 1000); /* the lists did have ties to put in order */

  int64_t off[6] = {5, 0, 5, 0, 9, 5}, ord[6] = {3, 1, 5, 2, 0, 4};
  ck_assert_int_eq(dbuf__order_settle(off, 6, ord), 0);
  const int64_t settled[6] = {1, 3, 0, 2, 5, 4};
  for (int k = 0; k < 6; k++)
    ck_assert_int_eq(ord[k], settled[k]);
  int64_t bad[6] = {1, 3, 4, 0, 2, 5};
  ck_assert_int_eq(dbuf__order_settle(off, 6, bad), 1);
  const int64_t kept[6] = {1, 3, 4, 0, 2, 5};
  for (int k = 0; k < 6; k++)
    ck_assert_int_eq(bad[k], kept[k]);
}
END_TEST

/* dbuf__mod(), the validator's alignment test, against the division: the
 * edges of its multiply path (2^51 - 1 and 2^51, divisors of 1, 2^k,
 * 2^k +- 1, near 2^62 and INT64_MAX) and 200,000 pseudo-random pairs of
 * every magnitude. */
START_TEST(test_fast_mod)
{
  const int64_t xs[] = {0, 1, 2, 7, 1023, 1024, 4097, (INT64_C(1) << 51) - 1,
                        INT64_C(1) << 51, (INT64_C(1) << 51) + 1, (INT64_C(1) << 53) + 1,
                        INT64_MAX - 1, INT64_MAX};
  const int64_t ds[] = {1, 2, 3, 7168, 4096, 4095, 4097, (INT64_C(1) << 32) + 15,
                        (INT64_C(1) << 51) - 1, INT64_C(1) << 62, INT64_MAX};
  for (size_t a = 0; a < sizeof xs / sizeof xs[0]; a++)
    for (size_t b = 0; b < sizeof ds / sizeof ds[0]; b++)
      ck_assert_int_eq(dbuf__mod(xs[a], ds[b], 1.0 / (double)ds[b]), xs[a] % ds[b]);
  uint64_t r = 0x9e3779b97f4a7c15u;
  for (int k = 0; k < 200000; k++) {
    r ^= r << 13;
    r ^= r >> 7;
    r ^= r << 17;
    int64_t x = (int64_t)((r >> 1) >> (r % 63));
    int64_t d = (int64_t)(((r * 0x2545f4914f6cdd1du) >> 1) >> ((r >> 8) % 63));
    if (d < 1)
      d = 1;
    ck_assert_msg(dbuf__mod(x, d, 1.0 / (double)d) == x % d, "%lld mod %lld", (long long)x,
                  (long long)d);
  }
}
END_TEST

static Suite *
layout_suite(void)
{
  Suite *s = suite_create("layout");
  TCase *tc = tcase_create("golden");
  tcase_set_timeout(tc, 60);
  tcase_add_loop_test(tc, test_golden, 0, (int)json_array_size(golden));
  tcase_add_loop_test(tc, test_golden_zoo, 0, (int)json_array_size(zoo_golden));
  suite_add_tcase(s, tc);
  tc = tcase_create("errors");
  tcase_add_test(tc, test_error_messages);
  tcase_add_test(tc, test_tensor_errors);
  tcase_add_test(tc, test_dup_independent);
  tcase_add_loop_test(tc, test_order_any_offsets, 0, 4);
  tcase_add_test(tc, test_shapes_read_chunks);
  tcase_add_test(tc, test_name_utf8);
  tcase_add_test(tc, test_shape_errors);
  tcase_add_test(tc, test_lcm_overflow);
  suite_add_tcase(s, tc);
  tc = tcase_create("validate");
  tcase_add_test(tc, test_validate_broken);
  tcase_add_loop_test(tc, test_validate_hostile, 0,
                      (int)(sizeof hostile / sizeof hostile[0]));
  suite_add_tcase(s, tc);
  tc = tcase_create("queries");
  tcase_add_test(tc, test_queries_seed);
  tcase_add_test(tc, test_local_range);
  tcase_add_test(tc, test_pieces_near_int64_max);
  tcase_add_test(tc, test_auto_owners);
  tcase_add_test(tc, test_auto_ns_hand);
  tcase_add_test(tc, test_auto_ns_overflow);
  tcase_add_loop_test(tc, test_auto_ns_random, 0, 4);
  suite_add_tcase(s, tc);
  tc = tcase_create("from_parts");
  tcase_add_loop_test(tc, test_from_parts_args, 0,
                      (int)(sizeof parts_cases / sizeof parts_cases[0]));
  tcase_add_test(tc, test_json_first_rank_offset);
  suite_add_tcase(s, tc);
  tc = tcase_create("helpers");
  tcase_add_test(tc, test_rank_segments);
  tcase_add_loop_test(tc, test_rows, 0, (int)(sizeof rows_cases / sizeof rows_cases[0]));
  tcase_add_test(tc, test_rows_args);
  tcase_add_test(tc, test_rows_limits);
  tcase_add_test(tc, test_rows_in_outside_buffer);
  tcase_add_test(tc, test_piece_clip);
  tcase_add_test(tc, test_check_owner);
  tcase_add_test(tc, test_chunk_shared_shapes);
  tcase_add_test(tc, test_order_identity);
  tcase_add_test(tc, test_builder_order);
  tcase_add_test(tc, test_fast_mod);
  suite_add_tcase(s, tc);
  tc = tcase_create("properties");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, test_random_properties, 0, 8);
  suite_add_tcase(s, tc);
  return s;
}

int
main(void)
{
  golden = load_jsonl("layouts.jsonl");
  zoo_golden = load_jsonl("zoo-layouts.jsonl");
  SRunner *sr = srunner_create(layout_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  json_decref(golden);
  json_decref(zoo_golden);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
