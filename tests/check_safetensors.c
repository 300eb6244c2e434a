/*
 * Check suite for the safetensors header reader.  Every test writes its own
 * files into a fresh mkdtemp directory (fixture), so nothing is shared
 * between tests and srcdir is never assumed.
 *
 * Headers are written as C strings with ' for " to keep them readable.
 */
#define _XOPEN_SOURCE 700

#include "dbuf/safetensors.h"
#include "tmpdir.h"

#include <check.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void
setup(void)
{
  tmpdir_setup("check_st");
}

static void
teardown(void)
{
  tmpdir_teardown();
}

static void
mksub(const char *rel)
{
  ck_assert_int_eq(mkdir(tpath(rel), 0700), 0);
}

static void
write_raw(const char *rel, const void *bytes, size_t len)
{
  FILE *f = fopen(tpath(rel), "wb");
  ck_assert_ptr_nonnull(f);
  if (len > 0)
    ck_assert_uint_eq(fwrite(bytes, 1, len, f), len);
  ck_assert_int_eq(fclose(f), 0);
}

/* The template with every ' turned into ". */
static char *
dq(const char *tmpl)
{
  char *s = strdup(tmpl);
  ck_assert_ptr_nonnull(s);
  for (char *p = s; *p; p++) {
    if (*p == '\'')
      *p = '"';
  }
  return s;
}

/*
 * Write a safetensors file: 8-byte LE length, header, data_len zero bytes.
 * len_field >= 0 replaces the length written (the header bytes stay);
 * total >= 0 cuts the file to that many bytes.
 */
static void
write_st_ex(const char *rel, const char *tmpl, int64_t data_len,
            long long len_field, long long total)
{
  char *hdr = dq(tmpl);
  size_t hl = strlen(hdr);
  size_t len = 8 + hl + (size_t)data_len;
  unsigned char *buf = calloc(1, len);
  uint64_t n = len_field >= 0 ? (uint64_t)len_field : (uint64_t)hl;
  ck_assert_ptr_nonnull(buf);
  for (int i = 0; i < 8; i++)
    buf[i] = (unsigned char)(n >> (8 * i));
  memcpy(buf + 8, hdr, hl);
  write_raw(rel, buf, total >= 0 ? (size_t)total : len);
  free(buf);
  free(hdr);
}

static void
write_st(const char *rel, const char *tmpl, int64_t data_len)
{
  write_st_ex(rel, tmpl, data_len, -1, -1);
}

static int
open1(const char *rel, dbuf_st_t **st, dbuf_diag_t *diag)
{
  const char *p = tpath(rel);
  return dbuf_st_open(&p, 1, NULL, 0, st, diag);
}

#define ASSERT_MSG_HAS(diag, s)                                                \
  ck_assert_msg(strstr((diag).msg, (s)) != NULL,                               \
                "diag '%s' does not mention '%s'", (diag).msg, (s))

/* Open must fail with code; the diag must carry it and name each of subs.
 * label names the table case in failure messages. */
static void
expect_fail_l(const char *label, const char *const *paths, int64_t npaths,
              const char *const *order, int64_t norder, int code,
              const char *sub1, const char *sub2)
{
  dbuf_st_t *sentinel = (dbuf_st_t *)&sentinel, *st = sentinel;
  dbuf_diag_t diag;
  dbuf_diag_clear(&diag);
  int rc = dbuf_st_open(paths, npaths, order, norder, &st, &diag);
  ck_assert_msg(rc == code, "%s: rc %s (%s), expected %s", label,
                dbuf_err_name(rc), diag.msg, dbuf_err_name(code));
  ck_assert_msg(diag.code == code, "%s: diag.code %d", label, diag.code);
  ck_assert_msg(st == sentinel, "%s: out written on failure", label);
  if (sub1 != NULL)
    ck_assert_msg(strstr(diag.msg, sub1) != NULL,
                  "%s: diag '%s' does not mention '%s'", label, diag.msg, sub1);
  if (sub2 != NULL)
    ck_assert_msg(strstr(diag.msg, sub2) != NULL,
                  "%s: diag '%s' does not mention '%s'", label, diag.msg, sub2);
}

#define expect_fail(...) expect_fail_l(__func__, __VA_ARGS__)

static void
assert_tensor(const dbuf_tensors_t *t, int64_t id, const char *name,
              const char *shape)
{
  char buf[128];
  ck_assert_str_eq(dbuf_tensors_name(t, id), name);
  ck_assert_int_eq(dbuf_tensors_shape_str(t, id, buf, sizeof buf), 0);
  ck_assert_str_eq(buf, shape);
}

/* ------------------------------------------------------------- valid */

/* Keys deliberately not in offset order; an empty tensor; __metadata__. */
static const char *valid_hdr =
    "{'b':{'dtype':'BF16','shape':[2,3],'data_offsets':[20,32]},"
    "'__metadata__':{'format':'pt','note':'x'},"
    "'a':{'dtype':'F32','shape':[4],'data_offsets':[0,16]},"
    "'e':{'dtype':'F32','shape':[0,3],'data_offsets':[16,16]},"
    "'c':{'dtype':'I8','shape':[2,2],'data_offsets':[16,20]},"
    "'z':{'dtype':'U8','shape':[1],'data_offsets':[32,33],'extra':'ignored'}}";

