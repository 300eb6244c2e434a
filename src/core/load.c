/*
 * Loading real weights (dbuf/load.h): a rank's read plan for one buffer, the
 * pread loader, and the row checksums from memory and from the files.
 */
#include "core_internal.h"

#include "dbuf/load.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

struct dbuf_load_plan {
  const dbuf_layout_t *l;
  const dbuf_st_t *st;
  dbuf_dtype_t dtype;
  int64_t elem; /* bytes per element of dtype */
  int64_t start, end, dst_bytes;
  dbuf_load_extent_t *ext;
  int64_t next;
  dbuf_load_zero_t *zero;
  int64_t nzero;
  int64_t nfiles;
  int64_t *need; /* [nfiles]: the size each header claims */
  char *used;    /* [nfiles] */
  dbuf_load_stats_t stats;
};

static const char *const IO_NAMES[] = {NULL, "posix", "mpiio", "mpiio-coll"};

const char *
dbuf_io_name(int io)
{
  return io >= DBUF_IO_POSIX && io <= DBUF_IO_MPIIO_COLL ? IO_NAMES[io] : "unknown";
}

int
dbuf_io_parse(const char *name, dbuf_io_t *io)
{
  if (name == NULL || io == NULL)
    return DBUF_EINVAL;
  for (int i = DBUF_IO_POSIX; i <= DBUF_IO_MPIIO_COLL; i++)
    if (strcmp(name, IO_NAMES[i]) == 0) {
      *io = (dbuf_io_t)i;
      return 0;
    }
  return DBUF_ENOTFOUND;
}

/* ------------------------------------------------------------------------ */
/* Checks shared by the plan and the checksums                                */

/* The checkpoint's id and info of layout tensor t, with its shape and dtype
 * checked against the layout and the buffer dtype. */
static int
match_tensor(const dbuf_layout_t *l, int64_t t, const dbuf_st_t *st, dbuf_dtype_t dtype,
             dbuf_st_info_t *info, dbuf_diag_t *diag)
{
  const dbuf_tensors_t *lt = dbuf_layout_tensors(l), *ct = dbuf_st_tensors(st);
  const char *name = dbuf_tensors_name(lt, t);
  int64_t id;
  if (dbuf_tensors_find(ct, name, &id) != 0)
    return dbuf__diag(diag, DBUF_ENOTFOUND, "tensor %s: not in the checkpoint", name);
  dbuf_st_tensor_info(st, id, info);
  int nd = dbuf_tensors_ndim(lt, t), cnd = dbuf_tensors_ndim(ct, id);
  const int64_t *d = dbuf_tensors_dims(lt, t), *cd = dbuf_tensors_dims(ct, id);
  if (nd != cnd || memcmp(d, cd, (size_t)nd * sizeof *d) != 0) {
    char a[DBUF__SHAPE_STR_LEN], b[DBUF__SHAPE_STR_LEN];
    dbuf__shape_str(d, nd, a, sizeof a);
    dbuf__shape_str(cd, cnd, b, sizeof b);
    return dbuf__diag(diag, DBUF_ESHAPE, "tensor %s: shape %s in the layout, %s in %s", name, a,
                      b, info->path);
  }
  dbuf_diag_t why;
  int rc = dbuf_convert_check(info->type, dtype, &why);
  if (rc != 0)
    return dbuf__diag(diag, rc, "tensor %s in %s: %s", name, info->path, why.msg);
  return 0;
}

/* The rows of tensor t inside [a, b), whole rows only. */
static int
rows_in(const dbuf_layout_t *l, int64_t t, int64_t a, int64_t b, dbuf_rows_t *r,
        dbuf_diag_t *diag)
{
  dbuf_layout_rows_in(l, t, a, b, r); /* a <= b, t in range: cannot fail */
  if (r->nelems > 0 && (r->cut_first || r->cut_last))
    return dbuf__diag(diag, DBUF_ELAYOUT,
                      "range [%lld, %lld) cuts tensor %s row %lld: only whole rows load",
                      (long long)a, (long long)b,
                      dbuf_tensors_name(dbuf_layout_tensors(l), t),
                      (long long)(r->cut_first ? r->first_row : r->first_row + r->nrows - 1));
  return 0;
}

