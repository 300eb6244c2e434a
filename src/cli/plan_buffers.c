/*
 * `plan` for a plan of several buffers (--units, mixed dtypes): the summary
 * with one line per buffer and the totals, csv and svg of every buffer as
 * one document, and the --state figures of training memory per rank.
 */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "N[word]", with " (1.87 GiB)" from 1 KiB up, as the reports print bytes. */
static const char *
bytes_text(char *buf, size_t len, int64_t v, const char *word)
{
  char c[32], h[32];
  dbuf_report_count(c, sizeof c, v);
  if (v >= 1024)
    snprintf(buf, len, "%s%s (%s)", c, word, dbuf_report_bytes(h, sizeof h, v));
  else
    snprintf(buf, len, "%s%s", c, word);
  return buf;
}

int
cli_plan_summary(FILE *m, const dbuf_plan_t *p, const cli_plan_opts_t *o, const char *what)
{
  dbuf_plan_totals_t tt;
  dbuf_plan_buffer_t b;
  char x[64], y[64], z[64], w[64];
  int64_t nb = dbuf_plan_nbuffers(p);
  int e = dbuf_plan_totals(p, &tt);
  if (e != 0) {
    cli_err("plan totals: %s%s", e == DBUF_EOVERFLOW ? "the bytes of the buffers together: " : "",
            dbuf_strerror(e));
    return cli_exit_code(e);
  }
  int uw = 4; /* "unit" */
  for (int64_t k = 0; k < nb; k++) {
    dbuf_plan_buffer(p, k, &b);
    size_t ul = strlen(b.unit);
    uw = ul > (size_t)uw ? (ul > 60 ? 60 : (int)ul) : uw;
  }
  dbuf_plan_buffer(p, 0, &b);
  fprintf(m, "layout:          %s, dp %d, %lld buffers (units %s)\n",
          dbuf_layout_kind_name(dbuf_layout_kind(b.layout)), dbuf_plan_nranks(p),
          (long long)nb, o->units ? o->units : "none");
  fprintf(m, "tensors:         %lld (%s)\n", (long long)tt.tensors, what);
  fprintf(m, "%-*s  %-8s %8s %16s %14s %10s %6s\n", uw, "unit", "dtype", "tensors", "elements",
          "padding", "chunk", "split");
  for (int64_t k = 0; k < nb; k++) {
    dbuf_layout_stats_t st;
    dbuf_plan_buffer(p, k, &b);
    dbuf_layout_stats(b.layout, &st);
    int64_t chunk = dbuf_layout_chunk_size(b.layout);
    fprintf(m, "%-*s  %-8s %8s ", uw, b.unit, dbuf_dtype_name(b.dtype),
            dbuf_report_count(x, sizeof x, dbuf_layout_ntensors(b.layout)));
    fprintf(m, "%16s %14s %10s %6s\n", dbuf_report_count(y, sizeof y, dbuf_layout_size(b.layout)),
            dbuf_report_count(z, sizeof z, st.padding),
            chunk > 0 ? dbuf_report_count(w, sizeof w, chunk) : "-",
            dbuf_report_count(x, sizeof x, st.split_tensors));
  }
  fprintf(m, "logical size:    %s elements, ", dbuf_report_count(x, sizeof x, tt.logical_elems));
  fprintf(m, "%s\n", bytes_text(y, sizeof y, tt.logical_bytes, " bytes"));
  fprintf(m, "buffer size:     %s elements, ", dbuf_report_count(x, sizeof x, tt.buffer_elems));
  fprintf(m, "%s\n", bytes_text(y, sizeof y, tt.buffer_bytes, " bytes"));
  fprintf(m, "padding:         %s elements (%.2f%% of the buffers), ",
          dbuf_report_count(x, sizeof x, tt.padding_elems),
          tt.buffer_elems > 0 ? 100.0 * (double)tt.padding_elems / (double)tt.buffer_elems : 0.0);
  fprintf(m, "%s\n", bytes_text(y, sizeof y, tt.padding_bytes, " bytes"));
  fprintf(m, "per rank bytes:  min %s, ", bytes_text(x, sizeof x, tt.min_rank_bytes, ""));
  fprintf(m, "max %s (every buffer, each in its own dtype)\n",
          bytes_text(y, sizeof y, tt.max_rank_bytes, ""));
  return 0;
}

/* ------------------------------------------------------------------------ */

/* s as one CSV field (RFC 4180 quotes when it holds a comma, quote or newline). */
static void
csv_field(FILE *m, const char *s)
{
  if (strpbrk(s, ",\"\r\n") == NULL) {
    fputs(s, m);
    return;
  }
  fputc('"', m);
  for (; *s; s++) {
    if (*s == '"')
      fputc('"', m);
    fputc(*s, m);
  }
  fputc('"', m);
}

