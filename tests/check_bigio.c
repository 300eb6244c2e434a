/* Inputs and outputs large enough for the two-thread paths: a text shapes
 * file of a megabyte and more is parsed by a reader thread while the list
 * is built (src/core/shapes_io.c), and the JSON lines of 65,536 tensors
 * and more are formatted on two threads (src/core/layout_json.c).  Each is
 * checked against the one-thread path or an independent reading, and every
 * error of the reader keeps the order of the lines. */
#define _XOPEN_SOURCE 700
#include "dbuf/layout.h"
#include "dbuf/layout_json.h"
#include "dbuf/shapes_io.h"
#include "dbuf/tensors.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <xxhash.h>

#include "core_internal.h" /* dbuf__shapes_wait_hook */

#include "tmpdir.h"
#include "testutil.h"

static void
setup(void)
{
  tmpdir_setup("dbuf-bigio");
}

/* Lines of a shape list of n tensors, 25 bytes and more each: tensor i is
 * "layers.I.w" of shape (i % 7 + 1) x 64, every 5th line has a dtype and
 * every 1000th is a comment. */
static char *
big_text(int64_t n, size_t *len)
{
  size_t cap = (size_t)n * 48 + 64, at = 0;
  char *s = malloc(cap);
  ck_assert_ptr_nonnull(s);
  for (int64_t i = 0; i < n; i++) {
    if (i % 1000 == 999)
      at += (size_t)snprintf(s + at, cap - at, "# block %lld\n", (long long)i);
    at += (size_t)snprintf(s + at, cap - at, "layers.%lld.w %lldx64%s\n", (long long)i,
                           (long long)(i % 7 + 1), i % 5 == 0 ? " bf16" : "");
  }
  *len = at;
  return s;
}

static char *
put_file(const char *name, const char *text, size_t len)
{
  static char path[1200];
  snprintf(path, sizeof path, "%s/%s", tmpdir, name);
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(fwrite(text, 1, len, f), len);
  ck_assert_int_eq(fclose(f), 0);
  return path;
}

/* text written to the file name, then read (*a) and parsed in memory
 * (*b): both n tensors, the digest the XXH3 of the bytes. */
static void
read_both(const char *name, const char *text, size_t len, int64_t n, dbuf_tensors_t **a,
          dbuf_tensors_t **b)
{
  char *path = put_file(name, text, len);
  dbuf_diag_t d;
  uint64_t digest = 0;
  ck_assert_int_eq(dbuf_shapes_read(path, a, &digest, &d), 0);
  ck_assert_int_eq(dbuf_shapes_parse(name, text, len, b, &d), 0);
  ck_assert_uint_eq(digest, XXH3_64bits_withSeed(text, len, 0));
  ck_assert_int_eq(dbuf_tensors_count(*a), n);
  ck_assert_int_eq(dbuf_tensors_count(*b), n);
}

/* The file read by the reader thread gives the list the in-memory parse
 * gives, and its digest is the XXH3 of its bytes. */
START_TEST(test_big_file_same_list)
{
  size_t len;
  char *text = big_text(80000, &len);
  ck_assert_uint_gt(len, (size_t)1 << 20); /* the threaded path */
  dbuf_tensors_t *a = NULL, *b = NULL;
  read_both("big.shapes", text, len, 80000, &a, &b);
  for (int64_t i = 0; i < 80000; i++) {
    char want[32];
    snprintf(want, sizeof want, "layers.%lld.w", (long long)i);
    ck_assert_str_eq(dbuf_tensors_name(a, i), want);
    ck_assert_str_eq(dbuf_tensors_name(b, i), want);
    ck_assert_int_eq(dbuf_tensors_rows(a, i), i % 7 + 1);
    ck_assert_int_eq(dbuf_tensors_row_elems(a, i), 64);
    ck_assert_int_eq(dbuf_tensors_dtype(a, i), i % 5 == 0 ? DBUF_DTYPE_BF16 : DBUF_DTYPE_NONE);
    ck_assert_int_eq(dbuf_tensors_dtype(b, i), dbuf_tensors_dtype(a, i));
  }
  int64_t id;
  ck_assert_int_eq(dbuf_tensors_find(a, "layers.79999.w", &id), 0);
  ck_assert_int_eq(id, 79999);
  dbuf_tensors_destroy(a);
  dbuf_tensors_destroy(b);
  free(text);
}
END_TEST

