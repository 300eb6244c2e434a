/*
 * Tests for tensor/pipeline/expert-parallel local shapes
 * (include/dbuf/parallel.h, dbuf_model_build_parallel).
 *
 * Expected values are derived here, independently of the generator: each
 * built-in model's public config is repeated below and the local element
 * count of a stage is computed by formula (one line per module), and the
 * worked figures of Megatron-Core shapes (llama-3.1-8b at tp 2:
 * 4,015,263,744 elements per rank; Qwen2.5-72B, DeepSeek-V3 and GPT-3 at
 * tp 8) are checked tensor by tensor.  The full model totals come from
 * check_models (published parameter counts).
 */
#define _POSIX_C_SOURCE 200809L

#include "dbuf/models.h"
#include "dbuf/parallel.h"

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* ---- the configs, repeated by hand from the model cards ---------------- */

typedef struct cfg {
  const char *name;
  int64_t H, F, L, nq, ng, d, V;
  int tied, qkv_bias, gpt;  /* gpt: LayerNorm with bias, linear biases, GELU MLP */
  int64_t max_pos;
  int64_t E, Fe, shared, first_dense; /* MoE (E = 0: dense) */
  int mla;                  /* DeepSeek-V3 MLA dims below */
  int64_t full;             /* published parameter count (check_models) */
} cfg_t;

static const cfg_t cfgs[] = {
    {"llama-3.2-1b", 2048, 8192, 16, 32, 8, 64, 128256, 1, 0, 0, 0, 0, 0, 0, 0, 0,
     INT64_C(1235814400)},
    {"tinyllama-1.1b", 2048, 5632, 22, 32, 4, 64, 32000, 0, 0, 0, 0, 0, 0, 0, 0, 0,
     INT64_C(1100048384)},
    {"llama-3.1-8b", 4096, 14336, 32, 32, 8, 128, 128256, 0, 0, 0, 0, 0, 0, 0, 0, 0,
     INT64_C(8030261248)},
    {"llama-3.1-70b", 8192, 28672, 80, 64, 8, 128, 128256, 0, 0, 0, 0, 0, 0, 0, 0, 0,
     INT64_C(70553706496)},
    {"llama-3.1-405b", 16384, 53248, 126, 128, 8, 128, 128256, 0, 0, 0, 0, 0, 0, 0, 0, 0,
     INT64_C(405853388800)},
    {"mixtral-8x7b", 4096, 0, 32, 32, 8, 128, 32000, 0, 0, 0, 0, 8, 14336, 0, 0, 0,
     INT64_C(46702792704)},
    {"qwen2.5-72b", 8192, 29568, 80, 64, 8, 128, 152064, 0, 1, 0, 0, 0, 0, 0, 0, 0,
     INT64_C(72706203648)},
    {"deepseek-v3", 7168, 18432, 61, 128, 128, 0, 129280, 0, 0, 0, 0, 256, 2048, 1, 3, 1,
     INT64_C(671026419200)},
    {"gpt3-175b", 12288, 49152, 96, 96, 96, 128, 51200, 1, 0, 1, 2048, 0, 0, 0, 0, 0,
     INT64_C(174615846912)},
};
#define NCFGS ((int)(sizeof cfgs / sizeof cfgs[0]))

/* DeepSeek-V3 MLA: q_lora_rank, kv_lora_rank, qk_nope, qk_rope, v_head. */
#define QL INT64_C(1536)
#define KVL INT64_C(512)
#define NOPE INT64_C(128)
#define ROPE INT64_C(64)
#define VH INT64_C(128)

typedef struct setting {
  int64_t tp, pp, ep, etp, stage;
  int megatron;
} setting_t;

static int64_t
pad_to(int64_t v, int64_t m)
{
  return (v + m - 1) / m * m;
}

/* Elements of decoder layer l on tp rank 0, ep rank 0. */
static int64_t
layer_elems(const cfg_t *c, const setting_t *s, int64_t l)
{
  int64_t t = s->tp, et = s->etp ? s->etp : s->tp, H = c->H, n = 0;
  if (c->mla) {
    n += QL * H + QL + c->nq * (NOPE + ROPE) * QL / t; /* q down (dup), norm, q up */
    n += (KVL + ROPE) * H + KVL + c->nq * (NOPE + VH) * KVL / t; /* kv down, norm, up */
    n += H * c->nq * VH / t;                                      /* o */
  } else {
    int64_t q = c->nq * c->d, kv = c->ng * c->d;
    n += (q + 2 * kv) * H / t + q * H / t;   /* q, k, v, o */
    if (c->qkv_bias || c->gpt)
      n += (q + 2 * kv) / t;                 /* q/k/v biases */
    if (c->gpt)
      n += H;                                /* o bias, replicated */
  }
  if (c->gpt) {
    n += 2 * c->F * H / t + c->F / t + H;    /* fc1 + bias, fc2 + bias */
    n += 4 * H;                              /* two LayerNorms with bias */
    return n;
  }
  if (c->E == 0 || l < c->first_dense) {
    n += 3 * c->F * H / t;
  } else {
    n += c->E / s->ep * 3 * c->Fe * H / et;  /* this rank's experts */
    n += c->E * H;  /* router */
    if (c->mla && !s->megatron)
      n += c->E;                             /* e_score_correction_bias (a buffer in Megatron) */
    n += 3 * c->shared * c->Fe * H / t;      /* shared experts, dense */
  }
  return n + 2 * H;                          /* two norms */
}

