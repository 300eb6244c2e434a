/*
 * dbuf-shard: the node report -- which part of the global buffer each node
 * (host) holds, and which tensors cross a node boundary.
 *
 * Not collective: pure arithmetic on a layout and a rank -> node table.  The
 * MPI service builds the table from MPI_COMM_TYPE_SHARED; `plan
 * --ranks-per-node K` builds it with dbuf_nodes_create_blocked().
 *
 * Ranks and segments: the layout has S segments and there are P ranks, S a
 * multiple of P; rank r holds the contiguous run of k = S / P segments
 * [r k, (r + 1) k) (Megatron-FSDP's get_local_range on one sharded axis).
 * With k = 1 a rank is a segment.  The ranks of a node need not be
 * contiguous: a node whose segments do not form one interval is reported as
 * not contiguous, and a tensor may then cross between the same two nodes
 * several times.
 *
 * Thread safety: no global state; a built node report is never changed and
 * may be read from any number of threads at once.
 * Ownership: the rank -> node table is copied in; dbuf_nodes_create*() return
 * a report freed with dbuf_nodes_destroy(); its node and crossing records and
 * their pointers are borrowed, valid until dbuf_nodes_destroy().
 */
#ifndef DBUF_NODES_H
#define DBUF_NODES_H

#include "dbuf/error.h"
#include "dbuf/layout.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Opaque node report. */
typedef struct dbuf_nodes dbuf_nodes_t;

/** One node.  Pointers are borrowed, valid until dbuf_nodes_destroy(). */
typedef struct dbuf_node_info {
  const char *name;  /**< host name */
  int nranks;        /**< ranks on the node (>= 1) */
  const int *ranks;  /**< those ranks, ascending */
  int contiguous;    /**< its non-empty segments form one interval (1 if none) */
  int64_t first;     /**< start of its first non-empty segment (of its first
                          rank's segment if all are empty) */
  int64_t end;       /**< end of its last non-empty segment; [first, end) is
                          its global range when contiguous */
  int64_t elements;  /**< elements held, padding included */
  int64_t bytes;     /**< elements x elem_size */
} dbuf_node_info_t;

/** A maximal run of one tensor's elements held by one node. */
typedef struct dbuf_node_side {
  int node;           /**< node index */
  int first_rank;     /**< first and last rank of the run */
  int last_rank;
  int64_t elem_begin; /**< first element of the run inside the tensor */
  int64_t nelems;     /**< elements of the run */
  int64_t first_row;  /**< elem_begin / row_elems */
  int64_t rows;       /**< rows touched by the run */
} dbuf_node_side_t;

/** A tensor held by more than one node run.  Borrowed pointers. */
typedef struct dbuf_node_crossing {
  int64_t tensor;                /**< tensor id */
  int64_t nsides;                /**< >= 2 */
  const dbuf_node_side_t *sides; /**< in offset order */
} dbuf_node_crossing_t;

/**
 * \brief Compute the node report.  O(n log n + nranks) (n tensors).
 *
 * Not collective.
 * \param[in] l             the layout (not kept)
 * \param[in] nranks        ranks P; dbuf_layout_nranks(l) must be a multiple
 * \param[in] node_of_rank  nranks entries in [0, nnodes); every node has a rank
 * \param[in] nnodes        >= 1
 * \param[in] names         NULL ("node0", "node1", ...) or nnodes host names;
 *                          copied
 * \param[in] elem_size     bytes per element, >= 1
 * \param[out] out          freed with dbuf_nodes_destroy()
 * \return 0
 * \return DBUF_EINVAL     NULL argument, nnodes < 1, elem_size < 1, a node
 *                         index out of range, a node without ranks, NULL or
 *                         empty name
 * \return DBUF_ENRANKS    nranks < 1 or not a divisor of the segment count
 * \return DBUF_ELAYOUT    rank offsets out of order or a tensor outside the
 *                         buffer (a layout that fails dbuf_layout_validate)
 * \return DBUF_EOVERFLOW  a byte count overflows
 * \return DBUF_ENOMEM
 */
DBUF_EXPORT int dbuf_nodes_create(const dbuf_layout_t *l, int nranks,
                                  const int *node_of_rank, int nnodes,
                                  const char *const *names, int64_t elem_size,
                                  dbuf_nodes_t **out, dbuf_diag_t *diag);

/**
 * \brief The node report for nodes of K consecutive ranks (node = rank / K),
 * named "node0", "node1", ...; the last node may have fewer ranks.
 *
 * Not collective.  This is what `plan --ranks-per-node K` reports.
 * \return as dbuf_nodes_create(); DBUF_EINVAL also for K < 1
 */
DBUF_EXPORT int dbuf_nodes_create_blocked(const dbuf_layout_t *l, int nranks,
                                          int ranks_per_node, int64_t elem_size,
                                          dbuf_nodes_t **out, dbuf_diag_t *diag);

/** \brief Free a report; NULL is accepted.  Not collective. */
DBUF_EXPORT void dbuf_nodes_destroy(dbuf_nodes_t *nodes);

/** \brief Number of nodes; 0 for NULL.  Not collective. */
DBUF_EXPORT int dbuf_nodes_count(const dbuf_nodes_t *nodes);

/** \brief Node index of a rank; -1 if out of range.  Not collective. */
DBUF_EXPORT int dbuf_nodes_node_of(const dbuf_nodes_t *nodes, int rank);

/**
 * \brief Describe one node.  Not collective.
 * \return 0, DBUF_EINVAL (NULL), DBUF_ERANGE (node out of range)
 */
DBUF_EXPORT int dbuf_nodes_info(const dbuf_nodes_t *nodes, int node,
                                dbuf_node_info_t *info);

/** \brief Number of tensors crossing a node boundary; 0 for NULL.  Not collective. */
DBUF_EXPORT int64_t dbuf_nodes_ncrossing(const dbuf_nodes_t *nodes);

/**
 * \brief Crossing i, in offset order of the tensors.  Not collective.
 * \return 0, DBUF_EINVAL (NULL), DBUF_ERANGE (i out of range)
 */
DBUF_EXPORT int dbuf_nodes_crossing(const dbuf_nodes_t *nodes, int64_t i,
                                    dbuf_node_crossing_t *c);

#ifdef __cplusplus
}
#endif

#endif /* DBUF_NODES_H */
