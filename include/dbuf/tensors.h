/*
 * dbuf-shard: the tensor list (names and shapes, in tensor-id order).
 *
 * Not collective.  A tensor id is its position in the list (0-based, int64_t).
 * Shapes have 1 to DBUF_MAX_DIMS dims; dim 0 may be 0 (an empty tensor),
 * every other dim must be >= 1.  Names are non-empty and unique.  The element
 * count of each tensor and the total over the list are overflow-checked.
 *
 * Thread safety: no global state; const calls (getters, find, dup) may share
 * one list between threads; dbuf_tensors_add() needs the list to itself.
 * Ownership: dbuf_tensors_create() and dbuf_tensors_dup() return a list freed
 * with dbuf_tensors_destroy(); names are copied in.  The name and dims
 * pointers the getters return are borrowed: valid until the next
 * dbuf_tensors_add() on the list (which may move them) or its destroy.
 */
#ifndef DBUF_TENSORS_H
#define DBUF_TENSORS_H

#include "dbuf/dtype.h"
#include "dbuf/error.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DBUF_MAX_DIMS 16

/** Opaque tensor list. */
typedef struct dbuf_tensors dbuf_tensors_t;

/**
 * \brief Create an empty tensor list.
 * \param[out] out  the new list, to be freed with dbuf_tensors_destroy()
 * \return 0, or DBUF_EINVAL (out is NULL), DBUF_ENOMEM
 */
DBUF_EXPORT int dbuf_tensors_create(dbuf_tensors_t **out);

/** \brief Free a list; NULL is accepted. */
DBUF_EXPORT void dbuf_tensors_destroy(dbuf_tensors_t *t);

/**
 * \brief Copy of a list, independent of t: a change to either one leaves the
 * other as it was.  O(1): the two share their arrays until one is changed
 * (then that one copies them, and may fail with DBUF_ENOMEM).
 * \return 0, or DBUF_EINVAL, DBUF_ENOMEM
 */
DBUF_EXPORT int dbuf_tensors_dup(const dbuf_tensors_t *t, dbuf_tensors_t **out);

/**
 * \brief Reserve room for n more tensors (optional; add grows as needed).
 * \return 0, or DBUF_EINVAL, DBUF_ENOMEM, DBUF_EOVERFLOW
 */
DBUF_EXPORT int dbuf_tensors_reserve(dbuf_tensors_t *t, int64_t n);

/**
 * \brief Append a tensor; name and dims are copied.
 * \param[in] name  non-empty, unique in the list, valid UTF-8, no whitespace or
 *                  control chars
 * \param[in] ndim  1..DBUF_MAX_DIMS
 * \param[in] dims  ndim values; dims[0] >= 0, dims[1..] >= 1
 * \return 0, or
 *   DBUF_EINVAL (NULL argument, empty or bad name),
 *   DBUF_ESHAPE (0-D, more than 16 dims, negative dim, zero non-leading dim),
 *   DBUF_EOVERFLOW (element count or list total past INT64_MAX),
 *   DBUF_EDUP (name already in the list), DBUF_ENOMEM.
 *   The list is unchanged on failure.
 */
DBUF_EXPORT int dbuf_tensors_add(dbuf_tensors_t *t, const char *name, int ndim,
                                 const int64_t *dims, dbuf_diag_t *diag);

/** \brief Number of tensors (0 for NULL). */
DBUF_EXPORT int64_t dbuf_tensors_count(const dbuf_tensors_t *t);

/** \brief Sum of the element counts of all tensors (0 for NULL). */
DBUF_EXPORT int64_t dbuf_tensors_total(const dbuf_tensors_t *t);

/** \brief Borrowed name of tensor id, valid until the next
 * dbuf_tensors_add() or destroy; NULL if id is out of range. */
DBUF_EXPORT const char *dbuf_tensors_name(const dbuf_tensors_t *t, int64_t id);

/** \brief Number of dims of tensor id; 0 if id is out of range. */
DBUF_EXPORT int dbuf_tensors_ndim(const dbuf_tensors_t *t, int64_t id);

/** \brief Borrowed dims of tensor id, valid until the next
 * dbuf_tensors_add() or destroy; NULL if out of range. */
DBUF_EXPORT const int64_t *dbuf_tensors_dims(const dbuf_tensors_t *t, int64_t id);

/**
 * \brief Set the element type of tensor id (DBUF_DTYPE_NONE: not given, the
 * default of whoever plans applies).  Tensors start with NONE; the
 * safetensors reader and a shapes file's third column set it.
 * \return 0, or DBUF_EINVAL (NULL, unknown type), DBUF_ERANGE (id)
 */