/* Elements of stage s->stage (even split unless first/count given). */
static int64_t
stage_elems(const cfg_t *c, const setting_t *s, int64_t first, int64_t count)
{
  int64_t vp = pad_to(c->V, 128 * s->tp), n = 0;
  if (s->stage == 0)
    n += vp / s->tp * c->H + c->max_pos * c->H;
  for (int64_t l = first; l < first + count; l++)
    n += layer_elems(c, s, l);
  if (s->stage == s->pp - 1) {
    n += c->gpt ? 2 * c->H : c->H;
    if (!c->tied || s->pp > 1)
      n += vp / s->tp * c->H;
  }
  return n;
}

static dbuf_parallel_t
par_of(const setting_t *s)
{
  dbuf_parallel_t p;
  dbuf_parallel_init(&p);
  p.tp = s->tp;
  p.pp = s->pp;
  p.ep = s->ep;
  p.expert_tp = s->etp;
  p.stage = s->stage;
  p.naming = s->megatron ? DBUF_NAMING_MEGATRON : DBUF_NAMING_HF;
  return p;
}

static dbuf_tensors_t *
build_ok(const char *name, const dbuf_parallel_t *p, dbuf_parallel_stats_t *st)
{
  dbuf_tensors_t *t = NULL;
  dbuf_diag_t d;
  dbuf_diag_clear(&d);
  int rc = dbuf_model_build_parallel(name, p, &t, st, &d);
  ck_assert_msg(rc == 0, "%s tp %lld pp %lld ep %lld stage %lld: %s: %s", name,
                (long long)p->tp, (long long)p->pp, (long long)p->ep, (long long)p->stage,
                dbuf_err_name(rc), d.msg);
  return t;
}

/* ---- the settings every model is built under --------------------------- */

/* tp, pp, ep, expert tp; each model takes those its config divides. */
static const setting_t grid[] = {
    {1, 1, 1, 0, 0, 0}, {2, 1, 1, 0, 0, 0}, {4, 2, 1, 0, 0, 0}, {8, 4, 1, 0, 0, 0},
    {2, 2, 2, 0, 0, 0}, {4, 1, 4, 1, 0, 0}, {8, 1, 8, 8, 0, 0}, {1, 8, 2, 2, 0, 0},
};
#define NGRID ((int)(sizeof grid / sizeof grid[0]))

static int
applies(const cfg_t *c, const setting_t *s)
{
  if (c->nq % s->tp || (!c->mla && c->ng % s->tp) || c->L % s->pp)
    return 0;
  if (s->ep > 1 && (c->E == 0 || c->E % s->ep))
    return 0;
  return 1;
}

/* Every model x setting x naming x stage: the local total equals the formula;
 * the stage statistics add up; summed over the tp, ep and pp ranks the
 * stages give back the full model (replicated tensors once, vocabulary
 * padding taken out, a tied output layer's copy on the last stage counted
 * once more, the router's expert bias left out under Megatron names). */
START_TEST(test_sum_over_ranks)
{
  const cfg_t *c = &cfgs[_i];
  int used = 0;
  for (int g = 0; g < NGRID; g++) {
    for (int mg = 0; mg < 2; mg++) {
      setting_t s = grid[g];
      s.megatron = mg;
      if (!applies(c, &s))
        continue;
      used++;
      int64_t et = s.etp ? s.etp : s.tp, sum = 0;
      for (s.stage = 0; s.stage < s.pp; s.stage++) {
        dbuf_parallel_t p = par_of(&s);
        dbuf_parallel_stats_t st;
        dbuf_tensors_t *t = build_ok(c->name, &p, &st);
        int64_t per = c->L / s.pp;
        int64_t want = stage_elems(c, &s, s.stage * per, per);
        ck_assert_msg(dbuf_tensors_total(t) == want && st.total == want,
                      "%s tp %lld pp %lld ep %lld et %lld stage %lld %s: %lld elements, "
                      "formula %lld",
                      c->name, (long long)s.tp, (long long)s.pp, (long long)s.ep,
                      (long long)et, (long long)s.stage, mg ? "megatron" : "hf",
                      (long long)dbuf_tensors_total(t), (long long)want);
        ck_assert_int_eq(st.tp_split + st.replicated + st.expert, st.total);
        ck_assert_int_eq(st.first_layer, s.stage * per);
        ck_assert_int_eq(st.nlayers, per);
        sum += s.tp * st.tp_split + st.replicated + s.ep * et * st.expert - st.vocab_padding;
        dbuf_tensors_destroy(t);
      }
      int64_t full = c->full;
      if (c->tied && s.pp > 1)
        full += c->V * c->H; /* the output layer's own copy on the last stage */
      if (mg && c->mla)
        full -= c->E * (c->L - c->first_dense); /* expert bias: a buffer */
      ck_assert_msg(sum == full, "%s tp %lld pp %lld ep %lld %s: ranks add up to %lld, want %lld",
                    c->name, (long long)s.tp, (long long)s.pp, (long long)s.ep,
                    mg ? "megatron" : "hf", (long long)sum, (long long)full);
    }
  }
  ck_assert_int_ge(used, 6);
}
END_TEST

