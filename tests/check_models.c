/*
 * Tests for the built-in model generators (include/dbuf/models.h).
 *
 * The zoo models are compared line by line with the reference lists in
 * $DBUF_TEST_DATA/zoo/NAME.shapes (default tests/data relative to the cwd).
 * The other models are checked against their published parameter totals.
 */
#define _POSIX_C_SOURCE 200809L

#include "dbuf/models.h"
#include "testutil.h"

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- expected values ------------------------------------------------------ */

typedef struct expect {
  const char *name;
  int64_t tensors;
  int64_t elements;
  int in_zoo; /* a reference list exists in tests/data/zoo */
} expect_t;

/* GPT-3 175B as trained with Megatron: l layers, hidden h, padded vocab V,
 * sequence length s (learned position embeddings). */
#define GPT3_L INT64_C(96)
#define GPT3_H INT64_C(12288)
#define GPT3_V INT64_C(51200)
#define GPT3_S INT64_C(2048)

static const expect_t expects[] = {
    /* Zoo models: tensor counts and element totals from the table in
     * tests/data/zoo/README.md, which match the published parameter counts
     * exactly (DeepSeek-V3: the 671B main model without the MTP layer). */
    {"llama-3.2-1b", 146, INT64_C(1235814400), 1},
    {"tinyllama-1.1b", 201, INT64_C(1100048384), 1},
    {"llama-3.1-8b", 291, INT64_C(8030261248), 1},
    {"llama-3.1-70b", 723, INT64_C(70553706496), 1},
    {"llama-3.1-405b", 1137, INT64_C(405853388800), 1},
    {"mixtral-8x7b", 995, INT64_C(46702792704), 1},
    {"deepseek-v3", 45395, INT64_C(671026419200), 1},
    /* Qwen2.5-72B: 72,706,203,648 parameters.  Obtained from the
     * model.safetensors.index.json of Qwen/Qwen2.5-72B-Instruct,
     * metadata.total_size = 145,412,407,296 bytes, all tensors bf16 (2 bytes),
     * so 145,412,407,296 / 2; the model card rounds it to "72.7B", and the
     * Keras Hub preset qwen2.5_instruct_72b_en lists params 72706203648.
     * By hand: 2 * 152064 * 8192 (embed + untied lm_head)
     *   + 80 * (2 * 8192^2 + 2 * 1024 * 8192   q, o, k, v weights
     *           + 8192 + 2 * 1024              q, k, v biases
     *           + 3 * 29568 * 8192             gate, up, down
     *           + 2 * 8192)                    two RMSNorms
     *   + 8192 (final norm).
     * Tensors: embed + 80 * 12 + norm + lm_head = 963. */
    {"qwen2.5-72b", 963, INT64_C(72706203648), 0},
    /* GPT-3 175B: Narayanan et al. 2021 ("Efficient Large-Scale Language
     * Model Training on GPU Clusters Using Megatron-LM", eq. 2) give
     * P = 12 l h^2 (1 + 13/(12h) + (V + s)/(12 l h))
     *   = 12 l h^2 + 13 l h + (V + s) h = 174,615,822,336
     * for l = 96, h = 12288, V = 51200, s = 2048.  The 13 l h covers the
     * per-layer biases and two LayerNorms; the formula leaves out the final
     * LayerNorm (weight + bias, 2h = 24,576), which Megatron-Core's
     * named_parameters() does include: 174,615,846,912.  Embeddings are
     * shared with the output layer (Megatron's default for GPT).
     * Tensors: 2 embeddings + 96 * 12 + final weight and bias = 1156. */
    {"gpt3-175b", 1156,
     12 * GPT3_L * GPT3_H * GPT3_H + 13 * GPT3_L * GPT3_H +
         (GPT3_V + GPT3_S) * GPT3_H + 2 * GPT3_H,
     0},
};

#define NEXPECTS ((int)(sizeof expects / sizeof expects[0]))

static int zoo_index[NEXPECTS];
static int nzoo;

/* ---- helpers --------------------------------------------------------------- */