START_TEST(test_single_file)
{
  dbuf_st_t *st = NULL;
  dbuf_diag_t diag;
  dbuf_st_info_t info;
  write_st("one.safetensors", valid_hdr, 33);
  ck_assert_int_eq(open1("one.safetensors", &st, &diag), 0);
  const dbuf_tensors_t *t = dbuf_st_tensors(st);
  ck_assert_int_eq(dbuf_tensors_count(t), 5);
  assert_tensor(t, 0, "a", "4");
  assert_tensor(t, 1, "e", "0x3"); /* empty: ties at 16 broken by end */
  assert_tensor(t, 2, "c", "2x2");
  assert_tensor(t, 3, "b", "2x3");
  assert_tensor(t, 4, "z", "1");
  ck_assert_int_eq(dbuf_tensors_total(t), 4 + 0 + 4 + 6 + 1);

  ck_assert_int_eq(dbuf_st_file_count(st), 1);
  ck_assert_str_eq(dbuf_st_file_path(st, 0), tpath("one.safetensors"));
  ck_assert_ptr_null(dbuf_st_file_path(st, 1));
  ck_assert_ptr_null(dbuf_st_file_path(st, -1));

  int64_t base = 8 + (int64_t)strlen(valid_hdr);
  ck_assert_int_eq(dbuf_st_tensor_info(st, 3, &info), 0);
  ck_assert_int_eq(info.file, 0);
  ck_assert_str_eq(info.path, tpath("one.safetensors"));
  ck_assert_str_eq(info.dtype, "BF16");
  ck_assert_int_eq(info.elem_size, 2);
  ck_assert_int_eq(info.data_begin, base + 20);
  ck_assert_int_eq(info.data_end, base + 32);
  ck_assert_int_eq(dbuf_st_tensor_info(st, 1, &info), 0);
  ck_assert_int_eq(info.data_begin, base + 16);
  ck_assert_int_eq(info.data_end, base + 16);
  ck_assert_int_eq(dbuf_st_tensor_info(st, 4, &info), 0);
  ck_assert_int_eq(info.data_end, base + 33); /* == file size */

  ck_assert_int_eq(dbuf_st_tensor_info(st, 5, &info), DBUF_ERANGE);
  ck_assert_int_eq(dbuf_st_tensor_info(st, -1, &info), DBUF_ERANGE);
  ck_assert_int_eq(dbuf_st_tensor_info(NULL, 0, &info), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_st_tensor_info(st, 0, NULL), DBUF_EINVAL);
  ck_assert_uint_ne(dbuf_st_digest(st), 0);
  dbuf_st_destroy(st);
}
END_TEST

/* Header padded with spaces (as writers do for 8-byte alignment); empty file. */
START_TEST(test_padding_and_empty)
{
  dbuf_st_t *st = NULL;
  dbuf_diag_t diag;
  write_st("pad.safetensors",
           "{'w':{'dtype':'F64','shape':[1],'data_offsets':[0,8]}}       ", 8);
  ck_assert_int_eq(open1("pad.safetensors", &st, &diag), 0);
  ck_assert_int_eq(dbuf_tensors_count(dbuf_st_tensors(st)), 1);
  dbuf_st_destroy(st);

  /* Issue 8: a checkpoint without tensors is an input error, never an
   * empty layout. */
  write_st("empty.safetensors", "{}      ", 0);
  st = NULL;
  ck_assert_int_eq(open1("empty.safetensors", &st, &diag), DBUF_EFORMAT);
  ck_assert_ptr_null(st);
  ck_assert_msg(strstr(diag.msg, "empty.safetensors: no tensors") != NULL, "%s",
                diag.msg);

  write_st("meta.safetensors", "{'__metadata__':{}}", 0);
  ck_assert_int_eq(open1("meta.safetensors", &st, &diag), DBUF_EFORMAT);
  ck_assert_ptr_null(st);
}
END_TEST

/* -------------------------------------------------------- dtype table */

static const struct {
  const char *name;
  int bits;
} dtype_cases[] = {
    {"BOOL", 8},  {"U8", 8},     {"I8", 8},      {"F8_E5M2", 8},
    {"F8_E4M3", 8}, {"F8_E8M0", 8}, {"I16", 16},  {"U16", 16},
    {"F16", 16},  {"BF16", 16},  {"I32", 32},    {"U32", 32},
    {"F32", 32},  {"I64", 64},   {"U64", 64},    {"F64", 64},
    {"C64", 64},  {"F4", 4},     {"F6_E2M3", 6}, {"F6_E3M2", 6},
};

