/*
 * The core's one string map and its hash (internal).
 *
 * A map from strings to dense ids: the first key added gets id 0, the next
 * id 1, and so on, so a caller that numbers its own records in the same
 * order (tensors, safetensors records, SVG classes) uses the id as its
 * index.  The map keeps its own copy of every key.  Open addressing with
 * linear probing, at most half full; a 32-bit slot packs id + 1 in its low
 * log2(nslots) bits with high bits of the key's hash (XXH3) above them, so a
 * slot costs 4 bytes and a map holds at most 2^31 - 1 keys (DBUF_EOVERFLOW
 * past that).  Every count is 64-bit and every growth is overflow-checked.  A zeroed map (DBUF__STRMAP_INIT) is an empty map.
 * Not thread safe for writers; readers of an unchanging map may share it.
 */
#ifndef DBUF_STRMAP_H
#define DBUF_STRMAP_H

#include <stddef.h>
#include <stdint.h>

/* FNV-1a, 64-bit: start at DBUF__FNV_OFFSET, feed bytes, chain the result. */
#define DBUF__FNV_OFFSET UINT64_C(14695981039346656037)
uint64_t dbuf__fnv1a(uint64_t h, const void *data, size_t len);

typedef struct dbuf__strmap {
  int64_t count;     /* keys held: ids 0 .. count-1 */
  int64_t cap;       /* room in off32 or off64 */
  uint32_t *off32;   /* [cap] offset of each key in keys, while they fit */
  int64_t *off64;    /* [cap] the same once keys pass 4 GiB (off32 NULL) */
  char *keys;        /* the keys, each NUL-terminated, back to back */
  int64_t keys_len, keys_cap;
  uint32_t *slots;   /* [nslots] 0 = empty, else hash tag | (id + 1) */
  int64_t nslots;    /* 0 or a power of two >= 2 * count, at most 2^32 */
} dbuf__strmap_t;

#define DBUF__STRMAP_INIT {0, 0, NULL, NULL, NULL, 0, 0, NULL, 0}

/* Where the key of id (in range) starts in m->keys, and its length: the
 * keys lie back to back in id order, each NUL-ended. */
static inline int64_t
dbuf__strmap_off(const dbuf__strmap_t *m, int64_t id)
{
  return m->off64 != NULL ? m->off64[id] : (int64_t)m->off32[id];
}

static inline size_t
dbuf__strmap_len(const dbuf__strmap_t *m, int64_t id)
{
  int64_t end = id + 1 < m->count ? dbuf__strmap_off(m, id + 1) : m->keys_len;
  return (size_t)(end - dbuf__strmap_off(m, id) - 1);
}

/* Where a lookup left off: the key's length and hash, and its slot in a
 * table of nslots slots (found, or the empty one where it would go). */
typedef struct dbuf__strmap_pos {
  size_t len;
  uint64_t hash;
  uint64_t slot;
  int64_t nslots;
} dbuf__strmap_pos_t;

/* Make room for n more keys (their bytes are allocated as they come), so
 * that many adds allocate no slots; the id array is sized to exactly count
 * + n (no doubling slack).  0, DBUF_EOVERFLOW or DBUF_ENOMEM. */
int dbuf__strmap_reserve(dbuf__strmap_t *m, int64_t n);

/* Add key: 0 and *id = the new id (the old count), or DBUF_EDUP and *id =
 * the id key already has; DBUF_EOVERFLOW or DBUF_ENOMEM leave m unchanged. */
int dbuf__strmap_add(dbuf__strmap_t *m, const char *key, int64_t *id);

/* dbuf__strmap_find() that also fills *pos for a dbuf__strmap_insert() of
 * the same key (one hash and one probe per new key). */
int dbuf__strmap_lookup(const dbuf__strmap_t *m, const char *key,
                        dbuf__strmap_pos_t *pos, int64_t *id);

/* The hash a map keys by (XXH3), a prefetch of the slot a key of that hash
 * probes first, and dbuf__strmap_lookup() with the key's length and hash
 * given: a caller that knows its next keys hashes them ahead and prefetches
 * their slots, so that the random reads of a large table overlap. */
uint64_t dbuf__strmap_hash(const char *key, size_t len);
void dbuf__strmap_prefetch(const dbuf__strmap_t *m, uint64_t hash);
int dbuf__strmap_lookup_hashed(const dbuf__strmap_t *m, const char *key, size_t len,
                               uint64_t hash, dbuf__strmap_pos_t *pos, int64_t *id);

