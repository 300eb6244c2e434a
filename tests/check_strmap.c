/* The core's string map (src/core/strmap.h) and its hash. */
#include "core_internal.h"
#include "strbuf.h"
#include "strmap.h"

#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"

START_TEST(test_fnv1a_known_values)
{
  /* FNV-1a 64 reference values (Fowler, Noll, Vo test vectors). */
  ck_assert_uint_eq(dbuf__fnv1a(DBUF__FNV_OFFSET, "", 0),
                    UINT64_C(0xcbf29ce484222325));
  ck_assert_uint_eq(dbuf__fnv1a(DBUF__FNV_OFFSET, "a", 1),
                    UINT64_C(0xaf63dc4c8601ec8c));
  ck_assert_uint_eq(dbuf__fnv1a(DBUF__FNV_OFFSET, "foobar", 6),
                    UINT64_C(0x85944171f73967e8));
  /* Chaining is the same as one pass. */
  ck_assert_uint_eq(dbuf__fnv1a(dbuf__fnv1a(DBUF__FNV_OFFSET, "foo", 3), "bar", 3),
                    UINT64_C(0x85944171f73967e8));
}
END_TEST

START_TEST(test_empty_map)
{
  dbuf__strmap_t m = DBUF__STRMAP_INIT;
  int64_t id = 77;
  ck_assert_int_eq(dbuf__strmap_find(&m, "x", &id), DBUF_ENOTFOUND);
  ck_assert_int_eq(id, 77); /* untouched */
  ck_assert_ptr_null(dbuf__strmap_key(&m, 0));
  ck_assert_int_eq(dbuf__strmap_reserve(&m, -1), DBUF_EINVAL);
  ck_assert_int_eq(dbuf__strmap_reserve(&m, INT64_MAX), DBUF_EOVERFLOW);
  dbuf__strmap_free(&m);
  dbuf__strmap_free(&m); /* a freed map is an empty map */
}
END_TEST

/* 10,000 keys: ids in insertion order across many growths of the table
 * (32 slots at first), every key found, duplicates refused with the id
 * they already have. */
START_TEST(test_many_keys)
{
  dbuf__strmap_t m = DBUF__STRMAP_INIT, c;
  char key[32];
  int64_t id;
  for (int64_t i = 0; i < 10000; i++) {
    snprintf(key, sizeof key, "layers.%lld.w", (long long)i);
    ck_assert_int_eq(dbuf__strmap_add(&m, key, &id), 0);
    ck_assert_int_eq(id, i);
  }
  ck_assert_int_eq(m.count, 10000);
  ck_assert_int_ge(m.nslots, 2 * m.count);
  ck_assert_int_eq(m.nslots & (m.nslots - 1), 0);
  for (int64_t i = 9999; i >= 0; i--) {
    snprintf(key, sizeof key, "layers.%lld.w", (long long)i);
    ck_assert_int_eq(dbuf__strmap_find(&m, key, &id), 0);
    ck_assert_int_eq(id, i);
    ck_assert_str_eq(dbuf__strmap_key(&m, i), key);
  }
  ck_assert_int_eq(dbuf__strmap_add(&m, "layers.4321.w", &id), DBUF_EDUP);
  ck_assert_int_eq(id, 4321);
  ck_assert_int_eq(m.count, 10000);
  ck_assert_int_eq(dbuf__strmap_find(&m, "layers.10000.w", &id), DBUF_ENOTFOUND);
  ck_assert_int_eq(dbuf__strmap_find(&m, "layers.1", &id), DBUF_ENOTFOUND);

  /* A copy answers the same and is independent of the original. */
  ck_assert_int_eq(dbuf__strmap_copy(&m, &c), 0);
  dbuf__strmap_free(&m);
  ck_assert_int_eq(dbuf__strmap_find(&c, "layers.777.w", &id), 0);
  ck_assert_int_eq(id, 777);
  ck_assert_int_eq(dbuf__strmap_add(&c, "new", &id), 0);
  ck_assert_int_eq(id, 10000);
  dbuf__strmap_free(&c);
}
END_TEST