static void
xml_text(FILE *m, const char *s)
{
  for (; *s; s++) {
    switch (*s) {
    case '&': fputs("&amp;", m); break;
    case '<': fputs("&lt;", m); break;
    case '>': fputs("&gt;", m); break;
    case '"': fputs("&quot;", m); break;
    default: fputc(*s, m);
    }
  }
}

/* Buffer k's csv lines after the header, each after "UNIT,DTYPE,"; the
 * header (with "unit,dtype," in front) too when k is 0. */
static void
csv_buffer(FILE *m, const dbuf_plan_buffer_t *b, int64_t k, const char *text)
{
  const char *line = text, *nl;
  for (int first = 1; *line != '\0'; line = nl + 1, first = 0) {
    nl = strchr(line, '\n');
    if (nl == NULL)
      nl = line + strlen(line) - 1; /* the writers end in a newline */
    if (first && k > 0)
      continue;
    if (first)
      fputs("unit,dtype,", m);
    else {
      csv_field(m, b->unit);
      fprintf(m, ",%s,", dbuf_dtype_name(b->dtype));
    }
    fwrite(line, 1, (size_t)(nl - line + 1), m);
  }
}

/* Buffer k's svg nested at y: its own <svg> placed with x, y, its pattern
 * id made unique ("hatch" -> "hatch-K").  *height is its height. */
static int
svg_buffer(FILE *m, int64_t k, const char *text, int y, int *height)
{
  const char *tag = strstr(text, "<svg "), *h = tag ? strstr(tag, " height=\"") : NULL;
  if (h == NULL || sscanf(h, " height=\"%d\"", height) != 1)
    return DBUF_EINVAL;
  fprintf(m, "<svg x=\"0\" y=\"%d\" ", y);
  for (const char *s = tag + 5; *s != '\0';) {
    if (strncmp(s, "id=\"hatch\"", 10) == 0) {
      fprintf(m, "id=\"hatch-%lld\"", (long long)k);
      s += 10;
    } else if (strncmp(s, "url(#hatch)", 11) == 0) {
      fprintf(m, "url(#hatch-%lld)", (long long)k);
      s += 11;
    } else {
      fputc(*s++, m);
    }
  }
  return 0;
}

#define SVG_HEADING 28 /* pixels above each buffer's picture */

int
cli_plan_merged(FILE *m, const dbuf_plan_t *p, dbuf_report_format_t rfmt,
                const dbuf_report_opts_t *ro0)
{
  int64_t nb = dbuf_plan_nbuffers(p);
  char *body = NULL;
  size_t blen = 0;
  FILE *sv = NULL;
  int y = 0, width = ro0->svg_width > 0 ? ro0->svg_width : 1200, rc = 0;
  if (rfmt == DBUF_REPORT_SVG && (sv = open_memstream(&body, &blen)) == NULL) {
    cli_err("out of memory");
    return CLI_EXIT_FAIL;
  }
  for (int64_t k = 0; k < nb && rc == 0; k++) {
    dbuf_plan_buffer_t b;
    dbuf_report_opts_t ro = *ro0;
    dbuf_diag_t d;
    char *text = NULL;
    size_t len = 0;
    int height = 0;
    dbuf_plan_buffer(p, k, &b);
    ro.elem_size = b.elem_size;
    ro.dtype = dbuf_dtype_name(b.dtype);
    int e = dbuf_report_write(b.layout, rfmt, &ro, &text, &len, &d);
    if (e != 0) {
      cli_err("%s report: buffer %s/%s: %s", dbuf_report_format_name(rfmt), b.unit,
              dbuf_dtype_name(b.dtype), d.msg);
      rc = cli_exit_code(e);
    } else if (sv == NULL) {
      csv_buffer(m, &b, k, text);
    } else {
      fprintf(sv, "<text x=\"8\" y=\"%d\" font-size=\"16\" font-weight=\"bold\">buffer ",
              y + SVG_HEADING - 8);
      xml_text(sv, b.unit);
      fprintf(sv, "/%s</text>\n", dbuf_dtype_name(b.dtype));
      if (svg_buffer(sv, k, text, y + SVG_HEADING, &height) != 0) {
        cli_err("svg report: buffer %s/%s: no picture size", b.unit, dbuf_dtype_name(b.dtype));
        rc = CLI_EXIT_FAIL;
      }
      if (__builtin_add_overflow(y, SVG_HEADING + height, &y)) {
        cli_err("svg report: the picture is too tall");
        rc = CLI_EXIT_USAGE;
      }
    }
    free(text);
  }
  if (sv != NULL) {
    int bad = ferror(sv);
    if (fclose(sv) != 0 || bad) {
      free(body);
      cli_err("out of memory");
      return CLI_EXIT_FAIL;
    }
    if (rc == 0) {
      fprintf(m,
              "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
              "viewBox=\"0 0 %d %d\" font-family=\"DejaVu Sans, Arial, sans-serif\">\n",
              width, y, width, y);
      fwrite(body, 1, blen, m);
      fputs("</svg>\n", m);
    }
    free(body);
  }
  return rc;
}

