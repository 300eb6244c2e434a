/*
 * Node report tests.  Every expected value is derived by hand in the comment
 * next to it, from layouts small enough to draw.
 */
#include "dbuf/layout.h"
#include "dbuf/nodes.h"

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct {
  const char *name;
  int ndim;
  int64_t dims[2];
} shape_t;

static dbuf_layout_t *
make(const shape_t *s, int n, dbuf_layout_kind_t kind, int nranks)
{
  dbuf_tensors_t *t;
  dbuf_layout_t *l;
  dbuf_layout_params_t p;
  ck_assert_int_eq(dbuf_tensors_create(&t), 0);
  for (int i = 0; i < n; i++)
    ck_assert_int_eq(dbuf_tensors_add(t, s[i].name, s[i].ndim, s[i].dims, NULL), 0);
  dbuf_layout_params_init(&p);
  p.kind = kind;
  p.nranks = nranks;
  ck_assert_int_eq(dbuf_layout_build(t, &p, &l, NULL), 0);
  dbuf_tensors_destroy(t);
  return l;
}

/*
 * A 4x2 (8), B 6x1 (6), C 2x3 (6): 20 elements, unpadded over 4 ranks.
 * Ideal cuts 5, 10, 15.  5 lies in A between row boundaries 4 and 6, a tie:
 * the lower, 4.  10 is a row boundary of B.  15 lies in C between 14 and 17:
 * 14 is nearer.  range = [0, 4, 10, 14, 20].
 */
static const shape_t abc[] = {{"A", 2, {4, 2}}, {"B", 2, {6, 1}}, {"C", 2, {2, 3}}};

static dbuf_layout_t *
abc_layout(void)
{
  dbuf_layout_t *l = make(abc, 3, DBUF_LAYOUT_UNPADDED, 4);
  const int64_t want[] = {0, 4, 10, 14, 20};
  for (int r = 0; r <= 4; r++)
    ck_assert_int_eq(dbuf_layout_range(l)[r], want[r]);
  return l;
}

static void
assert_side(const dbuf_node_side_t *s, int node, int r0, int r1, int64_t eb, int64_t ne,
            int64_t fr, int64_t rows)
{
  ck_assert_int_eq(s->node, node);
  ck_assert_int_eq(s->first_rank, r0);
  ck_assert_int_eq(s->last_rank, r1);
  ck_assert_int_eq(s->elem_begin, eb);
  ck_assert_int_eq(s->nelems, ne);
  ck_assert_int_eq(s->first_row, fr);
  ck_assert_int_eq(s->rows, rows);
}

START_TEST(test_blocked_two_nodes)
{
  dbuf_layout_t *l = abc_layout();
  dbuf_nodes_t *n;
  dbuf_node_info_t in;
  dbuf_node_crossing_t c;
  /* K = 2: node0 = ranks 0,1 = [0, 10); node1 = ranks 2,3 = [10, 20). */
  ck_assert_int_eq(dbuf_nodes_create_blocked(l, 4, 2, 2, &n, NULL), 0);
  ck_assert_int_eq(dbuf_nodes_count(n), 2);
  ck_assert_int_eq(dbuf_nodes_info(n, 0, &in), 0);
  ck_assert_str_eq(in.name, "node0");
  ck_assert_int_eq(in.nranks, 2);
  ck_assert_int_eq(in.ranks[0], 0);
  ck_assert_int_eq(in.ranks[1], 1);
  ck_assert_int_eq(in.contiguous, 1);
  ck_assert_int_eq(in.first, 0);
  ck_assert_int_eq(in.end, 10);
  ck_assert_int_eq(in.elements, 10);
  ck_assert_int_eq(in.bytes, 20);
  ck_assert_int_eq(dbuf_nodes_info(n, 1, &in), 0);
  ck_assert_str_eq(in.name, "node1");
  ck_assert_int_eq(in.first, 10);
  ck_assert_int_eq(in.end, 20);
  ck_assert_int_eq(in.elements, 10);
  ck_assert_int_eq(dbuf_nodes_node_of(n, 3), 1);
  ck_assert_int_eq(dbuf_nodes_node_of(n, 4), -1);
  /* Only B [8, 14) crosses: rank 1 holds rows 0-1 (node0), rank 2 rows 2-5 (node1). */
  ck_assert_int_eq(dbuf_nodes_ncrossing(n), 1);
  ck_assert_int_eq(dbuf_nodes_crossing(n, 0, &c), 0);
  ck_assert_int_eq(c.tensor, 1);
  ck_assert_int_eq(c.nsides, 2);
  assert_side(&c.sides[0], 0, 1, 1, 0, 2, 0, 2);
  assert_side(&c.sides[1], 1, 2, 2, 2, 4, 2, 4);
  ck_assert_int_eq(dbuf_nodes_crossing(n, 1, &c), DBUF_ERANGE);
  dbuf_nodes_destroy(n);
  dbuf_layout_destroy(l);
}
END_TEST

