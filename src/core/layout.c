/* The layout object: assembly, getters, kind names. */
#include "core_internal.h"
#include "layout_internal.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_names[] = {NULL, "padded", "unpadded", "tensor",
                                         "compact"};

const char *
dbuf_layout_kind_name(int kind)
{
  if (kind >= DBUF_LAYOUT_PADDED && kind <= DBUF_LAYOUT_COMPACT)
    return kind_names[kind];
  return "unknown";
}

int
dbuf_layout_kind_parse(const char *name, dbuf_layout_kind_t *kind)
{
  if (name == NULL || kind == NULL)
    return DBUF_EINVAL;
  for (int k = DBUF_LAYOUT_PADDED; k <= DBUF_LAYOUT_COMPACT; k++) {
    if (strcmp(name, kind_names[k]) == 0) {
      *kind = (dbuf_layout_kind_t)k;
      return 0;
    }
  }
  return DBUF_EINVAL;
}

void
dbuf_layout_params_init(dbuf_layout_params_t *p)
{
  if (p == NULL)
    return;
  memset(p, 0, sizeof *p);
  p->kind = DBUF_LAYOUT_PADDED;
  p->nranks = 1;
  p->block_size = 1;
}

typedef struct {
  int64_t off, id;
} off_id_t;

/* Sort key of an offset: unsigned order is signed order (the offsets of a
 * layout read from a file may be negative until it is validated). */
static inline uint64_t
off_key(int64_t off)
{
  return (uint64_t)off ^ ((uint64_t)1 << 63);
}

#define RADIX_BITS 11
#define RADIX (1 << RADIX_BITS)

/*
 * Sort a[0 .. n) by (off, id): a stable LSD radix sort on the offset, over
 * only the digits in which the offsets differ.  a comes in id order, so
 * stability gives the id order among equal offsets.  tmp has room for n
 * records; returns a or tmp, whichever holds the result.  O(n x digits).
 */
static off_id_t *
sort_off_id(off_id_t *a, off_id_t *tmp, int64_t n, uint64_t diff)
{
  int64_t count[RADIX];
  for (int shift = 0; shift < 64 && (diff >> shift) != 0; shift += RADIX_BITS) {
    memset(count, 0, sizeof count);
    for (int64_t i = 0; i < n; i++)
      count[(off_key(a[i].off) >> shift) & (RADIX - 1)]++;
    for (int64_t d = 0, sum = 0; d < RADIX; d++) {
      int64_t c = count[d];
      count[d] = sum;
      sum += c;
    }
    for (int64_t i = 0; i < n; i++)
      tmp[count[(off_key(a[i].off) >> shift) & (RADIX - 1)]++] = a[i];
    off_id_t *x = a;
    a = tmp;
    tmp = x;
  }
  return a;
}

/* Bits to hold the values 0 .. x. */
static int
bits_of(uint64_t x)
{
  return x == 0 ? 0 : 64 - __builtin_clzll(x);
}

/*
 * The same order when the differing bits of the offsets and the bits of an
 * id fit one 64-bit word together: each word is (those bits of the offset,
 * id), sorted on its offset bits only (stable, so ids stay in order), in
 * order[] and aux[] (n words each), half the bytes of sort_off_id's records.
 * The histograms of every digit come from one pass, into count (zeroed, one
 * row for each digit).
 */
