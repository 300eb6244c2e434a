/*
 * Collective load of one buffer from a safetensors checkpoint (pread or
 * MPI-IO), and the collective proof that the loaded rows equal the files.
 */
#include "comm_internal.h"
#include "core_internal.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static double
wtime(void)
{
  return MPI_Wtime();
}

/* ------------------------------------------------------------------------ */
/* MPI-IO readers                                                             */

typedef struct {
  const dbuf_st_t *st;
  MPI_File *fh; /* [nfiles], MPI_FILE_NULL where not open */
} mpiio_t;

static int
mpiio_error(const char *path, const char *what, int mpi_rc, dbuf_diag_t *diag)
{
  char s[MPI_MAX_ERROR_STRING];
  int len = 0, cls = 0;
  MPI_Error_class(mpi_rc, &cls);
  if (MPI_Error_string(mpi_rc, s, &len) != MPI_SUCCESS)
    snprintf(s, sizeof s, "MPI error %d", mpi_rc);
  int code = cls == MPI_ERR_NO_SUCH_FILE ? DBUF_ENOTFOUND : DBUF_EIO;
  if (diag != NULL) {
    diag->code = code;
    snprintf(diag->msg, sizeof diag->msg, "%.300s: %s (MPI-IO): %.150s", path, what, s);
  }
  return code;
}

static int
eof_error(const char *path, int64_t at, dbuf_diag_t *diag)
{
  if (diag != NULL) {
    diag->code = DBUF_EIO;
    snprintf(diag->msg, sizeof diag->msg,
             "%.400s: end of file at byte %" PRId64 ", before the data its header describes",
             path, at);
  }
  return DBUF_EIO;
}

/* Independent mode: one MPI_File_read_at per read of the executor. */
static int
mpiio_read(void *arg, int64_t file, int64_t offset, void *buf, int64_t bytes, dbuf_diag_t *diag)
{
  mpiio_t *m = arg;
  const char *path = dbuf_st_file_path(m->st, file);
  MPI_Status status;
  int n = 0, got = 0, rc;
  if (dbuf_comm_count(bytes, &n) != 0) { /* the executor's reads are at most the chunk */
    if (diag != NULL)
      snprintf(diag->msg, sizeof diag->msg, "%.400s: read of %" PRId64 " bytes", path, bytes);
    return DBUF_EOVERFLOW;
  }
  rc = MPI_File_read_at(m->fh[file], (MPI_Offset)offset, buf, n, MPI_BYTE, &status);
  if (rc != MPI_SUCCESS)
    return mpiio_error(path, "read failed", rc, diag);
  MPI_Get_count(&status, MPI_BYTE, &got);
  return got == n ? 0 : eof_error(path, offset + got, diag);
}

/* Open file f (comm: MPI_COMM_SELF or the file's readers) and check that it
 * is as long as its header says and still the same file.  On failure *fh
 * stays or becomes MPI_FILE_NULL only if the open failed. */
static int
mpiio_open(MPI_Comm comm, const dbuf_load_plan_t *plan, const dbuf_st_t *st, int64_t f,
           MPI_Info info, MPI_File *fh, dbuf_diag_t *diag)
{
  const char *path = dbuf_st_file_path(st, f);
  MPI_Offset size = 0;
  int mrc = MPI_File_open(comm, path, MPI_MODE_RDONLY, info, fh);
  if (mrc != MPI_SUCCESS) {
    *fh = MPI_FILE_NULL;
    return mpiio_error(path, "cannot open", mrc, diag);
  }
  if ((mrc = MPI_File_get_size(*fh, &size)) != MPI_SUCCESS)
    return mpiio_error(path, "cannot get the size", mrc, diag);
  if ((int64_t)size < dbuf_load_file_needed(plan, f)) {
    if (diag != NULL)
      snprintf(diag->msg, sizeof diag->msg,
               "%.400s: file is %lld bytes, shorter than its header says (%" PRId64 " bytes)",
               path, (long long)size, dbuf_load_file_needed(plan, f));
    return DBUF_EIO;
  }
  /* The same file as its header's?  By path, just after the open: an MPI
   * file handle has no descriptor. */
  return dbuf_st_file_check(st, f, -1, diag);
}

/* ------------------------------------------------------------------------ */
/* Collective MPI-IO                                                          */

/*
 * A collective read synchronizes its file's communicator, so:
 * - each file is opened on the communicator of the ranks that read it (one
 *   MPI_Comm_split per file, in file order on every rank): on the job's
 *   communicator, ranks that own different files would take turns, each
 *   waiting in empty reads while another reads (measured: 0.22x of cat where
 *   independent reads made 0.99x); ranks that share a file read it together;
 * - a rank's access to a file goes in as few calls as possible: a batch of
 *   its extents (up to the batch limit) becomes a file view (an hindexed
 *   file type of the extents' file ranges) and an hindexed memory type of
 *   their destinations, read by one MPI_File_read_at_all, so the aggregation
 *   layer sees the whole access pattern at once;
 * - every member of a file's communicator makes the same number of
 *   set_view + read_at_all pairs (the largest batch count, agreed), joining
 *   with empty ones when it has nothing left or failed, so an error on one
 *   rank never leaves the others waiting.
 */

/* Largest batch of one collective read (bytes): its count fits MPI's int. */
#define COLL_BATCH_BYTES ((int64_t)1 << 30)
/* Most extent pieces in one batch (the derived types' int counts). */
#define COLL_BATCH_PIECES ((int64_t)1 << 20)

/* The hints of the collective open.  Hints only: an MPI-IO library ignores
 * those it does not know, and the file system may too. */
static MPI_Info
coll_hints(void)
{
  MPI_Info info = MPI_INFO_NULL;
  if (MPI_Info_create(&info) != MPI_SUCCESS)
    return MPI_INFO_NULL;
  /* Each byte is read once, in increasing offsets. */
  MPI_Info_set(info, "access_style", "read_once,sequential");
  /* ROMIO: two-phase only where the ranks' accesses interleave (row
   * ranges of a file are disjoint, so usually none); larger aggregation
   * buffers where it does. */
  MPI_Info_set(info, "romio_cb_read", "automatic");
  /* ROMIO: no data sieving (it would read the other ranks' rows between
   * a rank's extents, and copy). */
  MPI_Info_set(info, "romio_ds_read", "disable");
  MPI_Info_set(info, "cb_buffer_size", "33554432");
  return info;
}

