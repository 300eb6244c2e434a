/* The binary wire format of a layout (see dbuf/wire.h for the byte map). */
#include "dbuf/wire.h"

#include "core_internal.h"
#include "layout_internal.h"
#include "strmap.h"

#include <assert.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

enum {
  SEC_SHAPES = 1,
  SEC_TENSORS = 2,
  SEC_NAMES = 3,
  SEC_OFFSETS = 4,
  SEC_RANGE = 5,
  SEC_OWNERS = 6,
  SEC_COUNT = 7,      /* one past the last known tag */
  SEC_OPTIONAL = 256, /* tags from here on may be skipped by readers */
  HDR_SUM_AT = 120,   /* header checksum word */
  RECORD_BYTES = 16,  /* per tensor: shape, name prefix, name suffix, flags */
  RECORD_MAX = 256    /* longest record a reader accepts (later fields) */
};

/* ------------------------------------------------------------------ */
/* Little-endian words.                                                */

/* n (4 or 8) little-endian bytes of v at p, and back: on a little-endian
 * host one copy (a single load or store), elsewhere byte by byte. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define HOST_LE 1
#else
#define HOST_LE 0
#endif

static void
put_le(uint8_t *p, uint64_t v, int n)
{
  if (HOST_LE && n == 8) {
    memcpy(p, &v, 8);
  } else if (HOST_LE && n == 4) {
    uint32_t x = (uint32_t)v;
    memcpy(p, &x, 4);
  } else {
    for (int i = 0; i < n; i++)
      p[i] = (uint8_t)(v >> (8 * i));
  }
}

static uint64_t
get_le(const uint8_t *p, int n)
{
  uint64_t v = 0;
  if (HOST_LE && n == 8) {
    memcpy(&v, p, 8);
  } else if (HOST_LE && n == 4) {
    uint32_t x;
    memcpy(&x, p, 4);
    v = x;
  } else {
    for (int i = 0; i < n; i++)
      v |= (uint64_t)p[i] << (8 * i);
  }
  return v;
}

static uint64_t
get_u64(const uint8_t *p)
{
  return get_le(p, 8);
}

static uint32_t
get_u32(const uint8_t *p)
{
  return (uint32_t)get_le(p, 4);
}

/* Where a message is written: p, a window of cap bytes.  Not streaming
 * (sink NULL, cap the whole message) p is the message; streaming, every
 * full window is hashed and handed to the sink (or dropped, sink->bytes
 * NULL: a digest without the message in memory) before the next byte, so
 * that the sink sees windows of exactly cap bytes, the last one shorter.
 * st hashes the layout message being written (p[from..pos) not yet in it;
 * inactive between messages), outer the whole plan message (NULL: none). */
typedef struct {
  uint8_t *p;
  int64_t pos, cap;
  int64_t from;
  int st_on, outer_on;
  XXH3_state_t *st, *outer;
  const dbuf__wire_sink_t *sink;
  int rc; /* the sink's first failure */
} writer_t;

/* The window handed on: hashed, then to the sink. */
static void
drain(writer_t *w)
{
  if (w->st_on)
    XXH3_64bits_update(w->st, w->p + w->from, (size_t)(w->pos - w->from));
  if (w->outer_on)
    XXH3_64bits_update(w->outer, w->p, (size_t)w->pos);
  if (w->sink != NULL && w->sink->bytes != NULL && w->rc == 0 && w->pos > 0)
    w->rc = w->sink->bytes(w->sink->arg, w->p, w->pos);
  w->pos = w->from = 0;
}

static void
w_bytes(writer_t *w, const void *src, int64_t n)
{
  const uint8_t *s = src;
  while (n > 0) {
    if (w->pos == w->cap)
      drain(w);
    int64_t k = w->cap - w->pos < n ? w->cap - w->pos : n;
    memcpy(w->p + w->pos, s, (size_t)k);
    w->pos += k;
    s += k;
    n -= k;
  }
}

static void
w_le(writer_t *w, uint64_t v, int n)
{
  if (w->cap - w->pos >= n) {
    put_le(w->p + w->pos, v, n);
    w->pos += n;
  } else { /* across a window's end */
    uint8_t b[8];
    put_le(b, v, n);
    w_bytes(w, b, n);
  }
}

static void
w_u64(writer_t *w, uint64_t v)
{
  w_le(w, v, 8);
}

static void
w_i64(writer_t *w, int64_t v)
{
  w_le(w, (uint64_t)v, 8);
}

static void
w_u32(writer_t *w, uint32_t v)
{
  w_le(w, v, 4);
}

/* A layout message starts here: its hash from the next byte. */
static void
hash_begin(writer_t *w)
{
  XXH3_64bits_reset(w->st);
  w->from = w->pos;
  w->st_on = 1;
}

/* ... and ends: its checksum, the bytes written since hash_begin(). */
static uint64_t
hash_end(writer_t *w)
{
  XXH3_64bits_update(w->st, w->p + w->from, (size_t)(w->pos - w->from));
  w->from = w->pos;
  w->st_on = 0;
  return XXH3_64bits_digest(w->st);
}

/* A writer of cap bytes at p (sink NULL: p holds the whole message, or
 * the digest only when sink has no bytes function); 0 or DBUF_ENOMEM. */
static int
writer_init(writer_t *w, uint8_t *p, int64_t cap, int plan, const dbuf__wire_sink_t *sink)
{
  memset(w, 0, sizeof *w);
  w->p = p;
  w->cap = cap;
  w->sink = sink;
  w->st = XXH3_createState();
  w->outer = plan ? XXH3_createState() : NULL;
  if (w->st == NULL || (plan && w->outer == NULL))
    return DBUF_ENOMEM;
  if (w->outer != NULL)
    XXH3_64bits_reset(w->outer);
  w->outer_on = plan;
  return 0;
}

static void
writer_free(writer_t *w)
{
  XXH3_freeState(w->st);
  XXH3_freeState(w->outer);
  w->st = w->outer = NULL;
}

/* ------------------------------------------------------------------ */
/* Encoding                                                            */

/* The distinct shapes of a layout's tensors in order of first use, the
 * shape table of the message, from the tensor list's own table (list shape
 * ids are in order of first use too, but a list may hold shapes no tensor
 * of it uses, which the message leaves out): wire[sid] is the message index
 * of list shape sid (UINT32_MAX: unused), rep[k] the first tensor of message
 * shape k.  O(tensors) reads of 32-bit ids, no hashing. */
typedef struct {
  uint32_t *wire;
  int64_t *rep;
  int64_t nshapes;
  int64_t dim_words; /* sum of ndim over the distinct shapes */
} shapes_t;

static void
shapes_free(shapes_t *s)
{
  free(s->wire);
  free(s->rep);
  memset(s, 0, sizeof *s);
}

static int
shapes_build(const dbuf_tensors_t *t, int64_t n, shapes_t *s)
{
  int64_t ns = dbuf__tensors_nshapes(t);
  memset(s, 0, sizeof *s);
  if (n > UINT32_MAX)
    return DBUF_EOVERFLOW;
  s->wire = dbuf__mallocn(ns, sizeof *s->wire);
  s->rep = dbuf__mallocn(ns < n ? ns : n, sizeof *s->rep);
  if (s->wire == NULL || s->rep == NULL) {
    shapes_free(s);
    return DBUF_ENOMEM;
  }
  if (ns > 0)
    memset(s->wire, 0xff, (size_t)ns * sizeof *s->wire);
  for (int64_t i = 0; i < n; i++) {
    uint32_t sid = dbuf__tensors_shape_id(t, i);
    if (s->wire[sid] == UINT32_MAX) {
      s->wire[sid] = (uint32_t)s->nshapes;
      s->rep[s->nshapes++] = i;
      s->dim_words += dbuf_tensors_ndim(t, i);
    }
  }
  return 0;
}

/* The message index of tensor i's shape. */
static uint32_t
shapes_index(const dbuf_tensors_t *t, const shapes_t *s, int64_t i)
{
  return s->wire[dbuf__tensors_shape_id(t, i)];
}