/* Without parallel settings the stats are the whole model; tp = 1 changes
 * nothing (every built-in vocabulary is a multiple of 128). */
START_TEST(test_tp1_is_the_model)
{
  const cfg_t *c = &cfgs[_i];
  dbuf_parallel_t p;
  dbuf_parallel_stats_t st;
  dbuf_tensors_t *a = NULL, *b;
  dbuf_diag_t d;
  dbuf_parallel_init(&p);
  ck_assert_int_eq(dbuf_model_build(c->name, &a, &d), 0);
  b = build_ok(c->name, &p, &st);
  ck_assert_int_eq(dbuf_tensors_compare(b, a, NULL, NULL, NULL), 0);
  ck_assert_int_eq(st.vocab_padding, 0);
  ck_assert_int_eq(st.total, c->full);
  dbuf_tensors_destroy(a);
  dbuf_tensors_destroy(b);
  ck_assert_int_eq(dbuf_model_build_parallel(c->name, NULL, &a, &st, &d), 0);
  ck_assert_int_eq(st.total, c->full);
  dbuf_tensors_destroy(a);
}
END_TEST

/* ---- worked shapes (the note's tables) ----------------------------------- */

static void
expect_shape(const dbuf_tensors_t *t, const char *name, const char *shape)
{
  int64_t id;
  char buf[128];
  ck_assert_msg(dbuf_tensors_find(t, name, &id) == 0, "no tensor %s", name);
  ck_assert_int_eq(dbuf_tensors_shape_str(t, id, buf, sizeof buf), 0);
  ck_assert_msg(strcmp(buf, shape) == 0, "%s: %s, want %s", name, buf, shape);
}

static void
expect_absent(const dbuf_tensors_t *t, const char *name)
{
  int64_t id;
  ck_assert_msg(dbuf_tensors_find(t, name, &id) == DBUF_ENOTFOUND, "%s should be absent", name);
}

START_TEST(test_llama8b_tp2)
{
  setting_t s = {2, 1, 1, 0, 0, 1};
  dbuf_parallel_t p = par_of(&s);
  dbuf_tensors_t *t = build_ok("llama-3.1-8b", &p, NULL);
  /* (8,030,261,248 - 266,240 replicated) / 2 + 266,240 */
  ck_assert_int_eq(dbuf_tensors_total(t), INT64_C(4015263744));
  expect_shape(t, "embedding.word_embeddings.weight", "64128x4096");
  expect_shape(t, "decoder.layers.0.self_attention.linear_qkv.weight", "3072x4096");
  expect_shape(t, "decoder.layers.0.self_attention.linear_qkv.layer_norm_weight", "4096");
  expect_shape(t, "decoder.layers.31.self_attention.linear_proj.weight", "4096x2048");
  expect_shape(t, "decoder.layers.0.mlp.linear_fc1.weight", "14336x4096");
  expect_shape(t, "decoder.layers.0.mlp.linear_fc1.layer_norm_weight", "4096");
  expect_shape(t, "decoder.layers.0.mlp.linear_fc2.weight", "4096x7168");
  expect_shape(t, "decoder.final_layernorm.weight", "4096");
  expect_shape(t, "output_layer.weight", "64128x4096");
  /* 1 + 32 x 6 + 2 tensors */
  ck_assert_int_eq(dbuf_tensors_count(t), 195);
  dbuf_tensors_destroy(t);
  /* The same count with the model's own names, split one by one. */
  p.naming = DBUF_NAMING_HF;
  t = build_ok("llama-3.1-8b", &p, NULL);
  ck_assert_int_eq(dbuf_tensors_total(t), INT64_C(4015263744));
  expect_shape(t, "model.layers.0.self_attn.q_proj.weight", "2048x4096");
  expect_shape(t, "model.layers.0.self_attn.k_proj.weight", "512x4096");
  expect_shape(t, "model.layers.0.self_attn.o_proj.weight", "4096x2048");
  expect_shape(t, "model.layers.0.mlp.gate_proj.weight", "7168x4096");
  expect_shape(t, "model.layers.0.mlp.down_proj.weight", "4096x7168");
  expect_shape(t, "model.layers.0.input_layernorm.weight", "4096");
  expect_shape(t, "lm_head.weight", "64128x4096");
  dbuf_tensors_destroy(t);
}
END_TEST

