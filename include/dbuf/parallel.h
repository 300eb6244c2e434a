/*
 * dbuf-shard: model parallelism (tensor, pipeline, expert) applied to the
 * shapes of a model.
 *
 * Not collective; pure arithmetic.  A data-parallel group of a
 * Megatron-Core run holds, on tensor-parallel rank 0 of pipeline stage S
 * and expert-parallel rank 0, the local shapes these rules give:
 *
 *   - column-parallel linears (q/k/v, gate/up, fc1): dim 0 / tp;
 *   - row-parallel linears (attention output, down, fc2): dim 1 / tp,
 *     their biases replicated;
 *   - the vocabulary-parallel embedding and output layer: the vocabulary
 *     padded to a multiple of vocab_divisor x tp, then dim 0 / tp;
 *   - norms, routers, position embeddings, DeepSeek's low-rank down
 *     projections: replicated (full on every tensor-parallel rank);
 *   - expert linears: experts / ep experts per expert-parallel rank, each
 *     split as above by the expert tensor-parallel degree;
 *   - decoder layers split over the pp stages evenly, or as pp_layers says;
 *     the embedding on the first stage, the final norm and the output
 *     layer on the last.
 *
 * Every split must be exact (Megatron's divide()); a configuration that
 * does not divide is DBUF_EPARALLEL with a diagnostic naming the setting or
 * tensor, the dim and the degree.
 *
 * Thread safety: no global state; every function may run in any thread at
 * any time.
 * Ownership: dbuf_parallel_t and the split results are plain data of the
 * caller's; naming names are static strings; the model builders of
 * dbuf/models.h return tensor lists freed with dbuf_tensors_destroy().
 */
#ifndef DBUF_PARALLEL_H
#define DBUF_PARALLEL_H

#include "dbuf/error.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Most pipeline stages a --pp-layers list may name. */
#define DBUF_PARALLEL_MAX_PP 1024

/** Default of vocab_divisor (Megatron's --make-vocab-size-divisible-by). */
#define DBUF_PARALLEL_VOCAB_DIVISOR 128

/** Parameter names of a generated model. */
typedef enum dbuf_naming {
  DBUF_NAMING_HF = 0,      /**< the model's own names, each tensor on its own */
  DBUF_NAMING_MEGATRON = 1 /**< Megatron-Core names and fused shapes (TE spec) */
} dbuf_naming_t;

/** How one tensor is split over the tensor-parallel ranks. */
typedef enum dbuf_split {
  DBUF_SPLIT_REPLICATED = 0, /**< full copy on every rank */
  DBUF_SPLIT_COLUMN,         /**< dim 0 / tp */
  DBUF_SPLIT_COLUMN_GLU,     /**< dim 0 holds gate then up, each / tp */
  DBUF_SPLIT_ROW,            /**< dim 1 / tp */
  DBUF_SPLIT_VOCAB,          /**< dim 0 padded to vocab_divisor x tp, then / tp */
  DBUF_SPLIT_EXPERT_COLUMN,  /**< dim 0 / expert tp */
  DBUF_SPLIT_EXPERT_COLUMN_GLU, /**< dim 0 holds gate then up, each / expert tp */
  DBUF_SPLIT_EXPERT_ROW      /**< dim 1 / expert tp */
} dbuf_split_t;

/**
 * The parallel degrees: plain data, fill with dbuf_parallel_init() first.
 * Every field is global input (the same on every rank of a run).
 */
typedef struct dbuf_parallel {
  int64_t tp;            /**< tensor-parallel degree, >= 1 */
  int64_t pp;            /**< pipeline stages, >= 1 */
  int64_t ep;            /**< expert-parallel degree, >= 1 */
  int64_t expert_tp;     /**< expert tensor-parallel degree; 0: the same as tp */
  int64_t vocab_divisor; /**< >= 1 */
  int64_t stage;         /**< the pipeline stage, 0 .. pp - 1 */
  int64_t npp_layers;    /**< 0: even split; else pp, with pp_layers[0 .. pp) */
  int64_t pp_layers[DBUF_PARALLEL_MAX_PP]; /**< decoder layers per stage, each >= 1 */
  dbuf_naming_t naming;
} dbuf_parallel_t;