/* One piece of a batch: bytes of extent ext from `done` on, read straight
 * into the destination (bounce < 0) or into the bounce buffer at bounce. */
typedef struct {
  int64_t ext, done, bytes, bounce;
} piece_t;

/* A rank's walk over the extents [i, end) of one file. */
typedef struct {
  int64_t i, end, done;
} cursor_t;

/* The next batch of c: pieces in file order, at most lim bytes, the
 * converting ones (source dtype not the buffer's) at most bounce_cap bytes
 * together, in whole source elements.  Returns the piece count (0: no
 * extent left); pieces NULL only counts. */
static int64_t
next_batch(const dbuf_load_extent_t *ext, dbuf_dtype_t dtype, cursor_t *c, int64_t lim,
           int64_t bounce_cap, piece_t *pieces)
{
  int64_t np = 0, total = 0, inb = 0;
  while (c->i < c->end && np < COLL_BATCH_PIECES) {
    const dbuf_load_extent_t *e = &ext[c->i];
    int64_t left = e->bytes - c->done, n = left < lim - total ? left : lim - total;
    int conv = e->src_dtype != dtype;
    if (left <= 0) {
      c->i++;
      c->done = 0;
      continue;
    }
    if (conv) {
      int64_t es = dbuf_dtype_size(e->src_dtype);
      n = (n < bounce_cap - inb ? n : bounce_cap - inb) / es * es;
    }
    if (n <= 0)
      break;
    if (pieces != NULL)
      pieces[np] = (piece_t){c->i, c->done, n, conv ? inb : -1};
    np++;
    total += n;
    inb += conv ? n : 0;
    if ((c->done += n) == e->bytes) {
      c->i++;
      c->done = 0;
    }
  }
  return np;
}

/* What one rank's collective reads share. */
typedef struct {
  const dbuf_load_plan_t *plan;
  const dbuf_load_extent_t *ext;
  dbuf_dtype_t dtype;
  int64_t elem, lim, bounce_cap;
  char *dst, *bounce;
  piece_t *pieces;
  int *len;
  MPI_Aint *fdisp, *maddr;
} coll_t;

/* Where piece p goes in memory. */
static char *
piece_ptr(const coll_t *c, const piece_t *p)
{
  return p->bounce >= 0 ? c->bounce + p->bounce : c->dst + c->ext[p->ext].dst_offset + p->done;
}

/* One set_view + read_at_all on fh (collective on the file's communicator):
 * the np pieces, or an empty read for np 0. */
static int
read_batch(coll_t *c, MPI_File fh, const char *path, int64_t np, int64_t *got_bytes,
           dbuf_diag_t *diag)
{
  MPI_Datatype ft = MPI_DATATYPE_NULL, mt = MPI_DATATYPE_NULL;
  MPI_Offset base = np > 0 ? c->ext[c->pieces[0].ext].file_offset + c->pieces[0].done : 0;
  int64_t total = 0;
  int rc = 0, mrc;
  char dummy;
  for (int64_t k = 0; k < np; k++) {
    const piece_t *p = &c->pieces[k];
    const dbuf_load_extent_t *e = &c->ext[p->ext];
    c->len[k] = (int)p->bytes; /* at most the batch limit */
    c->fdisp[k] = (MPI_Aint)(e->file_offset + p->done - base);
    MPI_Get_address(piece_ptr(c, p), &c->maddr[k]);
    total += p->bytes;
  }
  /* One piece (a rank's usual share of a file): a plain view and read. */
  int single = np == 1;
  if (np > 1 &&
      (MPI_Type_create_hindexed((int)np, c->len, c->fdisp, MPI_BYTE, &ft) != MPI_SUCCESS ||
       MPI_Type_commit(&ft) != MPI_SUCCESS ||
       MPI_Type_create_hindexed((int)np, c->len, c->maddr, MPI_BYTE, &mt) != MPI_SUCCESS ||
       MPI_Type_commit(&mt) != MPI_SUCCESS)) {
    rc = DBUF_EMPI;
    snprintf(diag->msg, sizeof diag->msg, "%.400s: cannot build the read's MPI datatypes", path);
    np = 0; /* still join the others' read */
  }
  MPI_Status status;
  if ((mrc = MPI_File_set_view(fh, np > 1 ? base : 0, MPI_BYTE, np > 1 ? ft : MPI_BYTE,
                               "native", MPI_INFO_NULL)) != MPI_SUCCESS) {
    if (rc == 0)
      rc = mpiio_error(path, "cannot set the file view", mrc, diag);
    np = 0;
  }
  if (np == 1 && single)
    mrc = MPI_File_read_at_all(fh, base, piece_ptr(c, &c->pieces[0]), c->len[0], MPI_BYTE,
                               &status);
  else if (np > 1)
    mrc = MPI_File_read_at_all(fh, 0, MPI_BOTTOM, 1, mt, &status);
  else
    mrc = MPI_File_read_at_all(fh, 0, &dummy, 0, MPI_BYTE, &status);
  if (rc == 0 && mrc != MPI_SUCCESS)
    rc = mpiio_error(path, "read failed", mrc, diag);
  if (rc == 0 && np > 0) {
    int got = 0;
    MPI_Get_count(&status, MPI_BYTE, &got);
    if (got != total) { /* the byte of the file where the data ran out */
      int64_t k = 0, left = got;
      while (k < np - 1 && left >= c->pieces[k].bytes)
        left -= c->pieces[k++].bytes;
      rc = eof_error(path, base + c->fdisp[k] + left, diag);
    }
  }
  if (ft != MPI_DATATYPE_NULL)
    MPI_Type_free(&ft);
  if (mt != MPI_DATATYPE_NULL)
    MPI_Type_free(&mt);
  *got_bytes = rc == 0 ? total : 0;
  return rc;
}

/* Convert the pieces of a batch that went to the bounce buffer. */
static int
convert_batch(coll_t *c, int64_t np, dbuf_load_stats_t *s, dbuf_diag_t *diag)
{
  int rc = 0;
  for (int64_t k = 0; k < np && rc == 0; k++) {
    const piece_t *p = &c->pieces[k];
    const dbuf_load_extent_t *e = &c->ext[p->ext];
    if (p->bounce < 0)
      continue;
    int64_t es = dbuf_dtype_size(e->src_dtype);
    rc = dbuf_convert(c->dtype, c->dst + e->dst_offset + p->done / es * c->elem, e->src_dtype,
                      c->bounce + p->bounce, p->bytes / es, &s->convert, diag);
  }
  return rc;
}

