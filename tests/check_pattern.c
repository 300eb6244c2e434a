/*
 * Pattern tests: the fill agrees with a brute-force oracle (one tensor_at
 * query per element), segment fills agree with the whole-buffer fill, the
 * verifier finds every single corrupted element with its exact place.
 */
#include "dbuf/layout.h"
#include "dbuf/pattern.h"

#include "core_internal.h" /* test_store_choice */

#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static dbuf_layout_t *
layout_of(int which)
{
  /* 0: seed padded/5; 1: unpadded/4 with an empty tensor; 2: tensor/3;
   * 3: padded/3 block 2; 4: more ranks than rows */
  static const int64_t shapes[][3] = {{2, 6}, {4, 4}, {4, 4}, {1, 2}, {1, 6}, {0, 3}, {7, 1}};
  static const int nd[] = {2, 2, 2, 2, 2, 2, 1};
  dbuf_tensors_t *t;
  dbuf_layout_t *l;
  dbuf_layout_params_t p;
  int count = which == 3 ? 3 : which == 4 ? 1 : 7;
  ck_assert_int_eq(dbuf_tensors_create(&t), 0);
  for (int i = 0; i < count; i++) {
    char name[8] = {'T', (char)('0' + i), 0};
    int64_t dims[2] = {shapes[i][0], shapes[i][1]};
    if (which == 3)
      dims[0] = 2 * (i + 1);
    ck_assert_int_eq(dbuf_tensors_add(t, name, nd[i], dims, NULL), 0);
  }
  dbuf_layout_params_init(&p);
  p.kind = which == 1 || which == 4 ? DBUF_LAYOUT_UNPADDED
           : which == 2            ? DBUF_LAYOUT_TENSOR
                                   : DBUF_LAYOUT_PADDED;
  p.nranks = which == 0 ? 5 : which == 1 ? 4 : which == 4 ? 9 : 3;
  p.block_size = which == 3 ? 2 : 1;
  p.auto_owners = which == 2;
  ck_assert_int_eq(dbuf_layout_build(t, &p, &l, NULL), 0);
  dbuf_tensors_destroy(t);
  return l;
}

static uint64_t
load(const uint8_t *p, int64_t es)
{
  uint64_t v = 0;
  memcpy(&v, p, (size_t)es); /* little-endian host: the low bytes */
  return v;
}

/* The oracle: element by element, through tensor_at. */
static uint64_t
oracle(const dbuf_layout_t *l, int64_t x, int64_t es)
{
  int64_t t;
  ck_assert_int_eq(dbuf_layout_tensor_at(l, x, &t), 0);
  if (t < 0)
    return 0;
  const dbuf_tensors_t *ts = dbuf_layout_tensors(l);
  int64_t k = x - dbuf_layout_offsets(l)[t], re = dbuf_tensors_row_elems(ts, t);
  uint64_t w = dbuf_pattern_word(t, k / re, k % re);
  return es == 8 ? w : w & (((uint64_t)1 << (8 * es)) - 1);
}

START_TEST(test_fill_matches_oracle)
{
  const int64_t sizes[] = {1, 2, 4, 8};
  for (int which = 0; which < 5; which++) {
    dbuf_layout_t *l = layout_of(which);
    int64_t size = dbuf_layout_size(l);
    for (int e = 0; e < 4; e++) {
      int64_t es = sizes[e];
      uint8_t *whole = malloc((size_t)(size * es) + 1);
      memset(whole, 0xAB, (size_t)(size * es));
      ck_assert_int_eq(dbuf_pattern_fill(l, 0, size, whole, es, NULL, NULL), 0);
      for (int64_t x = 0; x < size; x++)
        ck_assert_msg(load(whole + x * es, es) == oracle(l, x, es), "layout %d es %lld x %lld",
                      which, (long long)es, (long long)x);
      /* Every segment alone, and every sub-range, gives the same bytes. */
      for (int r = 0; r < dbuf_layout_nranks(l); r++) {
        int64_t a = dbuf_layout_range(l)[r], b = dbuf_layout_range(l)[r + 1];
        uint8_t *seg = malloc((size_t)((b - a) * es) + 1);
        ck_assert_int_eq(dbuf_pattern_fill(l, a, b, seg, es, NULL, NULL), 0);
        ck_assert(memcmp(seg, whole + a * es, (size_t)((b - a) * es)) == 0);
        int64_t nbad = -1;
        ck_assert_int_eq(dbuf_pattern_verify(l, a, b, seg, es, NULL, NULL, &nbad, NULL), 0);
        ck_assert_int_eq(nbad, 0);
        free(seg);
      }
      for (int64_t a = 0; a <= size; a += 3)
        for (int64_t b = a; b <= size; b += 5) {
          uint8_t *part = malloc((size_t)((b - a) * es) + 1);
          ck_assert_int_eq(dbuf_pattern_fill(l, a, b, part, es, NULL, NULL), 0);
          ck_assert(memcmp(part, whole + a * es, (size_t)((b - a) * es)) == 0);
          free(part);
        }
      free(whole);
    }
    dbuf_layout_destroy(l);
  }
}
END_TEST