DBUF_EXPORT int dbuf_tensors_set_dtype(dbuf_tensors_t *t, int64_t id, dbuf_dtype_t dtype);

/** \brief Element type of tensor id; DBUF_DTYPE_NONE if not given or out of range. */
DBUF_EXPORT dbuf_dtype_t dbuf_tensors_dtype(const dbuf_tensors_t *t, int64_t id);

/** \brief Elements of tensor id; -1 if out of range. */
DBUF_EXPORT int64_t dbuf_tensors_numel(const dbuf_tensors_t *t, int64_t id);

/** \brief Rows (dims[0]) of tensor id; -1 if out of range. */
DBUF_EXPORT int64_t dbuf_tensors_rows(const dbuf_tensors_t *t, int64_t id);

/** \brief Elements in one row (product of dims[1..], 1 for 1-D); -1 if out of range. */
DBUF_EXPORT int64_t dbuf_tensors_row_elems(const dbuf_tensors_t *t, int64_t id);

/**
 * \brief Find a tensor by name (hashed, O(1) expected).  A list decoded from
 * a wire message keeps no name index until its first lookup, which builds it
 * (O(n), once, also when several threads look up at once).
 * \return 0 and *id, or DBUF_ENOTFOUND, DBUF_EINVAL, DBUF_ENOMEM (building
 *   the index)
 */
DBUF_EXPORT int dbuf_tensors_find(const dbuf_tensors_t *t, const char *name,
                                  int64_t *id);

/**
 * \brief Write the shape as "d0xd1x..." into buf (always NUL-terminated).
 * \return 0, or DBUF_EINVAL, DBUF_ERANGE (id), DBUF_ENOBUFS (buf too small;
 *   buf holds the truncated text)
 */
DBUF_EXPORT int dbuf_tensors_shape_str(const dbuf_tensors_t *t, int64_t id,
                                       char *buf, size_t len);

/**
 * \brief Parse "d0xd1x..." (or "d0") into dims.
 * \return 0, or DBUF_EPARSE (with diag naming the text), DBUF_ESHAPE (too many dims)
 */
DBUF_EXPORT int dbuf_shape_parse(const char *text, int *ndim,
                                 int64_t dims[DBUF_MAX_DIMS], dbuf_diag_t *diag);

/* ---------------------------------------------------------------- */
/* Comparing two lists                                               */

/** How a tensor list differs from a reference list. */
typedef enum dbuf_tensors_diff_kind {
  DBUF_TDIFF_MISSING = 1, /**< in the reference, not in the list */
  DBUF_TDIFF_EXTRA,       /**< in the list, not in the reference */
  DBUF_TDIFF_SHAPE,       /**< in both, with different shapes */
  DBUF_TDIFF_ORDER        /**< in both, out of the reference's order */
} dbuf_tensors_diff_kind_t;

/** One difference. */
typedef struct dbuf_tensors_diff {
  dbuf_tensors_diff_kind_t kind;
  int64_t id;              /**< tensor id in the list, or -1 (MISSING) */
  int64_t ref_id;          /**< tensor id in the reference, or -1 (EXTRA) */
  char msg[DBUF_DIAG_LEN]; /**< one line naming the tensor, ids and shapes */
} dbuf_tensors_diff_t;

/** Called once per difference; return non-zero to stop early. */
typedef int (*dbuf_tensors_diff_fn)(const dbuf_tensors_diff_t *d, void *arg);

/**
 * \brief Compare the names, order and shapes of a list with a reference.
 *
 * Not collective.  Reports, in this order: for each tensor of t in id order,
 * EXTRA (name not in ref), SHAPE (dims differ) or ORDER; then for each
 * tensor of ref in id order that t lacks, MISSING.  ORDER names the fewest
 * tensors whose removal leaves the common tensors in the reference's order
 * (the complement of a longest increasing run, so one moved tensor is one
 * report).  O((n + m) log n) expected.
 * \param[in] fn      may be NULL
 * \param[out] ndiff  may be NULL; number of differences
 * \return 0 when the lists are equal, DBUF_EVERIFY when they differ,
 *   DBUF_EINVAL (t or ref NULL), DBUF_ENOMEM
 */
DBUF_EXPORT int dbuf_tensors_compare(const dbuf_tensors_t *t,
                                     const dbuf_tensors_t *ref,
                                     dbuf_tensors_diff_fn fn, void *arg,
                                     int64_t *ndiff);

#ifdef __cplusplus
}
#endif

#endif /* DBUF_TENSORS_H */