/* Collective on ctx: open every file some rank reads on the communicator of
 * its readers (after a local check agreed by every rank), check sizes, read
 * in agreed batches, close.  Every failure is agreed (*agreed = 1). */
static int
load_coll(dbuf_comm_t *ctx, const dbuf_load_plan_t *plan, const dbuf_st_t *st,
          dbuf_dtype_t dtype, void *dst, int64_t dst_bytes, dbuf_progress_fn progress,
          void *progress_arg, dbuf_load_stats_t *stats, dbuf_diag_t *diag)
{
  int64_t nf = dbuf_st_file_count(st), next = 0;
  const dbuf_load_extent_t *ext = dbuf_load_plan_extents(plan, &next);
  int64_t maxp = next < COLL_BATCH_PIECES ? next : COLL_BATCH_PIECES;
  coll_t c = {plan, ext, dtype, dbuf_dtype_size(dtype), 0, 0, dst, NULL, NULL, NULL, NULL, NULL};
  /* The context's chunk (tiny in tests, to exercise batching) bounds a
   * batch; the bounce buffer as the executor's. */
  c.lim = ctx->chunk < COLL_BATCH_BYTES ? ctx->chunk : COLL_BATCH_BYTES;
  c.lim = c.lim < 16 ? 16 : c.lim;
  c.bounce_cap = c.lim < DBUF_LOAD_BOUNCE_BYTES ? c.lim : DBUF_LOAD_BOUNCE_BYTES;
  int64_t n2 = nf > 0 ? nf : 1;
  /* [0, nf): this rank reads f; [nf, 2 nf): some rank does; [2 nf, 3 nf):
   * batches (agreed max); first[f]: f's first extent. */
  int64_t *v = calloc((size_t)(3 * n2), sizeof *v), *first = calloc((size_t)n2 + 1, sizeof *first);
  MPI_File *fh = malloc((size_t)n2 * sizeof *fh);
  MPI_Comm *sub = malloc((size_t)n2 * sizeof *sub);
  c.pieces = malloc((size_t)(maxp > 0 ? maxp : 1) * sizeof *c.pieces);
  c.len = malloc((size_t)(maxp > 0 ? maxp : 1) * sizeof *c.len);
  c.fdisp = malloc((size_t)(maxp > 0 ? maxp : 1) * sizeof *c.fdisp);
  c.maddr = malloc((size_t)(maxp > 0 ? maxp : 1) * sizeof *c.maddr);
  dbuf_load_stats_t s;
  int rc = 0, g;
  double t0 = wtime();
  if (v == NULL || first == NULL || fh == NULL || sub == NULL || c.pieces == NULL ||
      c.len == NULL || c.fdisp == NULL || c.maddr == NULL) {
    rc = DBUF_ENOMEM;
    snprintf(diag->msg, sizeof diag->msg, "load: out of memory");
  }
  for (int64_t f = 0; fh != NULL && sub != NULL && f < nf; f++) {
    fh[f] = MPI_FILE_NULL;
    sub[f] = MPI_COMM_NULL;
  }
  /* Extents are by file: first[f] .. first[f + 1]. */
  for (int64_t i = 0, f = 0; rc == 0 && f <= nf; f++) {
    while (i < next && ext[i].file < f)
      i++;
    first[f] = i;
  }
  for (int64_t f = 0; rc == 0 && f < nf; f++) {
    cursor_t cur = {first[f], first[f + 1], 0};
    v[f] = v[nf + f] = dbuf_load_plan_uses_file(plan, f);
    while (next_batch(ext, dtype, &cur, c.lim, c.bounce_cap, NULL) > 0)
      v[2 * nf + f]++;
  }
  if ((g = dbuf_comm_agree_diag(ctx, rc, diag)) != 0) {
    rc = g;
    goto out;
  }
  if (dbuf__comm_allreduce_i64(ctx, v + nf, 2 * nf, MPI_MAX) != 0)
    rc = DBUF_EMPI;
  /* A local look first: a file missing on one node must not hang the
   * collective open. */
  for (int64_t f = 0; rc == 0 && f < nf; f++) {
    const char *path = dbuf_st_file_path(st, f);
    if (v[f] && access(path, R_OK) != 0) {
      rc = DBUF_ENOTFOUND;
      snprintf(diag->msg, sizeof diag->msg, "%.400s: cannot open: not readable on this node",
               path);
    }
  }
  if ((g = dbuf_comm_agree_diag(ctx, rc, diag)) != 0) {
    rc = g;
    goto out;
  }
  /* Each file's readers (collective on ctx, in file order on every rank). */
  for (int64_t f = 0; f < nf; f++)
    if (v[nf + f] &&
        MPI_Comm_split(ctx->comm, v[f] ? 0 : MPI_UNDEFINED, ctx->rank, &sub[f]) != MPI_SUCCESS &&
        rc == 0) {
      rc = DBUF_EMPI;
      snprintf(diag->msg, sizeof diag->msg, "load: MPI_Comm_split failed");
    }
  if ((g = dbuf_comm_agree_diag(ctx, rc, diag)) != 0) {
    rc = g;
    goto out;
  }
  MPI_Info info = coll_hints();
  for (int64_t f = 0; f < nf; f++) {
    if (sub[f] == MPI_COMM_NULL)
      continue;
    dbuf_diag_t d;
    dbuf_diag_clear(&d);
    int orc = mpiio_open(sub[f], plan, st, f, info, &fh[f], &d);
    if (orc != 0 && rc == 0) {
      rc = orc;
      *diag = d;
      diag->code = orc;
    }
  }
  if (info != MPI_INFO_NULL)
    MPI_Info_free(&info);
  if ((g = dbuf_comm_agree_diag(ctx, rc, diag)) != 0) {
    rc = g;
    goto out;
  }
  dbuf_load_plan_stats(plan, &s);
  int64_t zn = 0, got = 0;
  const dbuf_load_zero_t *z = dbuf_load_plan_zeros(plan, &zn);
  if (dst_bytes != dbuf_load_plan_dst_bytes(plan)) {
    rc = DBUF_EINVAL;
    snprintf(diag->msg, sizeof diag->msg, "load: destination is %" PRId64
             " bytes, the range needs %" PRId64, dst_bytes, dbuf_load_plan_dst_bytes(plan));
  }
  for (int64_t k = 0; rc == 0 && k < zn; k++)
    memset(c.dst + z[k].dst_offset, 0, (size_t)z[k].bytes);
  for (int64_t f = 0; f < nf; f++) {
    if (sub[f] == MPI_COMM_NULL)
      continue;
    cursor_t cur = {first[f], first[f + 1], 0};
    for (int64_t b = 0; b < v[2 * nf + f]; b++) {
      /* After a failure: empty reads, only to join the others. */
      int64_t np = rc == 0 ? next_batch(ext, dtype, &cur, c.lim, c.bounce_cap, c.pieces) : 0, n;
      if (np > 0 && c.bounce == NULL && c.bounce_cap > 0 &&
          (c.bounce = malloc((size_t)c.bounce_cap)) == NULL) {
        rc = DBUF_ENOMEM;
        snprintf(diag->msg, sizeof diag->msg, "load: no room for a bounce buffer");
        np = 0;
      }
      int brc = read_batch(&c, fh[f], dbuf_st_file_path(st, f), np, &n, diag);
      if (brc == 0 && np > 0) {
        s.reads++;
        brc = convert_batch(&c, np, &s, diag);
      }
      if (rc == 0 && brc != 0)
        rc = brc;
      got += n;
      if (rc == 0 && np > 0 && progress != NULL && progress(got, s.bytes, progress_arg) != 0) {
        rc = DBUF_ECANCELED;
        snprintf(diag->msg, sizeof diag->msg,
                 "load stopped by the caller after %" PRId64 " of %" PRId64 " bytes", got,
                 s.bytes);
      }
    }
  }
  rc = dbuf_comm_agree_diag(ctx, rc, diag);
out:
  for (int64_t f = 0; fh != NULL && sub != NULL && f < nf; f++) {
    if (fh[f] != MPI_FILE_NULL)
      MPI_File_close(&fh[f]);
    if (sub[f] != MPI_COMM_NULL)
      MPI_Comm_free(&sub[f]);
  }
  free(v);
  free(first);
  free(fh);
  free(sub);
  free(c.pieces);
  free(c.len);
  free(c.fdisp);
  free(c.maddr);
  free(c.bounce);
  if (rc == 0 && stats != NULL) {
    s.seconds = wtime() - t0;
    *stats = s;
  }
  return rc;
}

