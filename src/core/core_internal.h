/* Internal helpers shared by the core: checked arithmetic and diagnostics. */
#ifndef DBUF_CORE_INTERNAL_H
#define DBUF_CORE_INTERNAL_H

#include "dbuf/error.h"

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#if defined(__GNUC__)
#define DBUF__PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define DBUF__PRINTF(a, b)
#endif

/*
 * An internal function that libdbuf-mpi (comm, mem) calls across the library
 * boundary: exported from libdbuf.so, but not API (no header in
 * include/dbuf/, no promise between versions).  Keep the list short.
 */
#if defined(__GNUC__) && defined(DBUF_BUILDING)
#define DBUF__SHARED __attribute__((visibility("default")))
#else
#define DBUF__SHARED
#endif

/* Fill diag (when not NULL) with a formatted message; returns code. */
DBUF__SHARED int dbuf__diag(dbuf_diag_t *diag, int code, const char *fmt, ...)
    DBUF__PRINTF(3, 4);

/* Checked 64-bit arithmetic: 0 on success, DBUF_EOVERFLOW otherwise. */
static inline int
dbuf__mul(int64_t a, int64_t b, int64_t *out)
{
  return __builtin_mul_overflow(a, b, out) ? DBUF_EOVERFLOW : 0;
}

static inline int
dbuf__add(int64_t a, int64_t b, int64_t *out)
{
  return __builtin_add_overflow(a, b, out) ? DBUF_EOVERFLOW : 0;
}

static inline int
dbuf__sub(int64_t a, int64_t b, int64_t *out)
{
  return __builtin_sub_overflow(a, b, out) ? DBUF_EOVERFLOW : 0;
}

/*
 * Whether [off, off + numel) (numel >= 0) reaches past x, that is
 * off + numel > x, for any int64 values: no sum is formed.
 */
static inline int
dbuf__reaches_past(int64_t off, int64_t numel, int64_t x)
{
  int64_t d;
  if (__builtin_sub_overflow(x, off, &d))
    return off > x; /* |x - off| is past INT64_MAX */
  return numel > d;
}

/* ceil(a / b) for a >= 0, b >= 1, without forming a + b - 1. */
static inline int64_t
dbuf__ceil_div(int64_t a, int64_t b)
{
  return a / b + (a % b != 0);
}

/* Round a (>= 0) up to a multiple of m (> 0), checked. */
static inline int
dbuf__round_up(int64_t a, int64_t m, int64_t *out)
{
  int64_t r = a % m;
  if (r == 0) {
    *out = a;
    return 0;
  }
  return dbuf__add(a, m - r, out);
}

