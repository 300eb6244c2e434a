/*
 * Comm layer tests, run under mpirun at several rank counts
 * (tests/mpi/run-check-comm.sh).  Check runs in CK_NOFORK mode (fork mode
 * crashes in MPI_Finalize), and no assertion ever stands between collectives
 * on a subset of ranks: every condition is asserted by an ALL_* macro, which
 * agrees on the outcome first and then asserts on every rank, printing the
 * values of the lowest rank where the condition failed.
 */
#include "dbuf/comm.h"
#include "dbuf/layout.h"
#include "dbuf/pattern.h"
#include "dbuf/version.h"
#include "dbuf/wire.h"
#include "comm_internal.h" /* dbuf__load_checkers() */
#include "core_internal.h" /* dbuf__warm_count() */

#include <check.h>
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;

/*
 * Assertions made on every rank with one outcome.  Each ALL_* macro is a
 * collective (every rank reaches it, in the same order): the lowest rank on
 * which the condition fails sends its values to every rank, and every rank
 * then fails the test with that rank's values, so no rank is left waiting in
 * a later collective and the log says which condition broke, where, and with
 * what.
 */

/* The lowest rank where fails is non-zero, or -1; that rank's count values
 * of type t in vals are broadcast to every rank. */
static int
agree_failure(int fails, void *vals, int count, MPI_Datatype t)
{
  int r = fails ? rank : size;
  MPI_Allreduce(MPI_IN_PLACE, &r, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (r == size)
    return -1;
  if (count > 0)
    MPI_Bcast(vals, count, t, r, MPI_COMM_WORLD);
  return r;
}

/* Two texts, each cut to DBUF_DIAG_LEN - 1 bytes, for one broadcast. */
typedef struct {
  char a[DBUF_DIAG_LEN], b[DBUF_DIAG_LEN];
} text_pair_t;

static text_pair_t
text_pair(const char *a, const char *b)
{
  text_pair_t p;
  snprintf(p.a, sizeof p.a, "%.*s", (int)sizeof p.a - 1, a ? a : "(null)");
  snprintf(p.b, sizeof p.b, "%.*s", (int)sizeof p.b - 1, b ? b : "(null)");
  return p;
}

#define ALL_INT_EQ(X, Y)                                                                      \
  do {                                                                                        \
    long long v_[2] = {(long long)(X), (long long)(Y)};                                       \
    int r_ = agree_failure(v_[0] != v_[1], v_, 2, MPI_LONG_LONG);                              \
    ck_assert_msg(r_ < 0, "rank %d of %d: %s == %s: %lld != %lld", r_, size, #X, #Y, v_[0],   \
                  v_[1]);                                                                     \
  } while (0)

#define ALL_U64_EQ(X, Y)                                                                      \
  do {                                                                                        \
    unsigned long long v_[2] = {(unsigned long long)(X), (unsigned long long)(Y)};            \
    int r_ = agree_failure(v_[0] != v_[1], v_, 2, MPI_UNSIGNED_LONG_LONG);                     \
    ck_assert_msg(r_ < 0, "rank %d of %d: %s == %s: %#llx != %#llx", r_, size, #X, #Y, v_[0], \
                  v_[1]);                                                                     \
  } while (0)

/* A text comparison: EQ (same text), HAS (Y occurs in X) or PREFIX (X starts with Y). */
#define ALL_TEXT(X, Y, fails, what)                                                           \
  do {                                                                                        \
    text_pair_t p_ = text_pair((X), (Y));                                                     \
    int r_ = agree_failure(fails, &p_, (int)sizeof p_, MPI_CHAR);                             \
    ck_assert_msg(r_ < 0, "rank %d of %d: %s %s %s: \"%s\" vs \"%s\"", r_, size, #X, what, #Y, \
                  p_.a, p_.b);                                                                \
  } while (0)
#define ALL_STR_EQ(X, Y) ALL_TEXT(X, Y, strcmp(p_.a, p_.b) != 0, "==")
#define ALL_HAS(X, Y) ALL_TEXT(X, Y, strstr(p_.a, p_.b) == NULL, "contains")
#define ALL_PREFIX(X, Y) ALL_TEXT(X, Y, strncmp(p_.a, p_.b, strlen(p_.b)) != 0, "starts with")

/* A condition with no values worth printing (a pointer is NULL or not). */
#define ALL_TRUE(C)                                                                           \
  do {                                                                                        \
    int r_ = agree_failure(!(C), NULL, 0, MPI_INT);                                           \
    ck_assert_msg(r_ < 0, "rank %d of %d: %s is false", r_, size, #C);                        \
  } while (0)

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

/* test_layout, asserted to exist on every rank. */
static dbuf_layout_t *
test_layout_ok(dbuf_layout_kind_t kind, int nseg)
{
  dbuf_layout_t *l = test_layout(kind, nseg);
  ALL_TRUE(l != NULL);
  return l;
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

/* A context on MPI_COMM_WORLD, asserted on every rank. */
static dbuf_comm_t *
world(void)
{
  dbuf_comm_t *c = NULL;
  ALL_INT_EQ(dbuf_comm_create(MPI_COMM_WORLD, &c), 0);
  return c;
}

START_TEST(test_context)
{
  dbuf_comm_t *c = NULL;
  int n = 0;
  ALL_INT_EQ(dbuf_comm_create(MPI_COMM_WORLD, &c), 0);
  ALL_INT_EQ(dbuf_comm_rank(c), rank);
  ALL_INT_EQ(dbuf_comm_size(c), size);
  ALL_TRUE(dbuf_comm_mpi(c) != MPI_COMM_WORLD);
  ALL_TRUE(dbuf_comm_mpi(c) != MPI_COMM_NULL);
  ALL_INT_EQ(dbuf_comm_set_chunk(c, 0), DBUF_EINVAL);
  ALL_INT_EQ(dbuf_comm_set_chunk(c, (int64_t)INT_MAX + 1), DBUF_EINVAL);
  ALL_INT_EQ(dbuf_comm_set_chunk(c, 5), 0);
  ALL_INT_EQ(dbuf_comm_count(INT_MAX, &n), 0);
  ALL_INT_EQ(n, INT_MAX);
  ALL_INT_EQ(dbuf_comm_count((int64_t)INT_MAX + 1, &n), DBUF_EOVERFLOW);
  ALL_INT_EQ(dbuf_comm_count(-1, &n), DBUF_EOVERFLOW);
  ALL_INT_EQ(dbuf_comm_count(1, NULL), DBUF_EINVAL);
  ALL_INT_EQ(dbuf_comm_rank(NULL), -1);
  ALL_INT_EQ(dbuf_comm_size(NULL), 0);
  dbuf_comm_destroy(c);
  dbuf_comm_destroy(NULL);
}
END_TEST

START_TEST(test_agree)
{
  dbuf_comm_t *c = world();
  int g = 1;
  ALL_INT_EQ(dbuf_comm_agree(c, -rank, &g), 0);
  ALL_INT_EQ(g, -(size - 1));
  ALL_INT_EQ(dbuf_comm_agree(c, 0, &g), 0);
  ALL_INT_EQ(g, 0);
  /* The last rank fails with a message: everyone gets it, prefixed. */
  dbuf_diag_t d;
  dbuf_diag_clear(&d);
  int fail = rank == size - 1;
  if (fail)
    snprintf(d.msg, sizeof d.msg, "tensor x row 3: boom");
  int rc = dbuf_comm_agree_diag(c, fail ? DBUF_EIO : 0, &d);
  char want[64];
  snprintf(want, sizeof want, "rank %d: tensor x row 3: boom", size - 1);
  ALL_INT_EQ(rc, DBUF_EIO);
  ALL_INT_EQ(d.code, DBUF_EIO);
  ALL_STR_EQ(d.msg, want);
  /* The lowest failing rank's message wins, the lowest code is returned. */
  dbuf_diag_clear(&d);
  snprintf(d.msg, sizeof d.msg, "mine");
  rc = dbuf_comm_agree_diag(c, rank == 0 ? DBUF_EIO : DBUF_ENOMEM, &d);
  ALL_INT_EQ(rc, DBUF_EIO);
  ALL_STR_EQ(d.msg, "rank 0: mine");
  ALL_INT_EQ(dbuf_comm_agree_diag(c, 0, NULL), 0);
  dbuf_comm_destroy(c);
}
END_TEST

/* Every kind, byte chunks of 7 (hundreds of MPI_Bcast calls), checked
 * against the layout each rank builds for itself. */
START_TEST(test_bcast_layout)
{
  dbuf_comm_t *c = world();
  dbuf_comm_set_chunk(c, _i == 0 ? 7 : DBUF_COMM_CHUNK_BYTES);
  for (int k = DBUF_LAYOUT_PADDED; k <= DBUF_LAYOUT_TENSOR; k++) {
    dbuf_layout_t *mine = test_layout_ok((dbuf_layout_kind_t)k, size), *got = NULL;
    uint64_t dig = 0, want = 1;
    dbuf_diag_t d;
    int rc = dbuf_comm_bcast_layout(c, 0, NULL, rank == 0 ? mine : NULL, size, &got, &dig, &d);
    ALL_INT_EQ(dbuf_wire_digest(mine, &want, NULL), 0);
    ALL_INT_EQ(rc, 0);
    ALL_TRUE(got != NULL);
    ALL_U64_EQ(dig, want);
    uint64_t again = 0;
    ALL_INT_EQ(dbuf_wire_digest(got, &again, NULL), 0);
    ALL_U64_EQ(again, want);
    dbuf_layout_destroy(got);
    /* A segment count the caller did not expect is refused everywhere. */
    got = NULL;
    rc = dbuf_comm_bcast_layout(c, 0, NULL, rank == 0 ? mine : NULL, size + 1, &got, NULL, &d);
    ALL_INT_EQ(rc, DBUF_ENRANKS);
    ALL_TRUE(got == NULL);
    ALL_PREFIX(d.msg, "rank 0: ");
    dbuf_layout_destroy(mine);
  }
  dbuf_comm_destroy(c);
}
END_TEST

/* A plan of two buffers, "root" fp32 (padded) and "layers.0" bf16 (kind
 * second), both for size ranks; want[k]: buffer k's layout digest. */
static dbuf_plan_t *
two_buffers(dbuf_layout_kind_t second, uint64_t want[2])
{
  dbuf_plan_t *p = NULL;
  ALL_INT_EQ(dbuf_plan_create(&p), 0);
  for (int k = 0; k < 2; k++) {
    dbuf_layout_t *l = test_layout_ok(k == 0 ? DBUF_LAYOUT_PADDED : second, size);
    ALL_INT_EQ(dbuf_wire_digest(l, &want[k], NULL), 0);
    ALL_INT_EQ(dbuf_plan_add(p, k == 0 ? "root" : "layers.0",
                             k == 0 ? DBUF_DTYPE_F32 : DBUF_DTYPE_BF16, l, NULL, NULL), 0);
  }
  return p;
}

/* got holds two_buffers()'s buffers: units, dtypes and layout digests. */
static void
assert_two_buffers(const dbuf_plan_t *got, const uint64_t want[2])
{
  ALL_INT_EQ((int)dbuf_plan_nbuffers(got), 2);
  for (int k = 0; k < 2; k++) {
    dbuf_plan_buffer_t b;
    uint64_t g = 0;
    ALL_INT_EQ(dbuf_plan_buffer(got, k, &b), 0);
    ALL_STR_EQ(b.unit, k == 0 ? "root" : "layers.0");
    ALL_INT_EQ((int)b.elem_size, k == 0 ? 4 : 2);
    ALL_INT_EQ(dbuf_wire_digest(b.layout, &g, NULL), 0);
    ALL_U64_EQ(g, want[k]);
  }
}

/* A plan of two buffers (two kinds), chunks of 7 bytes: every rank gets
 * every buffer with its unit, dtype and layout digest; rank 0's error and an
 * unexpected rank count reach every rank. */
START_TEST(test_bcast_plan)
{
  dbuf_comm_t *c = world();
  dbuf_comm_set_chunk(c, 7);
  dbuf_plan_t *got = NULL;
  uint64_t want[2], dig = 0;
  dbuf_diag_t d;
  dbuf_plan_t *mine = two_buffers(DBUF_LAYOUT_UNPADDED, want);
  int rc = dbuf_comm_bcast_plan(c, 0, NULL, rank == 0 ? mine : NULL, size, &got, &dig, &d);
  ALL_INT_EQ(rc, 0);
  assert_two_buffers(got, want);
  dbuf_plan_destroy(got);
  got = NULL;
  rc = dbuf_comm_bcast_plan(c, 0, NULL, rank == 0 ? mine : NULL, size + 1, &got, NULL, &d);
  ALL_INT_EQ(rc, DBUF_ENRANKS);
  ALL_TRUE(got == NULL);
  ALL_PREFIX(d.msg, "rank 0: received buffer root/fp32 has ");
  rc = dbuf_comm_bcast_plan(c, rank == 0 ? DBUF_EPARSE : 0, rank == 0 ? "x:1: bad" : NULL, NULL,
                            size, &got, NULL, &d);
  ALL_INT_EQ(rc, DBUF_EPARSE);
  ALL_STR_EQ(d.msg, "x:1: bad");
  ALL_TRUE(got == NULL);
  dbuf_plan_destroy(mine);
  dbuf_comm_destroy(c);
}
END_TEST

/* dbuf_comm_share_plan(): rank 0 keeps its own plan (the same object, its
 * layouts' digests noted), every other rank receives an equal one, in
 * windows of 7 bytes and of the default size; an unexpected rank count and
 * rank 0's error leave rank 0 its plan and every other rank none. */
START_TEST(test_share_plan)
{
  dbuf_comm_t *c = world();
  dbuf_comm_set_chunk(c, _i == 0 ? 7 : DBUF_COMM_CHUNK_BYTES);
  dbuf_plan_t *p = NULL;
  uint64_t want[2], whole = 0, dig = 0;
  dbuf_diag_t d;
  dbuf_plan_t *mine = two_buffers(DBUF_LAYOUT_TENSOR, want);
  void *buf = NULL;
  int64_t len = 0;
  ALL_INT_EQ(dbuf_wire_plan_encode(mine, &buf, &len, NULL), 0);
  ALL_INT_EQ(dbuf_wire_checksum(buf, len, &whole), 0);
  free(buf);
  p = rank == 0 ? mine : NULL;
  int rc = dbuf_comm_share_plan(c, 0, NULL, &p, size, &dig, &d);
  ALL_INT_EQ(rc, 0);
  ALL_TRUE(rank == 0 ? p == mine : p != NULL);
  ALL_U64_EQ(dig, whole);
  assert_two_buffers(p, want);
  /* What each rank holds encodes to the bytes rank 0 sent. */
  uint64_t again = 0;
  ALL_INT_EQ(dbuf_wire_plan_encode(p, &buf, &len, NULL), 0);
  ALL_INT_EQ(dbuf_wire_checksum(buf, len, &again), 0);
  ALL_U64_EQ(again, whole);
  free(buf);
  if (rank != 0)
    dbuf_plan_destroy(p);
  p = rank == 0 ? mine : NULL;
  rc = dbuf_comm_share_plan(c, 0, NULL, &p, size + 1, NULL, &d);
  ALL_INT_EQ(rc, DBUF_ENRANKS);
  ALL_TRUE(rank == 0 ? p == mine : p == NULL);
  ALL_PREFIX(d.msg, "rank 0: sent buffer root/fp32 has ");
  p = NULL;
  rc = dbuf_comm_share_plan(c, rank == 0 ? DBUF_EPARSE : 0, rank == 0 ? "x:1: bad" : NULL, &p,
                            size, NULL, &d);
  ALL_INT_EQ(rc, DBUF_EPARSE);
  ALL_STR_EQ(d.msg, "x:1: bad");
  ALL_TRUE(p == NULL);
  /* A plan rank 0 cannot send (a unit name no decoder takes): its error,
   * whatever the rank count. */
  dbuf_plan_t *bad = NULL;
  ALL_INT_EQ(dbuf_plan_create(&bad), 0);
  ALL_INT_EQ(dbuf_plan_add(bad, "bad unit", DBUF_DTYPE_F32,
                           test_layout_ok(DBUF_LAYOUT_PADDED, size), NULL, NULL), 0);
  p = rank == 0 ? bad : NULL;
  rc = dbuf_comm_share_plan(c, 0, NULL, &p, size, NULL, &d);
  ALL_INT_EQ(rc, DBUF_EINVAL);
  ALL_STR_EQ(d.msg, "wire: buffer 0: unit name 'bad unit' has a blank or control character");
  ALL_TRUE(rank == 0 ? p == bad : p == NULL);
  dbuf_plan_destroy(bad);
  /* A NULL plan pointer on one rank: every rank refuses before sending. */
  p = rank == 0 ? mine : NULL;
  rc = dbuf_comm_share_plan(c, 0, NULL, rank == size - 1 ? NULL : &p, size, NULL, &d);
  ALL_INT_EQ(rc, DBUF_EINVAL);
  ALL_TRUE(rank == 0 ? p == mine : p == NULL);
  dbuf_plan_destroy(mine);
  dbuf_comm_destroy(c);
}
END_TEST

/* dbuf_comm_announce_plan(): refused (nothing sent) on a rank other than 0,
 * twice, or with no list; an announced plan is shared and broadcast as one
 * that was not, rank 0's failure and an unexpected rank count after an
 * announcement end every rank alike, and no rank keeps warm blocks after
 * any of them (every one taken by a one-buffer plan's decode); an
 * announcement met by another call fails every rank. */
START_TEST(test_announce_plan)
{
  dbuf_comm_t *c = world();
  dbuf_diag_t d;
  dbuf_layout_t *l = test_layout_ok(DBUF_LAYOUT_PADDED, size);
  const dbuf_tensors_t *t = dbuf_layout_tensors(l);
  dbuf_plan_t *mine = NULL, *p = NULL;
  ALL_INT_EQ(dbuf_plan_create(&mine), 0);
  ALL_INT_EQ(dbuf_plan_add(mine, "root", DBUF_DTYPE_F32, l, NULL, NULL), 0);
  void *buf = NULL;
  int64_t len = 0;
  uint64_t whole = 0, dig = 0;
  ALL_INT_EQ(dbuf_wire_plan_encode(mine, &buf, &len, NULL), 0);
  ALL_INT_EQ(dbuf_wire_checksum(buf, len, &whole), 0);
  free(buf);
  ALL_INT_EQ(dbuf_comm_announce_plan(c, NULL, DBUF_LAYOUT_PADDED), DBUF_EINVAL);
  ALL_INT_EQ(dbuf_comm_announce_plan(NULL, t, DBUF_LAYOUT_PADDED), DBUF_EINVAL);
  /* Rank 0's announcement meets the others' plan broadcast: no other
   * collective (these assertions are) between the two. */
  int64_t made0, taken0, made1, taken1;
  dbuf__warm_stats(&made0, &taken0);
  int ann = dbuf_comm_announce_plan(c, t, DBUF_LAYOUT_PADDED);
  int again = rank == 0 ? dbuf_comm_announce_plan(c, t, DBUF_LAYOUT_PADDED) : DBUF_EINVAL;
  p = rank == 0 ? mine : NULL;
  int rc = dbuf_comm_share_plan(c, 0, NULL, &p, size, &dig, &d);
  dbuf__warm_stats(&made1, &taken1);
  ALL_INT_EQ(ann, rank == 0 ? 0 : DBUF_EINVAL);
  ALL_INT_EQ(again, DBUF_EINVAL);
  ALL_INT_EQ(rc, 0);
  /* The receivers made the blocks and their decode took them (all, or all
   * but the order's when the layout's offsets rise): the announcement's
   * numbers are the list's, in their places; rank 0 made none. */
  ALL_INT_EQ(made1 - made0, rank == 0 ? 0 : 8);
  ALL_TRUE(rank == 0 ? taken1 == taken0 : taken1 - taken0 >= 7);
  ALL_TRUE(rank == 0 ? p == mine : p != NULL);
  ALL_U64_EQ(dig, whole);
  ALL_INT_EQ(dbuf__warm_count(), 0);
  if (rank != 0)
    dbuf_plan_destroy(p);
  /* The copying broadcast, announced and not. */
  for (int k = 1; k >= 0; k--) {
    dbuf_plan_t *got = NULL;
    ann = k && rank == 0 ? dbuf_comm_announce_plan(c, t, DBUF_LAYOUT_PADDED) : 0;
    dig = 0;
    rc = dbuf_comm_bcast_plan(c, 0, NULL, mine, size, &got, &dig, &d);
    ALL_INT_EQ(ann, 0);
    ALL_INT_EQ(rc, 0);
    ALL_U64_EQ(dig, whole);
    ALL_INT_EQ(dbuf__warm_count(), 0);
    dbuf_plan_destroy(got);
  }
  /* Announced, then rank 0 fails, or the rank count is not the plan's. */
  for (int k = 0; k < 2; k++) {
    ann = rank == 0 ? dbuf_comm_announce_plan(c, t, DBUF_LAYOUT_PADDED) : 0;
    p = rank == 0 ? mine : NULL;
    rc = k == 0 ? dbuf_comm_share_plan(c, rank == 0 ? DBUF_EPARSE : 0,
                                           rank == 0 ? "x:1: bad" : NULL, &p, size, NULL, &d)
                    : dbuf_comm_share_plan(c, 0, NULL, &p, size + 1, NULL, &d);
    ALL_INT_EQ(ann, 0);
    ALL_INT_EQ(rc, k == 0 ? DBUF_EPARSE : DBUF_ENRANKS);
    ALL_TRUE(rank == 0 ? p == mine : p == NULL);
    ALL_INT_EQ(dbuf__warm_count(), 0);
  }
  ALL_PREFIX(d.msg, "rank 0: sent buffer root/fp32 has ");
  /* An announcement met by a layout broadcast (a caller's slip): every
   * rank fails, none waits. */
  dbuf_layout_t *gotl = NULL;
  rc = rank == 0 ? dbuf_comm_announce_plan(c, t, DBUF_LAYOUT_PADDED)
                 : dbuf_comm_bcast_layout(c, 0, NULL, NULL, size, &gotl, NULL, &d);
  ALL_INT_EQ(rc, size == 1 ? 0 : DBUF_EMISMATCH);
  ALL_TRUE(gotl == NULL);
  /* ... and by a layout broadcast with a bad argument there: every rank
   * returns DBUF_EINVAL, as a call whose arguments are refused does. */
  if (size == 1)
    dbuf_comm_destroy(c), c = world(); /* np 1: the announcements went through */
  rc = rank == 0 ? dbuf_comm_announce_plan(c, t, DBUF_LAYOUT_PADDED)
                 : dbuf_comm_bcast_layout(c, 0, NULL, NULL, size, NULL, NULL, &d);
  ALL_INT_EQ(rc, size == 1 ? 0 : DBUF_EINVAL);
  /* Announced, then rank 0 broadcasts a layout while the others receive a
   * plan (a caller's slip): all fail alike, and the next plan broadcast
   * still makes its announcement step on every rank. */
  if (size == 1)
    dbuf_comm_destroy(c), c = world();
  ann = rank == 0 ? dbuf_comm_announce_plan(c, t, DBUF_LAYOUT_PADDED) : 0;
  p = NULL;
  rc = rank == 0 ? dbuf_comm_bcast_layout(c, 0, NULL, l, size, &gotl, NULL, &d)
                 : dbuf_comm_share_plan(c, 0, NULL, &p, size, NULL, &d);
  ALL_INT_EQ(ann, 0);
  ALL_INT_EQ(rc, size == 1 ? 0 : DBUF_EFORMAT);
  dbuf_layout_destroy(gotl);
  gotl = NULL;
  p = rank == 0 ? mine : NULL;
  ALL_INT_EQ(dbuf_comm_share_plan(c, 0, NULL, &p, size, NULL, &d), 0);
  if (rank != 0)
    dbuf_plan_destroy(p);
  dbuf_plan_destroy(mine);
  dbuf_comm_destroy(c);
}
END_TEST

/* Rank 0 could not read its input: everyone returns its code and message. */
START_TEST(test_bcast_root_failure)
{
  dbuf_comm_t *c = world();
  dbuf_layout_t *got = NULL;
  dbuf_diag_t d;
  dbuf_diag_clear(&d);
  int rc = dbuf_comm_bcast_layout(c, rank == 0 ? DBUF_EPARSE : 0,
                                  rank == 0 ? "x.shapes:3: bad shape 'q'" : "ignored", NULL,
                                  size, &got, NULL, &d);
  ALL_INT_EQ(rc, DBUF_EPARSE);
  ALL_TRUE(got == NULL);
  ALL_INT_EQ(d.code, DBUF_EPARSE);
  ALL_STR_EQ(d.msg, "x.shapes:3: bad shape 'q'");
  /* A root without a layout and without an error is an error too. */
  rc = dbuf_comm_bcast_layout(c, 0, NULL, NULL, 0, &got, NULL, &d);
  ALL_INT_EQ(rc, DBUF_EINVAL);
  ALL_TRUE(got == NULL);
  dbuf_comm_destroy(c);
}
END_TEST

START_TEST(test_nodes_and_inputs)
{
  dbuf_comm_t *c = world();
  dbuf_comm_nodemap_t m;
  dbuf_diag_t d;
  ALL_INT_EQ(dbuf_comm_nodes(c, &m, &d), 0);
  /* One machine: one node, all ranks on it, local index = rank. */
  ALL_INT_EQ(m.nranks, size);
  ALL_INT_EQ(m.nnodes, 1);
  ALL_INT_EQ(m.local_size, size);
  ALL_INT_EQ(m.local_index, rank);
  ALL_STR_EQ(m.node_name[0], m.host[rank]);
  for (int r = 0; r < size; r++)
    ALL_INT_EQ(m.node_of_rank[r], 0);
  dbuf_comm_nodemap_free(&m);
  dbuf_comm_nodemap_free(NULL);
  ALL_INT_EQ(dbuf_comm_check_inputs(c, 42, 1, &d), 0);
  int rc = dbuf_comm_check_inputs(c, rank == size - 1 && size > 1 ? 43 : 42, 1, &d);
  if (size > 1) {
    char want[32];
    snprintf(want, sizeof want, " rank %d (", size - 1);
    ALL_INT_EQ(rc, DBUF_EMISMATCH);
    ALL_HAS(d.msg, "input differs from rank 0's");
    ALL_HAS(d.msg, want);
  } else {
    ALL_INT_EQ(rc, 0);
  }
  rc = dbuf_comm_check_inputs(c, 42, rank == 0, &d);
  if (size == 1) {
    ALL_INT_EQ(rc, 0);
  } else {
    ALL_INT_EQ(rc, DBUF_EMISMATCH);
    ALL_HAS(d.msg, "cannot read it");
  }
  dbuf_comm_destroy(c);
}
END_TEST

START_TEST(test_gather)
{
  dbuf_comm_t *c = world();
  struct {
    int r;
    char s[20];
  } me = {rank, "x"}, *all = calloc((size_t)size, sizeof *all);
  snprintf(me.s, sizeof me.s, "rank-%d", rank);
  ALL_INT_EQ(dbuf_comm_gather(c, &me, sizeof me, all), 0);
  /* Only rank 0 receives; the others compare their wants with themselves. */
  for (int r = 0; r < size; r++) {
    char want[20];
    snprintf(want, sizeof want, "rank-%d", r);
    ALL_INT_EQ(rank == 0 ? all[r].r : r, r);
    ALL_STR_EQ(rank == 0 ? all[r].s : want, want);
  }
  ALL_INT_EQ(dbuf_comm_gather(c, &me, 0, all), DBUF_EINVAL);
  free(all);
  dbuf_comm_destroy(c);
}
END_TEST

/* Structure: a good layout passes in every kind, also with 2 segments per rank. */
START_TEST(test_structure_ok)
{
  dbuf_comm_t *c = world();
  for (int k = DBUF_LAYOUT_PADDED; k <= DBUF_LAYOUT_TENSOR; k++) {
    for (int per = 1; per <= 2; per++) {
      dbuf_layout_t *l = test_layout_ok((dbuf_layout_kind_t)k, size * per);
      dbuf_verdict_t v;
      const int64_t *range = dbuf_layout_range(l);
      int rc = dbuf_comm_verify_structure(c, l, 0, range[rank * per], range[(rank + 1) * per], &v);
      ALL_INT_EQ(rc, 0);
      ALL_INT_EQ(v.code, 0);
      ALL_INT_EQ(v.local_ok, 1);
      ALL_INT_EQ(v.problems, 0);
      ALL_STR_EQ(v.msg, "");
      dbuf_layout_destroy(l);
    }
  }
  dbuf_comm_destroy(c);
}
END_TEST

/* The last rank starts one element late: named with its tensor and row. */
START_TEST(test_structure_shift)
{
  dbuf_comm_t *c = world();
  dbuf_layout_t *l = test_layout_ok(DBUF_LAYOUT_UNPADDED, size);
  dbuf_verdict_t v;
  int64_t s = dbuf_layout_range(l)[rank], e = dbuf_layout_range(l)[rank + 1];
  int bad = size - 1;
  /* Move the start of the last non-empty segment. */
  if (rank == bad)
    s += 1;
  int rc = dbuf_comm_verify_structure(c, l, 0, s, e, &v);
  char want[32];
  snprintf(want, sizeof want, "rank %d: ", bad);
  ALL_INT_EQ(rc, DBUF_EVERIFY);
  ALL_INT_EQ(v.code, DBUF_EVERIFY);
  ALL_INT_EQ(v.rank, bad);
  ALL_TRUE(v.tensor >= 0);
  ALL_TRUE(v.row >= 0);
  ALL_PREFIX(v.msg, want);
  ALL_HAS(v.msg, " row ");
  ALL_TRUE(v.problems >= 2);
  ALL_INT_EQ(v.local_ok, rank != bad);
  dbuf_layout_destroy(l);
  dbuf_comm_destroy(c);
}
END_TEST

/* The row proof (a scan over the ranks): the last rank's segment starts one
 * whole row early (loop 0: that row is owned twice) or late (loop 1: lost).
 * The cut is on a row start, so the only findings are the neighbour check and
 * the proof's own: exactly two, both on the corrupt rank, which is named. */
START_TEST(test_structure_proof)
{
  dbuf_comm_t *c = world();
  dbuf_layout_t *l = test_layout_ok(DBUF_LAYOUT_UNPADDED, size);
  const dbuf_tensors_t *ts = dbuf_layout_tensors(l);
  dbuf_verdict_t v;
  int64_t s = dbuf_layout_range(l)[rank], e = dbuf_layout_range(l)[rank + 1], t = -1;
  int bad = size - 1;
  ALL_TRUE(e > s); /* the corrupt segment has rows to move */
  if (rank == bad && _i == 0 && s > 0) {
    dbuf_layout_tensor_at(l, s - 1, &t);
    s -= dbuf_tensors_row_elems(ts, t);
  } else if (rank == bad) {
    dbuf_layout_tensor_at(l, s, &t);
    s += dbuf_tensors_row_elems(ts, t);
  }
  int rc = dbuf_comm_verify_structure(c, l, 0, s, e, &v);
  char want[32];
  snprintf(want, sizeof want, "rank %d: ", bad);
  ALL_INT_EQ(rc, DBUF_EVERIFY);
  ALL_INT_EQ(v.rank, bad);
  ALL_PREFIX(v.msg, want);
  ALL_HAS(v.msg, " row ");
  ALL_INT_EQ(v.problems, 2);
  dbuf_layout_destroy(l);
  dbuf_comm_destroy(c);
}
END_TEST

/* A rank with a stale plan: named by the layout agreement. */
START_TEST(test_structure_stale)
{
  dbuf_comm_t *c = world();
  dbuf_layout_t *l = test_layout_ok(DBUF_LAYOUT_UNPADDED, size), *use;
  /* Loop 0: rank 1 is stale, judged against rank 0's layout; loop 1: rank 0
   * is stale, judged against the broadcast plan's digest; loop 2: rank 1
   * is stale, judged against the plan's digest, every rank holding the
   * broadcast copy (which carries its message's checksum as its digest)
   * and rank 1's stale copy made from it (which must not inherit it). */
  if (_i == 2) {
    dbuf_layout_t *got = NULL;
    ALL_INT_EQ(dbuf_comm_bcast_layout(c, 0, NULL, rank == 0 ? l : NULL, size, &got, NULL, NULL),
               0);
    dbuf_layout_destroy(l);
    l = got;
  }
  use = l;
  int bad = size > 1 ? (_i == 1 ? 0 : 1) : -1;
  if (rank == bad)
    use = stale_copy(l, bad > 0 ? bad : 1);
  ALL_TRUE(use != NULL);
  dbuf_verdict_t v;
  int64_t s = dbuf_layout_range(use)[rank], e = dbuf_layout_range(use)[rank + 1];
  uint64_t plan = 0;
  dbuf_wire_digest(l, &plan, NULL);
  int rc = dbuf_comm_verify_structure(c, use, _i == 0 ? 0 : plan, s, e, &v);
  if (bad < 0) {
    ALL_INT_EQ(rc, 0);
  } else {
    ALL_INT_EQ(rc, DBUF_EVERIFY);
    ALL_INT_EQ(v.rank, bad);
    ALL_HAS(v.msg, "stale layout");
    ALL_HAS(v.msg, "segment 1 starts at");
    ALL_TRUE(v.tensor >= 0);
    ALL_TRUE(v.row >= 0);
    ALL_TRUE(rank != bad || !v.local_ok);
  }
  if (use != l)
    dbuf_layout_destroy(use);
  dbuf_layout_destroy(l);
  dbuf_comm_destroy(c);
}
END_TEST

/* Data: a good fill passes; one corrupted element is named. */
START_TEST(test_data)
{
  dbuf_comm_t *c = world();
  dbuf_layout_t *l = test_layout_ok((dbuf_layout_kind_t)(DBUF_LAYOUT_PADDED + _i), size);
  int64_t s = dbuf_layout_range(l)[rank], e = dbuf_layout_range(l)[rank + 1];
  uint16_t *seg = calloc((size_t)(e - s) + 1, sizeof *seg);
  dbuf_verdict_t v;
  ALL_INT_EQ(dbuf_pattern_fill(l, s, e, seg, 2, NULL, NULL), 0);
  int rc = dbuf_comm_verify_data(c, l, s, e, seg, 2, 4, &v);
  ALL_INT_EQ(rc, 0);
  ALL_INT_EQ(v.local_ok, 1);
  ALL_INT_EQ(v.problems, 0);
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
  ALL_INT_EQ(rc, DBUF_EVERIFY);
  ALL_INT_EQ(v.rank, bad);
  ALL_TRUE(v.tensor >= 0);
  ALL_PREFIX(v.msg, want);
  ALL_HAS(v.msg, " row ");
  ALL_INT_EQ(v.local_ok, rank != bad);
  /* Bad arguments are agreed. */
  rc = dbuf_comm_verify_data(c, l, s, e, seg, 3, 4, &v);
  ALL_INT_EQ(rc, DBUF_EINVAL);
  free(seg);
  dbuf_layout_destroy(l);
  dbuf_comm_destroy(c);
}
END_TEST

/* A NULL out on one rank fails every rank: no rank is left in MPI_Comm_dup. */
START_TEST(test_create_agreed)
{
  dbuf_comm_t *c = NULL;
  int bad = size - 1;
  int rc = dbuf_comm_create(MPI_COMM_WORLD, rank == bad ? NULL : &c);
  ALL_INT_EQ(rc, DBUF_EINVAL);
  ALL_TRUE(c == NULL);
  dbuf_comm_destroy(c);
}
END_TEST

/* A NULL out-pointer on the last rank fails every rank, none waits. */
START_TEST(test_null_outputs_agreed)
{
  dbuf_comm_t *c = world();
  int last = rank == size - 1, g = 1;
  ALL_INT_EQ(dbuf_comm_agree(c, 0, last ? NULL : &g), DBUF_EINVAL);
  dbuf_comm_nodemap_t m;
  dbuf_diag_t d;
  dbuf_diag_clear(&d);
  ALL_INT_EQ(dbuf_comm_nodes(c, last ? NULL : &m, &d), DBUF_EINVAL);
  ALL_HAS(d.msg, "node discovery");
  dbuf_layout_t *l = test_layout_ok(DBUF_LAYOUT_PADDED, size);
  int64_t s = dbuf_layout_range(l)[rank], e = dbuf_layout_range(l)[rank + 1];
  dbuf_verdict_t v;
  ALL_INT_EQ(dbuf_comm_verify_structure(c, l, 0, s, e, last ? NULL : &v), DBUF_EINVAL);
  uint16_t *seg = calloc((size_t)(e - s) + 1, sizeof *seg);
  ALL_INT_EQ(dbuf_comm_verify_data(c, l, s, e, seg, 2, 4, last ? NULL : &v), DBUF_EINVAL);
  /* Still in step afterwards. */
  ALL_INT_EQ(dbuf_comm_agree(c, -rank, &g), 0);
  ALL_INT_EQ(g, -(size - 1));
  free(seg);
  dbuf_layout_destroy(l);
  dbuf_comm_destroy(c);
}
END_TEST

/* Gather: rank 0's own check is agreed; rec_bytes must match. */
START_TEST(test_gather_agreed)
{
  dbuf_comm_t *c = world();
  int64_t me[2] = {rank, 7}, *all = calloc((size_t)size, sizeof me);
  ALL_INT_EQ(dbuf_comm_gather(c, me, sizeof me, rank == 0 ? NULL : all), DBUF_EINVAL);
  ALL_INT_EQ(dbuf_comm_gather(c, rank == size - 1 ? NULL : me, sizeof me, all), DBUF_EINVAL);
  ALL_INT_EQ(dbuf_comm_gather(c, me, rank == size - 1 ? 8 : 16, all),
             size > 1 ? DBUF_EMISMATCH : 0);
  /* And still usable: the records arrive in rank order (at rank 0). */
  ALL_INT_EQ(dbuf_comm_gather(c, me, sizeof me, all), 0);
  for (int r = 0; r < size; r++) {
    ALL_INT_EQ(rank == 0 ? all[2 * r] : r, r);
    ALL_INT_EQ(rank == 0 ? all[2 * r + 1] : 7, 7);
  }
  free(all);
  dbuf_comm_destroy(c);
}
END_TEST

/* Global arguments that differ on the last rank: every rank fails, and says which. */
START_TEST(test_global_args)
{
  dbuf_comm_t *c = world();
  int odd = size > 1 && rank == size - 1, want = size > 1 ? DBUF_EMISMATCH : 0;
  dbuf_layout_t *l = test_layout_ok(DBUF_LAYOUT_UNPADDED, size), *got = NULL;
  int64_t s = dbuf_layout_range(l)[rank], e = dbuf_layout_range(l)[rank + 1];
  /* Room for 8-byte elements, so a rank that believes in 4 reads its own memory. */
  uint64_t *seg = calloc((size_t)(e - s) + 1, sizeof *seg);
  dbuf_verdict_t v;
  dbuf_diag_t d;
  dbuf_diag_clear(&d);
  ALL_INT_EQ(dbuf_pattern_fill(l, s, e, seg, odd ? 4 : 2, NULL, NULL), 0);
  ALL_INT_EQ(dbuf_comm_verify_data(c, l, s, e, seg, odd ? 4 : 2, 4, &v), want);
  if (size > 1)
    ALL_HAS(v.msg, "argument elem_size differs");
  ALL_INT_EQ(dbuf_comm_verify_data(c, l, s, e, seg, 2, odd ? 2 : 4, &v), want);
  if (size > 1)
    ALL_HAS(v.msg, "argument sample_rows differs");
  int rc = dbuf_comm_bcast_layout(c, 0, NULL, rank == 0 ? l : NULL, odd ? size + 1 : size, &got,
                                  NULL, &d);
  ALL_INT_EQ(rc, want);
  if (size > 1) {
    ALL_TRUE(got == NULL);
    ALL_HAS(d.msg, "nranks_expected differs");
  } else {
    ALL_TRUE(got != NULL);
  }
  dbuf_layout_destroy(got);
  /* The chunk size steers the pieces of the collectives: global too. */
  dbuf_comm_set_chunk(c, odd ? 7 : 64);
  ALL_INT_EQ(dbuf_comm_verify_structure(c, l, 0, s, e, &v), want);
  if (size > 1)
    ALL_HAS(v.msg, "chunk size differs");
  dbuf_comm_set_chunk(c, DBUF_COMM_CHUNK_BYTES);
  ALL_INT_EQ(dbuf_comm_verify_structure(c, l, 0, s, e, &v), 0);
  free(seg);
  dbuf_layout_destroy(l);
  dbuf_comm_destroy(c);
}
END_TEST

/* Ranks in different collective calls by mistake: every entry point
 * starts with the same agreement of its arguments, so each rank returns an
 * error instead of hanging or aborting (a bare barrier first hung here, a
 * reduction of another length aborted in MPI). */
START_TEST(test_mismatched_calls)
{
  dbuf_comm_t *c = world();
  dbuf_layout_t *l = test_layout_ok(DBUF_LAYOUT_UNPADDED, size), *got = NULL;
  dbuf_diag_t d;
  dbuf_verdict_t v;
  dbuf_diag_clear(&d);
  if (size > 1) {
    int rc = rank == 0 ? dbuf_comm_bcast_layout(c, 0, NULL, l, size, &got, NULL, &d)
                       : dbuf_comm_verify_structure(c, l, 0, 0, 0, &v);
    ALL_TRUE(rc != 0);
    ALL_TRUE(got == NULL);
    const char *n[1] = {"x"}, *val[1] = {"y"};
    rc = rank == 0 ? dbuf_comm_check_equal(c, 1, n, val, &d)
                   : dbuf_comm_bcast_layout(c, 0, NULL, NULL, size, &got, NULL, &d);
    ALL_TRUE(rc != 0);
    ALL_TRUE(got == NULL);
  }
  /* and the ranks are in step again */
  ALL_INT_EQ(dbuf_comm_bcast_layout(c, 0, NULL, rank == 0 ? l : NULL, size, &got, NULL, &d), 0);
  dbuf_layout_destroy(got);
  dbuf_layout_destroy(l);
  dbuf_comm_destroy(c);
}
END_TEST

/* Values as text (options): the first that differs, rank 0's and the other. */
START_TEST(test_check_equal)
{
  dbuf_comm_t *c = world();
  const char *names[] = {"option --a", "option --b", "option --c"};
  const char *same[] = {"x", "4", NULL};
  dbuf_diag_t d;
  dbuf_diag_clear(&d);
  ALL_INT_EQ(dbuf_comm_check_equal(c, 3, names, same, &d), 0);
  ALL_STR_EQ(d.msg, "");
  ALL_INT_EQ(dbuf_comm_check_equal(c, 0, NULL, NULL, &d), 0);
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
  ALL_INT_EQ(rc, size > 1 ? DBUF_EMISMATCH : 0);
  if (size > 1)
    ALL_STR_EQ(d.msg, want);
  /* Not given (NULL) differs from given empty; only the last rank differs. */
  const char *given[] = {"x", "4", ""};
  dbuf_diag_clear(&d);
  rc = dbuf_comm_check_equal(c, 3, names, rank == size - 1 && size > 1 ? given : same, &d);
  snprintf(want, sizeof want, "option --c differs between ranks: rank 0 has (not given), rank %d has ",
           size - 1);
  ALL_INT_EQ(rc, size > 1 ? DBUF_EMISMATCH : 0);
  if (size > 1)
    ALL_STR_EQ(d.msg, want);
  /* A count that differs is refused before any vector is compared. */
  rc = dbuf_comm_check_equal(c, rank == size - 1 ? 2 : 3, names, same, &d);
  ALL_INT_EQ(rc, size > 1 ? DBUF_EINVAL : 0);
  ALL_INT_EQ(dbuf_comm_check_equal(c, 1, NULL, same, &d), DBUF_EINVAL);
  dbuf_comm_destroy(c);
}
END_TEST

/* Builds: the same everywhere passes; a version, wire format or schema that
 * differs on the last rank is named with rank 0's build; a missing record
 * fails every rank. */
START_TEST(test_check_build)
{
  dbuf_comm_t *c = world();
  dbuf_comm_build_t b, other;
  dbuf_diag_t d;
  char want[DBUF_DIAG_LEN];
  const int last = size - 1;
  ALL_INT_EQ(dbuf_comm_build_init(NULL), DBUF_EINVAL);
  ALL_INT_EQ(dbuf_comm_build_init(&b), 0);
  ALL_STR_EQ(b.version, dbuf_version_string());
  ALL_INT_EQ(b.wire, DBUF_WIRE_VERSION);
  ALL_INT_EQ(b.plan_wire, DBUF_WIRE_PLAN_VERSION);
  ALL_INT_EQ(b.schema, 0);
  b.schema = 0x5c1e;
  dbuf_diag_clear(&d);
  ALL_INT_EQ(dbuf_comm_check_build(c, &b, "options", &d), 0);
  ALL_STR_EQ(d.msg, "");
  for (int k = 0; k < 3; k++) {
    other = b;
    if (k == 0)
      snprintf(other.version, sizeof other.version, "%.60s.1", b.version);
    else if (k == 1)
      other.wire = -7;
    else
      other.schema = 0xfffffffeu;
    dbuf_diag_clear(&d);
    int rc = dbuf_comm_check_build(c, rank == last ? &other : &b, k == 2 ? NULL : "options", &d);
    const char *name = k == 2 ? "schema" : "options";
    snprintf(want, sizeof want,
             "the ranks run different builds: rank 0 has %s (wire %d, plan %d, %s 00005c1e), "
             "rank %d has %s (wire %d, plan %d, %s %08x)",
             b.version, b.wire, b.plan_wire, name, last, other.version, other.wire, other.plan_wire,
             name, (unsigned)other.schema);
    ALL_INT_EQ(rc, size > 1 ? DBUF_EMISMATCH : 0);
    ALL_STR_EQ(d.msg, size > 1 ? want : "");
  }
  /* A version longer than a record holds is cut to 63 bytes, on both sides. */
  memset(other.version, 'v', sizeof other.version - 1);
  other.version[sizeof other.version - 1] = '\0';
  other.schema = b.schema;
  ALL_INT_EQ(dbuf_comm_check_build(c, &other, NULL, &d), 0);
  /* No record on the last rank: every rank fails, naming it. */
  dbuf_diag_clear(&d);
  ALL_INT_EQ(dbuf_comm_check_build(c, rank == last ? NULL : &b, NULL, &d), DBUF_EINVAL);
  snprintf(want, sizeof want, "rank %d: no build to compare", last);
  ALL_STR_EQ(d.msg, want);
  dbuf_comm_destroy(c);
}
END_TEST

/* The exchange is frozen: a rank that makes its documented calls by hand,
 * as a build of another version would, meets the others' in the same
 * calls and is named with its record. */
START_TEST(test_check_build_frozen)
{
  dbuf_comm_t *c = world();
  dbuf_comm_build_t b;
  dbuf_diag_t d;
  dbuf_diag_clear(&d);
  ALL_INT_EQ(dbuf_comm_build_init(&b), 0);
  int rc = 0;
  const int odd = size - 1;
  if (rank == odd && size > 1) {
    unsigned char root[80], rec[80] = "9.9.9";
    const unsigned char nums[12] = {7, 0, 0, 0, 8, 0, 0, 0, 0x01, 0xef, 0xcd, 0xab};
    memcpy(rec + 64, nums, sizeof nums);
    MPI_Comm comm = dbuf_comm_mpi(c);
    int low[2] = {rank, INT_MAX};
    int ok = MPI_Bcast(root, 80, MPI_BYTE, 0, comm) == MPI_SUCCESS &&
             MPI_Allreduce(MPI_IN_PLACE, low, 2, MPI_INT, MPI_MIN, comm) == MPI_SUCCESS &&
             low[0] == odd && low[1] == INT_MAX &&
             MPI_Bcast(rec, 80, MPI_BYTE, low[0], comm) == MPI_SUCCESS;
    rc = ok && strcmp((char *)root, b.version) == 0 ? DBUF_EMISMATCH : DBUF_EINVAL;
  } else {
    rc = dbuf_comm_check_build(c, &b, NULL, &d);
  }
  ALL_INT_EQ(rc, size > 1 ? DBUF_EMISMATCH : 0);
  char want[DBUF_DIAG_LEN];
  snprintf(want, sizeof want, "rank %d has 9.9.9 (wire 7, plan 8, schema abcdef01)", odd);
  if (size > 1 && rank != odd)
    ALL_HAS(d.msg, want);
  else
    ALL_TRUE(1);
  dbuf_comm_destroy(c);
}
END_TEST

/* Without a context nothing is collective: every call refuses at once, on
 * whichever ranks make it (here all of them), and writes no output. */
START_TEST(test_null_context)
{
  int g = 42;
  dbuf_diag_t d;
  dbuf_diag_clear(&d);
  dbuf_layout_t *l = test_layout_ok(DBUF_LAYOUT_UNPADDED, size), *got = NULL;
  int64_t s = dbuf_layout_range(l)[rank], e = dbuf_layout_range(l)[rank + 1];
  uint16_t seg[1] = {0};
  dbuf_verdict_t v;
  dbuf_comm_nodemap_t m;
  const char *names[] = {"option --a"}, *vals[] = {"x"};
  ALL_INT_EQ(dbuf_comm_set_chunk(NULL, 64), DBUF_EINVAL);
  ALL_INT_EQ(dbuf_comm_agree(NULL, 0, &g), DBUF_EINVAL);
  ALL_INT_EQ(g, 42);
  ALL_INT_EQ(dbuf_comm_agree_diag(NULL, 0, &d), DBUF_EINVAL);
  ALL_INT_EQ(dbuf_comm_bcast_layout(NULL, 0, NULL, l, size, &got, NULL, &d), DBUF_EINVAL);
  ALL_TRUE(got == NULL);
  ALL_INT_EQ(dbuf_comm_nodes(NULL, &m, &d), DBUF_EINVAL);
  ALL_INT_EQ(dbuf_comm_check_inputs(NULL, 42, 1, &d), DBUF_EINVAL);
  ALL_INT_EQ(dbuf_comm_gather(NULL, &g, sizeof g, &g), DBUF_EINVAL);
  ALL_INT_EQ(dbuf_comm_verify_structure(NULL, l, 0, s, e, &v), DBUF_EINVAL);
  ALL_INT_EQ(dbuf_comm_verify_data(NULL, l, s, e, seg, 2, 4, &v), DBUF_EINVAL);
  ALL_INT_EQ(dbuf_comm_check_equal(NULL, 1, names, vals, &d), DBUF_EINVAL);
  dbuf_comm_build_t b;
  ALL_INT_EQ(dbuf_comm_build_init(&b), 0);
  ALL_INT_EQ(dbuf_comm_check_build(NULL, &b, NULL, &d), DBUF_EINVAL);
  dbuf_layout_destroy(l);
}
END_TEST

/* The load proof's checkers for node[n] (node ids as given, nnodes of them):
 * "" when every rank has exactly one checker, on another node when there
 * are two nodes or more (else the next rank), the lists agree with the
 * checkers, and the most ranks a checker reads is the bound; else what is
 * wrong, in why. */
static void
checkers_hold(int n, const int *node, int nnodes, char *why, size_t len)
{
  int checker[8], first[9], checked[8], seen[8] = {0}, count[8] = {0}, got = -1, m = 0, most = 0;
  int rc = dbuf__load_checkers(n, node, checker, first, checked, &got);
  why[0] = '\0';
  if (rc != 0) {
    snprintf(why, len, "returned %d", rc);
    return;
  }
  if (got != nnodes || first[0] != 0 || first[n] != n) {
    snprintf(why, len, "%d nodes (want %d), first[0] %d, first[n] %d", got, nnodes, first[0],
             first[n]);
    return;
  }
  for (int r = 0; r < n; r++)
    m = ++count[node[r]] > m ? count[node[r]] : m;
  /* One node or none with more than half: one each; else the least the
   * largest node's ranks allow, spread over the others. */
  int bound = nnodes == 1 || 2 * m <= n ? 1 : (m + (n - m) - 1) / (n - m);
  for (int c = 0; c < n && !why[0]; c++) {
    most = first[c + 1] - first[c] > most ? first[c + 1] - first[c] : most;
    for (int k = first[c]; k < first[c + 1] && !why[0]; k++) {
      int r = checked[k];
      if (r < 0 || r >= n || seen[r]++ || checker[r] != c || (k > first[c] && checked[k - 1] >= r))
        snprintf(why, len, "rank %d checks rank %d, whose checker is %d", c, r,
                 r >= 0 && r < n ? checker[r] : -1);
    }
  }
  for (int r = 0; r < n && !why[0]; r++)
    if (nnodes > 1 ? node[checker[r]] == node[r] : checker[r] != (r + 1) % n)
      snprintf(why, len, "rank %d (node %d) checked by rank %d (node %d)", r, node[r], checker[r],
               node[checker[r]]);
  if (!why[0] && most != bound)
    snprintf(why, len, "a checker reads %d ranks' rows, want %d", most, bound);
}

/* dbuf__load_checkers (pure, so the same on every rank) for every way to
 * put nranks = _i ranks on up to 4 nodes, interleaved or not: node ids by
 * first appearance (a restricted growth string), and again as each node's
 * lowest rank (as the proof names them). */
START_TEST(test_load_checkers)
{
  int n = _i, node[8] = {0}, lead[8], max[8], nodes, tried = 0;
  char why[200] = "", what[300] = "";
  for (;;) {
    nodes = 0;
    for (int r = 0, q; r < n; r++) {
      nodes = node[r] + 1 > nodes ? node[r] + 1 : nodes;
      for (q = 0; node[q] != node[r]; q++)
        ;
      lead[r] = q; /* the lowest rank of its node */
    }
    for (int pass = 0; pass < 2 && !what[0]; pass++) {
      checkers_hold(n, pass ? lead : node, nodes, why, sizeof why);
      if (why[0]) {
        int at = snprintf(what, sizeof what, "nodes");
        for (int r = 0; r < n && at < (int)sizeof what; r++)
          at += snprintf(what + at, sizeof what - (size_t)at, " %d", node[r]);
        snprintf(what + at, at < (int)sizeof what ? sizeof what - (size_t)at : 0, ": %s", why);
      }
    }
    tried++;
    /* Next string: node[r] <= 1 + max of node[0 .. r - 1], at most 3. */
    int r = n - 1;
    max[0] = 0;
    for (int q = 1; q < n; q++)
      max[q] = node[q - 1] > max[q - 1] ? node[q - 1] : max[q - 1];
    while (r > 0 && (node[r] > max[r] || node[r] == 3))
      node[r--] = 0;
    if (r == 0 || what[0])
      break;
    node[r]++;
  }
  ALL_STR_EQ(what, "");
  /* Set partitions of n ranks into at most 4 blocks. */
  static const int partitions[9] = {0, 1, 2, 5, 15, 51, 187, 715, 2795};
  ALL_INT_EQ(tried, partitions[n]);
}
END_TEST

/* The rule on three spreads, entry by entry: 1 + 3 (rank 0 checks every
 * rank of the other node), 2 + 2 (the shift by two), and 1 + 3 + 1 (the
 * largest node's ranks alternate between ranks 4 and 0); and the invalid
 * arguments. */
START_TEST(test_load_checkers_cases)
{
  static const struct {
    int n, node[5], checker[5], first[6], checked[5];
  } c[] = {{4, {0, 1, 1, 1}, {1, 0, 0, 0}, {0, 3, 4, 4, 4}, {1, 2, 3, 0}},
           {4, {0, 0, 2, 2}, {2, 3, 0, 1}, {0, 1, 2, 3, 4}, {2, 3, 0, 1}},
           {5, {0, 1, 1, 1, 4}, {2, 4, 0, 4, 1}, {0, 1, 2, 3, 3, 5}, {2, 4, 0, 1, 3}}};
  for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
    int checker[5], first[6], checked[5], nn = 0;
    ALL_INT_EQ(dbuf__load_checkers(c[i].n, c[i].node, checker, first, checked, &nn), 0);
    ALL_INT_EQ(memcmp(checker, c[i].checker, (size_t)c[i].n * sizeof *checker), 0);
    ALL_INT_EQ(memcmp(first, c[i].first, (size_t)(c[i].n + 1) * sizeof *first), 0);
    ALL_INT_EQ(memcmp(checked, c[i].checked, (size_t)c[i].n * sizeof *checked), 0);
  }
  int node[2] = {0, 2}, checker[2], first[3], checked[2];
  ALL_INT_EQ(dbuf__load_checkers(0, node, checker, first, checked, NULL), DBUF_EINVAL);
  ALL_INT_EQ(dbuf__load_checkers(2, node, checker, first, checked, NULL), DBUF_EINVAL);
  node[1] = -1;
  ALL_INT_EQ(dbuf__load_checkers(2, node, checker, first, checked, NULL), DBUF_EINVAL);
  node[1] = 1;
  ALL_INT_EQ(dbuf__load_checkers(2, NULL, checker, first, checked, NULL), DBUF_EINVAL);
  ALL_INT_EQ(dbuf__load_checkers(2, node, NULL, first, checked, NULL), DBUF_EINVAL);
  ALL_INT_EQ(dbuf__load_checkers(2, node, checker, NULL, checked, NULL), DBUF_EINVAL);
  ALL_INT_EQ(dbuf__load_checkers(2, node, checker, first, NULL, NULL), DBUF_EINVAL);
  ALL_INT_EQ(dbuf__load_checkers(2, node, checker, first, checked, NULL), 0);
  ALL_INT_EQ(checker[0] * 10 + checker[1], 10); /* two nodes: each checks the other */
  ALL_INT_EQ(dbuf__load_checkers(1, node, checker, first, checked, NULL), 0);
  ALL_INT_EQ(checker[0], 0); /* one rank checks itself */
}
END_TEST

/* A root status that is not an error code (positive) still fails every rank
 * with a negative one, not with success. */
START_TEST(test_bcast_positive_status)
{
  dbuf_comm_t *c = world();
  dbuf_layout_t *l = test_layout_ok(DBUF_LAYOUT_PADDED, size), *got = NULL;
  dbuf_diag_t d;
  dbuf_diag_clear(&d);
  int rc = dbuf_comm_bcast_layout(c, rank == 0 ? 3 : 0, rank == 0 ? "odd status" : NULL,
                                  rank == 0 ? l : NULL, size, &got, NULL, &d);
  ALL_INT_EQ(rc, DBUF_EINVAL);
  ALL_TRUE(got == NULL);
  ALL_STR_EQ(d.msg, "odd status");
  dbuf_layout_destroy(l);
  dbuf_comm_destroy(c);
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
  tcase_add_test(tc, test_bcast_plan);
  tcase_add_loop_test(tc, test_share_plan, 0, 2);
  tcase_add_test(tc, test_announce_plan);
  tcase_add_test(tc, test_nodes_and_inputs);
  tcase_add_test(tc, test_gather);
  tcase_add_test(tc, test_structure_ok);
  tcase_add_test(tc, test_structure_shift);
  tcase_add_loop_test(tc, test_structure_proof, 0, 2);
  tcase_add_loop_test(tc, test_structure_stale, 0, 3);
  tcase_add_loop_test(tc, test_data, 0, 3);
  tcase_add_test(tc, test_create_agreed);
  tcase_add_test(tc, test_gather_agreed);
  tcase_add_test(tc, test_null_outputs_agreed);
  tcase_add_test(tc, test_global_args);
  tcase_add_test(tc, test_check_equal);
  tcase_add_test(tc, test_check_build);
  tcase_add_test(tc, test_check_build_frozen);
  tcase_add_test(tc, test_mismatched_calls);
  tcase_add_test(tc, test_null_context);
  tcase_add_test(tc, test_bcast_positive_status);
  tcase_add_loop_test(tc, test_load_checkers, 1, 9);
  tcase_add_test(tc, test_load_checkers_cases);
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
