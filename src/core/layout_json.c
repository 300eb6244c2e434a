/* The layout JSON schema: a direct writer (one tensor a line) and a reader. */
#include "dbuf/layout_json.h"
#include "core_internal.h"
#include "layout_internal.h"
#include "strbuf.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The decimal digits of v at p, as "%lld" prints them; the end. */
static char *
put_int(char *p, long long v)
{
  static const char pairs[] = "00010203040506070809101112131415161718192021222324"
                              "25262728293031323334353637383940414243444546474849"
                              "50515253545556575859606162636465666768697071727374"
                              "75767778798081828384858687888990919293949596979899";
  char d[24];
  int i = (int)sizeof d;
  unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
  while (u >= 100) {
    unsigned r = (unsigned)(u % 100);
    u /= 100;
    d[--i] = pairs[2 * r + 1];
    d[--i] = pairs[2 * r];
  }
  if (u >= 10) {
    d[--i] = pairs[2 * u + 1];
    d[--i] = pairs[2 * u];
  } else {
    d[--i] = (char)('0' + u);
  }
  if (v < 0)
    *p++ = '-';
  memcpy(p, d + i, sizeof d - (size_t)i);
  return p + (sizeof d - (size_t)i);
}

/* The longest name and indent tensor_line() takes; the line's room. */
#define FAST_NAME 256
#define FAST_IND 64
#define FAST_LINE (FAST_IND + FAST_NAME + 24 * DBUF_MAX_DIMS + 128)

static char *
put_str(char *p, const char *s, size_t n)
{
  memcpy(p, s, n);
  return p + n;
}

#define PUT_LIT(p, lit) put_str(p, lit, sizeof lit - 1)

/*
 * Tensor i's line of the "tensors" array (owner < 0: none), in one append
 * when its name is short ASCII that needs no escape: 1, or 0 when it was
 * not written (the appends of the loop then write it, escapes and all).
 */
static int
tensor_line(dbuf__sb_t *b, const dbuf_tensors_t *t, int64_t i, int64_t off, int owner, int ind)
{
  const char *name = dbuf_tensors_name(t, i);
  char line[FAST_LINE], *p = line;
  size_t nlen = 0;
  if (ind > FAST_IND)
    return 0;
  for (; name[nlen] != '\0'; nlen++) {
    unsigned char c = (unsigned char)name[nlen];
    if (nlen == FAST_NAME || c == '"' || c == '\\' || c < 0x20 || c >= 0x80)
      return 0;
  }
  if (i)
    *p++ = ',';
  *p++ = '\n';
  memset(p, ' ', (size_t)ind + 2);
  p += ind + 2;
  p = PUT_LIT(p, "{\"name\": \"");
  p = put_str(p, name, nlen);
  p = PUT_LIT(p, "\", \"shape\": [");
  const int64_t *d = dbuf_tensors_dims(t, i);
  for (int k = 0; k < dbuf_tensors_ndim(t, i); k++) {
    if (k)
      p = PUT_LIT(p, ", ");
    p = put_int(p, d[k]);
  }
  p = PUT_LIT(p, "], \"offset\": ");
  p = put_int(p, off);
  if (owner >= 0) {
    p = PUT_LIT(p, ", \"owner\": ");
    p = put_int(p, owner);
  }
  *p++ = '}';
  dbuf__sb_append(b, line, (size_t)(p - line));
  return 1;
}

