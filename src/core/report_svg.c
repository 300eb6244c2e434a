/*
 * SVG report: a picture of the buffer, one horizontal band per rank (its
 * segment, drawn to one scale: the longest segment spans the plot width).
 *
 * Colors: small lists (up to 16 tensors) get one color per tensor.  Larger
 * ones are colored by class, the name with every all-digit dotted component
 * replaced by N ("model.layers.N.mlp.gate_proj.weight"), neighbouring
 * tensors in two tones of their class color so boundaries show.  When the
 * bands touch (1-3 px) or the mean tensor is under 4 px wide, single
 * tensors would only make noise: the classes are cut to modules
 * ("model.layers.N.mlp") in one tone.  The twelve largest classes get
 * colors, the others share one gray.
 *
 * Runs narrower than a pixel are aggregated: each pixel column takes the
 * paint holding most of its elements.  Padding is hatched (solid gray in
 * bands under 4 px); a black bar marks a rank boundary that cuts a tensor,
 * on both sides of the cut.  Rank labels, tensor names and layer numbers
 * are drawn only where they fit.  One path per paint keeps the file small:
 * deepseek-v3 at 1024 ranks is under a megabyte.
 */
#include "core_internal.h"
#include "report_internal.h"
#include "strmap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__extension__ typedef __int128 i128_t;

#define NCOLORS 12
#define OTHER NCOLORS                      /* color of the classes past the palette */
#define NPAINT ((NCOLORS + 1) * 2 + 1)     /* two tones per color, and padding */
#define PAD_PAINT (NPAINT - 1)
#define PER_TENSOR_MAX 16                  /* up to this many tensors: a color each */

static const unsigned palette[NCOLORS + 1] = {
    0x4e79a7, 0xf28e2b, 0x59a14f, 0xe15759, 0x76b7b2, 0xedc948, 0xb07aa1,
    0xff9da7, 0x9c755f, 0x8cd17d, 0x499894, 0xd4a6c8, 0xbab0ac};

/* Geometry. */
#define LEFT 92       /* left margin: rank labels */
#define RIGHT 16
#define TOP 90        /* first band */
#define CHAR_W 6.1    /* width of a 10 px monospace character */
#define LEGEND_ROW 18

static unsigned
tone(int paint)
{
  unsigned c = palette[paint / 2];
  if (paint % 2 == 0)
    return c;
  /* The second tone: 35% of the way to white. */
  unsigned out = 0;
  for (int s = 0; s < 24; s += 8) {
    unsigned v = (c >> s) & 0xff;
    out |= (v + (255 - v) * 35 / 100) << s;
  }
  return out;
}

/* ------------------------------------------------------------------ */
/* Tensor classes                                                       */

typedef struct {
  int64_t nclasses;
  char *keys;         /* class keys, NUL-separated */
  int64_t *key_off;   /* [nclasses] */
  int64_t *weight;    /* [nclasses] elements */
  int64_t *first;     /* [nclasses] first tensor id */
  int64_t *rank_of;   /* [nclasses] position by weight */
  int64_t *by_rank;   /* [nclasses] class at each position */
  unsigned char *color; /* [n] color of each tensor */
} classes_t;

static void
classes_free(classes_t *c)
{
  free(c->keys);
  free(c->key_off);
  free(c->weight);
  free(c->first);
  free(c->rank_of);
  free(c->by_rank);
  free(c->color);
}

enum { KEY_TENSOR, KEY_CLASS, KEY_MODULE };

/*
 * Class key of a name.  KEY_TENSOR: the name.  KEY_CLASS: all-digit dotted
 * components become "N".  KEY_MODULE: as KEY_CLASS, cut after the first
 * component that follows "layers.N." ("model.layers.N.mlp").
 */
static size_t
class_key(const char *name, char *out, int mode)
{
  size_t j = 0;
  const char *s = name;
  if (mode == KEY_TENSOR) {
    size_t n = strlen(name);
    memcpy(out, name, n + 1);
    return n;
  }
  while (*s) {
    const char *e = s;
    while (*e >= '0' && *e <= '9')
      e++;
    if (e > s && (*e == '.' || *e == '\0') && (s == name || s[-1] == '.')) {
      out[j++] = 'N';
      s = e;
      continue;
    }
    out[j++] = *s++;
  }
  out[j] = '\0';
  char *p;
  if (mode == KEY_MODULE && (p = strstr(out, "layers.N.")) != NULL) {
    p += strlen("layers.N.");
    p += strcspn(p, ".");
    *p = '\0';
    j = (size_t)(p - out);
  }
  return j;
}