/* Each dtype through the table and through a real header. */
START_TEST(test_dtype)
{
  const char *name = dtype_cases[_i].name;
  int bits = 0;
  int64_t size = 0;
  char hdr[256];
  dbuf_st_t *st = NULL;
  dbuf_diag_t diag;

  ck_assert_int_eq(dbuf_st_dtype_bits(name, &bits), 0);
  ck_assert_int_eq(bits, dtype_cases[_i].bits);
  int byte_sized = bits % 8 == 0;
  int64_t elem = byte_sized ? bits / 8 : 1;
  ck_assert_int_eq(dbuf_st_dtype_size(name, &size),
                   byte_sized ? 0 : DBUF_EUNSUPPORTED);
  if (byte_sized)
    ck_assert_int_eq(size, elem);

  snprintf(hdr, sizeof hdr,
           "{'t':{'dtype':'%s','shape':[3,2],'data_offsets':[0,%lld]}}", name,
           (long long)(6 * elem));
  write_st("d.safetensors", hdr, 6 * elem);
  int rc = open1("d.safetensors", &st, &diag);
  if (!byte_sized) {
    ck_assert_int_eq(rc, DBUF_EUNSUPPORTED);
    ASSERT_MSG_HAS(diag, "sub-byte");
    ASSERT_MSG_HAS(diag, "'t'");
    return;
  }
  ck_assert_msg(rc == 0, "%s: %s", name, diag.msg);
  dbuf_st_info_t info;
  ck_assert_int_eq(dbuf_st_tensor_info(st, 0, &info), 0);
  ck_assert_str_eq(info.dtype, name);
  ck_assert_int_eq(info.elem_size, elem);
  ck_assert_int_eq(info.data_end - info.data_begin, 6 * elem);
  dbuf_st_destroy(st);
}
END_TEST

START_TEST(test_dtype_args)
{
  int bits;
  int64_t size;
  ck_assert_int_eq(dbuf_st_dtype_size("F33", &size), DBUF_ENOTFOUND);
  ck_assert_int_eq(dbuf_st_dtype_size("bf16", &size), DBUF_ENOTFOUND);
  ck_assert_int_eq(dbuf_st_dtype_size("", &size), DBUF_ENOTFOUND);
  ck_assert_int_eq(dbuf_st_dtype_size(NULL, &size), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_st_dtype_size("F32", NULL), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_st_dtype_bits("F33", &bits), DBUF_ENOTFOUND);
  ck_assert_int_eq(dbuf_st_dtype_bits(NULL, &bits), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_st_dtype_bits("F32", NULL), DBUF_EINVAL);
}
END_TEST

/* ------------------------------------------------- bad single files */

#define T_A "'a':{'dtype':'F32','shape':[2,2],'data_offsets':[0,16]}"

