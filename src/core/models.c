/*
 * Built-in model shape generators.
 *
 * One const table of public architecture configs, and generic code per
 * architecture family that turns a config into the parameter list in
 * PyTorch named_parameters() order:
 *
 *   - Hugging Face decoder (Llama, Qwen2, Mixtral, DeepSeek-V3): embedding,
 *     then per layer self_attn (GQA, or MLA when kv_lora_rank > 0), the FFN
 *     (dense SwiGLU, Mixtral sparse MoE, or DeepSeek MoE with shared
 *     experts), the two RMSNorms; final norm; lm_head unless tied.
 *   - Megatron-Core GPT (local layer spec): word and learned position
 *     embeddings, per layer input_layernorm, self_attention (linear_proj is
 *     registered by Attention.__init__ before SelfAttention adds the fused
 *     linear_qkv), pre_mlp_layernorm, mlp.linear_fc1/fc2; final_layernorm;
 *     output_layer unless the embeddings are shared.
 *
 * With parallel settings (dbuf/parallel.h) the same generators emit the
 * tensors of one pipeline stage on tensor-parallel rank 0 and
 * expert-parallel rank 0: each emit names the split rule of its tensor and
 * parallel.c turns the full shape into the local one.  --naming megatron
 * switches the Hugging Face family to Megatron-Core's Transformer Engine
 * spec (fused linear_qkv and linear_fc1, norms fused into the next linear,
 * grouped-GEMM experts).
 *
 * The generator runs twice over the same code: once only counting tensors
 * (and the element statistics), then, after one exact reserve, adding them.
 * No formula exists twice.
 */
#include "dbuf/models.h"
#include "dbuf/parallel.h"
#include "core_internal.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

typedef enum dbuf__naming {
  DBUF__NAMING_HF,   /* Hugging Face transformers module names */
  DBUF__NAMING_MCORE /* Megatron-Core GPTModel, local layer spec */
} dbuf__naming_t;

typedef enum dbuf__moe_style {
  DBUF__MOE_NONE,
  DBUF__MOE_MIXTRAL, /* block_sparse_moe.{gate, experts.E.w1/w2/w3} */
  DBUF__MOE_DEEPSEEK /* mlp.{experts.E.*_proj, gate(+bias), shared_experts} */
} dbuf__moe_style_t;

/* One public architecture config; 0 means "not used by this model". */
typedef struct dbuf__model_cfg {
  const char *name;
  const char *arch; /* family label for the summary (HF model_type) */
  dbuf__naming_t naming;
  int64_t hidden, ffn, layers, heads, kv_heads, head_dim, vocab;
  int64_t max_pos;  /* learned position embeddings (0: rotary, none) */
  bool tied;        /* input embedding shared with the output layer */
  bool qkv_bias;    /* biases on q/k/v only (Qwen2) */
  bool linear_bias; /* biases on every linear layer (GPT-3) */
  bool norm_bias;   /* LayerNorm with bias instead of RMSNorm */
  bool gelu;        /* plain fc1 -> fc2 MLP (GPT); else SwiGLU gate/up/down */
  /* MoE */
  dbuf__moe_style_t moe;
  int64_t experts, shared_experts, moe_ffn, first_dense;
  /* Multi-head latent attention (DeepSeek); used when kv_lora_rank > 0 */
  int64_t q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim,
      v_head_dim;
} dbuf__model_cfg_t;

/*
 * Sources: the config.json of each model's Hugging Face repository
 * (meta-llama/Llama-3.2-1B, TinyLlama/TinyLlama-1.1B-intermediate-step-
 * 1431k-3T, meta-llama/Llama-3.1-{8B,70B,405B}, mistralai/Mixtral-8x7B-v0.1,
 * Qwen/Qwen2.5-72B, deepseek-ai/DeepSeek-V3) and, for GPT-3 175B, the GPT-3
 * paper config as trained with Megatron (Narayanan et al. 2021, Table 1:
 * 96 layers, hidden 12288, 96 heads; vocab padded to 51200, seq 2048).
 */