START_TEST(test_qwen72b_tp8)
{
  setting_t s = {8, 1, 1, 0, 0, 1};
  dbuf_parallel_t p = par_of(&s);
  dbuf_parallel_stats_t st;
  dbuf_tensors_t *t = build_ok("qwen2.5-72b", &p, &st);
  expect_shape(t, "decoder.layers.0.self_attention.linear_qkv.weight", "1280x8192");
  expect_shape(t, "decoder.layers.0.self_attention.linear_qkv.bias", "1280");
  expect_shape(t, "decoder.layers.0.self_attention.linear_proj.weight", "8192x1024");
  expect_shape(t, "decoder.layers.0.mlp.linear_fc1.weight", "7392x8192");
  expect_shape(t, "decoder.layers.0.mlp.linear_fc2.weight", "8192x3696");
  expect_shape(t, "embedding.word_embeddings.weight", "19072x8192");
  expect_shape(t, "output_layer.weight", "19072x8192");
  ck_assert_int_eq(st.vocab_padded, 152576);
  ck_assert_int_eq(st.vocab_padding, 2 * (152576 - 152064) * 8192);
  dbuf_tensors_destroy(t);
}
END_TEST

START_TEST(test_deepseek_tp8_ep8)
{
  setting_t s = {8, 1, 8, 0, 0, 1};
  dbuf_parallel_t p = par_of(&s);
  dbuf_tensors_t *t = build_ok("deepseek-v3", &p, NULL);
  expect_shape(t, "embedding.word_embeddings.weight", "16256x7168");
  expect_shape(t, "decoder.layers.0.input_layernorm.weight", "7168");
  expect_shape(t, "decoder.layers.0.self_attention.linear_q_down_proj.weight", "1536x7168");
  expect_shape(t, "decoder.layers.0.self_attention.linear_q_up_proj.layer_norm_weight", "1536");
  expect_shape(t, "decoder.layers.0.self_attention.linear_q_up_proj.weight", "3072x1536");
  expect_shape(t, "decoder.layers.0.self_attention.linear_kv_down_proj.weight", "576x7168");
  expect_shape(t, "decoder.layers.0.self_attention.linear_kv_up_proj.layer_norm_weight", "512");
  expect_shape(t, "decoder.layers.0.self_attention.linear_kv_up_proj.weight", "4096x512");
  expect_shape(t, "decoder.layers.0.self_attention.linear_proj.weight", "7168x2048");
  expect_shape(t, "decoder.layers.2.mlp.linear_fc1.layer_norm_weight", "7168");
  expect_shape(t, "decoder.layers.2.mlp.linear_fc1.weight", "4608x7168");
  expect_shape(t, "decoder.layers.2.mlp.linear_fc2.weight", "7168x2304");
  expect_shape(t, "decoder.layers.3.pre_mlp_layernorm.weight", "7168");
  expect_shape(t, "decoder.layers.3.mlp.router.weight", "256x7168");
  expect_absent(t, "decoder.layers.3.mlp.router.expert_bias");
  expect_shape(t, "decoder.layers.3.mlp.experts.linear_fc1.weight31", "512x7168");
  expect_shape(t, "decoder.layers.60.mlp.experts.linear_fc2.weight0", "7168x256");
  expect_absent(t, "decoder.layers.3.mlp.experts.linear_fc1.weight32");
  expect_shape(t, "decoder.layers.3.mlp.shared_experts.linear_fc1.weight", "512x7168");
  expect_shape(t, "decoder.layers.3.mlp.shared_experts.linear_fc2.weight", "7168x256");
  expect_shape(t, "output_layer.weight", "16256x7168");
  dbuf_tensors_destroy(t);
  /* Expert tp 1 (Megatron-Bridge's recipes): whole experts. */
  p.expert_tp = 1;
  t = build_ok("deepseek-v3", &p, NULL);
  expect_shape(t, "decoder.layers.3.mlp.experts.linear_fc1.weight0", "4096x7168");
  expect_shape(t, "decoder.layers.3.mlp.experts.linear_fc2.weight0", "7168x2048");
  expect_shape(t, "decoder.layers.3.mlp.shared_experts.linear_fc1.weight", "512x7168");
  dbuf_tensors_destroy(t);
  /* HF names: experts 0..31 of EP rank 0, the gate's bias kept. */
  p.naming = DBUF_NAMING_HF;
  t = build_ok("deepseek-v3", &p, NULL);
  expect_shape(t, "model.layers.3.mlp.experts.31.down_proj.weight", "7168x2048");
  expect_absent(t, "model.layers.3.mlp.experts.32.down_proj.weight");
  expect_shape(t, "model.layers.3.mlp.gate.e_score_correction_bias", "256");
  expect_shape(t, "model.layers.3.self_attn.q_a_proj.weight", "1536x7168");
  expect_shape(t, "model.layers.3.self_attn.kv_b_proj.weight", "4096x512");
  dbuf_tensors_destroy(t);
}
END_TEST

