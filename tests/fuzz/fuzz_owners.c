/*
 * Fuzz the owners-file reader (dbuf_ints_read, file based: the input is
 * written to a file first), then a TensorAtomic layout with those owners, as
 * `plan --layout tensor --owners FILE` does.
 */
#include "fuzz_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TENSORS 4096

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  const char *path = fuzz_write("input", data, size);
  int64_t *vals = NULL, n = -1;
  dbuf_diag_t d;
  dbuf_diag_clear(&d);
  int rc = dbuf_ints_read(path, &vals, &n, &d);
  if (rc != 0) {
    FUZZ_REFUSED(rc, vals, d);
    return 0;
  }
  FUZZ_CHECK(n >= 0);
  if (n == 0 || n > MAX_TENSORS) {
    free(vals);
    return 0;
  }

  /* One tensor per owner; the rank count is one more than the largest
   * owner, capped, so both valid and out-of-range owners are seen. */
  dbuf_tensors_t *t = NULL;
  int *owners = malloc((size_t)n * sizeof *owners);
  int64_t maxo = 0;
  FUZZ_CHECK(owners != NULL && dbuf_tensors_create(&t) == 0);
  for (int64_t i = 0; i < n; i++) {
    char name[32];
    int64_t dims[2] = {i % 7, 1 + i % 5};
    snprintf(name, sizeof name, "t%lld", (long long)i);
    FUZZ_CHECK(dbuf_tensors_add(t, name, 2, dims, NULL) == 0);
    /* The command refuses owners outside int before building. */
    owners[i] = vals[i] < -1 ? -1 : vals[i] > 1000 ? 1000 : (int)vals[i];
    if (vals[i] > maxo)
      maxo = vals[i];
  }
  dbuf_layout_params_t p;
  dbuf_layout_t *l = NULL;
  dbuf_layout_params_init(&p);
  p.kind = DBUF_LAYOUT_TENSOR;
  p.nranks = maxo >= 64 ? 64 : (int)maxo + 1;
  p.owners = owners;
  p.nowners = n;
  rc = dbuf_layout_build(t, &p, &l, &d);
  FUZZ_CHECK(rc == 0 || rc == DBUF_EOWNER);
  if (rc == 0) {
    FUZZ_CHECK(fuzz_layout(l) == 1);
    dbuf_layout_destroy(l);
  }
  dbuf_tensors_destroy(t);
  free(owners);
  free(vals);
  return 0;
}