typedef struct {
  int64_t weight, first, cls;
} crank_t;

/* Heaviest class first, ties by first appearance. */
static int
cmp_class(const void *a, const void *b)
{
  const crank_t *x = a, *y = b;
  if (x->weight != y->weight)
    return x->weight > y->weight ? -1 : 1;
  return (x->first > y->first) - (x->first < y->first);
}

static int
classes_build(const dbuf_tensors_t *t, int mode, classes_t *c)
{
  int64_t n = dbuf_tensors_count(t), chars = 0;
  dbuf__strmap_t table = DBUF__STRMAP_INIT; /* class key -> class */
  int rc = DBUF_ENOMEM;

  memset(c, 0, sizeof *c);
  for (int64_t i = 0; i < n; i++)
    chars += (int64_t)strlen(dbuf_tensors_name(t, i)) + 1;
  c->keys = dbuf__mallocn(chars + 1, 1);
  c->key_off = dbuf__mallocn(n, sizeof *c->key_off);
  c->weight = dbuf__calloc(n, sizeof *c->weight);
  c->first = dbuf__mallocn(n, sizeof *c->first);
  c->rank_of = dbuf__mallocn(n, sizeof *c->rank_of);
  c->by_rank = dbuf__mallocn(n, sizeof *c->by_rank);
  c->color = dbuf__mallocn(n, 1);
  int64_t *cls = dbuf__mallocn(n, sizeof *cls);
  if (c->keys == NULL || c->key_off == NULL || c->weight == NULL ||
      c->first == NULL || c->rank_of == NULL || c->by_rank == NULL ||
      c->color == NULL || cls == NULL)
    goto out;

  int64_t used = 0;
  for (int64_t i = 0; i < n; i++) {
    char *k = c->keys + used;
    size_t len = class_key(dbuf_tensors_name(t, i), k, mode);
    int64_t e;
    int added = dbuf__strmap_add(&table, k, &e);
    if (added == 0) { /* new class: ids in order of first appearance */
      c->nclasses++;
      c->key_off[e] = used;
      c->first[e] = i;
      used += (int64_t)len + 1;
    } else if (added != DBUF_EDUP) {
      rc = added;
      goto out;
    }
    cls[i] = e;
    c->weight[cls[i]] += dbuf_tensors_numel(t, i);
  }
  crank_t *cr = dbuf__mallocn(c->nclasses, sizeof *cr);
  if (cr == NULL)
    goto out;
  for (int64_t e = 0; e < c->nclasses; e++)
    cr[e] = (crank_t){c->weight[e], c->first[e], e};
  qsort(cr, (size_t)c->nclasses, sizeof *cr, cmp_class);
  for (int64_t p = 0; p < c->nclasses; p++) {
    c->by_rank[p] = cr[p].cls;
    c->rank_of[cr[p].cls] = p;
  }
  free(cr);
  for (int64_t i = 0; i < n; i++) {
    int64_t p = c->rank_of[cls[i]];
    c->color[i] = (unsigned char)(p < NCOLORS ? p : OTHER);
  }
  rc = 0;
out:
  free(cls);
  dbuf__strmap_free(&table);
  if (rc != 0)
    classes_free(c);
  return rc;
}

/* What the legend shows of a class key: no "model.", no "layers.N.", no ".weight". */
static void
class_display(const char *key, char *out, size_t len)
{
  const char *s = key, *p = strstr(key, "layers.N.");
  if (p != NULL)
    s = p + strlen("layers.N.");
  else if (strncmp(s, "model.", 6) == 0 && s[6] != '\0')
    s += 6;
  snprintf(out, len, "%s", s);
  size_t n = strlen(out);
  if (n > 7 && strcmp(out + n - 7, ".weight") == 0)
    out[n - 7] = '\0';
}

