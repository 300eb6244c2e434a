/*
 * Sharding schemes side by side (dbuf/peers.h): a model small enough to
 * shard by hand, every scheme against an element-by-element simulation of
 * its rule on random inputs, and the errors.
 */
#include "dbuf/layout.h"
#include "dbuf/peers.h"
#include "dbuf/plan.h"
#include "dbuf/tensors.h"

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static int
scheme(const char *name)
{
  int i = -1;
  ck_assert_msg(dbuf_scheme_find(name, &i) == 0, "no scheme %s", name);
  return i;
}

static dbuf_tensors_t *
hand_model(void)
{
  /* tests/data/compare.shapes: a 6x4 (24), b 3x2 (6), c 5 (1-D), d 2x3 (6). */
  static const struct {
    const char *name;
    int ndim;
    int64_t dims[2];
  } s[] = {{"a", 2, {6, 4}}, {"b", 2, {3, 2}}, {"c", 1, {5}}, {"d", 2, {2, 3}}};
  dbuf_tensors_t *t;
  ck_assert_int_eq(dbuf_tensors_create(&t), 0);
  for (int i = 0; i < 4; i++)
    ck_assert_int_eq(dbuf_tensors_add(t, s[i].name, s[i].ndim, s[i].dims, NULL), 0);
  return t;
}

/*
 * W = 4 ranks, nodes of K = 2 (node boundary at rank 2), 41 elements,
 * elem_size 1 so bytes are elements.  Columns: buffer, padding, max rank,
 * min rank, rows cut, tensors split, crossing nodes.
 *
 * padded: chunk LCM(4, 2, 1, 3) = 12; a (>= chunk) at 0, then the
 *   fragments at the tail, by size then id: b at 24, d at 30 (multiple of
 *   3), c at 36, end 41 -> 48 = 4 segments of 12.  Boundaries 12 (a row
 *   start), 24, 36 (tensor starts): no row cut; a on ranks 0-1 (one node).
 * compact: the same bound, 41 -> 48, segments of 12; every tensor at a
 *   multiple of its row in id order: a 0, b 24, c 30, d 36 (35 is not a
 *   multiple of 3): the same boundaries and figures as padded.
 * unpadded: ideal cuts 10.25, 20.5, 30.75 -> 12 (a, nearer row boundary),
 *   20 (a), 31 (c, rows of 1): segments 12, 8, 11, 10; a on ranks 0-2 and
 *   c on 2-3 split; the node boundary 20 is inside a.
 * tensor: LPT a -> 0, b -> 1, d -> 2 (tie with c broken by size), c -> 3:
 *   24, 6, 6, 5.
 * fsdp2: ceil(d0 / 4) rows a rank: a 2 rows (8), b 1 (2), c 2 (2), d 1 (3):
 *   15 a rank, 60 in all; holders a 3, b 3, c 3, d 2: all split; a, b, c
 *   reach rank 2 (node 1), d does not.
 * fsdp1: 41 padded to 44, 11 a rank; boundaries 11 (a row 2, inside),
 *   22 (a row 5, inside), 33 (c, rows of 1): 2 rows cut; a (ranks 0-2) and
 *   c (30..35: ranks 2-3) split; the node boundary 22 is inside a only.
 * zero3: partitions a 6, b 2, c 2, d 2 (12 a rank, 48 in all, padding 0 +
 *   2 + 3 + 2); a's boundaries 6, 12, 18 on rows of 4: 6 and 18 cut rows 1
 *   and 4; b's 2, 4 on rows of 2: none; d's 2, 4 on rows of 3: rows 0, 1;
 *   every tensor has a holder at rank >= 2.
 */