static dbuf_tensors_t *
build_ok(const char *name)
{
  dbuf_tensors_t *t = NULL;
  dbuf_diag_t diag;
  dbuf_diag_clear(&diag);
  int rc = dbuf_model_build(name, &t, &diag);
  ck_assert_msg(rc == 0, "build %s: %s: %s", name, dbuf_err_name(rc), diag.msg);
  ck_assert_ptr_nonnull(t);
  return t;
}

static const char *
data_dir(void)
{
  const char *d = getenv("DBUF_TEST_DATA");
  return (d != NULL && d[0] != '\0') ? d : "tests/data";
}

/* Compare the list with a "NAME SHAPE" file, line by line. */
static void
compare_with_file(const dbuf_tensors_t *t, const char *path)
{
  char line[512], shape[256];
  int64_t lineno = 0;
  FILE *f = fopen(path, "r");
  ck_assert_msg(f != NULL, "cannot open %s (set DBUF_TEST_DATA)", path);
  while (fgets(line, sizeof line, f) != NULL) {
    size_t len = strlen(line);
    ck_assert_msg(len > 0 && line[len - 1] == '\n', "%s:%lld: line too long",
                  path, (long long)(lineno + 1));
    line[len - 1] = '\0';
    char *sp = strchr(line, ' ');
    ck_assert_msg(sp != NULL && strchr(sp + 1, ' ') == NULL,
                  "%s:%lld: not 'NAME SHAPE': %s", path,
                  (long long)(lineno + 1), line);
    *sp = '\0';
    ck_assert_msg(lineno < dbuf_tensors_count(t),
                  "%s:%lld: %s is past the %lld generated tensors", path,
                  (long long)(lineno + 1), line,
                  (long long)dbuf_tensors_count(t));
    ck_assert_int_eq(dbuf_tensors_shape_str(t, lineno, shape, sizeof shape), 0);
    ck_assert_msg(strcmp(dbuf_tensors_name(t, lineno), line) == 0 &&
                      strcmp(shape, sp + 1) == 0,
                  "%s:%lld: expected '%s %s', generated '%s %s'", path,
                  (long long)(lineno + 1), line, sp + 1,
                  dbuf_tensors_name(t, lineno), shape);
    lineno++;
  }
  ck_assert_msg(!ferror(f), "read error on %s", path);
  fclose(f);
  ck_assert_msg(lineno == dbuf_tensors_count(t),
                "%s: %lld lines, %lld generated tensors", path,
                (long long)lineno, (long long)dbuf_tensors_count(t));
}

/* Expect tensor id to be NAME with SHAPE. */
static void
expect_tensor(const dbuf_tensors_t *t, int64_t id, const char *name,
              const char *shape)
{
  char buf[256];
  ck_assert_msg(id >= 0 && id < dbuf_tensors_count(t), "no tensor %lld (%s)",
                (long long)id, name);
  ck_assert_str_eq(dbuf_tensors_name(t, id), name);
  ck_assert_int_eq(dbuf_tensors_shape_str(t, id, buf, sizeof buf), 0);
  ck_assert_str_eq(buf, shape);
}

/* ---- tests ------------------------------------------------------------------ */

/* Loop over the zoo: generated list == reference file, exactly. */
START_TEST(test_zoo_file)
{
  const expect_t *e = &expects[zoo_index[_i]];
  char path[1024];
  int w = snprintf(path, sizeof path, "%s/zoo/%s.shapes", data_dir(), e->name);
  ck_assert(w > 0 && (size_t)w < sizeof path);
  dbuf_tensors_t *t = build_ok(e->name);
  compare_with_file(t, path);
  dbuf_tensors_destroy(t);
}
END_TEST

/* Loop over every expected model: tensor count and element total. */
START_TEST(test_totals)
{
  const expect_t *e = &expects[_i];
  dbuf_tensors_t *t = build_ok(e->name);
  ck_assert_msg(dbuf_tensors_count(t) == e->tensors,
                "%s: %lld tensors, expected %lld", e->name,
                (long long)dbuf_tensors_count(t), (long long)e->tensors);
  ck_assert_msg(dbuf_tensors_total(t) == e->elements,
                "%s: %lld elements, expected %lld", e->name,
                (long long)dbuf_tensors_total(t), (long long)e->elements);
  dbuf_tensors_destroy(t);
}
END_TEST

