/*
 * dbuf-shard: element types.
 *
 * Not collective, no state.  The types are the safetensors dtypes (0.6), by a
 * stable number: the number is what the wire and the layout JSON carry, so a
 * type keeps its number for ever and new ones are appended.  Each type has
 * two names: the safetensors one ("BF16", "F32") and the short one the
 * command line prints ("bf16", "fp32"); dbuf_dtype_parse() takes either, and
 * a few aliases ("f32", "fp8" for F8_E4M3).  Sub-byte types (F4, F6_*) are
 * known, for the safetensors reader's message, but have no byte size.
 *
 * Thread safety: pure functions.  Ownership: names are static strings.
 */
#ifndef DBUF_DTYPE_H
#define DBUF_DTYPE_H

#include "dbuf/error.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Element types; the values are fixed (wire, JSON). */
typedef enum dbuf_dtype {
  DBUF_DTYPE_NONE = 0, /**< not given: the plan's default applies */
  DBUF_DTYPE_BOOL = 1,
  DBUF_DTYPE_F4 = 2,      /**< 4 bits, no byte size */
  DBUF_DTYPE_F6_E2M3 = 3, /**< 6 bits, no byte size */
  DBUF_DTYPE_F6_E3M2 = 4, /**< 6 bits, no byte size */
  DBUF_DTYPE_U8 = 5,
  DBUF_DTYPE_I8 = 6,
  DBUF_DTYPE_F8_E5M2 = 7,
  DBUF_DTYPE_F8_E4M3 = 8,
  DBUF_DTYPE_F8_E8M0 = 9,
  DBUF_DTYPE_I16 = 10,
  DBUF_DTYPE_U16 = 11,
  DBUF_DTYPE_F16 = 12,
  DBUF_DTYPE_BF16 = 13,
  DBUF_DTYPE_I32 = 14,
  DBUF_DTYPE_U32 = 15,
  DBUF_DTYPE_F32 = 16,
  DBUF_DTYPE_C64 = 17,
  DBUF_DTYPE_F64 = 18,
  DBUF_DTYPE_I64 = 19,
  DBUF_DTYPE_U64 = 20,
  DBUF_DTYPE_COUNT /**< one past the last */
} dbuf_dtype_t;

/** \brief The short name ("bf16", "fp32", "fp8-e4m3"); "none" for NONE,
 * "unknown" out of range. */
DBUF_EXPORT const char *dbuf_dtype_name(dbuf_dtype_t d);

/** \brief The safetensors name ("BF16", "F32"); "unknown" for NONE and out
 * of range. */
DBUF_EXPORT const char *dbuf_dtype_st_name(dbuf_dtype_t d);

/** \brief Bits per element (4, 6, 8, ... 64); 0 for NONE and out of range. */
DBUF_EXPORT int dbuf_dtype_bits(dbuf_dtype_t d);

/** \brief Bytes per element; 0 for NONE, out of range and sub-byte types. */
DBUF_EXPORT int64_t dbuf_dtype_size(dbuf_dtype_t d);

/** \brief Whether d is a floating type (F4 .. F64, not integers, BOOL, C64). */
DBUF_EXPORT int dbuf_dtype_is_float(dbuf_dtype_t d);

/**
 * \brief A type by name: a short name, a safetensors name (exact case), or
 * an alias (f16, f32, f64, fp8 = fp8-e4m3, float32 ... see the README).
 * \return 0 and *d, or DBUF_EINVAL (NULL), DBUF_ENOTFOUND (no such type)
 */
DBUF_EXPORT int dbuf_dtype_parse(const char *name, dbuf_dtype_t *d);

/** \brief The short names of the byte-sized types, comma-separated, for
 * messages ("bf16, fp16, fp32, ..."). */
DBUF_EXPORT const char *dbuf_dtype_list(void);

#ifdef __cplusplus
}
#endif

#endif /* DBUF_DTYPE_H */
