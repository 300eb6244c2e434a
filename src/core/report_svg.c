/*
 * SVG report, the document: title, byte axis, one horizontal band per rank
 * (or per node or group of ranks from DBUF__SVG_GROUP_FROM ranks drawn),
 * the legend.  Every band is drawn to one scale: the longest band spans
 * the plot width.
 *
 * Bands: up to 255 ranks drawn, one per rank (its segment).  From 256, one
 * per node when the node size is known, else one per group of a power of
 * two ranks; a band then shows the span of its ranks, rank boundaries as
 * white ticks.  Nodes are grouped by powers of two past 128 bands, ranks
 * past 64.  A rank range (svg_rank_begin/end) draws a part of the ranks by
 * the same rule, so a range under 256 ranks shows every rank.
 *
 * Colors (report_svg_classes.c): MoE models by role (routed and shared
 * experts, dense MLP, attention, router, embeddings, norms, other); small
 * lists (up to 16 tensors) one color per tensor; larger ones by class,
 * neighbouring tensors in two tones so boundaries show, or by module when
 * the bands touch (1-3 px) or the mean tensor is under 4 px wide.
 *
 * Padding is hatched (solid gray in bands under 4 px) and drawn to scale;
 * a lone hole narrower than 2 px is marked 2 px wide.  The legend gives
 * its total in bytes.  A black bar marks a band
 * boundary that cuts a tensor, on both sides of the cut.  Band labels,
 * tensor names and layer numbers are drawn only where they fit.  One path
 * per paint keeps the file small.
 */
#include "report_svg_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PER_TENSOR_MAX 16 /* up to this many tensors: a color each */
#define GROUP_FROM 256    /* from this many ranks drawn, bands hold several */
#define GROUP_BANDS 64    /* groups of ranks: at most this many bands */
#define NODE_BANDS 128    /* nodes: at most this many bands */

/* Geometry. */
#define LEFT 92 /* left margin: band labels */
#define RIGHT 16
#define TOP 104 /* first band */
#define LEGEND_ROW 18
#define TICK_MIN_PX 3 /* rank ticks at least this far apart */

typedef struct {
  dbuf__rep_t *rep;
  dbuf__sb_t *b;
  int r0, r1;      /* ranks drawn, [r0, r1) */
  int zoom;        /* a part of the ranks */
  int nodes;       /* ranks per node, 0 unknown */
  int64_t group;   /* ranks per band */
  int64_t base;    /* first rank of band 0: r0 rounded down to a group */
  int nbands, pitch, bh, step, width;
  int64_t pw, maxspan;
  int mode, tones;
  const char *pad_fill;
  dbuf__svg_classes_t cls;
  dbuf__svg_painter_t pt;
  dbuf__sb_t paths[DBUF__SVG_NPAINT], cuts, ticks, labels;
  int shade;    /* tone of the last tensor */
  int64_t prev; /* the last tensor painted */
} doc_t;

/* Label state of one band. */
typedef struct {
  int b0, b1;        /* its ranks, [b0, b1) */
  int64_t next_free; /* first pixel a label may use */
  int64_t last_layer;
  int64_t last_tick;
  int64_t pieces;
  int64_t lab_tensor; /* tensor whose label waits, or -1 */
  int64_t lab_x0, lab_x1;
} band_t;

/* ------------------------------------------------------------------ */
/* The view: ranks drawn, bands, scale                                  */

static void
band_ranks(const doc_t *d, int k, int *b0, int *b1)
{
  int64_t s = d->base + (int64_t)k * d->group, e = s + d->group;
  *b0 = (int)(s > d->r0 ? s : d->r0);
  *b1 = (int)(e < d->r1 ? e : d->r1);
}

