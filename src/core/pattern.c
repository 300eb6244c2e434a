/* The deterministic data pattern: fill by pieces, verify by tensor queries. */
#define _DEFAULT_SOURCE /* mincore */
#include "dbuf/pattern.h"

#include "core_internal.h"
#include "layout_internal.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

#define PROGRESS_STEP ((int64_t)64 << 20) /* bytes between progress calls */
#define FILL_RUN ((int64_t)1 << 20)       /* bytes of one fill_rows() call, at most */

/* Per-row base: a splitmix64 of (tensor, row). */
static inline uint64_t
row_base(int64_t tensor, int64_t row)
{
  uint64_t x = (uint64_t)tensor * 0x9E3779B97F4A7C15u ^ ((uint64_t)row + 0x632BE59BD9B4E019u);
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9u;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBu;
  return x ^ (x >> 31);
}

/*
 * The pattern costs one mix per block of TAB_K columns, not one per element:
 * element (t, r, c) is tab_word((c + rot) mod TAB_K) ^ B, where B is a mix
 * of (row base, c / TAB_K) and rot its top bits.  Within a block the words
 * are the table rotated, so a column shift changes every element (distinct
 * table entries); another row or block has another B and, but for one case
 * in TAB_K, another rotation, so moved data differs element by element too.
 * The fill and the verifier copy the table once per call and XOR B into
 * runs of it, at memory speed.
 */
#define TAB_BITS 10
#define TAB_K ((int64_t)1 << TAB_BITS)

static inline uint64_t
mix(uint64_t x)
{
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9u;
  return x ^ (x >> 30);
}

/* Word j of the table, j in [0, TAB_K). */
static inline uint64_t
tab_word(int64_t j)
{
  return mix((uint64_t)j * 0xD6E8FEB86659FD93u + 0x2545F4914F6CDD1Du);
}

/* B of block blk (columns [blk x TAB_K, (blk + 1) x TAB_K)) of a row. */
static inline uint64_t
block_word(uint64_t base, int64_t blk)
{
  return mix(base + (uint64_t)blk * 0xD1B54A32D192ED03u);
}

static inline int64_t
block_rot(uint64_t b)
{
  return (int64_t)(b >> (64 - TAB_BITS));
}

uint64_t
dbuf_pattern_word(int64_t tensor, int64_t row, int64_t col)
{
  uint64_t b = block_word(row_base(tensor, row), col >> TAB_BITS);
  return tab_word(((col & (TAB_K - 1)) + block_rot(b)) & (TAB_K - 1)) ^ b;
}

/* The table twice over, as elements of elem_size bytes (host order), so
 * that any rotation of it is one run starting at rot. */
typedef struct {
  int64_t es;
  uint8_t bytes[2 * TAB_K * 8];
} tab_t;

static void
tab_init(tab_t *t, int64_t es)
{
  t->es = es;
  for (int64_t j = 0; j < 2 * TAB_K; j++) {
    uint64_t w = tab_word(j & (TAB_K - 1));
    uint8_t *d = t->bytes + j * es;
    switch (es) {
    case 1:
      *d = (uint8_t)w;
      break;
    case 2: {
      uint16_t v = (uint16_t)w;
      memcpy(d, &v, 2);
      break;
    }
    case 4: {
      uint32_t v = (uint32_t)w;
      memcpy(d, &v, 4);
      break;
    }
    default:
      memcpy(d, &w, 8);
      break;
    }
  }
}

/* Eight bytes holding the low es bytes of b, repeated (host order). */
static inline uint64_t
spread(uint64_t b, int64_t es)
{
  switch (es) {
  case 1:
    return (b & 0xffu) * UINT64_C(0x0101010101010101);
  case 2:
    return (b & 0xffffu) * UINT64_C(0x0001000100010001);
  case 4:
    return (b & 0xffffffffu) * UINT64_C(0x0000000100000001);
  default:
    return b;
  }
}

typedef uint64_t v4u64 __attribute__((vector_size(32)));
typedef uint64_t v8u64 __attribute__((vector_size(64)));

