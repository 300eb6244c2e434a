/*
 * dbuf-shard: plans -- the buffers a trainer really builds.
 *
 * Megatron-FSDP builds one flat buffer (DBuffer) per parameter group: an
 * FSDP unit (typically one transformer layer; the tensors outside every
 * layer form the root unit) times an element type, since a flat buffer has
 * one element type.  A plan is that list of buffers, each with its own
 * layout made by the ordinary builders (so each stays bit-exact with the
 * golden vectors) over the subset of the model's tensors it holds.
 *
 * Units (dbuf_units_t) say which unit each tensor of a model belongs to:
 *  - none: one unit, "all";
 *  - layer: the unit of a tensor is the prefix of its name up to and
 *    including the first layer index, a component "layers.N", "layer.N",
 *    "h.N" or "blocks.N" (N decimal) -- e.g. "model.layers.3" -- and "root"
 *    for a tensor with none (embeddings, final norm, output layer);
 *  - regex: the first capture group of a POSIX extended regular expression
 *    names the unit; a tensor it does not match (or whose group matched
 *    nothing) goes to "root";
 *  - a map: one "TENSOR UNIT" pair per line (dbuf_units_read()).
 * Unit ids are dense and numbered in the order of each unit's first tensor.
 *
 * Buffers: one per (unit, dtype) pair that has tensors.  A tensor's dtype is
 * dbuf_tensors_dtype(), or the plan's default when that is NONE.  Order:
 * units in order of their first tensor, dtypes within a unit in order of
 * their first tensor; tensors within a buffer in model order.  A buffer's
 * layout holds its own tensor list (local ids 0..n-1, names and dtypes as in
 * the model) and the plan maps local ids back to model ids.
 *
 * Not collective, no MPI.  O(n log n) for n tensors (grouping is one pass;
 * the builders dominate).  Thread safety: no global state; const calls may
 * share a plan.  Ownership: every object is freed with its own destroy
 * (NULL accepted); names and layouts returned are borrowed from the object
 * and valid until its destroy.
 */
#ifndef DBUF_PLAN_H
#define DBUF_PLAN_H

#include "dbuf/dtype.h"
#include "dbuf/error.h"
#include "dbuf/layout.h"
#include "dbuf/tensors.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Units                                                                     */

/** Which unit each tensor belongs to. */
typedef struct dbuf_units dbuf_units_t;

/** The unit name of tensors outside every layer. */
#define DBUF_UNIT_ROOT "root"
/** The unit name of the single unit of dbuf_units_none(). */
#define DBUF_UNIT_ALL "all"

/** \brief One unit, "all", for every tensor.
 * \return 0, or DBUF_EINVAL, DBUF_ENOMEM */
DBUF_EXPORT int dbuf_units_none(const dbuf_tensors_t *t, dbuf_units_t **out,
                                dbuf_diag_t *diag);

/** \brief One unit per layer prefix (see the top of this file), "root" for the rest.
 * \return 0, or DBUF_EINVAL, DBUF_ENOMEM */
DBUF_EXPORT int dbuf_units_layer(const dbuf_tensors_t *t, dbuf_units_t **out,
                                 dbuf_diag_t *diag);

/** Longest pattern dbuf_units_regex() takes, in bytes. */
#define DBUF_UNITS_REGEX_MAX_BYTES 1024
/** Most repetition operators (*, +, ?, {m,n}) over one atom of a pattern,
 * stacked (a+*) or through groups ((a+)*). */
#define DBUF_UNITS_REGEX_MAX_DEPTH 4
/** Most atoms a pattern's tree may hold once its repetitions are expanded as
 * glibc's regcomp expands them (X+ as X X*, X{m,n} as n copies of X). */
#define DBUF_UNITS_REGEX_MAX_ATOMS 1000

/**
 * \brief Units named by the first capture group of regex (POSIX extended).
 *
 * The pattern is measured before it is compiled: regcomp's memory grows
 * exponentially with nested repetitions, and its matching time with
 * back-references, so a pattern over DBUF_UNITS_REGEX_MAX_BYTES, nesting
 * repetitions deeper than DBUF_UNITS_REGEX_MAX_DEPTH, expanding to more than
 * DBUF_UNITS_REGEX_MAX_ATOMS or with a back-reference is refused.  A capture
 * is a unit name as dbuf_units_from_names() asks (a capture that ends inside
 * a UTF-8 character is not).
 * \return 0, or DBUF_EINVAL (NULL, a regex that does not compile, has no
 *   capture group or costs more than the limits above; diag quotes it; a
 *   capture that is not a unit name: diag names the tensor), DBUF_ENOMEM
 */
