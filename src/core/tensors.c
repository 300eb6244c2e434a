/* The tensor list, lean: per tensor a 32-bit index into a table of the
 * distinct shapes and a dtype byte, and the name in a string map whose ids
 * are the tensor ids (names back to back in one block, a 4-byte index
 * slot).  Most lists hold few distinct shapes (a model repeats its layers),
 * so dims, row sizes and element counts are kept once per shape, found
 * through a small hash of the dims.  A copy (dbuf_tensors_dup) shares the
 * arrays of its source until one of the two is changed: every change goes
 * through unshare() first, which gives the changed list arrays of its own. */
#include "dbuf/tensors.h"
#include "core_internal.h"
#include "strmap.h"

#include <assert.h>
#include <stdatomic.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <xxhash.h>

/* One distinct shape: its dims at dims[at .. at + ndim). */
typedef struct shape {
  int64_t at;
  int64_t row_elems; /* product of dims[1..], 1 for 1-D (overflow-checked) */
  int64_t numel;     /* dims[0] * row_elems (checked at the add) */
  int ndim;
} shape_t;

/* Shape ids are 32-bit: a list holds at most UINT32_MAX distinct shapes. */
#define MAX_SHAPES ((int64_t)UINT32_MAX)

/* What the lists sharing one set of arrays share besides them: their count,
 * and the name index a reader built for an unindexed list (see
 * dbuf__tensors_index_drop): published once by compare-and-swap, so that
 * const lookups from several threads build it at most once each and agree
 * on one copy. */
typedef struct shared {
  atomic_int_fast64_t refs;
  uint32_t *_Atomic index;           /* NULL, or index_nslots slots */
  atomic_int_fast64_t index_nslots;  /* stored before index, by every builder alike */
} shared_t;

struct dbuf_tensors {
  int64_t n, cap;
  uint32_t *shape;    /* [cap] index into shapes */
  uint8_t *dtype;     /* [cap] dbuf_dtype_t, DBUF_DTYPE_NONE when not given */
  shape_t *shapes;    /* [shapes_cap] the distinct shapes, in order of first use */
  int64_t nshapes, shapes_cap;
  uint32_t *shape_slots; /* [shape_nslots] 0 = empty, else shape id + 1 */
  int64_t shape_nslots;  /* 0 or a power of two >= 2 * nshapes */
  int64_t *dims;      /* [dims_cap] the dims of every distinct shape */
  int64_t ndims, dims_cap;
  dbuf__strmap_t names; /* name -> id; names.count == n */
  int64_t total;
  shared_t *sh;        /* the count of lists sharing these arrays */
};

/* Large arrays (a million tensors make arrays of megabytes) are advised
 * transparent huge pages before their first touch: one fault clears 2 MiB
 * where 4 KiB pages take 512 faults, which cost more than the work of the
 * planner on them.  Only advice: it may fail or be ignored. */
#define HUGE_ARRAY ((size_t)4 << 20)

void
dbuf__advise_huge(void *p, size_t len)
{
#ifdef MADV_HUGEPAGE
  const uintptr_t huge = (uintptr_t)2 << 20;
  uintptr_t a = ((uintptr_t)p + huge - 1) & ~(huge - 1), e = (uintptr_t)p + len;
  if (p != NULL && len >= 2 * huge && e > a + huge)
    (void)madvise((void *)a, (e - a) & ~(huge - 1), MADV_HUGEPAGE);
#else
  (void)p;
  (void)len;
#endif
}

static void *
advised(void *p, size_t len)
{
  if (len >= HUGE_ARRAY)
    dbuf__advise_huge(p, len);
  return p;
}

/* The calling thread's warm blocks (dbuf__warm_add()): zeroed, faulted in
 * up to lo bytes, taken by an allocation of lo to hi bytes. */
typedef struct {
  void *p;
  size_t lo, hi;
} warm_t;

static _Thread_local warm_t warm[DBUF__WARM_BLOCKS];
static _Thread_local int nwarm;
static _Thread_local int64_t warm_made, warm_taken;

/* A warm block for an allocation of len bytes, or NULL: one of exactly that
 * size first, else the smallest whose range holds it. */
static void *
warm_take(size_t len)
{
  int best = -1;
  for (int i = 0; i < nwarm; i++) {
    if (len < warm[i].lo || len > warm[i].hi)
      continue;
    if (best < 0 || warm[i].lo == warm[i].hi || warm[i].hi < warm[best].hi)
      best = i;
    if (warm[best].lo == warm[best].hi)
      break;
  }
  if (best < 0)
    return NULL;
  void *p = warm[best].p;
  warm[best] = warm[--nwarm];
  warm_taken++;
  return p;
}

int
dbuf__warm_add(int64_t lo, int64_t hi)
{
  if (lo < 0 || hi < lo || (uint64_t)hi > SIZE_MAX)
    return DBUF_EINVAL;
  if (nwarm == DBUF__WARM_BLOCKS)
    return DBUF_ENOMEM;
  /* calloc: zeroed (a calloc may take it), and fresh pages untouched, so
   * that the huge-page advice applies before they are faulted in */
  char *p = advised(calloc(hi ? (size_t)hi : 1, 1), (size_t)hi);
  if (p == NULL)
    return DBUF_ENOMEM;
  long ps = sysconf(_SC_PAGESIZE);
  const uintptr_t page = ps > 0 ? (uintptr_t)ps : 4096;
  uintptr_t a = ((uintptr_t)p + page - 1) & ~(page - 1), e = (uintptr_t)p + (size_t)lo;
  int done = e <= a;
#ifdef MADV_POPULATE_WRITE
  if (!done && madvise((void *)a, e - a, MADV_POPULATE_WRITE) == 0)
    done = 1; /* contents kept */
  else if (!done && errno != EINVAL) {
    free(p); /* no memory (or a signal): fail here, not in the OOM killer */
    return DBUF_ENOMEM;
  }
#endif
  for (volatile char *q = (volatile char *)p; !done && q < p + lo; q += page)
    *q = 0; /* a kernel without it: a zero written to each page, still zero */
  warm[nwarm++] = (warm_t){p, (size_t)lo, (size_t)hi};
  warm_made++;
  return 0;
}

