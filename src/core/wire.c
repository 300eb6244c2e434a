/* The binary wire format of a layout (see dbuf/wire.h for the byte map). */
#include "dbuf/wire.h"

#include "core_internal.h"

#include <assert.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

enum {
  SEC_TENSORS = 1,
  SEC_OFFSETS = 2,
  SEC_RANGE = 3,
  SEC_OWNERS = 4,
  SEC_OPTIONAL = 256, /* tags from here on may be skipped by readers */
  HDR_SUM_AT = 120,   /* header checksum word */
  TENSOR_WORDS = 2    /* flags, elem_size */
};

/* ------------------------------------------------------------------ */
/* Little-endian words, byte by byte.                                  */

static void
put_u64(uint8_t *p, uint64_t v)
{
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t
get_u64(const uint8_t *p)
{
  uint64_t v = 0;
  for (int i = 0; i < 8; i++)
    v |= (uint64_t)p[i] << (8 * i);
  return v;
}

typedef struct {
  uint8_t *p;
  int64_t pos;
} writer_t;

static void
w_u64(writer_t *w, uint64_t v)
{
  put_u64(w->p + w->pos, v);
  w->pos += 8;
}

static void
w_i64(writer_t *w, int64_t v)
{
  w_u64(w, (uint64_t)v);
}

static void
w_bytes(writer_t *w, const void *src, int64_t n)
{
  if (n > 0)
    memcpy(w->p + w->pos, src, (size_t)n);
  w->pos += n;
}

/* ------------------------------------------------------------------ */
/* Encoding                                                            */

static int
encoded_size(const dbuf_layout_t *l, int64_t *out)
{
  const dbuf_tensors_t *t = dbuf_layout_tensors(l);
  int64_t n = dbuf_layout_ntensors(l), nr = dbuf_layout_nranks(l);
  int64_t total = DBUF_WIRE_HEADER_BYTES + 8, sec, w;
  int rc = 0;

  /* TENSORS */
  sec = 16;
  for (int64_t i = 0; i < n && rc == 0; i++) {
    int64_t rec = (int64_t)strlen(dbuf_tensors_name(t, i));
    rc = dbuf__add(rec, 8 * (2 + TENSOR_WORDS + (int64_t)dbuf_tensors_ndim(t, i)),
                   &rec);
    if (rc == 0)
      rc = dbuf__add(sec, rec, &sec);
  }
  if (rc == 0)
    rc = dbuf__add(total, sec, &total);
  /* OFFSETS, RANGE, OWNERS */
  if (rc == 0 && (rc = dbuf__mul(n, 8, &w)) == 0)
    rc = dbuf__add(total, 16 + w, &total);
  if (rc == 0)
    rc = dbuf__add(total, 16 + 8 * (nr + 1), &total);
  if (rc == 0 && dbuf_layout_owners(l) != NULL)
    rc = dbuf__add(total, 16 + w, &total);
  if (rc == 0 && (uint64_t)total > SIZE_MAX)
    rc = DBUF_EOVERFLOW;
  if (rc == 0)
    *out = total;
  return rc;
}

int
dbuf_wire_encode(const dbuf_layout_t *l, void **buf, int64_t *len,
                 dbuf_diag_t *diag)
{
  int64_t total;
  if (l == NULL || buf == NULL || len == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "NULL argument");
  if (encoded_size(l, &total) != 0)
    return dbuf__diag(diag, DBUF_EOVERFLOW,
                      "layout of %lld tensors is too large to serialize",
                      (long long)dbuf_layout_ntensors(l));
  uint8_t *p = malloc((size_t)total);
  if (p == NULL)
    return dbuf__diag(diag, DBUF_ENOMEM, "out of memory for a %lld-byte message",
                      (long long)total);

  const dbuf_tensors_t *t = dbuf_layout_tensors(l);
  const int64_t *off = dbuf_layout_offsets(l), *range = dbuf_layout_range(l);
  const int *own = dbuf_layout_owners(l);
  int64_t n = dbuf_layout_ntensors(l);
  int nr = dbuf_layout_nranks(l);
  writer_t w = {p, 0};

  w_bytes(&w, DBUF_WIRE_MAGIC, 8);
  w_u64(&w, DBUF_WIRE_VERSION);
  w_i64(&w, total);
  w_u64(&w, DBUF_WIRE_HEADER_BYTES);
  w_u64(&w, (uint64_t)dbuf_layout_kind(l));
  w_i64(&w, nr);
  w_i64(&w, dbuf_layout_block_size(l));
  w_i64(&w, dbuf_layout_chunk_size(l));
  w_i64(&w, dbuf_layout_size(l));
  w_i64(&w, n);
  w_u64(&w, 0); /* layout flags */
  w_u64(&w, TENSOR_WORDS);
  w_u64(&w, own ? 4 : 3);
  w_u64(&w, 0);
  w_u64(&w, 0);
  w_u64(&w, XXH3_64bits(p, HDR_SUM_AT));

  /* TENSORS: the payload length is patched once known. */
  int64_t lenpos;
  w_u64(&w, SEC_TENSORS);
  lenpos = w.pos;
  w_u64(&w, 0);
  for (int64_t i = 0; i < n; i++) {
    const char *name = dbuf_tensors_name(t, i);
    int64_t nl = (int64_t)strlen(name);
    int nd = dbuf_tensors_ndim(t, i);
    const int64_t *dims = dbuf_tensors_dims(t, i);
    w_i64(&w, nl);
    w_bytes(&w, name, nl);
    w_u64(&w, (uint64_t)nd);
    for (int d = 0; d < nd; d++)
      w_i64(&w, dims[d]);
    w_u64(&w, 0); /* flags */
    w_u64(&w, 0); /* elem_size: not given */
  }
  put_u64(p + lenpos, (uint64_t)(w.pos - lenpos - 8));

  w_u64(&w, SEC_OFFSETS);
  w_i64(&w, 8 * n);
  for (int64_t i = 0; i < n; i++)
    w_i64(&w, off[i]);
  w_u64(&w, SEC_RANGE);
  w_i64(&w, 8 * ((int64_t)nr + 1));
  for (int r = 0; r <= nr; r++)
    w_i64(&w, range[r]);
  if (own != NULL) {
    w_u64(&w, SEC_OWNERS);
    w_i64(&w, 8 * n);
    for (int64_t i = 0; i < n; i++)
      w_i64(&w, own[i]);
  }
  w_u64(&w, XXH3_64bits(p, (size_t)w.pos));
  if (w.pos != total) { /* a bug in encoded_size(), never input */
    free(p);
    return dbuf__diag(diag, DBUF_EFORMAT, "internal error: encoded %lld of %lld bytes",
                      (long long)w.pos, (long long)total);
  }
  *buf = p;
  *len = total;
  return 0;
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
static int
r_words(reader_t *r, int64_t count, int64_t **out)
{
  if (count < 0 || count > (r->end - r->pos) / 8)
    return DBUF_EFORMAT;
  int64_t *v = dbuf__mallocn(count > 0 ? count : 1, sizeof *v);
  if (v == NULL)
    return DBUF_ENOMEM;
  for (int64_t i = 0; i < count; i++)
    r_i64(r, &v[i]);
  *out = v;
  return 0;
}

static int
read_tensors(reader_t *r, int64_t n, int64_t words, dbuf_tensors_t **out,
             dbuf_diag_t *diag)
{
  dbuf_tensors_t *t = NULL;
  char *name = NULL;
  int rc;
  /* Each record holds at least 8 + 1 + 8 + 8 + 8 * words bytes. */
  if (n > (r->end - r->pos) / (25 + 8 * words))
    return dbuf__diag(diag, DBUF_EFORMAT,
                      "wire: %lld tensors do not fit a %lld-byte section",
                      (long long)n, (long long)(r->end - r->pos));
  if ((rc = dbuf_tensors_create(&t)) != 0 || (rc = dbuf_tensors_reserve(t, n)) != 0) {
    dbuf_tensors_destroy(t);
    return dbuf__diag(diag, rc, "wire: %s", dbuf_strerror(rc));
  }
  for (int64_t i = 0; i < n; i++) {
    int64_t nl, dims[DBUF_MAX_DIMS];
    uint64_t nd, flags, esize;
    if (r_i64(r, &nl) != 0 || nl < 1 || nl > r->end - r->pos) {
      rc = dbuf__diag(diag, DBUF_EFORMAT,
                      "wire: tensor %lld: name length does not fit", (long long)i);
      goto fail;
    }
    free(name);
    if ((name = malloc((size_t)nl + 1)) == NULL) {
      rc = dbuf__diag(diag, DBUF_ENOMEM, "wire: out of memory");
      goto fail;
    }
    memcpy(name, r->p + r->pos, (size_t)nl);
    name[nl] = '\0';
    r->pos += nl;
    if (strlen(name) != (size_t)nl) {
      rc = dbuf__diag(diag, DBUF_EFORMAT, "wire: tensor %lld: NUL in its name",
                      (long long)i);
      goto fail;
    }
    if (r_u64(r, &nd) != 0 || nd < 1 || nd > DBUF_MAX_DIMS) {
      rc = dbuf__diag(diag, DBUF_EFORMAT, "wire: tensor %s: bad dim count",
                      name);
      goto fail;
    }
    for (uint64_t d = 0; d < nd; d++) {
      if (r_i64(r, &dims[d]) != 0) {
        rc = dbuf__diag(diag, DBUF_EFORMAT, "wire: tensor %s: truncated shape",
                        name);
        goto fail;
      }
    }
    if (r_u64(r, &flags) != 0 || r_u64(r, &esize) != 0) {
      rc = dbuf__diag(diag, DBUF_EFORMAT, "wire: tensor %s: truncated record", name);
      goto fail;
    }
    if (flags != 0 || esize > 64) {
      rc = dbuf__diag(diag, DBUF_EFORMAT,
                      "wire: tensor %s: unknown flags 0x%llx or element size %llu",
                      name, (unsigned long long)flags, (unsigned long long)esize);
      goto fail;
    }
    for (int64_t k = TENSOR_WORDS; k < words; k++) { /* later fields: skip */
      uint64_t skip;
      if (r_u64(r, &skip) != 0) {
        rc = dbuf__diag(diag, DBUF_EFORMAT, "wire: tensor %s: truncated record",
                        name);
        goto fail;
      }
    }
    if ((rc = dbuf_tensors_add(t, name, (int)nd, dims, diag)) != 0)
      goto fail;
  }
  if (r->pos != r->end) {
    rc = dbuf__diag(diag, DBUF_EFORMAT, "wire: %lld stray bytes after the tensors",
                    (long long)(r->end - r->pos));
    goto fail;
  }
  free(name);
  *out = t;
  return 0;
fail:
  free(name);
  dbuf_tensors_destroy(t);
  return rc;
}

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

/* The magic, the lengths, both checksums and the version. */
static int
check_envelope(const uint8_t *p, int64_t len, dbuf_diag_t *diag)
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
  if (XXH3_64bits(p, (size_t)len - 8) != get_u64(p + len - 8))
    return dbuf__diag(diag, DBUF_ECHECKSUM, "wire: message checksum mismatch");
  uint64_t version = get_u64(p + 8);
  if (version != DBUF_WIRE_VERSION)
    return dbuf__diag(diag, DBUF_EVERSION,
                      "wire: format version %llu, this build reads version %d",
                      (unsigned long long)version, DBUF_WIRE_VERSION);
  return 0;
}

/* A message being decoded: its header fields, then the sections' contents. */
typedef struct {
  uint64_t kind, words, nsec;
  int64_t nranks, block, chunk, size, n;
  int seen; /* bit per section tag */
  dbuf_tensors_t *t;
  int64_t *offsets, *range, *own64;
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
  m->words = get_u64(p + 88);
  m->nsec = get_u64(p + 96);
  if (hdr != DBUF_WIRE_HEADER_BYTES || lflags != 0 || get_u64(p + 104) != 0 ||
      get_u64(p + 112) != 0 || m->words < TENSOR_WORDS || m->words > 64)
    return dbuf__diag(diag, DBUF_EFORMAT, "wire: unknown header fields");
  if (m->kind < DBUF_LAYOUT_PADDED || m->kind > DBUF_LAYOUT_COMPACT)
    return dbuf__diag(diag, DBUF_EFORMAT, "wire: unknown layout kind %llu",
                      (unsigned long long)m->kind);
  if (m->nranks < 1 || m->nranks > INT_MAX)
    return dbuf__diag(diag, DBUF_EFORMAT, "wire: rank count %lld out of range",
                      (long long)m->nranks);
  if (m->n < 0)
    return dbuf__diag(diag, DBUF_EFORMAT, "wire: negative tensor count");
  return 0;
}

/* One required section (tag already checked) read from sr. */
static int
read_section(reader_t *sr, uint64_t tag, msg_t *m, dbuf_diag_t *diag)
{
  int64_t want, plen = sr->end - sr->pos;
  int rc;
  switch (tag) {
  case SEC_TENSORS:
    return read_tensors(sr, m->n, (int64_t)m->words, &m->t, diag);
  case SEC_OFFSETS:
    rc = r_words(sr, want = m->n, &m->offsets);
    break;
  case SEC_RANGE:
    rc = r_words(sr, want = m->nranks + 1, &m->range);
    break;
  default: /* SEC_OWNERS */
    rc = r_words(sr, want = m->n, &m->own64);
    break;
  }
  if (rc == DBUF_ENOMEM)
    return dbuf__diag(diag, rc, "wire: out of memory");
  if (rc != 0 || sr->pos != sr->end)
    return dbuf__diag(diag, DBUF_EFORMAT,
                      "wire: section %llu holds %lld bytes, expected %lld words",
                      (unsigned long long)tag, (long long)plen, (long long)want);
  return 0;
}

/* Every section between the header and the trailer. */
static int
read_sections(const uint8_t *p, int64_t len, msg_t *m, dbuf_diag_t *diag)
{
  reader_t r = {p, DBUF_WIRE_HEADER_BYTES, len - 8};
  int rc;
  for (uint64_t s = 0; s < m->nsec; s++) {
    uint64_t tag;
    int64_t plen;
    if (r_u64(&r, &tag) != 0 || r_i64(&r, &plen) != 0 || plen < 0 ||
        plen > r.end - r.pos)
      return dbuf__diag(diag, DBUF_EFORMAT, "wire: section %llu does not fit",
                        (unsigned long long)s);
    reader_t sr = {p, r.pos, r.pos + plen};
    r.pos += plen;
    if (tag >= SEC_OPTIONAL)
      continue;
    if (tag < SEC_TENSORS || tag > SEC_OWNERS || (m->seen & (1 << tag)))
      return dbuf__diag(diag, DBUF_EFORMAT, "wire: unknown or repeated section %llu",
                        (unsigned long long)tag);
    m->seen |= 1 << tag;
    if ((rc = read_section(&sr, tag, m, diag)) != 0)
      return rc;
  }
  if (r.pos != r.end)
    return dbuf__diag(diag, DBUF_EFORMAT, "wire: %lld stray bytes after the sections",
                      (long long)(r.end - r.pos));
  int need = (1 << SEC_TENSORS) | (1 << SEC_OFFSETS) | (1 << SEC_RANGE);
  if ((m->seen & need) != need)
    return dbuf__diag(diag, DBUF_EFORMAT, "wire: a required section is missing");
  return 0;
}

/* The layout from the sections: the range's end, the owners, then the parts. */
static int
assemble(msg_t *m, dbuf_layout_t **out, dbuf_diag_t *diag)
{
  int *owners = NULL;
  int rc;
  if (m->range[m->nranks] != m->size)
    return dbuf__diag(diag, DBUF_ELAYOUT, "wire: range ends at %lld, size is %lld",
                      (long long)m->range[m->nranks], (long long)m->size);
  if (m->own64 != NULL) {
    owners = dbuf__mallocn(m->n > 0 ? m->n : 1, sizeof *owners);
    if (owners == NULL)
      return dbuf__diag(diag, DBUF_ENOMEM, "wire: out of memory");
    for (int64_t i = 0; i < m->n; i++) {
      dbuf_diag_t d;
      if ((rc = dbuf_layout_check_owner(m->t, i, m->own64[i], (int)m->nranks, &d)) != 0) {
        free(owners);
        return dbuf__diag(diag, rc, "wire: %s", d.msg);
      }
      owners[i] = (int)m->own64[i];
    }
  }
  rc = dbuf_layout_from_parts(m->t, (dbuf_layout_kind_t)m->kind, (int)m->nranks,
                              m->block, m->chunk, m->size, m->offsets, m->range,
                              owners, out, diag);
  free(owners);
  return rc;
}

int
dbuf_wire_decode(const void *buf, int64_t len, dbuf_layout_t **out,
                 dbuf_diag_t *diag)
{
  const uint8_t *p = buf;
  msg_t m;
  int rc;

  if (buf == NULL || out == NULL || len < 0)
    return dbuf__diag(diag, DBUF_EINVAL, "NULL argument or negative length");
  if ((rc = check_envelope(p, len, diag)) != 0)
    return rc;
  memset(&m, 0, sizeof m);
  if ((rc = read_header(p, &m, diag)) == 0 && (rc = read_sections(p, len, &m, diag)) == 0)
    rc = assemble(&m, out, diag);
  dbuf_tensors_destroy(m.t);
  free(m.offsets);
  free(m.range);
  free(m.own64);
  return rc;
}

int
dbuf_wire_digest(const dbuf_layout_t *l, uint64_t *digest, dbuf_diag_t *diag)
{
  void *buf;
  int64_t len;
  if (digest == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "NULL argument");
  int rc = dbuf_wire_encode(l, &buf, &len, diag);
  if (rc != 0)
    return rc;
  dbuf_wire_checksum(buf, len, digest);
  free(buf);
  return 0;
}

/* ------------------------------------------------------------------ */
/* Plans: a list of (unit, dtype, layout message)                       */

enum {
  PLAN_HDR_SUM_AT = 56 /* header checksum word of a plan message */
};

/* Encode every buffer's layout once; the plan message copies them. */
static void
free_msgs(void **msg, int64_t n)
{
  for (int64_t i = 0; msg != NULL && i < n; i++)
    free(msg[i]);
  free(msg);
}

int
dbuf_wire_plan_encode(const dbuf_plan_t *p, void **buf, int64_t *len, dbuf_diag_t *diag)
{
  if (p == NULL || buf == NULL || len == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "NULL argument");
  int64_t nb = dbuf_plan_nbuffers(p), total = DBUF_WIRE_PLAN_MIN_BYTES;
  void **msg = dbuf__mallocn(nb > 0 ? nb : 1, sizeof *msg);
  int64_t *mlen = dbuf__mallocn(nb > 0 ? nb : 1, sizeof *mlen);
  int rc = msg == NULL || mlen == NULL ? dbuf__diag(diag, DBUF_ENOMEM, "out of memory") : 0;
  int64_t done = 0;
  for (; rc == 0 && done < nb; done++) {
    dbuf_plan_buffer_t b;
    int64_t ul;
    dbuf_plan_buffer(p, done, &b);
    ul = (int64_t)strlen(b.unit);
    if (ul > DBUF_WIRE_UNIT_MAX) {
      rc = dbuf__diag(diag, DBUF_EINVAL, "wire: unit name of %lld bytes (at most %d)",
                      (long long)ul, DBUF_WIRE_UNIT_MAX);
      break;
    }
    if ((rc = dbuf_wire_encode(b.layout, &msg[done], &mlen[done], diag)) != 0)
      break;
    if (dbuf__add(total, 24 + ul, &total) != 0 || dbuf__add(total, mlen[done], &total) != 0 ||
        (uint64_t)total > SIZE_MAX) {
      done++;
      rc = dbuf__diag(diag, DBUF_EOVERFLOW, "plan of %lld buffers is too large to serialize",
                      (long long)nb);
    }
  }
  uint8_t *out = rc == 0 ? malloc((size_t)total) : NULL;
  if (rc == 0 && out == NULL)
    rc = dbuf__diag(diag, DBUF_ENOMEM, "out of memory for a %lld-byte message",
                    (long long)total);
  if (rc == 0) {
    writer_t w = {out, 0};
    w_bytes(&w, DBUF_WIRE_PLAN_MAGIC, 8);
    w_u64(&w, DBUF_WIRE_PLAN_VERSION);
    w_i64(&w, total);
    w_i64(&w, nb);
    w_i64(&w, dbuf_plan_nranks(p));
    w_u64(&w, 0);
    w_u64(&w, 0);
    w_u64(&w, XXH3_64bits(out, PLAN_HDR_SUM_AT));
    for (int64_t i = 0; i < nb; i++) {
      dbuf_plan_buffer_t b;
      dbuf_plan_buffer(p, i, &b);
      int64_t ul = (int64_t)strlen(b.unit);
      w_i64(&w, ul);
      w_bytes(&w, b.unit, ul);
      w_u64(&w, (uint64_t)b.dtype);
      w_i64(&w, mlen[i]);
      w_bytes(&w, msg[i], mlen[i]);
    }
    w_u64(&w, XXH3_64bits(out, (size_t)w.pos));
    assert(w.pos == total);
    *buf = out;
    *len = total;
  }
  free_msgs(msg, done);
  free(mlen);
  return rc;
}

/* A unit name as the wire may carry it: 1 .. DBUF_WIRE_UNIT_MAX bytes, no
 * blank, control character or NUL (as dbuf_units_from_names() asks). */
static int
unit_name_ok(const uint8_t *s, int64_t n)
{
  if (n < 1 || n > DBUF_WIRE_UNIT_MAX)
    return 0;
  for (int64_t i = 0; i < n; i++)
    if (s[i] <= ' ' || s[i] == 0x7f)
      return 0;
  return 1;
}

/* One buffer of a plan message at r; appends it to p. */
static int
read_plan_buffer(reader_t *r, int64_t i, int64_t nranks, dbuf_plan_t *p, dbuf_diag_t *diag)
{
  int64_t ul, ml;
  uint64_t dt;
  char unit[DBUF_WIRE_UNIT_MAX + 1];
  if (r_i64(r, &ul) != 0 || ul < 0 || ul > r->end - r->pos)
    return dbuf__diag(diag, DBUF_EFORMAT, "wire: plan buffer %lld: unit name length out of "
                      "the message", (long long)i);
  if (!unit_name_ok(r->p + r->pos, ul))
    return dbuf__diag(diag, DBUF_EFORMAT, "wire: plan buffer %lld: bad unit name (1 to %d "
                      "bytes, no blanks or control characters)", (long long)i,
                      DBUF_WIRE_UNIT_MAX);
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
  int rc = dbuf_wire_decode(r->p + r->pos, ml, &l, &d);
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

int
dbuf_wire_plan_decode(const void *buf, int64_t len, dbuf_plan_t **out, dbuf_diag_t *diag)
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
  if (XXH3_64bits(q, (size_t)len - 8) != get_u64(q + len - 8))
    return dbuf__diag(diag, DBUF_ECHECKSUM, "wire: plan message checksum mismatch");
  uint64_t version = get_u64(q + 8);
  if (version != DBUF_WIRE_PLAN_VERSION)
    return dbuf__diag(diag, DBUF_EVERSION, "wire: plan format version %llu, this build "
                      "reads version %d", (unsigned long long)version, DBUF_WIRE_PLAN_VERSION);
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
    rc = read_plan_buffer(&r, i, nranks, p, diag);
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