/* Calls fn for every tensor with elements in [a, b), in offset order. */
typedef int (*tensor_fn)(int64_t t, const dbuf_rows_t *r, void *arg, dbuf_diag_t *diag);

static int
for_tensors_in(const dbuf_layout_t *l, int64_t a, int64_t b, tensor_fn fn, void *arg,
               dbuf_diag_t *diag)
{
  const int64_t *off = dbuf_layout_offsets(l), *order = dbuf__layout_order_or_null(l);
  int64_t n = dbuf_layout_ntensors(l), t = -1;
  dbuf_rows_t r;
  int rc;
  if (a >= b)
    return 0;
  /* A tensor that starts before a and reaches into the range. */
  if (dbuf_layout_tensor_at(l, a, &t) == 0 && t >= 0 && off[t] < a) {
    if ((rc = rows_in(l, t, a, b, &r, diag)) != 0 || (r.nelems > 0 && (rc = fn(t, &r, arg, diag))))
      return rc;
  }
  for (int64_t p = dbuf_layout_order_lower(l, a); p < n && off[DBUF__AT(order, p)] < b; p++) {
    if ((rc = rows_in(l, DBUF__AT(order, p), a, b, &r, diag)) != 0)
      return rc;
    if (r.nelems > 0 && (rc = fn(DBUF__AT(order, p), &r, arg, diag)) != 0)
      return rc;
  }
  return 0;
}

static int
range_ok(const dbuf_layout_t *l, int64_t start, int64_t end, dbuf_dtype_t dtype,
         int64_t *bytes, dbuf_diag_t *diag)
{
  if (dbuf_dtype_size(dtype) <= 0)
    return dbuf__diag(diag, DBUF_EINVAL, "buffer dtype %s has no byte size",
                      dbuf_dtype_name(dtype));
  if (start < 0 || start > end || end > dbuf_layout_size(l))
    return dbuf__diag(diag, DBUF_EINVAL, "range [%lld, %lld) is not inside the buffer [0, %lld)",
                      (long long)start, (long long)end, (long long)dbuf_layout_size(l));
  if (dbuf__mul(end - start, dbuf_dtype_size(dtype), bytes) != 0)
    return dbuf__diag(diag, DBUF_EOVERFLOW, "range [%lld, %lld): byte size overflows",
                      (long long)start, (long long)end);
  return 0;
}

/* need[f] = the largest data_end of file f's tensors (0 without tensors). */
static int64_t *
file_needs(const dbuf_st_t *st)
{
  int64_t nf = dbuf_st_file_count(st), n = dbuf_tensors_count(dbuf_st_tensors(st));
  int64_t *need = dbuf__calloc(nf > 0 ? nf : 1, sizeof *need);
  if (need == NULL)
    return NULL;
  for (int64_t i = 0; i < n; i++) {
    dbuf_st_info_t in;
    dbuf_st_tensor_info(st, i, &in);
    if (in.data_end > need[in.file])
      need[in.file] = in.data_end;
  }
  return need;
}

/* Open file f of st for reading and check it holds what its header says:
 * long enough, and the same file (dbuf_st_file_check). */
static int
open_checked(const dbuf_st_t *st, int64_t f, int64_t need, int *fd, dbuf_diag_t *diag)
{
  const char *path = dbuf_st_file_path(st, f);
  char why[DBUF_DIAG_LEN / 2];
  int64_t size;
  int rc = dbuf__input_open(path, -1, fd, &size, why, sizeof why);
  if (rc != 0)
    return dbuf__diag(diag, rc == DBUF_EFORMAT ? DBUF_EIO : rc, "%s: %s", path, why);
  if (size < need) {
    close(*fd);
    *fd = -1;
    return dbuf__diag(diag, DBUF_EIO,
                      "%s: file is %lld bytes, shorter than its header says (%lld bytes)", path,
                      (long long)size, (long long)need);
  }
  /* Long enough, but is it still the file whose header was read? */
  if ((rc = dbuf_st_file_check(st, f, *fd, diag)) != 0) {
    close(*fd);
    *fd = -1;
  }
  return rc;
}

