/*
 * Report writers: exact text on the seed examples (figures worked out by
 * hand), invariants of every format on a table of layouts, SVG structure,
 * speed on deepseek-v3 at 1024 ranks, argument errors; and the tensor-list
 * comparison used by `dbuf-shard verify`.
 */
#include "dbuf/layout.h"
#include "dbuf/layout_json.h"
#include "dbuf/models.h"
#include "dbuf/report.h"
#include "dbuf/shapes_io.h"
#include "dbuf/tensors.h"
#include "testutil.h"

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The seed document's examples. */
static const char seed5[] = "P0 2x6\nP1 4x4\nP2 4x4\nP3 1x2\nP4 1x6\n";
static const char seed2[] = "P0 2x6\nP1 4x4\nP2 1x2\n";

static dbuf_tensors_t *
shapes(const char *text)
{
  dbuf_tensors_t *t = NULL;
  dbuf_diag_t d;
  if (text[0] == '\0') { /* an empty list: the parser refuses "no tensors" */
    ck_assert_int_eq(dbuf_tensors_create(&t), 0);
    return t;
  }
  ck_assert_msg(dbuf_shapes_parse("test", text, strlen(text), &t, &d) == 0,
                "%s", d.msg);
  return t;
}

static dbuf_layout_t *
build(const char *text, dbuf_layout_kind_t kind, int nranks, int64_t block)
{
  dbuf_tensors_t *t = shapes(text);
  dbuf_layout_params_t p;
  dbuf_layout_t *l = NULL;
  dbuf_diag_t d;
  dbuf_layout_params_init(&p);
  p.kind = kind;
  p.nranks = nranks;
  p.block_size = block;
  p.auto_owners = kind == DBUF_LAYOUT_TENSOR;
  ck_assert_msg(dbuf_layout_build(t, &p, &l, &d) == 0, "%s", d.msg);
  dbuf_tensors_destroy(t);
  return l;
}

static char *
report(const dbuf_layout_t *l, dbuf_report_format_t f,
       const dbuf_report_opts_t *o)
{
  char *text = NULL;
  size_t len = 0;
  dbuf_diag_t d;
  int rc = dbuf_report_write(l, f, o, &text, &len, &d);
  ck_assert_msg(rc == 0, "%s report: %s", dbuf_report_format_name(f), d.msg);
  ck_assert_ptr_nonnull(text);
  ck_assert_uint_eq(strlen(text), len);
  ck_assert_msg(len > 0 && text[len - 1] == '\n', "%s report does not end in "
                "a newline", dbuf_report_format_name(f));
  return text;
}

static int64_t
count_lines(const char *s)
{
  int64_t n = 0;
  for (; *s; s++)
    n += *s == '\n';
  return n;
}

/* Line k (0-based) of text, in a static buffer. */
static const char *
line(const char *text, int64_t k)
{
  static char buf[4096];
  for (; k > 0 && *text; text++)
    if (*text == '\n')
      k--;
  size_t n = strcspn(text, "\n");
  ck_assert_uint_lt(n, sizeof buf);
  memcpy(buf, text, n);
  buf[n] = '\0';
  return buf;
}

/* ------------------------------------------------------------------ */
/* The seed examples, exactly                                           */

START_TEST(test_seed_summary)
{
  dbuf_layout_t *l = build(seed5, DBUF_LAYOUT_PADDED, 5, 1);
  char *s = report(l, DBUF_REPORT_SUMMARY, NULL);
  /* By hand: chunk LCM(6,4,4,2,6) = 12; 52 elements of data in 60; the gap
   * [30, 32) before P2 and the tail [54, 60) after P4; P1 [12, 28) and P2
   * [32, 48) cross a boundary; P1 and P2 have 16 elements, P1 comes first. */
  ck_assert_str_eq(
      s, "layout:          padded (RowAtomic), dp 5, chunk 12 elements\n"
         "tensors:         5, dtype bf16, 2 bytes per element\n"
         "logical size:    52 elements, 104 bytes\n"
         "buffer size:     60 elements, 120 bytes\n"
         "padding:         8 elements (13.33% of the buffer), 2 in gaps, 6 at "
         "the end\n"
         "per rank:        min 12 (rank 0), max 12 (rank 0), mean 12 elements\n"
         "per rank bytes:  min 24, max 24, mean 24\n"
         "split tensors:   2 of 5 held by more than one rank\n"
         "largest tensor:  P1 4x4, 16 elements, 32 bytes, on ranks 1-2\n");
  free(s);
  dbuf_layout_destroy(l);
}
END_TEST

START_TEST(test_seed_summary_tensor)
{
  /* LPT owners: P1 -> 0, P2 -> 1, P0 -> 0, P4 -> 1, P3 -> 1: rank 0 holds
   * 28 elements, rank 1 24; mean 26, balance 28 / 26 = 1.0769.
   * Newton-Schulz costs numel x min(rows, cols): P0 12 x 2 = 24, P1 and
   * P2 16 x 4 = 64, P3 2 x 1 = 2, P4 6 x 1 = 6; rank 0 88, rank 1 72,
   * mean 80: 88 / 80 = 1.1000.  fp32 and
   * 64-byte alignment: 112 and 96 bytes round up to 128 each. */
  dbuf_layout_t *l = build(seed5, DBUF_LAYOUT_TENSOR, 2, 1);
  dbuf_report_opts_t o;
  dbuf_report_opts_init(&o);
  o.elem_size = 4;
  o.dtype = "fp32";
  o.align_bytes = 64;
  o.source = "seed";
  char *s = report(l, DBUF_REPORT_SUMMARY, &o);
  ck_assert_str_eq(
      s, "layout:          tensor (TensorAtomic), dp 2\n"
         "tensors:         5 (seed), dtype fp32, 4 bytes per element\n"
         "logical size:    52 elements, 208 bytes\n"
         "buffer size:     52 elements, 208 bytes\n"
         "padding:         0 elements (0.00% of the buffer), 0 in gaps, 0 at "
         "the end\n"
         "per rank:        min 24 (rank 1), max 28 (rank 0), mean 26 elements\n"
         "per rank bytes:  min 96, max 112, mean 104\n"
         "aligned:         segments rounded up to 64 bytes: max 128 bytes per "
         "rank, 256 bytes in all\n"
         "load balance:    max/mean 1.0769 (rank 0)\n"
         "ns load balance: max/mean 1.1000 (rank 0)\n"
         "split tensors:   0 of 5 held by more than one rank\n"
         "largest tensor:  P1 4x4, 16 elements, 64 bytes, on rank 0\n");
  free(s);
  dbuf_layout_destroy(l);
}
END_TEST