/* The line of tensor i in big_text(): after i tensor lines and the
 * (i + 1) / 1000 comments written before it. */
static long
line_of(int64_t i)
{
  return (long)(i + 1 + (i + 1) / 1000);
}

/* Errors of a big file come in the order of its lines, whether the parse
 * (the reader thread) or the adds (this thread) find them, and whether
 * they lie in the first batch, far in, or on the last line. */
START_TEST(test_big_file_errors)
{
  static const struct {
    int64_t dup_at, bad_at; /* tensors whose lines are spoiled, or -1 */
    int last_unterminated;  /* no newline after the last line */
    int nul_last;           /* a NUL byte in the last line: named first */
  } cases[] = {
      {40000, 50000, 0, 0}, {50000, 40000, 0, 0}, {1, 70000, 0, 0}, {70000, 1, 0, 0},
      {-1, 79999, 1, 0},    {79999, -1, 1, 0},    {1023, -1, 0, 0}, {1024, 1025, 0, 0},
      {1, -1, 0, 1},        {-1, 2, 0, 1},        {40000, 50000, 1, 1},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    size_t len;
    char *text = big_text(80000, &len), want[256];
    /* A duplicate: tensor k's line names tensor 0 ("layers.0.w" is shorter,
     * padded with blanks); a bad line: its shape gets a letter. */
    int64_t k = cases[c].dup_at, b = cases[c].bad_at;
    char name[32];
    if (k >= 0) {
      snprintf(name, sizeof name, "layers.%lld.w", (long long)k);
      char *at = strstr(text, name);
      ck_assert_ptr_nonnull(at);
      memcpy(at, "layers.0.w", 10);
      memset(at + 10, ' ', strlen(name) - 10);
    }
    if (b >= 0) {
      snprintf(name, sizeof name, "layers.%lld.w ", (long long)b);
      char *at = strstr(text, name);
      ck_assert_ptr_nonnull(at);
      at[strlen(name)] = 'q';
    }
    if (cases[c].last_unterminated)
      len--;
    if (cases[c].nul_last)
      text[len - 4] = '\0'; /* in "x64\n" or " bf16\n" */
    char *path = put_file("bad.shapes", text, len);
    dbuf_tensors_t *t = NULL;
    dbuf_diag_t d;
    int rc = dbuf_shapes_read(path, &t, NULL, &d);
    ck_assert_ptr_null(t);
    if (cases[c].nul_last) {
      /* The file is read in one pass after a sample of its lines, and an
       * error of a line found first: the NUL byte is still named. */
      ck_assert_int_eq(rc, DBUF_EPARSE);
      snprintf(want, sizeof want, "%s:%ld: contains a NUL byte (binary file?)", path,
               line_of(79999));
    } else if (k >= 0 && (b < 0 || k < b)) {
      ck_assert_int_eq(rc, DBUF_EDUP);
      snprintf(want, sizeof want, "%s:%ld: tensor layers.0.w: duplicate name (tensor 0)", path,
               line_of(k));
    } else {
      ck_assert_int_eq(rc, DBUF_EPARSE);
      snprintf(want, sizeof want, "%s:%ld: tensor layers.%lld.w: shape 'q", path, line_of(b),
               (long long)b);
      d.msg[strlen(want)] = '\0'; /* the rest names the shape's text */
    }
    ck_assert_msg(strcmp(d.msg, want) == 0, "case %zu: %s, not %s", c, d.msg, want);
    free(text);
  }
}
END_TEST