static const struct bad_case {
  const char *label;
  const char *hdr;
  int64_t data_len;
  long long len_field; /* -1: the real header length */
  long long total;     /* -1: whole file */
  int code;
  const char *sub1, *sub2; /* both must be in the diag (with the file name) */
} bad_cases[] = {
    {"truncated data", "{" T_A "}", 10, -1, -1, DBUF_EFORMAT, "'a'",
     "run past the end of the file"},
    {"truncated in prefix", "{" T_A "}", 16, -1, 5, DBUF_EFORMAT,
     "file is 5 bytes", "8-byte header length"},
    {"truncated in header", "{" T_A "}", 16, -1, 30, DBUF_EFORMAT,
     "runs past the end of the file", "(30 bytes)"},
    {"header length > file", "{" T_A "}", 16, 1000, -1, DBUF_EFORMAT,
     "header length 1000 runs past the end", NULL},
    {"header length > 1e8", "{" T_A "}", 16, 100000001, -1, DBUF_EFORMAT,
     "header length 100000001 is over the safetensors limit", NULL},
    {"header length 2^64-1", "{" T_A "}", 16, (long long)-2, -1,
     DBUF_EFORMAT, "18446744073709551615", "limit"},
    {"overlap",
     "{" T_A ",'b':{'dtype':'F32','shape':[4],'data_offsets':[8,24]}}", 24,
     -1, -1, DBUF_EFORMAT, "tensor 'b': data_offsets [8, 24] overlap",
     "tensor 'a' [0, 16]"},
    {"gap",
     "{" T_A ",'b':{'dtype':'F32','shape':[4],'data_offsets':[20,36]}}", 36,
     -1, -1, DBUF_EFORMAT, "tensor 'b'", "gap of 4 bytes after tensor 'a'"},
    {"gap at start",
     "{'a':{'dtype':'F32','shape':[4],'data_offsets':[4,20]}}", 20, -1, -1,
     DBUF_EFORMAT, "'a'", "gap of 4 bytes at the start"},
    {"trailing data", "{" T_A "}", 20, -1, -1, DBUF_EFORMAT,
     "4 bytes after the last tensor ('a'", NULL},
    {"data but no tensors", "{}", 4, -1, -1, DBUF_EFORMAT,
     "4 bytes of data but no tensors", NULL},
    {"offsets vs numel*size",
     "{'lm_head.weight':{'dtype':'BF16','shape':[4,4],'data_offsets':[10,20]"
     "}}",
     20, -1, -1, DBUF_EFORMAT,
     "tensor 'lm_head.weight': data_offsets [10, 20] hold 10 bytes, shape "
     "4x4 BF16 needs 32",
     NULL},
    {"bad json", "{'a': {'dtype':", 0, -1, -1, DBUF_EPARSE,
     "header is not valid JSON", "line 1"},
    {"empty header", "", 0, -1, -1, DBUF_EPARSE, "not valid JSON", NULL},
    {"invalid utf-8", "{'a\xff':1}", 0, -1, -1, DBUF_EPARSE, "not valid JSON",
     NULL},
    {"duplicate key", "{" T_A "," T_A "}", 16, -1, -1, DBUF_EPARSE,
     "duplicate", NULL},
    {"not an object", "[1,2]", 0, -1, -1, DBUF_EFORMAT,
     "header is a JSON array, not an object", NULL},
    {"entry not an object", "{'a':[1]}", 0, -1, -1, DBUF_EFORMAT,
     "tensor 'a': entry is a JSON array", NULL},
    {"unknown dtype",
     "{'w':{'dtype':'F33','shape':[1],'data_offsets':[0,4]}}", 4, -1, -1,
     DBUF_EUNSUPPORTED, "tensor 'w'", "unknown dtype 'F33'"},
    {"missing dtype", "{'w':{'shape':[1],'data_offsets':[0,4]}}", 4, -1, -1,
     DBUF_EFORMAT, "tensor 'w'", "missing \"dtype\""},
    {"missing shape", "{'w':{'dtype':'F32','data_offsets':[0,4]}}", 4, -1, -1,
     DBUF_EFORMAT, "tensor 'w'", "missing \"shape\""},
    {"missing offsets", "{'w':{'dtype':'F32','shape':[1]}}", 4, -1, -1,
     DBUF_EFORMAT, "tensor 'w'", "missing \"data_offsets\""},
    {"dtype not a string",
     "{'w':{'dtype':32,'shape':[1],'data_offsets':[0,4]}}", 4, -1, -1,
     DBUF_EFORMAT, "tensor 'w'", "\"dtype\" is a JSON integer"},
    {"dtype an object",
     "{'w':{'dtype':{},'shape':[1],'data_offsets':[0,4]}}", 4, -1, -1,
     DBUF_EFORMAT, "tensor 'w'", "\"dtype\" is a JSON object, not a string"},
    {"dtype a boolean",
     "{'w':{'dtype':true,'shape':[1],'data_offsets':[0,4]}}", 4, -1, -1,
     DBUF_EFORMAT, "tensor 'w'", "\"dtype\" is a JSON boolean, not a string"},
    {"dtype null",
     "{'w':{'dtype':null,'shape':[1],'data_offsets':[0,4]}}", 4, -1, -1,
     DBUF_EFORMAT, "tensor 'w'", "\"dtype\" is a JSON null, not a string"},
    {"shape not an array",
     "{'w':{'dtype':'F32','shape':'1','data_offsets':[0,4]}}", 4, -1, -1,
     DBUF_EFORMAT, "tensor 'w'", "\"shape\" is a JSON string"},
    {"non-integer dim",
     "{'w':{'dtype':'F32','shape':[1.0],'data_offsets':[0,4]}}", 4, -1, -1,
     DBUF_EFORMAT, "tensor 'w'", "shape[0] is a JSON real"},
    {"negative dim",
     "{'w':{'dtype':'F32','shape':[2,-2],'data_offsets':[0,16]}}", 16, -1, -1,
     DBUF_ESHAPE, "tensor 'w'", "shape[1] is negative (-2)"},
    {"offsets arity",
     "{'w':{'dtype':'F32','shape':[1],'data_offsets':[4]}}", 4, -1, -1,
     DBUF_EFORMAT, "tensor 'w'", "not an array of 2 integers"},
    {"offsets not integers",
     "{'w':{'dtype':'F32','shape':[1],'data_offsets':['0','4']}}", 4, -1, -1,
     DBUF_EFORMAT, "tensor 'w'", "not an array of 2 integers"},
    {"negative offset",
     "{'w':{'dtype':'F32','shape':[1],'data_offsets':[-4,0]}}", 4, -1, -1,
     DBUF_EFORMAT, "tensor 'w'", "negative offset"},
    {"end before begin",
     "{'w':{'dtype':'F32','shape':[1],'data_offsets':[4,0]}}", 4, -1, -1,
     DBUF_EFORMAT, "tensor 'w'", "[4, 0] end before they begin"},
    {"huge end offset",
     "{'w':{'dtype':'F32','shape':[1],'data_offsets':[0,9223372036854775807]"
     "}}",
     4, -1, -1, DBUF_EFORMAT, "tensor 'w'",
     "hold 9223372036854775807 bytes"},
    {"offset past json_int_t",
     "{'w':{'dtype':'F32','shape':[1],'data_offsets':[0,"
     "99999999999999999999]}}",
     4, -1, -1, DBUF_EPARSE, "not valid JSON", NULL},
    {"numel overflow",
     "{'w':{'dtype':'U8','shape':[4611686018427387904,4],'data_offsets':[0,"
     "1]}}",
     1, -1, -1, DBUF_EOVERFLOW, "tensor 'w'", "more than INT64_MAX elements"},
    {"bytes overflow",
     "{'w':{'dtype':'F32','shape':[4611686018427387904],'data_offsets':[0,"
     "1]}}",
     1, -1, -1, DBUF_EOVERFLOW, "tensor 'w'", "more than INT64_MAX bytes"},
    {"0-D tensor", "{'s':{'dtype':'F32','shape':[],'data_offsets':[0,4]}}", 4,
     -1, -1, DBUF_ESHAPE, "tensor s", "0-D"},
    {"zero non-leading dim",
     "{'w':{'dtype':'F32','shape':[4,0],'data_offsets':[0,0]}}", 0, -1, -1,
     DBUF_ESHAPE, "tensor w", "zero-sized non-leading dim 1"},
    {"17 dims",
     "{'w':{'dtype':'F32','shape':[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],"
     "'data_offsets':[0,4]}}",
     4, -1, -1, DBUF_ESHAPE, "tensor 'w'", "17 dims (at most 16)"},
    {"bad tensor name",
     "{'a b':{'dtype':'F32','shape':[1],'data_offsets':[0,4]}}", 4, -1, -1,
     DBUF_EINVAL, "'a b'", "spaces"},
    {"metadata not an object", "{'__metadata__':[]}", 0, -1, -1, DBUF_EFORMAT,
     "\"__metadata__\" is a JSON array", NULL},
    {"metadata value not a string", "{'__metadata__':{'k':1}}", 0, -1, -1,
     DBUF_EFORMAT, "\"__metadata__\" entry 'k' is a JSON integer", NULL},
};