#if defined(__x86_64__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define CLONES __attribute__((target_clones("avx2", "default")))
#define FILL_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif
#endif
#ifndef CLONES
#define CLONES
#define FILL_CLONES
#endif

/*
 * Fills of at least STREAM_MIN bytes go around the caches (x86-64: SSE2
 * non-temporal stores), as memset does for sizes like these: a store that
 * misses then costs no read of the line it overwrites, and the pattern does
 * not evict what the caches hold.  Smaller fills stay in the caches, where
 * the verifier or the caller read them next.
 */
#if defined(__SSE2__) && defined(__x86_64__)
#include <emmintrin.h>
#define STREAM_MIN ((int64_t)4 << 20)
#define HAVE_STREAM 1

/* dst[h ..) up to the last whole 16 bytes of n by streaming stores, h the
 * bytes before dst's first 16-byte boundary; returns the bytes written
 * from 0 (0 when n is too short). */
static size_t
xor_stream(uint8_t *dst, const uint8_t *src, size_t n, uint64_t pat)
{
  size_t h = (size_t)(-(uintptr_t)dst & 15), i;
  if (n < h + 64)
    return 0;
  /* Byte i takes byte i & 7 of pat: the 16-byte stores from h on take pat
   * rotated by h bytes (dst need not be element-aligned: a view into a
   * mapped file is not). */
  const uint8_t *pb = (const uint8_t *)&pat;
  for (i = 0; i < h; i++)
    dst[i] = src[i] ^ pb[i & 7];
  unsigned rot = (unsigned)(h & 7) * 8;
  uint64_t pr = rot ? pat >> rot | pat << (64 - rot) : pat;
  __m128i p = _mm_set1_epi64x((long long)pr);
  for (; i + 16 <= n; i += 16)
    _mm_stream_si128((__m128i *)(void *)(dst + i),
                     _mm_xor_si128(_mm_loadu_si128((const __m128i *)(const void *)(src + i)), p));
  return i;
}

static void
stream_end(void)
{
  _mm_sfence(); /* streaming stores are weakly ordered: order them now */
}
#else
#define STREAM_MIN INT64_MAX
#define HAVE_STREAM 0

static size_t
xor_stream(uint8_t *dst, const uint8_t *src, size_t n, uint64_t pat)
{
  (void)dst, (void)src, (void)n, (void)pat;
  return 0;
}

static void
stream_end(void)
{
}
#endif

/* dst[0 .. n) = src ^ the eight bytes of pat repeated; n a multiple of the
 * element size, src at an element boundary, dst anywhere (a view into a
 * mapped file need not be aligned); stream: around the caches (see
 * STREAM_MIN).  Inlined into fill_rows(): each of its clones gets its own
 * vector width, and a block costs no call.  Where the CPU has 64-byte
 * vectors and dst is 64-byte aligned, a cache line is one store: over
 * lines the kernel has just cleared (a fresh page), plain loops wrote
 * 2 MiB pages about 10% faster that way than with 32-byte stores on an
 * Intel Xeon. */
static inline __attribute__((always_inline)) void
xor_copy(uint8_t *dst, const uint8_t *src, size_t n, uint64_t pat, int stream)
{
  v8u64 p8 = {pat, pat, pat, pat, pat, pat, pat, pat};
  v4u64 p = {pat, pat, pat, pat};
  uint8_t pb[8];
  size_t i = stream ? xor_stream(dst, src, n, pat) : 0;
  memcpy(pb, &pat, 8);
  /* The word loops take pat as it is: from a multiple of 8 bytes only
   * (after streaming, what is left is under 16 bytes anyway). */
  for (; (i & 7) == 0 && i + 64 <= n; i += 64) {
    v8u64 x;
    memcpy(&x, src + i, 64);
    x ^= p8;
    memcpy(dst + i, &x, 64);
  }
  for (; (i & 7) == 0 && i + 32 <= n; i += 32) {
    v4u64 x;
    memcpy(&x, src + i, 32);
    x ^= p;
    memcpy(dst + i, &x, 32);
  }
  for (; (i & 7) == 0 && i + 8 <= n; i += 8) {
    uint64_t x;
    memcpy(&x, src + i, 8);
    x ^= pat;
    memcpy(dst + i, &x, 8);
  }
  for (; i < n; i++)
    dst[i] = src[i] ^ pb[i & 7];
}