START_TEST(test_seed_diagram_padded)
{
  /* Exactly the five lines of the Megatron-FSDP layout builder document. */
  dbuf_layout_t *l = build(seed5, DBUF_LAYOUT_PADDED, 5, 1);
  char *s = report(l, DBUF_REPORT_DIAGRAM, NULL);
  ck_assert_str_eq(
      s, "rank 0 [ 0, 12): | P0 row 0              | P0 row 1               |\n"
         "rank 1 [12, 24): | P1 row 0      | P1 row 1      | P1 row 2       |\n"
         "rank 2 [24, 36): | P1 row 3      | P3    | gap   | P2 row 0       |\n"
         "rank 3 [36, 48): | P2 row 1      | P2 row 2      | P2 row 3       |\n"
         "rank 4 [48, 60): | P4                    | pad                    |\n");
  free(s);
  dbuf_layout_destroy(l);
}
END_TEST

/* s with every run of spaces squeezed to one. */
static void
squeeze(const char *s, char *out)
{
  for (; *s; s++)
    if (!(*s == ' ' && s[1] == ' '))
      *out++ = *s;
  *out = '\0';
}

START_TEST(test_seed_diagram_unpadded)
{
  dbuf_layout_t *l = build(seed2, DBUF_LAYOUT_UNPADDED, 2, 1);
  char *s = report(l, DBUF_REPORT_DIAGRAM, NULL);
  /*
   * The rule: four columns per element, each cell "| label", one space and
   * "|" to close the line.  The document's five padded lines follow it to
   * the character.  Its unpadded lines were drawn by hand and are one space
   * off the rule: rank 0 has its extra column after "P0 row 1" instead of
   * at the end, rank 1 has none.  Same cells, same order, same widths up to
   * that space; the squeezed comparison below pins this down.
   */
  ck_assert_str_eq(
      s, "rank 0 [ 0, 16): | P0 row 0              | P0 row 1              | "
         "P1 row 0       |\n"
         "rank 1 [16, 30): | P1 row 1      | P1 row 2      | P1 row 3      | "
         "P2     |\n");
  static const char *doc[] = {
      "rank 0 [ 0, 16): | P0 row 0              | P0 row 1               | P1 "
      "row 0      |",
      "rank 1 [16, 30): | P1 row 1      | P1 row 2      | P1 row 3      | P2   "
      " |"};
  for (int k = 0; k < 2; k++) {
    char a[256], b[256];
    squeeze(line(s, k), a);
    squeeze(doc[k], b);
    ck_assert_str_eq(a, b);
    ck_assert_int_eq((int)strlen(line(s, k)), (int)strlen(doc[k]) + (k == 1));
  }
  free(s);
  dbuf_layout_destroy(l);
}
END_TEST

START_TEST(test_seed_table)
{
  dbuf_layout_t *l = build(seed5, DBUF_LAYOUT_PADDED, 5, 1);
  dbuf_report_opts_t o;
  dbuf_report_opts_init(&o);
  o.align_bytes = 16;
  char *s = report(l, DBUF_REPORT_TABLE, &o);
  ck_assert_str_eq(
      s,
      "rank  offset  elements  bytes  aligned  padding  tensors  first     last\n"
      "   0       0        12     24       32        0        1  P0 row 0  P0 row 1\n"
      "   1      12        12     24       32        0        1  P1 row 0  P1 row 2\n"
      "   2      24        12     24       32        2        3  P1 row 3  P2 row 0\n"
      "   3      36        12     24       32        0        1  P2 row 1  P2 row 3\n"
      "   4      48        12     24       32        6        1  P4 row 0  P4 row 0\n");
  free(s);
  dbuf_layout_destroy(l);
}
END_TEST

/* Byte counts from 1 KiB up carry their binary-unit form.  Elements of 100
 * bytes: a rank's 12 elements are 1,200 bytes = 1200/1024 = 1.171875 KiB
 * ("1.17 KiB"); the buffer 6,000 = 5.859375 KiB, the tensors 5,200 =
 * 5.078125 KiB, P1 1,600 = 1.5625 KiB (printf rounds the exact tie to even:
 * "1.56").  Aligned to 512: 1,200 -> 1,536 = 1.5 KiB, 5 x 1,536 = 7,680 =
 * 7.5 KiB; 512 itself stays below 1 KiB and has no unit. */
