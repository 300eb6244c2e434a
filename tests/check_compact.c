/*
 * The compact layout and node-aware packing: hand-derived cases, properties
 * on random inputs against independent computations, and the model zoo
 * targets of issue 11 (the zoo table of the README is printed by
 * test_zoo_compact).
 */
#include "dbuf/layout.h"
#include "dbuf/shapes_io.h"
#include "dbuf/tensors.h"

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static dbuf_tensors_t *
make_tensors(int n, const int64_t (*shapes)[3])
{
  dbuf_tensors_t *t;
  ck_assert_int_eq(dbuf_tensors_create(&t), 0);
  for (int i = 0; i < n; i++) {
    int64_t dims[2] = {shapes[i][1], shapes[i][2]};
    char name[16];
    snprintf(name, sizeof name, "t%d", i);
    ck_assert_int_eq(dbuf_tensors_add(t, name, (int)shapes[i][0], dims, NULL), 0);
  }
  return t;
}

static dbuf_layout_t *
build(const dbuf_tensors_t *t, dbuf_layout_kind_t kind, int nranks,
      int64_t block, int64_t align, int node_size)
{
  dbuf_layout_params_t p;
  dbuf_layout_t *l = NULL;
  dbuf_diag_t d;
  dbuf_layout_params_init(&p);
  p.kind = kind;
  p.nranks = nranks;
  p.block_size = block;
  p.align_elems = align;
  p.node_size = node_size;
  ck_assert_msg(dbuf_layout_build(t, &p, &l, &d) == 0, "%s", d.msg);
  ck_assert_msg(dbuf_layout_validate(l, NULL, NULL, NULL, &d) == 0, "%s", d.msg);
  return l;
}

static void
expect_offsets(const dbuf_layout_t *l, int n, const int64_t *want)
{
  const int64_t *off = dbuf_layout_offsets(l);
  for (int i = 0; i < n; i++)
    ck_assert_msg(off[i] == want[i], "tensor %d at %lld, expected %lld", i,
                  (long long)off[i], (long long)want[i]);
}

static int64_t
gcd64(int64_t a, int64_t b)
{
  while (b) {
    int64_t r = a % b;
    a = b;
    b = r;
  }
  return a;
}

/* The lower bound ceil(logical / (chunk x dp)) x chunk x dp, computed here
 * from the shapes (chunk = LCM of block x row sizes). */
static int64_t
lower_bound(const dbuf_tensors_t *t, int64_t block, int nranks)
{
  int64_t chunk = 1, logical = 0;
  for (int64_t i = 0; i < dbuf_tensors_count(t); i++) {
    int64_t br = block * dbuf_tensors_row_elems(t, i);
    chunk = chunk / gcd64(chunk, br) * br;
    logical += dbuf_tensors_numel(t, i);
  }
  int64_t stripe = chunk * nranks;
  return (logical + stripe - 1) / stripe * stripe;
}

/* ------------------------------------------------------------------ */
/* Hand-derived cases                                                   */

/*
 * t0 [3,4] (12 elements, unit 4), t1 [1,6] (6, unit 6), t2 [2,4] (8, unit
 * 4), t3 [5] (5, unit 1).  Chunk lcm(4, 6, 1) = 12; logical 31; dp 4: the
 * stripe is 48, the bound 48, segments of 12.
 * Cursor 0: the lowest id whose unit divides 0 is t0 -> 0, cursor 12.
 * Cursor 12: t1 (6 | 12) -> 12, cursor 18.
 * Cursor 18: t2 (4 does not divide 18) waits; t3 (1 | 18) -> 18, cursor 23.
 * Cursor 23: only t2 is left -> 24 (gap 23, nothing fits), cursor 32.
 * Size 48; cuts 12, 24, 36 fall between tensors or in the tail.
 */
START_TEST(test_hand_order)
{
  static const int64_t sh[][3] = {{2, 3, 4}, {2, 1, 6}, {2, 2, 4}, {1, 5, 0}};
  dbuf_tensors_t *t = make_tensors(4, sh);
  dbuf_layout_t *l = build(t, DBUF_LAYOUT_COMPACT, 4, 1, 0, 0);
  static const int64_t want[] = {0, 12, 24, 18};
  expect_offsets(l, 4, want);
  ck_assert_int_eq(dbuf_layout_size(l), 48);
  ck_assert_int_eq(dbuf_layout_chunk_size(l), 12);
  ck_assert_int_eq(dbuf_layout_range(l)[1], 12);
  ck_assert_int_eq(dbuf_layout_kind(l), DBUF_LAYOUT_COMPACT);
  dbuf_layout_destroy(l);
  /* The padded layout of the same list is no smaller: every tensor is a
   * fragment (below the chunk) and lands after the others, aligned. */
  l = build(t, DBUF_LAYOUT_PADDED, 4, 1, 0, 0);
  ck_assert_int_ge(dbuf_layout_size(l), 48);
  dbuf_layout_destroy(l);
  dbuf_tensors_destroy(t);
}
END_TEST