static int
doc_view(doc_t *d, dbuf_diag_t *diag)
{
  const dbuf_report_opts_t *o = &d->rep->o;
  int n = d->rep->nranks;
  if (o->svg_node_ranks < 0)
    return dbuf__diag(diag, DBUF_EINVAL, "svg node size %d is negative", o->svg_node_ranks);
  d->r0 = 0;
  d->r1 = n;
  if (o->svg_rank_begin != 0 || o->svg_rank_end != 0) {
    if (o->svg_rank_begin < 0 || o->svg_rank_begin >= o->svg_rank_end ||
        o->svg_rank_end > n)
      return dbuf__diag(diag, DBUF_EINVAL,
                        "svg ranks [%d, %d) are not a part of the layout's %d ranks",
                        o->svg_rank_begin, o->svg_rank_end, n);
    d->r0 = o->svg_rank_begin;
    d->r1 = o->svg_rank_end;
    d->zoom = d->r0 > 0 || d->r1 < n;
  }
  d->nodes = o->svg_node_ranks;
  int64_t drawn = d->r1 - d->r0, g = 1;
  if (drawn >= GROUP_FROM) {
    int64_t most = d->nodes > 0 ? NODE_BANDS : GROUP_BANDS;
    g = d->nodes > 0 ? d->nodes : 1;
    while ((drawn + g - 1) / g > most)
      g *= 2; /* g < 2 drawn <= 2^32 */
  }
  d->group = g;
  d->base = d->r0 - d->r0 % g;
  d->nbands = (int)((d->r1 - d->base + g - 1) / g);
  d->maxspan = 1;
  for (int k = 0; k < d->nbands; k++) {
    int b0, b1;
    band_ranks(d, k, &b0, &b1);
    int64_t span = d->rep->range[b1] - d->rep->range[b0];
    if (span > d->maxspan)
      d->maxspan = span;
  }
  return 0;
}

/* Band pitch, labels, color mode. */
static void
doc_geometry(doc_t *d)
{
  /* Band pitch: 30 px for a few bands, down to 1 px for 720 and more. */
  d->pitch = d->nbands <= 24 ? 30 : 720 / d->nbands;
  if (d->pitch < 1)
    d->pitch = 1;
  int gap = d->pitch >= 10 ? d->pitch / 5 : d->pitch >= 3 ? 1 : 0;
  d->bh = d->pitch - gap;
  d->step = 1; /* label every step-th band, at least 12 px apart */
  while (d->step * d->pitch < 12)
    d->step *= 2;
  d->pw = d->width - LEFT - RIGHT;
  int64_t n = dbuf_layout_ntensors(d->rep->l);
  double mean_px = n > 0 ? (double)d->pw * ((double)d->rep->st.logical / (double)n) /
                               (double)d->maxspan
                         : 0.0;
  int thin = d->pitch < 4 || mean_px < 4.0; /* single tensors would be noise */
  d->mode = dbuf__svg_is_moe(d->rep->t) ? DBUF__SVG_KEY_ROLE
            : n <= PER_TENSOR_MAX       ? DBUF__SVG_KEY_TENSOR
            : thin                      ? DBUF__SVG_KEY_MODULE
                                        : DBUF__SVG_KEY_CLASS;
  d->tones = d->mode == DBUF__SVG_KEY_TENSOR || d->mode == DBUF__SVG_KEY_CLASS ||
             (d->mode == DBUF__SVG_KEY_ROLE && !thin);
  /* Hatching needs a few pixels of height; thin bands get solid gray. */
  d->pad_fill = d->pitch >= 4 ? "url(#hatch)" : "#bdbdbd";
}

/* ------------------------------------------------------------------ */
/* Head: title, subtitle, axis                                          */

/* What a band is, for the subtitle. */
static void
doc_band_words(const doc_t *d, char *out, size_t len)
{
  if (d->group == 1)
    snprintf(out, len, "One band per rank, x = byte offset in its segment");
  else if (d->nodes > 0 && d->group == d->nodes)
    snprintf(out, len, "One band per node of %d ranks, x = byte offset in the node's span; "
                       "white ticks: rank boundaries", d->nodes);
  else if (d->nodes > 0)
    snprintf(out, len, "One band per %lld nodes of %d ranks, x = byte offset in the band's "
                       "span; white ticks: rank boundaries",
             (long long)(d->group / d->nodes), d->nodes);
  else
    snprintf(out, len, "One band per %lld ranks, x = byte offset in the band's span; "
                       "white ticks: rank boundaries", (long long)d->group);
}

