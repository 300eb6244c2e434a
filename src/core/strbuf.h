/*
 * A growable string buffer for the writers of the core (layout JSON,
 * reports).  Errors are sticky: after a failed allocation every call is a
 * no-op and dbuf__sb_finish() returns DBUF_ENOMEM, so writers check once.
 */
#ifndef DBUF_STRBUF_H
#define DBUF_STRBUF_H

#include "core_internal.h"

#include <stddef.h>

typedef struct dbuf__sb {
  char *p;
  size_t len, cap;
  int failed;
} dbuf__sb_t;

#define DBUF__SB_INIT {NULL, 0, 0, 0}

/* Append formatted text. */
void dbuf__sb_printf(dbuf__sb_t *b, const char *fmt, ...) DBUF__PRINTF(2, 3);
/* Append n bytes of s. */
void dbuf__sb_append(dbuf__sb_t *b, const char *s, size_t n);
/* Append a NUL-terminated string. */
void dbuf__sb_puts(dbuf__sb_t *b, const char *s);
/* Append n copies of c. */
void dbuf__sb_fill(dbuf__sb_t *b, char c, size_t n);
/* Append s as a JSON string literal (quotes included). */
void dbuf__sb_json_string(dbuf__sb_t *b, const char *s);
/* Append s with the XML special characters escaped. */
void dbuf__sb_xml(dbuf__sb_t *b, const char *s);
/*
 * Hand the text over: *text is malloc'd and NUL-terminated (also when
 * empty).  Returns 0, or DBUF_ENOMEM (the buffer is freed either way).
 */
int dbuf__sb_finish(dbuf__sb_t *b, char **text, size_t *len);
/* Free the buffer (for error paths). */
void dbuf__sb_free(dbuf__sb_t *b);

#endif /* DBUF_STRBUF_H */
