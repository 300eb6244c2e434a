/*
 * MPI test of the collective load (dbuf_comm_load) and its proof
 * (dbuf_comm_verify_load), run by tests/mpi/test-load.sh at np 1, 2 and 4.
 *
 * Usage: mpi_load DIR (an empty, existing folder; rank 0 writes the
 * checkpoints there).  No Check: every condition is a CHECK that records a
 * failure on the rank and goes on, so that no rank ever skips a collective;
 * the failures are summed at the end and the exit code is 1 if any rank saw
 * one.  Outcomes that must be equal on every rank (codes, messages) are
 * compared across the ranks explicitly.
 */
#define _XOPEN_SOURCE 700

#include "dbuf/comm.h"
#include "dbuf/load.h"
#include "st_write.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int rank, size, failures;
/* The context's chunk of the current tests (dbuf_comm_set_chunk()). */
static int64_t chunk_now = DBUF_COMM_CHUNK_BYTES;

#define CHECK(cond, ...)                                                                      \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      failures++;                                                                             \
      fprintf(stderr, "rank %d: FAIL %s:%d: %s: ", rank, __FILE__, __LINE__, #cond);          \
      fprintf(stderr, __VA_ARGS__);                                                           \
      fputc('\n', stderr);                                                                    \
    }                                                                                         \
  } while (0)

/* The model in layout order; the files hold it in another order. */
static const st_tensor_t model[] = {
    {"w.b", "BF16", 2, {13, 3}, 2}, {"w.a", "F32", 2, {11, 4}, 1},
    {"w.c", "F16", 1, {9}, 3},      {"w.z", "F32", 2, {0, 4}, 6},
    {"w.d", "F32", 2, {6, 2}, 4},   {"w.e", "F16", 3, {7, 5, 2}, 5},
};
enum { NMODEL = 6 };
static const int file_order[NMODEL] = {1, 5, 0, 3, 4, 2};
static const char *shard[2] = {"model-00001-of-00002.safetensors",
                               "model-00002-of-00002.safetensors"};

static void
write_checkpoint(const char *dir)
{
  char path[4096];
  st_tensor_t in_file[NMODEL];
  for (int i = 0; i < NMODEL; i++)
    in_file[i] = model[file_order[i]];
  mkdir(dir, 0700);
  snprintf(path, sizeof path, "%s/%s", dir, shard[0]);
  CHECK(st_write(path, in_file, 3) == 0, "%s", path);
  snprintf(path, sizeof path, "%s/%s", dir, shard[1]);
  CHECK(st_write(path, in_file + 3, 3) == 0, "%s", path);
  snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
  int file_of[NMODEL] = {0, 0, 0, 1, 1, 1};
  CHECK(st_write_index(path, in_file, NMODEL, shard, file_of) == 0, "%s", path);
}

static dbuf_st_t *
open_st(const char *dir)
{
  char path[4096];
  const char *p = path;
  dbuf_st_t *st = NULL;
  dbuf_diag_t d;
  snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
  int rc = dbuf_st_open(&p, 1, NULL, 0, &st, &d);
  CHECK(rc == 0, "open %s: %s", path, d.msg);
  return st;
}

static dbuf_layout_t *
make_layout(dbuf_layout_kind_t kind)
{
  dbuf_tensors_t *t;
  dbuf_layout_t *l = NULL;
  dbuf_tensors_create(&t);
  for (int i = 0; i < NMODEL; i++)
    dbuf_tensors_add(t, model[i].name, model[i].ndim, model[i].dims, NULL);
  dbuf_layout_params_t p;
  dbuf_layout_params_init(&p);
  p.kind = kind;
  p.nranks = size;
  dbuf_diag_t d;
  int rc = dbuf_layout_build(t, &p, &l, &d);
  CHECK(rc == 0, "layout: %s", d.msg);
  dbuf_tensors_destroy(t);
  return l;
}

