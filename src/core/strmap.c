/* The core's one string map (see strmap.h). */
#include "strmap.h"
#include "core_internal.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

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

/* A 32-bit slot of a table of 2^k slots holds id + 1 in its low k bits
 * (ids are below count <= 2^(k-1)) and bits 32 + k .. 63 of the key's hash
 * above them as a tag, so that a probe reads the keys only on a likely match
 * (a wrong tag passes 1 time in 2^(32-k)) and a map needs no array of
 * hashes.  The table index comes from the low bits of the hash. */
#define MAX_KEYS ((INT64_C(1) << 31) - 1)
#define MAX_SLOTS (INT64_C(1) << 32)

/* Offsets of 8 bytes from now on: the keys are about to pass 4 GiB.
 * 0 or DBUF_ENOMEM (m unchanged). */
static int
widen(dbuf__strmap_t *m)
{
  int64_t *w = dbuf__mallocn(m->cap, sizeof *w);
  if (w == NULL)
    return DBUF_ENOMEM;
  for (int64_t id = 0; id < m->count; id++)
    w[id] = m->off32[id];
  free(m->off32);
  m->off32 = NULL;
  m->off64 = w;
  return 0;
}

/* k of a table of nslots = 2^k slots. */
static inline unsigned
id_bits(int64_t nslots)
{
  return (unsigned)__builtin_ctzll((unsigned long long)nslots);
}

static inline uint64_t
key_hash(const char *key, size_t len)
{
  return XXH3_64bits(key, len);
}

