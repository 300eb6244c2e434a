/* The tensor list's lean storage (src/core/tensors.c): the table of
 * distinct shapes, a dropped name index built again on the first lookup,
 * and copy-on-write sharing across both. */
#include "core_internal.h"
#include "dbuf/tensors.h"

#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include "testutil.h"

#define N 2000

static void
name_of(int64_t i, char *buf, size_t len)
{
  snprintf(buf, len, "model.layers.%lld.mlp.w", (long long)i);
}

/* N tensors: tensor i has shape (i % 5 + 1) x 4 for even i and a 1-D
 * shape of i rows for odd i (N / 2 distinct 1-D shapes, 5 2-D ones). */
static dbuf_tensors_t *
make_list(void)
{
  dbuf_tensors_t *t;
  char name[64];
  ck_assert_int_eq(dbuf_tensors_create(&t), 0);
  for (int64_t i = 0; i < N; i++) {
    int64_t dims[2] = {i % 2 ? i : i % 5 + 1, 4};
    name_of(i, name, sizeof name);
    ck_assert_int_eq(dbuf_tensors_add(t, name, i % 2 ? 1 : 2, dims, NULL), 0);
  }
  return t;
}

static void
check_list(const dbuf_tensors_t *t)
{
  char name[64], shape[64], want[64];
  int64_t id;
  ck_assert_int_ge(dbuf_tensors_count(t), N); /* and the tensors added after */
  for (int64_t i = 0; i < N; i++) {
    name_of(i, name, sizeof name);
    ck_assert_str_eq(dbuf_tensors_name(t, i), name);
    ck_assert_int_eq(dbuf_tensors_find(t, name, &id), 0);
    ck_assert_int_eq(id, i);
    int64_t rows = i % 2 ? i : i % 5 + 1, row = i % 2 ? 1 : 4;
    ck_assert_int_eq(dbuf_tensors_ndim(t, i), i % 2 ? 1 : 2);
    ck_assert_int_eq(dbuf_tensors_rows(t, i), rows);
    ck_assert_int_eq(dbuf_tensors_row_elems(t, i), row);
    ck_assert_int_eq(dbuf_tensors_numel(t, i), rows * row);
    ck_assert_int_eq(dbuf_tensors_dims(t, i)[0], rows);
    ck_assert_int_eq(dbuf_tensors_shape_str(t, i, shape, sizeof shape), 0);
    if (i % 2)
      snprintf(want, sizeof want, "%lld", (long long)rows);
    else
      snprintf(want, sizeof want, "%lldx4", (long long)rows);
    ck_assert_str_eq(shape, want);
  }
  ck_assert_int_eq(dbuf_tensors_find(t, "model.layers.2000.mlp.w", &id), DBUF_ENOTFOUND);
  ck_assert_int_eq(dbuf_tensors_find(t, "model.layers.1", &id), DBUF_ENOTFOUND);
}

/* sum of (i % 5 + 1) * 4 over even i, plus i over odd i, i < N */
static int64_t
want_total(void)
{
  int64_t s = 0;
  for (int64_t i = 0; i < N; i++)
    s += i % 2 ? i : (i % 5 + 1) * 4;
  return s;
}

START_TEST(test_shapes_table)
{
  dbuf_tensors_t *t = make_list();
  check_list(t);
  ck_assert_int_eq(dbuf_tensors_total(t), want_total());
  /* A rejected add with a new shape leaves the list as it was: the shape
   * 7x7x7 then serves a later tensor. */
  dbuf_diag_t d;
  int64_t dims[3] = {7, 7, 7};
  ck_assert_int_eq(dbuf_tensors_add(t, "model.layers.3.mlp.w", 3, dims, &d), DBUF_EDUP);
  ck_assert_str_eq(d.msg, "tensor model.layers.3.mlp.w: duplicate name (tensor 3)");
  ck_assert_int_eq(dbuf_tensors_count(t), N);
  check_list(t);
  ck_assert_int_eq(dbuf_tensors_add(t, "cube", 3, dims, NULL), 0);
  ck_assert_int_eq(dbuf_tensors_numel(t, N), 343);
  ck_assert_int_eq(dbuf_tensors_row_elems(t, N), 49);
  ck_assert_int_eq(dbuf_tensors_total(t), want_total() + 343);
  /* A 1-D tensor of 4 rows and a 4-row 2-D tensor are different shapes. */
  int64_t four = 4;
  ck_assert_int_eq(dbuf_tensors_add(t, "four", 1, &four, NULL), 0);
  ck_assert_int_eq(dbuf_tensors_ndim(t, N + 1), 1);
  ck_assert_int_eq(dbuf_tensors_numel(t, N + 1), 4);
  dbuf__tensors_trim(t);
  check_list(t);
  dbuf_tensors_destroy(t);
}
END_TEST