DBUF_EXPORT int dbuf_units_regex(const dbuf_tensors_t *t, const char *regex,
                                 dbuf_units_t **out, dbuf_diag_t *diag);

/**
 * \brief Units from a file of "TENSOR UNIT" lines ('#' starts a comment;
 * blank lines are skipped; fields are separated by blanks).
 * \return 0, or DBUF_EIO (unreadable), DBUF_EPARSE (a line without exactly
 *   two fields, a NUL byte, a unit name that is not one as
 *   dbuf_units_from_names() asks), DBUF_ENOTFOUND (a tensor the model does
 *   not have, or a tensor of the model the file does not name: diag names
 *   it, with FILE:LINE for the former), DBUF_EDUP (a tensor named twice),
 *   DBUF_ENOMEM; diag reads "FILE:LINE: ..."
 */
DBUF_EXPORT int dbuf_units_read(const dbuf_tensors_t *t, const char *path,
                                dbuf_units_t **out, dbuf_diag_t *diag);

/**
 * \brief Units from explicit names: unit_of[i] is the unit name of tensor i
 * (n = count(t) entries, each non-empty UTF-8 of at most DBUF_WIRE_UNIT_MAX
 * bytes, without blanks or control chars: names go into JSON and onto the
 * wire).
 * \return 0, or DBUF_EINVAL (NULL, a bad name; diag names the tensor),
 *   DBUF_ENOMEM
 */
DBUF_EXPORT int dbuf_units_from_names(const dbuf_tensors_t *t, const char *const *unit_of,
                                      dbuf_units_t **out, dbuf_diag_t *diag);

DBUF_EXPORT void dbuf_units_destroy(dbuf_units_t *u);
/** \brief Number of units (0 for NULL). */
DBUF_EXPORT int64_t dbuf_units_count(const dbuf_units_t *u);
/** \brief Borrowed name of unit id; NULL out of range. */
DBUF_EXPORT const char *dbuf_units_name(const dbuf_units_t *u, int64_t unit);
/** \brief The unit id of tensor id; -1 out of range. */
DBUF_EXPORT int64_t dbuf_units_of(const dbuf_units_t *u, int64_t tensor);

/* ------------------------------------------------------------------------ */
/* Plans                                                                     */

/** Opaque plan: a list of buffers. */
typedef struct dbuf_plan dbuf_plan_t;

/** One buffer of a plan (everything borrowed from the plan). */
typedef struct dbuf_plan_buffer {
  const char *unit;             /**< the unit's name */
  dbuf_dtype_t dtype;           /**< its element type */
  int64_t elem_size;            /**< bytes per element of dtype */
  const dbuf_layout_t *layout;  /**< its layout (its own tensor list) */
  const int64_t *model_ids;     /**< [ntensors of layout]: the model's id of each
                                     local tensor, or NULL when the plan was
                                     assembled without a model */
} dbuf_plan_buffer_t;

/**
 * \brief Build a plan: group the tensors into buffers and lay out each.
 *
 * \param[in] units   NULL: one unit (as dbuf_units_none())
 * \param[in] dtype   the dtype of tensors without one; must have a byte size
 * \param[in] params  as for dbuf_layout_build(); owners (TENSOR kind), when
 *                    given, are indexed by model tensor id (nowners = count)
 * \param[in] align_bytes  0: params->align_elems as given; N > 0: each
 *                    buffer's align_elems is N / gcd(N, its element size), so
 *                    every tensor start is a multiple of N bytes (COMPACT)
 * \return 0, or DBUF_EINVAL (NULL, a dtype without a byte size, units of
 *   another tensor count), the errors of dbuf_layout_build() (diag prefixed
 *   with "buffer UNIT/DTYPE: " when there is more than one buffer),
 *   DBUF_EOVERFLOW, DBUF_ENOMEM; align_bytes < 0 is DBUF_EINVAL
 */