START_TEST(test_byte_units)
{
  dbuf_layout_t *l = build(seed5, DBUF_LAYOUT_PADDED, 5, 1);
  dbuf_report_opts_t o;
  dbuf_report_opts_init(&o);
  o.elem_size = 100;
  o.dtype = "x100";
  o.align_bytes = 512;
  char *s = report(l, DBUF_REPORT_SUMMARY, &o);
  ck_assert_str_eq(
      s, "layout:          padded (RowAtomic), dp 5, chunk 12 elements\n"
         "tensors:         5, dtype x100, 100 bytes per element\n"
         "logical size:    52 elements, 5,200 bytes (5.08 KiB)\n"
         "buffer size:     60 elements, 6,000 bytes (5.86 KiB)\n"
         "padding:         8 elements (13.33% of the buffer), 2 in gaps, 6 at "
         "the end\n"
         "per rank:        min 12 (rank 0), max 12 (rank 0), mean 12 elements\n"
         "per rank bytes:  min 1,200 (1.17 KiB), max 1,200 (1.17 KiB), mean "
         "1,200 (1.17 KiB)\n"
         "aligned:         segments rounded up to 512 bytes: max 1,536 bytes "
         "(1.50 KiB) per rank, 7,680 bytes (7.50 KiB) in all\n"
         "split tensors:   2 of 5 held by more than one rank\n"
         "largest tensor:  P1 4x4, 16 elements, 1,600 bytes (1.56 KiB), on "
         "ranks 1-2\n");
  free(s);
  /* The table: exact counts right-aligned, their units left-aligned after. */
  s = report(l, DBUF_REPORT_TABLE, &o);
  ck_assert_str_eq(
      s,
      "rank  offset  elements             bytes             aligned  padding  tensors  first     last\n"
      "   0       0        12   1200 (1.17 KiB)     1536 (1.50 KiB)        0        1  P0 row 0  P0 row 1\n"
      "   1      12        12   1200 (1.17 KiB)     1536 (1.50 KiB)        0        1  P1 row 0  P1 row 2\n"
      "   2      24        12   1200 (1.17 KiB)     1536 (1.50 KiB)        2        3  P1 row 3  P2 row 0\n"
      "   3      36        12   1200 (1.17 KiB)     1536 (1.50 KiB)        0        1  P2 row 1  P2 row 3\n"
      "   4      48        12   1200 (1.17 KiB)     1536 (1.50 KiB)        6        1  P4 row 0  P4 row 0\n");
  free(s);
  /* CSV stays exact: no unit anywhere. */
  s = report(l, DBUF_REPORT_CSV, &o);
  ck_assert_ptr_null(strstr(s, "KiB"));
  free(s);
  dbuf_layout_destroy(l);
}
END_TEST

/* A mean that is not whole keeps its decimals; its unit is of the whole
 * part.  Unpadded seed5 at dp 3 in 64-byte elements: 52 elements, ideal
 * cuts at 17.33 and 34.67 move to the nearest row boundaries 16 (P1 rows
 * of 4 from 12) and 36 (P2 rows of 4 from 28): ranks of 16, 20 and 16
 * elements, 1,024, 1,280 and 1,024 bytes (1.00 KiB, 1.25 KiB), mean 3,328 /
 * 3 = 1,109.33 (1109/1024 = 1.083 -> "1.08 KiB"). */
START_TEST(test_byte_units_mean)
{
  dbuf_layout_t *l = build(seed5, DBUF_LAYOUT_UNPADDED, 3, 1);
  dbuf_report_opts_t o;
  dbuf_report_opts_init(&o);
  o.elem_size = 64;
  char *s = report(l, DBUF_REPORT_SUMMARY, &o);
  ck_assert_ptr_nonnull(strstr(s, "per rank bytes:  min 1,024 (1.00 KiB), max "
                                  "1,280 (1.25 KiB), mean 1,109.33 (1.08 KiB)\n"));
  free(s);
  dbuf_layout_destroy(l);
}
END_TEST

START_TEST(test_seed_csv)
{
  dbuf_layout_t *l = build(seed5, DBUF_LAYOUT_PADDED, 5, 1);
  char *s = report(l, DBUF_REPORT_CSV, NULL);
  ck_assert_str_eq(s, "rank,tensor,name,first_row,rows,elements,offset,"
                      "global_offset\n"
                      "0,0,P0,0,2,12,0,0\n"
                      "1,1,P1,0,3,12,0,12\n"
                      "2,1,P1,3,1,4,0,24\n"
                      "2,3,P3,0,1,2,4,28\n"
                      "2,2,P2,0,1,4,8,32\n"
                      "3,2,P2,1,3,12,0,36\n"
                      "4,4,P4,0,1,6,0,48\n");
  free(s);
  dbuf_layout_destroy(l);
}
END_TEST

START_TEST(test_csv_quoting)
{
  dbuf_layout_t *l = build("a,b 2x2\nq\"x 2\n", DBUF_LAYOUT_UNPADDED, 1, 1);
  char *s = report(l, DBUF_REPORT_CSV, NULL);
  ck_assert_str_eq(s, "rank,tensor,name,first_row,rows,elements,offset,"
                      "global_offset\n"
                      "0,0,\"a,b\",0,2,4,0,0\n"
                      "0,1,\"q\"\"x\",0,2,2,4,4\n");
  free(s);
  dbuf_layout_destroy(l);
}
END_TEST

START_TEST(test_condensed_diagram)
{
  dbuf_layout_t *l = build(seed5, DBUF_LAYOUT_PADDED, 5, 1);
  dbuf_report_opts_t o;
  dbuf_report_opts_init(&o);
  o.diagram_max_elems = 0; /* always condense */
  char *s = report(l, DBUF_REPORT_DIAGRAM, &o);
  ck_assert_str_eq(
      s, "# rank [start, end) elements: first piece | +N tensors | last piece "
         "| padding\n"
         "rank 0 [ 0, 12) 12: P0\n"
         "rank 1 [12, 24) 12: P1 rows 0-2\n"
         "rank 2 [24, 36) 12: P1 row 3 | +1 tensor | P2 row 0 | padding 2\n"
         "rank 3 [36, 48) 12: P2 rows 1-3\n"
         "rank 4 [48, 60) 12: P4 | padding 6\n");
  free(s);
  dbuf_layout_destroy(l);
}
END_TEST

/* ------------------------------------------------------------------ */
/* SVG structure                                                         */