START_TEST(test_interleaved_nodes)
{
  dbuf_layout_t *l = abc_layout();
  dbuf_nodes_t *n;
  dbuf_node_info_t in;
  dbuf_node_crossing_t c;
  const int node_of[] = {0, 1, 0, 1};
  const char *names[] = {"hostA", "hostB"};
  /* hostA = ranks 0,2 = [0,4) + [10,14): not contiguous, 8 elements. */
  ck_assert_int_eq(dbuf_nodes_create(l, 4, node_of, 2, names, 4, &n, NULL), 0);
  ck_assert_int_eq(dbuf_nodes_info(n, 0, &in), 0);
  ck_assert_str_eq(in.name, "hostA");
  ck_assert_int_eq(in.ranks[0], 0);
  ck_assert_int_eq(in.ranks[1], 2);
  ck_assert_int_eq(in.contiguous, 0);
  ck_assert_int_eq(in.first, 0);
  ck_assert_int_eq(in.end, 14);
  ck_assert_int_eq(in.elements, 8);
  ck_assert_int_eq(in.bytes, 32);
  /* hostB = ranks 1,3 = [4,10) + [14,20): 12 elements. */
  ck_assert_int_eq(dbuf_nodes_info(n, 1, &in), 0);
  ck_assert_int_eq(in.contiguous, 0);
  ck_assert_int_eq(in.elements, 12);
  /* A: rank 0 rows 0-1 (hostA), rank 1 rows 2-3 (hostB).
   * B: rank 1 rows 0-1 (hostB), rank 2 rows 2-5 (hostA).  C: rank 3 only. */
  ck_assert_int_eq(dbuf_nodes_ncrossing(n), 2);
  ck_assert_int_eq(dbuf_nodes_crossing(n, 0, &c), 0);
  ck_assert_int_eq(c.tensor, 0);
  assert_side(&c.sides[0], 0, 0, 0, 0, 4, 0, 2);
  assert_side(&c.sides[1], 1, 1, 1, 4, 4, 2, 2);
  ck_assert_int_eq(dbuf_nodes_crossing(n, 1, &c), 0);
  ck_assert_int_eq(c.tensor, 1);
  assert_side(&c.sides[0], 1, 1, 1, 0, 2, 0, 2);
  assert_side(&c.sides[1], 0, 2, 2, 2, 4, 2, 4);
  dbuf_nodes_destroy(n);
  dbuf_layout_destroy(l);
}
END_TEST

/* 2 ranks over the 4 segments: rank 0 = segments 0-1 = [0, 10), rank 1 = [10, 20). */
START_TEST(test_segments_per_rank)
{
  dbuf_layout_t *l = abc_layout();
  dbuf_nodes_t *n;
  dbuf_node_info_t in;
  dbuf_node_crossing_t c;
  const int node_of[] = {0, 1};
  ck_assert_int_eq(dbuf_nodes_create(l, 2, node_of, 2, NULL, 1, &n, NULL), 0);
  ck_assert_int_eq(dbuf_nodes_info(n, 1, &in), 0);
  ck_assert_int_eq(in.first, 10);
  ck_assert_int_eq(in.end, 20);
  ck_assert_int_eq(dbuf_nodes_ncrossing(n), 1);
  ck_assert_int_eq(dbuf_nodes_crossing(n, 0, &c), 0);
  ck_assert_int_eq(c.tensor, 1);
  assert_side(&c.sides[0], 0, 0, 0, 0, 2, 0, 2);
  assert_side(&c.sides[1], 1, 1, 1, 2, 4, 2, 4);
  dbuf_nodes_destroy(n);
  ck_assert_int_eq(dbuf_nodes_create(l, 3, node_of, 2, NULL, 1, &n, NULL), DBUF_ENRANKS);
  dbuf_layout_destroy(l);
}
END_TEST

