/*
 * dbuf-shard: global layouts of a flat parameter buffer over nranks segments.
 *
 * Not collective: this is pure ownership arithmetic with no communication.
 * A layout gives every tensor a global element offset, the buffer a size, and
 * every rank r the half-open segment [range[r], range[r+1]) with range[0] = 0
 * and range[nranks] = size.  Every count is int64_t and overflow-checked.
 *
 * Kinds:
 *  - DBUF_LAYOUT_PADDED: Megatron-FSDP RowAtomic/BlockAtomic with equal
 *    segments (LCM chunk, conjugate pairing, fragments, padding).
 *  - DBUF_LAYOUT_UNPADDED: tensors back to back; each rank cut moved to the
 *    nearest row (block) boundary of the tensor containing it, ties lower.
 *  - DBUF_LAYOUT_TENSOR: TensorAtomic, each tensor inside its owner's segment.
 *  - DBUF_LAYOUT_COMPACT: equal segments that are multiples of the padded
 *    layout's chunk, every tensor at a multiple of its own block x row size
 *    (no conjugates, no chunk-aligned starts), packed to the padding lower
 *    bound ceil(logical / (chunk x nranks)) x chunk x nranks where it can be.
 *    It satisfies every invariant of DBUF_LAYOUT_PADDED.
 * A block_size > 1 keeps block_size consecutive rows together (BlockAtomic).
 *
 * Thread safety: no global state; a built layout is never changed, so any
 * number of threads may query one layout at once; builders only read their
 * inputs.
 * Ownership: a builder copies the tensor list and the parameters (the caller
 * may destroy its list right away) and returns a layout freed with
 * dbuf_layout_destroy(); arrays that queries fill are the caller's; pointers
 * the getters return (the layout's tensor list, offsets, ranges, owners) are
 * borrowed, valid until dbuf_layout_destroy().
 */
#ifndef DBUF_LAYOUT_H
#define DBUF_LAYOUT_H

#include "dbuf/error.h"
#include "dbuf/tensors.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Layout kinds; the values are part of the wire format. */
typedef enum dbuf_layout_kind {
  DBUF_LAYOUT_PADDED = 1,
  DBUF_LAYOUT_UNPADDED = 2,
  DBUF_LAYOUT_TENSOR = 3,
  DBUF_LAYOUT_COMPACT = 4
} dbuf_layout_kind_t;

/** \brief "padded", "unpadded", "tensor", "compact"; "unknown" for other values. */
DBUF_EXPORT const char *dbuf_layout_kind_name(int kind);

/** \brief Parse a kind name. \return 0, or DBUF_EINVAL */
DBUF_EXPORT int dbuf_layout_kind_parse(const char *name, dbuf_layout_kind_t *kind);

/** Opaque layout. */
typedef struct dbuf_layout dbuf_layout_t;

/**
 * What the automatic owner planner balances (dbuf_layout_params_t.auto_owners
 * and dbuf_layout_plan_owners_cost()).
 */
typedef enum dbuf_owner_cost {
  DBUF_OWNERS_NUMEL = 1, /**< element count (`--owners auto`) */
  /**
   * Newton-Schulz cost (`--owners auto-ns`), as Muon's owner-compute
   * planners weigh a matrix: numel x min(rows, cols), rows = dim 0, cols =
   * the product of the other dims; a 1-D tensor costs numel.
   */
  DBUF_OWNERS_NS = 2
} dbuf_owner_cost_t;

/** How to build a layout; initialize with dbuf_layout_params_init(). */
typedef struct dbuf_layout_params {
  dbuf_layout_kind_t kind; /**< default DBUF_LAYOUT_PADDED */
  int nranks;              /**< segments (dp_size), >= 1; default 1 */
  int64_t block_size;      /**< rows kept together, >= 1; default 1 */
  const int *owners;       /**< TENSOR: owner of each tensor, or NULL */
  int64_t nowners;         /**< entries in owners */
  int auto_owners;         /**< TENSOR with owners NULL: plan them (LPT) on
                                this dbuf_owner_cost_t; 0 = do not */
  int64_t align_elems;     /**< COMPACT: every tensor offset also a multiple
                                of this many elements; 0 or 1 = none */
  int node_size;           /**< PADDED, COMPACT, UNPADDED: K consecutive
                                ranks per node; tensors that fit inside one
                                node's span are kept inside one node; 0 or 1
                                = off (see dbuf_layout_build()) */
} dbuf_layout_params_t;

