/* Shared by the test programs: where the test data lives. */
#ifndef DBUF_TESTUTIL_H
#define DBUF_TESTUTIL_H

#include <stdlib.h>

/* tests/data, from DBUF_TEST_DATA (set by make check), else relative. */
static inline const char *
test_data_dir(void)
{
  const char *d = getenv("DBUF_TEST_DATA");
  return d && *d ? d : "tests/data";
}

#endif
