/*
 * Fuzz the safetensors header reader (dbuf_st_open on one .safetensors
 * file; the input is the whole file: the 8-byte length, the JSON header and
 * the data region), then check each tensor's byte range, reopen the file
 * with an explicit tensor order, and build every layout kind from it.
 */
#include "fuzz_common.h"

#include <stdlib.h>
#include <string.h>

static void
check_ranges(const dbuf_st_t *st)
{
  const dbuf_tensors_t *t = dbuf_st_tensors(st);
  for (int64_t i = 0; i < dbuf_tensors_count(t); i++) {
    dbuf_st_info_t info;
    int64_t bytes;
    FUZZ_CHECK(dbuf_st_tensor_info(st, i, &info) == 0);
    FUZZ_CHECK(info.file == 0 && info.elem_size >= 1 && info.data_begin >= 8);
    FUZZ_CHECK(!__builtin_mul_overflow(dbuf_tensors_numel(t, i), info.elem_size,
                                       &bytes));
    FUZZ_CHECK(info.data_end - info.data_begin == bytes);
  }
}

/* Reopen with the tensors in reverse order: the same tensors come back. */
static void
check_order(const char *path, const dbuf_st_t *st)
{
  const dbuf_tensors_t *t = dbuf_st_tensors(st);
  int64_t n = dbuf_tensors_count(t);
  const char **order = malloc((size_t)(n > 0 ? n : 1) * sizeof *order);
  dbuf_st_t *again = NULL;
  FUZZ_CHECK(order != NULL);
  for (int64_t i = 0; i < n; i++)
    order[i] = dbuf_tensors_name(t, n - 1 - i);
  FUZZ_CHECK(dbuf_st_open(&path, 1, order, n, &again, NULL) == 0);
  for (int64_t i = 0; i < n; i++)
    FUZZ_CHECK(strcmp(dbuf_tensors_name(dbuf_st_tensors(again), i), order[i]) == 0);
  dbuf_st_destroy(again);
  free(order);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  const char *path = fuzz_write("model.safetensors", data, size);
  dbuf_st_t *st = NULL;
  dbuf_diag_t d;
  dbuf_diag_clear(&d);
  int rc = dbuf_st_open(&path, 1, NULL, 0, &st, &d);
  if (rc != 0) {
    FUZZ_REFUSED(rc, st, d);
    return 0;
  }
  FUZZ_CHECK(dbuf_st_file_count(st) == 1);
  check_ranges(st);
  check_order(path, st);
  if (dbuf_tensors_count(dbuf_st_tensors(st)) > 0)
    fuzz_tensors(dbuf_st_tensors(st));
  dbuf_st_destroy(st);
  return 0;
}
