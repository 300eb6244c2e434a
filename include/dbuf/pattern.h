/*
 * dbuf-shard: the deterministic data pattern written into materialized
 * segments, and its verifier.
 *
 * Not collective.  Element (tensor t, row r, column c) holds the low
 * elem_size bytes of dbuf_pattern_word(t, r, c), as an unsigned integer of
 * elem_size bytes in the host's byte order; padding holds zeros.  The
 * column counts elements inside the row (0 .. row_elems - 1), so every
 * element of every tensor has its own value.
 *
 * The fill and the verifier share only dbuf_pattern_word().  The fill walks
 * the layout's pieces (dbuf_layout_rank_pieces), their rows in runs of up
 * to 1 MiB; the verifier finds the tensor at each offset on its own, with
 * dbuf_layout_tensor_at() and the tensor offsets, once per run of one
 * tensor or of padding, so a bug in the piece arithmetic cannot hide in
 * both.
 *
 * Thread safety: no state shared between calls (a switch the tests set
 * aside); the fill writes only the caller's buffer and the verifier only
 * reads it, so threads may fill or verify disjoint windows of one segment
 * at once with one shared layout.
 * Ownership: every buffer is the caller's; nothing here allocates for the
 * caller.
 */
#ifndef DBUF_PATTERN_H
#define DBUF_PATTERN_H

#include "dbuf/error.h"
#include "dbuf/layout.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** \brief The 64-bit pattern word of element (tensor, row, col).  Not collective. */
DBUF_EXPORT uint64_t dbuf_pattern_word(int64_t tensor, int64_t row, int64_t col);

/** Progress callback: done and total bytes; return non-zero to stop (DBUF_ECANCELED). */
typedef int (*dbuf_progress_fn)(int64_t done, int64_t total, void *arg);

/**
 * \brief Write the pattern of global elements [start, end) into buf.
 *
 * Not collective.  Every byte of buf (end - start) x elem_size bytes long is
 * written exactly once.  A fill of 4 MiB or more on Linux x86-64 writes
 * around the caches (non-temporal stores, fenced before the call returns)
 * where the pages are resident, and through the caches where they are not:
 * it asks the kernel (mincore) about the first page of every 2 MiB span
 * before it writes any byte of it (for the first span, the page at buf).
 * Into memory written before (a locked segment, a buffer filled again)
 * streaming saves reading every line before writing it; into pages not yet
 * faulted in, the kernel clears each page through the caches at its first
 * store, and streaming would write every line twice.  Anonymous memory
 * that was only read (the shared zero page) and file mappings count as
 * resident when mincore says so.  The bytes are the same either way.
 * \param[in] elem_size  1, 2, 4 or 8
 * \param[in] progress   may be NULL; called about every 64 MiB
 * \return 0, or DBUF_EINVAL (NULL buf with a non-empty range, bad elem_size),
 *   DBUF_ECANCELED (progress returned non-zero), DBUF_ERANGE (0 <= start <= end <= size violated),
 *   DBUF_ELAYOUT (rank offsets out of order or a tensor outside the buffer:
 *   validate first), DBUF_EOVERFLOW ((end - start) x elem_size bytes)
 */
DBUF_EXPORT int dbuf_pattern_fill(const dbuf_layout_t *l, int64_t start, int64_t end,
                                  void *buf, int64_t elem_size,
                                  dbuf_progress_fn progress, void *arg);

/** The first element that does not hold its pattern value. */
typedef struct dbuf_pattern_bad {
  int64_t offset;    /**< global element offset */
  int64_t tensor;    /**< tensor id, or -1 for padding */
  int64_t row, col;  /**< in the tensor (-1 for padding) */
  uint64_t expected; /**< low elem_size bytes of the pattern word, or 0 */
  uint64_t found;
} dbuf_pattern_bad_t;

/**
 * \brief Check global elements [start, end) held in buf against the pattern.
 *
 * Not collective.
 * \param[out] nbad   number of wrong elements (may be NULL)
 * \param[out] first  the first wrong element (may be NULL; written if *nbad > 0)
 * \return 0 (also when elements are wrong: see nbad), or DBUF_EINVAL,
 *   DBUF_ERANGE, DBUF_ELAYOUT, DBUF_EOVERFLOW as dbuf_pattern_fill()
 */
DBUF_EXPORT int dbuf_pattern_verify(const dbuf_layout_t *l, int64_t start, int64_t end,
                                    const void *buf, int64_t elem_size,
                                    dbuf_progress_fn progress, void *arg,
                                    int64_t *nbad, dbuf_pattern_bad_t *first);

#ifdef __cplusplus
}
#endif

#endif /* DBUF_PATTERN_H */