/** \brief Fill params with the defaults. */
DBUF_EXPORT void dbuf_layout_params_init(dbuf_layout_params_t *p);

/**
 * \brief Build a layout.
 *
 * With node_size K > 1 and nranks > K, the nodes are the runs of K
 * consecutive segments, and a tensor no larger than a node's span (PADDED,
 * COMPACT: K x segment size; UNPADDED: the node's share of the buffer) is
 * placed so that no node boundary cuts it; larger tensors may cross.  PADDED
 * and COMPACT move tensors (adding padding where needed), UNPADDED moves the
 * node cuts to tensor boundaries (its segments become unequal).  Without
 * node_size every kind builds exactly as before.
 * \param[in] tensors  copied into the layout
 * \return 0, or
 *   DBUF_EINVAL (NULL argument, block_size < 1, unknown kind, align_elems or
 *   node_size negative),
 *   DBUF_ENRANKS (nranks < 1), DBUF_EBLOCK (dim 0 not divisible by block_size),
 *   DBUF_EOWNER (owner out of [0, nranks), wrong owner count, TENSOR without
 *   owners), DBUF_EOVERFLOW (any count, the chunk LCM included), DBUF_ENOMEM.
 *   diag names the tensor and the value.
 */
DBUF_EXPORT int dbuf_layout_build(const dbuf_tensors_t *tensors,
                                  const dbuf_layout_params_t *params,
                                  dbuf_layout_t **out, dbuf_diag_t *diag);

/**
 * \brief Longest-processing-time owners by element count: the same as
 * dbuf_layout_plan_owners_cost() with DBUF_OWNERS_NUMEL.
 */
DBUF_EXPORT int dbuf_layout_plan_owners(const dbuf_tensors_t *tensors, int nranks,
                                        int *owners, dbuf_diag_t *diag);

/**
 * \brief Longest-processing-time owners: the costliest tensor first (ties by
 * tensor id) to the least-loaded rank (ties to the lowest rank).
 * O(n log n + n log nranks).  Not collective.
 * \param[out] owners  count(tensors) entries, written only on success
 * \return 0, or DBUF_EINVAL (NULL argument, unknown cost), DBUF_ENRANKS,
 *   DBUF_EOVERFLOW (a tensor's cost or a rank's load; diag names the
 *   tensor), DBUF_ENOMEM
 */
DBUF_EXPORT int dbuf_layout_plan_owners_cost(const dbuf_tensors_t *tensors,
                                             int nranks, dbuf_owner_cost_t cost,
                                             int *owners, dbuf_diag_t *diag);

/**
 * \brief The cost of tensor id under a dbuf_owner_cost_t.  Not collective.
 * \return 0, or DBUF_EINVAL (NULL argument, unknown cost), DBUF_ERANGE (id),
 *   DBUF_EOVERFLOW (diag names the tensor and its shape)
 */
DBUF_EXPORT int dbuf_layout_owner_cost(const dbuf_tensors_t *tensors, int64_t id,
                                       dbuf_owner_cost_t cost, int64_t *out,
                                       dbuf_diag_t *diag);

/**
 * \brief The cost each rank owns in a layout with owners (TENSOR): the sum
 * of dbuf_layout_owner_cost() over its tensors.  O(n + nranks).
 * Not collective.
 * \param[out] loads  dbuf_layout_nranks(l) entries, written only on success
 * \return 0, or DBUF_EINVAL (NULL argument, no owners, unknown cost),
 *   DBUF_ELAYOUT (an owner out of range), DBUF_EOVERFLOW (a cost or a sum;
 *   diag names the tensor), DBUF_ENOMEM
 */
DBUF_EXPORT int dbuf_layout_owner_loads(const dbuf_layout_t *l,
                                        dbuf_owner_cost_t cost, int64_t *loads,
                                        dbuf_diag_t *diag);

