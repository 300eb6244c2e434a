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
 * The generator runs twice over the same code: once only counting tensors,
 * then, after one exact reserve, adding them.  No formula exists twice.
 */
#include "dbuf/models.h"
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
     .linear_bias = true, .norm_bias = true},
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

/*
 * Emit one tensor named prefix + module + "." + leaf (module may be "",
 * then the name is prefix + leaf).  ndim is 1 (d0) or 2 (d0 x d1).
 */
static int
emit(dbuf__gen_t *g, const char *prefix, const char *module, const char *leaf,
     int ndim, int64_t d0, int64_t d1)
{
  char name[DBUF__NAME_MAX];
  const int64_t dims[2] = {d0, d1};
  size_t lp, lm, ll, dot, n;

  if (g->t == NULL) {
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
  return dbuf_tensors_add(g->t, name, ndim, dims, g->diag);
}

/* nn.Linear(in, out): weight [out, in], then bias [out]. */
static int
linear(dbuf__gen_t *g, const char *prefix, const char *module, int64_t out,
       int64_t in, bool bias)
{
  int rc = emit(g, prefix, module, "weight", 2, out, in);
  if (rc == 0 && bias)
    rc = emit(g, prefix, module, "bias", 1, out, 0);
  return rc;
}

/* RMSNorm (weight) or LayerNorm (weight, bias) over dim. */
static int
norm(dbuf__gen_t *g, const char *prefix, const char *module, int64_t dim)
{
  int rc = emit(g, prefix, module, "weight", 1, dim, 0);
  if (rc == 0 && g->cfg->norm_bias)
    rc = emit(g, prefix, module, "bias", 1, dim, 0);
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
    /* DeepSeek multi-head latent attention. */
    if (c->q_lora_rank > 0) {
      if ((rc = linear(g, p, "q_a_proj", c->q_lora_rank, c->hidden, false)) ||
          (rc = norm(g, p, "q_a_layernorm", c->q_lora_rank)) ||
          (rc = linear(g, p, "q_b_proj", d->mla_q_out, c->q_lora_rank, false)))
        return rc;
    } else if ((rc = linear(g, p, "q_proj", d->mla_q_out, c->hidden, false))) {
      return rc;
    }
    if ((rc = linear(g, p, "kv_a_proj_with_mqa", d->mla_kv_a, c->hidden,
                     false)) ||
        (rc = norm(g, p, "kv_a_layernorm", c->kv_lora_rank)) ||
        (rc = linear(g, p, "kv_b_proj", d->mla_kv_b, c->kv_lora_rank, false)))
      return rc;
    return linear(g, p, "o_proj", c->hidden, d->mla_o_in, c->linear_bias);
  }
  if ((rc = linear(g, p, "q_proj", d->q_out, c->hidden, qkvb)) ||
      (rc = linear(g, p, "k_proj", d->kv_out, c->hidden, qkvb)) ||
      (rc = linear(g, p, "v_proj", d->kv_out, c->hidden, qkvb)))
    return rc;
  return linear(g, p, "o_proj", c->hidden, d->q_out, c->linear_bias);
}

/* SwiGLU MLP with gate_proj, up_proj, down_proj under prefix p. */
static int
hf_swiglu(dbuf__gen_t *g, const char *p, int64_t ffn)
{
  const dbuf__model_cfg_t *c = g->cfg;
  int rc;
  if ((rc = linear(g, p, "gate_proj", ffn, c->hidden, c->linear_bias)) ||
      (rc = linear(g, p, "up_proj", ffn, c->hidden, c->linear_bias)))
    return rc;
  return linear(g, p, "down_proj", c->hidden, ffn, c->linear_bias);
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
      (rc = linear(g, p, "gate", c->experts, c->hidden, false)))
    return rc;
  for (int64_t e = 0; e < c->experts; e++) {
    if ((rc = index_prefix(g, ep, base, e)) ||
        (rc = linear(g, ep, "w1", c->moe_ffn, c->hidden, false)) ||
        (rc = linear(g, ep, "w2", c->hidden, c->moe_ffn, false)) ||
        (rc = linear(g, ep, "w3", c->moe_ffn, c->hidden, false)))
      return rc;
  }
  return 0;
}

/* DeepseekV3MoE: experts.E.*, gate (weight, e_score_correction_bias),
 * shared_experts (one MLP of moe_ffn * shared_experts). */
static int
hf_moe_deepseek(dbuf__gen_t *g, const char *lp)
{
  const dbuf__model_cfg_t *c = g->cfg;
  char p[DBUF__NAME_MAX], base[DBUF__NAME_MAX], ep[DBUF__NAME_MAX];
  int rc;

  if ((rc = join_prefix(g, p, lp, "mlp")) ||
      (rc = join_prefix(g, base, p, "experts")))
    return rc;
  for (int64_t e = 0; e < c->experts; e++) {
    if ((rc = index_prefix(g, ep, base, e)) ||
        (rc = hf_swiglu(g, ep, c->moe_ffn)))
      return rc;
  }
  if ((rc = emit(g, p, "gate", "weight", 2, c->experts, c->hidden)) ||
      (rc = emit(g, p, "gate", "e_score_correction_bias", 1, c->experts, 0)))
    return rc;
  if (c->shared_experts > 0) {
    if ((rc = join_prefix(g, ep, p, "shared_experts")) != 0)
      return rc;
    return hf_swiglu(g, ep, g->d.shared_ffn);
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
    return hf_swiglu(g, p, c->ffn);
  }
  if (c->moe == DBUF__MOE_MIXTRAL)
    return hf_moe_mixtral(g, lp);
  return hf_moe_deepseek(g, lp);
}

