/* UTF-8 text: the one check of well-formed sequences, and of names (tensor
 * and unit names), which are written into JSON and must read back. */
#include "core_internal.h"

#include <string.h>

size_t
dbuf__utf8_len(const unsigned char *p, size_t avail)
{
  size_t n;
  unsigned lo = 0x80, hi = 0xbf;
  if (avail == 0)
    return 0;
  if (p[0] < 0x80)
    return 1;
  if (p[0] >= 0xc2 && p[0] <= 0xdf)
    n = 2;
  else if (p[0] >= 0xe0 && p[0] <= 0xef) {
    n = 3;
    lo = p[0] == 0xe0 ? 0xa0 : 0x80; /* no overlong form */
    hi = p[0] == 0xed ? 0x9f : 0xbf; /* no surrogate */
  } else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
    n = 4;
    lo = p[0] == 0xf0 ? 0x90 : 0x80;
    hi = p[0] == 0xf4 ? 0x8f : 0xbf; /* nothing past U+10FFFF */
  } else
    return 0;
  if (n > avail || p[1] < lo || p[1] > hi)
    return 0;
  for (size_t k = 2; k < n; k++)
    if (p[k] < 0x80 || p[k] > 0xbf)
      return 0;
  return n;
}

/* 8 bytes a step: a high bit where a byte is below '!' (0x21) or above '~'
 * (0x7e), the "has less" and "has more" word tests. */
int
dbuf__ascii_graph(const unsigned char *p, size_t n)
{
  const uint64_t ones = UINT64_C(0x0101010101010101), highs = ones << 7;
  uint64_t bad = 0;
  size_t i = 0;
  for (; n >= 8;) {
    uint64_t w;
    if (i + 8 > n)
      i = n - 8; /* the last 8 bytes, some of them seen already */
    memcpy(&w, p + i, 8);
    bad |= ((w - ones * 0x21) & ~w) | ((w + ones * (127 - 0x7e)) | w);
    if ((i += 8) == n)
      break;
  }
  bad &= highs;
  for (; i < n; i++) /* fewer than 8 bytes */
    bad |= (unsigned)(p[i] - 0x21u) >= 0x5eu;
  return !bad;
}

dbuf__name_fault_t
dbuf__name_check(const char *name, size_t len, size_t *at)
{
  const unsigned char *p = (const unsigned char *)name, *e = p + len;
  if (len == 0)
    return DBUF__NAME_EMPTY;
  /* Most names are printable ASCII, which one branch-free pass proves. */
  if (dbuf__ascii_graph(p, len))
    return DBUF__NAME_OK;
  for (const unsigned char *q = p; q < e;) {
    size_t n = dbuf__utf8_len(q, (size_t)(e - q));
    if (n == 0 || (n == 1 && (*q <= ' ' || *q == 0x7f))) {
      if (at != NULL)
        *at = (size_t)(q - p);
      return n == 0 ? DBUF__NAME_NOT_UTF8 : DBUF__NAME_BLANK;
    }
    q += n;
  }
  return DBUF__NAME_OK;
}

const char *
dbuf__name_fault_str(dbuf__name_fault_t f)
{
  switch (f) {
  case DBUF__NAME_OK:
    break;
  case DBUF__NAME_EMPTY:
    return "is empty";
  case DBUF__NAME_NOT_UTF8:
    return "is not UTF-8";
  case DBUF__NAME_BLANK:
    return "has a blank or control character";
  }
  return "is fine";
}