/**
 * \brief Assemble a layout from its parts (for layouts read from a file or the
 * wire).  Only array sizes and basic ranges are checked here; run
 * dbuf_layout_validate() to check the invariants.
 * \param[in] chunk_size    PADDED, COMPACT: the chunk; 0 for the other kinds
 * \param[in] offsets       count(tensors) entries
 * \param[in] rank_offsets  nranks entries (the first must be 0)
 * \param[in] owners        NULL, or count(tensors) entries (TENSOR)
 * \return 0, or DBUF_EINVAL (NULL tensors, out or rank_offsets, NULL
 *   offsets with tensors, unknown kind, block_size < 1), DBUF_ENRANKS
 *   (nranks < 1), DBUF_ELAYOUT (size < 0, rank_offsets[0] not 0, chunk size
 *   not positive), DBUF_EOWNER (an owner outside [0, nranks)),
 *   DBUF_EOVERFLOW (block_size x row size of a tensor past INT64_MAX),
 *   DBUF_ENOMEM; out is written only on success
 */
DBUF_EXPORT int dbuf_layout_from_parts(const dbuf_tensors_t *tensors,
                                       dbuf_layout_kind_t kind, int nranks,
                                       int64_t block_size, int64_t chunk_size,
                                       int64_t size, const int64_t *offsets,
                                       const int64_t *rank_offsets,
                                       const int *owners, dbuf_layout_t **out,
                                       dbuf_diag_t *diag);

/** \brief Free a layout; NULL is accepted. */
DBUF_EXPORT void dbuf_layout_destroy(dbuf_layout_t *layout);

/* Getters.  Borrowed pointers stay valid until dbuf_layout_destroy(). */
DBUF_EXPORT dbuf_layout_kind_t dbuf_layout_kind(const dbuf_layout_t *l);
DBUF_EXPORT int dbuf_layout_nranks(const dbuf_layout_t *l);
DBUF_EXPORT int64_t dbuf_layout_block_size(const dbuf_layout_t *l);
/** PADDED, COMPACT: LCM of block_size x row size over the tensors; 0 otherwise. */
DBUF_EXPORT int64_t dbuf_layout_chunk_size(const dbuf_layout_t *l);
DBUF_EXPORT int64_t dbuf_layout_size(const dbuf_layout_t *l);
DBUF_EXPORT int64_t dbuf_layout_ntensors(const dbuf_layout_t *l);
DBUF_EXPORT const dbuf_tensors_t *dbuf_layout_tensors(const dbuf_layout_t *l);
/** Global element offset of each tensor, tensor-id order. */
DBUF_EXPORT const int64_t *dbuf_layout_offsets(const dbuf_layout_t *l);
/** range[nranks + 1]: rank r owns [range[r], range[r+1]). */
DBUF_EXPORT const int64_t *dbuf_layout_range(const dbuf_layout_t *l);
/** TENSOR: owner of each tensor; NULL for the other kinds. */
DBUF_EXPORT const int *dbuf_layout_owners(const dbuf_layout_t *l);
/**
 * Tensor ids sorted by (offset, id).  A layout whose offsets rise with
 * the tensor ids (unpadded ones; not padded ones, whose fragments fill
 * earlier gaps) keeps no such array: the
 * first call makes it (n words, once, safe from several threads); NULL if
 * out of memory.
 */
DBUF_EXPORT const int64_t *dbuf_layout_order(const dbuf_layout_t *l);
/**
 * \brief First position p in dbuf_layout_order() whose tensor offset is
 * >= x, or ntensors if none.  O(log n).  Not collective.
 */
DBUF_EXPORT int64_t dbuf_layout_order_lower(const dbuf_layout_t *l, int64_t x);

/* ---------------------------------------------------------------- */
/* Validation                                                        */