/* The empty string and keys that differ in one byte are all distinct. */
START_TEST(test_edge_keys)
{
  dbuf__strmap_t m = DBUF__STRMAP_INIT;
  int64_t id;
  ck_assert_int_eq(dbuf__strmap_reserve(&m, 3), 0);
  int64_t nslots = m.nslots;
  ck_assert_int_eq(dbuf__strmap_add(&m, "", &id), 0);
  ck_assert_int_eq(id, 0);
  ck_assert_int_eq(dbuf__strmap_add(&m, "ab", &id), 0);
  ck_assert_int_eq(dbuf__strmap_add(&m, "ba", &id), 0);
  ck_assert_int_eq(id, 2);
  ck_assert_int_eq(m.nslots, nslots); /* reserved: no regrowth */
  ck_assert_int_eq(dbuf__strmap_find(&m, "", &id), 0);
  ck_assert_int_eq(id, 0);
  ck_assert_int_eq(dbuf__strmap_add(&m, "", &id), DBUF_EDUP);
  ck_assert_int_eq(id, 0);
  ck_assert_str_eq(dbuf__strmap_key(&m, 1), "ab");
  ck_assert_ptr_null(dbuf__strmap_key(&m, 3));
  ck_assert_ptr_null(dbuf__strmap_key(&m, -1));
  dbuf__strmap_free(&m);
}
END_TEST

START_TEST(test_shape_str)
{
  char buf[DBUF__SHAPE_STR_LEN];
  int64_t dims[16];
  ck_assert_int_eq(dbuf__shape_str((int64_t[]){128256, 4096}, 2, buf, sizeof buf), 0);
  ck_assert_str_eq(buf, "128256x4096");
  ck_assert_int_eq(dbuf__shape_str(NULL, 0, buf, sizeof buf), 0);
  ck_assert_str_eq(buf, "0-D");
  for (int i = 0; i < 16; i++)
    dims[i] = INT64_MIN; /* the longest a dim can print: 20 characters */
  ck_assert_int_eq(dbuf__shape_str(dims, 16, buf, sizeof buf), 0);
  ck_assert_uint_eq(strlen(buf), 16 * 20 + 15);
  ck_assert_int_eq(dbuf__shape_str((int64_t[]){12345, 6}, 2, buf, 6), DBUF_ENOBUFS);
  ck_assert_str_eq(buf, "12345"); /* cut at a dim, terminated */
  ck_assert_int_eq(dbuf__shape_str(NULL, 0, buf, 3), DBUF_ENOBUFS); /* "0-D" needs 4 */
  ck_assert_int_eq(dbuf__shape_str(dims, 1, buf, 0), DBUF_ENOBUFS);
}
END_TEST

/* The string buffer's own formatting of %lld, %d, %s and %% gives what
 * snprintf gives; other formats still go through vsnprintf. */
START_TEST(test_sb_formats)
{
  static const long long lls[] = {LLONG_MIN, -1, 0, 9, 10, 1234567890123LL, LLONG_MAX};
  static const int is[] = {INT_MIN, -10, 0, 1, 99, INT_MAX};
  char want[512], *text;
  size_t len, used = 0;
  dbuf__sb_t b = DBUF__SB_INIT;
  for (size_t i = 0; i < sizeof lls / sizeof lls[0]; i++) {
    int k = (int)(i % (sizeof is / sizeof is[0]));
    dbuf__sb_printf(&b, "[%lld, %d] %s%%;", lls[i], is[k], i ? "x" : "");
    used += (size_t)snprintf(want + used, sizeof want - used, "[%lld, %d] %s%%;", lls[i],
                             is[k], i ? "x" : "");
  }
  dbuf__sb_printf(&b, "%5d|%.2f|%s", 42, 0.5, "end");
  used += (size_t)snprintf(want + used, sizeof want - used, "%5d|%.2f|%s", 42, 0.5, "end");
  dbuf__sb_json_string(&b, "a\"b\\c\x01" "d\x1f");
  used += (size_t)snprintf(want + used, sizeof want - used, "%s",
                           "\"a\\\"b\\\\c\\u0001d\\u001f\"");
  dbuf__sb_json_string(&b, "");
  used += (size_t)snprintf(want + used, sizeof want - used, "\"\"");
  ck_assert_int_eq(dbuf__sb_finish(&b, &text, &len), 0);
  ck_assert_str_eq(text, want);
  ck_assert_uint_eq(len, used);
  free(text);
}
END_TEST

/* JSON strings are valid whatever they are given: UTF-8 passes, control
 * characters are \u00NN, and a byte outside UTF-8 (JSON has no escape for
 * one) is the text \xNN. */