static const dbuf__model_cfg_t dbuf__models[] = {
    {.name = DBUF_MODEL_DEFAULT, .arch = "llama", .naming = DBUF__NAMING_HF,
     .hidden = 2048, .ffn = 8192, .layers = 16, .heads = 32, .kv_heads = 8,
     .head_dim = 64, .vocab = 128256, .tied = true},
    {.name = "tinyllama-1.1b", .arch = "llama", .naming = DBUF__NAMING_HF,
     .hidden = 2048, .ffn = 5632, .layers = 22, .heads = 32, .kv_heads = 4,
     .head_dim = 64, .vocab = 32000},
    {.name = "llama-3.1-8b", .arch = "llama", .naming = DBUF__NAMING_HF,
     .hidden = 4096, .ffn = 14336, .layers = 32, .heads = 32, .kv_heads = 8,
     .head_dim = 128, .vocab = 128256},
    {.name = "llama-3.1-70b", .arch = "llama", .naming = DBUF__NAMING_HF,
     .hidden = 8192, .ffn = 28672, .layers = 80, .heads = 64, .kv_heads = 8,
     .head_dim = 128, .vocab = 128256},
    {.name = "llama-3.1-405b", .arch = "llama", .naming = DBUF__NAMING_HF,
     .hidden = 16384, .ffn = 53248, .layers = 126, .heads = 128,
     .kv_heads = 8, .head_dim = 128, .vocab = 128256},
    {.name = "mixtral-8x7b", .arch = "mixtral", .naming = DBUF__NAMING_HF,
     .hidden = 4096, .layers = 32, .heads = 32, .kv_heads = 8,
     .head_dim = 128, .vocab = 32000, .moe = DBUF__MOE_MIXTRAL, .experts = 8,
     .moe_ffn = 14336},
    {.name = "qwen2.5-72b", .arch = "qwen2", .naming = DBUF__NAMING_HF,
     .hidden = 8192, .ffn = 29568, .layers = 80, .heads = 64, .kv_heads = 8,
     .head_dim = 128, .vocab = 152064, .qkv_bias = true},
    {.name = "deepseek-v3", .arch = "deepseek_v3", .naming = DBUF__NAMING_HF,
     .hidden = 7168, .ffn = 18432, .layers = 61, .heads = 128,
     .kv_heads = 128, .vocab = 129280, .moe = DBUF__MOE_DEEPSEEK,
     .experts = 256, .shared_experts = 1, .moe_ffn = 2048, .first_dense = 3,
     .q_lora_rank = 1536, .kv_lora_rank = 512, .qk_nope_head_dim = 128,
     .qk_rope_head_dim = 64, .v_head_dim = 128},
    {.name = "gpt3-175b", .arch = "gpt", .naming = DBUF__NAMING_MCORE,
     .hidden = 12288, .ffn = 49152, .layers = 96, .heads = 96, .kv_heads = 96,
     .head_dim = 128, .vocab = 51200, .max_pos = 2048, .tied = true,
     .linear_bias = true, .norm_bias = true, .gelu = true},
};

#define DBUF__NMODELS ((int)(sizeof dbuf__models / sizeof dbuf__models[0]))

/* Longest parameter name any generator writes, NUL included. */
#define DBUF__NAME_MAX 128

/* Output dims derived from a config, each product checked once. */
typedef struct dbuf__dims {
  int64_t q_out;     /* GQA: heads * head_dim */
  int64_t kv_out;    /* GQA: kv_heads * head_dim */
  int64_t qkv_out;   /* fused QKV rows: q_out + 2 * kv_out */
  int64_t mla_q_out; /* heads * (qk_nope + qk_rope) */
  int64_t mla_kv_a;  /* kv_lora_rank + qk_rope */
  int64_t mla_kv_b;  /* heads * (qk_nope + v_head_dim) */
  int64_t mla_o_in;  /* heads * v_head_dim */
  int64_t shared_ffn; /* moe_ffn * shared_experts */
} dbuf__dims_t;

/* The generator state: counting pass when t is NULL. */
typedef struct dbuf__gen {
  const dbuf__model_cfg_t *cfg;
  dbuf__dims_t d;
  dbuf_tensors_t *t;
  int64_t count;
  dbuf_diag_t *diag;
  const dbuf_parallel_t *par; /* NULL: the whole model, nothing split */
  dbuf_parallel_stats_t st;   /* filled by the counting pass */
  int64_t first, nlayers;     /* decoder layers of the stage */
  int64_t experts;            /* experts of expert-parallel rank 0 */
  bool first_stage, last_stage;
} dbuf__gen_t;

static int
derive_dims(const dbuf__model_cfg_t *c, dbuf__dims_t *d, dbuf_diag_t *diag)
{
  int64_t qk, kv2, nv;
  memset(d, 0, sizeof *d);
  if (dbuf__mul(c->heads, c->head_dim, &d->q_out) ||
      dbuf__mul(c->kv_heads, c->head_dim, &d->kv_out) ||
      dbuf__mul(d->kv_out, 2, &kv2) || dbuf__add(d->q_out, kv2, &d->qkv_out) ||
      dbuf__add(c->qk_nope_head_dim, c->qk_rope_head_dim, &qk) ||
      dbuf__mul(c->heads, qk, &d->mla_q_out) ||
      dbuf__add(c->kv_lora_rank, c->qk_rope_head_dim, &d->mla_kv_a) ||
      dbuf__add(c->qk_nope_head_dim, c->v_head_dim, &nv) ||
      dbuf__mul(c->heads, nv, &d->mla_kv_b) ||
      dbuf__mul(c->heads, c->v_head_dim, &d->mla_o_in) ||
      dbuf__mul(c->moe_ffn, c->shared_experts, &d->shared_ffn))
    return dbuf__diag(diag, DBUF_EOVERFLOW,
                      "model %s: a derived dim overflows 64 bits", c->name);
  return 0;
}

/* Add n elements to *sum; the stage total is checked by dbuf_tensors_add. */
static int
stat_add(dbuf__gen_t *g, int64_t *sum, int64_t n)
{
  if (dbuf__add(*sum, n, sum) != 0)
    return dbuf__diag(g->diag, DBUF_EOVERFLOW, "model %s: element count overflows 64 bits",
                      g->cfg->name);
  return 0;
}

/*
 * Emit one tensor named prefix + module + "." + leaf (module may be "",
 * then the name is prefix + leaf).  ndim is 1 (d0) or 2 (d0 x d1); kind is
 * its split over the parallel ranks (ignored without parallel settings).
 */