void
dbuf__warm_release(void)
{
  while (nwarm > 0)
    free(warm[--nwarm].p);
}

int
dbuf__warm_count(void)
{
  return nwarm;
}

void
dbuf__warm_stats(int64_t *made, int64_t *taken)
{
  *made = warm_made;
  *taken = warm_taken;
}

void *
dbuf__calloc(int64_t n, size_t sz)
{
  if (n < 0 || (uint64_t)n > SIZE_MAX / (sz ? sz : 1))
    return NULL;
  void *w = nwarm > 0 ? warm_take((size_t)n * sz) : NULL;
  if (w != NULL)
    return w; /* zeroed, never written since */
  /* calloc's fresh mapping is untouched: advice still applies */
  return advised(calloc(n ? (size_t)n : 1, sz), (size_t)n * sz);
}

void *
dbuf__mallocn(int64_t n, size_t sz)
{
  if (n < 0 || (uint64_t)n > SIZE_MAX / (sz ? sz : 1))
    return NULL;
  void *w = nwarm > 0 ? warm_take((size_t)n * sz) : NULL;
  return w != NULL ? w : advised(malloc(n ? (size_t)n * sz : 1), (size_t)n * sz);
}

void *
dbuf__reallocn(void *p, int64_t n, size_t sz)
{
  if (n < 0 || (uint64_t)n > SIZE_MAX / (sz ? sz : 1))
    return NULL;
  void *w = p == NULL && nwarm > 0 ? warm_take((size_t)n * sz) : NULL;
  return w != NULL ? w : advised(realloc(p, n ? (size_t)n * sz : 1), (size_t)n * sz);
}

/* Regions are faulted in at least this much at a time (one madvise). */
#define PREFAULT_STEP ((size_t)1 << 20)

static void
prefault_add(dbuf__prefault_t *pf, void *base, size_t len, int per)
{
  if (base != NULL && len > 0 && pf->n < DBUF__PREFAULT_REGIONS) {
    pf->r[pf->n].base = base;
    pf->r[pf->n].len = len;
    pf->r[pf->n].done = 0;
    pf->r[pf->n++].per = per;
  }
}

void
dbuf__tensors_prefault_init(const dbuf_tensors_t *t, dbuf__prefault_t *pf)
{
  const dbuf__strmap_t *m = &t->names;
  memset(pf, 0, sizeof *pf);
  prefault_add(pf, t->shape, (size_t)t->cap * sizeof *t->shape, (int)sizeof *t->shape);
  prefault_add(pf, t->dtype, (size_t)t->cap, 1);
  if (m->off32 != NULL)
    prefault_add(pf, m->off32, (size_t)m->cap * sizeof *m->off32, (int)sizeof *m->off32);
  else
    prefault_add(pf, m->off64, (size_t)m->cap * sizeof *m->off64, (int)sizeof *m->off64);
  prefault_add(pf, m->keys, (size_t)m->keys_cap, 0);
  prefault_add(pf, m->slots, (size_t)m->nslots * sizeof *m->slots, -1);
}

/* Of a region whose pages keys land in at random (the name index, sized
 * for every line of a file that may hold few tensors), the adds of n keys
 * touch nearly every page once there are three keys a page (all but 5%):
 * only then is the whole of it faulted in ahead. */
#define PREFAULT_KEYS_A_PAGE 3

int
dbuf__prefault_to(dbuf__prefault_t *pf, int64_t tensors, int64_t name_bytes, size_t most)
{
  int did = 0;
#ifdef MADV_POPULATE_WRITE
  const uintptr_t page = 4096;
  for (int i = 0; i < pf->n && !pf->off && most > 0; i++) {
    size_t len = pf->r[i].len, done = pf->r[i].done, want; /* bytes soon written */
    int per = pf->r[i].per;
    if (per < 0)
      want = tensors >= 0 && (uint64_t)tensors / PREFAULT_KEYS_A_PAGE >= len / page ? len : 0;
    else if (per == 0)
      want = name_bytes < 0 ? 0 : (size_t)name_bytes;
    else
      want = tensors < 0 || (uint64_t)tensors > SIZE_MAX / (unsigned)per
                 ? len
                 : (size_t)tensors * (unsigned)per;
    want = want < len ? want : len;
    if (want <= done)
      continue; /* also once the whole region is done */
    /* a step past it, so that the next call has room to run ahead */
    want = want > len - PREFAULT_STEP || len < PREFAULT_STEP ? len : want + PREFAULT_STEP;
    want = want - done > most ? done + most : want;
    most -= want - done;
    uintptr_t a = ((uintptr_t)pf->r[i].base + done) & ~(page - 1);
    uintptr_t e = (uintptr_t)pf->r[i].base + want;
    if (madvise((void *)a, e - a, MADV_POPULATE_WRITE) != 0)
      pf->off = 1; /* an old kernel, or no memory: the writer faults */
    pf->r[i].done = want;
    did = 1;
  }
#else
  (void)tensors;
  (void)name_bytes;
  (void)most;
  pf->off = 1;
#endif
  return did;
}

void *
dbuf__memdup(const void *src, int64_t n, size_t sz)
{
  void *p = dbuf__mallocn(n, sz);
  if (p != NULL && n > 0)
    memcpy(p, src, (size_t)n * sz);
  return p;
}

static shared_t *
shared_new(void)
{
  shared_t *sh = malloc(sizeof *sh);
  if (sh != NULL) {
    atomic_init(&sh->refs, 1);
    atomic_init(&sh->index, NULL);
    atomic_init(&sh->index_nslots, 0);
  }
  return sh;
}