/*
 * The seed example, padded over 5 ranks (tests/data/golden): offsets
 * P0 0, P1 12, P2 32, P3 28, P4 48; segments of 12.  K = 2: node0 = [0, 24),
 * node1 = [24, 48), node2 = rank 4 = [48, 60).  P1 [12, 28) has rows 0-2 on
 * rank 1 (node0) and row 3 on rank 2 (node1); P2 [32, 48) stays on node1.
 */
START_TEST(test_padded_seed)
{
  const shape_t s[] = {{"P0", 2, {2, 6}}, {"P1", 2, {4, 4}}, {"P2", 2, {4, 4}},
                       {"P3", 2, {1, 2}}, {"P4", 2, {1, 6}}};
  dbuf_layout_t *l = make(s, 5, DBUF_LAYOUT_PADDED, 5);
  dbuf_nodes_t *n;
  dbuf_node_info_t in;
  dbuf_node_crossing_t c;
  ck_assert_int_eq(dbuf_layout_offsets(l)[2], 32);
  ck_assert_int_eq(dbuf_nodes_create_blocked(l, 5, 2, 2, &n, NULL), 0);
  ck_assert_int_eq(dbuf_nodes_count(n), 3);
  ck_assert_int_eq(dbuf_nodes_info(n, 2, &in), 0);
  ck_assert_int_eq(in.nranks, 1);
  ck_assert_int_eq(in.first, 48);
  ck_assert_int_eq(in.end, 60);
  ck_assert_int_eq(in.elements, 12);
  ck_assert_int_eq(dbuf_nodes_ncrossing(n), 1);
  ck_assert_int_eq(dbuf_nodes_crossing(n, 0, &c), 0);
  ck_assert_int_eq(c.tensor, 1);
  assert_side(&c.sides[0], 0, 1, 1, 0, 12, 0, 3);
  assert_side(&c.sides[1], 1, 2, 2, 12, 4, 3, 1);
  dbuf_nodes_destroy(n);
  dbuf_layout_destroy(l);
}
END_TEST

/*
 * More ranks than rows: one tensor 2x1 unpadded over 4 ranks.  Cuts 0.5
 * (tie: 0), 1, 1.5 (tie: 1): range [0, 0, 1, 1, 2]; ranks 0 and 2 are empty.
 * One node per rank: the tensor crosses from node1 (row 0) to node3 (row 1).
 */
START_TEST(test_more_ranks_than_rows)
{
  const shape_t s[] = {{"v", 2, {2, 1}}};
  dbuf_layout_t *l = make(s, 1, DBUF_LAYOUT_UNPADDED, 4);
  dbuf_nodes_t *n;
  dbuf_node_info_t in;
  dbuf_node_crossing_t c;
  const int64_t want[] = {0, 0, 1, 1, 2};
  for (int r = 0; r <= 4; r++)
    ck_assert_int_eq(dbuf_layout_range(l)[r], want[r]);
  ck_assert_int_eq(dbuf_nodes_create_blocked(l, 4, 1, 8, &n, NULL), 0);
  ck_assert_int_eq(dbuf_nodes_info(n, 0, &in), 0);
  ck_assert_int_eq(in.elements, 0);
  ck_assert_int_eq(in.first, 0);
  ck_assert_int_eq(in.end, 0);
  ck_assert_int_eq(in.contiguous, 1);
  ck_assert_int_eq(dbuf_nodes_info(n, 2, &in), 0);
  ck_assert_int_eq(in.first, 1);
  ck_assert_int_eq(in.end, 1);
  ck_assert_int_eq(dbuf_nodes_ncrossing(n), 1);
  ck_assert_int_eq(dbuf_nodes_crossing(n, 0, &c), 0);
  ck_assert_int_eq(c.nsides, 2);
  assert_side(&c.sides[0], 1, 1, 1, 0, 1, 0, 1);
  assert_side(&c.sides[1], 3, 3, 3, 1, 1, 1, 1);
  dbuf_nodes_destroy(n);
  /* One node for all: nothing crosses, the node holds everything. */
  ck_assert_int_eq(dbuf_nodes_create_blocked(l, 4, 8, 8, &n, NULL), 0);
  ck_assert_int_eq(dbuf_nodes_count(n), 1);
  ck_assert_int_eq(dbuf_nodes_ncrossing(n), 0);
  ck_assert_int_eq(dbuf_nodes_info(n, 0, &in), 0);
  ck_assert_int_eq(in.end, 2);
  ck_assert_int_eq(in.bytes, 16);
  dbuf_nodes_destroy(n);
  dbuf_layout_destroy(l);
}
END_TEST

