/* The library as a product: its run-time version and the one free function
 * for the buffers it hands to callers (dbuf/version.h, dbuf/error.h). */
#include "dbuf/error.h"
#include "dbuf/version.h"

#include <stdlib.h>

/* The version this object was compiled with is the version of the library:
 * configure writes dbuf/version.h and the core is built against it. */
int
dbuf_version(void)
{
  return DBUF_VERSION;
}

const char *
dbuf_version_string(void)
{
  return DBUF_VERSION_STRING;
}

void
dbuf_free(void *buf)
{
  free(buf);
}