static const struct {
  const char *scheme;
  int64_t v[7];
} hand_want[] = {
    {"padded", {48, 7, 12, 12, 0, 1, 0}},  {"compact", {48, 7, 12, 12, 0, 1, 0}},
    {"unpadded", {41, 0, 12, 8, 0, 2, 1}},
    {"tensor", {41, 0, 24, 5, 0, 0, 0}},   {"fsdp2", {60, 19, 15, 15, 0, 4, 3}},
    {"fsdp1", {44, 3, 11, 11, 2, 2, 1}},   {"zero3", {48, 7, 12, 12, 4, 4, 4}},
};

START_TEST(test_hand)
{
  dbuf_tensors_t *t = hand_model();
  int n = (int)(sizeof hand_want / sizeof hand_want[0]);
  ck_assert_int_ge(dbuf_scheme_count(), n);
  for (int k = 0; k < n; k++) {
    dbuf_shard_stats_t s;
    dbuf_diag_t d;
    int i = scheme(hand_want[k].scheme);
    ck_assert_msg(dbuf_scheme_measure(t, i, 4, 2, 1, &s, &d) == 0, "%s", d.msg);
    int64_t got[7] = {s.buffer_bytes,   s.padding_bytes, s.max_rank_bytes,
                      s.min_rank_bytes, s.rows_cut,      s.tensors_split,
                      s.tensors_crossing_nodes};
    for (int c = 0; c < 7; c++)
      ck_assert_msg(got[c] == hand_want[k].v[c], "%s column %d: %lld, want %lld",
                    hand_want[k].scheme, c, (long long)got[c],
                    (long long)hand_want[k].v[c]);
    /* bf16 doubles the sizes, not the counts; no nodes: -1. */
    ck_assert_int_eq(dbuf_scheme_measure(t, i, 4, 0, 2, &s, NULL), 0);
    ck_assert_int_eq(s.buffer_bytes, 2 * hand_want[k].v[0]);
    ck_assert_int_eq(s.padding_bytes, 2 * hand_want[k].v[1]);
    ck_assert_int_eq(s.max_rank_bytes, 2 * hand_want[k].v[2]);
    ck_assert_int_eq(s.min_rank_bytes, 2 * hand_want[k].v[3]);
    ck_assert_int_eq(s.rows_cut, hand_want[k].v[4]);
    ck_assert_int_eq(s.tensors_crossing_nodes, -1);
  }
  dbuf_tensors_destroy(t);
}
END_TEST

/*
 * Node-aware flat kinds (tests/data/compare-nodes.shapes, figures derived in
 * tests/cli/test-compare.sh): 1-D a 5, b 4, c 2, d 1, W = 4, K = 2.  Back
 * to back (padded without node size) b [5, 9) holds the node boundary 6: 1
 * crossing.  Node-aware padded and compact put b at 6 (a 0, d 5, c 10) and
 * unpadded moves the node cut to 5: 0 crossing; unpadded's segments are
 * 3, 2, 4, 3.
 */