/* Tensors [from, to) of l's "tensors" array, one line each. */
static void
tensor_lines(dbuf__sb_t *b, const dbuf_layout_t *l, int64_t from, int64_t to, int ind)
{
  const dbuf_tensors_t *t = dbuf_layout_tensors(l);
  const int64_t *off = dbuf_layout_offsets(l);
  const int *owners = dbuf_layout_owners(l);
  /* By appends rather than formats: a million tensors are a million lines. */
  for (int64_t i = from; i < to && !b->failed; i++) {
    if (tensor_line(b, t, i, off[i], owners != NULL ? owners[i] : -1, ind))
      continue;
    if (i)
      dbuf__sb_append(b, ",", 1);
    dbuf__sb_append(b, "\n", 1);
    dbuf__sb_fill(b, ' ', (size_t)ind + 2);
    dbuf__sb_puts(b, "{\"name\": ");
    dbuf__sb_json_string(b, dbuf_tensors_name(t, i));
    dbuf__sb_puts(b, ", \"shape\": [");
    const int64_t *d = dbuf_tensors_dims(t, i);
    for (int k = 0; k < dbuf_tensors_ndim(t, i); k++) {
      if (k)
        dbuf__sb_append(b, ", ", 2);
      dbuf__sb_int(b, d[k]);
    }
    dbuf__sb_puts(b, "], \"offset\": ");
    dbuf__sb_int(b, off[i]);
    if (owners != NULL) {
      dbuf__sb_puts(b, ", \"owner\": ");
      dbuf__sb_int(b, owners[i]);
    }
    dbuf__sb_append(b, "}", 1);
  }
}

/*
 * The lines of many tensors are formatted on two threads: blocks of
 * JSON_BLOCK tensors, the even ones by a helper thread into one of two
 * buffers of its own, the odd ones by this thread straight into b, which
 * also takes each even block in turn.  The text is the same as from one
 * thread; memory stays two blocks' text.  Lists under JSON_PAR_MIN
 * tensors, or a thread that cannot start, take the one-thread loop.
 */
#define JSON_BLOCK ((int64_t)4096)
#define JSON_PAR_MIN ((int64_t)65536)

typedef struct {
  const dbuf_layout_t *l;
  int ind;
  int64_t n;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  dbuf__sb_t buf[2]; /* even block 2j is in buf[j % 2] */
  int full[2];
  int stop; /* this thread failed: the helper quits */
} json_par_t;

static void *
json_helper(void *arg)
{
  json_par_t *jp = arg;
  for (int64_t j = 0; 2 * j * JSON_BLOCK < jp->n; j++) {
    dbuf__sb_t *sb = &jp->buf[j % 2];
    pthread_mutex_lock(&jp->mu);
    while (jp->full[j % 2] && !jp->stop)
      pthread_cond_wait(&jp->cv, &jp->mu);
    int stop = jp->stop;
    pthread_mutex_unlock(&jp->mu);
    if (stop)
      break;
    int64_t from = 2 * j * JSON_BLOCK, to = from + JSON_BLOCK < jp->n ? from + JSON_BLOCK : jp->n;
    sb->len = 0;
    tensor_lines(sb, jp->l, from, to, jp->ind);
    pthread_mutex_lock(&jp->mu);
    jp->full[j % 2] = 1;
    pthread_cond_broadcast(&jp->cv);
    pthread_mutex_unlock(&jp->mu);
  }
  return NULL;
}

static void
tensor_lines_all(dbuf__sb_t *b, const dbuf_layout_t *l, int ind)
{
  int64_t n = dbuf_layout_ntensors(l);
  json_par_t jp = {.l = l, .ind = ind, .n = n, .buf = {DBUF__SB_INIT, DBUF__SB_INIT}};
  pthread_t th;
  if (n < JSON_PAR_MIN || pthread_mutex_init(&jp.mu, NULL) != 0) {
    tensor_lines(b, l, 0, n, ind);
    return;
  }
  if (pthread_cond_init(&jp.cv, NULL) != 0) {
    pthread_mutex_destroy(&jp.mu);
    tensor_lines(b, l, 0, n, ind);
    return;
  }
  if (pthread_create(&th, NULL, json_helper, &jp) != 0) {
    tensor_lines(b, l, 0, n, ind);
  } else {
    for (int64_t k = 0; k * JSON_BLOCK < n && !b->failed; k++) {
      int64_t from = k * JSON_BLOCK, to = from + JSON_BLOCK < n ? from + JSON_BLOCK : n;
      if (k % 2 == 1) {
        tensor_lines(b, l, from, to, ind);
        continue;
      }
      dbuf__sb_t *sb = &jp.buf[(k / 2) % 2];
      pthread_mutex_lock(&jp.mu);
      while (!jp.full[(k / 2) % 2])
        pthread_cond_wait(&jp.cv, &jp.mu);
      pthread_mutex_unlock(&jp.mu);
      if (sb->failed) { /* the helper ran out of memory */
        b->failed = 1;
        b->code = sb->code;
      } else {
        dbuf__sb_append(b, sb->p, sb->len);
      }
      pthread_mutex_lock(&jp.mu);
      jp.full[(k / 2) % 2] = 0;
      pthread_cond_broadcast(&jp.cv);
      pthread_mutex_unlock(&jp.mu);
    }
    pthread_mutex_lock(&jp.mu);
    jp.stop = 1;
    pthread_cond_broadcast(&jp.cv);
    pthread_mutex_unlock(&jp.mu);
    pthread_join(th, NULL);
  }
  dbuf__sb_free(&jp.buf[0]);
  dbuf__sb_free(&jp.buf[1]);
  pthread_cond_destroy(&jp.cv);
  pthread_mutex_destroy(&jp.mu);
}