/* Loop over every built-in model: builds, names unique and findable,
 * summary formats, and every model has an expectation above. */
START_TEST(test_each_model)
{
  const char *name = dbuf_model_name(_i);
  char sum[DBUF_MODEL_SUMMARY_LEN];
  int found = 0;

  ck_assert_ptr_nonnull(name);
  for (int k = 0; k < NEXPECTS; k++)
    found += strcmp(expects[k].name, name) == 0;
  ck_assert_msg(found == 1, "model %s has no expected total in the test", name);
  for (int j = 0; j < _i; j++)
    ck_assert_str_ne(dbuf_model_name(j), name);

  dbuf_tensors_t *t = build_ok(name);
  ck_assert_int_gt(dbuf_tensors_count(t), 0);
  for (int64_t id = 0; id < dbuf_tensors_count(t); id++) {
    int64_t got = -1;
    ck_assert_int_eq(dbuf_tensors_find(t, dbuf_tensors_name(t, id), &got), 0);
    ck_assert_msg(got == id, "%s: name %s maps to %lld, not %lld", name,
                  dbuf_tensors_name(t, id), (long long)got, (long long)id);
  }
  dbuf_tensors_destroy(t);

  ck_assert_int_eq(dbuf_model_summary(_i, sum, sizeof sum), 0);
  ck_assert_msg(strstr(sum, "hidden ") != NULL && strchr(sum, '\n') == NULL,
                "summary of %s: '%s'", name, sum);
}
END_TEST

START_TEST(test_names)
{
  ck_assert_int_eq(dbuf_models_count(), NEXPECTS);
  ck_assert_ptr_null(dbuf_model_name(-1));
  ck_assert_ptr_null(dbuf_model_name(dbuf_models_count()));
  ck_assert_ptr_null(dbuf_model_name(INT32_MIN));
  int def = 0;
  for (int i = 0; i < dbuf_models_count(); i++)
    def += strcmp(dbuf_model_name(i), DBUF_MODEL_DEFAULT) == 0;
  ck_assert_int_eq(def, 1);
}
END_TEST

START_TEST(test_not_found)
{
  dbuf_tensors_t *sentinel = (dbuf_tensors_t *)&sentinel, *t = sentinel;
  dbuf_diag_t diag;
  dbuf_diag_clear(&diag);
  ck_assert_int_eq(dbuf_model_build("llama-9", &t, &diag), DBUF_ENOTFOUND);
  ck_assert_ptr_eq(t, sentinel);
  ck_assert_int_eq(diag.code, DBUF_ENOTFOUND);
  ck_assert_msg(strstr(diag.msg, "llama-9") != NULL, "diag: %s", diag.msg);
  for (int i = 0; i < dbuf_models_count(); i++)
    ck_assert_msg(strstr(diag.msg, dbuf_model_name(i)) != NULL,
                  "diag does not list %s: %s", dbuf_model_name(i), diag.msg);
  /* exact match only: no prefixes, no case folding, no empty name */
  ck_assert_int_eq(dbuf_model_build("llama-3.2", &t, NULL), DBUF_ENOTFOUND);
  ck_assert_int_eq(dbuf_model_build("LLAMA-3.2-1B", &t, NULL), DBUF_ENOTFOUND);
  ck_assert_int_eq(dbuf_model_build("llama-3.2-1b ", &t, NULL), DBUF_ENOTFOUND);
  ck_assert_int_eq(dbuf_model_build("", &t, NULL), DBUF_ENOTFOUND);
  ck_assert_ptr_eq(t, sentinel);
}
END_TEST

START_TEST(test_invalid_args)
{
  dbuf_tensors_t *t = NULL;
  dbuf_diag_t diag;
  char buf[DBUF_MODEL_SUMMARY_LEN];

  dbuf_diag_clear(&diag);
  ck_assert_int_eq(dbuf_model_build(NULL, &t, &diag), DBUF_EINVAL);
  ck_assert_int_eq(diag.code, DBUF_EINVAL);
  ck_assert_int_eq(dbuf_model_build(DBUF_MODEL_DEFAULT, NULL, NULL), DBUF_EINVAL);
  ck_assert_ptr_null(t);

  ck_assert_int_eq(dbuf_model_summary(0, NULL, 10), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_model_summary(0, buf, 0), DBUF_EINVAL);
  buf[0] = 'x';
  ck_assert_int_eq(dbuf_model_summary(-1, buf, sizeof buf), DBUF_ERANGE);
  ck_assert_str_eq(buf, "");
  ck_assert_int_eq(dbuf_model_summary(dbuf_models_count(), buf, sizeof buf),
                   DBUF_ERANGE);
}
END_TEST