static void
sort_packed(const int64_t *offsets, int64_t n, uint64_t diff, int64_t *order,
            int64_t *aux, int64_t (*count)[RADIX])
{
  int low = __builtin_ctzll(diff), kbits = bits_of(diff >> low);
  int ibits = bits_of((uint64_t)n - 1), ndig = (kbits + RADIX_BITS - 1) / RADIX_BITS;
  uint64_t *a = (uint64_t *)order, *b = (uint64_t *)aux;
  uint64_t kmask = kbits == 64 ? UINT64_MAX : (UINT64_C(1) << kbits) - 1;
  for (int64_t i = 0; i < n; i++) {
    uint64_t k = off_key(offsets[i]) >> low & kmask;
    a[i] = k << ibits | (uint64_t)i;
    for (int d = 0; d < ndig; d++)
      count[d][k >> (d * RADIX_BITS) & (RADIX - 1)]++;
  }
  for (int d = 0; d < ndig; d++) {
    int shift = ibits + d * RADIX_BITS;
    for (int64_t v = 0, sum = 0; v < RADIX; v++) {
      int64_t c = count[d][v];
      count[d][v] = sum;
      sum += c;
    }
    for (int64_t i = 0; i < n; i++)
      b[count[d][a[i] >> shift & (RADIX - 1)]++] = a[i];
    uint64_t *x = a;
    a = b;
    b = x;
  }
  uint64_t imask = ibits == 0 ? 0 : (UINT64_C(1) << ibits) - 1;
  for (int64_t i = 0; i < n; i++)
    order[i] = (int64_t)(a[i] & imask);
}

/*
 * Nearly sorted offsets (the padded builder places most tensors in id order
 * and a few into earlier gaps or at the tail): the ids whose offset is
 * below the running maximum of the ones before them ("late", nlate of them)
 * are sorted alone and merged with the others, whose offsets never go down
 * and whose ids come in order.  O(n + nlate x digits).
 */
static int
sort_nearly(const int64_t *offsets, int64_t n, int64_t nlate, int64_t *order)
{
  int64_t *late = dbuf__mallocn(nlate, sizeof *late), *key = dbuf__mallocn(nlate, sizeof *key);
  int64_t *pos = dbuf__mallocn(nlate, sizeof *pos);
  int rc = late != NULL && key != NULL && pos != NULL ? 0 : DBUF_ENOMEM;
  int64_t k = 0, top = INT64_MIN;
  for (int64_t i = 0; i < n && rc == 0; i++) {
    if (offsets[i] >= top) {
      top = offsets[i];
    } else {
      late[k] = i;
      key[k++] = offsets[i];
    }
  }
  assert(rc != 0 || k == nlate);
  if (rc == 0)
    rc = dbuf__sort_ids(key, nlate, pos); /* ties in id order: late[] is */
  /* The merge, by (offset, id); the in-order ids found again as above. */
  top = INT64_MIN;
  for (int64_t i = 0, j = 0, out = 0; rc == 0 && out < n;) {
    while (i < n && offsets[i] < top) /* a late id */
      i++;
    int64_t lj = j < nlate ? late[pos[j]] : -1;
    if (i < n && (lj < 0 || offsets[i] < offsets[lj] ||
                  (offsets[i] == offsets[lj] && i < lj))) {
      top = offsets[i];
      order[out++] = i++;
    } else {
      order[out++] = lj;
      j++;
    }
  }
  free(late);
  free(key);
  free(pos);
  return rc;
}

/*
 * Few distinct keys (a model's tensor costs repeat with its shapes): each
 * key is counted in a small open-addressing table; with at most FEW_KEYS
 * of them, the distinct keys are sorted and the ids placed by counting, in
 * id order among equal keys: two passes over the keys, O(n + k log k).
 * 0, or 1 when there are more distinct keys (the caller sorts otherwise).
 */
#define FEW_KEYS 1024
#define FEW_SLOTS (2 * FEW_KEYS)

static inline unsigned
few_slot(const int64_t *tab, const unsigned char *used, int64_t key)
{
  unsigned i = (unsigned)(((uint64_t)key * UINT64_C(0x9e3779b97f4a7c15)) >> 53); /* 11 bits */
  while (used[i] && tab[i] != key)
    i = (i + 1) & (FEW_SLOTS - 1);
  return i;
}