/* Add key, which the lookup that filled pos did not find, with no add in
 * between: as dbuf__strmap_add(), without its duplicate check. */
int dbuf__strmap_insert(dbuf__strmap_t *m, const char *key,
                        const dbuf__strmap_pos_t *pos, int64_t *id);

/* 0 and *id, or DBUF_ENOTFOUND. */
int dbuf__strmap_find(const dbuf__strmap_t *m, const char *key, int64_t *id);

/* Key of id (borrowed, valid until the next add or free), or NULL. */
const char *dbuf__strmap_key(const dbuf__strmap_t *m, int64_t id);

/* A deep copy into *out (overwritten): 0 or DBUF_ENOMEM (out zeroed). */
int dbuf__strmap_copy(const dbuf__strmap_t *m, dbuf__strmap_t *out);

/* Give back the unused capacity of the key arrays (growth doubles it);
 * the map is unchanged, a failed shrink leaves it as it was. */
void dbuf__strmap_trim(dbuf__strmap_t *m);

/* Unindexed maps.  An owner whose keys are proven distinct may drop the
 * index (4 bytes a slot, 2 to 4 slots a key) of a map it only reads by id,
 * and build it again when it first looks a key up.  An unindexed map
 * (count > 0, nslots 0) answers DBUF_ENOTFOUND to every lookup: its owner
 * must build an index before it looks up or adds (the next add or reserve
 * rebuilds one itself, trusting that the keys are distinct). */
void dbuf__strmap_index_drop(dbuf__strmap_t *m);

/* A fresh index of m's keys (distinct) into *slots (malloc'd, *nslots of
 * them, the size the next add would give), m unchanged: a reader that
 * shares m puts it in a view (a copy of m with these slots) to look up.
 * 0, or DBUF_EOVERFLOW, DBUF_ENOMEM. */
int dbuf__strmap_index_build(const dbuf__strmap_t *m, uint32_t **slots, int64_t *nslots);

/* Building a large map in bulk: reserve room for n more keys without
 * slots (dbuf__strmap_reserve_keys; an indexed map gets slots as with
 * dbuf__strmap_reserve), append the keys of len bytes to the unindexed map
 * without a duplicate check (dbuf__strmap_append: DBUF_EINVAL on an indexed
 * map), then index them all in one prefetched pass that finds duplicates
 * (dbuf__strmap_index_check: 0 and the map indexed, or DBUF_EDUP with dup[0]
 * the first id of the key and dup[1] the first id repeating it, the map
 * left unindexed; a no-op on an indexed map). */
int dbuf__strmap_reserve_keys(dbuf__strmap_t *m, int64_t n);
/* Room for bytes more key bytes (each key's NUL included), so that the
 * keys are not copied as their block grows: a reader that knows an upper
 * bound (its input's size) reserves it and trims the rest at the end (the
 * pages never written cost no memory).  0, DBUF_EOVERFLOW, DBUF_ENOMEM. */
int dbuf__strmap_reserve_bytes(dbuf__strmap_t *m, int64_t bytes);
int dbuf__strmap_append(dbuf__strmap_t *m, const char *key, size_t len, int64_t *id);
int dbuf__strmap_index_check(dbuf__strmap_t *m, int64_t dup[2]);

/* The duplicate check of dbuf__strmap_index_check() done as the keys come,
 * for a map that will hold count keys: after dbuf__strmap_check_begin()
 * (0, DBUF_EOVERFLOW, DBUF_ENOMEM), dbuf__strmap_check_to() checks the keys
 * below upto not checked yet against every one before them (a table of
 * its own, the map unchanged); c->done keys are proven distinct, or c->dup
 * is set, the check stopped at the first repeated key. */
typedef struct {
  uint32_t *slots;
  int64_t nslots, count, done;
  int dup;
} dbuf__strmap_check_t;
int dbuf__strmap_check_begin(dbuf__strmap_check_t *c, int64_t count);
void dbuf__strmap_check_to(const dbuf__strmap_t *m, dbuf__strmap_check_t *c, int64_t upto);
void dbuf__strmap_check_free(dbuf__strmap_check_t *c);
/* The bytes of the table dbuf__strmap_check_begin() allocates for count
 * keys, or -1 (as it fails). */
int64_t dbuf__strmap_check_bytes(int64_t count);

/* Release the memory and leave an empty map. */
void dbuf__strmap_free(dbuf__strmap_t *m);

#endif /* DBUF_STRMAP_H */