int
dbuf_tensors_create(dbuf_tensors_t **out)
{
  if (out == NULL)
    return DBUF_EINVAL;
  dbuf_tensors_t *t = calloc(1, sizeof *t);
  if (t == NULL || (t->sh = shared_new()) == NULL) {
    free(t);
    return DBUF_ENOMEM;
  }
  *out = t;
  return 0;
}

/* Free the arrays of t, unless another list still shares them. */
static void
release_arrays(dbuf_tensors_t *t)
{
  if (atomic_fetch_sub(&t->sh->refs, 1) > 1)
    return;
  free(atomic_load(&t->sh->index));
  free(t->sh);
  free(t->shape);
  free(t->dtype);
  free(t->shapes);
  free(t->shape_slots);
  free(t->dims);
  dbuf__strmap_free(&t->names);
}

void
dbuf_tensors_destroy(dbuf_tensors_t *t)
{
  if (t == NULL)
    return;
  release_arrays(t);
  free(t);
}

/* Arrays of t's own, copied from the ones it shares (if it shares them),
 * before t is changed.  0 or DBUF_ENOMEM (t unchanged). */
static int
unshare(dbuf_tensors_t *t)
{
  /* A changing list is not shared with a thread (see tensors.h): a count
   * of one cannot grow under us. */
  if (atomic_load(&t->sh->refs) == 1)
    return 0;
  dbuf_tensors_t c = *t;
  if ((c.sh = shared_new()) == NULL)
    return DBUF_ENOMEM;
  c.cap = t->n;
  c.shapes_cap = t->nshapes;
  c.dims_cap = t->ndims;
  c.shape = dbuf__memdup(t->shape, t->n, sizeof *c.shape);
  c.dtype = dbuf__memdup(t->dtype, t->n, sizeof *c.dtype);
  c.shapes = dbuf__memdup(t->shapes, t->nshapes, sizeof *c.shapes);
  c.shape_slots = dbuf__memdup(t->shape_slots, t->shape_nslots, sizeof *c.shape_slots);
  c.dims = dbuf__memdup(t->dims, t->ndims, sizeof *c.dims);
  int names_rc = dbuf__strmap_copy(&t->names, &c.names);
  if (c.shape == NULL || c.dtype == NULL || c.shapes == NULL ||
      c.shape_slots == NULL || c.dims == NULL || names_rc != 0) {
    release_arrays(&c);
    return DBUF_ENOMEM;
  }
  release_arrays(t); /* drops t's share: the others keep the arrays */
  *t = c;
  return 0;
}

/* Room for need tensors: exactly need when exact (a reservation of a known
 * count), else doubling (one add at a time). */
static int
grow_arrays(dbuf_tensors_t *t, int64_t need, int exact)
{
  if (need <= t->cap)
    return 0;
  int64_t cap = t->cap ? t->cap : 16;
  if (exact)
    cap = need;
  while (cap < need) {
    if (dbuf__mul(cap, 2, &cap))
      return DBUF_EOVERFLOW;
  }
  uint32_t *a = dbuf__reallocn(t->shape, cap, sizeof *a);
  if (a == NULL)
    return DBUF_ENOMEM;
  t->shape = a;
  uint8_t *d = dbuf__reallocn(t->dtype, cap, sizeof *d);
  if (d == NULL)
    return DBUF_ENOMEM;
  t->dtype = d;
  t->cap = cap;
  return 0;
}

static int
grow_bytes(void **buf, int64_t *cap, int64_t need, size_t elem)
{
  if (need <= *cap)
    return 0;
  int64_t c = *cap ? *cap : 256;
  while (c < need) {
    if (dbuf__mul(c, 2, &c))
      return DBUF_EOVERFLOW;
  }
  void *p = dbuf__reallocn(*buf, c, elem);
  if (p == NULL)
    return DBUF_ENOMEM;
  *buf = p;
  *cap = c;
  return 0;
}

/* The shapes table.  The hash of a shape: its dims, seeded with ndim. */
static uint64_t
shape_hash(const int64_t *dims, int ndim)
{
  return XXH3_64bits_withSeed(dims, (size_t)ndim * sizeof *dims, (uint64_t)ndim);
}

/* The slot of the shape (ndim, dims) in t's table, or of the empty slot
 * where it would go.  The table must have slots. */
static uint64_t
shape_probe(const dbuf_tensors_t *t, const int64_t *dims, int ndim, uint64_t h)
{
  uint64_t mask = (uint64_t)t->shape_nslots - 1;
  for (uint64_t i = h & mask;; i = (i + 1) & mask) {
    uint32_t v = t->shape_slots[i];
    if (v == 0)
      return i;
    const shape_t *s = &t->shapes[v - 1];
    if (s->ndim == ndim &&
        memcmp(t->dims + s->at, dims, (size_t)ndim * sizeof *dims) == 0)
      return i;
  }
}

/* Room for one more shape of ndim dims: entries, dims and a table of slots
 * at most half full (rebuilt, O(nshapes), when it doubles). */
static int
shape_room(dbuf_tensors_t *t, int ndim)
{
  int64_t need = t->nshapes + 1, twice;
  int rc;
  if (need > MAX_SHAPES)
    return DBUF_EOVERFLOW;
  if ((rc = grow_bytes((void **)&t->shapes, &t->shapes_cap, need, sizeof *t->shapes)) != 0 ||
      (rc = grow_bytes((void **)&t->dims, &t->dims_cap, t->ndims + ndim, sizeof *t->dims)) != 0)
    return rc;
  if ((rc = dbuf__mul(need, 2, &twice)) != 0)
    return rc;
  if (twice > t->shape_nslots) {
    int64_t nslots = t->shape_nslots ? t->shape_nslots : 16;
    while (nslots < twice)
      if ((rc = dbuf__mul(nslots, 2, &nslots)) != 0)
        return rc;
    uint32_t *slots = dbuf__calloc(nslots, sizeof *slots);
    if (slots == NULL)
      return DBUF_ENOMEM;
    uint64_t mask = (uint64_t)nslots - 1;
    for (int64_t k = 0; k < t->nshapes; k++) { /* shapes are distinct */
      const shape_t *s = &t->shapes[k];
      uint64_t i = shape_hash(t->dims + s->at, s->ndim) & mask;
      while (slots[i] != 0)
        i = (i + 1) & mask;
      slots[i] = (uint32_t)(k + 1);
    }
    free(t->shape_slots);
    t->shape_slots = slots;
    t->shape_nslots = nslots;
  }
  return 0;
}