void
dbuf__layout_json_members(dbuf__sb_t *b, const dbuf_layout_t *l, unsigned flags, int ind)
{
  const dbuf_tensors_t *t = dbuf_layout_tensors(l);
  const int64_t *range = dbuf_layout_range(l);
  int nranks = dbuf_layout_nranks(l);
  int64_t n = dbuf_layout_ntensors(l);

  dbuf__sb_printf(b, "%*s\"layout\": \"%s\",\n%*s\"dp_size\": %d,\n%*s\"block_size\": %lld,\n",
                  ind, "", dbuf_layout_kind_name(dbuf_layout_kind(l)), ind, "", nranks, ind,
                  "", (long long)dbuf_layout_block_size(l));
  if (dbuf_layout_chunk_size(l) > 0)
    dbuf__sb_printf(b, "%*s\"chunk_size\": %lld,\n", ind, "",
                    (long long)dbuf_layout_chunk_size(l));
  dbuf__sb_printf(b, "%*s\"size\": %lld,\n%*s\"logical_size\": %lld,\n", ind, "",
                  (long long)dbuf_layout_size(l), ind, "", (long long)dbuf_tensors_total(t));
  dbuf__sb_printf(b, "%*s\"rank_offsets\": [", ind, "");
  for (int r = 0; r < nranks; r++)
    dbuf__sb_printf(b, r ? ", %lld" : "%lld", (long long)range[r]);
  dbuf__sb_printf(b, "],\n%*s\"tensors\": [", ind, "");
  tensor_lines_all(b, l, ind);
  if (n)
    dbuf__sb_printf(b, "\n%*s]", ind, "");
  else
    dbuf__sb_printf(b, "]");
  if (flags & DBUF_JSON_PIECES) {
    dbuf__sb_printf(b, ",\n%*s\"ranks\": [", ind, "");
    dbuf_piece_t *pc = NULL;
    int64_t cap = 0;
    for (int r = 0; r < nranks && !b->failed; r++) {
      int64_t np;
      dbuf_layout_rank_pieces(l, r, NULL, 0, &np);
      if (np > cap) {
        dbuf_piece_t *npc = dbuf__reallocn(pc, np, sizeof *npc);
        if (npc == NULL) {
          b->failed = 1;
          break;
        }
        pc = npc;
        cap = np;
      }
      dbuf_layout_rank_pieces(l, r, pc, cap, &np);
      dbuf__sb_printf(b,
                      "%s\n%*s{\"rank\": %d, \"offset\": %lld, \"size\": %lld, "
                      "\"pieces\": [",
                      r ? "," : "", ind + 2, "", r, (long long)range[r],
                      (long long)(range[r + 1] - range[r]));
      for (int64_t k = 0; k < np; k++)
        dbuf__sb_printf(b,
                        "%s\n%*s{\"tensor\": %lld, \"first_row\": %lld, \"rows\": "
                        "%lld, \"elements\": %lld, \"offset\": %lld}",
                        k ? "," : "", ind + 4, "", (long long)pc[k].tensor,
                        (long long)pc[k].first_row, (long long)pc[k].nrows,
                        (long long)pc[k].nelems, (long long)pc[k].offset);
      if (np)
        dbuf__sb_printf(b, "\n%*s]}", ind + 2, "");
      else
        dbuf__sb_printf(b, "]}");
    }
    free(pc);
    if (nranks)
      dbuf__sb_printf(b, "\n%*s]", ind, "");
    else
      dbuf__sb_printf(b, "]");
  }
}

