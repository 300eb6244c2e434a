/*
 * Plans (dbuf/plan.h), units and dtypes: grouping into (unit, dtype)
 * buffers, their order, each buffer's layout against a layout built
 * directly from the same tensors, the totals summed here independently.
 */
#include "dbuf/dbuf.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static dbuf_tensors_t *
mk(const char *const *names, const int64_t (*dims)[2], const dbuf_dtype_t *dt, int n)
{
  dbuf_tensors_t *t;
  ck_assert_int_eq(dbuf_tensors_create(&t), 0);
  for (int i = 0; i < n; i++) {
    ck_assert_int_eq(dbuf_tensors_add(t, names[i], dims[i][1] ? 2 : 1, dims[i], NULL), 0);
    if (dt != NULL)
      ck_assert_int_eq(dbuf_tensors_set_dtype(t, i, dt[i]), 0);
  }
  return t;
}

static const char *const names[] = {
    "model.embed_tokens.weight",          "model.layers.0.attn.weight",
    "model.layers.0.input_layernorm.weight", "model.layers.1.attn.weight",
    "model.layers.1.input_layernorm.weight", "model.norm.weight",
    "lm_head.weight"};
static const int64_t dims[][2] = {{32, 8}, {8, 8}, {8, 0}, {8, 8}, {8, 0}, {8, 0}, {32, 8}};

START_TEST(test_dtype_names)
{
  dbuf_dtype_t d;
  ck_assert_int_eq(dbuf_dtype_parse("bf16", &d), 0);
  ck_assert_int_eq(d, DBUF_DTYPE_BF16);
  ck_assert_int_eq(dbuf_dtype_parse("F32", &d), 0);
  ck_assert_int_eq(d, DBUF_DTYPE_F32);
  ck_assert_int_eq(dbuf_dtype_parse("fp8", &d), 0);
  ck_assert_int_eq(d, DBUF_DTYPE_F8_E4M3);
  ck_assert_int_eq(dbuf_dtype_parse("float", &d), 0);
  ck_assert_int_eq(d, DBUF_DTYPE_F32);
  ck_assert_int_eq(dbuf_dtype_parse("bf17", &d), DBUF_ENOTFOUND);
  ck_assert_int_eq(dbuf_dtype_size(DBUF_DTYPE_F64), 8);
  ck_assert_int_eq(dbuf_dtype_size(DBUF_DTYPE_F4), 0);
  ck_assert_int_eq(dbuf_dtype_bits(DBUF_DTYPE_F6_E2M3), 6);
  ck_assert_str_eq(dbuf_dtype_st_name(DBUF_DTYPE_BF16), "BF16");
  ck_assert_str_eq(dbuf_dtype_name(DBUF_DTYPE_F16), "fp16");
  ck_assert(dbuf_dtype_is_float(DBUF_DTYPE_BF16));
  ck_assert(!dbuf_dtype_is_float(DBUF_DTYPE_I32));
  /* The fixed numbers the wire and JSON carry. */
  ck_assert_int_eq(DBUF_DTYPE_BF16, 13);
  ck_assert_int_eq(DBUF_DTYPE_F32, 16);
  /* Every name parses back to its type. */
  for (int i = 1; i < DBUF_DTYPE_COUNT; i++) {
    ck_assert_int_eq(dbuf_dtype_parse(dbuf_dtype_name((dbuf_dtype_t)i), &d), 0);
    ck_assert_int_eq(d, i);
    ck_assert_int_eq(dbuf_dtype_parse(dbuf_dtype_st_name((dbuf_dtype_t)i), &d), 0);
    ck_assert_int_eq(d, i);
  }
}
END_TEST

START_TEST(test_units_layer)
{
  dbuf_tensors_t *t = mk(names, dims, NULL, 7);
  dbuf_units_t *u;
  ck_assert_int_eq(dbuf_units_layer(t, &u, NULL), 0);
  ck_assert_int_eq(dbuf_units_count(u), 3);
  ck_assert_str_eq(dbuf_units_name(u, 0), "root");
  ck_assert_str_eq(dbuf_units_name(u, 1), "model.layers.0");
  ck_assert_str_eq(dbuf_units_name(u, 2), "model.layers.1");
  const int64_t want[] = {0, 1, 1, 2, 2, 0, 0};
  for (int i = 0; i < 7; i++)
    ck_assert_int_eq(dbuf_units_of(u, i), want[i]);
  dbuf_units_destroy(u);
  dbuf_tensors_destroy(t);

  /* The other spellings, and words that only look like one. */
  static const char *const n2[] = {"transformer.h.11.mlp.weight", "blocks.2.w", "x.layer.7",
                                   "layers.x.w", "myh.3.w", "h.3a.w"};
  static const int64_t d2[][2] = {{2, 0}, {2, 0}, {2, 0}, {2, 0}, {2, 0}, {2, 0}};
  t = mk(n2, d2, NULL, 6);
  ck_assert_int_eq(dbuf_units_layer(t, &u, NULL), 0);
  ck_assert_str_eq(dbuf_units_name(u, dbuf_units_of(u, 0)), "transformer.h.11");
  ck_assert_str_eq(dbuf_units_name(u, dbuf_units_of(u, 1)), "blocks.2");
  ck_assert_str_eq(dbuf_units_name(u, dbuf_units_of(u, 2)), "x.layer.7");
  for (int i = 3; i < 6; i++)
    ck_assert_str_eq(dbuf_units_name(u, dbuf_units_of(u, i)), "root");
  dbuf_units_destroy(u);
  dbuf_tensors_destroy(t);
}
END_TEST

/* A units file with text; the reader's code and message. */
static int
read_units(const dbuf_tensors_t *t, const char *path, const char *text, dbuf_units_t **u,
           dbuf_diag_t *d)
{
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(text, f);
  fclose(f);
  return dbuf_units_read(t, path, u, d);
}