START_TEST(test_every_corruption_found)
{
  dbuf_layout_t *l = layout_of(_i);
  int64_t size = dbuf_layout_size(l), es = 2;
  uint8_t *buf = malloc((size_t)(size * es));
  ck_assert_int_eq(dbuf_pattern_fill(l, 0, size, buf, es, NULL, NULL), 0);
  for (int64_t x = 0; x < size; x++) {
    dbuf_pattern_bad_t b;
    int64_t nbad = 0, t;
    buf[x * es] ^= 0x10;
    ck_assert_int_eq(dbuf_pattern_verify(l, 0, size, buf, es, NULL, NULL, &nbad, &b), 0);
    ck_assert_int_eq(nbad, 1);
    ck_assert_int_eq(b.offset, x);
    dbuf_layout_tensor_at(l, x, &t);
    ck_assert_int_eq(b.tensor, t);
    if (t >= 0) {
      int64_t re = dbuf_tensors_row_elems(dbuf_layout_tensors(l), t);
      int64_t k = x - dbuf_layout_offsets(l)[t];
      ck_assert_int_eq(b.row, k / re);
      ck_assert_int_eq(b.col, k % re);
    }
    ck_assert(b.found == (b.expected ^ 0x10));
    buf[x * es] ^= 0x10;
  }
  free(buf);
  dbuf_layout_destroy(l);
}
END_TEST

/* copy = buf with n elements from src written over dst: at least 90% of
 * them must be found wrong, and nothing else; the first wrong one. */
static dbuf_pattern_bad_t
moved(const dbuf_layout_t *l, const uint8_t *buf, uint8_t *copy, int64_t es, int64_t dst,
      int64_t src, int64_t n)
{
  int64_t size = dbuf_layout_size(l), nbad = -1;
  dbuf_pattern_bad_t b;
  memcpy(copy, buf, (size_t)(size * es));
  memcpy(copy + dst * es, buf + src * es, (size_t)(n * es));
  ck_assert_int_eq(dbuf_pattern_verify(l, 0, size, copy, es, NULL, NULL, &nbad, &b), 0);
  ck_assert_msg(nbad >= n * 9 / 10 && nbad <= n, "es %lld: %lld of %lld", (long long)es,
                (long long)nbad, (long long)n);
  return b;
}

/* A padded layout on 3 ranks of n tensors PREFIX0, PREFIX1, ... of the
 * shapes (rows x cols, cols 0: 1-D). */
static dbuf_layout_t *
layout_3(const int64_t (*shapes)[2], int n, char prefix)
{
  dbuf_tensors_t *t;
  dbuf_layout_t *l;
  dbuf_layout_params_t p;
  ck_assert_int_eq(dbuf_tensors_create(&t), 0);
  for (int i = 0; i < n; i++) {
    char name[4] = {prefix, (char)('0' + i), 0};
    ck_assert_int_eq(dbuf_tensors_add(t, name, shapes[i][1] ? 2 : 1, shapes[i], NULL), 0);
  }
  dbuf_layout_params_init(&p);
  p.nranks = 3;
  ck_assert_int_eq(dbuf_layout_build(t, &p, &l, NULL), 0);
  dbuf_tensors_destroy(t);
  return l;
}

