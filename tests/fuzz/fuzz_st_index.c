/*
 * Fuzz the safetensors index reader (dbuf_st_open on a
 * model.safetensors.index.json).  The input is the index; beside it are two
 * fixed, valid shard files it can name:
 *   a.safetensors: "x" F32 [2, 3], "y" BF16 [4]
 *   b.safetensors: "z" F16 [3, 2]
 * so the fuzzer reaches the cross-checks between the index and the files.
 */
#include "fuzz_common.h"

#include <stdlib.h>
#include <string.h>

static void
write_shard(const char *name, const char *header, size_t data_bytes)
{
  size_t hlen = strlen(header), len = 8 + hlen + data_bytes;
  unsigned char *buf = calloc(len, 1);
  FUZZ_CHECK(buf != NULL);
  for (int i = 0; i < 8; i++)
    buf[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
  memcpy(buf + 8, header, hlen);
  fuzz_write(name, buf, len);
  free(buf);
}

static void
setup(void)
{
  static int done;
  if (done)
    return;
  write_shard("a.safetensors",
              "{\"x\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
              "\"y\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[24,32]}}",
              32);
  write_shard("b.safetensors",
              "{\"z\":{\"dtype\":\"F16\",\"shape\":[3,2],\"data_offsets\":[0,12]}}",
              12);
  done = 1;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  setup();
  const char *path = fuzz_write("model.safetensors.index.json", data, size);
  dbuf_st_t *st = NULL;
  dbuf_diag_t d;
  dbuf_diag_clear(&d);
  int rc = dbuf_st_open(&path, 1, NULL, 0, &st, &d);
  if (rc != 0) {
    FUZZ_REFUSED(rc, st, d);
    return 0;
  }
  /* Only the two shards exist, each read at most once. */
  int64_t nf = dbuf_st_file_count(st);
  FUZZ_CHECK(nf >= 0 && nf <= 2);
  const dbuf_tensors_t *t = dbuf_st_tensors(st);
  FUZZ_CHECK(dbuf_tensors_count(t) <= 3);
  for (int64_t i = 0; i < dbuf_tensors_count(t); i++) {
    dbuf_st_info_t info;
    FUZZ_CHECK(dbuf_st_tensor_info(st, i, &info) == 0 && info.file < nf);
  }
  if (dbuf_tensors_count(t) > 0)
    fuzz_tensors(t);
  dbuf_st_destroy(st);
  return 0;
}