START_TEST(test_summary_text)
{
  char buf[DBUF_MODEL_SUMMARY_LEN], small[16];
  int def = -1, ds = -1;
  for (int i = 0; i < dbuf_models_count(); i++) {
    if (strcmp(dbuf_model_name(i), DBUF_MODEL_DEFAULT) == 0)
      def = i;
    if (strcmp(dbuf_model_name(i), "deepseek-v3") == 0)
      ds = i;
  }
  ck_assert_int_ge(def, 0);
  ck_assert_int_ge(ds, 0);
  ck_assert_int_eq(dbuf_model_summary(def, buf, sizeof buf), 0);
  ck_assert_str_eq(buf, "llama: hidden 2048, ffn 8192, 16 layers, 32 heads, "
                        "8 kv heads, head dim 64, vocab 128256, "
                        "tied embeddings, RMSNorm");
  ck_assert_int_eq(dbuf_model_summary(ds, buf, sizeof buf), 0);
  ck_assert_msg(strstr(buf, "256 experts + 1 shared, moe ffn 2048") != NULL &&
                    strstr(buf, "kv_lora_rank 512") != NULL,
                "deepseek-v3 summary: %s", buf);
  /* too small: truncated, NUL-terminated, DBUF_ENOBUFS */
  ck_assert_int_eq(dbuf_model_summary(def, small, sizeof small), DBUF_ENOBUFS);
  ck_assert_uint_eq(strlen(small), sizeof small - 1);
  ck_assert(strncmp(small, "llama: hidden 2048", sizeof small - 1) == 0);
}
END_TEST

/* Qwen2.5-72B (HF Qwen2): q/k/v biases right after their weights, untied. */
START_TEST(test_qwen_layout)
{
  dbuf_tensors_t *t = build_ok("qwen2.5-72b");
  static const char *const head[][2] = {
      {"model.embed_tokens.weight", "152064x8192"},
      {"model.layers.0.self_attn.q_proj.weight", "8192x8192"},
      {"model.layers.0.self_attn.q_proj.bias", "8192"},
      {"model.layers.0.self_attn.k_proj.weight", "1024x8192"},
      {"model.layers.0.self_attn.k_proj.bias", "1024"},
      {"model.layers.0.self_attn.v_proj.weight", "1024x8192"},
      {"model.layers.0.self_attn.v_proj.bias", "1024"},
      {"model.layers.0.self_attn.o_proj.weight", "8192x8192"},
      {"model.layers.0.mlp.gate_proj.weight", "29568x8192"},
      {"model.layers.0.mlp.up_proj.weight", "29568x8192"},
      {"model.layers.0.mlp.down_proj.weight", "8192x29568"},
      {"model.layers.0.input_layernorm.weight", "8192"},
      {"model.layers.0.post_attention_layernorm.weight", "8192"},
      {"model.layers.1.self_attn.q_proj.weight", "8192x8192"},
  };
  for (int64_t i = 0; i < (int64_t)(sizeof head / sizeof head[0]); i++)
    expect_tensor(t, i, head[i][0], head[i][1]);
  int64_t n = dbuf_tensors_count(t), id;
  expect_tensor(t, n - 3, "model.layers.79.post_attention_layernorm.weight",
                "8192");
  expect_tensor(t, n - 2, "model.norm.weight", "8192");
  expect_tensor(t, n - 1, "lm_head.weight", "152064x8192");
  ck_assert_int_eq(dbuf_tensors_find(t, "model.layers.0.self_attn.o_proj.bias",
                                     &id),
                   DBUF_ENOTFOUND);
  dbuf_tensors_destroy(t);
}
END_TEST

/* GPT-3 175B (Megatron-Core local spec): linear_proj is registered before
 * the fused linear_qkv; LayerNorms and linears have biases; the output
 * layer shares the word embeddings. */