/* Dropped index: every lookup answers as before, a duplicate add is still
 * refused with the same message, copies share one rebuilt index. */
START_TEST(test_lazy_index)
{
  dbuf_tensors_t *t = make_list(), *c = NULL, *c2 = NULL;
  dbuf_diag_t d;
  int64_t one = 1, id;
  dbuf__tensors_index_drop(t);
  check_list(t); /* the first find builds it */
  dbuf__tensors_index_drop(t);
  ck_assert_int_eq(dbuf_tensors_add(t, "model.layers.1999.mlp.w", 1, &one, &d), DBUF_EDUP);
  ck_assert_str_eq(d.msg, "tensor model.layers.1999.mlp.w: duplicate name (tensor 1999)");
  ck_assert_int_eq(dbuf_tensors_count(t), N);
  dbuf__tensors_index_drop(t);
  ck_assert_int_eq(dbuf_tensors_dup(t, &c), 0);
  ck_assert_int_eq(dbuf_tensors_dup(t, &c2), 0);
  check_list(c); /* builds the shared index */
  check_list(t);
  dbuf__tensors_index_drop(c); /* shared: no-op */
  check_list(c2);
  /* A change of c copies the arrays; the others keep the built index. */
  ck_assert_int_eq(dbuf_tensors_add(c, "model.layers.0.mlp.w", 1, &one, &d), DBUF_EDUP);
  ck_assert_str_eq(d.msg, "tensor model.layers.0.mlp.w: duplicate name (tensor 0)");
  ck_assert_int_eq(dbuf_tensors_add(c, "extra", 1, &one, NULL), 0);
  ck_assert_int_eq(dbuf_tensors_find(c, "extra", &id), 0);
  ck_assert_int_eq(id, N);
  ck_assert_int_eq(dbuf_tensors_find(t, "extra", &id), DBUF_ENOTFOUND);
  dbuf_tensors_destroy(t);
  check_list(c2);
  ck_assert_int_eq(dbuf_tensors_set_dtype(c2, 5, DBUF_DTYPE_BF16), 0);
  ck_assert_int_eq(dbuf_tensors_dtype(c2, 5), DBUF_DTYPE_BF16);
  ck_assert_int_eq(dbuf_tensors_dtype(c, 5), DBUF_DTYPE_NONE);
  dbuf_tensors_destroy(c);
  /* reserve on an unindexed list takes the index back */
  dbuf__tensors_index_drop(c2);
  ck_assert_int_eq(dbuf_tensors_reserve(c2, 10), 0);
  check_list(c2);
  dbuf_tensors_destroy(c2);
}
END_TEST

static void *
finder(void *arg)
{
  check_list(arg);
  return NULL;
}

/* Four threads look up in one unindexed list at once: one index wins, every
 * answer is right (run under a sanitizer or helgrind to see the races). */
START_TEST(test_lazy_index_threads)
{
  dbuf_tensors_t *t = make_list();
  pthread_t th[4];
  dbuf__tensors_index_drop(t);
  for (int i = 0; i < 4; i++)
    ck_assert_int_eq(pthread_create(&th[i], NULL, finder, t), 0);
  for (int i = 0; i < 4; i++)
    ck_assert_int_eq(pthread_join(th[i], NULL), 0);
  dbuf_tensors_destroy(t);
}
END_TEST


