/*
 * dbuf-shard: element conversion between floating types.
 *
 * Not collective, no state.  The rules:
 *  - the same type on both sides: an identity copy, for every type with a
 *    byte size (integers and FP8 included);
 *  - between F32, BF16 and F16, in every direction: widening is exact;
 *    narrowing rounds to nearest, ties to even (one rounding: BF16 <-> F16
 *    goes through the exact F32 value); infinities stay infinities and a NaN
 *    stays a NaN of the same sign, made quiet (the top fraction bits of its
 *    payload are kept); F16 and BF16 subnormals are produced and read;
 *  - anything else (integers, BOOL, FP8, F64, C64, an int and a float) has no
 *    defined rule: DBUF_EUNSUPPORTED, with a message naming both types.
 *
 * Counts (dbuf_convert_stats_t), over the non-NaN values converted:
 *  - changed: the result's value differs from the source's (not exactly
 *    representable; every overflow and underflow is a change too);
 *  - overflowed: a finite value became an infinity;
 *  - subnormal: a normal value became a (non-zero) subnormal;
 *  - zeroed: a non-zero value became a zero.
 * NaNs are counted in none of them (a NaN stays a NaN).
 *
 * Thread safety: pure functions.  Ownership: the caller's buffers.
 */
#ifndef DBUF_CONVERT_H
#define DBUF_CONVERT_H

#include "dbuf/dtype.h"
#include "dbuf/error.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** What a conversion did to the values (see the top of this file). */
typedef struct dbuf_convert_stats {
  int64_t values;     /**< elements converted (identity copies included) */
  int64_t changed;    /**< values not exactly representable in the target */
  int64_t overflowed; /**< finite -> infinity */
  int64_t subnormal;  /**< normal -> non-zero subnormal */
  int64_t zeroed;     /**< non-zero -> zero */
} dbuf_convert_stats_t;

/**
 * \brief Whether elements of type src can be converted to type dst.
 * Not collective.  O(1).
 * \param[out] diag  may be NULL; on DBUF_EUNSUPPORTED "no conversion from
 *   int32 to bf16 (only fp32, bf16 and fp16 convert into each other)"
 * \return 0, DBUF_EINVAL (a type without a byte size, NONE, out of range),
 *   DBUF_EUNSUPPORTED (no rule)
 */
DBUF_EXPORT int dbuf_convert_check(dbuf_dtype_t src, dbuf_dtype_t dst, dbuf_diag_t *diag);

/**
 * \brief Convert n elements of type src_type at src into type dst_type at dst.
 *
 * Not collective.  O(n).  dst and src must not overlap unless the types are
 * equal and dst == src.
 * \param[in,out] stats  may be NULL; the counts of this call are ADDED to it
 *                       (sums are checked; a caller converts in chunks)
 * \return 0, DBUF_EINVAL (NULL pointer with n > 0, n < 0, a type without a
 *   byte size), DBUF_EUNSUPPORTED (no rule; diag names both types),
 *   DBUF_EOVERFLOW (n times the element size past INT64_MAX, a count)
 */
DBUF_EXPORT int dbuf_convert(dbuf_dtype_t dst_type, void *dst, dbuf_dtype_t src_type,
                             const void *src, int64_t n, dbuf_convert_stats_t *stats,
                             dbuf_diag_t *diag);

/**
 * \brief Add the counts of b to a (checked).  Not collective.
 * \return 0, DBUF_EINVAL (NULL), DBUF_EOVERFLOW (a sum; a is unchanged)
 */
DBUF_EXPORT int dbuf_convert_stats_add(dbuf_convert_stats_t *a, const dbuf_convert_stats_t *b);

/** \brief One element: the F32 value of an F16 bit pattern (exact). */
DBUF_EXPORT float dbuf_f16_to_f32(uint16_t h);
/** \brief One element: the F32 value of a BF16 bit pattern (exact). */
DBUF_EXPORT float dbuf_bf16_to_f32(uint16_t b);
/** \brief One element: F32 to F16, nearest even. */
DBUF_EXPORT uint16_t dbuf_f32_to_f16(float f);
/** \brief One element: F32 to BF16, nearest even. */
DBUF_EXPORT uint16_t dbuf_f32_to_bf16(float f);

#ifdef __cplusplus
}
#endif

#endif /* DBUF_CONVERT_H */