/* The id of shape (ndim, dims), added to the table if new (*slot_added:
 * its slot, else UINT64_MAX).  row is the checked product of dims[1..]. */
static int
shape_intern(dbuf_tensors_t *t, const int64_t *dims, int ndim, int64_t row, uint64_t h,
             uint32_t *sid, uint64_t *slot_added)
{
  uint64_t i;
  int rc;
  *slot_added = UINT64_MAX;
  if (t->shape_nslots > 0) {
    i = shape_probe(t, dims, ndim, h);
    if (t->shape_slots[i] != 0) {
      *sid = t->shape_slots[i] - 1;
      return 0;
    }
  }
  if ((rc = shape_room(t, ndim)) != 0)
    return rc;
  i = shape_probe(t, dims, ndim, h); /* the table may have been rebuilt */
  shape_t *s = &t->shapes[t->nshapes];
  s->at = t->ndims;
  s->row_elems = row;
  s->numel = dims[0] * row; /* ndim >= 1, the product checked before */
  s->ndim = ndim;
  memcpy(t->dims + t->ndims, dims, (size_t)ndim * sizeof *dims);
  t->ndims += ndim;
  t->shape_slots[i] = (uint32_t)(t->nshapes + 1);
  *sid = (uint32_t)t->nshapes++;
  *slot_added = i;
  return 0;
}

/* Take back the shape shape_intern() just added (the last one; the last
 * key of a linear-probing table is at the end of its run, so emptying its
 * slot leaves every other probe intact). */
static void
shape_unintern(dbuf_tensors_t *t, uint64_t slot_added)
{
  if (slot_added == UINT64_MAX)
    return;
  t->shape_slots[slot_added] = 0;
  t->nshapes--;
  t->ndims -= t->shapes[t->nshapes].ndim;
}

/* The name index to look up in: t's own, or for an unindexed list the one
 * the first lookup builds (O(n), once: see shared_t).  0 and *view (t's
 * map, with the index), or DBUF_ENOMEM, DBUF_EOVERFLOW. */
static int
names_view(const dbuf_tensors_t *t, dbuf__strmap_t *view)
{
  *view = t->names;
  if (t->names.nslots > 0 || t->n == 0)
    return 0;
  uint32_t *ix = atomic_load(&t->sh->index);
  if (ix == NULL) {
    uint32_t *mine;
    int64_t nslots;
    int rc = dbuf__strmap_index_build(&t->names, &mine, &nslots);
    if (rc != 0)
      return rc;
    atomic_store(&t->sh->index_nslots, nslots); /* the same for every builder */
    if (atomic_compare_exchange_strong(&t->sh->index, &ix, mine))
      ix = mine;
    else
      free(mine); /* another thread was first: ix is its index */
  }
  view->slots = ix;
  view->nslots = atomic_load(&t->sh->index_nslots);
  return 0;
}

/* Before a change of t (not shared: unshare() first): an index of its own,
 * the one a lookup built if there is one. */
static int
own_index(dbuf_tensors_t *t)
{
  dbuf__strmap_t v;
  if (t->names.nslots > 0 || t->n == 0)
    return 0;
  assert(atomic_load(&t->sh->refs) == 1);
  int rc = names_view(t, &v);
  if (rc != 0)
    return rc;
  t->names.slots = v.slots;
  t->names.nslots = v.nslots;
  atomic_store(&t->sh->index, NULL);
  return 0;
}

void
dbuf__tensors_index_drop(dbuf_tensors_t *t)
{
  /* Shared arrays keep their index: the other lists hold its pointer. */
  if (t != NULL && atomic_load(&t->sh->refs) == 1)
    dbuf__strmap_index_drop(&t->names);
}

int
dbuf_tensors_reserve(dbuf_tensors_t *t, int64_t n)
{
  int64_t need;
  if (t == NULL || n < 0)
    return DBUF_EINVAL;
  if (dbuf__add(t->n, n, &need))
    return DBUF_EOVERFLOW;
  int rc = unshare(t);
  if (rc == 0)
    rc = own_index(t);
  if (rc == 0)
    rc = grow_arrays(t, need, 1);
  if (rc == 0)
    rc = dbuf__strmap_reserve(&t->names, n);
  return rc;
}

/* Names are UTF-8 (they are written into JSON, which cannot hold other
 * bytes) without spaces or control characters (dbuf__name_check). */
static int
name_ok(const char *name, size_t len)
{
  return dbuf__name_check(name, len, NULL) == DBUF__NAME_OK;
}

/* The checks of an add that do not depend on the list, in the order of
 * dbuf_tensors_add()'s messages after the duplicate check: *row the
 * checked product of dims[1..], *numel the element count. */
