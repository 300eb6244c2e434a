/*
 * Fuzz the shape-list reader (dbuf_shapes_parse), then every layout kind
 * built from what it accepts.  Built twice: FUZZ_SHAPES_JSON=0 keeps to the
 * text format, 1 to the JSON format (the reader picks the format by the
 * first non-blank character, '[' for JSON).
 */
#include "fuzz_common.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#ifndef FUZZ_SHAPES_JSON
#error "define FUZZ_SHAPES_JSON to 0 (text) or 1 (JSON)"
#endif

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  size_t i = 0;
  while (i < size && isspace(data[i]))
    i++;
  if ((i < size && data[i] == '[') != FUZZ_SHAPES_JSON)
    return -1; /* the other harness's format: not worth keeping */

  dbuf_tensors_t *t = NULL;
  dbuf_diag_t d;
  dbuf_diag_clear(&d);
  int rc = dbuf_shapes_parse("fuzz.shapes", (const char *)data, size, &t, &d);
  if (rc != 0) {
    FUZZ_REFUSED(rc, t, d);
    return 0;
  }
  fuzz_tensors(t);
  dbuf_tensors_destroy(t);
  return 0;
}
