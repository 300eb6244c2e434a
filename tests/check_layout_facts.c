/*
 * dbuf/layout_facts.h: the first and last rows of a range and a moved cut,
 * on a hand-made layout whose every answer is worked out below.
 *
 *   a 2x3 at [0, 6)  (rows of 3)      b 1 at [6, 7)  (rows of 1)
 *   e 0x4 at 7       (empty)          c 4x2 at [7, 15)  (rows of 2)
 *   padding [15, 16); rank offsets 0, 6, 9 (size 16, 3 ranks)
 */
#include "dbuf/layout_facts.h"

#include <check.h>
#include <stdlib.h>
#include "testutil.h"

static dbuf_layout_t *
facts_layout(const int64_t *ranks)
{
  static const struct {
    const char *name;
    int nd;
    int64_t dims[2];
  } ts[] = {{"a", 2, {2, 3}}, {"b", 1, {1, 0}}, {"e", 2, {0, 4}}, {"c", 2, {4, 2}}};
  static const int64_t offsets[] = {0, 6, 7, 7};
  dbuf_tensors_t *t = NULL;
  dbuf_layout_t *l = NULL;
  ck_assert_int_eq(dbuf_tensors_create(&t), 0);
  for (int i = 0; i < 4; i++)
    ck_assert_int_eq(dbuf_tensors_add(t, ts[i].name, ts[i].nd, ts[i].dims, NULL), 0);
  ck_assert_int_eq(
      dbuf_layout_from_parts(t, DBUF_LAYOUT_UNPADDED, 3, 1, 0, 16, offsets, ranks, NULL, &l, NULL),
      0);
  dbuf_tensors_destroy(t);
  return l;
}

static const struct {
  int64_t start, end;
  dbuf_span_rows_t want;
} spans[] = {
    {0, 6, {0, 0, 0, 1}},      /* rank 0: a rows 0-1 */
    {6, 9, {1, 0, 3, 0}},      /* rank 1: b row 0 .. c row 0 (e is empty) */
    {9, 16, {3, 1, 3, 3}},     /* rank 2: c rows 1-3, then padding */
    {3, 4, {0, 1, 0, 1}},      /* one element: a row 1 */
    {5, 8, {0, 1, 3, 0}},      /* a's last element, b, c's first */
    {15, 16, {-1, -1, -1, -1}}, /* padding only */
    {4, 4, {-1, -1, -1, -1}},  /* empty range */
    {14, 99, {3, 3, 3, 3}},    /* clamped to the buffer */
    {-5, 1, {0, 0, 0, 0}},     /* clamped to the buffer */
};

START_TEST(test_span_rows)
{
  static const int64_t ranks[] = {0, 6, 9};
  dbuf_layout_t *l = facts_layout(ranks);
  dbuf_span_rows_t s;
  ck_assert_int_eq(dbuf_layout_span_rows(l, spans[_i].start, spans[_i].end, &s), 0);
  ck_assert_msg(s.first_tensor == spans[_i].want.first_tensor &&
                    s.first_row == spans[_i].want.first_row &&
                    s.last_tensor == spans[_i].want.last_tensor &&
                    s.last_row == spans[_i].want.last_row,
                "[%lld, %lld): got (%lld, %lld) .. (%lld, %lld)", (long long)spans[_i].start,
                (long long)spans[_i].end, (long long)s.first_tensor, (long long)s.first_row,
                (long long)s.last_tensor, (long long)s.last_row);
  dbuf_layout_destroy(l);
}
END_TEST

START_TEST(test_span_rows_args)
{
  static const int64_t ranks[] = {0, 6, 9};
  dbuf_layout_t *l = facts_layout(ranks);
  dbuf_span_rows_t s = {7, 7, 7, 7};
  ck_assert_int_eq(dbuf_layout_span_rows(NULL, 0, 1, &s), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_layout_span_rows(l, 0, 1, NULL), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_layout_span_rows(l, 2, 1, &s), DBUF_EINVAL);
  ck_assert_int_eq(s.first_tensor, 7); /* untouched on failure */
  dbuf_layout_destroy(l);
}
END_TEST

START_TEST(test_move_cut)
{
  static const int64_t ranks[] = {0, 6, 9}, tight[] = {0, 1, 9};
  dbuf_layout_t *l = facts_layout(ranks), *m = NULL;
  /* Cut 1 at 6 follows a's last row (3 elements): back to 3. */
  ck_assert_int_eq(dbuf_layout_move_cut(l, 1, &m), 0);
  ck_assert_int_eq(dbuf_layout_range(m)[1], 3);
  ck_assert_int_eq(dbuf_layout_range(m)[2], 9);
  dbuf_layout_destroy(m);
  /* Cut 2 at 9 follows c's row 0 (2 elements): back to 7. */
  ck_assert_int_eq(dbuf_layout_move_cut(l, 2, &m), 0);
  ck_assert_int_eq(dbuf_layout_range(m)[1], 6);
  ck_assert_int_eq(dbuf_layout_range(m)[2], 7);
  dbuf_layout_destroy(m);
  m = NULL;
  ck_assert_int_eq(dbuf_layout_move_cut(l, 0, &m), DBUF_ERANGE);
  ck_assert_int_eq(dbuf_layout_move_cut(l, 3, &m), DBUF_ERANGE);
  ck_assert_int_eq(dbuf_layout_move_cut(NULL, 1, &m), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_layout_move_cut(l, 1, NULL), DBUF_EINVAL);
  ck_assert_ptr_null(m);
  dbuf_layout_destroy(l);
  /* Cut 1 at 1 is inside a's row 0: no room behind, so forward by 3 to 4. */
  l = facts_layout(tight);
  ck_assert_int_eq(dbuf_layout_move_cut(l, 1, &m), 0);
  ck_assert_int_eq(dbuf_layout_range(m)[1], 4);
  dbuf_layout_destroy(m);
  dbuf_layout_destroy(l);
  /* Cut 1 at 0: nothing behind, so forward by a row of the tensor AT the
   * cut (a, 3 elements), not of the one before it (none: it used to step 1
   * and land inside a's row 0). */
  static const int64_t at0[] = {0, 0, 16};
  l = facts_layout(at0);
  ck_assert_int_eq(dbuf_layout_move_cut(l, 1, &m), 0);
  ck_assert_int_eq(dbuf_layout_range(m)[1], 3);
  dbuf_layout_destroy(m);
  dbuf_layout_destroy(l);
}
END_TEST

int
main(void)
{
  Suite *s = suite_create("layout_facts");
  TCase *tc = tcase_create("facts");
  tcase_add_loop_test(tc, test_span_rows, 0, (int)(sizeof spans / sizeof spans[0]));
  tcase_add_test(tc, test_span_rows_args);
  tcase_add_test(tc, test_move_cut);
  suite_add_tcase(s, tc);
  return test_run_suite(s);
}