/* The whole layout document into b (a string or a streaming buffer). */
static void
layout_json(dbuf__sb_t *b, const dbuf_layout_t *l, unsigned flags)
{
  dbuf__sb_printf(b, "{\n  \"format\": \"dbuf-shard-layout\",\n  \"version\": %d,\n",
                  DBUF_LAYOUT_JSON_VERSION);
  dbuf__layout_json_members(b, l, flags, 2);
  dbuf__sb_printf(b, "\n}\n");
}

int
dbuf_layout_to_json(const dbuf_layout_t *l, unsigned flags, char **text,
                    size_t *len)
{
  dbuf__sb_t b = DBUF__SB_INIT;
  if (l == NULL || text == NULL || len == NULL)
    return DBUF_EINVAL;
  layout_json(&b, l, flags);
  return dbuf__sb_finish(&b, text, len);
}

int
dbuf_layout_write_json(const dbuf_layout_t *l, unsigned flags, dbuf_write_fn write, void *arg)
{
  dbuf__sb_t b;
  if (l == NULL || write == NULL)
    return DBUF_EINVAL;
  dbuf__sb_init_sink(&b, write, arg);
  layout_json(&b, l, flags);
  return dbuf__sb_drain(&b);
}

/* ------------------------------------------------------------------ */

static int
get_int(const char *name, json_t *obj, const char *key, int required,
        int64_t *out, dbuf_diag_t *diag)
{
  json_t *v = json_object_get(obj, key);
  if (v == NULL) {
    if (!required)
      return 1;
    return dbuf__diag(diag, DBUF_EPARSE, "%s: missing \"%s\"", name, key);
  }
  if (!json_is_integer(v))
    return dbuf__diag(diag, DBUF_EPARSE, "%s: \"%s\" is not an integer", name,
                      key);
  *out = json_integer_value(v);
  return 0;
}

/* A layout document being read: the fields of each section in turn. */
typedef struct {
  const char *name; /* for messages */
  dbuf_layout_kind_t kind;
  int64_t dp, block, size, chunk;
  json_t *jranks, *jtensors; /* borrowed from the document */
  int64_t n;                 /* tensors */
  dbuf_tensors_t *t;
  int64_t *offsets, *ranks;
  int *owners;
  int nowners;
} doc_t;

/* "layout", "dp_size", "size", "block_size", "chunk_size". */
static int
read_header(json_t *root, doc_t *d, dbuf_diag_t *diag)
{
  int rc;
  json_t *jk = json_object_get(root, "layout");
  if (!json_is_string(jk) || dbuf_layout_kind_parse(json_string_value(jk), &d->kind) != 0)
    return dbuf__diag(diag, DBUF_EPARSE,
                      "%s: \"layout\" must be \"padded\", \"unpadded\", "
                      "\"tensor\" or \"compact\"",
                      d->name);
  if ((rc = get_int(d->name, root, "dp_size", 1, &d->dp, diag)) != 0 ||
      (rc = get_int(d->name, root, "size", 1, &d->size, diag)) != 0)
    return rc;
  if ((rc = get_int(d->name, root, "block_size", 0, &d->block, diag)) < 0 ||
      (rc = get_int(d->name, root, "chunk_size", 0, &d->chunk, diag)) < 0)
    return rc;
  if (dbuf__layout_chunked(d->kind) && rc == 1) /* no "chunk_size" */
    return dbuf__diag(diag, DBUF_EPARSE, "%s: %s layout without \"chunk_size\"",
                      d->name, dbuf_layout_kind_name(d->kind));
  if (d->dp < 1 || d->dp > INT32_MAX)
    return dbuf__diag(diag, DBUF_ENRANKS, "%s: dp_size %lld out of range", d->name,
                      (long long)d->dp);
  return 0;
}