START_TEST(test_bad_file)
{
  const struct bad_case *c = &bad_cases[_i];
  const char *p = tpath("bad.safetensors");
  long long lf = c->len_field == -2 ? -1 : c->len_field;
  if (c->len_field == -2) { /* 2^64-1: write by hand */
    char *hdr = dq(c->hdr);
    size_t hl = strlen(hdr);
    unsigned char *buf = calloc(1, 8 + hl + (size_t)c->data_len);
    memset(buf, 0xff, 8);
    memcpy(buf + 8, hdr, hl);
    write_raw("bad.safetensors", buf, 8 + hl + (size_t)c->data_len);
    free(buf);
    free(hdr);
  } else {
    write_st_ex("bad.safetensors", c->hdr, c->data_len, lf, c->total);
  }
  expect_fail_l(c->label, &p, 1, NULL, 0, c->code, c->sub1, c->sub2);
  /* every message names the file */
  dbuf_diag_t diag;
  dbuf_st_t *st = NULL;
  ck_assert_int_eq(dbuf_st_open(&p, 1, NULL, 0, &st, &diag), c->code);
  ck_assert_msg(strncmp(diag.msg, p, strlen(p)) == 0,
                "%s: diag '%s' does not start with the file", c->label,
                diag.msg);
}
END_TEST

/* ------------------------------------------------------ arguments, I/O */

START_TEST(test_args)
{
  dbuf_st_t *st = NULL;
  const char *p = tpath("x.safetensors");
  const char *nul = NULL, *empty = "";
  const char *ord[] = {"a", NULL};
  write_st("x.safetensors", "{" T_A "}", 16);
  expect_fail(NULL, 1, NULL, 0, DBUF_EINVAL, NULL, NULL);
  expect_fail(&p, 0, NULL, 0, DBUF_EINVAL, NULL, NULL);
  expect_fail(&p, -1, NULL, 0, DBUF_EINVAL, NULL, NULL);
  expect_fail(&p, 1, NULL, 1, DBUF_EINVAL, NULL, NULL);
  expect_fail(&p, 1, ord, -1, DBUF_EINVAL, NULL, NULL);
  expect_fail(&p, 1, ord, 2, DBUF_EINVAL, "entry 2 is NULL", NULL);
  expect_fail(&nul, 1, NULL, 0, DBUF_EINVAL, "NULL", NULL);
  expect_fail(&empty, 1, NULL, 0, DBUF_EINVAL, "empty", NULL);
  ck_assert_int_eq(dbuf_st_open(&p, 1, NULL, 0, NULL, NULL), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_st_open(&p, 1, NULL, 0, &st, NULL), 0); /* diag NULL */
  dbuf_st_destroy(st);
  dbuf_st_destroy(NULL);
  ck_assert_ptr_null(dbuf_st_tensors(NULL));
  ck_assert_int_eq(dbuf_st_file_count(NULL), 0);
  ck_assert_ptr_null(dbuf_st_file_path(NULL, 0));
  ck_assert_uint_eq(dbuf_st_digest(NULL), 0);

  const char *missing = tpath("nope.safetensors");
  expect_fail(&missing, 1, NULL, 0, DBUF_ENOTFOUND, "nope.safetensors",
              "cannot open");
  mksub("dir.safetensors");
  const char *dir = tpath("dir.safetensors");
  expect_fail(&dir, 1, NULL, 0, DBUF_EIO, "dir.safetensors",
              "not a regular file");
  /* an index among several paths */
  const char *two[] = {p, tpath("m.index.json")};
  expect_fail(two, 2, NULL, 0, DBUF_EINVAL, "m.index.json",
              "must be the only path");
}
END_TEST