/* Tags balance, the root is <svg>, nothing follows it; returns the number
 * of elements with class="band". */
static int64_t
svg_check(const char *s)
{
  const char *stack[64];
  int depth = 0, roots = 0;
  int64_t bands = 0;
  ck_assert_msg(strncmp(s, "<svg", 4) == 0, "does not start with <svg");
  const char *p = s;
  while ((p = strchr(p, '<')) != NULL) {
    const char *e = strchr(p, '>');
    ck_assert_ptr_nonnull(e);
    ck_assert_msg(memchr(p + 1, '<', (size_t)(e - p - 1)) == NULL,
                  "'<' inside a tag near %.40s", p);
    if (p[1] == '/') {
      ck_assert_int_gt(depth, 0);
      size_t n = strcspn(stack[depth - 1], " />");
      ck_assert_msg(strncmp(p + 2, stack[depth - 1], n) == 0 && p[2 + n] == '>',
                    "</%.20s> closes <%.*s>", p + 2, (int)n, stack[depth - 1]);
      depth--;
    } else if (e[-1] != '/') {
      ck_assert_int_lt(depth, 64);
      if (depth == 0)
        roots++;
      stack[depth++] = p + 1;
    }
    if (strncmp(p, "<rect class=\"band\"", 18) == 0)
      bands++;
    p = e + 1;
  }
  ck_assert_int_eq(depth, 0);
  ck_assert_int_eq(roots, 1);
  /* Text between tags has no raw '&' other than entities. */
  for (p = s; (p = strchr(p, '&')) != NULL; p++)
    ck_assert_msg(strncmp(p, "&amp;", 5) == 0 || strncmp(p, "&lt;", 4) == 0 ||
                      strncmp(p, "&gt;", 4) == 0 || strncmp(p, "&quot;", 6) == 0 ||
                      strncmp(p, "&apos;", 6) == 0,
                  "raw '&' near %.20s", p);
  return bands;
}

START_TEST(test_svg_seed)
{
  dbuf_layout_t *l = build(seed5, DBUF_LAYOUT_PADDED, 5, 1);
  char *s = report(l, DBUF_REPORT_SVG, NULL);
  ck_assert_int_eq(svg_check(s), 5);
  ck_assert_ptr_nonnull(strstr(s, "url(#hatch)")); /* the padding */
  ck_assert_ptr_nonnull(strstr(s, "fill=\"#000000\" d=\"M")); /* 2 cut tensors */
  free(s);
  dbuf_layout_destroy(l);
  /* Names that need escaping. */
  l = build("a<b&c 4x4\nd>\"e' 2\n", DBUF_LAYOUT_UNPADDED, 2, 1);
  s = report(l, DBUF_REPORT_SVG, NULL);
  ck_assert_int_eq(svg_check(s), 2);
  ck_assert_ptr_nonnull(strstr(s, "a&lt;b&amp;c"));
  free(s);
  dbuf_layout_destroy(l);
}
END_TEST

static double
now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* deepseek-v3 (45,395 tensors) at 1024 ranks: every format well under a
 * second, one line per rank (one SVG band per 16 ranks), deterministic, and
 * a reasonable SVG size. */