static const char *
doc_color_words(const doc_t *d)
{
  switch (d->mode) {
  case DBUF__SVG_KEY_TENSOR:
    return "one per tensor";
  case DBUF__SVG_KEY_CLASS:
    return "tensor classes (numbers in names as N), neighbours in two tones";
  case DBUF__SVG_KEY_ROLE:
    return d->tones ? "MoE roles, neighbouring tensors in two tones" : "MoE roles";
  default:
    return "modules (bands too thin for single tensors)";
  }
}

/* The root element, the hatch pattern of padding, a white background. */
static void
doc_open(doc_t *d, int height)
{
  dbuf__sb_t *b = d->b;
  dbuf__sb_printf(b,
                  "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
                  "height=\"%d\" viewBox=\"0 0 %d %d\" "
                  "font-family=\"DejaVu Sans, Arial, sans-serif\">\n",
                  d->width, height, d->width, height);
  dbuf__sb_puts(b, "<defs><pattern id=\"hatch\" width=\"5\" height=\"5\" "
                   "patternUnits=\"userSpaceOnUse\" "
                   "patternTransform=\"rotate(45)\"><rect width=\"5\" "
                   "height=\"5\" fill=\"#dcdcdc\"/><rect width=\"2\" "
                   "height=\"5\" fill=\"#707070\"/></pattern></defs>\n");
  dbuf__sb_printf(b, "<rect width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n", d->width,
                  height);
}

/* Title (layout, ranks, source), figures, what a band is, colors. */
static void
doc_title(doc_t *d)
{
  dbuf__rep_t *rep = d->rep;
  const dbuf_layout_t *l = rep->l;
  dbuf__sb_t *b = d->b;
  int64_t size = dbuf_layout_size(l);
  char g1[32], g2[32], g3[32], sb[24], words[256];

  dbuf__sb_printf(b, "<text x=\"%d\" y=\"22\" font-size=\"15\" font-weight=\"bold\">", LEFT);
  dbuf__sb_printf(b, "%s layout, dp %d", dbuf_layout_kind_name(dbuf_layout_kind(l)),
                  rep->nranks);
  if (d->zoom)
    dbuf__sb_printf(b, ", ranks %d-%d", d->r0, d->r1 - 1);
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
  dbuf__sb_xml(b, dbuf__rep_bytes_short(sb, rep->st.logical * rep->o.elem_size));
  dbuf__sb_puts(b, " ");
  dbuf__sb_xml(b, rep->o.dtype);
  dbuf__sb_printf(b, "); buffer %s elements, padding %.2f%%; %s tensors cut "
                     "by rank boundaries</text>\n",
                  dbuf__rep_group(g3, size),
                  size > 0 ? 100.0 * (double)rep->st.padding / (double)size : 0.0,
                  dbuf__rep_group(g1, rep->st.split_tensors));
  doc_band_words(d, words, sizeof words);
  dbuf__sb_printf(b, "<text x=\"%d\" y=\"56\" font-size=\"11\" fill=\"#333333\">%s</text>\n",
                  LEFT, words);
  dbuf__sb_printf(b, "<text x=\"%d\" y=\"72\" font-size=\"11\" fill=\"#333333\">colors: %s"
                     "</text>\n",
                  LEFT, doc_color_words(d));
}

/* The byte axis above the bands. */
static void
doc_axis(doc_t *d)
{
  dbuf__sb_t *b = d->b;
  dbuf__sb_printf(b, "<g font-size=\"10\" fill=\"#333333\">\n");
  dbuf__sb_printf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%s</text>\n", LEFT - 8,
                  TOP - 14, d->group == 1 ? "rank" : "ranks");
  dbuf__svg_axis(b, LEFT, d->pw, TOP - 14, d->maxspan * d->rep->o.elem_size);
  dbuf__sb_puts(b, "</g>\n");
}

/* ------------------------------------------------------------------ */
/* Bands                                                                */

