/* Shape-list readers (text and JSON), whole-file reads, integer lists. */
#include "dbuf/shapes_io.h"
#include "core_internal.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

uint64_t
dbuf_hash64(const void *data, size_t len, uint64_t seed)
{
  return XXH3_64bits_withSeed(data, len, seed);
}

/* Read fd to its end into a NUL-terminated buffer, at most max bytes. */
static int
read_fd(int fd, const char *name, int64_t hint, int64_t max, char **data,
        size_t *len, dbuf_diag_t *diag)
{
  /* Room for the whole file plus a look past its end, for regular files. */
  size_t used = 0, cap = hint > 0 && hint <= max ? (size_t)hint + 4096 : 65536;
  char *buf = malloc(cap + 1);
  if (buf == NULL)
    return dbuf__diag(diag, DBUF_ENOMEM, "%s: out of memory", name);
  for (;;) {
    if (cap - used < 4096) {
      size_t ncap = cap * 2;
      if (ncap > (uint64_t)max + 4096) /* enough to see the limit passed */
        ncap = (size_t)max + 4096;
      char *nb = realloc(buf, ncap + 1);
      if (nb == NULL) {
        free(buf);
        return dbuf__diag(diag, DBUF_ENOMEM, "%s: out of memory", name);
      }
      buf = nb;
      cap = ncap;
    }
    ssize_t got = read(fd, buf + used, cap - used);
    if (got < 0) {
      int e = errno;
      if (e == EINTR)
        continue;
      free(buf);
      return dbuf__diag(diag, DBUF_EIO, "%s: read error: %s", name,
                        strerror(e));
    }
    if (got == 0)
      break;
    used += (size_t)got;
    if (used > (uint64_t)max) {
      free(buf);
      return dbuf__diag(diag, DBUF_EFORMAT,
                        "%s: more than %lld bytes, over the input limit",
                        name, (long long)max);
    }
  }
  buf[used] = '\0';
  *data = buf;
  *len = used;
  return 0;
}

int
dbuf_file_read_all(const char *path, char **data, size_t *len,
                   dbuf_diag_t *diag)
{
  char why[256];
  int64_t size = 0;
  int fd, rc;

  if (path == NULL || data == NULL || len == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "NULL argument");
  if (strcmp(path, "-") == 0)
    return read_fd(STDIN_FILENO, "<stdin>", 0, DBUF_INPUT_MAX_BYTES, data, len,
                   diag);
  rc = dbuf__input_open(path, DBUF_INPUT_MAX_BYTES, &fd, &size, why, sizeof why);
  if (rc != 0)
    return dbuf__diag(diag, rc, "%s: %s", path, why);
  rc = read_fd(fd, path, size, DBUF_INPUT_MAX_BYTES, data, len, diag);
  close(fd);
  return rc;
}

static const char *
display_name(const char *path)
{
  return strcmp(path, "-") == 0 ? "<stdin>" : path;
}

static int
parse_json(const char *name, const char *text, size_t len,
           dbuf_tensors_t *t, dbuf_diag_t *diag)
{
  json_error_t jerr;
  json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
  int rc = 0;

  if (root == NULL)
    return dbuf__diag(diag, DBUF_EPARSE, "%s:%d: invalid JSON: %s", name,
                      jerr.line, jerr.text);
  if (!json_is_array(root)) {
    rc = dbuf__diag(diag, DBUF_EPARSE,
                    "%s:1: expected a JSON array of {\"name\", \"shape\"} "
                    "objects",
                    name);
    goto out;
  }
  size_t i;
  json_t *item;
  json_array_foreach(root, i, item) {
    json_t *jn = json_object_get(item, "name");
    json_t *js = json_object_get(item, "shape");
    json_t *jt = json_object_get(item, "dtype");
    dbuf_dtype_t dt = DBUF_DTYPE_NONE;
    int64_t dims[DBUF_MAX_DIMS];
    dbuf_diag_t d;
    if (!json_is_object(item) || !json_is_string(jn) || !json_is_array(js)) {
      rc = dbuf__diag(diag, DBUF_EPARSE,
                      "%s: entry %zu: expected {\"name\": string, \"shape\": "
                      "[integers]}",
                      name, i);
      goto out;
    }
    if (jt != NULL && (!json_is_string(jt) ||
                       dbuf_dtype_parse(json_string_value(jt), &dt) != 0 ||
                       dbuf_dtype_size(dt) == 0)) {
      rc = dbuf__diag(diag, DBUF_EPARSE, "%s: entry %zu: tensor %s: \"dtype\" is not a known "
                      "type (%s)", name, i, json_string_value(jn), dbuf_dtype_list());
      goto out;
    }
    size_t nd = json_array_size(js);
    if (nd > DBUF_MAX_DIMS) {
      rc = dbuf__diag(diag, DBUF_ESHAPE, "%s: entry %zu: tensor %s: %zu dims (at most %d)",
                      name, i, json_string_value(jn), nd, DBUF_MAX_DIMS);
      goto out;
    }
    for (size_t k = 0; k < nd; k++) {
      json_t *v = json_array_get(js, k);
      if (!json_is_integer(v)) {
        rc = dbuf__diag(diag, DBUF_EPARSE,
                        "%s: entry %zu: tensor %s: dim %zu is not an integer",
                        name, i, json_string_value(jn), k);
        goto out;
      }
      dims[k] = json_integer_value(v);
    }
    if ((rc = dbuf_tensors_add(t, json_string_value(jn), (int)nd, dims, &d)) !=
        0) {
      dbuf__diag(diag, rc, "%s: entry %zu: %s", name, i, d.msg);
      goto out;
    }
    dbuf_tensors_set_dtype(t, dbuf_tensors_count(t) - 1, dt);
  }
out:
  json_decref(root);
  return rc;
}