/*
 * Gap filling: t0 [1,5] (5, unit 5), t1 [1,4] (4, unit 4), t2 [1,2] (2,
 * unit 2).  Chunk 20, dp 1: bound 20.
 * Cursor 0: t0 -> 0, cursor 5.  Neither 4 nor 2 divides 5: t1 (lowest id)
 * goes to 8 and the gap [5, 8) is filled with the largest tensor that fits
 * at a multiple of its unit: t2 at 6 (6 + 2 <= 8).  Cursor 12.  Size 20.
 */
START_TEST(test_hand_gap_fill)
{
  static const int64_t sh[][3] = {{2, 1, 5}, {2, 1, 4}, {2, 1, 2}};
  dbuf_tensors_t *t = make_tensors(3, sh);
  dbuf_layout_t *l = build(t, DBUF_LAYOUT_COMPACT, 1, 1, 0, 0);
  static const int64_t want[] = {0, 8, 6};
  expect_offsets(l, 3, want);
  ck_assert_int_eq(dbuf_layout_size(l), 20);
  dbuf_layout_destroy(l);
  dbuf_tensors_destroy(t);
}
END_TEST

/*
 * Alignment (--align-bytes): 4 elements.  t0 [1,3] (3, unit lcm(3, 4) =
 * 12), t1 [2] (2, unit 4).  Chunk 3 (the alignment does not change it).
 * Cursor 0: t0 -> 0, cursor 3; t1 -> 4.  End 6, logical 5, size 6.
 * Without the alignment t1 would follow at 3.
 */
START_TEST(test_hand_align)
{
  static const int64_t sh[][3] = {{2, 1, 3}, {1, 2, 0}};
  dbuf_tensors_t *t = make_tensors(2, sh);
  dbuf_layout_t *l = build(t, DBUF_LAYOUT_COMPACT, 1, 1, 4, 0);
  static const int64_t want[] = {0, 4}, plain[] = {0, 3};
  expect_offsets(l, 2, want);
  ck_assert_int_eq(dbuf_layout_chunk_size(l), 3);
  ck_assert_int_eq(dbuf_layout_size(l), 6);
  dbuf_layout_destroy(l);
  l = build(t, DBUF_LAYOUT_COMPACT, 1, 1, 0, 0);
  expect_offsets(l, 2, plain);
  dbuf_layout_destroy(l);
  dbuf_tensors_destroy(t);
}
END_TEST

/*
 * BlockAtomic: block 2.  t0 [4,3] (12, unit 6), t1 [2,1] (2, unit 2).
 * Chunk lcm(6, 2) = 6, dp 2: stripe 12, logical 14, bound 24, segments 12.
 * Cursor 0: t0 -> 0, cursor 12; t1 (2 | 12) -> 12.  The cut at 12 is
 * between them.
 */
START_TEST(test_hand_block)
{
  static const int64_t sh[][3] = {{2, 4, 3}, {2, 2, 1}};
  dbuf_tensors_t *t = make_tensors(2, sh);
  dbuf_layout_t *l = build(t, DBUF_LAYOUT_COMPACT, 2, 2, 0, 0);
  static const int64_t want[] = {0, 12};
  expect_offsets(l, 2, want);
  ck_assert_int_eq(dbuf_layout_size(l), 24);
  ck_assert_int_eq(dbuf_layout_range(l)[1], 12);
  dbuf_layout_destroy(l);
  dbuf_tensors_destroy(t);
}
END_TEST

/* Empty tensors sit at 0 (a multiple of every unit); no tensors at all. */
START_TEST(test_hand_empty)
{
  static const int64_t sh[][3] = {{2, 0, 7}, {1, 3, 0}, {2, 0, 5}};
  dbuf_tensors_t *t = make_tensors(3, sh);
  dbuf_layout_t *l = build(t, DBUF_LAYOUT_COMPACT, 3, 1, 0, 0);
  static const int64_t want[] = {0, 0, 0};
  expect_offsets(l, 3, want);
  ck_assert_int_eq(dbuf_layout_size(l), 35 * 3); /* chunk 35, 3 ranks */
  dbuf_layout_destroy(l);
  dbuf_tensors_destroy(t);
  ck_assert_int_eq(dbuf_tensors_create(&t), 0);
  l = build(t, DBUF_LAYOUT_COMPACT, 5, 1, 0, 0);
  ck_assert_int_eq(dbuf_layout_size(l), 0);
  dbuf_layout_destroy(l);
  dbuf_tensors_destroy(t);
}
END_TEST