/* The name of the waiting tensor where it fits in [x0, x1), else "L12" on
 * the first tensor of at least 16 px of another layer (small tensors that
 * fill padding gaps do not count); never overlapping, never past the plot. */
static void
band_label_flush(doc_t *d, band_t *bs)
{
  char text[512];
  int64_t x0 = bs->lab_x0, x1 = bs->lab_x1;
  int64_t lx = x0 > bs->next_free ? x0 : bs->next_free;
  if (bs->lab_tensor < 0)
    return;
  const char *name = dbuf_tensors_name(d->rep->t, bs->lab_tensor);
  bs->lab_tensor = -1;
  if (lx >= x1)
    return;
  int64_t layer = dbuf__svg_layer_of(name);
  int fits = dbuf__svg_fit_label(name, x1 - lx, text, sizeof text);
  if (!fits && lx == x0 && layer >= 0 && layer != bs->last_layer && x1 - x0 >= 16) {
    snprintf(text, sizeof text, "L%lld", (long long)layer);
    fits = 1;
  }
  int64_t tw = (int64_t)((double)strlen(text) * DBUF__SVG_CHAR_W) + 6;
  if (!fits || lx + tw > d->pw)
    return;
  dbuf__sb_printf(&d->labels, "<text x=\"%lld\" y=\"%d\">", (long long)(LEFT + lx + 3),
                  d->pt.y + d->bh / 2 + 4);
  dbuf__sb_xml(&d->labels, text);
  dbuf__sb_puts(&d->labels, "</text>\n");
  bs->next_free = lx + tw + 2;
  if (layer >= 0)
    bs->last_layer = layer;
}

/* A piece at [x0, x1): one label for the pieces of a tensor that follow
 * each other across the ranks of a band. */
static void
band_label(doc_t *d, band_t *bs, int64_t tensor, int64_t x0, int64_t x1)
{
  if (d->pitch < 14)
    return;
  if (tensor == bs->lab_tensor && x0 <= bs->lab_x1 + 1) {
    bs->lab_x1 = x1;
    return;
  }
  band_label_flush(d, bs);
  bs->lab_tensor = tensor;
  bs->lab_x0 = x0;
  bs->lab_x1 = x1;
}

/* Black bars where the band's first or last piece is a part of a tensor. */
static void
band_cut(doc_t *d, int64_t x, int left)
{
  int mw = d->pitch >= 12 ? 2 : 1;
  if (!left)
    x = x > mw ? x - mw : 0;
  dbuf__svg_rect_path(&d->cuts, LEFT + x, d->pt.y, mw, d->bh);
}

/* Paint the pieces and holes of rank r into the band. */
static int
band_rank(doc_t *d, band_t *bs, int r)
{
  dbuf__rep_t *rep = d->rep;
  const dbuf_tensors_t *t = rep->t;
  int64_t s = rep->range[r], e = rep->range[r + 1], cursor = s;
  int64_t base = rep->range[bs->b0];
  int rc = dbuf__rep_pieces(rep, r);
  if (rc != 0)
    return rc;
  bs->pieces += rep->np;
  int64_t xs = dbuf__svg_px(&d->pt, s - base);
  if (r > bs->b0 && xs - bs->last_tick >= TICK_MIN_PX && d->pw - xs >= TICK_MIN_PX) {
    dbuf__svg_rect_path(&d->ticks, LEFT + xs, d->pt.y, 1, d->bh);
    bs->last_tick = xs;
  }
  for (int64_t k = 0; k < rep->np; k++) {
    const dbuf_piece_t *p = &rep->pc[k];
    int64_t gs = s + p->offset, ge = gs + p->nelems;
    if (gs > cursor)
      dbuf__svg_paint_span(&d->pt, cursor - base, gs - base, DBUF__SVG_PAD);
    if (gs < cursor)
      gs = cursor; /* overlapping tensors: draw what is left */
    if (ge <= gs)
      continue;
    if (p->tensor != d->prev && d->tones)
      d->shade ^= 1;
    d->prev = p->tensor;
    dbuf__svg_paint_span(&d->pt, gs - base, ge - base, d->cls.color[p->tensor] * 2 + d->shade);
    cursor = ge;
    int64_t x0 = dbuf__svg_px(&d->pt, gs - base), x1 = dbuf__svg_px(&d->pt, ge - base);
    if (r == bs->b0 && gs == s && p->elem_begin > 0)
      band_cut(d, x0, 1);
    if (r == bs->b1 - 1 && ge == e &&
        p->elem_begin + p->nelems < dbuf_tensors_numel(t, p->tensor))
      band_cut(d, x1, 0);
    band_label(d, bs, p->tensor, x0, x1);
  }
  if (cursor < e)
    dbuf__svg_paint_span(&d->pt, cursor - base, e - base, DBUF__SVG_PAD);
  return 0;
}