/* Independent: open the files of the plan on MPI_COMM_SELF, check sizes,
 * read with the executor, close. */
static int
load_mpiio(const dbuf_load_plan_t *plan, const dbuf_st_t *st, void *dst, int64_t dst_bytes,
           int64_t chunk, dbuf_progress_fn progress, void *progress_arg,
           dbuf_load_stats_t *stats, dbuf_diag_t *diag)
{
  int64_t nf = dbuf_st_file_count(st);
  MPI_File *fh = malloc((size_t)(nf > 0 ? nf : 1) * sizeof *fh);
  int rc = 0;
  double t0 = wtime();
  if (fh == NULL) {
    snprintf(diag->msg, sizeof diag->msg, "load: out of memory");
    return DBUF_ENOMEM;
  }
  for (int64_t f = 0; f < nf; f++)
    fh[f] = MPI_FILE_NULL;
  for (int64_t f = 0; rc == 0 && f < nf; f++)
    if (dbuf_load_plan_uses_file(plan, f))
      rc = mpiio_open(MPI_COMM_SELF, plan, st, f, MPI_INFO_NULL, &fh[f], diag);
  if (rc == 0) {
    mpiio_t m = {st, fh};
    rc = dbuf_load_execute(plan, dst, dst_bytes, chunk, mpiio_read, &m, progress, progress_arg,
                           stats, diag);
  }
  for (int64_t f = 0; f < nf; f++)
    if (fh[f] != MPI_FILE_NULL)
      MPI_File_close(&fh[f]);
  free(fh);
  if (rc == 0 && stats != NULL)
    stats->seconds = wtime() - t0;
  return rc;
}

/* ------------------------------------------------------------------------ */
/* The load                                                                   */

static int
sum_stats(dbuf_comm_t *ctx, const dbuf_layout_t *l, const dbuf_load_plan_t *plan,
          const dbuf_st_t *st, dbuf_comm_load_stats_t *out)
{
  const dbuf_load_stats_t *s = &out->local;
  int64_t v[12] = {s->rows,      s->bytes,     s->dst_bytes,        s->padding_bytes,
                   s->extents,   s->reads,     s->convert.values,   s->convert.changed,
                   s->convert.overflowed, s->convert.subnormal, s->convert.zeroed, 0};
  int rc = dbuf__comm_allreduce_i64(ctx, v, 11, MPI_SUM);
  double secs = s->seconds;
  if (rc == 0 && MPI_Allreduce(MPI_IN_PLACE, &secs, 1, MPI_DOUBLE, MPI_MAX, ctx->comm) != MPI_SUCCESS)
    rc = DBUF_EMPI;
  /* Distinct files and tensors: flags reduced with MAX. */
  int64_t nf = dbuf_st_file_count(st), nt = dbuf_layout_ntensors(l);
  int64_t *flag = calloc((size_t)(nf + nt > 0 ? nf + nt : 1), sizeof *flag);
  int g = 0;
  if (dbuf_comm_agree(ctx, rc ? rc : flag ? 0 : DBUF_ENOMEM, &g) != 0 || g != 0) {
    free(flag);
    return g ? g : DBUF_EMPI;
  }
  for (int64_t f = 0; f < nf; f++)
    flag[f] = dbuf_load_plan_uses_file(plan, f);
  rc = dbuf__comm_allreduce_i64(ctx, flag, nf, MPI_MAX);
  if (rc == 0) {
    dbuf_load_stats_t t = out->local;
    t.rows = v[0];
    t.bytes = v[1];
    t.dst_bytes = v[2];
    t.padding_bytes = v[3];
    t.extents = v[4];
    t.reads = v[5];
    t.convert = (dbuf_convert_stats_t){v[6], v[7], v[8], v[9], v[10]};
    t.seconds = secs;
    t.files = 0;
    for (int64_t f = 0; f < nf; f++)
      t.files += flag[f] != 0;
    t.tensors = 0; /* every tensor with rows is some rank's (ranges cover the buffer) */
    for (int64_t i = 0; i < nt; i++)
      t.tensors += dbuf_tensors_rows(dbuf_layout_tensors(l), i) > 0;
    out->total = t;
    out->local_gbps = s->seconds > 0 ? (double)s->bytes / s->seconds / 1e9 : 0;
    out->total_gbps = secs > 0 ? (double)t.bytes / secs / 1e9 : 0;
  }
  free(flag);
  return rc;
}