static int
gen_hf(dbuf__gen_t *g)
{
  const dbuf__model_cfg_t *c = g->cfg;
  char lp[DBUF__NAME_MAX];
  int rc;

  if ((rc = emit(g, "model.", "embed_tokens", "weight", 2, c->vocab,
                 c->hidden)) != 0)
    return rc;
  for (int64_t l = 0; l < c->layers; l++) {
    if ((rc = index_prefix(g, lp, "model.layers.", l)) ||
        (rc = hf_attention(g, lp)) || (rc = hf_ffn(g, lp, l)) ||
        (rc = norm(g, lp, "input_layernorm", c->hidden)) ||
        (rc = norm(g, lp, "post_attention_layernorm", c->hidden)))
      return rc;
  }
  if ((rc = norm(g, "model.", "norm", c->hidden)) != 0)
    return rc;
  if (!c->tied)
    return emit(g, "", "lm_head", "weight", 2, c->vocab, c->hidden);
  return 0;
}

/* ---- Megatron-Core GPT family ------------------------------------------- */

static int
gen_mcore(dbuf__gen_t *g)
{
  const dbuf__model_cfg_t *c = g->cfg;
  const dbuf__dims_t *d = &g->d;
  bool qkvb = c->qkv_bias || c->linear_bias;
  char lp[DBUF__NAME_MAX], ap[DBUF__NAME_MAX], mp[DBUF__NAME_MAX];
  int rc;

  if ((rc = emit(g, "embedding.", "word_embeddings", "weight", 2, c->vocab,
                 c->hidden)) != 0)
    return rc;
  if (c->max_pos > 0 &&
      (rc = emit(g, "embedding.", "position_embeddings", "weight", 2,
                 c->max_pos, c->hidden)) != 0)
    return rc;
  for (int64_t l = 0; l < c->layers; l++) {
    if ((rc = index_prefix(g, lp, "decoder.layers.", l)) ||
        (rc = join_prefix(g, ap, lp, "self_attention")) ||
        (rc = join_prefix(g, mp, lp, "mlp")) ||
        (rc = norm(g, lp, "input_layernorm", c->hidden)) ||
        (rc = linear(g, ap, "linear_proj", c->hidden, d->q_out,
                     c->linear_bias)) ||
        (rc = linear(g, ap, "linear_qkv", d->qkv_out, c->hidden, qkvb)) ||
        (rc = norm(g, lp, "pre_mlp_layernorm", c->hidden)) ||
        (rc = linear(g, mp, "linear_fc1", c->ffn, c->hidden, c->linear_bias)) ||
        (rc = linear(g, mp, "linear_fc2", c->hidden, c->ffn, c->linear_bias)))
      return rc;
  }
  if ((rc = norm(g, "decoder.", "final_layernorm", c->hidden)) != 0)
    return rc;
  if (!c->tied)
    return emit(g, "", "output_layer", "weight", 2, c->vocab, c->hidden);
  return 0;
}

static int
generate(dbuf__gen_t *g)
{
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

/* Append printf text at *used; 0 or DBUF_ENOMEM once buf is full. */
static int append(char *buf, size_t len, size_t *used, const char *fmt, ...)
    DBUF__PRINTF(4, 5);

static int
append(char *buf, size_t len, size_t *used, const char *fmt, ...)
{
  va_list ap;
  int w;
  if (*used >= len)
    return DBUF_ENOMEM;
  va_start(ap, fmt);
  w = vsnprintf(buf + *used, len - *used, fmt, ap);
  va_end(ap);
  if (w < 0 || (size_t)w >= len - *used) {
    *used = len;
    return DBUF_ENOMEM;
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

int
dbuf_model_build(const char *name, dbuf_tensors_t **out, dbuf_diag_t *diag)
{
  dbuf__gen_t g;
  const dbuf__model_cfg_t *c = NULL;
  int rc;

  if (name == NULL || out == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "NULL argument");
  for (int i = 0; i < DBUF__NMODELS && c == NULL; i++) {
    if (strcmp(dbuf__models[i].name, name) == 0)
      c = &dbuf__models[i];
  }
  if (c == NULL)
    return not_found(name, diag);

  memset(&g, 0, sizeof g);
  g.cfg = c;
  g.diag = diag;
  if ((rc = derive_dims(c, &g.d, diag)) != 0)
    return rc;
  if ((rc = generate(&g)) != 0) /* counting pass */
    return rc;
  if ((rc = dbuf_tensors_create(&g.t)) != 0)
    return dbuf__diag(diag, rc, "model %s: %s", c->name, dbuf_strerror(rc));
  if ((rc = dbuf_tensors_reserve(g.t, g.count)) != 0) {
    dbuf__diag(diag, rc, "model %s: reserving %lld tensors: %s", c->name,
               (long long)g.count, dbuf_strerror(rc));
    goto fail;
  }
  if ((rc = generate(&g)) != 0)
    goto fail;
  *out = g.t;
  return 0;
fail:
  dbuf_tensors_destroy(g.t);
  return rc;
}