START_TEST(test_hand_nodes)
{
  static const int64_t sizes[] = {5, 4, 2, 1};
  static const char *const names[] = {"a", "b", "c", "d"};
  dbuf_tensors_t *t;
  dbuf_layout_params_t p;
  dbuf_layout_t *l;
  dbuf_shard_stats_t s;
  ck_assert_int_eq(dbuf_tensors_create(&t), 0);
  for (int i = 0; i < 4; i++)
    ck_assert_int_eq(dbuf_tensors_add(t, names[i], 1, &sizes[i], NULL), 0);
  dbuf_layout_params_init(&p);
  p.nranks = 4;
  ck_assert_int_eq(dbuf_layout_build(t, &p, &l, NULL), 0);
  ck_assert_int_eq(dbuf_layout_measure(l, 2, 1, &s, NULL), 0);
  ck_assert_int_eq(s.tensors_crossing_nodes, 1);
  dbuf_layout_destroy(l);
  static const struct {
    const char *scheme;
    int64_t max_rank, min_rank, split, crossing;
  } want[] = {{"padded", 3, 3, 2, 0}, {"compact", 3, 3, 2, 0}, {"unpadded", 4, 2, 1, 0}};
  for (int k = 0; k < 3; k++) {
    ck_assert_int_eq(dbuf_scheme_measure(t, scheme(want[k].scheme), 4, 2, 1, &s, NULL), 0);
    ck_assert_int_eq(s.buffer_bytes, 12);
    ck_assert_int_eq(s.max_rank_bytes, want[k].max_rank);
    ck_assert_int_eq(s.min_rank_bytes, want[k].min_rank);
    ck_assert_int_eq(s.tensors_split, want[k].split);
    ck_assert_int_eq(s.tensors_crossing_nodes, want[k].crossing);
  }
  dbuf_tensors_destroy(t);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Simulation: the owner of every element, straight from each rule       */

/* Owner of element k of tensor id under a rule, or -1 for a layout. */
typedef struct {
  const char *name;
  const dbuf_tensors_t *t;
  const dbuf_layout_t *l; /* our kinds */
  const int64_t *flat;    /* fsdp1: offset of each tensor */
  int nranks;
} sim_t;

static int
owner(const sim_t *s, int64_t id, int64_t k)
{
  int64_t rows = dbuf_tensors_rows(s->t, id), re = dbuf_tensors_row_elems(s->t, id);
  int64_t numel = rows * re, W = s->nranks;
  if (s->l != NULL) {
    int r;
    ck_assert_int_eq(dbuf_layout_owner_of(s->l, dbuf_layout_offsets(s->l)[id] + k, &r), 0);
    return r;
  }
  if (strcmp(s->name, "fsdp2") == 0) /* rank r holds rows [r c, (r+1) c) */
    return (int)((k / re) / ((rows + W - 1) / W));
  if (strcmp(s->name, "zero3") == 0) /* rank r holds [r p, (r+1) p) */
    return (int)(k / ((numel + W - 1) / W));
  int64_t total = dbuf_tensors_total(s->t); /* fsdp1 */
  return (int)((s->flat[id] + k) / ((total + W - 1) / W));
}

static void
simulate(const sim_t *s, int K, int64_t want[3])
{
  int64_t n = dbuf_tensors_count(s->t);
  want[0] = want[1] = want[2] = 0; /* rows cut, split, crossing */
  for (int64_t id = 0; id < n; id++) {
    int64_t rows = dbuf_tensors_rows(s->t, id), re = dbuf_tensors_row_elems(s->t, id);
    int first = -1, multi = 0, nodes = 0;
    for (int64_t row = 0; row < rows; row++) {
      int row_first = owner(s, id, row * re), cut = 0;
      for (int64_t e = 0; e < re; e++) {
        int r = owner(s, id, row * re + e);
        cut |= r != row_first;
        if (first < 0)
          first = r;
        multi |= r != first;
        nodes |= r / K != first / K;
      }
      want[0] += cut;
    }
    want[1] += multi;
    want[2] += nodes;
  }
}

START_TEST(test_random_simulated)
{
  test_rng_state = 0x853c49e6748fea9bULL ^ (uint64_t)_i * 0x9e3779b97f4a7c15ULL;
  for (int iter = 0; iter < 120; iter++) {
    dbuf_tensors_t *t;
    ck_assert_int_eq(dbuf_tensors_create(&t), 0);
    int n = 1 + (int)(test_rng() % 8);
    for (int i = 0; i < n; i++) {
      int64_t dims[3] = {(int64_t)(test_rng() % 13), 1 + (int64_t)(test_rng() % 9),
                         1 + (int64_t)(test_rng() % 3)};
      int nd = 1 + (int)(test_rng() % 3);
      char name[16];
      snprintf(name, sizeof name, "r%d", i);
      ck_assert_int_eq(dbuf_tensors_add(t, name, nd, dims, NULL), 0);
    }
    int W = 1 + (int)(test_rng() % 9), K = 1 + (int)(test_rng() % 4);
    int64_t *flat = calloc((size_t)n, sizeof *flat);
    for (int i = 1; i < n; i++)
      flat[i] = flat[i - 1] + dbuf_tensors_numel(t, i - 1);
    for (int i = 0; i < dbuf_scheme_count(); i++) {
      sim_t s = {dbuf_scheme_name(i), t, NULL, flat, W};
      dbuf_layout_t *l = NULL;
      dbuf_layout_kind_t kind;
      if (dbuf_layout_kind_parse(s.name, &kind) == 0) {
        dbuf_layout_params_t p;
        dbuf_layout_params_init(&p);
        p.kind = kind;
        p.nranks = W;
        p.auto_owners = DBUF_OWNERS_NUMEL;
        p.node_size = kind == DBUF_LAYOUT_TENSOR ? 0 : K; /* as compare builds them */
        ck_assert_int_eq(dbuf_layout_build(t, &p, &l, NULL), 0);
        s.l = l;
      }
      dbuf_shard_stats_t st;
      dbuf_diag_t d;
      int64_t want[3];
      ck_assert_msg(dbuf_scheme_measure(t, i, W, K, 1, &st, &d) == 0, "%s", d.msg);
      simulate(&s, K, want);
      ck_assert_msg(st.rows_cut == want[0] && st.tensors_split == want[1] &&
                        st.tensors_crossing_nodes == want[2],
                    "iter %d %s W %d K %d: cut/split/cross %lld/%lld/%lld, simulated "
                    "%lld/%lld/%lld",
                    iter, s.name, W, K, (long long)st.rows_cut,
                    (long long)st.tensors_split, (long long)st.tensors_crossing_nodes,
                    (long long)want[0], (long long)want[1], (long long)want[2]);
      ck_assert_int_eq(st.padding_bytes, st.buffer_bytes - dbuf_tensors_total(t));
      ck_assert_int_le(st.min_rank_bytes, st.max_rank_bytes);
      dbuf_layout_destroy(l);
    }
    free(flat);
    dbuf_tensors_destroy(t);
  }
}
END_TEST

/*
 * dbuf_scheme_measure_plan on random models split into random units, some
 * tensors fp32 (4 bytes) and the rest bf16 (2): every summed figure equals
 * the sum of dbuf_scheme_measure over the buffers' tensor lists in their
 * element sizes, and the largest and smallest rank come from per-rank sums
 * computed here: the segments of the layout kinds' own layouts, or, for the
 * peers (every rank stores the same), each buffer's max_rank_bytes.
 */
START_TEST(test_plan_sums)
{
  test_rng_state = 0x2545f4914f6cdd1dULL ^ (uint64_t)_i * 0x9e3779b97f4a7c15ULL;
  for (int iter = 0; iter < 40; iter++) {
    dbuf_tensors_t *t;
    ck_assert_int_eq(dbuf_tensors_create(&t), 0);
    int n = 1 + (int)(test_rng() % 10), nunits = 1 + (int)(test_rng() % 3);
    const char *unit_of[10];
    static const char *const names[] = {"u0", "u1", "u2"};
    for (int i = 0; i < n; i++) {
      int64_t dims[2] = {(int64_t)(test_rng() % 13), 1 + (int64_t)(test_rng() % 9)};
      char name[16];
      snprintf(name, sizeof name, "r%d", i);
      ck_assert_int_eq(dbuf_tensors_add(t, name, 1 + (int)(test_rng() % 2), dims, NULL), 0);
      if (test_rng() % 3 == 0)
        dbuf_tensors_set_dtype(t, i, DBUF_DTYPE_F32);
      unit_of[i] = names[test_rng() % (uint64_t)nunits];
    }
    int W = 1 + (int)(test_rng() % 9), K = (int)(test_rng() % 4);
    dbuf_units_t *u;
    dbuf_plan_t *plan;
    dbuf_layout_params_t p;
    ck_assert_int_eq(dbuf_units_from_names(t, unit_of, &u, NULL), 0);
    dbuf_layout_params_init(&p);
    p.kind = DBUF_LAYOUT_UNPADDED;
    p.nranks = W;
    ck_assert_int_eq(dbuf_plan_build(t, u, DBUF_DTYPE_BF16, &p, 0, &plan, NULL), 0);
    for (int i = 0; i < dbuf_scheme_count(); i++) {
      dbuf_shard_stats_t st, want;
      dbuf_diag_t d;
      dbuf_layout_kind_t kind;
      int flat = dbuf_layout_kind_parse(dbuf_scheme_name(i), &kind) == 0;
      int64_t rank[9] = {0};
      memset(&want, 0, sizeof want);
      want.tensors_crossing_nodes = K > 0 ? 0 : -1;
      for (int64_t b = 0; b < dbuf_plan_nbuffers(plan); b++) {
        dbuf_plan_buffer_t buf;
        dbuf_shard_stats_t one;
        const dbuf_tensors_t *bt;
        ck_assert_int_eq(dbuf_plan_buffer(plan, b, &buf), 0);
        bt = dbuf_layout_tensors(buf.layout);
        ck_assert_int_eq(dbuf_scheme_measure(bt, i, W, K, buf.elem_size, &one, NULL), 0);
        want.buffer_bytes += one.buffer_bytes;
        want.padding_bytes += one.padding_bytes;
        want.rows_cut += one.rows_cut;
        want.tensors_split += one.tensors_split;
        if (K > 0)
          want.tensors_crossing_nodes += one.tensors_crossing_nodes;
        if (flat) {
          dbuf_layout_t *l;
          p.kind = kind;
          p.auto_owners = kind == DBUF_LAYOUT_TENSOR ? DBUF_OWNERS_NUMEL : 0;
          p.node_size = kind == DBUF_LAYOUT_TENSOR ? 0 : K;
          ck_assert_int_eq(dbuf_layout_build(bt, &p, &l, NULL), 0);
          for (int r = 0; r < W; r++)
            rank[r] += (dbuf_layout_range(l)[r + 1] - dbuf_layout_range(l)[r]) * buf.elem_size;
          dbuf_layout_destroy(l);
        } else {
          ck_assert_int_eq(one.max_rank_bytes, one.min_rank_bytes);
          for (int r = 0; r < W; r++)
            rank[r] += one.max_rank_bytes;
        }
      }
      want.max_rank_bytes = want.min_rank_bytes = rank[0];
      for (int r = 1; r < W; r++) {
        want.max_rank_bytes = rank[r] > want.max_rank_bytes ? rank[r] : want.max_rank_bytes;
        want.min_rank_bytes = rank[r] < want.min_rank_bytes ? rank[r] : want.min_rank_bytes;
      }
      ck_assert_msg(dbuf_scheme_measure_plan(plan, i, K, &st, &d) == 0, "%s", d.msg);
      ck_assert_msg(memcmp(&st, &want, sizeof st) == 0,
                    "iter %d %s W %d K %d: %lld %lld %lld %lld %lld %lld %lld, want %lld %lld "
                    "%lld %lld %lld %lld %lld",
                    iter, dbuf_scheme_name(i), W, K, (long long)st.buffer_bytes,
                    (long long)st.padding_bytes, (long long)st.max_rank_bytes,
                    (long long)st.min_rank_bytes, (long long)st.rows_cut,
                    (long long)st.tensors_split, (long long)st.tensors_crossing_nodes,
                    (long long)want.buffer_bytes, (long long)want.padding_bytes,
                    (long long)want.max_rank_bytes, (long long)want.min_rank_bytes,
                    (long long)want.rows_cut, (long long)want.tensors_split,
                    (long long)want.tensors_crossing_nodes);
    }
    dbuf_shard_stats_t st;
    ck_assert_int_eq(dbuf_scheme_measure_plan(plan, -1, K, &st, NULL), DBUF_EINVAL);
    ck_assert_int_eq(dbuf_scheme_measure_plan(plan, 0, -1, &st, NULL), DBUF_EINVAL);
    ck_assert_int_eq(dbuf_scheme_measure_plan(plan, 0, K, NULL, NULL), DBUF_EINVAL);
    ck_assert_int_eq(dbuf_scheme_measure_plan(NULL, 0, K, &st, NULL), DBUF_EINVAL);
    dbuf_plan_destroy(plan);
    dbuf_units_destroy(u);
    dbuf_tensors_destroy(t);
  }
}
END_TEST

START_TEST(test_errors)
{
  dbuf_tensors_t *t = hand_model();
  dbuf_shard_stats_t s;
  dbuf_diag_t d;
  int i;
  ck_assert_int_eq(dbuf_scheme_find("zero2", &i), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_scheme_find(NULL, &i), DBUF_EINVAL);
  ck_assert_ptr_null(dbuf_scheme_name(-1));
  ck_assert_ptr_null(dbuf_scheme_name(dbuf_scheme_count()));
  ck_assert_ptr_null(dbuf_scheme_describe(dbuf_scheme_count()));
  ck_assert_int_eq(dbuf_scheme_measure(NULL, 0, 4, 0, 1, &s, NULL), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_scheme_measure(t, 0, 4, 0, 1, NULL, NULL), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_scheme_measure(t, -1, 4, 0, 1, &s, NULL), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_scheme_measure(t, dbuf_scheme_count(), 4, 0, 1, &s, NULL),
                   DBUF_EINVAL);
  ck_assert_int_eq(dbuf_scheme_measure(t, 0, 0, 0, 1, &s, &d), DBUF_ENRANKS);
  ck_assert_str_eq(d.msg, "dp size must be positive, got 0");
  ck_assert_int_eq(dbuf_scheme_measure(t, 0, 4, 0, 0, &s, NULL), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_scheme_measure(t, 0, 4, -1, 1, &s, NULL), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_layout_measure(NULL, 0, 1, &s, NULL), DBUF_EINVAL);
  dbuf_tensors_destroy(t);

  /* big 3 x 2^61 on 2 ranks: fsdp2 stores 2 rows = 2^62 a rank, 2^63 in
   * all; zero3 stores 3 x 2^60 a rank, 3 x 2^61 in all (fits), which bf16
   * doubles past 2^63. */
  int64_t dims[2] = {3, INT64_C(1) << 61};
  ck_assert_int_eq(dbuf_tensors_create(&t), 0);
  ck_assert_int_eq(dbuf_tensors_add(t, "big", 2, dims, NULL), 0);
  ck_assert_int_eq(dbuf_scheme_measure(t, scheme("fsdp2"), 2, 0, 1, &s, &d),
                   DBUF_EOVERFLOW);
  ck_assert_str_eq(d.msg, "tensor big: the sharded size overflows 64 bits");
  ck_assert_int_eq(dbuf_scheme_measure(t, scheme("zero3"), 2, 0, 1, &s, &d), 0);
  ck_assert_int_eq(s.buffer_bytes, 3 * (INT64_C(1) << 61));
  ck_assert_int_eq(s.rows_cut, 1); /* the boundary 3 x 2^60 is inside row 1 */
  ck_assert_int_eq(dbuf_scheme_measure(t, scheme("zero3"), 2, 0, 2, &s, &d),
                   DBUF_EOVERFLOW);
  dbuf_tensors_destroy(t);
}
END_TEST

int
main(void)
{
  Suite *s = suite_create("peers");
  TCase *tc = tcase_create("hand");
  tcase_add_test(tc, test_hand);
  tcase_add_test(tc, test_hand_nodes);
  tcase_add_test(tc, test_errors);
  suite_add_tcase(s, tc);
  tc = tcase_create("simulated");
  tcase_set_timeout(tc, 60);
  tcase_add_loop_test(tc, test_random_simulated, 0, 4);
  tcase_add_loop_test(tc, test_plan_sums, 0, 4);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
