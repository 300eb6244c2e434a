/* The deterministic data pattern: fill by pieces, verify by tensor queries. */
#include "dbuf/pattern.h"

#include "core_internal.h"
#include "layout_internal.h"

#include <stdlib.h>
#include <string.h>

#define PROGRESS_STEP ((int64_t)64 << 20) /* bytes between progress calls */

/* Per-row base: a splitmix64 of (tensor, row). */
static inline uint64_t
row_base(int64_t tensor, int64_t row)
{
  uint64_t x = (uint64_t)tensor * 0x9E3779B97F4A7C15u ^ ((uint64_t)row + 0x632BE59BD9B4E019u);
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9u;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBu;
  return x ^ (x >> 31);
}

/* One multiply per element keeps the fill near memory speed. */
static inline uint64_t
col_word(uint64_t base, int64_t col)
{
  uint64_t x = base + (uint64_t)col * 0xD1B54A32D192ED03u;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9u;
  return x ^ (x >> 30);
}

uint64_t
dbuf_pattern_word(int64_t tensor, int64_t row, int64_t col)
{
  return col_word(row_base(tensor, row), col);
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

/* Write columns [c0, c1) of one row at dst. */
static void
fill_cols(uint8_t *dst, int64_t elem_size, uint64_t base, int64_t c0, int64_t c1)
{
  int64_t n = c1 - c0;
#define FILL(T, F)                                                             \
  do {                                                                         \
    T *d = (T *)(void *)dst;                                                   \
    for (int64_t i = 0; i < n; i++)                                            \
      d[i] = (T)F(base, c0 + i);                                               \
  } while (0)
  switch (elem_size) {
  case 1:
    FILL(uint8_t, col_word);
    break;
  case 2:
    FILL(uint16_t, col_word);
    break;
  case 4:
    FILL(uint32_t, col_word);
    break;
  default:
    FILL(uint64_t, col_word);
    break;
  }
#undef FILL
}

typedef struct {
  dbuf_progress_fn fn;
  void *arg;
  int64_t done, total, next;
} progress_t;

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
  if (rc != 0 || start == end)
    return rc;
  const dbuf_tensors_t *t = dbuf_layout_tensors(l);
  const int64_t *range = dbuf_layout_range(l);
  uint8_t *out = buf;
  int64_t pos = start, cap = 0;
  dbuf_piece_t *pcs = NULL;
  progress_t pr = {progress, arg, 0, (end - start) * elem_size, PROGRESS_STEP};
  int g;

  dbuf_layout_owner_of(l, start, &g);
  for (; g < dbuf_layout_nranks(l) && range[g] < end; g++) {
    int64_t np;
    dbuf_layout_rank_pieces(l, g, NULL, 0, &np);
    if (np > cap) {
      free(pcs);
      cap = np;
      if ((pcs = dbuf__mallocn(cap, sizeof *pcs)) == NULL)
        return DBUF_ENOMEM;
    }
    dbuf_layout_rank_pieces(l, g, pcs, cap, &np);
    for (int64_t i = 0; i < np; i++) {
      dbuf_piece_t pc;
      dbuf_layout_piece_clip(l, &pcs[i], start, end, &pc); /* a piece of l */
      if (pc.nelems == 0)
        continue;
      int64_t gb = range[g] + pc.offset, ge = gb + pc.nelems;
      if (gb > pos) { /* padding before the piece */
        memset(out + (pos - start) * elem_size, 0, (size_t)((gb - pos) * elem_size));
        if ((rc = progress_add(&pr, (gb - pos) * elem_size)) != 0)
          goto out;
      }
      dbuf_rows_t rows;
      dbuf_layout_rows_in(l, pc.tensor, gb, ge, &rows);
      int64_t re = dbuf_tensors_row_elems(t, pc.tensor);
      int64_t row = rows.first_row, col = rows.first_col;
      for (int64_t at = gb; at < ge;) {
        int64_t take = re - col < ge - at ? re - col : ge - at;
        fill_cols(out + (at - start) * elem_size, elem_size,
                  row_base(pc.tensor, row), col, col + take);
        at += take;
        row++;
        col = 0;
        if ((rc = progress_add(&pr, take * elem_size)) != 0)
          goto out;
      }
      pos = ge;
    }
  }
  if (end > pos) {
    memset(out + (pos - start) * elem_size, 0, (size_t)((end - pos) * elem_size));
    rc = progress_add(&pr, (end - pos) * elem_size);
  }
out:
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

/* Number of columns [col, col + n) of one row at p that differ from the pattern. */
static int64_t
count_wrong(const uint8_t *p, int64_t elem_size, uint64_t base, int64_t col, int64_t n)
{
  int64_t wrong = 0;
#define COUNT(T, F)                                                            \
  do {                                                                         \
    const T *d = (const T *)(const void *)p;                                   \
    for (int64_t i = 0; i < n; i++)                                            \
      wrong += d[i] != (T)F(base, col + i);                                    \
  } while (0)
  switch (elem_size) {
  case 1:
    COUNT(uint8_t, col_word);
    break;
  case 2:
    COUNT(uint16_t, col_word);
    break;
  case 4:
    COUNT(uint32_t, col_word);
    break;
  default:
    COUNT(uint64_t, col_word);
    break;
  }
#undef COUNT
  return wrong;
}

/* Start of the first non-empty tensor at or after x, or the buffer size.
 * Found from the tensor offsets alone (not from the pieces). */
static int64_t
next_tensor_start(const dbuf_layout_t *l, int64_t x)
{
  const int64_t *off = dbuf_layout_offsets(l), *order = dbuf_layout_order(l);
  const dbuf_tensors_t *t = dbuf_layout_tensors(l);
  int64_t lo = dbuf_layout_order_lower(l, x);
  for (; lo < dbuf_layout_ntensors(l); lo++)
    if (dbuf_tensors_numel(t, order[lo]) > 0)
      return off[order[lo]];
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
      for (int64_t at = pos; at < run_end; at++) {
        uint64_t got = load(in + (at - start) * elem_size, elem_size);
        if (got != 0)
          RECORD(at, -1, -1, -1, 0, got);
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
        /* Fast pass without branches; locate the bad columns on a miss. */
        if (count_wrong(p, elem_size, base, col, take) != 0) {
          for (int64_t i = 0; i < take; i++) {
            uint64_t want = col_word(base, col + i) & mask;
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