/* Several files given directly: order as given; duplicates across files. */
START_TEST(test_multi_files)
{
  dbuf_st_t *st = NULL;
  dbuf_diag_t diag;
  dbuf_st_info_t info;
  write_st("f1.safetensors",
           "{'x':{'dtype':'F16','shape':[3],'data_offsets':[0,6]}}", 6);
  write_st("f2.safetensors", "{" T_A "}", 16);
  const char *paths[] = {tpath("f2.safetensors"), tpath("f1.safetensors")};
  ck_assert_int_eq(dbuf_st_open(paths, 2, NULL, 0, &st, &diag), 0);
  assert_tensor(dbuf_st_tensors(st), 0, "a", "2x2");
  assert_tensor(dbuf_st_tensors(st), 1, "x", "3");
  ck_assert_int_eq(dbuf_st_tensor_info(st, 1, &info), 0);
  ck_assert_int_eq(info.file, 1);
  ck_assert_str_eq(info.path, tpath("f1.safetensors"));
  dbuf_st_destroy(st);

  write_st("f3.safetensors", "{" T_A "}", 16);
  const char *dup[] = {tpath("f2.safetensors"), tpath("f3.safetensors")};
  expect_fail(dup, 2, NULL, 0, DBUF_EDUP, "f3.safetensors: tensor 'a'",
              "also in");
  const char *same[] = {tpath("f2.safetensors"), tpath("f2.safetensors")};
  expect_fail(same, 2, NULL, 0, DBUF_EDUP, "tensor 'a'", NULL);
}
END_TEST

/* ------------------------------------------------------------- index */

static void
write_shards(void)
{
  mksub("ck");
  write_st("ck/model-00001-of-00002.safetensors",
           "{'__metadata__':{'format':'pt'},"
           "'model.embed.weight':{'dtype':'BF16','shape':[8,4],"
           "'data_offsets':[0,64]},"
           "'model.norm.weight':{'dtype':'F32','shape':[4],"
           "'data_offsets':[64,80]}}",
           80);
  write_st("ck/model-00002-of-00002.safetensors",
           "{'lm_head.weight':{'dtype':'BF16','shape':[8,4],"
           "'data_offsets':[0,64]}}",
           64);
}

/* weight_map lists shard 2 first: files still go in name order. */
static const char *good_index =
    "{'metadata':{'total_size':144},'weight_map':{"
    "'lm_head.weight':'model-00002-of-00002.safetensors',"
    "'model.embed.weight':'model-00001-of-00002.safetensors',"
    "'model.norm.weight':'model-00001-of-00002.safetensors'}}";

START_TEST(test_index)
{
  dbuf_st_t *st = NULL;
  dbuf_diag_t diag;
  dbuf_st_info_t info;
  write_shards();
  char *js = dq(good_index);
  write_raw("ck/model.safetensors.index.json", js, strlen(js));
  free(js);

  const char *p = tpath("ck/model.safetensors.index.json");
  ck_assert_msg(dbuf_st_open(&p, 1, NULL, 0, &st, &diag) == 0, "%s", diag.msg);
  ck_assert_int_eq(dbuf_st_file_count(st), 2);
  ck_assert_str_eq(dbuf_st_file_path(st, 0),
                   tpath("ck/model-00001-of-00002.safetensors"));
  ck_assert_str_eq(dbuf_st_file_path(st, 1),
                   tpath("ck/model-00002-of-00002.safetensors"));
  const dbuf_tensors_t *t = dbuf_st_tensors(st);
  ck_assert_int_eq(dbuf_tensors_count(t), 3);
  assert_tensor(t, 0, "model.embed.weight", "8x4");
  assert_tensor(t, 1, "model.norm.weight", "4");
  assert_tensor(t, 2, "lm_head.weight", "8x4");
  ck_assert_int_eq(dbuf_st_tensor_info(st, 2, &info), 0);
  ck_assert_int_eq(info.file, 1);
  ck_assert_str_eq(info.dtype, "BF16");
  ck_assert_int_eq(info.data_end - info.data_begin, 64);
  uint64_t d1 = dbuf_st_digest(st);
  dbuf_st_destroy(st);

  /* the same two files given directly: same digest (paths not covered) */
  const char *direct[] = {tpath("ck/model-00001-of-00002.safetensors"),
                          tpath("ck/model-00002-of-00002.safetensors")};
  ck_assert_int_eq(dbuf_st_open(direct, 2, NULL, 0, &st, &diag), 0);
  ck_assert_uint_eq(dbuf_st_digest(st), d1);
  dbuf_st_destroy(st);
  /* files swapped: different digest */
  const char *swapped[] = {direct[1], direct[0]};
  ck_assert_int_eq(dbuf_st_open(swapped, 2, NULL, 0, &st, &diag), 0);
  ck_assert_uint_ne(dbuf_st_digest(st), d1);
  dbuf_st_destroy(st);
}
END_TEST