/* pread exactly bytes bytes at off. */
static int
pread_all(int fd, const char *path, int64_t off, void *buf, int64_t bytes, dbuf_diag_t *diag)
{
  char *p = buf;
  while (bytes > 0) {
    size_t want = bytes > ((int64_t)1 << 30) ? (size_t)1 << 30 : (size_t)bytes;
    ssize_t got = pread(fd, p, want, (off_t)off);
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0)
      return dbuf__diag(diag, DBUF_EIO, "%s: read at byte %lld: %s", path, (long long)off,
                        strerror(errno));
    if (got == 0)
      return dbuf__diag(diag, DBUF_EIO,
                        "%s: end of file at byte %lld, before the data its header describes",
                        path, (long long)off);
    p += got;
    off += got;
    bytes -= got;
  }
  return 0;
}

/* ------------------------------------------------------------------------ */
/* The plan                                                                   */

typedef struct {
  dbuf_load_plan_t *p;
  int64_t cap, cursor; /* cursor: global end of the last piece */
} build_t;

static int
push_zero(dbuf_load_plan_t *p, int64_t from, int64_t to)
{
  /* One run per gap: at most one more than the pieces, allocated up front. */
  p->zero[p->nzero].dst_offset = (from - p->start) * p->elem;
  p->zero[p->nzero].bytes = (to - from) * p->elem;
  p->nzero++;
  return 0;
}

static int
add_piece(int64_t t, const dbuf_rows_t *r, void *arg, dbuf_diag_t *diag)
{
  build_t *b = arg;
  dbuf_load_plan_t *p = b->p;
  dbuf_st_info_t in;
  int rc = match_tensor(p->l, t, p->st, p->dtype, &in, diag); /* checked: cannot fail */
  if (rc != 0)
    return rc;
  int64_t g = dbuf_layout_offsets(p->l)[t] + r->elem_begin, fo, nb;
  if (p->next == b->cap) {
    int64_t cap = b->cap * 2 + 16;
    dbuf_load_extent_t *e = dbuf__reallocn(p->ext, cap, sizeof *e);
    dbuf_load_zero_t *z = dbuf__reallocn(p->zero, cap + 1, sizeof *z);
    if (e != NULL)
      p->ext = e;
    if (z != NULL)
      p->zero = z;
    if (e == NULL || z == NULL)
      return dbuf__diag(diag, DBUF_ENOMEM, "read plan: out of memory");
    b->cap = cap;
  }
  if (dbuf__mul(r->elem_begin, in.elem_size, &fo) || dbuf__add(fo, in.data_begin, &fo) ||
      dbuf__mul(r->nelems, in.elem_size, &nb) || fo > in.data_end - nb)
    return dbuf__diag(diag, DBUF_EOVERFLOW, "tensor %s: byte range overflows",
                      dbuf_tensors_name(dbuf_layout_tensors(p->l), t));
  if (g > b->cursor)
    push_zero(p, b->cursor, g);
  b->cursor = g + r->nelems;
  p->ext[p->next++] = (dbuf_load_extent_t){in.file, fo, nb, (g - p->start) * p->elem, in.type, t};
  p->used[in.file] = 1;
  p->stats.tensors++;
  p->stats.rows += r->nrows;
  p->stats.bytes += nb; /* every sum below a file size or the range's bytes */
  p->stats.dst_bytes += r->nelems * p->elem;
  return 0;
}

static int
cmp_extent(const void *a, const void *b)
{
  const dbuf_load_extent_t *x = a, *y = b;
  if (x->file != y->file)
    return x->file < y->file ? -1 : 1;
  if (x->file_offset != y->file_offset)
    return x->file_offset < y->file_offset ? -1 : 1;
  return (x->dst_offset > y->dst_offset) - (x->dst_offset < y->dst_offset);
}

static int64_t
dst_len(const dbuf_load_plan_t *p, const dbuf_load_extent_t *e)
{
  return e->bytes / dbuf_dtype_size(e->src_dtype) * p->elem;
}