/* Bad parameters and overflow name the problem. */
START_TEST(test_errors)
{
  static const int64_t sh[][3] = {{2, 3, 4}};
  dbuf_tensors_t *t = make_tensors(1, sh);
  dbuf_layout_params_t p;
  dbuf_layout_t *l = NULL;
  dbuf_diag_t d;
  dbuf_layout_params_init(&p);
  p.kind = DBUF_LAYOUT_COMPACT;
  p.align_elems = -1;
  ck_assert_int_eq(dbuf_layout_build(t, &p, &l, &d), DBUF_EINVAL);
  ck_assert_ptr_nonnull(strstr(d.msg, "alignment"));
  p.align_elems = 0;
  p.node_size = -2;
  ck_assert_int_eq(dbuf_layout_build(t, &p, &l, &d), DBUF_EINVAL);
  ck_assert_ptr_nonnull(strstr(d.msg, "node size"));
  p.node_size = 0;
  p.align_elems = INT64_MAX / 2; /* lcm(4, that) overflows */
  ck_assert_int_eq(dbuf_layout_build(t, &p, &l, &d), DBUF_EOVERFLOW);
  ck_assert_ptr_nonnull(strstr(d.msg, "t0"));
  p.align_elems = 0;
  p.block_size = 2;
  ck_assert_int_eq(dbuf_layout_build(t, &p, &l, &d), DBUF_EBLOCK);
  ck_assert_ptr_null(l);
  dbuf_tensors_destroy(t);
}
END_TEST

/* The padded checks apply to compact layouts read back: a layout is valid
 * or not the same way under both kinds. */