/* A file whose line lengths differ between the parts its first pass
 * samples (the first MiB and the ends of its quarters: long lines) and the
 * rest (short ones, about 20 times more lines than the samples suggest):
 * the list outgrows its reservation while the reader thread faults in
 * pages ahead, and still comes out as the in-memory parse's. */
START_TEST(test_big_file_uneven)
{
  const size_t target = (size_t)8 << 20, window = ((size_t)64 << 10) + 8192;
  size_t cap = target + 4096, len = 0;
  char *text = malloc(cap);
  ck_assert_ptr_nonnull(text);
  int64_t n = 0, nlong = 0;
  while (len < target) {
    int sampled = len < ((size_t)1 << 20);
    for (int q = 1; q <= 4; q++)
      sampled |= len + window >= target * q / 4 && len < target * q / 4 + 256;
    if (sampled) {
      len += (size_t)sprintf(text + len, "long.%lld.%0180d %lldx8\n", (long long)n, 0,
                             (long long)(n % 5 + 1));
      nlong++;
    } else {
      len += (size_t)sprintf(text + len, "s%lld %lld\n", (long long)n, (long long)(n % 5 + 1));
    }
    n++;
  }
  ck_assert_int_gt(n, 20 * nlong / 2); /* the short lines outnumber the sample's guess */
  dbuf_tensors_t *a = NULL, *b = NULL;
  read_both("uneven.shapes", text, len, n, &a, &b);
  for (int64_t i = 0; i < n; i++) {
    ck_assert_str_eq(dbuf_tensors_name(a, i), dbuf_tensors_name(b, i));
    ck_assert_int_eq(dbuf_tensors_numel(a, i), dbuf_tensors_numel(b, i));
  }
  int64_t id;
  ck_assert_int_eq(dbuf_tensors_find(a, dbuf_tensors_name(b, n - 1), &id), 0);
  ck_assert_int_eq(id, n - 1);
  dbuf_tensors_destroy(a);
  dbuf_tensors_destroy(b);
  free(text);
}
END_TEST

/* The fields of a text line: any run of blanks, tabs, CR, FF and VT
 * between them, before and after; dims of 18 digits and more, and one
 * past INT64_MAX.  The same list or message from the in-memory
 * parse and from a file big enough for the reader thread (the lines after
 * 60,000 plain ones). */
START_TEST(test_text_fields)
{
  static const struct {
    const char *line, *name;
    int64_t d0, d1; /* d1 0: 1-D */
    dbuf_dtype_t dtype;
    const char *err; /* after "PATH:LINE: " */
  } cases[] = {
      {"a\t3x4\r", "a", 3, 4, DBUF_DTYPE_NONE, NULL},
      {" \f b\v\v5 bf16 \t", "b", 5, 0, DBUF_DTYPE_BF16, NULL},
      {"c 999999999999999999x1", "c", 999999999999999999, 1, DBUF_DTYPE_NONE, NULL},
      {"d 4611686018427387904", "d", INT64_C(1) << 62, 0, DBUF_DTYPE_NONE, NULL},
      {"f 0000000000000000000000009x2", "f", 9, 2, DBUF_DTYPE_NONE, NULL},
      {"e 9223372036854775808", NULL, 0, 0, DBUF_DTYPE_NONE,
       "tensor e: shape '9223372036854775808': dim 0 does not fit in 64 bits"},
      {"g 12x99999999999999999999", NULL, 0, 0, DBUF_DTYPE_NONE,
       "tensor g: shape '12x99999999999999999999': dim 1 does not fit in 64 bits"},
      {"h\t3\tfp32\tz", NULL, 0, 0, DBUF_DTYPE_NONE,
       "tensor h: unexpected text 'z' after the dtype"},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    for (int big = 0; big < 2; big++) {
      size_t len = 0, n = big ? 60000 : 0;
      char *text = big ? big_text((int64_t)n, &len) : NULL, want[256];
      text = realloc(text, len + 128);
      ck_assert_ptr_nonnull(text);
      len += (size_t)sprintf(text + len, "%s\n", cases[c].line);
      long line = big ? line_of((int64_t)n - 1) + 1 : 1;
      dbuf_tensors_t *t = NULL;
      dbuf_diag_t d;
      const char *path = "f.shapes";
      int rc;
      if (big) {
        ck_assert_uint_gt(len, (size_t)1 << 20);
        path = put_file("f.shapes", text, len);
        rc = dbuf_shapes_read(path, &t, NULL, &d);
      } else {
        rc = dbuf_shapes_parse(path, text, len, &t, &d);
      }
      if (cases[c].err != NULL) {
        ck_assert_int_ne(rc, 0);
        snprintf(want, sizeof want, "%s:%ld: %s", path, line, cases[c].err);
        ck_assert_str_eq(d.msg, want);
      } else {
        ck_assert_msg(rc == 0, "case %zu: %s", c, d.msg);
        int64_t id = (int64_t)n;
        ck_assert_int_eq(dbuf_tensors_count(t), id + 1);
        ck_assert_str_eq(dbuf_tensors_name(t, id), cases[c].name);
        ck_assert_int_eq(dbuf_tensors_ndim(t, id), cases[c].d1 ? 2 : 1);
        ck_assert_int_eq(dbuf_tensors_dims(t, id)[0], cases[c].d0);
        if (cases[c].d1)
          ck_assert_int_eq(dbuf_tensors_dims(t, id)[1], cases[c].d1);
        ck_assert_int_eq(dbuf_tensors_dtype(t, id), cases[c].dtype);
      }
      dbuf_tensors_destroy(t);
      free(text);
    }
  }
}
END_TEST