START_TEST(test_sb_json_utf8)
{
  static const struct {
    const char *in, *want;
  } cases[] = {
      {"\xc3\xa9t\xc3\xa9.\xe5\xb1\xa4.\xf0\x9f\x98\x80",
       "\"\xc3\xa9t\xc3\xa9.\xe5\xb1\xa4.\xf0\x9f\x98\x80\""},
      {"a\377b", "\"a\\\\xffb\""},
      {"cut\xc3", "\"cut\\\\xc3\""},
      {"\xc0\xaf", "\"\\\\xc0\\\\xaf\""},                       /* overlong '/' */
      {"\xed\xa0\x80", "\"\\\\xed\\\\xa0\\\\x80\""},            /* a surrogate */
      {"\xf4\x90\x80\x80", "\"\\\\xf4\\\\x90\\\\x80\\\\x80\""}, /* past U+10FFFF */
      {"\x7f\"\x01", "\"\x7f\\\"\\u0001\""},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    dbuf__sb_t b = DBUF__SB_INIT;
    char *text;
    size_t len;
    dbuf__sb_json_string(&b, cases[i].in);
    ck_assert_int_eq(dbuf__sb_finish(&b, &text, &len), 0);
    ck_assert_msg(strcmp(text, cases[i].want) == 0, "case %zu: %s", i, text);
    free(text);
  }
}
END_TEST