static int
cmp_i64(const void *a, const void *b)
{
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

static int
sort_few(const int64_t *keys, int64_t n, int64_t *order)
{
  int64_t tab[FEW_SLOTS], at[FEW_SLOTS], distinct[FEW_KEYS];
  unsigned char used[FEW_SLOTS];
  int k = 0;
  memset(used, 0, sizeof used);
  for (int64_t i = 0; i < n; i++) {
    unsigned j = few_slot(tab, used, keys[i]);
    if (!used[j]) {
      if (k == FEW_KEYS)
        return 1;
      used[j] = 1;
      tab[j] = keys[i];
      at[j] = 0;
      distinct[k++] = keys[i];
    }
    at[j]++;
  }
  qsort(distinct, (size_t)k, sizeof *distinct, cmp_i64);
  for (int64_t d = 0, start = 0; d < k; d++) { /* counts to starts, in key order */
    unsigned j = few_slot(tab, used, distinct[d]);
    int64_t c = at[j];
    at[j] = start;
    start += c;
  }
  for (int64_t i = 0; i < n; i++)
    order[at[few_slot(tab, used, keys[i])]++] = i;
  return 0;
}

int
dbuf__sort_ids(const int64_t *offsets, int64_t n, int64_t *order)
{
  /* Already sorted is the common case (unpadded, one-rank tensor layouts). */
  int sorted = 1;
  uint64_t diff = 0;
  int64_t nlate = 0, top = n > 0 ? offsets[0] : 0;
  for (int64_t i = 1; i < n; i++) {
    sorted &= offsets[i - 1] <= offsets[i];
    diff |= off_key(offsets[i]) ^ off_key(offsets[0]);
    nlate += offsets[i] < top;
    top = offsets[i] > top ? offsets[i] : top;
  }
  if (sorted) {
    for (int64_t i = 0; i < n; i++)
      order[i] = i;
    return 0;
  }
  if (nlate <= n / 16)
    return sort_nearly(offsets, n, nlate, order);
  if (sort_few(offsets, n, order) == 0)
    return 0;
  int kbits = bits_of(diff >> __builtin_ctzll(diff)); /* not sorted: diff != 0 */
  if (kbits + bits_of((uint64_t)n - 1) <= 64) {
    int ndig = (kbits + RADIX_BITS - 1) / RADIX_BITS;
    int64_t *aux = dbuf__mallocn(n, sizeof *aux);
    int64_t(*count)[RADIX] = calloc((size_t)ndig, sizeof *count);
    int ok = aux != NULL && count != NULL;
    if (ok)
      sort_packed(offsets, n, diff, order, aux, count);
    free(aux);
    free(count);
    return ok ? 0 : DBUF_ENOMEM;
  }
  off_id_t *tmp = dbuf__mallocn(n, sizeof *tmp), *aux = dbuf__mallocn(n, sizeof *aux);
  if (tmp == NULL || aux == NULL) {
    free(tmp);
    free(aux);
    return DBUF_ENOMEM;
  }
  for (int64_t i = 0; i < n; i++)
    tmp[i] = (off_id_t){offsets[i], i};
  off_id_t *res = sort_off_id(tmp, aux, n, diff);
  for (int64_t i = 0; i < n; i++)
    order[i] = res[i].id;
  free(tmp);
  free(aux);
  return 0;
}

int
dbuf__order_settle(const int64_t *offsets, int64_t n, int64_t *order)
{
  for (int64_t k = 1; k < n; k++)
    if (offsets[order[k - 1]] > offsets[order[k]])
      return 1;
  /* Runs of one offset (empty tensors beside the tensor that starts where
   * they sit) to id order; a run in order already is left as it is. */
  for (int64_t k = 0; k < n;) {
    int64_t e = k + 1, sorted = 1;
    while (e < n && offsets[order[e]] == offsets[order[k]]) {
      sorted &= order[e - 1] < order[e];
      e++;
    }
    if (!sorted)
      qsort(order + k, (size_t)(e - k), sizeof *order, cmp_i64);
    k = e;
  }
  return 0;
}

int
dbuf__layout_assemble(const dbuf_tensors_t *tensors, dbuf_layout_kind_t kind,
                      int nranks, int64_t block_size, int64_t chunk_size,
                      int64_t size, int64_t *offsets, int64_t *range,
                      int *owners, dbuf_layout_t **out)
{
  return dbuf__layout_assemble_ordered(tensors, kind, nranks, block_size, chunk_size,
                                       size, offsets, range, owners, NULL, out);
}

int
dbuf__layout_assemble_ordered(const dbuf_tensors_t *tensors, dbuf_layout_kind_t kind,
                              int nranks, int64_t block_size, int64_t chunk_size,
                              int64_t size, int64_t *offsets, int64_t *range,
                              int *owners, int64_t *order, dbuf_layout_t **out)
{
  int rc = DBUF_ENOMEM;
  int64_t n = dbuf_tensors_count(tensors);
  dbuf_layout_t *l = calloc(1, sizeof *l);

  if (l == NULL)
    goto fail;
  l->kind = kind;
  l->nranks = nranks;
  l->block_size = block_size;
  l->chunk_size = dbuf__layout_chunked(kind) ? chunk_size : 0; /* as a decoder keeps it */
  l->size = size;
  l->n = n;
  l->offsets = offsets;
  l->range = range;
  l->owners = owners;
  offsets = NULL;
  range = NULL;
  owners = NULL;
  if ((rc = dbuf_tensors_dup(tensors, &l->tensors)) != 0)
    goto fail;
  /* Offsets that rise with the ids need no order array (8 bytes a tensor
   * written, and faulted in, for nothing): dbuf__layout_at(). */
  int sorted = 1;
  for (int64_t i = 1; i < n && sorted; i++)
    sorted = l->offsets[i - 1] <= l->offsets[i];
  /* The builder's order once checked, else the offsets sorted (into the
   * builder's array when it has one). */
  if (!sorted && (order == NULL || dbuf__order_settle(l->offsets, n, order) != 0)) {
    rc = DBUF_ENOMEM;
    if ((order == NULL && (order = dbuf__mallocn(n, sizeof *order)) == NULL) ||
        (rc = dbuf__sort_ids(l->offsets, n, order)) != 0)
      goto fail;
  }
  if (!sorted) {
    l->order = order;
    order = NULL;
  }
  free(order);
  l->sane = l->range[0] == 0 && l->range[nranks] == size;
  for (int r = 0; r < nranks && l->sane; r++)
    l->sane = l->range[r] <= l->range[r + 1];
  /* Every tensor inside [0, size): its element count from its shape's,
   * read once a distinct shape (dbuf__layout_in_buffer() a tensor). */
  int64_t ns = dbuf__tensors_nshapes(l->tensors);
  int64_t *numel = l->sane && ns < n ? dbuf__mallocn(ns, sizeof *numel) : NULL;
  const uint32_t *sid = dbuf__tensors_shape_ids(l->tensors);
  for (int64_t s = 0; numel != NULL && s < ns; s++)
    numel[s] = dbuf__tensors_shape_numel(l->tensors, s);
  for (int64_t i = 0; i < n && l->sane; i++) {
    int64_t k = numel != NULL ? numel[sid[i]] : dbuf_tensors_numel(l->tensors, i);
    l->sane = dbuf__in_buffer(l->offsets[i], k, size);
  }
  free(numel);
  *out = l;
  return 0;
fail:
  free(offsets);
  free(range);
  free(owners);
  free(order);
  dbuf_layout_destroy(l);
  return rc;
}

int
dbuf_layout_check_owner(const dbuf_tensors_t *t, int64_t tensor, int64_t owner,
                        int nranks, dbuf_diag_t *diag)
{
  if (t == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "NULL argument");
  if (tensor < 0 || tensor >= dbuf_tensors_count(t))
    return dbuf__diag(diag, DBUF_ERANGE, "tensor id %lld out of range [0, %lld)",
                      (long long)tensor, (long long)dbuf_tensors_count(t));
  if (nranks < 1)
    return dbuf__diag(diag, DBUF_ENRANKS, "dp size must be positive, got %d", nranks);
  if (owner < 0 || owner >= nranks)
    return dbuf__diag(diag, DBUF_EOWNER, "tensor %s: owner %lld out of range [0, %d)",
                      dbuf_tensors_name(t, tensor), (long long)owner, nranks);
  return 0;
}

int
dbuf__layout_check_owners(const dbuf_tensors_t *t, const int *owners, int nranks,
                          dbuf_diag_t *diag)
{
  int64_t n = dbuf_tensors_count(t);
  for (int64_t i = 0; i < n; i++)
    if (owners[i] < 0 || owners[i] >= nranks) /* (nranks < 1: the first) */
      return dbuf_layout_check_owner(t, i, owners[i], nranks, diag);
  return 0;
}

/* The parts' scalars: 0 or the code, diag filled. */
static int
check_scalars(dbuf_layout_kind_t kind, int nranks, int64_t block_size, int64_t size,
              dbuf_diag_t *diag)
{
  if (kind < DBUF_LAYOUT_PADDED || kind > DBUF_LAYOUT_COMPACT)
    return dbuf__diag(diag, DBUF_EINVAL, "unknown layout kind %d", (int)kind);
  if (nranks < 1)
    return dbuf__diag(diag, DBUF_ENRANKS, "dp size must be positive, got %d", nranks);
  if (block_size < 1)
    return dbuf__diag(diag, DBUF_EINVAL, "block size must be positive, got %lld",
                      (long long)block_size);
  if (size < 0)
    return dbuf__diag(diag, DBUF_ELAYOUT, "size is negative (%lld)", (long long)size);
  return 0;
}

int
dbuf__layout_from_owned(const dbuf_tensors_t *tensors, dbuf_layout_kind_t kind, int nranks,
                        int64_t block_size, int64_t chunk_size, int64_t size, int64_t *offsets,
                        int64_t *range, int *owners, dbuf_layout_t **out, dbuf_diag_t *diag)
{
  int64_t n = dbuf_tensors_count(tensors);
  int rc = check_scalars(kind, nranks, block_size, size, diag);
  if (rc == 0 && range[0] != 0)
    rc = dbuf__diag(diag, DBUF_ELAYOUT, "rank 0: segment starts at %lld, not 0",
                    (long long)range[0]);
  else if (rc == 0 && (chunk_size < 0 || (dbuf__layout_chunked(kind) && chunk_size < 1)))
    rc = dbuf__diag(diag, DBUF_ELAYOUT, "chunk size %lld is not positive",
                    (long long)chunk_size);
  /* The validator works in blocks of block_size rows: a block of a tensor
   * must have an element count (a block of an empty tensor included); a
   * block of one row has its row's. */
  for (int64_t i = 0; i < n && rc == 0 && block_size > 1; i++) {
    int64_t align;
    if (dbuf__mul(block_size, dbuf_tensors_row_elems(tensors, i), &align))
      rc = dbuf__diag(diag, DBUF_EOVERFLOW,
                      "tensor %s: block size %lld x row size %lld overflows 64 bits",
                      dbuf_tensors_name(tensors, i), (long long)block_size,
                      (long long)dbuf_tensors_row_elems(tensors, i));
  }
  if (rc == 0 && owners != NULL)
    rc = dbuf__layout_check_owners(tensors, owners, nranks, diag);
  if (rc != 0) {
    free(offsets);
    free(range);
    free(owners);
    return rc;
  }
  range[nranks] = size;
  rc = dbuf__layout_assemble(tensors, kind, nranks, block_size,
                             dbuf__layout_chunked(kind) ? chunk_size : 0, size, offsets, range,
                             owners, out);
  if (rc != 0)
    return dbuf__diag(diag, rc, "layout: %s", dbuf_strerror(rc));
  return 0;
}

int
dbuf_layout_from_parts(const dbuf_tensors_t *tensors, dbuf_layout_kind_t kind,
                       int nranks, int64_t block_size, int64_t chunk_size,
                       int64_t size, const int64_t *offsets,
                       const int64_t *rank_offsets, const int *owners,
                       dbuf_layout_t **out, dbuf_diag_t *diag)
{
  int64_t n = dbuf_tensors_count(tensors);
  if (tensors == NULL || out == NULL || rank_offsets == NULL ||
      (n > 0 && offsets == NULL))
    return dbuf__diag(diag, DBUF_EINVAL, "NULL argument");
  /* refused before the copies: a bad nranks must not size them */
  int rc = check_scalars(kind, nranks, block_size, size, diag);
  if (rc != 0)
    return rc;
  int64_t *off = dbuf__mallocn(n, sizeof *off);
  int64_t *range = dbuf__mallocn((int64_t)nranks + 1, sizeof *range);
  int *own = owners ? dbuf__mallocn(n, sizeof *own) : NULL;
  if (off == NULL || range == NULL || (owners && own == NULL)) {
    free(off);
    free(range);
    free(own);
    return dbuf__diag(diag, DBUF_ENOMEM, "out of memory for %lld tensors",
                      (long long)n);
  }
  if (n > 0)
    memcpy(off, offsets, (size_t)n * sizeof *off);
  memcpy(range, rank_offsets, (size_t)nranks * sizeof *range);
  if (own)
    memcpy(own, owners, (size_t)n * sizeof *own);
  return dbuf__layout_from_owned(tensors, kind, nranks, block_size, chunk_size, size, off,
                                 range, own, out, diag);
}

int
dbuf__layout_sane(const dbuf_layout_t *l)
{
  return l != NULL && l->sane;
}

int64_t
dbuf_layout_order_lower(const dbuf_layout_t *l, int64_t x)
{
  int64_t lo = 0, hi = l ? l->n : 0;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (l->offsets[dbuf__layout_at(l, mid)] < x)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

int64_t
dbuf__layout_last_before(const dbuf_layout_t *l, int64_t x, int64_t *lower)
{
  int64_t lo = dbuf_layout_order_lower(l, x);
  if (lower != NULL)
    *lower = lo;
  for (int64_t p = lo - 1; p >= 0; p--) {
    if (dbuf_tensors_numel(l->tensors, dbuf__layout_at(l, p)) > 0)
      return p;
  }
  return -1;
}

void
dbuf_layout_destroy(dbuf_layout_t *l)
{
  if (l == NULL)
    return;
  dbuf_tensors_destroy(l->tensors);
  free(l->offsets);
  free(l->range);
  free(l->owners);
  free(l->order);
  free(atomic_load(&l->ident));
  free(l);
}

dbuf_layout_kind_t
dbuf_layout_kind(const dbuf_layout_t *l)
{
  return l ? l->kind : (dbuf_layout_kind_t)0;
}

int
dbuf_layout_nranks(const dbuf_layout_t *l)
{
  return l ? l->nranks : 0;
}

int64_t
dbuf_layout_block_size(const dbuf_layout_t *l)
{
  return l ? l->block_size : 0;
}

int64_t
dbuf_layout_chunk_size(const dbuf_layout_t *l)
{
  return l ? l->chunk_size : 0;
}

int64_t
dbuf_layout_size(const dbuf_layout_t *l)
{
  return l ? l->size : 0;
}

int64_t
dbuf_layout_ntensors(const dbuf_layout_t *l)
{
  return l ? l->n : 0;
}

const dbuf_tensors_t *
dbuf_layout_tensors(const dbuf_layout_t *l)
{
  return l ? l->tensors : NULL;
}

const int64_t *
dbuf_layout_offsets(const dbuf_layout_t *l)
{
  return l ? l->offsets : NULL;
}

const int64_t *
dbuf_layout_range(const dbuf_layout_t *l)
{
  return l ? l->range : NULL;
}

const int *
dbuf_layout_owners(const dbuf_layout_t *l)
{
  return l ? l->owners : NULL;
}

const int64_t *
dbuf__layout_order_or_null(const dbuf_layout_t *l)
{
  return l->order;
}

const int64_t *
dbuf_layout_order(const dbuf_layout_t *l)
{
  if (l == NULL || l->order != NULL)
    return l ? l->order : NULL;
  /* The identity, made once; readers that share the layout race to
   * publish it, the losers free theirs. */
  int64_t *id = atomic_load(&l->ident);
  if (id != NULL)
    return id;
  if ((id = dbuf__mallocn(l->n, sizeof *id)) == NULL)
    return NULL;
  for (int64_t i = 0; i < l->n; i++)
    id[i] = i;
  int64_t *none = NULL;
  dbuf_layout_t *w = (dbuf_layout_t *)l; /* a cache, not a change */
  if (!atomic_compare_exchange_strong(&w->ident, &none, id)) {
    free(id);
    id = none;
  }
  return id;
}