static const struct index_case {
  const char *label;
  const char *index; /* ' for " */
  int code;
  const char *sub1, *sub2;
} index_cases[] = {
    {"missing file",
     "{'weight_map':{'lm_head.weight':'model-00003-of-00002.safetensors'}}",
     DBUF_ENOTFOUND, "model-00003-of-00002.safetensors (named in",
     "cannot open"},
    {"tensor missing from its file",
     "{'weight_map':{"
     "'lm_head.weight':'model-00002-of-00002.safetensors',"
     "'ghost.weight':'model-00002-of-00002.safetensors',"
     "'model.embed.weight':'model-00001-of-00002.safetensors',"
     "'model.norm.weight':'model-00001-of-00002.safetensors'}}",
     DBUF_ENOTFOUND, "tensor 'ghost.weight'",
     "model-00002-of-00002.safetensors has no such tensor"},
    {"file tensor not in weight_map",
     "{'weight_map':{"
     "'lm_head.weight':'model-00002-of-00002.safetensors',"
     "'model.embed.weight':'model-00001-of-00002.safetensors'}}",
     DBUF_ENOTFOUND,
     "model-00001-of-00002.safetensors: tensor 'model.norm.weight' is not in "
     "the weight_map",
     "model.safetensors.index.json"},
    {"tensor in the wrong file",
     "{'weight_map':{"
     "'lm_head.weight':'model-00001-of-00002.safetensors',"
     "'model.embed.weight':'model-00001-of-00002.safetensors',"
     "'model.norm.weight':'model-00002-of-00002.safetensors'}}",
     DBUF_EFORMAT, "model.safetensors.index.json: weight_map puts tensor '",
     "', but it is in"}, /* two wrong entries: either may be found first */
    {"no weight_map", "{'metadata':{}}", DBUF_EFORMAT,
     "no \"weight_map\" object", NULL},
    {"weight_map value not a string", "{'weight_map':{'a':1}}", DBUF_EFORMAT,
     "tensor 'a' is a JSON integer", NULL},
    {"escaping file name", "{'weight_map':{'a':'../x.safetensors'}}",
     DBUF_EFORMAT, "'../x.safetensors'", "contains '..'"},
    {"absolute file name", "{'weight_map':{'a':'/etc/x.safetensors'}}",
     DBUF_EFORMAT, "'/etc/x.safetensors'", "absolute"},
    {"metadata not an object", "{'metadata':1,'weight_map':{}}", DBUF_EFORMAT,
     "\"metadata\" is a JSON integer", NULL},
    {"index not an object", "[]", DBUF_EFORMAT, "index is a JSON array", NULL},
    {"index bad json", "{'weight_map':", DBUF_EPARSE, "index is not valid JSON",
     NULL},
};

START_TEST(test_bad_index)
{
  const struct index_case *c = &index_cases[_i];
  write_shards();
  char *js = dq(c->index);
  write_raw("ck/model.safetensors.index.json", js, strlen(js));
  free(js);
  const char *p = tpath("ck/model.safetensors.index.json");
  expect_fail_l(c->label, &p, 1, NULL, 0, c->code, c->sub1, c->sub2);
}
END_TEST

START_TEST(test_index_empty)
{
  dbuf_st_t *st = NULL;
  dbuf_diag_t diag;
  write_raw("e.index.json", "{\"weight_map\":{}}", 17);
  const char *p = tpath("e.index.json");
  ck_assert_int_eq(dbuf_st_open(&p, 1, NULL, 0, &st, &diag), DBUF_EFORMAT);
  ck_assert_ptr_null(st);
  ck_assert_msg(strstr(diag.msg, "\"weight_map\" is empty: no tensors") != NULL,
                "%s", diag.msg);
  const char *missing = tpath("none.index.json");
  expect_fail(&missing, 1, NULL, 0, DBUF_ENOTFOUND, "none.index.json", NULL);
}
END_TEST

/* ------------------------------------------------------------- order */

static const char *three_hdr =
    "{'a':{'dtype':'F32','shape':[1],'data_offsets':[0,4]},"
    "'b':{'dtype':'F32','shape':[2],'data_offsets':[4,12]},"
    "'c':{'dtype':'F32','shape':[3],'data_offsets':[12,24]}}";

