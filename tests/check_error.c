/*
 * The error table (dbuf/error.h): every code has a name and a message of
 * its own, DBUF_ERRNO_MAX is one past the last code, unknown codes get the
 * fallbacks; the CLI's one rule from a code to an exit status, checked
 * against the table the README documents; the codes that mean the same
 * thing everywhere (a short buffer, a stopped callback); messages that
 * never repeat their context; dbuf_escape_ctl.
 */
#include "dbuf/error.h"
#include "dbuf/models.h"
#include "dbuf/pattern.h"
#include "dbuf/shapes_io.h"
#include "dbuf/tensors.h"

#include "cli.h"

#include <check.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"

/* The rows of the table, in order, as the test sees them. */
static const struct {
  int code;
  const char *name;
} rows[] = {
#define ROW(name, val, msg) {DBUF_##name, "DBUF_" #name},
    DBUF_ERRNO_MAP(ROW)
#undef ROW
};
#define NROWS ((int)(sizeof rows / sizeof rows[0]))

START_TEST(test_names_and_messages)
{
  for (int i = 0; i < NROWS; i++) {
    int c = rows[i].code;
    const char *m = dbuf_strerror(c);
    ck_assert_msg(c == -(i + 1), "%s is %d, row %d", rows[i].name, c, i);
    ck_assert_ptr_nonnull(m);
    ck_assert_msg(m[0] != '\0', "%s: empty message", rows[i].name);
    ck_assert_str_ne(m, "unknown error");
    ck_assert_str_eq(dbuf_err_name(c), rows[i].name);
    for (int j = 0; j < i; j++) {
      ck_assert_msg(strcmp(m, dbuf_strerror(rows[j].code)) != 0, "%s and %s share \"%s\"",
                    rows[i].name, rows[j].name, m);
      ck_assert_str_ne(dbuf_err_name(c), dbuf_err_name(rows[j].code));
    }
  }
}
END_TEST

START_TEST(test_errno_max_is_last)
{
  ck_assert_int_eq(DBUF_ERRNO_MAX, -(NROWS + 1));
  ck_assert_int_eq(rows[NROWS - 1].code, DBUF_ERRNO_MAX + 1);
  ck_assert_str_eq(dbuf_err_name(DBUF_ERRNO_MAX + 1), rows[NROWS - 1].name);
  ck_assert_str_eq(dbuf_err_name(DBUF_ERRNO_MAX), "DBUF_UNKNOWN");
  for (int i = 0; i < NROWS; i++)
    ck_assert_int_gt(rows[i].code, DBUF_ERRNO_MAX);
}
END_TEST

START_TEST(test_unknown_codes)
{
  static const int unknown[] = {1, 2, 42, INT_MAX, INT_MIN, DBUF_ERRNO_MAX, DBUF_ERRNO_MAX - 1};
  for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
    ck_assert_str_eq(dbuf_strerror(unknown[i]), "unknown error");
    ck_assert_str_eq(dbuf_err_name(unknown[i]), "DBUF_UNKNOWN");
    ck_assert_int_eq(cli_exit_code(unknown[i]), CLI_EXIT_FAIL);
  }
  ck_assert_str_eq(dbuf_strerror(0), "success");
  ck_assert_str_eq(dbuf_err_name(0), "0");
  ck_assert_int_eq(cli_exit_code(0), CLI_EXIT_OK);
}
END_TEST

/* The README's "Exit status" table: these codes are a bad request or input
 * (2); every other code of the table is a failure of the run or a failed
 * check (1). */