/* The "rank_offsets" and "tensors" arrays exist and have the right sizes;
 * the arrays of the layout are allocated. */
static int
find_arrays(json_t *root, doc_t *d, dbuf_diag_t *diag)
{
  d->jranks = json_object_get(root, "rank_offsets");
  if (!json_is_array(d->jranks) || (int64_t)json_array_size(d->jranks) != d->dp)
    return dbuf__diag(diag, DBUF_EPARSE,
                      "%s: \"rank_offsets\" must be an array of dp_size (%lld) "
                      "integers",
                      d->name, (long long)d->dp);
  d->jtensors = json_object_get(root, "tensors");
  if (!json_is_array(d->jtensors))
    return dbuf__diag(diag, DBUF_EPARSE, "%s: missing \"tensors\" array", d->name);
  d->n = (int64_t)json_array_size(d->jtensors);
  if (d->n == 0)
    return dbuf__diag(diag, DBUF_EPARSE, "%s: no tensors (\"tensors\" is empty)",
                      d->name);
  d->ranks = dbuf__mallocn(d->dp, sizeof *d->ranks);
  d->offsets = dbuf__mallocn(d->n, sizeof *d->offsets);
  d->owners = dbuf__mallocn(d->n, sizeof *d->owners);
  if (d->ranks == NULL || d->offsets == NULL || d->owners == NULL ||
      dbuf_tensors_create(&d->t) != 0)
    return dbuf__diag(diag, DBUF_ENOMEM, "%s: out of memory", d->name);
  return 0;
}

static int
read_rank_offsets(doc_t *d, dbuf_diag_t *diag)
{
  for (int64_t r = 0; r < d->dp; r++) {
    json_t *v = json_array_get(d->jranks, (size_t)r);
    if (!json_is_integer(v))
      return dbuf__diag(diag, DBUF_EPARSE, "%s: rank_offsets[%lld] is not an integer",
                        d->name, (long long)r);
    d->ranks[r] = json_integer_value(v);
  }
  return 0;
}

/* The name and shape of tensors[i], added to d->t. */
static int
read_shape(doc_t *d, int64_t i, json_t *e, dbuf_diag_t *diag)
{
  json_t *jn = json_object_get(e, "name"), *js = json_object_get(e, "shape");
  int64_t dims[DBUF_MAX_DIMS];
  dbuf_diag_t sub;
  int rc;
  if (!json_is_object(e) || !json_is_string(jn) || !json_is_array(js) ||
      json_array_size(js) > DBUF_MAX_DIMS)
    return dbuf__diag(diag, DBUF_EPARSE,
                      "%s: tensors[%lld]: expected {\"name\", \"shape\" (at most "
                      "%d dims), \"offset\"}",
                      d->name, (long long)i, DBUF_MAX_DIMS);
  const char *tn = json_string_value(jn);
  size_t nd = json_array_size(js);
  for (size_t k = 0; k < nd; k++) {
    json_t *v = json_array_get(js, k);
    if (!json_is_integer(v))
      return dbuf__diag(diag, DBUF_EPARSE, "%s: tensor %s: dim %zu is not an integer",
                        d->name, tn, k);
    dims[k] = json_integer_value(v);
  }
  if ((rc = dbuf_tensors_add(d->t, tn, (int)nd, dims, &sub)) != 0)
    return dbuf__diag(diag, rc, "%s: tensors[%lld]: %s", d->name, (long long)i, sub.msg);
  return 0;
}

