/*
 * The SVG report in three parts, one way: the document (report_svg.c: the
 * layout of the picture, bands and legend) uses the tensor classes
 * (report_svg_classes.c: which color each tensor gets) and the painter
 * (report_svg_paint.c: drawing primitives, the offset-to-pixel scale, text
 * that fits).  Classes and painter do not know each other.
 */
#ifndef DBUF_REPORT_SVG_INTERNAL_H
#define DBUF_REPORT_SVG_INTERNAL_H

#include "report_internal.h"

#include <stddef.h>
#include <stdint.h>

__extension__ typedef __int128 dbuf__i128_t;

/* ------------------------------------------------------------------ */
/* Colors                                                               */

#define DBUF__SVG_NCOLORS 12
#define DBUF__SVG_OTHER DBUF__SVG_NCOLORS /* the classes past the palette */
/* Two tones per color, and padding. */
#define DBUF__SVG_NPAINT ((DBUF__SVG_NCOLORS + 1) * 2 + 1)
#define DBUF__SVG_PAD (DBUF__SVG_NPAINT - 1)

/* RGB of a paint below DBUF__SVG_PAD: color paint / 2, the second tone
 * (paint odd) 35% of the way to white. */
unsigned dbuf__svg_tone(int paint);

/* ------------------------------------------------------------------ */
/* Tensor classes                                                       */

/*
 * How tensors are grouped into colors.  TENSOR: each its own.  CLASS: the
 * name with every all-digit dotted component as N
 * ("model.layers.N.mlp.gate_proj.weight").  MODULE: a CLASS cut after the
 * component that follows "layers.N." ("model.layers.N.mlp").  ROLE (MoE
 * models): routed experts, shared experts, dense MLP, attention, router,
 * embeddings, norms, other; fixed colors and legend order.
 */
enum { DBUF__SVG_KEY_TENSOR, DBUF__SVG_KEY_CLASS, DBUF__SVG_KEY_MODULE, DBUF__SVG_KEY_ROLE };

typedef struct dbuf__svg_classes {
  int64_t nclasses;
  char *keys;                 /* class keys, NUL-separated */
  int64_t *key_off;           /* [nclasses] */
  int64_t *weight;            /* [nclasses] elements */
  int64_t *first;             /* [nclasses] first tensor id */
  int64_t *order;             /* [nclasses] the class at each legend position */
  unsigned char *class_color; /* [nclasses] palette index */
  unsigned char *color;       /* [ntensors] palette index of each tensor */
} dbuf__svg_classes_t;

/* Whether any tensor is a routed expert (then the picture colors by role). */
int dbuf__svg_is_moe(const dbuf_tensors_t *t);

/* Group the tensors by mode (DBUF__SVG_KEY_*).  Legend order: heaviest class
 * first (ties by first appearance), ROLE in its fixed order.  The first
 * DBUF__SVG_NCOLORS positions get the palette, the rest DBUF__SVG_OTHER.
 * Returns 0 or DBUF_ENOMEM (then c holds nothing to free). */
int dbuf__svg_classes_build(const dbuf_tensors_t *t, int mode, dbuf__svg_classes_t *c);

void dbuf__svg_classes_free(dbuf__svg_classes_t *c);

/* What the legend shows of class cls: no "model.", no "layers.N.", no
 * ".weight". */
void dbuf__svg_class_display(const dbuf__svg_classes_t *c, int64_t cls, char *out,
                             size_t len);

/* ------------------------------------------------------------------ */
/* The band painter                                                     */

/* A hole narrower than DBUF__SVG_PAD_MIN_PX pixels and at least
 * DBUF__SVG_PAD_ALONE_PX after the previous hole of its band gets a mark
 * DBUF__SVG_PAD_MIN_PX wide. */
#define DBUF__SVG_PAD_MIN_PX 2
#define DBUF__SVG_PAD_ALONE_PX 12

/*
 * Paints one band at a time into one path per paint.  Offsets are relative
 * to the band start; maxseg elements span the plot width pw.  Tensor paint
 * narrower than a pixel is aggregated (each pixel column takes the paint
 * holding most of its elements, padding included); lone small holes get
 * a mark DBUF__SVG_PAD_MIN_PX wide.
 */
typedef struct dbuf__svg_painter {
  dbuf__sb_t *paths;   /* [DBUF__SVG_NPAINT] */
  int left;            /* x of offset 0 */
  int64_t maxseg;      /* elements across the plot width, >= 1 */
  int64_t pw;          /* plot width in pixels */
  int y, h;            /* band top and height */
  int64_t pad_elems;   /* padding painted so far, every band */
  /* private */
  int64_t acc[DBUF__SVG_NPAINT]; /* 1/pw elements of each paint in pixel cur */
  int64_t cur;                   /* pixel being accumulated, or -1 */
  int64_t run_x0, run_x1;
  int run_paint;                 /* pending run, or -1 */
  int64_t mark_x0, mark_x1;      /* pending padding mark, empty when equal */
  int64_t pad_end;               /* pixel after the band's last hole, or -1 */
} dbuf__svg_painter_t;

/* Start a band at y, h pixels high. */
void dbuf__svg_band_begin(dbuf__svg_painter_t *p, int y, int h);
/* Paint relative offsets [a, b) with paint; calls come in increasing
 * offset order within a band. */
void dbuf__svg_paint_span(dbuf__svg_painter_t *p, int64_t a, int64_t b, int paint);
/* Flush what the band still holds. */
void dbuf__svg_band_end(dbuf__svg_painter_t *p);
/* Pixel column of relative offset x (floor), 0 .. pw. */
int64_t dbuf__svg_px(const dbuf__svg_painter_t *p, int64_t x);

/* A filled rectangle as a path piece ("M x y h w v h h-w z"). */
void dbuf__svg_rect_path(dbuf__sb_t *b, int64_t x, int y, int64_t w, int h);

/* The byte axis of a plot pw pixels wide at x = left: ticks at multiples of
 * a power of two, labels at y. */
void dbuf__svg_axis(dbuf__sb_t *b, int left, int64_t pw, int y, int64_t maxbytes);

/* ------------------------------------------------------------------ */
/* Text                                                                 */

#define DBUF__SVG_CHAR_W 6.1 /* width of a 10 px monospace character */

/* The N of "layers.N." in a name, or -1. */
int64_t dbuf__svg_layer_of(const char *name);

/* The longest of a few shorter forms of name that fits in w pixels of
 * 10 px monospace; 0 when none fits. */
int dbuf__svg_fit_label(const char *name, int64_t w, char *out, size_t len);

#endif /* DBUF_REPORT_SVG_INTERNAL_H */
