/* The growable string buffer of the core writers. */
#include "strbuf.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void
sb_fail(dbuf__sb_t *b, int code)
{
  b->failed = 1;
  b->code = code;
}

/* Hand the text held so far to the sink; the buffer is empty after. */
static int
sb_flush(dbuf__sb_t *b)
{
  if (b->len > 0 && b->sink(b->arg, b->p, b->len) != 0) {
    sb_fail(b, DBUF_EIO);
    return -1;
  }
  b->len = 0;
  return 0;
}

/* Make room for more bytes plus the terminating NUL; a streaming buffer
 * first hands over its text when the chunk would be full. */
static int
sb_reserve(dbuf__sb_t *b, size_t more)
{
  if (b->failed)
    return -1;
  if (b->sink != NULL && b->len > 0 && b->len + more >= DBUF__SB_CHUNK &&
      sb_flush(b) != 0)
    return -1;
  if (b->cap - b->len > more)
    return 0;
  if (more > SIZE_MAX / 4 - b->len) {
    sb_fail(b, DBUF_ENOMEM);
    return -1;
  }
  size_t cap = b->cap ? b->cap : 4096;
  while (cap - b->len <= more)
    cap *= 2;
  char *np = realloc(b->p, cap);
  if (np == NULL) {
    sb_fail(b, DBUF_ENOMEM);
    return -1;
  }
  b->p = np;
  b->cap = cap;
  return 0;
}

/* Whether fmt holds only the conversions %lld, %d, %s and %% (the ones the
 * writers use per record), which append_simple() writes by hand. */
static int
simple_format(const char *fmt)
{
  for (const char *p = fmt; (p = strchr(p, '%')) != NULL;) {
    if (p[1] == 'd' || p[1] == 's' || p[1] == '%')
      p += 2;
    else if (p[1] == 'l' && p[2] == 'l' && p[3] == 'd')
      p += 4;
    else
      return 0;
  }
  return 1;
}

void
dbuf__sb_int(dbuf__sb_t *b, long long v)
{
  char d[24];
  int i = (int)sizeof d;
  unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
  do {
    d[--i] = (char)('0' + u % 10);
    u /= 10;
  } while (u != 0);
  if (v < 0)
    d[--i] = '-';
  dbuf__sb_append(b, d + i, sizeof d - (size_t)i);
}

/* vsnprintf's output for a simple_format(), without its per-call cost. */
static void
append_simple(dbuf__sb_t *b, const char *fmt, va_list ap)
{
  const char *p = fmt;
  for (const char *q; (q = strchr(p, '%')) != NULL;) {
    dbuf__sb_append(b, p, (size_t)(q - p));
    if (q[1] == 'd') {
      dbuf__sb_int(b, va_arg(ap, int));
      p = q + 2;
    } else if (q[1] == 's') {
      const char *str = va_arg(ap, const char *);
      dbuf__sb_puts(b, str != NULL ? str : "(null)"); /* as glibc prints it */
      p = q + 2;
    } else if (q[1] == '%') {
      dbuf__sb_append(b, "%", 1);
      p = q + 2;
    } else {
      dbuf__sb_int(b, va_arg(ap, long long));
      p = q + 4;
    }
  }
  dbuf__sb_puts(b, p);
}

void
dbuf__sb_printf(dbuf__sb_t *b, const char *fmt, ...)
{
  va_list ap;
  if (simple_format(fmt)) {
    va_start(ap, fmt);
    append_simple(b, fmt, ap);
    va_end(ap);
    return;
  }
  for (int attempt = 0; attempt < 2 && !b->failed; attempt++) {
    va_start(ap, fmt);
    int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0,
                      fmt, ap);
    va_end(ap);
    if (n < 0) {
      sb_fail(b, DBUF_ENOMEM);
      return;
    }
    if (b->p && (size_t)n < b->cap - b->len) {
      b->len += (size_t)n;
      return;
    }
    if (sb_reserve(b, (size_t)n + 1) != 0)
      return;
  }
}