int
dbuf_load_plan_create(const dbuf_layout_t *l, int64_t start, int64_t end, dbuf_dtype_t dtype,
                      const dbuf_st_t *st, dbuf_load_plan_t **out, dbuf_diag_t *diag)
{
  int rc;
  int64_t bytes;
  if (l == NULL || st == NULL || out == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "read plan: NULL argument");
  if ((rc = range_ok(l, start, end, dtype, &bytes, diag)) != 0)
    return rc;
  /* Every tensor of the layout, so that every rank finds the same problem. */
  for (int64_t t = 0; t < dbuf_layout_ntensors(l); t++) {
    dbuf_st_info_t in;
    if ((rc = match_tensor(l, t, st, dtype, &in, diag)) != 0)
      return rc;
  }
  dbuf_load_plan_t *p = calloc(1, sizeof *p);
  if (p == NULL)
    return dbuf__diag(diag, DBUF_ENOMEM, "read plan: out of memory");
  *p = (dbuf_load_plan_t){.l = l, .st = st, .dtype = dtype, .elem = dbuf_dtype_size(dtype),
                          .start = start, .end = end, .dst_bytes = bytes,
                          .nfiles = dbuf_st_file_count(st)};
  p->need = file_needs(st);
  p->used = dbuf__calloc(p->nfiles > 0 ? p->nfiles : 1, 1);
  p->zero = dbuf__mallocn(1, sizeof *p->zero);
  if (p->need == NULL || p->used == NULL || p->zero == NULL) {
    rc = dbuf__diag(diag, DBUF_ENOMEM, "read plan: out of memory");
    goto fail;
  }
  build_t b = {p, 0, start};
  if ((rc = for_tensors_in(l, start, end, add_piece, &b, diag)) != 0)
    goto fail;
  if (b.cursor < end)
    push_zero(p, b.cursor, end);
  for (int64_t z = 0; z < p->nzero; z++)
    p->stats.padding_bytes += p->zero[z].bytes;

  /* File order, then merge what follows on in the file and in memory. */
  if (p->next > 1)
    qsort(p->ext, (size_t)p->next, sizeof *p->ext, cmp_extent);
  int64_t k = 0;
  for (int64_t i = 0; i < p->next; i++) {
    dbuf_load_extent_t *e = &p->ext[i], *q = k > 0 ? &p->ext[k - 1] : NULL;
    if (q != NULL && q->file == e->file && q->src_dtype == e->src_dtype &&
        q->file_offset + q->bytes == e->file_offset && q->dst_offset + dst_len(p, q) == e->dst_offset)
      q->bytes += e->bytes;
    else
      p->ext[k++] = *e;
  }
  p->next = k;
  p->stats.extents = k;
  for (int64_t f = 0; f < p->nfiles; f++)
    p->stats.files += p->used[f];
  *out = p;
  return 0;
fail:
  dbuf_load_plan_destroy(p);
  return rc;
}

void
dbuf_load_plan_destroy(dbuf_load_plan_t *p)
{
  if (p == NULL)
    return;
  free(p->ext);
  free(p->zero);
  free(p->need);
  free(p->used);
  free(p);
}

const dbuf_load_extent_t *
dbuf_load_plan_extents(const dbuf_load_plan_t *p, int64_t *n)
{
  if (n != NULL)
    *n = p ? p->next : 0;
  return p ? p->ext : NULL;
}

const dbuf_load_zero_t *
dbuf_load_plan_zeros(const dbuf_load_plan_t *p, int64_t *n)
{
  if (n != NULL)
    *n = p ? p->nzero : 0;
  return p ? p->zero : NULL;
}

int
dbuf_load_plan_stats(const dbuf_load_plan_t *p, dbuf_load_stats_t *out)
{
  if (p == NULL || out == NULL)
    return DBUF_EINVAL;
  *out = p->stats;
  return 0;
}

int64_t
dbuf_load_plan_dst_bytes(const dbuf_load_plan_t *p)
{
  return p ? p->dst_bytes : 0;
}

int64_t
dbuf_load_file_needed(const dbuf_load_plan_t *p, int64_t f)
{
  return p && f >= 0 && f < p->nfiles ? p->need[f] : -1;
}

int
dbuf_load_plan_uses_file(const dbuf_load_plan_t *p, int64_t f)
{
  return p && f >= 0 && f < p->nfiles ? p->used[f] : 0;
}

/* ------------------------------------------------------------------------ */
/* Executing a plan                                                           */

/* Largest read of extent e: chunk, or for a converting extent the bounce
 * buffer, in whole source elements. */
static int64_t
read_unit(const dbuf_load_plan_t *p, const dbuf_load_extent_t *e, int64_t chunk)
{
  if (e->src_dtype == p->dtype)
    return chunk;
  int64_t es = dbuf_dtype_size(e->src_dtype);
  int64_t u = chunk < DBUF_LOAD_BOUNCE_BYTES ? chunk : DBUF_LOAD_BOUNCE_BYTES;
  return u / es * es;
}