static int
emit(dbuf__gen_t *g, const char *prefix, const char *module, const char *leaf,
     dbuf_split_t kind, int ndim, int64_t d0, int64_t d1)
{
  char name[DBUF__NAME_MAX];
  const int64_t full[2] = {d0, d1};
  int64_t dims[2] = {d0, d1}, pad = 0, numel;
  size_t lp, lm, ll, dot, n;
  int rc;

  if (g->t == NULL && g->par == NULL) {
    g->count++;
    return 0;
  }
  /* Plain concatenation: this runs once per tensor (45,395 for deepseek-v3),
   * where snprintf was a fifth of the build time. */
  lp = strlen(prefix);
  lm = strlen(module);
  ll = strlen(leaf);
  dot = lm > 0 ? 1 : 0;
  n = lp + lm + dot + ll;
  if (n >= sizeof name)
    return dbuf__diag(g->diag, DBUF_ENOMEM,
                      "model %s: parameter name %s%s.%s longer than %d bytes",
                      g->cfg->name, prefix, module, leaf, DBUF__NAME_MAX - 1);
  memcpy(name, prefix, lp);
  memcpy(name + lp, module, lm);
  if (dot)
    name[lp + lm] = '.';
  memcpy(name + lp + lm + dot, leaf, ll);
  name[n] = '\0';
  if (g->par != NULL) {
    if ((rc = dbuf_parallel_split(g->par, kind, name, ndim, full, dims, &pad, g->diag)) != 0)
      return rc;
    if (g->t == NULL) { /* counting pass: the statistics */
      int64_t *cat = kind == DBUF_SPLIT_REPLICATED ? &g->st.replicated
                     : kind >= DBUF_SPLIT_EXPERT_COLUMN ? &g->st.expert
                                                         : &g->st.tp_split;
      numel = ndim == 2 ? 0 : dims[0];
      if ((ndim == 2 && dbuf__mul(dims[0], dims[1], &numel) != 0) ||
          (ndim == 2 && dbuf__mul(pad, dims[1], &pad) != 0))
        return dbuf__diag(g->diag, DBUF_EOVERFLOW, "model %s: tensor %s overflows 64 bits",
                          g->cfg->name, name);
      if ((rc = stat_add(g, cat, numel)) != 0 || (rc = stat_add(g, &g->st.total, numel)) != 0 ||
          (rc = stat_add(g, &g->st.vocab_padding, pad)) != 0)
        return rc;
      g->count++;
      return 0;
    }
  }
  return dbuf_tensors_add(g->t, name, ndim, dims, g->diag);
}

/* nn.Linear(in, out): weight [out, in], then bias [out].  The bias of a
 * column-parallel linear is split with it; a row-parallel one is replicated. */
static int
linear(dbuf__gen_t *g, const char *prefix, const char *module, int64_t out,
       int64_t in, bool bias, dbuf_split_t kind)
{
  int rc = emit(g, prefix, module, "weight", kind, 2, out, in);
  bool row = kind == DBUF_SPLIT_ROW || kind == DBUF_SPLIT_EXPERT_ROW;
  if (rc == 0 && bias)
    rc = emit(g, prefix, module, "bias", row ? DBUF_SPLIT_REPLICATED : kind, 1, out, 0);
  return rc;
}

/* RMSNorm (weight) or LayerNorm (weight, bias) over dim: replicated. */
static int
norm(dbuf__gen_t *g, const char *prefix, const char *module, int64_t dim)
{
  int rc = emit(g, prefix, module, "weight", DBUF_SPLIT_REPLICATED, 1, dim, 0);
  if (rc == 0 && g->cfg->norm_bias)
    rc = emit(g, prefix, module, "bias", DBUF_SPLIT_REPLICATED, 1, dim, 0);
  return rc;
}

/* Write the name prefix base + part + "." into buf[DBUF__NAME_MAX]. */
static int
join_prefix(dbuf__gen_t *g, char *buf, const char *base, const char *part)
{
  int w = snprintf(buf, DBUF__NAME_MAX, "%s%s.", base, part);
  if (w < 0 || w >= DBUF__NAME_MAX)
    return dbuf__diag(g->diag, DBUF_ENOMEM,
                      "model %s: name prefix %s%s. too long", g->cfg->name,
                      base, part);
  return 0;
}

/* Write the name prefix base + index + "." into buf[DBUF__NAME_MAX]. */
static int
index_prefix(dbuf__gen_t *g, char *buf, const char *base, int64_t index)
{
  char num[24];
  snprintf(num, sizeof num, "%lld", (long long)index);
  return join_prefix(g, buf, base, num);
}

/* ---- Hugging Face decoder family ---------------------------------------- */

/* Column- and row-parallel splits of dense or expert linears. */
#define COL(expert) ((expert) ? DBUF_SPLIT_EXPERT_COLUMN : DBUF_SPLIT_COLUMN)
#define ROW(expert) ((expert) ? DBUF_SPLIT_EXPERT_ROW : DBUF_SPLIT_ROW)
#define REPL DBUF_SPLIT_REPLICATED