START_TEST(test_units_regex_and_file)
{
  dbuf_tensors_t *t = mk(names, dims, NULL, 7);
  dbuf_units_t *u;
  dbuf_diag_t d;
  ck_assert_int_eq(dbuf_units_regex(t, "layers\\.([0-9]+)\\.", &u, NULL), 0);
  ck_assert_int_eq(dbuf_units_count(u), 3);
  ck_assert_str_eq(dbuf_units_name(u, dbuf_units_of(u, 1)), "0");
  ck_assert_str_eq(dbuf_units_name(u, dbuf_units_of(u, 4)), "1");
  ck_assert_str_eq(dbuf_units_name(u, dbuf_units_of(u, 6)), "root");
  dbuf_units_destroy(u);
  ck_assert_int_eq(dbuf_units_regex(t, "layers", &u, &d), DBUF_EINVAL);
  ck_assert_ptr_nonnull(strstr(d.msg, "no capture group"));
  ck_assert_int_eq(dbuf_units_regex(t, "(", &u, &d), DBUF_EINVAL);

  char path[] = "/tmp/check_plan_XXXXXX";
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  FILE *f = fdopen(fd, "w");
  /* File order differs from model order: unit ids follow the model. */
  fprintf(f, "# units\nlm_head.weight  out\nmodel.layers.0.attn.weight l0\n"
             "model.layers.0.input_layernorm.weight l0\nmodel.layers.1.attn.weight l1\n"
             "model.layers.1.input_layernorm.weight l1\nmodel.norm.weight out\n"
             "model.embed_tokens.weight in\n");
  fclose(f);
  ck_assert_int_eq(dbuf_units_read(t, path, &u, NULL), 0);
  ck_assert_int_eq(dbuf_units_count(u), 4);
  ck_assert_str_eq(dbuf_units_name(u, 0), "in");
  ck_assert_str_eq(dbuf_units_name(u, 1), "l0");
  ck_assert_str_eq(dbuf_units_name(u, 3), "out");
  dbuf_units_destroy(u);

  ck_assert_int_eq(read_units(t, path, "lm_head.weight out\nmodel.nothing x\n", &u, &d),
                   DBUF_ENOTFOUND);
  ck_assert_ptr_nonnull(strstr(d.msg, ":2: tensor model.nothing is not a tensor of the model"));
  ck_assert_int_eq(read_units(t, path, "lm_head.weight out\n", &u, &d), DBUF_ENOTFOUND);
  ck_assert_ptr_nonnull(strstr(d.msg, "tensor model.embed_tokens.weight has no unit"));
  ck_assert_int_eq(read_units(t, path, "lm_head.weight out\nlm_head.weight in\n", &u, &d),
                   DBUF_EDUP);
  ck_assert_ptr_nonnull(strstr(d.msg, ":2: tensor lm_head.weight is already given a unit on line 1"));
  ck_assert_int_eq(read_units(t, path, "lm_head.weight\n", &u, &d), DBUF_EPARSE);
  ck_assert_ptr_nonnull(strstr(d.msg, ":1: expected 'TENSOR UNIT'"));
  unlink(path);
  dbuf_tensors_destroy(t);
}
END_TEST

/* What a re: pattern costs is known before it is compiled: the realistic
 * patterns pass, each limit is refused with its own message (and quickly:
 * before regcomp, which takes 2^k memory for k nested '+'). */
static const struct {
  const char *re; /* NULL: "(", one-atom brackets and dots, ")", of len bytes */
  size_t len;
  const char *want; /* NULL (accepted) or a part of the message */
} regex_cases[] = {
    {"layers\\.([0-9]+)\\.", 0, NULL},
    {"(.*)\\.weight", 0, NULL},
    {"model\\.(layers\\.[0-9]+)", 0, NULL},
    {"^(model\\.)?(layers\\.[0-9]{1,3})\\.", 0, NULL},
    {"([a-z_]+)\\.(weight|bias)$", 0, NULL},
    {"([[:alpha:]]+)[].[]", 0, NULL},
    {"((((a+)+)+)+)", 0, NULL}, /* 4 deep: the limit */
    {"(a)a{997}", 0, NULL},     /* 2 + 998 atoms: 1000, the limit */
    {NULL, DBUF_UNITS_REGEX_MAX_BYTES, NULL},
    {NULL, DBUF_UNITS_REGEX_MAX_BYTES + 1, "...': 1025 bytes long (at most 1024)"},
    {"(a)a{998}", 0, "expand it to 1001 atoms (at most 1000)"},
    {"(((((a+)+)+)+)+)", 0, "nests repetitions 5 deep (at most 4)"},
    {"(a++++++++++++++++++++)", 0,
     "'(a++++++++++++++++++++)': nests repetitions 20 deep (at most 4)"},
    {"(a{1,100}){1,100}", 0, "expand it to 10201 atoms (at most 1000)"},
    {"((a{32767}){32767}){32767}", 0, "expand it to 35183298379776 atoms (at most 1000)"},
    {"(((a{32767}){32767}){32767}){32767}", 0, "expand it to more than 1125899906842624 atoms"},
    {"(a?)*", 0, "repeats a part that can match the empty string"},
    {"(a|)+", 0, "repeats a part that can match the empty string"},
    {"(^|x){0,3}", 0, "repeats a part that can match the empty string"},
    {"((b*)?c)", 0, "repeats a part that can match the empty string"},
    {"(a)\\1", 0, "back-references (\\1 to \\9) are not taken"},
    {"(", 0, "Unmatched ( or \\("},
};

START_TEST(test_units_regex_cost)
{
  dbuf_tensors_t *t = mk(names, dims, NULL, 7);
  dbuf_units_t *u = NULL;
  dbuf_diag_t d;
  char made[DBUF_UNITS_REGEX_MAX_BYTES + 2];
  const char *re = regex_cases[_i].re, *want = regex_cases[_i].want;
  if (re == NULL) {
    size_t n = 0, len = regex_cases[_i].len;
    ck_assert_uint_lt(len, sizeof made);
    made[n++] = '(';
    for (; n + 5 < len; n += 5)
      memcpy(made + n, "[a-z]", 5);
    for (; n + 1 < len; n++)
      made[n] = '.';
    made[n++] = ')';
    made[n] = '\0';
    re = made;
  }
  int rc = dbuf_units_regex(t, re, &u, &d);
  if (want == NULL) {
    ck_assert_msg(rc == 0, "%s: %s", re, d.msg);
    ck_assert_ptr_nonnull(u);
  } else {
    ck_assert_int_eq(rc, DBUF_EINVAL);
    ck_assert_ptr_null(u);
    ck_assert_msg(strstr(d.msg, want) != NULL, "%s: '%s' lacks '%s'", re, d.msg, want);
    ck_assert_msg(strncmp(d.msg, "regular expression '", 20) == 0, "%s", d.msg);
    /* The pattern quoted whole, or its first 60 bytes and "...". */
    ck_assert_int_eq(strncmp(d.msg + 20, re, strlen(re) > 60 ? 60 : strlen(re)), 0);
  }
  dbuf_units_destroy(u);
  dbuf_tensors_destroy(t);
}
END_TEST

/* Unit names are checked where they come in: a units file (FILE:LINE), a
 * capture (the tensor), explicit names; as the wire and JSON need them. */