/* Bytes a name of la bytes shares with the next one, of lb. */
static uint32_t
common_prefix(const char *a, size_t la, const char *b, size_t lb)
{
  size_t k = 0, m = la < lb ? la : lb;
  for (uint64_t x, y; k + 8 <= m; k += 8) { /* 8 bytes a step, then byte by byte */
    memcpy(&x, a + k, 8);
    memcpy(&y, b + k, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (x != y) /* the first byte that differs: the lowest set bit's */
      return (uint32_t)(k + (size_t)__builtin_ctzll(x ^ y) / 8);
#else
    if (x != y)
      break;
#endif
  }
  while (k < m && a[k] == b[k])
    k++;
  return (uint32_t)k; /* names of a message are shorter than 2^32 bytes */
}

/*
 * Names are front-coded, so a message of L bytes could decode to names of
 * far more (a long prefix shared by every name).  Both sides hold the
 * decoded names to at most 64 L + 64 MiB bytes: the encoder refuses a layout
 * beyond it (real names share a few dozen bytes: about 1.1 L), the decoder
 * a message that claims more, before it allocates them.
 */
static int64_t
names_budget(int64_t msg_bytes)
{
  return msg_bytes > (INT64_MAX - ((int64_t)64 << 20)) / 64 ? INT64_MAX
                                                            : 64 * msg_bytes + ((int64_t)64 << 20);
}

/* A layout ready to be written: its shapes, name prefixes, section
 * payloads and length. */
typedef struct {
  const dbuf_layout_t *l;
  shapes_t s;
  const dbuf__strmap_t *names; /* the list's names, back to back in id order */
  uint32_t *pre; /* [n] bytes each name shares with the previous one */
  int64_t sec[SEC_COUNT]; /* payload bytes of each section */
  int nsec;
  int64_t total;
} prepared_t;

static void
prepared_free(prepared_t *m)
{
  shapes_free(&m->s);
  free(m->pre);
  m->pre = NULL;
}

/* The shapes, the name prefixes and every length; every sum checked. */
static int
prepare(const dbuf_layout_t *l, prepared_t *m, dbuf_diag_t *diag)
{
  const dbuf_tensors_t *t = dbuf_layout_tensors(l);
  int64_t n = dbuf_layout_ntensors(l), nr = dbuf_layout_nranks(l), names = 0, full = 0, total;
  int rc;
  memset(m, 0, sizeof *m);
  m->l = l;
  if ((rc = shapes_build(t, n, &m->s)) != 0)
    return dbuf__diag(diag, rc, "wire: %s for the shapes of %lld tensors", dbuf_strerror(rc),
                      (long long)n);
  m->names = dbuf__tensors_names(t);
  m->pre = dbuf__mallocn(n, sizeof *m->pre);
  if (m->pre == NULL) {
    prepared_free(m);
    return dbuf__diag(diag, DBUF_ENOMEM, "wire: out of memory for the names of %lld tensors",
                      (long long)n);
  }
  /* One pass along the names: each one follows the one before it. */
  const char *prev = "";
  size_t plen = 0;
  for (int64_t i = 0; i < n && rc == 0; i++) {
    const char *name = m->names->keys + dbuf__strmap_off(m->names, i);
    size_t len = dbuf__strmap_len(m->names, i);
    if (len > UINT32_MAX) {
      rc = DBUF_EOVERFLOW;
      break;
    }
    m->pre[i] = common_prefix(prev, plen, name, len);
    rc = dbuf__add(names, (int64_t)len - m->pre[i], &names);
    if (rc == 0)
      rc = dbuf__add(full, (int64_t)len, &full);
    prev = name;
    plen = len;
  }
  m->sec[SEC_SHAPES] = 4 * m->s.nshapes + 8 * m->s.dim_words; /* <= 132 n */
  m->sec[SEC_TENSORS] = RECORD_BYTES * n;                      /* n < 2^32 */
  m->sec[SEC_NAMES] = names;
  m->sec[SEC_OFFSETS] = 8 * n;
  m->sec[SEC_RANGE] = 8 * (nr + 1);
  m->sec[SEC_OWNERS] = 4 * n;
  m->nsec = dbuf_layout_owners(l) != NULL ? 6 : 5;
  total = DBUF_WIRE_HEADER_BYTES + 8;
  for (int k = SEC_SHAPES; k < SEC_SHAPES + m->nsec && rc == 0; k++)
    if ((rc = dbuf__add(total, 16, &total)) == 0)
      rc = dbuf__add(total, m->sec[k], &total);
  if (rc == 0 && (uint64_t)total > SIZE_MAX)
    rc = DBUF_EOVERFLOW;
  if (rc != 0) {
    prepared_free(m);
    return dbuf__diag(diag, DBUF_EOVERFLOW, "layout of %lld tensors is too large to serialize",
                      (long long)n);
  }
  if (full > names_budget(total)) {
    prepared_free(m);
    return dbuf__diag(diag, DBUF_EOVERFLOW,
                      "wire: the %lld tensor names (%lld bytes) share so much that they exceed "
                      "64 times the %lld-byte message the wire format allows",
                      (long long)n, (long long)full, (long long)total);
  }
  m->total = total;
  return 0;
}

/* The message of a prepared layout at w->pos (byte map in dbuf/wire.h);
 * returns the trailer, the message's checksum. */
static uint64_t
write_message(const prepared_t *m, writer_t *w)
{
  const dbuf_layout_t *l = m->l;
  const dbuf_tensors_t *t = dbuf_layout_tensors(l);
  const int64_t *off = dbuf_layout_offsets(l), *range = dbuf_layout_range(l);
  const int *own = dbuf_layout_owners(l);
  int64_t n = dbuf_layout_ntensors(l);
  int nr = dbuf_layout_nranks(l);

  /* The header whole first, for its checksum: it may cross a window. */
  uint8_t h[DBUF_WIRE_HEADER_BYTES];
  const uint64_t words[] = {DBUF_WIRE_VERSION,
                            (uint64_t)m->total,
                            DBUF_WIRE_HEADER_BYTES,
                            (uint64_t)dbuf_layout_kind(l),
                            (uint64_t)nr,
                            (uint64_t)dbuf_layout_block_size(l),
                            (uint64_t)dbuf_layout_chunk_size(l),
                            (uint64_t)dbuf_layout_size(l),
                            (uint64_t)n,
                            0, /* layout flags */
                            (uint64_t)m->s.nshapes,
                            (uint64_t)m->nsec,
                            RECORD_BYTES,
                            0};
  memcpy(h, DBUF_WIRE_MAGIC, 8);
  for (size_t k = 0; k < sizeof words / sizeof words[0]; k++)
    put_le(h + 8 + 8 * k, words[k], 8);
  put_le(h + HDR_SUM_AT, XXH3_64bits(h, HDR_SUM_AT), 8);
  hash_begin(w);
  w_bytes(w, h, sizeof h);

  w_u64(w, SEC_SHAPES);
  w_i64(w, m->sec[SEC_SHAPES]);
  for (int64_t k = 0; k < m->s.nshapes; k++) {
    int nd = dbuf_tensors_ndim(t, m->s.rep[k]);
    const int64_t *dims = dbuf_tensors_dims(t, m->s.rep[k]);
    w_u32(w, (uint32_t)nd);
    for (int d = 0; d < nd; d++)
      w_i64(w, dims[d]);
  }
  w_u64(w, SEC_TENSORS);
  w_i64(w, m->sec[SEC_TENSORS]);
  for (int64_t i = 0; i < n; i++) {
    w_u32(w, shapes_index(t, &m->s, i));
    w_u32(w, m->pre[i]);
    w_u32(w, (uint32_t)dbuf__strmap_len(m->names, i) - m->pre[i]);
    w_u32(w, 0); /* flags */
  }
  w_u64(w, SEC_NAMES);
  w_i64(w, m->sec[SEC_NAMES]);
  for (int64_t i = 0; i < n; i++)
    w_bytes(w, m->names->keys + dbuf__strmap_off(m->names, i) + m->pre[i],
            (int64_t)dbuf__strmap_len(m->names, i) - m->pre[i]);
  w_u64(w, SEC_OFFSETS);
  w_i64(w, m->sec[SEC_OFFSETS]);
  for (int64_t i = 0; i < n; i++)
    w_i64(w, off[i]);
  w_u64(w, SEC_RANGE);
  w_i64(w, m->sec[SEC_RANGE]);
  for (int r = 0; r <= nr; r++)
    w_i64(w, range[r]);
  if (own != NULL) {
    w_u64(w, SEC_OWNERS);
    w_i64(w, m->sec[SEC_OWNERS]);
    for (int64_t i = 0; i < n; i++)
      w_u32(w, (uint32_t)own[i]);
  }
  uint64_t sum = hash_end(w);
  w_u64(w, sum);
  return sum;
}

/* The rest of a streamed message to the sink; 0 or its failure. */
static int
writer_finish(writer_t *w)
{
  drain(w);
  return w->rc;
}

/* A message of total bytes streamed: write(arg, w) writes it through a
 * window of the sink's size (at most the message), after sink->begin();
 * 0 (*sum the trailer write returned, when not NULL) or the failure. */
static int
stream(const dbuf__wire_sink_t *sink, int64_t total, int plan,
       uint64_t (*write)(const void *arg, writer_t *w), const void *arg, uint64_t *sum,
       dbuf_diag_t *diag)
{
  writer_t w = {0};
  int64_t cap = sink->window < total ? sink->window : total;
  uint8_t *win = malloc((size_t)cap);
  int rc = 0;
  if (win == NULL || writer_init(&w, win, cap, plan, sink) != 0) {
    rc = dbuf__diag(diag, DBUF_ENOMEM, "out of memory");
  } else if (sink->begin == NULL || (rc = sink->begin(sink->arg, total)) == 0) {
    uint64_t s = write(arg, &w);
    if ((rc = writer_finish(&w)) == 0 && sum != NULL)
      *sum = s;
  }
  writer_free(&w);
  free(win);
  return rc;
}

static uint64_t
write_layout(const void *arg, writer_t *w)
{
  return write_message(arg, w);
}

int
dbuf_wire_encode(const dbuf_layout_t *l, void **buf, int64_t *len,
                 dbuf_diag_t *diag)
{
  prepared_t m;
  writer_t w = {0};
  int rc;
  if (l == NULL || buf == NULL || len == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "NULL argument");
  if ((rc = prepare(l, &m, diag)) != 0)
    return rc;
  uint8_t *p = dbuf__mallocn(m.total, 1);
  if (p == NULL || writer_init(&w, p, m.total, 0, NULL) != 0) {
    writer_free(&w);
    free(p);
    prepared_free(&m);
    return dbuf__diag(diag, DBUF_ENOMEM, "out of memory for a %lld-byte message",
                      (long long)m.total);
  }
  write_message(&m, &w);
  writer_free(&w);
  prepared_free(&m);
  if (w.pos != m.total) { /* a bug in prepare(), never input */
    free(p);
    return dbuf__diag(diag, DBUF_EFORMAT, "internal error: encoded %lld of %lld bytes",
                      (long long)w.pos, (long long)m.total);
  }
  *buf = p;
  *len = m.total;
  return 0;
}

int
dbuf__wire_send(const dbuf_layout_t *l, const dbuf__wire_sink_t *sink, uint64_t *sum,
                dbuf_diag_t *diag)
{
  prepared_t m;
  int rc;
  if (l == NULL || sink == NULL || sink->window < 1)
    return dbuf__diag(diag, DBUF_EINVAL, "NULL argument or window");
  if ((rc = prepare(l, &m, diag)) != 0)
    return rc;
  rc = stream(sink, m.total, 0, write_layout, &m, sum, diag);
  prepared_free(&m);
  return rc;
}

/* ------------------------------------------------------------------ */
/* Decoding                                                            */

typedef struct {
  const uint8_t *p;
  int64_t pos, end; /* end: the section's end */
} reader_t;

static int
r_u64(reader_t *r, uint64_t *v)
{
  if (r->end - r->pos < 8)
    return DBUF_EFORMAT;
  *v = get_u64(r->p + r->pos);
  r->pos += 8;
  return 0;
}

static int
r_i64(reader_t *r, int64_t *v)
{
  uint64_t u;
  int rc = r_u64(r, &u);
  if (rc == 0)
    *v = (int64_t)u;
  return rc;
}

/* Read `count` words into a new array; count is checked against the bytes left. */
int
dbuf_wire_checksum(const void *buf, int64_t len, uint64_t *sum)
{
  if (buf == NULL || sum == NULL)
    return DBUF_EINVAL;
  if (len < DBUF_WIRE_MIN_BYTES)
    return DBUF_EFORMAT;
  *sum = get_u64((const uint8_t *)buf + len - 8);
  return 0;
}

/* The magic, the lengths, both checksums and the version; sum: the hash
 * of the bytes before the trailer when a receiver has it (else NULL). */
static int
check_envelope(const uint8_t *p, int64_t len, const uint64_t *sum, dbuf_diag_t *diag)
{
  if (len < 8 || memcmp(p, DBUF_WIRE_MAGIC, 8) != 0)
    return dbuf__diag(diag, DBUF_EFORMAT,
                      "wire: not a dbuf-shard layout message (bad magic)");
  if (len < DBUF_WIRE_HEADER_BYTES)
    return dbuf__diag(diag, DBUF_EFORMAT,
                      "wire: truncated message: %lld bytes, the header alone has %d",
                      (long long)len, DBUF_WIRE_HEADER_BYTES);
  if (XXH3_64bits(p, HDR_SUM_AT) != get_u64(p + HDR_SUM_AT))
    return dbuf__diag(diag, DBUF_ECHECKSUM, "wire: header checksum mismatch");
  int64_t total = (int64_t)get_u64(p + 16);
  if (total != len)
    return dbuf__diag(diag, DBUF_EFORMAT,
                      "wire: %s message: %lld bytes, the header says %lld",
                      len < total ? "truncated" : "over-long", (long long)len,
                      (long long)total);
  if ((sum != NULL ? *sum : XXH3_64bits(p, (size_t)len - 8)) != get_u64(p + len - 8))
    return dbuf__diag(diag, DBUF_ECHECKSUM, "wire: message checksum mismatch");
  uint64_t version = get_u64(p + 8);
  if (version != DBUF_WIRE_VERSION)
    return dbuf__diag(diag, DBUF_EVERSION,
                      "wire: format version %llu, this build reads only version %d "
                      "(every rank must run the same dbuf-shard)",
                      (unsigned long long)version, DBUF_WIRE_VERSION);
  return 0;
}

/* A message being decoded: its header fields, then where each section is. */
typedef struct {
  uint64_t kind, nsec, rec;
  int64_t nranks, block, chunk, size, n, nshapes;
  int64_t at[SEC_COUNT], len[SEC_COUNT]; /* payload of each known section */
  int seen;                              /* bit per section tag */
  int64_t bytes;                         /* the whole message */
  int canonical; /* so far, the bytes dbuf_wire_encode() writes for the
                    layout decoded: its checksum is the layout's digest */
} msg_t;

/* The header words after the envelope (byte map in dbuf/wire.h). */
static int
read_header(const uint8_t *p, msg_t *m, dbuf_diag_t *diag)
{
  uint64_t hdr = get_u64(p + 24), lflags = get_u64(p + 80);
  m->kind = get_u64(p + 32);
  m->nranks = (int64_t)get_u64(p + 40);
  m->block = (int64_t)get_u64(p + 48);
  m->chunk = (int64_t)get_u64(p + 56);
  m->size = (int64_t)get_u64(p + 64);
  m->n = (int64_t)get_u64(p + 72);
  m->nshapes = (int64_t)get_u64(p + 88);
  m->nsec = get_u64(p + 96);
  m->rec = get_u64(p + 104);
  if (hdr != DBUF_WIRE_HEADER_BYTES || lflags != 0 || get_u64(p + 112) != 0)
    return dbuf__diag(diag, DBUF_EFORMAT, "wire: unknown header fields");
  m->canonical &= m->rec == RECORD_BYTES;
  if (m->rec < RECORD_BYTES || m->rec > RECORD_MAX)
    return dbuf__diag(diag, DBUF_EFORMAT, "wire: tensor records of %llu bytes (%d to %d)",
                      (unsigned long long)m->rec, RECORD_BYTES, RECORD_MAX);
  if (m->kind < DBUF_LAYOUT_PADDED || m->kind > DBUF_LAYOUT_COMPACT)
    return dbuf__diag(diag, DBUF_EFORMAT, "wire: unknown layout kind %llu",
                      (unsigned long long)m->kind);
  if (m->nranks < 1 || m->nranks > INT_MAX)
    return dbuf__diag(diag, DBUF_EFORMAT, "wire: rank count %lld out of range",
                      (long long)m->nranks);
  if (m->n < 0 || m->n > UINT32_MAX)
    return dbuf__diag(diag, DBUF_EFORMAT, "wire: tensor count %lld out of range (0 to %llu)",
                      (long long)m->n, (unsigned long long)UINT32_MAX);
  if (m->nshapes < 0 || m->nshapes > m->n)
    return dbuf__diag(diag, DBUF_EFORMAT, "wire: %lld shapes for %lld tensors",
                      (long long)m->nshapes, (long long)m->n);
  return 0;
}

/* Section s, its tag at *pos of p (its payload to end by end): recorded in
 * m when it is a known one, *pos moved to the next tag; 0 or DBUF_EFORMAT,
 * diag filled.  A receiver reads them as they arrive (ahead_sections()). */
static int
read_section(const uint8_t *p, int64_t *pos, int64_t end, uint64_t s, msg_t *m,
             dbuf_diag_t *diag)
{
  int64_t plen = end - *pos >= 16 ? (int64_t)get_u64(p + *pos + 8) : -1;
  if (plen < 0 || plen > end - *pos - 16)
    return dbuf__diag(diag, DBUF_EFORMAT, "wire: section %llu does not fit",
                      (unsigned long long)s);
  uint64_t tag = get_u64(p + *pos);
  m->canonical &= tag == SEC_SHAPES + s; /* tag order, nothing optional */
  if (tag < SEC_OPTIONAL) {
    if (tag < SEC_SHAPES || tag >= SEC_COUNT || (m->seen & (1 << tag)))
      return dbuf__diag(diag, DBUF_EFORMAT, "wire: unknown or repeated section %llu",
                        (unsigned long long)tag);
    m->seen |= 1 << tag;
    m->at[tag] = *pos + 16;
    m->len[tag] = plen;
  }
  *pos += 16 + plen;
  return 0;
}

/* Where every section is; each known tag once, the optional ones skipped. */
static int
find_sections(const uint8_t *p, int64_t len, msg_t *m, dbuf_diag_t *diag)
{
  int64_t pos = DBUF_WIRE_HEADER_BYTES, end = len - 8;
  int rc;
  for (uint64_t s = 0; s < m->nsec; s++)
    if ((rc = read_section(p, &pos, end, s, m, diag)) != 0)
      return rc;
  if (pos != end)
    return dbuf__diag(diag, DBUF_EFORMAT, "wire: %lld stray bytes after the sections",
                      (long long)(end - pos));
  for (int tag = SEC_SHAPES; tag <= SEC_RANGE; tag++)
    if (!(m->seen & (1 << tag)))
      return dbuf__diag(diag, DBUF_EFORMAT, "wire: required section %d is missing", tag);
  return 0;
}

/* A section that must hold count items of size bytes. */
static int
sized(const msg_t *m, int tag, int64_t count, int64_t size, const char *what,
      dbuf_diag_t *diag)
{
  int64_t want;
  if (dbuf__mul(count, size, &want) != 0 || want != m->len[tag])
    return dbuf__diag(diag, DBUF_EFORMAT,
                      "wire: section %d (%s) holds %lld bytes, %lld of %lld bytes expected",
                      tag, what, (long long)m->len[tag], (long long)count, (long long)size);
  return 0;
}

/* The shapes of SHAPES decoded once (one pass, every ndim checked): shape k
 * at sd[at[k]]: its ndim, then its dims.  sd has room for the section's
 * words plus one per shape. */
static int
read_shapes(const uint8_t *p, const msg_t *m, int64_t *at, int64_t *sd, dbuf_diag_t *diag)
{
  int64_t pos = m->at[SEC_SHAPES], end = pos + m->len[SEC_SHAPES], w = 0;
  for (int64_t k = 0; k < m->nshapes; k++) {
    if (end - pos < 4)
      return dbuf__diag(diag, DBUF_EFORMAT, "wire: shape %lld of %lld is truncated",
                        (long long)k, (long long)m->nshapes);
    uint32_t nd = get_u32(p + pos);
    if (nd < 1 || nd > DBUF_MAX_DIMS || (end - pos - 4) / 8 < nd)
      return dbuf__diag(diag, DBUF_EFORMAT, "wire: shape %lld: %u dims (1 to %d, in the "
                        "section)", (long long)k, nd, DBUF_MAX_DIMS);
    at[k] = w;
    sd[w++] = nd;
    for (uint32_t d = 0; d < nd; d++)
      sd[w++] = (int64_t)get_u64(p + pos + 4 + 8 * (int64_t)d);
    pos += 4 + 8 * (int64_t)nd;
  }
  if (pos != end)
    return dbuf__diag(diag, DBUF_EFORMAT, "wire: %lld stray bytes after the shapes",
                      (long long)(end - pos));
  return 0;
}

/* The shapes into new arrays (*at, *sd: read_shapes()), after their count
 * is checked against the section; 0 or the code, diag filled, nothing
 * kept. */
static int
load_shapes(const uint8_t *p, const msg_t *m, int64_t **at, int64_t **sd, dbuf_diag_t *diag)
{
  int rc;
  *at = *sd = NULL;
  if (m->nshapes > m->len[SEC_SHAPES] / 12)
    return dbuf__diag(diag, DBUF_EFORMAT, "wire: %lld shapes do not fit a %lld-byte section",
                      (long long)m->nshapes, (long long)m->len[SEC_SHAPES]);
  *at = dbuf__mallocn(m->nshapes, sizeof **at);
  *sd = dbuf__mallocn(m->nshapes + m->len[SEC_SHAPES] / 8, sizeof **sd);
  if (*at == NULL || *sd == NULL)
    rc = dbuf__diag(diag, DBUF_ENOMEM, "wire: out of memory");
  else
    rc = read_shapes(p, m, *at, *sd, diag);
  if (rc != 0) {
    free(*at);
    free(*sd);
    *at = *sd = NULL;
  }
  return rc;
}

/*
 * The tensor list: records, names and shapes (sd, at: read_shapes()).  One
 * list with its arrays reserved up front, added to in bulk, and one name
 * buffer: no allocation per tensor, one pass over the names for duplicates.
 * Resumable, so that a receiver can build it while the names still arrive
 * (dbuf__wire_rx_t): tx_begin() once every record is in, tx_run() with the
 * names section's bytes present so far, as often as more come, tx_end()
 * once all are in.  Clears canonical unless the shapes come in order of
 * first use, each once, and every name prefix is the longest one.
 */
typedef struct {
  const int64_t *at, *sd; /* the shapes (read_shapes()) */
  dbuf_tensors_t *t;
  int64_t *sid;           /* the list's id of each message shape, once used */
  char *name;             /* scratch for a name added whole (dbuf__tensors_add_front) */
  int64_t cap;
  int64_t i;              /* the next record */
  int64_t npos, nend;     /* in the names section */
  int64_t nul, scanned;   /* the first NUL byte of the names at or past npos
                             (nend: none), found in [npos, scanned) */
  int64_t full, budget, next_shape;
  int canonical;
  dbuf__strmap_check_t dups; /* names checked as they come (a receiver's) */
  int names_checked;         /* ... all of them, none repeated (dups freed) */
} tx_t;

static void
tx_free(tx_t *x)
{
  dbuf_tensors_destroy(x->t);
  free(x->name);
  free(x->sid);
  dbuf__strmap_check_free(&x->dups);
  memset(x, 0, sizeof *x);
}

static int
tx_begin(const uint8_t *p, const msg_t *m, const int64_t *at, const int64_t *sd, tx_t *x,
         dbuf_diag_t *diag)
{
  int rc = DBUF_ENOMEM; /* when the shape ids cannot be allocated */
  memset(x, 0, sizeof *x);
  x->at = at;
  x->sd = sd;
  x->npos = x->scanned = m->at[SEC_NAMES];
  x->nend = x->nul = x->npos + m->len[SEC_NAMES];
  x->budget = names_budget(m->bytes);
  x->canonical = 1;
  x->sid = dbuf__mallocn(m->nshapes, sizeof *x->sid);
  if (x->sid == NULL || (rc = dbuf_tensors_create(&x->t)) != 0 ||
      (rc = dbuf__tensors_bulk_begin(x->t, m->n)) != 0) {
    tx_free(x);
    return dbuf__diag(diag, rc, "wire: %s", dbuf_strerror(rc));
  }
  for (int64_t k = 0; k < m->nshapes; k++)
    x->sid[k] = -1;
  /* The names' bytes, reserved at once: the name block is not copied as it
   * grows (a bad record is named by tx_run(); then nothing is kept). */
  int64_t bytes = 0, prev = 0;
  for (int64_t i = 0; i < m->n && bytes <= x->budget; i++) {
    const uint8_t *r = p + m->at[SEC_TENSORS] + i * (int64_t)m->rec;
    int64_t pre = get_u32(r + 4), suf = get_u32(r + 8);
    if (pre > prev || suf > x->nend - x->npos) /* a bad record: reserve no more than so far */
      break;
    prev = pre + suf;
    bytes += prev + 1; /* < 2^34 a record */
  }
  if (bytes <= x->budget)
    (void)dbuf__tensors_reserve_names(x->t, bytes); /* a failure shows in the adds */
  return 0;
}

/* Every tensor whose name suffix lies below upto (at most the names
 * section's end); 0 or the code, diag filled (then x is to be freed). */
static int
tx_run(const uint8_t *p, const msg_t *m, tx_t *x, int64_t upto, dbuf_diag_t *diag)
{
  const int64_t nend = x->nend;
  int rc = 0;
  if (upto > nend)
    upto = nend;
  if (x->nul == nend && x->scanned < upto) { /* one scan of the names, not one a name */
    const uint8_t *z = memchr(p + x->scanned, '\0', (size_t)(upto - x->scanned));
    x->nul = z != NULL ? z - p : nend;
    x->scanned = upto;
  }
  for (; x->i < m->n; x->i++) {
    const uint8_t *r = p + m->at[SEC_TENSORS] + x->i * (int64_t)m->rec;
    uint32_t sh = get_u32(r), pre = get_u32(r + 4), suf = get_u32(r + 8), fl = get_u32(r + 12);
    int64_t i = x->i;
    dbuf_diag_t d;
    size_t plen; /* the previous name: the list's last */
    const char *prev = dbuf__tensors_last_name(x->t, &plen);
    if (sh >= m->nshapes || fl != 0 || pre > plen || (int64_t)suf > nend - x->npos ||
        (int64_t)pre + suf < 1)
      return dbuf__diag(diag, DBUF_EFORMAT, "wire: tensor %lld: %s", (long long)i,
                        sh >= m->nshapes ? "shape index out of the table"
                        : fl != 0        ? "unknown flags"
                        : pre > plen     ? "name prefix longer than the previous name"
                        : (int64_t)suf > nend - x->npos ? "name runs past the names section"
                                                        : "empty name");
    if ((int64_t)suf > upto - x->npos)
      break; /* the rest of the name is still to come */
    if (x->nul < x->npos + (int64_t)suf) /* nul >= npos: names are read in order */
      return dbuf__diag(diag, DBUF_EFORMAT, "wire: tensor %lld: NUL byte in the name",
                        (long long)i);
    /* The encoder shares all it can with the previous name, and numbers
     * the shapes as they first appear. */
    if ((pre < plen && suf > 0 && (uint8_t)prev[pre] == p[x->npos]) || sh > x->next_shape)
      x->canonical = 0;
    x->next_shape += sh == x->next_shape;
    int64_t len = (int64_t)pre + suf;
    if (__builtin_add_overflow(x->full, len, &x->full) || x->full > x->budget)
      return dbuf__diag(diag, DBUF_EFORMAT,
                        "wire: tensor %lld: the names decode to more than 64 times the "
                        "%lld-byte message", (long long)i, (long long)m->bytes);
    const int64_t *shape = x->sd + x->at[sh];
    dbuf_diag_clear(&d);
    if ((rc = dbuf__tensors_add_front(x->t, pre, (const char *)p + x->npos, suf, (int)shape[0],
                                      shape + 1, &x->sid[sh], &x->name, &x->cap, &d)) != 0)
      return dbuf__diag(diag, rc, "wire: %s", d.msg);
    x->npos += suf;
  }
  return 0;
}

/* The list, once every tensor is in: stray names, duplicates, shapes;
 * 0 (*out the list, x emptied) or the code, diag filled. */
static int
tx_end(const msg_t *m, tx_t *x, dbuf_tensors_t **out, dbuf_diag_t *diag)
{
  int rc = 0;
  if (x->i != m->n) /* a caller's slip, never input */
    return dbuf__diag(diag, DBUF_EFORMAT, "internal error: %lld of %lld tensors decoded",
                      (long long)x->i, (long long)m->n);
  if (x->npos != x->nend)
    return dbuf__diag(diag, DBUF_EFORMAT, "wire: %lld stray bytes after the names",
                      (long long)(x->nend - x->npos));
  /* A duplicate name fails with the adds' message (names checked as they
   * came are not checked again, unless one repeated).  Most receivers never
   * look a name up: the list stays unindexed until the first lookup. */
  dbuf_diag_t d;
  dbuf_diag_clear(&d);
  dbuf__strmap_check_free(&x->dups);
  if ((rc = dbuf__tensors_bulk_end(x->t, !x->names_checked, &d)) != 0)
    return dbuf__diag(diag, rc, "wire: %s", d.msg);
  dbuf__tensors_index_drop(x->t);
  /* Every shape used, and no two equal (the list keeps each once). */
  if (x->next_shape != m->nshapes || dbuf__tensors_nshapes(x->t) != m->nshapes)
    x->canonical = 0;
  *out = x->t;
  x->t = NULL;
  return 0;
}

/* The whole list at once (tx_begin(), tx_run(), tx_end()). */
static int
read_tensors(const uint8_t *p, msg_t *m, const int64_t *at, const int64_t *sd,
             dbuf_tensors_t **out, dbuf_diag_t *diag)
{
  tx_t x;
  int rc = tx_begin(p, m, at, sd, &x, diag);
  if (rc != 0)
    return rc;
  if ((rc = tx_run(p, m, &x, x.nend, diag)) == 0 && (rc = tx_end(m, &x, out, diag)) == 0)
    m->canonical &= x.canonical;
  tx_free(&x);
  return rc;
}

/*
 * A layout message decoded ahead, as a receiver gets its bytes (the layouts
 * of a plan message, dbuf__wire_rx_t): its checksum hashed window by
 * window, and its tensor list built while the names arrive.  Only ever a
 * head start: on anything unusual it stops (AHEAD_OFF), and the decoder
 * does the work itself once the whole message is in, with every check in
 * the order and with the messages of dbuf_wire_decode(); what it takes
 * from here is the same work done on the same bytes.
 */
enum {
  AHEAD_HEADER,   /* waiting for the header */
  AHEAD_SECTIONS, /* reading section tags, waiting for the records */
  AHEAD_NAMES,    /* building the tensor list as the names come */
  AHEAD_DONE,     /* the list is ready */
  AHEAD_TAKEN,    /* the decoder took it */
  AHEAD_OFF       /* stopped: the decoder does the work */
};

typedef struct {
  int64_t at, len;       /* the message's place in the plan message, its bytes */
  XXH3_state_t *h;       /* of its bytes [0, hashed), until they are all in */
  int64_t hashed;
  uint64_t sum;          /* then their hash (h freed) */
  int state;
  msg_t m;
  int64_t sec_pos;       /* the next section's tag */
  uint64_t nsec;         /* sections read */
  int64_t *shape_at, *sd;
  tx_t x;
} ahead_t;

static void
ahead_stop(ahead_t *a)
{
  tx_free(&a->x);
  free(a->shape_at);
  free(a->sd);
  a->shape_at = a->sd = NULL;
  a->state = AHEAD_OFF;
}

static void
ahead_free(ahead_t *a)
{
  ahead_stop(a);
  XXH3_freeState(a->h);
  a->h = NULL;
}

/* Sections whose tag and length are in (below have, q the message). */
static int
ahead_sections(const uint8_t *q, int64_t have, ahead_t *a)
{
  for (; a->nsec < a->m.nsec && a->sec_pos + 16 <= have; a->nsec++)
    if (read_section(q, &a->sec_pos, a->len - 8, a->nsec, &a->m, NULL) != 0)
      return -1;
  return 0;
}

/* Has section tag arrived whole (below have)? */
static int
ahead_has(const ahead_t *a, int tag, int64_t have)
{
  return (a->m.seen & (1 << tag)) && a->m.at[tag] + a->m.len[tag] <= have;
}

/* As far as have bytes of the message q allow. */
static void
ahead_run(const uint8_t *q, int64_t have, ahead_t *a)
{
  msg_t *m = &a->m;
  int64_t e = have < a->len - 8 ? have : a->len - 8;
  if (e > a->hashed) {
    XXH3_64bits_update(a->h, q + a->hashed, (size_t)(e - a->hashed));
    a->hashed = e;
    if (e == a->len - 8) { /* all in: 8 bytes kept, not the state */
      a->sum = XXH3_64bits_digest(a->h);
      XXH3_freeState(a->h);
      a->h = NULL;
    }
  }
  if (a->state == AHEAD_HEADER) {
    if (have < DBUF_WIRE_HEADER_BYTES)
      return;
    memset(m, 0, sizeof *m);
    m->bytes = a->len;
    m->canonical = 1;
    if (memcmp(q, DBUF_WIRE_MAGIC, 8) != 0 ||
        XXH3_64bits(q, HDR_SUM_AT) != get_u64(q + HDR_SUM_AT) ||
        (int64_t)get_u64(q + 16) != a->len || get_u64(q + 8) != DBUF_WIRE_VERSION ||
        read_header(q, m, NULL) != 0) {
      ahead_stop(a);
      return;
    }
    a->sec_pos = DBUF_WIRE_HEADER_BYTES;
    a->state = AHEAD_SECTIONS;
  }
  if (a->state == AHEAD_SECTIONS) {
    if (ahead_sections(q, have, a) != 0) {
      ahead_stop(a);
      return;
    }
    /* Every record and the shapes in, the names coming: the list can start. */
    if (!ahead_has(a, SEC_SHAPES, have) || !ahead_has(a, SEC_TENSORS, have) ||
        !(m->seen & (1 << SEC_NAMES)))
      return;
    if (sized(m, SEC_TENSORS, m->n, (int64_t)m->rec, "tensor records", NULL) != 0 ||
        load_shapes(q, m, &a->shape_at, &a->sd, NULL) != 0 ||
        tx_begin(q, m, a->shape_at, a->sd, &a->x, NULL) != 0) {
      ahead_stop(a);
      return;
    }
    /* The names checked for duplicates as they come (without: at the end). */
    if (dbuf__strmap_check_begin(&a->x.dups, m->n) != 0)
      dbuf__strmap_check_free(&a->x.dups);
    a->state = AHEAD_NAMES;
  }
  if (a->state == AHEAD_NAMES) {
    if (tx_run(q, m, &a->x, have, NULL) != 0) {
      ahead_stop(a);
      return;
    }
    tx_t *x = &a->x;
    dbuf__strmap_check_to(dbuf__tensors_names(x->t), &x->dups, x->i);
    if (x->dups.dup || x->dups.done == m->n) { /* the table is done with */
      x->names_checked = x->dups.slots != NULL && !x->dups.dup;
      dbuf__strmap_check_free(&x->dups);
    }
    if (x->i == m->n)
      a->state = AHEAD_DONE;
  }
}

/* n little-endian words at p into a new array. */
static int64_t *
read_words(const uint8_t *p, int64_t n)
{
  int64_t *v = dbuf__mallocn(n, sizeof *v);
  for (int64_t i = 0; v != NULL && i < n; i++)
    v[i] = (int64_t)get_u64(p + 8 * i);
  return v;
}

/* The layout from the sections: sizes, shapes, tensors, then the parts. */
static int
assemble(const uint8_t *p, msg_t *m, ahead_t *a, dbuf_layout_t **out, dbuf_diag_t *diag)
{
  dbuf_tensors_t *t = NULL;
  int64_t *shape_at = NULL, *sd = NULL, *offsets = NULL, *range = NULL;
  int *owners = NULL;
  int rc;
  int has_own = (m->seen & (1 << SEC_OWNERS)) != 0;
  if ((rc = sized(m, SEC_TENSORS, m->n, (int64_t)m->rec, "tensor records", diag)) != 0 ||
      (rc = sized(m, SEC_OFFSETS, m->n, 8, "offsets", diag)) != 0 ||
      (rc = sized(m, SEC_RANGE, m->nranks + 1, 8, "rank range", diag)) != 0 ||
      (has_own && (rc = sized(m, SEC_OWNERS, m->n, 4, "owners", diag)) != 0))
    return rc;
  if ((rc = load_shapes(p, m, &shape_at, &sd, diag)) != 0)
    goto out;
  if (a != NULL && a->state == AHEAD_DONE) { /* the list built ahead, taken once */
    rc = tx_end(m, &a->x, &t, diag);
    m->canonical &= a->x.canonical;
    ahead_stop(a);
    a->state = AHEAD_TAKEN;
  } else {
    rc = read_tensors(p, m, shape_at, sd, &t, diag);
  }
  if (rc != 0)
    goto out;
  /* The per-tensor words once the tensor list (and its passing name
   * index) is done: a lower peak. */
  offsets = read_words(p + m->at[SEC_OFFSETS], m->n);
  range = read_words(p + m->at[SEC_RANGE], m->nranks + 1);
  if (has_own)
    owners = dbuf__mallocn(m->n, sizeof *owners);
  if (offsets == NULL || range == NULL || (has_own && owners == NULL)) {
    rc = dbuf__diag(diag, DBUF_ENOMEM, "wire: out of memory");
    goto out;
  }
  if (range[m->nranks] != m->size) {
    rc = dbuf__diag(diag, DBUF_ELAYOUT, "wire: range ends at %lld, size is %lld",
                    (long long)range[m->nranks], (long long)m->size);
    goto out;
  }
  for (int64_t i = 0; has_own && i < m->n; i++) {
    dbuf_diag_t d;
    int64_t o = get_u32(p + m->at[SEC_OWNERS] + 4 * i);
    if ((rc = dbuf_layout_check_owner(t, i, o, (int)m->nranks, &d)) != 0) {
      rc = dbuf__diag(diag, rc, "wire: %s", d.msg);
      goto out;
    }
    owners[i] = (int)o;
  }
  /* The arrays go to the layout as they are. */
  rc = dbuf__layout_from_owned(t, (dbuf_layout_kind_t)m->kind, (int)m->nranks, m->block,
                               m->chunk, m->size, offsets, range, owners, out, diag);
  offsets = range = NULL;
  owners = NULL;
  /* The layout keeps a chunk size for the chunked kinds only. */
  if (rc == 0 && m->canonical && (dbuf__layout_chunked((*out)->kind) || m->chunk == 0)) {
    (*out)->digest = get_u64(p + m->bytes - 8);
    (*out)->has_digest = 1;
  }
out:
  dbuf_tensors_destroy(t);
  free(shape_at);
  free(sd);
  free(offsets);
  free(range);
  free(owners);
  return rc;
}

/* dbuf_wire_decode(), with what a receiver decoded ahead (a: NULL, or the
 * same bytes' head start). */
static int
decode(const uint8_t *p, int64_t len, ahead_t *a, dbuf_layout_t **out, dbuf_diag_t *diag)
{
  msg_t m;
  int rc;
  uint64_t sum = 0;
  int hashed = a != NULL && a->len == len && a->hashed == len - 8 && a->h == NULL;
  if (hashed)
    sum = a->sum;
  if ((rc = check_envelope(p, len, hashed ? &sum : NULL, diag)) != 0)
    return rc;
  memset(&m, 0, sizeof m);
  m.bytes = len;
  m.canonical = 1;
  if ((rc = read_header(p, &m, diag)) == 0 && (rc = find_sections(p, len, &m, diag)) == 0)
    rc = assemble(p, &m, a != NULL && a->len == len ? a : NULL, out, diag);
  return rc;
}

int
dbuf_wire_decode(const void *buf, int64_t len, dbuf_layout_t **out,
                 dbuf_diag_t *diag)
{
  if (buf == NULL || out == NULL || len < 0)
    return dbuf__diag(diag, DBUF_EINVAL, "NULL argument or negative length");
  return decode(buf, len, NULL, out, diag);
}

int
dbuf_wire_digest(const dbuf_layout_t *l, uint64_t *digest, dbuf_diag_t *diag)
{
  if (l == NULL || digest == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "NULL argument");
  if (l->has_digest) { /* sent, or decoded from the encoder's own bytes: their checksum */
    *digest = l->digest;
    return 0;
  }
  /* The message is hashed as it is written, a window at a time: the
   * digest costs O(shapes + window) memory, not the message. */
  const dbuf__wire_sink_t hash_only = {NULL, NULL, NULL, (int64_t)1 << 16};
  return dbuf__wire_send(l, &hash_only, digest, diag);
}

/* ------------------------------------------------------------------ */
/* Plans: a list of (unit, dtype, layout message)                       */

enum {
  PLAN_HDR_SUM_AT = 56 /* header checksum word of a plan message */
};

/* Every buffer's layout prepared (its shapes and lengths), then written
 * straight into the one plan message: no second copy of the layouts. */
static void
free_prepared(prepared_t *m, int64_t n)
{
  for (int64_t i = 0; m != NULL && i < n; i++)
    prepared_free(&m[i]);
  free(m);
}

/* A unit name as the wire may carry it (dbuf__unit_name_check). */
static int
unit_name_ok(const uint8_t *s, int64_t n)
{
  return n >= 0 && dbuf__unit_name_check((const char *)s, (size_t)n, NULL, 0) == 0;
}

/* A plan ready to be written: every buffer's layout prepared, the length. */
typedef struct {
  prepared_t *msg;
  int64_t nb, done; /* buffers; those prepared */
  int64_t total;
} plan_prepared_t;

static void
plan_prepared_free(plan_prepared_t *pp)
{
  free_prepared(pp->msg, pp->done);
  pp->msg = NULL;
}

static int
plan_prepare(const dbuf_plan_t *p, plan_prepared_t *pp, dbuf_diag_t *diag)
{
  int64_t total = DBUF_WIRE_PLAN_MIN_BYTES;
  memset(pp, 0, sizeof *pp);
  pp->nb = dbuf_plan_nbuffers(p);
  pp->msg = dbuf__calloc(pp->nb, sizeof *pp->msg);
  int rc = pp->msg == NULL ? dbuf__diag(diag, DBUF_ENOMEM, "out of memory") : 0;
  for (; rc == 0 && pp->done < pp->nb; pp->done++) {
    dbuf_plan_buffer_t b;
    int64_t ul;
    dbuf_plan_buffer(p, pp->done, &b);
    ul = (int64_t)strlen(b.unit);
    char why[DBUF_DIAG_LEN];
    if (dbuf__unit_name_check(b.unit, (size_t)ul, why, sizeof why) != 0) {
      rc = dbuf__diag(diag, DBUF_EINVAL, "wire: buffer %lld: %s", (long long)pp->done, why);
      break; /* what every decoder refuses */
    }
    if ((rc = prepare(b.layout, &pp->msg[pp->done], diag)) != 0)
      break;
    if (dbuf__add(total, 24 + ul, &total) != 0 ||
        dbuf__add(total, pp->msg[pp->done].total, &total) != 0 || (uint64_t)total > SIZE_MAX) {
      pp->done++;
      rc = dbuf__diag(diag, DBUF_EOVERFLOW, "plan of %lld buffers is too large to serialize",
                      (long long)pp->nb);
    }
  }
  if (rc != 0)
    plan_prepared_free(pp);
  pp->total = total;
  return rc;
}

/* The plan message (every layout written straight into it: no second
 * copy); returns its trailer.  note: see dbuf__wire_plan_send(). */
static uint64_t
write_plan(const dbuf_plan_t *p, const plan_prepared_t *pp, writer_t *w, int note)
{
  uint8_t h[DBUF_WIRE_PLAN_HEADER_BYTES];
  const uint64_t words[] = {DBUF_WIRE_PLAN_VERSION, (uint64_t)pp->total, (uint64_t)pp->nb,
                            (uint64_t)dbuf_plan_nranks(p), 0, 0};
  memcpy(h, DBUF_WIRE_PLAN_MAGIC, 8);
  for (size_t k = 0; k < sizeof words / sizeof words[0]; k++)
    put_le(h + 8 + 8 * k, words[k], 8);
  put_le(h + PLAN_HDR_SUM_AT, XXH3_64bits(h, PLAN_HDR_SUM_AT), 8);
  w_bytes(w, h, sizeof h);
  for (int64_t i = 0; i < pp->nb; i++) {
    dbuf_plan_buffer_t b;
    dbuf_plan_buffer(p, i, &b);
    int64_t ul = (int64_t)strlen(b.unit);
    w_i64(w, ul);
    w_bytes(w, b.unit, ul);
    w_u64(w, (uint64_t)b.dtype);
    w_i64(w, pp->msg[i].total);
    uint64_t d = write_message(&pp->msg[i], w);
    if (note) { /* the message is this layout's own encoding: its digest */
      dbuf_layout_t *l = (dbuf_layout_t *)b.layout;
      l->digest = d;
      l->has_digest = 1;
    }
  }
  XXH3_64bits_update(w->outer, w->p, (size_t)w->pos); /* the window so far */
  w->outer_on = 0;                                      /* and not the trailer */
  uint64_t sum = XXH3_64bits_digest(w->outer);
  w_u64(w, sum);
  return sum;
}

int
dbuf_wire_plan_encode(const dbuf_plan_t *p, void **buf, int64_t *len, dbuf_diag_t *diag)
{
  plan_prepared_t pp;
  writer_t w = {0};
  if (p == NULL || buf == NULL || len == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "NULL argument");
  int rc = plan_prepare(p, &pp, diag);
  if (rc != 0)
    return rc;
  uint8_t *out = dbuf__mallocn(pp.total, 1);
  if (out == NULL || writer_init(&w, out, pp.total, 1, NULL) != 0) {
    rc = dbuf__diag(diag, DBUF_ENOMEM, "out of memory for a %lld-byte message",
                    (long long)pp.total);
    free(out);
  } else {
    write_plan(p, &pp, &w, 0);
    assert(w.pos == pp.total);
    *buf = out;
    *len = pp.total;
  }
  writer_free(&w);
  plan_prepared_free(&pp);
  return rc;
}

/* write_plan() as stream() calls it. */
typedef struct {
  const dbuf_plan_t *p;
  const plan_prepared_t *pp;
  int note;
} plan_write_t;

static uint64_t
write_plan_arg(const void *arg, writer_t *w)
{
  const plan_write_t *a = arg;
  return write_plan(a->p, a->pp, w, a->note);
}

int
dbuf__wire_plan_send(const dbuf_plan_t *p, const dbuf__wire_sink_t *sink, uint64_t *sum,
                     int note, dbuf_diag_t *diag)
{
  plan_prepared_t pp;
  if (p == NULL || sink == NULL || sink->window < 1)
    return dbuf__diag(diag, DBUF_EINVAL, "NULL argument or window");
  int rc = plan_prepare(p, &pp, diag);
  if (rc != 0)
    return rc;
  const plan_write_t a = {p, &pp, note};
  rc = stream(sink, pp.total, 1, write_plan_arg, &a, sum, diag);
  plan_prepared_free(&pp);
  return rc;
}

/* One buffer of a plan message at r (a: its head start, or NULL); appends
 * it to p. */
static int
read_plan_buffer(reader_t *r, int64_t i, int64_t nranks, ahead_t *a, dbuf_plan_t *p,
                 dbuf_diag_t *diag)
{
  int64_t ul, ml;
  uint64_t dt;
  char unit[DBUF_WIRE_UNIT_MAX + 1];
  if (r_i64(r, &ul) != 0 || ul < 0 || ul > r->end - r->pos)
    return dbuf__diag(diag, DBUF_EFORMAT, "wire: plan buffer %lld: unit name length out of "
                      "the message", (long long)i);
  if (!unit_name_ok(r->p + r->pos, ul))
    return dbuf__diag(diag, DBUF_EFORMAT,
                      "wire: plan buffer %lld: bad unit name (1 to %d "
                      "bytes of UTF-8, no blanks or control characters)",
                      (long long)i, DBUF_WIRE_UNIT_MAX);
  memcpy(unit, r->p + r->pos, (size_t)ul);
  unit[ul] = '\0';
  r->pos += ul;
  if (r_u64(r, &dt) != 0 || r_i64(r, &ml) != 0)
    return dbuf__diag(diag, DBUF_EFORMAT, "wire: plan buffer %lld (%s): truncated",
                      (long long)i, unit);
  if (dt == 0 || dt >= DBUF_DTYPE_COUNT || dbuf_dtype_size((dbuf_dtype_t)dt) == 0)
    return dbuf__diag(diag, DBUF_EFORMAT, "wire: plan buffer %lld (%s): dtype %llu has no "
                      "byte size", (long long)i, unit, (unsigned long long)dt);
  if (ml < DBUF_WIRE_MIN_BYTES || ml > r->end - r->pos)
    return dbuf__diag(diag, DBUF_EFORMAT, "wire: plan buffer %lld (%s): layout message of "
                      "%lld bytes does not fit", (long long)i, unit, (long long)ml);
  dbuf_layout_t *l = NULL;
  dbuf_diag_t d;
  dbuf_diag_clear(&d);
  int rc = decode(r->p + r->pos, ml, a != NULL && a->at == r->pos ? a : NULL, &l, &d);
  r->pos += ml;
  if (rc != 0)
    return dbuf__diag(diag, rc, "plan buffer %lld (%s/%s): %s", (long long)i, unit,
                      dbuf_dtype_name((dbuf_dtype_t)dt), d.msg);
  if (dbuf_layout_nranks(l) != nranks) {
    rc = dbuf__diag(diag, DBUF_ENRANKS, "wire: plan buffer %lld (%s/%s) has %d ranks, the "
                    "plan %lld", (long long)i, unit, dbuf_dtype_name((dbuf_dtype_t)dt),
                    dbuf_layout_nranks(l), (long long)nranks);
    dbuf_layout_destroy(l);
    return rc;
  }
  return dbuf_plan_add(p, unit, (dbuf_dtype_t)dt, l, NULL, diag); /* takes l */
}

/*
 * A plan message as a receiver gets it, window by window: the plan's and
 * every layout's checksum hashed while the bytes are fresh in cache, each
 * layout's tensor list built while its names arrive (ahead_t).  Nothing
 * here refuses anything: a head start that meets anything unusual stops,
 * and dbuf__wire_rx_plan_decode() decodes that part itself.
 */
struct dbuf__wire_rx {
  int64_t total;
  XXH3_state_t *outer; /* of the plan message's bytes [0, hashed) */
  int64_t hashed;
  int off;             /* the plan's framing looked wrong: no head start */
  int64_t nb;          /* buffers (-1: header not read yet) */
  int64_t next, pos;   /* the next buffer whose framing is to be read, where */
  int64_t cur;         /* the first layout not yet wholly in */
  ahead_t *lay;        /* [cap] the layouts framed so far, next of them */
  int64_t cap;
};

int
dbuf__wire_rx_create(int64_t total, dbuf__wire_rx_t **out)
{
  dbuf__wire_rx_t *rx = calloc(1, sizeof *rx);
  if (out == NULL || rx == NULL || (rx->outer = XXH3_createState()) == NULL) {
    free(rx);
    return out == NULL ? DBUF_EINVAL : DBUF_ENOMEM;
  }
  XXH3_64bits_reset(rx->outer);
  rx->total = total;
  rx->nb = -1;
  rx->off = total < DBUF_WIRE_PLAN_MIN_BYTES;
  *out = rx;
  return 0;
}

void
dbuf__wire_rx_destroy(dbuf__wire_rx_t *rx)
{
  if (rx == NULL)
    return;
  for (int64_t i = 0; i < rx->next; i++)
    ahead_free(&rx->lay[i]);
  free(rx->lay);
  XXH3_freeState(rx->outer);
  free(rx);
}

/* The plan header, once its 64 bytes are in: 0 or -1 (no head start). */
static int
rx_header(dbuf__wire_rx_t *rx, const uint8_t *q)
{
  const int64_t min_buf = 25 + DBUF_WIRE_MIN_BYTES;
  int64_t nb = (int64_t)get_u64(q + 24);
  if (memcmp(q, DBUF_WIRE_PLAN_MAGIC, 8) != 0 ||
      XXH3_64bits(q, PLAN_HDR_SUM_AT) != get_u64(q + PLAN_HDR_SUM_AT) ||
      (int64_t)get_u64(q + 16) != rx->total || get_u64(q + 8) != DBUF_WIRE_PLAN_VERSION ||
      nb < 0 || nb > (rx->total - DBUF_WIRE_PLAN_MIN_BYTES) / min_buf)
    return -1;
  rx->nb = nb;
  rx->pos = DBUF_WIRE_PLAN_HEADER_BYTES;
  return 0;
}

/* The framing of the next buffer, once in: 1 (read), 0 (not yet) or -1. */
static int
rx_framing(dbuf__wire_rx_t *rx, const uint8_t *q, int64_t have)
{
  const int64_t end = rx->total - 8, pos = rx->pos;
  if (pos + 8 > have)
    return 0;
  int64_t ul = (int64_t)get_u64(q + pos);
  if (ul < 1 || ul > DBUF_WIRE_UNIT_MAX || ul > end - pos - 24)
    return -1;
  if (pos + 24 + ul > have)
    return 0;
  int64_t ml = (int64_t)get_u64(q + pos + 16 + ul);
  if (ml < DBUF_WIRE_MIN_BYTES || ml > end - pos - 24 - ul)
    return -1;
  if (rx->next == rx->cap) { /* as the layouts come, not as many as the header says */
    int64_t cap = rx->cap ? 2 * rx->cap : 4;
    ahead_t *lay = dbuf__reallocn(rx->lay, cap, sizeof *lay);
    if (lay == NULL)
      return -1;
    rx->lay = lay;
    rx->cap = cap;
  }
  ahead_t *a = &rx->lay[rx->next];
  memset(a, 0, sizeof *a);
  a->at = pos + 24 + ul;
  a->len = ml;
  a->state = AHEAD_HEADER;
  if ((a->h = XXH3_createState()) == NULL)
    return -1;
  XXH3_64bits_reset(a->h);
  rx->next++;
  rx->pos = a->at + ml;
  return 1;
}

void
dbuf__wire_rx_feed(dbuf__wire_rx_t *rx, const void *msg, int64_t have)
{
  const uint8_t *q = msg;
  if (rx == NULL || rx->off)
    return;
  if (have > rx->total)
    have = rx->total;
  int64_t e = have < rx->total - 8 ? have : rx->total - 8;
  if (e > rx->hashed) {
    XXH3_64bits_update(rx->outer, q + rx->hashed, (size_t)(e - rx->hashed));
    rx->hashed = e;
  }
  if (rx->nb < 0) {
    if (have < DBUF_WIRE_PLAN_HEADER_BYTES)
      return;
    rx->off = rx_header(rx, q) != 0;
    /* Warm blocks are sized for one buffer: a plan of more (or a message
     * that looks wrong) would only hold them while it allocates its own. */
    if (rx->off || rx->nb != 1)
      dbuf__warm_release();
    if (rx->off)
      return;
  }
  for (;;) {
    /* The layouts whose bytes are coming, oldest first. */
    for (; rx->cur < rx->next; rx->cur++) {
      ahead_t *a = &rx->lay[rx->cur];
      ahead_run(q + a->at, (have < a->at + a->len ? have : a->at + a->len) - a->at, a);
      if (have < a->at + a->len)
        return;
    }
    if (rx->next == rx->nb)
      return;
    int got = rx_framing(rx, q, have);
    if (got <= 0) {
      rx->off = got < 0;
      return;
    }
  }
}

/* Names of more than this many bytes on average (NUL included) are not
 * worth faulting in ahead: numbers a receiver takes as no plan's. */
#define WARM_NAME_MAX 4096

int
dbuf__wire_rx_warm(int64_t n, int64_t name_bytes, int64_t nshapes, int64_t ndims, int kind)
{
  int64_t rec, lo, hi, four, eight, most, b[DBUF__WARM_BLOCKS][2];
  int k = 0, rc = 0;
  /* What a list of n tensors has: a name of a byte or more and a NUL each,
   * one to n shapes of 1 to DBUF_MAX_DIMS dims; what a message carries:
   * fewer than 2^32 tensors (and a list fewer than 2^31). */
  int64_t dup = n >= 1 && n <= (int64_t)UINT32_MAX ? dbuf__strmap_check_bytes(n) : -1;
  if (dup < 0 || name_bytes < 2 * n || dbuf__mul(n, WARM_NAME_MAX, &most) ||
      name_bytes > most || nshapes < 1 || nshapes > n || ndims < nshapes ||
      ndims > DBUF_MAX_DIMS * nshapes || kind < 0 || kind > DBUF_LAYOUT_COMPACT)
    return DBUF_EINVAL;
  /* The message: its records and offsets at least (faulted in), at most
   * every name byte unshared, the owners, the shapes and a margin. */
  if (dbuf__mul(n, RECORD_BYTES + 8, &rec) || dbuf__mul(n, 4, &four) ||
      dbuf__mul(n, 8, &eight) || dbuf__add(rec, four, &hi) || dbuf__add(hi, name_bytes, &hi) ||
      dbuf__add(hi, 4 * nshapes + 8 * ndims, &hi) || dbuf__add(hi, (int64_t)1 << 20, &hi))
    return DBUF_EOVERFLOW; /* nshapes <= n < 2^32, ndims <= 16 nshapes: no overflow there */
  lo = rec;
  b[k][0] = lo, b[k++][1] = hi;
  /* The tensor list (dbuf__tensors_bulk_begin(), tx_begin()): shape ids,
   * dtypes, name offsets, the names; the duplicate check's table; the
   * layout's offsets and, but for the unpadded kind, its order. */
  const int64_t list[] = {four, n, four, name_bytes, dup, eight, eight};
  const int nlist = kind == DBUF_LAYOUT_UNPADDED ? 6 : 7;
  for (int i = 0; i < nlist; i++)
    b[k][0] = b[k][1] = list[i], k++;
  for (int i = 0; i < k && rc == 0; i++)
    rc = dbuf__warm_add(b[i][0], b[i][1]);
  if (rc != 0)
    dbuf__warm_release();
  return rc;
}

int64_t
dbuf__wire_rx_ahead(const dbuf__wire_rx_t *rx)
{
  int64_t k = 0;
  for (int64_t i = 0; rx != NULL && i < rx->next; i++)
    k += rx->lay[i].state == AHEAD_TAKEN;
  return k;
}

/* dbuf_wire_plan_decode(), with a receiver's head start (rx: NULL, or fed
 * the same bytes). */
static int
plan_decode(const void *buf, int64_t len, dbuf__wire_rx_t *rx, dbuf_plan_t **out,
            dbuf_diag_t *diag)
{
  const uint8_t *q = buf;
  if (buf == NULL || out == NULL || len < 0)
    return dbuf__diag(diag, DBUF_EINVAL, "NULL argument or negative length");
  if (len < 8 || memcmp(q, DBUF_WIRE_PLAN_MAGIC, 8) != 0)
    return dbuf__diag(diag, DBUF_EFORMAT, "wire: not a dbuf-shard plan message (bad magic)");
  if (len < DBUF_WIRE_PLAN_MIN_BYTES)
    return dbuf__diag(diag, DBUF_EFORMAT, "wire: truncated plan message: %lld bytes, at "
                      "least %d", (long long)len, DBUF_WIRE_PLAN_MIN_BYTES);
  if (XXH3_64bits(q, PLAN_HDR_SUM_AT) != get_u64(q + PLAN_HDR_SUM_AT))
    return dbuf__diag(diag, DBUF_ECHECKSUM, "wire: plan header checksum mismatch");
  int64_t total = (int64_t)get_u64(q + 16);
  if (total != len)
    return dbuf__diag(diag, DBUF_EFORMAT, "wire: %s plan message: %lld bytes, the header "
                      "says %lld", len < total ? "truncated" : "over-long", (long long)len,
                      (long long)total);
  if (rx != NULL && (rx->total != len || rx->hashed != len - 8))
    rx = NULL; /* not fed this message whole */
  uint64_t sum = rx != NULL ? XXH3_64bits_digest(rx->outer) : XXH3_64bits(q, (size_t)len - 8);
  if (sum != get_u64(q + len - 8))
    return dbuf__diag(diag, DBUF_ECHECKSUM, "wire: plan message checksum mismatch");
  uint64_t version = get_u64(q + 8);
  if (version != DBUF_WIRE_PLAN_VERSION)
    return dbuf__diag(diag, DBUF_EVERSION, "wire: plan format version %llu, this build "
                      "reads only version %d (every rank must run the same dbuf-shard)", (unsigned long long)version, DBUF_WIRE_PLAN_VERSION);
  int64_t nb = (int64_t)get_u64(q + 24), nranks = (int64_t)get_u64(q + 32);
  /* The smallest buffer: a 1-byte name, three words and a minimal layout. */
  const int64_t min_buf = 25 + DBUF_WIRE_MIN_BYTES;
  if (nb < 0 || nb > (len - DBUF_WIRE_PLAN_MIN_BYTES) / min_buf)
    return dbuf__diag(diag, DBUF_EFORMAT, "wire: plan of %lld buffers cannot fit %lld bytes",
                      (long long)nb, (long long)len);
  if (nranks < (nb > 0 ? 1 : 0) || nranks > INT_MAX || get_u64(q + 40) != 0 ||
      get_u64(q + 48) != 0)
    return dbuf__diag(diag, DBUF_EFORMAT, "wire: plan header: bad rank count or reserved "
                      "word");
  dbuf_plan_t *p = NULL;
  int rc = dbuf_plan_create(&p);
  if (rc != 0)
    return dbuf__diag(diag, rc, "out of memory");
  reader_t r = {q, DBUF_WIRE_PLAN_HEADER_BYTES, len - 8};
  for (int64_t i = 0; rc == 0 && i < nb; i++)
    rc = read_plan_buffer(&r, i, nranks, rx != NULL && i < rx->next ? &rx->lay[i] : NULL, p,
                          diag);
  if (rc == 0 && r.pos != r.end)
    rc = dbuf__diag(diag, DBUF_EFORMAT, "wire: %lld bytes after the last plan buffer",
                    (long long)(r.end - r.pos));
  if (rc != 0) {
    dbuf_plan_destroy(p);
    return rc;
  }
  *out = p;
  return 0;
}

int
dbuf_wire_plan_decode(const void *buf, int64_t len, dbuf_plan_t **out, dbuf_diag_t *diag)
{
  return plan_decode(buf, len, NULL, out, diag);
}

int
dbuf__wire_rx_plan_decode(dbuf__wire_rx_t *rx, const void *msg, int64_t len,
                          dbuf_plan_t **out, dbuf_diag_t *diag)
{
  return plan_decode(msg, len, rx, out, diag);
}