static int
check_dims(const char *name, int ndim, const int64_t *dims, int64_t *row_out,
           int64_t *numel_out, dbuf_diag_t *diag)
{
  int64_t numel = 1, row = 1;
  if (ndim < 1)
    return dbuf__diag(diag, DBUF_ESHAPE,
                      "tensor %s: 0-D shape (scalars cannot be sharded by rows)",
                      name);
  if (ndim > DBUF_MAX_DIMS)
    return dbuf__diag(diag, DBUF_ESHAPE, "tensor %s: %d dims (at most %d)", name,
                      ndim, DBUF_MAX_DIMS);
  for (int d = 0; d < ndim; d++) {
    if (dims[d] < 0)
      return dbuf__diag(diag, DBUF_ESHAPE, "tensor %s: dim %d is negative (%lld)",
                        name, d, (long long)dims[d]);
    if (d > 0 && dims[d] == 0)
      return dbuf__diag(diag, DBUF_ESHAPE,
                        "tensor %s: zero-sized non-leading dim %d", name, d);
    if (d > 0 && dbuf__mul(row, dims[d], &row))
      return dbuf__diag(diag, DBUF_EOVERFLOW,
                        "tensor %s: row size overflows 64 bits", name);
  }
  if (dbuf__mul(dims[0], row, &numel))
    return dbuf__diag(diag, DBUF_EOVERFLOW,
                      "tensor %s: element count overflows 64 bits", name);
  *row_out = row;
  *numel_out = numel;
  return 0;
}

/* The list's total with numel more elements, checked. */
static int
check_total(const dbuf_tensors_t *t, const char *name, int64_t numel, int64_t *total,
            dbuf_diag_t *diag)
{
  if (dbuf__add(t->total, numel, total))
    return dbuf__diag(diag, DBUF_EOVERFLOW,
                      "tensor %s: total element count of the list overflows "
                      "64 bits",
                      name);
  return 0;
}

/* check_dims() and check_total(): *row, *total. */
static int
check_shape(const dbuf_tensors_t *t, const char *name, int ndim, const int64_t *dims,
            int64_t *row_out, int64_t *total_out, dbuf_diag_t *diag)
{
  int64_t numel;
  int rc = check_dims(name, ndim, dims, row_out, &numel, diag);
  return rc != 0 ? rc : check_total(t, name, numel, total_out, diag);
}

/* The add of a checked tensor: shape interned, name in (through the
 * lookup's pos, or appended to an unindexed list when pos is NULL).  The
 * name goes in last: a failure before it leaves the list as it was (a
 * shape added for this tensor is taken back). */
static int
add_checked(dbuf_tensors_t *t, const char *name, size_t len, int ndim, const int64_t *dims,
            int64_t row, uint64_t shash, int64_t total, const dbuf__strmap_pos_t *pos,
            dbuf_diag_t *diag)
{
  uint32_t sid;
  uint64_t slot_added = UINT64_MAX;
  int64_t id;
  int rc;
  if ((rc = unshare(t)) == 0 && (rc = grow_arrays(t, t->n + 1, 0)) == 0 &&
      (rc = shape_intern(t, dims, ndim, row, shash, &sid, &slot_added)) == 0) {
    rc = pos != NULL ? dbuf__strmap_insert(&t->names, name, pos, &id)
                     : dbuf__strmap_append(&t->names, name, len, &id);
    if (rc != 0)
      shape_unintern(t, slot_added);
  }
  if (rc != 0)
    return dbuf__diag(diag, rc, "tensor %s: %s", name, dbuf_strerror(rc));
  assert(id == t->n); /* the map numbers the names as the list does */

  t->shape[id] = sid;
  t->dtype[id] = DBUF_DTYPE_NONE;
  t->total = total;
  t->n++;
  return 0;
}

/* A name the list refuses: the message every add gives for it. */
static int
bad_name(const dbuf_tensors_t *t, const char *name, dbuf_diag_t *diag)
{
  return dbuf__diag(diag, DBUF_EINVAL,
                    "tensor %lld: name '%s' is empty, not UTF-8, or has "
                    "spaces or control characters",
                    (long long)t->n, name);
}

/* The lookup of a name that is about to be added (hash given): 0 and *pos
 * where it goes, or DBUF_EDUP naming the tensor that has it.  An unindexed
 * list (dbuf__tensors_index_drop) gets its index back first. */
static int
lookup_new(dbuf_tensors_t *t, const char *name, size_t len, uint64_t hash,
           dbuf__strmap_pos_t *pos, dbuf_diag_t *diag)
{
  int64_t id;
  int rc;
  if (t->names.nslots == 0 && t->n > 0 && ((rc = unshare(t)) != 0 || (rc = own_index(t)) != 0))
    return dbuf__diag(diag, rc, "tensor %s: %s", name, dbuf_strerror(rc));
  if (dbuf__strmap_lookup_hashed(&t->names, name, len, hash, pos, &id) == 0)
    return dbuf__diag(diag, DBUF_EDUP, "tensor %s: duplicate name (tensor %lld)",
                      name, (long long)id);
  return 0;
}

/* dbuf_tensors_add() with the name's length and hash given. */
static int
add_hashed(dbuf_tensors_t *t, const char *name, size_t len, uint64_t hash, int ndim,
           const int64_t *dims, dbuf_diag_t *diag)
{
  int64_t row, total;
  dbuf__strmap_pos_t pos;
  int rc;

  if (t == NULL || name == NULL || (ndim > 0 && dims == NULL))
    return dbuf__diag(diag, DBUF_EINVAL, "NULL argument");
  if (!name_ok(name, len))
    return bad_name(t, name, diag);
  if ((rc = lookup_new(t, name, len, hash, &pos, diag)) != 0 ||
      (rc = check_shape(t, name, ndim, dims, &row, &total, diag)) != 0)
    return rc;
  return add_checked(t, name, len, ndim, dims, row, shape_hash(dims, ndim), total, &pos, diag);
}

int
dbuf_tensors_add(dbuf_tensors_t *t, const char *name, int ndim,
                 const int64_t *dims, dbuf_diag_t *diag)
{
  size_t len = name != NULL ? strlen(name) : 0;
  return add_hashed(t, name, len, name != NULL ? dbuf__strmap_hash(name, len) : 0, ndim, dims,
                    diag);
}

void
dbuf__tensors_prefetch(const dbuf_tensors_t *t, uint64_t hash)
{
  dbuf__strmap_prefetch(&t->names, hash);
}

