/*
 * What the report writers share, below them: the walk over a rank's pieces
 * and the number formats (thousands separators, binary byte units).  It
 * calls no writer and nothing of report.c.
 */
#include "core_internal.h"
#include "report_internal.h"

#include <stdio.h>
#include <stdlib.h>

int
dbuf__rep_pieces(dbuf__rep_t *rep, int r)
{
  int64_t n;
  int rc = dbuf_layout_rank_pieces(rep->l, r, NULL, 0, &n);
  if (rc != 0)
    return rc;
  if (n > rep->cap) {
    dbuf_piece_t *p = dbuf__reallocn(rep->pc, n, sizeof *p);
    if (p == NULL)
      return DBUF_ENOMEM;
    rep->pc = p;
    rep->cap = n;
  }
  rc = dbuf_layout_rank_pieces(rep->l, r, rep->pc, rep->cap, &rep->np);
  if (rc == 0 && rep->np > rep->max_pieces)
    rep->max_pieces = rep->np;
  return rc;
}

int
dbuf__rep_digits(int64_t v)
{
  int d = 1;
  while (v >= 10) {
    v /= 10;
    d++;
  }
  return d;
}

const char *
dbuf_report_count(char *buf, size_t len, int64_t v)
{
  char tmp[32], out[32];
  int n = snprintf(tmp, sizeof tmp, "%lld", (long long)v);
  int neg = tmp[0] == '-', j = 0;
  if (buf == NULL || len == 0)
    return buf;
  if (neg)
    out[j++] = '-';
  for (int i = neg; i < n; i++) { /* 20 characters and 6 commas at most */
    out[j++] = tmp[i];
    int left = n - i - 1;
    if (left > 0 && left % 3 == 0)
      out[j++] = ',';
  }
  out[j] = '\0';
  snprintf(buf, len, "%s", out);
  return buf;
}

const char *
dbuf__rep_group(char buf[32], int64_t v)
{
  return dbuf_report_count(buf, 32, v);
}

static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};

/* v scaled to the largest binary unit it reaches (0 = bytes). */
static int
scale(int64_t v, double *x)
{
  int u = 0;
  double d = (double)v;
  while (d >= 1024.0 && u < 6) {
    d /= 1024.0;
    u++;
  }
  *x = d;
  return u;
}

const char *
dbuf_report_bytes(char *buf, size_t len, int64_t v)
{
  double x;
  int u = scale(v, &x);
  if (buf == NULL || len == 0)
    return buf;
  if (u == 0)
    snprintf(buf, len, "%lld B", (long long)v);
  else
    snprintf(buf, len, "%.2f %s", x, units[u]);
  return buf;
}

const char *
dbuf__rep_unit(char buf[24], int64_t v)
{
  char sh[24];
  if (v < 1024)
    buf[0] = '\0';
  else
    snprintf(buf, 24, " (%s)", dbuf_report_bytes(sh, sizeof sh, v));
  return buf;
}

const char *
dbuf__rep_bytes(char buf[64], int64_t v)
{
  char g[32], u[24];
  snprintf(buf, 64, "%s bytes%s", dbuf__rep_group(g, v), dbuf__rep_unit(u, v));
  return buf;
}

const char *
dbuf__rep_bytes_short(char buf[24], int64_t v)
{
  double x;
  int u = scale(v, &x);
  if (v == 0)
    snprintf(buf, 24, "0");
  else if (u == 0)
    snprintf(buf, 24, "%lld B", (long long)v);
  else if (x >= 100.0 || x == (double)(int64_t)x)
    snprintf(buf, 24, "%.0f %s", x, units[u]);
  else
    snprintf(buf, 24, "%.3g %s", x, units[u]);
  return buf;
}