START_TEST(test_exit_code_rule)
{
  static const int usage[] = {DBUF_EINVAL,  DBUF_EOVERFLOW, DBUF_ESHAPE,    DBUF_EBLOCK,
                              DBUF_ENRANKS, DBUF_EOWNER,    DBUF_ERANGE,    DBUF_ELAYOUT,
                              DBUF_EPARSE,  DBUF_EIO,       DBUF_EFORMAT,   DBUF_EDUP,
                              DBUF_ENOTFOUND, DBUF_EMISMATCH, DBUF_EUNSUPPORTED,
                              DBUF_EPARALLEL};
  static const int fail[] = {DBUF_ENOMEM, DBUF_ECHECKSUM, DBUF_EVERSION, DBUF_EMPI,
                             DBUF_ETOPO,  DBUF_EBIND,     DBUF_EMLOCK,   DBUF_EVERIFY,
                             DBUF_ENOBUFS, DBUF_ECANCELED};
  const int nu = (int)(sizeof usage / sizeof usage[0]), nf = (int)(sizeof fail / sizeof fail[0]);
  ck_assert_msg(nu + nf == NROWS, "the test places %d codes, the table has %d", nu + nf, NROWS);
  for (int i = 0; i < NROWS; i++) {
    int want = 0;
    for (int k = 0; k < nu; k++)
      want = usage[k] == rows[i].code ? CLI_EXIT_USAGE : want;
    for (int k = 0; k < nf; k++)
      want = fail[k] == rows[i].code ? CLI_EXIT_FAIL : want;
    ck_assert_msg(want != 0, "%s is placed nowhere by the test", rows[i].name);
    ck_assert_msg(cli_exit_code(rows[i].code) == want, "%s: exit %d, want %d", rows[i].name,
                  cli_exit_code(rows[i].code), want);
  }
}
END_TEST

static int
stop_now(int64_t done, int64_t total, void *arg)
{
  (void)done;
  (void)total;
  (void)arg;
  return 1;
}

/* A short output buffer is DBUF_ENOBUFS, a stopped progress callback
 * DBUF_ECANCELED, whatever the function. */
START_TEST(test_shared_codes)
{
  dbuf_tensors_t *t = NULL;
  char small[4];
  int64_t dims[2] = {1000, 2000};
  ck_assert_int_eq(dbuf_tensors_create(&t), 0);
  ck_assert_int_eq(dbuf_tensors_add(t, "w", 2, dims, NULL), 0);
  ck_assert_int_eq(dbuf_tensors_shape_str(t, 0, small, sizeof small), DBUF_ENOBUFS);
  ck_assert_uint_lt(strlen(small), sizeof small);
  ck_assert_int_eq(dbuf_model_summary(0, small, sizeof small), DBUF_ENOBUFS);
  ck_assert_uint_eq(strlen(small), sizeof small - 1);

  dbuf_layout_params_t p;
  dbuf_layout_t *l = NULL;
  dbuf_layout_params_init(&p);
  ck_assert_int_eq(dbuf_layout_build(t, &p, &l, NULL), 0);
  int64_t n = dbuf_layout_size(l);
  unsigned char *buf = malloc((size_t)n);
  ck_assert_ptr_nonnull(buf);
  ck_assert_int_eq(dbuf_pattern_fill(l, 0, n, buf, 1, stop_now, NULL), DBUF_ECANCELED);
  free(buf);
  dbuf_layout_destroy(l);
  dbuf_tensors_destroy(t);
}
END_TEST

/* "a: b: b: c" repeats "b: ": the context was added twice. */
static int
stutters(const char *msg)
{
  const char *seg[32];
  size_t len[32];
  int n = 0;
  for (const char *p = msg; n < 32;) {
    const char *c = strstr(p, ": ");
    seg[n] = p;
    len[n] = c ? (size_t)(c - p) : strlen(p);
    n++;
    if (c == NULL)
      break;
    p = c + 2;
  }
  for (int i = 1; i < n; i++)
    if (len[i] == len[i - 1] && strncmp(seg[i], seg[i - 1], len[i]) == 0)
      return 1;
  return 0;
}

