/*
 * Fuzz the plan JSON reader (dbuf_plan_from_json: layout JSON version 1 or
 * 2), then run on every buffer what `verify` and the run do (see
 * fuzz_layout()) and across them (a tensor in one buffer only), the plan's
 * totals and per-rank bytes, and a write back: a plan that reads must write
 * and read again to the same buffers.
 */
#include "fuzz_common.h"

#include "dbuf/layout_json.h"

#include <stdlib.h>
#include <string.h>

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  dbuf_plan_t *p = NULL, *q = NULL;
  dbuf_plan_totals_t tt;
  dbuf_diag_t d;
  char *text = NULL;
  size_t len = 0;
  dbuf_diag_clear(&d);
  int rc = dbuf_plan_from_json("fuzz.json", (const char *)data, size, &p, &d);
  if (rc != 0) {
    FUZZ_REFUSED(rc, p, d);
    return 0;
  }
  int64_t nb = dbuf_plan_nbuffers(p);
  FUZZ_CHECK(nb >= 1 && dbuf_plan_nranks(p) >= 1);
  int valid = 1;
  for (int64_t k = 0; k < nb; k++) {
    dbuf_plan_buffer_t b;
    FUZZ_CHECK(dbuf_plan_buffer(p, k, &b) == 0 && b.elem_size > 0 && b.unit[0] != '\0');
    valid &= fuzz_layout(b.layout) == 1;
  }
  int64_t nv = -1;
  rc = dbuf_plan_validate(p, NULL, NULL, &nv, NULL);
  FUZZ_CHECK((rc == 0 && nv == 0) || (rc == DBUF_ELAYOUT && nv > 0) || rc == DBUF_ENOMEM);
  if (valid) {
    int64_t bytes;
    rc = dbuf_plan_totals(p, &tt);
    FUZZ_CHECK(rc == 0 || rc == DBUF_EOVERFLOW);
    rc = dbuf_plan_rank_bytes(p, 0, &bytes);
    FUZZ_CHECK(rc == 0 || rc == DBUF_EOVERFLOW);
  }
  FUZZ_CHECK(dbuf_plan_to_json(p, 0, &text, &len) == 0);
  fuzz_check_json("dbuf_plan_to_json", text, len);
  FUZZ_CHECK(dbuf_plan_from_json("again.json", text, len, &q, &d) == 0);
  FUZZ_CHECK(dbuf_plan_nbuffers(q) == nb);
  free(text);
  dbuf_plan_destroy(q);
  dbuf_plan_destroy(p);
  return 0;
}