/* The band's background, tooltip and label. */
static void
band_frame(doc_t *d, const band_t *bs, int k, int y)
{
  const int64_t *range = d->rep->range;
  int64_t s = range[bs->b0], e = range[bs->b1];
  char name[64];
  if (bs->b1 - bs->b0 == 1)
    snprintf(name, sizeof name, "%d", bs->b0);
  else
    snprintf(name, sizeof name, "%d-%d", bs->b0, bs->b1 - 1);
  dbuf__sb_printf(d->b, "<rect class=\"band\" x=\"%d\" y=\"%d\" width=\"%lld\" height=\"%d\" "
                        "fill=\"#f0f0f0\"><title>%s %s [%lld, %lld): %lld elements, "
                        "%lld %s</title></rect>\n",
                  LEFT, y, (long long)d->pw, d->bh, d->group == 1 ? "rank" : "ranks", name,
                  (long long)s, (long long)e, (long long)(e - s), (long long)bs->pieces,
                  d->group == 1 ? "tensors" : "tensor pieces");
  if (k % d->step == 0)
    dbuf__sb_printf(d->b, "<text x=\"%d\" y=\"%d\" font-size=\"%d\" text-anchor=\"end\">%s"
                          "</text>\n",
                    LEFT - 8, y + d->bh / 2 + (d->pitch >= 12 ? 4 : 3),
                    d->pitch >= 12 ? 11 : 9, name);
}

static int
doc_bands(doc_t *d, dbuf_diag_t *diag)
{
  d->pt.paths = d->paths;
  d->pt.left = LEFT;
  d->pt.maxseg = d->maxspan;
  d->pt.pw = d->pw;
  d->shade = d->tones; /* the first tensor gets the first tone */
  d->prev = -1;
  for (int k = 0; k < d->nbands && !d->b->failed; k++) {
    band_t bs = {0, 0, 0, -1, 0, 0, -1, 0, 0};
    int y = TOP + k * d->pitch;
    band_ranks(d, k, &bs.b0, &bs.b1);
    dbuf__svg_band_begin(&d->pt, y, d->bh);
    for (int r = bs.b0; r < bs.b1; r++) {
      int rc = band_rank(d, &bs, r);
      if (rc != 0)
        return dbuf__diag(diag, rc, "svg: rank %d: %s", r, dbuf_strerror(rc));
    }
    dbuf__svg_band_end(&d->pt);
    band_label_flush(d, &bs);
    band_frame(d, &bs, k, y);
  }
  return 0;
}

/* Append path p filled with fill (and extra attributes) when it has any. */
static void
doc_path(dbuf__sb_t *b, const dbuf__sb_t *p, const char *fill, const char *extra)
{
  if (p->len == 0)
    return;
  dbuf__sb_printf(b, "<path fill=\"%s\"%s d=\"", fill, extra);
  dbuf__sb_append(b, p->p, p->len);
  dbuf__sb_puts(b, "\"/>\n");
}