/** What a violation is about. */
typedef enum dbuf_violation_kind {
  DBUF_VIOL_RANGE = 1,   /**< range not 0..size or not non-decreasing */
  DBUF_VIOL_BOUNDS,      /**< tensor offset out of [0, size] or end past size */
  DBUF_VIOL_OVERLAP,     /**< two tensors overlap */
  DBUF_VIOL_ALIGN,       /**< tensor offset not aligned to block x row (PADDED, COMPACT) */
  DBUF_VIOL_CUT,         /**< a rank cut inside a row (block) of a tensor */
  DBUF_VIOL_UNEQUAL,     /**< segments not equal (PADDED, COMPACT) */
  DBUF_VIOL_SPLIT,       /**< TENSOR tensor not inside one segment, or wrong owner */
  DBUF_VIOL_GAP,         /**< padding where the kind promises none */
  DBUF_VIOL_BLOCK,       /**< dim 0 not divisible by block_size */
  DBUF_VIOL_CHUNK,       /**< chunk size is not the LCM, or segments not multiples of it */
  DBUF_VIOL_DUPLICATE    /**< a tensor name in two buffers of a plan (dbuf_plan_validate()) */
} dbuf_violation_kind_t;

/** One violated invariant. */
typedef struct dbuf_violation {
  dbuf_violation_kind_t kind;
  int64_t tensor;       /**< tensor id, or -1 */
  int64_t other;        /**< second tensor (OVERLAP), or -1 */
  int rank;             /**< rank, or -1 */
  int64_t a, b;         /**< the offending offsets */
  char msg[DBUF_DIAG_LEN]; /**< one line naming tensor, rank and offsets */
} dbuf_violation_t;

/** Called once per violation; return non-zero to stop early. */
typedef int (*dbuf_violation_fn)(const dbuf_violation_t *v, void *arg);

/**
 * \brief Check every invariant of the layout's kind.  O(n log n) in tensors
 * plus O(nranks log n).
 * \param[in] fn      may be NULL
 * \param[out] nviol  may be NULL; number of violations found
 * \param[out] diag   may be NULL; the first violation
 * \return 0 when valid, DBUF_ELAYOUT otherwise, DBUF_EINVAL, DBUF_ENOMEM
 */
DBUF_EXPORT int dbuf_layout_validate(const dbuf_layout_t *l, dbuf_violation_fn fn,
                                     void *arg, int64_t *nviol, dbuf_diag_t *diag);

/* ---------------------------------------------------------------- */
/* Queries                                                           */

/** \brief Segment [start, end) of rank. \return 0, or DBUF_EINVAL, DBUF_ERANGE */
DBUF_EXPORT int dbuf_layout_rank_range(const dbuf_layout_t *l, int rank,
                                       int64_t *start, int64_t *end);

/**
 * \brief Local range of a rank on a multi-axis device mesh.
 *
 * The shard index is formed over the axes with sharded[a] != 0, the innermost
 * (last) sharded axis most significant.  With S shards and a layout of
 * nranks = k x S segments, shard i owns the contiguous run of segments
 * [i k, (i+1) k), as in Megatron-FSDP's get_local_range.
 * \param[in] naxes    1..16
 * \param[in] sizes    mesh size of each axis (>= 1)
 * \param[in] coords   this rank's coordinate on each axis, in [0, sizes[a])
 * \param[in] sharded  non-zero for the axes the buffer is sharded over
 * \param[out] first_seg, nseg  may be NULL: the run of segments
 * \return 0, or DBUF_EINVAL (bad axes), DBUF_ERANGE (coordinate), DBUF_ENRANKS
 *   (nranks not a multiple of the shard count), DBUF_EOVERFLOW
 */
DBUF_EXPORT int dbuf_layout_local_range(const dbuf_layout_t *l, int naxes,
                                        const int *sizes, const int *coords,
                                        const int *sharded, int64_t *start,
                                        int64_t *end, int *first_seg, int *nseg,
                                        dbuf_diag_t *diag);

/*
 * The queries below accept any layout, also one that fails
 * dbuf_layout_validate(): there a tensor outside the buffer holds no piece
 * and no element, and rank offsets outside [0, size] count as the nearest
 * end of the buffer.  Their answers mean something only for a valid layout.
 */

/**
 * \brief Rank owning global element i, 0 <= i < size (padding has an owner
 * too).  Empty segments own nothing.  O(log nranks).
 * \return 0, or DBUF_EINVAL, DBUF_ERANGE (i outside [0, size))
 */
DBUF_EXPORT int dbuf_layout_owner_of(const dbuf_layout_t *l, int64_t i, int *rank);

