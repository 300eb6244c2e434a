/*
 * SVG report, tensor classes: which color each tensor gets.  Names are cut
 * to class keys (see DBUF__SVG_KEY_* in report_svg_internal.h), classes
 * are ranked for the legend and the first DBUF__SVG_NCOLORS get the
 * palette.  MoE models are colored by role: routed experts, shared
 * experts, dense MLP, attention and the rest, each in a fixed color.
 */
#include "report_svg_internal.h"
#include "strmap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* Roles (MoE models)                                                   */

enum { ROLE_ROUTED, ROLE_SHARED, ROLE_DENSE, ROLE_ATTN, ROLE_ROUTER, ROLE_EMBED,
       ROLE_NORM, ROLE_OTHER, NROLES };

static const char *const role_names[NROLES] = {
    "routed experts", "shared experts", "dense MLP", "attention",
    "router", "embeddings and output head", "norms", "other"};

/* Palette index of each role: fixed, so every MoE picture reads alike. */
static const unsigned char role_colors[NROLES] = {0, 1, 2, 3, 6, 4, 5, DBUF__SVG_OTHER};

/* Component c (n bytes) equals w, or holds w. */
static int
comp_is(const char *c, size_t n, const char *w)
{
  return strlen(w) == n && memcmp(c, w, n) == 0;
}

static int
comp_has(const char *c, size_t n, const char *w)
{
  return memmem(c, n, w, strlen(w)) != NULL;
}

/*
 * The role of a tensor from the components of its name, HF and
 * Megatron-Core spellings: a norm anywhere wins (fused "layer_norm_weight"
 * too), then shared experts, routed experts ("experts", "local_experts"),
 * the router ("gate", "router"), attention, the dense MLP, embeddings and
 * the output head.
 */
static int
role_of(const char *name)
{
  unsigned has = 0;
  for (const char *s = name; *s != '\0';) {
    size_t n = strcspn(s, ".");
    if (comp_has(s, n, "norm") ||
        (n >= 2 && n <= 4 && s[0] == 'l' && s[1] == 'n')) /* ln_f, ln_1 */
      has |= 1u << ROLE_NORM;
    else if (comp_has(s, n, "shared_expert"))
      has |= 1u << ROLE_SHARED;
    else if (comp_is(s, n, "experts") || comp_is(s, n, "local_experts"))
      has |= 1u << ROLE_ROUTED;
    else if (comp_is(s, n, "gate") || comp_is(s, n, "router"))
      has |= 1u << ROLE_ROUTER;
    else if (comp_has(s, n, "attn") || comp_has(s, n, "attention"))
      has |= 1u << ROLE_ATTN;
    else if (comp_is(s, n, "mlp") || comp_is(s, n, "feed_forward") || comp_is(s, n, "ffn"))
      has |= 1u << ROLE_DENSE;
    else if (comp_has(s, n, "embed") || comp_is(s, n, "wte") || comp_is(s, n, "wpe") ||
             comp_is(s, n, "lm_head") || comp_is(s, n, "output_layer"))
      has |= 1u << ROLE_EMBED;
    s += n;
    if (*s == '.')
      s++;
  }
  static const int priority[] = {ROLE_NORM, ROLE_SHARED, ROLE_ROUTED, ROLE_ROUTER,
                                 ROLE_ATTN, ROLE_DENSE,  ROLE_EMBED};
  for (size_t i = 0; i < sizeof priority / sizeof priority[0]; i++)
    if (has & (1u << priority[i]))
      return priority[i];
  return ROLE_OTHER;
}

int
dbuf__svg_is_moe(const dbuf_tensors_t *t)
{
  int64_t n = dbuf_tensors_count(t);
  for (int64_t i = 0; i < n; i++)
    if (role_of(dbuf_tensors_name(t, i)) == ROLE_ROUTED)
      return 1;
  return 0;
}

/* ------------------------------------------------------------------ */
/* Class keys                                                           */

/* Bytes of every role name with its NUL, and then some. */
#define ROLE_ROOM 256

/*
 * Class key of a name into out (strlen(name) + 1 bytes suffice, or
 * ROLE_ROOM in ROLE mode).  Returns its length; *role gets the role (ROLE
 * mode) or -1.
 */