START_TEST(test_big_fast)
{
  dbuf_tensors_t *t;
  dbuf_diag_t d;
  dbuf_layout_params_t p;
  dbuf_layout_t *l;
  ck_assert_msg(dbuf_model_build("deepseek-v3", &t, &d) == 0, "%s", d.msg);
  dbuf_layout_params_init(&p);
  p.nranks = 1024;
  ck_assert_msg(dbuf_layout_build(t, &p, &l, &d) == 0, "%s", d.msg);
  double scale = test_time_scale();
  for (int f = DBUF_REPORT_SUMMARY; f <= DBUF_REPORT_SVG; f++) {
    double t0 = now();
    char *s = report(l, (dbuf_report_format_t)f, NULL);
    double dt = now() - t0;
    ck_assert_msg(dt < scale, "%s took %.3f s (bound %.0f s)", dbuf_report_format_name(f), dt,
                  scale);
    char *again = report(l, (dbuf_report_format_t)f, NULL);
    ck_assert_msg(strcmp(s, again) == 0, "%s is not deterministic",
                  dbuf_report_format_name(f));
    if (f == DBUF_REPORT_SVG) {
      ck_assert_int_eq(svg_check(s), 1024 / 16); /* groups of 16 ranks: 64 bands */
      ck_assert_msg(strlen(s) < 4u << 20, "svg of %zu bytes", strlen(s));
    }
    if (f == DBUF_REPORT_TABLE || f == DBUF_REPORT_DIAGRAM)
      ck_assert_int_eq(count_lines(s), 1025); /* header + ranks */
    free(s);
    free(again);
  }
  dbuf_layout_destroy(l);
  dbuf_tensors_destroy(t);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Every format on a table of layouts                                   */

static const struct rcase {
  const char *what, *shapes;
  dbuf_layout_kind_t kind;
  int nranks;
  int64_t block;
} rcases[] = {
    {"seed padded", seed5, DBUF_LAYOUT_PADDED, 5, 1},
    {"seed unpadded", seed2, DBUF_LAYOUT_UNPADDED, 2, 1},
    {"seed tensor", seed5, DBUF_LAYOUT_TENSOR, 2, 1},
    {"one rank", seed5, DBUF_LAYOUT_PADDED, 1, 1},
    {"more ranks than rows", "a 2x3\nb 1x5\n", DBUF_LAYOUT_PADDED, 7, 1},
    {"more ranks than rows, unpadded", "a 2x3\nb 1x5\n", DBUF_LAYOUT_UNPADDED,
     7, 1},
    {"empty tensors", "a 0x4\nb 3x4\nc 0x2\nd 5\n", DBUF_LAYOUT_UNPADDED, 3, 1},
    {"primes", "a 7x11\nb 13x3\nc 5\n", DBUF_LAYOUT_PADDED, 3, 1},
    {"1-D tensors", "a 10\nb 7\nc 3\n", DBUF_LAYOUT_UNPADDED, 4, 1},
    {"BlockAtomic", "a 4x3\nb 6x2\n", DBUF_LAYOUT_PADDED, 3, 2},
    {"tensor, empty tensors", "a 0x4\nb 4x4\nc 2\n", DBUF_LAYOUT_TENSOR, 3, 1},
    {"no tensors", "", DBUF_LAYOUT_UNPADDED, 2, 1},
    {"wide", "w 64x100\nv 3x100\n", DBUF_LAYOUT_PADDED, 4, 1},
    {"many tensors",
     "l.0.w 8x8\nl.0.b 8\nl.1.w 8x8\nl.1.b 8\nl.2.w 8x8\nl.2.b 8\n"
     "l.3.w 8x8\nl.3.b 8\nl.4.w 8x8\nl.4.b 8\nl.5.w 8x8\nl.5.b 8\n"
     "l.6.w 8x8\nl.6.b 8\nl.7.w 8x8\nl.7.b 8\nl.8.w 8x8\nl.8.b 8\n",
     DBUF_LAYOUT_PADDED, 40, 1},
};

START_TEST(test_formats)
{
  const struct rcase *c = &rcases[_i];
  dbuf_layout_t *l = build(c->shapes, c->kind, c->nranks, c->block);
  dbuf_layout_stats_t st;
  ck_assert_int_eq(dbuf_layout_stats(l, &st), 0);
  int64_t total_pieces = 0;
  for (int r = 0; r < c->nranks; r++) {
    int64_t n;
    ck_assert_int_eq(dbuf_layout_rank_pieces(l, r, NULL, 0, &n), 0);
    total_pieces += n;
  }

  char *s = report(l, DBUF_REPORT_SUMMARY, NULL);
  char want[64];
  snprintf(want, sizeof want, "), dp %d", c->nranks);
  ck_assert_msg(strstr(s, want) != NULL, "%s: summary lacks '%s'", c->what, want);
  free(s);

  s = report(l, DBUF_REPORT_TABLE, NULL);
  ck_assert_int_eq(count_lines(s), c->nranks + 1);
  free(s);

  s = report(l, DBUF_REPORT_CSV, NULL);
  ck_assert_int_eq(count_lines(s), total_pieces + 1);
  int64_t sum = 0;
  for (int64_t k = 1; k <= total_pieces; k++) {
    long long f[7];
    const char *ln = line(s, k);
    const char *comma = strchr(ln, ',');
    comma = strchr(comma + 1, ','); /* skip rank, tensor; the name follows */
    const char *after = strchr(comma + 1, ',');
    ck_assert_int_eq(sscanf(ln, "%lld,%lld", &f[0], &f[1]), 2);
    ck_assert_int_eq(sscanf(after, ",%lld,%lld,%lld,%lld,%lld", &f[2], &f[3],
                            &f[4], &f[5], &f[6]),
                     5);
    sum += f[4];
    /* global offset = rank start + offset */
    ck_assert_int_eq(f[6], dbuf_layout_range(l)[f[0]] + f[5]);
  }
  ck_assert_int_eq(sum, st.logical);
  free(s);

  s = report(l, DBUF_REPORT_DIAGRAM, NULL);
  int full = st.max_segment <= 32;
  ck_assert_int_eq(count_lines(s), c->nranks + !full);
  if (full) {
    /* Four columns per element: "rank R [S, E): " + 4 seg + " |". */
    for (int r = 0; r < c->nranks; r++) {
      const char *ln = line(s, r);
      int64_t seg = dbuf_layout_range(l)[r + 1] - dbuf_layout_range(l)[r];
      const char *colon = strstr(ln, "): ");
      if (seg == 0) {
        ck_assert_ptr_nonnull(strstr(ln, "(empty)"));
        continue;
      }
      ck_assert_ptr_nonnull(colon);
      ck_assert_int_eq((int64_t)strlen(colon + 3), 4 * seg + 2);
    }
  }
  free(s);

  s = report(l, DBUF_REPORT_SVG, NULL);
  ck_assert_int_eq(svg_check(s), c->nranks);
  free(s);
  dbuf_layout_destroy(l);
}
END_TEST

/* An invalid layout (overlap, offset past the end) still renders. */
START_TEST(test_broken_layout)
{
  dbuf_tensors_t *t = shapes("a 4x4\nb 4x4\nc 2\n");
  int64_t off[3] = {0, 8, 40}, ranks[2] = {0, 12};
  dbuf_layout_t *l;
  dbuf_diag_t d;
  ck_assert_int_eq(dbuf_layout_from_parts(t, DBUF_LAYOUT_UNPADDED, 2, 1, 0, 24,
                                          off, ranks, NULL, &l, &d),
                   0);
  for (int f = DBUF_REPORT_SUMMARY; f <= DBUF_REPORT_SVG; f++) {
    char *s = report(l, (dbuf_report_format_t)f, NULL);
    if (f == DBUF_REPORT_SVG)
      ck_assert_int_eq(svg_check(s), 2);
    free(s);
  }
  dbuf_layout_destroy(l);
  dbuf_tensors_destroy(t);
}
END_TEST

START_TEST(test_args)
{
  dbuf_layout_t *l = build(seed5, DBUF_LAYOUT_PADDED, 5, 1);
  dbuf_report_opts_t o;
  char *text = (char *)"untouched";
  size_t len = 7;
  dbuf_diag_t d;

  ck_assert_int_eq(dbuf_report_write(NULL, DBUF_REPORT_SUMMARY, NULL, &text,
                                     &len, &d),
                   DBUF_EINVAL);
  ck_assert_int_eq(dbuf_report_write(l, DBUF_REPORT_SUMMARY, NULL, NULL, &len,
                                     &d),
                   DBUF_EINVAL);
  ck_assert_int_eq(dbuf_report_write(l, DBUF_REPORT_SUMMARY, NULL, &text, NULL,
                                     &d),
                   DBUF_EINVAL);
  ck_assert_int_eq(dbuf_report_write(l, (dbuf_report_format_t)0, NULL, &text,
                                     &len, &d),
                   DBUF_EINVAL);
  ck_assert_int_eq(dbuf_report_write(l, (dbuf_report_format_t)99, NULL, &text,
                                     &len, NULL),
                   DBUF_EINVAL);
  dbuf_report_opts_init(&o);
  o.elem_size = 0;
  ck_assert_int_eq(dbuf_report_write(l, DBUF_REPORT_TABLE, &o, &text, &len, &d),
                   DBUF_EINVAL);
  ck_assert_ptr_nonnull(strstr(d.msg, "element size 0"));
  dbuf_report_opts_init(&o);
  o.align_bytes = -1;
  ck_assert_int_eq(dbuf_report_write(l, DBUF_REPORT_TABLE, &o, &text, &len, &d),
                   DBUF_EINVAL);
  dbuf_report_opts_init(&o);
  o.svg_width = 399;
  ck_assert_int_eq(dbuf_report_write(l, DBUF_REPORT_SVG, &o, &text, &len, &d),
                   DBUF_EINVAL);
  o.svg_width = 20001;
  ck_assert_int_eq(dbuf_report_write(l, DBUF_REPORT_SVG, &o, &text, &len, &d),
                   DBUF_EINVAL);
  /* svg rank ranges: empty, reversed, negative, past the ranks; node size. */
  static const int bad_ranges[][2] = {{1, 1}, {2, 1}, {-1, 1}, {0, 99}};
  for (size_t i = 0; i < sizeof bad_ranges / sizeof bad_ranges[0]; i++) {
    dbuf_report_opts_init(&o);
    o.svg_rank_begin = bad_ranges[i][0];
    o.svg_rank_end = bad_ranges[i][1];
    ck_assert_int_eq(dbuf_report_write(l, DBUF_REPORT_SVG, &o, &text, &len, &d),
                     DBUF_EINVAL);
    ck_assert_ptr_nonnull(strstr(d.msg, "svg ranks"));
  }
  dbuf_report_opts_init(&o);
  o.svg_node_ranks = -1;
  ck_assert_int_eq(dbuf_report_write(l, DBUF_REPORT_SVG, &o, &text, &len, &d),
                   DBUF_EINVAL);
  dbuf_report_opts_init(&o);
  o.diagram_max_elems = -1;
  ck_assert_int_eq(dbuf_report_write(l, DBUF_REPORT_DIAGRAM, &o, &text, &len,
                                     &d),
                   DBUF_EINVAL);
  /* Byte figures past INT64_MAX. */
  dbuf_report_opts_init(&o);
  o.elem_size = INT64_MAX / 2;
  ck_assert_int_eq(dbuf_report_write(l, DBUF_REPORT_SUMMARY, &o, &text, &len,
                                     &d),
                   DBUF_EOVERFLOW);
  /* Aligned sums past INT64_MAX: 5 segments of INT64_MAX / 4 aligned bytes. */
  dbuf_report_opts_init(&o);
  o.align_bytes = INT64_MAX / 4;
  ck_assert_int_eq(dbuf_report_write(l, DBUF_REPORT_SUMMARY, &o, &text, &len,
                                     &d),
                   DBUF_EOVERFLOW);
  ck_assert_ptr_nonnull(strstr(d.msg, "overflow"));
  /* Nothing was written on failure. */
  ck_assert_str_eq(text, "untouched");
  ck_assert_uint_eq(len, 7);
  dbuf_layout_destroy(l);

  /* Format names. */
  for (int f = DBUF_REPORT_SUMMARY; f <= DBUF_REPORT_SVG; f++) {
    dbuf_report_format_t g;
    ck_assert_int_eq(dbuf_report_format_parse(dbuf_report_format_name(f), &g), 0);
    ck_assert_int_eq(g, f);
  }
  dbuf_report_format_t g;
  ck_assert_int_eq(dbuf_report_format_parse("json", &g), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_report_format_parse(NULL, &g), DBUF_EINVAL);
  ck_assert_str_eq(dbuf_report_format_name(42), "unknown");
  dbuf_report_opts_init(NULL); /* accepted */
}
END_TEST

/* Elements near INT64_MAX: exact figures with 1-byte elements. */
START_TEST(test_int64_limits)
{
  dbuf_layout_t *l = build("a 4611686018427387904\nb 4611686018427387903\n",
                           DBUF_LAYOUT_UNPADDED, 3, 1);
  dbuf_report_opts_t o;
  dbuf_report_opts_init(&o);
  o.elem_size = 1;
  o.dtype = "int8";
  for (int f = DBUF_REPORT_SUMMARY; f <= DBUF_REPORT_SVG; f++) {
    char *s = report(l, (dbuf_report_format_t)f, &o);
    if (f == DBUF_REPORT_SUMMARY)
      ck_assert_ptr_nonnull(
          strstr(s, "logical size:    9,223,372,036,854,775,807 elements"));
    if (f == DBUF_REPORT_SVG)
      ck_assert_int_eq(svg_check(s), 3);
    free(s);
  }
  char *text;
  size_t len;
  o.elem_size = 2;
  ck_assert_int_eq(dbuf_report_write(l, DBUF_REPORT_TABLE, &o, &text, &len, NULL),
                   DBUF_EOVERFLOW);
  dbuf_layout_destroy(l);
}
END_TEST

/* The number formats the reports print, exported for tools. */
static const struct ncase {
  int64_t v;
  const char *count, *bytes;
} ncases[] = {
    {0, "0", "0 B"},
    {999, "999", "999 B"},
    {1000, "1,000", "1000 B"},
    {1023, "1,023", "1023 B"},
    {1024, "1,024", "1.00 KiB"},
    {1536, "1,536", "1.50 KiB"},
    {-1234567, "-1,234,567", "-1234567 B"},
    {2471755776, "2,471,755,776", "2.30 GiB"},
    {INT64_MAX, "9,223,372,036,854,775,807", "8.00 EiB"},
    {INT64_MIN, "-9,223,372,036,854,775,808", "-9223372036854775808 B"},
};

START_TEST(test_number_formats)
{
  const struct ncase *c = &ncases[_i];
  char buf[32];
  memset(buf, 'x', sizeof buf);
  ck_assert_ptr_eq(dbuf_report_count(buf, 27, c->v), buf);
  ck_assert_str_eq(buf, c->count);
  ck_assert_ptr_eq(dbuf_report_bytes(buf, 24, c->v), buf);
  ck_assert_str_eq(buf, c->bytes);
  /* Short buffers: truncated, terminated. */
  char first[2] = {c->count[0], '\0'};
  ck_assert_str_eq(dbuf_report_count(buf, 2, c->v), first);
  ck_assert_str_eq(dbuf_report_bytes(buf, 1, c->v), "");
  ck_assert_ptr_null(dbuf_report_count(NULL, 8, c->v));
  buf[0] = 'x';
  ck_assert_ptr_eq(dbuf_report_bytes(buf, 0, c->v), buf);
  ck_assert_int_eq(buf[0], 'x');
}
END_TEST

/* ------------------------------------------------------------------ */
/* Tensor-list comparison                                               */

typedef struct {
  int kinds[8];
  int64_t ids[8], ref_ids[8];
  int n;
} diffs_t;

static int
collect(const dbuf_tensors_diff_t *d, void *arg)
{
  diffs_t *x = arg;
  ck_assert_msg(d->msg[0] != '\0', "difference without a message");
  if (x->n < 8) {
    x->kinds[x->n] = d->kind;
    x->ids[x->n] = d->id;
    x->ref_ids[x->n] = d->ref_id;
  }
  x->n++;
  return 0;
}

static const struct ccase {
  const char *what, *t;
  int rc, n;
  int kinds[4];
  int64_t ids[4];
} ccases[] = {
    {"equal", "A 2x3\nB 4\nC 5x5\nD 1\n", 0, 0, {0}, {0}},
    /* B and C swapped: one of them is out of order; the run kept is A B D. */
    {"swap", "A 2x3\nC 5x5\nB 4\nD 1\n", DBUF_EVERIFY, 1, {DBUF_TDIFF_ORDER}, {1}},
    {"moved to the front", "D 1\nA 2x3\nB 4\nC 5x5\n", DBUF_EVERIFY, 1,
     {DBUF_TDIFF_ORDER}, {0}},
    {"shape", "A 2x3\nB 4\nC 5x6\nD 1\n", DBUF_EVERIFY, 1, {DBUF_TDIFF_SHAPE},
     {2}},
    {"dims", "A 2x3\nB 4x1\nC 5x5\nD 1\n", DBUF_EVERIFY, 1, {DBUF_TDIFF_SHAPE},
     {1}},
    {"missing", "A 2x3\nB 4\nC 5x5\n", DBUF_EVERIFY, 1, {DBUF_TDIFF_MISSING},
     {-1}},
    {"extra", "A 2x3\nB 4\nC 5x5\nD 1\nE 2\n", DBUF_EVERIFY, 1,
     {DBUF_TDIFF_EXTRA}, {4}},
    {"renamed", "A 2x3\nB 4\nX 5x5\nD 1\n", DBUF_EVERIFY, 2,
     {DBUF_TDIFF_EXTRA, DBUF_TDIFF_MISSING}, {2, -1}},
    {"reversed", "D 1\nC 5x5\nB 4\nA 2x3\n", DBUF_EVERIFY, 3,
     {DBUF_TDIFF_ORDER, DBUF_TDIFF_ORDER, DBUF_TDIFF_ORDER}, {0, 1, 2}},
    {"empty", "", DBUF_EVERIFY, 4,
     {DBUF_TDIFF_MISSING, DBUF_TDIFF_MISSING, DBUF_TDIFF_MISSING,
      DBUF_TDIFF_MISSING},
     {-1, -1, -1, -1}},
};

START_TEST(test_compare)
{
  const struct ccase *c = &ccases[_i];
  dbuf_tensors_t *ref = shapes("A 2x3\nB 4\nC 5x5\nD 1\n");
  dbuf_tensors_t *t = shapes(c->t);
  diffs_t x = {{0}, {0}, {0}, 0};
  int64_t n = -1;
  ck_assert_int_eq(dbuf_tensors_compare(t, ref, collect, &x, &n), c->rc);
  ck_assert_msg(n == c->n && x.n == c->n, "%s: %lld differences, want %d",
                c->what, (long long)n, c->n);
  for (int k = 0; k < c->n && k < 4; k++) {
    ck_assert_msg(x.kinds[k] == c->kinds[k], "%s: difference %d is kind %d, "
                  "want %d", c->what, k, x.kinds[k], c->kinds[k]);
    ck_assert_msg(x.ids[k] == c->ids[k], "%s: difference %d is tensor %lld, "
                  "want %lld", c->what, k, (long long)x.ids[k],
                  (long long)c->ids[k]);
  }
  /* Without a callback, the same count. */
  ck_assert_int_eq(dbuf_tensors_compare(t, ref, NULL, NULL, &n), c->rc);
  ck_assert_int_eq(n, c->n);
  dbuf_tensors_destroy(t);
  dbuf_tensors_destroy(ref);
}
END_TEST

static int
stop_at_first(const dbuf_tensors_diff_t *d, void *arg)
{
  (*(int *)arg)++;
  return 1;
}

START_TEST(test_compare_args)
{
  dbuf_tensors_t *a = shapes("A 2\nB 3\n"), *b = shapes("B 3\nC 4\n");
  int calls = 0;
  int64_t n;
  ck_assert_int_eq(dbuf_tensors_compare(NULL, a, NULL, NULL, NULL), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_tensors_compare(a, NULL, NULL, NULL, NULL), DBUF_EINVAL);
  ck_assert_int_eq(dbuf_tensors_compare(a, b, stop_at_first, &calls, &n),
                   DBUF_EVERIFY);
  ck_assert_int_eq(calls, 1);
  ck_assert_int_eq(n, 1);
  ck_assert_int_eq(dbuf_tensors_compare(a, a, NULL, NULL, NULL), 0);
  dbuf_tensors_destroy(a);
  dbuf_tensors_destroy(b);
}
END_TEST

/* A model against itself with one tensor moved far: one ORDER report. */
START_TEST(test_compare_model)
{
  dbuf_tensors_t *ref, *t;
  dbuf_diag_t d;
  ck_assert_msg(dbuf_model_build("llama-3.1-8b", &ref, &d) == 0, "%s", d.msg);
  ck_assert_int_eq(dbuf_tensors_create(&t), 0);
  int64_t n = dbuf_tensors_count(ref);
  for (int64_t i = 1; i < n; i++)
    ck_assert_int_eq(dbuf_tensors_add(t, dbuf_tensors_name(ref, i),
                                      dbuf_tensors_ndim(ref, i),
                                      dbuf_tensors_dims(ref, i), NULL),
                     0);
  ck_assert_int_eq(dbuf_tensors_add(t, dbuf_tensors_name(ref, 0),
                                    dbuf_tensors_ndim(ref, 0),
                                    dbuf_tensors_dims(ref, 0), NULL),
                   0);
  diffs_t x = {{0}, {0}, {0}, 0};
  ck_assert_int_eq(dbuf_tensors_compare(t, ref, collect, &x, NULL), DBUF_EVERIFY);
  ck_assert_int_eq(x.n, 1);
  ck_assert_int_eq(x.kinds[0], DBUF_TDIFF_ORDER);
  ck_assert_int_eq(x.ref_ids[0], 0); /* the embedding, moved to the end */
  dbuf_tensors_destroy(t);
  dbuf_tensors_destroy(ref);
}
END_TEST

/* Found by tests/fuzz (layout_json, wire): a layout that reads but fails
 * validation, with a rank offset of INT64_MIN, made the table multiply an
 * unchecked segment length by the element size (signed overflow).  Every
 * format now refuses segments that are not ordered inside the buffer. */
START_TEST(test_unordered_segments_refused)
{
  static const char json[] =
      "{\"layout\":\"unpadded\",\"dp_size\":3,\"size\":4,"
      "\"rank_offsets\":[0,-9223372036854775808,2],"
      "\"tensors\":[{\"name\":\"a\",\"shape\":[4],\"offset\":0}]}";
  static const dbuf_report_format_t formats[] = {
      DBUF_REPORT_SUMMARY, DBUF_REPORT_TABLE, DBUF_REPORT_DIAGRAM, DBUF_REPORT_CSV,
      DBUF_REPORT_SVG};
  dbuf_layout_t *l = NULL;
  dbuf_diag_t d;
  ck_assert_int_eq(dbuf_layout_from_json("neg.json", json, sizeof json - 1, &l, &d), 0);
  for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
    char *text = NULL;
    size_t len = 0;
    ck_assert_int_eq(dbuf_report_write(l, formats[i], NULL, &text, &len, &d), DBUF_ELAYOUT);
    ck_assert_ptr_null(text);
    ck_assert_msg(strstr(d.msg, "rank 0: segment [0, -9223372036854775808)") != NULL, "message: %s", d.msg);
  }
  dbuf_layout_destroy(l);
}
END_TEST