/**
 * \brief Tensor holding global element i, or -1 for padding.  O(log n).
 * \return 0, or DBUF_EINVAL, DBUF_ERANGE
 */
DBUF_EXPORT int dbuf_layout_tensor_at(const dbuf_layout_t *l, int64_t i,
                                      int64_t *tensor);

/** A run of one tensor's elements inside one rank's segment. */
typedef struct dbuf_piece {
  int64_t tensor;     /**< tensor id */
  int rank;           /**< the rank holding it */
  int64_t elem_begin; /**< first element inside the tensor */
  int64_t nelems;     /**< elements in the piece */
  int64_t first_row;  /**< elem_begin / row_elems */
  int64_t nrows;      /**< rows touched (whole rows when whole_rows) */
  int whole_rows;     /**< the piece starts and ends on row boundaries */
  int64_t offset;     /**< offset inside the rank's segment */
} dbuf_piece_t;

/**
 * \brief The pieces of a rank's segment, in offset order.  Two-call pattern:
 * with buf NULL or cap too small *n is still the total count.  Empty tensors
 * are not listed.  O(log n + pieces).
 * \return 0, or DBUF_EINVAL, DBUF_ERANGE (rank)
 */
DBUF_EXPORT int dbuf_layout_rank_pieces(const dbuf_layout_t *l, int rank,
                                        dbuf_piece_t *buf, int64_t cap,
                                        int64_t *n);

/**
 * \brief The ranks holding a tensor, one piece per rank, in rank order.
 * Two-call pattern as above.  O(log nranks + pieces).
 * \return 0, or DBUF_EINVAL, DBUF_ERANGE (tensor)
 */
DBUF_EXPORT int dbuf_layout_tensor_pieces(const dbuf_layout_t *l, int64_t tensor,
                                          dbuf_piece_t *buf, int64_t cap,
                                          int64_t *n);

/* ---------------------------------------------------------------- */
/* Layout arithmetic: the one place for each formula                 */

/**
 * \brief The global range of rank `rank` when the layout's S segments are
 * spread over `nranks` ranks, S a multiple of nranks: with k = S / nranks the
 * rank holds the k consecutive segments [rank k, (rank + 1) k), that is the
 * range [range[rank k], range[(rank + 1) k]) (Megatron-FSDP's
 * get_local_range on one sharded axis; k = 1 is dbuf_layout_rank_range()).
 *
 * Not collective.  O(1).
 * \param[in]  nranks     ranks P, >= 1, dividing dbuf_layout_nranks(l)
 * \param[in]  rank       in [0, nranks)
 * \param[out] start, end the global range (the layout's own rank offsets)
 * \param[out] first_seg  may be NULL: rank k, the rank's first segment
 * \param[out] nseg       may be NULL: k, its number of segments
 * \return 0
 * \return DBUF_EINVAL   NULL l, start or end
 * \return DBUF_ENRANKS  nranks < 1 or not a divisor of the segment count
 * \return DBUF_ERANGE   rank outside [0, nranks)
 */
DBUF_EXPORT int dbuf_layout_rank_segments(const dbuf_layout_t *l, int nranks,
                                          int rank, int64_t *start, int64_t *end,
                                          int *first_seg, int *nseg);

/** The rows of one tensor that a run of its elements touches. */
typedef struct dbuf_rows {
  int64_t elem_begin; /**< first element of the run inside the tensor */
  int64_t nelems;     /**< elements in the run; 0 for an empty run */
  int64_t first_row;  /**< row of the first element: elem_begin / row_elems */
  int64_t first_col;  /**< its column: elem_begin % row_elems */
  int64_t nrows;      /**< rows touched, cut ones included; 0 if empty */
  int cut_first;      /**< the run starts inside its first row (first_col > 0) */
  int cut_last;       /**< the run ends inside its last row */
} dbuf_rows_t;
/*
 * The rows whose first element lies in the run (the rows a rank owns under
 * whole-row ownership) are the nrows - cut_first rows from
 * first_row + cut_first; the last row touched is first_row + nrows - 1; the
 * run holds whole rows when neither cut_first nor cut_last is set.
 */