static int
hf_attention(dbuf__gen_t *g, const char *lp)
{
  const dbuf__model_cfg_t *c = g->cfg;
  const dbuf__dims_t *d = &g->d;
  char p[DBUF__NAME_MAX];
  bool qkvb = c->qkv_bias || c->linear_bias;
  int rc;

  if ((rc = join_prefix(g, p, lp, "self_attn")) != 0)
    return rc;
  if (c->kv_lora_rank > 0) {
    /* DeepSeek multi-head latent attention: the down projections are
     * duplicated on every tensor-parallel rank (Transformer Engine spec). */
    if (c->q_lora_rank > 0) {
      if ((rc = linear(g, p, "q_a_proj", c->q_lora_rank, c->hidden, false, REPL)) ||
          (rc = norm(g, p, "q_a_layernorm", c->q_lora_rank)) ||
          (rc = linear(g, p, "q_b_proj", d->mla_q_out, c->q_lora_rank, false, COL(0))))
        return rc;
    } else if ((rc = linear(g, p, "q_proj", d->mla_q_out, c->hidden, false, COL(0)))) {
      return rc;
    }
    if ((rc = linear(g, p, "kv_a_proj_with_mqa", d->mla_kv_a, c->hidden, false, REPL)) ||
        (rc = norm(g, p, "kv_a_layernorm", c->kv_lora_rank)) ||
        (rc = linear(g, p, "kv_b_proj", d->mla_kv_b, c->kv_lora_rank, false, COL(0))))
      return rc;
    return linear(g, p, "o_proj", c->hidden, d->mla_o_in, c->linear_bias, ROW(0));
  }
  if ((rc = linear(g, p, "q_proj", d->q_out, c->hidden, qkvb, COL(0))) ||
      (rc = linear(g, p, "k_proj", d->kv_out, c->hidden, qkvb, COL(0))) ||
      (rc = linear(g, p, "v_proj", d->kv_out, c->hidden, qkvb, COL(0))))
    return rc;
  return linear(g, p, "o_proj", c->hidden, d->q_out, c->linear_bias, ROW(0));
}

/* SwiGLU MLP with gate_proj, up_proj, down_proj under prefix p. */
static int
hf_swiglu(dbuf__gen_t *g, const char *p, int64_t ffn, bool expert)
{
  const dbuf__model_cfg_t *c = g->cfg;
  int rc;
  if ((rc = linear(g, p, "gate_proj", ffn, c->hidden, c->linear_bias, COL(expert))) ||
      (rc = linear(g, p, "up_proj", ffn, c->hidden, c->linear_bias, COL(expert))))
    return rc;
  return linear(g, p, "down_proj", c->hidden, ffn, c->linear_bias, ROW(expert));
}

/* MixtralSparseMoeBlock: gate, then experts.E.{w1, w2, w3}. */
static int
hf_moe_mixtral(dbuf__gen_t *g, const char *lp)
{
  const dbuf__model_cfg_t *c = g->cfg;
  char p[DBUF__NAME_MAX], base[DBUF__NAME_MAX], ep[DBUF__NAME_MAX];
  int rc;

  if ((rc = join_prefix(g, p, lp, "block_sparse_moe")) ||
      (rc = join_prefix(g, base, p, "experts")) ||
      (rc = linear(g, p, "gate", c->experts, c->hidden, false, REPL)))
    return rc;
  for (int64_t e = 0; e < g->experts; e++) {
    if ((rc = index_prefix(g, ep, base, e)) ||
        (rc = linear(g, ep, "w1", c->moe_ffn, c->hidden, false, COL(1))) ||
        (rc = linear(g, ep, "w2", c->hidden, c->moe_ffn, false, ROW(1))) ||
        (rc = linear(g, ep, "w3", c->moe_ffn, c->hidden, false, COL(1))))
      return rc;
  }
  return 0;
}

/* DeepseekV3MoE: experts.E.*, gate (weight, e_score_correction_bias),
 * shared_experts (one MLP of moe_ffn * shared_experts, split as a dense MLP). */
static int
hf_moe_deepseek(dbuf__gen_t *g, const char *lp)
{
  const dbuf__model_cfg_t *c = g->cfg;
  char p[DBUF__NAME_MAX], base[DBUF__NAME_MAX], ep[DBUF__NAME_MAX];
  int rc;

  if ((rc = join_prefix(g, p, lp, "mlp")) ||
      (rc = join_prefix(g, base, p, "experts")))
    return rc;
  for (int64_t e = 0; e < g->experts; e++) {
    if ((rc = index_prefix(g, ep, base, e)) ||
        (rc = hf_swiglu(g, ep, c->moe_ffn, true)))
      return rc;
  }
  if ((rc = emit(g, p, "gate", "weight", REPL, 2, c->experts, c->hidden)) ||
      (rc = emit(g, p, "gate", "e_score_correction_bias", REPL, 1, c->experts, 0)))
    return rc;
  if (c->shared_experts > 0) {
    if ((rc = join_prefix(g, ep, p, "shared_experts")) != 0)
      return rc;
    return hf_swiglu(g, ep, g->d.shared_ffn, false);
  }
  return 0;
}

static int
hf_ffn(dbuf__gen_t *g, const char *lp, int64_t layer)
{
  const dbuf__model_cfg_t *c = g->cfg;
  char p[DBUF__NAME_MAX];
  int rc;

  if (c->moe == DBUF__MOE_NONE || layer < c->first_dense) {
    if ((rc = join_prefix(g, p, lp, "mlp")) != 0)
      return rc;
    return hf_swiglu(g, p, c->ffn, false);
  }
  if (c->moe == DBUF__MOE_MIXTRAL)
    return hf_moe_mixtral(g, lp);
  return hf_moe_deepseek(g, lp);
}