int
dbuf_comm_load(dbuf_comm_t *ctx, const dbuf_layout_t *l, int64_t start, int64_t end,
               dbuf_dtype_t dtype, const dbuf_st_t *st, void *dst, int64_t dst_bytes,
               dbuf_io_t io, dbuf_progress_fn progress, void *progress_arg,
               dbuf_comm_load_stats_t *stats, dbuf_diag_t *diag)
{
  dbuf_diag_t scratch;
  if (ctx == NULL)
    return DBUF_EINVAL;
  if (diag == NULL)
    diag = &scratch;
  dbuf_diag_clear(diag);
  int ok = l != NULL && st != NULL && (dst != NULL || dst_bytes == 0) &&
           io >= DBUF_IO_POSIX && io <= DBUF_IO_MPIIO_COLL;
  int64_t global[2] = {(int64_t)dtype, (int64_t)io};
  int rc = dbuf__comm_check_args(ctx, ok, 2, global, (const char *const[]){"dtype", "io"},
                                 diag->msg, sizeof diag->msg);
  if (rc != 0)
    return diag->code = rc;
  dbuf_load_plan_t *plan = NULL;
  rc = dbuf_load_plan_create(l, start, end, dtype, st, &plan, diag);
  if ((rc = dbuf_comm_agree_diag(ctx, rc, diag)) != 0)
    goto out;
  dbuf_comm_load_stats_t s;
  memset(&s, 0, sizeof s);
  int agreed = 0; /* the collective reader agrees on its own failures */
  if (io == DBUF_IO_POSIX) {
    rc = dbuf_load_posix(plan, dst, dst_bytes, progress, progress_arg, &s.local, diag);
  } else if (io == DBUF_IO_MPIIO) {
    /* The context's chunk (tiny in tests, to exercise chunking), at least
     * the 16 bytes the executor needs, at most its own largest read. */
    int64_t chunk = ctx->chunk < DBUF_LOAD_CHUNK_BYTES ? ctx->chunk : DBUF_LOAD_CHUNK_BYTES;
    rc = load_mpiio(plan, st, dst, dst_bytes, chunk < 16 ? 16 : chunk, progress, progress_arg,
                    &s.local, diag);
  } else {
    rc = load_coll(ctx, plan, st, dtype, dst, dst_bytes, progress, progress_arg, &s.local, diag);
    agreed = rc != 0; /* load_coll agrees on every failure */
  }
  if (agreed || (rc = dbuf_comm_agree_diag(ctx, rc, diag)) != 0)
    goto out;
  rc = sum_stats(ctx, l, plan, st, &s);
  if ((rc = dbuf_comm_agree_diag(ctx, rc, diag)) == 0 && stats != NULL)
    *stats = s;
out:
  dbuf_load_plan_destroy(plan);
  return rc;
}

/* ------------------------------------------------------------------------ */
/* The proof                                                                  */

int
dbuf__load_checkers(int nranks, const int *node, int *checker, int *first, int *checked,
                    int *nnodes)
{
  if (nranks < 1 || node == NULL || checker == NULL || first == NULL || checked == NULL)
    return DBUF_EINVAL;
  for (int r = 0; r < nranks; r++)
    if (node[r] < 0 || node[r] >= nranks)
      return DBUF_EINVAL;
  /* count[id]: ranks of node id; at[id]: where its ranks start in node
   * order (-1: not seen yet), then where the next goes; order: the ranks
   * in node order. */
  int *count = calloc((size_t)nranks, 3 * sizeof *count);
  if (count == NULL)
    return DBUF_ENOMEM;
  int *at = count + nranks, *order = at + nranks;
  int nn = 0, m = 0, lo = 0, pos = 0;
  for (int r = 0; r < nranks; r++) {
    count[node[r]]++;
    at[r] = -1;
  }
  for (int r = 0; r < nranks; r++) {
    int id = node[r];
    if (at[id] >= 0)
      continue;
    if (count[id] > m) { /* the largest node, the first in node order */
      m = count[id];
      lo = pos;
    }
    at[id] = pos;
    pos += count[id];
    nn++;
  }
  for (int r = 0; r < nranks; r++)
    order[at[node[r]]++] = r;
  if (nn == 1) {
    for (int r = 0; r < nranks; r++)
      checker[r] = (r + 1) % nranks;
  } else if (2 * (int64_t)m <= nranks) {
    /* Node blocks of at most m ranks, and at least m ranks outside each. */
    for (int p = 0; p < nranks; p++)
      checker[order[p]] = order[(int)(((int64_t)p + m) % nranks)];
  } else {
    /* The others: positions lo + m .. lo + nranks - 1 (cyclically), fewer
     * than m. */
    int others = nranks - m;
    for (int i = 0; i < m; i++)
      checker[order[lo + i]] = order[(int)(((int64_t)lo + m + i % others) % nranks)];
    for (int j = 0; j < others; j++)
      checker[order[(int)(((int64_t)lo + m + j) % nranks)]] = order[lo + j];
  }
  /* The lists: first[] from the checkers' counts, filled in rank order. */
  memset(first, 0, ((size_t)nranks + 1) * sizeof *first);
  for (int r = 0; r < nranks; r++)
    first[checker[r] + 1]++;
  for (int c = 0; c < nranks; c++) {
    first[c + 1] += first[c];
    count[c] = first[c];
  }
  for (int r = 0; r < nranks; r++)
    checked[count[checker[r]]++] = r;
  free(count);
  if (nnodes != NULL)
    *nnodes = nn;
  return 0;
}

/*
 * The checkers of the proof (dbuf__load_checkers()) from the nodes of the
 * ranks: each node's lowest rank names it (MPI_Comm_split_type, then an
 * MPI_Allgather of one int a rank).  checker[np], first[np + 1],
 * checked[np].  Collective; the outcome agreed.
 */