/* The separators of a text line's fields (those of the strcspn() below). */
static const unsigned char is_sep[256] = {
    [' '] = 1, ['\t'] = 1, ['\r'] = 1, ['\f'] = 1, ['\v'] = 1,
};

/* The next field of a line at *p (NUL-terminated in place, *len its
 * bytes), or NULL. */
static inline char *
next_field(char **p, size_t *len)
{
  char *s = *p;
  while (is_sep[(unsigned char)*s])
    s++;
  if (*s == '\0') {
    *p = s;
    return NULL;
  }
  char *e = s + 1 + strcspn(s + 1, " \t\r\f\v"); /* vectorized by the C library */
  *len = (size_t)(e - s);
  if (*e != '\0')
    *e++ = '\0';
  *p = e;
  return s;
}

/* The longest line of a text shapes file, with its end. */
#define LINE_BYTES 4096

/* Parsed lines travel in batches from the parse to the adds: each name is
 * hashed as it is parsed, and the adds prefetch the index slot of the name
 * AHEAD places on, so that the random reads of a large index overlap.  A
 * regular file is parsed by a reader thread while this one adds (the
 * pipe below); other input is parsed and added in turn.  Errors keep the
 * order of the lines either way: the parse stops at its first error, which
 * comes after the adds of the lines before it. */
#define AHEAD DBUF__PREFETCH_AHEAD
#define BATCH_LINES 1024
#define BATCH_NAMES ((size_t)64 << 10) /* >= LINE_BYTES */

/* A parsed line waiting to be added; its name at names + at. */
typedef struct {
  long line;
  size_t at, len;
  dbuf__tensor_pre_t pre; /* the checks and hashes that need no list */
  int ndim;
  dbuf_dtype_t dtype;
  int64_t dims[DBUF_MAX_DIMS];
} pending_t;

/* Lines parsed and not yet added; rc: the error after them (0: none),
 * last: nothing follows. */
typedef struct {
  int n, rc, last;
  size_t names_len;
  dbuf_diag_t diag;
  pending_t rec[BATCH_LINES];
  char names[BATCH_NAMES];
} batch_t;

/* The batches between a reader thread and the adds: a ring of NBATCH, the
 * reader fills batch[w % NBATCH] while w - r < NBATCH, the adds take
 * batch[r % NBATCH] while r < w; stop: the adds failed, the reader quits. */
#define NBATCH 8
typedef struct pipe {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  batch_t *b[NBATCH];
  int64_t w, r;
  int stop;
} pipe_t;

/* The text parser's state: the input's name, the list, the line number,
 * the batch being filled and, with a reader thread, the pipe. */
typedef struct {
  const char *name;
  dbuf_tensors_t *t;
  long line;
  batch_t *cur;
  pipe_t *pipe;
  int file_rc;                /* an error of the file itself (read, size, NUL) */
  dbuf_diag_t file_diag;      /* its message: it comes before any line's */
  char buf[LINE_BYTES]; /* a copy of the line, its fields NUL-terminated */
} text_state_t;

/* Add a batch's lines in order, then report its error; the first failure
 * names its line. */