/* Found in review: the reader thread faulted in the whole name index,
 * which is sized for every line of the file, also for a file of 16 M
 * comment lines and one tensor (128 MiB of index pages, never written).
 * Now the index is faulted in ahead only when the tensors sent would touch
 * nearly all its pages: the read grows the peak memory by little more than
 * the 1 MiB read buffer. */
START_TEST(test_big_file_comments)
{
  const size_t lines = (size_t)16 << 20;
  size_t len = 0;
  char *text = malloc(lines * 2 + 16);
  ck_assert_ptr_nonnull(text);
  len += (size_t)sprintf(text, "a 1\n");
  for (size_t i = 0; i < lines; i++, len += 2)
    memcpy(text + len, "#\n", 2);
  char *path = put_file("comments.shapes", text, len);
  free(text);
  struct rusage ru;
  ck_assert_int_eq(getrusage(RUSAGE_SELF, &ru), 0);
  long before = ru.ru_maxrss;
  dbuf_tensors_t *t = NULL;
  dbuf_diag_t d;
  ck_assert_int_eq(dbuf_shapes_read(path, &t, NULL, &d), 0);
  ck_assert_int_eq(dbuf_tensors_count(t), 1);
  ck_assert_int_eq(getrusage(RUSAGE_SELF, &ru), 0);
  /* ru_maxrss in KiB; 128 MiB before the fix */
  ck_assert_msg(ru.ru_maxrss - before < 48 * 1024, "peak grew by %ld KiB",
                ru.ru_maxrss - before);
  dbuf_tensors_destroy(t);
}
END_TEST

/* The JSON of a layout of 100,000 tensors (two-thread formatting, names
 * that need escapes among them) reads back as the same layout. */