int
dbuf_load_plan_reads(const dbuf_load_plan_t *p, int64_t chunk_bytes, int64_t *per_file)
{
  if (p == NULL || per_file == NULL || chunk_bytes < 16)
    return DBUF_EINVAL;
  memset(per_file, 0, (size_t)p->nfiles * sizeof *per_file);
  for (int64_t i = 0; i < p->next; i++)
    per_file[p->ext[i].file] += dbuf__ceil_div(p->ext[i].bytes, read_unit(p, &p->ext[i], chunk_bytes));
  return 0;
}

int
dbuf_load_execute(const dbuf_load_plan_t *p, void *dst, int64_t dst_bytes, int64_t chunk_bytes,
                  dbuf_load_read_fn read_fn, void *arg, dbuf_progress_fn progress,
                  void *progress_arg, dbuf_load_stats_t *stats, dbuf_diag_t *diag)
{
  if (p == NULL || read_fn == NULL || chunk_bytes < 16 || (dst == NULL && dst_bytes > 0))
    return dbuf__diag(diag, DBUF_EINVAL, "load: NULL argument or chunk under 16 bytes");
  if (dst_bytes != p->dst_bytes)
    return dbuf__diag(diag, DBUF_EINVAL, "load: destination is %lld bytes, the range needs %lld",
                      (long long)dst_bytes, (long long)p->dst_bytes);
  double t0 = dbuf__now();
  dbuf_load_stats_t s = p->stats;
  char *d = dst, *bounce = NULL;
  int64_t got = 0;
  int rc = 0;
  for (int64_t z = 0; z < p->nzero; z++)
    memset(d + p->zero[z].dst_offset, 0, (size_t)p->zero[z].bytes);
  for (int64_t i = 0; i < p->next && rc == 0; i++) {
    const dbuf_load_extent_t *e = &p->ext[i];
    int64_t unit = read_unit(p, e, chunk_bytes), es = dbuf_dtype_size(e->src_dtype);
    /* read_unit() of a converting extent is at most this */
    if (e->src_dtype != p->dtype && bounce == NULL &&
        (bounce = malloc((size_t)(chunk_bytes < DBUF_LOAD_BOUNCE_BYTES ? chunk_bytes
                                                                       : DBUF_LOAD_BOUNCE_BYTES))) ==
            NULL)
      return dbuf__diag(diag, DBUF_ENOMEM, "load: no room for a bounce buffer");
    for (int64_t done = 0; done < e->bytes && rc == 0; done += unit) {
      int64_t n = e->bytes - done < unit ? e->bytes - done : unit;
      s.reads++;
      if (e->src_dtype == p->dtype) {
        rc = read_fn(arg, e->file, e->file_offset + done, d + e->dst_offset + done, n, diag);
      } else if ((rc = read_fn(arg, e->file, e->file_offset + done, bounce, n, diag)) == 0) {
        rc = dbuf_convert(p->dtype, d + e->dst_offset + done / es * p->elem, e->src_dtype,
                          bounce, n / es, &s.convert, diag);
      }
      got += n;
      if (rc == 0 && progress != NULL && progress(got, p->stats.bytes, progress_arg) != 0)
        rc = dbuf__diag(diag, DBUF_ECANCELED, "load stopped by the caller after %lld of %lld bytes",
                        (long long)got, (long long)p->stats.bytes);
    }
  }
  free(bounce);
  if (rc != 0)
    return rc;
  s.seconds = dbuf__now() - t0;
  if (stats != NULL)
    *stats = s;
  return 0;
}

typedef struct {
  const dbuf_st_t *st;
  int *fd;
} posix_t;

static int
posix_read(void *arg, int64_t file, int64_t offset, void *buf, int64_t bytes, dbuf_diag_t *diag)
{
  posix_t *px = arg;
  return pread_all(px->fd[file], dbuf_st_file_path(px->st, file), offset, buf, bytes, diag);
}