static void
doc_paths(doc_t *d)
{
  char fill[16];
  for (int i = 0; i < DBUF__SVG_NPAINT; i++) {
    if (i != DBUF__SVG_PAD)
      snprintf(fill, sizeof fill, "#%06x", dbuf__svg_tone(i));
    doc_path(d->b, &d->paths[i], i == DBUF__SVG_PAD ? d->pad_fill : fill, "");
  }
  doc_path(d->b, &d->cuts, "#000000", "");
  doc_path(d->b, &d->ticks, "#ffffff", " fill-opacity=\"0.85\"");
  if (d->labels.len > 0) {
    dbuf__sb_puts(d->b, "<g font-family=\"DejaVu Sans Mono, monospace\" "
                        "font-size=\"10\" fill=\"#111111\">\n");
    dbuf__sb_append(d->b, d->labels.p, d->labels.len);
    dbuf__sb_puts(d->b, "</g>\n");
  }
}

/* ------------------------------------------------------------------ */
/* Legend                                                               */

static int
legend_ncols(const doc_t *d)
{
  return d->width / 380 > 0 ? d->width / 380 : 1;
}

/* Entries of the class grid: the colored classes and "other". */
static int
legend_nclasses(const doc_t *d)
{
  int64_t shown = d->cls.nclasses < DBUF__SVG_NCOLORS ? d->cls.nclasses : DBUF__SVG_NCOLORS;
  return (int)shown + (d->cls.nclasses > DBUF__SVG_NCOLORS);
}

/* Rows: the class grid, the padding, the markers. */
static int
legend_rows(const doc_t *d)
{
  int ncols = legend_ncols(d);
  return (legend_nclasses(d) + ncols - 1) / ncols + 2;
}

/* A swatch of color class (paint 2 color; both tones when tones) and its
 * name, cut to fit the column, with its share of the tensors. */
static void
legend_class(doc_t *d, int x, int y, int colw, int color, const char *name, int64_t weight)
{
  int64_t maxchars = (int64_t)((colw - 30) / 6.4);
  char text[512];
  snprintf(text, sizeof text, "%s", name);
  if ((int64_t)strlen(text) > maxchars && maxchars > 3) {
    text[maxchars - 3] = '\0';
    strcat(text, "...");
  }
  if (d->tones)
    dbuf__sb_printf(d->b, "<rect x=\"%d\" y=\"%d\" width=\"7\" height=\"12\" fill=\"#%06x\"/>"
                          "<rect x=\"%d\" y=\"%d\" width=\"7\" height=\"12\" fill=\"#%06x\"/>",
                    x, y - 10, dbuf__svg_tone(color * 2), x + 7, y - 10,
                    dbuf__svg_tone(color * 2 + 1));
  else
    dbuf__sb_printf(d->b, "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"12\" fill=\"#%06x\" "
                          "stroke=\"#666666\" stroke-width=\"0.5\"/>",
                    x, y - 10, dbuf__svg_tone(color * 2));
  dbuf__sb_printf(d->b, "<text x=\"%d\" y=\"%d\">", x + 20, y);
  dbuf__sb_xml(d->b, text);
  int64_t logical = d->rep->st.logical;
  dbuf__sb_printf(d->b, " (%.1f%%)</text>\n",
                  logical > 0 ? 100.0 * (double)weight / (double)logical : 0.0);
}

/* The padding drawn: bytes exact and in binary units, share of the span. */
static void
legend_padding(doc_t *d, int y)
{
  const int64_t *range = d->rep->range;
  int64_t span = range[d->r1] - range[d->r0], pad = d->pt.pad_elems;
  char bytes[64], where[48];
  if (d->zoom)
    snprintf(where, sizeof where, "of ranks %d-%d", d->r0, d->r1 - 1);
  else
    snprintf(where, sizeof where, "of the buffer");
  dbuf__sb_printf(d->b, "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"12\" fill=\"%s\" "
                        "stroke=\"#666666\" stroke-width=\"0.5\"/><text x=\"%d\" y=\"%d\">"
                        "padding: %s, %.2f%% %s (to scale; lone holes at least %d px)</text>\n",
                  LEFT, y - 10, d->pad_fill, LEFT + 20, y,
                  dbuf__rep_bytes(bytes, pad * d->rep->o.elem_size),
                  span > 0 ? 100.0 * (double)pad / (double)span : 0.0, where,
                  DBUF__SVG_PAD_MIN_PX);
}