/* The bulk path: the same list as make_list() built by bulk adds, the
 * index built at the end (every name found), or left for the first
 * lookup; the internal accessors agree with the public ones. */
START_TEST(test_bulk)
{
  for (int check = 0; check < 2; check++) {
    dbuf_tensors_t *t;
    char name[64];
    ck_assert_int_eq(dbuf_tensors_create(&t), 0);
    ck_assert_int_eq(dbuf__tensors_bulk_begin(t, N), 0);
    for (int64_t i = 0; i < N; i++) {
      int64_t dims[2] = {i % 2 ? i : i % 5 + 1, 4};
      name_of(i, name, sizeof name);
      ck_assert_int_eq(dbuf__tensors_add_bulk(t, name, strlen(name), i % 2 ? 1 : 2, dims, NULL),
                       0);
      ck_assert_uint_eq(dbuf__tensors_name_len(t, i), strlen(name));
    }
    ck_assert_int_eq(dbuf__tensors_bulk_end(t, check, NULL), 0);
    check_list(t);
    ck_assert_int_eq(dbuf_tensors_total(t), want_total());
    /* 5 2-D shapes and N / 2 1-D ones, numbered in order of first use */
    ck_assert_int_eq(dbuf__tensors_nshapes(t), 5 + N / 2);
    ck_assert_uint_eq(dbuf__tensors_shape_id(t, 0), 0);
    ck_assert_uint_eq(dbuf__tensors_shape_id(t, 1), 1);
    ck_assert_uint_eq(dbuf__tensors_shape_id(t, 10), 0); /* 10 % 5 + 1 == 1: tensor 0's */
    int64_t one = 1;
    dbuf_diag_t d;
    ck_assert_int_eq(dbuf_tensors_add(t, "model.layers.7.mlp.w", 1, &one, &d), DBUF_EDUP);
    ck_assert_str_eq(d.msg, "tensor model.layers.7.mlp.w: duplicate name (tensor 7)");
    dbuf_tensors_destroy(t);
  }
}
END_TEST

/* The end of a bulk build names the first tensor whose name was seen
 * before (in id order) and the earlier one; the bulk add refuses what the
 * add refuses, with its message; a list with an index refuses bulk adds. */