/* Whether a[0 .. n) == src ^ pat repeated (see xor_copy). */
CLONES static int
xor_equal(const uint8_t *a, const uint8_t *src, size_t n, uint64_t pat)
{
  v4u64 p = {pat, pat, pat, pat}, acc = {0, 0, 0, 0};
  uint8_t pb[8];
  uint64_t acc1 = 0;
  size_t i = 0;
  memcpy(pb, &pat, 8);
  for (; i + 32 <= n; i += 32) {
    v4u64 x, y;
    memcpy(&x, a + i, 32);
    memcpy(&y, src + i, 32);
    acc |= x ^ y ^ p;
  }
  for (; i + 8 <= n; i += 8) {
    uint64_t x, y;
    memcpy(&x, a + i, 8);
    memcpy(&y, src + i, 8);
    acc1 |= x ^ y ^ pat;
  }
  for (; i < n; i++)
    acc1 |= (uint64_t)(a[i] ^ src[i] ^ pb[i & 7]);
  return (acc[0] | acc[1] | acc[2] | acc[3] | acc1) == 0;
}

/* Whether columns [c0, c1) of one row, held at in, match the pattern; by
 * blocks, 0 on the first block that differs. */
static int
row_equal(const tab_t *t, const uint8_t *in, uint64_t base, int64_t c0, int64_t c1)
{
  int64_t es = t->es;
  for (int64_t c = c0; c < c1;) {
    int64_t blk = c >> TAB_BITS, ce = (blk + 1) << TAB_BITS;
    if (ce > c1)
      ce = c1;
    uint64_t b = block_word(base, blk);
    const uint8_t *src = t->bytes + ((c & (TAB_K - 1)) + block_rot(b)) * es;
    if (!xor_equal(in + (c - c0) * es, src, (size_t)((ce - c) * es), spread(b, es)))
      return 0;
    c = ce;
  }
  return 1;
}

/* n elements of tensor id from (*row, *col), row_elems elements a row,
 * written at out by blocks (streamed when stream); *row and *col are left
 * at the element after them.  One call covers many rows (see FILL_RUN). */
FILL_CLONES static void
fill_rows(const tab_t *t, uint8_t *out, int64_t id, int64_t *row, int64_t *col, int64_t row_elems,
          int64_t n, int stream)
{
  int64_t es = t->es, r = *row, c = *col;
  uint64_t base = row_base(id, r);
  while (n > 0) {
    int64_t blk = c >> TAB_BITS, ce = (blk + 1) << TAB_BITS;
    if (ce > row_elems)
      ce = row_elems;
    if (ce - c > n)
      ce = c + n;
    uint64_t b = block_word(base, blk);
    const uint8_t *src = t->bytes + ((c & (TAB_K - 1)) + block_rot(b)) * es;
    xor_copy(out, src, (size_t)((ce - c) * es), spread(b, es), stream);
    out += (ce - c) * es;
    n -= ce - c;
    c = ce;
    if (c == row_elems) {
      base = row_base(id, ++r);
      c = 0;
    }
  }
  *row = r;
  *col = c;
}

static int
check_args(const dbuf_layout_t *l, int64_t start, int64_t end, const void *buf,
           int64_t elem_size)
{
  int64_t bytes;
  if (l == NULL || (buf == NULL && end > start))
    return DBUF_EINVAL;
  if (elem_size != 1 && elem_size != 2 && elem_size != 4 && elem_size != 8)
    return DBUF_EINVAL;
  if (start < 0 || start > end || end > dbuf_layout_size(l))
    return DBUF_ERANGE;
  /* Offsets of a sane layout stay in [0, size]; byte counts must fit. */
  if (!dbuf__layout_sane(l))
    return DBUF_ELAYOUT;
  if (dbuf__mul(end - start, elem_size, &bytes) || (uint64_t)bytes > SIZE_MAX)
    return DBUF_EOVERFLOW;
  return 0;
}

/* ------------------------------------------------------------------ */
/* Fill                                                                */