static int
add_batch(dbuf_tensors_t *t, const char *name, const batch_t *b, dbuf_diag_t *diag)
{
  for (int k = 0; k < b->n && k < AHEAD; k++)
    dbuf__tensors_prefetch(t, b->rec[k].pre.name_hash);
  for (int k = 0; k < b->n; k++) {
    const pending_t *q = &b->rec[k];
    dbuf_diag_t d;
    if (k + AHEAD < b->n)
      dbuf__tensors_prefetch(t, b->rec[k + AHEAD].pre.name_hash);
    /* dbuf_tensors_add names the tensor itself: add only the line. */
    int rc = dbuf__tensors_add_pre(t, b->names + q->at, q->len, q->ndim, q->dims, &q->pre, &d);
    if (rc != 0)
      return dbuf__diag(diag, rc, "%s:%ld: %s", name, q->line, d.msg);
    if (q->dtype != DBUF_DTYPE_NONE)
      dbuf_tensors_set_dtype(t, dbuf_tensors_count(t) - 1, q->dtype);
  }
  if (b->rc != 0 && diag != NULL)
    *diag = b->diag;
  return b->rc;
}

/* The batch being filled is complete (or carries an error, or is the
 * last).  Without a pipe it is added now: 0 or the first error.  With one
 * it goes to the adds and an empty one comes back: 0, or DBUF_ECANCELED
 * when the adds have stopped (the reader quits). */
static int
deliver(text_state_t *s, dbuf_diag_t *diag)
{
  batch_t *b = s->cur;
  int rc = 0;
  if (s->pipe == NULL) {
    rc = add_batch(s->t, s->name, b, diag);
  } else {
    pipe_t *pp = s->pipe;
    pthread_mutex_lock(&pp->mu);
    pp->w++;
    pthread_cond_broadcast(&pp->cv);
    while (pp->w - pp->r == NBATCH && !pp->stop)
      pthread_cond_wait(&pp->cv, &pp->mu);
    rc = pp->stop ? DBUF_ECANCELED : 0;
    s->cur = pp->b[pp->w % NBATCH];
    pthread_mutex_unlock(&pp->mu);
  }
  s->cur->n = s->cur->rc = s->cur->last = 0;
  s->cur->names_len = 0;
  return rc;
}

/* The input ends after the lines parsed so far, with rc (0 at its end, or
 * the error in d): the last batch goes.  The first error in the order of
 * the lines comes back (without a pipe), or rc. */
static int
finish(text_state_t *s, int rc, const dbuf_diag_t *d, dbuf_diag_t *diag)
{
  s->cur->rc = rc;
  s->cur->last = 1;
  if (rc != 0)
    s->cur->diag = *d;
  int r = deliver(s, diag);
  return s->pipe == NULL ? r : rc;
}

/* Parse [p, le), the next line of the input (without its '\n'), into q,
 * its name copied to tname_out (q->len 0: a blank or comment line). */
static int
parse_fields(text_state_t *s, const char *p, const char *le, char *tname_out,
             pending_t *q, dbuf_diag_t *diag)
{
  const char *name = s->name;
  long line = ++s->line;
  char *buf = s->buf;
  q->len = 0;
  q->line = line;
  if ((size_t)(le - p) >= sizeof s->buf)
    return dbuf__diag(diag, DBUF_EPARSE, "%s:%ld: line longer than %zu bytes",
                      name, line, sizeof s->buf - 1);
  const char *hash = memchr(p, '#', (size_t)(le - p));
  size_t n = (size_t)((hash ? hash : le) - p);
  memcpy(buf, p, n);
  buf[n] = '\0';
  char *at = buf;
  size_t tlen = 0, flen;
  char *tname = next_field(&at, &tlen);
  if (tname == NULL)
    return 0;
  char *shape = next_field(&at, &flen);
  char *dtype = shape ? next_field(&at, &flen) : NULL;
  char *extra = dtype ? next_field(&at, &flen) : NULL;
  if (shape == NULL)
    return dbuf__diag(diag, DBUF_EPARSE,
                      "%s:%ld: tensor %s: missing shape (expected 'NAME "
                      "d0xd1...')",
                      name, line, tname);
  if (extra != NULL)
    return dbuf__diag(diag, DBUF_EPARSE,
                      "%s:%ld: tensor %s: unexpected text '%s' after the dtype",
                      name, line, tname, extra);
  dbuf_diag_t d;
  q->dtype = DBUF_DTYPE_NONE;
  int rc = dbuf_shape_parse(shape, &q->ndim, q->dims, &d);
  if (rc != 0)
    return dbuf__diag(diag, rc, "%s:%ld: tensor %s: %s", name, line, tname,
                      d.msg);
  if (dtype != NULL && (dbuf_dtype_parse(dtype, &q->dtype) != 0 ||
                        dbuf_dtype_size(q->dtype) == 0))
    return dbuf__diag(diag, DBUF_EPARSE, "%s:%ld: tensor %s: unknown dtype '%s' (%s)", name,
                      line, tname, dtype, dbuf_dtype_list());
  q->len = tlen;
  memcpy(tname_out, tname, q->len + 1);
  dbuf__tensors_precheck(tname_out, q->len, q->ndim, q->dims, &q->pre);
  return 0;
}