/* The output layer of the last stage: its own tensor unless tied, and under
 * pipeline parallelism also when tied (Megatron keeps a copy there). */
static bool
has_output(const dbuf__gen_t *g)
{
  return g->last_stage && (!g->cfg->tied || (g->par != NULL && g->par->pp > 1));
}

static int
gen_hf(dbuf__gen_t *g)
{
  const dbuf__model_cfg_t *c = g->cfg;
  char lp[DBUF__NAME_MAX];
  int rc;

  if (g->first_stage &&
      (rc = emit(g, "model.", "embed_tokens", "weight", DBUF_SPLIT_VOCAB, 2, c->vocab,
                 c->hidden)) != 0)
    return rc;
  for (int64_t l = g->first; l < g->first + g->nlayers; l++) {
    if ((rc = index_prefix(g, lp, "model.layers.", l)) ||
        (rc = hf_attention(g, lp)) || (rc = hf_ffn(g, lp, l)) ||
        (rc = norm(g, lp, "input_layernorm", c->hidden)) ||
        (rc = norm(g, lp, "post_attention_layernorm", c->hidden)))
      return rc;
  }
  if (g->last_stage && (rc = norm(g, "model.", "norm", c->hidden)) != 0)
    return rc;
  if (has_output(g))
    return emit(g, "", "lm_head", "weight", DBUF_SPLIT_VOCAB, 2, c->vocab, c->hidden);
  return 0;
}

/* ---- Megatron-Core GPT family ------------------------------------------- */

/* The embeddings of the first stage: word (vocabulary-parallel), then
 * learned positions (replicated). */
static int
mcore_embedding(dbuf__gen_t *g)
{
  const dbuf__model_cfg_t *c = g->cfg;
  int rc;
  if (!g->first_stage)
    return 0;
  if ((rc = emit(g, "embedding.", "word_embeddings", "weight", DBUF_SPLIT_VOCAB, 2, c->vocab,
                 c->hidden)) != 0)
    return rc;
  if (c->max_pos > 0)
    return emit(g, "embedding.", "position_embeddings", "weight", REPL, 2, c->max_pos,
                c->hidden);
  return 0;
}

/* The final norm and output layer of the last stage. */
static int
mcore_output(dbuf__gen_t *g)
{
  int rc;
  if (g->last_stage && (rc = norm(g, "decoder.", "final_layernorm", g->cfg->hidden)) != 0)
    return rc;
  if (has_output(g))
    return emit(g, "", "output_layer", "weight", DBUF_SPLIT_VOCAB, 2, g->cfg->vocab,
                g->cfg->hidden);
  return 0;
}

/* The local layer spec (the model's own names of gpt3-175b). */
static int
gen_mcore(dbuf__gen_t *g)
{
  const dbuf__model_cfg_t *c = g->cfg;
  const dbuf__dims_t *d = &g->d;
  bool qkvb = c->qkv_bias || c->linear_bias;
  char lp[DBUF__NAME_MAX], ap[DBUF__NAME_MAX], mp[DBUF__NAME_MAX];
  int rc;

  if ((rc = mcore_embedding(g)) != 0)
    return rc;
  for (int64_t l = g->first; l < g->first + g->nlayers; l++) {
    if ((rc = index_prefix(g, lp, "decoder.layers.", l)) ||
        (rc = join_prefix(g, ap, lp, "self_attention")) ||
        (rc = join_prefix(g, mp, lp, "mlp")) ||
        (rc = norm(g, lp, "input_layernorm", c->hidden)) ||
        (rc = linear(g, ap, "linear_proj", c->hidden, d->q_out, c->linear_bias, ROW(0))) ||
        (rc = linear(g, ap, "linear_qkv", d->qkv_out, c->hidden, qkvb, COL(0))) ||
        (rc = norm(g, lp, "pre_mlp_layernorm", c->hidden)) ||
        (rc = linear(g, mp, "linear_fc1", c->ffn, c->hidden, c->linear_bias, COL(0))) ||
        (rc = linear(g, mp, "linear_fc2", c->hidden, c->ffn, c->linear_bias, ROW(0))))
      return rc;
  }
  return mcore_output(g);
}

/* ---- Megatron-Core names for every model (--naming megatron) ------------- */

/* TELayerNormColumnParallelLinear: the norm over `in` fused in as
 * layer_norm_weight (and layer_norm_bias), registered before the weight. */
static int
te_ln_linear(dbuf__gen_t *g, const char *p, const char *module, int64_t out, int64_t in,
             bool bias, dbuf_split_t kind)
{
  int rc = emit(g, p, module, "layer_norm_weight", REPL, 1, in, 0);
  if (rc == 0 && g->cfg->norm_bias)
    rc = emit(g, p, module, "layer_norm_bias", REPL, 1, in, 0);
  if (rc == 0)
    rc = linear(g, p, module, out, in, bias, kind);
  return rc;
}

/* Self-attention: linear_proj (registered by Attention first), then the
 * fused linear_qkv (q, k, v interleaved per query group), or for MLA the
 * duplicated down projections and the norm-fused up projections. */