START_TEST(test_gpt3_layout)
{
  dbuf_tensors_t *t = build_ok("gpt3-175b");
  static const char *const head[][2] = {
      {"embedding.word_embeddings.weight", "51200x12288"},
      {"embedding.position_embeddings.weight", "2048x12288"},
      {"decoder.layers.0.input_layernorm.weight", "12288"},
      {"decoder.layers.0.input_layernorm.bias", "12288"},
      {"decoder.layers.0.self_attention.linear_proj.weight", "12288x12288"},
      {"decoder.layers.0.self_attention.linear_proj.bias", "12288"},
      {"decoder.layers.0.self_attention.linear_qkv.weight", "36864x12288"},
      {"decoder.layers.0.self_attention.linear_qkv.bias", "36864"},
      {"decoder.layers.0.pre_mlp_layernorm.weight", "12288"},
      {"decoder.layers.0.pre_mlp_layernorm.bias", "12288"},
      {"decoder.layers.0.mlp.linear_fc1.weight", "49152x12288"},
      {"decoder.layers.0.mlp.linear_fc1.bias", "49152"},
      {"decoder.layers.0.mlp.linear_fc2.weight", "12288x49152"},
      {"decoder.layers.0.mlp.linear_fc2.bias", "12288"},
      {"decoder.layers.1.input_layernorm.weight", "12288"},
  };
  for (int64_t i = 0; i < (int64_t)(sizeof head / sizeof head[0]); i++)
    expect_tensor(t, i, head[i][0], head[i][1]);
  int64_t n = dbuf_tensors_count(t), id;
  expect_tensor(t, n - 3, "decoder.layers.95.mlp.linear_fc2.bias", "12288");
  expect_tensor(t, n - 2, "decoder.final_layernorm.weight", "12288");
  expect_tensor(t, n - 1, "decoder.final_layernorm.bias", "12288");
  ck_assert_int_eq(dbuf_tensors_find(t, "output_layer.weight", &id),
                   DBUF_ENOTFOUND);
  dbuf_tensors_destroy(t);
}
END_TEST

/* deepseek-v3 is built in ~15 ms here (45,395 tensors).  The bound is
 * generous so a loaded machine passes; a quadratic build (1e9 string
 * compares) takes seconds and fails. */
START_TEST(test_deepseek_speed)
{
  struct timespec a, b;
  dbuf_tensors_t *t;
  clock_gettime(CLOCK_MONOTONIC, &a);
  t = build_ok("deepseek-v3");
  clock_gettime(CLOCK_MONOTONIC, &b);
  double ms = (double)(b.tv_sec - a.tv_sec) * 1e3 +
              (double)(b.tv_nsec - a.tv_nsec) / 1e6;
  ck_assert_int_eq(dbuf_tensors_count(t), 45395);
  double scale = test_time_scale();
  ck_assert_msg(ms < 4000.0 * scale, "deepseek-v3 took %.1f ms (bound %.0f ms)", ms,
                4000.0 * scale);
  dbuf_tensors_destroy(t);
}
END_TEST

static Suite *
models_suite(void)
{
  Suite *s = suite_create("models");
  TCase *tc = tcase_create("models");

  nzoo = 0;
  for (int k = 0; k < NEXPECTS; k++) {
    if (expects[k].in_zoo)
      zoo_index[nzoo++] = k;
  }
  tcase_set_timeout(tc, 30);
  tcase_add_loop_test(tc, test_zoo_file, 0, nzoo);
  tcase_add_loop_test(tc, test_totals, 0, NEXPECTS);
  tcase_add_loop_test(tc, test_each_model, 0, dbuf_models_count());
  tcase_add_test(tc, test_names);
  tcase_add_test(tc, test_not_found);
  tcase_add_test(tc, test_invalid_args);
  tcase_add_test(tc, test_summary_text);
  tcase_add_test(tc, test_qwen_layout);
  tcase_add_test(tc, test_gpt3_layout);
  tcase_add_test(tc, test_deepseek_speed);
  suite_add_tcase(s, tc);
  return s;
}

int
main(void)
{
  SRunner *sr = srunner_create(models_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