/** What one stage holds, by how it is split (elements of TP rank 0, EP rank 0). */
typedef struct dbuf_parallel_stats {
  int64_t first_layer;   /**< the stage's decoder layers: [first_layer, */
  int64_t nlayers;       /**<   first_layer + nlayers) in global numbering */
  int64_t vocab_padded;  /**< the padded vocabulary */
  int64_t total;         /**< every element of the stage's tensors */
  int64_t tp_split;      /**< elements of tensors split over the tp ranks */
  int64_t replicated;    /**< elements of tensors every tp rank holds in full */
  int64_t expert;        /**< elements of expert tensors (split over ep x expert tp) */
  int64_t vocab_padding; /**< padding rows x hidden of the vocabulary tensors,
                              over all tp ranks together */
} dbuf_parallel_stats_t;

/** \brief Defaults: tp = pp = ep = 1, expert_tp = tp, vocab_divisor 128,
 *  stage 0, even split, hf names.  NULL is accepted. */
DBUF_EXPORT void dbuf_parallel_init(dbuf_parallel_t *p);

/**
 * \brief Check the degrees on their own (not against a model).
 * \return 0, or DBUF_EINVAL (p NULL, a degree or the divisor < 1, stage out
 *   of [0, pp), npp_layers neither 0 nor pp, a pp_layers entry < 1),
 *   with diag naming the setting
 */
DBUF_EXPORT int dbuf_parallel_check(const dbuf_parallel_t *p, dbuf_diag_t *diag);

/** \brief The expert tensor-parallel degree in effect (expert_tp, or tp when 0). */
DBUF_EXPORT int64_t dbuf_parallel_expert_tp(const dbuf_parallel_t *p);

/**
 * \brief The padded vocabulary: the smallest multiple of divisor x tp that
 * is >= vocab (Megatron-LM's vocab_size_with_padding).
 * \return 0, or DBUF_EINVAL (vocab < 0, divisor or tp < 1), DBUF_EOVERFLOW
 */
DBUF_EXPORT int dbuf_parallel_pad_vocab(int64_t vocab, int64_t divisor, int64_t tp,
                                        int64_t *padded);

/**
 * \brief The decoder layers of p->stage out of layers: [*first, *first + *count).
 * \return 0, or DBUF_EINVAL (p invalid), DBUF_EPARALLEL (layers not divisible
 *   by pp without pp_layers; pp_layers not summing to layers)
 */
DBUF_EXPORT int dbuf_parallel_stage_layers(const dbuf_parallel_t *p, int64_t layers,
                                           int64_t *first, int64_t *count,
                                           dbuf_diag_t *diag);

/**
 * \brief The local shape of one tensor under a split.
 * \param[in]  name   tensor name, for the diagnostic
 * \param[in]  ndim   1 .. 16; ROW splits need ndim >= 2
 * \param[in]  dims   the full shape
 * \param[out] local  ndim values
 * \param[out] padding  may be NULL: VOCAB only, the padding rows added to dim 0
 *                      (over all tp ranks); 0 otherwise
 * \return 0, or DBUF_EINVAL, DBUF_EOVERFLOW, DBUF_EPARALLEL (the split dim
 *   is not divisible by the degree: diag names the tensor, dim and degree)
 */
DBUF_EXPORT int dbuf_parallel_split(const dbuf_parallel_t *p, dbuf_split_t kind,
                                    const char *name, int ndim, const int64_t *dims,
                                    int64_t *local, int64_t *padding, dbuf_diag_t *diag);

/** \brief "hf" or "megatron"; "?" for an unknown value. */
DBUF_EXPORT const char *dbuf_naming_name(dbuf_naming_t n);

/** \brief Parse "hf" or "megatron".  \return 0, or DBUF_EINVAL */
DBUF_EXPORT int dbuf_naming_parse(const char *text, dbuf_naming_t *out);

#ifdef __cplusplus
}
#endif

#endif /* DBUF_PARALLEL_H */