/* Rows of more than one block of the pattern's table (1024 columns): the
 * fill matches the oracle from any start, and data moved by a row or by
 * exactly one block is caught element by element, not only per block. */
START_TEST(test_wide_rows)
{
  static const int64_t shapes[][2] = {{3, 2500}, {5000, 0}, {2, 1024}};
  dbuf_layout_t *l = layout_3(shapes, 3, 'W');
  int64_t size = dbuf_layout_size(l), off0 = dbuf_layout_offsets(l)[0];
  int64_t off1 = dbuf_layout_offsets(l)[1];
  for (int64_t es = 1; es <= 8; es *= 2) {
    uint8_t *buf = malloc((size_t)(size * es));
    ck_assert_int_eq(dbuf_pattern_fill(l, 0, size, buf, es, NULL, NULL), 0);
    /* By hand, not with oracle(): one Check assertion per element is slow. */
    int64_t first_wrong = -1;
    for (int64_t x = 0; x < size && first_wrong < 0; x++) {
      int64_t id, k, re;
      uint64_t want = 0;
      dbuf_layout_tensor_at(l, x, &id);
      if (id >= 0) {
        k = x - dbuf_layout_offsets(l)[id];
        re = dbuf_tensors_row_elems(dbuf_layout_tensors(l), id);
        want = dbuf_pattern_word(id, k / re, k % re);
        want = es == 8 ? want : want & (((uint64_t)1 << (8 * es)) - 1);
      }
      if (load(buf + x * es, es) != want)
        first_wrong = x;
    }
    ck_assert_msg(first_wrong < 0, "es %lld x %lld", (long long)es, (long long)first_wrong);
    const int64_t cuts[][2] = {{1, 1023}, {1023, 3077}, {2047, size - 1}};
    for (int k = 0; k < 3; k++) {
      int64_t a = cuts[k][0], b = cuts[k][1];
      uint8_t *part = malloc((size_t)((b - a) * es));
      ck_assert_int_eq(dbuf_pattern_fill(l, a, b, part, es, NULL, NULL), 0);
      ck_assert(memcmp(part, buf + a * es, (size_t)((b - a) * es)) == 0);
      free(part);
    }
    int64_t nbad = -1;
    dbuf_pattern_bad_t b;
    ck_assert_int_eq(dbuf_pattern_verify(l, 0, size, buf, es, NULL, NULL, &nbad, &b), 0);
    ck_assert_int_eq(nbad, 0);
    /* Row 1 of W0 written over row 0: (nearly) every element wrong. */
    uint8_t *copy = malloc((size_t)(size * es));
    b = moved(l, buf, copy, es, off0, off0 + 2500, 2500);
    ck_assert_int_eq(b.tensor, 0);
    ck_assert_int_eq(b.row, 0);
    /* W1 shifted by exactly one block: columns [1024, 2048) over [0, 1024). */
    b = moved(l, buf, copy, es, off1, off1 + 1024, 1024);
    ck_assert_int_eq(b.tensor, 1);
    ck_assert_int_eq(b.row, 0);
    ck_assert_int_lt(b.col, 16);
    free(copy);
    free(buf);
  }
  dbuf_layout_destroy(l);
}
END_TEST

/*
 * Fills of 4 MiB and more may take the streaming stores (around the
 * caches: here the refills into the buffer, whose pages are resident):
 * a 5 MB to 40 MB buffer (odd row length, so rows start at every alignment)
 * filled whole, from an odd start, into a pointer off a 16-byte boundary and
 * into pointers off any element boundary (1, 4, 6 bytes), equals the
 * oracle element by element and the fill in pieces under 4 MiB; the
 * verifier passes it and names a corrupted element in the middle by
 * tensor, row and column.
 */
