/* The error table: messages and names, generated from DBUF_ERRNO_MAP. */
#include "core_internal.h"

#include <stdarg.h>
#include <stdio.h>

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

int
dbuf__diag(dbuf_diag_t *diag, int code, const char *fmt, ...)
{
  if (diag != NULL) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(diag->msg, sizeof diag->msg, fmt, ap);
    va_end(ap);
    diag->code = code;
  }
  return code;
}