/* tensors[i]: shape, "offset" and the optional "owner". */
static int
read_tensor(doc_t *d, int64_t i, dbuf_diag_t *diag)
{
  json_t *e = json_array_get(d->jtensors, (size_t)i);
  int64_t own = 0;
  dbuf_diag_t sub;
  int rc;
  if ((rc = read_shape(d, i, e, diag)) != 0)
    return rc;
  const char *tn = dbuf_tensors_name(d->t, i);
  if ((rc = get_int(d->name, e, "offset", 1, &d->offsets[i], &sub)) != 0)
    return dbuf__diag(diag, rc, "%s: tensor %s: missing or non-integer \"offset\"",
                      d->name, tn);
  if ((rc = get_int(d->name, e, "owner", 0, &own, &sub)) < 0)
    return dbuf__diag(diag, rc, "%s: tensor %s: \"owner\" is not an integer", d->name,
                      tn);
  if (rc == 1) /* no owner */
    return 0;
  if ((rc = dbuf_layout_check_owner(d->t, i, own, (int)d->dp, &sub)) != 0)
    return dbuf__diag(diag, rc, "%s: %s", d->name, sub.msg);
  d->owners[i] = (int)own;
  d->nowners++;
  return 0;
}

static int
read_tensors(doc_t *d, dbuf_diag_t *diag)
{
  int rc;
  for (int64_t i = 0; i < d->n; i++)
    if ((rc = read_tensor(d, i, diag)) != 0)
      return rc;
  if (d->nowners != 0 && d->nowners != d->n)
    return dbuf__diag(diag, DBUF_EOWNER,
                      "%s: %d of %lld tensors have an \"owner\" (all or none)", d->name,
                      d->nowners, (long long)d->n);
  return 0;
}

/* "logical_size" is redundant: when given, it must agree with the shapes. */
static int
check_logical(json_t *root, const doc_t *d, dbuf_diag_t *diag)
{
  int64_t logical = 0;
  int rc = get_int(d->name, root, "logical_size", 0, &logical, diag);
  if (rc < 0)
    return rc;
  if (rc == 0 && logical != dbuf_tensors_total(d->t))
    return dbuf__diag(diag, DBUF_EPARSE,
                      "%s: \"logical_size\" is %lld but the tensors hold %lld "
                      "elements",
                      d->name, (long long)logical, (long long)dbuf_tensors_total(d->t));
  return 0;
}

int
dbuf__layout_from_obj(const char *name, json_t *root, dbuf_layout_t **out, dbuf_diag_t *diag)
{
  doc_t d = {.name = name, .block = 1};
  dbuf_diag_t sub;
  int rc;
  if (!json_is_object(root))
    rc = dbuf__diag(diag, DBUF_EPARSE, "%s: expected a JSON object", name);
  else if ((rc = read_header(root, &d, diag)) == 0 &&
           (rc = find_arrays(root, &d, diag)) == 0 &&
           (rc = read_rank_offsets(&d, diag)) == 0 &&
           (rc = read_tensors(&d, diag)) == 0 &&
           (rc = check_logical(root, &d, diag)) == 0 &&
           (rc = dbuf_layout_from_parts(d.t, d.kind, (int)d.dp, d.block, d.chunk, d.size,
                                        d.offsets, d.ranks, d.nowners ? d.owners : NULL,
                                        out, &sub)) != 0)
    dbuf__diag(diag, rc, "%s: %s", name, sub.msg);
  dbuf_tensors_destroy(d.t);
  free(d.offsets);
  free(d.ranks);
  free(d.owners);
  return rc;
}

int
dbuf_layout_from_json(const char *name, const char *text, size_t len,
                      dbuf_layout_t **out, dbuf_diag_t *diag)
{
  json_error_t jerr;
  int rc;

  if (name == NULL || text == NULL || out == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "NULL argument");
  json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
  if (root == NULL)
    return dbuf__diag(diag, DBUF_EPARSE, "%s:%d: invalid JSON: %s", name,
                      jerr.line, jerr.text);
  json_t *bufs = json_is_object(root) ? json_object_get(root, "buffers") : NULL;
  if (bufs != NULL)
    rc = dbuf__diag(diag, DBUF_EPARSE,
                    "%s: a plan of %zu buffers (\"buffers\", version 2), not one layout",
                    name, json_array_size(bufs));
  else
    rc = dbuf__layout_from_obj(name, root, out, diag);
  json_decref(root);
  return rc;
}