START_TEST(test_large_fill)
{
  static const int64_t shapes[][2] = {{777, 0}, {1300, 4001}};
  dbuf_layout_t *l = layout_3(shapes, 2, 'L');
  const int64_t size = dbuf_layout_size(l), re = 4001, *off = dbuf_layout_offsets(l);
  ck_assert_int_ge(size, 4 << 20); /* 4 MiB at one byte an element */
  for (int64_t es = 1; es <= 8; es *= 2) {
    uint64_t mask = es == 8 ? ~(uint64_t)0 : ((uint64_t)1 << (8 * es)) - 1;
    uint8_t *mem = malloc((size_t)(size * es) + 16), *buf = mem + (es < 8 ? es : 0);
    uint8_t *ref = malloc((size_t)(size * es));
    ck_assert_int_eq(dbuf_pattern_fill(l, 0, size, buf, es, NULL, NULL), 0);
    /* The oracle: tensor offsets and row arithmetic here, padding zero. */
    int64_t first_wrong = -1;
    for (int64_t x = 0; x < size && first_wrong < 0; x++) {
      uint64_t want = 0;
      if (x >= off[0] && x < off[0] + 777) /* 1-D: rows of one element */
        want = dbuf_pattern_word(0, x - off[0], 0) & mask;
      else if (x >= off[1] && x < off[1] + 1300 * re)
        want = dbuf_pattern_word(1, (x - off[1]) / re, (x - off[1]) % re) & mask;
      if (load(buf + x * es, es) != want)
        first_wrong = x;
    }
    ck_assert_msg(first_wrong < 0, "es %lld x %lld", (long long)es, (long long)first_wrong);
    /* In pieces of under 4 MiB (the cached stores), cut off any boundary. */
    int64_t step = ((int64_t)3 << 20) / es + 7;
    for (int64_t a = 0; a < size; a += step) {
      int64_t b = a + step < size ? a + step : size;
      ck_assert_int_eq(dbuf_pattern_fill(l, a, b, ref + a * es, es, NULL, NULL), 0);
    }
    ck_assert(memcmp(ref, buf, (size_t)(size * es)) == 0);
    /* Into addresses off every element boundary (a view into a mapped
     * file need not be aligned): the same bytes. */
    for (int mis = 1; mis < 8; mis += 2 + (mis == 1)) {
      ck_assert_int_eq(dbuf_pattern_fill(l, 0, size, mem + mis, es, NULL, NULL), 0);
      ck_assert_msg(memcmp(ref, mem + mis, (size_t)(size * es)) == 0, "es %lld mis %d",
                    (long long)es, mis);
    }
    /* From an odd start to an odd end, streamed. */
    ck_assert_int_eq(dbuf_pattern_fill(l, 3, size - 5, buf, es, NULL, NULL), 0);
    ck_assert(memcmp(ref + 3 * es, buf, (size_t)((size - 8) * es)) == 0);
    int64_t nbad = -1, x = off[1] + 651 * re + 2222;
    dbuf_pattern_bad_t bad;
    ck_assert_int_eq(dbuf_pattern_verify(l, 0, size, ref, es, NULL, NULL, &nbad, &bad), 0);
    ck_assert_int_eq(nbad, 0);
    ref[x * es + es - 1] ^= 0x40;
    ck_assert_int_eq(dbuf_pattern_verify(l, 0, size, ref, es, NULL, NULL, &nbad, &bad), 0);
    ck_assert_int_eq(nbad, 1);
    ck_assert_int_eq(bad.offset, x);
    ck_assert_int_eq(bad.tensor, 1);
    ck_assert_int_eq(bad.row, 651);
    ck_assert_int_eq(bad.col, 2222);
    ck_assert(bad.found == (bad.expected ^ ((uint64_t)0x40 << (8 * (es - 1)))));
    free(ref);
    free(mem);
  }
  dbuf_layout_destroy(l);
}
END_TEST

static int
count_calls(int64_t done, int64_t total, void *arg)
{
  ck_assert(done <= total);
  (*(int *)arg)++;
  return 0;
}

static int
stop_now(int64_t done, int64_t total, void *arg)
{
  return 1;
}