static void
doc_legend(doc_t *d, int top)
{
  int ncols = legend_ncols(d), colw = (d->width - LEFT) / ncols;
  int nclass = legend_nclasses(d), y = top;
  const dbuf__svg_classes_t *c = &d->cls;
  char name[512];
  dbuf__sb_printf(d->b, "<g font-size=\"11\">\n");
  for (int k = 0; k < nclass; k++) {
    int x = LEFT + (k % ncols) * colw;
    y = top + (k / ncols) * LEGEND_ROW;
    if (k < c->nclasses && k < DBUF__SVG_NCOLORS) {
      int64_t e = c->order[k];
      dbuf__svg_class_display(c, e, name, sizeof name);
      legend_class(d, x, y, colw, c->class_color[e], name, c->weight[e]);
    } else {
      int64_t w = 0;
      for (int64_t p = DBUF__SVG_NCOLORS; p < c->nclasses; p++)
        w += c->weight[c->order[p]];
      snprintf(name, sizeof name, "%lld other classes",
               (long long)(c->nclasses - DBUF__SVG_NCOLORS));
      legend_class(d, x, y, colw, DBUF__SVG_OTHER, name, w);
    }
  }
  y = top + (nclass + ncols - 1) / ncols * LEGEND_ROW;
  legend_padding(d, y);
  y += LEGEND_ROW;
  dbuf__sb_printf(d->b, "<rect x=\"%d\" y=\"%d\" width=\"3\" height=\"12\" fill=\"#000000\"/>"
                        "<text x=\"%d\" y=\"%d\">%s boundary cutting a tensor</text>\n",
                  LEFT + 5, y - 10, LEFT + 20, y,
                  d->group == 1 ? "rank" : d->nodes > 0 && d->group == d->nodes ? "node"
                                                                                : "band");
  if (d->group > 1)
    dbuf__sb_printf(d->b, "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"12\" fill=\"#f0f0f0\"/>"
                          "<rect x=\"%d\" y=\"%d\" width=\"1\" height=\"12\" fill=\"#4e79a7\"/>"
                          "<rect x=\"%d\" y=\"%d\" width=\"1\" height=\"12\" fill=\"#ffffff\"/>"
                          "<text x=\"%d\" y=\"%d\">rank boundary</text>\n",
                    LEFT + colw, y - 10, LEFT + colw, y - 10, LEFT + colw + 6, y - 10,
                    LEFT + colw + 20, y);
  dbuf__sb_puts(d->b, "</g>\n");
}

/* ------------------------------------------------------------------ */

static void
doc_free(doc_t *d)
{
  for (int i = 0; i < DBUF__SVG_NPAINT; i++) {
    if (d->paths[i].failed)
      d->b->failed = 1;
    dbuf__sb_free(&d->paths[i]);
  }
  if (d->cuts.failed || d->ticks.failed || d->labels.failed)
    d->b->failed = 1;
  dbuf__sb_free(&d->cuts);
  dbuf__sb_free(&d->ticks);
  dbuf__sb_free(&d->labels);
  dbuf__svg_classes_free(&d->cls);
}

int
dbuf__report_svg(dbuf__rep_t *rep, dbuf__sb_t *b, dbuf_diag_t *diag)
{
  doc_t d;
  int rc;
  memset(&d, 0, sizeof d);
  d.rep = rep;
  d.b = b;
  d.width = rep->o.svg_width;
  if ((rc = doc_view(&d, diag)) != 0)
    return rc;
  doc_geometry(&d);
  if ((rc = dbuf__svg_classes_build(rep->t, d.mode, &d.cls)) != 0)
    return dbuf__diag(diag, rc, "svg: out of memory");
  int legend_top = TOP + d.nbands * d.pitch + 28;
  doc_open(&d, legend_top + legend_rows(&d) * LEGEND_ROW + 12);
  doc_title(&d);
  doc_axis(&d);
  if ((rc = doc_bands(&d, diag)) == 0) {
    doc_paths(&d);
    doc_legend(&d, legend_top);
    dbuf__sb_puts(b, "</svg>\n");
  }
  doc_free(&d);
  return rc;
}
