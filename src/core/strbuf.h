/*
 * A growable string buffer for the writers of the core (layout JSON,
 * reports).  Errors are sticky: after a failed allocation every call is a
 * no-op and dbuf__sb_finish() returns DBUF_ENOMEM, so writers check once.
 */
#ifndef DBUF_STRBUF_H
#define DBUF_STRBUF_H

#include "core_internal.h"

#include <stddef.h>

/* Where a streaming buffer hands its text: 0, or non-zero for a failure. */
typedef int (*dbuf__sb_sink_fn)(void *arg, const char *data, size_t len);

typedef struct dbuf__sb {
  char *p;
  size_t len, cap;
  int failed;            /* sticky: an allocation or the sink failed */
  int code;              /* the code of the failure: DBUF_ENOMEM or DBUF_EIO */
  dbuf__sb_sink_fn sink; /* NULL: the text stays in p (dbuf__sb_finish) */
  void *arg;
} dbuf__sb_t;

#define DBUF__SB_INIT {NULL, 0, 0, 0, 0, NULL, NULL}

/*
 * A streaming buffer: the text goes to sink(arg, ...) in chunks of about
 * DBUF__SB_CHUNK bytes (more only for one longer append), so the memory it
 * holds is bounded.  End with dbuf__sb_drain().
 */
#define DBUF__SB_CHUNK ((size_t)64 << 10)
void dbuf__sb_init_sink(dbuf__sb_t *b, dbuf__sb_sink_fn sink, void *arg);

/* Append formatted text. */
void dbuf__sb_printf(dbuf__sb_t *b, const char *fmt, ...) DBUF__PRINTF(2, 3);
/* Append n bytes of s. */
void dbuf__sb_append(dbuf__sb_t *b, const char *s, size_t n);
/* Append a NUL-terminated string. */
void dbuf__sb_puts(dbuf__sb_t *b, const char *s);
/* Append the decimal digits of v (as "%lld" prints it). */
void dbuf__sb_int(dbuf__sb_t *b, long long v);
/* Append n copies of c. */
void dbuf__sb_fill(dbuf__sb_t *b, char c, size_t n);
/* Append s as a JSON string literal (quotes included), valid whatever s
 * holds: control characters as \u00NN, and a byte that is not part of a
 * UTF-8 character (JSON holds no other) as the four characters \xNN. */
void dbuf__sb_json_string(dbuf__sb_t *b, const char *s);
/* Append s with the XML special characters escaped. */
void dbuf__sb_xml(dbuf__sb_t *b, const char *s);
/*
 * Hand the text over: *text is malloc'd and NUL-terminated (also when
 * empty).  Returns 0, or DBUF_ENOMEM (the buffer is freed either way).
 */
int dbuf__sb_finish(dbuf__sb_t *b, char **text, size_t *len);
/*
 * Hand what a streaming buffer still holds to its sink and free it.
 * Returns 0, DBUF_ENOMEM, or DBUF_EIO (the sink failed).
 */
int dbuf__sb_drain(dbuf__sb_t *b);
/* Free the buffer (for error paths). */
void dbuf__sb_free(dbuf__sb_t *b);

#endif /* DBUF_STRBUF_H */