typedef struct {
  dbuf_progress_fn fn;
  void *arg;
  int64_t done, total, next;
} progress_t;

/*
 * Which stores a large fill writes with, chosen for every 2 MiB span of
 * the output (STORES_SPAN, aligned addresses) by whether its first page
 * is resident, asked before any byte of the span is written.  Into memory
 * already written, streaming stores save reading each line before it is
 * overwritten: 11.1 to 11.9 against 7.8 to 8.2 GB/s a rank on an Intel
 * Xeon, 22 against 11 to 13 on an AMD EPYC.  Into a page not yet faulted
 * in, the first store has the kernel clear the page through the caches,
 * and streaming stores then write each line twice (the cleared line pushed
 * out, the pattern around the caches): 3.1 to 3.4 against 5.3 to 6.2 GB/s
 * on the Xeon.  So a span whose first page is resident is written
 * streamed, any other (or one whose state cannot be told) cached; the
 * bytes are the same either way.  The tests can force one kind.
 */
enum { STORES_BY_PAGE, STORES_STREAM, STORES_CACHED };
static atomic_int stores_force;
#define STORES_SPAN ((uintptr_t)2 << 20)

int
dbuf__pattern_stores(int set)
{
  if (set >= 0)
    atomic_store(&stores_force, set);
  return atomic_load(&stores_force);
}

int
dbuf__pattern_resident(const void *p)
{
#if defined(__linux__) && HAVE_STREAM
  long ps = sysconf(_SC_PAGESIZE);
  unsigned char v = 0;
  if (ps <= 0)
    return 0;
  return mincore((void *)((uintptr_t)p & ~((uintptr_t)ps - 1)), 1, &v) == 0 && (v & 1);
#else
  (void)p;
  return 0;
#endif
}

static _Thread_local int64_t last_streamed;

int64_t
dbuf__pattern_last_streamed(void)
{
  return last_streamed;
}

/* A fill's stores: by_page, whether they follow the pages; next, the end
 * of the span decided last; end, the fill's end. */
typedef struct {
  int by_page;
  uintptr_t next, end;
} stores_t;

/* The next write starts with an element of es bytes at at: once that
 * element reaches the span from next on, the stores for that span, asked
 * of its first page before any byte of it is written (the element that
 * straddles the boundary goes with the new span).  What was streamed is
 * fenced once, as the fill returns. */
static void
stores_step(stores_t *st, const uint8_t *at, int64_t es, int *stream)
{
  uintptr_t a = (uintptr_t)at;
  if (!st->by_page || a >= st->end)
    return;
  while (a + (uintptr_t)es > st->next) {
    uintptr_t probe = a > st->next ? a : st->next;
    *stream = dbuf__pattern_resident((const void *)probe);
    st->next = (probe & ~(STORES_SPAN - 1)) + STORES_SPAN;
  }
}

/* Of n elements of es bytes from p, those that end by the span decided
 * last (at least one): a write never touches a span before it is decided. */
static inline int64_t
stores_room(const stores_t *st, const uint8_t *p, int64_t es, int64_t n)
{
  if (!st->by_page || (uintptr_t)p >= st->next)
    return n;
  int64_t k = (int64_t)((st->next - (uintptr_t)p) / (uintptr_t)es);
  return k < 1 ? 1 : k < n ? k : n;
}

static void
stores_start(stores_t *st, uint8_t *out, int64_t total, int64_t es, int *stream)
{
  int force = atomic_load(&stores_force);
  *stream = total >= STREAM_MIN && force != STORES_CACHED;
  st->by_page = *stream && force == STORES_BY_PAGE;
  st->next = 0;
  st->end = (uintptr_t)out + (uintptr_t)total;
  if (st->by_page) {
    *stream = 0;
    stores_step(st, out, es, stream);
  }
}

static int
progress_add(progress_t *p, int64_t bytes)
{
  p->done += bytes;
  if (p->fn != NULL && (p->done >= p->next || p->done == p->total)) {
    p->next = p->done + PROGRESS_STEP;
    if (p->fn(p->done, p->total, p->arg) != 0)
      return DBUF_ECANCELED;
  }
  return 0;
}