/* ------------------------------------------------------------------ */
/* Painting a band                                                      */

typedef struct {
  dbuf__sb_t *paths;   /* [NPAINT] */
  int64_t maxseg;      /* elements across the plot width */
  int64_t pw;          /* plot width in pixels */
  int y, h;            /* band top and height */
  int64_t acc[NPAINT]; /* 1/pw elements of each paint in pixel cur */
  int64_t cur;         /* pixel being accumulated, or -1 */
  int64_t run_x0, run_x1;
  int run_paint;       /* pending run, or -1 */
} painter_t;

/* Pixel column of relative offset x (floor). */
static int64_t
px(const painter_t *p, int64_t x)
{
  return (int64_t)((i128_t)x * p->pw / p->maxseg);
}

static void
run_flush(painter_t *p)
{
  if (p->run_paint >= 0 && p->run_x1 > p->run_x0)
    dbuf__sb_printf(&p->paths[p->run_paint], "M%lld %dh%lldv%dh-%lldz",
                    (long long)(LEFT + p->run_x0), p->y,
                    (long long)(p->run_x1 - p->run_x0), p->h,
                    (long long)(p->run_x1 - p->run_x0));
  p->run_paint = -1;
}

static void
run_push(painter_t *p, int64_t x0, int64_t x1, int paint)
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
pixel_flush(painter_t *p)
{
  if (p->cur < 0)
    return;
  int best = 0;
  for (int i = 1; i < NPAINT; i++)
    if (p->acc[i] > p->acc[best])
      best = i;
  memset(p->acc, 0, sizeof p->acc);
  run_push(p, p->cur, p->cur + 1, best);
  p->cur = -1;
}

/*
 * Paint relative offsets [a, b); calls come in increasing offset order.
 * Exact integer geometry in units of 1/pw element: pixel q covers
 * [q maxseg, (q+1) maxseg), the span covers [a pw, b pw).  Pixels the span
 * covers whole become runs; a pixel it shares is weighed in acc.
 */
static void
paint_span(painter_t *p, int64_t a, int64_t b, int paint)
{
  if (b <= a)
    return;
  i128_t A = (i128_t)a * p->pw, B = (i128_t)b * p->pw, M = p->maxseg;
  int64_t pa = (int64_t)(A / M), pl = (int64_t)((B - 1) / M);
  if (pa == pl) {
    if (p->cur != pa) {
      pixel_flush(p);
      p->cur = pa;
    }
    p->acc[paint] += (int64_t)(B - A);
    return;
  }
  int64_t full0 = pa, full1 = pl + 1;
  if (p->cur == pa || A > (i128_t)pa * M) { /* pixel pa is shared */
    if (p->cur != pa) {
      pixel_flush(p);
      p->cur = pa;
    }
    p->acc[paint] += (int64_t)((i128_t)(pa + 1) * M - A);
    pixel_flush(p);
    full0 = pa + 1;
  } else {
    pixel_flush(p);
  }
  int partial_last = B < (i128_t)(pl + 1) * M;
  if (partial_last)
    full1 = pl;
  run_push(p, full0, full1, paint);
  if (partial_last) {
    p->cur = pl;
    p->acc[paint] += (int64_t)(B - (i128_t)pl * M);
  }
}

static void
band_end(painter_t *p)
{
  pixel_flush(p);
  run_flush(p);
}

/* ------------------------------------------------------------------ */
/* Labels                                                               */

/* The N of "layers.N." in a name, or -1. */
static int64_t
layer_of(const char *name)
{
  const char *p = strstr(name, "layers.");
  if (p == NULL)
    return -1;
  char *e;
  long long v = strtoll(p + 7, &e, 10);
  return e > p + 7 && *e == '.' && p[7] >= '0' && p[7] <= '9' ? (int64_t)v : -1;
}

/* The longest of a few shorter forms of name that fits in w pixels. */
static int
fit_label(const char *name, int64_t w, char *out, size_t len)
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
      snprintf(cand[3], sizeof cand[3], "L%lld %s", layer,
               last ? last + 1 : e + 1);
    }
  }
  for (int i = 0; i < 4; i++) {
    if ((double)strlen(cand[i]) * CHAR_W + 6.0 <= (double)w) {
      snprintf(out, len, "%s", cand[i]);
      return 1;
    }
  }
  return 0;
}

