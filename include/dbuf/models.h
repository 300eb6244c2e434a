/*
 * dbuf-shard: built-in model shape generators.
 *
 * Not collective.  Each built-in model is generated from its public
 * architecture config (hidden size, FFN size, layers, heads, MoE and MLA
 * dims, vocab, ...) into a tensor list with the real parameter names, in
 * PyTorch named_parameters() order (module registration order; tied
 * embeddings appear once).  Models are indexed 0 .. dbuf_models_count() - 1
 * in a fixed order; the index of a model is stable within one build of the
 * library only, so callers should keep names, not indices.
 *
 * Hugging Face models use the transformers module names (model.layers.N....).
 * Megatron-Core models use the names of the local (non Transformer Engine)
 * GPT layer spec (decoder.layers.N.self_attention.linear_qkv.weight, ...).
 *
 * Thread safety: no global state; every function may run in any thread at
 * any time.
 * Ownership: model names are static strings; dbuf_model_summary() fills the
 * caller's buffer; the builders return a tensor list freed with
 * dbuf_tensors_destroy().
 */
#ifndef DBUF_MODELS_H
#define DBUF_MODELS_H

#include "dbuf/error.h"
#include "dbuf/parallel.h"
#include "dbuf/tensors.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Name of the model the tool uses when none is given. */
#define DBUF_MODEL_DEFAULT "llama-3.2-1b"

/** Room for any summary written by dbuf_model_summary(), NUL included. */
#define DBUF_MODEL_SUMMARY_LEN 320

/** \brief Number of built-in models (always >= 1). */
DBUF_EXPORT int dbuf_models_count(void);

/**
 * \brief Static name of built-in model i ("llama-3.2-1b", ...).
 * \param[in] i  0 .. dbuf_models_count() - 1
 * \return the name (static storage, never freed), or NULL if i is out of range
 */
DBUF_EXPORT const char *dbuf_model_name(int i);

/**
 * \brief One-line summary of the architecture config of model i, e.g.
 *   "llama: hidden 2048, ffn 8192, 16 layers, 32 heads, 8 kv heads, ...".
 *
 * The text is formatted from the same config the generator uses, so it
 * cannot disagree with the tensor list.  buf is always NUL-terminated when
 * len > 0; it has no trailing newline.
 * \param[in]  i    0 .. dbuf_models_count() - 1
 * \param[out] buf  DBUF_MODEL_SUMMARY_LEN bytes are always enough
 * \param[in]  len  size of buf in bytes
 * \return 0, or
 *   DBUF_EINVAL (buf is NULL or len is 0),
 *   DBUF_ERANGE (i out of range; buf is set to ""),
 *   DBUF_ENOBUFS (buf too small; buf holds the truncated text)
 */
DBUF_EXPORT int dbuf_model_summary(int i, char *buf, size_t len);

/**
 * \brief Generate the tensor list of a built-in model.
 *
 * The list is reserved up front and filled in one pass, so large models
 * (deepseek-v3: 45,395 tensors) take milliseconds.
 * \param[in]  name  a name from dbuf_model_name(), compared exactly
 * \param[out] out   the new list, to be freed with dbuf_tensors_destroy();
 *                   written only on success
 * \param[out] diag  optional; on failure names what went wrong
 * \return 0, or
 *   DBUF_EINVAL (name or out is NULL),
 *   DBUF_ENOTFOUND (no such model; diag lists the valid names),
 *   DBUF_EOVERFLOW (a dim or the total overflows 64 bits; diag names it),
 *   DBUF_ENOMEM, or any error of dbuf_tensors_add() (diag names the tensor).
 */
DBUF_EXPORT int dbuf_model_build(const char *name, dbuf_tensors_t **out,
                                 dbuf_diag_t *diag);

/**
 * \brief Generate the tensors one data-parallel group holds on
 * tensor-parallel rank 0 and expert-parallel rank 0 of pipeline stage
 * par->stage (see dbuf/parallel.h for the rules).
 *
 * Names: with DBUF_NAMING_HF the model's own names (global layer numbers),
 * each tensor split on its own; with DBUF_NAMING_MEGATRON Megatron-Core's
 * names under the Transformer Engine spec (fused linear_qkv and linear_fc1,
 * norms fused into the next linear as layer_norm_weight, grouped-GEMM
 * experts linear_fc1.weightJ / linear_fc2.weightJ, the router's expert bias
 * left out as a buffer), layers numbered from 0 in each stage.
 * \param[in]  par    NULL: the whole model, as dbuf_model_build()
 * \param[out] stats  may be NULL: the stage's elements by split
 * \return 0, or the errors of dbuf_model_build(), and
 *   DBUF_EINVAL (invalid par: see dbuf_parallel_check()),
 *   DBUF_EPARALLEL (heads or query groups not divisible by tp, experts by
 *   ep, layers by pp without pp_layers, a split dim by its degree: diag
 *   names the model setting or the tensor, the dim and the degree)
 */
DBUF_EXPORT int dbuf_model_build_parallel(const char *name, const dbuf_parallel_t *par,
                                          dbuf_tensors_t **out,
                                          dbuf_parallel_stats_t *stats, dbuf_diag_t *diag);

/**
 * \brief The pipeline stage with the most elements (the first of equals);
 * par->stage is ignored.
 * \return 0, or the errors of dbuf_model_build_parallel()
 */
DBUF_EXPORT int dbuf_model_largest_stage(const char *name, const dbuf_parallel_t *par,
                                         int64_t *stage, dbuf_diag_t *diag);

#ifdef __cplusplus
}
#endif

#endif /* DBUF_MODELS_H */