START_TEST(test_bulk_errors)
{
  static const char *names[] = {"a", "b", "c", "b", "a"};
  dbuf_tensors_t *t;
  dbuf_diag_t d;
  int64_t dims[2] = {2, 3}, bad[2] = {2, 0};
  ck_assert_int_eq(dbuf_tensors_create(&t), 0);
  ck_assert_int_eq(dbuf__tensors_bulk_begin(t, 5), 0);
  for (int i = 0; i < 5; i++)
    ck_assert_int_eq(dbuf__tensors_add_bulk(t, names[i], 1, 2, dims, NULL), 0);
  ck_assert_int_eq(dbuf__tensors_bulk_end(t, 1, &d), DBUF_EDUP);
  ck_assert_str_eq(d.msg, "tensor b: duplicate name (tensor 1)");
  ck_assert_int_eq(dbuf__tensors_bulk_begin(t, 1), DBUF_EINVAL); /* not empty */
  dbuf_tensors_destroy(t);

  ck_assert_int_eq(dbuf_tensors_create(&t), 0);
  ck_assert_int_eq(dbuf__tensors_bulk_begin(t, 3), 0);
  ck_assert_int_eq(dbuf__tensors_add_bulk(t, "x y", 3, 2, dims, &d), DBUF_EINVAL);
  ck_assert_str_eq(d.msg, "tensor 0: name 'x y' is empty, not UTF-8, or has spaces or "
                          "control characters");
  ck_assert_int_eq(dbuf__tensors_add_bulk(t, "z", 1, 2, bad, &d), DBUF_ESHAPE);
  ck_assert_str_eq(d.msg, "tensor z: zero-sized non-leading dim 1");
  ck_assert_int_eq(dbuf_tensors_count(t), 0);
  ck_assert_int_eq(dbuf__tensors_add_bulk(t, "z", 1, 2, dims, NULL), 0);
  ck_assert_int_eq(dbuf__tensors_bulk_end(t, 1, NULL), 0);
  ck_assert_int_eq(dbuf__tensors_add_bulk(t, "w", 1, 2, dims, &d), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_tensors_count(t), 1);
  dbuf_tensors_destroy(t);

  /* A lookup between bulk adds builds a shared index: a bulk add after it
   * is refused (it would be missing from that index, and a later add of the
   * same name would pass). */
  int64_t id;
  ck_assert_int_eq(dbuf_tensors_create(&t), 0);
  ck_assert_int_eq(dbuf__tensors_bulk_begin(t, 3), 0);
  ck_assert_int_eq(dbuf__tensors_add_bulk(t, "a", 1, 2, dims, NULL), 0);
  ck_assert_int_eq(dbuf__tensors_add_bulk(t, "b", 1, 2, dims, NULL), 0);
  ck_assert_int_eq(dbuf_tensors_find(t, "a", &id), 0);
  ck_assert_int_eq(dbuf__tensors_add_bulk(t, "c", 1, 2, dims, &d), DBUF_EINVAL);
  ck_assert_str_eq(d.msg, "tensor c: a bulk add to an indexed list");
  ck_assert_int_eq(dbuf_tensors_add(t, "c", 2, dims, NULL), 0);
  ck_assert_int_eq(dbuf_tensors_add(t, "c", 2, dims, &d), DBUF_EDUP);
  ck_assert_int_eq(dbuf__tensors_bulk_end(t, 1, NULL), 0);
  ck_assert_int_eq(dbuf_tensors_count(t), 3);
  dbuf_tensors_destroy(t);
}
END_TEST

/* Bulk adds through a shape cache: the list is the one plain bulk adds make
 * (ids of shapes, totals), a cached shape still gets the name check and
 * the total's overflow check, with the same messages. */
START_TEST(test_bulk_as)
{
  dbuf_tensors_t *t;
  dbuf_diag_t d;
  char name[64];
  int64_t sid[N / 2 + 5], big[2] = {INT64_C(1) << 60, 2};
  for (size_t k = 0; k < sizeof sid / sizeof sid[0]; k++)
    sid[k] = -1;
  ck_assert_int_eq(dbuf_tensors_create(&t), 0);
  ck_assert_int_eq(dbuf__tensors_bulk_begin(t, N), 0);
  for (int64_t i = 0; i < N; i++) {
    int64_t dims[2] = {i % 2 ? i : i % 5 + 1, 4};
    /* message shape k: the 2-D shapes 0..4, the 1-D ones 5.. */
    int64_t k = i % 2 ? 5 + i / 2 : i % 5;
    name_of(i, name, sizeof name);
    ck_assert_int_eq(dbuf__tensors_add_bulk_as(t, name, strlen(name), i % 2 ? 1 : 2, dims,
                                               &sid[k], NULL),
                     0);
    ck_assert_int_eq(sid[k], dbuf__tensors_shape_id(t, i));
  }
  ck_assert_int_eq(dbuf__tensors_bulk_end(t, 1, NULL), 0);
  check_list(t);
  ck_assert_int_eq(dbuf_tensors_total(t), want_total());
  ck_assert_int_eq(dbuf__tensors_nshapes(t), 5 + N / 2);
  dbuf_tensors_destroy(t);

  int64_t s = -1;
  ck_assert_int_eq(dbuf_tensors_create(&t), 0);
  ck_assert_int_eq(dbuf__tensors_bulk_begin(t, 4), 0);
  ck_assert_int_eq(dbuf__tensors_add_bulk_as(t, "a", 1, 2, big, &s, NULL), 0);
  ck_assert_int_eq(s, 0);
  ck_assert_int_eq(dbuf__tensors_add_bulk_as(t, "b\x01", 2, 2, big, &s, &d), DBUF_EINVAL);
  ck_assert_str_eq(d.msg, "tensor 1: name 'b\\x01' is empty, not UTF-8, or has spaces or control "
                          "characters");
  ck_assert_int_eq(dbuf__tensors_add_bulk_as(t, "b", 1, 2, big, &s, NULL), 0);
  ck_assert_int_eq(dbuf__tensors_add_bulk_as(t, "c", 1, 2, big, &s, NULL), 0);
  ck_assert_int_eq(dbuf__tensors_add_bulk_as(t, "d", 1, 2, big, &s, &d), DBUF_EOVERFLOW);
  ck_assert_str_eq(d.msg, "tensor d: total element count of the list overflows 64 bits");
  ck_assert_int_eq(dbuf_tensors_count(t), 3);
  ck_assert_int_eq(dbuf_tensors_total(t), 3 * (INT64_C(1) << 61));
  dbuf_tensors_destroy(t);
}
END_TEST

