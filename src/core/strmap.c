/* The core's one string map (see strmap.h). */
#include "strmap.h"
#include "core_internal.h"

#include <stdlib.h>
#include <string.h>

#define FNV_PRIME UINT64_C(1099511628211)

uint64_t
dbuf__fnv1a(uint64_t h, const void *data, size_t len)
{
  const unsigned char *p = data;
  for (size_t i = 0; i < len; i++) {
    h ^= p[i];
    h *= FNV_PRIME;
  }
  return h;
}

/* The table hash: FNV-1a with its high bits folded into the low ones the
 * mask keeps. */
static uint64_t
key_hash(const char *key, size_t len)
{
  uint64_t h = dbuf__fnv1a(DBUF__FNV_OFFSET, key, len);
  return h ^ (h >> 31);
}

/* The smallest capacity >= need, doubling from cap (or from first). */
static int
grown(int64_t cap, int64_t need, int64_t first, int64_t *out)
{
  int64_t c = cap > 0 ? cap : first;
  while (c < need) {
    if (dbuf__mul(c, 2, &c))
      return DBUF_EOVERFLOW;
  }
  *out = c;
  return 0;
}

/* The slot of key: its id + 1, or the empty slot where it would go. */
static int64_t *
probe(const dbuf__strmap_t *m, const char *key, uint64_t h)
{
  uint64_t mask = (uint64_t)m->nslots - 1;
  for (uint64_t i = h & mask;; i = (i + 1) & mask) {
    int64_t v = m->slots[i];
    if (v == 0 || (m->hash[v - 1] == h &&
                   strcmp(m->keys + m->key_off[v - 1], key) == 0))
      return &m->slots[i];
  }
}

/* Room for count + n keys: entry arrays and a table at most half full. */
static int
room(dbuf__strmap_t *m, int64_t n)
{
  int64_t need, twice, cap, nslots;
  int rc;
  if (n < 0)
    return DBUF_EINVAL;
  if ((rc = dbuf__add(m->count, n, &need)) != 0 ||
      (rc = dbuf__mul(need, 2, &twice)) != 0)
    return rc;
  if (need > m->cap) {
    if ((rc = grown(m->cap, need, 16, &cap)) != 0)
      return rc;
    int64_t *off = dbuf__reallocn(m->key_off, cap, sizeof *off);
    if (off == NULL)
      return DBUF_ENOMEM;
    m->key_off = off;
    uint64_t *hash = dbuf__reallocn(m->hash, cap, sizeof *hash);
    if (hash == NULL)
      return DBUF_ENOMEM;
    m->hash = hash;
    m->cap = cap;
  }
  if (twice > m->nslots) {
    if ((rc = grown(m->nslots, twice, 32, &nslots)) != 0)
      return rc;
    int64_t *slots = dbuf__calloc(nslots, sizeof *slots);
    if (slots == NULL)
      return DBUF_ENOMEM;
    free(m->slots);
    m->slots = slots;
    m->nslots = nslots;
    for (int64_t id = 0; id < m->count; id++) /* keys are distinct */
      *probe(m, m->keys + m->key_off[id], m->hash[id]) = id + 1;
  }
  return 0;
}

int
dbuf__strmap_reserve(dbuf__strmap_t *m, int64_t n)
{
  return room(m, n);
}

int
dbuf__strmap_add(dbuf__strmap_t *m, const char *key, int64_t *id)
{
  size_t len = strlen(key);
  uint64_t h = key_hash(key, len);
  int64_t bytes, need, cap;
  int rc;

  if (m->nslots > 0) {
    int64_t v = *probe(m, key, h);
    if (v != 0) {
      *id = v - 1;
      return DBUF_EDUP;
    }
  }
  if (len >= (size_t)INT64_MAX)
    return DBUF_EOVERFLOW;
  bytes = (int64_t)len + 1;
  if ((rc = dbuf__add(m->keys_len, bytes, &need)) != 0)
    return rc;
  if (need > m->keys_cap) {
    if ((rc = grown(m->keys_cap, need, 256, &cap)) != 0)
      return rc;
    char *keys = dbuf__reallocn(m->keys, cap, 1);
    if (keys == NULL)
      return DBUF_ENOMEM;
    m->keys = keys;
    m->keys_cap = cap;
  }
  if ((rc = room(m, 1)) != 0)
    return rc;
  memcpy(m->keys + m->keys_len, key, (size_t)bytes);
  m->key_off[m->count] = m->keys_len;
  m->hash[m->count] = h;
  m->keys_len = need;
  *probe(m, key, h) = m->count + 1;
  *id = m->count++;
  return 0;
}

int
dbuf__strmap_find(const dbuf__strmap_t *m, const char *key, int64_t *id)
{
  if (m->nslots == 0)
    return DBUF_ENOTFOUND;
  int64_t v = *probe(m, key, key_hash(key, strlen(key)));
  if (v == 0)
    return DBUF_ENOTFOUND;
  *id = v - 1;
  return 0;
}

const char *
dbuf__strmap_key(const dbuf__strmap_t *m, int64_t id)
{
  return id >= 0 && id < m->count ? m->keys + m->key_off[id] : NULL;
}

int
dbuf__strmap_copy(const dbuf__strmap_t *m, dbuf__strmap_t *out)
{
  dbuf__strmap_t c = DBUF__STRMAP_INIT;
  if (m->count == 0 && m->nslots == 0) {
    *out = c;
    return 0;
  }
  c.count = c.cap = m->count;
  c.keys_len = c.keys_cap = m->keys_len;
  c.nslots = m->nslots;
  c.key_off = dbuf__memdup(m->key_off, m->count, sizeof *c.key_off);
  c.hash = dbuf__memdup(m->hash, m->count, sizeof *c.hash);
  c.keys = dbuf__memdup(m->keys, m->keys_len, 1);
  c.slots = dbuf__memdup(m->slots, m->nslots, sizeof *c.slots);
  if (c.key_off == NULL || c.hash == NULL || c.keys == NULL || c.slots == NULL) {
    dbuf__strmap_free(&c);
    *out = c;
    return DBUF_ENOMEM;
  }
  *out = c;
  return 0;
}

void
dbuf__strmap_free(dbuf__strmap_t *m)
{
  free(m->key_off);
  free(m->hash);
  free(m->keys);
  free(m->slots);
  memset(m, 0, sizeof *m);
}
