/*
 * dbuf-shard: the layout JSON schema (see README, "Layout JSON").
 *
 * Not collective.  Writing is deterministic: the same layout gives the same
 * bytes.  Reading accepts layouts written by dbuf-shard or by hand from
 * another framework; it checks the schema, not the invariants (run
 * dbuf_layout_validate() on the result).
 *
 * Thread safety: no global state; any thread, one layout shared read-only.
 * The writers format the lines of a layout of 65,536 tensors and more on
 * two threads (one of their own, joined before they return); the text is
 * the same, and a write callback is only ever called from the caller's
 * thread.
 * Ownership: dbuf_layout_to_json() returns text freed with dbuf_free();
 * dbuf_layout_write_json() and dbuf_plan_write_json() hand the same text to
 * a callback in bounded chunks and keep nothing;
 * dbuf_layout_from_json() copies what it needs from the input and returns a
 * layout freed with dbuf_layout_destroy().
 */
#ifndef DBUF_LAYOUT_JSON_H
#define DBUF_LAYOUT_JSON_H

#include "dbuf/layout.h"
#include "dbuf/plan.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Schema version written in "version". */
#define DBUF_LAYOUT_JSON_VERSION 1

/** Extra content of the JSON. */
enum {
  DBUF_JSON_PIECES = 1u << 0 /**< per-rank pieces under "ranks" */
};

/**
 * \brief Serialize a layout.
 * \param[out] text  malloc'd NUL-terminated JSON ending in a newline; dbuf_free()
 * \return 0, or DBUF_EINVAL, DBUF_ENOMEM
 */
DBUF_EXPORT int dbuf_layout_to_json(const dbuf_layout_t *l, unsigned flags,
                                    char **text, size_t *len);

/**
 * \brief Where the streaming writers hand their text: called with the next
 * len bytes of the document (len > 0), in order; data is valid only during
 * the call.  Return 0, or non-zero to stop the writer (DBUF_EIO).
 */
typedef int (*dbuf_write_fn)(void *arg, const char *data, size_t len);

/**
 * \brief Serialize a layout as dbuf_layout_to_json() does, byte for byte,
 * handing the text to write in chunks of about 64 KiB instead of building
 * it in memory (the memory used does not grow with the layout).
 *
 * Not collective.  On failure part of the document may have been written.
 * \return 0, or DBUF_EINVAL (NULL l or write), DBUF_ENOMEM, DBUF_EIO (write
 *   returned non-zero)
 */
DBUF_EXPORT int dbuf_layout_write_json(const dbuf_layout_t *l, unsigned flags,
                                       dbuf_write_fn write, void *arg);

/**
 * \brief Parse a layout JSON document; name is used in messages.
 * \return 0, or DBUF_EPARSE ("NAME:LINE: ...", or no tensors), DBUF_ESHAPE, DBUF_EDUP,
 *   DBUF_EOWNER, DBUF_ENRANKS, DBUF_ELAYOUT, DBUF_EOVERFLOW, DBUF_ENOMEM
 */
DBUF_EXPORT int dbuf_layout_from_json(const char *name, const char *text,
                                      size_t len, dbuf_layout_t **out,
                                      dbuf_diag_t *diag);

/** Schema version of a plan of several buffers ("buffers" array). */
#define DBUF_PLAN_JSON_VERSION 2

/**
 * \brief Serialize a plan: version 1 (the layout JSON above, byte for byte,
 * with a "dtype" member when the dtype is not bf16) for one buffer of the
 * unit "all"; version 2 otherwise: {"format", "version": 2, "buffers":
 * [{"unit", "dtype", then the members of a version 1 layout}, ...]}.
 * \param[out] text  malloc'd NUL-terminated JSON ending in a newline; dbuf_free()
 * \return 0, or DBUF_EINVAL (NULL, an empty plan), DBUF_ENOMEM
 */
DBUF_EXPORT int dbuf_plan_to_json(const dbuf_plan_t *p, unsigned flags, char **text,
                                  size_t *len);

/**
 * \brief Serialize a plan as dbuf_plan_to_json() does, byte for byte,
 * through write in chunks of about 64 KiB (see dbuf_layout_write_json()).
 *
 * Not collective.  On failure part of the document may have been written.
 * \return 0, or DBUF_EINVAL (NULL, an empty plan), DBUF_ENOMEM, DBUF_EIO
 */
DBUF_EXPORT int dbuf_plan_write_json(const dbuf_plan_t *p, unsigned flags, dbuf_write_fn write,
                                     void *arg);

/**
 * \brief Parse a layout JSON document of version 1 (one buffer, unit "all",
 * its "dtype" or bf16) or 2 into a plan (buffers without model ids); name
 * starts every message, a buffer's problems read "NAME: buffer UNIT/DTYPE:
 * ..." (or "NAME: buffers[I]: ..." before its unit and dtype are known).
 * Checks the schema, not the invariants (validate each buffer's layout).
 * \return 0, or the codes of dbuf_layout_from_json(), DBUF_EDUP (a unit and
 *   dtype twice), DBUF_ENRANKS (buffers of different dp_size)
 */
DBUF_EXPORT int dbuf_plan_from_json(const char *name, const char *text, size_t len,
                                    dbuf_plan_t **out, dbuf_diag_t *diag);

#ifdef __cplusplus
}
#endif

#endif /* DBUF_LAYOUT_JSON_H */