int
dbuf_load_posix(const dbuf_load_plan_t *p, void *dst, int64_t dst_bytes,
                dbuf_progress_fn progress, void *progress_arg, dbuf_load_stats_t *stats,
                dbuf_diag_t *diag)
{
  if (p == NULL || (dst == NULL && dst_bytes > 0))
    return dbuf__diag(diag, DBUF_EINVAL, "load: NULL plan or destination");
  if (dst_bytes != p->dst_bytes)
    return dbuf__diag(diag, DBUF_EINVAL, "load: destination is %lld bytes, the range needs %lld",
                      (long long)dst_bytes, (long long)p->dst_bytes);
  double t0 = dbuf__now();
  int *fd = dbuf__mallocn(p->nfiles > 0 ? p->nfiles : 1, sizeof *fd);
  if (fd == NULL)
    return dbuf__diag(diag, DBUF_ENOMEM, "load: out of memory");
  int rc = 0;
  for (int64_t f = 0; f < p->nfiles; f++)
    fd[f] = -1;
  for (int64_t f = 0; f < p->nfiles && rc == 0; f++)
    if (p->used[f])
      rc = open_checked(p->st, f, p->need[f], &fd[f], diag);
  posix_t px = {p->st, fd};
  if (rc == 0)
    rc = dbuf_load_execute(p, dst, dst_bytes, DBUF_LOAD_CHUNK_BYTES, posix_read, &px, progress,
                           progress_arg, stats, diag);
  for (int64_t f = 0; f < p->nfiles; f++)
    if (fd[f] >= 0)
      close(fd[f]);
  free(fd);
  if (rc == 0 && stats != NULL)
    stats->seconds = dbuf__now() - t0;
  return rc;
}