static int
te_attention(dbuf__gen_t *g, const char *lp)
{
  const dbuf__model_cfg_t *c = g->cfg;
  const dbuf__dims_t *d = &g->d;
  char ap[DBUF__NAME_MAX];
  int rc;

  if ((rc = join_prefix(g, ap, lp, "self_attention")) != 0)
    return rc;
  if (c->kv_lora_rank > 0) {
    if ((rc = norm(g, lp, "input_layernorm", c->hidden)) ||
        (rc = linear(g, ap, "linear_proj", c->hidden, d->mla_o_in, c->linear_bias, ROW(0))))
      return rc;
    if (c->q_lora_rank > 0) {
      if ((rc = linear(g, ap, "linear_q_down_proj", c->q_lora_rank, c->hidden, false, REPL)) ||
          (rc = te_ln_linear(g, ap, "linear_q_up_proj", d->mla_q_out, c->q_lora_rank, false,
                             COL(0))))
        return rc;
    } else if ((rc = linear(g, ap, "linear_q_proj", d->mla_q_out, c->hidden, false,
                            COL(0))) != 0) {
      return rc;
    }
    if ((rc = linear(g, ap, "linear_kv_down_proj", d->mla_kv_a, c->hidden, false, REPL)) != 0)
      return rc;
    return te_ln_linear(g, ap, "linear_kv_up_proj", d->mla_kv_b, c->kv_lora_rank, false,
                        COL(0));
  }
  if ((rc = linear(g, ap, "linear_proj", c->hidden, d->q_out, c->linear_bias, ROW(0))) != 0)
    return rc;
  return te_ln_linear(g, ap, "linear_qkv", d->qkv_out, c->hidden,
                      c->qkv_bias || c->linear_bias, COL(0));
}

/* fc1 (gate and up fused for SwiGLU) and fc2 under prefix p. */
static int
te_mlp(dbuf__gen_t *g, const char *p, int64_t ffn, bool fused_norm)
{
  const dbuf__model_cfg_t *c = g->cfg;
  int64_t fc1 = c->gelu ? ffn : 2 * ffn;
  dbuf_split_t k1 = c->gelu ? DBUF_SPLIT_COLUMN : DBUF_SPLIT_COLUMN_GLU;
  int rc = fused_norm ? te_ln_linear(g, p, "linear_fc1", fc1, c->hidden, c->linear_bias, k1)
                      : linear(g, p, "linear_fc1", fc1, c->hidden, c->linear_bias, k1);
  if (rc == 0)
    rc = linear(g, p, "linear_fc2", c->hidden, ffn, c->linear_bias, ROW(0));
  return rc;
}

/* MoE layer: pre_mlp_layernorm, router (its expert bias is a buffer, not a
 * parameter), the grouped-GEMM experts of this expert-parallel rank
 * (linear_fc1.weightJ, then linear_fc2.weightJ), the shared experts. */
static int
te_moe(dbuf__gen_t *g, const char *lp)
{
  const dbuf__model_cfg_t *c = g->cfg;
  char mp[DBUF__NAME_MAX], xp[DBUF__NAME_MAX], sp[DBUF__NAME_MAX], leaf[32];
  int rc;

  if ((rc = norm(g, lp, "pre_mlp_layernorm", c->hidden)) ||
      (rc = join_prefix(g, mp, lp, "mlp")) || (rc = join_prefix(g, xp, mp, "experts")) ||
      (rc = emit(g, mp, "router", "weight", REPL, 2, c->experts, c->hidden)))
    return rc;
  for (int64_t j = 0; j < g->experts; j++) {
    snprintf(leaf, sizeof leaf, "weight%lld", (long long)j);
    if ((rc = emit(g, xp, "linear_fc1", leaf, DBUF_SPLIT_EXPERT_COLUMN_GLU, 2, 2 * c->moe_ffn,
                   c->hidden)) != 0)
      return rc;
  }
  for (int64_t j = 0; j < g->experts; j++) {
    snprintf(leaf, sizeof leaf, "weight%lld", (long long)j);
    if ((rc = emit(g, xp, "linear_fc2", leaf, ROW(1), 2, c->hidden, c->moe_ffn)) != 0)
      return rc;
  }
  if (c->shared_experts > 0) {
    if ((rc = join_prefix(g, sp, mp, "shared_experts")) != 0)
      return rc;
    return te_mlp(g, sp, g->d.shared_ffn, false);
  }
  return 0;
}

static int
gen_te(dbuf__gen_t *g)
{
  const dbuf__model_cfg_t *c = g->cfg;
  char lp[DBUF__NAME_MAX], mp[DBUF__NAME_MAX];
  int rc;

  if ((rc = mcore_embedding(g)) != 0)
    return rc;
  for (int64_t l = g->first; l < g->first + g->nlayers; l++) {
    /* A stage names its layers from 0 (Megatron's local layer numbers). */
    if ((rc = index_prefix(g, lp, "decoder.layers.", l - g->first)) ||
        (rc = te_attention(g, lp)))
      return rc;
    if (c->moe != DBUF__MOE_NONE && l >= c->first_dense) {
      rc = te_moe(g, lp);
    } else if ((rc = join_prefix(g, mp, lp, "mlp")) == 0) {
      rc = te_mlp(g, mp, c->ffn, true);
    }
    if (rc != 0)
      return rc;
  }
  return mcore_output(g);
}

static int
generate(dbuf__gen_t *g)
{
  if (g->par != NULL && g->par->naming == DBUF_NAMING_MEGATRON)
    return gen_te(g);
  return g->cfg->naming == DBUF__NAMING_MCORE ? gen_mcore(g) : gen_hf(g);
}