START_TEST(test_args_and_progress)
{
  dbuf_layout_t *l = layout_of(0);
  int64_t size = dbuf_layout_size(l);
  uint8_t buf[1024];
  int calls = 0;
  ck_assert_int_eq(dbuf_pattern_fill(NULL, 0, 1, buf, 2, NULL, NULL), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_pattern_fill(l, 0, 1, NULL, 2, NULL, NULL), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_pattern_fill(l, 0, 0, NULL, 2, NULL, NULL), 0);
  ck_assert_int_eq(dbuf_pattern_fill(l, 0, 1, buf, 3, NULL, NULL), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_pattern_fill(l, 2, 1, buf, 2, NULL, NULL), DBUF_ERANGE);
  ck_assert_int_eq(dbuf_pattern_fill(l, -1, 1, buf, 2, NULL, NULL), DBUF_ERANGE);
  ck_assert_int_eq(dbuf_pattern_fill(l, 0, size + 1, buf, 2, NULL, NULL), DBUF_ERANGE);
  ck_assert_int_eq(dbuf_pattern_verify(l, 0, size + 1, buf, 2, NULL, NULL, NULL, NULL),
                   DBUF_ERANGE);
  ck_assert_int_eq(dbuf_pattern_fill(l, 0, size, buf, 2, count_calls, &calls), 0);
  ck_assert_int_ge(calls, 1);
  ck_assert_int_eq(dbuf_pattern_fill(l, 0, size, buf, 2, stop_now, NULL), DBUF_ECANCELED);
  /* The pattern is pinned: these words must never change between versions. */
  ck_assert(dbuf_pattern_word(0, 0, 0) != dbuf_pattern_word(0, 0, 1));
  ck_assert(dbuf_pattern_word(0, 1, 0) != dbuf_pattern_word(1, 0, 0));
  dbuf_layout_destroy(l);
}
END_TEST

/* Fills of 4 MiB and more stream where the page was faulted in already
 * and write through the caches elsewhere (dbuf__pattern_resident, asked
 * once every 2 MiB): into a fresh mapping nothing is streamed, into the
 * same mapping written once every tensor byte is, into a mapping whose
 * first half was written a part; the bytes are those of the fill in pieces
 * of under 4 MiB (cached stores only) every time, and with either kind
 * forced.  Where the fill cannot stream, nothing is ever streamed. */