static int
proof_checkers(dbuf_comm_t *ctx, int *checker, int *first, int *checked, int *nnodes,
               dbuf_diag_t *diag)
{
  int np = ctx->size, me = ctx->rank, leader = me, rc = 0;
  int *node = calloc((size_t)np, sizeof *node);
  MPI_Comm shm = MPI_COMM_NULL;
  if (MPI_Comm_split_type(ctx->comm, MPI_COMM_TYPE_SHARED, me, MPI_INFO_NULL, &shm) !=
          MPI_SUCCESS ||
      MPI_Bcast(&leader, 1, MPI_INT, 0, shm) != MPI_SUCCESS)
    rc = DBUF_EMPI; /* leader: the rank of the node's first rank */
  if (shm != MPI_COMM_NULL)
    MPI_Comm_free(&shm);
  if (rc == 0 && node == NULL)
    rc = DBUF_ENOMEM;
  if ((rc = dbuf_comm_agree_diag(ctx, rc, diag)) != 0) {
    free(node);
    return rc;
  }
  if (MPI_Allgather(&leader, 1, MPI_INT, node, 1, MPI_INT, ctx->comm) != MPI_SUCCESS)
    rc = DBUF_EMPI;
  else
    rc = dbuf__load_checkers(np, node, checker, first, checked, nnodes);
  free(node);
  return dbuf_comm_agree_diag(ctx, rc, diag);
}

/* Who re-read each rank's rows, for the verdict's line. */
static const char *
checked_by(int np, int nnodes)
{
  return np == 1 ? "the same rank" : nnodes == 1 ? "another rank" : "a rank of another node";
}

/* The per-tensor sums, from the files, of the rows of the n ranks list[]
 * (their ranges in ranges[]): into sums and rows (nt entries each, sums mod
 * 2^64), with the bytes read. */
static int
sums_checked(const dbuf_layout_t *l, const int64_t *ranges, const int *list, int n,
             dbuf_dtype_t dtype, const dbuf_st_t *st, uint64_t *sums, int64_t *rows,
             int64_t *bytes_read, dbuf_diag_t *diag)
{
  int64_t nt = dbuf_layout_ntensors(l);
  uint64_t *one_sums = calloc((size_t)nt + 1, sizeof *one_sums);
  int64_t *one_rows = calloc((size_t)nt + 1, sizeof *one_rows);
  int rc = one_sums && one_rows ? 0 : DBUF_ENOMEM;
  memset(sums, 0, (size_t)nt * sizeof *sums);
  memset(rows, 0, (size_t)nt * sizeof *rows);
  *bytes_read = 0;
  for (int k = 0; k < n && rc == 0; k++) {
    int64_t b = 0;
    rc = dbuf_load_sums_file(l, ranges[2 * list[k]], ranges[2 * list[k] + 1], dtype, st, one_sums,
                             one_rows, &b, diag);
    for (int64_t t = 0; t < nt && rc == 0; t++) {
      sums[t] += one_sums[t];
      if (dbuf__add(rows[t], one_rows[t], &rows[t]) != 0)
        rc = dbuf__diag(diag, DBUF_EOVERFLOW, "load check: row count overflows");
    }
    if (rc == 0 && dbuf__add(*bytes_read, b, bytes_read) != 0)
      rc = dbuf__diag(diag, DBUF_EOVERFLOW, "load check: byte count overflows");
  }
  free(one_sums);
  free(one_rows);
  return rc;
}

/* Rows of tensor t in rank r's range. */
static int64_t
rows_of(const dbuf_layout_t *l, const int64_t *ranges, int r, int64_t t)
{
  dbuf_rows_t rows;
  if (dbuf_layout_rows_in(l, t, ranges[2 * r], ranges[2 * r + 1], &rows) != 0)
    return 0; /* the ranges are agreed valid */
  return rows.nelems > 0 ? rows.nrows : 0;
}

/* Tag of the row hashes of the proof's second pass. */
#define HASH_TAG 91

/* Post nonblocking sends (send) or receives of the n hashes at h to or from
 * peer, in messages of at most per hashes, into req[*nreq ..]. */
static int
post_hashes(dbuf_comm_t *ctx, int send, uint64_t *h, int64_t n, int64_t per, int peer,
            MPI_Request *req, int64_t *nreq)
{
  for (int64_t done = 0; done < n; done += per) {
    int cnt = 0, rc = dbuf_comm_count(n - done < per ? n - done : per, &cnt);
    if (rc != 0)
      return rc;
    int mrc = send ? MPI_Isend(h + done, cnt, MPI_UINT64_T, peer, HASH_TAG, ctx->comm, &req[*nreq])
                   : MPI_Irecv(h + done, cnt, MPI_UINT64_T, peer, HASH_TAG, ctx->comm, &req[*nreq]);
    if (mrc != MPI_SUCCESS)
      return DBUF_EMPI;
    (*nreq)++;
  }
  return 0;
}

/*
 * Second pass for tensor t: the hashes of the rows of t this rank holds,
 * from mem, against those its checker computed from the files; the hashes
 * this rank computes of the rows of each rank it checks go to that rank.
 * Every count comes from the layout and the agreed ranges, so every receive
 * has its send: all are posted at once, in messages of at most the
 * context's chunk, and waited for.  Sets *nbad and *first_bad (or -1).
 * Collective; the outcome agreed.
 */