int
dbuf_pattern_fill(const dbuf_layout_t *l, int64_t start, int64_t end, void *buf,
                  int64_t elem_size, dbuf_progress_fn progress, void *arg)
{
  int rc = check_args(l, start, end, buf, elem_size);
  last_streamed = 0;
  if (rc != 0 || start == end)
    return rc;
  const dbuf_tensors_t *t = dbuf_layout_tensors(l);
  const int64_t *range = dbuf_layout_range(l);
  uint8_t *out = buf;
  int64_t pos = start, cap = 0;
  dbuf_piece_t *pcs = NULL;
  progress_t pr = {progress, arg, 0, (end - start) * elem_size, PROGRESS_STEP};
  tab_t tab; /* 16 KiB: on the stack, so the fill cannot fail for memory */
  int g, stream;
  int64_t nstream = 0; /* bytes written by streamed runs */
  stores_t st;

  stores_start(&st, out, pr.total, elem_size, &stream);
  tab_init(&tab, elem_size);

  dbuf_layout_owner_of(l, start, &g);
  for (; g < dbuf_layout_nranks(l) && range[g] < end; g++) {
    int64_t np;
    dbuf_layout_rank_pieces(l, g, NULL, 0, &np);
    if (np > cap) {
      free(pcs);
      cap = np;
      if ((pcs = dbuf__mallocn(cap, sizeof *pcs)) == NULL) {
        rc = DBUF_ENOMEM; /* after the fence of what was streamed */
        goto out;
      }
    }
    dbuf_layout_rank_pieces(l, g, pcs, cap, &np);
    for (int64_t i = 0; i < np; i++) {
      dbuf_piece_t pc;
      dbuf_layout_piece_clip(l, &pcs[i], start, end, &pc); /* a piece of l */
      if (pc.nelems == 0)
        continue;
      int64_t gb = range[g] + pc.offset, ge = gb + pc.nelems;
      while (pos < gb) { /* padding before the piece */
        uint8_t *dst = out + (pos - start) * elem_size;
        int64_t k = stores_room(&st, dst, elem_size, gb - pos);
        memset(dst, 0, (size_t)(k * elem_size));
        pos += k;
        if ((rc = progress_add(&pr, k * elem_size)) != 0)
          goto out;
        stores_step(&st, dst + k * elem_size, elem_size, &stream);
      }
      dbuf_rows_t rows;
      dbuf_layout_rows_in(l, pc.tensor, gb, ge, &rows);
      int64_t re = dbuf_tensors_row_elems(t, pc.tensor), run = FILL_RUN / elem_size;
      int64_t row = rows.first_row, col = rows.first_col;
      for (int64_t at = gb; at < ge;) {
        uint8_t *dst = out + (at - start) * elem_size;
        int64_t take = stores_room(&st, dst, elem_size, run < ge - at ? run : ge - at);
        fill_rows(&tab, dst, pc.tensor, &row, &col, re, take, stream);
        nstream += stream ? take * elem_size : 0;
        at += take;
        if ((rc = progress_add(&pr, take * elem_size)) != 0)
          goto out;
        stores_step(&st, dst + take * elem_size, elem_size, &stream);
      }
      pos = ge;
    }
  }
  if (end > pos) {
    memset(out + (pos - start) * elem_size, 0, (size_t)((end - pos) * elem_size));
    rc = progress_add(&pr, (end - pos) * elem_size);
  }
out:
  if (nstream > 0)
    stream_end();
  last_streamed = nstream;
  free(pcs);
  return rc;
}

/* ------------------------------------------------------------------ */
/* Verify                                                              */

static inline uint64_t
load(const uint8_t *p, int64_t elem_size)
{
  switch (elem_size) {
  case 1:
    return *p;
  case 2: {
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
  }
  case 4: {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
  }
  default: {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
  }
  }
}

/* Whether n elements at p are all zero. */
static int
all_zero(const uint8_t *p, size_t n)
{
  uint64_t acc = 0;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t x;
    memcpy(&x, p + i, 8);
    acc |= x;
  }
  for (; i < n; i++)
    acc |= p[i];
  return acc == 0;
}