void
dbuf__tensors_precheck(const char *name, size_t len, int ndim, const int64_t *dims,
                       dbuf__tensor_pre_t *pre)
{
  pre->name_hash = dbuf__strmap_hash(name, len);
  pre->ok = name_ok(name, len) && check_dims(name, ndim, dims, &pre->row, &pre->numel, NULL) == 0;
  if (pre->ok)
    pre->shape_hash = shape_hash(dims, ndim);
}

int
dbuf__tensors_add_pre(dbuf_tensors_t *t, const char *name, size_t len, int ndim,
                      const int64_t *dims, const dbuf__tensor_pre_t *pre, dbuf_diag_t *diag)
{
  int64_t total;
  dbuf__strmap_pos_t pos;
  int rc;
  if (!pre->ok) /* the add names what is wrong */
    return add_hashed(t, name, len, pre->name_hash, ndim, dims, diag);
  if ((rc = lookup_new(t, name, len, pre->name_hash, &pos, diag)) != 0 ||
      (rc = check_total(t, name, pre->numel, &total, diag)) != 0)
    return rc;
  return add_checked(t, name, len, ndim, dims, pre->row, pre->shape_hash, total, &pos, diag);
}

int
dbuf__tensors_bulk_begin(dbuf_tensors_t *t, int64_t n)
{
  if (t == NULL || n < 0 || t->n != 0)
    return DBUF_EINVAL;
  int rc = unshare(t);
  if (rc == 0)
    rc = grow_arrays(t, n, 1);
  if (rc == 0)
    dbuf__strmap_index_drop(&t->names);
  if (rc == 0)
    rc = dbuf__strmap_reserve_keys(&t->names, n);
  return rc;
}

/* No index of its own, nor one a lookup built and shares: a bulk add
 * would leave the name out of it. */
static int
unindexed(const dbuf_tensors_t *t)
{
  return t->names.nslots == 0 && atomic_load(&t->sh->index) == NULL;
}

/* What every bulk add checks first: arguments, an unindexed list, the name. */
static int
bulk_guard(const dbuf_tensors_t *t, const char *name, size_t len, dbuf_diag_t *diag)
{
  if (t == NULL || name == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "NULL argument");
  if (!unindexed(t))
    return dbuf__diag(diag, DBUF_EINVAL, "tensor %s: a bulk add to an indexed list", name);
  return name_ok(name, len) ? 0 : bad_name(t, name, diag);
}

int
dbuf__tensors_add_bulk(dbuf_tensors_t *t, const char *name, size_t len, int ndim,
                       const int64_t *dims, dbuf_diag_t *diag)
{
  int64_t row, total;
  int rc;
  if (ndim > 0 && dims == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "NULL argument");
  if ((rc = bulk_guard(t, name, len, diag)) != 0 ||
      (rc = check_shape(t, name, ndim, dims, &row, &total, diag)) != 0)
    return rc;
  return add_checked(t, name, len, ndim, dims, row, shape_hash(dims, ndim), total, NULL, diag);
}

int
dbuf__tensors_add_bulk_as(dbuf_tensors_t *t, const char *name, size_t len, int ndim,
                          const int64_t *dims, int64_t *sid, dbuf_diag_t *diag)
{
  int64_t total, id;
  int rc;
  if (sid == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "NULL argument");
  if (*sid < 0 || *sid >= (t != NULL ? t->nshapes : 0)) {
    if ((rc = dbuf__tensors_add_bulk(t, name, len, ndim, dims, diag)) == 0)
      *sid = t->shape[t->n - 1];
    return rc;
  }
  /* the shape was checked when it came first: only the total is new */
  const shape_t *s = &t->shapes[*sid];
  if ((rc = bulk_guard(t, name, len, diag)) != 0 ||
      (rc = check_total(t, name, s->numel, &total, diag)) != 0)
    return rc;
  if ((rc = unshare(t)) != 0 || (rc = grow_arrays(t, t->n + 1, 0)) != 0 ||
      (rc = dbuf__strmap_append(&t->names, name, len, &id)) != 0)
    return dbuf__diag(diag, rc, "tensor %s: %s", name, dbuf_strerror(rc));
  assert(id == t->n);
  t->shape[id] = (uint32_t)*sid;
  t->dtype[id] = DBUF_DTYPE_NONE;
  t->total = total;
  t->n++;
  return 0;
}

int
dbuf__tensors_bulk_end(dbuf_tensors_t *t, int check, dbuf_diag_t *diag)
{
  int64_t dup[2];
  if (t == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "NULL argument");
  if (!check || t->n == 0)
    return 0;
  int rc = dbuf__strmap_index_check(&t->names, dup);
  if (rc == DBUF_EDUP)
    return dbuf__diag(diag, DBUF_EDUP, "tensor %s: duplicate name (tensor %lld)",
                      dbuf__strmap_key(&t->names, dup[1]), (long long)dup[0]);
  if (rc != 0)
    return dbuf__diag(diag, rc, "tensor list of %lld names: %s", (long long)t->n,
                      dbuf_strerror(rc));
  return 0;
}

const char *
dbuf__tensors_last_name(const dbuf_tensors_t *t, size_t *len)
{
  if (t == NULL || t->n == 0) {
    *len = 0;
    return "";
  }
  *len = dbuf__strmap_len(&t->names, t->n - 1);
  return t->names.keys + dbuf__strmap_off(&t->names, t->n - 1);
}