static int
rows_differ(dbuf_comm_t *ctx, const dbuf_layout_t *l, const int64_t *ranges, dbuf_dtype_t dtype,
            const dbuf_st_t *st, const void *mem, int64_t mem_bytes, int64_t t, const int *checker,
            const int *first, const int *checked, int64_t *nbad, int64_t *first_bad,
            dbuf_diag_t *diag)
{
  int me = ctx->rank, nc = first[me + 1] - first[me];
  const int *list = checked + first[me];
  int64_t per = ctx->chunk / 8 > 0 ? ctx->chunk / 8 : 1;
  int64_t nm = rows_of(l, ranges, me, t), fm = 0, got = 0, fc = 0, total = 0;
  int64_t nreq = (nm + per - 1) / per, posted = 0;
  int64_t *at = calloc((size_t)nc + 1, sizeof *at); /* list[k]'s hashes: out + at[k] */
  int rc = at != NULL ? 0 : DBUF_ENOMEM;
  for (int k = 0; k < nc && rc == 0; k++) {
    int64_t n = rows_of(l, ranges, list[k], t);
    if (dbuf__add(at[k], n, &at[k + 1]) != 0 || dbuf__add(nreq, (n + per - 1) / per, &nreq) != 0)
      rc = DBUF_EOVERFLOW;
  }
  int nreq_int = 0; /* every request of this rank in one MPI_Waitall */
  if (rc == 0)
    rc = dbuf_comm_count(nreq, &nreq_int);
  total = rc == 0 ? at[nc] : 0;
  uint64_t *mine = rc == 0 ? dbuf__mallocn(nm + 1, sizeof *mine) : NULL;
  uint64_t *theirs = rc == 0 ? dbuf__mallocn(nm + 1, sizeof *theirs) : NULL;
  uint64_t *out = rc == 0 ? dbuf__mallocn(total + 1, sizeof *out) : NULL;
  MPI_Request *req = rc == 0 ? dbuf__mallocn(nreq + 1, sizeof *req) : NULL;
  if (rc == 0 && (!mine || !theirs || !out || !req))
    rc = DBUF_ENOMEM;
  if (rc != 0)
    dbuf__diag(diag, rc, "load check: %s", dbuf_strerror(rc));
  if (rc == 0)
    rc = dbuf_load_row_hashes(l, ranges[2 * me], ranges[2 * me + 1], dtype, mem, mem_bytes, NULL, t,
                              mine, nm, &fm, &got, diag);
  for (int k = 0; k < nc && rc == 0; k++)
    rc = dbuf_load_row_hashes(l, ranges[2 * list[k]], ranges[2 * list[k] + 1], dtype, NULL, 0, st,
                              t, out + at[k], at[k + 1] - at[k], &fc, &got, diag);
  if ((rc = dbuf_comm_agree_diag(ctx, rc, diag)) != 0)
    goto out;
  rc = post_hashes(ctx, 0, theirs, nm, per, checker[me], req, &posted);
  for (int k = 0; k < nc && rc == 0; k++)
    rc = post_hashes(ctx, 1, out + at[k], at[k + 1] - at[k], per, list[k], req, &posted);
  if (posted > 0 && MPI_Waitall((int)posted, req, MPI_STATUSES_IGNORE) != MPI_SUCCESS && rc == 0)
    rc = DBUF_EMPI; /* posted <= nreq_int */
  if (rc != 0)
    dbuf__diag(diag, rc, "load check: exchanging row hashes: %s", dbuf_strerror(rc));
  if ((rc = dbuf_comm_agree_diag(ctx, rc, diag)) != 0)
    goto out;
  *nbad = 0;
  *first_bad = -1;
  for (int64_t i = 0; i < nm; i++)
    if (mine[i] != theirs[i]) {
      if (*first_bad < 0)
        *first_bad = fm + i;
      (*nbad)++;
    }
out:
  free(at);
  free(mine);
  free(theirs);
  free(out);
  free(req);
  return rc;
}

static void
verdict_fail(dbuf_load_verdict_t *v, int code, const dbuf_diag_t *d)
{
  v->code = code;
  snprintf(v->msg, sizeof v->msg, "%s", d->msg[0] ? d->msg : dbuf_strerror(code));
}

static void
list_add(dbuf_load_verdict_t *v, int64_t tensor, int64_t row, int64_t nrows, int rank,
         const char *msg)
{
  if (v->nlisted >= DBUF_LOAD_MAX_LISTED)
    return;
  dbuf_load_mismatch_t *m = &v->listed[v->nlisted++];
  m->tensor = tensor;
  m->row = row;
  m->nrows = nrows;
  m->rank = rank;
  snprintf(m->msg, sizeof m->msg, "%s", msg);
}

