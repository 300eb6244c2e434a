/* Element types: one table, indexed by the fixed dbuf_dtype_t numbers. */
#include "dbuf/dtype.h"

#include <string.h>

/* Read-only, so not mutable global state. */
static const struct dtype_rec {
  const char *name; /* short name */
  const char *st;   /* safetensors name */
  int bits;
  int is_float;
} dtypes[DBUF_DTYPE_COUNT] = {
    [DBUF_DTYPE_NONE] = {"none", "unknown", 0, 0},
    [DBUF_DTYPE_BOOL] = {"bool", "BOOL", 8, 0},
    [DBUF_DTYPE_F4] = {"fp4", "F4", 4, 1},
    [DBUF_DTYPE_F6_E2M3] = {"fp6-e2m3", "F6_E2M3", 6, 1},
    [DBUF_DTYPE_F6_E3M2] = {"fp6-e3m2", "F6_E3M2", 6, 1},
    [DBUF_DTYPE_U8] = {"uint8", "U8", 8, 0},
    [DBUF_DTYPE_I8] = {"int8", "I8", 8, 0},
    [DBUF_DTYPE_F8_E5M2] = {"fp8-e5m2", "F8_E5M2", 8, 1},
    [DBUF_DTYPE_F8_E4M3] = {"fp8-e4m3", "F8_E4M3", 8, 1},
    [DBUF_DTYPE_F8_E8M0] = {"fp8-e8m0", "F8_E8M0", 8, 1},
    [DBUF_DTYPE_I16] = {"int16", "I16", 16, 0},
    [DBUF_DTYPE_U16] = {"uint16", "U16", 16, 0},
    [DBUF_DTYPE_F16] = {"fp16", "F16", 16, 1},
    [DBUF_DTYPE_BF16] = {"bf16", "BF16", 16, 1},
    [DBUF_DTYPE_I32] = {"int32", "I32", 32, 0},
    [DBUF_DTYPE_U32] = {"uint32", "U32", 32, 0},
    [DBUF_DTYPE_F32] = {"fp32", "F32", 32, 1},
    [DBUF_DTYPE_C64] = {"c64", "C64", 64, 0},
    [DBUF_DTYPE_F64] = {"fp64", "F64", 64, 1},
    [DBUF_DTYPE_I64] = {"int64", "I64", 64, 0},
    [DBUF_DTYPE_U64] = {"uint64", "U64", 64, 0},
};

/* Other spellings people use. */
static const struct dtype_alias {
  const char *name;
  dbuf_dtype_t d;
} aliases[] = {
    {"f16", DBUF_DTYPE_F16},      {"float16", DBUF_DTYPE_F16},  {"half", DBUF_DTYPE_F16},
    {"bfloat16", DBUF_DTYPE_BF16}, {"f32", DBUF_DTYPE_F32},      {"float32", DBUF_DTYPE_F32},
    {"float", DBUF_DTYPE_F32},    {"f64", DBUF_DTYPE_F64},      {"float64", DBUF_DTYPE_F64},
    {"double", DBUF_DTYPE_F64},   {"fp8", DBUF_DTYPE_F8_E4M3},
};

static int
valid(dbuf_dtype_t d)
{
  return (int)d > DBUF_DTYPE_NONE && (int)d < DBUF_DTYPE_COUNT;
}

const char *
dbuf_dtype_name(dbuf_dtype_t d)
{
  return d == DBUF_DTYPE_NONE ? "none" : valid(d) ? dtypes[d].name : "unknown";
}

const char *
dbuf_dtype_st_name(dbuf_dtype_t d)
{
  return valid(d) ? dtypes[d].st : "unknown";
}

int
dbuf_dtype_bits(dbuf_dtype_t d)
{
  return valid(d) ? dtypes[d].bits : 0;
}

int64_t
dbuf_dtype_size(dbuf_dtype_t d)
{
  return valid(d) && dtypes[d].bits % 8 == 0 ? dtypes[d].bits / 8 : 0;
}

int
dbuf_dtype_is_float(dbuf_dtype_t d)
{
  return valid(d) && dtypes[d].is_float;
}

int
dbuf_dtype_parse(const char *name, dbuf_dtype_t *d)
{
  if (name == NULL || d == NULL)
    return DBUF_EINVAL;
  for (int i = 1; i < DBUF_DTYPE_COUNT; i++) {
    if (strcmp(name, dtypes[i].name) == 0 || strcmp(name, dtypes[i].st) == 0) {
      *d = (dbuf_dtype_t)i;
      return 0;
    }
  }
  for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++) {
    if (strcmp(name, aliases[i].name) == 0) {
      *d = aliases[i].d;
      return 0;
    }
  }
  return DBUF_ENOTFOUND;
}

const char *
dbuf_dtype_list(void)
{
  return "bf16, fp16, fp32, fp64, fp8-e4m3 (fp8), fp8-e5m2, fp8-e8m0, int8, uint8, int16, "
         "uint16, int32, uint32, int64, uint64, bool, c64";
}