/* ------------------------------------------------------------------------ */

/* Bytes of training state for e elements of es bytes: parameters,
 * gradients, main weights, moments, total. */
enum { ST_PARAM, ST_GRAD, ST_MAIN, ST_MOM, ST_TOTAL, ST_N };

static int
state_bytes(int state, int64_t e, int64_t es, int64_t v[ST_N])
{
  int bad = __builtin_mul_overflow(e, es, &v[ST_PARAM]);
  v[ST_GRAD] = state == CLI_STATE_NONE ? 0 : v[ST_PARAM];
  v[ST_MAIN] = v[ST_MOM] = 0;
  if (state == CLI_STATE_ADAM)
    bad |= __builtin_mul_overflow(e, 4, &v[ST_MAIN]) | __builtin_mul_overflow(e, 8, &v[ST_MOM]);
  bad |= __builtin_add_overflow(v[ST_PARAM], v[ST_GRAD], &v[ST_TOTAL]);
  bad |= __builtin_add_overflow(v[ST_TOTAL], v[ST_MAIN], &v[ST_TOTAL]);
  bad |= __builtin_add_overflow(v[ST_TOTAL], v[ST_MOM], &v[ST_TOTAL]);
  return bad;
}

static void
state_line(FILE *m, int w, const char *label, const int64_t v[ST_N], const char *tail)
{
  char c[32];
  fprintf(m, "  %-*s", w, label);
  for (int i = 0; i < ST_N; i++)
    fprintf(m, " %16s", dbuf_report_count(c, sizeof c, v[i]));
  fprintf(m, "%s\n", tail);
}

int
cli_plan_state(FILE *m, const dbuf_plan_t *p, int state)
{
  int64_t nb = dbuf_plan_nbuffers(p);
  int nr = dbuf_plan_nranks(p), w = 22, bad = 0; /* "rank 16777215 (most)" */
  int64_t (*per)[ST_N] = calloc((size_t)nr, sizeof *per);
  char label[256], tail[64], h[32];
  if (per == NULL) {
    cli_err("out of memory");
    return CLI_EXIT_FAIL;
  }
  for (int64_t k = 0; k < nb; k++) {
    dbuf_plan_buffer_t b;
    dbuf_plan_buffer(p, k, &b);
    int l = snprintf(label, sizeof label, "%s/%s", b.unit, dbuf_dtype_name(b.dtype));
    w = l > w ? (l > 60 ? 60 : l) : w;
  }
  fprintf(m, "\ntraining state (--state %s), bytes per rank (padding included):\n",
          state == CLI_STATE_ADAM ? "adam" : "sgd");
  fprintf(m, "  %-*s %16s %16s %16s %16s %16s\n", w, "buffer", "parameters", "gradients",
          "main weights", "moments", "total");
  for (int64_t k = 0; k < nb && !bad; k++) {
    dbuf_plan_buffer_t b;
    int64_t v[ST_N], most = 0;
    dbuf_plan_buffer(p, k, &b);
    const int64_t *range = dbuf_layout_range(b.layout);
    for (int r = 0; r < nr && !bad; r++) {
      int64_t e = range[r + 1] - range[r];
      most = e > most ? e : most;
      bad = state_bytes(state, e, b.elem_size, v);
      for (int i = 0; i < ST_N && !bad; i++)
        bad = __builtin_add_overflow(per[r][i], v[i], &per[r][i]);
    }
    bad = bad || state_bytes(state, most, b.elem_size, v);
    snprintf(label, sizeof label, "%s/%s", b.unit, dbuf_dtype_name(b.dtype));
    if (!bad)
      state_line(m, w, label, v, "");
  }
  if (bad) {
    free(per);
    cli_err("--state: %s", dbuf_strerror(DBUF_EOVERFLOW));
    return CLI_EXIT_USAGE;
  }
  int top = 0;
  for (int r = 1; r < nr; r++)
    top = per[r][ST_TOTAL] > per[top][ST_TOTAL] ? r : top;
  snprintf(label, sizeof label, "rank %d (most)", top);
  snprintf(tail, sizeof tail, " (%s)", dbuf_report_bytes(h, sizeof h, per[top][ST_TOTAL]));
  state_line(m, w, label, per[top], per[top][ST_TOTAL] >= 1024 ? tail : "");
  free(per);
  return 0;
}