/* A tensor spread over three nodes, with an empty tensor in the middle. */
START_TEST(test_three_sides)
{
  /* W 6x1, E 0x3, X 2x1: unpadded over 3 ranks: cuts 8/3 -> 3 (nearest),
   * 16/3 -> 5: range [0, 3, 5, 8]; W has rows 0-2, 3-4, 5 on the 3 ranks. */
  const shape_t s[] = {{"W", 2, {6, 1}}, {"E", 2, {0, 3}}, {"X", 2, {2, 1}}};
  dbuf_layout_t *l = make(s, 3, DBUF_LAYOUT_UNPADDED, 3);
  dbuf_nodes_t *n;
  dbuf_node_crossing_t c;
  ck_assert_int_eq(dbuf_layout_range(l)[1], 3);
  ck_assert_int_eq(dbuf_layout_range(l)[2], 5);
  ck_assert_int_eq(dbuf_nodes_create_blocked(l, 3, 1, 1, &n, NULL), 0);
  ck_assert_int_eq(dbuf_nodes_ncrossing(n), 1);
  ck_assert_int_eq(dbuf_nodes_crossing(n, 0, &c), 0);
  ck_assert_int_eq(c.tensor, 0);
  ck_assert_int_eq(c.nsides, 3);
  assert_side(&c.sides[0], 0, 0, 0, 0, 3, 0, 3);
  assert_side(&c.sides[1], 1, 1, 1, 3, 2, 3, 2);
  assert_side(&c.sides[2], 2, 2, 2, 5, 1, 5, 1);
  dbuf_nodes_destroy(n);
  dbuf_layout_destroy(l);
}
END_TEST

START_TEST(test_invalid)
{
  dbuf_layout_t *l = abc_layout();
  dbuf_nodes_t *n = NULL;
  dbuf_diag_t d;
  const int ok[] = {0, 0, 1, 1}, bad[] = {0, 0, 2, 1}, hole[] = {0, 0, 2, 2};
  const char *names[] = {"a", ""};
  ck_assert_int_eq(dbuf_nodes_create(NULL, 4, ok, 2, NULL, 1, &n, &d), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_nodes_create(l, 4, NULL, 2, NULL, 1, &n, &d), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_nodes_create(l, 4, ok, 2, NULL, 1, NULL, &d), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_nodes_create(l, 4, ok, 0, NULL, 1, &n, &d), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_nodes_create(l, 4, ok, 2, NULL, 0, &n, &d), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_nodes_create(l, 0, ok, 2, NULL, 1, &n, &d), DBUF_ENRANKS);
  ck_assert_int_eq(dbuf_nodes_create(l, 4, bad, 2, NULL, 1, &n, &d), DBUF_EINVAL);
  ck_assert_str_eq(d.msg, "rank 2: node 2 out of range [0, 2)");
  ck_assert_int_eq(dbuf_nodes_create(l, 4, hole, 3, NULL, 1, &n, &d), DBUF_EINVAL);
  ck_assert_str_eq(d.msg, "node 1 (node1) has no rank");
  ck_assert_int_eq(dbuf_nodes_create(l, 4, ok, 2, names, 1, &n, &d), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_nodes_create(l, 4, ok, 2, NULL, INT64_MAX, &n, &d), DBUF_EOVERFLOW);
  ck_assert_int_eq(dbuf_nodes_create_blocked(l, 4, 0, 1, &n, &d), DBUF_EINVAL);
  ck_assert_ptr_null(n);
  ck_assert_int_eq(dbuf_nodes_count(NULL), 0);
  ck_assert_int_eq(dbuf_nodes_ncrossing(NULL), 0);
  ck_assert_int_eq(dbuf_nodes_info(NULL, 0, NULL), DBUF_EINVAL);
  dbuf_nodes_destroy(NULL);
  dbuf_layout_destroy(l);
}
END_TEST