START_TEST(test_big_json_round_trip)
{
  const int64_t n = 100000;
  dbuf_tensors_t *t;
  ck_assert_int_eq(dbuf_tensors_create(&t), 0);
  for (int64_t i = 0; i < n; i++) {
    char name[48];
    int64_t dims[2] = {i % 9 + 1, 16};
    snprintf(name, sizeof name, i % 10007 == 3 ? "q\"%lld\\w" : "m.%lld.w", (long long)i);
    ck_assert_int_eq(dbuf_tensors_add(t, name, 2, dims, NULL), 0);
  }
  dbuf_layout_params_t p;
  dbuf_layout_params_init(&p);
  p.kind = DBUF_LAYOUT_TENSOR;
  p.nranks = 4;
  p.auto_owners = 1;
  dbuf_layout_t *l = NULL, *back = NULL;
  dbuf_diag_t d;
  ck_assert_int_eq(dbuf_layout_build(t, &p, &l, &d), 0);
  char *text = NULL;
  size_t len = 0;
  ck_assert_int_eq(dbuf_layout_to_json(l, 0, &text, &len), 0);
  ck_assert_int_eq(dbuf_layout_from_json("big.json", text, len, &back, &d), 0);
  ck_assert_int_eq(dbuf_layout_ntensors(back), n);
  const dbuf_tensors_t *bt = dbuf_layout_tensors(back);
  for (int64_t i = 0; i < n; i++) {
    ck_assert_str_eq(dbuf_tensors_name(bt, i), dbuf_tensors_name(t, i));
    ck_assert_int_eq(dbuf_tensors_rows(bt, i), i % 9 + 1);
    ck_assert_int_eq(dbuf_layout_offsets(back)[i], dbuf_layout_offsets(l)[i]);
    ck_assert_int_eq(dbuf_layout_owners(back)[i], dbuf_layout_owners(l)[i]);
  }
  /* one tensor a line, in id order */
  const char *at = text;
  for (int64_t i = 0; i < n; i += 9973) {
    char key[64];
    snprintf(key, sizeof key, i % 10007 == 3 ? "\"q\\\"%lld\\\\w\"" : "\"m.%lld.w\"",
             (long long)i);
    const char *f = strstr(at, key);
    ck_assert_msg(f != NULL, "tensor %lld not found after the ones before it", (long long)i);
    at = f;
  }
  dbuf_free(text);
  dbuf_layout_destroy(l);
  dbuf_layout_destroy(back);
  dbuf_tensors_destroy(t);
}
END_TEST

/* The adding thread faults in pages while no batch is ready, with the
 * pipe unlocked; what the reader delivers meanwhile must be seen when it
 * locks again.  The hook holds the adds in that window for 100 ms the
 * first time nothing was left to fault in: the reader then fills the pipe
 * and waits for the adds.  Before the fix the adds went on to wait on the
 * condition without looking again, and both waited for ever (this test
 * timed out). */
static int hook_idle;

static void
hold_adds(int did)
{
  if (!did && hook_idle++ == 0) {
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
}

START_TEST(test_pipe_no_lost_wakeup)
{
  size_t len;
  char *text = big_text(80000, &len);
  ck_assert_uint_gt(len, (size_t)1 << 20); /* the threaded path */
  char *path = put_file("w.shapes", text, len);
  dbuf_tensors_t *t = NULL;
  dbuf_diag_t d;
  dbuf__shapes_wait_hook = hold_adds;
  int rc = dbuf_shapes_read(path, &t, NULL, &d);
  dbuf__shapes_wait_hook = NULL;
  ck_assert_int_eq(rc, 0);
  ck_assert_int_ge(hook_idle, 1); /* the window was held open */
  ck_assert_int_eq(dbuf_tensors_count(t), 80000);
  ck_assert_str_eq(dbuf_tensors_name(t, 79999), "layers.79999.w");
  dbuf_tensors_destroy(t);
  free(text);
}
END_TEST

int
main(void)
{
  Suite *s = suite_create("bigio");
  TCase *tc = tcase_create("bigio");
  tcase_add_checked_fixture(tc, setup, tmpdir_teardown);
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_big_file_same_list);
  tcase_add_test(tc, test_big_file_errors);
  tcase_add_test(tc, test_big_file_uneven);
  tcase_add_test(tc, test_big_file_comments);
  tcase_add_test(tc, test_text_fields);
  tcase_add_test(tc, test_big_json_round_trip);
  suite_add_tcase(s, tc);
  TCase *tw = tcase_create("pipe");
  tcase_add_checked_fixture(tw, setup, tmpdir_teardown);
  tcase_set_timeout(tw, 20);
  tcase_add_test(tw, test_pipe_no_lost_wakeup);
  suite_add_tcase(s, tw);
  return test_run_suite(s);
}
