/*
 * Fuzz the layout JSON reader (dbuf_layout_from_json), then validate the
 * layout (every kind's invariants) and, when valid, run what `verify` and
 * every rank after the broadcast do with it (see fuzz_layout()).
 */
#include "fuzz_common.h"

#include <string.h>

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  dbuf_layout_t *l = NULL;
  dbuf_diag_t d;
  dbuf_diag_clear(&d);
  int rc = dbuf_layout_from_json("fuzz.json", (const char *)data, size, &l, &d);
  if (rc != 0) {
    FUZZ_REFUSED(rc, l, d);
    return 0;
  }
  fuzz_layout(l);
  dbuf_layout_destroy(l);
  return 0;
}