static Suite *
report_suite(void)
{
  Suite *s = suite_create("report");
  TCase *tc = tcase_create("seed");
  tcase_add_test(tc, test_seed_summary);
  tcase_add_test(tc, test_unordered_segments_refused);
  tcase_add_test(tc, test_seed_summary_tensor);
  tcase_add_test(tc, test_seed_diagram_padded);
  tcase_add_test(tc, test_seed_diagram_unpadded);
  tcase_add_test(tc, test_seed_table);
  tcase_add_test(tc, test_seed_csv);
  tcase_add_test(tc, test_byte_units);
  tcase_add_test(tc, test_byte_units_mean);
  tcase_add_test(tc, test_csv_quoting);
  tcase_add_test(tc, test_condensed_diagram);
  tcase_add_test(tc, test_svg_seed);
  suite_add_tcase(s, tc);
  tc = tcase_create("formats");
  tcase_add_loop_test(tc, test_formats, 0,
                      (int)(sizeof rcases / sizeof rcases[0]));
  tcase_add_test(tc, test_broken_layout);
  tcase_add_test(tc, test_args);
  tcase_add_test(tc, test_int64_limits);
  tcase_add_loop_test(tc, test_number_formats, 0,
                      (int)(sizeof ncases / sizeof ncases[0]));
  suite_add_tcase(s, tc);
  tc = tcase_create("big");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_big_fast);
  suite_add_tcase(s, tc);
  tc = tcase_create("compare");
  tcase_add_loop_test(tc, test_compare, 0,
                      (int)(sizeof ccases / sizeof ccases[0]));
  tcase_add_test(tc, test_compare_args);
  tcase_add_test(tc, test_compare_model);
  suite_add_tcase(s, tc);
  return s;
}

int
main(void)
{
  SRunner *sr = srunner_create(report_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