/* The one name check of tensors and units: what is wrong, and where. */
START_TEST(test_name_check)
{
  static const struct {
    const char *name;
    dbuf__name_fault_t want;
    size_t at;
  } cases[] = {
      {"model.layers.0.weight", DBUF__NAME_OK, 0},
      {"\xc3\xa9t\xc3\xa9.\xf0\x9f\x98\x80", DBUF__NAME_OK, 0},
      {"q\"uote\\back~", DBUF__NAME_OK, 0},
      {"", DBUF__NAME_EMPTY, 0},
      {"ab c", DBUF__NAME_BLANK, 2},
      {"ab\x7f", DBUF__NAME_BLANK, 2},
      {"\xc3\xa9\x01", DBUF__NAME_BLANK, 2},
      {"\xc3\xa9\xa9", DBUF__NAME_NOT_UTF8, 2},
      {"abcdefgh\xc3", DBUF__NAME_NOT_UTF8, 8}, /* cut at the end */
      {"\xe0\x80\x80", DBUF__NAME_NOT_UTF8, 0}, /* overlong */
      {"\xed\xbf\xbf", DBUF__NAME_NOT_UTF8, 0}, /* a surrogate */
      {"\xf5\x80\x80\x80", DBUF__NAME_NOT_UTF8, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    size_t at = 99;
    dbuf__name_fault_t f = dbuf__name_check(cases[i].name, strlen(cases[i].name), &at);
    ck_assert_msg(f == cases[i].want, "case %zu: %d", i, (int)f);
    if (f != DBUF__NAME_OK && f != DBUF__NAME_EMPTY)
      ck_assert_uint_eq(at, cases[i].at);
  }
  /* Bounded by its length: a sequence cut by it is not UTF-8. */
  ck_assert_int_eq(dbuf__name_check("a\xc3\xa9", 2, NULL), DBUF__NAME_NOT_UTF8);
  ck_assert_uint_eq(dbuf__utf8_len((const unsigned char *)"\xf0\x9f\x98\x80", 3), 0);
  ck_assert_uint_eq(dbuf__utf8_len((const unsigned char *)"\xf0\x9f\x98\x80", 4), 4);
  ck_assert_str_eq(dbuf__name_fault_str(DBUF__NAME_NOT_UTF8), "is not UTF-8");
}
END_TEST

/* A dropped index: the map answers nothing until one is built; a built
 * view answers as the indexed map did; the next add rebuilds one itself.
 * Tags in 32-bit slots: 3000 keys (4096 slots, 12 id bits, 20 tag bits). */
START_TEST(test_index_drop_and_build)
{
  dbuf__strmap_t m = DBUF__STRMAP_INIT, v;
  char key[32];
  int64_t id, nslots;
  uint32_t *slots;
  for (int64_t i = 0; i < 3000; i++) {
    snprintf(key, sizeof key, "k%lld", (long long)(i * 7919));
    ck_assert_int_eq(dbuf__strmap_add(&m, key, &id), 0);
  }
  ck_assert_int_eq(m.nslots, 8192); /* 32 doubled to >= 2 * 3000 */
  dbuf__strmap_index_drop(&m);
  ck_assert_int_eq(m.nslots, 0);
  ck_assert_int_eq(dbuf__strmap_find(&m, "k0", &id), DBUF_ENOTFOUND);
  ck_assert_str_eq(dbuf__strmap_key(&m, 2999), "k23749081"); /* 2999 * 7919 */
  ck_assert_int_eq(dbuf__strmap_index_build(&m, &slots, &nslots), 0);
  ck_assert_int_eq(nslots, 8192);
  v = m;
  v.slots = slots;
  v.nslots = nslots;
  for (int64_t i = 0; i < 3000; i++) {
    snprintf(key, sizeof key, "k%lld", (long long)(i * 7919));
    ck_assert_int_eq(dbuf__strmap_find(&v, key, &id), 0);
    ck_assert_int_eq(id, i);
  }
  ck_assert_int_eq(dbuf__strmap_find(&v, "k1", &id), DBUF_ENOTFOUND);
  free(slots);
  /* The next add indexes the keys again: old keys found, new one numbered. */
  ck_assert_int_eq(dbuf__strmap_add(&m, "new", &id), 0);
  ck_assert_int_eq(id, 3000);
  ck_assert_int_eq(dbuf__strmap_find(&m, "k7919", &id), 0);
  ck_assert_int_eq(id, 1);
  ck_assert_int_eq(dbuf__strmap_add(&m, "k15838", &id), DBUF_EDUP);
  ck_assert_int_eq(id, 2);
  /* A copy of an unindexed map is an unindexed map. */
  dbuf__strmap_index_drop(&m);
  ck_assert_int_eq(dbuf__strmap_copy(&m, &v), 0);
  ck_assert_ptr_null(v.slots);
  ck_assert_str_eq(dbuf__strmap_key(&v, 3000), "new");
  dbuf__strmap_free(&v);
  dbuf__strmap_free(&m);
}
END_TEST

/* The duplicate check as keys come: 3000 distinct keys appended 1, 7 and
 * 500 at a time, each batch checked against all before it; then a key
 * repeating key 1234 (in a later batch) stops the check there, and no
 * batch after it moves it on; and a key repeated inside one batch. */
START_TEST(test_check_as_keys_come)
{
  static const int64_t steps[] = {1, 7, 500};
  char key[32];
  int64_t id;
  for (int s = 0; s < 3; s++) {
    dbuf__strmap_t m = DBUF__STRMAP_INIT;
    dbuf__strmap_check_t c;
    ck_assert_int_eq(dbuf__strmap_reserve_keys(&m, 3001), 0);
    ck_assert_int_eq(dbuf__strmap_check_begin(&c, 3001), 0);
    ck_assert_int_eq(c.nslots, 8192); /* 32 doubled to >= 2 * 3001 */
    for (int64_t i = 0; i < 3000; i++) {
      snprintf(key, sizeof key, "k%lld", (long long)(i * 7919));
      ck_assert_int_eq(dbuf__strmap_append(&m, key, strlen(key), &id), 0);
      if ((i + 1) % steps[s] == 0)
        dbuf__strmap_check_to(&m, &c, i + 1);
    }
    dbuf__strmap_check_to(&m, &c, 3000);
    ck_assert_int_eq(c.done, 3000);
    ck_assert(!c.dup);
    ck_assert_int_eq(dbuf__strmap_append(&m, "k9772046", 8, &id), 0); /* 1234 * 7919 */
    dbuf__strmap_check_to(&m, &c, 3001);
    ck_assert(c.dup);
    ck_assert_int_eq(c.done, 3000);
    dbuf__strmap_check_to(&m, &c, 3001);
    ck_assert_int_eq(c.done, 3000);
    dbuf__strmap_check_free(&c);
    ck_assert_ptr_null(c.slots);
    dbuf__strmap_free(&m);
  }
  /* A key repeated inside one batch: "a", "b", "a" checked at once. */
  dbuf__strmap_t m = DBUF__STRMAP_INIT;
  dbuf__strmap_check_t c;
  ck_assert_int_eq(dbuf__strmap_check_begin(&c, 3), 0);
  ck_assert_int_eq(dbuf__strmap_append(&m, "a", 1, &id), 0);
  ck_assert_int_eq(dbuf__strmap_append(&m, "b", 1, &id), 0);
  ck_assert_int_eq(dbuf__strmap_append(&m, "a", 1, &id), 0);
  dbuf__strmap_check_to(&m, &c, 3);
  ck_assert(c.dup);
  ck_assert_int_eq(c.done, 0);
  dbuf__strmap_check_free(&c);
  dbuf__strmap_free(&m);
}
END_TEST

int
main(void)
{
  Suite *s = suite_create("strmap");
  TCase *tc = tcase_create("strmap");
  tcase_add_test(tc, test_fnv1a_known_values);
  tcase_add_test(tc, test_empty_map);
  tcase_add_test(tc, test_many_keys);
  tcase_add_test(tc, test_edge_keys);
  tcase_add_test(tc, test_shape_str);
  tcase_add_test(tc, test_sb_formats);
  tcase_add_test(tc, test_sb_json_utf8);
  tcase_add_test(tc, test_name_check);
  tcase_add_test(tc, test_index_drop_and_build);
  tcase_add_test(tc, test_check_as_keys_come);
  suite_add_tcase(s, tc);
  return test_run_suite(s);
}