int
dbuf__tensors_add_front(dbuf_tensors_t *t, size_t pre, const char *suf, size_t suflen,
                        int ndim, const int64_t *dims, int64_t *sid, char **scratch,
                        int64_t *scratch_cap, dbuf_diag_t *diag)
{
  size_t plen;
  const char *prev = dbuf__tensors_last_name(t, &plen);
  size_t len = pre + suflen;
  dbuf__strmap_t *m = t != NULL ? &t->names : NULL;
  if (t == NULL || sid == NULL || scratch == NULL || scratch_cap == NULL || pre > plen ||
      len < pre)
    return dbuf__diag(diag, DBUF_EINVAL, "bad argument");
  /* The common case in place: a shape seen before, room reserved in every
   * array (dbuf__tensors_bulk_begin(), dbuf__tensors_reserve_names()), an
   * unindexed list of its own, and a name whose new bytes are printable
   * ASCII after a prefix of the previous (checked) name that ends on a
   * character: then the name is good without reading its prefix again. */
  if (*sid >= 0 && *sid < t->nshapes && t->n < t->cap && m->count < m->cap &&
      m->off32 != NULL && unindexed(t) && len > 0 &&
      (uint64_t)len < (uint64_t)(m->keys_cap - m->keys_len) &&
      (uint64_t)m->keys_len + len + 1 <= UINT32_MAX &&
      (pre == 0 || (unsigned char)prev[pre - 1] < 0x80) &&
      dbuf__ascii_graph((const unsigned char *)suf, suflen) && atomic_load(&t->sh->refs) == 1) {
    char *key = m->keys + m->keys_len; /* prev ends before it: no overlap */
    memcpy(key, prev, pre);
    memcpy(key + pre, suf, suflen);
    key[len] = '\0';
    int64_t total;
    int rc = check_total(t, key, t->shapes[*sid].numel, &total, diag);
    if (rc != 0)
      return rc;
    m->off32[m->count++] = (uint32_t)m->keys_len;
    m->keys_len += (int64_t)len + 1;
    t->shape[t->n] = (uint32_t)*sid;
    t->dtype[t->n] = DBUF_DTYPE_NONE;
    t->total = total;
    t->n++;
    return 0;
  }
  /* Otherwise the name whole in scratch, and the add with every check. */
  if ((int64_t)len + 1 > *scratch_cap) { /* doubling: a few reallocations in all */
    int64_t c = *scratch_cap ? *scratch_cap : 256;
    while (c < (int64_t)len + 1)
      if (dbuf__mul(c, 2, &c) != 0)
        return dbuf__diag(diag, DBUF_EOVERFLOW, "name of %zu bytes", len);
    char *nb = dbuf__reallocn(*scratch, c, 1);
    if (nb == NULL)
      return dbuf__diag(diag, DBUF_ENOMEM, "out of memory");
    *scratch = nb;
    *scratch_cap = c;
  }
  memcpy(*scratch, prev, pre); /* prev is in the name block */
  memcpy(*scratch + pre, suf, suflen);
  (*scratch)[len] = '\0';
  return dbuf__tensors_add_bulk_as(t, *scratch, len, ndim, dims, sid, diag);
}

int
dbuf__tensors_reserve_names(dbuf_tensors_t *t, int64_t bytes)
{
  if (t == NULL)
    return DBUF_EINVAL;
  int rc = unshare(t);
  return rc != 0 ? rc : dbuf__strmap_reserve_bytes(&t->names, bytes);
}

int64_t
dbuf__tensors_shape_row_elems(const dbuf_tensors_t *t, int64_t sid)
{
  return t->shapes[sid].row_elems;
}

int64_t
dbuf__tensors_shape_numel(const dbuf_tensors_t *t, int64_t sid)
{
  return t->shapes[sid].numel;
}

int64_t
dbuf__tensors_shape_rows(const dbuf_tensors_t *t, int64_t sid)
{
  return t->dims[t->shapes[sid].at];
}

const uint32_t *
dbuf__tensors_shape_ids(const dbuf_tensors_t *t)
{
  return t->shape;
}

const uint8_t *
dbuf__tensors_dtypes(const dbuf_tensors_t *t)
{
  return t->dtype;
}

const dbuf__strmap_t *
dbuf__tensors_names(const dbuf_tensors_t *t)
{
  return &t->names;
}

uint32_t
dbuf__tensors_shape_id(const dbuf_tensors_t *t, int64_t id)
{
  return t->shape[id];
}

int64_t
dbuf__tensors_nshapes(const dbuf_tensors_t *t)
{
  return t->nshapes;
}

int64_t
dbuf__tensors_ndims(const dbuf_tensors_t *t)
{
  return t->ndims;
}

int64_t
dbuf__tensors_name_bytes(const dbuf_tensors_t *t)
{
  return t->names.keys_len;
}

size_t
dbuf__tensors_name_len(const dbuf_tensors_t *t, int64_t id)
{
  return dbuf__strmap_len(&t->names, id);
}

/* A copy that shares t's arrays until either list is changed. */
int
dbuf_tensors_dup(const dbuf_tensors_t *t, dbuf_tensors_t **out)
{
  dbuf_tensors_t *c;
  if (t == NULL || out == NULL)
    return DBUF_EINVAL;
  if ((c = malloc(sizeof *c)) == NULL)
    return DBUF_ENOMEM;
  atomic_fetch_add(&t->sh->refs, 1);
  *c = *t;
  *out = c;
  return 0;
}

void
dbuf__tensors_trim(dbuf_tensors_t *t)
{
  if (t == NULL || atomic_load(&t->sh->refs) != 1)
    return;
  dbuf__strmap_trim(&t->names);
  /* Shrinking keeps the contents; a failed realloc keeps the old block,
   * which is only larger than the count it is then said to hold. */
  if (t->n > 0 && t->n < t->cap) {
    uint32_t *a;
    uint8_t *b;
    if ((a = realloc(t->shape, (size_t)t->n * sizeof *a)) != NULL)
      t->shape = a;
    if ((b = realloc(t->dtype, (size_t)t->n)) != NULL)
      t->dtype = b;
    t->cap = t->n;
  }
  if (t->nshapes > 0 && t->nshapes < t->shapes_cap) {
    shape_t *s = realloc(t->shapes, (size_t)t->nshapes * sizeof *s);
    if (s != NULL)
      t->shapes = s;
    t->shapes_cap = t->nshapes;
  }
  if (t->ndims > 0 && t->ndims < t->dims_cap) {
    int64_t *a = realloc(t->dims, (size_t)t->ndims * sizeof *a);
    if (a != NULL)
      t->dims = a;
    t->dims_cap = t->ndims;
  }
}

