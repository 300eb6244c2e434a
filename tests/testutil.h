/* Shared by the test programs: where the test data lives, a random
 * source, and the run of a suite. */
#ifndef DBUF_TESTUTIL_H
#define DBUF_TESTUTIL_H

#include <check.h>
#include <stdint.h>
#include <stdlib.h>

/* tests/data, from DBUF_TEST_DATA (set by make check), else relative. */
static inline const char *
test_data_dir(void)
{
  const char *d = getenv("DBUF_TEST_DATA");
  return d && *d ? d : "tests/data";
}

/* DBUF_TEST_TIME_SCALE: the factor that stretches the tests' wall-clock
 * bounds for slow builds (sanitizers); 1 when unset, under 1 or not a
 * number (tests/cli/lib.sh reads it the same way for the scripts). */
static inline double
test_time_scale(void)
{
  const char *v = getenv("DBUF_TEST_TIME_SCALE");
  double s = v != NULL ? atof(v) : 1.0;
  return s >= 1.0 ? s : 1.0;
}

/* xorshift64 for the random property tests; seed test_rng_state first
 * (never 0). */
static uint64_t test_rng_state;

static inline uint64_t
test_rng(void)
{
  test_rng_state ^= test_rng_state << 13;
  test_rng_state ^= test_rng_state >> 7;
  test_rng_state ^= test_rng_state << 17;
  return test_rng_state;
}

/* Run every test of s: the exit status of a test program. */
static inline int
test_run_suite(Suite *s)
{
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? 0 : 1;
}

#endif