START_TEST(test_unit_names)
{
  dbuf_tensors_t *t = mk(names, dims, NULL, 7);
  dbuf_units_t *u = NULL;
  dbuf_diag_t d;
  char path[] = "/tmp/check_plan_XXXXXX";
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  close(fd);
  static const struct {
    const char *text, *want;
  } bad[] = {
      {"lm_head.weight out\nmodel.norm.weight a\377b\n", ":2: unit name 'a\\xffb' is not UTF-8"},
      {"lm_head.weight \xc3\n", ":1: unit name '\\xc3' is not UTF-8"},
      {"lm_head.weight \xed\xa0\x80\n", ":1: unit name '\\xed\\xa0\\x80' is not UTF-8"},
      {"lm_head.weight a\001b\n", ":1: unit name 'a\\x01b' has a blank or control character"},
      {"lm_head.weight a\x7f\n", ":1: unit name 'a\\x7f' has a blank or control character"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ck_assert_int_eq(read_units(t, path, bad[i].text, &u, &d), DBUF_EPARSE);
    ck_assert_msg(strstr(d.msg, bad[i].want) != NULL, "case %zu: %s", i, d.msg);
    ck_assert_ptr_null(u);
  }
  /* A NUL would end the line early for strtok: refused, with its line. */
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fwrite("lm_head.weight out\nmodel.norm.weight a\0b\n", 1, 41, f);
  fclose(f);
  ck_assert_int_eq(dbuf_units_read(t, path, &u, &d), DBUF_EPARSE);
  ck_assert_ptr_nonnull(strstr(d.msg, ":2: a NUL byte (binary file?)"));

  /* DBUF_WIRE_UNIT_MAX bytes pass, one more does not: every tensor in
   * one unit of 4096 bytes, then lm_head.weight's one byte longer. */
  size_t big = (size_t)DBUF_WIRE_UNIT_MAX + 1;
  char *text = malloc(7 * (big + 64)), *at = text;
  ck_assert_ptr_nonnull(text);
  for (int i = 0; i < 7; i++) {
    at += sprintf(at, "%s ", names[i]);
    memset(at, 'u', big - 1);
    at += big - 1;
    *at++ = '\n';
  }
  *at = '\0';
  ck_assert_int_eq(read_units(t, path, text, &u, &d), 0);
  ck_assert_int_eq(dbuf_units_count(u), 1);
  ck_assert_uint_eq(strlen(dbuf_units_name(u, 0)), DBUF_WIRE_UNIT_MAX);
  dbuf_units_destroy(u);
  u = NULL;
  strcpy(at - 1, "u\n");
  ck_assert_int_eq(read_units(t, path, text, &u, &d), DBUF_EPARSE);
  ck_assert_ptr_nonnull(strstr(d.msg, ":7: unit name of 4097 bytes (at most 4096)"));
  free(text);
  unlink(path);

  /* Explicit names, as the file reader hands them on. */
  const char *un[7] = {"a", "a", "a", "a", "a", "a", "b c"};
  ck_assert_int_eq(dbuf_units_from_names(t, un, &u, &d), DBUF_EINVAL);
  ck_assert_str_eq(d.msg, "tensor lm_head.weight: unit name 'b c' has a blank or control "
                          "character");
  un[6] = NULL;
  ck_assert_int_eq(dbuf_units_from_names(t, un, &u, &d), DBUF_EINVAL);
  ck_assert_str_eq(d.msg, "tensor lm_head.weight: no unit name");
  ck_assert_ptr_null(u);
  dbuf_tensors_destroy(t);

  /* A capture that ends inside a character, and one longer than a unit
   * name can be, name their tensor (a name that fills the line). */
  ck_assert_int_eq(dbuf_tensors_create(&t), 0);
  int64_t one[1] = {1};
  char *longname = malloc(big + 8);
  ck_assert_ptr_nonnull(longname);
  memset(longname, 'x', big);
  strcpy(longname + big, ".w");
  ck_assert_int_eq(dbuf_tensors_add(t, "blk.\xc3\xa9.w", 1, one, NULL), 0);
  ck_assert_int_eq(dbuf_tensors_add(t, longname, 1, one, NULL), 0);
  ck_assert_int_eq(dbuf_units_regex(t, "^(blk\\..)", &u, &d), DBUF_EINVAL);
  ck_assert_str_eq(d.msg, "tensor blk.\xc3\xa9.w: unit name 'blk.\\xc3' is not UTF-8 (the "
                          "capture of '^(blk\\..)')");
  ck_assert_int_eq(dbuf_units_regex(t, "^(blk\\...)", &u, &d), 0);
  ck_assert_str_eq(dbuf_units_name(u, 0), "blk.\xc3\xa9");
  dbuf_units_destroy(u);
  u = NULL;
  ck_assert_int_eq(dbuf_units_regex(t, "^(x+)", &u, &d), DBUF_EINVAL);
  ck_assert_int_eq(strncmp(d.msg, "tensor xxxx", 11), 0); /* the rest cut: 4097 x's */
  ck_assert_ptr_null(u);
  free(longname);
  dbuf_tensors_destroy(t);
}
END_TEST

/* Layout of exactly the listed tensors, built directly. */
static dbuf_layout_t *
direct(const dbuf_tensors_t *t, const int *ids, int n, const dbuf_layout_params_t *p)
{
  dbuf_tensors_t *s;
  dbuf_layout_t *l;
  ck_assert_int_eq(dbuf_tensors_create(&s), 0);
  for (int i = 0; i < n; i++)
    ck_assert_int_eq(dbuf_tensors_add(s, dbuf_tensors_name(t, ids[i]),
                                      dbuf_tensors_ndim(t, ids[i]),
                                      dbuf_tensors_dims(t, ids[i]), NULL),
                     0);
  ck_assert_int_eq(dbuf_layout_build(s, p, &l, NULL), 0);
  dbuf_tensors_destroy(s);
  return l;
}

static void
same_layout(const dbuf_layout_t *a, const dbuf_layout_t *b)
{
  uint64_t da, db;
  ck_assert_int_eq(dbuf_wire_digest(a, &da, NULL), 0);
  ck_assert_int_eq(dbuf_wire_digest(b, &db, NULL), 0);
  ck_assert_uint_eq(da, db);
}

START_TEST(test_plan_layer_dtypes)
{
  /* Norms in fp32, the rest without a dtype (the default bf16). */
  const dbuf_dtype_t dt[] = {0, 0, DBUF_DTYPE_F32, 0, DBUF_DTYPE_F32, DBUF_DTYPE_F32, 0};
  dbuf_tensors_t *t = mk(names, dims, dt, 7);
  dbuf_units_t *u;
  dbuf_plan_t *p;
  dbuf_layout_params_t lp;
  dbuf_layout_params_init(&lp);
  lp.nranks = 4;
  ck_assert_int_eq(dbuf_units_layer(t, &u, NULL), 0);
  ck_assert_int_eq(dbuf_plan_build(t, u, DBUF_DTYPE_BF16, &lp, 0, &p, NULL), 0);
  /* root: bf16 {0, 6}, fp32 {5}; layers.0: bf16 {1}, fp32 {2}; layers.1 likewise. */
  ck_assert_int_eq(dbuf_plan_nbuffers(p), 6);
  ck_assert_int_eq(dbuf_plan_nranks(p), 4);
  static const char *const units[] = {"root", "root", "model.layers.0", "model.layers.0",
                                      "model.layers.1", "model.layers.1"};
  static const dbuf_dtype_t types[] = {DBUF_DTYPE_BF16, DBUF_DTYPE_F32, DBUF_DTYPE_BF16,
                                       DBUF_DTYPE_F32, DBUF_DTYPE_BF16, DBUF_DTYPE_F32};
  static const int members[6][2] = {{0, 6}, {5, -1}, {1, -1}, {2, -1}, {3, -1}, {4, -1}};
  int64_t logical = 0, bytes = 0, rank_bytes[4] = {0};
  for (int b = 0; b < 6; b++) {
    dbuf_plan_buffer_t pb;
    ck_assert_int_eq(dbuf_plan_buffer(p, b, &pb), 0);
    ck_assert_str_eq(pb.unit, units[b]);
    ck_assert_int_eq(pb.dtype, types[b]);
    ck_assert_int_eq(pb.elem_size, types[b] == DBUF_DTYPE_F32 ? 4 : 2);
    int n = members[b][1] < 0 ? 1 : 2;
    ck_assert_int_eq(dbuf_layout_ntensors(pb.layout), n);
    for (int i = 0; i < n; i++)
      ck_assert_int_eq(pb.model_ids[i], members[b][i]);
    dbuf_layout_t *l = direct(t, members[b], n, &lp);
    same_layout(pb.layout, l);
    dbuf_layout_destroy(l);
    for (int i = 0; i < n; i++)
      logical += dbuf_tensors_numel(t, members[b][i]);
    bytes += dbuf_layout_size(pb.layout) * pb.elem_size;
    for (int r = 0; r < 4; r++) {
      int64_t s, e;
      dbuf_layout_rank_range(pb.layout, r, &s, &e);
      rank_bytes[r] += (e - s) * pb.elem_size;
    }
  }
  dbuf_plan_totals_t tot;
  ck_assert_int_eq(dbuf_plan_totals(p, &tot), 0);
  ck_assert_int_eq(tot.buffers, 6);
  ck_assert_int_eq(tot.tensors, 7);
  ck_assert_int_eq(tot.logical_elems, logical);
  ck_assert_int_eq(tot.logical_elems, 32 * 8 * 2 + 64 * 2 + 8 * 3);
  ck_assert_int_eq(tot.buffer_bytes, bytes);
  int64_t mx = 0, mn = INT64_MAX;
  for (int r = 0; r < 4; r++) {
    int64_t rb;
    ck_assert_int_eq(dbuf_plan_rank_bytes(p, r, &rb), 0);
    ck_assert_int_eq(rb, rank_bytes[r]);
    mx = rb > mx ? rb : mx;
    mn = rb < mn ? rb : mn;
  }
  ck_assert_int_eq(tot.max_rank_bytes, mx);
  ck_assert_int_eq(tot.min_rank_bytes, mn);
  dbuf_plan_destroy(p);
  dbuf_units_destroy(u);
  dbuf_tensors_destroy(t);
}
END_TEST

START_TEST(test_plan_one_buffer_is_the_layout)
{
  dbuf_tensors_t *t = mk(names, dims, NULL, 7);
  dbuf_plan_t *p;
  dbuf_layout_params_t lp;
  dbuf_layout_t *l;
  dbuf_layout_params_init(&lp);
  lp.nranks = 3;
  ck_assert_int_eq(dbuf_plan_build(t, NULL, DBUF_DTYPE_BF16, &lp, 0, &p, NULL), 0);
  ck_assert_int_eq(dbuf_plan_nbuffers(p), 1);
  dbuf_plan_buffer_t pb;
  ck_assert_int_eq(dbuf_plan_buffer(p, 0, &pb), 0);
  ck_assert_str_eq(pb.unit, "all");
  ck_assert_int_eq(pb.dtype, DBUF_DTYPE_BF16);
  ck_assert_int_eq(dbuf_layout_build(t, &lp, &l, NULL), 0);
  same_layout(pb.layout, l);
  dbuf_layout_destroy(l);
  dbuf_plan_destroy(p);

  /* Owners by model id go to each buffer's tensors. */
  dbuf_units_t *u;
  const int owners[] = {0, 1, 2, 0, 1, 2, 0};
  lp.kind = DBUF_LAYOUT_TENSOR;
  lp.owners = owners;
  lp.nowners = 7;
  ck_assert_int_eq(dbuf_units_layer(t, &u, NULL), 0);
  ck_assert_int_eq(dbuf_plan_build(t, u, DBUF_DTYPE_BF16, &lp, 0, &p, NULL), 0);
  ck_assert_int_eq(dbuf_plan_nbuffers(p), 3);
  for (int b = 0; b < 3; b++) {
    ck_assert_int_eq(dbuf_plan_buffer(p, b, &pb), 0);
    for (int64_t i = 0; i < dbuf_layout_ntensors(pb.layout); i++)
      ck_assert_int_eq(dbuf_layout_owners(pb.layout)[i], owners[pb.model_ids[i]]);
  }
  dbuf_plan_destroy(p);
  dbuf_units_destroy(u);
  dbuf_tensors_destroy(t);
}
END_TEST

START_TEST(test_plan_errors_and_assembly)
{
  dbuf_tensors_t *t = mk(names, dims, NULL, 7);
  dbuf_plan_t *p;
  dbuf_layout_params_t lp;
  dbuf_diag_t d;
  dbuf_layout_params_init(&lp);
  lp.nranks = 2;
  ck_assert_int_eq(dbuf_plan_build(t, NULL, DBUF_DTYPE_F4, &lp, 0, &p, &d), DBUF_EINVAL);
  /* Tensors' own dtypes without a byte size: the first in id order is
   * named, whichever dtype comes first in the dtype table. */
  ck_assert_int_eq(dbuf_tensors_set_dtype(t, 5, DBUF_DTYPE_F4), 0);
  ck_assert_int_eq(dbuf_tensors_set_dtype(t, 3, DBUF_DTYPE_F6_E3M2), 0);
  ck_assert_int_eq(dbuf_plan_build(t, NULL, DBUF_DTYPE_BF16, &lp, 0, &p, &d), DBUF_EINVAL);
  ck_assert_msg(strstr(d.msg, "tensor ") != NULL &&
                    strstr(d.msg, dbuf_tensors_name(t, 3)) != NULL &&
                    strstr(d.msg, dbuf_dtype_name(DBUF_DTYPE_F6_E3M2)) != NULL,
                "%s", d.msg);
  ck_assert_int_eq(dbuf_tensors_set_dtype(t, 3, DBUF_DTYPE_NONE), 0);
  ck_assert_int_eq(dbuf_plan_build(t, NULL, DBUF_DTYPE_BF16, &lp, 0, &p, &d), DBUF_EINVAL);
  ck_assert_msg(strstr(d.msg, dbuf_tensors_name(t, 5)) != NULL, "%s", d.msg);
  ck_assert_int_eq(dbuf_tensors_set_dtype(t, 5, DBUF_DTYPE_NONE), 0);
  lp.block_size = 3; /* 8 rows are not a multiple of 3 */
  dbuf_units_t *u;
  ck_assert_int_eq(dbuf_units_layer(t, &u, NULL), 0);
  ck_assert_int_eq(dbuf_plan_build(t, u, DBUF_DTYPE_BF16, &lp, 0, &p, &d), DBUF_EBLOCK);
  ck_assert_ptr_nonnull(strstr(d.msg, "buffer root/bf16: "));
  dbuf_units_destroy(u);
  lp.block_size = 1;

  dbuf_layout_t *a, *b;
  ck_assert_int_eq(dbuf_layout_build(t, &lp, &a, NULL), 0);
  ck_assert_int_eq(dbuf_plan_create(&p), 0);
  ck_assert_int_eq(dbuf_plan_add(p, "u", DBUF_DTYPE_BF16, a, NULL, NULL), 0);
  ck_assert_int_eq(dbuf_layout_build(t, &lp, &b, NULL), 0);
  ck_assert_int_eq(dbuf_plan_add(p, "u", DBUF_DTYPE_BF16, b, NULL, &d), DBUF_EDUP);
  ck_assert_ptr_nonnull(strstr(d.msg, "plan: buffer u/bf16 twice"));
  /* Another dtype of the same unit, the same dtype of another unit, then
   * both again: the keys tell them apart. */
  ck_assert_int_eq(dbuf_layout_build(t, &lp, &b, NULL), 0);
  ck_assert_int_eq(dbuf_plan_add(p, "u", DBUF_DTYPE_F32, b, NULL, NULL), 0);
  ck_assert_int_eq(dbuf_layout_build(t, &lp, &b, NULL), 0);
  ck_assert_int_eq(dbuf_plan_add(p, "u2", DBUF_DTYPE_BF16, b, NULL, NULL), 0);
  ck_assert_int_eq(dbuf_layout_build(t, &lp, &b, NULL), 0);
  ck_assert_int_eq(dbuf_plan_add(p, "u", DBUF_DTYPE_F32, b, NULL, &d), DBUF_EDUP);
  ck_assert_int_eq(dbuf_layout_build(t, &lp, &b, NULL), 0);
  ck_assert_int_eq(dbuf_plan_add(p, "u2", DBUF_DTYPE_BF16, b, NULL, &d), DBUF_EDUP);
  ck_assert_int_eq(dbuf_plan_nbuffers(p), 3);
  lp.nranks = 3;
  ck_assert_int_eq(dbuf_layout_build(t, &lp, &b, NULL), 0);
  ck_assert_int_eq(dbuf_plan_add(p, "v", DBUF_DTYPE_BF16, b, NULL, &d), DBUF_ENRANKS);
  ck_assert_int_eq(dbuf_plan_nbuffers(p), 3);
  dbuf_plan_buffer_t pb;
  ck_assert_int_eq(dbuf_plan_buffer(p, 3, &pb), DBUF_ERANGE);
  ck_assert_int_eq(dbuf_plan_buffer(p, 0, &pb), 0);
  ck_assert_ptr_null(pb.model_ids);
  dbuf_plan_destroy(p);
  dbuf_tensors_destroy(t);
}
END_TEST

/* A tensor name belongs to one buffer: every name seen in an earlier
 * buffer is one DUPLICATE violation naming both buffers, in buffer order;
 * a plan the builder made has none; the callback can stop the check. */
typedef struct {
  int n;
  dbuf_violation_t v[4];
} viols_t;

static int
keep_viol(const dbuf_violation_t *v, void *arg)
{
  viols_t *k = arg;
  if (k->n < 4)
    k->v[k->n] = *v;
  return ++k->n >= 4;
}

static int
stop_first(const dbuf_violation_t *v, void *arg)
{
  (void)v;
  ++*(int *)arg;
  return 1;
}

static void
add_buffer(dbuf_plan_t *p, const char *unit, dbuf_dtype_t dt, const char *const *tn, int n)
{
  static const int64_t d2[][2] = {{4, 2}, {4, 2}, {4, 2}};
  dbuf_tensors_t *t = mk(tn, d2, NULL, n);
  dbuf_layout_params_t lp;
  dbuf_layout_t *l;
  dbuf_layout_params_init(&lp);
  lp.nranks = 2;
  ck_assert_int_eq(dbuf_layout_build(t, &lp, &l, NULL), 0);
  ck_assert_int_eq(dbuf_plan_add(p, unit, dt, l, NULL, NULL), 0);
  dbuf_tensors_destroy(t);
}

START_TEST(test_plan_validate_names)
{
  static const char *const b0[] = {"a", "b"}, *const b1[] = {"c", "a"},
                           *const b2[] = {"b", "d", "e"};
  dbuf_plan_t *p;
  dbuf_diag_t d;
  viols_t k = {0};
  int64_t nv = -1;
  ck_assert_int_eq(dbuf_plan_create(&p), 0);
  add_buffer(p, "u0", DBUF_DTYPE_BF16, b0, 2);
  add_buffer(p, "u1", DBUF_DTYPE_F32, b1, 2);
  add_buffer(p, "u2", DBUF_DTYPE_BF16, b2, 3);
  ck_assert_int_eq(dbuf_plan_validate(p, keep_viol, &k, &nv, &d), DBUF_ELAYOUT);
  ck_assert_int_eq(nv, 2);
  ck_assert_int_eq(k.n, 2);
  ck_assert_int_eq(d.code, DBUF_ELAYOUT);
  ck_assert_str_eq(d.msg, "tensor a is in buffer u0/bf16 and in buffer u1/fp32 (a tensor "
                          "belongs to one buffer)");
  ck_assert_str_eq(k.v[0].msg, d.msg);
  ck_assert_int_eq(k.v[0].kind, DBUF_VIOL_DUPLICATE);
  ck_assert_int_eq(k.v[0].tensor, 1); /* "a" in u1 */
  ck_assert_int_eq(k.v[0].other, 0);  /* "a" in u0 */
  ck_assert_int_eq(k.v[0].a, 0);
  ck_assert_int_eq(k.v[0].b, 1);
  ck_assert_int_eq(k.v[0].rank, -1);
  ck_assert_int_eq(k.v[1].tensor, 0); /* "b" in u2 */
  ck_assert_int_eq(k.v[1].other, 1);  /* "b" in u0 */
  ck_assert_int_eq(k.v[1].a, 0);
  ck_assert_int_eq(k.v[1].b, 2);
  ck_assert_ptr_nonnull(strstr(k.v[1].msg, "tensor b is in buffer u0/bf16 and in buffer u2/bf16"));
  int calls = 0;
  ck_assert_int_eq(dbuf_plan_validate(p, stop_first, &calls, &nv, NULL), DBUF_ELAYOUT);
  ck_assert_int_eq(calls, 1);
  ck_assert_int_eq(nv, 1);
  ck_assert_int_eq(dbuf_plan_validate(NULL, NULL, NULL, NULL, &d), DBUF_EINVAL);
  dbuf_plan_destroy(p);

  /* The builder's plans hold each tensor once. */
  dbuf_tensors_t *t = mk(names, dims, NULL, 7);
  dbuf_units_t *u;
  dbuf_layout_params_t lp;
  dbuf_layout_params_init(&lp);
  lp.nranks = 2;
  ck_assert_int_eq(dbuf_units_layer(t, &u, NULL), 0);
  ck_assert_int_eq(dbuf_plan_build(t, u, DBUF_DTYPE_BF16, &lp, 0, &p, NULL), 0);
  ck_assert_int_gt(dbuf_plan_nbuffers(p), 1);
  ck_assert_int_eq(dbuf_plan_validate(p, NULL, NULL, &nv, NULL), 0);
  ck_assert_int_eq(nv, 0);
  dbuf_plan_destroy(p);
  dbuf_units_destroy(u);
  dbuf_tensors_destroy(t);
}
END_TEST

/* A plan of many buffers (re: units of one tensor each) is assembled in
 * linear time: 200,000 buffers are added in about a second, well inside
 * the 30 s timeout of their test case even on a loaded machine, where a scan
 * of the earlier buffers on each add (2e10 comparisons, a minute or more)
 * is not.  The last one is found as a duplicate, the others keep their
 * order. */
START_TEST(test_plan_many_buffers)
{
  static const char *const one[] = {"w"};
  static const int64_t d1[][2] = {{4, 2}};
  dbuf_tensors_t *t = mk(one, d1, NULL, 1);
  dbuf_layout_params_t lp;
  dbuf_layout_params_init(&lp);
  lp.nranks = 2;
  dbuf_plan_t *p;
  ck_assert_int_eq(dbuf_plan_create(&p), 0);
  const int n = 200000;
  char unit[32];
  for (int i = 0; i < n; i++) {
    dbuf_layout_t *l;
    ck_assert_int_eq(dbuf_layout_build(t, &lp, &l, NULL), 0);
    snprintf(unit, sizeof unit, "u%d", i);
    ck_assert_int_eq(dbuf_plan_add(p, unit, DBUF_DTYPE_BF16, l, NULL, NULL), 0);
  }
  dbuf_layout_t *l;
  dbuf_diag_t d;
  ck_assert_int_eq(dbuf_layout_build(t, &lp, &l, NULL), 0);
  ck_assert_int_eq(dbuf_plan_add(p, "u199999", DBUF_DTYPE_BF16, l, NULL, &d), DBUF_EDUP);
  ck_assert_ptr_nonnull(strstr(d.msg, "plan: buffer u199999/bf16 twice"));
  ck_assert_int_eq(dbuf_plan_nbuffers(p), n);
  dbuf_plan_buffer_t pb;
  ck_assert_int_eq(dbuf_plan_buffer(p, 12345, &pb), 0);
  ck_assert_str_eq(pb.unit, "u12345");
  /* Every buffer holds "w": each after the first is one duplicate, found
   * in linear time too. */
  int64_t nv = 0;
  ck_assert_int_eq(dbuf_plan_validate(p, NULL, NULL, &nv, NULL), DBUF_ELAYOUT);
  ck_assert_int_eq(nv, n - 1);
  dbuf_plan_destroy(p);
  dbuf_tensors_destroy(t);
}
END_TEST

/* The plan JSON: version 2 written and read back to the same buffers, a
 * version 1 file read as one buffer (its dtype or bf16), and each malformed
 * input one message naming the buffer and the key. */
START_TEST(test_plan_json)
{
  const dbuf_dtype_t dt[] = {0, 0, DBUF_DTYPE_F32, 0, DBUF_DTYPE_F32, DBUF_DTYPE_F32, 0};
  dbuf_tensors_t *t = mk(names, dims, dt, 7);
  dbuf_units_t *u;
  dbuf_plan_t *p, *q;
  dbuf_layout_params_t lp;
  dbuf_diag_t d;
  char *text;
  size_t len;
  dbuf_layout_params_init(&lp);
  lp.nranks = 3;
  ck_assert_int_eq(dbuf_units_layer(t, &u, NULL), 0);
  ck_assert_int_eq(dbuf_plan_build(t, u, DBUF_DTYPE_BF16, &lp, 0, &p, NULL), 0);
  ck_assert_int_eq(dbuf_plan_to_json(p, 0, &text, &len), 0);
  ck_assert_ptr_nonnull(strstr(text, "\"version\": 2,"));
  ck_assert_int_eq(dbuf_plan_from_json("p.json", text, len, &q, &d), 0);
  ck_assert_int_eq(dbuf_plan_nbuffers(q), 6);
  for (int64_t b = 0; b < 6; b++) {
    dbuf_plan_buffer_t x, y;
    ck_assert_int_eq(dbuf_plan_buffer(p, b, &x), 0);
    ck_assert_int_eq(dbuf_plan_buffer(q, b, &y), 0);
    ck_assert_str_eq(x.unit, y.unit);
    ck_assert_int_eq(x.dtype, y.dtype);
    ck_assert_ptr_null(y.model_ids);
    same_layout(x.layout, y.layout);
  }
  dbuf_plan_destroy(q);
  /* A version 2 document is not one layout. */
  dbuf_layout_t *l = NULL;
  ck_assert_int_eq(dbuf_layout_from_json("p.json", text, len, &l, &d), DBUF_EPARSE);
  ck_assert_str_eq(d.msg, "p.json: a plan of 6 buffers (\"buffers\", version 2), not one layout");
  free(text);
  dbuf_plan_destroy(p);
  static const struct {
    const char *json, *msg;
    int code;
  } bad[] = {
      {"{\"version\": 3}", "b.json: \"version\" must be 1 or 2", DBUF_EPARSE},
      {"{\"version\": 2}", "b.json: version 2 without \"buffers\"", DBUF_EPARSE},
      {"{\"version\": 2, \"buffers\": []}", "b.json: \"buffers\" must be a non-empty array",
       DBUF_EPARSE},
      {"{\"version\": 1, \"buffers\": []}", "b.json: \"buffers\" needs \"version\": 2",
       DBUF_EPARSE},
      {"{\"version\": 2, \"buffers\": [{\"dtype\": \"bf16\"}]}",
       "b.json: buffers[0]: \"unit\" must be a non-empty string without blanks or control "
       "characters",
       DBUF_EPARSE},
      {"{\"version\": 2, \"buffers\": [{\"unit\": \"a b\", \"dtype\": \"bf16\"}]}",
       "b.json: buffers[0]: unit name 'a b' has a blank or control character", DBUF_EPARSE},
      {"{\"version\": 2, \"buffers\": [{\"unit\": \"u\"}]}", "b.json: buffers[0]: missing \"dtype\"",
       DBUF_EPARSE},
      {"{\"version\": 2, \"buffers\": [{\"unit\": \"u\", \"dtype\": \"bf16\", \"layout\": "
       "\"unpadded\", \"dp_size\": 1, \"rank_offsets\": [0], \"tensors\": [{\"name\": \"a\", "
       "\"shape\": [2], \"offset\": 0}]}]}",
       "b.json: buffer u/bf16: missing \"size\"", DBUF_EPARSE},
      {"{\"version\": 2, \"buffers\": [{\"unit\": \"u\", \"dtype\": \"bf16\", \"layout\": "
       "\"unpadded\", \"dp_size\": 1, \"size\": 2, \"rank_offsets\": [0], \"tensors\": [{\"name\": "
       "\"a\", \"shape\": [2], \"offset\": 0}]}, {\"unit\": \"u\", \"dtype\": \"BF16\", \"layout\": "
       "\"unpadded\", \"dp_size\": 1, \"size\": 2, \"rank_offsets\": [0], \"tensors\": [{\"name\": "
       "\"a\", \"shape\": [2], \"offset\": 0}]}]}",
       "b.json: plan: buffer u/bf16 twice", DBUF_EDUP},
      {"{\"version\": 2, \"buffers\": [{\"unit\": \"u\", \"dtype\": \"bf16\", \"layout\": "
       "\"unpadded\", \"dp_size\": 1, \"size\": 9223372036854775807, \"rank_offsets\": [0], "
       "\"tensors\": [{\"name\": \"a\", \"shape\": [4611686018427387904, 4], \"offset\": 0}]}]}",
       NULL, DBUF_EOVERFLOW},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    q = NULL;
    int rc = dbuf_plan_from_json("b.json", bad[i].json, strlen(bad[i].json), &q, &d);
    ck_assert_msg(rc != 0 && (bad[i].msg != NULL || rc == bad[i].code || rc == DBUF_ESHAPE),
                  "case %zu: %d %s", i, rc, d.msg);
    if (bad[i].msg != NULL) {
      ck_assert_int_eq(rc, bad[i].code);
      ck_assert_str_eq(d.msg, bad[i].msg);
    }
    ck_assert_ptr_null(q);
  }
  /* Version 1: one buffer "all", its dtype or bf16. */
  static const char v1[] = "{\"version\": 1, \"layout\": \"unpadded\", \"dp_size\": 1, "
                           "\"size\": 2, \"rank_offsets\": [0], \"tensors\": [{\"name\": \"a\", "
                           "\"shape\": [2], \"offset\": 0}]}";
  ck_assert_int_eq(dbuf_plan_from_json("v1.json", v1, strlen(v1), &q, &d), 0);
  dbuf_plan_buffer_t b;
  ck_assert_int_eq(dbuf_plan_buffer(q, 0, &b), 0);
  ck_assert_str_eq(b.unit, "all");
  ck_assert_int_eq(b.dtype, DBUF_DTYPE_BF16);
  dbuf_plan_destroy(q);
  dbuf_units_destroy(u);
  dbuf_tensors_destroy(t);
}
END_TEST

/* What the streaming writers hand over: the text, the number of chunks and
 * the largest; fail_at > 0 makes that call fail. */
typedef struct {
  char *text;
  size_t len, cap, biggest;
  int calls, fail_at;
} sink_t;

static int
sink_write(void *arg, const char *data, size_t len)
{
  sink_t *s = arg;
  ck_assert_uint_gt(len, 0);
  if (++s->calls == s->fail_at)
    return -1;
  ck_assert_int_eq(s->fail_at == 0 || s->calls < s->fail_at, 1); /* no call after a failure */
  if (s->len + len > s->cap) {
    s->cap = 2 * (s->len + len);
    ck_assert_ptr_nonnull(s->text = realloc(s->text, s->cap));
  }
  memcpy(s->text + s->len, data, len);
  s->len += len;
  if (len > s->biggest)
    s->biggest = len;
  return 0;
}

/* The streamed document equals the string one byte for byte, in chunks of
 * at most 64 KiB. */
static void
same_stream(const char *text, size_t len, const sink_t *s)
{
  ck_assert_uint_eq(s->len, len);
  ck_assert_int_eq(memcmp(s->text, text, len), 0);
  ck_assert_uint_le(s->biggest, (size_t)64 << 10);
  ck_assert_int_ge(s->calls, (int)(len >> 16));
}

/* Layout l (or plan p when l is NULL), with and without pieces: streamed
 * and as one string, the same bytes, holding has. */
static void
check_stream(const dbuf_layout_t *l, const dbuf_plan_t *p, const char *has)
{
  for (unsigned flags = 0; flags <= DBUF_JSON_PIECES; flags += DBUF_JSON_PIECES) {
    sink_t s = {0};
    char *text;
    size_t len;
    if (l != NULL) {
      ck_assert_int_eq(dbuf_layout_to_json(l, flags, &text, &len), 0);
      ck_assert_int_eq(dbuf_layout_write_json(l, flags, sink_write, &s), 0);
    } else {
      ck_assert_int_eq(dbuf_plan_to_json(p, flags, &text, &len), 0);
      ck_assert_int_eq(dbuf_plan_write_json(p, flags, sink_write, &s), 0);
    }
    same_stream(text, len, &s);
    ck_assert_ptr_nonnull(strstr(s.text, has));
    free(s.text);
    free(text);
  }
}

/* 10,000 tensors in 100 layers (1-D and 2-D, a name with a quote, a
 * backslash): the layout and the one-buffer plan
 * (version 1), with and without pieces, and the plan of one buffer per
 * layer and dtype (version 2), streamed and as one string. */
START_TEST(test_plan_json_stream)
{
  enum { N = 10000 };
  dbuf_tensors_t *t;
  dbuf_units_t *u;
  dbuf_plan_t *p;
  dbuf_layout_t *l;
  dbuf_layout_params_t lp;
  char name[64];
  ck_assert_int_eq(dbuf_tensors_create(&t), 0);
  for (int i = 0; i < N; i++) {
    int64_t d[2] = {1 + i % 37, 1 + i % 11};
    snprintf(name, sizeof name, "model.layers.%d.%s%d.weight", i / 100,
             i == 5 ? "q\"u\\ote" : "w", i);
    ck_assert_int_eq(dbuf_tensors_add(t, name, 1 + i % 2, d, NULL), 0);
    ck_assert_int_eq(dbuf_tensors_set_dtype(t, i, i % 3 ? DBUF_DTYPE_BF16 : DBUF_DTYPE_F32), 0);
  }
  dbuf_layout_params_init(&lp);
  lp.nranks = 7;
  lp.kind = DBUF_LAYOUT_PADDED;
  ck_assert_int_eq(dbuf_layout_build(t, &lp, &l, NULL), 0);
  check_stream(l, NULL, "\"model.layers.0.q\\\"u\\\\ote5.weight\"");
  /* One buffer of the unit "all" (version 1, its "dtype" member). */
  dbuf_layout_t *l1;
  ck_assert_int_eq(dbuf_layout_build(t, &lp, &l1, NULL), 0);
  ck_assert_int_eq(dbuf_plan_create(&p), 0);
  ck_assert_int_eq(dbuf_plan_add(p, DBUF_UNIT_ALL, DBUF_DTYPE_F32, l1, NULL, NULL), 0);
  check_stream(NULL, p, "\"version\": 1,\n  \"dtype\": \"fp32\",");
  dbuf_plan_destroy(p);
  /* Version 2: 100 layers x 2 dtypes. */
  ck_assert_int_eq(dbuf_units_layer(t, &u, NULL), 0);
  ck_assert_int_eq(dbuf_plan_build(t, u, DBUF_DTYPE_BF16, &lp, 0, &p, NULL), 0);
  ck_assert_int_eq(dbuf_plan_nbuffers(p), 200);
  check_stream(NULL, p, "\"version\": 2,");
  /* A failing callback stops the writer: DBUF_EIO, no call after it. */
  sink_t f = {.fail_at = 2};
  ck_assert_int_eq(dbuf_plan_write_json(p, 0, sink_write, &f), DBUF_EIO);
  ck_assert_int_eq(f.calls, 2);
  free(f.text); /* the first call's bytes */
  f = (sink_t){.fail_at = 1};
  ck_assert_int_eq(dbuf_layout_write_json(l, 0, sink_write, &f), DBUF_EIO);
  ck_assert_int_eq(f.calls, 1);
  free(f.text);
  ck_assert_int_eq(dbuf_plan_write_json(NULL, 0, sink_write, &f), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_plan_write_json(p, 0, NULL, &f), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_layout_write_json(NULL, 0, sink_write, &f), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_layout_write_json(l, 0, NULL, &f), DBUF_EINVAL);
  dbuf_plan_destroy(p);
  dbuf_units_destroy(u);
  dbuf_layout_destroy(l);
  dbuf_tensors_destroy(t);
}
END_TEST

START_TEST(test_shapes_dtype_column)
{
  dbuf_tensors_t *t;
  dbuf_diag_t d;
  const char text[] = "a 4x4 fp32\nb 4 # no dtype\nc 2x2 BF16\n";
  ck_assert_int_eq(dbuf_shapes_parse("x", text, sizeof text - 1, &t, NULL), 0);
  ck_assert_int_eq(dbuf_tensors_dtype(t, 0), DBUF_DTYPE_F32);
  ck_assert_int_eq(dbuf_tensors_dtype(t, 1), DBUF_DTYPE_NONE);
  ck_assert_int_eq(dbuf_tensors_dtype(t, 2), DBUF_DTYPE_BF16);
  dbuf_tensors_t *c;
  ck_assert_int_eq(dbuf_tensors_dup(t, &c), 0);
  ck_assert_int_eq(dbuf_tensors_dtype(c, 0), DBUF_DTYPE_F32);
  dbuf_tensors_destroy(c);
  dbuf_tensors_destroy(t);
  const char json[] = "[{\"name\": \"a\", \"shape\": [2], \"dtype\": \"F16\"}]";
  ck_assert_int_eq(dbuf_shapes_parse("x", json, sizeof json - 1, &t, NULL), 0);
  ck_assert_int_eq(dbuf_tensors_dtype(t, 0), DBUF_DTYPE_F16);
  dbuf_tensors_destroy(t);
  const char bad[] = "a 4 fp4\n";
  ck_assert_int_eq(dbuf_shapes_parse("x", bad, sizeof bad - 1, &t, &d), DBUF_EPARSE);
  ck_assert_ptr_nonnull(strstr(d.msg, "x:1: tensor a: unknown dtype 'fp4'"));
}
END_TEST

int
main(void)
{
  Suite *s = suite_create("plan");
  TCase *tc = tcase_create("plan");
  tcase_add_test(tc, test_dtype_names);
  tcase_add_test(tc, test_units_layer);
  tcase_add_test(tc, test_units_regex_and_file);
  tcase_add_loop_test(tc, test_units_regex_cost, 0,
                      (int)(sizeof regex_cases / sizeof regex_cases[0]));
  tcase_add_test(tc, test_unit_names);
  tcase_add_test(tc, test_plan_layer_dtypes);
  tcase_add_test(tc, test_plan_one_buffer_is_the_layout);
  tcase_add_test(tc, test_plan_errors_and_assembly);
  tcase_add_test(tc, test_plan_validate_names);
  tcase_add_test(tc, test_shapes_dtype_column);
  tcase_add_test(tc, test_plan_json);
  tcase_add_test(tc, test_plan_json_stream);
  suite_add_tcase(s, tc);
  tc = tcase_create("scale");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, test_plan_many_buffers);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