START_TEST(test_gpt3_tp8)
{
  setting_t s = {8, 1, 1, 0, 0, 1};
  dbuf_parallel_t p = par_of(&s);
  dbuf_tensors_t *t = build_ok("gpt3-175b", &p, NULL);
  expect_shape(t, "embedding.word_embeddings.weight", "6400x12288");
  expect_shape(t, "embedding.position_embeddings.weight", "2048x12288");
  expect_shape(t, "decoder.layers.0.self_attention.linear_qkv.layer_norm_weight", "12288");
  expect_shape(t, "decoder.layers.0.self_attention.linear_qkv.layer_norm_bias", "12288");
  expect_shape(t, "decoder.layers.0.self_attention.linear_qkv.weight", "4608x12288");
  expect_shape(t, "decoder.layers.0.self_attention.linear_qkv.bias", "4608");
  expect_shape(t, "decoder.layers.0.self_attention.linear_proj.weight", "12288x1536");
  expect_shape(t, "decoder.layers.0.self_attention.linear_proj.bias", "12288");
  expect_shape(t, "decoder.layers.0.mlp.linear_fc1.weight", "6144x12288");
  expect_shape(t, "decoder.layers.0.mlp.linear_fc1.bias", "6144");
  expect_shape(t, "decoder.layers.0.mlp.linear_fc2.weight", "12288x6144");
  expect_shape(t, "decoder.layers.0.mlp.linear_fc2.bias", "12288");
  expect_shape(t, "decoder.final_layernorm.bias", "12288");
  expect_absent(t, "output_layer.weight"); /* tied, one stage */
  dbuf_tensors_destroy(t);
  /* Two stages: the last holds its own output layer; layers renumbered. */
  p.pp = 2;
  p.stage = 1;
  t = build_ok("gpt3-175b", &p, NULL);
  expect_shape(t, "output_layer.weight", "6400x12288");
  expect_shape(t, "decoder.layers.47.mlp.linear_fc2.bias", "12288");
  expect_absent(t, "decoder.layers.48.mlp.linear_fc2.bias");
  expect_absent(t, "embedding.word_embeddings.weight");
  dbuf_tensors_destroy(t);
  /* The model's own (local spec) names keep global layer numbers. */
  p.naming = DBUF_NAMING_HF;
  t = build_ok("gpt3-175b", &p, NULL);
  expect_shape(t, "decoder.layers.48.input_layernorm.weight", "12288");
  expect_shape(t, "decoder.layers.95.mlp.linear_fc1.weight", "6144x12288");
  expect_absent(t, "decoder.layers.47.mlp.linear_fc1.weight");
  dbuf_tensors_destroy(t);
}
END_TEST

START_TEST(test_tied_hf_pp)
{
  /* llama-3.2-1b is tied: lm_head appears only on the last of 2 stages. */
  setting_t s = {1, 2, 1, 0, 1, 0};
  dbuf_parallel_t p = par_of(&s);
  dbuf_tensors_t *t = build_ok("llama-3.2-1b", &p, NULL);
  expect_shape(t, "lm_head.weight", "128256x2048");
  expect_shape(t, "model.norm.weight", "2048");
  expect_absent(t, "model.embed_tokens.weight");
  expect_absent(t, "model.layers.7.input_layernorm.weight");
  expect_shape(t, "model.layers.8.input_layernorm.weight", "2048");
  dbuf_tensors_destroy(t);
}
END_TEST

/* ---- vocabulary padding and pipeline layers ------------------------------ */

START_TEST(test_pad_vocab)
{
  /* The note's table: V -> Vp at tp 1 / 2 / 8, divisor 128. */
  static const int64_t v[][4] = {{128256, 128256, 128256, 129024}, {32000, 32000, 32000, 32768},
                                 {152064, 152064, 152064, 152576}, {129280, 129280, 129280, 130048},
                                 {50257, 50304, 50432, 51200}};
  static const int64_t tps[3] = {1, 2, 8};
  int64_t out;
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
    for (int k = 0; k < 3; k++) {
      ck_assert_int_eq(dbuf_parallel_pad_vocab(v[i][0], 128, tps[k], &out), 0);
      ck_assert_int_eq(out, v[i][k + 1]);
    }
  /* Another divisor (DeepSeek's scripts use 1280): 129280 is 101 x 1280. */
  ck_assert_int_eq(dbuf_parallel_pad_vocab(129280, 1280, 1, &out), 0);
  ck_assert_int_eq(out, 129280);
  ck_assert_int_eq(dbuf_parallel_pad_vocab(129280, 1280, 8, &out), 0);
  ck_assert_int_eq(out, 133120); /* 13 x 10240 */
  ck_assert_int_eq(dbuf_parallel_pad_vocab(INT64_MAX - 1, 128, 1, &out), DBUF_EOVERFLOW);
  ck_assert_int_eq(dbuf_parallel_pad_vocab(INT64_MAX, INT64_MAX, 2, &out), DBUF_EOVERFLOW);
  ck_assert_int_eq(dbuf_parallel_pad_vocab(-1, 128, 1, &out), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_parallel_pad_vocab(1, 0, 1, &out), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_parallel_pad_vocab(1, 1, 1, NULL), DBUF_EINVAL);
}
END_TEST