/* The same code and message on every rank? */
static void
check_same_everywhere(int rc, const char *msg, const char *what)
{
  char m0[DBUF_DIAG_LEN];
  int rc0 = rc;
  snprintf(m0, sizeof m0, "%s", msg);
  MPI_Bcast(&rc0, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Bcast(m0, (int)sizeof m0, MPI_CHAR, 0, MPI_COMM_WORLD);
  CHECK(rc == rc0 && strcmp(msg, m0) == 0, "%s: rank 0 has %d \"%s\", this rank %d \"%s\"", what,
        rc0, m0, rc, msg);
}

static int64_t
file_bytes_total(void)
{
  int64_t b = 0;
  for (int i = 0; i < NMODEL; i++)
    b += st_numel(&model[i]) * st_elem(model[i].dtype);
  return b;
}

static const dbuf_io_t ios[3] = {DBUF_IO_POSIX, DBUF_IO_MPIIO, DBUF_IO_MPIIO_COLL};
static const dbuf_layout_kind_t kinds[3] = {DBUF_LAYOUT_PADDED, DBUF_LAYOUT_UNPADDED,
                                            DBUF_LAYOUT_COMPACT};
static const dbuf_dtype_t dtypes[3] = {DBUF_DTYPE_F32, DBUF_DTYPE_BF16, DBUF_DTYPE_F16};

/* Load, prove, flip one byte of one row, prove again. */
static void
test_load_verify(dbuf_comm_t *ctx, const dbuf_st_t *st, int k, int io, int dt)
{
  char what[128];
  snprintf(what, sizeof what, "%s, io %s, %s", dbuf_layout_kind_name(kinds[k]),
           dbuf_io_name(ios[io]), dbuf_dtype_name(dtypes[dt]));
  dbuf_layout_t *l = make_layout(kinds[k]);
  int64_t s = 0, e = 0, es = dbuf_dtype_size(dtypes[dt]);
  dbuf_layout_rank_range(l, rank, &s, &e);
  int64_t nb = (e - s) * es;
  unsigned char *mem = malloc((size_t)nb + 1);
  memset(mem, 0xa5, (size_t)nb + 1);
  dbuf_comm_load_stats_t ls;
  dbuf_diag_t d;
  int rc = dbuf_comm_load(ctx, l, s, e, dtypes[dt], st, mem, nb, ios[io], NULL, NULL, &ls, &d);
  CHECK(rc == 0, "%s: load: %s", what, d.msg);
  int64_t rows = 0;
  for (int i = 0; i < NMODEL; i++)
    rows += model[i].dims[0];
  CHECK(ls.total.rows == rows, "%s: rows %lld, want %lld", what, (long long)ls.total.rows,
        (long long)rows);
  CHECK(ls.total.bytes == file_bytes_total(), "%s: bytes %lld, want %lld", what,
        (long long)ls.total.bytes, (long long)file_bytes_total());
  CHECK(ls.total.files == 2, "%s: files %lld", what, (long long)ls.total.files);
  CHECK(ls.total.tensors == NMODEL - 1, "%s: tensors %lld", what, (long long)ls.total.tensors);
  CHECK(ls.total.convert.changed == 0, "%s: changed values", what);
  if (ios[io] == DBUF_IO_MPIIO_COLL && chunk_now == DBUF_COMM_CHUNK_BYTES) {
    /* One collective read per file the rank reads (its extents of a file,
     * a few hundred bytes, fit one batch): the files among its extents. */
    dbuf_load_plan_t *plan = NULL;
    int64_t next = 0, nfiles = 0;
    dbuf_load_plan_create(l, s, e, dtypes[dt], st, &plan, NULL);
    const dbuf_load_extent_t *x = dbuf_load_plan_extents(plan, &next);
    for (int64_t i = 0; i < next; i++)
      nfiles += i == 0 || x[i].file != x[i - 1].file;
    CHECK(ls.local.reads == nfiles, "%s: %lld collective reads, want one per file (%lld)", what,
          (long long)ls.local.reads, (long long)nfiles);
    dbuf_load_plan_destroy(plan);
  }

  dbuf_load_verdict_t v;
  rc = dbuf_comm_verify_load(ctx, l, s, e, dtypes[dt], st, mem, nb, &v);
  CHECK(rc == 0 && v.code == 0, "%s: verify: %s", what, v.msg);
  CHECK(v.rows == rows && v.tensors == NMODEL && v.bytes == file_bytes_total(),
        "%s: verify figures %lld rows %lld tensors %lld bytes", what, (long long)v.rows,
        (long long)v.tensors, (long long)v.bytes);
  CHECK(strncmp(v.msg, "PASS", 4) == 0, "%s: %s", what, v.msg);
  /* One machine: another rank checks, or at one rank the rank itself. */
  const char *by = size == 1 ? "the same rank" : "another rank";
  char tail[64];
  snprintf(tail, sizeof tail, " checked against the checkpoint by %s", by);
  CHECK(v.checked_by != NULL && strcmp(v.checked_by, by) == 0 && strlen(v.msg) > strlen(tail) &&
            strcmp(v.msg + strlen(v.msg) - strlen(tail), tail) == 0,
        "%s: checked by \"%s\", want \"%s\": %s", what, v.checked_by ? v.checked_by : "(null)", by,
        v.msg);

  /* The fault: the first byte of row R of w.a on the highest rank holding
   * rows of it, R its first row there. */
  int64_t np = 0;
  dbuf_piece_t pc[64];
  dbuf_layout_tensor_pieces(l, 1, pc, 64, &np);
  int victim = pc[np - 1].rank;
  int64_t row = pc[np - 1].first_row;
  if (rank == victim)
    mem[pc[np - 1].offset * es] ^= 0x01;
  rc = dbuf_comm_verify_load(ctx, l, s, e, dtypes[dt], st, mem, nb, &v);
  CHECK(rc == DBUF_EVERIFY && v.code == DBUF_EVERIFY, "%s: flipped byte not caught: %s", what,
        v.msg);
  CHECK(v.bad_tensors == 1 && v.nlisted == 1 && v.listed[0].tensor == 1 &&
            v.listed[0].row == row && v.listed[0].rank == victim && v.listed[0].nrows == 1,
        "%s: listed %lld: tensor %lld row %lld rank %d (want row %lld rank %d): %s", what,
        (long long)v.nlisted, (long long)v.listed[0].tensor, (long long)v.listed[0].row,
        v.listed[0].rank, (long long)row, victim, v.msg);
  char want[128];
  snprintf(want, sizeof want, "tensor w.a row %lld (rank %d)", (long long)row, victim);
  CHECK(strstr(v.msg, want) != NULL, "%s: message \"%s\" lacks \"%s\"", what, v.msg, want);
  check_same_everywhere(rc, v.msg, what);
  if (rank == victim)
    mem[pc[np - 1].offset * es] ^= 0x01;

  /* Padding that is not zero, on the last rank that has padding. */
  int64_t has_pad = 0;
  {
    dbuf_load_plan_t *plan = NULL;
    dbuf_load_plan_create(l, s, e, dtypes[dt], st, &plan, NULL);
    int64_t nz = 0;
    const dbuf_load_zero_t *z = dbuf_load_plan_zeros(plan, &nz);
    has_pad = nz > 0 ? rank : -1;
    int64_t last = has_pad;
    MPI_Allreduce(&has_pad, &last, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
    if (last == rank)
      mem[z[nz - 1].dst_offset + z[nz - 1].bytes - 1] = 0x5a;
    if (last >= 0) {
      rc = dbuf_comm_verify_load(ctx, l, s, e, dtypes[dt], st, mem, nb, &v);
      snprintf(want, sizeof want, "rank %lld: padding at global element", (long long)last);
      CHECK(rc == DBUF_EVERIFY && v.bad_padding == 1 && strstr(v.msg, want) != NULL,
            "%s: padding fault: %s", what, v.msg);
      check_same_everywhere(rc, v.msg, what);
    }
    dbuf_load_plan_destroy(plan);
  }
  free(mem);
  dbuf_layout_destroy(l);
}

/* A file missing, or shorter than its header says, on the last rank only. */
static void
test_fault(dbuf_comm_t *ctx, const char *base, int io, int truncate_it)
{
  char what[128], mine[3000], path[4096];
  snprintf(what, sizeof what, "%s file on rank %d, io %s", truncate_it ? "short" : "missing",
           size - 1, dbuf_io_name(ios[io]));
  int faulty = rank == size - 1;
  snprintf(mine, sizeof mine, "%.2000s/%s", base, faulty ? "bad" : "good");
  if (rank == 0) {
    write_checkpoint(mine);
    char bad[3000];
    snprintf(bad, sizeof bad, "%.2000s/bad", base);
    if (size > 1)
      write_checkpoint(bad);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  dbuf_st_t *st = open_st(mine);
  MPI_Barrier(MPI_COMM_WORLD);
  if (faulty) /* after the headers were read: the data goes */
    for (int i = 0; i < 2; i++) {
      snprintf(path, sizeof path, "%s/%s", mine, shard[i]);
      if (truncate_it) {
        struct stat sb;
        stat(path, &sb);
        CHECK(truncate(path, sb.st_size - 3) == 0, "truncate %s", path);
      } else {
        CHECK(unlink(path) == 0, "unlink %s", path);
      }
    }
  MPI_Barrier(MPI_COMM_WORLD);
  dbuf_layout_t *l = make_layout(DBUF_LAYOUT_UNPADDED);
  int64_t s = 0, e = 0;
  dbuf_layout_rank_range(l, rank, &s, &e);
  int64_t nb = (e - s) * 4;
  void *mem = malloc((size_t)nb + 1);
  dbuf_diag_t d;
  dbuf_diag_clear(&d);
  int rc = dbuf_comm_load(ctx, l, s, e, DBUF_DTYPE_F32, st, mem, nb, ios[io], NULL, NULL, NULL, &d);
  int want = truncate_it ? DBUF_EIO : DBUF_ENOTFOUND;
  CHECK(rc == want, "%s: code %d (%s), want %d: %s", what, rc, dbuf_err_name(rc), want, d.msg);
  char rank_prefix[64];
  snprintf(rank_prefix, sizeof rank_prefix, "rank %d: ", size - 1);
  CHECK(strncmp(d.msg, rank_prefix, strlen(rank_prefix)) == 0 && strstr(d.msg, "/bad/model-0000"),
        "%s: message \"%s\"", what, d.msg);
  if (truncate_it)
    CHECK(strstr(d.msg, "shorter than its header says") != NULL, "%s: message \"%s\"", what,
          d.msg);
  check_same_everywhere(rc, d.msg, what);
  free(mem);
  dbuf_layout_destroy(l);
  dbuf_st_destroy(st);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) { /* the next case writes them again */
    for (int i = 0; i < 2; i++) {
      snprintf(path, sizeof path, "%.2000s/bad/%s", base, shard[i]);
      unlink(path);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

int
main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc != 2) {
    if (rank == 0)
      fprintf(stderr, "usage: mpi_load DIR\n");
    MPI_Finalize();
    return 2;
  }
  dbuf_comm_t *ctx = NULL;
  if (dbuf_comm_create(MPI_COMM_WORLD, &ctx) != 0) {
    fprintf(stderr, "rank %d: dbuf_comm_create failed\n", rank);
    MPI_Finalize();
    return 1;
  }
  char dir[4096];
  snprintf(dir, sizeof dir, "%.2000s/ckpt", argv[1]);
  if (rank == 0)
    write_checkpoint(dir);
  MPI_Barrier(MPI_COMM_WORLD);
  dbuf_st_t *st = open_st(dir);
  for (int k = 0; k < 3; k++)
    for (int io = 0; io < 3; io++)
      for (int dt = 0; dt < 3; dt++)
        if (dt == 0 || k == 0) /* every dtype once, every kind and io with F32 */
          test_load_verify(ctx, st, k, io, dt);
  /* Tiny MPI chunks: many reads per extent, joined collectively. */
  dbuf_comm_set_chunk(ctx, chunk_now = 24);
  for (int io = 0; io < 3; io++)
    test_load_verify(ctx, st, 1, io, 1);
  /* Below the loader's 16-byte least read (the context allows 1): MPI-IO
   * reads at 16 bytes, as pread does, rather than failing. */
  dbuf_comm_set_chunk(ctx, chunk_now = 8);
  for (int io = 0; io < 3; io++)
    test_load_verify(ctx, st, 1, io, 1);
  dbuf_comm_set_chunk(ctx, chunk_now = DBUF_COMM_CHUNK_BYTES);
  dbuf_st_destroy(st);

  for (int io = 0; io < 3; io++) {
    test_fault(ctx, argv[1], io, 0);
    test_fault(ctx, argv[1], io, 1);
  }

  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0)
    printf("mpi_load at np %d: %s (%d failures)\n", size, total ? "FAIL" : "PASS", total);
  dbuf_comm_destroy(ctx);
  MPI_Finalize();
  return total ? 1 : 0;
}