int
dbuf_load_check_zeros(const dbuf_load_plan_t *p, const void *dst, int64_t dst_bytes,
                      int64_t *bad_offset, int64_t *nbad)
{
  if (p == NULL || bad_offset == NULL || dst_bytes != p->dst_bytes || (dst == NULL && dst_bytes))
    return DBUF_EINVAL;
  const unsigned char *d = dst;
  int64_t first = -1, cnt = 0;
  for (int64_t z = 0; z < p->nzero; z++)
    for (int64_t i = p->zero[z].dst_offset, e = i + p->zero[z].bytes; i < e; i++)
      if (d[i] != 0) {
        if (first < 0)
          first = i;
        cnt++;
      }
  *bad_offset = first;
  if (nbad != NULL)
    *nbad = cnt;
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Row checksums                                                              */

uint64_t
dbuf_load_row_hash(const void *bytes, int64_t len, int64_t row)
{
  return XXH3_64bits_withSeed(bytes, (size_t)len, (XXH64_hash_t)row);
}

/* Where the hashes go: sums per tensor, or one tensor's rows. */
typedef struct {
  const dbuf_layout_t *l;
  int64_t start;
  dbuf_dtype_t dtype;
  int64_t elem;
  const char *mem;   /* memory walk */
  const dbuf_st_t *st; /* file walk */
  int64_t *need;
  int *fd;
  char *src_buf, *dst_buf;
  int64_t bytes_read;
  /* output */
  uint64_t *sums;
  int64_t *rows;
  int64_t only; /* -1: every tensor; else the tensor whose rows are listed */
  uint64_t *hashes;
  int64_t cap, first_row, nrows;
} walk_t;

static void
emit(walk_t *w, int64_t t, int64_t row, uint64_t h)
{
  if (w->only < 0) {
    w->sums[t] += h; /* mod 2^64 */
    if (w->rows != NULL)
      w->rows[t]++;
  } else if (row - w->first_row < w->cap) {
    w->hashes[row - w->first_row] = h;
  }
}

static int
walk_mem(int64_t t, const dbuf_rows_t *r, void *arg, dbuf_diag_t *diag)
{
  walk_t *w = arg;
  if (w->only >= 0 && t != w->only)
    return 0;
  int64_t re = dbuf_tensors_row_elems(dbuf_layout_tensors(w->l), t);
  int64_t g = dbuf_layout_offsets(w->l)[t] + r->elem_begin - w->start;
  if (w->only >= 0) {
    w->first_row = r->first_row;
    w->nrows = r->nrows;
  }
  for (int64_t i = 0; i < r->nrows; i++)
    emit(w, t, r->first_row + i,
         dbuf_load_row_hash(w->mem + (g + i * re) * w->elem, re * w->elem, r->first_row + i));
  return 0;
}

/* Read n source bytes at off of the file and convert them into dst_buf. */
static int
read_convert(walk_t *w, const dbuf_st_info_t *in, int64_t off, int64_t n, dbuf_diag_t *diag)
{
  int rc;
  if (w->fd[in->file] < 0 && (rc = open_checked(w->st, in->file, w->need[in->file],
                                                &w->fd[in->file], diag)) != 0)
    return rc;
  if ((rc = pread_all(w->fd[in->file], in->path, off, w->src_buf, n, diag)) != 0)
    return rc;
  w->bytes_read += n;
  return dbuf_convert(w->dtype, w->dst_buf, in->type, w->src_buf, n / in->elem_size, NULL, diag);
}

static int
walk_file(int64_t t, const dbuf_rows_t *r, void *arg, dbuf_diag_t *diag)
{
  walk_t *w = arg;
  dbuf_st_info_t in;
  int rc;
  if (w->only >= 0 && t != w->only)
    return 0;
  if ((rc = match_tensor(w->l, t, w->st, w->dtype, &in, diag)) != 0)
    return rc;
  if (w->only >= 0) {
    w->first_row = r->first_row;
    w->nrows = r->nrows;
  }
  int64_t re = dbuf_tensors_row_elems(dbuf_layout_tensors(w->l), t);
  int64_t src_row = re * in.elem_size, dst_row = re * w->elem;
  int64_t off = in.data_begin + r->first_row * src_row; /* inside the file: checked by open */
  if (src_row <= DBUF_LOAD_BOUNCE_BYTES) { /* whole rows per read */
    int64_t per = DBUF_LOAD_BOUNCE_BYTES / src_row;
    for (int64_t i = 0; i < r->nrows; i += per) {
      int64_t k = r->nrows - i < per ? r->nrows - i : per;
      if ((rc = read_convert(w, &in, off + i * src_row, k * src_row, diag)) != 0)
        return rc;
      for (int64_t j = 0; j < k; j++)
        emit(w, t, r->first_row + i + j,
             dbuf_load_row_hash(w->dst_buf + j * dst_row, dst_row, r->first_row + i + j));
    }
    return 0;
  }
  /* Rows larger than the bounce buffer: streamed. */
  XXH3_state_t *s = XXH3_createState();
  if (s == NULL)
    return dbuf__diag(diag, DBUF_ENOMEM, "checksum: out of memory");
  for (int64_t i = 0; i < r->nrows && rc == 0; i++) {
    int64_t row = r->first_row + i;
    XXH3_64bits_reset_withSeed(s, (XXH64_hash_t)row);
    for (int64_t done = 0; done < src_row && rc == 0; done += DBUF_LOAD_BOUNCE_BYTES) {
      int64_t n = src_row - done < DBUF_LOAD_BOUNCE_BYTES ? src_row - done
                                                          : DBUF_LOAD_BOUNCE_BYTES;
      if ((rc = read_convert(w, &in, off + i * src_row + done, n, diag)) == 0)
        XXH3_64bits_update(s, w->dst_buf, (size_t)(n / in.elem_size * w->elem));
    }
    if (rc == 0)
      emit(w, t, row, XXH3_64bits_digest(s));
  }
  XXH3_freeState(s);
  return rc;
}

/* Run a walk over [start, end), from memory (w->mem) or the files (w->st). */
static int
walk(walk_t *w, int64_t end, dbuf_diag_t *diag)
{
  int rc;
  if (w->st == NULL)
    return for_tensors_in(w->l, w->start, end, walk_mem, w, diag);
  int64_t nf = dbuf_st_file_count(w->st);
  w->need = file_needs(w->st);
  w->fd = dbuf__mallocn(nf > 0 ? nf : 1, sizeof *w->fd);
  /* F32 source into a 2-byte buffer shrinks; 2-byte into F32 doubles. */
  w->src_buf = malloc((size_t)DBUF_LOAD_BOUNCE_BYTES);
  w->dst_buf = malloc((size_t)DBUF_LOAD_BOUNCE_BYTES * 2);
  if (w->need == NULL || w->fd == NULL || w->src_buf == NULL || w->dst_buf == NULL) {
    rc = dbuf__diag(diag, DBUF_ENOMEM, "checksum: out of memory");
  } else {
    for (int64_t f = 0; f < nf; f++)
      w->fd[f] = -1;
    rc = for_tensors_in(w->l, w->start, end, walk_file, w, diag);
    for (int64_t f = 0; f < nf; f++)
      if (w->fd[f] >= 0)
        close(w->fd[f]);
  }
  free(w->need);
  free(w->fd);
  free(w->src_buf);
  free(w->dst_buf);
  return rc;
}

int
dbuf_load_sums_mem(const dbuf_layout_t *l, int64_t start, int64_t end, dbuf_dtype_t dtype,
                   const void *mem, int64_t mem_bytes, uint64_t *sums, int64_t *rows,
                   dbuf_diag_t *diag)
{
  int64_t bytes;
  int rc;
  if (l == NULL || sums == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "checksum: NULL argument");
  if ((rc = range_ok(l, start, end, dtype, &bytes, diag)) != 0)
    return rc;
  if (bytes != mem_bytes || (mem == NULL && bytes > 0))
    return dbuf__diag(diag, DBUF_EINVAL, "checksum: memory is %lld bytes, the range needs %lld",
                      (long long)mem_bytes, (long long)bytes);
  int64_t n = dbuf_layout_ntensors(l);
  memset(sums, 0, (size_t)n * sizeof *sums);
  if (rows != NULL)
    memset(rows, 0, (size_t)n * sizeof *rows);
  walk_t w = {.l = l, .start = start, .dtype = dtype, .elem = dbuf_dtype_size(dtype),
              .mem = mem, .sums = sums, .rows = rows, .only = -1};
  return walk(&w, end, diag);
}

int
dbuf_load_sums_file(const dbuf_layout_t *l, int64_t start, int64_t end, dbuf_dtype_t dtype,
                    const dbuf_st_t *st, uint64_t *sums, int64_t *rows, int64_t *bytes_read,
                    dbuf_diag_t *diag)
{
  int64_t bytes;
  int rc;
  if (l == NULL || sums == NULL || st == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "checksum: NULL argument");
  if ((rc = range_ok(l, start, end, dtype, &bytes, diag)) != 0)
    return rc;
  int64_t n = dbuf_layout_ntensors(l);
  memset(sums, 0, (size_t)n * sizeof *sums);
  if (rows != NULL)
    memset(rows, 0, (size_t)n * sizeof *rows);
  walk_t w = {.l = l, .start = start, .dtype = dtype, .elem = dbuf_dtype_size(dtype),
              .st = st, .sums = sums, .rows = rows, .only = -1};
  rc = walk(&w, end, diag);
  if (rc == 0 && bytes_read != NULL)
    *bytes_read = w.bytes_read;
  return rc;
}

int
dbuf_load_row_hashes(const dbuf_layout_t *l, int64_t start, int64_t end, dbuf_dtype_t dtype,
                     const void *mem, int64_t mem_bytes, const dbuf_st_t *st, int64_t tensor,
                     uint64_t *hashes, int64_t cap, int64_t *first_row, int64_t *nrows,
                     dbuf_diag_t *diag)
{
  int64_t bytes;
  int rc;
  if (l == NULL || first_row == NULL || nrows == NULL || cap < 0 || (hashes == NULL && cap > 0))
    return dbuf__diag(diag, DBUF_EINVAL, "checksum: NULL argument");
  if (tensor < 0 || tensor >= dbuf_layout_ntensors(l))
    return dbuf__diag(diag, DBUF_ERANGE, "checksum: tensor %lld out of range",
                      (long long)tensor);
  if ((rc = range_ok(l, start, end, dtype, &bytes, diag)) != 0)
    return rc;
  if (st == NULL && (bytes != mem_bytes || (mem == NULL && bytes > 0)))
    return dbuf__diag(diag, DBUF_EINVAL, "checksum: memory is %lld bytes, the range needs %lld",
                      (long long)mem_bytes, (long long)bytes);
  walk_t w = {.l = l, .start = start, .dtype = dtype, .elem = dbuf_dtype_size(dtype),
              .mem = mem, .st = st, .only = tensor, .hashes = hashes, .cap = cap};
  if ((rc = walk(&w, end, diag)) != 0)
    return rc;
  *first_row = w.first_row;
  *nrows = w.nrows;
  return 0;
}