START_TEST(test_stage_layers)
{
  dbuf_parallel_t p;
  dbuf_diag_t d;
  int64_t first, n;
  dbuf_parallel_init(&p);
  p.pp = 4;
  p.stage = 3;
  ck_assert_int_eq(dbuf_parallel_stage_layers(&p, 32, &first, &n, &d), 0);
  ck_assert_int_eq(first, 24);
  ck_assert_int_eq(n, 8);
  /* DeepSeek-V3 at pp 8: first 7, six middle stages of 8, last 6. */
  p.pp = 8;
  p.npp_layers = 8;
  int64_t want[8] = {7, 8, 8, 8, 8, 8, 8, 6}, at = 0;
  memcpy(p.pp_layers, want, sizeof want);
  for (p.stage = 0; p.stage < 8; p.stage++) {
    ck_assert_int_eq(dbuf_parallel_stage_layers(&p, 61, &first, &n, &d), 0);
    ck_assert_int_eq(first, at);
    ck_assert_int_eq(n, want[p.stage]);
    at += n;
  }
  p.stage = 0;
  ck_assert_int_eq(dbuf_parallel_stage_layers(&p, 62, &first, &n, &d), DBUF_EPARALLEL);
  ck_assert_str_eq(d.msg, "--pp-layers adds up to 61 layers, the model has num_layers 62");
  p.npp_layers = 0;
  ck_assert_int_eq(dbuf_parallel_stage_layers(&p, 61, &first, &n, &d), DBUF_EPARALLEL);
  ck_assert_str_eq(d.msg, "num_layers (61) is not divisible by --pp 8; give the layers of "
                          "each stage with --pp-layers");
  /* A whole uneven model through the generator: 7 | 8 x 6 | 6. */
  p.npp_layers = 8;
  p.naming = DBUF_NAMING_MEGATRON;
  p.stage = 7;
  dbuf_parallel_stats_t st;
  dbuf_tensors_t *t = build_ok("deepseek-v3", &p, &st);
  ck_assert_int_eq(st.first_layer, 55);
  ck_assert_int_eq(st.nlayers, 6);
  expect_shape(t, "decoder.layers.5.mlp.router.weight", "256x7168");
  expect_absent(t, "decoder.layers.6.mlp.router.weight");
  dbuf_tensors_destroy(t);
}
END_TEST

