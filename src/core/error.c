/* The error table: messages and names, generated from DBUF_ERRNO_MAP. */
#include "core_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* The table numbers its rows -1, -2, ... in order, so that DBUF_ERRNO_MAX,
 * which counts the rows, is one past the last code. */
enum {
#define DBUF__ERR_POS(name, val, msg) DBUF__POS_##name,
  DBUF_ERRNO_MAP(DBUF__ERR_POS)
#undef DBUF__ERR_POS
};
#define DBUF__ERR_CHECK(name, val, msg)                                        \
  _Static_assert((val) == -(DBUF__POS_##name + 1),                             \
                 "DBUF_" #name " is not numbered by its row in DBUF_ERRNO_MAP");
DBUF_ERRNO_MAP(DBUF__ERR_CHECK)
#undef DBUF__ERR_CHECK

const char *
dbuf_strerror(int err)
{
  switch (err) {
  case 0:
    return "success";
#define DBUF__ERR_MSG(name, val, msg)                                          \
  case DBUF_##name:                                                            \
    return msg;
    DBUF_ERRNO_MAP(DBUF__ERR_MSG)
#undef DBUF__ERR_MSG
  default:
    return "unknown error";
  }
}

const char *
dbuf_err_name(int err)
{
  switch (err) {
  case 0:
    return "0";
#define DBUF__ERR_NAME(name, val, msg)                                         \
  case DBUF_##name:                                                            \
    return "DBUF_" #name;
    DBUF_ERRNO_MAP(DBUF__ERR_NAME)
#undef DBUF__ERR_NAME
  default:
    return "DBUF_UNKNOWN";
  }
}

void
dbuf_diag_clear(dbuf_diag_t *diag)
{
  if (diag == NULL)
    return;
  diag->code = 0;
  diag->msg[0] = '\0';
}

size_t
dbuf_escape_ctl(char *dst, size_t len, const char *src)
{
  static const char hex[] = "0123456789abcdef";
  size_t need = 0, used = 0;
  int full = dst == NULL;
  if (src == NULL)
    src = "";
  const unsigned char *p = (const unsigned char *)src, *end = p + strlen(src);
  while (p < end) {
    /* A character is copied whole; a control byte, or a byte outside every
     * well-formed UTF-8 sequence, is written as \xNN. */
    size_t n = dbuf__utf8_len(p, (size_t)(end - p));
    int esc = n == 0 || *p < 0x20 || *p == 0x7f;
    size_t w = esc ? 4 : n;
    need += w;
    if (full || used + w >= len) {
      full = 1; /* truncated: keep counting */
      p += esc ? 1 : n;
      continue;
    }
    if (esc) {
      dst[used++] = '\\';
      dst[used++] = 'x';
      dst[used++] = hex[*p >> 4];
      dst[used++] = hex[*p & 15];
      p++;
    } else {
      memcpy(dst + used, p, n);
      used += n;
      p += n;
    }
  }
  if (dst != NULL && len > 0)
    dst[used] = '\0';
  return need;
}

int
dbuf__diag(dbuf_diag_t *diag, int code, const char *fmt, ...)
{
  if (diag != NULL) {
    char raw[DBUF_DIAG_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    dbuf_escape_ctl(diag->msg, sizeof diag->msg, raw);
    diag->code = code;
  }
  return code;
}