START_TEST(test_store_choice)
{
#if defined(__linux__) && defined(__x86_64__) && defined(__SSE2__)
  const int can = 1;
#else
  const int can = 0;
#endif
  static const int64_t shapes[][2] = {{1700, 4001}, {333, 0}};
  dbuf_layout_t *l = layout_3(shapes, 2, 'T');
  const int64_t size = dbuf_layout_size(l), es = 8, bytes = size * es;
  const int64_t tensor_bytes = (1700 * 4001 + 333) * es;
  const size_t len = (size_t)bytes;
  ck_assert_int_ge(bytes, (int64_t)16 << 20);
  uint8_t *ref = malloc(len);
  ck_assert(ref != NULL);
  int64_t step = ((int64_t)3 << 20) / es + 7;
  for (int64_t a = 0; a < size; a += step) {
    int64_t b = a + step < size ? a + step : size;
    ck_assert_int_eq(dbuf_pattern_fill(l, a, b, ref + a * es, es, NULL, NULL), 0);
    ck_assert_int_eq(dbuf__pattern_last_streamed(), 0); /* under 4 MiB */
  }
  ck_assert_int_eq(dbuf__pattern_stores(-1), 0); /* by page: the default */
  /* A fresh mapping: cached stores only. */
  uint8_t *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ck_assert(m != MAP_FAILED);
  ck_assert_int_eq(dbuf__pattern_resident(m), 0);
  ck_assert_int_eq(dbuf_pattern_fill(l, 0, size, m, es, NULL, NULL), 0);
  ck_assert(memcmp(ref, m, len) == 0);
  ck_assert_int_eq(dbuf__pattern_last_streamed(), 0);
  /* Written once: every tensor byte streamed. */
  ck_assert_int_eq(dbuf__pattern_resident(m), can);
  ck_assert_int_eq(dbuf__pattern_resident(m + len - 1), can);
  memset(m, 0xa5, len);
  ck_assert_int_eq(dbuf_pattern_fill(l, 0, size, m, es, NULL, NULL), 0);
  ck_assert(memcmp(ref, m, len) == 0);
  ck_assert_int_eq(dbuf__pattern_last_streamed(), can ? tensor_bytes : 0);
  /* Half written, half fresh: a part streamed. */
  ck_assert_int_eq(munmap(m, len), 0);
  m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ck_assert(m != MAP_FAILED);
  memset(m, 0xa5, len / 2);
  ck_assert_int_eq(dbuf_pattern_fill(l, 0, size, m, es, NULL, NULL), 0);
  ck_assert(memcmp(ref, m, len) == 0);
  int64_t part = dbuf__pattern_last_streamed();
  if (can)
    ck_assert_msg(part > 0 && part < tensor_bytes, "streamed %lld", (long long)part);
  else
    ck_assert_int_eq(part, 0);
  /* An empty fill and a refused one stream nothing (not the last fill's
   * count). */
  ck_assert_int_eq(dbuf_pattern_fill(l, 0, size, m, es, NULL, NULL), 0);
  ck_assert_int_eq(dbuf__pattern_last_streamed(), can ? tensor_bytes : 0);
  ck_assert_int_eq(dbuf_pattern_fill(l, 5, 5, m, es, NULL, NULL), 0);
  ck_assert_int_eq(dbuf__pattern_last_streamed(), 0);
  ck_assert_int_eq(dbuf_pattern_fill(l, 0, size, m, 8, NULL, NULL), 0);
  ck_assert_int_eq(dbuf_pattern_fill(l, 0, size, m, 3, NULL, NULL), DBUF_EINVAL);
  ck_assert_int_eq(dbuf__pattern_last_streamed(), 0);
  /* Off every element boundary (a view into a mapped file need not be
   * aligned), into fresh mappings with and without huge pages: an element
   * then straddles every 2 MiB boundary, and the span after it is asked
   * about before that element touches it, so nothing is streamed. */
  for (int off = 1; off < 8; off += 2)
    for (int huge = 0; huge < 2; huge++) {
      size_t flen = len + 8 + ((size_t)2 << 20);
      uint8_t *f = mmap(NULL, flen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      ck_assert(f != MAP_FAILED);
#ifdef MADV_HUGEPAGE
      if (huge)
        (void)madvise(f, flen, MADV_HUGEPAGE); /* where THP is offered */
#endif
      uint8_t *v = f + ((size_t)2 << 20) - 4096 + (size_t)off; /* near a boundary */
      ck_assert_int_eq(dbuf_pattern_fill(l, 0, size, v, es, NULL, NULL), 0);
      ck_assert(memcmp(ref, v, len) == 0);
      ck_assert_msg(dbuf__pattern_last_streamed() == 0, "off %d huge %d: %lld streamed", off, huge,
                    (long long)dbuf__pattern_last_streamed());
      ck_assert_int_eq(munmap(f, flen), 0);
    }
  /* Either kind forced, into written memory: the same bytes. */
  for (int kind = 1; kind <= 2; kind++) {
    dbuf__pattern_stores(kind);
    memset(m, 0xa5, len);
    ck_assert_int_eq(dbuf_pattern_fill(l, 0, size, m, es, NULL, NULL), 0);
    ck_assert_msg(memcmp(ref, m, len) == 0, "kind %d", kind);
    ck_assert_int_eq(dbuf__pattern_last_streamed(), kind == 1 && can ? tensor_bytes : 0);
    ck_assert_int_eq(dbuf__pattern_stores(-1), kind); /* kept */
  }
  dbuf__pattern_stores(0);
  ck_assert_int_eq(munmap(m, len), 0);
  free(ref);
  dbuf_layout_destroy(l);
}
END_TEST

int
main(void)
{
  Suite *s = suite_create("pattern");
  TCase *tc = tcase_create("pattern");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_fill_matches_oracle);
  tcase_add_loop_test(tc, test_every_corruption_found, 0, 5);
  tcase_add_test(tc, test_args_and_progress);
  tcase_add_test(tc, test_wide_rows);
  tcase_add_test(tc, test_large_fill);
  tcase_add_test(tc, test_store_choice);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
