/*
 * SVG report, the painter: tones of the palette, bands painted to one
 * scale with exact integer geometry, the byte axis, and labels that fit.
 *
 * Runs narrower than a pixel are aggregated: each pixel column takes the
 * paint (tensor color or padding) holding most of its elements, so
 * padding is drawn to scale.  A small hole far from other holes is also
 * marked DBUF__SVG_PAD_MIN_PX wide, so a lone gap in a gigabyte segment
 * still shows.  One path per paint keeps the file small.
 */
#include "report_svg_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const unsigned palette[DBUF__SVG_NCOLORS + 1] = {
    0x4e79a7, 0xf28e2b, 0x59a14f, 0xe15759, 0x76b7b2, 0xedc948, 0xb07aa1,
    0xff9da7, 0x9c755f, 0x8cd17d, 0x499894, 0xd4a6c8, 0xbab0ac};

unsigned
dbuf__svg_tone(int paint)
{
  unsigned c = palette[paint / 2];
  if (paint % 2 == 0)
    return c;
  unsigned out = 0;
  for (int s = 0; s < 24; s += 8) {
    unsigned v = (c >> s) & 0xff;
    out |= (v + (255 - v) * 35 / 100) << s;
  }
  return out;
}

void
dbuf__svg_rect_path(dbuf__sb_t *b, int64_t x, int y, int64_t w, int h)
{
  dbuf__sb_printf(b, "M%lld %dh%lldv%dh-%lldz", (long long)x, y, (long long)w, h,
                  (long long)w);
}

int64_t
dbuf__svg_px(const dbuf__svg_painter_t *p, int64_t x)
{
  return (int64_t)((dbuf__i128_t)x * p->pw / p->maxseg);
}

/* ------------------------------------------------------------------ */
/* Runs of whole pixels                                                 */

static void
run_flush(dbuf__svg_painter_t *p)
{
  if (p->run_paint >= 0 && p->run_x1 > p->run_x0)
    dbuf__svg_rect_path(&p->paths[p->run_paint], p->left + p->run_x0, p->y,
                        p->run_x1 - p->run_x0, p->h);
  p->run_paint = -1;
}

static void
run_push(dbuf__svg_painter_t *p, int64_t x0, int64_t x1, int paint)
{
  if (x1 <= x0)
    return;
  if (p->run_paint == paint && p->run_x1 == x0) {
    p->run_x1 = x1;
    return;
  }
  run_flush(p);
  p->run_paint = paint;
  p->run_x0 = x0;
  p->run_x1 = x1;
}

/* Give the pixel being accumulated the paint holding most of it. */
static void
pixel_flush(dbuf__svg_painter_t *p)
{
  if (p->cur < 0)
    return;
  int best = 0;
  for (int i = 1; i < DBUF__SVG_NPAINT; i++)
    if (p->acc[i] > p->acc[best])
      best = i;
  memset(p->acc, 0, sizeof p->acc);
  run_push(p, p->cur, p->cur + 1, best);
  p->cur = -1;
}

/* Move the pixel being accumulated to q. */
static void
pixel_move(dbuf__svg_painter_t *p, int64_t q)
{
  if (p->cur != q) {
    pixel_flush(p);
    p->cur = q;
  }
}

/* ------------------------------------------------------------------ */
/* Padding                                                              */

static void
mark_flush(dbuf__svg_painter_t *p)
{
  if (p->mark_x1 > p->mark_x0)
    dbuf__svg_rect_path(&p->paths[DBUF__SVG_PAD], p->left + p->mark_x0, p->y,
                        p->mark_x1 - p->mark_x0, p->h);
  p->mark_x0 = p->mark_x1 = 0;
}

/*
 * A hole [A, B) (in 1/pw elements) is drawn to scale by the pixel
 * aggregation; one that lies DBUF__SVG_PAD_ALONE_PX or more after the
 * previous hole of the band and covers less than DBUF__SVG_PAD_MIN_PX whole
 * pixels also gets a mark that wide, drawn over its neighbours.  Dense
 * holes get no marks: they would paint the band with far more padding
 * than it holds.
 */
static void
pad_mark(dbuf__svg_painter_t *p, dbuf__i128_t A, dbuf__i128_t B)
{
  int64_t x0 = (int64_t)(A / p->maxseg), x1 = (int64_t)((B + p->maxseg - 1) / p->maxseg);
  int alone = p->pad_end < 0 || x0 - p->pad_end >= DBUF__SVG_PAD_ALONE_PX;
  p->pad_end = x1;
  if (!alone || (B - A) / p->maxseg >= DBUF__SVG_PAD_MIN_PX)
    return;
  x1 = x0 + DBUF__SVG_PAD_MIN_PX;
  if (x1 > p->pw) { /* at the right edge: widen to the left */
    x1 = p->pw;
    x0 = x1 - DBUF__SVG_PAD_MIN_PX > 0 ? x1 - DBUF__SVG_PAD_MIN_PX : 0;
  }
  mark_flush(p);
  p->mark_x0 = x0;
  p->mark_x1 = x1;
}

/* ------------------------------------------------------------------ */
/* Bands                                                                */