/* ------------------------------------------------------------------ */

int
dbuf__report_svg(dbuf__rep_t *rep, dbuf__sb_t *b, dbuf_diag_t *diag)
{
  const dbuf_layout_t *l = rep->l;
  const dbuf_tensors_t *t = rep->t;
  int nranks = rep->nranks, width = rep->o.svg_width;
  int64_t es = rep->o.elem_size, size = dbuf_layout_size(l);
  dbuf__sb_t paths[NPAINT], cuts = DBUF__SB_INIT, labels = DBUF__SB_INIT;
  classes_t cls;
  char g1[32], g2[32], g3[32], sb[24], text[512];
  int rc;

  /* Band pitch: 30 px for a few ranks, down to 1 px for 720 and more. */
  int pitch = nranks <= 24 ? 30 : 720 / nranks;
  if (pitch < 1)
    pitch = 1;
  int gap = pitch >= 10 ? pitch / 5 : pitch >= 3 ? 1 : 0;
  int bh = pitch - gap;
  int step = 1; /* label every step-th rank, at least 12 px apart */
  while (step * pitch < 12)
    step *= 2;
  int64_t pw = width - LEFT - RIGHT;
  painter_t pt;
  memset(&pt, 0, sizeof pt);
  pt.paths = paths;
  pt.maxseg = rep->st.max_segment > 0 ? rep->st.max_segment : 1;
  pt.pw = pw;
  pt.h = bh;

  /*
   * Colors: a tensor each for short lists; module classes without tone
   * alternation when bands touch or the mean tensor is under 4 px wide
   * (single tensors would only make noise); tensor classes otherwise.
   */
  int64_t n = dbuf_layout_ntensors(l);
  double mean_px = n > 0 ? (double)pw * ((double)rep->st.logical / (double)n) /
                               (double)pt.maxseg
                         : 0.0;
  int mode = n <= PER_TENSOR_MAX               ? KEY_TENSOR
             : (pitch < 4 || mean_px < 4.0) ? KEY_MODULE
                                              : KEY_CLASS;
  int tones = mode != KEY_MODULE;
  /* Hatching needs a few pixels of height; thin bands get solid gray. */
  const char *pad_fill = pitch >= 4 ? "url(#hatch)" : "#bdbdbd";
  for (int i = 0; i < NPAINT; i++)
    paths[i] = (dbuf__sb_t)DBUF__SB_INIT;
  if ((rc = classes_build(t, mode, &cls)) != 0)
    return dbuf__diag(diag, rc, "svg: out of memory");

  /* Legend entries: colored classes, other, padding, cuts. */
  int64_t nshown = cls.nclasses < NCOLORS ? cls.nclasses : NCOLORS;
  int nentries = (int)nshown + (cls.nclasses > NCOLORS) + 2;
  int ncols = width / 380 > 0 ? width / 380 : 1;
  int legend_rows = (nentries + ncols - 1) / ncols;
  int legend_y = TOP + nranks * pitch + 28;
  int height = legend_y + legend_rows * LEGEND_ROW + 12;

  dbuf__sb_printf(b,
                  "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
                  "height=\"%d\" viewBox=\"0 0 %d %d\" "
                  "font-family=\"DejaVu Sans, Arial, sans-serif\">\n",
                  width, height, width, height);
  dbuf__sb_puts(b, "<defs><pattern id=\"hatch\" width=\"5\" height=\"5\" "
                   "patternUnits=\"userSpaceOnUse\" "
                   "patternTransform=\"rotate(45)\"><rect width=\"5\" "
                   "height=\"5\" fill=\"#dcdcdc\"/><rect width=\"2\" "
                   "height=\"5\" fill=\"#707070\"/></pattern></defs>\n");
  dbuf__sb_printf(b, "<rect width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n",
                  width, height);

  /* Title and subtitle. */
  dbuf__sb_printf(b, "<text x=\"%d\" y=\"22\" font-size=\"15\" "
                     "font-weight=\"bold\">",
                  LEFT);
  dbuf__sb_printf(b, "%s layout, dp %d",
                  dbuf_layout_kind_name(dbuf_layout_kind(l)), nranks);
  if (dbuf_layout_chunk_size(l) > 0)
    dbuf__sb_printf(b, ", chunk %s", dbuf__rep_group(g1, dbuf_layout_chunk_size(l)));
  if (dbuf_layout_block_size(l) > 1)
    dbuf__sb_printf(b, ", block %lld rows", (long long)dbuf_layout_block_size(l));
  if (rep->o.source != NULL && rep->o.source[0] != '\0') {
    dbuf__sb_puts(b, " \xe2\x80\x94 ");
    dbuf__sb_xml(b, rep->o.source);
  }
  dbuf__sb_puts(b, "</text>\n");
  dbuf__sb_printf(b, "<text x=\"%d\" y=\"40\" font-size=\"11\" "
                     "fill=\"#333333\">%s tensors, %s elements (",
                  LEFT, dbuf__rep_group(g1, dbuf_layout_ntensors(l)),
                  dbuf__rep_group(g2, rep->st.logical));
  dbuf__sb_xml(b, dbuf__rep_bytes_short(sb, rep->st.logical * es));
  dbuf__sb_puts(b, " ");
  dbuf__sb_xml(b, rep->o.dtype);
  dbuf__sb_printf(b, "); buffer %s elements, padding %.2f%%; %s tensors cut "
                     "by rank boundaries</text>\n",
                  dbuf__rep_group(g3, size),
                  size > 0 ? 100.0 * (double)rep->st.padding / (double)size : 0.0,
                  dbuf__rep_group(g1, rep->st.split_tensors));

  dbuf__sb_printf(b, "<text x=\"%d\" y=\"56\" font-size=\"11\" "
                     "fill=\"#333333\">One band per rank, x = byte offset in "
                     "its segment; colors: %s</text>\n",
                  LEFT,
                  mode == KEY_TENSOR  ? "one per tensor"
                  : mode == KEY_CLASS ? "tensor classes (numbers in names as N), "
                                        "neighbours in two tones"
                                      : "modules (bands too thin for single "
                                        "tensors)");

  /* Axis: byte offsets inside a segment, ticks at multiples of a power of 2. */
  int64_t maxbytes = rep->st.max_segment * es, tstep = 1;
  while (tstep <= maxbytes / 6)
    tstep *= 2;
  dbuf__sb_printf(b, "<g font-size=\"10\" fill=\"#333333\">\n");
  dbuf__sb_printf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">rank</text>\n",
                  LEFT - 8, TOP - 14);
  for (int64_t v = 0; maxbytes > 0 && v <= maxbytes; v += tstep) {
    int64_t x = (int64_t)((i128_t)v * pw / maxbytes);
    const char *anchor = x == 0 ? "start" : x > pw - 30 ? "end" : "middle";
    dbuf__sb_printf(b, "<text x=\"%lld\" y=\"%d\" text-anchor=\"%s\">",
                    (long long)(LEFT + x), TOP - 14, anchor);
    dbuf__sb_xml(b, dbuf__rep_bytes_short(sb, v));
    dbuf__sb_printf(b, "</text><rect x=\"%lld\" y=\"%d\" width=\"1\" "
                       "height=\"6\"/>\n",
                    (long long)(LEFT + (x == pw ? x - 1 : x)), TOP - 8);
    if (v > INT64_MAX - tstep)
      break;
  }
  dbuf__sb_puts(b, "</g>\n");

  /* Bands. */
  int shade = tones; /* the first tensor gets the first tone */
  int64_t prev = -1;
  for (int r = 0; r < nranks && !b->failed; r++) {
    int64_t s = rep->range[r], e = rep->range[r + 1], cursor = s;
    int y = TOP + r * pitch;
    if ((rc = dbuf__rep_pieces(rep, r)) != 0) {
      dbuf__diag(diag, rc, "svg: %s", dbuf_strerror(rc));
      goto out;
    }
    dbuf__sb_printf(b, "<rect class=\"band\" x=\"%d\" y=\"%d\" width=\"%lld\" "
                       "height=\"%d\" fill=\"#f0f0f0\"><title>rank %d [%lld, "
                       "%lld): %lld elements, %lld tensors</title></rect>\n",
                    LEFT, y, (long long)pw, bh, r, (long long)s, (long long)e,
                    (long long)(e - s), (long long)rep->np);
    if (r % step == 0)
      dbuf__sb_printf(b, "<text x=\"%d\" y=\"%d\" font-size=\"%d\" "
                         "text-anchor=\"end\">%d</text>\n",
                      LEFT - 8, y + bh / 2 + (pitch >= 12 ? 4 : 3),
                      pitch >= 12 ? 11 : 9, r);
    int64_t next_free = 0, last_layer = -1; /* labels of this band */
    pt.y = y;
    pt.cur = -1;
    pt.run_paint = -1;
    for (int64_t k = 0; k < rep->np; k++) {
      const dbuf_piece_t *p = &rep->pc[k];
      int64_t gs = s + p->offset, ge = gs + p->nelems;
      if (gs > cursor)
        paint_span(&pt, cursor - s, gs - s, PAD_PAINT);
      if (gs < cursor)
        gs = cursor; /* overlapping tensors: draw what is left */
      if (ge <= gs)
        continue;
      if (p->tensor != prev && tones)
        shade ^= 1;
      prev = p->tensor;
      paint_span(&pt, gs - s, ge - s, cls.color[p->tensor] * 2 + shade);
      cursor = ge;
      int64_t x0 = px(&pt, gs - s), x1 = px(&pt, ge - s);
      int mw = pitch >= 12 ? 2 : 1;
      if (gs == s && p->elem_begin > 0)
        dbuf__sb_printf(&cuts, "M%lld %dh%dv%dh-%dz", (long long)(LEFT + x0), y,
                        mw, bh, mw);
      if (ge == e && p->elem_begin + p->nelems < dbuf_tensors_numel(t, p->tensor))
        dbuf__sb_printf(&cuts, "M%lld %dh%dv%dh-%dz",
                        (long long)(LEFT + (x1 > mw ? x1 - mw : 0)), y, mw, bh,
                        mw);
      /* Labels: the name where it fits, else "L12" on the first tensor of
       * at least 16 px of another layer (small tensors that fill padding
       * gaps do not count), never overlapping, never past the plot. */
      const char *name = dbuf_tensors_name(t, p->tensor);
      int64_t lx = x0 > next_free ? x0 : next_free;
      if (pitch >= 14 && lx < x1) {
        int64_t layer = layer_of(name);
        int fits = fit_label(name, x1 - lx, text, sizeof text);
        if (!fits && lx == x0 && layer >= 0 && layer != last_layer &&
            x1 - x0 >= 16) {
          snprintf(text, sizeof text, "L%lld", (long long)layer);
          fits = 1;
        }
        int64_t tw = (int64_t)((double)strlen(text) * CHAR_W) + 6;
        if (fits && lx + tw <= pw) {
          dbuf__sb_printf(&labels, "<text x=\"%lld\" y=\"%d\">",
                          (long long)(LEFT + lx + 3), y + bh / 2 + 4);
          dbuf__sb_xml(&labels, text);
          dbuf__sb_puts(&labels, "</text>\n");
          next_free = lx + tw + 2;
          if (layer >= 0)
            last_layer = layer;
        }
      }
    }
    if (cursor < e)
      paint_span(&pt, cursor - s, e - s, PAD_PAINT);
    band_end(&pt);
  }

  for (int i = 0; i < NPAINT; i++) {
    if (paths[i].len == 0)
      continue;
    if (i == PAD_PAINT)
      dbuf__sb_printf(b, "<path fill=\"%s\" d=\"", pad_fill);
    else
      dbuf__sb_printf(b, "<path fill=\"#%06x\" d=\"", tone(i));
    dbuf__sb_append(b, paths[i].p, paths[i].len);
    dbuf__sb_puts(b, "\"/>\n");
  }
  if (cuts.len > 0) {
    dbuf__sb_puts(b, "<path fill=\"#000000\" d=\"");
    dbuf__sb_append(b, cuts.p, cuts.len);
    dbuf__sb_puts(b, "\"/>\n");
  }
  if (labels.len > 0) {
    dbuf__sb_puts(b, "<g font-family=\"DejaVu Sans Mono, monospace\" "
                     "font-size=\"10\" fill=\"#111111\">\n");
    dbuf__sb_append(b, labels.p, labels.len);
    dbuf__sb_puts(b, "</g>\n");
  }

  /* Legend. */
  int colw = (width - LEFT) / ncols;
  dbuf__sb_printf(b, "<g font-size=\"11\">\n");
  for (int k = 0; k < nentries; k++) {
    int x = LEFT + (k % ncols) * colw, y = legend_y + (k / ncols) * LEGEND_ROW;
    int64_t maxchars = (int64_t)((colw - 30) / 6.4);
    char name[512];
    double share;
    const char *fill;
    char fillbuf[16];
    int tone_of = 0;
    if (k < nshown) {
      int64_t c = cls.by_rank[k];
      class_display(cls.keys + cls.key_off[c], name, sizeof name);
      share = rep->st.logical > 0
                  ? 100.0 * (double)cls.weight[c] / (double)rep->st.logical
                  : 0.0;
      tone_of = k * 2;
      snprintf(fillbuf, sizeof fillbuf, "#%06x", tone(tone_of));
      fill = fillbuf;
    } else if (k == nshown && cls.nclasses > NCOLORS) {
      int64_t w = 0;
      for (int64_t p = NCOLORS; p < cls.nclasses; p++)
        w += cls.weight[cls.by_rank[p]];
      snprintf(name, sizeof name, "%lld other classes",
               (long long)(cls.nclasses - NCOLORS));
      share = rep->st.logical > 0 ? 100.0 * (double)w / (double)rep->st.logical
                                  : 0.0;
      tone_of = OTHER * 2;
      snprintf(fillbuf, sizeof fillbuf, "#%06x", tone(tone_of));
      fill = fillbuf;
    } else if (k == nentries - 2) {
      snprintf(name, sizeof name, "padding");
      share = size > 0 ? 100.0 * (double)rep->st.padding / (double)size : 0.0;
      fill = pad_fill;
    } else {
      snprintf(name, sizeof name, "boundary cutting a tensor");
      share = -1.0;
      fill = "#000000";
    }
    if ((int64_t)strlen(name) > maxchars && maxchars > 3) {
      name[maxchars - 3] = '\0';
      strcat(name, "...");
    }
    if (share >= 0.0 && tones && fill == fillbuf) /* both tones */
      dbuf__sb_printf(b, "<rect x=\"%d\" y=\"%d\" width=\"7\" height=\"12\" "
                         "fill=\"%s\"/><rect x=\"%d\" y=\"%d\" width=\"7\" "
                         "height=\"12\" fill=\"#%06x\"/><text x=\"%d\" "
                         "y=\"%d\">",
                      x, y - 10, fill, x + 7, y - 10, tone(tone_of + 1), x + 20,
                      y);
    else if (share >= 0.0)
      dbuf__sb_printf(b, "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"12\" "
                         "fill=\"%s\" stroke=\"#666666\" stroke-width=\"0.5\"/>"
                         "<text x=\"%d\" y=\"%d\">",
                      x, y - 10, fill, x + 20, y);
    else
      dbuf__sb_printf(b, "<rect x=\"%d\" y=\"%d\" width=\"3\" height=\"12\" "
                         "fill=\"%s\"/><text x=\"%d\" y=\"%d\">",
                      x + 5, y - 10, fill, x + 20, y);
    dbuf__sb_xml(b, name);
    if (share >= 0.0)
      dbuf__sb_printf(b, " (%.1f%%)", share);
    dbuf__sb_puts(b, "</text>\n");
  }
  dbuf__sb_puts(b, "</g>\n</svg>\n");
  rc = 0;
out:
  for (int i = 0; i < NPAINT; i++) {
    if (paths[i].failed)
      b->failed = 1;
    dbuf__sb_free(&paths[i]);
  }
  if (cuts.failed || labels.failed)
    b->failed = 1;
  dbuf__sb_free(&cuts);
  dbuf__sb_free(&labels);
  classes_free(&cls);
  return rc;
}