int
dbuf_comm_verify_load(dbuf_comm_t *ctx, const dbuf_layout_t *l, int64_t start, int64_t end,
                      dbuf_dtype_t dtype, const dbuf_st_t *st, const void *mem, int64_t mem_bytes,
                      dbuf_load_verdict_t *v)
{
  dbuf_load_verdict_t scratch;
  dbuf_diag_t d;
  if (ctx == NULL)
    return DBUF_EINVAL;
  int ok = v != NULL && l != NULL && st != NULL && (mem != NULL || mem_bytes == 0);
  if (v == NULL)
    v = &scratch;
  memset(v, 0, sizeof *v);
  dbuf_diag_clear(&d);
  int64_t global[1] = {(int64_t)dtype};
  int rc = dbuf__comm_check_args(ctx, ok, 1, global, (const char *const[]){"dtype"}, v->msg,
                                 sizeof v->msg);
  if (rc != 0)
    return v->code = rc;
  double t0 = wtime();
  int me = ctx->rank, np = ctx->size, nnodes = 1;
  int64_t nt = dbuf_layout_ntensors(l), bytes_read = 0, bad_off = -1, nbad_pad = 0;
  int64_t *ranges = calloc((size_t)np * 2, sizeof *ranges);
  /* checker[np], first[np + 1], checked[np]: dbuf__load_checkers() */
  int *checker = calloc((size_t)np * 3 + 1, sizeof *checker);
  int *first = checker + np, *checked = first + np + 1;
  /* [0, nt): loaded sums, [nt, 2 nt): file sums; rows likewise. */
  uint64_t *sums = calloc((size_t)(2 * nt + 1), sizeof *sums);
  int64_t *rows = calloc((size_t)(2 * nt + 1), sizeof *rows);
  dbuf_load_plan_t *plan = NULL;
  rc = ranges && checker && sums && rows ? 0 : DBUF_ENOMEM;
  int64_t mine[2] = {start, end};
  if ((rc = dbuf_comm_agree_diag(ctx, rc, &d)) != 0 ||
      (rc = proof_checkers(ctx, checker, first, checked, &nnodes, &d)) != 0 ||
      (rc = dbuf__mpi(MPI_Allgather(mine, 2, MPI_INT64_T, ranges, 2, MPI_INT64_T, ctx->comm))) !=
          0) {
    verdict_fail(v, rc, &d);
    goto out;
  }
  v->checked_by = checked_by(np, nnodes);
  /* Local: padding, loaded sums, the rows of the ranks it checks from the
   * files. */
  rc = dbuf_load_plan_create(l, start, end, dtype, st, &plan, &d);
  if (rc == 0 && (rc = dbuf_load_check_zeros(plan, mem, mem_bytes, &bad_off, &nbad_pad)) != 0)
    snprintf(d.msg, sizeof d.msg, "load check: %" PRId64 " bytes of memory for a segment of %" PRId64,
             mem_bytes, dbuf_load_plan_dst_bytes(plan));
  if (rc == 0)
    rc = dbuf_load_sums_mem(l, start, end, dtype, mem, mem_bytes, sums, rows, &d);
  if (rc == 0)
    rc = sums_checked(l, ranges, checked + first[me], first[me + 1] - first[me], dtype, st,
                      sums + nt, rows + nt, &bytes_read, &d);
  if ((rc = dbuf_comm_agree_diag(ctx, rc, &d)) != 0) {
    verdict_fail(v, rc, &d);
    goto out;
  }
  rows[2 * nt] = bytes_read;
  if ((rc = dbuf__comm_allreduce_n(ctx, sums, 2 * nt, MPI_UINT64_T, 8, MPI_SUM)) != 0 ||
      (rc = dbuf__comm_allreduce_i64(ctx, rows, 2 * nt + 1, MPI_SUM)) != 0) {
    v->code = rc;
    goto out;
  }
  const dbuf_tensors_t *ts = dbuf_layout_tensors(l);
  v->tensors = nt;
  v->bytes = rows[2 * nt];
  for (int64_t t = 0; t < nt; t++)
    v->rows += rows[t];

  /* Tensors that differ; the first few get their rows named. */
  char msg[DBUF_DIAG_LEN];
  for (int64_t t = 0; t < nt; t++) {
    int64_t want = dbuf_tensors_rows(ts, t);
    if (sums[t] == sums[nt + t] && rows[t] == want && rows[nt + t] == want)
      continue;
    v->bad_tensors++;
    if (v->nlisted >= DBUF_LOAD_MAX_LISTED)
      continue;
    const char *name = dbuf_tensors_name(ts, t);
    if (rows[t] != want) {
      snprintf(msg, sizeof msg, "tensor %s: the ranks hold %" PRId64 " of its %" PRId64 " rows",
               name, rows[t], want);
      list_add(v, t, -1, 0, -1, msg);
      continue;
    }
    int64_t nbad = 0, bad_row = -1;
    if ((rc = rows_differ(ctx, l, ranges, dtype, st, mem, mem_bytes, t, checker, first, checked,
                          &nbad, &bad_row, &d)) != 0) {
      verdict_fail(v, rc, &d);
      goto out;
    }
    /* The lowest differing row (rows grow with the rank), and its rank. */
    int64_t red[2] = {nbad, bad_row >= 0 ? bad_row : INT64_MAX}, key[2];
    if (MPI_Allreduce(red, key, 1, MPI_INT64_T, MPI_SUM, ctx->comm) != MPI_SUCCESS ||
        MPI_Allreduce(red + 1, key + 1, 1, MPI_INT64_T, MPI_MIN, ctx->comm) != MPI_SUCCESS) {
      v->code = rc = DBUF_EMPI;
      goto out;
    }
    int holder = bad_row >= 0 && bad_row == key[1] ? me : INT_MAX, who = INT_MAX;
    if (MPI_Allreduce(&holder, &who, 1, MPI_INT, MPI_MIN, ctx->comm) != MPI_SUCCESS) {
      v->code = rc = DBUF_EMPI;
      goto out;
    }
    /* Its checker too: where node-local copies differ, either copy may be
     * the wrong one, so both ranks are named. */
    if (key[0] > 0 && who < np)
      snprintf(msg, sizeof msg,
               "tensor %s row %" PRId64 " (rank %d) differs from the checkpoint as rank %d read "
               "it (%" PRId64 " of its %" PRId64 " rows differ)",
               name, key[1], who, checker[who], key[0], want);
    else
      snprintf(msg, sizeof msg, "tensor %s: the row checksums differ from the checkpoint's", name);
    list_add(v, t, key[0] > 0 ? key[1] : -1, key[0], key[0] > 0 ? who : -1, msg);
  }

  /* Padding: the lowest rank with a non-zero byte names it. */
  int64_t pad[2] = {nbad_pad, 0};
  int bad_rank = nbad_pad > 0 ? me : INT_MAX, first_rank = INT_MAX;
  if (MPI_Allreduce(pad, pad + 1, 1, MPI_INT64_T, MPI_SUM, ctx->comm) != MPI_SUCCESS ||
      MPI_Allreduce(&bad_rank, &first_rank, 1, MPI_INT, MPI_MIN, ctx->comm) != MPI_SUCCESS) {
    v->code = rc = DBUF_EMPI;
    goto out;
  }
  v->bad_padding = pad[1];
  if (first_rank != INT_MAX) {
    int64_t at[2] = {bad_off, nbad_pad};
    if (MPI_Bcast(at, 2, MPI_INT64_T, first_rank, ctx->comm) != MPI_SUCCESS) {
      v->code = rc = DBUF_EMPI;
      goto out;
    }
    int64_t es = dbuf_dtype_size(dtype);
    snprintf(msg, sizeof msg,
             "rank %d: padding at global element %" PRId64 " (byte %" PRId64
             " of its range) is not zero (%" PRId64 " non-zero bytes on that rank)",
             first_rank, ranges[2 * first_rank] + at[0] / es, at[0], at[1]);
    list_add(v, -1, -1, 0, first_rank, msg);
    int cnt = 0, any = nbad_pad > 0;
    MPI_Allreduce(&any, &cnt, 1, MPI_INT, MPI_SUM, ctx->comm);
    v->problems += cnt;
  }
  v->problems += v->bad_tensors;
  double secs = wtime() - t0;
  MPI_Allreduce(&secs, &v->seconds, 1, MPI_DOUBLE, MPI_MAX, ctx->comm);
  if (v->problems == 0) {
    v->code = rc = 0;
    snprintf(v->msg, sizeof v->msg,
             "PASS: %" PRId64 " tensors, %" PRId64 " rows, %" PRId64
             " bytes checked against the checkpoint by %s",
             v->tensors, v->rows, v->bytes, v->checked_by);
  } else {
    v->code = rc = DBUF_EVERIFY;
    snprintf(v->msg, sizeof v->msg, "FAIL: %.460s%s", v->nlisted ? v->listed[0].msg : "",
             v->problems > 1 ? " (and more problems)" : "");
  }
out:
  dbuf_load_plan_destroy(plan);
  free(ranges);
  free(checker);
  free(sums);
  free(rows);
  return rc;
}