/* The split rules one by one, including their errors. */
START_TEST(test_split_rules)
{
  dbuf_parallel_t p;
  dbuf_diag_t d;
  int64_t dims[2] = {12, 18}, loc[2], pad;
  dbuf_parallel_init(&p);
  p.tp = 3;
  p.expert_tp = 2;
  ck_assert_int_eq(dbuf_parallel_split(&p, DBUF_SPLIT_COLUMN, "w", 2, dims, loc, &pad, &d), 0);
  ck_assert(loc[0] == 4 && loc[1] == 18 && pad == 0);
  ck_assert_int_eq(dbuf_parallel_split(&p, DBUF_SPLIT_ROW, "w", 2, dims, loc, NULL, &d), 0);
  ck_assert(loc[0] == 12 && loc[1] == 6);
  ck_assert_int_eq(dbuf_parallel_split(&p, DBUF_SPLIT_EXPERT_COLUMN, "w", 2, dims, loc, NULL, &d),
                   0);
  ck_assert(loc[0] == 6 && loc[1] == 18);
  ck_assert_int_eq(dbuf_parallel_split(&p, DBUF_SPLIT_EXPERT_ROW, "w", 2, dims, loc, NULL, &d), 0);
  ck_assert(loc[0] == 12 && loc[1] == 9);
  ck_assert_int_eq(dbuf_parallel_split(&p, DBUF_SPLIT_REPLICATED, "w", 2, dims, loc, NULL, &d), 0);
  ck_assert(loc[0] == 12 && loc[1] == 18);
  /* Gate and up of 6 rows each, cut in 3: 2 + 2 rows. */
  ck_assert_int_eq(dbuf_parallel_split(&p, DBUF_SPLIT_COLUMN_GLU, "w", 2, dims, loc, NULL, &d), 0);
  ck_assert_int_eq(loc[0], 4);
  /* 12 rows = 6 + 6: the halves do not divide by expert tp 4 although 12 does. */
  p.expert_tp = 4;
  ck_assert_int_eq(dbuf_parallel_split(&p, DBUF_SPLIT_EXPERT_COLUMN_GLU, "fc1", 2, dims, loc, NULL,
                                       &d),
                   DBUF_EPARALLEL);
  ck_assert_str_eq(d.msg, "tensor fc1: dim 0 holds gate and up of 6 rows each, not divisible "
                          "by --expert-tp 4");
  /* Vocabulary 1000 at divisor 8, tp 3: padded to 1008, 336 rows each. */
  int64_t v[2] = {1000, 5};
  p.vocab_divisor = 8;
  ck_assert_int_eq(dbuf_parallel_split(&p, DBUF_SPLIT_VOCAB, "emb", 2, v, loc, &pad, &d), 0);
  ck_assert(loc[0] == 336 && loc[1] == 5 && pad == 8);
  /* Errors name the tensor, the dim and the degree. */
  p.tp = 5;
  ck_assert_int_eq(dbuf_parallel_split(&p, DBUF_SPLIT_COLUMN, "q", 2, dims, loc, NULL, &d),
                   DBUF_EPARALLEL);
  ck_assert_str_eq(d.msg, "tensor q: dim 0 (12) is not divisible by --tp 5");
  ck_assert_int_eq(dbuf_parallel_split(&p, DBUF_SPLIT_ROW, "o", 2, dims, loc, NULL, &d),
                   DBUF_EPARALLEL);
  ck_assert_str_eq(d.msg, "tensor o: dim 1 (18) is not divisible by --tp 5");
  ck_assert_int_eq(dbuf_parallel_split(&p, DBUF_SPLIT_ROW, "b", 1, dims, loc, NULL, &d),
                   DBUF_EINVAL);
  ck_assert_int_eq(dbuf_parallel_split(&p, 99, "b", 1, dims, loc, NULL, &d), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_parallel_split(NULL, DBUF_SPLIT_ROW, "b", 2, dims, loc, NULL, &d),
                   DBUF_EINVAL);
}
END_TEST

/* Settings Megatron refuses: each DBUF_EPARALLEL or DBUF_EINVAL with the
 * message naming the setting or tensor, the dim and the degree. */
typedef struct bad {
  const char *model;
  int64_t tp, pp, ep, etp, stage;
  int megatron, code;
  const char *msg;
} bad_t;

static const bad_t bads[] = {
    {"llama-3.1-8b", 3, 1, 1, 0, 0, 0, DBUF_EPARALLEL,
     "model llama-3.1-8b: num_attention_heads (32) is not divisible by --tp 3"},
    {"llama-3.1-8b", 16, 1, 1, 0, 0, 0, DBUF_EPARALLEL,
     "model llama-3.1-8b: num_query_groups (key/value heads) (8) is not divisible by --tp 16"},
    {"mixtral-8x7b", 1, 1, 3, 0, 0, 0, DBUF_EPARALLEL,
     "model mixtral-8x7b: num_experts (8) is not divisible by --ep 3"},
    {"llama-3.2-1b", 1, 1, 2, 0, 0, 0, DBUF_EPARALLEL,
     "model llama-3.2-1b has no experts: --ep 2 needs a MoE model"},
    {"tinyllama-1.1b", 1, 4, 1, 0, 0, 0, DBUF_EPARALLEL,
     "model tinyllama-1.1b: num_layers (22) is not divisible by --pp 4; give the layers of each "
     "stage with --pp-layers"},
    {"mixtral-8x7b", 1, 1, 1, 3, 0, 0, DBUF_EPARALLEL,
     "tensor model.layers.0.block_sparse_moe.experts.0.w1.weight: dim 0 (14336) is not "
     "divisible by --expert-tp 3"},
    {"mixtral-8x7b", 1, 1, 1, 3, 0, 1, DBUF_EPARALLEL,
     "tensor decoder.layers.0.mlp.experts.linear_fc1.weight0: dim 0 holds gate and up of 14336 "
     "rows each, not divisible by --expert-tp 3"},
    {"llama-3.2-1b", 1, 2, 1, 0, 2, 0, DBUF_EINVAL,
     "stage 2 out of range: --pp 2 has stages 0..1"},
    {"no-such-model", 1, 1, 1, 0, 0, 0, DBUF_ENOTFOUND, NULL},
};
#define NBADS ((int)(sizeof bads / sizeof bads[0]))

START_TEST(test_refused)
{
  const bad_t *b = &bads[_i];
  setting_t s = {b->tp, b->pp, b->ep, b->etp, b->stage, b->megatron};
  dbuf_parallel_t p = par_of(&s);
  dbuf_tensors_t *t = NULL;
  dbuf_diag_t d;
  int64_t stage = -1;
  ck_assert_int_eq(dbuf_model_build_parallel(b->model, &p, &t, NULL, &d), b->code);
  ck_assert_ptr_null(t);
  if (b->msg != NULL)
    ck_assert_str_eq(d.msg, b->msg);
  if (b->code == DBUF_EPARALLEL) /* every stage refuses alike */
    ck_assert_int_eq(dbuf_model_largest_stage(b->model, &p, &stage, &d), b->code);
}
END_TEST