int64_t
dbuf_tensors_count(const dbuf_tensors_t *t)
{
  return t ? t->n : 0;
}

int64_t
dbuf_tensors_total(const dbuf_tensors_t *t)
{
  return t ? t->total : 0;
}

#define IN_RANGE(t, id) ((t) != NULL && (id) >= 0 && (id) < (t)->n)
#define SHAPE(t, id) (&(t)->shapes[(t)->shape[id]])

int
dbuf_tensors_set_dtype(dbuf_tensors_t *t, int64_t id, dbuf_dtype_t dtype)
{
  if (t == NULL || (int)dtype < DBUF_DTYPE_NONE || (int)dtype >= DBUF_DTYPE_COUNT)
    return DBUF_EINVAL;
  if (!IN_RANGE(t, id))
    return DBUF_ERANGE;
  if (t->dtype[id] == (uint8_t)dtype)
    return 0;
  int rc = unshare(t);
  if (rc != 0)
    return rc;
  t->dtype[id] = (uint8_t)dtype;
  return 0;
}

dbuf_dtype_t
dbuf_tensors_dtype(const dbuf_tensors_t *t, int64_t id)
{
  return IN_RANGE(t, id) ? (dbuf_dtype_t)t->dtype[id] : DBUF_DTYPE_NONE;
}

const char *
dbuf_tensors_name(const dbuf_tensors_t *t, int64_t id)
{
  return IN_RANGE(t, id) ? dbuf__strmap_key(&t->names, id) : NULL;
}

int
dbuf_tensors_ndim(const dbuf_tensors_t *t, int64_t id)
{
  return IN_RANGE(t, id) ? SHAPE(t, id)->ndim : 0;
}

const int64_t *
dbuf_tensors_dims(const dbuf_tensors_t *t, int64_t id)
{
  return IN_RANGE(t, id) ? t->dims + SHAPE(t, id)->at : NULL;
}

int64_t
dbuf_tensors_numel(const dbuf_tensors_t *t, int64_t id)
{
  return IN_RANGE(t, id) ? SHAPE(t, id)->numel : -1;
}

int64_t
dbuf_tensors_rows(const dbuf_tensors_t *t, int64_t id)
{
  return IN_RANGE(t, id) ? t->dims[SHAPE(t, id)->at] : -1;
}

int64_t
dbuf_tensors_row_elems(const dbuf_tensors_t *t, int64_t id)
{
  return IN_RANGE(t, id) ? SHAPE(t, id)->row_elems : -1;
}

int
dbuf_tensors_find(const dbuf_tensors_t *t, const char *name, int64_t *id)
{
  dbuf__strmap_t v;
  if (t == NULL || name == NULL || id == NULL)
    return DBUF_EINVAL;
  int rc = names_view(t, &v);
  return rc != 0 ? rc : dbuf__strmap_find(&v, name, id);
}

_Static_assert(DBUF__SHAPE_STR_LEN >= 21 * DBUF_MAX_DIMS + 1,
               "a shape string of DBUF_MAX_DIMS int64 dims fits");

int
dbuf__shape_str(const int64_t *dims, int ndim, char *buf, size_t len)
{
  size_t used = 0;
  if (len == 0)
    return DBUF_ENOBUFS;
  if (ndim == 0) {
    snprintf(buf, len, "0-D");
    return len > 3 ? 0 : DBUF_ENOBUFS;
  }
  buf[0] = '\0';
  for (int i = 0; i < ndim; i++) {
    int w = snprintf(buf + used, len - used, i ? "x%lld" : "%lld",
                     (long long)dims[i]);
    if (w < 0 || (size_t)w >= len - used) {
      buf[used] = '\0';
      return DBUF_ENOBUFS;
    }
    used += (size_t)w;
  }
  return 0;
}

int
dbuf_tensors_shape_str(const dbuf_tensors_t *t, int64_t id, char *buf,
                       size_t len)
{
  if (t == NULL || buf == NULL || len == 0)
    return DBUF_EINVAL;
  buf[0] = '\0';
  if (!IN_RANGE(t, id))
    return DBUF_ERANGE;
  return dbuf__shape_str(t->dims + SHAPE(t, id)->at, SHAPE(t, id)->ndim, buf, len);
}

int
dbuf_shape_parse(const char *text, int *ndim, int64_t dims[DBUF_MAX_DIMS],
                 dbuf_diag_t *diag)
{
  const char *p = text;
  int n = 0;
  if (text == NULL || ndim == NULL || dims == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "NULL argument");
  for (;;) {
    const char *end;
    /* digits in the C locale alone, as isdigit() there */
    if ((unsigned)(*p - '0') > 9)
      return dbuf__diag(diag, DBUF_EPARSE,
                        "shape '%s': expected a non-negative integer at '%s'",
                        text, p);
    int64_t v = 0;
    for (end = p; (unsigned)(*end - '0') <= 9 && end - p < 18; end++)
      v = v * 10 + (*end - '0'); /* 18 digits fit in 63 bits */
    for (; (unsigned)(*end - '0') <= 9; end++) {
      int64_t digit = *end - '0';
      if (v > (INT64_MAX - digit) / 10)
        return dbuf__diag(diag, DBUF_EOVERFLOW,
                          "shape '%s': dim %d does not fit in 64 bits", text, n);
      v = v * 10 + digit;
    }
    if (n == DBUF_MAX_DIMS)
      return dbuf__diag(diag, DBUF_ESHAPE, "shape '%s': more than %d dims", text,
                        DBUF_MAX_DIMS);
    dims[n++] = v;
    p = end;
    if (*p == '\0')
      break;
    if (*p != 'x')
      return dbuf__diag(diag, DBUF_EPARSE,
                        "shape '%s': unexpected character '%c'", text, *p);
    p++;
  }
  *ndim = n;
  return 0;
}