/* ---- Public API ---------------------------------------------------------- */

int
dbuf_models_count(void)
{
  return DBUF__NMODELS;
}

const char *
dbuf_model_name(int i)
{
  return (i >= 0 && i < DBUF__NMODELS) ? dbuf__models[i].name : NULL;
}

/* Append printf text at *used; 0 or DBUF_ENOBUFS once buf is full. */
static int append(char *buf, size_t len, size_t *used, const char *fmt, ...)
    DBUF__PRINTF(4, 5);

static int
append(char *buf, size_t len, size_t *used, const char *fmt, ...)
{
  va_list ap;
  int w;
  if (*used >= len)
    return DBUF_ENOBUFS;
  va_start(ap, fmt);
  w = vsnprintf(buf + *used, len - *used, fmt, ap);
  va_end(ap);
  if (w < 0 || (size_t)w >= len - *used) {
    *used = len;
    return DBUF_ENOBUFS;
  }
  *used += (size_t)w;
  return 0;
}

int
dbuf_model_summary(int i, char *buf, size_t len)
{
  const dbuf__model_cfg_t *c;
  size_t u = 0;
  int rc = 0;

  if (buf == NULL || len == 0)
    return DBUF_EINVAL;
  buf[0] = '\0';
  if (i < 0 || i >= DBUF__NMODELS)
    return DBUF_ERANGE;
  c = &dbuf__models[i];

  rc = append(buf, len, &u, "%s: hidden %lld", c->arch, (long long)c->hidden);
  if (rc == 0 && c->ffn > 0)
    rc = append(buf, len, &u, ", ffn %lld", (long long)c->ffn);
  if (rc == 0)
    rc = append(buf, len, &u, ", %lld layers, %lld heads", (long long)c->layers,
                (long long)c->heads);
  if (rc == 0 && c->kv_lora_rank == 0)
    rc = append(buf, len, &u, ", %lld kv heads, head dim %lld",
                (long long)c->kv_heads, (long long)c->head_dim);
  if (rc == 0 && c->kv_lora_rank > 0)
    rc = append(buf, len, &u,
                ", MLA q_lora_rank %lld kv_lora_rank %lld qk_nope %lld "
                "qk_rope %lld v_head %lld",
                (long long)c->q_lora_rank, (long long)c->kv_lora_rank,
                (long long)c->qk_nope_head_dim, (long long)c->qk_rope_head_dim,
                (long long)c->v_head_dim);
  if (rc == 0 && c->moe != DBUF__MOE_NONE)
    rc = append(buf, len, &u, ", %lld experts", (long long)c->experts);
  if (rc == 0 && c->shared_experts > 0)
    rc = append(buf, len, &u, " + %lld shared", (long long)c->shared_experts);
  if (rc == 0 && c->moe != DBUF__MOE_NONE)
    rc = append(buf, len, &u, ", moe ffn %lld", (long long)c->moe_ffn);
  if (rc == 0 && c->first_dense > 0)
    rc = append(buf, len, &u, ", first %lld layers dense",
                (long long)c->first_dense);
  if (rc == 0)
    rc = append(buf, len, &u, ", vocab %lld", (long long)c->vocab);
  if (rc == 0 && c->max_pos > 0)
    rc = append(buf, len, &u, ", learned positions %lld",
                (long long)c->max_pos);
  if (rc == 0)
    rc = append(buf, len, &u, "%s%s%s%s", c->tied ? ", tied embeddings" : "",
                c->qkv_bias ? ", qkv bias" : "",
                c->linear_bias ? ", linear biases" : "",
                c->norm_bias ? ", LayerNorm" : ", RMSNorm");
  if (rc == 0 && c->naming == DBUF__NAMING_MCORE)
    rc = append(buf, len, &u, ", Megatron-Core names");
  return rc;
}

static int
not_found(const char *name, dbuf_diag_t *diag)
{
  char list[DBUF_DIAG_LEN];
  size_t u = 0;
  list[0] = '\0';
  for (int i = 0; i < DBUF__NMODELS; i++) {
    if (append(list, sizeof list, &u, "%s%s", i ? ", " : "",
               dbuf__models[i].name) != 0)
      break; /* the diag line is truncated anyway */
  }
  return dbuf__diag(diag, DBUF_ENOTFOUND,
                    "unknown model '%.64s' (built-in models: %s)", name, list);
}

static const dbuf__model_cfg_t *
find_model(const char *name)
{
  for (int i = 0; i < DBUF__NMODELS; i++) {
    if (strcmp(dbuf__models[i].name, name) == 0)
      return &dbuf__models[i];
  }
  return NULL;
}

/* n / degree, or DBUF_EPARALLEL naming the model's setting and the option. */
static int
need_divisible(const dbuf__model_cfg_t *c, const char *setting, int64_t n, const char *opt,
               int64_t degree, dbuf_diag_t *diag)
{
  if (n % degree != 0)
    return dbuf__diag(diag, DBUF_EPARALLEL,
                      "model %s: %s (%lld) is not divisible by %s %lld", c->name, setting,
                      (long long)n, opt, (long long)degree);
  return 0;
}

/*
 * The settings Megatron-Core refuses before building a tensor (attention
 * heads and query groups by tp, experts by ep, layers by pp), then the
 * stage's layers and experts.  The remaining dims (FFN, expert FFN) are
 * checked tensor by tensor as they are split, naming the tensor.
 */