void
dbuf__svg_band_begin(dbuf__svg_painter_t *p, int y, int h)
{
  p->y = y;
  p->h = h;
  p->cur = -1;
  p->run_paint = -1;
  p->mark_x0 = p->mark_x1 = 0;
  p->pad_end = -1;
  memset(p->acc, 0, sizeof p->acc);
}

/*
 * Exact integer geometry in units of 1/pw element: pixel q covers
 * [q maxseg, (q+1) maxseg), the span covers [a pw, b pw).  Pixels the span
 * covers whole become runs; a pixel it shares is weighed in acc.
 */
void
dbuf__svg_paint_span(dbuf__svg_painter_t *p, int64_t a, int64_t b, int paint)
{
  if (b <= a)
    return;
  dbuf__i128_t A = (dbuf__i128_t)a * p->pw, B = (dbuf__i128_t)b * p->pw, M = p->maxseg;
  if (paint == DBUF__SVG_PAD) {
    p->pad_elems += b - a; /* every hole is inside one segment of the layout */
    pad_mark(p, A, B);
  }
  int64_t pa = (int64_t)(A / M), pl = (int64_t)((B - 1) / M);
  if (pa == pl) {
    pixel_move(p, pa);
    p->acc[paint] += (int64_t)(B - A);
    return;
  }
  int64_t full0 = pa, full1 = pl + 1;
  if (p->cur == pa || A > (dbuf__i128_t)pa * M) { /* pixel pa is shared */
    pixel_move(p, pa);
    p->acc[paint] += (int64_t)((dbuf__i128_t)(pa + 1) * M - A);
    pixel_flush(p);
    full0 = pa + 1;
  } else {
    pixel_flush(p);
  }
  int partial_last = B < (dbuf__i128_t)(pl + 1) * M;
  if (partial_last)
    full1 = pl;
  run_push(p, full0, full1, paint);
  if (partial_last) {
    p->cur = pl;
    p->acc[paint] += (int64_t)(B - (dbuf__i128_t)pl * M);
  }
}

void
dbuf__svg_band_end(dbuf__svg_painter_t *p)
{
  pixel_flush(p);
  run_flush(p);
  mark_flush(p);
}

/* ------------------------------------------------------------------ */
/* The byte axis                                                        */

void
dbuf__svg_axis(dbuf__sb_t *b, int left, int64_t pw, int y, int64_t maxbytes)
{
  char sb[24];
  int64_t tstep = 1;
  while (tstep <= maxbytes / 6)
    tstep *= 2;
  for (int64_t v = 0; maxbytes > 0 && v <= maxbytes; v += tstep) {
    int64_t x = (int64_t)((dbuf__i128_t)v * pw / maxbytes);
    const char *anchor = x == 0 ? "start" : x > pw - 30 ? "end" : "middle";
    dbuf__sb_printf(b, "<text x=\"%lld\" y=\"%d\" text-anchor=\"%s\">",
                    (long long)(left + x), y, anchor);
    dbuf__sb_xml(b, dbuf__rep_bytes_short(sb, v));
    dbuf__sb_printf(b, "</text><rect x=\"%lld\" y=\"%d\" width=\"1\" height=\"6\"/>\n",
                    (long long)(left + (x == pw ? x - 1 : x)), y + 6);
    if (v > INT64_MAX - tstep)
      break;
  }
}

/* ------------------------------------------------------------------ */
/* Text                                                                 */

int64_t
dbuf__svg_layer_of(const char *name)
{
  const char *p = strstr(name, "layers.");
  if (p == NULL)
    return -1;
  char *e;
  long long v = strtoll(p + 7, &e, 10);
  return e > p + 7 && *e == '.' && p[7] >= '0' && p[7] <= '9' ? (int64_t)v : -1;
}

int
dbuf__svg_fit_label(const char *name, int64_t w, char *out, size_t len)
{
  char cand[4][512];
  const char *s = name;
  size_t n;
  snprintf(cand[0], sizeof cand[0], "%s", name);
  if (strncmp(s, "model.", 6) == 0)
    s += 6;
  snprintf(cand[1], sizeof cand[1], "%s", s);
  n = strlen(cand[1]);
  if (n > 7 && strcmp(cand[1] + n - 7, ".weight") == 0)
    cand[1][n - 7] = '\0';
  /* "layers.12.mlp.gate_proj" -> "L12 mlp.gate_proj" -> "L12 gate_proj" */
  snprintf(cand[2], sizeof cand[2], "%s", cand[1]);
  snprintf(cand[3], sizeof cand[3], "%s", cand[1]);
  const char *p = strstr(cand[1], "layers.");
  if (p != NULL) {
    char *e;
    long long layer = strtoll(p + 7, &e, 10);
    if (e > p + 7 && *e == '.') {
      snprintf(cand[2], sizeof cand[2], "L%lld %s", layer, e + 1);
      const char *last = strrchr(e + 1, '.');
      snprintf(cand[3], sizeof cand[3], "L%lld %s", layer, last ? last + 1 : e + 1);
    }
  }
  for (int i = 0; i < 4; i++) {
    if ((double)strlen(cand[i]) * DBUF__SVG_CHAR_W + 6.0 <= (double)w) {
      snprintf(out, len, "%s", cand[i]);
      return 1;
    }
  }
  return 0;
}