/* Parse the next line [p, le) into the batch, which goes when full.  A
 * parse error ends the input (finish()). */
static int
parse_line(text_state_t *s, const char *p, const char *le, dbuf_diag_t *diag)
{
  batch_t *b = s->cur;
  pending_t *q = &b->rec[b->n];
  dbuf_diag_t d;
  q->at = b->names_len;
  int rc = parse_fields(s, p, le, b->names + q->at, q, &d);
  if (rc != 0)
    return finish(s, rc, &d, diag);
  if (q->len == 0)
    return 0;
  b->names_len += q->len + 1;
  if (++b->n == BATCH_LINES || BATCH_NAMES - b->names_len < LINE_BYTES)
    return deliver(s, diag);
  return 0;
}

/* Parse the lines of [*p, end) that end in a '\n', and the rest as the last
 * line when final (then the input ends: finish()); *p moves past what was
 * parsed. */
static int
parse_lines(text_state_t *s, const char **p, const char *end, int final,
            dbuf_diag_t *diag)
{
  const char *nl;
  int rc;
  while ((nl = memchr(*p, '\n', (size_t)(end - *p))) != NULL) {
    if ((rc = parse_line(s, *p, nl, diag)) != 0)
      return rc;
    *p = nl + 1;
  }
  /* A rest too long for a line is an error now: more text cannot fix it. */
  if (*p < end && (final || (size_t)(end - *p) >= sizeof s->buf)) {
    if ((rc = parse_line(s, *p, end, diag)) != 0)
      return rc;
    *p = end;
  }
  return final ? finish(s, 0, NULL, diag) : 0;
}

/* The lines of [p, end): one more than its newlines. */
static int64_t
count_lines(const char *p, const char *end)
{
  int64_t lines = 0;
  for (; (p = memchr(p, '\n', (size_t)(end - p))) != NULL; p++)
    lines++;
  return lines;
}

/* The line of the first NUL byte of [p, p + n) (1 + newlines, the input's
 * newlines before p counted in before), or 0 for none. */
static int64_t
nul_line(const char *p, size_t n, int64_t before)
{
  const char *z = memchr(p, '\0', n);
  return z != NULL ? before + count_lines(p, z) + 1 : 0;
}

/* A NUL byte refuses the input, named with its line like any other error. */
static int
nul_diag(dbuf_diag_t *diag, const char *name, int64_t line)
{
  return dbuf__diag(diag, DBUF_EPARSE, "%s:%lld: contains a NUL byte (binary file?)", name,
                    (long long)line);
}

static int
parse_text(const char *name, const char *text, size_t len, dbuf_tensors_t *t,
           dbuf_diag_t *diag)
{
  text_state_t s = {.name = name, .t = t};
  if ((s.cur = malloc(sizeof *s.cur)) == NULL)
    return dbuf__diag(diag, DBUF_ENOMEM, "%s: out of memory", name);
  s.cur->n = s.cur->rc = s.cur->last = 0;
  s.cur->names_len = 0;
  /* One tensor a line at most: room for them all up front, so that the
   * name table is never rebuilt as it grows (the slack goes after). */
  (void)dbuf_tensors_reserve(t, count_lines(text, text + len) + 1); /* a failure shows in the adds */
  (void)dbuf__tensors_reserve_names(t, (int64_t)len + 1); /* a name and its NUL fit its line */
  int rc = parse_lines(&s, &text, text + len, 1, diag);
  free(s.cur);
  return rc;
}

int
dbuf_shapes_parse(const char *name, const char *text, size_t len,
                  dbuf_tensors_t **out, dbuf_diag_t *diag)
{
  dbuf_tensors_t *t;
  int rc;
  if (name == NULL || text == NULL || out == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "NULL argument");
  int64_t nul = nul_line(text, len, 0);
  if (nul > 0)
    return nul_diag(diag, name, nul);
  if ((rc = dbuf_tensors_create(&t)) != 0)
    return dbuf__diag(diag, rc, "%s: %s", name, dbuf_strerror(rc));
  size_t i = 0;
  while (i < len && isspace((unsigned char)text[i]))
    i++;
  if (i < len && text[i] == '[')
    rc = parse_json(name, text, len, t, diag);
  else
    rc = parse_text(name, text, len, t, diag);
  if (rc == 0 && dbuf_tensors_count(t) == 0)
    rc = dbuf__diag(diag, DBUF_EPARSE,
                    "%s: no tensors (the input is empty or holds only "
                    "comments)",
                    name);
  if (rc != 0) {
    dbuf_tensors_destroy(t);
    return rc;
  }
  dbuf__tensors_trim(t); /* the list is complete: no slack kept */
  *out = t;
  return 0;
}

