/*
 * dbuf-shard: reading shape lists.
 *
 * Not collective.  Two formats:
 *  - text: one "NAME SHAPE [DTYPE]" a line, SHAPE "d0xd1x..." or "d0",
 *    DTYPE an optional element type (dbuf/dtype.h names: bf16, fp32, F32...)
 *    kept as the tensor's dtype; blank lines and '#' comments (whole line or
 *    at the end) allowed;
 *  - JSON: an array of {"name": "...", "shape": [d0, d1, ...]} with an
 *    optional "dtype": "NAME".
 * The format is chosen by content: a first non-blank character '[' is JSON.
 * Errors are reported as "FILE:LINE: what is wrong" in diag.
 *
 * Thread safety: no global state; every function may run in any thread at
 * any time.  dbuf_shapes_read() of a text file of 1 MiB and more starts one
 * thread of its own, which reads and parses while the calling thread builds
 * the list, and joins it before it returns (if the thread cannot start, the
 * caller's thread does both); the list and the messages are the same.
 * Ownership: dbuf_shapes_read() and dbuf_shapes_parse() return a tensor list
 * freed with dbuf_tensors_destroy(); dbuf_file_read_all() returns data and
 * dbuf_ints_read() values freed with dbuf_free().
 */
#ifndef DBUF_SHAPES_IO_H
#define DBUF_SHAPES_IO_H

#include "dbuf/error.h"
#include "dbuf/tensors.h"

#include <stdio.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Largest text input read (shape lists, layout JSON, owners and order
 * files): 1 GiB.  Only regular files are read (and stdin for "-"); a named
 * pipe, a device or a directory is refused before it is opened.
 */
#define DBUF_INPUT_MAX_BYTES (INT64_C(1) << 30)

/**
 * \brief Read a shape list from a file ("-" reads stdin).
 * \param[out] digest  may be NULL: a 64-bit hash of the bytes read, so ranks
 *                     can compare that they see the same input
 * \return 0, or DBUF_ENOTFOUND (no such file), DBUF_EIO (cannot open or
 *   read, not a regular file), DBUF_EFORMAT (over DBUF_INPUT_MAX_BYTES),
 *   DBUF_EPARSE (also: no tensors at all), DBUF_ESHAPE, DBUF_EDUP,
 *   DBUF_EOVERFLOW, DBUF_ENOMEM; diag says "FILE:LINE: ..."
 */
DBUF_EXPORT int dbuf_shapes_read(const char *path, dbuf_tensors_t **out,
                                 uint64_t *digest, dbuf_diag_t *diag);

/**
 * \brief Parse a shape list held in memory; name is used in messages.
 * A list without any tensor is DBUF_EPARSE ("NAME: no tensors ...").
 * \return as dbuf_shapes_read()
 */
DBUF_EXPORT int dbuf_shapes_parse(const char *name, const char *text, size_t len,
                                  dbuf_tensors_t **out, dbuf_diag_t *diag);

/**
 * \brief Read a whole file ("-" = stdin) into a NUL-terminated buffer, at
 * most DBUF_INPUT_MAX_BYTES; only a regular file (or stdin) is read.
 * \param[out] data  malloc'd, freed by the caller with dbuf_free()
 * \return 0, or DBUF_ENOTFOUND, DBUF_EIO (diag names the file and the
 *   system error, or that it is not a regular file), DBUF_EFORMAT (over the
 *   limit), DBUF_ENOMEM
 */
DBUF_EXPORT int dbuf_file_read_all(const char *path, char **data, size_t *len,
                                   dbuf_diag_t *diag);

/**
 * \brief What kind of file a stat(2) mode says, for messages: "a regular
 * file", "a directory", "a named pipe", "a character device", "a block
 * device", "a socket", "a symbolic link" (an lstat(2) mode), else "an
 * unknown kind of file".
 * \param[in] mode  st_mode (only its S_IFMT bits are read)
 * \return a static string, never NULL
 */
DBUF_EXPORT const char *dbuf_file_kind(mode_t mode);

/**
 * \brief Read a list of integers, one a line ('#' comments, blank lines ok),
 * e.g. an owners file.
 * \param[out] vals  malloc'd array, freed by the caller with dbuf_free()
 * \return 0, or the errors of dbuf_file_read_all(), DBUF_EPARSE
 *   ("FILE:LINE: ..."), DBUF_ENOMEM
 */
DBUF_EXPORT int dbuf_ints_read(const char *path, int64_t **vals, int64_t *n,
                               dbuf_diag_t *diag);

/** \brief 64-bit FNV-1a hash of a byte range, chained from seed (use 0 to start). */
DBUF_EXPORT uint64_t dbuf_hash64(const void *data, size_t len, uint64_t seed);

#ifdef __cplusplus
}
#endif

#endif /* DBUF_SHAPES_IO_H */