/* Front-coded adds (a decoder's): the same codes, messages and list as
 * bulk adds of the whole names, in place (names reserved) or built in the
 * scratch (nothing reserved), for prefixes that end inside a UTF-8
 * character, new bytes that are not ASCII, bad bytes after a good prefix,
 * an empty name and a total that overflows. */
START_TEST(test_add_front)
{
  static const char *const names[] = {
      "model.layers.0.attn.weight", "model.layers.0.attn.bias", "model.layers.1.attn.weight",
      "x.\xc3\xa9", "x.\xc3\xa8", "x.\xc3" "A", "x.a b", "x.a\x7f", "",
      "x.\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", "y.\xc3\xa9" "a", "y.\xc3\xa9" "b",
      "y.\xc3\xa9" "b.and.a.longer.tail.of.ascii", "big", "z"};
  const int nn = (int)(sizeof names / sizeof names[0]);
  int64_t small[2] = {3, 4}, big[2] = {INT64_C(1) << 60, 4};
  for (int reserve = 0; reserve < 2; reserve++) {
    dbuf_tensors_t *a, *b;
    char *scratch = NULL;
    int64_t cap = 0, sa[2] = {-1, -1}, sb[2] = {-1, -1};
    ck_assert_int_eq(dbuf_tensors_create(&a), 0);
    ck_assert_int_eq(dbuf_tensors_create(&b), 0);
    ck_assert_int_eq(dbuf__tensors_bulk_begin(a, nn), 0);
    ck_assert_int_eq(dbuf__tensors_bulk_begin(b, nn), 0);
    if (reserve)
      ck_assert_int_eq(dbuf__tensors_reserve_names(a, 4096), 0);
    for (int i = 0; i < nn; i++) {
      const char *name = names[i];
      size_t len = strlen(name), plen, pre = 0;
      const char *prev = dbuf__tensors_last_name(a, &plen);
      while (pre < plen && pre < len && prev[pre] == name[pre])
        pre++;
      int k = strcmp(name, "big") == 0 || strcmp(name, "z") == 0;
      const int64_t *dims = k ? big : small;
      dbuf_diag_t da, db;
      dbuf_diag_clear(&da);
      dbuf_diag_clear(&db);
      int ra = dbuf__tensors_add_front(a, pre, name + pre, len - pre, 2, dims, &sa[k], &scratch,
                                       &cap, &da);
      int rb = dbuf__tensors_add_bulk_as(b, name, len, 2, dims, &sb[k], &db);
      ck_assert_int_eq(ra, rb);
      ck_assert_str_eq(da.msg, db.msg);
      ck_assert_int_eq(sa[k], sb[k]);
    }
    /* four bad names (one empty) and "z" (past the total) were refused */
    ck_assert_int_eq(dbuf_tensors_count(a), nn - 5);
    ck_assert_int_eq(dbuf_tensors_count(a), dbuf_tensors_count(b));
    ck_assert_int_eq(dbuf_tensors_total(a), dbuf_tensors_total(b));
    ck_assert_int_eq(dbuf_tensors_total(a), 9 * 12 + (INT64_C(1) << 62)); /* 9 small, "big" */
    for (int64_t i = 0; i < dbuf_tensors_count(a); i++) {
      ck_assert_str_eq(dbuf_tensors_name(a, i), dbuf_tensors_name(b, i));
      ck_assert_int_eq(dbuf__tensors_shape_id(a, i), dbuf__tensors_shape_id(b, i));
    }
    ck_assert_int_eq(dbuf__tensors_bulk_end(a, 1, NULL), 0);
    free(scratch);
    dbuf_tensors_destroy(a);
    dbuf_tensors_destroy(b);
  }
}
END_TEST