/* Greatest common divisor of two non-negative values. */
static inline int64_t
dbuf__gcd(int64_t a, int64_t b)
{
  while (b != 0) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

/* Seconds on the monotonic clock, for timing a stretch of work. */
static inline double
dbuf__now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* x mod d for 0 <= x and d >= 1, with inv = 1.0 / d: below 2^51 the
 * quotient comes from a multiply (off by at most one, then corrected),
 * which a loop over a million offsets does in a few cycles where a 64-bit
 * division takes tens; from 2^51 on, the division. */
static inline int64_t
dbuf__mod(int64_t x, int64_t d, double inv)
{
  if (x >= (INT64_C(1) << 51))
    return x % d;
  int64_t q = (int64_t)((double)x * inv), r;
  if (q > x)
    q = x; /* d == 1 and a rounding up: q * d stays <= x + d */
  r = x - q * d;
  while (r < 0)
    r += d;
  while (r >= d)
    r -= d;
  return r;
}

/*
 * Open an input file for reading, never blocking: refuse (before opening,
 * and again on the opened descriptor) anything that is not a regular file,
 * such as a named pipe or a device, and a file over max_bytes (when
 * max_bytes >= 0).  On success *fd is a blocking descriptor and *size the
 * file size.  On failure why gets the reason without the path ("cannot open:
 * No such file or directory", "not a regular file (a named pipe)", "file is
 * N bytes, over the limit of M bytes") and the return is DBUF_ENOTFOUND,
 * DBUF_EIO or DBUF_EFORMAT (over the limit).
 */
int dbuf__input_open(const char *path, int64_t max_bytes, int *fd,
                     int64_t *size, char *why, size_t why_len);

/*
 * A shape for people, "4096x11008" ("0-D" for a scalar): the one shape
 * format of messages and reports.  buf is always NUL-terminated; 0, or
 * DBUF_ENOBUFS when it is too short (DBUF__SHAPE_STR_LEN always suffices).
 */
#define DBUF__SHAPE_STR_LEN (21 * 16 + 1) /* 16 dims of 20 digits and an x */
int dbuf__shape_str(const int64_t *dims, int ndim, char *buf, size_t len);

/* The length of the well-formed UTF-8 sequence at p (RFC 3629: no overlong
 * form, no surrogate, nothing past U+10FFFF) within avail bytes, or 0. */
size_t dbuf__utf8_len(const unsigned char *p, size_t avail);
/* All of p[0, n) printable ASCII ('!' to '~'): a name with nothing to check. */
int dbuf__ascii_graph(const unsigned char *p, size_t n);

/*
 * Names (of tensors and units) are non-empty UTF-8 without blanks or
 * control characters: they are written into JSON, which holds no other
 * bytes, and into lines of blank-separated fields.  dbuf__name_check()
 * says what is wrong with len bytes of name, and *at (when not NULL and
 * the name is not empty) where: the offset of the first bad byte.
 */
typedef enum {
  DBUF__NAME_OK = 0,
  DBUF__NAME_EMPTY,
  DBUF__NAME_NOT_UTF8, /* a byte outside every well-formed sequence */
  DBUF__NAME_BLANK     /* a space or ASCII control character, NUL included */
} dbuf__name_fault_t;
dbuf__name_fault_t dbuf__name_check(const char *name, size_t len, size_t *at);
/* "is empty", "is not UTF-8", "has a blank or control character". */
const char *dbuf__name_fault_str(dbuf__name_fault_t f);

/*
 * A unit name as the units readers, the plan and the wire take it: a name
 * (dbuf__name_check) of at most DBUF_WIRE_UNIT_MAX bytes.  0, or
 * DBUF_EINVAL with why (why_len bytes, unless NULL) saying what is wrong,
 * without context: "unit name of N bytes (at most 4096)", "unit name 'U' is
 * not UTF-8".
 */
int dbuf__unit_name_check(const char *name, size_t len, char *why, size_t why_len);

/*
 * What a POSIX extended regular expression would cost glibc's regcomp,
 * read from the pattern alone (regex_cost.c): the atoms of its tree once
 * every repetition is expanded as regcomp expands it (counted up to cap,
 * then cap + 1), the most repetition operators over one atom (stacked, as
 * in a++, or through groups, as in (a+)+), whether it has a back-reference
 * (\1 .. \9), and whether it repeats a part that can match the empty
 * string (as (a?)*, (a|)+ or (^|b){0,3} do: regcomp's closures over such
 * parts take time and memory that grow with a high power of the pattern,
 * (((a|){0,9}){20,}) compiles in more than 20 s, ((^(b*)?|(){1,100})(b?)){0,3}
 * takes 1.5 GB).
 */
typedef struct {
  int64_t atoms;
  int depth;
  int backref;
  int empty_rep;
} dbuf__regex_cost_t;
void dbuf__regex_cost(const char *re, int64_t cap, dbuf__regex_cost_t *out);

/* Give back the unused capacity of a list's arrays (not of a shared one). */
struct dbuf_tensors;
void dbuf__tensors_trim(struct dbuf_tensors *t);
/* Free the name index of a list whose names are proven distinct and which
 * may never be looked up by name (a decoded layout on most ranks): the
 * first lookup builds it again (once, thread safe), the next add takes it
 * back.  No-op for a list that shares its arrays. */
void dbuf__tensors_index_drop(struct dbuf_tensors *t);

/* Adding many tensors fast (internal).  name is NUL-terminated at len.
 *  - dbuf__tensors_prefetch(): a reader that knows its next names (their
 *    hashes from dbuf__tensors_precheck(), below) prefetches the slot each
 *    will probe, so that the random reads of a large index overlap.
 *  - Bulk: dbuf__tensors_bulk_begin() on an empty list reserves n tensors
 *    and drops the name index; dbuf__tensors_add_bulk() checks and adds as
 *    dbuf_tensors_add() does but for the duplicate check;
 *    dbuf__tensors_bulk_end() with check indexes every name in one
 *    prefetched pass and fails on the first repeated name with
 *    dbuf_tensors_add()'s message for it (the list is then to be
 *    destroyed), without check leaves the list unindexed (names already
 *    proven distinct: the first lookup indexes them). */
void dbuf__tensors_prefetch(const struct dbuf_tensors *t, uint64_t hash);
/* How many keys ahead the readers and the index builds hash and prefetch:
 * enough random reads in flight to hide their latency. */
#define DBUF__PREFETCH_AHEAD 16
/* The checks of an add that need no list (name, dims) and the hashes,
 * done ahead by a thread that does not hold the list:
 * dbuf__tensors_add_pre() is then dbuf_tensors_add() without them (a
 * tensor that failed them goes through all of dbuf_tensors_add()'s checks,
 * which name what is wrong). */
typedef struct dbuf__tensor_pre {
  uint64_t name_hash, shape_hash;
  int64_t row, numel;
  int ok;
} dbuf__tensor_pre_t;
void dbuf__tensors_precheck(const char *name, size_t len, int ndim, const int64_t *dims,
                            dbuf__tensor_pre_t *pre);
int dbuf__tensors_add_pre(struct dbuf_tensors *t, const char *name, size_t len, int ndim,
                          const int64_t *dims, const dbuf__tensor_pre_t *pre,
                          dbuf_diag_t *diag);
int dbuf__tensors_bulk_begin(struct dbuf_tensors *t, int64_t n);
int dbuf__tensors_add_bulk(struct dbuf_tensors *t, const char *name, size_t len, int ndim,
                           const int64_t *dims, dbuf_diag_t *diag);
int dbuf__tensors_bulk_end(struct dbuf_tensors *t, int check, dbuf_diag_t *diag);
/* dbuf__tensors_add_bulk() for a reader whose tensors share few shapes:
 * *sid < 0 (a shape not seen yet) adds as it does and sets *sid to the
 * list's id of the shape; a later tensor of the same shape passes that id
 * back and skips the shape's checks and lookup (same messages, same list). */
int dbuf__tensors_add_bulk_as(struct dbuf_tensors *t, const char *name, size_t len, int ndim,
                              const int64_t *dims, int64_t *sid, dbuf_diag_t *diag);
/* The last name added ("" and 0 for an empty list) and its length. */
const char *dbuf__tensors_last_name(const struct dbuf_tensors *t, size_t *len);
/* dbuf__tensors_add_bulk_as() of a front-coded name (a decoder's): the
 * first pre bytes of the last name added (pre <= its length), then the
 * suflen bytes at suf (no NUL among them: the caller's check).  Same
 * checks, messages and list; in place (no copy of the name but into the
 * name block) when the shape was seen, room was reserved and the new bytes
 * are printable ASCII after a whole character; else the name is built in
 * *scratch (*scratch_cap bytes, grown here; the caller frees it). */
int dbuf__tensors_add_front(struct dbuf_tensors *t, size_t pre, const char *suf,
                            size_t suflen, int ndim, const int64_t *dims, int64_t *sid,
                            char **scratch, int64_t *scratch_cap, dbuf_diag_t *diag);
/* Room for bytes more bytes of names (NULs included) so that the name
 * block is never copied as it grows; dbuf__tensors_trim() gives back what
 * was not used.  0, DBUF_EINVAL, DBUF_EOVERFLOW, DBUF_ENOMEM. */
int dbuf__tensors_reserve_names(struct dbuf_tensors *t, int64_t bytes);
/* The list's names, for a bulk reader that checks them for duplicates as
 * they come (strmap.h: dbuf__strmap_check_to()). */
struct dbuf__strmap;
const struct dbuf__strmap *dbuf__tensors_names(const struct dbuf_tensors *t);

/* The list's table of distinct shapes (internal): the shape id of tensor
 * id (ids in order of first use), how many shapes, and a name's length
 * without strlen.  id must be in range. */
uint32_t dbuf__tensors_shape_id(const struct dbuf_tensors *t, int64_t id);
DBUF__SHARED int64_t dbuf__tensors_nshapes(const struct dbuf_tensors *t);
/* The dims of all the distinct shapes together, and the bytes of all the
 * names with their NULs. */
DBUF__SHARED int64_t dbuf__tensors_ndims(const struct dbuf_tensors *t);
DBUF__SHARED int64_t dbuf__tensors_name_bytes(const struct dbuf_tensors *t);
/* The row size, element count and rows (dim 0) of shape sid of the list's
 * table (in range), and every tensor's shape id ([count]). */
int64_t dbuf__tensors_shape_row_elems(const struct dbuf_tensors *t, int64_t sid);
int64_t dbuf__tensors_shape_numel(const struct dbuf_tensors *t, int64_t sid);
int64_t dbuf__tensors_shape_rows(const struct dbuf_tensors *t, int64_t sid);
const uint32_t *dbuf__tensors_shape_ids(const struct dbuf_tensors *t);
/* Every tensor's dtype ([count], dbuf_dtype_t values, DBUF_DTYPE_NONE where
 * none was given). */
const uint8_t *dbuf__tensors_dtypes(const struct dbuf_tensors *t);
size_t dbuf__tensors_name_len(const struct dbuf_tensors *t, int64_t id);

/* Checked allocation of n elements of size sz (NULL for n*sz overflow);
 * arrays of 4 MiB and more are advised huge pages (dbuf__advise_huge: the
 * 2 MiB-aligned interior of [p, p + len), advice only). */
void dbuf__advise_huge(void *p, size_t len);
void *dbuf__calloc(int64_t n, size_t sz);
DBUF__SHARED void *dbuf__mallocn(int64_t n, size_t sz); /* comm: messages */
void *dbuf__reallocn(void *p, int64_t n, size_t sz);
/* Warm blocks: memory faulted in ahead, on a thread that has time now, for
 * large allocations it knows it will make soon (a receiver told the sizes
 * of a message before it comes: dbuf_comm_announce_plan()); on this kind
 * of machine faulting in fresh memory costs more than the work on it.
 * dbuf__warm_add() keeps, for the calling thread, a zeroed block of hi
 * bytes whose first lo are faulted in (huge-page advised first); the next
 * dbuf__mallocn(), dbuf__calloc() or dbuf__reallocn(NULL, ...) of this
 * thread for lo to hi bytes takes it (a block of exactly the size first)
 * and frees it as usual.  dbuf__warm_release() frees the blocks not taken,
 * dbuf__warm_count() counts them, dbuf__warm_stats() counts the blocks this
 * thread made and had taken so far (tests).  0, DBUF_EINVAL or DBUF_ENOMEM
 * (also with DBUF__WARM_BLOCKS held, and when MADV_POPULATE_WRITE fails
 * other than for lack of support: the block is given up, not touched page
 * by page; pages are touched one by one only where the kernel or the build
 * lacks the call). */
#define DBUF__WARM_BLOCKS 8
DBUF__SHARED int dbuf__warm_add(int64_t lo, int64_t hi);
DBUF__SHARED void dbuf__warm_release(void);
DBUF__SHARED int dbuf__warm_count(void);
DBUF__SHARED void dbuf__warm_stats(int64_t *made, int64_t *taken);
/* A malloc'd copy of n elements of size sz (NULL on failure). */
void *dbuf__memdup(const void *src, int64_t n, size_t sz);

/* Prefaulting: on this kind of machine the first touch of fresh memory
 * (the kernel clearing pages) costs more than the work of a reader on
 * them.  The thread that fills a list, while it waits for more to add (a
 * reader thread parses), faults in ahead the pages the list will write
 * as it grows into its reservation (madvise MADV_POPULATE_WRITE: the
 * contents never change).  dbuf__tensors_prefault_init() takes the
 * addresses once, after the list's reservations; dbuf__prefault_to() is
 * given how many tensors and name bytes (NULs included) the list will
 * soon hold: the per-tensor arrays and the name block are faulted in up to
 * there (a step more), the name index whole (its writes are random) once
 * there are tensors enough to touch nearly all its pages; at most `most`
 * bytes a call, so that the caller looks for its work often.  It returns 1
 * when it faulted in anything, 0 when there was nothing to do.  Stale
 * addresses (the list grew past its reservation) fault in nothing that
 * matters: no contents change.  Without kernel support (or after any
 * failure) it does nothing. */
#define DBUF__PREFAULT_REGIONS 5
typedef struct dbuf__prefault {
  struct {
    char *base;
    size_t len, done;
    int per; /* bytes per tensor; 0: name bytes; -1: a key index, random writes */
  } r[DBUF__PREFAULT_REGIONS];
  int n, off;
} dbuf__prefault_t;
void dbuf__tensors_prefault_init(const struct dbuf_tensors *t, dbuf__prefault_t *pf);
int dbuf__prefault_to(dbuf__prefault_t *pf, int64_t tensors, int64_t name_bytes,
                      size_t most);
/* Tests only: called by the adding thread of a threaded shapes read after
 * each prefault it made while it waited for a batch, with the pipe
 * unlocked and what dbuf__prefault_to() returned (NULL: nothing). */
DBUF__SHARED extern void (*dbuf__shapes_wait_hook)(int did);

/*
 * A layout or plan message handed on as it is written, without the whole
 * message in memory (internal; libdbuf-mpi sends it).  begin(arg, total)
 * comes once the length is known and nothing but the sink can fail any
 * more; then bytes(arg, p, n) with windows of exactly `window` bytes, the
 * last one shorter.  begin may be NULL; bytes NULL drops the bytes (the
 * checksum alone).  Returns 0 (*sum, when not NULL, the trailer), a
 * failure of begin or bytes, or the encoder's (before begin, diag filled).
 * note: the plan's layouts remember their checksums, so that
 * dbuf_wire_digest() costs nothing (the sender's own plan, which no other
 * thread reads meanwhile).
 */
typedef struct {
  int (*begin)(void *arg, int64_t total);
  int (*bytes)(void *arg, const void *p, int64_t n);
  void *arg;
  int64_t window;
} dbuf__wire_sink_t;
struct dbuf_layout;
struct dbuf_plan;
DBUF__SHARED int dbuf__wire_send(const struct dbuf_layout *l, const dbuf__wire_sink_t *sink,
                                 uint64_t *sum, dbuf_diag_t *diag);
DBUF__SHARED int dbuf__wire_plan_send(const struct dbuf_plan *p, const dbuf__wire_sink_t *sink,
                                      uint64_t *sum, int note, dbuf_diag_t *diag);

/*
 * A plan message decoded as it is received (internal; libdbuf-mpi's
 * receivers): create with the message's length, feed the bytes in so far
 * (msg the whole message's buffer, have its bytes present, growing) after
 * every window, then decode the whole message with what was done ahead:
 * the checksums hashed window by window, each layout's tensor list built
 * while its names arrive.  The decode gives exactly what
 * dbuf_wire_plan_decode() gives for the same bytes (the same checks and
 * messages; out of memory aside: a list whose names were checked as they
 * came needs no name index at the end, one allocation fewer); feeding
 * refuses nothing and cannot fail.  A head start is taken once: a second
 * decode of the same rx works from the bytes.  Memory: each layout framed
 * so far (not as many as the header claims), its hash state until its
 * bytes are all in, its list until the decode takes it.
 */
typedef struct dbuf__wire_rx dbuf__wire_rx_t;
DBUF__SHARED int dbuf__wire_rx_create(int64_t total, dbuf__wire_rx_t **rx);
DBUF__SHARED void dbuf__wire_rx_feed(dbuf__wire_rx_t *rx, const void *msg, int64_t have);
DBUF__SHARED int dbuf__wire_rx_plan_decode(dbuf__wire_rx_t *rx, const void *msg, int64_t len,
                                           struct dbuf_plan **out, dbuf_diag_t *diag);
DBUF__SHARED void dbuf__wire_rx_destroy(dbuf__wire_rx_t *rx);
/* Warm blocks (dbuf__warm_add()) for what a receiver's decode of a plan
 * message allocates, told before it comes (dbuf_comm_announce_plan()): the
 * plan's list has n tensors, name_bytes bytes of names with their NULs,
 * nshapes distinct shapes of ndims dims together, and its layouts are of
 * kind (0 unknown).  Sized exactly for a plan of one buffer (the message
 * within a range: at least its records and offsets, at most every byte of
 * every name and a margin); a receiver's decoder (dbuf__wire_rx_feed())
 * frees them once the message's header says it has more buffers.
 * The numbers come from another rank: each is checked, every sum and
 * product too; nothing is made of numbers no plan has (n from 1 to 2^31 -
 * 1, at least 2 name bytes a tensor, shapes from 1 to n, 1 to
 * DBUF_MAX_DIMS dims a shape), nor for names of more than 4 KiB on
 * average.  0 (blocks held by the calling thread), DBUF_EINVAL,
 * DBUF_EOVERFLOW or DBUF_ENOMEM (then none held). */
DBUF__SHARED int dbuf__wire_rx_warm(int64_t n, int64_t name_bytes, int64_t nshapes,
                                    int64_t ndims, int kind);
/* How many layouts' tensor lists, built ahead, a decode took (tests). */
DBUF__SHARED int64_t dbuf__wire_rx_ahead(const dbuf__wire_rx_t *rx);

/*
 * A layout's offset order without making it (internal): NULL when it is
 * the identity (offsets that rise with the tensor ids: unpadded layouts,
 * not padded ones), read through DBUF__AT().  The public
 * dbuf_layout_order() makes that identity an array the first time.
 */
DBUF__SHARED const int64_t *dbuf__layout_order_or_null(const struct dbuf_layout *l);
#define DBUF__AT(order, p) ((order) != NULL ? (order)[p] : (int64_t)(p))

/* The stores of pattern fills of 4 MiB and more (src/core/pattern.c): 0
 * streamed where the page was faulted in already, cached elsewhere (the
 * default); 1 always streamed, 2 always cached; set >= 0 sets it first
 * (for the tests).  resident: whether the page holding p has been faulted
 * in (0 where that cannot be told, and where the fill never streams).
 * last_streamed: bytes the calling thread's last fill wrote streamed. */
DBUF__SHARED int dbuf__pattern_stores(int set);
DBUF__SHARED int dbuf__pattern_resident(const void *p);
DBUF__SHARED int64_t dbuf__pattern_last_streamed(void);

#endif /* DBUF_CORE_INTERNAL_H */