START_TEST(test_validate_compact)
{
  static const int64_t sh[][3] = {{2, 1, 4}};
  dbuf_tensors_t *t = make_tensors(1, sh);
  const int64_t off[] = {0}, range[] = {0, 4};
  dbuf_layout_t *l;
  dbuf_diag_t d;
  int64_t nv;
  ck_assert_int_eq(dbuf_layout_from_parts(t, DBUF_LAYOUT_COMPACT, 2, 1, 4, 8,
                                          off, range, NULL, &l, &d), 0);
  ck_assert_int_eq(dbuf_layout_validate(l, NULL, NULL, &nv, &d), 0);
  dbuf_layout_destroy(l);
  const int64_t range2[] = {0, 8};
  ck_assert_int_eq(dbuf_layout_from_parts(t, DBUF_LAYOUT_COMPACT, 2, 1, 4, 16,
                                          off, range2, NULL, &l, &d), 0);
  ck_assert_int_eq(dbuf_layout_validate(l, NULL, NULL, &nv, &d), 0);
  dbuf_layout_destroy(l);
  const int64_t range4[] = {0, 6}; /* unequal segments, not chunk multiples */
  ck_assert_int_eq(dbuf_layout_from_parts(t, DBUF_LAYOUT_COMPACT, 2, 1, 4, 16,
                                          off, range4, NULL, &l, &d), 0);
  ck_assert_int_eq(dbuf_layout_validate(l, NULL, NULL, &nv, &d), DBUF_ELAYOUT);
  ck_assert_ptr_nonnull(strstr(d.msg, "rank 0: segment of 6 elements is not a multiple of chunk 4"));
  dbuf_layout_destroy(l);
  ck_assert_int_eq(dbuf_layout_from_parts(t, DBUF_LAYOUT_PADDED, 2, 1, 4, 16,
                                          off, range2, NULL, &l, &d), 0);
  ck_assert_int_eq(dbuf_layout_validate(l, NULL, NULL, &nv, &d), 0);
  dbuf_layout_destroy(l);
  /* A misaligned compact offset is an ALIGN violation, as for padded. */
  static const int64_t sh2[][3] = {{1, 2, 0}, {2, 1, 4}};
  dbuf_tensors_t *t2 = make_tensors(2, sh2);
  const int64_t off2[] = {0, 2}, range3[] = {0, 4};
  ck_assert_int_eq(dbuf_layout_from_parts(t2, DBUF_LAYOUT_COMPACT, 2, 1, 4, 8,
                                          off2, range3, NULL, &l, &d), 0);
  ck_assert_int_eq(dbuf_layout_validate(l, NULL, NULL, &nv, &d), DBUF_ELAYOUT);
  ck_assert_ptr_nonnull(strstr(d.msg, "not a multiple"));
  dbuf_layout_destroy(l);
  dbuf_tensors_destroy(t2);
  dbuf_tensors_destroy(t);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Properties on random inputs                                          */

static uint64_t rng_state;

static uint64_t
rng(void)
{
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

/* pow2: row sizes powers of two (the units then divide one another). */
static dbuf_tensors_t *
random_tensors(int64_t block, int pow2, int maxn)
{
  static const int64_t rowsz[] = {1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 24, 36};
  static const int64_t rowp2[] = {1, 2, 4, 8, 16, 32};
  dbuf_tensors_t *t;
  ck_assert_int_eq(dbuf_tensors_create(&t), 0);
  int n = 1 + (int)(rng() % (uint64_t)maxn);
  for (int i = 0; i < n; i++) {
    int64_t dims[2];
    int nd = 1 + (int)(rng() % 2);
    dims[0] = block * (int64_t)(rng() % 9);
    dims[1] = pow2 ? rowp2[rng() % 6] : rowsz[rng() % 12];
    char name[16];
    snprintf(name, sizeof name, "r%d", i);
    ck_assert_int_eq(dbuf_tensors_add(t, name, nd, dims, NULL), 0);
  }
  return t;
}

/* Every element of every tensor lies in exactly one rank's segment, on
 * whole rows (checked through the pieces). */
static void
check_owned_once(const dbuf_layout_t *l)
{
  const dbuf_tensors_t *t = dbuf_layout_tensors(l);
  int64_t size = dbuf_layout_size(l);
  const int64_t *off = dbuf_layout_offsets(l);
  int64_t *seen = calloc((size_t)size + 1, sizeof *seen);
  for (int r = 0; r < dbuf_layout_nranks(l); r++) {
    int64_t np, s, e;
    ck_assert_int_eq(dbuf_layout_rank_pieces(l, r, NULL, 0, &np), 0);
    dbuf_piece_t *pc = calloc((size_t)np + 1, sizeof *pc);
    ck_assert_int_eq(dbuf_layout_rank_pieces(l, r, pc, np, &np), 0);
    ck_assert_int_eq(dbuf_layout_rank_range(l, r, &s, &e), 0);
    for (int64_t k = 0; k < np; k++) {
      ck_assert(pc[k].whole_rows);
      for (int64_t x = 0; x < pc[k].nelems; x++)
        seen[off[pc[k].tensor] + pc[k].elem_begin + x]++;
    }
    free(pc);
  }
  for (int64_t i = 0; i < dbuf_tensors_count(t); i++)
    for (int64_t x = 0; x < dbuf_tensors_numel(t, i); x++)
      ck_assert_int_eq(seen[off[i] + x], 1);
  free(seen);
}

START_TEST(test_random_compact)
{
  rng_state = 0xc0ffee1234567ULL + (uint64_t)_i * 0x9e3779b97f4a7c15ULL;
  for (int iter = 0; iter < 300; iter++) {
    int64_t block = 1 + (int64_t)(rng() % 3);
    int pow2 = (int)(rng() % 2);
    int nranks = 1 + (int)(rng() % 9);
    dbuf_tensors_t *t = random_tensors(block, pow2, 40);
    dbuf_layout_t *c = build(t, DBUF_LAYOUT_COMPACT, nranks, block, 0, 0);
    dbuf_layout_t *p = build(t, DBUF_LAYOUT_PADDED, nranks, block, 0, 0);
    int64_t bound = lower_bound(t, block, nranks);
    check_owned_once(c);
    ck_assert_int_ge(dbuf_layout_size(c), bound);
    ck_assert_int_le(dbuf_layout_size(c), dbuf_layout_size(p));
    /* Units dividing one another pack without gaps: at the bound. */
    if (pow2)
      ck_assert_msg(dbuf_layout_size(c) == bound,
                    "iter %d: size %lld, bound %lld", iter,
                    (long long)dbuf_layout_size(c), (long long)bound);
    /* With an alignment every offset is a multiple of it. */
    int64_t a = 1 + (int64_t)(rng() % 8);
    dbuf_layout_t *ca = build(t, DBUF_LAYOUT_COMPACT, nranks, block, a, 0);
    for (int64_t i = 0; i < dbuf_tensors_count(t); i++)
      ck_assert_int_eq(dbuf_layout_offsets(ca)[i] % a, 0);
    check_owned_once(ca);
    dbuf_layout_destroy(ca);
    dbuf_layout_destroy(c);
    dbuf_layout_destroy(p);
    dbuf_tensors_destroy(t);
  }
}
END_TEST

/* ------------------------------------------------------------------ */
/* The model zoo                                                        */

static const char *const zoo[] = {"deepseek-v3",  "llama-3.1-405b", "llama-3.1-70b",
                                  "llama-3.1-8b", "llama-3.2-1b",   "mixtral-8x7b",
                                  "tinyllama-1.1b"};
static const int zoo_dp[] = {1, 8, 64, 96, 1024, 8192};
#define NZOO ((int)(sizeof zoo / sizeof zoo[0]))
#define NDP ((int)(sizeof zoo_dp / sizeof zoo_dp[0]))

static dbuf_tensors_t *
load_zoo(const char *model)
{
  char path[4096];
  dbuf_tensors_t *t;
  dbuf_diag_t d;
  snprintf(path, sizeof path, "%s/zoo/%s.shapes", test_data_dir(), model);
  ck_assert_msg(dbuf_shapes_read(path, &t, NULL, &d) == 0, "%s", d.msg);
  return t;
}

/*
 * Issue 11 targets: padding never above padded's; DeepSeek-V3 at dp 8 under
 * 0.01%; the lower bound in at least 95% of the cases.  Prints the table of
 * the README.
 */
START_TEST(test_zoo_compact)
{
  int at_bound = 0, cases = 0;
  printf("| model | dp | padded padding | compact padding | lower bound |\n");
  for (int m = 0; m < NZOO; m++) {
    dbuf_tensors_t *t = load_zoo(zoo[m]);
    for (int k = 0; k < NDP; k++) {
      dbuf_layout_t *c = build(t, DBUF_LAYOUT_COMPACT, zoo_dp[k], 1, 0, 0);
      dbuf_layout_t *p = build(t, DBUF_LAYOUT_PADDED, zoo_dp[k], 1, 0, 0);
      int64_t bound = lower_bound(t, 1, zoo_dp[k]);
      int64_t logical = dbuf_tensors_total(t);
      int64_t cs = dbuf_layout_size(c), ps = dbuf_layout_size(p);
      ck_assert_int_le(cs, ps);
      ck_assert_int_ge(cs, bound);
      cases++;
      at_bound += cs == bound;
      printf("| %s | %d | %.4f%% | %.4f%% | %s |\n", zoo[m], zoo_dp[k],
             100.0 * (double)(ps - logical) / (double)ps,
             100.0 * (double)(cs - logical) / (double)cs,
             cs == bound ? "yes" : "no");
      if (m == 0 && zoo_dp[k] == 8)
        ck_assert_msg((cs - logical) * 10000 < cs,
                      "deepseek-v3 dp 8: padding %lld of %lld", (long long)(cs - logical),
                      (long long)cs);
      dbuf_layout_destroy(c);
      dbuf_layout_destroy(p);
    }
    dbuf_tensors_destroy(t);
  }
  printf("at the lower bound: %d of %d\n", at_bound, cases);
  ck_assert_int_ge(at_bound * 100, cases * 95);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Node-aware packing                                                   */

/*
 * Tensors crossing a node boundary of nodes of k consecutive ranks, and
 * their elements; *share gets the node span the builder promises to keep
 * tensors within (equal segments: k x segment; unpadded: k x size / dp).
 * Computed from the offsets and the rank range alone.
 */
static int64_t
crossing(const dbuf_layout_t *l, int k, int64_t *elems, int64_t *small, int64_t *share)
{
  const dbuf_tensors_t *t = dbuf_layout_tensors(l);
  const int64_t *off = dbuf_layout_offsets(l), *range = dbuf_layout_range(l);
  int nranks = dbuf_layout_nranks(l);
  int64_t count = 0, sz = dbuf_layout_size(l);
  *share = dbuf_layout_kind(l) == DBUF_LAYOUT_UNPADDED ? (int64_t)((__int128)sz * k / nranks)
                                                       : range[1] * k;
  *elems = *small = 0;
  for (int64_t i = 0; i < dbuf_tensors_count(t); i++) {
    int64_t n = dbuf_tensors_numel(t, i), cuts = 0;
    for (int r = k; r < nranks; r += k)
      cuts += range[r] > off[i] && range[r] < off[i] + n;
    if (cuts > 0) {
      count++;
      *elems += n;
      *small += n <= *share;
    }
  }
  return count;
}

/*
 * Hand case, unpadded, dp 4, node size 2: t0 [6,1], t1 [3,1], t2 [3,1]
 * (12 elements back to back at 0, 6, 9).  Ideal cuts 3, 6, 9; the node cut
 * (rank 2) is at 6, between t0 and t1: nothing moves.  With t0 [5,1] and
 * t1 [4,1] (at 5), t2 [3,1] (at 9): the node cut 6 is inside t1 [5, 9),
 * 1 from its start: it moves to 5; rank 1's cut 3 stays (<= 5), rank 3's
 * cut 9 stays.  Node share 6 >= 4.
 */
START_TEST(test_hand_node_unpadded)
{
  static const int64_t sh[][3] = {{2, 5, 1}, {2, 4, 1}, {2, 3, 1}};
  dbuf_tensors_t *t = make_tensors(3, sh);
  dbuf_layout_t *l = build(t, DBUF_LAYOUT_UNPADDED, 4, 1, 0, 0);
  ck_assert_int_eq(dbuf_layout_range(l)[2], 6);
  dbuf_layout_destroy(l);
  l = build(t, DBUF_LAYOUT_UNPADDED, 4, 1, 0, 2);
  static const int64_t want[] = {0, 3, 5, 9, 12};
  for (int r = 0; r <= 4; r++)
    ck_assert_int_eq(dbuf_layout_range(l)[r], want[r]);
  dbuf_layout_destroy(l);
  dbuf_tensors_destroy(t);
}
END_TEST

/*
 * Hand case, compact, dp 4, node size 2: t0 [5,1], t1 [4,1], t2 [2,1],
 * t3 [1,1] (all unit 1, chunk 1, logical 12, bound 12).  Segments of 3,
 * nodes [0, 6) and [6, 12).  First fit, largest first, each tensor at its
 * node's fill mark: t0 at 0 (node 0, 1 left), t1 at 6 (node 1, 2 left),
 * t2 (2) in the lowest node with 2 free, node 1: at 10; t3 (1) in node 0:
 * at 5.  Size 12, the lower bound (a per-node reserve for alignment, as
 * before, made it 16).
 */
START_TEST(test_hand_node_compact)
{
  static const int64_t sh[][3] = {{2, 5, 1}, {2, 4, 1}, {2, 2, 1}, {2, 1, 1}};
  dbuf_tensors_t *t = make_tensors(4, sh);
  dbuf_layout_t *l = build(t, DBUF_LAYOUT_COMPACT, 4, 1, 0, 2);
  static const int64_t want[] = {0, 6, 10, 5};
  expect_offsets(l, 4, want);
  ck_assert_int_eq(dbuf_layout_size(l), 12);
  dbuf_layout_destroy(l);
  dbuf_tensors_destroy(t);
}
END_TEST

/*
 * A node-aware packing whose buffer ends near INT64_MAX: t0 [8e18], t1 [4]
 * at dp 5, node size 2 (nodes of 2, 2 and 1 ranks).  The room of each node
 * was min(start + span, size), and start + span passes INT64_MAX for the
 * last node (a signed overflow: UBSan in the sanitizer build aborts here;
 * a wrapped sum left that node no room).  The layout is built and valid,
 * both tensors whole inside it.
 */
START_TEST(test_node_end_near_int64_max)
{
  static const int64_t sh[][3] = {{1, INT64_C(8000000000000000000), 0}, {1, 4, 0}};
  dbuf_tensors_t *t = make_tensors(2, sh);
  for (int kind = DBUF_LAYOUT_PADDED; kind <= DBUF_LAYOUT_COMPACT; kind += 3) {
    dbuf_layout_t *l = build(t, (dbuf_layout_kind_t)kind, 5, 1, 0, 2);
    const int64_t *off = dbuf_layout_offsets(l);
    ck_assert_int_eq(off[0], 0);
    ck_assert(off[1] >= INT64_C(8000000000000000000) &&
              off[1] + 4 <= dbuf_layout_size(l));
    dbuf_layout_destroy(l);
  }
  dbuf_tensors_destroy(t);
}
END_TEST

/*
 * Hand case, compact, every tensor start aligned to 2 elements, dp 4, node
 * size 2: 1-D t0 [5], t1 [3], t2 [3] (units 2, chunk 1, logical 11, bound
 * 12).  Segments of 3, nodes [0, 6) and [6, 12): t0 at 0 (fill 5, 1
 * free); t1 in node 1 at 6 (fill 9, 3 free); t2 (3): node 1 has 3 free but
 * its next multiple of 2 is 10 and 10 + 3 > 12, and no node has 3 + 2 - 1
 * = 4 free: 3 elements left over, the segment grows by ceil(3 / 4) = 1.
 * Segments of 4, nodes [0, 8) and [8, 16): t0 at 0 (fill 5, 3 free); t1
 * (3): node 0's next multiple of 2 is 6 and 6 + 3 > 8, so t1 goes to the
 * lowest node with 4 free, node 1: at 8 (fill 11); t2 the same way: node 1
 * at 12.  Size 16.
 */
START_TEST(test_hand_node_gap)
{
  static const int64_t sh[][3] = {{1, 5, 0}, {1, 3, 0}, {1, 3, 0}};
  dbuf_tensors_t *t = make_tensors(3, sh);
  dbuf_layout_t *l = build(t, DBUF_LAYOUT_COMPACT, 4, 1, 2, 2);
  static const int64_t want[] = {0, 8, 12};
  expect_offsets(l, 3, want);
  ck_assert_int_eq(dbuf_layout_size(l), 16);
  dbuf_layout_destroy(l);
  dbuf_tensors_destroy(t);
}
END_TEST

START_TEST(test_random_nodes)
{
  static const dbuf_layout_kind_t kinds[] = {DBUF_LAYOUT_PADDED, DBUF_LAYOUT_COMPACT,
                                             DBUF_LAYOUT_UNPADDED};
  rng_state = 0xabcdef987654321ULL + (uint64_t)_i * 0x9e3779b97f4a7c15ULL;
  for (int iter = 0; iter < 200; iter++) {
    int64_t block = 1 + (int64_t)(rng() % 2);
    int k = 2 + (int)(rng() % 3);
    int nranks = k + 1 + (int)(rng() % 10);
    dbuf_tensors_t *t = random_tensors(block, (int)(rng() % 2), 60);
    for (int j = 0; j < 3; j++) {
      dbuf_layout_t *l = build(t, kinds[j], nranks, block, 0, k);
      int64_t elems, small, share;
      check_owned_once(l);
      crossing(l, k, &elems, &small, &share);
      ck_assert_msg(small == 0, "iter %d kind %d: %lld tensors within a node span %lld cross",
                    iter, (int)kinds[j], (long long)small, (long long)share);
      dbuf_layout_destroy(l);
    }
    dbuf_tensors_destroy(t);
  }
}
END_TEST

/*
 * Few tensors, few ranks, any node size: the packer's retries (worst fit,
 * tensors put ahead of the large ones in node 0) must still give a valid
 * layout: a head once pushed the large tensors past the buffer's end (the
 * first case below, found by review), and random cases of 1 to 6 tensors
 * found 17 such layouts in 200,000 before the fix.
 */
START_TEST(test_random_nodes_small)
{
  static const dbuf_layout_kind_t kinds[] = {DBUF_LAYOUT_PADDED, DBUF_LAYOUT_COMPACT,
                                             DBUF_LAYOUT_UNPADDED};
  static const int64_t sh[][3] = {{1, 32, 0}, {2, 3, 4}, {1, 15, 0}, {1, 7, 0}, {2, 37, 6}};
  dbuf_tensors_t *t = make_tensors(5, sh);
  for (int j = 0; j < 2; j++) {
    dbuf_layout_t *l = build(t, kinds[j], 8, 1, 0, 4);
    check_owned_once(l);
    dbuf_layout_destroy(l);
  }
  dbuf_tensors_destroy(t);
  rng_state = 0x5eed5eed5eedULL;
  for (int iter = 0; iter < 20000; iter++) {
    int64_t block = 1 + (int64_t)(rng() % 2);
    int k = 1 + (int)(rng() % 4), nranks = 1 + (int)(rng() % 9);
    t = random_tensors(block, (int)(rng() % 2), 6);
    for (int j = 0; j < 3; j++) {
      dbuf_layout_t *l = build(t, kinds[j], nranks, block, 0, k);
      check_owned_once(l);
      dbuf_layout_destroy(l);
    }
    dbuf_tensors_destroy(t);
  }
}
END_TEST

/*
 * Issue 11 targets with node size 8 at dp 64 and 1024: no tensor within a
 * node's span crosses a node boundary, and the buffer grows by under 1%
 * (computed here from the sizes of the two layouts).  The cases below miss
 * 1% because of the model's shape, for every whole-tensor placement (the
 * README's --node-size section proves it by counting).  With u = 4 Mi
 * elements and 128 nodes, a node's span C is a multiple of 8 chunks and the
 * buffer is 128 C; each case gives, as fractions of u:
 *  - lb: the least C any whole-tensor placement can have (README proof);
 *  - reach: the least C of the packer's arrangements, which it must meet
 *    exactly: for 8b and mixtral the bound itself.  For 70b the packer puts
 *    the two 250.5u embeddings (larger than C) back to back, after at most
 *    4 tensors in node 0, so they touch 4 or 5 nodes; the F nodes left
 *    (124 or 123) hold two 56u MLP weights and one 16u q/o, one MLP and
 *    five q/o, or eight q/o (136u <= C < 144u), and 240 MLP and 160 q/o
 *    need 4m + q >= 1120 - 9F of the touched nodes' rests: 4 with F = 124
 *    (rest 4C - 501u >= 56u: C >= 139.25u), 13 with F = 123 (rest
 *    5C - 501u >= 3 MLP + 1 q/o = 184u: C >= 137u), so C >= 137u (README).
 * Both are rounded up to a multiple of 8 chunks here, the chunk (LCM of the
 * row sizes) computed from the shapes.
 */
static const struct {
  const char *model;
  int dp;
  int max_percent;
  int64_t lb_num, lb_den, reach_num, reach_den;
} zoo_node_misses[] = {
    {"llama-3.1-8b", 1024, 7, 16, 1, 16, 1},      /* +6.93% */
    {"llama-3.1-70b", 1024, 5, 136, 1, 137, 1},   /* +4.24%; the bound +3.45% */
    {"mixtral-8x7b", 1024, 13, 98, 1, 98, 1},     /* +12.63% */
};

static int
zoo_node_miss(const char *model, int dp)
{
  for (int i = 0; i < (int)(sizeof zoo_node_misses / sizeof zoo_node_misses[0]); i++)
    if (strcmp(zoo_node_misses[i].model, model) == 0 && zoo_node_misses[i].dp == dp)
      return i;
  return -1;
}

static int
zoo_node_allowed(const char *model, int dp, dbuf_layout_kind_t kind)
{
  int i = zoo_node_miss(model, dp);
  return kind == DBUF_LAYOUT_UNPADDED || i < 0 ? 1 : zoo_node_misses[i].max_percent;
}

/* 128 x (num / den x 4 Mi rounded up to a multiple of 8 chunks): the
 * buffer of a node span of that size, dp 1024, node size 8. */
static int64_t
zoo_node_buffer(const dbuf_tensors_t *t, int64_t num, int64_t den)
{
  int64_t chunk = 1;
  for (int64_t i = 0; i < dbuf_tensors_count(t); i++) {
    int64_t r = dbuf_tensors_row_elems(t, i), a = chunk, b = r;
    while (b != 0) {
      int64_t x = a % b;
      a = b;
      b = x;
    }
    chunk = chunk / a * r;
  }
  int64_t c = (num * 4194304 + den - 1) / den, step = 8 * chunk;
  return 128 * ((c + step - 1) / step * step);
}

START_TEST(test_zoo_nodes)
{
  static const dbuf_layout_kind_t kinds[] = {DBUF_LAYOUT_PADDED, DBUF_LAYOUT_COMPACT,
                                             DBUF_LAYOUT_UNPADDED};
  static const int dps[] = {64, 1024};
  printf("| model | dp | kind | crossing before | crossing after | padding before | "
         "padding after | growth |\n");
  for (int m = 0; m < NZOO; m++) {
    dbuf_tensors_t *t = load_zoo(zoo[m]);
    int64_t logical = dbuf_tensors_total(t);
    for (int d = 0; d < 2; d++) {
      for (int j = 0; j < 3; j++) {
        dbuf_layout_t *b = build(t, kinds[j], dps[d], 1, 0, 0);
        dbuf_layout_t *a = build(t, kinds[j], dps[d], 1, 0, 8);
        int64_t eb, ea, sb, sa, shb, sha;
        int64_t cb = crossing(b, 8, &eb, &sb, &shb), ca = crossing(a, 8, &ea, &sa, &sha);
        int64_t zb = dbuf_layout_size(b), za = dbuf_layout_size(a);
        int allowed = zoo_node_allowed(zoo[m], dps[d], kinds[j]);
        ck_assert_msg(sa == 0, "%s dp %d kind %d: %lld small tensors cross", zoo[m], dps[d],
                      (int)kinds[j], (long long)sa);
        int miss = zoo_node_miss(zoo[m], dps[d]);
        if (miss >= 0 && kinds[j] != DBUF_LAYOUT_UNPADDED) {
          int64_t lb = zoo_node_buffer(t, zoo_node_misses[miss].lb_num,
                                       zoo_node_misses[miss].lb_den);
          int64_t reach = zoo_node_buffer(t, zoo_node_misses[miss].reach_num,
                                          zoo_node_misses[miss].reach_den);
          ck_assert_msg(za >= lb, "%s %s: %lld elements, below the proven bound %lld", zoo[m],
                        dbuf_layout_kind_name(kinds[j]), (long long)za, (long long)lb);
          ck_assert_msg(za == reach, "%s %s: %lld elements, not the %lld derived", zoo[m],
                        dbuf_layout_kind_name(kinds[j]), (long long)za, (long long)reach);
        }
        /* growth (za - zb) / zb < allowed %, in exact integers */
        ck_assert_msg((__int128)(za - zb) * 100 < (__int128)zb * allowed,
                      "%s dp %d %s: the buffer grows from %lld to %lld elements (%.4f%%), "
                      "not under %d%%",
                      zoo[m], dps[d], dbuf_layout_kind_name(kinds[j]), (long long)zb,
                      (long long)za, 100.0 * (double)(za - zb) / (double)zb, allowed);
        printf("| %s | %d | %s | %lld (%lld small) | %lld | %.4f%% | %.4f%% | %+.4f%% |\n",
               zoo[m], dps[d], dbuf_layout_kind_name(kinds[j]), (long long)cb,
               (long long)sb, (long long)ca, 100.0 * (double)(zb - logical) / (double)zb,
               100.0 * (double)(za - logical) / (double)za,
               100.0 * (double)(za - zb) / (double)zb);
        dbuf_layout_destroy(a);
        dbuf_layout_destroy(b);
      }
    }
    dbuf_tensors_destroy(t);
  }
}
END_TEST

static Suite *
compact_suite(void)
{
  Suite *s = suite_create("compact");
  TCase *tc = tcase_create("hand");
  tcase_add_test(tc, test_hand_order);
  tcase_add_test(tc, test_hand_gap_fill);
  tcase_add_test(tc, test_hand_align);
  tcase_add_test(tc, test_hand_block);
  tcase_add_test(tc, test_hand_empty);
  tcase_add_test(tc, test_errors);
  tcase_add_test(tc, test_validate_compact);
  tcase_add_test(tc, test_hand_node_unpadded);
  tcase_add_test(tc, test_hand_node_compact);
  tcase_add_test(tc, test_hand_node_gap);
  tcase_add_test(tc, test_node_end_near_int64_max);
  suite_add_tcase(s, tc);
  tc = tcase_create("properties");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, test_random_compact, 0, 4);
  tcase_add_test(tc, test_random_nodes_small);
  tcase_add_loop_test(tc, test_random_nodes, 0, 4);
  suite_add_tcase(s, tc);
  tc = tcase_create("zoo");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_zoo_compact);
  tcase_add_test(tc, test_zoo_nodes);
  suite_add_tcase(s, tc);
  return s;
}

int
main(void)
{
  SRunner *sr = srunner_create(compact_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
