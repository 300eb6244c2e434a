/*
 * dbuf-shard: facts about a range of a layout that reports and tests need
 * (the first and last rows a range holds, a plan with one cut moved).
 *
 * Not collective; thread-safe on a layout nobody modifies.  Errors as in
 * dbuf/error.h.
 */
#ifndef DBUF_LAYOUT_FACTS_H
#define DBUF_LAYOUT_FACTS_H

#include "dbuf/layout.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The first and last tensor rows with an element in a global range. */
typedef struct dbuf_span_rows {
  int64_t first_tensor; /**< tensor of the range's first tensor element, or -1 */
  int64_t first_row;    /**< its row, or -1 */
  int64_t last_tensor;  /**< tensor of the range's last tensor element, or -1 */
  int64_t last_row;     /**< its row, or -1 */
} dbuf_span_rows_t;

/**
 * \brief The first and last (tensor, row) holding an element of the global
 * range [start, end); all four -1 when the range holds only padding or is
 * empty.  Empty tensors and tensors outside the buffer are skipped.
 *
 * Not collective.  O(log n + tensors meeting the range).  The range is
 * clamped to [0, size).
 * \param[out] out  written only on success
 * \return 0, or DBUF_EINVAL (NULL l or out, start > end)
 */
DBUF_EXPORT int dbuf_layout_span_rows(const dbuf_layout_t *l, int64_t start, int64_t end,
                                      dbuf_span_rows_t *out);

/**
 * \brief A copy of l with rank offset `cut` moved by one row, as an older
 * plan for slightly other shapes would have it: back by one row of the
 * tensor ending just before the cut (one element when padding is there),
 * or, when the segment before would become negative, forward by one row
 * of the tensor at the cut.  For tests of stale-plan detection: the copy
 * breaks whatever invariant the move breaks, it is not validated.
 *
 * Not collective.
 * \param[in]  cut  1 .. nranks - 1 (rank offset 0 never moves)
 * \param[out] out  a new layout, written only on success
 * \return 0, or DBUF_EINVAL (NULL argument), DBUF_ERANGE (cut outside
 *   [1, nranks), or neither neighbour segment has room), DBUF_ENOMEM
 */
DBUF_EXPORT int dbuf_layout_move_cut(const dbuf_layout_t *l, int cut, dbuf_layout_t **out);

#ifdef __cplusplus
}
#endif

#endif /* DBUF_LAYOUT_FACTS_H */