/* What the first pass over a shapes file found. */
typedef struct {
  int64_t lines; /* newlines + 1, or an estimate (see scan_file) */
  int64_t nul;   /* the line of the first NUL byte, or 0 */
  int json;      /* the first non-blank byte is '[' (or there is none) */
} scan_t;

/* The next at most cap bytes of fd in buf (*got 0 at the end); *total
 * counts them against DBUF_INPUT_MAX_BYTES, with read_fd's messages. */
static int
read_chunk(int fd, const char *name, char *buf, size_t cap, size_t *got,
           int64_t *total, dbuf_diag_t *diag)
{
  for (;;) {
    ssize_t r = read(fd, buf, cap);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0)
      return dbuf__diag(diag, DBUF_EIO, "%s: read error: %s", name, strerror(errno));
    *total += r;
    if (*total > DBUF_INPUT_MAX_BYTES)
      return dbuf__diag(diag, DBUF_EFORMAT, "%s: more than %lld bytes, over the input limit",
                        name, (long long)DBUF_INPUT_MAX_BYTES);
    *got = (size_t)r;
    return 0;
  }
}

#define READ_CHUNK ((size_t)1 << 20)

/* Samples of a file's line density besides its first chunk: SAMPLES
 * windows of SAMPLE_BYTES spread up to its end. */
#define SAMPLES 4
#define SAMPLE_BYTES ((size_t)64 << 10)

/* The lines of a text file of size bytes whose first got bytes (in buf)
 * hold lines: estimated from the newlines per byte of that chunk and of
 * SAMPLES windows read further on, when they all agree within a factor of
 * 2 (a shape list repeats its layers), with 1/16 more; else 0 (the file
 * is then counted whole).  The estimate only sizes the list's
 * reservation: the adds grow it if they must. */
static int64_t
estimate_lines(int fd, char *buf, size_t got, int64_t lines, int64_t size)
{
  double lo = (double)lines / (double)got, hi = lo, sum = lo;
  for (int k = 1; k <= SAMPLES; k++) {
    off_t at = (off_t)(size * k / SAMPLES) - (off_t)SAMPLE_BYTES;
    ssize_t r = at < 0 ? -1 : pread(fd, buf, SAMPLE_BYTES, at);
    if (r != (ssize_t)SAMPLE_BYTES)
      return 0; /* a small file, a short read (it shrank?) or an error */
    double d = (double)count_lines(buf, buf + r) / (double)r;
    lo = d < lo ? d : lo;
    hi = d > hi ? d : hi;
    sum += d;
  }
  if (lo <= 0 || hi > 2 * lo)
    return 0;
  double est = sum / (SAMPLES + 1) * (double)size * 17 / 16 + 1;
  return est < (double)size ? (int64_t)est : size; /* size <= 2^30: exact in a double */
}

/* The first pass: lines, NUL bytes and the format, through buf.  With
 * sample, a file whose format the first chunk decides and whose lines
 * estimate_lines() can estimate is read no further: sc->lines is that
 * estimate, and the NUL bytes are left to the second pass. */
static int
scan_file(int fd, const char *name, char *buf, int64_t size, int sample, scan_t *sc,
          dbuf_diag_t *diag)
{
  int64_t total = 0;
  int decided = 0;
  size_t got;
  int rc;
  memset(sc, 0, sizeof *sc);
  sc->lines = 1;
  while ((rc = read_chunk(fd, name, buf, READ_CHUNK, &got, &total, diag)) == 0 && got > 0) {
    int64_t lines = count_lines(buf, buf + got);
    if (sc->nul == 0)
      sc->nul = nul_line(buf, got, sc->lines - 1);
    sc->lines += lines;
    for (size_t i = 0; !decided && i < got; i++) {
      if (!isspace((unsigned char)buf[i])) {
        decided = 1;
        sc->json = buf[i] == '[';
      }
    }
    if (sample && decided && !sc->json && !sc->nul && total == (int64_t)got && total < size) {
      int64_t est = estimate_lines(fd, buf, got, lines, size);
      if (est > 0) {
        sc->lines = est;
        return 0;
      }
    }
    sample = 0;
  }
  if (!decided)
    sc->json = 1; /* blank: the whole-file reader names the problem */
  return rc;
}