static size_t
class_key(const char *name, char *out, int mode, int *role)
{
  size_t j = 0;
  const char *s = name;
  *role = -1;
  if (mode == DBUF__SVG_KEY_ROLE) {
    *role = role_of(name);
    size_t n = strlen(role_names[*role]);
    memcpy(out, role_names[*role], n + 1);
    return n;
  }
  if (mode == DBUF__SVG_KEY_TENSOR) {
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
  if (mode == DBUF__SVG_KEY_MODULE && (p = strstr(out, "layers.N.")) != NULL) {
    p += strlen("layers.N.");
    p += strcspn(p, ".");
    *p = '\0';
    j = (size_t)(p - out);
  }
  return j;
}

/* ------------------------------------------------------------------ */
/* Classes                                                              */

void
dbuf__svg_classes_free(dbuf__svg_classes_t *c)
{
  free(c->keys);
  free(c->key_off);
  free(c->weight);
  free(c->first);
  free(c->order);
  free(c->class_color);
  free(c->color);
  memset(c, 0, sizeof *c);
}

typedef struct {
  int64_t key, first, cls;
} crank_t;

/* Smallest key first (minus the weight, or the role), ties by first
 * appearance. */
static int
cmp_class(const void *a, const void *b)
{
  const crank_t *x = a, *y = b;
  if (x->key != y->key)
    return x->key < y->key ? -1 : 1;
  return (x->first > y->first) - (x->first < y->first);
}

/* Legend order and colors of the classes; role[e] the role of class e
 * (ROLE mode) or -1. */
static int
classes_rank(dbuf__svg_classes_t *c, const signed char *role)
{
  crank_t *cr = dbuf__mallocn(c->nclasses, sizeof *cr);
  if (cr == NULL)
    return DBUF_ENOMEM;
  for (int64_t e = 0; e < c->nclasses; e++)
    cr[e] = (crank_t){role[e] >= 0 ? role[e] : -c->weight[e], c->first[e], e};
  qsort(cr, (size_t)c->nclasses, sizeof *cr, cmp_class);
  for (int64_t p = 0; p < c->nclasses; p++) {
    int64_t e = cr[p].cls;
    c->order[p] = e;
    c->class_color[e] = role[e] >= 0        ? role_colors[role[e]]
                        : p < DBUF__SVG_NCOLORS ? (unsigned char)p
                                                : DBUF__SVG_OTHER;
  }
  free(cr);
  return 0;
}

/* The arrays of c for n tensors (at most n classes) whose names take
 * chars bytes with their NULs.  Returns 0 or DBUF_ENOMEM. */
static int
classes_alloc(dbuf__svg_classes_t *c, int64_t n, int64_t chars)
{
  c->keys = dbuf__mallocn(chars + ROLE_ROOM, 1); /* see class_key */
  c->key_off = dbuf__mallocn(n, sizeof *c->key_off);
  c->weight = dbuf__calloc(n, sizeof *c->weight);
  c->first = dbuf__mallocn(n, sizeof *c->first);
  c->order = dbuf__mallocn(n, sizeof *c->order);
  c->class_color = dbuf__mallocn(n, 1);
  c->color = dbuf__mallocn(n, 1);
  return c->keys == NULL || c->key_off == NULL || c->weight == NULL || c->first == NULL ||
                 c->order == NULL || c->class_color == NULL || c->color == NULL
             ? DBUF_ENOMEM
             : 0;
}

int
dbuf__svg_classes_build(const dbuf_tensors_t *t, int mode, dbuf__svg_classes_t *c)
{
  int64_t n = dbuf_tensors_count(t), chars = 0;
  dbuf__strmap_t map = DBUF__STRMAP_INIT; /* class key -> class id */
  int rc = DBUF_ENOMEM;

  memset(c, 0, sizeof *c);
  for (int64_t i = 0; i < n; i++)
    chars += (int64_t)strlen(dbuf_tensors_name(t, i)) + 1;
  int64_t *cls = dbuf__mallocn(n, sizeof *cls);
  signed char *role = dbuf__mallocn(n, 1);
  if (classes_alloc(c, n, chars) != 0 || cls == NULL || role == NULL)
    goto out;

  int64_t used = 0;
  for (int64_t i = 0; i < n; i++) {
    char *k = c->keys + used;
    int r;
    int64_t e;
    size_t len = class_key(dbuf_tensors_name(t, i), k, mode, &r);
    int added = dbuf__strmap_add(&map, k, &e); /* ids in order of first appearance */
    if (added != 0 && added != DBUF_EDUP) {
      rc = added;
      goto out;
    }
    if (added == 0) {
      c->nclasses++;
      c->key_off[e] = used;
      c->first[e] = i;
      role[e] = (signed char)r;
      used += (int64_t)len + 1;
    }
    cls[i] = e;
    c->weight[e] += dbuf_tensors_numel(t, i); /* <= the total, an int64_t */
  }
  if (classes_rank(c, role) != 0)
    goto out;
  for (int64_t i = 0; i < n; i++)
    c->color[i] = c->class_color[cls[i]];
  rc = 0;
out:
  free(cls);
  free(role);
  dbuf__strmap_free(&map);
  if (rc != 0)
    dbuf__svg_classes_free(c);
  return rc;
}

void
dbuf__svg_class_display(const dbuf__svg_classes_t *c, int64_t cls, char *out, size_t len)
{
  const char *key = c->keys + c->key_off[cls];
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
