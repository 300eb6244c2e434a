/*
 * dbuf-shard: error codes and diagnostics.
 *
 * Error rule, stated once for the whole API: every fallible function returns
 * an int, 0 on success or a negative DBUF_E* code.  Out-pointers are written
 * only on success.  Functions that take a dbuf_diag_t * fill it, when it is
 * not NULL, with one line for people that names what is wrong (the tensor,
 * the value, the rank, or the file and line).
 *
 * Thread safety: every function here may run in any thread at any time; a
 * dbuf_diag_t belongs to one call at a time.
 * Ownership: dbuf_strerror() and dbuf_err_name() return static strings; a
 * dbuf_diag_t is the caller's (usually on its stack); dbuf_free() frees the
 * buffers the library returns (listed at its declaration).
 *
 * Two codes mean the same thing in every function:
 *  - DBUF_ENOBUFS: a caller's output buffer (char *buf, size_t len) is too
 *    short (each function says what buf then holds).  (Functions
 *    that fill an array and report the total count instead, such as
 *    dbuf_layout_rank_pieces, return 0 and the count: ask, then allocate.)
 *  - DBUF_ECANCELED: a callback that may stop the work (a progress function)
 *    returned non-zero before the work was done.  A visitor that stops a
 *    search early (violations, differences) cancels nothing: the function
 *    still returns its verdict.
 *
 * Messages never repeat their context: a callee names the thing it checks
 * ("tensor a: duplicate name"), and a caller adds only what the callee
 * cannot know ("model.shapes:2: tensor a: duplicate name").
 */
#ifndef DBUF_ERROR_H
#define DBUF_ERROR_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) && defined(DBUF_BUILDING)
#define DBUF_EXPORT __attribute__((visibility("default")))
#else
#define DBUF_EXPORT
#endif

/* The one error table: name, value, message. */
#define DBUF_ERRNO_MAP(X)                                                      \
  X(EINVAL, -1, "invalid argument")                                            \
  X(ENOMEM, -2, "out of memory")                                               \
  X(EOVERFLOW, -3, "64-bit count overflow")                                    \
  X(ESHAPE, -4, "invalid tensor shape")                                        \
  X(EBLOCK, -5, "dim 0 not divisible by the block size")                       \
  X(ENRANKS, -6, "invalid rank count")                                         \
  X(EOWNER, -7, "invalid tensor owner")                                        \
  X(ERANGE, -8, "index out of range")                                          \
  X(ELAYOUT, -9, "layout violates an invariant")                               \
  X(EPARSE, -10, "input does not parse")                                       \
  X(EIO, -11, "input/output error")                                            \
  X(EFORMAT, -12, "malformed file format")                                     \
  X(ECHECKSUM, -13, "checksum mismatch")                                       \
  X(EVERSION, -14, "unsupported format version")                               \
  X(EDUP, -15, "duplicate name")                                               \
  X(ENOTFOUND, -16, "not found")                                               \
  X(EMPI, -17, "MPI call failed")                                              \
  X(ETOPO, -18, "hardware topology error")                                     \
  X(EBIND, -19, "memory or CPU binding failed")                                \
  X(EMLOCK, -20, "memory locking not permitted")                               \
  X(EMISMATCH, -21, "ranks disagree")                                          \
  X(EVERIFY, -22, "verification failed")                                       \
  X(EUNSUPPORTED, -23, "not supported")                                       \
  X(EPARALLEL, -24, "model not divisible by the parallel degree")              \
  X(ENOBUFS, -25, "output buffer too small")                                   \
  X(ECANCELED, -26, "stopped by the caller's callback")

/* One "+ 1" per row of the table: DBUF_ERRNO_MAX counts them. */
#define DBUF__ERR_COUNT(name, val, msg) +1

/**
 * Error codes; every one is negative.  The rows of DBUF_ERRNO_MAP are
 * numbered -1, -2, ... in order (error.c asserts it), so every code lies in
 * (DBUF_ERRNO_MAX, 0): DBUF_ERRNO_MAX is one past the last code, counted from
 * the table, and is itself no code.
 */
typedef enum dbuf_errno {
#define DBUF__ERR_ENUM(name, val, msg) DBUF_##name = (val),
  DBUF_ERRNO_MAP(DBUF__ERR_ENUM)
#undef DBUF__ERR_ENUM
  DBUF_ERRNO_MAX = -(1 DBUF_ERRNO_MAP(DBUF__ERR_COUNT))
} dbuf_errno_t;

/** \brief Static message for an error code; never NULL, also for unknown codes. */
DBUF_EXPORT const char *dbuf_strerror(int err);

/** \brief Static name ("DBUF_EINVAL") of an error code; never NULL. */
DBUF_EXPORT const char *dbuf_err_name(int err);

/** Room for one diagnostic line. */
#define DBUF_DIAG_LEN 512

/**
 * A diagnostic for people: one line naming what is wrong and where.
 * Owned by the caller; functions write it only when they fail.
 */
typedef struct dbuf_diag {
  int code;                 /**< the error code returned with it */
  char msg[DBUF_DIAG_LEN];  /**< NUL-terminated, no trailing newline */
} dbuf_diag_t;

/** \brief Clear a diagnostic (code 0, empty message). NULL is accepted. */
DBUF_EXPORT void dbuf_diag_clear(dbuf_diag_t *diag);

/**
 * \brief Copy src into dst (len bytes, always NUL-terminated when len > 0)
 * with every control byte (0x00-0x1f, 0x7f), and every byte that is not
 * part of a well-formed UTF-8 character, written as the four characters
 * \xNN, so that text read from a file stays one printable line of UTF-8
 * (JSON can carry it).  Characters are never cut by the truncation.  Every
 * diagnostic of the library is passed through it.  Not collective.
 * \return the length of the escaped string before truncation
 */
DBUF_EXPORT size_t dbuf_escape_ctl(char *dst, size_t len, const char *src);

/**
 * \brief Free a buffer the library returned to the caller (the text of
 * dbuf_layout_to_json() and dbuf_report_write(), the data of
 * dbuf_file_read_all(), the values of dbuf_ints_read(), the message of
 * dbuf_wire_encode() and dbuf_wire_plan_encode()).  NULL is accepted.  Not collective; any thread.
 *
 * Use it rather than free(): the buffer comes from the library's allocator,
 * which need not be the caller's.  Handles have their own destroy function.
 */
DBUF_EXPORT void dbuf_free(void *buf);

#ifdef __cplusplus
}
#endif

#endif /* DBUF_ERROR_H */