static inline uint32_t
slot_of(uint64_t h, int64_t id, unsigned k)
{
  return (uint32_t)((h >> 32 >> k << k) | (uint64_t)(id + 1));
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

/* The index of key's slot, or of the empty slot where it would go. */
static uint64_t
probe(const dbuf__strmap_t *m, const char *key, uint64_t h)
{
  unsigned k = id_bits(m->nslots);
  uint64_t mask = (uint64_t)m->nslots - 1, tag = h >> 32 >> k;
  for (uint64_t i = h & mask;; i = (i + 1) & mask) {
    uint64_t v = m->slots[i];
    if (v == 0 || ((v >> k) == tag &&
                   strcmp(m->keys + dbuf__strmap_off(m, (int64_t)(v & mask) - 1), key) == 0))
      return i;
  }
}

#define AHEAD DBUF__PREFETCH_AHEAD

/* Keys [from, to) of m into slots (nslots of them, a power of two >= 2 *
 * the count the table is for), which hold keys [0, from) already.  The key
 * AHEAD places on is hashed and its slot prefetched before each insert, so
 * that the random reads of the table overlap instead of waiting one by one.
 * With check, a key equal to an earlier one stops the inserts: DBUF_EDUP,
 * dup[0] the earlier id and dup[1] the later; without it the keys must be
 * distinct. */
static int
insert_keys(const dbuf__strmap_t *m, uint32_t *slots, int64_t nslots, int64_t from, int64_t to,
            int check, int64_t dup[2])
{
  uint64_t mask = (uint64_t)nslots - 1, h[AHEAD];
  unsigned bits = id_bits(nslots);
  for (int64_t id = from; id < to + AHEAD; id++) {
    int64_t j = id - AHEAD; /* insert j, then hash id into j's place */
    if (j >= from) {
      uint64_t hj = h[j % AHEAD], i = hj & mask, tag = hj >> 32 >> bits;
      for (uint64_t v; (v = slots[i]) != 0; i = (i + 1) & mask) {
        if (check && (v >> bits) == tag &&
            strcmp(m->keys + dbuf__strmap_off(m, (int64_t)(v & mask) - 1),
                   m->keys + dbuf__strmap_off(m, j)) == 0) {
          dup[0] = (int64_t)(v & mask) - 1;
          dup[1] = j;
          return DBUF_EDUP;
        }
      }
      slots[i] = slot_of(hj, j, bits);
    }
    if (id < to) {
      h[id % AHEAD] = key_hash(m->keys + dbuf__strmap_off(m, id), dbuf__strmap_len(m, id));
      __builtin_prefetch(&slots[h[id % AHEAD] & mask], 1);
    }
  }
  return 0;
}

/* A table of nslots slots (a power of two >= 2 * count) indexing m's keys
 * (insert_keys()); with check, DBUF_EDUP (dup filled) leaves nothing.  0
 * or DBUF_EOVERFLOW, DBUF_ENOMEM, DBUF_EDUP. */
static int
fill_index(const dbuf__strmap_t *m, int64_t nslots, int check, uint32_t **out, int64_t dup[2])
{
  if (nslots > MAX_SLOTS)
    return DBUF_EOVERFLOW; /* unreachable: count <= MAX_KEYS */
  uint32_t *slots = dbuf__calloc(nslots, sizeof *slots);
  if (slots == NULL)
    return DBUF_ENOMEM;
  int rc = insert_keys(m, slots, nslots, 0, m->count, check, dup);
  if (rc != 0) {
    free(slots);
    return rc;
  }
  *out = slots;
  return 0;
}

int64_t
dbuf__strmap_check_bytes(int64_t count)
{
  int64_t twice, nslots;
  if (count < 0 || count > MAX_KEYS || dbuf__mul(count, 2, &twice) != 0 ||
      grown(0, twice, 32, &nslots) != 0)
    return -1;
  return nslots * (int64_t)sizeof(uint32_t); /* nslots <= 2^33 */
}

int
dbuf__strmap_check_begin(dbuf__strmap_check_t *c, int64_t count)
{
  int64_t bytes = dbuf__strmap_check_bytes(count);
  memset(c, 0, sizeof *c);
  if (bytes < 0)
    return DBUF_EOVERFLOW;
  c->nslots = bytes / (int64_t)sizeof *c->slots;
  if ((c->slots = dbuf__calloc(c->nslots, sizeof *c->slots)) == NULL)
    return DBUF_ENOMEM;
  c->count = count;
  return 0;
}

void
dbuf__strmap_check_to(const dbuf__strmap_t *m, dbuf__strmap_check_t *c, int64_t upto)
{
  int64_t dup[2];
  if (c->slots == NULL || c->dup || upto > m->count || upto > c->count || upto <= c->done)
    return;
  if (insert_keys(m, c->slots, c->nslots, c->done, upto, 1, dup) != 0)
    c->dup = 1; /* the whole check, done again, names the pair */
  else
    c->done = upto;
}

void
dbuf__strmap_check_free(dbuf__strmap_check_t *c)
{
  free(c->slots);
  memset(c, 0, sizeof *c);
}

/* Room for count + n keys: entry arrays and a table at most half full.
 * exact: the id array gets exactly count + n entries when it grows (a
 * reservation of a known count), else it doubles (one add at a time). */
static int
room(dbuf__strmap_t *m, int64_t n, int exact, int index)
{
  int64_t need, twice, cap, nslots;
  int rc;
  if (n < 0)
    return DBUF_EINVAL;
  if ((rc = dbuf__add(m->count, n, &need)) != 0 ||
      (rc = dbuf__mul(need, 2, &twice)) != 0)
    return rc;
  if (need > MAX_KEYS)
    return DBUF_EOVERFLOW; /* the table would pass 2^32 slots */
  if (need > m->cap) {
    if (exact)
      cap = need;
    else if ((rc = grown(m->cap, need, 16, &cap)) != 0)
      return rc;
    if (m->off64 != NULL) {
      int64_t *off = dbuf__reallocn(m->off64, cap, sizeof *off);
      if (off == NULL)
        return DBUF_ENOMEM;
      m->off64 = off;
    } else {
      uint32_t *off = dbuf__reallocn(m->off32, cap, sizeof *off);
      if (off == NULL)
        return DBUF_ENOMEM;
      m->off32 = off;
    }
    m->cap = cap;
  }
  if (index && twice > m->nslots) {
    if ((rc = grown(m->nslots, twice, 32, &nslots)) != 0)
      return rc;
    uint32_t *slots;
    if ((rc = fill_index(m, nslots, 0, &slots, NULL)) != 0)
      return rc;
    free(m->slots);
    m->slots = slots;
    m->nslots = nslots;
  }
  return 0;
}

int
dbuf__strmap_index_build(const dbuf__strmap_t *m, uint32_t **slots, int64_t *nslots)
{
  int64_t twice, n;
  int rc;
  if ((rc = dbuf__mul(m->count, 2, &twice)) != 0 || (rc = grown(0, twice, 32, &n)) != 0 ||
      (rc = fill_index(m, n, 0, slots, NULL)) != 0)
    return rc;
  *nslots = n;
  return 0;
}

int
dbuf__strmap_index_check(dbuf__strmap_t *m, int64_t dup[2])
{
  int64_t twice, n;
  uint32_t *slots;
  int rc;
  if (m->nslots > 0)
    return 0;
  if ((rc = dbuf__mul(m->count, 2, &twice)) != 0 || (rc = grown(0, twice, 32, &n)) != 0 ||
      (rc = fill_index(m, n, 1, &slots, dup)) != 0)
    return rc;
  m->slots = slots;
  m->nslots = n;
  return 0;
}

void
dbuf__strmap_index_drop(dbuf__strmap_t *m)
{
  free(m->slots);
  m->slots = NULL;
  m->nslots = 0;
}

int
dbuf__strmap_reserve(dbuf__strmap_t *m, int64_t n)
{
  return room(m, n, 1, 1);
}

int
dbuf__strmap_reserve_bytes(dbuf__strmap_t *m, int64_t bytes)
{
  int64_t need;
  if (bytes < 0)
    return DBUF_EINVAL;
  if (dbuf__add(m->keys_len, bytes, &need) != 0)
    return DBUF_EOVERFLOW;
  if (need <= m->keys_cap)
    return 0;
  char *keys = dbuf__reallocn(m->keys, need, 1);
  if (keys == NULL)
    return DBUF_ENOMEM;
  m->keys = keys;
  m->keys_cap = need;
  return 0;
}

int
dbuf__strmap_reserve_keys(dbuf__strmap_t *m, int64_t n)
{
  return room(m, n, 1, m->nslots > 0);
}

uint64_t
dbuf__strmap_hash(const char *key, size_t len)
{
  return key_hash(key, len);
}

void
dbuf__strmap_prefetch(const dbuf__strmap_t *m, uint64_t hash)
{
  if (m->nslots > 0)
    __builtin_prefetch(&m->slots[hash & ((uint64_t)m->nslots - 1)]);
}

int
dbuf__strmap_lookup(const dbuf__strmap_t *m, const char *key,
                    dbuf__strmap_pos_t *pos, int64_t *id)
{
  size_t len = strlen(key);
  return dbuf__strmap_lookup_hashed(m, key, len, key_hash(key, len), pos, id);
}

int
dbuf__strmap_lookup_hashed(const dbuf__strmap_t *m, const char *key, size_t len,
                           uint64_t hash, dbuf__strmap_pos_t *pos, int64_t *id)
{
  pos->len = len;
  pos->hash = hash;
  pos->nslots = m->nslots;
  if (m->nslots == 0)
    return DBUF_ENOTFOUND;
  pos->slot = probe(m, key, pos->hash);
  uint64_t v = m->slots[pos->slot];
  if (v == 0)
    return DBUF_ENOTFOUND;
  *id = (int64_t)(v & ((uint64_t)m->nslots - 1)) - 1;
  return 0;
}

/* Room for a key of len bytes and one more id (an index grows with it
 * when index), then the key copied in as id count.  0, or DBUF_EOVERFLOW,
 * DBUF_ENOMEM with m unchanged (but for capacity). */
static int
push_key(dbuf__strmap_t *m, const char *key, size_t len, int index)
{
  int64_t bytes, need, cap;
  int rc;

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
  if ((rc = room(m, 1, 0, index)) != 0)
    return rc;
  if (m->off64 == NULL && m->keys_len > (int64_t)UINT32_MAX && (rc = widen(m)) != 0)
    return rc;
  memcpy(m->keys + m->keys_len, key, len);
  m->keys[m->keys_len + (int64_t)len] = '\0';
  if (m->off64 != NULL)
    m->off64[m->count] = m->keys_len;
  else
    m->off32[m->count] = (uint32_t)m->keys_len;
  m->keys_len = need;
  return 0;
}

int
dbuf__strmap_insert(dbuf__strmap_t *m, const char *key,
                    const dbuf__strmap_pos_t *pos, int64_t *id)
{
  int64_t nslots = m->nslots;
  int rc = push_key(m, key, pos->len, 1);
  if (rc != 0)
    return rc;
  /* The slot found by the lookup holds unless the table was rebuilt. */
  uint64_t i = m->nslots == pos->nslots && m->nslots == nslots ? pos->slot
                                                              : probe(m, key, pos->hash);
  m->slots[i] = slot_of(pos->hash, m->count, id_bits(m->nslots));
  *id = m->count++;
  return 0;
}

int
dbuf__strmap_append(dbuf__strmap_t *m, const char *key, size_t len, int64_t *id)
{
  if (m->nslots > 0)
    return DBUF_EINVAL;
  int rc = push_key(m, key, len, 0);
  if (rc == 0)
    *id = m->count++;
  return rc;
}

int
dbuf__strmap_add(dbuf__strmap_t *m, const char *key, int64_t *id)
{
  dbuf__strmap_pos_t pos;
  if (dbuf__strmap_lookup(m, key, &pos, id) == 0)
    return DBUF_EDUP;
  return dbuf__strmap_insert(m, key, &pos, id);
}

int
dbuf__strmap_find(const dbuf__strmap_t *m, const char *key, int64_t *id)
{
  dbuf__strmap_pos_t pos;
  return dbuf__strmap_lookup(m, key, &pos, id);
}

const char *
dbuf__strmap_key(const dbuf__strmap_t *m, int64_t id)
{
  return id >= 0 && id < m->count ? m->keys + dbuf__strmap_off(m, id) : NULL;
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
  if (m->off64 != NULL)
    c.off64 = dbuf__memdup(m->off64, m->count, sizeof *c.off64);
  else
    c.off32 = dbuf__memdup(m->off32, m->count, sizeof *c.off32);
  c.keys = dbuf__memdup(m->keys, m->keys_len, 1);
  if (m->nslots > 0) /* an unindexed map copies to an unindexed map */
    c.slots = dbuf__memdup(m->slots, m->nslots, sizeof *c.slots);
  if ((c.off32 == NULL && c.off64 == NULL) || c.keys == NULL ||
      (m->nslots > 0 && c.slots == NULL)) {
    dbuf__strmap_free(&c);
    *out = c;
    return DBUF_ENOMEM;
  }
  *out = c;
  return 0;
}

void
dbuf__strmap_trim(dbuf__strmap_t *m)
{
  if (m->keys_len > 0 && m->keys_len < m->keys_cap) {
    char *k = realloc(m->keys, (size_t)m->keys_len);
    if (k != NULL) {
      m->keys = k;
      m->keys_cap = m->keys_len;
    }
  }
  if (m->count > 0 && m->count < m->cap) {
    void *off = m->off64 != NULL ? (void *)m->off64 : (void *)m->off32;
    size_t w = m->off64 != NULL ? sizeof *m->off64 : sizeof *m->off32;
    if ((off = realloc(off, (size_t)m->count * w)) != NULL) {
      if (m->off64 != NULL)
        m->off64 = off;
      else
        m->off32 = off;
      m->cap = m->count;
    }
  }
}

void
dbuf__strmap_free(dbuf__strmap_t *m)
{
  free(m->off32);
  free(m->off64);
  free(m->keys);
  free(m->slots);
  memset(m, 0, sizeof *m);
}