/* After an error in a line or a NUL byte (on line nul, or 0), the rest of
 * the file is still read for the errors of the file itself, which come
 * first in dbuf_file_read_all()'s order (a read error or the size limit,
 * then a NUL byte, before any parse): s->file_rc.  newlines: those of the
 * bytes read so far, for the line of a NUL byte found now. */
static void
read_rest(text_state_t *s, int fd, char *buf, int64_t total, int64_t newlines, int64_t nul)
{
  size_t got;
  int rc;
  dbuf_diag_t d;
  while ((rc = read_chunk(fd, s->name, buf, READ_CHUNK, &got, &total, &d)) == 0 && got > 0) {
    if (nul == 0 && (nul = nul_line(buf, got, newlines)) == 0)
      newlines += count_lines(buf, buf + got);
  }
  if (rc == 0 && nul > 0)
    rc = nul_diag(&d, s->name, nul);
  s->file_rc = rc;
  if (rc != 0)
    s->file_diag = d;
}

/* The second pass over a text shapes file: read it chunk by chunk, the
 * digest of every byte on the way, and parse it into s's batches.  Ends
 * with finish() (but when the adds have stopped): 0, or an error.  An
 * error of the file itself also goes to s->file_rc, wherever it lies. */
static int
read_and_parse(text_state_t *s, int fd, char *buf, XXH3_state_t *xs, dbuf_diag_t *diag)
{
  int64_t total = 0;
  size_t held = 0, got;
  dbuf_diag_t d;
  int rc;
  do {
    if (s->pipe != NULL) { /* the adds failed: no more lines are needed */
      pthread_mutex_lock(&s->pipe->mu);
      int stop = s->pipe->stop;
      pthread_mutex_unlock(&s->pipe->mu);
      if (stop) { /* every line read so far was parsed */
        read_rest(s, fd, buf, total, s->line, 0);
        return DBUF_ECANCELED;
      }
    }
    if ((rc = read_chunk(fd, s->name, buf + held, READ_CHUNK, &got, &total, &d)) != 0) {
      s->file_rc = rc;
      s->file_diag = d;
      return finish(s, rc, &d, diag);
    }
    /* The lines parsed so far end in the newlines before buf: the held
     * rest of a line has none. */
    const int64_t before = s->line;
    int64_t nul = nul_line(buf + held, got, before);
    if (nul > 0) { /* not parsed: a read error may follow */
      read_rest(s, fd, buf, total, 0, nul);
      return finish(s, s->file_rc, &s->file_diag, diag);
    }
    (void)XXH3_64bits_update(xs, buf + held, got);
    const char *p = buf, *end = buf + held + got;
    if ((rc = parse_lines(s, &p, end, got == 0, diag)) != 0) {
      if (got > 0)
        read_rest(s, fd, buf, total, before + count_lines(buf, end), 0);
      return rc;
    }
    held = (size_t)(end - p); /* < sizeof s->buf: parse_lines took longer rests */
    memmove(buf, p, held);
  } while (got > 0);
  return 0;
}

/* The reader thread: the read and the parse, into the pipe. */
typedef struct {
  text_state_t s;
  int fd;
  char *buf;
  XXH3_state_t *xs;
} reader_t;

static void *
reader_main(void *arg)
{
  reader_t *rd = arg;
  dbuf_diag_t d;
  (void)read_and_parse(&rd->s, rd->fd, rd->buf, rd->xs, &d); /* its errors travel in the batches */
  return NULL;
}

/* At most this much faulted in before the adds look at the pipe again
 * (0.15 ms of clearing at the 3.6 GB/s measured on the development VM;
 * the adds of a batch take about 0.08 ms there). */
#define PREFAULT_MOST ((size_t)512 << 10)

/* Tests only (see core_internal.h). */
void (*dbuf__shapes_wait_hook)(int did);

/* The adds of the batches the reader thread fills, in order, until the
 * last one or the first error (which stops the reader).  While none is
 * ready, what the adds of the next NBATCH + 1 batches will write is faulted
 * in (pf, or NULL): the reader, which parses, is the slower of the two, and
 * the clearing of fresh pages stays off it. */