/**
 * \brief The rows of tensor `tensor` touched by its elements
 * [elem_begin, elem_begin + nelems).
 *
 * Not collective.  O(1).
 * \param[out] rows  written only on success
 * \return 0
 * \return DBUF_EINVAL  NULL t or rows
 * \return DBUF_ERANGE  tensor id out of range, or the run not inside
 *                      [0, numel) of the tensor (negative values included)
 */
DBUF_EXPORT int dbuf_layout_piece_rows(const dbuf_tensors_t *t, int64_t tensor,
                                       int64_t elem_begin, int64_t nelems,
                                       dbuf_rows_t *rows);

/**
 * \brief The elements of tensor `tensor` inside the global range
 * [start, end), and the rows they touch: the tensor clipped to the range.
 *
 * Not collective.  O(1).  The range may reach outside the buffer.  A tensor
 * outside the buffer (a layout that fails dbuf_layout_validate()) and a
 * tensor that does not meet the range give an empty run (nelems 0).
 * \param[out] rows  written only on success
 * \return 0
 * \return DBUF_EINVAL  NULL l or rows, start > end
 * \return DBUF_ERANGE  tensor id out of range
 */
DBUF_EXPORT int dbuf_layout_rows_in(const dbuf_layout_t *l, int64_t tensor,
                                    int64_t start, int64_t end, dbuf_rows_t *rows);

/**
 * \brief The part of a piece inside the global range [start, end), as a
 * piece of the same tensor and rank: elem_begin, nelems, first_row, nrows,
 * whole_rows and offset describe the clipped extent.
 *
 * Not collective.  O(1).  The piece comes from dbuf_layout_rank_pieces() or
 * dbuf_layout_tensor_pieces() of the same layout; its global start is the
 * rank's segment start plus piece->offset.  When the piece and the range do
 * not meet, out->nelems and out->nrows are 0 and out->offset is where the
 * range begins relative to the piece's segment, clamped to the piece.
 * \param[out] out  may be the same object as piece; written only on success
 * \return 0
 * \return DBUF_EINVAL  NULL argument, start > end
 * \return DBUF_ERANGE  the piece's tensor or rank out of range, or its
 *                      extent not inside its tensor and its rank's segment
 */
DBUF_EXPORT int dbuf_layout_piece_clip(const dbuf_layout_t *l,
                                       const dbuf_piece_t *piece, int64_t start,
                                       int64_t end, dbuf_piece_t *out);

/**
 * \brief Check that `owner` is a rank of [0, nranks) for tensor `tensor`.
 *
 * Not collective.  O(1).  The owner is int64_t so values read from a file or
 * the wire are checked before they are narrowed to int.
 * \param[out] diag  may be NULL; on DBUF_EOWNER
 *                   "tensor NAME: owner O out of range [0, N)"
 * \return 0
 * \return DBUF_EINVAL   NULL t
 * \return DBUF_ERANGE   tensor id out of range
 * \return DBUF_ENRANKS  nranks < 1
 * \return DBUF_EOWNER   owner outside [0, nranks)
 */
DBUF_EXPORT int dbuf_layout_check_owner(const dbuf_tensors_t *t, int64_t tensor,
                                        int64_t owner, int nranks,
                                        dbuf_diag_t *diag);

/** Summary figures of a layout. */
typedef struct dbuf_layout_stats {
  int64_t logical;        /**< sum of tensor elements */
  int64_t padding;        /**< size - logical (0 if the tensors hold more: an invalid layout) */
  int64_t gap_elems;      /**< padding before the end of the last tensor */
  int64_t tail_elems;     /**< padding after the end of the last tensor */
  int64_t min_segment, max_segment;
  int min_rank, max_rank; /**< lowest ranks with the min / max segment */
  int64_t split_tensors;  /**< tensors held by more than one rank */
  int empty_segments;     /**< ranks with an empty segment */
  int64_t largest_tensor; /**< id of the largest tensor (first on ties), -1 if none */
} dbuf_layout_stats_t;

/** \brief Compute the statistics.  O(n + nranks). \return 0, or DBUF_EINVAL */
DBUF_EXPORT int dbuf_layout_stats(const dbuf_layout_t *l, dbuf_layout_stats_t *st);

#ifdef __cplusplus
}
#endif

#endif /* DBUF_LAYOUT_H */