START_TEST(test_check_errors)
{
  dbuf_parallel_t p;
  dbuf_diag_t d;
  dbuf_tensors_t *t = NULL;
  dbuf_parallel_init(&p);
  ck_assert_int_eq(dbuf_parallel_check(&p, &d), 0);
  ck_assert_int_eq(dbuf_parallel_expert_tp(&p), 1);
  p.tp = 0;
  ck_assert_int_eq(dbuf_parallel_check(&p, &d), DBUF_EINVAL);
  dbuf_parallel_init(&p);
  p.pp = 3;
  p.npp_layers = 2;
  ck_assert_int_eq(dbuf_parallel_check(&p, &d), DBUF_EINVAL);
  ck_assert_str_eq(d.msg, "--pp-layers names 2 stages, --pp is 3");
  p.npp_layers = 3;
  p.pp_layers[0] = 1;
  p.pp_layers[1] = 0;
  p.pp_layers[2] = 1;
  ck_assert_int_eq(dbuf_parallel_check(&p, &d), DBUF_EINVAL);
  ck_assert_str_eq(d.msg, "--pp-layers: stage 1 has 0 layers (each stage needs >= 1)");
  p.naming = 7;
  ck_assert_int_eq(dbuf_parallel_check(&p, &d), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_parallel_check(NULL, &d), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_model_build_parallel(NULL, &p, &t, NULL, &d), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_model_largest_stage("llama-3.2-1b", NULL, NULL, &d), DBUF_EINVAL);
  dbuf_naming_t n;
  ck_assert_int_eq(dbuf_naming_parse("megatron", &n), 0);
  ck_assert_int_eq(n, DBUF_NAMING_MEGATRON);
  ck_assert_int_eq(dbuf_naming_parse("mcore", &n), DBUF_EINVAL);
  ck_assert_str_eq(dbuf_naming_name(DBUF_NAMING_HF), "hf");
  ck_assert_str_eq(dbuf_naming_name(9), "?");
}
END_TEST

START_TEST(test_largest_stage)
{
  dbuf_parallel_t p;
  dbuf_diag_t d;
  int64_t s = -1;
  dbuf_parallel_init(&p);
  p.pp = 2;
  /* llama-3.1-8b, 2 stages of 16 layers: stage 0 has the embedding, stage 1
   * the final norm and the output layer: stage 1 is larger by 4096. */
  ck_assert_int_eq(dbuf_model_largest_stage("llama-3.1-8b", &p, &s, &d), 0);
  ck_assert_int_eq(s, 1);
  /* Tied llama-3.2-1b: the same, the last stage keeps an output copy. */
  ck_assert_int_eq(dbuf_model_largest_stage("llama-3.2-1b", &p, &s, &d), 0);
  ck_assert_int_eq(s, 1);
  /* 4 uneven stages of deepseek-v3: the 20-layer stage 1 wins. */
  p.pp = 4;
  p.npp_layers = 4;
  p.pp_layers[0] = 13;
  p.pp_layers[1] = 20;
  p.pp_layers[2] = 14;
  p.pp_layers[3] = 14;
  ck_assert_int_eq(dbuf_model_largest_stage("deepseek-v3", &p, &s, &d), 0);
  ck_assert_int_eq(s, 1);
  p.pp = 1;
  p.npp_layers = 0;
  ck_assert_int_eq(dbuf_model_largest_stage("llama-3.1-8b", &p, &s, &d), 0);
  ck_assert_int_eq(s, 0);
}
END_TEST

static Suite *
parallel_suite(void)
{
  Suite *s = suite_create("parallel");
  TCase *tc = tcase_create("models");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, test_sum_over_ranks, 0, NCFGS);
  tcase_add_loop_test(tc, test_tp1_is_the_model, 0, NCFGS);
  tcase_add_test(tc, test_llama8b_tp2);
  tcase_add_test(tc, test_qwen72b_tp8);
  tcase_add_test(tc, test_deepseek_tp8_ep8);
  tcase_add_test(tc, test_gpt3_tp8);
  tcase_add_test(tc, test_tied_hf_pp);
  tcase_add_loop_test(tc, test_refused, 0, NBADS);
  tcase_add_test(tc, test_largest_stage);
  suite_add_tcase(s, tc);
  tc = tcase_create("rules");
  tcase_add_test(tc, test_pad_vocab);
  tcase_add_test(tc, test_stage_layers);
  tcase_add_test(tc, test_split_rules);
  tcase_add_test(tc, test_check_errors);
  suite_add_tcase(s, tc);
  return s;
}

int
main(void)
{
  SRunner *sr = srunner_create(parallel_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? 0 : 1;
}