/* Bad shape lists: the message names the file, the line and the tensor once. */
START_TEST(test_no_stutter)
{
  static const struct {
    const char *text, *want;
  } cases[] = {
      {"a 3x4\na 3x4\n", "m.shapes:2: tensor a: duplicate name (tensor 0)"},
      {"a 3x4\nb 3x-1\n", NULL},
      {"a 0x0\n", "m.shapes:1: tensor a: zero-sized non-leading dim 1"},
      {"a 3xq\n", "m.shapes:1: tensor a: shape '3xq': expected a non-negative integer at 'q'"},
      {"[{\"name\":\"a\",\"shape\":[3]},{\"name\":\"a\",\"shape\":[3]}]",
       "m.shapes: entry 1: tensor a: duplicate name (tensor 0)"},
      {"a 4611686018427387904x4\n", NULL},
      /* Lines are parsed ahead of their adds: the first error in the
       * file's order still wins, past the 16 lines parsed ahead too. */
      {"a 3\na 3\nb 3xq\n", "m.shapes:2: tensor a: duplicate name (tensor 0)"},
      {"a 3\nb 3xq\na 3\n", "m.shapes:2: tensor b: shape '3xq': expected a non-negative "
                               "integer at 'q'"},
      {"t0 1\nt1 1\nt2 1\nt3 1\nt4 1\nt5 1\nt6 1\nt7 1\nt8 1\nt9 1\nt10 1\nt11 1\n"
       "t12 1\nt13 1\nt14 1\nt15 1\n# c\nt16 1\nt3 2\nt18 1\nt19 1 q\n",
       "m.shapes:19: tensor t3: duplicate name (tensor 3)"},
      {"t0 1\nt1 1\nt2 1\nt3 1\nt4 1\nt5 1\nt6 1\nt7 1\nt8 1\nt9 1\nt10 1\nt11 1\n"
       "t12 1\nt13 1\nt14 1\nt15 1\nt3 1\n",
       "m.shapes:17: tensor t3: duplicate name (tensor 3)"},
  };
  ck_assert(stutters("f:2: tensor a: tensor a: duplicate name"));
  ck_assert(!stutters("f:2: tensor a: duplicate name"));
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    dbuf_tensors_t *t = NULL;
    dbuf_diag_t d;
    dbuf_diag_clear(&d);
    int rc = dbuf_shapes_parse("m.shapes", cases[i].text, strlen(cases[i].text), &t, &d);
    ck_assert_msg(rc < 0, "case %zu parsed", i);
    ck_assert_int_eq(d.code, rc);
    ck_assert_msg(!stutters(d.msg), "case %zu stutters: %s", i, d.msg);
    if (cases[i].want != NULL)
      ck_assert_str_eq(d.msg, cases[i].want);
    ck_assert_ptr_null(t);
  }
}
END_TEST

START_TEST(test_escape_and_diag)
{
  char out[16];
  ck_assert_uint_eq(dbuf_escape_ctl(out, sizeof out, "a\x1b" "b\x7f"), 10);
  ck_assert_str_eq(out, "a\\x1bb\\x7f");
  /* Truncated: whole escapes only, the full length still returned. */
  ck_assert_uint_eq(dbuf_escape_ctl(out, 4, "ab\ncd"), 8);
  ck_assert_str_eq(out, "ab");
  ck_assert_uint_eq(dbuf_escape_ctl(NULL, 0, "\t"), 4);
  ck_assert_uint_eq(dbuf_escape_ctl(out, sizeof out, NULL), 0);
  ck_assert_str_eq(out, "");
  /* Bytes outside UTF-8 (a lone 0xff, a cut sequence, an overlong '/', a
   * surrogate) are escaped one by one; characters are copied whole, and
   * never cut. */
  ck_assert_uint_eq(dbuf_escape_ctl(out, sizeof out, "\377a\303"), 9);
  ck_assert_str_eq(out, "\\xffa\\xc3");
  ck_assert_uint_eq(dbuf_escape_ctl(out, sizeof out,
                                    "\xc0\xaf"
                                    "\xed\xa0\x80"),
                    20);
  ck_assert_str_eq(out, "\\xc0\\xaf\\xed"); /* whole escapes only */
  ck_assert_uint_eq(dbuf_escape_ctl(out, sizeof out, "\xc3\xa9\xf0\x9f\x98\x80"), 6);
  ck_assert_str_eq(out, "\xc3\xa9\xf0\x9f\x98\x80");
  ck_assert_uint_eq(dbuf_escape_ctl(out, 4, "ab\xc3\xa9"), 4);
  ck_assert_str_eq(out, "ab");
  dbuf_diag_t d = {DBUF_EIO, "x"};
  dbuf_diag_clear(&d);
  ck_assert_int_eq(d.code, 0);
  ck_assert_str_eq(d.msg, "");
  dbuf_diag_clear(NULL);
}
END_TEST

int
main(void)
{
  Suite *s = suite_create("error");
  TCase *tc = tcase_create("table");
  tcase_add_test(tc, test_names_and_messages);
  tcase_add_test(tc, test_errno_max_is_last);
  tcase_add_test(tc, test_unknown_codes);
  tcase_add_test(tc, test_exit_code_rule);
  tcase_add_test(tc, test_shared_codes);
  tcase_add_test(tc, test_no_stutter);
  tcase_add_test(tc, test_escape_and_diag);
  suite_add_tcase(s, tc);
  return test_run_suite(s);
}
