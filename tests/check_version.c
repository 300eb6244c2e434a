/*
 * The version the headers announce (dbuf/version.h, written by configure)
 * against the version the library reports at run time (dbuf_version()), and
 * both against configure's own version string (PACKAGE_VERSION in config.h,
 * from AC_INIT), parsed here on its own.  Linked against the shared libdbuf,
 * so the run-time side is the library a program loads.
 */
#include "config.h"

#include "dbuf/dbuf.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* PACKAGE_VERSION as three numbers, parsed without version.h. */
static void
package_version(int *major, int *minor, int *patch)
{
  char tail = 0;
  int n = sscanf(PACKAGE_VERSION, "%d.%d.%d%c", major, minor, patch, &tail);
  ck_assert_msg(n == 3, "PACKAGE_VERSION '%s' is not MAJOR.MINOR.PATCH", PACKAGE_VERSION);
}

START_TEST(test_header_matches_configure)
{
  int major, minor, patch;
  package_version(&major, &minor, &patch);
  ck_assert_int_eq(DBUF_VERSION_MAJOR, major);
  ck_assert_int_eq(DBUF_VERSION_MINOR, minor);
  ck_assert_int_eq(DBUF_VERSION_PATCH, patch);
  ck_assert_str_eq(DBUF_VERSION_STRING, PACKAGE_VERSION);
  ck_assert_int_eq(DBUF_VERSION, major * 10000 + minor * 100 + patch);
}
END_TEST

START_TEST(test_run_time_matches_header)
{
  int major, minor, patch;
  char want[32];
  package_version(&major, &minor, &patch);
  ck_assert_int_eq(dbuf_version(), DBUF_VERSION);
  ck_assert_int_eq(dbuf_version(), major * 10000 + minor * 100 + patch);
  ck_assert_ptr_nonnull(dbuf_version_string());
  ck_assert_str_eq(dbuf_version_string(), DBUF_VERSION_STRING);
  snprintf(want, sizeof want, "%d.%d.%d", major, minor, patch);
  ck_assert_str_eq(dbuf_version_string(), want);
}
END_TEST

/* dbuf_free() takes NULL and the buffers the library returns. */
START_TEST(test_free_library_buffers)
{
  static const int64_t shape[2] = {3, 4};
  dbuf_tensors_t *t = NULL;
  dbuf_layout_t *l = NULL;
  dbuf_layout_params_t p;
  void *msg = NULL;
  char *json = NULL;
  int64_t len = 0;
  size_t jlen = 0;

  dbuf_free(NULL);
  ck_assert_int_eq(dbuf_tensors_create(&t), 0);
  ck_assert_int_eq(dbuf_tensors_add(t, "w", 2, shape, NULL), 0);
  dbuf_layout_params_init(&p);
  p.kind = DBUF_LAYOUT_UNPADDED;
  p.nranks = 2;
  ck_assert_int_eq(dbuf_layout_build(t, &p, &l, NULL), 0);
  ck_assert_int_eq(dbuf_wire_encode(l, &msg, &len, NULL), 0);
  ck_assert_int_ge(len, DBUF_WIRE_MIN_BYTES);
  dbuf_free(msg);
  ck_assert_int_eq(dbuf_layout_to_json(l, 0, &json, &jlen), 0);
  ck_assert_uint_eq(strlen(json), jlen);
  dbuf_free(json);
  dbuf_layout_destroy(l);
  dbuf_tensors_destroy(t);
}
END_TEST

int
main(void)
{
  Suite *s = suite_create("version");
  TCase *tc = tcase_create("version");
  tcase_add_test(tc, test_header_matches_configure);
  tcase_add_test(tc, test_run_time_matches_header);
  tcase_add_test(tc, test_free_library_buffers);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
