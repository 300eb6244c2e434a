/*
 * dbuf-shard: sharding schemes side by side -- this project's layouts and
 * the rules by which the frameworks users come from shard parameters,
 * measured by the same code (`dbuf-shard compare`).
 *
 * Not collective: pure arithmetic, no MPI.  W is the shard count (nranks),
 * d0 a tensor's dim 0 and row the product of its other dims (1 for 1-D).
 * The peers' rules, as read from their sources (README "Compare"):
 *  - fsdp2 (PyTorch FSDP2, fully_shard): every parameter split on dim 0 in
 *    chunks of ceil(d0 / W) rows (torch.chunk: trailing ranks may hold
 *    nothing), each rank's storage padded to ceil(d0 / W) rows;
 *  - fsdp1 (PyTorch FSDP1, FlatParameter, use_orig_params=False): the
 *    parameters of one unit -- the whole model, or with a plan each
 *    buffer's (unit, dtype) -- concatenated in order, padded to a multiple
 *    of W and cut into W equal chunks;
 *  - zero3 (DeepSpeed ZeRO-3): every parameter flattened on its own, padded
 *    to a multiple of W and cut into W equal partitions.
 * Every scheme is measured in O(n log n + W) for n tensors, every count
 * int64_t and overflow-checked.
 *
 * Thread safety: no global state; every function may run in any thread at
 * any time, sharing tensor lists and layouts read-only.
 * Ownership: scheme names and descriptions are static strings; measurements
 * fill the caller's structures; nothing here allocates for the caller.
 */
#ifndef DBUF_PEERS_H
#define DBUF_PEERS_H

#include "dbuf/error.h"
#include "dbuf/layout.h"
#include "dbuf/plan.h"
#include "dbuf/tensors.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** What a sharding scheme costs; sizes in bytes. */
typedef struct dbuf_shard_stats {
  int64_t buffer_bytes;   /**< allocated over all ranks, padding included */
  int64_t padding_bytes;  /**< buffer_bytes minus the tensors' bytes */
  int64_t max_rank_bytes; /**< allocated on the fullest rank */
  int64_t min_rank_bytes; /**< allocated on the emptiest rank */
  int64_t rows_cut;       /**< (tensor, row) pairs whose elements lie on more
                               than one rank (1-D tensors: rows of 1 element) */
  int64_t tensors_split;  /**< tensors whose elements lie on more than one rank */
  /**
   * Tensors whose elements lie on ranks of more than one node, nodes of
   * ranks_per_node consecutive ranks (node = rank / ranks_per_node, the
   * node report of dbuf/nodes.h for the flat layouts); -1 when
   * ranks_per_node is 0.
   */
  int64_t tensors_crossing_nodes;
} dbuf_shard_stats_t;

/** \brief Number of schemes (padded, compact, unpadded, tensor, fsdp2, fsdp1, zero3). */
DBUF_EXPORT int dbuf_scheme_count(void);

/** \brief Name of scheme i in [0, dbuf_scheme_count()); NULL otherwise. */
DBUF_EXPORT const char *dbuf_scheme_name(int i);

/**
 * \brief One-line description of scheme i ("PyTorch FSDP2: ..."); NULL when
 * i is out of range.
 */
DBUF_EXPORT const char *dbuf_scheme_describe(int i);

/** \brief Index of the scheme called name. \return 0, or DBUF_EINVAL */
DBUF_EXPORT int dbuf_scheme_find(const char *name, int *i);

/**
 * \brief Shard the tensors by scheme i over nranks ranks and measure it.
 *
 * Not collective.  The layouts of this project are built as `plan` builds
 * them (block size 1; the tensor layout with auto owners); with
 * ranks_per_node >= 2 padded, compact and unpadded are built node-aware
 * (dbuf_layout_params_t.node_size = ranks_per_node), as `plan --node-size`
 * builds them.  A peer's tensor crosses when the ranks holding its elements
 * belong to more than one node.
 * \param[in] ranks_per_node  0 (no node figure) or >= 1
 * \param[in] elem_size       bytes per element, >= 1
 * \return 0, or DBUF_EINVAL (NULL argument, i out of range, elem_size < 1,
 *   ranks_per_node < 0), DBUF_ENRANKS (nranks < 1), DBUF_EOVERFLOW (a size;
 *   diag names the tensor where there is one), DBUF_ENOMEM
 */
DBUF_EXPORT int dbuf_scheme_measure(const dbuf_tensors_t *tensors, int i,
                                    int nranks, int ranks_per_node,
                                    int64_t elem_size, dbuf_shard_stats_t *st,
                                    dbuf_diag_t *diag);

/**
 * \brief Shard the tensors of every buffer of a plan by scheme i, each
 * buffer on its own, and measure the whole.
 *
 * Not collective.  Only the plan's grouping is used (each buffer's tensor
 * list, element size and nranks), not its layouts: a trainer with one flat
 * buffer per FSDP unit and dtype shards each buffer by the scheme, so
 * padded, compact, unpadded and tensor are built per buffer as
 * dbuf_scheme_measure() builds them, FSDP1 makes each buffer one flat
 * parameter (FSDP1 wraps per unit, and a FlatParameter has one dtype), and
 * FSDP2 and ZeRO-3, per parameter anyway, are unchanged but for the
 * element sizes.  buffer_bytes, padding_bytes, rows_cut, tensors_split and
 * tensors_crossing_nodes are sums over the buffers, each in its own
 * element size; max_rank_bytes and min_rank_bytes are the largest and
 * smallest of the per-rank sums over the buffers.  O(buffers x nranks)
 * beside the builds.
 * \return 0, or DBUF_EINVAL (NULL or empty plan, i out of range,
 *   ranks_per_node < 0), DBUF_EOVERFLOW, DBUF_ENOMEM, the errors of
 *   dbuf_scheme_measure()
 */
DBUF_EXPORT int dbuf_scheme_measure_plan(const dbuf_plan_t *p, int i, int ranks_per_node,
                                         dbuf_shard_stats_t *st, dbuf_diag_t *diag);

/**
 * \brief Measure a layout as dbuf_scheme_measure() measures its schemes:
 * buffer = size, rank sizes = segments, rows cut and tensors split from the
 * rank boundaries, node crossings from the node report.
 *
 * Not collective.  O(n log n + nranks).
 * \return as dbuf_scheme_measure()
 */
DBUF_EXPORT int dbuf_layout_measure(const dbuf_layout_t *l, int ranks_per_node,
                                    int64_t elem_size, dbuf_shard_stats_t *st,
                                    dbuf_diag_t *diag);

#ifdef __cplusplus
}
#endif

#endif /* DBUF_PEERS_H */