static int
add_from_pipe(pipe_t *pp, dbuf_tensors_t *t, const char *name, dbuf__prefault_t *pf,
              dbuf_diag_t *diag)
{
  for (;;) {
    int more = pf != NULL; /* prefault work may be left for this wait */
    pthread_mutex_lock(&pp->mu);
    while (pp->r == pp->w) {
      if (more) {
        pthread_mutex_unlock(&pp->mu);
        int64_t soon = dbuf_tensors_count(t) + (NBATCH + 1) * BATCH_LINES;
        int64_t soon_bytes = dbuf__tensors_name_bytes(t) + (int64_t)((NBATCH + 1) * BATCH_NAMES);
        more = dbuf__prefault_to(pf, soon, soon_bytes, PREFAULT_MOST);
        if (dbuf__shapes_wait_hook != NULL)
          dbuf__shapes_wait_hook(more);
        pthread_mutex_lock(&pp->mu);
        continue; /* batches may have come while unlocked: look again */
      }
      pthread_cond_wait(&pp->cv, &pp->mu);
    }
    const batch_t *b = pp->b[pp->r % NBATCH];
    pthread_mutex_unlock(&pp->mu);
    int rc = add_batch(t, name, b, diag), last = b->last;
    pthread_mutex_lock(&pp->mu);
    pp->r++;
    pp->stop = rc != 0;
    pthread_cond_broadcast(&pp->cv);
    pthread_mutex_unlock(&pp->mu);
    if (rc != 0 || last)
      return rc;
  }
}

/* Files smaller than this are parsed without a reader thread. */
#define PIPE_MIN_BYTES ((int64_t)1 << 20)

/* The second pass over a text shapes file: a reader thread reads and
 * parses while this one adds (in turn for a small file, or if the thread
 * cannot start), the digest of every byte on the way. */
static int
stream_text(int fd, const char *name, char *buf, int64_t lines, int64_t size, dbuf_tensors_t *t,
            uint64_t *digest, dbuf_diag_t *diag)
{
  pipe_t pp;
  reader_t rd = {.s = {.name = name, .t = t}, .fd = fd, .buf = buf};
  int nb = size >= PIPE_MIN_BYTES ? NBATCH : 1, rc = 0, i;
  pthread_t th;
  memset(&pp, 0, sizeof pp);
  for (i = 0; i < nb && rc == 0; i++)
    if ((pp.b[i] = malloc(sizeof *pp.b[i])) == NULL)
      rc = DBUF_ENOMEM;
  rd.xs = XXH3_createState();
  if (rc != 0 || rd.xs == NULL || XXH3_64bits_reset_withSeed(rd.xs, 0) != XXH_OK) {
    rc = dbuf__diag(diag, DBUF_ENOMEM, "%s: out of memory", name);
    goto out;
  }
  for (i = 0; i < nb; i++) {
    pp.b[i]->n = pp.b[i]->rc = pp.b[i]->last = 0;
    pp.b[i]->names_len = 0;
  }
  rd.s.cur = pp.b[0];
  (void)dbuf_tensors_reserve(t, lines); /* a failure shows in the adds */
  (void)dbuf__tensors_reserve_names(t, size + 1); /* a name and its NUL fit its line */
  int piped = nb == NBATCH && pthread_mutex_init(&pp.mu, NULL) == 0;
  if (piped && pthread_cond_init(&pp.cv, NULL) != 0) {
    pthread_mutex_destroy(&pp.mu);
    piped = 0;
  }
  rd.s.pipe = piped ? &pp : NULL;
  dbuf__prefault_t pf;
  if (piped)
    dbuf__tensors_prefault_init(t, &pf);
  if (piped && pthread_create(&th, NULL, reader_main, &rd) == 0) {
    rc = add_from_pipe(&pp, t, name, &pf, diag);
    pthread_join(th, NULL);
  } else {
    rd.s.pipe = NULL;
    rc = read_and_parse(&rd.s, fd, buf, rd.xs, diag);
  }
  if (rc != 0 && rd.s.file_rc != 0) { /* the file's own error comes first */
    rc = rd.s.file_rc;
    if (diag != NULL)
      *diag = rd.s.file_diag;
  }
  if (piped) {
    pthread_cond_destroy(&pp.cv);
    pthread_mutex_destroy(&pp.mu);
  }
  if (rc == 0 && digest != NULL)
    *digest = XXH3_64bits_digest(rd.xs);
out:
  XXH3_freeState(rd.xs);
  for (i = 0; i < nb; i++)
    free(pp.b[i]);
  return rc;
}

/*
 * A regular file of text shapes is read twice through one small buffer
 * (lines, NUL bytes and format first, or for the reader thread only a
 * sample of its lines; then the parse), never whole: the buffer's pages
 * are reused where a whole-file copy would take fresh ones.
 * The errors and their order are those of dbuf_file_read_all() followed by
 * dbuf_shapes_parse().  JSON, blank files and stdin are read whole.
 */