/* Names are checked 8 bytes at a time: a bad byte at any place of a long
 * name is still refused, and good UTF-8 still passes. */
START_TEST(test_name_bytes)
{
  static const unsigned char bad[] = {' ', '\t', 0x01, 0x7f, 0x80, 0xff, 0xc0};
  char name[48];
  int64_t one = 1;
  /* every length to 41 (the words, the last overlapping one, the short
   * names' bytes), every place */
  for (int len = 1; len <= 41; len++) {
    for (size_t b = 0; b < sizeof bad; b++) {
      for (int at = 0; at < len; at++) {
        dbuf_tensors_t *t;
        ck_assert_int_eq(dbuf_tensors_create(&t), 0);
        memset(name, 'n', (size_t)len);
        name[len] = '\0';
        ck_assert_int_eq(dbuf_tensors_add(t, name, 1, &one, NULL), 0);
        name[at] = (char)bad[b];
        ck_assert_msg(dbuf_tensors_add(t, name, 1, &one, NULL) == DBUF_EINVAL,
                      "byte 0x%02x at %d of %d passed", bad[b], at, len);
        dbuf_tensors_destroy(t);
      }
    }
  }
  dbuf_tensors_t *t;
  ck_assert_int_eq(dbuf_tensors_create(&t), 0);
  ck_assert_int_eq(dbuf_tensors_add(t, "!~0123456789abcdefghijklmnopqrstuvwxyz.w", 1, &one, NULL),
                   0);
  ck_assert_int_eq(dbuf_tensors_add(t, "experts.\xc3\xa9l\xc3\xa8ve.\xe2\x82\xac.weight", 1, &one,
                                    NULL), 0);
  ck_assert_int_eq(dbuf_tensors_add(t, "\xed\xa0\x80.surrogate", 1, &one, NULL), DBUF_EINVAL);
  dbuf_tensors_destroy(t);
}
END_TEST

/* Reserved name bytes: the names are kept whole across the reservation
 * and the trim that gives the rest back. */
START_TEST(test_reserve_names)
{
  dbuf_tensors_t *t;
  ck_assert_int_eq(dbuf_tensors_create(&t), 0);
  ck_assert_int_eq(dbuf__tensors_reserve_names(t, 1 << 20), 0);
  ck_assert_int_eq(dbuf__tensors_reserve_names(t, -1), DBUF_EINVAL);
  char name[64];
  for (int64_t i = 0; i < N; i++) {
    int64_t dims[2] = {i % 2 ? i : i % 5 + 1, 4};
    name_of(i, name, sizeof name);
    ck_assert_int_eq(dbuf_tensors_add(t, name, i % 2 ? 1 : 2, dims, NULL), 0);
  }
  dbuf__tensors_trim(t);
  check_list(t);
  dbuf_tensors_destroy(t);
}
END_TEST

int
main(void)
{
  Suite *s = suite_create("tensors");
  TCase *tc = tcase_create("tensors");
  tcase_add_test(tc, test_shapes_table);
  tcase_add_test(tc, test_lazy_index);
  tcase_add_test(tc, test_lazy_index_threads);
  tcase_add_test(tc, test_bulk);
  tcase_add_test(tc, test_bulk_errors);
  tcase_add_test(tc, test_bulk_as);
  tcase_add_test(tc, test_add_front);
  tcase_add_test(tc, test_name_bytes);
  tcase_add_test(tc, test_reserve_names);
  suite_add_tcase(s, tc);
  return test_run_suite(s);
}