DBUF_EXPORT int dbuf_plan_build(const dbuf_tensors_t *t, const dbuf_units_t *units,
                                dbuf_dtype_t dtype, const dbuf_layout_params_t *params,
                                int64_t align_bytes, dbuf_plan_t **out, dbuf_diag_t *diag);

/**
 * \brief An empty plan to assemble buffer by buffer (a decoder's use).
 * \return 0, or DBUF_EINVAL, DBUF_ENOMEM
 */
DBUF_EXPORT int dbuf_plan_create(dbuf_plan_t **out);

/**
 * \brief Append a buffer.  The plan takes layout (also on failure: it is
 * destroyed); model_ids (may be NULL) is copied.  Every buffer of a plan must
 * have the same nranks.
 * \return 0, or DBUF_EINVAL (NULL, empty unit name, a dtype without a byte
 *   size), DBUF_ENRANKS (nranks differs from the first buffer's), DBUF_EDUP
 *   (the same unit and dtype again), DBUF_ENOMEM
 */
DBUF_EXPORT int dbuf_plan_add(dbuf_plan_t *p, const char *unit, dbuf_dtype_t dtype,
                              dbuf_layout_t *layout, const int64_t *model_ids,
                              dbuf_diag_t *diag);

DBUF_EXPORT void dbuf_plan_destroy(dbuf_plan_t *p);

/** \brief Number of buffers (0 for NULL). */
DBUF_EXPORT int64_t dbuf_plan_nbuffers(const dbuf_plan_t *p);

/** \brief Ranks (dp) of every buffer; 0 for an empty plan or NULL. */
DBUF_EXPORT int dbuf_plan_nranks(const dbuf_plan_t *p);

/** \brief Buffer b. \return 0, or DBUF_EINVAL, DBUF_ERANGE */
DBUF_EXPORT int dbuf_plan_buffer(const dbuf_plan_t *p, int64_t b, dbuf_plan_buffer_t *out);

/** Figures of a whole plan, in elements and bytes (each buffer's elements
 *  times its element size), overflow-checked. */
typedef struct dbuf_plan_totals {
  int64_t buffers;
  int64_t tensors;
  int64_t logical_elems, buffer_elems, padding_elems;
  int64_t logical_bytes, buffer_bytes, padding_bytes;
  int64_t max_rank_bytes; /**< the most any rank holds over all buffers */
  int64_t min_rank_bytes; /**< the least */
} dbuf_plan_totals_t;

/** \brief The totals. \return 0, or DBUF_EINVAL, DBUF_EOVERFLOW, DBUF_ENOMEM */
DBUF_EXPORT int dbuf_plan_totals(const dbuf_plan_t *p, dbuf_plan_totals_t *out);

/**
 * \brief Bytes rank holds over every buffer (segment elements times element
 * size, summed).
 * \return 0, or DBUF_EINVAL, DBUF_ERANGE (rank), DBUF_EOVERFLOW
 */
DBUF_EXPORT int dbuf_plan_rank_bytes(const dbuf_plan_t *p, int rank, int64_t *bytes);

/**
 * \brief Check what must hold across the buffers of a plan: a tensor name
 * is in one buffer at most (each buffer's own invariants are
 * dbuf_layout_validate()'s).  A name already in an earlier buffer is one
 * DBUF_VIOL_DUPLICATE violation: tensor is its id in the later buffer b,
 * other its id in the earlier buffer a, rank -1, and msg names the tensor
 * and both buffers.  O(total tensors).  Not collective.
 * \param[in] fn      may be NULL; non-zero from it stops the check
 * \param[out] nviol  may be NULL; number of violations found
 * \param[out] diag   may be NULL; the first violation
 * \return 0 when none, DBUF_ELAYOUT otherwise, DBUF_EINVAL, DBUF_EOVERFLOW,
 *   DBUF_ENOMEM
 */
DBUF_EXPORT int dbuf_plan_validate(const dbuf_plan_t *p, dbuf_violation_fn fn, void *arg,
                                   int64_t *nviol, dbuf_diag_t *diag);

#ifdef __cplusplus
}
#endif

#endif /* DBUF_PLAN_H */