static int
setup_parallel(dbuf__gen_t *g, dbuf_diag_t *diag)
{
  const dbuf__model_cfg_t *c = g->cfg;
  const dbuf_parallel_t *p = g->par;
  dbuf_diag_t d;
  int rc;

  if ((rc = dbuf_parallel_check(p, diag)) != 0 ||
      (rc = need_divisible(c, "num_attention_heads", c->heads, "--tp", p->tp, diag)) != 0)
    return rc;
  if (c->kv_lora_rank == 0 &&
      (rc = need_divisible(c, "num_query_groups (key/value heads)", c->kv_heads, "--tp", p->tp,
                           diag)) != 0)
    return rc;
  if (p->ep > 1 && c->moe == DBUF__MOE_NONE)
    return dbuf__diag(diag, DBUF_EPARALLEL, "model %s has no experts: --ep %lld needs a MoE model",
                      c->name, (long long)p->ep);
  if (c->moe != DBUF__MOE_NONE &&
      (rc = need_divisible(c, "num_experts", c->experts, "--ep", p->ep, diag)) != 0)
    return rc;
  if ((rc = dbuf_parallel_stage_layers(p, c->layers, &g->first, &g->nlayers, &d)) != 0)
    return dbuf__diag(diag, rc, "model %s: %s", c->name, d.msg);
  g->first_stage = p->stage == 0;
  g->last_stage = p->stage == p->pp - 1;
  g->experts = c->experts / p->ep;
  return dbuf_parallel_pad_vocab(c->vocab, p->vocab_divisor, p->tp, &g->st.vocab_padded) == 0
             ? 0
             : dbuf__diag(diag, DBUF_EOVERFLOW, "model %s: the padded vocabulary overflows",
                          c->name);
}

/* Generate model c (the whole model when par is NULL); t NULL: count only. */
static int
build(const dbuf__model_cfg_t *c, const dbuf_parallel_t *par, bool fill, dbuf__gen_t *g,
      dbuf_diag_t *diag)
{
  int rc;
  memset(g, 0, sizeof *g);
  g->cfg = c;
  g->diag = diag;
  g->par = par;
  g->nlayers = c->layers;
  g->experts = c->experts;
  g->first_stage = g->last_stage = true;
  g->st.vocab_padded = c->vocab;
  if ((rc = derive_dims(c, &g->d, diag)) != 0)
    return rc;
  if (par != NULL && (rc = setup_parallel(g, diag)) != 0)
    return rc;
  if ((rc = generate(g)) != 0) /* counting pass */
    return rc;
  g->st.first_layer = g->first;
  g->st.nlayers = g->nlayers;
  if (!fill)
    return 0;
  if ((rc = dbuf_tensors_create(&g->t)) != 0)
    return dbuf__diag(diag, rc, "model %s: %s", c->name, dbuf_strerror(rc));
  if ((rc = dbuf_tensors_reserve(g->t, g->count)) != 0) {
    dbuf__diag(diag, rc, "model %s: reserving %lld tensors: %s", c->name,
               (long long)g->count, dbuf_strerror(rc));
    goto fail;
  }
  if ((rc = generate(g)) != 0)
    goto fail;
  return 0;
fail:
  dbuf_tensors_destroy(g->t);
  g->t = NULL;
  return rc;
}

int
dbuf_model_build(const char *name, dbuf_tensors_t **out, dbuf_diag_t *diag)
{
  return dbuf_model_build_parallel(name, NULL, out, NULL, diag);
}

int
dbuf_model_build_parallel(const char *name, const dbuf_parallel_t *par, dbuf_tensors_t **out,
                          dbuf_parallel_stats_t *stats, dbuf_diag_t *diag)
{
  const dbuf__model_cfg_t *c;
  dbuf__gen_t g;
  int rc;

  if (name == NULL || out == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "NULL argument");
  if ((c = find_model(name)) == NULL)
    return not_found(name, diag);
  if ((rc = build(c, par, true, &g, diag)) != 0)
    return rc;
  if (stats != NULL) {
    if (par == NULL) { /* the counting pass keeps statistics only when split */
      memset(&g.st, 0, sizeof g.st);
      g.st.nlayers = c->layers;
      g.st.vocab_padded = c->vocab;
      g.st.total = g.st.tp_split = dbuf_tensors_total(g.t);
    }
    *stats = g.st;
  }
  *out = g.t;
  return 0;
}

int
dbuf_model_largest_stage(const char *name, const dbuf_parallel_t *par, int64_t *stage,
                         dbuf_diag_t *diag)
{
  const dbuf__model_cfg_t *c;
  dbuf_parallel_t p;
  dbuf__gen_t g;
  int64_t best = -1, best_total = -1;
  int rc;

  if (name == NULL || par == NULL || stage == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "NULL argument");
  if ((c = find_model(name)) == NULL)
    return not_found(name, diag);
  if ((rc = dbuf_parallel_check(par, diag)) != 0)
    return rc;
  p = *par;
  for (p.stage = 0; p.stage < p.pp; p.stage++) {
    if ((rc = build(c, &p, false, &g, diag)) != 0)
      return rc;
    if (g.st.total > best_total) { /* ties: the first stage */
      best_total = g.st.total;
      best = p.stage;
    }
  }
  *stage = best;
  return 0;
}