static const struct order_case {
  const char *names[5];
  int64_t n;
  int code;
  const char *sub1, *sub2;
} order_cases[] = {
    {{"c", "a", "b"}, 3, 0, NULL, NULL},
    {{"b", "c", "a"}, 3, 0, NULL, NULL},
    {{"a", "b", "c"}, 3, 0, NULL, NULL},
    {{"a", "zz", "c"}, 3, DBUF_ENOTFOUND, "entry 2: 'zz' is not a tensor",
     NULL},
    {{"a", "c"}, 2, DBUF_ENOTFOUND, "tensor 'b' is not in the order list",
     "three.safetensors"},
    {{0}, 0, DBUF_ENOTFOUND, "tensor 'a' is not in the order list", NULL},
    {{"a", "b", "a", "c"}, 4, DBUF_EDUP, "entry 3: tensor 'a'",
     "listed twice"},
    {{"a", "b", "c", "c"}, 4, DBUF_EDUP, "entry 4: tensor 'c'",
     "three.safetensors"},
};

START_TEST(test_order)
{
  const struct order_case *c = &order_cases[_i];
  const char *p = tpath("three.safetensors");
  write_st("three.safetensors", three_hdr, 24);
  if (c->code != 0) {
    expect_fail(&p, 1, c->names, c->n, c->code, c->sub1, c->sub2);
    return;
  }
  dbuf_st_t *st = NULL, *def = NULL;
  dbuf_diag_t diag;
  ck_assert_int_eq(dbuf_st_open(&p, 1, c->names, c->n, &st, &diag), 0);
  ck_assert_int_eq(dbuf_st_open(&p, 1, NULL, 0, &def, &diag), 0);
  const dbuf_tensors_t *t = dbuf_st_tensors(st);
  ck_assert_int_eq(dbuf_tensors_count(t), 3);
  for (int64_t i = 0; i < 3; i++) {
    dbuf_st_info_t info;
    const char *nm = c->names[i];
    char shape[4] = {(char)('1' + (nm[0] - 'a')), 0};
    assert_tensor(t, i, nm, shape);
    ck_assert_int_eq(dbuf_st_tensor_info(st, i, &info), 0);
    ck_assert_int_eq(info.data_end - info.data_begin, 4 * (nm[0] - 'a' + 1));
  }
  /* the digest covers the order; the default order is a, b, c */
  if (strcmp(c->names[0], "a") == 0)
    ck_assert_uint_eq(dbuf_st_digest(st), dbuf_st_digest(def));
  else
    ck_assert_uint_ne(dbuf_st_digest(st), dbuf_st_digest(def));
  dbuf_st_destroy(st);
  dbuf_st_destroy(def);
}
END_TEST

/* The digest follows the header bytes. */
START_TEST(test_digest)
{
  dbuf_st_t *s1 = NULL, *s2 = NULL, *s3 = NULL;
  dbuf_diag_t diag;
  write_st("d1.safetensors", three_hdr, 24);
  write_st("d2.safetensors", three_hdr, 24);
  write_st("d3.safetensors",
           "{'a':{'dtype':'I32','shape':[1],'data_offsets':[0,4]},"
           "'b':{'dtype':'F32','shape':[2],'data_offsets':[4,12]},"
           "'c':{'dtype':'F32','shape':[3],'data_offsets':[12,24]}}",
           24);
  ck_assert_int_eq(open1("d1.safetensors", &s1, &diag), 0);
  ck_assert_int_eq(open1("d2.safetensors", &s2, &diag), 0);
  ck_assert_int_eq(open1("d3.safetensors", &s3, &diag), 0);
  ck_assert_uint_eq(dbuf_st_digest(s1), dbuf_st_digest(s2));
  ck_assert_uint_ne(dbuf_st_digest(s1), dbuf_st_digest(s3));
  dbuf_st_destroy(s1);
  dbuf_st_destroy(s2);
  dbuf_st_destroy(s3);
}
END_TEST

static Suite *
safetensors_suite(void)
{
  Suite *s = suite_create("safetensors");
  TCase *tc = tcase_create("reader");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_single_file);
  tcase_add_test(tc, test_padding_and_empty);
  tcase_add_loop_test(tc, test_dtype, 0,
                      (int)(sizeof dtype_cases / sizeof dtype_cases[0]));
  tcase_add_test(tc, test_dtype_args);
  tcase_add_loop_test(tc, test_bad_file, 0,
                      (int)(sizeof bad_cases / sizeof bad_cases[0]));
  tcase_add_test(tc, test_args);
  tcase_add_test(tc, test_multi_files);
  tcase_add_test(tc, test_index);
  tcase_add_loop_test(tc, test_bad_index, 0,
                      (int)(sizeof index_cases / sizeof index_cases[0]));
  tcase_add_test(tc, test_index_empty);
  tcase_add_loop_test(tc, test_order, 0,
                      (int)(sizeof order_cases / sizeof order_cases[0]));
  tcase_add_test(tc, test_digest);
  suite_add_tcase(s, tc);
  return s;
}

int
main(void)
{
  SRunner *sr = srunner_create(safetensors_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