/* Many ranks, one tensor each way: linear time, and sides add up. */
START_TEST(test_large)
{
  enum { NT = 2000, NR = 4096 };
  dbuf_tensors_t *t;
  dbuf_layout_t *l;
  dbuf_layout_params_t p;
  dbuf_nodes_t *n;
  ck_assert_int_eq(dbuf_tensors_create(&t), 0);
  for (int i = 0; i < NT; i++) {
    char name[16];
    int64_t dims[2] = {1 + i % 97, 1 + i % 5};
    snprintf(name, sizeof name, "t%d", i);
    ck_assert_int_eq(dbuf_tensors_add(t, name, 2, dims, NULL), 0);
  }
  dbuf_layout_params_init(&p);
  p.kind = DBUF_LAYOUT_UNPADDED;
  p.nranks = NR;
  ck_assert_int_eq(dbuf_layout_build(t, &p, &l, NULL), 0);
  ck_assert_int_eq(dbuf_nodes_create_blocked(l, NR, 7, 2, &n, NULL), 0);
  for (int64_t i = 0; i < dbuf_nodes_ncrossing(n); i++) {
    dbuf_node_crossing_t c;
    int64_t elems = 0;
    ck_assert_int_eq(dbuf_nodes_crossing(n, i, &c), 0);
    for (int64_t s = 0; s < c.nsides; s++) {
      ck_assert_int_eq(c.sides[s].elem_begin, elems);
      elems += c.sides[s].nelems;
      if (s > 0)
        ck_assert_int_ne(c.sides[s].node, c.sides[s - 1].node);
    }
    ck_assert_int_eq(elems, dbuf_tensors_numel(t, c.tensor));
  }
  int64_t total = 0;
  for (int i = 0; i < dbuf_nodes_count(n); i++) {
    dbuf_node_info_t in;
    ck_assert_int_eq(dbuf_nodes_info(n, i, &in), 0);
    total += in.elements;
  }
  ck_assert_int_eq(total, dbuf_layout_size(l));
  dbuf_nodes_destroy(n);
  dbuf_layout_destroy(l);
  dbuf_tensors_destroy(t);
}
END_TEST

/* Found by tests/fuzz: the rows of a crossing side ending near INT64_MAX
 * were rounded up with a signed overflow.  One tensor of R rows of 3
 * (R * 3 = INT64_MAX - 1) over 2 ranks, one node each: two sides whose rows
 * add up to R, the second ending at row R. */
START_TEST(test_side_near_int64_max)
{
  const int64_t rows = INT64_C(3074457345618258602);
  int64_t dims[2] = {rows, 3};
  dbuf_tensors_t *t;
  dbuf_layout_t *l;
  dbuf_layout_params_t p;
  dbuf_nodes_t *n;
  dbuf_node_crossing_t c;
  ck_assert_int_eq(dbuf_tensors_create(&t), 0);
  ck_assert_int_eq(dbuf_tensors_add(t, "big", 2, dims, NULL), 0);
  dbuf_layout_params_init(&p);
  p.kind = DBUF_LAYOUT_UNPADDED;
  p.nranks = 2;
  ck_assert_int_eq(dbuf_layout_build(t, &p, &l, NULL), 0);
  ck_assert_int_eq(dbuf_nodes_create_blocked(l, 2, 1, 1, &n, NULL), 0);
  ck_assert_int_eq(dbuf_nodes_ncrossing(n), 1);
  ck_assert_int_eq(dbuf_nodes_crossing(n, 0, &c), 0);
  ck_assert_int_eq(c.nsides, 2);
  ck_assert_int_eq(c.sides[0].first_row, 0);
  ck_assert_int_eq(c.sides[0].rows + c.sides[1].rows, rows);
  ck_assert_int_eq(c.sides[1].first_row + c.sides[1].rows, rows);
  dbuf_nodes_destroy(n);
  dbuf_layout_destroy(l);
  dbuf_tensors_destroy(t);
}
END_TEST

int
main(void)
{
  Suite *s = suite_create("nodes");
  TCase *tc = tcase_create("nodes");
  tcase_add_test(tc, test_blocked_two_nodes);
  tcase_add_test(tc, test_interleaved_nodes);
  tcase_add_test(tc, test_segments_per_rank);
  tcase_add_test(tc, test_padded_seed);
  tcase_add_test(tc, test_more_ranks_than_rows);
  tcase_add_test(tc, test_three_sides);
  tcase_add_test(tc, test_invalid);
  tcase_add_test(tc, test_large);
  tcase_add_test(tc, test_side_near_int64_max);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
