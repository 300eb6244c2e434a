/*
 * Comm layer tests, run under mpirun at several rank counts
 * (tests/mpi/run-check-comm.sh).  Check runs in CK_NOFORK mode (fork mode
 * crashes in MPI_Finalize), and no assertion ever stands between collectives
 * on a subset of ranks: each test computes, agrees on the outcome with
 * all_true(), and only then asserts, on every rank.
 */
#include "dbuf/comm.h"
#include "dbuf/layout.h"
#include "dbuf/pattern.h"
#include "dbuf/wire.h"

#include <check.h>
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;

/* 1 on every rank iff ok is non-zero on every rank. */
static int
all_true(int ok)
{
  int g = 0;
  MPI_Allreduce(&ok, &g, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return g;
}

static dbuf_layout_t *
test_layout(dbuf_layout_kind_t kind, int nseg)
{
  static const struct {
    const char *name;
    int nd;
    int64_t d[2];
  } s[] = {{"embed", 2, {8, 4}}, {"norm", 1, {5, 1}}, {"empty", 2, {0, 3}},
           {"w1", 2, {16, 2}},   {"w2", 2, {6, 6}},   {"bias", 1, {3, 1}}};
  dbuf_tensors_t *t = NULL;
  dbuf_layout_t *l = NULL;
  dbuf_layout_params_t p;
  dbuf_tensors_create(&t);
  for (size_t i = 0; i < sizeof s / sizeof s[0]; i++)
    dbuf_tensors_add(t, s[i].name, s[i].nd, s[i].d, NULL);
  dbuf_layout_params_init(&p);
  p.kind = kind;
  p.nranks = nseg;
  p.auto_owners = kind == DBUF_LAYOUT_TENSOR;
  int rc = dbuf_layout_build(t, &p, &l, NULL);
  dbuf_tensors_destroy(t);
  return rc == 0 ? l : NULL;
}

/* The layout with the cut of segment c moved down by one row (an older plan). */
static dbuf_layout_t *
stale_copy(const dbuf_layout_t *l, int c)
{
  int nr = dbuf_layout_nranks(l);
  int64_t *range = malloc((size_t)(nr + 1) * sizeof *range), t;
  memcpy(range, dbuf_layout_range(l), (size_t)(nr + 1) * sizeof *range);
  dbuf_layout_tensor_at(l, range[c] - 1, &t);
  range[c] -= t >= 0 ? dbuf_tensors_row_elems(dbuf_layout_tensors(l), t) : 1;
  dbuf_layout_t *s = NULL;
  dbuf_layout_from_parts(dbuf_layout_tensors(l), dbuf_layout_kind(l), nr,
                         dbuf_layout_block_size(l), dbuf_layout_chunk_size(l),
                         dbuf_layout_size(l), dbuf_layout_offsets(l), range,
                         dbuf_layout_owners(l), &s, NULL);
  free(range);
  return s;
}

START_TEST(test_context)
{
  dbuf_comm_t *c = NULL;
  int n = 0, ok = dbuf_comm_create(MPI_COMM_WORLD, &c) == 0;
  ok = ok && dbuf_comm_rank(c) == rank && dbuf_comm_size(c) == size;
  ok = ok && dbuf_comm_mpi(c) != MPI_COMM_WORLD && dbuf_comm_mpi(c) != MPI_COMM_NULL;
  ok = ok && dbuf_comm_set_chunk(c, 0) == DBUF_EINVAL &&
       dbuf_comm_set_chunk(c, (int64_t)INT_MAX + 1) == DBUF_EINVAL &&
       dbuf_comm_set_chunk(c, 5) == 0;
  ok = ok && dbuf_comm_count(INT_MAX, &n) == 0 && n == INT_MAX &&
       dbuf_comm_count((int64_t)INT_MAX + 1, &n) == DBUF_EOVERFLOW &&
       dbuf_comm_count(-1, &n) == DBUF_EOVERFLOW && dbuf_comm_count(1, NULL) == DBUF_EINVAL;
  ok = ok && dbuf_comm_rank(NULL) == -1 && dbuf_comm_size(NULL) == 0;
  dbuf_comm_destroy(c);
  dbuf_comm_destroy(NULL);
  ck_assert(all_true(ok));
}
END_TEST

START_TEST(test_agree)
{
  dbuf_comm_t *c;
  dbuf_comm_create(MPI_COMM_WORLD, &c);
  int g = 1, ok;
  ok = dbuf_comm_agree(c, -rank, &g) == 0 && g == -(size - 1);
  ok = ok && dbuf_comm_agree(c, 0, &g) == 0 && g == 0;
  /* The last rank fails with a message: everyone gets it, prefixed. */
  dbuf_diag_t d;
  dbuf_diag_clear(&d);
  int fail = rank == size - 1;
  if (fail)
    snprintf(d.msg, sizeof d.msg, "tensor x row 3: boom");
  int rc = dbuf_comm_agree_diag(c, fail ? DBUF_EIO : 0, &d);
  char want[64];
  snprintf(want, sizeof want, "rank %d: tensor x row 3: boom", size - 1);
  ok = ok && rc == DBUF_EIO && d.code == DBUF_EIO && strcmp(d.msg, want) == 0;
  /* The lowest failing rank's message wins, the lowest code is returned. */
  dbuf_diag_clear(&d);
  snprintf(d.msg, sizeof d.msg, "mine");
  rc = dbuf_comm_agree_diag(c, rank == 0 ? DBUF_EIO : DBUF_ENOMEM, &d);
  ok = ok && rc == DBUF_EIO && strcmp(d.msg, "rank 0: mine") == 0;
  ok = ok && dbuf_comm_agree_diag(c, 0, NULL) == 0;
  dbuf_comm_destroy(c);
  ck_assert(all_true(ok));
}
END_TEST

/* Every kind, byte chunks of 7 (hundreds of MPI_Bcast calls), checked
 * against the layout each rank builds for itself. */
START_TEST(test_bcast_layout)
{
  dbuf_comm_t *c;
  dbuf_comm_create(MPI_COMM_WORLD, &c);
  dbuf_comm_set_chunk(c, _i == 0 ? 7 : DBUF_COMM_CHUNK_BYTES);
  int ok = 1;
  for (int k = DBUF_LAYOUT_PADDED; k <= DBUF_LAYOUT_TENSOR; k++) {
    dbuf_layout_t *mine = test_layout((dbuf_layout_kind_t)k, size), *got = NULL;
    uint64_t dig = 0, want = 1;
    dbuf_diag_t d;
    int rc = dbuf_comm_bcast_layout(c, 0, NULL, rank == 0 ? mine : NULL, size, &got, &dig, &d);
    dbuf_wire_digest(mine, &want, NULL);
    ok = ok && rc == 0 && got != NULL && dig == want;
    uint64_t again = 0;
    ok = ok && dbuf_wire_digest(got, &again, NULL) == 0 && again == want;
    dbuf_layout_destroy(got);
    /* A segment count the caller did not expect is refused everywhere. */
    got = NULL;
    rc = dbuf_comm_bcast_layout(c, 0, NULL, rank == 0 ? mine : NULL, size + 1, &got, NULL, &d);
    ok = ok && rc == DBUF_ENRANKS && got == NULL && strncmp(d.msg, "rank 0: ", 8) == 0;
    dbuf_layout_destroy(mine);
  }
  dbuf_comm_destroy(c);
  ck_assert(all_true(ok));
}
END_TEST

/* Rank 0 could not read its input: everyone returns its code and message. */
START_TEST(test_bcast_root_failure)
{
  dbuf_comm_t *c;
  dbuf_comm_create(MPI_COMM_WORLD, &c);
  dbuf_layout_t *got = NULL;
  dbuf_diag_t d;
  dbuf_diag_clear(&d);
  int rc = dbuf_comm_bcast_layout(c, rank == 0 ? DBUF_EPARSE : 0,
                                  rank == 0 ? "x.shapes:3: bad shape 'q'" : "ignored", NULL,
                                  size, &got, NULL, &d);
  int ok = rc == DBUF_EPARSE && got == NULL && d.code == DBUF_EPARSE &&
           strcmp(d.msg, "x.shapes:3: bad shape 'q'") == 0;
  /* A root without a layout and without an error is an error too. */
  rc = dbuf_comm_bcast_layout(c, 0, NULL, NULL, 0, &got, NULL, &d);
  ok = ok && rc == DBUF_EINVAL && got == NULL;
  dbuf_comm_destroy(c);
  ck_assert(all_true(ok));
}
END_TEST

START_TEST(test_nodes_and_inputs)
{
  dbuf_comm_t *c;
  dbuf_comm_nodemap_t m;
  dbuf_diag_t d;
  dbuf_comm_create(MPI_COMM_WORLD, &c);
  int ok = dbuf_comm_nodes(c, &m, &d) == 0;
  /* One machine: one node, all ranks on it, local index = rank. */
  ok = ok && m.nranks == size && m.nnodes == 1 && m.local_size == size &&
       m.local_index == rank && strcmp(m.node_name[0], m.host[rank]) == 0;
  for (int r = 0; ok && r < size; r++)
    ok = m.node_of_rank[r] == 0;
  dbuf_comm_nodemap_free(&m);
  dbuf_comm_nodemap_free(NULL);
  ok = ok && dbuf_comm_check_inputs(c, 42, 1, &d) == 0;
  int rc = dbuf_comm_check_inputs(c, rank == size - 1 && size > 1 ? 43 : 42, 1, &d);
  if (size > 1) {
    char want[32];
    snprintf(want, sizeof want, " rank %d (", size - 1);
    ok = ok && rc == DBUF_EMISMATCH && strstr(d.msg, "input differs from rank 0's") &&
         strstr(d.msg, want);
  } else {
    ok = ok && rc == 0;
  }
  rc = dbuf_comm_check_inputs(c, 42, rank == 0, &d);
  ok = ok && (size == 1 ? rc == 0 : rc == DBUF_EMISMATCH && strstr(d.msg, "cannot read it"));
  dbuf_comm_destroy(c);
  ck_assert(all_true(ok));
}
END_TEST

START_TEST(test_gather)
{
  dbuf_comm_t *c;
  dbuf_comm_create(MPI_COMM_WORLD, &c);
  struct {
    int r;
    char s[20];
  } me = {rank, "x"}, *all = calloc((size_t)size, sizeof *all);
  snprintf(me.s, sizeof me.s, "rank-%d", rank);
  int ok = dbuf_comm_gather(c, &me, sizeof me, all) == 0;
  for (int r = 0; ok && rank == 0 && r < size; r++) {
    char want[20];
    snprintf(want, sizeof want, "rank-%d", r);
    ok = all[r].r == r && strcmp(all[r].s, want) == 0;
  }
  ok = ok && dbuf_comm_gather(c, &me, 0, all) == DBUF_EINVAL;
  free(all);
  dbuf_comm_destroy(c);
  ck_assert(all_true(ok));
}
END_TEST

/* Structure: a good layout passes in every kind, also with 2 segments per rank. */
START_TEST(test_structure_ok)
{
  dbuf_comm_t *c;
  dbuf_comm_create(MPI_COMM_WORLD, &c);
  int ok = 1;
  for (int k = DBUF_LAYOUT_PADDED; k <= DBUF_LAYOUT_TENSOR; k++) {
    for (int per = 1; per <= 2; per++) {
      dbuf_layout_t *l = test_layout((dbuf_layout_kind_t)k, size * per);
      dbuf_verdict_t v;
      const int64_t *range = dbuf_layout_range(l);
      int rc = dbuf_comm_verify_structure(c, l, 0, range[rank * per], range[(rank + 1) * per], &v);
      ok = ok && rc == 0 && v.code == 0 && v.local_ok && v.problems == 0 && v.msg[0] == 0;
      dbuf_layout_destroy(l);
    }
  }
  dbuf_comm_destroy(c);
  ck_assert(all_true(ok));
}
END_TEST

/* The last rank starts one element late: named with its tensor and row. */
START_TEST(test_structure_shift)
{
  dbuf_comm_t *c;
  dbuf_comm_create(MPI_COMM_WORLD, &c);
  dbuf_layout_t *l = test_layout(DBUF_LAYOUT_UNPADDED, size);
  dbuf_verdict_t v;
  int64_t s = dbuf_layout_range(l)[rank], e = dbuf_layout_range(l)[rank + 1];
  int bad = size - 1;
  /* Move the start of the last non-empty segment. */
  if (rank == bad)
    s += 1;
  int rc = dbuf_comm_verify_structure(c, l, 0, s, e, &v);
  char want[32];
  snprintf(want, sizeof want, "rank %d: ", bad);
  int ok = rc == DBUF_EVERIFY && v.code == DBUF_EVERIFY && v.rank == bad && v.tensor >= 0 &&
           v.row >= 0 && strncmp(v.msg, want, strlen(want)) == 0 && strstr(v.msg, " row ") &&
           v.problems >= 2 && v.local_ok == (rank != bad);
  if (!ok)
    fprintf(stderr, "rank %d: rc %d verdict '%s' (rank %d tensor %lld row %lld, %lld problems)\n",
            rank, rc, v.msg, v.rank, (long long)v.tensor, (long long)v.row,
            (long long)v.problems);
  dbuf_layout_destroy(l);
  dbuf_comm_destroy(c);
  ck_assert(all_true(ok));
}
END_TEST

/* A rank with a stale plan: named by the layout agreement. */
START_TEST(test_structure_stale)
{
  dbuf_comm_t *c;
  dbuf_comm_create(MPI_COMM_WORLD, &c);
  dbuf_layout_t *l = test_layout(DBUF_LAYOUT_UNPADDED, size), *use = l;
  /* Loop 0: rank 1 is stale, judged against rank 0's layout; loop 1: rank 0
   * is stale, judged against the broadcast plan's digest. */
  int bad = size > 1 ? (_i == 0 ? 1 : 0) : -1;
  if (rank == bad)
    use = stale_copy(l, bad > 0 ? bad : 1);
  dbuf_verdict_t v;
  int64_t s = dbuf_layout_range(use)[rank], e = dbuf_layout_range(use)[rank + 1];
  uint64_t plan = 0;
  dbuf_wire_digest(l, &plan, NULL);
  int rc = dbuf_comm_verify_structure(c, use, _i == 0 ? 0 : plan, s, e, &v);
  int ok;
  if (bad < 0) {
    ok = rc == 0;
  } else {
    ok = rc == DBUF_EVERIFY && v.rank == bad && strstr(v.msg, "stale layout") &&
         strstr(v.msg, "segment 1 starts at") && v.tensor >= 0 && v.row >= 0 &&
         (rank != bad || !v.local_ok);
    if (!ok)
      fprintf(stderr, "rank %d: rc %d verdict '%s'\n", rank, rc, v.msg);
  }
  if (use != l)
    dbuf_layout_destroy(use);
  dbuf_layout_destroy(l);
  dbuf_comm_destroy(c);
  ck_assert(all_true(ok));
}
END_TEST

/* Data: a good fill passes; one corrupted element is named. */
START_TEST(test_data)
{
  dbuf_comm_t *c;
  dbuf_comm_create(MPI_COMM_WORLD, &c);
  dbuf_layout_t *l = test_layout((dbuf_layout_kind_t)(DBUF_LAYOUT_PADDED + _i), size);
  int64_t s = dbuf_layout_range(l)[rank], e = dbuf_layout_range(l)[rank + 1];
  uint16_t *seg = calloc((size_t)(e - s) + 1, sizeof *seg);
  dbuf_verdict_t v;
  int ok = dbuf_pattern_fill(l, s, e, seg, 2, NULL, NULL) == 0;
  int rc = dbuf_comm_verify_data(c, l, s, e, seg, 2, 4, &v);
  ok = ok && rc == 0 && v.local_ok && v.problems == 0;
  /* The last rank with data flips one element of its first tensor row. */
  int bad = -1;
  for (int r = 0; r < size; r++)
    if (dbuf_layout_range(l)[r + 1] > dbuf_layout_range(l)[r])
      bad = r;
  int64_t t = -1;
  if (rank == bad) {
    for (int64_t x = s; x < e && t < 0; x++) {
      dbuf_layout_tensor_at(l, x, &t);
      if (t >= 0)
        seg[x - s] ^= 0x0100;
    }
  }
  rc = dbuf_comm_verify_data(c, l, s, e, seg, 2, 4, &v);
  char want[32];
  snprintf(want, sizeof want, "rank %d: tensor ", bad);
  ok = ok && rc == DBUF_EVERIFY && v.rank == bad && v.tensor >= 0 &&
       strncmp(v.msg, want, strlen(want)) == 0 && strstr(v.msg, " row ") &&
       v.local_ok == (rank != bad);
  if (!ok)
    fprintf(stderr, "rank %d: rc %d verdict '%s'\n", rank, rc, v.msg);
  /* Bad arguments are agreed. */
  rc = dbuf_comm_verify_data(c, l, s, e, seg, 3, 4, &v);
  ok = ok && rc == DBUF_EINVAL;
  free(seg);
  dbuf_layout_destroy(l);
  dbuf_comm_destroy(c);
  ck_assert(all_true(ok));
}
END_TEST

/* A NULL out on one rank fails every rank: no rank is left in MPI_Comm_dup. */
START_TEST(test_create_agreed)
{
  dbuf_comm_t *c = NULL;
  int bad = size - 1;
  int rc = dbuf_comm_create(MPI_COMM_WORLD, rank == bad ? NULL : &c);
  int ok = rc == DBUF_EINVAL && c == NULL;
  if (!ok)
    fprintf(stderr, "rank %d: create with a NULL out on rank %d: rc %d\n", rank, bad, rc);
  dbuf_comm_destroy(c);
  ck_assert(all_true(ok));
}
END_TEST

/* A NULL out-pointer on the last rank fails every rank, none waits. */
START_TEST(test_null_outputs_agreed)
{
  dbuf_comm_t *c;
  dbuf_comm_create(MPI_COMM_WORLD, &c);
  int last = rank == size - 1, g = 1;
  int rc = dbuf_comm_agree(c, 0, last ? NULL : &g);
  int ok = rc == DBUF_EINVAL;
  dbuf_comm_nodemap_t m;
  dbuf_diag_t d;
  dbuf_diag_clear(&d);
  rc = dbuf_comm_nodes(c, last ? NULL : &m, &d);
  ok = ok && rc == DBUF_EINVAL && strstr(d.msg, "node discovery") != NULL;
  dbuf_layout_t *l = test_layout(DBUF_LAYOUT_PADDED, size);
  int64_t s = dbuf_layout_range(l)[rank], e = dbuf_layout_range(l)[rank + 1];
  dbuf_verdict_t v;
  rc = dbuf_comm_verify_structure(c, l, 0, s, e, last ? NULL : &v);
  ok = ok && rc == DBUF_EINVAL;
  uint16_t *seg = calloc((size_t)(e - s) + 1, sizeof *seg);
  rc = dbuf_comm_verify_data(c, l, s, e, seg, 2, 4, last ? NULL : &v);
  ok = ok && rc == DBUF_EINVAL;
  if (!ok)
    fprintf(stderr, "rank %d: NULL outputs on rank %d: last rc %d\n", rank, size - 1, rc);
  /* Still in step afterwards. */
  ok = ok && dbuf_comm_agree(c, -rank, &g) == 0 && g == -(size - 1);
  free(seg);
  dbuf_layout_destroy(l);
  dbuf_comm_destroy(c);
  ck_assert(all_true(ok));
}
END_TEST

/* Gather: rank 0's own check is agreed; rec_bytes must match. */
START_TEST(test_gather_agreed)
{
  dbuf_comm_t *c;
  dbuf_comm_create(MPI_COMM_WORLD, &c);
  int64_t me[2] = {rank, 7}, *all = calloc((size_t)size, sizeof me);
  int rc = dbuf_comm_gather(c, me, sizeof me, rank == 0 ? NULL : all);
  int ok = rc == DBUF_EINVAL;
  if (!ok)
    fprintf(stderr, "rank %d: gather with rank 0's all NULL: rc %d\n", rank, rc);
  rc = dbuf_comm_gather(c, rank == size - 1 ? NULL : me, sizeof me, all);
  ok = ok && rc == DBUF_EINVAL;
  rc = dbuf_comm_gather(c, me, rank == size - 1 ? 8 : 16, all);
  ok = ok && rc == (size > 1 ? DBUF_EMISMATCH : 0);
  /* And still usable: the records arrive in rank order. */
  ok = ok && dbuf_comm_gather(c, me, sizeof me, all) == 0;
  for (int r = 0; ok && rank == 0 && r < size; r++)
    ok = all[2 * r] == r && all[2 * r + 1] == 7;
  free(all);
  dbuf_comm_destroy(c);
  ck_assert(all_true(ok));
}
END_TEST

/* Global arguments that differ on the last rank: every rank fails, and says which. */
START_TEST(test_global_args)
{
  dbuf_comm_t *c;
  dbuf_comm_create(MPI_COMM_WORLD, &c);
  int odd = size > 1 && rank == size - 1, want = size > 1 ? DBUF_EMISMATCH : 0;
  dbuf_layout_t *l = test_layout(DBUF_LAYOUT_UNPADDED, size), *got = NULL;
  int64_t s = dbuf_layout_range(l)[rank], e = dbuf_layout_range(l)[rank + 1];
  /* Room for 8-byte elements, so a rank that believes in 4 reads its own memory. */
  uint64_t *seg = calloc((size_t)(e - s) + 1, sizeof *seg);
  dbuf_verdict_t v;
  dbuf_diag_t d;
  dbuf_diag_clear(&d);
  int ok = dbuf_pattern_fill(l, s, e, seg, odd ? 4 : 2, NULL, NULL) == 0;
  int rc = dbuf_comm_verify_data(c, l, s, e, seg, odd ? 4 : 2, 4, &v);
  ok = ok && rc == want && (size == 1 || strstr(v.msg, "argument elem_size differs") != NULL);
  if (!ok)
    fprintf(stderr, "rank %d: elem_size differs: rc %d '%s'\n", rank, rc, v.msg);
  rc = dbuf_comm_verify_data(c, l, s, e, seg, 2, odd ? 2 : 4, &v);
  ok = ok && rc == want && (size == 1 || strstr(v.msg, "argument sample_rows differs") != NULL);
  rc = dbuf_comm_bcast_layout(c, 0, NULL, rank == 0 ? l : NULL, odd ? size + 1 : size, &got,
                              NULL, &d);
  ok = ok && rc == want && (size > 1 || got != NULL) &&
       (size == 1 || (got == NULL && strstr(d.msg, "nranks_expected differs") != NULL));
  dbuf_layout_destroy(got);
  /* The chunk size steers the pieces of the collectives: global too. */
  dbuf_comm_set_chunk(c, odd ? 7 : 64);
  rc = dbuf_comm_verify_structure(c, l, 0, s, e, &v);
  ok = ok && rc == want && (size == 1 || strstr(v.msg, "chunk size differs") != NULL);
  dbuf_comm_set_chunk(c, DBUF_COMM_CHUNK_BYTES);
  ok = ok && dbuf_comm_verify_structure(c, l, 0, s, e, &v) == 0;
  free(seg);
  dbuf_layout_destroy(l);
  dbuf_comm_destroy(c);
  ck_assert(all_true(ok));
}
END_TEST

/* Values as text (options): the first that differs, rank 0's and the other. */
START_TEST(test_check_equal)
{
  dbuf_comm_t *c;
  dbuf_comm_create(MPI_COMM_WORLD, &c);
  const char *names[] = {"option --a", "option --b", "option --c"};
  const char *same[] = {"x", "4", NULL};
  dbuf_diag_t d;
  dbuf_diag_clear(&d);
  int ok = dbuf_comm_check_equal(c, 3, names, same, &d) == 0 && d.msg[0] == '\0';
  ok = ok && dbuf_comm_check_equal(c, 0, NULL, NULL, &d) == 0;
  /* Every rank but 0 has --b 8 and --c given: named --b, ranks 1..size-1. */
  const char *other[] = {"x", "8", ""};
  int rc = dbuf_comm_check_equal(c, 3, names, rank == 0 ? same : other, &d);
  char want[DBUF_DIAG_LEN];
  if (size == 1)
    want[0] = '\0';
  else if (size == 2)
    snprintf(want, sizeof want,
             "option --b differs between ranks: rank 0 has 4, rank 1 has 8 (and 1 more value "
             "differs)");
  else
    snprintf(want, sizeof want,
             "option --b differs between ranks: rank 0 has 4, rank 1 has 8 (ranks 1-%d differ "
             "from rank 0) (and 1 more value differs)",
             size - 1);
  ok = ok && rc == (size > 1 ? DBUF_EMISMATCH : 0) && (size == 1 || strcmp(d.msg, want) == 0);
  if (!ok)
    fprintf(stderr, "rank %d: rc %d '%s', want '%s'\n", rank, rc, d.msg, want);
  /* Not given (NULL) differs from given empty; only the last rank differs. */
  const char *given[] = {"x", "4", ""};
  dbuf_diag_clear(&d);
  rc = dbuf_comm_check_equal(c, 3, names, rank == size - 1 && size > 1 ? given : same, &d);
  snprintf(want, sizeof want, "option --c differs between ranks: rank 0 has (not given), rank %d has ",
           size - 1);
  ok = ok && rc == (size > 1 ? DBUF_EMISMATCH : 0) && (size == 1 || strcmp(d.msg, want) == 0);
  /* A count that differs is refused before any vector is compared. */
  rc = dbuf_comm_check_equal(c, rank == size - 1 ? 2 : 3, names, same, &d);
  ok = ok && rc == (size > 1 ? DBUF_EINVAL : 0);
  ok = ok && dbuf_comm_check_equal(c, 1, NULL, same, &d) == DBUF_EINVAL;
  dbuf_comm_destroy(c);
  ck_assert(all_true(ok));
}
END_TEST

int
main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  Suite *s = suite_create("comm");
  TCase *tc = tcase_create("comm");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_context);
  tcase_add_test(tc, test_agree);
  tcase_add_loop_test(tc, test_bcast_layout, 0, 2);
  tcase_add_test(tc, test_bcast_root_failure);
  tcase_add_test(tc, test_nodes_and_inputs);
  tcase_add_test(tc, test_gather);
  tcase_add_test(tc, test_structure_ok);
  tcase_add_test(tc, test_structure_shift);
  tcase_add_loop_test(tc, test_structure_stale, 0, 2);
  tcase_add_loop_test(tc, test_data, 0, 3);
  tcase_add_test(tc, test_create_agreed);
  tcase_add_test(tc, test_gather_agreed);
  tcase_add_test(tc, test_null_outputs_agreed);
  tcase_add_test(tc, test_global_args);
  tcase_add_test(tc, test_check_equal);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_set_fork_status(sr, CK_NOFORK);
  /* Only rank 0 prints the summary; every rank runs every test. */
  srunner_run_all(sr, rank == 0 ? CK_NORMAL : CK_SILENT);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