/* Start of the first non-empty tensor at or after x, or the buffer size.
 * Found from the tensor offsets alone (not from the pieces). */
static int64_t
next_tensor_start(const dbuf_layout_t *l, int64_t x)
{
  const int64_t *off = dbuf_layout_offsets(l), *order = dbuf__layout_order_or_null(l);
  const dbuf_tensors_t *t = dbuf_layout_tensors(l);
  int64_t lo = dbuf_layout_order_lower(l, x);
  for (; lo < dbuf_layout_ntensors(l); lo++)
    if (dbuf_tensors_numel(t, DBUF__AT(order, lo)) > 0)
      return off[DBUF__AT(order, lo)];
  return dbuf_layout_size(l);
}

int
dbuf_pattern_verify(const dbuf_layout_t *l, int64_t start, int64_t end,
                    const void *buf, int64_t elem_size, dbuf_progress_fn progress,
                    void *arg, int64_t *nbad, dbuf_pattern_bad_t *first)
{
  int rc = check_args(l, start, end, buf, elem_size);
  if (rc != 0)
    return rc;
  const dbuf_tensors_t *t = dbuf_layout_tensors(l);
  const int64_t *off = dbuf_layout_offsets(l);
  const uint8_t *in = buf;
  uint64_t mask = elem_size == 8 ? ~(uint64_t)0 : (((uint64_t)1 << (8 * elem_size)) - 1);
  int64_t bad = 0;
  progress_t pr = {progress, arg, 0, (end - start) * elem_size, PROGRESS_STEP};
  tab_t tab;

  tab_init(&tab, elem_size);

#define RECORD(at, tid, r, c, want, got)                                       \
  do {                                                                         \
    if (bad++ == 0 && first != NULL) {                                         \
      first->offset = (at);                                                    \
      first->tensor = (tid);                                                   \
      first->row = (r);                                                        \
      first->col = (c);                                                        \
      first->expected = (want);                                                \
      first->found = (got);                                                    \
    }                                                                          \
  } while (0)

  for (int64_t pos = start; pos < end;) {
    int64_t id, run_end;
    dbuf_layout_tensor_at(l, pos, &id);
    if (id < 0) { /* padding: zeros up to the next tensor */
      run_end = next_tensor_start(l, pos + 1);
      if (run_end > end)
        run_end = end;
      const uint8_t *p = in + (pos - start) * elem_size;
      if (!all_zero(p, (size_t)((run_end - pos) * elem_size))) {
        for (int64_t at = pos; at < run_end; at++) {
          uint64_t got = load(in + (at - start) * elem_size, elem_size);
          if (got != 0)
            RECORD(at, -1, -1, -1, 0, got);
        }
      }
    } else {
      int64_t re = dbuf_tensors_row_elems(t, id);
      run_end = off[id] + dbuf_tensors_numel(t, id);
      if (run_end > end)
        run_end = end;
      /* Row and column by hand, not with dbuf_layout_rows_in() as the fill
       * does: a bug in the shared row arithmetic must not hide in both. */
      int64_t local = pos - off[id], row = local / re, col = local % re;
      for (int64_t at = pos; at < run_end; row++, col = 0) {
        uint64_t base = row_base(id, row);
        int64_t take = re - col < run_end - at ? re - col : run_end - at;
        const uint8_t *p = in + (at - start) * elem_size;
        /* Fast pass on the table; the bad columns, if any, located with
         * dbuf_pattern_word() itself. */
        if (!row_equal(&tab, p, base, col, col + take)) {
          for (int64_t i = 0; i < take; i++) {
            uint64_t want = dbuf_pattern_word(id, row, col + i) & mask;
            uint64_t got = load(p + i * elem_size, elem_size);
            if (got != want)
              RECORD(at + i, id, row, col + i, want, got);
          }
        }
        at += take;
      }
    }
    if ((rc = progress_add(&pr, (run_end - pos) * elem_size)) != 0)
      return rc;
    pos = run_end;
  }
#undef RECORD
  if (nbad != NULL)
    *nbad = bad;
  return 0;
}