void
dbuf__sb_append(dbuf__sb_t *b, const char *s, size_t n)
{
  if (sb_reserve(b, n) != 0)
    return;
  memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = '\0';
}

void
dbuf__sb_puts(dbuf__sb_t *b, const char *s)
{
  dbuf__sb_append(b, s, strlen(s));
}

void
dbuf__sb_fill(dbuf__sb_t *b, char c, size_t n)
{
  if (sb_reserve(b, n) != 0)
    return;
  memset(b->p + b->len, c, n);
  b->len += n;
  b->p[b->len] = '\0';
}

/* The bytes from p on that a JSON string holds as they are: characters of
 * UTF-8 but '"', '\\' and the control characters. */
static size_t
json_plain(const unsigned char *p, const unsigned char *end)
{
  const unsigned char *q = p;
  while (q < end) {
    size_t n;
    if (*q < 0x80)
      n = *q >= 0x20 && *q != '"' && *q != '\\';
    else
      n = dbuf__utf8_len(q, (size_t)(end - q));
    if (n == 0)
      break;
    q += n;
  }
  return (size_t)(q - p);
}

void
dbuf__sb_json_string(dbuf__sb_t *b, const char *s)
{
  const unsigned char *p = (const unsigned char *)s, *end = p + strlen(s);
  dbuf__sb_append(b, "\"", 1);
  while (p < end && !b->failed) {
    size_t run = json_plain(p, end); /* appended at once */
    dbuf__sb_append(b, (const char *)p, run);
    if ((p += run) == end)
      break;
    unsigned char c = *p++;
    if (c == '"' || c == '\\')
      dbuf__sb_printf(b, "\\%c", c);
    else if (c < 0x20)
      dbuf__sb_printf(b, "\\u%04x", c);
    else /* not UTF-8: JSON cannot hold the byte; the text names it */
      dbuf__sb_printf(b, "\\\\x%02x", c);
  }
  dbuf__sb_append(b, "\"", 1);
}

void
dbuf__sb_xml(dbuf__sb_t *b, const char *s)
{
  for (; *s && !b->failed; s++) {
    switch (*s) {
    case '&':
      dbuf__sb_puts(b, "&amp;");
      break;
    case '<':
      dbuf__sb_puts(b, "&lt;");
      break;
    case '>':
      dbuf__sb_puts(b, "&gt;");
      break;
    case '"':
      dbuf__sb_puts(b, "&quot;");
      break;
    case '\'':
      dbuf__sb_puts(b, "&apos;");
      break;
    default:
      dbuf__sb_append(b, s, 1);
    }
  }
}

void
dbuf__sb_init_sink(dbuf__sb_t *b, dbuf__sb_sink_fn sink, void *arg)
{
  *b = (dbuf__sb_t)DBUF__SB_INIT;
  b->sink = sink;
  b->arg = arg;
}

int
dbuf__sb_drain(dbuf__sb_t *b)
{
  assert(b->sink != NULL);
  if (!b->failed)
    sb_flush(b);
  /* A writer that marks the buffer failed itself ran out of memory. */
  int rc = !b->failed ? 0 : b->code != 0 ? b->code : DBUF_ENOMEM;
  dbuf__sb_free(b);
  return rc;
}

int
dbuf__sb_finish(dbuf__sb_t *b, char **text, size_t *len)
{
  if (sb_reserve(b, 0) == 0)
    b->p[b->len] = '\0'; /* an empty text gets its NUL too */
  assert(b->sink == NULL);
  if (b->failed) {
    dbuf__sb_free(b);
    return DBUF_ENOMEM;
  }
  *text = b->p;
  *len = b->len;
  b->p = NULL;
  b->len = b->cap = 0;
  return 0;
}

void
dbuf__sb_free(dbuf__sb_t *b)
{
  free(b->p);
  b->p = NULL;
  b->len = b->cap = 0;
}