static int
read_text_file(const char *path, dbuf_tensors_t **out, uint64_t *digest, int *whole,
               dbuf_diag_t *diag)
{
  char why[256];
  int64_t size = 0;
  int fd, rc;
  scan_t sc;
  dbuf_tensors_t *t = NULL;
  char *buf = NULL;

  *whole = 0;
  rc = dbuf__input_open(path, DBUF_INPUT_MAX_BYTES, &fd, &size, why, sizeof why);
  if (rc != 0)
    return dbuf__diag(diag, rc, "%s: %s", path, why);
  if ((buf = malloc(READ_CHUNK + LINE_BYTES)) == NULL) {
    rc = dbuf__diag(diag, DBUF_ENOMEM, "%s: out of memory", path);
    goto out;
  }
  /* A file for the reader thread is sampled, not scanned: its second
   * pass finds the NUL bytes, and names them before any line's error. */
  if ((rc = scan_file(fd, path, buf, size, size >= PIPE_MIN_BYTES, &sc, diag)) != 0)
    goto out;
  if (sc.nul > 0) {
    rc = nul_diag(diag, path, sc.nul);
    goto out;
  }
  if (sc.json) {
    *whole = 1;
    goto out;
  }
  if (lseek(fd, 0, SEEK_SET) != 0) {
    rc = dbuf__diag(diag, DBUF_EIO, "%s: read error: %s", path, strerror(errno));
    goto out;
  }
  if ((rc = dbuf_tensors_create(&t)) != 0) {
    rc = dbuf__diag(diag, rc, "%s: %s", path, dbuf_strerror(rc));
    goto out;
  }
  if ((rc = stream_text(fd, path, buf, sc.lines, size, t, digest, diag)) == 0 &&
      dbuf_tensors_count(t) == 0)
    rc = dbuf__diag(diag, DBUF_EPARSE,
                    "%s: no tensors (the input is empty or holds only "
                    "comments)",
                    path);
  if (rc == 0) {
    dbuf__tensors_trim(t); /* the list is complete: no slack kept */
    *out = t;
    t = NULL;
  }
out:
  dbuf_tensors_destroy(t);
  free(buf);
  close(fd);
  return rc;
}

int
dbuf_shapes_read(const char *path, dbuf_tensors_t **out, uint64_t *digest,
                 dbuf_diag_t *diag)
{
  char *data;
  size_t len;
  int rc, whole = 1;
  if (path == NULL || out == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "NULL argument");
  if (strcmp(path, "-") != 0 &&
      ((rc = read_text_file(path, out, digest, &whole, diag)) != 0 || !whole))
    return rc;
  if ((rc = dbuf_file_read_all(path, &data, &len, diag)) != 0)
    return rc;
  rc = dbuf_shapes_parse(display_name(path), data, len, out, diag);
  if (rc == 0 && digest != NULL)
    *digest = dbuf_hash64(data, len, 0);
  free(data);
  return rc;
}

int
dbuf_ints_read(const char *path, int64_t **vals, int64_t *n, dbuf_diag_t *diag)
{
  char *data, *p, *save = NULL;
  size_t len;
  int64_t count = 0, cap = 0, *v = NULL;
  long line = 0;
  int rc;

  if (path == NULL || vals == NULL || n == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "NULL argument");
  if ((rc = dbuf_file_read_all(path, &data, &len, diag)) != 0)
    return rc;
  const char *name = display_name(path);
  for (p = data; p != NULL && (size_t)(p - data) <= len;) {
    char *nl = strchr(p, '\n');
    if (nl)
      *nl = '\0';
    line++;
    char *hash = strchr(p, '#');
    if (hash)
      *hash = '\0';
    char *tok = strtok_r(p, " \t\r", &save);
    p = nl ? nl + 1 : NULL;
    if (tok == NULL)
      continue;
    char *extra = strtok_r(NULL, " \t\r", &save);
    char *end;
    errno = 0;
    long long x = strtoll(tok, &end, 10);
    if (*end != '\0' || errno == ERANGE || extra != NULL) {
      rc = dbuf__diag(diag, DBUF_EPARSE, "%s:%ld: expected one integer, got '%s%s%s'",
                      name, line, tok, extra ? " " : "", extra ? extra : "");
      goto fail;
    }
    if (count == cap) {
      int64_t ncap = cap ? cap * 2 : 64;
      int64_t *nv = dbuf__reallocn(v, ncap, sizeof *nv);
      if (nv == NULL) {
        rc = dbuf__diag(diag, DBUF_ENOMEM, "%s: out of memory", name);
        goto fail;
      }
      v = nv;
      cap = ncap;
    }
    v[count++] = x;
  }
  free(data);
  *vals = v;
  *n = count;
  return 0;
fail:
  free(data);
  free(v);
  return rc;
}
